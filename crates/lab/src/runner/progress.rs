//! What a run reports while it works: the [`Progress`] it tells every event (a trial
//! started or stored, a block's progress, a note, an adaptive run's look), and [`Both`],
//! which tells two of them.

use experiment::precision::{PrecisionStatus, PrecisionTarget};
use experiment::schedule::ScheduledTrial;
use results::TrialResult;

use crate::interleave::BlockEvent;

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
    /// A run that decides when to stop added a block: the schedule is `total` trials long.
    fn planned(&mut self, _total: usize) {}
    /// A run that decides when to stop and has not yet (`Store::next_look`): it will have
    /// at least `blocks` blocks (its rule's next look), so a count of blocks or trials
    /// planned, and the time left, are minimums. None: the plan is what will run.
    fn at_least(&mut self, _blocks: Option<u32>) {}
    /// An adaptive run looked at its precision after a block (`added` is true when it adds
    /// another block, whose trials make the schedule `total` long).
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
