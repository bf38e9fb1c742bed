//! What the in-process probe left in a trial's record: each Ruby process as it was seen,
//! the GC, heap and JIT figures over the measured phase, and the verification that `jit`,
//! `allocator` and `compact` were in force (`lab::probe` reads the probe's files and
//! derives them).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One Ruby process as the probe saw it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ProbeProcess {
    pub pid: i32,
    /// A forked worker (not the process rubyrace started).
    pub forked: bool,
    pub ruby_description: String,
    /// Seconds from the process's start (or fork) to its app being built.
    pub app_loaded_after_s: Option<f64>,
    /// Seconds from the process's start (or fork) to its first request answered.
    pub first_request_after_s: Option<f64>,
    /// The snapshots it wrote (`measure_start`, `measure_end`, `exit`).
    pub snapshots: Vec<String>,
    /// JIT states at its last snapshot (`yjit` → enabled?).
    pub jit: BTreeMap<String, bool>,
    pub gc_auto_compact: Option<bool>,
    /// GC.compact ran after boot (compact = "after-boot").
    pub compacted_after_boot: bool,
    pub compact_count: Option<u64>,
    /// Allocator libraries in its `/proc/PID/maps`, read by rubyrace during the
    /// measurement (or by the probe itself, for processes rubyrace could not read).
    pub allocator_libraries: Vec<String>,
    /// What went wrong inside the probe, if anything.
    pub errors: Vec<String>,
}

/// GC, heap and JIT figures over the measured phase, summed over the processes that took
/// both snapshots.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct MeasuredRuntime {
    pub processes: usize,
    pub gc_count: u64,
    pub minor_gc_count: u64,
    pub major_gc_count: u64,
    /// Milliseconds in GC (`GC.stat[:time]`, Ruby >= 3.1).
    pub gc_time_ms: Option<f64>,
    pub allocated_objects: Option<u64>,
    pub compact_count: Option<u64>,
    /// At the end of the phase, summed over processes.
    pub heap_allocated_pages: Option<u64>,
    pub heap_live_slots: Option<u64>,
    /// YJIT's generated code at the end (`code_region_size`, or inline + outlined).
    pub yjit_code_bytes: Option<u64>,
    /// Mean share of instructions run in YJIT (needs `--yjit-stats`).
    pub yjit_ratio_in_yjit: Option<f64>,
    pub yjit_invalidations: Option<u64>,
    /// The same per 1000 measured requests.
    pub gc_per_1000_requests: Option<f64>,
    pub minor_gc_per_1000_requests: Option<f64>,
    pub major_gc_per_1000_requests: Option<f64>,
    pub gc_time_ms_per_1000_requests: Option<f64>,
    pub allocated_objects_per_request: Option<f64>,
}

/// Everything the probe reported for one trial.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ProbeSummary {
    pub processes: Vec<ProbeProcess>,
    /// RUBY_DESCRIPTION inside the server (of the first process).
    pub ruby_description: Option<String>,
    /// Gems loaded in the server (name → version), from the last snapshots.
    pub gems: BTreeMap<String, String>,
    /// The slowest process: seconds from start to app built, and to first request.
    pub app_loaded_after_s: Option<f64>,
    pub first_request_after_s: Option<f64>,
    pub measured: Option<MeasuredRuntime>,
}

/// One verified setting.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Check {
    /// "jit", "allocator" or "compact".
    pub setting: String,
    pub expected: String,
    /// What the running processes showed, e.g. "yjit on in 3 of 3 processes".
    pub observed: String,
    pub ok: bool,
}

/// Whether the settings asked for were in force in every Ruby process of the trial.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Verification {
    pub ok: bool,
    pub checks: Vec<Check>,
}

impl Verification {
    /// The failed checks as one sentence, for a trial's reason.
    pub fn failure(&self) -> Option<String> {
        let failed: Vec<String> = self
            .checks
            .iter()
            .filter(|c| !c.ok)
            .map(|c| {
                format!(
                    "{} = \"{}\" not in force: {}",
                    c.setting, c.expected, c.observed
                )
            })
            .collect();
        (!failed.is_empty()).then(|| format!("settings not verified: {}", failed.join("; ")))
    }
}
