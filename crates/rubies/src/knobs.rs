//! Ruby runtime knobs: `jit`, `allocator` and `compact`, and what each means for one Ruby.
//!
//! A knob becomes flags and environment for the server's Ruby (`--yjit`, `LD_PRELOAD`,
//! `RUBYRACE_COMPACT` for the probe). The experiment checker asks the Ruby itself, with those
//! flags, whether it can honour the knob ([`crate::discovery::ruby_capabilities`]), so a JIT the
//! Ruby lacks or an allocator that is not installed is an error before anything runs, never
//! a mislabelled cohort. The running server is checked again, process by process, by
//! the probe (`lab::probe`).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::discovery::RubyCapabilities;

/// Which JIT the Ruby runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Jit {
    /// The interpreter: every JIT off.
    None,
    Yjit,
    Mjit,
    Zjit,
}

pub const JITS: &[&str] = &["none", "yjit", "mjit", "zjit"];

impl Jit {
    pub fn parse(s: &str) -> Option<Jit> {
        match s {
            "none" => Some(Jit::None),
            "yjit" => Some(Jit::Yjit),
            "mjit" => Some(Jit::Mjit),
            "zjit" => Some(Jit::Zjit),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Jit::None => "none",
            Jit::Yjit => "yjit",
            Jit::Mjit => "mjit",
            Jit::Zjit => "zjit",
        }
    }

    /// The command-line flag that turns this JIT on in a CRuby of `version`: MJIT was
    /// `--jit` up to 3.0 and `--mjit` in 3.1 and 3.2 (where `--jit` means YJIT when the
    /// Ruby has it: 3.1.2's `ruby --help` says "--jit  enable JIT for the platform, same as
    /// --yjit"), and is gone from 3.3 on.
    pub fn flag(self, version: &str) -> Result<Option<&'static str>, String> {
        let (major, minor) = major_minor(version);
        match self {
            Jit::None => Ok(None),
            Jit::Yjit => Ok(Some("--yjit")),
            Jit::Zjit => Ok(Some("--zjit")),
            Jit::Mjit if (major, minor) >= (3, 3) => Err(format!(
                "Ruby {version} has no MJIT: it was removed in Ruby 3.3"
            )),
            Jit::Mjit if (major, minor) >= (3, 1) => Ok(Some("--mjit")),
            Jit::Mjit => Ok(Some("--jit")),
        }
    }
}

fn major_minor(version: &str) -> (u32, u32) {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// Whether a Ruby option chooses a JIT (and so conflicts with the `jit` setting). Options
/// *of* the chosen JIT (`--yjit-exec-mem-size=64` with jit = "yjit") do not.
pub fn jit_option_conflict(option: &str, jit: Jit) -> bool {
    let names = ["yjit", "mjit", "jit", "zjit", "rjit"];
    let Some(rest) = option.strip_prefix("--") else {
        return false;
    };
    names.iter().any(|name| {
        let chooses = rest == *name;
        let tunes = rest.starts_with(&format!("{name}-")) || rest.starts_with(&format!("{name}="));
        chooses || (tunes && !(jit == Jit::Yjit && *name == "yjit"))
    })
}

/// What the server does about compaction (carried out by the probe).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Compact {
    None,
    /// `GC.compact` once in each process right after its app is built.
    AfterBoot,
    /// `GC.auto_compact = true` from the start.
    Auto,
}

pub const COMPACTS: &[&str] = &["none", "after-boot", "auto"];

impl Compact {
    pub fn parse(s: &str) -> Option<Compact> {
        match s {
            "none" => Some(Compact::None),
            "after-boot" => Some(Compact::AfterBoot),
            "auto" => Some(Compact::Auto),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Compact::None => "none",
            Compact::AfterBoot => "after-boot",
            Compact::Auto => "auto",
        }
    }
}

/// The memory allocator, resolved for one Ruby.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocatorSetting {
    /// "system", "jemalloc", "tcmalloc", or the file stem of a library given by path.
    pub name: String,
    /// The library put in `LD_PRELOAD`; none for "system" or a Ruby linked against it.
    pub preload: Option<PathBuf>,
    /// The Ruby is linked against this allocator (its `MAINLIBS`), so nothing is preloaded.
    pub linked: bool,
}

/// The allocator libraries rubyrace recognises in `/proc/PID/maps`, by file-name prefix.
pub const ALLOCATOR_PREFIXES: &[(&str, &str)] =
    &[("jemalloc", "libjemalloc"), ("tcmalloc", "libtcmalloc")];

/// The allocator a Ruby is linked against, from its `MAINLIBS` (`-ljemalloc`).
pub fn linked_allocator(mainlibs: &str) -> Option<&'static str> {
    mainlibs.split_whitespace().find_map(|flag| {
        ALLOCATOR_PREFIXES
            .iter()
            .find(|(name, _)| flag.starts_with(&format!("-l{name}")))
            .map(|(name, _)| *name)
    })
}

/// Shared-library file names to look for, best first.
fn library_names(name: &str) -> &'static [&'static str] {
    match name {
        "jemalloc" => &["libjemalloc.so.2", "libjemalloc.so"],
        // The minimal build has no heap profiler: the usual choice for a drop-in malloc.
        "tcmalloc" => &[
            "libtcmalloc_minimal.so.4",
            "libtcmalloc.so.4",
            "libtcmalloc_minimal.so",
            "libtcmalloc.so",
        ],
        _ => &[],
    }
}

/// Directories searched when `ldconfig -p` does not know a library.
const LIBRARY_DIRS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
    "/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
];

/// Finds the shared library of a named allocator ("jemalloc", "tcmalloc"): from the
/// dynamic linker's cache (`ldconfig -p`), else in the usual library directories.
pub fn find_allocator_library(name: &str) -> Option<PathBuf> {
    let names = library_names(name);
    let cache = Command::new("ldconfig")
        .arg("-p")
        .output()
        .or_else(|_| Command::new("/sbin/ldconfig").arg("-p").output())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    for wanted in names {
        // Lines look like "\tlibjemalloc.so.2 (libc6,x86-64) => /lib/x86_64-linux-gnu/libjemalloc.so.2".
        for line in cache.lines() {
            let line = line.trim();
            if line.split_whitespace().next() == Some(*wanted) {
                if let Some((_, path)) = line.rsplit_once("=> ") {
                    let path = PathBuf::from(path.trim());
                    if path.is_file() {
                        return Some(path);
                    }
                }
            }
        }
        for dir in LIBRARY_DIRS {
            let path = Path::new(dir).join(wanted);
            if path.is_file() {
                return Some(path);
            }
        }
    }
    None
}

/// The allocator family of a library path, from its file name ("libjemalloc.so.2" →
/// "jemalloc"); otherwise the file's stem ("libmimalloc.so" → "libmimalloc").
pub fn allocator_name_of(path: &Path) -> String {
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    ALLOCATOR_PREFIXES
        .iter()
        .find(|(_, prefix)| file.starts_with(prefix))
        .map(|(name, _)| name.to_string())
        .unwrap_or_else(|| file.split('.').next().unwrap_or(&file).to_string())
}

/// Resolves `allocator` for a Ruby: a name ("system", "jemalloc", "tcmalloc") or the path of
/// a shared library (already made absolute). The error says what is wrong and what to do.
pub fn resolve_allocator(
    value: &str,
    caps: &RubyCapabilities,
) -> Result<AllocatorSetting, (String, Option<String>)> {
    let linked = linked_allocator(&caps.mainlibs);
    let ruby = &caps.description;
    if value.contains('/') {
        let path = PathBuf::from(value);
        if !path.is_file() {
            return Err((
                format!("no such library: {}", path.display()),
                Some("give the path of a shared library (.so), or \"jemalloc\" / \"tcmalloc\" to have it found".into()),
            ));
        }
        let name = allocator_name_of(&path);
        if let Some(l) = linked {
            if l != name {
                return Err((
                    format!(
                        "{ruby} is linked against {l} (MAINLIBS), so it cannot run with {name}"
                    ),
                    None,
                ));
            }
        }
        return Ok(AllocatorSetting {
            name,
            preload: Some(std::fs::canonicalize(&path).unwrap_or(path)),
            linked: false,
        });
    }
    match (value, linked) {
        ("system", None) => Ok(AllocatorSetting {
            name: "system".into(),
            preload: None,
            linked: false,
        }),
        ("system", Some(l)) => Err((
            format!("{ruby} is linked against {l} (RbConfig MAINLIBS: {:?}); it cannot run with the system allocator", caps.mainlibs.trim()),
            Some(format!("compare against a Ruby built without --with-{l}")),
        )),
        (name, Some(l)) if name == l => Ok(AllocatorSetting {
            name: name.into(),
            preload: None,
            linked: true,
        }),
        (name, Some(l)) => Err((
            format!("{ruby} is linked against {l} (MAINLIBS), so it cannot run with {name}"),
            None,
        )),
        (name, None) => match find_allocator_library(name) {
            // Canonical, as /proc/PID/maps shows it (/lib -> /usr/lib on a merged /usr).
            Some(path) => Ok(AllocatorSetting {
                name: name.into(),
                preload: Some(std::fs::canonicalize(&path).unwrap_or(path)),
                linked: false,
            }),
            None => Err((
                format!(
                    "{name} is not installed: none of {} is known to ldconfig or in {}",
                    library_names(name).join(", "),
                    LIBRARY_DIRS.join(", ")
                ),
                Some(match name {
                    "jemalloc" => "install it (Debian: apt-get install libjemalloc2) or give the library's path".into(),
                    _ => "install it (Debian: apt-get install libgoogle-perftools4) or give the library's path".into(),
                }),
            )),
        },
    }
}

/// Checks that the Ruby can run `jit`, from its capabilities *with the JIT's flag*. Returns
/// the flag to add to the Ruby's argv.
pub fn check_jit(
    jit: Jit,
    plain: &RubyCapabilities,
    with_flag: impl FnOnce(&str) -> Result<RubyCapabilities, String>,
) -> Result<Option<String>, (String, Option<String>)> {
    let ruby = &plain.description;
    if plain.engine != "ruby" {
        return Err((
            format!(
                "`jit` applies to CRuby; {ruby} is {} and compiles on its own",
                plain.engine
            ),
            Some("leave `jit` out for this Ruby ([[exclude]] or [[configs]])".into()),
        ));
    }
    if jit == Jit::None {
        if let Some(on) = plain.jits_enabled.first() {
            return Err((
                format!("{ruby} starts with {on} on (its environment or options enable it), so jit = \"none\" is not possible"),
                Some("remove RUBY_YJIT_ENABLE / RUBYOPT from this Ruby's environment".into()),
            ));
        }
        return Ok(None);
    }
    let name = jit.as_str();
    let flag = jit.flag(&plain.version).map_err(|e| (e, None))?;
    let Some(flag) = flag else { return Ok(None) };
    if !plain.jits_built.iter().any(|j| j == name) {
        return Err((
            format!(
                "{ruby} has no {}: RubyVM::{} is not defined (built without it)",
                name.to_uppercase(),
                name.to_uppercase()
            ),
            Some(match jit {
                Jit::Yjit => "build a Ruby with YJIT (`rubyrace ruby build VERSION --source ... --yjit`, needs rustc), or exclude this Ruby from the yjit configurations".into(),
                _ => "use a Ruby built with it, or exclude this Ruby from those configurations".into(),
            }),
        ));
    }
    let on = with_flag(flag).map_err(|e| (format!("`{flag}` does not start: {e}"), None))?;
    if !on.jits_enabled.iter().any(|j| j == name) {
        let why = on.stderr.lines().next().unwrap_or("").trim();
        return Err((
            format!(
                "{ruby} started with `{flag}` but RubyVM::{}.enabled? is false{}",
                name.to_uppercase(),
                if why.is_empty() {
                    String::new()
                } else {
                    format!(" ({why})")
                }
            ),
            Some("this Ruby cannot run that JIT here; exclude it from those configurations".into()),
        ));
    }
    Ok(Some(flag.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(
        engine: &str,
        version: &str,
        built: &[&str],
        on: &[&str],
        mainlibs: &str,
    ) -> RubyCapabilities {
        RubyCapabilities {
            engine: engine.into(),
            version: version.into(),
            description: format!("ruby {version}"),
            jits_built: built.iter().map(|s| s.to_string()).collect(),
            jits_enabled: on.iter().map(|s| s.to_string()).collect(),
            mainlibs: mainlibs.into(),
            ..RubyCapabilities::default()
        }
    }

    #[test]
    fn jit_flags_follow_the_ruby_version() {
        assert_eq!(Jit::Yjit.flag("3.1.2"), Ok(Some("--yjit")));
        assert_eq!(Jit::Mjit.flag("2.7.4"), Ok(Some("--jit")));
        assert_eq!(Jit::Mjit.flag("3.0.6"), Ok(Some("--jit")));
        assert_eq!(Jit::Mjit.flag("3.1.2"), Ok(Some("--mjit")));
        assert_eq!(Jit::Mjit.flag("3.2.0"), Ok(Some("--mjit")));
        assert!(Jit::Mjit
            .flag("3.3.8")
            .unwrap_err()
            .contains("removed in Ruby 3.3"));
        assert_eq!(Jit::None.flag("3.3.8"), Ok(None));
    }

    #[test]
    fn jit_options_conflict_unless_they_tune_the_chosen_jit() {
        assert!(jit_option_conflict("--yjit", Jit::Yjit));
        assert!(jit_option_conflict("--yjit", Jit::None));
        assert!(jit_option_conflict("--yjit-stats", Jit::None));
        assert!(!jit_option_conflict("--yjit-stats", Jit::Yjit));
        assert!(!jit_option_conflict("--yjit-exec-mem-size=64", Jit::Yjit));
        assert!(jit_option_conflict("--jit", Jit::Yjit));
        assert!(!jit_option_conflict("-W0", Jit::None));
        assert!(!jit_option_conflict("--disable-gems", Jit::None));
    }

    #[test]
    fn a_missing_jit_is_an_error_naming_the_ruby() {
        let plain = caps("ruby", "3.3.8", &[], &[], "");
        let err = check_jit(Jit::Yjit, &plain, |_| unreachable!()).unwrap_err();
        assert_eq!(
            err.0,
            "ruby 3.3.8 has no YJIT: RubyVM::YJIT is not defined (built without it)"
        );
        // Built, but the flag does not turn it on.
        let plain = caps("ruby", "3.1.2", &["yjit", "mjit"], &[], "");
        let off = caps("ruby", "3.1.2", &["yjit", "mjit"], &[], "");
        let err = check_jit(Jit::Mjit, &plain, |_| Ok(off)).unwrap_err();
        assert!(
            err.0
                .contains("started with `--mjit` but RubyVM::MJIT.enabled? is false"),
            "{}",
            err.0
        );
        let on = caps("ruby", "3.1.2", &["yjit"], &["yjit"], "");
        assert_eq!(
            check_jit(Jit::Yjit, &plain, |_| Ok(on)),
            Ok(Some("--yjit".into()))
        );
        let jruby = caps("jruby", "3.1.4", &[], &[], "");
        assert!(check_jit(Jit::Yjit, &jruby, |_| unreachable!())
            .unwrap_err()
            .0
            .contains("applies to CRuby"));
    }

    #[test]
    fn linked_allocators_are_recognised() {
        assert_eq!(
            linked_allocator("-lz -lpthread -ljemalloc -lm"),
            Some("jemalloc")
        );
        assert_eq!(linked_allocator("-lz -lpthread -lm"), None);
        let linked = caps("ruby", "3.3.8", &[], &[], "-ljemalloc -lm");
        let setting = resolve_allocator("jemalloc", &linked).unwrap();
        assert!(setting.linked && setting.preload.is_none());
        let err = resolve_allocator("system", &linked).unwrap_err();
        assert!(err.0.contains("is linked against jemalloc"), "{}", err.0);
    }

    #[test]
    fn an_allocator_path_must_exist() {
        let plain = caps("ruby", "3.1.2", &[], &[], "-lm");
        let err = resolve_allocator("/nonexistent/libjemalloc.so.2", &plain).unwrap_err();
        assert_eq!(err.0, "no such library: /nonexistent/libjemalloc.so.2");
        assert_eq!(
            allocator_name_of(Path::new("/x/libjemalloc.so.2")),
            "jemalloc"
        );
        assert_eq!(
            allocator_name_of(Path::new("/x/libtcmalloc_minimal.so.4")),
            "tcmalloc"
        );
        assert_eq!(
            allocator_name_of(Path::new("/x/libmimalloc.so")),
            "libmimalloc"
        );
    }
}
