//! The rounds on held-open connections (`load::windows`): every slice laid out before the
//! first, each server's load run once over its windows on a thread of its own, each server
//! tree's CPU time read at its windows' edges, and each window's figures added to its trial.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::member::{Measured, Member, Phase};
use super::{BlockEvent, Slicing};
use crate::trial::Stop;
use experiment::design::{lead_in, round_order};
use results::SliceRecord;
use sys::resources::{CpuReading, CpuTimes, CpuWindow, TreeCpuReader};

/// The longest lead-in a slow previous server lengthens a slice's to.
const MAX_TAIL_LEAD_IN: Duration = Duration::from_secs(1);

/// How long before the first slice the held-open loads are started, so their connections
/// are open when it begins.
const HELD_CONNECT_AHEAD: Duration = Duration::from_millis(150);

/// Held open: at most this often the block's progress is told (a slice can be 20 ms).
const HELD_EVENT_EVERY: Duration = Duration::from_millis(250);

/// Every slice of a held-open block, laid out before the first: one window per turn of
/// each round (interleaved: one server's; co-scheduled: every server's at once).
pub(super) struct HeldPlan {
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

/// A member's CPU time over one turn: over its recorded window, and over its whole slice
/// (lead-in included; what the slice's lead-in used is the difference).
type TurnCpu = (Result<CpuWindow, String>, Option<CpuTimes>);

impl HeldPlan {
    /// The slices of the `measured` members (indices into `members`), from now on.
    pub(super) fn lay_out(
        members: &[Member<'_>],
        measured: &[usize],
        slicing: &Slicing,
    ) -> HeldPlan {
        let Slicing {
            slice,
            rounds,
            seed,
            block,
            ..
        } = *slicing;
        let mut at = Instant::now() + HELD_CONNECT_AHEAD;
        let mut turns: Vec<HeldTurn> = Vec::new();
        for round in 0..rounds {
            let order: Vec<usize> = round_order(members.len(), seed, block, round)
                .into_iter()
                .filter(|i| measured.contains(i))
                .collect();
            for (turn, on) in slicing
                .turns(order)
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
                    .filter_map(|&j| members[j].measured().and_then(|up| up.tail))
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

    /// The members laid out in the plan (those up when it was made), in order.
    fn live(&self) -> Vec<usize> {
        let mut live: Vec<usize> = self
            .turns
            .iter()
            .flat_map(|t| t.on.iter().copied())
            .collect();
        live.sort_unstable();
        live.dedup();
        live
    }
}

/// The rounds on held-open connections: each server's load runs once over its windows
/// (on a thread of its own), while this thread reads each server's CPU time at the edges
/// of its recorded windows and tells the progress.
pub(super) fn run_rounds_held(
    members: &mut [Member<'_>],
    plan: &HeldPlan,
    phase_start: Instant,
    interrupt: &Arc<AtomicBool>,
    events: &mut dyn FnMut(BlockEvent),
) -> Result<(), Stop> {
    let live = plan.live();
    // Each live server's CPU reader (its tree listed now) and its load, with its windows.
    let readers: Vec<(usize, Result<TreeCpuReader, String>)> = live
        .iter()
        .filter_map(|&i| {
            let pid = members[i].measured()?.server.server.pid();
            Some((i, TreeCpuReader::new(pid, pid).map_err(|e| e.to_string())))
        })
        .collect();
    let loads: Vec<(usize, load::LoadSpec, Arc<[load::Window]>)> = live
        .iter()
        .filter_map(|&i| {
            let windows: Vec<load::Window> = plan.windows_of(i).iter().map(|t| t.window).collect();
            Some((i, members[i].measured()?.load_spec.clone(), windows.into()))
        })
        .collect();
    let (outcomes, cpu) = std::thread::scope(|scope| {
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
        let cpu = follow_turns(members, plan, &readers, interrupt, events);
        let outcomes: Vec<(usize, std::io::Result<load::RunOutcome>)> = running
            .into_iter()
            .map(|(i, h)| (i, super::joined_load(h.join())))
            .collect();
        (outcomes, cpu)
    });
    if interrupt.load(Ordering::SeqCst) {
        return Err(Stop::Interrupted);
    }
    record_outcomes(members, plan, outcomes, cpu, phase_start);
    Ok(())
}

/// Follows the plan's turns as the loads run them: tells the block's progress, and reads
/// the CPU time of each server on a turn at its window's open, the start of its recorded
/// part and its close. Gives each member's `TurnCpu` for its turns, in order (indexed like
/// `members`); on Ctrl-C it stops at once.
fn follow_turns(
    members: &[Member<'_>],
    plan: &HeldPlan,
    readers: &[(usize, Result<TreeCpuReader, String>)],
    interrupt: &Arc<AtomicBool>,
    events: &mut dyn FnMut(BlockEvent),
) -> Vec<Vec<TurnCpu>> {
    let read = |i: usize| -> Result<CpuReading, String> {
        match readers.iter().find(|(j, _)| *j == i).map(|(_, r)| r) {
            Some(Ok(r)) => r.read().map_err(|e| e.to_string()),
            Some(Err(e)) => Err(e.clone()),
            None => Err("the server was not up when the block's slices were laid out".into()),
        }
    };
    let mut cpu: Vec<Vec<TurnCpu>> = members.iter().map(|_| Vec::new()).collect();
    let total = plan.turns.len();
    let mut told = Instant::now() - HELD_EVENT_EVERY;
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
                    .map(|&i| members[i].spec.id.label.clone())
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
        for (&i, ((o, a), b)) in turn.on.iter().zip(opened.into_iter().zip(first).zip(last)) {
            let span = o.zip(b.as_ref().ok()).map(|(o, b)| b.since(&o).times);
            let window = match (a, b) {
                (Ok(a), Ok(b)) => Ok(b.since(&a)),
                (Err(e), _) | (_, Err(e)) => Err(e),
            };
            cpu[i].push((window, span));
        }
    }
    cpu
}

/// Adds each held-open load's windows to its member's trial, with the CPU time read
/// around them; a failed load gives its result the reason.
fn record_outcomes(
    members: &mut [Member<'_>],
    plan: &HeldPlan,
    outcomes: Vec<(usize, std::io::Result<load::RunOutcome>)>,
    mut cpu: Vec<Vec<TurnCpu>>,
    phase_start: Instant,
) {
    for (i, outcome) in outcomes {
        let m = &mut members[i];
        let Phase::Measured(up) = &mut m.phase else {
            continue;
        };
        up.held_open = true;
        let outcome = match outcome {
            Ok(o) => o,
            Err(e) => {
                m.result.reason = Some(format!("the load generator failed: {e}"));
                continue;
            }
        };
        let turns = plan.windows_of(i).into_iter().zip(&outcome.stats.windows);
        for ((turn, stats), turn_cpu) in turns.zip(std::mem::take(&mut cpu[i])) {
            record_window(up, turn, stats, turn_cpu, phase_start);
        }
        up.outcome = Some(outcome);
    }
}

/// Adds one held-open window's figures to its member's trial.
fn record_window(
    up: &mut Measured,
    turn: &HeldTurn,
    stats: &load::windows::WindowStats,
    (window_cpu, span_cpu): TurnCpu,
    phase_start: Instant,
) {
    up.add_window_cpu(&window_cpu, turn.round);
    let drained = Duration::from_nanos(stats.drained_ns);
    up.drain_max = Some(up.drain_max.map_or(drained, |d| d.max(drained)));
    let w = window_cpu.ok();
    up.slices.push(SliceRecord {
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
    up.spans
        .push((turn.window.close - turn.window.open, span_cpu));
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
