//! Summaries of a sample: the numbers a report shows for one cohort and one metric.

use serde::{Deserialize, Serialize};

/// n, mean, sample standard deviation, coefficient of variation (sd / mean), min, max and
/// the 10th, 50th and 90th percentiles (linear interpolation between order statistics,
/// R's type 7).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    pub sd: f64,
    pub cv: f64,
    pub min: f64,
    pub max: f64,
    pub p10: f64,
    pub p50: f64,
    pub p90: f64,
}

impl Summary {
    /// `None` for an empty sample; non-finite values are ignored.
    pub fn of(values: &[f64]) -> Option<Summary> {
        let mut xs: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        if xs.is_empty() {
            return None;
        }
        xs.sort_by(f64::total_cmp);
        let n = xs.len();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let sd = if n > 1 {
            (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        Some(Summary {
            n,
            mean,
            sd,
            cv: if mean != 0.0 { sd / mean.abs() } else { 0.0 },
            min: xs[0],
            max: xs[n - 1],
            p10: quantile_sorted(&xs, 0.10),
            p50: quantile_sorted(&xs, 0.50),
            p90: quantile_sorted(&xs, 0.90),
        })
    }

    pub fn median(&self) -> f64 {
        self.p50
    }
}

/// The median of a sample (the mean of the two middle values for an even count); `None`
/// when there is no finite value.
pub fn median(values: &[f64]) -> Option<f64> {
    let q = quantile(values, 0.5);
    q.is_finite().then_some(q)
}

/// The `q` quantile (0..=1) of an unsorted sample (type 7); NaN when empty.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    let mut xs: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    xs.sort_by(f64::total_cmp);
    quantile_sorted(&xs, q)
}

fn quantile_sorted(xs: &[f64], q: f64) -> f64 {
    match xs.len() {
        0 => f64::NAN,
        1 => xs[0],
        n => {
            let h = (n - 1) as f64 * q.clamp(0.0, 1.0);
            let lo = h.floor() as usize;
            let hi = (lo + 1).min(n - 1);
            xs[lo] + (h - lo as f64) * (xs[hi] - xs[lo])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // R: x <- c(2,4,4,4,5,5,7,9); mean 5, sd 2.13809, quantile(x, .1) 3.4, median 4.5, q90 7.6
        let s = Summary::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!(s.n, 8);
        assert_eq!(s.mean, 5.0);
        assert!((s.sd - 2.138_089_935).abs() < 1e-9);
        assert!((s.cv - 0.427_617_987).abs() < 1e-9);
        assert!((s.p10 - 3.4).abs() < 1e-12);
        assert_eq!(s.p50, 4.5);
        assert!((s.p90 - 7.6).abs() < 1e-12);
        assert_eq!((s.min, s.max), (2.0, 9.0));
    }

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn edge_cases() {
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(Summary::of(&[f64::NAN]), None);
        let one = Summary::of(&[3.0]).unwrap();
        assert_eq!((one.sd, one.p10, one.p90), (0.0, 3.0, 3.0));
        assert!(quantile(&[], 0.5).is_nan());
    }
}
