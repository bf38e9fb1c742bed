//! What the text formats share: the summary table's columns and rows (the terminal table
//! and Markdown print the same cells), the probe's runtime table, the title, the comparisons
//! in words, the legend and the design's lines (the HTML page uses the last three too).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::format::*;

use crate::model::{Comparison, Report, Summary, Workloads};

/// The main column of a cohort: median with its p10–p90 range.
pub(crate) fn median_range(s: &Option<Summary>, f: fn(f64) -> String) -> String {
    match s {
        Some(s) if s.n > 1 => format!("{} [{}–{}]", f(s.p50), f(s.p10), f(s.p90)),
        Some(s) => f(s.p50),
        None => dash(),
    }
}

pub(crate) fn median(s: &Option<Summary>, f: fn(f64) -> String) -> String {
    s.as_ref().map(|s| f(s.p50)).unwrap_or_else(dash)
}

/// One row per cohort: what the summary table shows.
pub(crate) struct Row {
    pub(crate) cohort: String,
    pub(crate) trials: String,
    pub(crate) main: String,
    pub(crate) versus: String,
    pub(crate) significant: Option<bool>,
    pub(crate) rest: Vec<String>,
}

pub(crate) fn headers(report: &Report) -> Vec<&'static str> {
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

pub(crate) fn rows(report: &Report) -> Vec<Row> {
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

pub(crate) const RUNTIME_TITLE: &str = "In the server (ruby/probe.rb; per trial over the measured phase, summed over processes; medians):";

pub(crate) fn title(report: &Report) -> String {
    let experiments: Vec<&str> = report
        .sources
        .iter()
        .map(|s| s.experiment.as_str())
        .collect();
    let incomplete = if report.sources.iter().any(|s| s.writer.is_some()) {
        " · RUN IN PROGRESS (see the warnings)"
    } else if report.warnings.iter().any(|w| w.kind == "incomplete-run") {
        " · INCOMPLETE RUN (see the warnings)"
    } else {
        ""
    };
    format!(
        "rubyrace report: {} · baseline {} · grouped by {} · {} confidence intervals{incomplete}",
        experiments.join(", "),
        report.baseline,
        report.group_by.join(", "),
        report.interval_label()
    )
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
                let share = c
                    .cpu
                    .idle_share
                    .as_ref()
                    .map(|s| format!(" ({:.1}% of its charged CPU)", 100.0 * s.p50))
                    .unwrap_or_default();
                Some(format!("{} {}{share}", c.name, cpu_rate(rate.p50)))
            })
            .collect();
        let mut line = format!("Design of {}: {}.", s.dir, s.design);
        if !idle.is_empty() {
            line.push_str(&format!(
                " A trial's figures are its slices'; outside them its server used (median CPU per second): {}.",
                idle.join(", ")
            ));
        }
        line.push_str(" Memory is compared by USS: the servers ran side by side, and a process's PSS counts a share of the pages it shares with them.");
        lines.push(line);
    }
    lines
}

/// Comparisons of every metric, the overhead, the precision advice and the warnings.
pub(crate) fn details(report: &Report) -> String {
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
        let width = report
            .comparisons
            .iter()
            .map(|c| c.metric.chars().count())
            .max()
            .unwrap_or(0)
            .max(16);
        for c in &report.comparisons {
            let _ = writeln!(out, "  {:<28} {:<width$} {}", c.cohort, c.metric, c.verdict);
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
            _ if c.half_width_pct <= 1.0 => "already within ±1%".into(),
            Some(n) => format!("about {n} {} would bring it to ±1% in 80% of runs", unit(c)),
            None => "±1% is out of reach at this spread".into(),
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

pub(crate) fn unit(c: &Comparison) -> &'static str {
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

pub(crate) fn legend(report: &Report) -> Option<String> {
    if report.comparisons.is_empty() {
        return None;
    }
    let ratio = ratio_statistic(report);
    let first = if report.workload == Workloads::Script {
        "wall: the median of the trials"
    } else {
        "req/s: the median of the trials, with their p10–p90"
    };
    let p99 = p99_words(report)
        .map(|w| format!("; {w}"))
        .unwrap_or_default();
    Some(format!(
        "{first}; vs baseline: {ratio}, with its {} interval (not the ratio of the medians); {}{p99}",
        report.interval_label(),
        verdict_rule(report)
    ))
}

/// The two p99s of an HTTP report: the table's, of the merged histogram, and the
/// comparison's, of the per-trial p99s.
pub(crate) fn p99_words(report: &Report) -> Option<&'static str> {
    (report.workload != Workloads::Script).then_some(
        "p99: the merged histogram's, while its comparison is the geometric mean of the per-trial p99 ratios (the two can disagree)",
    )
}

/// Which figure decides a verdict, and over what its level holds: the interval shown
/// (significant when it excludes 1), simultaneous over the cohorts within each metric, so
/// the main metric's verdicts are held to 5% together, while a clean A/A report shows
/// *some* significant metric among the five in 10–17% of runs (the statistics audit,
/// docs/methodology.md). Holding the level over metrics × cohorts was rejected: the metrics
/// are strongly correlated (throughput, CPU per request and p50 move together), so it
/// would cost the main verdict its power for a family that is not five independent
/// questions (docs/methodology.md). The rank test's p-value is a check beside it.
pub(crate) fn verdict_rule(report: &Report) -> String {
    let metrics: BTreeSet<&str> = report
        .comparisons
        .iter()
        .map(|c| c.metric.as_str())
        .collect();
    let main = if report.workload == Workloads::Script {
        "wall"
    } else {
        "throughput"
    };
    let family = report
        .comparisons
        .iter()
        .max_by_key(|c| c.family_size)
        .filter(|c| c.family_size > 1)
        .map(|c| {
            format!(
                "; with {} cohorts each interval is {} (Bonferroni), so they hold together",
                c.family_size,
                crate::format::confidence_text(c.confidence)
            )
        })
        .unwrap_or_default();
    format!(
        "the verdict is read off the interval shown (significant when it excludes 1), never off the rank test's p-value, which is a check beside it{family}; the level holds within each metric, not across the {} metrics: the {main} line is the headline, and each other metric is a question of its own at 5%",
        metrics.len()
    )
}

pub(crate) fn method_words(report: &Report) -> String {
    let paired = report.comparisons.iter().any(|c| c.method == "paired");
    let unpaired = report.comparisons.iter().any(|c| c.method == "unpaired");
    match (paired, unpaired) {
        (true, false) => {
            "paired by block: geometric mean of per-block ratios, t interval widened for dependence, Wilcoxon signed-rank as a check"
                .into()
        }
        (false, true) => "unpaired: bootstrap interval, Mann–Whitney U as a check".into(),
        _ => "paired by block where possible, unpaired otherwise".into(),
    }
}

/// The title of `profile_table`, in the profiles' unit (request or script run).
pub(crate) fn profile_title(report: &Report) -> String {
    let unit = report
        .profiles
        .first()
        .map_or("request", |p| p.unit.as_str());
    let pairing = if report.frame_changes.iter().all(|c| c.method == "paired") {
        "paired by block"
    } else {
        "unpaired where the trials are from different runs"
    };
    format!("Where the time went (profiles; self time per {unit} against the baseline, {pairing}, Holm over frames; the HTML report has the flame graphs):")
}

/// What the profilers cost, for the text formats: each profile's profiled ÷ measured
/// throughput (median and range over its trials), or that the measured trials were profiled.
pub(crate) fn profile_cost_line(report: &Report) -> Option<String> {
    if report.profiles.is_empty() {
        return None;
    }
    if report.profiles.iter().any(|p| p.phase == "measured") {
        return Some(
            "The measured trials were profiled (profile_measured): the figures above include \
             the profilers' cost."
                .into(),
        );
    }
    // The profilers of a trial run together in its profiled phase: one cost per cohort.
    let mut costs: Vec<String> = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for p in &report.profiles {
        let Some(s) = p.overhead.as_ref() else {
            continue;
        };
        if seen.contains(&p.cohort.as_str()) {
            continue;
        }
        seen.push(&p.cohort);
        let together: Vec<&str> = report
            .profiles
            .iter()
            .filter(|q| q.cohort == p.cohort && q.overhead.is_some())
            .map(|q| q.profiler.as_str())
            .collect();
        costs.push(format!(
            "{} ({}) {:.3} [{:.3}–{:.3}, {}]",
            p.cohort,
            together.join(" + "),
            s.median(),
            s.min,
            s.max,
            units::count(s.n, "trial")
        ));
    }
    (!costs.is_empty()).then(|| {
        format!(
            "Profilers' cost (profiled-phase ÷ measured throughput of the same trial; the \
             figures above come from the unprofiled phases): {}",
            costs.join("; ")
        )
    })
}

/// The profiled cohorts' significant changes in self time per request against the
/// baseline, one row per frame (or one row saying none changed), for the text formats.
pub fn profile_table(report: &Report) -> Option<(Vec<&'static str>, Vec<Vec<String>>)> {
    if report.frame_changes.is_empty() && report.sparse_frames.is_empty() {
        return None;
    }
    let mut rows = Vec::new();
    let mut seen: Vec<(&str, &str)> = Vec::new();
    let cohorts = report
        .frame_changes
        .iter()
        .map(|c| (c.cohort.as_str(), c.profiler.as_str()))
        .chain(
            report
                .sparse_frames
                .iter()
                .map(|s| (s.cohort.as_str(), s.profiler.as_str())),
        );
    for (cohort, profiler) in cohorts {
        if seen.contains(&(cohort, profiler)) {
            continue;
        }
        seen.push((cohort, profiler));
        let mut changed: Vec<&crate::model::FrameChange> = report
            .frame_changes
            .iter()
            .filter(|x| {
                x.measure == "self" && x.cohort == cohort && x.profiler == profiler && x.significant
            })
            .collect();
        changed.sort_by(|a, b| {
            let d = |x: &crate::model::FrameChange| {
                (x.cohort_us_per_unit - x.baseline_us_per_unit).abs()
            };
            d(b).total_cmp(&d(a))
        });
        let tested = report
            .frame_changes
            .iter()
            .filter(|x| x.measure == "self" && x.cohort == cohort && x.profiler == profiler)
            .count();
        let sparse = report
            .sparse_frames
            .iter()
            .find(|s| s.cohort == cohort && s.profiler == profiler);
        let lacking = sparse.map_or_else(String::new, |s| {
            format!("; {} more lacked samples (below)", s.frames)
        });
        if changed.is_empty() {
            let none = if tested == 0 {
                format!(
                    "~ no frame has the {} pooled self samples to be tested: profile longer{}",
                    crate::model::MIN_FRAME_SAMPLES,
                    if sparse.is_some() { " (below)" } else { "" }
                )
            } else {
                format!("~ none of {tested} frames changed significantly{lacking}")
            };
            rows.push(vec![
                cohort.to_string(),
                profiler.to_string(),
                none,
                String::new(),
                String::new(),
                String::new(),
            ]);
        } else if let Some(s) = sparse {
            rows.push(vec![
                cohort.to_string(),
                profiler.to_string(),
                format!("~ {} frames lacked samples (below)", s.frames),
                String::new(),
                String::new(),
                String::new(),
            ]);
        }
        for x in changed {
            rows.push(vec![
                x.cohort.clone(),
                x.profiler.clone(),
                x.frame.clone(),
                micros(x.baseline_us_per_unit),
                micros(x.cohort_us_per_unit),
                x.verdict.clone(),
            ]);
        }
    }
    Some((
        vec![
            "cohort", "profiler", "frame", "baseline", "cohort", "change",
        ],
        rows,
    ))
}

/// For the text formats: per cohort and profiler whose frames lacked samples, how much
/// longer or faster to profile for them to be tested.
pub(crate) fn sparse_lines(report: &Report) -> Vec<String> {
    report
        .sparse_frames
        .iter()
        .map(|s| {
            format!(
                "Too few samples, {} against {} ({}): {}.",
                s.cohort, s.baseline, s.profiler, s.advice
            )
        })
        .collect()
}

/// The title of `steps_table`.
pub const STEPS_TITLE: &str = "Scenario steps (per cohort: attempts and failures summed over the valid trials; p50 and p99 latency from each step's intended send time, medians over the trials):";

/// The scenario steps of every cohort. None without a scenario.
pub fn steps_table(report: &Report) -> Option<(Vec<&'static str>, Vec<Vec<String>>)> {
    if report.steps.is_empty() {
        return None;
    }
    let headers = vec![
        "cohort", "scenario", "step", "requests", "failed", "p50", "p99",
    ];
    let rows = report
        .steps
        .iter()
        .map(|s| {
            let latency = |v: Option<f64>| v.map_or_else(|| "-".to_string(), units::micros);
            vec![
                s.cohort.clone(),
                s.scenario.clone(),
                s.step.clone(),
                s.requests.to_string(),
                s.failures.to_string(),
                latency(s.p50_us),
                latency(s.p99_us),
            ]
        })
        .collect();
    Some((headers, rows))
}

pub const HOSTS_TITLE: &str = "Hosts (each block ran on one host; a ratio is the median over the host's blocks of the cohort's value over the baseline's in the same block):";

/// The per-host table of a run over several hosts.
pub fn hosts_table(report: &Report) -> Option<(Vec<&'static str>, Vec<Vec<String>>)> {
    let h = report.hosts.as_ref()?;
    let figure = |v: f64| {
        if h.metric == "wall" {
            crate::format::seconds(v)
        } else {
            crate::format::rate(v)
        }
    };
    // `load = "separate"`: where each host's load came from, and the round trip to it.
    let separate = h.rows.iter().any(|r| !r.load_hosts.is_empty());
    // A fleet whose attempts failed: each host's failed attempts.
    let failed = h.rows.iter().any(|r| !r.failed_attempts.is_empty());
    let rows = h
        .rows
        .iter()
        .map(|r| {
            let ratios: Vec<String> = h
                .cohorts
                .iter()
                .zip(&r.ratios)
                .map(|(c, x)| format!("{c} {}", x.map_or("–".into(), |x| format!("×{x:.3}"))))
                .collect();
            let mut row = vec![
                r.host.clone(),
                r.machine.clone(),
                r.blocks.to_string(),
                r.trials.to_string(),
                r.baseline_median.map_or("–".into(), figure),
                ratios.join("; "),
            ];
            if separate {
                row.push(match r.load_rtt_us {
                    Some(rtt) => format!("{} · RTT {rtt:.0} µs", r.load_hosts.join(", ")),
                    None => r.load_hosts.join(", "),
                });
            }
            if failed {
                row.push(if r.failed_attempts.is_empty() {
                    "0".into()
                } else {
                    format!(
                        "{} ({})",
                        r.failed_attempts.len(),
                        r.failed_attempts.join(", ")
                    )
                });
            }
            row
        })
        .collect();
    let mut header = vec![
        "host",
        "CPU · kernel",
        "blocks",
        "trials",
        "baseline median",
        "ratios against the baseline",
    ];
    if separate {
        header.push("load from");
    }
    if failed {
        header.push("failed attempts");
    }
    Some((header, rows))
}
