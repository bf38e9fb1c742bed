//! How quiet the machine was while each cohort was measured, and which trials were measured
//! in noise. A difference between cohorts means little when one of them ran while another
//! process took a tenth of a CPU or the hypervisor stole time: the reader has to be told,
//! trial by trial. The figures are the trials' noise records (`sys::noise`); the thresholds
//! of "in noise" are `sys::noise::NOISY_OTHER_PERCENT` and `NOISY_STEAL_PERCENT`.

use std::fmt::Write as _;

use stats::median;
use sys::noise::{NOISY_OTHER_PERCENT, NOISY_STEAL_PERCENT};

use results::TrialStatus;

use crate::input::TrialData;
use crate::model::{CohortNoise, Report, Warning};

/// The noise of a cohort's measured trials (valid and invalid: an invalid trial's noise is
/// still a fact about the machine); None when none of them has a noise record.
pub fn cohort_noise(trials: &[&TrialData]) -> Option<CohortNoise> {
    let recorded: Vec<&TrialData> = trials
        .iter()
        .copied()
        .filter(|t| t.status != TrialStatus::Failed && t.noise.is_some())
        .collect();
    // The median of a figure over the trials that have it, and the trials that match.
    let median_of = |f: &dyn Fn(&TrialData) -> Option<f64>| -> Option<f64> {
        median(&recorded.iter().filter_map(|t| f(t)).collect::<Vec<_>>())
    };
    let named = |f: &dyn Fn(&TrialData) -> bool| -> Vec<String> {
        recorded
            .iter()
            .filter(|t| f(t))
            .map(|t| format!("{}:{}", t.source, t.trial_id))
            .collect()
    };
    Some(CohortNoise {
        trials: recorded.len(),
        other_cpu_percent: median_of(&|t| t.noise.as_ref().map(|n| n.other_percent))?,
        steal_percent: median_of(&|t| t.noise.as_ref().map(|n| n.steal_percent))?,
        max_other_cpu_percent: recorded
            .iter()
            .filter_map(|t| t.noise.as_ref().map(|n| n.other_percent))
            .fold(0.0, f64::max),
        load_average_end: median_of(&|t| t.noise.as_ref().and_then(|n| n.load_average_end)),
        noisy: named(&|t| t.noise.as_ref().is_some_and(|n| n.is_noisy())),
        quiet_wait_s: median_of(&|t| t.quiet.as_ref().map(|q| q.waited_s)),
        not_quiet: named(&|t| t.quiet.as_ref().is_some_and(|q| !q.quiet)),
        cpus: recorded
            .iter()
            .find_map(|t| t.pinning.as_ref())
            .map(|p| format!("{} / {}", p.server_cpus, p.load_cpus)),
        set_aside: recorded.iter().map(|t| t.noisy_attempts).sum(),
    })
}

/// A `not-quiet` warning for a cohort with trials that started on a busy machine after the
/// longest wait `quiet` allows, and a `noisy-repeated` note for one whose trials were run
/// again for noise (the noisy attempts are left out of the statistics).
pub fn condition_warnings(cohort: &str, noise: &CohortNoise) -> Vec<Warning> {
    let mut warnings = Vec::new();
    if !noise.not_quiet.is_empty() {
        warnings.push(Warning {
            kind: "not-quiet".into(),
            cohort: Some(cohort.to_string()),
            message: format!(
                "{} trial(s) started on a busy machine after the longest wait `quiet` allows: {}",
                noise.not_quiet.len(),
                noise.not_quiet.join(", ")
            ),
        });
    }
    if noise.set_aside > 0 {
        warnings.push(Warning {
            kind: "noisy-repeated".into(),
            cohort: Some(cohort.to_string()),
            message: format!(
                "{} attempt(s) were measured in noise and run again (repeat_noisy); they are stored apart (`rubyrace export --json`, noisy_attempts) and left out of the statistics",
                noise.set_aside
            ),
        });
    }
    warnings
}

/// A `noisy-trials` warning for a cohort with trials measured in noise, naming each with
/// its figures.
pub fn noisy_warning(cohort: &str, trials: &[&TrialData]) -> Option<Warning> {
    let noisy: Vec<String> = trials
        .iter()
        .filter(|t| t.status != TrialStatus::Failed)
        .filter_map(|t| {
            let n = t.noise.as_ref().filter(|n| n.is_noisy())?;
            Some(format!(
                "{}:{} (other processes {:.0}% of a CPU, steal {:.1}%)",
                t.source, t.trial_id, n.other_percent, n.steal_percent
            ))
        })
        .collect();
    if noisy.is_empty() {
        return None;
    }
    Some(Warning {
        kind: "noisy-trials".into(),
        cohort: Some(cohort.to_string()),
        message: format!(
            "{} trial(s) measured in noise (other processes above {NOISY_OTHER_PERCENT}% of a CPU or steal above {NOISY_STEAL_PERCENT}%, averaged over the measured phase): {}; kept in the statistics, compare with care",
            noisy.len(),
            noisy.join(", ")
        ),
    })
}

/// Interleaved and co-scheduled runs: every configuration of a block is measured in the
/// same seconds and shares the block's noise record, so one `noisy-trials` warning names the
/// noisy blocks, where one per cohort repeated the same blocks for every configuration.
pub fn noisy_blocks_warning(trials: &[&TrialData]) -> Option<Warning> {
    let mut blocks: std::collections::BTreeMap<(usize, u32), (usize, f64, f64)> =
        std::collections::BTreeMap::new();
    for t in trials.iter().filter(|t| t.status != TrialStatus::Failed) {
        if let Some(n) = t.noise.as_ref().filter(|n| n.is_noisy()) {
            let entry =
                blocks
                    .entry((t.source, t.block))
                    .or_insert((0, n.other_percent, n.steal_percent));
            entry.0 += 1;
        }
    }
    if blocks.is_empty() {
        return None;
    }
    let listed: Vec<String> = blocks
        .iter()
        .map(|((source, block), (count, other, steal))| {
            format!(
                "{source}:block {} ({}; other processes {other:.0}% of a CPU, steal {steal:.1}%)",
                block + 1,
                units::count(*count, "trial")
            )
        })
        .collect();
    Some(Warning {
        kind: "noisy-trials".into(),
        cohort: None,
        message: format!(
            "{} block(s) measured in noise (other processes above {NOISY_OTHER_PERCENT}% of a CPU or steal above {NOISY_STEAL_PERCENT}%, averaged over the measured phase): {}; every configuration of a block shared it, so their ratios suffer less than each figure; kept in the statistics, compare with care",
            blocks.len(),
            listed.join(", ")
        ),
    })
}

/// The noise table: per cohort the medians of other processes' CPU and steal, the busiest
/// trial, the load average and how many trials were in noise. None when no cohort has noise
/// records (script workloads, old results).
pub fn noise_table(report: &Report) -> Option<(Vec<&'static str>, Vec<Vec<String>>)> {
    if report.cohorts.iter().all(|c| c.noise.is_none()) {
        return None;
    }
    let headers = vec![
        "cohort",
        "other CPU",
        "steal",
        "max other CPU",
        "load (1 min)",
        "in noise",
        "quiet wait",
        "set aside",
        "CPUs server / load",
    ];
    let rows = report
        .cohorts
        .iter()
        .map(|c| match &c.noise {
            None => std::iter::once(c.name.clone())
                .chain(std::iter::repeat_n("-".to_string(), headers.len() - 1))
                .collect(),
            Some(n) => vec![
                c.name.clone(),
                format!("{:.1}%", n.other_cpu_percent),
                format!("{:.1}%", n.steal_percent),
                format!("{:.1}%", n.max_other_cpu_percent),
                n.load_average_end
                    .map(|l| format!("{l:.2}"))
                    .unwrap_or_else(|| "-".into()),
                format!("{} of {}", n.noisy.len(), n.trials),
                n.quiet_wait_s
                    .map(|w| format!("{w:.1} s"))
                    .unwrap_or_else(|| "-".into()),
                n.set_aside.to_string(),
                n.cpus.clone().unwrap_or_else(|| "-".into()),
            ],
        })
        .collect();
    Some((headers, rows))
}

pub const NOISE_TITLE: &str = "Machine noise over the measured phases (medians over trials; CPU in % of one CPU; in noise: other processes > 10% or steal > 1%; quiet wait: before each trial, with quiet; set aside: noisy attempts run again, with repeat_noisy; CPUs: with cpus, checked in every server process):";

/// The noise table as Markdown, or nothing.
pub fn noise_markdown(report: &Report, escape: fn(&str) -> String) -> String {
    let mut out = String::new();
    if let Some((headers, rows)) = noise_table(report) {
        let _ = writeln!(out, "\n{NOISE_TITLE}\n");
        let _ = writeln!(out, "| {} |", headers.join(" | "));
        let _ = writeln!(
            out,
            "|{}",
            (0..headers.len())
                .map(|i| if i == 0 { " --- |" } else { " ---: |" })
                .collect::<String>()
        );
        for row in rows {
            let cells: Vec<String> = row.iter().map(|c| escape(c)).collect();
            let _ = writeln!(out, "| {} |", cells.join(" | "));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sys::noise::NoiseRecord;

    fn trial(id: usize, status: TrialStatus, other: f64, steal: f64) -> TrialData {
        TrialData {
            trial_id: id,
            status,
            noise: Some(NoiseRecord {
                other_percent: other,
                steal_percent: steal,
                load_average_end: Some(1.0),
                ..NoiseRecord::default()
            }),
            ..TrialData::default()
        }
    }

    #[test]
    fn medians_and_noisy_trials_of_a_cohort() {
        let ts = [
            trial(0, TrialStatus::Valid, 2.0, 0.0),
            trial(1, TrialStatus::Valid, 55.0, 0.0),
            trial(2, TrialStatus::Invalid, 4.0, 3.0),
            trial(3, TrialStatus::Failed, 90.0, 9.0),
            TrialData {
                trial_id: 4,
                status: TrialStatus::Valid,
                ..TrialData::default()
            },
        ];
        let refs: Vec<&TrialData> = ts.iter().collect();
        let n = cohort_noise(&refs).unwrap();
        assert_eq!(n.trials, 3);
        assert_eq!(n.other_cpu_percent, 4.0);
        assert_eq!(n.steal_percent, 0.0);
        assert_eq!(n.max_other_cpu_percent, 55.0);
        assert_eq!(n.noisy, vec!["0:1", "0:2"]);
        let w = noisy_warning("c", &refs).unwrap();
        assert_eq!(w.kind, "noisy-trials");
        assert!(
            w.message.contains("0:1 (other processes 55%"),
            "{}",
            w.message
        );
        assert!(
            w.message
                .contains("0:2 (other processes 4% of a CPU, steal 3.0%)"),
            "{}",
            w.message
        );
        assert!(!w.message.contains("0:3"), "{}", w.message);
    }

    #[test]
    fn quiet_or_unrecorded_cohorts_have_no_warning() {
        let quiet = [
            trial(0, TrialStatus::Valid, 9.9, 1.0),
            trial(1, TrialStatus::Valid, 0.0, 0.0),
        ];
        let refs: Vec<&TrialData> = quiet.iter().collect();
        assert!(noisy_warning("c", &refs).is_none());
        let old = [TrialData::default()];
        let refs: Vec<&TrialData> = old.iter().collect();
        assert!(cohort_noise(&refs).is_none());
        assert!(noisy_warning("c", &refs).is_none());
    }
}
