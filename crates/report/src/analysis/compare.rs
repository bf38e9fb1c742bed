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
/// allocator run): then each side's value in a block is the geometric mean of its
/// configurations' trials there, and a block counts only when each side has a value from
/// every one of its configurations in it, so both sides always average the same mix.
/// Pairing every trial with one baseline trial instead would count blocks twice and compare
/// mismatched configurations (the audit of issue 14 found 71–100% false verdicts).
pub(super) struct BlockPairs {
    pub(super) a: Vec<f64>,
    pub(super) b: Vec<f64>,
    /// Blocks in which each side has at least one value.
    blocks_a: usize,
    blocks_b: usize,
    /// The most configurations either side holds within one run.
    configs_per_block: usize,
}

pub(super) fn pairs(
    a: &[&TrialData],
    b: &[&TrialData],
    f: impl Fn(&TrialData) -> Option<f64>,
) -> BlockPairs {
    /// Per (source, block): the side's values by configuration; and per source, the
    /// configurations the side holds.
    type ByBlock = BTreeMap<(usize, u32), BTreeMap<usize, Vec<f64>>>;
    let by_block = |side: &[&TrialData]| -> (ByBlock, BTreeMap<usize, BTreeSet<usize>>) {
        let mut blocks: ByBlock = BTreeMap::new();
        let mut configs: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
        for t in side {
            if let Some(v) = f(t) {
                blocks
                    .entry((t.source, t.block))
                    .or_default()
                    .entry(t.config_id)
                    .or_default()
                    .push(v);
                configs.entry(t.source).or_default().insert(t.config_id);
            }
        }
        (blocks, configs)
    };
    let (blocks_a, configs_a) = by_block(a);
    let (blocks_b, configs_b) = by_block(b);
    // The value of one side in one block, if every configuration of the side is there.
    let block_value = |values: &BTreeMap<usize, Vec<f64>>, configs: &BTreeSet<usize>| {
        let complete = values.len() == configs.len();
        complete.then(|| {
            let all: Vec<f64> = values.values().flatten().copied().collect();
            geometric_mean(&all)
        })
    };
    let mut out = BlockPairs {
        a: Vec::new(),
        b: Vec::new(),
        blocks_a: blocks_a.len(),
        blocks_b: blocks_b.len(),
        configs_per_block: configs_a
            .values()
            .chain(configs_b.values())
            .map(BTreeSet::len)
            .max()
            .unwrap_or(0),
    };
    for (key, values_a) in &blocks_a {
        let Some(values_b) = blocks_b.get(key) else {
            continue;
        };
        let va = block_value(values_a, &configs_a[&key.0]);
        let vb = block_value(values_b, &configs_b[&key.0]);
        if let (Some(va), Some(vb)) = (va, vb) {
            out.a.push(va);
            out.b.push(vb);
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

pub(super) fn compare(
    name: &str,
    valid: &[&TrialData],
    baseline: &str,
    base: &[&TrialData],
    m: &Metric,
    confidence: f64,
) -> Option<Comparison> {
    let value = |t: &TrialData| m.of(t);
    let pairs = pairs(valid, base, value);
    let (pa, pb) = (&pairs.a, &pairs.b);
    let a = values(valid, value);
    let b = values(base, value);
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let paired = pairs.paired();
    let (ci, test, test_name, n, n_base) = if paired {
        let ci = stats::ci::paired_ratio(pa, pb, confidence)?;
        let diffs: Vec<f64> = pa.iter().zip(pb).map(|(x, y)| x.ln() - y.ln()).collect();
        (
            ci,
            stats::ranktest::wilcoxon_signed_rank(&diffs),
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
        let diffs: Vec<f64> = pa.iter().zip(pb).map(|(x, y)| x.ln() - y.ln()).collect();
        stats::ranktest::wilcoxon_min_p(&diffs)
    } else {
        stats::ranktest::mann_whitney_min_p(&a, &b)
    };
    let log_half_width = (ci.high.ln() - ci.low.ln()) / 2.0;
    // e^h − 1, as the precision rule of adaptive runs measures it: the two agree.
    let half_width_pct = ci.half_width_pct();
    Some(Comparison {
        cohort: name.to_string(),
        baseline: baseline.to_string(),
        metric: m.name.clone(),
        higher_is_better: m.higher_is_better,
        method: if paired { "paired" } else { "unpaired" }.into(),
        n,
        n_baseline: n_base,
        configs_per_block: if paired { pairs.configs_per_block } else { 1 },
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
            format!("{} blocks allow", c.n)
        } else {
            format!("{} and {} trials allow", c.n, c.n_baseline)
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
    } else {
        format!("~ no significant difference ({interval}, {p_words})")
    };
}

/// The smallest p-value a sample allows, exactly enough to check by hand: 2/32 = 0.0625.
pub(super) fn format_min_p(q: f64) -> String {
    let text = format!("{q:.4}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}
