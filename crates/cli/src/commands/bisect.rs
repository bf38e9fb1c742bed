//! `rubyrace bisect`: which commit of a history made the app slower, found by measuring.
//! The experiment's one configuration (or `--config LABEL`) runs at commits of the app's
//! repository (or on a CRuby built at each commit); the search itself, round by round, is
//! `lab::bisect`, over `experiment::locate`'s rule. This command reads the arguments,
//! resolves the history and makes the search's directory and record (`bisect.json`,
//! `results::bisect`), runs the rounds here with their progress on the terminal (and builds
//! the Rubies), and writes the report. `--resume DIR` goes on from every stored block (with
//! a larger `--max-blocks`, past a budget that ended in a range).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use experiment::precision::PrecisionMetric;
use experiment::{Config, Experiment};
use fleet::controller::FleetEnd;
use lab::bisect::{Measuring, Searcher, Stopped};
use lab::runner::RunEnd;
use results::bisect::{BisectOutcome, BisectRecord, HistoryOf, BISECT_FILE};
use results::store::Store;

use crate::invocation::{
    install_run_interrupt, parse_metric, parse_percent, CommitSource, EXIT_BAD_EXPERIMENT,
    EXIT_INCONCLUSIVE, EXIT_INTERRUPTED, EXIT_TRIALS_FAILED,
};
use crate::progress::run_pending_shown;

#[derive(Args, Debug)]
#[command(
    after_help = "The rule and its error rates are in docs/methodology.md; the command in docs/bisect.md."
)]
pub struct BisectArgs {
    /// The experiment file: one configuration, or name one with --config (its `app` inside
    /// the repository).
    #[arg(required_unless_present = "resume")]
    pub experiment: Option<PathBuf>,
    /// A commit without the slowdown (a branch, a tag, a hash).
    #[arg(long, required_unless_present = "resume")]
    pub good: Option<String>,
    /// A commit with it.
    #[arg(long, required_unless_present = "resume")]
    pub bad: Option<String>,
    #[command(flatten)]
    pub source: CommitSource,
    /// The configuration whose history is searched, by label, when the file has several.
    #[arg(long)]
    pub config: Option<String>,
    /// The metric to search on. Without it, the ends are measured on every speed metric
    /// of the workload and the search uses the one whose regression stands out most from
    /// its per-block spread.
    #[arg(long, value_parser = parse_metric, conflicts_with = "resume")]
    pub metric: Option<PrecisionMetric>,
    /// The smallest change the search accounts for (default 2%): the ends below it are
    /// "nothing to find", and the history beside a commit found is checked for a change
    /// this large (searched if it shows one, said if it cannot be ruled out).
    #[arg(long, value_parser = parse_percent, conflicts_with = "resume")]
    pub precision: Option<f64>,
    /// Blocks before the first call on the ends (at least 3).
    #[arg(long, default_value_t = 3, conflicts_with = "resume")]
    pub min_blocks: u32,
    /// The whole search's budget in blocks (default 60); with --resume, a larger budget
    /// goes on past one that ended in a range.
    #[arg(long)]
    pub max_blocks: Option<u32>,
    /// Measure over Slurm as the file's [fleet] says (or its defaults): each look runs one
    /// block per node at once (docs/fleet.md). The bisection's directory must be on storage
    /// every node sees.
    #[arg(long, conflicts_with = "resume")]
    pub slurm: bool,
    /// The bisection's directory (default: results/<name>-bisect-<date>).
    #[arg(long, short = 'o', conflicts_with = "resume")]
    pub output: Option<PathBuf>,
    /// Go on with the bisection in DIR (after Ctrl-C, a kill, or a budget that ended in a
    /// range): every stored block is kept.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["experiment", "good", "bad", "app_repo", "ruby_repo", "config", "output"])]
    pub resume: Option<PathBuf>,
    /// When the search ends, add each commit it measured to this history file (`rubyrace
    /// history add`, docs/history.md): a series of its own, each commit's cost against good.
    #[arg(long, value_name = "FILE")]
    pub history: Option<PathBuf>,
}

pub fn bisect(args: BisectArgs) -> Result<ExitCode> {
    let (dir, mut record) = match &args.resume {
        Some(dir) => match lab::bisect::not_a_bisection(dir) {
            Some(message) => {
                eprintln!("rubyrace bisect: {message}");
                return Ok(ExitCode::from(EXIT_BAD_EXPERIMENT));
            }
            None => match BisectRecord::read(dir) {
                Ok(record) => (dir.clone(), record),
                Err(e) => {
                    eprintln!("rubyrace bisect: {e:#}");
                    return Ok(ExitCode::from(EXIT_BAD_EXPERIMENT));
                }
            },
        },
        None => match start(&args) {
            Ok(started) => started,
            Err(message) => {
                eprintln!("{message}");
                return Ok(ExitCode::from(EXIT_BAD_EXPERIMENT));
            }
        },
    };
    let dir = std::path::absolute(&dir).context("the bisection's directory")?;
    if let (Some(_), Some(max)) = (&args.resume, args.max_blocks) {
        match lab::bisect::set_budget(&mut record, max) {
            Ok(Some(line)) => eprintln!("rubyrace: {line}"),
            Ok(None) => {}
            Err(message) => {
                eprintln!("rubyrace bisect: {message}");
                return Ok(ExitCode::from(EXIT_BAD_EXPERIMENT));
            }
        }
    }
    let (mut experiment, config) =
        match searched(&record.experiment, Some(&record.config), NO_PRECISION) {
            Ok(found) => found,
            Err(message) => {
                eprintln!("{message}");
                return Ok(ExitCode::from(EXIT_BAD_EXPERIMENT));
            }
        };
    // The rounds are fleet runs only in a search started with --slurm.
    experiment.fleet = match (record.slurm, experiment.fleet.take()) {
        (true, fleet) => Some(fleet.unwrap_or_default()),
        (false, _) => None,
    };
    if let Some(fleet) = &experiment.fleet {
        if let Err(e) = super::fleet::check_cluster(fleet, false) {
            eprintln!("rubyrace bisect: {e:#}");
            return Ok(ExitCode::from(EXIT_BAD_EXPERIMENT));
        }
    }
    let resume_hint = format!("rubyrace bisect --resume {}", dir.display());
    let interrupt = install_run_interrupt(&resume_hint)?;
    eprintln!(
        "rubyrace: bisecting {} commits of {} ({} .. {}) on {}; up to {} blocks of the ends and {}; the search goes to {}",
        record.commits.len(),
        record.repo.display(),
        record.good_ref,
        record.bad_ref,
        metric_words(&record),
        record.max_blocks,
        units::count(record.candidates, "candidate"),
        dir.display()
    );
    let started = std::time::Instant::now();
    let here = OnThisMachine {
        interrupt: &interrupt,
    };
    let fleet = match &experiment.fleet {
        Some(fleet) => Some(OnTheFleet {
            here: &here,
            nodes: fleet.nodes,
            binary: std::env::current_exe()
                .and_then(std::fs::canonicalize)
                .context("cannot find the rubyrace binary, which every node runs")?,
        }),
        None => None,
    };
    let measuring: &dyn Measuring = match &fleet {
        Some(fleet) => fleet,
        None => &here,
    };
    let search = Searcher::new(&dir, &experiment, &config, measuring);
    match search.run(&mut record) {
        Ok(()) => {}
        Err(Stopped::Interrupted) => {
            eprintln!("\nInterrupted: every stored block is kept. Go on with:\n  {resume_hint}");
            return Ok(ExitCode::from(EXIT_INTERRUPTED));
        }
        Err(Stopped::Failed(e)) => {
            eprintln!(
                "rubyrace: the bisection stopped: {e:#}\nEvery stored block is kept. Go on with:\n  {resume_hint}"
            );
            return Ok(ExitCode::from(EXIT_TRIALS_FAILED));
        }
    }
    let text = report::bisect::markdown(&record, Some(started.elapsed()));
    crate::output::write_stdout(&text)?;
    crate::output::write_file(&dir.join("bisect.md"), text.as_bytes())?;
    let html = report::render::html::bisect::page(&record);
    crate::output::write_file(&dir.join("bisect.html"), html.as_bytes())?;
    eprintln!(
        "rubyrace: the search's record is {}; its report {}",
        dir.join(BISECT_FILE).display(),
        dir.join("bisect.html").display()
    );
    if let Some(file) = &args.history {
        super::history::add_after(&dir, file);
    }
    Ok(ExitCode::from(
        if record
            .outcome
            .as_ref()
            .is_some_and(BisectOutcome::cannot_tell)
        {
            EXIT_INCONCLUSIVE
        } else {
            0
        },
    ))
}

/// "throughput (given)", "cpu_per_request (chosen: …)", or "throughput until the ends
/// show which metric to search on".
fn metric_words(record: &BisectRecord) -> String {
    if record.metric_given {
        format!("{} (given)", record.metric.name())
    } else if record.metric_chosen {
        format!(
            "{} (chosen: the least noisy that shows the regression)",
            record.metric.name()
        )
    } else {
        format!(
            "{} until the ends show which metric to search on",
            record.metric.name()
        )
    }
}

/// A search's rounds run here, their progress on the terminal; its Rubies built here.
struct OnThisMachine<'a> {
    interrupt: &'a Arc<AtomicBool>,
}

impl Measuring for OnThisMachine<'_> {
    fn run_round(&self, store: &mut Store, kind: results::store::SessionKind) -> Result<RunEnd> {
        run_pending_shown(store, kind, false, self.interrupt, false)
    }

    fn ruby_at(
        &self,
        repo: &Path,
        commit: &str,
        configure_opts: &[String],
    ) -> Result<experiment::RubyCommit> {
        super::ruby::ruby_commit(repo, commit, commit, configure_opts)
    }

    fn note(&self, line: &str) {
        eprintln!("rubyrace: {line}");
    }
}

/// A search's rounds run over Slurm (`bisect --slurm`), one block per node at once; the
/// rest as on this machine.
struct OnTheFleet<'a> {
    here: &'a OnThisMachine<'a>,
    nodes: u32,
    binary: PathBuf,
}

impl Measuring for OnTheFleet<'_> {
    fn run_round(&self, store: &mut Store, kind: results::store::SessionKind) -> Result<RunEnd> {
        let end = fleet::controller::run_fleet(
            store,
            &fleet::controller::Options {
                kind,
                command: &crate::invocation::command_line(),
                detach: false,
                binary: self.binary.clone(),
            },
            self.here.interrupt,
            &mut |line| eprintln!("rubyrace: {line}"),
        )?;
        match end {
            FleetEnd::Complete => Ok(RunEnd::Complete),
            FleetEnd::Interrupted => Ok(RunEnd::Interrupted),
            FleetEnd::Missing(missing) => anyhow::bail!(
                "{} missing after every retry: {}",
                units::count(missing.len(), "block"),
                missing
                    .iter()
                    .map(|(block, why)| format!("block {}: {why}", block + 1))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            FleetEnd::Detached => unreachable!("a search's rounds are never detached"),
        }
    }

    fn ruby_at(
        &self,
        repo: &Path,
        commit: &str,
        configure_opts: &[String],
    ) -> Result<experiment::RubyCommit> {
        self.here.ruby_at(repo, commit, configure_opts)
    }

    fn note(&self, line: &str) {
        self.here.note(line);
    }

    fn blocks_at_once(&self) -> u32 {
        self.nodes.max(1)
    }
}

/// A new bisection: its experiment read, the cluster reached (with --slurm), its
/// directory chosen; the history and the record are `lab::bisect::Begin`'s.
fn start(args: &BisectArgs) -> Result<(PathBuf, BisectRecord), String> {
    let file = args.experiment.clone().expect("clap requires it");
    let (experiment, config) = searched(&file, args.config.as_deref(), NO_PRECISION)?;
    let (repo, history_of) = match (&args.source.app_repo, &args.source.ruby_repo) {
        (Some(app), _) => (app.clone(), HistoryOf::App),
        (None, Some(ruby)) => (ruby.clone(), HistoryOf::Ruby),
        (None, None) => unreachable!("clap requires one"),
    };
    if args.slurm {
        // Slurm reached and the partition there before anything is made.
        super::fleet::check_cluster(&experiment.fleet.clone().unwrap_or_default(), false)
            .map_err(|e| format!("rubyrace bisect: {e:#}"))?;
    }
    let begin = lab::bisect::Begin {
        experiment_file: &file,
        config: &config,
        repo: &repo,
        history_of,
        configure_opts: args.source.configure_opts.clone(),
        good: args.good.as_deref().expect("clap requires it"),
        bad: args.bad.as_deref().expect("clap requires it"),
        metric: args.metric,
        min_blocks: args.min_blocks,
        max_blocks: args.max_blocks,
        min_change: args.precision,
        slurm: args.slurm,
    };
    if let (_, _, Some(line)) = begin.blocks() {
        eprintln!("rubyrace: {line}");
    }
    // The directory is made once the history is known to be there.
    begin.write(|| match &args.output {
        Some(dir) => Ok(dir.clone()),
        None => {
            crate::results_dir::default_output_made(&format!("{}-bisect", experiment.name), false)
        }
    })
}

/// Why a bisection's file cannot have `precision`.
const NO_PRECISION: &str =
    "bisect decides when it stops by its own rule; remove `precision` (--precision gives the smallest change it accounts for)";

/// The experiment and the configuration whose history is searched (or, for `check`,
/// gated): its only one, or the one labelled `label`. A file with `precision` is refused
/// with `no_precision`, why the command does not take it.
pub(super) fn searched(
    file: &Path,
    label: Option<&str>,
    no_precision: &str,
) -> Result<(Experiment, Config), String> {
    let experiment = Experiment::load_building(file, &super::ruby::experiment_ruby)
        .map_err(|e| e.to_string())?;
    if experiment.precision.is_some() {
        return Err(format!("{}: {no_precision}", file.display()));
    }
    let labels = || {
        experiment
            .configs
            .iter()
            .map(|c| c.label.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let config = match label {
        Some(label) => experiment
            .configs
            .iter()
            .find(|c| c.label == label)
            .cloned()
            .ok_or_else(|| {
                format!(
                    "{}: no configuration {label:?}; its configurations: {}",
                    file.display(),
                    labels()
                )
            })?,
        None if experiment.configs.len() == 1 => experiment.configs[0].clone(),
        None => {
            return Err(format!(
                "{}: {} configurations; name the one to measure with --config (one of {})",
                file.display(),
                experiment.configs.len(),
                labels()
            ))
        }
    };
    if config.settings.app_commit.is_some() {
        return Err(format!(
            "{}: the configuration {:?} names a `ref`; the commits are chosen on the command line",
            file.display(),
            config.label
        ));
    }
    Ok((experiment, config))
}
