//! Change points in a series of estimates in commit order, each with its own precision (the
//! points of `rubyrace history`): where the series steps, by how much, and how sure.
//!
//! Candidates come from E-divisive means (Matteson & James 2014, "A nonparametric approach
//! for multiple change point analysis of multivariate data", JASA 109; α = 1): within a
//! segment, the split that maximizes the energy divergence Q̂ between its two sides. The
//! search is hierarchical: the series is one segment; each round proposes the best split of
//! every segment, tests each proposal, keeps the most significant if it passes, and splits
//! that segment there; it ends when no proposal passes.
//!
//! The test is this module's own, in place of E-divisive's permutation test (random, so two
//! runs on the same history could disagree; Apache Otava replaced it with Student's t for
//! that reason) and of a plain t-test (which weighs a point measured in two blocks like one
//! measured in forty). Each point brings its standard error from its interval; the points of
//! both sides also scatter beyond their own errors (the machine, the day), estimated as one
//! between-point variance τ² by DerSimonian and Laird's moment estimator pooled over the two
//! sides. Each side's mean is then weighted by 1/(se² + τ²), and the difference of the two
//! means is referred to Student's t with n − 2 degrees of freedom. With equal standard
//! errors this is the pooled two-sample t-test; with τ² = 0 it trusts the points' own
//! intervals. Deterministic: the same points give the same change points.
//!
//! Neighbouring points that move together (a machine's month, a slow trend) are allowed
//! for (`Settings::dependence`, on by default; `test_split_with`): the lag-1
//! autocorrelation of the standardized residuals, taken one standard error below its
//! estimate, widens the step's error by the AR(1) factor and cuts the degrees of freedom.
//! Without it, a wandering series is cut at every bend (docs/history.md: TCPD's F1 0.509
//! without, 0.700 with; independent points are seldom touched).
//!
//! The p-value is that of the split E-divisive chose, with no allowance for the choice, so
//! it is optimistic; the threshold (`Settings::max_p`, 0.001 by default, as Otava's) is set
//! by the seeded simulations in the tests, which measure the false alerts per 100 points on
//! series without a change and the recall of planted steps.

use crate::dist::t_cdf;

mod drift;
pub use drift::Drift;

/// One point of a series: an estimate (on a log scale, so steps are ratios) and its
/// standard error.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub value: f64,
    pub se: f64,
}

/// The points on one side of a change.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Side {
    pub n: usize,
    /// The weighted mean of its points.
    pub mean: f64,
    /// The standard error of that mean.
    pub se: f64,
}

/// A change found in a series.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChangePoint {
    /// The first point after the change.
    pub index: usize,
    /// The segment the change split: its first point and one past its last.
    pub segment: (usize, usize),
    pub before: Side,
    pub after: Side,
    /// `after.mean − before.mean`, and its standard error.
    pub step: f64,
    pub step_se: f64,
    /// Degrees of freedom of the test.
    pub df: usize,
    pub p_value: f64,
    /// E-divisive's divergence of the split.
    pub q_hat: f64,
}

impl ChangePoint {
    /// The step's interval at `level` (0.95: a 95% interval), on the points' scale.
    pub fn step_interval(&self, level: f64) -> (f64, f64) {
        let t = crate::dist::t_quantile(1.0 - (1.0 - level) / 2.0, self.df.max(1));
        (self.step - t * self.step_se, self.step + t * self.step_se)
    }
}

/// How the search decides.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settings {
    /// A split is kept when its test's p-value is at most this.
    pub max_p: f64,
    /// Each side of a split holds at least this many points.
    pub min_segment: usize,
    /// Allow for dependence between neighbouring points (`test_split_with`).
    pub dependence: bool,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            max_p: 0.001,
            min_segment: 2,
            dependence: DEPENDENCE,
        }
    }
}

/// Whether the default settings allow for dependence between neighbouring points.
pub const DEPENDENCE: bool = true;

/// Series longer than this are searched in overlapping windows of this many points
/// (`change_points`): E-divisive's search costs len² time and len²/2 numbers of memory per
/// segment, which a history of 10,000 points per series cannot pay in every `show`.
pub const WINDOW: usize = 500;

/// The change points of `points`, in index order.
///
/// A series of at most [`WINDOW`] points is searched whole (the module's comment). A longer
/// one is searched window by window (windows of `WINDOW` points, each starting half a
/// window after the last, as Apache Otava searches in windows), and the changes found are
/// then confirmed together: each is tested again between the changes on either side of it,
/// and the least significant of those above `max_p` is dropped until none is (two found
/// within `min_segment` points of each other are one change, the more significant).
pub fn change_points(points: &[Point], settings: &Settings) -> Vec<ChangePoint> {
    if points.len() <= WINDOW {
        return search(points, settings);
    }
    let mut candidates: Vec<ChangePoint> = Vec::new();
    let mut start = 0;
    loop {
        let end = (start + WINDOW).min(points.len());
        for mut c in search(&points[start..end], settings) {
            c.index += start;
            candidates.push(c);
        }
        if end == points.len() {
            break;
        }
        start += WINDOW / 2;
    }
    confirm(points, candidates, settings)
}

/// What a series holds: the steps that stand, and the slides (`drift`'s comment), each in
/// index order.
#[derive(Clone, Debug, PartialEq)]
pub struct Found {
    pub changes: Vec<ChangePoint>,
    pub drifts: Vec<Drift>,
}

/// The change points of `points` ([`change_points`]), with each run of changes in one
/// direction that a line explains told as a drift instead (`drift`'s comment).
pub fn changes_and_drifts(points: &[Point], settings: &Settings) -> Found {
    let (changes, drifts) = drift::separate(points, change_points(points, settings), settings);
    Found { changes, drifts }
}

/// The hierarchical search of the module's comment over the whole of `points`. Each
/// segment's best split is computed once, when the segment is made.
fn search(points: &[Point], settings: &Settings) -> Vec<ChangePoint> {
    let values: Vec<f64> = points.iter().map(|p| p.value).collect();
    let min = settings.min_segment.max(1);
    let propose = |start: usize, end: usize| {
        let (tau, kappa, q_hat) = best_split(&values[start..end], min)?;
        let (split, until) = (start + tau, start + kappa);
        // The two sides E-divisive compared: before the change, and after it up to κ (a
        // later change of the segment is found in a later round).
        test_split_with(
            &points[start..split],
            &points[split..until],
            settings.dependence,
        )
        .map(|t| Proposal {
            start,
            end,
            index: split,
            q_hat,
            test: t,
        })
    };
    let mut proposals: Vec<Proposal> = propose(0, points.len()).into_iter().collect();
    let mut found: Vec<ChangePoint> = Vec::new();
    while let Some(best) = proposals
        .iter()
        .enumerate()
        .min_by(|a, b| a.1.test.p_value.total_cmp(&b.1.test.p_value))
        .map(|(i, _)| i)
    {
        if proposals[best].test.p_value > settings.max_p {
            break;
        }
        let p = proposals.swap_remove(best);
        let t = p.test;
        found.push(ChangePoint {
            index: p.index,
            segment: (p.start, p.end),
            before: t.before,
            after: t.after,
            step: t.after.mean - t.before.mean,
            step_se: t.step_se,
            df: t.df,
            p_value: t.p_value,
            q_hat: p.q_hat,
        });
        proposals.extend(propose(p.start, p.index));
        proposals.extend(propose(p.index, p.end));
    }
    found.sort_by_key(|c| c.index);
    found
}

/// A segment's best split and its test.
struct Proposal {
    start: usize,
    end: usize,
    index: usize,
    q_hat: f64,
    test: SplitTest,
}

/// The changes found in windows, confirmed over the whole series (see `change_points`).
fn confirm(
    points: &[Point],
    mut candidates: Vec<ChangePoint>,
    settings: &Settings,
) -> Vec<ChangePoint> {
    let min = settings.min_segment.max(1);
    // The same change seen from two windows: keep the more significant.
    candidates.sort_by(|a, b| a.p_value.total_cmp(&b.p_value));
    let mut kept: Vec<ChangePoint> = Vec::new();
    for c in candidates {
        if kept.iter().all(|k| k.index.abs_diff(c.index) >= min) {
            kept.push(c);
        }
    }
    kept.sort_by_key(|c| c.index);
    loop {
        let bounds: Vec<usize> = std::iter::once(0)
            .chain(kept.iter().map(|c| c.index))
            .chain(std::iter::once(points.len()))
            .collect();
        let tested: Vec<Option<SplitTest>> = (1..bounds.len() - 1)
            .map(|i| {
                test_split_with(
                    &points[bounds[i - 1]..bounds[i]],
                    &points[bounds[i]..bounds[i + 1]],
                    settings.dependence,
                )
            })
            .collect();
        let worst = tested
            .iter()
            .enumerate()
            .map(|(i, t)| (i, t.map_or(1.0, |t| t.p_value)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        match worst {
            Some((i, p)) if p > settings.max_p => {
                kept.remove(i);
            }
            _ => {
                for (i, (c, t)) in kept.iter_mut().zip(tested).enumerate() {
                    let t = t.expect("every kept change passed its test");
                    *c = ChangePoint {
                        index: c.index,
                        segment: (bounds[i], bounds[i + 2]),
                        before: t.before,
                        after: t.after,
                        step: t.after.mean - t.before.mean,
                        step_se: t.step_se,
                        df: t.df,
                        p_value: t.p_value,
                        q_hat: c.q_hat,
                    };
                }
                return kept;
            }
        }
    }
}

/// E-divisive's best split of `x`: the `τ` (the first index of the second side) and `κ`
/// (one past the second side's last point) maximizing
///
/// Q̂(τ, κ) = n·m/(n+m) · ( 2/(n·m) Σᵢ Σⱼ |xᵢ − yⱼ| − Σᵢ<ₖ |xᵢ − xₖ| / C(n,2) − Σⱼ<ₗ |yⱼ − yₗ| / C(m,2) )
///
/// with X = x[..τ] (n points) and Y = x[τ..κ] (m points), each side at least `min` long; a
/// within-side term of a side of one point is 0. Letting Y end before the segment does (as
/// Matteson and James do) finds a step up followed by a step down, which a split with Y to
/// the end blurs. O(len²) time, len²/2 numbers of memory: every
/// distance's running sum down its column, so each (τ, κ) adds its terms in O(1). `None`
/// when the segment is too short to split.
///
/// Returns τ, κ and Q̂.
pub fn best_split(x: &[f64], min: usize) -> Option<(usize, usize, f64)> {
    let len = x.len();
    let min = min.max(1);
    if len < 2 * min {
        return None;
    }
    // running[c][i] = Σ_{i' < i} |x_i' − x_c|, for i ≤ c.
    let running: Vec<Vec<f64>> = (0..len)
        .map(|c| {
            let mut row = Vec::with_capacity(c + 1);
            let mut acc = 0.0;
            row.push(0.0);
            for xi in &x[..c] {
                acc += (xi - x[c]).abs();
                row.push(acc);
            }
            row
        })
        .collect();
    // Σ_{a ≤ i < b} |x_i − x_c|, for b ≤ c.
    let column = |c: usize, a: usize, b: usize| running[c][b] - running[c][a];
    let pairs = |k: usize| (k * k.saturating_sub(1)) as f64 / 2.0;
    let mut best: Option<(usize, usize, f64)> = None;
    let mut within_x = 0.0;
    for tau in 1..len {
        within_x += column(tau - 1, 0, tau - 1);
        if tau < min {
            continue;
        }
        let n = tau as f64;
        let mean_x = if tau > 1 { within_x / pairs(tau) } else { 0.0 };
        let (mut between, mut within_y) = (0.0, 0.0);
        for kappa in tau + 1..=len {
            let c = kappa - 1;
            between += column(c, 0, tau);
            within_y += column(c, tau, c);
            let k = kappa - tau;
            if k < min {
                continue;
            }
            let m = k as f64;
            let mean_y = if k > 1 { within_y / pairs(k) } else { 0.0 };
            let q = n * m / (n + m) * (2.0 * between / (n * m) - mean_x - mean_y);
            if best.is_none_or(|(_, _, b)| q > b) {
                best = Some((tau, kappa, q));
            }
        }
    }
    best
}

/// The test of a split: the two sides' weighted means and the p-value of their difference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SplitTest {
    pub before: Side,
    pub after: Side,
    /// The between-point variance beyond the points' own errors, τ².
    pub tau2: f64,
    pub step_se: f64,
    pub df: usize,
    pub p_value: f64,
}

/// Standard errors below this are taken as this (a point recorded without an interval).
const MIN_SE: f64 = 1e-9;

/// The test of `left` against `right` (see the module's comment). `None` when the two hold
/// fewer than three points between them (no degree of freedom).
pub fn test_split(left: &[Point], right: &[Point]) -> Option<SplitTest> {
    test_split_with(left, right, false)
}

/// [`test_split`], and with `dependence` allowing for dependence between neighbouring
/// points: the lag-1 autocorrelation of the points' standardized residuals around their
/// side's mean, pooled over both sides and taken one standard error (1/√n) below its
/// bias-corrected estimate (as `serial::dependent_mean_se` does for a run's blocks), widens
/// the step's standard error by the AR(1) factor √((1 + φ)/(1 − φ)) and divides the
/// degrees of freedom by it squared. A series that trends or wanders (neighbours alike
/// beyond a step) is then not cut at every bend; independent points are rarely widened.
pub fn test_split_with(left: &[Point], right: &[Point], dependence: bool) -> Option<SplitTest> {
    let (nl, nr) = (left.len(), right.len());
    if nl == 0 || nr == 0 || nl + nr < 3 {
        return None;
    }
    // DerSimonian–Laird, pooled: each side's heterogeneity around its own fixed-effect mean.
    let moments = |side: &[Point]| {
        let w: Vec<f64> = side
            .iter()
            .map(|p| 1.0 / p.se.max(MIN_SE).powi(2))
            .collect();
        let sw: f64 = w.iter().sum();
        let sw2: f64 = w.iter().map(|w| w * w).sum();
        let mean = side.iter().zip(&w).map(|(p, w)| w * p.value).sum::<f64>() / sw;
        let q: f64 = side
            .iter()
            .zip(&w)
            .map(|(p, w)| w * (p.value - mean).powi(2))
            .sum();
        (q, sw - sw2 / sw)
    };
    let (ql, cl) = moments(left);
    let (qr, cr) = moments(right);
    let excess = ql + qr - (nl - 1) as f64 - (nr - 1) as f64;
    let tau2 = if cl + cr > 0.0 {
        (excess / (cl + cr)).max(0.0)
    } else {
        0.0
    };
    let side = |points: &[Point]| {
        let w: Vec<f64> = points
            .iter()
            .map(|p| 1.0 / (p.se.max(MIN_SE).powi(2) + tau2))
            .collect();
        let sw: f64 = w.iter().sum();
        let mean = points.iter().zip(&w).map(|(p, w)| w * p.value).sum::<f64>() / sw;
        Side {
            n: points.len(),
            mean,
            se: (1.0 / sw).sqrt(),
        }
    };
    let (mut before, mut after) = (side(left), side(right));
    let mut df = nl + nr - 2;
    if dependence {
        let n = (nl + nr) as f64;
        let residuals = |points: &[Point], mean: f64| -> Vec<f64> {
            points
                .iter()
                .map(|p| (p.value - mean) / (p.se.max(MIN_SE).powi(2) + tau2).sqrt())
                .collect()
        };
        let (zl, zr) = (residuals(left, before.mean), residuals(right, after.mean));
        let lagged: f64 = zl
            .windows(2)
            .chain(zr.windows(2))
            .map(|w| w[0] * w[1])
            .sum();
        let squares: f64 = zl.iter().chain(&zr).map(|z| z * z).sum();
        if squares > 0.0 && n >= 4.0 {
            let r = lagged / squares;
            let phi = (r + (1.0 + 3.0 * r) / n - 1.0 / n.sqrt()).clamp(0.0, 0.95);
            let f = (1.0 + phi) / (1.0 - phi);
            before.se *= f.sqrt();
            after.se *= f.sqrt();
            df = ((n / f).floor() as usize).saturating_sub(2).max(1);
        }
    }
    let step_se = (before.se.powi(2) + after.se.powi(2)).sqrt();
    let t = (after.mean - before.mean) / step_se;
    let p_value = if t.is_finite() {
        (2.0 * (1.0 - t_cdf(t.abs(), df.max(1)))).clamp(0.0, 1.0)
    } else {
        0.0
    };
    Some(SplitTest {
        before,
        after,
        tau2,
        step_se,
        df,
        p_value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SeededRng;

    /// Q̂ straight from its definition, for every split: the reference the fast form is
    /// checked against.
    fn q_hat_by_definition(x: &[f64], tau: usize) -> f64 {
        let (a, b) = x.split_at(tau);
        let (n, m) = (a.len() as f64, b.len() as f64);
        let between: f64 = a
            .iter()
            .flat_map(|p| b.iter().map(move |q| (p - q).abs()))
            .sum();
        let within = |s: &[f64]| {
            if s.len() < 2 {
                return 0.0;
            }
            let mut sum = 0.0;
            for i in 0..s.len() {
                for k in i + 1..s.len() {
                    sum += (s[i] - s[k]).abs();
                }
            }
            sum / (s.len() * (s.len() - 1) / 2) as f64
        };
        n * m / (n + m) * (2.0 * between / (n * m) - within(a) - within(b))
    }

    #[test]
    fn the_fast_divergence_is_the_definitions() {
        // By hand: X = [0, 0], Y = [1, 1]: E = 2/4 · 4 − 0 − 0 = 2, Q̂ = (2·2/4) · 2 = 2.
        assert!((q_hat_by_definition(&[0.0, 0.0, 1.0, 1.0], 2) - 2.0).abs() < 1e-12);
        assert_eq!(best_split(&[0.0, 0.0, 1.0, 1.0], 1), Some((2, 4, 2.0)));
        let mut rng = SeededRng::new(7);
        for len in [2, 3, 5, 17, 40] {
            let x: Vec<f64> = (0..len).map(|_| rng.standard_normal()).collect();
            for min in [1, 2, 3] {
                let fast = best_split(&x, min);
                if len < 2 * min {
                    assert_eq!(fast, None);
                    continue;
                }
                let (tau, q) = (min..=len - min)
                    .flat_map(|t| (t + min..=len).map(move |k| (t, k)))
                    .map(|(t, k)| (t, q_hat_by_definition(&x[..k], t)))
                    .fold((0, f64::NEG_INFINITY), |b, c| if c.1 > b.1 { c } else { b });
                let (ftau, _, fq) = fast.unwrap();
                assert_eq!(ftau, tau, "len {len} min {min}");
                assert!((fq - q).abs() < 1e-9 * q.abs().max(1.0), "{fq} vs {q}");
            }
        }
    }

    #[test]
    fn with_equal_errors_and_no_excess_scatter_the_test_is_the_pooled_t_test() {
        // Each point's se equal to the sides' own scatter: the pooled t-test's figures.
        // left = [1, 2, 3] (mean 2, sd 1), right = [4, 5, 6] (mean 5, sd 1); pooled sd 1,
        // t = 3 / sqrt(1/3 + 1/3) = 3.674, df 4; SciPy's ttest_ind gives p = 0.021312.
        let pts = |v: &[f64]| {
            v.iter()
                .map(|&value| Point { value, se: 1.0 })
                .collect::<Vec<_>>()
        };
        let t = test_split(&pts(&[1.0, 2.0, 3.0]), &pts(&[4.0, 5.0, 6.0])).unwrap();
        assert_eq!(t.tau2, 0.0);
        assert!((t.step_se - (2.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert_eq!(t.df, 4);
        assert!((t.p_value - 0.021312).abs() < 2e-6, "{}", t.p_value);
    }

    #[test]
    fn a_precise_point_counts_for_more_than_a_rough_one() {
        // The left side: one point measured ten times as precisely as the other. Its mean
        // leans to the precise point.
        let left = [
            Point {
                value: 0.0,
                se: 0.01,
            },
            Point {
                value: 0.1,
                se: 0.1,
            },
        ];
        let right = [
            Point {
                value: 0.2,
                se: 0.01,
            },
            Point {
                value: 0.2,
                se: 0.01,
            },
        ];
        let t = test_split(&left, &right).unwrap();
        assert!(t.before.mean < 0.01, "{t:?}");
    }

    /// A series of `len` points of noise `sd` (each point's own se = `sd`), with `steps` of
    /// (index, size) added from the index on.
    fn series(rng: &mut SeededRng, len: usize, sd: f64, steps: &[(usize, f64)]) -> Vec<Point> {
        (0..len)
            .map(|i| {
                let level: f64 = steps
                    .iter()
                    .filter(|(at, _)| i >= *at)
                    .map(|(_, s)| s)
                    .sum();
                Point {
                    value: level + sd * rng.standard_normal(),
                    se: sd,
                }
            })
            .collect()
    }

    #[test]
    fn series_without_a_change_give_few_false_alerts() {
        // 300 series of 100 points, no change: the alerts per 100 points. Goal (issue 52):
        // at most 1. Seed 52, 2026-11-29: 27 alerts, 0.090 per 100 points.
        // The drifts reported on the same series (`changes_and_drifts`) count as alerts too.
        let mut rng = SeededRng::new(52);
        let (mut alerts, mut drifts) = (0, 0);
        for _ in 0..300 {
            let points = series(&mut rng, 100, 0.02, &[]);
            let found = changes_and_drifts(&points, &Settings::default());
            alerts += change_points(&points, &Settings::default()).len();
            drifts += found.drifts.len();
        }
        let per_100 = alerts as f64 / 300.0;
        let drifts_per_100 = drifts as f64 / 300.0;
        eprintln!("A/A: {alerts} alerts in 300 series of 100 points: {per_100:.3} per 100 points; {drifts} drifts, {drifts_per_100:.3} per 100 points");
        assert!(per_100 <= 0.3, "{per_100} false alerts per 100 points");
        assert!(
            drifts_per_100 <= 0.3,
            "{drifts_per_100} false drifts per 100 points"
        );
    }

    #[test]
    fn a_step_of_three_times_the_noise_is_found_where_it_is() {
        // 200 series of 60 points, a step of 3σ at point 30 (and one of −3σ at 45 in half of
        // them): recall and precision of the steps, a found step within one point of a
        // planted one counting as a hit. Goal (issue 52): both at least 0.9 for steps of 3×
        // the noise. Seed 3, 2026-11-29: 285 of 300 found (recall 0.950), 301 reported
        // (precision 0.947).
        let mut rng = SeededRng::new(3);
        let (mut planted, mut hits, mut found) = (0, 0, 0);
        for s in 0..200 {
            let steps: Vec<(usize, f64)> = if s % 2 == 0 {
                vec![(30, 0.06)]
            } else {
                vec![(30, 0.06), (45, -0.06)]
            };
            let cps = change_points(&series(&mut rng, 60, 0.02, &steps), &Settings::default());
            planted += steps.len();
            found += cps.len();
            hits += steps
                .iter()
                .filter(|(at, _)| cps.iter().any(|c| c.index.abs_diff(*at) <= 1))
                .count();
        }
        let recall = hits as f64 / planted as f64;
        let precision = hits as f64 / found.max(1) as f64;
        eprintln!("3σ steps: {hits} of {planted} found, {found} changes reported: recall {recall:.3}, precision {precision:.3}");
        assert!(recall >= 0.9, "recall {recall}");
        assert!(precision >= 0.9, "precision {precision}");
    }

    #[test]
    fn the_steps_interval_holds_the_planted_step() {
        let mut rng = SeededRng::new(11);
        let mut covered = 0;
        for _ in 0..200 {
            let cps = change_points(
                &series(&mut rng, 40, 0.02, &[(20, 0.1)]),
                &Settings::default(),
            );
            let c = cps.iter().find(|c| c.index == 20);
            if let Some(c) = c {
                let (lo, hi) = c.step_interval(0.95);
                if lo <= 0.1 && 0.1 <= hi {
                    covered += 1;
                }
            }
        }
        // Nominal 95%; the split chosen by the data nudges it, a little. Seed 11,
        // 2026-11-29: 187 of 200.
        eprintln!("the 95% interval held the planted step in {covered} of 200");
        assert!(covered >= 180, "{covered} of 200");
    }

    /// One simulated history: points with their own se of `noise` (on the log scale: 0.01
    /// is about 1%), `steps` of (index, size) from the index on, a `drift` per point,
    /// a share `outliers` of points shifted by 6 × noise either way.
    struct Setting {
        len: usize,
        noise: f64,
        steps: Vec<(usize, f64)>,
        /// The drift per point, on the log scale, from point `drift_from` on.
        drift: f64,
        drift_from: usize,
        outliers: f64,
    }

    /// What the detector did over histories of a setting.
    struct Outcome {
        /// Of the planted steps, the share found within one point (1 when none).
        recall: f64,
        /// Of the changes reported, the share within one point of a planted step.
        precision: f64,
        /// The other changes reported, per 100 points.
        other: f64,
        /// The drifts reported, per history.
        drifts: f64,
    }

    /// What the detector (`changes_and_drifts`, as `rubyrace history` runs it) did over
    /// `runs` histories of `setting`.
    fn simulate(rng: &mut SeededRng, setting: &Setting, runs: usize) -> Outcome {
        let (mut planted, mut hits, mut found, mut drifts) = (0, 0, 0, 0);
        for _ in 0..runs {
            let points: Vec<Point> = series(rng, setting.len, setting.noise, &setting.steps)
                .into_iter()
                .enumerate()
                .map(|(i, mut p)| {
                    p.value += setting.drift * i.saturating_sub(setting.drift_from) as f64;
                    if rng.next_f64() < setting.outliers {
                        let sign = if rng.next_f64() < 0.5 { -1.0 } else { 1.0 };
                        p.value += sign * 6.0 * setting.noise;
                    }
                    p
                })
                .collect();
            let all = changes_and_drifts(&points, &Settings::default());
            let cps = all.changes;
            drifts += all.drifts.len();
            planted += setting.steps.len();
            found += cps.len();
            hits += setting
                .steps
                .iter()
                .filter(|(at, _)| cps.iter().any(|c| c.index.abs_diff(*at) <= 1))
                .count();
        }
        Outcome {
            recall: if planted == 0 {
                1.0
            } else {
                hits as f64 / planted as f64
            },
            precision: hits as f64 / found.max(1) as f64,
            other: (found - hits) as f64 / (runs * setting.len) as f64 * 100.0,
            drifts: drifts as f64 / runs as f64,
        }
    }

    #[test]
    fn the_detector_by_step_and_noise() {
        // Steps of 1–10% at noises of 0.5–5% (issue 52), 100 histories of 60 commits each,
        // a step at commit 30. Goal: recall and precision at least 0.9 where the step is at
        // least 3× the noise. The table (seed 52) is docs/history.md's.
        let mut rng = SeededRng::new(52);
        eprintln!(
            "| step | noise | step/noise | recall | precision | other changes per 100 points | drifts per history |"
        );
        eprintln!("|---|---|---|---|---|---|---|");
        for noise in [0.005, 0.01, 0.02, 0.05] {
            for step in [0.01, 0.02, 0.03, 0.05, 0.1] {
                let setting = Setting {
                    len: 60,
                    noise,
                    steps: vec![(30, step)],
                    drift: 0.0,
                    drift_from: 0,
                    outliers: 0.0,
                };
                let Outcome {
                    recall,
                    precision,
                    other,
                    drifts,
                } = simulate(&mut rng, &setting, 100);
                let ratio = step / noise;
                eprintln!(
                    "| {:.0}% | {:.1}% | {ratio:.1} | {recall:.2} | {precision:.2} | {other:.2} | {drifts:.2} |",
                    step * 100.0,
                    noise * 100.0
                );
                if ratio >= 3.0 {
                    assert!(
                        recall >= 0.9 && precision >= 0.9 && drifts <= 0.05,
                        "step {step} noise {noise}: recall {recall}, precision {precision}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_detector_with_drift_outliers_and_several_changes() {
        // Histories of 100 commits at 1% noise (seed 52; docs/history.md's table): steps of
        // 3% at 30 and −5% at 70, alone, under a drift, with outliers, and none at all; two
        // steps in one direction (a staircase a line could be mistaken for); drifts over
        // the whole history and over its last 40 commits only.
        let mut rng = SeededRng::new(52);
        let two = vec![(30, 0.03), (70, -0.05)];
        let stairs = vec![(35, 0.03), (70, 0.03)];
        let cases = [
            ("two steps", two.clone(), 0.0, 0, 0.0),
            ("two steps up (+3% at 35 and 70)", stairs, 0.0, 0, 0.0),
            (
                "two steps, drift 0.5% per 10 commits",
                two.clone(),
                0.0005,
                0,
                0.0,
            ),
            ("two steps, 3% outliers of 6σ", two.clone(), 0.0, 0, 0.03),
            ("no step, drift 0.5% per 10 commits", vec![], 0.0005, 0, 0.0),
            ("no step, drift 1% per 10 commits", vec![], 0.001, 0, 0.0),
            (
                "no step, drift 1% per 10 commits from commit 60",
                vec![],
                0.001,
                60,
                0.0,
            ),
            ("no step, 3% outliers of 6σ", vec![], 0.0, 0, 0.03),
        ];
        eprintln!(
            "| history | recall | precision | other changes per 100 points | drifts per history |"
        );
        eprintln!("|---|---|---|---|---|");
        for (name, steps, drift, drift_from, outliers) in cases {
            let stepped = !steps.is_empty();
            let setting = Setting {
                len: 100,
                noise: 0.01,
                steps,
                drift,
                drift_from,
                outliers,
            };
            let o = simulate(&mut rng, &setting, 100);
            if stepped {
                eprintln!(
                    "| {name} | {:.2} | {:.2} | {:.2} | {:.2} |",
                    o.recall, o.precision, o.other, o.drifts
                );
            } else {
                eprintln!("| {name} | – | – | {:.2} | {:.2} |", o.other, o.drifts);
            }
            // A slide, over the whole history or from a bend in it, is one drift, not steps.
            if !stepped && drift > 0.0 {
                assert!(
                    o.other <= 0.3 && o.drifts >= 0.9,
                    "{name}: other {}, drifts {}",
                    o.other,
                    o.drifts
                );
            }
            if drift == 0.0 && outliers == 0.0 {
                assert!(
                    o.recall >= 0.9 && o.precision >= 0.9 && o.drifts <= 0.05,
                    "{name}: recall {}, precision {}, drifts {}",
                    o.recall,
                    o.precision,
                    o.drifts
                );
            }
        }
    }

    #[test]
    fn a_long_history_is_searched_in_windows() {
        // 20 histories of 3,000 points (six windows), 1% noise, steps of 3% at 700 and −3%
        // at 2,250: both found where they are, few other changes, and the result the same
        // as the whole search where the whole search is affordable (the first 500 points).
        let mut rng = SeededRng::new(52);
        let setting = Setting {
            len: 3000,
            noise: 0.01,
            steps: vec![(700, 0.03), (2250, -0.03)],
            drift: 0.0,
            drift_from: 0,
            outliers: 0.0,
        };
        let Outcome {
            recall,
            precision,
            other,
            ..
        } = simulate(&mut rng, &setting, 20);
        eprintln!("3,000 points in windows: recall {recall:.2}, precision {precision:.2}, other changes {other:.3} per 100 points");
        assert!(
            recall >= 0.95 && other <= 0.3,
            "recall {recall}, other {other}"
        );
        let short = series(&mut rng, WINDOW, 0.01, &[(200, 0.03)]);
        assert_eq!(
            change_points(&short, &Settings::default()),
            search(&short, &Settings::default())
        );
    }

    #[test]
    fn dependence_between_neighbours_is_not_taken_for_changes() {
        // 200 histories of 100 points without a change whose points wander (AR(1), φ = 0.6,
        // each point's own se the innovations' sd): the false alerts per 100 points with and
        // without the allowance for dependence. Seed 52, 2026-11-29: 1.005 with, 3.035 without.
        let mut rng = SeededRng::new(52);
        let (mut with, mut without, mut drifts) = (0, 0, 0);
        for _ in 0..200 {
            let mut level = 0.0;
            let points: Vec<Point> = (0..100)
                .map(|_| {
                    level = 0.6 * level + 0.01 * rng.standard_normal();
                    Point {
                        value: level,
                        se: 0.01,
                    }
                })
                .collect();
            let on = Settings {
                dependence: true,
                ..Settings::default()
            };
            let off = Settings {
                dependence: false,
                ..Settings::default()
            };
            with += change_points(&points, &on).len();
            without += change_points(&points, &off).len();
            drifts += changes_and_drifts(&points, &on).drifts.len();
        }
        let (with, without) = (with as f64 / 200.0, without as f64 / 200.0);
        let drifts = drifts as f64 / 200.0;
        eprintln!("AR(1) φ = 0.6, no change: {with:.2} false alerts per 100 points allowing for dependence, {without:.2} without; {drifts:.2} drifts per 100 points");
        assert!(with <= 1.5 && with < without / 2.0, "{with} vs {without}");
    }
}
