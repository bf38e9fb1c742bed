//! `rubyrace export DIR --json`: every stored trial of a results directory, with the run's
//! configurations, schedule and meta, as one JSON document (rubyrace.export/1).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use results::store::Store;

use crate::output::{self};

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// A results directory.
    pub dir: PathBuf,

    /// Write every trial as JSON (schema rubyrace.export/1; the only format for now).
    #[arg(long, required = true)]
    pub json: bool,

    /// Write to FILE instead of stdout.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

pub fn export(args: ExportArgs) -> Result<ExitCode> {
    if let Some(path) = &args.output {
        output::check_output_file(path)?;
    }
    let store = Store::open_read_only(&args.dir)?;
    let export = store.export()?;
    let text = serde_json::to_string_pretty(&export)? + "\n";
    output::write(args.output.as_deref(), &text)?;
    Ok(ExitCode::SUCCESS)
}
