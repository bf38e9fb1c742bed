//! The seeded random number generator the bootstrap draws from, so that a report computed
//! twice from the same numbers shows the same intervals.
//!
//! PCG-64 (MCG variant, `pcg64_fast`) from `rand_pcg`, whose 128-bit state is derived from a
//! `u64` seed with SplitMix64, so that nearby seeds (0, 1, 2, …) give unrelated streams.
//! Changing anything here changes every bootstrap interval rubyrace prints: the tests pin
//! the first outputs.

use rand_core::RngCore;
use rand_pcg::Pcg64Mcg;

/// A small, fast, reproducible generator. Not for cryptography.
#[derive(Clone, Debug)]
pub struct SeededRng {
    inner: Pcg64Mcg,
    spare_normal: Option<f64>,
}

/// One step of SplitMix64 (Steele, Lea & Flood 2014; Vigna's `splitmix64.c`).
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl SeededRng {
    /// The generator for `seed`: the PCG state is two SplitMix64 outputs of the seed.
    pub fn new(seed: u64) -> SeededRng {
        let mut sm = seed;
        let hi = splitmix64(&mut sm) as u128;
        let lo = splitmix64(&mut sm) as u128;
        SeededRng {
            inner: Pcg64Mcg::new((hi << 64) | lo),
            spare_normal: None,
        }
    }

    /// 64 uniformly random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.inner.next_u64()
    }

    /// A uniform integer in `0..n`, without modulo bias (Lemire's multiply-and-reject,
    /// "Fast random integer generation in an interval", ACM TOMACS 2019).
    ///
    /// # Panics
    /// When `n` is 0.
    pub fn uniform_below(&mut self, n: usize) -> usize {
        assert!(n > 0, "uniform_below(0): empty range");
        let range = n as u64;
        let mut m = u128::from(self.next_u64()) * u128::from(range);
        if (m as u64) < range {
            let threshold = range.wrapping_neg() % range;
            while (m as u64) < threshold {
                m = u128::from(self.next_u64()) * u128::from(range);
            }
        }
        (m >> 64) as usize
    }

    /// A uniform `f64` in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A standard normal deviate (Box–Muller; the second value of each pair is kept for
    /// the next call). Used by tests and simulations, not by the bootstrap itself.
    pub fn standard_normal(&mut self) -> f64 {
        if let Some(z) = self.spare_normal.take() {
            return z;
        }
        let u1 = 1.0 - self.next_f64(); // (0, 1]: ln is finite
        let u2 = self.next_f64();
        let r = (-2.0 * u1.ln()).sqrt();
        let (s, c) = (std::f64::consts::TAU * u2).sin_cos();
        self.spare_normal = Some(r * s);
        r * c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_reference_outputs() {
        // Published SplitMix64 outputs (Vigna's splitmix64.c, also the example sequence on
        // Wikipedia's "Xorshift" page), re-checked with a 6-line Python transcription:
        // seed 0 -> 0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f;
        // seed 1234567 -> 6457827717110365317, 3203168211198807973, 9817491932198370423.
        let mut s = 0u64;
        assert_eq!(splitmix64(&mut s), 0xe220_a839_7b1d_cdaf);
        assert_eq!(splitmix64(&mut s), 0x6e78_9e6a_a1b9_65f4);
        assert_eq!(splitmix64(&mut s), 0x06c4_5d18_8009_454f);
        let mut s = 1_234_567u64;
        assert_eq!(splitmix64(&mut s), 6_457_827_717_110_365_317);
        assert_eq!(splitmix64(&mut s), 3_203_168_211_198_807_973);
        assert_eq!(splitmix64(&mut s), 9_817_491_932_198_370_423);
    }

    #[test]
    fn reproducible_and_seed_dependent() {
        let a: Vec<u64> = {
            let mut r = SeededRng::new(42);
            (0..8).map(|_| r.next_u64()).collect()
        };
        let b: Vec<u64> = {
            let mut r = SeededRng::new(42);
            (0..8).map(|_| r.next_u64()).collect()
        };
        let c: Vec<u64> = {
            let mut r = SeededRng::new(43);
            (0..8).map(|_| r.next_u64()).collect()
        };
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn pinned_stream() {
        // Pinned so that a change of the seeding or of the generator (which would change
        // every bootstrap interval in every report) is noticed. Values computed by an
        // independent Python transcription of SplitMix64 seeding + PCG64-MCG (multiplier
        // 0x2360ed051fc65da44385df649fccf645, XSL-RR output) + Lemire's method, and matching
        // this implementation.
        let mut r = SeededRng::new(0);
        let first: Vec<u64> = (0..3).map(|_| r.next_u64()).collect();
        assert_eq!(first, PINNED_SEED0);
        let mut r = SeededRng::new(7);
        let draws: Vec<usize> = (0..10).map(|_| r.uniform_below(10)).collect();
        assert_eq!(draws, PINNED_SEED7_BELOW10);
    }
    const PINNED_SEED0: [u64; 3] = [
        11_003_291_374_206_607_741,
        6_515_259_905_038_274_461,
        14_476_622_873_835_102_852,
    ];
    const PINNED_SEED7_BELOW10: [usize; 10] = [1, 6, 3, 8, 6, 3, 2, 8, 9, 9];

    #[test]
    fn uniform_below_range_and_balance() {
        let mut r = SeededRng::new(1);
        assert!((0..1000).all(|_| r.uniform_below(1) == 0));
        // Chi-square of 60 000 draws over 6 cells: 5 degrees of freedom, the 0.999
        // quantile is 20.52; a biased generator would exceed it.
        let mut counts = [0u32; 6];
        for _ in 0..60_000 {
            counts[r.uniform_below(6)] += 1;
        }
        let chi2: f64 = counts
            .iter()
            .map(|&c| (c as f64 - 10_000.0).powi(2) / 10_000.0)
            .sum();
        assert!(chi2 < 20.52, "counts {counts:?}, chi2 {chi2}");
        // A range that is not a power of two and close to 2^64 still stays in range.
        let big = usize::MAX / 3 * 2;
        assert!((0..1000).all(|_| r.uniform_below(big) < big));
    }

    #[test]
    fn unit_interval_and_normal_moments() {
        let mut r = SeededRng::new(3);
        let n = 200_000;
        let mut sum = 0.0;
        let mut sum2 = 0.0;
        for _ in 0..n {
            let u = r.next_f64();
            assert!((0.0..1.0).contains(&u));
            let z = r.standard_normal();
            sum += z;
            sum2 += z * z;
        }
        let mean = sum / n as f64;
        let var = sum2 / n as f64 - mean * mean;
        // Standard errors: mean 1/sqrt(n) = 0.0022, variance sqrt(2/n) = 0.0032.
        assert!(mean.abs() < 0.01, "mean {mean}");
        assert!((var - 1.0).abs() < 0.015, "var {var}");
    }

    #[test]
    #[should_panic]
    fn uniform_below_zero_panics() {
        SeededRng::new(0).uniform_below(0);
    }
}
