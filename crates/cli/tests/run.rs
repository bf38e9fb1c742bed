//! End-to-end tests of `rubyrace run`: the real binary runs real experiments against real
//! servers (Puma with the bundled Rack app, and a misbehaving Ruby server started as a
//! `custom` server), and the tests read the real SQLite store it writes.
//!
//! Every server an experiment starts carries a unique `RUBYRACE_TEST_MARKER` in its
//! environment, so a test can find any process left behind by scanning /proc, and kill
//! it by pid (never by name) before failing.

mod support;

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde_json::Value;
use support::lab::{schedule, trials, Lab, TrialRow};
use support::{rubyrace, spawn, Run};

const FAULT_SERVER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/fault_server.rb"
);

fn fault_experiment(mode: &str, extra_settings: &str) -> String {
    format!(
        r#"
name = "fault-{mode}"
batches = 1

[settings]
server = "custom"
server_argv = ["{{ruby}}", "{FAULT_SERVER}", "{{port}}", "{mode}"]
app = "rack-hello"
warmup = "500ms"
duration = "2s"
readiness_timeout = "3s"
connections = 2
{extra_settings}
"#
    )
}

/// Runs a one-trial experiment against the fault server in `mode`; checks that the run
/// went on to the end (exit status 3: a trial is not valid), that exactly one trial with
/// `status` is stored, and that nothing is left running.
fn one_fault_trial(mode: &str, extra_settings: &str, status: &str) -> (Lab, Run, TrialRow) {
    let lab = Lab::new(mode);
    lab.experiment(&fault_experiment(mode, extra_settings));
    let run = lab.run(&[], Duration::from_secs(60));
    assert_eq!(run.code(), Some(3), "{run:?}");
    let mut rows = trials(&lab.db());
    assert_eq!(rows.len(), 1, "{run:?}");
    let row = rows.remove(0);
    assert_eq!(row.status, status, "{:?}", row.reason);
    lab.assert_no_leftovers(Duration::from_secs(2));
    (lab, run, row)
}

#[test]
fn a_real_experiment_stores_every_trial_in_schedule_order() {
    let lab = Lab::new("real");
    lab.experiment(
        r#"
name = "yjit-or-not"
seed = 3
batches = 3

[settings]
app = "rack-hello"
server = "puma"
threads = 2
warmup = "1s"
duration = "2s"

[matrix]
ruby_opts = [[], { label = "yjit", value = ["--yjit"] }]
"#,
    );
    let run = lab.run(&[], Duration::from_secs(120));
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert!(run.stdout.contains("\nyjit "), "{run:?}");

    let db = lab.db();
    let rows = trials(&db);
    let planned = schedule(&db);
    assert_eq!(rows.len(), 6, "{run:?}");
    assert_eq!(planned.len(), 6);
    for (row, (id, block, position, label)) in rows.iter().zip(&planned) {
        assert_eq!(
            (row.trial_id, row.block, row.position, &row.label),
            (*id, *block, *position, label)
        );
        assert_eq!(
            row.status, "valid",
            "trial {} : {:?}",
            row.trial_id, row.reason
        );
        let r = &row.result;
        assert_eq!(r["schema"], "rubyrace.trial/1");
        assert!(
            r["derived"]["requests_per_s"].as_f64().unwrap() > 100.0,
            "{r}"
        );
        let res = &r["resources"];
        assert!(res["end"]["rss_bytes"].as_u64().unwrap() > 5 << 20, "{res}");
        assert!(res["end"]["pss_bytes"].as_u64().unwrap() > 0, "{res}");
        assert!(res["end"]["uss_bytes"].as_u64().unwrap() > 0, "{res}");
        assert!(
            res["peak_rss_bytes"].as_u64().unwrap()
                >= res["end"]["rss_bytes"].as_u64().unwrap() / 2
        );
        assert!(res["cpu_user_us"].as_u64().unwrap() + res["cpu_system_us"].as_u64().unwrap() > 0);
        assert!(r["derived"]["cpu_us_per_request"].as_f64().unwrap() > 0.0);
        let env = &r["environment"];
        assert!(
            env["ruby_description"]
                .as_str()
                .unwrap()
                .starts_with("ruby "),
            "{env}"
        );
        assert!(!env["machine"]["kernel"].as_str().unwrap().is_empty());
        assert!(env["machine"]["cpus_online"].as_u64().unwrap() >= 1);
        assert!(env["load_average_before"].is_array());
        assert_eq!(env["rubyrace_version"], env!("CARGO_PKG_VERSION"));
        // What the server ran with, not only what rubyrace had.
        assert_eq!(env["env"]["RACK_ENV"], "production", "{env}");
        let server = &r["server"];
        assert_eq!(server["ended"]["stopped_by"], "term", "{server}");
        assert!(server["argv"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "-S" || a.as_str().unwrap().contains("puma")));
        // The YJIT configuration really ran with --yjit, and its description says so.
        let yjit = row.label.contains("yjit");
        assert_eq!(
            env["ruby_description"].as_str().unwrap().contains("+YJIT"),
            yjit,
            "{env}"
        );
        assert!(Path::new(&lab.results())
            .join(format!("trials/{:05}/latency.hlog", row.trial_id))
            .is_file());
    }
    // Each block runs each configuration exactly once.
    for block in 0..3 {
        let labels: BTreeSet<&str> = rows
            .iter()
            .filter(|r| r.block == block)
            .map(|r| r.label.as_str())
            .collect();
        assert_eq!(labels.len(), 2, "block {block}");
    }
    lab.assert_no_leftovers(Duration::from_secs(2));

    // What `rubyrace doctor` found when the run started is stored with the session.
    let doctor: String = db
        .query_row(
            "SELECT value FROM meta WHERE key LIKE 'doctor.session.%'",
            [],
            |r| r.get(0),
        )
        .expect("a doctor report for the session");
    let doctor: Value = serde_json::from_str(&doctor).unwrap();
    assert_eq!(doctor["schema"], "rubyrace.doctor/1");
    let names: Vec<&str> = doctor["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    for name in ["cpus", "load", "swap", "aslr", "ports", "open_files"] {
        assert!(names.contains(&name), "{name}: {names:?}");
    }

    // The export has every trial.
    let results = lab.results();
    let export = rubyrace(&["export", results.to_str().unwrap(), "--json"]);
    assert_eq!(export.code(), Some(0), "{export:?}");
    let v: Value = serde_json::from_str(&export.stdout).unwrap();
    assert_eq!(v["schema"], "rubyrace.export/1");
    assert_eq!(v["trials"].as_array().unwrap().len(), 6);
    assert_eq!(v["configs"].as_array().unwrap().len(), 2);
}

#[test]
fn a_server_that_never_becomes_ready_fails_its_trial_and_the_run_goes_on() {
    let (_lab, run, row) = one_fault_trial("never-ready", "", "failed");
    let reason = row.reason.unwrap();
    assert!(
        reason.starts_with("the server was not ready after 3s: 127.0.0.1:"),
        "{reason}"
    );
    assert!(
        reason.ends_with("accepted the connection but never answered GET /"),
        "{reason}"
    );
    assert!(
        run.stderr.contains("FAILED: the server was not ready"),
        "{run:?}"
    );
}

#[test]
fn a_500_at_readiness_fails_the_trial_with_the_server_stderr() {
    let (_lab, _run, row) = one_fault_trial("error", "", "failed");
    assert_eq!(
        row.reason.as_deref(),
        Some("the readiness check GET / answered 500, not 2xx")
    );
    let tail = row.result["server"]["stderr_tail"].as_str().unwrap();
    assert!(tail.contains("listening on"), "{tail}");
}

#[test]
fn errors_during_the_measurement_make_the_trial_invalid_not_silent() {
    let (_lab, run, row) = one_fault_trial("flaky", "", "invalid");
    let reason = row.reason.unwrap();
    assert!(
        reason.starts_with("error rate 100.000% exceeds max_error_rate 0%"),
        "{reason}"
    );
    assert!(reason.contains("× 500"), "{reason}");
    // The measurement is kept, and the summary counts the trial as invalid.
    assert!(row.result["load"]["status"]["500"].as_u64().unwrap() > 0);
    let summary = run
        .stdout
        .lines()
        .find(|l| l.starts_with("default"))
        .unwrap_or_default();
    assert_eq!(
        summary.split_whitespace().take(4).collect::<Vec<_>>(),
        ["default", "0", "1", "0"],
        "{run:?}"
    );
}

#[test]
fn a_server_that_exits_mid_trial_fails_it_with_the_exit_status() {
    let (_lab, _run, row) = one_fault_trial("exit-after-1s", "max_error_rate = 100.0", "failed");
    assert_eq!(
        row.reason.as_deref(),
        Some("the server exited during the measurement (exit status 7)")
    );
    assert_eq!(row.result["server"]["ended"]["stopped_by"], "exited");
}

#[test]
fn a_server_that_answers_garbage_fails_its_trial() {
    let (_lab, _run, row) = one_fault_trial("garbage", "", "failed");
    let reason = row.reason.unwrap();
    let expected = "the readiness check GET / got an answer that is not HTTP (malformed head: \"SSH-2.0-not-http";
    assert!(reason.starts_with(expected), "{reason}");
}

#[test]
fn a_server_that_crashes_on_boot_fails_fast_with_its_stderr() {
    let started = Instant::now();
    let (_lab, run, row) = one_fault_trial("crash-on-boot", "", "failed");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "waited for the readiness timeout: {run:?}"
    );
    assert_eq!(
        row.reason.as_deref(),
        Some("the server exited (exit status 3) before it was ready")
    );
    assert!(run.stderr.contains("simulated crash on boot"), "{run:?}");
}

#[test]
fn a_fixed_port_already_in_use_fails_the_trial_without_loading_the_other_server() {
    let holder = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port();
    let (_lab, _run, row) = one_fault_trial("good", &format!("port = {port}"), "failed");
    let reason = row.reason.unwrap();
    assert!(
        reason.starts_with(&format!("port {port} is already in use on 127.0.0.1")),
        "{reason}"
    );
    drop(holder);
}

#[test]
fn fail_fast_stops_at_the_first_failed_trial() {
    let lab = Lab::new("fail-fast");
    let toml = fault_experiment("crash-on-boot", "").replace("batches = 1", "batches = 3");
    lab.experiment(&toml);
    let run = lab.run(&["--fail-fast"], Duration::from_secs(60));
    assert_eq!(run.code(), Some(3), "{run:?}");
    assert_eq!(trials(&lab.db()).len(), 1);
    assert!(run.stderr.contains("--fail-fast"), "{run:?}");
    assert!(run.stderr.contains("rubyrace run --resume"), "{run:?}");
}

#[test]
fn a_malformed_experiment_file_is_reported_with_file_line_column_and_suggestion() {
    let lab = Lab::new("malformed");
    let file = lab.experiment(
        r#"name = "typos"
batches = "three"

[settings]
app = "rack-hello"
durration = "2s"
threads = 0

[matrix]
mode = ["keepalive", "close-headers"]
"#,
    );
    let run = lab.run(&[], Duration::from_secs(20));
    assert_eq!(run.code(), Some(2), "{run:?}");
    let f = file.display();
    // The marker line added to [settings] shifts lines below it by one.
    let expected = format!(
        "{f}:2:11: batches: expected an integer from 1 to 100000, found the string \"three\"\n\
         {f}:7:1: settings.durration: unknown key `durration`\n    help: did you mean `duration`?\n\
         {f}:8:11: settings.threads: expected an integer from 1 to 1024, found 0\n\
         {f}:11:22: matrix.mode[1]: expected one of \"keepalive\", \"close-header\" or \"client-close\", found \"close-headers\"\n    help: did you mean \"close-header\"?\n\
         4 errors in the experiment file; nothing was run\n"
    );
    assert_eq!(run.stderr, expected);
    assert!(
        !lab.results().exists(),
        "a results directory was created for a broken file"
    );
}

/// Waits until the store holds `n` trials.
fn wait_for_trials(lab: &Lab, n: usize, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        if lab.results().join("results.db").exists() {
            if let Ok(db) = Connection::open(lab.results().join("results.db")) {
                let count: i64 = db
                    .query_row("SELECT count(*) FROM trials", [], |r| r.get(0))
                    .unwrap_or(0);
                if count as usize >= n {
                    return;
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "{n} trials were not stored within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

const INTERRUPTIBLE: &str = r#"
name = "interrupt-me"
batches = 3

[settings]
app = "rack-hello"
server = "puma"
processes = 2
threads = 1
warmup = "500ms"
duration = "2s"

[matrix]
connections = [2, 4]
"#;

/// Interrupts a run mid-trial with `signal`, checks nothing is left running, resumes, and
/// checks the store holds every scheduled trial exactly once.
fn interrupt_and_resume(name: &str, signal: i32) {
    let lab = Lab::new(name);
    lab.experiment(INTERRUPTIBLE);
    let file = lab.dir.path("").join("experiment.toml");
    let results = lab.results();
    let running = spawn(&[
        "run",
        file.to_str().unwrap(),
        "-o",
        results.to_str().unwrap(),
    ]);
    wait_for_trials(&lab, 2, Duration::from_secs(60));
    // Into the middle of the third trial: past its boot, inside its measurement.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        !lab.leftovers().is_empty(),
        "no server was running when the signal was sent"
    );
    // SAFETY: the pid of the rubyrace this test started.
    unsafe { libc::kill(running.pid() as i32, signal) };
    let run = running.wait(Duration::from_secs(30));
    lab.assert_no_leftovers(Duration::from_secs(10));
    let stored_before: Vec<i64> = trials(&lab.db()).iter().map(|t| t.trial_id).collect();
    assert!(
        stored_before.len() >= 2 && stored_before.len() < 6,
        "{stored_before:?}"
    );
    if signal == libc::SIGINT {
        assert_eq!(run.code(), Some(130), "{run:?}");
        let resume = format!("rubyrace run --resume {}", results.display());
        assert!(run.stderr.contains(&resume), "{run:?}");
    }

    let resumed =
        spawn(&["run", "--resume", results.to_str().unwrap()]).wait(Duration::from_secs(120));
    assert_eq!(resumed.code(), Some(0), "{resumed:?}");
    assert!(
        resumed.stderr.contains(&format!(
            "{} of 6 trials already stored",
            stored_before.len()
        )),
        "{resumed:?}"
    );
    let db = lab.db();
    let rows = trials(&db);
    let planned = schedule(&db);
    let ids: Vec<i64> = rows.iter().map(|r| r.trial_id).collect();
    assert_eq!(
        ids,
        vec![0, 1, 2, 3, 4, 5],
        "a trial was lost or duplicated"
    );
    for (row, (_, block, position, label)) in rows.iter().zip(&planned) {
        assert_eq!(
            (row.block, row.position, &row.label),
            (*block, *position, label)
        );
        assert_eq!(row.status, "valid", "{:?}", row.reason);
    }
    let sessions: Vec<(String, Option<String>)> = db
        .prepare("SELECT kind, outcome FROM sessions ORDER BY session_id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let first_outcome = if signal == libc::SIGINT {
        Some("interrupted".to_string())
    } else {
        None
    };
    assert_eq!(
        sessions,
        vec![
            ("start".to_string(), first_outcome),
            ("resume".to_string(), Some("complete".to_string()))
        ]
    );
    lab.assert_no_leftovers(Duration::from_secs(2));
}

#[test]
fn ctrl_c_mid_trial_then_resume_loses_and_duplicates_nothing() {
    interrupt_and_resume("sigint", libc::SIGINT);
}

#[test]
fn sigkill_mid_trial_leaves_no_server_and_resume_completes_the_run() {
    interrupt_and_resume("sigkill", libc::SIGKILL);
}

#[test]
fn dry_run_prints_the_schedule_and_runs_nothing() {
    let lab = Lab::new("dry");
    lab.experiment(INTERRUPTIBLE);
    let run = lab.run(&["--dry-run"], Duration::from_secs(20));
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert!(
        run.stdout
            .contains("2 configurations × 3 blocks = 6 trials"),
        "{run:?}"
    );
    assert!(
        run.stdout.contains("[0] connections=2") && run.stdout.contains("[1] connections=4"),
        "{run:?}"
    );
    assert_eq!(run.stdout.matches("  block ").count(), 3, "{run:?}");
    assert!(!lab.results().exists());
    // The same file and seed give the same schedule.
    let again = lab.run(&["--dry-run"], Duration::from_secs(20));
    assert_eq!(run.stdout, again.stdout);
}

#[test]
fn a_script_workload_records_times_and_metrics() {
    let lab = Lab::new("script");
    let script = lab.dir.path("").join("spin.rb");
    std::fs::write(
        &script,
        "n = Integer(ARGV[0])\nt = Time.now\nn.times { File.mtime(__FILE__) }\nputs \"rubyrace-metric calls_per_s=#{(n / (Time.now - t)).round(1)}\"\n",
    )
    .unwrap();
    lab.experiment(
        r#"
batches = 2

[settings]
workload = "script"
script = "spin.rb"
runs = 2

[matrix]
script_args = [["1000"], ["300000"]]
"#,
    );
    let run = lab.run(&[], Duration::from_secs(60));
    assert_eq!(run.code(), Some(0), "{run:?}");
    let rows = trials(&lab.db());
    assert_eq!(rows.len(), 4);
    for row in &rows {
        let s = &row.result["script"];
        assert_eq!(s["runs"].as_array().unwrap().len(), 2, "{s}");
        assert!(s["median_wall_s"].as_f64().unwrap() > 0.0);
        assert!(s["median_user_s"].as_f64().unwrap() > 0.0);
        assert!(s["max_rss_bytes"].as_u64().unwrap() > 1 << 20);
        assert!(
            s["median_metrics"]["calls_per_s"].as_f64().unwrap() > 100.0,
            "{s}"
        );
    }
    let wall = |label: &str| {
        rows.iter()
            .filter(|r| r.label == label)
            .map(|r| r.result["script"]["median_wall_s"].as_f64().unwrap())
            .fold(0.0, f64::max)
    };
    assert!(
        wall("script_args=300000") > wall("script_args=1000"),
        "more work took less time?"
    );
}

#[test]
fn smoke_mode_runs_two_short_blocks() {
    let lab = Lab::new("smoke");
    lab.experiment(
        r#"
batches = 10

[settings]
app = "rack-hello"
warmup = "30s"
duration = "60s"
urls = "mix.txt"
"#,
    );
    lab.dir.write(
        "mix.txt",
        "# a URL mix next to the experiment file\n3 /\n1 GET /other?x=1\n",
    );
    let started = Instant::now();
    let run = lab.run(&["--smoke"], Duration::from_secs(60));
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "smoke mode did not shorten the trials"
    );
    let db = lab.db();
    let rows = trials(&db);
    assert_eq!(rows.len(), 2);
    let smoke: String = db
        .query_row("SELECT value FROM meta WHERE key = 'smoke'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(smoke, "true");
    assert_eq!(
        rows[0].result["load"]["settings"]["duration_s"].as_f64(),
        Some(2.0)
    );
}

#[test]
fn one_trial_runs_on_its_own_from_a_planned_spec() {
    let lab = Lab::new("trial-spec");
    lab.experiment(
        r#"
batches = 2

[settings]
app = "rack-hello"
warmup = "500ms"
duration = "1s"

[matrix]
threads = [1, 2]
"#,
    );
    let plan = lab.run(&["--dry-run", "--json"], Duration::from_secs(20));
    assert_eq!(plan.code(), Some(0), "{plan:?}");
    let plan: Value = serde_json::from_str(&plan.stdout).unwrap();
    assert_eq!(plan["schema"], "rubyrace.plan/1");
    let specs = plan["trials"].as_array().unwrap();
    assert_eq!(specs.len(), 4);
    assert!(!lab.results().exists(), "a dry run wrote results");
    // The third trial, alone, into a directory of our choosing.
    let mut spec = specs[2].clone();
    let out = lab.dir.path("alone");
    spec["out_dir"] = Value::String(out.display().to_string());
    let spec_file = lab.dir.path("spec.json");
    std::fs::write(&spec_file, serde_json::to_string(&spec).unwrap()).unwrap();
    let run = rubyrace(&["trial", "--spec", spec_file.to_str().unwrap()]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    let result: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(result["schema"], "rubyrace.trial/1");
    assert_eq!(result["trial_id"], spec["trial_id"]);
    assert_eq!(result["label"], spec["label"]);
    assert_eq!(result["status"], "valid", "{result}");
    assert_eq!(result["settings"]["threads"], spec["settings"]["threads"]);
    assert!(result["derived"]["requests_per_s"].as_f64().unwrap() > 0.0);
    assert!(out.join("latency.hlog").is_file());
    lab.assert_no_leftovers(Duration::from_secs(2));

    // A spec that is not one is refused with its name.
    let bad = lab
        .dir
        .write("bad.json", "{\"schema\": \"rubyrace.trial-spec/1\"}");
    let run = rubyrace(&["trial", "--spec", bad.to_str().unwrap()]);
    assert_eq!(run.code(), Some(1), "{run:?}");
    assert!(
        run.stderr.contains("bad.json is not a trial spec"),
        "{run:?}"
    );
}
