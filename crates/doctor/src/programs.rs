//! Programs rubyrace uses or measures against: `perf` and `rbspy` (profiles), PostgreSQL
//! and Redis (`[services]`), `wrk`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::Duration;

use crate::finding::{Finding, Status};
use crate::readers::{on_path, read_trimmed};
use crate::{COMMAND_TIMEOUT, MAX_PERF_PARANOID};

/// What a program printed.
pub(crate) struct Ran {
    pub(crate) status: Option<ExitStatus>,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    pub(crate) timed_out: bool,
}

/// Runs `program args...` (no shell) with stdin closed, in a process group of its own,
/// capturing its output ([`rubies::discovery::run_captured`]). Past `timeout` the group (which
/// only this child and its own children are in) is killed.
pub(crate) fn run_program(
    program: &Path,
    args: &[&OsStr],
    env_remove: &[&str],
    timeout: Duration,
) -> std::io::Result<Ran> {
    let mut cmd = Command::new(program);
    cmd.args(args);
    for name in env_remove {
        cmd.env_remove(name);
    }
    let out = rubies::discovery::run_captured(cmd, timeout)?;
    Ok(Ran {
        status: Some(out.status),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        timed_out: out.timed_out,
    })
}

/// The first non-empty line of a program's output.
pub(crate) fn first_line(text: &str) -> &str {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
}

pub(crate) fn perf_finding() -> Finding {
    let paranoid: Option<i64> =
        read_trimmed("/proc/sys/kernel/perf_event_paranoid").and_then(|v| v.parse().ok());
    let perf = on_path("perf");
    let version = perf.as_ref().map(|p| version_of(p, &["--version"]));
    // SAFETY: geteuid has no preconditions.
    let root = nix::unistd::geteuid().is_root();
    let mut value = match paranoid {
        Some(p) => format!("perf_event_paranoid {p}"),
        None => {
            "no perf events in this kernel (no /proc/sys/kernel/perf_event_paranoid)".to_string()
        }
    };
    if root {
        value.push_str(" (running as root: not limited by it)");
    }
    match (&perf, &version) {
        (Some(p), Some(Ok(v))) => value.push_str(&format!("; {v} ({})", p.display())),
        (Some(_), Some(Err(e))) => value.push_str(&format!("; {e}")),
        _ => value.push_str("; no perf on PATH"),
    }
    let mut advice = Vec::new();
    if paranoid.is_some_and(|p| p > MAX_PERF_PARANOID) && !root {
        advice.push(format!(
            "counters (`perf stat`) and profiles of the servers need perf_event_paranoid of \
             {MAX_PERF_PARANOID} or less: \
             `sudo sysctl kernel.perf_event_paranoid={MAX_PERF_PARANOID}`"
        ));
    }
    if paranoid.is_none() {
        advice.push("this kernel (or container) offers no perf events".to_string());
    }
    if !matches!(version, Some(Ok(_))) {
        advice.push(
            "to profile a server, install perf for this kernel (Debian: linux-perf)".to_string(),
        );
    }
    if advice.is_empty() {
        Finding::ok("perf", value)
    } else {
        Finding::new("perf", Status::Info, value, advice.join("; "))
    }
}

pub(crate) fn wrk_finding() -> Finding {
    let Some(wrk) = on_path("wrk") else {
        return Finding::new(
            "wrk",
            Status::Info,
            "no wrk on PATH",
            "wrk is only needed to cross-check rubyrace load against another load generator \
             (Debian: apt install wrk)",
        );
    };
    // `wrk -v` prints its version line and usage, and exits 1.
    match run_program(&wrk, &[OsStr::new("-v")], &[], COMMAND_TIMEOUT) {
        Ok(ran) if !ran.timed_out => {
            let line = first_line(&ran.stdout);
            let line = line.split(" Copyright").next().unwrap_or(line).trim();
            if line.starts_with("wrk") {
                Finding::ok("wrk", format!("{line} ({})", wrk.display()))
            } else {
                Finding::new(
                    "wrk",
                    Status::Info,
                    format!("{} did not print a version: {line:?}", wrk.display()),
                    "",
                )
            }
        }
        Ok(_) => Finding::new(
            "wrk",
            Status::Info,
            format!("{} did not answer -v", wrk.display()),
            "",
        ),
        Err(e) => Finding::new(
            "wrk",
            Status::Info,
            format!("{} cannot run: {e}", wrk.display()),
            "",
        ),
    }
}

/// The version line `program ARGS` prints, or why there is none.
fn version_of(program: &Path, args: &[&str]) -> Result<String, String> {
    let argv: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    match run_program(program, &argv, &[], COMMAND_TIMEOUT) {
        Ok(ran) if ran.status.is_some_and(|s| s.success()) => {
            Ok(first_line(&ran.stdout).to_string())
        }
        Ok(ran) if ran.timed_out => Err(format!(
            "{} did not answer {}",
            program.display(),
            args.join(" ")
        )),
        Ok(ran) => Err(format!(
            "{} failed: {}",
            program.display(),
            first_line(&format!("{}\n{}", ran.stderr, ran.stdout))
        )),
        Err(e) => Err(format!("{} cannot run: {e}", program.display())),
    }
}

/// rbspy (Ruby stacks for `profile = ["rbspy"]`), and whether the kernel lets it read
/// another process: Yama's `ptrace_scope` 2 allows it to root only, 3 to no one.
pub(crate) fn rbspy_finding() -> Finding {
    let scope: Option<i64> =
        read_trimmed("/proc/sys/kernel/yama/ptrace_scope").and_then(|v| v.parse().ok());
    let root = nix::unistd::geteuid().is_root();
    let scope_text = match scope {
        Some(s) => format!("ptrace_scope {s}"),
        None => "no Yama ptrace_scope (ptrace limited by ownership only)".to_string(),
    };
    let Some(rbspy) = on_path("rbspy") else {
        return Finding::new(
            "rbspy",
            Status::Info,
            format!("no rbspy on PATH; {scope_text}"),
            "only needed for profile = [\"rbspy\"]: `cargo install rbspy` (scripts/setup installs it)",
        );
    };
    let version = version_of(&rbspy, &["--version"]);
    let value = match &version {
        Ok(v) => format!("{v} ({}); {scope_text}", rbspy.display()),
        Err(e) => format!("{e}; {scope_text}"),
    };
    let blocked = match scope {
        Some(3) => Some("ptrace_scope 3 forbids reading any other process, even as root: rbspy cannot profile a server on this machine until a reboot"),
        Some(2) if !root => Some("ptrace_scope 2 lets only root read another process: run rubyrace as root, give rbspy CAP_SYS_PTRACE, or `sudo sysctl kernel.yama.ptrace_scope=1`"),
        _ => None,
    };
    match (version, blocked) {
        (Ok(_), None) => Finding::ok("rbspy", value),
        (Ok(_), Some(advice)) => Finding::new("rbspy", Status::Warn, value, advice),
        (Err(_), advice) => Finding::new(
            "rbspy",
            Status::Warn,
            value,
            advice.unwrap_or("reinstall rbspy (`cargo install rbspy`)"),
        ),
    }
}

/// The newest `/usr/lib/postgresql/N/bin` holding `postgres` (Debian's layout): the
/// PostgreSQL `[services.postgres]` runs unless `bin_dir` says otherwise.
pub fn newest_postgres_bin() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("postgres").is_file().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

/// PostgreSQL and Redis, as `[services]` would find them (both optional: only experiments
/// with services need them).
pub(crate) fn services_finding() -> Finding {
    let postgres = match newest_postgres_bin() {
        Some(bin) => version_of(&bin.join("postgres"), &["--version"])
            .map(|v| format!("{v} ({})", bin.display())),
        None => Err("no /usr/lib/postgresql/*/bin/postgres".to_string()),
    };
    let redis = match on_path("redis-server") {
        Some(path) => version_of(&path, &["--version"]).map(|v| {
            let v = v.split(" sha=").next().unwrap_or(&v).to_string();
            format!("{v} ({})", path.display())
        }),
        None => Err("no redis-server on PATH".to_string()),
    };
    let value = format!(
        "PostgreSQL: {}; Redis: {}",
        postgres.as_ref().unwrap_or_else(|e| e),
        redis.as_ref().unwrap_or_else(|e| e)
    );
    let mut missing = Vec::new();
    if postgres.is_err() {
        missing.push("postgresql");
    }
    if redis.is_err() {
        missing.push("redis-server");
    }
    if missing.is_empty() {
        Finding::ok("services", value)
    } else {
        Finding::new(
            "services",
            Status::Info,
            value,
            format!(
                "only needed for experiments with [services]: `apt install {}` (scripts/setup installs them)",
                missing.join(" ")
            ),
        )
    }
}
