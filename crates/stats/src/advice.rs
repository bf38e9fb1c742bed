//! Sample-size advice: how many blocks (or trials per side) would make the comparison as
//! precise as the user wants, and how many any significance at all needs.

use crate::dist::t_quantile;
use crate::ranktest::mann_whitney_min_p;

/// The number of blocks (or trials per side) that would bring a t interval on the log
/// scale to a half-width of `ln(1 + target)`, from one measured with `n` of them: its
/// half-width `current_log_half_width` (ln(high) − ln(low), halved) gives the spread
/// s = hw·√n / t(n−1), and the answer is the smallest N ≥ n with
/// t(N−1)·s/√N ≤ ln(1 + target).
///
/// Unlike ⌈n·(hw/target)²⌉, this counts the t quantile shrinking as blocks are added (4.30
/// at 3 blocks, 2.57 at 6, 2.26 at 10), which that rule ignored: it overstated the blocks
/// needed 3.3× after 3 blocks and 1.5× after 6. It assumes the spread stays what it was
/// (same machine, same noise) and the extra blocks are like the first ones; the measured
/// spread is itself uncertain at small n, so the answer is a guide (a seeded simulation in
/// the tests checks that its median is within 20% of the blocks really needed).
///
/// `target` is a fraction (0.01 for ±1%). `None` when n < 2, a width is negative or not
/// finite, the target is not positive, or more than 10⁹ blocks would be needed.
pub fn blocks_for_log_half_width(
    current_log_half_width: f64,
    n: usize,
    target: f64,
    confidence: f64,
) -> Option<usize> {
    if n < 2
        || !current_log_half_width.is_finite()
        || current_log_half_width < 0.0
        || !(target > 0.0 && target.is_finite())
        || !(confidence > 0.0 && confidence < 1.0)
    {
        return None;
    }
    let q = 1.0 - (1.0 - confidence) / 2.0;
    let spread = current_log_half_width * (n as f64).sqrt() / t_quantile(q, n - 1);
    let goal = (1.0 + target).ln();
    let half_width = |blocks: usize| t_quantile(q, blocks - 1) * spread / (blocks as f64).sqrt();
    if half_width(n) <= goal {
        return Some(n);
    }
    // The half-width falls monotonically in N: double up to a bound, then bisect.
    let mut high = n.max(2) * 2;
    while half_width(high) > goal {
        high *= 2;
        if high > 1_000_000_000 {
            return None;
        }
    }
    let mut low = high / 2; // half_width(low) > goal
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if half_width(mid) <= goal {
            high = mid;
        } else {
            low = mid;
        }
    }
    Some(high)
}

/// The fewest blocks with which the signed-rank test can reach p ≤ `alpha` at all (all
/// blocks agreeing in sign, no ties): 6 for 0.05, 8 for 0.01. `None` unless 0 < alpha < 1.
pub fn min_blocks_for_signed_rank(alpha: f64) -> Option<usize> {
    if !(alpha > 0.0 && alpha < 1.0) {
        return None;
    }
    // All n blocks agreeing in sign, no ties: one of the 2ⁿ equally likely sign patterns at
    // each extreme, so the exact two-sided p is 2·2⁻ⁿ (what `wilcoxon_min_p` computes, and
    // exactly: powers of 2). In closed form because adaptive runs ask after every block
    // (the exact distributions cost O(n³) each); the tests check both agree.
    (1..=10_000).find(|&n| 2f64.powi(1 - n as i32) <= alpha)
}

/// The fewest trials per side (equal groups) with which the rank-sum test can reach
/// p ≤ `alpha` at all (complete separation, no ties): 4 for 0.05, 5 for 0.01.
/// `None` unless 0 < alpha < 1.
pub fn min_trials_for_rank_sum(alpha: f64) -> Option<usize> {
    if !(alpha > 0.0 && alpha < 1.0) {
        return None;
    }
    (1..=10_000).find(|&n| {
        let a = vec![0.0; n];
        mann_whitney_min_p(&a, &a).is_some_and(|p| p <= alpha)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ranktest::wilcoxon_min_p;

    /// The half-width of a 95% t interval of the mean of `n` normal log ratios with SD
    /// `sd`, drawn from `rng`.
    fn simulated_half_width(rng: &mut crate::SeededRng, n: usize, sd: f64) -> f64 {
        let x: Vec<f64> = (0..n).map(|_| sd * rng.standard_normal()).collect();
        let mean = x.iter().sum::<f64>() / n as f64;
        let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        t_quantile(0.975, n - 1) * var.sqrt() / (n as f64).sqrt()
    }

    #[test]
    fn blocks_for_a_target_count_the_shrinking_t_quantile() {
        // s = 0.05: at 6 blocks hw = 2.5706·0.05/√6 = 0.052472. ±1% needs
        // t(N−1)·0.05/√N ≤ ln 1.01 = 0.0099503: N = 100 (t(99) = 1.98422 → 0.0099211;
        // N = 99: 1.98447·0.05/√99 = 0.0099724 > goal).
        let hw6 = t_quantile(0.975, 5) * 0.05 / 6f64.sqrt();
        assert_eq!(blocks_for_log_half_width(hw6, 6, 0.01, 0.95), Some(100));
        // The old rule said ⌈6·(hw/goal)²⌉ = 167 blocks.
        assert_eq!((6.0 * (hw6 / 0.01f64.ln_1p()).powi(2)).ceil(), 167.0);
        // From 3 blocks, the same spread: still 100 (the old rule: 3·(4.303·0.05/√3/goal)² = 312).
        let hw3 = t_quantile(0.975, 2) * 0.05 / 3f64.sqrt();
        assert_eq!(blocks_for_log_half_width(hw3, 3, 0.01, 0.95), Some(100));
        // Precise enough already: stay at n.
        assert_eq!(blocks_for_log_half_width(0.001, 10, 0.01, 0.95), Some(10));
        assert_eq!(blocks_for_log_half_width(0.0, 10, 0.01, 0.95), Some(10));
        assert_eq!(blocks_for_log_half_width(0.1, 1, 0.01, 0.95), None);
        assert_eq!(blocks_for_log_half_width(0.1, 10, 0.0, 0.95), None);
        assert_eq!(blocks_for_log_half_width(f64::NAN, 10, 0.01, 0.95), None);
        assert_eq!(blocks_for_log_half_width(1e6, 10, 1e-9, 0.95), None);
    }

    /// Seeded simulation on synthetic truth: per-block log ratios with SD 0.03 (a quiet
    /// machine) and 0.08 (a noisy one). The blocks really needed for ±1% is the smallest N
    /// whose median simulated half-width is within ln 1.01; the advice given after a pilot of
    /// 6 and of 12 blocks has a median within 20% of it.
    #[test]
    fn the_advice_is_within_20_percent_of_the_blocks_really_needed() {
        let mut rng = crate::SeededRng::new(14);
        let goal = 0.01f64.ln_1p();
        for sd in [0.03, 0.08] {
            let median_half_width = |rng: &mut crate::SeededRng, n: usize| {
                let mut w: Vec<f64> = (0..301).map(|_| simulated_half_width(rng, n, sd)).collect();
                w.sort_by(f64::total_cmp);
                w[150]
            };
            // The true need: search upward from a little below the large-sample answer.
            let z_answer = (1.96 * sd / goal).powi(2) as usize;
            let mut needed = z_answer * 9 / 10;
            while median_half_width(&mut rng, needed) > goal {
                needed += 1;
            }
            for pilot in [6, 12] {
                let mut advice: Vec<usize> = (0..401)
                    .map(|_| {
                        let hw = simulated_half_width(&mut rng, pilot, sd);
                        blocks_for_log_half_width(hw, pilot, 0.01, 0.95).unwrap()
                    })
                    .collect();
                advice.sort_unstable();
                let median = advice[200] as f64;
                let off = median / needed as f64 - 1.0;
                assert!(
                    off.abs() <= 0.20,
                    "sd {sd}, pilot {pilot}: median advice {median} vs {needed} needed ({:+.0}%)",
                    100.0 * off
                );
            }
        }
    }

    #[test]
    fn minimum_sizes_for_significance() {
        // 2/2^n ≤ α: 2/64 = 0.031 ≤ 0.05 < 2/32; 2/256 = 0.0078 ≤ 0.01 < 2/128.
        assert_eq!(min_blocks_for_signed_rank(0.05), Some(6));
        assert_eq!(min_blocks_for_signed_rank(0.01), Some(8));
        assert_eq!(min_blocks_for_signed_rank(0.25), Some(3));
        // 2/C(2n, n) ≤ α: 2/70 = 0.029 ≤ 0.05 < 2/20; 2/252 = 0.0079 ≤ 0.01.
        assert_eq!(min_trials_for_rank_sum(0.05), Some(4));
        assert_eq!(min_trials_for_rank_sum(0.01), Some(5));
        assert_eq!(min_blocks_for_signed_rank(0.0), None);
        // The closed form against the exact distribution it replaces: the smallest n whose
        // all-positive, untied sample reaches p ≤ α, searched with `wilcoxon_min_p`.
        for alpha in [
            0.5,
            0.2,
            0.1,
            0.05,
            0.05 / 2.0,
            0.05 / 3.0,
            0.01,
            0.001,
            1e-6,
        ] {
            let searched = (1..=40).find(|&n| {
                let d: Vec<f64> = (1..=n).map(|i| i as f64).collect();
                wilcoxon_min_p(&d).is_some_and(|p| p <= alpha)
            });
            assert_eq!(min_blocks_for_signed_rank(alpha), searched, "alpha {alpha}");
        }
    }
}
