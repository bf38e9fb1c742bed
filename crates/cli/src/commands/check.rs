//! `rubyrace check`: a CI gate on a change. The experiment file's one configuration (or
//! `--config LABEL`) runs at two commits of the app's repository, base and head (or the
//! working tree as head, `--head WORKTREE`), interleaved in the same blocks, until the
//! gate's rule (`experiment::gate`) decides whether the head is slower than allowed: exit 0
//! (pass), 1 (fail) or 4 (inconclusive at the budget; `--inconclusive` can make it pass or
//! fail). 1 means only "slower than allowed": bad input exits 2 (checked before anything is
//! measured), a gate that could not decide (a side that does not boot, an error) 3, Ctrl-C
//! 130. A Markdown summary (the verdict, every metric's comparison, the environment) goes
//! to stdout and, with `--summary FILE`, is appended to FILE (GitHub's
//! `$GITHUB_STEP_SUMMARY`). `check --resume DIR` goes on after an interruption with the
//! same gate, exit statuses and summary file.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use experiment::gate::{GateEnd, GateRule, GateTarget, GateVerdict};
use experiment::precision::PrecisionMetric;
use experiment::schedule::schedule;
use experiment::{AppCommit, Config, Experiment, Workload};
use lab::runner::RunEnd;
use results::store::Store;

use crate::invocation::{
    install_run_interrupt, parse_metric, parse_percent, CommitSource, EXIT_BAD_EXPERIMENT,
    EXIT_INCONCLUSIVE, EXIT_INTERRUPTED, EXIT_TRIALS_FAILED,
};
use crate::progress::run_pending_shown;

/// The `--head` that means the working tree as it is now, uncommitted changes included.
pub const WORKTREE: &str = "WORKTREE";

/// The meta key of the options a resume keeps (`--summary`, `--inconclusive`).
const OPTIONS_META: &str = "check_options";

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Inconclusive {
    Pass,
    Fail,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Exit statuses: 0 pass, 1 slower than allowed, 4 inconclusive, 2 bad input, \
3 the gate could not decide (a side does not boot, an error), 130 Ctrl-C. The gate's rule and \
its error rates are in docs/methodology.md; the command and a GitHub Actions workflow in \
docs/check.md."
)]
pub struct CheckArgs {
    /// The experiment file: one configuration, or name one with --config (its `app` inside
    /// the repository).
    #[arg(required_unless_present = "resume")]
    pub experiment: Option<PathBuf>,
    #[command(flatten)]
    pub source: CommitSource,
    /// The configuration to gate, by label, when the file has several.
    #[arg(long)]
    pub config: Option<String>,
    /// The commit to compare against (a branch, a tag, a hash).
    #[arg(long, required_unless_present = "resume")]
    pub base: Option<String>,
    /// The commit under test [default: HEAD]; WORKTREE: the working tree as it is now,
    /// uncommitted changes and untracked files included (what `git add -A` would commit).
    #[arg(long)]
    pub head: Option<String>,
    /// The slowdown allowed, e.g. 3%.
    #[arg(long, default_value = "3%", value_parser = parse_percent)]
    pub max_slowdown: f64,
    /// The metric the gate decides on.
    #[arg(long, default_value = "throughput", value_parser = parse_metric)]
    pub metric: PrecisionMetric,
    /// Blocks before the first look (at least 3).
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
    /// The results directory [default: results/NAME-check-DATE; a `results` directory
    /// rubyrace makes holds a .gitignore, so git leaves it out].
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
    /// Go on with the check in DIR after Ctrl-C or an error: the same gate and commits;
    /// its --summary and --inconclusive unless given again.
    #[arg(long, value_name = "DIR", conflicts_with_all = [
        "experiment", "app_repo", "ruby_repo", "configure_opts", "config", "base", "head",
        "output"
    ])]
    pub resume: Option<PathBuf>,
    /// When the gate decides, add the check to this history file (`rubyrace history add`,
    /// docs/history.md): its head against its base, at the head's commit.
    #[arg(long, value_name = "FILE")]
    pub history: Option<PathBuf>,
}

/// What a check keeps for its resume: the options that shape how it ends, not what it
/// measures (that is the stored gate and configurations).
#[derive(Clone, Debug, Default)]
struct CheckOptions {
    summary: Option<PathBuf>,
    inconclusive: Option<Inconclusive>,
}

impl CheckOptions {
    /// As stored (`check_options` in the meta, docs/results.md).
    fn to_json(&self) -> String {
        serde_json::json!({
            "summary": self.summary,
            "inconclusive": self.inconclusive.map(|i| match i {
                Inconclusive::Pass => "pass",
                Inconclusive::Fail => "fail",
            }),
        })
        .to_string()
    }

    fn from_json(json: &str) -> CheckOptions {
        let value: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
        CheckOptions {
            summary: value["summary"].as_str().map(PathBuf::from),
            inconclusive: match value["inconclusive"].as_str() {
                Some("pass") => Some(Inconclusive::Pass),
                Some("fail") => Some(Inconclusive::Fail),
                _ => None,
            },
        }
    }
}

/// Why the check ends before its gate runs: the message, and the exit status.
struct Refused(String, u8);

impl From<String> for Refused {
    fn from(message: String) -> Self {
        Refused(message, EXIT_BAD_EXPERIMENT)
    }
}

impl From<sys::git::GitError> for Refused {
    fn from(e: sys::git::GitError) -> Self {
        Refused::from(e.to_string())
    }
}

pub fn check(args: CheckArgs) -> Result<ExitCode> {
    // Anything that goes wrong is 2 (bad input) or 3, never 1: 1 says "slower than
    // allowed", and a CI job must not fail a pull request for a tool error as if for a
    // slowdown.
    match checked(&args) {
        Ok(code) => Ok(code),
        Err(Refused(message, code)) => {
            eprintln!("rubyrace check: {message}");
            Ok(ExitCode::from(code))
        }
    }
}

fn checked(args: &CheckArgs) -> Result<ExitCode, Refused> {
    let tool = |e: anyhow::Error| Refused(format!("{e:#}"), EXIT_TRIALS_FAILED);
    let (store, options, kind) = match &args.resume {
        Some(dir) => {
            let (store, stored) = resumed(dir)?;
            let options = CheckOptions {
                summary: args.summary.clone().or(stored.summary),
                inconclusive: args.inconclusive.or(stored.inconclusive),
            };
            writable_summary(options.summary.as_deref())?;
            (store, options, results::store::SessionKind::Resume)
        }
        None => {
            let options = CheckOptions {
                summary: args.summary.clone(),
                inconclusive: args.inconclusive,
            };
            // Every path is checked before anything is measured.
            writable_summary(options.summary.as_deref())?;
            let experiment = gate_experiment(args)?;
            let dir = match &args.output {
                Some(dir) => dir.clone(),
                None => crate::results_dir::default_output_made(
                    &format!("{}-check", experiment.name),
                    false,
                )
                .map_err(|e| Refused(e, EXIT_BAD_EXPERIMENT))?,
            };
            fresh_output(&dir)?;
            let plan = schedule(
                experiment.configs.len(),
                experiment.batches,
                experiment.order,
                experiment.seed,
            );
            let store = Store::create(&dir, &experiment, &plan, false)
                .map_err(|e| Refused(format!("{e:#}"), EXIT_BAD_EXPERIMENT))?;
            store
                .record_meta(OPTIONS_META, &options.to_json())
                .map_err(tool)?;
            (store, options, results::store::SessionKind::Start)
        }
    };
    gate(store, kind, &options, args.history.as_deref()).map_err(tool)
}

/// The check in `dir`, for `--resume`, with the options it was started with. Anything
/// else (a run, a bisection, no results) is named, exit 2.
fn resumed(dir: &Path) -> Result<(Store, CheckOptions), Refused> {
    if dir.join(results::bisect::BISECT_FILE).exists() {
        return Err(format!(
            "{} holds a bisection, not a check: go on with `rubyrace bisect --resume {}`",
            dir.display(),
            dir.display()
        )
        .into());
    }
    if !dir.join(results::store::DB_FILE).is_file() {
        return Err(format!(
            "{} holds no results (no {}): it is not a check's results directory",
            dir.display(),
            results::store::DB_FILE
        )
        .into());
    }
    let store = Store::open(dir).map_err(|e| Refused(format!("{e:#}"), EXIT_BAD_EXPERIMENT))?;
    let is_check = store.gate().map_err(|e| e.to_string())?.is_some();
    if !is_check {
        return Err(format!(
            "{} holds a run, not a check: go on with `rubyrace run --resume {}`",
            dir.display(),
            dir.display()
        )
        .into());
    }
    let options = store
        .meta(OPTIONS_META)
        .map_err(|e| e.to_string())?
        .map(|json| CheckOptions::from_json(&json))
        .unwrap_or_default();
    Ok((store, options))
}

/// `run --resume DIR` of a check's directory: goes on as `check --resume DIR` does, with
/// the check's exit statuses and summary file (a run's would exit 0 on a failed gate).
pub fn resume_from_run(dir: &Path) -> Result<ExitCode> {
    eprintln!(
        "rubyrace: {} holds a check: going on as `rubyrace check --resume {}`",
        dir.display(),
        dir.display()
    );
    check(CheckArgs {
        experiment: None,
        source: CommitSource::default(),
        config: None,
        base: None,
        head: None,
        max_slowdown: 0.03,
        metric: PrecisionMetric::Throughput,
        min_blocks: 6,
        max_blocks: 60,
        inconclusive: None,
        summary: None,
        output: None,
        resume: Some(dir.to_path_buf()),
        history: None,
    })
}

/// The summary file can be appended to: opened (and made, empty, if it was not there)
/// before anything is measured, so a path in a missing directory is said now, not after
/// the whole run.
fn writable_summary(file: Option<&Path>) -> Result<(), Refused> {
    let Some(file) = file else { return Ok(()) };
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .map(drop)
        .map_err(|e| {
            format!(
                "--summary {}: cannot append to it: {e}{}",
                file.display(),
                match file.parent() {
                    Some(p) if !p.as_os_str().is_empty() && !p.is_dir() =>
                        format!(" (the directory {} does not exist)", p.display()),
                    _ => String::new(),
                }
            )
            .into()
        })
}

/// `-o DIR` for a new check: a directory that holds results already is refused (a check
/// interrupted there goes on with `--resume`), as is a path that is not a directory.
fn fresh_output(dir: &Path) -> Result<(), Refused> {
    if dir.exists() && !dir.is_dir() {
        return Err(format!("-o {}: not a directory", dir.display()).into());
    }
    if dir.join(results::store::DB_FILE).is_file() {
        let stored = Store::open_read_only(dir)
            .ok()
            .and_then(|s| s.completed().ok())
            .map(|c| c.len())
            .unwrap_or(0);
        if stored > 0 {
            return Err(format!(
                "-o {}: holds results already ({stored} trials); go on with `rubyrace check --resume {}`, or choose another -o",
                dir.display(),
                dir.display()
            )
            .into());
        }
    }
    Ok(())
}

/// The experiment with its one configuration at base and at head, and the gate. Every
/// error is the user's input (exit 2): the file, a ref, base equal to head.
fn gate_experiment(args: &CheckArgs) -> Result<Experiment, Refused> {
    let file = args.experiment.as_ref().expect("clap requires it");
    let (mut experiment, one) = super::bisect::searched(
        file,
        args.config.as_deref(),
        "check decides when to stop by its own rule; remove `precision`",
    )?;
    if one.settings.ruby_commit.is_some() {
        return Err(format!(
            "{}: the configuration names a commit (`ruby_ref`); check chooses them (--base, --head)",
            file.display(),
        )
        .into());
    }
    let http = one.settings.workload == Workload::Http;
    let base = args.base.clone().expect("clap requires it");
    let head = head_ref(args)?;
    let at = |id: usize, label: &str, git_ref: &str| -> Result<Config, String> {
        let mut settings = one.settings.clone();
        // WORKTREE is named as such in the summary; the commit is its snapshot.
        let (shown, rev) = match git_ref.split_once('=') {
            Some((shown, rev)) if shown == WORKTREE => (shown, rev),
            _ => (git_ref, git_ref),
        };
        match (&args.source.app_repo, &args.source.ruby_repo) {
            (Some(repo), _) => {
                let (app_dir, mut commit) =
                    AppCommit::resolve(repo, rev, &one.settings.app_dir, http)
                        .map_err(|e| format!("--{label} {shown}: {}", e.message))?;
                commit.git_ref = shown.to_string();
                settings.app_dir = app_dir;
                settings.app_commit = Some(commit);
            }
            (None, Some(repo)) => {
                let top = sys::git::toplevel(repo).map_err(|e| e.to_string())?;
                let commit = sys::git::commit_of(&top, rev)
                    .map_err(|e| format!("--{label} {shown}: {e}"))?;
                let ruby =
                    super::ruby::ruby_commit(&top, shown, &commit, &args.source.configure_opts)
                        .map_err(|e| format!("--{label} {shown}: does not build: {e:#}"))?;
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
    let configs = vec![at(0, "base", &base)?, at(1, "head", &head)?];
    let commit = |c: &Config| c.settings.named_commit().map(|(_, _, h)| h.to_string());
    if commit(&configs[0]) == commit(&configs[1]) {
        return Err(format!(
            "--base {base} and --head {} are the same commit ({}): there is nothing to compare",
            head.split_once('=').map_or(head.as_str(), |(w, _)| w),
            commit(&configs[0])
                .map(|h| h[..12].to_string())
                .unwrap_or_default()
        )
        .into());
    }
    experiment.configs = configs;
    // One configuration is blocks by default; two are interleaved by default, which is
    // what a gate needs: base and head in the same seconds. The file's own `design` wins,
    // and what cannot be interleaved stays in blocks, as `run` would choose.
    if !experiment.design_written {
        experiment.design = experiment.default_design(&experiment.configs);
    }
    let min_blocks = args.min_blocks.max(3);
    if args.min_blocks < 3 || args.max_blocks < min_blocks {
        eprintln!(
            "rubyrace: the gate looks at {min_blocks} to {} blocks (an interval needs at least 3; the budget is at least the first look), not --min-blocks {} --max-blocks {}",
            args.max_blocks.max(min_blocks),
            args.min_blocks,
            args.max_blocks
        );
    }
    let rule = GateRule {
        max_slowdown: args.max_slowdown,
        min_blocks,
        max_blocks: args.max_blocks.max(min_blocks),
    };
    experiment.batches = rule.min_blocks;
    experiment.gate = Some(GateTarget {
        rule,
        metric: args.metric,
    });
    Ok(experiment)
}

/// The head as a revision: `--head` as given, HEAD by default (saying so when the working
/// tree has changes the commit does not hold), or for WORKTREE `WORKTREE=<snapshot>`, a
/// commit of the working tree made without touching it.
fn head_ref(args: &CheckArgs) -> Result<String, Refused> {
    let repo = args
        .source
        .app_repo
        .as_ref()
        .or(args.source.ruby_repo.as_ref())
        .expect("clap requires one");
    let top = sys::git::toplevel(repo)?;
    match args.head.as_deref() {
        Some(WORKTREE) => {
            let changes = sys::git::uncommitted_changes(&top)?;
            let index = std::env::temp_dir()
                .join(format!("rubyrace-worktree-index-{}", std::process::id()));
            let snapshot = sys::git::snapshot_worktree(&top, &index)?;
            eprintln!(
                "rubyrace: head = the working tree of {} ({}), as commit {} on top of HEAD",
                top.display(),
                if changes.is_empty() {
                    "no uncommitted changes: the same files as HEAD".to_string()
                } else {
                    format!(
                        "{} uncommitted: {}",
                        count_files(changes.len()),
                        listed(&changes)
                    )
                },
                &snapshot[..12]
            );
            Ok(format!("{WORKTREE}={snapshot}"))
        }
        Some(head) => Ok(head.to_string()),
        None => {
            if let Ok(changes) = sys::git::uncommitted_changes(&top) {
                if !changes.is_empty() {
                    let head = sys::git::commit_of(&top, "HEAD").unwrap_or_default();
                    eprintln!(
                        "rubyrace: the working tree has uncommitted changes ({}: {}); head is the commit HEAD ({}), which does not hold them. To measure them, give --head {WORKTREE}",
                        count_files(changes.len()),
                        listed(&changes),
                        &head[..12.min(head.len())]
                    );
                }
            }
            Ok("HEAD".into())
        }
    }
}

fn count_files(n: usize) -> String {
    if n == 1 {
        "1 file".into()
    } else {
        format!("{n} files")
    }
}

/// The first few paths, and how many more.
fn listed(paths: &[String]) -> String {
    let mut shown = paths.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
    if paths.len() > 5 {
        shown.push_str(&format!(" and {} more", paths.len() - 5));
    }
    shown
}

/// Runs the gate in `store` to its end (or the next stop), prints the summary and appends
/// it to the summary file; the exit status.
fn gate(
    mut store: Store,
    kind: results::store::SessionKind,
    options: &CheckOptions,
    history: Option<&Path>,
) -> Result<ExitCode> {
    let dir = store.dir().to_path_buf();
    let resume = format!("rubyrace check --resume {}", dir.display());
    for c in store.configs()? {
        if let Some((_, git_ref, commit)) = c.settings.named_commit() {
            eprintln!(
                "rubyrace: {} = {git_ref} ({})",
                c.label,
                &commit[..12.min(commit.len())]
            );
        }
    }
    let interrupt = install_run_interrupt(&resume)?;
    eprintln!("rubyrace: results go to {}", dir.display());
    let end = run_pending_shown(&mut store, kind, false, &interrupt, false);
    let end = match end {
        Ok(RunEnd::Complete) => match store.gate_end()? {
            Some(end) => end,
            None => anyhow::bail!("the run ended without a gate decision"),
        },
        Ok(RunEnd::Interrupted) => {
            eprintln!("\nInterrupted: the gate is not decided. Go on with:\n  {resume}");
            return Ok(ExitCode::from(EXIT_INTERRUPTED));
        }
        Ok(RunEnd::StoppedAfterFailure { .. }) => unreachable!("check never fails fast"),
        Ok(stopped @ RunEnd::CannotBoot { .. }) => {
            let text = cannot_boot_summary(&store, &stopped)?;
            print!("{text}");
            if let Some(file) = &options.summary {
                append(file, &text)?;
            }
            eprintln!(
                "rubyrace: the gate cannot decide: a side does not run (exit 3). Every trial is stored; fix it, then go on with:\n  {resume}"
            );
            return Ok(ExitCode::from(EXIT_TRIALS_FAILED));
        }
        Err(e) => {
            eprintln!(
                "rubyrace: the gate stopped: {e:#}\nEvery finished trial is stored. Go on with:\n  {resume}"
            );
            return Ok(ExitCode::from(EXIT_TRIALS_FAILED));
        }
    };
    let rule = store.gate()?.map(|g| g.rule);
    let configs = store.configs()?;
    // The run is over: its writer's lock goes, so the report reads a finished run.
    drop(store);
    let summary = summary(&dir, &end, rule.as_ref(), &configs)?;
    print!("{summary}");
    if let Some(file) = &options.summary {
        append(file, &summary)?;
    }
    // The HTML report beside the results, for a CI job to upload as it is.
    let html = dir.join("report.html");
    let page = report_of(&dir, report::render::Format::Html)?;
    std::fs::write(&html, page).with_context(|| format!("cannot write {}", html.display()))?;
    eprintln!("rubyrace: the HTML report is {}", html.display());
    if let Some(file) = history {
        super::history::add_after(&dir, file);
    }
    Ok(ExitCode::from(
        match (end.decision.verdict, options.inconclusive) {
            (GateVerdict::Pass, _) | (GateVerdict::Inconclusive, Some(Inconclusive::Pass)) => 0,
            (GateVerdict::Fail, _) | (GateVerdict::Inconclusive, Some(Inconclusive::Fail)) => 1,
            _ => EXIT_INCONCLUSIVE,
        },
    ))
}

/// The table of the two commits, with their subjects.
fn commits_table(configs: &[Config]) -> String {
    let mut out = String::from("| | ref | commit |\n|---|---|---|\n");
    for c in configs {
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
    out
}

/// The summary of a gate that stopped because base or head does not run: which side, and
/// its error line; no verdict.
fn cannot_boot_summary(store: &Store, end: &RunEnd) -> Result<String> {
    let RunEnd::CannotBoot { block, failures } = end else {
        unreachable!("called for CannotBoot")
    };
    let sides: Vec<&str> = failures.iter().map(|(l, _)| l.as_str()).collect();
    let mut out = format!(
        "## rubyrace check: ⚠️ error: the {} {} not run\n\nThe gate stopped after block {block} without a verdict (exit 3): every trial of the {} failed, so no block could compare base with head.\n\n",
        sides.join(" and the "),
        if sides.len() == 1 { "does" } else { "do" },
        sides.join(" and the ")
    );
    for (label, reason) in failures {
        out.push_str(&format!("- **{label}**: `{}`\n", reason.replace('`', "'")));
    }
    out.push('\n');
    out.push_str(&commits_table(&store.configs()?));
    out.push('\n');
    Ok(out)
}

/// The Markdown summary: the verdict and its figures, the commits, then the report of the
/// run (every metric's comparison of head against base, warnings, the environment).
fn summary(
    dir: &Path,
    end: &GateEnd,
    rule: Option<&GateRule>,
    configs: &[Config],
) -> Result<String> {
    let verdict = match end.decision.verdict {
        GateVerdict::Pass => "✅ pass",
        GateVerdict::Fail => "❌ fail",
        GateVerdict::Inconclusive => "❔ inconclusive",
        GateVerdict::Continue => "not decided",
    };
    let mut out = format!("## rubyrace check: {verdict}\n\n{}.\n\n", end.describe());
    let looks = rule
        .map(|r| {
            r.looks()
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    out.push_str(&format!(
        "Allowed: at most {:.2}% slower on {}. The gate looks at {looks} blocks, each interval at {:.2}% \
(Bonferroni over the looks: a false alarm at most 2.5% when the blocks are independent and \
near normal; blocks that drift, step or stall make it more, and the gate then doubles its interval \
or ends inconclusive with the reason: docs/methodology.md, \"The gate under stalls, drift and \
steps\").\n\n",
        100.0 * end.max_slowdown,
        end.metric.name(),
        100.0 * end.decision.confidence
    ));
    out.push_str(&commits_table(configs));
    out.push_str(&format!(
        "\nThe tables below compare head with base on every metric, in the same direction as \
the line above (head/base; for throughput, higher is faster), with the report's 95% intervals: \
narrower than the gate's {:.2}% ones, so a metric can differ there while the gate, which \
allows {:.2}% and looks more than once, says otherwise. They inform; the line above decides.\n\n",
        100.0 * end.decision.confidence,
        100.0 * end.max_slowdown,
    ));
    out.push_str(&report_of(dir, report::render::Format::Markdown)?);
    Ok(out)
}

/// The report of the check's run in `format`: head against base.
fn report_of(dir: &Path, format: report::render::Format) -> Result<String> {
    let options = report::Options {
        baseline: Some("base".into()),
        ..report::Options::default()
    };
    report::build_rendered(&[dir.to_path_buf()], &options, format)
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
