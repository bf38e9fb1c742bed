//! How the configurations of a block are measured against each other.
//!
//! - `blocks` (the default): one trial after another, each with a server of its own,
//!   started, warmed up, measured and stopped before the next starts. The trials of a
//!   block are minutes apart.
//! - `interleaved`: every configuration's server of the block is started and warmed up
//!   first; then the load alternates between them in short slices, in a new random order
//!   every round, so the configurations are measured in the same seconds and the machine's
//!   second-to-second swings fall on all of them alike. Each configuration still gives one
//!   trial per block (its slices summed: one boot, one sample), so the statistics across
//!   blocks are unchanged and never count a boot's slices as independent samples.

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub const DEFAULT_SLICE: Duration = Duration::from_secs(1);
pub const DEFAULT_ROUNDS: u32 = 10;
/// Slices shorter than this are mostly connection set-up and scheduling.
pub const MIN_SLICE: Duration = Duration::from_millis(100);

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
}

impl Design {
    /// "blocks", or "interleaved: 10 rounds of 1s slices".
    pub fn describe(&self) -> String {
        match self {
            Design::Blocks => "blocks".into(),
            Design::Interleaved { slice, rounds } => format!(
                "interleaved: {rounds} round{} of {} slices per block",
                if *rounds == 1 { "" } else { "s" },
                humantime::format_duration(*slice)
            ),
        }
    }

    /// The measured time of each configuration in a block, when interleaved.
    pub fn measured_per_configuration(&self) -> Option<Duration> {
        match self {
            Design::Blocks => None,
            Design::Interleaved { slice, rounds } => Some(*slice * *rounds),
        }
    }

    /// The time each configuration has the load in a block, lead-ins included, when
    /// interleaved.
    pub fn loaded_per_configuration(&self) -> Option<Duration> {
        match self {
            Design::Blocks => None,
            Design::Interleaved { slice, rounds } => Some((*slice + lead_in(*slice)) * *rounds),
        }
    }
}

/// The unrecorded start of every slice: the load's connections are opened and the server's
/// queue fills before the slice's recorded window (and its CPU reading) begins, so no
/// configuration's slices are charged for a start from idle. A tenth of the slice.
pub fn lead_in(slice: Duration) -> Duration {
    slice / 10
}

/// The load's seed in round `round`: every configuration's slice of a round replays the
/// same request sequence, and the rounds differ.
pub fn slice_seed(seed: u64, round: u32) -> u64 {
    seed.wrapping_add(u64::from(round).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// A rough wall time of one trial of a configuration, for estimates before anything ran:
/// for HTTP, the warmup, the measured time (the duration, or rounds × (slice + lead-in)
/// when interleaved) and about 3 s to start and stop the server; for a script, 2 s per run.
pub fn estimated_trial_time(s: &crate::experiment::ConfigSettings, design: &Design) -> Duration {
    match s.workload {
        crate::experiment::Workload::Http => {
            let measured = design.loaded_per_configuration().unwrap_or(s.load.duration);
            s.load.warmup + measured + Duration::from_secs(3)
        }
        crate::experiment::Workload::Script => {
            Duration::from_secs(2) * s.script.as_ref().map_or(1, |x| x.runs)
        }
    }
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
        crate::experiment::Order::Random,
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
    }
}
