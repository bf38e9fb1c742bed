//! Scenario runs: each cohort's steps over its valid trials, for the report's step table:
//! requests and failures summed, and the medians over trials of each step's p50 and p99.

use std::collections::BTreeMap;

use results::TrialStatus;

use crate::input::TrialData;
use crate::model::CohortStep;

pub(super) fn scenario_steps(
    order: &[String],
    members: &BTreeMap<String, Vec<&TrialData>>,
) -> Vec<CohortStep> {
    let mut out = Vec::new();
    for cohort in order {
        let valid: Vec<&TrialData> = members[cohort]
            .iter()
            .copied()
            .filter(|t| t.status == TrialStatus::Valid && !t.steps.is_empty())
            .collect();
        // Steps in the order of the scenario file, as the first trial lists them.
        let Some(first) = valid.first() else { continue };
        for (i, named) in first.steps.iter().enumerate() {
            let points: Vec<_> = valid
                .iter()
                .filter_map(|t| t.steps.get(i))
                .filter(|p| p.scenario == named.scenario && p.step == named.step)
                .collect();
            let median = |f: fn(&crate::input::StepPoint) -> f64| {
                let values: Vec<f64> = points.iter().map(|p| f(p)).filter(|v| *v > 0.0).collect();
                stats::summary::median(&values)
            };
            out.push(CohortStep {
                cohort: cohort.clone(),
                scenario: named.scenario.clone(),
                step: named.step.clone(),
                trials: points.len(),
                requests: points.iter().map(|p| p.requests).sum(),
                failures: points.iter().map(|p| p.failures).sum(),
                p50_us: median(|p| p.p50_us),
                p99_us: median(|p| p.p99_us),
            });
        }
    }
    out
}
