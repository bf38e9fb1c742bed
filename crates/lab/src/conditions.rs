//! The conditions trials are measured in, on a shared machine: wait for the machine to be
//! quiet before each trial (`quiet`), keep the server and the load generator on disjoint
//! CPUs (`cpus`), and run a trial measured in noise again (`repeat_noisy`). None of these
//! changes what a configuration is; they change how much of the machine's noise gets into
//! its figures, so they are run-wide settings, stored with the run and recorded per trial.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::noise::{MachineCounters, NOISY_OTHER_PERCENT, NOISY_STEAL_PERCENT};

/// The run-wide trial conditions (experiment root keys `quiet`, `cpus`, `repeat_noisy`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TrialConditions {
    pub quiet: Option<QuietRule>,
    pub cpus: Option<CpuSplit>,
    /// Run a trial measured in noise again, up to this many times, in the same place of its
    /// block; each noisy attempt is stored apart and left out of the statistics.
    pub repeat_noisy: u32,
}

/// When the machine counts as quiet enough to start a trial.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuietRule {
    /// Other processes' CPU below this (% of one CPU) over a sampling window.
    pub other_percent: f64,
    /// Steal below this (% of one CPU) over the same window.
    pub steal_percent: f64,
    /// Never wait longer than this: the trial then starts anyway, and its record says so.
    #[serde(with = "humantime_serde")]
    pub max_wait: Duration,
    /// The sampling window: the machine is judged over this long at a time.
    #[serde(with = "humantime_serde")]
    pub window: Duration,
}

impl Default for QuietRule {
    /// The thresholds of "measured in noise" (`crate::noise`), judged over 500 ms windows
    /// (/proc/stat counts 10 ms ticks: ±2% of a CPU), waiting at most a minute.
    fn default() -> Self {
        QuietRule {
            other_percent: NOISY_OTHER_PERCENT,
            steal_percent: NOISY_STEAL_PERCENT,
            max_wait: Duration::from_secs(60),
            window: Duration::from_millis(500),
        }
    }
}

/// What the wait before a trial found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct QuietWait {
    /// Seconds from the start of the wait to the start of the trial.
    pub waited_s: f64,
    /// Whether the machine was quiet when the trial started (false: `max_wait` ran out).
    pub quiet: bool,
    /// Sampling windows looked at.
    pub windows: u32,
    /// The last window's other processes' CPU and steal (% of one CPU).
    pub other_percent: f64,
    pub steal_percent: f64,
}

/// What the machine did over one window, with rubyrace's own CPU taken out (no server
/// runs between trials).
fn window_sample(window: Duration, interrupt: &AtomicBool) -> Option<(f64, f64)> {
    let start = MachineCounters::read()?;
    let until = Instant::now() + window;
    while Instant::now() < until {
        if interrupt.load(Ordering::SeqCst) {
            return None;
        }
        std::thread::sleep(
            until
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(50)),
        );
    }
    let end = MachineCounters::read()?;
    let n = crate::noise::NoiseRecord::between(&start, &end, 0)?;
    Some((n.other_percent, n.steal_percent))
}

/// Waits until the machine is quiet by `rule`, at most `rule.max_wait`; `on_busy` hears of
/// every busy window (other CPU %, steal %). Returns None on Ctrl-C or when /proc/stat
/// cannot be read (then there is nothing to wait for).
pub fn wait_for_quiet(
    rule: &QuietRule,
    interrupt: &AtomicBool,
    on_busy: &mut dyn FnMut(f64, f64, Duration),
) -> Option<QuietWait> {
    let started = Instant::now();
    let mut windows = 0;
    loop {
        let (other, steal) = window_sample(rule.window, interrupt)?;
        windows += 1;
        let quiet = other < rule.other_percent && steal < rule.steal_percent;
        let waited = started.elapsed();
        if quiet || waited >= rule.max_wait {
            return Some(QuietWait {
                waited_s: waited.as_secs_f64(),
                quiet,
                windows,
                other_percent: other,
                steal_percent: steal,
            });
        }
        on_busy(other, steal, waited);
    }
}

/// A set of CPU numbers, written as Linux writes them (`0-3,6`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CpuSet(Vec<usize>);

impl CpuSet {
    pub fn cpus(&self) -> &[usize] {
        &self.0
    }

    /// Parses `0-3,6` (as `Cpus_allowed_list` and `taskset -c` write it).
    pub fn parse(text: &str) -> Result<CpuSet, String> {
        let mut cpus = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let number = |s: &str| {
                s.trim()
                    .parse::<usize>()
                    .map_err(|_| format!("{s:?} is not a CPU number"))
            };
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (number(a)?, number(b)?);
                    if a > b {
                        return Err(format!("{part:?} is an empty range"));
                    }
                    cpus.extend(a..=b);
                }
                None => cpus.push(number(part)?),
            }
        }
        if cpus.is_empty() {
            return Err("no CPU is named".into());
        }
        if cpus.iter().any(|&c| c >= libc::CPU_SETSIZE as usize) {
            return Err(format!("CPU numbers stop at {}", libc::CPU_SETSIZE - 1));
        }
        cpus.sort_unstable();
        cpus.dedup();
        Ok(CpuSet(cpus))
    }

    /// The CPUs this process may run on (its affinity mask).
    pub fn of_this_process() -> std::io::Result<CpuSet> {
        // SAFETY: sched_getaffinity writes into the zeroed set passed, of the size passed.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) }
            != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        let cpus = (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect();
        Ok(CpuSet(cpus))
    }

    /// The kernel's mask for this set.
    pub fn mask(&self) -> libc::cpu_set_t {
        // SAFETY: CPU_ZERO and CPU_SET only write bits of the local set; every number was
        // checked below CPU_SETSIZE.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        unsafe { libc::CPU_ZERO(&mut set) };
        for &c in &self.0 {
            unsafe { libc::CPU_SET(c, &mut set) };
        }
        set
    }

    fn overlaps(&self, other: &CpuSet) -> bool {
        self.0.iter().any(|c| other.0.contains(c))
    }
}

impl std::fmt::Display for CpuSet {
    /// The compact form (`0-3,6`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        let mut i = 0;
        while i < self.0.len() {
            let start = self.0[i];
            let mut end = start;
            while i + 1 < self.0.len() && self.0[i + 1] == end + 1 {
                i += 1;
                end = self.0[i];
            }
            parts.push(if start == end {
                start.to_string()
            } else {
                format!("{start}-{end}")
            });
            i += 1;
        }
        f.write_str(&parts.join(","))
    }
}

impl TryFrom<String> for CpuSet {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        CpuSet::parse(&s)
    }
}

impl From<CpuSet> for String {
    fn from(s: CpuSet) -> String {
        s.to_string()
    }
}

/// The server's tree on one set of CPUs, rubyrace (the load generator) on another.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuSplit {
    pub server: CpuSet,
    pub load: CpuSet,
}

impl CpuSplit {
    /// `cpus = "split"`: of the CPUs rubyrace may use, the first quarter (at least one) for
    /// the load generator and the rest for the server. On 2 CPUs: load on the first, the
    /// server on the second.
    pub fn split(available: &CpuSet) -> Result<CpuSplit, String> {
        let cpus = available.cpus();
        if cpus.len() < 2 {
            return Err(format!(
                "cpus = \"split\" needs at least 2 CPUs, and rubyrace may use only {available}"
            ));
        }
        let load = (cpus.len() / 4).max(1);
        Ok(CpuSplit {
            load: CpuSet(cpus[..load].to_vec()),
            server: CpuSet(cpus[load..].to_vec()),
        })
    }

    /// Both sets non-empty, disjoint, and within the CPUs rubyrace may use.
    pub fn check(&self, available: &CpuSet) -> Result<(), String> {
        if self.server.overlaps(&self.load) {
            return Err(format!(
                "the server's CPUs ({}) and the load generator's ({}) overlap; they must be disjoint",
                self.server, self.load
            ));
        }
        for (who, set) in [("server", &self.server), ("load", &self.load)] {
            if let Some(c) = set.cpus().iter().find(|c| !available.cpus().contains(c)) {
                return Err(format!(
                    "{who} = \"{set}\" names CPU {c}, and rubyrace may use only {available}"
                ));
            }
        }
        Ok(())
    }
}

/// Pins every thread of this process (and so every thread and child it starts later) to
/// `set`.
pub fn pin_this_process(set: &CpuSet) -> std::io::Result<()> {
    let mask = set.mask();
    for entry in std::fs::read_dir("/proc/self/task")? {
        let tid: libc::pid_t = match entry?.file_name().to_string_lossy().parse() {
            Ok(t) => t,
            Err(_) => continue,
        };
        // SAFETY: the mask is a valid cpu_set_t of the size passed.
        if unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mask) }
            != 0
        {
            let e = std::io::Error::last_os_error();
            // A thread that ended since the listing is not an error.
            if e.raw_os_error() != Some(libc::ESRCH) {
                return Err(e);
            }
        }
    }
    Ok(())
}

/// `Cpus_allowed_list` of a process or thread (`/proc/PID/status`, or
/// `/proc/PID/task/TID/status`).
pub fn cpus_allowed(status_path: &str) -> Option<CpuSet> {
    let text = std::fs::read_to_string(status_path).ok()?;
    let line = text.lines().find(|l| l.starts_with("Cpus_allowed_list:"))?;
    CpuSet::parse(line.split_once(':')?.1).ok()
}

/// What was checked of the pinning in one trial, at the start of its measured phase.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PinningRecord {
    pub server_cpus: String,
    pub load_cpus: String,
    /// Processes of the server's tree whose `Cpus_allowed_list` was read.
    pub server_processes: usize,
    /// Threads of rubyrace whose `Cpus_allowed_list` was read.
    pub rubyrace_threads: usize,
    /// Every process or thread whose CPUs were not the ones set: "pid 123: 0-1".
    pub mismatches: Vec<String>,
}

impl PinningRecord {
    /// Reads `Cpus_allowed_list` of every process in `server_pids` and every thread of
    /// rubyrace, against `split`.
    pub fn check(split: &CpuSplit, server_pids: &[i32]) -> PinningRecord {
        let mut record = PinningRecord {
            server_cpus: split.server.to_string(),
            load_cpus: split.load.to_string(),
            ..PinningRecord::default()
        };
        for pid in server_pids {
            if let Some(found) = cpus_allowed(&format!("/proc/{pid}/status")) {
                record.server_processes += 1;
                if found != split.server {
                    record.mismatches.push(format!("server pid {pid}: {found}"));
                }
            }
        }
        let tids: Vec<String> = std::fs::read_dir("/proc/self/task")
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        for tid in tids {
            if let Some(found) = cpus_allowed(&format!("/proc/self/task/{tid}/status")) {
                record.rubyrace_threads += 1;
                if found != split.load {
                    record
                        .mismatches
                        .push(format!("rubyrace thread {tid}: {found}"));
                }
            }
        }
        record
    }

    /// Why the trial is not measured as pinned, if it is not.
    pub fn failure(&self) -> Option<String> {
        if self.server_processes == 0 {
            return Some("cpus: no server process could be checked for its CPUs".into());
        }
        (!self.mismatches.is_empty()).then(|| {
            format!(
                "cpus: not in force (server on {}, load on {} expected): {}",
                self.server_cpus,
                self.load_cpus,
                self.mismatches.join("; ")
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_are_read_and_written_as_linux_writes_them() {
        let s = CpuSet::parse("0-3, 6,2").unwrap();
        assert_eq!(s.cpus(), &[0, 1, 2, 3, 6]);
        assert_eq!(s.to_string(), "0-3,6");
        assert_eq!(CpuSet::parse("1").unwrap().to_string(), "1");
        for bad in ["", "a", "3-1", "1-", "99999"] {
            assert!(CpuSet::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn split_gives_the_load_a_quarter_and_at_least_one() {
        let two = CpuSplit::split(&CpuSet::parse("0-1").unwrap()).unwrap();
        assert_eq!(
            (two.load.to_string(), two.server.to_string()),
            ("0".into(), "1".into())
        );
        let eight = CpuSplit::split(&CpuSet::parse("0-7").unwrap()).unwrap();
        assert_eq!(
            (eight.load.to_string(), eight.server.to_string()),
            ("0-1".into(), "2-7".into())
        );
        assert!(CpuSplit::split(&CpuSet::parse("3").unwrap()).is_err());
    }

    #[test]
    fn overlapping_or_unavailable_sets_are_refused() {
        let available = CpuSet::parse("0-1").unwrap();
        let split = |server: &str, load: &str| CpuSplit {
            server: CpuSet::parse(server).unwrap(),
            load: CpuSet::parse(load).unwrap(),
        };
        assert!(split("1", "0").check(&available).is_ok());
        assert!(split("0-1", "1")
            .check(&available)
            .unwrap_err()
            .contains("overlap"));
        assert!(split("2", "0")
            .check(&available)
            .unwrap_err()
            .contains("CPU 2"));
    }

    #[test]
    fn this_process_has_an_affinity_and_it_reads_back_from_proc() {
        let mine = CpuSet::of_this_process().unwrap();
        assert!(!mine.cpus().is_empty());
        assert_eq!(cpus_allowed("/proc/self/status").unwrap(), mine);
    }

    #[test]
    fn a_quiet_machine_is_found_at_once_and_a_busy_one_waits_at_most_max_wait() {
        // A threshold nothing can be under (below 0% CPU) never becomes quiet: the wait
        // ends at max_wait, and every window was reported busy. One above any machine's
        // CPU count is quiet at once.
        let never = QuietRule {
            other_percent: -1.0,
            max_wait: Duration::from_millis(300),
            window: Duration::from_millis(100),
            ..QuietRule::default()
        };
        let mut busy = 0;
        let w = wait_for_quiet(&never, &AtomicBool::new(false), &mut |_, _, _| busy += 1).unwrap();
        assert!(!w.quiet && w.windows >= 3 && w.waited_s >= 0.3, "{w:?}");
        assert_eq!(busy, w.windows - 1);
        let always = QuietRule {
            other_percent: 1e9,
            steal_percent: 1e9,
            window: Duration::from_millis(100),
            ..QuietRule::default()
        };
        let w = wait_for_quiet(&always, &AtomicBool::new(false), &mut |_, _, _| {}).unwrap();
        assert!(w.quiet && w.windows == 1 && w.waited_s < 1.0, "{w:?}");
        assert!(wait_for_quiet(&always, &AtomicBool::new(true), &mut |_, _, _| {}).is_none());
    }
}
