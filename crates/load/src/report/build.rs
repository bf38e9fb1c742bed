//! A `LoadReport` made from a run's outcome, in named steps: the errors, the settings, the
//! connections, the rate and a scenario's steps, each from the spec and the merged
//! statistics; then the warnings the figures call for.

use hdrhistogram::Histogram;

use super::{
    Actual, ConnectFailures, Errors, LatencySummary, LoadReport, RateOutcome, ScenarioReport,
    Settings, StepReport, Target, TimeWaitCounts, Tool, RATE_REACHED_SHARE, SCHEMA,
};
use crate::engine::RunOutcome;
use crate::spec::{LoadSpec, ScenarioRun, StopCondition};
use crate::stats::{ConnectFailure, ErrorKind, ThreadStats};

impl LoadReport {
    /// The report of a finished run: its figures, then its warnings.
    pub fn new(spec: &LoadSpec, url: &str, outcome: &RunOutcome) -> Self {
        let s = &outcome.stats;
        let elapsed_s = outcome.recorded.as_secs_f64();
        let per_s = |n: u64| {
            if elapsed_s > 0.0 {
                n as f64 / elapsed_s
            } else {
                0.0
            }
        };
        let errors = Errors::counted(spec, s);
        let error_rate = error_rate(s, &errors);
        let requests_per_s = per_s(s.responses);
        // With a scenario the rate is of sessions (users arriving), not of requests.
        let scheduled_per_s = match &spec.scenario {
            Some(_) => per_s(s.sessions_started),
            None => requests_per_s,
        };
        let mut report = LoadReport {
            schema: SCHEMA.into(),
            tool: Tool {
                name: "rubyrace".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
            target: Target {
                url: url.to_string(),
                addr: spec.addr.to_string(),
            },
            settings: Settings::of_spec(spec),
            actual: Actual::of_run(outcome),
            elapsed_s,
            requests: s.responses,
            requests_per_s,
            bytes_read: s.bytes_read,
            bytes_written: s.bytes_written,
            latency_us: summarize(&s.latency),
            latency_uncorrected_us: s.latency_uncorrected.as_ref().map(summarize),
            status: status_counts(s),
            errors,
            error_rate,
            in_flight_at_end: s.in_flight_at_end,
            close_ignored: s.close_ignored,
            rate: spec
                .rate
                .map(|target| RateOutcome::of_schedule(target, scheduled_per_s, s)),
            interrupted: outcome.interrupted,
            warnings: Vec::new(),
            scenario: spec
                .scenario
                .as_ref()
                .map(|run| ScenarioReport::of_run(run, s)),
        };
        report.warnings = report.find_warnings();
        if let Some(e) = &s.first_tls_error {
            report.warnings.insert(
                0,
                format!(
                    "TLS failed ({} errors); the first said: {e}",
                    report.errors.tls
                ),
            );
        }
        report
    }
}

impl Errors {
    /// Errors by kind; a scenario step says which statuses it expects (a login's 302 is a
    /// success), a URL mix expects 2xx.
    fn counted(spec: &LoadSpec, s: &ThreadStats) -> Errors {
        let (status_errors, extract_errors) = match &spec.scenario {
            Some(_) => s.step_failures(),
            None => (s.status_errors(), 0),
        };
        Errors {
            connect: s.error_count(ErrorKind::Connect),
            read: s.error_count(ErrorKind::Read),
            write: s.error_count(ErrorKind::Write),
            timeout: s.error_count(ErrorKind::Timeout),
            parse: s.error_count(ErrorKind::Parse),
            tls: s.error_count(ErrorKind::Tls),
            status: status_errors,
            extract: extract_errors,
            total: s.errors.iter().sum::<u64>() + status_errors + extract_errors,
        }
    }
}

/// Errors of any kind per attempt (responses and attempts without one); 0 without attempts.
fn error_rate(s: &ThreadStats, errors: &Errors) -> f64 {
    let failed_attempts: u64 = s.errors.iter().sum();
    let attempts = s.responses + failed_attempts;
    if attempts == 0 {
        0.0
    } else {
        errors.total as f64 / attempts as f64
    }
}

/// Responses per status code, the codes as strings; codes never seen left out.
fn status_counts(s: &ThreadStats) -> std::collections::BTreeMap<String, u64> {
    s.status
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .map(|(code, &n)| (code.to_string(), n))
        .collect()
}

impl Settings {
    /// The settings the run was given.
    fn of_spec(spec: &LoadSpec) -> Settings {
        Settings {
            threads: spec.threads,
            connections: spec.connections,
            duration_s: match spec.stop {
                StopCondition::Duration(d) => Some(d.as_secs_f64()),
                StopCondition::Requests(_) => None,
            },
            requests: match spec.stop {
                StopCondition::Requests(n) => Some(n),
                StopCondition::Duration(_) => None,
            },
            warmup_s: spec.warmup.as_secs_f64(),
            mode: spec.mode.as_str().into(),
            rate: spec.rate,
            pipeline: spec.pipeline,
            timeout_s: spec.timeout.as_secs_f64(),
            close_grace_s: spec.close_grace.as_secs_f64(),
            seed: spec.seed,
            urls: spec.plan.requests.iter().map(|r| r.line.clone()).collect(),
        }
    }
}

impl Actual {
    /// What the run's connections did: threads, peaks, the end, failed connects, TIME_WAIT.
    fn of_run(outcome: &RunOutcome) -> Actual {
        let s = &outcome.stats;
        Actual {
            threads: outcome.connections_per_thread.len(),
            connections: outcome.connections_per_thread.iter().sum(),
            connections_per_thread: outcome.connections_per_thread.clone(),
            connections_opened: s.connections_opened,
            reconnects: s.reconnects,
            server_closed: s.server_closed,
            peak_open: outcome.peak_open.open,
            peak_open_answered: outcome.peak_open.answered,
            peak_open_exact: outcome.peak_open.exact,
            peak_open_per_thread: outcome.peak_open.per_thread.clone(),
            connecting_at_peak: outcome.peak_open.connecting,
            open_at_end: s.open_at_end,
            connecting_at_end: s.connecting_at_end,
            connect_failures: ConnectFailures {
                refused: s.connect_failure_count(ConnectFailure::Refused),
                reset: s.connect_failure_count(ConnectFailure::Reset),
                timed_out: s.connect_failure_count(ConnectFailure::TimedOut),
                no_local_port: s.connect_failure_count(ConnectFailure::NoLocalPort),
                other: s.connect_failure_count(ConnectFailure::Other),
                total: s.connect_failures.iter().sum(),
            },
            time_wait: outcome.time_wait.map(|t| TimeWaitCounts {
                local_ports: t.local_ports,
                at_target: t.at_target,
                local_port_range: t.local_port_range.map(|(low, high)| [low, high]),
            }),
        }
    }
}

impl RateOutcome {
    /// An open-loop run against its target rate; `achieved` is per second of the recorded
    /// phase (requests, or sessions with a scenario).
    fn of_schedule(target: f64, achieved: f64, s: &ThreadStats) -> RateOutcome {
        RateOutcome {
            target,
            achieved,
            reached: achieved >= target * RATE_REACHED_SHARE && s.unsent_at_end == 0,
            late_sends: s.late_sends,
            unsent_at_end: s.unsent_at_end,
        }
    }
}

impl ScenarioReport {
    /// The sessions of a scenario run, and each step's figures.
    fn of_run(run: &ScenarioRun, s: &ThreadStats) -> ScenarioReport {
        ScenarioReport {
            source: run.set.source.clone(),
            sessions_started: s.sessions_started,
            sessions_completed: s.sessions_completed,
            sessions_failed: s.sessions_failed,
            steps: run
                .set
                .step_names()
                .into_iter()
                .zip(&s.steps)
                .map(|((scenario, step), st)| {
                    let errors: u64 = st.errors.iter().sum();
                    StepReport {
                        scenario,
                        step,
                        requests: st.responses + errors,
                        responses: st.responses,
                        unexpected_status: st.unexpected_status,
                        extract_failures: st.extract_failures,
                        errors,
                        latency_us: summarize(&st.latency),
                        failures: st.first_failures.clone(),
                    }
                })
                .collect(),
        }
    }
}

/// A latency histogram (nanoseconds) summarized in microseconds; all zero when empty.
fn summarize(h: &Histogram<u64>) -> LatencySummary {
    if h.is_empty() {
        return LatencySummary::default();
    }
    let us = |ns: u64| ns as f64 / 1000.0;
    LatencySummary {
        count: h.len(),
        mean: h.mean() / 1000.0,
        stdev: h.stdev() / 1000.0,
        min: us(h.min()),
        p50: us(h.value_at_quantile(0.50)),
        p90: us(h.value_at_quantile(0.90)),
        p99: us(h.value_at_quantile(0.99)),
        p99_9: us(h.value_at_quantile(0.999)),
        max: us(h.max()),
    }
}
