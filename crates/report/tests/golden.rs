//! Golden outputs of the report's renderers: a realistic stored report
//! (tests/fixtures/report-http.json, the fixture of tests/html.rs) rendered in every format
//! that needs no trial files (table, with and without colour, Markdown, CSV, JSON, HTML)
//! and every chart as SVG, compared byte for byte with the files under
//! tests/golden/report-http/. They hold what these renderers printed before the code was
//! reshaped (issue 16), so a refactor that changes one byte of any output fails here, with
//! the first line that differs.
//!
//! After a change that is meant to change an output, `UPDATE_GOLDEN=1 cargo test -p
//! rubyrace-report --test golden` rewrites the files; the diff then shows what changed.
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

/// The first line where `got` and `want` differ, for the failure message.
fn first_difference(got: &str, want: &str) -> String {
    let (mut g, mut w) = (got.lines(), want.lines());
    for number in 1.. {
        match (g.next(), w.next()) {
            (Some(a), Some(b)) if a == b => continue,
            (None, None) => break,
            (a, b) => return format!("line {number}:\n  now:    {a:?}\n  before: {b:?}"),
        }
    }
    "the same lines, different line endings".into()
}

#[test]
fn every_renderer_prints_what_it_printed_before() {
    let report = fixture();
    let dir = golden_dir();
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let outputs = outputs(&report);
    assert!(
        outputs.iter().filter(|(n, _)| n.ends_with(".svg")).count() >= 4,
        "the fixture draws its charts: {:?}",
        outputs.iter().map(|(n, _)| n).collect::<Vec<_>>()
    );
    let mut changed = Vec::new();
    for (name, text) in &outputs {
        let path = dir.join(name);
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, text).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (UPDATE_GOLDEN=1 writes the golden files)",
                path.display()
            )
        });
        if *text != want {
            changed.push(format!(
                "{}: {}",
                path.display(),
                first_difference(text, &want)
            ));
        }
    }
    // No golden file is left over from an output that no longer exists.
    if !update {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            assert!(
                outputs.iter().any(|(n, _)| *n == name),
                "{name} in {} is no renderer's output any more",
                dir.display()
            );
        }
    }
    assert!(
        changed.is_empty(),
        "outputs changed (UPDATE_GOLDEN=1 rewrites them if that is meant):\n{}",
        changed.join("\n")
    );
}

#[test]
fn rendering_twice_gives_the_same_bytes() {
    // The golden comparison is only meaningful if rendering is deterministic.
    let report = fixture();
    assert_eq!(outputs(&report), outputs(&report));
}
