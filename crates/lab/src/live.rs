//! The live progress file of a run (`DIR/progress.json`, `results::progress`), kept by the
//! process running it for `rubyrace watch`: a `Progress` that records every event of the
//! runner, and a thread that adds the current trial's phase (`crate::phase`) and rewrites
//! the file every second. Writing it never stops a run: a failed write (a full disk) is
//! tried again at the next second, and the run's own writes say what is wrong.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use experiment::precision::{PrecisionStatus, PrecisionTarget};
use experiment::schedule::ScheduledTrial;
use results::progress::{now_unix, Current, Phase, PrecisionLook, Progress as Live, RunState};
use results::TrialResult;

use crate::interleave::BlockEvent;
use crate::runner::{Progress, RunEnd};

const EVERY: Duration = Duration::from_secs(1);

pub struct LiveFile {
    dir: PathBuf,
    /// Configurations per block: a schedule's length in blocks.
    configs: usize,
    state: Arc<Mutex<Live>>,
    stop: Arc<AtomicBool>,
    writer: Option<JoinHandle<()>>,
}

fn lock(state: &Mutex<Live>) -> std::sync::MutexGuard<'_, Live> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

/// Writes the state, with the trial's phase as it is now.
fn write(dir: &Path, state: &Mutex<Live>) {
    let mut live = lock(state);
    if let Some(current) = live.current.as_mut() {
        if current.trial_id.is_some() {
            current.phase = crate::phase::current();
        }
    }
    let _ = live.write(dir);
}

impl LiveFile {
    /// Starts the file of the results directory `dir` for the run `command` of `configs`
    /// configurations.
    pub fn start(dir: &Path, command: &str, configs: usize) -> LiveFile {
        let state = Arc::new(Mutex::new(Live::new(command)));
        write(dir, &state);
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (dir, state, stop) = (dir.to_path_buf(), state.clone(), stop.clone());
            std::thread::Builder::new()
                .name("progress.json".into())
                .spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        std::thread::park_timeout(EVERY);
                        if !stop.load(Ordering::SeqCst) {
                            write(&dir, &state);
                        }
                    }
                })
                .ok()
        };
        LiveFile {
            dir: dir.to_path_buf(),
            configs: configs.max(1),
            state,
            stop,
            writer,
        }
    }

    fn update(&mut self, change: impl FnOnce(&mut Live)) {
        change(&mut lock(&self.state));
        write(&self.dir, &self.state);
    }

    /// Changes the state without writing it: the writer thread writes it within a second.
    /// For the events at slice edges, where a write would delay the next slice.
    fn change(&mut self, change: impl FnOnce(&mut Live)) {
        change(&mut lock(&self.state));
    }

    /// The run ended as `end` says (or by the error `error`): the last write.
    pub fn end(self, end: Result<&RunEnd, String>) {
        let (state, reason) = match end {
            Ok(RunEnd::Complete) => (RunState::Complete, None),
            Ok(RunEnd::Interrupted) => (RunState::Interrupted, None),
            Ok(RunEnd::StoppedAfterFailure { trial_id }) => (
                RunState::StoppedAfterFailure,
                Some(format!("trial {trial_id} was not valid")),
            ),
            Ok(end @ RunEnd::CannotBoot { block, .. }) => (
                RunState::Stopped,
                Some(format!(
                    "nothing could run in block {block}: {}",
                    end.cannot_boot_lines().join("; ")
                )),
            ),
            Err(e) => (RunState::Stopped, Some(e)),
        };
        self.end_with(state, reason);
    }

    /// The run ended in `state`, for `reason`: the last write.
    pub fn end_with(mut self, state: RunState, reason: Option<String>) {
        self.halt();
        self.update(|l| {
            l.state = state;
            l.ended_reason = reason;
            l.current = None;
        });
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(writer) = self.writer.take() {
            writer.thread().unpark();
            let _ = writer.join();
        }
    }
}

impl Drop for LiveFile {
    /// Dropped without `end` (a panic): the writing stops and the file stays `running`
    /// with a pid that will be gone, which a reader checks.
    fn drop(&mut self) {
        self.halt();
    }
}

impl Progress for LiveFile {
    fn begin(&mut self, total: usize, done: usize, blocks: u32) {
        self.update(|l| {
            l.total = total;
            l.done = done;
            l.done_before = done;
            l.blocks = blocks;
        });
    }

    fn trial_started(&mut self, trial: &ScheduledTrial, label: &str) {
        crate::phase::clear();
        self.update(|l| {
            l.current = Some(Current {
                block: trial.block,
                trial_id: Some(trial.trial_id),
                labels: vec![label.to_string()],
                since_unix: now_unix(),
                phase: None,
            });
        });
    }

    fn trial_finished(&mut self, _result: &TrialResult) {
        crate::phase::clear();
        self.update(|l| {
            l.done += 1;
            if l.current.as_ref().is_some_and(|c| c.trial_id.is_some()) {
                l.current = None;
            }
        });
    }

    fn note(&mut self, message: &str) {
        self.update(|l| l.note(message));
    }

    fn block_event(&mut self, block: u32, event: &BlockEvent) {
        let phase = match event {
            BlockEvent::Starting { label } => format!("starting {label}"),
            BlockEvent::WarmingUp { label } => format!("warming up {label}"),
            BlockEvent::Slice {
                done, total, on, ..
            } => {
                if on.len() > 1 {
                    format!("window {}/{total}, all loaded", done + 1)
                } else {
                    format!("slice {}/{total} on {}", done + 1, on.join(""))
                }
            }
        };
        let label = match event {
            BlockEvent::Starting { label } | BlockEvent::WarmingUp { label } => Some(label),
            BlockEvent::Slice { .. } => None,
        };
        self.change(|l| {
            let current = l.current.get_or_insert_with(|| Current {
                block,
                trial_id: None,
                labels: Vec::new(),
                since_unix: now_unix(),
                phase: None,
            });
            if current.block != block || current.trial_id.is_some() {
                *current = Current {
                    block,
                    since_unix: now_unix(),
                    ..Current::default()
                };
            }
            if let Some(label) = label {
                if !current.labels.contains(label) {
                    current.labels.push(label.clone());
                }
            }
            current.phase = Some(Phase {
                name: phase,
                since_unix: now_unix(),
                ..Phase::default()
            });
        });
    }

    fn planned(&mut self, total: usize) {
        let blocks = total.div_ceil(self.configs) as u32;
        self.update(|l| {
            l.total = l.total.max(total);
            l.blocks = l.blocks.max(blocks);
        });
    }

    fn precision(
        &mut self,
        status: &PrecisionStatus,
        target: &PrecisionTarget,
        added: bool,
        total: usize,
    ) {
        self.update(|l| {
            l.precision = Some(PrecisionLook {
                at_unix: now_unix(),
                status: status.clone(),
                target: target.clone(),
                added,
            });
            l.blocks = l.blocks.max(status.blocks_done + u32::from(added));
        });
        self.planned(total);
    }
}
