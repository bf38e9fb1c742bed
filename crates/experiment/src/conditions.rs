//! The conditions trials are measured in, on a shared machine: wait for the machine to be
//! quiet before each trial (`quiet`), keep the server and the load generator on disjoint
//! CPUs (`cpus`), and run a trial measured in noise again (`repeat_noisy`). None of these
//! changes what a configuration is; they change how much of the machine's noise gets into
//! its figures, so they are run-wide settings, stored with the run and recorded per trial.
//! (Waiting and checking happen in `lab::conditions`.)

use std::time::Duration;

use serde::{Deserialize, Serialize};

use sys::cpus::CpuSplit;
use sys::noise::{NOISY_OTHER_PERCENT, NOISY_STEAL_PERCENT};

/// The run-wide trial conditions (experiment root keys `quiet`, `cpus`, `repeat_noisy`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TrialConditions {
    pub quiet: Option<QuietRule>,
    pub cpus: Option<CpuSplit>,
    /// Run a trial measured in noise again, up to this many times, in the same place of its
    /// block; each noisy attempt is stored apart and left out of the statistics.
    pub repeat_noisy: u32,
}

/// When the machine counts as quiet enough to start a trial.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuietRule {
    /// Other processes' CPU below this (% of one CPU) over a sampling window.
    pub other_percent: f64,
    /// Steal below this (% of one CPU) over the same window.
    pub steal_percent: f64,
    /// Never wait longer than this: the trial then starts anyway, and its record says so.
    #[serde(with = "humantime_serde")]
    pub max_wait: Duration,
    /// The sampling window: the machine is judged over this long at a time.
    #[serde(with = "humantime_serde")]
    pub window: Duration,
}

impl Default for QuietRule {
    /// The thresholds of "measured in noise" (`sys::noise`), judged over 500 ms windows
    /// (/proc/stat counts 10 ms ticks: ±2% of a CPU), waiting at most a minute.
    fn default() -> Self {
        QuietRule {
            other_percent: NOISY_OTHER_PERCENT,
            steal_percent: NOISY_STEAL_PERCENT,
            max_wait: Duration::from_secs(60),
            window: Duration::from_millis(500),
        }
    }
}
