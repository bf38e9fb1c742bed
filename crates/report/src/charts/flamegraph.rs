//! A flame graph of folded stacks, drawn by inferno (the Rust port of Brendan Gregg's
//! flamegraph.pl): an SVG whose own script gives search (Ctrl-F or the Search button),
//! zoom on click and the full frame name on hover, when opened as a file of its own.

use std::collections::BTreeMap;

/// The flame graph of `stacks` as a standalone SVG. `subtitle` says what the samples are
/// (how many trials, requests, the rate), so an exported file stands on its own.
pub fn flamegraph_svg(
    stacks: &BTreeMap<String, u64>,
    title: &str,
    subtitle: &str,
) -> anyhow::Result<String> {
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_string();
    options.subtitle = Some(subtitle.to_string());
    options.count_name = "samples".into();
    options.deterministic = true;
    let lines: Vec<String> = stacks.iter().map(|(s, n)| format!("{s} {n}")).collect();
    let mut svg = Vec::new();
    inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut svg)?;
    Ok(String::from_utf8(svg)?)
}
