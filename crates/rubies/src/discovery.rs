//! Which Rubies are installed here, and what each one says it is.
//!
//! Experiments name their Rubies ("system", "rbenv-3.3.0", a path...). This module finds
//! the interpreters on PATH, in the usual version managers' directories (rbenv, rvm,
//! chruby/ruby-install, asdf, mise) and among Debian-style alternates (`/usr/bin/ruby3.1`),
//! runs each one once to read `RUBY_DESCRIPTION`/`RUBY_VERSION`, and resolves what a user
//! typed to an executable. Every child process is run from an argv (never a shell), in its
//! own process group, with a timeout, so a hung or broken interpreter costs a few seconds
//! and an error message, never a hung lab.

use std::cmp::Ordering;
use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};

use sys::process::{describe_status, display_argv, is_executable_file, kill_group};

/// How long one interpreter may take to answer during discovery (JRuby starts in seconds).
pub const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long [`ruby_description`] waits.
pub const DESCRIPTION_TIMEOUT: Duration = Duration::from_secs(30);

/// Printed before the answer so anything else a Ruby writes to stdout (from RUBYOPT, a
/// `-r`'d library, `-v`...) cannot be mistaken for it.
const MARKER: &str = "__rubyrace_ruby__";

/// The query: plain `print` of two constants every Ruby since 1.9 (CRuby, JRuby,
/// TruffleRuby) defines. Warnings go to stderr, which is only read for error messages.
fn query_script() -> String {
    format!(r#"print "\n{MARKER}\n", RUBY_DESCRIPTION, "\n", RUBY_VERSION, "\n""#)
}

/// One interpreter found by [`discover`].
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct DiscoveredRuby {
    /// Short unique name for experiment files: "system" (the first `ruby` on PATH that no
    /// version manager owns), `<source>-<version dir>` for managed Rubies ("rbenv-3.3.0",
    /// "rvm-jruby-9.4.5.0"; rvm/chruby's "ruby-" prefix dropped), and for other PATH or
    /// /usr/bin interpreters the CRuby version ("3.3.0") or `<engine>-<version>`
    /// ("jruby-9.4.5.0"). Clashes get "-2", "-3"... appended.
    pub name: String,
    /// The executable, canonicalized when possible (it is what was run).
    pub path: PathBuf,
    /// Where it was found: "rbenv", "rvm", "chruby", "asdf", "mise", "PATH", or "system"
    /// (a `/usr/bin/rubyX.Y` alternate not reachable through PATH).
    pub source: String,
    /// `RUBY_DESCRIPTION`; None if the Ruby failed to run.
    pub description: Option<String>,
    /// `RUBY_VERSION` (for JRuby and TruffleRuby, the Ruby language version they implement).
    pub version: Option<String>,
    /// Why it failed to run, if it did.
    pub error: Option<String>,
}

/// The source name of Rubies built by `rubyrace ruby build` (the cache's `rubies/`, where
/// each build's `--name` is a symlink to its prefix: names are preferred to prefixes).
pub const RUBYRACE_BUILDS: &str = "rubyrace";

/// A version manager's directory of installs: one subdirectory per Ruby, interpreter at
/// `<dir>/<version>/bin/ruby`.
#[derive(Clone, Debug, PartialEq)]
pub struct ManagerDir {
    pub source: String,
    pub dir: PathBuf,
}

impl ManagerDir {
    pub fn new(source: &str, dir: impl Into<PathBuf>) -> Self {
        ManagerDir {
            source: source.to_string(),
            dir: dir.into(),
        }
    }
}

/// Where [`discover_in`] looks. [`SearchRoots::from_env`] gives the real ones; tests build
/// their own instead of changing the process environment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SearchRoots {
    /// Searched first, in order, so a Ruby that is also on PATH (an active chruby or rvm
    /// Ruby) keeps its manager's name, which does not change when the shell switches.
    pub managers: Vec<ManagerDir>,
    /// PATH, in order. Directories named `shims` (rbenv, asdf, mise) are skipped: a shim
    /// picks its Ruby from the current directory and is found through its manager anyway.
    pub path_dirs: Vec<PathBuf>,
    /// Searched last for `ruby`, `rubyX.Y`, `jruby`, `truffleruby` (source "system").
    pub system_dirs: Vec<PathBuf>,
}

impl SearchRoots {
    /// The roots for this process: `$RBENV_ROOT` (or ~/.rbenv), `$rvm_path`, ~/.rvm and
    /// /usr/local/rvm, /opt/rubies and ~/.rubies (chruby), `$ASDF_DATA_DIR` (or ~/.asdf),
    /// `$MISE_DATA_DIR` (or `$XDG_DATA_HOME/mise`, or ~/.local/share/mise), `$PATH`, and
    /// /usr/bin. The home directory is `$HOME`.
    pub fn from_env() -> Self {
        Self::from_vars(|name| std::env::var_os(name))
    }

    /// [`SearchRoots::from_env`] with the variables read through `var`.
    pub fn from_vars(var: impl Fn(&str) -> Option<OsString>) -> Self {
        let get = |name: &str| var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        let home = get("HOME");
        let under_home = |rel: &str| home.as_ref().map(|h| h.join(rel));

        let mut managers: Vec<ManagerDir> = Vec::new();
        let mut add = |source: &str, dir: Option<PathBuf>| {
            if let Some(dir) = dir {
                if !managers.iter().any(|m| m.dir == dir) {
                    managers.push(ManagerDir::new(source, dir));
                }
            }
        };
        let rbenv_root = get("RBENV_ROOT").or_else(|| under_home(".rbenv"));
        add("rbenv", rbenv_root.map(|r| r.join("versions")));
        add("rvm", get("rvm_path").map(|r| r.join("rubies")));
        add("rvm", under_home(".rvm/rubies"));
        add("rvm", Some(PathBuf::from("/usr/local/rvm/rubies")));
        add("chruby", Some(PathBuf::from("/opt/rubies")));
        add("chruby", under_home(".rubies"));
        let asdf = get("ASDF_DATA_DIR").or_else(|| under_home(".asdf"));
        add("asdf", asdf.map(|a| a.join("installs/ruby")));
        let mise = get("MISE_DATA_DIR")
            .or_else(|| get("XDG_DATA_HOME").map(|x| x.join("mise")))
            .or_else(|| under_home(".local/share/mise"));
        add("mise", mise.map(|m| m.join("installs/ruby")));
        // Rubies built by `rubyrace ruby build`, named by their --name links.
        add(
            RUBYRACE_BUILDS,
            crate::cache::cache_dir_from(&var).map(|c| crate::cache::rubies_dir(&c)),
        );

        let path_dirs = var("PATH")
            .map(|p| {
                std::env::split_paths(&p)
                    .filter(|d| d.is_absolute())
                    .collect()
            })
            .unwrap_or_default();
        SearchRoots {
            managers,
            path_dirs,
            system_dirs: vec![PathBuf::from("/usr/bin")],
        }
    }
}

/// Finds the Rubies of this machine ([`SearchRoots::from_env`]); see [`discover_in`].
pub fn discover() -> Vec<DiscoveredRuby> {
    discover_in(&SearchRoots::from_env())
}

/// Finds the Rubies under `roots`: version managers first, then PATH, then the system
/// directories; deduplicated by canonical path (the first find wins); each one run (a few
/// at a time, [`DISCOVERY_TIMEOUT`] each, `RUBYOPT` unset) for its description and version.
/// Rubies that fail to run are kept, with `error` set.
pub fn discover_in(roots: &SearchRoots) -> Vec<DiscoveredRuby> {
    let candidates = candidates(roots);
    let answers = query_all(&candidates, DISCOVERY_TIMEOUT);
    name_all(candidates, answers)
}

/// Finds `name` among discovered Rubies: an exact name, else the one Ruby whose
/// `RUBY_VERSION` is `name`. The error lists what exists and the closest names.
pub fn find<'a>(rubies: &'a [DiscoveredRuby], name: &str) -> anyhow::Result<&'a DiscoveredRuby> {
    if let Some(ruby) = rubies.iter().find(|r| r.name == name) {
        return Ok(ruby);
    }
    let by_version: Vec<&DiscoveredRuby> = rubies
        .iter()
        .filter(|r| r.version.as_deref() == Some(name))
        .collect();
    match by_version.as_slice() {
        [one] => return Ok(*one),
        [] => {}
        many => bail!(
            "several Rubies have version {name}: {}; use one of these names",
            many.iter()
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
    if rubies.is_empty() {
        bail!(
            "no Ruby named `{name}`: no Rubies were found (give a path to the executable instead)"
        );
    }
    let mut close: Vec<(f64, &str)> = rubies
        .iter()
        .map(|r| (strsim::jaro_winkler(name, &r.name), r.name.as_str()))
        .filter(|(score, _)| *score >= 0.8)
        .collect();
    close.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap_or(Ordering::Equal));
    let mut msg = format!("no Ruby named `{name}`");
    if let Some((_, best)) = close.first() {
        msg.push_str(&format!(" (did you mean `{best}`?)"));
    }
    msg.push_str(&format!(
        "; found: {}",
        rubies
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    Err(anyhow!(msg))
}

/// Runs `argv_prefix` (an interpreter and its options, e.g. `["/usr/bin/ruby", "--yjit"]`)
/// plus `-e <query>`, with `env` added to this process's environment, and returns
/// `RUBY_DESCRIPTION`, which reflects options such as YJIT ("+YJIT"). Fails with the argv,
/// exit status and the end of stderr, or after [`DESCRIPTION_TIMEOUT`].
pub fn ruby_description(
    argv_prefix: &[String],
    env: &[(String, String)],
) -> anyhow::Result<String> {
    if argv_prefix.is_empty() {
        bail!("ruby_description: empty argv (expected a Ruby executable and its options)");
    }
    let mut argv: Vec<OsString> = argv_prefix.iter().map(OsString::from).collect();
    argv.push("-e".into());
    argv.push(query_script().into());
    let answer = query(&argv, env, &[], DESCRIPTION_TIMEOUT)?;
    Ok(answer.description)
}

/// Resolves a Ruby the user gave ("ruby", "/usr/bin/ruby3.1", "~/.rbenv/versions/3.3.0/bin/ruby",
/// "./bin/ruby") to an existing executable: a bare name is searched on PATH (absolute
/// entries only), `~/` is `$HOME`, a relative path is relative to the current directory.
/// The result is absolute but symlinks are kept (it names what the user asked for).
pub fn resolve_executable(program: &str) -> anyhow::Result<PathBuf> {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let cwd = std::env::current_dir()
        .map_err(|e| anyhow!("resolving `{program}`: cannot read the current directory: {e}"))?;
    resolve_in(
        program,
        std::env::var_os("PATH").as_deref(),
        home.as_deref(),
        &cwd,
    )
}

/// [`resolve_executable`] with PATH, home and current directory given.
fn resolve_in(
    program: &str,
    path_var: Option<&OsStr>,
    home: Option<&Path>,
    cwd: &Path,
) -> anyhow::Result<PathBuf> {
    if program.trim().is_empty() {
        bail!("no Ruby executable given (empty string)");
    }
    let expanded: PathBuf = if program == "~" || program.starts_with("~/") {
        let home = home.ok_or_else(|| anyhow!("cannot expand `{program}`: $HOME is not set"))?;
        home.join(program.trim_start_matches('~').trim_start_matches('/'))
    } else if program.starts_with('~') {
        bail!("cannot expand `{program}`: only `~/` (the current user's home) is supported");
    } else {
        PathBuf::from(program)
    };

    if program.contains('/') || program.starts_with('~') {
        let path = if expanded.is_absolute() {
            expanded
        } else {
            cwd.join(expanded)
        };
        return match std::fs::metadata(&path) {
            Err(e) => Err(anyhow!(
                "Ruby `{program}` not found: {}: {e}",
                path.display()
            )),
            Ok(meta) if meta.is_dir() => Err(anyhow!(
                "Ruby `{program}` is a directory ({}), not an executable",
                path.display()
            )),
            Ok(meta) if meta.permissions().mode() & 0o111 == 0 => Err(anyhow!(
                "Ruby `{program}` is not executable ({}, mode {:o})",
                path.display(),
                meta.permissions().mode() & 0o7777
            )),
            Ok(_) => Ok(path),
        };
    }

    let dirs: Vec<PathBuf> = path_var
        .map(|p| {
            std::env::split_paths(p)
                .filter(|d| d.is_absolute())
                .collect()
        })
        .unwrap_or_default();
    let mut not_executable = None;
    for dir in &dirs {
        let candidate = dir.join(program);
        if is_executable_file(&candidate) {
            return Ok(candidate);
        }
        if not_executable.is_none() && candidate.is_file() {
            not_executable = Some(candidate);
        }
    }
    let mut msg = format!("Ruby `{program}` was not found on PATH");
    if dirs.is_empty() {
        msg.push_str(" (PATH is empty or unset)");
    } else {
        let shown: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        msg.push_str(&format!(" (searched {})", shown.join(":")));
    }
    if let Some(p) = not_executable {
        msg.push_str(&format!("; {} exists but is not executable", p.display()));
    }
    msg.push_str("; give a path instead, e.g. ~/.rbenv/versions/3.3.0/bin/ruby");
    Err(anyhow!(msg))
}

// ---------------------------------------------------------------------------------------
// Candidates

#[derive(Clone, Debug, PartialEq)]
enum Origin {
    /// In a version manager's directory; the label is the version directory's name.
    Manager(String),
    /// On PATH or in a system directory; the executable's file name.
    Loose(String),
}

#[derive(Clone, Debug)]
struct Candidate {
    source: String,
    /// Canonical when possible.
    path: PathBuf,
    origin: Origin,
}

fn candidates(roots: &SearchRoots) -> Vec<Candidate> {
    let mut seen: HashSet<PathBuf> = HashSet::new();
    let mut out = Vec::new();
    let mut push = |source: &str, found: PathBuf, origin: Origin| {
        let path = std::fs::canonicalize(&found).unwrap_or(found);
        if seen.insert(path.clone()) {
            out.push(Candidate {
                source: source.to_string(),
                path,
                origin,
            });
        }
    };
    for manager in &roots.managers {
        let links_first = manager.source == RUBYRACE_BUILDS;
        for (label, exe) in manager_rubies(&manager.dir, links_first) {
            push(&manager.source, exe, Origin::Manager(label));
        }
    }
    for dir in &roots.path_dirs {
        if dir.file_name() == Some(OsStr::new("shims")) {
            continue;
        }
        for (file, exe) in loose_rubies(dir) {
            push("PATH", exe, Origin::Loose(file));
        }
    }
    for dir in &roots.system_dirs {
        for (file, exe) in loose_rubies(dir) {
            push("system", exe, Origin::Loose(file));
        }
    }
    out
}

/// `<dir>/<version>/bin/ruby` for each version directory, real directories before symlinked
/// aliases (rvm's `default`, mise's `3.3`), each group in natural order.
fn manager_rubies(dir: &Path, links_first: bool) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(bool, String, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let label = e.file_name().to_string_lossy().into_owned();
            if label.starts_with('.') {
                return None;
            }
            let is_link = e.file_type().map(|t| t.is_symlink()).unwrap_or(false);
            let exe = e.path().join("bin").join("ruby");
            is_executable_file(&exe).then_some((is_link, label, exe))
        })
        .collect();
    found.sort_by(|a, b| {
        let links = if links_first {
            b.0.cmp(&a.0)
        } else {
            a.0.cmp(&b.0)
        };
        links.then_with(|| natural_cmp(&a.1, &b.1))
    });
    found
        .into_iter()
        .map(|(_, label, exe)| (label, exe))
        .collect()
}

/// Interpreters directly in `dir`: `ruby` first, then `rubyX.Y`, `jruby`, `truffleruby`.
fn loose_rubies(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(String, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            let path = e.path();
            (is_ruby_name(&name) && is_executable_file(&path)).then_some((name, path))
        })
        .collect();
    found.sort_by(|a, b| {
        (a.0 != "ruby")
            .cmp(&(b.0 != "ruby"))
            .then_with(|| natural_cmp(&a.0, &b.0))
    });
    found
}

/// `ruby`, `jruby`, `truffleruby`, or `ruby` followed by a version (`ruby3.1`, `ruby2.7`);
/// not `ruby-build`, `rubocop`...
fn is_ruby_name(name: &str) -> bool {
    if matches!(name, "ruby" | "jruby" | "truffleruby") {
        return true;
    }
    match name.strip_prefix("ruby") {
        Some(rest) => {
            rest.starts_with(|c: char| c.is_ascii_digit())
                && rest.chars().all(|c| c.is_ascii_digit() || c == '.')
        }
        None => false,
    }
}

/// Compares digit runs as numbers ("3.10.0" after "3.9.1").
fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a, b);
    loop {
        match (a.is_empty(), b.is_empty()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Less,
            (false, true) => return Ordering::Greater,
            _ => {}
        }
        let a_digit = a.starts_with(|c: char| c.is_ascii_digit());
        let b_digit = b.starts_with(|c: char| c.is_ascii_digit());
        let split = |s: &str, digit: bool| {
            s.find(|c: char| c.is_ascii_digit() != digit)
                .unwrap_or(s.len())
        };
        let (ea, eb) = (split(a, a_digit), split(b, b_digit));
        let (ca, cb) = (&a[..ea], &b[..eb]);
        let ord = if a_digit && b_digit {
            let (ta, tb) = (ca.trim_start_matches('0'), cb.trim_start_matches('0'));
            ta.len()
                .cmp(&tb.len())
                .then_with(|| ta.cmp(tb))
                .then_with(|| ca.len().cmp(&cb.len()))
        } else {
            ca.cmp(cb)
        };
        if ord != Ordering::Equal {
            return ord;
        }
        a = &a[ea..];
        b = &b[eb..];
    }
}

// ---------------------------------------------------------------------------------------
// Naming

fn name_all(
    candidates: Vec<Candidate>,
    answers: Vec<anyhow::Result<Answer>>,
) -> Vec<DiscoveredRuby> {
    let mut taken: HashSet<String> = HashSet::new();
    let mut system_named = false;
    let mut out = Vec::with_capacity(candidates.len());
    for (cand, answer) in candidates.into_iter().zip(answers) {
        let (description, version, error) = match answer {
            Ok(a) => (Some(a.description), Some(a.version), None),
            Err(e) => (None, None, Some(format!("{e:#}"))),
        };
        let wanted = match &cand.origin {
            Origin::Manager(label) => format!("{}-{}", cand.source, manager_label(label)),
            Origin::Loose(file) if file == "ruby" && !system_named => {
                system_named = true;
                "system".to_string()
            }
            Origin::Loose(file) => description
                .as_deref()
                .and_then(|d| engine_name(d, version.as_deref()))
                .unwrap_or_else(|| file.clone()),
        };
        let mut name = wanted.clone();
        let mut n = 2;
        while taken.contains(&name) {
            name = format!("{wanted}-{n}");
            n += 1;
        }
        taken.insert(name.clone());
        out.push(DiscoveredRuby {
            name,
            path: cand.path,
            source: cand.source,
            description,
            version,
            error,
        });
    }
    out
}

/// rvm and ruby-install call CRuby directories "ruby-3.3.0"; the name keeps "3.3.0".
fn manager_label(label: &str) -> &str {
    match label.strip_prefix("ruby-") {
        Some(rest) if rest.starts_with(|c: char| c.is_ascii_digit()) => rest,
        _ => label,
    }
}

/// "3.1.2" for CRuby, "jruby-9.4.5.0", "truffleruby-24.0.0" for the others, from the
/// description's first two words ("jruby 9.4.5.0 (3.1.4) ...", "truffleruby 24.0.0, like ruby 3.2.2, ...").
fn engine_name(description: &str, version: Option<&str>) -> Option<String> {
    let mut words = description.split_whitespace();
    let engine = words.next()?;
    if engine == "ruby" {
        return version.filter(|v| !v.is_empty()).map(str::to_string);
    }
    let engine_version = words.next()?.trim_end_matches(',');
    if engine.is_empty() || engine_version.is_empty() {
        return None;
    }
    Some(format!("{engine}-{engine_version}"))
}

// ---------------------------------------------------------------------------------------
// Running a Ruby

#[derive(Clone, Debug, PartialEq)]
struct Answer {
    description: String,
    version: String,
}

fn query_all(candidates: &[Candidate], timeout: Duration) -> Vec<anyhow::Result<Answer>> {
    let n = candidates.len();
    if n == 0 {
        return Vec::new();
    }
    let workers = std::thread::available_parallelism()
        .map(|p| p.get())
        .unwrap_or(2)
        .clamp(1, 8)
        .min(n);
    let next = AtomicUsize::new(0);
    let script = query_script();
    let mut indexed: Vec<(usize, anyhow::Result<Answer>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, AtomicOrdering::Relaxed);
                        if i >= n {
                            break mine;
                        }
                        let argv: Vec<OsString> = vec![
                            candidates[i].path.clone().into(),
                            "-e".into(),
                            script.clone().into(),
                        ];
                        mine.push((i, query(&argv, &[], &["RUBYOPT"], timeout)));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    indexed.sort_by_key(|(i, _)| *i);
    let mut answers: Vec<Option<anyhow::Result<Answer>>> = (0..n).map(|_| None).collect();
    for (i, a) in indexed {
        answers[i] = Some(a);
    }
    answers
        .into_iter()
        .map(|a| a.unwrap_or_else(|| Err(anyhow!("query thread panicked"))))
        .collect()
}

/// Runs `argv` (ending in `-e <query_script>`) and parses the answer.
fn query(
    argv: &[OsString],
    env: &[(String, String)],
    env_remove: &[&str],
    timeout: Duration,
) -> anyhow::Result<Answer> {
    let (lines, shown, stderr_tail) = query_lines(argv, env, env_remove, timeout)?;
    match (lines.first(), lines.get(1)) {
        (Some(d), Some(v)) if !d.trim().is_empty() => Ok(Answer {
            description: d.trim().to_string(),
            version: v.trim().to_string(),
        }),
        _ => bail!(with_stderr(
            format!("`{shown}` exited 0 but printed no RUBY_DESCRIPTION (stdout: {lines:?})"),
            &stderr_tail
        )),
    }
}

fn with_stderr(msg: String, stderr_tail: &str) -> String {
    if stderr_tail.is_empty() {
        msg
    } else {
        format!("{msg}; stderr: {stderr_tail}")
    }
}

/// Runs `argv` (a Ruby with `-e` and a script that prints [`MARKER`] on a line of its
/// own, then its answer) and returns the answer's lines, the argv as shown in messages and
/// the end of stderr. Fails on a timeout, a non-zero exit or a missing marker.
fn query_lines(
    argv: &[OsString],
    env: &[(String, String)],
    env_remove: &[&str],
    timeout: Duration,
) -> anyhow::Result<(Vec<String>, String, String)> {
    let shown = display_argv(argv);
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    for name in env_remove {
        cmd.env_remove(name);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = run_captured(cmd, timeout).map_err(|e| anyhow!("could not run `{shown}`: {e}"))?;
    let stderr_tail = tail_output(&out.stderr);
    if out.timed_out {
        bail!(with_stderr(
            format!(
                "`{shown}` did not answer within {} s and was killed",
                timeout.as_secs_f64()
            ),
            &stderr_tail
        ));
    }
    if !out.status.success() {
        bail!(with_stderr(
            format!("`{shown}` failed ({})", describe_status(out.status)),
            &stderr_tail
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !stdout.lines().any(|l| l.trim_end() == MARKER) {
        bail!(with_stderr(
            format!(
                "`{shown}` exited 0 but did not answer (stdout: {:?})",
                tail_output(&out.stdout)
            ),
            &stderr_tail
        ));
    }
    let lines = stdout
        .lines()
        .skip_while(|l| l.trim_end() != MARKER)
        .skip(1)
        .map(str::to_string)
        .collect();
    Ok((lines, shown, stderr_tail))
}

/// What a Ruby can do, asked of the Ruby itself with the options under test.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RubyCapabilities {
    /// `RUBY_ENGINE`: "ruby" for CRuby, "jruby", "truffleruby".
    pub engine: String,
    pub version: String,
    pub description: String,
    /// Which JITs this Ruby was built with (`RubyVM::YJIT` etc. defined).
    pub jits_built: Vec<String>,
    /// Which JITs are on in a process started with these options (`enabled?`).
    pub jits_enabled: Vec<String>,
    /// `RbConfig::CONFIG["MAINLIBS"]`: libraries the interpreter is linked with.
    pub mainlibs: String,
    pub gc_compact: bool,
    pub gc_auto_compact: bool,
    /// Whatever the Ruby wrote to stderr (e.g. why a JIT could not start).
    pub stderr: String,
}

/// The capability query. `defined?` and `respond_to?` only: it runs on any Ruby.
fn capabilities_script() -> String {
    format!(
        r#"print "\n{MARKER}\n"
puts "engine=#{{defined?(RUBY_ENGINE) ? RUBY_ENGINE : "ruby"}}"
puts "version=#{{RUBY_VERSION}}"
puts "description=#{{RUBY_DESCRIPTION}}"
built = []; on = []
if defined?(RubyVM)
  {{ "yjit" => :YJIT, "mjit" => :MJIT, "rjit" => :RJIT, "zjit" => :ZJIT }}.each do |name, const|
    next unless RubyVM.const_defined?(const)
    built << name
    jit = RubyVM.const_get(const)
    on << name if jit.respond_to?(:enabled?) && jit.enabled?
  end
end
puts "jits_built=#{{built.join(",")}}"
puts "jits_enabled=#{{on.join(",")}}"
puts "mainlibs=#{{defined?(RbConfig) ? RbConfig::CONFIG["MAINLIBS"] : ""}}"
puts "gc_compact=#{{GC.respond_to?(:compact)}}"
puts "gc_auto_compact=#{{GC.respond_to?(:auto_compact=)}}"
"#
    )
}

/// Asks the Ruby `argv_prefix` (with its options, e.g. `--yjit`) and `env` what it can do:
/// engine, version, which JITs it was built with and which are on, what it links. Fails
/// like [`ruby_description`].
pub fn ruby_capabilities(
    argv_prefix: &[String],
    env: &[(String, String)],
) -> anyhow::Result<RubyCapabilities> {
    if argv_prefix.is_empty() {
        bail!("ruby_capabilities: empty argv (expected a Ruby executable and its options)");
    }
    let mut argv: Vec<OsString> = argv_prefix.iter().map(OsString::from).collect();
    argv.push("-e".into());
    argv.push(capabilities_script().into());
    let (lines, _, stderr) = query_lines(&argv, env, &[], DESCRIPTION_TIMEOUT)?;
    let mut caps = RubyCapabilities {
        stderr,
        ..RubyCapabilities::default()
    };
    let list = |v: &str| -> Vec<String> {
        v.split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    };
    for line in &lines {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        match key {
            "engine" => caps.engine = value.to_string(),
            "version" => caps.version = value.to_string(),
            "description" => caps.description = value.to_string(),
            "jits_built" => caps.jits_built = list(value),
            "jits_enabled" => caps.jits_enabled = list(value),
            "mainlibs" => caps.mainlibs = value.to_string(),
            "gc_compact" => caps.gc_compact = value == "true",
            "gc_auto_compact" => caps.gc_auto_compact = value == "true",
            _ => {}
        }
    }
    if caps.description.is_empty() {
        bail!("`{}` did not describe itself", argv_prefix.join(" "));
    }
    Ok(caps)
}

/// `bundle check` through the Ruby `argv_prefix` (`<ruby> -S bundle check`), with `env`
/// (which names the Gemfile in BUNDLE_GEMFILE): whether every gem of the Gemfile is
/// installed for that Ruby. The error carries what bundler said.
pub fn bundle_check(argv_prefix: &[String], env: &[(String, String)]) -> anyhow::Result<()> {
    if argv_prefix.is_empty() {
        bail!("bundle_check: empty argv");
    }
    let mut cmd = Command::new(&argv_prefix[0]);
    cmd.args(&argv_prefix[1..]).args(["-S", "bundle", "check"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let shown = format!("{} -S bundle check", argv_prefix.join(" "));
    let out = run_captured(cmd, DESCRIPTION_TIMEOUT)
        .map_err(|e| anyhow!("could not run `{shown}`: {e}"))?;
    if out.timed_out {
        bail!(
            "`{shown}` did not answer within {} s",
            DESCRIPTION_TIMEOUT.as_secs()
        );
    }
    if !out.status.success() {
        let said = format!("{} {}", tail_output(&out.stdout), tail_output(&out.stderr));
        bail!(
            "`{shown}` failed ({}): {}",
            describe_status(out.status),
            said.trim()
        );
    }
    Ok(())
}

/// What a program run by [`run_captured`] did and printed.
pub struct Captured {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub timed_out: bool,
}

/// Keep at most this much of each output stream (the rest is read and dropped so the child
/// never blocks on a full pipe).
const OUTPUT_CAP: usize = 256 * 1024;

/// Runs `cmd` with stdin closed and stdout/stderr captured, in a new process group that is
/// killed (SIGKILL) when `timeout` passes.
pub fn run_captured(mut cmd: Command, timeout: Duration) -> std::io::Result<Captured> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let deadline = Instant::now() + timeout;
    let mut child = spawn_retrying(&mut cmd)?;
    let pgid = child.id() as libc::pid_t;

    let (tx, rx) = mpsc::channel::<(usize, Vec<u8>)>();
    let streams: [Option<Box<dyn Read + Send>>; 2] = [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    ];
    for (i, stream) in streams.into_iter().enumerate() {
        let Some(mut stream) = stream else { continue };
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            let mut buf = [0u8; 8192];
            loop {
                match stream.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        let room = OUTPUT_CAP.saturating_sub(kept.len());
                        kept.extend_from_slice(&buf[..n.min(room)]);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                }
            }
            let _ = tx.send((i, kept));
        });
    }
    drop(tx);

    let mut timed_out = false;
    let mut pause = Duration::from_millis(1);
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        let now = Instant::now();
        if now >= deadline {
            timed_out = true;
            kill_group(pgid);
            break child.wait()?;
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(20));
    };

    // The pipes close when the last process holding them exits; a leftover grandchild
    // (in our group) gets a moment, then is killed.
    let mut outputs: [Vec<u8>; 2] = [Vec::new(), Vec::new()];
    let mut pending = 2;
    let mut grace_deadline = Instant::now() + Duration::from_secs(2);
    let mut killed_leftovers = timed_out;
    while pending > 0 {
        let wait = grace_deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(wait) {
            Ok((i, bytes)) => {
                outputs[i] = bytes;
                pending -= 1;
            }
            Err(mpsc::RecvTimeoutError::Timeout) if !killed_leftovers => {
                kill_group(pgid);
                killed_leftovers = true;
                grace_deadline = Instant::now() + Duration::from_secs(1);
            }
            Err(_) => break,
        }
    }
    let [stdout, stderr] = outputs;
    Ok(Captured {
        status,
        stdout,
        stderr,
        timed_out,
    })
}

/// Spawns, retrying on ETXTBSY: an executable written a moment ago (tests, fresh installs)
/// can be briefly "busy" while another thread's fork still holds it open for writing.
fn spawn_retrying(cmd: &mut Command) -> std::io::Result<std::process::Child> {
    let mut attempt = 0;
    loop {
        match cmd.spawn() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && attempt < 10 => {
                attempt += 1;
                std::thread::sleep(Duration::from_millis(10 * attempt));
            }
            other => return other,
        }
    }
}

/// The last few lines of a captured output stream, trimmed, for error messages.
fn tail_output(bytes: &[u8]) -> String {
    const MAX_LINES: usize = 12;
    const MAX_CHARS: usize = 1500;
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.trim().lines().collect();
    let mut out = lines[lines.len().saturating_sub(MAX_LINES)..].join("\n");
    if out.chars().count() > MAX_CHARS {
        let skip = out.chars().count() - MAX_CHARS;
        out = format!("...{}", out.chars().skip(skip).collect::<String>());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SYSTEM_RUBY: &str = "/usr/bin/ruby";

    /// Debian's Ruby is a prerequisite (scripts/setup installs it): its absence fails the
    /// tests rather than letting them pass without checking anything.
    fn require_system_ruby() {
        assert!(
            is_executable_file(Path::new(SYSTEM_RUBY)),
            "{SYSTEM_RUBY} is not installed: run scripts/setup"
        );
    }

    fn write_script(path: &Path, body: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn symlink(target: &Path, link: &Path) {
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, link).unwrap();
    }

    #[test]
    fn discover_finds_the_system_ruby() {
        require_system_ruby();
        let rubies = discover();
        eprintln!("discovered: {rubies:#?}");
        let canonical = std::fs::canonicalize(SYSTEM_RUBY).unwrap();
        let found = rubies
            .iter()
            .find(|r| r.path == canonical)
            .unwrap_or_else(|| panic!("{} not among {rubies:#?}", canonical.display()));
        let description = found.description.as_deref().unwrap();
        assert!(description.starts_with("ruby 3."), "{description}");
        assert!(found.version.as_deref().unwrap().starts_with("3."));
        assert!(found.error.is_none());
        let names: HashSet<&str> = rubies.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names.len(), rubies.len(), "names are unique: {rubies:#?}");
        let paths: HashSet<&PathBuf> = rubies.iter().map(|r| &r.path).collect();
        assert_eq!(paths.len(), rubies.len(), "paths are unique: {rubies:#?}");
    }

    #[test]
    fn discover_in_a_fake_tree_of_version_managers() {
        require_system_ruby();
        let tmp = tempfile::Builder::new().prefix("tree").tempdir().unwrap();
        let root = tmp.path();
        let forward = format!("exec {SYSTEM_RUBY} \"$@\"");
        // rbenv: a working 3.1.2, an alias symlink to it, a broken 9.9.9, a dir without bin/ruby.
        write_script(&root.join("rbenv/versions/3.1.2/bin/ruby"), &forward);
        symlink(Path::new("3.1.2"), &root.join("rbenv/versions/3.1"));
        write_script(
            &root.join("rbenv/versions/9.9.9/bin/ruby"),
            "echo 'ruby: boom, cannot load libruby.so' >&2\nexit 1",
        );
        std::fs::create_dir_all(root.join("rbenv/versions/empty")).unwrap();
        // chruby: a symlink to the system ruby (canonicalized, so PATH's copy is a duplicate).
        symlink(
            Path::new(SYSTEM_RUBY),
            &root.join("rubies/ruby-3.1.2/bin/ruby"),
        );
        // PATH: a shims dir (skipped), and a bin dir with a `ruby`, a duplicate, non-Rubies.
        write_script(&root.join("shims/ruby"), "exit 3");
        write_script(&root.join("bin/ruby"), &forward);
        symlink(Path::new(SYSTEM_RUBY), &root.join("bin/ruby3.1"));
        write_script(&root.join("bin/ruby-build"), "exit 0");
        write_script(&root.join("bin/rubocop"), "exit 0");
        std::fs::write(root.join("bin/ruby9.9"), "not executable").unwrap();

        let roots = SearchRoots {
            managers: vec![
                ManagerDir::new("rbenv", root.join("rbenv/versions")),
                ManagerDir::new("chruby", root.join("rubies")),
                ManagerDir::new("asdf", root.join("does-not-exist")),
            ],
            path_dirs: vec![root.join("shims"), root.join("bin")],
            system_dirs: vec![],
        };
        let rubies = discover_in(&roots);
        let summary: Vec<(&str, &str)> = rubies
            .iter()
            .map(|r| (r.name.as_str(), r.source.as_str()))
            .collect();
        assert_eq!(
            summary,
            [
                ("rbenv-3.1.2", "rbenv"),
                ("rbenv-9.9.9", "rbenv"),
                ("chruby-3.1.2", "chruby"),
                ("system", "PATH")
            ],
            "{rubies:#?}"
        );

        let good = &rubies[0];
        assert_eq!(
            good.path,
            std::fs::canonicalize(root.join("rbenv/versions/3.1.2/bin/ruby")).unwrap()
        );
        assert!(
            good.description.as_deref().unwrap().starts_with("ruby 3."),
            "{good:?}"
        );
        assert!(good.version.as_deref().unwrap().starts_with("3."));
        assert_eq!(good.error, None);

        let broken = &rubies[1];
        assert_eq!(broken.description, None);
        assert_eq!(broken.version, None);
        let error = broken.error.as_deref().unwrap();
        assert!(
            error.contains("failed (exit status 1)") && error.contains("boom"),
            "{error}"
        );
        assert!(error.contains("9.9.9/bin/ruby"), "names the argv: {error}");

        assert_eq!(rubies[2].path, std::fs::canonicalize(SYSTEM_RUBY).unwrap());
        assert!(rubies[2].description.is_some());
        assert_eq!(
            rubies[3].path,
            std::fs::canonicalize(root.join("bin/ruby")).unwrap()
        );

        // Lookup by name, by unique version, and the error for a typo.
        assert_eq!(find(&rubies, "system").unwrap().source, "PATH");
        let err = find(&rubies, "rbenv-3.1.3").unwrap_err().to_string();
        assert!(err.contains("did you mean `rbenv-3.1.2`"), "{err}");
        let version = good.version.clone().unwrap();
        let err = find(&rubies, &version).unwrap_err().to_string();
        assert!(err.contains("several Rubies have version"), "{err}");
    }

    #[test]
    fn a_ruby_that_hangs_is_killed_at_the_timeout() {
        let tmp = tempfile::Builder::new().prefix("hang").tempdir().unwrap();
        let exe = tmp.path().join("ruby");
        // `sleep` is a grandchild holding the pipes: the whole group must go.
        write_script(&exe, "sleep 30 &\nsleep 30");
        let started = Instant::now();
        let err = query(
            &[exe.clone().into(), "-e".into(), query_script().into()],
            &[],
            &[],
            Duration::from_millis(300),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("did not answer within 0.3 s"), "{err}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "took {:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_leftover_grandchild_holding_the_pipes_is_killed() {
        let tmp = tempfile::Builder::new()
            .prefix("leftover")
            .tempdir()
            .unwrap();
        let exe = tmp.path().join("ruby");
        write_script(
            &exe,
            &format!("sleep 30 &\nprintf '{MARKER}\\nfake 1.0\\n1.0\\n'"),
        );
        let started = Instant::now();
        let answer = query(&[exe.into_os_string()], &[], &[], Duration::from_secs(20)).unwrap();
        assert_eq!(
            answer,
            Answer {
                description: "fake 1.0".into(),
                version: "1.0".into()
            }
        );
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "took {:?}",
            started.elapsed()
        );
    }

    #[test]
    fn ruby_description_reflects_options_and_ignores_noise() {
        require_system_ruby();
        let argv = |args: &[&str]| args.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let plain = ruby_description(&argv(&[SYSTEM_RUBY]), &[]).unwrap();
        assert!(plain.starts_with("ruby 3."), "{plain}");

        // Warnings on stderr and stray stdout before the answer do not matter.
        let noisy = ruby_description(
            &argv(&[
                SYSTEM_RUBY,
                "-W2",
                "-e",
                r#"warn "warning: noise"; puts "stdout noise""#,
            ]),
            &[("RUBY_TEST_NOISE".into(), "1".into())],
        )
        .unwrap();
        assert_eq!(noisy, plain);

        // Options show in the description when the build supports them.
        let yjit = ruby_description(&argv(&[SYSTEM_RUBY, "--yjit"]), &[]);
        if let Ok(yjit) = yjit {
            assert!(yjit.contains("+YJIT"), "{yjit}");
            let via_env = ruby_description(
                &argv(&[SYSTEM_RUBY]),
                &[("RUBYOPT".into(), "--yjit".into())],
            )
            .unwrap();
            assert!(via_env.contains("+YJIT"), "{via_env}");
        }

        let err = format!(
            "{:#}",
            ruby_description(&argv(&[SYSTEM_RUBY, "--no-such-option"]), &[]).unwrap_err()
        );
        assert!(
            err.contains(SYSTEM_RUBY) && err.contains("--no-such-option"),
            "{err}"
        );
        assert!(err.contains("failed (exit status 1)"), "{err}");
        assert!(err.contains("invalid option"), "stderr tail: {err}");

        let err = format!(
            "{:#}",
            ruby_description(&argv(&["/nonexistent/ruby"]), &[]).unwrap_err()
        );
        assert!(
            err.contains("could not run `/nonexistent/ruby") && err.contains("No such file"),
            "{err}"
        );
        assert!(ruby_description(&[], &[]).is_err());
    }

    #[test]
    fn resolve_executable_handles_names_paths_and_home() {
        let tmp = tempfile::Builder::new()
            .prefix("resolve")
            .tempdir()
            .unwrap();
        let bin = tmp.path().join("bin");
        write_script(&bin.join("ruby"), "exit 0");
        std::fs::write(bin.join("notexec"), "").unwrap();
        let path_var =
            std::env::join_paths([Path::new("relative/dir"), &tmp.path().join("empty"), &bin])
                .unwrap();
        let home = tmp.path();
        let cwd = tmp.path();

        assert_eq!(
            resolve_in("ruby", Some(&path_var), Some(home), cwd).unwrap(),
            bin.join("ruby")
        );
        assert_eq!(
            resolve_in("~/bin/ruby", None, Some(home), Path::new("/")).unwrap(),
            bin.join("ruby")
        );
        assert_eq!(
            resolve_in("./bin/ruby", None, None, cwd).unwrap(),
            cwd.join("./bin/ruby")
        );
        assert_eq!(
            resolve_in(&bin.join("ruby").to_string_lossy(), None, None, cwd).unwrap(),
            bin.join("ruby")
        );

        let err = resolve_in("ruby9", Some(&path_var), Some(home), cwd)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`ruby9` was not found on PATH")
                && err.contains(&bin.display().to_string()),
            "{err}"
        );
        let err = resolve_in("notexec", Some(&path_var), Some(home), cwd)
            .unwrap_err()
            .to_string();
        assert!(err.contains("exists but is not executable"), "{err}");
        let err = resolve_in("./bin/notexec", None, None, cwd)
            .unwrap_err()
            .to_string();
        assert!(err.contains("is not executable"), "{err}");
        let err = resolve_in("./bin", None, None, cwd)
            .unwrap_err()
            .to_string();
        assert!(err.contains("is a directory"), "{err}");
        let err = resolve_in("/nonexistent/ruby", None, None, cwd)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not found"), "{err}");
        assert!(resolve_in("~/bin/ruby", None, None, cwd)
            .unwrap_err()
            .to_string()
            .contains("$HOME"));
        assert!(resolve_in("~bob/ruby", None, Some(home), cwd).is_err());
        assert!(resolve_in("", None, None, cwd).is_err());

        require_system_ruby();
        {
            let found = resolve_executable("ruby").unwrap();
            assert!(is_executable_file(&found), "{}", found.display());
            assert_eq!(
                resolve_executable(SYSTEM_RUBY).unwrap(),
                PathBuf::from(SYSTEM_RUBY)
            );
        }
    }

    #[test]
    fn search_roots_follow_the_environment() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        let roots = SearchRoots::from_vars(vars(&[
            ("HOME", "/home/u"),
            ("PATH", "/a/bin:relative:/home/u/.rbenv/shims"),
        ]));
        let dirs: Vec<(&str, &Path)> = roots
            .managers
            .iter()
            .map(|m| (m.source.as_str(), m.dir.as_path()))
            .collect();
        assert_eq!(
            dirs,
            [
                ("rbenv", Path::new("/home/u/.rbenv/versions")),
                ("rvm", Path::new("/home/u/.rvm/rubies")),
                ("rvm", Path::new("/usr/local/rvm/rubies")),
                ("chruby", Path::new("/opt/rubies")),
                ("chruby", Path::new("/home/u/.rubies")),
                ("asdf", Path::new("/home/u/.asdf/installs/ruby")),
                ("mise", Path::new("/home/u/.local/share/mise/installs/ruby")),
                ("rubyrace", Path::new("/home/u/.cache/rubyrace/rubies")),
            ]
        );
        assert_eq!(
            roots.path_dirs,
            [
                PathBuf::from("/a/bin"),
                PathBuf::from("/home/u/.rbenv/shims")
            ]
        );
        assert_eq!(roots.system_dirs, [PathBuf::from("/usr/bin")]);

        let roots = SearchRoots::from_vars(vars(&[
            ("HOME", "/home/u"),
            ("RBENV_ROOT", "/opt/rbenv"),
            ("rvm_path", "/home/u/.rvm"),
            ("ASDF_DATA_DIR", "/data/asdf"),
            ("XDG_DATA_HOME", "/xdg"),
        ]));
        let dir_of = |source: &str| {
            roots
                .managers
                .iter()
                .find(|m| m.source == source)
                .unwrap()
                .dir
                .clone()
        };
        assert_eq!(dir_of("rbenv"), Path::new("/opt/rbenv/versions"));
        assert_eq!(dir_of("asdf"), Path::new("/data/asdf/installs/ruby"));
        assert_eq!(dir_of("mise"), Path::new("/xdg/mise/installs/ruby"));
        assert_eq!(
            roots.managers.iter().filter(|m| m.source == "rvm").count(),
            2,
            "rvm_path == ~/.rvm counted once"
        );
        assert!(roots.path_dirs.is_empty());

        let roots =
            SearchRoots::from_vars(vars(&[("MISE_DATA_DIR", "/m"), ("XDG_DATA_HOME", "/xdg")]));
        assert_eq!(
            roots
                .managers
                .iter()
                .find(|m| m.source == "mise")
                .unwrap()
                .dir,
            Path::new("/m/installs/ruby")
        );
        assert!(
            roots.managers.iter().all(|m| m.dir.is_absolute()),
            "no HOME, no home-relative dirs"
        );
    }

    #[test]
    fn names_and_orders() {
        assert!(
            is_ruby_name("ruby")
                && is_ruby_name("ruby3.1")
                && is_ruby_name("ruby2.7")
                && is_ruby_name("jruby")
        );
        assert!(is_ruby_name("truffleruby"));
        assert!(
            !is_ruby_name("ruby-build")
                && !is_ruby_name("rubocop")
                && !is_ruby_name("ruby3.1.bak")
                && !is_ruby_name("irb")
        );
        assert!(!is_ruby_name("ruby.") && !is_ruby_name("rubyx"));

        assert_eq!(natural_cmp("3.9.1", "3.10.0"), Ordering::Less);
        assert_eq!(natural_cmp("3.3.0", "3.3.0-preview1"), Ordering::Less);
        assert_eq!(natural_cmp("jruby-9.4.5.0", "3.3.0"), Ordering::Greater);
        let mut v = vec!["3.10.0", "2.7.8", "3.2.2", "jruby-9.4.5.0", "3.9.9"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["2.7.8", "3.2.2", "3.9.9", "3.10.0", "jruby-9.4.5.0"]);

        assert_eq!(manager_label("ruby-3.3.0"), "3.3.0");
        assert_eq!(manager_label("jruby-9.4.5.0"), "jruby-9.4.5.0");
        assert_eq!(manager_label("ruby-head"), "ruby-head");

        assert_eq!(
            engine_name(
                "ruby 3.1.2p20 (2022-04-12 revision 4491bb740a) [x86_64-linux-gnu]",
                Some("3.1.2")
            )
            .as_deref(),
            Some("3.1.2")
        );
        assert_eq!(
            engine_name("jruby 9.4.5.0 (3.1.4) 2023-11-02 1abae2700f OpenJDK 64-Bit Server VM 17.0.9+9 on 17.0.9+9 +jit [x86_64-linux]", Some("3.1.4")).as_deref(),
            Some("jruby-9.4.5.0")
        );
        assert_eq!(
            engine_name(
                "truffleruby 24.0.0, like ruby 3.2.2, Oracle GraalVM Native [x86_64-linux]",
                Some("3.2.2")
            )
            .as_deref(),
            Some("truffleruby-24.0.0")
        );

        let answer = |d: &str, v: &str| -> anyhow::Result<Answer> {
            Ok(Answer {
                description: d.into(),
                version: v.into(),
            })
        };
        let cand = |source: &str, origin: Origin| Candidate {
            source: source.into(),
            path: PathBuf::from("/x"),
            origin,
        };
        let named = name_all(
            vec![
                cand("rvm", Origin::Manager("ruby-3.3.0".into())),
                cand("PATH", Origin::Loose("ruby".into())),
                cand("PATH", Origin::Loose("ruby".into())),
                cand("PATH", Origin::Loose("ruby3.3".into())),
                cand("PATH", Origin::Loose("jruby".into())),
                cand("system", Origin::Loose("ruby3.4".into())),
            ],
            vec![
                answer("ruby 3.3.0", "3.3.0"),
                answer("ruby 3.2.2", "3.2.2"),
                answer("ruby 3.3.0", "3.3.0"),
                answer("ruby 3.3.0", "3.3.0"),
                answer("jruby 9.4.5.0 (3.1.4)", "3.1.4"),
                Err(anyhow!("broken")),
            ],
        );
        let names: Vec<&str> = named.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "rvm-3.3.0",
                "system",
                "3.3.0",
                "3.3.0-2",
                "jruby-9.4.5.0",
                "ruby3.4"
            ]
        );
        assert_eq!(named[5].error.as_deref(), Some("broken"));
    }

    #[test]
    fn answers_are_found_after_the_marker() {
        assert!(query_script().contains(MARKER));
        let long: Vec<u8> = (0..100)
            .flat_map(|i| format!("line {i}\n").into_bytes())
            .collect();
        let t = tail_output(&long);
        assert!(t.starts_with("line 88") && t.ends_with("line 99"), "{t}");
    }
}
