//! The warnings a `LoadReport` carries: what in its figures a reader should not miss (an
//! interrupted run, a rate not reached, connections the server did not open or answer).

use super::LoadReport;

impl LoadReport {
    /// The warnings the report's figures call for, in the order the summary shows them.
    pub(super) fn find_warnings(&self) -> Vec<String> {
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
}
