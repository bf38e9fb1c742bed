//! Whole-process-tree resource sampling from `/proc`.
//!
//! A server under test (Puma with forked workers, Unicorn, ...) is a *tree* of processes: a
//! master plus workers that may come and go. Measuring only the master would miss almost all of
//! the memory and CPU, so this module sums the figures of every process in the tree:
//!
//! * the root (the master) and all its descendants, found by walking `ppid` links over `/proc`;
//! * plus every process whose process group equals the server's pgid (and their descendants),
//!   so a worker that was reparented (double fork, dead intermediate parent) is still counted.
//!
//! [`sample_tree`] takes one snapshot; [`Sampler`] takes snapshots on a background thread during
//! the measured phase of a trial and reduces them to a [`ResourceSummary`] (start/end snapshots,
//! peaks, CPU time and context switches consumed during the phase).
//!
//! Sources per process: `stat` (tree links, CPU ticks, thread count), `smaps_rollup`
//! (Rss/Pss/USS), `status` (VmHWM) and `task/TID/status` (context switches, which the kernel only
//! reports per thread). Processes vanishing mid-read (workers exiting) are skipped, not errors.
//! With each sample the sampler also reads the machine's CPU counters, so the trial's noise
//! record (`crate::noise`) covers exactly the window of the tree's CPU figures.

use std::collections::{HashMap, HashSet};
use std::io;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use procfs::process::{Process, Stat};
use procfs::ProcError;

use crate::noise::{MachineCounters, NoiseRecord};

/// Resource figures of a whole process tree at one instant. Every field is a sum over the
/// processes of the tree.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct TreeSample {
    /// Live (non-zombie) processes in the tree.
    pub processes: u32,
    /// Sum of `num_threads` of the live processes.
    pub threads: u32,
    /// Sum of `Rss` from `/proc/PID/smaps_rollup`. Pages shared between workers (copy-on-write
    /// from the master) are counted once per process, so this over-states the real footprint.
    pub rss_bytes: u64,
    /// Sum of `Pss` (shared pages divided among their sharers): the best "footprint" figure.
    pub pss_bytes: u64,
    /// Sum of `Private_Clean + Private_Dirty (+ Private_Hugetlb)`: memory that would be freed if
    /// the processes exited.
    pub uss_bytes: u64,
    /// Sum of `VmHWM` (each process's kernel-recorded peak RSS) from `/proc/PID/status`.
    pub hwm_bytes: u64,
    /// Sum of `utime + cutime` (cutime: CPU of dead children the process waited for), in µs.
    /// Zombies still waiting to be reaped are included, so CPU does not drop when a worker exits.
    pub cpu_user_us: u64,
    /// Sum of `stime + cstime`, in µs.
    pub cpu_system_us: u64,
    /// Sum over all live threads of `voluntary_ctxt_switches`.
    pub ctx_voluntary: u64,
    /// Sum over all live threads of `nonvoluntary_ctxt_switches`.
    pub ctx_involuntary: u64,
    /// Each live process's own memory, by pid: what a master and each of its workers hold
    /// (memory per worker, copy-on-write sharing after a preloading fork).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<MemberMemory>,
}

/// One process's memory within a [`TreeSample`] (the same `smaps_rollup` figures).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct MemberMemory {
    pub pid: i32,
    pub rss_bytes: u64,
    pub pss_bytes: u64,
    pub uss_bytes: u64,
}

/// Converts a procfs error to an `io::Error`, keeping "not found" recognisable.
fn to_io(e: ProcError) -> io::Error {
    match e {
        ProcError::NotFound(_) => io::Error::new(io::ErrorKind::NotFound, e.to_string()),
        ProcError::PermissionDenied(_) => {
            io::Error::new(io::ErrorKind::PermissionDenied, e.to_string())
        }
        ProcError::Io(inner, _) => inner,
        other => io::Error::other(other.to_string()),
    }
}

/// Outcome of reading one file of a process that may exit at any moment.
enum Read<T> {
    Ok(T),
    /// The process (or thread) exited: skip it.
    Gone,
}

/// Classifies a procfs result: `NotFound` (ENOENT/ESRCH) means the process is gone. Other errors
/// (a read cut short, ...) also count as "gone" if the process is no longer alive; otherwise they
/// are real errors.
fn read_or_gone<T>(r: procfs::ProcResult<T>, proc: &Process) -> io::Result<Read<T>> {
    match r {
        Ok(v) => Ok(Read::Ok(v)),
        Err(ProcError::NotFound(_)) => Ok(Read::Gone),
        Err(_) if !proc.is_alive() => Ok(Read::Gone),
        Err(e) => Err(to_io(e)),
    }
}

/// Converts clock ticks to microseconds.
fn ticks_to_us(ticks: u64, ticks_per_second: u64) -> u64 {
    // u128: no overflow even for absurd tick counts.
    (u128::from(ticks) * 1_000_000 / u128::from(ticks_per_second.max(1))) as u64
}

/// Lists the processes of the tree: `root` and every process whose process group is `pgid`, plus
/// all their descendants. Returns the `stat` of each member, sorted by pid.
fn tree_members(root: i32, pgid: i32) -> io::Result<Vec<Stat>> {
    // Only the parsed `stat`s are kept: each `Process` holds an open fd on its /proc directory,
    // and keeping one per process of the system could exhaust RLIMIT_NOFILE.
    let mut all: HashMap<i32, Stat> = HashMap::new();
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for p in procfs::process::all_processes().map_err(to_io)? {
        // Processes listed but gone (or unreadable) before we read `stat` are skipped.
        let Ok(stat) = p.and_then(|p| p.stat()) else {
            continue;
        };
        children.entry(stat.ppid).or_default().push(stat.pid);
        all.insert(stat.pid, stat);
    }

    // Seeds: the root, and the process-group members (pgid 0 would match kernel threads).
    let mut stack: Vec<i32> = Vec::new();
    if all.contains_key(&root) {
        stack.push(root);
    }
    if pgid > 0 {
        stack.extend(all.values().filter(|s| s.pgrp == pgid).map(|s| s.pid));
    }
    // Depth-first walk down the ppid links.
    let mut seen: HashSet<i32> = HashSet::new();
    while let Some(pid) = stack.pop() {
        if seen.insert(pid) {
            if let Some(kids) = children.get(&pid) {
                stack.extend(kids.iter().copied());
            }
        }
    }
    let mut members: Vec<Stat> = seen
        .into_iter()
        .filter_map(|pid| all.remove(&pid))
        .collect();
    members.sort_by_key(|s| s.pid);
    Ok(members)
}

/// Pids of the tree rooted at `root` (plus members of process group `pgid` and their
/// descendants), sorted, including zombies not yet reaped.
pub fn tree_pids(root: i32, pgid: i32) -> io::Result<Vec<i32>> {
    Ok(tree_members(root, pgid)?
        .into_iter()
        .map(|s| s.pid)
        .collect())
}

/// Memory and context-switch figures of one live process.
#[derive(Default)]
struct ProcMem {
    rss: u64,
    pss: u64,
    uss: u64,
    hwm: u64,
    ctx_voluntary: u64,
    ctx_involuntary: u64,
}

/// Reads smaps_rollup, status and the per-thread statuses of one live process.
fn read_process(proc: &Process) -> io::Result<Read<ProcMem>> {
    let mut m = ProcMem::default();

    // smaps_rollup: procfs parses the `Key: N kB` lines into bytes.
    let rollup = match read_or_gone(proc.smaps_rollup(), proc)? {
        Read::Ok(r) => r,
        Read::Gone => return Ok(Read::Gone),
    };
    // A process whose address space is already torn down yields no entry at all.
    let Some(map) = rollup.memory_map_rollup.0.first() else {
        return Ok(Read::Gone);
    };
    let field = |k: &str| map.extension.map.get(k).copied().unwrap_or(0);
    m.rss = field("Rss");
    m.pss = field("Pss");
    m.uss = field("Private_Clean") + field("Private_Dirty") + field("Private_Hugetlb");

    let status = match read_or_gone(proc.status(), proc)? {
        Read::Ok(s) => s,
        Read::Gone => return Ok(Read::Gone),
    };
    m.hwm = status.vmhwm.unwrap_or(0) * 1024;

    // Context switches are per thread: /proc/PID/status only shows the main thread's.
    let tasks = match read_or_gone(proc.tasks(), proc)? {
        Read::Ok(t) => t,
        Read::Gone => return Ok(Read::Gone),
    };
    for task in tasks {
        // A thread that exits between listing and reading is simply skipped.
        let Ok(task) = task else { continue };
        let s = if task.tid == proc.pid() {
            // The main thread's status is the process status we already have.
            (
                status.voluntary_ctxt_switches,
                status.nonvoluntary_ctxt_switches,
            )
        } else {
            match task.status() {
                Ok(ts) => (ts.voluntary_ctxt_switches, ts.nonvoluntary_ctxt_switches),
                Err(ProcError::NotFound(_)) => continue,
                Err(_) if !proc.is_alive() => return Ok(Read::Gone),
                // Other thread-level errors (a read cut short as the thread exits) are skipped
                // rather than failing the whole sample.
                Err(_) => continue,
            }
        };
        m.ctx_voluntary += s.0.unwrap_or(0);
        m.ctx_involuntary += s.1.unwrap_or(0);
    }
    Ok(Read::Ok(m))
}

/// One snapshot of the tree rooted at `root` (also including members of process group `pgid`
/// and their descendants).
///
/// Fails with `ErrorKind::NotFound` if the tree has no live process left, and with other errors
/// if `/proc` cannot be read (e.g. permission denied on another user's process).
pub fn sample_tree(root: i32, pgid: i32) -> io::Result<TreeSample> {
    let tps = procfs::ticks_per_second();
    let mut sample = TreeSample::default();
    let mut cpu_user_ticks = 0u64;
    let mut cpu_system_ticks = 0u64;

    for stat in tree_members(root, pgid)? {
        // CPU comes from `stat`, already read while listing. It is counted even for a zombie or
        // a process that exits during this sample: its times are final and would otherwise
        // dip out of the sum until the parent reaps it into its own cutime.
        cpu_user_ticks += stat.utime + stat.cutime.max(0) as u64;
        cpu_system_ticks += stat.stime + stat.cstime.max(0) as u64;
        if matches!(stat.state, 'Z' | 'X') {
            continue; // dead: no memory, no threads
        }
        let proc = match Process::new(stat.pid) {
            Ok(p) => p,
            Err(ProcError::NotFound(_)) => continue, // exited since the listing
            Err(e) => return Err(to_io(e)),
        };
        let Read::Ok(m) = read_process(&proc)? else {
            continue;
        };
        sample.processes += 1;
        sample.threads += u32::try_from(stat.num_threads.max(0)).unwrap_or(u32::MAX);
        sample.rss_bytes += m.rss;
        sample.pss_bytes += m.pss;
        sample.uss_bytes += m.uss;
        sample.members.push(MemberMemory {
            pid: stat.pid,
            rss_bytes: m.rss,
            pss_bytes: m.pss,
            uss_bytes: m.uss,
        });
        sample.hwm_bytes += m.hwm;
        sample.ctx_voluntary += m.ctx_voluntary;
        sample.ctx_involuntary += m.ctx_involuntary;
    }
    if sample.processes == 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no live process in the tree of pid {root} / process group {pgid}"),
        ));
    }
    sample.cpu_user_us = ticks_to_us(cpu_user_ticks, tps);
    sample.cpu_system_us = ticks_to_us(cpu_system_ticks, tps);
    Ok(sample)
}

/// The CPU time of a whole process tree so far (dead children included), in µs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub user_us: u64,
    pub system_us: u64,
}

impl CpuTimes {
    pub fn total_us(&self) -> u64 {
        self.user_us + self.system_us
    }

    /// The CPU time spent between `earlier` and `self` (saturating: a process that ended
    /// in between and was reaped by no one in the tree takes its time with it).
    pub fn since(&self, earlier: &CpuTimes) -> CpuTimes {
        CpuTimes {
            user_us: self.user_us.saturating_sub(earlier.user_us),
            system_us: self.system_us.saturating_sub(earlier.system_us),
        }
    }

    pub fn plus(&self, other: &CpuTimes) -> CpuTimes {
        CpuTimes {
            user_us: self.user_us + other.user_us,
            system_us: self.system_us + other.system_us,
        }
    }
}

/// `sample_tree`'s CPU times alone, without the memory figures. The kernel counts in clock
/// ticks (10 ms at the usual 100 Hz), per process.
pub fn tree_cpu(root: i32, pgid: i32) -> io::Result<CpuTimes> {
    Ok(ticks_of(&tree_members(root, pgid)?))
}

fn ticks_of(members: &[Stat]) -> CpuTimes {
    let tps = procfs::ticks_per_second();
    let (mut user, mut system) = (0u64, 0u64);
    for stat in members {
        user += stat.utime + stat.cutime.max(0) as u64;
        system += stat.stime + stat.cstime.max(0) as u64;
    }
    CpuTimes {
        user_us: ticks_to_us(user, tps),
        system_us: ticks_to_us(system, tps),
    }
}

impl CpuTimes {
    /// The same user/system split, scaled to a total of `total_us`.
    fn scaled_to(&self, total_us: u64) -> CpuTimes {
        let ticks = self.total_us();
        let user_us = if ticks == 0 {
            total_us
        } else {
            (u128::from(total_us) * u128::from(self.user_us) / u128::from(ticks)) as u64
        };
        CpuTimes {
            user_us,
            system_us: total_us - user_us,
        }
    }
}

/// The tree's CPU time at one instant, read at the edges of the short windows of the
/// interleaved and co-scheduled designs, two ways: the kernel's clock-tick counts per
/// process (as `tree_cpu`), and every live thread's run time in nanoseconds
/// (`/proc/PID/task/TID/schedstat`, the scheduler's own `sum_exec_runtime`). Clock ticks
/// truncate each reading by up to 10 ms per counter, which is 2% of a 500 ms window of one
/// CPU; the scheduler's counter does not.
#[derive(Clone, Debug)]
pub struct CpuReading {
    ticks: CpuTimes,
    /// Processes in the tree at this reading: each truncates its tick counts on its own.
    processes: usize,
    /// Run time per thread id, in ns; `None` where the kernel does not give it.
    threads_ns: Option<HashMap<i32, u64>>,
    /// Time each thread spent runnable but waiting for a CPU (`run_delay`), ns.
    threads_wait_ns: HashMap<i32, u64>,
}

/// The tree's CPU time over a window.
#[derive(Clone, Copy, Debug)]
pub struct CpuWindow {
    pub times: CpuTimes,
    /// From the threads' nanosecond counters (the user/system split still from the ticks);
    /// false: from clock ticks, because a thread of the tree ended within the window and
    /// took its time with it, or the kernel gives no per-thread counters.
    pub fine: bool,
    /// How long the tree's threads were runnable but waited for a CPU (the scheduler's
    /// `run_delay`), µs; only with `fine` counters.
    pub waited_us: Option<u64>,
}

/// Reads `CpuReading` for the tree of `root` and process group `pgid`.
pub fn read_tree_cpu(root: i32, pgid: i32) -> io::Result<CpuReading> {
    Ok(reading_of(&tree_members(root, pgid)?))
}

/// Reads a server tree's CPU time at many edges in a row (held-open slices' edges, every
/// few tens of milliseconds). Listing a tree scans every process of the machine: 3.3 ms of
/// CPU a read on this project's 2-CPU VM (a Rails Puma, 2026-11-27), which at two reads
/// per 20 ms slice would take a quarter of the load generator's CPU. So the tree's
/// processes are listed once, and each read takes only their `stat` and their threads'
/// `schedstat`: 0.28 ms for that Puma's 10 threads (`edge_read_cost` below).
/// A listed process that ends drops out (its time leaves the counters, and `since` falls
/// back to clock ticks as it does for any thread that ended); one started after the
/// listing is not seen.
pub struct TreeCpuReader {
    pids: Vec<i32>,
}

impl TreeCpuReader {
    /// Lists the tree of `root` and process group `pgid` now.
    pub fn new(root: i32, pgid: i32) -> io::Result<TreeCpuReader> {
        Ok(TreeCpuReader {
            pids: tree_members(root, pgid)?.iter().map(|s| s.pid).collect(),
        })
    }

    /// The listed processes' CPU time now.
    pub fn read(&self) -> io::Result<CpuReading> {
        let members: Vec<Stat> = self
            .pids
            .iter()
            .filter_map(|&pid| Process::new(pid).and_then(|p| p.stat()).ok())
            .collect();
        if members.is_empty() {
            return Err(io::Error::other(format!(
                "none of the server's processes ({:?}) is left",
                self.pids
            )));
        }
        Ok(reading_of(&members))
    }
}

/// The CPU time of `members` and their threads now.
fn reading_of(members: &[Stat]) -> CpuReading {
    let mut threads: Option<HashMap<i32, u64>> = Some(HashMap::new());
    let mut threads_wait_ns = HashMap::new();
    'members: for stat in members {
        let Ok(process) = Process::new(stat.pid) else {
            continue; // gone since the listing: its threads are missed, and `since` says so
        };
        let Ok(tasks) = process.tasks() else { continue };
        for task in tasks {
            let Ok(task) = task else { continue };
            match task.schedstat() {
                Ok(s) => {
                    if let Some(map) = threads.as_mut() {
                        map.insert(task.tid, s.sum_exec_runtime);
                    }
                    threads_wait_ns.insert(task.tid, s.run_delay);
                }
                Err(ProcError::NotFound(_)) => {}
                Err(_) => {
                    threads = None;
                    break 'members;
                }
            }
        }
    }
    CpuReading {
        ticks: ticks_of(members),
        processes: members.len(),
        threads_ns: threads,
        threads_wait_ns,
    }
}

impl CpuReading {
    /// The CPU time from `earlier` to this reading: from the threads' counters when every
    /// thread alive at `earlier` is still alive and never went backwards (a thread born in
    /// between counts whole), and the clock ticks do not show more time than those threads
    /// account for; else from clock ticks.
    ///
    /// The last condition catches a thread born and ended within the window (a WEBrick
    /// thread per connection, say): it is in neither list of threads, but the kernel adds
    /// its time to its process's ticks. Each reading truncates each process's user and
    /// system counts (its own and its reaped children's) by less than a tick, so ticks
    /// over the threads' sum by more than four ticks per process is time no live thread
    /// holds. Seen before this check: a WEBrick of 3.3.8 whose connection threads ended
    /// with the load counted 7 ms for a phase of 200 ms.
    pub fn since(&self, earlier: &CpuReading) -> CpuWindow {
        let ticks = self.ticks.since(&earlier.ticks);
        let tick_us = ticks_to_us(1, procfs::ticks_per_second());
        let slack_us = 4 * tick_us * self.processes.max(earlier.processes).max(1) as u64;
        match self
            .fine_ns_since(earlier)
            .filter(|ns| ticks.total_us() <= ns / 1000 + slack_us)
        {
            Some(ns) => CpuWindow {
                times: ticks.scaled_to(ns / 1000),
                fine: true,
                waited_us: Some(
                    counted_since(&self.threads_wait_ns, &earlier.threads_wait_ns) / 1000,
                ),
            },
            None => CpuWindow {
                times: ticks,
                fine: false,
                waited_us: None,
            },
        }
    }

    fn fine_ns_since(&self, earlier: &CpuReading) -> Option<u64> {
        let (before, after) = (earlier.threads_ns.as_ref()?, self.threads_ns.as_ref()?);
        if before
            .iter()
            .any(|(tid, &then)| after.get(tid).is_none_or(|&now| now < then))
        {
            return None;
        }
        Some(counted_since(after, before))
    }
}

/// The growth of per-thread counters from `before` to `after`: a thread alive at both
/// counts its difference, a thread born in between counts whole, a thread gone counts
/// nothing.
fn counted_since(after: &HashMap<i32, u64>, before: &HashMap<i32, u64>) -> u64 {
    after
        .iter()
        .map(|(tid, &now)| now.saturating_sub(before.get(tid).copied().unwrap_or(0)))
        .sum()
}

/// Resources of the tree over the measured phase of a trial.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ResourceSummary {
    /// First good sample: at the start of the measured phase.
    pub start: TreeSample,
    /// Last good sample: at the end of the measured phase (or before the tree vanished).
    pub end: TreeSample,
    /// Max over samples of the tree-summed Rss.
    pub peak_rss_bytes: u64,
    pub peak_pss_bytes: u64,
    pub peak_uss_bytes: u64,
    pub peak_threads: u32,
    pub peak_processes: u32,
    /// Number of good samples, `start` and `end` included.
    pub samples: u32,
    /// `end - start` (saturating) of the tree's user CPU time, in µs.
    pub cpu_user_us: u64,
    pub cpu_system_us: u64,
    /// `end - start` (saturating) of the context switches.
    pub ctx_voluntary: u64,
    pub ctx_involuntary: u64,
    /// Wall time between the `start` and `end` samples, in µs (CPU utilisation is
    /// `(cpu_user_us + cpu_system_us) / elapsed_us`).
    pub elapsed_us: u64,
}

impl ResourceSummary {
    /// Total CPU time (user + system) consumed during the phase, in µs.
    pub fn cpu_total_us(&self) -> u64 {
        self.cpu_user_us + self.cpu_system_us
    }
}

/// Why a [`Sampler`] has no summary.
#[derive(Debug, thiserror::Error)]
pub enum SamplerError {
    /// Not one sample of the tree of `root` succeeded; the last sample's error, if one was
    /// taken.
    #[error(
        "no resource sample of the process tree of pid {root} succeeded: {}",
        last_error_text(.last_error)
    )]
    NoSample {
        root: i32,
        last_error: Option<io::Error>,
    },
    /// The sampling thread panicked.
    #[error("the resource sampler thread panicked")]
    Panicked,
}

fn last_error_text(last_error: &Option<io::Error>) -> String {
    match last_error {
        Some(e) => e.to_string(),
        None => "no sample taken".to_string(),
    }
}

/// Accumulates good samples into a summary.
#[derive(Default)]
struct Acc {
    first: Option<(Instant, TreeSample)>,
    last: Option<(Instant, TreeSample)>,
    /// The machine's counters read with the first and the last good sample, for the noise
    /// record of the same window.
    first_machine: Option<MachineCounters>,
    last_machine: Option<MachineCounters>,
    /// The registry of the other process groups rubyrace runs (services such as PostgreSQL,
    /// profilers), whose CPU is the run's own, not other work: their CPU time at the first
    /// good sample and at the end sample, summed over the groups alive at each (if the end
    /// sample fails, the window's companions count nothing: other work reads high, never
    /// low).
    companions: Option<std::path::PathBuf>,
    first_companions_us: Option<u64>,
    last_companions_us: Option<u64>,
    summary: ResourceSummary,
    last_error: Option<io::Error>,
}

impl Acc {
    /// One sample of the tree; `edge`: the end of the window (the first good sample is its
    /// start). The companions' CPU is read at the edges only: each group costs a scan of
    /// /proc, which the samples in between do not need.
    fn take(&mut self, root: i32, pgid: i32, edge: bool) {
        // Read just before the tree, so both describe (nearly) the same instant.
        let machine = MachineCounters::read();
        let companions = if edge || self.first.is_none() {
            self.companions.as_deref().map(|registry| {
                crate::registry::registered_groups(registry)
                    .into_iter()
                    .filter(|&g| g != pgid)
                    .filter_map(|g| tree_cpu(g, g).ok())
                    .map(|t| t.total_us())
                    .sum::<u64>()
            })
        } else {
            None
        };
        match sample_tree(root, pgid) {
            Ok(s) => {
                if self.first.is_none() {
                    self.first_machine = machine;
                    self.first_companions_us = companions;
                }
                self.last_machine = machine;
                if companions.is_some() {
                    self.last_companions_us = companions;
                }
                let now = Instant::now();
                let sum = &mut self.summary;
                sum.samples += 1;
                sum.peak_rss_bytes = sum.peak_rss_bytes.max(s.rss_bytes);
                sum.peak_pss_bytes = sum.peak_pss_bytes.max(s.pss_bytes);
                sum.peak_uss_bytes = sum.peak_uss_bytes.max(s.uss_bytes);
                sum.peak_threads = sum.peak_threads.max(s.threads);
                sum.peak_processes = sum.peak_processes.max(s.processes);
                if self.first.is_none() {
                    self.first = Some((now, s.clone()));
                }
                self.last = Some((now, s));
            }
            Err(e) => self.last_error = Some(e),
        }
    }

    /// The summary, and the noise over the window of its first and last samples.
    fn finish_with_noise(
        self,
        root: i32,
    ) -> (Result<ResourceSummary, SamplerError>, Option<NoiseRecord>) {
        let machines = (self.first_machine, self.last_machine);
        let companions_us = self
            .first_companions_us
            .zip(self.last_companions_us)
            .map(|(a, b)| b.saturating_sub(a));
        let summary = self.finish(root);
        let noise = match (machines, &summary) {
            ((Some(start), Some(end)), Ok(sum)) => {
                NoiseRecord::between(&start, &end, sum.cpu_total_us()).map(|mut n| {
                    if let Some(us) = companions_us {
                        n.count_as_the_runs_own(us);
                    }
                    n
                })
            }
            _ => None,
        };
        (summary, noise)
    }

    fn finish(self, root: i32) -> Result<ResourceSummary, SamplerError> {
        let (Some((t0, start)), Some((t1, end))) = (self.first, self.last) else {
            return Err(SamplerError::NoSample {
                root,
                last_error: self.last_error,
            });
        };
        let mut sum = self.summary;
        sum.cpu_user_us = end.cpu_user_us.saturating_sub(start.cpu_user_us);
        sum.cpu_system_us = end.cpu_system_us.saturating_sub(start.cpu_system_us);
        sum.ctx_voluntary = end.ctx_voluntary.saturating_sub(start.ctx_voluntary);
        sum.ctx_involuntary = end.ctx_involuntary.saturating_sub(start.ctx_involuntary);
        sum.elapsed_us = u64::try_from(t1.duration_since(t0).as_micros()).unwrap_or(u64::MAX);
        sum.start = start;
        sum.end = end;
        Ok(sum)
    }
}

/// Samples the tree on a background thread every `interval` from `start_at` (the moment the
/// warmup ends and measurement begins) until [`Sampler::finish`] is called.
///
/// Dropping a `Sampler` without calling `finish` stops the thread too (it notices the closed
/// channel, takes one last sample and exits).
pub struct Sampler {
    /// Dropping it wakes the thread up and tells it to stop.
    stop: mpsc::Sender<()>,
    thread: JoinHandle<(Result<ResourceSummary, SamplerError>, Option<NoiseRecord>)>,
}

impl Sampler {
    pub fn start(root: i32, pgid: i32, start_at: Instant, interval: Duration) -> Sampler {
        Sampler::start_window(root, pgid, start_at, None, interval)
    }

    /// Like [`Sampler::start`], but the end sample is taken at `end_at` when it comes before
    /// `finish` (the scheduled end of the measured phase), so the CPU and context-switch
    /// deltas cover exactly the measured window rather than the load generator's wind-down.
    pub fn start_window(
        root: i32,
        pgid: i32,
        start_at: Instant,
        end_at: Option<Instant>,
        interval: Duration,
    ) -> Sampler {
        Sampler::start_window_beside(root, pgid, start_at, end_at, interval, None)
    }

    /// Like [`Sampler::start_window`], and the process groups registered in `companions`
    /// (the run's services and profilers, `Supervised::spawn`'s registry) are the run's own
    /// in the noise record, not other work.
    pub fn start_window_beside(
        root: i32,
        pgid: i32,
        start_at: Instant,
        end_at: Option<Instant>,
        interval: Duration,
        companions: Option<std::path::PathBuf>,
    ) -> Sampler {
        let (stop, stopped) = mpsc::channel::<()>();
        // A zero interval would spin: sample at most every millisecond.
        let interval = interval.max(Duration::from_millis(1));
        let thread = std::thread::Builder::new()
            .name(format!("rubyrace-sampler-{root}"))
            .spawn(move || {
                let mut acc = Acc {
                    companions,
                    ..Acc::default()
                };
                // Sleeps until `deadline`; returns true if asked to stop (message or the
                // `Sampler` dropped) before that.
                let wait_until = |deadline: Instant| {
                    let timeout = deadline.saturating_duration_since(Instant::now());
                    !matches!(
                        stopped.recv_timeout(timeout),
                        Err(RecvTimeoutError::Timeout)
                    )
                };
                if wait_until(start_at) {
                    // Finished before the measured phase began (a very short trial): a start
                    // sample now and an end sample right after.
                    acc.take(root, pgid, false);
                    acc.take(root, pgid, true);
                    return acc.finish_with_noise(root);
                }
                acc.take(root, pgid, false);
                // Samples are scheduled on a fixed grid from `start_at`, so slow samples do not
                // make the schedule drift; a tick missed entirely is skipped.
                let mut next = start_at + interval;
                loop {
                    let now = Instant::now();
                    while next <= now {
                        next += interval;
                    }
                    let wake = match end_at {
                        Some(end) if end < next => end,
                        _ => next,
                    };
                    if wait_until(wake) {
                        break;
                    }
                    if end_at.is_some_and(|end| Instant::now() >= end) {
                        break;
                    }
                    acc.take(root, pgid, false);
                }
                acc.take(root, pgid, true); // the end of the measured phase
                acc.finish_with_noise(root)
            })
            .expect("spawning the resource sampler thread");
        Sampler { stop, thread }
    }

    /// Stops sampling, takes a final sample and returns the summary. If the tree is gone by
    /// then, the last good sample is kept as `end`. Fails only if not a single sample succeeded.
    pub fn finish(self) -> Result<ResourceSummary, SamplerError> {
        self.finish_with_noise().0
    }

    /// Like [`Sampler::finish`], and the machine's noise over the same window (steal, other
    /// processes' CPU, load average; see `crate::noise`): None when /proc/stat could not be
    /// read or no sample succeeded.
    pub fn finish_with_noise(self) -> (Result<ResourceSummary, SamplerError>, Option<NoiseRecord>) {
        // Either wakes the thread through the message or, if it already returned, is ignored.
        let _ = self.stop.send(());
        self.thread
            .join()
            .unwrap_or((Err(SamplerError::Panicked), None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::CommandExt;
    use std::process::{Child, ChildStdout, Command, Stdio};

    const MB: u64 = 1_000_000;

    /// A Ruby program in its own process group. Dropping it kills the whole group and reaps the
    /// leader, whether the test passed or panicked.
    struct Group {
        child: Child,
        lines: mpsc::Receiver<String>,
        killed: bool,
    }

    impl Group {
        fn ruby(script: &str) -> Group {
            Group::spawn("/usr/bin/ruby", &["--disable-gems", "-e", script])
        }

        fn spawn(program: &str, args: &[&str]) -> Group {
            let mut child = Command::new(program)
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .process_group(0)
                .spawn()
                .expect("spawning ruby");
            // Lines are read on a thread so a hung script fails the test instead of hanging it.
            let out: ChildStdout = child.stdout.take().unwrap();
            let (tx, lines) = mpsc::channel();
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
            Group {
                child,
                lines,
                killed: false,
            }
        }

        fn pid(&self) -> i32 {
            self.child.id() as i32
        }

        /// Next line printed by the script (within 20 s).
        fn line(&self) -> String {
            self.lines
                .recv_timeout(Duration::from_secs(20))
                .expect("the ruby script did not print the expected line in time")
        }

        /// Kills the whole group (once: the pgid may be reused after the leader is reaped).
        fn kill(&mut self) {
            if !std::mem::replace(&mut self.killed, true) {
                // SAFETY: plain syscall; the group is the one this test created.
                unsafe { libc::kill(-self.pid(), libc::SIGKILL) };
                let _ = self.child.wait();
            }
        }
    }

    impl Drop for Group {
        fn drop(&mut self) {
            self.kill();
        }
    }

    #[test]
    fn a_window_ends_at_its_scheduled_end_not_at_finish() {
        // A process burning CPU: a window of 400 ms, finished a second later, must not count
        // the CPU of the extra second.
        let g = Group::ruby("$stdout.sync = true; puts 'go'; loop { }");
        assert_eq!(g.line(), "go");
        let start = Instant::now() + Duration::from_millis(100);
        let sampler = Sampler::start_window(
            g.pid(),
            g.pid(),
            start,
            Some(start + Duration::from_millis(400)),
            Duration::from_millis(100),
        );
        std::thread::sleep(Duration::from_millis(1500));
        let sum = sampler.finish().unwrap();
        let window_ms = sum.elapsed_us / 1000;
        // Bounds wide enough for a loaded machine; without the scheduled end it would be ~1400 ms.
        assert!((250..=700).contains(&window_ms), "window {window_ms} ms");
        let cpu_ms = (sum.cpu_user_us + sum.cpu_system_us) / 1000;
        assert!(cpu_ms <= 650, "CPU {cpu_ms} ms counted past the window");
    }

    /// Master forking 2 workers that each hold a 50 MB string; prints the worker pids then
    /// "ready" once both have allocated.
    const TWO_FAT_WORKERS: &str = r#"
        $stdout.sync = true
        r, w = IO.pipe
        pids = 2.times.map do
          fork do
            r.close
            s = "x" * 50_000_000
            w.puts "allocated"
            sleep
          end
        end
        w.close
        2.times { r.gets }
        puts pids.join(" ")
        puts "ready"
        sleep
    "#;

    #[test]
    fn snapshot_of_master_and_two_fat_workers() {
        let g = Group::ruby(TWO_FAT_WORKERS);
        let workers: Vec<i32> = g.line().split(' ').map(|p| p.parse().unwrap()).collect();
        assert_eq!(g.line(), "ready");

        let mut expected = vec![g.pid(), workers[0], workers[1]];
        expected.sort();
        assert_eq!(tree_pids(g.pid(), g.pid()).unwrap(), expected);

        let s = sample_tree(g.pid(), g.pid()).unwrap();
        eprintln!("tree sample: {s:?}");
        assert_eq!(s.processes, 3);
        assert!(s.threads >= 3, "{s:?}");
        assert!(s.rss_bytes >= 100 * MB, "rss {} < 100 MB", s.rss_bytes);
        assert!(
            s.rss_bytes < 1000 * MB,
            "rss {} implausibly large",
            s.rss_bytes
        );
        assert!(s.pss_bytes <= s.rss_bytes, "{s:?}");
        // The two strings are private to their workers.
        assert!(s.uss_bytes >= 100 * MB, "{s:?}");
        // USS <= PSS, give or take the kernel's per-process rounding of Pss.
        assert!(s.uss_bytes <= s.pss_bytes + 3 * 4096, "{s:?}");
        // Each process's peak is at least its current RSS (VmRSS and smaps Rss may differ by a
        // few pages, since the mm counters are approximate).
        assert!(s.hwm_bytes + MB >= s.rss_bytes, "{s:?}");
        assert!(s.ctx_voluntary > 0, "{s:?}");

        // Each process's own figures add up to the tree's; each fat worker holds its string.
        assert_eq!(
            s.members.iter().map(|m| m.pid).collect::<Vec<_>>(),
            expected
        );
        assert_eq!(
            s.members.iter().map(|m| m.pss_bytes).sum::<u64>(),
            s.pss_bytes
        );
        assert_eq!(
            s.members.iter().map(|m| m.uss_bytes).sum::<u64>(),
            s.uss_bytes
        );
        for w in &workers {
            let m = s.members.iter().find(|m| m.pid == *w).unwrap();
            assert!(m.uss_bytes >= 50 * MB, "{m:?}");
        }
        let master = s.members.iter().find(|m| m.pid == g.pid()).unwrap();
        assert!(master.uss_bytes < 50 * MB, "{master:?}");

        // The tree of a worker alone is that worker (pgid 0: no group lookup).
        let w = sample_tree(workers[0], 0).unwrap();
        assert_eq!(w.processes, 1);
        assert!(w.uss_bytes >= 50 * MB && w.uss_bytes < s.uss_bytes, "{w:?}");
    }

    #[test]
    fn reparented_group_member_is_found_through_the_pgid() {
        // The middle process exits after forking, so the grandchild is reparented away from
        // the tree (to init or a subreaper) but stays in the process group.
        let g = Group::ruby(
            r#"
            $stdout.sync = true
            mid = fork do
              fork { s = "y" * 30_000_000; puts Process.pid; sleep }
              exit!(0)
            end
            Process.wait(mid)
            sleep
            "#,
        );
        let orphan: i32 = g.line().parse().unwrap();
        assert_ne!(
            procfs::process::Process::new(orphan)
                .unwrap()
                .stat()
                .unwrap()
                .ppid,
            g.pid()
        );

        // By ppid links only (no pgid), the orphan is not part of the tree...
        assert_eq!(tree_pids(g.pid(), 0).unwrap(), vec![g.pid()]);
        // ... but it is through the process group.
        assert_eq!(tree_pids(g.pid(), g.pid()).unwrap(), vec![g.pid(), orphan]);
        let s = sample_tree(g.pid(), g.pid()).unwrap();
        assert_eq!(s.processes, 2);
        assert!(s.uss_bytes >= 30 * MB, "{s:?}");
    }

    #[test]
    fn cpu_of_waited_for_children_is_kept() {
        // A child burns 0.4 s of CPU (its own CPU clock, so a loaded machine does not change
        // the amount) and is reaped: its CPU moves into the master's cutime.
        let g = Group::ruby(
            r#"
            $stdout.sync = true
            pid = fork do
              x = 0
              x += 1 while Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) < 0.4
            end
            Process.wait(pid)
            puts "reaped"
            sleep
            "#,
        );
        assert_eq!(g.line(), "reaped");
        let s = sample_tree(g.pid(), g.pid()).unwrap();
        assert_eq!(s.processes, 1);
        let cpu = s.cpu_user_us + s.cpu_system_us;
        assert!(cpu >= 350_000, "cpu {cpu} µs: dead child's CPU lost");
    }

    #[test]
    fn the_threads_nanosecond_clock_agrees_with_the_ticks_and_is_finer() {
        // A master and a worker that work ~4 ms and block ~1 ms in turn, as a server's
        // threads do: over 600 ms the two readings agree within the ticks' truncation (up to
        // 10 ms per counter per process at each edge), and over eight 40 ms windows the
        // ticks give multiples of 10 ms where the threads' clock does not.
        //
        // The blocking matters. A thread that never leaves its CPU has its scheduler
        // counter brought up to date only at the timer's ticks, so on a kernel whose ticks
        // land on exact intervals its windows are whole ticks too: a CI machine saw 3 of 8
        // windows of two pure busy loops on the 10 ms grid (2026-11-29). Every switch away
        // brings the counter up to date at that instant, which is what the counter is finer
        // for.
        let g = Group::ruby(
            "$stdout.sync = true; \
             def work; loop { t = Process.clock_gettime(Process::CLOCK_MONOTONIC); x = 0; \
               x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) - t < 0.0037; \
               sleep 0.0011 }; end; \
             fork { work }; puts 'go'; work",
        );
        assert_eq!(g.line(), "go");
        std::thread::sleep(Duration::from_millis(100));
        let a = read_tree_cpu(g.pid(), g.pid()).unwrap();
        std::thread::sleep(Duration::from_millis(600));
        let b = read_tree_cpu(g.pid(), g.pid()).unwrap();
        let w = b.since(&a);
        let ticks = b.ticks.since(&a.ticks);
        eprintln!("fine {:?}, ticks {ticks:?}", w.times);
        assert!(w.fine, "every thread lived through the window");
        let (fine_us, ticks_us) = (w.times.total_us() as i64, ticks.total_us() as i64);
        assert!(
            fine_us > 100_000,
            "two busy processes ran {fine_us} µs in 600 ms"
        );
        assert!(
            (fine_us - ticks_us).abs() <= 80_000,
            "fine {fine_us} µs, ticks {ticks_us} µs"
        );
        let mut windows_us = Vec::new();
        let mut earlier = b;
        for _ in 0..8 {
            std::thread::sleep(Duration::from_millis(40));
            let now = read_tree_cpu(g.pid(), g.pid()).unwrap();
            let w = now.since(&earlier);
            assert!(w.fine);
            assert_eq!(now.ticks.since(&earlier.ticks).total_us() % 10_000, 0);
            windows_us.push(w.times.total_us());
            earlier = now;
        }
        let off_the_tick = windows_us
            .iter()
            .filter(|us| !us.is_multiple_of(10_000))
            .count();
        assert!(
            off_the_tick >= 6,
            "{off_the_tick} of 8 windows off the 10 ms grid; the windows, µs: {windows_us:?}"
        );
    }

    #[test]
    fn the_tree_listed_once_reads_what_a_full_listing_reads() {
        // A master and a worker burning CPU, read in turn by a reader that listed the tree
        // once and by a full listing: each window's time agrees between the two (both read
        // the same threads' counters, microseconds apart). Then the worker is killed: the
        // reader drops it and its window falls back to clock ticks, as `since` does.
        let g = Group::ruby(
            "$stdout.sync = true; pid = fork { x = 0; loop { x += 1 } }; Process.detach(pid); puts pid; x = 0; loop { x += 1 }",
        );
        let worker: i32 = g.line().parse().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let reader = TreeCpuReader::new(g.pid(), g.pid()).unwrap();
        assert_eq!(reader.pids.len(), 2, "{:?}", reader.pids);
        let (a_listed, a_full) = (
            reader.read().unwrap(),
            read_tree_cpu(g.pid(), g.pid()).unwrap(),
        );
        std::thread::sleep(Duration::from_millis(300));
        let (b_listed, b_full) = (
            reader.read().unwrap(),
            read_tree_cpu(g.pid(), g.pid()).unwrap(),
        );
        let (listed, full) = (b_listed.since(&a_listed), b_full.since(&a_full));
        assert!(listed.fine && full.fine);
        let (l, f) = (listed.times.total_us() as i64, full.times.total_us() as i64);
        assert!(l > 100_000, "two busy processes ran {l} µs in 300 ms");
        assert!(
            (l - f).abs() <= 20_000,
            "listed once {l} µs, full listing {f} µs"
        );
        // SAFETY: plain syscall on a pid this test's group started.
        unsafe { libc::kill(worker, libc::SIGKILL) };
        std::thread::sleep(Duration::from_millis(100));
        let c = reader.read().unwrap();
        assert_eq!(c.processes, 1);
        assert!(
            !c.since(&b_listed).fine,
            "a thread of the window ended: ticks"
        );
    }

    #[test]
    fn threads_waiting_for_a_cpu_are_measured() {
        // Three busy processes on one CPU: each runs about a third of the time and waits
        // for the CPU the rest, so the tree waits about twice as long as it runs (more if
        // anything else wants CPU 0; never less than as long).
        let g = Group::spawn(
            "/usr/bin/taskset",
            &[
                "-c",
                "0",
                "/usr/bin/ruby",
                "--disable-gems",
                "-e",
                "$stdout.sync = true; 2.times { fork { x = 0; loop { x += 1 } } }; puts 'go'; x = 0; loop { x += 1 }",
            ],
        );
        assert_eq!(g.line(), "go");
        std::thread::sleep(Duration::from_millis(100));
        let a = read_tree_cpu(g.pid(), g.pid()).unwrap();
        std::thread::sleep(Duration::from_millis(600));
        let w = read_tree_cpu(g.pid(), g.pid()).unwrap().since(&a);
        let waited = w.waited_us.expect("fine counters give the wait");
        let ran = w.times.total_us();
        eprintln!("ran {ran} µs, waited {waited} µs");
        assert!(
            ran > 100_000 && ran < 700_000,
            "one CPU ran {ran} µs in 600 ms"
        );
        assert!(waited >= ran, "ran {ran} µs, waited only {waited} µs");
    }

    /// The tree's CPU readings when `g` prints "go" and when it prints "ended".
    fn readings_from_go_to_ended(g: &Group) -> (CpuReading, CpuReading) {
        assert_eq!(g.line(), "go");
        let a = read_tree_cpu(g.pid(), g.pid()).unwrap();
        assert_eq!(g.line(), "ended");
        (a, read_tree_cpu(g.pid(), g.pid()).unwrap())
    }

    #[test]
    fn a_process_born_and_ended_within_the_window_is_counted_from_the_ticks() {
        // Neither reading sees the worker: it is forked after the first and reaped before
        // the second. Only the ticks (its parent's reaped children) hold its time, and the
        // window must not trust the threads' counters that miss it.
        let g = Group::ruby(
            r#"
            $stdout.sync = true
            puts "go"
            sleep 0.3
            cpu = -> { Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) }
            # Its own CPU clock: 0.6 s of CPU however loaded the machine is.
            pid = fork { t0 = cpu.call; x = 0; x += 1 while cpu.call - t0 < 0.6 }
            Process.wait(pid)
            puts "ended"
            sleep
            "#,
        );
        let (a, b) = readings_from_go_to_ended(&g);
        let w = b.since(&a);
        assert!(!w.fine, "the worker's time is in no live thread: {w:?}");
        assert!(w.times.total_us() >= 300_000, "{w:?}");
    }

    #[test]
    fn a_thread_that_ends_within_the_window_falls_back_to_the_ticks() {
        // A worker burns CPU for a second, ends and is reaped; the window that saw it end
        // cannot count its time from the threads' counters, and says so. (A forked process:
        // CRuby keeps a Ruby thread's native thread cached after it ends.)
        let g = Group::ruby(
            r#"
            $stdout.sync = true
            pid = fork { t0 = Time.now; x = 0; x += 1 while Time.now - t0 < 1.0 }
            puts "go"
            Process.wait(pid)
            puts "ended"
            sleep
            "#,
        );
        let (a, b) = readings_from_go_to_ended(&g);
        let w = b.since(&a);
        assert!(!w.fine, "a thread's time ended with it: {w:?}");
        assert_eq!(w.times, b.ticks.since(&a.ticks));
        assert!(w.times.total_us() >= 300_000, "{w:?}");
    }

    #[test]
    fn sampler_measures_cpu_and_context_switches_over_the_phase() {
        // One busy worker, one worker waking up every millisecond.
        let g = Group::ruby(
            r#"
            $stdout.sync = true
            fork { x = 0; loop { x += 1 } }
            fork { loop { sleep 0.001 } }
            puts "ready"
            sleep
            "#,
        );
        assert_eq!(g.line(), "ready");
        let t0 = Instant::now();
        let sampler = Sampler::start(
            g.pid(),
            g.pid(),
            t0 + Duration::from_millis(300),
            Duration::from_millis(100),
        );
        std::thread::sleep(Duration::from_millis(1300));
        let asked = Instant::now();
        let sum = sampler.finish().unwrap();
        let finish_took = asked.elapsed();
        eprintln!("summary: {sum:?}, finish took {finish_took:?}");

        assert!(
            finish_took < Duration::from_millis(250),
            "finish took {finish_took:?}"
        );
        // ~1 s of phase at 100 ms: start + ~10 ticks + end.
        assert!((8..=14).contains(&sum.samples), "samples {}", sum.samples);
        assert_eq!(sum.start.processes, 3);
        assert_eq!(sum.end.processes, 3);
        assert_eq!(sum.peak_processes, 3);
        assert!(sum.peak_threads >= sum.end.threads && sum.end.threads >= 3);
        assert!(sum.peak_rss_bytes >= sum.end.rss_bytes && sum.peak_rss_bytes > 0);
        assert!(sum.peak_pss_bytes <= sum.peak_rss_bytes);
        assert!(sum.peak_uss_bytes <= sum.peak_pss_bytes + 3 * 4096);
        // The phase lasted ~1 s; the busy worker used up to one CPU of it (~1 s on an idle
        // machine; the lower bound is lenient because tests share the CPUs), and no more than
        // every CPU.
        let elapsed = sum.elapsed_us;
        assert!(
            (800_000..1_400_000).contains(&elapsed),
            "elapsed {elapsed} µs"
        );
        let cpu = sum.cpu_total_us();
        assert!(cpu >= elapsed / 10, "cpu {cpu} µs over {elapsed} µs");
        let ncpu = std::thread::available_parallelism().map_or(64, |n| n.get()) as u64;
        // Ticks are coarse (10 ms): allow a few of them on top.
        assert!(
            cpu <= elapsed * ncpu + 50_000,
            "cpu {cpu} µs over {elapsed} µs"
        );
        assert_eq!(
            cpu,
            (sum.end.cpu_user_us + sum.end.cpu_system_us)
                - (sum.start.cpu_user_us + sum.start.cpu_system_us)
        );
        // ~1000 wake-ups per second from the sleeping worker.
        assert!(
            sum.ctx_voluntary >= 200,
            "voluntary ctx switches {}",
            sum.ctx_voluntary
        );
        assert!(sum.end.ctx_voluntary > sum.start.ctx_voluntary);
    }

    #[test]
    fn context_switches_are_summed_over_all_threads() {
        // Only non-main threads wake up: the main thread's own counters barely move.
        let g = Group::ruby(
            r#"
            $stdout.sync = true
            2.times { Thread.new { loop { sleep 0.001 } } }
            puts "ready"
            sleep
            "#,
        );
        assert_eq!(g.line(), "ready");
        let a = sample_tree(g.pid(), g.pid()).unwrap();
        std::thread::sleep(Duration::from_millis(500));
        let b = sample_tree(g.pid(), g.pid()).unwrap();
        assert_eq!(b.processes, 1);
        assert!(b.threads >= 3, "{b:?}");
        let delta = b.ctx_voluntary - a.ctx_voluntary;
        assert!(delta >= 200, "voluntary ctx switches grew by {delta} only");
    }

    #[test]
    fn finish_is_prompt_between_long_intervals() {
        let g = Group::ruby(r#"$stdout.sync = true; puts "ready"; sleep"#);
        assert_eq!(g.line(), "ready");
        let sampler = Sampler::start(g.pid(), g.pid(), Instant::now(), Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(200));
        let asked = Instant::now();
        let sum = sampler.finish().unwrap();
        let took = asked.elapsed();
        assert!(took < Duration::from_millis(100), "finish took {took:?}");
        assert_eq!(sum.samples, 2); // start and end, no tick in between
        assert_eq!(sum.end.processes, 1);
    }

    #[test]
    fn finish_before_the_measured_phase_takes_start_and_end_at_once() {
        let g = Group::ruby(r#"$stdout.sync = true; puts "ready"; sleep"#);
        assert_eq!(g.line(), "ready");
        let sampler = Sampler::start(
            g.pid(),
            g.pid(),
            Instant::now() + Duration::from_secs(60),
            Duration::from_secs(1),
        );
        let asked = Instant::now();
        let sum = sampler.finish().unwrap();
        assert!(
            asked.elapsed() < Duration::from_millis(100),
            "{:?}",
            asked.elapsed()
        );
        assert_eq!(sum.samples, 2);
        assert_eq!(sum.start.processes, 1);
        assert_eq!(sum.end.processes, 1);
        assert!(sum.end.rss_bytes > 0);
    }

    #[test]
    fn vanished_tree_keeps_the_last_good_sample() {
        let mut g = Group::ruby(TWO_FAT_WORKERS);
        g.line();
        assert_eq!(g.line(), "ready");
        let pid = g.pid();
        let sampler = Sampler::start(pid, pid, Instant::now(), Duration::from_millis(50));
        std::thread::sleep(Duration::from_millis(300));
        g.kill();
        std::thread::sleep(Duration::from_millis(200));
        let sum = sampler.finish().unwrap();
        assert!(sum.samples >= 3, "{sum:?}");
        assert_eq!(sum.start.processes, 3);
        assert_eq!(sum.peak_processes, 3);
        assert!(sum.peak_rss_bytes >= 100 * MB, "{sum:?}");
        // A sample may have caught the group half-killed (workers gone, master not yet), so
        // the last good one has 1 to 3 processes.
        assert!((1..=3).contains(&sum.end.processes), "{sum:?}");
        assert!(sum.end.rss_bytes > 0);

        // Nothing left to sample now.
        let err = sample_tree(pid, pid).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn sampler_without_any_good_sample_is_an_error() {
        // A pid that cannot exist (above the kernel's pid_max limit of 2^22).
        let bogus = (1 << 22) + 12345;
        let sampler = Sampler::start(bogus, bogus, Instant::now(), Duration::from_millis(10));
        std::thread::sleep(Duration::from_millis(50));
        let err = sampler.finish().unwrap_err().to_string();
        assert!(err.contains("no resource sample"), "{err}");
    }

    #[test]
    fn noise_counts_a_busy_process_outside_the_tree_as_other_and_the_tree_as_server() {
        // The tree burns a CPU; a process outside it burns another.
        let tree = Group::ruby("$stdout.sync = true; puts 'go'; loop { }");
        let outside = Group::ruby("$stdout.sync = true; puts 'go'; loop { }");
        assert_eq!(tree.line(), "go");
        assert_eq!(outside.line(), "go");
        let sampler = Sampler::start(
            tree.pid(),
            tree.pid(),
            Instant::now(),
            Duration::from_millis(200),
        );
        std::thread::sleep(Duration::from_millis(1500));
        let (sum, noise) = sampler.finish_with_noise();
        let sum = sum.unwrap();
        let noise = noise.expect("a noise record");
        eprintln!("{noise:?}");
        let tree_percent = 100.0 * sum.cpu_total_us() as f64 / sum.elapsed_us as f64;
        // The tree's CPU is the server's, over (nearly) the same window.
        assert!(
            (noise.server_percent - tree_percent).abs() < 0.05 * tree_percent + 1.0,
            "{noise:?} vs {tree_percent}"
        );
        // Each loop gets at least a quarter of a CPU even on a busy 2-CPU machine; the one
        // outside the tree is other processes' CPU, not the server's.
        assert!(noise.server_percent > 25.0, "{noise:?}");
        assert!(noise.other_percent > 25.0, "{noise:?}");
        assert!(noise.is_noisy());
        assert!((1.0..=2.5).contains(&noise.elapsed_s), "{noise:?}");
    }

    #[test]
    fn ticks_convert_to_microseconds() {
        assert_eq!(ticks_to_us(250, 100), 2_500_000);
        assert_eq!(ticks_to_us(1, 100), 10_000);
        assert_eq!(ticks_to_us(3, 1000), 3_000);
        // No intermediate overflow for large counts (ticks * 10^6 exceeds u64 here).
        assert_eq!(ticks_to_us(1 << 50, 100), (1u64 << 50) * 10_000);
    }
}

/// What one read at a slice's edge costs (docs/PRECISION.md quotes it). Run by hand against
/// a live server: `PROBE_PID=PID cargo test -p rubyrace-sys edge_read_cost -- --ignored
/// --nocapture`.
#[cfg(test)]
mod edge_read_cost {
    #[test]
    #[ignore]
    fn edge_read_cost() {
        let pid: i32 = std::env::var("PROBE_PID")
            .expect("PROBE_PID: a live server's pid")
            .parse()
            .unwrap();
        let n = 2000u32;
        let listed = super::TreeCpuReader::new(pid, pid).unwrap();
        let cpu = || {
            let mut t = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: t is a valid, writable timespec.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
            std::time::Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
        };
        let (wall, used) = (std::time::Instant::now(), cpu());
        for _ in 0..n {
            listed.read().unwrap();
        }
        let (listed_wall, listed_cpu) = (wall.elapsed() / n, (cpu() - used) / n);
        let (wall, used) = (std::time::Instant::now(), cpu());
        for _ in 0..n / 10 {
            super::read_tree_cpu(pid, pid).unwrap();
        }
        let (full_wall, full_cpu) = (wall.elapsed() / (n / 10), (cpu() - used) / (n / 10));
        eprintln!(
            "{} processes listed once: {listed_wall:?} a read ({listed_cpu:?} CPU); the tree listed at each read: {full_wall:?} ({full_cpu:?} CPU)",
            listed.pids.len()
        );
    }
}
