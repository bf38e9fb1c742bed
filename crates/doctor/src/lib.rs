//! `rubyrace doctor`: what on this machine makes benchmarks noisy or wrong, and what to do
//! about each finding.
//!
//! [`examine`] looks at the CPUs (count, affinity, pinning, frequency governor, turbo), the
//! load and the processes using CPU right now, swap, ASLR, the ephemeral ports and
//! `tcp_tw_reuse` (for the close modes), the open-file limit, `perf`, the Rubies and the
//! servers they can load, the allocator libraries and `wrk`. Each check gives one
//! [`Finding`]: a name, a [`Status`], what was seen and what to do. Nothing is changed on
//! the machine: files under /proc and /sys are read, a few programs are run from an argv
//! (never a shell) with a timeout (`ruby`, `perf --version`, `wrk -v`, `ldconfig -p`), and
//! the process's own CPU affinity is set to the mask it already has, to see whether it can
//! be set. A missing file is a finding ("not visible"), never an error.
//!
//! The [`Report`] is serializable (schema [`SCHEMA`]) so a run can keep the doctor's
//! findings next to its trials. A whole examination takes about 1 s: 0.5 s of CPU sampling
//! ([`BUSY_SAMPLE`]) and the Ruby queries; [`Options::quick`] skips both. docs/doctor.md
//! describes every check and threshold.

mod render;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant, SystemTime};

use nix::sched::{sched_getaffinity, sched_setaffinity};
use nix::sys::personality::{self, Persona};
use nix::sys::resource::{getrlimit, Resource, RLIM_INFINITY};
use nix::unistd::{sysconf, Pid, SysconfVar};
use serde::{Deserialize, Serialize};

use rubies::{discovery, knobs};
use sys::environment;
use sys::process::is_executable_file;

/// The schema name of a [`Report`] as JSON.
pub const SCHEMA: &str = "rubyrace.doctor/1";

// ---------------------------------------------------------------------------------------
// Thresholds

/// Fewer usable CPUs than this: the load generator and the server share a core.
pub const MIN_USABLE_CPUS: u32 = 2;
/// A 1-minute load average above this many times the usable CPUs is a warning.
pub const LOAD_PER_CPU_WARN: f64 = 0.5;
/// The governor every CPU should have.
pub const WANTED_GOVERNOR: &str = "performance";
/// How long the CPU use of every process is sampled.
pub const BUSY_SAMPLE: Duration = Duration::from_millis(500);
/// A process using at least this much of one CPU (in %) during the sample is listed.
pub const BUSY_LIST_PERCENT: f64 = 1.0;
/// A process using at least this much of one CPU (in %) during the sample is a warning.
pub const BUSY_WARN_PERCENT: f64 = 10.0;
/// How many busy processes are listed by default.
pub const BUSY_SHOWN: usize = 5;
/// An ephemeral port range smaller than this is a warning (the Linux default, 32768-60999,
/// has 28232 ports).
pub const MIN_EPHEMERAL_PORTS: u32 = 28_000;
/// How long a port stays in TIME_WAIT on Linux (fixed in the kernel: `TCP_TIMEWAIT_LEN`).
pub const TIME_WAIT_SECONDS: u32 = 60;
/// A soft open-file limit below this is a warning.
pub const MIN_OPEN_FILES: u64 = 4096;
/// `perf_event_paranoid` above this keeps unprivileged users from every perf counter.
pub const MAX_PERF_PARANOID: i64 = 2;
/// How long each program the doctor runs (`ruby`, `perf`, `wrk`) may take.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the kernel's CPU files are.
const CPU_SYS: &str = "/sys/devices/system/cpu";

// ---------------------------------------------------------------------------------------
// Report

/// How a finding bears on benchmarks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Nothing to do.
    Ok,
    /// Worth knowing; may matter for some experiments.
    Info,
    /// Makes results noisier or less representative: fix it before measuring.
    Warn,
    /// Makes results wrong or experiments impossible.
    Bad,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Info => "info",
            Status::Warn => "warn",
            Status::Bad => "bad",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One check's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The check: "cpus", "governor", "busy_processes"... (see [`CHECKS`]).
    pub name: String,
    pub status: Status,
    /// What was seen; may hold several lines.
    pub value: String,
    /// What to do about it; empty when there is nothing to do.
    pub advice: String,
}

impl Finding {
    fn new(
        name: &str,
        status: Status,
        value: impl Into<String>,
        advice: impl Into<String>,
    ) -> Self {
        Finding {
            name: name.to_string(),
            status,
            value: value.into(),
            advice: advice.into(),
        }
    }

    fn ok(name: &str, value: impl Into<String>) -> Self {
        Finding::new(name, Status::Ok, value, "")
    }
}

/// Every check, in the order of a report.
pub const CHECKS: &[&str] = &[
    "cpus",
    "pinning",
    "governor",
    "turbo",
    "load",
    "busy_processes",
    "swap",
    "aslr",
    "ports",
    "tcp_tw_reuse",
    "open_files",
    "perf",
    "rubies",
    "servers",
    "allocators",
    "wrk",
];

/// What the doctor found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// [`SCHEMA`].
    pub schema: String,
    /// When the examination started (RFC 3339, UTC).
    pub checked_at: String,
    /// One per check, in the order of [`CHECKS`].
    pub findings: Vec<Finding>,
    /// Checks that crashed (a bug in rubyrace); their findings say "the check failed".
    /// Absent from the JSON when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_checks: Vec<String>,
}

impl Report {
    /// The report as aligned text, as `rubyrace doctor` prints it.
    pub fn render(&self) -> String {
        render::render(self)
    }

    /// The finding of a check, by name.
    pub fn finding(&self, name: &str) -> Option<&Finding> {
        self.findings.iter().find(|f| f.name == name)
    }

    /// How many findings have `status`.
    pub fn count(&self, status: Status) -> usize {
        self.findings.iter().filter(|f| f.status == status).count()
    }
}

/// What [`examine_with`] does.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// Skip the slow parts: the CPU sampling of every process and the Ruby queries (their
    /// findings say "not checked"). About 50 ms instead of about 1 s.
    pub quick: bool,
    /// How many busy processes to list at most.
    pub top: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            quick: false,
            top: BUSY_SHOWN,
        }
    }
}

/// Examines this machine with every check ([`Options::default`]).
pub fn examine() -> Report {
    examine_with(&Options::default())
}

/// Examines this machine. Never fails: a check that cannot see what it looks for says so in
/// its finding, and a check that crashes is recorded in [`Report::failed_checks`].
pub fn examine_with(options: &Options) -> Report {
    let checked_at = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let mut failed: Vec<String> = Vec::new();

    // The CPU sampling runs first, alone with the cheap checks, so that no Ruby of ours
    // takes CPU from the processes being measured.
    let (sample, mut cheap) = std::thread::scope(|scope| {
        let sampler = (!options.quick).then(|| scope.spawn(sample_busy));
        let mut cheap: Vec<(&str, std::thread::Result<Finding>)> = Vec::new();
        let cpus = cpu_counts();
        let usable = cpus.effective();
        cheap.push(("cpus", guarded(|| cpus_finding(&cpus))));
        cheap.push(("pinning", guarded(pinning_finding)));
        cheap.push(("governor", guarded(governor_finding)));
        cheap.push(("turbo", guarded(turbo_finding)));
        cheap.push((
            "load",
            guarded(|| load_finding(environment::load_average(), usable)),
        ));
        cheap.push(("swap", guarded(swap_finding)));
        cheap.push(("aslr", guarded(aslr_finding)));
        cheap.push(("ports", guarded(ports_finding)));
        cheap.push(("tcp_tw_reuse", guarded(tcp_tw_reuse_finding)));
        cheap.push(("open_files", guarded(open_files_finding)));
        cheap.push(("perf", guarded(perf_finding)));
        cheap.push(("wrk", guarded(wrk_finding)));
        let sample = sampler.map(|h| h.join());
        (sample, cheap)
    });

    let busy = match sample {
        None => Ok(Finding::new(
            "busy_processes",
            Status::Info,
            "not checked (--quick)",
            "",
        )),
        Some(Ok(sample)) => guarded(|| busy_finding(sample, options.top)),
        Some(Err(panic)) => Err(panic),
    };
    cheap.push(("busy_processes", busy));

    // The Rubies, and what the Ruby on PATH can load, in parallel.
    let (rubies, servers_and_allocators) = if options.quick {
        let skipped = |name: &str| Finding::new(name, Status::Info, "not checked (--quick)", "");
        let allocators = guarded(|| allocators_finding(None));
        (Ok(skipped("rubies")), (Ok(skipped("servers")), allocators))
    } else {
        std::thread::scope(|scope| {
            let rubies = scope.spawn(|| rubies_finding(&discovery::discover()));
            let servers = scope.spawn(|| {
                let query = server_query();
                let linked = query.as_ref().ok().and_then(|q| q.linked_allocator.clone());
                (
                    guarded(|| servers_finding(&query)),
                    guarded(|| allocators_finding(linked.as_deref())),
                )
            });
            let servers = servers.join().unwrap_or_else(|panic| {
                let also: Box<dyn std::any::Any + Send> =
                    Box::new(format!("with servers: {}", panic_message(&panic)));
                (Err(panic), Err(also))
            });
            (rubies.join(), servers)
        })
    };
    cheap.push(("rubies", rubies));
    cheap.push(("servers", servers_and_allocators.0));
    cheap.push(("allocators", servers_and_allocators.1));

    let mut by_name: HashMap<&str, std::thread::Result<Finding>> = cheap.into_iter().collect();
    let findings = CHECKS
        .iter()
        .map(|name| match by_name.remove(name) {
            Some(Ok(finding)) => finding,
            Some(Err(panic)) => {
                failed.push(name.to_string());
                crashed(name, &panic_message(&panic))
            }
            None => {
                failed.push(name.to_string());
                crashed(name, "the check did not run")
            }
        })
        .collect();
    Report {
        schema: SCHEMA.to_string(),
        checked_at,
        findings,
        failed_checks: failed,
    }
}

/// Runs one check, catching a panic (a bug) so the other checks still report.
fn guarded(check: impl FnOnce() -> Finding) -> std::thread::Result<Finding> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(check))
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_string())
}

fn crashed(name: &str, message: &str) -> Finding {
    Finding::new(
        name,
        Status::Bad,
        format!("the check failed: {message}"),
        "this is a bug in rubyrace: please report it with this output",
    )
}

// ---------------------------------------------------------------------------------------
// Small readers

/// A file's contents, trimmed; None if it cannot be read.
fn read_trimmed(path: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// A program on PATH, as `rubyrace` would find it.
fn on_path(program: &str) -> Option<PathBuf> {
    discovery::resolve_executable(program).ok()
}

/// Parses a kernel CPU list ("0-3,8,10-11") into CPU numbers; None if malformed. An empty
/// list is no CPUs.
pub fn parse_cpu_list(text: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.trim().is_empty()) {
        match part.trim().split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if a > b {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.trim().parse().ok()?),
        }
    }
    Some(cpus)
}

/// Writes CPU numbers as a kernel CPU list ("0-3,8").
pub fn format_cpu_list(cpus: &[u32]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

// ---------------------------------------------------------------------------------------
// CPUs and pinning

/// How many CPUs there are and how many this process may use.
#[derive(Clone, Debug, PartialEq)]
struct CpuCounts {
    /// Online CPUs (/sys/devices/system/cpu/online, else sysconf).
    online: u32,
    /// The CPUs of this process's affinity mask (`sched_getaffinity`), if readable.
    affinity: Option<Vec<u32>>,
    /// `available_parallelism`: the affinity mask and the cgroup CPU quota.
    parallelism: Option<u32>,
}

impl CpuCounts {
    /// The CPUs this process can really use: the affinity mask, limited by a CPU quota.
    fn effective(&self) -> u32 {
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

fn cpu_counts() -> CpuCounts {
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
fn affinity_cpus() -> Option<Vec<u32>> {
    let set = sys::cpus::CpuSet::of_this_process().ok()?;
    Some(set.cpus().iter().map(|&c| c as u32).collect())
}

fn cpus_finding(cpus: &CpuCounts) -> Finding {
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
fn affinity_settable() -> bool {
    let me = Pid::from_raw(0);
    sched_getaffinity(me).is_ok_and(|set| sched_setaffinity(me, &set).is_ok())
}

fn pinning_finding() -> Finding {
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

// ---------------------------------------------------------------------------------------
// Frequency

/// The `cpuN` directories of /sys/devices/system/cpu, by number.
fn cpu_dirs() -> Vec<(u32, PathBuf)> {
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
fn under_hypervisor() -> bool {
    std::fs::read_to_string("/proc/cpuinfo")
        .map(|t| {
            t.lines().any(|l| {
                (l.starts_with("flags") || l.starts_with("Features"))
                    && l.split_whitespace().any(|w| w == "hypervisor")
            })
        })
        .unwrap_or(false)
}

fn not_visible() -> String {
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

fn governor_finding() -> Finding {
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
fn turbo_state() -> Option<(bool, String)> {
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

fn turbo_finding() -> Finding {
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

// ---------------------------------------------------------------------------------------
// Load and busy processes

fn load_finding(load: Option<[f64; 3]>, usable_cpus: u32) -> Finding {
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
struct BusySample {
    /// Busiest first; every process except this one and its descendants.
    processes: Vec<BusyProcess>,
    /// The machine's CPUs busy over the sample, in % of all CPUs; and steal, in %.
    machine: Option<(f64, f64)>,
    /// Why nothing could be sampled.
    error: Option<String>,
}

/// One process in a snapshot: (start time, comm, ppid, utime + stime in ticks).
type Snapshot = HashMap<i32, (u64, String, i32, u64)>;

fn snapshot() -> Result<Snapshot, String> {
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
fn proc_stat_cpu() -> Option<(u64, u64, u64)> {
    sys::noise::CpuTicks::read().map(|t| (t.busy(), t.total(), t.steal))
}

/// The processes that used CPU between two snapshots, busiest first, leaving out `me` and
/// its descendants (as of `after`). `elapsed_ticks`: the wall time between them, in ticks.
fn busy_between(
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

fn sample_busy() -> BusySample {
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

fn busy_finding(sample: BusySample, top: usize) -> Finding {
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
        "{} {sampled} ({machine}, % of one CPU)",
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

// ---------------------------------------------------------------------------------------
// Memory and the kernel

/// Bytes as "4.0 GiB", "512 MiB", "0 B".
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else if value < 10.0 {
        format!("{value:.1} {}", UNITS[unit])
    } else {
        format!("{value:.0} {}", UNITS[unit])
    }
}

fn swap_finding() -> Finding {
    let swappiness = read_trimmed("/proc/sys/vm/swappiness");
    let with_swappiness = |s: String| match &swappiness {
        Some(v) => format!("{s}; swappiness {v}"),
        None => s,
    };
    let meminfo = {
        use procfs::Current;
        procfs::Meminfo::current()
    };
    let Some((total, free)) = meminfo.ok().map(|m| (m.swap_total, m.swap_free)) else {
        return Finding::new("swap", Status::Info, "not visible (/proc/meminfo)", "");
    };
    if total == 0 {
        return Finding::ok("swap", with_swappiness("no swap".to_string()));
    }
    let used = total.saturating_sub(free);
    let value = with_swappiness(format!(
        "{} of swap, {} used",
        format_bytes(total),
        format_bytes(used)
    ));
    if used > 0 {
        Finding::new(
            "swap",
            Status::Warn,
            value,
            "some memory is on the swap device: a process touching it waits for the disk, and \
             memory pressure during a trial can swap the server out; free memory, then bring \
             it back with `sudo swapoff -a && sudo swapon -a` (needs as much free memory as \
             is swapped), or lower swappiness (`sudo sysctl vm.swappiness=1`)",
        )
    } else {
        Finding::ok("swap", value)
    }
}

/// Whether this process runs with address-space randomization off (`setarch -R`).
fn personality_no_randomize() -> bool {
    personality::get().is_ok_and(|p| p.contains(Persona::ADDR_NO_RANDOMIZE))
}

fn aslr_finding() -> Finding {
    let Some(v) = read_trimmed("/proc/sys/kernel/randomize_va_space") else {
        return Finding::new(
            "aslr",
            Status::Info,
            "not visible (/proc/sys/kernel/randomize_va_space)",
            "",
        );
    };
    let meaning = match v.as_str() {
        "0" => "off",
        "1" => "stack, mmap and vDSO randomized",
        "2" => "stack, mmap, vDSO and heap randomized",
        _ => "unknown setting",
    };
    let here = personality_no_randomize();
    let mut value = format!("{v} ({meaning})");
    if here {
        value.push_str("; off for this process and its children (setarch -R)");
    }
    match v.as_str() {
        "0" => Finding::new(
            "aslr",
            Status::Info,
            value,
            "layouts repeat from run to run, but it is off for the whole system, a security \
             cost: turn it back on after the experiment \
             (`sudo sysctl kernel.randomize_va_space=2`) \
             and use `setarch -R` instead",
        ),
        _ if here => Finding::ok("aslr", value),
        _ => Finding::new(
            "aslr",
            Status::Info,
            value,
            "each process gets a different memory layout, which adds some variance between \
             trials (cache and TLB effects); for an experiment, run rubyrace without it: \
             `setarch -R rubyrace run ...` turns it off for rubyrace and the servers it \
             starts only; do not turn it off for the whole system",
        ),
    }
}

// ---------------------------------------------------------------------------------------
// Network

/// `ip_local_port_range` ("32768\t60999") as (first, last).
pub fn parse_port_range(text: &str) -> Option<(u32, u32)> {
    let mut words = text.split_whitespace();
    let first: u32 = words.next()?.parse().ok()?;
    let last: u32 = words.next()?.parse().ok()?;
    if words.next().is_some() || first > last || last > 65535 {
        return None;
    }
    Some((first, last))
}

/// Ports in a range, and the new client-closed connections per second they sustain when
/// each port waits [`TIME_WAIT_SECONDS`] before reuse.
pub fn ports_capacity((first, last): (u32, u32)) -> (u32, u32) {
    let ports = last - first + 1;
    (ports, ports / TIME_WAIT_SECONDS)
}

fn ports_finding() -> Finding {
    let Some(range) =
        read_trimmed("/proc/sys/net/ipv4/ip_local_port_range").and_then(|t| parse_port_range(&t))
    else {
        return Finding::new(
            "ports",
            Status::Info,
            "not visible (/proc/sys/net/ipv4/ip_local_port_range)",
            "",
        );
    };
    let (ports, per_second) = ports_capacity(range);
    let value = format!(
        "{}-{} ({ports} ephemeral ports: about {per_second} new connections/s without port \
         reuse, each port in TIME_WAIT for {TIME_WAIT_SECONDS} s)",
        range.0, range.1
    );
    if ports < MIN_EPHEMERAL_PORTS {
        Finding::new(
            "ports",
            Status::Warn,
            value,
            format!(
                "with --client-close (and --close-header) each request takes a port for \
                 {TIME_WAIT_SECONDS} s; a small range runs out and shows as connect errors: \
                 `sudo sysctl net.ipv4.ip_local_port_range=\"15000 65000\"`"
            ),
        )
    } else {
        Finding::ok("ports", value)
    }
}

fn tcp_tw_reuse_finding() -> Finding {
    let Some(v) = read_trimmed("/proc/sys/net/ipv4/tcp_tw_reuse") else {
        return Finding::new(
            "tcp_tw_reuse",
            Status::Info,
            "not visible (/proc/sys/net/ipv4/tcp_tw_reuse)",
            "",
        );
    };
    match v.as_str() {
        "1" => Finding::ok(
            "tcp_tw_reuse",
            "1 (TIME_WAIT ports reused for every connection)",
        ),
        "2" => Finding::ok(
            "tcp_tw_reuse",
            "2 (TIME_WAIT ports reused for loopback connections only, the default)",
        ),
        _ => Finding::new(
            "tcp_tw_reuse",
            Status::Info,
            format!("{v} (TIME_WAIT ports are not reused)"),
            "with --client-close the client keeps every closed connection's port in TIME_WAIT \
             for 60 s, so it can open at most ports/60 connections per second (see ports) \
             before connect fails; `sudo sysctl net.ipv4.tcp_tw_reuse=2` (loopback only) lets \
             it reuse them; keepalive runs are not affected",
        ),
    }
}

fn open_files_finding() -> Finding {
    let (soft, hard) = match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok(limits) => limits,
        Err(e) => {
            return Finding::new(
                "open_files",
                Status::Info,
                format!("not visible: {}", std::io::Error::from(e)),
                "",
            )
        }
    };
    let show = |v: u64| {
        if v == RLIM_INFINITY {
            "unlimited".to_string()
        } else {
            v.to_string()
        }
    };
    let value = format!("soft {}, hard {}", show(soft), show(hard));
    let low = |v: u64| v != RLIM_INFINITY && v < MIN_OPEN_FILES;
    if low(hard) {
        Finding::new(
            "open_files",
            Status::Warn,
            value,
            format!(
                "every connection is an open file in the load generator and in the server; \
                 the hard limit caps both below {MIN_OPEN_FILES}: raise it in \
                 /etc/security/limits.conf (nofile) or the service's LimitNOFILE"
            ),
        )
    } else if low(soft) {
        Finding::new(
            "open_files",
            Status::Warn,
            value,
            format!(
                "every connection is an open file in the load generator and in the server; \
                 rubyrace load raises its own soft limit when it needs to, but the servers \
                 inherit this one: `ulimit -n {}` in the shell before running",
                show(hard)
            ),
        )
    } else {
        Finding::ok("open_files", value)
    }
}

// ---------------------------------------------------------------------------------------
// Programs

/// What a program printed.
struct Ran {
    status: Option<ExitStatus>,
    stdout: String,
    stderr: String,
    timed_out: bool,
}

/// Runs `program args...` (no shell) with stdin closed, in a process group of its own,
/// capturing its output ([`rubies::discovery::run_captured`]). Past `timeout` the group (which
/// only this child and its own children are in) is killed.
fn run_program(
    program: &Path,
    args: &[&OsStr],
    env_remove: &[&str],
    timeout: Duration,
) -> std::io::Result<Ran> {
    let mut cmd = Command::new(program);
    cmd.args(args);
    for name in env_remove {
        cmd.env_remove(name);
    }
    let out = rubies::discovery::run_captured(cmd, timeout)?;
    Ok(Ran {
        status: Some(out.status),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        timed_out: out.timed_out,
    })
}

/// The first non-empty line of a program's output.
fn first_line(text: &str) -> &str {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
}

fn perf_finding() -> Finding {
    let paranoid: Option<i64> =
        read_trimmed("/proc/sys/kernel/perf_event_paranoid").and_then(|v| v.parse().ok());
    let perf = on_path("perf");
    let version = perf.as_ref().map(|p| {
        match run_program(p, &[OsStr::new("--version")], &[], COMMAND_TIMEOUT) {
            Ok(ran) if ran.status.is_some_and(|s| s.success()) => {
                Ok(first_line(&ran.stdout).to_string())
            }
            Ok(ran) if ran.timed_out => Err("did not answer --version".to_string()),
            Ok(ran) => Err(format!(
                "`perf --version` failed: {}",
                first_line(&format!("{}\n{}", ran.stderr, ran.stdout))
            )),
            Err(e) => Err(format!("cannot run: {e}")),
        }
    });
    // SAFETY: geteuid has no preconditions.
    let root = nix::unistd::geteuid().is_root();
    let mut value = match paranoid {
        Some(p) => format!("perf_event_paranoid {p}"),
        None => {
            "no perf events in this kernel (no /proc/sys/kernel/perf_event_paranoid)".to_string()
        }
    };
    if root {
        value.push_str(" (running as root: not limited by it)");
    }
    match (&perf, &version) {
        (Some(p), Some(Ok(v))) => value.push_str(&format!("; {v} ({})", p.display())),
        (Some(p), Some(Err(e))) => value.push_str(&format!("; {} {e}", p.display())),
        _ => value.push_str("; no perf on PATH"),
    }
    let mut advice = Vec::new();
    if paranoid.is_some_and(|p| p > MAX_PERF_PARANOID) && !root {
        advice.push(format!(
            "counters (`perf stat`) and profiles of the servers need perf_event_paranoid of \
             {MAX_PERF_PARANOID} or less: \
             `sudo sysctl kernel.perf_event_paranoid={MAX_PERF_PARANOID}`"
        ));
    }
    if paranoid.is_none() {
        advice.push("this kernel (or container) offers no perf events".to_string());
    }
    if !matches!(version, Some(Ok(_))) {
        advice.push(
            "to profile a server, install perf for this kernel (Debian: linux-perf)".to_string(),
        );
    }
    if advice.is_empty() {
        Finding::ok("perf", value)
    } else {
        Finding::new("perf", Status::Info, value, advice.join("; "))
    }
}

fn wrk_finding() -> Finding {
    let Some(wrk) = on_path("wrk") else {
        return Finding::new(
            "wrk",
            Status::Info,
            "no wrk on PATH",
            "wrk is only needed to cross-check rubyrace load against another load generator \
             (Debian: apt install wrk)",
        );
    };
    // `wrk -v` prints its version line and usage, and exits 1.
    match run_program(&wrk, &[OsStr::new("-v")], &[], COMMAND_TIMEOUT) {
        Ok(ran) if !ran.timed_out => {
            let line = first_line(&ran.stdout);
            let line = line.split(" Copyright").next().unwrap_or(line).trim();
            if line.starts_with("wrk") {
                Finding::ok("wrk", format!("{line} ({})", wrk.display()))
            } else {
                Finding::new(
                    "wrk",
                    Status::Info,
                    format!("{} did not print a version: {line:?}", wrk.display()),
                    "",
                )
            }
        }
        Ok(_) => Finding::new(
            "wrk",
            Status::Info,
            format!("{} did not answer -v", wrk.display()),
            "",
        ),
        Err(e) => Finding::new(
            "wrk",
            Status::Info,
            format!("{} cannot run: {e}", wrk.display()),
            "",
        ),
    }
}

// ---------------------------------------------------------------------------------------
// Rubies, servers, allocators

fn rubies_finding(found: &[discovery::DiscoveredRuby]) -> Finding {
    if found.is_empty() {
        return Finding::new(
            "rubies",
            Status::Bad,
            "no Ruby found on PATH, in /usr/bin or in rbenv, rvm, chruby, asdf, mise",
            "install one (Debian: apt install ruby) or build one with `rubyrace ruby build`",
        );
    }
    let lines: Vec<String> = found
        .iter()
        .map(|r| {
            let what = match (&r.description, &r.error) {
                (Some(d), _) => d.clone(),
                (None, Some(e)) => format!("does not run: {}", first_line(e)),
                (None, None) => "unknown".to_string(),
            };
            format!("{}: {what}, {}", r.name, r.path.display())
        })
        .collect();
    let broken: Vec<&str> = found
        .iter()
        .filter(|r| r.description.is_none())
        .map(|r| r.name.as_str())
        .collect();
    if broken.len() == found.len() {
        Finding::new(
            "rubies",
            Status::Bad,
            lines.join("\n"),
            "no Ruby here runs: reinstall one, or build one with `rubyrace ruby build`",
        )
    } else if !broken.is_empty() {
        Finding::new(
            "rubies",
            Status::Warn,
            lines.join("\n"),
            format!(
                "{} does not run; experiments naming it will fail before they start",
                broken.join(", ")
            ),
        )
    } else {
        Finding::ok("rubies", lines.join("\n"))
    }
}

/// The servers rubyrace starts, the library each needs, the constant holding its version,
/// and the executable `ruby -S` runs.
const SERVERS: &[(&str, &str, &str, &str)] = &[
    ("puma", "puma", "Puma::Const::PUMA_VERSION", "puma"),
    (
        "unicorn",
        "unicorn",
        "Unicorn::Const::UNICORN_VERSION",
        "unicorn",
    ),
    ("thin", "thin", "Thin::VERSION::STRING", "thin"),
    ("webrick", "webrick", "WEBrick::VERSION", "rackup"),
];

const SERVER_MARKER: &str = "__rubyrace_doctor__";

/// Requires each server's library in one Ruby process, and prints what happened.
fn server_script() -> String {
    let mut script = format!(
        "print \"\\n{SERVER_MARKER}\\n\"\n\
         puts \"mainlibs=#{{defined?(RbConfig) ? RbConfig::CONFIG['MAINLIBS'] : ''}}\"\n"
    );
    for (server, lib, constant, _) in SERVERS {
        script.push_str(&format!(
            "begin\n  require '{lib}'\n  v = (Object.const_get('{constant}').to_s rescue '')\n  \
             puts \"{server}=ok #{{v}}\"\nrescue ScriptError, StandardError => e\n  \
             puts \"{server}=no #{{e.class}}: #{{e.message.lines.first.to_s.strip}}\"\nend\n"
        ));
    }
    script
}

/// What the Ruby on PATH can load.
#[derive(Clone, Debug, PartialEq)]
struct ServerQuery {
    ruby: PathBuf,
    /// Per server in [`SERVERS`] order: Ok(version) or Err(why it does not load).
    loads: Vec<Result<String, String>>,
    /// The allocator the Ruby links (`MAINLIBS`), if any.
    linked_allocator: Option<String>,
}

/// Parses the output of [`server_script`].
fn parse_server_answer(stdout: &str) -> Option<(Vec<Result<String, String>>, String)> {
    let mut lines = stdout.lines().skip_while(|l| l.trim_end() != SERVER_MARKER);
    lines.next()?;
    let mut mainlibs = String::new();
    let mut answers: HashMap<&str, Result<String, String>> = HashMap::new();
    for line in lines {
        let Some((key, rest)) = line.split_once('=') else {
            continue;
        };
        if key == "mainlibs" {
            mainlibs = rest.trim().to_string();
        } else if let Some(v) = rest.strip_prefix("ok") {
            answers.insert(key, Ok(v.trim().to_string()));
        } else if let Some(why) = rest.strip_prefix("no") {
            answers.insert(key, Err(why.trim().to_string()));
        }
    }
    let loads = SERVERS
        .iter()
        .map(|(server, ..)| {
            answers
                .remove(server)
                .unwrap_or_else(|| Err("no answer".to_string()))
        })
        .collect();
    Some((loads, mainlibs))
}

fn server_query() -> Result<ServerQuery, String> {
    let ruby = discovery::resolve_executable("ruby").map_err(|e| format!("{e:#}"))?;
    let script = server_script();
    // RUBYOPT is left out as in discovery: a `-rbundler/setup` in it would answer for a
    // Gemfile, not for the Ruby.
    let ran = run_program(
        &ruby,
        &[OsStr::new("-e"), OsStr::new(&script)],
        &["RUBYOPT"],
        COMMAND_TIMEOUT,
    )
    .map_err(|e| format!("cannot run {}: {e}", ruby.display()))?;
    if ran.timed_out {
        return Err(format!(
            "{} did not answer within {} s",
            ruby.display(),
            COMMAND_TIMEOUT.as_secs()
        ));
    }
    let Some((loads, mainlibs)) = parse_server_answer(&ran.stdout) else {
        return Err(format!(
            "{} did not answer: {}",
            ruby.display(),
            first_line(&format!("{}\n{}", ran.stderr, ran.stdout))
        ));
    };
    Ok(ServerQuery {
        ruby,
        loads,
        linked_allocator: knobs::linked_allocator(&mainlibs).map(str::to_string),
    })
}

/// Where `ruby -S NAME` finds NAME: the Ruby's directory (rubyrace sets RUBYPATH to it),
/// then PATH.
fn server_executable(ruby: &Path, name: &str) -> Option<PathBuf> {
    ruby.parent()
        .map(|dir| dir.join(name))
        .filter(|p| is_executable_file(p))
        .or_else(|| on_path(name))
}

fn servers_finding(query: &Result<ServerQuery, String>) -> Finding {
    let q = match query {
        Ok(q) => q,
        Err(e) => {
            return Finding::new(
                "servers",
                Status::Warn,
                format!("not checked: {e}"),
                "the built-in servers are started through the `ruby` on PATH unless the \
                 experiment names its Rubies; see rubies",
            )
        }
    };
    let mut parts = Vec::new();
    let mut missing = Vec::new();
    for ((server, _, _, exe), load) in SERVERS.iter().zip(&q.loads) {
        let found = server_executable(&q.ruby, exe);
        match (load, found) {
            (Ok(v), Some(_)) => parts.push(if v.is_empty() {
                server.to_string()
            } else {
                format!("{server} {v}")
            }),
            (Ok(_), None) => {
                parts.push(format!(
                    "{server} loads but `{exe}` is not next to the Ruby or on PATH"
                ));
                missing.push(*server);
            }
            (Err(why), _) => {
                parts.push(format!("{server} missing ({why})"));
                missing.push(*server);
            }
        }
    }
    let value = format!("{} (ruby {})", parts.join(", "), q.ruby.display());
    let install = "install them for this Ruby (`gem install puma unicorn thin webrick rackup`, \
                   or Debian's puma, unicorn, thin and ruby-webrick packages), or use a Gemfile \
                   that has them";
    if missing.len() == SERVERS.len() {
        Finding::new(
            "servers",
            Status::Warn,
            value,
            format!("no built-in server can start with this Ruby: {install}"),
        )
    } else if !missing.is_empty() {
        Finding::new(
            "servers",
            Status::Info,
            value,
            format!(
                "experiments with server = {} will fail before they start: {install}",
                missing.join(" or ")
            ),
        )
    } else {
        Finding::ok("servers", value)
    }
}

fn allocators_finding(linked: Option<&str>) -> Finding {
    let mut parts = Vec::new();
    let mut missing = Vec::new();
    for (name, _) in knobs::ALLOCATOR_PREFIXES {
        match knobs::find_allocator_library(name) {
            Some(path) => parts.push(format!("{name} {}", path.display())),
            None => {
                parts.push(format!("{name} not found"));
                missing.push(*name);
            }
        }
    }
    let mut value = parts.join("; ");
    if let Some(linked) = linked {
        value.push_str(&format!("; the Ruby on PATH links {linked}"));
    }
    if missing.is_empty() {
        Finding::ok("allocators", value)
    } else {
        Finding::new(
            "allocators",
            Status::Info,
            value,
            format!(
                "`allocator = \"{}\"` needs the library (Debian: libjemalloc2, \
                 libtcmalloc-minimal4); the system allocator always works",
                missing.join("\" or \"")
            ),
        )
    }
}

// ---------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_range_is_parsed_and_sized() {
        assert_eq!(parse_port_range("32768\t60999\n"), Some((32768, 60999)));
        assert_eq!(parse_port_range("1024 65535"), Some((1024, 65535)));
        assert_eq!(parse_port_range("60999 32768"), None);
        assert_eq!(parse_port_range("32768"), None);
        assert_eq!(parse_port_range("1 2 3"), None);
        assert_eq!(parse_port_range("1024 70000"), None);
        // The default range: 28232 ports, 470 connections/s at 60 s of TIME_WAIT.
        assert_eq!(ports_capacity((32768, 60999)), (28232, 470));
        assert!(ports_capacity((32768, 60999)).0 >= MIN_EPHEMERAL_PORTS);
        assert!(ports_capacity((40000, 60999)).0 < MIN_EPHEMERAL_PORTS);
    }

    #[test]
    fn governors_are_summarized() {
        let all = [
            (0, "performance\n".to_string()),
            (1, "performance".to_string()),
        ];
        assert_eq!(
            summarize_governors(&all),
            Some(("performance on all 2 CPUs".to_string(), true))
        );
        let mixed = [
            (0, "powersave\n".to_string()),
            (1, "powersave\n".to_string()),
            (2, "performance\n".to_string()),
            (3, "powersave\n".to_string()),
        ];
        assert_eq!(
            summarize_governors(&mixed),
            Some((
                "powersave on CPUs 0-1,3, performance on CPUs 2".to_string(),
                false
            ))
        );
        let one = [(0, "schedutil".to_string())];
        assert_eq!(
            summarize_governors(&one),
            Some(("schedutil on all 1 CPUs".to_string(), false))
        );
        assert_eq!(summarize_governors(&[]), None);
    }

    #[test]
    fn cpu_lists_round_trip() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("a"), None);
        assert_eq!(format_cpu_list(&[11, 0, 1, 2, 3, 8, 10]), "0-3,8,10-11");
        assert_eq!(format_cpu_list(&[5]), "5");
        assert_eq!(format_cpu_list(&[]), "");
    }

    #[test]
    fn busy_processes_exclude_this_process_tree_and_recycled_pids() {
        let snap = |rows: &[(i32, u64, &str, i32, u64)]| -> Snapshot {
            rows.iter()
                .map(|(pid, start, comm, ppid, ticks)| {
                    (*pid, (*start, comm.to_string(), *ppid, *ticks))
                })
                .collect()
        };
        let me = 100;
        let before = snap(&[
            (1, 1, "init", 0, 10),
            (100, 5, "rubyrace", 1, 0),
            (101, 6, "ruby", 100, 0),
            (200, 7, "yes", 1, 0),
            (300, 8, "old", 1, 0),
            (400, 9, "idle", 1, 5),
        ]);
        let after = snap(&[
            (1, 1, "init", 0, 11),
            (100, 5, "rubyrace", 1, 50),
            (101, 6, "ruby", 100, 50),
            (200, 7, "yes", 1, 48),
            (300, 99, "new", 1, 40), // pid 300 recycled: not comparable
            (400, 9, "idle", 1, 5),
        ]);
        let busy = busy_between(&before, &after, 50.0, me);
        let pids: Vec<i32> = busy.iter().map(|b| b.pid).collect();
        assert_eq!(pids, vec![200, 1]);
        assert!((busy[0].cpu_percent - 96.0).abs() < 1e-9, "{busy:?}");
        assert_eq!(busy[0].comm, "yes");
        assert!((busy[1].cpu_percent - 2.0).abs() < 1e-9);
    }

    #[test]
    fn busy_finding_lists_warns_and_limits() {
        let sample = |cpu: &[f64]| BusySample {
            processes: cpu
                .iter()
                .enumerate()
                .map(|(i, c)| BusyProcess {
                    pid: 1000 + i as i32,
                    comm: format!("p{i}"),
                    cpu_percent: *c,
                })
                .collect(),
            machine: Some((50.0, 0.0)),
            error: None,
        };
        let f = busy_finding(sample(&[95.0, 3.0, 0.5]), 5);
        assert_eq!(f.status, Status::Warn);
        assert!(
            f.value.starts_with("pid 1000 (p0) 95%, pid 1001 (p1) 3% "),
            "{f:?}"
        );
        assert!(!f.value.contains("pid 1002"), "{f:?}");
        assert!(!f.advice.is_empty());

        let f = busy_finding(sample(&[5.0, 2.0]), 1);
        assert_eq!(f.status, Status::Info);
        assert!(
            f.value.contains("pid 1000 (p0) 5%") && !f.value.contains("pid 1001"),
            "{f:?}"
        );

        let f = busy_finding(sample(&[0.9]), 5);
        assert_eq!(f.status, Status::Ok);
        assert!(f.value.starts_with("none above"), "{f:?}");
    }

    #[test]
    fn load_threshold_is_half_the_cpus() {
        assert_eq!(load_finding(Some([1.0, 0.0, 0.0]), 2).status, Status::Ok);
        assert_eq!(load_finding(Some([1.01, 0.0, 0.0]), 2).status, Status::Warn);
        assert_eq!(load_finding(Some([3.9, 9.0, 9.0]), 8).status, Status::Ok);
        assert_eq!(load_finding(None, 8).status, Status::Info);
        let f = load_finding(Some([0.25, 0.5, 0.75]), 4);
        assert!(f.value.starts_with("0.25 0.50 0.75"), "{f:?}");
    }

    #[test]
    fn cpus_warn_below_two_usable() {
        let counts = |online, affinity: &[u32], parallelism| CpuCounts {
            online,
            affinity: Some(affinity.to_vec()),
            parallelism: Some(parallelism),
        };
        let one = cpus_finding(&counts(4, &[2], 1));
        assert_eq!(one.status, Status::Warn, "{one:?}");
        assert!(one.value.contains("4 online, 1 usable") && one.value.contains("affinity 2"));
        let quota = cpus_finding(&counts(4, &[0, 1, 2, 3], 1));
        assert_eq!(quota.status, Status::Warn);
        assert!(quota.value.contains("CPU quota of 1"), "{quota:?}");
        assert_eq!(cpus_finding(&counts(2, &[0, 1], 2)).status, Status::Ok);
    }

    #[test]
    fn server_answers_are_parsed() {
        let stdout = "noise from RUBYOPT\n\n__rubyrace_doctor__\nmainlibs=-lz -ljemalloc -lm\n\
                      puma=ok 5.6.5\nunicorn=no LoadError: cannot load such file -- unicorn\n\
                      thin=ok \nwebrick=ok 1.7.0\n";
        let (loads, mainlibs) = parse_server_answer(stdout).unwrap();
        assert_eq!(
            loads,
            vec![
                Ok("5.6.5".to_string()),
                Err("LoadError: cannot load such file -- unicorn".to_string()),
                Ok(String::new()),
                Ok("1.7.0".to_string()),
            ]
        );
        assert_eq!(knobs::linked_allocator(&mainlibs), Some("jemalloc"));
        assert_eq!(parse_server_answer("puma=ok 1\n"), None);
        // A server the Ruby said nothing about is reported as missing.
        let (loads, _) = parse_server_answer("__rubyrace_doctor__\npuma=ok 6.0\n").unwrap();
        assert_eq!(loads[1], Err("no answer".to_string()));
    }

    #[test]
    fn rubies_and_servers_findings_grade_what_is_missing() {
        let ruby = |name: &str, description: Option<&str>| discovery::DiscoveredRuby {
            name: name.to_string(),
            path: PathBuf::from(format!("/opt/{name}/bin/ruby")),
            source: "PATH".to_string(),
            description: description.map(str::to_string),
            version: description.map(|_| "3.3.0".to_string()),
            error: description
                .is_none()
                .then(|| "exited with status 127".to_string()),
        };
        assert_eq!(rubies_finding(&[]).status, Status::Bad);
        let good = ruby("system", Some("ruby 3.3.0 (x) [x86_64-linux]"));
        let f = rubies_finding(std::slice::from_ref(&good));
        assert_eq!(f.status, Status::Ok);
        assert_eq!(
            f.value,
            "system: ruby 3.3.0 (x) [x86_64-linux], /opt/system/bin/ruby"
        );
        let f = rubies_finding(&[good, ruby("broken", None)]);
        assert_eq!(f.status, Status::Warn, "{f:?}");
        assert!(f.advice.starts_with("broken does not run"), "{f:?}");
        assert_eq!(rubies_finding(&[ruby("broken", None)]).status, Status::Bad);

        let query = |loads: Vec<Result<String, String>>| {
            Ok(ServerQuery {
                ruby: PathBuf::from("/nonexistent/ruby"),
                loads,
                linked_allocator: None,
            })
        };
        let missing = || Err("LoadError: cannot load such file".to_string());
        let none = servers_finding(&query(vec![missing(), missing(), missing(), missing()]));
        assert_eq!(none.status, Status::Warn, "{none:?}");
        assert!(none.value.contains("puma missing (LoadError"), "{none:?}");
        let f = servers_finding(&Err("no ruby".to_string()));
        assert_eq!(f.status, Status::Warn);
        assert!(f.value.contains("no ruby"));
    }

    #[test]
    fn a_crashing_check_is_caught() {
        let result = guarded(|| panic!("boom"));
        let panic = result.expect_err("the panic is caught");
        assert_eq!(panic_message(&panic), "boom");
        let f = crashed("swap", &panic_message(&panic));
        assert_eq!((f.name.as_str(), f.status), ("swap", Status::Bad));
        assert!(guarded(|| Finding::ok("x", "y")).is_ok());
    }

    #[test]
    fn bytes_are_readable() {
        assert_eq!(format_bytes(0), "0 B");
        assert_eq!(format_bytes(1536), "1.5 KiB");
        assert_eq!(format_bytes(4 * 1024 * 1024 * 1024), "4.0 GiB");
        assert_eq!(format_bytes(512 * 1024 * 1024), "512 MiB");
    }

    #[test]
    fn run_program_times_out_and_captures() {
        let sleep = on_path("sleep").expect("sleep on PATH");
        let t = Instant::now();
        let ran = run_program(&sleep, &[OsStr::new("5")], &[], Duration::from_millis(200)).unwrap();
        assert!(ran.timed_out);
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
        let echo = on_path("echo").expect("echo on PATH");
        let ran = run_program(&echo, &[OsStr::new("hi")], &[], COMMAND_TIMEOUT).unwrap();
        assert!(!ran.timed_out && ran.status.unwrap().success());
        assert_eq!(ran.stdout, "hi\n");
    }

    #[test]
    fn quick_examination_has_every_check_in_order() {
        let report = examine_with(&Options {
            quick: true,
            top: 5,
        });
        assert_eq!(report.schema, SCHEMA);
        let names: Vec<&str> = report.findings.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, CHECKS);
        assert!(report.failed_checks.is_empty(), "{report:?}");
        for f in &report.findings {
            assert!(!f.value.is_empty(), "{f:?}");
            if matches!(f.status, Status::Warn | Status::Bad) {
                assert!(
                    !f.advice.is_empty(),
                    "a {} finding needs advice: {f:?}",
                    f.status
                );
            }
        }
        let json = serde_json::to_string(&report).unwrap();
        assert!(!json.contains("failed_checks"), "{json}");
        let back: Report = serde_json::from_str(&json).unwrap();
        assert_eq!(back, report);
    }
}
