//! The charts' unit tests, and the report they draw (shared with the HTML and PNG tests).

#![allow(unused_imports)]
use super::*;
use super::{latency::*, matrix::*, memory::*, spread::*, svg::*, trial_order::*};
use crate::format::{escape, fmt_num, fmt_sig, micros};
use crate::model::*;
use std::collections::BTreeMap;
use std::fmt::Write as _;

fn summary(values: &[f64]) -> Summary {
    Summary::of(values).unwrap()
}

pub(crate) fn cohort(name: &str, rate: f64) -> Cohort {
    Cohort {
        name: name.to_string(),
        key: BTreeMap::new(),
        valid: 3,
        invalid: 1,
        failed: 0,
        throughput: Some(summary(&[rate * 0.98, rate, rate * 1.03])),
        latency: Some(Latency {
            p50: 900.0,
            p90: 1500.0,
            p99: 4000.0,
            p99_9: 9000.0,
            max: 20000.0,
            curve: vec![
                (0.0, 300.0),
                (50.0, 900.0),
                (90.0, 1500.0),
                (99.0, 4000.0),
                (99.9, 9000.0),
                (100.0, 20000.0),
            ],
            p50_across_trials: None,
            p99_across_trials: None,
        }),
        memory: Memory {
            pss_end: Some(summary(&[100.0 * MIB, 110.0 * MIB])),
            rss_end: Some(summary(&[180.0 * MIB, 190.0 * MIB])),
            ..Default::default()
        },
        cpu: Cpu::default(),
        error_rate: None,
        script: None,
        runtime: None,
        verified: vec![],
        outliers: vec![],
        noise: None,
    }
}

fn trial(cohort: &str, id: usize, seq: usize, status: &str, rate: f64) -> TrialPoint {
    TrialPoint {
        cohort: cohort.to_string(),
        source: 0,
        trial_id: id,
        block: (seq / 3) as u32,
        sequence: seq,
        status: status.to_string(),
        requests_per_s: Some(rate),
        pss_end_bytes: None,
        wall_s: None,
    }
}

pub(crate) const HOSTILE: &str = "<script>alert(1)</script>\" onload=\"x";

pub(crate) fn report() -> Report {
    let names = ["base", HOSTILE, "third & last"];
    let mut trials = Vec::new();
    for (k, name) in names.iter().enumerate() {
        for block in 0..3 {
            let seq = block * 3 + k;
            trials.push(trial(
                name,
                seq + 1,
                seq,
                if block == 2 && k == 1 {
                    "invalid"
                } else {
                    "valid"
                },
                1000.0 + 100.0 * k as f64,
            ));
        }
    }
    Report {
        schema: REPORT_SCHEMA.to_string(),
        command: "rubyrace report results/ --label '<b>x</b>'".to_string(),
        confidence: 0.95,
        sources: vec![Source {
            dir: "results/<dir>".to_string(),
            experiment: "exp & co".to_string(),
            created_at: "2026-01-01T00:00:00Z".to_string(),
            machines: vec!["host".to_string()],
            trials: 9,
            commands: vec!["rubyrace run exp.toml".to_string()],
            smoke: false,
            design: "blocks".to_string(),
            doctor: vec![],
            writer: None,
        }],
        workload: crate::model::Workloads::Http,
        group_by: vec!["label".to_string()],
        baseline: "base".to_string(),
        cohorts: names
            .iter()
            .enumerate()
            .map(|(k, n)| cohort(n, 1000.0 + 100.0 * k as f64))
            .collect(),
        comparisons: vec![],
        overhead: None,
        hosts: None,
        warnings: vec![],
        trials,
        matrix: Some(DotMatrix {
            row_key: "ruby".to_string(),
            col_key: "yjit<".to_string(),
            rows: vec!["3.3".to_string(), HOSTILE.to_string()],
            cols: vec!["off".to_string(), "on".to_string()],
            cells: vec![
                vec![
                    Some(("base".to_string(), 1000.0)),
                    Some(("third & last".to_string(), 1200.0)),
                ],
                vec![Some((HOSTILE.to_string(), 1100.0)), None],
            ],
            unit: "requests/s".to_string(),
        }),
        environment: vec![],
        profiles: vec![],
        frame_changes: vec![],
        sparse_frames: vec![],
        steps: vec![],
    }
}

fn count(svg: &str, needle: &str) -> usize {
    svg.matches(needle).count()
}

#[test]
fn nice_ticks_are_nice() {
    assert_eq!(nice_ticks(0.0, 1.0, 6), vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
    assert_eq!(
        nice_ticks(0.0, 2374.0, 6),
        vec![0.0, 500.0, 1000.0, 1500.0, 2000.0, 2500.0]
    );
    assert_eq!(
        nice_ticks(0.0, 100.0, 6),
        vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]
    );
    let t = nice_ticks(0.0, 0.37, 5);
    assert_eq!(t, vec![0.0, 0.1, 0.2, 0.3, 0.4]);
    // Every step is 1, 2 or 5 × 10^n and the ticks cover the range.
    for hi in [0.003, 1.7, 9.9, 13.0, 987.0, 31_234.0, 2.5e6] {
        let t = nice_ticks(0.0, hi, 6);
        assert_eq!(t[0], 0.0);
        assert!(*t.last().unwrap() >= hi, "{hi}: {t:?}");
        let step = t[1] - t[0];
        let mantissa = step / 10f64.powf(step.log10().floor());
        assert!(
            [1.0, 2.0, 5.0].iter().any(|m| (mantissa - m).abs() < 1e-6),
            "{hi}: step {step}"
        );
        assert!(t.len() >= 3 && t.len() <= 12, "{hi}: {t:?}");
    }
    // Degenerate ranges still give an axis.
    assert_eq!(nice_ticks(0.0, 0.0, 5).first(), Some(&0.0));
    assert!(nice_ticks(0.0, f64::NAN, 5).len() >= 2);
}

#[test]
fn nines_axis() {
    assert!((nines(90.0) - 1.0).abs() < 1e-12);
    assert!((nines(99.0) - 2.0).abs() < 1e-12);
    assert!((nines(99.9) - 3.0).abs() < 1e-9);
    assert_eq!(nines(0.0), 0.0);
}

#[test]
fn jitter_is_deterministic_and_bounded() {
    for id in 0..1000 {
        let j = jitter(1, id);
        assert!((-1.0..1.0).contains(&j));
        assert_eq!(j, jitter(1, id));
    }
    assert_ne!(jitter(0, 1), jitter(0, 2));
}

#[test]
fn every_chart_is_marked_and_counts_its_series() {
    let r = report();
    let charts = all(&r);
    let names: Vec<&str> = charts.iter().map(|c| c.name).collect();
    assert_eq!(
        names,
        ["throughput", "matrix", "latency", "memory", "trial-order"]
    );
    for chart in &charts {
        assert!(chart
            .svg
            .starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\""));
        assert!(chart
            .svg
            .contains(&format!("data-chart=\"{}\"", chart.name)));
        assert!(chart.svg.contains("<title id="));
        assert!(chart.svg.contains("<desc id="));
        assert!(chart.svg.contains("font-family=\"system-ui, sans-serif\""));
        // Three cohorts; the matrix has three filled cells of the three cohorts.
        let expected = 3;
        assert_eq!(
            count(&chart.svg, " data-series=\""),
            expected,
            "{}",
            chart.name
        );
        assert!(!chart.title.is_empty());
    }
    // No wall chart without script times; a wall chart with them.
    assert!(wall(&r).is_none());
    let mut s = r.clone();
    s.workload = crate::model::Workloads::Script;
    for c in &mut s.cohorts {
        c.throughput = None;
        c.script = Some(ScriptTimes {
            wall: Some(summary(&[1.2, 1.3, 1.25])),
            ..Default::default()
        });
    }
    for t in &mut s.trials {
        t.wall_s = t.requests_per_s.map(|r| r / 1000.0);
        t.requests_per_s = None;
    }
    let svg = wall(&s).unwrap();
    assert_eq!(count(&svg, " data-series=\""), 3);
    assert!(svg.contains("data-chart=\"wall\""));
    assert!(throughput(&s).is_none());
    let order = trial_order(&s).unwrap();
    assert!(order.contains("wall time, seconds"));
}

#[test]
fn hostile_labels_are_escaped_in_text_and_attributes() {
    let r = report();
    for chart in all(&r) {
        assert!(
            !chart.svg.contains("<script"),
            "{}: raw <script",
            chart.name
        );
        assert!(
            !chart.svg.contains("\" onload=\""),
            "{}: attribute broken out",
            chart.name
        );
        assert!(
            chart
                .svg
                .contains("&lt;script&gt;alert(1)&lt;/script&gt;&quot; onload=&quot;x"),
            "{}",
            chart.name
        );
        assert!(
            !chart.svg.contains("third & last"),
            "{}: raw ampersand",
            chart.name
        );
    }
    // The escaped name is the attribute's whole value.
    let t = throughput(&r).unwrap();
    assert!(
        t.contains("data-series=\"&lt;script&gt;alert(1)&lt;/script&gt;&quot; onload=&quot;x\"")
    );
    // The matrix escapes its keys and row labels too.
    let m = matrix(&r).unwrap();
    assert!(m.contains("yjit&lt; →"));
}

/// (data-scale, data-min, the axis group's text) of every axis of a chart.
fn axes(svg: &str) -> Vec<(String, String, String)> {
    svg.split("<g class=\"axis\"")
        .skip(1)
        .map(|rest| {
            let attr = |name: &str| {
                rest.split(&format!("{name}=\""))
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
                    .to_string()
            };
            let body = rest.split("</g>").next().unwrap().to_string();
            (attr("data-scale"), attr("data-min"), body)
        })
        .collect()
}

#[test]
fn value_axes_start_at_zero_unless_labelled_log() {
    let r = report();
    for chart in all(&r) {
        let axes = axes(&chart.svg);
        if chart.name == "matrix" {
            assert!(axes.is_empty());
            continue;
        }
        assert!(!axes.is_empty(), "{}", chart.name);
        for (kind, min, body) in axes {
            match kind.as_str() {
                "linear" | "nines" => {
                    assert_eq!(min, "0", "{}", chart.name);
                    assert!(
                        body.contains(">0</text>") || body.contains(">0%</text>"),
                        "{}: no 0 tick",
                        chart.name
                    );
                }
                "log" => assert!(
                    body.contains("log scale"),
                    "{}: a log axis must say so",
                    chart.name
                ),
                other => panic!("{}: axis kind {other}", chart.name),
            }
        }
    }
    // Throughput of ~1,000–1,200 req/s: the axis runs 0 to a nice number above the max.
    let t = throughput(&r).unwrap();
    assert!(
        t.contains("data-axis=\"x\" data-scale=\"linear\" data-min=\"0\" data-max=\"1400\""),
        "{t}"
    );
    // Latency of 300 µs to 9 ms: a log axis, labelled, with 1-2-5 ticks.
    let l = latency(&r).unwrap();
    assert!(
        l.contains("data-axis=\"y\" data-scale=\"log\" data-min=\"0.2\" data-max=\"10\""),
        "{l}"
    );
    assert!(l.contains("latency (ms, log scale)"));
    // A narrow latency range stays linear from zero.
    let mut narrow = r.clone();
    for c in &mut narrow.cohorts {
        c.latency.as_mut().unwrap().curve = vec![(0.0, 800.0), (50.0, 900.0), (99.0, 1500.0)];
    }
    let l = latency(&narrow).unwrap();
    assert!(
        l.contains("data-axis=\"y\" data-scale=\"linear\" data-min=\"0\""),
        "{l}"
    );
    assert!(l.contains("latency (µs), from zero"));
}

#[test]
fn log_ticks_are_one_two_five() {
    assert_eq!(log_ticks(0.2, 10.0), vec![0.2, 0.5, 1.0, 2.0, 5.0, 10.0]);
    assert_eq!(
        log_ticks(1.0, 100_000.0),
        vec![1.0, 10.0, 100.0, 1000.0, 10_000.0, 100_000.0]
    );
    assert_eq!(log_extent(0.31, 9.0), (0.2, 10.0));
    assert_eq!(log_extent(1.0, 1.0), (1.0, 10.0));
}

#[test]
fn invalid_trials_are_hollow() {
    let r = report();
    let t = throughput(&r).unwrap();
    assert_eq!(
        count(&t, &format!("fill=\"#ffffff\" stroke=\"{INVALID}\"")),
        2,
        "one trial, one legend entry"
    );
    let o = trial_order(&r).unwrap();
    assert_eq!(
        count(&o, &format!("fill=\"#ffffff\" stroke=\"{INVALID}\"")),
        2
    );
}

#[test]
fn empty_report_draws_nothing() {
    let mut r = report();
    r.cohorts.clear();
    r.trials.clear();
    r.matrix = None;
    assert!(all(&r).is_empty());
}

#[test]
fn labels_escape_their_text_and_tooltip_and_keep_one_attribute_order() {
    let mut b = String::new();
    label(10.0, 20.5)
        .end()
        .size(12.5)
        .bold(true)
        .muted()
        .tooltip(HOSTILE)
        .draw(&mut b, "a < b & 'c'");
    assert_eq!(
        b,
        format!(
            "<text x=\"10\" y=\"20.5\" text-anchor=\"end\" font-size=\"12.5\" font-weight=\"600\" \
             fill=\"{MUTED}\"><title>{}</title>a &lt; b &amp; &#39;c&#39;</text>",
            escape(HOSTILE)
        )
    );
    let mut b = String::new();
    label(18.0, 100.0)
        .rotated()
        .middle()
        .draw(&mut b, "</text><script>");
    assert_eq!(
        b,
        "<text transform=\"translate(18 100) rotate(-90)\" text-anchor=\"middle\">\
         &lt;/text&gt;&lt;script&gt;</text>"
    );
    let mut b = String::new();
    open_series(&mut b, HOSTILE, "t\"ip");
    assert!(b.starts_with("<g data-series=\"&lt;script&gt;"), "{b}");
    assert!(b.ends_with("<title>t&quot;ip</title>"), "{b}");
}
