//! Flame graphs of folded stacks, drawn by inferno (the Rust port of Brendan Gregg's
//! flamegraph.pl): SVGs whose own script gives search (Ctrl-F or the Search button), zoom
//! on click and the full frame name on hover.
//!
//! [`flamegraphs`] makes every flame graph of a report: one per cohort and profiler
//! (merged over its profiled trials, frames as the profiler wrote them), and one
//! differential per other cohort and profiler against the baseline. A differential flame
//! graph has the cohort's widths and colours each frame by its change per request: the
//! baseline's counts are scaled by the time per request one sample stands for on each side
//! before inferno compares them, so a configuration that served more requests does not look
//! more costly. Red is more time per
//! request, blue less. Its frames are matched as the frame table matches them
//! (`analysis::profile::frame_key`: no line numbers, no versions in paths).

use std::collections::BTreeMap;

use crate::model::{CohortProfile, Report};

/// One flame graph: a file-name-safe name (`flame-rbspy-base`, `flame-diff-perf-yjit`),
/// what it shows, and the SVG.
#[derive(Clone, Debug)]
pub struct Flame {
    pub name: String,
    pub cohort: String,
    pub profiler: String,
    /// Against the baseline (a differential flame graph) or the cohort's own profile.
    pub differential: bool,
    pub title: String,
    pub svg: String,
}

/// The flame graph of `stacks` as a standalone SVG. `subtitle` says what the samples are
/// (how many trials, requests, the rate), so an exported file stands on its own.
pub fn flamegraph_svg(
    stacks: &BTreeMap<String, u64>,
    title: &str,
    subtitle: &str,
) -> anyhow::Result<String> {
    let lines: Vec<String> = stacks.iter().map(|(s, n)| format!("{s} {n}")).collect();
    draw(&lines, title, subtitle)
}

/// The differential flame graph of `after` against `before`, `before` scaled by `scale`
/// (the ratio of the units served, after ÷ before) and rounded to whole samples.
pub fn differential_svg(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
    scale: f64,
    title: &str,
    subtitle: &str,
) -> anyhow::Result<String> {
    let mut both: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for (stack, &n) in before {
        both.entry(stack).or_default().0 = (n as f64 * scale).round() as u64;
    }
    for (stack, &n) in after {
        both.entry(stack).or_default().1 = n;
    }
    let lines: Vec<String> = both
        .iter()
        .map(|(s, (b, a))| format!("{s} {b} {a}"))
        .collect();
    draw(&lines, title, subtitle)
}

/// Graphs taller than this (px) are drawn as icicles, the root at the top: the wide frames
/// that matter are then in view, and the deep, narrow tips below.
pub const MAX_FLAME_HEIGHT: u32 = 720;

fn draw(lines: &[String], title: &str, subtitle: &str) -> anyhow::Result<String> {
    let svg = draw_as(lines, title, subtitle, false)?;
    if height(&svg).is_some_and(|h| h > MAX_FLAME_HEIGHT) {
        let subtitle = format!("{subtitle} · icicle: the root at the top");
        return draw_as(lines, title, &subtitle, true);
    }
    Ok(svg)
}

fn draw_as(lines: &[String], title: &str, subtitle: &str, icicle: bool) -> anyhow::Result<String> {
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_string();
    options.subtitle = Some(subtitle.to_string());
    options.direction = if icicle {
        inferno::flamegraph::Direction::Inverted
    } else {
        inferno::flamegraph::Direction::Straight
    };
    options.count_name = "samples".into();
    options.deterministic = true;
    let mut svg = Vec::new();
    inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut svg)?;
    let svg = String::from_utf8(svg)?;
    Ok(svg.replacen(SCRIPT_START, &format!("{SCRIPT_START}{HISTORY_SHIM}"), 1))
}

/// Where inferno's script begins.
const SCRIPT_START: &str = "<script type=\"text/ecmascript\"><![CDATA[";

/// Put first in inferno's script. Search and zoom keep their state in the page's URL with
/// `history.replaceState`, which throws in the HTML report's sandboxed frames (an opaque
/// origin, the parent's base URL) and stopped both half-way; wrapped, a URL that cannot be
/// set is left alone. In a file of its own the call goes through as before.
const HISTORY_SHIM: &str = "\n(function () { var replace = history.replaceState.bind(history); \
     history.replaceState = function (s, t, u) { try { replace(s, t, u); } catch (e) {} }; })();\n";

/// A cohort name as part of a file name: letters, digits, `.`, `_` and `-` kept, the rest
/// `_`.
fn slug(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn per_unit(p: &CohortProfile) -> String {
    match p.sampled_us_per_unit {
        Some(us) => format!(
            " · {} of sampled CPU per {}",
            crate::format::micros(us),
            p.unit
        ),
        None => String::new(),
    }
}

/// What the baseline's sample counts are multiplied by in a differential graph, so that a
/// width means the same time per request (or script run) on both sides: one baseline sample
/// stands for T_b ÷ S_b µs per request, one of the cohort's for T_c ÷ S_c (T: sampled CPU
/// per request, S: samples). None when either side has no time or no samples.
pub fn differential_scale(base: &CohortProfile, cohort: &CohortProfile) -> Option<f64> {
    let (tb, tc) = (base.sampled_us_per_unit?, cohort.sampled_us_per_unit?);
    if base.samples == 0 || cohort.samples == 0 || tc <= 0.0 {
        return None;
    }
    Some((tb / base.samples as f64) / (tc / cohort.samples as f64))
}

/// Every flame graph of the report, cohort by cohort in the report's order, each profiler's
/// own graph first, then its differential against the baseline. A graph inferno cannot
/// draw is left out (the report's frame tables still say what changed).
pub fn flamegraphs(report: &Report) -> Vec<Flame> {
    let mut out: Vec<Flame> = Vec::new();
    let mut push = |mut flame: Flame| {
        let base = flame.name.clone();
        let mut k = 2;
        while out.iter().any(|f| f.name == flame.name) {
            flame.name = format!("{base}-{k}");
            k += 1;
        }
        out.push(flame);
    };
    for p in &report.profiles {
        if p.stacks.is_empty() {
            continue;
        }
        let title = format!("{} · {}", p.cohort, p.profiler);
        let subtitle = format!(
            "{} trial{} · {} samples at {} Hz over {:.1} s · {} {}s{}",
            p.trials,
            if p.trials == 1 { "" } else { "s" },
            p.samples,
            p.rate_hz,
            p.duration_s,
            p.units,
            p.unit,
            per_unit(p)
        );
        if let Ok(svg) = flamegraph_svg(&p.stacks, &title, &subtitle) {
            push(Flame {
                name: format!("flame-{}-{}", p.profiler, slug(&p.cohort)),
                cohort: p.cohort.clone(),
                profiler: p.profiler.clone(),
                differential: false,
                title,
                svg,
            });
        }
        if p.cohort == report.baseline {
            continue;
        }
        let Some(base) = report
            .profiles
            .iter()
            .find(|b| b.cohort == report.baseline && b.profiler == p.profiler)
        else {
            continue;
        };
        let Some(scale) = differential_scale(base, p) else {
            continue;
        };
        let title = format!("{} against {} · {}", p.cohort, base.cohort, p.profiler);
        let subtitle = format!(
            "widths: {}; red: more time per {}, blue: less ({}'s samples scaled ×{:.3} to the same time per {})",
            p.cohort, p.unit, base.cohort, scale, p.unit
        );
        if let Ok(svg) = differential_svg(
            &base.frame_stacks,
            &p.frame_stacks,
            scale,
            &title,
            &subtitle,
        ) {
            push(Flame {
                name: format!("flame-diff-{}-{}", p.profiler, slug(&p.cohort)),
                cohort: p.cohort.clone(),
                profiler: p.profiler.clone(),
                differential: true,
                title,
                svg,
            });
        }
    }
    out
}

/// The pixel height inferno gave the graph (its root's `height`).
pub fn height(svg: &str) -> Option<u32> {
    let root = &svg[svg.find("<svg")?..];
    let root = &root[..root.find('>')?];
    let start = root.find(" height=\"")? + " height=\"".len();
    let end = root[start..].find('"')? + start;
    root[start..end].parse().ok()
}

/// What a Content-Security-Policy must allow for the graphs' own scripts to run and nothing
/// else: the text of each `<script>` (its CDATA sections joined, as a browser hashes it)
/// and each inline event handler (`onload="init(evt)"`), as `'sha256-…'` sources.
/// Distinct scripts in first-seen order, then distinct handlers.
pub fn script_hashes(svgs: &[&str]) -> (Vec<String>, Vec<String>) {
    use base64::Engine as _;
    use sha2::Digest as _;
    let hash = |text: &str| {
        let digest = sha2::Sha256::digest(text.as_bytes());
        format!(
            "'sha256-{}'",
            base64::engine::general_purpose::STANDARD.encode(digest)
        )
    };
    let mut scripts: Vec<String> = Vec::new();
    let mut handlers: Vec<String> = Vec::new();
    for svg in svgs {
        let mut rest = *svg;
        while let Some(open) = rest.find("<script") {
            let after = &rest[open..];
            let Some(body_start) = after.find('>') else {
                break;
            };
            let Some(close) = after.find("</script>") else {
                break;
            };
            let body = &after[body_start + 1..close];
            let text: String = if body.contains("<![CDATA[") {
                body.split("<![CDATA[")
                    .skip(1)
                    .map(|part| part.split("]]>").next().unwrap_or(""))
                    .collect()
            } else {
                body.to_string()
            };
            let h = hash(&text);
            if !scripts.contains(&h) {
                scripts.push(h);
            }
            rest = &after[close..];
        }
        let root = &svg[svg.find("<svg").unwrap_or(0)..];
        let root = &root[..root.find('>').unwrap_or(root.len())];
        for attr in root.split(" on").skip(1) {
            let Some(value) = attr
                .split_once("=\"")
                .filter(|(name, _)| name.bytes().all(|b| b.is_ascii_lowercase()))
                .and_then(|(_, v)| v.split('"').next())
            else {
                continue;
            };
            let h = hash(value);
            if !handlers.contains(&h) {
                handlers.push(h);
            }
        }
    }
    (scripts, handlers)
}

#[cfg(test)]
mod tests {
    use super::differential_scale;
    use crate::model::CohortProfile;

    fn profile(samples: u64, us_per_request: f64) -> CohortProfile {
        CohortProfile {
            samples,
            sampled_us_per_unit: Some(us_per_request),
            ..CohortProfile::default()
        }
    }

    #[test]
    fn the_differential_compares_time_per_request_not_samples() {
        // The same 1000 µs per request on both sides; the cohort served twice the requests
        // in its phase and so has twice the samples: the baseline's samples are doubled,
        // and every frame of the same time per request has the same width on both sides.
        let scale = differential_scale(&profile(1000, 1000.0), &profile(2000, 1000.0)).unwrap();
        assert!((scale - 2.0).abs() < 1e-12, "{scale}");
        // The same samples, but the cohort costs twice the CPU per request: a baseline
        // sample stands for half the time of one of the cohort's.
        let scale = differential_scale(&profile(1000, 500.0), &profile(1000, 1000.0)).unwrap();
        assert!((scale - 0.5).abs() < 1e-12, "{scale}");
        assert!(differential_scale(&profile(0, 500.0), &profile(1000, 1000.0)).is_none());
        assert!(differential_scale(&profile(1000, 500.0), &profile(1000, 0.0)).is_none());
    }
}
