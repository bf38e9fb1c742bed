//! Every ready-made experiment in `examples/<name>/experiment.toml` runs on this machine's
//! Ruby in smoke mode (two short blocks), with the real binary and real servers, and its
//! report has one cohort per configuration of its plan, every trial valid.
//!
//! Each known example is a test of its own (`cargo test --test examples app_servers` runs
//! one); a new example directory is picked up without editing this file, by
//! `examples_without_a_test_of_their_own`, until it is added to the list. The examples run
//! one at a time whatever the test harness's thread count: two servers on one machine
//! would measure each other, and a busy machine can make a slow Rails boot miss its
//! readiness timeout.

mod support;

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use support::{rubyrace, spawn, workspace_root, TempDir};

/// Held while an example runs.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The names of the directories of `examples/` that hold an `experiment.toml`, sorted.
fn examples() -> Vec<String> {
    let dir = workspace_root().join("examples");
    let mut found: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("experiment.toml").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    found
}

/// Runs `examples/<name>/experiment.toml` in smoke mode and checks its report.
fn smoke_test(name: &str) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let file: PathBuf = workspace_root()
        .join("examples")
        .join(name)
        .join("experiment.toml");
    assert!(file.is_file(), "examples/{name}/experiment.toml is missing");
    assert!(
        file.with_file_name("README.md").is_file(),
        "examples/{name} has no README.md"
    );
    let scratch = TempDir::new(&format!("example-{name}"));
    let plan = rubyrace(&["run", file.to_str().unwrap(), "--dry-run", "--json"]);
    assert_eq!(plan.code(), Some(0), "{name}: {plan:?}");
    let plan: Value = serde_json::from_str(&plan.stdout).unwrap();
    let mut labels: Vec<String> = plan["configs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["label"].as_str().unwrap().to_string())
        .collect();

    let results = scratch.path("results");
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

/// One test per known example, and the list of them.
macro_rules! examples {
    ($($test:ident => $name:literal,)*) => {
        const LISTED: &[&str] = &[$($name),*];
        $(
            #[test]
            fn $test() {
                smoke_test($name);
            }
        )*
    };
}

examples! {
    allocators => "allocators",
    app_servers => "app-servers",
    demo => "demo",
    gc_compaction => "gc-compaction",
    jit => "jit",
    keepalive => "keepalive",
    known_effect => "known-effect",
    puma_concurrency => "puma-concurrency",
    rails_forum => "rails-forum",
    rails_overhead => "rails-overhead",
    threads_mtime => "threads-mtime",
    threads_pipes => "threads-pipes",
}

/// Every example directory without a test above runs here, so a new one is never skipped;
/// and every listed example still exists.
#[test]
fn examples_without_a_test_of_their_own() {
    let all = examples();
    assert!(all.len() >= LISTED.len(), "examples found: {all:?}");
    for name in LISTED {
        assert!(
            all.iter().any(|a| a == name),
            "examples/{name}/experiment.toml is listed in tests/examples.rs but missing"
        );
    }
    for name in all.iter().filter(|n| !LISTED.contains(&n.as_str())) {
        smoke_test(name);
    }
}

/// Every experiment file of the examples, besides the `experiment.toml` each runs above
/// (`examples/jit/profile.toml`, for one), is accepted as written: a plan, no error.
#[test]
fn every_example_file_is_accepted() {
    let mut checked = 0;
    for dir in std::fs::read_dir(workspace_root().join("examples"))
        .unwrap()
        .flatten()
    {
        for file in std::fs::read_dir(dir.path()).unwrap().flatten() {
            let path = file.path();
            if path.extension().is_some_and(|e| e == "toml") {
                let plan = rubyrace(&["run", path.to_str().unwrap(), "--dry-run"]);
                assert_eq!(plan.code(), Some(0), "{}: {plan:?}", path.display());
                checked += 1;
            }
        }
    }
    assert!(checked > LISTED.len(), "{checked} example files");
}
