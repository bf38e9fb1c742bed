//! The result of a load run as data: `LoadReport` and its parts, serialized as the
//! documented `rubyrace.load/1` JSON schema. `build` makes one from a run's outcome,
//! `warnings` says what in it deserves a warning, `text` renders it for the terminal.

mod build;
mod text;
mod warnings;

use serde::{Deserialize, Serialize};

use crate::plan::UrlLine;

pub const SCHEMA: &str = "rubyrace.load/1";

/// Below this share of the target rate, an open-loop run is reported as not reaching it.
pub const RATE_REACHED_SHARE: f64 = 0.99;

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct LoadReport {
    pub schema: String,
    pub tool: Tool,
    pub target: Target,
    pub settings: Settings,
    pub actual: Actual,
    /// Length of the recorded phase in seconds.
    pub elapsed_s: f64,
    /// Complete responses, whatever the status.
    pub requests: u64,
    pub requests_per_s: f64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// From the intended send time in open loop, from the actual send in closed loop.
    pub latency_us: LatencySummary,
    /// Open loop only: from the actual send time (what coordinated omission would show).
    pub latency_uncorrected_us: Option<LatencySummary>,
    /// Responses per status code (as strings, e.g. "200").
    pub status: std::collections::BTreeMap<String, u64>,
    pub errors: Errors,
    /// Share of attempts that ended in an error of any kind, non-2xx included (0..1).
    pub error_rate: f64,
    /// Requests written during the recorded phase and unanswered when it ended.
    pub in_flight_at_end: u64,
    /// Close-header mode: responses after which the server kept the connection open.
    pub close_ignored: u64,
    pub rate: Option<RateOutcome>,
    pub interrupted: bool,
    pub warnings: Vec<String>,
    /// Scenario runs: sessions and every step's figures; absent for a URL mix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario: Option<ScenarioReport>,
}

/// What the virtual users of a scenario run did.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct ScenarioReport {
    /// The scenario file.
    pub source: String,
    /// Sessions whose first step was sent in the recorded phase.
    pub sessions_started: u64,
    /// Recorded sessions that walked every step, and sessions a failed step ended.
    pub sessions_completed: u64,
    pub sessions_failed: u64,
    pub steps: Vec<StepReport>,
}

/// One step of one scenario over the recorded phase.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct StepReport {
    pub scenario: String,
    pub step: String,
    /// Attempts: responses and errors without a response.
    pub requests: u64,
    pub responses: u64,
    /// Responses with a status the step does not expect.
    pub unexpected_status: u64,
    /// Responses an extraction found nothing in.
    pub extract_failures: u64,
    /// Attempts without a response: timeouts, read, write and parse errors.
    pub errors: u64,
    /// From the step's intended send time (the end of the think time before it).
    pub latency_us: LatencySummary,
    /// The first failures, described (`extract csrf: no <meta name="csrf-token" ...>`).
    pub failures: Vec<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Target {
    pub url: String,
    pub addr: String,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Settings {
    pub threads: usize,
    pub connections: usize,
    pub duration_s: Option<f64>,
    pub requests: Option<u64>,
    pub warmup_s: f64,
    pub mode: String,
    pub rate: Option<f64>,
    pub pipeline: usize,
    pub timeout_s: f64,
    pub close_grace_s: f64,
    pub seed: u64,
    pub urls: Vec<UrlLine>,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Actual {
    /// Threads that ran (never more than connections).
    pub threads: usize,
    pub connections_per_thread: Vec<usize>,
    pub connections: usize,
    /// TCP connections opened over the whole run, warmup included.
    pub connections_opened: u64,
    /// Connections replaced after an error during the recorded phase.
    pub reconnects: u64,
    /// Keepalive mode: connections the server closed during the recorded phase
    /// (`Connection: close` or an idle close); each was replaced.
    pub server_closed: u64,
    /// The most connections open at once, warmup included: connected from the client's
    /// side and not closed, which includes connections waiting in the server's accept
    /// queue or half-open (see `engine::OpenPeak`).
    pub peak_open: u64,
    /// The most open connections at once that had each received a response: connections
    /// the server certainly had.
    pub peak_open_answered: u64,
    /// True when `peak_open` is exact (one thread); with several threads it is sampled
    /// (see `engine::OpenPeak`).
    pub peak_open_exact: bool,
    /// Each thread's own exact peak; their sum bounds `peak_open` from above.
    pub peak_open_per_thread: Vec<u64>,
    /// Connections still in their TCP handshake at the moment of `peak_open`.
    pub connecting_at_peak: u64,
    /// Connections open, and still connecting, when the run ended.
    pub open_at_end: u64,
    pub connecting_at_end: u64,
    /// Failed connects by cause over the whole run, warmup included.
    pub connect_failures: ConnectFailures,
    /// Sockets in TIME_WAIT to and at the target when the run ended; null when
    /// /proc/net/tcp cannot be read.
    pub time_wait: Option<TimeWaitCounts>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct ConnectFailures {
    /// ECONNREFUSED: nothing listened.
    pub refused: u64,
    /// ECONNRESET during the handshake.
    pub reset: u64,
    /// No handshake within `--timeout` (a full accept queue), or ETIMEDOUT.
    pub timed_out: u64,
    /// EADDRNOTAVAIL: no local port left.
    pub no_local_port: u64,
    pub other: u64,
    pub total: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct TimeWaitCounts {
    /// Local ports held in TIME_WAIT by closed connections to the target (any process).
    pub local_ports: u64,
    /// TIME_WAIT sockets whose local end is the target: the server's side, if it is local.
    pub at_target: u64,
    /// `net.ipv4.ip_local_port_range`, both ends included; null when unreadable.
    pub local_port_range: Option<[u16; 2]>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct LatencySummary {
    pub count: u64,
    pub mean: f64,
    pub stdev: f64,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p99_9: f64,
    pub max: f64,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct Errors {
    pub connect: u64,
    pub read: u64,
    pub write: u64,
    pub timeout: u64,
    pub parse: u64,
    /// TLS handshakes or records that failed (https:// only).
    #[serde(default)]
    pub tls: u64,
    /// Responses whose status is not 2xx; in a scenario run, responses with a status their
    /// step does not expect.
    pub status: u64,
    /// Scenario runs: responses a step's extraction found nothing in.
    #[serde(default)]
    pub extract: u64,
    pub total: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct RateOutcome {
    pub target: f64,
    /// Requests intended by the schedule per second of the recorded phase that got a
    /// response; equals the throughput.
    pub achieved: f64,
    pub reached: bool,
    /// Sends that left more than 1 ms after their intended time.
    pub late_sends: u64,
    /// Sends whose time had come but that were never written.
    pub unsent_at_end: u64,
}

impl LoadReport {
    /// Failed connects by cause, e.g. "refused 12, reset 0, timed out 3, no local port 0,
    /// other 0".
    fn connect_failures_text(&self) -> String {
        let f = &self.actual.connect_failures;
        format!(
            "refused {}, reset {}, timed out {}, no local port {}, other {}",
            f.refused, f.reset, f.timed_out, f.no_local_port, f.other
        )
    }
}
