//! What a trial records: the server as it ran, the figures derived from the load, a
//! script's runs, the environment, and the `TrialResult` that holds them all, as stored
//! (schema `rubyrace.trial/1`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::conditions::{PinningRecord, QuietWait};
use crate::probe::{ProbeSummary, Verification};
use crate::profile::ProfileRecord;
use crate::services::TrialServicesRecord;
use experiment::ConfigSettings;
use sys::environment::{GitState, Machine};
use sys::noise::NoiseRecord;
use sys::process::{Death, Ended, Orphan};
use sys::resources::ResourceSummary;

pub const TRIAL_RESULT_SCHEMA: &str = "rubyrace.trial/1";

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TrialStatus {
    /// Measured, and within the error policy: used by the statistics. (The default only
    /// for records built field by field, as in tests.)
    #[default]
    Valid,
    /// Measured, but breaking the error policy: stored, excluded from statistics, counted.
    Invalid,
    /// No usable measurement: the server did not start, was not ready, or died.
    Failed,
}

impl TrialStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TrialStatus::Valid => "valid",
            TrialStatus::Invalid => "invalid",
            TrialStatus::Failed => "failed",
        }
    }
}

/// The server as it ran.
#[derive(Clone, Debug, Serialize, Deserialize, Default)]
pub struct ServerRecord {
    pub argv: Vec<String>,
    /// Variables set for the server on top of rubyrace's environment.
    pub env: BTreeMap<String, String>,
    pub cwd: PathBuf,
    pub port: u16,
    pub pid: Option<i32>,
    pub ready_after_s: Option<f64>,
    pub ended: Option<Ended>,
    /// The end of the server's stderr (the whole file is `server.stderr` in the trial
    /// directory).
    pub stderr_tail: String,
    /// Processes of the server's tree that ended during the warmup or the measurement
    /// (the first process excepted: its end is `ended`).
    #[serde(default)]
    pub deaths: Vec<Death>,
    /// Processes the server left running outside its process group (it daemonized, or a
    /// child called setsid), found and killed by rubyrace after the stop.
    #[serde(default)]
    pub orphans: Vec<Orphan>,
}

/// Figures derived from the load and the resource samples.
#[derive(Clone, Debug, Serialize, Deserialize, Default)]
pub struct Derived {
    pub requests_per_s: Option<f64>,
    /// Share of attempts that failed (0..1), non-2xx included.
    pub error_rate: Option<f64>,
    /// Server CPU (user + system, whole tree) per completed request.
    pub cpu_us_per_request: Option<f64>,
    pub cpu_user_us_per_request: Option<f64>,
    pub cpu_system_us_per_request: Option<f64>,
}

/// One run of a script workload.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ScriptRun {
    pub wall_s: f64,
    pub user_s: f64,
    pub system_s: f64,
    pub max_rss_bytes: u64,
    pub status: String,
    /// `rubyrace-metric name=value` lines the script printed.
    pub metrics: BTreeMap<String, f64>,
}

/// A script workload's runs and their medians.
#[derive(Clone, Debug, Serialize, Deserialize, Default)]
pub struct ScriptOutcome {
    pub argv: Vec<String>,
    pub runs: Vec<ScriptRun>,
    pub median_wall_s: Option<f64>,
    pub median_user_s: Option<f64>,
    pub median_system_s: Option<f64>,
    pub max_rss_bytes: Option<u64>,
    pub median_metrics: BTreeMap<String, f64>,
}

/// What is recorded about the environment of every trial.
#[derive(Clone, Debug, Serialize, Deserialize, Default)]
pub struct EnvironmentRecord {
    pub rubyrace_version: String,
    pub ruby_description: Option<String>,
    /// RUBY*, GEM*, BUNDLE*, MALLOC*, LD_PRELOAD and the names in `record_env`, as the
    /// server or script saw them.
    pub env: BTreeMap<String, String>,
    pub machine: Machine,
    pub load_average_before: Option<[f64; 3]>,
    pub app_git: Option<GitState>,
    /// Where a fleet ran the trial (`rubyrace run --slurm`): its node and job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
}

/// The node and job of a trial that a fleet ran (docs/fleet.md): the Slurm node name is the
/// trial's host in the report (several nodes may share a hostname, as on a test cluster).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Placement {
    /// "slurm".
    pub engine: String,
    /// The node the trial ran on (`SLURMD_NODENAME`).
    pub node: String,
    /// The job that ran it (`SLURM_JOB_ID`), and its array (`ARRAYJOB_TASK`).
    pub job_id: String,
    pub array_task: Option<String>,
}

impl Placement {
    /// The placement of this process, when Slurm started it.
    pub fn from_env() -> Option<Placement> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        Some(Placement {
            engine: "slurm".into(),
            node: var("SLURMD_NODENAME")?,
            job_id: var("SLURM_JOB_ID")?,
            array_task: var("SLURM_ARRAY_JOB_ID")
                .zip(var("SLURM_ARRAY_TASK_ID"))
                .map(|(job, task)| format!("{job}_{task}")),
        })
    }
}

/// `[fleet] load = "separate"`: the host that generated the trial's load, and the network
/// between it and the server (docs/fleet.md, "A separate load host"). The server's host is
/// the trial's own (`environment`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LoadHostRecord {
    /// The load node's Slurm name.
    pub node: String,
    /// The load node's machine, as the load agent described it when it started.
    pub machine: sys::environment::Machine,
    /// The load agent's rubyrace version.
    pub rubyrace_version: String,
    /// The address the server listened on: the server node's routable address.
    pub server_address: String,
    /// Round-trip time from the load node to the server's port, from TCP connects made just
    /// before the load (the warmup and the measured phase) started.
    pub rtt: Option<RttRecord>,
    /// Why the round-trip time could not be measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_error: Option<String>,
    /// Half the round trip of a message to the load agent and back (Slurm's I/O forwarding):
    /// how much later than the server's sampling window the agent's load may start.
    pub agent_latency_us: f64,
}

/// Round-trip times from TCP handshakes: a connect completes after one round trip, answered
/// by the server's kernel whatever its app is doing.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RttRecord {
    pub connects: u32,
    pub min_us: f64,
    pub median_us: f64,
    pub max_us: f64,
}

/// Which trial this is: its number in the run, its block and its place in the block, its
/// configuration. One struct for the trial's spec (`lab::TrialSpec`) and its result, so
/// the two cannot disagree on what identifies a trial; flattened in both, so their JSON
/// keeps the five keys at the top level.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct TrialIdentity {
    pub trial_id: usize,
    pub block: u32,
    /// The trial's place in its block (0 first).
    pub position: usize,
    pub config_id: usize,
    pub label: String,
}

/// The outcome of one trial.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TrialResult {
    pub schema: String,
    #[serde(flatten)]
    pub id: TrialIdentity,
    pub status: TrialStatus,
    /// Why the trial is invalid or failed.
    pub reason: Option<String>,
    pub started_at: String,
    pub finished_at: String,
    pub wall_s: f64,
    pub settings: ConfigSettings,
    pub environment: EnvironmentRecord,
    pub server: Option<ServerRecord>,
    /// The load report (schema rubyrace.load/1) of the measured phase.
    pub load: Option<load::LoadReport>,
    pub resources: Option<ResourceSummary>,
    pub derived: Derived,
    pub script: Option<ScriptOutcome>,
    /// What the in-process probe reported (GC, JIT, heap, boot time, gems per process).
    #[serde(default)]
    pub probe: Option<ProbeSummary>,
    /// Whether `jit`, `allocator` and `compact` were in force in every Ruby process; absent
    /// when none was set. A failed verification makes the trial invalid.
    #[serde(default)]
    pub verification: Option<Verification>,
    /// How quiet the machine was over the measured phase: steal, other processes' CPU, load
    /// average (`sys::noise`). Absent for script workloads, when /proc/stat could not be
    /// read, and in rows stored before it existed.
    #[serde(default)]
    pub noise: Option<NoiseRecord>,
    /// `quiet`: how long the trial waited for a quiet machine, and whether it got one.
    #[serde(default)]
    pub quiet: Option<QuietWait>,
    /// `cpus`: the CPUs of every server process and rubyrace thread, checked at the start of
    /// the measured phase. A process on other CPUs makes the trial invalid.
    #[serde(default)]
    pub pinning: Option<PinningRecord>,
    /// `repeat_noisy`: the attempts before this one that were measured in noise (stored
    /// apart, out of the statistics).
    #[serde(default)]
    pub noisy_attempts: u32,
    /// `design = "interleaved"`: the slices this trial's figures add up, and its server's
    /// CPU while the load was on the other servers of the block. Absent for a trial of its
    /// own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interleaved: Option<InterleavedRecord>,
    /// `profile`: what each profiler recorded, with the requests (or script runs) of the
    /// phase it profiled. Absent when no profiler was asked for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profiles: Vec<ProfileRecord>,
    /// `[services]`: the database the trial used, its row counts at the start and the end,
    /// Redis's keys, and the services that lived for this trial only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub services: Option<TrialServicesRecord>,
    /// `[fleet] load = "separate"`: the load's host and the round-trip time to the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_host: Option<LoadHostRecord>,
    /// Files of this trial, relative to its directory.
    pub files: Vec<String>,
}

impl TrialResult {
    /// The host that ran the trial: its fleet node, else the machine's hostname.
    pub fn host(&self) -> &str {
        match &self.environment.placement {
            Some(p) => &p.node,
            None => &self.environment.machine.hostname,
        }
    }

    /// A measured trial whose figures cannot be trusted for `why`: a valid trial becomes
    /// invalid with that reason, an invalid one adds it to its reason; a failed one keeps
    /// its own.
    pub fn invalidate(&mut self, why: String) {
        match self.status {
            TrialStatus::Valid => {
                self.status = TrialStatus::Invalid;
                self.reason = Some(why);
            }
            TrialStatus::Invalid => {
                let reason = self.reason.take().unwrap_or_default();
                self.reason = Some(format!("{reason}; {why}"));
            }
            TrialStatus::Failed => {}
        }
    }
}

/// What an interleaved trial was made of (`lab::interleave` runs it).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InterleavedRecord {
    pub slice_s: f64,
    /// The unrecorded start of every slice (experiment::design::lead_in).
    #[serde(default)]
    pub lead_in_s: f64,
    /// The load was held open: one load run over the block on connections kept open,
    /// sending only in this configuration's slices (false: a load run per slice, on new
    /// connections; a separate load host, and results stored before held-open slices).
    #[serde(default)]
    pub held_open: bool,
    /// Held open: the longest any of its slices' last requests took to complete after the
    /// slice's close, in the next slice's lead-in. Seconds.
    #[serde(default)]
    pub drain_max_s: Option<f64>,
    pub rounds: u32,
    /// The trials measured in the same seconds as this one (its block), this one included.
    pub block_trials: Vec<usize>,
    /// This configuration's slices, in the order they ran.
    pub slices: Vec<SliceRecord>,
    /// CPU the server's tree used outside its slices' recorded windows over the block's
    /// measured phase: background work (timers, GC, threads) while the load was on the
    /// other servers, and the lead-ins and wind-downs around its own windows, none of which
    /// the trial's CPU per request counts. µs. (Older runs left the lead-ins and wind-downs
    /// out of it; they have no `lead_in_cpu_us`.)
    pub idle_cpu_us: Option<u64>,
    /// The part of `idle_cpu_us` in the lead-ins and wind-downs of its own slices. µs.
    #[serde(default)]
    pub lead_in_cpu_us: Option<u64>,
    /// How long `idle_cpu_us` was measured over: the measured phase less its recorded
    /// windows. Seconds.
    #[serde(default)]
    pub idle_s: Option<f64>,
}

/// One slice of an interleaved trial (a window of a co-scheduled one).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SliceRecord {
    /// 0-based round, and this configuration's turn in it.
    pub round: u32,
    pub turn: usize,
    /// When the slice began, from the start of the block's measured phase.
    pub start_s: f64,
    /// The load's recorded time.
    pub elapsed_s: f64,
    pub requests: u64,
    pub errors: u64,
    /// The server tree's CPU time over the slice's recorded window; the sum over the slices
    /// is what the trial's CPU per request uses.
    pub cpu_us: Option<u64>,
    /// `cpu_us` is from the threads' nanosecond counters; false: from clock ticks (10 ms),
    /// because a process or thread of the tree ended within the window (and in results
    /// stored before slices read the threads' counters).
    #[serde(default)]
    pub cpu_fine: bool,
    /// Held open: this slice's unrecorded lead-in, s: the design's, or longer when the
    /// previous slice's server answers slowly (its 99th percentile latency in warmup, which
    /// its last requests take to complete).
    #[serde(default)]
    pub lead_in_s: Option<f64>,
    /// Held open: how long after this slice's close its last request completed, s.
    #[serde(default)]
    pub drain_s: Option<f64>,
}
