//! The offline HTML report: one self-contained HTML5 page (inline CSS, inline SVG charts,
//! no JavaScript of its own, no external resource of any kind) rendered from a [`Report`].
//! With profiles, inferno's flame graphs bring their own scripts, each in a sandboxed frame
//! (`html_profiles`).
//!
//! Every string that comes from the user or the machine (cohort names, keys, labels,
//! paths, environment values, commands) goes through [`escape`], the one escape function
//! of the HTML page and of the SVG charts, in text and in attribute values alike. A
//! Content-Security-Policy that allows no script of its own (only the flame graphs' scripts, by
//! hash, inside sandboxed frames) is a second line of defence.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::charts;
use crate::format::{escape, fmt_num, fmt_sig, micros, p_cell};
use crate::model::{Cohort, Comparison, Report, Summary, Workloads};
use crate::render::html_profiles;

const CSS: &str = r#"
:root { color-scheme: light; }
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body { margin: 0; background: #f6f7f9; color: #1f2328;
  font: 15px/1.55 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", sans-serif; }
main { max-width: 1140px; margin: 0 auto; padding: 36px 28px 72px; }
h1 { font-size: 1.8rem; line-height: 1.25; margin: 0 0 .35rem; letter-spacing: -.01em; }
h2 { font-size: 1.22rem; margin: 2.6rem 0 .8rem; padding-bottom: .35rem; border-bottom: 1px solid #d8dee4; }
h3 { font-size: 1rem; margin: 1.4rem 0 .5rem; }
p { margin: .5rem 0; }
a { color: #0b5cad; }
.kicker { color: #59636e; font-size: .55em; font-weight: 400; margin-left: .6em; letter-spacing: 0; }
.meta { color: #59636e; margin: 0; }
.meta b { color: #1f2328; font-weight: 600; }
nav { margin: 1rem 0 0; font-size: .875rem; }
nav a { margin-right: 1rem; text-decoration: none; }
.badge { display: inline-block; font-size: .72rem; font-weight: 600; line-height: 1; padding: .25em .5em;
  border-radius: 999px; background: #eaeef2; color: #3d444d; vertical-align: .15em; margin-left: .35em; }
.badge.smoke { background: #ffe2cc; color: #8a3a00; }
.howto { background: #fff; border: 1px solid #d8dee4; border-radius: 8px; padding: .8rem 1.1rem; margin-top: 1.4rem; font-size: .925rem; }
.warnings { background: #fff8e1; border: 1px solid #eac54f; border-left: 6px solid #bf8700; border-radius: 8px;
  padding: .8rem 1.1rem; margin-top: 1.4rem; }
.warnings h2 { border: 0; margin: 0 0 .4rem; padding: 0; font-size: 1.05rem; }
.warnings ul { margin: 0; padding-left: 1.2rem; }
.warnings li { margin: .3rem 0; }
.kind { font: 600 .72rem/1 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: #fbe3a0;
  color: #5c3d00; padding: .2em .45em; border-radius: 4px; margin-right: .35em; white-space: nowrap; }
.table-wrap { overflow-x: auto; background: #fff; border: 1px solid #d8dee4; border-radius: 8px; }
table { border-collapse: collapse; width: 100%; font-size: .85rem; }
th, td { padding: .5rem .65rem; border-bottom: 1px solid #eaeef2; text-align: left; vertical-align: top; }
thead th { background: #f6f8fa; font-weight: 600; white-space: nowrap; border-bottom: 1px solid #d8dee4; }
tbody tr:last-child td, tbody tr:last-child th { border-bottom: 0; }
tbody th { font-weight: 600; }
.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.sub { display: block; color: #59636e; font-size: .8em; font-weight: 400; }
.name { overflow-wrap: anywhere; min-width: 9rem; }
.better { color: #0b5cad; font-weight: 600; }
.worse { color: #b3261e; font-weight: 600; }
.same { color: #59636e; }
.bad { color: #b3261e; font-weight: 600; }
.verdict { white-space: normal; min-width: 9.5rem; }
figure { margin: 0 0 1.4rem; background: #fff; border: 1px solid #d8dee4; border-radius: 8px; padding: 6px; }
svg.chart { display: block; width: 100%; height: auto; max-width: 1040px; margin: 0 auto; }
details { background: #fff; border: 1px solid #d8dee4; border-radius: 8px; padding: .55rem 1rem; margin-bottom: .5rem; }
details[open] { padding-bottom: .9rem; }
summary { cursor: pointer; font-weight: 600; }
summary .sub { display: inline; margin-left: .5em; }
details table { margin-top: .6rem; font-size: .8125rem; }
details td { padding: .28rem .65rem; }
details td.key { width: 28%; }
td.key { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; white-space: nowrap; }
td.value { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; overflow-wrap: anywhere; }
tbody.group { border-top: 2px solid #d8dee4; }
.nowrap { white-space: nowrap; }
tr.differs td { background: #fff8e1; }
.mark { font-family: system-ui, sans-serif; font-size: .75rem; color: #8a5a00; margin-left: .5em; white-space: nowrap; }
pre { background: #f6f8fa; border: 1px solid #d8dee4; border-radius: 6px; padding: .6rem .85rem; margin: .4rem 0;
  white-space: pre-wrap; overflow-wrap: anywhere;
  font: .8125rem/1.5 ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace; }
figure.flame { padding: 0; overflow: hidden; }
figure.flame iframe { display: block; width: 100%; border: 0; }
table.frames code, td code { font-size: .8rem; }
.overhead { background: #fff; border: 1px solid #d8dee4; border-radius: 8px; padding: .8rem 1.1rem; }
footer { margin-top: 3rem; color: #8c959f; font-size: .8rem; }
@media print {
  body { background: #fff; font-size: 10.5pt; }
  main { max-width: none; padding: 0; }
  nav { display: none; }
  h2 { break-after: avoid; }
  figure, .warnings, .howto, tr, details { break-inside: avoid; }
  .table-wrap, figure, details, .howto, .overhead { border-color: #bbb; }
  .table-wrap { overflow: visible; }
  a { color: inherit; text-decoration: none; }
}
"#;

/// The report as one offline HTML5 page.
pub fn render(report: &Report) -> String {
    let mut h = String::with_capacity(64 * 1024);
    let experiments = experiments(report);
    let title = if experiments.is_empty() {
        "rubyrace report".to_string()
    } else {
        format!("rubyrace report: {}", experiments.join(", "))
    };
    let flames = charts::flamegraph::flamegraphs(report);
    // No script runs on the page; the flame graphs' own scripts run in their sandboxed
    // frames, allowed by hash.
    let scripts = html_profiles::csp_script_sources(&flames)
        .map(|sources| format!("; script-src {sources}"))
        .unwrap_or_default();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:{scripts}\">\n\
         <meta name=\"generator\" content=\"rubyrace\">\n<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n<main>\n",
        escape(&title),
        CSS
    );

    header(&mut h, report, &experiments);
    how_to_read(&mut h, report);
    warnings(&mut h, report);
    summary_table(&mut h, report);
    runtime_section(&mut h, report);
    steps_section(&mut h, report);
    noise_section(&mut h, report);
    charts_section(&mut h, report);
    comparisons_table(&mut h, report);
    html_profiles::section(&mut h, report, &flames);
    overhead(&mut h, report);
    environment(&mut h, report);
    sources(&mut h, report);

    let scripts = if flames.is_empty() {
        "no scripts"
    } else {
        "no scripts but the flame graphs’ own, in sandboxed frames"
    };
    let _ = write!(
        h,
        "<footer>Made by rubyrace from the data above · schema {} · this page is self-contained: \
         {scripts}, no network.</footer>\n</main>\n</body>\n</html>\n",
        escape(&report.schema)
    );
    h
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

fn header(h: &mut String, report: &Report, experiments: &[String]) {
    let smoke = report.sources.iter().any(|s| s.smoke);
    let _ = write!(h, "<header>\n<h1>");
    if experiments.is_empty() {
        h.push_str("rubyrace report");
    } else {
        let _ = write!(
            h,
            "{}<span class=\"kicker\">rubyrace report</span>",
            escape(&experiments.join(", "))
        );
    }
    if smoke {
        h.push_str("<span class=\"badge smoke\">smoke test</span>");
    }
    h.push_str("</h1>\n");

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
    let mut parts = vec![workload.to_string()];
    parts.push(format!(
        "<b>{}</b> cohort{}{}",
        report.cohorts.len(),
        if report.cohorts.len() == 1 { "" } else { "s" },
        if report.group_by.is_empty() {
            String::new()
        } else {
            format!(" by <b>{}</b>", escape(&report.group_by.join(", ")))
        }
    ));
    if !report.baseline.is_empty() {
        parts.push(format!("baseline <b>{}</b>", escape(&report.baseline)));
    }
    parts.push(format!(
        "{} trial{} from {} results director{}",
        trials,
        if trials == 1 { "" } else { "s" },
        report.sources.len(),
        if report.sources.len() == 1 {
            "y"
        } else {
            "ies"
        }
    ));
    if !machines.is_empty() {
        parts.push(format!(
            "machine{} {}",
            if machines.len() == 1 { "" } else { "s" },
            escape(&machines.into_iter().collect::<Vec<_>>().join(", "))
        ));
    }
    if let Some(first) = report
        .sources
        .iter()
        .map(|s| s.created_at.as_str())
        .filter(|s| !s.is_empty())
        .min()
    {
        parts.push(format!("run {}", escape(first)));
    }
    let parts: Vec<String> = parts
        .iter()
        .map(|p| format!("<span class=\"nowrap\">{p}</span>"))
        .collect();
    let _ = writeln!(h, "<p class=\"meta\">{}</p>", parts.join(" · "));
    let runtime = if crate::render::cells::runtime_table(report).is_some() {
        "<a href=\"#runtime\">In the server</a>"
    } else {
        ""
    };
    let steps = if report.steps.is_empty() {
        ""
    } else {
        "<a href=\"#steps\">Scenario steps</a>"
    };
    let _ = writeln!(
        h,
        "<nav><a href=\"#summary\">Summary</a>{runtime}{steps}<a href=\"#charts\">Charts</a>\
         <a href=\"#comparisons\">Comparisons</a><a href=\"#environment\">Environment</a>\
         <a href=\"#sources\">Sources and commands</a></nav>\n</header>"
    );
}

fn how_to_read(h: &mut String, report: &Report) {
    // Which statistic each column is, in the words of the text report's legend: the
    // cohort columns are medians, the ratio is not their quotient (1188/700 is 1.70; the
    // paired ratio of the same trials was 1.63).
    let ratio = crate::render::cells::ratio_statistic(report);
    let _ = writeln!(
        h,
        "<p class=\"howto\"><b>How to read this.</b> A cohort is the set of trials that share \
         the values of {}. Each number in a cohort’s columns is the median across valid \
         trials, with the 10th–90th percentile of the trials underneath. “vs baseline” is \
         {ratio} of the cohort against {}, with its {} confidence interval and the rank \
         test’s p-value: not the ratio of the medians shown. <b>~</b> means the difference is \
         not statistically significant, which is an answer too: the two cannot be told apart \
         with this many trials. {}.{} Invalid and failed trials are counted and drawn, never \
         used in a statistic.</p>",
        if report.group_by.is_empty() {
            "the grouping keys".to_string()
        } else {
            format!("<b>{}</b>", escape(&report.group_by.join(", ")))
        },
        if report.baseline.is_empty() {
            "the baseline".to_string()
        } else {
            format!("the baseline, <b>{}</b>", escape(&report.baseline))
        },
        report.confidence_label(),
        escape(&crate::render::cells::holm_scope(report)),
        crate::render::cells::p99_words(report)
            .map(|w| format!(" {}.", escape(&upper_first(w))))
            .unwrap_or_default()
    );
}

fn warnings(h: &mut String, report: &Report) {
    if report.warnings.is_empty() {
        return;
    }
    let _ = write!(
        h,
        "<section class=\"warnings\" id=\"warnings\" aria-label=\"Warnings\">\n<h2>⚠ {} warning{} — read before trusting a number</h2>\n<ul>\n",
        report.warnings.len(),
        if report.warnings.len() == 1 { "" } else { "s" }
    );
    for w in &report.warnings {
        let _ = write!(h, "<li><span class=\"kind\">{}</span>", escape(&w.kind));
        if let Some(c) = &w.cohort {
            let _ = write!(h, "<b>{}</b>: ", escape(c));
        }
        let _ = writeln!(h, "{}</li>", escape(&w.message));
    }
    h.push_str("</ul>\n</section>\n");
}

/// "better", "worse" or "same": the CSS class of a comparison's verdict.
fn verdict_class(c: &Comparison) -> &'static str {
    if !c.significant {
        "same"
    } else if (c.ratio > 1.0) == c.higher_is_better {
        "better"
    } else {
        "worse"
    }
}

/// A ratio with three decimals: a 1% effect must be visible.
fn fmt_ratio(r: f64) -> String {
    if r.is_finite() {
        format!("{r:.3}×")
    } else {
        "–".to_string()
    }
}

/// A table cell: the median, and p10–p90 underneath; `unit` follows the numbers.
fn median_cell(s: Option<&Summary>, fmt: impl Fn(f64) -> String, unit: &str) -> String {
    match s {
        None => "<td class=\"num\">–</td>".to_string(),
        Some(s) => format!(
            "<td class=\"num\">{}{unit}<span class=\"sub\">{}–{}{unit}</span></td>",
            fmt(s.p50),
            fmt(s.p10),
            fmt(s.p90)
        ),
    }
}

fn mib(bytes: f64) -> String {
    fmt_sig(bytes / (1024.0 * 1024.0))
}

fn verdict_cell(report: &Report, cohort: &Cohort, metric: &str) -> String {
    if cohort.name == report.baseline {
        return "<td class=\"verdict same\">baseline</td>".to_string();
    }
    match report.comparison(&cohort.name, metric) {
        None => "<td class=\"verdict same\">–</td>".to_string(),
        Some(c) => format!(
            "<td class=\"verdict\"><span class=\"{}\">{}</span><span class=\"sub\">CI {:.3}–{} · p {}</span></td>",
            verdict_class(c),
            escape(&c.verdict),
            c.ci_low,
            fmt_ratio(c.ci_high),
            match c.p_value {
                Some(p) if p < 0.001 => "&lt; 0.001".to_string(),
                p => format!("= {}", p_cell(p)),
            },
        ),
    }
}

fn summary_table(h: &mut String, report: &Report) {
    let any = |f: fn(&Cohort) -> bool| report.cohorts.iter().any(f);
    let has_rate = any(|c| c.throughput.is_some());
    let has_wall = any(|c| c.script.as_ref().is_some_and(|s| s.wall.is_some()));
    let has_latency = any(|c| c.latency.is_some());
    let has_pss = any(|c| c.memory.pss_end.is_some());
    let has_rss_only = !has_pss && any(|c| c.memory.rss_end.is_some());
    let has_cpu = any(|c| c.cpu.per_request.is_some());
    let has_errors = any(|c| c.error_rate.as_ref().is_some_and(|e| e.mean > 0.0));
    let has_max_rss = any(|c| c.script.as_ref().is_some_and(|s| s.max_rss_bytes.is_some()));

    h.push_str("<h2 id=\"summary\">Summary</h2>\n<div class=\"table-wrap\"><table>\n<thead><tr><th>Cohort</th>\
                <th class=\"num\">Trials<span class=\"sub\">valid / invalid / failed</span></th>");
    if has_rate {
        let _ = write!(h, "<th class=\"num\">Median req/s<span class=\"sub\">p10–p90</span></th><th>vs baseline<span class=\"sub\">throughput, {} CI</span></th>", report.confidence_label());
    }
    if has_wall {
        let _ = write!(h, "<th class=\"num\">Median wall<span class=\"sub\">p10–p90</span></th><th>vs baseline<span class=\"sub\">wall time, {} CI</span></th>", report.confidence_label());
    }
    if has_latency {
        h.push_str("<th class=\"num\">Latency p50<span class=\"sub\">p99</span></th>");
    }
    if has_errors {
        h.push_str("<th class=\"num\">Errors<span class=\"sub\">mean</span></th>");
    }
    if has_pss {
        h.push_str("<th class=\"num\">PSS at end<span class=\"sub\">p10–p90</span></th>");
    }
    if has_rss_only {
        h.push_str("<th class=\"num\">RSS at end<span class=\"sub\">p10–p90</span></th>");
    }
    if has_max_rss {
        h.push_str("<th class=\"num\">Max RSS</th>");
    }
    if has_cpu {
        h.push_str("<th class=\"num\">CPU/request<span class=\"sub\">p10–p90</span></th>");
    }
    h.push_str("</tr></thead>\n<tbody>\n");
    for c in &report.cohorts {
        let _ = write!(
            h,
            "<tr><th class=\"name\" scope=\"row\">{}",
            escape(&c.name)
        );
        if c.name == report.baseline {
            h.push_str("<span class=\"badge\">baseline</span>");
        }
        let key: Vec<String> = c.key.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut notes = Vec::new();
        if !key.is_empty() && key.join(" ") != c.name {
            notes.push(escape(&key.join(" ")));
        }
        if !c.outliers.is_empty() {
            notes.push(format!(
                "{} outlier{} flagged: {}",
                c.outliers.len(),
                if c.outliers.len() == 1 { "" } else { "s" },
                escape(&c.outliers.join(", "))
            ));
        }
        if let Some(t) = &c.throughput {
            if t.cv.is_finite() && t.n > 1 {
                notes.push(format!("cv {:.1}%", t.cv * 100.0));
            }
        }
        if !notes.is_empty() {
            let _ = write!(h, "<span class=\"sub\">{}</span>", notes.join(" · "));
        }
        let flag = |n: usize| {
            if n > 0 {
                format!("<span class=\"bad\">{n}</span>")
            } else {
                n.to_string()
            }
        };
        let _ = write!(
            h,
            "</th><td class=\"num\">{} / {} / {}</td>",
            c.valid,
            flag(c.invalid),
            flag(c.failed)
        );
        if has_rate {
            h.push_str(&median_cell(c.throughput.as_ref(), |v| fmt_num(v, 0), ""));
            h.push_str(&verdict_cell(report, c, "throughput"));
        }
        if has_wall {
            let wall = c.script.as_ref().and_then(|s| s.wall.as_ref());
            h.push_str(&median_cell(wall, fmt_sig, " s"));
            h.push_str(&verdict_cell(report, c, "wall"));
        }
        if has_latency {
            match &c.latency {
                Some(l) => {
                    let _ = write!(
                        h,
                        "<td class=\"num\">{}<span class=\"sub\">{}</span></td>",
                        micros(l.p50),
                        micros(l.p99)
                    );
                }
                None => h.push_str("<td class=\"num\">–</td>"),
            }
        }
        if has_errors {
            match &c.error_rate {
                Some(e) if e.mean > 0.0 => {
                    let _ = write!(
                        h,
                        "<td class=\"num\"><span class=\"bad\">{}%</span></td>",
                        fmt_sig(e.mean * 100.0)
                    );
                }
                Some(_) => h.push_str("<td class=\"num\">0</td>"),
                None => h.push_str("<td class=\"num\">–</td>"),
            }
        }
        if has_pss {
            h.push_str(&median_cell(c.memory.pss_end.as_ref(), mib, " MiB"));
        }
        if has_rss_only {
            h.push_str(&median_cell(c.memory.rss_end.as_ref(), mib, " MiB"));
        }
        if has_max_rss {
            h.push_str(&median_cell(
                c.script.as_ref().and_then(|s| s.max_rss_bytes.as_ref()),
                mib,
                " MiB",
            ));
        }
        if has_cpu {
            h.push_str(&median_cell(c.cpu.per_request.as_ref(), fmt_sig, " µs"));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody></table></div>\n");
}

/// Scenario runs: every step of every cohort.
fn steps_section(h: &mut String, report: &Report) {
    let Some((headers, rows)) = crate::render::cells::steps_table(report) else {
        return;
    };
    let _ = write!(
        h,
        "<h2 id=\"steps\">Scenario steps</h2>\n<p class=\"note\">{}</p>\n",
        escape(crate::render::cells::STEPS_TITLE.trim_end_matches(':'))
    );
    class_table(
        h,
        &headers,
        &rows,
        |i| i >= 3,
        |i, cell| match i {
            0..=2 => "",
            4 if cell != "0" => " class=\"num bad\"",
            _ => " class=\"num\"",
        },
    );
}

/// A table in its scrolling wrapper: `num` says which headers are numbers, `class` gives
/// each cell's class attribute.
fn class_table(
    h: &mut String,
    headers: &[&str],
    rows: &[Vec<String>],
    num: impl Fn(usize) -> bool,
    class: impl Fn(usize, &str) -> &'static str,
) {
    h.push_str("<div class=\"table-wrap\"><table>\n<thead><tr>");
    for (i, name) in headers.iter().enumerate() {
        let attr = if num(i) { " class=\"num\"" } else { "" };
        let _ = write!(h, "<th{attr}>{}</th>", escape(name));
    }
    h.push_str("</tr></thead>\n<tbody>\n");
    for row in rows {
        h.push_str("<tr>");
        for (i, cell) in row.iter().enumerate() {
            let _ = write!(h, "<td{}>{}</td>", class(i, cell), escape(cell));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody></table></div>\n");
}

/// The settings verified in the server and the probe's GC, heap, YJIT and boot figures.
fn runtime_section(h: &mut String, report: &Report) {
    let Some((headers, rows)) = crate::render::cells::runtime_table(report) else {
        return;
    };
    h.push_str(
        "<h2 id=\"runtime\">In the server</h2>\n<p class=\"note\">What the Ruby processes themselves \
         reported (ruby/probe.rb): each setting asked for, checked in every process of every trial \
         (✓: in force in all of them); GC, allocations, heap and YJIT over the measured phase, \
         summed over processes, per trial; medians over the valid trials. Boot: start to app \
         built, slowest process.</p>\n",
    );
    class_table(
        h,
        &headers,
        &rows,
        |i| i >= 2,
        |i, cell| match i {
            0 => "",
            1 if cell.contains('✗') => " class=\"bad\"",
            1 => "",
            _ => " class=\"num\"",
        },
    );
}

/// The machine's noise per cohort (`crate::noise`).
fn noise_section(h: &mut String, report: &Report) {
    let Some((headers, rows)) = crate::noise::noise_table(report) else {
        return;
    };
    let _ = write!(
        h,
        "<h2 id=\"noise\">Machine noise</h2>\n<p class=\"note\">{}</p>\n<div class=\"table-wrap\"><table>\n<thead><tr>",
        escape(crate::noise::NOISE_TITLE.trim_end_matches(':'))
    );
    for (i, name) in headers.iter().enumerate() {
        let class = if i >= 1 { " class=\"num\"" } else { "" };
        let _ = write!(h, "<th{class}>{}</th>", escape(name));
    }
    h.push_str("</tr></thead>\n<tbody>\n");
    for row in rows {
        h.push_str("<tr>");
        for (i, cell) in row.iter().enumerate() {
            let class = if i >= 1 { " class=\"num\"" } else { "" };
            let _ = write!(h, "<td{class}>{}</td>", escape(cell));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody></table></div>\n");
}

fn charts_section(h: &mut String, report: &Report) {
    let charts = charts::all(report);
    if charts.is_empty() {
        return;
    }
    h.push_str("<h2 id=\"charts\">Charts</h2>\n");
    for chart in charts {
        let _ = writeln!(
            h,
            "<figure id=\"chart-{}\">{}</figure>",
            chart.name, chart.svg
        );
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

fn metric_name(metric: &str) -> String {
    match metric {
        "throughput" => "throughput".to_string(),
        "latency_p50" => "latency p50".to_string(),
        "latency_p99" => "latency p99".to_string(),
        "pss_end" => "PSS at end".to_string(),
        "rss_end" => "RSS at end".to_string(),
        "uss_end" => "USS at end".to_string(),
        "worker_pss_end" => "PSS per worker at end".to_string(),
        "worker_uss_end" => "USS per worker at end".to_string(),
        "cpu_per_request" => "CPU per request".to_string(),
        "cpu_per_request_with_idle" => "CPU per request, idle included".to_string(),
        "wall" => "wall time".to_string(),
        other => other.replace('_', " "),
    }
}

fn comparisons_table(h: &mut String, report: &Report) {
    if report.comparisons.is_empty() {
        return;
    }
    h.push_str(&format!(
        "<h2 id=\"comparisons\">Comparisons with the baseline</h2>\n<p>Every metric of every cohort \
         against the baseline. The ratio is {} (cohort over baseline, not the ratio of the \
         medians); “paired” compares the cohorts block by block (the randomized design), \
         “unpaired” resamples the trials. Precision is the confidence interval’s half-width, \
         and how many blocks (or trials) would narrow it to ±1%.</p>\n<div class=\"table-wrap\">\
         <table>\n<thead><tr><th>Cohort</th><th>Metric</th>\
         <th class=\"num\">Ratio</th><th class=\"num\">{} CI</th><th class=\"num\">p</th>\
         <th>Verdict</th><th>Method</th><th class=\"num\">Precision</th></tr></thead>\n",
        crate::render::cells::ratio_statistic(report),
        report.confidence_label()
    ));
    // One row group per cohort, in the order the comparisons come.
    let mut cohorts: Vec<&str> = Vec::new();
    for c in &report.comparisons {
        if !cohorts.contains(&c.cohort.as_str()) {
            cohorts.push(&c.cohort);
        }
    }
    for cohort in cohorts {
        let rows: Vec<&Comparison> = report
            .comparisons
            .iter()
            .filter(|c| c.cohort == cohort)
            .collect();
        h.push_str("<tbody class=\"group\">\n");
        for (i, c) in rows.iter().enumerate() {
            let method = if c.method == "paired" {
                format!("paired, {}", units::count(c.n, "block"))
            } else {
                format!(
                    "{}, {} vs {}",
                    c.method,
                    c.n,
                    units::count(c.n_baseline, "trial")
                )
            };
            let precision = match c.needed_for_1pct {
                Some(n) if c.half_width_pct > 1.0 => format!(
                    "±{:.1}%<span class=\"sub\">±1% needs {}</span>",
                    c.half_width_pct,
                    fmt_num(n as f64, 0)
                ),
                _ => format!("±{:.1}%", c.half_width_pct),
            };
            h.push_str("<tr>");
            if i == 0 {
                let _ = write!(
                    h,
                    "<th class=\"name\" scope=\"rowgroup\" rowspan=\"{}\">{}</th>",
                    rows.len(),
                    escape(&c.cohort)
                );
            }
            let _ = writeln!(
                h,
                "<td class=\"nowrap\">{}<span class=\"sub\">{}</span></td>\
                 <td class=\"num\">{}</td><td class=\"num\">{:.3}–{}</td><td class=\"num\">{}</td>\
                 <td class=\"verdict {}\">{}</td><td class=\"nowrap\">{}<span class=\"sub\">{}</span></td>\
                 <td class=\"num\">{}</td></tr>",
                escape(&metric_name(&c.metric)),
                if c.higher_is_better { "higher is better" } else { "lower is better" },
                fmt_ratio(c.ratio),
                c.ci_low,
                fmt_ratio(c.ci_high),
                escape(&p_cell(c.p_value)),
                verdict_class(c),
                escape(&c.verdict),
                escape(&method),
                escape(&test_name(&c.test)),
                precision,
            );
        }
        h.push_str("</tbody>\n");
    }
    h.push_str("</table></div>\n");
}

fn test_name(test: &str) -> String {
    match test {
        "wilcoxon-signed-rank" => "Wilcoxon signed-rank".to_string(),
        "mann-whitney-u" => "Mann–Whitney U".to_string(),
        other => other.to_string(),
    }
}

fn overhead(h: &mut String, report: &Report) {
    let Some(o) = &report.overhead else { return };
    let more = o.us_per_request >= 0.0;
    let _ = writeln!(
        h,
        "<h2 id=\"overhead\">Overhead per request</h2>\n<p class=\"overhead\"><b>{}</b> spends \
         <b>{} µs {}</b> per request than <b>{}</b> ({} CI {} to {} µs; {}, n = {}). This is \
         1/rate − 1/rate of the two cohorts: the time each request costs on top of the other.</p>",
        escape(&o.cohort),
        fmt_sig(o.us_per_request.abs()),
        if more { "more" } else { "less" },
        escape(&o.baseline),
        report.confidence_label(),
        fmt_sig(o.ci_low),
        fmt_sig(o.ci_high),
        escape(&o.method),
        o.n,
    );
}

fn environment(h: &mut String, report: &Report) {
    if report.environment.is_empty() {
        return;
    }
    h.push_str(
        "<h2 id=\"environment\">Recorded environment and configuration</h2>\n<p>What the trials \
         of each cohort recorded about themselves: configuration, verified settings, versions, \
         environment variables and the machine. Keys whose values differ from the baseline’s \
         are highlighted; a key with more than one value varied within the cohort.</p>\n",
    );
    let baseline = report
        .environment
        .iter()
        .find(|e| e.cohort == report.baseline);
    for env in &report.environment {
        let differs: usize = match baseline {
            Some(b) if b.cohort != env.cohort => {
                let keys: BTreeSet<&String> = env.values.keys().chain(b.values.keys()).collect();
                keys.into_iter()
                    .filter(|k| env.values.get(*k) != b.values.get(*k))
                    .count()
            }
            _ => 0,
        };
        let _ = write!(
            h,
            "<details><summary>{}<span class=\"sub\">{} keys{}{}</span></summary>\n<table>\n<tbody>\n",
            escape(&env.cohort),
            env.values.len(),
            if env.cohort == report.baseline { " · baseline".to_string() } else { String::new() },
            if differs > 0 { format!(" · {differs} differ from the baseline") } else { String::new() },
        );
        for (key, values) in &env.values {
            let differs = baseline
                .is_some_and(|b| b.cohort != env.cohort && b.values.get(key) != Some(values));
            let varies = values.len() > 1;
            let _ = write!(
                h,
                "<tr{}><td class=\"key\">{}</td><td class=\"value\">",
                if differs || varies {
                    " class=\"differs\""
                } else {
                    ""
                },
                escape(key)
            );
            let shown: Vec<String> = values.iter().map(|v| escape(v)).collect();
            h.push_str(&shown.join("<br>"));
            if varies {
                h.push_str("<span class=\"mark\">varies within the cohort</span>");
            } else if differs {
                h.push_str("<span class=\"mark\">≠ baseline</span>");
            }
            h.push_str("</td></tr>\n");
        }
        h.push_str("</tbody></table></details>\n");
    }
}

fn sources(h: &mut String, report: &Report) {
    h.push_str("<h2 id=\"sources\">Sources and commands</h2>\n");
    if !report.command.is_empty() {
        let _ = writeln!(
            h,
            "<h3>This report</h3>\n<pre><code>{}</code></pre>",
            escape(&report.command)
        );
    }
    if report.sources.is_empty() {
        return;
    }
    h.push_str(
        "<h3>Results directories</h3>\n<div class=\"table-wrap\"><table>\n<thead><tr><th>Directory</th>\
         <th>Experiment</th><th>Design</th><th>Created</th><th>Machines</th><th class=\"num\">Trials</th></tr></thead>\n<tbody>\n",
    );
    for s in &report.sources {
        let _ = writeln!(
            h,
            "<tr><td class=\"value\">{}</td><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td></tr>",
            escape(&s.dir),
            escape(&s.experiment),
            if s.smoke { "<span class=\"badge smoke\">smoke</span>" } else { "" },
            escape(&s.design),
            escape(&s.created_at),
            escape(&s.machines.join(", ")),
            s.trials
        );
    }
    h.push_str("</tbody></table></div>\n");
    for line in crate::render::cells::design_lines(report) {
        let _ = writeln!(h, "<p>{}</p>", escape(&line));
    }
    for s in &report.sources {
        if s.commands.is_empty() {
            continue;
        }
        let _ = writeln!(
            h,
            "<h3>Commands that produced <code>{}</code></h3>",
            escape(&s.dir)
        );
        let lines: Vec<String> = s.commands.iter().map(|c| escape(c)).collect();
        let _ = writeln!(h, "<pre><code>{}</code></pre>", lines.join("\n"));
    }
    for s in &report.sources {
        for d in &s.doctor {
            doctor_findings(h, &s.dir, d);
        }
    }
}

/// What `rubyrace doctor` found when a run (or a resume) started: every finding, so a reader
/// sees the machine the numbers came from, not only what was wrong with it.
fn doctor_findings(h: &mut String, dir: &str, d: &doctor::Report) {
    let _ = writeln!(
        h,
        "<h3>The machine for <code>{}</code>: <code>rubyrace doctor</code> at {}</h3>\n\
         <div class=\"table-wrap\"><table class=\"doctor\">\n<thead><tr><th>Status</th><th>Check</th>\
         <th>Value and advice</th></tr></thead>\n<tbody>",
        escape(dir),
        escape(&d.checked_at)
    );
    for f in &d.findings {
        let advice = if f.advice.is_empty() {
            String::new()
        } else {
            format!("<br><small>→ {}</small>", escape(&f.advice))
        };
        let _ = writeln!(
            h,
            "<tr><td><span class=\"kind\">{}</span></td><td>{}</td><td class=\"value\">{}{advice}</td></tr>",
            f.status.as_str(),
            escape(&f.name),
            escape(&f.value).replace('\n', "<br>")
        );
    }
    h.push_str("</tbody></table></div>\n");
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
            skewness: None,
            skew_marked: false,
            lag1_autocorrelation: None,
            trend_p_value: None,
            widened_for_dependence: false,
            effective_blocks: None,
            ratio: 1.1,
            ci_low: 1.05,
            ci_high: 1.15,
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
        assert!(
            page.contains("&lt;img src=x onerror=alert(1)&gt;<br>a&#39;b&quot;c"),
            "environment value"
        );
        assert!(
            page.contains("--label &#39;&lt;b&gt;x&lt;/b&gt;&#39;"),
            "command"
        );
        assert!(page.contains("results/&lt;dir&gt;"), "path");
        assert!(page.contains("third &amp; last"));
        assert!(!page.contains("third & last"));
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
