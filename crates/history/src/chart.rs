//! A series' chart on its experiment's page (docs/history.md, "The pages"): every point in
//! commit order with its interval as a band, the level of each stretch between changes as
//! a dashed line, each change marked with its size, each point a link to its run's report
//! with the commit's subject on hover; and the small sparkline of the board's index. Drawn
//! with the report's chart helpers (`report::charts::svg`), which escape every label.

use std::fmt::Write as _;

use report::charts::svg::{
    c, caption, document, label, linear, nice_ticks, tick_decimals, x_axis, y_axis, Scale,
};
use report::charts::{INK, MUTED, PALETTE, WIDTH};
use report::format::escape;

use crate::import::PointKind;
use crate::series::{Analysis, Change, Series, SeriesPoint};

const POINTS: &str = PALETTE[0];
const WORSE: &str = PALETTE[5];
const BETTER: &str = PALETTE[2];

/// Where a point links: its run's report, when there is one to link to.
pub type Link<'a> = &'a dyn Fn(&SeriesPoint) -> Option<String>;

/// The series' figure with its unit: `1.023×` for a ratio, `1,234` for an absolute one.
pub fn figure(series: &Series, v: f64) -> String {
    match series.kind {
        PointKind::Ratio => format!("{v:.3}×"),
        PointKind::Absolute => report::format::fmt_sig(v),
    }
}

/// A change's size as a signed percentage: `+5.1%`, `−3.0%`.
pub fn percent(factor: f64) -> String {
    let p = (factor - 1.0) * 100.0;
    if p < 0.0 {
        format!("−{:.1}%", -p)
    } else {
        format!("+{p:.1}%")
    }
}

/// A change's p-value: every change has one of at most the detector's threshold (0.001),
/// so in full: `4.5e-6`, and `<1e-15` below what a double tells apart from 0.
pub fn p_value_text(p: f64) -> String {
    if p < 1e-15 {
        "<1e-15".into()
    } else {
        format!("{p:.1e}")
    }
}

/// A point's tooltip: its commit and subject, its figure with its interval, its blocks and
/// when it ran.
pub fn point_tooltip(series: &Series, p: &SeriesPoint) -> String {
    format!(
        "{} {}\n{} [{}–{}] at {:.0}%, {} blocks\nrun {}",
        p.commit_short(),
        p.subject,
        figure(series, p.value),
        figure(series, p.lo),
        figure(series, p.hi),
        p.confidence * 100.0,
        p.blocks,
        p.created_at
    )
}

/// The chart of `series` with its `changes`; `name` is its `data-chart` (unique on a page).
/// Drawn in layers: axes, the interval band and line, the changes, the points, the levels.
pub fn series_chart(series: &Series, found: &Analysis, name: &str, link: Link) -> String {
    let changes = &found.changes;
    let frame = Frame::of(series);
    let mut b = String::new();
    axes(&mut b, series, &frame);
    band_and_line(&mut b, series, &frame);
    for (k, ch) in changes.iter().enumerate() {
        change_mark(&mut b, ch, k, &frame);
    }
    point_marks(&mut b, series, &frame, link);
    levels(&mut b, series, found, &frame);
    let points = &series.points;
    let text = match series.kind {
        PointKind::Ratio => "Each point is a run: the configuration against its baseline in the same run, with its 95% interval as the band. Dashed lines are the level of each stretch between changes (the geometric mean of its points), or the line of a drift (a slide, no one commit); a change is marked where it came in, with its size and 95% interval. A point links to its run's report; hover for its commit.",
        PointKind::Absolute => "Each point is a run: the configuration's own figure on this kind of host, with its 95% interval as the band. Dashed lines are the level of each stretch between changes (the geometric mean of its points), or the line of a drift (a slide, no one commit); a change is marked where it came in, with its size and 95% interval. A point links to its run's report; hover for its commit.",
    };
    let end = caption(&mut b, text, "", frame.bottom + 58.0, WIDTH);
    let subtitle = match (points.first(), points.last()) {
        (Some(first), Some(last)) => format!(
            "{} points, {} .. {}{}",
            points.len(),
            short(first),
            short(last),
            series
                .host_kind
                .as_deref()
                .map(|h| format!(" · host {h}"))
                .unwrap_or_default()
        ),
        _ => String::new(),
    };
    document(
        name,
        &format!("{} · {}", series.label, series.metric),
        &format!(
            "{} in commit order, with intervals and change points",
            series.key
        ),
        &subtitle,
        WIDTH,
        end + 12.0,
        &b,
    )
}

/// Where the chart's panel is, its scales, and the value axis's ticks.
struct Frame {
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
    x: Scale,
    y: Scale,
    ticks: Vec<f64>,
    /// Points (at least 1, so the scales stay finite).
    n: usize,
}

impl Frame {
    fn of(series: &Series) -> Frame {
        let points = &series.points;
        let n = points.len().max(1);
        let (left, right, top, bottom) = (74.0, WIDTH - 28.0, 64.0, 64.0 + 240.0);
        let mut lo = points
            .iter()
            .map(|p| p.lo.min(p.value))
            .fold(f64::INFINITY, f64::min);
        let mut hi = points
            .iter()
            .map(|p| p.hi.max(p.value))
            .fold(f64::NEG_INFINITY, f64::max);
        if series.kind == PointKind::Ratio {
            (lo, hi) = (lo.min(1.0), hi.max(1.0));
        }
        let pad = ((hi - lo).abs() * 0.06).max(hi.abs() * 1e-3);
        // Neither a ratio nor a figure of these metrics is below 0.
        let ticks = nice_ticks((lo - pad).max(0.0), hi + pad, 6);
        let (y0, y1) = (ticks[0], *ticks.last().unwrap_or(&1.0));
        Frame {
            left,
            right,
            top,
            bottom,
            x: Scale::new(-0.5, n as f64 - 0.5, left, right),
            y: Scale::new(y0, y1, bottom, top),
            ticks,
            n,
        }
    }
}

/// The value axis (× for a ratio), the commit axis (a commit's first seven characters at
/// its ticks), and the baseline's line at 1× for a ratio.
fn axes(b: &mut String, series: &Series, f: &Frame) {
    let (y0, y1) = (f.ticks[0], *f.ticks.last().unwrap_or(&1.0));
    let decimals = tick_decimals(&f.ticks);
    let labelled: Vec<(f64, String)> = f
        .ticks
        .iter()
        .map(|t| match series.kind {
            PointKind::Ratio => (*t, format!("{t:.decimals$}×")),
            PointKind::Absolute => (*t, report::format::fmt_sig(*t)),
        })
        .collect();
    let y_title = match series.kind {
        PointKind::Ratio => format!("{} against the baseline", series.metric),
        PointKind::Absolute => series.metric.clone(),
    };
    y_axis(b, f.y, &labelled, f.left, f.right, &y_title, linear(y0, y1));
    let n = f.n;
    let x_ticks: Vec<(f64, String)> = nice_ticks(0.0, (n - 1).max(1) as f64, 8)
        .into_iter()
        .filter(|t| *t <= (n - 1) as f64 && t.fract() == 0.0)
        .map(|t| {
            (
                t,
                series.points.get(t as usize).map(short).unwrap_or_default(),
            )
        })
        .collect();
    x_axis(
        b,
        f.x,
        &x_ticks,
        f.top,
        f.bottom,
        "commit, oldest to newest (a point per run)",
        linear(-0.5, n as f64 - 0.5),
    );
    if series.kind == PointKind::Ratio && y0 < 1.0 && 1.0 < y1 {
        let _ = write!(
            b,
            "<line data-line=\"baseline\" x1=\"{}\" y1=\"{h}\" x2=\"{}\" y2=\"{h}\" stroke=\"{MUTED}\"/>",
            c(f.left),
            c(f.right),
            h = c(f.y.at(1.0))
        );
    }
}

/// The intervals as one band, the points' line over it.
fn band_and_line(b: &mut String, series: &Series, f: &Frame) {
    let (x, y, points) = (f.x, f.y, &series.points);
    let mut band = String::new();
    for (i, p) in points.iter().enumerate() {
        let _ = write!(
            band,
            "{}{} {}",
            if i == 0 { "M" } else { "L" },
            c(x.at(i as f64)),
            c(y.at(p.hi))
        );
    }
    for (i, p) in points.iter().enumerate().rev() {
        let _ = write!(band, "L{} {}", c(x.at(i as f64)), c(y.at(p.lo)));
    }
    let _ = write!(
        b,
        "<path data-band=\"interval\" d=\"{band}Z\" fill=\"{POINTS}\" fill-opacity=\"0.16\"/>"
    );
    let line: Vec<String> = points
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{},{}", c(x.at(i as f64)), c(y.at(p.value))))
        .collect();
    let _ = write!(
        b,
        "<polyline points=\"{}\" fill=\"none\" stroke=\"{POINTS}\" stroke-width=\"1.5\"/>",
        line.join(" ")
    );
}

/// The `k`th change: a vertical line where it came in, its size and interval as a label
/// (on one of three rows in turn, so those of nearby changes do not overlap), and what it
/// is on hover.
fn change_mark(b: &mut String, ch: &Change, k: usize, f: &Frame) {
    let cx = f.x.at(ch.index as f64 - 0.5);
    let ly = f.top + 14.0 + 14.0 * (k % 3) as f64;
    let colour = if ch.worse { WORSE } else { BETTER };
    let size = format!(
        "{} [{}, {}]",
        percent(ch.factor),
        percent(ch.factor_low),
        percent(ch.factor_high)
    );
    let _ = write!(
        b,
        "<g data-change=\"{}\" data-worse=\"{}\"><title>{}</title><line x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\" stroke=\"{colour}\" stroke-width=\"2\" stroke-dasharray=\"3 2\"/>",
        ch.index,
        ch.worse,
        escape(&format!(
            "{size} ({}), p {}: last before {} {}, first after {} {}",
            if ch.worse { "worse" } else { "better" },
            p_value_text(ch.p_value),
            ch.before.commit_short(),
            ch.before.subject,
            ch.after.commit_short(),
            ch.after.subject
        )),
        c(f.top),
        c(f.bottom),
        x = c(cx),
    );
    // Right of the line, or left of it near the chart's right edge.
    let text = if cx > f.right - 160.0 {
        label(cx - 4.0, ly).end()
    } else {
        label(cx + 4.0, ly)
    };
    text.size(11.5)
        .bold(true)
        .fill(colour)
        .halo()
        .draw(b, &size);
    b.push_str("</g>");
}

/// The points, each a link to its run's report (when `link` gives one), with its tooltip.
fn point_marks(b: &mut String, series: &Series, f: &Frame, link: Link) {
    let r = if f.n > 200 {
        2.0
    } else if f.n > 60 {
        3.0
    } else {
        4.0
    };
    for (i, p) in series.points.iter().enumerate() {
        let href = link(p);
        if let Some(href) = &href {
            let _ = write!(b, "<a href=\"{}\">", escape(href));
        }
        let _ = write!(
            b,
            "<circle data-point=\"{i}\" cx=\"{}\" cy=\"{}\" r=\"{r}\" fill=\"{POINTS}\" stroke=\"#ffffff\" stroke-width=\"0.8\"><title>{}</title></circle>",
            c(f.x.at(i as f64)),
            c(f.y.at(p.value)),
            escape(&point_tooltip(series, p))
        );
        if href.is_some() {
            b.push_str("</a>");
        }
    }
}

/// Each stretch's level between changes (the geometric mean of its points), dashed, over
/// the points.
fn levels(b: &mut String, series: &Series, found: &Analysis, f: &Frame) {
    let points = &series.points;
    let mut bounds: Vec<usize> = found.changes.iter().map(|c| c.index).collect();
    bounds.insert(0, 0);
    bounds.push(points.len());
    for w in bounds.windows(2) {
        let stretch = &points[w[0]..w[1]];
        // A stretch a drift spans whole is drawn as the drift's line.
        if stretch.is_empty()
            || found
                .drifts
                .iter()
                .any(|d| d.start <= w[0] && w[1] <= d.end)
        {
            continue;
        }
        let level =
            (stretch.iter().map(|p| p.value.ln()).sum::<f64>() / stretch.len() as f64).exp();
        let _ = write!(
            b,
            "<line data-level=\"{}-{}\" x1=\"{}\" y1=\"{h}\" x2=\"{}\" y2=\"{h}\" stroke=\"{INK}\" stroke-dasharray=\"6 3\" stroke-width=\"1.6\"/>",
            w[0],
            w[1] - 1,
            c(f.x.at(w[0] as f64 - 0.4)),
            c(f.x.at(w[1] as f64 - 0.6)),
            h = c(f.y.at(level))
        );
    }
    for d in &found.drifts {
        let _ = write!(
            b,
            "<line data-drift=\"{}-{}\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{INK}\" stroke-dasharray=\"6 3\" stroke-width=\"1.6\"><title>drift {:.3}× [{:.3}–{:.3}] over {} points: a slide, no one commit to bisect</title></line>",
            d.start,
            d.end - 1,
            c(f.x.at(d.start as f64)),
            c(f.y.at(d.level_first)),
            c(f.x.at((d.end - 1) as f64)),
            c(f.y.at(d.level_last)),
            d.factor,
            d.factor_low,
            d.factor_high,
            d.end - d.start
        );
    }
}

/// A point's commit, seven characters, or its run's date.
fn short(p: &SeriesPoint) -> String {
    match &p.commit {
        Some(c) => c.chars().take(7).collect(),
        None => p.created_at.chars().take(10).collect(),
    }
}

/// A small line of the last `points` (the board's index), 120 × 24 px, with the newest
/// point marked; its tooltip is the newest point's.
pub fn sparkline(series: &Series, last: usize) -> String {
    let (w, h) = (120.0, 24.0);
    let shown = &series.points[series.points.len().saturating_sub(last.max(2))..];
    let (lo, hi) = shown
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, u), p| {
            (l.min(p.value), u.max(p.value))
        });
    let x = Scale::new(0.0, (shown.len().max(2) - 1) as f64, 3.0, w - 3.0);
    let y = Scale::new(lo, if hi > lo { hi } else { lo + 1.0 }, h - 3.0, 3.0);
    let line: Vec<String> = shown
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{},{}", c(x.at(i as f64)), c(y.at(p.value))))
        .collect();
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"spark\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\"><title>{}</title><polyline points=\"{}\" fill=\"none\" stroke=\"{POINTS}\" stroke-width=\"1.5\"/>",
        escape(&format!("the last {} points", shown.len())),
        line.join(" ")
    );
    if let Some(p) = shown.last() {
        let _ = write!(
            s,
            "<circle cx=\"{}\" cy=\"{}\" r=\"2.5\" fill=\"{INK}\"/>",
            c(x.at((shown.len() - 1) as f64)),
            c(y.at(p.value))
        );
    }
    s.push_str("</svg>");
    s
}
