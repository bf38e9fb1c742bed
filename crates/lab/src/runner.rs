//! The local runner: takes the stored schedule of a results directory and runs every trial
//! that is not stored yet, in schedule order, one at a time, storing each as it ends. The
//! same function starts a run and resumes one, so a resume is exactly "run what is left".

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};

use crate::experiment::Config;
use crate::process::{become_subreaper, kill_registered_leftovers};
use crate::precision::{evaluate, PrecisionEnd, PrecisionStatus, PrecisionTarget};
use crate::schedule::{one_block, ScheduledTrial};
use crate::store::Store;
use crate::trial::{
    run_trial, TrialOutcome, TrialResult, TrialSpec, TrialStatus, TRIAL_SPEC_SCHEMA,
};

/// What the runner reports while it works (a progress bar, a log, a test).
pub trait Progress {
    /// `total` trials in the schedule, `done` of them already stored.
    fn begin(&mut self, total: usize, done: usize, blocks: u32);
    fn trial_started(&mut self, trial: &ScheduledTrial, label: &str);
    fn trial_finished(&mut self, result: &TrialResult);
    fn note(&mut self, message: &str);
    /// An adaptive run looked at its precision after a block (`added` is true when it adds
    /// another block, whose trials make the schedule `total` long).
    fn precision(&mut self, _status: &PrecisionStatus, _target: &PrecisionTarget, _added: bool, _total: usize) {}
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
}

/// The spec of one scheduled trial of the results directory `results_dir`.
pub fn trial_spec(
    results_dir: &Path,
    configs: &[Config],
    trial: &ScheduledTrial,
    record_env: &[String],
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
        settings: config.settings.clone(),
        record_env: record_env.to_vec(),
        out_dir: crate::store::trial_dir(results_dir, trial.trial_id),
        registry: crate::store::registry(results_dir),
    })
}

/// Runs every scheduled trial not stored yet. `kind` is "start" or "resume"; `command`
/// is recorded as the session's command line.
pub fn run_pending(
    store: &mut Store,
    kind: &str,
    command: &str,
    fail_fast: bool,
    interrupt: &Arc<AtomicBool>,
    progress: &mut dyn Progress,
) -> Result<RunEnd> {
    // Orphaned descendants (a server that daemonized) come back to rubyrace, which kills
    // them at the end of their trial.
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
    let configs = store.configs()?;
    let schedule = store.schedule()?;
    let record_env: Vec<String> = store
        .meta("record_env")?
        .map(|v| serde_json::from_str(&v))
        .transpose()
        .context("stored record_env")?
        .unwrap_or_default();
    let blocks = schedule.iter().map(|t| t.block + 1).max().unwrap_or(0);
    let done = store.completed()?;
    progress.begin(schedule.len(), done.len(), blocks);
    let session = store.begin_session(kind, command)?;
    // What makes this machine noisy right now, recorded with the session (quick: no CPU
    // sampling, no Ruby queries; about 50 ms).
    let doctor = crate::doctor::examine_with(&crate::doctor::Options {
        quick: true,
        ..crate::doctor::Options::default()
    });
    store.record_doctor(session, &doctor)?;
    let mut end = run_schedule(
        store,
        session,
        &configs,
        &schedule,
        &done,
        &record_env,
        fail_fast,
        interrupt,
        progress,
    );
    if let (Ok(RunEnd::Complete), Some(target)) = (&end, store.precision_target()?) {
        if store.precision_end()?.is_none() {
            end = run_until_precise(
                store,
                session,
                &configs,
                &record_env,
                &target,
                fail_fast,
                interrupt,
                progress,
            );
        }
    }
    let outcome = match &end {
        Ok(RunEnd::Complete) => "complete".to_string(),
        Ok(RunEnd::Interrupted) => "interrupted".to_string(),
        Ok(RunEnd::StoppedAfterFailure { trial_id }) => {
            format!("stopped after trial {trial_id} (--fail-fast)")
        }
        Err(e) => format!("failed: {e:#}"),
    };
    // Best effort: with a full disk even this may fail, and the error above matters more.
    let _ = store.end_session(session, &outcome);
    end
}

/// An adaptive run: after every complete block, evaluate the precision rule; add and run
/// one more block until it is reached or the budget is spent, then record how it ended.
#[allow(clippy::too_many_arguments)]
fn run_until_precise(
    store: &mut Store,
    session: i64,
    configs: &[Config],
    record_env: &[String],
    target: &PrecisionTarget,
    fail_fast: bool,
    interrupt: &Arc<AtomicBool>,
    progress: &mut dyn Progress,
) -> Result<RunEnd> {
    let order: crate::experiment::Order = match store.meta("order")?.as_deref() {
        Some("sequential") => crate::experiment::Order::Sequential,
        _ => crate::experiment::Order::Random,
    };
    let seed: u64 = store
        .meta("seed")?
        .and_then(|s| s.parse().ok())
        .context("the stored seed")?;
    loop {
        let schedule = store.schedule()?;
        let blocks_done = schedule.iter().map(|t| t.block + 1).max().unwrap_or(0);
        let status = evaluate(target, configs.len(), blocks_done, &store.observations(target.metric)?);
        let reason = if status.reached {
            Some("target-reached")
        } else if blocks_done >= target.max_batches {
            Some("max-batches")
        } else if target
            .max_duration
            .is_some_and(|budget| store.trials_wall_time().is_ok_and(|spent| spent >= budget))
        {
            Some("max-duration")
        } else {
            None
        };
        let next = one_block(configs.len(), blocks_done, order, seed, schedule.len());
        progress.precision(&status, target, reason.is_none(), schedule.len() + next.len());
        if let Some(reason) = reason {
            store.record_precision_end(&PrecisionEnd {
                reason: reason.into(),
                blocks: blocks_done,
                target: target.target,
                metric: target.metric,
                widest_half_width: status.widest.and_then(|w| w.half_width),
            })?;
            return Ok(RunEnd::Complete);
        }
        store.append_block(&next)?;
        let done = store.completed()?;
        match run_schedule(
            store, session, configs, &next, &done, record_env, fail_fast, interrupt, progress,
        )? {
            RunEnd::Complete => continue,
            other => return Ok(other),
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn run_schedule(
    store: &mut Store,
    session: i64,
    configs: &[Config],
    schedule: &[ScheduledTrial],
    done: &std::collections::HashSet<usize>,
    record_env: &[String],
    fail_fast: bool,
    interrupt: &Arc<AtomicBool>,
    progress: &mut dyn Progress,
) -> Result<RunEnd> {
    let mut end = RunEnd::Complete;
    for trial in schedule.iter().filter(|t| !done.contains(&t.trial_id)) {
        if interrupt.load(Ordering::SeqCst) {
            end = RunEnd::Interrupted;
            break;
        }
        let spec = trial_spec(store.dir(), configs, trial, record_env)?;
        progress.trial_started(trial, &spec.label);
        match run_trial(&spec, interrupt) {
            TrialOutcome::Interrupted => {
                end = RunEnd::Interrupted;
                break;
            }
            TrialOutcome::WriteFailed(what) => {
                anyhow::bail!(
                    "{what} (trial {} is not stored; every trial before it is: free space or fix the problem, then resume)",
                    trial.trial_id
                );
            }
            TrialOutcome::Done(result) => {
                store.insert_trial(session, &result).with_context(|| {
                    format!(
                        "cannot store trial {} in {} (every trial before it is stored; free space or fix the problem, then resume)",
                        trial.trial_id,
                        store.db_path().display()
                    )
                })?;
                progress.trial_finished(&result);
                if fail_fast && result.status != TrialStatus::Valid {
                    end = RunEnd::StoppedAfterFailure {
                        trial_id: trial.trial_id,
                    };
                    break;
                }
            }
        }
    }
    Ok(end)
}
