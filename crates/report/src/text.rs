//! The text renderings of a report: the terminal table (coloured on a terminal, plain when
//! piped), Markdown for GitHub issues and Ruby bug reports, CSV, and benchstat's Go
//! benchmark format.

use std::fmt::Write as _;

use comfy_table::{presets, Attribute, Cell, CellAlignment, Color, ContentArrangement, Table};

use crate::model::{Comparison, Report, Summary, Workloads};

fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / (1024.0 * 1024.0))
}

fn micros(us: f64) -> String {
    if us >= 1000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
}

fn rate(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn seconds(v: f64) -> String {
    format!("{v:.3} s")
}

/// A number with about four significant digits.
fn fmt_g(v: f64) -> String {
    if v.abs() >= 1000.0 || v == v.trunc() {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

fn dash() -> String {
    "-".into()
}

/// The main column of a cohort: median with its p10–p90 range.
fn median_range(s: &Option<Summary>, f: fn(f64) -> String) -> String {
    match s {
        Some(s) if s.n > 1 => format!("{} [{}–{}]", f(s.p50), f(s.p10), f(s.p90)),
        Some(s) => f(s.p50),
        None => dash(),
    }
}

fn median(s: &Option<Summary>, f: fn(f64) -> String) -> String {
    s.as_ref().map(|s| f(s.p50)).unwrap_or_else(dash)
}

/// One row per cohort: what the summary table shows.
struct Row {
    cohort: String,
    trials: String,
    main: String,
    versus: String,
    significant: Option<bool>,
    rest: Vec<String>,
}

fn headers(report: &Report) -> Vec<&'static str> {
    if report.workload == Workloads::Script {
        vec![
            "cohort",
            "trials",
            "wall (median [p10–p90])",
            "vs baseline",
            "user",
            "system",
            "max RSS",
        ]
    } else {
        vec![
            "cohort",
            "trials",
            "req/s (median [p10–p90])",
            "vs baseline",
            "p50",
            "p99",
            "PSS",
            "CPU/req",
        ]
    }
}

fn rows(report: &Report) -> Vec<Row> {
    let script = report.workload == Workloads::Script;
    let main_metric = if script { "wall" } else { "throughput" };
    report
        .cohorts
        .iter()
        .map(|c| {
            let cmp = report.comparison(&c.name, main_metric);
            let versus = if c.name == report.baseline {
                "baseline".to_string()
            } else {
                cmp.map(|x| x.verdict.clone()).unwrap_or_else(dash)
            };
            let trials = if c.invalid + c.failed > 0 {
                format!("{} (+{} invalid, {} failed)", c.valid, c.invalid, c.failed)
            } else {
                c.valid.to_string()
            };
            let (main, rest) = if script {
                let s = c.script.clone().unwrap_or_default();
                (
                    median_range(&s.wall, seconds),
                    vec![
                        median(&s.user, seconds),
                        median(&s.system, seconds),
                        median(&s.max_rss_bytes, mib),
                    ],
                )
            } else {
                let lat = c.latency.as_ref();
                (
                    median_range(&c.throughput, rate),
                    vec![
                        lat.map(|l| micros(l.p50)).unwrap_or_else(dash),
                        lat.map(|l| micros(l.p99)).unwrap_or_else(dash),
                        median(&c.memory.pss_end, mib),
                        median(&c.cpu.per_request, micros),
                    ],
                )
            };
            Row {
                cohort: c.name.clone(),
                trials,
                main,
                versus,
                significant: cmp.map(|x| x.significant),
                rest,
            }
        })
        .collect()
}

/// "jit=yjit ✓ allocator=jemalloc ✗ 2/3": each setting checked on the running server, with
/// the count when not every trial had it in force.
pub fn verified_cell(c: &crate::model::Cohort) -> String {
    if c.verified.is_empty() {
        return dash();
    }
    c.verified
        .iter()
        .map(|v| {
            if v.verified == v.checked {
                format!("{}={} ✓", v.setting, v.expected)
            } else {
                format!(
                    "{}={} ✗ {}/{}",
                    v.setting, v.expected, v.verified, v.checked
                )
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Bytes as KiB below a MiB, else MiB.
fn bytes(v: f64) -> String {
    if v < 1024.0 * 1024.0 {
        format!("{:.0} KiB", v / 1024.0)
    } else {
        mib(v)
    }
}

fn count_k(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else {
        fmt_g(v)
    }
}

/// The probe's table: the settings verified on the running server, then GC, allocation,
/// heap, YJIT and boot medians per cohort. None when no cohort has probe data or checks.
pub fn runtime_table(report: &Report) -> Option<(Vec<&'static str>, Vec<Vec<String>>)> {
    if report
        .cohorts
        .iter()
        .all(|c| c.runtime.is_none() && c.verified.is_empty())
    {
        return None;
    }
    let headers = vec![
        "cohort",
        "verified in the server",
        "GC /1k req",
        "major /1k",
        "GC ms /1k",
        "objects /req",
        "heap pages",
        "YJIT code",
        "YJIT ratio",
        "boot",
    ];
    let rows: Vec<Vec<String>> = report
        .cohorts
        .iter()
        .map(|c| {
            let r = c.runtime.clone().unwrap_or_default();
            vec![
                c.name.clone(),
                verified_cell(c),
                median(&r.gc_per_1000_requests, fmt_g),
                median(&r.major_gc_per_1000_requests, fmt_g),
                median(&r.gc_time_ms_per_1000_requests, fmt_g),
                median(&r.allocated_objects_per_request, fmt_g),
                median(&r.heap_allocated_pages, count_k),
                median(&r.yjit_code_bytes, bytes),
                median(&r.yjit_ratio_in_yjit, |v| format!("{v:.1}%")),
                median(&r.app_loaded_after_s, seconds),
            ]
        })
        .collect();
    // Columns with nothing in any cohort (no YJIT, no --yjit-stats) are left out.
    let keep: Vec<bool> = (0..headers.len())
        .map(|i| i < 2 || rows.iter().any(|r| r[i] != dash()))
        .collect();
    let pick = |v: Vec<String>| -> Vec<String> {
        v.into_iter()
            .zip(&keep)
            .filter(|(_, k)| **k)
            .map(|(x, _)| x)
            .collect()
    };
    let headers = headers
        .into_iter()
        .zip(&keep)
        .filter(|(_, k)| **k)
        .map(|(h, _)| h)
        .collect();
    Some((headers, rows.into_iter().map(pick).collect()))
}

const RUNTIME_TITLE: &str = "In the server (ruby/probe.rb; per trial over the measured phase, summed over processes; medians):";

/// An empty terminal table in rubyrace's style, coloured or not.
/// A table with a bold header row.
fn table_with_header(color: bool, headers: Vec<&str>) -> Table {
    let mut t = new_table(color);
    t.set_header(
        headers
            .into_iter()
            .map(|h| Cell::new(h).add_attribute(Attribute::Bold)),
    );
    t
}

fn new_table(color: bool) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::UTF8_HORIZONTAL_ONLY)
        .set_content_arrangement(ContentArrangement::Dynamic);
    if color {
        t.enforce_styling();
    } else {
        t.force_no_tty();
    }
    t
}

/// The terminal table; `color` adds ANSI colours (only on a terminal).
pub fn table(report: &Report, color: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", title(report));
    let mut t = new_table(color);
    t.set_header(
        headers(report)
            .into_iter()
            .map(|h| Cell::new(h).add_attribute(Attribute::Bold)),
    );
    for r in rows(report) {
        let mut versus = Cell::new(&r.versus);
        if color {
            versus = match r.significant {
                Some(true) => versus.fg(Color::Green),
                Some(false) => versus.fg(Color::DarkGrey),
                None => versus,
            };
        }
        let mut cells = vec![
            Cell::new(&r.cohort),
            Cell::new(&r.trials).set_alignment(CellAlignment::Right),
            Cell::new(&r.main).set_alignment(CellAlignment::Right),
            versus,
        ];
        cells.extend(
            r.rest
                .iter()
                .map(|x| Cell::new(x).set_alignment(CellAlignment::Right)),
        );
        t.add_row(cells);
    }
    let _ = writeln!(out, "{t}");
    if let Some(legend) = legend(report) {
        let _ = writeln!(out, "{legend}");
    }
    if let Some((headers, rows)) = runtime_table(report) {
        let mut t = table_with_header(color, headers);
        for row in rows {
            let mut cells = Vec::new();
            for (i, x) in row.into_iter().enumerate() {
                let mut cell = Cell::new(&x);
                if i >= 2 {
                    cell = cell.set_alignment(CellAlignment::Right);
                }
                if i == 1 && color && x.contains('✗') {
                    cell = cell.fg(Color::Red);
                }
                cells.push(cell);
            }
            t.add_row(cells);
        }
        let _ = writeln!(out, "\n{RUNTIME_TITLE}\n{t}");
    }
    if let Some((headers, rows)) = crate::noise::noise_table(report) {
        let mut t = table_with_header(color, headers);
        for row in rows {
            t.add_row(row.into_iter().enumerate().map(|(i, x)| {
                let cell = Cell::new(&x);
                if i >= 1 {
                    cell.set_alignment(CellAlignment::Right)
                } else {
                    cell
                }
            }));
        }
        let _ = writeln!(out, "\n{}\n{t}", crate::noise::NOISE_TITLE);
    }
    out.push_str(&details(report));
    out
}

fn title(report: &Report) -> String {
    let experiments: Vec<&str> = report
        .sources
        .iter()
        .map(|s| s.experiment.as_str())
        .collect();
    let incomplete = if report.warnings.iter().any(|w| w.kind == "incomplete-run") {
        " · INCOMPLETE RUN (see the warnings)"
    } else {
        ""
    };
    format!(
        "rubyrace report: {} · baseline {} · grouped by {} · {} confidence intervals{incomplete}",
        experiments.join(", "),
        report.baseline,
        report.group_by.join(", "),
        report.confidence_label()
    )
}

/// A CPU rate in µs per second, in milliseconds of CPU per second.
pub(crate) fn cpu_rate(us_per_s: f64) -> String {
    format!("{:.1} ms/s", us_per_s / 1000.0)
}

/// The design of each results directory that is not the default, and for interleaved ones
/// how busy each cohort's servers were between their own slices.
pub(crate) fn design_lines(report: &Report) -> Vec<String> {
    let mut lines = Vec::new();
    for s in report.sources.iter().filter(|s| s.design != "blocks") {
        let idle: Vec<String> = report
            .cohorts
            .iter()
            .filter_map(|c| {
                let rate = c.cpu.idle_per_s.as_ref()?;
                Some(format!("{} {}", c.name, cpu_rate(rate.p50)))
            })
            .collect();
        let mut line = format!("Design of {}: {}.", s.dir, s.design);
        if !idle.is_empty() {
            line.push_str(&format!(
                " A trial's figures are its slices'; between them its server used (median CPU per second): {}.",
                idle.join(", ")
            ));
        }
        lines.push(line);
    }
    lines
}

/// Comparisons of every metric, the overhead, the precision advice and the warnings.
fn details(report: &Report) -> String {
    let mut out = String::new();
    for line in design_lines(report) {
        let _ = writeln!(out, "\n{line}");
    }
    if !report.comparisons.is_empty() {
        let _ = writeln!(
            out,
            "\nAgainst {} ({}):",
            report.baseline,
            method_words(report)
        );
        for c in &report.comparisons {
            let _ = writeln!(out, "  {:<28} {:<16} {}", c.cohort, c.metric, c.verdict);
        }
    }
    for c in &report.cohorts {
        if let Some(script) = &c.script {
            for (name, m) in &script.metrics {
                let _ = writeln!(
                    out,
                    "Metric {name} of {}: median {} [p10 {} – p90 {}], n={}",
                    c.name,
                    fmt_g(m.p50),
                    fmt_g(m.p10),
                    fmt_g(m.p90),
                    m.n
                );
            }
        }
    }
    if let Some(o) = &report.overhead {
        let _ = writeln!(
            out,
            "\nOverhead of {} over {}: {:+.1} µs per request [{:+.1} – {:+.1}] ({}, n={})",
            o.cohort, o.baseline, o.us_per_request, o.ci_low, o.ci_high, o.method, o.n
        );
    }
    let main = if report.workload == Workloads::Script {
        "wall"
    } else {
        "throughput"
    };
    for c in report.comparisons.iter().filter(|c| c.metric == main) {
        let advice = match c.needed_for_1pct {
            Some(n) if n > c.n => format!("about {n} {} would bring it to ±1%", unit(c)),
            _ => "already within ±1%".into(),
        };
        let _ = writeln!(
            out,
            "Precision: {} vs {}: the CI half-width is ±{:.1}%; {advice}.",
            c.cohort, c.baseline, c.half_width_pct
        );
    }
    if !report.warnings.is_empty() {
        let _ = writeln!(out, "\nWarnings:");
        for w in &report.warnings {
            match &w.cohort {
                Some(c) => {
                    let _ = writeln!(out, "  ! [{}] {}: {}", w.kind, c, w.message);
                }
                None => {
                    let _ = writeln!(out, "  ! [{}] {}", w.kind, w.message);
                }
            }
        }
    }
    out
}

fn unit(c: &Comparison) -> &'static str {
    if c.method == "paired" {
        "blocks"
    } else {
        "trials per cohort"
    }
}

/// Which statistic each column of the summary table is: the medians there and the ratio
/// against the baseline are different statistics (1188/700 is 1.70; the paired ratio of the
/// same trials was 1.63). `None` without comparisons.
/// Which statistic the "vs baseline" ratio of this report's comparisons is.
pub(crate) fn ratio_statistic(report: &Report) -> &'static str {
    let paired = report.comparisons.iter().any(|c| c.method == "paired");
    let unpaired = report.comparisons.iter().any(|c| c.method == "unpaired");
    match (paired, unpaired) {
        (true, false) => "the geometric mean of the per-block ratios",
        (false, true) => "the ratio of the geometric means",
        _ => "the geometric mean of the per-block ratios (paired) or the ratio of the geometric means (unpaired)",
    }
}

fn legend(report: &Report) -> Option<String> {
    if report.comparisons.is_empty() {
        return None;
    }
    let ratio = ratio_statistic(report);
    let first = if report.workload == Workloads::Script {
        "wall: the median of the trials"
    } else {
        "req/s: the median of the trials, with their p10–p90"
    };
    Some(format!(
        "{first}; vs baseline: {ratio}, with its {} interval (not the ratio of the medians)",
        report.confidence_label()
    ))
}

fn method_words(report: &Report) -> String {
    let paired = report.comparisons.iter().any(|c| c.method == "paired");
    let unpaired = report.comparisons.iter().any(|c| c.method == "unpaired");
    match (paired, unpaired) {
        (true, false) => {
            "paired by block: geometric mean of per-block ratios, t interval, Wilcoxon signed-rank"
                .into()
        }
        (false, true) => "unpaired: bootstrap interval, Mann–Whitney U".into(),
        _ => "paired by block where possible, unpaired otherwise".into(),
    }
}

/// Text for a Markdown table cell: `&` first (so `&lt;` in a name stays literal), then the
/// table's `|`, and `<`, `>` that GitHub would read as HTML.
fn md_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('|', "\\|")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Markdown: a table ready to paste into a GitHub issue or a Ruby bug report.
pub fn markdown(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "**{}**\n", md_escape(&title(report)));
    let h = headers(report);
    let _ = writeln!(out, "| {} |", h.join(" | "));
    let _ = writeln!(
        out,
        "|{}",
        h.iter()
            .enumerate()
            .map(|(i, _)| if i == 0 || i == 3 {
                " --- |"
            } else {
                " ---: |"
            })
            .collect::<String>()
    );
    for r in rows(report) {
        let mut cells = vec![md_escape(&r.cohort), r.trials, r.main, md_escape(&r.versus)];
        cells.extend(r.rest);
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    if let Some(legend) = legend(report) {
        let _ = writeln!(out, "\n<sub>{}</sub>", md_escape(&legend));
    }
    if let Some((headers, rows)) = runtime_table(report) {
        let _ = writeln!(out, "\n{RUNTIME_TITLE}\n");
        let _ = writeln!(out, "| {} |", headers.join(" | "));
        let _ = writeln!(
            out,
            "|{}",
            (0..headers.len())
                .map(|i| if i < 2 { " --- |" } else { " ---: |" })
                .collect::<String>()
        );
        for row in rows {
            let cells: Vec<String> = row.iter().map(|c| md_escape(c)).collect();
            let _ = writeln!(out, "| {} |", cells.join(" | "));
        }
    }
    out.push_str(&crate::noise::noise_markdown(report, md_escape));
    let d = details(report);
    if !d.trim().is_empty() {
        let _ = writeln!(out, "\n<details><summary>Comparisons, precision and warnings</summary>\n\n```\n{}```\n</details>", d.trim_start());
    }
    let _ = writeln!(out, "\n<sub>{}</sub>", md_escape(&provenance(report)));
    out
}

fn provenance(report: &Report) -> String {
    let machines: Vec<String> = report
        .sources
        .iter()
        .flat_map(|s| s.machines.clone())
        .collect();
    format!(
        "rubyrace {} · {} · machine {}",
        env!("CARGO_PKG_VERSION"),
        report.command,
        machines.join(", ")
    )
}

/// CSV: one row per cohort and metric summary.
pub fn csv(report: &Report) -> anyhow::Result<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "cohort",
        "metric",
        "n",
        "mean",
        "sd",
        "cv",
        "min",
        "p10",
        "p50",
        "p90",
        "max",
        "ratio",
        "ci_low",
        "ci_high",
        "p_value",
        "significant",
        "method",
    ])?;
    for c in &report.cohorts {
        let mut metrics: Vec<(&str, &Option<Summary>)> = vec![
            ("throughput", &c.throughput),
            ("pss_end", &c.memory.pss_end),
            ("rss_end", &c.memory.rss_end),
            ("pss_peak", &c.memory.pss_peak),
            ("rss_peak", &c.memory.rss_peak),
            ("cpu_per_request", &c.cpu.per_request),
            ("cpu_user_per_request", &c.cpu.user_per_request),
            ("cpu_system_per_request", &c.cpu.system_per_request),
            ("error_rate", &c.error_rate),
        ];
        let lat = c.latency.as_ref();
        let lat50 = lat.and_then(|l| l.p50_across_trials.clone());
        let lat99 = lat.and_then(|l| l.p99_across_trials.clone());
        metrics.push(("latency_p50", &lat50));
        metrics.push(("latency_p99", &lat99));
        let script = c.script.clone().unwrap_or_default();
        metrics.push(("wall", &script.wall));
        metrics.push(("max_rss", &script.max_rss_bytes));
        for (name, s) in metrics {
            let Some(s) = s else { continue };
            let cmp = report.comparison(&c.name, name);
            let f = |v: f64| format!("{v}");
            w.write_record([
                c.name.clone(),
                name.to_string(),
                s.n.to_string(),
                f(s.mean),
                f(s.sd),
                f(s.cv),
                f(s.min),
                f(s.p10),
                f(s.p50),
                f(s.p90),
                f(s.max),
                cmp.map(|x| f(x.ratio)).unwrap_or_default(),
                cmp.map(|x| f(x.ci_low)).unwrap_or_default(),
                cmp.map(|x| f(x.ci_high)).unwrap_or_default(),
                cmp.and_then(|x| x.p_value).map(f).unwrap_or_default(),
                cmp.map(|x| x.significant.to_string()).unwrap_or_default(),
                cmp.map(|x| x.method.clone()).unwrap_or_default(),
            ])?;
        }
    }
    Ok(String::from_utf8(w.into_inner()?)?)
}

/// A benchstat name: no spaces (benchstat splits on them).
/// A name as one part of a Go benchmark name: no whitespace or control characters (they end
/// or break the line), no `/` (benchstat's sub-benchmark separator; shown as `∕`, U+2215),
/// and no trailing `-N` (benchstat reads it as GOMAXPROCS; a `_` is added after it).
fn bench_name(s: &str) -> String {
    let mut name: String = s
        .chars()
        .map(|c| match c {
            c if c.is_whitespace() || c.is_control() => '_',
            '/' => '∕',
            c => c,
        })
        .collect();
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits > 0 && name[..name.len() - digits].ends_with('-') {
        name.push('_');
    }
    name
}

/// Go benchmark format, one line per valid trial, for `benchstat`.
pub fn benchstat(report: &Report, trials: &[crate::input::TrialData]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "goos: linux");
    let experiments: Vec<&str> = report
        .sources
        .iter()
        .map(|s| s.experiment.as_str())
        .collect();
    let _ = writeln!(out, "pkg: rubyrace/{}", bench_name(&experiments.join("+")));
    if let Some(cpu) = trials.iter().find_map(|t| t.keys.get("cpu_model")) {
        let _ = writeln!(out, "cpu: {cpu}");
    }
    for cohort in &report.cohorts {
        for t in trials.iter().filter(|t| {
            t.status == lab::trial::TrialStatus::Valid
                && report.trials.iter().any(|p| {
                    p.cohort == cohort.name && p.trial_id == t.trial_id && p.source == t.source
                })
        }) {
            let mut line = format!(
                "Benchmark{}/cohort={} 1",
                if report.workload == Workloads::Script {
                    "Script"
                } else {
                    "Http"
                },
                bench_name(&cohort.name)
            );
            if let Some(rps) = t.requests_per_s {
                let _ = write!(line, " {:.0} ns/op {rps:.1} req/s", 1e9 / rps);
            }
            if let Some(w) = t.wall_s {
                let _ = write!(line, " {:.0} ns/op", w * 1e9);
            }
            if let Some(v) = t.latency_p99_us {
                let _ = write!(line, " {:.0} p99-ns", v * 1000.0);
            }
            if let Some(v) = t.pss_end {
                let _ = write!(line, " {v:.0} pss-B");
            }
            if let Some(v) = t.cpu_per_request {
                let _ = write!(line, " {:.0} cpu-ns/op", v * 1000.0);
            }
            let _ = writeln!(out, "{line}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 13 item 18: `&` was left as is (GitHub then reads `&lt;` in a label as `<`).
    #[test]
    fn markdown_cells_escape_ampersands_pipes_and_markup() {
        assert_eq!(md_escape("a & b"), "a &amp; b");
        assert_eq!(md_escape("&lt;b&gt;"), "&amp;lt;b&amp;gt;");
        assert_eq!(md_escape("x | <b>"), "x \\| &lt;b&gt;");
    }

    /// Issue 13 item 18: `/` split a cohort into sub-benchmarks, and a trailing `-4` was read
    /// as GOMAXPROCS by Go's benchstat.
    #[test]
    fn benchstat_names_keep_one_part_and_no_gomaxprocs_suffix() {
        assert_eq!(bench_name("/tmp/results run"), "∕tmp∕results_run");
        assert_eq!(bench_name("threads=puma-4"), "threads=puma-4_");
        assert_eq!(bench_name("a\nb\tc"), "a_b_c");
        assert_eq!(bench_name("x-y"), "x-y");
        assert_eq!(bench_name("v4"), "v4");
    }
}
