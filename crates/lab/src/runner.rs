//! The local runner: takes the stored schedule of a results directory and runs every trial
//! that is not stored yet, in schedule order, one at a time, storing each as it ends. The
//! same function starts a run and resumes one, so a resume is exactly "run what is left".

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};

use crate::conditions::wait_for_quiet;
use crate::interleave::{run_interleaved_block, BlockEvent, BlockOutcome};
use crate::services::RunServices;
use crate::trial::{run_trial, TrialOutcome, TrialSpec, TRIAL_SPEC_SCHEMA};
use experiment::conditions::{QuietRule, TrialConditions};
use experiment::design::Design;
use experiment::gate::{GateEnd, GateTarget, GateVerdict};
use experiment::precision::{
    evaluate, PrecisionEnd, PrecisionStatus, PrecisionStop, PrecisionTarget,
};
use experiment::schedule::ScheduledTrial;
use experiment::Config;
use results::conditions::QuietWait;
use results::store::Store;
use results::{TrialResult, TrialStatus};
use sys::cpus::pin_this_process;
use sys::process::{become_subreaper, kill_registered_leftovers};

/// What the runner reports while it works (a progress bar, a log, a test).
pub trait Progress {
    /// `total` trials in the schedule, `done` of them already stored.
    fn begin(&mut self, total: usize, done: usize, blocks: u32);
    fn trial_started(&mut self, trial: &ScheduledTrial, label: &str);
    fn trial_finished(&mut self, result: &TrialResult);
    fn note(&mut self, message: &str);
    /// What a block of servers up together (interleaved, co-scheduled) is doing: its
    /// trials all start and end together, so this is its progress in between.
    fn block_event(&mut self, _block: u32, _event: &BlockEvent) {}
    /// An adaptive run looked at its precision after a block (`added` is true when it adds
    /// another block, whose trials make the schedule `total` long).
    /// A run that decides when to stop added a block: the schedule is `total` trials long.
    fn planned(&mut self, _total: usize) {}
    /// A run that decides when to stop and has not yet (`Store::next_look`): it will have
    /// at least `blocks` blocks (its rule's next look), so a count of blocks or trials
    /// planned, and the time left, are minimums. None: the plan is what will run.
    fn at_least(&mut self, _blocks: Option<u32>) {}
    fn precision(
        &mut self,
        _status: &PrecisionStatus,
        _target: &PrecisionTarget,
        _added: bool,
        _total: usize,
    ) {
    }
}

/// Two `Progress`es told the same events: the terminal's and the live file's, say.
pub struct Both<'a>(pub &'a mut dyn Progress, pub &'a mut dyn Progress);

impl Progress for Both<'_> {
    fn begin(&mut self, total: usize, done: usize, blocks: u32) {
        self.0.begin(total, done, blocks);
        self.1.begin(total, done, blocks);
    }
    fn trial_started(&mut self, trial: &ScheduledTrial, label: &str) {
        self.0.trial_started(trial, label);
        self.1.trial_started(trial, label);
    }
    fn trial_finished(&mut self, result: &TrialResult) {
        self.0.trial_finished(result);
        self.1.trial_finished(result);
    }
    fn note(&mut self, message: &str) {
        self.0.note(message);
        self.1.note(message);
    }
    fn block_event(&mut self, block: u32, event: &BlockEvent) {
        self.0.block_event(block, event);
        self.1.block_event(block, event);
    }
    fn planned(&mut self, total: usize) {
        self.0.planned(total);
        self.1.planned(total);
    }
    fn at_least(&mut self, blocks: Option<u32>) {
        self.0.at_least(blocks);
        self.1.at_least(blocks);
    }
    fn precision(
        &mut self,
        status: &PrecisionStatus,
        target: &PrecisionTarget,
        added: bool,
        total: usize,
    ) {
        self.0.precision(status, target, added, total);
        self.1.precision(status, target, added, total);
    }
}

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

/// The plan of a run as one JSON document (schema `rubyrace.plan/1`, what `rubyrace run
/// --dry-run --json` prints): the experiment's run-wide settings, the resolved
/// configurations, the schedule, and every trial's spec, each runnable with `rubyrace trial
/// --spec`, for the results directory `dir`.
pub fn plan(
    experiment: &experiment::Experiment,
    schedule: &[ScheduledTrial],
    dir: &Path,
    smoke: bool,
) -> Result<serde_json::Value> {
    let dir = std::path::absolute(dir)?;
    let specs = schedule
        .iter()
        .map(|t| {
            trial_spec(
                &dir,
                &experiment.configs,
                t,
                &experiment.record_env,
                &experiment.conditions,
            )
        })
        .map(|spec| {
            spec.map(|mut s| {
                s.services = experiment.services.clone();
                s
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(serde_json::json!({
        "schema": "rubyrace.plan/1",
        "experiment": {
            "name": experiment.name,
            "description": experiment.description,
            "file": std::fs::canonicalize(&experiment.file).unwrap_or_else(|_| experiment.file.clone()),
            "smoke": smoke,
            "seed": experiment.seed,
            "batches": experiment.batches,
            "precision": experiment.precision,
            "conditions": experiment.conditions,
            "design": experiment.design,
            "order": experiment.order,
            "record_env": experiment.record_env,
            "services": experiment.services,
        },
        "results_dir": dir,
        "configs": experiment.configs,
        "schedule": schedule,
        "trials": specs,
    }))
}

/// The spec of one scheduled trial of the results directory `results_dir`.
pub fn trial_spec(
    results_dir: &Path,
    configs: &[Config],
    trial: &ScheduledTrial,
    record_env: &[String],
    conditions: &TrialConditions,
) -> Result<TrialSpec> {
    let config = configs
        .iter()
        .find(|c| c.id == trial.config_id)
        .with_context(|| {
            format!(
                "trial {} names configuration {}, which is not stored",
                trial.trial_id, trial.config_id
            )
        })?;
    Ok(TrialSpec {
        schema: TRIAL_SPEC_SCHEMA.into(),
        trial_id: trial.trial_id,
        block: trial.block,
        position: trial.position,
        config_id: config.id,
        label: config.label.clone(),
        settings: crate::checkouts::settings_in_checkout(results_dir, &config.settings),
        record_env: record_env.to_vec(),
        out_dir: results::store::trial_dir(results_dir, trial.trial_id),
        registry: results::store::registry(results_dir),
        cpus: conditions.cpus.clone(),
        service_env: Default::default(),
        services: Default::default(),
    })
}

/// One trial outside a run (`rubyrace trial --spec`): the spec's services started and its
/// `setup` run for it alone, in its directory, exactly as a run does before its first
/// trial; stopped and removed after it. The services' record goes into the result's
/// `services.instances`.
pub fn run_alone(spec: &TrialSpec, interrupt: &Arc<AtomicBool>) -> Result<TrialOutcome> {
    let config = Config {
        id: spec.config_id,
        label: spec.label.clone(),
        axes: Default::default(),
        settings: spec.settings.clone(),
    };
    // `ref`: the spec's paths are in its commit's checkout in the results directory its
    // trial directory is in (`DIR/trials/NNNNN`), made for this trial and removed after it.
    let results_dir = spec
        .out_dir
        .parent()
        .and_then(Path::parent)
        .unwrap_or(&spec.out_dir);
    let _checkouts =
        crate::checkouts::Checkouts::prepare(results_dir, std::slice::from_ref(&config))?;
    if spec.services.is_empty() && spec.settings.setup.is_empty() {
        return Ok(run_trial(spec, interrupt));
    }
    crate::services::remove_leftovers(&spec.out_dir);
    let mut services =
        RunServices::start(&spec.services, &[config], &spec.out_dir, &spec.registry, 1)?;
    let prepared = match services.before_trial(&spec.settings, spec.trial_id, interrupt) {
        Ok(p) => p,
        Err(_) if interrupt.load(Ordering::SeqCst) => return Ok(TrialOutcome::Interrupted),
        Err(e) => return Err(e),
    };
    let mut spec = spec.clone();
    spec.service_env = prepared.env.clone();
    let outcome = run_trial(&spec, interrupt);
    let mut record = services.after_trial(prepared);
    // The services of the "run" lived for this trial too: one record of them all.
    let run = services.stop();
    let instances = record.instances.get_or_insert_with(Default::default);
    instances.postgres = instances.postgres.take().or(run.postgres);
    instances.redis = instances.redis.take().or(run.redis);
    instances.setup.extend(run.setup);
    instances.stopped.extend(run.stopped);
    Ok(match outcome {
        TrialOutcome::Done(mut result) => {
            result.services = Some(record);
            TrialOutcome::Done(result)
        }
        other => other,
    })
}

/// Runs every scheduled trial not stored yet, as a session of `kind`; `command`
/// is recorded as the session's command line.
pub fn run_pending(
    store: &mut Store,
    kind: results::store::SessionKind,
    command: &str,
    fail_fast: bool,
    interrupt: &Arc<AtomicBool>,
    progress: &mut dyn Progress,
) -> Result<RunEnd> {
    take_charge_of_processes(store, progress);
    let stored_configs = store.configs()?;
    let schedule = store.schedule()?;
    let record_env: Vec<String> = store
        .meta("record_env")?
        .map(|v| serde_json::from_str(&v))
        .transpose()
        .context("stored record_env")?
        .unwrap_or_default();
    let blocks = schedule.iter().map(|t| t.block + 1).max().unwrap_or(0);
    let done = store.completed()?;
    // `ref`: each commit checked out in the results directory for this session, and every
    // configuration's paths moved there (the services' `setup` runs there too).
    // A complete run (every planned trial stored, and an adaptive one ended) has nothing to
    // run: its resume checks nothing out, starts no service and keeps every log as it was.
    let complete = is_complete(store, &schedule, &done)?;
    let checkouts = if complete {
        crate::checkouts::Checkouts::default()
    } else {
        crate::checkouts::Checkouts::prepare(store.dir(), &stored_configs)?
    };
    for (c, path) in checkouts.made() {
        progress.note(&format!(
            "checked out {} ({}) at {}",
            c.git_ref,
            &c.commit[..12.min(c.commit.len())],
            path.display()
        ));
    }
    let configs: Vec<Config> = stored_configs
        .into_iter()
        .map(|c| Config {
            settings: crate::checkouts::settings_in_checkout(store.dir(), &c.settings),
            ..c
        })
        .collect();
    let conditions = store.conditions()?;
    progress.begin(schedule.len(), done.len(), blocks);
    progress.at_least(store.next_look(blocks)?);
    let session = store.begin_session(kind, command)?;
    // What makes this machine noisy right now, recorded with the session (quick: no CPU
    // sampling, no Ruby queries; about 50 ms).
    let doctor = doctor::examine_with(&doctor::Options {
        quick: true,
        ..doctor::Options::default()
    });
    store.record_doctor(session, &doctor)?;
    if let Some(split) = &conditions.cpus {
        // After the doctor, which reads rubyrace's own affinity as the machine's. Every
        // thread rubyrace starts from now on (the load generator's among them) inherits
        // this; servers are moved to their own CPUs before exec.
        pin_this_process(&split.load).with_context(|| {
            format!(
                "cpus: cannot pin rubyrace to CPU {} (the server would go on CPU {})",
                split.load, split.server
            )
        })?;
    }
    // [services] and setup: started now, before the first trial; a service that does not
    // start ends the session here, with its log's tail.
    crate::services::remove_leftovers(store.dir());
    let services = if complete {
        None
    } else {
        start_services(store, &configs, session, progress)?
    };
    let design = store.design()?;
    let seed = store.seed()?;
    let mut run = Run {
        store,
        session,
        configs,
        record_env,
        fail_fast,
        conditions,
        design,
        seed,
        interrupt,
        progress,
        services,
        profilers_told: Default::default(),
    };
    let mut end = run.run_schedule(&schedule, &done);
    if let (Ok(RunEnd::Complete), Some(target)) = (&end, run.store.precision_target()?) {
        if run.store.precision_end()?.is_none() {
            end = run.run_until_precise(&target);
        }
    }
    if let (Ok(RunEnd::Complete), Some(gate)) = (&end, run.store.gate()?) {
        if run.store.gate_end()?.is_none() {
            end = run.run_until_decided(&gate);
        }
    }
    let outcome = session_outcome(&end);
    if let Some(services) = run.services.take() {
        let record = services.stop();
        let _ = run.store.record_services(session, &record);
    }
    // Best effort: with a full disk even this may fail, and the error above matters more.
    let _ = run.store.end_session(session, &outcome);
    drop(checkouts);
    end
}

/// The session's `[services]` and `setup` (None when the experiment has neither). A service
/// that does not start ends the session, with its log's tail in the error.
fn start_services(
    store: &Store,
    configs: &[Config],
    session: i64,
    progress: &mut dyn Progress,
) -> Result<Option<RunServices>> {
    if store.services()?.is_empty() && configs.iter().all(|c| c.settings.setup.is_empty()) {
        return Ok(None);
    }
    match RunServices::start(
        &store.services()?,
        configs,
        store.dir(),
        &store.registry(),
        session,
    ) {
        Ok(s) => {
            if let Some(summary) = s.record().summary() {
                progress.note(&format!("services: {summary}"));
            }
            store.record_services(session, s.record())?;
            Ok(Some(s))
        }
        Err(e) => {
            let _ = store.end_session(session, &format!("failed: {e:#}"));
            Err(e)
        }
    }
}

/// Before a session: rubyrace becomes the reaper of its servers' orphans (a server that
/// daemonized comes back to it, to be killed at the end of its trial), and kills the
/// servers an earlier rubyrace left running (its registry).
fn take_charge_of_processes(store: &Store, progress: &mut dyn Progress) {
    if let Err(e) = become_subreaper() {
        progress.note(&format!(
            "cannot become a child subreaper ({e}): a server that daemonizes could outlive its trial"
        ));
    }
    for killed in kill_registered_leftovers(&store.registry()) {
        progress.note(&format!(
            "killed {killed}, a server left running by an earlier rubyrace that did not exit cleanly"
        ));
    }
}

/// Whether the run has nothing left to do: every planned trial stored, and an adaptive run
/// or a gate ended.
fn is_complete(
    store: &Store,
    schedule: &[experiment::schedule::ScheduledTrial],
    done: &std::collections::HashSet<usize>,
) -> Result<bool> {
    Ok(schedule.iter().all(|t| done.contains(&t.trial_id))
        && (store.precision_target()?.is_none() || store.precision_end()?.is_some())
        && (store.gate()?.is_none() || store.gate_end()?.is_some()))
}

/// How a session ended, as its row in the `sessions` table says.
fn session_outcome(end: &Result<RunEnd>) -> String {
    match end {
        Ok(RunEnd::Complete) => "complete".to_string(),
        Ok(RunEnd::Interrupted) => "interrupted".to_string(),
        Ok(RunEnd::StoppedAfterFailure { trial_id }) => {
            format!("stopped after trial {trial_id} (--fail-fast)")
        }
        Ok(end @ RunEnd::CannotBoot { block, .. }) => format!(
            "stopped after block {block}: cannot run ({})",
            end.cannot_boot_lines().join("; ")
        ),
        Err(e) => format!("failed: {e:#}"),
    }
}

/// The adaptive rule's look after `blocks_done` blocks of `store`: its status, and why the
/// run ends now, if it does (`PrecisionStop::now`, the rule's one home). A local run and a
/// fleet's controller (which looks in block order) both look through it.
pub fn precision_look(
    store: &Store,
    target: &PrecisionTarget,
    configs: usize,
    blocks_done: u32,
) -> Result<(PrecisionStatus, Option<PrecisionStop>)> {
    let status = evaluate(
        target,
        configs,
        blocks_done,
        &store.observations(target.metric)?,
    );
    let reason = PrecisionStop::now(target, &status, blocks_done, || {
        store.trials_wall_time().ok()
    });
    Ok((status, reason))
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

/// A note for each profiler that recorded nothing in `result` and is not in `told` yet
/// (which it joins): its reason and the fix, at the first trial it happens to rather than
/// only in the report afterwards.
fn profiler_failures(
    result: &TrialResult,
    told: &mut std::collections::BTreeSet<experiment::Profiler>,
) -> Vec<String> {
    result
        .profiles
        .iter()
        .filter(|r| r.file.is_none())
        .filter_map(|r| {
            let profiler = r.profiler?;
            told.insert(profiler).then(|| {
                format!(
                    "{} recorded nothing in trial {} ({}): {}. Said once per run: the report \
                     and `rubyrace profile` name every trial without a profile",
                    profiler.as_str(),
                    result.trial_id,
                    result.label,
                    r.error.as_deref().unwrap_or("no samples"),
                )
            })
        })
        .collect()
}

/// Every configuration with a failed trial and no valid one, in configuration order, each
/// with the reason of its first failure.
pub fn never_ran_all(trials: &[TrialResult]) -> Vec<(usize, String)> {
    let mut found: Vec<(usize, String)> = Vec::new();
    let mut failed: Vec<&TrialResult> = trials
        .iter()
        .filter(|t| t.status == TrialStatus::Failed)
        .collect();
    failed.sort_by_key(|t| (t.config_id, t.trial_id));
    for f in failed {
        let ran = trials
            .iter()
            .any(|t| t.config_id == f.config_id && t.status == TrialStatus::Valid);
        if !ran && !found.iter().any(|(c, _)| *c == f.config_id) {
            found.push((
                f.config_id,
                f.reason
                    .clone()
                    .unwrap_or_else(|| "its trial failed".into()),
            ));
        }
    }
    found
}

/// What became of one scheduled trial.
enum TrialEnd {
    Stored(Box<TrialResult>),
    Interrupted,
}

impl Run<'_> {
    /// A gate (`rubyrace check`): after every complete block, the gate's rule looks (at its
    /// planned block counts); another block until it decides, then how it ended is stored.
    fn run_until_decided(&mut self, gate: &GateTarget) -> Result<RunEnd> {
        self.run_blocks_until(|run, blocks_done, _| {
            let worse = gate.worse_by_block(&run.store.observations(gate.metric)?);
            let mut decision = gate.rule.decide(&worse);
            if decision.verdict == GateVerdict::Continue && blocks_done >= gate.rule.max_blocks {
                // Invalid trials left fewer pairs than blocks: the budget is blocks run.
                decision.verdict = GateVerdict::Inconclusive;
            }
            if decision.verdict != GateVerdict::Continue {
                let end = GateEnd {
                    decision,
                    max_slowdown: gate.rule.max_slowdown,
                    metric: gate.metric,
                };
                run.progress.note(&format!("gate: {}", end.describe()));
                run.store.record_gate_end(&end)?;
                return Ok(true);
            }
            if gate.rule.looks().contains(&(worse.len() as u32)) {
                run.progress.note(&format!(
                    "gate: not decided after {} blocks ({}); another block",
                    worse.len(),
                    decision
                        .factor
                        .zip(decision.low.zip(decision.high))
                        .map(|(f, (lo, hi))| format!("{f:.4}× [{lo:.4}–{hi:.4}]"))
                        .unwrap_or_else(|| "no interval yet".into())
                ));
            }
            Ok(false)
        })
    }

    /// An adaptive run: after every complete block, evaluate the precision rule; add and
    /// run one more block until it is reached or the budget is spent, then record how it
    /// ended.
    fn run_until_precise(&mut self, target: &PrecisionTarget) -> Result<RunEnd> {
        let configs = self.configs.len();
        self.run_blocks_until(|run, blocks_done, planned_next| {
            let (status, reason) = precision_look(run.store, target, configs, blocks_done)?;
            run.progress
                .precision(&status, target, reason.is_none(), planned_next);
            if let Some(reason) = reason {
                run.store.record_precision_end(&PrecisionEnd::at(
                    reason,
                    blocks_done,
                    target,
                    &status,
                ))?;
                return Ok(true);
            }
            Ok(false)
        })
    }

    /// The loop of every run that decides when to stop (adaptive precision, a gate): after
    /// every complete block, `look(run, blocks done, trials
    /// planned with one more block)` says whether the run has ended (and stores how);
    /// until it has, one more block is added to the schedule and run.
    fn run_blocks_until(
        &mut self,
        mut look: impl FnMut(&mut Self, u32, usize) -> Result<bool>,
    ) -> Result<RunEnd> {
        let configs = self.configs.len();
        loop {
            let schedule = self.store.schedule()?;
            let blocks_done = schedule.iter().map(|t| t.block + 1).max().unwrap_or(0);
            if look(self, blocks_done, schedule.len() + configs)? {
                return Ok(RunEnd::Complete);
            }
            self.store.append_blocks(1)?;
            let schedule = self.store.schedule()?;
            let next: Vec<ScheduledTrial> = schedule
                .iter()
                .filter(|t| t.block == blocks_done)
                .copied()
                .collect();
            self.progress.planned(schedule.len());
            self.progress
                .at_least(self.store.next_look(blocks_done + 1)?);
            let done = self.store.completed()?;
            match self.run_schedule(&next, &done)? {
                RunEnd::Complete => continue,
                other => return Ok(other),
            }
        }
    }

    fn run_schedule(
        &mut self,
        schedule: &[ScheduledTrial],
        done: &std::collections::HashSet<usize>,
    ) -> Result<RunEnd> {
        if self.design.slicing().is_some() {
            return self.run_interleaved(schedule, done);
        }
        let pending: Vec<&ScheduledTrial> = schedule
            .iter()
            .filter(|t| !done.contains(&t.trial_id))
            .collect();
        for (i, trial) in pending.iter().enumerate() {
            if self.interrupt.load(Ordering::SeqCst) {
                return Ok(RunEnd::Interrupted);
            }
            match self.run_one(trial)? {
                TrialEnd::Interrupted => return Ok(RunEnd::Interrupted),
                TrialEnd::Stored(result) => {
                    if self.fail_fast && result.status != TrialStatus::Valid {
                        return Ok(RunEnd::StoppedAfterFailure {
                            trial_id: trial.trial_id,
                        });
                    }
                }
            }
            let block_ends = pending
                .get(i + 1)
                .is_none_or(|next| next.block != trial.block);
            if block_ends {
                if let Some(end) = self.cannot_boot(trial.block)? {
                    return Ok(end);
                }
            }
        }
        Ok(RunEnd::Complete)
    }

    /// After block `block` (from 0) is stored: [`RunEnd::CannotBoot`] when what the run
    /// measures cannot run, so every further block would fail the same way. A gate stops
    /// when its base or head has failed every trial so far (a head that does not boot must
    /// not pass, nor spend the budget failing); any other run when no trial of it has run
    /// at all (a run that has measured something goes on: a passing cause, or one
    /// configuration of many, marks its trials, not the night). A bisection's round is
    /// such a run: its search skips a candidate that does not boot and stops at an end
    /// that does not (`rubyrace bisect`).
    fn cannot_boot(&self, block: u32) -> Result<Option<RunEnd>> {
        let trials = self.store.trial_results()?;
        let nothing_ran =
            !trials.is_empty() && trials.iter().all(|t| t.status == TrialStatus::Failed);
        let failed = if self.store.gate()?.is_some() || nothing_ran {
            never_ran_all(&trials)
        } else {
            Vec::new()
        };
        if failed.is_empty() {
            return Ok(None);
        }
        let label = |id: usize| {
            self.configs
                .iter()
                .find(|c| c.id == id)
                .map(|c| c.label.clone())
                .unwrap_or_else(|| format!("configuration {id}"))
        };
        Ok(Some(RunEnd::CannotBoot {
            block: block + 1,
            failures: failed
                .into_iter()
                .map(|(id, reason)| {
                    let reason = crate::checkouts::in_repository_terms(&reason, self.store.dir());
                    (label(id), reason)
                })
                .collect(),
        }))
    }

    /// The interleaved and co-scheduled designs: the pending trials of each block run
    /// together (crate::interleave) and are stored together; an interrupted block is run
    /// again whole on resume.
    fn run_interleaved(
        &mut self,
        schedule: &[ScheduledTrial],
        done: &std::collections::HashSet<usize>,
    ) -> Result<RunEnd> {
        let mut blocks: std::collections::BTreeMap<u32, Vec<&ScheduledTrial>> =
            std::collections::BTreeMap::new();
        for trial in schedule.iter().filter(|t| !done.contains(&t.trial_id)) {
            blocks.entry(trial.block).or_default().push(trial);
        }
        for (block, trials) in blocks {
            if self.interrupt.load(Ordering::SeqCst) {
                return Ok(RunEnd::Interrupted);
            }
            let quiet = match self.conditions.quiet.clone() {
                Some(rule) => match self.wait_for_quiet(&rule) {
                    None if self.interrupt.load(Ordering::SeqCst) => {
                        return Ok(RunEnd::Interrupted)
                    }
                    wait => wait,
                },
                None => None,
            };
            let specs = trials
                .iter()
                .map(|t| {
                    trial_spec(
                        self.store.dir(),
                        &self.configs,
                        t,
                        &self.record_env,
                        &self.conditions,
                    )
                })
                .collect::<Result<Vec<_>>>()?;
            let progress = &mut *self.progress;
            let mut events = |e: BlockEvent| progress.block_event(block, &e);
            let mut results =
                match run_interleaved_block(&specs, &self.design, self.seed, self.interrupt, &mut events) {
                    BlockOutcome::Interrupted => return Ok(RunEnd::Interrupted),
                    BlockOutcome::WriteFailed(what) => anyhow::bail!(
                        "{what} (block {} is not stored; every block before it is: free space or fix the problem, then resume)",
                        block + 1
                    ),
                    BlockOutcome::Done(results) => results,
                };
            for r in &mut results {
                r.quiet = quiet.clone();
            }
            self.store
                .insert_trials(self.session, &results)
                .with_context(|| {
                    format!(
                        "cannot store block {} in {} (every block before it is stored; free space or fix the problem, then resume)",
                        block + 1,
                        self.store.db_path().display()
                    )
                })?;
            for r in &results {
                self.progress.trial_finished(r);
            }
            if let Some(bad) = results
                .iter()
                .find(|r| self.fail_fast && r.status != TrialStatus::Valid)
            {
                return Ok(RunEnd::StoppedAfterFailure {
                    trial_id: bad.trial_id,
                });
            }
            if let Some(end) = self.cannot_boot(block)? {
                return Ok(end);
            }
        }
        Ok(RunEnd::Complete)
    }

    /// Runs one scheduled trial in the run's conditions: waits for a quiet machine, runs
    /// it, runs it again while it was measured in noise (`repeat_noisy`), and stores it.
    fn run_one(&mut self, trial: &ScheduledTrial) -> Result<TrialEnd> {
        let spec = trial_spec(
            self.store.dir(),
            &self.configs,
            trial,
            &self.record_env,
            &self.conditions,
        )?;
        // A resumed trial goes on counting the attempts stored before the interruption.
        let mut attempts = self
            .store
            .noisy_attempts()?
            .iter()
            .filter(|a| a.trial_id == trial.trial_id)
            .count() as u32;
        loop {
            let quiet = match self.conditions.quiet.clone() {
                Some(rule) => match self.wait_for_quiet(&rule) {
                    Some(wait) => Some(wait),
                    None if self.interrupt.load(Ordering::SeqCst) => {
                        return Ok(TrialEnd::Interrupted)
                    }
                    None => None,
                },
                None => None,
            };
            self.progress.trial_started(trial, &spec.label);
            let mut spec = spec.clone();
            let prepared = match &mut self.services {
                Some(services) => {
                    match services.before_trial(&spec.settings, trial.trial_id, self.interrupt) {
                        Ok(p) => Some(p),
                        Err(_) if self.interrupt.load(Ordering::SeqCst) => {
                            return Ok(TrialEnd::Interrupted)
                        }
                        Err(e) => {
                            return Err(e.context(format!(
                                "the services of trial {} (every trial before it is stored; fix the problem, then resume)",
                                trial.trial_id
                            )))
                        }
                    }
                }
                None => None,
            };
            if let Some(p) = &prepared {
                for ran in &p.setup_ran {
                    self.progress.note(&ran.summary());
                }
                spec.service_env = p.env.clone();
            }
            let outcome = run_trial(&spec, self.interrupt);
            let services_record = match (&mut self.services, prepared) {
                (Some(services), Some(p)) => Some(services.after_trial(p)),
                _ => None,
            };
            let mut result = match outcome {
                TrialOutcome::Interrupted => return Ok(TrialEnd::Interrupted),
                TrialOutcome::WriteFailed(what) => anyhow::bail!(
                    "{what} (trial {} is not stored; every trial before it is: free space or fix the problem, then resume)",
                    trial.trial_id
                ),
                TrialOutcome::Done(result) => result,
            };
            result.quiet = quiet;
            result.noisy_attempts = attempts;
            result.services = services_record;
            let noise = result.noise.as_ref().filter(|n| n.is_noisy());
            if let (TrialStatus::Valid, Some(n)) = (result.status, noise) {
                if attempts < self.conditions.repeat_noisy {
                    attempts += 1;
                    self.progress.note(&format!(
                        "trial {} was measured in noise (other processes {:.0}% of a CPU, steal {:.1}%): stored apart as attempt {attempts}, and run again (repeat_noisy = {})",
                        trial.trial_id, n.other_percent, n.steal_percent, self.conditions.repeat_noisy
                    ));
                    self.set_aside(&mut result, attempts)?;
                    continue;
                }
            }
            self.store.insert_trial(self.session, &result).with_context(|| {
                format!(
                    "cannot store trial {} in {} (every trial before it is stored; free space or fix the problem, then resume)",
                    trial.trial_id,
                    self.store.db_path().display()
                )
            })?;
            self.progress.trial_finished(&result);
            for note in profiler_failures(&result, &mut self.profilers_told) {
                self.progress.note(&note);
            }
            return Ok(TrialEnd::Stored(result));
        }
    }

    /// Stores a noisy attempt apart: its files move to `noisy-N/` in the trial's directory
    /// (where the next attempt does not replace them), its result to `noisy_attempts`.
    fn set_aside(&mut self, result: &mut TrialResult, attempt: u32) -> Result<()> {
        let dir = self.store.trial_dir(result.trial_id);
        let aside = format!("noisy-{attempt}");
        std::fs::create_dir_all(dir.join(&aside))
            .with_context(|| format!("cannot create {}", dir.join(&aside).display()))?;
        for name in &mut result.files {
            let to = format!("{aside}/{name}");
            std::fs::rename(dir.join(&*name), dir.join(&to))
                .with_context(|| format!("cannot move {} to {to}", dir.join(&*name).display()))?;
            *name = to;
        }
        self.store
            .insert_noisy_attempt(self.session, attempt, result)
            .with_context(|| format!("cannot store a noisy attempt of trial {}", result.trial_id))
    }

    /// Waits for a quiet machine, telling the progress what keeps it busy (at the first
    /// busy window, then every 10 s). None on Ctrl-C, or when /proc/stat cannot be read.
    fn wait_for_quiet(&mut self, rule: &QuietRule) -> Option<QuietWait> {
        let progress = &mut *self.progress;
        let mut told: Option<std::time::Duration> = None;
        let wait = wait_for_quiet(rule, self.interrupt, &mut |other, steal, waited| {
            if told.is_none_or(|t| waited >= t + std::time::Duration::from_secs(10)) {
                told = Some(waited);
                progress.note(&format!(
                    "waiting for a quiet machine: other processes use {other:.0}% of a CPU (quiet below {:.0}%), steal {steal:.1}% (below {:.1}%); waited {} of at most {}",
                    rule.other_percent,
                    rule.steal_percent,
                    units::span(waited),
                    units::span(rule.max_wait)
                ));
            }
        })?;
        if !wait.quiet {
            progress.note(&format!(
                "the machine stayed busy for {} (other processes {:.0}% of a CPU, steal {:.1}%): the trial starts anyway, and its record says so",
                humantime::format_duration(rule.max_wait),
                wait.other_percent,
                wait.steal_percent
            ));
        }
        Some(wait)
    }
}
