//! Seeded simulations of the gate's rule on synthetic truth: how often `rubyrace check`
//! fails a head exactly at its allowed slowdown, passes one a point beyond it, and how many
//! blocks it takes, when the per-block figure is clean, heavy-tailed, stalled on one side,
//! drifting, or steps once during the run (issue 47). The tests assert the rates with a
//! Monte-Carlo margin; `gate_tables` (ignored, run it with
//! `cargo test --release -p rubyrace-experiment gate_tables -- --ignored --nocapture`)
//! prints the tables of docs/methodology.md, the rule before issue 47 beside the rule now.

use super::*;
use stats::rng::SeededRng;

/// How each block's figure strays from the truth. `sd` is the standard deviation of the
/// clean part.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Noise {
    /// Normal.
    Normal,
    /// Student's t with 3 degrees of freedom, scaled to `sd`.
    HeavyTailed,
    /// Normal, and with probability `rate` one side's trial of the block stalls: the side
    /// does worse by an exponential amount of mean `mean`·`sd` on the log scale. `head`:
    /// the head stalls (the figure goes up), else the base (it goes down). The truth is the
    /// mean figure, stalls included: the head's slowdown as a long run would average it.
    Stalls { head: bool, rate: f64, mean: f64 },
    /// Half the variance normal, half an AR(1) wander of coefficient `phi` (the machine
    /// drifting in a way that favours one side for a while).
    Drift { phi: f64 },
    /// Normal, and the level steps by one `sd`, up or down at random, at a block drawn
    /// uniformly from 3 to 12 (where gates decide): half an sd below the truth before it,
    /// half above after (or the reverse).
    Step,
}

impl Noise {
    pub(crate) fn name(self) -> String {
        match self {
            Noise::Normal => "normal".into(),
            Noise::HeavyTailed => "t₃".into(),
            Noise::Stalls { head, rate, mean } => format!(
                "{} stalls in {:.0}% of blocks, mean {mean} sd",
                if head { "head" } else { "base" },
                100.0 * rate
            ),
            Noise::Drift { phi } => format!("AR(1) drift φ = {phi}"),
            Noise::Step => "a step of 1 sd mid-run".into(),
        }
    }
}

/// A stream of per-block figures of one simulated gate.
struct Blocks<'a> {
    rng: &'a mut SeededRng,
    noise: Noise,
    sd: f64,
    truth: f64,
    wander: f64,
    step_at: u32,
    step_sign: f64,
    block: u32,
}

impl<'a> Blocks<'a> {
    fn new(rng: &'a mut SeededRng, noise: Noise, sd: f64, truth: f64) -> Blocks<'a> {
        let wander = match noise {
            Noise::Drift { .. } => rng.standard_normal() * sd / 2f64.sqrt(),
            _ => 0.0,
        };
        let step_at = 3 + rng.uniform_below(10) as u32;
        let step_sign = if rng.next_f64() < 0.5 { -1.0 } else { 1.0 };
        Blocks {
            rng,
            noise,
            sd,
            truth,
            wander,
            step_at,
            step_sign,
            block: 0,
        }
    }

    fn next(&mut self) -> f64 {
        self.block += 1;
        let sd = self.sd;
        let z = self.rng.standard_normal();
        let e = match self.noise {
            Noise::Normal => sd * z,
            Noise::HeavyTailed => {
                let chi2: f64 = (0..3).map(|_| self.rng.standard_normal().powi(2)).sum();
                sd * z / (chi2 / 3.0).sqrt() / 3f64.sqrt()
            }
            Noise::Stalls { head, rate, mean } => {
                let stall = if self.rng.next_f64() < rate {
                    mean * sd * -(1.0 - self.rng.next_f64()).ln()
                } else {
                    0.0
                };
                let sign = if head { 1.0 } else { -1.0 };
                sd * z + sign * (stall - rate * mean * sd)
            }
            Noise::Drift { phi } => {
                let e = sd / 2f64.sqrt() * z + self.wander;
                let innovation = sd / 2f64.sqrt() * (1.0 - phi * phi).sqrt();
                self.wander = phi * self.wander + innovation * self.rng.standard_normal();
                e
            }
            Noise::Step => {
                let half = if self.block >= self.step_at {
                    0.5
                } else {
                    -0.5
                };
                sd * z + self.step_sign * half * sd
            }
        };
        self.truth + e
    }
}

/// The rule before issue 47, for comparison: the plain t interval at each look, no shape
/// checks ([`Policy::PLAIN_T`]).
pub(crate) fn plain_t(rule: &GateRule, worse: &[f64]) -> GateDecision {
    rule.decide_with(worse, &Policy::PLAIN_T)
}

/// A gate's rule as the simulations call it: the decision on the blocks so far.
type Decide<'a> = Box<dyn Fn(&[f64]) -> GateDecision + 'a>;

/// What `runs` seeded gates of one setting gave.
#[derive(Clone, Debug)]
pub(crate) struct Rates {
    pub runs: u32,
    pub pass: f64,
    pub fail: f64,
    pub inconclusive: f64,
    /// Of the inconclusive ends, the share that named a doubt as their reason.
    pub with_reason: f64,
    pub median_blocks: f64,
}

impl Rates {
    /// The Wilson score interval (95%) of a rate measured on `runs` gates, in percent.
    pub fn wilson(&self, rate: f64) -> (f64, f64) {
        let n = self.runs as f64;
        let z = 1.959964;
        let centre = (rate + z * z / (2.0 * n)) / (1.0 + z * z / n);
        let half = z / (1.0 + z * z / n) * (rate * (1.0 - rate) / n + z * z / (4.0 * n * n)).sqrt();
        (
            100.0 * (centre - half).max(0.0),
            100.0 * (centre + half).min(1.0),
        )
    }
}

/// `runs` gates decided by `decide`, on blocks of `noise` around a true slowdown
/// of `slowdown` (0.03: 3% slower), seeded by `seed`.
pub(crate) fn simulate(
    decide: &dyn Fn(&[f64]) -> GateDecision,
    noise: Noise,
    sd: f64,
    slowdown: f64,
    runs: u32,
    seed: u64,
) -> Rates {
    let mut rng = SeededRng::new(seed);
    let (mut pass, mut fail, mut inconclusive, mut with_reason) = (0u32, 0u32, 0u32, 0u32);
    let mut blocks = Vec::with_capacity(runs as usize);
    for _ in 0..runs {
        let mut source = Blocks::new(&mut rng, noise, sd, slowdown.ln_1p());
        let mut worse = Vec::new();
        let d = loop {
            worse.push(source.next());
            let d = decide(&worse);
            if d.verdict != GateVerdict::Continue {
                break d;
            }
        };
        match d.verdict {
            GateVerdict::Pass => pass += 1,
            GateVerdict::Fail => fail += 1,
            GateVerdict::Inconclusive => {
                inconclusive += 1;
                with_reason += u32::from(d.doubt.is_some());
            }
            GateVerdict::Continue => unreachable!(),
        }
        blocks.push(d.blocks as f64);
    }
    let n = runs as f64;
    Rates {
        runs,
        pass: pass as f64 / n,
        fail: fail as f64 / n,
        inconclusive: inconclusive as f64 / n,
        with_reason: if inconclusive == 0 {
            0.0
        } else {
            with_reason as f64 / inconclusive as f64
        },
        median_blocks: stats::summary::quantile(&blocks, 0.5),
    }
}

/// The settings of the audit: clean and heavy-tailed blocks, stalls of either side
/// (in 20% of blocks, and rarer, longer ones in 5%), AR(1) drift at φ 0.3, 0.6 and 0.9, a
/// step mid-run.
pub(crate) fn audit_settings() -> Vec<Noise> {
    let mut all = vec![Noise::Normal, Noise::HeavyTailed];
    for head in [false, true] {
        all.push(Noise::Stalls {
            head,
            rate: 0.2,
            mean: 2.0,
        });
        all.push(Noise::Stalls {
            head,
            rate: 0.05,
            mean: 8.0,
        });
    }
    for phi in [0.3, 0.6, 0.9] {
        all.push(Noise::Drift { phi });
    }
    all.push(Noise::Step);
    all
}

/// The policies the tables compare: the rule's, and those of `RUBYRACE_GATE_POLICIES`
/// ("alpha:widen:from:margin,…", widen `inf` for "never decide on a doubt", from: the
/// fewest blocks widened for dependence, margin: `Policy::dependence_margin`).
fn policies() -> Vec<(String, Policy)> {
    let mut all = vec![("now".to_string(), Policy::RULE)];
    if let Ok(list) = std::env::var("RUBYRACE_GATE_POLICIES") {
        for item in list.split(',') {
            let parts: Vec<&str> = item.split(':').collect();
            all.push((
                item.to_string(),
                Policy {
                    shape_alpha: parts[0].parse().unwrap(),
                    widen_on_doubt: parts[1].parse().unwrap(),
                    dependence_from: parts[2].parse().unwrap(),
                    dependence_margin: parts[3].parse().unwrap(),
                },
            ));
        }
    }
    all
}

fn rule() -> GateRule {
    GateRule {
        max_slowdown: 0.03,
        min_blocks: 6,
        max_blocks: 60,
    }
}

/// The cost on clean data: median blocks to a decision on normal blocks, by block sd and
/// true slowdown, the rule before and the policies.
#[test]
#[ignore = "prints the cost table of docs/methodology.md; run with --release --ignored"]
fn gate_cost_table() {
    let r = &rule();
    println!("| block sd | true slowdown | rule | median blocks | fail | pass |");
    println!("|---|---|---|---|---|---|");
    for (i, sd) in [0.01, 0.03, 0.05].into_iter().enumerate() {
        for (j, slowdown) in [0.0, 0.05, 0.10].into_iter().enumerate() {
            let seed = 5000 + 10 * i as u64 + j as u64;
            let mut rows = vec![(
                "before".to_string(),
                simulate(&|w| plain_t(r, w), Noise::Normal, sd, slowdown, 4000, seed),
            )];
            for (name, p) in policies() {
                rows.push((
                    name,
                    simulate(
                        &|w| r.decide_with(w, &p),
                        Noise::Normal,
                        sd,
                        slowdown,
                        4000,
                        seed,
                    ),
                ));
            }
            for (name, rates) in rows {
                println!(
                    "| {sd} | {:.0}% | {name} | {} | {:.1}% | {:.1}% |",
                    100.0 * slowdown,
                    rates.median_blocks,
                    100.0 * rates.fail,
                    100.0 * rates.pass
                );
            }
        }
    }
}

/// The tables of docs/methodology.md: for each setting, the rule before issue 47 and now,
/// false fails at the threshold (3%), false passes a point beyond it (4%), and the median
/// blocks to a decision for an unchanged head, at a block sd of 2%.
#[test]
#[ignore = "prints the tables of docs/methodology.md; run with --release --ignored"]
fn gate_tables() {
    let runs = 20_000;
    let r = &rule();
    let sd = 0.02;
    println!(
        "| blocks | rule | fails at 3% | passes at 4% | of those at 4%: inconclusive (with a reason) | median blocks, unchanged head |"
    );
    println!("|---|---|---|---|---|---|");
    for (k, noise) in audit_settings().into_iter().enumerate() {
        let seed = 4700 + 10 * k as u64;
        let policies: Vec<(String, Decide)> = std::iter::once((
            "before".to_string(),
            Box::new(move |w: &[f64]| plain_t(r, w)) as Decide,
        ))
        .chain(policies().into_iter().map(|(name, p)| {
            (
                name,
                Box::new(move |w: &[f64]| r.decide_with(w, &p)) as Decide,
            )
        }))
        .collect();
        for (name, decide) in &policies {
            let at = simulate(decide, noise, sd, 0.03, runs, seed);
            let beyond = simulate(decide, noise, sd, 0.04, runs, seed + 1);
            let unchanged = simulate(decide, noise, sd, 0.0, runs / 4, seed + 2);
            let (fl, fh) = at.wilson(at.fail);
            let (pl, ph) = beyond.wilson(beyond.pass);
            println!(
                "| {} | {name} | {:.2}% [{fl:.2}–{fh:.2}] | {:.2}% [{pl:.2}–{ph:.2}] | {:.1}% ({:.0}%) | {} |",
                noise.name(),
                100.0 * at.fail,
                100.0 * beyond.pass,
                100.0 * beyond.inconclusive,
                100.0 * beyond.with_reason,
                unchanged.median_blocks
            );
        }
    }
}

/// The rates of one setting under the rule before issue 47 and now, on the same seed.
fn before_and_now(noise: Noise, slowdown: f64, runs: u32, seed: u64) -> (Rates, Rates) {
    let r = &rule();
    let sd = 0.02;
    (
        simulate(&|w| plain_t(r, w), noise, sd, slowdown, runs, seed),
        simulate(&|w| r.decide(w), noise, sd, slowdown, runs, seed),
    )
}

/// Drift and a step made the plain t gate fail a head exactly at its allowed slowdown far
/// more often than the 2.5% it promised (20,000 gates each: φ = 0.3, 4.5%; φ = 0.6,
/// 12.4%; φ = 0.9, 33%; a step, 29%). The widened interval and the shape checks lower
/// each, on the same seeded blocks (3000 gates here): this test fails on the rule before.
/// They do not reach 2.5%, and one-sided stalls are barely helped (5.96% → 4.85%, not
/// asserted here); docs/methodology.md says where and why.
#[test]
fn drift_and_steps_fail_a_head_at_its_threshold_less_often() {
    for (k, (noise, before_at_least, now_below_share)) in [
        (Noise::Drift { phi: 0.3 }, 0.035, 0.97),
        (Noise::Drift { phi: 0.6 }, 0.10, 0.8),
        (Noise::Drift { phi: 0.9 }, 0.28, 0.8),
        (Noise::Step, 0.25, 0.9),
    ]
    .into_iter()
    .enumerate()
    {
        let (before, now) = before_and_now(noise, 0.03, 3000, 900 + k as u64);
        eprintln!(
            "{}: false fails before {:.4}, now {:.4}",
            noise.name(),
            before.fail,
            now.fail
        );
        assert!(
            before.fail >= before_at_least,
            "{}: {before:?}",
            noise.name()
        );
        assert!(
            now.fail <= now_below_share * before.fail,
            "{}: {before:?} {now:?}",
            noise.name()
        );
    }
}

/// A gate that cannot tell under drift says why: most inconclusive ends of a head a point
/// beyond the threshold under strong drift name the doubt (the rule before named none).
#[test]
fn inconclusive_ends_name_their_doubt() {
    let (before, now) = before_and_now(Noise::Drift { phi: 0.9 }, 0.04, 3000, 950);
    assert_eq!(before.with_reason, 0.0);
    assert!(now.inconclusive > 0.3, "{now:?}");
    assert!(now.with_reason >= 0.8, "{now:?}");
}

/// The checks cost clean runs little: on independent normal blocks the median blocks to a
/// decision grows by at most a quarter (issue 47's bound), and false fails at the
/// threshold stay below α/2.
#[test]
fn the_checks_cost_clean_runs_little() {
    for (k, slowdown) in [0.0, 0.03, 0.05, 0.10].into_iter().enumerate() {
        let (before, now) = before_and_now(Noise::Normal, slowdown, 3000, 970 + k as u64);
        eprintln!(
            "normal, {slowdown}: median blocks before {}, now {}; fails {:.4} / {:.4}",
            before.median_blocks, now.median_blocks, before.fail, now.fail
        );
        assert!(
            now.median_blocks <= 1.25 * before.median_blocks,
            "{slowdown}: {before:?} {now:?}"
        );
        if slowdown == 0.03 {
            assert!(now.fail <= 0.025, "{now:?}");
        }
    }
}
