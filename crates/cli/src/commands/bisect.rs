//! `rubyrace bisect`: which commit of a history made the app slower, found by measuring.
//! The experiment's one configuration (or `--config LABEL`) runs at commits of the app's
//! repository: first good against bad (the ends: is there anything to find?), then each
//! step's candidate interleaved with both ends, blocks added until the rule of
//! `experiment::bisect` decides (bad, good, or cannot tell at this precision). A commit
//! that does not build or boot is skipped and named. Every decision is a results directory
//! of its own under `steps/`; `bisect.json` (`results::bisect`) is the search's record, and
//! `--resume DIR` goes on from it without measuring a finished step again.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use experiment::bisect::{
    BisectAnswer, BisectEnd, BisectRule, BisectStage, BisectTarget, Bisection, EndsVerdict,
};
use experiment::precision::PrecisionMetric;
use experiment::schedule::schedule;
use experiment::{AppCommit, Config, Experiment, Workload};
use lab::runner::RunEnd;
use results::bisect::{
    BisectOutcome, BisectRecord, Change, CommitInfo, HistoryOf, StepRecord, BISECT_FILE,
    BISECT_SCHEMA,
};
use results::store::Store;

use crate::invocation::{
    install_run_interrupt, parse_metric, parse_percent, EXIT_BAD_EXPERIMENT, EXIT_INCONCLUSIVE,
    EXIT_INTERRUPTED, EXIT_TRIALS_FAILED,
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
    /// The git repository of the app: each commit is checked out.
    #[arg(long, required_unless_present_any = ["resume", "ruby_repo"], conflicts_with = "ruby_repo")]
    pub app_repo: Option<PathBuf>,
    /// A CRuby git repository: each commit is built (`rubyrace ruby build --ref`, cached by
    /// its hash) and the configuration runs on it.
    #[arg(long)]
    pub ruby_repo: Option<PathBuf>,
    /// With --ruby-repo: one more ./configure argument of every build (repeatable).
    #[arg(
        long = "configure-opts",
        value_name = "OPT",
        allow_hyphen_values = true,
        requires = "ruby_repo"
    )]
    pub configure_opts: Vec<String>,
    /// The configuration whose history is searched, by label, when the file has several.
    #[arg(long)]
    pub config: Option<String>,
    /// The metric the search decides on.
    #[arg(long, default_value = "throughput", value_parser = parse_metric)]
    pub metric: PrecisionMetric,
    /// Stop a decision once its interval is this narrow (half-width, e.g. 1%) and still
    /// undecided: no regression this large, or cannot tell. Without it, the budget decides.
    #[arg(long, value_parser = parse_percent)]
    pub precision: Option<f64>,
    /// Blocks before a decision's first look.
    #[arg(long, default_value_t = 6)]
    pub min_blocks: u32,
    /// A decision's budget in blocks.
    #[arg(long, default_value_t = 60)]
    pub max_blocks: u32,
    /// The bisection's directory (default: results/<name>-bisect-<date>).
    #[arg(long, short = 'o', conflicts_with = "resume")]
    pub output: Option<PathBuf>,
    /// Go on with the bisection in DIR (after Ctrl-C or a kill): finished steps are kept.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["experiment", "good", "bad", "app_repo", "ruby_repo", "config", "output"])]
    pub resume: Option<PathBuf>,
}

pub fn bisect(args: BisectArgs) -> Result<ExitCode> {
    let (dir, mut record) = match &args.resume {
        Some(dir) => match not_a_bisection(dir) {
            Some(message) => {
                eprintln!("rubyrace bisect: {message}");
                return Ok(ExitCode::from(EXIT_BAD_EXPERIMENT));
            }
            None => (dir.clone(), BisectRecord::read(dir)?),
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
    let (experiment, config) =
        match searched(&record.experiment, Some(&record.config), NO_PRECISION) {
            Ok(found) => found,
            Err(message) => {
                eprintln!("{message}");
                return Ok(ExitCode::from(EXIT_BAD_EXPERIMENT));
            }
        };
    let resume_hint = format!("rubyrace bisect --resume {}", dir.display());
    let interrupt = install_run_interrupt(&resume_hint)?;
    eprintln!(
        "rubyrace: bisecting {} commits of {} ({} .. {}) on {}; the search goes to {}",
        record.commits.len(),
        record.repo.display(),
        record.good_ref,
        record.bad_ref,
        record.metric.name(),
        dir.display()
    );
    let mut rule = BisectRule::new(record.commits.len(), record.min_blocks, record.max_blocks);
    rule.precision = record.precision;
    let started = std::time::Instant::now();
    // The Ruby of each commit of a Ruby's history, once built or found in the cache.
    let rubies = std::cell::RefCell::new(std::collections::BTreeMap::new());
    loop {
        let (mut search, outcome) = replay(&mut record);
        record.outcome = outcome;
        record.write(&dir)?;
        if record.outcome.is_some() {
            break;
        }
        let (commit, ends) = match search.next_step() {
            Some((good, bad, c)) if record.ends().is_some() => (Some(c), Some([good, bad])),
            _ => (None, None),
        };
        let index = match record
            .steps
            .iter()
            .position(|s| s.commit == commit && s.ends == ends && s.end.is_none())
        {
            Some(i) => i,
            None => {
                record.steps.push(StepRecord {
                    commit,
                    ends,
                    dir: step_dir(record.steps.len(), commit, &record.commits),
                    end: None,
                    measuring_s: 0.0,
                });
                record.write(&dir)?;
                record.steps.len() - 1
            }
        };
        let what = match commit {
            None => "the ends: good against bad".to_string(),
            Some(c) => {
                let (good, bad) = record.ends_of(&record.steps[index]);
                format!(
                    "step {}: commit {} of {} ({} .. {}), {}",
                    index,
                    c,
                    record.commits.len() - 1,
                    good,
                    bad,
                    record.short(c)
                )
            }
        };
        eprintln!("rubyrace: {what}; {}", outlook(&record, &search).describe());
        let step = Step {
            dir: &dir,
            record: &record,
            experiment: &experiment,
            config: &config,
            rule: &rule,
            interrupt: &interrupt,
            rubies: &rubies,
        };
        let ran = step.run(&record.steps[index].dir);
        match ran {
            Ok(Decided {
                end,
                measuring_s,
                earlier,
            }) => {
                if earlier {
                    eprintln!("rubyrace: decided before: {}", end.describe());
                }
                record.steps[index].end = Some(end);
                record.steps[index].measuring_s = measuring_s;
            }
            Err(Stopped::Interrupted) => {
                eprintln!(
                    "\nInterrupted: every finished step is kept. Go on with:\n  {resume_hint}"
                );
                return Ok(ExitCode::from(EXIT_INTERRUPTED));
            }
            Err(Stopped::Failed(e)) => {
                eprintln!(
                    "rubyrace: the bisection stopped: {e:#}\nEvery finished step is kept. Go on with:\n  {resume_hint}"
                );
                return Ok(ExitCode::from(EXIT_TRIALS_FAILED));
            }
        }
    }
    let text = summary(&record, started.elapsed());
    crate::output::write_stdout(&text)?;
    crate::output::write_file(&dir.join("bisect.md"), text.as_bytes())?;
    let html = report::render::html::bisect::page(&record);
    crate::output::write_file(&dir.join("bisect.html"), html.as_bytes())?;
    eprintln!(
        "rubyrace: the search's record is {}; its report {}",
        dir.join(BISECT_FILE).display(),
        dir.join("bisect.html").display()
    );
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

/// What `dir` is when it is not a bisection's directory (for `--resume`): a step of one,
/// a check, a run, or nothing rubyrace wrote.
fn not_a_bisection(dir: &Path) -> Option<String> {
    if dir.join(BISECT_FILE).is_file() {
        return None;
    }
    let shown = dir.display();
    if !dir.is_dir() {
        return Some(format!(
            "{shown} does not exist: it is not a bisection's directory"
        ));
    }
    if !dir.join(results::store::DB_FILE).is_file() {
        return Some(format!(
            "{shown} holds no {BISECT_FILE} and no results: it is not a bisection's directory"
        ));
    }
    let store = Store::open_read_only(dir).ok();
    let what = match &store {
        Some(s) if s.bisect().ok().flatten().is_some() => {
            let search = dir.ancestors().nth(2).unwrap_or(dir);
            return Some(format!(
                "{shown} is one step of a bisection: go on with `rubyrace bisect --resume {}`",
                search.display()
            ));
        }
        Some(s) if s.gate().ok().flatten().is_some() => {
            format!("a check: go on with `rubyrace check --resume {shown}`")
        }
        _ => format!("a run: go on with `rubyrace run --resume {shown}`"),
    };
    Some(format!(
        "{shown} is not a bisection's directory; it holds {what}"
    ))
}

/// A new bisection: its history resolved, its directory made, its record written.
fn start(args: &BisectArgs) -> Result<(PathBuf, BisectRecord), String> {
    let file = args.experiment.clone().expect("clap requires it");
    let (experiment, config) = searched(&file, args.config.as_deref(), NO_PRECISION)?;
    let (repo, history_of) = match (&args.app_repo, &args.ruby_repo) {
        (Some(app), _) => (app.clone(), HistoryOf::App),
        (None, Some(ruby)) => (ruby.clone(), HistoryOf::Ruby),
        (None, None) => unreachable!("clap requires one"),
    };
    let (good, bad) = (
        args.good.clone().expect("clap requires it"),
        args.bad.clone().expect("clap requires it"),
    );
    let top = sys::git::toplevel(&repo)?;
    let history = sys::git::first_parent_history(&top, &good, &bad)
        .map_err(|e| format!("--good {good} --bad {bad}: {e}"))?;
    if history.len() < 2 {
        return Err(format!("--good {good} --bad {bad}: nothing between them"));
    }
    // The app must be in the repository (checked on good, as every step will).
    if history_of == HistoryOf::App {
        AppCommit::resolve(
            &top,
            &history[0],
            &config.settings.app_dir,
            config.settings.workload == Workload::Http,
        )
        .map_err(|e| format!("--good {good}: {}", e.message))?;
    }
    let commits = history
        .iter()
        .map(|hash| {
            let (subject, date) = sys::git::describe_commit(&top, hash).unwrap_or_default();
            CommitInfo {
                hash: hash.clone(),
                subject,
                date,
            }
        })
        .collect();
    let dir = match &args.output {
        Some(dir) => dir.clone(),
        None => {
            crate::results_dir::default_output_made(&format!("{}-bisect", experiment.name), false)?
        }
    };
    if dir.join(BISECT_FILE).exists() {
        return Err(format!(
            "{} holds a bisection already: go on with `rubyrace bisect --resume {}`, or choose another -o",
            dir.display(),
            dir.display()
        ));
    }
    if args.min_blocks < 3 || args.max_blocks < args.min_blocks.max(3) {
        eprintln!(
            "rubyrace: each decision looks at {} to {} blocks (an interval needs at least 3; the budget is at least the first look), not --min-blocks {} --max-blocks {}",
            args.min_blocks.max(3),
            args.max_blocks.max(args.min_blocks.max(3)),
            args.min_blocks,
            args.max_blocks
        );
    }
    std::fs::create_dir_all(dir.join("steps"))
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let record = BisectRecord {
        schema: BISECT_SCHEMA.into(),
        experiment: std::path::absolute(&file).map_err(|e| e.to_string())?,
        config: config.label.clone(),
        repo: top,
        history_of,
        configure_opts: args.configure_opts.clone(),
        good_ref: good,
        bad_ref: bad,
        metric: args.metric,
        min_blocks: args.min_blocks.max(3),
        max_blocks: args.max_blocks.max(args.min_blocks.max(3)),
        precision: args.precision,
        commits,
        steps: Vec::new(),
        skipped: Vec::new(),
        outcome: None,
        more_than_one_change: false,
    };
    record.write(&dir).map_err(|e| format!("{e:#}"))?;
    Ok((dir, record))
}

/// Why a bisection's file cannot have `precision`.
const NO_PRECISION: &str =
    "bisect decides when each step stops by its own rule; remove `precision` (or give --precision)";

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

/// The search so far, from the decided steps in order: the ranges left, and the outcome
/// once there is one. Fills in the record's skipped commits and its partial flag.
pub(crate) fn replay(record: &mut BisectRecord) -> (Bisection, Option<BisectOutcome>) {
    let mut search = Bisection::new(record.commits.len());
    record.skipped.clear();
    record.more_than_one_change = false;
    let mut nothing = false;
    for step in &record.steps {
        match (&step.end, step.commit) {
            (Some(BisectEnd::Ends(d)), None) if d.verdict == EndsVerdict::NoRegression => {
                nothing = true;
            }
            (Some(BisectEnd::Step(d)), Some(c)) => {
                record.more_than_one_change |= d.partial;
                search.record(record.ends_of(step), c, d.verdict, d.partial);
            }
            (Some(BisectEnd::Unmeasurable { reason, .. }), Some(c)) => {
                search.skip(c);
                record.skipped.push((c, reason.clone()));
            }
            _ => {}
        }
    }
    if nothing {
        return (search, Some(BisectOutcome::NothingToFind));
    }
    if record.ends().is_none() || search.next_step().is_some() {
        return (search, None);
    }
    let change = |a: &BisectAnswer| match *a {
        BisectAnswer::Commit(c) => Change {
            first: c,
            last: c,
            cannot_tell: false,
        },
        BisectAnswer::Range {
            first,
            last,
            cannot_tell,
        } => Change {
            first,
            last,
            cannot_tell,
        },
    };
    let answers = search.answers();
    let outcome = match answers.as_slice() {
        [BisectAnswer::Commit(commit)] => BisectOutcome::Commit { commit: *commit },
        [one] => {
            let c = change(one);
            BisectOutcome::Range {
                first: c.first,
                last: c.last,
                cannot_tell: c.cannot_tell,
            }
        }
        several => BisectOutcome::Changes {
            changes: several.iter().map(change).collect(),
        },
    };
    (search, Some(outcome))
}

/// What is left of a search: the steps still to come (the one running included), about
/// ⌈log₂(n + 1)⌉ for each range still searched with n commits left to test in it (a split
/// adds a range, a skipped commit a step), and the measuring time per step so far.
pub(crate) struct Outlook {
    /// The ends are not decided yet (the steps come after them).
    pub ends_pending: bool,
    pub steps_left: usize,
    /// Commits still to test, over every range left.
    pub commits_left: usize,
    /// Blocks and seconds of measuring per decision so far (the ends and measured steps).
    pub per_step: Option<(f64, f64)>,
}

pub(crate) fn outlook(record: &BisectRecord, search: &Bisection) -> Outlook {
    let mut steps_left = 0;
    let mut commits_left = 0;
    for &(good, bad) in &search.open {
        let n = (good + 1..bad)
            .filter(|c| !search.skipped.contains(c))
            .count();
        commits_left += n;
        steps_left += ((n + 1) as f64).log2().ceil() as usize;
    }
    let measured: Vec<(u32, f64)> = record
        .steps
        .iter()
        .filter_map(|s| match &s.end {
            Some(end @ (BisectEnd::Ends(_) | BisectEnd::Step(_))) => {
                Some((end.blocks(), s.measuring_s))
            }
            _ => None,
        })
        .collect();
    let per_step = (!measured.is_empty()).then(|| {
        let n = measured.len() as f64;
        (
            measured.iter().map(|m| f64::from(m.0)).sum::<f64>() / n,
            measured.iter().map(|m| m.1).sum::<f64>() / n,
        )
    });
    Outlook {
        ends_pending: record.ends().is_none(),
        steps_left,
        commits_left,
        per_step,
    }
}

impl Outlook {
    /// "about 4 steps left, this one included (13 commits left to test: ⌈log₂ n⌉ steps for
    /// n); ~6m at 9 blocks and 1m30s of measuring per decision so far".
    pub fn describe(&self) -> String {
        let steps = units::count(self.steps_left, "step");
        let mut text = if self.ends_pending {
            format!(
                "then about {steps} ({} to test: about ⌈log₂(n + 1)⌉ steps for n)",
                units::count(self.commits_left, "commit")
            )
        } else {
            format!(
                "about {steps} left, this one included ({} left to test: about ⌈log₂(n + 1)⌉ steps for n)",
                units::count(self.commits_left, "commit")
            )
        };
        if let Some((blocks, seconds)) = self.per_step {
            let decisions = self.steps_left + usize::from(self.ends_pending);
            text.push_str(&format!(
                "; ~{} at {blocks:.0} blocks and {} of measuring per decision so far",
                units::span(std::time::Duration::from_secs_f64(
                    seconds * decisions as f64
                )),
                units::span(std::time::Duration::from_secs_f64(seconds))
            ));
        }
        text
    }
}

/// `steps/NN-ends` or `steps/NN-commit-C-HASH12`.
fn step_dir(index: usize, commit: Option<usize>, commits: &[CommitInfo]) -> PathBuf {
    PathBuf::from("steps").join(match commit {
        None => format!("{index:02}-ends"),
        Some(c) => format!("{index:02}-commit-{c}-{}", &commits[c].hash[..12]),
    })
}

/// What one decision needs.
struct Step<'a> {
    dir: &'a Path,
    record: &'a BisectRecord,
    experiment: &'a Experiment,
    config: &'a Config,
    rule: &'a BisectRule,
    interrupt: &'a Arc<AtomicBool>,
    /// The Rubies built (or found in the cache) so far, by commit.
    rubies: &'a std::cell::RefCell<std::collections::BTreeMap<String, experiment::RubyCommit>>,
}

struct Decided {
    end: BisectEnd,
    measuring_s: f64,
    /// Decided by an earlier session (the run said nothing of it this time).
    earlier: bool,
}

enum Stopped {
    Interrupted,
    Failed(anyhow::Error),
}

impl Step<'_> {
    /// Runs the decision in `relative` (under the bisection's directory), or goes on with
    /// it when it was begun: its stored trials are kept, and a decided one is not run.
    fn run(&self, relative: &Path) -> Result<Decided, Stopped> {
        let dir = self.dir.join(relative);
        let mut store = if dir.join(results::store::DB_FILE).is_file() {
            Store::open(&dir).map_err(Stopped::Failed)?
        } else {
            let experiment = match self.experiment_of(relative) {
                Ok(experiment) => experiment,
                Err(NotRun::Unmeasurable(reason)) => {
                    return Ok(Decided {
                        end: BisectEnd::Unmeasurable { reason, blocks: 0 },
                        measuring_s: 0.0,
                        earlier: false,
                    })
                }
                Err(NotRun::Failed(e)) => return Err(Stopped::Failed(e)),
            };
            let plan = schedule(
                experiment.configs.len(),
                experiment.batches,
                experiment.order,
                experiment.seed,
            );
            Store::create(&dir, &experiment, &plan, false).map_err(Stopped::Failed)?
        };
        let earlier = store.bisect_end().map_err(Stopped::Failed)?.is_some();
        if !earlier {
            let kind = if store.completed().map_err(Stopped::Failed)?.is_empty() {
                "start"
            } else {
                "resume"
            };
            let end = run_pending_shown(&mut store, kind, false, self.interrupt, false);
            match end {
                Ok(RunEnd::Complete) => {}
                Ok(RunEnd::Interrupted) => return Err(Stopped::Interrupted),
                Ok(RunEnd::StoppedAfterFailure { .. }) | Ok(RunEnd::CannotBoot { .. }) => {
                    unreachable!("a bisection never fails fast, and its own rule decides on a commit that does not boot")
                }
                Err(e) => return Err(Stopped::Failed(e)),
            }
        }
        let end = store
            .bisect_end()
            .map_err(Stopped::Failed)?
            .ok_or_else(|| Stopped::Failed(anyhow::anyhow!("the step ended without a decision")))?;
        let measuring_s = store
            .trials_wall_time()
            .map_err(Stopped::Failed)?
            .as_secs_f64();
        Ok(Decided {
            end,
            measuring_s,
            earlier,
        })
    }

    /// The experiment of one decision: the configuration at good, bad and (for a step) the
    /// candidate, each from its checkout (or on its Ruby, built), interleaved as `run`
    /// would choose; one block planned, the rest added as the rule asks. A candidate whose
    /// Ruby does not build is unmeasurable; an end's is a failure.
    fn experiment_of(&self, relative: &Path) -> Result<Experiment, NotRun> {
        let record = self.record;
        let step = record
            .steps
            .iter()
            .find(|s| s.dir == relative)
            .expect("a step of the record");
        let commit = step.commit;
        let (good, bad) = record.ends_of(step);
        let mut configs = vec![
            self.config_at(0, "good", good)
                .map_err(|e| NotRun::Failed(e.context("the good end")))?,
            self.config_at(1, "bad", bad)
                .map_err(|e| NotRun::Failed(e.context("the bad end")))?,
        ];
        if let Some(c) = commit {
            configs.push(
                self.config_at(2, "candidate", c)
                    .map_err(|e| NotRun::Unmeasurable(format!("{e:#}")))?,
            );
        }
        let mut experiment = self.experiment.clone();
        experiment.configs = configs;
        if !experiment.design_written {
            experiment.design = experiment.default_design(&experiment.configs);
        }
        experiment.batches = 1;
        experiment.bisect = Some(BisectTarget {
            rule: self.rule.clone(),
            metric: record.metric,
            stage: if commit.is_some() {
                BisectStage::Step
            } else {
                BisectStage::Ends
            },
        });
        Ok(experiment)
    }

    /// The searched configuration at commit `index`: the app from its checkout, or the
    /// configuration on that commit's Ruby.
    fn config_at(&self, id: usize, label: &str, index: usize) -> Result<Config> {
        let record = self.record;
        let hash = &record.commits[index].hash;
        let mut settings = self.config.settings.clone();
        match record.history_of {
            HistoryOf::App => {
                let http = settings.workload == Workload::Http;
                let (app_dir, app_commit) =
                    AppCommit::resolve(&record.repo, hash, &settings.app_dir, http)
                        .map_err(|e| anyhow::anyhow!("commit {}: {}", &hash[..12], e.message))?;
                settings.app_dir = app_dir;
                settings.app_commit = Some(app_commit);
            }
            HistoryOf::Ruby => {
                // Built (or found in the cache, where any later search or `ruby_ref`
                // finds it too) once per search.
                let known = self.rubies.borrow().get(hash).cloned();
                let ruby = match known {
                    Some(ruby) => ruby,
                    None => {
                        let ruby = super::ruby::ruby_commit(
                            &record.repo,
                            hash,
                            hash,
                            &record.configure_opts,
                        )
                        .with_context(|| format!("commit {} does not build", &hash[..12]))?;
                        self.rubies.borrow_mut().insert(hash.clone(), ruby.clone());
                        ruby
                    }
                };
                settings.on_commit_ruby(ruby);
            }
        }
        Ok(Config {
            id,
            label: label.to_string(),
            axes: Default::default(),
            settings,
        })
    }
}

/// Why a decision was not run.
enum NotRun {
    /// The candidate cannot be measured (its Ruby does not build): skipped, with why.
    Unmeasurable(String),
    Failed(anyhow::Error),
}

/// The answer and every step, as Markdown (printed, and written to `bisect.md`).
fn summary(record: &BisectRecord, elapsed: std::time::Duration) -> String {
    report::bisect::markdown(record, Some(elapsed))
}
