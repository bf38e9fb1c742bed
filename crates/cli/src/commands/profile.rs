//! `rubyrace profile DIR --cohort NAME`: one cohort's profiles, merged over its valid
//! trials exactly as the report merges them (the same cohorts, `--by` included), as folded
//! stacks (for inferno, speedscope, flamegraph.pl) or as a flame graph.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use experiment::Profiler;

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

    /// The cohort, as `rubyrace report` names it: a configuration's label, or with `--by`
    /// the values of those keys (`ruby=3.3`).
    #[arg(long)]
    pub cohort: String,

    /// Group trials by these keys, as `rubyrace report --by` does.
    #[arg(long, value_delimiter = ',')]
    pub by: Vec<String>,

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
    let options = report::Options {
        by: args.by.clone(),
        only: vec![args.cohort.clone()],
        command: "rubyrace profile".into(),
        ..report::Options::default()
    };
    let (report, _) = report::build(std::slice::from_ref(&args.dir), &options)?;
    let profiles: Vec<_> = report
        .profiles
        .iter()
        .filter(|p| p.cohort == args.cohort)
        .collect();
    let wanted = match &args.profiler {
        Some(name) => Profiler::parse(name).expect("clap checked the name"),
        None => match Profiler::ALL
            .into_iter()
            .find(|p| profiles.iter().any(|c| c.profiler == p.as_str()))
        {
            Some(p) => p,
            None => bail!(
                "the trials of {:?} were not profiled: set profile = \"rbspy\" (or \"perf\") in the experiment file",
                args.cohort
            ),
        },
    };
    let Some(p) = profiles.iter().find(|c| c.profiler == wanted.as_str()) else {
        bail!(
            "the trials of {:?} have no {} profile",
            args.cohort,
            wanted.as_str()
        );
    };
    for why in &p.missing {
        eprintln!("rubyrace: trial {why} (no {} profile)", wanted.as_str());
    }
    if p.trials == 0 {
        bail!(
            "no {} profile of {:?} could be read (see above)",
            wanted.as_str(),
            args.cohort
        );
    }
    let per_unit = match p.sampled_us_per_unit {
        Some(us) => format!(
            "{} {}s · {} of sampled CPU per {}",
            p.units,
            p.unit,
            report::format::micros(us),
            p.unit
        ),
        None => "nothing served recorded".into(),
    };
    let summary = format!(
        "{} · {} · {} samples at {} Hz over {:.1} s · {per_unit}",
        p.profiler,
        units::count(p.trials, "trial"),
        p.samples,
        p.rate_hz,
        p.duration_s,
    );
    eprintln!("rubyrace: {} · {summary}", args.cohort);
    let text = match args.format {
        ProfileFormat::Folded => p
            .stacks
            .iter()
            .map(|(stack, n)| format!("{stack} {n}\n"))
            .collect(),
        ProfileFormat::Svg => report::charts::flamegraph::flamegraph_svg(
            &p.stacks,
            &format!("{} · {}", args.cohort, p.profiler),
            &summary,
        )?,
    };
    output::write(args.output.as_deref(), &text)?;
    Ok(ExitCode::SUCCESS)
}
