//! The record of a bisection (`rubyrace bisect`): `bisect.json` at the top of its
//! directory, beside `steps/`, which holds one results directory per decision (the ends,
//! then each step's candidate). The history searched, the search's settings and every
//! step's outcome are here; every trial is in its step's store.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use experiment::bisect::{BisectEnd, EndsVerdict, StepVerdict};
use experiment::precision::PrecisionMetric;
use serde::{Deserialize, Serialize};

pub const BISECT_SCHEMA: &str = "rubyrace.bisect/1";
pub const BISECT_FILE: &str = "bisect.json";

/// The bisection whose step `dir` is (`BISECTION/steps/NN-…`, beside `bisect.json`), if
/// it is one.
pub fn bisection_of(dir: &Path) -> Option<PathBuf> {
    let absolute = std::path::absolute(dir).ok()?;
    let steps = absolute.parent()?;
    let top = steps.parent()?;
    (steps.file_name()? == "steps" && top.join(BISECT_FILE).is_file()).then(|| top.to_path_buf())
}

/// A commit of the history searched.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CommitInfo {
    pub hash: String,
    pub subject: String,
    /// The author date, ISO 8601.
    pub date: String,
}

/// One decision of the search: the ends (no `commit`) or a step on `commit`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// The candidate's index in `commits`; absent for the ends.
    pub commit: Option<usize>,
    /// A step's own ends, `[good, bad]` (indices in `commits`): the range it splits, whose
    /// ends run beside the candidate. Absent for the ends, and in a record of an older
    /// rubyrace, whose steps all ran against the history's ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends: Option<[usize; 2]>,
    /// Its results directory, relative to the bisection's directory.
    pub dir: PathBuf,
    /// How it ended; absent while it runs (or when it was interrupted).
    pub end: Option<BisectEnd>,
    /// Its measuring time, seconds (an interleaved block counts once).
    pub measuring_s: f64,
}

/// Where the search ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum BisectOutcome {
    /// The ends' interval holds "no change": nothing to find at this precision.
    NothingToFind,
    /// The first bad commit (an index in `commits`).
    Commit { commit: usize },
    /// The first bad commit is one of `first..=last`: commits in it were skipped, or a
    /// step could not tell (`cannot_tell`), and the search stopped there.
    Range {
        first: usize,
        last: usize,
        cannot_tell: bool,
    },
    /// More than one change, each searched apart (a step found a commit with only part of
    /// its range's regression), in commit order: each `first == last` (one commit) or a
    /// range, as above.
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
    pub metric: PrecisionMetric,
    pub min_blocks: u32,
    pub max_blocks: u32,
    pub precision: Option<f64>,
    /// The history: good first, bad last (first-parent line).
    pub commits: Vec<CommitInfo>,
    pub steps: Vec<StepRecord>,
    /// Commits skipped: they did not build or boot (indices, with the reason).
    pub skipped: Vec<(usize, String)>,
    pub outcome: Option<BisectOutcome>,
    /// Some step found the candidate with only part of the regression: more than one
    /// change (or a gradual one) in the range.
    pub more_than_one_change: bool,
}

impl BisectRecord {
    pub fn read(dir: &Path) -> Result<BisectRecord> {
        let path = dir.join(BISECT_FILE);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let record: BisectRecord = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a bisection's record", path.display()))?;
        anyhow::ensure!(
            record.schema == BISECT_SCHEMA,
            "{}: schema {:?}, this rubyrace reads {BISECT_SCHEMA:?}",
            path.display(),
            record.schema
        );
        Ok(record)
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

    /// The ends' decision, once made.
    pub fn ends(&self) -> Option<&experiment::bisect::EndsDecision> {
        self.steps.iter().find_map(|s| match &s.end {
            Some(BisectEnd::Ends(d))
                if s.commit.is_none() && d.verdict != EndsVerdict::Continue =>
            {
                Some(d)
            }
            _ => None,
        })
    }

    /// A step's own ends (the history's, for an older record's steps).
    pub fn ends_of(&self, step: &StepRecord) -> (usize, usize) {
        step.ends
            .map(|[g, b]| (g, b))
            .unwrap_or((0, self.commits.len() - 1))
    }

    /// What the change from commit `before` to commit `after` costs (after against before),
    /// with its interval, from the decision that measured the two side by side: a step on
    /// `after` with `before` as its good end, a step on `before` with `after` as its bad
    /// end, or the ends of the history.
    pub fn effect(&self, before: usize, after: usize) -> Option<(f64, Option<f64>, Option<f64>)> {
        self.steps.iter().find_map(|s| {
            let (good, bad) = self.ends_of(s);
            match (&s.end, s.commit) {
                (Some(BisectEnd::Step(d)), Some(c)) if c == after && good == before => {
                    d.ratio_to_good.map(|r| (r, d.ratio_low, d.ratio_high))
                }
                (Some(BisectEnd::Step(d)), Some(c)) if c == before && bad == after => {
                    d.bad_to_candidate.map(|r| (r, d.bad_low, d.bad_high))
                }
                (Some(BisectEnd::Ends(d)), None)
                    if (before, after) == (0, self.commits.len() - 1) =>
                {
                    d.ratio.map(|r| (r, d.low, d.high))
                }
                _ => None,
            }
        })
    }

    /// The step that measured `commit`, decided.
    pub fn step_of(&self, commit: usize) -> Option<&experiment::bisect::StepDecision> {
        self.steps.iter().find_map(|s| match &s.end {
            Some(BisectEnd::Step(d))
                if s.commit == Some(commit) && d.verdict != StepVerdict::Continue =>
            {
                Some(d)
            }
            _ => None,
        })
    }

    /// The commit's hash, 12 characters, and subject.
    pub fn short(&self, commit: usize) -> String {
        let c = &self.commits[commit];
        format!("{} {}", &c.hash[..12.min(c.hash.len())], c.subject)
    }
}
