//! `[fleet]`: how `rubyrace run --slurm` spreads an experiment's blocks over machines
//! (docs/fleet.md). The engine is Slurm: one array task per block, each on a node of its
//! own (`--exclusive`), at most `nodes` at once.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The engines a fleet can run on.
pub const ENGINES: &[&str] = &["slurm"];
/// Where the load generator runs: beside the server, or on a node of its own.
pub const LOADS: &[&str] = &["same", "separate"];
/// The keys of `[fleet]`.
pub const FLEET_KEYS: &[&str] = &[
    "engine",
    "nodes",
    "partition",
    "time_limit",
    "sbatch",
    "retries",
    "load",
    "probe_timeout",
];

/// The fleet's settings: `[fleet]` of the experiment file, or the defaults of `--slurm`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fleet {
    /// Always "slurm" today.
    pub engine: String,
    /// At most this many blocks run at once, each on its own node.
    pub nodes: u32,
    /// The Slurm partition (`sbatch --partition`); the cluster's default when absent.
    pub partition: Option<String>,
    /// Each block's time limit (`sbatch --time`); absent: three times the block's estimate
    /// plus ten minutes.
    #[serde(with = "humantime_serde")]
    pub time_limit: Option<Duration>,
    /// More `sbatch` arguments, as written (e.g. `["--constraint=bench"]`).
    pub sbatch: Vec<String>,
    /// How often a block whose task failed or whose node died is submitted again.
    pub retries: u32,
    /// "same" (server and load generator on one node) or "separate" (two nodes per block).
    pub load: String,
    /// How long the probe jobs may wait for their nodes before the run is refused.
    #[serde(with = "humantime_serde")]
    pub probe_timeout: Duration,
}

impl Default for Fleet {
    fn default() -> Fleet {
        Fleet {
            engine: "slurm".into(),
            nodes: 2,
            partition: None,
            time_limit: None,
            sbatch: Vec::new(),
            retries: 2,
            load: "same".into(),
            probe_timeout: Duration::from_secs(300),
        }
    }
}

impl Fleet {
    /// Whether each block takes a second node for the load generator.
    pub fn separate_load(&self) -> bool {
        self.load == "separate"
    }

    /// The time limit of a block whose estimate is `block`.
    pub fn block_time_limit(&self, block: Duration) -> Duration {
        self.time_limit
            .unwrap_or(block * 3 + Duration::from_secs(600))
    }
}
