//! The controller (`rubyrace run --slurm`, and `run --resume` of a fleet run): probes the
//! nodes, submits the blocks as a Slurm job array, watches the tasks, imports each
//! finished block into the run's `results.db` in one transaction, resubmits a block whose
//! task failed or whose node died (up to `retries`), and names what is still missing.
//!
//! An adaptive run (`precision`) keeps `nodes` blocks in flight and applies its stopping
//! rule to blocks in block order: a block that finishes before an earlier one waits, on
//! disk, until every block before it is stored. The rule so sees exactly the sequence of
//! looks a local run makes (docs/methodology.md, "Blocks that finish out of order").
//!
//! This module holds the session and its loop: `run_fleet` (Slurm checked, the nodes probed,
//! the controller set up, the outcome recorded), `Controller::run` (poll, import, resubmit
//! until every block is stored or given up on) and what the loop counts (the blocks planned,
//! stored, still to submit). The parts, each read top to bottom:
//! - `state`: the controller's record (`fleet/state.json`), every attempt of every block;
//! - `nodes`: the nodes probed before a first submission, and how they differ;
//! - `jobs`: the job arrays submitted, polled (a failed attempt resubmitted or given up on)
//!   and cancelled, and the lines told of them (running, waiting in Slurm's queue);
//! - `import`: the finished block files stored, in block order for an adaptive run;
//! - `adaptive`: an adaptive run's rule, looked at after each block stored, and its blocks
//!   kept in flight.

mod adaptive;
mod import;
mod jobs;
mod nodes;
mod state;

pub use nodes::hosts_differ;
pub use state::{Attempt, FleetState};

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use experiment::fleet::Fleet;
use experiment::precision::PrecisionTarget;
use results::store::Store;

use crate::slurm::Slurm;

/// How a fleet session ended.
#[derive(Debug, PartialEq, Eq)]
pub enum FleetEnd {
    /// Every block is stored (and an adaptive run has decided).
    Complete,
    /// `--detach`: submitted; a later `run --resume` attaches.
    Detached,
    /// Ctrl-C: the jobs are cancelled, every finished block is stored.
    Interrupted,
    /// Blocks that failed every attempt, with the last reason of each.
    Missing(Vec<(u32, String)>),
}

/// What a fleet session is asked to do.
pub struct Options<'a> {
    /// The store's session kind.
    pub kind: results::store::SessionKind,
    /// The command line, recorded with the session.
    pub command: &'a str,
    /// Submit and return.
    pub detach: bool,
    /// The rubyrace every task runs (this binary, which must be on every node).
    pub binary: PathBuf,
}

/// Runs the blocks of `store` that are not stored on the fleet it names.
pub fn run_fleet(
    store: &mut Store,
    options: &Options,
    interrupt: &Arc<AtomicBool>,
    events: &mut dyn FnMut(&str),
) -> Result<FleetEnd> {
    let fleet = store
        .fleet()?
        .context("this results directory was not made by `rubyrace run --slurm`")?;
    let slurm = Slurm {
        partition: fleet.partition.clone(),
    };
    // Slurm reached and the partition there, or a clear word on which file is wrong.
    slurm
        .check()
        .map_err(|e| e.context("nothing was submitted"))?;
    let dir = store.dir().to_path_buf();
    std::fs::create_dir_all(dir.join("fleet").join("logs"))?;
    // Attaching to jobs in flight (after --detach, Ctrl-C of a killed controller): their
    // nodes were probed before they were submitted, and a probe would queue behind them.
    let in_flight = FleetState::load(&dir)?.active_jobs();
    if in_flight.is_empty() {
        let reports = nodes::probe(store, &slurm, &fleet, &options.binary, events)?;
        for warning in hosts_differ(&reports) {
            events(&format!("warning: hosts-differ: {warning}"));
        }
    } else {
        events(&format!(
            "attaching to job(s) {} (their nodes were probed when they were submitted)",
            in_flight.join(" ")
        ));
    }
    let session = store.begin_session(options.kind, options.command)?;
    let state = FleetState::load(&dir)?;
    // An attempt in flight that this session attaches to is its first of the block: a
    // failure of it is retry 1, as in the session that submitted it.
    let mut session_attempts: HashMap<u32, u32> = HashMap::new();
    for (b, attempts) in &state.attempts {
        let in_flight = attempts.iter().filter(|a| !a.ended).count() as u32;
        if in_flight > 0 {
            session_attempts.insert(*b, in_flight);
        }
    }
    let mut controller = Controller {
        dir: dir.clone(),
        block_trials: HashMap::new(),
        state,
        session_attempts,
        slurm,
        fleet,
        binary: options.binary.clone(),
        session,
        target: store
            .precision_target()?
            .filter(|_| store.precision_end().ok().flatten().is_none()),
        store,
        running_told: BTreeSet::new(),
        running_lines: Vec::new(),
        order_told: BTreeSet::new(),
        cancelling: false,
        stored_on: BTreeMap::new(),
        waiting_told: None,
    };
    controller.state.missing.clear();
    let end = controller.run(options.detach, interrupt, events);
    let outcome = match &end {
        Ok(FleetEnd::Complete) => "complete".to_string(),
        Ok(FleetEnd::Detached) => "detached".to_string(),
        Ok(FleetEnd::Interrupted) => "interrupted".to_string(),
        Ok(FleetEnd::Missing(m)) => format!("{} block(s) missing", m.len()),
        Err(e) => format!("failed: {e:#}"),
    };
    let _ = controller.state.save(&dir);
    let _ = controller.store.end_session(session, &outcome);
    end
}

/// One fleet session: its store and fleet, the record it keeps, and what it has told; each
/// part of the story is an `impl Controller` block of its own (`jobs`, `import`, `adaptive`).
struct Controller<'a> {
    dir: PathBuf,
    store: &'a mut Store,
    fleet: Fleet,
    slurm: Slurm,
    binary: PathBuf,
    session: i64,
    state: FleetState,
    /// Attempts made in this session, per block (the retry budget is per session, so a
    /// resume tries a missing block again).
    session_attempts: HashMap<u32, u32>,
    /// How many trials each block has (a block file must hold them all).
    block_trials: HashMap<u32, usize>,
    /// The adaptive rule, while it has not decided.
    target: Option<PrecisionTarget>,
    /// Attempts whose start on a node was told.
    running_told: BTreeSet<String>,
    /// Starts seen by the last poll, told after the blocks that poll saw end are stored:
    /// a node's next block starts only after its last one ended.
    running_lines: Vec<String>,
    /// Blocks of an adaptive run told to wait, finished, for the blocks before them.
    order_told: BTreeSet<u32>,
    /// Ctrl-C: the jobs are being cancelled by the user, whose attempts are not failures.
    cancelling: bool,
    /// The blocks this session stored, per node (the progress per host).
    stored_on: BTreeMap<String, Vec<u32>>,
    /// The last "waiting in Slurm's queue" line, and when it was told.
    waiting_told: Option<(String, Instant)>,
}

impl Controller<'_> {
    fn run(
        &mut self,
        detach: bool,
        interrupt: &Arc<AtomicBool>,
        events: &mut dyn FnMut(&str),
    ) -> Result<FleetEnd> {
        self.refresh_block_trials()?;
        // Blocks a detached or interrupted session left finished or running: looked at
        // first, so nothing is submitted twice.
        self.poll(events)?;
        self.import_ready(events)?;
        self.tell_running(events);
        let pending = self.unsubmitted_blocks()?;
        self.submit(&pending, events)?;
        if detach {
            self.state.save(&self.dir)?;
            return Ok(FleetEnd::Detached);
        }
        let mut last_poll = Instant::now();
        loop {
            if interrupt.load(Ordering::SeqCst) {
                return self.cancel(events);
            }
            if last_poll.elapsed() < Duration::from_millis(500) {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
            last_poll = Instant::now();
            let resubmit = self.poll(events)?;
            self.import_ready(events)?;
            self.tell_running(events);
            if !resubmit.is_empty() {
                self.submit(&resubmit, events)?;
            }
            if self.target.is_some() {
                self.keep_in_flight(events)?;
            }
            self.state.save(&self.dir)?;
            if self.state.active_jobs().is_empty() && !self.has_ready() {
                let missing: Vec<(u32, String)> = self
                    .state
                    .missing
                    .iter()
                    .map(|(b, w)| (*b, w.clone()))
                    .collect();
                let unstored = self.unsubmitted_blocks()?;
                if !unstored.is_empty() && missing.is_empty() {
                    // Added by the adaptive rule in this very poll: go on.
                    self.submit(&unstored, events)?;
                    continue;
                }
                return Ok(if missing.is_empty() {
                    FleetEnd::Complete
                } else {
                    FleetEnd::Missing(missing)
                });
            }
        }
    }

    fn refresh_block_trials(&mut self) -> Result<()> {
        self.block_trials.clear();
        for t in self.store.schedule()? {
            *self.block_trials.entry(t.block).or_default() += 1;
        }
        Ok(())
    }

    /// Blocks of the schedule not stored, not in flight, not waiting to be imported and
    /// not given up on.
    fn unsubmitted_blocks(&self) -> Result<Vec<u32>> {
        let stored = self.stored_blocks()?;
        Ok(self
            .block_trials
            .keys()
            .copied()
            .filter(|b| !stored.contains(b))
            .filter(|b| !self.state.missing.contains_key(b))
            .filter(|b| {
                !self.state.attempts.get(b).is_some_and(|a| {
                    a.iter()
                        .any(|a| !a.ended || (a.failure.is_none() && !a.imported))
                })
            })
            .collect())
    }

    fn stored_blocks(&self) -> Result<BTreeSet<u32>> {
        let done = self.store.completed()?;
        let mut per_block: HashMap<u32, usize> = HashMap::new();
        for t in self.store.schedule()? {
            if done.contains(&t.trial_id) {
                *per_block.entry(t.block).or_default() += 1;
            }
        }
        Ok(per_block
            .into_iter()
            .filter(|(b, n)| self.block_trials.get(b) == Some(n))
            .map(|(b, _)| b)
            .collect())
    }
}
