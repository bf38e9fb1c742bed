//! The record of a bisection (`rubyrace bisect`): `bisect.json` at the top of its
//! directory, beside `rounds/`, which holds one results directory per round (a set of
//! commits measured side by side, block after block, while the search asks for that set).
//! The history searched, the search's settings, each round's commits, and what the search
//! concluded (each commit's cost against good and its probability of being the first bad
//! one, the commits named, the ranges left) are here; every trial is in its round's store,
//! and the search is rebuilt from those trials on `--resume`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use experiment::precision::PrecisionMetric;
use serde::{Deserialize, Serialize};

/// The k-section search (issue 48). Records of the step-by-step search before it
/// (`rubyrace.bisect/1`) are named and refused.
pub const BISECT_SCHEMA: &str = "rubyrace.bisect/2";
pub const BISECT_FILE: &str = "bisect.json";
/// The directory of the rounds' stores, under the bisection's directory.
pub const ROUNDS_DIR: &str = "rounds";
/// A round store's meta key: the round's number and the commit of each configuration id.
pub const ROUND_META: &str = "bisect_round";

/// The bisection whose round `dir` is (`BISECTION/rounds/NN`, beside `bisect.json`), if
/// it is one.
pub fn bisection_of(dir: &Path) -> Option<PathBuf> {
    let absolute = std::path::absolute(dir).ok()?;
    let rounds = absolute.parent()?;
    let top = rounds.parent()?;
    (rounds.file_name()? == ROUNDS_DIR && top.join(BISECT_FILE).is_file())
        .then(|| top.to_path_buf())
}

/// A round store's meta [`ROUND_META`]: its number and, per configuration id, the commit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoundMeta {
    pub round: usize,
    pub commits: Vec<usize>,
}

/// A commit of the history searched.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CommitInfo {
    pub hash: String,
    pub subject: String,
    /// The author date, ISO 8601.
    pub date: String,
}

/// One round: the commits measured side by side (each a configuration of its store, in
/// this order), and the blocks it ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoundRecord {
    /// Its results directory, relative to the bisection's directory.
    pub dir: PathBuf,
    /// Indices in `commits`, in configuration-id order.
    pub commits: Vec<usize>,
    /// Blocks stored.
    pub blocks: u32,
    /// Its measuring time, seconds (an interleaved block counts once).
    pub measuring_s: f64,
    /// The search's findings when it began: a round is held for its first blocks unless
    /// the search names something meanwhile.
    #[serde(default)]
    pub findings_before: usize,
}

/// One commit's cost against the good end, from every block that measured both (the
/// mean per-block log ratio, its 95% interval widened for dependence), and the probability
/// that it is the first bad commit of the part of the history last searched.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CommitEstimate {
    pub commit: usize,
    pub ratio: f64,
    pub low: Option<f64>,
    pub high: Option<f64>,
    pub blocks: usize,
    pub probability: Option<f64>,
}

/// A named change's cost against the commit before it: the ratio and its interval at the
/// search's level, and the blocks behind them. Stored flat in its finding's JSON.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepRatio {
    pub ratio: f64,
    pub low: f64,
    pub high: f64,
    pub blocks: usize,
}

/// What the search concluded about one part of the history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Finding {
    /// The first bad commit of a change: the probability it holds, and its cost against the
    /// commit before it.
    Commit {
        commit: usize,
        probability: f64,
        #[serde(flatten)]
        step: StepRatio,
    },
    /// The first bad commit is one of `first..=last`, which hold `probability` together:
    /// every commit of it but the last does not build or boot, so they cannot be told
    /// apart; the cost of `last` against the commit before `first`.
    Skipped {
        first: usize,
        last: usize,
        probability: f64,
        #[serde(flatten)]
        step: StepRatio,
    },
    /// The budget ended with the change in `first..=last`, which holds `probability` of
    /// it; `to_settle`: blocks that would place it, if known.
    Range {
        first: usize,
        last: usize,
        probability: f64,
        to_settle: Option<Settle>,
    },
    /// A note beside the answer: a part beside a named commit (`lo` good, `hi` bad) that
    /// showed no change of its own in the blocks it was given, but could not be shown free
    /// of one of the smallest size searched for: a change of up to `up_to` (a ratio) there
    /// is not ruled out.
    Unaccounted { lo: usize, hi: usize, up_to: f64 },
}

/// How many more blocks (and minutes, at this search's pace: on a fleet, its nodes' blocks
/// side by side) would place a change with 80% and 95% probability, from the spread
/// measured; `None`: more than four budgets.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settle {
    pub blocks_80: Option<u32>,
    pub blocks_95: Option<u32>,
    pub minutes_80: Option<f64>,
    pub minutes_95: Option<f64>,
}

/// The part being searched (`lo` good, `hi` bad) after the last block: the most probable
/// first bad commit with its probability, and the smallest range holding 95%.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Searching {
    pub lo: usize,
    pub hi: usize,
    pub most_probable: usize,
    pub probability: f64,
    pub first: usize,
    pub last: usize,
    pub range_probability: f64,
}

/// One metric's ends when the search chose what to search on: the bad end's cost against
/// good, its interval, the per-block spread, and the regression in units of that spread.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricEnds {
    pub metric: PrecisionMetric,
    pub ratio: f64,
    pub low: f64,
    pub high: f64,
    pub spread: f64,
    pub blocks: usize,
    pub signal_to_noise: f64,
}

/// Where the search ended (its details are in `findings`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum BisectOutcome {
    /// The ends' interval lies below the smallest change the search accounts for, or
    /// (`exhausted`) the budget ended before it showed a regression.
    NothingToFind {
        #[serde(default)]
        exhausted: bool,
    },
    /// The first bad commit (an index in `commits`).
    Commit { commit: usize },
    /// The first bad commit is one of `first..=last`: commits in it were skipped, or the
    /// budget ended before one commit held 95% (`cannot_tell`).
    Range {
        first: usize,
        last: usize,
        cannot_tell: bool,
    },
    /// More than one change (a part beside a named commit showed a change of its own), in
    /// commit order: each `first == last` (one commit) or a range, as above.
    Changes { changes: Vec<Change> },
}

/// One of several changes a search separated.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub first: usize,
    pub last: usize,
    pub cannot_tell: bool,
}

impl BisectOutcome {
    /// Some change could only be placed in a range because a step could not tell.
    pub fn cannot_tell(&self) -> bool {
        match self {
            BisectOutcome::Range { cannot_tell, .. } => *cannot_tell,
            BisectOutcome::Changes { changes } => changes.iter().any(|c| c.cannot_tell),
            _ => false,
        }
    }
}

/// Whose history is searched: the app's (each commit checked out) or CRuby's (each
/// commit built, cached by its hash).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HistoryOf {
    App,
    Ruby,
}

/// `bisect.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BisectRecord {
    pub schema: String,
    /// The experiment file and the label of the configuration whose history is searched.
    pub experiment: PathBuf,
    pub config: String,
    /// The repository's top directory, and whose it is.
    pub repo: PathBuf,
    pub history_of: HistoryOf,
    /// For a Ruby's history: `./configure` arguments of every build.
    #[serde(default)]
    pub configure_opts: Vec<String>,
    pub good_ref: String,
    pub bad_ref: String,
    /// The metric searched on: given (`--metric`), or chosen once the ends showed a
    /// regression on some metric (`metric_chosen`), until then the workload's first.
    pub metric: PrecisionMetric,
    pub metric_given: bool,
    pub metric_chosen: bool,
    /// Every metric's ends when the metric was chosen.
    #[serde(default)]
    pub metric_ends: Vec<MetricEnds>,
    /// The searched metric's ends after the last block.
    #[serde(default)]
    pub ends: Option<MetricEnds>,
    /// Blocks before the first call, and the whole search's budget in blocks.
    pub min_blocks: u32,
    pub max_blocks: u32,
    /// The smallest change the search accounts for (a fraction: 0.02 is 2%).
    pub min_change: f64,
    /// Candidates per block beside the two ends, and why that many.
    pub candidates: usize,
    pub candidates_why: String,
    /// The history: good first, bad last (first-parent line).
    pub commits: Vec<CommitInfo>,
    pub rounds: Vec<RoundRecord>,
    /// Commits skipped: they did not build or boot (indices, with the reason).
    pub skipped: Vec<(usize, String)>,
    /// Every measured commit's cost against good, after the last block.
    #[serde(default)]
    pub estimates: Vec<CommitEstimate>,
    #[serde(default)]
    pub findings: Vec<Finding>,
    /// The part of the history being searched after the last block (none once the
    /// search has ended or before its first block).
    #[serde(default)]
    pub searching: Option<Searching>,
    /// The commits the next block measures (empty once the search has ended).
    #[serde(default)]
    pub next: Vec<usize>,
    pub outcome: Option<BisectOutcome>,
    /// More than one change was found.
    pub more_than_one_change: bool,
    /// The ends had shown a regression at an early look, which started the search, but
    /// over every block of the budget they no longer do: no commit is named (absent in
    /// records of an older rubyrace: false).
    #[serde(default)]
    pub ends_withdrawn: bool,
    /// `--slurm`: each look measures one block per node over the fleet of the file's
    /// `[fleet]` (absent in records of an older rubyrace: false).
    #[serde(default)]
    pub slurm: bool,
}

impl BisectRecord {
    pub fn read(dir: &Path) -> Result<BisectRecord> {
        let path = dir.join(BISECT_FILE);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let schema = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v.get("schema")?.as_str().map(str::to_string));
        if let Some(schema) = schema.filter(|s| s != BISECT_SCHEMA) {
            anyhow::bail!(
                "{}: schema {schema:?}, a search by an older rubyrace (one step at a time); this rubyrace reads {BISECT_SCHEMA:?}. Its steps/ hold ordinary results directories that `rubyrace report` still reads one by one; start a new search to go on",
                path.display()
            );
        }
        serde_json::from_str(&text)
            .with_context(|| format!("{} is not a bisection's record", path.display()))
    }

    /// Writes `bisect.json` atomically (a temporary file renamed over it), so a kill leaves
    /// the old record or the new one, never half of one.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let path = dir.join(BISECT_FILE);
        let temporary = dir.join(format!("{BISECT_FILE}.tmp"));
        std::fs::write(&temporary, serde_json::to_string_pretty(self)? + "\n")
            .with_context(|| format!("cannot write {}", temporary.display()))?;
        std::fs::rename(&temporary, &path)
            .with_context(|| format!("cannot write {}", path.display()))
    }

    /// The estimate of `commit`, if it was measured.
    pub fn estimate(&self, commit: usize) -> Option<&CommitEstimate> {
        self.estimates.iter().find(|e| e.commit == commit)
    }

    /// Blocks over every round.
    pub fn blocks(&self) -> u32 {
        self.rounds.iter().map(|r| r.blocks).sum()
    }

    /// Measuring seconds over every round.
    pub fn measuring_s(&self) -> f64 {
        self.rounds.iter().map(|r| r.measuring_s).sum()
    }

    /// The commit's hash, 12 characters, and subject.
    pub fn short(&self, commit: usize) -> String {
        let c = &self.commits[commit];
        format!("{} {}", &c.hash[..12.min(c.hash.len())], c.subject)
    }
}
