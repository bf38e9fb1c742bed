//! A trial's directory (`trials/NNNNN/`): the files a trial writes there, cleared before
//! an attempt and listed in its record after it, and what a failed write means (the disk
//! is full: the run stops, nothing half-written is recorded).

use std::fs;
use std::path::Path;

use results::store::trial_files::{LATENCY_HLOG, SERVER_STDERR, SERVER_STDOUT};

use super::Stop;
use crate::probe;

/// Bytes of server stderr kept in the result (the whole file stays on disk).
pub(super) const STDERR_TAIL: u64 = 4000;

/// Errors that mean "the disk cannot take more", not "this trial went wrong".
pub fn is_storage_error(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOSPC | libc::EFBIG | libc::EDQUOT | libc::EROFS | libc::EIO)
    )
}

/// A file of the trial that could not be written: the trial stops without a result.
pub(super) fn write_failed(path: &Path, e: &std::io::Error) -> Stop {
    Stop::WriteFailed(format!("cannot write {}: {e}", path.display()))
}

/// Names of the files a trial writes in its directory.
fn is_trial_file(name: &str) -> bool {
    let stem = name.split('.').next().unwrap_or("");
    let run_log = stem
        .strip_prefix("run")
        .is_some_and(|n| n.parse::<u32>().is_ok())
        && (name.ends_with(".stdout") || name.ends_with(".stderr"));
    [SERVER_STDOUT, SERVER_STDERR, LATENCY_HLOG, probe::PROBE_DIR].contains(&name)
        || name.starts_with(results::profile::FILE_PREFIX)
        || name == experiment::servers::UNICORN_CONFIG
        || name == experiment::servers::PUMA_CONFIG
        || run_log
}

/// Removes the files an earlier attempt wrote in `dir` (only those: a spec naming some
/// other directory never loses anything else), creating it if need be.
pub(super) fn prepare(dir: &Path) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    for entry in fs::read_dir(dir)?.flatten() {
        if is_trial_file(&entry.file_name().to_string_lossy()) {
            if entry.file_type()?.is_dir() {
                fs::remove_dir_all(entry.path())?;
            } else {
                fs::remove_file(entry.path())?;
            }
        }
    }
    Ok(())
}

/// The trial's files in `dir`, sorted, for its record.
pub(super) fn list(dir: &Path) -> Vec<String> {
    let mut files: Vec<String> = fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| is_trial_file(name))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_trial_files_are_cleaned_up() {
        assert!(
            is_trial_file("server.stderr")
                && is_trial_file("run12.stdout")
                && is_trial_file("latency.hlog")
        );
        assert!(
            !is_trial_file("notes.txt")
                && !is_trial_file("runner.stdout")
                && !is_trial_file("server.rb")
        );
    }
}
