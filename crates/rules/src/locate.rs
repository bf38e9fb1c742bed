//! Where in a history a change in cost lies: the model the k-section search of
//! `rubyrace bisect` decides with (issue 48).
//!
//! Every block measures a few commits side by side (the ends of the range and up to six
//! candidates). One server's log cost in block `b` is `y = β_b + μ_c + ε`: the block's own
//! level `β_b` (the machine that second) cancels within the block, so every block that
//! measured two commits of the range says something about their difference, whichever round
//! it came from. A single change at commit τ (the first bad commit) means `μ_c = δ·[c ≥ τ]`.
//! For each τ the least-squares fit with a fixed effect per block leaves a residual sum of
//! squares RSS_τ; with flat priors on the block levels and δ, and p(σ) ∝ 1/σ, the marginal
//! likelihood of τ is `(Σz̃²)^(−1/2) · RSS_τ^(−(N−B−1)/2)` (z̃: the indicator [c ≥ τ]
//! centred within blocks), and with a uniform prior over the commits that is the posterior
//! [`Located::p`]. It uses every block, gives a probability per commit, and leaves commits
//! that were never measured (or do not boot) sharing the mass of their neighbours.
//!
//! [`Search`] is the whole search: where to measure next (the posterior's quantiles, so
//! that each candidate splits the remaining probability evenly: probabilistic bisection,
//! Waeber, Frazier & Henderson 2013, with k candidates at once), when to name a commit (it
//! holds 95% of the posterior *and* the blocks that measured it beside the commit before
//! it show the step on their own, widened for dependence), and what is left (the parts of
//! the range on either side of a named commit must each show no change of the search's
//! smallest size, or be searched in turn: a second change is found, never silently
//! dropped). A search that runs out of blocks ends with the smallest range holding 95% of
//! the posterior, said as such, and [`Search::blocks_to_settle`] says how many more blocks
//! would place the change, from the spread measured. Seeded simulations in `simulation`
//! (the tests) measure it beside the step-by-step rule of `bisect`.

use std::collections::{BTreeMap, BTreeSet};

use stats::rng::SeededRng;

/// One server's figure in one block: the commit (0 = good … n = bad) and its log cost
/// (larger is worse: −ln throughput, or ln of any other metric).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measure {
    pub block: u32,
    pub commit: usize,
    pub log_cost: f64,
}

/// The location of one change in the commits `lo..=hi`, from every block that measured two
/// of them.
#[derive(Clone, Debug, PartialEq)]
pub struct Located {
    pub lo: usize,
    pub hi: usize,
    /// `p[i]`: the probability that commit `lo + 1 + i` is the first bad one.
    pub p: Vec<f64>,
    /// The most probable first bad commit.
    pub map: usize,
    /// The step in log cost at `map` (positive: slower).
    pub step: f64,
    /// One server's residual standard deviation, and its degrees of freedom.
    pub sigma: f64,
    pub df: usize,
    /// Blocks that measured two commits of the range.
    pub blocks: usize,
}

impl Located {
    /// The probability that `commit` is the first bad one.
    pub fn probability(&self, commit: usize) -> f64 {
        if commit <= self.lo || commit > self.hi {
            return 0.0;
        }
        self.p[commit - self.lo - 1]
    }

    /// The smallest run of consecutive commits whose probabilities add up to at least
    /// `mass`: (first, last, their probability).
    pub fn smallest_range(&self, mass: f64) -> (usize, usize, f64) {
        let n = self.p.len();
        let mut best = (self.lo + 1, self.hi, 1.0);
        let mut best_len = n + 1;
        for i in 0..n {
            let mut sum = 0.0;
            for j in i..n {
                sum += self.p[j];
                if sum >= mass - 1e-12 {
                    let len = j - i + 1;
                    if len < best_len || (len == best_len && sum > best.2) {
                        best = (self.lo + 1 + i, self.lo + 1 + j, sum.min(1.0));
                        best_len = len;
                    }
                    break;
                }
            }
        }
        best
    }

    /// The probability that the first bad commit is `commit` or before it.
    fn below_or_at(&self, commit: usize) -> f64 {
        (self.lo + 1..=commit.min(self.hi))
            .map(|c| self.probability(c))
            .sum()
    }
}

/// The one-change model fitted to the blocks' figures of commits `lo..=hi`. `None` when no
/// block measured two of them, or too few figures are left to estimate the spread.
pub fn locate(measures: &[Measure], lo: usize, hi: usize) -> Option<Located> {
    if hi <= lo {
        return None;
    }
    let mut blocks: BTreeMap<u32, Vec<(usize, f64)>> = BTreeMap::new();
    for m in measures.iter().filter(|m| (lo..=hi).contains(&m.commit)) {
        blocks
            .entry(m.block)
            .or_default()
            .push((m.commit, m.log_cost));
    }
    blocks.retain(|_, v| v.len() >= 2);
    let n: usize = blocks.values().map(Vec::len).sum();
    let b = blocks.len();
    let df = n.checked_sub(b + 1).filter(|df| *df >= 1)?;
    let means: Vec<f64> = blocks
        .values()
        .map(|v| v.iter().map(|x| x.1).sum::<f64>() / v.len() as f64)
        .collect();
    let total: f64 = blocks
        .values()
        .zip(&means)
        .map(|(v, m)| v.iter().map(|x| (x.1 - m).powi(2)).sum::<f64>())
        .sum();
    // Per τ: Σ z̃ỹ and Σ z̃² over the blocks, z = [commit ≥ τ].
    let fits: Vec<(f64, f64)> = (lo + 1..=hi)
        .map(|tau| {
            let (mut sxz, mut szz) = (0.0, 0.0);
            for (v, mean) in blocks.values().zip(&means) {
                let after: Vec<f64> = v.iter().filter(|x| x.0 >= tau).map(|x| x.1).collect();
                let (k, m) = (after.len() as f64, v.len() as f64);
                sxz += after.iter().sum::<f64>() - k * mean;
                szz += k * (m - k) / m;
            }
            (sxz, szz)
        })
        .collect();
    let some_szz = fits.iter().map(|f| f.1).fold(0.0, f64::max);
    if some_szz <= 0.0 {
        return None;
    }
    let floor = total * 1e-12 + f64::MIN_POSITIVE;
    let log_likelihood: Vec<f64> = fits
        .iter()
        .map(|&(sxz, szz)| {
            // A change no block straddles explains nothing: the no-step fit, and the
            // Occam factor of a typical straddle.
            let (rss, szz) = if szz > 0.0 {
                (total - sxz * sxz / szz, szz)
            } else {
                (total, some_szz)
            };
            -0.5 * szz.ln() - 0.5 * df as f64 * rss.max(floor).ln()
        })
        .collect();
    let top = log_likelihood
        .iter()
        .cloned()
        .fold(f64::NEG_INFINITY, f64::max);
    let weights: Vec<f64> = log_likelihood.iter().map(|l| (l - top).exp()).collect();
    let sum: f64 = weights.iter().sum();
    let p: Vec<f64> = weights.iter().map(|w| w / sum).collect();
    let best = (0..p.len())
        .max_by(|&i, &j| p[i].total_cmp(&p[j]).then(j.cmp(&i)))
        .unwrap();
    let (sxz, szz) = fits[best];
    let step = if szz > 0.0 { sxz / szz } else { 0.0 };
    let rss = if szz > 0.0 {
        total - sxz * sxz / szz
    } else {
        total
    };
    Some(Located {
        lo,
        hi,
        p,
        map: lo + 1 + best,
        step,
        sigma: (rss.max(0.0) / df as f64).sqrt(),
        df,
        blocks: b,
    })
}

/// How far the search's intervals widen for dependence between blocks: the gate's margin
/// (one standard error of the lag-1 autocorrelation below its estimate), not the reports'
/// half. With a handful of blocks, r₁ is mostly noise, and at the reports' margin a
/// real search's ends at 5 blocks of a 4% spread had an interval from 0.01× to 131× (the
/// effective n fell to 2): the search cannot call anything that early.
pub const LOCATE_DEPENDENCE_MARGIN: f64 = 1.0;

/// Below this many blocks the search's intervals are Student's t, not widened: a lag-1
/// autocorrelation of fewer blocks is noise, and one that happens to be large leaves
/// one degree of freedom (a real search's throughput ends at 4 blocks of a 1.7% spread
/// had an interval from 0.32× to 3.19×, while its CPU per request's, not widened, was
/// [0.97–1.09]).
pub const LOCATE_MIN_BLOCKS_TO_WIDEN: usize = 8;

/// The mean of `x` and its interval at `confidence`, widened for dependence at the
/// search's margin from [`LOCATE_MIN_BLOCKS_TO_WIDEN`] blocks on: (mean, low, high,
/// effective n).
fn interval(x: &[f64], confidence: f64) -> Option<(f64, f64, f64, f64)> {
    if x.len() < LOCATE_MIN_BLOCKS_TO_WIDEN {
        let (mean, low, high) = stats::ci::t_interval(x, confidence)?;
        return Some((mean, low, high, x.len() as f64));
    }
    stats::serial::dependent_mean_interval_beyond(x, confidence, LOCATE_DEPENDENCE_MARGIN)
}

/// Per block that measured both `a` and `b`, in block order: ln(cost of b / cost of a).
pub fn contrast(measures: &[Measure], a: usize, b: usize) -> Vec<f64> {
    let mut of: BTreeMap<u32, (Option<f64>, Option<f64>)> = BTreeMap::new();
    for m in measures {
        if m.commit == a {
            of.entry(m.block).or_default().0 = Some(m.log_cost);
        } else if m.commit == b {
            of.entry(m.block).or_default().1 = Some(m.log_cost);
        }
    }
    of.values()
        .filter_map(|(x, y)| Some(y.as_ref()? - x.as_ref()?))
        .collect()
}

/// The mean of [`contrast`] and its interval at `confidence`, widened for dependence
/// between blocks at the search's margin ([`LOCATE_DEPENDENCE_MARGIN`]): (mean, low,
/// high, blocks).
pub fn contrast_interval(
    measures: &[Measure],
    a: usize,
    b: usize,
    confidence: f64,
) -> Option<(f64, f64, f64, usize)> {
    let x = contrast(measures, a, b);
    let (mean, low, high, _) = interval(&x, confidence)?;
    Some((mean, low, high, x.len()))
}

/// The commits to measure beside the ends of `located`'s range: the first commits at which
/// the posterior's distribution function reaches 1/(k+1), 2/(k+1), … k/(k+1), so that each
/// candidate splits the probability left evenly (a skipped commit is replaced by its
/// nearest measurable neighbour). Once one commit holds most of the probability, its
/// predecessor comes with it, since only the two together show the step. Distinct and in
/// commit order; at most `k`.
pub fn candidates(located: &Located, k: usize, skipped: &BTreeSet<usize>) -> Vec<usize> {
    let (lo, hi) = (located.lo, located.hi);
    let measurable = |c: usize| c > lo && c < hi && !skipped.contains(&c);
    let mut picked = BTreeSet::new();
    if k == 0 {
        return Vec::new();
    }
    let map = located.map;
    if located.probability(map) >= 0.5 {
        for c in [map - 1, map] {
            if measurable(c) {
                picked.insert(c);
            }
        }
    }
    for j in 1..=k {
        if picked.len() >= k {
            break;
        }
        let q = j as f64 / (k + 1) as f64;
        let Some(at) = (lo + 1..hi).find(|&c| located.below_or_at(c) >= q - 1e-12) else {
            continue;
        };
        let nearest = (0..hi - lo).find_map(|d| {
            [at.checked_sub(d), Some(at + d)]
                .into_iter()
                .flatten()
                .find(|&c| measurable(c) && !picked.contains(&c))
        });
        if let Some(c) = nearest {
            picked.insert(c);
        }
    }
    picked.into_iter().collect()
}

/// What the next block measures, given the search's `planned` commits and the round
/// running (`current`, with `blocks` stored): the round goes on, whatever the plan, until it
/// has `min_blocks` blocks, unless the search has named something since it began
/// (`settled`: the parts searched changed) or one of its commits cannot be measured. A
/// plan that moves after every block would make every block a round of its own (a results
/// directory, a checkout of every commit); holding a round a few blocks costs little,
/// since every block of every round feeds the same model.
pub fn hold_round(
    planned: &[usize],
    current: Option<(&[usize], u32)>,
    settled: bool,
    skipped: &BTreeSet<usize>,
    min_blocks: u32,
) -> Vec<usize> {
    match current {
        Some((commits, blocks))
            if blocks < min_blocks && !settled && !commits.iter().any(|c| skipped.contains(c)) =>
        {
            commits.to_vec()
        }
        _ => planned.to_vec(),
    }
}

/// How many candidates a block can hold beside the two ends: at most six (eight servers
/// interleaved), fewer when `available` memory does not hold that many servers of
/// `per_server` bytes each (with a quarter kept free), and at least one.
pub fn candidates_for_memory(available: u64, per_server: u64) -> usize {
    if per_server == 0 {
        return 6;
    }
    let servers = (available as f64 * 0.75 / per_server as f64).floor() as usize;
    servers.saturating_sub(2).clamp(1, 6)
}

/// One metric's figures at the ends: per block, ln(cost at the bad end / cost at the good
/// end), and what they say.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricAtEnds<M> {
    pub metric: M,
    /// The mean per-block log cost ratio and its interval (widened for dependence).
    pub mean: f64,
    pub low: f64,
    pub high: f64,
    /// The per-block spread of the ratio.
    pub spread: f64,
    pub blocks: usize,
}

impl<M> MetricAtEnds<M> {
    /// The regression in units of its own per-block spread: what decides how many blocks a
    /// search on this metric takes (they grow as its inverse square).
    pub fn signal_to_noise(&self) -> f64 {
        if self.spread > 0.0 {
            self.mean / self.spread
        } else if self.mean > 0.0 {
            f64::INFINITY
        } else {
            0.0
        }
    }

    /// The ends show a regression on this metric: the interval lies above 0.
    pub fn shows_regression(&self) -> bool {
        self.low > 0.0
    }
}

/// Each metric's ends at `confidence`, from per-block log cost ratios (bad over good), in
/// the order given; a metric with fewer than 2 blocks is left out.
pub fn metrics_at_ends<M: Copy>(
    per_metric: &[(M, Vec<f64>)],
    confidence: f64,
) -> Vec<MetricAtEnds<M>> {
    per_metric
        .iter()
        .filter_map(|(metric, x)| {
            let (mean, low, high, _) = interval(x, confidence)?;
            let spread = stats::summary::Summary::of(x)?.sd;
            Some(MetricAtEnds {
                metric: *metric,
                mean,
                low,
                high,
                spread,
                blocks: x.len(),
            })
        })
        .collect()
}

/// The metric to search on: of those whose ends show a regression, the one whose
/// regression is largest against its per-block spread. `None` when no metric shows one.
pub fn least_noisy<M: Copy>(ends: &[MetricAtEnds<M>]) -> Option<&MetricAtEnds<M>> {
    ends.iter()
        .filter(|e| e.shows_regression())
        .max_by(|a, b| a.signal_to_noise().total_cmp(&b.signal_to_noise()))
}

/// The rule of a search: its confidence, budget, the smallest change it must not drop, and
/// how many candidates a block holds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LocateRule {
    /// A commit is named when it holds this much of the posterior (0.95).
    pub confidence: f64,
    /// Blocks for the whole search, every round included.
    pub max_blocks: u32,
    /// Blocks before the ends may say there is nothing to find (at least 3).
    pub min_blocks: u32,
    /// The smallest change (log cost) the search must account for: a part of the range
    /// left aside must show its change is smaller than this.
    pub min_change: f64,
    /// Candidates per block beside the ends (1 to 6).
    pub candidates: usize,
}

/// The level of the search's call that the ends differ: 5%, spread over the planned looks.
pub const LOCATE_ALPHA: f64 = 0.05;

/// The level of the call that a part left aside holds a change of its own, spread over
/// its planned looks (of its fresh blocks, up to its allowance): 1%, since every named
/// commit leaves up to two parts aside and a false call there sends the search after a
/// change that is not there (at 5% each, 3% of simulated searches of one change ended in
/// such a range).
pub const ASIDE_ALPHA: f64 = 0.01;

impl LocateRule {
    pub fn new(max_blocks: u32, candidates: usize) -> LocateRule {
        LocateRule {
            confidence: 0.95,
            max_blocks: max_blocks.max(3),
            min_blocks: 3,
            min_change: 0.02f64.ln_1p(),
            candidates: candidates.clamp(1, 6),
        }
    }

    /// The looks at which a call that a change exists (or not) is made, counted in the
    /// blocks that measured the pair, and the confidence of each call's interval: Bonferroni
    /// over them, as the gate's looks are.
    fn looks(&self) -> (Vec<u32>, f64) {
        let looks = crate::gate::planned_looks(self.min_blocks, self.max_blocks);
        let confidence = 1.0 - LOCATE_ALPHA / looks.len() as f64;
        (looks, confidence)
    }

    /// The looks of a part aside (counted in its fresh blocks) and the confidence of each
    /// call that it holds a change of its own: ASIDE_ALPHA spread over them.
    fn aside_looks(&self) -> (Vec<u32>, f64) {
        let looks = crate::gate::planned_looks(self.min_blocks, self.max_blocks);
        let confidence = 1.0 - ASIDE_ALPHA / looks.len() as f64;
        (looks, confidence)
    }

    /// The confidence of each call that the ends differ (Bonferroni over the planned
    /// looks): the level at which a metric's ends are said to show a regression.
    pub fn call_confidence(&self) -> f64 {
        self.looks().1
    }

    /// The confidence of a call that the ends differ on one of `metrics` metrics, before
    /// one is chosen: Bonferroni over the metrics as well as the looks, so that the chance
    /// that any of them shows a regression that is not there stays within LOCATE_ALPHA
    /// (four metrics at the looks' level alone made a flat history's search start in CI,
    /// 2026-11-28).
    pub fn call_confidence_among(&self, metrics: usize) -> f64 {
        1.0 - (1.0 - self.call_confidence()) / metrics.max(1) as f64
    }
}

/// A step's interval: ln cost against the commit before, (mean, low, high, blocks).
pub type StepInterval = (f64, f64, f64, usize);

/// What a search has concluded about one part of the history.
#[derive(Clone, Debug, PartialEq)]
pub enum Finding {
    /// The first bad commit, the probability it holds, and the step at it: ln cost
    /// against the commit before, with its interval (mean, low, high) and blocks.
    Commit {
        commit: usize,
        probability: f64,
        step: StepInterval,
    },
    /// The first bad commit is one of `first..=last`, which hold `probability` together and
    /// show the step against the commit before `first`: every commit of it but the last
    /// cannot be measured (it does not build or boot), so they cannot be told apart.
    Skipped {
        first: usize,
        last: usize,
        probability: f64,
        step: StepInterval,
    },
    /// The budget ended: the smallest range holding 95% of the posterior of the part
    /// `lo..=hi` searched, and its mass.
    Range {
        first: usize,
        last: usize,
        probability: f64,
        lo: usize,
        hi: usize,
    },
    /// A part beside a named commit that showed no change of its own in the blocks it was
    /// given, but could not be shown free of one of the smallest size searched for: a
    /// change of up to `high` (log cost) between `lo` and `hi` is not ruled out. A note,
    /// not an answer: the search does not go after it.
    Unaccounted { lo: usize, hi: usize, high: f64 },
}

/// What the search does next.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// Measure one more block of these commits (in commit order; the ends included).
    Measure(Vec<usize>),
    /// The ends show no regression (their interval), or the budget ended before they did.
    NothingToFind { exhausted: bool },
    /// Every part is settled, or the budget ended: the findings say which.
    Done,
}

/// A part of the history between a good and a bad commit, and what is known of it.
#[derive(Clone, Debug, PartialEq)]
enum Part {
    /// A range with a change in it: searched. `called_from`: a part aside whose fresh
    /// blocks (from this block on) called a change of its own; when the budget ends before
    /// a commit of it is named, the call is checked again over every fresh block, and a
    /// call that no longer holds leaves the part unaccounted for, not a change in a range.
    Search {
        lo: usize,
        hi: usize,
        called_from: Option<u32>,
    },
    /// A part left aside by a named commit: does it hold a change of its own? Whether it
    /// does is asked of the blocks from `from` on only: the blocks before chose the commit
    /// named, and with it how the ends of this part compare (a commit is named when it
    /// looks worse than the one before it), so they would find changes that are not there.
    /// It gets `allowance` fresh blocks: as many as the search took to name the commit, and
    /// at least four times the first look (12 blocks: an 8% change at a per-block spread
    /// of 3% is called by then); more, up to the budget, while their mean suggests a
    /// change of half the smallest size. Then, shown no change, it is left with what its
    /// interval allows (a change of up to its upper end, said when that is not below the
    /// smallest change searched for).
    Aside {
        lo: usize,
        hi: usize,
        from: u32,
        allowance: u32,
    },
}

/// A whole k-section search: the blocks measured so far, the commits that cannot be
/// measured, and the parts still open. Everything it decides follows from the blocks, so a
/// resumed search rebuilds it by feeding the same blocks again.
#[derive(Clone, Debug)]
pub struct Search {
    pub rule: LocateRule,
    /// The last commit (the bad end); the good end is 0.
    pub last: usize,
    pub measures: Vec<Measure>,
    pub skipped: BTreeSet<usize>,
    pub findings: Vec<Finding>,
    regression: Option<bool>,
    /// The ends' first call of a regression did not hold over every block.
    pub withdrawn: bool,
    open: Vec<Part>,
}

impl Search {
    pub fn new(rule: LocateRule, last: usize) -> Search {
        Search {
            rule,
            last,
            measures: Vec::new(),
            skipped: BTreeSet::new(),
            findings: Vec::new(),
            regression: None,
            withdrawn: false,
            open: vec![Part::Search {
                lo: 0,
                hi: last,
                called_from: None,
            }],
        }
    }

    /// The search as it stood after `blocks` (each block's figures: commit, log cost), fed
    /// one at a time with a decision after each, as the search ran: what a resumed search
    /// rebuilds from its stores. Stops early if the search ended before its last block.
    pub fn replay(
        rule: LocateRule,
        last: usize,
        skipped: impl IntoIterator<Item = usize>,
        blocks: &[Vec<(usize, f64)>],
    ) -> (Search, Next) {
        let mut search = Search::new(rule, last);
        for c in skipped {
            search.skip(c);
        }
        let mut next = search.decide();
        for figures in blocks {
            if !matches!(next, Next::Measure(_)) {
                break;
            }
            search.record(figures);
            next = search.decide();
        }
        (search, next)
    }

    /// Blocks measured so far.
    pub fn blocks(&self) -> u32 {
        self.measures
            .iter()
            .map(|m| m.block)
            .collect::<BTreeSet<_>>()
            .len() as u32
    }

    /// Adds one block's figures (commit, log cost); returns its block number.
    pub fn record(&mut self, figures: &[(usize, f64)]) -> u32 {
        let block = self.measures.iter().map(|m| m.block + 1).max().unwrap_or(0);
        self.measures
            .extend(figures.iter().map(|&(commit, log_cost)| Measure {
                block,
                commit,
                log_cost,
            }));
        block
    }

    /// A commit that cannot be measured (it does not build or boot).
    pub fn skip(&mut self, commit: usize) {
        self.skipped.insert(commit);
    }

    /// The posterior of the part being searched, if one is.
    pub fn located(&self) -> Option<Located> {
        match self.open.first()? {
            Part::Search { lo, hi, .. } => locate(&self.measures, *lo, *hi),
            Part::Aside { .. } => None,
        }
    }

    /// Decides what the blocks so far allow, and what to measure next.
    pub fn decide(&mut self) -> Next {
        let (looks, call_confidence) = self.rule.looks();
        let spent = self.blocks() >= self.rule.max_blocks;
        if self.regression.is_none() {
            let ends = contrast(&self.measures, 0, self.last);
            let n = ends.len() as u32;
            if n >= self.rule.min_blocks && (looks.contains(&n) || spent) {
                if let Some((_, low, high, _)) = interval(&ends, call_confidence) {
                    if low > 0.0 {
                        self.regression = Some(true);
                    } else if high < self.rule.min_change {
                        self.regression = Some(false);
                        return Next::NothingToFind { exhausted: false };
                    }
                }
            }
            if spent && self.regression.is_none() {
                self.regression = Some(false);
                return Next::NothingToFind { exhausted: true };
            }
        }
        if self.withdrawn || (spent && self.regression == Some(true) && !self.names_a_change()) {
            if let Some(next) = self.ends_withdrawn(call_confidence) {
                return next;
            }
        }
        if self.regression == Some(false) {
            return Next::NothingToFind { exhausted: spent };
        }
        while self.settle_one(call_confidence, spent) {}
        if self.open.is_empty() {
            return Next::Done;
        }
        // The ends of every part aside, and the first part searched with its candidates,
        // in one block of at most `candidates + 2` servers (at least one candidate).
        let mut commits = BTreeSet::new();
        for part in &self.open {
            if let Part::Aside { lo, hi, .. } = part {
                commits.extend([*lo, *hi]);
            }
        }
        if let Some(Part::Search { lo, hi, .. }) =
            self.open.iter().find(|p| matches!(p, Part::Search { .. }))
        {
            let (lo, hi) = (*lo, *hi);
            commits.extend([lo, hi]);
            let room = (self.rule.candidates + 2)
                .saturating_sub(commits.len())
                .max(1);
            let inside = match locate(&self.measures, lo, hi) {
                Some(l) => candidates(&l, room, &self.skipped),
                None => self.spread(lo, hi, room),
            };
            commits.extend(inside);
        }
        Next::Measure(commits.into_iter().collect())
    }

    /// Whether a commit (or a run of commits that cannot be measured) has been named.
    fn names_a_change(&self) -> bool {
        self.findings
            .iter()
            .any(|f| matches!(f, Finding::Commit { .. } | Finding::Skipped { .. }))
    }

    /// The ends' call, checked again over every block when the budget ends with no commit
    /// named: if they no longer show a regression, the first call was one of its α (or the
    /// machine drifted) and a range would be a guess, so there is nothing to find: below
    /// the smallest change if their interval now says so, else "could not be shown".
    fn ends_withdrawn(&mut self, call_confidence: f64) -> Option<Next> {
        let ends = contrast(&self.measures, 0, self.last);
        let (_, low, high, _) = interval(&ends, call_confidence)?;
        if low > 0.0 {
            return None;
        }
        self.regression = Some(false);
        self.withdrawn = true;
        Some(Next::NothingToFind {
            exhausted: high >= self.rule.min_change,
        })
    }

    /// Settles one open part if the blocks allow (a commit named, a part aside cleared or
    /// searched, or the budget's end said); `false` when none can be.
    fn settle_one(&mut self, call_confidence: f64, spent: bool) -> bool {
        for i in 0..self.open.len() {
            match self.open[i].clone() {
                Part::Search {
                    lo,
                    hi,
                    called_from,
                } => {
                    let located = locate(&self.measures, lo, hi);
                    if let Some((first, commit, probability, step)) = located
                        .as_ref()
                        .and_then(|l| self.named(l, call_confidence))
                    {
                        self.findings.push(if first == commit {
                            Finding::Commit {
                                commit,
                                probability,
                                step,
                            }
                        } else {
                            Finding::Skipped {
                                first,
                                last: commit,
                                probability,
                                step,
                            }
                        });
                        // The parts on either side must each be shown free of a change.
                        let from = self.blocks();
                        let allowance = from.max(4 * self.rule.min_blocks);
                        let mut aside = Vec::new();
                        if first - 1 > lo {
                            aside.push(Part::Aside {
                                lo,
                                hi: first - 1,
                                from,
                                allowance,
                            });
                        }
                        if hi > commit {
                            aside.push(Part::Aside {
                                lo: commit,
                                hi,
                                from,
                                allowance,
                            });
                        }
                        self.open.splice(i..=i, aside);
                        return true;
                    }
                    if spent {
                        if let Some(from) = called_from {
                            if let Some(high) = self.call_withdrawn(lo, hi, from, call_confidence) {
                                self.open.remove(i);
                                self.findings.push(Finding::Unaccounted { lo, hi, high });
                                return true;
                            }
                        }
                        let (first, last, probability) = match &located {
                            Some(l) => l.smallest_range(self.rule.confidence),
                            None => (lo + 1, hi, 1.0),
                        };
                        self.open.remove(i);
                        self.findings.push(Finding::Range {
                            first,
                            last,
                            probability,
                            lo,
                            hi,
                        });
                        return true;
                    }
                }
                Part::Aside {
                    lo,
                    hi,
                    from,
                    allowance,
                } => {
                    // A change is called on the fresh blocks at their planned looks (those
                    // of the whole budget), at ASIDE_ALPHA over them; once the allowance is
                    // spent (or the budget), the part is left, with its interval over every
                    // block.
                    let x = self.fresh_contrast(lo, hi, from);
                    let n = x.len() as u32;
                    let (aside_looks, aside_confidence) = self.rule.aside_looks();
                    let at_look = n >= self.rule.min_blocks && (aside_looks.contains(&n) || spent);
                    let called =
                        at_look && interval(&x, aside_confidence).is_some_and(|i| i.1 > 0.0);
                    if called {
                        self.open[i] = Part::Search {
                            lo,
                            hi,
                            called_from: Some(from),
                        };
                        return true;
                    }
                    let interval = contrast_interval(&self.measures, lo, hi, call_confidence);
                    let cleared = interval.is_some_and(|i| {
                        i.3 as u32 >= self.rule.min_blocks && i.2 < self.rule.min_change
                    });
                    if cleared {
                        self.open.remove(i);
                        return true;
                    }
                    // Past the allowance, a part whose fresh blocks suggest a change of
                    // half the smallest size (their mean) keeps its blocks until it is called,
                    // cleared or the budget ends.
                    let suggests =
                        n > 0 && x.iter().sum::<f64>() / n as f64 >= self.rule.min_change / 2.0;
                    if (n >= allowance && !suggests) || spent {
                        let high = interval.map_or(f64::INFINITY, |i| i.2);
                        self.open.remove(i);
                        self.findings.push(Finding::Unaccounted { lo, hi, high });
                        return true;
                    }
                }
            }
        }
        false
    }

    /// The per-block contrast of `hi` against `lo` in the blocks from `from` on: a part
    /// aside's fresh blocks.
    fn fresh_contrast(&self, lo: usize, hi: usize, from: u32) -> Vec<f64> {
        let fresh: Vec<Measure> = self
            .measures
            .iter()
            .filter(|m| m.block >= from)
            .copied()
            .collect();
        contrast(&fresh, lo, hi)
    }

    /// A part aside called at one of its looks, checked again over every fresh block when
    /// the budget ends with no commit of it named (as the ends' call is, in
    /// [`Self::ends_withdrawn`]): a call made at a look where the running mean stood high by
    /// chance (or the machine drifted) does not hold over them all. `Some(high)`, the upper
    /// end of the part's interval over every block, when it no longer holds: the part is
    /// then said to be unaccounted for up to that, not to hold a change.
    fn call_withdrawn(&self, lo: usize, hi: usize, from: u32, call_confidence: f64) -> Option<f64> {
        let (_, aside_confidence) = self.rule.aside_looks();
        let holds = interval(&self.fresh_contrast(lo, hi, from), aside_confidence)
            .is_some_and(|i| i.1 > 0.0);
        (!holds).then(|| {
            contrast_interval(&self.measures, lo, hi, call_confidence)
                .map_or(f64::INFINITY, |i| i.2)
        })
    }

    /// `k` measurable commits spread evenly inside (lo, hi), before any block measured
    /// the range.
    fn spread(&self, lo: usize, hi: usize, k: usize) -> Vec<usize> {
        let mut picked = BTreeSet::new();
        for j in 1..=k {
            let at = lo + ((hi - lo) as f64 * j as f64 / (k + 1) as f64).round() as usize;
            if let Some(c) = (0..hi - lo).find_map(|d| {
                [at.checked_sub(d), Some(at + d)]
                    .into_iter()
                    .flatten()
                    .find(|&c| {
                        c > lo && c < hi && !self.skipped.contains(&c) && !picked.contains(&c)
                    })
            }) {
                picked.insert(c);
            }
        }
        picked.into_iter().collect()
    }

    /// The commit the posterior names, when it holds `confidence` of it and the blocks that
    /// measured it beside the commit before it show the step on their own, at the level of
    /// the search's other calls (a posterior looked at after every block crosses 95% by
    /// chance more often than 5%): (first, commit, probability, the step's interval). When
    /// the commits just before it cannot be measured, they cannot be told from it: the run
    /// `first..=commit` is named together (first < commit), its probability summed, and the
    /// step is against the measured commit before the run.
    fn named(
        &self,
        located: &Located,
        call_confidence: f64,
    ) -> Option<(usize, usize, f64, StepInterval)> {
        if self.regression != Some(true) {
            return None;
        }
        // The most probable commit that can be measured (a skipped one ties with the
        // commit after it, and the tie goes to the lower).
        let mut commit = located.map;
        while self.skipped.contains(&commit) && commit < located.hi {
            commit += 1;
        }
        let mut first = commit;
        while first - 1 > located.lo && self.skipped.contains(&(first - 1)) {
            first -= 1;
        }
        let probability: f64 = (first..=commit).map(|c| located.probability(c)).sum();
        if probability < self.rule.confidence || self.skipped.contains(&commit) {
            return None;
        }
        let step = contrast_interval(&self.measures, first - 1, commit, call_confidence)?;
        (step.3 as u32 >= self.rule.min_blocks && step.1 > 0.0).then_some((
            first,
            commit,
            probability,
            step,
        ))
    }

    /// How many more blocks would place the change of the part being searched, with 80%
    /// and 95% probability: searches simulated forward from this one, each with a first
    /// bad commit drawn from the posterior and the step and spread fitted, until they name
    /// a commit (at most four budgets more; `None` past that).
    pub fn blocks_to_settle(&self, seed: u64, runs: u32) -> Option<(Option<u32>, Option<u32>)> {
        let located = self.located()?;
        self.settle_from(&located, self.clone(), seed, runs)
    }

    /// [`Search::blocks_to_settle`] for the part `lo..=hi` of a search that ended in a
    /// range there.
    pub fn blocks_to_settle_in(
        &self,
        lo: usize,
        hi: usize,
        seed: u64,
        runs: u32,
    ) -> Option<(Option<u32>, Option<u32>)> {
        let located = locate(&self.measures, lo, hi)?;
        let mut from = self.clone();
        from.open = vec![Part::Search {
            lo,
            hi,
            called_from: None,
        }];
        from.regression = Some(true);
        self.settle_from(&located, from, seed, runs)
    }

    fn settle_from(
        &self,
        located: &Located,
        from: Search,
        seed: u64,
        runs: u32,
    ) -> Option<(Option<u32>, Option<u32>)> {
        let mut rng = SeededRng::new(seed);
        let cap = 4 * self.rule.max_blocks.max(10);
        let mut needed: Vec<Option<u32>> = Vec::new();
        for _ in 0..runs {
            let u = rng.next_f64();
            let mut cum = 0.0;
            let tau = (located.lo + 1..=located.hi)
                .find(|&c| {
                    cum += located.probability(c);
                    cum >= u
                })
                .unwrap_or(located.hi);
            let mut sim = from.clone();
            sim.rule.max_blocks = self.blocks() + cap;
            let start = sim.findings.len();
            let before = sim.blocks();
            let mut settled = None;
            while let Next::Measure(commits) = sim.decide() {
                if sim.findings.len() > start {
                    break;
                }
                let level = rng.standard_normal();
                let figures: Vec<(usize, f64)> = commits
                    .iter()
                    .map(|&c| {
                        let mu = if c >= tau { located.step } else { 0.0 };
                        (c, level + mu + located.sigma * rng.standard_normal())
                    })
                    .collect();
                sim.record(&figures);
            }
            if let Some(Finding::Commit { .. }) = sim.findings.get(start) {
                settled = Some(sim.blocks() - before);
            }
            needed.push(settled);
        }
        needed.sort_by_key(|n| n.unwrap_or(u32::MAX));
        let at =
            |q: f64| needed[((needed.len() as f64 * q).ceil() as usize).clamp(1, needed.len()) - 1];
        Some((at(0.80), at(0.95)))
    }
}

#[cfg(test)]
mod simulation;

#[cfg(test)]
mod tests {
    use super::*;

    fn block(
        rng: &mut SeededRng,
        block: u32,
        commits: &[usize],
        tau: usize,
        step: f64,
        sd: f64,
    ) -> Vec<Measure> {
        let level = rng.standard_normal();
        commits
            .iter()
            .map(|&c| Measure {
                block,
                commit: c,
                log_cost: level + if c >= tau { step } else { 0.0 } + sd * rng.standard_normal(),
            })
            .collect()
    }

    /// Without noise the posterior is all on the true commit once it and the commit before
    /// it are measured; the step and the spread are fitted.
    #[test]
    fn a_clean_step_is_located_exactly() {
        let mut m = Vec::new();
        for b in 0..4 {
            let level = b as f64 * 0.3;
            for (c, y) in [(0, 0.0), (4, 0.0), (5, 0.1), (9, 0.1)] {
                m.push(Measure {
                    block: b,
                    commit: c,
                    log_cost: level + y + 1e-3 * ((b as usize * 7 + c) % 3) as f64,
                });
            }
        }
        let l = locate(&m, 0, 9).unwrap();
        assert_eq!(l.map, 5);
        assert!(l.probability(5) > 0.999, "{:?}", l.p);
        assert!((l.step - 0.1).abs() < 2e-3, "{}", l.step);
        assert_eq!(l.blocks, 4);
        assert_eq!(l.df, 16 - 4 - 1);
        assert!((l.p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    }

    /// Commits never measured share the probability of the commits they cannot be told
    /// from: with only 0, 3 and 9 measured and the change between 3 and 9, each of 4..=9
    /// holds the same share.
    #[test]
    fn unmeasured_commits_share_their_neighbours_probability() {
        let mut rng = SeededRng::new(5);
        let mut m = Vec::new();
        for b in 0..8 {
            m.extend(block(&mut rng, b, &[0, 3, 9], 6, 0.2, 0.01));
        }
        let l = locate(&m, 0, 9).unwrap();
        for c in 4..=9 {
            assert!((l.probability(c) - 1.0 / 6.0).abs() < 1e-3, "{:?}", l.p);
        }
        assert_eq!(l.smallest_range(0.95).0, 4);
        let picked = candidates(&l, 3, &BTreeSet::new());
        assert_eq!(picked, vec![5, 6, 8], "F reaches 1/4, 2/4, 3/4 at 5, 6, 8");
    }

    /// The posterior agrees with brute force: each τ's least-squares fit of block
    /// effects and a step, by solving the normal equations directly (here, with two
    /// commits per block, the step is the mean within-block difference).
    #[test]
    fn the_fit_matches_a_direct_least_squares() {
        let mut rng = SeededRng::new(11);
        let mut m = Vec::new();
        for b in 0..6 {
            m.extend(block(&mut rng, b, &[0, 2, 5], 3, 0.05, 0.02));
        }
        let l = locate(&m, 0, 5).unwrap();
        // τ ∈ {3,4,5} split {0,2} | {5}: the step is mean(y5 − (y0+y2)/2) ⋅ … by the
        // within-block centring: z̃ = (−1/3, −1/3, 2/3), Σz̃² = 2/3 per block.
        let mut sxz = 0.0;
        for b in 0..6 {
            let y: Vec<f64> = m
                .iter()
                .filter(|x| x.block == b)
                .map(|x| x.log_cost)
                .collect();
            sxz += y[2] - (y[0] + y[1] + y[2]) / 3.0;
        }
        let step = sxz / (6.0 * 2.0 / 3.0);
        assert!((l.step - step).abs() < 1e-12);
        assert!((l.probability(3) - l.probability(5)).abs() < 1e-12);
        assert!(l.map >= 3);
    }

    /// The metric whose regression stands out most from its spread is chosen, and one
    /// whose ends show none is never, however quiet.
    #[test]
    fn the_least_noisy_metric_that_shows_the_regression_is_chosen() {
        let mut rng = SeededRng::new(9);
        let mut series = |mean: f64, sd: f64| -> Vec<f64> {
            (0..12).map(|_| mean + sd * rng.standard_normal()).collect()
        };
        let per_metric = vec![
            ("throughput", series(0.026, 0.03)),
            ("cpu_per_request", series(0.026, 0.012)),
            ("pss_end", series(0.0, 0.001)),
        ];
        let ends = metrics_at_ends(&per_metric, 0.95);
        assert_eq!(ends.len(), 3);
        assert!(!ends[2].shows_regression());
        let chosen = least_noisy(&ends).unwrap();
        assert_eq!(chosen.metric, "cpu_per_request");
        assert!(chosen.signal_to_noise() > ends[0].signal_to_noise());
        assert!(least_noisy(&ends[2..]).is_none());
    }

    /// What would settle a search stopped early: from five blocks of a few commits, the
    /// simulated searches name a commit within some blocks more, and the 95% figure is at
    /// least the 80% one.
    #[test]
    fn blocks_to_settle_are_estimated_from_the_spread_measured() {
        let mut rng = SeededRng::new(21);
        let mut s = Search::new(LocateRule::new(60, 6), 15);
        for _ in 0..5 {
            let figures = block_figures(&mut rng, &[0, 4, 8, 12, 15], 9, 0.025, 0.02);
            s.record(&figures);
        }
        let resumed = s.clone();
        let (p80, p95) = resumed.blocks_to_settle(1, 200).unwrap();
        let (p80, p95) = (p80.unwrap(), p95.unwrap());
        assert!(p80 >= 1 && p80 <= p95 && p95 < 100, "{p80} {p95}");
    }

    #[test]
    fn memory_bounds_the_candidates() {
        assert_eq!(candidates_for_memory(16 << 30, 200 << 20), 6);
        assert_eq!(candidates_for_memory(1 << 30, 200 << 20), 1);
        assert_eq!(candidates_for_memory(2 << 30, 200 << 20), 5);
    }

    /// A search on a clean history: the ends show the regression, the candidates close
    /// in, the commit is named with its step, and both parts aside are shown free of a
    /// change.
    #[test]
    fn a_search_names_the_commit_and_clears_both_sides() {
        let mut rng = SeededRng::new(3);
        let mut s = Search::new(LocateRule::new(60, 6), 15);
        let tau = 9;
        while let Next::Measure(commits) = s.decide() {
            let block = s.blocks();
            let figures: Vec<(usize, f64)> = block_figures(&mut rng, &commits, tau, 0.025, 0.01);
            assert_eq!(s.record(&figures), block);
        }
        assert_eq!(s.findings.len(), 1, "{:?}", s.findings);
        match &s.findings[0] {
            Finding::Commit {
                commit,
                probability,
                step,
            } => {
                assert_eq!(*commit, tau);
                assert!(*probability >= 0.95);
                assert!(step.1 > 0.0 && step.1 < 0.025f64.ln_1p() && step.2 > 0.025f64.ln_1p());
            }
            other => panic!("{other:?}"),
        }
        assert!(s.blocks() < 30, "{} blocks", s.blocks());
    }

    /// The ends' call is checked again when the budget ends with no commit named: a flat
    /// history whose ends alone were measured in five blocks with the bad end 12% slow (as
    /// CI's latency_p99 was in a flat history's first four blocks, 2026-11-28) starts a
    /// search, and ends with nothing to find, never a range; a real change the budget
    /// cannot place keeps its range.
    #[test]
    fn an_ends_call_that_does_not_hold_is_withdrawn_at_the_budgets_end() {
        let mut rng = SeededRng::new(17);
        let rule = LocateRule {
            min_change: 0.15f64.ln_1p(),
            ..LocateRule::new(30, 6)
        };
        let mut s = Search::new(rule, 19);
        // Five blocks of the ends alone, the bad end 12% slow in each (the machine drifted,
        // or the metric's tail jumped); then the blocks the search asks for, all flat.
        for _ in 0..5 {
            let figures: Vec<(usize, f64)> = block_figures(&mut rng, &[0, 19], 99, 0.0, 0.01)
                .into_iter()
                .map(|(c, x)| (c, if c == 19 { x + 0.12f64.ln_1p() } else { x }))
                .collect();
            s.record(&figures);
        }
        assert!(matches!(s.decide(), Next::Measure(_)));
        assert_eq!(s.regression, Some(true), "the ends' call started a search");
        while let Next::Measure(commits) = s.decide() {
            s.record(&block_figures(&mut rng, &commits, 99, 0.0, 0.01));
        }
        // Below the smallest change, or not shown either way: as the ends now say.
        let (_, low, high, _) =
            interval(&contrast(&s.measures, 0, 19), s.rule.call_confidence()).unwrap();
        assert!(low <= 0.0, "{low}");
        let exhausted = high >= s.rule.min_change;
        assert_eq!(s.decide(), Next::NothingToFind { exhausted });
        assert!(s.withdrawn && s.findings.is_empty(), "{:?}", s.findings);
        assert_eq!(s.blocks(), 30);

        // A 10% change at commit 30 of 40, searched with a budget of 4 blocks: the ends
        // hold, so the budget's end leaves a range (or a commit), never nothing.
        let mut s = Search::new(LocateRule::new(4, 1), 40);
        while let Next::Measure(commits) = s.decide() {
            let figures = block_figures(&mut rng, &commits, 30, 0.10, 0.01);
            s.record(&figures);
        }
        assert!(!s.withdrawn && !s.findings.is_empty(), "{:?}", s.findings);
    }

    pub(super) fn block_figures(
        rng: &mut SeededRng,
        commits: &[usize],
        tau: usize,
        slowdown: f64,
        sd: f64,
    ) -> Vec<(usize, f64)> {
        let level = rng.standard_normal();
        commits
            .iter()
            .map(|&c| {
                let mu = if c >= tau { slowdown.ln_1p() } else { 0.0 };
                (c, level + mu + sd / 2f64.sqrt() * rng.standard_normal())
            })
            .collect()
    }
}
