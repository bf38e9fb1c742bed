//! A cohort against the baseline, metric by metric: values paired by block (or not), the
//! interval of the ratio (simultaneous over the cohorts compared on the metric) and the
//! verdict it gives, and the rank test beside it as a check.

use std::collections::{BTreeMap, BTreeSet};

use super::metrics::{values, Metric};
use super::{ALPHA, BOOTSTRAP_SEED, RESAMPLES};
use crate::input::TrialData;
use crate::model::Comparison;

/// The values of two cohorts paired by block (same run, same block), one value per side and
/// block. A cohort may hold several configurations per block (`--by allocator` on a jit ×
/// allocator run). Then the configurations are paired with their partners: within a run,
/// the matrix axes on which the two sides share a value (jit, when both sides have a yjit
/// configuration) make a group key, and each group present on both sides is compared within
/// itself, so allocator=jemalloc's yjit trials meet allocator=glibc's yjit trials. A block's
/// log ratio is the mean over the groups of their log ratios (each side's value in a group
/// being the geometric mean of its configurations' trials there), and a block counts only
/// when every group has a value from each of its configurations on both sides. A group on
/// one side only (jit=none, excluded from allocator=jemalloc or without a valid trial) has
/// no partner: it is left out and named. Pooling each side's configurations whole instead
/// compared unequal mixes (the statistics audit: a false "1.21×, p=0.002" in every run of
/// a YJIT × allocator matrix with one cell excluded), and pairing every trial with one
/// baseline trial counted blocks twice (71–100% false verdicts).
pub(super) struct BlockPairs {
    /// Per paired block, in time order (run, then block): each side's value; ln a − ln b is
    /// the block's log ratio.
    pub(super) a: Vec<f64>,
    pub(super) b: Vec<f64>,
    /// Blocks in which each side has at least one value.
    blocks_a: usize,
    blocks_b: usize,
    /// The most configurations either side holds within one run.
    pub(super) configs_per_block: usize,
    /// The groups compared within themselves (most over the runs): 1 unless pooled.
    pub(super) groups: usize,
    /// The groups without a partner: (true for side a, the group key, e.g. "jit=none").
    pub(super) unpartnered: Vec<(bool, String)>,
    /// Per paired block, where it ran: (host, kind of host and the Rubies' builds), `None`
    /// without a `host` key.
    pub(super) placed: Vec<Option<(String, String)>>,
}

/// Per (source, block): the side's values by configuration.
type ByBlock = BTreeMap<(usize, u32), BTreeMap<usize, Vec<f64>>>;
/// Per source: each configuration's matrix axes (axis → value).
type ConfigAxes = BTreeMap<usize, BTreeMap<usize, BTreeMap<String, String>>>;

/// The two cohorts' values paired by block (see [`BlockPairs`]).
pub(super) fn pairs(
    a: &[&TrialData],
    b: &[&TrialData],
    f: impl Fn(&TrialData) -> Option<f64>,
) -> BlockPairs {
    let (blocks_a, configs_a) = by_block(a, &f);
    let (blocks_b, configs_b) = by_block(b, &f);
    let placed = placements(a, b);
    let groups = Groups::of(&configs_a, &configs_b);
    let mut out = BlockPairs {
        a: Vec::new(),
        b: Vec::new(),
        blocks_a: blocks_a.len(),
        blocks_b: blocks_b.len(),
        configs_per_block: configs_a
            .values()
            .chain(configs_b.values())
            .map(BTreeMap::len)
            .max()
            .unwrap_or(0),
        groups: groups
            .partnered
            .values()
            .map(BTreeSet::len)
            .max()
            .unwrap_or(0),
        unpartnered: groups.unpartnered.iter().cloned().collect(),
        placed: Vec::new(),
    };
    for (key, values_a) in &blocks_a {
        let (source, _) = *key;
        let Some(values_b) = blocks_b.get(key) else {
            continue;
        };
        let Some(partnered) = groups.partnered.get(&source).filter(|g| !g.is_empty()) else {
            continue;
        };
        let complete: Option<Vec<(f64, f64)>> = partnered
            .iter()
            .map(|group| {
                let va = groups.value(source, true, group, values_a, &configs_a[&source])?;
                let vb = groups.value(source, false, group, values_b, &configs_b[&source])?;
                Some((va, vb))
            })
            .collect();
        if let Some(values) = complete {
            // The geometric means over the groups: ln a − ln b is the mean of the groups'
            // log ratios (0 stays 0, and then no ratio is computed from the block).
            let a: Vec<f64> = values.iter().map(|v| v.0).collect();
            let b: Vec<f64> = values.iter().map(|v| v.1).collect();
            out.a.push(geometric_mean(&a));
            out.b.push(geometric_mean(&b));
            out.placed.push(placed.get(key).map(|(host, kind, rubies)| {
                let mut kind = kind.clone();
                for ruby in rubies {
                    kind.push_str(" · ");
                    kind.push_str(ruby);
                }
                (host.clone(), kind)
            }));
        }
    }
    out
}

/// One side's values of `f` per block and configuration, and per source each of its
/// configurations' matrix axes.
fn by_block(side: &[&TrialData], f: &impl Fn(&TrialData) -> Option<f64>) -> (ByBlock, ConfigAxes) {
    let mut blocks: ByBlock = BTreeMap::new();
    let mut configs: ConfigAxes = BTreeMap::new();
    for t in side {
        if let Some(v) = f(t) {
            blocks
                .entry((t.source, t.block))
                .or_default()
                .entry(t.config_id)
                .or_default()
                .push(v);
            configs
                .entry(t.source)
                .or_default()
                .entry(t.config_id)
                .or_insert_with(|| t.axes.clone());
        }
    }
    (blocks, configs)
}

/// Per (source, block) of either side: the host it ran on, the kind of host, and the
/// builds of the Rubies its trials ran.
fn placements(
    a: &[&TrialData],
    b: &[&TrialData],
) -> BTreeMap<(usize, u32), (String, String, BTreeSet<String>)> {
    // Where each block ran, and the builds of the Rubies its trials ran (part of the kind:
    // the same CPU with another build of a Ruby is another kind).
    let mut placed: BTreeMap<(usize, u32), (String, String, BTreeSet<String>)> = BTreeMap::new();
    for t in a.iter().chain(b) {
        if let Some((host, kind)) = super::hosts::placement(t) {
            let entry = placed
                .entry((t.source, t.block))
                .or_insert_with(|| (host, kind, BTreeSet::new()));
            entry.2.extend(t.keys.get("ruby_description").cloned());
        }
    }
    placed
}

/// The groups the two sides' configurations are paired in, per source.
struct Groups {
    /// Per (source, side a?, configuration): its group key.
    group_of: BTreeMap<(usize, bool, usize), String>,
    /// Per source: the groups on both sides.
    partnered: BTreeMap<usize, BTreeSet<String>>,
    /// The groups on one side only: (true for side a, the group key).
    unpartnered: BTreeSet<(bool, String)>,
}

impl Groups {
    /// Each configuration's group key on each side, per source: its values on the axes
    /// on which the sides share a value.
    fn of(configs_a: &ConfigAxes, configs_b: &ConfigAxes) -> Groups {
        // Per source: each configuration's group key on each side.
        let mut group_of: BTreeMap<(usize, bool, usize), String> = BTreeMap::new();
        let mut partnered: BTreeMap<usize, BTreeSet<String>> = BTreeMap::new();
        let mut unpartnered: BTreeSet<(bool, String)> = BTreeSet::new();
        for (source, ca) in configs_a {
            let Some(cb) = configs_b.get(source) else {
                continue;
            };
            let values = |side: &BTreeMap<usize, BTreeMap<String, String>>, axis: &str| {
                side.values()
                    .filter_map(|axes| axes.get(axis).cloned())
                    .collect::<BTreeSet<String>>()
            };
            let axes: BTreeSet<&String> = ca
                .values()
                .chain(cb.values())
                .flat_map(|x| x.keys())
                .collect();
            // The axes on which the sides share a value: the "other axes" a pair agrees on.
            let shared: Vec<&String> = axes
                .into_iter()
                .filter(|axis| !values(ca, axis).is_disjoint(&values(cb, axis)))
                .collect();
            let key = |axes: &BTreeMap<String, String>| {
                shared
                    .iter()
                    .map(|k| format!("{k}={}", axes.get(*k).map(String::as_str).unwrap_or("-")))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            let keys_a: BTreeSet<String> = ca.values().map(&key).collect();
            let keys_b: BTreeSet<String> = cb.values().map(&key).collect();
            for (side, configs) in [(true, ca), (false, cb)] {
                for (id, axes) in configs {
                    group_of.insert((*source, side, *id), key(axes));
                }
            }
            partnered.insert(*source, keys_a.intersection(&keys_b).cloned().collect());
            unpartnered.extend(keys_a.difference(&keys_b).map(|k| (true, k.clone())));
            unpartnered.extend(keys_b.difference(&keys_a).map(|k| (false, k.clone())));
        }
        Groups {
            group_of,
            partnered,
            unpartnered,
        }
    }

    /// One side's value for one group in one block, if every configuration of the group on
    /// that side is there.
    fn value(
        &self,
        source: usize,
        side: bool,
        group: &str,
        values: &BTreeMap<usize, Vec<f64>>,
        configs: &BTreeMap<usize, BTreeMap<String, String>>,
    ) -> Option<f64> {
        let members: Vec<usize> = configs
            .keys()
            .copied()
            .filter(|id| self.group_of.get(&(source, side, *id)).map(String::as_str) == Some(group))
            .collect();
        let all: Option<Vec<f64>> = members
            .iter()
            .map(|id| values.get(id).cloned())
            .collect::<Option<Vec<Vec<f64>>>>()
            .map(|v| v.concat());
        all.map(|all| geometric_mean(&all))
    }
}

impl BlockPairs {
    /// Whether the comparison is paired: at least 2 blocks pair up, and most of them do
    /// (the blocked design); unpaired otherwise.
    pub(super) fn paired(&self) -> bool {
        self.a.len() >= 2 && self.a.len() * 2 >= self.blocks_a.max(self.blocks_b)
    }
}

/// exp(mean ln x); 0 when any value is 0 (then no ratio is computed from it).
fn geometric_mean(x: &[f64]) -> f64 {
    if x.len() == 1 {
        return x[0];
    }
    if x.iter().any(|v| *v <= 0.0) {
        return 0.0;
    }
    (x.iter().map(|v| v.ln()).sum::<f64>() / x.len() as f64).exp()
}

/// The level at which the per-block log ratios' shape (trend, lag-1 dependence, skew) of
/// one metric is judged: the main metric (throughput, or a script's wall time) at α over
/// the comparisons, as the drift test always was; each other metric at α over the
/// comparisons and the metrics (Bonferroni), so the other metrics add at most α to a clean
/// report's chance of a `drift` or `skewed-ratios` warning.
pub(super) fn shape_level(comparisons: usize, metrics: usize, main: bool) -> f64 {
    let per_comparison = ALPHA / comparisons.max(1) as f64;
    if main {
        per_comparison
    } else {
        per_comparison / metrics.max(1) as f64
    }
}

/// One cohort against the baseline on metric `m`, its interval at `confidence` (already the
/// simultaneous one of [`stats::simultaneous_confidence`]).
pub(super) fn compare(
    name: &str,
    valid: &[&TrialData],
    baseline: &str,
    base: &[&TrialData],
    m: &Metric,
    confidence: f64,
    shape_level: f64,
) -> Option<Comparison> {
    let value = |t: &TrialData| m.of(t);
    let pairs = pairs(valid, base, value);
    let (pa, pb) = (&pairs.a, &pairs.b);
    let a = values(valid, value);
    let b = values(base, value);
    if a.is_empty() || b.is_empty() {
        return None;
    }
    // Pooled sides with no pair of configurations agreeing on the other axes: refuse, as
    // pooling them whole would compare unequal mixes.
    if pairs.groups == 0 && !pairs.unpartnered.is_empty() {
        return None;
    }
    let paired = pairs.paired();
    let logs: Vec<f64> = pa.iter().zip(pb).map(|(x, y)| x.ln() - y.ln()).collect();
    let shape = paired
        .then(|| stats::serial::serial_check(&logs, shape_level))
        .flatten();
    let mut widened = false;
    let mut doubled = false;
    let mut effective_blocks = None;
    let mut by_kind = Vec::new();
    let (ci, test, test_name, n, n_base) = if paired {
        // Always the interval widened for the dependence between blocks that the series
        // shows (never narrower than t), and doubled when its own blocks drift (the check
        // at a fixed level): how wide a comparison's interval is must not hang on a check
        // whose level depends on how many other comparisons the report holds.
        let reported = stats::serial::reported_interval(&logs, confidence)?;
        widened = reported.effective_n < logs.len() as f64 - 1e-9;
        doubled = reported.doubled;
        effective_blocks = widened.then_some(reported.effective_n);
        let (kinds, headline) = by_host_kind(&logs, &pairs.placed, confidence);
        by_kind = kinds;
        // Kinds weighed equally: the same doubling when the blocks drift.
        let widen = if doubled {
            stats::serial::WIDEN_ON_DOUBT
        } else {
            1.0
        };
        let (mean, low, high) = headline
            .map(|(m, lo, hi)| (m, m - widen * (m - lo), m + widen * (hi - m)))
            .unwrap_or((reported.mean, reported.low, reported.high));
        let ci = stats::RatioCi {
            ratio: mean.exp(),
            low: low.exp(),
            high: high.exp(),
            method: if widened {
                "paired-ar1-widened"
            } else {
                stats::ci::PAIRED_T_LOG
            },
            n: logs.len(),
        };
        (
            ci,
            stats::ranktest::wilcoxon_signed_rank(&logs),
            "wilcoxon-signed-rank",
            pa.len(),
            pb.len(),
        )
    } else {
        let ci = stats::ci::unpaired_ratio(&a, &b, confidence, RESAMPLES, BOOTSTRAP_SEED)?;
        (
            ci,
            stats::ranktest::mann_whitney_u(&a, &b),
            "mann-whitney-u",
            a.len(),
            b.len(),
        )
    };
    let p = test.map(|t| t.p_value);
    let min_p = if paired {
        stats::ranktest::wilcoxon_min_p(&logs)
    } else {
        stats::ranktest::mann_whitney_min_p(&a, &b)
    };
    let log_half_width = (ci.high.ln() - ci.low.ln()) / 2.0;
    // e^h − 1, as the precision rule of adaptive runs measures it: the two agree.
    let half_width_pct = ci.half_width_pct();
    let skewness = if paired {
        stats::serial::skewness(&logs)
    } else {
        None
    };
    let describe = |(side_a, key): &(bool, String)| {
        let side = if *side_a { name } else { baseline };
        if key.is_empty() {
            format!("{side} only")
        } else {
            format!("{key} ({side} only)")
        }
    };
    Some(Comparison {
        cohort: name.to_string(),
        baseline: baseline.to_string(),
        metric: m.name.clone(),
        higher_is_better: m.higher_is_better,
        method: if paired { "paired" } else { "unpaired" }.into(),
        n,
        n_baseline: n_base,
        configs_per_block: if paired { pairs.configs_per_block } else { 1 },
        groups: if paired { pairs.groups.max(1) } else { 1 },
        unpartnered: pairs.unpartnered.iter().map(describe).collect(),
        by_host_kind: by_kind,
        skewness,
        skew_marked: paired && stats::serial::marked_skew(&logs, shape_level).is_some(),
        lag1_autocorrelation: shape.map(|s| s.lag1),
        trend_p_value: shape.map(|s| s.trend_p),
        widened_for_dependence: widened,
        doubled_for_drift: doubled,
        drift_found: shape.is_some_and(|s| s.fires),
        effective_blocks,
        ratio: ci.ratio,
        ci_low: ci.low,
        ci_high: ci.high,
        test: test_name.into(),
        confidence,
        p_value: p,
        p_adjusted: p,
        family_size: 1,
        min_p_value: min_p,
        testable: false,
        significant: false,
        verdict: String::new(),
        half_width_pct,
        needed_for_1pct: stats::advice::blocks_for_log_half_width(
            log_half_width,
            n.min(n_base),
            0.01,
            confidence,
        ),
    })
}

/// A comparison's blocks by the kind of host they ran on (issue 47: a fleet's pooled ratio
/// weighted each kind by how many blocks its nodes finished, so YJIT at 1.3× on fast nodes
/// and 1.1× on nodes 3× slower read as the fast nodes' effect, and its interval covered the
/// hosts-equal 1.196× in 1% of runs at 40 blocks). Each kind's interval is the
/// dependence-widened one of its own blocks; with two or more kinds of 2 blocks or more, the
/// headline `(mean, low, high)` of the log ratio weights those kinds equally
/// ([`stats::equal_weight_strata`]). One kind (or none): no headline, the pooled interval
/// stands.
fn by_host_kind(
    logs: &[f64],
    placed: &[Option<(String, String)>],
    confidence: f64,
) -> (Vec<crate::model::HostKindRatio>, Option<(f64, f64, f64)>) {
    let mut kinds: BTreeMap<&str, (BTreeSet<&str>, Vec<f64>)> = BTreeMap::new();
    for (log, place) in logs.iter().zip(placed) {
        let Some((host, kind)) = place else {
            return (Vec::new(), None);
        };
        let entry = kinds.entry(kind.as_str()).or_default();
        entry.0.insert(host.as_str());
        entry.1.push(*log);
    }
    if kinds.len() < 2 {
        return (Vec::new(), None);
    }
    let mut rows = Vec::new();
    let mut strata = Vec::new();
    for (kind, (hosts, x)) in &kinds {
        let mean = x.iter().sum::<f64>() / x.len() as f64;
        let interval = stats::serial::dependent_mean_interval(x, confidence);
        if let Some((m, se, effective)) =
            stats::serial::dependent_mean_se(x, stats::serial::REPORT_DEPENDENCE_MARGIN)
        {
            strata.push(stats::Stratum {
                mean: m,
                se,
                df: (effective - 1.0).floor().max(1.0),
            });
        }
        rows.push(crate::model::HostKindRatio {
            kind: kind.to_string(),
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            blocks: x.len(),
            ratio: mean.exp(),
            ci_low: interval.map(|i| i.1.exp()),
            ci_high: interval.map(|i| i.2.exp()),
            in_headline: false,
        });
    }
    let headline =
        stats::equal_weight_strata(&strata, confidence).map(|(m, lo, hi, _)| (m, lo, hi));
    if headline.is_some() {
        for row in &mut rows {
            row.in_headline = row.ci_low.is_some();
        }
    }
    (rows, headline)
}

/// Holm's step-down adjustment of the rank tests' p-values of one family (one metric,
/// every cohort against the baseline): the i-th smallest of m p-values becomes
/// max over j ≤ i of min(1, (m − j + 1)·p₍ⱼ₎). The check beside the verdicts, on the
/// family's footing: eight A/A cohorts tested one by one would show a p below 0.05 in
/// 17–23% of reports.
pub(super) fn holm_adjust(family: &mut [&mut Comparison]) {
    let p: Vec<Option<f64>> = family.iter().map(|c| c.p_value).collect();
    let (adjusted, _) = holm(&p);
    for (c, adjusted) in family.iter_mut().zip(adjusted) {
        c.p_adjusted = adjusted;
    }
}

/// Holm's step-down adjustment of a family of p-values (those that are `None` are not
/// tested and stay `None`), and the family's size m.
pub(super) fn holm(p: &[Option<f64>]) -> (Vec<Option<f64>>, usize) {
    let mut order: Vec<usize> = (0..p.len()).filter(|&i| p[i].is_some()).collect();
    let m = order.len();
    order.sort_by(|&i, &j| p[i].unwrap().total_cmp(&p[j].unwrap()));
    let mut adjusted = vec![None; p.len()];
    let mut running: f64 = 0.0;
    for (rank, &i) in order.iter().enumerate() {
        let scaled = ((m - rank) as f64 * p[i].unwrap()).min(1.0);
        running = running.max(scaled);
        adjusted[i] = Some(running);
    }
    (adjusted, m)
}

/// The decision and its words, read off the interval shown: "significant" exactly when
/// the interval (simultaneous over the family, [`stats::simultaneous_confidence`]) excludes 1, so
/// the words and the figures a reader sees cannot disagree. The rank test's p-value (and
/// its Holm adjustment over the family) stays beside it as a check on a skewed or
/// dependent series, in the JSON and the HTML, and never decides: a "~ no significant
/// difference" next to an interval that excludes 1 (a real YJIT run read so after 6 blocks)
/// left a reader nothing to act on.
///
/// Blocks that drift together so much that fewer than [`stats::serial::MIN_EFFECTIVE_BLOCKS`]
/// of them count as independent leave the interval one degree of freedom (Cauchy tails:
/// the demo's 7 blocks at lag-1 0.41 gave "[0.00–328.59]"). Unless even that interval
/// excludes 1 ([`Comparison::too_dependent_to_tell`]), the verdict is "? cannot tell" with
/// the reason, and the comparison is not `testable`: a "no significant difference" over
/// such an interval reads as "the same".
pub(super) fn decide(c: &mut Comparison, m: &Metric) {
    let finite = c.ci_low.is_finite() && c.ci_high.is_finite() && c.ci_low > 0.0;
    let excludes_one = c.ci_low > 1.0 || c.ci_high < 1.0;
    c.significant = finite && excludes_one;
    c.testable = finite && !c.too_dependent_to_tell();
    if let Some(effective) = c.effective_blocks.filter(|_| finite && !c.testable) {
        let lag1 = c
            .lag1_autocorrelation
            .map(|r| format!(" (lag-1 autocorrelation {r:.2})"))
            .unwrap_or_default();
        c.verdict = format!(
            "? cannot tell: {} that drift together{lag1} count as {effective:.1} independent ones, too few for an interval (it needs {:.0}); run more blocks",
            units::count(c.n, "block"),
            stats::serial::MIN_EFFECTIVE_BLOCKS,
        );
        return;
    }
    let mut level = if c.family_size > 1 {
        format!(
            ", {} interval, simultaneous over {} cohorts",
            crate::format::confidence_text(c.confidence),
            c.family_size
        )
    } else {
        String::new()
    };
    if c.doubled_for_drift {
        level.push_str(", doubled: the blocks' ratios drift");
    }
    let interval = format!("{:.2}× [{:.2}–{:.2}]{level}", c.ratio, c.ci_low, c.ci_high);
    let kinds = host_kind_words(c);
    c.verdict = if c.ci_low == 1.0 && c.ci_high == 1.0 {
        format!("~ no difference at all ({interval}, every block equal)")
    } else if c.significant {
        let pct = (c.ratio - 1.0) * 100.0;
        let words = if pct > 0.0 { &m.more } else { &m.less };
        format!(
            "{:.2}×, {:.1}% {words} [{:.2}–{:.2}]{level}",
            c.ratio,
            pct.abs(),
            c.ci_low,
            c.ci_high
        )
    } else {
        format!("~ no significant difference ({interval})")
    };
    c.verdict.push_str(&kinds);
}

/// The kinds of host of a comparison over several, for its verdict: each kind's hosts,
/// ratio, interval and blocks, and whether the ratio before weights them equally (the
/// headline) or pools the blocks (fewer than two kinds with 2 blocks).
fn host_kind_words(c: &Comparison) -> String {
    if c.by_host_kind.is_empty() {
        return String::new();
    }
    let each: Vec<String> = c
        .by_host_kind
        .iter()
        .map(|k| {
            let interval = match (k.ci_low, k.ci_high) {
                (Some(lo), Some(hi)) => format!(" [{lo:.2}–{hi:.2}]"),
                _ => String::new(),
            };
            format!(
                "{} {:.2}×{interval} over {}",
                k.hosts.join(", "),
                k.ratio,
                units::count(k.blocks, "block")
            )
        })
        .collect();
    let how = if c.by_host_kind.iter().any(|k| k.in_headline) {
        "kinds of host weighted equally in that ratio"
    } else {
        "the blocks pooled: fewer than two kinds of host have 2 blocks"
    };
    format!("; {how}: {}", each.join("; "))
}
