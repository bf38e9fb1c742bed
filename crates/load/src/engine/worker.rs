//! One load thread: its `mio` event loop, its share of the connections, and each
//! connection's state machine (connect, write, read, drain, closed) with its timers.
//!
//! Over 800 lines on purpose: this is the hot path, and every transition of a plain HTTP
//! connection is in this one file, where the reader can check the per-request rules (no
//! allocation, no lock, no atomic) in one place. Two parts that only some runs take are
//! `impl Worker` blocks of their own: `scenario.rs` (virtual users' steps) and `tls.rs`
//! (the TLS read path).

mod scenario;
mod tls;

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use super::open::{OpenCount, OpenGauge};
use super::{WorkerEnd, FOREVER, LATE_SEND, MAX_TICK, READ_BUFFER, TIMER_TOKEN};
use crate::plan::UrlPicker;
use crate::raw::{RawRecord, RawWriter};
use crate::response::{Capture, Completed, ParseError, ResponseParser};
use crate::scenario::VirtualUser;
use crate::spec::{split_evenly, ConnectionMode, LoadSpec, StopCondition};
use crate::stats::{ConnectFailure, ErrorKind, StepStats, ThreadStats, STATUS_SLOTS};
use crate::timer::PreciseTimer;
use crate::windows::{Gate, Schedule, LAST_DRAIN};

/// `InFlight::window` of a request that belongs to no window.
const NO_WINDOW: u32 = u32::MAX;

/// The run's fixed points in time, shared by value with every thread.
#[derive(Clone)]
pub(super) struct Timeline {
    pub(super) origin: Instant,
    pub(super) record_start: Instant,
    /// End of a duration-bound run.
    pub(super) end: Option<Instant>,
    /// This thread's share of `-n` attempts.
    pub(super) quota: Option<u64>,
    /// Held-open slicing: the windows in which the run may send (crate::windows).
    pub(super) schedule: Option<Schedule>,
}

/// A request written (or being written) and not yet answered.
#[derive(Clone, Copy)]
struct InFlight {
    /// When the schedule wanted it sent (open loop), or when it was sent (closed loop).
    intended: Instant,
    sent: Instant,
    url: u32,
    /// Sent at or after the start of the recorded phase.
    recorded: bool,
    /// Held-open slicing: the window whose recorded part sent it, or `NO_WINDOW`.
    window: u32,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ConnState {
    /// No socket; connect at the given time.
    Closed { reconnect_at: Instant },
    /// Non-blocking connect in progress.
    Connecting,
    /// Ready to write and read requests.
    Open,
    /// Close-header mode: the response is in, waiting for the server to close.
    Draining { until: Instant },
}

/// Where a connection stands for the open-connection counts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Closed,
    Connecting,
    /// Connected and not closed (open or draining).
    Open,
}

impl ConnState {
    fn phase(self) -> Phase {
        match self {
            ConnState::Closed { .. } => Phase::Closed,
            ConnState::Connecting => Phase::Connecting,
            ConnState::Open | ConnState::Draining { .. } => Phase::Open,
        }
    }
}

struct Conn {
    /// Global connection slot, stable across reconnects; appears in the raw log.
    id: u64,
    state: ConnState,
    socket: Option<TcpStream>,
    out: Vec<u8>,
    out_pos: usize,
    input: Box<[u8]>,
    in_start: usize,
    in_end: usize,
    parser: ResponseParser,
    in_flight: VecDeque<InFlight>,
    picker: UrlPicker,
    /// Open loop: the intended time of this connection's next request.
    next_send: Instant,
    /// Consecutive failed connects, for backoff.
    connect_failures: u32,
    /// When the pending connect started; it fails after `--timeout`.
    connect_started: Instant,
    /// The peer's close (FIN) has been seen: write nothing more on this socket.
    peer_closed: bool,
    /// This connection's share of `-n` attempts still to issue.
    quota_left: Option<u64>,
    /// A response has arrived since this connection connected.
    answered: bool,
    /// Scenario runs: the virtual user this connection is, and what it keeps of each
    /// response. The user outlives reconnects within its session.
    user: Option<VirtualUser>,
    capture: Option<Capture>,
    /// `https://`: the TLS session of the current socket.
    tls: Option<rustls::ClientConnection>,
    /// Open-loop scenario runs: when this slot's next session arrives (sessions arrive on
    /// a fixed schedule, whether or not the slot's previous one has ended).
    session_due: Instant,
}

pub(super) struct Worker {
    spec: LoadSpec,
    time: Timeline,
    poll: Poll,
    timer: PreciseTimer,
    conns: Vec<Conn>,
    stats: ThreadStats,
    raw: Option<RawWriter>,
    interrupt: Arc<AtomicBool>,
    /// Per-connection interval of the open-loop schedule.
    send_interval: Option<Duration>,
    /// Earliest time at which a timer may be due.
    next_scan: Instant,
    recording: bool,
    /// Connections open, connecting and answered now, kept by `set_state` and
    /// `count_answered`.
    now_open: OpenCount,
    /// The largest `now_open.open` so far, with the other counts at that moment.
    peak: OpenCount,
    /// The largest `now_open.answered` so far.
    peak_answered: u64,
    /// Where `now_open` is published for the main thread, and what was published last.
    gauge: Arc<OpenGauge>,
    published: OpenCount,
    /// Held-open slicing: the windows in which this run may send (crate::windows).
    schedule: Option<Schedule>,
}

/// What the event handlers decide about a connection.
enum Fate {
    Keep,
    /// Close and replace, counting `ErrorKind` for every recorded in-flight request.
    Reset(Option<ErrorKind>),
}

impl Worker {
    pub(super) fn new(
        spec: LoadSpec,
        mut time: Timeline,
        first_connection: usize,
        connections: usize,
        raw: Option<RawWriter>,
        interrupt: Arc<AtomicBool>,
        gauge: Arc<OpenGauge>,
    ) -> io::Result<Self> {
        let schedule = time.schedule.take();
        let origin = time.origin;
        let poll = Poll::new()?;
        let timer = PreciseTimer::new()?;
        poll.registry().register(
            &mut mio::unix::SourceFd(&timer.fd()),
            TIMER_TOKEN,
            Interest::READABLE,
        )?;
        let send_interval = spec
            .rate
            .map(|rate| Duration::from_secs_f64(spec.connections as f64 / rate));
        let per_connection_quota = match spec.stop {
            StopCondition::Requests(n) => Some(split_evenly(n, spec.connections)),
            StopCondition::Duration(_) => None,
        };
        let write_capacity = spec.plan.max_request_len() * spec.pipeline;
        let conns = (0..connections)
            .map(|i| {
                let global = first_connection + i;
                let reconnect_at = time.origin + spec.connect_stagger * global as u32;
                // Spread the connections' schedules evenly over one interval.
                let offset = send_interval
                    .map(|iv| iv.mul_f64(global as f64 / spec.connections as f64))
                    .unwrap_or_default();
                Conn {
                    id: global as u64,
                    state: ConnState::Closed { reconnect_at },
                    socket: None,
                    out: Vec::with_capacity(write_capacity),
                    out_pos: 0,
                    input: vec![0u8; READ_BUFFER].into_boxed_slice(),
                    in_start: 0,
                    in_end: 0,
                    parser: ResponseParser::new(),
                    in_flight: VecDeque::with_capacity(spec.pipeline),
                    picker: UrlPicker::new(&spec.plan, spec.seed, global as u64),
                    next_send: time.origin + offset,
                    connect_failures: 0,
                    connect_started: time.origin,
                    peer_closed: false,
                    quota_left: per_connection_quota.as_ref().map(|q| q[global]),
                    answered: false,
                    user: spec.scenario.as_ref().map(|run| {
                        let mut user = VirtualUser::new(global as u64 + 1, spec.seed);
                        user.start_session(&run.set);
                        user
                    }),
                    capture: spec.scenario.as_ref().map(|_| Capture::default()),
                    session_due: time.origin + offset + send_interval.unwrap_or_default(),
                    tls: None,
                }
            })
            .collect();
        let mut stats = ThreadStats::new(spec.rate.is_some());
        if let Some(run) = &spec.scenario {
            stats.steps = (0..run.set.step_count())
                .map(|_| StepStats::new())
                .collect();
        }
        if let Some(schedule) = &schedule {
            stats.windows = vec![Default::default(); schedule.windows().len()];
        }
        Ok(Worker {
            time,
            poll,
            timer,
            conns,
            stats,
            raw,
            interrupt,
            send_interval,
            next_scan: origin,
            recording: false,
            now_open: OpenCount::default(),
            peak: OpenCount::default(),
            peak_answered: 0,
            gauge,
            published: OpenCount::default(),
            schedule,
            spec,
        })
    }

    pub(super) fn run(mut self) -> io::Result<WorkerEnd> {
        let mut events = Events::with_capacity(1024);
        let mut interrupted = false;
        // The deadline the timerfd is armed for, so it is not re-armed for the same one.
        let mut armed_for: Option<Instant> = None;
        self.stats.recording_started_ns = self.ns_since_origin(self.time.record_start);
        loop {
            let now = Instant::now();
            self.recording = now >= self.time.record_start;
            if now >= self.next_scan {
                if self.interrupt.load(Ordering::Relaxed) {
                    interrupted = true;
                    self.finish(now);
                    break;
                }
                if self.time.end.is_some_and(|end| now >= end) && self.drained(now)
                    || self.quota_done()
                {
                    self.finish(now);
                    break;
                }
                self.scan_timers(now);
            }
            let wait = self.next_scan.saturating_duration_since(Instant::now());
            let precise = self.send_interval.is_some() || self.schedule.is_some();
            let timeout = if precise && wait < Duration::from_millis(1) && !wait.is_zero() {
                // epoll only sleeps in whole milliseconds; a timerfd wakes the open-loop
                // schedule on time. Closed loop needs no sub-millisecond timer.
                if armed_for != Some(self.next_scan) {
                    self.timer.arm_at(self.next_scan)?;
                    armed_for = Some(self.next_scan);
                }
                None
            } else {
                Some(wait)
            };
            match self.poll.poll(&mut events, timeout) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            for event in events.iter() {
                let token = event.token();
                if token == TIMER_TOKEN {
                    continue;
                }
                let index = token.0;
                let fate = if self.conns[index].state == ConnState::Connecting {
                    let failed = event.is_error() || event.is_write_closed();
                    if event.is_writable() || failed {
                        self.on_connected(index, failed)
                    } else {
                        Fate::Keep
                    }
                } else {
                    let mut fate = Fate::Keep;
                    if event.is_readable() || event.is_read_closed() || event.is_error() {
                        fate = self.on_readable(index, event.is_read_closed());
                    }
                    if matches!(fate, Fate::Keep) && event.is_writable() {
                        fate = self.flush_writes(index);
                    }
                    fate
                };
                if let Fate::Reset(kind) = fate {
                    self.reset(index, kind, Instant::now());
                }
            }
        }
        let raw_result = self.raw.take().map(RawWriter::finish).unwrap_or(Ok(()));
        Ok(WorkerEnd {
            stats: self.stats,
            raw_result,
            interrupted,
            peak: self.peak,
            peak_answered: self.peak_answered,
        })
    }

    /// Moves a connection to `state`, keeping the open, connecting and answered counts
    /// (plain integers of this thread) and the peak.
    #[inline]
    fn set_state(&mut self, index: usize, state: ConnState) {
        let before = std::mem::replace(&mut self.conns[index].state, state).phase();
        let after = state.phase();
        if before == after {
            return;
        }
        match before {
            Phase::Open => {
                self.now_open.open -= 1;
                let conn = &mut self.conns[index];
                if conn.answered {
                    conn.answered = false;
                    self.now_open.answered -= 1;
                }
            }
            Phase::Connecting => self.now_open.connecting -= 1,
            Phase::Closed => {}
        }
        match after {
            Phase::Open => {
                self.now_open.open += 1;
                if self.now_open.open > self.peak.open {
                    self.peak = self.now_open;
                }
            }
            Phase::Connecting => self.now_open.connecting += 1,
            Phase::Closed => {}
        }
    }

    /// Counts an open connection as answered at its first response.
    #[inline]
    fn count_answered(&mut self, index: usize) {
        let conn = &mut self.conns[index];
        if !conn.answered {
            conn.answered = true;
            self.now_open.answered += 1;
            self.peak_answered = self.peak_answered.max(self.now_open.answered);
        }
    }

    /// Publishes the connection counts for the main thread's samples.
    fn publish_open_count(&mut self) {
        if self.published != self.now_open {
            self.gauge.publish(self.now_open);
            self.published = self.now_open;
        }
    }

    fn ns_since_origin(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.time.origin).as_nanos() as u64
    }

    /// Whether a run at its end may stop: always, unless it is held open and its last
    /// window's requests are still coming in (for at most `LAST_DRAIN`).
    fn drained(&self, now: Instant) -> bool {
        let Some(end) = self.time.end else {
            return true;
        };
        self.schedule.is_none()
            || now >= end + LAST_DRAIN
            || !self
                .conns
                .iter()
                .any(|c| c.in_flight.iter().any(|f| f.recorded))
    }

    /// Held-open slicing: where `now` falls in the windows (always open otherwise).
    fn gate(&mut self, now: Instant) -> Gate {
        match &mut self.schedule {
            Some(s) => s.gate(now),
            None => Gate::Open {
                index: NO_WINDOW as usize,
                recorded: true,
            },
        }
    }

    /// Counts an error of a request sent in a window's recorded part to that window.
    fn count_window_error(&mut self, f: &InFlight) {
        if let Some(w) = self.stats.windows.get_mut(f.window as usize) {
            w.errors += 1;
        }
    }

    fn quota_done(&self) -> bool {
        self.time.quota.is_some() && self.conns.iter().all(conn_quota_spent)
    }

    /// Wants a timer check no later than `at`.
    #[inline]
    fn wake_at(&mut self, at: Instant) {
        if at < self.next_scan {
            self.next_scan = at;
        }
    }

    /// Connects what is due, sends what the schedule wants, aborts what timed out and
    /// closes connections whose server ignored `Connection: close`.
    fn scan_timers(&mut self, now: Instant) {
        self.publish_open_count();
        let mut next = now + MAX_TICK;
        if !self.recording {
            next = next.min(self.time.record_start);
        }
        if let Some(end) = self.time.end.filter(|&end| end > now) {
            next = next.min(end);
        }
        // Held open: wake at every edge of the windows; inside one, every idle connection
        // sends (closed loop: a window's open is what starts its requests).
        let held_open = match &mut self.schedule {
            Some(schedule) => {
                let gate = schedule.gate(now);
                if let Some(edge) = schedule.next_edge(now) {
                    next = next.min(edge);
                }
                matches!(gate, Gate::Open { .. })
            }
            None => false,
        };
        for index in 0..self.conns.len() {
            let conn = &self.conns[index];
            match conn.state {
                ConnState::Closed { reconnect_at } => {
                    if reconnect_at <= now {
                        self.connect(index, now);
                    } else {
                        next = next.min(reconnect_at);
                    }
                }
                ConnState::Draining { until } => {
                    if until <= now {
                        if self.recording {
                            self.stats.close_ignored += 1;
                        }
                        self.reset(index, None, now);
                    } else {
                        next = next.min(until);
                    }
                }
                ConnState::Connecting => {
                    let deadline = conn.connect_started + self.spec.timeout;
                    if deadline <= now {
                        // A full accept queue or a silent host: count it, as with a refusal.
                        self.connect_failed(index, now, ConnectFailure::TimedOut);
                    } else {
                        next = next.min(deadline);
                    }
                }
                ConnState::Open => {
                    if let Some(oldest) = conn.in_flight.front() {
                        let deadline = oldest.sent + self.spec.timeout;
                        if deadline <= now {
                            self.time_out(index, now);
                            continue;
                        }
                        next = next.min(deadline);
                    } else if conn.user.is_some() {
                        // A user thinking: its next step is due at `next_send`.
                        if conn.next_send <= now {
                            if let Fate::Reset(kind) = self.send_due(index, now) {
                                self.reset(index, kind, now);
                            }
                        } else {
                            next = next.min(conn.next_send);
                        }
                        continue;
                    }
                    if held_open && self.conns[index].in_flight.len() < self.spec.pipeline {
                        if let Fate::Reset(kind) = self.send_due(index, now) {
                            self.reset(index, kind, now);
                        }
                    }
                    if self.send_interval.is_some() {
                        let conn = &self.conns[index];
                        if conn.next_send <= now && conn.in_flight.len() < self.spec.pipeline {
                            if let Fate::Reset(kind) = self.send_due(index, now) {
                                self.reset(index, kind, now);
                            }
                        }
                        let conn = &self.conns[index];
                        if conn.in_flight.len() < self.spec.pipeline && conn.quota_left != Some(0) {
                            next = next.min(conn.next_send);
                        }
                    }
                }
            }
            // A connect may have failed synchronously and scheduled a retry.
            if let ConnState::Closed { reconnect_at } = self.conns[index].state {
                next = next.min(reconnect_at.max(now));
            }
        }
        self.next_scan = next;
    }

    /// Aborts every request in flight on a connection whose oldest request timed out.
    fn time_out(&mut self, index: usize, now: Instant) {
        let in_flight: Vec<InFlight> = self.conns[index].in_flight.drain(..).collect();
        for f in in_flight.iter().filter(|f| f.recorded) {
            // The wait so far is a lower bound of the latency; it is recorded, not dropped.
            self.record(index, f, now, 0, 0, Some(ErrorKind::Timeout));
            self.stats.count_error(ErrorKind::Timeout, 1);
            self.count_window_error(f);
        }
        self.step_lost(index, &in_flight, ErrorKind::Timeout, now);
        if self.recording {
            self.stats.reconnects += 1;
        }
        self.reset(index, None, now);
    }

    fn connect(&mut self, index: usize, now: Instant) {
        if self.recording && self.conns[index].quota_left == Some(0) {
            // This connection has issued its share of -n; it is not needed any more.
            self.set_state(
                index,
                ConnState::Closed {
                    reconnect_at: now + FOREVER,
                },
            );
            return;
        }
        let addr = self.spec.addr;
        match TcpStream::connect(addr) {
            Ok(mut socket) => {
                // Set before the connect completes: one syscall, no later round trip.
                let _ = socket.set_nodelay(true);
                let registered = self.poll.registry().register(
                    &mut socket,
                    Token(index),
                    Interest::READABLE | Interest::WRITABLE,
                );
                if let Err(e) = registered {
                    self.connect_failed(index, now, ConnectFailure::of(&e));
                    return;
                }
                let tls = match &self.spec.tls {
                    Some(client) => match client.connection() {
                        Ok(c) => Some(c),
                        Err(_) => {
                            self.connect_failed(index, now, ConnectFailure::Other);
                            return;
                        }
                    },
                    None => None,
                };
                let conn = &mut self.conns[index];
                conn.socket = Some(socket);
                conn.tls = tls;
                conn.connect_started = now;
                conn.peer_closed = false;
                self.set_state(index, ConnState::Connecting);
                let deadline = now + self.spec.timeout;
                self.wake_at(deadline);
            }
            Err(e) => self.connect_failed(index, now, ConnectFailure::of(&e)),
        }
    }

    fn connect_failed(&mut self, index: usize, now: Instant, why: ConnectFailure) {
        let recording = self.recording;
        self.stats.connect_failures[why as usize] += 1;
        let conn = &mut self.conns[index];
        conn.socket = None;
        conn.connect_failures += 1;
        // Back off up to 100 ms so a dead server does not turn into a busy loop.
        let backoff = Duration::from_millis(u64::from(conn.connect_failures.min(100)));
        self.set_state(
            index,
            ConnState::Closed {
                reconnect_at: now + backoff,
            },
        );
        let conn = &mut self.conns[index];
        if recording {
            // A failed connect uses up one attempt of -n, so a dead server ends the run.
            if let Some(left) = &mut conn.quota_left {
                *left = left.saturating_sub(1);
            }
            self.stats.count_error(ErrorKind::Connect, 1);
        }
        self.wake_at(now + backoff);
    }

    /// The pending connect finished. epoll reports a connect's end as writable, with an
    /// error or hang-up flag when it failed, so no extra syscall is needed to tell which;
    /// only a failure asks the socket for its cause.
    fn on_connected(&mut self, index: usize, failed: bool) -> Fate {
        let now = Instant::now();
        if failed {
            let why = self.conns[index]
                .socket
                .as_ref()
                .and_then(|s| s.take_error().ok().flatten())
                .map_or(ConnectFailure::Other, |e| ConnectFailure::of(&e));
            self.connect_failed(index, now, why);
            return Fate::Keep;
        }
        let conn = &mut self.conns[index];
        self.stats.connections_opened += 1;
        conn.connect_failures = 0;
        conn.in_start = 0;
        conn.in_end = 0;
        self.set_state(index, ConnState::Open);
        self.send_due(index, now)
    }

    /// Queues every request the load model allows now, then writes.
    fn send_due(&mut self, index: usize, now: Instant) -> Fate {
        let recording_now = self.recording;
        let record_start = self.time.record_start;
        let pipeline = self.spec.pipeline;
        let interval = self.send_interval;
        let ended = self.time.end.is_some_and(|end| now >= end);
        let (window, in_window_record) = match self.gate(now) {
            Gate::Shut => return Fate::Keep,
            Gate::Open { index, recorded } => (index as u32, recorded),
        };
        let held = self.schedule.is_some();
        let conn = &mut self.conns[index];
        if conn.state != ConnState::Open || ended || conn.peer_closed {
            // After the server's close (FIN) a new request would only be lost; on_eof
            // replaces the connection first.
            return Fate::Keep;
        }
        if self.spec.scenario.is_some() && conn.user.is_some() {
            return self.send_step(index, now);
        }
        let mut queued = false;
        while conn.in_flight.len() < pipeline {
            let intended = match interval {
                Some(iv) => {
                    if conn.next_send > now {
                        break;
                    }
                    let intended = conn.next_send;
                    conn.next_send += iv;
                    intended
                }
                None => now,
            };
            let recorded = if held {
                in_window_record
            } else {
                intended >= record_start && recording_now
            };
            if recorded {
                match &mut conn.quota_left {
                    Some(0) => {
                        if let Some(iv) = interval {
                            conn.next_send -= iv;
                        }
                        break;
                    }
                    Some(left) => *left -= 1,
                    None => {}
                }
                if now.duration_since(intended) > LATE_SEND {
                    self.stats.late_sends += 1;
                }
            }
            let url = conn.picker.next(&self.spec.plan);
            let request = &self.spec.plan.requests[url];
            if conn.in_flight.is_empty() {
                conn.parser.expect(!request.response_has_body);
            }
            conn.out.extend_from_slice(&request.bytes);
            conn.in_flight.push_back(InFlight {
                intended,
                sent: now,
                url: url as u32,
                recorded,
                window: if held && recorded { window } else { NO_WINDOW },
            });
            queued = true;
        }
        if interval.is_some() && conn.in_flight.len() < pipeline {
            let next = conn.next_send;
            self.wake_at(next);
        }
        if queued {
            self.flush_writes(index)
        } else {
            Fate::Keep
        }
    }

    /// Writes as much of the pending output as the socket takes.
    fn flush_writes(&mut self, index: usize) -> Fate {
        let conn = &mut self.conns[index];
        let Some(socket) = conn.socket.as_mut() else {
            return Fate::Keep;
        };
        if let Some(tls) = conn.tls.as_mut() {
            // Plaintext goes into the TLS session (which holds it until the handshake is
            // done), records go out to the socket.
            loop {
                if conn.out_pos < conn.out.len() {
                    match tls.writer().write(&conn.out[conn.out_pos..]) {
                        Ok(n) => conn.out_pos += n,
                        Err(_) => return Fate::Reset(Some(ErrorKind::Tls)),
                    }
                }
                if !tls.wants_write() {
                    break;
                }
                match tls.write_tls(socket) {
                    Ok(0) => return Fate::Reset(Some(ErrorKind::Write)),
                    Ok(n) => {
                        if self.recording {
                            self.stats.bytes_written += n as u64;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Fate::Keep,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => return Fate::Reset(Some(ErrorKind::Write)),
                }
            }
            if conn.out_pos >= conn.out.len() {
                conn.out.clear();
                conn.out_pos = 0;
            }
            return Fate::Keep;
        }
        while conn.out_pos < conn.out.len() {
            match socket.write(&conn.out[conn.out_pos..]) {
                Ok(0) => return Fate::Reset(Some(ErrorKind::Write)),
                Ok(n) => {
                    conn.out_pos += n;
                    if self.recording {
                        self.stats.bytes_written += n as u64;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Fate::Keep,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Fate::Reset(Some(ErrorKind::Write)),
            }
        }
        conn.out.clear();
        conn.out_pos = 0;
        Fate::Keep
    }

    /// Reads what the socket holds and completes every response found in it.
    fn on_readable(&mut self, index: usize, peer_closed: bool) -> Fate {
        self.conns[index].peer_closed |= peer_closed;
        if self.conns[index].tls.is_some() {
            return self.on_readable_tls(index, peer_closed);
        }
        loop {
            if let Some(fate) = self.make_room(index) {
                return fate;
            }
            let conn = &mut self.conns[index];
            let Some(socket) = conn.socket.as_mut() else {
                return Fate::Keep;
            };
            let space = conn.input.len() - conn.in_end;
            match socket.read(&mut conn.input[conn.in_end..]) {
                Ok(0) => return self.on_eof(index),
                Ok(n) => {
                    conn.in_end += n;
                    if self.recording {
                        self.stats.bytes_read += n as u64;
                    }
                    let fate = self.process_input(index);
                    if !matches!(fate, Fate::Keep) {
                        return fate;
                    }
                    // A short read drained the socket; the next edge will say when more
                    // arrives. Unless the peer closed: then read on to see the EOF.
                    let draining = matches!(self.conns[index].state, ConnState::Draining { .. });
                    if n < space && !peer_closed && !draining {
                        return Fate::Keep;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Fate::Keep,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Fate::Reset(Some(ErrorKind::Read)),
            }
        }
    }

    /// Makes room at the end of the input buffer by moving the unparsed bytes to its
    /// start; a full buffer of one unparsed head is a parse failure (its fate).
    #[inline]
    fn make_room(&mut self, index: usize) -> Option<Fate> {
        let conn = &mut self.conns[index];
        if conn.in_end == conn.input.len() {
            if conn.in_start == 0 {
                return Some(self.parse_failed(ParseError::HeadTooLarge));
            }
            conn.input.copy_within(conn.in_start..conn.in_end, 0);
            conn.in_end -= conn.in_start;
            conn.in_start = 0;
        }
        None
    }

    fn parse_failed(&mut self, _why: ParseError) -> Fate {
        Fate::Reset(Some(ErrorKind::Parse))
    }

    fn process_input(&mut self, index: usize) -> Fate {
        loop {
            let conn = &mut self.conns[index];
            if conn.in_start == conn.in_end {
                conn.in_start = 0;
                conn.in_end = 0;
                return Fate::Keep;
            }
            if conn.in_flight.is_empty() || conn.state != ConnState::Open {
                // Bytes nobody asked for: the server is not speaking HTTP/1.1 properly.
                return self.parse_failed(ParseError::MalformedHead);
            }
            let fed = conn.parser.feed_capturing(
                &conn.input[conn.in_start..conn.in_end],
                conn.capture.as_mut(),
            );
            match fed {
                Err(why) => return self.parse_failed(why),
                Ok((used, done)) => {
                    conn.in_start += used;
                    if let Some(completed) = done {
                        let fate = self.complete(index, completed);
                        if !matches!(fate, Fate::Keep) {
                            return fate;
                        }
                        if self.conns[index].state != ConnState::Open {
                            return Fate::Keep;
                        }
                    } else if used == 0 {
                        return Fate::Keep;
                    }
                }
            }
        }
    }

    fn on_eof(&mut self, index: usize) -> Fate {
        let conn = &mut self.conns[index];
        if let ConnState::Draining { .. } = conn.state {
            // The server honoured Connection: close.
            return Fate::Reset(None);
        }
        if let Some(completed) = conn.parser.finish_at_eof() {
            let fate = self.complete(index, completed);
            if !matches!(fate, Fate::Keep) {
                return fate;
            }
        }
        let conn = &self.conns[index];
        if conn.in_flight.is_empty() && conn.parser.is_idle() {
            if self.recording && self.spec.mode == ConnectionMode::Keepalive {
                self.stats.server_closed += 1;
            }
            Fate::Reset(None)
        } else {
            // Closed mid-response, or with requests unanswered.
            Fate::Reset(Some(ErrorKind::Read))
        }
    }

    /// A response is complete: record it, then keep, drain or close the connection.
    fn complete(&mut self, index: usize, completed: Completed) -> Fate {
        let now = Instant::now();
        let conn = &mut self.conns[index];
        let request = conn
            .in_flight
            .pop_front()
            .expect("a response answers a request");
        if let (Some(next), None) = (conn.in_flight.front(), &conn.user) {
            let next_has_body = self.spec.plan.requests[next.url as usize].response_has_body;
            conn.parser.expect(!next_has_body);
        }
        self.count_answered(index);
        if request.recorded {
            let status = usize::from(completed.status).min(STATUS_SLOTS - 1);
            self.stats.status[status] += 1;
            self.stats.responses += 1;
            if let Some(w) = self.stats.windows.get_mut(request.window as usize) {
                w.responses += 1;
                let close = self
                    .schedule
                    .as_ref()
                    .expect("windows are held open")
                    .windows()[request.window as usize]
                    .close;
                let after = now.saturating_duration_since(close).as_nanos() as u64;
                w.drained_ns = w.drained_ns.max(after);
            }
            self.record(
                index,
                &request,
                now,
                completed.status,
                completed.bytes,
                None,
            );
            if conn_quota_spent(&self.conns[index]) {
                // The run may be over: check now rather than at the next tick.
                self.wake_at(now);
            }
        } else {
            self.stats.unrecorded_responses += 1;
        }
        if self.conns[index].user.is_some() {
            if let Some(fate) = self.step_answered(index, &request, completed.status, now) {
                return fate;
            }
        }
        match self.spec.mode {
            ConnectionMode::ClientClose => Fate::Reset(None),
            ConnectionMode::CloseHeader if completed.server_closes => {
                // The server answered `Connection: close`: it closes, and RFC 9112 §9.6
                // has the client close after reading the response too, without waiting.
                Fate::Reset(None)
            }
            ConnectionMode::CloseHeader => {
                // No `Connection: close` in the answer: does the server close anyway?
                let until = now + self.spec.close_grace;
                self.set_state(index, ConnState::Draining { until });
                self.wake_at(until);
                Fate::Keep
            }
            ConnectionMode::Keepalive if completed.server_closes => {
                if self.recording {
                    self.stats.server_closed += 1;
                }
                // Requests pipelined behind this response will not be answered.
                let lost = !self.conns[index].in_flight.is_empty();
                Fate::Reset(lost.then_some(ErrorKind::Read))
            }
            ConnectionMode::Keepalive => {
                let conn = &self.conns[index];
                if conn.in_flight.is_empty() && conn.in_start < conn.in_end {
                    // More bytes than the requests asked for.
                    return self.parse_failed(ParseError::MalformedHead);
                }
                self.send_due(index, now)
            }
        }
    }

    #[inline]
    fn record(
        &mut self,
        index: usize,
        f: &InFlight,
        now: Instant,
        status: u16,
        bytes: u64,
        error: Option<ErrorKind>,
    ) {
        let latency = now.duration_since(f.intended).as_nanos() as u64;
        self.stats.latency.saturating_record(latency.max(1));
        if let Some(h) = &mut self.stats.latency_uncorrected {
            h.saturating_record((now.duration_since(f.sent).as_nanos() as u64).max(1));
        }
        self.log_raw(index, f, latency, status, bytes, error);
    }

    /// One line of the raw log, when there is one.
    #[inline]
    fn log_raw(
        &mut self,
        index: usize,
        f: &InFlight,
        latency_ns: u64,
        status: u16,
        bytes: u64,
        error: Option<ErrorKind>,
    ) {
        if let Some(raw) = &mut self.raw {
            raw.record(&RawRecord {
                start_ns: f
                    .intended
                    .saturating_duration_since(self.time.record_start)
                    .as_nanos() as u64,
                latency_ns,
                status,
                bytes,
                conn: self.conns[index].id,
                url: f.url,
                error: error.map(ErrorKind::as_str),
            });
        }
    }

    /// Closes the connection and schedules its replacement. Recorded requests still in
    /// flight are counted as `error` (when one is given) and logged.
    fn reset(&mut self, index: usize, error: Option<ErrorKind>, now: Instant) {
        let lost: Vec<InFlight> = self.conns[index].in_flight.drain(..).collect();
        if let Some(kind) = error {
            self.step_lost(index, &lost, kind, now);
            for f in lost.iter().filter(|f| f.recorded) {
                self.stats.count_error(kind, 1);
                self.count_window_error(f);
                let waited = now.saturating_duration_since(f.intended).as_nanos() as u64;
                self.log_raw(index, f, waited, 0, 0, Some(kind));
            }
            if self.recording && lost.iter().all(|f| !f.recorded) && kind == ErrorKind::Parse {
                // Garbage with nothing recorded in flight is still a parse error.
                self.stats.count_error(kind, 1);
            }
        }
        let recording = self.recording;
        let conn = &mut self.conns[index];
        if error.is_some() && recording {
            self.stats.reconnects += 1;
        }
        // Give back the -n attempts of requests that never completed nor errored.
        if error.is_none() {
            if let Some(left) = &mut conn.quota_left {
                *left += lost.iter().filter(|f| f.recorded).count() as u64;
            }
        }
        conn.socket = None; // closing the fd also removes it from the epoll set
        conn.tls = None;
        conn.out.clear();
        conn.out_pos = 0;
        conn.in_start = 0;
        conn.in_end = 0;
        conn.parser = ResponseParser::new();
        self.set_state(index, ConnState::Closed { reconnect_at: now });
        if self.time.end.is_some_and(|end| now >= end) {
            return; // the run is over; finish() closes everything
        }
        // Held open and between windows: connect at the next window's open, not during
        // another server's time.
        if let Some(schedule) = &mut self.schedule {
            if schedule.gate(now) == Gate::Shut {
                if let Some(open) = schedule.next_open(now) {
                    self.set_state(index, ConnState::Closed { reconnect_at: open });
                    self.wake_at(open);
                    return;
                }
            }
        }
        self.connect(index, now);
    }

    /// Ends the run: counts what is still in flight or still due, and stops recording.
    fn finish(&mut self, now: Instant) {
        let end = self.time.end.map_or(now, |end| end.min(now));
        self.stats.recording_ended_ns = self.ns_since_origin(end.max(self.time.record_start));
        self.stats.open_at_end = self.now_open.open;
        self.stats.connecting_at_end = self.now_open.connecting;
        // This thread's connections close now: the samples must not count them on.
        self.gauge.publish(OpenCount::default());
        for conn in &mut self.conns {
            self.stats.in_flight_at_end +=
                conn.in_flight.iter().filter(|f| f.recorded).count() as u64;
            if let (Some(iv), None) = (self.send_interval, conn.quota_left) {
                // Requests due and never sent; with a scenario, sessions due and never
                // started (the one in progress has started).
                let due = if conn.user.is_some() {
                    conn.session_due
                } else {
                    conn.next_send
                };
                self.stats.unsent_at_end += sends_due_between(due, iv, self.time.record_start, end);
            }
            conn.socket = None;
        }
        if let Some(raw) = &mut self.raw {
            raw.flush();
        }
    }
}

fn conn_quota_spent(conn: &Conn) -> bool {
    conn.quota_left == Some(0) && !conn.in_flight.iter().any(|f| f.recorded)
}

/// Open loop: how many sends of a schedule (`next`, `next + iv`, ...) fall in `[from, to)`.
/// They were due but never written.
fn sends_due_between(next: Instant, iv: Duration, from: Instant, to: Instant) -> u64 {
    let first = if next >= from {
        next
    } else {
        // Align to the schedule inside [from, to).
        let behind = (from - next).as_nanos();
        let steps = behind.div_ceil(iv.as_nanos().max(1));
        next + Duration::from_nanos((steps * iv.as_nanos()) as u64)
    };
    if first >= to {
        return 0;
    }
    ((to - first).as_nanos().div_ceil(iv.as_nanos().max(1))) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsent_sends_follow_the_schedule() {
        let t0 = Instant::now();
        let ms = Duration::from_millis(1);
        // Schedule at 0,1,2,...; window [0, 10): ten sends due.
        assert_eq!(sends_due_between(t0, ms, t0, t0 + ms * 10), 10);
        // Next send at 5 ms: 5..9 are due.
        assert_eq!(sends_due_between(t0 + ms * 5, ms, t0, t0 + ms * 10), 5);
        // A schedule behind the window start only counts sends inside it.
        assert_eq!(sends_due_between(t0, ms * 2, t0 + ms * 3, t0 + ms * 9), 3);
        assert_eq!(sends_due_between(t0 + ms * 20, ms, t0, t0 + ms * 10), 0);
    }
}
