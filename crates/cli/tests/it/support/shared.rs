//! Fixtures made once per test run and read by many tests: a results directory that tests
//! only read, the doctor's full examination. cargo-nextest runs each test in a process of
//! its own, so a `OnceLock` would make the fixture once per test; here the first test that
//! asks makes it, under a file lock, into a directory named by the run (`NEXTEST_RUN_ID`;
//! under `cargo test`, this process), and every later test of the run reads that directory.
//!
//! A fixture whose making fails (its test panics) is not used: a marker file says it is
//! complete, and the lock is released with the process or the unwinding, so the next test
//! that asks makes it again, from an empty directory, and fails with its own message. It
//! is made where it is read (paths stored inside it stay true).

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Where this run's fixtures live: `target/tmp/shared/<run>`.
fn run_directory() -> PathBuf {
    let run = std::env::var("NEXTEST_RUN_ID")
        .unwrap_or_else(|_| format!("process-{}", std::process::id()));
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("shared")
        .join(run)
}

/// Removes the fixtures of runs that ended more than a day ago (a later `make test` on the
/// same checkout would otherwise keep every earlier run's directories).
fn remove_old_runs(shared: &Path) {
    let Ok(entries) = std::fs::read_dir(shared) else {
        return;
    };
    let day_ago = SystemTime::now() - Duration::from_secs(24 * 3600);
    for entry in entries.flatten() {
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t < day_ago);
        if old {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// An exclusive `flock` on `path`, held until the file is dropped.
fn locked(path: &Path) -> File {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("open the lock file {}: {e}", path.display()));
    // SAFETY: flock on a descriptor this function owns; no memory is shared.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
    assert_eq!(
        rc,
        0,
        "flock {}: {}",
        path.display(),
        std::io::Error::last_os_error()
    );
    file
}

/// The directory of the fixture `name` for this test run: made by `make` (given an empty
/// directory to fill) by the first test that asks, read as it is by the others.
pub fn fixture(name: &str, make: impl FnOnce(&Path)) -> PathBuf {
    let run = run_directory();
    if !run.exists() {
        remove_old_runs(run.parent().unwrap());
    }
    std::fs::create_dir_all(&run).unwrap();
    let dir = run.join(name);
    let complete = run.join(format!("{name}.complete"));
    let _lock = locked(&run.join(format!("{name}.lock")));
    if !complete.exists() {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        make(&dir);
        std::fs::write(&complete, b"").unwrap();
    }
    dir
}
