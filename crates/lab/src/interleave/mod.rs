//! An interleaved block (`design = "interleaved"`, crate::design): every configuration's
//! server is started and warmed up, then the load alternates between them in slices, in a
//! new random order every round, and each configuration's slices add up to its trial. A
//! co-scheduled block (`design = "co-scheduled"`) is the same with every server loaded at
//! once in each round: one window per round, shared.
//!
//! The load is held open (`load::windows`): every server's load runs once for the whole
//! block, on connections opened before the first slice and kept, and sends only inside its
//! slices, laid out before the first; so a slice can be tens of milliseconds. Each slice
//! starts with an unrecorded lead-in (experiment::design::lead_in), in which the previous
//! server's last requests complete and this server's queue fills, so its recorded window
//! begins with the server already under load; the server tree's CPU time is read at that
//! window's two edges (and at the slice's open, so the lead-in's CPU is known apart), from the threads' nanosecond counters where it can be, its
//! processes listed once per block (sys::resources::TreeCpuReader). With a separate load
//! host (a fleet's `load = "separate"`) each slice is a load run of its own on new
//! connections, as before held-open slices existed.
//!
//! What a trial of its own records, an interleaved trial records too, for its slices'
//! recorded windows alone: requests, errors, a latency histogram (the slices' merged), CPU
//! time (summed over the windows); and over the whole measured phase: memory, the probe,
//! the verification of the settings, deaths (watched from the server's start, warmup
//! included) and orphans (looked for once every server of the block is stopped). The
//! servers share the machine's noise, so the block has one noise record.
//!
//! The block is the unit that is stored or redone: its trials are stored together, and an
//! interruption stores none of them.
//!
//! This module holds the course of a block: every server started, each warmed up, the
//! measured phase begun, the rounds, its end, every server stopped, and each trial
//! finished. The parts, each read top to bottom:
//! - `member`: one configuration of the block, its phase (no server up, refused, measured)
//!   and what its slices gather;
//! - `held`: the rounds on held-open connections, laid out before the first slice;
//! - `per_slice`: the rounds with a load run of its own per slice (a separate load host).

mod held;
mod member;
mod per_slice;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::probe;
use crate::trial::{
    begin_trial, finish, mark_measured_start, record_stopped, start_server, stop_process,
    write_latency_log, Orphans, PhaseFigures, Stop, StoppedServer, TrialOutcome, TrialSpec,
};
use experiment::design::{lead_in, Design};
use held::{run_rounds_held, HeldPlan};
use member::{Measured, Member, Phase};
use per_slice::run_rounds_per_slice;
use results::{InterleavedRecord, TrialResult, TrialStatus};
use sys::noise::{MachineCounters, NoiseRecord};
use sys::process::{describe_status, kill_orphans, DeathWatch};
use sys::resources::{tree_cpu, CpuTimes, Sampler};

/// What a block of servers up together is doing, as it happens (for the progress: a block
/// is one long step otherwise, its trials all ending together).
#[derive(Clone, Debug, PartialEq)]
pub enum BlockEvent {
    /// A configuration's server is starting.
    Starting { label: String },
    /// A configuration's server is warming up (the others idle).
    WarmingUp { label: String },
    /// A slice begins: `done` of the block's `total` slices are over, `on` names the
    /// configurations loaded now (one interleaved; all co-scheduled), and `last` the
    /// slice just ended with its throughput.
    Slice {
        round: u32,
        rounds: u32,
        done: usize,
        total: usize,
        on: Vec<String>,
        last: Option<(String, f64)>,
    },
}

/// How an interleaved block ended.
pub enum BlockOutcome {
    /// One result per spec, in the specs' order.
    Done(Vec<TrialResult>),
    /// Ctrl-C: every server is stopped and nothing is recorded.
    Interrupted,
    /// A file could not be written; nothing is recorded (the message names it).
    WriteFailed(String),
}

/// How a block's measured phase is cut: `rounds` rounds of one `slice` per configuration
/// (co-scheduled, `together`: of one window shared by all), each round's order drawn from
/// `seed` and the `block`.
#[derive(Clone, Copy)]
struct Slicing {
    slice: Duration,
    rounds: u32,
    together: bool,
    seed: u64,
    block: u32,
}

impl Slicing {
    /// A round's turns, from its order: one configuration each, or (co-scheduled) one turn
    /// with them all.
    fn turns(&self, order: Vec<usize>) -> Vec<Vec<usize>> {
        if self.together {
            vec![order]
        } else {
            order.into_iter().map(|i| vec![i]).collect()
        }
    }
}

/// Runs the trials of one block (`specs`, every configuration once) with every server up
/// together: interleaved, `rounds` rounds of one `slice` per configuration in an order drawn
/// from `seed` and the block; co-scheduled, `rounds` windows of `slice` with every server
/// loaded at once.
pub fn run_interleaved_block(
    specs: &[TrialSpec],
    design: &Design,
    seed: u64,
    interrupt: &Arc<AtomicBool>,
    events: &mut dyn FnMut(BlockEvent),
) -> BlockOutcome {
    let (slice, rounds) = design
        .slicing()
        .expect("a block of servers up together is interleaved or co-scheduled");
    let mut members = Vec::with_capacity(specs.len());
    for spec in specs {
        match begin_trial(spec) {
            Ok(result) => members.push(Member {
                spec,
                result,
                started: Instant::now(),
                phase: Phase::Down,
            }),
            Err(what) => return BlockOutcome::WriteFailed(what),
        }
    }
    let slicing = Slicing {
        slice,
        rounds,
        together: matches!(design, Design::CoScheduled { .. }),
        seed,
        block: members.first().map_or(0, |m| m.spec.id.block),
    };
    let measured = measure_block(&mut members, &slicing, interrupt, events);
    stop_all(&mut members);
    if let Err(stop) = measured {
        return match stop {
            Stop::Interrupted => BlockOutcome::Interrupted,
            Stop::WriteFailed(what) => BlockOutcome::WriteFailed(what),
        };
    }
    let block_trials: Vec<usize> = specs.iter().map(|s| s.id.trial_id).collect();
    let mut results = Vec::with_capacity(members.len());
    for mut m in members {
        if let Some(record) = m.result.interleaved.as_mut() {
            record.block_trials = block_trials.clone();
        }
        if let Some(failure) = m.result.pinning.as_ref().and_then(|p| p.failure()) {
            m.result.invalidate(failure);
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

/// A load thread's outcome once joined: a thread that panicked is a failed load, said so.
fn joined_load(
    joined: std::thread::Result<std::io::Result<load::RunOutcome>>,
) -> std::io::Result<load::RunOutcome> {
    joined.unwrap_or_else(|_| Err(std::io::Error::other("the load thread panicked")))
}

/// Stops every server of the block still up, then kills and records what escaped any of
/// them: with several servers up, whose an escaped process was cannot be told, so every
/// trial of the block carries it.
fn stop_all(members: &mut [Member<'_>]) {
    let mut stopped: Vec<(usize, StoppedServer, Option<u64>)> = Vec::new();
    for (i, m) in members.iter_mut().enumerate() {
        match std::mem::replace(&mut m.phase, Phase::Down) {
            Phase::Measured(up) => {
                let Measured {
                    server, answered, ..
                } = *up;
                stopped.push((i, stop_process(server, m.spec), answered));
            }
            Phase::Refused(s) => stopped.push((i, *s, None)),
            Phase::Down => {}
        }
    }
    if stopped.is_empty() {
        return;
    }
    let groups: Vec<i32> = stopped.iter().map(|(_, s, _)| s.pid).collect();
    let orphans = kill_orphans(&groups);
    let whose = if stopped.len() == 1 {
        Orphans::Its
    } else {
        Orphans::OneOfTheBlock
    };
    for (i, s, answered) in stopped {
        record_stopped(s, orphans.clone(), whose, answered, &mut members[i].result);
    }
}

/// Starts and warms up every server, runs the rounds, and fills each member's result. A
/// configuration whose server did not come up keeps its failed result, and the others go on.
fn measure_block(
    members: &mut [Member<'_>],
    slicing: &Slicing,
    interrupt: &Arc<AtomicBool>,
    events: &mut dyn FnMut(BlockEvent),
) -> Result<(), Stop> {
    start_all(members, interrupt, events)?;
    warm_up_all(members, interrupt, events)?;
    let start = begin_measured_phase(members);

    // 4. The rounds: interleaved, one server at a time in the round's order; co-scheduled,
    //    every server at once (their loads started in the round's order).
    if crate::remote_load::installed().is_none() {
        // A server that exited in its warmup is left out; its verdict says so.
        let live: Vec<usize> = (0..members.len())
            .filter(|&i| {
                members[i]
                    .measured_mut()
                    .is_some_and(|up| up.server.server.exited().is_none())
            })
            .collect();
        let plan = HeldPlan::lay_out(members, &live, slicing);
        run_rounds_held(members, &plan, start.at, interrupt, events)?;
    } else {
        run_rounds_per_slice(members, slicing, start.at, interrupt, events)?;
    }
    finish_measured_phase(members, start, slicing)
}

/// 1. Every server up, on a port of its own, in the block's order, and watched from then
///    on. A server whose load settings are invalid is stopped at once.
fn start_all(
    members: &mut [Member<'_>],
    interrupt: &Arc<AtomicBool>,
    events: &mut dyn FnMut(BlockEvent),
) -> Result<(), Stop> {
    for m in members.iter_mut().filter(|m| m.result.reason.is_none()) {
        events(BlockEvent::Starting {
            label: m.spec.id.label.clone(),
        });
        let Some(sut) = start_server(m.spec, interrupt, &mut m.result)? else {
            continue;
        };
        let pid = sut.server.pid();
        let (url, settings) = sut.load_target(&m.spec.settings.load);
        match settings.build_spec(&url) {
            Ok(spec) => {
                let watch = DeathWatch::start(pid, pid);
                m.phase = Phase::Measured(Box::new(Measured::new(sut, watch, spec, url)));
            }
            Err(e) => {
                m.result.reason = Some(format!("invalid load settings: {e}"));
                m.phase = Phase::Refused(Box::new(stop_process(sut, m.spec)));
            }
        }
    }
    Ok(())
}

/// 2. Each warmed up on its own, one after the other (the others idle meanwhile).
fn warm_up_all(
    members: &mut [Member<'_>],
    interrupt: &Arc<AtomicBool>,
    events: &mut dyn FnMut(BlockEvent),
) -> Result<(), Stop> {
    for m in members.iter_mut() {
        let Phase::Measured(up) = &mut m.phase else {
            continue;
        };
        let spec = &up.load_spec;
        if spec.warmup.is_zero() {
            continue;
        }
        events(BlockEvent::WarmingUp {
            label: m.spec.id.label.clone(),
        });
        let mut warmup = spec.clone();
        warmup.stop = load::StopCondition::Duration(spec.warmup);
        warmup.warmup = Duration::ZERO;
        // The warmup's figures are not kept (a failure shows in the slices), but for its
        // 99th percentile latency: how long this server's last requests of a slice take.
        let warmed = crate::remote_load::run(&warmup, interrupt);
        up.tail = warmed.ok().and_then(|o| {
            (o.stats.responses > 0)
                .then(|| Duration::from_nanos(o.stats.latency.value_at_quantile(0.99)))
        });
        if interrupt.load(Ordering::SeqCst) {
            return Err(Stop::Interrupted);
        }
    }
    Ok(())
}

/// The start of the measured phase, and what its end is read against.
struct PhaseStart {
    at: Instant,
    machine: Option<MachineCounters>,
    /// Per member measured: its memory sampler, and its server tree's CPU time at the start.
    sampled: Vec<(usize, Sampler, Option<CpuTimes>)>,
}

/// 3. The measured phase: the probe's first snapshot, allocators and pinning; memory
///    sampled per server over the whole phase.
fn begin_measured_phase(members: &mut [Member<'_>]) -> PhaseStart {
    for m in members.iter_mut() {
        let Phase::Measured(up) = &mut m.phase else {
            continue;
        };
        let sut = &mut up.server;
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
        // A separate load host: its record, and the round-trip time before the slices.
        m.result.load_host = crate::remote_load::load_host_record(sut.addr);
    }
    let at = Instant::now();
    let machine = MachineCounters::read();
    let sampled = members
        .iter()
        .enumerate()
        .filter_map(|(i, m)| {
            let pid = m.measured()?.server.server.pid();
            let interval = m.spec.settings.sample_interval;
            Some((
                i,
                Sampler::start(pid, pid, Instant::now(), interval),
                tree_cpu(pid, pid).ok(),
            ))
        })
        .collect();
    PhaseStart {
        at,
        machine,
        sampled,
    }
}

/// The end of the measured phase: resources, deaths, the probe's last snapshot, and each
/// trial's figures from its slices.
fn finish_measured_phase(
    members: &mut [Member<'_>],
    start: PhaseStart,
    slicing: &Slicing,
) -> Result<(), Stop> {
    let Slicing { slice, rounds, .. } = *slicing;
    let measured_time = slice * rounds;
    let machine_end = MachineCounters::read();
    let phase_s = start.at.elapsed().as_secs_f64();
    let mut all_servers_cpu_us = 0u64;
    let mut ends = Vec::new();
    for (i, sampler, cpu_at_start) in start.sampled {
        let Some(up) = members[i].measured_mut() else {
            continue;
        };
        let sut = &mut up.server;
        let pid = sut.server.pid();
        if let Some(watch) = up.watch.take() {
            sut.record.deaths = watch.finish();
        }
        sut.record.deaths.retain(|d| d.pid != pid);
        let resources = sampler.finish();
        let cpu_at_end = tree_cpu(pid, pid).ok();
        let phase_cpu = cpu_at_start.zip(cpu_at_end).map(|(a, b)| b.since(&a));
        all_servers_cpu_us += phase_cpu.map_or(0, |c| c.total_us());
        probe::request_snapshot(&sut.probe_dir, probe::MEASURE_END, pid, pid);
        ends.push((i, resources, phase_cpu));
    }
    let noise = start
        .machine
        .zip(machine_end)
        .and_then(|(a, b)| NoiseRecord::between(&a, &b, all_servers_cpu_us));
    for (i, resources, phase_cpu) in ends {
        let m = &mut members[i];
        let Phase::Measured(up) = &mut m.phase else {
            continue;
        };
        let Some(outcome) = up.outcome.take() else {
            let exited = up.server.server.exited();
            m.result.status = TrialStatus::Failed;
            m.result.reason.get_or_insert_with(|| match exited {
                Some(status) => format!(
                    "the server exited before its first slice ({})",
                    describe_status(status)
                ),
                None => "no slice was measured".into(),
            });
            continue;
        };
        let mut spec = up.load_spec.clone();
        spec.stop = load::StopCondition::Duration(measured_time);
        let report = load::LoadReport::new(&spec, &up.url, &outcome);
        up.answered = Some(outcome.stats.responses + outcome.stats.unrecorded_responses);
        write_latency_log(&m.spec.out_dir, &outcome.stats.latency, report.elapsed_s)?;
        // The trial's CPU and its wall time are its slices' recorded windows alone; what the
        // server did the rest of the phase is recorded apart. Memory and context switches
        // cover the whole phase.
        let windows_s: f64 = up.slices.iter().map(|s| s.elapsed_s).sum();
        let resources = resources.map(|mut r| {
            if let Ok(cpu) = &up.slice_cpu {
                r.cpu_user_us = cpu.user_us;
                r.cpu_system_us = cpu.system_us;
                r.elapsed_us = (windows_s * 1e6).round() as u64;
            }
            r
        });
        m.result.noise = noise.clone();
        // Idle: the phase less this server's recorded windows. The lead-ins and wind-downs
        // around each window are counted with it: their CPU is in neither the trial's CPU
        // nor its requests, and a server's background work there would otherwise hide.
        let spans_cpu: Option<u64> = up.spans.iter().map(|(_, c)| c.map(|c| c.total_us())).sum();
        let windows_cpu: Option<u64> = up.slice_cpu.as_ref().ok().map(|c| c.total_us());
        m.result.interleaved = Some(InterleavedRecord {
            slice_s: slice.as_secs_f64(),
            lead_in_s: lead_in(slice).as_secs_f64(),
            held_open: up.held_open,
            drain_max_s: up.drain_max.map(|d| d.as_secs_f64()),
            rounds,
            block_trials: Vec::new(),
            slices: std::mem::take(&mut up.slices),
            idle_cpu_us: phase_cpu
                .zip(windows_cpu)
                .map(|(all, own)| all.total_us().saturating_sub(own)),
            lead_in_cpu_us: spans_cpu
                .zip(windows_cpu)
                .map(|(spans, own)| spans.saturating_sub(own)),
            idle_s: Some((phase_s - windows_s).max(0.0)),
        });
        PhaseFigures { report, resources }.record(
            &mut m.result,
            up.server.server.exited(),
            up.server.server.stderr_path(),
            &up.server.record,
        );
        if let Err(why) = &up.slice_cpu {
            m.result.invalidate(why.clone());
        }
        if m.result.status == TrialStatus::Valid && m.result.reason.is_some() {
            m.result.status = TrialStatus::Invalid;
        }
    }
    Ok(())
}
