//! `rubyrace bisect`: which commit of a history made the app slower, found by measuring.
//! The experiment's one configuration (or `--config LABEL`) runs at commits of the app's
//! repository (or on a CRuby built at each commit): in every block the two ends and up to
//! six candidates side by side, chosen where they most narrow where the change is
//! (`experiment::locate`: a k-section search over one model of every block). A round is a
//! set of commits measured together, block after block, while the search asks for that
//! set; each is a results directory under `rounds/`. The metric is the least noisy one
//! that shows the regression, unless `--metric` names one. A commit that does not build
//! or boot is skipped and named. `bisect.json` (`results::bisect`) is the search's record,
//! rewritten after every block; `--resume DIR` rebuilds the search from every stored block
//! and goes on (with a larger `--max-blocks`, past a budget that ended in a range).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use experiment::locate::{self, LocateRule, Next, Search};
use experiment::precision::PrecisionMetric;
use experiment::schedule::{one_block, schedule};
use experiment::{AppCommit, Config, Experiment, Workload};
use lab::runner::RunEnd;
use results::bisect::{
    BisectOutcome, BisectRecord, Change, CommitEstimate, CommitInfo, Finding, HistoryOf,
    MetricEnds, RoundMeta, RoundRecord, Searching, Settle, BISECT_FILE, BISECT_SCHEMA, ROUNDS_DIR,
    ROUND_META,
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
    /// The bisection's directory (default: results/<name>-bisect-<date>).
    #[arg(long, short = 'o', conflicts_with = "resume")]
    pub output: Option<PathBuf>,
    /// Go on with the bisection in DIR (after Ctrl-C, a kill, or a budget that ended in a
    /// range): every stored block is kept.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["experiment", "good", "bad", "app_repo", "ruby_repo", "config", "output"])]
    pub resume: Option<PathBuf>,
}

/// The default budget of a search, in blocks.
const DEFAULT_MAX_BLOCKS: u32 = 60;

/// The smallest change a search accounts for, by default.
const DEFAULT_MIN_CHANGE: f64 = 0.02;

/// What a server is taken to hold before one was measured (PSS), to choose how many run
/// side by side.
const PRIOR_SERVER_BYTES: u64 = 250 << 20;

pub fn bisect(args: BisectArgs) -> Result<ExitCode> {
    let (dir, mut record) = match &args.resume {
        Some(dir) => match not_a_bisection(dir) {
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
    if args.resume.is_some() {
        if let Some(max) = args.max_blocks {
            if max < record.blocks() {
                eprintln!(
                    "rubyrace bisect: --max-blocks {max} is below the {} blocks stored; give a larger budget to go on",
                    record.blocks()
                );
                return Ok(ExitCode::from(EXIT_BAD_EXPERIMENT));
            }
            if max != record.max_blocks {
                eprintln!(
                    "rubyrace: the budget goes from {} to {max} blocks",
                    record.max_blocks
                );
                record.max_blocks = max;
                record.outcome = None;
            }
        }
    }
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
    let search = Searcher {
        dir: &dir,
        experiment: &experiment,
        config: &config,
        interrupt: &interrupt,
        rubies: Default::default(),
    };
    loop {
        let next = match search.look(&mut record) {
            Ok(next) => next,
            Err(e) => {
                eprintln!(
                    "rubyrace: the bisection stopped: {e:#}\nEvery stored block is kept. Go on with:\n  {resume_hint}"
                );
                return Ok(ExitCode::from(EXIT_TRIALS_FAILED));
            }
        };
        record.write(&dir)?;
        let Some(commits) = next else {
            break;
        };
        eprintln!("rubyrace: {}", progress_line(&record, &commits));
        match search.run_block(&mut record, &commits) {
            Ok(()) => {}
            Err(Stopped::Interrupted) => {
                record.write(&dir)?;
                eprintln!(
                    "\nInterrupted: every stored block is kept. Go on with:\n  {resume_hint}"
                );
                return Ok(ExitCode::from(EXIT_INTERRUPTED));
            }
            Err(Stopped::Failed(e)) => {
                let _ = record.write(&dir);
                eprintln!(
                    "rubyrace: the bisection stopped: {e:#}\nEvery stored block is kept. Go on with:\n  {resume_hint}"
                );
                return Ok(ExitCode::from(EXIT_TRIALS_FAILED));
            }
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

/// What the next block measures and where the search stands.
fn progress_line(record: &BisectRecord, commits: &[usize]) -> String {
    let mut line = format!(
        "block {} of at most {}: commits {}",
        record.blocks() + 1,
        record.max_blocks,
        commits
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Some(s) = &record.searching {
        line.push_str(&format!(
            "; most probable first bad commit {} ({:.0}%), 95% in {}–{}",
            s.most_probable,
            100.0 * s.probability,
            s.first,
            s.last
        ));
    }
    for f in &record.findings {
        if let Finding::Commit { commit, .. } = f {
            line.push_str(&format!("; found {commit}"));
        }
    }
    line
}

/// The search, with what it needs to measure.
struct Searcher<'a> {
    dir: &'a Path,
    experiment: &'a Experiment,
    config: &'a Config,
    interrupt: &'a Arc<AtomicBool>,
    /// The Rubies built (or found in the cache) so far, by commit.
    rubies: std::cell::RefCell<std::collections::BTreeMap<String, experiment::RubyCommit>>,
}

enum Stopped {
    Interrupted,
    Failed(anyhow::Error),
}

/// The speed metrics a search may choose between, for a workload.
fn speed_metrics(config: &Config) -> Vec<PrecisionMetric> {
    if config.settings.workload == Workload::Http {
        vec![
            PrecisionMetric::Throughput,
            PrecisionMetric::CpuPerRequest,
            PrecisionMetric::LatencyP50,
            PrecisionMetric::LatencyP99,
        ]
    } else {
        vec![PrecisionMetric::Wall]
    }
}

/// ln(cost): larger is worse whatever the metric (throughput's cost is its inverse).
fn log_cost(metric: PrecisionMetric, value: f64) -> f64 {
    if metric == PrecisionMetric::Throughput {
        -value.ln()
    } else {
        value.ln()
    }
}

impl Searcher<'_> {
    /// Every stored block of every round, in order: each valid trial's commit and ln cost
    /// on `metric`.
    fn blocks(
        &self,
        record: &BisectRecord,
        metric: PrecisionMetric,
    ) -> Result<Vec<Vec<(usize, f64)>>> {
        let mut blocks = Vec::new();
        for round in &record.rounds {
            let dir = self.dir.join(&round.dir);
            if !dir.join(results::store::DB_FILE).is_file() {
                continue;
            }
            let store = Store::open_read_only(&dir)?;
            let mut by_block: std::collections::BTreeMap<u32, Vec<(usize, f64)>> =
                Default::default();
            for o in store.observations(metric)? {
                if o.value > 0.0 && o.value.is_finite() {
                    if let Some(&commit) = round.commits.get(o.config_id) {
                        by_block
                            .entry(o.block)
                            .or_default()
                            .push((commit, log_cost(metric, o.value)));
                    }
                }
            }
            blocks.extend(by_block.into_values());
        }
        Ok(blocks)
    }

    /// The rule of the record's settings.
    fn rule(record: &BisectRecord) -> LocateRule {
        LocateRule {
            min_blocks: record.min_blocks.max(3),
            min_change: record.min_change.ln_1p(),
            ..LocateRule::new(record.max_blocks, record.candidates)
        }
    }

    /// Rebuilds the search from every stored block, fills in the record (metric, estimates,
    /// findings, outcome) and says what to measure next (`None`: the search has ended).
    fn look(&self, record: &mut BisectRecord) -> Result<Option<Vec<usize>>> {
        let rule = Self::rule(record);
        let last = record.commits.len() - 1;
        if !record.metric_given && !record.metric_chosen {
            self.choose_metric(record, &rule)?;
        }
        let blocks = self.blocks(record, record.metric)?;
        let skipped = record.skipped.iter().map(|s| s.0);
        let (search, next) = Search::replay(rule, last, skipped, &blocks);
        record.ends = ends_of(
            &search.measures,
            last,
            record.metric,
            rule.call_confidence(),
        );
        let located = search.located();
        record.searching = located.as_ref().map(|l| {
            let (first, last, range_probability) = l.smallest_range(rule.confidence);
            Searching {
                lo: l.lo,
                hi: l.hi,
                most_probable: l.map,
                probability: l.probability(l.map),
                first,
                last,
                range_probability,
            }
        });
        let probability = |c: usize| located.as_ref().map(|l| l.probability(c));
        record.estimates = (0..=last)
            .filter_map(|c| {
                let x = locate::contrast(&search.measures, 0, c);
                if c == 0 {
                    let blocks = search.measures.iter().filter(|m| m.commit == 0).count();
                    return (blocks > 0).then_some(CommitEstimate {
                        commit: 0,
                        ratio: 1.0,
                        low: None,
                        high: None,
                        blocks,
                        probability: None,
                    });
                }
                if x.is_empty() {
                    return None;
                }
                let mean = x.iter().sum::<f64>() / x.len() as f64;
                let interval = locate::contrast_interval(&search.measures, 0, c, 0.95);
                Some(CommitEstimate {
                    commit: c,
                    ratio: mean.exp(),
                    low: interval.map(|i| i.1.exp()),
                    high: interval.map(|i| i.2.exp()),
                    blocks: x.len(),
                    probability: probability(c),
                })
            })
            .collect();
        let seconds_per_block = if search.blocks() > 0 {
            record.measuring_s() / f64::from(search.blocks())
        } else {
            0.0
        };
        record.findings = search
            .findings
            .iter()
            .map(|f| match *f {
                locate::Finding::Commit {
                    commit,
                    probability,
                    step,
                } => Finding::Commit {
                    commit,
                    probability,
                    ratio: step.0.exp(),
                    low: step.1.exp(),
                    high: step.2.exp(),
                    blocks: step.3,
                },
                locate::Finding::Skipped {
                    first,
                    last,
                    probability,
                    step,
                } => Finding::Skipped {
                    first,
                    last,
                    probability,
                    ratio: step.0.exp(),
                    low: step.1.exp(),
                    high: step.2.exp(),
                    blocks: step.3,
                },
                locate::Finding::Range {
                    first,
                    last,
                    probability,
                    lo,
                    hi,
                } => Finding::Range {
                    first,
                    last,
                    probability,
                    to_settle: search
                        .blocks_to_settle_in(lo, hi, 48, 200)
                        .map(|(b80, b95)| {
                            let minutes =
                                |b: Option<u32>| b.map(|b| f64::from(b) * seconds_per_block / 60.0);
                            Settle {
                                blocks_80: b80,
                                blocks_95: b95,
                                minutes_80: minutes(b80),
                                minutes_95: minutes(b95),
                            }
                        }),
                },
                locate::Finding::Unaccounted { lo, hi, high } => Finding::Unaccounted {
                    lo,
                    hi,
                    up_to: high.exp(),
                },
            })
            .collect();
        // Before the metric is chosen, the budget and every metric's ends decide; the
        // search on the provisional metric only chooses what to measure.
        if !record.metric_given && !record.metric_chosen {
            // No metric shows a regression, and the workload's own (throughput, or a
            // script's wall time) shows none of the smallest size searched for.
            let none_large = record.ends.as_ref().is_some_and(|e| {
                e.blocks as u32 >= record.min_blocks && e.high < 1.0 + record.min_change
            });
            let spent = search.blocks() >= record.max_blocks;
            if spent || none_large {
                record.searching = None;
                record.next = Vec::new();
                record.outcome = Some(BisectOutcome::NothingToFind { exhausted: spent });
                return Ok(None);
            }
        }
        let commits = match next {
            Next::Measure(commits) => commits,
            _ if !record.metric_given && !record.metric_chosen => record
                .rounds
                .last()
                .map(|r| r.commits.clone())
                .unwrap_or_else(|| vec![0, last]),
            Next::NothingToFind { exhausted } => {
                record.searching = None;
                record.next = Vec::new();
                record.outcome = Some(BisectOutcome::NothingToFind { exhausted });
                return Ok(None);
            }
            Next::Done => {
                record.next = Vec::new();
                record.outcome = Some(outcome_of(&record.findings));
                record.more_than_one_change = record
                    .findings
                    .iter()
                    .filter(|f| !matches!(f, Finding::Unaccounted { .. }))
                    .count()
                    > 1;
                return Ok(None);
            }
        };
        // A round with more servers than memory now allows is not held.
        let held = record
            .rounds
            .last()
            .filter(|r| r.commits.len() <= record.candidates + 2)
            .map(|r| (r.commits.as_slice(), r.blocks));
        let settled = record
            .rounds
            .last()
            .is_some_and(|r| r.findings_before != record.findings.len());
        let commits =
            locate::hold_round(&commits, held, settled, &search.skipped, record.min_blocks);
        record.outcome = None;
        record.next = commits.clone();
        Ok(Some(commits))
    }

    /// Once the ends have blocks enough, each speed metric's ends; the first metric whose
    /// ends show a regression and stand out most from their spread is the one searched on.
    fn choose_metric(&self, record: &mut BisectRecord, rule: &LocateRule) -> Result<()> {
        let last = record.commits.len() - 1;
        let mut per_metric = Vec::new();
        for metric in speed_metrics(self.config) {
            let blocks = self.blocks(record, metric)?;
            let mut search = Search::new(*rule, last);
            for figures in &blocks {
                search.record(figures);
            }
            let x = locate::contrast(&search.measures, 0, last);
            if x.len() as u32 >= rule.min_blocks {
                per_metric.push((metric, x));
            }
        }
        let ends = locate::metrics_at_ends(&per_metric, rule.call_confidence());
        record.metric_ends = ends.iter().map(metric_ends).collect();
        if let Some(chosen) = locate::least_noisy(&ends) {
            record.metric = chosen.metric;
            record.metric_chosen = true;
            eprintln!(
                "rubyrace: searching on {}: of the metrics whose ends show the regression, its regression stands out most from its per-block spread ({})",
                chosen.metric.name(),
                ends.iter()
                    .map(|e| format!(
                        "{} {:.2} spreads{}",
                        e.metric.name(),
                        e.signal_to_noise(),
                        if e.shows_regression() { "" } else { ", no regression shown" }
                    ))
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
        Ok(())
    }

    /// Measures one block of `commits`: another block of the last round when it measured
    /// the same commits, else a new round. A commit that does not build or boot is
    /// skipped (named in the record); an end that cannot be measured stops the search.
    fn run_block(&self, record: &mut BisectRecord, commits: &[usize]) -> Result<(), Stopped> {
        let same = record.rounds.last().is_some_and(|r| {
            r.commits == commits
                && self
                    .dir
                    .join(&r.dir)
                    .join(results::store::DB_FILE)
                    .is_file()
        });
        let (index, mut store) = if same {
            let index = record.rounds.len() - 1;
            let mut store =
                Store::open(&self.dir.join(&record.rounds[index].dir)).map_err(Stopped::Failed)?;
            let scheduled = store.schedule().map_err(Stopped::Failed)?;
            let done = store.completed().map_err(Stopped::Failed)?;
            // A block left unfinished (Ctrl-C, a kill) is run again first.
            if scheduled.iter().all(|t| done.contains(&t.trial_id)) {
                let blocks = scheduled.iter().map(|t| t.block + 1).max().unwrap_or(0);
                let seed: u64 = store
                    .meta("seed")
                    .map_err(Stopped::Failed)?
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                let order = match store.meta("order").map_err(Stopped::Failed)?.as_deref() {
                    Some("sequential") => experiment::Order::Sequential,
                    _ => experiment::Order::Random,
                };
                let next = one_block(commits.len(), blocks, order, seed, scheduled.len());
                store.append_block(&next).map_err(Stopped::Failed)?;
            }
            (index, store)
        } else {
            match self.new_round(record, commits)? {
                Some(made) => made,
                // A commit could not be built: skipped, and the search chooses again.
                None => return Ok(()),
            }
        };
        let kind = if store.completed().map_err(Stopped::Failed)?.is_empty() {
            "start"
        } else {
            "resume"
        };
        let end = run_pending_shown(&mut store, kind, false, self.interrupt, false);
        let round = &mut record.rounds[index];
        round.blocks = store
            .trial_results()
            .map_err(Stopped::Failed)?
            .iter()
            .map(|t| t.block)
            .collect::<std::collections::BTreeSet<_>>()
            .len() as u32;
        round.measuring_s = store
            .trials_wall_time()
            .map_err(Stopped::Failed)?
            .as_secs_f64();
        match end {
            Ok(RunEnd::Complete) | Ok(RunEnd::CannotBoot { .. }) => {}
            Ok(RunEnd::Interrupted) => return Err(Stopped::Interrupted),
            Ok(RunEnd::StoppedAfterFailure { .. }) => {
                unreachable!("a bisection never fails fast")
            }
            Err(e) => return Err(Stopped::Failed(e)),
        }
        let trials = store.trial_results().map_err(Stopped::Failed)?;
        let last = record.commits.len() - 1;
        for (config, reason) in lab::runner::never_ran_all(&trials) {
            let commit = record.rounds[index].commits[config];
            let reason = lab::checkouts::in_repository_terms(&reason, store.dir());
            if commit == 0 || commit == last {
                return Err(Stopped::Failed(anyhow::anyhow!(
                    "the {} end cannot be measured, so there is nothing to bisect: {reason}",
                    if commit == 0 { "good" } else { "bad" }
                )));
            }
            if !record.skipped.iter().any(|s| s.0 == commit) {
                eprintln!(
                    "rubyrace: commit {commit} ({}) cannot be measured, skipped: {}",
                    record.short(commit),
                    reason.lines().next().unwrap_or("")
                );
                record.skipped.push((commit, reason));
            }
        }
        if index == 0 && record.rounds[0].blocks == 1 {
            self.size_by_memory(record, &store);
        }
        Ok(())
    }

    /// A new round's store, its commits' configurations made (an app's checkout, a Ruby
    /// built): `None` when a commit's Ruby does not build (it is skipped).
    fn new_round(
        &self,
        record: &mut BisectRecord,
        commits: &[usize],
    ) -> Result<Option<(usize, Store)>, Stopped> {
        let index = record.rounds.len();
        let mut configs = Vec::new();
        for (id, &commit) in commits.iter().enumerate() {
            let label = format!(
                "{commit}:{}",
                &record.commits[commit].hash[..8.min(record.commits[commit].hash.len())]
            );
            match self.config_at(record, id, &label, commit) {
                Ok(config) => configs.push(config),
                Err(e) if commit != 0 && commit + 1 != record.commits.len() => {
                    eprintln!("rubyrace: commit {commit} cannot be measured, skipped: {e:#}");
                    record.skipped.push((commit, format!("{e:#}")));
                    return Ok(None);
                }
                Err(e) => {
                    return Err(Stopped::Failed(e.context(if commit == 0 {
                        "the good end"
                    } else {
                        "the bad end"
                    })))
                }
            }
        }
        let mut experiment = self.experiment.clone();
        experiment.configs = configs;
        if !experiment.design_written {
            experiment.design = experiment.default_design(&experiment.configs);
        }
        experiment.batches = 1;
        experiment.bisect = None;
        // Each round's blocks are randomized apart from every other round's.
        experiment.seed ^= (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let relative = PathBuf::from(ROUNDS_DIR).join(format!("{:02}", index + 1));
        record.rounds.push(RoundRecord {
            dir: relative.clone(),
            commits: commits.to_vec(),
            blocks: 0,
            measuring_s: 0.0,
            findings_before: record.findings.len(),
        });
        record.write(self.dir).map_err(Stopped::Failed)?;
        let plan = schedule(
            experiment.configs.len(),
            experiment.batches,
            experiment.order,
            experiment.seed,
        );
        let store = Store::create(&self.dir.join(&relative), &experiment, &plan, false)
            .map_err(Stopped::Failed)?;
        let meta = RoundMeta {
            round: index + 1,
            commits: commits.to_vec(),
        };
        store
            .record_meta(
                ROUND_META,
                &serde_json::to_string(&meta).map_err(|e| Stopped::Failed(e.into()))?,
            )
            .map_err(Stopped::Failed)?;
        Ok(Some((index, store)))
    }

    /// After the first block: how many candidates fit beside the ends, from the largest
    /// server measured (PSS at its end) and the memory available now.
    fn size_by_memory(&self, record: &mut BisectRecord, store: &Store) {
        let largest = store
            .observations(PrecisionMetric::PssEnd)
            .ok()
            .and_then(|o| o.iter().map(|o| o.value).reduce(f64::max));
        let (Some(largest), Some(available)) = (largest, available_memory()) else {
            return;
        };
        let k = locate::candidates_for_memory(available, largest as u64);
        record.candidates = k;
        record.candidates_why = format!(
            "{} beside the ends: {} servers of up to {} each (PSS measured in the first block) fit in three quarters of the {} available (at most 8 interleaved)",
            units::count(k, "candidate"),
            k + 2,
            units::bytes(largest as u64),
            units::bytes(available)
        );
    }

    /// The searched configuration at commit `index`: the app from its checkout, or the
    /// configuration on that commit's Ruby.
    fn config_at(
        &self,
        record: &BisectRecord,
        id: usize,
        label: &str,
        index: usize,
    ) -> Result<Config> {
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

/// The figures of `metric`'s ends in the blocks so far.
fn ends_of(
    measures: &[locate::Measure],
    last: usize,
    metric: PrecisionMetric,
    confidence: f64,
) -> Option<MetricEnds> {
    let x = locate::contrast(measures, 0, last);
    let ends = locate::metrics_at_ends(&[(metric, x)], confidence);
    ends.first().map(metric_ends)
}

fn metric_ends(e: &locate::MetricAtEnds<PrecisionMetric>) -> MetricEnds {
    MetricEnds {
        metric: e.metric,
        ratio: e.mean.exp(),
        low: e.low.exp(),
        high: e.high.exp(),
        spread: e.spread,
        blocks: e.blocks,
        signal_to_noise: e.signal_to_noise(),
    }
}

/// The outcome of a search that ended: each commit named or range left a change, in
/// commit order (a part that could not be shown free of a change is a note beside it).
fn outcome_of(findings: &[Finding]) -> BisectOutcome {
    let mut changes: Vec<Change> = findings
        .iter()
        .filter_map(|f| match *f {
            Finding::Commit { commit, .. } => Some(Change {
                first: commit,
                last: commit,
                cannot_tell: false,
            }),
            Finding::Skipped { first, last, .. } => Some(Change {
                first,
                last,
                cannot_tell: false,
            }),
            Finding::Range { first, last, .. } => Some(Change {
                first,
                last,
                cannot_tell: true,
            }),
            // A note beside the answer, not a change found.
            Finding::Unaccounted { .. } => None,
        })
        .collect();
    changes.sort_by_key(|c| (c.first, c.last));
    match changes.as_slice() {
        [] => BisectOutcome::NothingToFind { exhausted: false },
        [one] if one.first == one.last && !one.cannot_tell => {
            BisectOutcome::Commit { commit: one.first }
        }
        [one] => BisectOutcome::Range {
            first: one.first,
            last: one.last,
            cannot_tell: one.cannot_tell,
        },
        _ => BisectOutcome::Changes { changes },
    }
}

/// The memory available now (`MemAvailable` of /proc/meminfo), bytes.
fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// What `dir` is when it is not a bisection's directory (for `--resume`): a round of one,
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
        Some(s) if s.meta(ROUND_META).ok().flatten().is_some() => {
            let search = dir.ancestors().nth(2).unwrap_or(dir);
            return Some(format!(
                "{shown} is one round of a bisection: go on with `rubyrace bisect --resume {}`",
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
    let max_blocks = args.max_blocks.unwrap_or(DEFAULT_MAX_BLOCKS);
    if args.min_blocks < 3 || max_blocks < args.min_blocks.max(3) {
        eprintln!(
            "rubyrace: the search calls the ends from {} blocks on, with a budget of {} (an interval needs at least 3; the budget is at least the first call), not --min-blocks {} --max-blocks {}",
            args.min_blocks.max(3),
            max_blocks.max(args.min_blocks.max(3)),
            args.min_blocks,
            max_blocks
        );
    }
    std::fs::create_dir_all(dir.join(ROUNDS_DIR))
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let http = config.settings.workload == Workload::Http;
    let metric = args.metric.unwrap_or(if http {
        PrecisionMetric::Throughput
    } else {
        PrecisionMetric::Wall
    });
    let candidates = available_memory()
        .map(|a| locate::candidates_for_memory(a, PRIOR_SERVER_BYTES))
        .unwrap_or(6);
    let record = BisectRecord {
        schema: BISECT_SCHEMA.into(),
        experiment: std::path::absolute(&file).map_err(|e| e.to_string())?,
        config: config.label.clone(),
        repo: top,
        history_of,
        configure_opts: args.configure_opts.clone(),
        good_ref: good,
        bad_ref: bad,
        metric,
        metric_given: args.metric.is_some(),
        metric_chosen: false,
        metric_ends: Vec::new(),
        ends: None,
        min_blocks: args.min_blocks.max(3),
        max_blocks: max_blocks.max(args.min_blocks.max(3)),
        min_change: args.precision.unwrap_or(DEFAULT_MIN_CHANGE),
        candidates,
        candidates_why: format!(
            "{} beside the ends until the first block measures the servers' memory (taken as {} each before)",
            units::count(candidates, "candidate"),
            units::bytes(PRIOR_SERVER_BYTES)
        ),
        commits,
        rounds: Vec::new(),
        skipped: Vec::new(),
        estimates: Vec::new(),
        findings: Vec::new(),
        searching: None,
        next: Vec::new(),
        outcome: None,
        more_than_one_change: false,
    };
    record.write(&dir).map_err(|e| format!("{e:#}"))?;
    Ok((dir, record))
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
