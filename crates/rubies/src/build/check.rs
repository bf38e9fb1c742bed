//! Asking a built interpreter what it is: `ruby ARGS` run from an argv, in its own process
//! group, without the caller's RUBYOPT/RUBYLIB, and killed after a timeout. Used after
//! `make install` and before a cached build is reused.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{anyhow, bail};
use sys::process::{describe_status, display_argv};

/// How long the built interpreter may take to answer one check.
const CHECK_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `ruby -e 'print RUBY_DESCRIPTION'`: the description, or why it does not run.
pub(super) fn check_runs(ruby: &Path) -> anyhow::Result<String> {
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
pub(super) fn ask(ruby: &Path, args: &[&str]) -> anyhow::Result<String> {
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
