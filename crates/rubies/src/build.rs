//! Ruby builds: CRuby compiled from a release tarball, or from a git source tree at a
//! commit, into rubyrace's cache, each build in a prefix of its own, so that experiments
//! can name Rubies whose options (YJIT, jemalloc, configure flags) are known and recorded.
//!
//! ```text
//! <cache>/rubies/
//!   3.3.8-1a2b3c4d5e6f/             the prefix: bin/ruby, lib/..., and rubyrace-build.json,
//!                                   written last: a prefix without it is an interrupted build
//!   3.3.8-1a2b3c4d5e6f.log          everything extract, configure and make printed
//!   build-1a2b3c4d5e6f/             the sources while building; kept after a failure
//!   3.3.8-jemalloc -> 3.3.8-1a2b3c4d5e6f       the name given to the build (a symlink)
//! ```
//!
//! The 12 hex digits are the start of the build's key: a SHA-256 over the source's
//! identity (the tarball's SHA-256, or the git commit), the version and the options, so the
//! same request finds the same prefix and is not built twice. Every child process is run
//! from an argv (never a shell). Build steps stay in rubyrace's process group, so Ctrl-C
//! stops them too; the interpreter checks at the end run in their own group, with a
//! timeout.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{anyhow, bail, Context};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use crate::cache::{default_cache_dir, rubies_dir};
use sys::environment::git_command;
use sys::process::describe_status;
use sys::process::display_argv;

/// The `schema` of a [`BuildRecord`].
pub const SCHEMA: &str = "rubyrace.ruby-build/1";
/// The record's file name in a prefix. Its presence marks a complete build.
pub const RECORD_FILE: &str = "rubyrace-build.json";
/// Part of every build key: bump it when the way rubyrace builds changes (steps, flags,
/// the bundled-gems rule), so that old builds are not reused for new requests.
const RECIPE: u32 = 1;
/// Lines of the log shown in a failed step's error.
const LOG_TAIL_LINES: usize = 20;
/// How long the built interpreter may take to answer one check.
const CHECK_TIMEOUT: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------------------
// The cache

/// One complete build found in a cache by [`cache_builds`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CachedBuild {
    /// The prefix directory.
    pub prefix: PathBuf,
    /// The names (symlinks in `<cache>/rubies/`) that point at it, sorted.
    pub names: Vec<String>,
    pub record: BuildRecord,
}

impl CachedBuild {
    /// The interpreter, through its first name when it has one (that path follows the
    /// name if it is rebuilt), else in the prefix.
    pub fn ruby(&self) -> PathBuf {
        match self.names.first() {
            Some(name) => self
                .prefix
                .parent()
                .unwrap_or(Path::new("/"))
                .join(name)
                .join("bin/ruby"),
            None => self.prefix.join("bin/ruby"),
        }
    }
}

/// The complete builds of `cache` (prefixes holding a readable record of this schema),
/// sorted by version then name. Interrupted builds, logs and build directories are skipped.
pub fn cache_builds(cache: &Path) -> Vec<CachedBuild> {
    let dir = rubies_dir(cache);
    let Ok(entries) = fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut builds: Vec<CachedBuild> = Vec::new();
    let mut links: Vec<(String, PathBuf)> = Vec::new();
    for entry in entries.flatten() {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        if file_name.starts_with('.') {
            continue;
        }
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_symlink() {
            if let Ok(target) = fs::read_link(entry.path()) {
                links.push((file_name, dir.join(target)));
            }
            continue;
        }
        if !kind.is_dir() {
            continue;
        }
        let Some(record) = read_record(&entry.path()) else {
            continue;
        };
        builds.push(CachedBuild {
            prefix: entry.path(),
            names: Vec::new(),
            record,
        });
    }
    for (name, target) in links {
        let target = target.canonicalize().unwrap_or(target);
        if let Some(build) = builds
            .iter_mut()
            .find(|b| b.prefix.canonicalize().as_ref().unwrap_or(&b.prefix) == &target)
        {
            build.names.push(name);
        }
    }
    for b in &mut builds {
        b.names.sort();
    }
    builds.sort_by(|a, b| {
        a.record
            .version
            .cmp(&b.record.version)
            .then_with(|| a.names.cmp(&b.names))
            .then_with(|| a.prefix.cmp(&b.prefix))
    });
    builds
}

/// The record of the prefix `prefix`, if it has a readable one of this schema.
pub fn read_record(prefix: &Path) -> Option<BuildRecord> {
    let text = fs::read_to_string(prefix.join(RECORD_FILE)).ok()?;
    let record: BuildRecord = serde_json::from_str(&text).ok()?;
    (record.schema == SCHEMA).then_some(record)
}

// ---------------------------------------------------------------------------------------
// Requests and records

/// What is built into the interpreter; part of the build key.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BuildOptions {
    /// `--enable-yjit` (needs rustc at configure time).
    pub yjit: bool,
    /// `--with-jemalloc` (needs jemalloc's headers and library).
    pub jemalloc: bool,
    /// More arguments for `./configure`, in the order given.
    pub configure_opts: Vec<String>,
}

/// Where the sources came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum SourceRecord {
    /// A release tarball, identified by the SHA-256 of its bytes.
    Tarball { path: PathBuf, sha256: String },
    /// A commit of a git repository; `ref` is what was asked for (`HEAD` by default).
    Git {
        path: PathBuf,
        commit: String,
        #[serde(rename = "ref")]
        git_ref: String,
    },
}

impl SourceRecord {
    /// What identifies the sources in the build key (not the path: the same tarball or
    /// commit elsewhere is the same build).
    fn identity(&self) -> String {
        match self {
            SourceRecord::Tarball { sha256, .. } => format!("tarball:sha256:{sha256}"),
            SourceRecord::Git { commit, .. } => format!("git:{commit}"),
        }
    }

    /// One line for people: "tarball PATH (sha256 1a2b...)", "git PATH at REF (commit ...)".
    pub fn describe(&self) -> String {
        match self {
            SourceRecord::Tarball { path, sha256 } => format!(
                "tarball {} (sha256 {})",
                path.display(),
                &sha256[..sha256.len().min(12)]
            ),
            SourceRecord::Git {
                path,
                commit,
                git_ref,
            } => format!(
                "git {} at {git_ref} (commit {})",
                path.display(),
                &commit[..commit.len().min(12)]
            ),
        }
    }
}

/// `<prefix>/rubyrace-build.json`: what was built, from what, how, and what the result
/// says it is. Written last, so its presence marks a complete build.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BuildRecord {
    /// [`SCHEMA`].
    pub schema: String,
    /// The VERSION given to `rubyrace ruby build`.
    pub version: String,
    /// The name the build was made under (later builds may add other names).
    pub name: String,
    /// The build key (SHA-256, hex); the prefix ends with its first 12 digits.
    pub key: String,
    pub prefix: PathBuf,
    pub source: SourceRecord,
    pub options: BuildOptions,
    /// The whole `./configure` argv, as run in the source directory.
    pub configure_argv: Vec<String>,
    /// `make -j` value.
    pub jobs: usize,
    /// Bundled gems dropped from `gems/bundled_gems` because their `.gem` files were not in
    /// the sources ("name version"); empty when nothing was dropped.
    pub bundled_gems_removed: Vec<String>,
    /// `RUBY_DESCRIPTION` of the built interpreter (without `--yjit`).
    pub ruby_description: String,
    /// `RbConfig::CONFIG["MAINLIBS"]`.
    pub mainlibs: String,
    /// The build log.
    pub log: PathBuf,
    /// When the build finished (RFC 3339, UTC).
    pub built_at: String,
    pub build_seconds: f64,
    pub rubyrace_version: String,
}

/// What to build; see [`build`].
#[derive(Clone, Debug, PartialEq)]
pub struct BuildRequest {
    /// A label for the build: the start of the prefix and of the default name ("3.3.8",
    /// "3.4-dev"). Not checked against the sources.
    pub version: String,
    /// A release tarball, or the top directory of a git work tree (or a bare repository).
    pub source: PathBuf,
    /// For a git source: the commit to build (a branch, tag or hash). None means `HEAD`,
    /// of a work tree without uncommitted changes.
    pub git_ref: Option<String>,
    pub options: BuildOptions,
    /// `make -j`; None means the number of CPUs.
    pub jobs: Option<usize>,
    /// rubyrace's cache directory ([`default_cache_dir`]).
    pub cache: PathBuf,
    /// The symlink's name; None means [`default_name`].
    pub name: Option<String>,
    /// Rebuild even if a complete build of this key exists.
    pub force: bool,
}

/// `<VERSION>[-yjit][-jemalloc]`.
pub fn default_name(version: &str, options: &BuildOptions) -> String {
    let mut name = version.to_string();
    if options.yjit {
        name.push_str("-yjit");
    }
    if options.jemalloc {
        name.push_str("-jemalloc");
    }
    name
}

/// The build key: SHA-256 (hex) of a JSON object with sorted keys holding the recipe
/// version, the source's identity, the version and the options. The configure options keep
/// their order (a later option can override an earlier one).
pub fn build_key(source: &SourceRecord, version: &str, options: &BuildOptions) -> String {
    // serde_json's maps are sorted by key.
    let material = serde_json::json!({
        "recipe": RECIPE,
        "source": source.identity(),
        "version": version,
        "yjit": options.yjit,
        "jemalloc": options.jemalloc,
        "configure_opts": options.configure_opts,
    });
    hex(&Sha256::digest(material.to_string().as_bytes()))
}

/// The `./configure` argv for a prefix and options.
pub fn configure_argv(prefix: &Path, options: &BuildOptions) -> Vec<String> {
    let mut argv = vec![
        "./configure".to_string(),
        format!("--prefix={}", prefix.display()),
        "--disable-install-doc".to_string(),
    ];
    if options.yjit {
        argv.push("--enable-yjit".into());
    }
    if options.jemalloc {
        argv.push("--with-jemalloc".into());
    }
    argv.extend(options.configure_opts.iter().cloned());
    argv
}

/// What [`build`] reports while it works.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A step begins: "extract", "configure", "make -j8", "install", "check".
    Step(String),
    /// The step begun last succeeded after this long.
    StepDone(Duration),
    /// Something worth a line of its own.
    Note(String),
}

/// What [`build`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct BuildOutcome {
    pub record: BuildRecord,
    /// A complete build of this key was already there.
    pub reused: bool,
    /// The name given this time, and its symlink (`<cache>/rubies/<name>`).
    pub name: String,
    pub link: PathBuf,
}

impl BuildOutcome {
    /// The interpreter through the name's symlink.
    pub fn ruby(&self) -> PathBuf {
        self.link.join("bin/ruby")
    }
}

// ---------------------------------------------------------------------------------------
// Building

/// Builds (or finds) the Ruby `request` asks for; see the module documentation for the
/// layout. On a failed step the error names the step, its exit status, the log and the
/// log's last lines; the incomplete prefix is removed and the sources are kept.
pub fn build(
    request: &BuildRequest,
    events: &mut dyn FnMut(Event),
) -> anyhow::Result<BuildOutcome> {
    check_label("version", &request.version)?;
    let name = request
        .name
        .clone()
        .unwrap_or_else(|| default_name(&request.version, &request.options));
    check_label("name", &name)?;
    if name.starts_with("build-") || name.ends_with(".log") {
        bail!("--name `{name}`: names starting with `build-` or ending in `.log` are rubyrace's own files in the cache");
    }
    if let Some(j) = request.jobs {
        if j == 0 {
            bail!("--jobs must be at least 1");
        }
    }

    let source = identify_source(&request.source, request.git_ref.as_deref())?;
    let key = build_key(&source, &request.version, &request.options);
    let short = &key[..12];

    let cache = std::path::absolute(&request.cache)
        .with_context(|| format!("cache directory {}", request.cache.display()))?;
    let rubies = rubies_dir(&cache);
    fs::create_dir_all(&rubies)
        .with_context(|| format!("cannot create the cache directory {}", rubies.display()))?;
    let rubies = rubies.canonicalize().unwrap_or(rubies);
    let prefix_name = format!("{}-{short}", request.version);
    let prefix = rubies.join(&prefix_name);
    let link = rubies.join(&name);
    if name == prefix_name {
        bail!("--name `{name}` is the name of the build's own directory; choose another");
    }
    check_link_free(&link)?;

    let _lock = lock(&rubies.join(format!(".build-{short}.lock")))?;

    if prefix.exists() {
        let has_record_file = prefix.join(RECORD_FILE).exists();
        match read_record(&prefix) {
            _ if request.force => events(Event::Note(format!(
                "--force: removing {} and rebuilding",
                prefix.display()
            ))),
            Some(record) => match check_runs(&prefix.join("bin/ruby")) {
                Ok(_) => {
                    point_link(&link, &prefix_name, events)?;
                    return Ok(BuildOutcome {
                        record,
                        reused: true,
                        name,
                        link,
                    });
                }
                Err(e) => events(Event::Note(format!(
                    "{} has a record but its Ruby does not run ({e:#}): rebuilding",
                    prefix.display()
                ))),
            },
            None if has_record_file => bail!(
                "{} is not a readable {SCHEMA} record (another rubyrace's build?); leaving \
                 {} alone: pass --force to rebuild it",
                prefix.join(RECORD_FILE).display(),
                prefix.display()
            ),
            None => events(Event::Note(format!(
                "{} has no {RECORD_FILE} (an interrupted build): removing it and rebuilding",
                prefix.display()
            ))),
        }
        fs::remove_dir_all(&prefix)
            .with_context(|| format!("cannot remove {}", prefix.display()))?;
    }

    let plan = Plan {
        version: request.version.clone(),
        name: name.clone(),
        key: key.clone(),
        source,
        options: request.options.clone(),
        jobs: request.jobs.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        }),
        build_dir: rubies.join(format!("build-{short}")),
        log: rubies.join(format!("{prefix_name}.log")),
        prefix: prefix.clone(),
    };
    let record = match plan.run(events) {
        Ok(record) => record,
        Err(e) => {
            let _ = fs::remove_dir_all(&prefix);
            return Err(e);
        }
    };
    let _ = fs::remove_dir_all(&plan.build_dir);
    point_link(&link, &prefix_name, events)?;
    Ok(BuildOutcome {
        record,
        reused: false,
        name,
        link,
    })
}

/// Versions and names become file names and TOML keys: letters, digits, `.`, `_`, `+`,
/// `-`, starting with a letter or digit.
fn check_label(what: &str, label: &str) -> anyhow::Result<()> {
    let ok = label
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && label
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c))
        && label.len() <= 100;
    if !ok {
        bail!("{what} `{label}`: use letters, digits, `.`, `_`, `+` and `-`, starting with a letter or digit");
    }
    Ok(())
}

/// The name's symlink may be replaced; anything else of that name may not.
fn check_link_free(link: &Path) -> anyhow::Result<()> {
    match fs::symlink_metadata(link) {
        Ok(meta) if !meta.file_type().is_symlink() => bail!(
            "{} exists and is not a name rubyrace made (a symlink); choose another --name",
            link.display()
        ),
        _ => Ok(()),
    }
}

/// Makes `link` a symlink to `target` (a sibling's name), replacing it atomically.
fn point_link(link: &Path, target: &str, events: &mut dyn FnMut(Event)) -> anyhow::Result<()> {
    check_link_free(link)?;
    let previous = fs::read_link(link).ok();
    if previous.as_deref() == Some(Path::new(target)) {
        return Ok(());
    }
    let dir = link.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".link-{}-{}", std::process::id(), target));
    let _ = fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp)
        .with_context(|| format!("cannot create the symlink {}", tmp.display()))?;
    fs::rename(&tmp, link).with_context(|| {
        let _ = fs::remove_file(&tmp);
        format!("cannot create the symlink {}", link.display())
    })?;
    if let Some(previous) = previous {
        events(Event::Note(format!(
            "{} now points to {target} (it pointed to {})",
            link.display(),
            previous.display()
        )));
    }
    Ok(())
}

/// An exclusive lock on `path` (flock), held while the returned file is open: two
/// rubyraces never build the same key at once.
fn lock(path: &Path) -> anyhow::Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("cannot open the lock file {}", path.display()))?;
    // SAFETY: flock(2) on a descriptor we own; it touches no memory.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
            bail!(
                "another rubyrace is building this Ruby right now (lock {})",
                path.display()
            );
        }
        bail!("cannot lock {}: {err}", path.display());
    }
    Ok(file)
}

/// Identifies the sources: a file is a tarball (its SHA-256); a directory is a git
/// repository at `git_ref`, or at `HEAD` of a clean work tree when no ref is given.
fn identify_source(path: &Path, git_ref: Option<&str>) -> anyhow::Result<SourceRecord> {
    let meta = fs::metadata(path).with_context(|| format!("source {}", path.display()))?;
    let path = path
        .canonicalize()
        .with_context(|| format!("source {}", path.display()))?;
    if meta.is_file() {
        if git_ref.is_some() {
            bail!(
                "--ref is for a git source directory; {} is a file (a tarball)",
                path.display()
            );
        }
        let sha256 = sha256_file(&path)
            .with_context(|| format!("cannot read the tarball {}", path.display()))?;
        return Ok(SourceRecord::Tarball { path, sha256 });
    }
    if !meta.is_dir() {
        bail!(
            "source {} is neither a file nor a directory",
            path.display()
        );
    }

    let bare = git(&path, &["rev-parse", "--is-bare-repository"]).map_err(|e| {
        anyhow!(
            "source {} is a directory but not a git repository ({e}). rubyrace builds a \
             directory only from a git commit, which identifies its content: commit it \
             (`git init && git add -A && git commit`), or pass a release tarball",
            path.display()
        )
    })?;
    if bare != "true" {
        let top = git(&path, &["rev-parse", "--show-toplevel"])?;
        let top = PathBuf::from(top);
        if top.canonicalize().unwrap_or(top.clone()) != path {
            bail!(
                "source {} is inside the git repository {}: pass the repository's top \
                 directory",
                path.display(),
                top.display()
            );
        }
    }
    let wanted = match git_ref {
        Some(r) => {
            if r.is_empty() || r.starts_with('-') {
                bail!("--ref `{r}` is not a git revision");
            }
            r.to_string()
        }
        None => {
            if bare == "true" {
                "HEAD".to_string()
            } else {
                let status = git(&path, &["status", "--porcelain"])?;
                if !status.is_empty() {
                    let shown: Vec<&str> = status.lines().take(5).collect();
                    bail!(
                        "{} has uncommitted changes ({}{}); commit them, or pass --ref to \
                         build a commit",
                        path.display(),
                        shown.join(", "),
                        if status.lines().count() > 5 {
                            ", ..."
                        } else {
                            ""
                        }
                    );
                }
                "HEAD".to_string()
            }
        }
    };
    let commit = git(
        &path,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{wanted}^{{commit}}"),
        ],
    )
    .map_err(|_| {
        anyhow!(
            "`{wanted}` is not a commit of the git repository {}",
            path.display()
        )
    })?;
    Ok(SourceRecord::Git {
        path,
        commit,
        git_ref: wanted,
    })
}

/// `git -C dir ARGS`: its trimmed stdout, or an error with its stderr.
fn git(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = git_command(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| anyhow!("could not run git: {e}"))?;
    if !out.status.success() {
        bail!(
            "`git -C {} {}` {}: {}",
            dir.display(),
            args.join(" "),
            describe_status(out.status),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn sha256_file(path: &Path) -> io::Result<String> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Everything decided before the first step.
struct Plan {
    version: String,
    name: String,
    key: String,
    source: SourceRecord,
    options: BuildOptions,
    jobs: usize,
    prefix: PathBuf,
    build_dir: PathBuf,
    log: PathBuf,
}

impl Plan {
    fn run(&self, events: &mut dyn FnMut(Event)) -> anyhow::Result<BuildRecord> {
        let started = Instant::now();
        if self.build_dir.exists() {
            fs::remove_dir_all(&self.build_dir)
                .with_context(|| format!("cannot remove {}", self.build_dir.display()))?;
        }
        fs::create_dir_all(&self.build_dir)
            .with_context(|| format!("cannot create {}", self.build_dir.display()))?;
        // Every write to the log goes through a handle in append mode (children too), so
        // nothing overwrites anything.
        File::create(&self.log)
            .with_context(|| format!("cannot create the log {}", self.log.display()))?;
        let mut log = self.open_log()?;
        writeln!(
            log,
            "rubyrace {} ruby build {} (key {})\nsource: {}\noptions: {}\nprefix: {}\nstarted: {}",
            env!("CARGO_PKG_VERSION"),
            self.version,
            self.key,
            self.source.describe(),
            serde_json::to_string(&self.options)?,
            self.prefix.display(),
            humantime::format_rfc3339_seconds(SystemTime::now())
        )?;
        drop(log);

        events(Event::Step("extract".into()));
        let t = Instant::now();
        self.extract()?;
        events(Event::StepDone(t.elapsed()));

        let src = &self.build_dir;
        if !src.join("configure").is_file() {
            let (step, argv): (&str, Vec<&str>) = if src.join("autogen.sh").is_file() {
                ("autogen", vec!["./autogen.sh"])
            } else {
                ("autoconf", vec!["autoconf"])
            };
            if !src.join("configure.ac").is_file() && !src.join("autogen.sh").is_file() {
                bail!(
                    "{} does not look like a Ruby source tree: neither `configure` nor \
                     `configure.ac` at its top (a tarball is extracted with one directory \
                     level stripped); kept in {}",
                    self.source.describe(),
                    src.display()
                );
            }
            self.step(step, &argv, events)?;
            if !src.join("configure").is_file() {
                bail!(
                    "{step} did not create `configure` in {} (see {})",
                    src.display(),
                    self.log.display()
                );
            }
        }

        let removed = remove_missing_bundled_gems(src).with_context(|| {
            format!("cannot rewrite {}", src.join("gems/bundled_gems").display())
        })?;
        if !removed.is_empty() {
            let note = format!(
                "gems/ has no .gem files, so `make install` would download the bundled gems: \
                 gems/bundled_gems rewritten without them ({} not installed: {})",
                removed.len(),
                removed
                    .iter()
                    .map(|g| g.split_whitespace().next().unwrap_or(g))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            writeln!(self.open_log()?, "\n==> {note}")?;
            events(Event::Note(note));
        }

        let configure = configure_argv(&self.prefix, &self.options);
        let configure_refs: Vec<&str> = configure.iter().map(String::as_str).collect();
        self.step("configure", &configure_refs, events)?;
        let jobs = format!("-j{}", self.jobs);
        self.step(&format!("make {jobs}"), &["make", &jobs], events)?;
        self.step("install", &["make", "install"], events)?;

        events(Event::Step("check".into()));
        let t = Instant::now();
        let (description, mainlibs) = self.check().map_err(|e| {
            anyhow!(
                "check failed: {e:#}\nLog: {}\nSources kept in {}",
                self.log.display(),
                self.build_dir.display()
            )
        })?;
        events(Event::StepDone(t.elapsed()));

        let record = BuildRecord {
            schema: SCHEMA.to_string(),
            version: self.version.clone(),
            name: self.name.clone(),
            key: self.key.clone(),
            prefix: self.prefix.clone(),
            source: self.source.clone(),
            options: self.options.clone(),
            configure_argv: configure,
            jobs: self.jobs,
            bundled_gems_removed: removed,
            ruby_description: description,
            mainlibs,
            log: self.log.clone(),
            built_at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
            build_seconds: (started.elapsed().as_secs_f64() * 10.0).round() / 10.0,
            rubyrace_version: env!("CARGO_PKG_VERSION").to_string(),
        };
        let tmp = self.prefix.join(format!("{RECORD_FILE}.tmp"));
        fs::write(&tmp, serde_json::to_string_pretty(&record)? + "\n")
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        fs::rename(&tmp, self.prefix.join(RECORD_FILE))
            .with_context(|| format!("cannot write {}", self.prefix.join(RECORD_FILE).display()))?;
        Ok(record)
    }

    /// Unpacks the sources into the (empty) build directory.
    fn extract(&self) -> anyhow::Result<()> {
        let log = self.open_log()?;
        let started = Instant::now();
        let fail = |what: String| self.failure("extract", &what, started.elapsed());
        match &self.source {
            SourceRecord::Tarball { path, .. } => {
                let argv: Vec<OsString> = vec![
                    "tar".into(),
                    "-xf".into(),
                    path.into(),
                    "-C".into(),
                    self.build_dir.clone().into(),
                    "--strip-components=1".into(),
                ];
                self.log_argv(&argv)?;
                let status = Command::new(&argv[0])
                    .args(&argv[1..])
                    .stdin(Stdio::null())
                    .stdout(log.try_clone()?)
                    .stderr(log)
                    .status()
                    .map_err(|e| fail(format!("could not run tar: {e}")))?;
                if !status.success() {
                    return Err(fail(format!("`tar -xf` {}", describe_status(status))));
                }
            }
            SourceRecord::Git { path, commit, .. } => {
                // git archive | tar -x: two processes and a pipe, no shell.
                let git_argv: Vec<OsString> = vec![
                    "git".into(),
                    "-C".into(),
                    path.into(),
                    "archive".into(),
                    "--format=tar".into(),
                    commit.into(),
                ];
                let tar_argv: Vec<OsString> = vec![
                    "tar".into(),
                    "-x".into(),
                    "-C".into(),
                    self.build_dir.clone().into(),
                ];
                self.log_argv(&git_argv)?;
                self.log_argv(&tar_argv)?;
                let mut archive = git_command(path)
                    .args(&git_argv[3..])
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(log.try_clone()?)
                    .spawn()
                    .map_err(|e| fail(format!("could not run git: {e}")))?;
                let pipe = archive.stdout.take().expect("piped stdout");
                // The Command (holding our copy of the pipe) is dropped at the end of the
                // statement, so git sees a broken pipe if tar dies.
                let tar = Command::new(&tar_argv[0])
                    .args(&tar_argv[1..])
                    .stdin(Stdio::from(pipe))
                    .stdout(log.try_clone()?)
                    .stderr(log)
                    .spawn();
                let mut tar = match tar {
                    Ok(t) => t,
                    Err(e) => {
                        let _ = archive.kill();
                        let _ = archive.wait();
                        return Err(fail(format!("could not run tar: {e}")));
                    }
                };
                let tar_status = tar.wait()?;
                let git_status = archive.wait()?;
                if !git_status.success() {
                    return Err(fail(format!(
                        "`git archive` {}",
                        describe_status(git_status)
                    )));
                }
                if !tar_status.success() {
                    return Err(fail(format!("`tar -x` {}", describe_status(tar_status))));
                }
            }
        }
        Ok(())
    }

    /// Runs one build step in the source directory, its output appended to the log.
    fn step(&self, step: &str, argv: &[&str], events: &mut dyn FnMut(Event)) -> anyhow::Result<()> {
        events(Event::Step(step.to_string()));
        let argv_os: Vec<OsString> = argv.iter().map(OsString::from).collect();
        self.log_argv(&argv_os)?;
        let log = self.open_log()?;
        let started = Instant::now();
        let status = Command::new(argv[0])
            .args(&argv[1..])
            .current_dir(&self.build_dir)
            // The build's own Ruby scripts run on the system Ruby (BASERUBY): keep the
            // caller's Ruby settings out of them; and an outer make's flags (rubyrace run
            // from a Makefile) out of this make.
            .env_remove("RUBYOPT")
            .env_remove("RUBYLIB")
            .env_remove("MAKEFLAGS")
            .env_remove("MFLAGS")
            .env_remove("MAKELEVEL")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .status();
        let elapsed = started.elapsed();
        match status {
            Ok(status) if status.success() => {
                events(Event::StepDone(elapsed));
                Ok(())
            }
            Ok(status) => Err(self.failure(step, &describe_status(status), elapsed)),
            Err(e) => {
                Err(self.failure(step, &format!("could not run `{}`: {e}", argv[0]), elapsed))
            }
        }
    }

    fn open_log(&self) -> anyhow::Result<File> {
        OpenOptions::new()
            .append(true)
            .open(&self.log)
            .with_context(|| format!("cannot open the log {}", self.log.display()))
    }

    fn log_argv(&self, argv: &[OsString]) -> anyhow::Result<()> {
        let mut log = self.open_log()?;
        writeln!(log, "\n==> {}", display_argv(argv))?;
        Ok(())
    }

    /// The error of a failed step: what failed and how, where the log and the sources are,
    /// and the end of the log.
    fn failure(&self, step: &str, how: &str, elapsed: Duration) -> anyhow::Error {
        let tail = sys::process::tail_file(&self.log, 64 * 1024);
        let lines: Vec<&str> = tail.lines().collect();
        let last: Vec<String> = lines[lines.len().saturating_sub(LOG_TAIL_LINES)..]
            .iter()
            .map(|l| format!("  | {l}"))
            .collect();
        anyhow!(
            "{step} failed ({how}) after {}.\nLog: {}\nSources and build products kept in {} \
             (removed by the next build of the same key)\nLast {} lines of the log:\n{}",
            format_elapsed(elapsed),
            self.log.display(),
            self.build_dir.display(),
            last.len(),
            last.join("\n")
        )
    }

    /// Asks the installed interpreter what it is, and checks that the options took:
    /// `--yjit` must turn YJIT on, `--with-jemalloc` must show in MAINLIBS.
    fn check(&self) -> anyhow::Result<(String, String)> {
        let ruby = self.prefix.join("bin/ruby");
        if !ruby.is_file() {
            bail!("`make install` left no {}", ruby.display());
        }
        let description = check_runs(&ruby)?;
        let mainlibs = ask(
            &ruby,
            &["-rrbconfig", "-e", r#"print RbConfig::CONFIG["MAINLIBS"]"#],
        )?;
        if self.options.yjit {
            let enabled = ask(&ruby, &["--yjit", "-e", "print RubyVM::YJIT.enabled?"])?;
            if enabled.trim() != "true" {
                bail!(
                    "built with --enable-yjit, but `{} --yjit` says YJIT enabled? is {:?} \
                     (configure needs rustc; see its output in the log)",
                    ruby.display(),
                    enabled.trim()
                );
            }
        }
        if self.options.jemalloc && !mainlibs.contains("jemalloc") {
            bail!(
                "built with --with-jemalloc, but RbConfig::CONFIG[\"MAINLIBS\"] is {:?}, \
                 without jemalloc",
                mainlibs.trim()
            );
        }
        Ok((description, mainlibs.trim().to_string()))
    }
}

/// Runs `ruby -e 'print RUBY_DESCRIPTION'`: the description, or why it does not run.
fn check_runs(ruby: &Path) -> anyhow::Result<String> {
    let description = ask(ruby, &["-e", "print RUBY_DESCRIPTION"])?;
    let description = description.trim().to_string();
    if description.is_empty() {
        bail!(
            "`{} -e 'print RUBY_DESCRIPTION'` printed nothing",
            ruby.display()
        );
    }
    Ok(description)
}

/// Runs `ruby ARGS` (in its own process group, without the caller's RUBYOPT/RUBYLIB,
/// killed after [`CHECK_TIMEOUT`]) and returns its stdout.
fn ask(ruby: &Path, args: &[&str]) -> anyhow::Result<String> {
    let mut argv: Vec<OsString> = vec![ruby.into()];
    argv.extend(args.iter().map(OsString::from));
    let shown = display_argv(&argv);
    let child = Command::new(ruby)
        .args(args)
        .env_remove("RUBYOPT")
        .env_remove("RUBYLIB")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| anyhow!("could not run `{shown}`: {e}"))?;
    let pgid = child.id() as libc::pid_t;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(CHECK_TIMEOUT) {
        Ok(out) => out,
        Err(_) => {
            // The process group created for this child (not reaped yet, so the id cannot
            // have been reused).
            sys::process::kill_group(pgid);
            let _ = rx.recv();
            bail!(
                "`{shown}` did not answer within {} s",
                CHECK_TIMEOUT.as_secs()
            );
        }
    }
    .map_err(|e| anyhow!("`{shown}`: {e}"))?;
    if !out.status.success() {
        bail!(
            "`{shown}` {}: {}",
            describe_status(out.status),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// When `gems/bundled_gems` lists gems but `gems/` holds no `.gem` file (Debian's release
/// tarballs), `make install` would download them: the list is rewritten keeping only its
/// comment and blank lines. Returns the removed entries ("name version"), or nothing when
/// the list was left alone.
pub fn remove_missing_bundled_gems(src: &Path) -> io::Result<Vec<String>> {
    let gems = src.join("gems");
    let list = gems.join("bundled_gems");
    if !list.is_file() {
        return Ok(Vec::new());
    }
    let has_gem_files = fs::read_dir(&gems)?
        .flatten()
        .any(|e| e.path().extension() == Some(OsStr::new("gem")));
    if has_gem_files {
        return Ok(Vec::new());
    }
    let text = fs::read_to_string(&list)?;
    let mut kept = String::new();
    let mut removed = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            kept.push_str(line);
            kept.push('\n');
        } else {
            let mut words = trimmed.split_whitespace();
            let entry = match (words.next(), words.next()) {
                (Some(n), Some(v)) => format!("{n} {v}"),
                (Some(n), None) => n.to_string(),
                _ => trimmed.to_string(),
            };
            removed.push(entry);
        }
    }
    if !removed.is_empty() {
        fs::write(&list, kept)?;
    }
    Ok(removed)
}

/// "0.4 s", "42.0 s", "3m07s".
pub fn format_elapsed(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 60.0 {
        format!("{s:.1} s")
    } else {
        let whole = d.as_secs();
        format!("{}m{:02}s", whole / 60, whole % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tarball(sha: &str) -> SourceRecord {
        SourceRecord::Tarball {
            path: PathBuf::from("/x.tar.gz"),
            sha256: sha.into(),
        }
    }

    #[test]
    fn the_key_depends_on_content_version_and_options_not_on_paths() {
        let opts = BuildOptions::default();
        let base = build_key(&tarball("aa"), "3.3.8", &opts);
        assert_eq!(base.len(), 64);
        assert_eq!(base, build_key(&tarball("aa"), "3.3.8", &opts), "stable");
        let elsewhere = SourceRecord::Tarball {
            path: PathBuf::from("/elsewhere/y.tar.xz"),
            sha256: "aa".into(),
        };
        assert_eq!(base, build_key(&elsewhere, "3.3.8", &opts));

        let mut keys = vec![
            base.clone(),
            build_key(&tarball("ab"), "3.3.8", &opts),
            build_key(&tarball("aa"), "3.3.9", &opts),
            build_key(
                &SourceRecord::Git {
                    path: PathBuf::from("/x"),
                    commit: "aa".into(),
                    git_ref: "HEAD".into(),
                },
                "3.3.8",
                &opts,
            ),
        ];
        for o in [
            BuildOptions {
                yjit: true,
                ..opts.clone()
            },
            BuildOptions {
                jemalloc: true,
                ..opts.clone()
            },
            BuildOptions {
                configure_opts: vec!["--a".into(), "--b".into()],
                ..opts.clone()
            },
            BuildOptions {
                configure_opts: vec!["--b".into(), "--a".into()],
                ..opts.clone()
            },
        ] {
            keys.push(build_key(&tarball("aa"), "3.3.8", &o));
        }
        let n = keys.len();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), n, "every difference gives another key");
    }

    #[test]
    fn names_and_configure_argv() {
        let o = BuildOptions {
            yjit: true,
            jemalloc: true,
            configure_opts: vec!["CFLAGS=-O3 -g".into()],
        };
        assert_eq!(default_name("3.3.8", &o), "3.3.8-yjit-jemalloc");
        assert_eq!(default_name("3.3.8", &BuildOptions::default()), "3.3.8");
        assert_eq!(
            configure_argv(Path::new("/c/p"), &o),
            [
                "./configure",
                "--prefix=/c/p",
                "--disable-install-doc",
                "--enable-yjit",
                "--with-jemalloc",
                "CFLAGS=-O3 -g"
            ]
        );
        assert!(check_label("v", "3.3.8").is_ok());
        assert!(check_label("v", "3.4.0-preview1+x_y").is_ok());
        for bad in ["", ".", "../x", "a/b", "-x", "a b", "é"] {
            assert!(check_label("v", bad).is_err(), "{bad:?}");
        }
        assert_eq!(format_elapsed(Duration::from_millis(420)), "0.4 s");
        assert_eq!(format_elapsed(Duration::from_secs(187)), "3m07s");
    }

    #[test]
    fn bundled_gems_are_dropped_only_without_gem_files() {
        let tmp = tempfile::Builder::new()
            .prefix("bundled-gems")
            .tempdir()
            .unwrap();
        let gems = tmp.path().join("gems");
        fs::create_dir_all(&gems).unwrap();
        let list = "# gem-name version repository-url\n\nminitest 5.20.0 https://x\n  # indented\nrake    13.1.0  https://y rev\n";
        fs::write(gems.join("bundled_gems"), list).unwrap();

        fs::write(gems.join("rake-13.1.0.gem"), "").unwrap();
        assert!(remove_missing_bundled_gems(tmp.path()).unwrap().is_empty());
        assert_eq!(fs::read_to_string(gems.join("bundled_gems")).unwrap(), list);

        fs::remove_file(gems.join("rake-13.1.0.gem")).unwrap();
        assert_eq!(
            remove_missing_bundled_gems(tmp.path()).unwrap(),
            ["minitest 5.20.0", "rake 13.1.0"]
        );
        assert_eq!(
            fs::read_to_string(gems.join("bundled_gems")).unwrap(),
            "# gem-name version repository-url\n\n  # indented\n"
        );
        assert!(
            remove_missing_bundled_gems(tmp.path()).unwrap().is_empty(),
            "idempotent"
        );
        assert!(remove_missing_bundled_gems(&tmp.path().join("nowhere"))
            .unwrap()
            .is_empty());
    }

    #[test]
    fn records_round_trip_with_the_documented_field_names() {
        let record = BuildRecord {
            schema: SCHEMA.into(),
            version: "3.3.8".into(),
            name: "3.3.8".into(),
            key: "k".into(),
            prefix: PathBuf::from("/c/rubies/3.3.8-k"),
            source: SourceRecord::Git {
                path: PathBuf::from("/src"),
                commit: "c0ffee".into(),
                git_ref: "v3_3_8".into(),
            },
            options: BuildOptions::default(),
            configure_argv: vec!["./configure".into()],
            jobs: 2,
            bundled_gems_removed: vec![],
            ruby_description: "ruby 3.3.8".into(),
            mainlibs: "-lm".into(),
            log: PathBuf::from("/c/rubies/3.3.8-k.log"),
            built_at: "2025-01-01T00:00:00Z".into(),
            build_seconds: 1.5,
            rubyrace_version: "0.1.0".into(),
        };
        let value = serde_json::to_value(&record).unwrap();
        assert_eq!(value["source"]["kind"], "git");
        assert_eq!(value["source"]["ref"], "v3_3_8");
        assert_eq!(value["source"]["commit"], "c0ffee");
        assert_eq!(value["options"]["yjit"], false);
        let back: BuildRecord = serde_json::from_value(value).unwrap();
        assert_eq!(back, record);
    }
}
