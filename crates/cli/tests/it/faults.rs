//! The fault-injection suite: the real `rubyrace run` against servers that crash,
//! hang, answer errors or garbage, ignore `Connection: close`, are too slow, hold their port
//! after exiting or daemonize; against a disk that fills up while results are written; and
//! against signals (SIGINT, SIGTERM, SIGKILL) at random moments, each followed by `--resume`.
//!
//! For every fault the suite checks what rubyrace guarantees (docs/RELIABILITY.md): the trial
//! is stored with the right status and a reason a user understands, the run goes on to the
//! other trials, nothing completed is lost, and no process is left behind. Every server an
//! experiment starts carries a unique `RUBYRACE_TEST_MARKER` in its environment, inherited by
//! anything it forks (daemons included), so leftovers are found by scanning /proc and killed
//! by pid, never by name.
//!
//! The suite prints its figures (lines starting with `faults:`); see them with
//! `cargo test --release -p rubyrace-cli --test it faults:: -- --nocapture`.

use std::collections::BTreeMap;
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime};

use crate::support::lab::{
    assert_store_equals_schedule, schedule, trials, Lab, TrialRow, INTERRUPTIBLE,
};
use crate::support::{spawn, Run};
use rusqlite::Connection;

pub(crate) const FAULT_SERVER: &str = concat!(
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

/// A server that dies of an exception mid-measurement: the reason names the exception, from
/// the head of its log (a long backtrace would push it out of the log's end).
#[test]
fn a_server_that_raises_mid_trial_fails_it_naming_the_exception() {
    let (_lab, _run, row) = one_fault_trial("raise-after-1s", "max_error_rate = 100.0", "failed");
    let reason = row.reason.unwrap();
    assert!(
        reason.starts_with("the server exited during the measurement (exit status 1): "),
        "{reason}"
    );
    assert!(
        reason.contains("planted failure mid-trial (RuntimeError)"),
        "{reason}"
    );
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
    let (_lab, run, row) = one_fault_trial("crash-on-boot", "", "failed");
    assert!(
        run.elapsed < Duration::from_secs(5),
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

/// A second Ctrl-C quits at once, and still says how to resume (it
/// exited without a word); the servers die with rubyrace, and the resume completes the run.
#[test]
fn a_double_ctrl_c_quits_at_once_with_the_resume_command() {
    let lab = Lab::new("double-sigint");
    lab.experiment(INTERRUPTIBLE);
    let results = lab.results();
    let running = lab.spawn_run(&[]);
    wait_for_trials(&lab, 2, Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: the pid of the rubyrace this test started, twice.
    unsafe { libc::kill(running.pid() as i32, libc::SIGINT) };
    std::thread::sleep(Duration::from_millis(50));
    unsafe { libc::kill(running.pid() as i32, libc::SIGINT) };
    let run = running.wait(Duration::from_secs(30));
    assert_eq!(run.code(), Some(130), "{run:?}");
    assert!(
        run.stderr.contains("quit at once")
            && run
                .stderr
                .contains(&format!("rubyrace run --resume {}", results.display())),
        "{run:?}"
    );
    lab.assert_no_leftovers(Duration::from_secs(10));
    let resumed =
        spawn(&["run", "--resume", results.to_str().unwrap()]).wait(Duration::from_secs(120));
    assert_eq!(resumed.code(), Some(0), "{resumed:?}");
    let ids: Vec<i64> = trials(&lab.db()).iter().map(|t| t.trial_id).collect();
    assert_eq!(
        ids,
        vec![0, 1, 2, 3, 4, 5],
        "a trial was lost or duplicated"
    );
}

#[test]
fn ctrl_c_mid_trial_then_resume_loses_and_duplicates_nothing() {
    interrupt_and_resume("sigint", libc::SIGINT);
}

#[test]
fn sigkill_mid_trial_leaves_no_server_and_resume_completes_the_run() {
    interrupt_and_resume("sigkill", libc::SIGKILL);
}

// ---------------------------------------------------------------------------------------
// Helpers of the new faults
// ---------------------------------------------------------------------------------------

/// An experiment of `custom` fault-server configurations run in file order, one block.
fn fault_configs(name: &str, configs: &[(&str, &str)], extra_settings: &str) -> String {
    let mut toml = format!(
        r#"
name = "{name}"
batches = 1
order = "sequential"
# A fault in a trial of its own, one server up at a time (the interleaved design's faults
# are tested by faults_in_an_interleaved_block_...).
design = "blocks"

[settings]
server = "custom"
app = "rack-hello"
warmup = "500ms"
duration = "2s"
readiness_timeout = "3s"
connections = 2
{extra_settings}
"#
    );
    for (label, mode) in configs {
        toml.push_str(&format!(
            r#"
[[configs]]
label = "{label}"
server_argv = ["{{ruby}}", "{FAULT_SERVER}", "{{port}}", "{mode}"]
"#
        ));
    }
    toml
}

/// Runs `fault_configs(name, configs, extra_settings)` to its end; checks that the run went
/// on (exit status 3: a trial is not valid) and stored one trial per configuration. Returns
/// the lab, the run, the trials in schedule order and how long the run took.
fn run_fault_configs(
    name: &str,
    configs: &[(&str, &str)],
    extra_settings: &str,
) -> (Lab, Run, Vec<TrialRow>, Duration) {
    let lab = Lab::new(name);
    lab.experiment(&fault_configs(name, configs, extra_settings));
    let run = lab.run(&[], Duration::from_secs(60));
    let took = run.elapsed;
    assert_eq!(run.code(), Some(3), "{run:?}");
    let rows = trials(&lab.db());
    assert_eq!(rows.len(), configs.len(), "{run:?}");
    // The run's last words name each unusable trial with its block, status and reason.
    let unusable: Vec<&TrialRow> = rows.iter().filter(|r| r.status != "valid").collect();
    let mut named = format!(
        "rubyrace: {} trial(s) failed or were invalid:",
        unusable.len()
    );
    for r in &unusable {
        named.push_str(&format!(
            "\n  block {} · {} · {}: {}",
            r.block + 1,
            r.label,
            r.status,
            r.reason.as_deref().unwrap_or("no reason recorded")
        ));
    }
    assert!(
        run.stderr.ends_with(&format!("{named}\n")),
        "{named}\n{run:?}"
    );
    (lab, run, rows, took)
}

use testkit::free_port;

/// Prints the line of one fault for docs/RELIABILITY.md: the fault, the verdict, and what
/// was lost and left (the caller has asserted both are zero).
fn figure(fault: &str, row: &TrialRow) {
    println!(
        "faults: {fault}: trial {} {}: {:?}; run went on, trials lost 0, orphans 0",
        row.trial_id,
        row.status,
        row.reason.as_deref().unwrap_or("")
    );
}

/// Trial ids stored, in order.
fn stored_ids(db: &Connection) -> Vec<i64> {
    trials(db).iter().map(|t| t.trial_id).collect()
}

/// The pids of the live processes carrying the lab's marker whose parent is `parent`.
fn children_with_marker(lab: &Lab, parent: i32) -> Vec<i32> {
    lab.leftovers()
        .into_iter()
        .filter(|pid| ppid(*pid) == Some(parent))
        .collect()
}

fn ppid(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

fn alive(pid: i32) -> bool {
    // A zombie (state Z) is not alive.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s[s.rfind(')')? + 2..].chars().next())
        .is_some_and(|state| state != 'Z')
}

/// Waits until GET / on `port` answers 200.
fn wait_answering(port: u16, limit: Duration) {
    use std::io::{Read, Write};
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let _ = s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            let mut buf = [0u8; 12];
            if s.read_exact(&mut buf).is_ok() && buf.starts_with(b"HTTP/1.1 200") {
                return;
            }
        }
        assert!(Instant::now() < deadline, "port {port} never answered 200");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !f() {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------------------------------
// Servers that misbehave during the measurement
// ---------------------------------------------------------------------------------------

#[test]
fn a_server_that_hangs_mid_measurement_is_ended_by_the_load_timeout() {
    let started = Instant::now();
    let (_lab, run, row) = one_fault_trial("hang-after-ready", "timeout = \"1s\"", "failed");
    let reason = row.reason.clone().unwrap();
    assert!(
        reason.starts_with("no response was completed (") && reason.contains(" timeout"),
        "{reason}"
    );
    let load = &row.result["load"];
    assert!(load["errors"]["timeout"].as_u64().unwrap() >= 1, "{load}");
    assert_eq!(load["requests"], 0, "{load}");
    // Readiness, 0.5 s of warmup, 2 s of measurement, the stop: not a hang.
    assert!(started.elapsed() < Duration::from_secs(20), "{run:?}");
    figure("hangs after readiness", &row);
}

#[test]
fn a_server_answering_500_to_every_10th_request_makes_the_trial_invalid_with_its_counts() {
    let (lab, _run, row) = one_fault_trial("error-every-10th", "", "invalid");
    let reason = row.reason.clone().unwrap();
    assert!(
        reason.starts_with("error rate ") && reason.contains("exceeds max_error_rate 0%"),
        "{reason}"
    );
    assert!(reason.contains(" × 500"), "{reason}");
    let load = &row.result["load"];
    let errors = load["status"]["500"].as_u64().unwrap();
    let ok = load["status"]["200"].as_u64().unwrap();
    let rate = load["error_rate"].as_f64().unwrap();
    assert!(errors > 0 && ok > 8 * errors, "{load}");
    assert!((0.07..0.13).contains(&rate), "error rate {rate}");
    // The store's column has it too, for queries and reports.
    let stored: f64 = lab
        .db()
        .query_row("SELECT error_rate FROM trials", [], |r| r.get(0))
        .unwrap();
    assert!((stored - rate).abs() < 1e-12, "{stored} != {rate}");
    figure("500 to every 10th request", &row);
}

#[test]
fn a_server_slower_than_the_timeout_has_its_timeouts_counted_and_the_trial_invalid() {
    let (_lab, _run, row) = one_fault_trial("slow", "timeout = \"1s\"", "invalid");
    let reason = row.reason.clone().unwrap();
    assert!(reason.starts_with("error rate "), "{reason}");
    assert!(reason.contains(" timeout"), "{reason}");
    let load = &row.result["load"];
    assert!(load["errors"]["timeout"].as_u64().unwrap() >= 1, "{load}");
    assert!(load["requests"].as_u64().unwrap() >= 1, "{load}");
    // A timed-out request is not a latency of 5 s: nothing above the timeout is recorded.
    assert!(
        load["latency_us"]["max"].as_f64().unwrap() < 1.5e6,
        "{load}"
    );
    figure("answers after 5 s (timeout 1 s)", &row);
}

#[test]
fn a_server_ignoring_connection_close_does_not_hang_the_load_and_invalidates_the_trial() {
    let (lab, run, rows, took) = run_fault_configs(
        "ignore-close",
        &[("honours", "good"), ("ignores", "ignore-close")],
        "mode = \"close-header\"",
    );
    assert!(took < Duration::from_secs(30), "{run:?}");
    // The control: a server that closes is measured as usual.
    let honours = &rows[0];
    assert_eq!(honours.status, "valid", "{:?}", honours.reason);
    assert_eq!(honours.result["load"]["close_ignored"], 0);
    // The fault: rubyrace closed after close_grace each time, counted it, and says so.
    let ignores = &rows[1];
    assert_eq!(ignores.status, "invalid", "{:?}", ignores.reason);
    let reason = ignores.reason.clone().unwrap();
    assert!(
        reason.starts_with("the server ignored `Connection: close` on ")
            && reason.contains("waited 100 ms for each close"),
        "{reason}"
    );
    let load = &ignores.result["load"];
    let requests = load["requests"].as_u64().unwrap();
    let ignored = load["close_ignored"].as_u64().unwrap();
    // Every response was followed by the client's own close: one request per connection,
    // none counted twice, none lost.
    assert!(requests >= 4, "{load}");
    assert!(ignored + 2 >= requests && ignored <= requests + 2, "{load}");
    assert!(
        load["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("ignored `Connection: close`")),
        "{load}"
    );
    lab.assert_no_leftovers(Duration::from_secs(2));
    figure("ignores Connection: close", ignores);
}

/// Puma in cluster mode (2 workers) on the bundled Rack app; the test kills a worker in
/// trial 0 and the master in trial 1 with SIGKILL, mid-measurement; trial 2 is left alone.
#[test]
fn sigkill_to_a_puma_worker_or_master_mid_measurement_is_named_in_the_reason() {
    let lab = Lab::new("puma-kill");
    let port = free_port();
    lab.experiment(&format!(
        r#"
name = "puma-kill"
batches = 3

[settings]
app = "rack-hello"
server = "puma"
processes = 2
threads = 2
connections = 4
port = {port}
warmup = "500ms"
duration = "3s"
"#
    ));
    let file = lab.dir.path("experiment.toml");
    let results = lab.results();
    let running = spawn(&[
        "run",
        file.to_str().unwrap(),
        "-o",
        results.to_str().unwrap(),
    ]);
    let rubyrace = running.pid() as i32;
    let mut masters = Vec::new();
    let mut killed = Vec::new();
    for trial in 0..2 {
        // This trial's master: a child of rubyrace with the marker and two children (the
        // workers), not the last trial's.
        let mut master = 0;
        let mut workers = Vec::new();
        wait_until(
            "a new Puma master with 2 workers",
            Duration::from_secs(60),
            || {
                for p in children_with_marker(&lab, rubyrace) {
                    if masters.contains(&p) {
                        continue;
                    }
                    workers = children_with_marker(&lab, p);
                    if workers.len() == 2 {
                        master = p;
                        return true;
                    }
                }
                false
            },
        );
        masters.push(master);
        wait_answering(port, Duration::from_secs(30));
        // Past the warmup, inside the 3 s measurement.
        std::thread::sleep(Duration::from_millis(1500));
        let victim = if trial == 0 { workers[0] } else { master };
        assert!(alive(victim));
        // SAFETY: a process of the server this test's rubyrace started (found as a child of
        // it, with the test's marker).
        unsafe { libc::kill(victim, libc::SIGKILL) };
        killed.push(victim);
    }
    let run = running.wait(Duration::from_secs(120));
    assert_eq!(run.code(), Some(3), "{run:?}");
    let rows = trials(&lab.db());
    assert_eq!(stored_ids(&lab.db()), vec![0, 1, 2], "{run:?}");

    // Puma reaps a dead worker within milliseconds (its SIGCHLD trap wakes the master), so
    // rubyrace may or may not read the status first: the reason names the death either way,
    // and the signal when it was read (see the kill-worker fault for a deterministic one).
    let worker = &rows[0];
    assert_eq!(worker.status, "invalid", "{:?}", worker.reason);
    let reason = worker.reason.clone().unwrap();
    let named = format!(
        "a process of the server died during the measurement: pid {} (puma: cluster worker ",
        killed[0]
    );
    assert!(reason.starts_with(&named), "{reason}");
    let signal_read = reason.contains(") ended: killed by signal 9 (SIGKILL)");
    assert!(
        signal_read
            || reason.contains(") ended (its parent reaped it before its status could be read)"),
        "{reason}"
    );
    println!("faults: Puma worker SIGKILL: signal read before Puma reaped it: {signal_read}");
    let master = &rows[1];
    assert_eq!(master.status, "failed", "{:?}", master.reason);
    assert_eq!(
        master.reason.as_deref(),
        Some("the server exited during the measurement (killed by signal 9 (SIGKILL))")
    );
    assert_eq!(master.result["server"]["ended"]["stopped_by"], "exited");

    let untouched = &rows[2];
    assert_eq!(untouched.status, "valid", "{:?}", untouched.reason);
    assert!(
        run.stderr.contains("died during the measurement"),
        "{run:?}"
    );
    lab.assert_no_leftovers(Duration::from_secs(5));
    for pid in masters {
        assert!(!alive(pid), "Puma master {pid} survived");
    }
    figure("SIGKILL to a Puma worker", worker);
    figure("SIGKILL to the Puma master", master);
}

// ---------------------------------------------------------------------------------------
// Servers that leave their process group
// ---------------------------------------------------------------------------------------

/// The orphan's pid, read from a reason naming it.
fn orphan_pid(reason: &str) -> i32 {
    let after = reason
        .split("killed by rubyrace: pid ")
        .nth(1)
        .unwrap_or_else(|| panic!("no orphan in {reason}"));
    after.split(' ').next().unwrap().parse().unwrap()
}

#[test]
fn a_child_holding_the_port_after_the_server_exits_is_killed_and_the_next_trial_works() {
    // A fixed port: had the child survived, the next trial could not have it.
    let port = free_port();
    let (lab, _, rows, _) = run_fault_configs(
        "hold-port",
        &[("holds", "hold-port"), ("next", "good")],
        &format!("port = {port}"),
    );
    let holds = &rows[0];
    assert_eq!(holds.status, "failed", "{:?}", holds.reason);
    let reason = holds.reason.clone().unwrap();
    assert!(
        reason.starts_with("the server exited during the measurement (exit status 0); 1 process was left running outside its process group, killed by rubyrace: pid "),
        "{reason}"
    );
    assert!(
        reason.contains(&format!("fault_server.rb {port} hold-port)")),
        "{reason}"
    );
    assert!(reason.ends_with("does it daemonize?)"), "{reason}");
    let orphan = orphan_pid(&reason);
    assert!(!alive(orphan), "the child holding the port survived");
    assert_eq!(holds.result["server"]["orphans"][0]["pid"], orphan);
    let next = &rows[1];
    assert_eq!(next.status, "valid", "{:?}", next.reason);
    lab.assert_no_leftovers(Duration::from_secs(2));
    TcpListener::bind(("127.0.0.1", port)).expect("the port is free again");
    figure("child keeps the port after the server exits", holds);
}

#[test]
fn a_server_that_daemonizes_fails_its_trial_and_the_daemon_is_killed() {
    let (lab, run, rows, took) = run_fault_configs(
        "daemonize",
        &[("daemon", "daemonize"), ("next", "good")],
        "",
    );
    let daemon = &rows[0];
    assert_eq!(daemon.status, "failed", "{:?}", daemon.reason);
    let reason = daemon.reason.clone().unwrap();
    assert!(
        reason.starts_with("the server exited (exit status 0) before it was ready; 1 process was left running outside its process group, killed by rubyrace: pid "),
        "{reason}"
    );
    assert!(reason.contains("daemonize"), "{reason}");
    let orphan = orphan_pid(&reason);
    assert!(!alive(orphan), "the daemon survived");
    // Failed at once, not after the readiness timeout.
    assert!(daemon.result["wall_s"].as_f64().unwrap() < 3.0, "{run:?}");
    assert_eq!(rows[1].status, "valid", "{:?}", rows[1].reason);
    assert!(took < Duration::from_secs(30));
    lab.assert_no_leftovers(Duration::from_secs(2));
    figure("daemonizes (Process.daemon)", daemon);
}

/// A process outside the server's tree answers on the server's port (as another server
/// that took the port between rubyrace's pick and the server's bind would): the trial fails
/// at readiness, naming that process, and is never loaded; the process is killed as an
/// orphan of the server (it carries the server's marker), and the next trial works.
#[test]
fn an_answer_from_a_process_outside_the_servers_tree_fails_readiness() {
    let (lab, run, rows, _) = run_fault_configs(
        "listener-escapes",
        &[("escapes", "listener-escapes"), ("next", "good")],
        "",
    );
    let escapes = &rows[0];
    assert_eq!(escapes.status, "failed", "{:?}", escapes.reason);
    let reason = escapes.reason.clone().unwrap();
    assert!(
        reason.starts_with("GET / on 127.0.0.1:")
            && reason.contains(", but not by the server alone: pid "),
        "{reason}"
    );
    assert!(
        reason.contains("listener-escapes) listens on it, and no process of the server does"),
        "{reason}"
    );
    assert!(escapes.result["load"].is_null(), "loaded: {run:?}");
    assert_eq!(rows[1].status, "valid", "{:?}", rows[1].reason);
    lab.assert_no_leftovers(Duration::from_secs(2));
    figure("another process answers on the server's port", escapes);
}

// ---------------------------------------------------------------------------------------
// A full disk
// ---------------------------------------------------------------------------------------

const DISK_EXPERIMENT: &str = r#"
name = "disk-full"
batches = 10

[settings]
server = "custom"
server_argv = ["{ruby}", "FAULT_SERVER", "{port}", "good"]
app = "rack-hello"
warmup = "100ms"
duration = "300ms"
connections = 2
"#;

/// Runs `rubyrace ARGS` with RLIMIT_FSIZE at `limit` bytes and SIGXFSZ ignored, so a write
/// past the limit fails with EFBIG as a write to a full disk fails with ENOSPC; unprivileged.
pub(crate) fn run_with_file_size_limit(args: &[&str], limit: u64, deadline: Duration) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rubyrace"));
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let rlim = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &rlim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    wait_command(cmd, args, deadline)
}

/// Runs a prepared command, killing it (by its pid) past `deadline`.
fn wait_command(mut cmd: Command, args: &[&str], deadline: Duration) -> Run {
    let started = Instant::now();
    let child = cmd.spawn().expect("start rubyrace");
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let output = match rx.recv_timeout(deadline) {
        Ok(o) => o.unwrap(),
        Err(_) => {
            // SAFETY: our own child, not yet reaped (its waiter has not returned).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("rubyrace {args:?} still running after {deadline:?}: killed");
        }
    };
    Run {
        status: output.status,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        elapsed: started.elapsed(),
        args: args.iter().map(|a| a.to_string()).collect(),
    }
}

/// (trial_id, finished_at, result JSON) of every stored trial.
fn snapshot(db: &Connection) -> Vec<(i64, String, String)> {
    db.prepare("SELECT trial_id, finished_at, result FROM trials ORDER BY trial_id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// After a failed write: the error names the path and the cause, the run exits 1, what
/// was stored is a prefix of the schedule of intact trials, nothing runs; then a resume
/// with space completes the run and keeps the earlier trials untouched.
/// `results` is the directory the run wrote, which the error must name; `db_dir` holds
/// what it left (the same directory, or a copy of it); `resume` resumes the run and
/// returns where the completed results are. With `all_valid`, every trial must be valid
/// (the fault suite); without (the soak, on a machine it loads), a trial may be stored
/// failed or invalid for the machine's sake, but stored it must be.
fn check_disk_full_then_resume(
    lab: &Lab,
    failed: &Run,
    results: &Path,
    db_dir: &Path,
    causes: &[&str],
    all_valid: bool,
    resume: impl FnOnce() -> (Run, PathBuf),
) -> usize {
    assert_eq!(failed.code(), Some(1), "{failed:?}");
    assert!(
        failed.stderr.contains("rubyrace: the run stopped: "),
        "{failed:?}"
    );
    assert!(
        causes.iter().any(|c| failed.stderr.contains(c)),
        "none of {causes:?} in {failed:?}"
    );
    assert!(
        failed.stderr.contains(&results.display().to_string()),
        "the error does not name the path: {failed:?}"
    );
    assert!(
        failed.stderr.contains("rubyrace run --resume"),
        "{failed:?}"
    );
    lab.assert_no_leftovers(Duration::from_secs(5));
    let db = Connection::open(db_dir.join("results.db")).unwrap();
    let before = snapshot(&db);
    let ids: Vec<i64> = before.iter().map(|t| t.0).collect();
    let total = schedule(&db).len();
    assert!(
        !ids.is_empty() && ids.len() < total,
        "stored {ids:?} of {total}"
    );
    assert_eq!(
        ids,
        (0..ids.len() as i64).collect::<Vec<_>>(),
        "not a prefix"
    );
    for row in trials(&db).iter().filter(|_| all_valid) {
        assert_eq!(row.status, "valid", "{:?}", row.reason);
    }
    drop(db);

    let (resumed, db_dir) = resume();
    let complete: &[i32] = if all_valid { &[0] } else { &[0, 3] };
    assert!(
        resumed.code().is_some_and(|c| complete.contains(&c)),
        "{resumed:?}"
    );
    let db = Connection::open(db_dir.join("results.db")).unwrap();
    assert_store_equals_schedule(&db);
    let after = snapshot(&db);
    assert_eq!(
        &after[..before.len()],
        &before[..],
        "a stored trial changed"
    );
    for row in trials(&db) {
        if all_valid {
            assert_eq!(row.status, "valid", "{:?}", row.reason);
        }
        // Every file a trial lists is there, whole (the rerun replaced any cut one).
        for f in row.result["files"].as_array().unwrap() {
            let path = db_dir
                .join(format!("trials/{:05}", row.trial_id))
                .join(f.as_str().unwrap());
            assert!(path.exists(), "{}", path.display());
        }
    }
    lab.assert_no_leftovers(Duration::from_secs(5));
    before.len()
}

#[test]
fn a_full_disk_stops_the_run_with_the_path_and_cause_and_resume_completes_it() {
    let lab = Lab::new("disk-full");
    lab.experiment(&DISK_EXPERIMENT.replace("FAULT_SERVER", FAULT_SERVER));
    let file = lab.dir.path("experiment.toml");
    let results = lab.results();
    let args = [
        "run",
        file.to_str().unwrap(),
        "-o",
        results.to_str().unwrap(),
    ];
    // Enough for the store and a few trials, not for ten.
    let failed = run_with_file_size_limit(&args, 160 * 1024, Duration::from_secs(60));
    let stored = check_disk_full_then_resume(
        &lab,
        &failed,
        &results,
        &results,
        &["File too large"],
        true,
        || {
            let resumed = spawn(&["run", "--resume", results.to_str().unwrap()])
                .wait(Duration::from_secs(60));
            (resumed, results.clone())
        },
    );
    println!(
        "faults: disk full (RLIMIT_FSIZE 160 KiB, EFBIG): the run stopped after {stored} of 10 trials with {:?}; resume completed 10 of 10, trials lost 0, orphans 0",
        failed
            .stderr
            .lines()
            .find(|l| l.starts_with("rubyrace: the run stopped: "))
            .unwrap_or("")
    );
}

const TMPFS_DISK_FULL: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/tmpfs_disk_full.rb"
);

/// What `tmpfs_disk_full.rb` recorded of one rubyrace run.
fn recorded_run(out: &Path, name: &str, args: &[&str]) -> Run {
    let text = std::fs::read_to_string(out.join(format!("{name}.json")))
        .unwrap_or_else(|e| panic!("{name}.json: {e}"));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let status = match (v["code"].as_i64(), v["signal"].as_i64()) {
        (Some(code), _) => ExitStatus::from_raw((code as i32) << 8),
        (None, Some(signal)) => ExitStatus::from_raw(signal as i32),
        _ => panic!("{name}.json: no status: {v}"),
    };
    Run {
        status,
        stdout: v["stdout"].as_str().unwrap_or("").to_string(),
        stderr: v["stderr"].as_str().unwrap_or("").to_string(),
        elapsed: Duration::ZERO,
        args: args.iter().map(|a| a.to_string()).collect(),
    }
}

/// The same disaster on a real full filesystem: a small tmpfs in a private mount namespace
/// (`unshare --map-root-user --mount`, no privileges needed where user namespaces are
/// allowed), so the writes fail with ENOSPC. Where this machine forbids user namespaces
/// (some containers), the test says so and checks nothing; the RLIMIT_FSIZE test above
/// covers the same code paths everywhere.
#[test]
fn a_real_full_tmpfs_stops_the_run_with_enospc_and_resume_completes_it() {
    // Three sizes: which write meets the full disk first (the store, a latency histogram,
    // the server's output files) depends on the size and on the length of the paths
    // recorded, so it is not asserted; each must stop the run cleanly and resume to the end.
    for size in ["200k", "240k", "360k"] {
        let Some((stopped, failed)) =
            disk_full_on_a_tmpfs(&format!("tmpfs-full-{size}"), size, true)
        else {
            return;
        };
        println!(
            "faults: disk full (tmpfs {size}, ENOSPC): the run stopped after {stopped} of 10 trials with {:?}; resume completed 10 of 10, trials lost 0, orphans 0",
            failed
                .stderr
                .lines()
                .find(|l| l.starts_with("rubyrace: the run stopped: "))
                .unwrap_or("")
        );
    }
}

/// Whether this machine allows `unshare --map-root-user --mount` (a private mount
/// namespace without privileges); if not, says so once on stdout.
pub(crate) fn private_mounts_allowed() -> bool {
    let probe = Command::new("unshare")
        .args(["--map-root-user", "--mount", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match &probe {
        Ok(o) if o.status.success() => true,
        other => {
            println!(
                "faults: disk full on a tmpfs: NOT RUN, this machine does not allow `unshare --map-root-user --mount`: {other:?}"
            );
            false
        }
    }
}

/// The disk-full disaster on a real full filesystem: a tmpfs of `size` in a private mount
/// namespace (`unshare --map-root-user --mount`, no privileges needed where user namespaces
/// are allowed) holds a 10-trial run, so its writes fail with ENOSPC; then the tmpfs grows
/// and `--resume` completes the run (`check_disk_full_then_resume` asserts it all, with
/// `all_valid` as it says).
/// Returns the trials stored when the run stopped, and its output; `None` where this
/// machine forbids user namespaces (some containers): the RLIMIT_FSIZE test above covers
/// the same code paths everywhere.
pub(crate) fn disk_full_on_a_tmpfs(
    name: &str,
    size: &str,
    all_valid: bool,
) -> Option<(usize, Run)> {
    if !private_mounts_allowed() {
        return None;
    }
    let lab = Lab::new(name);
    lab.experiment(&DISK_EXPERIMENT.replace("FAULT_SERVER", FAULT_SERVER));
    let file = lab.dir.path("experiment.toml");
    let mountpoint = lab.dir.path("tmpfs");
    let out = lab.dir.path("copies");
    std::fs::create_dir_all(&mountpoint).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    let results = mountpoint.join("results");
    let argv = [
        "--map-root-user",
        "--mount",
        "ruby",
        TMPFS_DISK_FULL,
        mountpoint.to_str().unwrap(),
        size,
        out.to_str().unwrap(),
        env!("CARGO_BIN_EXE_rubyrace"),
        file.to_str().unwrap(),
    ];
    let mut cmd = Command::new("unshare");
    cmd.args(argv)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let wrapper = wait_command(cmd, &argv, Duration::from_secs(120));
    assert_eq!(wrapper.code(), Some(0), "{wrapper:?}");
    let failed = recorded_run(&out, "full", &["run", "(on a full tmpfs)"]);
    let stored = check_disk_full_then_resume(
        &lab,
        &failed,
        &results,
        &out.join("full"),
        &["No space left on device", "database or disk is full"],
        all_valid,
        || {
            (
                recorded_run(&out, "resumed", &["run", "--resume"]),
                out.join("resumed"),
            )
        },
    );
    Some((stored, failed))
}

/// The same fault with a deterministic victim: a worker of the fault server SIGKILLs itself
/// mid-measurement while its master reaps lazily, so the signal is always read.
#[test]
fn a_worker_killed_by_a_signal_mid_measurement_makes_the_trial_invalid_naming_the_signal() {
    let (lab, _, rows, _) = run_fault_configs(
        "kill-worker",
        &[("kills", "kill-worker"), ("next", "good")],
        "max_error_rate = 100.0",
    );
    let kills = &rows[0];
    assert_eq!(kills.status, "invalid", "{:?}", kills.reason);
    let reason = kills.reason.clone().unwrap();
    assert!(
        reason.starts_with("a process of the server died during the measurement: pid ")
            && reason.contains("fault_server.rb")
            && reason.contains(") ended: killed by signal 9 (SIGKILL)"),
        "{reason}"
    );
    assert_eq!(rows[1].status, "valid", "{:?}", rows[1].reason);
    lab.assert_no_leftovers(Duration::from_secs(2));
    figure("a worker SIGKILLed (lazy-reaping master)", kills);
}

/// The same faults in an interleaved block, where every server is up at once: a worker
/// that dies during its server's warmup is seen (the death watch starts with the server,
/// not with the slices), a server that exits before its slices fails alone, and the process
/// it left outside its group (which, with three servers up, cannot be told whose it is)
/// makes every trial of the block invalid and is killed.
#[test]
fn faults_in_an_interleaved_block_are_seen_from_the_start_and_orphans_are_charged_to_the_block() {
    let name = "interleaved-faults";
    let toml = fault_configs(
        name,
        &[
            ("kills", "kill-worker"),
            ("holds", "hold-port"),
            ("good", "good"),
        ],
        "max_error_rate = 100.0",
    )
    .replace(
        "design = \"blocks\"",
        "design = \"interleaved\"\nslice = \"300ms\"\nrounds = 3",
    )
    .replace("order = \"sequential\"\n", "")
    .replace("duration = \"2s\"\n", "")
    .replace("warmup = \"500ms\"", "warmup = \"2s\"");
    let lab = Lab::new(name);
    lab.experiment(&toml);
    let run = lab.run(&[], Duration::from_secs(90));
    assert_eq!(run.code(), Some(3), "{run:?}");
    let rows = trials(&lab.db());
    assert_eq!(rows.len(), 3, "{run:?}");
    let reason = |i: usize| rows[i].reason.clone().unwrap_or_default();
    for r in &rows {
        println!(
            "interleaved fault: {} {}: {:?}",
            r.trial_id, r.status, r.reason
        );
    }
    // kill-worker: its worker SIGKILLs itself 1.5 s after it starts, inside the 2 s warmup.
    assert_eq!(rows[0].status, "invalid", "{}", reason(0));
    assert!(
        reason(0).starts_with("a process of the server died during the measurement: pid ")
            && reason(0).contains(") ended: killed by signal 9 (SIGKILL)"),
        "{}",
        reason(0)
    );
    // hold-port: its first process exits 1.5 s after it listens, inside its warmup.
    assert_eq!(rows[1].status, "failed", "{}", reason(1));
    assert!(
        reason(1).starts_with("the server exited before its first slice (exit status 0); "),
        "{}",
        reason(1)
    );
    // Its child, outside every group, is charged to the whole block and killed.
    for i in 0..3 {
        assert!(
            reason(i).contains("one of the servers of this interleaved block (which one cannot be told): 1 process was left running outside its process group, killed by rubyrace: pid "),
            "trial {i}: {}",
            reason(i)
        );
        assert!(reason(i).ends_with("does one daemonize?)"), "{}", reason(i));
    }
    assert_eq!(rows[2].status, "invalid", "{}", reason(2));
    let orphan = orphan_pid(&reason(2));
    assert!(!alive(orphan), "the child holding the port survived");
    lab.assert_no_leftovers(Duration::from_secs(2));
}

// ---------------------------------------------------------------------------------------
// Signals to rubyrace at random moments
// ---------------------------------------------------------------------------------------

use crate::support::rng::Rng;

const SIGNAL_EXPERIMENT: &str = r#"
name = "random-signals"
batches = 8

[settings]
server = "custom"
server_argv = ["{ruby}", "FAULT_SERVER", "{port}", "good"]
app = "rack-hello"
warmup = "200ms"
duration = "600ms"
stop_timeout = "2s"

[matrix]
connections = [1, 2, 4]
"#;

/// Where the run was when the signal was sent, from the files of the trial in progress
/// (files older than this rubyrace are an earlier attempt's and do not count).
fn phase(results: &Path, since: SystemTime, warmup: Duration) -> String {
    let db = results.join("results.db");
    let Ok(conn) = Connection::open(&db) else {
        return "startup".into();
    };
    let Ok(stored) = conn.query_row("SELECT count(*) FROM trials", [], |r| r.get::<_, i64>(0))
    else {
        return "startup".into();
    };
    let total: i64 = conn
        .query_row("SELECT count(*) FROM schedule", [], |r| r.get(0))
        .unwrap_or(0);
    if stored == total {
        return "after the last trial".into();
    }
    // Trials run in trial_id order, and the stored ones are a prefix.
    let dir = results.join(format!("trials/{stored:05}"));
    let fresh = |name: &str| {
        std::fs::metadata(dir.join(name))
            .and_then(|m| m.modified())
            .ok()
            .filter(|t| *t >= since)
    };
    let Some(listening) = fresh("server.stderr") else {
        return "between trials".into();
    };
    let log = std::fs::read_to_string(dir.join("server.stderr")).unwrap_or_default();
    if !log.contains("listening") {
        return "server boot".into();
    }
    if fresh("latency.hlog").is_some() {
        return "stop and store".into();
    }
    // Readiness takes a few ms after "listening" (the log's last write).
    let since_listening = SystemTime::now()
        .duration_since(listening)
        .unwrap_or_default();
    if since_listening < warmup + Duration::from_millis(30) {
        "warmup".into()
    } else {
        "measurement".into()
    }
}

/// 20 times: start (or resume) the run, send SIGINT, SIGTERM or SIGKILL at a random moment,
/// check nothing is left running and the store is an intact prefix of the schedule; then
/// resume to the end. The final store must equal the schedule exactly.
#[test]
fn random_signals_then_resume_lose_and_duplicate_nothing() {
    let seed: u64 = std::env::var("RUBYRACE_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    println!("faults: random signals: seed {seed} (replay with RUBYRACE_FAULT_SEED={seed})");
    let mut rng = Rng(seed);
    let lab = Lab::new("signals");
    lab.experiment(&SIGNAL_EXPERIMENT.replace("FAULT_SERVER", FAULT_SERVER));
    let file = lab.dir.path("experiment.toml");
    let results = lab.results();
    let signals = [
        (libc::SIGINT, "SIGINT"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGKILL, "SIGKILL"),
    ];
    let mut by_signal: BTreeMap<&str, usize> = BTreeMap::new();
    let mut by_phase: BTreeMap<String, usize> = BTreeMap::new();
    let mut kept: Vec<(i64, String, String)> = Vec::new();
    let started = Instant::now();
    for iteration in 1..=20 {
        // A store that was never completely created (killed in its first moments) is
        // started again; otherwise resumed.
        let created = Connection::open(results.join("results.db"))
            .ok()
            .and_then(|c| {
                c.query_row("SELECT count(*) FROM schedule", [], |r| r.get::<_, i64>(0))
                    .ok()
            })
            .is_some_and(|n| n > 0);
        let args: Vec<String> = if created {
            vec![
                "run".into(),
                "--resume".into(),
                results.display().to_string(),
            ]
        } else {
            vec![
                "run".into(),
                file.display().to_string(),
                "-o".into(),
                results.display().to_string(),
            ]
        };
        let since = SystemTime::now() - Duration::from_millis(5);
        let running = spawn(&args);
        let delay = Duration::from_millis(rng.below(2500));
        let (signal, name) = signals[rng.below(3) as usize];
        std::thread::sleep(delay);
        let at = phase(&results, since, Duration::from_millis(200));
        // SAFETY: the pid of the rubyrace this test started, not yet waited for.
        unsafe { libc::kill(running.pid() as i32, signal) };
        let run = running.wait(Duration::from_secs(30));
        let ended = match (
            run.code(),
            std::os::unix::process::ExitStatusExt::signal(&run.status),
        ) {
            (Some(c), _) => format!("exit {c}"),
            (None, Some(s)) => format!("killed by signal {s}"),
            _ => format!("{:?}", run.status),
        };
        if signal != libc::SIGKILL && run.code().is_some() {
            // Ctrl-C and TERM are clean stops (or the run had ended or failed before).
            assert!(
                matches!(run.code(), Some(0) | Some(130)),
                "iteration {iteration}: {run:?}"
            );
        }
        lab.assert_no_leftovers(Duration::from_secs(10));
        // What was stored is intact, a prefix of the schedule, and only grew.
        let stored = if results.join("results.db").exists() {
            Connection::open(results.join("results.db"))
                .ok()
                .filter(|c| {
                    c.query_row("SELECT count(*) FROM schedule", [], |r| r.get::<_, i64>(0))
                        .is_ok()
                })
                .map(|c| snapshot(&c))
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        let ids: Vec<i64> = stored.iter().map(|t| t.0).collect();
        assert_eq!(
            ids,
            (0..ids.len() as i64).collect::<Vec<_>>(),
            "iteration {iteration}"
        );
        assert!(
            stored.len() >= kept.len(),
            "iteration {iteration}: a trial was lost"
        );
        assert_eq!(
            &stored[..kept.len()],
            &kept[..],
            "iteration {iteration}: a trial changed"
        );
        println!(
            "faults: random signals: iteration {iteration:2}/20: {name} after {:4} ms in {at} ({ended}); stored {} -> {}; orphans 0",
            delay.as_millis(),
            kept.len(),
            stored.len()
        );
        kept = stored;
        *by_signal.entry(name).or_default() += 1;
        *by_phase.entry(at).or_default() += 1;
    }
    let interrupted_with = kept.len();
    let last =
        spawn(&["run", "--resume", results.to_str().unwrap()]).wait(Duration::from_secs(120));
    assert_eq!(last.code(), Some(0), "{last:?}");
    let db = lab.db();
    assert_store_equals_schedule(&db);
    let all = snapshot(&db);
    assert_eq!(
        &all[..kept.len()],
        &kept[..],
        "a trial changed in the last resume"
    );
    for row in trials(&db) {
        assert_eq!(
            row.status, "valid",
            "trial {}: {:?}",
            row.trial_id, row.reason
        );
    }
    lab.assert_no_leftovers(Duration::from_secs(5));
    fn fmt<K: std::fmt::Display>(m: &BTreeMap<K, usize>) -> String {
        m.iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
    println!(
        "faults: random signals: total 20 signals ({}); phases: {}; {interrupted_with} of {} trials stored before the last resume, which completed the run; store equals schedule: {} trials, lost 0, duplicated 0, orphans 0; {:.1} s (seed {seed})",
        fmt(&by_signal),
        fmt(&by_phase),
        all.len(),
        all.len(),
        started.elapsed().as_secs_f64()
    );
}
