//! A series: one experiment's configuration (against its baseline, or alone on one host
//! kind) and one metric, in commit order. Its change points come from
//! `stats::changepoint` on the log of each point, each point weighted by its own interval;
//! a change is told as the factor from the level before to the level after, with its 95%
//! interval, the last commit before and the first after, and the `rubyrace bisect` command
//! that would settle the commits between when there are more than one.

use serde::Serialize;
use stats::changepoint::{self, Point, Settings};

use crate::import::PointKind;

/// One run's point of a series.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SeriesPoint {
    pub run_id: i64,
    pub commit: Option<String>,
    pub subject: String,
    pub commit_date: Option<String>,
    pub commit_order: Option<i64>,
    pub created_at: String,
    /// The run's results directory, where its report is.
    pub dir: String,
    pub repo: Option<String>,
    pub experiment_file: String,
    pub value: f64,
    pub lo: f64,
    pub hi: f64,
    pub confidence: f64,
    pub blocks: usize,
}

impl SeriesPoint {
    /// The point on the log scale with its standard error, from its interval. The interval
    /// is Student's t over the point's blocks (the report's), so its half-width is t with
    /// blocks − 1 degrees of freedom standard errors: with three blocks, 4.30 of them, not
    /// 1.96 (the normal's quantile would make such a point look twice as rough as it is).
    fn log_point(&self) -> Point {
        let z = stats::dist::t_quantile(0.5 + self.confidence / 2.0, self.blocks.max(2) - 1);
        let value = self.value.ln();
        let se = if self.lo > 0.0 && self.hi > self.lo {
            (self.hi.ln() - self.lo.ln()) / (2.0 * z)
        } else {
            ((self.hi - self.lo) / (2.0 * z * self.value)).abs()
        };
        Point { value, se }
    }

    /// The commit, short, or the run's date when it has none.
    pub fn commit_short(&self) -> String {
        match &self.commit {
            Some(c) => c.chars().take(12).collect(),
            None => self.created_at.clone(),
        }
    }
}

/// A series and its points in commit order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Series {
    /// `experiment · label · metric` (`· host kind` for an absolute figure).
    pub key: String,
    pub experiment: String,
    pub label: String,
    pub metric: String,
    #[serde(serialize_with = "kind_name")]
    pub kind: PointKind,
    pub host_kind: Option<String>,
    pub higher_is_better: bool,
    pub points: Vec<SeriesPoint>,
}

fn kind_name<S: serde::Serializer>(kind: &PointKind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(kind.as_str())
}

/// A change found in a series.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Change {
    /// The first point after the change.
    pub index: usize,
    /// The level after ÷ the level before, and its 95% interval.
    pub factor: f64,
    pub factor_low: f64,
    pub factor_high: f64,
    pub p_value: f64,
    /// The change makes the metric worse (slower, more memory, more latency).
    pub worse: bool,
    /// The last point before the change and the first after.
    pub before: SeriesPoint,
    pub after: SeriesPoint,
    /// Commits strictly between the two, when both are known in first-parent order.
    pub commits_between: Option<i64>,
    /// The bisection that settles the commits between, when there are any (or their
    /// number is not known).
    pub bisect: Option<String>,
}

/// A slide over a stretch of points that a line explains better than steps
/// (`stats::changepoint::Drift`): no one commit to bisect.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Drift {
    /// The stretch's first point and one past its last.
    pub start: usize,
    pub end: usize,
    /// The level at the stretch's last point ÷ the level at its first, on the line, with
    /// its 95% interval.
    pub factor: f64,
    pub factor_low: f64,
    pub factor_high: f64,
    pub p_value: f64,
    /// The line's level at the first point and at the last, in the series' units (the
    /// chart draws the line between them).
    pub level_first: f64,
    pub level_last: f64,
    /// The slide makes the metric worse.
    pub worse: bool,
    pub first: SeriesPoint,
    pub last: SeriesPoint,
}

/// What a series holds: its changes (steps at a commit) and its drifts (slides).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Analysis {
    pub changes: Vec<Change>,
    pub drifts: Vec<Drift>,
}

/// Whether a factor (after ÷ before) is for the worse on `series`.
fn worse(series: &Series, factor: f64) -> bool {
    if series.higher_is_better {
        factor < 1.0
    } else {
        factor > 1.0
    }
}

/// The change points and drifts of `series`.
pub fn analyse(series: &Series, settings: &Settings) -> Analysis {
    let points: Vec<Point> = series.points.iter().map(SeriesPoint::log_point).collect();
    let found = changepoint::changes_and_drifts(&points, settings);
    let drifts = found
        .drifts
        .iter()
        .map(|d| {
            let (lo, hi) = d.total_interval(0.95);
            let factor = d.total().exp();
            Drift {
                start: d.start,
                end: d.end,
                factor,
                factor_low: lo.exp(),
                factor_high: hi.exp(),
                p_value: d.p_value,
                level_first: d.level.exp(),
                level_last: (d.level + d.total()).exp(),
                worse: worse(series, factor),
                first: series.points[d.start].clone(),
                last: series.points[d.end - 1].clone(),
            }
        })
        .collect();
    let changes = found
        .changes
        .into_iter()
        .map(|c| {
            let (lo, hi) = c.step_interval(0.95);
            let before = series.points[c.index - 1].clone();
            let after = series.points[c.index].clone();
            let factor = c.step.exp();
            let worse = worse(series, factor);
            let commits_between = match (before.commit_order, after.commit_order) {
                (Some(b), Some(a)) => Some((a - b - 1).max(0)),
                _ => None,
            };
            let bisect = bisect_command(series, &before, &after, commits_between);
            Change {
                index: c.index,
                factor,
                factor_low: lo.exp(),
                factor_high: hi.exp(),
                p_value: c.p_value,
                worse,
                before,
                after,
                commits_between,
                bisect,
            }
        })
        .collect();
    Analysis { changes, drifts }
}

/// `rubyrace bisect FILE --app-repo REPO --good BEFORE --bad AFTER [--config LABEL]`, when
/// both commits are known, differ, and have commits between them (or an unknown number).
fn bisect_command(
    series: &Series,
    before: &SeriesPoint,
    after: &SeriesPoint,
    between: Option<i64>,
) -> Option<String> {
    let (good, bad) = (before.commit.as_ref()?, after.commit.as_ref()?);
    if good == bad || between == Some(0) {
        return None;
    }
    let repo = after.repo.as_deref().unwrap_or(".");
    // A check's series is its one configuration; a run's, the configuration compared.
    let config = match series.kind {
        PointKind::Ratio if series.label == "head/base" => None,
        PointKind::Ratio => series.label.split('/').next(),
        PointKind::Absolute => Some(series.label.as_str()),
    };
    let mut command = format!(
        "rubyrace bisect {} --app-repo {} --good {} --bad {}",
        after.experiment_file,
        repo,
        &good[..good.len().min(12)],
        &bad[..bad.len().min(12)],
    );
    if let Some(config) = config {
        command.push_str(&format!(" --config {config}"));
    }
    // The metric, by the name `--metric` takes (the report's).
    if series.metric != "throughput" {
        command.push_str(&format!(" --metric {}", series.metric));
    }
    Some(command)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A ratio series of 30 commits (orders 0, 2, 4, ...: one commit between each two
    /// measured), each point ±1% at 95%, stepping 5% up at point 12 and 3% down at 22.
    pub(crate) fn stepped() -> Series {
        let mut rng = stats::rng::SeededRng::new(52);
        let sd = 0.01 / 1.96;
        let points = (0..30)
            .map(|i| {
                let level = match i {
                    0..12 => 1.0f64,
                    12..22 => 1.05,
                    _ => 1.05 * 0.97,
                };
                let value = level * (sd * rng.standard_normal()).exp();
                SeriesPoint {
                    run_id: i,
                    commit: Some(format!("{:040x}", 1000 + i)),
                    subject: format!("commit {i}"),
                    commit_date: None,
                    commit_order: Some(2 * i),
                    created_at: format!("2026-11-{:02}", i + 1),
                    dir: format!("/results/{i}"),
                    repo: Some("/src/app".into()),
                    experiment_file: "/perf/nightly.toml".into(),
                    value,
                    lo: value * (-0.01f64).exp(),
                    hi: value * 0.01f64.exp(),
                    confidence: 0.95,
                    blocks: 7,
                }
            })
            .collect();
        Series {
            key: "nightly · yjit/interp · throughput".into(),
            experiment: "nightly".into(),
            label: "yjit/interp".into(),
            metric: "throughput".into(),
            kind: PointKind::Ratio,
            host_kind: None,
            higher_is_better: true,
            points,
        }
    }

    #[test]
    fn both_planted_steps_are_found_with_intervals_that_hold_them() {
        let series = stepped();
        let changes = analyse(&series, &Settings::default()).changes;
        assert_eq!(
            changes.iter().map(|c| c.index).collect::<Vec<_>>(),
            vec![12, 22],
            "{changes:?}"
        );
        let (up, down) = (&changes[0], &changes[1]);
        assert!(up.factor_low <= 1.05 && 1.05 <= up.factor_high, "{up:?}");
        assert!(
            down.factor_low <= 0.97 && 0.97 <= down.factor_high,
            "{down:?}"
        );
        assert!(!up.worse && down.worse);
        assert_eq!(up.commits_between, Some(1));
        let bisect = down.bisect.as_deref().unwrap();
        assert!(
            bisect.starts_with("rubyrace bisect /perf/nightly.toml --app-repo /src/app --good ")
                && bisect.ends_with(" --config yjit"),
            "{bisect}"
        );
        assert!(bisect.contains(&format!(
            "--good {}",
            &down.before.commit.as_ref().unwrap()[..12]
        )));
        assert!(bisect.contains(&format!(
            "--bad {}",
            &down.after.commit.as_ref().unwrap()[..12]
        )));
    }

    /// `stepped`'s commits with no step, sliding down 0.5% a commit from the first to the
    /// last (about 13.5% over 30 points), each point ±1% at 95%.
    pub(crate) fn sliding() -> Series {
        let mut series = stepped();
        let mut rng = stats::rng::SeededRng::new(7);
        let sd = 0.01 / 1.96;
        for (i, p) in series.points.iter_mut().enumerate() {
            let value = (-0.005 * i as f64 + sd * rng.standard_normal()).exp();
            p.value = value;
            p.lo = value * (-0.01f64).exp();
            p.hi = value * 0.01f64.exp();
        }
        series
    }

    #[test]
    fn a_slide_is_one_drift_and_no_step_to_bisect() {
        let series = sliding();
        let found = analyse(&series, &Settings::default());
        assert!(found.changes.is_empty(), "{:?}", found.changes);
        assert_eq!(found.drifts.len(), 1, "{:?}", found.drifts);
        let d = &found.drifts[0];
        assert_eq!((d.start, d.end), (0, 30));
        // 29 commits of −0.5%: exp(−0.145) = 0.865.
        assert!(d.factor_low <= 0.865 && 0.865 <= d.factor_high, "{d:?}");
        assert!(d.worse);
        assert_eq!(d.first.subject, "commit 0");
        assert_eq!(d.last.subject, "commit 29");
    }

    #[test]
    fn adjacent_commits_need_no_bisection() {
        let mut series = stepped();
        for (i, p) in series.points.iter_mut().enumerate() {
            p.commit_order = Some(i as i64);
        }
        let changes = analyse(&series, &Settings::default()).changes;
        assert!(changes
            .iter()
            .all(|c| c.commits_between == Some(0) && c.bisect.is_none()));
    }
}
