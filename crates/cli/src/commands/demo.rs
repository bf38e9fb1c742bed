//! `rubyrace demo`: the demo experiment (examples/demo/experiment.toml, built into the
//! binary) planned, run into a results directory under the current directory, then
//! reported as text and as one HTML file. What `make demo` runs in a clone, for a rubyrace
//! installed from a gem or a package, from any directory.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;

use super::report::ReportArgs;
use super::run::RunArgs;

/// The demo's experiment, as examples/demo/experiment.toml holds it.
const DEMO_EXPERIMENT: &str = include_str!("../../../../examples/demo/experiment.toml");

#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    /// Results directory [default: results/demo-YYYYMMDD-HHMMSS under the current directory].
    #[arg(short = 'o', long, value_name = "DIR")]
    pub output: Option<PathBuf>,

    /// Two short blocks (about a minute): checks that the demo runs on this machine.
    #[arg(long)]
    pub smoke: bool,

    /// Print the demo's configurations and schedule, and run nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// A command's arguments parsed from an argv, as the command line would give them.
#[derive(Parser)]
struct Parsed<A: clap::Args> {
    #[command(flatten)]
    args: A,
}

pub fn parsed<A: clap::Args>(argv: &[OsString]) -> Result<A> {
    let argv = std::iter::once(OsString::from("rubyrace")).chain(argv.iter().cloned());
    Ok(Parsed::<A>::try_parse_from(argv)?.args)
}

pub fn demo(args: DemoArgs) -> Result<ExitCode> {
    // The experiment as a file of its own while the run reads it: the run stores its text,
    // so its report and `--resume` do not need the file after.
    let file = std::env::temp_dir().join(format!("rubyrace-demo-{}.toml", std::process::id()));
    std::fs::write(&file, DEMO_EXPERIMENT)
        .with_context(|| format!("cannot write the demo's experiment to {}", file.display()))?;
    let outcome = plan_run_and_report(&file, &args);
    let _ = std::fs::remove_file(&file);
    outcome
}

fn plan_run_and_report(file: &Path, args: &DemoArgs) -> Result<ExitCode> {
    let experiment = file.as_os_str().to_owned();
    println!("demo: the plan (the experiment is examples/demo/experiment.toml; `rubyrace demo --dry-run` prints only this)");
    let plan = super::run::run(parsed::<RunArgs>(&[
        experiment.clone(),
        "--dry-run".into(),
    ])?)?;
    if args.dry_run || plan != ExitCode::SUCCESS {
        return Ok(plan);
    }
    let dir = match &args.output {
        Some(dir) => dir.clone(),
        None => crate::results_dir::default_output_made("demo", args.smoke)
            .map_err(anyhow::Error::msg)?,
    };
    let mut run = vec![experiment, "-o".into(), dir.clone().into_os_string()];
    if args.smoke {
        run.push("--smoke".into());
    }
    println!();
    println!("demo: running it (Ctrl-C stops cleanly; the resume command is printed)");
    let ran = super::run::run(parsed::<RunArgs>(&run)?)?;
    println!();
    println!("demo: the report (rubyrace report {})", dir.display());
    let reported = super::report::report(parsed::<ReportArgs>(&[dir.clone().into()])?)?;
    let html = super::report::report(parsed::<ReportArgs>(&[
        dir.clone().into(),
        "--format".into(),
        "html".into(),
    ])?)?;
    println!();
    println!(
        "demo: HTML report: {} (open it in a browser; it is one offline file)",
        dir.join("report.html").display()
    );
    println!(
        "demo: Markdown for a bug report: rubyrace report {} --format markdown",
        dir.display()
    );
    println!(
        "demo: every trial is in {} (SQLite; docs/results.md).",
        dir.join("results.db").display()
    );
    // The run's own outcome first: an interrupted or failed run says so even when its
    // report could be written.
    Ok([ran, reported, html]
        .into_iter()
        .find(|code| *code != ExitCode::SUCCESS)
        .unwrap_or(ExitCode::SUCCESS))
}
