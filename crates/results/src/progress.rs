//! A run in progress, as the process running it sees it: `DIR/progress.json`, rewritten
//! whole (a temporary file and a rename) at every event and every second, and read by
//! `rubyrace watch` beside the store. The store says what is done; this file says what is
//! happening now (the trial and its phase, the stopping rule's last look, the notes) and
//! whether the process is still there (its pid and the time of its last write).
//!
//! Schema `rubyrace.progress/1` (docs/results.md, "progress.json").

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use experiment::precision::{PrecisionStatus, PrecisionTarget};
use serde::{Deserialize, Serialize};

pub const PROGRESS_FILE: &str = "progress.json";
pub const PROGRESS_SCHEMA: &str = "rubyrace.progress/1";
/// Notes kept, the most recent last.
pub const NOTES_KEPT: usize = 20;

/// How the run stands: `running` until the process ends it (or dies: then the file stays
/// `running` and its `pid` is gone, which a reader checks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunState {
    #[default]
    Running,
    Complete,
    Interrupted,
    /// `--fail-fast` after a failed or invalid trial.
    StoppedAfterFailure,
    /// An error ended the run (a full disk, say): `ended_reason` says which.
    Stopped,
    /// A fleet run's controller submitted the blocks and exited (`--detach`): they run on
    /// the cluster; `rubyrace run --resume` attaches again.
    Detached,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Complete => "complete",
            RunState::Interrupted => "interrupted",
            RunState::StoppedAfterFailure => "stopped after a failure (--fail-fast)",
            RunState::Stopped => "stopped",
            RunState::Detached => {
                "detached (the blocks run on the cluster; `rubyrace run --resume` attaches again)"
            }
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Progress {
    pub schema: String,
    /// The process running the run, and its machine: a reader on the same machine checks
    /// the pid is alive.
    pub pid: u32,
    pub host: String,
    pub command: String,
    /// Seconds since the epoch.
    pub started_unix: f64,
    pub updated_unix: f64,
    pub state: RunState,
    pub ended_reason: Option<String>,
    /// Trials in the schedule (it grows in runs that decide when to stop), stored, and
    /// blocks planned.
    pub total: usize,
    pub done: usize,
    pub blocks: u32,
    /// Trials stored before this session began (a resume), so the pace counts this
    /// session's only.
    pub done_before: usize,
    pub current: Option<Current>,
    pub precision: Option<PrecisionLook>,
    /// Time-stamped notes (services, the quiet wait, the gate), the last `NOTES_KEPT`.
    pub notes: Vec<Note>,
}

/// What is running now: one trial (the blocks design) or a block of servers up together.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Current {
    pub block: u32,
    /// The trial (blocks design); `None` for a block of servers up together.
    pub trial_id: Option<usize>,
    pub labels: Vec<String>,
    pub since_unix: f64,
    pub phase: Option<Phase>,
}

/// A step of the current trial or block.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Phase {
    /// "starting the server", "load", "profiling", "stopping the server", "warming up B",
    /// "slice 3/40 on A", ...
    pub name: String,
    pub since_unix: f64,
    /// For the load phase: its warmup and measured seconds, so a reader can say which
    /// part it is in.
    pub warmup_s: Option<f64>,
    pub measured_s: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PrecisionLook {
    pub at_unix: f64,
    pub status: PrecisionStatus,
    pub target: PrecisionTarget,
    /// The rule added a block (false: it ended the run).
    pub added: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Note {
    pub at_unix: f64,
    pub text: String,
}

/// Seconds since the epoch, now.
pub fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

pub fn path(dir: &Path) -> PathBuf {
    dir.join(PROGRESS_FILE)
}

impl Progress {
    pub fn new(command: &str) -> Progress {
        let now = now_unix();
        Progress {
            schema: PROGRESS_SCHEMA.into(),
            pid: std::process::id(),
            host: sys::environment::node_name(),
            command: command.into(),
            started_unix: now,
            updated_unix: now,
            ..Progress::default()
        }
    }

    pub fn note(&mut self, text: &str) {
        self.notes.push(Note {
            at_unix: now_unix(),
            text: text.into(),
        });
        let extra = self.notes.len().saturating_sub(NOTES_KEPT);
        self.notes.drain(..extra);
    }

    /// Writes the file whole, stamped now.
    pub fn write(&mut self, dir: &Path) -> Result<()> {
        self.updated_unix = now_unix();
        crate::write_atomically(&path(dir), &serde_json::to_vec_pretty(self)?)
    }

    /// The file of `dir`, if there is one.
    pub fn read(dir: &Path) -> Result<Option<Progress>> {
        let file = path(dir);
        let text = match std::fs::read(&file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", file.display())),
        };
        serde_json::from_slice(&text)
            .map(Some)
            .with_context(|| format!("{} is not a progress file", file.display()))
    }

    /// Running, by a process that is still there: on this machine, its pid is alive (and
    /// not a zombie); on another, it wrote within the last `stale_s` seconds.
    pub fn is_live(&self, stale_s: f64) -> bool {
        if self.state != RunState::Running {
            return false;
        }
        if self.host == sys::environment::node_name() {
            let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid));
            return stat.is_ok_and(|s| {
                s.rsplit_once(") ")
                    .is_some_and(|(_, rest)| !rest.starts_with('Z'))
            });
        }
        now_unix() - self.updated_unix < stale_s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_is_written_whole_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Progress::read(dir.path()).unwrap(), None);
        let mut p = Progress::new("rubyrace run x.toml");
        p.total = 12;
        p.done = 3;
        for i in 0..(NOTES_KEPT + 5) {
            p.note(&format!("note {i}"));
        }
        p.write(dir.path()).unwrap();
        let back = Progress::read(dir.path()).unwrap().unwrap();
        // (Times are floats, read back within their last digit.)
        assert_eq!((back.total, back.done, back.pid), (12, 3, p.pid));
        assert!((back.updated_unix - p.updated_unix).abs() < 1e-3);
        assert_eq!(back.notes.len(), NOTES_KEPT);
        assert_eq!(
            back.notes.last().unwrap().text,
            format!("note {}", NOTES_KEPT + 4)
        );
        // This process is alive; a pid that is not is not.
        assert!(back.is_live(5.0));
        let mut gone = back.clone();
        gone.pid = u32::MAX / 2;
        assert!(!gone.is_live(5.0));
        let mut ended = back;
        ended.state = RunState::Complete;
        assert!(!ended.is_live(5.0));
        // No temporary file is left beside it.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [PROGRESS_FILE]);
    }
}
