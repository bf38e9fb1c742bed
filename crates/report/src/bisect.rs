//! A bisection's report (`rubyrace bisect`): the answer (the first bad commit, its effect
//! with its interval, the commits skipped, whether the range held more than one change)
//! and a row for every step, as Markdown (printed, and `bisect.md`); the HTML page (`bisect.html`) is
//! `render::html::bisect`, with the chart `charts::bisect`.
//! Everything comes from the search's record, `results::bisect::BisectRecord`.

use std::fmt::Write as _;

use experiment::bisect::{BisectEnd, EndsVerdict, StepVerdict};
use results::bisect::{BisectOutcome, BisectRecord};

/// One row of the steps' table.
#[derive(Clone, Debug, PartialEq)]
pub struct StepRow {
    /// "ends" or the step's number.
    pub step: String,
    /// The commit measured: its index in the history, or None for the ends.
    pub commit: Option<usize>,
    /// "12-hex subject", or "good … bad" for the ends.
    pub what: String,
    /// The step's own ends, "good..bad" (commit indices); empty for the ends.
    pub range: String,
    /// θ and its interval, as text.
    pub theta: String,
    /// The measured commit's cost against its step's good end (the bad end's against good,
    /// for the ends), with its interval: (ratio, low, high).
    pub ratio: Option<(f64, Option<f64>, Option<f64>)>,
    pub blocks: u32,
    pub minutes: f64,
    pub decision: String,
}

/// Every step of the search, in the order it ran (steps still running included).
pub fn rows(record: &BisectRecord) -> Vec<StepRow> {
    let mut rows = Vec::new();
    let mut n = 0;
    for step in &record.steps {
        let (label, what, range) = match step.commit {
            None => (
                "ends".to_string(),
                "good against bad".to_string(),
                String::new(),
            ),
            Some(c) => {
                n += 1;
                let (good, bad) = record.ends_of(step);
                (
                    n.to_string(),
                    format!("{c}: {}", record.short(c)),
                    format!("{good}..{bad}"),
                )
            }
        };
        let mut row = StepRow {
            step: label,
            commit: step.commit,
            what,
            range,
            theta: String::new(),
            ratio: None,
            blocks: step.end.as_ref().map(BisectEnd::blocks).unwrap_or(0),
            minutes: step.measuring_s / 60.0,
            decision: "not decided (interrupted)".into(),
        };
        match &step.end {
            Some(BisectEnd::Ends(d)) => {
                row.ratio = d.ratio.map(|r| (r, d.low, d.high));
                row.decision = match d.verdict {
                    EndsVerdict::Regression => "regression: search".into(),
                    EndsVerdict::NoRegression => "no regression to find".into(),
                    EndsVerdict::Continue => "not decided".into(),
                };
            }
            Some(BisectEnd::Step(d)) => {
                row.theta = match (d.theta, d.theta_low, d.theta_high) {
                    (Some(t), Some(lo), Some(hi)) => format!("{t:.2} [{lo:.2}–{hi:.2}]"),
                    (Some(t), ..) => format!("{t:.2} [unbounded]"),
                    _ => String::new(),
                };
                row.ratio = d.ratio_to_good.map(|r| (r, d.ratio_low, d.ratio_high));
                row.decision = match d.verdict {
                    StepVerdict::Bad => "bad".into(),
                    StepVerdict::Good => "good".into(),
                    StepVerdict::CannotTell => "cannot tell at this precision".into(),
                    StepVerdict::Continue => "not decided".into(),
                };
                if d.partial {
                    row.decision
                        .push_str("; part of its range's regression only: both sides searched");
                }
            }
            Some(BisectEnd::Unmeasurable { reason, .. }) => {
                row.decision = format!("skipped: {}", first_line(reason));
            }
            None => {}
        }
        rows.push(row);
    }
    rows
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

/// `1.1523× [1.1302–1.1749]`, or the ratio alone.
pub fn ratio_text(ratio: Option<(f64, Option<f64>, Option<f64>)>) -> String {
    match ratio {
        Some((r, Some(lo), Some(hi))) => format!("{r:.4}× [{lo:.4}–{hi:.4}]"),
        Some((r, ..)) => format!("{r:.4}×"),
        None => String::new(),
    }
}

/// The answer, in sentences (Markdown).
pub fn answer(record: &BisectRecord) -> String {
    let confidence = record
        .ends()
        .map(|d| format!("{:.2}%", 100.0 * d.confidence))
        .unwrap_or_default();
    let commit_line = |c: usize| {
        let info = &record.commits[c];
        format!(
            "`{}` {} ({})",
            &info.hash[..12.min(info.hash.len())],
            info.subject,
            info.date
        )
    };
    // " on METRIC: 1.1523× [1.1302–1.1749] (99.88% interval)": what commit `c` costs
    // against the commit before it (for an older record, against good).
    let effect_text = |c: usize| {
        let (r, lo, hi) = c
            .checked_sub(1)
            .and_then(|before| record.effect(before, c))
            .or_else(|| {
                record
                    .step_of(c)
                    .and_then(|d| d.ratio_to_good.map(|r| (r, d.ratio_low, d.ratio_high)))
            })?;
        Some(format!(
            " on {}: {} ({confidence} interval)",
            record.metric.name(),
            ratio_text(Some((r, lo, hi)))
        ))
    };
    let mut out = String::new();
    match &record.outcome {
        None => out.push_str("The search has not ended yet.\n"),
        Some(BisectOutcome::NothingToFind) => {
            let figures = record
                .ends()
                .map(|d| {
                    format!(
                        ": bad/good cost {} ({confidence} interval) over {} blocks",
                        ratio_text(d.ratio.map(|r| (r, d.low, d.high))),
                        d.blocks
                    )
                })
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "**No regression to find between these commits at this precision**{figures}."
            );
        }
        Some(BisectOutcome::Commit { commit }) => {
            let _ = writeln!(
                out,
                "**The first bad commit is {}**.\n",
                commit_line(*commit)
            );
            if let Some(effect) = effect_text(*commit) {
                let _ = writeln!(out, "Its cost against the commit before it{effect}.");
            }
        }
        Some(BisectOutcome::Range {
            first,
            last,
            cannot_tell,
        }) => {
            let why = if *cannot_tell {
                "a step could not tell at this precision, so the search stopped here, with the range it had narrowed (never a guess)"
            } else {
                "the commits between could not be measured"
            };
            let _ = writeln!(
                out,
                "**The first bad commit is one of commits {first}–{last}** ({} to {}): {why}.",
                commit_line(*first),
                commit_line(*last)
            );
        }
        Some(BisectOutcome::Changes { changes }) => {
            let _ = writeln!(
                out,
                "**{} changes**, each searched apart (a step's commit had only part of its range's regression):\n",
                changes.len()
            );
            for change in changes {
                let effect = effect_text(change.last).unwrap_or_default();
                if change.first == change.last {
                    let _ = writeln!(
                        out,
                        "- commit {}, {}: cost against the commit before it{effect}\n",
                        change.first,
                        commit_line(change.first)
                    );
                } else {
                    let why = if change.cannot_tell {
                        "a step could not tell at this precision"
                    } else {
                        "the commits between could not be measured"
                    };
                    let _ = writeln!(
                        out,
                        "- one of commits {}–{} ({} to {}): {why}\n",
                        change.first,
                        change.last,
                        commit_line(change.first),
                        commit_line(change.last)
                    );
                }
            }
        }
    }
    if let Some(d) = record.ends() {
        let _ = writeln!(
            out,
            "\nBad against good: cost {} on {} ({confidence} interval), {} blocks.",
            ratio_text(d.ratio.map(|r| (r, d.low, d.high))),
            record.metric.name(),
            d.blocks
        );
    }
    if record.more_than_one_change {
        out.push_str(
            "\n**More than one change**: a step's commit had only part of its range's \
regression (θ's interval clear of both 0 and 1), so the range held more than one change, \
or a gradual one; each side was searched for its own. A gradual change shows as a run of \
small ones, or as ranges that could not be told apart.\n",
        );
    }
    for (c, reason) in &record.skipped {
        let _ = writeln!(
            out,
            "\nSkipped commit {c}, {}: it could not be measured ({}).",
            commit_line(*c),
            first_line(reason)
        );
    }
    out
}

/// The whole Markdown report: the answer, the steps' table, the totals (with the time of
/// the session that ended the search, when it is the one printing).
pub fn markdown(record: &BisectRecord, elapsed: Option<std::time::Duration>) -> String {
    let mut out = format!(
        "## rubyrace bisect: {} commits, {} .. {}\n\n",
        record.commits.len(),
        record.good_ref,
        record.bad_ref
    );
    out.push_str(&answer(record));
    out.push_str(
        "\n| step | commit | range | θ [interval] | cost against its good end | blocks | minutes | decision |\n\
|---|---|---|---|---|---|---|---|\n",
    );
    let rows = rows(record);
    for r in &rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {:.1} | {} |",
            r.step,
            r.what.replace('|', "\\|"),
            r.range,
            r.theta,
            ratio_text(r.ratio),
            r.blocks,
            r.minutes,
            r.decision.replace('|', "\\|")
        );
    }
    let blocks: u32 = rows.iter().map(|r| r.blocks).sum();
    let minutes: f64 = rows.iter().map(|r| r.minutes).sum();
    let session = elapsed
        .map(|e| format!("; this session {:.1} minutes", e.as_secs_f64() / 60.0))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "\n{} steps and the ends, {blocks} blocks, {minutes:.1} minutes measuring{session}.",
        rows.len().saturating_sub(1),
    );
    out
}
