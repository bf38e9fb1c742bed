//! The controller's jobs: the blocks submitted as a job array, Slurm's states polled (a
//! failed attempt recorded, then submitted again or given up on), the tasks cancelled, and
//! what is told of them (a block running, blocks waiting in Slurm's queue).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::state::Attempt;
use super::{Controller, FleetEnd};
use crate::slurm::{exec_script, Submission, TaskState};
use crate::task::{block_dir, BlockFile, BLOCK_FILE, PLAN_FILE};

impl Controller<'_> {
    /// Submits `blocks` as one job array.
    pub(super) fn submit(&mut self, blocks: &[u32], events: &mut dyn FnMut(&str)) -> Result<()> {
        if blocks.is_empty() {
            return Ok(());
        }
        let mut blocks = blocks.to_vec();
        blocks.sort_unstable();
        let blocks = &blocks[..];
        for &b in blocks {
            let bdir = block_dir(&self.dir, b);
            std::fs::create_dir_all(&bdir)
                .with_context(|| format!("cannot create {}", bdir.display()))?;
            self.store.write_block_plan(b, &bdir.join(PLAN_FILE))?;
        }
        let script = self.dir.join("fleet").join("block.sh");
        let mut argv = vec![
            self.binary.display().to_string(),
            "fleet-task".into(),
            self.dir.display().to_string(),
            "--block".into(),
            "$SLURM_ARRAY_TASK_ID".into(),
        ];
        if self.fleet.separate_load() {
            argv.push("--separate-load".into());
        }
        std::fs::write(
            &script,
            exec_script(
                &format!(
                    "rubyrace run --slurm: one block of {} (the array task id is the block)",
                    self.dir.display()
                ),
                &argv,
            ),
        )?;
        let configs = self.store.configs()?;
        let design = self.store.design()?;
        let estimate = experiment::estimated_block_time(&configs, &design);
        let name = format!(
            "rubyrace-{}",
            self.store
                .meta("experiment_name")?
                .unwrap_or_default()
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
                .take(40)
                .collect::<String>()
        );
        let job = self.slurm.submit(&Submission {
            script: &script,
            job_name: &name,
            array: blocks,
            throttle: self.fleet.nodes,
            output: &self.dir.join("fleet").join("logs").join("%A_%a.out"),
            time_limit: self.fleet.block_time_limit(estimate),
            nodes: if self.fleet.separate_load() { 2 } else { 1 },
            nodelist: None,
            extra: &self.fleet.sbatch,
        })?;
        for &b in blocks {
            *self.session_attempts.entry(b).or_default() += 1;
            self.state.attempts.entry(b).or_default().push(Attempt {
                job: job.clone(),
                nodes: String::new(),
                state: "PENDING".into(),
                ended: false,
                failure: None,
                imported: false,
            });
        }
        self.state.save(&self.dir)?;
        events(&format!(
            "submitted {} as job array {job} ({}), at most {} at once",
            units::count(blocks.len(), "block"),
            blocks
                .iter()
                .map(|b| (b + 1).to_string())
                .collect::<Vec<_>>()
                .join(" "),
            self.fleet.nodes
        ));
        Ok(())
    }

    /// Reads Slurm's states of every attempt in flight; returns the blocks to submit again.
    pub(super) fn poll(&mut self, events: &mut dyn FnMut(&str)) -> Result<Vec<u32>> {
        let jobs = self.state.active_jobs();
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let mut states = self.slurm.states(&jobs)?;
        self.tell_waiting(&states, events);
        let mut resubmit = Vec::new();
        let blocks: Vec<u32> = self.state.attempts.keys().copied().collect();
        for block in blocks {
            let n = self.state.attempts[&block].len();
            for i in 0..n {
                let attempt = self.state.attempts[&block][i].clone();
                if attempt.ended {
                    continue;
                }
                let name = attempt.name(block);
                let mut found: Option<TaskState> = states
                    .iter()
                    .find(|s| s.job == attempt.job && s.task == Some(block))
                    .cloned();
                if found.is_none() {
                    // Gone from the queue (MinJobAge passed, a detached run): accounting.
                    if let Some(acct) = self.slurm.accounting(&attempt.job) {
                        states.extend(acct);
                        found = states
                            .iter()
                            .find(|s| s.job == attempt.job && s.task == Some(block))
                            .cloned();
                    }
                }
                let file = block_dir(&self.dir, block).join(&name).join(BLOCK_FILE);
                let a = &mut self.state.attempts.get_mut(&block).expect("block")[i];
                match &found {
                    Some(s) if !s.ended() => {
                        a.state = s.state.clone();
                        if !s.nodes.is_empty() && s.nodes != "(null)" {
                            a.nodes = s.nodes.clone();
                        }
                        if s.state == "RUNNING" && self.running_told.insert(name.clone()) {
                            self.running_lines.push(format!(
                                "block {} running on {} (job {name})",
                                block + 1,
                                a.nodes
                            ));
                        }
                        continue;
                    }
                    Some(s) => {
                        a.state = s.state.clone();
                        if !s.nodes.is_empty() && s.nodes != "(null)" {
                            a.nodes = s.nodes.clone();
                        }
                    }
                    None => a.state = "UNKNOWN".into(),
                }
                a.ended = true;
                let expected = self.block_trials.get(&block).copied().unwrap_or(0);
                let failure = match BlockFile::read(&file) {
                    Ok(f) if f.outcome == "complete" && f.trials.len() == expected => None,
                    Ok(f) => Some(format!(
                        "its task ended {}: the block {} ({} of {expected} trials)",
                        describe(&found),
                        f.outcome,
                        f.trials.len()
                    )),
                    Err(_) => Some(format!(
                        "its task ended {} without a block file{}",
                        describe(&found),
                        log_tail(&self.dir, &name)
                    )),
                };
                if let Some(why) = failure {
                    a.failure = Some(why.clone());
                    let (nodes, state) = (a.nodes.clone(), a.state.clone());
                    let tries = self.session_attempts.get(&block).copied().unwrap_or(0);
                    let retry = !self.cancelling && tries <= self.fleet.retries;
                    if !self.cancelling {
                        // Kept with the run, for the report (docs/results.md).
                        self.store.record_fleet_failure(
                            block,
                            &serde_json::json!({
                                "block": block,
                                "attempt": i + 1,
                                "job": name,
                                "nodes": nodes,
                                "state": state,
                                "reason": found.as_ref().map(|s| s.reason.clone()),
                                "failure": why,
                                "retried": retry,
                                "at": humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
                            }),
                        )?;
                    }
                    if retry {
                        events(&format!(
                            "block {} failed ({why}): submitted again (retry {tries} of {})",
                            block + 1,
                            self.fleet.retries
                        ));
                        resubmit.push(block);
                    } else {
                        events(&format!("block {} is missing: {why}", block + 1));
                        self.state.missing.insert(block, why);
                    }
                }
            }
        }
        Ok(resubmit)
    }

    /// Tells the starts the last poll saw (after what it saw end is stored).
    pub(super) fn tell_running(&mut self, events: &mut dyn FnMut(&str)) {
        for line in std::mem::take(&mut self.running_lines) {
            events(&line);
        }
    }

    /// Says why blocks wait in Slurm's queue (the nodes are busy, the partition is down...),
    /// when that changes, at most every 30 s; waiting for the run's own `%nodes` throttle
    /// is not news.
    fn tell_waiting(&mut self, states: &[TaskState], events: &mut dyn FnMut(&str)) {
        let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
        for s in states.iter().filter(|s| s.state == "PENDING") {
            if !matches!(s.reason.as_str(), "JobArrayTaskLimit" | "None" | "") {
                *reasons.entry(s.reason.as_str()).or_default() += 1;
            }
        }
        let line = reasons
            .iter()
            .map(|(r, n)| format!("{} ({r})", units::count(*n, "block")))
            .collect::<Vec<_>>()
            .join(", ");
        let due = self
            .waiting_told
            .as_ref()
            .is_none_or(|(told, at)| *told != line && at.elapsed() >= Duration::from_secs(30));
        if !line.is_empty() && due {
            events(&format!("waiting in Slurm's queue: {line}"));
            self.waiting_told = Some((line, Instant::now()));
        }
    }

    /// Cancels the array tasks of blocks from `from` on in `jobs`.
    pub(super) fn cancel_tasks(&self, jobs: &[String], from: u32) -> Result<()> {
        let tasks: Vec<String> = self
            .state
            .attempts
            .iter()
            .filter(|(b, _)| **b >= from)
            .flat_map(|(b, a)| {
                a.iter()
                    .filter(|a| jobs.contains(&a.job))
                    .map(move |a| a.name(*b))
            })
            .collect();
        self.slurm.cancel(&tasks)
    }

    /// Ctrl-C: cancels every job in flight, waits for Slurm to end them (their tasks stop
    /// their trial and exit), stores every block that finished.
    pub(super) fn cancel(&mut self, events: &mut dyn FnMut(&str)) -> Result<FleetEnd> {
        self.cancelling = true;
        let jobs = self.state.active_jobs();
        if !jobs.is_empty() {
            events(&format!("cancelling job(s) {}", jobs.join(" ")));
            self.slurm.cancel(&jobs)?;
        }
        let started = Instant::now();
        while !self.state.active_jobs().is_empty() && started.elapsed() < Duration::from_secs(120) {
            std::thread::sleep(Duration::from_millis(500));
            // Every attempt counts as tried: none is resubmitted now.
            for b in self.state.attempts.keys() {
                self.session_attempts.insert(*b, u32::MAX / 2);
            }
            self.poll(&mut |_| {})?;
        }
        self.state.missing.clear();
        self.import_ready(events)?;
        self.state.save(&self.dir)?;
        Ok(FleetEnd::Interrupted)
    }
}

fn describe(state: &Option<TaskState>) -> String {
    match state {
        Some(s) => s.describe(),
        None => "(Slurm no longer knows the job, and the cluster keeps no accounting)".into(),
    }
}

/// The end of an attempt's Slurm output, as a clause.
fn log_tail(dir: &Path, name: &str) -> String {
    let tail = sys::process::tail_file(
        &dir.join("fleet").join("logs").join(format!("{name}.out")),
        400,
    );
    let tail = tail.trim();
    if tail.is_empty() {
        String::new()
    } else {
        format!("; its output ends: {}", tail.replace('\n', " | "))
    }
}
