//! The controller (`rubyrace run --slurm`, and `run --resume` of a fleet run): probes the
//! nodes, submits the blocks as a Slurm job array, watches the tasks, imports each
//! finished block into the run's `results.db` in one transaction, resubmits a block whose
//! task failed or whose node died (up to `retries`), and names what is still missing.
//!
//! An adaptive run (`precision`) keeps `nodes` blocks in flight and applies its stopping
//! rule to blocks in block order: a block that finishes before an earlier one waits, on
//! disk, until every block before it is stored. The rule so sees exactly the sequence of
//! looks a local run makes (docs/methodology.md, "Blocks that finish out of order").

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use experiment::fleet::Fleet;
use experiment::precision::{PrecisionEnd, PrecisionTarget};
use results::store::Store;
use serde::{Deserialize, Serialize};

use crate::probe::{probe_nodes, ProbeReport, ProbeRequest};
use crate::slurm::{exec_script, Slurm, Submission, TaskState};
use crate::task::{block_dir, write_atomically, BlockFile, BLOCK_FILE, PLAN_FILE};

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

/// One submission of a block.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Attempt {
    /// The array job that runs it; its task id is the block.
    pub job: String,
    /// The node(s) Slurm gave it, once known.
    pub nodes: String,
    /// Slurm's last word on it (PENDING, RUNNING, COMPLETED, NODE_FAIL...).
    pub state: String,
    /// Whether Slurm is done with it.
    pub ended: bool,
    /// Why it did not give a block, when it did not.
    pub failure: Option<String>,
    /// Whether its block is stored.
    pub imported: bool,
}

impl Attempt {
    /// Its directory's name (`ARRAYJOB_TASK`), where the task writes.
    fn name(&self, block: u32) -> String {
        format!("{}_{block}", self.job)
    }
}

/// The controller's record (`fleet/state.json`), rewritten after every change, so a later
/// `run --resume` (after `--detach`, Ctrl-C or a killed controller) knows every job.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct FleetState {
    pub attempts: BTreeMap<u32, Vec<Attempt>>,
    /// Blocks given up on in the last session, with why.
    pub missing: BTreeMap<u32, String>,
}

impl FleetState {
    fn path(dir: &Path) -> PathBuf {
        dir.join("fleet").join("state.json")
    }

    pub fn load(dir: &Path) -> Result<FleetState> {
        let path = FleetState::path(dir);
        if !path.exists() {
            return Ok(FleetState::default());
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        serde_json::from_str(&text)
            .with_context(|| format!("{} is not a fleet state", path.display()))
    }

    fn save(&self, dir: &Path) -> Result<()> {
        write_atomically(&FleetState::path(dir), &serde_json::to_vec_pretty(self)?)
    }

    fn active_jobs(&self) -> Vec<String> {
        let jobs: BTreeSet<String> = self
            .attempts
            .values()
            .flatten()
            .filter(|a| !a.ended)
            .map(|a| a.job.clone())
            .collect();
        jobs.into_iter().collect()
    }
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
        let reports = probe(store, &slurm, &fleet, &options.binary, events)?;
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

/// Probes every node (crate::probe) for what the stored configurations need.
fn probe(
    store: &Store,
    slurm: &Slurm,
    fleet: &Fleet,
    binary: &Path,
    events: &mut dyn FnMut(&str),
) -> Result<Vec<ProbeReport>> {
    let configs = store.configs()?;
    if fleet.separate_load() {
        separate_load_fits(&configs)?;
    }
    let mut rubies: Vec<(Vec<String>, Vec<String>)> = Vec::new();
    let mut dirs = BTreeSet::new();
    for c in &configs {
        match rubies
            .iter_mut()
            .find(|(argv, _)| *argv == c.settings.ruby_argv)
        {
            Some((_, labels)) => labels.push(c.label.clone()),
            None => rubies.push((c.settings.ruby_argv.clone(), vec![c.label.clone()])),
        }
        if c.settings.app_commit.is_none() {
            match &c.settings.script {
                Some(s) => {
                    if let Some(parent) = s.path.parent() {
                        dirs.insert(parent.to_path_buf());
                    }
                }
                None => {
                    dirs.insert(c.settings.app_dir.clone());
                }
            }
        }
    }
    let request = ProbeRequest {
        token: token()?,
        rubies,
        dirs: dirs.into_iter().collect(),
    };
    match probe_nodes(
        slurm,
        store.dir(),
        binary,
        &request,
        fleet.probe_timeout,
        &fleet.sbatch,
        events,
    )? {
        Ok(reports) => {
            if fleet.separate_load() && reports.len() < 2 {
                bail!(
                    "[fleet] load = \"separate\" gives each block two nodes, but only {} of the partition can run it; nothing was submitted",
                    units::count(reports.len(), "node")
                );
            }
            for r in &reports {
                events(&format!(
                    "node {}: {} ({} CPUs, kernel {}), {}",
                    r.node,
                    r.machine.cpu_model,
                    r.machine.cpus_online,
                    r.machine.kernel.split_whitespace().next().unwrap_or(""),
                    r.rubies
                        .iter()
                        .filter_map(|(_, d)| d.as_ref().ok())
                        .map(|d| d.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
                        .collect::<BTreeSet<_>>()
                        .into_iter()
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            Ok(reports)
        }
        Err(problems) => bail!(
            "the fleet cannot run this experiment; nothing was submitted:\n  {}",
            problems.join("\n  ")
        ),
    }
}

/// `load = "separate"` sends HTTP load from a second node: refused, naming the
/// configuration, for a workload without HTTP load (a script) and for `tls = true`, whose
/// certificate names the loopback only.
fn separate_load_fits(configs: &[experiment::Config]) -> Result<()> {
    for c in configs {
        if c.settings.workload == experiment::Workload::Script {
            bail!("[fleet] load = \"separate\": configuration {:?} runs a script, which has no HTTP load to send from another node; nothing was submitted", c.label);
        }
        if c.settings.tls {
            bail!("[fleet] load = \"separate\": configuration {:?} has tls = true, which a separate load host does not support yet (its certificate names 127.0.0.1); nothing was submitted", c.label);
        }
    }
    Ok(())
}

/// How the probed hosts differ (hardware, kernel, a Ruby's build), each as a sentence.
pub fn hosts_differ(reports: &[ProbeReport]) -> Vec<String> {
    let mut out = Vec::new();
    let mut differ = |what: &str, values: Vec<(String, String)>| {
        let distinct: BTreeSet<&String> = values.iter().map(|(_, v)| v).collect();
        if distinct.len() > 1 {
            let each: Vec<String> = values.iter().map(|(n, v)| format!("{n}: {v}")).collect();
            out.push(format!(
                "{what} differs between nodes ({})",
                each.join("; ")
            ));
        }
    };
    differ(
        "the CPU",
        reports
            .iter()
            .map(|r| (r.node.clone(), r.machine.cpu_model.clone()))
            .collect(),
    );
    differ(
        "the core count",
        reports
            .iter()
            .map(|r| (r.node.clone(), r.machine.cpus_online.to_string()))
            .collect(),
    );
    differ(
        "the kernel",
        reports
            .iter()
            .map(|r| (r.node.clone(), r.machine.kernel.clone()))
            .collect(),
    );
    let rubies: BTreeSet<&Vec<String>> = reports
        .iter()
        .flat_map(|r| r.rubies.iter().map(|(a, _)| a))
        .collect();
    for argv in rubies {
        differ(
            &format!("the build of `{}`", argv.join(" ")),
            reports
                .iter()
                .filter_map(|r| {
                    r.rubies
                        .iter()
                        .find(|(a, _)| a == argv)
                        .and_then(|(_, d)| d.as_ref().ok())
                        .map(|d| (r.node.clone(), d.clone()))
                })
                .collect(),
        );
    }
    out
}

/// A random token, to tell the controller's results directory from another.
fn token() -> Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no random token: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

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

    /// Submits `blocks` as one job array.
    fn submit(&mut self, blocks: &[u32], events: &mut dyn FnMut(&str)) -> Result<()> {
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
    fn poll(&mut self, events: &mut dyn FnMut(&str)) -> Result<Vec<u32>> {
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
    fn tell_running(&mut self, events: &mut dyn FnMut(&str)) {
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

    /// A block whose task finished and that is not stored yet.
    fn ready(&self) -> Vec<(u32, usize)> {
        self.state
            .attempts
            .iter()
            .filter_map(|(b, attempts)| {
                attempts
                    .iter()
                    .position(|a| a.ended && a.failure.is_none() && !a.imported)
                    .map(|i| (*b, i))
            })
            .collect()
    }

    fn has_ready(&self) -> bool {
        !self.ready().is_empty()
    }

    /// Imports the finished blocks: all of them, or, for an adaptive run, those whose
    /// earlier blocks are all stored, in block order, applying the rule after each.
    fn import_ready(&mut self, events: &mut dyn FnMut(&str)) -> Result<()> {
        loop {
            let ready = self.ready();
            let next = match &self.target {
                None => ready.first().copied(),
                Some(_) => {
                    let stored = self.stored_blocks()?;
                    let prefix = (0..).find(|b| !stored.contains(b)).unwrap_or(0);
                    ready.iter().find(|(b, _)| *b == prefix).copied()
                }
            };
            let Some((block, i)) = next else {
                // An adaptive run's finished blocks that wait for earlier ones, told once.
                if self.target.is_some() {
                    let stored = self.stored_blocks()?;
                    let prefix = (0..).find(|b| !stored.contains(b)).unwrap_or(0);
                    for (b, i) in ready {
                        if self.order_told.insert(b) {
                            events(&format!(
                                "block {} finished on {}; it is stored after block {} (the rule looks at blocks in order)",
                                b + 1,
                                self.state.attempts[&b][i].nodes,
                                prefix + 1
                            ));
                        }
                    }
                }
                return Ok(());
            };
            self.import(block, i, events)?;
            if let Some(target) = self.target.clone() {
                self.look(&target, events)?;
            }
        }
    }

    fn import(&mut self, block: u32, i: usize, events: &mut dyn FnMut(&str)) -> Result<()> {
        let attempt = self.state.attempts[&block][i].clone();
        let name = attempt.name(block);
        let adir = block_dir(&self.dir, block).join(&name);
        let file = BlockFile::read(&adir.join(BLOCK_FILE))?;
        let mut moved: Vec<(PathBuf, PathBuf)> = Vec::new();
        for t in &file.trials {
            let from = adir.join("trials").join(format!("{:05}", t.trial_id));
            let to = self.store.trial_dir(t.trial_id);
            if !from.exists() {
                continue;
            }
            if to.exists() {
                std::fs::remove_dir_all(&to)
                    .with_context(|| format!("cannot replace {}", to.display()))?;
            }
            std::fs::create_dir_all(to.parent().expect("trials/")).ok();
            std::fs::rename(&from, &to)
                .with_context(|| format!("cannot move {} to {}", from.display(), to.display()))?;
            moved.push((from, to));
        }
        let record = file.record(i + 1);
        if let Err(e) = self.store.import_block(
            self.session,
            block,
            &file.trials,
            &file.noisy_attempts,
            &record,
        ) {
            for (from, to) in moved {
                let _ = std::fs::rename(&to, &from);
            }
            return Err(e.context(format!(
                "cannot store block {} (every block before it is stored; free space or fix the problem, then `rubyrace run --resume {}`)",
                block + 1,
                self.dir.display()
            )));
        }
        self.state.attempts.get_mut(&block).expect("block")[i].imported = true;
        self.state.save(&self.dir)?;
        let wall: f64 = file.trials.iter().map(|t| t.wall_s).sum();
        let bad = file
            .trials
            .iter()
            .filter(|t| t.status != results::TrialStatus::Valid)
            .count();
        self.stored_on
            .entry(file.node.clone())
            .or_default()
            .push(block);
        let per_host: Vec<String> = self
            .stored_on
            .iter()
            .map(|(node, blocks)| format!("{node} {}", blocks.len()))
            .collect();
        events(&format!(
            "block {} stored: {} on {} in {}{}; {} of {} blocks stored ({})",
            block + 1,
            units::count(file.trials.len(), "trial"),
            file.node,
            units::span(Duration::from_secs_f64(wall)),
            if bad > 0 {
                format!(" ({bad} failed or invalid)")
            } else {
                String::new()
            },
            self.stored_blocks()?.len(),
            self.block_trials.len(),
            per_host.join(", ")
        ));
        Ok(())
    }

    /// The adaptive rule after a block is stored (in block order).
    fn look(&mut self, target: &PrecisionTarget, events: &mut dyn FnMut(&str)) -> Result<()> {
        let stored = self.stored_blocks()?;
        let prefix = (0..).find(|b| !stored.contains(b)).unwrap_or(0);
        let initial = self
            .store
            .meta("batches")?
            .and_then(|b| b.parse().ok())
            .unwrap_or(0u32);
        if prefix < initial {
            return Ok(());
        }
        let configs = self.store.configs()?.len();
        let (status, reason) = lab::runner::precision_look(self.store, target, configs, prefix)?;
        let widest = status.widest.as_ref().and_then(|w| w.half_width);
        events(&format!(
            "after {}: widest interval ±{}{}",
            units::count(prefix as usize, "block"),
            widest.map_or("?".into(), |w| format!("{:.2}%", 100.0 * w)),
            reason.map_or(String::new(), |r| format!(": stop ({r})"))
        ));
        let Some(reason) = reason else { return Ok(()) };
        self.store
            .record_precision_end(&PrecisionEnd::at(reason, prefix, target, &status))?;
        self.target = None;
        // Blocks after the stop: cancelled if in flight, and out of the schedule.
        let beyond: Vec<String> = self
            .state
            .attempts
            .iter()
            .filter(|(b, _)| **b >= prefix)
            .flat_map(|(_, a)| a.iter().filter(|a| !a.ended).map(|a| a.job.clone()))
            .collect();
        for (b, attempts) in self.state.attempts.iter_mut() {
            if *b >= prefix {
                for a in attempts.iter_mut().filter(|a| !a.imported) {
                    if !a.ended {
                        a.ended = true;
                        a.state = "CANCELLED".into();
                    }
                    a.failure
                        .get_or_insert_with(|| "after the stopping rule's decision".into());
                }
            }
        }
        if !beyond.is_empty() {
            let _ = self.cancel_tasks(&beyond, prefix);
        }
        let dropped = self
            .store
            .drop_unstored_blocks_after(prefix.saturating_sub(1))?;
        if dropped > 0 {
            events(&format!(
                "{} after block {prefix} left unrun or not stored (they came after the decision)",
                units::count(dropped, "planned trial")
            ));
        }
        self.refresh_block_trials()?;
        self.state.save(&self.dir)
    }

    /// Cancels the array tasks of blocks from `from` on in `jobs`.
    fn cancel_tasks(&self, jobs: &[String], from: u32) -> Result<()> {
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

    /// An adaptive run keeps `nodes` blocks in flight while its rule has not decided.
    fn keep_in_flight(&mut self, events: &mut dyn FnMut(&str)) -> Result<()> {
        let Some(target) = self.target.clone() else {
            return Ok(());
        };
        let in_flight = self
            .state
            .attempts
            .values()
            .flatten()
            .filter(|a| !a.ended)
            .count()
            + self.ready().len();
        let planned = self.block_trials.len() as u32;
        let room = (self.fleet.nodes as usize).saturating_sub(in_flight);
        let add = room.min(target.max_batches.saturating_sub(planned) as usize);
        if add == 0 {
            return Ok(());
        }
        let added = self.store.append_blocks(add as u32)?;
        self.refresh_block_trials()?;
        self.submit(&added, events)
    }

    /// Ctrl-C: cancels every job in flight, waits for Slurm to end them (their tasks stop
    /// their trial and exit), stores every block that finished.
    fn cancel(&mut self, events: &mut dyn FnMut(&str)) -> Result<FleetEnd> {
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
