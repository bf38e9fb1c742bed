//! A bisection's chart: every measured commit's cost against good, in commit order, with
//! its interval; the good end at 1, the bad end from the ends; the line θ = ½ (halfway to
//! bad, where the first step decides), skipped commits marked on the axis, and the answer
//! (each change, when there are several) marked. A step measures its candidate against its
//! own range's ends: its cost against good is that step's ratio times its good end's cost
//! against good (chained on the point estimates), and the interval drawn is the step's own,
//! placed the same way.

use std::fmt::Write as _;

use experiment::bisect::{BisectEnd, StepVerdict};
use results::bisect::{BisectOutcome, BisectRecord};

use super::svg::{c, caption, document, label, linear, nice_ticks, x_axis, y_axis, Scale};
use super::{INK, MUTED, PALETTE, WIDTH};

const GOOD: &str = PALETTE[2];
const BAD: &str = PALETTE[5];
const UNSURE: &str = PALETTE[6];

/// A measured commit: its index, cost against good with its interval, colour and verdict.
struct Point {
    commit: usize,
    ratio: f64,
    low: Option<f64>,
    high: Option<f64>,
    colour: &'static str,
    what: &'static str,
}

/// The chart's SVG; None before the ends have a figure.
pub fn bisect(record: &BisectRecord) -> Option<String> {
    let ends = record.ends()?;
    let bad = ends.ratio?;
    let last = record.commits.len() - 1;
    let mut points = vec![
        Point {
            commit: 0,
            ratio: 1.0,
            low: None,
            high: None,
            colour: GOOD,
            what: "good end",
        },
        Point {
            commit: last,
            ratio: bad,
            low: ends.low,
            high: ends.high,
            colour: BAD,
            what: "bad end",
        },
    ];
    // Each measured commit's cost against good, chained from its step's ends.
    let mut against_good = std::collections::BTreeMap::from([(0usize, 1.0f64), (last, bad)]);
    for step in &record.steps {
        if let (Some(commit), Some(BisectEnd::Step(d))) = (step.commit, &step.end) {
            let (good_end, bad_end) = record.ends_of(step);
            // The factor that puts the step's ratios against good, and the ratio itself.
            let placed = match (against_good.get(&good_end), against_good.get(&bad_end)) {
                (Some(g), _) => d.ratio_to_good.map(|r| (*g, r)),
                (None, Some(b)) => d
                    .bad_to_candidate
                    .zip(d.ratio_to_good)
                    .map(|(rest, r)| (*b / rest / r, r)),
                _ => None,
            };
            if let Some((factor, r)) = placed {
                against_good.insert(commit, factor * r);
                let colour = match d.verdict {
                    StepVerdict::Bad => BAD,
                    StepVerdict::Good => GOOD,
                    _ => UNSURE,
                };
                let verdict = match d.verdict {
                    StepVerdict::Bad => "bad",
                    StepVerdict::Good => "good",
                    _ => "cannot tell",
                };
                points.push(Point {
                    commit,
                    ratio: factor * r,
                    low: d.ratio_low.map(|l| factor * l),
                    high: d.ratio_high.map(|h| factor * h),
                    colour,
                    what: verdict,
                });
            }
        }
    }
    let lo = points
        .iter()
        .map(|p| p.low.unwrap_or(p.ratio))
        .fold(1.0f64, f64::min);
    let hi = points
        .iter()
        .map(|p| p.high.unwrap_or(p.ratio))
        .fold(bad, f64::max);
    let pad = (hi - lo).max(0.01) * 0.08;
    let ticks = nice_ticks(lo - pad, hi + pad, 6);
    let (y0, y1) = (ticks[0], *ticks.last().unwrap());

    let left = 74.0;
    let right = WIDTH - 28.0;
    let top = 64.0;
    let bottom = top + 280.0;
    let x = Scale::new(-0.5, last as f64 + 0.5, left, right);
    let y = Scale::new(y0, y1, bottom, top);
    let mut b = String::new();
    let decimals = super::svg::tick_decimals(&ticks);
    let labelled: Vec<(f64, String)> = ticks
        .iter()
        .map(|t| (*t, format!("{t:.decimals$}×")))
        .collect();
    y_axis(
        &mut b,
        Scale::new(y0, y1, bottom, top),
        &labelled,
        left,
        right,
        &format!("cost against good ({}), from {y0}", record.metric.name()),
        linear(y0, y1),
    );
    let x_ticks: Vec<(f64, String)> = nice_ticks(0.0, last as f64, 10)
        .into_iter()
        .filter(|t| *t <= last as f64 && t.fract() == 0.0)
        .map(|t| (t, format!("{t:.0}")))
        .collect();
    x_axis(
        &mut b,
        Scale::new(-0.5, last as f64 + 0.5, left, right),
        &x_ticks,
        top,
        bottom,
        "commit, in history order (0 = good)",
        linear(-0.5, last as f64 + 0.5),
    );
    // θ = ½: halfway to bad on the log scale, where a step decides.
    let half = bad.sqrt();
    let _ = write!(
        b,
        "<line data-line=\"half\" x1=\"{}\" y1=\"{h}\" x2=\"{}\" y2=\"{h}\" stroke=\"{MUTED}\" stroke-dasharray=\"4 3\"/>",
        c(left),
        c(right),
        h = c(y.at(half)),
    );
    label(right - 4.0, y.at(half) - 5.0)
        .end()
        .size(11.0)
        .muted()
        .draw(&mut b, "θ = ½: halfway to bad");
    // The answer: a band over the first bad commit (or the range), or over each change.
    let answers: Vec<(usize, usize)> = match &record.outcome {
        Some(BisectOutcome::Commit { commit }) => vec![(*commit, *commit)],
        Some(BisectOutcome::Range { first, last, .. }) => vec![(*first, *last)],
        Some(BisectOutcome::Changes { changes }) => {
            changes.iter().map(|c| (c.first, c.last)).collect()
        }
        _ => Vec::new(),
    };
    for (first, last_in) in answers {
        let _ = write!(
            b,
            "<rect data-answer=\"{first}-{last_in}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{BAD}\" fill-opacity=\"0.10\"/>",
            c(x.at(first as f64 - 0.5)),
            c(top),
            c(x.at(last_in as f64 + 0.5) - x.at(first as f64 - 0.5)),
            c(bottom - top),
        );
    }
    for (commit, _) in &record.skipped {
        let (cx, cy) = (x.at(*commit as f64), bottom - 10.0);
        let _ = write!(
            b,
            "<path data-skipped=\"{commit}\" d=\"M{} {}L{} {}M{} {}L{} {}\" stroke=\"{MUTED}\" stroke-width=\"2\"><title>commit {commit}: skipped (did not build or boot)</title></path>",
            c(cx - 5.0), c(cy - 5.0), c(cx + 5.0), c(cy + 5.0),
            c(cx - 5.0), c(cy + 5.0), c(cx + 5.0), c(cy - 5.0),
        );
    }
    for p in &points {
        let (commit, r, colour, what) = (p.commit, p.ratio, p.colour, p.what);
        let cx = x.at(commit as f64);
        let _ = write!(b, "<g data-commit=\"{commit}\">");
        if let (Some(lo), Some(hi)) = (p.low, p.high) {
            let _ = write!(
                b,
                "<line x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\" stroke=\"{colour}\" stroke-width=\"2\"/>",
                c(y.at(lo)),
                c(y.at(hi)),
                x = c(cx),
            );
        }
        let _ = write!(
            b,
            "<circle cx=\"{}\" cy=\"{}\" r=\"5\" fill=\"{colour}\" stroke=\"{INK}\" stroke-width=\"0.5\"><title>",
            c(cx),
            c(y.at(r)),
        );
        b.push_str(&crate::format::escape(&format!(
            "commit {commit} {}: {r:.4}× ({what})",
            record.short(commit)
        )));
        b.push_str("</title></circle></g>");
    }
    let text = format!(
        "Each measured commit's {} cost against the good end: its step's ratio against that step's own good end (geometric mean over the step's blocks, with the step's interval), times that end's cost against good; the bad end's is from the ends. The first step calls its commit bad above the dashed line (halfway) and good below it, when the interval says so; later steps decide halfway between their own ends. × marks a commit skipped because it did not build or boot; a shaded band is the answer (one per change).",
        record.metric.name()
    );
    let end = caption(&mut b, &text, "", bottom + 58.0, WIDTH);
    Some(document(
        "bisect",
        "Where the regression came in",
        "Cost against good of each commit a bisection measured, in commit order, with intervals",
        &format!(
            "{} commits, {} .. {}",
            record.commits.len(),
            record.good_ref,
            record.bad_ref
        ),
        WIDTH,
        end + 12.0,
        &b,
    ))
}
