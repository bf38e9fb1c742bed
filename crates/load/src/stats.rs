//! Counters and histograms. Each thread owns one `ThreadStats` and touches nothing shared;
//! the threads' stats are merged once, after the run.

use std::io;

use hdrhistogram::Histogram;

/// Status codes are counted in a flat array indexed by code; httparse only accepts three
/// digits, so 1000 slots cover every code without a map on the hot path.
pub const STATUS_SLOTS: usize = 1000;

/// The kinds of error, each counted separately.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The TCP connect failed or was refused.
    Connect,
    /// Reading failed: reset, or the server closed mid-response.
    Read,
    /// Writing the request failed.
    Write,
    /// No complete response within `--timeout`.
    Timeout,
    /// The response was not valid HTTP/1.1.
    Parse,
    /// The TLS handshake or a TLS record failed (a certificate not trusted, an alert).
    Tls,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 6] = [
        ErrorKind::Connect,
        ErrorKind::Read,
        ErrorKind::Write,
        ErrorKind::Timeout,
        ErrorKind::Parse,
        ErrorKind::Tls,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::Read => "read",
            ErrorKind::Write => "write",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Parse => "parse",
            ErrorKind::Tls => "tls",
        }
    }
}

/// Why a connect failed. Counted over the whole run, warmup included, to explain
/// connections that were not open; `ErrorKind::Connect` counts the recorded phase only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectFailure {
    /// ECONNREFUSED: nothing listens on the port (or the listener has gone).
    Refused,
    /// ECONNRESET: the server reset the connection during the handshake.
    Reset,
    /// The handshake did not complete within `--timeout` (a full accept queue drops the
    /// SYN; a silent host never answers), or the kernel gave up (ETIMEDOUT).
    TimedOut,
    /// EADDRNOTAVAIL: no local port left for one more connection to the target (the
    /// local port range is used up, typically by ports in TIME_WAIT).
    NoLocalPort,
    /// Anything else: an unreachable network, no file descriptor left, ...
    Other,
}

impl ConnectFailure {
    pub const ALL: [ConnectFailure; 5] = [
        ConnectFailure::Refused,
        ConnectFailure::Reset,
        ConnectFailure::TimedOut,
        ConnectFailure::NoLocalPort,
        ConnectFailure::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ConnectFailure::Refused => "refused",
            ConnectFailure::Reset => "reset",
            ConnectFailure::TimedOut => "timed_out",
            ConnectFailure::NoLocalPort => "no_local_port",
            ConnectFailure::Other => "other",
        }
    }

    /// The kind of a failed `connect(2)` or of the error its socket reports afterwards.
    pub fn of(error: &io::Error) -> Self {
        match error.raw_os_error() {
            Some(libc::ECONNREFUSED) => ConnectFailure::Refused,
            Some(libc::ECONNRESET) => ConnectFailure::Reset,
            Some(libc::ETIMEDOUT) => ConnectFailure::TimedOut,
            Some(libc::EADDRNOTAVAIL) => ConnectFailure::NoLocalPort,
            _ => ConnectFailure::Other,
        }
    }
}

/// A latency histogram in nanoseconds, 3 significant digits, growing as needed so that no
/// value is ever too large to record.
pub fn new_latency_histogram() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds");
    h.auto(true);
    h
}

/// What one scenario step measured during the recorded phase (scenario runs only).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct StepStats {
    /// Latency of the step's responses and timeouts, as `ThreadStats::latency`.
    #[serde(with = "crate::wire::histogram")]
    pub latency: Histogram<u64>,
    pub responses: u64,
    /// Responses with a status the step does not expect.
    pub unexpected_status: u64,
    /// Responses an extraction found nothing in.
    pub extract_failures: u64,
    /// Attempts without a response (timeout, read, write, parse), by `ErrorKind`.
    pub errors: [u64; ErrorKind::ALL.len()],
    /// The first failure of each kind, described, for the report.
    pub first_failures: Vec<String>,
}

/// How many distinct failure descriptions a step keeps.
const KEPT_FAILURES: usize = 3;

impl StepStats {
    pub fn new() -> Self {
        StepStats {
            latency: new_latency_histogram(),
            responses: 0,
            unexpected_status: 0,
            extract_failures: 0,
            errors: [0; ErrorKind::ALL.len()],
            first_failures: Vec::new(),
        }
    }

    /// Keeps `what` if it is new and there is room (a failure path: it may allocate).
    pub fn note_failure(&mut self, what: String) {
        if self.first_failures.len() < KEPT_FAILURES && !self.first_failures.contains(&what) {
            self.first_failures.push(what);
        }
    }

    pub fn merge(&mut self, other: &StepStats) {
        self.latency
            .add(&other.latency)
            .expect("auto-resizing histograms always merge");
        self.responses += other.responses;
        self.unexpected_status += other.unexpected_status;
        self.extract_failures += other.extract_failures;
        for (mine, theirs) in self.errors.iter_mut().zip(other.errors.iter()) {
            *mine += theirs;
        }
        for f in &other.first_failures {
            self.note_failure(f.clone());
        }
    }
}

impl Default for StepStats {
    fn default() -> Self {
        Self::new()
    }
}

/// What one thread measured during the recorded phase.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct ThreadStats {
    /// Latency of every recorded response and timeout. In open loop it runs from the
    /// intended send time (coordinated-omission free); in closed loop from the actual send.
    #[serde(with = "crate::wire::histogram")]
    pub latency: Histogram<u64>,
    /// Open loop only: latency from the moment the request was actually written.
    #[serde(with = "crate::wire::histogram::option")]
    pub latency_uncorrected: Option<Histogram<u64>>,
    /// Complete responses, whatever their status.
    pub responses: u64,
    /// Complete responses to requests sent outside the recorded phase (the warmup's, a
    /// held-open window's lead-in): work the server did that no recorded figure counts.
    #[serde(default)]
    pub unrecorded_responses: u64,
    #[serde(with = "crate::wire::status_counts")]
    pub status: Box<[u64; STATUS_SLOTS]>,
    pub errors: [u64; ErrorKind::ALL.len()],
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// TCP connections opened during the whole run, warmup included.
    pub connections_opened: u64,
    /// Failed connects by `ConnectFailure`, during the whole run, warmup included.
    pub connect_failures: [u64; ConnectFailure::ALL.len()],
    /// Connections open (connected and not closed) when the run ended.
    pub open_at_end: u64,
    /// Connections still in their TCP handshake when the run ended.
    pub connecting_at_end: u64,
    /// Connections that had to be replaced (error, timeout or close).
    pub reconnects: u64,
    /// Keepalive mode: connections the server closed (announced with `Connection: close`
    /// or closed while idle), each replaced by a new connection.
    pub server_closed: u64,
    /// Close-header mode: responses after which the server did not close in time.
    pub close_ignored: u64,
    /// Requests written but not answered when the run ended.
    pub in_flight_at_end: u64,
    /// Open loop: sends that left later than their intended time by more than 1 ms.
    pub late_sends: u64,
    /// Open loop: intended sends whose time had come but that were never written.
    pub unsent_at_end: u64,
    /// Recorded phase, in nanoseconds since the run's start.
    pub recording_started_ns: u64,
    pub recording_ended_ns: u64,
    /// Scenario runs: one entry per step, in the scenarios' order; empty otherwise.
    pub steps: Vec<StepStats>,
    /// `https://`: what the first failed TLS session said (over the whole run).
    pub first_tls_error: Option<String>,
    /// Scenario runs: sessions whose first step was sent in the recorded phase.
    pub sessions_started: u64,
    /// Scenario runs: sessions that walked every step.
    pub sessions_completed: u64,
    /// Scenario runs: sessions ended by a failed step.
    pub sessions_failed: u64,
    /// Held-open slicing (`crate::windows`): one entry per window; empty otherwise.
    #[serde(default)]
    pub windows: Vec<crate::windows::WindowStats>,
}

impl ThreadStats {
    pub fn new(open_loop: bool) -> Self {
        ThreadStats {
            latency: new_latency_histogram(),
            latency_uncorrected: open_loop.then(new_latency_histogram),
            responses: 0,
            unrecorded_responses: 0,
            status: Box::new([0; STATUS_SLOTS]),
            errors: [0; ErrorKind::ALL.len()],
            bytes_read: 0,
            bytes_written: 0,
            connections_opened: 0,
            connect_failures: [0; ConnectFailure::ALL.len()],
            open_at_end: 0,
            connecting_at_end: 0,
            reconnects: 0,
            server_closed: 0,
            close_ignored: 0,
            in_flight_at_end: 0,
            late_sends: 0,
            unsent_at_end: 0,
            recording_started_ns: 0,
            recording_ended_ns: 0,
            steps: Vec::new(),
            first_tls_error: None,
            sessions_started: 0,
            sessions_completed: 0,
            sessions_failed: 0,
            windows: Vec::new(),
        }
    }

    /// Responses a scenario step did not accept: an unexpected status or an extraction
    /// that found nothing (0 without a scenario).
    pub fn step_failures(&self) -> (u64, u64) {
        self.steps.iter().fold((0, 0), |(s, e), st| {
            (s + st.unexpected_status, e + st.extract_failures)
        })
    }

    #[inline]
    pub fn count_error(&mut self, kind: ErrorKind, requests: u64) {
        self.errors[kind as usize] += requests;
    }

    pub fn error_count(&self, kind: ErrorKind) -> u64 {
        self.errors[kind as usize]
    }

    pub fn connect_failure_count(&self, why: ConnectFailure) -> u64 {
        self.connect_failures[why as usize]
    }

    /// Responses whose status is not 2xx.
    pub fn status_errors(&self) -> u64 {
        self.status
            .iter()
            .enumerate()
            .filter(|(code, _)| !(200..300).contains(code))
            .map(|(_, n)| n)
            .sum()
    }

    /// Adds another thread's numbers into this one.
    pub fn merge(&mut self, other: &ThreadStats) {
        self.latency
            .add(&other.latency)
            .expect("auto-resizing histograms always merge");
        if let (Some(mine), Some(theirs)) =
            (&mut self.latency_uncorrected, &other.latency_uncorrected)
        {
            mine.add(theirs)
                .expect("auto-resizing histograms always merge");
        }
        self.responses += other.responses;
        self.unrecorded_responses += other.unrecorded_responses;
        for (mine, theirs) in self.status.iter_mut().zip(other.status.iter()) {
            *mine += theirs;
        }
        for (mine, theirs) in self.errors.iter_mut().zip(other.errors.iter()) {
            *mine += theirs;
        }
        self.bytes_read += other.bytes_read;
        self.bytes_written += other.bytes_written;
        self.connections_opened += other.connections_opened;
        for (mine, theirs) in self
            .connect_failures
            .iter_mut()
            .zip(other.connect_failures.iter())
        {
            *mine += theirs;
        }
        self.open_at_end += other.open_at_end;
        self.connecting_at_end += other.connecting_at_end;
        self.reconnects += other.reconnects;
        self.server_closed += other.server_closed;
        self.close_ignored += other.close_ignored;
        self.in_flight_at_end += other.in_flight_at_end;
        self.late_sends += other.late_sends;
        self.unsent_at_end += other.unsent_at_end;
        self.recording_started_ns = self.recording_started_ns.min(other.recording_started_ns);
        self.recording_ended_ns = self.recording_ended_ns.max(other.recording_ended_ns);
        if self.steps.len() < other.steps.len() {
            self.steps.resize_with(other.steps.len(), StepStats::new);
        }
        for (mine, theirs) in self.steps.iter_mut().zip(other.steps.iter()) {
            mine.merge(theirs);
        }
        if self.windows.len() < other.windows.len() {
            self.windows.resize(other.windows.len(), Default::default());
        }
        for (mine, theirs) in self.windows.iter_mut().zip(other.windows.iter()) {
            *mine = mine.plus(*theirs);
        }
        self.sessions_started += other.sessions_started;
        if self.first_tls_error.is_none() {
            self.first_tls_error = other.first_tls_error.clone();
        }
        self.sessions_completed += other.sessions_completed;
        self.sessions_failed += other.sessions_failed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_failures_are_told_apart_by_errno() {
        let of = |errno| ConnectFailure::of(&io::Error::from_raw_os_error(errno));
        assert_eq!(of(libc::ECONNREFUSED), ConnectFailure::Refused);
        assert_eq!(of(libc::ECONNRESET), ConnectFailure::Reset);
        assert_eq!(of(libc::ETIMEDOUT), ConnectFailure::TimedOut);
        assert_eq!(of(libc::EADDRNOTAVAIL), ConnectFailure::NoLocalPort);
        assert_eq!(of(libc::EMFILE), ConnectFailure::Other);
        assert_eq!(
            ConnectFailure::of(&io::Error::other("no errno")),
            ConnectFailure::Other
        );
    }

    #[test]
    fn merging_keeps_every_value_and_count() {
        let mut a = ThreadStats::new(true);
        let mut b = ThreadStats::new(true);
        for v in [1_000u64, 2_000, 3_000] {
            a.latency.record(v).unwrap();
        }
        // Larger than the initial bound: the histogram must grow, not drop it.
        b.latency.record(120_000_000_000).unwrap();
        b.latency_uncorrected.as_mut().unwrap().record(5).unwrap();
        a.status[200] = 3;
        b.status[503] = 1;
        b.count_error(ErrorKind::Timeout, 2);
        a.connect_failures[ConnectFailure::Refused as usize] = 1;
        b.connect_failures[ConnectFailure::Refused as usize] = 2;
        b.open_at_end = 3;
        a.recording_started_ns = 10;
        b.recording_started_ns = 5;
        a.recording_ended_ns = 100;
        b.recording_ended_ns = 90;
        a.merge(&b);
        assert_eq!(a.latency.len(), 4);
        assert!(a.latency.max() >= 119_000_000_000);
        assert_eq!(a.latency_uncorrected.as_ref().unwrap().len(), 1);
        assert_eq!(a.status[200], 3);
        assert_eq!(a.status_errors(), 1);
        assert_eq!(a.error_count(ErrorKind::Timeout), 2);
        assert_eq!(a.connect_failure_count(ConnectFailure::Refused), 3);
        assert_eq!(a.open_at_end, 3);
        assert_eq!((a.recording_started_ns, a.recording_ended_ns), (5, 100));
    }
}
