//! Student's t-test of a mean against zero: the paired test on per-block log ratios, where
//! a rank test cannot reach significance with the few blocks a run has (five blocks give a
//! signed-rank p of at least 0.0625) and the measurements are counts whose logarithm is
//! close to normal (profile samples per request).
//!
//! Same two-sided convention and the same statistic as R's `t.test(x)` and
//! `t.test(a, b, paired = TRUE)`; the tests below check it against values R prints.

use crate::ci::mean_var;
use crate::dist::t_cdf;
use crate::ranktest::TestResult;

/// The two-sided one-sample t-test that the mean of `xs` is 0: t = mean / (s/√n) with n − 1
/// degrees of freedom. The p-value of `paired_ratio`'s interval: the interval excludes 1
/// exactly when p < 1 − confidence.
///
/// `None` for fewer than 2 values or a non-finite value. When every value is equal the
/// variance is 0: the p-value is 1 when they are all 0 and 0 otherwise (t = ±∞), as R
/// refuses to say ("data are essentially constant") but a difference seen identically in
/// every block is as strong as evidence gets.
pub fn one_sample_t(xs: &[f64]) -> Option<TestResult> {
    let n = xs.len();
    if n < 2 || xs.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let (mean, var) = mean_var(xs);
    let se = (var / n as f64).sqrt();
    let t = if se > 0.0 {
        mean / se
    } else if mean == 0.0 {
        0.0
    } else {
        mean.signum() * f64::INFINITY
    };
    // 2·P(T > |t|), from the lower tail for accuracy when p is small.
    let p = (2.0 * t_cdf(-t.abs(), n - 1)).min(1.0);
    Some(TestResult {
        statistic: t,
        p_value: p,
        exact: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs()
    }

    #[test]
    fn matches_r_on_one_to_five() {
        // R 4.x: t.test(1:5) → t = 4.2426, df = 4, p-value = 0.01324
        let r = one_sample_t(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        assert!(close(r.statistic, 4.242641, 1e-6), "{r:?}");
        assert!(close(r.p_value, 0.01324, 1e-3), "{r:?}");
    }

    #[test]
    fn matches_r_on_the_sleep_data_paired() {
        // R's `sleep` data set (Cushny & Peebles): extra hours of sleep of 10 patients on two
        // drugs. t.test(extra ~ group, data = sleep, paired = TRUE) in R ≤ 4.3 prints
        // t = -4.0621, df = 9, p-value = 0.002833.
        let g1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0];
        let g2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4];
        let diffs: Vec<f64> = g1.iter().zip(&g2).map(|(a, b)| a - b).collect();
        let r = one_sample_t(&diffs).unwrap();
        assert!(close(r.statistic, -4.0621, 1e-4), "{r:?}");
        assert!(close(r.p_value, 0.002833, 1e-3), "{r:?}");
    }

    #[test]
    fn agrees_with_the_paired_interval() {
        // The 95% interval of the log ratios excludes 0 exactly when p < 0.05: at the edge,
        // a set whose interval just touches 0 has p = 0.05.
        let xs = [0.1, 0.3, -0.05, 0.2];
        let r = one_sample_t(&xs).unwrap();
        let a: Vec<f64> = xs.iter().map(|x: &f64| x.exp()).collect();
        let ones = vec![1.0; a.len()];
        let ci = crate::ci::paired_ratio(&a, &ones, 1.0 - r.p_value).unwrap();
        assert!(close(ci.low, 1.0, 1e-9), "{ci:?} p={}", r.p_value);
    }

    #[test]
    fn constant_and_degenerate_samples() {
        assert_eq!(one_sample_t(&[0.0, 0.0, 0.0]).unwrap().p_value, 1.0);
        assert_eq!(one_sample_t(&[0.2, 0.2]).unwrap().p_value, 0.0);
        assert!(one_sample_t(&[1.0]).is_none());
        assert!(one_sample_t(&[1.0, f64::NAN]).is_none());
    }
}
