//! A bisection's report (`rubyrace bisect`, the k-section search of issue 48), as Markdown
//! (printed, and `bisect.md`): the answer in sentences (the first bad commit with its cost
//! against the commit before it, or the range the budget left with what would settle it,
//! the changes not accounted for, the commits skipped), how the metric was chosen, a row for
//! every commit measured (its cost against good and its probability of being the first bad
//! one) and for every round. The parts are also what the HTML page (`bisect.html`,
//! `render::html::bisect`) shows, with the chart `charts::bisect`. Everything comes from
//! the search's record, `results::bisect::BisectRecord`.

use std::fmt::Write as _;

use results::bisect::{BisectOutcome, BisectRecord, Change, Finding, MetricEnds, Settle};

use crate::format::{confidence_text, md_escape};

/// `1.1523× [1.1302–1.1749]`, or the ratio alone.
pub fn ratio_text(ratio: Option<(f64, Option<f64>, Option<f64>)>) -> String {
    match ratio {
        Some((r, Some(lo), Some(hi))) => format!("{r:.4}× [{lo:.4}–{hi:.4}]"),
        Some((r, ..)) => format!("{r:.4}×"),
        None => String::new(),
    }
}

/// A probability as a percentage: `99.1%`, `<0.1%` and `>99.9%` at the edges.
pub fn probability_text(p: f64) -> String {
    if p <= 0.0 {
        "0%".into()
    } else if p < 0.001 {
        "<0.1%".into()
    } else if p >= 1.0 {
        "100%".into()
    } else if p > 0.999 {
        ">99.9%".into()
    } else {
        format!("{:.1}%", 100.0 * p)
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

fn hash12(record: &BisectRecord, commit: usize) -> &str {
    let hash = &record.commits[commit].hash;
    &hash[..12.min(hash.len())]
}

/// "`0123456789ab` subject (date)".
fn commit_line(record: &BisectRecord, commit: usize) -> String {
    let info = &record.commits[commit];
    format!(
        "`{}` {} ({})",
        hash12(record, commit),
        info.subject,
        info.date
    )
}

fn minutes_text(minutes: f64) -> String {
    if minutes >= 10.0 {
        format!("{minutes:.0}")
    } else {
        format!("{minutes:.1}")
    }
}

/// The ends of `ends`: "R× [lo–hi] over N blocks".
fn ends_figures(ends: &MetricEnds) -> String {
    format!(
        "{} over {} blocks",
        ratio_text(Some((ends.ratio, Some(ends.low), Some(ends.high)))),
        ends.blocks
    )
}

/// The named commit's step: "its cost against the commit before it on METRIC: … ; it holds
/// P of the probability", from its finding (else its cost against good, from its estimate).
fn commit_effect(record: &BisectRecord, commit: usize) -> Option<String> {
    let metric = record.metric.name();
    let finding = record.findings.iter().find_map(|f| match f {
        Finding::Commit {
            commit: c,
            probability,
            step,
        } if *c == commit => Some((*probability, *step)),
        _ => None,
    });
    if let Some((probability, step)) = finding {
        return Some(format!(
            "its cost against the commit before it on {metric}: {} (interval at the search's level, {} blocks); it holds {} of the probability",
            ratio_text(Some((step.ratio, Some(step.low), Some(step.high)))),
            step.blocks,
            probability_text(probability)
        ));
    }
    let e = record.estimate(commit)?;
    Some(format!(
        "its cost against the good end on {metric}: {} (95% interval, {} blocks)",
        ratio_text(Some((e.ratio, e.low, e.high))),
        e.blocks
    ))
}

/// What more blocks would settle a range: "About B80 more blocks (~M80 minutes) would place
/// it with 80% probability, B95 (~M95 minutes) with 95%: …".
fn settle_text(record: &BisectRecord, settle: &Settle) -> String {
    let amount = |blocks: Option<u32>, minutes: Option<f64>, unit: &str| match blocks {
        Some(b) => match minutes {
            Some(m) => format!("{b}{unit} (~{} minutes)", minutes_text(m)),
            None => format!("{b}{unit}"),
        },
        None => "more than four budgets".to_string(),
    };
    let mut out = match (settle.blocks_80, settle.blocks_95) {
        (None, _) => "Placing it with 80% probability would take more than four budgets of blocks, from the spread measured".to_string(),
        (Some(_), None) => format!(
            "About {} would place it with 80% probability; with 95%, more than four budgets would",
            amount(settle.blocks_80, settle.minutes_80, " more blocks")
        ),
        (Some(_), Some(_)) => format!(
            "About {} would place it with 80% probability, {} with 95%",
            amount(settle.blocks_80, settle.minutes_80, " more blocks"),
            amount(settle.blocks_95, settle.minutes_95, "")
        ),
    };
    if let Some(more) = settle.blocks_95.or(settle.blocks_80) {
        let _ = write!(
            out,
            ": resume the search (`rubyrace bisect --resume`) with a larger `--max-blocks` (at least {})",
            record.blocks() + more
        );
    }
    out.push('.');
    if let Some(fleet) = on_a_fleet(record, settle) {
        let _ = write!(out, " {fleet}");
    }
    out
}

/// For a search on this machine: the minutes of the most blocks settling a range asks
/// for, with 2, 4 and 8 nodes of a fleet measuring a block each at every look.
fn on_a_fleet(record: &BisectRecord, settle: &Settle) -> Option<String> {
    if record.slurm {
        return None;
    }
    let (blocks, minutes) = match (settle.blocks_95, settle.minutes_95) {
        (Some(b), Some(m)) => (b, m),
        _ => (settle.blocks_80?, settle.minutes_80?),
    };
    if blocks == 0 {
        return None;
    }
    let per_block = minutes / f64::from(blocks);
    let with = |nodes: u32| {
        format!(
            "~{} minutes with {nodes}",
            minutes_text(f64::from(blocks.div_ceil(nodes)) * per_block)
        )
    };
    Some(format!(
        "On a fleet (`--slurm`, one block per node at each look) those {blocks} blocks would take {}, {} and {} nodes.",
        with(2),
        with(4),
        with(8)
    ))
}

/// Why the first bad commit is only known to lie in `first..=last`, and what would settle
/// it: "the budget (N blocks) ended with P of the probability in this range …".
fn range_why(record: &BisectRecord, first: usize, last: usize, cannot_tell: bool) -> String {
    let finding = record.findings.iter().find_map(|f| match f {
        Finding::Range {
            first: f,
            last: l,
            probability,
            to_settle,
        } if *f == first && *l == last => Some((*probability, to_settle.as_ref())),
        _ => None,
    });
    if !cannot_tell {
        let skipped = record.findings.iter().find_map(|f| match f {
            Finding::Skipped {
                first: f,
                last: l,
                probability,
                step,
            } if *f == first && *l == last => Some((*probability, *step)),
            _ => None,
        });
        return match skipped {
            Some((probability, step)) => format!(
                "commits {first}–{} do not build or boot, so no block can tell them from commit {last}; together they hold {} of the probability, and commit {last} costs {} against commit {} on {} (interval at the search's level, {} blocks).",
                last - 1,
                probability_text(probability),
                ratio_text(Some((step.ratio, Some(step.low), Some(step.high)))),
                first - 1,
                record.metric.name(),
                step.blocks
            ),
            None => "commits in it could not be measured (skipped), so no block can tell them apart."
                .to_string(),
        };
    }
    let mut out = match finding {
        Some((probability, _)) => format!(
            "the budget ({} blocks) ended with {} of the probability in this range",
            record.max_blocks,
            probability_text(probability)
        ),
        None => format!(
            "the budget ({} blocks) ended before one commit held 95% of the probability",
            record.max_blocks
        ),
    };
    let most = record
        .estimates
        .iter()
        .filter(|e| (first..=last).contains(&e.commit))
        .filter_map(|e| e.probability.map(|p| (e.commit, p)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    if let Some((c, p)) = most {
        let _ = write!(
            out,
            " (its most probable commit of those measured: {c}, `{}`, {})",
            hash12(record, c),
            probability_text(p)
        );
    }
    out.push('.');
    if let Some((_, Some(settle))) = finding {
        out.push(' ');
        out.push_str(&settle_text(record, settle));
    }
    out
}

/// The answer, in sentences (Markdown paragraphs, blank lines between them; a change of
/// several is a "- " item).
pub fn answer(record: &BisectRecord) -> String {
    let mut out = String::new();
    outcome_text(record, &mut out);
    aside_text(record, &mut out);
    out
}

/// The outcome's sentences: the search so far, no regression, the first bad commit or
/// its range, or each of several changes.
fn outcome_text(record: &BisectRecord, out: &mut String) {
    let metric = record.metric.name();
    let min_change = confidence_text(record.min_change);
    match &record.outcome {
        None => searching_text(record, out),
        Some(BisectOutcome::NothingToFind { exhausted: false }) => {
            let figures = record
                .ends
                .as_ref()
                .map(|e| {
                    format!(
                        "the bad end's cost against good is {} on {metric} over {} blocks, ",
                        ratio_text(Some((e.ratio, Some(e.low), Some(e.high)))),
                        e.blocks
                    )
                })
                .unwrap_or_else(|| "the ends' interval lies ".to_string());
            let _ = writeln!(
                out,
                "**No regression to find**: {figures}below the smallest change searched for ({min_change})."
            );
        }
        Some(BisectOutcome::NothingToFind { exhausted: true }) => {
            let figures = record
                .ends
                .as_ref()
                .map(|e| {
                    format!(
                        ": the bad end's cost against good is {} on {metric}; its interval neither shows a regression nor rules out one of {min_change}, the smallest change searched for",
                        ends_figures(e)
                    )
                })
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "**No regression could be shown** within the budget ({} blocks){figures}.",
                record.max_blocks
            );
        }
        Some(BisectOutcome::Commit { commit }) => {
            let _ = writeln!(
                out,
                "**The first bad commit is {}**.",
                commit_line(record, *commit)
            );
            if let Some(effect) = commit_effect(record, *commit) {
                let _ = writeln!(out, "\n{}.", capitalised(&effect));
            }
        }
        Some(BisectOutcome::Range {
            first,
            last,
            cannot_tell,
        }) => {
            let _ = writeln!(
                out,
                "**The first bad commit is one of commits {first}–{last}** ({} to {}): {}",
                commit_line(record, *first),
                commit_line(record, *last),
                range_why(record, *first, *last, *cannot_tell)
            );
        }
        Some(BisectOutcome::Changes { changes }) => changes_text(record, changes, out),
    }
}

/// A search not ended yet: where it stands, and what the next block measures.
fn searching_text(record: &BisectRecord, out: &mut String) {
    out.push_str("The search has not ended yet.\n");
    if let Some(s) = &record.searching {
        let _ = writeln!(
            out,
            "\nAfter {} blocks in {} rounds, searching commits {}–{}: the most probable first bad commit is {}, {} ({}); commits {}–{} hold {} of the probability.",
            record.blocks(),
            record.rounds.len(),
            s.lo,
            s.hi,
            s.most_probable,
            commit_line(record, s.most_probable),
            probability_text(s.probability),
            s.first,
            s.last,
            probability_text(s.range_probability)
        );
    }
    if !record.next.is_empty() {
        let _ = writeln!(
            out,
            "\nThe next block measures commits {}.",
            list(&record.next)
        );
    }
}

/// Several changes, each located on its own: a "- " item per change, a commit or a range.
fn changes_text(record: &BisectRecord, changes: &[Change], out: &mut String) {
    let _ = writeln!(
        out,
        "**{} changes**, each located on its own:",
        changes.len()
    );
    for change in changes {
        if change.first == change.last {
            let effect = commit_effect(record, change.first)
                .map(|e| format!(": {e}"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "\n- commit {}, {}{effect}.",
                change.first,
                commit_line(record, change.first)
            );
        } else {
            let _ = writeln!(
                out,
                "\n- one of commits {}–{} ({} to {}): {}",
                change.first,
                change.last,
                commit_line(record, change.first),
                commit_line(record, change.last),
                range_why(record, change.first, change.last, change.cannot_tell)
            );
        }
    }
}

/// What follows the outcome: the changes not accounted for, more than one change, the
/// ends' cost (unless there was no regression), the commits skipped.
fn aside_text(record: &BisectRecord, out: &mut String) {
    let metric = record.metric.name();
    for finding in &record.findings {
        if let Finding::Unaccounted { lo, hi, up_to } = finding {
            let _ = writeln!(
                out,
                "\nA change of up to {:.1}% between commits {lo} (`{}`) and {hi} (`{}`) is not accounted for: the blocks could not show that part free of one.",
                100.0 * (up_to - 1.0),
                hash12(record, *lo),
                hash12(record, *hi)
            );
        }
    }
    if record.ends_withdrawn {
        let blocks = record.ends.as_ref().map_or(0, |e| e.blocks);
        let _ = writeln!(
            out,
            "\nThe ends had shown a regression on {metric} at an early look, which started the search; over all {blocks} blocks they no longer do, so that call is withdrawn and no commit is named (a false alarm at the search's level, or the machine drifted while the ends were measured)."
        );
    }
    if record.more_than_one_change {
        out.push_str(
            "\n**More than one change**: a part of the history beside a named commit showed a \
change of its own, or could not be shown free of one. A gradual change shows as a run of \
small ones, or as ranges that cannot be told apart.\n",
        );
    }
    if !matches!(record.outcome, Some(BisectOutcome::NothingToFind { .. })) {
        if let Some(e) = &record.ends {
            let _ = writeln!(
                out,
                "\nBad against good on {metric}: cost {}.",
                ends_figures(e)
            );
        }
    }
    for (c, reason) in &record.skipped {
        let _ = writeln!(
            out,
            "\nSkipped commit {c}, {}: it could not be measured ({}).",
            commit_line(record, *c),
            first_line(reason)
        );
    }
}

fn capitalised(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// Commit indices, comma-separated.
fn list(commits: &[usize]) -> String {
    commits
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// How the metric searched on was chosen, in sentences (Markdown).
pub fn metric_choice(record: &BisectRecord) -> String {
    let metric = record.metric.name();
    let mut out = if record.metric_given {
        format!("Searched on {metric} (given with `--metric`).")
    } else if record.metric_chosen {
        format!("Searched on {metric}: its regression stands out most from its per-block spread.")
    } else {
        format!(
            "Searched on {metric} so far (the workload's first metric): the metric is chosen once the ends show a regression on one."
        )
    };
    let flat: Vec<&str> = record
        .metric_ends
        .iter()
        .filter(|e| !shows_regression(e))
        .map(|e| e.metric.name())
        .collect();
    if !flat.is_empty() {
        let _ = write!(
            out,
            " The ends showed no regression on {}.",
            flat.join(", ")
        );
    }
    out
}

/// The ends show a regression on this metric: the interval lies above 1.
fn shows_regression(e: &MetricEnds) -> bool {
    e.low > 1.0
}

/// The search's settings, in one sentence.
pub fn settings(record: &BisectRecord) -> String {
    format!(
        "The smallest change searched for: {}; {} candidate{} per block beside the two ends ({}); {} blocks before the first call, {} in all at most.",
        confidence_text(record.min_change),
        record.candidates,
        if record.candidates == 1 { "" } else { "s" },
        record.candidates_why,
        record.min_blocks,
        record.max_blocks
    )
}

/// One row of the metrics' table: a metric's ends when the metric was chosen.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricRow {
    pub metric: &'static str,
    /// The bad end's cost against good, with its interval.
    pub ratio: String,
    /// The per-block spread of the log cost ratio, as a percentage.
    pub spread: String,
    /// The regression in units of that spread.
    pub signal_to_noise: String,
    pub blocks: usize,
    pub shows_regression: bool,
    pub searched: bool,
}

/// Every metric's ends when the metric was chosen (none when it was given).
pub fn metric_rows(record: &BisectRecord) -> Vec<MetricRow> {
    record
        .metric_ends
        .iter()
        .map(|e| MetricRow {
            metric: e.metric.name(),
            ratio: ratio_text(Some((e.ratio, Some(e.low), Some(e.high)))),
            spread: format!("{:.2}%", 100.0 * e.spread),
            signal_to_noise: if e.signal_to_noise.is_finite() {
                format!("{:.2}", e.signal_to_noise)
            } else {
                "∞".into()
            },
            blocks: e.blocks,
            shows_regression: shows_regression(e),
            searched: e.metric == record.metric,
        })
        .collect()
}

/// One row of the commits' table: a commit measured (or skipped).
#[derive(Clone, Debug, PartialEq)]
pub struct CommitRow {
    pub commit: usize,
    /// 12 hex digits.
    pub hash: String,
    pub subject: String,
    /// Its cost against good with its 95% interval, as text; empty when not measured.
    pub cost: String,
    pub blocks: Option<usize>,
    /// The probability that it is the first bad commit.
    pub probability: Option<f64>,
    /// Named as a first bad commit.
    pub named: bool,
    /// "good end" or "bad end".
    pub end: Option<&'static str>,
    /// Skipped: the first line of why.
    pub skipped: Option<String>,
}

impl CommitRow {
    /// The probability column: "99.1%", or "–".
    pub fn probability_text(&self) -> String {
        self.probability
            .map(probability_text)
            .unwrap_or_else(|| "–".into())
    }
}

/// Every commit measured, and every commit skipped, in commit order.
pub fn commit_rows(record: &BisectRecord) -> Vec<CommitRow> {
    let mut commits: Vec<usize> = record
        .estimates
        .iter()
        .map(|e| e.commit)
        .chain(record.skipped.iter().map(|(c, _)| *c))
        .filter(|c| *c < record.commits.len())
        .collect();
    commits.sort_unstable();
    commits.dedup();
    let last = record.commits.len().saturating_sub(1);
    commits
        .into_iter()
        .map(|c| {
            let e = record.estimate(c);
            CommitRow {
                commit: c,
                hash: hash12(record, c).to_string(),
                subject: record.commits[c].subject.clone(),
                cost: e
                    .map(|e| ratio_text(Some((e.ratio, e.low, e.high))))
                    .unwrap_or_default(),
                blocks: e.map(|e| e.blocks),
                probability: e.and_then(|e| e.probability),
                named: record
                    .findings
                    .iter()
                    .any(|f| matches!(f, Finding::Commit { commit, .. } if *commit == c)),
                end: match c {
                    0 => Some("good end"),
                    c if c == last => Some("bad end"),
                    _ => None,
                },
                skipped: record
                    .skipped
                    .iter()
                    .find(|(s, _)| *s == c)
                    .map(|(_, why)| first_line(why).to_string()),
            }
        })
        .collect()
}

/// One row of the rounds' table.
#[derive(Clone, Debug, PartialEq)]
pub struct RoundRow {
    /// 1-based.
    pub round: usize,
    pub commits: String,
    pub blocks: u32,
    pub minutes: f64,
    /// Its results directory, relative to the bisection's.
    pub dir: String,
}

/// Every round, in the order it ran.
pub fn round_rows(record: &BisectRecord) -> Vec<RoundRow> {
    record
        .rounds
        .iter()
        .enumerate()
        .map(|(i, r)| RoundRow {
            round: i + 1,
            commits: list(&r.commits),
            blocks: r.blocks,
            minutes: r.measuring_s / 60.0,
            dir: r.dir.display().to_string(),
        })
        .collect()
}

/// "N blocks in R rounds, M minutes measuring; this session X minutes."
pub fn totals(record: &BisectRecord, elapsed: Option<std::time::Duration>) -> String {
    let session = elapsed
        .map(|e| format!("; this session {:.1} minutes", e.as_secs_f64() / 60.0))
        .unwrap_or_default();
    let rounds = record.rounds.len();
    format!(
        "{} blocks in {rounds} round{}, {:.1} minutes measuring{session}.",
        record.blocks(),
        if rounds == 1 { "" } else { "s" },
        record.measuring_s() / 60.0
    )
}

/// The whole Markdown report: the answer, the metric, the commits' and rounds' tables, the
/// totals (with the time of the session that ended the search, when it is the one
/// printing).
pub fn markdown(record: &BisectRecord, elapsed: Option<std::time::Duration>) -> String {
    let mut out = format!(
        "## rubyrace bisect: {} commits, {} .. {}\n\n",
        record.commits.len(),
        record.good_ref,
        record.bad_ref
    );
    out.push_str(&answer(record));
    let _ = writeln!(out, "\n### The metric\n\n{}\n", metric_choice(record));
    let metrics = metric_rows(record);
    if !metrics.is_empty() {
        out.push_str(
            "| metric | bad/good cost [interval] | per-block spread | regression/spread | blocks |\n\
|---|---|---|---|---|\n",
        );
        for m in &metrics {
            let _ = writeln!(
                out,
                "| {}{}{} | {} | {} | {} | {} |",
                m.metric,
                if m.searched { " (searched)" } else { "" },
                if m.shows_regression {
                    ""
                } else {
                    " (no regression)"
                },
                m.ratio,
                m.spread,
                m.signal_to_noise,
                m.blocks
            );
        }
        out.push('\n');
    }
    let _ = writeln!(out, "{}\n", settings(record));
    let commits = commit_rows(record);
    if !commits.is_empty() {
        out.push_str(
            "### Every commit measured\n\n\
| # | commit | cost against good [95% interval] | blocks | first bad | note |\n\
|---|---|---|---|---|---|\n",
        );
        for r in &commits {
            let mut notes: Vec<String> = Vec::new();
            if r.named {
                notes.push("**first bad commit**".into());
            }
            if let Some(end) = r.end {
                notes.push(end.into());
            }
            if let Some(why) = &r.skipped {
                notes.push(format!("skipped: {}", md_escape(why)));
            }
            let _ = writeln!(
                out,
                "| {} | `{}` {} | {} | {} | {} | {} |",
                r.commit,
                r.hash,
                md_escape(&r.subject),
                r.cost,
                r.blocks.map(|b| b.to_string()).unwrap_or_default(),
                r.probability_text(),
                notes.join("; ")
            );
        }
        out.push('\n');
    }
    let rounds = round_rows(record);
    if !rounds.is_empty() {
        out.push_str(
            "### Every round\n\n| round | commits | blocks | minutes |\n|---|---|---|---|\n",
        );
        for r in &rounds {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.1} |",
                r.round, r.commits, r.blocks, r.minutes
            );
        }
        out.push('\n');
    }
    out.push_str(&totals(record, elapsed));
    out.push('\n');
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use std::path::PathBuf;

    use experiment::precision::PrecisionMetric;
    use results::bisect::{
        BisectRecord, Change, CommitEstimate, CommitInfo, HistoryOf, MetricEnds, RoundRecord,
        StepRatio, BISECT_SCHEMA,
    };

    use super::*;

    fn estimate(commit: usize, ratio: f64, blocks: usize, p: Option<f64>) -> CommitEstimate {
        CommitEstimate {
            commit,
            ratio,
            low: Some(ratio - 0.01),
            high: Some(ratio + 0.01),
            blocks,
            probability: p,
        }
    }

    /// Seven commits (0 good, 6 bad); commit 4 is the first bad one, commit 2 did not
    /// boot; two rounds; chosen on throughput beside a flat cpu_per_request.
    pub(crate) fn record() -> BisectRecord {
        let commits = (0..7)
            .map(|i| CommitInfo {
                hash: format!("{i}abcdef0123456789abcdef0123456789abcdef"),
                subject: if i == 4 {
                    "Use <Vec> for the cache".to_string()
                } else {
                    format!("commit number {i}")
                },
                date: format!("2026-01-0{}T10:00:00+00:00", i + 1),
            })
            .collect();
        let ends = |metric, ratio: f64, low, high, spread, snr| MetricEnds {
            metric,
            ratio,
            low,
            high,
            spread,
            blocks: 6,
            signal_to_noise: snr,
        };
        BisectRecord {
            schema: BISECT_SCHEMA.into(),
            experiment: PathBuf::from("exp.toml"),
            config: "app".into(),
            repo: PathBuf::from("/src/app"),
            history_of: HistoryOf::App,
            configure_opts: vec![],
            good_ref: "v1.0".into(),
            bad_ref: "main".into(),
            metric: PrecisionMetric::Throughput,
            metric_given: false,
            metric_chosen: true,
            metric_ends: vec![
                ends(PrecisionMetric::Throughput, 1.05, 1.03, 1.07, 0.012, 4.07),
                ends(
                    PrecisionMetric::CpuPerRequest,
                    1.004,
                    0.99,
                    1.018,
                    0.02,
                    0.2,
                ),
            ],
            ends: Some(ends(
                PrecisionMetric::Throughput,
                1.0512,
                1.0398,
                1.0627,
                0.012,
                4.1,
            )),
            min_blocks: 3,
            max_blocks: 60,
            min_change: 0.02,
            candidates: 3,
            candidates_why: "memory for 5 servers".into(),
            commits,
            rounds: vec![
                RoundRecord {
                    dir: PathBuf::from("rounds/01"),
                    commits: vec![0, 2, 3, 5, 6],
                    blocks: 8,
                    measuring_s: 480.0,
                    findings_before: 0,
                },
                RoundRecord {
                    dir: PathBuf::from("rounds/02"),
                    commits: vec![0, 3, 4, 6],
                    blocks: 6,
                    measuring_s: 330.0,
                    findings_before: 0,
                },
            ],
            skipped: vec![(
                2,
                "commit 2 does not boot: config.ru:1:in `<main>'\nsecond line".into(),
            )],
            estimates: vec![
                estimate(0, 1.0, 14, None),
                estimate(3, 1.002, 14, Some(0.004)),
                estimate(4, 1.049, 6, Some(0.991)),
                estimate(5, 1.051, 8, Some(0.005)),
                estimate(6, 1.0512, 14, Some(0.0)),
            ],
            findings: vec![Finding::Commit {
                commit: 4,
                probability: 0.991,
                step: StepRatio {
                    ratio: 1.0261,
                    low: 1.0102,
                    high: 1.0423,
                    blocks: 6,
                },
            }],
            searching: None,
            next: vec![],
            outcome: Some(BisectOutcome::Commit { commit: 4 }),
            more_than_one_change: false,
            ends_withdrawn: false,
            slurm: false,
        }
    }

    /// The same history, ended by the budget with the change in commits 3–5.
    pub(crate) fn range_record() -> BisectRecord {
        let mut r = record();
        r.findings = vec![Finding::Range {
            first: 3,
            last: 5,
            probability: 0.953,
            to_settle: Some(Settle {
                blocks_80: Some(12),
                blocks_95: Some(30),
                minutes_80: Some(11.0),
                minutes_95: Some(27.5),
            }),
        }];
        r.estimates[2].probability = Some(0.62);
        r.outcome = Some(BisectOutcome::Range {
            first: 3,
            last: 5,
            cannot_tell: true,
        });
        r
    }

    #[test]
    fn a_named_commit_is_the_answer_with_its_step_and_probability() {
        let text = answer(&record());
        assert!(
            text.starts_with(
                "**The first bad commit is `4abcdef01234` Use <Vec> for the cache (2026-01-05T10:00:00+00:00)**."
            ),
            "{text}"
        );
        assert!(
            text.contains("Its cost against the commit before it on throughput: 1.0261× [1.0102–1.0423] (interval at the search's level, 6 blocks); it holds 99.1% of the probability."),
            "{text}"
        );
        assert!(
            text.contains(
                "Bad against good on throughput: cost 1.0512× [1.0398–1.0627] over 6 blocks."
            ),
            "{text}"
        );
        // Skipped, with the first line of why only.
        assert!(
            text.contains("Skipped commit 2, `2abcdef01234` commit number 2 (2026-01-03T10:00:00+00:00): it could not be measured (commit 2 does not boot: config.ru:1:in `<main>')."),
            "{text}"
        );
        assert!(!text.contains("second line"));
        assert!(!text.contains("More than one change"));
    }

    #[test]
    fn the_tables_show_every_commit_and_round() {
        let md = markdown(&record(), Some(std::time::Duration::from_secs(900)));
        // Commits in order, skipped among them, the named one marked.
        let rows: Vec<&str> = md
            .lines()
            .filter(|l| l.starts_with("| ") && l.contains("`"))
            .collect();
        let order: Vec<&str> = rows
            .iter()
            .map(|l| l.split(" | ").next().unwrap())
            .collect();
        assert_eq!(order, ["| 0", "| 2", "| 3", "| 4", "| 5", "| 6"], "{md}");
        assert!(md.contains(
            "| 4 | `4abcdef01234` Use &lt;Vec&gt; for the cache | 1.0490× [1.0390–1.0590] | 6 | 99.1% | **first bad commit** |"
        ), "{md}");
        assert!(md.contains("| 0 | `0abcdef01234` commit number 0 | 1.0000× [0.9900–1.0100] | 14 | – | good end |"), "{md}");
        assert!(md.contains("| 6 | `6abcdef01234` commit number 6 | 1.0512× [1.0412–1.0612] | 14 | 0% | bad end |"), "{md}");
        assert!(
            md.contains(
                "| 3 | `3abcdef01234` commit number 3 | 1.0020× [0.9920–1.0120] | 14 | 0.4% |  |"
            ),
            "{md}"
        );
        assert!(md.contains("| 2 | `2abcdef01234` commit number 2 |  |  | – | skipped: commit 2 does not boot: config.ru:1:in `&lt;main&gt;' |"), "{md}");
        // Rounds, 1-based, with their commits, blocks and minutes.
        assert!(
            md.contains("| round | commits | blocks | minutes |"),
            "{md}"
        );
        assert!(md.contains("| 1 | 0, 2, 3, 5, 6 | 8 | 8.0 |"), "{md}");
        assert!(md.contains("| 2 | 0, 3, 4, 6 | 6 | 5.5 |"), "{md}");
        assert!(
            md.ends_with(
                "14 blocks in 2 rounds, 13.5 minutes measuring; this session 15.0 minutes.\n"
            ),
            "{md}"
        );
        // The metric chosen, beside the one that showed nothing.
        assert!(md.contains("Searched on throughput: its regression stands out most from its per-block spread. The ends showed no regression on cpu_per_request."), "{md}");
        assert!(
            md.contains("| throughput (searched) | 1.0500× [1.0300–1.0700] | 1.20% | 4.07 | 6 |"),
            "{md}"
        );
        assert!(
            md.contains(
                "| cpu_per_request (no regression) | 1.0040× [0.9900–1.0180] | 2.00% | 0.20 | 6 |"
            ),
            "{md}"
        );
        assert!(md.contains("3 candidates per block beside the two ends (memory for 5 servers)"));
    }

    #[test]
    fn a_given_metric_is_said_as_given() {
        let mut r = record();
        r.metric_given = true;
        r.metric_chosen = false;
        r.metric_ends.clear();
        let md = markdown(&r, None);
        assert!(
            md.contains("Searched on throughput (given with `--metric`)."),
            "{md}"
        );
        assert!(!md.contains("| metric |"), "{md}");
        assert!(md.contains("13.5 minutes measuring."), "{md}");
        assert!(!md.contains("this session"));
    }

    #[test]
    fn a_range_says_what_would_settle_it() {
        let text = answer(&range_record());
        assert!(
            text.starts_with("**The first bad commit is one of commits 3–5** (`3abcdef01234` commit number 3 (2026-01-04T10:00:00+00:00) to `5abcdef01234` commit number 5 (2026-01-06T10:00:00+00:00)): the budget (60 blocks) ended with 95.3% of the probability in this range (its most probable commit of those measured: 4, `4abcdef01234`, 62.0%)."),
            "{text}"
        );
        assert!(
            text.contains("About 12 more blocks (~11 minutes) would place it with 80% probability, 30 (~28 minutes) with 95%: resume the search (`rubyrace bisect --resume`) with a larger `--max-blocks` (at least 44)."),
            "{text}"
        );
        // How many nodes: 30 blocks of 0.917 minutes, 15, 8 and 4 of them one after another.
        assert!(
            text.contains("On a fleet (`--slurm`, one block per node at each look) those 30 blocks would take ~14 minutes with 2, ~7.3 minutes with 4 and ~3.7 minutes with 8 nodes."),
            "{text}"
        );
        let mut on_a_fleet = range_record();
        on_a_fleet.slurm = true;
        assert!(!answer(&on_a_fleet).contains("On a fleet"));
        // Beyond four budgets, said so, with no command.
        let mut r = range_record();
        if let Finding::Range { to_settle, .. } = &mut r.findings[0] {
            *to_settle = Some(Settle {
                blocks_80: None,
                blocks_95: None,
                minutes_80: None,
                minutes_95: None,
            });
        }
        let text = answer(&r);
        assert!(text.contains("more than four budgets"), "{text}");
        assert!(!text.contains("--max-blocks"), "{text}");
        // A range left by commits that could not be measured says so, and nothing of a budget.
        r.outcome = Some(BisectOutcome::Range {
            first: 2,
            last: 3,
            cannot_tell: false,
        });
        let text = answer(&r);
        assert!(
            text.starts_with("**The first bad commit is one of commits 2–3**"),
            "{text}"
        );
        assert!(
            text.contains("): commits in it could not be measured (skipped)"),
            "{text}"
        );
        assert!(!text.contains("budget"), "{text}");
    }

    #[test]
    fn nothing_to_find_gives_the_ends() {
        let mut r = record();
        r.findings.clear();
        r.outcome = Some(BisectOutcome::NothingToFind { exhausted: false });
        r.ends = Some(MetricEnds {
            ratio: 1.001,
            low: 0.995,
            high: 1.007,
            ..r.ends.clone().unwrap()
        });
        let text = answer(&r);
        assert!(
            text.starts_with("**No regression to find**: the bad end's cost against good is 1.0010× [0.9950–1.0070] on throughput over 6 blocks, below the smallest change searched for (2%)."),
            "{text}"
        );
        assert!(!text.contains("Bad against good"), "{text}");
        assert!(!text.contains("withdrawn"), "{text}");
        r.ends_withdrawn = true;
        let text = answer(&r);
        assert!(text.contains("\n\nThe ends had shown a regression on throughput at an early look, which started the search; over all 6 blocks they no longer do, so that call is withdrawn and no commit is named"), "{text}");
        r.ends_withdrawn = false;
        r.outcome = Some(BisectOutcome::NothingToFind { exhausted: true });
        let text = answer(&r);
        assert!(
            text.starts_with("**No regression could be shown** within the budget (60 blocks)"),
            "{text}"
        );
        r.outcome = None;
        r.next = vec![0, 3, 6];
        r.searching = Some(results::bisect::Searching {
            lo: 0,
            hi: 6,
            most_probable: 4,
            probability: 0.71,
            first: 3,
            last: 5,
            range_probability: 0.96,
        });
        let text = answer(&r);
        assert!(text.starts_with("The search has not ended yet."), "{text}");
        assert!(text.contains("After 14 blocks in 2 rounds, searching commits 0–6: the most probable first bad commit is 4, `4abcdef01234` Use <Vec> for the cache (2026-01-05T10:00:00+00:00) (71.0%); commits 3–5 hold 96.0% of the probability."), "{text}");
        assert!(
            text.contains("The next block measures commits 0, 3, 6."),
            "{text}"
        );
    }

    #[test]
    fn several_changes_and_an_unaccounted_part_are_each_said() {
        let mut r = record();
        r.findings.push(Finding::Commit {
            commit: 6,
            probability: 0.97,
            step: StepRatio {
                ratio: 1.03,
                low: 1.01,
                high: 1.05,
                blocks: 9,
            },
        });
        r.findings.push(Finding::Unaccounted {
            lo: 0,
            hi: 3,
            up_to: 1.035,
        });
        r.outcome = Some(BisectOutcome::Changes {
            changes: vec![
                Change {
                    first: 4,
                    last: 4,
                    cannot_tell: false,
                },
                Change {
                    first: 6,
                    last: 6,
                    cannot_tell: false,
                },
            ],
        });
        r.more_than_one_change = true;
        let text = answer(&r);
        assert!(text.starts_with("**2 changes**"), "{text}");
        assert!(text.contains("\n- commit 4, `4abcdef01234`"), "{text}");
        assert!(text.contains("\n- commit 6, `6abcdef01234` commit number 6 (2026-01-07T10:00:00+00:00): its cost against the commit before it on throughput: 1.0300× [1.0100–1.0500] (interval at the search's level, 9 blocks); it holds 97.0% of the probability."), "{text}");
        assert!(text.contains("A change of up to 3.5% between commits 0 (`0abcdef01234`) and 3 (`3abcdef01234`) is not accounted for"), "{text}");
        assert!(text.contains("**More than one change**"), "{text}");
        let md = markdown(&r, None);
        assert_eq!(md.matches("**first bad commit**").count(), 2, "{md}");
    }
}
