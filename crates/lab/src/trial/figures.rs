//! What a measured phase found, and how it enters the trial's record: the load's report
//! and the server tree's resources, the figures derived from them (requests per second,
//! CPU per request), and the verdict (valid, invalid or failed, with the reason). A trial
//! of its own (`http`) and an interleaved one (`crate::interleave`) both end here.

use std::path::Path;
use std::process::ExitStatus;

use results::{Derived, ServerRecord, TrialResult, TrialStatus};
use sys::process::{describe_status, Death};
use sys::resources::{ResourceSummary, SamplerError};

/// A measured phase's figures: what the load generator saw and what the server's tree
/// used while it ran.
pub(crate) struct PhaseFigures {
    pub report: load::LoadReport,
    pub resources: Result<ResourceSummary, SamplerError>,
}

impl PhaseFigures {
    /// Writes the figures into `result`: the derived figures, the resources, the load's
    /// report, and the verdict, from them and from what became of the server (`exited`,
    /// its `record` of deaths). A verdict other than valid sets the reason.
    /// `stderr` is the server's log, where an exit's error line is looked for.
    pub(crate) fn record(
        self,
        result: &mut TrialResult,
        exited: Option<ExitStatus>,
        stderr: &Path,
        record: &ServerRecord,
    ) {
        let resources = self.resources.as_ref();
        result.derived = derive(&self.report, resources.ok());
        result.resources = resources.ok().cloned();
        // What the app said went wrong, not only that it exited.
        let exited = exited.map(|status| (status, sys::process::ruby_error_line(stderr)));
        let (status, reason) = verdict(
            &self.report,
            exited,
            record,
            resources.err(),
            result.settings.max_error_rate,
        );
        result.status = status;
        if reason.is_some() {
            result.reason = reason;
        }
        result.load = Some(self.report);
    }
}

/// The status of a measured HTTP trial and, unless valid, why: failed when the server
/// exited (with its error line, when its log has one) or nothing was answered; invalid when a process died, errors exceeded
/// `max_error_rate` (percent), the server ignored `Connection: close`, or its resources
/// could not be sampled; else valid.
fn verdict(
    report: &load::LoadReport,
    exited: Option<(ExitStatus, Option<String>)>,
    record: &ServerRecord,
    resources_error: Option<&SamplerError>,
    max_error_rate: f64,
) -> (TrialStatus, Option<String>) {
    let (status, reason) = if let Some((exit, error_line)) = exited {
        (
            TrialStatus::Failed,
            format!(
                "the server exited during the measurement ({}){}",
                describe_status(exit),
                error_line.map(|l| format!(": {l}")).unwrap_or_default()
            ),
        )
    } else if report.requests == 0 {
        let breakdown = error_breakdown(report);
        (
            TrialStatus::Failed,
            if breakdown.is_empty() {
                // Nothing failed and nothing came back: the server was too slow for the
                // measured phase.
                format!(
                    "no response was completed (no error; {} still in flight at the end of the measured phase): the server answered nothing in time",
                    units::count(report.in_flight_at_end as usize, "request")
                )
            } else {
                format!(
                    "no response was completed ({} errors: {breakdown})",
                    report.errors.total
                )
            },
        )
    } else if record.deaths.iter().any(Death::is_abnormal) {
        let died: Vec<String> = record
            .deaths
            .iter()
            .filter(|d| d.is_abnormal())
            .map(Death::describe)
            .collect();
        let mut reason = format!(
            "{} of the server died during the measurement: {}",
            if died.len() == 1 {
                "a process".to_string()
            } else {
                format!("{} processes", died.len())
            },
            died.join("; ")
        );
        if report.error_rate > 0.0 {
            reason.push_str(&format!(
                "; error rate {:.3}% ({})",
                100.0 * report.error_rate,
                error_breakdown(report)
            ));
        }
        (TrialStatus::Invalid, reason)
    } else if 100.0 * report.error_rate > max_error_rate {
        (
            TrialStatus::Invalid,
            format!(
                "error rate {:.3}% exceeds max_error_rate {}%{}",
                100.0 * report.error_rate,
                max_error_rate,
                match error_breakdown(report) {
                    b if b.is_empty() => String::new(),
                    b => format!(" ({b})"),
                }
            ),
        )
    } else if report.close_ignored > 0 {
        // close-header mode measures a new connection per request; a server that keeps
        // the connection open makes every request wait close_grace for a close.
        (
            TrialStatus::Invalid,
            format!(
                "the server ignored `Connection: close` on {} of {} responses: rubyrace waited {} ms for each close, then closed itself, so the figures measure that wait, not the server",
                report.close_ignored,
                report.requests,
                (report.settings.close_grace_s * 1000.0).round()
            ),
        )
    } else if let Some(e) = resources_error {
        (
            TrialStatus::Invalid,
            format!("the server's resources could not be sampled: {e}"),
        )
    } else {
        return (TrialStatus::Valid, None);
    };
    (status, Some(reason))
}

/// The figures derived from a trial's load report and its server's resources.
fn derive(report: &load::LoadReport, resources: Option<&ResourceSummary>) -> Derived {
    let mut derived = Derived {
        requests_per_s: Some(report.requests_per_s),
        error_rate: Some(report.error_rate),
        ..Derived::default()
    };
    if let Some(r) = resources.filter(|_| report.requests > 0) {
        let per = |us: u64| us as f64 / report.requests as f64;
        derived.cpu_us_per_request = Some(per(r.cpu_user_us + r.cpu_system_us));
        derived.cpu_user_us_per_request = Some(per(r.cpu_user_us));
        derived.cpu_system_us_per_request = Some(per(r.cpu_system_us));
    }
    derived
}

fn error_breakdown(report: &load::LoadReport) -> String {
    let e = &report.errors;
    let mut parts = Vec::new();
    for (name, n) in [
        ("connect", e.connect),
        ("read", e.read),
        ("write", e.write),
        ("timeout", e.timeout),
        ("parse", e.parse),
    ] {
        if n > 0 {
            parts.push(format!("{n} {name}"));
        }
    }
    for (status, n) in &report.status {
        if !status.starts_with('2') {
            parts.push(format!("{n} × {status}"));
        }
    }
    // Scenario steps that failed, with the first failure of each in words: an extraction
    // that found nothing is no error of the connection nor a status, and the parentheses
    // were empty.
    let failed_steps: Vec<String> = report
        .scenario
        .iter()
        .flat_map(|sc| &sc.steps)
        .filter_map(|st| {
            let failed = st.unexpected_status + st.extract_failures + st.errors;
            (failed > 0).then(|| {
                let first = st
                    .failures
                    .first()
                    .map(|f| format!(", first: {f}"))
                    .unwrap_or_default();
                format!(
                    "step {:?} of {} failed {failed} times{first}",
                    st.step, st.scenario
                )
            })
        })
        .take(3)
        .collect();
    let mut text = parts.join(", ");
    if !failed_steps.is_empty() {
        if !text.is_empty() {
            text.push_str("; ");
        }
        text.push_str(&failed_steps.join("; "));
    }
    text
}
