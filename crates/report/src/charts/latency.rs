//! Latency: the HdrHistogram-style percentile distribution of each cohort on a "nines"
//! axis.

use std::fmt::Write as _;

use super::svg::{
    c, caption, document, legend, linear, open_series, source_line, subtitle, x_axis, y_axis,
    zero_based_ticks, Extent, Scale, Swatch,
};
use super::{cohort_colour, dash, WIDTH};
use crate::format::{fmt_num, micros};
use crate::model::Report;

// ---------------------------------------------------------------------------------------
// Latency: HDR-style percentile distribution on a "nines" axis.

/// The "nines" position of percentile `p` (0..100): −log10(1 − p/100); 90 → 1, 99 → 2.
pub fn nines(p: f64) -> f64 {
    -(1.0 - p / 100.0).log10()
}

/// Latency by percentile, HDR style: x is the percentile on a log "nines" axis (50%, 90%,
/// 99%, 99.9%, …), y the latency from zero; one line per cohort from `Latency.curve`.
pub fn latency(report: &Report) -> Option<String> {
    let lines = latency_lines(report);
    if lines.is_empty() {
        return None;
    }
    let l = Layout::of(&lines);
    let unit = l.unit;
    let mut b = String::new();
    axes(&mut b, &l);

    let mut desc = format!(
        "Latency by percentile per cohort, in {unit}; the percentile axis is logarithmic in nines, {}.",
        if l.log { "the latency axis is logarithmic too" } else { "the latency axis starts at zero" }
    );
    for line in &lines {
        line_mark(&mut b, &mut desc, &l, line);
    }

    let items: Vec<(Swatch, String)> = lines
        .iter()
        .map(|line| {
            (
                Swatch::Line(cohort_colour(line.index), dash(line.index)),
                line.name.to_string(),
            )
        })
        .collect();
    let below = legend(&mut b, &items, l.left, l.plot_bottom + 62.0, WIDTH - 16.0);
    let text = format!(
        "Latency of the merged histograms of each cohort's valid trials at every percentile. \
         Left to right, each gridline is ten times rarer: 90% of requests took at most the \
         latency at 90%, 99% at most that at 99%, and so on; rings mark p50, p99 and p99.9. {}",
        if l.log {
            format!("The latency axis ({unit}) is logarithmic, so the median and the tail both show: equal distances are equal ratios.")
        } else {
            format!("The latency axis starts at zero ({unit}).")
        }
    );
    let end = caption(&mut b, &text, &source_line(report), below + 14.0, WIDTH);
    Some(document(
        "latency",
        "Latency by percentile",
        &desc,
        &subtitle(report),
        WIDTH,
        end + 4.0,
        &b,
    ))
}

/// One cohort's latency curve.
struct Line<'a> {
    name: &'a str,
    /// The cohort's position in `report.cohorts` (its colour and dash).
    index: usize,
    /// (nines, µs), by nines.
    points: Vec<(f64, f64)>,
    p50: f64,
    p99: f64,
    p99_9: f64,
}

/// The curve of each cohort with latency figures, on the nines axis.
fn latency_lines(report: &Report) -> Vec<Line<'_>> {
    let mut lines: Vec<Line> = Vec::new();
    for (i, cohort) in report.cohorts.iter().enumerate() {
        let Some(lat) = &cohort.latency else { continue };
        let mut points: Vec<(f64, f64)> = lat
            .curve
            .iter()
            .filter(|(p, us)| {
                p.is_finite() && us.is_finite() && *p >= 0.0 && *p < 100.0 && *us >= 0.0
            })
            .map(|(p, us)| (nines(*p), *us))
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        if points.is_empty() {
            continue;
        }
        lines.push(Line {
            name: &cohort.name,
            index: i,
            points,
            p50: lat.p50,
            p99: lat.p99,
            p99_9: lat.p99_9,
        });
    }
    lines
}

/// The plot's edges, its two scales and their ticks, computed once from the lines.
struct Layout {
    /// The nines axis's end: 2 (99%) to 6.
    max_nines: f64,
    /// Latency is shown in µs, or in ms (divided by 1000) when it reaches 2 ms.
    divisor: f64,
    unit: &'static str,
    /// Whether the latency axis is logarithmic.
    log: bool,
    left: f64,
    right: f64,
    plot_top: f64,
    plot_bottom: f64,
    y: Scale,
    /// A latency (in `unit`) on the y scale's domain: its log10 on a log axis.
    y_to: fn(f64) -> f64,
    y_ticks: Vec<(f64, String)>,
    y_label: String,
    y_extent: Extent,
    x: Scale,
    x_ticks: Vec<(f64, String)>,
}

impl Layout {
    /// The layout of the chart of `lines` (at least one).
    fn of(lines: &[Line]) -> Layout {
        let max_nines = lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.0))
            .fold(0.0, f64::max)
            .ceil()
            .clamp(2.0, 6.0);
        let max_us = lines
            .iter()
            .flat_map(|l| l.points.iter().filter(|p| p.0 <= max_nines).map(|p| p.1))
            .fold(0.0, f64::max);
        let (divisor, unit) = if max_us >= 2_000.0 {
            (1000.0, "ms")
        } else {
            (1.0, "µs")
        };

        let left = 74.0;
        let right = WIDTH - 28.0;
        let plot_top = 64.0;
        let plot_bottom = plot_top + 300.0;

        // Latency spans orders of magnitude from the median to the tail: a log axis shows
        // both (and says so); a narrow range keeps a linear axis from zero.
        let min_us = lines
            .iter()
            .flat_map(|l| l.points.iter().filter(|p| p.0 <= max_nines).map(|p| p.1))
            .filter(|v| *v > 0.0)
            .fold(f64::INFINITY, f64::min);
        let log = min_us.is_finite() && max_us / min_us > 5.0;
        let (y, y_to, y_ticks, y_label, y_extent): (Scale, fn(f64) -> f64, _, _, _) = if log {
            let (lo, hi) = log_extent(min_us / divisor, max_us / divisor);
            let ticks = log_ticks(lo, hi);
            let labelled: Vec<(f64, String)> = ticks
                .iter()
                .map(|t| (t.log10(), fmt_log_tick(*t)))
                .collect();
            let y = Scale::new(lo.log10(), hi.log10(), plot_bottom, plot_top);
            (
                y,
                |v: f64| v.max(1e-9).log10(),
                labelled,
                format!("latency ({unit}, log scale)"),
                Extent {
                    min: lo,
                    max: hi,
                    kind: "log",
                },
            )
        } else {
            let (yt, y_max) = zero_based_ticks(max_us / divisor, 7, "");
            let y = Scale::new(0.0, y_max, plot_bottom, plot_top);
            (
                y,
                |v: f64| v,
                yt,
                format!("latency ({unit}), from zero"),
                linear(0.0, y_max),
            )
        };

        let x = Scale::new(0.0, max_nines, left, right);
        let mut x_ticks: Vec<(f64, String)> =
            vec![(0.0, "0%".to_string()), (nines(50.0), "50%".to_string())];
        for k in 1..=(max_nines as usize) {
            let label = match k {
                1 => "90".to_string(),
                2 => "99".to_string(),
                _ => format!("99.{}", "9".repeat(k - 2)),
            };
            x_ticks.push((k as f64, format!("{label}%")));
        }
        Layout {
            max_nines,
            divisor,
            unit,
            log,
            left,
            right,
            plot_top,
            plot_bottom,
            y,
            y_to,
            y_ticks,
            y_label,
            y_extent,
            x,
            x_ticks,
        }
    }

    /// The y position of a latency in µs.
    fn y_at(&self, us: f64) -> f64 {
        self.y.at((self.y_to)(us / self.divisor))
    }
}

/// The latency axis and the percentile axis.
fn axes(b: &mut String, l: &Layout) {
    y_axis(b, l.y, &l.y_ticks, l.left, l.right, &l.y_label, l.y_extent);
    x_axis(
        b,
        l.x,
        &l.x_ticks,
        l.plot_top,
        l.plot_bottom,
        "percentile (log scale of nines: each step is ten times rarer)",
        Extent {
            min: 0.0,
            max: l.max_nines,
            kind: "nines",
        },
    );
}

/// One cohort's series: its line, rings at p50, p99 and p99.9, and its figures added to
/// `desc`.
fn line_mark(b: &mut String, desc: &mut String, l: &Layout, line: &Line) {
    let (x, max_nines) = (l.x, l.max_nines);
    let colour = cohort_colour(line.index);
    let pts: Vec<String> = line
        .points
        .iter()
        .filter(|p| p.0 <= max_nines)
        .map(|(n, us)| format!("{},{}", c(x.at(*n)), c(l.y_at(*us))))
        .collect();
    let tooltip = format!(
        "{}: p50 {}, p99 {}, p99.9 {}",
        line.name,
        micros(line.p50),
        micros(line.p99),
        micros(line.p99_9)
    );
    let _ = write!(desc, " {}.", tooltip);
    let d = dash(line.index);
    open_series(b, line.name, &tooltip);
    let _ = write!(
        b,
        "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2.2\" stroke-linejoin=\"round\" stroke-linecap=\"round\"{}/>",
        pts.join(" "),
        if d.is_empty() { String::new() } else { format!(" stroke-dasharray=\"{d}\"") },
    );
    // Markers at p50, p99 and p99.9, the numbers people quote.
    for (p, v) in [(50.0, line.p50), (99.0, line.p99), (99.9, line.p99_9)] {
        if nines(p) <= max_nines && v.is_finite() && v > 0.0 {
            let _ = write!(
                b,
                "<circle cx=\"{}\" cy=\"{}\" r=\"3\" fill=\"#ffffff\" stroke=\"{colour}\" stroke-width=\"1.8\"/>",
                c(x.at(nines(p))),
                c(l.y_at(v))
            );
        }
    }
    b.push_str("</g>");
}

/// A log axis from a power of ten (or 2 or 5 times one) at or below `lo` to one at or
/// above `hi`.
pub(crate) fn log_extent(lo: f64, hi: f64) -> (f64, f64) {
    let steps = [1.0, 2.0, 5.0, 10.0];
    let floor = |v: f64| {
        let e = 10f64.powf(v.log10().floor());
        steps
            .iter()
            .rev()
            .map(|m| m * e)
            .find(|x| *x <= v * (1.0 + 1e-9))
            .unwrap_or(e)
    };
    let ceil = |v: f64| {
        let e = 10f64.powf(v.log10().floor());
        steps
            .iter()
            .map(|m| m * e)
            .find(|x| *x >= v * (1.0 - 1e-9))
            .unwrap_or(10.0 * e)
    };
    let (lo, hi) = (floor(lo), ceil(hi));
    if hi > lo {
        (lo, hi)
    } else {
        (lo, lo * 10.0)
    }
}

/// A log-axis tick with no trailing zeros: `0.2`, `5`, `1,000`.
pub(crate) fn fmt_log_tick(v: f64) -> String {
    if v >= 1.0 {
        fmt_num(v, 0)
    } else {
        let s = format!("{v:.6}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Ticks of a log axis: 1, 2 and 5 × 10ⁿ when the axis spans up to three decades, powers
/// of ten beyond.
pub fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let decades = (hi / lo).log10();
    let mantissas: &[f64] = if decades <= 3.0 {
        &[1.0, 2.0, 5.0]
    } else {
        &[1.0]
    };
    let mut ticks = Vec::new();
    let mut e = lo.log10().floor() as i32;
    while 10f64.powi(e) <= hi * (1.0 + 1e-9) {
        for m in mantissas {
            // Round away binary noise: 0.1 × 3 is not 0.3.
            let v = m * 10f64.powi(e);
            let v = (v * 1e9).round() / 1e9;
            if v >= lo * (1.0 - 1e-9) && v <= hi * (1.0 + 1e-9) {
                ticks.push(v);
            }
        }
        e += 1;
    }
    ticks
}
