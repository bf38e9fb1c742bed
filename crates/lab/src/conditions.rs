//! The trial conditions at run time (their settings are `experiment::conditions`): the
//! wait for a quiet machine before a trial, and the check of every server process's and
//! rubyrace thread's CPUs when a trial is pinned.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use experiment::conditions::QuietRule;
use sys::cpus::{cpus_allowed, CpuSplit};
use sys::noise::MachineCounters;

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
    let n = sys::noise::NoiseRecord::between(&start, &end, 0)?;
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
