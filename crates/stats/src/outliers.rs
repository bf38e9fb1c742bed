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

#[cfg(test)]
mod tests {
    use super::*;

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
