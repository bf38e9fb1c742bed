//! A cohort against the baseline, metric by metric: values paired by block (or not), the
//! interval of the ratio and the rank test, Holm's adjustment over the cohorts, the verdict.

use std::collections::{BTreeMap, BTreeSet};

use super::metrics::{values, Metric};
use super::{ALPHA, BOOTSTRAP_SEED, RESAMPLES};
use crate::format::{format_p, p_text};
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
}

pub(super) fn pairs(
    a: &[&TrialData],
    b: &[&TrialData],
    f: impl Fn(&TrialData) -> Option<f64>,
) -> BlockPairs {
    /// Per (source, block): the side's values by configuration.
    type ByBlock = BTreeMap<(usize, u32), BTreeMap<usize, Vec<f64>>>;
    let by_block = |side: &[&'_ TrialData]| {
        let mut blocks: ByBlock = BTreeMap::new();
        let mut configs: BTreeMap<usize, BTreeMap<usize, BTreeMap<String, String>>> =
            BTreeMap::new();
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
    };
    let (blocks_a, configs_a) = by_block(a);
    let (blocks_b, configs_b) = by_block(b);
    // Per source: each configuration's group key on each side.
    let mut group_of: BTreeMap<(usize, bool, usize), String> = BTreeMap::new();
    let mut partnered: BTreeMap<usize, BTreeSet<String>> = BTreeMap::new();
    let mut unpartnered: BTreeSet<(bool, String)> = BTreeSet::new();
    for (source, ca) in &configs_a {
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
        groups: partnered.values().map(BTreeSet::len).max().unwrap_or(0),
        unpartnered: unpartnered.into_iter().collect(),
    };
    // One side's value for one group in one block, if every configuration of the group on
    // that side is there.
    let group_value = |source: usize,
                       side: bool,
                       group: &str,
                       values: &BTreeMap<usize, Vec<f64>>,
                       configs: &BTreeMap<usize, BTreeMap<String, String>>| {
        let members: Vec<usize> = configs
            .keys()
            .copied()
            .filter(|id| group_of.get(&(source, side, *id)).map(String::as_str) == Some(group))
            .collect();
        let all: Option<Vec<f64>> = members
            .iter()
            .map(|id| values.get(id).cloned())
            .collect::<Option<Vec<Vec<f64>>>>()
            .map(|v| v.concat());
        all.map(|all| geometric_mean(&all))
    };
    for (key, values_a) in &blocks_a {
        let (source, _) = *key;
        let Some(values_b) = blocks_b.get(key) else {
            continue;
        };
        let Some(groups) = partnered.get(&source).filter(|g| !g.is_empty()) else {
            continue;
        };
        let complete: Option<Vec<(f64, f64)>> = groups
            .iter()
            .map(|group| {
                let va = group_value(source, true, group, values_a, &configs_a[&source])?;
                let vb = group_value(source, false, group, values_b, &configs_b[&source])?;
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
        }
    }
    out
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
    let mut effective_blocks = None;
    let (ci, test, test_name, n, n_base) = if paired {
        // Always the interval widened for the dependence between blocks that the series
        // shows (never narrower than t): whether a comparison is widened must not hang on a
        // check whose level depends on how many other comparisons the report holds.
        let (mean, low, high, effective) =
            stats::serial::dependent_mean_interval(&logs, confidence)?;
        widened = effective < logs.len() as f64 - 1e-9;
        effective_blocks = widened.then_some(effective);
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
        skewness,
        skew_marked: paired && stats::serial::marked_skew(&logs, shape_level).is_some(),
        lag1_autocorrelation: shape.map(|s| s.lag1),
        trend_p_value: shape.map(|s| s.trend_p),
        widened_for_dependence: widened,
        drift_found: shape.is_some_and(|s| s.fires),
        effective_blocks,
        ratio: ci.ratio,
        ci_low: ci.low,
        ci_high: ci.high,
        test: test_name.into(),
        p_value: p,
        p_adjusted: p,
        family_size: 1,
        min_p_value: min_p,
        // Without any test (every difference zero) there is nothing a test could find.
        testable: min_p.is_some_and(|q| q <= ALPHA),
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

/// Holm's step-down adjustment of the p-values of one family (one metric, every cohort
/// against the baseline): the i-th smallest of m p-values becomes
/// max over j ≤ i of min(1, (m − j + 1)·p₍ⱼ₎), which keeps the chance of any false
/// "significant" in the family at most α, where eight A/A cohorts tested one by one reach
/// 17–23%.
pub(super) fn holm_adjust(family: &mut [&mut Comparison]) {
    let p: Vec<Option<f64>> = family.iter().map(|c| c.p_value).collect();
    let (adjusted, m) = holm(&p);
    for (c, adjusted) in family.iter_mut().zip(adjusted) {
        c.p_adjusted = adjusted;
        c.family_size = m.max(1);
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

/// The decision and its words, once the family's p-values are adjusted.
pub(super) fn decide(c: &mut Comparison, m: &Metric) {
    // Holm's first step multiplies the smallest p by the family size, and no adjusted p is
    // below it: with m cohorts a comparison is testable only if m × its smallest possible p
    // can reach α (6 blocks and 3 cohorts cannot: 3 × 2/64 = 0.094).
    c.testable = c
        .min_p_value
        .is_some_and(|q| q * c.family_size as f64 <= ALPHA);
    let excludes_one = c.ci_low > 1.0 || c.ci_high < 1.0;
    c.significant = c.testable && excludes_one && c.p_adjusted.is_some_and(|p| p < ALPHA);
    let interval = format!("{:.2}× [{:.2}–{:.2}]", c.ratio, c.ci_low, c.ci_high);
    let p_words = match (c.p_value, c.p_adjusted) {
        (Some(_), Some(adjusted)) if c.family_size > 1 => {
            format!("{} (Holm, {} cohorts)", p_text(adjusted), c.family_size)
        }
        (Some(p), _) => p_text(p),
        _ => "no test".to_string(),
    };
    c.verdict = if !c.testable {
        let sample = if c.method == "paired" {
            format!("{} allow", units::count(c.n, "block"))
        } else {
            format!("{} and {} allow", c.n, units::count(c.n_baseline, "trial"))
        };
        match c.min_p_value {
            Some(q) if c.family_size > 1 && q <= ALPHA => format!(
                "too few {} to test {} cohorts: the smallest p-value {sample} is {}, {} after Holm's adjustment ({interval})",
                if c.method == "paired" { "blocks" } else { "trials" },
                c.family_size,
                format_min_p(q),
                format_min_p((q * c.family_size as f64).min(1.0))
            ),
            Some(q) => format!(
                "too few {} to test: the smallest p-value {sample} is {} ({interval})",
                if c.method == "paired" { "blocks" } else { "trials" },
                format_min_p(q)
            ),
            None => format!("~ no difference at all ({interval}, every block equal)"),
        }
    } else if c.significant {
        let pct = (c.ratio - 1.0) * 100.0;
        let words = if pct > 0.0 { &m.more } else { &m.less };
        format!(
            "{:.2}×, {:.1}% {words} [{:.2}–{:.2}], {p_words}",
            c.ratio,
            pct.abs(),
            c.ci_low,
            c.ci_high
        )
    } else if excludes_one && c.p_value.is_some_and(|p| p < ALPHA) && c.family_size > 1 {
        format!(
            "~ not significant after Holm over {} cohorts ({interval}, {}, adjusted {})",
            c.family_size,
            p_text(c.p_value.unwrap_or(1.0)),
            format_p(c.p_adjusted.unwrap_or(1.0))
        )
    } else if !excludes_one && c.p_adjusted.is_some_and(|p| p < ALPHA) {
        // Every block (or nearly) on one side, by amounts too uneven for the interval to
        // leave 1: the two halves of the rule disagree, and the words say so rather than
        // print a small p beside "no significant difference".
        format!(
            "~ not significant: the interval includes 1 though the rank test gives {p_words} (the blocks agree on the direction, not on the size) ({interval})"
        )
    } else {
        format!("~ no significant difference ({interval}, {p_words})")
    };
}

/// The smallest p-value a sample allows, exactly enough to check by hand: 2/32 = 0.0625.
pub(super) fn format_min_p(q: f64) -> String {
    let text = format!("{q:.4}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}
