//! The runs that decide when to stop: after every complete block, the adaptive precision
//! rule or a gate's rule looks ([`precision_look`], also the fleet's controller's); one more
//! block is added and run until it has decided, and how the run ended is stored.

use anyhow::Result;

use experiment::gate::{GateEnd, GateTarget, GateVerdict};
use experiment::precision::{
    evaluate, PrecisionEnd, PrecisionStatus, PrecisionStop, PrecisionTarget,
};
use experiment::schedule::ScheduledTrial;
use results::store::Store;

use super::{Run, RunEnd};

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

impl Run<'_> {
    /// A gate (`rubyrace check`): after every complete block, the gate's rule looks (at its
    /// planned block counts); another block until it decides, then how it ended is stored.
    pub(super) fn run_until_decided(&mut self, gate: &GateTarget) -> Result<RunEnd> {
        self.run_blocks_until(|run, blocks_done, _| {
            let worse = gate.worse_by_block(&run.store.observations(gate.metric)?);
            let decision = gate.rule.decide_after(&worse, blocks_done);
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
    pub(super) fn run_until_precise(&mut self, target: &PrecisionTarget) -> Result<RunEnd> {
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
}
