//! What runs on a node: one block of a fleet run (`rubyrace fleet-task DIR --block N`,
//! started by Slurm). The block's plan is copied from the shared results directory into
//! node-local scratch and run there as an ordinary results directory (`lab::runner`), so
//! that SQLite never writes over shared storage and a trial's logs are not written to the
//! network while it is measured. The block's trials, their files and the node's record
//! then go back to the shared directory as one block file, which the controller imports.
//!
//! With a separate load host (`load = "separate"`), the job has two nodes: the block runs
//! on the first, its servers listening on the node's address (`NodeAddr`), and the load
//! comes from a load agent on the second, started as a job step (`srun --overlap`) and
//! kept for the whole block (`lab::remote_load`).
//!
//! The scratch directory is locked (`flock` on its `task.lock`) for the task's whole life.
//! A task killed with its node leaves it behind, with its results.db and trials; the next
//! task on the node removes every scratch directory whose lock nobody holds (the kernel
//! released it when its owner died), never one whose owner may still run.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{Context, Result};
use lab::runner::{run_pending, Progress, RunEnd};
use nix::fcntl::{Flock, FlockArg};
use results::store::Store;
use results::TrialResult;
use serde::{Deserialize, Serialize};

/// The block file's schema.
pub const BLOCK_SCHEMA: &str = "rubyrace.block/1";
pub use results::store::block::{block_dir, BLOCK_FILE};
/// The plan of a block, beside its attempts.
pub const PLAN_FILE: &str = "plan.db";
/// How a task's scratch directory's name begins (in the node's TMPDIR).
pub const SCRATCH_PREFIX: &str = "rubyrace-block-";
/// The lock file of a scratch directory, held by its task while it lives.
pub const SCRATCH_LOCK: &str = "task.lock";

/// What a task leaves for the controller (docs/fleet.md, "The block file").
#[derive(Debug, Serialize, Deserialize)]
pub struct BlockFile {
    pub schema: String,
    pub block: u32,
    /// The Slurm job of the attempt (`ARRAYJOB_TASK`).
    pub job: String,
    pub node: String,
    pub hostname: String,
    /// "complete", "interrupted", "stopped after trial N (--fail-fast)" or "failed: ...".
    pub outcome: String,
    pub started_at: String,
    pub finished_at: String,
    pub rubyrace_version: String,
    /// `load = "separate"`: the node the load came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_node: Option<String>,
    /// What `rubyrace doctor --quick` found on the node when the block started.
    pub doctor: Option<serde_json::Value>,
    pub trials: Vec<TrialResult>,
    /// Attempts measured in noise and run again (`repeat_noisy`), in the order made.
    pub noisy_attempts: Vec<TrialResult>,
}

impl BlockFile {
    pub fn read(path: &Path) -> Result<BlockFile> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let block: BlockFile = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a block file", path.display()))?;
        anyhow::ensure!(
            block.schema == BLOCK_SCHEMA,
            "{} has schema {:?}; this rubyrace reads {BLOCK_SCHEMA}",
            path.display(),
            block.schema
        );
        Ok(block)
    }

    /// The block's record in the run's store (without the trials, which are stored as
    /// trials).
    pub fn record(&self, attempt: usize) -> serde_json::Value {
        serde_json::json!({
            "block": self.block,
            "attempt": attempt,
            "job": self.job,
            "node": self.node,
            "hostname": self.hostname,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "rubyrace_version": self.rubyrace_version,
            "load_node": self.load_node,
            "doctor": self.doctor,
        })
    }
}

/// The name of this task's attempt: `ARRAYJOB_TASK` under Slurm.
pub fn attempt_name() -> String {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    match (
        var("SLURM_ARRAY_JOB_ID"),
        var("SLURM_ARRAY_TASK_ID"),
        var("SLURM_JOB_ID"),
    ) {
        (Some(job), Some(task), _) => format!("{job}_{task}"),
        (_, _, Some(job)) => job,
        _ => format!("local-{}", std::process::id()),
    }
}

/// Runs block `block` of the fleet run in `dir` on this node and writes its block file;
/// returns how the block ended. `log` receives a line per event (the task's Slurm output).
pub fn run_block(
    dir: &Path,
    block: u32,
    separate_load: bool,
    command: &str,
    interrupt: &Arc<AtomicBool>,
    log: &mut dyn FnMut(&str),
) -> Result<String> {
    let started_at = now();
    let attempt = attempt_name();
    let out = block_dir(dir, block).join(&attempt);
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    for gone in remove_abandoned_scratch(&std::env::temp_dir()) {
        log(&format!(
            "removed {}, the scratch directory of a task that is gone (its node died, or it was killed)",
            gone.display()
        ));
    }
    let (scratch, _lock) = make_scratch(block, &attempt)?;
    let plan = block_dir(dir, block).join(PLAN_FILE);
    std::fs::copy(&plan, scratch.path().join(results::store::DB_FILE))
        .with_context(|| format!("cannot copy {} to this node", plan.display()))?;
    log(&format!(
        "block {} of {} on {} in {}",
        block + 1,
        dir.display(),
        node_name(),
        scratch.path().display()
    ));
    let mut store = Store::open(scratch.path())?;
    let load_node = if separate_load {
        let agent = start_load_agent()?;
        log(&format!(
            "the load comes from {} ({}, {} CPUs); the servers listen on {}; the agent answers in {:.1} ms",
            agent.node,
            agent.machine.cpu_model,
            agent.machine.cpus_online,
            agent.server_address,
            agent.latency.as_secs_f64() * 2e3
        ));
        let node = agent.node.clone();
        lab::remote_load::install(agent);
        Some(node)
    } else {
        None
    };
    let mut progress = LogProgress { log };
    let end = run_pending(
        &mut store,
        results::store::SessionKind::Resume,
        command,
        false,
        interrupt,
        &mut progress,
    );
    lab::remote_load::uninstall(std::time::Duration::from_secs(10));
    let outcome = match &end {
        Ok(RunEnd::Complete) => "complete".to_string(),
        Ok(RunEnd::Interrupted) => "interrupted".to_string(),
        Ok(RunEnd::StoppedAfterFailure { trial_id }) => format!("stopped after trial {trial_id}"),
        Ok(end @ RunEnd::CannotBoot { .. }) => {
            format!("cannot run: {}", end.cannot_boot_lines().join("; "))
        }
        Err(e) => format!("failed: {e:#}"),
    };
    let trials = store.trial_results()?;
    let noisy = store.noisy_attempts()?;
    let doctor = store
        .doctor_reports()?
        .last()
        .map(serde_json::to_value)
        .transpose()?;
    // The trials' files next to the block file, where the controller moves them from.
    let from = scratch.path().join("trials");
    if from.exists() {
        copy_tree(&from, &out.join("trials"))?;
    }
    let file = BlockFile {
        schema: BLOCK_SCHEMA.into(),
        block,
        job: attempt,
        node: node_name(),
        hostname: sys::environment::machine().hostname,
        outcome: outcome.clone(),
        started_at,
        finished_at: now(),
        rubyrace_version: env!("CARGO_PKG_VERSION").into(),
        load_node,
        doctor,
        trials,
        noisy_attempts: noisy,
    };
    write_atomically(&out.join(BLOCK_FILE), &serde_json::to_vec_pretty(&file)?)?;
    log(&format!("block {}: {outcome}", block + 1));
    Ok(outcome)
}

/// A new scratch directory for `block` in the node's TMPDIR, and the lock that says its
/// task lives. The lock file is locked before it takes its name, so a sweep never finds
/// it unlocked while its task runs.
fn make_scratch(block: u32, attempt: &str) -> Result<(tempfile::TempDir, Flock<File>)> {
    let scratch = tempfile::Builder::new()
        .prefix(&format!("{SCRATCH_PREFIX}{}-", block + 1))
        .tempdir()
        .context("cannot make a scratch directory on this node (TMPDIR)")?;
    let pending = scratch.path().join(format!(".{SCRATCH_LOCK}.new"));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&pending)
        .with_context(|| format!("cannot create {}", pending.display()))?;
    let mut lock = Flock::lock(file, FlockArg::LockExclusiveNonblock)
        .map_err(|(_, e)| anyhow::anyhow!("cannot lock {}: {e}", pending.display()))?;
    writeln!(lock, "{} {attempt} {}", std::process::id(), node_name())
        .with_context(|| format!("cannot write {}", pending.display()))?;
    let path = scratch.path().join(SCRATCH_LOCK);
    std::fs::rename(&pending, &path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    Ok((scratch, lock))
}

/// Removes the scratch directories in `root` whose task is gone: those whose lock file
/// exists and is held by nobody (the kernel releases a lock when its process dies, however
/// it dies). A directory without a lock file is left alone (its task may be making it).
/// Returns what it removed.
pub fn remove_abandoned_scratch(root: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
        if !entry
            .file_name()
            .to_string_lossy()
            .starts_with(SCRATCH_PREFIX)
            || !entry.file_type().is_ok_and(|t| t.is_dir())
        {
            continue;
        }
        let dir = entry.path();
        let Ok(file) = File::open(dir.join(SCRATCH_LOCK)) else {
            continue;
        };
        // Held while the directory is removed, so that nothing else judges it meanwhile.
        let Ok(_gone) = Flock::lock(file, FlockArg::LockExclusiveNonblock) else {
            continue;
        };
        if std::fs::remove_dir_all(&dir).is_ok() {
            removed.push(dir);
        }
    }
    removed
}

/// The load agent of a two-node job: on the node that is not this one, started as a job
/// step beside this one (`srun --overlap`), reaching this node's servers at its `NodeAddr`.
fn start_load_agent() -> Result<lab::remote_load::LoadAgent> {
    let list = std::env::var("SLURM_JOB_NODELIST").context(
        "load = \"separate\": SLURM_JOB_NODELIST is not set (the task runs outside Slurm)",
    )?;
    let here = node_name();
    let nodes = crate::slurm::hostnames(&list)?;
    let other = nodes.iter().find(|n| **n != here).with_context(|| {
        format!("load = \"separate\": the job has no node besides {here} ({list})")
    })?;
    let address = crate::slurm::node_address(&here)?;
    // The servers will listen there: it must be an address of this machine.
    std::net::TcpListener::bind((address, 0)).with_context(|| {
        format!("node {here}'s NodeAddr {address} is not an address of this machine")
    })?;
    let binary = std::env::current_exe()
        .context("cannot find the rubyrace binary, which the load node runs too")?;
    let argv = vec![
        "srun".to_string(),
        "--overlap".into(),
        "--nodes=1".into(),
        "--ntasks=1".into(),
        format!("--nodelist={other}"),
        "--job-name=rubyrace-load".into(),
        binary.display().to_string(),
        "fleet-load-agent".into(),
    ];
    lab::remote_load::LoadAgent::start(&argv, address, std::time::Duration::from_secs(120))
        .with_context(|| format!("the load agent on {other}"))
}

pub use sys::environment::node_name;

fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

pub use results::write_atomically;

/// Copies a directory tree (files and directories; a symbolic link as a link).
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("cannot create {}", to.display()))?;
    for entry in
        std::fs::read_dir(from).with_context(|| format!("cannot read {}", from.display()))?
    {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_symlink() {
            let link = std::fs::read_link(entry.path())?;
            let _ = std::fs::remove_file(&target);
            std::os::unix::fs::symlink(link, &target)
                .with_context(|| format!("cannot create {}", target.display()))?;
        } else {
            std::fs::copy(entry.path(), &target).with_context(|| {
                format!(
                    "cannot copy {} to {}",
                    entry.path().display(),
                    target.display()
                )
            })?;
        }
    }
    Ok(())
}

/// The runner's events as log lines (the task's output file).
struct LogProgress<'a> {
    log: &'a mut dyn FnMut(&str),
}

impl Progress for LogProgress<'_> {
    fn begin(&mut self, total: usize, done: usize, _blocks: u32) {
        // `blocks` counts up to the highest block of the plan, which holds one.
        (self.log)(&format!(
            "{} of the block, {done} stored",
            units::count(total, "trial")
        ));
    }

    fn trial_started(&mut self, trial: &experiment::schedule::ScheduledTrial, label: &str) {
        (self.log)(&format!("trial {} [{label}] started", trial.trial_id));
    }

    fn trial_finished(&mut self, r: &TrialResult) {
        let figure = r
            .derived
            .requests_per_s
            .map(|x| format!(", {x:.1} req/s"))
            .unwrap_or_default();
        let reason = r
            .reason
            .as_deref()
            .map(|x| format!(": {x}"))
            .unwrap_or_default();
        (self.log)(&format!(
            "trial {} [{}] {}{figure}{reason}",
            r.id.trial_id,
            r.id.label,
            r.status.as_str()
        ));
    }

    fn note(&mut self, message: &str) {
        (self.log)(message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory in `root` whose lock is held while the returned lock lives.
    fn scratch_in(root: &Path, name: &str) -> (PathBuf, Flock<File>) {
        let dir = root.join(format!("{SCRATCH_PREFIX}{name}"));
        std::fs::create_dir_all(dir.join("trials")).unwrap();
        std::fs::write(dir.join("results.db"), b"").unwrap();
        let file = File::create(dir.join(SCRATCH_LOCK)).unwrap();
        let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock).unwrap();
        (dir, lock)
    }

    #[test]
    fn only_the_scratch_of_a_gone_task_is_removed() {
        let root = tempfile::tempdir().unwrap();
        let (live, _held) = scratch_in(root.path(), "1-live");
        let (gone, released) = scratch_in(root.path(), "2-gone");
        drop(released);
        // Being made: no lock file yet.
        let unlocked = root.path().join(format!("{SCRATCH_PREFIX}3-new"));
        std::fs::create_dir_all(&unlocked).unwrap();
        // Not a scratch directory, though unlocked.
        let other = root.path().join("other-dir");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join(SCRATCH_LOCK), b"").unwrap();

        assert_eq!(remove_abandoned_scratch(root.path()), vec![gone.clone()]);
        assert!(!gone.exists());
        assert!(live.join("results.db").exists());
        assert!(unlocked.exists());
        assert!(other.exists());
    }
}
