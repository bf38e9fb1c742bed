//! Rank tests: is the difference between two configurations more than noise, without
//! assuming the measurements are normal?
//!
//! - `wilcoxon_signed_rank`: paired data (randomized complete blocks: `a[i]` and `b[i]` ran in
//!   the same block), on the per-block differences.
//! - `mann_whitney_u`: two independent groups.
//!
//! Both are two-sided, with R's `wilcox.test` p-value convention (twice the smaller tail),
//! and exact up to 49 values per group, as R is (`exact = NULL` means n < 50). Unlike R,
//! ties do not switch to the normal approximation: the exact permutation distribution of
//! the mid-ranks is used (the exact conditional test given the tie pattern, as the `coin`
//! package's `distribution = "exact"`), because rubyrace's small samples are where the
//! approximation is worst (8 equal differences, 7 positive: exact 18/256 = 0.070, normal
//! approximation 0.041). Above 49 the normal approximation with the tie and continuity
//! corrections is used.
//!
//! Small samples cannot be significant at all: with n blocks the smallest two-sided
//! signed-rank p-value is 2/2ⁿ (n = 3: 0.25, n = 5: 0.0625, n = 6: 0.03125), and with
//! m + n trials it is 2/C(m+n, m) (3 + 3: 0.1). `wilcoxon_min_p` and `mann_whitney_min_p`
//! say so for given data (a report records it beside the rank test, which is a check on
//! the verdict its interval gives, and an adaptive run does not stop before it can be
//! reached).

use serde::{Deserialize, Serialize};

use crate::dist::normal_sf;

/// A test statistic and its two-sided p-value; `exact` tells whether the p-value comes
/// from the exact null distribution (true) or the normal approximation (false).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TestResult {
    pub statistic: f64,
    pub p_value: f64,
    pub exact: bool,
}

/// The largest sample size (per group) for which the exact distributions are used (R: n < 50).
pub const EXACT_MAX_N: usize = 49;

/// Wilcoxon's signed-rank test that the per-block differences `diffs` (a − b) are
/// symmetric around 0, two-sided.
///
/// - Zero differences are dropped before ranking (Wilcoxon's method, R's and SciPy's
///   default `zero_method="wilcox"`); non-finite differences are ignored.
/// - The statistic is V, the sum of the ranks of the positive differences (R's `V`).
/// - Exact p-value when at most `EXACT_MAX_N` differences remain, over the 2ⁿ sign
///   assignments of their (mid-)ranks; otherwise the normal approximation with the tie
///   correction of the variance and a continuity correction of 1/2 (as R with
///   `correct = TRUE`).
///   Note: R switches to the approximation whenever there were zeros; here the exact
///   distribution of the remaining non-zero differences is used, which is the exact test
///   conditional on the number of zeros (and what SciPy gives on the non-zero differences).
/// - `None` when no non-zero difference remains.
pub fn wilcoxon_signed_rank(diffs: &[f64]) -> Option<TestResult> {
    let d: Vec<f64> = diffs
        .iter()
        .copied()
        .filter(|x| x.is_finite() && *x != 0.0)
        .collect();
    let n = d.len();
    if n == 0 {
        return None;
    }
    let abs: Vec<f64> = d.iter().map(|x| x.abs()).collect();
    let (ranks, ties) = average_ranks(&abs);
    let v: f64 = d
        .iter()
        .zip(&ranks)
        .filter(|(x, _)| **x > 0.0)
        .map(|(_, r)| r)
        .sum();
    let nf = n as f64;
    if n <= EXACT_MAX_N {
        // Mid-ranks are multiples of 1/2: doubled, they are integers.
        let doubled: Vec<usize> = ranks.iter().map(|r| (2.0 * r).round() as usize).collect();
        let counts = signed_rank_counts(&doubled);
        let p = two_sided_exact(&counts, (2.0 * v).round() as usize);
        return Some(TestResult {
            statistic: v,
            p_value: p,
            exact: true,
        });
    }
    let mean = nf * (nf + 1.0) / 4.0;
    let tie_term: f64 = ties
        .iter()
        .map(|&t| (t as f64).powi(3) - t as f64)
        .sum::<f64>()
        / 48.0;
    let var = nf * (nf + 1.0) * (2.0 * nf + 1.0) / 24.0 - tie_term;
    Some(TestResult {
        statistic: v,
        p_value: normal_two_sided(v, mean, var),
        exact: false,
    })
}

/// The smallest two-sided p-value `wilcoxon_signed_rank` could give for differences with
/// these absolute values (all of one sign): 2/2ⁿ for n untied non-zero differences.
/// When it is above the significance level, no result of these blocks can be significant.
/// `None` when no non-zero difference remains.
pub fn wilcoxon_min_p(diffs: &[f64]) -> Option<f64> {
    let abs: Vec<f64> = diffs
        .iter()
        .filter(|x| x.is_finite())
        .map(|x| x.abs())
        .collect();
    wilcoxon_signed_rank(&abs).map(|r| r.p_value)
}

/// The Mann–Whitney U test (Wilcoxon rank-sum test) that `a` and `b` come from the same
/// distribution, against a shift either way; two-sided. Non-finite values are ignored.
///
/// - The statistic is U of `a`: the number of pairs (aᵢ, bⱼ) with aᵢ > bⱼ, ties counting
///   1/2 (R's `W`, SciPy's `U1`).
/// - Exact p-value when both groups have at most `EXACT_MAX_N` values: over the C(m+n, m)
///   ways to split the pooled (mid-)ranks; otherwise the normal approximation with the tie
///   correction of the variance and a continuity correction of 1/2.
/// - `None` when either group is empty.
pub fn mann_whitney_u(a: &[f64], b: &[f64]) -> Option<TestResult> {
    let a: Vec<f64> = a.iter().copied().filter(|x| x.is_finite()).collect();
    let b: Vec<f64> = b.iter().copied().filter(|x| x.is_finite()).collect();
    let (m, n) = (a.len(), b.len());
    if m == 0 || n == 0 {
        return None;
    }
    let pooled: Vec<f64> = a.iter().chain(&b).copied().collect();
    let (ranks, ties) = average_ranks(&pooled);
    let (mf, nf) = (m as f64, n as f64);
    let rank_sum_a: f64 = ranks[..m].iter().sum();
    let u = rank_sum_a - mf * (mf + 1.0) / 2.0;
    if m <= EXACT_MAX_N && n <= EXACT_MAX_N {
        let p = if ties.is_empty() {
            two_sided_exact(&rank_sum_counts(m, n), u.round() as usize)
        } else {
            let doubled: Vec<usize> = ranks.iter().map(|r| (2.0 * r).round() as usize).collect();
            let counts = tied_rank_sum_counts(&doubled, m);
            two_sided_exact(&counts, (2.0 * rank_sum_a).round() as usize)
        };
        return Some(TestResult {
            statistic: u,
            p_value: p,
            exact: true,
        });
    }
    let big_n = mf + nf;
    let tie_term: f64 = ties
        .iter()
        .map(|&t| (t as f64).powi(3) - t as f64)
        .sum::<f64>()
        / (big_n * (big_n - 1.0));
    let var = mf * nf / 12.0 * ((big_n + 1.0) - tie_term);
    Some(TestResult {
        statistic: u,
        p_value: normal_two_sided(u, mf * nf / 2.0, var),
        exact: false,
    })
}

/// The smallest two-sided p-value `mann_whitney_u` could give for groups of these sizes
/// without ties (complete separation): 2/C(m+n, m) when exact (3 vs 3: 0.1, 4 vs 4:
/// 0.0286). Ties can only raise it slightly. `None` when either group is empty.
pub fn mann_whitney_min_p(a: &[f64], b: &[f64]) -> Option<f64> {
    let m = a.iter().filter(|x| x.is_finite()).count();
    let n = b.iter().filter(|x| x.is_finite()).count();
    let low: Vec<f64> = (0..m).map(|i| i as f64).collect();
    let high: Vec<f64> = (m..m + n).map(|i| i as f64).collect();
    mann_whitney_u(&low, &high).map(|r| r.p_value)
}

/// Average ranks (1-based; tied values share the mean of their ranks) and the sizes of the
/// groups of tied values (only groups of 2 or more).
pub(crate) fn average_ranks(values: &[f64]) -> (Vec<f64>, Vec<usize>) {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&i, &j| values[i].total_cmp(&values[j]));
    let mut ranks = vec![0.0; values.len()];
    let mut ties = Vec::new();
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && values[order[end]] == values[order[start]] {
            end += 1;
        }
        // positions start..end (0-based) hold ranks start+1..=end
        let rank = (start + 1 + end) as f64 / 2.0;
        for &i in &order[start..end] {
            ranks[i] = rank;
        }
        if end - start > 1 {
            ties.push(end - start);
        }
        start = end;
    }
    (ranks, ties)
}

/// counts[s] = number of the 2ⁿ sign assignments of the (doubled mid-)ranks `weights` whose
/// positive weights sum to s. At most 2⁴⁹ in total for n ≤ 49: exact in u64.
fn signed_rank_counts(weights: &[usize]) -> Vec<u64> {
    let max: usize = weights.iter().sum();
    let mut counts = vec![0u64; max + 1];
    counts[0] = 1;
    let mut reach = 0;
    for &w in weights {
        reach += w;
        for s in (w..=reach).rev() {
            counts[s] += counts[s - w];
        }
    }
    counts
}

/// counts[u] = number of the C(m+n, m) ways to choose a's ranks among 1..=m+n whose
/// U = (sum of a's ranks) − m(m+1)/2 equals u: the coefficients of the Gaussian binomial
/// coefficient [m+n choose m]_q = Π_{i=1..m} (1 − q^(n+i)) / (1 − q^i), built one factor
/// at a time in O(m²n) (after step i the polynomial is [n+i choose i]_q, with
/// non-negative integer coefficients). C(98, 49) ≈ 2.5e28: exact in i128.
fn rank_sum_counts(m: usize, n: usize) -> Vec<u128> {
    let mut c = vec![0i128; m * n + m + 1];
    c[0] = 1;
    for i in 1..=m {
        let step = n + i;
        // × (1 − q^(n+i)): the degree goes from (i−1)n to in + i.
        for u in (step..=(i - 1) * n + step).rev() {
            c[u] -= c[u - step];
        }
        // ÷ (1 − q^i), exact: the degree comes back to in.
        for u in i..=i * n + i {
            c[u] += c[u - i];
        }
    }
    debug_assert!(c[m * n + 1..].iter().all(|&x| x == 0));
    c.truncate(m * n + 1);
    c.into_iter().map(|x| x as u128).collect()
}

/// With ties: counts[s] = number of the C(N, m) ways to choose m of the pooled (doubled
/// mid-)ranks `weights` whose sum is s. A subset-sum count by size, O(N·m·Σw) (about 5·10⁷
/// steps for 49 vs 49); C(98, 49) ≈ 2.5e28: exact in u128.
fn tied_rank_sum_counts(weights: &[usize], m: usize) -> Vec<u128> {
    let total: usize = weights.iter().sum();
    // by_size[j][s]: subsets of j weights summing to s.
    let mut by_size = vec![vec![0u128; total + 1]; m + 1];
    by_size[0][0] = 1;
    let mut reach = 0;
    for (i, &w) in weights.iter().enumerate() {
        reach += w;
        for j in (1..=m.min(i + 1)).rev() {
            let (smaller, larger) = by_size.split_at_mut(j);
            let (from, to) = (&smaller[j - 1], &mut larger[0]);
            for s in (w..=reach).rev() {
                to[s] += from[s - w];
            }
        }
    }
    by_size.swap_remove(m)
}

/// Two-sided exact p-value of an observed statistic `x` under the null distribution given by
/// counts: min(1, 2·min(P(X ≤ x), P(X ≥ x))), as R's `wilcox.test`.
fn two_sided_exact<C: Copy + Into<u128>>(counts: &[C], x: usize) -> f64 {
    let total: u128 = counts.iter().map(|&c| c.into()).sum();
    let x = x.min(counts.len() - 1);
    let lower: u128 = counts[..=x].iter().map(|&c| c.into()).sum();
    let upper: u128 = counts[x..].iter().map(|&c| c.into()).sum();
    (2.0 * lower.min(upper) as f64 / total as f64).min(1.0)
}

/// Two-sided p-value of `stat` under N(mean, var) with a continuity correction of 1/2
/// towards the mean (R's `correct = TRUE`). 1 when the variance is 0 (all values tied).
fn normal_two_sided(stat: f64, mean: f64, var: f64) -> f64 {
    if var <= 0.0 || !var.is_finite() {
        return 1.0;
    }
    let z = stat - mean;
    let correction = if z > 0.0 {
        0.5
    } else if z < 0.0 {
        -0.5
    } else {
        0.0
    };
    let z = (z - correction) / var.sqrt();
    (2.0 * normal_sf(z.abs())).min(1.0)
}

/// Kruskal–Wallis's test that `groups` come from one distribution (k independent groups,
/// the rank analogue of one-way ANOVA): H with the tie correction, its p-value from the
/// χ² distribution with k − 1 degrees of freedom (R's `kruskal.test`). Two groups are
/// tested with [`mann_whitney_u`] instead, exact for small ones, where the χ²
/// approximation is poor. Groups with no finite value are left out; `None` with fewer than
/// two groups left, or when every value is tied.
pub fn kruskal_wallis(groups: &[Vec<f64>]) -> Option<TestResult> {
    let groups: Vec<Vec<f64>> = groups
        .iter()
        .map(|g| {
            g.iter()
                .copied()
                .filter(|x| x.is_finite())
                .collect::<Vec<f64>>()
        })
        .filter(|g| !g.is_empty())
        .collect();
    if groups.len() < 2 {
        return None;
    }
    if groups.len() == 2 {
        return mann_whitney_u(&groups[0], &groups[1]);
    }
    let pooled: Vec<f64> = groups.iter().flatten().copied().collect();
    let n = pooled.len() as f64;
    let (ranks, ties) = average_ranks(&pooled);
    let mut h = 0.0;
    let mut at = 0;
    for g in &groups {
        let sum: f64 = ranks[at..at + g.len()].iter().sum();
        h += sum * sum / g.len() as f64;
        at += g.len();
    }
    h = 12.0 / (n * (n + 1.0)) * h - 3.0 * (n + 1.0);
    let tie_term: f64 = ties.iter().map(|&t| (t as f64).powi(3) - t as f64).sum();
    let correction = 1.0 - tie_term / (n.powi(3) - n);
    if correction <= 0.0 {
        return None;
    }
    let h = h / correction;
    Some(TestResult {
        statistic: h,
        p_value: crate::dist::chi2_sf(h, groups.len() - 1),
        exact: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(got: f64, want: f64, rel: f64) -> bool {
        (got - want).abs() <= rel * want.abs()
    }

    /// R's `example(kruskal.test)` (Hollander & Wolfe 1973, p. 116): "Kruskal-Wallis
    /// chi-squared = 0.77143, df = 2, p-value = 0.68"; by hand, rank sums 36, 36 and 33 of
    /// 14 give H = 12/210 × 801 − 45 = 0.771429 and p = exp(−H/2) = 0.67995.
    #[test]
    fn kruskal_wallis_matches_r() {
        let x = vec![2.9, 3.0, 2.5, 2.6, 3.2];
        let y = vec![3.8, 2.7, 4.0, 2.4];
        let z = vec![2.8, 3.4, 3.7, 2.2, 2.0];
        let t = kruskal_wallis(&[x.clone(), y.clone(), z]).unwrap();
        assert!(close(t.statistic, 0.771429, 1e-5), "{t:?}");
        assert!(close(t.p_value, 0.67995, 1e-4), "{t:?}");
        // Two groups: the exact rank-sum test.
        assert_eq!(
            kruskal_wallis(&[x.clone(), y.clone()]),
            mann_whitney_u(&x, &y)
        );
        assert_eq!(kruskal_wallis(&[x, vec![]]), None);
    }

    /// Seeded simulation on synthetic truth: three groups of 8 from one normal
    /// distribution are called different at 5% in 5% of 4000 draws (the χ² approximation
    /// is slightly conservative at this size: 3.5–6% accepted), and a shift of one
    /// and a half standard deviations in one group is found most of the time.
    #[test]
    fn kruskal_wallis_false_positives_and_power() {
        let mut rng = crate::SeededRng::new(31);
        let mut draw = |shift: f64| -> Vec<Vec<f64>> {
            (0..3)
                .map(|g| {
                    (0..8)
                        .map(|_| rng.standard_normal() + if g == 2 { shift } else { 0.0 })
                        .collect()
                })
                .collect()
        };
        let rate = |draw: &mut dyn FnMut() -> Vec<Vec<f64>>| {
            (0..4000)
                .filter(|_| kruskal_wallis(&draw()).unwrap().p_value < 0.05)
                .count() as f64
                / 4000.0
        };
        let null = rate(&mut || draw(0.0));
        assert!((0.035..=0.06).contains(&null), "false-positive rate {null}");
        let power = rate(&mut || draw(1.5));
        assert!(power > 0.6, "power {power}");
    }

    #[test]
    fn ranks_with_ties() {
        let (r, t) = average_ranks(&[3.0, 1.0, 3.0, 2.0, 3.0]);
        assert_eq!(r, vec![4.0, 1.0, 4.0, 2.0, 4.0]);
        assert_eq!(t, vec![3]);
    }

    #[test]
    fn exact_distributions() {
        // n = 3: V takes 0..=6 with counts 1,1,1,2,1,1,1 (of 8).
        assert_eq!(signed_rank_counts(&[1, 2, 3]), vec![1, 1, 1, 2, 1, 1, 1]);
        let ranks: Vec<usize> = (1..=49).collect();
        assert_eq!(signed_rank_counts(&ranks).iter().sum::<u64>(), 1 << 49);
        // m = 2, n = 2: U takes 0..=4 with counts 1,1,2,1,1 (of C(4,2) = 6).
        assert_eq!(rank_sum_counts(2, 2), vec![1, 1, 2, 1, 1]);
        assert_eq!(
            rank_sum_counts(25, 25).iter().sum::<u128>(),
            126_410_606_437_752
        );
        // C(98, 49), the largest exact case.
        assert_eq!(
            rank_sum_counts(49, 49).iter().sum::<u128>(),
            25_477_612_258_980_856_902_730_428_600
        );
        // Without ties the subset-sum count of doubled ranks is the same distribution.
        let doubled: Vec<usize> = (1..=9).map(|r| 2 * r).collect();
        let tied_way = tied_rank_sum_counts(&doubled, 4);
        let nonzero: Vec<u128> = tied_way.into_iter().filter(|&c| c > 0).collect();
        assert_eq!(nonzero, rank_sum_counts(4, 5));
        assert_eq!(rank_sum_counts(1, 3), vec![1, 1, 1, 1]);
        assert_eq!(rank_sum_counts(3, 1), vec![1, 1, 1, 1]);
        // 3 vs 2: U = 0..=6, counts 1,1,2,2,2,1,1 (of 10), the table of Mann & Whitney 1947.
        assert_eq!(rank_sum_counts(3, 2), vec![1, 1, 2, 2, 2, 1, 1]);
        assert_eq!(rank_sum_counts(2, 3), vec![1, 1, 2, 2, 2, 1, 1]);
        // Brute force over all 4-subsets of 1..=9 (C(9,4) = 126).
        let mut brute = vec![0u128; 4 * 5 + 1];
        for mask in 0u32..(1 << 9) {
            if mask.count_ones() == 4 {
                let rank_sum: usize = (0..9).filter(|b| mask & (1 << b) != 0).map(|b| b + 1).sum();
                brute[rank_sum - 10] += 1;
            }
        }
        assert_eq!(rank_sum_counts(4, 5), brute);
    }

    // Reference values: SciPy 1.17.1 (`scipy.stats.wilcoxon(d, zero_method="wilcox",
    // correction=True, method="exact" | "approx")` on the non-zero differences, and
    // `scipy.stats.mannwhitneyu(a, b, alternative="two-sided", use_continuity=True,
    // method="exact" | "asymptotic")`), run in a virtualenv by the author; SciPy reports
    // min(V+, V−) for the two-sided signed-rank test, so V was recomputed as the sum of the
    // positive ranks (`scipy.stats.rankdata`). Random vectors were drawn with
    // `numpy.random.default_rng(20240611)` and rounded, then pasted here.

    #[test]
    #[allow(clippy::approx_constant)] // 3.14 is a measurement in the data, not π
    fn signed_rank_hollander_wolfe() {
        // R's ?wilcox.test example (Hollander & Wolfe 1973, p. 29: Hamilton depression
        // scale, 9 patients): wilcox.test(x, y, paired = TRUE) gives V = 40,
        // p-value = 0.03906 (exact: 10/256). SciPy: 0.0390625.
        let x = [1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30];
        let y = [0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29];
        let d: Vec<f64> = x.iter().zip(&y).map(|(a, b)| a - b).collect();
        let r = wilcoxon_signed_rank(&d).unwrap();
        assert_eq!(
            r,
            TestResult {
                statistic: 40.0,
                p_value: 0.0390625,
                exact: true
            }
        );
        // The mirror image has V = 45 − 40 and the same p.
        let neg: Vec<f64> = d.iter().map(|v| -v).collect();
        assert_eq!(wilcoxon_signed_rank(&neg).unwrap().statistic, 5.0);
        assert_eq!(wilcoxon_signed_rank(&neg).unwrap().p_value, 0.0390625);
    }

    #[test]
    fn signed_rank_three_blocks_cannot_be_significant() {
        // n = 3, all differences positive: the most extreme outcome, p = 2/2^3 = 0.25
        // (SciPy: 0.25). No 3-block experiment can reach p < 0.05.
        let r = wilcoxon_signed_rank(&[1.5, 2.0, 0.7]).unwrap();
        assert_eq!(
            r,
            TestResult {
                statistic: 6.0,
                p_value: 0.25,
                exact: true
            }
        );
        assert_eq!(wilcoxon_min_p(&[1.5, -2.0, 0.7]), Some(0.25));
        // Mixed signs: V = 3 is the centre, p = 1 (SciPy: 1.0).
        let r = wilcoxon_signed_rank(&[1.5, -2.0, 0.7]).unwrap();
        assert_eq!((r.statistic, r.p_value), (3.0, 1.0));
        // Smallest p for 5 and 6 blocks: 2/32, 2/64.
        assert_eq!(wilcoxon_min_p(&[1.0, 2.0, 3.0, 4.0, 5.0]), Some(0.0625));
        assert_eq!(
            wilcoxon_min_p(&[1.0, 2.0, 3.0, 4.0, 5.0, -6.0]),
            Some(0.03125)
        );
    }

    // Reference values with ties: the exact permutation distribution, enumerated by brute
    // force in Python (all 2ⁿ sign assignments of `scipy.stats.rankdata(abs(d))`, or all
    // C(m+n, m) splits of the pooled mid-ranks; p = min(1, 2·min(P(S ≤ s), P(S ≥ s)))) by
    // the author on 2026-11-23; /tmp scripts are not kept, the method is in this comment.

    #[test]
    fn signed_rank_ties_use_the_exact_distribution_of_mid_ranks() {
        // 8 equal differences, 7 positive. Every rank is 4.5, so V counts the
        // positives: P(7 or 8 positive) = 9/256, two-sided 18/256 = 0.0703125. The normal
        // approximation said 0.041.
        let d = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, -1.0];
        let r = wilcoxon_signed_rank(&d).unwrap();
        assert_eq!(
            r,
            TestResult {
                statistic: 31.5,
                p_value: 18.0 / 256.0,
                exact: true
            }
        );
        // Five blocks, ties (1,1), (2,2), all positive: the smallest p 5 blocks allow, 2/32
        // (the approximation said 0.037: "significant" with 5 blocks).
        let r = wilcoxon_signed_rank(&[2.0, 2.0, 1.0, 1.0, 3.0]).unwrap();
        assert_eq!((r.statistic, r.p_value, r.exact), (15.0, 0.0625, true));
        assert_eq!(wilcoxon_min_p(&[2.0, 2.0, 1.0, 1.0, 3.0]), Some(0.0625));
        // |d| has ties (1,1), (2,2), (4,4,4): V = 48.5, brute force 30/1024 = 0.029296875
        // (SciPy's normal approximation: 0.0359).
        let d = [1.0, 2.0, 2.0, -3.0, 4.0, 4.0, 4.0, 5.0, -1.0, 6.0];
        let r = wilcoxon_signed_rank(&d).unwrap();
        assert_eq!((r.statistic, r.p_value, r.exact), (48.5, 0.029296875, true));
    }

    #[test]
    fn signed_rank_zeros_are_dropped() {
        // Two zeros dropped, 7 untied non-zero differences: V = 24, exact p = 14/128 =
        // 0.109375 (SciPy exact on the non-zero values). R would use the normal
        // approximation here because of the zeros: 0.10831938073000408 (SciPy "approx").
        let d = [0.0, 2.1, -0.4, 0.0, 3.3, 1.7, 0.9, 2.8, -1.2];
        let r = wilcoxon_signed_rank(&d).unwrap();
        assert_eq!(
            r,
            TestResult {
                statistic: 24.0,
                p_value: 0.109375,
                exact: true
            }
        );
        assert_eq!(wilcoxon_signed_rank(&[0.0, 0.0]), None);
        assert_eq!(wilcoxon_signed_rank(&[]), None);
        assert_eq!(wilcoxon_signed_rank(&[f64::NAN, 2.0]).unwrap().p_value, 1.0);
    }

    #[test]
    #[allow(clippy::approx_constant)] // 0.318 is a drawn value in the data, not 1/π
    fn signed_rank_exact_limit_and_large_n() {
        let d25 = [
            1.256, 0.725, 2.197, -1.462, 1.374, -0.524, -0.369, 0.482, -1.011, -0.695, -0.006,
            0.178, -1.404, -0.374, 0.354, 0.368, -0.162, 0.496, -0.013, 1.673, -0.309, 0.559, 0.01,
            1.355, -0.472,
        ];
        // n = 25, exact: V = 188, SciPy exact: 0.507703959941864
        let r = wilcoxon_signed_rank(&d25).unwrap();
        assert!(r.exact);
        assert_eq!(r.statistic, 188.0);
        assert!(close(r.p_value, 0.507703959941864, 1e-12), "{}", r.p_value);
        // n = 26 (one more value, 1.2345): exact. V = 212, SciPy exact: 0.3666093051433563
        let mut d26 = d25.to_vec();
        d26.push(1.2345);
        let r = wilcoxon_signed_rank(&d26).unwrap();
        assert!(r.exact);
        assert_eq!(r.statistic, 212.0);
        assert!(close(r.p_value, 0.3666093051433563, 1e-12), "{}", r.p_value);
        // n = 30: V = 263, SciPy exact: 0.5425279382616282
        let d30 = [
            0.089, -0.218, 0.45, -1.49, 0.584, -0.022, -0.426, 0.399, -1.651, 0.142, -0.431, 0.71,
            0.742, -0.628, -0.633, -1.17, -0.488, 0.619, 1.157, 0.529, 0.335, -0.567, 0.496,
            -0.516, 0.54, 0.097, 1.156, 0.502, 1.669, -0.108,
        ];
        let r = wilcoxon_signed_rank(&d30).unwrap();
        assert_eq!(r.statistic, 263.0);
        assert!(close(r.p_value, 0.5425279382616282, 1e-12), "{}", r.p_value);
        // n = 49, the exact limit (numpy.random.default_rng(20261123).normal(0.3, 1, 49),
        // rounded to 3 places): V = 898, SciPy exact: 0.003941524975058286. With one more
        // value (0.4321) n = 50 uses the approximation: SciPy 0.0036650650423073077.
        let d49 = [
            0.651, 3.796, 0.893, -0.318, 1.564, 0.391, -0.187, 2.136, 1.464, 0.397, -0.976, 0.404,
            0.382, 1.786, 0.865, 2.151, 1.095, 1.21, 1.176, 0.081, -1.271, 0.584, -0.053, -1.407,
            -0.381, -0.773, -2.435, 0.861, 0.429, -0.447, 1.286, -0.262, 0.446, -0.671, 1.758,
            1.17, 1.306, 1.575, -2.076, 0.937, 0.155, 0.939, -1.981, 1.049, -0.072, 0.557, 0.437,
            0.269, 1.934,
        ];
        let r = wilcoxon_signed_rank(&d49).unwrap();
        assert!(r.exact);
        assert_eq!(r.statistic, 898.0);
        assert!(
            close(r.p_value, 0.003941524975058286, 1e-12),
            "{}",
            r.p_value
        );
        let mut d50 = d49.to_vec();
        d50.push(0.4321);
        let r = wilcoxon_signed_rank(&d50).unwrap();
        assert!(!r.exact);
        assert!(
            close(r.p_value, 0.0036650650423073077, 1e-12),
            "{}",
            r.p_value
        );
    }

    #[test]
    fn rank_sum_hollander_wolfe() {
        // R's ?wilcox.test example (Hollander & Wolfe 1973, p. 69: permeability constants):
        // wilcox.test(x, y, alternative = "g") gives W = 35, p-value = 0.1272; two-sided is
        // twice that. SciPy exact two-sided: 0.2544122544122544.
        let x = [0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46];
        let y = [1.15, 0.88, 0.90, 0.74, 1.21];
        let r = mann_whitney_u(&x, &y).unwrap();
        assert!(r.exact);
        assert_eq!(r.statistic, 35.0);
        assert!(close(r.p_value, 0.2544122544122544, 1e-14), "{}", r.p_value);
        // Swapping the groups gives U = 50 − 35 and the same p.
        let s = mann_whitney_u(&y, &x).unwrap();
        assert_eq!(s.statistic, 15.0);
        assert!(close(s.p_value, r.p_value, 1e-14));
    }

    #[test]
    fn rank_sum_small_groups() {
        // 3 vs 3, complete separation: U = 0, p = 2/C(6,3) = 0.1 (SciPy: 0.1).
        let r = mann_whitney_u(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap();
        assert_eq!(
            r,
            TestResult {
                statistic: 0.0,
                p_value: 0.1,
                exact: true
            }
        );
        assert_eq!(
            mann_whitney_min_p(&[9.0, 8.0, 7.0], &[1.0, 2.0, 3.0]),
            Some(0.1)
        );
        // 4 vs 4: 2/70
        let p = mann_whitney_min_p(&[0.0; 4], &[0.0; 4]).unwrap();
        assert!(close(p, 2.0 / 70.0, 1e-15));
        assert_eq!(mann_whitney_u(&[], &[1.0]), None);
        // All values equal: no evidence at all (SciPy: 1.0; exact: every split has U = 3).
        let r = mann_whitney_u(&[5.0, 5.0, 5.0], &[5.0, 5.0]).unwrap();
        assert_eq!((r.statistic, r.p_value, r.exact), (3.0, 1.0, true));
    }

    #[test]
    fn rank_sum_ties_use_the_exact_distribution_of_mid_ranks() {
        // Ties across groups (2, 3): U = 11.5, brute force over the C(13, 6) = 1716 splits:
        // 318/1716 = 0.1853146853146853 (SciPy's asymptotic: 0.1948).
        let r = mann_whitney_u(
            &[1.0, 2.0, 2.0, 3.0, 5.0, 7.0],
            &[2.0, 3.0, 4.0, 4.0, 6.0, 8.0, 9.0],
        )
        .unwrap();
        assert_eq!((r.statistic, r.exact), (11.5, true));
        assert!(close(r.p_value, 0.1853146853146853, 1e-14), "{}", r.p_value);
        // 4 vs 5 with ties within and across: U = 2.5, brute force 14/126 = 0.1111...
        let r = mann_whitney_u(&[1.0, 1.0, 2.0, 3.0], &[2.0, 3.0, 3.0, 4.0, 5.0]).unwrap();
        assert_eq!((r.statistic, r.exact), (2.5, true));
        assert!(close(r.p_value, 1.0 / 9.0, 1e-14), "{}", r.p_value);
    }

    #[test]
    fn rank_sum_exact_limit_and_large_n() {
        let a25 = [
            8.7417, 10.1925, 10.9753, 8.9365, 9.3003, 8.7501, 11.1808, 9.8106, 9.6848, 8.5875,
            8.9362, 10.9265, 9.8105, 9.5991, 10.7919, 9.0941, 11.6134, 9.6318, 9.487, 9.7348,
            10.0373, 10.7012, 9.3012, 9.176, 10.0382,
        ];
        let b25 = [
            10.8389, 11.3773, 10.0232, 11.467, 9.4801, 11.8858, 9.4079, 10.4137, 10.6953, 11.5132,
            11.9602, 10.5492, 12.3956, 9.6805, 10.8271, 10.2631, 11.0724, 9.5481, 9.4022, 11.7832,
            11.564, 11.0611, 9.7978, 11.0921, 10.9472,
        ];
        // 25 vs 25, exact: U = 141, SciPy exact: 0.0006488774703758051
        let r = mann_whitney_u(&a25, &b25).unwrap();
        assert!(r.exact);
        assert_eq!(r.statistic, 141.0);
        assert!(
            close(r.p_value, 0.0006488774703758051, 1e-12),
            "{}",
            r.p_value
        );
        // 25 vs 26 (b plus 10.2345): exact, U = 147, SciPy exact: 0.0005863723450610192
        let mut b26 = b25.to_vec();
        b26.push(10.2345);
        let r = mann_whitney_u(&a25, &b26).unwrap();
        assert!(r.exact);
        assert_eq!(r.statistic, 147.0);
        assert!(
            close(r.p_value, 0.0005863723450610192, 1e-12),
            "{}",
            r.p_value
        );
        // 30 vs 28: U = 169, SciPy exact: 5.232643383137727e-05
        let a30 = [
            10.877, 8.805, 8.633, 9.452, 10.092, 8.479, 9.496, 9.996, 9.964, 10.876, 10.784,
            10.333, 10.913, 10.94, 8.891, 12.185, 9.951, 9.394, 10.6, 9.511, 10.627, 8.799, 10.725,
            8.736, 10.376, 9.787, 9.499, 10.153, 9.425, 9.228,
        ];
        let b28 = [
            10.995, 12.531, 9.602, 11.755, 11.682, 9.48, 10.79, 11.124, 9.689, 11.679, 11.478,
            12.298, 10.99, 11.546, 12.412, 10.803, 10.1, 9.149, 10.886, 9.333, 11.698, 10.747,
            11.411, 10.763, 11.838, 10.144, 10.65, 12.0,
        ];
        let r = mann_whitney_u(&a30, &b28).unwrap();
        assert_eq!(r.statistic, 169.0);
        assert!(
            close(r.p_value, 5.232643383137727e-05, 1e-11),
            "{}",
            r.p_value
        );
    }
}
