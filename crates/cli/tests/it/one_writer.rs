//! A results directory has one writer: a `--resume` or a second `run -o`
//! on a live run is refused with the live run's pid, touching nothing (it used to kill the
//! live run's servers as leftovers and measure the same blocks into the same store), and
//! `rubyrace report` on a run in progress says a run is writing it instead of suggesting a
//! resume. Real binary, real Puma, the bundled Rack app.

use std::time::{Duration, Instant};

use crate::support::{spawn, TempDir};
use serde_json::Value;

#[test]
fn a_live_run_refuses_a_second_writer_and_readers_say_it_is_running() {
    let dir = TempDir::new("one-writer");
    let file = dir.write(
        "experiment.toml",
        r#"
name = "one-writer"
seed = 8
batches = 4

[settings]
app = "rack-hello"
threads = 2
warmup = "300ms"
duration = "2s"

[matrix]
connections = [1, 2]
"#,
    );
    let out = dir.path("results");
    let (file, out) = (file.to_str().unwrap(), out.to_str().unwrap());
    let mut live = spawn(&["run", file, "-o", out]);
    let pid = live.pid();

    // Wait until the live run holds its lock and has started measuring.
    let lock = dir.path("results/writer.lock");
    let started = Instant::now();
    while !std::fs::read_to_string(&lock)
        .unwrap_or_default()
        .starts_with(&format!("{pid}\n"))
        || !dir.path("results/trials").exists()
    {
        assert!(live.is_running(), "the live run ended early");
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no lock after 60 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    let resume = spawn(&["run", "--resume", out]).wait(Duration::from_secs(30));
    let second = spawn(&["run", file, "-o", out]).wait(Duration::from_secs(30));
    for refused in [&resume, &second] {
        assert_eq!(refused.code(), Some(1), "{refused:?}");
        assert!(
            refused
                .stderr
                .contains(&format!("is being written by another rubyrace (pid {pid}"))
                && refused.stderr.contains("one writer at a time"),
            "{refused:?}"
        );
        assert!(!refused.stderr.contains("SQL"), "{refused:?}");
        assert!(!refused.stderr.contains("killed"), "{refused:?}");
    }

    // Before the first trial is stored, the report says who is writing.
    let early = spawn(&["report", out]).wait(Duration::from_secs(60));
    if early.code() != Some(0) {
        assert!(
            early.stderr.contains(&format!(
                "no trial is stored yet in {out}: a run (pid {pid}"
            )),
            "{early:?}"
        );
    }
    let report = loop {
        let report = spawn(&["report", out, "--format", "json"]).wait(Duration::from_secs(60));
        if report.code() == Some(0) {
            break report;
        }
        assert!(started.elapsed() < Duration::from_secs(120), "{report:?}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let v: Value = serde_json::from_str(&report.stdout).unwrap();
    let incomplete: Vec<&str> = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["kind"] == "incomplete-run")
        .map(|w| w["message"].as_str().unwrap())
        .collect();
    assert!(
        live.is_running(),
        "the run ended before the report could see it live"
    );
    assert_eq!(incomplete.len(), 1, "{incomplete:?}");
    assert!(
        incomplete[0].starts_with(&format!("a run (pid {pid}, since ")),
        "{incomplete:?}"
    );
    assert!(!incomplete[0].contains("--resume"), "{incomplete:?}");
    assert!(v["sources"][0]["writer"]
        .as_str()
        .unwrap()
        .starts_with(&format!("pid {pid}")));
    let table = spawn(&["report", out]).wait(Duration::from_secs(60));
    assert!(table.stdout.contains("RUN IN PROGRESS"), "{table:?}");

    // The live run was not disturbed: it finishes, every planned trial valid and stored once.
    let live = live.wait(Duration::from_secs(180));
    assert_eq!(live.code(), Some(0), "{live:?}");
    let export = spawn(&["export", out, "--json"]).wait(Duration::from_secs(60));
    let export: Value = serde_json::from_str(&export.stdout).unwrap();
    let trials = export["trials"].as_array().expect("a list of trials");
    assert_eq!(trials.len(), 8, "{trials:?}");
    assert!(trials.iter().all(|t| t["status"] == "valid"), "{trials:?}");
    let mut ids: Vec<u64> = trials
        .iter()
        .map(|t| t["trial_id"].as_u64().unwrap())
        .collect();
    ids.dedup();
    assert_eq!(ids.len(), 8);

    // Once it has ended, the lock is free: the report no longer speaks of a writer, and a
    // resume of the complete run is allowed.
    let after = spawn(&["report", out, "--format", "json"]).wait(Duration::from_secs(60));
    let v: Value = serde_json::from_str(&after.stdout).unwrap();
    assert!(v["sources"][0].get("writer").is_none(), "{v}");
    let resume = spawn(&["run", "--resume", out]).wait(Duration::from_secs(60));
    assert_eq!(resume.code(), Some(0), "{resume:?}");
}
