//! Drift over time: do a configuration's results creep up or down across the run (thermal
//! throttling, a growing heap, a filling disk), which would make trials not exchangeable?
//!
//! - `mann_kendall`: the Mann–Kendall trend test (is there a monotonic trend?).
//! - `sen_slope`: the Theil–Sen slope (how much per step?), robust to outliers.
//! - `pettitt`: Pettitt's test for one change of level (a step) at an unknown point.

use crate::dist::normal_sf;
use crate::ranktest::TestResult;

/// The Mann–Kendall test for a monotonic trend in `values_in_time_order`, two-sided.
///
/// The statistic is S = Σ_{i<j} sign(xⱼ − xᵢ) (positive: rising). Its variance under "no
/// trend" is [n(n−1)(2n+5) − Σ t(t−1)(2t+5)]/18 over the groups of t tied values, and the
/// p-value is from z = (S − sign S)/√var (continuity correction) on the normal
/// distribution, as in Mann (1945), Kendall (1975), and the `pymannkendall` and R `Kendall`
/// packages. Always `exact: false`. Non-finite values are ignored. `None` for fewer than 4
/// values (the smallest possible p is then above 0.05 anyway: 0.089 for 4 values).
pub fn mann_kendall(values_in_time_order: &[f64]) -> Option<TestResult> {
    let x = finite(values_in_time_order);
    let n = x.len();
    if n < 4 {
        return None;
    }
    let mut s = 0i64;
    for i in 0..n {
        for j in i + 1..n {
            s += match x[j].partial_cmp(&x[i]) {
                Some(std::cmp::Ordering::Greater) => 1,
                Some(std::cmp::Ordering::Less) => -1,
                _ => 0,
            };
        }
    }
    let (_, ties) = crate::ranktest::average_ranks(&x);
    let tie_term: f64 = ties
        .iter()
        .map(|&t| (t * (t - 1) * (2 * t + 5)) as f64)
        .sum();
    let nf = n as f64;
    let var = (nf * (nf - 1.0) * (2.0 * nf + 5.0) - tie_term) / 18.0;
    let s = s as f64;
    let p_value = if var <= 0.0 || s == 0.0 {
        1.0
    } else {
        let z = (s - s.signum()) / var.sqrt();
        (2.0 * normal_sf(z.abs())).min(1.0)
    };
    Some(TestResult {
        statistic: s,
        p_value,
        exact: false,
    })
}

/// The Theil–Sen slope of `values` taken at equally spaced times: the median over all
/// pairs i < j of (xⱼ − xᵢ)/(j − i), in units per step (per trial or per block).
///
/// Non-finite values are skipped but keep their place in time. `None` with fewer than
/// 2 finite values.
pub fn sen_slope(values: &[f64]) -> Option<f64> {
    let mut slopes = Vec::new();
    for (i, &xi) in values.iter().enumerate() {
        if !xi.is_finite() {
            continue;
        }
        for (j, &xj) in values.iter().enumerate().skip(i + 1) {
            if xj.is_finite() {
                slopes.push((xj - xi) / (j - i) as f64);
            }
        }
    }
    if slopes.is_empty() {
        return None;
    }
    Some(crate::summary::quantile(&slopes, 0.5))
}

/// The finite values, in their order.
fn finite(values: &[f64]) -> Vec<f64> {
    values.iter().copied().filter(|v| v.is_finite()).collect()
}

/// Pettitt's (1979) test for one change of level in `values_in_time_order` at an unknown
/// point, two-sided: the statistic is K = maxₜ |Uₜ| with Uₜ = Σ_{i≤t<j} sign(xᵢ − xⱼ), and
/// its approximate p-value 2·exp(−6K²/(n³ + n²)) (capped at 1), as in Pettitt's paper and
/// the `pyhomogeneity` and R `trend` packages. Returns the p-value and t, the number of
/// values before the change. Non-finite values are ignored. `None` below 4 values.
pub fn pettitt(values_in_time_order: &[f64]) -> Option<(f64, usize)> {
    let x = finite(values_in_time_order);
    let n = x.len();
    if n < 4 {
        return None;
    }
    let sign = |d: f64| -> i64 {
        if d > 0.0 {
            1
        } else if d < 0.0 {
            -1
        } else {
            0
        }
    };
    // Uₜ = Uₜ₋₁ + Σⱼ sign(xₜ − xⱼ) over all j (the pairs within the first part cancel).
    let (mut u, mut k, mut at) = (0i64, 0i64, 0usize);
    for t in 0..n - 1 {
        u += x.iter().map(|&xj| sign(x[t] - xj)).sum::<i64>();
        if u.abs() > k {
            (k, at) = (u.abs(), t + 1);
        }
    }
    let nf = n as f64;
    let kf = k as f64;
    let p = (2.0 * (-6.0 * kf * kf / (nf.powi(3) + nf * nf)).exp()).min(1.0);
    Some((p, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pettitt_by_hand() {
        // 1 2 3 | 10 11 12: U₁ = −5, U₂ = −8, U₃ = −9, U₄ = −8, U₅ = −5, so K = 9 after
        // 3 values, and p = 2·exp(−6·81/(216 + 36)) = 2·exp(−27/14) = 0.29074.
        let (p, at) = pettitt(&[1.0, 2.0, 3.0, 10.0, 11.0, 12.0]).unwrap();
        assert_eq!(at, 3);
        assert!((p - 2.0 * (-27.0f64 / 14.0).exp()).abs() < 1e-12, "{p}");
        // No change at all: p = 1 (K = 0 with every value tied).
        assert_eq!(pettitt(&[5.0; 8]).unwrap().0, 1.0);
        assert_eq!(pettitt(&[1.0, 2.0, 3.0]), None);
        // A long clear step is found where it is.
        let step: Vec<f64> = (0..30)
            .map(|i| if i < 12 { 0.0 } else { 1.0 } + 0.01 * (i % 3) as f64)
            .collect();
        let (p, at) = pettitt(&step).unwrap();
        assert_eq!(at, 12);
        assert!(p < 1e-4, "{p}");
    }

    fn close(got: f64, want: f64, rel: f64) -> bool {
        (got - want).abs() <= rel * want.abs()
    }

    // Reference values: pymannkendall 1.4.3 (`original_test(x)`: s, var_s, p;
    // `sens_slope(x).slope`), run with SciPy 1.17.1 in a virtualenv by the author.

    #[test]
    fn four_rising_values_by_hand() {
        // S = 6, var = 4·3·13/18 = 8.667, z = 5/√8.667 = 1.6984, p = 0.08943
        // (pymannkendall: p = 0.08942935902899363, slope 1.0).
        let r = mann_kendall(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(r.statistic, 6.0);
        assert!(
            close(r.p_value, 0.08942935902899363, 1e-12),
            "{}",
            r.p_value
        );
        assert_eq!(sen_slope(&[1.0, 2.0, 3.0, 4.0]), Some(1.0));
    }

    #[test]
    fn throughput_sliding_down() {
        // S = −35, var 125, p = 0.002357527595795439, slope −27.5 per trial.
        let x = [
            9800.0, 9750.0, 9900.0, 9700.0, 9650.0, 9690.0, 9600.0, 9620.0, 9550.0, 9580.0,
        ];
        let r = mann_kendall(&x).unwrap();
        assert_eq!(r.statistic, -35.0);
        assert!(
            close(r.p_value, 0.002357527595795439, 1e-12),
            "{}",
            r.p_value
        );
        assert!(!r.exact);
        assert_eq!(sen_slope(&x), Some(-27.5));
    }

    #[test]
    fn ties() {
        // Ties (2 ×3, 3 ×3, 4 ×2, 5 ×2): S = 46, var = 203.333, p = 0.0016006354791051614,
        // slope 0.4.
        let x = [1.0, 2.0, 2.0, 3.0, 3.0, 3.0, 2.0, 4.0, 5.0, 5.0, 6.0, 4.0];
        let r = mann_kendall(&x).unwrap();
        assert_eq!(r.statistic, 46.0);
        assert!(
            close(r.p_value, 0.0016006354791051614, 1e-12),
            "{}",
            r.p_value
        );
        assert!(close(sen_slope(&x).unwrap(), 0.4, 1e-15));
        // No trend: S = −2, p = 0.9000040960811826, slope −0.1.
        let x = [5.0, 3.0, 6.0, 2.0, 7.0, 4.0, 5.0, 3.0];
        let r = mann_kendall(&x).unwrap();
        assert_eq!(r.statistic, -2.0);
        assert!(close(r.p_value, 0.9000040960811826, 1e-12), "{}", r.p_value);
        assert!(close(sen_slope(&x).unwrap(), -0.1, 1e-15));
        // All equal: S = 0, var = 0, p = 1, slope 0.
        let r = mann_kendall(&[3.0; 5]).unwrap();
        assert_eq!((r.statistic, r.p_value), (0.0, 1.0));
        assert_eq!(sen_slope(&[3.0; 5]), Some(0.0));
    }

    #[test]
    fn forty_noisy_trials() {
        // 10000 − 3·t + N(0, 40) noise (numpy default_rng(7)), rounded to 0.1:
        // S = −448, var = 7364.667 (ties of 9917.5 and 9862.7), slope −3.2407867494824094
        // per trial. pymannkendall's p = 1.901482504784724e-07 comes from
        // 2·(1 − Φ(|z|)), which loses digits this far out; SciPy's 2·norm.sf(|z|) on the
        // same z gives 1.9014825058920538e-07, the value used.
        let x = [
            10000.0, 10008.9, 9983.0, 9955.4, 9969.8, 9945.3, 9984.4, 10032.6, 9956.3, 9948.2,
            9989.6, 9981.3, 9968.2, 9923.8, 9956.8, 9982.8, 9898.2, 9930.7, 9870.0, 9891.4, 9866.3,
            9927.6, 9883.3, 9941.9, 9934.3, 9917.5, 9821.3, 9897.5, 9914.1, 9917.5, 9848.8, 9887.9,
            9864.9, 9868.6, 9940.4, 9862.7, 9890.7, 9924.4, 9862.7, 9878.5,
        ];
        let r = mann_kendall(&x).unwrap();
        assert_eq!(r.statistic, -448.0);
        assert!(
            close(r.p_value, 1.9014825058920538e-07, 1e-12),
            "{}",
            r.p_value
        );
        assert!(close(r.p_value, 1.901482504784724e-07, 1e-9));
        assert!(close(sen_slope(&x).unwrap(), -3.2407867494824094, 1e-12));
    }

    #[test]
    fn small_and_missing() {
        assert_eq!(mann_kendall(&[1.0, 2.0, 3.0]), None);
        assert_eq!(mann_kendall(&[1.0, 2.0, f64::NAN, 3.0]), None);
        assert_eq!(sen_slope(&[1.0]), None);
        // A missing value keeps its place: slopes (3−1)/2, (5−1)/3, (5−3)/1 → median 1.333….
        let s = sen_slope(&[1.0, f64::NAN, 3.0, 5.0]).unwrap();
        assert!(close(s, 4.0 / 3.0, 1e-15), "{s}");
    }
}
