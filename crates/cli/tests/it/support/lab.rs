//! A results directory for `rubyrace run` tests: the experiment file, the run, the store,
//! and a scan for processes left behind. Every server an experiment starts carries a unique
//! `RUBYRACE_TEST_MARKER` in its environment, so leftovers are found by scanning /proc and
//! killed by pid (never by name).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde_json::Value;

use super::{spawn, Run, Running, TempDir};

/// A results directory and the experiment file written next to it.
pub struct Lab {
    pub dir: TempDir,
    pub marker: String,
}

impl Lab {
    pub fn new(name: &str) -> Lab {
        Lab::with_dir(name, TempDir::new(&format!("run-{name}")))
    }

    /// A lab under /tmp, for paths that must stay short (Unix sockets).
    pub fn new_short(name: &str) -> Lab {
        Lab::with_dir(
            name,
            TempDir::new_in(&format!("run-{name}"), std::path::Path::new("/tmp")),
        )
    }

    fn with_dir(name: &str, dir: TempDir) -> Lab {
        let marker = format!("{}-{}", name, dir.path("").display());
        Lab { dir, marker }
    }

    /// Writes `experiment.toml`, adding the marker to `[settings]` env.
    pub fn experiment(&self, toml: &str) -> PathBuf {
        let path = self.dir.path("").join("experiment.toml");
        let marked = toml.replace(
            "[settings]",
            &format!(
                "[settings]\nenv = {{ RUBYRACE_TEST_MARKER = \"{}\" }}",
                self.marker
            ),
        );
        std::fs::write(&path, marked).unwrap();
        path
    }

    pub fn results(&self) -> PathBuf {
        self.dir.path("").join("results")
    }

    pub fn run(&self, extra: &[&str], deadline: Duration) -> Run {
        self.spawn_run(extra).wait(deadline)
    }

    /// `run experiment.toml -o RESULTS EXTRA...`.
    fn run_args(&self, extra: &[&str]) -> Vec<String> {
        let file = self.dir.path("").join("experiment.toml");
        let mut args = vec![
            "run".to_string(),
            file.display().to_string(),
            "-o".to_string(),
            self.results().display().to_string(),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        args
    }

    /// `rubyrace run experiment.toml -o RESULTS EXTRA...`, left running, with the marker
    /// in rubyrace's own environment: everything it starts carries it, services included
    /// (so [`Lab::leftovers`] matches rubyrace itself while it runs).
    pub fn spawn_marked_run(&self, extra: &[&str]) -> Running {
        self.spawn_marked(&self.run_args(extra))
    }

    /// `rubyrace ARGS...`, left running, with the marker in its environment.
    pub fn spawn_marked<S: AsRef<str>>(&self, args: &[S]) -> Running {
        super::spawn_with_env(args, &[("RUBYRACE_TEST_MARKER", &self.marker)])
    }

    /// `rubyrace ARGS...` in the working directory `cwd`, left running, with the marker in
    /// its environment.
    pub fn spawn_marked_in<S: AsRef<str>>(&self, cwd: &std::path::Path, args: &[S]) -> Running {
        super::spawn_in(Some(cwd), args, &[("RUBYRACE_TEST_MARKER", &self.marker)])
    }

    /// `rubyrace run experiment.toml -o RESULTS EXTRA...`, left running.
    pub fn spawn_run(&self, extra: &[&str]) -> Running {
        spawn(&self.run_args(extra))
    }

    /// How many trials the results database holds so far, read-only (a run may be writing
    /// it); 0 before it exists.
    pub fn stored_trials(&self) -> i64 {
        Connection::open_with_flags(
            self.results().join("results.db"),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .ok()
        .and_then(|c| {
            c.query_row("SELECT count(*) FROM trials", [], |r| r.get(0))
                .ok()
        })
        .unwrap_or(0)
    }

    /// `rubyrace report RESULTS --format json`, checked to succeed, parsed.
    pub fn report_json(&self) -> Value {
        let report = super::rubyrace(&[
            "report",
            self.results().to_str().unwrap(),
            "--format",
            "json",
        ]);
        assert_eq!(report.code(), Some(0), "{report:?}");
        serde_json::from_str(&report.stdout).unwrap()
    }

    pub fn db(&self) -> Connection {
        Connection::open(self.results().join("results.db")).expect("the results database exists")
    }

    /// Processes still carrying this lab's marker.
    pub fn leftovers(&self) -> Vec<i32> {
        let needle = format!("RUBYRACE_TEST_MARKER={}", self.marker);
        let mut pids = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
                continue;
            };
            if environ.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()) {
                // Zombies have an empty environ; a match is a live process.
                pids.push(pid);
            }
        }
        pids
    }

    /// Fails if a process of this lab is still alive `within` from now (killing it first).
    pub fn assert_no_leftovers(&self, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let left = self.leftovers();
            if left.is_empty() {
                return;
            }
            if Instant::now() > deadline {
                for pid in &left {
                    // SAFETY: these processes carry this test's unique marker: ours.
                    unsafe { libc::kill(*pid, libc::SIGKILL) };
                }
                panic!("processes left behind: {left:?}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for pid in self.leftovers() {
            // SAFETY: as above: only processes with this lab's marker.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

pub struct TrialRow {
    pub trial_id: i64,
    pub block: i64,
    pub position: i64,
    pub label: String,
    pub status: String,
    pub reason: Option<String>,
    pub result: Value,
}

pub fn trials(db: &Connection) -> Vec<TrialRow> {
    let mut stmt = db
        .prepare("SELECT trial_id, block, position, label, status, reason, result FROM trials ORDER BY trial_id")
        .unwrap();
    stmt.query_map([], |r| {
        Ok(TrialRow {
            trial_id: r.get(0)?,
            block: r.get(1)?,
            position: r.get(2)?,
            label: r.get(3)?,
            status: r.get(4)?,
            reason: r.get(5)?,
            result: serde_json::from_str(&r.get::<_, String>(6)?).unwrap(),
        })
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// (trial_id, block, position, label) in schedule order.
pub fn schedule(db: &Connection) -> Vec<(i64, i64, i64, String)> {
    let mut stmt = db
        .prepare(
            "SELECT s.trial_id, s.block, s.position, c.label FROM schedule s
             JOIN configs c USING (config_id) ORDER BY s.trial_id",
        )
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Checks the store equals the schedule: every trial exactly once, in order.
pub fn assert_store_equals_schedule(db: &Connection) {
    let rows = trials(db);
    let planned = schedule(db);
    assert_eq!(
        rows.iter()
            .map(|r| (r.trial_id, r.block, r.position, r.label.clone()))
            .collect::<Vec<_>>(),
        planned,
        "the store does not equal the schedule"
    );
}

/// A short Puma experiment (2 × 2 configurations × 3 blocks) that the run tests and the
/// fault suite interrupt and resume.
#[allow(dead_code)]
pub const INTERRUPTIBLE: &str = r#"
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
