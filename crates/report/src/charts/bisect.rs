//! A bisection's chart (the k-section search of issue 48): in commit order, every measured
//! commit's cost against the good end with its 95% interval (from every block that measured
//! both), the good end's level and the smallest change searched for as lines, each named
//! first bad commit marked, the answer shaded (a commit, a range, or each of several
//! changes), skipped commits crossed on the axis; and under it, a bar per measured commit:
//! the probability that it is the first bad one.

use std::fmt::Write as _;

use results::bisect::{BisectOutcome, BisectRecord, CommitEstimate, Finding};

use super::svg::{
    c, caption, document, label, linear, nice_ticks, x_axis, y_axis, zero_based_ticks, Scale,
};
use super::{INK, MUTED, PALETTE, WIDTH};

const MEASURED: &str = PALETTE[0];
const GOOD: &str = PALETTE[2];
const BAD: &str = PALETTE[5];

/// The chart's SVG; None before any commit has an estimate.
pub fn bisect(record: &BisectRecord) -> Option<String> {
    if record.estimates.is_empty() || record.commits.is_empty() {
        return None;
    }
    let layout = Layout::of(record);
    let mut b = String::new();
    axes(&mut b, record, &layout);
    reference_lines(&mut b, record, &layout);
    answer_bands(&mut b, record, &layout);
    skipped_marks(&mut b, record, &layout);
    let mut estimates: Vec<_> = record
        .estimates
        .iter()
        .filter(|e| e.commit <= layout.last)
        .collect();
    estimates.sort_by_key(|e| e.commit);
    for e in &estimates {
        estimate_mark(&mut b, record, &layout, e);
    }
    probability_panel(&mut b, &layout, &estimates);

    let text = format!(
        "Top: each measured commit's {} cost against the good end (mean per-block log ratio over every block that measured both, with its 95% interval widened for dependence); above 1× is slower. The dashed line is the smallest change the search looks for. A diamond is a named first bad commit, × a commit skipped because it did not build or boot, and a shaded band the answer (one per change). Bottom: the probability that each measured commit is the first bad one; commits never measured share their neighbours' probability, so the bars need not add up to 100%.",
        record.metric.name()
    );
    let end = caption(&mut b, &text, "", layout.p_bottom + 58.0, WIDTH);
    Some(document(
        "bisect",
        "Where the regression came in",
        "Cost against good of each commit a bisection measured, in commit order, with intervals, and each commit's probability of being the first bad one",
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

/// Where everything goes: the two panels' edges, the scales, the cost axis's ticks, and
/// what is marked (the last commit, the named commits, the smallest change's level).
struct Layout {
    /// The last commit's index.
    last: usize,
    /// The named first bad commits.
    named: Vec<usize>,
    /// The smallest change searched for, as a cost against good (1 + min change).
    line: f64,
    /// The cost axis's ticks, from `y0` to `y1`.
    ticks: Vec<f64>,
    y0: f64,
    y1: f64,
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
    p_top: f64,
    p_bottom: f64,
    x: Scale,
    y: Scale,
    /// The commit axis's ticks, the same on both panels.
    x_ticks: Vec<(f64, String)>,
}

impl Layout {
    /// The layout of `record`'s chart (it has at least one commit and one estimate).
    fn of(record: &BisectRecord) -> Layout {
        let last = record.commits.len() - 1;
        let named: Vec<usize> = record
            .findings
            .iter()
            .filter_map(|f| match f {
                Finding::Commit { commit, .. } => Some(*commit),
                _ => None,
            })
            .collect();
        let line = 1.0 + record.min_change;
        let lo = record
            .estimates
            .iter()
            .map(|e| e.low.unwrap_or(e.ratio).min(e.ratio))
            .fold(1.0f64, f64::min);
        let hi = record
            .estimates
            .iter()
            .map(|e| e.high.unwrap_or(e.ratio).max(e.ratio))
            .fold(line, f64::max);
        let pad = (hi - lo).max(0.01) * 0.08;
        let ticks = nice_ticks(lo - pad, hi + pad, 6);
        let (y0, y1) = (ticks[0], *ticks.last().unwrap());

        let left = 74.0;
        let right = WIDTH - 28.0;
        let top = 64.0;
        let bottom = top + 260.0;
        // The probabilities' panel, under the first one's axis.
        let p_top = bottom + 64.0;
        let p_bottom = p_top + 110.0;
        let x_ticks: Vec<(f64, String)> = nice_ticks(0.0, last.max(1) as f64, 10)
            .into_iter()
            .filter(|t| *t <= last as f64 && t.fract() == 0.0)
            .map(|t| (t, format!("{t:.0}")))
            .collect();
        Layout {
            last,
            named,
            line,
            y0,
            y1,
            left,
            right,
            top,
            bottom,
            p_top,
            p_bottom,
            x: Scale::new(-0.5, last as f64 + 0.5, left, right),
            y: Scale::new(y0, y1, bottom, top),
            ticks,
            x_ticks,
        }
    }
}

/// The top panel's axes: the cost against good, and the commits in history order.
fn axes(b: &mut String, record: &BisectRecord, l: &Layout) {
    let (y0, y1) = (l.y0, l.y1);
    let decimals = super::svg::tick_decimals(&l.ticks);
    let labelled: Vec<(f64, String)> = l
        .ticks
        .iter()
        .map(|t| (*t, format!("{t:.decimals$}×")))
        .collect();
    y_axis(
        b,
        l.y,
        &labelled,
        l.left,
        l.right,
        &format!("cost against good ({}), from {y0}", record.metric.name()),
        linear(y0, y1),
    );
    x_axis(
        b,
        l.x,
        &l.x_ticks,
        l.top,
        l.bottom,
        "commit, in history order (0 = good)",
        linear(-0.5, l.last as f64 + 0.5),
    );
}

/// The good end's level, and the smallest change searched for above it, each named.
fn reference_lines(b: &mut String, record: &BisectRecord, l: &Layout) {
    for (name, level, dash, text) in [
        ("good", 1.0, "", "good end".to_string()),
        (
            "min-change",
            l.line,
            " stroke-dasharray=\"4 3\"",
            format!(
                "smallest change searched for ({})",
                crate::format::confidence_text(record.min_change)
            ),
        ),
    ] {
        let _ = write!(
            b,
            "<line data-line=\"{name}\" x1=\"{}\" y1=\"{h}\" x2=\"{}\" y2=\"{h}\" stroke=\"{MUTED}\"{dash}/>",
            c(l.left),
            c(l.right),
            h = c(l.y.at(level)),
        );
        // The good end's name below its line, the smallest change's above its own: the
        // two lines are a few percent apart, and the names would overlap.
        let offset = if name == "good" { 13.0 } else { -5.0 };
        label(l.right - 4.0, l.y.at(level) + offset)
            .end()
            .size(11.0)
            .muted()
            .draw(b, &text);
    }
}

/// The answer: a band over the first bad commit (or the range), or over each change,
/// through both panels.
fn answer_bands(b: &mut String, record: &BisectRecord, l: &Layout) {
    let answers: Vec<(usize, usize)> = match &record.outcome {
        Some(BisectOutcome::Commit { commit }) => vec![(*commit, *commit)],
        Some(BisectOutcome::Range { first, last, .. }) => vec![(*first, *last)],
        Some(BisectOutcome::Changes { changes }) => {
            changes.iter().map(|c| (c.first, c.last)).collect()
        }
        _ => Vec::new(),
    };
    let x = l.x;
    for (first, last_in) in answers {
        let _ = write!(
            b,
            "<rect data-answer=\"{first}-{last_in}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{BAD}\" fill-opacity=\"0.10\"/>",
            c(x.at(first as f64 - 0.5)),
            c(l.top),
            c(x.at(last_in as f64 + 0.5) - x.at(first as f64 - 0.5)),
            c(l.p_bottom - l.top),
        );
    }
}

/// A cross on the commit axis for each commit skipped (it did not build or boot).
fn skipped_marks(b: &mut String, record: &BisectRecord, l: &Layout) {
    for (commit, _) in &record.skipped {
        let (cx, cy) = (l.x.at(*commit as f64), l.bottom - 10.0);
        let _ = write!(
            b,
            "<path data-skipped=\"{commit}\" d=\"M{} {}L{} {}M{} {}L{} {}\" stroke=\"{MUTED}\" stroke-width=\"2\"><title>commit {commit}: skipped (did not build or boot)</title></path>",
            c(cx - 5.0), c(cy - 5.0), c(cx + 5.0), c(cy + 5.0),
            c(cx - 5.0), c(cy + 5.0), c(cx + 5.0), c(cy - 5.0),
        );
    }
}

/// One measured commit's mark: its interval, and a dot (a labelled diamond when it is a
/// named first bad commit) with its figures as a tooltip.
fn estimate_mark(b: &mut String, record: &BisectRecord, l: &Layout, e: &CommitEstimate) {
    let (x, y) = (l.x, l.y);
    let commit = e.commit;
    let is_named = l.named.contains(&commit);
    let colour = if commit == 0 {
        GOOD
    } else if is_named {
        BAD
    } else {
        MEASURED
    };
    let cx = x.at(commit as f64);
    let _ = write!(b, "<g data-commit=\"{commit}\"");
    if is_named {
        b.push_str(" data-named=\"true\"");
    }
    b.push('>');
    if let (Some(lo), Some(hi)) = (e.low, e.high) {
        let _ = write!(
            b,
            "<line x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\" stroke=\"{colour}\" stroke-width=\"2\"/>",
            c(y.at(lo)),
            c(y.at(hi)),
            x = c(cx),
        );
    }
    let interval = match (e.low, e.high) {
        (Some(lo), Some(hi)) => format!(" [{lo:.4}–{hi:.4}]"),
        _ => String::new(),
    };
    let probability = e
        .probability
        .map(|p| format!(", first bad: {}", crate::bisect::probability_text(p)))
        .unwrap_or_default();
    let tooltip = format!(
        "commit {commit} {}: {:.4}×{interval} against good, {} blocks{probability}{}",
        record.short(commit),
        e.ratio,
        e.blocks,
        if is_named { " (first bad commit)" } else { "" }
    );
    if is_named {
        // A named commit is a diamond, not a dot: not told apart by colour alone.
        let (px, py, size) = (cx, y.at(e.ratio), 6.5);
        let _ = write!(
            b,
            "<path d=\"M{} {}L{} {}L{} {}L{} {}Z\" fill=\"{colour}\" stroke=\"{INK}\" stroke-width=\"0.5\"><title>",
            c(px), c(py - size), c(px + size), c(py), c(px), c(py + size), c(px - size), c(py),
        );
        b.push_str(&crate::format::escape(&tooltip));
        b.push_str("</title></path>");
        label(px, py - size - 6.0)
            .middle()
            .size(11.0)
            .bold(true)
            .halo()
            .draw(b, "first bad");
    } else {
        let _ = write!(
            b,
            "<circle cx=\"{}\" cy=\"{}\" r=\"5\" fill=\"{colour}\" stroke=\"{INK}\" stroke-width=\"0.5\"><title>",
            c(cx),
            c(y.at(e.ratio)),
        );
        b.push_str(&crate::format::escape(&tooltip));
        b.push_str("</title></circle>");
    }
    b.push_str("</g>");
}

/// The probabilities' panel: its axes, and a bar per measured commit with the probability
/// that it is the first bad one.
fn probability_panel(b: &mut String, l: &Layout, estimates: &[&CommitEstimate]) {
    let (left, right, p_top, p_bottom, x) = (l.left, l.right, l.p_top, l.p_bottom, l.x);
    let max_p = estimates
        .iter()
        .filter_map(|e| e.probability)
        .fold(0.0f64, f64::max);
    let (p_ticks, p_max) = zero_based_ticks((100.0 * max_p).clamp(1.0, 100.0), 4, "%");
    let p_y = Scale::new(0.0, p_max, p_bottom, p_top);
    y_axis(
        b,
        p_y,
        &p_ticks,
        left,
        right,
        "first bad (probability)",
        linear(0.0, p_max),
    );
    x_axis(
        b,
        x,
        &l.x_ticks,
        p_top,
        p_bottom,
        "commit",
        linear(-0.5, l.last as f64 + 0.5),
    );
    let bar = ((right - left) / (l.last as f64 + 1.0) * 0.7).clamp(1.0, 24.0);
    for e in estimates {
        let Some(p) = e.probability else { continue };
        let (cx, h) = (x.at(e.commit as f64), p_y.at(0.0) - p_y.at(100.0 * p));
        let colour = if l.named.contains(&e.commit) {
            BAD
        } else {
            MEASURED
        };
        let _ = write!(
            b,
            "<rect data-probability=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{colour}\" fill-opacity=\"0.8\"><title>",
            e.commit,
            c(cx - bar / 2.0),
            c(p_bottom - h),
            c(bar),
            c(h),
        );
        b.push_str(&crate::format::escape(&format!(
            "commit {}: first bad with probability {}",
            e.commit,
            crate::bisect::probability_text(p)
        )));
        b.push_str("</title></rect>");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bisect::tests::{range_record, record};

    #[test]
    fn one_mark_per_estimate_and_bar_per_probability() {
        let r = record();
        let svg = bisect(&r).expect("a chart");
        assert!(svg.starts_with("<svg") && svg.contains("data-chart=\"bisect\""));
        assert_eq!(
            svg.matches("<g data-commit=").count(),
            r.estimates.len(),
            "{svg}"
        );
        for e in &r.estimates {
            assert!(svg.contains(&format!("<g data-commit=\"{}\"", e.commit)));
        }
        // The good end has no probability: four bars.
        assert_eq!(svg.matches("data-probability=").count(), 4, "{svg}");
        // The named commit is marked, once, and is the answer.
        assert_eq!(svg.matches("data-named=\"true\"").count(), 1);
        assert!(svg.contains("<g data-commit=\"4\" data-named=\"true\">"));
        assert!(svg.contains("data-answer=\"4-4\""));
        assert!(svg.contains("data-skipped=\"2\""));
        // Subjects are escaped in the tooltips.
        assert!(svg.contains("Use &lt;Vec&gt; for the cache"));
        assert!(!svg.contains("<Vec>"));
        assert!(svg.contains("first bad: 99.1%"));
    }

    #[test]
    fn a_range_is_shaded_and_no_estimates_draw_nothing() {
        let svg = bisect(&range_record()).unwrap();
        assert!(svg.contains("data-answer=\"3-5\""));
        assert!(!svg.contains("data-named"));
        let mut r = record();
        r.estimates.clear();
        assert!(bisect(&r).is_none());
    }
}
