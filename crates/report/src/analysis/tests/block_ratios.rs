//! Seeded simulations of what the statistics audit found wrong with the per-block ratios:
//! pooled cohorts of unequal mixes, ratios that drift or wander between blocks, ratios
//! skewed by one side's stalls, and outliers blamed on the innocent partner. Each test failed
//! before its fix; the figures measured before and after are in docs/methodology.md.

use super::seeded::{blocks_of, by_allocator, jit_by_allocator, throughput};
use super::*;

fn rate(k: usize, n: usize) -> f64 {
    k as f64 / n as f64
}

/// Item 1. A jit × allocator matrix with `[[exclude]] jit = "none", allocator =
/// "jemalloc"` (or every trial of that configuration invalid), YJIT 1.5× and no allocator
/// effect, reported `--by allocator`: the sides used to be pooled whole, one side an
/// interpreter-and-YJIT mix, the other YJIT alone, and "1.21×, p=0.002" came out in every
/// run. Now the YJIT configurations are compared with each other, the interpreter's has no
/// partner and is named, and the verdicts keep their level and coverage (500 runs each;
/// 3 Monte-Carlo standard errors allowed: 0.05 + 3·0.0097).
#[test]
fn unequal_mixes_are_compared_within_partners() {
    let mut rng = stats::SeededRng::new(2601);
    let runs = 500;
    for invalid_instead in [false, true] {
        let (mut significant, mut covered) = (0, 0);
        for _ in 0..runs {
            let mut trials = jit_by_allocator(&mut rng, 10, 0.03, 1.5, 1.0);
            let excluded = |t: &TrialData| t.label == "none jemalloc";
            if invalid_instead {
                for t in trials.iter_mut().filter(|t| excluded(t)) {
                    t.status = TrialStatus::Invalid;
                }
            } else {
                trials.retain(|t| !excluded(t));
            }
            let r = analyze(&[source(trials)], &by_allocator()).unwrap();
            let c = throughput(&r);
            assert_eq!((c.n, c.groups), (10, 1), "{c:?}");
            assert_eq!(c.unpartnered, ["jit=none (allocator=glibc only)"], "{c:?}");
            significant += usize::from(c.significant);
            covered += usize::from(c.ci_low <= 1.0 && 1.0 <= c.ci_high);
            let pooled = r
                .warnings
                .iter()
                .find(|w| w.kind == "pooled-configurations")
                .expect("the pooling is explained");
            assert!(
                pooled
                    .message
                    .contains("left out: jit=none (allocator=glibc only)"),
                "{}",
                pooled.message
            );
        }
        eprintln!(
            "invalid instead of excluded: {invalid_instead}: significant {}, coverage {}",
            rate(significant, runs),
            rate(covered, runs)
        );
        assert!(
            rate(significant, runs) <= 0.08,
            "{}",
            rate(significant, runs)
        );
        assert!(rate(covered, runs) >= 0.93, "{}", rate(covered, runs));
    }
    // A full matrix still pairs two groups (jit=none and jit=yjit) and finds a real effect.
    let r = analyze(
        &[source(jit_by_allocator(&mut rng, 10, 0.02, 1.5, 1.1))],
        &by_allocator(),
    )
    .unwrap();
    let c = throughput(&r);
    assert_eq!((c.groups, c.unpartnered.len()), (2, 0), "{c:?}");
    assert!(c.significant && (c.ratio - 1.1).abs() < 0.03, "{c:?}");
}

/// Two configurations over `blocks` blocks with no true difference: every block has a level
/// that drifts `trend` per block (shared, which pairing cancels), trials have noise of SD
/// 0.01, and the per-block log ratio wanders as an AR(1) series with coefficient `phi` and
/// marginal SD `wander`.
fn wandering(
    rng: &mut stats::SeededRng,
    blocks: u32,
    phi: f64,
    wander: f64,
    trend: f64,
) -> Vec<TrialData> {
    let mut t = Vec::new();
    let mut w = wander * rng.standard_normal();
    for b in 0..blocks {
        let level = 1000.0 * (trend * f64::from(b) + 0.05 * rng.standard_normal()).exp();
        for k in 0..2 {
            let shift = if k == 1 { w } else { 0.0 };
            let rps = level * (shift + 0.01 * rng.standard_normal()).exp();
            let mut x = trial(0, t.len(), b, &format!("c{k}"), rps, "m");
            x.config_id = k;
            t.push(x);
        }
        w = phi * w + wander * (1.0 - phi * phi).sqrt() * rng.standard_normal();
    }
    t
}

/// Item 2. Per-block ratios that wander (AR(1), φ = 0.9) were called significant in 38–52%
/// of A/A runs while `drift` (on raw throughput) fired in 4.5–16%; a harmless machine-wide
/// trend fired `drift` in 21–75%. Now `drift` watches the ratios, and their intervals are
/// widened for the dependence they show (since issue 47 always, not only when `drift`
/// fires). Measured (400 runs, seed 2602; the wander has marginal SD 3% and the trials 1%
/// of their own, so the ratios' lag-1 correlation is about 0.74): `drift` 35% and A/A
/// "significant" 34% at 12 blocks (39% widened only on `drift`), 75% and 21% (29%) at 24;
/// the shared trend fires `drift` in 3.8%. What is left is weak and said so in docs/methodology.md: a wander this
/// slow is hard to tell from chance in a dozen blocks, and the rank test is not widened.
#[test]
fn drifting_ratios_are_warned_about_and_widened_and_shared_trends_are_not() {
    let mut rng = stats::SeededRng::new(2602);
    let runs = 400;
    for (blocks, fires_at_least, significant_at_most) in [(12, 0.25, 0.46), (24, 0.65, 0.36)] {
        let (mut fired, mut significant, mut widened) = (0, 0, 0);
        for _ in 0..runs {
            let r = analyze(
                &[source(wandering(&mut rng, blocks, 0.9, 0.03, 0.0))],
                &Options::default(),
            )
            .unwrap();
            let c = throughput(&r);
            fired += usize::from(kinds(&r).contains(&"drift"));
            widened += usize::from(c.widened_for_dependence);
            significant += usize::from(c.significant);
        }
        eprintln!(
            "{blocks} blocks, AR(1) 0.9: drift {}, widened {}, A/A significant {}",
            rate(fired, runs),
            rate(widened, runs),
            rate(significant, runs)
        );
        assert!(
            rate(fired, runs) >= fires_at_least,
            "drift fired in {}",
            rate(fired, runs)
        );
        assert!(
            rate(significant, runs) <= significant_at_most,
            "significant {}",
            rate(significant, runs)
        );
    }
    // A trend shared by both configurations (3% per block), with independent ratios.
    let mut fired = 0;
    for _ in 0..runs {
        let r = analyze(
            &[source(wandering(&mut rng, 12, 0.0, 0.01, 0.03))],
            &Options::default(),
        )
        .unwrap();
        fired += usize::from(kinds(&r).contains(&"drift"));
    }
    eprintln!("shared trend: drift {}", rate(fired, runs));
    assert!(
        rate(fired, runs) <= 0.07,
        "a shared trend fired drift in {}",
        rate(fired, runs)
    );
}

/// Blocks that drift together so much that fewer than three count as independent gave an
/// interval of one degree of freedom, read as "~ no significant difference": the demo of
/// 2026-11-30 printed "(1.06× [0.00–328.59])" for 7 blocks at lag-1 0.41 (2.69 effective).
/// Such a comparison now says "? cannot tell" with its reason, is not `testable`, and its
/// HTML shows no interval; the decision is unchanged (one whose interval excludes 1 even so
/// is still called). 400 runs of 7 blocks (seed 4711) under a wander of φ = 0.9 and on
/// independent blocks; the rates are printed.
#[test]
fn too_few_effective_blocks_cannot_tell_instead_of_an_absurd_interval() {
    let mut rng = stats::SeededRng::new(4711);
    let runs = 400;
    for (phi, wander) in [(0.9, 0.03), (0.0, 0.01)] {
        let (mut cannot, mut called) = (0, 0);
        for _ in 0..runs {
            let r = analyze(
                &[source(wandering(&mut rng, 7, phi, wander, 0.0))],
                &Options::default(),
            )
            .unwrap();
            let c = throughput(&r);
            let few = c.effective_blocks.is_some_and(|e| e < 3.0);
            called += usize::from(c.significant);
            if few && !c.significant {
                cannot += 1;
                assert!(!c.testable, "{c:?}");
                assert!(
                    c.verdict.starts_with(
                        "? cannot tell: 7 blocks that drift together (lag-1 autocorrelation "
                    ) && c.verdict.contains(
                        "independent ones, too few for an interval (it needs 3); run more blocks"
                    ),
                    "{}",
                    c.verdict
                );
                let html = crate::render::html::render(&r);
                assert!(
                    !html.contains(&format!("{:.3}–", c.ci_low)),
                    "an interval shown"
                );
            } else {
                assert!(c.testable, "{c:?}");
                assert!(!c.verdict.contains("cannot tell"), "{}", c.verdict);
            }
        }
        eprintln!(
            "7 blocks, φ = {phi}: cannot tell {}, called {}",
            rate(cannot, runs),
            rate(called, runs)
        );
        if phi > 0.0 {
            assert!(
                rate(cannot, runs) >= 0.05,
                "cannot tell {}",
                rate(cannot, runs)
            );
        }
    }
}

/// Item 3. One-sided stalls: a fifth of one configuration's trials slowed by an exponential
/// amount of mean 4 trial SDs. The skew is named with the coverage it gives, in ordinary
/// reports too; clean data rarely get the warning.
#[test]
fn skewed_ratios_are_warned_about() {
    let mut rng = stats::SeededRng::new(2603);
    let runs = 400;
    for blocks in [10, 20] {
        let (mut skewed, mut clean) = (0, 0);
        for _ in 0..runs {
            let mut t = blocks_of(&mut rng, blocks, 2, 0.01, |_| 1.0);
            for x in t.iter_mut().filter(|x| x.config_id == 1) {
                if rng.next_f64() < 0.2 {
                    let slow = 4.0 * 0.01 * -(1.0 - rng.next_f64()).ln();
                    x.requests_per_s = x.requests_per_s.map(|v| v * (-slow).exp());
                }
            }
            let r = analyze(&[source(t)], &Options::default()).unwrap();
            skewed += usize::from(kinds(&r).contains(&"skewed-ratios"));
            let r = analyze(
                &[source(blocks_of(&mut rng, blocks, 2, 0.01, |_| 1.0))],
                &Options::default(),
            )
            .unwrap();
            clean += usize::from(kinds(&r).contains(&"skewed-ratios"));
        }
        eprintln!(
            "{blocks} blocks: stalls warned {}, clean warned {}",
            rate(skewed, runs),
            rate(clean, runs)
        );
        // 5% plus 3 Monte-Carlo standard errors at 400 runs (1.1 points each).
        assert!(
            rate(clean, runs) <= 0.083,
            "clean data warned in {}",
            rate(clean, runs)
        );
        assert!(
            rate(skewed, runs) >= 0.3,
            "stalls warned in {}",
            rate(skewed, runs)
        );
    }
}

/// Item 5. One trial 40% slow in 10 blocks: its block's other trials used to be flagged
/// with it (100% of runs with 2 configurations, 93% with 3, 55% with 4). With two, the
/// block is named; with more, the slow trial alone.
#[test]
fn outliers_do_not_blame_the_innocent_partner() {
    let mut rng = stats::SeededRng::new(2605);
    let runs = 200;
    for configs in [2, 3, 4, 8] {
        let (mut found, mut innocent) = (0, 0);
        for _ in 0..runs {
            let mut t = blocks_of(&mut rng, 10, configs, 0.02, |_| 1.0);
            // The last configuration's trial in block 4 (0-based; the warnings name it 5).
            let slow = 4 * configs + configs - 1;
            t[slow].requests_per_s = t[slow].requests_per_s.map(|v| v * 0.6);
            let r = analyze(&[source(t)], &Options::default()).unwrap();
            let outliers: Vec<&Warning> =
                r.warnings.iter().filter(|w| w.kind == "outliers").collect();
            let named = |id: usize| {
                outliers.iter().any(|w| {
                    w.message
                        .split(|c: char| !(c.is_ascii_digit() || c == ':'))
                        .any(|word| word == format!("0:{id}"))
                })
            };
            if configs == 2 {
                found += usize::from(
                    outliers
                        .iter()
                        .any(|w| w.cohort.is_none() && w.message.contains("block 5 ")),
                );
                innocent += usize::from(outliers.iter().any(|w| w.cohort.is_some()));
            } else {
                found += usize::from(named(slow));
                innocent += usize::from((4 * configs..slow).any(named));
            }
        }
        eprintln!(
            "{configs} configurations: found {}, innocent flagged {}",
            rate(found, runs),
            rate(innocent, runs)
        );
        assert!(
            rate(found, runs) >= 0.9,
            "{configs}: found {}",
            rate(found, runs)
        );
        assert!(
            rate(innocent, runs) <= 0.05,
            "{configs}: innocent {}",
            rate(innocent, runs)
        );
    }
}

/// Memory ratios may be skewed by a few pages (the demo's USS: +2.3 on ratios within
/// ±0.2%); that is no stall and says nothing of coverage: measured, not warned about.
#[test]
fn skewed_memory_ratios_are_not_warned_about() {
    let mut rng = stats::SeededRng::new(2606);
    let mut t = blocks_of(&mut rng, 20, 2, 0.01, |_| 1.0);
    for x in t.iter_mut() {
        let bump = if x.config_id == 1 && x.block % 7 == 3 {
            1.05
        } else {
            1.0
        };
        x.pss_end = Some(100e6 * bump * (1.0 + 0.001 * rng.standard_normal()));
    }
    let r = analyze(&[source(t)], &Options::default()).unwrap();
    let pss = r
        .comparisons
        .iter()
        .find(|c| c.metric == "pss_end")
        .unwrap();
    assert!(pss.skew_marked, "{pss:?}");
    assert!(!kinds(&r).contains(&"skewed-ratios"), "{:?}", r.warnings);
}
