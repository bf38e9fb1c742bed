//! One writer per results directory. A run (or a resume) holds an exclusive advisory lock
//! (`flock`) on `DIR/writer.lock` for its whole life; the kernel releases it when the
//! process ends, however it ends (Ctrl-C, SIGKILL, a crash), so a stale lock cannot exist.
//! The file holds the writer's pid and start time, so that a second writer is refused with
//! them, and a reader (`rubyrace report` on a run in progress) can say who is writing
//! instead of suggesting a resume. Without it, a `--resume` two seconds after a start took
//! the live run's servers for leftovers, killed them, and both processes measured the same
//! blocks at once into the same store.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

/// The lock file of a results directory.
pub const WRITER_FILE: &str = "writer.lock";

/// A held writer lock; dropping it (or the process ending) releases it.
#[derive(Debug)]
pub struct WriterLock {
    _lock: Flock<File>,
}

/// Who holds a results directory's writer lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Writer {
    pub pid: u32,
    /// When it took the lock (RFC 3339, UTC), as it wrote it.
    pub since: String,
}

impl std::fmt::Display for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pid {}", self.pid)?;
        if !self.since.is_empty() {
            write!(f, ", since {}", self.since)?;
        }
        Ok(())
    }
}

/// Takes the writer lock of `dir` (which must exist), or says who holds it. A reader's
/// check holds a shared lock for an instant, so a refusal is retried for half a second
/// before it is final.
pub fn acquire(dir: &Path) -> Result<WriterLock> {
    let path = dir.join(WRITER_FILE);
    let deadline = Instant::now() + Duration::from_millis(500);
    loop {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(mut lock) => {
                let record = format!("{}\n{}\n", std::process::id(), super::now());
                lock.set_len(0)
                    .and_then(|()| lock.rewind())
                    .and_then(|()| lock.write_all(record.as_bytes()))
                    .and_then(|()| lock.sync_data())
                    .with_context(|| format!("cannot write {}", path.display()))?;
                return Ok(WriterLock { _lock: lock });
            }
            Err((_, Errno::EWOULDBLOCK)) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(25));
            }
            Err((_, Errno::EWOULDBLOCK)) => {
                let who = read_writer(&path)
                    .map(|w| format!("another rubyrace ({w})"))
                    .unwrap_or_else(|| "another rubyrace".into());
                bail!(
                    "{} is being written by {who}: a results directory has one writer at a time; wait for that run to end (`rubyrace report {}` reads it meanwhile), or stop it with Ctrl-C and then resume",
                    dir.display(),
                    dir.display()
                );
            }
            Err((_, e)) => bail!("cannot lock {}: {e}", path.display()),
        }
    }
}

/// The process writing `dir` now, if any: a reader's check, which changes nothing (the lock
/// file is opened only if it exists, and a shared lock is taken and dropped at once).
pub fn current_writer(dir: &Path) -> Option<Writer> {
    let path = dir.join(WRITER_FILE);
    let file = File::open(&path).ok()?;
    match Flock::lock(file, FlockArg::LockSharedNonblock) {
        Ok(_free) => None,
        Err((_, Errno::EWOULDBLOCK)) => Some(read_writer(&path).unwrap_or(Writer {
            pid: 0,
            since: String::new(),
        })),
        Err(_) => None,
    }
}

fn read_writer(path: &Path) -> Option<Writer> {
    let mut text = String::new();
    File::open(path).ok()?.read_to_string(&mut text).ok()?;
    let mut lines = text.lines();
    let pid = lines.next()?.trim().parse().ok()?;
    let since = lines.next().unwrap_or("").trim().to_string();
    Some(Writer { pid, since })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_writer_at_a_time_and_readers_see_it() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(current_writer(dir.path()), None, "no lock file yet");
        let lock = acquire(dir.path()).unwrap();
        let writer = current_writer(dir.path()).expect("a writer");
        assert_eq!(writer.pid, std::process::id());
        // flock locks belong to the open file: a second open in this process conflicts as
        // another process's would.
        let refused = acquire(dir.path()).unwrap_err().to_string();
        assert!(
            refused.contains(&format!("another rubyrace (pid {}", std::process::id())),
            "{refused}"
        );
        drop(lock);
        assert_eq!(current_writer(dir.path()), None);
        let _again = acquire(dir.path()).unwrap();
    }
}
