//! The HTML report's "Profiles" section: what each cohort's profilers sampled and what they
//! cost, a flame graph per cohort and profiler, and against the baseline a differential
//! flame graph and the frames whose time per request changed, with intervals.
//!
//! The flame graphs are inferno's SVGs, each in a sandboxed `<iframe srcdoc>` (scripts
//! allowed, no same origin), so that each keeps its own search and zoom and none can reach
//! the page. The page's Content-Security-Policy allows exactly their scripts by hash
//! ([`csp_script_sources`]); the page itself has none.

use std::fmt::Write as _;

use crate::charts::flamegraph::{self, Flame};
use crate::format::{escape, fmt_num, micros};
use crate::model::{FrameChange, Report};

/// Rows of each frame table.
const FRAME_ROWS: usize = 12;

/// The `script-src` sources the page's Content-Security-Policy needs for `flames`, or
/// `None` when there is no flame graph (the page then allows no script at all).
pub fn csp_script_sources(flames: &[Flame]) -> Option<String> {
    if flames.is_empty() {
        return None;
    }
    let svgs: Vec<&str> = flames.iter().map(|f| f.svg.as_str()).collect();
    let (scripts, handlers) = flamegraph::script_hashes(&svgs);
    let mut sources = scripts;
    if !handlers.is_empty() {
        sources.push("'unsafe-hashes'".into());
        sources.extend(handlers);
    }
    Some(sources.join(" "))
}

/// "process_client" and "puma/server.rb" from
/// "process_client - /usr/lib/.../gems/puma/lib/puma/server.rb": the part after the last
/// `/lib/`, or the last two path components.
fn frame_parts(frame: &str) -> (&str, String) {
    let Some((name, path)) = frame.rsplit_once(" - ") else {
        return (frame, String::new());
    };
    let short = match path.rfind("/lib/") {
        Some(i) => path[i + 5..].to_string(),
        None => {
            let parts: Vec<&str> = path.rsplit('/').take(2).collect();
            parts.into_iter().rev().collect::<Vec<_>>().join("/")
        }
    };
    (name, short)
}

fn frame_cell(frame: &str) -> String {
    let (name, short) = frame_parts(frame);
    format!(
        "<td class=\"name\" title=\"{}\"><code>{}</code><span class=\"sub\">{}</span></td>",
        escape(frame),
        escape(name),
        escape(&short)
    )
}

fn iframe(flame: &Flame) -> String {
    // Taller graphs are icicles (root at the top) and scroll inside their frame.
    let height = flamegraph::height(&flame.svg)
        .unwrap_or(400)
        .min(flamegraph::MAX_FLAME_HEIGHT)
        + 4;
    let doc = format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><style>html,body{{margin:0}}\
         svg{{display:block;width:100%}}</style></head><body>{}</body></html>",
        &flame.svg[flame.svg.find("<svg").unwrap_or(0)..]
    );
    format!(
        // Not lazy: a frame loaded before it is laid out has no width when inferno's script
        // sizes the graph, and stays blank (seen in headless Chromium).
        "<figure class=\"flame\" id=\"{}\"><iframe title=\"{}\" sandbox=\"allow-scripts\" \
         style=\"height:{height}px\" srcdoc=\"{}\"></iframe></figure>",
        escape(&flame.name),
        escape(&flame.title),
        escape(&doc)
    )
}

/// The section, when the report has profiles.
pub fn section(h: &mut String, report: &Report, flames: &[Flame]) {
    if report.profiles.is_empty() {
        return;
    }
    h.push_str("<h2 id=\"profiles\">Profiles: where the time goes</h2>\n");
    let measured = report.profiles.iter().any(|p| p.phase == "measured");
    let scripts = report.profiles.iter().all(|p| p.unit != "request");
    let how = if measured {
        "The profilers sampled the measured phase itself (<code>profile_measured</code>): \
         the figures above include their cost."
    } else if scripts {
        "The profilers ran in one more run of the script after its measured runs, attached \
         before its first line; the figures above are not disturbed, and the “profiled ÷ \
         measured” column is what they cost (the measured runs’ median wall time ÷ the \
         profiled run’s)."
    } else {
        "The profilers ran in a phase of their own after each measured phase, on the same \
         warm server under the same load, so the figures above are not disturbed; the \
         “profiled ÷ measured” column is what they cost."
    };
    let _ = writeln!(
        h,
        "<p>{how} Times are per {}: the profiled processes’ CPU time while profiled, split \
         among the frames by their shares of the samples. Click a frame to zoom, Ctrl-F or \
         “Search” to find one.</p>",
        report
            .profiles
            .first()
            .map_or("request", |p| p.unit.as_str())
    );
    h.push_str(
        "<div class=\"table-wrap\"><table>\n<thead><tr><th>Cohort</th><th>Profiler</th>\
         <th class=\"num\">Trials</th><th class=\"num\">Samples</th>\
         <th class=\"num\">CPU</th><th class=\"num\">Profiled ÷ measured throughput</th>\
         <th>Top self frames</th></tr></thead>\n<tbody>\n",
    );
    for p in &report.profiles {
        let overhead = p.overhead.as_ref().map_or("—".to_string(), |s| {
            format!(
                "{:.3}<span class=\"sub\">{:.3}–{:.3} over {}</span>",
                s.median(),
                s.min,
                s.max,
                s.n
            )
        });
        let top: Vec<String> = p
            .top_self
            .iter()
            .take(3)
            .map(|f| {
                format!(
                    "<code title=\"{}\">{}</code> {:.0}%",
                    escape(&f.frame),
                    escape(frame_parts(&f.frame).0),
                    100.0 * f.self_share
                )
            })
            .collect();
        let missing = if p.missing.is_empty() {
            String::new()
        } else {
            format!(
                "<span class=\"sub bad\" title=\"{}\">{} without a profile</span>",
                escape(&p.missing.join("\n")),
                p.missing.len()
            )
        };
        let _ = writeln!(
            h,
            "<tr><th class=\"name\">{}</th><td>{}</td><td class=\"num\">{}{missing}</td>\
             <td class=\"num\">{}<span class=\"sub\">at {} Hz</span></td><td class=\"num\">{}\
             <span class=\"sub\">per {}</span></td><td class=\"num\">{overhead}</td><td>{}</td></tr>",
            escape(&p.cohort),
            escape(&p.profiler),
            p.trials,
            fmt_num(p.samples as f64, 0),
            if p.trials == 0 { "—".to_string() } else { p.rate_hz.to_string() },
            p.sampled_us_per_unit.map_or("—".into(), micros),
            if p.trials == 0 { "—" } else { p.unit.as_str() },
            top.join("<br>")
        );
    }
    h.push_str("</tbody></table></div>\n");
    for p in &report.profiles {
        for flame in flames
            .iter()
            .filter(|f| f.cohort == p.cohort && f.profiler == p.profiler)
        {
            let _ = writeln!(h, "<h3>{}</h3>", escape(&flame.title));
            h.push_str(&iframe(flame));
        }
        // After the differential graph, or alone when inferno could not draw it.
        frame_tables(h, report, &p.cohort, &p.profiler);
        for s in report
            .sparse_frames
            .iter()
            .filter(|s| s.cohort == p.cohort && s.profiler == p.profiler)
        {
            let _ = writeln!(
                h,
                "<p><b>Too few samples</b> against {}: {}.</p>",
                escape(&s.baseline),
                escape(&s.advice)
            );
        }
    }
}

/// The self-time and total-time tables of one cohort and profiler against the baseline.
fn frame_tables(h: &mut String, report: &Report, cohort: &str, profiler: &str) {
    for (measure, what) in [
        ("self", "Self time: the frame itself on top of the stack"),
        (
            "total",
            "Total time: the frame anywhere on the stack, callees included",
        ),
    ] {
        let mut rows: Vec<&FrameChange> = report
            .frame_changes
            .iter()
            .filter(|c| c.cohort == cohort && c.profiler == profiler && c.measure == measure)
            .collect();
        if rows.is_empty() {
            continue;
        }
        // The largest changes in time per request first: what matters to the total.
        rows.sort_by(|a, b| {
            let d = |c: &FrameChange| (c.cohort_us_per_unit - c.baseline_us_per_unit).abs();
            b.significant
                .cmp(&a.significant)
                .then(d(b).total_cmp(&d(a)))
        });
        let significant = rows.iter().filter(|c| c.significant).count();
        let first = rows[0];
        let _ = writeln!(
            h,
            "<p><b>{what}.</b> {} frames tested ({}, {}), {significant} significant after Holm over {} frames; \
             the {} with the largest change per request:</p>",
            rows.len(),
            escape(&first.method),
            if first.test == "t-test" { "t-test on the per-block log ratios" } else { "Mann–Whitney U" },
            first.family_size,
            rows.len().min(FRAME_ROWS)
        );
        let _ = writeln!(
            h,
            "<div class=\"table-wrap\"><table class=\"frames\">\n<thead><tr><th>Frame</th>\
             <th class=\"num\">{}</th><th class=\"num\">{}</th><th class=\"num\">Change</th>\
             <th>Ratio [{} CI], p (Holm)</th></tr></thead>\n<tbody>",
            escape(&first.baseline),
            escape(cohort),
            report.confidence_label()
        );
        for c in rows.iter().take(FRAME_ROWS) {
            let class = if !c.significant {
                "same"
            } else if c.ratio > 1.0 {
                "worse"
            } else {
                "better"
            };
            let delta = c.cohort_us_per_unit - c.baseline_us_per_unit;
            let _ = writeln!(
                h,
                "<tr>{}<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}{}</td>\
                 <td class=\"verdict {class}\">{}</td></tr>",
                frame_cell(&c.frame),
                if c.baseline_us_per_unit > 0.0 {
                    micros(c.baseline_us_per_unit)
                } else {
                    "absent".into()
                },
                micros(c.cohort_us_per_unit),
                if delta >= 0.0 { "+" } else { "−" },
                micros(delta.abs()),
                escape(&c.verdict)
            );
        }
        h.push_str("</tbody></table></div>\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_shown_by_method_and_short_path() {
        assert_eq!(
            frame_parts("process_client - /usr/lib/x/gems/puma/lib/puma/server.rb"),
            ("process_client", "puma/server.rb".to_string())
        );
        assert_eq!(
            frame_parts("hot_loop - /tmp/lab/hot/config.ru"),
            ("hot_loop", "hot/config.ru".to_string())
        );
        assert_eq!(
            frame_parts("entry_SYSCALL_64"),
            ("entry_SYSCALL_64", String::new())
        );
    }
}
