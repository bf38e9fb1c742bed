//! The HTML report's tables: the summary (one row per cohort), the comparisons with the
//! baseline, and the tables the text formats share with it (in the server, scenario steps,
//! machine noise).

use maud::{html, Markup};

use crate::format::{fmt_num, fmt_sig, micros, p_cell};
use crate::model::{Cohort, Comparison, Report, Summary};

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

/// A comparison's interval, or a dash where it cannot be read as one (too few effective
/// blocks: its verdict says why).
fn interval_cell(c: &Comparison) -> String {
    if c.too_dependent_to_tell() {
        "–".to_string()
    } else {
        format!("{:.3}–{}", c.ci_low, fmt_ratio(c.ci_high))
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
fn median_cell(s: Option<&Summary>, fmt: impl Fn(f64) -> String, unit: &str) -> Markup {
    html! {
        @match s {
            None => td.num { "–" },
            Some(s) => td.num {
                (fmt(s.p50)) (unit)
                span.sub { (fmt(s.p10)) "–" (fmt(s.p90)) (unit) }
            },
        }
    }
}

fn mib(bytes: f64) -> String {
    fmt_sig(bytes / (1024.0 * 1024.0))
}

fn verdict_cell(report: &Report, cohort: &Cohort, metric: &str) -> Markup {
    if cohort.name == report.baseline {
        return html! { td.verdict.same { "baseline" } };
    }
    html! {
        @match report.comparison(&cohort.name, metric) {
            None => td.verdict.same { "–" },
            Some(c) => td.verdict {
                span class=(verdict_class(c)) { (c.verdict) }
                span.sub {
                    "CI " (interval_cell(c)) " · p "
                    @match c.p_value {
                        Some(p) if p < 0.001 => "< 0.001",
                        p => { "= " (p_cell(p)) },
                    }
                }
            },
        }
    }
}

/// One row per cohort: trials, the medians and the verdicts against the baseline.
pub(super) fn summary(report: &Report) -> Markup {
    let any = |f: fn(&Cohort) -> bool| report.cohorts.iter().any(f);
    let has_rate = any(|c| c.throughput.is_some());
    let has_wall = any(|c| c.script.as_ref().is_some_and(|s| s.wall.is_some()));
    let has_latency = any(|c| c.latency.is_some());
    let has_pss = any(|c| c.memory.pss_end.is_some());
    let has_rss_only = !has_pss && any(|c| c.memory.rss_end.is_some());
    let has_cpu = any(|c| c.cpu.per_request.is_some());
    let has_errors = any(|c| c.error_rate.as_ref().is_some_and(|e| e.mean > 0.0));
    let has_max_rss = any(|c| c.script.as_ref().is_some_and(|s| s.max_rss_bytes.is_some()));
    let confidence = report.interval_label();
    let flag = |n: usize| html! { @if n > 0 { span.bad { (n) } } @else { (n) } };
    html! {
        h2 #summary { "Summary" } "\n"
        div.table-wrap {
            table {
                "\n"
                thead {
                    tr {
                        th { "Cohort" }
                        th.num { "Trials" span.sub { "valid / invalid / failed" } }
                        @if has_rate {
                            th.num { "Median req/s" span.sub { "p10–p90" } }
                            th { "vs baseline" span.sub { "throughput, " (confidence) " CI" } }
                        }
                        @if has_wall {
                            th.num { "Median wall" span.sub { "p10–p90" } }
                            th { "vs baseline" span.sub { "wall time, " (confidence) " CI" } }
                        }
                        @if has_latency { th.num { "Latency p50" span.sub { "p99" } } }
                        @if has_errors { th.num { "Errors" span.sub { "mean" } } }
                        @if has_pss { th.num { "PSS at end" span.sub { "p10–p90" } } }
                        @if has_rss_only { th.num { "RSS at end" span.sub { "p10–p90" } } }
                        @if has_max_rss { th.num { "Max RSS" } }
                        @if has_cpu { th.num { "CPU/request" span.sub { "p10–p90" } } }
                    }
                }
                "\n"
                tbody {
                    "\n"
                    @for c in &report.cohorts {
                        tr {
                            th.name scope="row" {
                                (c.name)
                                @if c.name == report.baseline { span.badge { "baseline" } }
                                @let notes = cohort_notes(c);
                                @if !notes.is_empty() { span.sub { (notes.join(" · ")) } }
                            }
                            td.num { (c.valid) " / " (flag(c.invalid)) " / " (flag(c.failed)) }
                            @if has_rate {
                                (median_cell(c.throughput.as_ref(), |v| fmt_num(v, 0), ""))
                                (verdict_cell(report, c, "throughput"))
                            }
                            @if has_wall {
                                (median_cell(c.script.as_ref().and_then(|s| s.wall.as_ref()), fmt_sig, " s"))
                                (verdict_cell(report, c, "wall"))
                            }
                            @if has_latency {
                                @match &c.latency {
                                    Some(l) => td.num { (micros(l.p50)) span.sub { (micros(l.p99)) } },
                                    None => td.num { "–" },
                                }
                            }
                            @if has_errors {
                                @match &c.error_rate {
                                    Some(e) if e.mean > 0.0 => td.num { span.bad { (fmt_sig(e.mean * 100.0)) "%" } },
                                    Some(_) => td.num { "0" },
                                    None => td.num { "–" },
                                }
                            }
                            @if has_pss { (median_cell(c.memory.pss_end.as_ref(), mib, " MiB")) }
                            @if has_rss_only { (median_cell(c.memory.rss_end.as_ref(), mib, " MiB")) }
                            @if has_max_rss {
                                (median_cell(c.script.as_ref().and_then(|s| s.max_rss_bytes.as_ref()), mib, " MiB"))
                            }
                            @if has_cpu { (median_cell(c.cpu.per_request.as_ref(), fmt_sig, " µs")) }
                        }
                        "\n"
                    }
                }
            }
        }
        "\n"
    }
}

/// What the summary says under a cohort's name: its key when the name is not the key, its
/// flagged outliers and its throughput's coefficient of variation.
fn cohort_notes(c: &Cohort) -> Vec<String> {
    let key: Vec<String> = c.key.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut notes = Vec::new();
    if !key.is_empty() && key.join(" ") != c.name {
        notes.push(key.join(" "));
    }
    if !c.outliers.is_empty() {
        notes.push(format!(
            "{} outlier{} flagged: {}",
            c.outliers.len(),
            if c.outliers.len() == 1 { "" } else { "s" },
            c.outliers.join(", ")
        ));
    }
    if let Some(t) = &c.throughput {
        if t.cv.is_finite() && t.n > 1 {
            notes.push(format!("cv {:.1}%", t.cv * 100.0));
        }
    }
    notes
}

/// Scenario runs: every step of every cohort.
pub(super) fn steps(report: &Report) -> Markup {
    let Some((headers, rows)) = crate::render::cells::steps_table(report) else {
        return html! {};
    };
    let table = class_table(
        &headers,
        &rows,
        |i| i >= 3,
        |i, cell| match i {
            0..=2 => None,
            4 if cell != "0" => Some("num bad"),
            _ => Some("num"),
        },
    );
    html! {
        h2 #steps { "Scenario steps" } "\n"
        p.note { (crate::render::cells::STEPS_TITLE.trim_end_matches(':')) } "\n"
        (table)
    }
}

/// The per-host table of a run over several hosts.
pub(super) fn hosts(report: &Report) -> Markup {
    let Some((headers, rows)) = crate::render::cells::hosts_table(report) else {
        return html! {};
    };
    let table = class_table(
        &headers,
        &rows,
        |i| (2..5).contains(&i),
        |i, _| (2..5).contains(&i).then_some("num"),
    );
    html! {
        h2 #hosts { "Hosts" } "\n"
        p.note { (crate::render::cells::HOSTS_TITLE.trim_end_matches(':')) } "\n"
        (table)
    }
}

/// A table in its scrolling wrapper: `num` says which headers are numbers, `class` gives
/// each cell's class, if any.
fn class_table(
    headers: &[&str],
    rows: &[Vec<String>],
    num: impl Fn(usize) -> bool,
    class: impl Fn(usize, &str) -> Option<&'static str>,
) -> Markup {
    html! {
        div.table-wrap {
            table {
                "\n"
                thead {
                    tr {
                        @for (i, name) in headers.iter().enumerate() {
                            th class=[num(i).then_some("num")] { (name) }
                        }
                    }
                }
                "\n"
                tbody {
                    "\n"
                    @for row in rows {
                        tr {
                            @for (i, cell) in row.iter().enumerate() {
                                td class=[class(i, cell)] { (cell) }
                            }
                        }
                        "\n"
                    }
                }
            }
        }
        "\n"
    }
}

/// The settings verified in the server and the probe's GC, heap, YJIT and boot figures.
pub(super) fn runtime(report: &Report) -> Markup {
    let Some((headers, rows)) = crate::render::cells::runtime_table(report) else {
        return html! {};
    };
    let table = class_table(
        &headers,
        &rows,
        |i| i >= 2,
        |i, cell| match i {
            0 => None,
            1 if cell.contains('✗') => Some("bad"),
            1 => None,
            _ => Some("num"),
        },
    );
    html! {
        h2 #runtime { "In the server" } "\n"
        p.note {
            "What the Ruby processes themselves reported (ruby/probe.rb): each setting asked \
             for, checked in every process of every trial (✓: in force in all of them); GC, \
             allocations, heap and YJIT over the measured phase, summed over processes, per \
             trial; medians over the valid trials. Boot: start to app built, slowest process."
        }
        "\n"
        (table)
    }
}

/// The machine's noise per cohort (`crate::noise`).
pub(super) fn noise(report: &Report) -> Markup {
    let Some((headers, rows)) = crate::noise::noise_table(report) else {
        return html! {};
    };
    let num = |i: usize| (i >= 1).then_some("num");
    let table = class_table(&headers, &rows, |i| i >= 1, |i, _| num(i));
    html! {
        h2 #noise { "Machine noise" } "\n"
        p.note { (crate::noise::NOISE_TITLE.trim_end_matches(':')) } "\n"
        (table)
    }
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

fn test_name(test: &str) -> String {
    match test {
        "wilcoxon-signed-rank" => "Wilcoxon signed-rank".to_string(),
        "mann-whitney-u" => "Mann–Whitney U".to_string(),
        other => other.to_string(),
    }
}

/// Every metric of every cohort against the baseline, one row group per cohort.
pub(super) fn comparisons(report: &Report) -> Markup {
    if report.comparisons.is_empty() {
        return html! {};
    }
    // One row group per cohort, in the order the comparisons come.
    let mut cohorts: Vec<&str> = Vec::new();
    for c in &report.comparisons {
        if !cohorts.contains(&c.cohort.as_str()) {
            cohorts.push(&c.cohort);
        }
    }
    html! {
        h2 #comparisons { "Comparisons with the baseline" } "\n"
        p {
            "Every metric of every cohort against the baseline. The ratio is "
            (crate::render::cells::ratio_statistic(report))
            " (cohort over baseline, not the ratio of the medians); “paired” compares the \
             cohorts block by block (the randomized design), “unpaired” resamples the trials. \
             Precision is the confidence interval’s half-width, and how many blocks (or \
             trials) would narrow it to ±1%."
        }
        "\n"
        div.table-wrap {
            table {
                "\n"
                thead {
                    tr {
                        th { "Cohort" } th { "Metric" } th.num { "Ratio" }
                        th.num { (report.interval_label()) " CI" } th.num { "p" }
                        th { "Verdict" } th { "Method" } th.num { "Precision" }
                    }
                }
                "\n"
                @for cohort in cohorts {
                    @let rows: Vec<&Comparison> = report.comparisons.iter().filter(|c| c.cohort == cohort).collect();
                    tbody.group {
                        "\n"
                        @for (i, c) in rows.iter().enumerate() {
                            tr {
                                @if i == 0 {
                                    th.name scope="rowgroup" rowspan=(rows.len()) { (c.cohort) }
                                }
                                (comparison_cells(c))
                            }
                            "\n"
                        }
                    }
                    "\n"
                }
            }
        }
        "\n"
    }
}

/// The cells of one comparison, after its cohort's.
fn comparison_cells(c: &Comparison) -> Markup {
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
    html! {
        td.nowrap {
            (metric_name(&c.metric))
            span.sub { @if c.higher_is_better { "higher is better" } @else { "lower is better" } }
        }
        td.num { (fmt_ratio(c.ratio)) }
        td.num { (interval_cell(c)) }
        td.num { (p_cell(c.p_value)) }
        td.verdict.(verdict_class(c)) { (c.verdict) }
        td.nowrap { (method) span.sub { (test_name(&c.test)) } }
        td.num {
            (format!("±{:.1}%", c.half_width_pct))
            @match c.needed_for_1pct {
                Some(n) if c.half_width_pct > 1.0 => span.sub { "±1% needs " (fmt_num(n as f64, 0)) },
                _ => {},
            }
        }
    }
}
