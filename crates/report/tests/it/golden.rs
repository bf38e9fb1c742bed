//! Golden outputs of the report's renderers: a realistic stored report
//! (tests/fixtures/report-http.json, the fixture of tests/it/html.rs) rendered in every format
//! that needs no trial files (table, with and without colour, Markdown, CSV, JSON, HTML)
//! and every chart as SVG, compared byte for byte with the files under
//! tests/golden/report-http/. They hold what these renderers printed before the code was
//! reshaped, so a refactor that changes one byte of any output fails here, with
//! the first line that differs.
//!
//! After a change that is meant to change an output, `UPDATE_GOLDEN=1 cargo test -p
//! rubyrace-report --test it golden::` rewrites the files; the diff then shows what changed.
//! The crate's version in the Markdown footer is written as `VERSION`, so a release does
//! not count as a change.

use std::path::{Path, PathBuf};

use report::model::Report;

fn fixture() -> Report {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report-http.json");
    let text = std::fs::read_to_string(&path).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/report-http")
}

/// Every output of the renderers for `report`, by file name.
fn outputs(report: &Report) -> Vec<(String, String)> {
    let version = |s: String| {
        s.replace(
            &format!("rubyrace {} ·", env!("CARGO_PKG_VERSION")),
            "rubyrace VERSION ·",
        )
    };
    let mut all = vec![
        (
            "table.txt".to_string(),
            report::render::table::table(report, false),
        ),
        (
            "table-colour.txt".to_string(),
            report::render::table::table(report, true),
        ),
        (
            "report.md".to_string(),
            version(report::render::markdown::markdown(report)),
        ),
        (
            "report.csv".to_string(),
            report::render::csv::csv(report).unwrap(),
        ),
        (
            "report.json".to_string(),
            serde_json::to_string_pretty(report).unwrap(),
        ),
        (
            "report.html".to_string(),
            report::render::html::render(report),
        ),
    ];
    for chart in report::charts::all(report) {
        all.push((format!("chart-{}.svg", chart.name), chart.svg));
    }
    all
}

#[test]
fn every_renderer_prints_what_it_printed_before() {
    let report = fixture();
    let dir = golden_dir();
    let outputs = outputs(&report);
    assert!(
        outputs.iter().filter(|(n, _)| n.ends_with(".svg")).count() >= 4,
        "the fixture draws its charts: {:?}",
        outputs.iter().map(|(n, _)| n).collect::<Vec<_>>()
    );
    testkit::assert_golden(
        &dir,
        &outputs,
        "cargo test -p rubyrace-report --test it golden::",
        true,
    );
}

#[test]
fn rendering_twice_gives_the_same_bytes() {
    // The golden comparison is only meaningful if rendering is deterministic.
    let report = fixture();
    assert_eq!(outputs(&report), outputs(&report));
}
