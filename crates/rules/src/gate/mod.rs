//! The decision of a gate on a change (`rubyrace check`): is the head slower than the base
//! by more than the allowed slowdown, with confidence? Base and head run in the same
//! blocks; each block gives one paired figure, how much worse the head did on the log scale
//! (`ln(head cost / base cost)`, or `ln(base throughput / head throughput)`: positive is
//! worse). The rule looks at those after a few planned block counts and says:
//!
//! - **pass**: the whole interval of the slowdown is within the allowed one (its slow end
//!   is at most `max_slowdown`);
//! - **fail**: the whole interval is beyond it (slower than allowed, with confidence);
//! - **inconclusive**: the budget (`max_blocks`) is spent and the interval still straddles
//!   the threshold, or the blocks cannot support a verdict (drift, a step, stalls: the
//!   [`Doubt`] is its reason);
//! - else another block.
//!
//! Unlike the width-based stop of `precision`, this rule stops *because of* where the
//! interval lies, which is optional stopping: a 95% interval looked at after every block
//! would cross a boundary by chance far more often than 5% of the time. So the rule looks
//! only at a few block counts (`looks`: `min_blocks`, then about ×1.5 each time, and
//! `max_blocks`), and each look's interval is at confidence 1 − α / (number of looks): by
//! Bonferroni's inequality, whatever the noise does between looks, the chance that *any*
//! look's interval lies wholly on the wrong side of the truth is at most α / 2 on each
//! side, if each look's interval has its confidence.
//!
//! That "if" is where unattended gates went wrong (issue 47): the plain t interval has its
//! confidence only for independent, near-normal blocks. So each look's interval is widened
//! for the serial dependence it sees (an AR(1) effective sample size, never narrower than
//! t), and three shape checks run on the blocks in order (drift, a step, far-off blocks on
//! one side); when one fires, the look decides only on an interval twice as wide, and the
//! budget's end names the doubt. What no check can see stays a limit, stated with its
//! figures in docs/methodology.md ("The gate under stalls, drift and steps"): stalls rarer
//! than one in the blocks looked at, drift slower than the run, a step after the verdict.
//! The seeded simulations of `simulation` (in the tests) measure every rate there, the
//! rule before issue 47 beside the rule now.

use serde::{Deserialize, Serialize};

use crate::precision::{Observation, PrecisionMetric};

/// The chance, over the whole run, of an interval wholly on the wrong side of the truth
/// (split between the two sides).
pub const GATE_ALPHA: f64 = 0.05;

/// How a gate decides.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GateRule {
    /// The slowdown allowed, as a fraction: 0.03 for "at most 3% slower" (a cost 1.03× the
    /// base's, or a throughput 1/1.03 of it).
    pub max_slowdown: f64,
    /// Blocks before the first look (at least 3: an interval needs a spread).
    pub min_blocks: u32,
    /// The budget: at this many blocks the rule decides, inconclusive if it must.
    pub max_blocks: u32,
}

/// What the gate says after a look.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateVerdict {
    /// No slowdown beyond the allowed one.
    Pass,
    /// Slower than allowed, with confidence.
    Fail,
    /// The budget is spent and the interval still straddles the threshold.
    Inconclusive,
    /// Not decided yet: run another block.
    Continue,
}

/// Why the blocks cannot support a verdict although the interval may lie on one side: the
/// shape checks of [`GateRule::decide`], each a reason a person would accept for "cannot
/// tell".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Doubt {
    /// The per-block figure wanders or trends (Mann–Kendall or a lag-1 autocorrelation).
    Drift,
    /// The per-block figure changed level once during the run (Pettitt).
    Step,
    /// Some blocks lie far from the rest on one side (stalls of one side's trials).
    Skew,
}

impl Doubt {
    /// In words, for the verdict's line.
    pub fn describe(self) -> &'static str {
        match self {
            Doubt::Drift => "the head/base ratio drifts from block to block",
            Doubt::Step => "the head/base ratio changed level during the run",
            Doubt::Skew => "some blocks are far off on one side (stalled trials)",
        }
    }
}

/// The verdict with the figures it rests on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GateDecision {
    pub verdict: GateVerdict,
    /// Blocks looked at.
    pub blocks: u32,
    /// The head's slowdown factor (1.05: 5% slower; 0.98: 2% faster), the geometric mean
    /// over the blocks, and its interval at `confidence`; absent below two blocks.
    pub factor: Option<f64>,
    pub low: Option<f64>,
    pub high: Option<f64>,
    pub confidence: f64,
    /// What the shape checks found at this look, if anything: a look with a doubt decides
    /// only on the doubled interval, and an inconclusive end names it as the reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doubt: Option<Doubt>,
}

/// How a look treats its shape checks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Policy {
    /// The level of each shape check (drift, step, skew): on independent, near-normal
    /// blocks each fires at about this rate.
    pub shape_alpha: f64,
    /// The factor on the half-width of a look with a doubt (infinite: such a look never
    /// decides).
    pub widen_on_doubt: f64,
    /// The fewest blocks whose interval is widened for serial dependence (below, the t
    /// interval).
    pub dependence_from: u32,
    /// How many standard errors of the lag-1 autocorrelation below its estimate the
    /// dependence widened for is taken ([`stats::serial::dependent_mean_interval_beyond`]).
    pub dependence_margin: f64,
}

impl Policy {
    /// The rule's.
    pub const RULE: Policy = Policy {
        shape_alpha: stats::serial::DOUBT_LEVEL,
        widen_on_doubt: stats::serial::WIDEN_ON_DOUBT,
        dependence_from: 0,
        dependence_margin: 1.0,
    };

    /// The rule before issue 47: the plain t interval, no shape check (each at level 0
    /// never fires), nothing widened. The simulations compare the rule with it.
    #[cfg(test)]
    pub const PLAIN_T: Policy = Policy {
        shape_alpha: 0.0,
        widen_on_doubt: 1.0,
        dependence_from: u32::MAX,
        dependence_margin: 0.0,
    };
}

impl GateRule {
    /// The block counts at which the rule looks ([`planned_looks`]).
    pub fn looks(&self) -> Vec<u32> {
        planned_looks(self.min_blocks, self.max_blocks)
    }

    /// The confidence of each look's interval: 1 − α / (number of looks).
    pub fn confidence(&self) -> f64 {
        1.0 - GATE_ALPHA / self.looks().len() as f64
    }

    /// The verdict after `worse.len()` blocks; `worse` holds each block's
    /// `ln(head cost / base cost)` (positive: the head did worse), in block order. Between
    /// planned looks it is `Continue`, whatever the figures.
    ///
    /// At a look the interval is the AR(1)-widened one of
    /// [`stats::serial::dependent_mean_interval`] (never narrower than the t interval), so
    /// that blocks which wander from one to the next do not look more certain than they
    /// are. Then the shape checks run ([`shape_doubt`]); when one fires, the look decides
    /// only if the interval with its half-width doubled still lies wholly on one side (a
    /// 25% regression is still a fail under drift), and otherwise goes on to the next
    /// look, or ends inconclusive at the budget with the doubt as its reason.
    pub fn decide(&self, worse: &[f64]) -> GateDecision {
        self.decide_with(worse, &Policy::RULE)
    }

    /// [`GateRule::decide`] after `blocks_done` blocks were run, of which `worse` holds the
    /// ones that paired (a block with an invalid trial adds none). The budget is blocks run,
    /// not pairs: a decision still `Continue` once `max_blocks` are run is `Inconclusive`.
    pub fn decide_after(&self, worse: &[f64], blocks_done: u32) -> GateDecision {
        let mut decision = self.decide(worse);
        if decision.verdict == GateVerdict::Continue && blocks_done >= self.max_blocks {
            decision.verdict = GateVerdict::Inconclusive;
        }
        decision
    }

    /// [`GateRule::decide`] under another policy (the simulations measure alternatives).
    pub(crate) fn decide_with(&self, worse: &[f64], policy: &Policy) -> GateDecision {
        let n = worse.len() as u32;
        let confidence = self.confidence();
        let interval = if n >= policy.dependence_from {
            stats::serial::dependent_mean_interval_beyond(
                worse,
                confidence,
                policy.dependence_margin,
            )
            .map(|(m, _, high, _)| (m, high - m))
        } else {
            log_interval(worse, confidence)
        };
        let mut decision = GateDecision {
            verdict: GateVerdict::Continue,
            blocks: n,
            factor: interval.map(|(m, _)| m.exp()),
            low: interval.map(|(m, h)| (m - h).exp()),
            high: interval.map(|(m, h)| (m + h).exp()),
            confidence,
            doubt: None,
        };
        let last = *self.looks().last().unwrap();
        if !self.looks().contains(&n) && n < last {
            return decision;
        }
        decision.doubt = shape_doubt(worse, policy.shape_alpha);
        let widen = if decision.doubt.is_some() {
            policy.widen_on_doubt
        } else {
            1.0
        };
        if let Some((m, h)) = interval {
            // The interval shown is the one the look decided on.
            decision.low = Some((m - widen * h).exp());
            decision.high = Some((m + widen * h).exp());
        }
        let threshold = (1.0 + self.max_slowdown).ln();
        decision.verdict = match interval {
            Some((m, h)) if m - widen * h > threshold => GateVerdict::Fail,
            Some((m, h)) if m + widen * h <= threshold => GateVerdict::Pass,
            _ if n >= last => GateVerdict::Inconclusive,
            _ => GateVerdict::Continue,
        };
        decision
    }

    /// The whole gate on a sequence of blocks: looks after each one and stops at the first
    /// decision. `next_block` gives the next block's figure.
    pub fn run(&self, mut next_block: impl FnMut() -> f64) -> GateDecision {
        let mut worse = Vec::new();
        loop {
            worse.push(next_block());
            let d = self.decide(&worse);
            if d.verdict != GateVerdict::Continue {
                return d;
            }
        }
    }
}

/// A gate as a run stores it (`rubyrace check`): the rule, the metric it decides on, and
/// the two configurations, base (configuration 0) and head (configuration 1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GateTarget {
    pub rule: GateRule,
    pub metric: PrecisionMetric,
}

impl GateTarget {
    /// Each block's `ln(head cost / base cost)` over the blocks where both have a valid
    /// value, in block order: for throughput, `ln(base / head)`, so positive is worse for
    /// every metric.
    pub fn worse_by_block(&self, observations: &[Observation]) -> Vec<f64> {
        cost_logs(self.metric, observations, 1, 0)
            .into_values()
            .collect()
    }
}

/// Each block's `ln(cost of configuration `of` / cost of `against`)`, over the blocks where
/// both have a valid value: for throughput, the inverse ratio, so positive is slower for
/// every metric.
pub fn cost_logs(
    metric: PrecisionMetric,
    observations: &[Observation],
    of: usize,
    against: usize,
) -> std::collections::BTreeMap<u32, f64> {
    let value = |config: usize| -> std::collections::BTreeMap<u32, f64> {
        observations
            .iter()
            .filter(|o| o.config_id == config && o.value > 0.0 && o.value.is_finite())
            .map(|o| (o.block, o.value))
            .collect()
    };
    let (of, against) = (value(of), value(against));
    of.iter()
        .filter_map(|(block, v)| against.get(block).map(|a| (*block, (v / a).ln())))
        .map(|(block, log)| {
            let cost = if metric == PrecisionMetric::Throughput {
                -log
            } else {
                log
            };
            (block, cost)
        })
        .collect()
}

/// How a gate ended, as stored (`gate_end` in the results' meta).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GateEnd {
    pub decision: GateDecision,
    pub max_slowdown: f64,
    pub metric: PrecisionMetric,
}

impl GateEnd {
    /// One line, in the direction the report's tables use (the head's value of the metric
    /// over the base's: for throughput, higher is faster): the verdict, the ratio in words
    /// ("2.5% faster"), its interval at the gate's own confidence, labelled, and the limit
    /// allowed in the same direction. A person reading a pull request sees one direction
    /// in the headline and the tables below it (check.md says why).
    pub fn describe(&self) -> String {
        let d = &self.decision;
        let metric = self.metric;
        let limit = metric_ratio(metric, 1.0 + self.max_slowdown);
        let allowed = format!(
            "at most {:.2}% slower: {} {} {limit:.4}×",
            100.0 * self.max_slowdown,
            metric.name(),
            if metric == PrecisionMetric::Throughput {
                "≥"
            } else {
                "≤"
            },
        );
        let doubled = match d.doubt {
            Some(doubt) => format!(", doubled because {}", doubt.describe()),
            None => String::new(),
        };
        let figures = match (d.factor, d.low, d.high) {
            (Some(f), Some(lo), Some(hi)) => {
                let (r, a, b) = (
                    metric_ratio(metric, f),
                    metric_ratio(metric, lo),
                    metric_ratio(metric, hi),
                );
                format!(
                    "head/base {} {r:.4}× ({}) [{:.4}–{:.4}] ({:.2}% interval{doubled}), {}",
                    metric.name(),
                    change_words(metric, r),
                    a.min(b),
                    a.max(b),
                    100.0 * d.confidence,
                    blocks(d.blocks)
                )
            }
            _ => format!(
                "{}, too few paired values for an interval",
                blocks(d.blocks)
            ),
        };
        let verdict = match d.verdict {
            GateVerdict::Pass => {
                format!("pass: within the allowed slowdown ({allowed}) with confidence")
            }
            GateVerdict::Fail => format!("fail: slower than allowed ({allowed}) with confidence"),
            GateVerdict::Inconclusive => match d.doubt {
                Some(doubt) => format!(
                    "inconclusive: cannot tell, {} ({allowed})",
                    doubt.describe()
                ),
                None => format!(
                    "inconclusive: at the budget the interval still holds the limit ({allowed})"
                ),
            },
            GateVerdict::Continue => "not decided".to_string(),
        };
        format!("{verdict}; {figures}")
    }
}

fn blocks(n: u32) -> String {
    if n == 1 {
        "1 block".into()
    } else {
        format!("{n} blocks")
    }
}

/// The head's value of `metric` over the base's, from the head's cost factor (`factor` >
/// 1: the head did worse): its inverse for throughput, the factor itself for the rest.
pub fn metric_ratio(metric: PrecisionMetric, factor: f64) -> f64 {
    if metric == PrecisionMetric::Throughput {
        1.0 / factor
    } else {
        factor
    }
}

/// A head/base ratio of `metric` in words, as the report's comparisons word it: "2.5%
/// faster", "14.9% slower", "3.1% more CPU per request", "no change".
pub fn change_words(metric: PrecisionMetric, ratio: f64) -> String {
    let pct = (ratio - 1.0) * 100.0;
    if format!("{:.1}", pct.abs()) == "0.0" {
        return "no change".into();
    }
    let (more, less) = match metric {
        PrecisionMetric::Throughput => ("faster", "slower"),
        PrecisionMetric::CpuPerRequest => ("more CPU per request", "less CPU per request"),
        PrecisionMetric::LatencyP50 => ("higher p50 latency", "lower p50 latency"),
        PrecisionMetric::LatencyP99 => ("higher p99 latency", "lower p99 latency"),
        PrecisionMetric::PssEnd => ("more memory (PSS)", "less memory (PSS)"),
        PrecisionMetric::Wall => ("slower", "faster"),
    };
    format!("{:.1}% {}", pct.abs(), if pct > 0.0 { more } else { less })
}

/// The block counts at which a rule that stops on where an interval lies looks: `min`
/// (at least 3), then each about 1.5× the one before, and `max` last. Few looks keep the
/// Bonferroni correction across them small (7 looks from 6 to 60 blocks).
pub fn planned_looks(min: u32, max: u32) -> Vec<u32> {
    let first = min.max(3);
    let last = max.max(first);
    let mut looks = vec![first];
    let mut next = first;
    loop {
        next = ((next as f64 * 1.5).ceil() as u32).max(next + 1);
        if next >= last {
            break;
        }
        looks.push(next);
    }
    if *looks.last().unwrap() != last {
        looks.push(last);
    }
    looks
}

/// The first shape check of a gate's per-block figures (in block order) that fires at
/// `level`: drift (`stats::serial::serial_check`: Mann–Kendall or a positive lag-1
/// autocorrelation), a step (`stats::trend::pettitt`), skew (any block beyond the robust
/// fence of `stats::outliers::robust_outliers`). `None` when none fires, and below 6 blocks
/// where none can tell anything.
pub fn shape_doubt(worse: &[f64], level: f64) -> Option<Doubt> {
    if worse.len() < 6 {
        return None;
    }
    if stats::serial::serial_check(worse, level).is_some_and(|c| c.fires) {
        return Some(Doubt::Drift);
    }
    if stats::trend::pettitt(worse).is_some_and(|(p, _)| p < level) {
        return Some(Doubt::Step);
    }
    if !stats::outliers::robust_outliers(worse, level).is_empty() {
        return Some(Doubt::Skew);
    }
    None
}

/// The mean of `logs` and the half-width of its t interval at `confidence`.
pub(crate) fn log_interval(logs: &[f64], confidence: f64) -> Option<(f64, f64)> {
    stats::ci::t_interval(logs, confidence).map(|(mean, _, high)| (mean, high - mean))
}

#[cfg(test)]
mod tests {
    use super::*;
    use stats::rng::SeededRng;

    fn rule(max_slowdown: f64, min: u32, max: u32) -> GateRule {
        GateRule {
            max_slowdown,
            min_blocks: min,
            max_blocks: max,
        }
    }

    #[test]
    fn looks_grow_by_half_and_end_at_the_budget() {
        assert_eq!(rule(0.03, 6, 60).looks(), vec![6, 9, 14, 21, 32, 48, 60]);
        assert_eq!(rule(0.03, 6, 6).looks(), vec![6]);
        assert_eq!(rule(0.03, 1, 4).looks(), vec![3, 4]);
        // 7 looks: each interval at 1 − 0.05/7.
        assert!((rule(0.03, 6, 60).confidence() - (1.0 - 0.05 / 7.0)).abs() < 1e-12);
    }

    /// Invalid trials left 5 pairs of 6 blocks: at the budget the gate ends inconclusive
    /// rather than waiting for a sixth pair that no block will bring; before it, it goes on.
    #[test]
    fn the_budget_is_blocks_run_not_pairs() {
        let r = rule(0.03, 3, 6);
        let straddling = [0.05, -0.02, 0.04, -0.01, 0.03];
        assert_eq!(r.decide(&straddling).verdict, GateVerdict::Continue);
        assert_eq!(
            r.decide_after(&straddling, 5).verdict,
            GateVerdict::Continue
        );
        assert_eq!(
            r.decide_after(&straddling, 6).verdict,
            GateVerdict::Inconclusive
        );
    }

    #[test]
    fn the_verdicts_follow_the_interval() {
        let r = rule(0.03, 3, 3);
        // Every block 10% worse, with a little spread: fail.
        let slow = [
            0.10_f64.ln_1p() + 0.001,
            0.10_f64.ln_1p(),
            0.10_f64.ln_1p() - 0.001,
        ];
        let d = r.decide(&slow);
        assert_eq!(d.verdict, GateVerdict::Fail, "{d:?}");
        assert!((d.factor.unwrap() - 1.10).abs() < 1e-3);
        assert!(d.low.unwrap() > 1.03);
        // Unchanged: pass.
        let same = [0.001, 0.0, -0.001];
        assert_eq!(r.decide(&same).verdict, GateVerdict::Pass);
        // At the threshold with spread, on the last look: inconclusive.
        let edge = [
            0.03_f64.ln_1p() + 0.02,
            0.03_f64.ln_1p() - 0.02,
            0.03_f64.ln_1p(),
        ];
        assert_eq!(r.decide(&edge).verdict, GateVerdict::Inconclusive);
        // Between looks: continue, however clear the figures.
        let r = rule(0.03, 6, 60);
        assert_eq!(r.decide(&[0.5; 7]).verdict, GateVerdict::Continue);
        assert_eq!(r.decide(&[0.5; 6]).verdict, GateVerdict::Fail);
    }

    /// One block's figure: the true log slowdown plus noise of standard deviation `sd`,
    /// normal or t with 3 degrees of freedom scaled to the same sd.
    fn noise(rng: &mut SeededRng, sd: f64, heavy: bool) -> f64 {
        let z = rng.standard_normal();
        if !heavy {
            return sd * z;
        }
        let chi2: f64 = (0..3).map(|_| rng.standard_normal().powi(2)).sum();
        // t₃ has variance 3: scaled to unit variance.
        sd * z / (chi2 / 3.0).sqrt() / 3f64.sqrt()
    }

    struct Rates {
        pass: f64,
        fail: f64,
        inconclusive: f64,
        median_blocks: f64,
    }

    fn simulate(r: &GateRule, slowdown: f64, sd: f64, heavy: bool, runs: u32, seed: u64) -> Rates {
        let mut rng = SeededRng::new(seed);
        let (mut pass, mut fail, mut inconclusive) = (0, 0, 0);
        let mut blocks = Vec::new();
        let truth = slowdown.ln_1p();
        for _ in 0..runs {
            let d = r.run(|| truth + noise(&mut rng, sd, heavy));
            match d.verdict {
                GateVerdict::Pass => pass += 1,
                GateVerdict::Fail => fail += 1,
                GateVerdict::Inconclusive => inconclusive += 1,
                GateVerdict::Continue => unreachable!(),
            }
            blocks.push(d.blocks as f64);
        }
        let n = runs as f64;
        Rates {
            pass: pass as f64 / n,
            fail: fail as f64 / n,
            inconclusive: inconclusive as f64 / n,
            median_blocks: stats::summary::quantile(&blocks, 0.5),
        }
    }

    /// False alarms: a head exactly at the threshold (the hardest case: any more and
    /// failing is right) or unchanged must fail at most α/2 = 2.5% of the time, here with
    /// a margin for 4000 simulated gates (3 standard errors of 2.5%: 0.7 points). Under
    /// the noise of docs/PRECISION.md (sd of a block's log ratio 0.01 to 0.05).
    #[test]
    fn false_alarms_stay_below_alpha_half_with_normal_and_heavy_tailed_noise() {
        let r = rule(0.03, 6, 60);
        for (k, &(sd, heavy)) in [(0.01, false), (0.03, false), (0.05, false), (0.03, true)]
            .iter()
            .enumerate()
        {
            let at_threshold = simulate(&r, 0.03, sd, heavy, 4000, 11 + k as u64);
            assert!(
                at_threshold.fail <= 0.032,
                "sd {sd} heavy {heavy}: {:.4} false alarms at the threshold",
                at_threshold.fail
            );
            let unchanged = simulate(&r, 0.0, sd, heavy, 4000, 101 + k as u64);
            assert!(unchanged.fail <= 0.005, "sd {sd}: {:.4}", unchanged.fail);
            eprintln!(
                "sd {sd} heavy {heavy}: false alarms at the threshold {:.4}, unchanged {:.4}",
                at_threshold.fail, unchanged.fail
            );
        }
    }

    /// Missed regressions: a head slower than allowed (4%, 1 point past a 3% threshold)
    /// must pass at most 2.5% of the time, with the same margin.
    #[test]
    fn a_head_slower_than_allowed_passes_at_most_alpha_half() {
        let r = rule(0.03, 6, 60);
        for (k, sd) in [0.01, 0.03, 0.05].into_iter().enumerate() {
            let slower = simulate(&r, 0.04, sd, false, 4000, 211 + k as u64);
            assert!(slower.pass <= 0.032, "sd {sd}: {:.4} passed", slower.pass);
            eprintln!(
                "sd {sd}: 4% slower passed {:.4}, failed {:.4} (median {} blocks)",
                slower.pass, slower.fail, slower.median_blocks
            );
        }
    }

    /// Power and cost: with the noise of an interleaved run on this 2-CPU VM (sd 0.03), an
    /// unchanged head passes a 3% gate and a 10% slower head fails it, nearly always and
    /// within the budget; the figures of docs/methodology.md.
    #[test]
    fn clear_answers_come_within_the_budget() {
        let r = rule(0.03, 6, 60);
        let unchanged = simulate(&r, 0.0, 0.03, false, 2000, 307);
        assert!(unchanged.pass >= 0.95, "passed {:.3}", unchanged.pass);
        let slow = simulate(&r, 0.10, 0.03, false, 2000, 311);
        assert!(slow.fail >= 0.99, "failed {:.3}", slow.fail);
        assert!(slow.median_blocks <= 9.0, "{}", slow.median_blocks);
        let edge = simulate(&r, 0.03, 0.03, false, 2000, 313);
        assert!(edge.inconclusive >= 0.9, "{:.3}", edge.inconclusive);
        eprintln!(
            "unchanged: pass {:.3} after a median {} blocks; 10% slower: fail {:.3} after {}; at the threshold: inconclusive {:.3}",
            unchanged.pass, unchanged.median_blocks, slow.fail, slow.median_blocks, edge.inconclusive
        );
    }
}

/// The one line a pull request reads: the direction of the report's tables, words a person
/// writes, the interval's confidence labelled.
#[cfg(test)]
mod words {
    use super::*;

    fn end(verdict: GateVerdict, metric: PrecisionMetric, f: (f64, f64, f64)) -> GateEnd {
        GateEnd {
            decision: GateDecision {
                verdict,
                blocks: 6,
                factor: Some(f.0),
                low: Some(f.1),
                high: Some(f.2),
                confidence: 0.9929,
                doubt: None,
            },
            max_slowdown: 0.03,
            metric,
        }
    }

    #[test]
    fn the_headline_says_throughput_the_way_the_table_does() {
        // The case: a cost factor 0.9754× [0.9384–1.0138] is throughput 1.0252×.
        let pass = end(
            GateVerdict::Pass,
            PrecisionMetric::Throughput,
            (0.9754, 0.9384, 1.0138),
        )
        .describe();
        assert_eq!(
            pass,
            "pass: within the allowed slowdown (at most 3.00% slower: throughput ≥ 0.9709×) with \
confidence; head/base throughput 1.0252× (2.5% faster) [0.9864–1.0656] (99.29% interval), 6 blocks"
        );
        let inconclusive = end(
            GateVerdict::Inconclusive,
            PrecisionMetric::Throughput,
            (1.175, 1.02, 1.35),
        )
        .describe();
        assert!(
            inconclusive.contains("head/base throughput 0.8511× (14.9% slower)"),
            "{inconclusive}"
        );
        let cpu = end(
            GateVerdict::Fail,
            PrecisionMetric::CpuPerRequest,
            (1.10, 1.05, 1.15),
        )
        .describe();
        assert!(
            cpu.starts_with(
                "fail: slower than allowed (at most 3.00% slower: cpu_per_request ≤ 1.0300×)"
            ),
            "{cpu}"
        );
        assert!(
            cpu.contains("(10.0% more CPU per request) [1.0500–1.1500]"),
            "{cpu}"
        );
        assert_eq!(change_words(PrecisionMetric::Wall, 0.98), "2.0% faster");
        assert_eq!(
            change_words(PrecisionMetric::Throughput, 1.0004),
            "no change"
        );
    }
}

#[cfg(test)]
pub(crate) mod simulation;
