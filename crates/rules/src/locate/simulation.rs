//! Seeded simulations of the k-section search on synthetic histories, beside the
//! step-by-step rule of `bisect` on the same histories and noise (issue 48): how often each
//! names the right commit, a wrong or invented one, ends in a range, or finds nothing, and
//! the blocks, servers and minutes each takes. The tests assert the rates with a margin;
//! `locate_tables` (ignored; `cargo test --release -p rubyrace-experiment locate_tables --
//! --ignored --nocapture`) prints the tables of docs/methodology.md.

use super::*;
use crate::bisect::{BisectAnswer, BisectRule, Bisection, EndsVerdict, StepVerdict};
use crate::gate::simulation::Noise;

/// Seconds one block of `servers` interleaved servers takes on this machine with the
/// bundled history's settings (300 ms warm-up, 1 s of 50 ms slices per server): a boot and
/// warm-up per server and its second of load, measured in docs/bisect.md's runs (5.1 s per
/// block of 2 and 3 servers).
pub(crate) fn block_seconds(servers: usize) -> f64 {
    0.5 + 1.6 * servers as f64
}

/// The noise of every server of a simulated history, block after block.
pub(crate) struct History<'a> {
    rng: &'a mut SeededRng,
    noise: Noise,
    /// Of one server's figure: a ratio of two has `sd·√2`… that is, `sd` is the spread of a
    /// ratio and each server gets `sd/√2`.
    sd: f64,
    /// Log cost per commit.
    truth: Vec<f64>,
    /// Which code each commit runs, as far as cost goes: commits between two changes are
    /// one class. A wander or a step moves a class against the others; commits of one
    /// class (the same code for the machine) never drift apart, unless `independent`.
    class: Vec<usize>,
    wander: Vec<f64>,
    block: u32,
    step_at: u32,
    step_from: usize,
    step_sign: f64,
}

impl<'a> History<'a> {
    /// `independent`: every commit wanders (or steps) on its own, as if identical code
    /// could drift apart: an adversary, not a machine.
    pub(crate) fn with_classes(
        rng: &'a mut SeededRng,
        noise: Noise,
        sd: f64,
        truth: Vec<f64>,
        independent: bool,
    ) -> Self {
        let e = sd / 2f64.sqrt();
        let mut class = vec![0; truth.len()];
        for c in 1..truth.len() {
            class[c] = if independent || truth[c] != truth[c - 1] {
                class[c - 1] + 1
            } else {
                class[c - 1]
            };
        }
        let classes = class[truth.len() - 1] + 1;
        let wander = (0..classes)
            .map(|_| match noise {
                Noise::Drift { .. } => rng.standard_normal() * e / 2f64.sqrt(),
                _ => 0.0,
            })
            .collect();
        let step_at = 3 + rng.uniform_below(10) as u32;
        let step_from = 1 + rng.uniform_below(classes.max(2) - 1);
        let step_sign = if rng.next_f64() < 0.5 { -1.0 } else { 1.0 };
        History {
            rng,
            noise,
            sd,
            truth,
            class,
            wander,
            block: 0,
            step_at,
            step_from,
            step_sign,
        }
    }

    /// One block's figures of `commits`. A step moves the classes from a random one on
    /// (with one class, nothing).
    pub(crate) fn block(&mut self, commits: &[usize]) -> Vec<(usize, f64)> {
        let e = self.sd / 2f64.sqrt();
        let level = self.rng.standard_normal() * 0.05;
        let figures = commits
            .iter()
            .map(|&c| {
                let z = self.rng.standard_normal();
                let noise = match self.noise {
                    Noise::Normal => e * z,
                    Noise::HeavyTailed => {
                        let chi2: f64 = (0..3).map(|_| self.rng.standard_normal().powi(2)).sum();
                        e * z / (chi2 / 3.0).sqrt() / 3f64.sqrt()
                    }
                    Noise::Stalls { rate, mean, .. } => {
                        let stall = if self.rng.next_f64() < rate {
                            mean * e * -(1.0 - self.rng.next_f64()).ln()
                        } else {
                            0.0
                        };
                        e * z + stall
                    }
                    Noise::Drift { .. } => e / 2f64.sqrt() * z + self.wander[self.class[c]],
                    Noise::Step => {
                        let shift = if self.class[c] >= self.step_from {
                            let half = if self.block >= self.step_at {
                                0.5
                            } else {
                                -0.5
                            };
                            self.step_sign * half * self.sd
                        } else {
                            0.0
                        };
                        e * z + shift
                    }
                };
                (c, level + self.truth[c] + noise)
            })
            .collect();
        if let Noise::Drift { phi } = self.noise {
            let innovation = e / 2f64.sqrt() * (1.0 - phi * phi).sqrt();
            for w in &mut self.wander {
                *w = phi * *w + innovation * self.rng.standard_normal();
            }
        }
        self.block += 1;
        figures
    }
}

/// The noise's name in this history: stalls hit any server, not one side.
pub(crate) fn noise_name(noise: Noise) -> String {
    match noise {
        Noise::Stalls { rate, mean, .. } => {
            format!("stalls in {:.0}% of trials, mean {mean} sd", 100.0 * rate)
        }
        Noise::Step => "the codes' ratio steps by 1 sd mid-run".into(),
        Noise::Drift { phi } => format!("the codes' ratio wanders, AR(1) φ = {phi}"),
        other => other.name(),
    }
}

/// What one search answered, in the terms both rules share.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Answer {
    /// Commits named.
    pub commits: Vec<usize>,
    /// Ranges (first, last) the search ended in.
    pub ranges: Vec<(usize, usize)>,
    /// Parts said to hold a change not accounted for.
    pub unaccounted: Vec<(usize, usize)>,
    pub blocks: u32,
    /// Σ servers over the blocks.
    pub server_blocks: u32,
    pub seconds: f64,
}

/// A k-section search of the history in `h`.
pub(crate) fn k_section(h: &mut History, rule: LocateRule) -> Answer {
    let last = h.truth.len() - 1;
    let mut s = Search::new(rule, last);
    let (mut server_blocks, mut seconds) = (0, 0.0);
    let mut round: Option<(Vec<usize>, u32, usize)> = None;
    let nothing = loop {
        match s.decide() {
            Next::Measure(planned) => {
                let settled = round.as_ref().is_some_and(|r| r.2 != s.findings.len());
                let current = round.as_ref().map(|r| (r.0.as_slice(), r.1));
                let commits = hold_round(&planned, current, settled, &s.skipped, rule.min_blocks);
                round = match round.take() {
                    Some((c, b, f)) if c == commits => Some((c, b + 1, f)),
                    _ => Some((commits.clone(), 1, s.findings.len())),
                };
                server_blocks += commits.len() as u32;
                seconds += block_seconds(commits.len());
                let figures = h.block(&commits);
                s.record(&figures);
            }
            Next::NothingToFind { .. } => break true,
            Next::Done => break false,
        }
    };
    let mut a = Answer {
        commits: Vec::new(),
        ranges: Vec::new(),
        unaccounted: Vec::new(),
        blocks: s.blocks(),
        server_blocks,
        seconds,
    };
    if !nothing {
        for f in &s.findings {
            match f {
                Finding::Commit { commit, .. } => a.commits.push(*commit),
                Finding::Range { first, last, .. } | Finding::Skipped { first, last, .. } => {
                    a.ranges.push((*first, *last))
                }
                Finding::Unaccounted { lo, hi, .. } => a.unaccounted.push((*lo, *hi)),
            }
        }
    }
    a
}

/// The step-by-step search of `bisect` today (ends, then one candidate with both ends of
/// its range per block), its per-decision budget `max_blocks`.
pub(crate) fn step_by_step(h: &mut History, max_blocks: u32) -> Answer {
    let n = h.truth.len();
    let rule = BisectRule::new(n, 6, max_blocks);
    let (mut blocks, mut server_blocks, mut seconds) = (0u32, 0u32, 0.0);
    let mut y = Vec::new();
    let ends = loop {
        let f = h.block(&[0, n - 1]);
        y.push(f[1].1 - f[0].1);
        blocks += 1;
        server_blocks += 2;
        seconds += block_seconds(2);
        let v = rule.decide_ends(&y).verdict;
        if v != EndsVerdict::Continue {
            break v;
        }
    };
    let mut a = Answer {
        commits: Vec::new(),
        ranges: Vec::new(),
        unaccounted: Vec::new(),
        blocks,
        server_blocks,
        seconds,
    };
    if ends == EndsVerdict::NoRegression {
        return a;
    }
    let mut b = Bisection::new(n);
    while let Some((g, k, c)) = b.next_step() {
        let mut pairs = Vec::new();
        let d = loop {
            let f = h.block(&[g, c, k]);
            pairs.push((f[1].1 - f[0].1, f[2].1 - f[0].1));
            a.blocks += 1;
            a.server_blocks += 3;
            a.seconds += block_seconds(3);
            let d = rule.decide_step(&pairs);
            if d.verdict != StepVerdict::Continue {
                break d;
            }
        };
        b.record((g, k), c, d.verdict, d.partial);
    }
    for answer in b.answers() {
        match answer {
            BisectAnswer::Commit(c) => a.commits.push(c),
            BisectAnswer::Range { first, last, .. } => a.ranges.push((first, last)),
        }
    }
    a
}

/// Rates over many searches of one history with its changes at `changes`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Tally {
    pub runs: u32,
    /// Every change named, and nothing else.
    pub right: u32,
    /// A commit named that is not a change, or a range holding none.
    pub wrong: u32,
    /// Some change left in a range (none wrong).
    pub range: u32,
    /// A change neither named nor in a range nor said to be unaccounted for.
    pub dropped: u32,
    /// Nothing found at all.
    pub nothing: u32,
    pub blocks: Vec<f64>,
    pub minutes: Vec<f64>,
}

impl Tally {
    pub(crate) fn add(&mut self, a: &Answer, changes: &[usize]) {
        self.runs += 1;
        let holds = |c: usize| {
            a.commits.contains(&c)
                || a.ranges.iter().any(|r| (r.0..=r.1).contains(&c))
                || a.unaccounted.iter().any(|r| c > r.0 && c <= r.1)
        };
        let wrong = a.commits.iter().any(|c| !changes.contains(c))
            || a.ranges
                .iter()
                .any(|r| !changes.iter().any(|c| (r.0..=r.1).contains(c)));
        if a.commits.is_empty() && a.ranges.is_empty() && a.unaccounted.is_empty() {
            self.nothing += 1;
        } else if wrong {
            self.wrong += 1;
        } else if changes.iter().all(|c| a.commits.contains(c)) && a.ranges.is_empty() {
            self.right += 1;
        } else {
            self.range += 1;
        }
        if !changes.iter().all(|&c| holds(c)) {
            self.dropped += 1;
        }
        self.blocks.push(a.blocks as f64);
        self.minutes.push(a.seconds / 60.0);
    }

    pub(crate) fn rate(&self, k: u32) -> f64 {
        k as f64 / self.runs as f64
    }

    pub(crate) fn line(&self) -> String {
        format!(
            "right {:5.1}%  wrong {:4.1}%  range {:4.1}%  nothing {:4.1}%  dropped {:4.1}%  median {:3.0} blocks, {:4.1} min (p90 {:4.1})",
            100.0 * self.rate(self.right),
            100.0 * self.rate(self.wrong),
            100.0 * self.rate(self.range),
            100.0 * self.rate(self.nothing),
            100.0 * self.rate(self.dropped),
            stats::summary::quantile(&self.blocks, 0.5),
            stats::summary::quantile(&self.minutes, 0.5),
            stats::summary::quantile(&self.minutes, 0.9),
        )
    }
}

/// A history of `commits` commits (0 good, the last bad) with the given changes.
pub(crate) fn history(commits: usize, changes: &[(usize, f64)]) -> Vec<f64> {
    (0..commits)
        .map(|c| {
            changes
                .iter()
                .filter(|(at, _)| c >= *at)
                .map(|(_, s)| s.ln_1p())
                .sum()
        })
        .collect()
}

/// A synthetic history and its noise.
#[derive(Clone, Debug)]
pub(crate) struct Setting {
    /// Log cost per commit.
    pub truth: Vec<f64>,
    /// The first bad commit of each change.
    pub changes: Vec<usize>,
    pub noise: Noise,
    /// Every commit wanders or steps on its own (see [`History::with_classes`]).
    pub independent: bool,
    pub sd: f64,
}

impl Setting {
    /// `commits` commits with changes (first bad commit, slowdown) under `noise`.
    pub(crate) fn new(commits: usize, changes: &[(usize, f64)], noise: Noise, sd: f64) -> Self {
        Setting {
            truth: history(commits, changes),
            changes: changes.iter().map(|c| c.0).collect(),
            noise,
            independent: false,
            sd,
        }
    }

    /// Its noise, drawn from `rng`.
    pub(crate) fn history<'a>(&self, rng: &'a mut SeededRng) -> History<'a> {
        History::with_classes(
            rng,
            self.noise,
            self.sd,
            self.truth.clone(),
            self.independent,
        )
    }
}

/// `runs` searches by the k-section rule, and by the step-by-step one on the same seeds
/// when `with_old`.
pub(crate) fn compare(
    setting: &Setting,
    rule: LocateRule,
    runs: u32,
    seed: u64,
    with_old: bool,
) -> (Tally, Option<Tally>) {
    let (mut new, mut old) = (Tally::default(), Tally::default());
    for run in 0..runs {
        let seed = seed ^ (run as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut rng = SeededRng::new(seed);
        new.add(
            &k_section(&mut setting.history(&mut rng), rule),
            &setting.changes,
        );
        if with_old {
            let mut rng = SeededRng::new(seed);
            old.add(
                &step_by_step(&mut setting.history(&mut rng), 60),
                &setting.changes,
            );
        }
    }
    (new, with_old.then_some(old))
}

/// The budget of blocks of eight servers that fits `minutes` on this machine.
pub(crate) fn blocks_in(minutes: f64) -> u32 {
    (minutes * 60.0 / block_seconds(8)).floor() as u32
}

/// Issue 48's bar: one 2.5% change at SD 0.02 and 0.03 per block, in 16 commits within
/// 15 minutes of this machine and in 64 within 25: the right commit in at least 90% of
/// searches, a wrong one in at most 5%.
#[test]
fn a_small_change_is_placed_within_the_budget() {
    for (commits, minutes, at) in [(16usize, 15.0, 11usize), (64, 25.0, 41)] {
        for sd in [0.02, 0.03] {
            let setting = Setting::new(commits, &[(at, 0.025)], Noise::Normal, sd);
            let rule = LocateRule::new(blocks_in(minutes), 6);
            let (t, _) = compare(&setting, rule, 200, 4801, false);
            eprintln!("{commits} commits, 2.5% at {at}, sd {sd}: {}", t.line());
            assert!(t.rate(t.right) >= 0.90, "{commits} sd {sd}: {}", t.line());
            assert!(t.rate(t.wrong) <= 0.05, "{commits} sd {sd}: {}", t.line());
            assert!(stats::summary::quantile(&t.minutes, 0.5) <= minutes / 2.0);
        }
    }
}

/// The noise that breaks the t interval's conditions: heavy tails, stalls, the ratio of
/// the two codes wandering (φ 0.3 and 0.9) or stepping mid-run. A wrong or invented commit
/// in at most 5% of searches; the change is named, left in a range that holds it, or the
/// ends say they cannot show a regression (never silently a wrong place).
#[test]
fn wrong_answers_stay_rare_when_the_noise_misbehaves() {
    let rule = LocateRule::new(blocks_in(15.0), 6);
    for noise in [
        Noise::HeavyTailed,
        Noise::Stalls {
            head: false,
            rate: 0.2,
            mean: 3.0,
        },
        Noise::Drift { phi: 0.3 },
        Noise::Drift { phi: 0.9 },
        Noise::Step,
    ] {
        let setting = Setting::new(20, &[(11, 0.025)], noise, 0.03);
        let (t, _) = compare(&setting, rule, 150, 4803, false);
        eprintln!("2.5% at 11, {}: {}", noise_name(noise), t.line());
        assert!(
            t.rate(t.wrong) <= 0.05,
            "{}: {}",
            noise_name(noise),
            t.line()
        );
        // A change is dropped only where nothing was found, or the answer was wrong.
        assert!(
            t.dropped <= t.nothing + t.wrong,
            "{}: {}",
            noise_name(noise),
            t.line()
        );
    }
}

/// No change: the search says there is nothing to find, and names a commit in at most
/// 2.5% of searches.
#[test]
fn no_change_means_nothing_to_find() {
    let rule = LocateRule::new(blocks_in(15.0), 6);
    let setting = Setting::new(20, &[], Noise::Normal, 0.03);
    let (t, _) = compare(&setting, rule, 300, 4804, false);
    eprintln!("no change: {}", t.line());
    assert!(t.rate(t.wrong) <= 0.025, "{}", t.line());
}

/// Two changes: each is named (8% and 8%; 2% and 8% at SD 0.01), and where the smaller one
/// cannot be placed (3% and 6% at SD 0.03) it is left in a range that holds it, not
/// dropped: the part of the history beside the first commit named must show no change of
/// 2% in fresh blocks, or is searched, or is said not ruled out.
#[test]
fn two_changes_are_each_found_or_left_in_a_range() {
    let rule = LocateRule::new(blocks_in(15.0), 6);
    for (changes, sd, named_at_least) in [
        (vec![(6usize, 0.08), (15, 0.08)], 0.03, 0.90),
        (vec![(6, 0.02), (15, 0.08)], 0.01, 0.90),
        (vec![(6, 0.03), (15, 0.06)], 0.03, 0.80),
    ] {
        let setting = Setting::new(20, &changes, Noise::Normal, sd);
        let (t, _) = compare(&setting, rule, 150, 4805, false);
        eprintln!("{changes:?} sd {sd}: {}", t.line());
        assert!(
            t.rate(t.right) >= named_at_least,
            "{changes:?}: {}",
            t.line()
        );
        assert!(t.rate(t.wrong) <= 0.05, "{changes:?}: {}", t.line());
        assert!(t.rate(t.dropped) <= 0.03, "{changes:?}: {}", t.line());
    }
}

/// The tables of docs/methodology.md ("Bisection by k-section"): the k-section search and
/// the step-by-step rule on the same seeded histories.
#[test]
#[ignore]
fn locate_tables() {
    let runs: u32 = std::env::var("RUBYRACE_LOCATE_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    eprintln!("## one 2.5% change, normal noise, {runs} searches each");
    for (commits, minutes, at) in [(16usize, 15.0, 11usize), (64, 25.0, 41)] {
        for sd in [0.02, 0.03] {
            let setting = Setting::new(commits, &[(at, 0.025)], Noise::Normal, sd);
            let rule = LocateRule::new(blocks_in(minutes), 6);
            let (new, old) = compare(&setting, rule, runs, 4801, true);
            eprintln!("{commits} commits, 2.5% at {at}, sd {sd}, {minutes} min budget");
            eprintln!("  k-section    {}", new.line());
            eprintln!("  step-by-step {}", old.unwrap().line());
        }
    }
    eprintln!("## 20 commits, 15 min budget, {runs} searches each");
    let rule = LocateRule::new(blocks_in(15.0), 6);
    type Changes = Vec<(usize, f64)>;
    let settings: Vec<(&str, Changes, f64)> = vec![
        ("none", vec![], 0.03),
        ("2.5% at 11", vec![(11, 0.025)], 0.03),
        ("5% at 13", vec![(13, 0.05)], 0.03),
        ("2% at 6 + 8% at 15", vec![(6, 0.02), (15, 0.08)], 0.01),
        ("2% at 6 + 8% at 15", vec![(6, 0.02), (15, 0.08)], 0.03),
        ("3% at 6 + 6% at 15", vec![(6, 0.03), (15, 0.06)], 0.03),
        ("8% at 6 + 8% at 15", vec![(6, 0.08), (15, 0.08)], 0.03),
    ];
    for (name, changes, sd) in settings {
        for (noise, independent) in [
            (Noise::Normal, false),
            (Noise::HeavyTailed, false),
            (
                Noise::Stalls {
                    head: false,
                    rate: 0.2,
                    mean: 3.0,
                },
                false,
            ),
            (Noise::Drift { phi: 0.3 }, false),
            (Noise::Drift { phi: 0.9 }, false),
            (Noise::Step, false),
            (Noise::Drift { phi: 0.9 }, true),
        ] {
            let setting = Setting {
                independent,
                ..Setting::new(20, &changes, noise, sd)
            };
            let (new, old) = compare(&setting, rule, runs, 4802, true);
            let each = if independent {
                ", every commit on its own"
            } else {
                ""
            };
            eprintln!("{name}, sd {sd}, {}{each}", noise_name(noise));
            eprintln!("  k-section    {}", new.line());
            eprintln!("  step-by-step {}", old.unwrap().line());
        }
    }
}

/// One large change in noisy figures, as the bisect tests' fake CRuby history has it (a
/// 38% slowdown at commit 5 of 8, wall time spread 6–12% per block): the part after the
/// named commit must not end as a second change. A part aside is called at one of its
/// looks, where its running mean may stand high by chance; when the budget ends before a
/// commit of it is named, the call is checked over all its fresh blocks. Without that
/// check 0.9% and 0.8% of these searches (1000 each) ended with a second change in a
/// range, and one did in CI (2026-11-30: commit 7 at 1.4043× and commit 5 at 1.3476×
/// against good, identical code, beside a neighbour); with it, 0.0% and 0.2%.
#[test]
fn a_large_change_in_noisy_figures_is_not_followed_by_an_invented_one() {
    let rule = LocateRule::new(60, 6);
    for sd in [0.06, 0.12] {
        let setting = Setting::new(8, &[(5, 0.38)], Noise::Normal, sd);
        let (t, _) = compare(&setting, rule, 1000, 4810, false);
        eprintln!("38% at 5 of 8, sd {sd}: {}", t.line());
        assert!(t.rate(t.wrong) <= 0.004, "sd {sd}: {}", t.line());
        assert!(t.rate(t.right) >= 0.99, "sd {sd}: {}", t.line());
    }
}
