//! Runs that stop when the answer is precise enough (`precision = "1%"` in the experiment
//! file): after every complete block, each configuration is compared with the baseline
//! (the first configuration) on one metric, paired by block, and another block is added
//! until every comparison has the minimum of *paired* blocks (`PrecisionTarget::first_stop`:
//! blocks where both it and the baseline have a valid trial, so an invalid trial delays the
//! stop rather than leaving too few pairs to test) and its interval is within ± the
//! target, or the budget (`max_batches`, `max_duration`) is spent.
//!
//! Looking after every block is safe here because the rule looks only at the *width* of
//! the intervals, never at the effect: a run cannot stop because a difference happened to
//! look significant (the optional stopping that inflates error rates). It is a fixed-width
//! sequential rule of the Chow–Robbins type, calibrated by simulation: neither an
//! anytime-valid confidence sequence nor a group-sequential design. A width-based stop
//! still favours moments when the spread happened to look small, so at 95% it covers only
//! about 93% (the tests measure it), and both the rule and the report of an adaptive run
//! use 97.5% intervals. Seeded simulations in the tests (normal, contaminated and t₃ noise;
//! one to three comparisons sharing the baseline; trials lost at random) show the reported
//! intervals then cover the truth at least 95% of the time and A/A runs call a difference
//! in about 5% or fewer.
//!
//! The weak case is noise skewed in one direction only (stalls that slow one
//! configuration's trials): the spread and the mean move together, a run stops early when
//! few stalls have happened yet, coverage falls to about 89–94% and the slowdown is
//! understated by 13–41% on average. The rule does not raise its minimum when the log
//! ratios' skew is marked: the runs that miss are those that stopped before the stalls
//! showed, whose log ratios look like normal noise, and those with a marked skew already
//! cover about 98% (measured: such a minimum, 12 to 60 blocks, leaves coverage where it
//! was). Only a larger `batches` for every run helps (60 blocks: about 95% for stalls in a
//! fifth of the trials). `one_sided_skew_is_the_weak_case` gives the figures, as does
//! docs/methodology.md.
//!
//! This module decides; the runner (`runner.rs`) runs the blocks and the store keeps the
//! decision, so a resume continues the same rule.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Confidence of the intervals of an adaptive run, for the rule and for the report.
pub const SEQUENTIAL_CONFIDENCE: f64 = 0.975;

/// The metric whose intervals must reach the target.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::VariantNames,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum PrecisionMetric {
    Throughput,
    CpuPerRequest,
    LatencyP50,
    LatencyP99,
    PssEnd,
    /// Script workloads: the median wall time of a trial's runs.
    Wall,
}

impl PrecisionMetric {
    /// The names, as written in experiment files and on the command line.
    pub const NAMES: &'static [&'static str] = <Self as strum::VariantNames>::VARIANTS;

    pub fn parse(name: &str) -> Option<PrecisionMetric> {
        name.parse().ok()
    }

    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// What an experiment file asks: `precision`, `metric`, `max_batches`, `max_duration`;
/// `batches` is the minimum.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PrecisionTarget {
    /// The half-width to reach, as a fraction (0.01 for ±1%).
    pub target: f64,
    pub metric: PrecisionMetric,
    pub min_batches: u32,
    pub max_batches: u32,
    /// The most measuring time (the trials' own wall time, summed, so a resume days later
    /// does not count the pause).
    #[serde(with = "humantime_serde", default)]
    pub max_duration: Option<Duration>,
}

impl PrecisionTarget {
    /// The blocks run before the rule may stop: `batches`, and at least the fewest with
    /// which the signed-rank test can reach p < 0.05 after Holm's adjustment over the
    /// `configs − 1` comparisons (6 for one, 7 for two or three), never more than
    /// `max_batches`: below it the rank test shown beside a verdict could not agree with
    /// any difference, and the dependence widening has little to estimate from.
    pub fn first_stop(&self, configs: usize) -> u32 {
        let comparisons = configs.saturating_sub(1).max(1);
        let testable =
            stats::min_blocks_for_signed_rank(0.05 / comparisons as f64).unwrap_or(6) as u32;
        self.min_batches.max(testable).min(self.max_batches)
    }
}

/// The default `max_batches` when only `precision` is given.
pub const DEFAULT_MAX_BATCHES: u32 = 100;

/// One stored valid trial, as the rule sees it.
#[derive(Clone, Copy, Debug)]
pub struct Observation {
    pub config_id: usize,
    pub block: u32,
    pub value: f64,
}

/// The precision of one comparison with the baseline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ComparisonPrecision {
    pub config_id: usize,
    /// Blocks in which both it and the baseline have a valid trial.
    pub blocks: usize,
    /// The ratio's half-width at `SEQUENTIAL_CONFIDENCE`, as a fraction of the ratio
    /// (exp of the log half-width, minus 1); `None` below 2 paired blocks.
    pub half_width: Option<f64>,
    /// Blocks it would need for the target in 80% of runs (an 80% upper bound on the spread
    /// seen so far: `stats::advice::blocks_for_log_half_width`).
    pub blocks_needed: Option<usize>,
}

/// The state of the rule after a block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PrecisionStatus {
    pub blocks_done: u32,
    pub comparisons: Vec<ComparisonPrecision>,
    /// Every comparison is within the target and has the minimum (`first_stop`) of paired
    /// blocks.
    pub reached: bool,
    /// The widest comparison (the one that decides), if any can be measured.
    pub widest: Option<ComparisonPrecision>,
    /// More blocks needed: the widest one's (planned for 80% of runs), and at least what
    /// the comparison with the fewest paired blocks lacks of the minimum.
    pub blocks_left: Option<usize>,
    /// The confidence of the intervals judged: `SEQUENTIAL_CONFIDENCE`, simultaneous over
    /// the comparisons ([`interval_confidence`]), as the report will show them.
    #[serde(default = "sequential_confidence")]
    pub confidence: f64,
}

fn sequential_confidence() -> f64 {
    SEQUENTIAL_CONFIDENCE
}

/// The confidence of the intervals an adaptive run of `configs` configurations stops on,
/// and its report shows: `SEQUENTIAL_CONFIDENCE` simultaneous over the `configs − 1`
/// comparisons with the baseline (97.5% for one, 98.75% for two).
pub fn interval_confidence(configs: usize) -> f64 {
    stats::simultaneous_confidence(SEQUENTIAL_CONFIDENCE, configs.saturating_sub(1))
}

/// Why an adaptive run stops (stored as `target-reached`, `max-batches`, `max-duration`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PrecisionStop {
    /// Every comparison is as precise as the target asks.
    TargetReached,
    /// The block budget (`max_blocks`) is spent.
    MaxBatches,
    /// The time budget (`max_duration`) is spent.
    MaxDuration,
}

impl PrecisionStop {
    pub fn as_str(self) -> &'static str {
        match self {
            PrecisionStop::TargetReached => "target-reached",
            PrecisionStop::MaxBatches => "max-batches",
            PrecisionStop::MaxDuration => "max-duration",
        }
    }

    /// The rule's look after `blocks_done` blocks whose comparisons stand at `status`: why
    /// the run stops now, if it does. `spent` is the measuring time so far, asked only
    /// when the target is not reached and blocks are left.
    pub fn now(
        target: &PrecisionTarget,
        status: &PrecisionStatus,
        blocks_done: u32,
        spent: impl FnOnce() -> Option<Duration>,
    ) -> Option<PrecisionStop> {
        if status.reached {
            Some(PrecisionStop::TargetReached)
        } else if blocks_done >= target.max_batches {
            Some(PrecisionStop::MaxBatches)
        } else if target
            .max_duration
            .is_some_and(|budget| spent().is_some_and(|spent| spent >= budget))
        {
            Some(PrecisionStop::MaxDuration)
        } else {
            None
        }
    }
}

impl std::fmt::Display for PrecisionStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How an adaptive run ended, stored with it (meta `precision_end`) and shown by the report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PrecisionEnd {
    pub reason: PrecisionStop,
    pub blocks: u32,
    pub target: f64,
    pub metric: PrecisionMetric,
    /// The widest half-width at the end, as a fraction.
    pub widest_half_width: Option<f64>,
}

impl PrecisionEnd {
    /// The end of a run the rule stopped (`reason`) after `blocks` blocks at `status`.
    pub fn at(
        reason: PrecisionStop,
        blocks: u32,
        target: &PrecisionTarget,
        status: &PrecisionStatus,
    ) -> PrecisionEnd {
        PrecisionEnd {
            reason,
            blocks,
            target: target.target,
            metric: target.metric,
            widest_half_width: status.widest.as_ref().and_then(|w| w.half_width),
        }
    }

    /// "the target ±1% on throughput was reached after 14 blocks" or "the budget
    /// (max_blocks = 40) was spent at ±1.8% on throughput".
    pub fn describe(&self) -> String {
        let widest = self
            .widest_half_width
            .map(|h| format!("±{:.2}%", 100.0 * h))
            .unwrap_or_else(|| "an unmeasured precision".into());
        let target = format!("±{}%", trim_float(100.0 * self.target));
        match self.reason {
            PrecisionStop::TargetReached => format!(
                "the run stopped when precise enough: every comparison reached {target} on {} after {} blocks (widest {widest})",
                self.metric.name(),
                self.blocks
            ),
            PrecisionStop::MaxDuration => format!(
                "the run stopped at its time budget (max_duration) after {} blocks, at {widest} on {}, short of {target}",
                self.blocks,
                self.metric.name()
            ),
            PrecisionStop::MaxBatches => format!(
                "the run stopped at its block budget (max_blocks = {}) at {widest} on {}, short of {target}",
                self.blocks,
                self.metric.name()
            ),
        }
    }
}

fn trim_float(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Evaluates the rule on the valid trials stored so far (all blocks complete up to
/// `blocks_done`). The baseline is configuration 0.
pub fn evaluate(
    target: &PrecisionTarget,
    configs: usize,
    blocks_done: u32,
    observations: &[Observation],
) -> PrecisionStatus {
    evaluate_at(
        target,
        configs,
        blocks_done,
        observations,
        SEQUENTIAL_CONFIDENCE,
    )
}

/// `evaluate` at another confidence: the tests run the very same rule at 95% to show why
/// adaptive runs use `SEQUENTIAL_CONFIDENCE`.
fn evaluate_at(
    target: &PrecisionTarget,
    configs: usize,
    blocks_done: u32,
    observations: &[Observation],
    confidence: f64,
) -> PrecisionStatus {
    let mut by_config: BTreeMap<usize, BTreeMap<u32, f64>> = BTreeMap::new();
    for o in observations
        .iter()
        .filter(|o| o.value > 0.0 && o.value.is_finite())
    {
        by_config
            .entry(o.config_id)
            .or_default()
            .insert(o.block, o.value);
    }
    let empty = BTreeMap::new();
    let baseline = by_config.get(&0).unwrap_or(&empty);
    let goal = target.target.ln_1p();
    // The intervals the report will show: simultaneous over the comparisons, as its
    // verdicts are read off them.
    let confidence = stats::simultaneous_confidence(confidence, configs.saturating_sub(1));
    let comparisons: Vec<ComparisonPrecision> = (1..configs)
        .map(|config_id| {
            let values = by_config.get(&config_id).unwrap_or(&empty);
            let logs: Vec<f64> = values
                .iter()
                .filter_map(|(block, v)| baseline.get(block).map(|b| (v / b).ln()))
                .collect();
            let log_half_width = log_half_width(&logs, confidence);
            ComparisonPrecision {
                config_id,
                blocks: logs.len(),
                half_width: log_half_width.map(f64::exp_m1),
                blocks_needed: log_half_width.and_then(|hw| {
                    stats::blocks_for_log_half_width(hw, logs.len(), target.target, confidence)
                }),
            }
        })
        .collect();
    let widest = comparisons
        .iter()
        .max_by(|a, b| {
            let w = |c: &ComparisonPrecision| c.half_width.unwrap_or(f64::INFINITY);
            w(a).total_cmp(&w(b))
        })
        .cloned();
    // The minimum counts paired blocks, not blocks run: a block with an invalid trial pairs
    // nothing for that comparison (and, for the baseline's, for every comparison).
    let minimum = target.first_stop(configs);
    let reached = blocks_done >= minimum
        && !comparisons.is_empty()
        && comparisons.iter().all(|c| {
            c.blocks >= minimum as usize && c.half_width.is_some_and(|h| h.ln_1p() <= goal)
        });
    let short = comparisons
        .iter()
        .map(|c| (minimum as usize).saturating_sub(c.blocks))
        .chain([minimum.saturating_sub(blocks_done) as usize])
        .max()
        .unwrap_or(0);
    let blocks_left = widest
        .as_ref()
        .and_then(|w| w.blocks_needed.map(|n| n.saturating_sub(w.blocks)))
        .map(|n| n.max(short));
    PrecisionStatus {
        blocks_done,
        comparisons,
        reached,
        widest,
        blocks_left,
        confidence,
    }
}

/// Half-width at `confidence` of the interval of the mean of `logs` (in block order) that
/// the report shows: widened for the dependence between blocks the series shows, and
/// doubled when the blocks drift (`stats::serial::reported_interval`), so that a run under
/// drift stops on an interval that is honest about it, not on a t interval widened or
/// warned about only afterwards.
fn log_half_width(logs: &[f64], confidence: f64) -> Option<f64> {
    stats::serial::reported_interval(logs, confidence).map(|r| r.high - r.mean)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stop rule's three reasons in their order, and the stored words unchanged (runs
    /// stored before the enum say `"reason": "max-batches"`).
    #[test]
    fn the_stop_reasons_come_in_order_and_keep_their_stored_words() {
        let target = PrecisionTarget {
            target: 0.01,
            metric: PrecisionMetric::Throughput,
            min_batches: 3,
            max_batches: 10,
            max_duration: Some(Duration::from_secs(60)),
        };
        let status = |reached| PrecisionStatus {
            blocks_done: 5,
            comparisons: Vec::new(),
            reached,
            widest: None,
            blocks_left: None,
            confidence: SEQUENTIAL_CONFIDENCE,
        };
        let spent = |s: u64| move || Some(Duration::from_secs(s));
        assert_eq!(
            PrecisionStop::now(&target, &status(true), 10, spent(99)),
            Some(PrecisionStop::TargetReached)
        );
        assert_eq!(
            PrecisionStop::now(&target, &status(false), 10, spent(99)),
            Some(PrecisionStop::MaxBatches)
        );
        assert_eq!(
            PrecisionStop::now(&target, &status(false), 9, spent(60)),
            Some(PrecisionStop::MaxDuration)
        );
        assert_eq!(
            PrecisionStop::now(&target, &status(false), 9, spent(59)),
            None
        );
        assert_eq!(
            PrecisionStop::now(&target, &status(false), 9, || None),
            None
        );
        for stop in [
            PrecisionStop::TargetReached,
            PrecisionStop::MaxBatches,
            PrecisionStop::MaxDuration,
        ] {
            let json = serde_json::to_value(stop).unwrap();
            assert_eq!(json, stop.as_str());
            assert_eq!(serde_json::from_value::<PrecisionStop>(json).unwrap(), stop);
        }
        let stored: PrecisionEnd = serde_json::from_str(
            r#"{"reason":"max-duration","blocks":7,"target":0.01,"metric":"throughput","widest_half_width":0.02}"#,
        )
        .unwrap();
        assert_eq!(stored.reason, PrecisionStop::MaxDuration);
    }

    fn target(min: u32, max: u32) -> PrecisionTarget {
        PrecisionTarget {
            target: 0.01,
            metric: PrecisionMetric::Throughput,
            min_batches: min,
            max_batches: max,
            max_duration: None,
        }
    }

    /// `blocks` blocks of the baseline and `ratios.len()` other configurations, each
    /// exactly `ratios[k]`× the baseline, but for the (config, block) trials in `invalid`.
    fn exact(blocks: u32, ratios: &[f64], invalid: &[(usize, u32)]) -> Vec<Observation> {
        let mut obs = Vec::new();
        for b in 0..blocks {
            let base = 1000.0 + 10.0 * f64::from(b);
            for (config_id, ratio) in [1.0].iter().chain(ratios).enumerate() {
                if !invalid.contains(&(config_id, b)) {
                    obs.push(Observation {
                        config_id,
                        block: b,
                        value: base * ratio,
                    });
                }
            }
        }
        obs
    }

    #[test]
    fn the_rule_waits_for_the_minimum_and_every_comparison() {
        let t = target(7, 50);
        // Two comparisons: config 1 exactly 1.1× in every block (zero width), config 2
        // noisy.
        let mut obs = exact(4, &[1.1], &[]);
        for b in 0..4 {
            let base = 1000.0 + 10.0 * f64::from(b);
            obs.push(Observation {
                config_id: 2,
                block: b,
                value: base * if b % 2 == 0 { 1.2 } else { 0.8 },
            });
        }
        let s = evaluate(&t, 3, 4, &obs);
        assert!(!s.reached);
        assert_eq!(s.comparisons[0].half_width, Some(0.0));
        assert_eq!(s.widest.as_ref().unwrap().config_id, 2);
        assert!(s.blocks_left.unwrap() > 100, "{s:?}");
        assert!(
            !evaluate(&t, 2, 6, &exact(6, &[1.1], &[])).reached,
            "below the minimum"
        );
        assert!(evaluate(&t, 2, 7, &exact(7, &[1.1], &[])).reached);
        // Never before the rank test can reach p < 0.05, whatever `batches` says.
        assert_eq!(target(3, 50).first_stop(2), 6);
        assert_eq!(target(3, 50).first_stop(4), 7);
        assert_eq!(target(3, 4).first_stop(2), 4);
        // A configuration without a valid trial can never be precise.
        assert!(!evaluate(&t, 3, 4, &exact(4, &[1.1], &[])).reached);
    }

    /// The minimum counts paired blocks (both the baseline and the configuration valid),
    /// not blocks run: 6 blocks with one invalid trial are 5 pairs, below the floor.
    #[test]
    fn the_minimum_counts_paired_blocks() {
        let t = target(6, 50);
        assert_eq!(t.first_stop(2), 6);
        // One invalid trial of the configuration, then one of the baseline.
        for invalid in [(1, 2), (0, 5)] {
            let s = evaluate(&t, 2, 6, &exact(6, &[1.1], &[invalid]));
            assert_eq!(s.comparisons[0].blocks, 5);
            assert_eq!(s.comparisons[0].half_width, Some(0.0));
            assert!(!s.reached, "{invalid:?}: {s:?}");
            assert_eq!(s.blocks_left, Some(1), "{invalid:?}: {s:?}");
            assert!(evaluate(&t, 2, 7, &exact(7, &[1.1], &[invalid])).reached);
        }
        // Three comparisons (first stop 7): an invalid baseline trial unpairs all of them, a
        // configuration's only its own; every one must have the minimum.
        let t = target(3, 50);
        let ratios = [1.1, 0.9, 1.05];
        let s = evaluate(&t, 4, 7, &exact(7, &ratios, &[(2, 0), (2, 3)]));
        let pairs: Vec<usize> = s.comparisons.iter().map(|c| c.blocks).collect();
        assert_eq!(pairs, [7, 5, 7]);
        assert!(!s.reached);
        assert_eq!(s.blocks_left, Some(2), "{s:?}");
        assert!(!evaluate(&t, 4, 8, &exact(8, &ratios, &[(2, 0), (2, 3)])).reached);
        assert!(evaluate(&t, 4, 9, &exact(9, &ratios, &[(2, 0), (2, 3)])).reached);
        let s = evaluate(&t, 4, 7, &exact(7, &ratios, &[(0, 6)]));
        assert!(s.comparisons.iter().all(|c| c.blocks == 6) && !s.reached);
        // The budget still ends a run whose pairs fall short (the runner stops at
        // `max_batches`, the report then says why).
        let t = target(6, 6);
        assert!(!evaluate(&t, 2, 6, &exact(6, &[1.1], &[(1, 0)])).reached);
    }

    /// Per-trial noise on the log scale, for the simulations of the stopping rule.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Noise {
        /// Normal, SD `sd`.
        Normal,
        /// Normal, and in 10% of blocks one trial (the baseline's or another's, equally
        /// likely) slowed by 5 to 10 SDs: a disturbance of either sign for each comparison.
        Contaminated,
        /// Student's t with 3 degrees of freedom, scaled to SD `sd`.
        HeavyTailed,
        /// Normal, and each trial of the configurations other than the baseline slowed,
        /// with probability `p`, by an exponential amount of mean `mean`·`sd` (the
        /// baseline never is): skewed in one direction only.
        OneSided { p: f64, mean: f64 },
        /// Normal with half the variance, and each comparison's log ratio wandering as an
        /// AR(1) of coefficient `phi` with the other half (issue 47's drift).
        Drift { phi: f64 },
    }

    /// One simulated setting: `configs` configurations (the baseline and `configs − 1`
    /// compared with it), every one `effect`× the baseline apart from the noise.
    #[derive(Clone, Copy, Debug)]
    struct Setting {
        configs: usize,
        sd: f64,
        effect: f64,
        noise: Noise,
        /// The chance that a trial is invalid (not stored), each independently.
        missing: f64,
    }

    impl Setting {
        /// The true log ratio of every comparison: the log effect, and the mean slowdown
        /// for one-sided noise (the mean of the per-block log ratios is what the interval
        /// estimates).
        fn truth(&self) -> f64 {
            let shift = match self.noise {
                Noise::OneSided { p, mean } => p * mean * self.sd,
                _ => 0.0,
            };
            self.effect.ln() - shift
        }

        /// One block: a level that pairing cancels, and one trial per configuration. The
        /// comparisons share the baseline's trial, so they are correlated as in a real run.
        fn block(
            &self,
            rng: &mut stats::SeededRng,
            b: u32,
            wander: &mut [f64],
            out: &mut Vec<Observation>,
        ) {
            let level = 1000.0 * (0.2 * rng.standard_normal()).exp();
            let mut e: Vec<f64> = (0..self.configs)
                .map(|_| match self.noise {
                    Noise::HeavyTailed => {
                        // t₃ = Z / √(χ²₃/3), whose variance is 3.
                        let z = rng.standard_normal();
                        let chi2: f64 = (0..3).map(|_| rng.standard_normal().powi(2)).sum();
                        self.sd * z / (chi2 / 3.0).sqrt() / 3f64.sqrt()
                    }
                    _ => self.sd * rng.standard_normal(),
                })
                .collect();
            match self.noise {
                Noise::Contaminated if rng.next_f64() < 0.1 => {
                    let hit = rng.uniform_below(self.configs);
                    e[hit] -= self.sd * (5.0 + 5.0 * rng.next_f64());
                }
                Noise::OneSided { p, mean } => {
                    for x in e.iter_mut().skip(1) {
                        if rng.next_f64() < p {
                            *x -= mean * self.sd * -(1.0 - rng.next_f64()).ln();
                        }
                    }
                }
                Noise::Drift { phi } => {
                    let half = self.sd / 2f64.sqrt();
                    for (x, w) in e.iter_mut().zip(wander.iter_mut()).skip(1) {
                        if b == 0 {
                            *w = half * rng.standard_normal();
                        }
                        *x = *x / 2f64.sqrt() + *w;
                        *w = phi * *w + half * (1.0 - phi * phi).sqrt() * rng.standard_normal();
                    }
                }
                _ => {}
            }
            for (config_id, x) in e.into_iter().enumerate() {
                if self.missing > 0.0 && rng.next_f64() < self.missing {
                    continue;
                }
                let effect = if config_id == 0 { 1.0 } else { self.effect };
                out.push(Observation {
                    config_id,
                    block: b,
                    value: level * effect * x.exp(),
                });
            }
        }
    }

    /// What `runs` seeded adaptive runs of one setting gave.
    #[derive(Debug)]
    struct Measured {
        runs: usize,
        /// Share of the comparisons (over all runs) whose interval at stop covered the truth.
        coverage: f64,
        /// Share of runs in which any comparison was called different (interval excluding
        /// 1 and Holm-adjusted signed-rank p < 0.05, as the report decides).
        any_called: f64,
        mean_blocks: f64,
        median_blocks: f64,
        /// The mean over comparisons and runs of the estimated log ratio at the stop, and
        /// the true one.
        mean_log_ratio: f64,
        truth: f64,
        /// Evaluations that said "reached" with a comparison short of `first_stop` paired
        /// blocks.
        short_stops: usize,
        /// Share of the comparisons whose log ratios had a marked skew at the stop
        /// (`stats::serial::marked_skew` at 5% over the comparisons), and the coverage of
        /// those without and with one.
        marked_at_stop: f64,
        coverage_unmarked: Option<f64>,
        coverage_marked: Option<f64>,
    }

    impl Measured {
        /// The Monte-Carlo standard error of a rate near `p` over these runs (counted per
        /// run, which is conservative for the coverage pooled over correlated comparisons).
        fn se(&self, p: f64) -> f64 {
            (p * (1.0 - p) / self.runs as f64).sqrt()
        }

        /// The relative bias of the mean estimated log ratio at the stop (−0.25: a slowdown
        /// understated by a quarter); `None` without a true difference.
        fn relative_bias(&self) -> Option<f64> {
            (self.truth != 0.0).then(|| self.mean_log_ratio / self.truth - 1.0)
        }
    }

    /// A variant of the rule's minimum, to measure the alternatives to it.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Minimum {
        /// The rule's: `first_stop` paired blocks (`batches` = 6).
        Rule,
        /// `batches` = n, whatever the data.
        Fixed(u32),
        /// No stop before n blocks while any comparison's log ratios have a marked skew
        /// (the candidate of the audit, rejected: see `one_sided_skew_is_the_weak_case`).
        WhileSkewed(u32),
    }

    /// Whether any comparison's per-block log ratios have a marked skew
    /// (`stats::serial::marked_skew` at 5%, Bonferroni over the comparisons).
    fn marked_skew(obs: &[Observation], configs: usize) -> bool {
        let of = |k: usize| -> BTreeMap<u32, f64> {
            obs.iter()
                .filter(|o| o.config_id == k)
                .map(|o| (o.block, o.value))
                .collect()
        };
        let base = of(0);
        (1..configs).any(|k| {
            let logs: Vec<f64> = of(k)
                .into_iter()
                .filter_map(|(block, v)| base.get(&block).map(|w| (v / w).ln()))
                .collect();
            stats::serial::marked_skew(&logs, 0.05 / (configs - 1) as f64).is_some()
        })
    }

    /// Runs the rule (`evaluate_at`, which `evaluate` calls at `SEQUENTIAL_CONFIDENCE`)
    /// after every block from the first, stopping when it is reached or at the budget, and
    /// judges the intervals at `confidence` that the report would show at the stop.
    fn simulate(seed: u64, runs: usize, setting: Setting, confidence: f64) -> Measured {
        simulate_with(seed, runs, setting, confidence, Minimum::Rule)
    }

    fn simulate_with(
        seed: u64,
        runs: usize,
        setting: Setting,
        confidence: f64,
        minimum: Minimum,
    ) -> Measured {
        let mut rng = stats::SeededRng::new(seed);
        let t = match minimum {
            Minimum::Fixed(n) => target(n, 300),
            _ => target(6, 300),
        };
        let comparisons = setting.configs - 1;
        let truth = setting.truth().exp();
        let (mut covered, mut any, mut blocks_total) = (0usize, 0usize, 0u64);
        let mut blocks_each = Vec::with_capacity(runs);
        let (mut estimates, mut short_stops) = (0.0f64, 0usize);
        let mut by_skew = [(0usize, 0usize); 2];
        let mut obs = Vec::new();
        let mut wander = vec![0.0; setting.configs];
        for _ in 0..runs {
            obs.clear();
            let mut b = 0;
            loop {
                setting.block(&mut rng, b, &mut wander, &mut obs);
                b += 1;
                let status = evaluate_at(&t, setting.configs, b, &obs, confidence);
                let first_stop = t.first_stop(setting.configs) as usize;
                short_stops += usize::from(
                    status.reached && status.comparisons.iter().any(|c| c.blocks < first_stop),
                );
                let held = match minimum {
                    Minimum::WhileSkewed(n) => b < n && marked_skew(&obs, setting.configs),
                    _ => false,
                };
                if b >= t.max_batches || (status.reached && !held) {
                    break;
                }
            }
            blocks_total += u64::from(b);
            blocks_each.push(f64::from(b));
            let of = |k: usize| -> BTreeMap<u32, f64> {
                obs.iter()
                    .filter(|o| o.config_id == k)
                    .map(|o| (o.block, o.value))
                    .collect()
            };
            let base = of(0);
            // Per comparison: whether its interval excludes 1, and its log ratios (paired by
            // block, as the report pairs them).
            let mut results: Vec<(bool, Vec<f64>)> = Vec::new();
            for k in 1..setting.configs {
                let (a, b): (Vec<f64>, Vec<f64>) = of(k)
                    .into_iter()
                    .filter_map(|(block, v)| base.get(&block).map(|&w| (v, w)))
                    .unzip();
                // The interval the report shows (widened for the dependence the blocks show,
                // doubled when they drift, simultaneous over the comparisons).
                let diffs: Vec<f64> = a.iter().zip(&b).map(|(x, y)| (x / y).ln()).collect();
                let stats::serial::ReportedInterval {
                    mean, low, high, ..
                } = stats::serial::reported_interval(
                    &diffs,
                    stats::simultaneous_confidence(confidence, comparisons),
                )
                .unwrap();
                let covers = low <= truth.ln() && truth.ln() <= high;
                let excludes_one = low > 0.0 || high < 0.0;
                covered += usize::from(covers);
                estimates += mean;
                let marked =
                    stats::serial::marked_skew(&diffs, 0.05 / comparisons as f64).is_some();
                by_skew[usize::from(marked)].0 += 1;
                by_skew[usize::from(marked)].1 += usize::from(covers);
                results.push((excludes_one, diffs));
            }
            // A difference is called when its interval excludes 1, as the report decides.
            let called = results.iter().any(|r| r.0);
            any += usize::from(called);
        }
        let share = |(n, c): (usize, usize)| (n > 0).then(|| c as f64 / n as f64);
        Measured {
            runs,
            coverage: covered as f64 / (runs * comparisons) as f64,
            any_called: any as f64 / runs as f64,
            mean_blocks: blocks_total as f64 / runs as f64,
            median_blocks: stats::median(&blocks_each).unwrap_or(0.0),
            mean_log_ratio: estimates / (runs * comparisons) as f64,
            truth: truth.ln(),
            short_stops,
            marked_at_stop: by_skew[1].0 as f64 / (runs * comparisons) as f64,
            coverage_unmarked: share(by_skew[0]),
            coverage_marked: share(by_skew[1]),
        }
    }

    /// Asserts what every setting in which the rule is claimed to hold must show: coverage
    /// of the 97.5% intervals at the stop of at least 95% (the point estimate itself, not a
    /// bound: the Monte-Carlo standard error at 1000 runs is about 0.5 points near 97%, and
    /// the values measured with 4000 runs, in the comments below, are 2 to 6 of those above
    /// 95%), and, without an effect, A/A
    /// runs calling any difference in at most 5% plus the binomial 3-sigma allowance of the
    /// Monte-Carlo error (0.05 + 3·√(0.05·0.95/1000) = 0.071 at 1000 runs).
    fn assert_holds(what: &str, m: &Measured, aa: bool) {
        assert!(
            m.coverage >= 0.95,
            "{what}: coverage {} after {:.1} blocks on average",
            m.coverage,
            m.mean_blocks
        );
        if aa {
            let bound = 0.05 + 3.0 * m.se(0.05);
            assert!(m.any_called <= bound, "{what}: A/A false positives {m:?}");
        }
    }

    /// The stopping rule in use, by seeded simulation on synthetic truth, normal noise, one
    /// comparison: per-trial noise of SD 0.5% to 1.4% (per-block log ratios of SD 0.7% to
    /// 2%: stops after about 6 to 22 blocks, where the undercoverage of width-based
    /// stopping is worst); the run stops when the 97.5% interval is within ±1%, or at 300
    /// blocks. Measured (4000 runs per setting, seed 7, for docs/methodology.md): coverage
    /// 98.0%, 96.4%, 96.3% and A/A false positives 1.6%, 3.2%, 3.6% at SD 0.5%, 1%, 1.4%;
    /// the worst normal setting found, SD 2% (42 blocks), covered 96.1%. With a true 2%
    /// effect the coverage holds too.
    #[test]
    fn sequential_stopping_keeps_coverage_and_false_positives() {
        for (seed, sd, effect) in [
            (1, 0.005, 1.0),
            (2, 0.01, 1.0),
            (3, 0.014, 1.0),
            (4, 0.01, 1.02),
        ] {
            rule_holds(seed, 2, sd, effect, Noise::Normal);
        }
    }

    /// Simulates 1000 adaptive runs of `configs` configurations and checks the rule's
    /// coverage, and its false positives when there is no `effect`.
    fn rule_holds(seed: u64, configs: usize, sd: f64, effect: f64, noise: Noise) {
        let setting = Setting {
            configs,
            sd,
            effect,
            noise,
            missing: 0.0,
        };
        let m = simulate(seed, 1000, setting, SEQUENTIAL_CONFIDENCE);
        assert_holds(&format!("{setting:?}"), &m, effect == 1.0);
    }

    /// Symmetric noise that is not normal, one to three comparisons sharing the baseline's
    /// trials (the rule waits until all are within ±1%): contamination (10% of blocks with
    /// one trial 5–10 SDs slow, the baseline's as likely as the other's) at SD 0.7%, and
    /// t₃ noise at SD 1%. Measured (4000 runs each, seed 7), coverage and A/A false
    /// positives (any comparison, after Holm) for 1, 2, 3 comparisons: contaminated 97.8%,
    /// 97.9%, 98.1% and 2.0%, 2.8%, 3.2%; t₃ 97.1%, 97.7%, 97.8% and 2.6%, 3.3%, 3.7%.
    #[test]
    fn sequential_stopping_holds_under_contaminated_and_heavy_tailed_noise() {
        for (seed, noise, sd) in [
            (11, Noise::Contaminated, 0.007),
            (12, Noise::HeavyTailed, 0.01),
        ] {
            for configs in [2, 3, 4] {
                rule_holds(seed + 100 * configs as u64, configs, sd, 1.0, noise);
            }
        }
    }

    /// Two and three comparisons under normal noise (SD 1%), with and without a true 2%
    /// effect of every configuration. Measured (4000 runs, seed 7, A/A): coverage 97.2% and
    /// 97.2%, any false positive after Holm 4.3% and 4.5%.
    #[test]
    fn sequential_stopping_holds_with_several_comparisons() {
        for (seed, configs, effect) in [(21, 3, 1.0), (22, 4, 1.0), (23, 3, 1.02), (24, 4, 1.02)] {
            rule_holds(seed, configs, 0.01, effect, Noise::Normal);
        }
    }

    /// Issue 47, item 5: adaptive A/A runs of 4 comparisons under drift (each comparison's
    /// ratio wandering, AR(1) with half the variance) called some difference in 10.9% of
    /// runs at φ = 0.5 (17–19% at other spreads, 39–71% at φ = 0.9) when the rule stopped
    /// on the t interval. It stops on the interval the report shows now, widened for the
    /// dependence the blocks show, doubled when they drift (`stats::serial::
    /// reported_interval`) and simultaneous over the comparisons, and a difference is
    /// called when that interval excludes 1. Measured here (1000 runs each, the ±1% target,
    /// SD 1% and 2%, seeds 4700–4703, 2026-11-30): φ = 0.3, 2.7%; φ = 0.5, 4.5% and 3.6%;
    /// φ = 0.9, 27.3%. Without the doubling (3821006): 3.5%, 6.2%, 4.7%, 37.6%; with the
    /// rank test deciding beside a per-comparison interval (2026-11-28): 5.9%, 8.7%, 9.2%,
    /// 46.6%. Asserted at φ = 0.3 and 0.5 (at most 5% plus 3 Monte-Carlo SEs); at φ = 0.9
    /// the 5% bar is not met (a wander that slow looks like a difference to any interval of
    /// a few dozen blocks, docs/methodology.md, "Reports and adaptive runs under drift"),
    /// and what is asserted is the doubling's gain: below 32%, which 37.6% is not.
    #[test]
    fn adaptive_a_over_a_under_drift() {
        for (k, (phi, sd, asserted)) in [
            (0.3, 0.01, true),
            (0.5, 0.01, true),
            (0.5, 0.02, true),
            (0.9, 0.01, false),
        ]
        .into_iter()
        .enumerate()
        {
            let setting = Setting {
                configs: 5,
                sd,
                effect: 1.0,
                noise: Noise::Drift { phi },
                missing: 0.0,
            };
            let m = simulate(4700 + k as u64, 1000, setting, SEQUENTIAL_CONFIDENCE);
            eprintln!(
                "φ {phi}, sd {sd}: any called {:.3}, coverage {:.3}, mean blocks {:.1}",
                m.any_called, m.coverage, m.mean_blocks
            );
            let bound = if asserted {
                0.05 + 3.0 * m.se(0.05)
            } else {
                0.32
            };
            assert!(m.any_called <= bound, "φ {phi} sd {sd}: {m:?}");
        }
    }

    /// Invalid trials: each trial (the baseline's too) is lost with probability 8%, so
    /// blocks run and blocks paired part. With per-trial noise of SD 0.5% the ±1% target is
    /// met at once and the runs stop at the minimum, where a lost trial matters most. No run
    /// may stop with a comparison short of the minimum of paired blocks, and the rule must
    /// still hold. Before the rule counted paired blocks (it counted blocks run), this
    /// stopped short in 300 of 1000 runs with one comparison and 492 of 1000 with three
    /// (seeds 51, 53).
    #[test]
    fn invalid_trials_do_not_stop_a_run_short() {
        for (seed, configs) in [(51, 2), (53, 4)] {
            let setting = Setting {
                configs,
                sd: 0.005,
                effect: 1.0,
                noise: Noise::Normal,
                missing: 0.08,
            };
            let m = simulate(seed, 1000, setting, SEQUENTIAL_CONFIDENCE);
            assert_eq!(m.short_stops, 0, "{setting:?}: {m:?}");
            assert_holds(&format!("{setting:?}"), &m, true);
        }
    }

    /// The known weakness: noise skewed in ONE direction only. The other configuration's
    /// trials (never the baseline's) are slowed, in 20% of them, by an exponential amount of
    /// mean 4 SDs. The rule looks only at the width of the interval, so it stops when the
    /// spread happened to look small; with symmetric noise the sample mean and variance are
    /// uncorrelated and that choice does not bias the estimate, but here a stretch with few
    /// slowdowns has both a small variance and a mean above the truth, so the runs that stop
    /// early are the ones whose estimate is off to one side, and on average the slowdown is
    /// understated.
    ///
    /// Measured with `one_sided_alternatives` (4000 runs per setting, seed 7; coverage of
    /// the 97.5% interval at the stop, relative bias of the mean estimated log ratio, mean
    /// blocks): 91.4%, −26.6%, 30.3 blocks at SD 1% (this test's setting); 89.6%, −18.8%,
    /// 62.6 at SD 1.4%; 89.5%, −31.9%, 112.4 for slowdowns in 5% of trials of mean 8 SDs at
    /// SD 2%; 93.7%, −12.9%, 44.1 with two such configurations; 90.9%, −41.2%, 29.0 for 10%
    /// of mean 6 SDs at SD 1%. At the stop the skew of the log ratios is marked
    /// (`stats::serial::marked_skew`) in 54%, 71%, 63%, 71% and 46% of comparisons, and
    /// those cover 98.7%, 97.2%, 98.1%, 98.5%, 98.5%; the ones without a marked skew cover
    /// only 82.8%, 71.3%, 74.8%, 82.1%, 84.3%. The misses are runs that stopped before the
    /// slowdowns showed, whose log ratios look like normal noise.
    ///
    /// Which is why the rule does not raise its minimum on a marked skew (the statistics
    /// audit's proposal): it would hold back only runs that already cover. Measured
    /// (same runs), no stop before 12, 20, 30 or 60 blocks while a skew is marked: 91.3%,
    /// 91.0%, 91.5%, 90.5% at SD 1% (bias −26.6% to −24.7%, 30.3 to 39.0 blocks); 89.5% to
    /// 90.2% at SD 1.4%; 89.8% to 90.2% for the rare large slowdowns; 93.5% to 93.7% with two
    /// configurations: none raises coverage by more than 0.7 points (1.5 Monte-Carlo SEs),
    /// and 60 blocks at SD 1% lower it by 0.9 (normal noise: 0 to 0.4 more blocks, 17.3 to
    /// 19.6 under contamination at 30). What does help
    /// is a minimum whatever the data (`batches`): 40 blocks give 94.6%, 93.8%, 90.9%,
    /// 95.2%, 92.6% (bias −6.4%, −10.9%, −29.6%, −4.9%, −10.2%), 60 blocks 95.5%, 95.5%,
    /// 91.8%, 95.2%, 93.3% (−1.6%, −6.9%, −24.4%, −2.1%, −3.8%), at 40 or 60 blocks for
    /// every run, normal noise included (6.5 blocks at SD 0.5%).
    ///
    /// Asserted at 1000 runs (seed 31, measured 91.5%, 54% marked covering 98.9%, 46%
    /// unmarked covering 82.8%, bias −27.8%): coverage at least the 4000-run 91.4% minus 3
    /// Monte-Carlo SEs (0.9 points each), 88.7% rounded down to 88%; the marked ones at
    /// least 96% (3 SEs below 98.9% at 540 runs is 97.5%) and the unmarked below 90% (3 SEs
    /// above 82.8% at 460 runs is 88.1%); the slowdown understated by more than 15%.
    #[test]
    fn one_sided_skew_is_the_weak_case() {
        let setting = Setting {
            configs: 2,
            sd: 0.01,
            effect: 1.0,
            noise: Noise::OneSided { p: 0.2, mean: 4.0 },
            missing: 0.0,
        };
        let m = simulate(31, 1000, setting, SEQUENTIAL_CONFIDENCE);
        assert!(m.coverage >= 0.88, "{m:?}");
        assert!(m.coverage_marked.unwrap() >= 0.96, "{m:?}");
        assert!(m.coverage_unmarked.unwrap() < 0.90, "{m:?}");
        assert!(m.relative_bias().unwrap() < -0.15, "{m:?}");
    }

    /// Why adaptive runs use 97.5% and not 95%: the same rule at 95% (stop when the 95%
    /// interval is within ±1%, report the 95% interval), normal noise of SD 1.4%, covers the
    /// truth in about 93% of runs (measured, 4000 runs, seed 7: 92.8%; 92.9–93.7% from SD
    /// 1% to 3%; A/A false positives up to 5.9%), as Chow and Robbins' fixed-width
    /// procedure is known to at small n. Since issue 47 the interval is the one widened
    /// for dependence between blocks (a little wider than t on independent blocks), and
    /// the undercoverage is smaller: 94.45% at 4000 runs, seed 41, only 1.6 Monte-Carlo
    /// standard errors below 95% (it was 3 or more with t). Asserted: below 95%, on this
    /// seed; 97.5% stays, as its coverage at the stop is 96–98%.
    #[test]
    fn the_95_percent_level_would_not_be_enough() {
        let setting = Setting {
            configs: 2,
            sd: 0.014,
            effect: 1.0,
            noise: Noise::Normal,
            missing: 0.0,
        };
        let m = simulate(41, 4000, setting, 0.95);
        eprintln!("{m:?}");
        assert!(m.coverage < 0.95, "{m:?}");
    }

    /// The figures of `one_sided_skew_is_the_weak_case` and docs/methodology.md, for the
    /// rule and the minimums it does not use (slow in debug: run it with
    /// `cargo test --release -p rubyrace-experiment --locked one_sided_alternatives --
    /// --ignored --nocapture`; RUNS and SEED in the environment, 4000 and 7 by default).
    #[test]
    #[ignore]
    fn one_sided_alternatives() {
        let env = |name: &str, default: u64| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
        };
        let (runs, seed) = (env("RUNS", 4000) as usize, env("SEED", 7));
        let one_sided = |p, mean| Noise::OneSided { p, mean };
        for (configs, sd, noise) in [
            (2, 0.01, one_sided(0.2, 4.0)),
            (2, 0.014, one_sided(0.2, 4.0)),
            (2, 0.02, one_sided(0.05, 8.0)),
            (3, 0.01, one_sided(0.2, 4.0)),
            (2, 0.01, one_sided(0.1, 6.0)),
            (2, 0.005, Noise::Normal),
            (2, 0.01, Noise::Normal),
            (2, 0.014, Noise::Normal),
            (4, 0.01, Noise::Normal),
            (2, 0.007, Noise::Contaminated),
            (2, 0.01, Noise::HeavyTailed),
        ] {
            let setting = Setting {
                configs,
                sd,
                effect: 1.0,
                noise,
                missing: 0.0,
            };
            println!("{setting:?} ({runs} runs, seed {seed})");
            for minimum in [
                Minimum::Rule,
                Minimum::WhileSkewed(12),
                Minimum::WhileSkewed(20),
                Minimum::WhileSkewed(30),
                Minimum::WhileSkewed(60),
                Minimum::Fixed(40),
                Minimum::Fixed(60),
            ] {
                let m = simulate_with(seed, runs, setting, SEQUENTIAL_CONFIDENCE, minimum);
                let pct = |x: Option<f64>| x.map_or("-".into(), |x| format!("{:.1}%", 100.0 * x));
                println!(
                    "  {:18} coverage {:.1}% (SE {:.1}), bias {}, {:.1} blocks; skew marked at \
                     the stop {:.1}%, coverage without {}, with {}",
                    format!("{minimum:?}"),
                    100.0 * m.coverage,
                    100.0 * m.se(m.coverage),
                    pct(m.relative_bias()),
                    m.mean_blocks,
                    100.0 * m.marked_at_stop,
                    pct(m.coverage_unmarked),
                    pct(m.coverage_marked),
                );
            }
        }
    }

    /// What the doubling for drift costs runs on clean data (issue 47: median blocks to a
    /// decision must not grow by more than a quarter): independent normal blocks, 1000
    /// runs a setting, seeds 900–903. Printed, for docs/methodology.md ("Reports and
    /// adaptive runs under drift"), beside the same runs stopping on the interval not
    /// doubled (measured at 3821006, before the doubling).
    /// `cargo test --release -p rubyrace-rules clean_runs_under_the_drift_doubling --
    /// --ignored --nocapture`.
    #[test]
    #[ignore = "prints a table of docs/methodology.md"]
    fn clean_runs_under_the_drift_doubling() {
        println!(
            "| comparisons | SD | effect | median blocks | mean blocks | coverage | any called |"
        );
        println!("|---|---|---|---|---|---|---|");
        for (k, (configs, sd, effect)) in [
            (2, 0.01, 1.0),
            (5, 0.01, 1.0),
            (2, 0.02, 1.03),
            (5, 0.02, 1.0),
        ]
        .into_iter()
        .enumerate()
        {
            let setting = Setting {
                configs,
                sd,
                effect,
                noise: Noise::Normal,
                missing: 0.0,
            };
            let m = simulate(900 + k as u64, 1000, setting, SEQUENTIAL_CONFIDENCE);
            println!(
                "| {} | {sd} | {effect} | {} | {:.1} | {:.1}% | {:.1}% |",
                configs - 1,
                m.median_blocks,
                m.mean_blocks,
                100.0 * m.coverage,
                100.0 * m.any_called
            );
        }
    }
}
