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

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags};
use nix::sched::sched_setaffinity;
use nix::sys::prctl::{get_child_subreaper, set_child_subreaper, set_pdeathsig};
use nix::sys::signal::{kill, killpg, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{getppid, Pid};
use serde::{Deserialize, Serialize};

/// What to start.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Launch {
    pub argv: Vec<String>,
    /// Added to (and overriding) the inherited environment.
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    /// Run on these CPUs only (`sched_setaffinity` before exec; its children inherit it).
    pub cpus: Option<crate::cpus::CpuSet>,
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
pub fn start_time(pid: i32) -> Option<u64> {
    proc_stat(pid).map(|s| s.start_time)
}

/// Whether any member of the process group is left (signal 0 only checks).
fn group_alive(pgid: i32) -> bool {
    killpg(Pid::from_raw(pgid), None).is_ok()
}

/// Signals the process group rubyrace created; never a pid it did not start. A group that
/// is gone already is not an error.
fn signal_group(pgid: i32, signal: Signal) {
    let _ = killpg(Pid::from_raw(pgid), signal);
}

/// SIGKILLs the process group `pgid`, one that the caller started (in a group of its
/// own); nothing for 0 or less.
pub fn kill_group(pgid: i32) {
    if pgid > 0 {
        signal_group(pgid, Signal::SIGKILL);
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
        Supervised::spawn_as(launch, log_dir, log_name, registry, None)
    }

    /// [`Supervised::spawn`], running as another user (`uid`, `gid`; supplementary groups
    /// dropped) when `user` is given: a server that refuses root (PostgreSQL).
    pub fn spawn_as(
        launch: &Launch,
        log_dir: &Path,
        log_name: &str,
        registry: &Path,
        user: Option<(u32, u32)>,
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
        if let Some((uid, gid)) = user {
            // std sets the group, drops supplementary groups (as root) and then the user
            // before it calls pre_exec below: the parent-death signal, which a change of
            // credentials clears, is therefore set after them and survives.
            command.uid(uid).gid(gid);
        }
        let mask = launch.cpus.as_ref().map(|c| c.mask());
        // SAFETY: only async-signal-safe calls (sched_setaffinity, prctl, getppid, _exit:
        // each one system call, no allocation) between fork and exec; the mask was built
        // before the fork.
        unsafe {
            command.pre_exec(move || {
                if let Some(mask) = &mask {
                    sched_setaffinity(Pid::from_raw(0), mask)?;
                }
                set_pdeathsig(Signal::SIGKILL)?;
                // rubyrace died between fork and prctl: do not run unsupervised.
                if getppid() != Pid::from_raw(parent) {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
        let child = command
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("cannot start {program}: {e}")))?;
        let pgid = child.id() as i32;
        own(pgid);
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

    /// Records the first process's end; from now on its pid is no longer ours.
    fn note_exit(&mut self, status: ExitStatus) {
        self.exit = Some(status);
        disown(self.pgid);
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
            if let Some(s) = self.child.try_wait().ok().flatten() {
                self.note_exit(s);
            }
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
                    self.note_exit(status);
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
    /// SIGINT to the group: what a profiler takes as "stop and write what you have".
    pub fn interrupt(&self) {
        signal_group(self.pgid, Signal::SIGINT);
    }

    pub fn stderr_tail(&self, max_bytes: u64) -> String {
        tail_file(&self.stderr_path, max_bytes)
    }

    /// TERM to the group; KILL to the group after `grace` if the first process has not
    /// ended. Leftover members (workers) are killed once the first process is gone.
    pub fn stop(&mut self, grace: Duration) -> Ended {
        self.stop_with(Signal::SIGTERM, grace)
    }

    /// [`Supervised::stop`] with another first signal than TERM (PostgreSQL's fast
    /// shutdown is INT; its TERM waits for every client to leave).
    pub fn stop_with(&mut self, first: Signal, grace: Duration) -> Ended {
        let asked = Instant::now();
        let (stopped_by, status) = if let Some(s) = self.exited() {
            ("exited", s)
        } else {
            signal_group(self.pgid, first);
            match self.wait_for_exit(grace) {
                Some(s) => ("term", s),
                None => {
                    signal_group(self.pgid, Signal::SIGKILL);
                    // A wait4 elsewhere may have reaped it already: then it died of the KILL.
                    let s = self
                        .child
                        .wait()
                        .unwrap_or_else(|_| ExitStatus::from_raw(libc::SIGKILL));
                    self.note_exit(s);
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
            signal_group(self.pgid, Signal::SIGTERM);
            let deadline = Instant::now() + grace.min(Duration::from_secs(5));
            // Members re-parented to rubyrace (a subreaper) stay zombies, and so "alive",
            // until rubyrace reaps them.
            while group_alive(self.pgid) && Instant::now() < deadline {
                reap_zombies();
                std::thread::sleep(Duration::from_millis(10));
            }
            signal_group(self.pgid, Signal::SIGKILL);
            let deadline = Instant::now() + Duration::from_secs(2);
            while group_alive(self.pgid) && Instant::now() < deadline {
                if reap_zombies() == 0 {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        }
        if let Some(r) = self.registration.take() {
            let _ = fs::remove_file(r);
        }
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        if self.registration.is_some() {
            signal_group(self.pgid, Signal::SIGKILL);
            let _ = self.child.wait();
            disown(self.pgid);
            if let Some(r) = self.registration.take() {
                let _ = fs::remove_file(r);
            }
        }
    }
}

/// The end of a file, at most `max_bytes`, starting at a line boundary.
pub fn tail_file(path: &Path, max_bytes: u64) -> String {
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

/// The line of a Ruby program's output that says what went wrong: the first uncaught
/// exception's message (`config.ru:3:in '<main>': boom at boot (RuntimeError)`, which Ruby
/// prints before the backtrace, so the end of a long log never shows it), or Puma's
/// `Unable to load application: ...`. Read from the first 64 KiB of the file. `None` when
/// no line looks like either.
pub fn ruby_error_line(path: &Path) -> Option<String> {
    let mut head = Vec::new();
    File::open(path)
        .ok()?
        .take(64 * 1024)
        .read_to_end(&mut head)
        .ok()?;
    let text = String::from_utf8_lossy(&head);
    text.lines()
        .find(|l| l.contains("Unable to load application: ") || is_ruby_exception_line(l))
        .map(|l| l.trim().to_string())
}

/// `path:line:in 'method': message (Some::ErrorClass)`: not a backtrace line (`\tfrom ...`),
/// ending with a constant in parentheses.
fn is_ruby_exception_line(line: &str) -> bool {
    if line.starts_with(char::is_whitespace) || !line.contains(": ") {
        return false;
    }
    let Some(inner) = line
        .trim_end()
        .strip_suffix(')')
        .and_then(|l| l.rsplit_once('('))
        .map(|(_, class)| class)
    else {
        return false;
    };
    inner.starts_with(|c: char| c.is_ascii_uppercase())
        && inner
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
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
                signal_group(pgid, Signal::SIGKILL);
                killed.push(format!("process group {pgid}"));
            }
        }
        let _ = fs::remove_file(&path);
    }
    killed
}

// ---------------------------------------------------------------------------------------
// Orphans: processes that left the server's process group
// ---------------------------------------------------------------------------------------
//
// A server that daemonizes (Process.daemon, or fork + setsid + fork) leaves its process
// group, where neither the group signals nor the parent-death signal reach it. rubyrace makes
// itself a child subreaper (`become_subreaper`), so such a process is re-parented to
// rubyrace when its parent exits; at the end of every trial `kill_orphans` kills and reaps
// every child of rubyrace that rubyrace did not start itself, and reports them.

/// Pids of the children rubyrace started and has not reaped yet: never touched by
/// `kill_orphans` or `reap_zombies` (their owner waits for them).
static OWNED: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// Marks `pid`, a child this process started and waits for itself, as rubyrace's own:
/// `kill_orphans` leaves it alone until it is disowned (a fleet's load agent lives over
/// many trials).
pub fn own(pid: i32) {
    OWNED.lock().unwrap_or_else(|e| e.into_inner()).insert(pid);
}

/// Undoes [`own`], once the child is reaped.
pub fn disown(pid: i32) {
    OWNED.lock().unwrap_or_else(|e| e.into_inner()).remove(&pid);
}

fn owned(pid: i32) -> bool {
    OWNED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains(&pid)
}

/// Makes this process a child subreaper: orphaned descendants (a daemonized server, a
/// worker whose master died) are re-parented to it instead of to init, so
/// `kill_orphans` can find and kill them.
pub fn become_subreaper() -> io::Result<()> {
    Ok(set_child_subreaper(true)?)
}

/// Whether this process is a child subreaper.
pub fn is_subreaper() -> bool {
    get_child_subreaper().unwrap_or(false)
}

/// The fields of /proc/PID/stat rubyrace needs (read with `procfs`, as `resources` does).
#[derive(Clone, Debug)]
pub struct ProcStat {
    pub pid: i32,
    pub state: char,
    pub ppid: i32,
    pub pgid: i32,
    /// The wait status of a zombie (field 52), 0 otherwise.
    pub exit_code: i32,
    /// Clock ticks from boot to the process's start (field 22).
    pub start_time: u64,
}

pub fn proc_stat(pid: i32) -> Option<ProcStat> {
    let stat = procfs::process::Process::new(pid).ok()?.stat().ok()?;
    Some(ProcStat {
        pid,
        state: stat.state,
        ppid: stat.ppid,
        pgid: stat.pgrp,
        exit_code: stat.exit_code.unwrap_or(0),
        start_time: stat.starttime,
    })
}

/// The command line of a process, NULs as spaces, at most 200 characters.
pub fn cmdline(pid: i32) -> String {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let mut text: String = String::from_utf8_lossy(&raw)
        .split('\0')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    if text.chars().count() > 200 {
        text = text.chars().take(200).collect::<String>() + "…";
    }
    text
}

/// The children of this process that rubyrace did not start (or has already reaped).
fn foreign_children() -> Vec<ProcStat> {
    let me = std::process::id() as i32;
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(proc_stat)
        .filter(|s| s.ppid == me && !owned(s.pid))
        .collect()
}

/// Reaps the zombie children of this process that rubyrace did not start (workers whose
/// master died, re-parented here). Returns how many were reaped.
pub fn reap_zombies() -> usize {
    let mut n = 0;
    for s in foreign_children().into_iter().filter(|s| s.state == 'Z') {
        // One zombie child of ours, by pid, without blocking.
        match waitpid(Pid::from_raw(s.pid), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(_) => {}
            Ok(_) => n += 1,
        }
    }
    n
}

/// A process that outlived its trial outside the server's process group.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Orphan {
    pub pid: i32,
    pub pgid: i32,
    pub cmdline: String,
}

/// Kills (SIGKILL) and reaps every child of this process that rubyrace did not start,
/// until none is left (a killed orphan's own children are re-parented here and killed in
/// the next round). Only direct children are signalled: a child's pid cannot be reused
/// before it is reaped, so no other process is ever hit. Returns the live ones that were
/// outside the process groups `groups` (their members were already signalled with them).
/// Call it once every server rubyrace started is stopped: a child that is alive then can
/// belong to any of them.
pub fn kill_orphans(groups: &[i32]) -> Vec<Orphan> {
    let mut found: Vec<Orphan> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let children = foreign_children();
        if children.is_empty() {
            break;
        }
        for s in &children {
            if s.state != 'Z' {
                if !groups.contains(&s.pgid) && !found.iter().any(|o| o.pid == s.pid) {
                    found.push(Orphan {
                        pid: s.pid,
                        pgid: s.pgid,
                        cmdline: cmdline(s.pid),
                    });
                }
                // A child of ours: its pid cannot be recycled until we reap it.
                let _ = kill(Pid::from_raw(s.pid), Signal::SIGKILL);
            }
            // WNOHANG: a child still dying is reaped next round.
            let _ = waitpid(Pid::from_raw(s.pid), Some(WaitPidFlag::WNOHANG));
        }
        if Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    found
}

/// Describes orphans for a trial's reason.
pub fn describe_orphans(orphans: &[Orphan]) -> String {
    let list: Vec<String> = orphans
        .iter()
        .map(|o| format!("pid {} ({})", o.pid, o.cmdline))
        .collect();
    format!(
        "{} left running outside its process group, killed by rubyrace: {}",
        if orphans.len() == 1 {
            "1 process was".to_string()
        } else {
            format!("{} processes were", orphans.len())
        },
        list.join(", ")
    )
}

// ---------------------------------------------------------------------------------------
// Deaths during the measurement
// ---------------------------------------------------------------------------------------

/// A process of the server's tree that ended while it was watched.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Death {
    pub pid: i32,
    pub cmdline: String,
    /// "killed by signal 9 (SIGKILL)", "exit status 1"; None when its parent reaped it
    /// before rubyrace could read it.
    pub status: Option<String>,
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// How long it had been watched when it ended.
    pub watched_s: f64,
}

impl Death {
    /// A death that spoils a measurement: by a signal, with a non-zero status, or of a
    /// process that had lived for a while (a status rubyrace could not read). A short-lived
    /// helper that exits 0 is normal.
    pub fn is_abnormal(&self) -> bool {
        self.signal.is_some()
            || self.code.is_some_and(|c| c != 0)
            || (self.status.is_none() && self.watched_s >= 1.0)
    }

    pub fn describe(&self) -> String {
        match &self.status {
            Some(s) => format!("pid {} ({}) ended: {s}", self.pid, self.cmdline),
            None => format!(
                "pid {} ({}) ended (its parent reaped it before its status could be read)",
                self.pid, self.cmdline
            ),
        }
    }
}

/// Watches the processes of a server's tree (root, its process group, their descendants)
/// and records every one that ends: a pidfd per process wakes the watcher the moment it
/// exits, while it is still a zombie, so its wait status (field 52 of /proc/PID/stat) can be
/// read before its parent reaps it. The tree is rescanned every 200 ms for new processes.
///
/// Dropping it without [`DeathWatch::finish`] (an interrupted trial) stops the thread too.
pub struct DeathWatch {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Vec<Death>>>,
}

struct Watched {
    fd: Option<OwnedFd>,
    cmdline: String,
    since: Instant,
}

fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: a fresh fd we own.
    Some(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

impl DeathWatch {
    pub fn start(root: i32, pgid: i32) -> DeathWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || watch(root, pgid, &flag));
        DeathWatch {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops watching; returns the deaths seen.
    pub fn finish(mut self) -> Vec<Death> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for DeathWatch {
    fn drop(&mut self) {
        // The thread sees the flag within its 50 ms poll and ends on its own.
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn watch(root: i32, pgid: i32, stop: &AtomicBool) -> Vec<Death> {
    const RESCAN: Duration = Duration::from_millis(200);
    let mut watched: BTreeMap<i32, Watched> = BTreeMap::new();
    let mut deaths = Vec::new();
    let mut next_scan = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        if Instant::now() >= next_scan {
            for pid in crate::resources::tree_pids(root, pgid).unwrap_or_default() {
                if watched.contains_key(&pid) || deaths.iter().any(|d: &Death| d.pid == pid) {
                    continue;
                }
                // A zombie already: too late to watch.
                if proc_stat(pid).is_none_or(|s| s.state == 'Z') {
                    continue;
                }
                watched.insert(
                    pid,
                    Watched {
                        fd: pidfd_open(pid),
                        cmdline: cmdline(pid),
                        since: Instant::now(),
                    },
                );
            }
            next_scan = Instant::now() + RESCAN;
        }
        // A pidfd becomes readable when its process ends; with none, a 50 ms sleep.
        let (polled, mut fds): (Vec<i32>, Vec<PollFd>) = watched
            .iter()
            .filter_map(|(pid, w)| {
                Some((*pid, PollFd::new(w.fd.as_ref()?.as_fd(), PollFlags::POLLIN)))
            })
            .unzip();
        let _ = poll(&mut fds, 50u16);
        let ready: Vec<i32> = polled
            .iter()
            .zip(&fds)
            .filter(|(_, p)| p.any().unwrap_or(false))
            .map(|(pid, _)| *pid)
            .collect();
        let ended: Vec<i32> = watched
            .iter()
            .filter(|(pid, w)| match &w.fd {
                Some(_) => ready.contains(pid),
                // No pidfd (an old kernel): poll /proc.
                None => proc_stat(**pid).is_none_or(|s| s.state == 'Z'),
            })
            .map(|(pid, _)| *pid)
            .collect();
        for pid in ended {
            let w = watched.remove(&pid).expect("watched");
            let zombie = proc_stat(pid).filter(|s| s.state == 'Z');
            let status = zombie.map(|s| ExitStatus::from_raw(s.exit_code));
            deaths.push(Death {
                pid,
                cmdline: w.cmdline,
                status: status.map(describe_status),
                code: status.and_then(|s| s.code()),
                signal: status.and_then(|s| s.signal()),
                watched_s: w.since.elapsed().as_secs_f64(),
            });
        }
    }
    deaths
}

/// A regular file with an execute bit: a program that can be run.
pub fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// The argv as a reader could paste it into a shell (for logs and messages only; nothing
/// runs it).
pub fn display_argv(argv: &[OsString]) -> String {
    argv.iter()
        .map(|a| {
            let s = a.to_string_lossy();
            let plain = !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-./=:,+@%~".contains(c));
            if plain {
                s.into_owned()
            } else {
                format!("'{}'", s.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ruby_error_line_is_found_before_its_backtrace() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("server.stderr");
        let mut text =
            String::from("Puma starting in single mode...\n* Listening on http://127.0.0.1:4000\n");
        text.push_str("/app/config.ru:3:in 'block in <main>': boom at boot (RuntimeError)\n");
        for i in 0..200 {
            text.push_str(&format!(
                "\tfrom /usr/lib/ruby/vendor_ruby/rack/builder.rb:{i}:in 'eval'\n"
            ));
        }
        std::fs::write(&log, &text).unwrap();
        assert_eq!(
            ruby_error_line(&log).as_deref(),
            Some("/app/config.ru:3:in 'block in <main>': boom at boot (RuntimeError)")
        );
        std::fs::write(
            &log,
            "! Unable to load application: NameError: uninitialized constant Foo\n",
        )
        .unwrap();
        assert!(ruby_error_line(&log).unwrap().contains("NameError"));
        std::fs::write(&log, "all is well (really)\nsee (man 1 ls)\n").unwrap();
        assert_eq!(ruby_error_line(&log), None);
    }

    fn launch(argv: &[&str]) -> Launch {
        Launch {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            env: vec![("RUBYRACE_TEST".into(), "1".into())],
            cwd: std::env::temp_dir(),
            cpus: None,
        }
    }

    #[test]
    fn an_argv_is_shown_as_a_shell_would_read_it() {
        assert_eq!(
            display_argv(&["/usr/bin/ruby".into(), "-e".into(), "print 'a'".into()]),
            r#"/usr/bin/ruby -e 'print '\''a'\'''"#
        );
        assert_eq!(display_argv(&["a=b".into(), "".into()]), "a=b ''");
    }

    #[test]
    fn stop_terminates_the_whole_group() {
        let tmp = tempfile::Builder::new()
            .prefix("process-group")
            .tempdir()
            .unwrap();
        let dir = tmp.path().to_path_buf();
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
        let tmp = tempfile::Builder::new()
            .prefix("process-ignore")
            .tempdir()
            .unwrap();
        let dir = tmp.path().to_path_buf();
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
        let tmp = tempfile::Builder::new()
            .prefix("process-leftover")
            .tempdir()
            .unwrap();
        let dir = tmp.path().to_path_buf();
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
        let tmp = tempfile::Builder::new()
            .prefix("process-recycled")
            .tempdir()
            .unwrap();
        let dir = tmp.path().to_path_buf();
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

    /// Waits until the process's stderr has `lines` lines; returns them.
    fn stderr_lines(s: &Supervised, lines: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let text = s.stderr_tail(1000);
            let got: Vec<String> = text.lines().map(str::to_string).collect();
            if got.len() >= lines || Instant::now() > deadline {
                return got;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn alive(pid: i32) -> bool {
        proc_stat(pid).is_some_and(|s| s.state != 'Z')
    }

    /// Becoming a subreaper changes the whole process, and `kill_orphans` kills every child
    /// it did not start: that test runs alone, in a child process of the test binary.
    #[test]
    fn daemons_come_back_to_the_subreaper_and_are_killed() {
        const NAME: &str = "process::tests::daemons_come_back_to_the_subreaper_and_are_killed";
        if std::env::var_os("RUBYRACE_SUBREAPER_TEST").is_none() {
            let out = Command::new(std::env::current_exe().unwrap())
                .args(["--exact", NAME, "--test-threads=1", "--nocapture"])
                .env("RUBYRACE_SUBREAPER_TEST", "1")
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(text.contains("1 passed"), "the test did not run: {text}");
            return;
        }
        assert!(!is_subreaper());
        become_subreaper().unwrap();
        assert!(is_subreaper());
        let tmp = tempfile::Builder::new()
            .prefix("process-subreaper")
            .tempdir()
            .unwrap();
        let dir = tmp.path().to_path_buf();

        // Process.daemon: fork, setsid, the first process exits at once.
        let mut s = Supervised::spawn(
            &launch(&[
                "ruby",
                "-e",
                "Process.daemon(true, true); $stderr.puts Process.pid; sleep 60",
            ]),
            &dir,
            "daemon",
            &dir.join("live"),
        )
        .unwrap();
        let daemon: i32 = stderr_lines(&s, 1)[0].parse().unwrap();
        assert!(s.wait_for_exit(Duration::from_secs(10)).is_some());
        assert!(alive(daemon));
        assert_eq!(proc_stat(daemon).unwrap().ppid, unsafe { libc::getpid() });
        s.stop(Duration::from_secs(1));
        let orphans = kill_orphans(&[s.pid()]);
        assert_eq!(orphans.len(), 1, "{orphans:?}");
        assert_eq!(orphans[0].pid, daemon);
        assert!(
            orphans[0].cmdline.starts_with("ruby -e Process.daemon"),
            "{orphans:?}"
        );
        assert!(!alive(daemon), "the daemon survived");
        assert!(describe_orphans(&orphans).starts_with(&format!(
            "1 process was left running outside its process group, killed by rubyrace: pid {daemon} (ruby -e"
        )));

        // fork + setsid + fork: the middle process leaves the group, the grandchild is its
        // child until the middle one is killed, then comes back here and is killed too.
        let mut s = Supervised::spawn(
            &launch(&[
                "ruby",
                "-e",
                "fork { Process.setsid; fork { $stderr.puts Process.pid; sleep 60 }; sleep 60 }; sleep 60",
            ]),
            &dir,
            "double",
            &dir.join("live"),
        )
        .unwrap();
        let grandchild: i32 = stderr_lines(&s, 1)[0].parse().unwrap();
        s.stop(Duration::from_secs(1));
        assert!(alive(grandchild));
        let orphans = kill_orphans(&[s.pid()]);
        assert_eq!(orphans.len(), 2, "{orphans:?}");
        assert!(orphans.iter().any(|o| o.pid == grandchild), "{orphans:?}");
        assert!(!alive(grandchild));
        // Nothing is left, and a child rubyrace owns is never touched.
        let mut owned =
            Supervised::spawn(&launch(&["sleep", "60"]), &dir, "own", &dir.join("live")).unwrap();
        assert!(kill_orphans(&[0]).is_empty());
        assert!(owned.exited().is_none(), "an owned child was killed");
        owned.stop(Duration::from_secs(1));
    }

    #[test]
    fn a_worker_killed_by_a_signal_is_seen_with_its_signal() {
        let tmp = tempfile::Builder::new()
            .prefix("process-death")
            .tempdir()
            .unwrap();
        let dir = tmp.path().to_path_buf();
        // A master that forks a worker and reaps nothing for 30 s.
        let mut s = Supervised::spawn(
            &launch(&[
                "ruby",
                "-e",
                "pid = fork { sleep 60 }; $stderr.puts pid; sleep 30",
            ]),
            &dir,
            "server",
            &dir.join("live"),
        )
        .unwrap();
        let worker: i32 = stderr_lines(&s, 1)[0].parse().unwrap();
        let watch = DeathWatch::start(s.pid(), s.pid());
        std::thread::sleep(Duration::from_millis(400));
        // SAFETY: the worker of the server this test started.
        unsafe { libc::kill(worker, libc::SIGKILL) };
        std::thread::sleep(Duration::from_millis(200));
        let deaths = watch.finish();
        s.stop(Duration::from_secs(1));
        assert_eq!(deaths.len(), 1, "{deaths:?}");
        let d = &deaths[0];
        assert_eq!(
            (d.pid, d.signal, d.code),
            (worker, Some(libc::SIGKILL), None)
        );
        assert!(d.is_abnormal());
        assert!(
            d.describe()
                .ends_with(") ended: killed by signal 9 (SIGKILL)"),
            "{}",
            d.describe()
        );
        // A helper that exits 0 is normal.
        let helper = Death {
            pid: 1,
            cmdline: String::new(),
            status: Some("exit status 0".into()),
            code: Some(0),
            signal: None,
            watched_s: 5.0,
        };
        assert!(!helper.is_abnormal());
    }

    #[test]
    fn tail_cuts_to_whole_lines() {
        let tmp = tempfile::Builder::new()
            .prefix("process-tail")
            .tempdir()
            .unwrap();
        let dir = tmp.path().to_path_buf();
        let f = dir.join("t");
        fs::write(&f, "first line\nsecond line\nthird\n").unwrap();
        assert_eq!(tail_file(&f, 15), "third\n");
        assert_eq!(tail_file(&f, 1000), "first line\nsecond line\nthird\n");
    }
}
