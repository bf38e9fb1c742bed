//! `--overhead A B`: the time per request cohort A adds to cohort B (the difference of
//! their reciprocal throughputs), paired by block when the blocks pair up.

use super::compare::pairs;
use super::metrics::values;
use super::{BOOTSTRAP_SEED, RESAMPLES};
use crate::input::TrialData;
use crate::model::Overhead;

pub(super) fn overhead(
    a: &str,
    va: &[&TrialData],
    b: &str,
    vb: &[&TrialData],
    confidence: f64,
) -> Option<Overhead> {
    let f: fn(&TrialData) -> Option<f64> = |t| t.requests_per_s;
    let pairs = pairs(va, vb, f);
    let (method, n, (est, lo, hi)) = if pairs.a.len() >= 2 {
        (
            "paired",
            pairs.a.len(),
            stats::ci::paired_reciprocal_difference(&pairs.a, &pairs.b, confidence)?,
        )
    } else {
        let xa = values(va, f);
        let xb = values(vb, f);
        (
            "unpaired",
            xa.len().min(xb.len()),
            stats::ci::unpaired_reciprocal_difference(
                &xa,
                &xb,
                confidence,
                RESAMPLES,
                BOOTSTRAP_SEED,
            )?,
        )
    };
    Some(Overhead {
        cohort: a.into(),
        baseline: b.into(),
        method: method.into(),
        n,
        us_per_request: est * 1e6,
        ci_low: lo * 1e6,
        ci_high: hi * 1e6,
    })
}
