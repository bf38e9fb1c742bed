//! The result of a load run as data (`LoadReport`, serialized as the documented
//! `rubyrace.load/1` JSON schema), its human summary, and the HdrHistogram log export.

use std::fmt::Write as _;
use std::io;

use hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder;
use hdrhistogram::serialization::V2Serializer;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use units::{bytes, micros};

use crate::engine::RunOutcome;
use crate::plan::UrlLine;
use crate::spec::{LoadSpec, StopCondition};
use crate::stats::{ConnectFailure, ErrorKind};

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

impl LoadReport {
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
        // A scenario step says which statuses it expects (a login's 302 is a success).
        let (status_errors, extract_errors) = match &spec.scenario {
            Some(_) => s.step_failures(),
            None => (s.status_errors(), 0),
        };
        let errors = Errors {
            connect: s.error_count(ErrorKind::Connect),
            read: s.error_count(ErrorKind::Read),
            write: s.error_count(ErrorKind::Write),
            timeout: s.error_count(ErrorKind::Timeout),
            parse: s.error_count(ErrorKind::Parse),
            tls: s.error_count(ErrorKind::Tls),
            status: status_errors,
            extract: extract_errors,
            total: s.errors.iter().sum::<u64>() + status_errors + extract_errors,
        };
        let scenario = spec.scenario.as_ref().map(|run| ScenarioReport {
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
        });
        let failed_attempts: u64 = s.errors.iter().sum();
        let attempts = s.responses + failed_attempts;
        let error_rate = if attempts == 0 {
            0.0
        } else {
            errors.total as f64 / attempts as f64
        };
        let status = s
            .status
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(code, &n)| (code.to_string(), n))
            .collect();
        let requests_per_s = per_s(s.responses);
        // With a scenario the rate is of sessions (users arriving), not of requests.
        let scheduled_per_s = match &spec.scenario {
            Some(_) => per_s(s.sessions_started),
            None => requests_per_s,
        };
        let rate = spec.rate.map(|target| RateOutcome {
            target,
            achieved: scheduled_per_s,
            reached: scheduled_per_s >= target * RATE_REACHED_SHARE && s.unsent_at_end == 0,
            late_sends: s.late_sends,
            unsent_at_end: s.unsent_at_end,
        });
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
            settings: Settings {
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
            },
            actual: Actual {
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
            },
            elapsed_s,
            requests: s.responses,
            requests_per_s,
            bytes_read: s.bytes_read,
            bytes_written: s.bytes_written,
            latency_us: summarize(&s.latency),
            latency_uncorrected_us: s.latency_uncorrected.as_ref().map(summarize),
            status,
            errors,
            error_rate,
            in_flight_at_end: s.in_flight_at_end,
            close_ignored: s.close_ignored,
            rate,
            interrupted: outcome.interrupted,
            warnings: Vec::new(),
            scenario,
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

    fn find_warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if self.interrupted {
            w.push("interrupted: the figures cover only the time before Ctrl-C".into());
        }
        if self.actual.threads < self.settings.threads {
            w.push(format!(
                "only {} threads ran: a thread needs at least one connection",
                self.actual.threads
            ));
        }
        if self.close_ignored > 0 {
            w.push(format!(
                "the server ignored `Connection: close` {} times; rubyrace closed those \
                 connections itself after {} ms",
                self.close_ignored,
                (self.settings.close_grace_s * 1000.0).round()
            ));
        }
        if self.settings.mode == "keepalive" && self.actual.server_closed > 0 {
            w.push(format!(
                "the server closed {} keepalive connections ({:.1}% of responses); \
                 those requests paid for a new connection",
                self.actual.server_closed,
                100.0 * self.actual.server_closed as f64 / self.requests.max(1) as f64
            ));
        }
        if let Some(rate) = &self.rate {
            if !rate.reached {
                w.push(format!(
                    "target rate not reached: {:.1} req/s achieved of {:.1} ({:.1}%), \
                     {} sends never left; latency includes the queueing",
                    rate.achieved,
                    rate.target,
                    100.0 * rate.achieved / rate.target,
                    rate.unsent_at_end
                ));
            }
        }
        if let Some(why) = self.not_open_explained() {
            w.push(why);
        }
        if self.requests == 0 {
            w.push("no response was received during the recorded phase".into());
        }
        if self.errors.connect > 0 && self.requests == 0 {
            w.push("every connect failed: is the server running?".into());
        }
        w
    }

    /// Failed connects by cause, e.g. "refused 12, reset 0, timed out 3, no local port 0,
    /// other 0".
    fn connect_failures_text(&self) -> String {
        let f = &self.actual.connect_failures;
        format!(
            "refused {}, reset {}, timed out {}, no local port {}, other {}",
            f.refused, f.reset, f.timed_out, f.no_local_port, f.other
        )
    }

    /// Why connections were not open, or open but never answered, when something kept
    /// them from it: connects that failed, handshakes the server did not complete, the
    /// server's closes, no local port left. `None` when nothing did.
    fn not_open_explained(&self) -> Option<String> {
        let a = &self.actual;
        let keepalive = self.settings.mode == "keepalive";
        let fewer = keepalive && a.peak_open < a.connections as u64;
        // A server that closes keepalive connections after some requests (Puma does) always
        // has a few fresh ones not yet answered: only a majority waiting is worth a warning.
        let unanswered = keepalive && a.peak_open_answered * 2 < a.peak_open;
        let mut reasons = Vec::new();
        if fewer && a.connecting_at_peak > 0 {
            reasons.push(format!(
                "{} were still connecting then (the server did not complete their \
                 handshake: a full accept queue?)",
                a.connecting_at_peak
            ));
        }
        if unanswered {
            reasons.push(format!(
                "at most {} open at once had had a response, of {} open at once; the others \
                 were waiting for the server to accept or serve them (in its accept queue, \
                 or half-open when that queue was full)",
                a.peak_open_answered, a.peak_open
            ));
        }
        if fewer && a.server_closed > 0 {
            reasons.push(format!(
                "the server closed {} keepalive connections",
                a.server_closed
            ));
        }
        let failures = &a.connect_failures;
        if failures.total > 0 {
            reasons.push(format!(
                "connects failed {} times ({})",
                failures.total,
                self.connect_failures_text()
            ));
            if failures.no_local_port > 0 {
                reasons.push(match &a.time_wait {
                    Some(t) => format!(
                        "no local port was left: {} ports were in TIME_WAIT to the target \
                         at the end",
                        t.local_ports
                    ),
                    None => "no local port was left (ports in TIME_WAIT?)".to_string(),
                });
            }
        }
        if reasons.is_empty() {
            return None;
        }
        let head = if fewer {
            format!(
                "only {} of {} connections were open at once{}: ",
                a.peak_open,
                a.connections,
                if a.peak_open_exact { "" } else { " (sampled)" }
            )
        } else {
            String::new()
        };
        Some(format!("{head}{}", reasons.join("; ")))
    }

    /// The summary a person reads in the terminal: what was run, the connections, the
    /// outcome, a scenario's steps and the warnings.
    pub fn human_summary(&self) -> String {
        let mut out = String::new();
        self.write_plan(&mut out);
        self.write_connections(&mut out);
        self.write_outcome(&mut out);
        if let Some(sc) = &self.scenario {
            write_steps(&mut out, sc);
        }
        for w in &self.warnings {
            let _ = writeln!(out, "  warning: {w}");
        }
        out
    }

    /// The command's target and settings: the first two lines.
    fn write_plan(&self, out: &mut String) {
        let s = &self.settings;
        let model = match s.rate {
            Some(r) if self.scenario.is_some() => format!("open loop at {r} users/s"),
            Some(r) => format!("open loop at {r} req/s"),
            None => "closed loop".to_string(),
        };
        let span = match (s.duration_s, s.requests) {
            (Some(d), _) => format!("{d}s"),
            (None, Some(n)) => format!("{n} requests"),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "rubyrace load {} ({})",
            self.target.url, self.target.addr
        );
        let _ = writeln!(
            out,
            "  {span} after {}s warmup, {model}, {}, pipeline {}",
            s.warmup_s, s.mode, s.pipeline
        );
    }

    /// The connections: threads, the peak open, the end, failed connects and TIME_WAIT, a URL mix.
    fn write_connections(&self, out: &mut String) {
        let s = &self.settings;
        let per_thread = self
            .actual
            .connections_per_thread
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join("+");
        let _ = writeln!(
            out,
            "  threads {}, connections {} ({per_thread}); {} opened, {} closed by the server, {} replaced after errors",
            self.actual.threads,
            self.actual.connections,
            self.actual.connections_opened,
            self.actual.server_closed,
            self.actual.reconnects
        );
        let a = &self.actual;
        let how = if a.peak_open_exact {
            "exact".to_string()
        } else {
            let peaks = a
                .peak_open_per_thread
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join("+");
            format!(
                "sampled every {} ms; the threads' own peaks: {peaks}",
                crate::engine::OPEN_SAMPLE_INTERVAL.as_millis()
            )
        };
        let _ = writeln!(
            out,
            "  peak open     {} of {} open at once ({how}), {} still connecting then; \
             at most {} open at once had had a response",
            a.peak_open, a.connections, a.connecting_at_peak, a.peak_open_answered
        );
        let _ = writeln!(
            out,
            "  at the end    {} open, {} connecting",
            a.open_at_end, a.connecting_at_end
        );
        // Connect failures and ports in TIME_WAIT explain missing connections; shown when
        // there were failures, or when the mode opens a connection per request.
        let failed = a.connect_failures.total > 0;
        if failed {
            let _ = writeln!(
                out,
                "  connects      {} failed over the run: {}",
                a.connect_failures.total,
                self.connect_failures_text()
            );
        }
        if failed || s.mode != "keepalive" {
            match &a.time_wait {
                Some(t) => {
                    let range = t
                        .local_port_range
                        .map(|[low, high]| {
                            let ports = u32::from(high) + 1 - u32::from(low.min(high));
                            format!(" (local port range {low}-{high}: {ports} ports)")
                        })
                        .unwrap_or_default();
                    let _ = writeln!(
                        out,
                        "  TIME_WAIT     {} local ports to {}{range}, {} sockets at it, at the end",
                        t.local_ports, self.target.addr, t.at_target
                    );
                }
                None => {
                    let _ = writeln!(out, "  TIME_WAIT     unknown (/proc/net/tcp is unreadable)");
                }
            }
        }
        if s.urls.len() > 1 {
            let _ = writeln!(out, "  url mix of {} lines, seed {}", s.urls.len(), s.seed);
        }
    }

    /// What the run measured: requests, transfer, latency, status, errors, in flight, the rate.
    fn write_outcome(&self, out: &mut String) {
        let s = &self.settings;
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "  requests      {} in {:.2}s: {:.1} req/s",
            self.requests, self.elapsed_s, self.requests_per_s
        );
        let _ = writeln!(
            out,
            "  transfer      {} read ({}/s), {} written",
            bytes(self.bytes_read),
            bytes((self.bytes_read as f64 / self.elapsed_s.max(1e-9)) as u64),
            bytes(self.bytes_written)
        );
        let label = if self.latency_uncorrected_us.is_some() {
            "latency (from intended send)"
        } else {
            "latency"
        };
        write_latency(out, label, &self.latency_us);
        if let Some(u) = &self.latency_uncorrected_us {
            write_latency(out, "latency (uncorrected, from actual send)", u);
        }
        let status = self
            .status
            .iter()
            .map(|(code, n)| format!("{code}: {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            out,
            "  status        {}",
            if status.is_empty() {
                "none".into()
            } else {
                status
            }
        );
        let e = &self.errors;
        let _ = writeln!(
            out,
            "  errors        {} ({:.3}%): connect {}, read {}, write {}, timeout {}, parse {}, {}status {}{}",
            e.total,
            100.0 * self.error_rate,
            e.connect,
            e.read,
            e.write,
            e.timeout,
            e.parse,
            if self.target.url.starts_with("https:") {
                format!("tls {}, ", e.tls)
            } else {
                String::new()
            },
            e.status,
            if self.scenario.is_some() {
                format!(" (not expected by the step), extract {}", e.extract)
            } else {
                String::new()
            }
        );
        let _ = writeln!(
            out,
            "  in flight     {} at the end (not counted above)",
            self.in_flight_at_end
        );
        if s.mode == "close-header" {
            let _ = writeln!(out, "  close ignored {}", self.close_ignored);
        }
        if let Some(r) = &self.rate {
            let _ = writeln!(
                out,
                "  rate          target {:.1}, achieved {:.1} {}/s: {}; {} late sends, {} never sent",
                r.target,
                r.achieved,
                if self.scenario.is_some() { "sessions" } else { "req" },
                if r.reached { "reached" } else { "NOT reached" },
                r.late_sends,
                r.unsent_at_end
            );
        }
    }
}

/// The per-step table of a scenario run, and each failing step's first failures.
fn write_steps(out: &mut String, sc: &ScenarioReport) {
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "  sessions      {} started, {} completed, {} ended by a failed step ({})",
        sc.sessions_started, sc.sessions_completed, sc.sessions_failed, sc.source
    );
    let names: Vec<String> = sc
        .steps
        .iter()
        .map(|s| format!("{} / {}", s.scenario, s.step))
        .collect();
    let width = names
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let _ = writeln!(
        out,
        "  {:<width$}  {:>8}  {:>10}  {:>10}  {:>10}  {:>7}  {:>7}  {:>6}",
        "step", "requests", "p50", "p99", "max", "status", "extract", "errors"
    );
    for (name, st) in names.iter().zip(&sc.steps) {
        // A step that got no response has no latency: "-", not "0 µs".
        let latency = |us: f64| {
            if st.latency_us.count == 0 {
                "-".to_string()
            } else {
                micros(us)
            }
        };
        let _ = writeln!(
            out,
            "  {:<width$}  {:>8}  {:>10}  {:>10}  {:>10}  {:>7}  {:>7}  {:>6}",
            name,
            st.requests,
            latency(st.latency_us.p50),
            latency(st.latency_us.p99),
            latency(st.latency_us.max),
            st.unexpected_status,
            st.extract_failures,
            st.errors
        );
    }
    for (name, st) in names.iter().zip(&sc.steps) {
        for f in &st.failures {
            let _ = writeln!(out, "  failed: {name}: {f}");
        }
    }
}

fn write_latency(out: &mut String, label: &str, l: &LatencySummary) {
    let _ = writeln!(out, "  {label}");
    let _ = writeln!(
        out,
        "    mean {} ± {}   p50 {}   p90 {}   p99 {}   p99.9 {}   max {}",
        micros(l.mean),
        micros(l.stdev),
        micros(l.p50),
        micros(l.p90),
        micros(l.p99),
        micros(l.p99_9),
        micros(l.max)
    );
}

/// Writes the merged latency histogram (nanoseconds) as one interval of an HdrHistogram
/// interval log, readable by HistogramLogProcessor and HdrHistogram's plotting tools.
pub fn write_hdr_log<W: io::Write>(
    out: &mut W,
    histogram: &Histogram<u64>,
    elapsed_s: f64,
) -> io::Result<()> {
    let mut serializer = V2Serializer::new();
    let now = std::time::SystemTime::now();
    let mut writer = IntervalLogWriterBuilder::new()
        .with_start_time(now)
        .with_base_time(now)
        .with_max_value_divisor(1_000_000.0)
        .add_comment("rubyrace load: latency in nanoseconds; max column in milliseconds")
        .begin_log_with(out, &mut serializer)?;
    writer
        .write_histogram(
            histogram,
            std::time::Duration::ZERO,
            std::time::Duration::from_secs_f64(elapsed_s.max(0.0)),
            hdrhistogram::serialization::interval_log::Tag::new("latency"),
        )
        .map_err(hdr_log_error)?;
    Ok(())
}

/// The I/O error inside a histogram log error, kept as it is (so "No space left on device"
/// reads as such, and its OS code survives); the others described in words.
fn hdr_log_error(
    e: hdrhistogram::serialization::interval_log::IntervalLogWriterError<
        hdrhistogram::serialization::V2SerializeError,
    >,
) -> io::Error {
    use hdrhistogram::serialization::interval_log::IntervalLogWriterError as Log;
    use hdrhistogram::serialization::V2SerializeError as V2;
    match e {
        Log::IoError(e) | Log::SerializeError(V2::IoError(e)) => e,
        Log::SerializeError(V2::CountNotSerializable) => {
            io::Error::other("a latency count is too large to serialize")
        }
        Log::SerializeError(V2::UsizeTypeTooSmall) => {
            io::Error::other("the latency histogram is too large to serialize")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A step no session reached has no latency, shown as "-", not "0 µs".
    #[test]
    fn a_step_without_responses_shows_no_latency() {
        let step = |name: &str, count: u64| StepReport {
            scenario: "member".into(),
            step: name.into(),
            requests: count,
            responses: count,
            unexpected_status: 0,
            extract_failures: 0,
            errors: 0,
            latency_us: LatencySummary {
                count,
                p50: if count > 0 { 1200.0 } else { 0.0 },
                p99: if count > 0 { 3400.0 } else { 0.0 },
                max: if count > 0 { 5600.0 } else { 0.0 },
                ..LatencySummary::default()
            },
            failures: Vec::new(),
        };
        let sc = ScenarioReport {
            source: "s.toml".into(),
            sessions_started: 3,
            sessions_completed: 0,
            sessions_failed: 3,
            steps: vec![step("log in", 3), step("home", 0)],
        };
        let mut out = String::new();
        write_steps(&mut out, &sc);
        let home = out.lines().find(|l| l.contains("member / home")).unwrap();
        assert!(!home.contains("0 µs") && home.contains(" - "), "{out}");
        let login = out.lines().find(|l| l.contains("member / log in")).unwrap();
        assert!(login.contains("1.20 ms"), "{out}");
    }

    #[test]
    fn hdr_log_round_trips() {
        let mut h = crate::stats::new_latency_histogram();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        let mut buf = Vec::new();
        write_hdr_log(&mut buf, &h, 1.0).unwrap();
        let text = String::from_utf8(buf.clone()).unwrap();
        assert!(text.contains("#[StartTime:"), "{text}");
        let mut read = 0;
        let mut deserializer = hdrhistogram::serialization::Deserializer::new();
        for item in hdrhistogram::serialization::interval_log::IntervalLogIterator::new(&buf) {
            if let Ok(hdrhistogram::serialization::interval_log::LogEntry::Interval(ih)) = item {
                let bytes = base64::Engine::decode(
                    &base64::engine::general_purpose::STANDARD,
                    ih.encoded_histogram(),
                )
                .unwrap();
                let back: Histogram<u64> = deserializer.deserialize(&mut &bytes[..]).unwrap();
                assert_eq!(back.len(), 1000);
                assert_eq!(back.value_at_quantile(0.5), h.value_at_quantile(0.5));
                read += 1;
            }
        }
        assert_eq!(read, 1);
    }
}
