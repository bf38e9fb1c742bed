//! The conditions a trial ran under, as recorded: how long it waited for a quiet machine,
//! and what was checked of its pinning (`lab::conditions` waits and checks).

use serde::{Deserialize, Serialize};

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
