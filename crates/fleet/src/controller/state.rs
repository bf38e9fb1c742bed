//! The controller's record of a fleet run (`fleet/state.json`): every submission of every
//! block, with Slurm's last word on it, and the blocks given up on; loaded by `run --resume`
//! and `rubyrace watch`, saved after every change.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::task::write_atomically;

/// One submission of a block.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Attempt {
    /// The array job that runs it; its task id is the block.
    pub job: String,
    /// The node(s) Slurm gave it, once known.
    pub nodes: String,
    /// Slurm's last word on it (PENDING, RUNNING, COMPLETED, NODE_FAIL...).
    pub state: String,
    /// Whether Slurm is done with it.
    pub ended: bool,
    /// Why it did not give a block, when it did not.
    pub failure: Option<String>,
    /// Whether its block is stored.
    pub imported: bool,
}

impl Attempt {
    /// Its directory's name (`ARRAYJOB_TASK`), where the task writes.
    pub(super) fn name(&self, block: u32) -> String {
        format!("{}_{block}", self.job)
    }
}

/// The controller's record (`fleet/state.json`), rewritten after every change, so a later
/// `run --resume` (after `--detach`, Ctrl-C or a killed controller) knows every job.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct FleetState {
    pub attempts: BTreeMap<u32, Vec<Attempt>>,
    /// Blocks given up on in the last session, with why.
    pub missing: BTreeMap<u32, String>,
}

impl FleetState {
    fn path(dir: &Path) -> PathBuf {
        dir.join("fleet").join("state.json")
    }

    pub fn load(dir: &Path) -> Result<FleetState> {
        let path = FleetState::path(dir);
        if !path.exists() {
            return Ok(FleetState::default());
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        serde_json::from_str(&text)
            .with_context(|| format!("{} is not a fleet state", path.display()))
    }

    pub(super) fn save(&self, dir: &Path) -> Result<()> {
        write_atomically(&FleetState::path(dir), &serde_json::to_vec_pretty(self)?)
    }

    pub(super) fn active_jobs(&self) -> Vec<String> {
        let jobs: BTreeSet<String> = self
            .attempts
            .values()
            .flatten()
            .filter(|a| !a.ended)
            .map(|a| a.job.clone())
            .collect();
        jobs.into_iter().collect()
    }
}
