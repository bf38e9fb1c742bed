//! rubyrace's statistics: pure functions, no I/O, no knowledge of experiments.
//!
//! - `summary`: n, mean, standard deviation, coefficient of variation, min, max, p10/p50/p90.
//! - `ranktest`: Wilcoxon signed-rank (paired) and Mann–Whitney U (unpaired) tests, and the
//!   smallest p-value a sample of a given size can reach at all.
//! - `ci`: confidence intervals of ratios: paired (per-block log ratios, Student's t) and
//!   unpaired (studentized bootstrap), and of differences of reciprocal rates (overhead per
//!   request).
//! - `advice`: how many blocks or trials a target precision needs, and how many any
//!   significance needs.
//! - `ttest`: Student's one-sample t-test (paired log ratios of profile frames).
//! - `trend`: drift over time (Mann–Kendall, Theil–Sen slope).
//! - `serial`: the shape of a series of per-block log ratios: trend and lag-1 dependence,
//!   the interval of a dependent mean, skewness.
//! - `outliers`: Tukey's fences, and robust fences calibrated to a false-alarm level.
//! - `rng`: the seeded generator the bootstrap draws from, so reports are reproducible.
//! - `dist`: normal, Student's t and chi-square distribution functions.
//! - `changepoint`: change points in a series of estimates with their own precision
//!   (E-divisive means for the candidates, a precision-weighted test for each).
//!
//! Why the distribution functions are written here instead of taken from `statrs`: only
//! six are needed (normal CDF/quantile, t CDF/quantile for whole degrees of freedom,
//! chi-square CDF/quantile for the precision advisor's bounds on a spread); for whole
//! degrees of freedom the t CDF has an exact finite series, and the chi-square CDF is the
//! regularized incomplete gamma function (a series and a continued fraction), so ~300
//! lines do them to ~1e-12 relative, checked against SciPy in `dist`'s tests. `statrs`
//! would pull in a linear-algebra dependency tree (nalgebra) for a shared workspace whose
//! lock file other crates edit, and its accuracy in the far tails (p-values like 1e-7)
//! would still need the same tests.
#![forbid(unsafe_code)]

pub mod advice;
pub mod changepoint;
pub mod ci;
pub mod dist;
pub mod outliers;
pub mod ranktest;
pub mod rng;
pub mod serial;
pub mod summary;
pub mod trend;
pub mod ttest;

pub use advice::{blocks_for_log_half_width, min_blocks_for_signed_rank, min_trials_for_rank_sum};
pub use ci::{
    equal_weight_strata, paired_ratio, paired_reciprocal_difference, simultaneous_confidence,
    unpaired_ratio, unpaired_reciprocal_difference, RatioCi, Stratum, BOOTSTRAP, PAIRED_T_LOG,
};
pub use outliers::{robust_outliers, tukey_outliers};
pub use ranktest::{
    kruskal_wallis, mann_whitney_min_p, mann_whitney_u, wilcoxon_min_p, wilcoxon_signed_rank,
    TestResult,
};
pub use rng::SeededRng;
pub use summary::{median, quantile, Summary};
pub use trend::{mann_kendall, sen_slope};

#[cfg(test)]
mod coverage;
