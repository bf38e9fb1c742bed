//! What `rubyrace run` shows while it runs: a line per trial, the precision after each
//! block of an adaptive run, and a progress bar with an estimate of the time left.

use std::io::{self, IsTerminal};
use std::time::{Duration, Instant};

use anyhow::Result;
use experiment::schedule::ScheduledTrial;
use indicatif::{ProgressBar, ProgressStyle};
use lab::interleave::BlockEvent;
use lab::live::LiveFile;
use lab::runner::{run_pending, Both, Progress, RunEnd};
use results::store::Store;
use results::{TrialResult, TrialStatus};
use units::{bytes, micros};

/// Runs the trials `store` has pending (`lab::runner::run_pending`, a run's `kind` being
/// a session kind) with the progress on the terminal, the live file `rubyrace watch`
/// reads (`progress.json`), and with `live_report` the HTML report rewritten after every
/// block.
pub fn run_pending_shown(
    store: &mut Store,
    kind: results::store::SessionKind,
    fail_fast: bool,
    interrupt: &std::sync::Arc<std::sync::atomic::AtomicBool>,
    live_report: bool,
) -> Result<RunEnd> {
    let mut console = ConsoleProgress::new(store)?;
    let command = crate::invocation::command_line();
    let mut live = LiveFile::start(store.dir(), &command, store.configs()?.len());
    let mut report = crate::live_report::LiveReport::new(store.dir(), live_report);
    let end = run_pending(
        store,
        kind,
        &command,
        fail_fast,
        interrupt,
        &mut Both(&mut console, &mut Both(&mut live, &mut report)),
    );
    console.finish();
    report.finish();
    live.end(end.as_ref().map_err(|e| format!("{e:#}")));
    end
}

/// Progress on the terminal: a bar with the block, trial count, ETA, current label and
/// the last trial's throughput; one line per finished trial (also when not a terminal, so
/// an overnight log has them).
pub struct ConsoleProgress {
    bar: Option<ProgressBar>,
    total: usize,
    done: usize,
    blocks: u32,
    started: Instant,
    run_this_session: usize,
    estimate_per_trial: Duration,
    last: String,
    /// Configuration labels by id (the precision line names the comparisons).
    labels: std::collections::BTreeMap<usize, String>,
    /// The results directory (a failed trial's log is named by its path).
    dir: std::path::PathBuf,
    /// Time spent on the trials finished this session (the ETA's pace).
    finished_elapsed: Duration,
    /// A block of servers up together: how many trials it holds and the share of its
    /// slices done (0 to 1), so the ETA moves within it.
    block_trials: usize,
    block_fraction: f64,
    /// A run that decides when to stop (adaptive, a gate, a bisection's step): the blocks
    /// at its rule's next look, so the counts shown are minimums ("≥") and the time left
    /// is "at least" (the time to that look).
    at_least: Option<u32>,
}

impl ConsoleProgress {
    pub fn new(store: &Store) -> Result<ConsoleProgress> {
        // Before any trial ends, estimate from the settings.
        let configs = store.configs()?;
        let design = store.design()?;
        let estimate =
            experiment::estimated_block_time(&configs, &design) / configs.len().max(1) as u32;
        Ok(ConsoleProgress {
            bar: None,
            total: 0,
            done: 0,
            blocks: 0,
            started: Instant::now(),
            run_this_session: 0,
            estimate_per_trial: estimate,
            last: String::new(),
            block_trials: configs.len(),
            labels: configs.iter().map(|c| (c.id, c.label.clone())).collect(),
            dir: store.dir().to_path_buf(),
            finished_elapsed: Duration::ZERO,
            block_fraction: 0.0,
            at_least: None,
        })
    }

    fn line(&self, text: String) {
        match &self.bar {
            Some(bar) => bar.println(text),
            None => eprintln!("{text}"),
        }
    }

    /// Trials planned: the schedule's, or at least those to the rule's next look.
    fn planned_trials(&self) -> usize {
        match self.at_least {
            Some(blocks) => self.total.max(blocks as usize * self.block_trials.max(1)),
            None => self.total,
        }
    }

    /// "12", or "≥12" for a run whose rule decides when it stops.
    fn at_least_mark(&self) -> &'static str {
        if self.at_least.is_some() {
            "≥"
        } else {
            ""
        }
    }

    /// Blocks planned, as shown: "7", or "≥7".
    fn blocks_shown(&self) -> String {
        let blocks = self.blocks.max(self.at_least.unwrap_or(0));
        format!("{}{blocks}", self.at_least_mark())
    }

    /// The time left as shown: "ETA 40s", or "ETA ≥ 40s" (to the rule's next look) for a
    /// run that decides when to stop.
    fn eta_shown(&self) -> String {
        let eta = units::span(self.eta());
        if self.at_least.is_some() {
            format!("ETA ≥ {eta}")
        } else {
            format!("ETA {eta}")
        }
    }

    /// The time left: the trials still to run at the pace of those finished this session
    /// (or the settings' estimate before the first), less the part of a block of servers
    /// up together already done.
    fn eta(&self) -> Duration {
        let per = if self.run_this_session > 0 {
            self.finished_elapsed / self.run_this_session as u32
        } else {
            self.estimate_per_trial
        };
        let left = self.planned_trials().saturating_sub(self.done) as f64
            - self.block_fraction * self.block_trials as f64;
        per.mul_f64(left.max(0.0))
    }

    /// The bar's counts: "3/12", or "3/≥12".
    fn show_counts(&self) {
        if let Some(bar) = &self.bar {
            bar.set_prefix(format!(
                "{}/{}{}",
                self.done,
                self.at_least_mark(),
                self.planned_trials()
            ));
        }
    }

    fn show(&self, msg: String) {
        if let Some(bar) = &self.bar {
            bar.set_message(msg);
        }
    }

    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

fn describe_result(r: &TrialResult) -> String {
    let mut parts = Vec::new();
    if let Some(rps) = r.derived.requests_per_s {
        parts.push(format!("{rps:.1} req/s"));
    }
    if let Some(load) = &r.load {
        parts.push(format!("p99 {}", micros(load.latency_us.p99)));
    }
    if let Some(res) = &r.resources {
        parts.push(format!("PSS {}", bytes(res.end.pss_bytes)));
    }
    if let Some(cpu) = r.derived.cpu_us_per_request {
        parts.push(format!("{cpu:.0} µs CPU/req"));
    }
    if let Some(s) = &r.script {
        if let Some(w) = s.median_wall_s {
            parts.push(format!("{w:.3} s wall (median of {})", s.runs.len()));
        }
    }
    parts.join(" · ")
}

impl Progress for ConsoleProgress {
    fn begin(&mut self, total: usize, done: usize, blocks: u32) {
        self.total = total;
        self.done = done;
        self.blocks = blocks;
        if done > 0 {
            eprintln!(
                "rubyrace: {done} of {total} trials already stored; running the remaining {}",
                total - done
            );
        }
        if io::stderr().is_terminal() {
            let bar = ProgressBar::new(total as u64);
            bar.set_style(
                ProgressStyle::with_template("{bar:24.cyan/blue} {prefix} trials · {msg}")
                    .expect("a valid progress template"),
            );
            bar.set_position(done as u64);
            bar.enable_steady_tick(Duration::from_millis(500));
            self.bar = Some(bar);
            self.show_counts();
        }
    }

    fn trial_started(&mut self, trial: &ScheduledTrial, label: &str) {
        let eta = self.eta_shown();
        let last = if self.last.is_empty() {
            String::new()
        } else {
            format!(" · last: {}", self.last)
        };
        self.show(format!(
            "block {}/{} · {eta} · {label}{last}",
            trial.block + 1,
            self.blocks_shown()
        ));
    }

    fn trial_finished(&mut self, r: &TrialResult) {
        self.done += 1;
        self.run_this_session += 1;
        self.finished_elapsed = self.started.elapsed();
        self.block_fraction = 0.0;
        let what = match r.status {
            TrialStatus::Valid => describe_result(r),
            TrialStatus::Invalid => format!(
                "INVALID: {} · {}",
                r.reason.as_deref().unwrap_or(""),
                describe_result(r)
            ),
            TrialStatus::Failed => format!("FAILED: {}", r.reason.as_deref().unwrap_or("")),
        };
        self.last = r
            .derived
            .requests_per_s
            .map(|v| format!("{v:.0} req/s"))
            .or_else(|| {
                r.script
                    .as_ref()
                    .and_then(|s| s.median_wall_s)
                    .map(|w| format!("{w:.3}s"))
            })
            .unwrap_or_default();
        self.line(format!(
            "[{}/{}{}] block {} · {} · {what}",
            self.done,
            self.at_least_mark(),
            self.planned_trials(),
            r.id.block + 1,
            r.id.label
        ));
        if r.status == TrialStatus::Failed {
            if let Some(server) = &r.server {
                // The reason, on the line above, holds the app's error line when there is one
                // (it comes first in the log, before the backtrace); then the end of the log,
                // and its path.
                let tail: Vec<&str> = server.stderr_tail.lines().rev().take(5).collect();
                for l in tail.into_iter().rev() {
                    self.line(format!("      | {l}"));
                }
                let log = results::store::trial_dir(&self.dir, r.id.trial_id)
                    .join(results::store::trial_files::SERVER_STDERR);
                self.line(format!("      the whole log: {}", log.display()));
            }
        }
        if let Some(bar) = &self.bar {
            bar.set_position(self.done as u64);
        }
        self.show_counts();
    }

    fn note(&mut self, message: &str) {
        self.line(format!("rubyrace: {message}"));
    }

    fn block_event(&mut self, block: u32, event: &BlockEvent) {
        let head = format!("block {}/{}", block + 1, self.blocks_shown());
        let msg = match event {
            BlockEvent::Starting { label } => {
                format!("{head} · {} · starting {label}", self.eta_shown())
            }
            BlockEvent::WarmingUp { label } => {
                format!("{head} · {} · warming up {label}", self.eta_shown())
            }
            BlockEvent::Slice {
                done,
                total,
                on,
                last,
                ..
            } => {
                self.block_fraction = *done as f64 / (*total).max(1) as f64;
                let (unit, on) = if on.len() > 1 {
                    ("window", format!("all {} loaded", on.len()))
                } else {
                    ("slice", format!("on: {}", on.join("")))
                };
                let last = last
                    .as_ref()
                    .map(|(label, rate)| format!(" · last slice: {label} {rate:.0} req/s"))
                    .unwrap_or_default();
                format!(
                    "{head} · {unit} {}/{total} · {} · {on}{last}",
                    done + 1,
                    self.eta_shown()
                )
            }
        };
        self.show(msg);
    }

    fn precision(
        &mut self,
        status: &experiment::precision::PrecisionStatus,
        target: &experiment::precision::PrecisionTarget,
        added: bool,
        total: usize,
    ) {
        let labels: std::collections::BTreeMap<usize, String> = self.labels.clone();
        let widths: Vec<String> = status
            .comparisons
            .iter()
            .map(|c| {
                let w = c
                    .half_width
                    .map(|h| format!("±{:.2}%", 100.0 * h))
                    .unwrap_or_else(|| "±?".into());
                format!(
                    "{} {w}",
                    labels.get(&c.config_id).map_or("?", String::as_str)
                )
            })
            .collect();
        let per_block = if self.run_this_session > 0 {
            self.started.elapsed() / self.run_this_session as u32 * labels.len().max(1) as u32
        } else {
            self.estimate_per_trial * labels.len().max(1) as u32
        };
        let left = match (added, status.blocks_left) {
            (false, _) => "stopping".to_string(),
            (true, Some(needed)) => {
                let budget = target.max_batches.saturating_sub(status.blocks_done) as usize;
                let n = needed.min(budget);
                let capped = if needed > budget {
                    format!(
                        ": the budget (max_blocks = {}) ends the run before the target, which needs about {needed} more",
                        target.max_batches
                    )
                } else {
                    String::new()
                };
                format!(
                    "about {n} more block{} (~{}){capped}",
                    if n == 1 { "" } else { "s" },
                    units::span(per_block * n as u32)
                )
            }
            // Measured, but no number of blocks reaches the target at this spread.
            (true, None)
                if status
                    .widest
                    .as_ref()
                    .is_some_and(|w| w.half_width.is_some()) =>
            {
                format!(
                    "adding a block: the budget (max_blocks = {}) ends the run before the target, which is out of reach at this spread",
                    target.max_batches
                )
            }
            (true, None) => "adding a block".to_string(),
        };
        self.line(format!(
            "precision after {} block{} ({}, {} intervals, target ±{}%): {} · {left}",
            status.blocks_done,
            if status.blocks_done == 1 { "" } else { "s" },
            target.metric.name(),
            report::format::confidence_text(status.confidence),
            100.0 * target.target,
            widths.join(", ")
        ));
        self.blocks = (status.blocks_done + u32::from(added)).max(self.blocks);
        self.planned(total);
    }

    fn planned(&mut self, total: usize) {
        self.total = total.max(self.total);
        self.blocks = self
            .blocks
            .max(total.div_ceil(self.block_trials.max(1)) as u32);
        if let Some(bar) = &self.bar {
            bar.set_length(self.planned_trials() as u64);
        }
        self.show_counts();
    }

    fn at_least(&mut self, blocks: Option<u32>) {
        self.at_least = blocks;
        if let Some(bar) = &self.bar {
            bar.set_length(self.planned_trials() as u64);
        }
        self.show_counts();
    }
}
