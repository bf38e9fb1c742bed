//! Trial order: every trial in the order it ran, for drift and noise over time.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::svg::{
    c, caption, document, is_valid, legend, linear, nice_ticks, open_series, source_line, subtitle,
    x_axis, y_axis, zero_based_ticks, Scale, Swatch,
};
use super::{colour_of, INVALID, WIDTH};
use crate::format::fmt_num;
use crate::model::{Report, TrialPoint};

// ---------------------------------------------------------------------------------------
// Trial order: drift and noise over time.

/// Every trial in the order it ran: x is the trial's `sequence`, y its requests per second
/// (or wall time for script workloads) from zero, one colour per cohort; alternating
/// shading marks the blocks of the randomized design.
pub fn trial_order(report: &Report) -> Option<String> {
    let use_rate = report.trials.iter().any(|t| t.requests_per_s.is_some());
    let value = |t: &TrialPoint| if use_rate { t.requests_per_s } else { t.wall_s };
    let points: Vec<(&TrialPoint, f64)> = report
        .trials
        .iter()
        .filter_map(|t| {
            value(t)
                .filter(|v| v.is_finite() && *v >= 0.0)
                .map(|v| (t, v))
        })
        .collect();
    if points.is_empty() {
        return None;
    }
    let series = series_names(report, &points);
    let (unit, axis_label, what) = if use_rate {
        (
            "req/s",
            "requests per second, from zero",
            "Requests per second",
        )
    } else {
        ("s", "wall time, seconds, from zero", "Wall time")
    };
    let l = Layout::of(&points);
    let mut b = String::new();

    // Block shading first, under everything.
    block_stripes(&mut b, report, &l);
    axes(&mut b, &l, axis_label);

    let mut desc = format!(
        "{what} of every trial in the order the trials ran; the value axis starts at zero."
    );
    let any_invalid = points.iter().any(|(t, _)| !is_valid(t));
    for name in &series {
        series_mark(&mut b, &mut desc, report, &l, name, &points);
    }
    let mut items: Vec<(Swatch, String)> = series
        .iter()
        .map(|n| (Swatch::Dot(colour_of(report, n)), n.to_string()))
        .collect();
    if any_invalid {
        items.push((Swatch::Ring, "invalid or failed trial".to_string()));
    }
    let below = legend(&mut b, &items, l.left, l.plot_bottom + 62.0, WIDTH - 16.0);
    let text = format!(
        "{what} ({unit}) of every trial in the order the trials ran, one colour per cohort, \
         thin lines joining each cohort's valid trials. Shaded and unshaded stripes are \
         alternate blocks: each block runs every configuration once, in random order. A \
         trend along the x axis is drift (thermal, background load); scatter within a cohort \
         is noise. The value axis starts at zero."
    );
    let end = caption(&mut b, &text, &source_line(report), below + 14.0, WIDTH);
    Some(document(
        "trial-order",
        "Trials in the order they ran",
        &desc,
        &subtitle(report),
        WIDTH,
        end + 4.0,
        &b,
    ))
}

/// The cohorts with a plotted trial: in report order, then cohorts known only from trials.
fn series_names<'a>(report: &'a Report, points: &[(&'a TrialPoint, f64)]) -> Vec<&'a str> {
    // Series in report order, then cohorts known only from trials.
    let mut series: Vec<&str> = report
        .cohorts
        .iter()
        .map(|c| c.name.as_str())
        .filter(|n| points.iter().any(|(t, _)| t.cohort == *n))
        .collect();
    for (t, _) in points {
        if !series.contains(&t.cohort.as_str()) {
            series.push(&t.cohort);
        }
    }
    series
}

/// The plot's edges and its two scales with their ticks, computed once from the points.
struct Layout {
    left: f64,
    right: f64,
    plot_top: f64,
    plot_bottom: f64,
    /// The trial axis's ticks, up to `x_max`.
    x_ticks: Vec<f64>,
    x_max: f64,
    x: Scale,
    /// The value axis's ticks, from zero to `y_max`.
    y_ticks: Vec<(f64, String)>,
    y_max: f64,
    y: Scale,
}

impl Layout {
    /// The layout of the chart of `points` (at least one).
    fn of(points: &[(&TrialPoint, f64)]) -> Layout {
        let max_seq = points.iter().map(|(t, _)| t.sequence).max().unwrap_or(0) as f64;
        let max_v = points.iter().map(|(_, v)| *v).fold(0.0, f64::max);
        let left = 74.0;
        let right = WIDTH - 28.0;
        let plot_top = 64.0;
        let plot_bottom = plot_top + 260.0;
        let x_ticks = nice_ticks(0.0, max_seq.max(1.0), 8);
        let x_max = *x_ticks.last().unwrap_or(&1.0);
        let (y_ticks, y_max) = zero_based_ticks(max_v, 6, "");
        Layout {
            left,
            right,
            plot_top,
            plot_bottom,
            x_ticks,
            x_max,
            x: Scale::new(-0.5, x_max + 0.5, left, right),
            y_ticks,
            y_max,
            y: Scale::new(0.0, y_max, plot_bottom, plot_top),
        }
    }
}

/// Every other block's trials shaded (when there are 2 to 200 blocks).
fn block_stripes(b: &mut String, report: &Report, l: &Layout) {
    let x = l.x;
    let mut blocks: BTreeMap<(usize, u32), (usize, usize)> = BTreeMap::new();
    for t in &report.trials {
        let e = blocks
            .entry((t.source, t.block))
            .or_insert((t.sequence, t.sequence));
        e.0 = e.0.min(t.sequence);
        e.1 = e.1.max(t.sequence);
    }
    let mut spans: Vec<(usize, usize)> = blocks.values().copied().collect();
    spans.sort();
    if spans.len() > 1 && spans.len() <= 200 {
        for (k, (lo, hi)) in spans.iter().enumerate() {
            if k % 2 == 1 {
                let _ = write!(
                    b,
                    "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#eef1f4\"/>",
                    c(x.at(*lo as f64 - 0.5)),
                    c(l.plot_top),
                    c(x.at(*hi as f64 + 0.5) - x.at(*lo as f64 - 0.5)),
                    c(l.plot_bottom - l.plot_top)
                );
            }
        }
    }
}

/// The value axis (labelled `axis_label`) and the trial axis.
fn axes(b: &mut String, l: &Layout, axis_label: &str) {
    y_axis(
        b,
        l.y,
        &l.y_ticks,
        l.left,
        l.right,
        axis_label,
        linear(0.0, l.y_max),
    );
    let xt: Vec<(f64, String)> = l.x_ticks.iter().map(|t| (*t, fmt_num(*t, 0))).collect();
    x_axis(
        b,
        l.x,
        &xt,
        l.plot_top,
        l.plot_bottom,
        "trial, in the order it ran",
        linear(0.0, l.x_max),
    );
}

/// Cohort `name`'s series: a thin line through its valid trials and a dot per trial (a
/// ring when invalid), with its count added to `desc`.
fn series_mark(
    b: &mut String,
    desc: &mut String,
    report: &Report,
    l: &Layout,
    name: &str,
    points: &[(&TrialPoint, f64)],
) {
    let (x, y) = (l.x, l.y);
    let colour = colour_of(report, name);
    let mut mine: Vec<&(&TrialPoint, f64)> =
        points.iter().filter(|(t, _)| t.cohort == name).collect();
    mine.sort_by_key(|(t, _)| t.sequence);
    let _ = write!(
        desc,
        " {}: {} trial{}.",
        name,
        mine.len(),
        if mine.len() == 1 { "" } else { "s" }
    );
    open_series(b, name, name);
    let valid: Vec<String> = mine
        .iter()
        .filter(|(t, _)| is_valid(t))
        .map(|(t, v)| format!("{},{}", c(x.at(t.sequence as f64)), c(y.at(*v))))
        .collect();
    if valid.len() > 1 {
        let _ = write!(
            b,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-opacity=\"0.35\" stroke-width=\"1.2\"/>",
            valid.join(" ")
        );
    }
    for (t, v) in &mine {
        if is_valid(t) {
            let _ = write!(
                b,
                "<circle cx=\"{}\" cy=\"{}\" r=\"3.4\" fill=\"{colour}\" fill-opacity=\"0.9\" stroke=\"#ffffff\" stroke-width=\"0.6\"/>",
                c(x.at(t.sequence as f64)),
                c(y.at(*v))
            );
        } else {
            let _ = write!(
                b,
                "<circle cx=\"{}\" cy=\"{}\" r=\"3.6\" fill=\"#ffffff\" stroke=\"{INVALID}\" stroke-width=\"1.6\"/>",
                c(x.at(t.sequence as f64)),
                c(y.at(*v))
            );
        }
    }
    b.push_str("</g>");
}
