//! A bisection's beginning and its resumption, apart from how the command line asks for
//! them: the history between good and bad resolved, the app checked at good, the record's
//! settings chosen (the metric, the budget, the first candidates) and written; on
//! `--resume`, what a directory that is not a bisection's is, and a larger budget.

use std::path::{Path, PathBuf};

use experiment::precision::PrecisionMetric;
use experiment::{AppCommit, Config, Workload};
use results::bisect::{
    BisectRecord, CommitInfo, HistoryOf, BISECT_FILE, BISECT_SCHEMA, ROUNDS_DIR, ROUND_META,
};
use results::store::Store;

/// The budget of blocks of a search given none.
pub const DEFAULT_MAX_BLOCKS: u32 = 60;
/// The smallest change the search looks for, given none (2%).
pub const DEFAULT_MIN_CHANGE: f64 = 0.02;
/// The fewest blocks the ends are called from: an interval needs 3.
pub const MIN_BLOCKS: u32 = 3;

/// What a new bisection is asked to search.
pub struct Begin<'a> {
    /// The experiment file, and its configuration searched (already read).
    pub experiment_file: &'a Path,
    pub config: &'a Config,
    /// The repository whose history is searched, and whether it is the app's or CRuby's.
    pub repo: &'a Path,
    pub history_of: HistoryOf,
    pub configure_opts: Vec<String>,
    pub good: &'a str,
    pub bad: &'a str,
    pub metric: Option<PrecisionMetric>,
    pub min_blocks: u32,
    pub max_blocks: Option<u32>,
    pub min_change: Option<f64>,
    pub slurm: bool,
}

impl Begin<'_> {
    /// The blocks the ends are first called from and the budget, as the search takes them:
    /// at least [`MIN_BLOCKS`], and a budget at least that. `Some` with a line to show when
    /// that is not what was asked.
    pub fn blocks(&self) -> (u32, u32, Option<String>) {
        let asked_max = self.max_blocks.unwrap_or(DEFAULT_MAX_BLOCKS);
        let min = self.min_blocks.max(MIN_BLOCKS);
        let max = asked_max.max(min);
        let note = (min != self.min_blocks || max != asked_max).then(|| {
            format!(
                "the search calls the ends from {min} blocks on, with a budget of {max} (an interval needs at least {MIN_BLOCKS}; the budget is at least the first call), not --min-blocks {} --max-blocks {asked_max}",
                self.min_blocks
            )
        });
        (min, max, note)
    }

    /// The record of the new search, written to its directory (with `rounds/`): the
    /// commits from good to bad on the first-parent history, each with its subject and
    /// date. `directory` chooses (or makes) the directory once the history is resolved, so
    /// a wrong ref leaves none behind. An error is a sentence for the person who asked.
    pub fn write(
        &self,
        directory: impl FnOnce() -> Result<PathBuf, String>,
    ) -> Result<(PathBuf, BisectRecord), String> {
        let (good, bad) = (self.good, self.bad);
        let top = sys::git::toplevel(self.repo).map_err(|e| e.to_string())?;
        let history = sys::git::first_parent_history(&top, good, bad)
            .map_err(|e| format!("--good {good} --bad {bad}: {e}"))?;
        if history.len() < 2 {
            return Err(format!("--good {good} --bad {bad}: nothing between them"));
        }
        let http = self.config.settings.workload == Workload::Http;
        // The app must be in the repository (checked on good, as every step will).
        if self.history_of == HistoryOf::App {
            AppCommit::resolve(&top, &history[0], &self.config.settings.app_dir, http)
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
        let dir = directory()?;
        if dir.join(BISECT_FILE).exists() {
            return Err(format!(
                "{} holds a bisection already: go on with `rubyrace bisect --resume {}`, or choose another -o",
                dir.display(),
                dir.display()
            ));
        }
        std::fs::create_dir_all(dir.join(ROUNDS_DIR))
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let (min_blocks, max_blocks, _) = self.blocks();
        let (candidates, candidates_why) = super::initial_candidates();
        let record = BisectRecord {
            schema: BISECT_SCHEMA.into(),
            experiment: std::path::absolute(self.experiment_file).map_err(|e| e.to_string())?,
            config: self.config.label.clone(),
            repo: top,
            history_of: self.history_of,
            configure_opts: self.configure_opts.clone(),
            good_ref: good.to_string(),
            bad_ref: bad.to_string(),
            metric: self.metric.unwrap_or(if http {
                PrecisionMetric::Throughput
            } else {
                PrecisionMetric::Wall
            }),
            metric_given: self.metric.is_some(),
            metric_chosen: false,
            metric_ends: Vec::new(),
            ends: None,
            min_blocks,
            max_blocks,
            min_change: self.min_change.unwrap_or(DEFAULT_MIN_CHANGE),
            candidates,
            candidates_why,
            commits,
            rounds: Vec::new(),
            skipped: Vec::new(),
            estimates: Vec::new(),
            findings: Vec::new(),
            searching: None,
            next: Vec::new(),
            outcome: None,
            more_than_one_change: false,
            ends_withdrawn: false,
            slurm: self.slurm,
        };
        record.write(&dir).map_err(|e| format!("{e:#}"))?;
        Ok((dir, record))
    }
}

/// A resumed search's budget set to `max` blocks: refused below the blocks already
/// stored; a larger one reopens a search that had ended. `Some` with a line to show when
/// the budget changed.
pub fn set_budget(record: &mut BisectRecord, max: u32) -> Result<Option<String>, String> {
    if max < record.blocks() {
        return Err(format!(
            "--max-blocks {max} is below the {} blocks stored; give a larger budget to go on",
            record.blocks()
        ));
    }
    if max == record.max_blocks {
        return Ok(None);
    }
    let line = format!("the budget goes from {} to {max} blocks", record.max_blocks);
    record.max_blocks = max;
    record.outcome = None;
    Ok(Some(line))
}

/// What `dir` is when it is not a bisection's directory (for `--resume`): a round of one,
/// a check, a run, or nothing rubyrace wrote. `None` for a bisection's.
pub fn not_a_bisection(dir: &Path) -> Option<String> {
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
            let search: PathBuf = dir.ancestors().nth(2).unwrap_or(dir).to_path_buf();
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A record of `blocks` blocks in one round, with a budget of `max_blocks`, ended.
    fn record(max_blocks: u32, blocks: u32) -> BisectRecord {
        serde_json::from_value(serde_json::json!({
            "schema": BISECT_SCHEMA, "experiment": "e.toml", "config": "app", "repo": "/r",
            "history_of": "app", "good_ref": "a", "bad_ref": "b", "metric": "throughput",
            "metric_given": false, "metric_chosen": false,
            "min_blocks": 3, "max_blocks": max_blocks, "min_change": 0.02,
            "candidates": 6, "candidates_why": "", "commits": [], "skipped": [],
            "rounds": [{"dir": "rounds/01", "commits": [0, 1], "blocks": blocks, "measuring_s": 1.0}],
            "outcome": {"kind": "nothing_to_find", "exhausted": true}, "more_than_one_change": false,
        }))
        .expect("a record")
    }

    /// A budget below the blocks stored is refused; the same budget changes nothing; a
    /// larger one is taken and reopens an ended search.
    #[test]
    fn a_resumed_budget_is_refused_below_the_stored_blocks_and_reopens_above() {
        let mut r = record(20, 12);
        assert_eq!(r.blocks(), 12);
        let refused = set_budget(&mut r, 10).unwrap_err();
        assert!(refused.contains("below the 12 blocks stored"), "{refused}");
        assert_eq!(set_budget(&mut r, 20), Ok(None));
        let said = set_budget(&mut r, 40).unwrap().expect("a change");
        assert_eq!(said, "the budget goes from 20 to 40 blocks");
        assert_eq!(r.max_blocks, 40);
        assert!(r.outcome.is_none());
    }

    /// A directory that is no bisection's is named for what it is.
    #[test]
    fn a_directory_that_is_not_a_bisection_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nothing");
        assert!(not_a_bisection(&missing)
            .unwrap()
            .contains("does not exist"));
        assert!(not_a_bisection(dir.path())
            .unwrap()
            .contains("holds no bisect.json and no results"));
        std::fs::write(dir.path().join(BISECT_FILE), "{}").unwrap();
        assert_eq!(not_a_bisection(dir.path()), None);
    }
}
