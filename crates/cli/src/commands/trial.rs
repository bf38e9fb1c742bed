//! `rubyrace trial --spec FILE`: one trial from its spec (as `run --dry-run --json` writes
//! it), with the services and setup the spec names started for it alone; its result as
//! JSON.

use std::fs;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;
use lab::trial::{TrialOutcome, TrialSpec};
use results::TrialStatus;

use crate::invocation::{install_interrupt, EXIT_INTERRUPTED, EXIT_TRIALS_FAILED, STOPPING};

#[derive(Args, Debug)]
pub struct TrialArgs {
    /// A trial spec (JSON, schema rubyrace.trial-spec/1; see docs/results.md).
    #[arg(long, value_name = "FILE")]
    pub spec: PathBuf,

    /// Write the result (schema rubyrace.trial/1) to FILE instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

pub fn trial(args: TrialArgs) -> Result<ExitCode> {
    // A bad --json path fails before the trial, not after it.
    if let Some(path) = &args.json {
        crate::output::check_output_file(path)?;
    }
    let text = fs::read_to_string(&args.spec)
        .with_context(|| format!("cannot read {}", args.spec.display()))?;
    let spec: TrialSpec = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not a trial spec (schema rubyrace.trial-spec/1)",
            args.spec.display()
        )
    })?;
    if spec.schema != lab::trial::TRIAL_SPEC_SCHEMA {
        bail!(
            "{}: schema {:?} is not {}",
            args.spec.display(),
            spec.schema,
            lab::trial::TRIAL_SPEC_SCHEMA
        );
    }
    let interrupt = install_interrupt(Some(STOPPING))?;
    // As in `run`: a server that daemonizes comes back to rubyrace and is killed.
    if let Err(e) = sys::process::become_subreaper() {
        eprintln!("rubyrace: cannot become a child subreaper ({e}): a server that daemonizes could outlive its trial");
    }
    let outcome = match lab::runner::run_alone(&spec, &interrupt) {
        Ok(outcome) => outcome,
        Err(e) => bail!("{e:#}; nothing recorded"),
    };
    let result = match outcome {
        TrialOutcome::Done(r) => r,
        TrialOutcome::Interrupted => {
            eprintln!("rubyrace: trial interrupted; nothing recorded");
            return Ok(ExitCode::from(EXIT_INTERRUPTED));
        }
        TrialOutcome::WriteFailed(what) => bail!("{what}; nothing recorded"),
    };
    let json = serde_json::to_string_pretty(&result)? + "\n";
    match &args.json {
        Some(path) => crate::output::write_file(path, json.as_bytes())?,
        None => io::stdout().write_all(json.as_bytes())?,
    }
    eprintln!(
        "rubyrace: trial {} {}{}",
        result.id.trial_id,
        result.status.as_str(),
        result
            .reason
            .as_deref()
            .map(|r| format!(": {r}"))
            .unwrap_or_default()
    );
    Ok(if result.status == TrialStatus::Valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_TRIALS_FAILED)
    })
}
