//! The doctor's unit tests.

#![allow(unused_imports)]
use super::*;
use crate::busy::*;
use crate::cpu::*;
use crate::kernel::*;
use crate::network::*;
use crate::programs::*;
use crate::readers::*;
use crate::report::*;
use crate::ruby::*;
use nix::sched::{sched_getaffinity, sched_setaffinity};
use nix::sys::personality::{self, Persona};
use nix::sys::resource::{getrlimit, Resource, RLIM_INFINITY};
use nix::unistd::{sysconf, Pid, SysconfVar};
use rubies::{discovery, knobs};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant, SystemTime};
use sys::environment;
use sys::process::is_executable_file;

#[test]
fn port_range_is_parsed_and_sized() {
    assert_eq!(parse_port_range("32768\t60999\n"), Some((32768, 60999)));
    assert_eq!(parse_port_range("1024 65535"), Some((1024, 65535)));
    assert_eq!(parse_port_range("60999 32768"), None);
    assert_eq!(parse_port_range("32768"), None);
    assert_eq!(parse_port_range("1 2 3"), None);
    assert_eq!(parse_port_range("1024 70000"), None);
    // The default range: 28232 ports, 470 connections/s at 60 s of TIME_WAIT.
    assert_eq!(ports_capacity((32768, 60999)), (28232, 470));
    assert!(ports_capacity((32768, 60999)).0 >= MIN_EPHEMERAL_PORTS);
    assert!(ports_capacity((40000, 60999)).0 < MIN_EPHEMERAL_PORTS);
}

#[test]
fn governors_are_summarized() {
    let all = [
        (0, "performance\n".to_string()),
        (1, "performance".to_string()),
    ];
    assert_eq!(
        summarize_governors(&all),
        Some(("performance on all 2 CPUs".to_string(), true))
    );
    let mixed = [
        (0, "powersave\n".to_string()),
        (1, "powersave\n".to_string()),
        (2, "performance\n".to_string()),
        (3, "powersave\n".to_string()),
    ];
    assert_eq!(
        summarize_governors(&mixed),
        Some((
            "powersave on CPUs 0-1,3, performance on CPUs 2".to_string(),
            false
        ))
    );
    let one = [(0, "schedutil".to_string())];
    assert_eq!(
        summarize_governors(&one),
        Some(("schedutil on all 1 CPUs".to_string(), false))
    );
    assert_eq!(summarize_governors(&[]), None);
}

#[test]
fn cpu_lists_round_trip() {
    assert_eq!(
        parse_cpu_list("0-3,8,10-11\n"),
        Some(vec![0, 1, 2, 3, 8, 10, 11])
    );
    assert_eq!(parse_cpu_list(""), Some(vec![]));
    assert_eq!(parse_cpu_list("3-1"), None);
    assert_eq!(parse_cpu_list("a"), None);
    assert_eq!(format_cpu_list(&[11, 0, 1, 2, 3, 8, 10]), "0-3,8,10-11");
    assert_eq!(format_cpu_list(&[5]), "5");
    assert_eq!(format_cpu_list(&[]), "");
}

#[test]
fn busy_processes_exclude_this_process_tree_and_recycled_pids() {
    let snap = |rows: &[(i32, u64, &str, i32, u64)]| -> Snapshot {
        rows.iter()
            .map(|(pid, start, comm, ppid, ticks)| {
                (*pid, (*start, comm.to_string(), *ppid, *ticks))
            })
            .collect()
    };
    let me = 100;
    let before = snap(&[
        (1, 1, "init", 0, 10),
        (100, 5, "rubyrace", 1, 0),
        (101, 6, "ruby", 100, 0),
        (200, 7, "yes", 1, 0),
        (300, 8, "old", 1, 0),
        (400, 9, "idle", 1, 5),
    ]);
    let after = snap(&[
        (1, 1, "init", 0, 11),
        (100, 5, "rubyrace", 1, 50),
        (101, 6, "ruby", 100, 50),
        (200, 7, "yes", 1, 48),
        (300, 99, "new", 1, 40), // pid 300 recycled: not comparable
        (400, 9, "idle", 1, 5),
    ]);
    let busy = busy_between(&before, &after, 50.0, me);
    let pids: Vec<i32> = busy.iter().map(|b| b.pid).collect();
    assert_eq!(pids, vec![200, 1]);
    assert!((busy[0].cpu_percent - 96.0).abs() < 1e-9, "{busy:?}");
    assert_eq!(busy[0].comm, "yes");
    assert!((busy[1].cpu_percent - 2.0).abs() < 1e-9);
}

#[test]
fn busy_finding_lists_warns_and_limits() {
    let sample = |cpu: &[f64]| BusySample {
        processes: cpu
            .iter()
            .enumerate()
            .map(|(i, c)| BusyProcess {
                pid: 1000 + i as i32,
                comm: format!("p{i}"),
                cpu_percent: *c,
            })
            .collect(),
        machine: Some((50.0, 0.0)),
        error: None,
    };
    let f = busy_finding(sample(&[95.0, 3.0, 0.5]), 5);
    assert_eq!(f.status, Status::Warn);
    assert!(
        f.value.starts_with("pid 1000 (p0) 95%, pid 1001 (p1) 3% "),
        "{f:?}"
    );
    assert!(!f.value.contains("pid 1002"), "{f:?}");
    assert!(!f.advice.is_empty());

    let f = busy_finding(sample(&[5.0, 2.0]), 1);
    assert_eq!(f.status, Status::Info);
    assert!(
        f.value.contains("pid 1000 (p0) 5%") && !f.value.contains("pid 1001"),
        "{f:?}"
    );

    let f = busy_finding(sample(&[0.9]), 5);
    assert_eq!(f.status, Status::Ok);
    assert!(f.value.starts_with("none above"), "{f:?}");
}

#[test]
fn load_threshold_is_half_the_cpus() {
    assert_eq!(load_finding(Some([1.0, 0.0, 0.0]), 2).status, Status::Ok);
    assert_eq!(load_finding(Some([1.01, 0.0, 0.0]), 2).status, Status::Warn);
    assert_eq!(load_finding(Some([3.9, 9.0, 9.0]), 8).status, Status::Ok);
    assert_eq!(load_finding(None, 8).status, Status::Info);
    let f = load_finding(Some([0.25, 0.5, 0.75]), 4);
    assert!(f.value.starts_with("0.25 0.50 0.75"), "{f:?}");
}

#[test]
fn cpus_warn_below_two_usable() {
    let counts = |online, affinity: &[u32], parallelism| CpuCounts {
        online,
        affinity: Some(affinity.to_vec()),
        parallelism: Some(parallelism),
    };
    let one = cpus_finding(&counts(4, &[2], 1));
    assert_eq!(one.status, Status::Warn, "{one:?}");
    assert!(one.value.contains("4 online, 1 usable") && one.value.contains("affinity 2"));
    let quota = cpus_finding(&counts(4, &[0, 1, 2, 3], 1));
    assert_eq!(quota.status, Status::Warn);
    assert!(quota.value.contains("CPU quota of 1"), "{quota:?}");
    assert_eq!(cpus_finding(&counts(2, &[0, 1], 2)).status, Status::Ok);
}

#[test]
fn server_answers_are_parsed() {
    let stdout = "noise from RUBYOPT\n\n__rubyrace_doctor__\nmainlibs=-lz -ljemalloc -lm\n\
                  puma=ok 5.6.5\nunicorn=no LoadError: cannot load such file -- unicorn\n\
                  thin=ok \nwebrick=ok 1.7.0\n";
    let (loads, mainlibs) = parse_server_answer(stdout).unwrap();
    assert_eq!(
        loads,
        vec![
            Ok("5.6.5".to_string()),
            Err("LoadError: cannot load such file -- unicorn".to_string()),
            Ok(String::new()),
            Ok("1.7.0".to_string()),
        ]
    );
    assert_eq!(knobs::linked_allocator(&mainlibs), Some("jemalloc"));
    assert_eq!(parse_server_answer("puma=ok 1\n"), None);
    // A server the Ruby said nothing about is reported as missing.
    let (loads, _) = parse_server_answer("__rubyrace_doctor__\npuma=ok 6.0\n").unwrap();
    assert_eq!(loads[1], Err("no answer".to_string()));
}

#[test]
fn rubies_and_servers_findings_grade_what_is_missing() {
    let ruby = |name: &str, description: Option<&str>| discovery::DiscoveredRuby {
        name: name.to_string(),
        path: PathBuf::from(format!("/opt/{name}/bin/ruby")),
        source: "PATH".to_string(),
        description: description.map(str::to_string),
        version: description.map(|_| "3.3.0".to_string()),
        error: description
            .is_none()
            .then(|| "exited with status 127".to_string()),
    };
    assert_eq!(rubies_finding(&[]).status, Status::Bad);
    let good = ruby("system", Some("ruby 3.3.0 (x) [x86_64-linux]"));
    let f = rubies_finding(std::slice::from_ref(&good));
    assert_eq!(f.status, Status::Ok);
    assert_eq!(
        f.value,
        "system: ruby 3.3.0 (x) [x86_64-linux], /opt/system/bin/ruby"
    );
    let f = rubies_finding(&[good, ruby("broken", None)]);
    assert_eq!(f.status, Status::Warn, "{f:?}");
    assert!(f.advice.starts_with("broken does not run"), "{f:?}");
    assert_eq!(rubies_finding(&[ruby("broken", None)]).status, Status::Bad);

    let query = |loads: Vec<Result<String, String>>| {
        Ok(ServerQuery {
            ruby: PathBuf::from("/nonexistent/ruby"),
            loads,
            linked_allocator: None,
        })
    };
    let missing = || Err("LoadError: cannot load such file".to_string());
    let none = servers_finding(&query(vec![missing(), missing(), missing(), missing()]));
    assert_eq!(none.status, Status::Warn, "{none:?}");
    assert!(none.value.contains("puma missing (LoadError"), "{none:?}");
    let f = servers_finding(&Err("no ruby".to_string()));
    assert_eq!(f.status, Status::Warn);
    assert!(f.value.contains("no ruby"));
}

#[test]
fn a_crashing_check_is_caught() {
    let result = guarded(|| panic!("boom"));
    let panic = result.expect_err("the panic is caught");
    assert_eq!(panic_message(&panic), "boom");
    let f = crashed("swap", &panic_message(&panic));
    assert_eq!((f.name.as_str(), f.status), ("swap", Status::Bad));
    assert!(guarded(|| Finding::ok("x", "y")).is_ok());
}

#[test]
fn run_program_times_out_and_captures() {
    let sleep = on_path("sleep").expect("sleep on PATH");
    let t = Instant::now();
    let ran = run_program(&sleep, &[OsStr::new("5")], &[], Duration::from_millis(200)).unwrap();
    assert!(ran.timed_out);
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    let echo = on_path("echo").expect("echo on PATH");
    let ran = run_program(&echo, &[OsStr::new("hi")], &[], COMMAND_TIMEOUT).unwrap();
    assert!(!ran.timed_out && ran.status.unwrap().success());
    assert_eq!(ran.stdout, "hi\n");
}

#[test]
fn quick_examination_has_every_check_in_order() {
    let report = examine_with(&Options {
        quick: true,
        top: 5,
    });
    assert_eq!(report.schema, SCHEMA);
    let names: Vec<&str> = report.findings.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, CHECKS);
    assert!(report.failed_checks.is_empty(), "{report:?}");
    for f in &report.findings {
        assert!(!f.value.is_empty(), "{f:?}");
        if matches!(f.status, Status::Warn | Status::Bad) {
            assert!(
                !f.advice.is_empty(),
                "a {} finding needs advice: {f:?}",
                f.status
            );
        }
    }
    let json = serde_json::to_string(&report).unwrap();
    assert!(!json.contains("failed_checks"), "{json}");
    let back: Report = serde_json::from_str(&json).unwrap();
    assert_eq!(back, report);
}

/// docs/doctor.md's JSON reference names every check, in the report's order, and counts
/// them in words: a check added here without the doc fails this test.
#[test]
fn the_json_reference_lists_every_check_in_order() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/doctor.md"),
    )
    .unwrap();
    let row = doc
        .lines()
        .find(|l| l.starts_with("| `findings` |"))
        .expect("docs/doctor.md has a `findings` row");
    let listed: Vec<&str> = row
        .split('`')
        .skip(3) // "| ", "findings", " | array | One per check…: "
        .step_by(2)
        .collect();
    assert_eq!(listed, CHECKS, "docs/doctor.md's `findings` row: {row}");
    let count = format!("always all {},", testkit::NUMBER_WORDS[CHECKS.len()]);
    assert!(row.contains(&count), "the row should say `{count}`: {row}");
}
