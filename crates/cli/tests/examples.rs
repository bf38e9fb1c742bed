//! Every ready-made experiment in `examples/<name>/experiment.toml` runs on this machine's
//! Ruby in smoke mode (two short blocks), with the real binary and real servers, and its
//! report has one cohort per configuration of its plan, every trial valid. A new example is
//! picked up without editing this file.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;
use support::{rubyrace, spawn, workspace_root, TempDir};

fn examples() -> Vec<PathBuf> {
    let dir = workspace_root().join("examples");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path().join("experiment.toml"))
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found
}

#[test]
fn every_example_runs_in_smoke_mode_and_reports_one_cohort_per_configuration() {
    let all = examples();
    assert!(all.len() >= 4, "examples found: {all:?}");
    let scratch = TempDir::new("examples");
    for file in all {
        let name = file.parent().unwrap().file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            file.with_file_name("README.md").is_file(),
            "examples/{name} has no README.md"
        );
        let plan = rubyrace(&["run", file.to_str().unwrap(), "--dry-run", "--json"]);
        assert_eq!(plan.code(), Some(0), "{name}: {plan:?}");
        let plan: Value = serde_json::from_str(&plan.stdout).unwrap();
        let mut labels: Vec<String> = plan["configs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["label"].as_str().unwrap().to_string())
            .collect();

        let results = scratch.path(&name);
        let run = spawn(&[
            "run",
            file.to_str().unwrap(),
            "--smoke",
            "-o",
            results.to_str().unwrap(),
        ])
        .wait(Duration::from_secs(300));
        assert_eq!(run.code(), Some(0), "{name}: {run:?}");

        let report = rubyrace(&["report", results.to_str().unwrap(), "--format", "json"]);
        assert_eq!(report.code(), Some(0), "{name}: {report:?}");
        let report: Value = serde_json::from_str(&report.stdout).unwrap();
        let mut cohorts: Vec<String> = report["cohorts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                assert_eq!(c["valid"], 2, "{name}: {c}");
                c["name"].as_str().unwrap().to_string()
            })
            .collect();
        labels.sort();
        cohorts.sort();
        assert_eq!(cohorts, labels, "{name}");
        // Settings that are verified in the server were in force in every trial.
        for c in report["cohorts"].as_array().unwrap() {
            for v in c["verified"].as_array().unwrap() {
                assert_eq!(v["verified"], v["checked"], "{name}: {v}");
            }
        }
    }
}
