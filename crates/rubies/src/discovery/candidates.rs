//! Where Rubies are looked for ([`SearchRoots`]: the version managers' directories,
//! rubyrace's own builds, PATH, and the system directory with its Debian-style
//! `/usr/bin/rubyX.Y` alternates), and the interpreters found there, in search order and
//! without duplicates, before any of them is run.

use std::cmp::Ordering;
use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use sys::process::is_executable_file;

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

/// Where [`discover_in`](super::discover_in) looks. [`SearchRoots::from_env`] gives the real
/// ones; tests build their own instead of changing the process environment.
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

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Origin {
    /// In a version manager's directory; the label is the version directory's name.
    Manager(String),
    /// On PATH or in a system directory; the executable's file name.
    Loose(String),
}

#[derive(Clone, Debug)]
pub(super) struct Candidate {
    pub(super) source: String,
    /// Canonical when possible.
    pub(super) path: PathBuf,
    pub(super) origin: Origin,
}

/// The interpreters under `roots`: version managers first, then PATH (without `shims`
/// directories), then the system directories; the first find of each canonical path.
pub(super) fn candidates(roots: &SearchRoots) -> Vec<Candidate> {
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
pub(super) fn is_ruby_name(name: &str) -> bool {
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
pub(super) fn natural_cmp(a: &str, b: &str) -> Ordering {
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
