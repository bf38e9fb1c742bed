//! The load engine: one thread per `--threads`, each with its own `mio` event loop and its
//! own share of the connections. A connection is an explicit state machine (connect, write,
//! read, drain, closed). Nothing is shared between threads while the load runs: each
//! thread knows the run's deadlines up front and keeps its own counters and histograms,
//! which are merged once at the end.
//!
//! Hot-path rules: request bytes come pre-serialized from the plan; buffers are allocated
//! once per connection; no channel, lock or atomic is touched per request.
//!
//! How many connections are open at once is counted by each thread at every connect, first
//! response and close (plain integers). With several threads, each publishes its counts at
//! its timer checks (at least every 10 ms, not per request) in an atomic of its own, and
//! the main thread samples their sum; see `OpenPeak`.

use std::io;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::Token;

use crate::raw::RawLog;
use crate::sockets::{self, TimeWait};
use crate::spec::{split_evenly, LoadSpec, StopCondition};
use crate::stats::ThreadStats;

mod open;
mod worker;

pub use open::OpenPeak;
use open::{OpenCount, OpenGauge};
use worker::{Timeline, Worker};

/// Size of each connection's read buffer, and so the largest response head accepted.
pub const READ_BUFFER: usize = 16 * 1024;

/// Timers are checked at least this often even when nothing is due.
const MAX_TICK: Duration = Duration::from_millis(10);

/// A send that leaves later than this after its intended time counts as late.
const LATE_SEND: Duration = Duration::from_millis(1);

const TIMER_TOKEN: Token = Token(usize::MAX);

/// A reconnect time that never comes.
const FOREVER: Duration = Duration::from_secs(86_400 * 365);

/// With several threads, how often the main thread sums their open-connection counts.
pub const OPEN_SAMPLE_INTERVAL: Duration = Duration::from_millis(5);

/// The merged outcome of a run (serde: `crate::wire`).
#[derive(serde::Serialize, serde::Deserialize)]
pub struct RunOutcome {
    pub stats: ThreadStats,
    /// Connections each thread owned (threads without a connection are not started).
    pub connections_per_thread: Vec<usize>,
    /// Length of the recorded phase.
    pub recorded: Duration,
    /// The run was cut short by the interrupt flag (Ctrl-C).
    pub interrupted: bool,
    /// The first error writing the raw log, if any.
    #[serde(with = "crate::wire::io_error")]
    pub raw_error: Option<io::Error>,
    /// The most connections open at once over the run, warmup included.
    pub peak_open: OpenPeak,
    /// Sockets in TIME_WAIT to and at the target when the run ended; `None` when
    /// /proc/net/tcp could not be read.
    pub time_wait: Option<TimeWait>,
}

impl RunOutcome {
    /// Adds a later run against the same target to this one, as if they were one run
    /// whose recorded phases follow each other (an interleaved trial's slices): counts and
    /// histograms summed (requests in flight or unsent at the end too: each run drops its
    /// own), recorded time added, the larger peak of open connections, the later TIME_WAIT
    /// count, the first raw-log error.
    pub fn absorb(&mut self, later: RunOutcome) {
        self.stats.merge(&later.stats);
        // Connections still open at the end are the last run's, not a sum.
        self.stats.open_at_end = later.stats.open_at_end;
        self.stats.connecting_at_end = later.stats.connecting_at_end;
        self.recorded += later.recorded;
        self.interrupted |= later.interrupted;
        if self.raw_error.is_none() {
            self.raw_error = later.raw_error;
        }
        if later.peak_open.open > self.peak_open.open {
            self.peak_open = later.peak_open;
        }
        if later.time_wait.is_some() {
            self.time_wait = later.time_wait;
        }
    }
}

/// What a load thread hands back when it ends.
struct WorkerEnd {
    stats: ThreadStats,
    raw_result: io::Result<()>,
    interrupted: bool,
    /// The thread's own exact peak of open connections, with its other counts then.
    peak: OpenCount,
    /// The thread's own exact peak of answered open connections.
    peak_answered: u64,
}

/// Runs the load described by `spec`. `interrupt` ends the run early, as if its time were up.
pub fn run(
    spec: &LoadSpec,
    raw: Option<&RawLog>,
    interrupt: Arc<AtomicBool>,
) -> io::Result<RunOutcome> {
    run_with(spec, raw, interrupt, None)
}

/// Runs `spec`'s load held open over `windows` (crate::windows): its connections open at
/// once and stay open, requests are sent only inside the windows, and each window's
/// figures are kept apart (`stats.windows`). `spec.warmup` and `spec.stop` are not used:
/// the windows say when to send and what is recorded; the run ends once the last window's
/// requests are in (at most `windows::LAST_DRAIN` after its close). `recorded` is the
/// windows' recorded time, summed.
pub fn run_in_windows(
    spec: &LoadSpec,
    windows: Arc<[crate::windows::Window]>,
    interrupt: Arc<AtomicBool>,
) -> io::Result<RunOutcome> {
    if windows.is_empty() {
        return Err(io::Error::other(
            "a held-open run needs at least one window",
        ));
    }
    if spec.scenario.is_some()
        || spec.rate.is_some()
        || !matches!(spec.stop, StopCondition::Duration(_))
    {
        return Err(io::Error::other(
            "a held-open run is closed loop over plain requests (no rate, scenario or request count)",
        ));
    }
    run_with(spec, None, interrupt, Some(windows))
}

fn run_with(
    spec: &LoadSpec,
    raw: Option<&RawLog>,
    interrupt: Arc<AtomicBool>,
    windows: Option<Arc<[crate::windows::Window]>>,
) -> io::Result<RunOutcome> {
    crate::limits::ensure_open_files(spec.connections, spec.threads)?;
    let per_thread: Vec<usize> = spec
        .connections_per_thread()
        .into_iter()
        .filter(|&n| n > 0)
        .collect();
    // -n counts attempts; each connection gets an even share, summed per thread.
    let per_connection_quota = match spec.stop {
        StopCondition::Requests(n) => Some(split_evenly(n, spec.connections)),
        StopCondition::Duration(_) => None,
    };
    let origin = Instant::now();
    let (record_start, end) = match windows.as_deref() {
        Some([first, .., last]) => (first.record_from, Some(last.close)),
        Some([only]) => (only.record_from, Some(only.close)),
        _ => {
            let record_start = origin + spec.warmup;
            let end = match spec.stop {
                StopCondition::Duration(d) => Some(record_start + d),
                StopCondition::Requests(_) => None,
            };
            (record_start, end)
        }
    };

    let mut handles = Vec::with_capacity(per_thread.len());
    let mut gauges = Vec::with_capacity(per_thread.len());
    let mut first_connection = 0usize;
    for (thread_index, &connections) in per_thread.iter().enumerate() {
        let quota = per_connection_quota.as_ref().map(|q| {
            q[first_connection..first_connection + connections]
                .iter()
                .sum()
        });
        let raw_writer = raw.map(RawLog::writer).transpose()?;
        let gauge = Arc::new(OpenGauge::default());
        gauges.push(gauge.clone());
        let worker = Worker::new(
            spec.clone(),
            Timeline {
                origin,
                record_start,
                end,
                quota,
                schedule: windows.clone().map(crate::windows::Schedule::new),
            },
            first_connection,
            connections,
            raw_writer,
            interrupt.clone(),
            gauge,
        )?;
        handles.push(
            std::thread::Builder::new()
                .name(format!("load-{thread_index}"))
                .spawn(move || worker.run())?,
        );
        first_connection += connections;
    }

    // One thread counts its peaks exactly; several are sampled while they run.
    let mut sampled = OpenCount::default();
    let mut sampled_answered = 0;
    if handles.len() > 1 {
        while !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(OPEN_SAMPLE_INTERVAL);
            let now = gauges
                .iter()
                .map(|g| g.read())
                .fold(OpenCount::default(), OpenCount::plus);
            if now.open > sampled.open {
                sampled = now;
            }
            sampled_answered = sampled_answered.max(now.answered);
        }
    }

    let mut merged: Option<ThreadStats> = None;
    let mut raw_error = None;
    let mut interrupted = false;
    let mut thread_peaks = Vec::with_capacity(handles.len());
    let mut thread_peaks_answered = Vec::with_capacity(handles.len());
    for handle in handles {
        let end = handle
            .join()
            .map_err(|_| io::Error::other("a load thread panicked"))??;
        interrupted |= end.interrupted;
        if let Err(e) = end.raw_result {
            raw_error.get_or_insert(e);
        }
        thread_peaks.push(end.peak);
        thread_peaks_answered.push(end.peak_answered);
        match &mut merged {
            None => merged = Some(end.stats),
            Some(m) => m.merge(&end.stats),
        }
    }
    let busiest_thread = thread_peaks
        .iter()
        .copied()
        .max_by_key(|p| p.open)
        .unwrap_or_default();
    let exact = thread_peaks.len() == 1;
    let peak = if exact || busiest_thread.open > sampled.open {
        busiest_thread
    } else {
        sampled
    };
    let busiest_thread_answered = thread_peaks_answered.iter().copied().max().unwrap_or(0);
    let peak_open = OpenPeak {
        open: peak.open,
        connecting: peak.connecting,
        answered: if exact {
            busiest_thread_answered
        } else {
            busiest_thread_answered.max(sampled_answered)
        },
        per_thread: thread_peaks.iter().map(|p| p.open).collect(),
        exact,
    };
    let stats = merged.unwrap_or_else(|| ThreadStats::new(spec.rate.is_some()));
    let recorded = match windows {
        Some(w) => crate::windows::Schedule::new(w).recorded(),
        None => Duration::from_nanos(
            stats
                .recording_ended_ns
                .saturating_sub(stats.recording_started_ns),
        ),
    };
    Ok(RunOutcome {
        stats,
        connections_per_thread: per_thread,
        recorded,
        interrupted,
        raw_error,
        peak_open,
        time_wait: sockets::time_wait(spec.addr),
    })
}
