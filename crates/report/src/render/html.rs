//! The offline HTML report: one self-contained HTML5 page (inline CSS, inline SVG charts,
//! no JavaScript of its own, no external resource of any kind) rendered from a [`Report`].
//! With profiles, inferno's flame graphs bring their own scripts, each in a sandboxed frame
//! (`html/profiles.rs`).
//!
//! The page is built with maud's `html!` templates, one function per part of the page, each
//! returning [`Markup`]. Every string spliced into a template (cohort names, keys, labels,
//! paths, environment values, commands, warnings, frame names) is escaped by maud, in text
//! and attribute values alike, unless it is wrapped as markup already (maud's pre-escaped
//! type); that happens only in `trusted`, for the style sheet (`report.css`), the SVG
//! charts (which escape their own labels, `charts/svg.rs`) and inferno's flame graphs
//! (a unit test holds the other files to it). A Content-Security-Policy that allows
//! no script of its own (only the flame graphs' scripts, by hash, inside sandboxed frames) is
//! a second line of defence.
//!
//! The parts: the header, how to read the page, warnings and charts here; the tables in
//! `tables`, the overhead, environment and sources in `sources`, the profiles in
//! `html/profiles.rs`. Literal `"\n"`s between elements keep the page's source readable.

pub mod bisect;
mod profiles;
mod sources;
mod tables;
pub(crate) mod trusted;

use std::collections::BTreeSet;

use maud::{html, Markup, DOCTYPE};

use crate::charts;
use crate::model::{Report, Workloads};

/// The report as one offline HTML5 page.
pub fn render(report: &Report) -> String {
    let experiments = experiments(report);
    let title = if experiments.is_empty() {
        "rubyrace report".to_string()
    } else {
        format!("rubyrace report: {}", experiments.join(", "))
    };
    let flames = charts::flamegraph::flamegraphs(report);
    // No script runs on the page; the flame graphs' own scripts run in their sandboxed
    // frames, allowed by hash.
    let csp = format!(
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:{}",
        profiles::csp_script_sources(&flames)
            .map(|sources| format!("; script-src {sources}"))
            .unwrap_or_default()
    );
    let scripts = if flames.is_empty() {
        "no scripts"
    } else {
        "no scripts but the flame graphs’ own, in sandboxed frames"
    };
    let page = html! {
        (DOCTYPE) "\n"
        html lang="en" {
            "\n"
            (head(&title, &csp))
            "\n"
            body {
                "\n"
                main {
                    "\n"
                    (header(report, &experiments))
                    (how_to_read(report))
                    (warnings(report))
                    (tables::summary(report))
                    (tables::runtime(report))
                    (tables::hosts(report))
                    (tables::steps(report))
                    (tables::noise(report))
                    (charts_section(report))
                    (tables::comparisons(report))
                    (profiles::section(report, &flames))
                    (sources::overhead(report))
                    (sources::environment(report))
                    (sources::sources(report))
                    footer {
                        "Made by rubyrace from the data above · schema " (report.schema)
                        " · this page is self-contained: " (scripts) ", no network."
                    }
                    "\n"
                }
                "\n"
            }
            "\n"
        }
        "\n"
    };
    page.into_string()
}

/// The `<head>` of every page: the policy `csp`, the title, the style sheet.
pub fn head(title: &str, csp: &str) -> Markup {
    html! {
        head {
            "\n"
            meta charset="utf-8"; "\n"
            meta name="viewport" content="width=device-width, initial-scale=1"; "\n"
            meta http-equiv="Content-Security-Policy" content=(csp); "\n"
            meta name="generator" content="rubyrace"; "\n"
            title { (title) } "\n"
            style { "\n" (trusted::css()) } "\n"
        }
    }
}

fn experiments(report: &Report) -> Vec<String> {
    let mut seen = Vec::new();
    for s in &report.sources {
        if !s.experiment.is_empty() && !seen.contains(&s.experiment) {
            seen.push(s.experiment.clone());
        }
    }
    seen
}

/// "1 trial", "2 trials": `one` or `many` after `n`.
fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

fn header(report: &Report, experiments: &[String]) -> Markup {
    let smoke = report.sources.iter().any(|s| s.smoke);
    let trials: usize = report.sources.iter().map(|s| s.trials).sum();
    let mut machines: BTreeSet<&str> = BTreeSet::new();
    for s in &report.sources {
        machines.extend(s.machines.iter().map(String::as_str));
    }
    let workload = match report.workload {
        Workloads::Http => "HTTP workload",
        Workloads::Script => "script workload",
        Workloads::Mixed => "HTTP and script workloads",
    };
    let cohorts = report.cohorts.len();
    let mut parts: Vec<Markup> = vec![
        html! { (workload) },
        html! {
            b { (cohorts) } " cohort" (plural(cohorts, "", "s"))
            @if !report.group_by.is_empty() { " by " b { (report.group_by.join(", ")) } }
        },
    ];
    if !report.baseline.is_empty() {
        parts.push(html! { "baseline " b { (report.baseline) } });
    }
    let sources = report.sources.len();
    parts.push(html! {
        (trials) " trial" (plural(trials, "", "s")) " from " (sources) " results director"
        (plural(sources, "y", "ies"))
    });
    if !machines.is_empty() {
        let list = machines.iter().copied().collect::<Vec<_>>().join(", ");
        parts.push(html! { "machine" (plural(machines.len(), "", "s")) " " (list) });
    }
    if let Some(first) = report
        .sources
        .iter()
        .map(|s| s.created_at.as_str())
        .filter(|s| !s.is_empty())
        .min()
    {
        parts.push(html! { "run " (first) });
    }
    let runtime = crate::render::cells::runtime_table(report).is_some();
    html! {
        header {
            "\n"
            h1 {
                @if experiments.is_empty() {
                    "rubyrace report"
                } @else {
                    (experiments.join(", ")) span.kicker { "rubyrace report" }
                }
                @if smoke { span.badge.smoke { "smoke test" } }
            }
            "\n"
            p.meta {
                @for (i, part) in parts.iter().enumerate() {
                    @if i > 0 { " · " }
                    span.nowrap { (part) }
                }
            }
            "\n"
            nav {
                a href="#summary" { "Summary" }
                @if runtime { a href="#runtime" { "In the server" } }
                @if !report.steps.is_empty() { a href="#steps" { "Scenario steps" } }
                a href="#charts" { "Charts" }
                a href="#comparisons" { "Comparisons" }
                a href="#environment" { "Environment" }
                a href="#sources" { "Sources and commands" }
            }
            "\n"
        }
        "\n"
    }
}

fn how_to_read(report: &Report) -> Markup {
    // Which statistic each column is, in the words of the text report's legend: the
    // cohort columns are medians, the ratio is not their quotient (1188/700 is 1.70; the
    // paired ratio of the same trials was 1.63).
    let ratio = crate::render::cells::ratio_statistic(report);
    let p99 = crate::render::cells::p99_words(report).map(upper_first);
    html! {
        p.howto {
            b { "How to read this." }
            " A cohort is the set of trials that share the values of "
            @if report.group_by.is_empty() {
                "the grouping keys"
            } @else {
                b { (report.group_by.join(", ")) }
            }
            ". Each number in a cohort’s columns is the median across valid trials, with the \
             10th–90th percentile of the trials underneath. “vs baseline” is " (ratio)
            " of the cohort against "
            @if report.baseline.is_empty() {
                "the baseline"
            } @else {
                "the baseline, " b { (report.baseline) }
            }
            ", with its " (report.interval_label()) " confidence interval and the rank \
             test’s p-value: not the ratio of the medians shown. "
            b { "~" }
            " means the difference is not statistically significant, which is an answer too: \
             the two cannot be told apart with this many trials. "
            "Which decides: " (crate::render::cells::verdict_rule(report)) "."
            @if let Some(p99) = p99 { " " (p99) "." }
            " Invalid and failed trials are counted and drawn, never used in a statistic."
        }
        "\n"
    }
}

fn warnings(report: &Report) -> Markup {
    let n = report.warnings.len();
    html! {
        @if n > 0 {
            section.warnings #warnings aria-label="Warnings" {
                "\n"
                h2 { "⚠ " (n) " warning" (plural(n, "", "s")) " — read before trusting a number" }
                "\n"
                ul {
                    "\n"
                    @for w in &report.warnings {
                        li {
                            span.kind { (w.kind) }
                            @if let Some(c) = &w.cohort { b { (c) } ": " }
                            (w.message)
                        }
                        "\n"
                    }
                }
                "\n"
            }
            "\n"
        }
    }
}

fn charts_section(report: &Report) -> Markup {
    let charts = charts::all(report);
    html! {
        @if !charts.is_empty() {
            h2 #charts { "Charts" } "\n"
            @for chart in &charts {
                figure id={ "chart-" (chart.name) } { (trusted::chart(chart)) } "\n"
            }
        }
    }
}

/// "p99: ..." as the start of a sentence: "P99: ...".
fn upper_first(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::*;

    const HOSTILE: &str = "<script>alert(1)</script>";

    fn report() -> Report {
        let mut r = crate::charts::tests::report();
        r.cohorts[1].name = HOSTILE.to_string();
        for t in &mut r.trials {
            if t.cohort.starts_with("<script>") {
                t.cohort = HOSTILE.to_string();
            }
        }
        r.comparisons.push(Comparison {
            cohort: HOSTILE.to_string(),
            baseline: "base".to_string(),
            metric: "throughput".to_string(),
            higher_is_better: true,
            method: "paired".to_string(),
            n: 3,
            n_baseline: 3,
            configs_per_block: 1,
            groups: 1,
            unpartnered: Vec::new(),
            by_host_kind: Vec::new(),
            skewness: None,
            skew_marked: false,
            lag1_autocorrelation: None,
            trend_p_value: None,
            widened_for_dependence: false,
            doubled_for_drift: false,
            drift_found: false,
            effective_blocks: None,
            ratio: 1.1,
            ci_low: 1.05,
            ci_high: 1.15,
            confidence: 0.95,
            test: "wilcoxon-signed-rank".to_string(),
            p_value: Some(0.0004),
            p_adjusted: Some(0.0004),
            family_size: 1,
            min_p_value: Some(0.25),
            testable: true,
            significant: true,
            verdict: "1.10×, 10.0% faster".to_string(),
            half_width_pct: 4.5,
            needed_for_1pct: Some(61),
        });
        r.comparisons.push(Comparison {
            cohort: "third & last".to_string(),
            metric: "throughput".to_string(),
            significant: false,
            verdict: "~ no significant difference (1.01×)".to_string(),
            ratio: 1.01,
            ci_low: 0.97,
            ci_high: 1.05,
            p_value: Some(0.43),
            ..r.comparisons[0].clone()
        });
        r.warnings.push(Warning {
            kind: "high-cv".to_string(),
            cohort: Some(HOSTILE.to_string()),
            message: "cv 12% > 5%: <noisy>".to_string(),
        });
        r.environment.push(CohortEnvironment {
            cohort: "base".to_string(),
            values: [("MALLOC_CONF".to_string(), vec!["narenas:2".to_string()])]
                .into_iter()
                .collect(),
        });
        r.environment.push(CohortEnvironment {
            cohort: HOSTILE.to_string(),
            values: [(
                "MALLOC_CONF".to_string(),
                vec![
                    "<img src=x onerror=alert(1)>".to_string(),
                    "a'b\"c".to_string(),
                ],
            )]
            .into_iter()
            .collect(),
        });
        r.overhead = Some(Overhead {
            cohort: HOSTILE.to_string(),
            baseline: "base".to_string(),
            method: "paired".to_string(),
            n: 3,
            us_per_request: 91.0,
            ci_low: 80.0,
            ci_high: 102.0,
        });
        r
    }

    #[test]
    fn hostile_strings_render_as_text_everywhere() {
        let page = render(&report());
        // Our page has no script element at all, so any "<script" is an injection.
        assert!(!page.contains("<script"), "raw <script> in the page");
        assert!(!page.contains("<img"), "raw <img> in the page");
        assert!(!page.contains("<noisy>"));
        // The name appears escaped in the table, the warnings, the SVG text and attributes.
        let escaped = "&lt;script&gt;alert(1)&lt;/script&gt;";
        assert!(
            page.contains(&format!("<th class=\"name\" scope=\"row\">{escaped}")),
            "summary table"
        );
        assert!(
            page.contains(&format!("<b>{escaped}</b>: cv 12% &gt; 5%: &lt;noisy&gt;")),
            "warning"
        );
        assert!(
            page.contains(&format!("data-series=\"{escaped}\"")),
            "SVG attribute"
        );
        assert!(page.contains(&format!(">{escaped}</text>")), "SVG text");
        // maud leaves `'` alone: every attribute it writes is in double quotes.
        assert!(
            page.contains("&lt;img src=x onerror=alert(1)&gt;<br>a'b&quot;c"),
            "environment value"
        );
        assert!(page.contains("--label '&lt;b&gt;x&lt;/b&gt;'"), "command");
        assert!(page.contains("results/&lt;dir&gt;"), "path");
        assert!(page.contains("third &amp; last"));
        assert!(!page.contains("third & last"));
    }

    /// Markup that maud did not build enters the page only in `trusted`: no other file of
    /// the page names maud's escape hatch, so a user's string cannot be let through by
    /// wrapping it in one.
    #[test]
    fn only_trusted_markup_is_pre_escaped() {
        let hatch = concat!("Pre", "Escaped");
        for (file, text) in [
            ("html.rs", include_str!("html.rs")),
            ("html/tables.rs", include_str!("html/tables.rs")),
            ("html/sources.rs", include_str!("html/sources.rs")),
            ("html/profiles.rs", include_str!("html/profiles.rs")),
        ] {
            assert!(
                !text.contains(hatch),
                "{file} uses {hatch}: move it to trusted.rs"
            );
        }
        assert!(include_str!("html/trusted.rs").contains(hatch));
    }

    /// The start tags of a page (what is between `<` and `>` outside comments), lower-cased.
    pub(crate) fn tags(page: &str) -> Vec<String> {
        let mut tags = Vec::new();
        let mut rest = page;
        while let Some(i) = rest.find('<') {
            rest = &rest[i + 1..];
            let end = rest.find('>').unwrap_or(rest.len());
            tags.push(rest[..end].to_ascii_lowercase());
            rest = &rest[end..];
        }
        tags
    }

    #[test]
    fn every_doctor_finding_of_a_run_is_shown_escaped() {
        use doctor::{Finding, Report as Doctor, Status, SCHEMA};
        let mut r = report();
        let finding = |name: &str, status, value: &str, advice: &str| Finding {
            name: name.into(),
            status,
            value: value.into(),
            advice: advice.into(),
        };
        r.sources[0].doctor = vec![Doctor {
            schema: SCHEMA.into(),
            checked_at: "2026-11-23T11:45:14Z".into(),
            findings: vec![
                finding("cpus", Status::Ok, "2 online", ""),
                finding("load", Status::Warn, "4.48 3.72 2.82", "stop <other> work"),
                finding("aslr", Status::Info, "2\nrandomized", ""),
            ],
            failed_checks: vec![],
        }];
        let page = render(&r);
        assert!(page.contains("<code>rubyrace doctor</code> at 2026-11-23T11:45:14Z"));
        // Every finding, "ok" ones included, with its status, value and advice.
        for row in [
            "<td><span class=\"kind\">ok</span></td><td>cpus</td><td class=\"value\">2 online</td>",
            "<td><span class=\"kind\">warn</span></td><td>load</td><td class=\"value\">4.48 3.72 2.82<br><small>→ stop &lt;other&gt; work</small></td>",
            "<td><span class=\"kind\">info</span></td><td>aslr</td><td class=\"value\">2<br>randomized</td>",
        ] {
            assert!(page.contains(row), "{row} not in the page");
        }
    }

    #[test]
    fn page_is_self_contained() {
        let page = render(&report());
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(page.contains("<meta charset=\"utf-8\">"));
        assert!(page.contains("Content-Security-Policy"));
        for tag in tags(&page) {
            let name = tag.split_whitespace().next().unwrap_or("");
            assert!(
                !["script", "link", "img", "iframe", "object", "embed", "image", "use"]
                    .contains(&name),
                "<{tag}>"
            );
            assert!(
                !tag.contains(" src=") && !tag.contains("xlink:href"),
                "<{tag}>"
            );
            if let Some(i) = tag.find(" href=\"") {
                assert!(tag[i + 7..].starts_with('#'), "only in-page links: <{tag}>");
            }
            assert!(
                !tag.contains("url(http") && !tag.contains("@import"),
                "<{tag}>"
            );
            for (i, _) in tag.match_indices("url(") {
                assert!(
                    tag[i + 4..].starts_with('#'),
                    "only in-page references: <{tag}>"
                );
            }
        }
        assert!(!page.contains("@import"));
    }

    #[test]
    fn summary_and_comparisons_say_it_in_words() {
        let page = render(&report());
        assert!(page.contains("<span class=\"better\">1.10×, 10.0% faster</span>"));
        assert!(page.contains("CI 1.050–1.150× · p &lt; 0.001"));
        assert!(page.contains("<span class=\"same\">~ no significant difference (1.01×)</span>"));
        assert!(page.contains("p = 0.430"), "the text formats' p-value");
        assert!(page.contains("<span class=\"badge\">baseline</span>"));
        assert!(page.contains("±1% needs 61"));
        assert!(page.contains("91.0 µs more</b> per request"));
        assert!(page.contains("varies within the cohort"));
        assert!(page.contains("⚠ 1 warning"));
        // Every chart made it into the page.
        for name in ["throughput", "matrix", "latency", "memory", "trial-order"] {
            assert!(page.contains(&format!("data-chart=\"{name}\"")), "{name}");
        }
        // Numbers are right-aligned.
        assert!(page.contains("<td class=\"num\">1,100<span class=\"sub\">"));
    }

    #[test]
    fn renders_an_empty_report() {
        let r = Report {
            schema: REPORT_SCHEMA.to_string(),
            command: String::new(),
            confidence: 0.95,
            sources: vec![],
            workload: Workloads::Http,
            group_by: vec![],
            baseline: String::new(),
            cohorts: vec![],
            comparisons: vec![],
            overhead: None,
            hosts: None,
            warnings: vec![],
            trials: vec![],
            matrix: None,
            environment: vec![],
            profiles: vec![],
            frame_changes: vec![],
            sparse_frames: vec![],
            steps: vec![],
        };
        let page = render(&r);
        assert!(page.contains("<h1>rubyrace report</h1>"));
        assert!(page.ends_with("</html>\n"));
    }
}
