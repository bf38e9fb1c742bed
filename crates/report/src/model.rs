//! The report as data: cohorts, their summaries, comparisons against the baseline,
//! warnings and the points the charts draw. Every output format (table, Markdown, CSV,
//! JSON, benchstat, HTML) renders this one structure; its JSON form is the documented
//! schema `rubyrace.report/1` (docs/report.md).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
pub use stats::Summary;

pub const REPORT_SCHEMA: &str = "rubyrace.report/1";

/// The fewest samples (both sides' trials pooled) a frame needs to be tested against the
/// baseline in `frame_changes`.
pub const MIN_FRAME_SAMPLES: u64 = 20;

fn blocks() -> String {
    "blocks".into()
}

/// One results directory that went into the report.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Source {
    pub dir: String,
    pub experiment: String,
    pub created_at: String,
    /// Hostnames of the machines its trials ran on.
    pub machines: Vec<String>,
    pub trials: usize,
    /// The `rubyrace run` command lines that produced it (start and resumes).
    pub commands: Vec<String>,
    pub smoke: bool,
    /// How its blocks were measured: "blocks", or "interleaved: 10 rounds of 1s slices per
    /// block".
    #[serde(default = "blocks")]
    pub design: String,
    /// What `rubyrace doctor` found on the machine when the run and each resume started.
    #[serde(default)]
    pub doctor: Vec<doctor::Report>,
    /// The run writing this directory when the report was made ("pid 4242, since ..."),
    /// absent when none was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer: Option<String>,
}

/// Latency of a cohort: percentiles of the merged histograms of its valid trials, and the
/// spread of each trial's own p50 and p99 across trials. Microseconds.
#[derive(Clone, Debug, Serialize, Deserialize, Default)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p99_9: f64,
    pub max: f64,
    /// (percentile, µs) points of the merged histogram, for the HDR-style chart.
    pub curve: Vec<(f64, f64)>,
    pub p50_across_trials: Option<Summary>,
    pub p99_across_trials: Option<Summary>,
}

/// Memory of the server's whole process tree, bytes.
#[derive(Clone, Debug, Serialize, Deserialize, Default)]
pub struct Memory {
    pub rss_end: Option<Summary>,
    pub pss_end: Option<Summary>,
    pub uss_end: Option<Summary>,
    pub rss_peak: Option<Summary>,
    pub pss_peak: Option<Summary>,
}

/// Server CPU per request, µs.
#[derive(Clone, Debug, Serialize, Deserialize, Default)]
pub struct Cpu {
    pub per_request: Option<Summary>,
    pub user_per_request: Option<Summary>,
    pub system_per_request: Option<Summary>,
    /// Interleaved trials: the server's CPU outside its slices' recorded windows (while the
    /// load was on the other servers, and in its own lead-ins), µs per second; left out of
    /// the figures per request.
    #[serde(default)]
    pub idle_per_s: Option<Summary>,
    /// Interleaved trials: that CPU as a share of the CPU in the recorded windows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_share: Option<Summary>,
    /// Interleaved trials: CPU per request charged with that CPU too, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_request_with_idle: Option<Summary>,
}

/// A script workload's times (seconds) and custom metrics.
#[derive(Clone, Debug, Serialize, Deserialize, Default)]
pub struct ScriptTimes {
    pub wall: Option<Summary>,
    pub user: Option<Summary>,
    pub system: Option<Summary>,
    pub max_rss_bytes: Option<Summary>,
    pub metrics: BTreeMap<String, Summary>,
}

/// What the in-process probe (ruby/probe.rb) saw over the measured phase, per valid trial
/// (summed over the server's processes), summarized over the cohort.
#[derive(Clone, Debug, Serialize, Deserialize, Default)]
pub struct Runtime {
    pub gc_per_1000_requests: Option<Summary>,
    pub minor_gc_per_1000_requests: Option<Summary>,
    pub major_gc_per_1000_requests: Option<Summary>,
    pub gc_time_ms_per_1000_requests: Option<Summary>,
    pub allocated_objects_per_request: Option<Summary>,
    pub heap_allocated_pages: Option<Summary>,
    pub yjit_code_bytes: Option<Summary>,
    pub yjit_ratio_in_yjit: Option<Summary>,
    /// Seconds from process start to app built, and to first request (slowest process).
    pub app_loaded_after_s: Option<Summary>,
    pub first_request_after_s: Option<Summary>,
}

/// One setting (`jit`, `allocator`, `compact`) checked on the running server, over the
/// cohort's measured trials.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct VerifiedSetting {
    pub setting: String,
    pub expected: String,
    /// Trials in which every Ruby process had it in force, of those checked.
    pub verified: usize,
    pub checked: usize,
    /// What a trial observed: a failing one when there is one.
    pub observed: String,
}

/// A group of trials that share the values of the grouping keys.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Cohort {
    /// Display name, e.g. `ruby=3.3 yjit` (the configuration label by default).
    pub name: String,
    /// The grouping keys and this cohort's values.
    pub key: BTreeMap<String, String>,
    pub valid: usize,
    pub invalid: usize,
    pub failed: usize,
    /// Requests per second of each valid trial, summarized (HTTP workloads).
    pub throughput: Option<Summary>,
    pub latency: Option<Latency>,
    pub memory: Memory,
    pub cpu: Cpu,
    /// Share of failed requests (0..1) across valid trials.
    pub error_rate: Option<Summary>,
    pub script: Option<ScriptTimes>,
    /// The probe's GC, heap, JIT and boot figures; absent without probe data.
    #[serde(default)]
    pub runtime: Option<Runtime>,
    /// The settings verified on the running server; empty when none was asked for.
    #[serde(default)]
    pub verified: Vec<VerifiedSetting>,
    /// Trial ids (`run:trial`) of throughput (or wall time) outliers by Tukey's fences;
    /// flagged, never dropped.
    pub outliers: Vec<String>,
    /// How quiet the machine was over the measured phases; absent without noise records
    /// (script workloads, results stored before they existed).
    #[serde(default)]
    pub noise: Option<CohortNoise>,
}

/// The machine's noise over a cohort's measured (valid and invalid) trials, from each
/// trial's noise record. CPU in percent of one CPU, averaged over each measured phase.
#[derive(Clone, Debug, Serialize, Deserialize, Default)]
pub struct CohortNoise {
    /// Trials with a noise record.
    pub trials: usize,
    /// Median over the trials of the CPU used by processes other than the server's tree and
    /// rubyrace.
    pub other_cpu_percent: f64,
    /// Median over the trials of the CPU stolen by the hypervisor.
    pub steal_percent: f64,
    /// The busiest trial's other-processes CPU.
    pub max_other_cpu_percent: f64,
    /// Median of the 1-minute load average at the end of each measured phase.
    pub load_average_end: Option<f64>,
    /// Trial ids (`run:trial`) measured in noise: other processes above 10% of a CPU or
    /// steal above 1%.
    pub noisy: Vec<String>,
    /// `quiet`: median seconds the trials waited for a quiet machine (None: no wait).
    #[serde(default)]
    pub quiet_wait_s: Option<f64>,
    /// `quiet`: trials that started on a busy machine after the longest wait allowed.
    #[serde(default)]
    pub not_quiet: Vec<String>,
    /// `cpus`: "server CPUs / load CPUs" of the trials (None: not pinned).
    #[serde(default)]
    pub cpus: Option<String>,
    /// `repeat_noisy`: attempts measured in noise, set aside and run again.
    #[serde(default)]
    pub set_aside: u32,
}

/// One kind of host's ratio in a comparison over several kinds (a fleet of unlike nodes):
/// its blocks' geometric mean, with its interval at the comparison's confidence.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct HostKindRatio {
    /// CPU model · core count · kernel release, and the builds of the Rubies compared.
    pub kind: String,
    pub hosts: Vec<String>,
    pub blocks: usize,
    pub ratio: f64,
    /// Absent below 2 blocks (no spread to estimate).
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    /// Whether the comparison's headline ratio weights this kind (every kind with 2 blocks
    /// or more, when at least two have).
    pub in_headline: bool,
}

/// One metric of one cohort against the baseline.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Comparison {
    pub cohort: String,
    pub baseline: String,
    /// "throughput", "latency_p50", "latency_p99", "pss_end", "cpu_per_request"; for scripts
    /// "wall", "max_rss" and each `rubyrace-metric` name.
    pub metric: String,
    pub higher_is_better: bool,
    /// "paired" (per-block ratios of the blocked design) or "unpaired" (bootstrap).
    pub method: String,
    /// Blocks compared (paired) or trials per side (unpaired).
    pub n: usize,
    pub n_baseline: usize,
    /// How many configurations a side's value per block combines (geometric mean), when a
    /// cohort holds several (`--by` a key that not every axis is part of); 1 otherwise.
    #[serde(default = "one")]
    pub configs_per_block: usize,
    /// When the sides hold several configurations: the groups of configurations that agree
    /// on every other axis, each compared within itself (the block's log ratio is their
    /// mean); 1 otherwise.
    #[serde(default = "one")]
    pub groups: usize,
    /// Groups of configurations on one side only, left out of the comparison: "jit=none
    /// (allocator=glibc only)".
    #[serde(default)]
    pub unpartnered: Vec<String>,
    /// Paired blocks from several kinds of host (CPU model and count, kernel, the Rubies'
    /// builds): each kind's ratio. When two or more kinds have 2 blocks or more, `ratio`
    /// and its interval weight those kinds equally (the mean of their mean log ratios,
    /// Welch–Satterthwaite degrees of freedom) instead of pooling the blocks, which would
    /// weight a kind by how many blocks its nodes finished.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_host_kind: Vec<HostKindRatio>,
    /// Paired comparisons: the sample skewness of the per-block log ratios, and whether it is
    /// marked (beyond ±1 and beyond its sampling noise at the warnings' level).
    #[serde(default)]
    pub skewness: Option<f64>,
    #[serde(default)]
    pub skew_marked: bool,
    /// Paired comparisons: the lag-1 autocorrelation of the per-block log ratios in time
    /// order, and Mann–Kendall's p-value for a trend in them.
    #[serde(default)]
    pub lag1_autocorrelation: Option<f64>,
    #[serde(default)]
    pub trend_p_value: Option<f64>,
    /// The interval is wider than Student's t for the dependence between blocks that the
    /// ratios show (every paired interval is computed so: an AR(1)-type effective sample
    /// size, `effective_blocks` of the `n` blocks; docs/methodology.md).
    #[serde(default)]
    pub widened_for_dependence: bool,
    /// The per-block ratios drift or wander by the drift check at a fixed 5%
    /// (`stats::serial::DOUBT_LEVEL`) on this comparison's own blocks, so the interval's
    /// half-width is doubled (`stats::serial::reported_interval`: what adaptive runs stop
    /// on, and what the gate does with a doubt).
    #[serde(default)]
    pub doubled_for_drift: bool,
    /// The ratios drift or wander (a trend or a lag-1 autocorrelation at the warnings'
    /// level): the `drift` warning names them.
    #[serde(default)]
    pub drift_found: bool,
    #[serde(default)]
    pub effective_blocks: Option<f64>,
    /// cohort / baseline, e.g. 0.67.
    pub ratio: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    /// The confidence of `ci_low`–`ci_high`: the report's, made simultaneous over the
    /// `family_size` cohorts compared on the metric (Bonferroni, 1 − (1 − report's) /
    /// family_size), so that the verdicts read off the intervals keep the family's chance
    /// of any false "significant" at most 1 − the report's confidence.
    #[serde(default = "default_confidence")]
    pub confidence: f64,
    /// The rank test beside the interval, as a check (it never decides the verdict):
    /// "wilcoxon-signed-rank" or "mann-whitney-u".
    pub test: String,
    /// The rank test's two-sided p-value, unadjusted.
    pub p_value: Option<f64>,
    /// `p_value` adjusted by Holm's method over the `family_size` comparisons of the same
    /// metric against the baseline (one per other cohort); equal to `p_value` when there is
    /// one.
    #[serde(default)]
    pub p_adjusted: Option<f64>,
    #[serde(default = "one")]
    pub family_size: usize,
    /// The smallest p-value the rank test could give with these blocks (or trials) at all.
    #[serde(default)]
    pub min_p_value: Option<f64>,
    /// The interval is finite, so the verdict can be read off it.
    #[serde(default)]
    pub testable: bool,
    /// The interval (at `confidence`) excludes 1: the verdict is read off the interval
    /// shown, never off the rank test.
    pub significant: bool,
    /// Plain words: "0.67×, 33.1% slower" or "~ no significant difference (1.01×)".
    pub verdict: String,
    /// Half-width of the CI in percent of the ratio (the CI is ratio·e^(±h); this is
    /// 100·(e^h − 1), as an adaptive run's precision rule measures it), and the number of
    /// blocks (or trials per side) that would bring it to ±1% in 80% of runs
    /// (`stats::advice::blocks_for_log_half_width`: an 80% upper bound on the spread, s
    /// from this interval).
    pub half_width_pct: f64,
    pub needed_for_1pct: Option<usize>,
}

impl Comparison {
    /// Its blocks drift together so much that fewer than
    /// [`stats::serial::MIN_EFFECTIVE_BLOCKS`] count as independent, and even so wide an
    /// interval does not exclude 1: the verdict is "cannot tell", and the interval is not
    /// shown as one (its figures stay in the JSON).
    pub fn too_dependent_to_tell(&self) -> bool {
        !self.significant
            && self
                .effective_blocks
                .is_some_and(|e| e < stats::serial::MIN_EFFECTIVE_BLOCKS)
    }
}

fn default_confidence() -> f64 {
    0.95
}

impl Report {
    /// "95%" or "97.5%".
    pub fn confidence_label(&self) -> String {
        crate::format::confidence_text(self.confidence)
    }

    /// The level each comparison's interval is shown at: the report's, or, where the
    /// cohorts compared on a metric share it (`Comparison::confidence`, Bonferroni), each
    /// interval's own ("99.2%" for 3 cohorts of a 97.5% report), so that a heading or a
    /// legend names the level of the intervals under it. When the comparisons' levels
    /// differ (families of different sizes), the report's, "simultaneous".
    pub fn interval_label(&self) -> String {
        let mut levels = self.comparisons.iter().map(|c| c.confidence);
        match levels.next() {
            None => self.confidence_label(),
            Some(first) if levels.all(|l| (l - first).abs() < 1e-12) => {
                crate::format::confidence_text(first)
            }
            Some(_) => format!("{} simultaneous", self.confidence_label()),
        }
    }
}

fn one() -> usize {
    1
}

/// `--overhead A B`: extra time per request of A over B, µs (1/rate_A − 1/rate_B).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Overhead {
    pub cohort: String,
    pub baseline: String,
    pub method: String,
    pub n: usize,
    pub us_per_request: f64,
    pub ci_low: f64,
    pub ci_high: f64,
}

/// Something the reader must know before trusting a number.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Warning {
    /// "high-cv", "drift", "outliers", "too-few-trials", "invalid-trials",
    /// "environment-differs", "mixed-machines", "smoke", "noisy-trials", ...
    pub kind: String,
    pub cohort: Option<String>,
    pub message: String,
}

/// One trial as the charts draw it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TrialPoint {
    pub cohort: String,
    /// Index into `sources`.
    pub source: usize,
    pub trial_id: usize,
    pub block: u32,
    /// Position in the order the trials ran, across all sources (0-based).
    pub sequence: usize,
    pub status: String,
    pub requests_per_s: Option<f64>,
    pub pss_end_bytes: Option<u64>,
    pub wall_s: Option<f64>,
}

/// For two-axis experiments: the median throughput (or wall time) per cell.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DotMatrix {
    pub row_key: String,
    pub col_key: String,
    pub rows: Vec<String>,
    pub cols: Vec<String>,
    /// `cells[row][col]`: the cell's cohort name and its median value.
    pub cells: Vec<Vec<Option<(String, f64)>>>,
    /// "requests/s" or "s wall".
    pub unit: String,
}

/// Recorded configuration and environment of a cohort: every key with the distinct values
/// seen among its trials.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CohortEnvironment {
    pub cohort: String,
    pub values: BTreeMap<String, Vec<String>>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    /// The `rubyrace report` command line.
    pub command: String,
    /// The confidence level of every interval: 0.95, or 0.975 for adaptive runs.
    #[serde(default = "default_confidence")]
    pub confidence: f64,
    pub sources: Vec<Source>,
    /// "http", "script" or "mixed".
    pub workload: Workloads,
    /// The keys cohorts are grouped by.
    pub group_by: Vec<String>,
    pub baseline: String,
    pub cohorts: Vec<Cohort>,
    pub comparisons: Vec<Comparison>,
    pub overhead: Option<Overhead>,
    pub warnings: Vec<Warning>,
    pub trials: Vec<TrialPoint>,
    pub matrix: Option<DotMatrix>,
    pub environment: Vec<CohortEnvironment>,
    /// Each cohort's profile per profiler (`profile = ...`); empty without profiles.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profiles: Vec<CohortProfile>,
    /// The frames tested against the baseline, per cohort, profiler and measure (self or
    /// total time per request).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frame_changes: Vec<FrameChange>,
    /// Per cohort and profiler, the frames that had the share to be tested against the
    /// baseline but not the samples, and how much more profiling would give them enough.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sparse_frames: Vec<SparseFrames>,
    /// Scenario runs: every step of every cohort (docs/scenarios.md); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<CohortStep>,
    /// A run over several hosts (a fleet): what each host measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<HostTable>,
}

/// What each host of a run over several machines measured (docs/fleet.md).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct HostTable {
    /// The figure of the table: "throughput" or "wall".
    pub metric: String,
    pub baseline: String,
    /// The cohorts compared with the baseline, in the order of `HostRow::ratios`.
    pub cohorts: Vec<String>,
    pub rows: Vec<HostRow>,
}

/// One host: its blocks, the baseline's median and each comparison's median per-block ratio.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct HostRow {
    pub host: String,
    /// CPU model and kernel release.
    pub machine: String,
    pub blocks: usize,
    pub trials: usize,
    pub baseline_median: Option<f64>,
    /// Per cohort of `HostTable::cohorts`: the median over this host's blocks of
    /// cohort ÷ baseline.
    pub ratios: Vec<Option<f64>>,
    /// `[fleet] load = "separate"`: the hosts this host's load came from, and the median of
    /// its trials' round-trip times to them (µs). Empty when the load ran beside the server.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub load_hosts: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_rtt_us: Option<f64>,
    /// A fleet's attempts on this host that failed (its node died, the task was cancelled,
    /// ran past its time limit...), each "block N: STATE"; their blocks ran again or are
    /// missing. A host with failures only has a row with no block.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_attempts: Vec<String>,
}

/// One scenario step of one cohort, over the cohort's valid trials.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CohortStep {
    pub cohort: String,
    pub scenario: String,
    pub step: String,
    /// Valid trials with this step.
    pub trials: usize,
    /// Attempts, and those that failed (an unexpected status, an extraction that found
    /// nothing, no response), summed over the trials.
    pub requests: u64,
    pub failures: u64,
    /// Medians over the trials of the step's p50 and p99 latency, µs (None: no response).
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
}

/// One cohort's profile from one profiler, merged over its valid trials.
#[derive(Clone, Debug, Serialize, Deserialize, Default)]
pub struct CohortProfile {
    pub cohort: String,
    /// "rbspy" or "perf".
    pub profiler: String,
    /// "profiled-phase" (a phase of its own after the measured one) or "measured".
    pub phase: String,
    /// Trials whose profile was read, and those without one: "run:trial: why".
    pub trials: usize,
    pub missing: Vec<String>,
    pub samples: u64,
    pub rate_hz: u32,
    /// Seconds sampled, summed over the trials.
    pub duration_s: f64,
    /// "request" (HTTP) or "script run": what the figures are per.
    pub unit: String,
    /// Requests (or script runs) served while the profiles were taken.
    pub units: u64,
    /// CPU time per request (or script run) while profiled, µs: the profiled processes'
    /// CPU time ÷ units (samples ÷ rate ÷ units for records without it). The frames' times
    /// are its split by their shares of the samples.
    pub sampled_us_per_unit: Option<f64>,
    /// How long the profiled processes waited for a CPU while runnable, as a share of the
    /// CPU time they used, over the trials that measured it (`profiles[].cpu_wait_us`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_wait_share: Option<f64>,
    /// Profiled-phase throughput ÷ the same trial's measured throughput, over the trials:
    /// the profilers' cost (profiled-phase profiles only).
    pub overhead: Option<Summary>,
    /// Its trials' Ruby ran with YJIT's perf map (`--yjit-perf`, for perf), a start-up
    /// option in force in the measured phase too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub yjit_perf_map: bool,
    /// The frames with the most self time, most first.
    pub top_self: Vec<FrameTime>,
    /// The merged folded stacks as the profiler wrote them (for the flame graph); not in
    /// the JSON (`rubyrace profile` gives them).
    #[serde(skip)]
    pub stacks: BTreeMap<String, u64>,
    /// The same stacks with frames as the diff matches them (see `FrameChange::frame`).
    #[serde(skip)]
    pub frame_stacks: BTreeMap<String, u64>,
}

/// A frame's time in one cohort's merged profile.
#[derive(Clone, Debug, Serialize, Deserialize, Default)]
pub struct FrameTime {
    pub frame: String,
    /// Share of the time with this frame on top (0..1).
    pub self_share: f64,
    /// µs per request (or script run) with this frame on top, and anywhere on the stack.
    pub self_us_per_unit: f64,
    pub total_us_per_unit: f64,
}

/// One frame of a cohort against the baseline: its time per request, paired by block.
#[derive(Clone, Debug, Serialize, Deserialize, Default)]
pub struct FrameChange {
    pub cohort: String,
    pub baseline: String,
    pub profiler: String,
    /// "self" (the frame on top of the stack) or "total" (anywhere on it).
    pub measure: String,
    /// The frame as matched across cohorts: rbspy's `method - file` without the line, and
    /// with version numbers left out of the path (`gems/puma/lib/...`), so the same method
    /// matches across Ruby and gem versions; perf's symbol as it is.
    pub frame: String,
    /// Merged time per request (or script run), µs.
    pub baseline_us_per_unit: f64,
    pub cohort_us_per_unit: f64,
    /// cohort ÷ baseline of the per-trial times (a half sample added to each count, so a
    /// frame absent on one side has a finite ratio), with its interval.
    pub ratio: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    /// "paired" (per-block log ratios) or "unpaired".
    pub method: String,
    pub n: usize,
    /// "t-test" (paired log ratios) or "mann-whitney-u".
    pub test: String,
    pub p_value: Option<f64>,
    /// Holm-adjusted over every frame tested for the same profiler and measure.
    pub p_adjusted: Option<f64>,
    pub family_size: usize,
    pub significant: bool,
    pub verdict: String,
}

/// A cohort's frames with at least 1% of its and the baseline's self samples pooled, but
/// fewer than [`MIN_FRAME_SAMPLES`]: untested; and how much longer, or faster, to profile
/// for the fewest of them to have enough.
#[derive(Clone, Debug, Serialize, Deserialize, Default, PartialEq)]
pub struct SparseFrames {
    pub cohort: String,
    pub baseline: String,
    pub profiler: String,
    /// How many frames lacked samples; the fewest and the most pooled self samples among
    /// them; and every self sample of both sides pooled.
    pub frames: usize,
    pub fewest_samples: u64,
    pub most_samples: u64,
    pub pooled_samples: u64,
    /// `MIN_FRAME_SAMPLES` ÷ the fewest: how many times the samples would test them all.
    pub factor: f64,
    /// Seconds profiled per trial (the load's time, or a script's profiled runs' wall
    /// time; mean over both sides' trials), and that × `factor`.
    pub profiled_s: f64,
    pub needed_profiled_s: f64,
    /// The rate the trials were profiled at (the higher side's), and that × `factor`.
    pub rate_hz: u32,
    pub needed_rate_hz: u32,
    /// Script workloads: profiled runs per trial (`profile_runs`), and that × `factor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_runs: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needed_profile_runs: Option<u32>,
    /// The above in words.
    pub advice: String,
}

/// What the report's trials measured: HTTP servers, scripts, or both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Workloads {
    Http,
    Script,
    Mixed,
}

impl Report {
    /// The comparison of `cohort` with the baseline on `metric`, if there is one.
    pub fn comparison(&self, cohort: &str, metric: &str) -> Option<&Comparison> {
        self.comparisons
            .iter()
            .find(|c| c.cohort == cohort && c.metric == metric)
    }
}

#[cfg(test)]
mod tests {
    use super::Report;

    /// The report's golden JSON (one cohort against the baseline, 95%), its intervals
    /// then made simultaneous over families: the label names the intervals' own level, or
    /// says "simultaneous" where the families' levels differ.
    #[test]
    fn the_interval_label_names_the_level_of_the_intervals_shown() {
        let mut report: Report =
            serde_json::from_str(include_str!("../tests/golden/report-http/report.json")).unwrap();
        assert!(!report.comparisons.is_empty());
        assert_eq!(report.interval_label(), "95%");
        for c in &mut report.comparisons {
            c.confidence = 1.0 - 0.05 / 3.0;
            c.family_size = 3;
        }
        assert_eq!(report.interval_label(), "98.3%");
        report.comparisons[0].confidence = 0.975;
        assert_eq!(report.interval_label(), "95% simultaneous");
        report.comparisons.clear();
        assert_eq!(report.interval_label(), "95%");
    }
}
