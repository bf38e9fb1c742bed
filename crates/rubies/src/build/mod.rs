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
//!
//! `record` holds what a build is made of and leaves behind (the options, the source, the
//! record file), `source` identifies the sources and derives the key, `steps` runs extract,
//! configure, make and install into the log, `check` asks the built interpreter what it
//! is, and `listing` reads the builds of a cache. This module decides where a build goes,
//! whether it is needed, and the name that points at it.

mod check;
mod listing;
mod record;
mod source;
mod steps;

pub use crate::cache::{default_cache_dir, rubies_dir};
pub use listing::{cache_builds, CachedBuild};
pub use record::{read_record, BuildOptions, BuildRecord, SourceRecord, RECORD_FILE, SCHEMA};
pub use source::build_key;
pub use steps::{configure_argv, format_elapsed, remove_missing_bundled_gems, Event};

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use check::check_runs;
use source::identify_source;
use steps::Plan;

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

    let Located {
        source,
        key,
        rubies,
        prefix_name,
        prefix,
    } = locate(request, true)?;
    let short = &key[..12];
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

/// Where a request's build goes: its sources, key and prefix.
struct Located {
    source: SourceRecord,
    key: String,
    /// `<cache>/rubies`, created, canonical.
    rubies: PathBuf,
    prefix_name: String,
    prefix: PathBuf,
}

/// `create`: make `<cache>/rubies` if it is not there (a build does; a lookup does not).
fn locate(request: &BuildRequest, create: bool) -> anyhow::Result<Located> {
    let source = identify_source(&request.source, request.git_ref.as_deref())?;
    let key = build_key(&source, &request.version, &request.options);
    let cache = std::path::absolute(&request.cache)
        .with_context(|| format!("cache directory {}", request.cache.display()))?;
    let rubies = rubies_dir(&cache);
    if create {
        fs::create_dir_all(&rubies)
            .with_context(|| format!("cannot create the cache directory {}", rubies.display()))?;
    }
    let rubies = rubies.canonicalize().unwrap_or(rubies);
    let prefix_name = format!("{}-{}", request.version, &key[..12]);
    let prefix = rubies.join(&prefix_name);
    Ok(Located {
        source,
        key,
        rubies,
        prefix_name,
        prefix,
    })
}

/// The complete build `request` would reuse, if the cache has it; nothing is built. (Its
/// interpreter is not run: [`build`] checks that when it reuses a build.)
pub fn find_built(request: &BuildRequest) -> anyhow::Result<Option<BuildRecord>> {
    let located = locate(request, false)?;
    Ok(read_record(&located.prefix).filter(|r| r.prefix.join("bin/ruby").is_file()))
}

/// Where builds of single commits go (`bisect --ruby-repo`, and `ruby_ref` in an experiment
/// file): `<cache>/commits/rubies`, apart from the Rubies `ruby = "all"` and `rubyrace
/// rubies` offer, which are the ones a person built by name.
pub fn commits_cache(cache: &Path) -> PathBuf {
    cache.join("commits")
}

/// The request for CRuby at `commit` of the git repository `repo` (its top directory), with
/// `configure_opts`, in [`commits_cache`]: one build per commit and options, named
/// `commit-HASH12` (with `-` and the options' key when there are options).
pub fn commit_request(
    cache: &Path,
    repo: &Path,
    commit: &str,
    configure_opts: &[String],
) -> BuildRequest {
    let short = &commit[..12.min(commit.len())];
    let options = BuildOptions {
        yjit: false,
        jemalloc: false,
        configure_opts: configure_opts.to_vec(),
    };
    let name = if configure_opts.is_empty() {
        format!("commit-{short}")
    } else {
        let opts = build_key(
            &SourceRecord::Git {
                path: PathBuf::new(),
                commit: String::new(),
                git_ref: String::new(),
            },
            "",
            &options,
        );
        format!("commit-{short}-{}", &opts[..8])
    };
    BuildRequest {
        version: "commit".into(),
        source: repo.to_path_buf(),
        git_ref: Some(commit.to_string()),
        options,
        jobs: None,
        cache: commits_cache(cache),
        name: Some(name),
        force: false,
    }
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

#[cfg(test)]
mod tests;
