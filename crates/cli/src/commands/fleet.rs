//! The fleet's commands: what `run --slurm` does instead of the local runner (the
//! controller, crate `fleet`), and the two commands Slurm starts on a node, hidden from
//! `--help`: `fleet-task DIR --block N` runs one block, `fleet-probe DIR` answers a probe,
//! `fleet-load-agent` runs a block's load on its second node (`load = "separate"`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use fleet::controller::{run_fleet, FleetEnd, Options};
use lab::live::LiveFile;
use lab::runner::Progress as _;
use results::progress::RunState;
use results::store::Store;

use crate::invocation::{
    command_line, install_run_interrupt, EXIT_BAD_EXPERIMENT, EXIT_INTERRUPTED, EXIT_TRIALS_FAILED,
};

#[derive(Args, Debug)]
pub struct TaskArgs {
    /// The fleet run's results directory (shared storage).
    pub dir: PathBuf,
    /// The block (the array task id: 0-based).
    #[arg(long)]
    pub block: u32,
    /// The job has a second node, which sends the load (`[fleet] load = "separate"`).
    #[arg(long)]
    pub separate_load: bool,
}

#[derive(Args, Debug)]
pub struct ProbeArgs {
    /// The fleet run's results directory (shared storage).
    pub dir: PathBuf,
}

/// `rubyrace fleet-task`: one block on this node (crate fleet::task).
pub fn task(args: TaskArgs) -> Result<ExitCode> {
    // scancel sends SIGTERM: the current trial stops as at Ctrl-C and nothing of it is kept.
    let interrupt = crate::invocation::install_interrupt(Some(crate::invocation::STOPPING))?;
    let outcome = fleet::task::run_block(
        &args.dir,
        args.block,
        args.separate_load,
        &command_line(),
        &interrupt,
        &mut |line| {
            println!(
                "{} {line}",
                humantime::format_rfc3339_seconds(std::time::SystemTime::now())
            );
        },
    )?;
    Ok(match outcome.as_str() {
        "complete" => ExitCode::SUCCESS,
        "interrupted" => ExitCode::from(EXIT_INTERRUPTED),
        _ => ExitCode::from(1),
    })
}

/// `rubyrace fleet-probe`: this node's answer to the controller's probe.
pub fn probe(args: ProbeArgs) -> Result<ExitCode> {
    let path = fleet::probe::answer(&args.dir)?;
    println!("{}", path.display());
    Ok(ExitCode::SUCCESS)
}

/// `rubyrace fleet-load-agent`: load runs asked for on stdin, their outcomes on stdout
/// (`lab::remote_load`), until stdin ends.
pub fn load_agent() -> Result<ExitCode> {
    lab::remote_load::serve(std::io::stdin().lock(), std::io::stdout())?;
    Ok(ExitCode::SUCCESS)
}

/// What `run --slurm --dry-run` shows of the cluster.
pub struct ClusterPlan {
    /// The partition the blocks go to, and whether it is the cluster's default.
    pub partition: Option<String>,
    pub default: bool,
    /// Its nodes and their state (`sinfo -N`).
    pub nodes: Vec<(String, String)>,
}

/// `run --slurm`, before its results directory is made: Slurm is reached and the partition
/// exists (fleet::slurm::Slurm::check). With `dry_run`, also the partition's nodes.
pub fn check_cluster(
    fleet: &experiment::fleet::Fleet,
    dry_run: bool,
) -> Result<Option<ClusterPlan>> {
    let slurm = fleet::slurm::Slurm {
        partition: fleet.partition.clone(),
    };
    let partitions = slurm.check()?;
    if !dry_run {
        return Ok(None);
    }
    let partition = fleet.partition.clone().or(partitions.default.clone());
    let nodes = fleet::slurm::Slurm {
        partition: partition.clone(),
    }
    .nodes()?;
    Ok(Some(ClusterPlan {
        default: fleet.partition.is_none(),
        partition,
        nodes,
    }))
}

/// The fleet's plan, as `run --slurm --dry-run` prints it after the schedule: where the
/// blocks would go and how they would be submitted.
pub fn describe_plan(experiment: &experiment::Experiment, plan: &ClusterPlan) -> String {
    let Some(fleet) = &experiment.fleet else {
        return String::new();
    };
    let estimate = experiment::estimated_block_time(&experiment.configs, &experiment.design);
    let limit = fleet.block_time_limit(estimate);
    let blocks: Vec<u32> = (0..experiment.batches).collect();
    let per_task = if fleet.separate_load() { 2 } else { 1 };
    let mut out = String::from("\nFleet (--slurm; --dry-run submits nothing):\n");
    out += &format!(
        "  partition: {}\n",
        match (&plan.partition, plan.default) {
            (Some(p), true) => format!("{p} (the cluster's default)"),
            (Some(p), false) => p.clone(),
            (None, _) => "the cluster's default (sinfo marks none)".into(),
        }
    );
    let usable = plan
        .nodes
        .iter()
        .filter(|(_, s)| !fleet::probe::unusable(s))
        .count();
    out += &format!(
        "  nodes: {} ({usable} can take a block; each is probed before anything is submitted)\n",
        if plan.nodes.is_empty() {
            "none".to_string()
        } else {
            plan.nodes
                .iter()
                .map(|(n, s)| format!("{n} {s}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    out += &format!(
        "  job array: {} as --array={}%{} (the array task id is the block), each task --exclusive --no-requeue --nodes={per_task}{}\n",
        units::count(blocks.len(), "block"),
        units::ranges(&blocks),
        fleet.nodes,
        if fleet.separate_load() {
            " (the load from the second node)"
        } else {
            ""
        }
    );
    out += &format!(
        "  time limit per block: --time={} min ({})\n",
        fleet::slurm::minutes(limit),
        match fleet.time_limit {
            Some(_) => "[fleet] time_limit".to_string(),
            None => format!(
                "3 × the block's estimate of {} + 10 min",
                humantime::format_duration(std::time::Duration::from_secs(estimate.as_secs()))
            ),
        }
    );
    out += &format!(
        "  retries: {} per block; probe_timeout: {}\n",
        fleet.retries,
        humantime::format_duration(fleet.probe_timeout)
    );
    if !fleet.sbatch.is_empty() {
        out += &format!("  more sbatch arguments: {}\n", fleet.sbatch.join(" "));
    }
    if experiment.precision.is_some() {
        out += "  adaptive: more blocks are submitted while the rule has not decided, one whenever a node is free\n";
    }
    out
}

/// The controller of `run --slurm` and of `run --resume` on a fleet run's directory.
pub fn control(
    store: &mut Store,
    kind: results::store::SessionKind,
    detach: bool,
) -> Result<ExitCode> {
    let dir = store.dir().to_path_buf();
    let binary = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .context("cannot find the rubyrace binary, which every node runs")?;
    let interrupt = install_run_interrupt(&format!("rubyrace run --resume {}", dir.display()))?;
    eprintln!("rubyrace: results go to {}", dir.display());
    // The live file for `rubyrace watch`: the controller's notes and how it ended; the
    // blocks in flight are in the fleet's state, which watch reads too.
    let mut live = LiveFile::start(&dir, &command_line(), store.configs()?.len());
    let total = store.schedule()?.len();
    let blocks = total.div_ceil(store.configs()?.len().max(1)) as u32;
    live.begin(total, store.completed()?.len(), blocks);
    let end = run_fleet(
        store,
        &Options {
            kind,
            command: &command_line(),
            detach,
            binary,
        },
        &interrupt,
        &mut |line| {
            eprintln!("rubyrace: {line}");
            live.note(line);
        },
    );
    let (state, reason) = match &end {
        Ok(FleetEnd::Complete) => (RunState::Complete, None),
        Ok(FleetEnd::Detached) => (RunState::Detached, None),
        Ok(FleetEnd::Interrupted) => (RunState::Interrupted, None),
        Ok(FleetEnd::Missing(m)) => (
            RunState::Stopped,
            Some(format!(
                "{} missing after every retry",
                units::count(m.len(), "block")
            )),
        ),
        Err(e) => (RunState::Stopped, Some(format!("{e:#}"))),
    };
    live.end_with(state, reason);
    let end = match end {
        Ok(end) => end,
        Err(e)
            if store.completed().map(|c| c.is_empty()).unwrap_or(true)
                && format!("{e:#}").contains("nothing was submitted") =>
        {
            eprintln!("rubyrace: {e:#}");
            return Ok(ExitCode::from(EXIT_BAD_EXPERIMENT));
        }
        Err(e) => {
            eprintln!(
                "rubyrace: the fleet run stopped: {e:#}\nEvery block stored before this point is kept. Resume with:\n  rubyrace run --resume {}",
                dir.display()
            );
            return Ok(ExitCode::from(1));
        }
    };
    let total = store.schedule()?.len();
    let completed = store.completed()?.len();
    match end {
        FleetEnd::Detached => {
            println!(
                "Submitted. The blocks run without this process; attach again (import what finished, watch the rest) with:\n  rubyrace run --resume {}",
                dir.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        FleetEnd::Interrupted => {
            eprintln!(
                "\nInterrupted: the jobs are cancelled; {completed} of {total} trials are stored in {}. Resume (submits only the missing blocks) with:\n  rubyrace run --resume {}",
                dir.display(),
                dir.display()
            );
            Ok(ExitCode::from(EXIT_INTERRUPTED))
        }
        FleetEnd::Missing(missing) => {
            crate::run_end::print_summary(store)?;
            eprintln!(
                "\n{} missing after every retry:",
                units::count(missing.len(), "block")
            );
            for (block, why) in &missing {
                eprintln!("  block {}: {why}", block + 1);
            }
            eprintln!(
                "{completed} of {total} trials are stored. Submit the missing blocks again with:\n  rubyrace run --resume {}",
                dir.display()
            );
            Ok(ExitCode::from(EXIT_TRIALS_FAILED))
        }
        FleetEnd::Complete => {
            crate::run_end::print_summary(store)?;
            if let Some(end) = store.precision_end()? {
                println!("\n{}.", end.describe());
            }
            crate::run_end::finish_complete(store)
        }
    }
}
