//! What the machine and the process environment looked like when a trial ran.
//!
//! Each trial records the machine (kernel, CPU, memory), the load average before it
//! started, the environment variables that change how Ruby and its allocators behave, and
//! the git commit of the application under test, so results can be compared and questioned
//! later. Everything is read from /proc, /etc/os-release, uname(2) and `git` run from an
//! argv; anything missing gives an empty field or None, never an error.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

/// The machine a trial ran on.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct Machine {
    pub hostname: String,
    /// Kernel release and version, as `uname -r` and `uname -v` print them.
    pub kernel: String,
    /// `PRETTY_NAME` from /etc/os-release.
    pub os: String,
    /// The machine hardware name (`uname -m`), e.g. "x86_64", "aarch64".
    pub arch: String,
    /// The first "model name" of /proc/cpuinfo (or its equivalent on other architectures).
    pub cpu_model: String,
    /// CPUs this process may run on (`available_parallelism`: it honours the affinity
    /// mask and cgroup CPU quotas), else the online CPUs (`sysconf`).
    pub cpus_online: u32,
    /// `MemTotal` of /proc/meminfo, in bytes.
    pub memory_total_bytes: u64,
}

/// The Slurm node this process runs on (`SLURMD_NODENAME`), else the hostname.
pub fn node_name() -> String {
    std::env::var("SLURMD_NODENAME")
        .ok()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| machine().hostname)
}

/// Describes this machine.
pub fn machine() -> Machine {
    let uts = uname();
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };

    let hostname = uts
        .as_ref()
        .map(|u| u.nodename.clone())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| read("/proc/sys/kernel/hostname"));
    let kernel = match &uts {
        Some(u) if !u.release.is_empty() => join_nonempty(&u.release, &u.version),
        _ => join_nonempty(
            &read("/proc/sys/kernel/osrelease"),
            &read("/proc/sys/kernel/version"),
        ),
    };
    let os = ["/etc/os-release", "/usr/lib/os-release"]
        .iter()
        .find_map(|p| {
            std::fs::read_to_string(p)
                .ok()
                .and_then(|t| parse_os_release(&t))
        })
        .unwrap_or_else(|| std::env::consts::OS.to_string());
    let arch = uts
        .as_ref()
        .map(|u| u.machine.clone())
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| parse_cpu_model(&t))
        .unwrap_or_default();
    let cpus_online = std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or_else(|_| {
            use nix::unistd::{sysconf, SysconfVar};
            sysconf(SysconfVar::_NPROCESSORS_ONLN)
                .ok()
                .flatten()
                .map_or(0, |n| n.max(0) as u32)
        });
    let memory_total_bytes = {
        use procfs::Current;
        procfs::Meminfo::current().map_or(0, |m| m.mem_total)
    };
    Machine {
        hostname,
        kernel,
        os,
        arch,
        cpu_model,
        cpus_online,
        memory_total_bytes,
    }
}

/// The 1, 5 and 15 minute load averages of /proc/loadavg. (Read here, not with procfs,
/// whose `LoadAverage` holds `f32`s: 1.68 would be stored as 1.6799999475479126.)
pub fn load_average() -> Option<[f64; 3]> {
    parse_loadavg(&std::fs::read_to_string("/proc/loadavg").ok()?)
}

/// Name prefixes of captured variables: Ruby (RUBYOPT, RUBY_YJIT_ENABLE, RUBY_GC_*...),
/// TruffleRuby (TRUFFLERUBYOPT), RubyGems, Bundler, allocators (MALLOC_ARENA_MAX,
/// MALLOC_CONF for jemalloc), and Puma's own variables (PUMA_*), which can change the
/// server's settings behind the experiment's back.
const CAPTURED_PREFIXES: &[&str] = &["RUBY", "TRUFFLERUBY", "GEM", "BUNDLE", "MALLOC", "PUMA_"];

/// Exact names of captured variables: preloads, the dynamic loader's path, glibc tunables
/// (malloc arenas, tcache), and the JVM's and JRuby's options.
const CAPTURED_NAMES: &[&str] = &[
    "WEB_CONCURRENCY",
    "RAILS_MAX_THREADS",
    "RAILS_MIN_THREADS",
    "RACK_ENV",
    "RAILS_ENV",
    "APP_ENV",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "GLIBC_TUNABLES",
    "JAVA_OPTS",
    "JRUBY_OPTS",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
];

/// Stands in for the value of a variable that looks like a credential.
pub const REDACTED: &str = "<redacted>";

/// The variables of `env` that matter for a benchmark: names starting with `RUBY`,
/// `TRUFFLERUBY`, `GEM`, `BUNDLE`, `MALLOC` or `PUMA_`; `WEB_CONCURRENCY`,
/// `RAILS_MAX_THREADS`, `RAILS_MIN_THREADS`, `RACK_ENV`, `RAILS_ENV`, `APP_ENV`, `LD_PRELOAD`, `LD_LIBRARY_PATH`,
/// `GLIBC_TUNABLES`, `JAVA_OPTS`, `JRUBY_OPTS`, `JAVA_TOOL_OPTIONS`, `_JAVA_OPTIONS`,
/// `JDK_JAVA_OPTIONS`; and the exact names in `extra`; sorted by name. `PATH` is not
/// captured.
///
/// Results are stored and shared, so credentials are not: the value of a variable whose
/// name looks secret (`TOKEN`, `SECRET`, `PASSWORD`, `API_KEY`, `CREDENTIAL`, `AUTH`... as
/// in `GEM_HOST_API_KEY`) or that is a Bundler per-host setting (`BUNDLE_GEMS__EXAMPLE__COM`,
/// which holds `user:password`) becomes [`REDACTED`], and a password in a URL
/// (`https://user:pw@host`) becomes `***`.
pub fn captured_env(env: &BTreeMap<String, String>, extra: &[String]) -> BTreeMap<String, String> {
    env.iter()
        .filter(|(name, _)| {
            CAPTURED_PREFIXES.iter().any(|p| name.starts_with(p))
                || CAPTURED_NAMES.contains(&name.as_str())
                || extra.iter().any(|e| e == *name)
        })
        .map(|(name, value)| {
            let value = if looks_secret(name) {
                REDACTED.to_string()
            } else {
                redact_url_passwords(value)
            };
            (name.clone(), value)
        })
        .collect()
}

fn looks_secret(name: &str) -> bool {
    const WORDS: &[&str] = &[
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "API_KEY",
        "APIKEY",
        "ACCESS_KEY",
        "PRIVATE_KEY",
        "AUTH",
    ];
    let upper = name.to_ascii_uppercase();
    if WORDS.iter().any(|w| upper.contains(w)) {
        return true;
    }
    // Bundler spells host settings BUNDLE_<HOST with dots as __>; they hold credentials.
    // BUNDLE_BUILD__<GEM> (build flags) and BUNDLE_LOCAL__<GEM> (local overrides) do not.
    upper.starts_with("BUNDLE_")
        && upper.contains("__")
        && !upper.starts_with("BUNDLE_BUILD__")
        && !upper.starts_with("BUNDLE_LOCAL__")
}

/// `scheme://user:password@host` → `scheme://user:***@host`, wherever it occurs in `value`.
pub fn redact_url_passwords(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let authority_end = tail
            .find(|c: char| c == '/' || c == '?' || c == '#' || c.is_whitespace())
            .unwrap_or(tail.len());
        let authority = &tail[..authority_end];
        match authority.rfind('@') {
            Some(at) => {
                let userinfo = &authority[..at];
                match userinfo.find(':') {
                    Some(colon) => {
                        out.push_str(&userinfo[..colon]);
                        out.push_str(":***");
                    }
                    None => out.push_str(userinfo),
                }
                out.push_str(&authority[at..]);
            }
            None => out.push_str(authority),
        }
        rest = &tail[authority_end..];
    }
    out.push_str(rest);
    out
}

/// The commit checked out in a directory and whether its work tree differs from it.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct GitState {
    /// Full object name of HEAD (40 hex digits; 64 in SHA-256 repositories).
    pub sha: String,
    /// Anything in `git status --porcelain`: modified, staged, deleted or untracked
    /// (not ignored) files. Also true when HEAD was read but the status could not be.
    pub dirty: bool,
}

/// The git state of `dir`: `git -C dir rev-parse --verify HEAD` and `git -C dir status
/// --porcelain`, run from an argv without optional locks (so it never rewrites the index of
/// a repository someone is working in), ignoring GIT_DIR and friends inherited from a hook.
/// None when `dir` is not in a git repository, the repository has no commit yet, or git is
/// missing.
pub fn git_state(dir: &Path) -> Option<GitState> {
    let head = git(dir, &["rev-parse", "--verify", "--quiet", "HEAD"])?;
    if !head.status.success() {
        return None;
    }
    let sha = String::from_utf8_lossy(&head.stdout).trim().to_string();
    if !(sha.len() == 40 || sha.len() == 64) || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let dirty = match git(dir, &["status", "--porcelain"]) {
        Some(status) if status.status.success() => {
            !status.stdout.iter().all(|b| b.is_ascii_whitespace())
        }
        _ => true,
    };
    Some(GitState { sha, dirty })
}

fn git(dir: &Path, args: &[&str]) -> Option<std::process::Output> {
    let mut cmd = git_command(dir);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.output().ok()
}

/// `git --no-optional-locks -C dir`, the one way rubyrace starts git: it never rewrites the
/// index of a repository someone is working in, and ignores GIT_DIR and the other
/// variables a git hook of the caller would have set. The caller adds the arguments and
/// the stdio.
pub fn git_command(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("--no-optional-locks").arg("-C").arg(dir);
    for var in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_COMMON_DIR",
        "GIT_NAMESPACE",
        "GIT_PREFIX",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

// ---------------------------------------------------------------------------------------
// Parsing

struct Uname {
    nodename: String,
    release: String,
    version: String,
    machine: String,
}

fn uname() -> Option<Uname> {
    let u = nix::sys::utsname::uname().ok()?;
    let field = |s: &std::ffi::OsStr| s.to_string_lossy().trim().to_string();
    Some(Uname {
        nodename: field(u.nodename()),
        release: field(u.release()),
        version: field(u.version()),
        machine: field(u.machine()),
    })
}

fn join_nonempty(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (false, false) => format!("{a} {b}"),
        (false, true) => a.to_string(),
        _ => b.to_string(),
    }
}

/// `PRETTY_NAME` (else `NAME`) of an os-release file, unquoted.
fn parse_os_release(text: &str) -> Option<String> {
    let value = |key: &str| {
        text.lines().find_map(|line| {
            let rest = line.trim().strip_prefix(key)?.strip_prefix('=')?;
            let v = unquote_shell(rest.trim());
            (!v.is_empty()).then_some(v)
        })
    };
    value("PRETTY_NAME").or_else(|| value("NAME"))
}

/// os-release values are shell-style: optionally in '' or "", with \" \\ \$ \` escapes in "".
fn unquote_shell(v: &str) -> String {
    if let Some(inner) = v.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')) {
        return inner.to_string();
    }
    let Some(inner) = v.strip_prefix('"').and_then(|s| s.strip_suffix('"')) else {
        return v.to_string();
    };
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(n @ ('"' | '\\' | '$' | '`')) => out.push(n),
                Some(n) => {
                    out.push('\\');
                    out.push(n);
                }
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The first "model name" of /proc/cpuinfo (read here, not with procfs, whose `CpuInfo`
/// has no fallback); on architectures without one (some ARM, RISC-V,
/// POWER, MIPS), the first of "Model", "Hardware", "cpu model", "uarch", "cpu".
fn parse_cpu_model(text: &str) -> Option<String> {
    let first = |key: &str| {
        text.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            let v = v.trim();
            (k.trim() == key && !v.is_empty()).then(|| v.to_string())
        })
    };
    [
        "model name",
        "Model",
        "Hardware",
        "cpu model",
        "uarch",
        "cpu",
    ]
    .iter()
    .find_map(|k| first(k))
}

/// `0.52 0.58 0.59 1/1234 5678` → [0.52, 0.58, 0.59].
fn parse_loadavg(text: &str) -> Option<[f64; 3]> {
    let mut words = text
        .split_whitespace()
        .map(|w| w.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0));
    Some([words.next()??, words.next()??, words.next()??])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_describes_this_host() {
        let m = machine();
        assert!(!m.hostname.is_empty(), "{m:?}");
        assert!(!m.kernel.is_empty(), "{m:?}");
        assert!(!m.os.is_empty(), "{m:?}");
        assert!(!m.arch.is_empty(), "{m:?}");
        assert!(m.cpus_online >= 1, "{m:?}");
        assert!(m.memory_total_bytes > 64 * 1024 * 1024, "{m:?}");
        if cfg!(target_os = "linux") {
            let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
            assert!(m.kernel.starts_with(release.trim()), "{m:?}");
            if cfg!(target_arch = "x86_64") {
                assert!(!m.cpu_model.is_empty(), "{m:?}");
                assert_eq!(m.arch, "x86_64");
            }
            // MemTotal, in kB in /proc/meminfo.
            let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
            let kb: u64 = meminfo
                .lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
                .unwrap();
            assert_eq!(m.memory_total_bytes, kb * 1024);
        }
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(serde_json::from_str::<Machine>(&json).unwrap(), m);
    }

    #[test]
    fn parses_proc_and_etc_files() {
        let os_release = "NAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n";
        assert_eq!(
            parse_os_release(os_release).as_deref(),
            Some("Debian GNU/Linux 12 (bookworm)")
        );
        assert_eq!(parse_os_release("NAME=Alpine\n").as_deref(), Some("Alpine"));
        assert_eq!(
            parse_os_release("PRETTY_NAME='Fedora Linux 40'\n").as_deref(),
            Some("Fedora Linux 40")
        );
        assert_eq!(
            parse_os_release(r#"PRETTY_NAME="A \"quoted\" \$name""#).as_deref(),
            Some(r#"A "quoted" $name"#)
        );
        assert_eq!(parse_os_release("# nothing\n"), None);

        let cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\nmodel name\t: Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz\n\nprocessor\t: 1\nmodel name\t: Other\n";
        assert_eq!(
            parse_cpu_model(cpuinfo).as_deref(),
            Some("Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz")
        );
        let arm = "processor\t: 0\nBogoMIPS\t: 108.00\nCPU implementer\t: 0x41\n\nHardware\t: BCM2835\nModel\t\t: Raspberry Pi 4 Model B Rev 1.4\n";
        assert_eq!(
            parse_cpu_model(arm).as_deref(),
            Some("Raspberry Pi 4 Model B Rev 1.4")
        );
        assert_eq!(parse_cpu_model("processor : 0\n"), None);

        assert_eq!(
            parse_loadavg("0.52 0.58 1.59 1/1234 5678\n"),
            Some([0.52, 0.58, 1.59])
        );
        assert_eq!(parse_loadavg("0.52 0.58"), None);
        assert_eq!(parse_loadavg("a b c"), None);
    }

    #[test]
    fn load_average_is_read() {
        let load = load_average().expect("/proc/loadavg");
        assert!(load.iter().all(|v| v.is_finite() && *v >= 0.0), "{load:?}");
    }

    #[test]
    fn captured_env_keeps_what_matters_and_hides_credentials() {
        let env: BTreeMap<String, String> = [
            ("PATH", "/usr/bin:/bin"),
            ("HOME", "/root"),
            ("RUBYOPT", "--yjit"),
            ("RUBY_YJIT_ENABLE", "1"),
            ("RUBY_GC_HEAP_INIT_SLOTS", "600000"),
            ("TRUFFLERUBYOPT", "--jvm"),
            ("GEM_HOME", "/gems"),
            ("GEM_HOST_API_KEY", "rubygems_0123456789abcdef"),
            ("BUNDLE_GEMFILE", "/app/Gemfile"),
            ("BUNDLE_BUILD__NOKOGIRI", "--use-system-libraries"),
            ("BUNDLE_GEMS__CONTRIBSYS__COM", "user:hunter2"),
            (
                "BUNDLE_MIRROR__HTTPS://RUBYGEMS__ORG",
                "https://mirror.example/",
            ),
            ("GEM_SOURCE", "https://bob:hunter2@gems.example.com/private"),
            ("MALLOC_ARENA_MAX", "2"),
            ("MALLOC_CONF", "narenas:2"),
            ("LD_PRELOAD", "/usr/lib/libjemalloc.so.2"),
            ("LD_LIBRARY_PATH", "/opt/lib"),
            ("LD_BIND_NOW", "1"),
            ("GLIBC_TUNABLES", "glibc.malloc.arena_max=2"),
            ("JAVA_OPTS", "-Xmx1g"),
            ("JRUBY_OPTS", "--dev"),
            ("WEB_CONCURRENCY", "4"),
            ("RAILS_MAX_THREADS", "5"),
            ("SECRET_KEY_BASE", "abc"),
            ("MY_RUBY", "no: prefix only"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let extra = vec![
            "WEB_CONCURRENCY".to_string(),
            "SECRET_KEY_BASE".to_string(),
            "NOT_SET".to_string(),
        ];
        let got = captured_env(&env, &extra);
        let names: Vec<&str> = got.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "BUNDLE_BUILD__NOKOGIRI",
                "BUNDLE_GEMFILE",
                "BUNDLE_GEMS__CONTRIBSYS__COM",
                "BUNDLE_MIRROR__HTTPS://RUBYGEMS__ORG",
                "GEM_HOME",
                "GEM_HOST_API_KEY",
                "GEM_SOURCE",
                "GLIBC_TUNABLES",
                "JAVA_OPTS",
                "JRUBY_OPTS",
                "LD_LIBRARY_PATH",
                "LD_PRELOAD",
                "MALLOC_ARENA_MAX",
                "MALLOC_CONF",
                "RAILS_MAX_THREADS",
                "RUBYOPT",
                "RUBY_GC_HEAP_INIT_SLOTS",
                "RUBY_YJIT_ENABLE",
                "SECRET_KEY_BASE",
                "TRUFFLERUBYOPT",
                "WEB_CONCURRENCY",
            ]
        );
        assert_eq!(got["RUBYOPT"], "--yjit");
        assert_eq!(got["LD_PRELOAD"], "/usr/lib/libjemalloc.so.2");
        assert_eq!(got["BUNDLE_BUILD__NOKOGIRI"], "--use-system-libraries");
        assert_eq!(got["GEM_HOST_API_KEY"], REDACTED);
        assert_eq!(got["BUNDLE_GEMS__CONTRIBSYS__COM"], REDACTED);
        assert_eq!(got["BUNDLE_MIRROR__HTTPS://RUBYGEMS__ORG"], REDACTED);
        assert_eq!(got["SECRET_KEY_BASE"], REDACTED);
        assert_eq!(
            got["GEM_SOURCE"],
            "https://bob:***@gems.example.com/private"
        );
        assert!(captured_env(&BTreeMap::new(), &extra).is_empty());
    }

    #[test]
    fn url_passwords_are_redacted() {
        assert_eq!(redact_url_passwords("plain"), "plain");
        assert_eq!(redact_url_passwords("https://host/x"), "https://host/x");
        assert_eq!(
            redact_url_passwords("https://tok@host/x"),
            "https://tok@host/x"
        );
        assert_eq!(
            redact_url_passwords("a=https://u:p@h1 b=http://v:q@h2:8080/path?x"),
            "a=https://u:***@h1 b=http://v:***@h2:8080/path?x"
        );
    }

    /// Runs git in `dir` isolated from the user's and system's configuration.
    fn run_git(dir: &Path, args: &[&str]) {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args([
                "-c",
                "user.name=rubyrace test",
                "-c",
                "user.email=test@rubyrace.invalid",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE")
            .stdin(Stdio::null())
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// git is a prerequisite of these tests (every development machine has it): its absence
    /// fails them rather than letting them pass without checking anything.
    fn require_git() {
        let ok = Command::new("git")
            .arg("--version")
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        assert!(ok, "git is not installed: these tests need it");
    }

    #[test]
    fn git_state_follows_commits_and_edits() {
        require_git();
        let tmp = tempfile::Builder::new().prefix("git").tempdir().unwrap();
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        run_git(&repo, &["init", "--quiet"]);
        assert_eq!(git_state(&repo), None, "no commit yet");

        std::fs::write(
            repo.join("config.ru"),
            "run ->(env) { [200, {}, ['ok']] }\n",
        )
        .unwrap();
        run_git(&repo, &["add", "config.ru"]);
        run_git(&repo, &["commit", "--quiet", "-m", "first"]);
        let clean = git_state(&repo).expect("a repository with a commit");
        assert_eq!(clean.sha.len(), 40, "{clean:?}");
        assert!(
            clean.sha.bytes().all(|b| b.is_ascii_hexdigit()),
            "{clean:?}"
        );
        assert!(!clean.dirty, "{clean:?}");

        // From a subdirectory too.
        std::fs::create_dir_all(repo.join("app")).unwrap();
        assert_eq!(git_state(&repo.join("app")), Some(clean.clone()));

        std::fs::write(
            repo.join("config.ru"),
            "run ->(env) { [500, {}, ['no']] }\n",
        )
        .unwrap();
        let edited = git_state(&repo).unwrap();
        assert_eq!(edited.sha, clean.sha);
        assert!(edited.dirty, "modified file: {edited:?}");

        run_git(&repo, &["commit", "--quiet", "-a", "-m", "second"]);
        let second = git_state(&repo).unwrap();
        assert_ne!(second.sha, clean.sha);
        assert!(!second.dirty, "{second:?}");

        std::fs::write(repo.join("app/new.rb"), "").unwrap();
        assert!(git_state(&repo).unwrap().dirty, "untracked file");
        std::fs::write(repo.join(".gitignore"), "app/\n.gitignore\n").unwrap();
        assert!(
            !git_state(&repo).unwrap().dirty,
            "ignored files do not count"
        );
    }

    #[test]
    fn git_state_is_none_outside_a_repository() {
        let tmp = tempfile::Builder::new().prefix("nogit").tempdir().unwrap();
        assert_eq!(git_state(tmp.path()), None);
        assert_eq!(git_state(&tmp.path().join("missing")), None);
    }
}
