//! How quiet the machine was while a trial measured: CPU taken by the hypervisor (steal),
//! CPU used by processes that are neither the server under test nor rubyrace, and the load
//! average. A trial measured while something else ran is not comparable with one measured
//! on a quiet machine, and the report has to be able to say which trials those were.
//!
//! The machine's CPU comes from the first `cpu` line of `/proc/stat` (also read by
//! `rubyrace doctor`; its parser lives here). rubyrace's own CPU comes from
//! `getrusage(RUSAGE_SELF)` (every thread of this process: the load generator, the sampler;
//! not its children). The server tree's CPU is the resource sampler's, taken at the same
//! instants, so the three figures cover one window: the measured phase.

use std::time::Instant;

use serde::{Deserialize, Serialize};

/// Above this much CPU used by other processes (% of one CPU, averaged over the measured
/// phase) a trial is "measured in noise".
pub const NOISY_OTHER_PERCENT: f64 = 10.0;
/// Above this much steal (% of one CPU, averaged over the measured phase) a trial is
/// "measured in noise".
pub const NOISY_STEAL_PERCENT: f64 = 1.0;

/// The columns of the machine-wide `cpu` line of `/proc/stat`, in ticks (USER_HZ) summed
/// over every CPU. Guest time is already inside `user` and `nice`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTicks {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

impl CpuTicks {
    /// The machine's counters now (the first `cpu` line of /proc/stat, through procfs).
    pub fn read() -> Option<CpuTicks> {
        use procfs::CurrentSI;
        let t = procfs::KernelStats::current().ok()?.total;
        Some(CpuTicks {
            user: t.user,
            nice: t.nice,
            system: t.system,
            idle: t.idle,
            iowait: t.iowait.unwrap_or(0),
            irq: t.irq.unwrap_or(0),
            softirq: t.softirq.unwrap_or(0),
            steal: t.steal.unwrap_or(0),
        })
    }

    /// Every tick counted: busy, idle and stolen.
    pub fn total(&self) -> u64 {
        self.user
            + self.nice
            + self.system
            + self.idle
            + self.iowait
            + self.irq
            + self.softirq
            + self.steal
    }

    /// Ticks not idle (interrupts and steal included), as `top` counts "busy".
    pub fn busy(&self) -> u64 {
        self.total() - self.idle - self.iowait
    }

    /// Ticks the kernel charged to processes (user, nice, system): what the processes of
    /// the machine ran, comparable with the per-process `utime + stime` of `/proc/PID/stat`.
    pub fn process_time(&self) -> u64 {
        self.user + self.nice + self.system
    }
}

/// CPU time of this process so far (user + system, every thread), in µs.
pub fn own_cpu_us() -> Option<u64> {
    use nix::sys::resource::{getrusage, UsageWho};
    use nix::sys::time::TimeValLike;
    let usage = getrusage(UsageWho::RUSAGE_SELF).ok()?;
    let us = |t: nix::sys::time::TimeVal| t.num_microseconds().max(0) as u64;
    Some(us(usage.user_time()) + us(usage.system_time()))
}

/// The machine's counters at one instant, read next to a sample of the server's tree.
#[derive(Clone, Copy, Debug)]
pub struct MachineCounters {
    pub at: Instant,
    pub cpu: CpuTicks,
    pub own_cpu_us: u64,
    /// The 1-minute load average.
    pub load_1min: Option<f64>,
}

impl MachineCounters {
    pub fn read() -> Option<MachineCounters> {
        Some(MachineCounters {
            at: Instant::now(),
            cpu: CpuTicks::read()?,
            own_cpu_us: own_cpu_us()?,
            load_1min: crate::environment::load_average().map(|l| l[0]),
        })
    }
}

/// The noise of a trial's measured phase. CPU figures are in percent of one CPU (100 = one
/// whole CPU busy for the whole phase), averaged over the phase.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NoiseRecord {
    /// The window the figures cover, in seconds (the resource sampler's first to last
    /// sample of the measured phase).
    pub elapsed_s: f64,
    /// CPU the hypervisor gave to others while this machine's CPUs wanted to run
    /// (`/proc/stat` steal).
    pub steal_percent: f64,
    /// CPU charged to all processes of the machine (`/proc/stat` user + nice + system).
    pub processes_percent: f64,
    /// CPU of the server's process tree (the resource sampler's).
    pub server_percent: f64,
    /// CPU of rubyrace itself: load generator, sampler, every thread (`getrusage`).
    pub rubyrace_percent: f64,
    /// CPU of the other process groups rubyrace started for the run (its services, such
    /// as PostgreSQL and Redis, and profilers): part of the system under test, not noise.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub services_percent: f64,
    /// `processes − server − rubyrace − services`, at least 0: what every other process
    /// used.
    pub other_percent: f64,
    /// Interrupt and softirq time (`/proc/stat` irq + softirq); on loopback most of it is
    /// the load's own network traffic, so it is not counted as other processes.
    pub interrupts_percent: f64,
    /// 1-minute load average at the start and at the end of the phase.
    pub load_average_start: Option<f64>,
    pub load_average_end: Option<f64>,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

impl NoiseRecord {
    /// The noise between two readings of the counters, given the server tree's CPU time over
    /// the same window (µs). None when the window is empty or a counter went backwards.
    pub fn between(
        start: &MachineCounters,
        end: &MachineCounters,
        server_cpu_us: u64,
    ) -> Option<NoiseRecord> {
        let elapsed_s = end.at.checked_duration_since(start.at)?.as_secs_f64();
        if elapsed_s <= 0.0 {
            return None;
        }
        let tick_s = 1.0 / procfs::ticks_per_second().max(1) as f64;
        let percent_of_ticks = |t0: u64, t1: u64| -> Option<f64> {
            Some(100.0 * t1.checked_sub(t0)? as f64 * tick_s / elapsed_s)
        };
        let percent_of_us = |us: u64| 100.0 * us as f64 / 1e6 / elapsed_s;
        let (a, b) = (&start.cpu, &end.cpu);
        let processes_percent = percent_of_ticks(a.process_time(), b.process_time())?;
        let server_percent = percent_of_us(server_cpu_us);
        let rubyrace_percent = percent_of_us(end.own_cpu_us.checked_sub(start.own_cpu_us)?);
        Some(NoiseRecord {
            elapsed_s,
            steal_percent: percent_of_ticks(a.steal, b.steal)?,
            processes_percent,
            server_percent,
            rubyrace_percent,
            services_percent: 0.0,
            other_percent: (processes_percent - server_percent - rubyrace_percent).max(0.0),
            interrupts_percent: percent_of_ticks(a.irq + a.softirq, b.irq + b.softirq)?,
            load_average_start: start.load_1min,
            load_average_end: end.load_1min,
        })
    }

    /// Moves `us` of CPU over the window (the run's services and profilers) out of
    /// `other_percent` into `services_percent`.
    pub fn count_as_the_runs_own(&mut self, us: u64) {
        let percent = 100.0 * us as f64 / 1e6 / self.elapsed_s;
        self.services_percent = percent;
        self.other_percent =
            (self.processes_percent - self.server_percent - self.rubyrace_percent - percent)
                .max(0.0);
    }

    /// Several windows' records as one (a script trial's runs, each sampled on its own): each
    /// percentage is weighted by its window's length, so the result is what one record over
    /// the windows together would say; the load average is the first window's at its start
    /// and the last one's at its end. None without a record.
    pub fn over_windows(records: &[NoiseRecord]) -> Option<NoiseRecord> {
        let (first, last) = (records.first()?, records.last()?);
        let total: f64 = records.iter().map(|r| r.elapsed_s).sum();
        if total <= 0.0 || !total.is_finite() {
            return Some(last.clone());
        }
        let weighted = |f: fn(&NoiseRecord) -> f64| {
            records.iter().map(|r| f(r) * r.elapsed_s).sum::<f64>() / total
        };
        Some(NoiseRecord {
            elapsed_s: total,
            steal_percent: weighted(|r| r.steal_percent),
            processes_percent: weighted(|r| r.processes_percent),
            server_percent: weighted(|r| r.server_percent),
            rubyrace_percent: weighted(|r| r.rubyrace_percent),
            services_percent: weighted(|r| r.services_percent),
            other_percent: weighted(|r| r.other_percent),
            interrupts_percent: weighted(|r| r.interrupts_percent),
            load_average_start: first.load_average_start,
            load_average_end: last.load_average_end,
        })
    }

    /// Whether the trial was measured in noise (`NOISY_OTHER_PERCENT`,
    /// `NOISY_STEAL_PERCENT`).
    pub fn is_noisy(&self) -> bool {
        self.other_percent > NOISY_OTHER_PERCENT || self.steal_percent > NOISY_STEAL_PERCENT
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_machines_ticks_are_summed_as_top_counts_them() {
        let t = CpuTicks {
            user: 100,
            nice: 5,
            system: 50,
            idle: 800,
            iowait: 20,
            irq: 1,
            softirq: 2,
            steal: 7,
        };
        assert_eq!((t.busy(), t.total(), t.process_time()), (165, 985, 155));
        // This machine's, through procfs: they only grow.
        let a = CpuTicks::read().expect("/proc/stat");
        std::thread::sleep(Duration::from_millis(30));
        let b = CpuTicks::read().unwrap();
        assert!(b.total() >= a.total() && a.total() > 0, "{a:?} {b:?}");
    }

    /// Two windows of 1 s and 3 s, other processes at 40% and 0%: 0.4 CPU-seconds over 4 s,
    /// 10%; the load average from the first window's start to the last one's end.
    #[test]
    fn windows_combine_weighted_by_their_length() {
        let window = |elapsed_s, other, steal, load_start, load_end| NoiseRecord {
            elapsed_s,
            other_percent: other,
            steal_percent: steal,
            processes_percent: other + 50.0,
            server_percent: 50.0,
            load_average_start: Some(load_start),
            load_average_end: Some(load_end),
            ..NoiseRecord::default()
        };
        let a = window(1.0, 40.0, 2.0, 0.1, 0.2);
        let b = window(3.0, 0.0, 0.0, 0.3, 0.4);
        let both = NoiseRecord::over_windows(&[a.clone(), b]).unwrap();
        assert_eq!(both.elapsed_s, 4.0);
        assert!((both.other_percent - 10.0).abs() < 1e-12, "{both:?}");
        assert!((both.steal_percent - 0.5).abs() < 1e-12, "{both:?}");
        assert!((both.processes_percent - 60.0).abs() < 1e-12, "{both:?}");
        assert_eq!(
            (both.load_average_start, both.load_average_end),
            (Some(0.1), Some(0.4))
        );
        // Noisy alone, quiet over the two windows together (10% is not above 10%).
        assert!(a.is_noisy() && !both.is_noisy());
        assert_eq!(NoiseRecord::over_windows(&[]), None);
        assert_eq!(NoiseRecord::over_windows(std::slice::from_ref(&a)), Some(a));
    }

    #[test]
    fn other_processes_are_what_is_left_after_the_server_and_rubyrace() {
        let tps = procfs::ticks_per_second();
        let t0 = Instant::now();
        let at = |user: u64, steal: u64, own_us: u64, secs: u64| MachineCounters {
            at: t0 + Duration::from_secs(secs),
            cpu: CpuTicks {
                user,
                steal,
                idle: 1000,
                ..CpuTicks::default()
            },
            own_cpu_us: own_us,
            load_1min: Some(0.5),
        };
        // Over 2 s: the processes used 1.5 CPU-seconds (75% of a CPU), the server 0.8 s
        // (40%), rubyrace 0.4 s (20%): others 15%. Steal: 0.04 s, 2%.
        let start = at(0, 0, 1_000_000, 0);
        let end = at(tps * 3 / 2, tps * 4 / 100, 1_400_000, 2);
        let n = NoiseRecord::between(&start, &end, 800_000).unwrap();
        assert!((n.processes_percent - 75.0).abs() < 1e-9, "{n:?}");
        assert!((n.server_percent - 40.0).abs() < 1e-9, "{n:?}");
        assert!((n.rubyrace_percent - 20.0).abs() < 1e-9, "{n:?}");
        assert!((n.other_percent - 15.0).abs() < 1e-9, "{n:?}");
        assert!((n.steal_percent - 2.0).abs() < 1e-9, "{n:?}");
        assert!(n.is_noisy());
        // More server CPU than the machine counted (tick rounding): others are 0, not < 0.
        let n = NoiseRecord::between(&start, &end, 2_000_000).unwrap();
        assert_eq!(n.other_percent, 0.0);
        // A window that ends before it starts is no window.
        assert!(NoiseRecord::between(&end, &start, 0).is_none());
    }

    #[test]
    fn quiet_is_below_both_thresholds() {
        let quiet = NoiseRecord {
            other_percent: NOISY_OTHER_PERCENT,
            steal_percent: NOISY_STEAL_PERCENT,
            ..NoiseRecord::default()
        };
        assert!(!quiet.is_noisy());
        assert!(NoiseRecord {
            other_percent: 10.5,
            ..quiet.clone()
        }
        .is_noisy());
        assert!(NoiseRecord {
            steal_percent: 1.5,
            ..quiet
        }
        .is_noisy());
    }

    #[test]
    fn own_cpu_grows_with_work() {
        let before = own_cpu_us().unwrap();
        let until = Instant::now() + Duration::from_millis(50);
        let mut x = 0u64;
        while Instant::now() < until {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(own_cpu_us().unwrap() > before, "{x}");
    }
}
