//! End-to-end tests of `rubyrace report` and `rubyrace compare` on a real results directory:
//! a small real experiment (system Ruby, Puma, the bundled Rack app, two configurations in
//! randomized blocks) is run once by the real binary, then every format is produced from
//! it and checked.

use std::path::PathBuf;
use std::time::Duration;

use crate::support::shared::fixture;
use crate::support::{spawn, Run, TempDir};
use serde_json::Value;

/// The results directory of one real experiment, shared by the tests of this file: made
/// once per test run.
fn results() -> PathBuf {
    fixture("report", |dir| {
        let file = dir.join("experiment.toml");
        std::fs::write(
            &file,
            r#"
name = "report-test"
seed = 4
batches = 3

[settings]
app = "rack-hello"
threads = 2
warmup = "300ms"
duration = "1s"

[matrix]
connections = [{ label = "one <b>connection</b>", value = 1 }, { label = "four", value = 4 }]
"#,
        )
        .unwrap();
        let out = dir.join("results");
        let run = spawn(&["run", file.to_str().unwrap(), "-o", out.to_str().unwrap()])
            .wait(Duration::from_secs(120));
        assert_eq!(run.code(), Some(0), "{run:?}");
    })
    .join("results")
}

fn report(extra: &[&str]) -> Run {
    let dir = results().to_str().unwrap().to_string();
    let mut args = vec!["report".to_string(), dir];
    args.extend(extra.iter().map(|s| s.to_string()));
    let run = spawn(&args).wait(Duration::from_secs(60));
    assert_eq!(run.code(), Some(0), "{run:?}");
    run
}

#[test]
fn the_table_compares_with_the_baseline_and_warns() {
    let run = report(&[]);
    let out = &run.stdout;
    assert!(
        out.starts_with(
            "rubyrace report: report-test · baseline one <b>connection</b> · grouped by label"
        ),
        "{out}"
    );
    assert!(!out.contains("\u{1b}["), "colours when piped: {out}");
    let four = out
        .lines()
        .find(|l| l.contains(" four "))
        .expect("a row for four");
    // Either a verdict with a ratio, or an explicit "no significant difference": never blank.
    assert!(four.contains('×'), "{four}");
    assert!(
        out.contains("Against one <b>connection</b> (paired by block"),
        "{out}"
    );
    // Two configurations are interleaved by default: memory is compared by USS, and CPU
    // per request also with the CPU outside the recorded slices charged.
    for metric in [
        "throughput",
        "latency_p50",
        "latency_p99",
        "uss_end",
        "cpu_per_request",
        "cpu_per_request_with_idle",
    ] {
        assert!(out.contains(metric), "{metric} missing: {out}");
    }
    assert!(
        out.contains("Precision: four vs one <b>connection</b>: the CI half-width is ±"),
        "{out}"
    );
    // The legend says which figure decides the verdict.
    assert!(
        out.contains("the verdict is read off the interval shown"),
        "{out}"
    );
}

#[test]
fn json_follows_the_schema_and_pairs_by_block() {
    let run = report(&["--format", "json"]);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["schema"], "rubyrace.report/1");
    assert_eq!(v["baseline"], "one <b>connection</b>");
    let cohorts = v["cohorts"].as_array().unwrap();
    assert_eq!(cohorts.len(), 2);
    for c in cohorts {
        assert_eq!(c["valid"], 3, "{c}");
        let t = &c["throughput"];
        assert_eq!(t["n"], 3);
        assert!(t["p10"].as_f64().unwrap() <= t["p50"].as_f64().unwrap());
        assert!(t["p50"].as_f64().unwrap() <= t["p90"].as_f64().unwrap());
        let lat = &c["latency"];
        assert!(lat["p50"].as_f64().unwrap() > 0.0);
        assert!(lat["p99"].as_f64().unwrap() >= lat["p50"].as_f64().unwrap());
        assert_eq!(lat["curve"].as_array().unwrap().len(), 12);
        assert!(c["memory"]["pss_end"]["p50"].as_f64().unwrap() > 1e6);
        assert!(c["cpu"]["per_request"]["p50"].as_f64().unwrap() > 0.0);
    }
    let comparisons = v["comparisons"].as_array().unwrap();
    assert_eq!(comparisons.len(), 6);
    for c in comparisons {
        assert_eq!(c["method"], "paired", "{c}");
        assert_eq!(c["n"], 3);
        assert_eq!(c["test"], "wilcoxon-signed-rank");
        let (lo, r, hi) = (
            c["ci_low"].as_f64().unwrap(),
            c["ratio"].as_f64().unwrap(),
            c["ci_high"].as_f64().unwrap(),
        );
        assert!(lo <= r && r <= hi, "{c}");
        // The verdict is the interval's (issue 47), whatever the rank test beside it says:
        // with 3 blocks its smallest two-sided p is 0.25.
        let excludes_one = lo > 1.0 || hi < 1.0;
        assert_eq!(c["significant"], excludes_one, "{c}");
        assert_eq!(c["testable"], true, "{c}");
        assert_eq!(c["confidence"], 0.95, "{c}");
        // 0.25 with three nonzero differences; 0.5 when a block's two figures are equal
        // (a memory figure can be: its zero difference is dropped).
        let min_p = c["min_p_value"].as_f64().unwrap();
        assert!(min_p == 0.25 || min_p == 0.5, "{c}");
        assert_eq!(
            c["verdict"]
                .as_str()
                .unwrap()
                .starts_with("~ no significant difference ("),
            !excludes_one,
            "{c}"
        );
    }
    assert_eq!(v["trials"].as_array().unwrap().len(), 6);
    assert!(v["environment"][0]["values"]["ruby_description"][0]
        .as_str()
        .unwrap()
        .starts_with("ruby "));
}

#[test]
fn markdown_csv_and_benchstat_are_well_formed() {
    let md = report(&["--format", "markdown"]).stdout;
    // Three tables: the summary, what the probe saw in the server, the machine's noise.
    let tables: Vec<Vec<&str>> = md
        .split("\n\n")
        .map(|block| {
            block
                .lines()
                .filter(|l| l.starts_with('|'))
                .collect::<Vec<_>>()
        })
        .filter(|t| !t.is_empty())
        .collect();
    assert_eq!(tables.len(), 3, "{md}");
    let noise = &tables[2];
    assert_eq!(noise.len(), 4, "{md}");
    assert!(
        noise[0].starts_with("| cohort | other CPU | steal | max other CPU |"),
        "{md}"
    );
    assert!(
        noise
            .iter()
            .all(|l| l.matches('|').count() == noise[0].matches('|').count()),
        "{md}"
    );
    let runtime = &tables[1];
    assert_eq!(runtime.len(), 4, "{md}");
    assert!(
        runtime[0].starts_with("| cohort | verified in the server | GC /1k req |"),
        "{md}"
    );
    assert!(
        runtime
            .iter()
            .all(|l| l.matches('|').count() == runtime[0].matches('|').count()),
        "{md}"
    );
    let table = &tables[0];
    assert_eq!(table.len(), 4, "{md}");
    assert!(
        table[2].starts_with("| one &lt;b&gt;connection&lt;/b&gt; | 3 |"),
        "{md}"
    );
    assert!(
        table
            .iter()
            .all(|l| l.matches('|').count() == table[0].matches('|').count()),
        "{md}"
    );

    let csv = report(&["--format", "csv"]).stdout;
    let header = csv.lines().next().unwrap();
    assert!(
        header.starts_with("cohort,metric,n,mean,sd,cv,min,p10,p50,p90,max,ratio"),
        "{csv}"
    );
    assert!(
        csv.lines().any(|l| l.starts_with("four,throughput,3,")),
        "{csv}"
    );

    let bench = report(&["--format", "benchstat"]).stdout;
    let lines: Vec<&str> = bench
        .lines()
        .filter(|l| l.starts_with("Benchmark"))
        .collect();
    assert_eq!(lines.len(), 6, "{bench}");
    assert!(
        lines
            .iter()
            .all(|l| l.contains(" ns/op ") && l.contains(" req/s")),
        "{bench}"
    );
    assert!(bench.contains("BenchmarkHttp/cohort=four 1 "), "{bench}");
}

#[test]
fn overhead_and_compare_answer_the_quick_questions() {
    let run = report(&["--overhead", "four", "one <b>connection</b>"]);
    assert!(
        run.stdout
            .contains("Overhead of four over one <b>connection</b>: "),
        "{run:?}"
    );
    assert!(run.stdout.contains("µs per request ["), "{run:?}");

    let results = results();
    let dir = results.to_str().unwrap();
    let run = spawn(&[
        "compare",
        dir,
        "four",
        "one <b>connection</b>",
        "--format",
        "json",
    ])
    .wait(Duration::from_secs(60));
    assert_eq!(run.code(), Some(0), "{run:?}");
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["baseline"], "four");
    assert_eq!(v["comparisons"][0]["cohort"], "one <b>connection</b>");

    // Two directories (one cohort each, unpaired) are compared in tests/it/readers.rs.

    let bad = spawn(&["report", dir, "--baseline", "nope"]).wait(Duration::from_secs(60));
    assert_eq!(bad.code(), Some(1));
    assert!(
        bad.stderr
            .contains("--baseline \"nope\" is not a cohort; cohorts: one <b>connection</b>, four"),
        "{bad:?}"
    );
    let bad = spawn(&["report", dir, "--by", "conections"]).wait(Duration::from_secs(60));
    assert!(
        bad.stderr.contains("did you mean `connections`?"),
        "{bad:?}"
    );
}

#[test]
fn grouping_by_any_recorded_key() {
    let run = report(&["--by", "settings.load.connections", "--format", "json"]);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    let names: Vec<&str> = v["cohorts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["settings.load.connections=1", "settings.load.connections=4"]
    );
    let run = report(&["--by", "ruby", "--format", "json"]);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["cohorts"].as_array().unwrap().len(), 1);
    assert_eq!(v["cohorts"][0]["valid"], 6);
}

#[test]
fn html_and_chart_files_from_real_data() {
    let out = TempDir::new("report-html");
    let html = out.path("r.html");
    let charts = out.path("charts");
    let run = report(&[
        "--format",
        "html",
        "-o",
        html.to_str().unwrap(),
        "--charts",
        charts.to_str().unwrap(),
    ]);
    assert!(run.stderr.contains("wrote"), "{run:?}");
    let page = std::fs::read_to_string(&html).unwrap();
    // The label with markup is text, never markup.
    assert!(
        page.contains("one &lt;b&gt;connection&lt;/b&gt;"),
        "label not escaped"
    );
    assert!(!page.contains("one <b>connection</b>"));
    for chart in ["throughput", "latency", "memory", "trial-order"] {
        let svg = page
            .split(&format!("data-chart=\"{chart}\""))
            .nth(1)
            .unwrap_or_else(|| panic!("no {chart} chart"));
        let svg = &svg[..svg.find("</svg>").unwrap()];
        assert_eq!(
            svg.matches("data-series=").count(),
            2,
            "{chart}: one series per cohort"
        );
    }
    assert!(!page.contains("<script"), "the page must not carry scripts");
    for name in ["throughput", "latency", "memory", "trial-order"] {
        for ext in ["svg", "png"] {
            let f = charts.join(format!("{name}.{ext}"));
            assert!(
                std::fs::metadata(&f)
                    .map(|m| m.len() > 1000)
                    .unwrap_or(false),
                "{}",
                f.display()
            );
        }
    }
}
