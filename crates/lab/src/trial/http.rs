//! The measured phase of an HTTP trial: warmup and load while the server's tree is sampled,
//! the latency histogram, the derived figures, and the verdict (valid, invalid or failed).

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::directory::write_failed;
use super::server::{start_server, stop_server, ServerUnderTest};
use super::{Stop, TrialSpec};
use crate::conditions::check_pinning;
use crate::probe;
use crate::profile;
use results::conditions::PinningRecord;
use results::{Derived, ServerRecord, TrialResult, TrialStatus};
use sys::process::{describe_status, Death, DeathWatch};
use sys::resources::{ResourceSummary, Sampler};

pub(super) fn http_trial(
    spec: &TrialSpec,
    interrupt: &Arc<AtomicBool>,
    result: &mut TrialResult,
) -> Result<(), Stop> {
    let s = &spec.settings;
    crate::phase::set("starting the server", None, None);
    let Some(mut sut) = start_server(spec, interrupt, result)? else {
        return Ok(());
    };
    // Where the load goes and how, once for every phase that sends it.
    let (url, settings) = sut.load_target(&s.load);
    let mut outcome = Ok(());
    match settings.build_spec(&url) {
        Err(e) => result.reason = Some(format!("invalid load settings: {e}")),
        Ok(load_spec) => {
            crate::phase::set("load", Some(s.load.warmup), Some(s.load.duration));
            outcome = measure(spec, &mut sut, (&url, &load_spec), interrupt, result);
            if outcome.is_ok()
                && !s.profile.is_empty()
                && !s.profile_measured
                && result.status != TrialStatus::Failed
            {
                crate::phase::set("profiling", None, Some(s.load.duration));
                // No warmup: the server is warm.
                let again = load::LoadSpec {
                    warmup: std::time::Duration::ZERO,
                    ..load_spec
                };
                outcome = profiled_phase(spec, &mut sut, (&url, &again), interrupt, result);
            }
        }
    }
    crate::phase::set("stopping the server", None, None);
    stop_server(sut, spec, result);
    outcome
}

/// `profile`, by default: after the measured phase, the same load again (`load_spec`,
/// without its warmup) with the profilers attached to the server's tree. Its throughput,
/// against the measured phase's, is the profilers' overhead; the measured figures are
/// untouched.
fn profiled_phase(
    spec: &TrialSpec,
    sut: &mut ServerUnderTest,
    (url, load_spec): (&str, &load::LoadSpec),
    interrupt: &Arc<AtomicBool>,
    result: &mut TrialResult,
) -> Result<(), Stop> {
    let s = &spec.settings;
    let pid = sut.server.pid();
    let session = profile::Session::start(
        &s.profile,
        profile_target(spec, pid, results::profile::PROFILED_PHASE),
        Instant::now(),
    );
    // The load starts once the profilers are attached: the whole phase is sampled, and
    // its throughput against the measured phase's is the profilers' full cost.
    session.wait_attached(std::time::Duration::from_secs(10));
    let cpu_before = sys::resources::read_tree_cpu(pid, pid).ok();
    let outcome = crate::remote_load::run(load_spec, interrupt);
    let cpu = cpu_before
        .zip(sys::resources::read_tree_cpu(pid, pid).ok())
        .map(|(before, after)| after.since(&before));
    let mut records = session.finish();
    if interrupt.load(Ordering::SeqCst) {
        return Err(Stop::Interrupted);
    }
    if let Ok(outcome) = outcome {
        let report = load::LoadReport::new(load_spec, url, &outcome);
        results::profile::ProfileRecord::note_served(
            &mut records,
            &report,
            cpu.map(|c| c.times.total_us()),
            cpu.and_then(|c| c.waited_us),
        );
    }
    if sut.server.exited().is_some() {
        for r in &mut records {
            r.error
                .get_or_insert_with(|| "the server exited while it was profiled".into());
        }
    }
    result.profiles = records;
    Ok(())
}

/// What a profiler session attaches to: the server's tree, writing into the trial's
/// directory.
fn profile_target(spec: &TrialSpec, pid: i32, phase: &str) -> profile::Target {
    profile::Target {
        root: pid,
        pgid: pid,
        dir: spec.out_dir.clone(),
        registry: spec.registry.clone(),
        phase: phase.into(),
        rate_hz: spec.settings.profile_rate,
    }
}

/// Warmup and measurement of `load_spec` (sent to `url`) with resource sampling; sets
/// status, load, resources, derived.
fn measure(
    spec: &TrialSpec,
    sut: &mut ServerUnderTest,
    (url, load_spec): (&str, &load::LoadSpec),
    interrupt: &Arc<AtomicBool>,
    result: &mut TrialResult,
) -> Result<(), Stop> {
    let s = &spec.settings;
    let server = &mut sut.server;
    let record = &mut sut.record;
    let maps = &mut sut.maps;
    let pid = server.pid();
    // A separate load host: its record, and the round-trip time just before the load.
    result.load_host = crate::remote_load::load_host_record(load_spec.addr);
    let start_at = Instant::now() + load_spec.warmup;
    // With a duration, the window's end is known: sample it then, not after the wind-down.
    let end_at = match load_spec.stop {
        load::StopCondition::Duration(d) => Some(start_at + d),
        load::StopCondition::Requests(_) => None,
    };
    // The run's services (and profilers) are registered beside the server: their CPU is
    // the run's own, not other work, in the trial's noise record.
    let sampler = Sampler::start_window_beside(
        pid,
        pid,
        start_at,
        end_at,
        s.sample_interval,
        Some(spec.registry.clone()),
    );
    // At the start of the measured phase: the probe's first snapshot, and which allocator
    // each process has mapped.
    let probe_dir = spec.out_dir.join(probe::PROBE_DIR);
    let preload = s.allocator.as_ref().and_then(|a| a.preload.clone());
    let starter = {
        let probe_dir = probe_dir.clone();
        let cpus = spec.cpus.clone();
        std::thread::spawn(move || {
            std::thread::sleep(start_at.saturating_duration_since(Instant::now()));
            mark_measured_start(&probe_dir, pid, preload.as_deref(), cpus.as_ref())
        })
    };
    let watch = DeathWatch::start(pid, pid);
    // `profile_measured`: the profilers sample the measured phase itself.
    let session = (s.profile_measured && !s.profile.is_empty()).then(|| {
        profile::Session::start(
            &s.profile,
            profile_target(spec, pid, results::profile::MEASURED_PHASE),
            start_at,
        )
    });
    let outcome = crate::remote_load::run(load_spec, interrupt);
    let mut profiles = session.map(profile::Session::finish).unwrap_or_default();
    record.deaths = watch.finish();
    // The first process's own end is told by its exit status.
    record.deaths.retain(|d| d.pid != pid);
    let (resources, noise) = sampler.finish_with_noise();
    result.noise = noise;
    if let Ok((found, pinning)) = starter.join() {
        *maps = found;
        result.pinning = pinning;
    }
    if !interrupt.load(Ordering::SeqCst) {
        probe::request_snapshot(&probe_dir, probe::MEASURE_END, pid, pid);
    }
    if interrupt.load(Ordering::SeqCst) {
        return Err(Stop::Interrupted);
    }
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            result.reason = Some(format!("the load generator failed: {e}"));
            return Ok(());
        }
    };
    let report = load::LoadReport::new(load_spec, url, &outcome);
    let cpu_us = resources.as_ref().ok().map(ResourceSummary::cpu_total_us);
    results::profile::ProfileRecord::note_served(&mut profiles, &report, cpu_us, None);
    result.profiles = profiles;
    write_latency_log(&spec.out_dir, &outcome.stats.latency, report.elapsed_s)?;
    let derived = derive(&report, resources.as_ref().ok());
    result.derived = derived;
    result.resources = resources.as_ref().ok().cloned();
    result.status = verdict(
        result,
        &report,
        server.exited(),
        record,
        resources.as_ref().err(),
    );
    result.load = Some(report);
    Ok(())
}

/// The status of a measured HTTP trial, from its load report and what became of its
/// server (the reason is set on `result`): failed when the server exited or nothing was
/// answered; invalid when a process died, errors exceeded `max_error_rate`, the server
/// ignored `Connection: close`, or its resources could not be sampled; else valid.
pub(crate) fn verdict(
    result: &mut TrialResult,
    report: &load::LoadReport,
    exited: Option<std::process::ExitStatus>,
    record: &ServerRecord,
    resources_error: Option<&sys::resources::SamplerError>,
) -> TrialStatus {
    let max_error_rate = result.settings.max_error_rate;
    let (status, reason) = if let Some(exit) = exited {
        (
            TrialStatus::Failed,
            format!(
                "the server exited during the measurement ({})",
                describe_status(exit)
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
        return TrialStatus::Valid;
    };
    result.reason = Some(reason);
    status
}

/// At the start of the measured phase: the probe's first snapshot, the allocators each
/// process of the server's tree has mapped, and (with `cpus`) where each process may run.
pub(crate) fn mark_measured_start(
    probe_dir: &Path,
    pid: i32,
    preload: Option<&Path>,
    cpus: Option<&sys::cpus::CpuSplit>,
) -> (BTreeMap<i32, Vec<String>>, Option<PinningRecord>) {
    probe::request_snapshot(probe_dir, probe::MEASURE_START, pid, pid);
    let mut maps = BTreeMap::new();
    let pids = sys::resources::tree_pids(pid, pid).unwrap_or_default();
    for &p in &pids {
        if let Ok(found) = probe::mapped_allocators(p, preload) {
            maps.insert(p, found);
        }
    }
    let pinning = cpus.map(|split| check_pinning(split, &pids));
    (maps, pinning)
}

/// Writes the trial's latency histogram (`latency.hlog`). A histogram cut short by a full
/// disk must not be stored as if whole: the run stops.
pub(crate) fn write_latency_log(
    out_dir: &Path,
    latency: &load::Histogram<u64>,
    elapsed_s: f64,
) -> Result<(), Stop> {
    let hdr_path = out_dir.join(results::store::trial_files::LATENCY_HLOG);
    let written = fs::File::create(&hdr_path).and_then(|mut f| {
        load::hlog::write_hdr_log(&mut f, latency, elapsed_s)?;
        std::io::Write::flush(&mut f)
    });
    written.map_err(|e| write_failed(&hdr_path, &e))
}

/// The figures derived from a trial's load report and its server's resources.
pub(crate) fn derive(report: &load::LoadReport, resources: Option<&ResourceSummary>) -> Derived {
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
