//! The only markup of the HTML report that maud does not build and escape itself, each
//! entering through [`PreEscaped`] here and nowhere else (a unit test holds every other file
//! of the page to that). Each is made by this crate, never read from the user:
//!
//! - the style sheet, `report.css`, compiled in;
//! - the SVG charts of [`crate::charts`], whose every user string (cohort names, axis
//!   keys, units, captions) is escaped by [`crate::format::escape`], through the label helpers
//!   of `charts/svg.rs`;
//! - inferno's flame graphs, which escape frame names and titles themselves and carry the
//!   scripts whose hashes the page's Content-Security-Policy allows. They are never put in
//!   the page as markup: each becomes the document of a sandboxed `<iframe srcdoc>`, an
//!   attribute value that maud escapes as a whole.

use maud::PreEscaped;

use crate::charts::flamegraph::Flame;
use crate::charts::Chart;

/// The page's style sheet: CSS is not HTML, and escaping its quotes would break it.
pub(super) const CSS: &str = include_str!("../report.css");

pub(super) fn css() -> PreEscaped<&'static str> {
    PreEscaped(CSS)
}

/// A chart's `<svg>`, inline.
pub(super) fn chart(chart: &Chart) -> PreEscaped<&str> {
    PreEscaped(chart.svg.as_str())
}

/// A flame graph's `<svg>` (from its root on, without inferno's XML prolog), for the body of
/// its frame's document.
pub(crate) fn flame_svg(flame: &Flame) -> PreEscaped<&str> {
    PreEscaped(&flame.svg[flame.svg.find("<svg").unwrap_or(0)..])
}

/// The style of a flame graph's frame document.
pub(crate) fn flame_css() -> PreEscaped<&'static str> {
    PreEscaped("html,body{margin:0}svg{display:block;width:100%}")
}
