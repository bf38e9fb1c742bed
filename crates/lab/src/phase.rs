//! What the trial running in this process is doing now ("starting the server", "load",
//! "profiling", ...), set by the trial code as it goes and read by the live progress file
//! (`crate::live`) every second. One trial runs at a time per process, so one slot serves.

use std::sync::Mutex;
use std::time::Duration;

use results::progress::{now_unix, Phase};

static CURRENT: Mutex<Option<Phase>> = Mutex::new(None);

/// The trial enters `name`; for a load, its warmup and measured durations.
pub fn set(name: &str, warmup: Option<Duration>, measured: Option<Duration>) {
    let phase = Phase {
        name: name.into(),
        since_unix: now_unix(),
        warmup_s: warmup.map(|d| d.as_secs_f64()),
        measured_s: measured.map(|d| d.as_secs_f64()),
    };
    *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = Some(phase);
}

/// No trial is running.
pub fn clear() {
    *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = None;
}

pub fn current() -> Option<Phase> {
    CURRENT.lock().unwrap_or_else(|e| e.into_inner()).clone()
}
