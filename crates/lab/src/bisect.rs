//! The search of `rubyrace bisect` as it runs: which commits the next look measures (one
//! block, or one per node on a fleet), each round (the commits measured together) as a
//! results directory under `rounds/`, the search rebuilt from every stored block after
//! each look (`experiment::locate` decides; this module reads the stores and keeps the
//! record, `results::bisect`). What the command line owns stays outside, behind
//! [`Measuring`]: where and how a round's blocks are run and shown, and how a Ruby is
//! built at a commit.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use experiment::locate::{self, LocateRule, Next, Search};
use experiment::precision::PrecisionMetric;
use experiment::schedule::schedule;
use experiment::{AppCommit, Config, Experiment, Workload};
use results::bisect::{
    BisectOutcome, BisectRecord, Change, CommitEstimate, Finding, HistoryOf, MetricEnds, RoundMeta,
    RoundRecord, Searching, Settle, StepRatio, ROUNDS_DIR, ROUND_META,
};
use results::store::{SessionKind, Store};

use crate::runner::RunEnd;

mod start;
pub use start::{
    not_a_bisection, set_budget, Begin, DEFAULT_MAX_BLOCKS, DEFAULT_MIN_CHANGE, MIN_BLOCKS,
};

/// What a search asks of the program running it.
pub trait Measuring {
    /// Runs the pending blocks of a round's store (a session of `kind`), showing
    /// their progress.
    fn run_round(&self, store: &mut Store, kind: results::store::SessionKind) -> Result<RunEnd>;
    /// The Ruby built at `commit` of the CRuby repository `repo` (or found in the cache).
    fn ruby_at(
        &self,
        repo: &Path,
        commit: &str,
        configure_opts: &[String],
    ) -> Result<experiment::RubyCommit>;
    /// A line for the person watching ("searching on …", "commit 5 … skipped").
    fn note(&self, line: &str);
    /// Blocks measured at once before the search looks again: one on this machine, one
    /// per node on a fleet (each block on one node, so the host is part of the block's
    /// own level, which the model takes out).
    fn blocks_at_once(&self) -> u32 {
        1
    }
}

/// What a server is taken to hold before one was measured (PSS), to choose how many run
/// side by side.
pub const PRIOR_SERVER_BYTES: u64 = 250 << 20;

/// How many candidates a new search measures beside the ends, and why, before its first
/// block has measured a server's memory.
pub fn initial_candidates() -> (usize, String) {
    let candidates = available_memory()
        .map(|a| locate::candidates_for_memory(a, PRIOR_SERVER_BYTES))
        .unwrap_or(6);
    (
        candidates,
        format!(
            "{} beside the ends until the first block measures the servers' memory (taken as {} each before)",
            units::count(candidates, "candidate"),
            units::bytes(PRIOR_SERVER_BYTES)
        ),
    )
}

/// The search, with what it needs to measure.
pub struct Searcher<'a> {
    /// The bisection's directory.
    pub dir: &'a Path,
    pub experiment: &'a Experiment,
    /// The configuration whose history is searched.
    pub config: &'a Config,
    pub measuring: &'a dyn Measuring,
    /// The Rubies built (or found in the cache) so far, by commit.
    pub rubies: std::cell::RefCell<std::collections::BTreeMap<String, experiment::RubyCommit>>,
}

/// Why a block was not measured.
pub enum Stopped {
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

impl<'a> Searcher<'a> {
    /// The search of the bisection in `dir`.
    pub fn new(
        dir: &'a Path,
        experiment: &'a Experiment,
        config: &'a Config,
        measuring: &'a dyn Measuring,
    ) -> Searcher<'a> {
        Searcher {
            dir,
            experiment,
            config,
            measuring,
            rubies: Default::default(),
        }
    }

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

    /// Runs the search to its end: after every block the search is rebuilt and the record
    /// written; then the block it asks for is measured. Ends when the search has (the
    /// record's outcome says how), at an interrupt or at a block that could not run (the
    /// record is written first: every stored block is kept).
    pub fn run(&self, record: &mut BisectRecord) -> Result<(), Stopped> {
        loop {
            let next = self.look(record).map_err(Stopped::Failed)?;
            record.write(self.dir).map_err(Stopped::Failed)?;
            let Some(commits) = next else {
                return Ok(());
            };
            self.measuring.note(&progress_line(record, &commits));
            let measured = self.measure(record, &commits);
            if measured.is_err() {
                let _ = record.write(self.dir);
            }
            measured?;
        }
    }

    /// Blocks the next look measures: as many as run at once, within the budget.
    fn blocks_at_once(&self, record: &BisectRecord) -> u32 {
        let left = record.max_blocks.saturating_sub(record.blocks());
        self.measuring.blocks_at_once().min(left).max(1)
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
        record.estimates = estimates_of(&search, last, located.as_ref());
        // The search's minutes: on a fleet, the blocks of a look run side by side.
        let seconds_per_block = if search.blocks() > 0 {
            record.measuring_s()
                / f64::from(search.blocks())
                / f64::from(self.measuring.blocks_at_once())
        } else {
            0.0
        };
        record.findings = findings_of(&search, seconds_per_block);
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
                record.ends_withdrawn = search.withdrawn;
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
        let metrics = speed_metrics(self.config);
        for &metric in &metrics {
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
        let ends = locate::metrics_at_ends(&per_metric, rule.call_confidence_among(metrics.len()));
        record.metric_ends = ends.iter().map(metric_ends).collect();
        if let Some(chosen) = locate::least_noisy(&ends) {
            record.metric = chosen.metric;
            record.metric_chosen = true;
            self.measuring.note(&format!(
                "searching on {}: of the metrics whose ends show the regression, its regression stands out most from its per-block spread ({})",
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
            ));
        }
        Ok(())
    }

    /// Measures one look's blocks of `commits` (one, or one per node on a fleet): more
    /// blocks of the last round when it measured the same commits, else a new round. A
    /// commit that does not build or boot is skipped (named in the record); an end that
    /// cannot be measured stops the search.
    fn measure(&self, record: &mut BisectRecord, commits: &[usize]) -> Result<(), Stopped> {
        let at_once = self.blocks_at_once(record);
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
                store.append_blocks(at_once).map_err(Stopped::Failed)?;
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
            SessionKind::Start
        } else {
            SessionKind::Resume
        };
        let end = self.measuring.run_round(&mut store, kind);
        let round = &mut record.rounds[index];
        round.blocks = store
            .trial_results()
            .map_err(Stopped::Failed)?
            .iter()
            .map(|t| t.id.block)
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
        for (config, reason) in crate::runner::never_ran_all(&trials) {
            let commit = record.rounds[index].commits[config];
            let reason = crate::checkouts::in_repository_terms(&reason, store.dir());
            if commit == 0 || commit == last {
                return Err(Stopped::Failed(anyhow::anyhow!(
                    "the {} end cannot be measured, so there is nothing to bisect: {reason}",
                    if commit == 0 { "good" } else { "bad" }
                )));
            }
            if !record.skipped.iter().any(|s| s.0 == commit) {
                self.measuring.note(&format!(
                    "commit {commit} ({}) cannot be measured, skipped: {}",
                    record.short(commit),
                    reason.lines().next().unwrap_or("")
                ));
                record.skipped.push((commit, reason));
            }
        }
        // The first look's blocks measured the servers' memory.
        if index == 0 && record.rounds[0].blocks <= at_once {
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
                    self.measuring.note(&format!(
                        "commit {commit} cannot be measured, skipped: {e:#}"
                    ));
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
        experiment.batches = self.blocks_at_once(record);
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
                        let ruby = self
                            .measuring
                            .ruby_at(&record.repo, hash, &record.configure_opts)
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

/// Every measured commit's cost against good, from the blocks so far, with its
/// probability of being the first bad commit.
fn estimates_of(
    search: &Search,
    last: usize,
    located: Option<&locate::Located>,
) -> Vec<CommitEstimate> {
    let probability = |c: usize| located.map(|l| l.probability(c));
    (0..=last)
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
        .collect()
}

/// A commit named (`first == last`), or a run of skipped commits named with the one after
/// them, with its step against the commit before: `step` is the step's log cost, its
/// interval and blocks.
fn step_finding(
    first: usize,
    last: usize,
    probability: f64,
    step: (f64, f64, f64, usize),
) -> Finding {
    let step = StepRatio {
        ratio: step.0.exp(),
        low: step.1.exp(),
        high: step.2.exp(),
        blocks: step.3,
    };
    if first == last {
        Finding::Commit {
            commit: first,
            probability,
            step,
        }
    } else {
        Finding::Skipped {
            first,
            last,
            probability,
            step,
        }
    }
}

/// The search's findings as recorded: a range's blocks and minutes to settle it from the
/// spread measured (`seconds_per_block` of measuring each).
fn findings_of(search: &Search, seconds_per_block: f64) -> Vec<Finding> {
    search
        .findings
        .iter()
        .map(|f| match *f {
            locate::Finding::Commit {
                commit,
                probability,
                step,
            } => step_finding(commit, commit, probability, step),
            locate::Finding::Skipped {
                first,
                last,
                probability,
                step,
            } => step_finding(first, last, probability, step),
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
        .collect()
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
