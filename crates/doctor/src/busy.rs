//! The load average and the processes using CPU right now.

use std::collections::HashMap;
use std::time::Instant;

use crate::finding::{Finding, Status};
use crate::{BUSY_LIST_PERCENT, BUSY_SAMPLE, BUSY_WARN_PERCENT, LOAD_PER_CPU_WARN};

pub(crate) fn load_finding(load: Option<[f64; 3]>, usable_cpus: u32) -> Finding {
    let Some([one, five, fifteen]) = load else {
        return Finding::new("load", Status::Info, "not visible (/proc/loadavg)", "");
    };
    let limit = LOAD_PER_CPU_WARN * f64::from(usable_cpus.max(1));
    let value = format!(
        "{one:.2} {five:.2} {fifteen:.2} (1, 5, 15 min) on {usable_cpus} CPUs; \
         warn above {limit:.2}"
    );
    if one > limit {
        Finding::new(
            "load",
            Status::Warn,
            value,
            "other work is competing for the CPUs: stop it (see busy_processes) or wait for a \
             quiet machine; rubyrace records the load average before every trial",
        )
    } else {
        Finding::ok("load", value)
    }
}

/// One process's CPU use during the sample.
#[derive(Clone, Debug, PartialEq)]
pub struct BusyProcess {
    pub pid: i32,
    pub comm: String,
    /// Percent of one CPU (100 = a whole CPU), like `top`.
    pub cpu_percent: f64,
}

/// The CPU use of every process during [`BUSY_SAMPLE`], and of the whole machine.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct BusySample {
    /// Busiest first; every process except this one and its descendants.
    pub(crate) processes: Vec<BusyProcess>,
    /// The machine's CPUs busy over the sample, in % of all CPUs; and steal, in %.
    pub(crate) machine: Option<(f64, f64)>,
    /// Why nothing could be sampled.
    pub(crate) error: Option<String>,
}

/// One process in a snapshot: (start time, comm, ppid, utime + stime in ticks).
pub(crate) type Snapshot = HashMap<i32, (u64, String, i32, u64)>;

pub(crate) fn snapshot() -> Result<Snapshot, String> {
    let mut all = Snapshot::new();
    // Each `Process` holds an fd on its directory: read its stat and drop it at once.
    for p in procfs::process::all_processes().map_err(|e| e.to_string())? {
        let Ok(stat) = p.and_then(|p| p.stat()) else {
            continue;
        };
        all.insert(
            stat.pid,
            (
                stat.starttime,
                stat.comm,
                stat.ppid,
                stat.utime + stat.stime,
            ),
        );
    }
    Ok(all)
}

/// The machine's CPU ticks now: (busy, all, steal), as the trial's noise record counts
/// them (`sys::noise::CpuTicks`).
pub(crate) fn proc_stat_cpu() -> Option<(u64, u64, u64)> {
    sys::noise::CpuTicks::read().map(|t| (t.busy(), t.total(), t.steal))
}

/// The processes that used CPU between two snapshots, busiest first, leaving out `me` and
/// its descendants (as of `after`). `elapsed_ticks`: the wall time between them, in ticks.
pub(crate) fn busy_between(
    before: &Snapshot,
    after: &Snapshot,
    elapsed_ticks: f64,
    me: i32,
) -> Vec<BusyProcess> {
    let ours = |pid: i32| {
        let mut pid = pid;
        for _ in 0..64 {
            if pid == me {
                return true;
            }
            match after.get(&pid) {
                Some((_, _, ppid, _)) if *ppid > 0 => pid = *ppid,
                _ => return false,
            }
        }
        false
    };
    let mut busy: Vec<BusyProcess> = after
        .iter()
        .filter(|(pid, _)| !ours(**pid))
        .filter_map(|(pid, (start, comm, _, ticks))| {
            // The same process in both (a recycled pid has another start time).
            let (start0, _, _, ticks0) = before.get(pid)?;
            (start0 == start).then(|| BusyProcess {
                pid: *pid,
                comm: comm.clone(),
                cpu_percent: 100.0 * ticks.saturating_sub(*ticks0) as f64 / elapsed_ticks.max(1e-9),
            })
        })
        .filter(|b| b.cpu_percent > 0.0)
        .collect();
    busy.sort_by(|a, b| {
        b.cpu_percent
            .partial_cmp(&a.cpu_percent)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.pid.cmp(&b.pid))
    });
    busy
}

pub(crate) fn sample_busy() -> BusySample {
    let ticks_per_second = procfs::ticks_per_second() as f64;
    let machine0 = proc_stat_cpu();
    let t0 = Instant::now();
    let before = match snapshot() {
        Ok(s) => s,
        Err(e) => {
            return BusySample {
                error: Some(e),
                ..BusySample::default()
            }
        }
    };
    std::thread::sleep(BUSY_SAMPLE);
    let machine1 = proc_stat_cpu();
    let elapsed = t0.elapsed().as_secs_f64();
    let after = match snapshot() {
        Ok(s) => s,
        Err(e) => {
            return BusySample {
                error: Some(e),
                ..BusySample::default()
            }
        }
    };
    let machine = match (machine0, machine1) {
        (Some((b0, t0, s0)), Some((b1, t1, s1))) if t1 > t0 => {
            let total = (t1 - t0) as f64;
            Some((
                100.0 * b1.saturating_sub(b0) as f64 / total,
                100.0 * s1.saturating_sub(s0) as f64 / total,
            ))
        }
        _ => None,
    };
    BusySample {
        processes: busy_between(
            &before,
            &after,
            elapsed * ticks_per_second,
            std::process::id() as i32,
        ),
        machine,
        error: None,
    }
}

pub(crate) fn busy_finding(sample: BusySample, top: usize) -> Finding {
    if let Some(e) = sample.error {
        return Finding::new(
            "busy_processes",
            Status::Info,
            format!("not visible: {e}"),
            "",
        );
    }
    let listed: Vec<&BusyProcess> = sample
        .processes
        .iter()
        .filter(|p| p.cpu_percent >= BUSY_LIST_PERCENT)
        .take(top)
        .collect();
    let sampled = format!("over {:.1} s", BUSY_SAMPLE.as_secs_f64());
    let machine = match sample.machine {
        Some((busy, steal)) if steal >= 0.05 => {
            format!("all CPUs {busy:.0}% busy, steal {steal:.1}%")
        }
        Some((busy, _)) => format!("all CPUs {busy:.0}% busy"),
        None => "machine total not visible".to_string(),
    };
    if listed.is_empty() {
        return Finding::ok(
            "busy_processes",
            format!("none above {BUSY_LIST_PERCENT}% of a CPU {sampled} ({machine})"),
        );
    }
    let value = format!(
        "{} {sampled}, each in % of one CPU ({machine})",
        listed
            .iter()
            .map(|p| format!("pid {} ({}) {:.0}%", p.pid, p.comm, p.cpu_percent))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if listed.iter().any(|p| p.cpu_percent >= BUSY_WARN_PERCENT) {
        Finding::new(
            "busy_processes",
            Status::Warn,
            value,
            format!(
                "processes using {BUSY_WARN_PERCENT}% of a CPU or more take CPU time from the \
                 server and the load generator, unevenly over time: stop them (or move them to \
                 other CPUs with `taskset -p`) before measuring"
            ),
        )
    } else {
        Finding::new("busy_processes", Status::Info, value, "")
    }
}
