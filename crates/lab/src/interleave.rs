//! An interleaved block (`design = "interleaved"`, crate::design): every configuration's
//! server is started and warmed up, then the load alternates between them in slices, in a
//! new random order every round, and each configuration's slices add up to its trial.
//!
//! What a trial of its own records, an interleaved trial records too, for its slices
//! alone: requests, errors, a latency histogram (the slices' merged), the server tree's CPU
//! time (summed over its slices, from `/proc` at every slice's edges), memory over the
//! whole measured phase, the probe and the verification of the settings, deaths and
//! orphans. The servers share the machine's noise, so the block has one noise record.
//!
//! The block is the unit that is stored or redone: its trials are stored together, and an
//! interruption stores none of them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::design::round_order;
use crate::noise::{MachineCounters, NoiseRecord};
use crate::probe;
use crate::process::DeathWatch;
use crate::resources::{tree_cpu_us, Sampler};
use crate::trial::{
    begin_trial, derive, finish, invalidate, mark_measured_start, start_server, stop_server,
    verdict, write_latency_log, InterleavedRecord, ServerUnderTest, SliceRecord, Stop,
    TrialOutcome, TrialResult, TrialSpec, TrialStatus,
};

/// How an interleaved block ended.
pub enum BlockOutcome {
    /// One result per spec, in the specs' order.
    Done(Vec<TrialResult>),
    /// Ctrl-C: every server is stopped and nothing is recorded.
    Interrupted,
    /// A file could not be written; nothing is recorded (the message names it).
    WriteFailed(String),
}

/// One configuration of the block while it runs.
struct Member<'a> {
    spec: &'a TrialSpec,
    result: TrialResult,
    started: Instant,
    server: Option<ServerUnderTest>,
    load_spec: Option<load::LoadSpec>,
    url: String,
    /// The slices' outcomes, merged.
    outcome: Option<load::RunOutcome>,
    slices: Vec<SliceRecord>,
    slice_cpu_us: Option<u64>,
}

/// Runs the trials of one block (`specs`, every configuration once) interleaved: `rounds`
/// rounds of one `slice` per configuration, in an order drawn from `seed` and the block.
pub fn run_interleaved_block(
    specs: &[TrialSpec],
    slice: Duration,
    rounds: u32,
    seed: u64,
    interrupt: &Arc<AtomicBool>,
) -> BlockOutcome {
    let mut members = Vec::with_capacity(specs.len());
    for spec in specs {
        match begin_trial(spec) {
            Ok(result) => members.push(Member {
                spec,
                result,
                started: Instant::now(),
                server: None,
                load_spec: None,
                url: String::new(),
                outcome: None,
                slices: Vec::new(),
                slice_cpu_us: Some(0),
            }),
            Err(what) => return BlockOutcome::WriteFailed(what),
        }
    }
    match measure_block(&mut members, slice, rounds, seed, interrupt) {
        Ok(()) => {}
        Err(stop) => {
            for m in &mut members {
                if let Some(sut) = m.server.take() {
                    stop_server(sut, m.spec, &mut m.result);
                }
            }
            return match stop {
                Stop::Interrupted => BlockOutcome::Interrupted,
                Stop::WriteFailed(what) => BlockOutcome::WriteFailed(what),
            };
        }
    }
    let block_trials: Vec<usize> = specs.iter().map(|s| s.trial_id).collect();
    let mut results = Vec::with_capacity(members.len());
    for mut m in members {
        if let Some(record) = m.result.interleaved.as_mut() {
            record.block_trials = block_trials.clone();
        }
        if let Some(sut) = m.server.take() {
            stop_server(sut, m.spec, &mut m.result);
        }
        if let Some(failure) = m.result.pinning.as_ref().and_then(|p| p.failure()) {
            invalidate(&mut m.result, failure);
        }
        match finish(m.result, m.started, &m.spec.out_dir) {
            TrialOutcome::Done(r) => results.push(*r),
            // `finish` only ever gives a result.
            TrialOutcome::Interrupted => return BlockOutcome::Interrupted,
            TrialOutcome::WriteFailed(what) => return BlockOutcome::WriteFailed(what),
        }
    }
    BlockOutcome::Done(results)
}

/// Starts and warms up every server, runs the rounds, and fills each member's result. A
/// configuration whose server did not come up keeps its failed result, and the others go on.
fn measure_block(
    members: &mut [Member<'_>],
    slice: Duration,
    rounds: u32,
    seed: u64,
    interrupt: &Arc<AtomicBool>,
) -> Result<(), Stop> {
    // 1. Every server up, on a port of its own, in the block's order.
    for m in members.iter_mut().filter(|m| m.result.reason.is_none()) {
        m.server = start_server(m.spec, interrupt, &mut m.result)?;
        let Some(sut) = &m.server else { continue };
        m.url = format!(
            "http://{}{}",
            sut.addr,
            m.spec.settings.load.path.as_deref().unwrap_or("/")
        );
        match m.spec.settings.load.build_spec(&m.url) {
            Ok(spec) => m.load_spec = Some(spec),
            Err(e) => m.result.reason = Some(format!("invalid load settings: {e}")),
        }
    }
    // 2. Each warmed up on its own, one after the other (the others idle meanwhile).
    for m in members.iter_mut() {
        let (Some(_), Some(spec)) = (&m.server, &m.load_spec) else {
            continue;
        };
        if spec.warmup.is_zero() {
            continue;
        }
        let mut warmup = spec.clone();
        warmup.stop = load::StopCondition::Duration(spec.warmup);
        warmup.warmup = Duration::ZERO;
        // The warmup's figures are not kept; a failure shows in the slices.
        let _ = load::run(&warmup, None, interrupt.clone());
        if interrupt.load(Ordering::SeqCst) {
            return Err(Stop::Interrupted);
        }
    }
    let measured: Vec<usize> = (0..members.len())
        .filter(|&i| members[i].server.is_some() && members[i].load_spec.is_some())
        .collect();

    // 3. The measured phase: the probe's first snapshot, allocators and pinning; memory
    //    sampled per server over the whole phase; deaths watched.
    for &i in &measured {
        let m = &mut members[i];
        let sut = m.server.as_mut().expect("measured members have a server");
        let preload = m
            .spec
            .settings
            .allocator
            .as_ref()
            .and_then(|a| a.preload.clone());
        let (maps, pinning) = mark_measured_start(
            &sut.probe_dir,
            sut.server.pid(),
            preload.as_deref(),
            m.spec.cpus.as_ref(),
        );
        sut.maps = maps;
        m.result.pinning = pinning;
    }
    let phase_start = Instant::now();
    let machine_start = MachineCounters::read();
    let watched: Vec<(usize, Sampler, DeathWatch, Option<u64>)> = measured
        .iter()
        .map(|&i| {
            let m = &members[i];
            let pid = m.server.as_ref().expect("measured").server.pid();
            let interval = m.spec.settings.sample_interval;
            (
                i,
                Sampler::start(pid, pid, Instant::now(), interval),
                DeathWatch::start(pid, pid),
                tree_cpu_us(pid, pid).ok(),
            )
        })
        .collect();

    // 4. The rounds.
    let block = members.first().map_or(0, |m| m.spec.block);
    for round in 0..rounds {
        let order = round_order(members.len(), seed, block, round);
        for (turn, &i) in order.iter().enumerate() {
            if !measured.contains(&i) {
                continue;
            }
            let m = &mut members[i];
            let sut = m.server.as_mut().expect("measured");
            if sut.server.exited().is_some() {
                continue; // its verdict says so
            }
            let pid = sut.server.pid();
            let mut spec = m.load_spec.clone().expect("measured");
            spec.warmup = Duration::ZERO;
            spec.stop = load::StopCondition::Duration(slice);
            let start_s = phase_start.elapsed().as_secs_f64();
            let cpu_before = tree_cpu_us(pid, pid).ok();
            let outcome = load::run(&spec, None, interrupt.clone());
            let cpu_after = tree_cpu_us(pid, pid).ok();
            if interrupt.load(Ordering::SeqCst) {
                return Err(Stop::Interrupted);
            }
            let outcome = match outcome {
                Ok(o) => o,
                Err(e) => {
                    m.result.reason = Some(format!("the load generator failed: {e}"));
                    continue;
                }
            };
            let cpu_us = cpu_before.zip(cpu_after).map(|(a, b)| b.saturating_sub(a));
            m.slice_cpu_us = m.slice_cpu_us.zip(cpu_us).map(|(sum, c)| sum + c);
            m.slices.push(SliceRecord {
                round,
                turn,
                start_s,
                elapsed_s: outcome.recorded.as_secs_f64(),
                requests: outcome.stats.responses,
                errors: outcome.stats.errors.iter().sum(),
                cpu_us,
            });
            match &mut m.outcome {
                Some(all) => all.absorb(outcome),
                None => m.outcome = Some(outcome),
            }
        }
    }

    // 5. The end of the measured phase: resources, deaths, the probe's last snapshot.
    let machine_end = MachineCounters::read();
    let mut all_servers_cpu_us = 0u64;
    let mut ends = Vec::new();
    for (i, sampler, watch, cpu_at_start) in watched {
        let m = &mut members[i];
        let sut = m.server.as_mut().expect("measured");
        let pid = sut.server.pid();
        sut.record.deaths = watch.finish();
        sut.record.deaths.retain(|d| d.pid != pid);
        let resources = sampler.finish();
        let cpu_at_end = tree_cpu_us(pid, pid).ok();
        let phase_cpu = cpu_at_start
            .zip(cpu_at_end)
            .map(|(a, b)| b.saturating_sub(a));
        all_servers_cpu_us += phase_cpu.unwrap_or(0);
        probe::request_snapshot(&sut.probe_dir, probe::MEASURE_END, pid, pid);
        ends.push((i, resources, phase_cpu));
    }
    let noise = machine_start
        .zip(machine_end)
        .and_then(|(a, b)| NoiseRecord::between(&a, &b, all_servers_cpu_us));
    let measured_time = slice * rounds;
    for (i, resources, phase_cpu) in ends {
        let m = &mut members[i];
        let Some(outcome) = m.outcome.take() else {
            m.result
                .reason
                .get_or_insert_with(|| "no slice was measured".into());
            continue;
        };
        let mut spec = m.load_spec.clone().expect("measured");
        spec.stop = load::StopCondition::Duration(measured_time);
        let report = load::LoadReport::new(&spec, &m.url, &outcome);
        write_latency_log(&m.spec.out_dir, &outcome.stats.latency, report.elapsed_s)?;
        // The trial's CPU is its slices' alone; what the server did while the load was on
        // the others is recorded apart.
        let resources = resources.map(|mut r| {
            if let Some(cpu) = m.slice_cpu_us {
                let user_share = r.cpu_user_us as f64 / r.cpu_total_us().max(1) as f64;
                r.cpu_user_us = (cpu as f64 * user_share).round() as u64;
                r.cpu_system_us = cpu - r.cpu_user_us;
            }
            r
        });
        m.result.derived = derive(&report, resources.as_ref().ok());
        m.result.resources = resources.as_ref().ok().cloned();
        m.result.noise = noise.clone();
        m.result.load = serde_json::to_value(&report).ok();
        m.result.interleaved = Some(InterleavedRecord {
            slice_s: slice.as_secs_f64(),
            rounds,
            block_trials: Vec::new(),
            slices: std::mem::take(&mut m.slices),
            idle_cpu_us: phase_cpu
                .zip(m.slice_cpu_us)
                .map(|(all, slices)| all.saturating_sub(slices)),
        });
        let sut = m.server.as_mut().expect("measured");
        let exited = sut.server.exited();
        let status = verdict(
            &mut m.result,
            &report,
            exited,
            &sut.record,
            resources.as_ref().err(),
        );
        m.result.status = status;
        if m.result.status == TrialStatus::Valid && m.result.reason.is_some() {
            m.result.status = TrialStatus::Invalid;
        }
    }
    Ok(())
}
