//! The warnings drawn from several cohorts, comparisons or sources at once; the warnings
//! about one cohort alone are made with its summaries (`cohort`).

use std::collections::{BTreeMap, BTreeSet};

use results::TrialStatus;

use crate::input::{SourceData, TrialData};
use crate::model::{Cohort, Comparison, Warning};

/// Cohorts of interleaved trials whose servers' CPU outside their recorded windows, as a
/// share of the CPU inside them, is more than this apart: the CPU-per-request ratio leaves
/// out about that much more work of one than of the other. The statistics audit found a
/// 2-thread server at 1.9–3.4% and a 1-thread one at 0–1.5%, under the absolute threshold
/// this replaced (10 ms of CPU per second), moving the ratio from 0.810 to 0.826.
const IDLE_SHARE_APART: f64 = 0.01;

/// Interleaved trials leave out what a server does outside its recorded windows: when the
/// cohorts' servers did different amounts of it, relative to the work they were charged
/// for, their figures per request leave out different amounts of work, which a blocks
/// design would have charged.
pub(super) fn idle_cpu_warnings(cohorts: &[Cohort], warnings: &mut Vec<Warning>) {
    let shares: Vec<(&str, f64, Option<f64>)> = cohorts
        .iter()
        .filter_map(|c| {
            Some((
                c.name.as_str(),
                c.cpu.idle_share.as_ref()?.p50,
                c.cpu.idle_per_s.as_ref().map(|s| s.p50),
            ))
        })
        .collect();
    let (Some(low), Some(high)) = (
        shares.iter().map(|s| s.1).min_by(f64::total_cmp),
        shares.iter().map(|s| s.1).max_by(f64::total_cmp),
    ) else {
        return;
    };
    if high - low <= IDLE_SHARE_APART {
        return;
    }
    let listed: Vec<String> = shares
        .iter()
        .map(|(name, share, rate)| {
            let rate = rate
                .map(|r| format!(", {}", crate::format::cpu_rate(r)))
                .unwrap_or_default();
            format!("{name} {:.1}%{rate}", 100.0 * share)
        })
        .collect();
    warnings.push(Warning {
        kind: "idle-cpu-differs".into(),
        cohort: None,
        message: format!(
            "outside their recorded slices and those slices' lead-ins (which runs before 2026-11-27 counted with them), the servers of these interleaved trials used different shares of the CPU they were charged for ({}): that work is in neither throughput nor CPU per request, and a blocks design would have charged it; cpu_per_request_with_idle charges it",
            listed.join("; ")
        ),
    });
}

/// The share of a held-open interleaved run's recorded time in which the previous slice's
/// server was still answering, above which the report warns. On the demo (four Rails
/// servers, 50 ms slices, lead-ins as long as the previous server's 99th percentile
/// latency) 8% of the slices had such a tail, of 2.9 ms (median): about 0.5% of the
/// recorded time (docs/PRECISION.md).
const TAIL_TIME_WARN: f64 = 0.01;

/// Where the slices of held-open interleaved blocks met the previous slice's tail: how
/// many slices followed another, by how much each previous server's last requests ran
/// past the lead-in into this slice's recorded window (seconds, only those that did), and
/// the recorded time of the slices that followed another.
pub(super) fn slice_tails(trials: &[&TrialData]) -> (usize, Vec<f64>, f64) {
    let mut blocks: BTreeMap<(usize, u32), Vec<crate::input::HeldSlice>> = BTreeMap::new();
    for t in trials {
        blocks
            .entry((t.source, t.block))
            .or_default()
            .extend(t.held_slices.iter().copied());
    }
    let mut followed = 0;
    let mut past = Vec::new();
    let mut recorded = 0.0;
    for slices in blocks.values_mut() {
        slices.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
        for pair in slices.windows(2) {
            followed += 1;
            recorded += pair[1].recorded_s;
            if pair[0].drain_s > pair[1].lead_in_s {
                past.push(pair[0].drain_s - pair[1].lead_in_s);
            }
        }
    }
    (followed, past, recorded)
}

/// Interleaved slices follow each other on the same CPUs: where the previous server's last
/// requests ran past the next slice's lead-in, both servers were busy in the start of
/// its recorded window, which pulls a throughput ratio towards 1. Warns when that was
/// more than [`TAIL_TIME_WARN`] of the recorded time (co-scheduled windows share their
/// seconds anyway and are not looked at).
pub(super) fn slice_tail_warnings(sources: &[SourceData], warnings: &mut Vec<Warning>) {
    for s in sources
        .iter()
        .filter(|s| matches!(s.design, experiment::design::Design::Interleaved { .. }))
    {
        let trials: Vec<&TrialData> = s.trials.iter().collect();
        let (followed, mut past, recorded) = slice_tails(&trials);
        let shared: f64 = past.iter().sum();
        if followed == 0 || recorded <= 0.0 || shared <= TAIL_TIME_WARN * recorded {
            continue;
        }
        past.sort_by(f64::total_cmp);
        let median = past[past.len() / 2];
        let max = past[past.len() - 1];
        warnings.push(Warning {
            kind: "slice-tails".into(),
            cohort: None,
            message: format!(
                "in {} of {} slices of {}, the previous server's last requests were still being answered after the slice's recorded window opened (by a median of {:.1} ms, at most {:.1} ms): {:.1}% of the recorded time, in which both servers shared the CPU, which pulls a throughput ratio towards 1; longer slices make that a smaller part of each window (the lead-in already lasts the previous server's 99th percentile latency in its warmup)",
                past.len(),
                followed,
                s.dir.display(),
                1000.0 * median,
                1000.0 * max,
                100.0 * shared / recorded
            ),
        });
    }
}

/// Says which runs are incomplete (interrupted, or still running), how much is missing, and
/// how to finish them: the cohorts shown are only what exists, and the baseline may not be
/// the configuration the experiment meant.
pub(super) fn incomplete_warnings(
    sources: &[SourceData],
    baseline: &str,
    warnings: &mut Vec<Warning>,
) {
    for s in sources.iter().filter(|s| !s.unfinished.is_empty()) {
        let stored = s.trials.len();
        let missing: Vec<String> = s
            .unfinished
            .iter()
            .map(|(label, n, planned)| format!("{label} {n} of {planned}"))
            .collect();
        let absent: Vec<&str> = s
            .unfinished
            .iter()
            .filter(|(_, n, _)| *n == 0)
            .map(|(label, _, _)| label.as_str())
            .collect();
        let absent = if absent.is_empty() {
            String::new()
        } else {
            format!(
                "; {} {} no trial yet and {} not in this report (the baseline is {baseline})",
                absent.join(", "),
                if absent.len() == 1 { "has" } else { "have" },
                if absent.len() == 1 { "is" } else { "are" },
            )
        };
        let message = match &s.writer {
            Some(writer) => format!(
                "a run ({writer}) is writing {}: {stored} of {} planned trials are stored so far ({}){absent}; this report shows the run as it stands",
                s.dir.display(),
                s.scheduled,
                missing.join(", "),
            ),
            None => format!(
                "{} is incomplete: {stored} of {} planned trials are stored ({}){absent}; finish it with `{}`",
                s.dir.display(),
                s.scheduled,
                missing.join(", "),
                s.resume_command
            ),
        };
        warnings.push(Warning {
            kind: "incomplete-run".into(),
            cohort: None,
            message,
        });
    }
}

/// Names the valid HTTP trials whose latency histogram is missing or damaged: the merged
/// percentiles of their cohort leave them out.
pub(super) fn latency_file_warnings(
    order: &[String],
    members: &BTreeMap<String, Vec<&TrialData>>,
    warnings: &mut Vec<Warning>,
) {
    for name in order {
        let damaged: Vec<&&TrialData> = members[name]
            .iter()
            .filter(|t| t.hlog_problem.is_some())
            .collect();
        let Some(first) = damaged.first() else {
            continue;
        };
        let valid = members[name]
            .iter()
            .filter(|t| t.status == TrialStatus::Valid && t.requests_per_s.is_some())
            .count();
        let ids: Vec<String> = damaged.iter().map(|t| t.trial_id.to_string()).collect();
        warnings.push(Warning {
            kind: "latency-files".into(),
            cohort: Some(name.clone()),
            message: format!(
                "the latency histograms of trial{} {} cannot be read ({}{}): the merged latency percentiles (p50 to max, the latency curve and chart) use {} of {valid} trials; per-trial p50/p99, their comparisons and every other figure come from the database and are unaffected",
                if ids.len() == 1 { "" } else { "s" },
                ids.join(", "),
                first.hlog_problem.as_deref().unwrap_or(""),
                if ids.len() > 1 { ", ..." } else { "" },
                valid - damaged.len(),
            ),
        });
    }
}

/// `rubyrace compare A B`: the two runs should differ in one thing. Names every setting and
/// recorded value in which the sides differ, so a Rails app against a Rack app, or four
/// connections against one, is never read as the effect of one change.
pub(super) fn differing_sides_warnings(
    order: &[String],
    members: &BTreeMap<String, Vec<&TrialData>>,
    warnings: &mut Vec<Warning>,
) {
    let [a, b] = order else { return };
    // Values that differ between any two trials by design, not between setups.
    let own = |k: &str| {
        k == "source" || k == "label" || k == "env.RUBYRACE_PROBE_DIR" || k.starts_with("gem.")
    };
    let values = |name: &String| {
        let mut v: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for t in &members[name] {
            for (k, x) in &t.keys {
                if !own(k) {
                    v.entry(k.as_str()).or_default().insert(x.as_str());
                }
            }
        }
        v
    };
    let (va, vb) = (values(a), values(b));
    let keys: BTreeSet<&str> = va.keys().chain(vb.keys()).copied().collect();
    let show = |v: Option<&BTreeSet<&str>>| match v {
        None => "unset".to_string(),
        Some(set) => set.iter().copied().collect::<Vec<_>>().join(" | "),
    };
    let differing: Vec<(&str, String, String)> = keys
        .into_iter()
        .filter(|k| va.get(k) != vb.get(k))
        .map(|k| (k, show(va.get(k)), show(vb.get(k))))
        .collect();
    // A matrix axis (`connections`) repeats the setting it sets (`settings.load.connections`),
    // which both sides have whether or not it was an axis: one difference, named once, by
    // the setting.
    let differing: Vec<String> = differing
        .iter()
        .filter(|(k, _, _)| {
            !differing
                .iter()
                .any(|(other, _, _)| other != k && other.ends_with(&format!(".{k}")))
        })
        .map(|(k, sa, sb)| format!("{k} ({sa} vs {sb})"))
        .collect();
    if !differing.is_empty() {
        warnings.push(Warning {
            kind: "sides-differ".into(),
            cohort: Some(b.clone()),
            message: format!(
                "the compared runs differ in {} setting{}: {}; the ratio is the effect of all of them together",
                differing.len(),
                if differing.len() == 1 { "" } else { "s" },
                differing.join(", ")
            ),
        });
    }
}

/// Says when a comparison combined several configurations per block, how they were
/// paired, and which had no partner.
pub(super) fn pooled_warnings(comparisons: &[Comparison], warnings: &mut Vec<Warning>) {
    let mut seen = BTreeSet::new();
    for c in comparisons
        .iter()
        .filter(|c| c.configs_per_block > 1 || !c.unpartnered.is_empty())
    {
        if !seen.insert(c.cohort.clone()) {
            continue;
        }
        let left_out = if c.unpartnered.is_empty() {
            String::new()
        } else {
            format!(
                "; without a partner on the other side and left out: {}",
                c.unpartnered.join(", ")
            )
        };
        warnings.push(Warning {
            kind: "pooled-configurations".into(),
            cohort: Some(c.cohort.clone()),
            message: format!("{} and {} each hold up to {} configurations per block: configurations that agree on every other axis are compared with each other ({} such group{}), a block's ratio is the geometric mean of the groups' ratios, and only blocks where every group has all its configurations on both sides are paired ({} blocks){left_out}", c.cohort, c.baseline, c.configs_per_block, c.groups, if c.groups == 1 { "" } else { "s" }, c.n),
        });
    }
}

/// What simulations found the coverage of 95% intervals to be when the per-block log
/// ratios are this skewed (one side's stalls: normal noise and exponential slowdowns of a
/// share of one configuration's trials, 6 to 40 blocks, 20,000 data sets per setting,
/// docs/methodology.md).
fn coverage_for_skew(skewness: f64) -> &'static str {
    match skewness.abs() {
        s if s < 2.0 => "93–94%",
        s if s < 3.0 => "90–93%",
        _ => "88–92%",
    }
}

/// The shape of the per-block log ratios, which the paired interval assumes away: ratios
/// that trend or wander from block to block (their intervals are widened) and ratios
/// skewed by one side's stalls. One warning of each kind per cohort, naming the metrics.
pub(super) fn shape_warnings(
    comparisons: &[Comparison],
    main_metric: &str,
    warnings: &mut Vec<Warning>,
) {
    let mut cohorts: Vec<&str> = Vec::new();
    for c in comparisons {
        if !cohorts.contains(&c.cohort.as_str()) {
            cohorts.push(&c.cohort);
        }
    }
    for cohort in cohorts {
        let of: Vec<&Comparison> = comparisons.iter().filter(|c| c.cohort == cohort).collect();
        // The main metric first.
        let mut ordered = of.clone();
        ordered.sort_by_key(|c| c.metric != main_metric);
        let dependent: Vec<String> = ordered
            .iter()
            .filter(|c| c.drift_found)
            .map(|c| {
                format!(
                    "{} (lag-1 autocorrelation {:.2}, trend p={:.3}; {:.1} effective of {} blocks)",
                    c.metric,
                    c.lag1_autocorrelation.unwrap_or(0.0),
                    c.trend_p_value.unwrap_or(1.0),
                    c.effective_blocks.unwrap_or(c.n as f64),
                    c.n
                )
            })
            .collect();
        if let Some(c) = of.first().filter(|_| !dependent.is_empty()) {
            warnings.push(Warning {
                kind: "drift".into(),
                cohort: Some(cohort.to_string()),
                message: format!("the per-block ratios of {cohort} to {} drift or wander from block to block: {}; their intervals are widened for the dependence (an effective sample size, as every paired interval is) and doubled, and may still be too narrow, most with few blocks (docs/methodology.md gives the coverage): something changed one configuration against the other while the run went on", c.baseline, dependent.join(", ")),
            });
        }
        // Memory is not disturbed in stalls: its per-block ratios move by a few pages, and
        // their skew (the demo's USS: +2.3 on ratios within ±0.2%) says nothing of coverage.
        let memory = |c: &Comparison| {
            matches!(
                c.metric.as_str(),
                "pss_end" | "uss_end" | "worker_pss_end" | "worker_uss_end" | "max_rss"
            )
        };
        let skewed: Vec<&&Comparison> = ordered
            .iter()
            .filter(|c| c.skew_marked && !memory(c))
            .collect();
        if let Some(worst) = skewed.iter().max_by(|a, b| {
            let s = |c: &Comparison| c.skewness.unwrap_or(0.0).abs();
            s(a).total_cmp(&s(b))
        }) {
            let listed: Vec<String> = skewed
                .iter()
                .map(|c| format!("{} {:+.2}", c.metric, c.skewness.unwrap_or(0.0)))
                .collect();
            warnings.push(Warning {
                kind: "skewed-ratios".into(),
                cohort: Some(cohort.to_string()),
                message: format!("the per-block ratios of {cohort} to {} are skewed (skewness {}): one side was disturbed in some blocks only (stalls, pauses); intervals from ratios this skewed covered about {} of the truth in simulations, not 95%, and a short run misjudges the size of the effect: run more blocks, or find the stalls (an adaptive run of this experiment should set blocks = 40 or more: it can stop before any stall shows, and such runs covered only 71–84%)", worst.baseline, listed.join(", "), coverage_for_skew(worst.skewness.unwrap_or(0.0))),
            });
        }
    }
}

/// Names every cohort that holds configurations differing in settings, and how: a cohort
/// is read as one configuration, and `report A B` of two runs whose labels match but whose
/// settings do not (Puma 2×8 against 1×2) used to merge them without a word, as did
/// `compare A B` of runs of two configurations each.
pub(super) fn mixed_configurations_warnings(
    order: &[String],
    members: &BTreeMap<String, Vec<&TrialData>>,
    warnings: &mut Vec<Warning>,
) {
    // The configuration's own settings and Ruby; not the environment, which holds what
    // rubyrace sets itself (the probe's RUBYOPT, with this checkout's path), and whose
    // user-set variables are settings too (`settings.env`).
    let own = |k: &str| {
        !(k.starts_with("settings.") || k == "ruby") || k.starts_with("settings.load.urls")
    };
    for name in order {
        // Per configuration (run, config id): its setting values.
        let mut configs: BTreeMap<(usize, usize), BTreeMap<&str, &str>> = BTreeMap::new();
        for t in &members[name] {
            configs.entry((t.source, t.config_id)).or_insert_with(|| {
                t.keys
                    .iter()
                    .filter(|(k, _)| !own(k))
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect()
            });
        }
        if configs.len() < 2 {
            continue;
        }
        let keys: BTreeSet<&str> = configs.values().flat_map(|c| c.keys().copied()).collect();
        let differing: Vec<String> = keys
            .into_iter()
            .filter_map(|k| {
                let values: BTreeSet<&str> = configs
                    .values()
                    .map(|c| c.get(k).copied().unwrap_or("unset"))
                    .collect();
                (values.len() > 1).then(|| {
                    format!(
                        "{k} ({})",
                        values.into_iter().collect::<Vec<_>>().join(" | ")
                    )
                })
            })
            .collect();
        if differing.is_empty() {
            continue;
        }
        warnings.push(Warning {
            kind: "configurations-differ".into(),
            cohort: Some(name.clone()),
            message: format!(
                "{name} holds {} configurations that differ in {}: its figures pool them; group by what differs (--by) to see them apart",
                configs.len(),
                differing.join(", ")
            ),
        });
    }
}
