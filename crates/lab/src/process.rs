//! Supervision of the processes a trial starts: spawned from an argv (never a shell) in a
//! process group of their own, stopped with TERM to the whole group and KILL after a grace
//! period, and never left behind.
//!
//! Three things keep a killed or crashed rubyrace from leaving servers running:
//! - the server's first process gets a parent-death signal (SIGKILL), so it dies with
//!   rubyrace; forked workers of Puma and Unicorn exit when their master goes;
//! - every live server group is registered as a file in the results directory, and the
//!   next `rubyrace run --resume` kills whatever registered group is still alive (checking
//!   the process start time, so a recycled pid is never touched);
//! - dropping a `Supervised` kills its group.
//!
//! The parent-death signal fires when the *thread* that spawned the child exits, so
//! servers must be spawned from a thread that outlives them (rubyrace uses its main thread).

use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// What to start.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Launch {
    pub argv: Vec<String>,
    /// Added to (and overriding) the inherited environment.
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
}

/// How a supervised process ended.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Ended {
    /// e.g. "exit status 0", "killed by signal 9 (SIGKILL)".
    pub status: String,
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// "term" (stopped by TERM), "kill" (needed KILL after the grace period) or "exited"
    /// (it had ended on its own before the stop).
    pub stopped_by: String,
    /// Seconds from the stop request to the end of the process.
    pub stop_s: f64,
}

/// A process group started by rubyrace.
pub struct Supervised {
    child: Child,
    pgid: i32,
    stdout_path: PathBuf,
    stderr_path: PathBuf,
    registration: Option<PathBuf>,
    exit: Option<ExitStatus>,
}

/// Describes an exit status in words.
pub fn describe_status(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("killed by signal {sig} ({})", signal_name(sig)),
        _ => format!("{status}"),
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGABRT => "SIGABRT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        libc::SIGBUS => "SIGBUS",
        _ => "signal",
    }
}

/// The start time of a process (clock ticks since boot), to tell a pid from its reuse.
fn start_time(pid: i32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    // Field 22 overall is the 20th after the command name.
    rest.split_whitespace().nth(19)?.parse().ok()
}

fn group_alive(pgid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks for existence and permission.
    unsafe { libc::kill(-pgid, 0) == 0 }
}

fn signal_group(pgid: i32, sig: i32) {
    // SAFETY: signals the process group rubyrace created; never a pid it did not start.
    unsafe {
        libc::kill(-pgid, sig);
    }
}

impl Supervised {
    /// Starts `launch` in a new process group with stdout and stderr going to files in
    /// `log_dir`, registered in `registry` (a directory) while it lives.
    pub fn spawn(
        launch: &Launch,
        log_dir: &Path,
        log_name: &str,
        registry: &Path,
    ) -> io::Result<Supervised> {
        let program = launch
            .argv
            .first()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty argv"))?;
        fs::create_dir_all(log_dir)?;
        fs::create_dir_all(registry)?;
        let stdout_path = log_dir.join(format!("{log_name}.stdout"));
        let stderr_path = log_dir.join(format!("{log_name}.stderr"));
        let stdout = File::create(&stdout_path)?;
        let stderr = File::create(&stderr_path)?;
        let parent = std::process::id() as i32;
        let mut command = Command::new(program);
        command
            .args(&launch.argv[1..])
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&launch.cwd)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .process_group(0);
        // SAFETY: only async-signal-safe calls (prctl, getppid, _exit) between fork and exec.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                ) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                // rubyrace died between fork and prctl: do not run unsupervised.
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
        let child = command
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("cannot start {program}: {e}")))?;
        let pgid = child.id() as i32;
        let registration = registry.join(format!("{pgid}.pid"));
        let started = start_time(pgid).unwrap_or(0);
        fs::write(&registration, format!("{pgid} {started}\n"))?;
        Ok(Supervised {
            child,
            pgid,
            stdout_path,
            stderr_path,
            registration: Some(registration),
            exit: None,
        })
    }

    pub fn pid(&self) -> i32 {
        self.pgid
    }

    pub fn stdout_path(&self) -> &Path {
        &self.stdout_path
    }

    pub fn stderr_path(&self) -> &Path {
        &self.stderr_path
    }

    /// The exit status if the first process has ended (it is reaped).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().ok().flatten();
        }
        self.exit
    }

    /// Waits up to `timeout` for the first process to end on its own.
    pub fn wait_for_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.exited() {
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits for the first process to end, returning its status, its resource usage
    /// (`wait4`: the process and the children it waited for) and the wall time from
    /// `since`. Gives up after `timeout` or when `interrupt` is set, returning `None` with
    /// the process still running.
    pub fn wait_with_usage(
        &mut self,
        since: Instant,
        timeout: Duration,
        interrupt: &std::sync::atomic::AtomicBool,
    ) -> Option<(ExitStatus, libc::rusage, Duration)> {
        let pid = self.pgid;
        let (tx, rx) = std::sync::mpsc::channel();
        // A blocking wait4 on a helper thread, so the wall time is taken the moment the
        // process ends rather than at the next poll.
        std::thread::spawn(move || {
            let mut status = 0;
            // SAFETY: rusage is plain data that wait4 fills in.
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: waits for our own child by pid, writing into valid locals.
            let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
            let wall = since.elapsed();
            let _ = tx.send((r, status, usage, wall));
        });
        let deadline = Instant::now() + timeout;
        loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok((r, status, usage, wall)) if r == pid => {
                    let status = ExitStatus::from_raw(status);
                    self.exit = Some(status);
                    return Some((status, usage, wall));
                }
                Ok(_) => return None,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if interrupt.load(std::sync::atomic::Ordering::SeqCst)
                        || Instant::now() >= deadline
                    {
                        return None;
                    }
                }
                Err(_) => return None,
            }
        }
    }

    /// The last `max_bytes` of what the process wrote to stderr, cut to whole lines.
    pub fn stderr_tail(&self, max_bytes: u64) -> String {
        tail(&self.stderr_path, max_bytes)
    }

    /// TERM to the group; KILL to the group after `grace` if the first process has not
    /// ended. Leftover members (workers) are killed once the first process is gone.
    pub fn stop(&mut self, grace: Duration) -> Ended {
        let asked = Instant::now();
        let (stopped_by, status) = if let Some(s) = self.exited() {
            ("exited", s)
        } else {
            signal_group(self.pgid, libc::SIGTERM);
            match self.wait_for_exit(grace) {
                Some(s) => ("term", s),
                None => {
                    signal_group(self.pgid, libc::SIGKILL);
                    // A wait4 elsewhere may have reaped it already: then it died of the KILL.
                    let s = self
                        .child
                        .wait()
                        .unwrap_or_else(|_| ExitStatus::from_raw(libc::SIGKILL));
                    self.exit = Some(s);
                    ("kill", s)
                }
            }
        };
        let stop_s = asked.elapsed().as_secs_f64();
        self.reap_group(grace);
        Ended {
            status: describe_status(status),
            code: status.code(),
            signal: status.signal(),
            stopped_by: stopped_by.into(),
            stop_s,
        }
    }

    /// Makes sure no member of the group survives, then forgets the registration.
    fn reap_group(&mut self, grace: Duration) {
        if group_alive(self.pgid) {
            // Workers whose master is gone: give them the grace period, then KILL.
            signal_group(self.pgid, libc::SIGTERM);
            let deadline = Instant::now() + grace.min(Duration::from_secs(5));
            while group_alive(self.pgid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            signal_group(self.pgid, libc::SIGKILL);
        }
        if let Some(r) = self.registration.take() {
            let _ = fs::remove_file(r);
        }
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        if self.registration.is_some() {
            signal_group(self.pgid, libc::SIGKILL);
            let _ = self.child.wait();
            if let Some(r) = self.registration.take() {
                let _ = fs::remove_file(r);
            }
        }
    }
}

/// The end of a file, at most `max_bytes`, starting at a line boundary.
pub fn tail(path: &Path, max_bytes: u64) -> String {
    let Ok(mut f) = File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(max_bytes);
    if f.seek(SeekFrom::Start(start)).is_err() {
        return String::new();
    }
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf).into_owned();
    if start > 0 {
        if let Some(i) = text.find('\n') {
            return text[i + 1..].to_string();
        }
    }
    text
}

/// Kills every registered server group that is still alive (a previous rubyrace was
/// killed before it could stop them). Returns what it killed, for the log.
pub fn kill_registered_leftovers(registry: &Path) -> Vec<String> {
    let mut killed = Vec::new();
    let Ok(entries) = fs::read_dir(registry) else {
        return killed;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(text) = fs::read_to_string(&path) else {
            continue;
        };
        let mut fields = text.split_whitespace();
        let pgid: Option<i32> = fields.next().and_then(|f| f.parse().ok());
        let started: Option<u64> = fields.next().and_then(|f| f.parse().ok());
        if let (Some(pgid), Some(started)) = (pgid, started) {
            // The group leader may be gone while workers live on; only trust a group
            // whose leader is the very process registered, or whose leader is gone.
            let leader = start_time(pgid);
            let same = !matches!(leader, Some(t) if t != started);
            if pgid > 1 && same && group_alive(pgid) {
                signal_group(pgid, libc::SIGKILL);
                killed.push(format!("process group {pgid}"));
            }
        }
        let _ = fs::remove_file(&path);
    }
    killed
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testutil::TempDir;

    fn launch(argv: &[&str]) -> Launch {
        Launch {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            env: vec![("RUBYRACE_TEST".into(), "1".into())],
            cwd: std::env::temp_dir(),
        }
    }

    #[test]
    fn stop_terminates_the_whole_group() {
        let tmp = TempDir::new("process-group");
        let dir = tmp.0.clone();
        // A parent that forks a child ignoring nothing; both sleep.
        let mut s = Supervised::spawn(
            &launch(&[
                "ruby",
                "-e",
                "fork { sleep 60 }; $stderr.puts ENV['RUBYRACE_TEST']; sleep 60",
            ]),
            &dir,
            "server",
            &dir.join("live"),
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(500));
        assert!(group_alive(s.pid()));
        assert_eq!(fs::read_dir(dir.join("live")).unwrap().count(), 1);
        let ended = s.stop(Duration::from_secs(5));
        assert_eq!(ended.stopped_by, "term");
        assert_eq!(ended.signal, Some(libc::SIGTERM), "{ended:?}");
        assert!(!group_alive(s.pid()), "a worker survived");
        assert_eq!(s.stderr_tail(100).trim(), "1");
        assert_eq!(fs::read_dir(dir.join("live")).unwrap().count(), 0);
    }

    #[test]
    fn a_process_ignoring_term_is_killed_after_the_grace_period() {
        let tmp = TempDir::new("process-ignore");
        let dir = tmp.0.clone();
        let mut s = Supervised::spawn(
            &launch(&[
                "ruby",
                "-e",
                "trap('TERM') {}; $stderr.puts 'ready'; sleep 60",
            ]),
            &dir,
            "server",
            &dir.join("live"),
        )
        .unwrap();
        // Wait until the trap is installed.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !s.stderr_tail(100).contains("ready") && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let ended = s.stop(Duration::from_millis(300));
        assert_eq!(ended.stopped_by, "kill");
        assert_eq!(ended.status, "killed by signal 9 (SIGKILL)");
        assert!(ended.stop_s >= 0.3);
    }

    #[test]
    fn leftovers_of_a_dead_harness_are_killed_by_registration() {
        let tmp = TempDir::new("process-leftover");
        let dir = tmp.0.clone();
        let registry = dir.join("live");
        let mut s =
            Supervised::spawn(&launch(&["sleep", "60"]), &dir, "server", &registry).unwrap();
        let pgid = s.pid();
        // Pretend rubyrace died: forget the child without stopping it.
        s.registration = None;
        let registered = registry.join(format!("{pgid}.pid"));
        assert!(registered.exists());
        let killed = kill_registered_leftovers(&registry);
        assert_eq!(killed, vec![format!("process group {pgid}")]);
        assert!(s.wait_for_exit(Duration::from_secs(5)).is_some());
        assert!(!registered.exists());
    }

    #[test]
    fn a_recycled_pid_is_not_killed() {
        let tmp = TempDir::new("process-recycled");
        let dir = tmp.0.clone();
        let registry = dir.join("live");
        fs::create_dir_all(&registry).unwrap();
        let mut s = Supervised::spawn(&launch(&["sleep", "60"]), &dir, "other", &dir.join("other"))
            .unwrap();
        // A registration with the right pid but another start time.
        fs::write(registry.join("x.pid"), format!("{} 1\n", s.pid())).unwrap();
        assert!(kill_registered_leftovers(&registry).is_empty());
        assert!(
            s.exited().is_none(),
            "a process that was not ours got killed"
        );
        s.stop(Duration::from_secs(1));
    }

    #[test]
    fn tail_cuts_to_whole_lines() {
        let tmp = TempDir::new("process-tail");
        let dir = tmp.0.clone();
        let f = dir.join("t");
        fs::write(&f, "first line\nsecond line\nthird\n").unwrap();
        assert_eq!(tail(&f, 15), "third\n");
        assert_eq!(tail(&f, 1000), "first line\nsecond line\nthird\n");
    }
}
