//! The steps of a build, run in the build directory with their output appended to the
//! build's log: extract (tar, or `git archive | tar`), autogen/autoconf when the sources
//! have no `configure`, the bundled-gems rule, configure, make, install, the check of the
//! result, and the record written last. A failed step's error ends with the log's last lines.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{anyhow, bail, Context};
use sys::environment::git_command;
use sys::process::{describe_status, display_argv};

use super::check::{ask, check_runs};
use super::record::{BuildOptions, BuildRecord, SourceRecord, RECORD_FILE, SCHEMA};

/// Lines of the log shown in a failed step's error.
const LOG_TAIL_LINES: usize = 20;

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

/// What [`build`](super::build) reports while it works.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A step begins: "extract", "configure", "make -j8", "install", "check".
    Step(String),
    /// The step begun last succeeded after this long.
    StepDone(Duration),
    /// Something worth a line of its own.
    Note(String),
}

/// Everything decided before the first step.
pub(super) struct Plan {
    pub(super) version: String,
    pub(super) name: String,
    pub(super) key: String,
    pub(super) source: SourceRecord,
    pub(super) options: BuildOptions,
    pub(super) jobs: usize,
    pub(super) prefix: PathBuf,
    pub(super) build_dir: PathBuf,
    pub(super) log: PathBuf,
}

impl Plan {
    pub(super) fn run(&self, events: &mut dyn FnMut(Event)) -> anyhow::Result<BuildRecord> {
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
