//! `rubyrace doctor`: argument parsing and the printing of the doctor's findings. The
//! checks themselves are in `doctor`.

use std::process::ExitCode;

use clap::Args;
use doctor::{self, Options};

/// Arguments of `rubyrace doctor`.
#[derive(Args, Debug)]
#[command(
    after_help = "Each finding is ok, info, warn or bad, with what was seen and what to \
do. Findings never change the exit status: it is 0, or 1 when a check itself crashed. \
docs/doctor.md describes every check and its threshold."
)]
pub struct DoctorArgs {
    /// Print the findings as JSON (schema rubyrace.doctor/1).
    #[arg(long)]
    pub json: bool,
    /// Skip the slow checks: the CPU sampling of every process and the Ruby queries.
    #[arg(long)]
    pub quick: bool,
    /// List at most N busy processes.
    #[arg(long, value_name = "N", default_value_t = doctor::BUSY_SHOWN)]
    pub top: usize,
}

pub fn run(args: DoctorArgs) -> anyhow::Result<ExitCode> {
    let report = doctor::examine_with(&Options {
        quick: args.quick,
        top: args.top,
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render());
    }
    if report.failed_checks.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "rubyrace: error: {} check(s) crashed: {} (a bug in rubyrace)",
            report.failed_checks.len(),
            report.failed_checks.join(", ")
        );
        Ok(ExitCode::from(1))
    }
}
