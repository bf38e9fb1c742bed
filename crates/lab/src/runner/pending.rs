//! The loops that run a session's pending trials: one at a time (waiting for a quiet
//! machine, repeating a trial measured in noise, storing each), or a block at a time in the
//! interleaved and co-scheduled designs; after each block, whether what the run measures
//! cannot boot.

use std::sync::atomic::Ordering;

use anyhow::{Context, Result};

use experiment::conditions::QuietRule;
use experiment::schedule::ScheduledTrial;
use results::conditions::QuietWait;
use results::{TrialResult, TrialStatus};

use super::plan::trial_spec;
use super::{Run, RunEnd};
use crate::conditions::wait_for_quiet;
use crate::interleave::{run_interleaved_block, BlockEvent, BlockOutcome};
use crate::trial::{run_trial, TrialOutcome};

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
                    result.id.trial_id,
                    result.id.label,
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
    failed.sort_by_key(|t| (t.id.config_id, t.id.trial_id));
    for f in failed {
        let ran = trials
            .iter()
            .any(|t| t.id.config_id == f.id.config_id && t.status == TrialStatus::Valid);
        if !ran && !found.iter().any(|(c, _)| *c == f.id.config_id) {
            found.push((
                f.id.config_id,
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
    /// Runs the trials of `schedule` not in `done`, in schedule order: one at a time, or a
    /// block at a time in the interleaved and co-scheduled designs.
    pub(super) fn run_schedule(
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
                    trial_id: bad.id.trial_id,
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
            .filter(|a| a.id.trial_id == trial.trial_id)
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
            self.progress.trial_started(trial, &spec.id.label);
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
        let dir = self.store.trial_dir(result.id.trial_id);
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
            .with_context(|| {
                format!(
                    "cannot store a noisy attempt of trial {}",
                    result.id.trial_id
                )
            })
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
