//! An HTTP trial's course, read in `http_trial`: its server started (`super::server`), the
//! measured phase (warmup and load while the server's tree is sampled, the latency
//! histogram) and its record (`super::figures`: the derived figures and the verdict), the
//! profiled phase when asked, the server stopped.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::directory::write_failed;
use super::figures::PhaseFigures;
use super::server::{start_server, stop_server, ServerUnderTest};
use super::{Stop, TrialSpec};
use crate::conditions::check_pinning;
use crate::probe;
use crate::profile;
use results::conditions::PinningRecord;
use results::profile::ProfileRecord;
use results::{LoadHostRecord, TrialResult, TrialStatus};
use sys::noise::NoiseRecord;
use sys::process::DeathWatch;
use sys::resources::{ResourceSummary, Sampler};

/// An HTTP trial, in order: the server started and ready (`server`), the measured phase
/// (warmup and load, the server's tree sampled) recorded, the profiled phase when asked,
/// the server stopped and what became of it recorded.
pub(super) fn http_trial(
    spec: &TrialSpec,
    interrupt: &Arc<AtomicBool>,
    result: &mut TrialResult,
) -> Result<(), Stop> {
    crate::phase::set("starting the server", None, None);
    let Some(mut sut) = start_server(spec, interrupt, result)? else {
        return Ok(());
    };
    // Where the load goes and how, once for every phase that sends it.
    let (url, settings) = sut.load_target(&spec.settings.load);
    let outcome = match settings.build_spec(&url) {
        Err(e) => {
            result.reason = Some(format!("invalid load settings: {e}"));
            Ok(())
        }
        Ok(load_spec) => load_phases(spec, &mut sut, (&url, &load_spec), interrupt, result),
    };
    crate::phase::set("stopping the server", None, None);
    stop_server(sut, spec, result);
    outcome
}

/// The phases that send load to the ready server: the measured one, recorded, then the
/// profiled one when the profilers are asked for apart from it and the trial has not
/// failed.
fn load_phases(
    spec: &TrialSpec,
    sut: &mut ServerUnderTest,
    (url, load_spec): (&str, &load::LoadSpec),
    interrupt: &Arc<AtomicBool>,
    result: &mut TrialResult,
) -> Result<(), Stop> {
    let s = &spec.settings;
    crate::phase::set("load", Some(s.load.warmup), Some(s.load.duration));
    let measured = measure(spec, sut, (url, load_spec), interrupt)?;
    measured.record(result, sut);
    if !s.profile.is_empty() && !s.profile_measured && result.status != TrialStatus::Failed {
        crate::phase::set("profiling", None, Some(s.load.duration));
        // No warmup: the server is warm.
        let again = load::LoadSpec {
            warmup: std::time::Duration::ZERO,
            ..load_spec.clone()
        };
        result.profiles = profiled_phase(spec, sut, (url, &again), interrupt)?;
    }
    Ok(())
}

/// `profile`, by default: after the measured phase, the same load again (`load_spec`,
/// without its warmup) with the profilers attached to the server's tree. Its throughput,
/// against the measured phase's, is the profilers' overhead; the measured figures are
/// untouched. Returns the profilers' records.
fn profiled_phase(
    spec: &TrialSpec,
    sut: &mut ServerUnderTest,
    (url, load_spec): (&str, &load::LoadSpec),
    interrupt: &Arc<AtomicBool>,
) -> Result<Vec<ProfileRecord>, Stop> {
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
        ProfileRecord::note_served(
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
    Ok(records)
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

/// What the measured phase of a trial of its own found, before it enters the record.
struct MeasuredPhase {
    /// A separate load host's record (None on this machine).
    load_host: Option<LoadHostRecord>,
    noise: Option<NoiseRecord>,
    pinning: Option<PinningRecord>,
    /// The figures and the measured phase's profiles (`profile_measured`), or why the
    /// load generator gave none.
    served: Result<(PhaseFigures, Vec<ProfileRecord>), String>,
}

impl MeasuredPhase {
    /// Writes the phase into `result`: the conditions it ran under, then the figures and
    /// the verdict, or the load generator's failure as the reason.
    fn record(self, result: &mut TrialResult, sut: &mut ServerUnderTest) {
        result.load_host = self.load_host;
        result.noise = self.noise;
        result.pinning = self.pinning;
        match self.served {
            Ok((figures, profiles)) => {
                result.profiles = profiles;
                figures.record(
                    result,
                    sut.server.exited(),
                    sut.server.stderr_path(),
                    &sut.record,
                );
            }
            Err(why) => result.reason = Some(why),
        }
    }
}

/// Warmup and measurement of `load_spec` (sent to `url`) with the server's tree sampled;
/// the latency histogram written. The server's deaths and mapped allocators go to `sut`.
fn measure(
    spec: &TrialSpec,
    sut: &mut ServerUnderTest,
    (url, load_spec): (&str, &load::LoadSpec),
    interrupt: &Arc<AtomicBool>,
) -> Result<MeasuredPhase, Stop> {
    let s = &spec.settings;
    let server = &mut sut.server;
    let record = &mut sut.record;
    let maps = &mut sut.maps;
    let pid = server.pid();
    // A separate load host: its record, and the round-trip time just before the load.
    let load_host = crate::remote_load::load_host_record(load_spec.addr);
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
    let mut pinning = None;
    if let Ok((found, pinned)) = starter.join() {
        *maps = found;
        pinning = pinned;
    }
    if !interrupt.load(Ordering::SeqCst) {
        probe::request_snapshot(&probe_dir, probe::MEASURE_END, pid, pid);
    }
    if interrupt.load(Ordering::SeqCst) {
        return Err(Stop::Interrupted);
    }
    let served = match outcome {
        Err(e) => Err(format!("the load generator failed: {e}")),
        Ok(outcome) => {
            let report = load::LoadReport::new(load_spec, url, &outcome);
            let cpu_us = resources.as_ref().ok().map(ResourceSummary::cpu_total_us);
            ProfileRecord::note_served(&mut profiles, &report, cpu_us, None);
            write_latency_log(&spec.out_dir, &outcome.stats.latency, report.elapsed_s)?;
            Ok((PhaseFigures { report, resources }, profiles))
        }
    };
    Ok(MeasuredPhase {
        load_host,
        noise,
        pinning,
        served,
    })
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
