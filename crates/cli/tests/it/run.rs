//! End-to-end tests of `rubyrace run`: the real binary runs real experiments against real
//! servers (Puma with the bundled Rack app), and the tests read the real SQLite store it
//! writes. The faults (misbehaving servers, signals, a full disk) are in tests/it/faults.rs.
//!
//! Every server an experiment starts carries a unique `RUBYRACE_TEST_MARKER` in its
//! environment, so a test can find any process left behind by scanning /proc, and kill
//! it by pid (never by name) before failing.

use std::collections::BTreeSet;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::lab::{schedule, trials, Lab, INTERRUPTIBLE};
use crate::support::rubyrace;
use serde_json::Value;

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

/// The defaults note names the file's defaults (200 rounds of 50 ms), and `--smoke`
/// says what it runs instead (20 rounds: a second per configuration), so the two do not contradict each other unsaid.
#[test]
fn smoke_mode_says_what_it_runs_after_the_defaults() {
    let lab = Lab::new("smoke-note");
    lab.experiment("[matrix]\nthreads = [1, 2]\n");
    let run = lab.run(&["--smoke", "--dry-run"], Duration::from_secs(20));
    assert_eq!(run.code(), Some(0), "{run:?}");
    let notes: Vec<&str> = run.stderr.lines().collect();
    assert!(
        notes[0].contains("design = \"interleaved\" (200 rounds of 50ms slices)"),
        "{run:?}"
    );
    assert!(
        notes[1].starts_with("rubyrace: --smoke shortens the run, whatever the file and its defaults say: 2 blocks, warmup at most 1s and duration at most 2s per trial, 20 rounds of 50ms slices"),
        "{run:?}"
    );
    assert!(run.stdout.contains("20 rounds of 50ms each"), "{run:?}");
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
    let run = lab.run(&["--smoke"], Duration::from_secs(60));
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert!(
        run.elapsed < Duration::from_secs(30),
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

#[test]
fn an_experiment_that_relies_on_defaults_says_which_before_the_plan() {
    let lab = Lab::new("defaults");
    let file = lab.experiment("");
    let note = format!(
        "rubyrace: {} does not set these, so their defaults apply: blocks = 5, app = \"rack-hello\", server = \"puma\", processes = 1, threads = 1, warmup = \"5s\", duration = \"10s\"\n",
        file.display()
    );
    let dry = lab.run(&["--dry-run"], Duration::from_secs(20));
    assert_eq!(dry.code(), Some(0), "{dry:?}");
    assert_eq!(dry.stderr, note, "{dry:?}");
    assert!(dry.stdout.contains("1 configuration × 5 blocks"), "{dry:?}");
    // On stderr, so the JSON plan stays JSON.
    let json = lab.run(&["--dry-run", "--json"], Duration::from_secs(20));
    assert_eq!(json.code(), Some(0), "{json:?}");
    assert_eq!(json.stderr, note, "{json:?}");
    serde_json::from_str::<Value>(&json.stdout).expect("the plan is JSON");
    // A real run says it before anything else (here it then fails: its results
    // directory cannot be made under a regular file).
    lab.dir.write("plain-file", "");
    let out = lab.dir.path("plain-file").join("results");
    let file_arg = file.display().to_string();
    let run = rubyrace(&["run", &file_arg, "-o", out.to_str().unwrap()]);
    assert_ne!(run.code(), Some(0), "{run:?}");
    assert!(run.stderr.starts_with(&note), "{run:?}");
    // A file that sets them gets no note.
    lab.experiment(
        "batches = 2\n[settings]\napp = \"rack-hello\"\nserver = \"puma\"\nprocesses = 1\nthreads = 1\nwarmup = \"1s\"\nrequests = 100\n",
    );
    let quiet = lab.run(&["--dry-run"], Duration::from_secs(20));
    assert_eq!(quiet.code(), Some(0), "{quiet:?}");
    assert_eq!(quiet.stderr, "", "{quiet:?}");
}

#[test]
fn a_missing_experiment_file_is_reported_without_a_position() {
    let lab = Lab::new("missing");
    let run = lab.run(&["--dry-run"], Duration::from_secs(20));
    assert_eq!(run.code(), Some(2), "{run:?}");
    let file = lab.dir.path("").join("experiment.toml");
    assert_eq!(
        run.stderr,
        format!(
            "cannot read {}: No such file or directory\n1 error in the experiment file; nothing was run\n",
            file.display()
        )
    );
}

#[test]
fn every_problem_of_an_experiment_file_is_reported_at_once() {
    let lab = Lab::new("all-at-once");
    let file = lab.experiment(
        r#"[settings]
path = "nope"
method = "get"
headers = ["NoColon"]
timeout = "0s"
threads = 4

[matrix]
threads = [1, 2]
"#,
    );
    let run = lab.run(&["--dry-run"], Duration::from_secs(20));
    assert_eq!(run.code(), Some(2), "{run:?}");
    let f = file.display();
    // The marker line added to [settings] shifts lines below it by one.
    let expected = format!(
        "{f}:3:8: settings.path: path \"nope\" must start with '/'\n    help: did you mean \"/nope\"?\n\
         {f}:4:10: settings.method: method \"get\" is not an upper-case HTTP method\n    help: did you mean \"GET\"?\n\
         {f}:5:12: settings.headers[0]: header \"NoColon\": expected \"Name: value\"\n\
         {f}:6:11: settings.timeout: timeout must be longer than zero\n    help: a request needs time to answer, e.g. timeout = \"10s\"\n\
         {f}:7:11: settings.threads: `threads` is also a [matrix] axis, at {f}:10:1, whose values would replace this one\n    help: set it in one place: in [settings] or in [matrix]\n\
         5 errors in the experiment file; nothing was run\n"
    );
    assert_eq!(run.stderr, expected);
}

/// An adaptive run: `precision` adds blocks until every comparison is within
/// the target (never before 6 blocks for one comparison, the fewest the rank test can
/// use), or the budget
/// ends; how it ended is stored, printed, and reported with 97.5% intervals.
#[test]
fn an_adaptive_run_adds_blocks_until_precise_enough_or_out_of_budget() {
    // A generous target (the widest the rule accepts). On a quiet machine it is reached as
    // soon as the rule may stop, at 6 blocks; on a noisy one (CI once needed 9) later. The
    // test checks that the rule is applied consistently, not how noisy the machine was.
    let lab = Lab::new("adaptive-reached");
    lab.experiment(&adaptive_experiment("99%", 30));
    let dry = lab.run(&["--dry-run"], Duration::from_secs(20));
    assert!(
        dry.stdout.contains("Adaptive: after 6 blocks, a block at a time until every comparison with threads=1 is within ±99% on throughput (97.5% intervals), at most 30 blocks"),
        "{dry:?}"
    );
    let run = lab.run(&[], Duration::from_secs(300));
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert!(
        run.stderr.contains(
            "precision after 6 blocks (throughput, 97.5% intervals, target ±99%): threads=2 ±"
        ),
        "{run:?}"
    );
    let blocks = assert_stopped_at_the_target(&lab, &run.stdout, "±99%");
    // The rule looked after every block from the sixth on, and stopped at the first that
    // met the target: every earlier look said how many more blocks it wanted.
    for k in 6..blocks {
        assert!(
            run.stderr.contains(&format!("precision after {k} blocks")),
            "{run:?}"
        );
    }
    assert!(
        run.stderr.lines().any(
            |l| l.starts_with(&format!("precision after {blocks} blocks"))
                && l.ends_with("· stopping")
        ),
        "{run:?}"
    );
    let v = lab.report_json();
    assert_eq!(v["confidence"], 0.975);
    assert!(
        v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["kind"] == "adaptive-run"),
        "{v}"
    );
    // A resume of a finished adaptive run adds nothing.
    let resumed = rubyrace(&["run", "--resume", lab.results().to_str().unwrap()]);
    assert_eq!(resumed.code(), Some(0), "{resumed:?}");
    assert_eq!(schedule(&lab.db()).len() as u64, 2 * blocks);
    lab.assert_no_leftovers(Duration::from_secs(2));

    // An impossible target: the budget ends it.
    let lab = Lab::new("adaptive-budget");
    lab.experiment(&adaptive_experiment("0.001%", 7));
    let run = lab.run(&[], Duration::from_secs(180));
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert!(
        run.stdout
            .contains("the run stopped at its block budget (max_blocks = 7)"),
        "{run:?}"
    );
    // The estimate says the budget caps it.
    assert!(
        run.stderr
            .contains(": the budget (max_blocks = 7) ends the run before the target"),
        "{run:?}"
    );
    assert_eq!(schedule(&lab.db()).len(), 14);
    lab.assert_no_leftovers(Duration::from_secs(2));
}

/// Two configurations (Puma with 1 and 2 threads), 2 blocks, adaptive to `precision`.
fn adaptive_experiment(precision: &str, max_batches: u32) -> String {
    format!(
        r#"
name = "adaptive"
batches = 2
precision = "{precision}"
max_batches = {max_batches}

[settings]
app = "rack-hello"
connections = 2
warmup = "200ms"
duration = "600ms"

[matrix]
threads = [1, 2]
"#
    )
}

/// Checks that an adaptive run said it reached `target` after k blocks, and that its store
/// agrees: 2k trials scheduled and stored (two configurations), the end recorded. Returns k.
fn assert_stopped_at_the_target(lab: &Lab, stdout: &str, target: &str) -> u64 {
    let said = format!("every comparison reached {target} on throughput after ");
    let blocks: u64 = stdout
        .split(&said)
        .nth(1)
        .and_then(|rest| rest.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("the run did not say it reached the target:\n{stdout}"));
    assert!(
        (6..=30).contains(&blocks),
        "stopped after {blocks} blocks:\n{stdout}"
    );
    let db = lab.db();
    assert_eq!(
        schedule(&db).len() as u64,
        2 * blocks,
        "blocks 3 to {blocks} were added one by one"
    );
    assert_eq!(trials(&db).len() as u64, 2 * blocks);
    let end: Value = serde_json::from_str(
        &db.query_row(
            "SELECT value FROM meta WHERE key = 'precision_end'",
            [],
            |r| r.get::<_, String>(0),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        (end["reason"].as_str(), end["blocks"].as_u64()),
        (Some("target-reached"), Some(blocks))
    );
    blocks
}

/// An adaptive run killed (SIGKILL, no chance to clean up) after it has added blocks of its
/// own is resumed under the same rule: it goes on adding blocks from where it was, stops
/// when precise enough, and no trial is lost or run twice.
#[test]
fn a_killed_adaptive_run_resumes_under_the_same_rule() {
    let lab = Lab::new("adaptive-resume");
    lab.experiment(&adaptive_experiment("99%", 30));
    let running = lab.spawn_run(&[]);
    // Kill it once block 4 is stored (the plan starts with the 6 blocks the rule needs
    // before it may stop, though the file asks for 2).
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let stored = lab.stored_trials();
        if stored >= 8 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "4 blocks were not stored in time"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: kill(2) on our own child, by pid.
    unsafe { libc::kill(running.pid() as i32, libc::SIGKILL) };
    // (wait's deadline counts from the start of the run)
    let killed = running.wait(Duration::from_secs(300));
    assert_eq!(killed.status.signal(), Some(libc::SIGKILL), "{killed:?}");
    let stored_before: BTreeSet<i64> = trials(&lab.db()).iter().map(|t| t.trial_id).collect();
    assert!(stored_before.len() >= 8);

    let resumed = rubyrace(&["run", "--resume", lab.results().to_str().unwrap()]);
    assert_eq!(resumed.code(), Some(0), "{resumed:?}");
    let blocks = assert_stopped_at_the_target(&lab, &resumed.stdout, "±99%");
    assert!(blocks >= 6, "{resumed:?}");
    // Every trial stored before the kill is still there, once; the rest were added.
    let ids: Vec<i64> = trials(&lab.db()).iter().map(|t| t.trial_id).collect();
    assert_eq!(ids, (0..2 * blocks as i64).collect::<Vec<_>>());
    assert!(stored_before.iter().all(|id| ids.contains(id)));
    lab.assert_no_leftovers(Duration::from_secs(5));
}

/// The adaptive keys are checked like every other: `metric` without `precision` is not
/// silently ignored, and the budget cannot be below the minimum.
#[test]
fn adaptive_keys_without_precision_or_below_the_minimum_are_errors() {
    let lab = Lab::new("adaptive-errors");
    let file = lab.experiment("batches = 5\nmetric = \"cpu_per_request\"\nmax_duration = \"10m\"\n[settings]\napp = \"rack-hello\"\n");
    let run = lab.run(&["--dry-run"], Duration::from_secs(20));
    assert_eq!(run.code(), Some(2), "{run:?}");
    assert!(
        run.stderr.contains(&format!(
            "{}:2:10: metric: metric applies to adaptive runs, and this file sets no precision",
            file.display()
        )),
        "{run:?}"
    );
    assert!(
        run.stderr
            .contains("max_duration: max_duration applies to adaptive runs"),
        "{run:?}"
    );
    lab.experiment(
        "batches = 5\nprecision = \"1\"\nmax_batches = 3\n[settings]\napp = \"rack-hello\"\n",
    );
    let run = lab.run(&["--dry-run"], Duration::from_secs(20));
    assert!(
        run.stderr.contains(
            "precision: expected a percentage above 0% and below 100% such as \"1%\", found"
        ),
        "{run:?}"
    );
    lab.experiment(
        "batches = 5\nprecision = \"1%\"\nmax_batches = 3\n[settings]\napp = \"rack-hello\"\n",
    );
    let run = lab.run(&["--dry-run"], Duration::from_secs(20));
    assert!(
        run.stderr.contains("max_batches = 3 is below batches = 5"),
        "{run:?}"
    );
    // One configuration has nothing to compare; a zero time budget stops
    // the run before it starts; "0%" is refused in words that are true.
    lab.experiment("precision = \"0%\"\nmax_duration = \"0s\"\n[settings]\napp = \"rack-hello\"\n");
    let run = lab.run(&["--dry-run"], Duration::from_secs(20));
    assert_eq!(run.code(), Some(2), "{run:?}");
    for said in [
        "precision: expected a percentage above 0% and below 100%",
        "max_duration = \"0s\" would stop the run before its first block",
    ] {
        assert!(run.stderr.contains(said), "{said}: {run:?}");
    }
    lab.experiment("precision = \"1%\"\n[settings]\napp = \"rack-hello\"\n");
    let run = lab.run(&["--dry-run"], Duration::from_secs(20));
    assert_eq!(run.code(), Some(2), "{run:?}");
    assert!(
        run.stderr
            .contains("precision compares every configuration with the first, and this file has one configuration"),
        "{run:?}"
    );
    // `batches = 2` with precision: the plan holds the 6 blocks the rule needs before it
    // may stop (12 trials), as the dry run promises, not 4.
    lab.experiment(&adaptive_experiment("2%", 30));
    let run = lab.run(&["--dry-run", "--json"], Duration::from_secs(20));
    assert_eq!(run.code(), Some(0), "{run:?}");
    let plan: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(plan["trials"].as_array().map(Vec::len), Some(12), "{plan}");
}

/// A Unicode name keeps its letters in the default results directory,
/// and no name makes a directory that starts with `-` (which the CLI reads as a flag).
#[test]
fn default_results_directories_keep_unicode_names_and_never_start_with_a_dash() {
    let dir = crate::support::TempDir::new("unicode-name");
    for (name, expected) in [
        ("ünïcode-тест", "results/ünïcode-тест-"),
        ("--help me", "results/help-me-"),
    ] {
        let file = dir.write(
            "experiment.toml",
            format!("name = \"{name}\"\n[settings]\napp = \"rack-hello\"\n"),
        );
        let run = rubyrace(&["run", file.to_str().unwrap(), "--dry-run", "--json"]);
        assert_eq!(run.code(), Some(0), "{run:?}");
        let plan: Value = serde_json::from_str(&run.stdout).unwrap();
        let results = plan["results_dir"].as_str().unwrap();
        assert!(results.contains(expected), "{name}: {results}");
    }
}

/// An app that raises at boot. Ruby prints the message first and the
/// backtrace after it, so the end of the log showed only backtrace lines; now the trial's
/// reason carries the exception line, and the progress names the log's path.
#[test]
fn a_failed_boot_shows_the_exception_line_and_the_logs_path() {
    let dir = crate::support::TempDir::new("boot-raises");
    let app = dir.path("app");
    std::fs::create_dir_all(&app).unwrap();
    // A deep stack, so that the backtrace is longer than any tail shown.
    std::fs::write(
        app.join("config.ru"),
        "def deep(n) = n.zero? ? raise(\"boom at boot\") : deep(n - 1)\ndeep(60)\nrun ->(_) { [200, {}, [\"ok\"]] }\n",
    )
    .unwrap();
    let file = dir.write(
        "experiment.toml",
        format!(
            "batches = 1\n[settings]\napp = \"{}\"\nwarmup = \"200ms\"\nduration = \"500ms\"\n",
            app.display()
        ),
    );
    let out = dir.path("results");
    let run = rubyrace(&["run", file.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(run.code(), Some(3), "{run:?}");
    assert!(
        run.stderr.contains("before it was ready: ")
            && run.stderr.contains("boom at boot (RuntimeError)"),
        "{run:?}"
    );
    let log = out.join("trials/00000/server.stderr");
    assert!(
        run.stderr
            .contains(&format!("the whole log: {}", log.display())),
        "{run:?}"
    );
    assert!(log.is_file());
}

/// (46.20) A run whose first block boots nothing (two configurations of an app that
/// raises at boot, four blocks planned) stops after that block with exit 3, each
/// configuration's error line and the resume command, rather than failing all eight
/// trials one after another; a resume runs one more block and stops the same way.
/// One configuration that boots keeps the run going (the fault tests' runs).
#[test]
fn a_run_whose_first_block_boots_nothing_stops_after_it() {
    let dir = crate::support::TempDir::new("boots-nothing");
    let app = dir.path("app");
    std::fs::create_dir_all(&app).unwrap();
    std::fs::write(
        app.join("config.ru"),
        "raise \"no database\"\nrun ->(_) { [200, {}, [\"ok\"]] }\n",
    )
    .unwrap();
    let file = dir.write(
        "experiment.toml",
        format!(
            "batches = 4\n[settings]\napp = \"{}\"\nwarmup = \"200ms\"\nduration = \"500ms\"\n[matrix]\nthreads = [1, 2]\n",
            app.display()
        ),
    );
    let out = dir.path("results");
    let o = out.to_str().unwrap();
    let run = rubyrace(&["run", file.to_str().unwrap(), "-o", o]);
    assert_eq!(run.code(), Some(3), "{run:?}");
    assert!(
        run.stderr
            .contains("stopped after block 1: no trial of the run could run"),
        "{run:?}"
    );
    assert!(
        run.stderr.contains("threads=1: the server exited"),
        "{run:?}"
    );
    assert!(run.stderr.contains("no database (RuntimeError)"), "{run:?}");
    assert!(run.stderr.contains("2 of 8 trials are stored"), "{run:?}");
    assert!(
        run.stderr.contains(&format!("rubyrace run --resume {o}")),
        "{run:?}"
    );
    let resumed = rubyrace(&["run", "--resume", o]);
    assert_eq!(resumed.code(), Some(3), "{resumed:?}");
    assert!(
        resumed.stderr.contains("stopped after block 2"),
        "{resumed:?}"
    );
    assert!(
        resumed.stderr.contains("4 of 8 trials are stored"),
        "{resumed:?}"
    );
}

/// A scenario with `method` in an experiment file is refused in the
/// file's words (it said `--method and --body`, the options of `rubyrace load`).
#[test]
fn a_scenario_with_a_method_is_refused_in_the_files_words() {
    let lab = Lab::new("scenario-method");
    let scenario = lab.dir.write(
        "scenario.toml",
        "[[scenario]]\nname = \"visitor\"\n[[scenario.step]]\nname = \"home\"\npath = \"/\"\n",
    );
    lab.experiment(&format!(
        "batches = 1\n[settings]\napp = \"rack-hello\"\nmethod = \"POST\"\nscenario = \"{}\"\n",
        scenario.display()
    ));
    let run = lab.run(&["--dry-run"], Duration::from_secs(20));
    assert_eq!(run.code(), Some(2), "{run:?}");
    assert!(
        run.stderr.contains(
            "settings.scenario: scenario: each step has its own method and body: the method and body settings do not apply"
        ),
        "{run:?}"
    );
    assert!(!run.stderr.contains("--method"), "{run:?}");
}
