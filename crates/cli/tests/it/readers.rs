//! The readers of a results directory (`report`, `export`, `compare`) against the mistakes
//! and accidents of real use: an output path that names the results database or
//! another file of a results directory, read-only media, a closed stdout or stderr, trial
//! files that are missing or damaged, an interrupted run, the same directory given twice,
//! and two runs that differ in more than one setting. A small real experiment (Puma, the
//! bundled Rack app) is run once by the real binary and copied where a test damages it.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::shared::fixture;
use crate::support::{spawn, Run, TempDir};
use serde_json::Value;

const LEAVE_WAL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/leave_wal.rb");
const READ_ONLY_MOUNT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/read_only_mount.rb"
);

/// Runs a small experiment into `DIR/results`, and returns that path.
fn run_experiment(dir: &Path, toml: &str) -> PathBuf {
    let file = dir.join("experiment.toml");
    std::fs::write(&file, toml).unwrap();
    let out = dir.join("results");
    let run = spawn(&["run", file.to_str().unwrap(), "-o", out.to_str().unwrap()])
        .wait(Duration::from_secs(180));
    assert_eq!(run.code(), Some(0), "{run:?}");
    out
}

/// Rack hello on Puma, connections 1 and 2, three blocks: made once per test run.
fn results() -> PathBuf {
    fixture("readers", |dir| {
        run_experiment(
            dir,
            r#"
name = "readers"
seed = 3
batches = 3

[settings]
app = "rack-hello"
threads = 2
warmup = "200ms"
duration = "700ms"

[matrix]
connections = [1, 2]
"#,
        );
    })
    .join("results")
}

/// A copy of the shared results directory, for a test that damages it.
fn copy_of_results(name: &str) -> (TempDir, PathBuf) {
    let tmp = TempDir::new(name);
    let copy = tmp.path("results");
    copy_dir(&results(), &copy);
    (tmp, copy)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Every file under `dir` with a hash of its bytes and its modification time.
pub(crate) fn fingerprint(dir: &Path) -> BTreeMap<PathBuf, (u64, u64, std::time::SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                stack.push(entry.path());
                continue;
            }
            let bytes = std::fs::read(entry.path()).unwrap();
            let mut h = DefaultHasher::new();
            bytes.hash(&mut h);
            out.insert(
                entry.path().strip_prefix(dir).unwrap().to_path_buf(),
                (bytes.len() as u64, h.finish(), meta.modified().unwrap()),
            );
        }
    }
    out
}

fn rubyrace(args: &[&str]) -> Run {
    spawn(args).wait(Duration::from_secs(60))
}

fn warnings(run: &Run) -> Vec<(String, String)> {
    let v: Value =
        serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {run:?}"));
    v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                w["kind"].as_str().unwrap().to_string(),
                w["message"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The messages of the warnings of `kind` in a JSON report.
fn warnings_of(run: &Run, kind: &str) -> Vec<String> {
    warnings(run)
        .into_iter()
        .filter(|(k, _)| k == kind)
        .map(|(_, m)| m)
        .collect()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Item 1: `-o` naming the results database (or any file of a results directory that is
/// not one of rubyrace's own report files) is refused, and nothing changes; allowed outputs
/// are written whole, through a temporary file and a rename.
#[test]
fn outputs_never_replace_a_results_database_or_a_file_of_a_results_directory() {
    let (_tmp, dir) = copy_of_results("readers-outputs");
    let before = fingerprint(&dir);
    let db = dir.join("results.db");
    let hlog = dir.join("trials/00000/latency.hlog");
    let elsewhere = _tmp.path("copy-of-results.db");
    std::fs::copy(&db, &elsewhere).unwrap();
    let (in_trials, notes, trials) = (
        dir.join("trials/x.html"),
        dir.join("notes.txt"),
        dir.join("trials"),
    );
    let refused: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["report", s(&dir), "--format", "markdown", "-o", s(&db)],
            "is an SQLite database (a results database?); rubyrace never writes over one",
        ),
        (
            vec!["export", s(&dir), "--json", "-o", s(&db)],
            "is an SQLite database (a results database?); rubyrace never writes over one",
        ),
        (
            vec!["report", s(&dir), "--format", "json", "-o", s(&elsewhere)],
            "is an SQLite database",
        ),
        (
            vec!["report", s(&dir), "--format", "csv", "-o", s(&hlog)],
            "is inside the results directory",
        ),
        (
            vec!["report", s(&dir), "--format", "html", "-o", s(&in_trials)],
            "is inside the results directory",
        ),
        (
            vec![
                "compare",
                s(&dir),
                "connections=1",
                "connections=2",
                "-o",
                s(&notes),
            ],
            "is inside the results directory",
        ),
        (vec!["report", s(&dir), "--charts", s(&dir)], "--charts"),
        (
            vec!["report", s(&dir), "-o", s(&trials)],
            "is a directory; give a file name",
        ),
        // Every command that writes a file checks it the same way, before it sends any
        // load or starts any trial (no server listens on port 9).
        (
            vec!["load", "http://127.0.0.1:9/", "-n", "1", "--json", s(&db)],
            "is an SQLite database (a results database?); rubyrace never writes over one",
        ),
        (
            vec!["load", "http://127.0.0.1:9/", "-n", "1", "--raw", s(&hlog)],
            "is inside the results directory",
        ),
        (
            vec!["load", "http://127.0.0.1:9/", "-n", "1", "--hdr", s(&hlog)],
            "is inside the results directory",
        ),
        (
            vec!["trial", "--spec", "no-such-spec.json", "--json", s(&db)],
            "is an SQLite database (a results database?); rubyrace never writes over one",
        ),
    ];
    for (args, message) in &refused {
        let run = rubyrace(args);
        assert_eq!(run.code(), Some(1), "{run:?}");
        assert!(run.stderr.contains(message), "{message:?} not in {run:?}");
        assert!(run.stdout.is_empty(), "printed before refusing: {run:?}");
    }
    assert_eq!(
        fingerprint(&dir),
        before,
        "a refused output changed the results directory"
    );
    assert!(std::fs::read(&elsewhere)
        .unwrap()
        .starts_with(b"SQLite format 3\0"));

    // rubyrace's own report files are allowed, written whole, with no temporary file left.
    let md = dir.join("report.md");
    std::fs::write(
        &md,
        "an older report, longer than the new one would be ".repeat(200),
    )
    .unwrap();
    let run = rubyrace(&["report", s(&dir), "--format", "markdown", "-o", s(&md)]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    let text = std::fs::read_to_string(&md).unwrap();
    assert!(text.starts_with('#') || text.contains("| cohort"), "{text}");
    assert!(!text.contains("an older report"), "{text}");
    let leftovers: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".rubyrace-"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

/// The number of trials `export` reads from `dir`.
fn exported_trials(dir: &Path) -> usize {
    let run = rubyrace(&["export", s(dir), "--json"]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    v["trials"].as_array().unwrap().len()
}

/// Item 2, a run killed mid-write: its write-ahead log holds committed trials that the main
/// file does not, and no process holds it. Readers see those trials, and neither change
/// its `-shm` index nor create one when it is missing (they read a private copy).
#[test]
fn a_write_ahead_log_left_by_a_killed_run_is_read_without_changing_a_byte() {
    let (_tmp, dir) = copy_of_results("readers-wal");
    let all = exported_trials(&dir);
    let db = dir.join("results.db");
    let killed = Command::new("ruby")
        .arg(LEAVE_WAL)
        .arg(&db)
        .status()
        .unwrap();
    assert_eq!(killed.signal(), Some(9), "not ended by SIGKILL: {killed:?}");
    let wal = dir.join("results.db-wal");
    let shm = dir.join("results.db-shm");
    assert!(std::fs::metadata(&wal).unwrap().len() > 0 && shm.exists());

    let before = fingerprint(&dir);
    assert_eq!(
        exported_trials(&dir),
        all - 1,
        "the log's deletion was not read"
    );
    for args in [
        vec!["report", s(&dir), "--format", "json"],
        vec!["watch", s(&dir), "--once"],
    ] {
        let run = rubyrace(&args);
        assert_eq!(run.code(), Some(0), "{run:?}");
        assert_eq!(
            fingerprint(&dir),
            before,
            "{args:?} changed the results directory"
        );
    }

    std::fs::remove_file(&shm).unwrap();
    let before = fingerprint(&dir);
    assert_eq!(exported_trials(&dir), all - 1);
    assert!(!shm.exists(), "a reader created the -shm index");
    assert_eq!(
        fingerprint(&dir),
        before,
        "a reader changed the results directory"
    );
    let private: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("rubyrace-read-")
        })
        .collect();
    assert!(
        private.is_empty(),
        "private copies left behind: {private:?}"
    );
}

/// Item 2: the readers open the database read-only: no `-wal`/`-shm` file, no byte of the
/// directory changed, whatever the format.
#[test]
fn readers_change_no_byte_of_a_results_directory() {
    let (_tmp, dir) = copy_of_results("readers-bytes");
    let before = fingerprint(&dir);
    for args in [
        vec!["report", s(&dir)],
        vec!["report", s(&dir), "--format", "json"],
        vec!["report", s(&dir), "--format", "markdown"],
        vec!["report", s(&dir), "--format", "csv"],
        vec!["report", s(&dir), "--format", "benchstat"],
        vec!["export", s(&dir), "--json"],
        vec!["compare", s(&dir), "connections=1", "connections=2"],
        vec!["watch", s(&dir), "--once"],
    ] {
        let run = rubyrace(&args);
        assert_eq!(run.code(), Some(0), "{run:?}");
        assert_eq!(
            fingerprint(&dir),
            before,
            "{args:?} changed the results directory"
        );
    }
    for suffix in ["-wal", "-shm", "-journal"] {
        assert!(!dir.join(format!("results.db{suffix}")).exists());
    }

    // An empty or foreign results.db is named in the error, and left as it was.
    let (_tmp2, broken) = copy_of_results("readers-broken");
    std::fs::write(broken.join("results.db"), b"").unwrap();
    let run = rubyrace(&["report", s(&broken)]);
    assert_eq!(run.code(), Some(1), "{run:?}");
    assert!(
        run.stderr
            .contains(&format!("{}/results.db is empty", s(&broken))),
        "{run:?}"
    );
    assert_eq!(
        std::fs::metadata(broken.join("results.db")).unwrap().len(),
        0
    );
    std::fs::write(broken.join("results.db"), b"not a database at all").unwrap();
    let run = rubyrace(&["export", s(&broken), "--json"]);
    assert_eq!(run.code(), Some(1), "{run:?}");
    assert!(
        run.stderr.contains(&format!(
            "{}/results.db is not an SQLite database",
            s(&broken)
        )),
        "{run:?}"
    );
}

/// Item 2: on read-only media (a read-only bind mount in a private mount namespace) every
/// reader works.
#[test]
fn readers_work_on_read_only_media() {
    let probe = Command::new("unshare")
        .args(["--map-root-user", "--mount", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        println!("readers: read-only media: NOT RUN, this machine does not allow `unshare --map-root-user --mount`");
        return;
    }
    let (_tmp, dir) = copy_of_results("readers-ro");
    // `rubyrace ARGS` with `dir` mounted read-only, in a private mount namespace.
    let read_only = |args: &[&str]| {
        Command::new("unshare")
            .args([
                "--map-root-user",
                "--mount",
                "ruby",
                READ_ONLY_MOUNT,
                s(&dir),
            ])
            .arg(env!("CARGO_BIN_EXE_rubyrace"))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    for args in [
        vec!["report", s(&dir), "--format", "json"],
        vec!["export", s(&dir), "--json"],
        vec!["compare", s(&dir), "connections=1", "connections=2"],
    ] {
        let out = read_only(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{args:?} on read-only media: {stderr}"
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("connections"), "{args:?}: {stdout}");
    }
    // And writing the default HTML report there fails with the path and the cause.
    let out = read_only(&["report", s(&dir), "--format", "html"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot write {}/report.html", s(&dir)))
            && stderr.contains("Read-only file system"),
        "{stderr}"
    );
}

/// Item 3: a closed stdout and stderr (`| head` that has exited) end the output; no command
/// panics or aborts, and the exit code still tells the outcome.
#[test]
fn a_closed_stdout_and_stderr_end_the_output_without_a_panic() {
    let dir = &results();
    let experiment = TempDir::new("readers-closed");
    let file = experiment.write(
        "experiment.toml",
        "name = \"closed\"\n[settings]\napp = \"rack-hello\"\n",
    );
    let server = crate::support::Server::hello();
    let url = server.url("/");
    let cases: Vec<(Vec<&str>, i32)> = vec![
        (vec!["load", &url, "-d", "200ms", "--json", "-"], 0),
        (vec!["report", s(dir)], 0),
        (vec!["report", s(dir), "--format", "markdown"], 0),
        (vec!["export", s(dir), "--json"], 0),
        (vec!["compare", s(dir), "connections=1", "connections=2"], 0),
        (vec!["rubies"], 0),
        (vec!["ruby", "list"], 0),
        (vec!["run", s(&file), "--dry-run"], 0),
        (
            vec![
                "ruby",
                "build",
                "3.4",
                "--source",
                "/nonexistent/ruby-3.4.tar.gz",
            ],
            1,
        ),
        (vec!["report", "/nonexistent/results"], 1),
    ];
    for (args, code) in cases {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let status = Command::new(env!("CARGO_BIN_EXE_rubyrace"))
            .args(&args)
            .stdin(Stdio::null())
            .stdout(writer.try_clone().unwrap())
            .stderr(writer)
            .status()
            .unwrap();
        assert_eq!(
            (status.code(), status.signal()),
            (Some(code), None),
            "{args:?} with stdout and stderr closed"
        );
    }
}

/// Item 8: a missing or garbled `latency.hlog`, or `trials/` gone, is named in the report
/// with the figures it affects, instead of silently changing the percentiles.
#[test]
fn missing_or_damaged_trial_files_are_named_with_the_figures_they_affect() {
    let (_tmp, dir) = copy_of_results("readers-damaged");
    let report = |dir: &Path| {
        let run = rubyrace(&["report", s(dir), "--format", "json"]);
        assert_eq!(run.code(), Some(0), "{run:?}");
        run
    };
    let clean = report(&dir);
    assert!(
        !warnings(&clean).iter().any(|(k, _)| k == "latency-files"),
        "{:?}",
        warnings(&clean)
    );
    // Trials 0 and 1 are in block 0: one of each configuration.
    std::fs::remove_file(dir.join("trials/00000/latency.hlog")).unwrap();
    std::fs::write(
        dir.join("trials/00001/latency.hlog"),
        b"#[garbled\nnot a histogram\n",
    )
    .unwrap();
    let run = report(&dir);
    let damaged = warnings_of(&run, "latency-files");
    assert_eq!(damaged.len(), 2, "{damaged:?}");
    let all = format!("{damaged:?}");
    assert!(
        all.contains("trials/00000/latency.hlog is missing"),
        "{all}"
    );
    assert!(all.contains("of trial 1 cannot be read"), "{all}");
    assert!(
        all.contains(
            "trials/00001/latency.hlog: not an HdrHistogram interval log (unreadable from byte 10)"
        ),
        "the cause is said in words, not as a Rust value: {all}"
    );
    assert!(all.contains("use 2 of 3 trials"), "{all}");
    assert!(all.contains("merged latency percentiles"), "{all}");
    let table = rubyrace(&["report", s(&dir)]);
    assert!(
        table.stdout.contains("latency-files")
            || table.stdout.contains("latency histograms of trial"),
        "{table:?}"
    );

    std::fs::remove_dir_all(dir.join("trials")).unwrap();
    let run = report(&dir);
    let damaged = warnings_of(&run, "latency-files");
    assert_eq!(damaged.len(), 2, "{damaged:?}");
    assert!(
        format!("{damaged:?}").contains("use 0 of 3 trials"),
        "{damaged:?}"
    );
}

/// Item 7: a report of an interrupted run says it is incomplete, how much is stored, which
/// configurations are missing, and the command that finishes it.
#[test]
fn a_report_of_an_incomplete_run_says_so_with_the_resume_command() {
    let (_tmp, dir) = copy_of_results("readers-incomplete");
    {
        // What an interruption after the first trial leaves: a prefix of the schedule.
        let db = rusqlite::Connection::open(dir.join("results.db")).unwrap();
        db.execute("DELETE FROM trials WHERE trial_id > 0", [])
            .unwrap();
    }
    let run = rubyrace(&["report", s(&dir), "--format", "json"]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    let incomplete = warnings_of(&run, "incomplete-run");
    assert_eq!(incomplete.len(), 1, "{run:?}");
    let m = &incomplete[0];
    assert!(
        m.contains("is incomplete: 1 of 6 planned trials are stored"),
        "{m}"
    );
    assert!(
        m.contains("has no trial yet and is not in this report"),
        "{m}"
    );
    assert!(
        m.contains(&format!("`rubyrace run --resume {}`", s(&dir))),
        "{m}"
    );
    let table = rubyrace(&["report", s(&dir)]);
    assert!(table.stdout.contains("rubyrace run --resume"), "{table:?}");
}

/// Items 5 and 6: the same directory twice is refused; two runs that differ in more than
/// the setting under test are compared with every difference named.
#[test]
fn compare_refuses_one_directory_twice_and_names_every_difference() {
    let dir = &results();
    let run = rubyrace(&["compare", s(dir), s(dir)]);
    assert_eq!(run.code(), Some(1), "{run:?}");
    assert!(
        run.stderr.contains("are the same results directory"),
        "{run:?}"
    );
    let alias = format!("{}/../results", s(dir));
    let run = rubyrace(&["report", s(dir), &alias]);
    assert_eq!(run.code(), Some(1), "{run:?}");

    // A copy is an identical setup: nothing differs.
    let (_tmp, copy) = copy_of_results("readers-copy");
    let run = rubyrace(&["compare", s(dir), s(&copy), "--format", "json"]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert!(
        !warnings(&run).iter().any(|(k, _)| k == "sides-differ"),
        "{run:?}"
    );
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["group_by"][0], "source");

    let other_tmp = TempDir::new("readers-other");
    let other = &run_experiment(
        &other_tmp.path(""),
        r#"
name = "readers-other"
batches = 2

[settings]
app = "sinatra-hello"
threads = 2
connections = 2
warmup = "200ms"
duration = "700ms"
"#,
    );
    let run = rubyrace(&["compare", s(dir), s(other), "--format", "json"]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    let differ = warnings_of(&run, "sides-differ");
    assert_eq!(differ.len(), 1, "{run:?}");
    assert!(
        differ[0].contains("settings.app (rack-hello vs sinatra-hello)"),
        "{}",
        differ[0]
    );
    assert!(
        differ[0].contains("settings.load.connections (1 | 2 vs 2)"),
        "{}",
        differ[0]
    );
    // The `connections` axis is that same difference: named once.
    assert!(
        differ[0].contains("differ in 3 settings:") && !differ[0].contains(" connections ("),
        "{}",
        differ[0]
    );
    let table = rubyrace(&["compare", s(dir), s(other)]);
    assert!(
        table.stdout.contains("the compared runs differ in"),
        "{table:?}"
    );
    // Each side of that comparison pools its run's two configurations
    // (connections 1 and 2): said, with what differs.
    let pooled = warnings_of(&run, "configurations-differ");
    assert!(
        pooled.iter().any(|m| m
            .contains("holds 2 configurations that differ in settings.load.connections (1 | 2)")),
        "{run:?}"
    );

    // Two runs whose labels match but whose settings do not, reported together: each
    // cohort pools a 2-thread and a 4-thread configuration, and the report says so.
    let four_tmp = TempDir::new("readers-four");
    let four = &run_experiment(
        &four_tmp.path(""),
        r#"
name = "readers-four"
seed = 3
batches = 2

[settings]
app = "rack-hello"
threads = 4
warmup = "200ms"
duration = "700ms"

[matrix]
connections = [1, 2]
"#,
    );
    let run = rubyrace(&["report", s(dir), s(four), "--format", "json"]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    let pooled = warnings_of(&run, "configurations-differ");
    assert_eq!(pooled.len(), 2, "{run:?}");
    assert!(
        pooled
            .iter()
            .all(|m| m.contains("differ in settings.threads (2 | 4)")),
        "{pooled:?}"
    );
    // A run reported alone pools nothing.
    let run = rubyrace(&["report", s(dir), "--format", "json"]);
    assert!(
        warnings_of(&run, "configurations-differ").is_empty(),
        "{run:?}"
    );
}

/// Item 20: `--charts FILE` used to print the whole report before failing on the path; and
/// the plan said "1 configurations" and "1 connections".
#[test]
fn bad_chart_paths_fail_before_any_output_and_counts_agree_in_number() {
    let tmp = TempDir::new("readers-charts");
    let file = tmp.write("not-a-dir", "x");
    let run = rubyrace(&["report", s(&results()), "--charts", s(&file)]);
    assert_eq!(run.code(), Some(1), "{run:?}");
    assert!(
        run.stdout.is_empty(),
        "the report was printed before the error: {run:?}"
    );
    assert!(
        run.stderr.contains("this is a file; give a directory"),
        "{run:?}"
    );

    let experiment = tmp.write(
        "one.toml",
        "name = \"one\"\nbatches = 1\n[settings]\napp = \"rack-hello\"\nconnections = 1\n",
    );
    let run = rubyrace(&["run", s(&experiment), "--dry-run"]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert!(
        run.stdout.contains("1 configuration × 1 block = 1 trial,"),
        "{run:?}"
    );
    assert!(run.stdout.contains("(1×1), 1 connection,"), "{run:?}");

    // The same one-trial experiment, run and reported: every count agrees in number.
    let experiment = tmp.write(
        "one-run.toml",
        "name = \"one\"\nbatches = 1\n[settings]\napp = \"rack-hello\"\nconnections = 1\nwarmup = \"200ms\"\nduration = \"500ms\"\n",
    );
    let out = tmp.path("one-results");
    let run = rubyrace(&["run", s(&experiment), "-o", s(&out)]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert!(run.stdout.contains("The trial is stored in"), "{run:?}");
    let run = rubyrace(&["report", s(&out), "--format", "html"]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("1 trial from 1 results directory"), "{html}");
    assert!(
        html.contains("experiment one · 1 trial ·"),
        "no '1 trial' in the charts' caption"
    );
    assert!(
        !html.contains(" 1 trials"),
        "a '1 trials' in the HTML report"
    );
}
