//! Running the real `rubyrace` binary with a hard deadline (a run that exceeds it is killed,
//! by its pid: it is our child, and the test fails), and reading `rubyrace load`'s JSON.

#![allow(dead_code, unused_imports)]

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::HARD_DEADLINE;

/// A finished run of the binary.
pub struct Run {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
    pub args: Vec<String>,
}

impl Run {
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// The JSON report written to stdout by `--json -`.
    pub fn report(&self) -> Report {
        match serde_json::from_str::<Value>(&self.stdout) {
            Ok(v) => {
                assert_eq!(v["schema"], "rubyrace.load/1", "unexpected schema in {v}");
                Report(v)
            }
            Err(e) => panic!(
                "stdout of {:?} is not JSON ({e}):\n{}\nstderr:\n{}",
                self.args, self.stdout, self.stderr
            ),
        }
    }
}

impl fmt::Debug for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rubyrace {:?}\n  status {:?} after {:?}\n  stdout:\n{}\n  stderr:\n{}",
            self.args, self.status, self.elapsed, self.stdout, self.stderr
        )
    }
}

/// A running binary; killed (by pid) if dropped before it is waited for.
pub struct Running {
    child: Option<Child>,
    started: Instant,
    args: Vec<String>,
    out: Option<JoinHandle<String>>,
    err: Option<JoinHandle<String>>,
}

fn read_all(mut r: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = r.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

impl Running {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Still running?
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().unwrap().try_wait(), Ok(None))
    }

    /// Waits until `done()` holds while the process runs. If it exits first, or `deadline`
    /// (since the start) passes, the test fails with its output, then `context()` (read at
    /// that moment: say a cluster's queue) last, where a CI log's tail shows it.
    pub fn wait_until(
        &mut self,
        deadline: Duration,
        what: &str,
        mut done: impl FnMut() -> bool,
        context: impl FnOnce() -> String,
    ) {
        loop {
            if done() {
                return;
            }
            let exited = !self.is_running();
            if exited || self.started.elapsed() > deadline {
                let mut child = self.child.take().unwrap();
                let _ = child.kill();
                let status = child.wait();
                let stdout = self.out.take().unwrap().join().unwrap_or_default();
                let stderr = self.err.take().unwrap().join().unwrap_or_default();
                panic!(
                    "waiting for {what}: rubyrace {:?} {} after {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}\n{}",
                    self.args,
                    if exited { format!("exited ({status:?})") } else { "still running: killed".into() },
                    self.started.elapsed(),
                    context()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits for the exit; past `deadline` (since the start) the process is killed and the
    /// test fails.
    pub fn wait(mut self, deadline: Duration) -> Run {
        let mut child = self.child.take().unwrap();
        let status = loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                break status;
            }
            if self.started.elapsed() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                let stdout = self.out.take().unwrap().join().unwrap_or_default();
                let stderr = self.err.take().unwrap().join().unwrap_or_default();
                panic!(
                    "rubyrace {:?} still running after {deadline:?}: killed\nstdout:\n{stdout}\nstderr:\n{stderr}",
                    self.args
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let elapsed = self.started.elapsed();
        Run {
            status,
            stdout: self.out.take().unwrap().join().unwrap_or_default(),
            stderr: self.err.take().unwrap().join().unwrap_or_default(),
            elapsed,
            args: self.args.clone(),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Starts `rubyrace ARGS...`.
pub fn spawn<S: AsRef<str>>(args: &[S]) -> Running {
    spawn_with_env(args, &[])
}

/// Starts `rubyrace ARGS...` with `env` added to its environment.
pub fn spawn_with_env<S: AsRef<str>>(args: &[S], env: &[(&str, &str)]) -> Running {
    spawn_in(None, args, env)
}

/// Starts `rubyrace ARGS...` in the working directory `cwd` (the test's own without),
/// with `env` added to its environment.
pub fn spawn_in<S: AsRef<str>>(
    cwd: Option<&std::path::Path>,
    args: &[S],
    env: &[(&str, &str)],
) -> Running {
    let args: Vec<String> = args.iter().map(|a| a.as_ref().to_string()).collect();
    let mut command = Command::new(env!("CARGO_BIN_EXE_rubyrace"));
    if let Some(cwd) = cwd {
        command.current_dir(cwd);
    }
    let mut child = command
        .args(&args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the rubyrace binary");
    let out = read_all(child.stdout.take().unwrap());
    let err = read_all(child.stderr.take().unwrap());
    Running {
        child: Some(child),
        started: Instant::now(),
        args,
        out: Some(out),
        err: Some(err),
    }
}

/// Runs `rubyrace ARGS...` to completion under [`HARD_DEADLINE`].
pub fn rubyrace<S: AsRef<str>>(args: &[S]) -> Run {
    spawn(args).wait(HARD_DEADLINE)
}

/// Runs `rubyrace load URL ARGS... --json -`, expects exit status 0, returns the report.
pub fn load<S: AsRef<str>>(url: &str, args: &[S]) -> (Run, Report) {
    let run = load_run(url, args);
    assert_eq!(run.code(), Some(0), "{run:?}");
    let report = run.report();
    (run, report)
}

/// Runs `rubyrace load URL ARGS... --json -` whatever its exit status.
pub fn load_run<S: AsRef<str>>(url: &str, args: &[S]) -> Run {
    let mut all = vec!["load".to_string(), url.to_string()];
    all.extend(args.iter().map(|a| a.as_ref().to_string()));
    all.extend(["--json".to_string(), "-".to_string()]);
    rubyrace(&all)
}

/// The JSON report, with accessors that fail loudly (showing the whole report).
#[derive(Clone)]
pub struct Report(pub Value);

impl Report {
    pub fn value(&self, pointer: &str) -> &Value {
        self.0
            .pointer(pointer)
            .unwrap_or_else(|| panic!("no {pointer} in report:\n{self}"))
    }

    pub fn u(&self, pointer: &str) -> u64 {
        self.value(pointer)
            .as_u64()
            .unwrap_or_else(|| panic!("{pointer} is not an unsigned integer in report:\n{self}"))
    }

    pub fn f(&self, pointer: &str) -> f64 {
        self.value(pointer)
            .as_f64()
            .unwrap_or_else(|| panic!("{pointer} is not a number in report:\n{self}"))
    }

    pub fn b(&self, pointer: &str) -> bool {
        self.value(pointer)
            .as_bool()
            .unwrap_or_else(|| panic!("{pointer} is not a bool in report:\n{self}"))
    }

    pub fn requests(&self) -> u64 {
        self.u("/requests")
    }

    pub fn err(&self, kind: &str) -> u64 {
        self.u(&format!("/errors/{kind}"))
    }

    /// Responses with this status code (0 when absent from the map).
    pub fn status(&self, code: u16) -> u64 {
        let map = self
            .value("/status")
            .as_object()
            .expect("status is an object");
        map.get(&code.to_string())
            .map_or(0, |v| v.as_u64().expect("status counts are integers"))
    }

    /// Responses over all status codes.
    pub fn status_total(&self) -> u64 {
        let map = self
            .value("/status")
            .as_object()
            .expect("status is an object");
        map.values().map(|v| v.as_u64().unwrap()).sum()
    }

    /// Errors that lost a request (every kind but `status`).
    pub fn failed_attempts(&self) -> u64 {
        ["connect", "read", "write", "timeout", "parse"]
            .iter()
            .map(|k| self.err(k))
            .sum()
    }

    /// Recorded attempts: responses plus failed attempts.
    pub fn attempts(&self) -> u64 {
        self.requests() + self.failed_attempts()
    }

    pub fn warnings(&self) -> Vec<String> {
        self.value("/warnings")
            .as_array()
            .expect("warnings is an array")
            .iter()
            .map(|w| w.as_str().unwrap().to_string())
            .collect()
    }

    pub fn has_warning(&self, needle: &str) -> bool {
        self.warnings().iter().any(|w| w.contains(needle))
    }

    pub fn connections_per_thread(&self) -> Vec<u64> {
        self.value("/actual/connections_per_thread")
            .as_array()
            .expect("an array")
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect()
    }

    /// Checks what holds for every run: the error total adds up, the status map sums to
    /// the responses, and the error rate is consistent with both.
    pub fn assert_consistent(&self) {
        let total = self.failed_attempts() + self.err("status");
        assert_eq!(
            self.err("total"),
            total,
            "errors.total does not add up:\n{self}"
        );
        assert_eq!(
            self.status_total(),
            self.requests(),
            "status counts do not sum to requests:\n{self}"
        );
        let non_2xx: u64 = self
            .value("/status")
            .as_object()
            .unwrap()
            .iter()
            .filter(|(code, _)| !code.starts_with('2'))
            .map(|(_, v)| v.as_u64().unwrap())
            .sum();
        assert_eq!(
            self.err("status"),
            non_2xx,
            "errors.status is not the non-2xx count:\n{self}"
        );
        let attempts = self.attempts();
        let want = if attempts == 0 {
            0.0
        } else {
            total as f64 / attempts as f64
        };
        assert!(
            (self.f("/error_rate") - want).abs() < 1e-9,
            "error_rate is not {want}:\n{self}"
        );
        assert_eq!(
            self.u("/actual/connections"),
            self.connections_per_thread().iter().sum::<u64>(),
            "actual.connections is not the sum per thread:\n{self}"
        );
    }

    /// `-n N` semantics: exactly N attempts recorded, nothing left in flight.
    pub fn assert_attempts(&self, n: u64) {
        self.assert_consistent();
        assert_eq!(
            self.attempts(),
            n,
            "requests + failed attempts != -n {n}:\n{self}"
        );
        assert_eq!(
            self.u("/in_flight_at_end"),
            0,
            "requests left in flight with -n:\n{self}"
        );
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", serde_json::to_string_pretty(&self.0).unwrap())
    }
}
