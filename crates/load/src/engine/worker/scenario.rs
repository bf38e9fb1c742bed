//! The scenario part of a load thread: a virtual user's next step written when it is due,
//! its answer checked (the user moves on, or its session ends), and the steps lost with a
//! connection. The same `Worker` as `worker.rs`, whose hot loop calls these only for
//! connections that carry a user.

use std::time::{Duration, Instant};

use super::{Conn, Fate, InFlight, Worker};
use crate::engine::LATE_SEND;
use crate::scenario::{StepOutcome, MAX_CAPTURED_BODY};
use crate::spec::ConnectionMode;
use crate::stats::ErrorKind;

impl Worker {
    /// `send_due` for a connection that carries a virtual user: its next step once the
    /// previous one is answered and its think time is over.
    pub(super) fn send_step(&mut self, index: usize, now: Instant) -> Fate {
        let recording_now = self.recording;
        let record_start = self.time.record_start;
        let interval = self.send_interval;
        let conn = &mut self.conns[index];
        let (Some(run), Some(user)) = (&self.spec.scenario, conn.user.as_mut()) else {
            return Fate::Keep;
        };
        // A user sends its next step once the previous one is answered and its think
        // time is over; latency runs from that moment (the step's intended time).
        if !conn.in_flight.is_empty() {
            return Fate::Keep;
        }
        if conn.next_send > now {
            let at = conn.next_send;
            self.wake_at(at);
            return Fate::Keep;
        }
        let intended = conn.next_send;
        let recorded = intended >= record_start && recording_now;
        if recorded {
            match &mut conn.quota_left {
                Some(0) => return Fate::Keep,
                Some(left) => *left -= 1,
                None => {}
            }
            if user.at_first_step() {
                self.stats.sessions_started += 1;
            }
            if interval.is_some() && now.duration_since(intended) > LATE_SEND {
                self.stats.late_sends += 1;
            }
        }
        let close = self.spec.mode == ConnectionMode::CloseHeader;
        let step = user.global_step(&run.set);
        let keeps_body = user.step(&run.set).reads_body();
        let has_body = user.write_request(&run.set, &run.host, &run.headers, close, &mut conn.out);
        conn.parser.expect(!has_body);
        if let Some(c) = &mut conn.capture {
            c.reset(keeps_body, MAX_CAPTURED_BODY);
        }
        conn.in_flight.push_back(InFlight {
            intended,
            sent: now,
            url: step as u32,
            recorded,
            window: super::NO_WINDOW,
        });
        self.flush_writes(index)
    }

    /// A scenario step's response is in: the user checks it and moves on. Returns the
    /// connection's fate when the session ended (a new user gets a new connection), or
    /// `None` to go on as the connection mode says.
    pub(super) fn step_answered(
        &mut self,
        index: usize,
        request: &InFlight,
        status: u16,
        now: Instant,
    ) -> Option<Fate> {
        let run = self
            .spec
            .scenario
            .as_deref()
            .expect("a user walks a scenario");
        let conn = &mut self.conns[index];
        let user = conn.user.as_mut().expect("checked by the caller");
        let capture = conn.capture.as_ref().expect("users capture");
        let outcome = user.on_response(&run.set, status, &capture.headers, capture.whole_body());
        let step = &mut self.stats.steps[request.url as usize];
        if request.recorded {
            step.responses += 1;
            let latency = now.duration_since(request.intended).as_nanos() as u64;
            step.latency.saturating_record(latency.max(1));
        }
        match outcome {
            StepOutcome::Next { think } => {
                conn.next_send = now + think;
                None
            }
            StepOutcome::SessionDone { think } => {
                if request.recorded {
                    self.stats.sessions_completed += 1;
                }
                user.start_session(&run.set);
                conn.next_send = next_session(conn, self.send_interval, now + think);
                Some(Fate::Reset(None))
            }
            StepOutcome::Failed(failure) => {
                if request.recorded {
                    match failure {
                        crate::scenario::StepFailure::Status(_) => step.unexpected_status += 1,
                        crate::scenario::StepFailure::Extract { .. } => step.extract_failures += 1,
                    }
                    step.note_failure(failure.describe());
                    self.stats.sessions_failed += 1;
                }
                user.start_session(&run.set);
                conn.next_send = next_session(conn, self.send_interval, now);
                Some(Fate::Reset(None))
            }
        }
    }

    /// Scenario runs: steps lost with their connection (`kind`) count against their step,
    /// and end the user's session.
    pub(super) fn step_lost(
        &mut self,
        index: usize,
        lost: &[InFlight],
        kind: ErrorKind,
        now: Instant,
    ) {
        let Some(run) = self.spec.scenario.as_deref() else {
            return;
        };
        if lost.is_empty() {
            return;
        }
        for f in lost.iter().filter(|f| f.recorded) {
            let step = &mut self.stats.steps[f.url as usize];
            step.errors[kind as usize] += 1;
            step.note_failure(kind.as_str().to_string());
        }
        if lost.iter().any(|f| f.recorded) {
            self.stats.sessions_failed += 1;
        }
        let conn = &mut self.conns[index];
        if let Some(user) = conn.user.as_mut() {
            user.start_session(&run.set);
            conn.next_send = next_session(conn, self.send_interval, now);
        }
    }
}

/// When a user's next session starts: in closed loop at `closed` (after the last think
/// time, or at once after a failure); in open loop at the slot's next arrival on its
/// schedule, which moves on by one interval.
fn next_session(conn: &mut Conn, interval: Option<Duration>, closed: Instant) -> Instant {
    match interval {
        Some(iv) => {
            let due = conn.session_due;
            conn.session_due += iv;
            due
        }
        None => closed,
    }
}
