//! `rubyrace profile DIR --cohort NAME`: one configuration's profiles, merged over its
//! trials, as folded stacks (for inferno, speedscope, flamegraph.pl) or as a flame graph.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use experiment::Profiler;
use lab::store::Store;

use crate::output;

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ProfileFormat {
    /// `frame;frame;frame COUNT` lines, merged over the trials.
    Folded,
    /// A flame graph (SVG with search and zoom when opened on its own).
    Svg,
}

#[derive(Args, Debug)]
pub struct ProfileArgs {
    /// A results directory.
    pub dir: PathBuf,

    /// The configuration, by its label as `rubyrace run` and `rubyrace report` print it.
    #[arg(long)]
    pub cohort: String,

    /// Which profiler's stacks (default: rbspy if the trials have it, else perf).
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(experiment::PROFILER_NAMES))]
    pub profiler: Option<String>,

    #[arg(long, value_enum, default_value = "folded")]
    pub format: ProfileFormat,

    /// Write to FILE instead of stdout.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

pub fn profile(args: ProfileArgs) -> Result<ExitCode> {
    if let Some(path) = &args.output {
        output::check_output_file(path)?;
    }
    let store = Store::open_read_only(&args.dir)?;
    let results = store.trial_results()?;
    let mut labels: Vec<&str> = results.iter().map(|t| t.label.as_str()).collect();
    let trials: Vec<_> = results.iter().filter(|t| t.label == args.cohort).collect();
    if trials.is_empty() {
        labels.sort();
        labels.dedup();
        bail!(
            "{} has no configuration {:?}; its configurations: {}",
            args.dir.display(),
            args.cohort,
            labels.join(", ")
        );
    }
    let profiled: Vec<Profiler> = Profiler::ALL
        .into_iter()
        .filter(|p| {
            trials
                .iter()
                .any(|t| t.profiles.iter().any(|r| r.profiler == Some(*p)))
        })
        .collect();
    let profiler = match &args.profiler {
        Some(name) => Profiler::parse(name).expect("clap checked the name"),
        None => match profiled.first() {
            Some(p) => *p,
            None => bail!(
                "the trials of {:?} were not profiled: set profile = \"rbspy\" (or \"perf\") in the experiment file",
                args.cohort
            ),
        },
    };
    let merged = lab::profile::merge(
        trials.iter().map(|t| {
            (
                t.trial_id,
                lab::store::trial_dir(&args.dir, t.trial_id),
                t.profiles.as_slice(),
            )
        }),
        profiler,
    );
    for (trial, why) in &merged.missing {
        eprintln!(
            "rubyrace: trial {trial} has no {} profile: {why}",
            profiler.as_str()
        );
    }
    if merged.trials.is_empty() {
        bail!(
            "no {} profile of {:?} could be read (see above)",
            profiler.as_str(),
            args.cohort
        );
    }
    let per_unit = match (merged.requests, merged.script_runs) {
        (r, _) if r > 0 => format!(
            "{r} requests · {:.1} samples per 1000 requests",
            merged.samples_per_unit().unwrap_or(0.0)
        ),
        (_, s) if s > 0 => format!(
            "{s} script runs · {:.1} samples per script run",
            merged.samples_per_unit().unwrap_or(0.0)
        ),
        _ => "no requests recorded".into(),
    };
    let summary = format!(
        "{} · {} trials · {} samples at {} Hz over {:.1} s · {per_unit}",
        profiler.as_str(),
        merged.trials.len(),
        merged.samples,
        merged.rate_hz,
        merged.duration_s,
    );
    eprintln!("rubyrace: {} · {summary}", args.cohort);
    let text = match args.format {
        ProfileFormat::Folded => merged
            .stacks
            .iter()
            .map(|(stack, n)| format!("{stack} {n}\n"))
            .collect(),
        ProfileFormat::Svg => report::charts::flamegraph::flamegraph_svg(
            &merged.stacks,
            &format!("{} · {}", args.cohort, profiler.as_str()),
            &summary,
        )?,
    };
    output::write(args.output.as_deref(), &text)?;
    Ok(ExitCode::SUCCESS)
}
