//! Tests on seeded synthetic runs: cohorts pooling several configurations, too few blocks,
//! Holm's adjustment, and simulations of false positives, coverage, power and warnings.

use super::*;

/// A 2×2 of jit (none/yjit; yjit `jit_effect`× as fast) × allocator (glibc/jemalloc;
/// jemalloc `alloc_effect`× as fast), `blocks` blocks, each block with its own level
/// and every trial with lognormal noise of SD `sd` (log scale).
pub(super) fn jit_by_allocator(
    rng: &mut stats::SeededRng,
    blocks: u32,
    sd: f64,
    jit_effect: f64,
    alloc_effect: f64,
) -> Vec<TrialData> {
    let mut t = Vec::new();
    for b in 0..blocks {
        let level = 1000.0 * (0.2 * rng.standard_normal()).exp();
        let configs = [
            ("none", "glibc"),
            ("none", "jemalloc"),
            ("yjit", "glibc"),
            ("yjit", "jemalloc"),
        ];
        for (config_id, (jit, alloc)) in configs.into_iter().enumerate() {
            let effect = if jit == "yjit" { jit_effect } else { 1.0 }
                * if alloc == "jemalloc" {
                    alloc_effect
                } else {
                    1.0
                };
            let rps = level * effect * (sd * rng.standard_normal()).exp();
            let mut x = trial(0, t.len(), b, &format!("{jit} {alloc}"), rps, "m");
            x.config_id = config_id;
            for (axis, value) in [("jit", jit), ("allocator", alloc)] {
                x.keys.insert(axis.into(), value.into());
                x.axes.insert(axis.into(), value.into());
            }
            t.push(x);
        }
    }
    t
}

pub(super) fn by_allocator() -> Options {
    Options {
        by: vec!["allocator".into()],
        ..Options::default()
    }
}

pub(super) fn throughput(r: &Report) -> &Comparison {
    r.comparisons
        .iter()
        .find(|c| c.metric == "throughput")
        .expect("a throughput comparison")
}

/// `--by allocator` on a jit × allocator run used to
/// pair every jemalloc trial with the last glibc trial of its block (n doubled, YJIT
/// trials against interpreter trials).
#[test]
fn cohorts_of_several_configurations_are_paired_block_by_block() {
    let mut rng = stats::SeededRng::new(7);
    let r = analyze(
        &[source(jit_by_allocator(&mut rng, 12, 0.02, 1.5, 1.0))],
        &by_allocator(),
    )
    .unwrap();
    let c = throughput(&r);
    assert_eq!(
        (c.cohort.as_str(), c.baseline.as_str()),
        ("allocator=jemalloc", "allocator=glibc")
    );
    assert_eq!(
        (c.method.as_str(), c.n, c.configs_per_block),
        ("paired", 12, 2)
    );
    assert!(c.ci_low < 1.0 && c.ci_high > 1.0, "{c:?}");
    assert!((c.ratio - 1.0).abs() < 0.02, "{c:?}");
    assert!(
        kinds(&r).contains(&"pooled-configurations"),
        "{:?}",
        r.warnings
    );

    // A block missing one configuration of one side is left out, not half-compared.
    let mut trials = jit_by_allocator(&mut rng, 12, 0.02, 1.5, 1.0);
    trials.retain(|t| !(t.block == 3 && t.label == "yjit glibc"));
    let r = analyze(&[source(trials)], &by_allocator()).unwrap();
    assert_eq!(throughput(&r).n, 11);
}

/// Seeded simulation on synthetic truth of pooled cohorts: with no allocator effect
/// (and a 1.5× jit effect inside each cohort) a difference is called in at most 5% of
/// runs and the 95% interval covers 1 in 95% ± 1.5 of them, the bounds; with a
/// real 1.10× effect it is found nearly always. Before the fix, 71–100% of null runs
/// were "significant". 2000 runs: the Monte-Carlo standard error of either rate near 5%
/// is 0.49 points, so ± 1.5 is 3 of them. Measured with this seed: 3.55% false
/// positives (the signed-rank test is conservative at 10 blocks), 95.6% coverage, 99.95%
/// power; since issue 47 (every interval widened for dependence, the verdict read off the
/// interval alone): 3.4% false positives, 96.6% coverage, 95.0% power.
#[test]
fn pooled_cohorts_keep_their_false_positive_rate_coverage_and_power() {
    let mut rng = stats::SeededRng::new(2026);
    let runs = 2000;
    let (mut false_positives, mut covered, mut found) = (0, 0, 0);
    for _ in 0..runs {
        let null = analyze(
            &[source(jit_by_allocator(&mut rng, 10, 0.05, 1.5, 1.0))],
            &by_allocator(),
        )
        .unwrap();
        let c = throughput(&null);
        false_positives += usize::from(c.significant);
        covered += usize::from(c.ci_low <= 1.0 && 1.0 <= c.ci_high);
        let real = analyze(
            &[source(jit_by_allocator(&mut rng, 10, 0.05, 1.5, 1.10))],
            &by_allocator(),
        )
        .unwrap();
        found += usize::from(throughput(&real).significant);
    }
    let rate = |k: usize| k as f64 / runs as f64;
    assert!(
        rate(false_positives) <= 0.05,
        "false positives {}",
        rate(false_positives)
    );
    // Since issue 47 every paired interval is widened for the dependence its blocks show,
    // which covers independent blocks in 95.6–96.3% (stats::serial's coverage table): 96.6%
    // here, within 1 Monte-Carlo SE of that, so the upper bound allows 2 SEs past 96.5%.
    assert!(
        (0.935..=0.975).contains(&rate(covered)),
        "coverage {}",
        rate(covered)
    );
    assert!(rate(found) >= 0.90, "power {}", rate(found));
}

/// `n` blocks of `cohorts` configurations ("c0" the baseline), cohort k `effect(k)`× the
/// baseline, block levels with SD 0.2 and trial noise with SD `sd` (log scale).
pub(super) fn blocks_of(
    rng: &mut stats::SeededRng,
    n: u32,
    cohorts: usize,
    sd: f64,
    effect: impl Fn(usize) -> f64,
) -> Vec<TrialData> {
    let mut t = Vec::new();
    for b in 0..n {
        let level = 1000.0 * (0.2 * rng.standard_normal()).exp();
        for k in 0..cohorts {
            let rps = level * effect(k) * (sd * rng.standard_normal()).exp();
            let mut x = trial(0, t.len(), b, &format!("c{k}"), rps, "m");
            x.config_id = k;
            t.push(x);
        }
    }
    t
}

/// With 5 blocks a plain 1.5× effect read "~ no significant difference", and later "too
/// few blocks to test" (the rank test cannot reach p < 0.05 below 6 blocks). The verdict is
/// now the interval's, which 5 blocks of a 2% spread place far from 1: called, and no
/// warning says otherwise.
#[test]
fn few_blocks_are_decided_by_their_interval() {
    let mut rng = stats::SeededRng::new(3);
    let r = analyze(
        &[source(blocks_of(&mut rng, 5, 2, 0.02, |k| {
            if k == 1 {
                1.5
            } else {
                1.0
            }
        }))],
        &Options::default(),
    )
    .unwrap();
    let c = throughput(&r);
    assert!(c.testable && c.significant, "{c:?}");
    assert!(c.ci_low > 1.4, "{c:?}");
    assert!(
        c.verdict.starts_with("1.49×, 49.2% faster [1.4"),
        "{}",
        c.verdict
    );
    assert!(!kinds(&r).contains(&"too-few-trials"), "{:?}", r.warnings);
    // p-values below 0.001 read "p<0.001", not "p=<0.001".
    assert_eq!(p_text(0.0004), "p<0.001");
    assert_eq!(p_text(0.0213), "p=0.021");
}

/// Holm's method against reference values: p = (0.01, 0.04, 0.03, 0.5) adjust to
/// (0.04, 0.09, 0.09, 0.5) (R: p.adjust(c(0.01, 0.04, 0.03, 0.5), "holm")).
#[test]
fn holm_adjusts_like_r() {
    let mut rng = stats::SeededRng::new(1);
    let r = analyze(
        &[source(blocks_of(&mut rng, 8, 2, 0.02, |_| 1.0))],
        &Options::default(),
    )
    .unwrap();
    let mut cs: Vec<Comparison> = [0.01, 0.04, 0.03, 0.5]
        .iter()
        .map(|&p| Comparison {
            p_value: Some(p),
            ..throughput(&r).clone()
        })
        .collect();
    let mut family: Vec<&mut Comparison> = cs.iter_mut().collect();
    holm_adjust(&mut family);
    let adjusted: Vec<f64> = cs.iter().map(|c| c.p_adjusted.unwrap()).collect();
    let want = [0.04, 0.09, 0.09, 0.5];
    for (a, w) in adjusted.iter().zip(want) {
        assert!((a - w).abs() < 1e-12, "{adjusted:?}");
    }
}

/// Seeded simulations through `analyze()` of A/A experiments (no effect anywhere):
/// one cohort against the baseline over 10 blocks, false "significant" ≤ 5% and 95%
/// coverage ± 1.5; eight cohorts against the baseline, the chance of any false
/// "significant" ≤ 5% (17–23% tested one by one, found when Holm's adjustment was added).
/// Since issue 47 the verdict is the interval's, simultaneous over the cohorts
/// (Bonferroni): measured with this seed 4.2% false positives and 95.8% coverage for one
/// cohort, 2.5% of runs with any of 8 significant.
#[test]
fn a_over_a_false_positives_and_coverage_with_and_without_many_cohorts() {
    let mut rng = stats::SeededRng::new(20261123);
    let runs = 2000;
    let (mut false_positives, mut covered) = (0, 0);
    for _ in 0..runs {
        let r = analyze(
            &[source(blocks_of(&mut rng, 10, 2, 0.05, |_| 1.0))],
            &Options::default(),
        )
        .unwrap();
        let c = throughput(&r);
        false_positives += usize::from(c.significant);
        covered += usize::from(c.ci_low <= 1.0 && 1.0 <= c.ci_high);
    }
    let rate = |k: usize, n: usize| k as f64 / n as f64;
    assert!(
        rate(false_positives, runs) <= 0.05,
        "A/A false positives {}",
        rate(false_positives, runs)
    );
    assert!(
        (rate(covered, runs) - 0.95).abs() <= 0.015,
        "coverage {}",
        rate(covered, runs)
    );

    let runs = 400;
    let mut any = 0;
    for _ in 0..runs {
        let r = analyze(
            &[source(blocks_of(&mut rng, 10, 9, 0.05, |_| 1.0))],
            &Options::default(),
        )
        .unwrap();
        let family: Vec<&Comparison> = r
            .comparisons
            .iter()
            .filter(|c| c.metric == "throughput")
            .collect();
        assert_eq!(family.len(), 8);
        assert!(family.iter().all(|c| c.family_size == 8));
        any += usize::from(family.iter().any(|c| c.significant));
    }
    assert!(
        rate(any, runs) <= 0.05,
        "any of 8 A/A cohorts significant: {}",
        rate(any, runs)
    );
}

/// Seeded simulation on clean data: 2 configurations × 6 blocks (the
/// demo's size), 4 × 10 and 8 × 10, the blocks differing by 20% (which pairing cancels)
/// and trials by 2% within a block. Each warning fires in at most 10% of reports, the
/// issue's goal, whatever the number of cohorts (raw Tukey fences fired in 45–59% of
/// runs, the raw CV in 92–100%; robust fences at a fixed 2% per cohort fired in 19% of
/// these 8-cohort runs and 6.8% of the 4-cohort ones, so they are Bonferroni-adjusted
/// over the cohorts like the drift test: measured 2.0%, 5.0%, 5.5% for 2, 4, 8 cohorts).
/// `high-cv` is a threshold on an estimate (5% within blocks), not a test at a level:
/// with 2% noise it fired in none of the 1200 clean runs, and more cohorts cannot push
/// it near 10% unless the noise itself is near the threshold, so it is not adjusted. 400 runs each: the Monte-Carlo standard error of a rate near 5% is 1.1 points,
/// so a true rate of 5% passes the 10% bound with a margin of over 4 of them.
///
/// And they still find what they are for, in 100 runs of each size: one trial 40% slow
/// is flagged, and noisy trials are called high: 10% noise per trial with 4 and 8
/// configurations, 15% with 2, because the within-block SD that `high-cv` judges is a
/// trial's spread against its block's mean, σ·√(1 − 1/k) for k configurations per
/// block, which for k = 2 is σ/√2 (10% noise reads 7.1%, and 6 blocks put that below the
/// 5% threshold in about a fifth of runs).
#[test]
fn warnings_rarely_fire_on_clean_data_and_still_find_real_trouble() {
    let mut rng = stats::SeededRng::new(61);
    for (configs, blocks, slow_trial, noisy_sd) in
        [(2, 6, 7, 0.15), (4, 10, 13, 0.10), (8, 10, 43, 0.10)]
    {
        let runs = 400;
        let mut fired: BTreeMap<String, usize> = BTreeMap::new();
        for _ in 0..runs {
            let r = analyze(
                &[source(blocks_of(&mut rng, blocks, configs, 0.02, |k| {
                    1.0 + 0.1 * k as f64
                }))],
                &Options::default(),
            )
            .unwrap();
            let kinds: BTreeSet<&str> = r.warnings.iter().map(|w| w.kind.as_str()).collect();
            for k in kinds {
                *fired.entry(k.to_string()).or_default() += 1;
            }
        }
        for kind in ["outliers", "high-cv", "drift"] {
            let rate = fired.get(kind).copied().unwrap_or(0) as f64 / runs as f64;
            assert!(
                rate <= 0.10,
                "{configs} × {blocks}: {kind} fired in {rate} of clean runs ({fired:?})"
            );
        }

        let (mut flagged, mut noisy) = (0, 0);
        let slow = format!("0:{slow_trial}");
        for _ in 0..100 {
            let mut t = blocks_of(&mut rng, blocks, configs, 0.02, |_| 1.0);
            assert_eq!(t[slow_trial].trial_id, slow_trial);
            t[slow_trial].requests_per_s = t[slow_trial].requests_per_s.map(|v| v * 0.6);
            let r = analyze(&[source(t)], &Options::default()).unwrap();
            flagged += usize::from(
                r.warnings
                    .iter()
                    .any(|w| w.kind == "outliers" && w.message.contains(&slow)),
            );
            let r = analyze(
                &[source(blocks_of(
                    &mut rng,
                    blocks,
                    configs,
                    noisy_sd,
                    |_| 1.0,
                ))],
                &Options::default(),
            )
            .unwrap();
            noisy += usize::from(kinds(&r).contains(&"high-cv"));
        }
        assert!(
            flagged >= 90,
            "{configs} × {blocks}: a 40% slow trial flagged in {flagged} of 100 runs"
        );
        assert!(
            noisy >= 90,
            "{configs} × {blocks}: {noisy_sd} noise within blocks called high in {noisy} of 100 runs"
        );
    }
}

/// With several cohorts each interval is simultaneous over them (Bonferroni: 98.3% for 3),
/// so the verdicts read off them keep the family's 5%; the words say the level. The same
/// blocks compared as one cohort get the report's 95% interval, narrower and inside it.
#[test]
fn intervals_are_simultaneous_over_the_cohorts() {
    let mut rng = stats::SeededRng::new(8);
    let effect = |k: usize| if k == 0 { 1.0 } else { 1.5 };
    let trials = blocks_of(&mut rng, 6, 4, 0.02, effect);
    let r = analyze(&[source(trials.clone())], &Options::default()).unwrap();
    let c = throughput(&r).clone();
    assert_eq!(c.family_size, 3);
    assert!((c.confidence - (1.0 - 0.05 / 3.0)).abs() < 1e-12, "{c:?}");
    assert!(c.significant, "{c:?}");
    assert!(
        c.verdict
            .ends_with("98.3% interval, simultaneous over 3 cohorts"),
        "{}",
        c.verdict
    );
    let alone: Vec<_> = trials.into_iter().filter(|t| t.config_id <= 1).collect();
    let r = analyze(&[source(alone)], &Options::default()).unwrap();
    let one = throughput(&r);
    assert_eq!((one.family_size, one.confidence), (1, 0.95));
    assert!((one.ratio - c.ratio).abs() < 1e-12, "{one:?} {c:?}");
    assert!(
        one.ci_low > c.ci_low && one.ci_high < c.ci_high,
        "{one:?} {c:?}"
    );
}
