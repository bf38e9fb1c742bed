//! Hand-written SVG charts of a [`Report`]: no JavaScript, no external resources, one
//! function per chart, each returning a standalone `<svg>` document (or `None` when the
//! report has nothing for that chart to draw). The HTML report inlines them and
//! [`crate::render::png`] writes them as `.svg` and `.png` files for blog posts and bug reports.
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
//!
//! One module per chart (`spread`: throughput and wall time, `latency`, `memory`,
//! `matrix`, `trial_order`), and `svg`, what they all draw with. `flamegraph` is the
//! exception: inferno draws it, with its own script for search and zoom.

pub mod bisect;
pub mod flamegraph;
mod latency;
mod matrix;
mod memory;
mod spread;
pub mod svg;
#[cfg(test)]
pub(crate) mod tests;
mod trial_order;

pub use latency::{latency, log_ticks, nines};
pub use matrix::matrix;
pub use memory::memory;
pub use spread::{throughput, wall};
pub use svg::{jitter, nice_ticks};
pub use trial_order::trial_order;

use crate::model::Report;

/// The font stack of every chart.
pub const FONT_FAMILY: &str = "system-ui, sans-serif";

/// The Okabe–Ito palette (Okabe & Ito 2008), ordered so the first colours are the most
/// distinct on white; yellow comes last because it is faint on a light background.
pub const PALETTE: [&str; 8] = [
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#F0E442",
];

/// Outline of invalid and failed trials (drawn hollow, so colour is not the only cue).
pub const INVALID: &str = "#B2182B";
pub const INK: &str = "#1f2328";
pub const MUTED: &str = "#59636e";
pub const GRID: &str = "#e4e7eb";
pub const AXIS: &str = "#8c959f";

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
pub(crate) type Maker = (&'static str, fn(&Report) -> Option<String>);

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

pub(crate) fn title_of(svg: &str) -> String {
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
pub(crate) fn dash(index: usize) -> &'static str {
    ["", "7 4", "2 3", "9 3 2 3"][(index / PALETTE.len()) % 4]
}

pub(crate) fn colour_of(report: &Report, cohort: &str) -> &'static str {
    let i = report.cohorts.iter().position(|c| c.name == cohort);
    // Cohorts only in `trials` come after the known ones.
    let i = i.unwrap_or_else(|| report.cohorts.len() + extra_index(report, cohort));
    cohort_colour(i)
}

pub(crate) fn extra_index(report: &Report, cohort: &str) -> usize {
    let mut extra: Vec<&str> = Vec::new();
    for t in &report.trials {
        if !report.cohorts.iter().any(|c| c.name == t.cohort) && !extra.contains(&t.cohort.as_str())
        {
            extra.push(&t.cohort);
        }
    }
    extra.iter().position(|c| *c == cohort).unwrap_or(0)
}
