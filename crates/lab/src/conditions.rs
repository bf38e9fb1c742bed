//! The trial conditions at run time (their settings are `experiment::conditions`): the
//! wait for a quiet machine before a trial, and the check of every server process's and
//! rubyrace thread's CPUs when a trial is pinned.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use experiment::conditions::QuietRule;
use results::conditions::{PinningRecord, QuietWait};
use sys::cpus::{cpus_allowed, CpuSplit};
use sys::noise::MachineCounters;

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

/// Reads `Cpus_allowed_list` of every process in `server_pids` and every thread of
/// rubyrace, against `split`.
pub fn check_pinning(split: &CpuSplit, server_pids: &[i32]) -> PinningRecord {
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
