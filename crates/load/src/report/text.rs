//! A `LoadReport` as the summary a person reads in the terminal (what `rubyrace load`
//! prints, on stderr when the JSON goes to stdout): the plan, the connections, the
//! outcome, a scenario's steps and the warnings.

use std::fmt::Write as _;

use units::{bytes, micros};

use super::{LatencySummary, LoadReport, ScenarioReport};

impl LoadReport {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::StepReport;

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
}
