//! `rubyrace report` and `rubyrace compare`: argument parsing and output wiring; the
//! analysis and the renderings are in the `report` crate.

use std::io::{self, IsTerminal};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;
use report::render::Format;
use report::{Options, Report, SourceData};
use strum::VariantNames;

use crate::output;

#[derive(Args, Debug)]
#[command(
    after_help = "Cohorts, comparisons, warnings and every format are described in docs/report.md."
)]
pub struct ReportArgs {
    /// Results directories (several runs are merged; machines are never pooled silently).
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,

    #[command(flatten)]
    pub common: CommonArgs,

    /// Report the extra time per request of cohort A over cohort B (1/rate_A − 1/rate_B).
    #[arg(long, num_args = 2, value_names = ["A", "B"])]
    pub overhead: Option<Vec<String>>,
}

#[derive(Args, Debug)]
pub struct CommonArgs {
    /// Group trials by these keys, e.g. `ruby,env.RUBY_YJIT_ENABLE` [default: the
    /// configuration label, plus the machine when there are several].
    #[arg(long, value_delimiter = ',')]
    pub by: Vec<String>,

    /// The cohort the others are compared with [default: the first].
    #[arg(long)]
    pub baseline: Option<String>,

    /// Output format.
    #[arg(long, default_value = "table", value_parser = crate::invocation::one_of::<Format>(Format::VARIANTS))]
    pub format: Format,

    /// Write to FILE instead of stdout (html: default DIR/report.html).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Also export every chart as SVG and PNG into DIR.
    #[arg(long, value_name = "DIR")]
    pub charts: Option<PathBuf>,
}

#[derive(Args, Debug)]
#[command(
    after_help = "rubyrace compare A B: two results directories, one cohort each.\n\
rubyrace compare DIR A B: two cohorts of one results directory."
)]
pub struct CompareArgs {
    /// Two results directories, or one results directory and two cohort names.
    #[arg(num_args = 2..=3, required = true)]
    pub args: Vec<String>,

    #[command(flatten)]
    pub common: CommonArgs,
}

pub fn report(args: ReportArgs) -> Result<ExitCode> {
    if let [dir] = args.dirs.as_slice() {
        if dir.join(results::bisect::BISECT_FILE).is_file()
            && !dir.join(results::store::DB_FILE).exists()
        {
            return bisection(dir, &args.common);
        }
    }
    let options = Options {
        by: args.common.by.clone(),
        baseline: args.common.baseline.clone(),
        overhead: args.overhead.map(|v| (v[0].clone(), v[1].clone())),
        only: Vec::new(),
        command: crate::invocation::command_line(),
    };
    check_outputs(&args.common, &args.dirs[0])?;
    let (report, sources) = report::build(&args.dirs, &options)?;
    emit(&report, &sources, &args.common, &args.dirs[0])
}

/// The report of a bisection's directory (`rubyrace bisect`): its answer, commits and
/// rounds as Markdown (`table`, `markdown`), or its page (`html`, by default
/// DIR/bisect.html). Each round's directory under `rounds/` is an ordinary results
/// directory for the other formats.
fn bisection(dir: &std::path::Path, common: &CommonArgs) -> Result<ExitCode> {
    let record = results::bisect::BisectRecord::read(dir)?;
    let (text, default) = match common.format {
        Format::Table | Format::Markdown => (
            report::bisect::markdown(&record, None),
            None,
        ),
        Format::Html => (
            report::render::html::bisect::page(&record),
            Some(dir.join("bisect.html")),
        ),
        other => bail!(
            "{} is a bisection: its report is markdown or html; `rubyrace report {}/rounds/NN --format {other:?}` reports one of its rounds",
            dir.display(),
            dir.display()
        ),
    };
    match common.output.clone().or(default) {
        Some(file) => {
            std::fs::write(&file, text)
                .with_context(|| format!("cannot write {}", file.display()))?;
            eprintln!("rubyrace: wrote {}", file.display());
        }
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}

pub fn compare(args: CompareArgs) -> Result<ExitCode> {
    let mut options = Options {
        by: args.common.by.clone(),
        baseline: args.common.baseline.clone(),
        overhead: None,
        only: Vec::new(),
        command: crate::invocation::command_line(),
    };
    let dirs: Vec<PathBuf> = match args.args.as_slice() {
        [a, b] => {
            if !options.by.is_empty() {
                bail!("rubyrace compare A B compares two directories as a whole; to compare them configuration by configuration, use `rubyrace report A B --by source,label` (--by applies to `rubyrace compare DIR A B`)");
            }
            options.by = vec!["source".into()];
            vec![PathBuf::from(a), PathBuf::from(b)]
        }
        [dir, a, b] => {
            options.only = vec![a.clone(), b.clone()];
            if options.baseline.is_none() {
                options.baseline = Some(a.clone());
            }
            vec![PathBuf::from(dir)]
        }
        _ => unreachable!("clap takes 2 or 3 arguments"),
    };
    if options.by == ["source"] && options.baseline.is_none() {
        options.baseline = Some(
            std::path::absolute(&dirs[0])
                .context("resolving the first directory")?
                .display()
                .to_string(),
        );
        options.by = vec!["source".into()];
    }
    check_outputs(&args.common, &dirs[0])?;
    let (report, sources) = report::build(&dirs, &options)?;
    emit(&report, &sources, &args.common, &dirs[0])
}

/// Where the HTML report goes: `-o FILE`, or `report.html` in the first directory.
fn html_path(common: &CommonArgs, first_dir: &std::path::Path) -> PathBuf {
    common
        .output
        .clone()
        .unwrap_or_else(|| first_dir.join("report.html"))
}

/// Checks `-o` and `--charts` before anything is read or printed, so a bad path fails at
/// once and never after the report was shown.
fn check_outputs(common: &CommonArgs, first_dir: &std::path::Path) -> Result<()> {
    if common.format == Format::Html {
        output::check_output_file(&html_path(common, first_dir))?;
    } else if let Some(path) = &common.output {
        output::check_output_file(path)?;
    }
    if let Some(dir) = &common.charts {
        output::prepare_charts_dir(dir)?;
    }
    Ok(())
}

fn emit(
    report: &Report,
    sources: &[SourceData],
    common: &CommonArgs,
    first_dir: &std::path::Path,
) -> Result<ExitCode> {
    let trials: Vec<report::TrialData> = sources
        .iter()
        .flat_map(|s| s.trials.iter().cloned())
        .collect();
    let to = common.output.as_deref();
    let color = to.is_none() && io::stdout().is_terminal();
    let text = report::render::render(report, common.format, color, &trials)?;
    if common.format == Format::Html {
        let path = html_path(common, first_dir);
        output::write_file(&path, text.as_bytes())?;
        eprintln!("rubyrace: wrote {}", path.display());
    } else {
        output::write(to, &text)?;
    }
    if let Some(dir) = &common.charts {
        let files = report::render::png::export_charts(report, dir, output::write_file)?;
        eprintln!(
            "rubyrace: wrote {} chart files into {}",
            files.len(),
            dir.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
