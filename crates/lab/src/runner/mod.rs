//! The local runner: takes the stored schedule of a results directory and runs every trial
//! that is not stored yet, in schedule order, one at a time, storing each as it ends. The
//! same function starts a run and resumes one, so a resume is exactly "run what is left".
//!
//! - `progress`: what a run reports while it works ([`Progress`]);
//! - `plan`: the plan of a run as JSON, and each trial's spec;
//! - `alone`: one trial outside a run (`rubyrace trial --spec`);
//! - `session`: [`run_pending`], a session from its setup to its end;
//! - `pending`: the loops that run the pending trials, one at a time or a block at a time;
//! - `rule`: the runs that decide when to stop (adaptive precision, a gate), a block at a
//!   time.

mod alone;
mod pending;
mod plan;
mod progress;
mod rule;
mod session;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use experiment::conditions::TrialConditions;
use experiment::design::Design;
use experiment::Config;
use results::store::Store;

use crate::services::RunServices;

pub use alone::run_alone;
pub use pending::never_ran_all;
pub use plan::{plan, trial_spec};
pub use progress::{Both, Progress};
pub use rule::precision_look;
pub use session::run_pending;

/// How a run ended.
#[derive(Debug, PartialEq, Eq)]
pub enum RunEnd {
    /// Every scheduled trial is stored.
    Complete,
    /// Ctrl-C: the current trial was abandoned (and will be run again on resume).
    Interrupted,
    /// `--fail-fast` and a trial failed or was invalid.
    StoppedAfterFailure { trial_id: usize },
    /// What the run measures cannot boot, so another block would fail the same way: after
    /// `block` (from 1, as people count), a gate's base or head has failed every trial
    /// (it does not build or boot), or no trial of a run has run at all. Every trial is
    /// stored; a resume goes on with the next block.
    CannotBoot {
        block: u32,
        /// Each configuration that cannot run, by label, with the reason of its first
        /// failed trial (the server's error line where it printed one).
        failures: Vec<(String, String)>,
    },
}

impl RunEnd {
    /// For [`RunEnd::CannotBoot`]: who cannot run and why, one line each.
    pub fn cannot_boot_lines(&self) -> Vec<String> {
        match self {
            RunEnd::CannotBoot { failures, .. } => failures
                .iter()
                .map(|(label, reason)| format!("{label}: {reason}"))
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// One `rubyrace run` session at work: what every trial of it needs.
struct Run<'a> {
    store: &'a mut Store,
    session: i64,
    configs: Vec<Config>,
    record_env: Vec<String>,
    fail_fast: bool,
    conditions: TrialConditions,
    design: Design,
    seed: u64,
    interrupt: &'a Arc<AtomicBool>,
    progress: &'a mut dyn Progress,
    /// `[services]` and `setup`, when the experiment has any.
    services: Option<RunServices>,
    /// The profilers whose failure this session has told already (once each).
    profilers_told: std::collections::BTreeSet<experiment::Profiler>,
}
