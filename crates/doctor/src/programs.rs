//! Programs rubyrace uses or measures against: `perf`, `wrk`.

use std::ffi::OsStr;
use std::path::Path;
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
    let version = perf.as_ref().map(|p| {
        match run_program(p, &[OsStr::new("--version")], &[], COMMAND_TIMEOUT) {
            Ok(ran) if ran.status.is_some_and(|s| s.success()) => {
                Ok(first_line(&ran.stdout).to_string())
            }
            Ok(ran) if ran.timed_out => Err("did not answer --version".to_string()),
            Ok(ran) => Err(format!(
                "`perf --version` failed: {}",
                first_line(&format!("{}\n{}", ran.stderr, ran.stdout))
            )),
            Err(e) => Err(format!("cannot run: {e}")),
        }
    });
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
        (Some(p), Some(Err(e))) => value.push_str(&format!("; {} {e}", p.display())),
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
