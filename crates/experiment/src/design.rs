//! How the configurations of a block are measured against each other.
//!
//! - `blocks`: one trial after another, each with a server of its own,
//!   started, warmed up, measured and stopped before the next starts. The trials of a
//!   block are minutes apart.
//! - `interleaved`: every configuration's server of the block is started and warmed up
//!   first; then the load alternates between them in short slices, in a new random order
//!   every round, so the configurations are measured in the same seconds and the machine's
//!   second-to-second swings fall on all of them alike. Each configuration still gives one
//!   trial per block (its slices summed: one boot, one sample), so the statistics across
//!   blocks are unchanged and never count a boot's slices as independent samples.
//! - `co-scheduled`: the servers of a block are started and warmed up as for `interleaved`,
//!   then all of them are loaded at once, in `rounds` windows of `slice`, sharing the server
//!   CPUs; each server's CPU time per request is read from the scheduler's nanosecond
//!   counters at every window's edges. The servers compete for the same CPUs, so their
//!   throughput and latency are shares of a contended machine; what compares is CPU per
//!   request.
//!
//! A file that writes no design is interleaved when it has two to
//! [`MAX_DEFAULT_INTERLEAVED`] HTTP configurations that can be (the experiment module
//! decides), and in blocks otherwise: measured on this project's machine, interleaving
//! agreed with blocks and gave narrower intervals in 13 of 15 paired runs
//! (docs/PRECISION.md).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The slice when none is written, for an interleaved design whose load runs beside the
/// servers (held-open connections, `load::windows`): on this project's machine, slices of
/// 20 and 50 ms left 2 to 4 times less of the machine's swing in a block's ratios than
/// 500 ms slices and agreed with blocks; 50 ms was as narrow as 20 ms and spends half the
/// loaded time in lead-ins (docs/PRECISION.md, finer slices).
pub const DEFAULT_SLICE: Duration = Duration::from_millis(50);
/// The slice when none is written where each slice is a load run of its own on new
/// connections (a separate load host), and the window of a co-scheduled design (every
/// server loaded at once: nothing is cancelled by alternating faster): the length those
/// designs were measured with.
pub const DEFAULT_LONG_SLICE: Duration = Duration::from_millis(500);
/// The most configurations interleaved when the file writes no design: every server of an
/// interleaved block is in memory at once.
pub const MAX_DEFAULT_INTERLEAVED: usize = 8;
/// Slices shorter than this are mostly lead-in and scheduling. Held-open slices (the load's
/// connections kept open over the block) make 20 ms possible; docs/PRECISION.md measured
/// how much of the machine's swing slices of 20 to 500 ms cancel.
pub const MIN_SLICE: Duration = Duration::from_millis(20);
/// A separate load host runs one load per slice on new connections: shorter slices would
/// measure mostly connection set-up.
pub const MIN_SLICE_SEPARATE_LOAD: Duration = Duration::from_millis(100);
/// Why a slice is too short to measure. What makes a slice valid has this one home
/// ([`slice_problem`]): the file's `slice`, the slices a duration is cut into, and the
/// default design (which `check` and `bisect` choose after parsing) all ask it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SliceProblem {
    /// Shorter than [`MIN_SLICE`]: mostly lead-in and scheduling.
    MostlyLeadIn,
    /// With a separate load host, shorter than [`MIN_SLICE_SEPARATE_LOAD`]: each slice is a
    /// load run of its own on new connections, so mostly connection set-up.
    MostlyConnectionSetUp,
}

impl SliceProblem {
    /// The shortest slice that has no such problem.
    pub fn minimum(self) -> Duration {
        match self {
            SliceProblem::MostlyLeadIn => MIN_SLICE,
            SliceProblem::MostlyConnectionSetUp => MIN_SLICE_SEPARATE_LOAD,
        }
    }
}

/// What is wrong with slices of `slice`, loaded from a separate load host when
/// `separate_load`; None for a slice that measures the server.
pub fn slice_problem(slice: Duration, separate_load: bool) -> Option<SliceProblem> {
    if slice < MIN_SLICE {
        Some(SliceProblem::MostlyLeadIn)
    } else if separate_load && slice < MIN_SLICE_SEPARATE_LOAD {
        Some(SliceProblem::MostlyConnectionSetUp)
    } else {
        None
    }
}

/// The shortest lead-in: the previous server's last requests complete in it, and this
/// one's queue fills (a few requests of a few milliseconds each).
pub const MIN_LEAD_IN: Duration = Duration::from_millis(5);

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "design", rename_all = "lowercase")]
pub enum Design {
    #[default]
    Blocks,
    Interleaved {
        /// How long the load stays on one server before it moves to the next.
        #[serde(with = "humantime_serde")]
        slice: Duration,
        /// Rounds per block: in each, every configuration gets one slice.
        rounds: u32,
    },
    #[serde(rename = "co-scheduled")]
    CoScheduled {
        /// How long each window of load on all the servers at once lasts.
        #[serde(with = "humantime_serde")]
        slice: Duration,
        /// Windows per block.
        rounds: u32,
    },
}

impl Design {
    /// "blocks", "interleaved: 10 rounds of 1s slices per block", or "co-scheduled: 10
    /// windows of 1s per block, every server loaded at once".
    pub fn describe(&self) -> String {
        let plural = |n: u32| if n == 1 { "" } else { "s" };
        match self {
            Design::Blocks => "blocks".into(),
            Design::Interleaved { slice, rounds } => format!(
                "interleaved: {rounds} round{} of {} slices per block",
                plural(*rounds),
                humantime::format_duration(*slice)
            ),
            Design::CoScheduled { slice, rounds } => format!(
                "co-scheduled: {rounds} window{} of {} per block, every server loaded at once",
                plural(*rounds),
                humantime::format_duration(*slice)
            ),
        }
    }

    /// The slice and the rounds of the designs that keep every server of a block up
    /// together (interleaved and co-scheduled).
    pub fn slicing(&self) -> Option<(Duration, u32)> {
        match *self {
            Design::Blocks => None,
            Design::Interleaved { slice, rounds } | Design::CoScheduled { slice, rounds } => {
                Some((slice, rounds))
            }
        }
    }

    /// The measured time of each configuration in a block, when sliced.
    pub fn measured_per_configuration(&self) -> Option<Duration> {
        self.slicing().map(|(slice, rounds)| slice * rounds)
    }

    /// The block's time under load that falls to each of `configurations`, lead-ins
    /// included, when sliced: co-scheduled configurations share their windows.
    pub fn loaded_per_configuration(&self, configurations: usize) -> Option<Duration> {
        let loaded = self
            .slicing()
            .map(|(slice, rounds)| (slice + lead_in(slice)) * rounds)?;
        Some(match self {
            Design::CoScheduled { .. } => loaded / configurations.max(1) as u32,
            _ => loaded,
        })
    }
}

/// The slice when none is written: [`DEFAULT_SLICE`] for an interleaved design on held-open
/// connections, [`DEFAULT_LONG_SLICE`] for co-scheduled windows and for slices run from a
/// separate load host.
pub fn default_slice(co_scheduled: bool, separate_load: bool) -> Duration {
    if co_scheduled || separate_load {
        DEFAULT_LONG_SLICE
    } else {
        DEFAULT_SLICE
    }
}

/// The slice and the rounds of a sliced design that measures each configuration for
/// `duration` per block, from what the file wrote: both written, they are used; a slice
/// alone gives as many rounds as fill the duration; rounds alone get `default_slice`; and
/// neither cuts the duration into equal slices of at most `default_slice`, so each
/// configuration is measured for exactly its duration.
pub fn slicing_for(
    duration: Duration,
    slice: Option<Duration>,
    rounds: Option<u32>,
    default_slice: Duration,
) -> (Duration, u32) {
    let rounds_to_fill = |slice: Duration| {
        let n = duration.as_nanos().div_ceil(slice.as_nanos().max(1));
        n.clamp(1, u128::from(u32::MAX)) as u32
    };
    match (slice, rounds) {
        (Some(slice), Some(rounds)) => (slice, rounds),
        (Some(slice), None) => (slice, rounds_to_fill(slice)),
        (None, Some(rounds)) => (default_slice, rounds),
        (None, None) => {
            let rounds = rounds_to_fill(default_slice);
            (duration / rounds, rounds)
        }
    }
}

/// The unrecorded start of every slice: the load's connections are opened and the server's
/// queue fills before the slice's recorded window (and its CPU reading) begins, so no
/// configuration's slices are charged for a start from idle, nor for the previous server's
/// last requests. A tenth of the slice, and at least [`MIN_LEAD_IN`].
pub fn lead_in(slice: Duration) -> Duration {
    (slice / 10).max(MIN_LEAD_IN)
}

/// The load's seed in round `round`: every configuration's slice of a round replays the
/// same request sequence, and the rounds differ.
pub fn slice_seed(seed: u64, round: u32) -> u64 {
    seed.wrapping_add(u64::from(round).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// The order of the configurations in round `round` of block `block`: a shuffle drawn from
/// the run's seed, the block and the round (the schedule's generator), so a rerun of a block
/// after an interruption alternates in the same order.
pub fn round_order(configurations: usize, seed: u64, block: u32, round: u32) -> Vec<usize> {
    // A block's shuffle of the schedule with a seed of its own per round.
    let round_seed = seed ^ (u64::from(round) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    crate::schedule::one_block(
        configurations,
        block,
        crate::schedule::Order::Random,
        round_seed,
        0,
    )
    .into_iter()
    .map(|t| t.config_id)
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_round_runs_every_configuration_once_in_orders_that_vary() {
        let mut orders = std::collections::BTreeSet::new();
        for round in 0..20 {
            let order = round_order(3, 7, 2, round);
            let mut sorted = order.clone();
            sorted.sort();
            assert_eq!(sorted, [0, 1, 2]);
            orders.insert(order);
        }
        // 20 rounds of 3 configurations: all 6 orders appear (a fixed order would be 1).
        assert_eq!(orders.len(), 6, "{orders:?}");
        assert_eq!(round_order(3, 7, 2, 5), round_order(3, 7, 2, 5), "seeded");
        assert_ne!(
            (0..8).map(|r| round_order(4, 7, 0, r)).collect::<Vec<_>>(),
            (0..8).map(|r| round_order(4, 7, 1, r)).collect::<Vec<_>>(),
            "blocks differ"
        );
    }

    #[test]
    fn the_design_is_stored_as_tagged_json() {
        let d = Design::Interleaved {
            slice: Duration::from_millis(500),
            rounds: 8,
        };
        let json = serde_json::to_string(&d).unwrap();
        assert_eq!(
            json,
            r#"{"design":"interleaved","slice":"500ms","rounds":8}"#
        );
        assert_eq!(serde_json::from_str::<Design>(&json).unwrap(), d);
        assert_eq!(
            serde_json::to_string(&Design::Blocks).unwrap(),
            r#"{"design":"blocks"}"#
        );
        assert_eq!(
            d.describe(),
            "interleaved: 8 rounds of 500ms slices per block"
        );
        let c = Design::CoScheduled {
            slice: Duration::from_secs(2),
            rounds: 1,
        };
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(json, r#"{"design":"co-scheduled","slice":"2s","rounds":1}"#);
        assert_eq!(serde_json::from_str::<Design>(&json).unwrap(), c);
        assert_eq!(
            c.describe(),
            "co-scheduled: 1 window of 2s per block, every server loaded at once"
        );
        // Two configurations share each 2.2 s window (lead-in included).
        assert_eq!(
            c.loaded_per_configuration(2),
            Some(Duration::from_millis(1100))
        );
        assert_eq!(
            d.loaded_per_configuration(2),
            Some(Duration::from_millis(4400))
        );
    }
}
