//! What a user typed for a Ruby ("ruby", "~/.rbenv/versions/3.3.0/bin/ruby", "./bin/ruby")
//! resolved to an existing executable, with errors that say where it was looked for.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail};

use sys::process::is_executable_file;

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
pub(super) fn resolve_in(
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
