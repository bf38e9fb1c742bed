//! `rubyrace check`: a CI gate on a change. The experiment file's one configuration runs at
//! two commits of the app's repository, base and head, interleaved in the same blocks, until
//! the gate's rule (`experiment::gate`) decides whether the head is slower than allowed:
//! exit 0 (pass), 1 (fail) or 4 (inconclusive at the budget; `--inconclusive` can make it
//! pass or fail). A Markdown summary (the verdict, every metric's comparison, the
//! environment) goes to stdout and, with `--summary FILE`, is appended to FILE (GitHub's
//! `$GITHUB_STEP_SUMMARY` works).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use experiment::gate::{GateRule, GateTarget, GateVerdict};
use experiment::precision::PrecisionMetric;
use experiment::schedule::schedule;
use experiment::{AppCommit, Config, Experiment, Workload};
use lab::runner::RunEnd;
use results::store::Store;

use crate::invocation::{
    install_run_interrupt, parse_metric, parse_percent, EXIT_BAD_EXPERIMENT, EXIT_INCONCLUSIVE,
    EXIT_INTERRUPTED, EXIT_TRIALS_FAILED,
};
use crate::progress::run_pending_shown;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Inconclusive {
    Pass,
    Fail,
}

#[derive(Args, Debug)]
#[command(
    after_help = "The gate's rule and its error rates are in docs/methodology.md; \
the command in docs/check.md."
)]
pub struct CheckArgs {
    /// The experiment file, with one configuration (its `app` inside the repository).
    pub experiment: PathBuf,
    /// The git repository of the app: base and head are its commits, each checked out.
    #[arg(
        long,
        required_unless_present = "ruby_repo",
        conflicts_with = "ruby_repo"
    )]
    pub app_repo: Option<PathBuf>,
    /// A CRuby git repository: base and head are its commits, each built (cached by
    /// commit), and the configuration runs on each.
    #[arg(long)]
    pub ruby_repo: Option<PathBuf>,
    /// With --ruby-repo: one more ./configure argument of both builds (repeatable).
    #[arg(
        long = "configure-opts",
        value_name = "OPT",
        allow_hyphen_values = true,
        requires = "ruby_repo"
    )]
    pub configure_opts: Vec<String>,
    /// The commit to compare against (a branch, a tag, a hash).
    #[arg(long)]
    pub base: String,
    /// The commit under test.
    #[arg(long, default_value = "HEAD")]
    pub head: String,
    /// The slowdown allowed, e.g. 3%.
    #[arg(long, default_value = "3%", value_parser = parse_percent)]
    pub max_slowdown: f64,
    /// The metric the gate decides on.
    #[arg(long, default_value = "throughput", value_parser = parse_metric)]
    pub metric: PrecisionMetric,
    /// Blocks before the first look.
    #[arg(long, default_value_t = 6)]
    pub min_blocks: u32,
    /// The budget: at this many blocks the gate decides, inconclusive if it must.
    #[arg(long, default_value_t = 60)]
    pub max_blocks: u32,
    /// What an inconclusive gate exits with: pass (0) or fail (1); by default 4.
    #[arg(long)]
    pub inconclusive: Option<Inconclusive>,
    /// Append the Markdown summary to this file (e.g. "$GITHUB_STEP_SUMMARY").
    #[arg(long)]
    pub summary: Option<PathBuf>,
    /// The results directory (default: results/<name>-check-<date>).
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
}

/// The experiment with its one configuration at base and at head, and the gate.
fn gate_experiment(args: &CheckArgs) -> Result<Experiment, String> {
    let mut experiment = Experiment::load_building(&args.experiment, &super::ruby::experiment_ruby)
        .map_err(|e| e.to_string())?;
    if experiment.configs.len() != 1 {
        return Err(format!(
            "{}: check runs one configuration at two commits; this file has {}",
            args.experiment.display(),
            experiment.configs.len()
        ));
    }
    if experiment.precision.is_some() {
        return Err(format!(
            "{}: check decides when to stop by its own rule; remove `precision`",
            args.experiment.display()
        ));
    }
    let one = experiment.configs.remove(0);
    let http = one.settings.workload == Workload::Http;
    if one.settings.app_commit.is_some() || one.settings.ruby_commit.is_some() {
        return Err(format!(
            "{}: the configuration names a commit (`ref` or `ruby_ref`); check chooses them (--base, --head)",
            args.experiment.display()
        ));
    }
    let at = |id: usize, label: &str, git_ref: &str| -> Result<Config, String> {
        let mut settings = one.settings.clone();
        match (&args.app_repo, &args.ruby_repo) {
            (Some(repo), _) => {
                let (app_dir, commit) =
                    AppCommit::resolve(repo, git_ref, &one.settings.app_dir, http)
                        .map_err(|e| format!("--{label} {git_ref}: {}", e.message))?;
                settings.app_dir = app_dir;
                settings.app_commit = Some(commit);
            }
            (None, Some(repo)) => {
                let top = sys::git::toplevel(repo)?;
                let commit = sys::git::commit_of(&top, git_ref)
                    .map_err(|e| format!("--{label} {git_ref}: {e}"))?;
                let ruby = super::ruby::ruby_commit(&top, git_ref, &commit, &args.configure_opts)
                    .map_err(|e| format!("--{label} {git_ref}: does not build: {e:#}"))?;
                settings.on_commit_ruby(ruby);
            }
            (None, None) => unreachable!("clap requires one"),
        }
        Ok(Config {
            id,
            label: label.to_string(),
            axes: Default::default(),
            settings,
        })
    };
    experiment.configs = vec![at(0, "base", &args.base)?, at(1, "head", &args.head)?];
    // One configuration is blocks by default; two are interleaved by default, which is
    // what a gate needs: base and head in the same seconds. The file's own `design` wins,
    // and what cannot be interleaved stays in blocks, as `run` would choose.
    if !experiment.design_written {
        experiment.design = experiment.default_design(&experiment.configs);
    }
    let rule = GateRule {
        max_slowdown: args.max_slowdown,
        min_blocks: args.min_blocks.max(3),
        max_blocks: args.max_blocks.max(args.min_blocks.max(3)),
    };
    experiment.batches = rule.min_blocks;
    experiment.gate = Some(GateTarget {
        rule,
        metric: args.metric,
    });
    Ok(experiment)
}

pub fn check(args: CheckArgs) -> Result<ExitCode> {
    let experiment = match gate_experiment(&args) {
        Ok(e) => e,
        Err(message) => {
            eprintln!("{message}");
            return Ok(ExitCode::from(EXIT_BAD_EXPERIMENT));
        }
    };
    let plan = schedule(
        experiment.configs.len(),
        experiment.batches,
        experiment.order,
        experiment.seed,
    );
    let dir = args.output.clone().unwrap_or_else(|| {
        super::run::default_output(&format!("{}-check", experiment.name), false)
    });
    let mut store = Store::create(&dir, &experiment, &plan, false)?;
    let dir = store.dir().to_path_buf();
    for c in &experiment.configs {
        if let Some((_, git_ref, commit)) = c.settings.named_commit() {
            eprintln!(
                "rubyrace: {} = {git_ref} ({})",
                c.label,
                &commit[..12.min(commit.len())]
            );
        }
    }
    let interrupt = install_run_interrupt(&format!("rubyrace run --resume {}", dir.display()))?;
    eprintln!("rubyrace: results go to {}", dir.display());
    let end = run_pending_shown(&mut store, "start", false, &interrupt, false);
    match end {
        Ok(RunEnd::Complete) => {}
        Ok(RunEnd::Interrupted) => {
            eprintln!(
                "\nInterrupted: the gate is not decided. Go on with:\n  rubyrace run --resume {}",
                dir.display()
            );
            return Ok(ExitCode::from(EXIT_INTERRUPTED));
        }
        Ok(RunEnd::StoppedAfterFailure { .. }) => unreachable!("check never fails fast"),
        Err(e) => {
            eprintln!(
                "rubyrace: the gate stopped: {e:#}\nEvery finished trial is stored. Go on with:\n  rubyrace run --resume {}",
                dir.display()
            );
            return Ok(ExitCode::from(EXIT_TRIALS_FAILED));
        }
    }
    let Some(end) = store.gate_end()? else {
        bail!("the run ended without a gate decision");
    };
    // The run is over: its writer's lock goes, so the report reads a finished run.
    drop(store);
    let summary = summary(&dir, &end, &experiment)?;
    print!("{summary}");
    if let Some(file) = &args.summary {
        append(file, &summary)?;
    }
    Ok(ExitCode::from(
        match (end.decision.verdict, args.inconclusive) {
            (GateVerdict::Pass, _) | (GateVerdict::Inconclusive, Some(Inconclusive::Pass)) => 0,
            (GateVerdict::Fail, _) | (GateVerdict::Inconclusive, Some(Inconclusive::Fail)) => 1,
            _ => EXIT_INCONCLUSIVE,
        },
    ))
}

/// The Markdown summary: the verdict and its figures, the commits, then the report of the
/// run (every metric's comparison of head against base, warnings, the environment).
fn summary(dir: &Path, end: &experiment::gate::GateEnd, experiment: &Experiment) -> Result<String> {
    let verdict = match end.decision.verdict {
        GateVerdict::Pass => "✅ pass",
        GateVerdict::Fail => "❌ fail",
        GateVerdict::Inconclusive => "❔ inconclusive",
        GateVerdict::Continue => "not decided",
    };
    let mut out = format!("## rubyrace check: {verdict}\n\n{}.\n\n", end.describe());
    out.push_str(&format!(
        "Allowed slowdown {:.2}% on {}; planned looks at {:?} blocks, each interval at {:.2}% \
(Bonferroni over the looks: a false alarm at most 2.5%).\n\n",
        100.0 * end.max_slowdown,
        end.metric.name(),
        experiment
            .gate
            .as_ref()
            .map(|g| g.rule.looks())
            .unwrap_or_default(),
        100.0 * end.decision.confidence
    ));
    out.push_str("| | ref | commit |\n|---|---|---|\n");
    for c in &experiment.configs {
        if let Some((repo, git_ref, commit)) = c.settings.named_commit() {
            let subject = sys::git::describe_commit(repo, commit)
                .map(|(s, _)| s)
                .unwrap_or_default();
            out.push_str(&format!(
                "| {} | `{git_ref}` | `{}` {} |\n",
                c.label,
                &commit[..12.min(commit.len())],
                subject.replace('|', "\\|")
            ));
        }
    }
    out.push('\n');
    let options = report::Options {
        baseline: Some("base".into()),
        ..report::Options::default()
    };
    out.push_str(&report::build_rendered(
        &[dir.to_path_buf()],
        &options,
        report::render::Format::Markdown,
    )?);
    Ok(out)
}

/// Appends `text` to `file` (created if need be): a CI job's summary file may hold other
/// steps' summaries already.
fn append(file: &Path, text: &str) -> Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .with_context(|| format!("cannot open {}", file.display()))?;
    f.write_all(text.as_bytes())
        .with_context(|| format!("cannot write {}", file.display()))
}
