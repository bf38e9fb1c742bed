//! The rounds with a load run of its own per slice, on new connections (a separate load
//! host, which cannot hold the load open across the block): each slice's load started,
//! run for its lead-in and the slice, and stopped, its server tree's CPU time read around it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::member::{Measured, Member, Phase};
use super::{BlockEvent, Slicing};
use crate::trial::Stop;
use experiment::design::{lead_in, round_order, slice_seed};
use results::{SliceRecord, TrialResult};
use sys::resources::{read_tree_cpu, CpuReading, CpuTimes, CpuWindow};

/// The rounds with a load run of its own per slice, on new connections (a separate load
/// host).
pub(super) fn run_rounds_per_slice(
    members: &mut [Member<'_>],
    slicing: &Slicing,
    phase_start: Instant,
    interrupt: &Arc<AtomicBool>,
    events: &mut dyn FnMut(BlockEvent),
) -> Result<(), Stop> {
    let Slicing {
        slice,
        rounds,
        together,
        seed,
        block,
    } = *slicing;
    let measured = members.iter().filter(|m| m.measured().is_some()).count();
    let per_round = if together { 1 } else { measured };
    let total = per_round * rounds as usize;
    let mut done = 0;
    let mut last: Option<(String, f64)> = None;
    for round in 0..rounds {
        let order = round_order(members.len(), seed, block, round);
        for (turn, group) in slicing.turns(order).into_iter().enumerate() {
            // The measured servers of the turn, each with its slice's load and its pid. A
            // server that exited is left out; its verdict says so.
            let (live, loads): (Vec<usize>, Vec<(load::LoadSpec, i32)>) = group
                .into_iter()
                .filter_map(|i| {
                    let up = members[i].measured_mut()?;
                    if up.server.server.exited().is_some() {
                        return None;
                    }
                    let mut spec = up.load_spec.clone();
                    spec.warmup = lead_in(slice);
                    spec.stop = load::StopCondition::Duration(slice);
                    spec.seed = slice_seed(spec.seed, round);
                    Some((i, (spec, up.server.server.pid())))
                })
                .unzip();
            if live.is_empty() {
                continue;
            }
            events(BlockEvent::Slice {
                round,
                rounds,
                done,
                total,
                on: live
                    .iter()
                    .map(|&i| members[i].spec.id.label.clone())
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
                let m = &mut members[i];
                if let Phase::Measured(up) = &mut m.phase {
                    record_slice(up, &mut m.result, run, round, turn, start_s);
                }
                if let (Some(rate), false) = (rate, together) {
                    last = Some((m.spec.id.label.clone(), rate));
                }
            }
            done += 1;
        }
    }
    Ok(())
}

/// Adds one slice's figures to a member's trial; a failed load gives its result the reason.
fn record_slice(
    up: &mut Measured,
    result: &mut TrialResult,
    run: SliceRun,
    round: u32,
    turn: usize,
    start_s: f64,
) {
    up.spans.push((run.span, run.span_cpu));
    let outcome = match run.outcome {
        Ok(o) => o,
        Err(e) => {
            result.reason = Some(format!("the load generator failed: {e}"));
            return;
        }
    };
    up.add_window_cpu(&run.window_cpu, round);
    let window = run.window_cpu.ok();
    up.slices.push(SliceRecord {
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
    match &mut up.outcome {
        Some(all) => all.absorb(outcome),
        None => up.outcome = Some(outcome),
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
                .map(|h| super::joined_load(h.join()))
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
