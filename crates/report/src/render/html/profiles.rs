//! The HTML report's "Profiles" section: what each cohort's profilers sampled and what they
//! cost, a flame graph per cohort and profiler, and against the baseline a differential
//! flame graph and the frames whose time per request changed, with intervals.
//!
//! The flame graphs are inferno's SVGs, each in a sandboxed `<iframe srcdoc>` (scripts
//! allowed, no same origin), so that each keeps its own search and zoom and none can reach
//! the page. The page's Content-Security-Policy allows exactly their scripts by hash
//! ([`csp_script_sources`]); the page itself has none.

use maud::{html, Markup, DOCTYPE};

use super::trusted;
use crate::charts::flamegraph::{self, Flame};
use crate::format::{fmt_num, micros};
use crate::model::{CohortProfile, FrameChange, Report};

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

fn frame_cell(frame: &str) -> Markup {
    let (name, short) = frame_parts(frame);
    html! {
        td.name title=(frame) { code { (name) } span.sub { (short) } }
    }
}

/// A flame graph in its sandboxed frame. Its document (inferno's SVG, with its script) is
/// the `srcdoc` attribute's value, which maud escapes like any other: the frame gets it back
/// as written, and the page sees only text.
fn iframe(flame: &Flame) -> Markup {
    // Taller graphs are icicles (root at the top) and scroll inside their frame.
    let height = flamegraph::height(&flame.svg)
        .unwrap_or(400)
        .min(flamegraph::MAX_FLAME_HEIGHT)
        + 4;
    let doc = html! {
        (DOCTYPE)
        html {
            head { meta charset="utf-8"; style { (trusted::flame_css()) } }
            body { (trusted::flame_svg(flame)) }
        }
    };
    // Not lazy: a frame loaded before it is laid out has no width when inferno's script
    // sizes the graph, and stays blank (seen in headless Chromium).
    html! {
        figure.flame #(flame.name) {
            iframe title=(flame.title) sandbox="allow-scripts" style={ "height:" (height) "px" }
                srcdoc=(doc.into_string()) {}
        }
    }
}

/// The section, when the report has profiles.
pub fn section(report: &Report, flames: &[Flame]) -> Markup {
    if report.profiles.is_empty() {
        return html! {};
    }
    let measured = report.profiles.iter().any(|p| p.phase == "measured");
    let scripts = report.profiles.iter().all(|p| p.unit != "request");
    let unit = report
        .profiles
        .first()
        .map_or("request", |p| p.unit.as_str());
    html! {
        h2 #profiles { "Profiles: where the time goes" } "\n"
        p {
            @if measured {
                "The profilers sampled the measured phase itself (" code { "profile_measured" }
                "): the figures above include their cost."
            } @else if scripts {
                "The profilers ran in one more run of the script after its measured runs, \
                 attached before its first line; the figures above are not disturbed, and the \
                 “profiled ÷ measured” column is what they cost (the measured runs’ median wall \
                 time ÷ the profiled run’s)."
            } @else {
                "The profilers ran in a phase of their own after each measured phase, on the \
                 same warm server under the same load, so the figures above are not disturbed; \
                 the “profiled ÷ measured” column is what they cost."
            }
            " Times are per " (unit) ": the profiled processes’ CPU time while profiled, split \
             among the frames by their shares of the samples. Click a frame to zoom, Ctrl-F or \
             “Search” to find one."
        }
        "\n"
        div.table-wrap {
            table {
                "\n"
                thead {
                    tr {
                        th { "Cohort" } th { "Profiler" } th.num { "Trials" } th.num { "Samples" }
                        th.num { "CPU" } th.num { "Profiled ÷ measured throughput" }
                        th { "Top self frames" }
                    }
                }
                "\n"
                tbody {
                    "\n"
                    @for p in &report.profiles {
                        (profile_row(p)) "\n"
                    }
                }
            }
        }
        "\n"
        @for p in &report.profiles {
            @for flame in flames.iter().filter(|f| f.cohort == p.cohort && f.profiler == p.profiler) {
                h3 { (flame.title) } "\n"
                (iframe(flame))
            }
            // After the differential graph, or alone when inferno could not draw it.
            (frame_tables(report, &p.cohort, &p.profiler))
            @for s in report.sparse_frames.iter().filter(|s| s.cohort == p.cohort && s.profiler == p.profiler) {
                p { b { "Too few samples" } " against " (s.baseline) ": " (s.advice) "." } "\n"
            }
        }
    }
}

/// One cohort and profiler: what was sampled, what it cost, the top self frames.
fn profile_row(p: &CohortProfile) -> Markup {
    html! {
        tr {
            th.name { (p.cohort) }
            td { (p.profiler) }
            td.num {
                (p.trials)
                @if !p.missing.is_empty() {
                    span.sub.bad title=(p.missing.join("\n")) { (p.missing.len()) " without a profile" }
                }
            }
            td.num {
                (fmt_num(p.samples as f64, 0))
                span.sub { "at " @if p.trials == 0 { "—" } @else { (p.rate_hz) } " Hz" }
            }
            td.num {
                (p.sampled_us_per_unit.map_or("—".into(), micros))
                span.sub { "per " @if p.trials == 0 { "—" } @else { (p.unit) } }
            }
            td.num {
                @match &p.overhead {
                    None => "—",
                    Some(s) => {
                        (format!("{:.3}", s.median()))
                        span.sub { (format!("{:.3}–{:.3}", s.min, s.max)) " over " (s.n) }
                    },
                }
            }
            td {
                @for (i, f) in p.top_self.iter().take(3).enumerate() {
                    @if i > 0 { br; }
                    code title=(f.frame) { (frame_parts(&f.frame).0) }
                    " " (format!("{:.0}%", 100.0 * f.self_share))
                }
            }
        }
    }
}

/// The self-time and total-time tables of one cohort and profiler against the baseline.
fn frame_tables(report: &Report, cohort: &str, profiler: &str) -> Markup {
    let tables = [
        ("self", "Self time: the frame itself on top of the stack"),
        (
            "total",
            "Total time: the frame anywhere on the stack, callees included",
        ),
    ];
    html! {
        @for (measure, what) in tables {
            @let rows = frame_rows(report, cohort, profiler, measure);
            @if let Some(first) = rows.first() {
                @let significant = rows.iter().filter(|c| c.significant).count();
                p {
                    b { (what) "." } " " (rows.len()) " frames tested (" (first.method) ", "
                    @if first.test == "t-test" { "t-test on the per-block log ratios" } @else { "Mann–Whitney U" }
                    "), " (significant) " significant after Holm over " (first.family_size)
                    " frames; the " (rows.len().min(FRAME_ROWS)) " with the largest change per request:"
                }
                "\n"
                div.table-wrap {
                    table.frames {
                        "\n"
                        thead {
                            tr {
                                th { "Frame" } th.num { (first.baseline) } th.num { (cohort) }
                                th.num { "Change" }
                                th { "Ratio [" (report.confidence_label()) " CI], p (Holm)" }
                            }
                        }
                        "\n"
                        tbody {
                            "\n"
                            @for c in rows.iter().take(FRAME_ROWS) {
                                (frame_row(c)) "\n"
                            }
                        }
                    }
                }
                "\n"
            }
        }
    }
}

/// The changes of one measure, the largest changes in time per request first (what matters
/// to the total), significant ones before the rest.
fn frame_rows<'a>(
    report: &'a Report,
    cohort: &str,
    profiler: &str,
    measure: &str,
) -> Vec<&'a FrameChange> {
    let mut rows: Vec<&FrameChange> = report
        .frame_changes
        .iter()
        .filter(|c| c.cohort == cohort && c.profiler == profiler && c.measure == measure)
        .collect();
    rows.sort_by(|a, b| {
        let d = |c: &FrameChange| (c.cohort_us_per_unit - c.baseline_us_per_unit).abs();
        b.significant
            .cmp(&a.significant)
            .then(d(b).total_cmp(&d(a)))
    });
    rows
}

fn frame_row(c: &FrameChange) -> Markup {
    let class = if !c.significant {
        "same"
    } else if c.ratio > 1.0 {
        "worse"
    } else {
        "better"
    };
    let delta = c.cohort_us_per_unit - c.baseline_us_per_unit;
    html! {
        tr {
            (frame_cell(&c.frame))
            td.num {
                @if c.baseline_us_per_unit > 0.0 { (micros(c.baseline_us_per_unit)) } @else { "absent" }
            }
            td.num { (micros(c.cohort_us_per_unit)) }
            td.num { @if delta >= 0.0 { "+" } @else { "−" } (micros(delta.abs())) }
            td.verdict.(class) { (c.verdict) }
        }
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
