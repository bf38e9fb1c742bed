//! Slow slides told apart from steps. E-divisive cuts a series that slides (a little slower
//! at every commit for a month) into two or three steps in the same direction, each real
//! in size but none a commit to bisect. Each run of neighbouring changes in one direction is
//! therefore looked at again over its span (from the change before it, or the series'
//! start, to the change after it, or the series' end) by weighted least squares, with two
//! kinds of model:
//!
//! - the steps as found: a level between each two changes;
//! - a line, with the steps the line does not explain: from a line and a step at every
//!   change, the least significant step is dropped one at a time, giving models with every
//!   step, all but one, ..., none. The line may bend into a level before its first point
//!   and after its last (a ramp, for a slide that starts or stops within the span): each
//!   model takes the ramp that fits it best on a grid (`best_ramp`), each bend one
//!   parameter.
//!
//! The model with the smallest Bayesian information criterion, n·ln(RSS/n) + k·ln n, wins;
//! each step counts two parameters (its size and where it is, which the search chose), the
//! line one more than a level. When the winner has the line and its slope is significant at
//! the search's own `max_p`, the span is reported as a [`Drift`], and only the winner's
//! steps stay changes; otherwise the changes stand as found. A stretch between two changes
//! that stand (or a whole series without one) is a drift when a line beats its level by
//! the same criterion with a slope significant at `max_p`: a slide too steady for the
//! search to cut, whose points' residuals from the line are not alike between neighbours.
//!
//! Each point is weighted by its own standard error, and the model's residual variance
//! scales the coefficients' errors when the points scatter more than their errors say
//! (never below them): with equal errors this is ordinary least squares. Residuals that
//! neighbours share (a series that wanders rather than slides) widen the errors further by
//! the AR(1) allowance the split test uses.

use super::{ChangePoint, Point, Settings, MIN_SE};
use crate::dist::{t_cdf, t_quantile};

/// A slide over a span of points: the line the span's points follow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Drift {
    /// The span's first point and one past its last.
    pub start: usize,
    pub end: usize,
    /// The line's value at the span's first point (before any step the span keeps).
    pub level: f64,
    /// The slope per point, on the points' scale, and its standard error.
    pub slope: f64,
    pub slope_se: f64,
    /// Degrees of freedom of the model.
    pub df: usize,
    pub p_value: f64,
}

impl Drift {
    /// The points the slope runs over from the span's first point to its last.
    fn run(&self) -> f64 {
        (self.end - self.start).saturating_sub(1) as f64
    }

    /// The change from the span's first point to its last, on the points' scale.
    pub fn total(&self) -> f64 {
        self.slope * self.run()
    }

    /// The interval of `total` at `level` (0.95: a 95% interval).
    pub fn total_interval(&self, level: f64) -> (f64, f64) {
        let t = t_quantile(1.0 - (1.0 - level) / 2.0, self.df.max(1));
        let half = t * self.slope_se * self.run();
        (self.total() - half, self.total() + half)
    }
}

/// `changes` (in index order, as `change_points` gives them) with the runs a line explains
/// taken out as drifts: the changes that stand, and the drifts, both in index order.
pub fn separate(
    points: &[Point],
    changes: Vec<ChangePoint>,
    settings: &Settings,
) -> (Vec<ChangePoint>, Vec<Drift>) {
    let mut kept = Vec::new();
    let mut drifts = Vec::new();
    let mut i = 0;
    while i < changes.len() {
        // A run of neighbouring changes in one direction, and its span.
        let up = changes[i].step > 0.0;
        let mut j = i + 1;
        while j < changes.len() && (changes[j].step > 0.0) == up {
            j += 1;
        }
        let start = if i == 0 { 0 } else { changes[i - 1].index };
        let end = changes.get(j).map_or(points.len(), |c| c.index);
        let group = &changes[i..j];
        match look_again(&points[start..end], start, group, settings) {
            Some((steps, drift)) => {
                kept.extend(group.iter().filter(|c| steps.contains(&c.index)).copied());
                drifts.push(drift);
            }
            None => kept.extend_from_slice(group),
        }
        i = j;
    }
    // A stretch between two changes (or the whole series) that slides without being cut.
    let bounds: Vec<usize> = std::iter::once(0)
        .chain(kept.iter().map(|c| c.index))
        .chain(std::iter::once(points.len()))
        .collect();
    for w in bounds.windows(2) {
        let (start, end) = (w[0], w[1]);
        if drifts.iter().any(|d| d.start < end && start < d.end) {
            continue;
        }
        if let Some(d) = slide(&points[start..end], start, settings) {
            drifts.push(d);
        }
    }
    drifts.sort_by_key(|d| d.start);
    (kept, drifts)
}

/// The stretch `points` (starting at `offset`) as a drift, when a line fits it better
/// than a level (by the information criterion) and its slope is significant at `max_p`.
fn slide(points: &[Point], offset: usize, settings: &Settings) -> Option<Drift> {
    let n = points.len();
    let level = Fit::of(points, None, &[])?;
    let line = best_ramp(points, &[], n - 1, 0)?;
    (line.bic() < level.bic() && line.p_value(1) <= settings.max_p).then(|| line.drift(offset))
}

/// The run `group` over its span `points` (starting at `offset` in the series): the
/// indices of the steps the line leaves standing and the drift, or `None` when the changes
/// stand as found (the module's comment).
fn look_again(
    points: &[Point],
    offset: usize,
    group: &[ChangePoint],
    settings: &Settings,
) -> Option<(Vec<usize>, Drift)> {
    let found: Vec<usize> = group.iter().map(|c| c.index - offset).collect();
    let steps_only = Fit::of(points, None, &found)?;
    let (first, last) = (found[0], found[found.len() - 1]);
    let mut best: Option<(f64, Vec<usize>, Fit)> = None;
    let mut steps = found.clone();
    loop {
        // The ramp that fits best with these steps.
        let fit = best_ramp(points, &steps, first, last)?;
        let bic = fit.bic();
        if best.as_ref().is_none_or(|(b, _, _)| bic < *b) {
            best = Some((bic, steps.clone(), fit.clone()));
        }
        // The least significant step, given the line and the others, goes next.
        let weakest = (0..steps.len())
            .map(|k| (k, fit.p_value(2 + k)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        match weakest {
            Some((k, _)) => {
                steps.remove(k);
            }
            None => break,
        }
    }
    let (bic, steps, fit) = best?;
    if bic >= steps_only.bic() || fit.p_value(1) > settings.max_p {
        return None;
    }
    Some((
        steps.into_iter().map(|s| s + offset).collect(),
        fit.drift(offset),
    ))
}

/// The best fit (smallest information criterion) of `points` with `steps` and a ramp: the
/// line over the whole span, or bent into a level before its first point (no later than
/// `first`, the first change found in the span) and after its last (no earlier than
/// `last`, the last change). The bends are placed on a grid of at most [`BENDS`] places
/// each, one bend at a time (the first with the line running to the end, then the last
/// with the first fixed); a ramp is at least [`MIN_RAMP`] points, or a quarter of the span,
/// long.
fn best_ramp(points: &[Point], steps: &[usize], first: usize, last: usize) -> Option<Fit> {
    let n = points.len();
    let grid = |lo: usize, hi: usize| -> Vec<usize> {
        if hi <= lo {
            return vec![lo];
        }
        let places = (hi - lo).min(BENDS - 1);
        let mut at: Vec<usize> = (0..=places).map(|k| lo + (hi - lo) * k / places).collect();
        at.dedup();
        at
    };
    let long = MIN_RAMP.max(n / 4);
    let fit = |from: usize, to: usize| {
        (to >= from && to - from + 1 >= long)
            .then(|| Fit::of(points, Some(Ramp { from, to }), steps))
            .flatten()
    };
    let best = |fits: Vec<Fit>| fits.into_iter().min_by(|a, b| a.bic().total_cmp(&b.bic()));
    let end = n - 1;
    let from_fit = best(
        grid(0, first.min(end))
            .into_iter()
            .filter_map(|from| fit(from, end))
            .collect(),
    )?;
    let from = from_fit.ramp.from;
    best(
        grid(last.saturating_sub(1).min(end), end)
            .into_iter()
            .filter_map(|to| fit(from, to))
            .chain(std::iter::once(from_fit))
            .collect(),
    )
}

/// At most this many places for each bend of a ramp (`ramps`).
const BENDS: usize = 12;

/// A ramp is at least this many points long: a shorter one is a step drawn slowly.
const MIN_RAMP: usize = 8;

/// A line from point `from` to point `to` (both in the span), level before and after.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Ramp {
    from: usize,
    to: usize,
}

/// A weighted least-squares fit of an intercept, with `ramp` a slope over the points'
/// positions from its first point to its last (level before and after: a line over the
/// whole span has no bend), and a step at each of `steps` (an indicator of the points from
/// it on).
#[derive(Clone, Debug)]
struct Fit {
    coef: Vec<f64>,
    /// (XᵀWX)⁻¹ times the residual scale.
    cov: Vec<Vec<f64>>,
    df: usize,
    n: usize,
    /// The weighted residual sum of squares.
    rss: f64,
    /// Parameters the information criterion counts: one a level, a slope or a bend, two a
    /// step.
    parameters: usize,
    /// The ramp, and the mean of its column (the intercept is the level there).
    ramp: Ramp,
    centre: f64,
}

impl Fit {
    fn of(points: &[Point], ramp: Option<Ramp>, steps: &[usize]) -> Option<Fit> {
        let n = points.len();
        let p = 1 + usize::from(ramp.is_some()) + steps.len();
        if n < p + 2 {
            return None;
        }
        let along = |i: usize| ramp.map_or(0.0, |r| i.clamp(r.from, r.to) as f64);
        let centre = (0..n).map(along).sum::<f64>() / n as f64;
        // The design, row by row (n × p), built once.
        let mut x = Vec::with_capacity(n * p);
        for i in 0..n {
            x.push(1.0);
            if ramp.is_some() {
                x.push(along(i) - centre);
            }
            x.extend(steps.iter().map(|&s| f64::from(u8::from(i >= s))));
        }
        let row = |i: usize| &x[i * p..(i + 1) * p];
        let weight = |pt: &Point| 1.0 / pt.se.max(MIN_SE).powi(2);
        let mut a = vec![vec![0.0; p]; p];
        let mut b = vec![0.0; p];
        for (i, pt) in points.iter().enumerate() {
            let (x, w) = (row(i), weight(pt));
            for r in 0..p {
                b[r] += w * x[r] * pt.value;
                for c in 0..p {
                    a[r][c] += w * x[r] * x[c];
                }
            }
        }
        let inverse = invert(a)?;
        let coef: Vec<f64> = (0..p)
            .map(|r| (0..p).map(|c| inverse[r][c] * b[c]).sum())
            .collect();
        // Residuals in units of each point's error.
        let z: Vec<f64> = points
            .iter()
            .enumerate()
            .map(|(i, pt)| {
                let fitted: f64 = row(i).iter().zip(&coef).map(|(x, c)| x * c).sum();
                weight(pt).sqrt() * (pt.value - fitted)
            })
            .collect();
        let rss: f64 = z.iter().map(|z| z * z).sum();
        // Points scatter at least as much as their own errors say.
        let mut scale = (rss / (n - p) as f64).max(1.0);
        // Neighbours that move together beyond the model (a wandering series) widen the
        // errors by the AR(1) factor and cut the degrees of freedom, as the split test
        // does: the lag-1 autocorrelation of the residuals, one standard error below its
        // bias-corrected estimate.
        let mut df = n - p;
        if rss > 0.0 && n >= 4 {
            let nf = n as f64;
            let r = z.windows(2).map(|w| w[0] * w[1]).sum::<f64>() / rss;
            let phi = (r + (1.0 + 3.0 * r) / nf - 1.0 / nf.sqrt()).clamp(0.0, 0.95);
            let f = (1.0 + phi) / (1.0 - phi);
            scale *= f;
            df = ((nf / f).floor() as usize).saturating_sub(p).max(1);
        }
        let cov = inverse
            .into_iter()
            .map(|r| r.into_iter().map(|v| v * scale).collect())
            .collect();
        Some(Fit {
            coef,
            cov,
            df,
            n,
            rss,
            parameters: 1
                + ramp.map_or(0, |r| {
                    1 + usize::from(r.from > 0) + usize::from(r.to + 1 < n)
                })
                + 2 * steps.len(),
            ramp: ramp.unwrap_or(Ramp { from: 0, to: n - 1 }),
            centre,
        })
    }

    /// The Bayesian information criterion, n·ln(RSS/n) + k·ln n.
    fn bic(&self) -> f64 {
        let n = self.n as f64;
        n * (self.rss.max(f64::MIN_POSITIVE) / n).ln() + self.parameters as f64 * n.ln()
    }

    /// The fit's line as a drift over its points, the first at `offset` in the series.
    fn drift(&self, offset: usize) -> Drift {
        Drift {
            start: offset + self.ramp.from,
            end: offset + self.ramp.to + 1,
            level: self.start_level(),
            slope: self.coef[1],
            slope_se: self.se(1),
            df: self.df,
            p_value: self.p_value(1),
        }
    }

    /// The line's value at the ramp's first point (the intercept is at the centre).
    fn start_level(&self) -> f64 {
        self.coef[0] + self.coef[1] * (self.ramp.from as f64 - self.centre)
    }

    fn se(&self, k: usize) -> f64 {
        self.cov[k][k].max(0.0).sqrt()
    }

    /// The two-sided p-value of coefficient `k` against 0.
    fn p_value(&self, k: usize) -> f64 {
        let t = self.coef[k] / self.se(k);
        if t.is_finite() {
            (2.0 * (1.0 - t_cdf(t.abs(), self.df.max(1)))).clamp(0.0, 1.0)
        } else {
            1.0
        }
    }
}

/// The inverse of a small symmetric positive-definite matrix (Gauss–Jordan with partial
/// pivoting); `None` when it is singular.
fn invert(mut a: Vec<Vec<f64>>) -> Option<Vec<Vec<f64>>> {
    let n = a.len();
    let mut inv: Vec<Vec<f64>> = (0..n)
        .map(|r| (0..n).map(|c| f64::from(u8::from(r == c))).collect())
        .collect();
    let scale = a
        .iter()
        .flatten()
        .fold(0.0f64, |m, v| m.max(v.abs()))
        .max(f64::MIN_POSITIVE);
    for col in 0..n {
        let pivot = (col..n).max_by(|&x, &y| a[x][col].abs().total_cmp(&a[y][col].abs()))?;
        if a[pivot][col].abs() <= 1e-12 * scale {
            return None;
        }
        a.swap(col, pivot);
        inv.swap(col, pivot);
        let d = a[col][col];
        for c in 0..n {
            a[col][c] /= d;
            inv[col][c] /= d;
        }
        for r in 0..n {
            if r != col {
                let f = a[r][col];
                if f != 0.0 {
                    for c in 0..n {
                        a[r][c] -= f * a[col][c];
                        inv[r][c] -= f * inv[col][c];
                    }
                }
            }
        }
    }
    Some(inv)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Points exactly on y = 1 + 0.1·x + 0.5·[x ≥ 5], with unequal errors, give back those
    /// coefficients (the intercept is at the centre, x = 4.5: 1 + 0.45 = 1.45).
    #[test]
    fn an_exact_line_and_step_are_recovered() {
        let points: Vec<Point> = (0..10)
            .map(|i| Point {
                value: 1.0 + 0.1 * i as f64 + if i >= 5 { 0.5 } else { 0.0 },
                se: if i % 2 == 0 { 0.01 } else { 0.02 },
            })
            .collect();
        let fit = Fit::of(&points, Some(Ramp { from: 0, to: 9 }), &[5]).unwrap();
        assert!((fit.coef[0] - 1.45).abs() < 1e-9, "{:?}", fit.coef);
        assert!((fit.coef[1] - 0.1).abs() < 1e-9, "{:?}", fit.coef);
        assert!((fit.coef[2] - 0.5).abs() < 1e-9, "{:?}", fit.coef);
        assert!((fit.start_level() - 1.0).abs() < 1e-9);
    }

    /// A line alone through points that scatter more than their errors, against the
    /// textbook formulas of simple regression (slope Sxy/Sxx, its error √(RSS/(n−2)/Sxx),
    /// computed in Python from the same ten points): the residual scale replaces the
    /// points' errors when it is larger.
    #[test]
    fn a_line_matches_simple_regression() {
        let e = [
            0.013, -0.007, 0.002, -0.011, 0.009, 0.004, -0.012, 0.006, -0.003, 0.001,
        ];
        let points: Vec<Point> = e
            .iter()
            .enumerate()
            .map(|(i, e)| Point {
                value: 0.1 * i as f64 + e,
                se: 0.001,
            })
            .collect();
        let fit = Fit::of(&points, Some(Ramp { from: 0, to: 9 }), &[]).unwrap();
        assert!((fit.coef[0] - 0.4502).abs() < 1e-12, "{:?}", fit.coef);
        assert!(
            (fit.coef[1] - 0.0995878787878788).abs() < 1e-12,
            "{:?}",
            fit.coef
        );
        assert!(
            (fit.se(1) - 0.0009657685578099763).abs() < 1e-12,
            "{}",
            fit.se(1)
        );
        assert_eq!(fit.df, 8);
    }

    /// Level for 40 points, then sliding 0.5% a point for 30 (1% noise, seed 60): one
    /// drift, starting at its bend (within the grid's spacing of point 40), sized about as
    /// planted (29 × 0.5% = 14.5%, on the log scale 0.145), and no step left.
    #[test]
    fn a_slide_after_a_level_stretch_is_found_from_its_bend() {
        let mut rng = crate::rng::SeededRng::new(60);
        let points: Vec<Point> = (0..70)
            .map(|i: usize| Point {
                value: 0.005 * i.saturating_sub(40) as f64 + 0.01 * rng.standard_normal(),
                se: 0.01,
            })
            .collect();
        let found = super::super::changes_and_drifts(&points, &Settings::default());
        assert!(found.changes.is_empty(), "{:?}", found.changes);
        assert_eq!(found.drifts.len(), 1, "{:?}", found.drifts);
        let d = found.drifts[0];
        assert!((34..=46).contains(&d.start), "{d:?}");
        assert_eq!(d.end, 70, "{d:?}");
        // Within 0.02 of the planted 0.145: a bend placed a grid step early or late.
        let (lo, hi) = d.total_interval(0.95);
        assert!(lo <= 0.165 && hi >= 0.125, "{d:?} {lo} {hi}");
    }

    #[test]
    fn a_singular_model_is_refused() {
        // A step at the first point is the intercept again.
        let points = vec![
            Point {
                value: 0.0,
                se: 0.01
            };
            8
        ];
        assert!(Fit::of(&points, Some(Ramp { from: 0, to: 7 }), &[0]).is_none());
        assert!(Fit::of(&points[..3], Some(Ramp { from: 0, to: 2 }), &[]).is_none());
    }
}
