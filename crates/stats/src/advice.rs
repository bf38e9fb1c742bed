//! Sample-size advice: how many blocks (or trials per side) would make the comparison as
//! precise as the user wants, and how many any significance at all needs.

use crate::ranktest::{mann_whitney_min_p, wilcoxon_min_p};

/// The n that would bring a confidence interval's half-width from
/// `current_half_width_pct` (measured with `n` blocks or trials per side) down to
/// `target_pct`: ⌈n·(current/target)²⌉, and at least `n`.
///
/// Assumes the half-width shrinks as 1/√n: the spread of the measurements stays what it was
/// (same machine, same noise) and the extra blocks are like the first ones. It ignores that
/// the t quantile also shrinks as the degrees of freedom grow, so with few blocks the
/// answer errs on the safe side (e.g. at 3 blocks, t drops from 4.30 to about 2.2 by 10).
/// The current half-width is itself uncertain, more so at small n: the answer is a rough
/// guide, not a promise. Percentages or any unit work, as long as both are the same.
///
/// `None` when `n` is 0, either width is negative or not finite, the target is 0, or the
/// answer is beyond 2⁵³.
pub fn needed_for_half_width(
    current_half_width_pct: f64,
    n: usize,
    target_pct: f64,
) -> Option<usize> {
    if n == 0
        || !current_half_width_pct.is_finite()
        || !target_pct.is_finite()
        || current_half_width_pct < 0.0
        || target_pct <= 0.0
    {
        return None;
    }
    let ratio = current_half_width_pct / target_pct;
    let needed = n as f64 * ratio * ratio;
    if needed > 9.0e15 {
        return None;
    }
    // A hair of tolerance so that an exact answer computed with rounding error
    // (e.g. 40.000000000000006) is not rounded up to 41.
    let needed = (needed * (1.0 - 1e-12)).ceil() as usize;
    Some(needed.max(n))
}

/// The fewest blocks with which the signed-rank test can reach p ≤ `alpha` at all (all
/// blocks agreeing in sign, no ties): 6 for 0.05, 8 for 0.01. `None` unless 0 < alpha < 1.
pub fn min_blocks_for_signed_rank(alpha: f64) -> Option<usize> {
    if !(alpha > 0.0 && alpha < 1.0) {
        return None;
    }
    (1..=10_000).find(|&n| {
        let d: Vec<f64> = (1..=n).map(|i| i as f64).collect();
        wilcoxon_min_p(&d).is_some_and(|p| p <= alpha)
    })
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

    #[test]
    fn scaling() {
        // Halving the half-width takes four times the blocks.
        assert_eq!(needed_for_half_width(2.0, 10, 1.0), Some(40));
        assert_eq!(needed_for_half_width(3.0, 5, 1.0), Some(45));
        // ⌈10·(1.5/1)²⌉ = ⌈22.5⌉ = 23
        assert_eq!(needed_for_half_width(1.5, 10, 1.0), Some(23));
        // Precise enough already: stay at n.
        assert_eq!(needed_for_half_width(0.5, 10, 1.0), Some(10));
        assert_eq!(needed_for_half_width(0.0, 10, 1.0), Some(10));
        // Rounding noise does not add a block: 0.3 / 0.1 is 2.9999999999999996 in f64.
        assert_eq!(needed_for_half_width(0.3, 10, 0.1), Some(90));
        assert_eq!(needed_for_half_width(1.0, 0, 1.0), None);
        assert_eq!(needed_for_half_width(1.0, 10, 0.0), None);
        assert_eq!(needed_for_half_width(f64::NAN, 10, 1.0), None);
        assert_eq!(needed_for_half_width(1e10, 10, 1e-10), None);
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
    }
}
