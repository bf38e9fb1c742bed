//! Hand-written SVG charts of a [`Report`]: no JavaScript, no external resources, one
//! function per chart, each returning a standalone `<svg>` document (or `None` when the
//! report has nothing for that chart to draw). The HTML report inlines them and
//! [`crate::png`] writes them as `.svg` and `.png` files for blog posts and bug reports.
//!
//! Every chart:
//! - has a title, axes with ticks at nice numbers (1, 2 or 5 × 10ⁿ) and units, and a caption
//!   that says how to read it, all inside the SVG, so an exported file stands on its own;
//! - starts its value axes at zero (the latency chart's percentile axis is a log "nines"
//!   axis, and says so in its label);
//! - carries `<title>` and `<desc>` (the desc lists the plotted numbers), uses
//!   `system-ui, sans-serif` and the Okabe–Ito colour-blind-safe palette, and never tells
//!   things apart by colour alone (invalid trials are hollow rings, lines have labels);
//! - is marked for tests and scripts: the root is `<svg class="chart" data-chart="NAME">`
//!   and each cohort's (or matrix cell's) element has `data-series="COHORT NAME"`, once;
//! - escapes every string that comes from the user with [`crate::format::escape`].
//!
//! A cohort keeps its colour in every chart: the colour of its position in
//! `report.cohorts`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::format::{escape, fmt_num, fmt_sig, fmt_us};
use crate::model::{Report, Summary, TrialPoint};

/// The font stack of every chart.
pub const FONT_FAMILY: &str = "system-ui, sans-serif";

/// The Okabe–Ito palette (Okabe & Ito 2008), ordered so the first colours are the most
/// distinct on white; yellow comes last because it is faint on a light background.
pub const PALETTE: [&str; 8] = [
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#F0E442",
];

/// Outline of invalid and failed trials (drawn hollow, so colour is not the only cue).
const INVALID: &str = "#B2182B";
const INK: &str = "#1f2328";
const MUTED: &str = "#59636e";
const GRID: &str = "#e4e7eb";
const AXIS: &str = "#8c959f";

/// Width of every chart, px (the viewBox scales with the page).
pub const WIDTH: f64 = 880.0;

/// One rendered chart.
#[derive(Clone, Debug)]
pub struct Chart {
    /// File-name-safe name, also the root's `data-chart`: "throughput", "wall",
    /// "latency", "memory", "matrix", "trial-order".
    pub name: &'static str,
    pub title: String,
    pub svg: String,
}

/// A chart's name and the function that draws it.
type Maker = (&'static str, fn(&Report) -> Option<String>);

/// Every chart the report has data for, in the order the HTML page shows them.
pub fn all(report: &Report) -> Vec<Chart> {
    let makers: [Maker; 6] = [
        ("throughput", throughput),
        ("wall", wall),
        ("matrix", matrix),
        ("latency", latency),
        ("memory", memory),
        ("trial-order", trial_order),
    ];
    makers
        .iter()
        .filter_map(|(name, make)| {
            make(report).map(|svg| Chart {
                name,
                title: title_of(&svg),
                svg,
            })
        })
        .collect()
}

fn title_of(svg: &str) -> String {
    // The visible title is the first <title>; it is already escaped, so unescape the
    // five entities back for plain-text use.
    let start = svg
        .find("<title")
        .and_then(|i| svg[i..].find('>').map(|j| i + j + 1));
    let text = start.and_then(|s| svg[s..].find("</title>").map(|e| &svg[s..s + e]));
    text.unwrap_or("")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// Colour of the cohort at `index` in `report.cohorts`.
pub fn cohort_colour(index: usize) -> &'static str {
    PALETTE[index % PALETTE.len()]
}

/// Dash pattern of a line series: solid for the first eight cohorts, then dashed variants,
/// so lines stay distinguishable once the palette repeats.
fn dash(index: usize) -> &'static str {
    ["", "7 4", "2 3", "9 3 2 3"][(index / PALETTE.len()) % 4]
}

fn colour_of(report: &Report, cohort: &str) -> &'static str {
    let i = report.cohorts.iter().position(|c| c.name == cohort);
    // Cohorts only in `trials` come after the known ones.
    let i = i.unwrap_or_else(|| report.cohorts.len() + extra_index(report, cohort));
    cohort_colour(i)
}

fn extra_index(report: &Report, cohort: &str) -> usize {
    let mut extra: Vec<&str> = Vec::new();
    for t in &report.trials {
        if !report.cohorts.iter().any(|c| c.name == t.cohort) && !extra.contains(&t.cohort.as_str())
        {
            extra.push(&t.cohort);
        }
    }
    extra.iter().position(|c| *c == cohort).unwrap_or(0)
}

// ---------------------------------------------------------------------------------------
// Numbers: nice ticks and formatting.

/// Ticks at nice numbers (1, 2 or 5 × 10ⁿ) covering `lo..=hi`, about `target` of them
/// (after Heckbert, "Nice numbers for graph labels", Graphics Gems, 1990, rounding the step
/// directly so the count stays near `target`). The first tick is at
/// or below `lo` and the last at or above `hi`, so the axis can run from the first tick to
/// the last. A degenerate or non-finite range gives `[lo, lo + 1]`-style ticks.
pub fn nice_ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
    let lo = if lo.is_finite() { lo } else { 0.0 };
    let mut hi = if hi.is_finite() { hi } else { lo + 1.0 };
    if hi <= lo {
        hi = if lo == 0.0 { 1.0 } else { lo + lo.abs() };
    }
    let target = target.max(2);
    let step = nice_number((hi - lo) / (target - 1) as f64);
    let first = (lo / step).floor();
    let last = (hi / step - 1e-9).ceil();
    let mut ticks = Vec::new();
    let mut k = first;
    while k <= last + 1e-9 {
        // Multiply the integer index, so ticks carry no accumulated error, then round off
        // the last bits (0.1 × 3 = 0.30000000000000004).
        let v = k * step;
        let digits = (-step.log10().floor()).max(0.0) as i32 + 1;
        let scale = 10f64.powi(digits);
        ticks.push((v * scale).round() / scale);
        k += 1.0;
    }
    ticks
}

fn nice_number(x: f64) -> f64 {
    let exp = x.log10().floor();
    let f = x / 10f64.powf(exp);
    let nf = if f < 1.5 {
        1.0
    } else if f < 3.0 {
        2.0
    } else if f < 7.0 {
        5.0
    } else {
        10.0
    };
    nf * 10f64.powf(exp)
}

/// Decimals that show every tick of `ticks` exactly.
fn tick_decimals(ticks: &[f64]) -> usize {
    let step = match ticks {
        [a, b, ..] => (b - a).abs(),
        _ => 1.0,
    };
    if step >= 1.0 || step <= 0.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    }
}

/// A coordinate, rounded to 0.01 px to keep the SVG small.
fn c(v: f64) -> String {
    let r = (v * 100.0).round() / 100.0;
    if r == r.trunc() {
        format!("{}", r as i64)
    } else {
        format!("{r}")
    }
}

/// Approximate width of `s` in px at `size` px: system sans-serif averages about 0.56 em
/// per character; a little more keeps labels clear of what follows.
fn text_width(s: &str, size: f64) -> f64 {
    s.chars().count() as f64 * size * 0.58
}

/// `s` shortened to `max` characters with an ellipsis.
fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

/// Greedy word wrap to lines of at most `max` characters (longer words get a line each).
fn wrap(text: &str, max: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > max {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// Deterministic jitter in [-1, 1) from a trial's identity (SplitMix64), so the same report
/// always draws the same picture.
pub fn jitter(source: usize, trial_id: usize) -> f64 {
    let mut z = ((source as u64) << 40 ^ trial_id as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
}

// ---------------------------------------------------------------------------------------
// Drawing helpers.

/// A linear map from the domain `d0..d1` to the range `r0..r1`.
#[derive(Clone, Copy)]
struct Scale {
    d0: f64,
    d1: f64,
    r0: f64,
    r1: f64,
}

impl Scale {
    fn new(d0: f64, d1: f64, r0: f64, r1: f64) -> Scale {
        let d1 = if d1 == d0 { d0 + 1.0 } else { d1 };
        Scale { d0, d1, r0, r1 }
    }
    fn at(&self, v: f64) -> f64 {
        self.r0 + (v - self.d0) / (self.d1 - self.d0) * (self.r1 - self.r0)
    }
}

/// The document around a chart's body: root element, `<title>`, `<desc>`, background,
/// visible title and subtitle. `height` is the final height.
fn document(
    name: &str,
    title: &str,
    desc: &str,
    subtitle: &str,
    width: f64,
    height: f64,
    body: &str,
) -> String {
    let mut s = String::with_capacity(body.len() + 1024);
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" data-chart=\"{name}\" \
         width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" \
         aria-labelledby=\"rr-{name}-title rr-{name}-desc\" font-family=\"{FONT_FAMILY}\" \
         font-size=\"12\" fill=\"{INK}\">\
         <title id=\"rr-{name}-title\">{title}</title><desc id=\"rr-{name}-desc\">{desc}</desc>\
         <rect width=\"{w}\" height=\"{h}\" fill=\"#ffffff\"/>\
         <text x=\"16\" y=\"27\" font-size=\"16\" font-weight=\"600\">{title}</text>",
        name = escape(name),
        w = c(width),
        h = c(height),
        title = escape(title),
        desc = escape(desc),
    );
    if !subtitle.is_empty() {
        let _ = write!(
            s,
            "<text x=\"16\" y=\"45\" font-size=\"12\" fill=\"{MUTED}\">{}</text>",
            escape(subtitle)
        );
    }
    s.push_str(body);
    s.push_str("</svg>");
    s
}

/// The caption under a chart: wrapped lines of muted text starting at `y`, then a source
/// line. Returns the y below it.
fn caption(b: &mut String, text: &str, source: &str, y: f64, width: f64) -> f64 {
    let max_chars = ((width - 32.0) / (11.5 * 0.55)) as usize;
    let mut y = y;
    for line in wrap(text, max_chars) {
        let _ = write!(
            b,
            "<text x=\"16\" y=\"{}\" font-size=\"11.5\" fill=\"{MUTED}\">{}</text>",
            c(y),
            escape(&line)
        );
        y += 15.0;
    }
    if !source.is_empty() {
        let _ = write!(
            b,
            "<text x=\"16\" y=\"{}\" font-size=\"10.5\" fill=\"#8c959f\">{}</text>",
            c(y + 2.0),
            escape(&clip(source, max_chars + 8))
        );
        y += 17.0;
    }
    y
}

/// "rubyrace · experiment A, B · N trials · created_at": where the numbers come from.
fn source_line(report: &Report) -> String {
    let mut experiments: Vec<&str> = report
        .sources
        .iter()
        .map(|s| s.experiment.as_str())
        .collect();
    experiments.dedup();
    let trials: usize = report.sources.iter().map(|s| s.trials).sum();
    let mut parts = vec!["rubyrace".to_string()];
    if !experiments.is_empty() {
        parts.push(format!("experiment {}", experiments.join(", ")));
    }
    if trials > 0 {
        parts.push(format!(
            "{trials} trial{}",
            if trials == 1 { "" } else { "s" }
        ));
    }
    if let Some(first) = report.sources.first() {
        if !first.created_at.is_empty() {
            parts.push(first.created_at.clone());
        }
    }
    if report.sources.iter().any(|s| s.smoke) {
        parts.push("SMOKE TEST, not for conclusions".to_string());
    }
    parts.join(" · ")
}

/// What an axis spans, written on its `<g class="axis">` as `data-scale`, `data-min` and
/// `data-max` so tests (and anyone reading the SVG) can check where it starts.
#[derive(Clone, Copy)]
struct Extent {
    min: f64,
    max: f64,
    /// "linear", "log" or "nines".
    kind: &'static str,
}

fn linear(min: f64, max: f64) -> Extent {
    Extent {
        min,
        max,
        kind: "linear",
    }
}

/// Vertical grid lines and labels of a horizontal value axis along `y_bottom`.
#[allow(clippy::too_many_arguments)]
fn x_axis(
    b: &mut String,
    scale: Scale,
    ticks: &[(f64, String)],
    y_top: f64,
    y_bottom: f64,
    label: &str,
    extent: Extent,
) {
    let _ = write!(
        b,
        "<g class=\"axis\" data-axis=\"x\" data-scale=\"{}\" data-min=\"{}\" data-max=\"{}\">",
        extent.kind, extent.min, extent.max
    );
    for (v, text) in ticks {
        let x = scale.at(*v);
        let _ = write!(
            b,
            "<line x1=\"{x}\" y1=\"{t}\" x2=\"{x}\" y2=\"{bt}\" stroke=\"{GRID}\"/>\
             <line x1=\"{x}\" y1=\"{bt}\" x2=\"{x}\" y2=\"{bt5}\" stroke=\"{AXIS}\"/>\
             <text x=\"{x}\" y=\"{ty}\" text-anchor=\"middle\" font-size=\"11\" fill=\"{MUTED}\">{text}</text>",
            x = c(x),
            t = c(y_top),
            bt = c(y_bottom),
            bt5 = c(y_bottom + 4.0),
            ty = c(y_bottom + 17.0),
            text = escape(text),
        );
    }
    let _ = write!(
        b,
        "<line x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{AXIS}\"/>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"12\" fill=\"{INK}\">{}</text></g>",
        c(scale.r0),
        c(scale.r1),
        c((scale.r0 + scale.r1) / 2.0),
        c(y_bottom + 36.0),
        escape(label),
        y = c(y_bottom),
    );
}

/// Horizontal grid lines and labels of a vertical value axis along `x_left`, with the
/// axis label rotated alongside.
#[allow(clippy::too_many_arguments)]
fn y_axis(
    b: &mut String,
    scale: Scale,
    ticks: &[(f64, String)],
    x_left: f64,
    x_right: f64,
    label: &str,
    extent: Extent,
) {
    let _ = write!(
        b,
        "<g class=\"axis\" data-axis=\"y\" data-scale=\"{}\" data-min=\"{}\" data-max=\"{}\">",
        extent.kind, extent.min, extent.max
    );
    for (v, text) in ticks {
        let y = scale.at(*v);
        let _ = write!(
            b,
            "<line x1=\"{l}\" y1=\"{y}\" x2=\"{r}\" y2=\"{y}\" stroke=\"{GRID}\"/>\
             <text x=\"{tx}\" y=\"{ty}\" text-anchor=\"end\" font-size=\"11\" fill=\"{MUTED}\">{text}</text>",
            l = c(x_left),
            r = c(x_right),
            y = c(y),
            tx = c(x_left - 6.0),
            ty = c(y + 4.0),
            text = escape(text),
        );
    }
    let mid = (scale.r0 + scale.r1) / 2.0;
    let _ = write!(
        b,
        "<line x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\" stroke=\"{AXIS}\"/>\
         <text transform=\"translate(18 {}) rotate(-90)\" text-anchor=\"middle\" font-size=\"12\" fill=\"{INK}\">{}</text></g>",
        c(scale.r0),
        c(scale.r1),
        c(mid),
        escape(label),
        x = c(x_left),
    );
}

/// Value ticks from zero to at least `max`, labelled; returns (ticks, axis maximum).
fn zero_based_ticks(max: f64, target: usize, unit_suffix: &str) -> (Vec<(f64, String)>, f64) {
    let ticks = nice_ticks(0.0, max, target);
    let decimals = tick_decimals(&ticks);
    let top = *ticks.last().unwrap_or(&1.0);
    let labelled = ticks
        .iter()
        .map(|&t| (t, format!("{}{}", fmt_num(t, decimals), unit_suffix)))
        .collect();
    (labelled, top)
}

/// What a legend entry shows.
enum Swatch<'a> {
    Dot(&'a str),
    Ring,
    Line(&'a str, &'a str),
    Band(&'a str),
    Bar(&'a str, f64),
    MedianTick,
}

/// A legend laid out left to right, wrapping at `max_x`; returns the y below it.
fn legend(b: &mut String, items: &[(Swatch, String)], x0: f64, y0: f64, max_x: f64) -> f64 {
    let mut x = x0;
    let mut y = y0;
    let _ = write!(b, "<g class=\"legend\" font-size=\"11.5\">");
    for (swatch, label) in items {
        let label = clip(label, 48);
        let w = 22.0 + text_width(&label, 11.5) + 16.0;
        if x > x0 && x + w > max_x {
            x = x0;
            y += 18.0;
        }
        let cy = y - 4.0;
        match swatch {
            Swatch::Dot(colour) => {
                let _ = write!(
                    b,
                    "<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{colour}\" fill-opacity=\"0.85\"/>",
                    c(x + 7.0),
                    c(cy)
                );
            }
            Swatch::Ring => {
                let _ = write!(b, "<circle cx=\"{}\" cy=\"{}\" r=\"3.6\" fill=\"#ffffff\" stroke=\"{INVALID}\" stroke-width=\"1.6\"/>", c(x + 7.0), c(cy));
            }
            Swatch::Line(colour, dasharray) => {
                let _ = write!(
                    b,
                    "<line x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{colour}\" stroke-width=\"2.5\"{}/>",
                    c(x),
                    c(x + 16.0),
                    if dasharray.is_empty() { String::new() } else { format!(" stroke-dasharray=\"{dasharray}\"") },
                    y = c(cy),
                );
            }
            Swatch::Band(colour) => {
                let _ = write!(b, "<rect x=\"{}\" y=\"{}\" width=\"16\" height=\"10\" fill=\"{colour}\" fill-opacity=\"0.25\"/>", c(x), c(cy - 5.0));
            }
            Swatch::Bar(colour, opacity) => {
                let _ = write!(b, "<rect x=\"{}\" y=\"{}\" width=\"16\" height=\"10\" fill=\"{colour}\" fill-opacity=\"{opacity}\"/>", c(x), c(cy - 5.0));
            }
            Swatch::MedianTick => {
                let _ = write!(
                    b,
                    "<rect x=\"{}\" y=\"{}\" width=\"3\" height=\"14\" fill=\"{INK}\"/>",
                    c(x + 6.0),
                    c(cy - 7.0)
                );
            }
        }
        let _ = write!(
            b,
            "<text x=\"{}\" y=\"{}\">{}</text>",
            c(x + 22.0),
            c(y),
            escape(&label)
        );
        x += w;
    }
    b.push_str("</g>");
    y + 8.0
}

/// Width of the label column of a chart with one row per cohort.
fn label_column(names: &[&str]) -> f64 {
    let widest = names
        .iter()
        .map(|n| text_width(&clip(n, 44), 12.5))
        .fold(0.0, f64::max);
    // At least wide enough for the second line under each name ("median 13,694 req/s ·
    // baseline", "PSS 41.6 MiB · RSS 43.3 MiB").
    (widest + 28.0).clamp(215.0, 320.0)
}

/// Characters of a cohort name that fit in the label column.
fn label_chars(column: f64) -> usize {
    (((column - 24.0) / (12.5 * 0.58)) as usize).max(8)
}

fn is_valid(t: &TrialPoint) -> bool {
    t.status == "valid"
}

// ---------------------------------------------------------------------------------------
// Throughput and wall time: one row per cohort, band p10–p90, median, every trial.

/// Requests per second per cohort: the p10–p90 band of valid trials, a bar at the median,
/// and every trial as a jittered dot (invalid or failed trials as hollow rings).
pub fn throughput(report: &Report) -> Option<String> {
    spread(
        report,
        SpreadSpec {
            name: "throughput",
            title: "Throughput per cohort",
            axis: "requests per second (higher is better)",
            unit: "req/s",
            what: "Requests per second",
            summary: |r, i| r.cohorts[i].throughput.clone(),
            value: |t| t.requests_per_s,
        },
    )
}

/// Wall time of a script workload per cohort, drawn like [`throughput`].
pub fn wall(report: &Report) -> Option<String> {
    spread(
        report,
        SpreadSpec {
            name: "wall",
            title: "Wall time per cohort",
            axis: "wall time, seconds (lower is better)",
            unit: "s",
            what: "Wall time",
            summary: |r, i| r.cohorts[i].script.as_ref().and_then(|s| s.wall.clone()),
            value: |t| t.wall_s,
        },
    )
}

struct SpreadSpec {
    name: &'static str,
    title: &'static str,
    axis: &'static str,
    unit: &'static str,
    what: &'static str,
    summary: fn(&Report, usize) -> Option<Summary>,
    value: fn(&TrialPoint) -> Option<f64>,
}

fn spread(report: &Report, spec: SpreadSpec) -> Option<String> {
    // Rows: cohorts with a summary or at least one trial value, in report order.
    struct Row<'a> {
        name: &'a str,
        colour: &'static str,
        summary: Option<Summary>,
        trials: Vec<(&'a TrialPoint, f64)>,
    }
    let mut rows: Vec<Row> = Vec::new();
    for (i, cohort) in report.cohorts.iter().enumerate() {
        let summary = (spec.summary)(report, i);
        let trials: Vec<(&TrialPoint, f64)> = report
            .trials
            .iter()
            .filter(|t| t.cohort == cohort.name)
            .filter_map(|t| {
                (spec.value)(t)
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .map(|v| (t, v))
            })
            .collect();
        if summary.is_some() || !trials.is_empty() {
            rows.push(Row {
                name: &cohort.name,
                colour: cohort_colour(i),
                summary,
                trials,
            });
        }
    }
    if rows.is_empty() {
        return None;
    }
    let max = rows
        .iter()
        .flat_map(|r| {
            r.trials
                .iter()
                .map(|(_, v)| *v)
                .chain(r.summary.iter().flat_map(|s| [s.p90, s.max]))
        })
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let decimals_for = |v: f64| {
        if spec.unit == "s" {
            if v >= 100.0 {
                1
            } else {
                3
            }
        } else {
            0
        }
    };

    let names: Vec<&str> = rows.iter().map(|r| r.name).collect();
    let left = label_column(&names);
    let right = WIDTH - 28.0;
    let any_invalid = rows
        .iter()
        .any(|r| r.trials.iter().any(|(t, _)| !is_valid(t)));

    let mut b = String::new();
    let mut legend_items = vec![
        (
            Swatch::Band("#59636e"),
            "p10–p90 of valid trials".to_string(),
        ),
        (Swatch::MedianTick, "median".to_string()),
        (Swatch::Dot("#59636e"), "one trial".to_string()),
    ];
    if any_invalid {
        legend_items.push((
            Swatch::Ring,
            "invalid or failed trial (not in the statistics)".to_string(),
        ));
    }
    let top = legend(&mut b, &legend_items, 16.0, 66.0, WIDTH - 16.0) + 6.0;

    let row_h = 40.0;
    let plot_top = top;
    let plot_bottom = plot_top + rows.len() as f64 * row_h;
    let (ticks, axis_max) = zero_based_ticks(max, 7, "");
    let x = Scale::new(0.0, axis_max, left, right);
    x_axis(
        &mut b,
        x,
        &ticks,
        plot_top,
        plot_bottom,
        spec.axis,
        linear(0.0, axis_max),
    );

    let chars = label_chars(left);
    let mut desc = format!("{} per cohort; the axis starts at zero.", spec.what);
    for (k, row) in rows.iter().enumerate() {
        let cy = plot_top + k as f64 * row_h + row_h / 2.0;
        let baseline = row.name == report.baseline;
        let mut tooltip = row.name.to_string();
        let mut second;
        if let Some(s) = &row.summary {
            let d = decimals_for(s.p50);
            second = format!("median {} {}", fmt_num(s.p50, d), spec.unit);
            let _ = write!(
                tooltip,
                ": median {} {u}, p10–p90 {}–{} {u}, n = {}",
                fmt_num(s.p50, d),
                fmt_num(s.p10, d),
                fmt_num(s.p90, d),
                s.n,
                u = spec.unit
            );
            let _ = write!(
                desc,
                " {}: median {} {u} (p10 {}, p90 {}, {} valid trials).",
                row.name,
                fmt_num(s.p50, d),
                fmt_num(s.p10, d),
                fmt_num(s.p90, d),
                s.n,
                u = spec.unit
            );
        } else {
            second = "no valid trials".to_string();
            let _ = write!(desc, " {}: no valid trials.", row.name);
        }
        if baseline {
            second.push_str(" · baseline");
        }
        // Zebra background and the row's labels.
        if k % 2 == 1 {
            let _ = write!(
                b,
                "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#f6f8fa\" fill-opacity=\"0.7\"/>",
                c(16.0),
                c(cy - row_h / 2.0),
                c(right - 16.0),
                c(row_h)
            );
        }
        let _ = write!(
            b,
            "<g data-series=\"{}\"><title>{}</title>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"12.5\"{}>{}</text>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"11\" fill=\"{MUTED}\">{}</text>",
            escape(row.name),
            escape(&tooltip),
            c(left - 12.0),
            c(cy - 2.0),
            if baseline { " font-weight=\"600\"" } else { "" },
            escape(&clip(row.name, chars)),
            c(left - 12.0),
            c(cy + 12.0),
            escape(&second),
        );
        if let Some(s) = &row.summary {
            let _ = write!(
                b,
                "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"18\" rx=\"3\" fill=\"{}\" fill-opacity=\"0.25\"/>",
                c(x.at(s.p10)),
                c(cy - 9.0),
                c((x.at(s.p90) - x.at(s.p10)).max(1.0)),
                row.colour
            );
        }
        for (t, v) in &row.trials {
            let dy = jitter(t.source, t.trial_id) * 10.0;
            if is_valid(t) {
                let _ = write!(
                    b,
                    "<circle cx=\"{}\" cy=\"{}\" r=\"3.6\" fill=\"{}\" fill-opacity=\"0.85\" stroke=\"#ffffff\" stroke-width=\"0.6\"/>",
                    c(x.at(*v)),
                    c(cy + dy),
                    row.colour
                );
            } else {
                let _ = write!(
                    b,
                    "<circle cx=\"{}\" cy=\"{}\" r=\"3.6\" fill=\"#ffffff\" stroke=\"{INVALID}\" stroke-width=\"1.6\"/>",
                    c(x.at(*v)),
                    c(cy + dy)
                );
            }
        }
        if let Some(s) = &row.summary {
            let _ = write!(
                b,
                "<rect x=\"{}\" y=\"{}\" width=\"3\" height=\"26\" fill=\"{INK}\"/>",
                c(x.at(s.p50) - 1.5),
                c(cy - 13.0)
            );
        }
        b.push_str("</g>");
    }

    let text = format!(
        "{} of each trial (dots, spread vertically so they do not overlap). The band spans the \
         10th to 90th percentile of the valid trials and the black bar marks their median. \
         Hollow rings are invalid or failed trials, shown but left out of every statistic. \
         The axis starts at zero.",
        spec.what
    );
    let end = caption(
        &mut b,
        &text,
        &source_line(report),
        plot_bottom + 62.0,
        WIDTH,
    );
    Some(document(
        spec.name,
        spec.title,
        &desc,
        &subtitle(report),
        WIDTH,
        end + 4.0,
        &b,
    ))
}

fn subtitle(report: &Report) -> String {
    let mut parts = Vec::new();
    if !report.group_by.is_empty() {
        parts.push(format!("cohorts by {}", report.group_by.join(", ")));
    }
    if !report.baseline.is_empty() {
        parts.push(format!("baseline {}", report.baseline));
    }
    clip(&parts.join(" · "), 110)
}

// ---------------------------------------------------------------------------------------
// Latency: HDR-style percentile distribution on a "nines" axis.

/// The "nines" position of percentile `p` (0..100): −log10(1 − p/100); 90 → 1, 99 → 2.
pub fn nines(p: f64) -> f64 {
    -(1.0 - p / 100.0).log10()
}

/// Latency by percentile, HDR style: x is the percentile on a log "nines" axis (50%, 90%,
/// 99%, 99.9%, …), y the latency from zero; one line per cohort from `Latency.curve`.
pub fn latency(report: &Report) -> Option<String> {
    struct Line<'a> {
        name: &'a str,
        index: usize,
        points: Vec<(f64, f64)>,
        p50: f64,
        p99: f64,
        p99_9: f64,
    }
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
    if lines.is_empty() {
        return None;
    }
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
    let mut b = String::new();

    // Latency spans orders of magnitude from the median to the tail: a log axis shows
    // both (and says so); a narrow range keeps a linear axis from zero.
    let min_us = lines
        .iter()
        .flat_map(|l| l.points.iter().filter(|p| p.0 <= max_nines).map(|p| p.1))
        .filter(|v| *v > 0.0)
        .fold(f64::INFINITY, f64::min);
    let log = min_us.is_finite() && max_us / min_us > 5.0;
    let (y, y_to): (Scale, fn(f64) -> f64) = if log {
        let (lo, hi) = log_extent(min_us / divisor, max_us / divisor);
        let ticks = log_ticks(lo, hi);
        let labelled: Vec<(f64, String)> = ticks
            .iter()
            .map(|t| (t.log10(), fmt_log_tick(*t)))
            .collect();
        let y = Scale::new(lo.log10(), hi.log10(), plot_bottom, plot_top);
        y_axis(
            &mut b,
            y,
            &labelled,
            left,
            right,
            &format!("latency ({unit}, log scale)"),
            Extent {
                min: lo,
                max: hi,
                kind: "log",
            },
        );
        (y, |v: f64| v.max(1e-9).log10())
    } else {
        let (yt, y_max) = zero_based_ticks(max_us / divisor, 7, "");
        let y = Scale::new(0.0, y_max, plot_bottom, plot_top);
        y_axis(
            &mut b,
            y,
            &yt,
            left,
            right,
            &format!("latency ({unit}), from zero"),
            linear(0.0, y_max),
        );
        (y, |v: f64| v)
    };
    let y_at = |us: f64| y.at(y_to(us / divisor));

    let x = Scale::new(0.0, max_nines, left, right);
    let mut xt: Vec<(f64, String)> =
        vec![(0.0, "0%".to_string()), (nines(50.0), "50%".to_string())];
    for k in 1..=(max_nines as usize) {
        let label = match k {
            1 => "90".to_string(),
            2 => "99".to_string(),
            _ => format!("99.{}", "9".repeat(k - 2)),
        };
        xt.push((k as f64, format!("{label}%")));
    }
    x_axis(
        &mut b,
        x,
        &xt,
        plot_top,
        plot_bottom,
        "percentile (log scale of nines: each step is ten times rarer)",
        Extent {
            min: 0.0,
            max: max_nines,
            kind: "nines",
        },
    );

    let mut desc = format!(
        "Latency by percentile per cohort, in {unit}; the percentile axis is logarithmic in nines, {}.",
        if log { "the latency axis is logarithmic too" } else { "the latency axis starts at zero" }
    );
    for line in &lines {
        let colour = cohort_colour(line.index);
        let pts: Vec<String> = line
            .points
            .iter()
            .filter(|p| p.0 <= max_nines)
            .map(|(n, us)| format!("{},{}", c(x.at(*n)), c(y_at(*us))))
            .collect();
        let tooltip = format!(
            "{}: p50 {}, p99 {}, p99.9 {}",
            line.name,
            fmt_us(line.p50),
            fmt_us(line.p99),
            fmt_us(line.p99_9)
        );
        let _ = write!(desc, " {}.", tooltip);
        let d = dash(line.index);
        let _ = write!(
            b,
            "<g data-series=\"{}\"><title>{}</title><polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2.2\" stroke-linejoin=\"round\" stroke-linecap=\"round\"{}/>",
            escape(line.name),
            escape(&tooltip),
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
                    c(y_at(v))
                );
            }
        }
        b.push_str("</g>");
    }

    let items: Vec<(Swatch, String)> = lines
        .iter()
        .map(|l| {
            (
                Swatch::Line(cohort_colour(l.index), dash(l.index)),
                l.name.to_string(),
            )
        })
        .collect();
    let below = legend(&mut b, &items, left, plot_bottom + 62.0, WIDTH - 16.0);
    let text = format!(
        "Latency of the merged histograms of each cohort's valid trials at every percentile. \
         Left to right, each gridline is ten times rarer: 90% of requests took at most the \
         latency at 90%, 99% at most that at 99%, and so on; rings mark p50, p99 and p99.9. {}",
        if log {
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

/// A log axis from a power of ten (or 2 or 5 times one) at or below `lo` to one at or
/// above `hi`.
fn log_extent(lo: f64, hi: f64) -> (f64, f64) {
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
fn fmt_log_tick(v: f64) -> String {
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

// ---------------------------------------------------------------------------------------
// Memory: PSS and RSS at the end of each trial, whole process tree.

const MIB: f64 = 1024.0 * 1024.0;

/// Memory per cohort from zero, MiB: the median PSS at the end of the trials as a solid bar
/// with its p10–p90 whisker, and the median RSS as a lighter, taller bar behind it.
pub fn memory(report: &Report) -> Option<String> {
    struct Row<'a> {
        name: &'a str,
        colour: &'static str,
        pss: Option<Summary>,
        rss: Option<Summary>,
    }
    let rows: Vec<Row> = report
        .cohorts
        .iter()
        .enumerate()
        .filter(|(_, c)| c.memory.pss_end.is_some() || c.memory.rss_end.is_some())
        .map(|(i, c)| Row {
            name: &c.name,
            colour: cohort_colour(i),
            pss: c.memory.pss_end.clone(),
            rss: c.memory.rss_end.clone(),
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    let max = rows
        .iter()
        .flat_map(|r| {
            r.pss
                .iter()
                .chain(r.rss.iter())
                .flat_map(|s| [s.p50, s.p90])
        })
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
        / MIB;
    let names: Vec<&str> = rows.iter().map(|r| r.name).collect();
    let left = label_column(&names);
    let right = WIDTH - 28.0;
    let mut b = String::new();
    let mut items = Vec::new();
    if rows.iter().any(|r| r.pss.is_some()) {
        items.push((
            Swatch::Bar("#59636e", 1.0),
            "PSS (median, p10–p90 whisker)".to_string(),
        ));
    }
    if rows.iter().any(|r| r.rss.is_some()) {
        items.push((Swatch::Bar("#59636e", 0.3), "RSS (median)".to_string()));
    }
    let top = legend(&mut b, &items, 16.0, 66.0, WIDTH - 16.0) + 6.0;
    let row_h = 40.0;
    let plot_bottom = top + rows.len() as f64 * row_h;
    let (ticks, axis_max) = zero_based_ticks(max, 7, "");
    let x = Scale::new(0.0, axis_max, left, right);
    x_axis(
        &mut b,
        x,
        &ticks,
        top,
        plot_bottom,
        "MiB at the end of the trial, whole server process tree (lower is better)",
        linear(0.0, axis_max),
    );

    let chars = label_chars(left);
    let mut desc =
        String::from("Memory of the server process tree at the end of each trial, MiB, from zero.");
    for (k, row) in rows.iter().enumerate() {
        let cy = top + k as f64 * row_h + row_h / 2.0;
        let mut parts = Vec::new();
        if let Some(p) = &row.pss {
            parts.push(format!("PSS {} MiB", fmt_sig(p.p50 / MIB)));
        }
        if let Some(r) = &row.rss {
            parts.push(format!("RSS {} MiB", fmt_sig(r.p50 / MIB)));
        }
        let numbers = parts.join(" · ");
        let _ = write!(desc, " {}: {}.", row.name, numbers);
        let baseline = row.name == report.baseline;
        if k % 2 == 1 {
            let _ = write!(
                b,
                "<rect x=\"16\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#f6f8fa\" fill-opacity=\"0.7\"/>",
                c(cy - row_h / 2.0),
                c(right - 16.0),
                c(row_h)
            );
        }
        let _ = write!(
            b,
            "<g data-series=\"{}\"><title>{}: {}</title>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"12.5\"{}>{}</text>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"11\" fill=\"{MUTED}\">{}</text>",
            escape(row.name),
            escape(row.name),
            escape(&numbers),
            c(left - 12.0),
            c(cy - 2.0),
            if baseline { " font-weight=\"600\"" } else { "" },
            escape(&clip(row.name, chars)),
            c(left - 12.0),
            c(cy + 12.0),
            escape(&numbers),
        );
        if let Some(r) = &row.rss {
            let _ = write!(
                b,
                "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"24\" fill=\"{}\" fill-opacity=\"0.3\"/>",
                c(left),
                c(cy - 12.0),
                c(x.at(r.p50 / MIB) - left),
                row.colour
            );
        }
        if let Some(p) = &row.pss {
            let _ = write!(
                b,
                "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"12\" fill=\"{}\"/>",
                c(left),
                c(cy - 6.0),
                c(x.at(p.p50 / MIB) - left),
                row.colour
            );
            if p.p90 > p.p10 {
                let (x10, x90) = (x.at(p.p10 / MIB), x.at(p.p90 / MIB));
                let _ = write!(
                    b,
                    "<path d=\"M{a} {y1}V{y2}M{a} {cy}H{z}M{z} {y1}V{y2}\" stroke=\"{INK}\" stroke-width=\"1.3\" fill=\"none\"/>",
                    a = c(x10),
                    z = c(x90),
                    y1 = c(cy - 5.0),
                    y2 = c(cy + 5.0),
                    cy = c(cy),
                );
            }
        }
        b.push_str("</g>");
    }
    let text = "Memory of the server's whole process tree (master and workers) at the end of each \
                trial, median across valid trials; the whisker spans the 10th to 90th percentile \
                of PSS. PSS divides pages shared between forked workers among them, so it is the \
                fair measure for preforking servers; RSS counts them in every process. The axis \
                starts at zero.";
    let end = caption(
        &mut b,
        text,
        &source_line(report),
        plot_bottom + 62.0,
        WIDTH,
    );
    Some(document(
        "memory",
        "Memory per cohort",
        &desc,
        &subtitle(report),
        WIDTH,
        end + 4.0,
        &b,
    ))
}

// ---------------------------------------------------------------------------------------
// Dot matrix for two-axis experiments.

/// Viridis at five stops (colour-blind safe and monotone in lightness), interpolated.
fn viridis(t: f64) -> String {
    const STOPS: [(f64, f64, f64); 5] = [
        (68.0, 1.0, 84.0),
        (59.0, 82.0, 139.0),
        (33.0, 145.0, 140.0),
        (94.0, 201.0, 98.0),
        (253.0, 231.0, 37.0),
    ];
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.5
    };
    let pos = t * 4.0;
    let i = (pos.floor() as usize).min(3);
    let f = pos - i as f64;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    let mix = |x: f64, y: f64| (x + (y - x) * f).round() as u8;
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(a.0, b.0),
        mix(a.1, b.1),
        mix(a.2, b.2)
    )
}

/// Two-axis experiments: a rows × columns grid with one dot per cell whose area (from zero)
/// and colour encode the cell's median, with the number printed on the dot.
pub fn matrix(report: &Report) -> Option<String> {
    let m = report.matrix.as_ref()?;
    if m.rows.is_empty() || m.cols.is_empty() {
        return None;
    }
    let values: Vec<f64> = m
        .cells
        .iter()
        .flatten()
        .flatten()
        .map(|(_, v)| *v)
        .filter(|v| v.is_finite() && *v >= 0.0)
        .collect();
    let vmax = values.iter().copied().fold(0.0, f64::max);
    let vmin = values.iter().copied().fold(f64::INFINITY, f64::min);
    let row_names: Vec<&str> = m.rows.iter().map(String::as_str).collect();
    let left = (row_names
        .iter()
        .map(|n| text_width(&clip(n, 36), 12.5))
        .fold(text_width(&m.row_key, 12.0), f64::max)
        + 34.0)
        .clamp(110.0, 300.0);
    let cols = m.cols.len() as f64;
    let cell_w = ((WIDTH - left - 28.0) / cols).clamp(84.0, 190.0);
    // The baseline's value, when it is one of the cells: each other cell shows its ratio.
    let baseline_value = m
        .cells
        .iter()
        .flatten()
        .flatten()
        .find(|(cohort, v)| *cohort == report.baseline && v.is_finite() && *v > 0.0)
        .map(|(_, v)| *v);
    let cell_h = if baseline_value.is_some() {
        106.0
    } else {
        84.0
    };
    let width = (left + cell_w * cols + 28.0).max(WIDTH);
    let grid_right = left + cell_w * cols;
    let r_max = ((cell_w.min(80.0)) / 2.0 - 6.0).min(34.0);
    let lower_is_better = m.unit.contains("wall") || m.unit.trim() == "s";

    let mut b = String::new();
    let col_key_y = 72.0;
    let head_y = 92.0;
    let grid_top = 102.0;
    let _ = write!(
        b,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"12\" font-weight=\"600\">{} →</text>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"12\" font-weight=\"600\">{} ↓</text>",
        c(left + cell_w * cols / 2.0),
        c(col_key_y),
        escape(&m.col_key),
        c(left - 12.0),
        c(head_y),
        escape(&clip(&m.row_key, 36)),
    );
    let col_chars = ((cell_w - 8.0) / (12.0 * 0.58)) as usize;
    for (j, col) in m.cols.iter().enumerate() {
        let _ = write!(
            b,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"12\"><title>{}</title>{}</text>",
            c(left + cell_w * (j as f64 + 0.5)),
            c(head_y),
            escape(col),
            escape(&clip(col, col_chars.max(4)))
        );
    }
    let mut desc = format!(
        "Median {} per cell of {} (rows) by {} (columns); dot area is proportional to the value.",
        m.unit, m.row_key, m.col_key
    );
    for (i, row) in m.rows.iter().enumerate() {
        // Dots sit a little above the middle when a ratio line goes under them.
        let cy = grid_top + cell_h * i as f64 + 10.0 + r_max;
        let _ = write!(
            b,
            "<line x1=\"16\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{GRID}\"/>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"12.5\"><title>{}</title>{}</text>",
            c(grid_right),
            c(left - 12.0),
            c(cy + 4.0),
            escape(row),
            escape(&clip(row, 36)),
            y = c(grid_top + cell_h * i as f64),
        );
        for j in 0..m.cols.len() {
            let cx = left + cell_w * (j as f64 + 0.5);
            let cell = m
                .cells
                .get(i)
                .and_then(|r| r.get(j))
                .and_then(|c| c.as_ref());
            match cell {
                Some((cohort, v)) if v.is_finite() && *v >= 0.0 => {
                    let r = if vmax > 0.0 {
                        r_max * (v / vmax).sqrt()
                    } else {
                        0.0
                    };
                    let t = if vmax > vmin {
                        (v - vmin) / (vmax - vmin)
                    } else {
                        0.5
                    };
                    let text = fmt_sig(*v);
                    let _ = write!(
                        desc,
                        " {} × {} ({}): {} {}.",
                        row, m.cols[j], cohort, text, m.unit
                    );
                    let ratio = baseline_value.map(|base| {
                        if *cohort == report.baseline {
                            "baseline".to_string()
                        } else {
                            // The table's ratio (paired by block where possible), so the
                            // chart never disagrees with it; medians only as a fallback.
                            let metric = if m.unit == "requests/s" {
                                "throughput"
                            } else {
                                "wall"
                            };
                            let ratio = report
                                .comparisons
                                .iter()
                                .find(|c| &c.cohort == cohort && c.metric == metric)
                                .map_or(v / base, |c| c.ratio);
                            format!("{ratio:.2}× baseline")
                        }
                    });
                    let _ = write!(
                        b,
                        "<g data-series=\"{}\"><title>{}: {} {}</title>\
                         <circle cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{}\" stroke=\"#ffffff\" stroke-width=\"1\"/>\
                         <text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"12\" font-weight=\"600\" \
                         fill=\"{INK}\" stroke=\"#ffffff\" stroke-width=\"3\" stroke-linejoin=\"round\" paint-order=\"stroke\">{}</text></g>",
                        escape(cohort),
                        escape(cohort),
                        escape(&text),
                        escape(&m.unit),
                        c(cx),
                        c(cy),
                        c(r.max(1.5)),
                        viridis(t),
                        c(cx),
                        c(cy + 4.0),
                        escape(&text),
                    );
                    if let Some(ratio) = ratio {
                        // Inside the group, before its end: strip the closing tag, add, close.
                        b.truncate(b.len() - "</g>".len());
                        let _ = write!(
                            b,
                            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"11\" fill=\"{MUTED}\">{}</text></g>",
                            c(cx),
                            c(cy + r_max + 16.0),
                            escape(&ratio)
                        );
                    }
                }
                _ => {
                    let _ = write!(
                        b,
                        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"{MUTED}\">no data</text>",
                        c(cx),
                        c(cy + 4.0)
                    );
                }
            }
        }
    }
    let grid_bottom = grid_top + cell_h * m.rows.len() as f64;
    let _ = write!(
        b,
        "<line x1=\"16\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{GRID}\"/>",
        c(grid_right),
        y = c(grid_bottom)
    );
    // Colour key: the gradient from the smallest to the largest value.
    let key_y = grid_bottom + 24.0;
    let key_x = left;
    let key_w = 180.0;
    let _ = write!(
        b,
        "<defs><linearGradient id=\"rr-matrix-scale\" x1=\"0\" x2=\"1\" y1=\"0\" y2=\"0\">\
         <stop offset=\"0\" stop-color=\"{}\"/><stop offset=\"0.25\" stop-color=\"{}\"/>\
         <stop offset=\"0.5\" stop-color=\"{}\"/><stop offset=\"0.75\" stop-color=\"{}\"/>\
         <stop offset=\"1\" stop-color=\"{}\"/></linearGradient></defs>\
         <rect x=\"{}\" y=\"{}\" width=\"{key_w}\" height=\"10\" fill=\"url(#rr-matrix-scale)\"/>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"11\" fill=\"{MUTED}\">{}</text>\
         <text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"{MUTED}\">{} {}</text>",
        viridis(0.0),
        viridis(0.25),
        viridis(0.5),
        viridis(0.75),
        viridis(1.0),
        c(key_x),
        c(key_y),
        c(key_x - 6.0),
        c(key_y + 9.0),
        escape(&if values.is_empty() {
            "–".to_string()
        } else {
            fmt_sig(vmin)
        }),
        c(key_x + key_w + 6.0),
        c(key_y + 9.0),
        escape(&if values.is_empty() {
            "–".to_string()
        } else {
            fmt_sig(vmax)
        }),
        escape(&m.unit),
    );
    let text =
        format!(
        "Median {} of each combination of {} and {}. A dot's area is proportional to its value \
         (zero is no dot) and its colour runs from dark (smallest) to yellow (largest); the \
         number is printed on each dot{}. {}",
        m.unit,
        m.row_key,
        m.col_key,
        if baseline_value.is_some() { " and its ratio to the baseline under it" } else { "" },
        if lower_is_better { "Lower is better." } else { "Higher is better." }
    );
    let end = caption(&mut b, &text, &source_line(report), key_y + 38.0, width);
    let title = format!("Median {} by {} and {}", m.unit, m.row_key, m.col_key);
    Some(document(
        "matrix",
        &title,
        &desc,
        &subtitle(report),
        width,
        end + 4.0,
        &b,
    ))
}

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
    // Series in report order, then cohorts known only from trials.
    let mut series: Vec<&str> = report
        .cohorts
        .iter()
        .map(|c| c.name.as_str())
        .filter(|n| points.iter().any(|(t, _)| t.cohort == *n))
        .collect();
    for (t, _) in &points {
        if !series.contains(&t.cohort.as_str()) {
            series.push(&t.cohort);
        }
    }
    let max_seq = points.iter().map(|(t, _)| t.sequence).max().unwrap_or(0) as f64;
    let max_v = points.iter().map(|(_, v)| *v).fold(0.0, f64::max);
    let (unit, axis_label, what) = if use_rate {
        (
            "req/s",
            "requests per second, from zero",
            "Requests per second",
        )
    } else {
        ("s", "wall time, seconds, from zero", "Wall time")
    };

    let left = 74.0;
    let right = WIDTH - 28.0;
    let plot_top = 64.0;
    let plot_bottom = plot_top + 260.0;
    let mut b = String::new();

    // Block shading first, under everything.
    let x_ticks_raw = nice_ticks(0.0, max_seq.max(1.0), 8);
    let x_max = *x_ticks_raw.last().unwrap_or(&1.0);
    let x = Scale::new(-0.5, x_max + 0.5, left, right);
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
                    c(plot_top),
                    c(x.at(*hi as f64 + 0.5) - x.at(*lo as f64 - 0.5)),
                    c(plot_bottom - plot_top)
                );
            }
        }
    }
    let (yt, y_max) = zero_based_ticks(max_v, 6, "");
    let y = Scale::new(0.0, y_max, plot_bottom, plot_top);
    y_axis(&mut b, y, &yt, left, right, axis_label, linear(0.0, y_max));
    let xt: Vec<(f64, String)> = x_ticks_raw.iter().map(|t| (*t, fmt_num(*t, 0))).collect();
    x_axis(
        &mut b,
        x,
        &xt,
        plot_top,
        plot_bottom,
        "trial, in the order it ran",
        linear(0.0, x_max),
    );

    let mut desc = format!(
        "{what} of every trial in the order the trials ran; the value axis starts at zero."
    );
    let any_invalid = points.iter().any(|(t, _)| !is_valid(t));
    for name in &series {
        let colour = colour_of(report, name);
        let mut mine: Vec<&(&TrialPoint, f64)> =
            points.iter().filter(|(t, _)| t.cohort == *name).collect();
        mine.sort_by_key(|(t, _)| t.sequence);
        let _ = write!(
            desc,
            " {}: {} trial{}.",
            name,
            mine.len(),
            if mine.len() == 1 { "" } else { "s" }
        );
        let _ = write!(
            b,
            "<g data-series=\"{}\"><title>{}</title>",
            escape(name),
            escape(name)
        );
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
    let mut items: Vec<(Swatch, String)> = series
        .iter()
        .map(|n| (Swatch::Dot(colour_of(report, n)), n.to_string()))
        .collect();
    if any_invalid {
        items.push((Swatch::Ring, "invalid or failed trial".to_string()));
    }
    let below = legend(&mut b, &items, left, plot_bottom + 62.0, WIDTH - 16.0);
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::*;
    use std::collections::BTreeMap;

    fn summary(values: &[f64]) -> Summary {
        Summary::of(values).unwrap()
    }

    pub(crate) fn cohort(name: &str, rate: f64) -> Cohort {
        Cohort {
            name: name.to_string(),
            key: BTreeMap::new(),
            valid: 3,
            invalid: 1,
            failed: 0,
            throughput: Some(summary(&[rate * 0.98, rate, rate * 1.03])),
            latency: Some(Latency {
                p50: 900.0,
                p90: 1500.0,
                p99: 4000.0,
                p99_9: 9000.0,
                max: 20000.0,
                curve: vec![
                    (0.0, 300.0),
                    (50.0, 900.0),
                    (90.0, 1500.0),
                    (99.0, 4000.0),
                    (99.9, 9000.0),
                    (100.0, 20000.0),
                ],
                p50_across_trials: None,
                p99_across_trials: None,
            }),
            memory: Memory {
                pss_end: Some(summary(&[100.0 * MIB, 110.0 * MIB])),
                rss_end: Some(summary(&[180.0 * MIB, 190.0 * MIB])),
                ..Default::default()
            },
            cpu: Cpu::default(),
            error_rate: None,
            script: None,
            runtime: None,
            verified: vec![],
            outliers: vec![],
            noise: None,
        }
    }

    fn trial(cohort: &str, id: usize, seq: usize, status: &str, rate: f64) -> TrialPoint {
        TrialPoint {
            cohort: cohort.to_string(),
            source: 0,
            trial_id: id,
            block: (seq / 3) as u32,
            sequence: seq,
            status: status.to_string(),
            requests_per_s: Some(rate),
            pss_end_bytes: None,
            wall_s: None,
        }
    }

    pub(crate) const HOSTILE: &str = "<script>alert(1)</script>\" onload=\"x";

    pub(crate) fn report() -> Report {
        let names = ["base", HOSTILE, "third & last"];
        let mut trials = Vec::new();
        for (k, name) in names.iter().enumerate() {
            for block in 0..3 {
                let seq = block * 3 + k;
                trials.push(trial(
                    name,
                    seq + 1,
                    seq,
                    if block == 2 && k == 1 {
                        "invalid"
                    } else {
                        "valid"
                    },
                    1000.0 + 100.0 * k as f64,
                ));
            }
        }
        Report {
            schema: REPORT_SCHEMA.to_string(),
            command: "rubyrace report results/ --label '<b>x</b>'".to_string(),
            confidence: 0.95,
            sources: vec![Source {
                dir: "results/<dir>".to_string(),
                experiment: "exp & co".to_string(),
                created_at: "2026-01-01T00:00:00Z".to_string(),
                machines: vec!["host".to_string()],
                trials: 9,
                commands: vec!["rubyrace run exp.toml".to_string()],
                smoke: false,
                design: "blocks".to_string(),
                doctor: vec![],
            }],
            workload: crate::model::Workloads::Http,
            group_by: vec!["label".to_string()],
            baseline: "base".to_string(),
            cohorts: names
                .iter()
                .enumerate()
                .map(|(k, n)| cohort(n, 1000.0 + 100.0 * k as f64))
                .collect(),
            comparisons: vec![],
            overhead: None,
            warnings: vec![],
            trials,
            matrix: Some(DotMatrix {
                row_key: "ruby".to_string(),
                col_key: "yjit<".to_string(),
                rows: vec!["3.3".to_string(), HOSTILE.to_string()],
                cols: vec!["off".to_string(), "on".to_string()],
                cells: vec![
                    vec![
                        Some(("base".to_string(), 1000.0)),
                        Some(("third & last".to_string(), 1200.0)),
                    ],
                    vec![Some((HOSTILE.to_string(), 1100.0)), None],
                ],
                unit: "requests/s".to_string(),
            }),
            environment: vec![],
        }
    }

    fn count(svg: &str, needle: &str) -> usize {
        svg.matches(needle).count()
    }

    #[test]
    fn nice_ticks_are_nice() {
        assert_eq!(nice_ticks(0.0, 1.0, 6), vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
        assert_eq!(
            nice_ticks(0.0, 2374.0, 6),
            vec![0.0, 500.0, 1000.0, 1500.0, 2000.0, 2500.0]
        );
        assert_eq!(
            nice_ticks(0.0, 100.0, 6),
            vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]
        );
        let t = nice_ticks(0.0, 0.37, 5);
        assert_eq!(t, vec![0.0, 0.1, 0.2, 0.3, 0.4]);
        // Every step is 1, 2 or 5 × 10^n and the ticks cover the range.
        for hi in [0.003, 1.7, 9.9, 13.0, 987.0, 31_234.0, 2.5e6] {
            let t = nice_ticks(0.0, hi, 6);
            assert_eq!(t[0], 0.0);
            assert!(*t.last().unwrap() >= hi, "{hi}: {t:?}");
            let step = t[1] - t[0];
            let mantissa = step / 10f64.powf(step.log10().floor());
            assert!(
                [1.0, 2.0, 5.0].iter().any(|m| (mantissa - m).abs() < 1e-6),
                "{hi}: step {step}"
            );
            assert!(t.len() >= 3 && t.len() <= 12, "{hi}: {t:?}");
        }
        // Degenerate ranges still give an axis.
        assert_eq!(nice_ticks(0.0, 0.0, 5).first(), Some(&0.0));
        assert!(nice_ticks(0.0, f64::NAN, 5).len() >= 2);
    }

    #[test]
    fn nines_axis() {
        assert!((nines(90.0) - 1.0).abs() < 1e-12);
        assert!((nines(99.0) - 2.0).abs() < 1e-12);
        assert!((nines(99.9) - 3.0).abs() < 1e-9);
        assert_eq!(nines(0.0), 0.0);
    }

    #[test]
    fn jitter_is_deterministic_and_bounded() {
        for id in 0..1000 {
            let j = jitter(1, id);
            assert!((-1.0..1.0).contains(&j));
            assert_eq!(j, jitter(1, id));
        }
        assert_ne!(jitter(0, 1), jitter(0, 2));
    }

    #[test]
    fn every_chart_is_marked_and_counts_its_series() {
        let r = report();
        let charts = all(&r);
        let names: Vec<&str> = charts.iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            ["throughput", "matrix", "latency", "memory", "trial-order"]
        );
        for chart in &charts {
            assert!(chart
                .svg
                .starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\""));
            assert!(chart
                .svg
                .contains(&format!("data-chart=\"{}\"", chart.name)));
            assert!(chart.svg.contains("<title id="));
            assert!(chart.svg.contains("<desc id="));
            assert!(chart.svg.contains("font-family=\"system-ui, sans-serif\""));
            // Three cohorts; the matrix has three filled cells of the three cohorts.
            let expected = 3;
            assert_eq!(
                count(&chart.svg, " data-series=\""),
                expected,
                "{}",
                chart.name
            );
            assert!(!chart.title.is_empty());
        }
        // No wall chart without script times; a wall chart with them.
        assert!(wall(&r).is_none());
        let mut s = r.clone();
        s.workload = crate::model::Workloads::Script;
        for c in &mut s.cohorts {
            c.throughput = None;
            c.script = Some(ScriptTimes {
                wall: Some(summary(&[1.2, 1.3, 1.25])),
                ..Default::default()
            });
        }
        for t in &mut s.trials {
            t.wall_s = t.requests_per_s.map(|r| r / 1000.0);
            t.requests_per_s = None;
        }
        let svg = wall(&s).unwrap();
        assert_eq!(count(&svg, " data-series=\""), 3);
        assert!(svg.contains("data-chart=\"wall\""));
        assert!(throughput(&s).is_none());
        let order = trial_order(&s).unwrap();
        assert!(order.contains("wall time, seconds"));
    }

    #[test]
    fn hostile_labels_are_escaped_in_text_and_attributes() {
        let r = report();
        for chart in all(&r) {
            assert!(
                !chart.svg.contains("<script"),
                "{}: raw <script",
                chart.name
            );
            assert!(
                !chart.svg.contains("\" onload=\""),
                "{}: attribute broken out",
                chart.name
            );
            assert!(
                chart
                    .svg
                    .contains("&lt;script&gt;alert(1)&lt;/script&gt;&quot; onload=&quot;x"),
                "{}",
                chart.name
            );
            assert!(
                !chart.svg.contains("third & last"),
                "{}: raw ampersand",
                chart.name
            );
        }
        // The escaped name is the attribute's whole value.
        let t = throughput(&r).unwrap();
        assert!(t.contains(
            "data-series=\"&lt;script&gt;alert(1)&lt;/script&gt;&quot; onload=&quot;x\""
        ));
        // The matrix escapes its keys and row labels too.
        let m = matrix(&r).unwrap();
        assert!(m.contains("yjit&lt; →"));
    }

    /// (data-scale, data-min, the axis group's text) of every axis of a chart.
    fn axes(svg: &str) -> Vec<(String, String, String)> {
        svg.split("<g class=\"axis\"")
            .skip(1)
            .map(|rest| {
                let attr = |name: &str| {
                    rest.split(&format!("{name}=\""))
                        .nth(1)
                        .unwrap()
                        .split('"')
                        .next()
                        .unwrap()
                        .to_string()
                };
                let body = rest.split("</g>").next().unwrap().to_string();
                (attr("data-scale"), attr("data-min"), body)
            })
            .collect()
    }

    #[test]
    fn value_axes_start_at_zero_unless_labelled_log() {
        let r = report();
        for chart in all(&r) {
            let axes = axes(&chart.svg);
            if chart.name == "matrix" {
                assert!(axes.is_empty());
                continue;
            }
            assert!(!axes.is_empty(), "{}", chart.name);
            for (kind, min, body) in axes {
                match kind.as_str() {
                    "linear" | "nines" => {
                        assert_eq!(min, "0", "{}", chart.name);
                        assert!(
                            body.contains(">0</text>") || body.contains(">0%</text>"),
                            "{}: no 0 tick",
                            chart.name
                        );
                    }
                    "log" => assert!(
                        body.contains("log scale"),
                        "{}: a log axis must say so",
                        chart.name
                    ),
                    other => panic!("{}: axis kind {other}", chart.name),
                }
            }
        }
        // Throughput of ~1,000–1,200 req/s: the axis runs 0 to a nice number above the max.
        let t = throughput(&r).unwrap();
        assert!(
            t.contains("data-axis=\"x\" data-scale=\"linear\" data-min=\"0\" data-max=\"1400\""),
            "{t}"
        );
        // Latency of 300 µs to 9 ms: a log axis, labelled, with 1-2-5 ticks.
        let l = latency(&r).unwrap();
        assert!(
            l.contains("data-axis=\"y\" data-scale=\"log\" data-min=\"0.2\" data-max=\"10\""),
            "{l}"
        );
        assert!(l.contains("latency (ms, log scale)"));
        // A narrow latency range stays linear from zero.
        let mut narrow = r.clone();
        for c in &mut narrow.cohorts {
            c.latency.as_mut().unwrap().curve = vec![(0.0, 800.0), (50.0, 900.0), (99.0, 1500.0)];
        }
        let l = latency(&narrow).unwrap();
        assert!(
            l.contains("data-axis=\"y\" data-scale=\"linear\" data-min=\"0\""),
            "{l}"
        );
        assert!(l.contains("latency (µs), from zero"));
    }

    #[test]
    fn log_ticks_are_one_two_five() {
        assert_eq!(log_ticks(0.2, 10.0), vec![0.2, 0.5, 1.0, 2.0, 5.0, 10.0]);
        assert_eq!(
            log_ticks(1.0, 100_000.0),
            vec![1.0, 10.0, 100.0, 1000.0, 10_000.0, 100_000.0]
        );
        assert_eq!(log_extent(0.31, 9.0), (0.2, 10.0));
        assert_eq!(log_extent(1.0, 1.0), (1.0, 10.0));
    }

    #[test]
    fn invalid_trials_are_hollow() {
        let r = report();
        let t = throughput(&r).unwrap();
        assert_eq!(
            count(&t, &format!("fill=\"#ffffff\" stroke=\"{INVALID}\"")),
            2,
            "one trial, one legend entry"
        );
        let o = trial_order(&r).unwrap();
        assert_eq!(
            count(&o, &format!("fill=\"#ffffff\" stroke=\"{INVALID}\"")),
            2
        );
    }

    #[test]
    fn empty_report_draws_nothing() {
        let mut r = report();
        r.cohorts.clear();
        r.trials.clear();
        r.matrix = None;
        assert!(all(&r).is_empty());
    }
}
