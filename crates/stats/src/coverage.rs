//! Simulation checks that the intervals and tests are honest: on synthetic benchmark data
//! with a known true ratio, a 95 % interval must cover the truth in about 95 % of data
//! sets, and on A/A data (no difference) the intervals must contain 1 and the rank tests
//! must stay above p = 0.05 about 95 % of the time. Tests only.
//!
//! The data: requests/s around 10 000 with log-normal trial noise of CV 2 %
//! (σ = √ln(1 + 0.02²)); A is 0.97 × B (3 % slower). Paired data also get a drift factor
//! shared by both configurations of a block (log-normal, σ = 5 %), which the pairing must
//! cancel. 1000 data sets each, seeds 0..1000. With 1000 data sets the standard error of
//! an observed 95 % rate is 0.7 points, so the bounds are ≥ 4 standard errors away.
//! Run with `--nocapture` to see the observed rates.

use crate::ci::{
    paired_ratio, paired_reciprocal_difference, unpaired_ratio, unpaired_reciprocal_difference,
};
use crate::ranktest::{mann_whitney_u, wilcoxon_signed_rank};
use crate::rng::SeededRng;

const DATA_SETS: u64 = 1000;
const TRUE_RATIO: f64 = 0.97;
const BASE: f64 = 10_000.0;
const DRIFT_SIGMA: f64 = 0.05;

fn noise_sigma() -> f64 {
    (1.0f64 + 0.02 * 0.02).ln().sqrt()
}

/// n blocks of (a, b) with a shared drift per block.
fn paired_data(rng: &mut SeededRng, n: usize, ratio: f64) -> (Vec<f64>, Vec<f64>) {
    let s = noise_sigma();
    let mut a = Vec::with_capacity(n);
    let mut b = Vec::with_capacity(n);
    for _ in 0..n {
        let drift = (DRIFT_SIGMA * rng.standard_normal()).exp();
        b.push(BASE * drift * (s * rng.standard_normal()).exp());
        a.push(ratio * BASE * drift * (s * rng.standard_normal()).exp());
    }
    (a, b)
}

fn unpaired_data(rng: &mut SeededRng, n: usize, ratio: f64) -> (Vec<f64>, Vec<f64>) {
    let s = noise_sigma();
    let a = (0..n)
        .map(|_| ratio * BASE * (s * rng.standard_normal()).exp())
        .collect();
    let b = (0..n)
        .map(|_| BASE * (s * rng.standard_normal()).exp())
        .collect();
    (a, b)
}

/// E[1/a − 1/b] when a = r·B·D·e^(σZ), b = B·D·e^(σZ'), D = e^(δZ''):
/// (1/r − 1)/B · E[1/D] · E[e^(−σZ)] = (1/r − 1)/B · e^(δ²/2) · e^(σ²/2).
fn true_overhead(drift_sigma: f64) -> f64 {
    let s = noise_sigma();
    (1.0 / TRUE_RATIO - 1.0) / BASE * (drift_sigma * drift_sigma / 2.0).exp() * (s * s / 2.0).exp()
}

fn rate(count: u32) -> f64 {
    count as f64 / DATA_SETS as f64
}

#[test]
fn paired_coverage_10_blocks() {
    let truth_overhead = true_overhead(DRIFT_SIGMA);
    let (mut ratio_hits, mut overhead_hits, mut aa_hits, mut aa_quiet) = (0, 0, 0, 0);
    for seed in 0..DATA_SETS {
        let mut rng = SeededRng::new(seed);
        let (a, b) = paired_data(&mut rng, 10, TRUE_RATIO);
        if paired_ratio(&a, &b, 0.95).unwrap().contains(TRUE_RATIO) {
            ratio_hits += 1;
        }
        let (_, low, high) = paired_reciprocal_difference(&a, &b, 0.95).unwrap();
        if low <= truth_overhead && truth_overhead <= high {
            overhead_hits += 1;
        }
        let (a, b) = paired_data(&mut rng, 10, 1.0);
        if paired_ratio(&a, &b, 0.95).unwrap().contains(1.0) {
            aa_hits += 1;
        }
        let d: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x - y).collect();
        if wilcoxon_signed_rank(&d).unwrap().p_value >= 0.05 {
            aa_quiet += 1;
        }
    }
    let (r, o, aa, q) = (
        rate(ratio_hits),
        rate(overhead_hits),
        rate(aa_hits),
        rate(aa_quiet),
    );
    println!(
        "paired, 10 blocks: ratio coverage {r:.3}, overhead coverage {o:.3}, \
         A/A interval contains 1 {aa:.3}, A/A signed-rank p >= 0.05 {q:.3}"
    );
    assert!((0.92..=0.98).contains(&r), "ratio coverage {r}");
    assert!((0.92..=0.98).contains(&o), "overhead coverage {o}");
    assert!((0.92..=0.98).contains(&aa), "A/A coverage {aa}");
    // The exact test with 10 blocks rejects with probability 50/1024 = 0.0488 under A/A.
    assert!((0.92..=0.98).contains(&q), "A/A signed-rank {q}");
}

/// Bootstrap resamples per interval.
const RESAMPLES: usize = 1000;

#[test]
fn unpaired_ratio_coverage_20_per_side() {
    let mut hits = 0;
    for seed in 0..DATA_SETS {
        let mut rng = SeededRng::new(seed);
        let (a, b) = unpaired_data(&mut rng, 20, TRUE_RATIO);
        if unpaired_ratio(&a, &b, 0.95, RESAMPLES, seed)
            .unwrap()
            .contains(TRUE_RATIO)
        {
            hits += 1;
        }
    }
    let r = rate(hits);
    println!("unpaired, 20 per side: ratio coverage {r:.3}");
    assert!((0.90..=0.98).contains(&r), "ratio coverage {r}");
}

#[test]
fn unpaired_overhead_coverage_20_per_side() {
    let truth = true_overhead(0.0);
    let mut hits = 0;
    for seed in 0..DATA_SETS {
        let mut rng = SeededRng::new(seed);
        let (a, b) = unpaired_data(&mut rng, 20, TRUE_RATIO);
        let (_, low, high) = unpaired_reciprocal_difference(&a, &b, 0.95, RESAMPLES, seed).unwrap();
        if low <= truth && truth <= high {
            hits += 1;
        }
    }
    let r = rate(hits);
    println!("unpaired, 20 per side: overhead coverage {r:.3}");
    assert!((0.90..=0.98).contains(&r), "overhead coverage {r}");
}

#[test]
fn unpaired_a_a_20_per_side() {
    let (mut contains, mut quiet) = (0, 0);
    for seed in 0..DATA_SETS {
        let mut rng = SeededRng::new(seed);
        let (a, b) = unpaired_data(&mut rng, 20, 1.0);
        if unpaired_ratio(&a, &b, 0.95, RESAMPLES, seed)
            .unwrap()
            .contains(1.0)
        {
            contains += 1;
        }
        if mann_whitney_u(&a, &b).unwrap().p_value >= 0.05 {
            quiet += 1;
        }
    }
    let (c, q) = (rate(contains), rate(quiet));
    println!("unpaired A/A, 20 per side: interval contains 1 {c:.3}, rank-sum p >= 0.05 {q:.3}");
    assert!((0.90..=0.98).contains(&c), "A/A coverage {c}");
    assert!((0.92..=0.98).contains(&q), "A/A rank-sum {q}");
}
