//! What every chart draws with: nice ticks and number formats, text measures, the SVG
//! document, labels (every `<text>` of every chart, escaped in one place: `Label`), axes,
//! scales, captions and legends.

use std::fmt::Write as _;

use super::{AXIS, FONT_FAMILY, GRID, INK, INVALID, MUTED};
use crate::format::{escape, fmt_num};
use crate::model::{Report, TrialPoint};

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

pub fn nice_number(x: f64) -> f64 {
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
pub fn tick_decimals(ticks: &[f64]) -> usize {
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
pub fn c(v: f64) -> String {
    let r = (v * 100.0).round() / 100.0;
    if r == r.trunc() {
        format!("{}", r as i64)
    } else {
        format!("{r}")
    }
}

/// Approximate width of `s` in px at `size` px: system sans-serif averages about 0.56 em
/// per character; a little more keeps labels clear of what follows.
pub fn text_width(s: &str, size: f64) -> f64 {
    s.chars().count() as f64 * size * 0.58
}

/// `s` shortened to `max` characters with an ellipsis.
pub fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

/// Greedy word wrap to lines of at most `max` characters (longer words get a line each).
pub fn wrap(text: &str, max: usize) -> Vec<String> {
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
// Labels: every `<text>` of every chart, escaped here.

/// How a label sits on its point (`text-anchor`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    Start,
    Middle,
    End,
}

/// A `<text>` element of a chart: where it is, how it is anchored and drawn, and an optional
/// tooltip. [`Label::draw`] escapes its text and tooltip, so no chart writes a `<text>` (or
/// a user's string into one) itself. Attributes are written in one order: position,
/// `text-anchor`, `font-size`, `font-weight`, `fill`, then the halo's.
#[derive(Clone, Copy)]
pub struct Label<'a> {
    x: f64,
    y: f64,
    /// Turned a quarter counter-clockwise about (x, y): a vertical axis's label.
    rotated: bool,
    anchor: Anchor,
    size: Option<f64>,
    bold: bool,
    fill: Option<&'static str>,
    /// A white outline under the glyphs, for text drawn over marks.
    halo: bool,
    /// The `<title>` inside the text: what a pointer over it shows (a clipped label's full
    /// text).
    tooltip: Option<&'a str>,
}

/// A label at (x, y), anchored at its start, in the chart's font size and ink.
pub fn label(x: f64, y: f64) -> Label<'static> {
    Label {
        x,
        y,
        rotated: false,
        anchor: Anchor::Start,
        size: None,
        bold: false,
        fill: None,
        halo: false,
        tooltip: None,
    }
}

impl<'a> Label<'a> {
    pub fn anchor(self, anchor: Anchor) -> Self {
        Label { anchor, ..self }
    }
    pub fn middle(self) -> Self {
        self.anchor(Anchor::Middle)
    }
    pub fn end(self) -> Self {
        self.anchor(Anchor::End)
    }
    /// Font size, px.
    pub fn size(self, px: f64) -> Self {
        Label {
            size: Some(px),
            ..self
        }
    }
    pub fn bold(self, bold: bool) -> Self {
        Label { bold, ..self }
    }
    /// A colour of the chart's palette (a constant, never the user's).
    pub fn fill(self, colour: &'static str) -> Self {
        Label {
            fill: Some(colour),
            ..self
        }
    }
    pub fn muted(self) -> Self {
        self.fill(MUTED)
    }
    pub fn rotated(self) -> Self {
        Label {
            rotated: true,
            ..self
        }
    }
    pub fn halo(self) -> Self {
        Label { halo: true, ..self }
    }
    pub fn tooltip<'b>(self, text: &'b str) -> Label<'b> {
        Label {
            tooltip: Some(text),
            ..self
        }
    }

    /// Writes the `<text>` element with `text`, escaped.
    pub fn draw(&self, b: &mut String, text: &str) {
        if self.rotated {
            let _ = write!(
                b,
                "<text transform=\"translate({} {}) rotate(-90)\"",
                c(self.x),
                c(self.y)
            );
        } else {
            let _ = write!(b, "<text x=\"{}\" y=\"{}\"", c(self.x), c(self.y));
        }
        match self.anchor {
            Anchor::Start => {}
            Anchor::Middle => b.push_str(" text-anchor=\"middle\""),
            Anchor::End => b.push_str(" text-anchor=\"end\""),
        }
        if let Some(size) = self.size {
            let _ = write!(b, " font-size=\"{}\"", c(size));
        }
        if self.bold {
            b.push_str(" font-weight=\"600\"");
        }
        if let Some(fill) = self.fill {
            let _ = write!(b, " fill=\"{fill}\"");
        }
        if self.halo {
            b.push_str(
                " stroke=\"#ffffff\" stroke-width=\"3\" stroke-linejoin=\"round\" paint-order=\"stroke\"",
            );
        }
        b.push('>');
        if let Some(tooltip) = self.tooltip {
            let _ = write!(b, "<title>{}</title>", escape(tooltip));
        }
        b.push_str(&escape(text));
        b.push_str("</text>");
    }
}

/// Opens the group of one series (a cohort's marks, or a matrix cell's), marked
/// `data-series="NAME"` for tests and scripts, with `tooltip` as its `<title>`; the caller
/// closes it with `</g>`.
pub fn open_series(b: &mut String, name: &str, tooltip: &str) {
    let _ = write!(
        b,
        "<g data-series=\"{}\"><title>{}</title>",
        escape(name),
        escape(tooltip)
    );
}

/// The two lines left of a cohort's row: its name (clipped to `chars`, bold for the
/// baseline) and a muted line of figures under it, both right-aligned at `x`.
pub fn row_labels(
    b: &mut String,
    x: f64,
    cy: f64,
    name: &str,
    chars: usize,
    baseline: bool,
    second: &str,
) {
    label(x, cy - 2.0)
        .end()
        .size(12.5)
        .bold(baseline)
        .draw(b, &clip(name, chars));
    label(x, cy + 12.0).end().size(11.0).muted().draw(b, second);
}

// ---------------------------------------------------------------------------------------
// Drawing helpers.

/// A linear map from the domain `d0..d1` to the range `r0..r1`.
#[derive(Clone, Copy)]
pub struct Scale {
    pub d0: f64,
    pub d1: f64,
    pub r0: f64,
    pub r1: f64,
}

impl Scale {
    pub fn new(d0: f64, d1: f64, r0: f64, r1: f64) -> Scale {
        let d1 = if d1 == d0 { d0 + 1.0 } else { d1 };
        Scale { d0, d1, r0, r1 }
    }
    pub fn at(&self, v: f64) -> f64 {
        self.r0 + (v - self.d0) / (self.d1 - self.d0) * (self.r1 - self.r0)
    }
}

/// The document around a chart's body: root element, `<title>`, `<desc>`, background,
/// visible title and subtitle. `height` is the final height.
pub fn document(
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
         <rect width=\"{w}\" height=\"{h}\" fill=\"#ffffff\"/>",
        name = escape(name),
        w = c(width),
        h = c(height),
        title = escape(title),
        desc = escape(desc),
    );
    label(16.0, 27.0).size(16.0).bold(true).draw(&mut s, title);
    if !subtitle.is_empty() {
        label(16.0, 45.0).size(12.0).muted().draw(&mut s, subtitle);
    }
    s.push_str(body);
    s.push_str("</svg>");
    s
}

/// The caption under a chart: wrapped lines of muted text starting at `y`, then a source
/// line. Returns the y below it.
pub fn caption(b: &mut String, text: &str, source: &str, y: f64, width: f64) -> f64 {
    let max_chars = ((width - 32.0) / (11.5 * 0.55)) as usize;
    let mut y = y;
    for line in wrap(text, max_chars) {
        label(16.0, y).size(11.5).muted().draw(b, &line);
        y += 15.0;
    }
    if !source.is_empty() {
        label(16.0, y + 2.0)
            .size(10.5)
            .fill(AXIS)
            .draw(b, &clip(source, max_chars + 8));
        y += 17.0;
    }
    y
}

/// "rubyrace · experiment A, B · N trials · created_at": where the numbers come from.
pub fn source_line(report: &Report) -> String {
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
pub struct Extent {
    pub min: f64,
    pub max: f64,
    /// "linear", "log" or "nines".
    pub kind: &'static str,
}

pub fn linear(min: f64, max: f64) -> Extent {
    Extent {
        min,
        max,
        kind: "linear",
    }
}

/// Vertical grid lines and labels of a horizontal value axis along `y_bottom`.
#[allow(clippy::too_many_arguments)]
pub fn x_axis(
    b: &mut String,
    scale: Scale,
    ticks: &[(f64, String)],
    y_top: f64,
    y_bottom: f64,
    title: &str,
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
             <line x1=\"{x}\" y1=\"{bt}\" x2=\"{x}\" y2=\"{bt5}\" stroke=\"{AXIS}\"/>",
            x = c(x),
            t = c(y_top),
            bt = c(y_bottom),
            bt5 = c(y_bottom + 4.0),
        );
        tick_label(x, y_bottom + 17.0).middle().draw(b, text);
    }
    let _ = write!(
        b,
        "<line x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{AXIS}\"/>",
        c(scale.r0),
        c(scale.r1),
        y = c(y_bottom),
    );
    axis_label((scale.r0 + scale.r1) / 2.0, y_bottom + 36.0).draw(b, title);
    b.push_str("</g>");
}

/// A tick's number on an axis.
fn tick_label(x: f64, y: f64) -> Label<'static> {
    label(x, y).size(11.0).muted()
}

/// What an axis measures, centred on it.
fn axis_label(x: f64, y: f64) -> Label<'static> {
    label(x, y).middle().size(12.0).fill(INK)
}

/// Horizontal grid lines and labels of a vertical value axis along `x_left`, with the
/// axis label rotated alongside.
#[allow(clippy::too_many_arguments)]
pub fn y_axis(
    b: &mut String,
    scale: Scale,
    ticks: &[(f64, String)],
    x_left: f64,
    x_right: f64,
    title: &str,
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
            "<line x1=\"{l}\" y1=\"{y}\" x2=\"{r}\" y2=\"{y}\" stroke=\"{GRID}\"/>",
            l = c(x_left),
            r = c(x_right),
            y = c(y),
        );
        tick_label(x_left - 6.0, y + 4.0).end().draw(b, text);
    }
    let _ = write!(
        b,
        "<line x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\" stroke=\"{AXIS}\"/>",
        c(scale.r0),
        c(scale.r1),
        x = c(x_left),
    );
    axis_label(18.0, (scale.r0 + scale.r1) / 2.0)
        .rotated()
        .draw(b, title);
    b.push_str("</g>");
}

/// Value ticks from zero to at least `max`, labelled; returns (ticks, axis maximum).
pub fn zero_based_ticks(max: f64, target: usize, unit_suffix: &str) -> (Vec<(f64, String)>, f64) {
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
pub enum Swatch<'a> {
    Dot(&'a str),
    Ring,
    Line(&'a str, &'a str),
    Band(&'a str),
    Bar(&'a str, f64),
    MedianTick,
}

/// A legend laid out left to right, wrapping at `max_x`; returns the y below it.
pub fn legend(b: &mut String, items: &[(Swatch, String)], x0: f64, y0: f64, max_x: f64) -> f64 {
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
        self::label(x + 22.0, y).draw(b, &label);
        x += w;
    }
    b.push_str("</g>");
    y + 8.0
}

/// Width of the label column of a chart with one row per cohort.
pub fn label_column(names: &[&str]) -> f64 {
    let widest = names
        .iter()
        .map(|n| text_width(&clip(n, 44), 12.5))
        .fold(0.0, f64::max);
    // At least wide enough for the second line under each name ("median 13,694 req/s ·
    // baseline", "PSS 41.6 MiB · RSS 43.3 MiB").
    (widest + 28.0).clamp(215.0, 320.0)
}

/// Characters of a cohort name that fit in the label column.
pub fn label_chars(column: f64) -> usize {
    (((column - 24.0) / (12.5 * 0.58)) as usize).max(8)
}

pub fn is_valid(t: &TrialPoint) -> bool {
    t.status == "valid"
}

pub fn subtitle(report: &Report) -> String {
    let mut parts = Vec::new();
    if !report.group_by.is_empty() {
        parts.push(format!("cohorts by {}", report.group_by.join(", ")));
    }
    if !report.baseline.is_empty() {
        parts.push(format!("baseline {}", report.baseline));
    }
    clip(&parts.join(" · "), 110)
}
