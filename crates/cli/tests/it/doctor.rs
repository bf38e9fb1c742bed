//! End-to-end tests of `rubyrace doctor`: the real binary, its JSON (schema
//! rubyrace.doctor/1) and its text output. Values are cross-checked against what this test
//! process reads itself from /proc, getrlimit and the Ruby on PATH (the doctor is its
//! child, so it inherits the same limits and affinity); nothing depends on the machine's
//! particular values. A CPU-burning child (`yes`) must show up among the busy processes.
//!
//! Every run of the binary has a deadline and is killed (by its pid: it is our child) past
//! it. Each doctor test runs with the machine to itself (`.config/nextest.toml`), so that
//! no other test's load (or another doctor run's Ruby queries) skews its CPU sampling; the
//! full examination the tests read is made once per run (`support::shared`).

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::support::shared::fixture;
use serde_json::Value;

/// A run is killed, and its test failed, after this long (JRuby alone takes seconds to
/// describe itself on a busy machine).
const DEADLINE: Duration = Duration::from_secs(90);

/// The checks the doctor must report, in order.
const CHECKS: &[&str] = &[
    "cpus",
    "pinning",
    "governor",
    "turbo",
    "load",
    "busy_processes",
    "swap",
    "aslr",
    "ports",
    "tcp_tw_reuse",
    "open_files",
    "perf",
    "rbspy",
    "rubies",
    "servers",
    "allocators",
    "services",
    "wrk",
];

const STATUSES: &[&str] = &["ok", "info", "warn", "bad"];

struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    pid: u32,
    elapsed: Duration,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "rubyrace doctor (pid {}) {:?} after {:?}\nstdout:\n{}\nstderr:\n{}",
            self.pid, self.status, self.elapsed, self.stdout, self.stderr
        )
    }
}

/// Kills (by pid) and reaps a child when dropped, also when a test fails.
struct Reaped(Option<Child>);

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs `rubyrace ARGS...` to completion under [`DEADLINE`].
fn rubyrace(args: &[&str]) -> Run {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_rubyrace"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the rubyrace binary");
    let pid = child.id();
    let read = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = read(Box::new(child.stdout.take().unwrap()));
    let err = read(Box::new(child.stderr.take().unwrap()));
    let mut guard = Reaped(Some(child));
    let status = loop {
        if let Some(status) = guard.0.as_mut().unwrap().try_wait().expect("try_wait") {
            guard.0 = None;
            break status;
        }
        if started.elapsed() > DEADLINE {
            drop(guard);
            panic!(
                "rubyrace {args:?} still running after {DEADLINE:?}: killed\nstderr:\n{}",
                err.join().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Run {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        pid,
        elapsed: started.elapsed(),
    }
}

/// `rubyrace doctor --json ARGS...`, checked for exit status 0 and the schema.
fn doctor_json(args: &[&str]) -> (Run, Value) {
    let mut all = vec!["doctor", "--json"];
    all.extend_from_slice(args);
    let run = rubyrace(&all);
    assert_eq!(run.status.code(), Some(0), "{run:?}");
    let json: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {run:?}"));
    assert_eq!(json["schema"], "rubyrace.doctor/1", "{run:?}");
    (run, json)
}

/// One full examination, shared by the tests that only read it: made once per test run.
fn full_report() -> Value {
    let dir = fixture("doctor", |dir| {
        let (run, _) = doctor_json(&[]);
        std::fs::write(dir.join("doctor.json"), run.stdout).unwrap();
    });
    serde_json::from_str(&std::fs::read_to_string(dir.join("doctor.json")).unwrap()).unwrap()
}

fn finding<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["findings"]
        .as_array()
        .expect("findings is an array")
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("no finding {name} in {report:#}"))
}

fn value_of<'a>(report: &'a Value, name: &str) -> &'a str {
    finding(report, name)["value"]
        .as_str()
        .unwrap_or_else(|| panic!("{name}: value is not a string"))
}

fn status_of<'a>(report: &'a Value, name: &str) -> &'a str {
    finding(report, name)["status"]
        .as_str()
        .unwrap_or_else(|| panic!("{name}: status is not a string"))
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

fn on_path(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// Every named check once, in order, with a valid status, a value, and advice when it is
/// not ok; a timestamp; no crashed checks.
fn assert_well_formed(report: &Value) {
    let names: Vec<&str> = report["findings"]
        .as_array()
        .expect("findings is an array")
        .iter()
        .map(|f| f["name"].as_str().expect("name is a string"))
        .collect();
    assert_eq!(names, CHECKS, "{report:#}");
    for f in report["findings"].as_array().unwrap() {
        let status = f["status"].as_str().expect("status is a string");
        assert!(STATUSES.contains(&status), "bad status in {f}");
        assert!(
            !f["value"].as_str().expect("value is a string").is_empty(),
            "{f}"
        );
        let advice = f["advice"].as_str().expect("advice is a string");
        if status == "warn" || status == "bad" {
            assert!(!advice.is_empty(), "a {status} finding without advice: {f}");
        }
    }
    let at = report["checked_at"]
        .as_str()
        .expect("checked_at is a string");
    assert!(
        at.len() == 20 && at.ends_with('Z') && at.as_bytes()[10] == b'T',
        "{at}"
    );
    assert!(report.get("failed_checks").is_none(), "{report:#}");
}

#[test]
fn json_has_every_check_with_a_valid_status() {
    assert_well_formed(&full_report());
}

#[test]
fn values_agree_with_proc_and_this_process() {
    let report = &full_report();

    let aslr = read_trimmed("/proc/sys/kernel/randomize_va_space").expect("ASLR setting");
    assert!(
        value_of(report, "aslr").starts_with(&format!("{aslr} (")),
        "{aslr} vs {}",
        value_of(report, "aslr")
    );

    let range = read_trimmed("/proc/sys/net/ipv4/ip_local_port_range").expect("port range");
    let (lo, hi) = range.split_once(char::is_whitespace).expect("two numbers");
    let (lo, hi): (u32, u32) = (lo.trim().parse().unwrap(), hi.trim().parse().unwrap());
    let ports = value_of(report, "ports");
    assert!(
        ports.starts_with(&format!("{lo}-{hi} ({} ephemeral ports", hi - lo + 1)),
        "{range} vs {ports}"
    );
    assert_eq!(
        status_of(report, "ports"),
        if hi - lo + 1 < 28_000 { "warn" } else { "ok" }
    );

    let reuse = read_trimmed("/proc/sys/net/ipv4/tcp_tw_reuse").expect("tcp_tw_reuse");
    assert!(value_of(report, "tcp_tw_reuse").starts_with(&format!("{reuse} (")));
    assert_eq!(
        status_of(report, "tcp_tw_reuse"),
        if reuse == "0" { "info" } else { "ok" }
    );

    // The doctor is this process's child: it inherits the open-file limits.
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the valid struct passed.
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
        0
    );
    let show = |v: libc::rlim_t| {
        if v == libc::RLIM_INFINITY {
            "unlimited".to_string()
        } else {
            v.to_string()
        }
    };
    assert_eq!(
        value_of(report, "open_files"),
        format!(
            "soft {}, hard {}",
            show(limit.rlim_cur),
            show(limit.rlim_max)
        )
    );
    let low = limit.rlim_cur != libc::RLIM_INFINITY && limit.rlim_cur < 4096;
    assert_eq!(
        status_of(report, "open_files"),
        if low { "warn" } else { "ok" }
    );

    // ... and its CPU affinity.
    let usable = std::thread::available_parallelism().unwrap().get();
    let cpus = value_of(report, "cpus");
    assert!(
        cpus.contains(&format!(" online, {usable} usable by this process")),
        "{cpus}"
    );
    assert_eq!(
        status_of(report, "cpus"),
        if usable < 2 { "warn" } else { "ok" }
    );

    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let swap_total = meminfo
        .lines()
        .find(|l| l.starts_with("SwapTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .expect("SwapTotal");
    if swap_total == "0" {
        assert!(
            value_of(report, "swap").starts_with("no swap"),
            "{report:#}"
        );
        assert_eq!(status_of(report, "swap"), "ok");
    }
    let swappiness = read_trimmed("/proc/sys/vm/swappiness").unwrap();
    assert!(value_of(report, "swap").ends_with(&format!("; swappiness {swappiness}")));

    match read_trimmed("/proc/sys/kernel/perf_event_paranoid") {
        Some(p) => assert!(
            value_of(report, "perf").starts_with(&format!("perf_event_paranoid {p}")),
            "{}",
            value_of(report, "perf")
        ),
        None => assert!(value_of(report, "perf").starts_with("no perf events")),
    }

    let load = value_of(report, "load");
    assert!(load.contains("(1, 5, 15 min)"), "{load}");

    match on_path("wrk") {
        Some(_) => {
            assert_eq!(status_of(report, "wrk"), "ok", "{report:#}");
            assert!(value_of(report, "wrk").starts_with("wrk "));
        }
        None => assert_eq!(status_of(report, "wrk"), "info"),
    }

    let allocators = value_of(report, "allocators");
    assert!(
        allocators.starts_with("jemalloc ") && allocators.contains("; tcmalloc "),
        "{allocators}"
    );

    // rbspy and the services, against the programs themselves (scripts/setup installs all
    // three; the doctor once checked none of them).
    let rbspy = value_of(report, "rbspy");
    match on_path("rbspy") {
        Some(path) => {
            let version = std::process::Command::new(&path)
                .arg("--version")
                .output()
                .unwrap();
            let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
            assert!(
                rbspy.starts_with(&format!("{version} ({})", path.display())),
                "{rbspy}"
            );
        }
        None => assert!(rbspy.starts_with("no rbspy on PATH"), "{rbspy}"),
    }
    match read_trimmed("/proc/sys/kernel/yama/ptrace_scope") {
        Some(scope) => assert!(rbspy.contains(&format!("ptrace_scope {scope}")), "{rbspy}"),
        None => assert!(rbspy.contains("no Yama ptrace_scope"), "{rbspy}"),
    }
    let services = value_of(report, "services");
    let postgres = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin/postgres"))
        .filter(|p| p.is_file())
        .max();
    match postgres {
        Some(p) => assert!(
            services.contains(&format!("({})", p.parent().unwrap().display())),
            "{services}"
        ),
        None => assert!(services.contains("no /usr/lib/postgresql"), "{services}"),
    }
    match on_path("redis-server") {
        Some(p) => assert!(
            services.contains("Redis: Redis server v=")
                && services.contains(&format!("({})", p.display())),
            "{services}"
        ),
        None => assert!(services.contains("no redis-server on PATH"), "{services}"),
    }
}

/// The Ruby on PATH, asked directly: its description, and which servers it can require.
#[test]
fn rubies_and_servers_agree_with_the_ruby_on_path() {
    let Some(ruby) = on_path("ruby") else {
        panic!("no ruby on PATH: run scripts/setup (Debian's Ruby is a prerequisite)");
    };
    let ask = |script: &str| {
        Command::new(&ruby)
            .args(["-e", script])
            .env_remove("RUBYOPT")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .expect("run ruby")
    };
    let out = ask("print RUBY_DESCRIPTION");
    assert!(out.status.success());
    let description = String::from_utf8_lossy(&out.stdout).into_owned();
    let report = &full_report();
    let rubies = value_of(report, "rubies");
    assert!(
        rubies.contains(&description),
        "{description:?} not in {rubies}"
    );
    assert_ne!(status_of(report, "rubies"), "bad");

    let servers = value_of(report, "servers");
    for (server, lib) in [
        ("puma", "puma"),
        ("unicorn", "unicorn"),
        ("thin", "thin"),
        ("webrick", "webrick"),
    ] {
        let loads = ask(&format!("require '{lib}'")).status.success();
        assert_eq!(
            !servers.contains(&format!("{server} missing")),
            loads,
            "{server}: `ruby -e \"require '{lib}'\"` says {loads}, the doctor says {servers}"
        );
    }
}

#[test]
fn a_cpu_burning_process_is_listed_among_the_busy_ones() {
    let yes = Command::new("yes")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start yes");
    let yes_pid = yes.id();
    let _yes = Reaped(Some(yes));
    std::thread::sleep(Duration::from_millis(200));

    let (run, report) = doctor_json(&["--top", "50"]);
    assert_well_formed(&report);
    let busy = value_of(&report, "busy_processes");
    let marker = format!("pid {yes_pid} (yes) ");
    let at = busy
        .find(&marker)
        .unwrap_or_else(|| panic!("yes (pid {yes_pid}) is not among the busy processes: {busy}"));
    let percent: f64 = busy[at + marker.len()..]
        .split('%')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no percentage after {marker:?} in {busy}"));
    assert!((1.0..=110.0).contains(&percent), "{percent} in {busy}");
    if percent >= 10.0 {
        assert_eq!(status_of(&report, "busy_processes"), "warn", "{busy}");
    }
    // The doctor leaves itself out.
    assert!(!busy.contains(&format!("pid {} (", run.pid)), "{busy}");
    // `_yes` is killed by its pid and reaped here, also when an assertion above fails.
}

#[test]
fn quick_skips_the_slow_checks_and_text_lists_every_check() {
    let (run, report) = doctor_json(&["--quick"]);
    assert_well_formed(&report);
    for name in ["busy_processes", "rubies", "servers"] {
        assert_eq!(value_of(&report, name), "not checked (--quick)");
        assert_eq!(status_of(&report, name), "info");
    }
    assert!(run.elapsed < Duration::from_secs(10), "{run:?}");

    let text = rubyrace(&["doctor", "--quick"]);
    assert_eq!(text.status.code(), Some(0), "{text:?}");
    let lines: Vec<&str> = text.stdout.lines().collect();
    assert!(lines[0].starts_with("status  check"), "{text:?}");
    for name in CHECKS {
        let row = lines
            .iter()
            .find(|l| !l.starts_with(' ') && l.split_whitespace().nth(1) == Some(name))
            .unwrap_or_else(|| panic!("no row for {name}: {text:?}"));
        let status = row.split_whitespace().next().unwrap();
        assert!(STATUSES.contains(&status), "{row}");
        // The load average may cross its threshold between the two runs.
        if *name != "load" {
            assert_eq!(status, status_of(&report, name), "{row}");
        }
    }
    assert!(
        text.stdout.trim_end().ends_with('.')
            && text
                .stdout
                .contains(&format!("{} checks at ", CHECKS.len())),
        "{text:?}"
    );
}
