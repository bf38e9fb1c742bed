//! A results directory → the run the history adds: what it measured at which commit, on
//! which kind of host, as the report's own analysis states it (the same ratios and
//! intervals `rubyrace report` prints), so a point in the history is never a different
//! number from the run's report.
//!
//! - A run or a check that compares configurations gives one point per configuration
//!   against the baseline and per metric: the ratio with its interval (a check: the head
//!   against its base). The ratio cancels what the host does to both sides, so these
//!   series are not split by host.
//! - A run of one configuration gives its throughput (the mean over its valid trials, with
//!   the mean's t interval), whose series is split by host kind (CPU model and count,
//!   kernel, the Ruby's build): a figure of one machine says nothing of another's.
//! - The commit is the head's (a check), else the app's as the trials recorded it
//!   (`environment.app_git`, of the first trial whose app is in a repository). Its subject, author date and first-parent position are asked
//!   of its repository when it is at hand; without one, the run's date orders it.

use std::path::Path;

use anyhow::{bail, Context, Result};

/// What a point is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PointKind {
    /// A configuration against the baseline: a ratio.
    Ratio,
    /// A configuration's own figure.
    Absolute,
}

impl PointKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PointKind::Ratio => "ratio",
            PointKind::Absolute => "absolute",
        }
    }

    pub fn parse(s: &str) -> PointKind {
        if s == "absolute" {
            PointKind::Absolute
        } else {
            PointKind::Ratio
        }
    }
}

/// The commit a run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct CommitInfo {
    pub hash: String,
    pub subject: String,
    pub author_date: String,
    /// Its first-parent position (`git rev-list --first-parent --count`), when its
    /// repository was at hand.
    pub order: Option<i64>,
    /// The working tree differed from it.
    pub dirty: bool,
    /// The repository's working tree, as the run saw it.
    pub repo: Option<String>,
}

/// One point of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct PointRecord {
    /// `yjit/interp`, `head/base`, or a configuration's name for an absolute figure.
    pub label: String,
    /// `throughput`, `latency_p50`, `latency_p99`, `cpu_per_request`, ... (the report's).
    pub metric: String,
    pub kind: PointKind,
    /// The ratio, or the figure.
    pub value: f64,
    pub lo: f64,
    pub hi: f64,
    /// The interval's level.
    pub confidence: f64,
    /// Blocks (or trials) behind it.
    pub blocks: usize,
    pub higher_is_better: bool,
}

impl PointRecord {
    /// The series the point belongs to: the experiment, the label and the metric, and for
    /// an absolute figure the host kind.
    pub fn series_key(&self, run: &ImportedRun) -> String {
        match self.kind {
            PointKind::Ratio => format!("{} · {} · {}", run.experiment, self.label, self.metric),
            PointKind::Absolute => format!(
                "{} · {} · {} · {}",
                run.experiment, self.label, self.metric, run.host_kind
            ),
        }
    }
}

/// A run read from its results directory, ready to add.
#[derive(Clone, Debug, PartialEq)]
pub struct ImportedRun {
    /// Its identity: the kind, the experiment and when its directory was created. A copy of
    /// the directory, or the same one after a resume, is the same run.
    pub key: String,
    /// `run` or `check`.
    pub kind: String,
    pub experiment: String,
    pub experiment_file: String,
    pub dir: String,
    pub created_at: String,
    pub commit: Option<CommitInfo>,
    pub host_kind: String,
    pub design: String,
    pub rubyrace_version: String,
    pub points: Vec<PointRecord>,
}

/// The metrics a history keeps of a comparison (the report's names).
const METRICS: &[&str] = &[
    "throughput",
    "latency_p50",
    "latency_p99",
    "cpu_per_request",
    "wall",
];

/// Reads `dir`: a run or a check (one run, `read_results`), or a bisection (a run per
/// commit it measured, `read_bisection`).
pub fn read_dir(dir: &Path) -> Result<Vec<ImportedRun>> {
    if dir.join(results::bisect::BISECT_FILE).is_file() {
        read_bisection(dir)
    } else {
        read_results(dir).map(|run| vec![run])
    }
}

/// A bisection's directory: a run per commit it measured, each one point, the commit's
/// cost against the good end on the metric searched (above 1× is slower) with its interval
/// from every block that measured both. Their series is the bisection's own (its label
/// names the configuration and the good end: every cost is against that commit), so a
/// bisection's points never mix with a nightly series against a fixed baseline. Added
/// again, a bisection resumed since replaces its points.
pub fn read_bisection(dir: &Path) -> Result<Vec<ImportedRun>> {
    let record = results::bisect::BisectRecord::read(dir)?;
    let Some(first_round) = record.rounds.first() else {
        bail!(
            "{} is a bisection that has measured nothing yet",
            dir.display()
        );
    };
    let round = dir.join(&first_round.dir);
    let store = results::store::Store::open_read_only(&round)
        .with_context(|| format!("cannot read {}", round.display()))?;
    let meta = |key: &str| -> Result<String> { Ok(store.meta(key)?.unwrap_or_default()) };
    let (experiment, created_at) = (meta("experiment_name")?, meta("created_at")?);
    let rubyrace_version = meta("rubyrace_version")?;
    let Some(good) = record.commits.first() else {
        bail!("{} is a bisection without commits", dir.display());
    };
    let good_short: String = good.hash.chars().take(12).collect();
    let top = sys::git::toplevel(&record.repo).ok();
    let absolute = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let runs: Vec<ImportedRun> = record
        .estimates
        .iter()
        .filter_map(|e| {
            let commit = record.commits.get(e.commit)?;
            let (lo, hi) = (e.low?, e.high?);
            let order = top
                .as_deref()
                .and_then(|t| sys::git::first_parent_position(t, &commit.hash).ok());
            Some(ImportedRun {
                key: format!("bisect:{experiment}:{created_at}:{}", commit.hash),
                kind: "bisect".into(),
                experiment: experiment.clone(),
                experiment_file: record.experiment.display().to_string(),
                dir: absolute.display().to_string(),
                created_at: created_at.clone(),
                commit: Some(CommitInfo {
                    hash: commit.hash.clone(),
                    subject: commit.subject.clone(),
                    author_date: commit.date.clone(),
                    order,
                    dirty: false,
                    repo: top.as_ref().map(|t| t.display().to_string()),
                }),
                host_kind: String::new(),
                design: "bisect".into(),
                rubyrace_version: rubyrace_version.clone(),
                points: vec![PointRecord {
                    label: format!("{} against {good_short} (bisect)", record.config),
                    metric: format!("{} cost", record.metric.name()),
                    kind: PointKind::Ratio,
                    value: e.ratio,
                    lo,
                    hi,
                    confidence: 0.95,
                    blocks: e.blocks,
                    higher_is_better: false,
                }],
            })
        })
        .collect();
    if runs.is_empty() {
        bail!(
            "{} is a bisection with no commit measured with an interval yet",
            dir.display()
        );
    }
    Ok(runs)
}

/// Reads the results directory `dir`.
///
/// Errors that say what to do: not a results directory; a bisection (its commits are
/// points of their own, not yet imported); a smoke run (two short blocks prove that a setup
/// runs, not how fast it is); a directory without a valid trial.
pub fn read_results(dir: &Path) -> Result<ImportedRun> {
    if dir.join(results::bisect::BISECT_FILE).is_file() {
        bail!(
            "{} is a bisection: read it with `read_dir`, which gives a run per commit it measured",
            dir.display()
        );
    }
    if !dir.join("results.db").is_file() {
        bail!(
            "{} is not a results directory (no results.db): give the directory `rubyrace run -o` or `check -o` wrote",
            dir.display()
        );
    }
    let store = results::store::Store::open_read_only(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?;
    let meta = |key: &str| -> Result<String> { Ok(store.meta(key)?.unwrap_or_default()) };
    let experiment = meta("experiment_name")?;
    let created_at = meta("created_at")?;
    let kind = if store.gate()?.is_some() {
        "check"
    } else {
        "run"
    };
    let options = report::Options {
        command: "rubyrace history add".into(),
        ..report::Options::default()
    };
    let (analysis, sources) = report::build(&[dir.to_path_buf()], &options)?;
    if sources.iter().any(|s| s.smoke) {
        bail!(
            "{} is a smoke run (--smoke): its figures say that the setup runs, not how fast; add full runs",
            dir.display()
        );
    }
    let trials = store.trial_results()?;
    let Some(first) = trials
        .iter()
        .find(|t| t.status == results::record::TrialStatus::Valid)
    else {
        bail!(
            "{} holds no valid trial: nothing to remember",
            dir.display()
        );
    };
    let machine = &first.environment.machine;
    let host_kind = format!(
        "{} × {}, Linux {}, {}",
        machine.cpu_model,
        machine.cpus_online,
        machine.kernel,
        first
            .environment
            .ruby_description
            .clone()
            .unwrap_or_else(|| "ruby ?".into())
    );
    let commit = if kind == "check" {
        trials
            .iter()
            .find(|t| t.id.label == "head")
            .and_then(|t| t.settings.app_commit.as_ref())
            .map(|c| (c.commit.clone(), false, Some(c.repo.clone())))
    } else {
        // The first trial whose app was in a repository: a fixed baseline's app may not be.
        trials.iter().find_map(|t| {
            let g = t.environment.app_git.as_ref()?;
            Some((g.sha.clone(), g.dirty, Some(t.settings.app_dir.clone())))
        })
    }
    .map(|(hash, dirty, repo)| commit_info(hash, dirty, repo.as_deref(), &created_at));

    let mut points = Vec::new();
    for c in &analysis.comparisons {
        // Every comparison with a finite interval is a point, also one whose verdict is
        // "cannot tell" (too few effective blocks): its wide interval weighs it down in the
        // change-point test, and a night is not dropped from the series.
        let finite = c.ci_low > 0.0 && c.ci_low.is_finite() && c.ci_high.is_finite();
        if !METRICS.contains(&c.metric.as_str()) || !finite || c.ratio <= 0.0 {
            continue;
        }
        points.push(PointRecord {
            label: format!("{}/{}", c.cohort, c.baseline),
            metric: c.metric.clone(),
            kind: PointKind::Ratio,
            value: c.ratio,
            lo: c.ci_low,
            hi: c.ci_high,
            confidence: c.confidence,
            blocks: c.n,
            higher_is_better: c.higher_is_better,
        });
    }
    if analysis.cohorts.len() == 1 {
        let cohort = &analysis.cohorts[0];
        if let Some(t) = cohort
            .throughput
            .as_ref()
            .filter(|t| t.n >= 2 && t.mean > 0.0)
        {
            let half = stats::dist::t_quantile(0.975, t.n - 1) * t.sd / (t.n as f64).sqrt();
            points.push(PointRecord {
                label: cohort.name.clone(),
                metric: "throughput".into(),
                kind: PointKind::Absolute,
                value: t.mean,
                lo: t.mean - half,
                hi: t.mean + half,
                confidence: 0.95,
                blocks: t.n,
                higher_is_better: true,
            });
        }
    }
    if points.is_empty() {
        bail!(
            "{} has no comparison with an interval and no single configuration's throughput to remember",
            dir.display()
        );
    }
    let absolute = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    Ok(ImportedRun {
        key: format!("{kind}:{experiment}:{created_at}"),
        kind: kind.into(),
        experiment,
        experiment_file: meta("experiment_file")?,
        dir: absolute.display().to_string(),
        created_at,
        commit,
        host_kind,
        design: analysis
            .sources
            .first()
            .map(|s| s.design.clone())
            .unwrap_or_default(),
        rubyrace_version: meta("rubyrace_version")?,
        points,
    })
}

/// The commit's subject, author date and first-parent position, asked of `repo` (any
/// directory of its working tree, `sys::git`); what cannot be asked is left empty, and the
/// run's date stands for the commit's.
fn commit_info(hash: String, dirty: bool, repo: Option<&Path>, created_at: &str) -> CommitInfo {
    let top = repo.and_then(|r| sys::git::toplevel(r).ok());
    let (subject, author_date) = top
        .as_deref()
        .and_then(|t| sys::git::describe_commit(t, &hash).ok())
        .unwrap_or_else(|| (String::new(), created_at.to_string()));
    let order = top
        .as_deref()
        .and_then(|t| sys::git::first_parent_position(t, &hash).ok());
    CommitInfo {
        hash,
        subject,
        author_date,
        order,
        dirty,
        repo: top.map(|t| t.display().to_string()),
    }
}
