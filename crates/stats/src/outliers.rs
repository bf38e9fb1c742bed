//! Tukey's fences: which trials look like outliers (a GC storm, a noisy neighbour, a cold
//! start) and deserve a look before they are trusted or set aside. Flagging only: the
//! intervals and tests never drop anything by themselves.

use crate::summary::quantile;

/// The indices (into `values`, ascending) of the values outside
/// [Q1 − k·IQR, Q3 + k·IQR], where Q1 and Q3 are the quartiles of the finite values
/// (linear interpolation, R's type 7, NumPy's default) and IQR = Q3 − Q1.
/// k = 1.5 is Tukey's usual fence, k = 3 his "far out" one.
///
/// NaN is never flagged; ±∞ always is (when there are finite values). Empty when there
/// are no finite values. With fewer than about 5 values nothing meaningful can be flagged.
pub fn tukey_outliers(values: &[f64], k: f64) -> Vec<usize> {
    let q1 = quantile(values, 0.25);
    let q3 = quantile(values, 0.75);
    if q1.is_nan() || q3.is_nan() {
        return Vec::new();
    }
    let iqr = q3 - q1;
    let (low, high) = (q1 - k * iqr, q3 + k * iqr);
    values
        .iter()
        .enumerate()
        .filter(|(_, &v)| v < low || v > high)
        .map(|(i, _)| i)
        .collect()
}

/// The fence of `robust_outliers` for a sample of `n`: the 98th percentile of the largest
/// robust z of n normal values, so that clean data flag anything in about 2% of samples.
/// From a simulation (20,000 normal samples per n, NumPy `default_rng(1)`, by the author on
/// 2026-11-23); interpolated linearly between the sizes below, 4.1 beyond 100. The median
/// absolute deviation of a handful of values is itself so uncertain that the fences must
/// be wide: Tukey's 1.5·IQR flagged something in 45–59% of clean 6-to-12-trial runs.
pub fn robust_fence(n: usize) -> Option<f64> {
    const TABLE: [(usize, f64); 10] = [
        (6, 7.84),
        (8, 6.72),
        (10, 5.80),
        (12, 5.34),
        (15, 5.17),
        (20, 4.70),
        (30, 4.43),
        (50, 4.16),
        (100, 4.10),
        (usize::MAX, 4.10),
    ];
    if n < TABLE[0].0 {
        return None;
    }
    let i = TABLE.iter().position(|(size, _)| *size >= n)?;
    let (n1, k1) = TABLE[i];
    if n1 == n || i == 0 || n1 == usize::MAX {
        return Some(k1);
    }
    let (n0, k0) = TABLE[i - 1];
    Some(k0 + (k1 - k0) * (n - n0) as f64 / (n1 - n0) as f64)
}

/// The indices of the values whose robust z, |x − median| / (1.4826·MAD), is above
/// `robust_fence(n)`. Empty below 6 finite values (nothing can be told there) and when
/// the MAD is 0 and nothing differs from the median.
pub fn robust_outliers(values: &[f64]) -> Vec<usize> {
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let Some(fence) = robust_fence(finite.len()) else {
        return Vec::new();
    };
    let median = quantile(&finite, 0.5);
    let deviations: Vec<f64> = finite.iter().map(|v| (v - median).abs()).collect();
    let scale = 1.4826 * quantile(&deviations, 0.5);
    values
        .iter()
        .enumerate()
        .filter(|(_, v)| v.is_finite() && (*v - median).abs() > fence * scale)
        .map(|(i, _)| i)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn robust_fences_suit_the_sample_size() {
        assert_eq!(robust_fence(5), None);
        assert_eq!(robust_fence(6), Some(7.84));
        assert!((robust_fence(7).unwrap() - 7.28).abs() < 1e-12);
        assert_eq!(robust_fence(1000), Some(4.10));
        // Median 10, MAD 1 (scale 1.4826), fence 5.80 at n = 10: 10 ± 8.6.
        let v = [9.0, 10.0, 11.0, 10.0, 9.0, 11.0, 10.0, 18.0, 10.0, 19.0];
        assert_eq!(robust_outliers(&v), vec![9]);
        assert!(robust_outliers(&[1.0, 2.0, 3.0, 4.0, 100.0]).is_empty());
    }

    /// Seeded simulation on clean normal data: the fences flag something in about 2% of
    /// samples of each size.
    #[test]
    fn robust_fences_rarely_fire_on_clean_data() {
        let mut rng = crate::SeededRng::new(98);
        for n in [6, 10, 20, 50] {
            let runs = 3000;
            let fired = (0..runs)
                .filter(|_| {
                    let x: Vec<f64> = (0..n).map(|_| rng.standard_normal()).collect();
                    !robust_outliers(&x).is_empty()
                })
                .count();
            let rate = fired as f64 / runs as f64;
            assert!((0.008..=0.035).contains(&rate), "n {n}: {rate}");
        }
    }

    #[test]
    fn known_fences() {
        // NumPy 2 (np.percentile, default linear = type 7): Q1 = 10.25, Q3 = 12, IQR = 1.75;
        // k = 1.5: fences [7.625, 14.625], outliers at indices 5 (50) and 9 (1);
        // k = 3: fences [5, 17.25], the same two.
        let v = [10.0, 12.0, 11.0, 13.0, 12.0, 50.0, 11.0, 12.0, 9.0, 1.0];
        assert_eq!(tukey_outliers(&v, 1.5), vec![5, 9]);
        assert_eq!(tukey_outliers(&v, 3.0), vec![5, 9]);
        // 16 is outside 14.625 but inside 17.25 (same quartiles).
        let v = [10.0, 12.0, 11.0, 13.0, 12.0, 16.0, 11.0, 12.0, 9.0, 10.0];
        assert_eq!(tukey_outliers(&v, 1.5), vec![5]);
        assert_eq!(tukey_outliers(&v, 3.0), Vec::<usize>::new());
    }

    #[test]
    fn edge_cases() {
        assert!(tukey_outliers(&[], 1.5).is_empty());
        assert!(tukey_outliers(&[f64::NAN], 1.5).is_empty());
        assert!(tukey_outliers(&[5.0; 8], 1.5).is_empty());
        // Values on a fence are kept: Q1 = 1, Q3 = 3 → upper fence 6 for k = 1.5.
        assert!(tukey_outliers(&[1.0, 1.0, 3.0, 3.0, 6.0], 1.5).is_empty());
        // NaN is skipped (and does not shift the indices), ∞ is flagged.
        let v = [10.0, f64::NAN, 11.0, 12.0, 11.0, f64::INFINITY, 10.5, 100.0];
        assert_eq!(tukey_outliers(&v, 1.5), vec![5, 7]);
    }
}
