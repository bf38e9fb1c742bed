//! rubyrace's statistics: pure functions, no I/O, no knowledge of experiments.
//!
//! - `summary`: n, mean, standard deviation, coefficient of variation, min, max, p10/p50/p90.
//! - `ranktest`: Wilcoxon signed-rank (paired) and Mann–Whitney U (unpaired) tests.
//! - `ci`: confidence intervals of ratios: paired (per-block log ratios) and unpaired
//!   (bootstrap), and of differences of reciprocal rates (overhead per request).
//! - `advice`: how many blocks or trials a target precision needs.
//! - `trend`: drift over time (Mann–Kendall).
//! - `outliers`: Tukey's fences.
//! - `rng`: the seeded generator the bootstrap draws from, so reports are reproducible.

pub mod summary;

pub use summary::{quantile, Summary};
