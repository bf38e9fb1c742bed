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

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::probe;
use crate::trial::{
    begin_trial, derive, finish, mark_measured_start, record_stopped, start_server, stop_process,
    verdict, write_latency_log, Orphans, ServerUnderTest, Stop, StoppedServer, TrialOutcome,
    TrialSpec,
};
use experiment::design::{lead_in, round_order, slice_seed, Design};
use results::{InterleavedRecord, SliceRecord, TrialResult, TrialStatus};
use sys::noise::{MachineCounters, NoiseRecord};
use sys::process::{describe_status, kill_orphans, DeathWatch};
use sys::resources::{
    read_tree_cpu, tree_cpu, CpuReading, CpuTimes, CpuWindow, Sampler, TreeCpuReader,
};

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

/// One configuration of the block while it runs.
struct Member<'a> {
    spec: &'a TrialSpec,
    result: TrialResult,
    started: Instant,
    server: Option<ServerUnderTest>,
    /// A server stopped before the others (its load settings were invalid), not recorded yet.
    stopped: Option<StoppedServer>,
    /// Watches the server's tree from its start to the end of the measured phase.
    watch: Option<DeathWatch>,
    load_spec: Option<load::LoadSpec>,
    url: String,
    /// The slices' outcomes, merged.
    outcome: Option<load::RunOutcome>,
    slices: Vec<SliceRecord>,
    /// The CPU time of the slices' recorded windows, summed; an error once one could not
    /// be read.
    slice_cpu: Result<CpuTimes, String>,
    /// Each slice's whole span (lead-in and wind-down included) and its CPU time.
    spans: Vec<(Duration, Option<CpuTimes>)>,
    /// Its slices were held open (one load run over the block).
    held_open: bool,
    /// Held open: the longest any slice's last request took to complete after its close.
    drain_max: Option<Duration>,
    /// Its 99th percentile latency in warmup: how long its last requests of a slice run on.
    tail: Option<Duration>,
    /// The requests it answered over the measured phase, its slices' lead-ins included: what
    /// the probe's figures per request divide by, its snapshots bracketing the phase.
    answered: Option<u64>,
}

impl Member<'_> {
    fn is_measured(&self) -> bool {
        self.server.is_some() && self.load_spec.is_some()
    }

    /// Adds one slice's figures to the trial.
    fn record_slice(&mut self, run: SliceRun, round: u32, turn: usize, start_s: f64) {
        self.spans.push((run.span, run.span_cpu));
        let outcome = match run.outcome {
            Ok(o) => o,
            Err(e) => {
                self.result.reason = Some(format!("the load generator failed: {e}"));
                return;
            }
        };
        self.slice_cpu = match (&self.slice_cpu, &run.window_cpu) {
            (Ok(sum), Ok(w)) => Ok(sum.plus(&w.times)),
            (Err(e), _) => Err(e.clone()),
            (Ok(_), Err(e)) => Err(format!(
                "the server's CPU time could not be read at the edges of round {}'s slice: {e}",
                round + 1
            )),
        };
        let window = run.window_cpu.ok();
        self.slices.push(SliceRecord {
            round,
            turn,
            start_s,
            elapsed_s: outcome.recorded.as_secs_f64(),
            requests: outcome.stats.responses,
            errors: outcome.stats.errors.iter().sum(),
            cpu_us: window.map(|w| w.times.total_us()),
            cpu_fine: window.is_some_and(|w| w.fine),
            lead_in_s: None,
            drain_s: None,
        });
        match &mut self.outcome {
            Some(all) => all.absorb(outcome),
            None => self.outcome = Some(outcome),
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
    let together = matches!(design, Design::CoScheduled { .. });
    let mut members = Vec::with_capacity(specs.len());
    for spec in specs {
        match begin_trial(spec) {
            Ok(result) => members.push(Member {
                spec,
                result,
                started: Instant::now(),
                server: None,
                stopped: None,
                watch: None,
                load_spec: None,
                url: String::new(),
                outcome: None,
                slices: Vec::new(),
                slice_cpu: Ok(CpuTimes::default()),
                spans: Vec::new(),
                held_open: false,
                drain_max: None,
                tail: None,
                answered: None,
            }),
            Err(what) => return BlockOutcome::WriteFailed(what),
        }
    }
    let measured = measure_block(
        &mut members,
        slice,
        rounds,
        together,
        seed,
        interrupt,
        events,
    );
    stop_all(&mut members);
    if let Err(stop) = measured {
        return match stop {
            Stop::Interrupted => BlockOutcome::Interrupted,
            Stop::WriteFailed(what) => BlockOutcome::WriteFailed(what),
        };
    }
    let block_trials: Vec<usize> = specs.iter().map(|s| s.trial_id).collect();
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

/// Stops every server of the block still up, then kills and records what escaped any of
/// them: with several servers up, whose an escaped process was cannot be told, so every
/// trial of the block carries it.
fn stop_all(members: &mut [Member<'_>]) {
    let mut stopped: Vec<(usize, StoppedServer)> = Vec::new();
    for (i, m) in members.iter_mut().enumerate() {
        if let Some(sut) = m.server.take() {
            stopped.push((i, stop_process(sut, m.spec)));
        }
        if let Some(s) = m.stopped.take() {
            stopped.push((i, s));
        }
    }
    if stopped.is_empty() {
        return;
    }
    let groups: Vec<i32> = stopped.iter().map(|(_, s)| s.pid).collect();
    let orphans = kill_orphans(&groups);
    let whose = if stopped.len() == 1 {
        Orphans::Its
    } else {
        Orphans::OneOfTheBlock
    };
    for (i, s) in stopped {
        let answered = members[i].answered;
        record_stopped(s, orphans.clone(), whose, answered, &mut members[i].result);
    }
}

/// Starts and warms up every server, runs the rounds, and fills each member's result. A
/// configuration whose server did not come up keeps its failed result, and the others go on.
fn measure_block(
    members: &mut [Member<'_>],
    slice: Duration,
    rounds: u32,
    together: bool,
    seed: u64,
    interrupt: &Arc<AtomicBool>,
    events: &mut dyn FnMut(BlockEvent),
) -> Result<(), Stop> {
    // 1. Every server up, on a port of its own, in the block's order, and watched from then
    //    on. A server whose load settings are invalid is stopped at once.
    for m in members.iter_mut().filter(|m| m.result.reason.is_none()) {
        events(BlockEvent::Starting {
            label: m.spec.label.clone(),
        });
        m.server = start_server(m.spec, interrupt, &mut m.result)?;
        let Some(sut) = &m.server else { continue };
        let pid = sut.server.pid();
        let (url, settings) = sut.load_target(&m.spec.settings.load);
        m.url = url;
        match settings.build_spec(&m.url) {
            Ok(spec) => {
                m.load_spec = Some(spec);
                m.watch = Some(DeathWatch::start(pid, pid));
            }
            Err(e) => {
                m.result.reason = Some(format!("invalid load settings: {e}"));
                let sut = m.server.take().expect("just started");
                m.stopped = Some(stop_process(sut, m.spec));
            }
        }
    }
    // 2. Each warmed up on its own, one after the other (the others idle meanwhile).
    for m in members.iter_mut().filter(|m| m.is_measured()) {
        let spec = m.load_spec.as_ref().expect("measured");
        if spec.warmup.is_zero() {
            continue;
        }
        events(BlockEvent::WarmingUp {
            label: m.spec.label.clone(),
        });
        let mut warmup = spec.clone();
        warmup.stop = load::StopCondition::Duration(spec.warmup);
        warmup.warmup = Duration::ZERO;
        // The warmup's figures are not kept (a failure shows in the slices), but for its
        // 99th percentile latency: how long this server's last requests of a slice take.
        let warmed = crate::remote_load::run(&warmup, interrupt);
        m.tail = warmed.ok().and_then(|o| {
            (o.stats.responses > 0)
                .then(|| Duration::from_nanos(o.stats.latency.value_at_quantile(0.99)))
        });
        if interrupt.load(Ordering::SeqCst) {
            return Err(Stop::Interrupted);
        }
    }
    let measured: Vec<usize> = (0..members.len())
        .filter(|&i| members[i].is_measured())
        .collect();

    // 3. The measured phase: the probe's first snapshot, allocators and pinning; memory
    //    sampled per server over the whole phase.
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
        // A separate load host: its record, and the round-trip time before the slices.
        m.result.load_host = crate::remote_load::load_host_record(sut.addr);
    }
    let phase_start = Instant::now();
    let machine_start = MachineCounters::read();
    let sampled: Vec<(usize, Sampler, Option<CpuTimes>)> = measured
        .iter()
        .map(|&i| {
            let m = &members[i];
            let pid = m.server.as_ref().expect("measured").server.pid();
            let interval = m.spec.settings.sample_interval;
            (
                i,
                Sampler::start(pid, pid, Instant::now(), interval),
                tree_cpu(pid, pid).ok(),
            )
        })
        .collect();

    // 4. The rounds: interleaved, one server at a time in the round's order; co-scheduled,
    //    every server at once (their loads started in the round's order).
    let block = members.first().map_or(0, |m| m.spec.block);
    if crate::remote_load::installed().is_none() {
        // A server that exited in its warmup is left out; its verdict says so.
        let live: Vec<usize> = measured
            .iter()
            .copied()
            .filter(|&i| {
                members[i]
                    .server
                    .as_mut()
                    .is_some_and(|sut| sut.server.exited().is_none())
            })
            .collect();
        let plan = HeldPlan::lay_out(members, &live, slice, rounds, together, seed, block);
        run_rounds_held(members, &plan, phase_start, interrupt, events)?;
    } else {
        run_rounds_per_slice(
            members,
            &measured,
            (slice, rounds, together, seed, block),
            phase_start,
            interrupt,
            events,
        )?;
    }
    finish_measured_phase(
        members,
        sampled,
        machine_start,
        phase_start,
        slice * rounds,
        slice,
        rounds,
    )
}

/// The rounds with a load run of its own per slice, on new connections (a separate load
/// host).
fn run_rounds_per_slice(
    members: &mut [Member<'_>],
    measured: &[usize],
    (slice, rounds, together, seed, block): (Duration, u32, bool, u64, u32),
    phase_start: Instant,
    interrupt: &Arc<AtomicBool>,
    events: &mut dyn FnMut(BlockEvent),
) -> Result<(), Stop> {
    let per_round = if together { 1 } else { measured.len() };
    let total = per_round * rounds as usize;
    let mut done = 0;
    let mut last: Option<(String, f64)> = None;
    for round in 0..rounds {
        let order = round_order(members.len(), seed, block, round);
        let turns: Vec<Vec<usize>> = if together {
            vec![order]
        } else {
            order.into_iter().map(|i| vec![i]).collect()
        };
        for (turn, group) in turns.into_iter().enumerate() {
            let live: Vec<usize> = group
                .into_iter()
                .filter(|i| measured.contains(i))
                // A server that exited is left out; its verdict says so.
                .filter(|&i| {
                    let sut = members[i].server.as_mut().expect("measured");
                    sut.server.exited().is_none()
                })
                .collect();
            if live.is_empty() {
                continue;
            }
            let loads: Vec<(load::LoadSpec, i32)> = live
                .iter()
                .map(|&i| {
                    let m = &members[i];
                    let mut spec = m.load_spec.clone().expect("measured");
                    spec.warmup = lead_in(slice);
                    spec.stop = load::StopCondition::Duration(slice);
                    spec.seed = slice_seed(spec.seed, round);
                    (spec, m.server.as_ref().expect("measured").server.pid())
                })
                .collect();
            events(BlockEvent::Slice {
                round,
                rounds,
                done,
                total,
                on: live
                    .iter()
                    .map(|&i| members[i].spec.label.clone())
                    .collect(),
                last: last.take(),
            });
            let start_s = phase_start.elapsed().as_secs_f64();
            let runs = run_slices(loads, slice, interrupt);
            if interrupt.load(Ordering::SeqCst) {
                return Err(Stop::Interrupted);
            }
            for (&i, run) in live.iter().zip(runs) {
                let rate = run.outcome.as_ref().ok().and_then(|o| {
                    let s = o.recorded.as_secs_f64();
                    (s > 0.0).then(|| o.stats.responses as f64 / s)
                });
                members[i].record_slice(run, round, turn, start_s);
                if let (Some(rate), false) = (rate, together) {
                    last = Some((members[i].spec.label.clone(), rate));
                }
            }
            done += 1;
        }
    }
    Ok(())
}

/// The end of the measured phase: resources, deaths, the probe's last snapshot, and each
/// trial's figures from its slices.
fn finish_measured_phase(
    members: &mut [Member<'_>],
    sampled: Vec<(usize, Sampler, Option<CpuTimes>)>,
    machine_start: Option<MachineCounters>,
    phase_start: Instant,
    measured_time: Duration,
    slice: Duration,
    rounds: u32,
) -> Result<(), Stop> {
    let machine_end = MachineCounters::read();
    let phase_s = phase_start.elapsed().as_secs_f64();
    let mut all_servers_cpu_us = 0u64;
    let mut ends = Vec::new();
    for (i, sampler, cpu_at_start) in sampled {
        let m = &mut members[i];
        let sut = m.server.as_mut().expect("measured");
        let pid = sut.server.pid();
        if let Some(watch) = m.watch.take() {
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
    let noise = machine_start
        .zip(machine_end)
        .and_then(|(a, b)| NoiseRecord::between(&a, &b, all_servers_cpu_us));
    for (i, resources, phase_cpu) in ends {
        let m = &mut members[i];
        let Some(outcome) = m.outcome.take() else {
            let exited = m.server.as_mut().and_then(|sut| sut.server.exited());
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
        let mut spec = m.load_spec.clone().expect("measured");
        spec.stop = load::StopCondition::Duration(measured_time);
        let report = load::LoadReport::new(&spec, &m.url, &outcome);
        m.answered = Some(outcome.stats.responses + outcome.stats.unrecorded_responses);
        write_latency_log(&m.spec.out_dir, &outcome.stats.latency, report.elapsed_s)?;
        // The trial's CPU and its wall time are its slices' recorded windows alone; what the
        // server did the rest of the phase is recorded apart. Memory and context switches
        // cover the whole phase.
        let windows_s: f64 = m.slices.iter().map(|s| s.elapsed_s).sum();
        let resources = resources.map(|mut r| {
            if let Ok(cpu) = &m.slice_cpu {
                r.cpu_user_us = cpu.user_us;
                r.cpu_system_us = cpu.system_us;
                r.elapsed_us = (windows_s * 1e6).round() as u64;
            }
            r
        });
        m.result.derived = derive(&report, resources.as_ref().ok());
        m.result.resources = resources.as_ref().ok().cloned();
        m.result.noise = noise.clone();
        // Idle: the phase less this server's recorded windows. The lead-ins and wind-downs
        // around each window are counted with it: their CPU is in neither the trial's CPU
        // nor its requests, and a server's background work there would otherwise hide.
        let spans_cpu: Option<u64> = m.spans.iter().map(|(_, c)| c.map(|c| c.total_us())).sum();
        let windows_cpu: Option<u64> = m.slice_cpu.as_ref().ok().map(|c| c.total_us());
        m.result.interleaved = Some(InterleavedRecord {
            slice_s: slice.as_secs_f64(),
            lead_in_s: lead_in(slice).as_secs_f64(),
            held_open: m.held_open,
            drain_max_s: m.drain_max.map(|d| d.as_secs_f64()),
            rounds,
            block_trials: Vec::new(),
            slices: std::mem::take(&mut m.slices),
            idle_cpu_us: phase_cpu
                .zip(windows_cpu)
                .map(|(all, own)| all.total_us().saturating_sub(own)),
            lead_in_cpu_us: spans_cpu
                .zip(windows_cpu)
                .map(|(spans, own)| spans.saturating_sub(own)),
            idle_s: Some((phase_s - windows_s).max(0.0)),
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
        m.result.load = Some(report);
        if let Err(why) = &m.slice_cpu {
            m.result.invalidate(why.clone());
        }
        if m.result.status == TrialStatus::Valid && m.result.reason.is_some() {
            m.result.status = TrialStatus::Invalid;
        }
    }
    Ok(())
}

/// The longest lead-in a slow previous server lengthens a slice's to.
const MAX_TAIL_LEAD_IN: Duration = Duration::from_secs(1);

/// How long before the first slice the held-open loads are started, so their connections
/// are open when it begins.
const HELD_CONNECT_AHEAD: Duration = Duration::from_millis(150);

/// Held open: at most this often the block's progress is told (a slice can be 20 ms).
const HELD_EVENT_EVERY: Duration = Duration::from_millis(250);

/// Every slice of a held-open block, laid out before the first: one window per turn of
/// each round (interleaved: one server's; co-scheduled: every server's at once).
struct HeldPlan {
    turns: Vec<HeldTurn>,
    rounds: u32,
}

struct HeldTurn {
    round: u32,
    turn: usize,
    window: load::Window,
    /// The members loaded in this window.
    on: Vec<usize>,
}

impl HeldPlan {
    fn lay_out(
        members: &[Member<'_>],
        measured: &[usize],
        slice: Duration,
        rounds: u32,
        together: bool,
        seed: u64,
        block: u32,
    ) -> HeldPlan {
        let mut at = Instant::now() + HELD_CONNECT_AHEAD;
        let mut turns: Vec<HeldTurn> = Vec::new();
        for round in 0..rounds {
            let order: Vec<usize> = round_order(members.len(), seed, block, round)
                .into_iter()
                .filter(|i| measured.contains(i))
                .collect();
            let groups: Vec<Vec<usize>> = if together {
                vec![order]
            } else {
                order.into_iter().map(|i| vec![i]).collect()
            };
            for (turn, on) in groups
                .into_iter()
                .enumerate()
                .filter(|(_, g)| !g.is_empty())
            {
                // The previous slice's servers' last requests complete in this lead-in: it
                // lasts the design's, or the slowest of them's 99th percentile latency.
                let tail = turns
                    .last()
                    .into_iter()
                    .flat_map(|t| t.on.iter())
                    .filter_map(|&j| members[j].tail)
                    .max()
                    .unwrap_or_default()
                    .min(MAX_TAIL_LEAD_IN);
                let lead = lead_in(slice).max(tail);
                let window = load::Window {
                    open: at,
                    record_from: at + lead,
                    close: at + lead + slice,
                };
                at = window.close;
                turns.push(HeldTurn {
                    round,
                    turn,
                    window,
                    on,
                });
            }
        }
        HeldPlan { turns, rounds }
    }

    /// Member `i`'s windows, in time order.
    fn windows_of(&self, i: usize) -> Vec<&HeldTurn> {
        self.turns.iter().filter(|t| t.on.contains(&i)).collect()
    }
}

/// The rounds on held-open connections: each server's load runs once over its windows
/// (on a thread of its own), while this thread reads each server's CPU time at the edges
/// of its recorded windows and tells the progress.
fn run_rounds_held(
    members: &mut [Member<'_>],
    plan: &HeldPlan,
    phase_start: Instant,
    interrupt: &Arc<AtomicBool>,
    events: &mut dyn FnMut(BlockEvent),
) -> Result<(), Stop> {
    // The servers laid out in the plan (those up when it was made).
    let mut live: Vec<usize> = plan
        .turns
        .iter()
        .flat_map(|t| t.on.iter().copied())
        .collect();
    live.sort_unstable();
    live.dedup();
    // Each live server's CPU reader (its tree listed now) and its load, with its windows.
    let readers: Vec<(usize, Result<TreeCpuReader, String>)> = live
        .iter()
        .map(|&i| {
            let pid = members[i].server.as_ref().expect("measured").server.pid();
            (i, TreeCpuReader::new(pid, pid).map_err(|e| e.to_string()))
        })
        .collect();
    let loads: Vec<(usize, load::LoadSpec, Arc<[load::Window]>)> = live
        .iter()
        .map(|&i| {
            let windows: Vec<load::Window> = plan.windows_of(i).iter().map(|t| t.window).collect();
            (
                i,
                members[i].load_spec.clone().expect("measured"),
                windows.into(),
            )
        })
        .collect();
    // Per turn and member on it: the CPU over its recorded window, and over its whole slice
    // (lead-in included; what the slice's lead-in used is the difference).
    type TurnCpu = (Result<CpuWindow, String>, Option<CpuTimes>);
    let mut cpu: Vec<Vec<TurnCpu>> = Vec::with_capacity(plan.turns.len());
    let total = plan.turns.len();
    let mut told = Instant::now() - HELD_EVENT_EVERY;
    let outcomes: Vec<(usize, std::io::Result<load::RunOutcome>)> = std::thread::scope(|scope| {
        let running: Vec<_> = loads
            .iter()
            .map(|(i, spec, windows)| {
                let windows = windows.clone();
                let interrupt = interrupt.clone();
                (
                    *i,
                    scope.spawn(move || load::run_in_windows(spec, windows, interrupt)),
                )
            })
            .collect();
        let read = |i: usize| -> Result<CpuReading, String> {
            match readers.iter().find(|(j, _)| *j == i).map(|(_, r)| r) {
                Some(Ok(r)) => r.read().map_err(|e| e.to_string()),
                Some(Err(e)) => Err(e.clone()),
                None => Err("the server was not up when the block's slices were laid out".into()),
            }
        };
        for (done, turn) in plan.turns.iter().enumerate() {
            // The slice's progress, told in its lead-in (its requests are counted by its
            // load's thread and known at the block's end: no "last slice" rate here).
            if told.elapsed() >= HELD_EVENT_EVERY {
                told = Instant::now();
                events(BlockEvent::Slice {
                    round: turn.round,
                    rounds: plan.rounds,
                    done,
                    total,
                    on: turn
                        .on
                        .iter()
                        .map(|&i| members[i].spec.label.clone())
                        .collect(),
                    last: None,
                });
            }
            sleep_until(turn.window.open, interrupt);
            let opened: Vec<_> = turn.on.iter().map(|&i| read(i).ok()).collect();
            sleep_until(turn.window.record_from, interrupt);
            let first: Vec<_> = turn.on.iter().map(|&i| read(i)).collect();
            sleep_until(turn.window.close, interrupt);
            if interrupt.load(Ordering::SeqCst) {
                break;
            }
            let last: Vec<_> = turn.on.iter().map(|&i| read(i)).collect();
            cpu.push(
                opened
                    .into_iter()
                    .zip(first)
                    .zip(last)
                    .map(|((o, a), b)| {
                        let span = o.zip(b.as_ref().ok()).map(|(o, b)| b.since(&o).times);
                        let window = match (a, b) {
                            (Ok(a), Ok(b)) => Ok(b.since(&a)),
                            (Err(e), _) | (_, Err(e)) => Err(e),
                        };
                        (window, span)
                    })
                    .collect(),
            );
        }
        running
            .into_iter()
            .map(|(i, h)| {
                (
                    i,
                    h.join()
                        .unwrap_or_else(|_| Err(std::io::Error::other("the load thread panicked"))),
                )
            })
            .collect()
    });
    if interrupt.load(Ordering::SeqCst) {
        return Err(Stop::Interrupted);
    }
    for (i, outcome) in outcomes {
        let m = &mut members[i];
        m.held_open = true;
        let outcome = match outcome {
            Ok(o) => o,
            Err(e) => {
                m.result.reason = Some(format!("the load generator failed: {e}"));
                continue;
            }
        };
        let mine: Vec<(usize, &HeldTurn)> = plan
            .turns
            .iter()
            .enumerate()
            .filter(|(_, t)| t.on.contains(&i))
            .collect();
        for ((k, turn), stats) in mine.iter().zip(&outcome.stats.windows) {
            let at = turn.on.iter().position(|&j| j == i).expect("on this turn");
            let (window_cpu, span_cpu) = cpu[*k][at].clone();
            m.slice_cpu = match (&m.slice_cpu, &window_cpu) {
                (Ok(sum), Ok(w)) => Ok(sum.plus(&w.times)),
                (Err(e), _) => Err(e.clone()),
                (Ok(_), Err(e)) => Err(format!(
                    "the server's CPU time could not be read at the edges of round {}'s slice: {e}",
                    turn.round + 1
                )),
            };
            let drained = Duration::from_nanos(stats.drained_ns);
            m.drain_max = Some(m.drain_max.map_or(drained, |d| d.max(drained)));
            let w = window_cpu.ok();
            m.slices.push(SliceRecord {
                round: turn.round,
                turn: turn.turn,
                start_s: turn
                    .window
                    .open
                    .saturating_duration_since(phase_start)
                    .as_secs_f64(),
                elapsed_s: turn.window.recorded().as_secs_f64(),
                requests: stats.responses,
                errors: stats.errors,
                cpu_us: w.map(|w| w.times.total_us()),
                cpu_fine: w.is_some_and(|w| w.fine),
                lead_in_s: Some((turn.window.record_from - turn.window.open).as_secs_f64()),
                drain_s: Some(drained.as_secs_f64()),
            });
            m.spans
                .push((turn.window.close - turn.window.open, span_cpu));
        }
        m.outcome = Some(outcome);
    }
    Ok(())
}

/// Sleeps until `at`, or returns early on Ctrl-C.
fn sleep_until(at: Instant, interrupt: &AtomicBool) {
    while !interrupt.load(Ordering::SeqCst) {
        let left = at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

/// What one slice measured, for one server.
struct SliceRun {
    outcome: std::io::Result<load::RunOutcome>,
    /// The server tree's CPU time over the recorded window.
    window_cpu: Result<CpuWindow, String>,
    /// Over the whole slice: from before the load's lead-in to after its wind-down.
    span: Duration,
    span_cpu: Option<CpuTimes>,
}

/// One slice: each load of `loads` (one for an interleaved slice, every server's for a
/// co-scheduled window) on its server at once, for its lead-in and `slice`; and each server
/// tree's CPU time over the recorded window (read at its two edges by a thread of its own,
/// every server at each edge) and over the whole slice. On Ctrl-C the reading thread is
/// left to finish on its own (at most `slice` later).
fn run_slices(
    loads: Vec<(load::LoadSpec, i32)>,
    slice: Duration,
    interrupt: &Arc<AtomicBool>,
) -> Vec<SliceRun> {
    let pids: Vec<i32> = loads.iter().map(|(_, pid)| *pid).collect();
    let read_all = |pids: &[i32]| -> Vec<std::io::Result<CpuReading>> {
        pids.iter().map(|&pid| read_tree_cpu(pid, pid)).collect()
    };
    let span_start = Instant::now();
    let before = read_all(&pids);
    // `load::run` starts recording `warmup` after it is called: within microseconds of
    // these instants (the loads are all given the same lead-in).
    let lead = loads
        .first()
        .map_or(Duration::ZERO, |(spec, _)| spec.warmup);
    let window_start = Instant::now() + lead;
    let window_end = window_start + slice;
    let edge_pids = pids.clone();
    let edges = std::thread::spawn(move || {
        std::thread::sleep(window_start.saturating_duration_since(Instant::now()));
        let first = read_all(&edge_pids);
        std::thread::sleep(window_end.saturating_duration_since(Instant::now()));
        let last = read_all(&edge_pids);
        first
            .into_iter()
            .zip(last)
            .map(|(a, b)| match (a, b) {
                (Ok(a), Ok(b)) => Ok(b.since(&a)),
                (Err(e), _) | (_, Err(e)) => Err(e.to_string()),
            })
            .collect::<Vec<_>>()
    });
    let outcomes: Vec<std::io::Result<load::RunOutcome>> = if loads.len() == 1 {
        vec![crate::remote_load::run(&loads[0].0, interrupt)]
    } else {
        std::thread::scope(|scope| {
            let running: Vec<_> = loads
                .iter()
                .map(|(spec, _)| scope.spawn(|| crate::remote_load::run(spec, interrupt)))
                .collect();
            running
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(std::io::Error::other("the load thread panicked")))
                })
                .collect()
        })
    };
    let after = read_all(&pids);
    let span = span_start.elapsed();
    let windows: Vec<Result<CpuWindow, String>> = if interrupt.load(Ordering::SeqCst) {
        pids.iter().map(|_| Err("interrupted".into())).collect()
    } else {
        edges.join().unwrap_or_else(|_| {
            pids.iter()
                .map(|_| Err("the thread reading it panicked".into()))
                .collect()
        })
    };
    outcomes
        .into_iter()
        .zip(windows)
        .zip(before.into_iter().zip(after))
        .map(|((outcome, window_cpu), (a, b))| SliceRun {
            outcome,
            window_cpu,
            span,
            span_cpu: match (a, b) {
                (Ok(a), Ok(b)) => Some(b.since(&a).times),
                _ => None,
            },
        })
        .collect()
}
