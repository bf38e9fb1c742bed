//! CPUs (count, affinity, pinning) and their frequency (governor, turbo).

use nix::sched::{sched_getaffinity, sched_setaffinity};
use nix::unistd::{sysconf, Pid, SysconfVar};
use std::path::PathBuf;

use crate::finding::{Finding, Status};
use crate::readers::{format_cpu_list, on_path, parse_cpu_list, read_trimmed};
use crate::{CPU_SYS, MIN_USABLE_CPUS, WANTED_GOVERNOR};

/// How many CPUs there are and how many this process may use.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CpuCounts {
    /// Online CPUs (/sys/devices/system/cpu/online, else sysconf).
    pub(crate) online: u32,
    /// The CPUs of this process's affinity mask (`sched_getaffinity`), if readable.
    pub(crate) affinity: Option<Vec<u32>>,
    /// `available_parallelism`: the affinity mask and the cgroup CPU quota.
    pub(crate) parallelism: Option<u32>,
}

impl CpuCounts {
    /// The CPUs this process can really use: the affinity mask, limited by a CPU quota.
    pub(crate) fn effective(&self) -> u32 {
        let mask = self
            .affinity
            .as_ref()
            .map(|a| a.len() as u32)
            .unwrap_or(self.online);
        match self.parallelism {
            Some(p) => p.min(mask.max(1)),
            None => mask,
        }
    }
}

pub(crate) fn cpu_counts() -> CpuCounts {
    let online = read_trimmed(format!("{CPU_SYS}/online"))
        .and_then(|t| parse_cpu_list(&t))
        .map(|l| l.len() as u32)
        .filter(|n| *n > 0)
        .unwrap_or_else(|| {
            sysconf(SysconfVar::_NPROCESSORS_ONLN)
                .ok()
                .flatten()
                .map_or(0, |n| n.max(0) as u32)
        });
    CpuCounts {
        online,
        affinity: affinity_cpus(),
        parallelism: std::thread::available_parallelism()
            .ok()
            .map(|n| n.get() as u32),
    }
}

/// The CPUs of this thread's affinity mask.
pub(crate) fn affinity_cpus() -> Option<Vec<u32>> {
    let set = sys::cpus::CpuSet::of_this_process().ok()?;
    Some(set.cpus().iter().map(|&c| c as u32).collect())
}

pub(crate) fn cpus_finding(cpus: &CpuCounts) -> Finding {
    let usable = cpus.effective();
    let mut value = format!("{} online, {usable} usable by this process", cpus.online);
    if let Some(mask) = &cpus.affinity {
        value.push_str(&format!(" (affinity {}", format_cpu_list(mask)));
        if cpus.parallelism.is_some_and(|p| (p as usize) < mask.len()) {
            value.push_str(&format!(", CPU quota of {usable}"));
        }
        value.push(')');
    }
    if usable < MIN_USABLE_CPUS {
        Finding::new(
            "cpus",
            Status::Warn,
            value,
            format!(
                "with fewer than {MIN_USABLE_CPUS} CPUs the load generator and the server share a \
                 core, so every result measures both; use a machine (or a cgroup, or an affinity \
                 mask) with at least {MIN_USABLE_CPUS} CPUs"
            ),
        )
    } else {
        Finding::ok("cpus", value)
    }
}

/// Whether this thread may set its affinity: sets it to the mask it already has.
pub(crate) fn affinity_settable() -> bool {
    let me = Pid::from_raw(0);
    sched_getaffinity(me).is_ok_and(|set| sched_setaffinity(me, &set).is_ok())
}

pub(crate) fn pinning_finding() -> Finding {
    let taskset = on_path("taskset");
    let settable = affinity_settable();
    let isolated = read_trimmed(format!("{CPU_SYS}/isolated"));
    let isolated_text = match isolated.as_deref() {
        None => "isolated CPUs not visible".to_string(),
        Some("") => "no isolated CPUs".to_string(),
        Some(list) => format!("isolated CPUs {list}"),
    };
    let value = format!(
        "{}; affinity {}; {isolated_text}",
        match &taskset {
            Some(p) => format!("taskset {}", p.display()),
            None => "no taskset on PATH".to_string(),
        },
        if settable {
            "settable"
        } else {
            "cannot be set"
        },
    );
    if taskset.is_some() && settable {
        Finding::ok("pinning", value)
    } else {
        let mut advice = Vec::new();
        if taskset.is_none() {
            advice.push(
                "install taskset (Debian: util-linux) to pin the load generator and the server \
                 to CPUs of their own",
            );
        }
        if !settable {
            advice.push(
                "this process may not change its CPU affinity (a container's cpuset or seccomp \
                 policy?): pinning is not possible here",
            );
        }
        Finding::new("pinning", Status::Info, value, advice.join("; "))
    }
}

/// The `cpuN` directories of /sys/devices/system/cpu, by number.
pub(crate) fn cpu_dirs() -> Vec<(u32, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(CPU_SYS) else {
        return Vec::new();
    };
    let mut dirs: Vec<(u32, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            let n: u32 = name.strip_prefix("cpu")?.parse().ok()?;
            Some((n, e.path()))
        })
        .collect();
    dirs.sort();
    dirs
}

/// Whether /proc/cpuinfo says the CPU runs under a hypervisor.
pub(crate) fn under_hypervisor() -> bool {
    std::fs::read_to_string("/proc/cpuinfo")
        .map(|t| {
            t.lines().any(|l| {
                (l.starts_with("flags") || l.starts_with("Features"))
                    && l.split_whitespace().any(|w| w == "hypervisor")
            })
        })
        .unwrap_or(false)
}

pub(crate) fn not_visible() -> String {
    if under_hypervisor() {
        "not visible (virtual machine?): the CPU reports a hypervisor".to_string()
    } else {
        "not visible (virtual machine?)".to_string()
    }
}

/// Summarizes per-CPU governors (`(cpu, contents of scaling_governor)`): the value, and
/// whether every CPU has [`WANTED_GOVERNOR`]. None when the list is empty.
pub fn summarize_governors(per_cpu: &[(u32, String)]) -> Option<(String, bool)> {
    if per_cpu.is_empty() {
        return None;
    }
    // Governor -> its CPUs, in order of first appearance.
    let mut groups: Vec<(String, Vec<u32>)> = Vec::new();
    for (cpu, governor) in per_cpu {
        let governor = governor.trim().to_string();
        match groups.iter_mut().find(|(g, _)| *g == governor) {
            Some((_, cpus)) => cpus.push(*cpu),
            None => groups.push((governor, vec![*cpu])),
        }
    }
    let all_wanted = groups.len() == 1 && groups[0].0 == WANTED_GOVERNOR;
    let value = if groups.len() == 1 {
        format!("{} on all {} CPUs", groups[0].0, per_cpu.len())
    } else {
        groups
            .iter()
            .map(|(g, cpus)| format!("{g} on CPUs {}", format_cpu_list(cpus)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Some((value, all_wanted))
}

pub(crate) fn governor_finding() -> Finding {
    let per_cpu: Vec<(u32, String)> = cpu_dirs()
        .into_iter()
        .filter_map(|(n, dir)| Some((n, read_trimmed(dir.join("cpufreq/scaling_governor"))?)))
        .collect();
    let Some((mut value, all_wanted)) = summarize_governors(&per_cpu) else {
        return Finding::new(
            "governor",
            Status::Info,
            not_visible(),
            "the host decides the CPU frequency: prefer dedicated (not shared or burstable) \
             machines, and more blocks to average the noise out",
        );
    };
    if let Some(driver) = per_cpu
        .first()
        .and_then(|(n, _)| read_trimmed(format!("{CPU_SYS}/cpu{n}/cpufreq/scaling_driver")))
    {
        value.push_str(&format!(" (driver {driver})"));
    }
    if all_wanted {
        Finding::ok("governor", value)
    } else {
        Finding::new(
            "governor",
            Status::Warn,
            value,
            format!(
                "other governors change the clock with the load, so a trial's speed depends on \
                 what ran before it: `sudo cpupower frequency-set -g {WANTED_GOVERNOR}` \
                 (Debian: linux-cpupower) for the time of the experiment"
            ),
        )
    }
}

/// Whether turbo/boost is on, and which file said so.
pub(crate) fn turbo_state() -> Option<(bool, String)> {
    let no_turbo = format!("{CPU_SYS}/intel_pstate/no_turbo");
    if let Some(v) = read_trimmed(&no_turbo) {
        return Some((v == "0", format!("{no_turbo} = {v}")));
    }
    let boost = format!("{CPU_SYS}/cpufreq/boost");
    if let Some(v) = read_trimmed(&boost) {
        return Some((v == "1", format!("{boost} = {v}")));
    }
    // amd-pstate and newer kernels: one boost file per frequency policy.
    let mut policies: Vec<(String, String)> = std::fs::read_dir(format!("{CPU_SYS}/cpufreq"))
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            name.starts_with("policy")
                .then(|| Some((name, read_trimmed(e.path().join("boost"))?)))
                .flatten()
        })
        .collect();
    policies.sort();
    let (first, v) = policies.first()?;
    let on = policies.iter().any(|(_, v)| v == "1");
    Some((on, format!("{CPU_SYS}/cpufreq/{first}/boost = {v}")))
}

pub(crate) fn turbo_finding() -> Finding {
    match turbo_state() {
        None => Finding::new("turbo", Status::Info, not_visible(), ""),
        Some((false, source)) => Finding::ok("turbo", format!("off ({source})")),
        Some((true, source)) => Finding::new(
            "turbo",
            Status::Info,
            format!("on ({source})"),
            "turbo clocks depend on temperature and on how many cores are busy, which adds \
             variance between trials; for the least noise turn it off during the experiment \
             (`echo 1 | sudo tee /sys/devices/system/cpu/intel_pstate/no_turbo`, or \
             `echo 0 | sudo tee /sys/devices/system/cpu/cpufreq/boost`) and back on afterwards",
        ),
    }
}
