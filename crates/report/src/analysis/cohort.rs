//! Cohorts: the name of a trial's cohort under the grouping keys, and one cohort's
//! summaries with the warnings about it alone (invalid trials, outliers, noise and drift
//! within blocks, differing environments).

use std::collections::{BTreeMap, BTreeSet};

use hdrhistogram::Histogram;

use results::TrialStatus;

use super::metrics::summary;
use super::{ALPHA, CURVE, HIGH_CV};
use crate::input::{read_histogram, TrialData};
use crate::model::{
    Cohort, Cpu, Latency, Memory, Runtime, ScriptTimes, Summary, VerifiedSetting, Warning,
};

/// The cohort name of a trial under the grouping keys, as one line of plain text: a control
/// character in a value (a newline in an environment variable, a terminal escape) is shown
/// escaped (`\n`, `\u{1b}`), so it cannot break a table row or recolour a terminal.
pub(super) fn cohort_name(t: &TrialData, by: &[String]) -> String {
    let name = if by == ["label"] {
        t.label.clone()
    } else {
        joined_key_values(t, by)
    };
    if name.chars().any(char::is_control) {
        name.chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect()
    } else {
        name
    }
}

fn joined_key_values(t: &TrialData, by: &[String]) -> String {
    by.iter()
        .map(|k| {
            let v = t.keys.get(k).map(String::as_str).unwrap_or("-");
            if k == "label" || k == "source" {
                v.to_string()
            } else {
                format!("{k}={v}")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// What the per-cohort warnings need to know of the whole run.
pub(super) struct RunContext {
    /// Per (source, trial_id): the log of the trial's main value (throughput, or wall time)
    /// minus the mean log of its block's valid trials, for blocks with trials of two or
    /// more configurations. The noise warning judges these, not the raw values:
    /// differences between blocks are cancelled by the pairing and would otherwise make
    /// every run look noisy (the raw CV fired in 92–100% of runs whose spread was between
    /// blocks).
    pub(super) residuals: BTreeMap<(usize, usize), f64>,
    /// Per (source, trial_id), for blocks of three or more configurations: the log of the
    /// trial's main value minus the median log of its block's other trials (with three,
    /// the nearer of the two: see `block_residuals`). The outlier warning judges these.
    pub(super) outlier_residuals: BTreeMap<(usize, usize), f64>,
    /// Trials in blocks of exactly two configurations: their block's ratio is judged
    /// instead (`block_ratio_outliers`), as either trial could be the disturbed one.
    pub(super) in_pairs: BTreeSet<(usize, usize)>,
    /// How many cohorts are judged (for the Bonferroni bounds of the drift and outlier
    /// warnings).
    pub(super) cohorts: usize,
}

/// The valid trials with a positive main value, by (source, block), with their log values.
fn by_block<'t>(
    valid: &[&'t TrialData],
    main: fn(&TrialData) -> Option<f64>,
) -> BTreeMap<(usize, u32), Vec<(&'t TrialData, f64)>> {
    let mut blocks: BTreeMap<(usize, u32), Vec<(&TrialData, f64)>> = BTreeMap::new();
    for t in valid {
        if let Some(v) = main(t).filter(|v| *v > 0.0) {
            blocks
                .entry((t.source, t.block))
                .or_default()
                .push((t, v.ln()));
        }
    }
    blocks
}

fn configs_of(trials: &[(&TrialData, f64)]) -> usize {
    trials
        .iter()
        .map(|(t, _)| t.config_id)
        .collect::<BTreeSet<_>>()
        .len()
}

/// A value per trial, keyed by (block, configuration).
pub(super) type ByTrial<T> = BTreeMap<(usize, usize), T>;

/// `RunContext`'s three maps: the residuals against the block's mean (noise), against the
/// median of the block's others (outliers), and the trials of two-configuration blocks.
///
/// The outlier residual: one disturbed trial must not make its block's other trials look
/// disturbed too. Against the block's mean (or, with two configurations, against each
/// other) it does: one trial 40% slow in 10 blocks flagged its block's baseline trial too in
/// 100% of runs with 2 configurations, 93% with 3 and 55% with 4 (the statistics audit).
/// The median of the others cannot be moved by one trial once there are three others;
/// with two others their median is their mean, which the slow one drags (an innocent trial
/// then sits half the slowdown away), so in blocks of three configurations a trial is judged
/// against the nearer of its two others: it stands out only when far from both. (The median
/// of the whole block instead made a third of the residuals exactly 0, and the fences
/// computed from them too narrow: 17.5% of runs flagged an innocent trial.)
pub(super) fn block_residuals(
    valid: &[&TrialData],
    main: fn(&TrialData) -> Option<f64>,
) -> (ByTrial<f64>, ByTrial<f64>, BTreeSet<(usize, usize)>) {
    let mut centred = BTreeMap::new();
    let mut against_others = BTreeMap::new();
    let mut in_pairs = BTreeSet::new();
    for trials in by_block(valid, main).values() {
        let configs = configs_of(trials);
        if configs < 2 {
            continue;
        }
        let centre = trials.iter().map(|(_, v)| v).sum::<f64>() / trials.len() as f64;
        let logs: Vec<f64> = trials.iter().map(|(_, v)| *v).collect();
        for (i, (t, v)) in trials.iter().enumerate() {
            let key = (t.source, t.trial_id);
            centred.insert(key, v - centre);
            if configs == 2 {
                in_pairs.insert(key);
                continue;
            }
            let reference = if trials.len() == 3 {
                // The nearer of the two others.
                logs.iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .map(|(_, x)| *x)
                    .min_by(|a, b| (a - v).abs().total_cmp(&(b - v).abs()))
            } else {
                let others: Vec<f64> = logs
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .map(|(_, x)| *x)
                    .collect();
                stats::median(&others)
            };
            if let Some(reference) = reference {
                against_others.insert(key, v - reference);
            }
        }
    }
    (centred, against_others, in_pairs)
}

/// Runs of two configurations: a disturbed trial shows as an outlying block ratio, and which
/// of its block's two trials was disturbed cannot be told, so the block is named, not a
/// trial (flagging "the outlier trial" flagged its innocent partner too in every run). One
/// test per run and pair of configurations, at α over the runs.
pub(super) fn block_ratio_outliers(
    valid: &[&TrialData],
    main: fn(&TrialData) -> Option<f64>,
    name_of: impl Fn(&TrialData) -> String,
    main_name: &str,
    warnings: &mut Vec<Warning>,
) {
    // Per (source, the two configurations): (block, the two trials, log ratio).
    type Ratios<'t> = BTreeMap<(usize, usize, usize), Vec<(u32, [&'t TrialData; 2], f64)>>;
    let mut ratios: Ratios = BTreeMap::new();
    for ((source, block), trials) in by_block(valid, main) {
        if configs_of(&trials) != 2 || trials.len() != 2 {
            continue;
        }
        let (mut x, mut y) = (trials[0], trials[1]);
        if x.0.config_id > y.0.config_id {
            std::mem::swap(&mut x, &mut y);
        }
        ratios
            .entry((source, x.0.config_id, y.0.config_id))
            .or_default()
            .push((block, [x.0, y.0], y.1 - x.1));
    }
    let level = ALPHA / ratios.len().max(1) as f64;
    for series in ratios.values() {
        let logs: Vec<f64> = series.iter().map(|r| r.2).collect();
        let flagged = stats::outliers::robust_outliers(&logs, level);
        if flagged.is_empty() {
            continue;
        }
        let typical = stats::median(&logs).unwrap_or(0.0).exp();
        let [x, y] = series[0].1;
        let listed: Vec<String> = flagged
            .iter()
            .map(|&i| {
                let (block, [a, b], log) = &series[i];
                format!(
                    "block {} ({:.2}×; trials {}:{} and {}:{})",
                    block + 1,
                    log.exp(),
                    a.source,
                    a.trial_id,
                    b.source,
                    b.trial_id
                )
            })
            .collect();
        warnings.push(Warning {
            kind: "outliers".into(),
            cohort: None,
            message: format!(
                "{} {main_name} ratio(s) of {} to {} beyond robust fences for {} (typically {typical:.2}×): {}; one of each block's two trials was disturbed, and with two configurations which one cannot be told; flagged, not dropped",
                flagged.len(),
                name_of(y),
                name_of(x),
                units::count(logs.len(), "block"),
                listed.join(", ")
            ),
        });
    }
}

/// Adds a warning of `kind` about cohort `name`.
fn warn(warnings: &mut Vec<Warning>, name: &str, kind: &str, message: String) {
    warnings.push(Warning {
        kind: kind.into(),
        cohort: Some(name.to_string()),
        message,
    });
}

/// The sample standard deviation of values on the log scale (≈ the CV for small spreads);
/// `None` below 3 values.
fn log_sd(x: &[f64]) -> Option<f64> {
    if x.len() < 3 {
        return None;
    }
    let mean = x.iter().sum::<f64>() / x.len() as f64;
    Some((x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (x.len() - 1) as f64).sqrt())
}

/// Summaries and per-cohort warnings: the trials not counted, the main value's spread
/// (`main_value_warnings`: outliers, high CV, drift), the environment that differs within
/// the cohort, then every summary.
pub(super) fn cohort(
    name: &str,
    trials: &[&TrialData],
    valid: &[&TrialData],
    by: &[String],
    context: &RunContext,
    warnings: &mut Vec<Warning>,
) -> Cohort {
    let count = |s: TrialStatus| trials.iter().filter(|t| t.status == s).count();
    let (invalid, failed) = (count(TrialStatus::Invalid), count(TrialStatus::Failed));
    if invalid + failed > 0 {
        let reasons: BTreeSet<&str> = trials
            .iter()
            .filter(|t| t.status != TrialStatus::Valid)
            .filter_map(|t| t.reason.as_deref())
            .collect();
        let first = reasons.iter().next().copied().unwrap_or("");
        warn(warnings, name, "invalid-trials", format!("{invalid} invalid and {failed} failed trial(s) excluded from the statistics (e.g. \"{first}\")"));
    }

    let outliers = main_value_warnings(name, valid, context, warnings);
    environment_warnings(name, trials, by, warnings);
    let latency = latency(valid);
    let script = script_times(valid);
    let runtime = runtime(valid);
    Cohort {
        runtime,
        verified: verified_settings(trials),
        name: name.to_string(),
        key: by
            .iter()
            .map(|k| {
                (
                    k.clone(),
                    trials[0].keys.get(k).cloned().unwrap_or_default(),
                )
            })
            .collect(),
        valid: valid.len(),
        invalid,
        failed,
        throughput: summary(valid, |t| t.requests_per_s),
        latency,
        memory: Memory {
            rss_end: summary(valid, |t| t.rss_end),
            pss_end: summary(valid, |t| t.pss_end),
            uss_end: summary(valid, |t| t.uss_end),
            rss_peak: summary(valid, |t| t.rss_peak),
            pss_peak: summary(valid, |t| t.pss_peak),
        },
        cpu: Cpu {
            per_request: summary(valid, |t| t.cpu_per_request),
            user_per_request: summary(valid, |t| t.cpu_user_per_request),
            system_per_request: summary(valid, |t| t.cpu_system_per_request),
            idle_per_s: summary(valid, |t| t.idle_cpu_per_s),
            idle_share: summary(valid, |t| t.idle_cpu_share),
            per_request_with_idle: summary(valid, |t| t.cpu_per_request_with_idle),
        },
        error_rate: summary(valid, |t| t.error_rate),
        script,
        outliers,
        noise: None,
    }
}

/// The main value of the cohort's trials (throughput, or a script's wall time), judged for
/// outliers (returned, as `source:trial`), a high spread and drift over the run, each a
/// warning of cohort `name`.
fn main_value_warnings(
    name: &str,
    valid: &[&TrialData],
    context: &RunContext,
    warnings: &mut Vec<Warning>,
) -> Vec<String> {
    // The main value of a trial, for outliers, CV and drift.
    let main: fn(&TrialData) -> Option<f64> = if valid.iter().any(|t| t.requests_per_s.is_some()) {
        |t| t.requests_per_s
    } else {
        |t| t.wall_s
    };
    let main_name = if valid.iter().any(|t| t.requests_per_s.is_some()) {
        "throughput"
    } else {
        "wall time"
    };
    let mut in_time: Vec<&&TrialData> = valid.iter().collect();
    in_time.sort_by(|a, b| (a.source, &a.started_at).cmp(&(b.source, &b.started_at)));
    let series: Vec<f64> = in_time.iter().filter_map(|t| main(t)).collect();
    // Within blocks: each trial's log value against its block's centre (block effects, which
    // pairing cancels, taken out), when every trial has one; else the log values themselves.
    let within: Option<Vec<(&TrialData, f64)>> = in_time
        .iter()
        .filter(|t| main(t).is_some())
        .map(|t| {
            context
                .residuals
                .get(&(t.source, t.trial_id))
                .map(|r| (**t, *r))
        })
        .collect();
    let (spread_values, spread_trials, within_blocks): (Vec<f64>, Vec<&TrialData>, bool) =
        match &within {
            Some(w) if w.len() >= 3 => (
                w.iter().map(|x| x.1).collect(),
                w.iter().map(|x| x.0).collect(),
                true,
            ),
            _ => (
                series.iter().map(|v| v.ln()).collect(),
                in_time
                    .iter()
                    .filter(|t| main(t).is_some())
                    .map(|t| **t)
                    .collect(),
                false,
            ),
        };
    // Fences for a false alarm in ALPHA / k of clean cohorts: Bonferroni over the k cohorts,
    // as for drift below, so a clean report of any number of cohorts shows an `outliers`
    // warning in about 5% of runs or fewer (at a fixed 2% per cohort, 8 cohorts of 10
    // blocks warned in 19% of clean runs: the simulation in the tests).
    let outlier_level = ALPHA / context.cohorts.max(1) as f64;
    // Trials in blocks of three or more configurations are judged against the median of
    // their block's others; in blocks of two, the block's ratio is (`block_ratio_outliers`);
    // trials of no block at all, as they are.
    let in_pairs = spread_trials
        .iter()
        .any(|t| context.in_pairs.contains(&(t.source, t.trial_id)));
    let against_others: Option<Vec<f64>> = spread_trials
        .iter()
        .map(|t| {
            context
                .outlier_residuals
                .get(&(t.source, t.trial_id))
                .copied()
        })
        .collect();
    let judged: Option<&[f64]> = match (&against_others, within_blocks, in_pairs) {
        (Some(r), true, false) => Some(r),
        (_, false, _) => Some(&spread_values),
        _ => None,
    };
    let outliers: Vec<String> = judged
        .map(|x| stats::outliers::robust_outliers(x, outlier_level))
        .unwrap_or_default()
        .into_iter()
        .map(|i| format!("{}:{}", spread_trials[i].source, spread_trials[i].trial_id))
        .collect();
    if !outliers.is_empty() {
        warn(
            warnings,
            name,
            "outliers",
            format!(
                "{} {main_name} outlier(s){} beyond robust fences for {} (trials {}); flagged, not dropped",
                outliers.len(),
                if within_blocks { " against the other configurations of their blocks" } else { "" },
                units::count(spread_values.len(), "trial"),
                outliers.join(", ")
            ),
        );
    }
    let main_summary = Summary::of(&series);
    if let Some(sd) = log_sd(&spread_values) {
        if sd > HIGH_CV {
            let what = if within_blocks {
                format!("within blocks (SD {:.1}% of its trials against the other configurations of their blocks)", 100.0 * sd)
            } else {
                format!("between trials (SD {:.1}% on the log scale)", 100.0 * sd)
            };
            warn(warnings, name, "high-cv", format!("{main_name} varies a lot {what}: more blocks, longer trials or a quieter machine"));
        }
    }
    // Blocked data: drift is judged on the per-block ratios of each comparison (a trend
    // the whole machine shares is cancelled by the pairing and harmless; a ratio that
    // drifts is not), `shape_warnings`. Otherwise, one test per cohort on its own series:
    // Bonferroni over the cohorts keeps a clean run's chance of any drift warning near 5%.
    let drift_alpha = ALPHA / context.cohorts.max(1) as f64;
    let drift_test = if within_blocks {
        None
    } else {
        stats::trend::mann_kendall(&series)
    };
    if let Some(t) = drift_test {
        if t.p_value < drift_alpha {
            let slope = stats::trend::sen_slope(&series).unwrap_or(0.0);
            let per = main_summary
                .as_ref()
                .map(|s| 100.0 * slope / s.p50)
                .unwrap_or(0.0);
            warn(warnings, name, "drift", format!("{main_name} drifts over the run ({per:+.2}% of the median per trial, Mann–Kendall p={:.3}): something changed while it ran", t.p_value));
        }
    }
    outliers
}

/// A recorded value (the Ruby, the kernel, the machine, an environment variable...) that
/// differs within cohort `name` although the report does not group by it: a warning each.
fn environment_warnings(
    name: &str,
    trials: &[&TrialData],
    by: &[String],
    warnings: &mut Vec<Warning>,
) {
    for key in [
        "ruby_description",
        "kernel",
        "machine",
        "cpu_model",
        "app_git",
        "rubyrace_version",
    ] {
        if by.iter().any(|k| k == key) {
            continue;
        }
        let distinct: BTreeSet<&str> = trials
            .iter()
            .filter_map(|t| t.keys.get(key).map(String::as_str))
            .collect();
        if distinct.len() > 1 {
            warn(
                warnings,
                name,
                "environment-differs",
                format!(
                    "trials of this cohort differ in {key}: {}",
                    distinct
                        .iter()
                        .map(|v| format!("{v:?}"))
                        .collect::<Vec<_>>()
                        .join(" vs ")
                ),
            );
        }
    }
    let env_keys: BTreeSet<&String> = trials
        .iter()
        .flat_map(|t| t.keys.keys())
        .filter(|k| k.starts_with("env."))
        // The probe's directory is the trial's own: it differs by design.
        .filter(|k| k.as_str() != "env.RUBYRACE_PROBE_DIR")
        .collect();
    for key in env_keys {
        if by.iter().any(|k| k == key) {
            continue;
        }
        let distinct: BTreeSet<Option<&String>> = trials.iter().map(|t| t.keys.get(key)).collect();
        if distinct.len() > 1 {
            let shown: Vec<String> = distinct
                .iter()
                .map(|v| {
                    v.map(|s| format!("{s:?}"))
                        .unwrap_or_else(|| "unset".into())
                })
                .collect();
            warn(
                warnings,
                name,
                "environment-differs",
                format!(
                    "trials of this cohort differ in {key}: {}",
                    shown.join(" vs ")
                ),
            );
        }
    }
}

/// A script workload's times, when the trials have them: wall, user and system time, the
/// peak RSS and each metric the script reported.
fn script_times(valid: &[&TrialData]) -> Option<ScriptTimes> {
    valid.iter().any(|t| t.wall_s.is_some()).then(|| {
        let names: BTreeSet<&String> = valid.iter().flat_map(|t| t.metrics.keys()).collect();
        ScriptTimes {
            wall: summary(valid, |t| t.wall_s),
            user: summary(valid, |t| t.user_s),
            system: summary(valid, |t| t.system_s),
            max_rss_bytes: summary(valid, |t| t.max_rss),
            metrics: names
                .into_iter()
                .filter_map(|n| {
                    Summary::of(
                        &valid
                            .iter()
                            .filter_map(|t| t.metrics.get(n).copied())
                            .collect::<Vec<_>>(),
                    )
                    .map(|s| (n.clone(), s))
                })
                .collect(),
        }
    })
}

/// What the probe read inside the server (GC, allocations, YJIT, boot times), per
/// request where it is a count, when the trials have it.
fn runtime(valid: &[&TrialData]) -> Option<Runtime> {
    valid.iter().any(|t| !t.runtime.is_empty()).then(|| {
        let of = |key: &str| {
            Summary::of(
                &valid
                    .iter()
                    .filter_map(|t| t.runtime.get(key).copied())
                    .collect::<Vec<_>>(),
            )
        };
        Runtime {
            gc_per_1000_requests: of("gc_per_1000_requests"),
            minor_gc_per_1000_requests: of("minor_gc_per_1000_requests"),
            major_gc_per_1000_requests: of("major_gc_per_1000_requests"),
            gc_time_ms_per_1000_requests: of("gc_time_ms_per_1000_requests"),
            allocated_objects_per_request: of("allocated_objects_per_request"),
            heap_allocated_pages: of("heap_allocated_pages"),
            yjit_code_bytes: of("yjit_code_bytes"),
            yjit_ratio_in_yjit: of("yjit_ratio_in_yjit"),
            app_loaded_after_s: of("app_loaded_after_s"),
            first_request_after_s: of("first_request_after_s"),
        }
    })
}

/// The settings checked on the running server, trial by trial, counted over the cohort.
fn verified_settings(trials: &[&TrialData]) -> Vec<VerifiedSetting> {
    let mut out: Vec<VerifiedSetting> = Vec::new();
    for t in trials {
        for (setting, expected, observed, ok) in &t.checks {
            let i = match out
                .iter()
                .position(|v| &v.setting == setting && &v.expected == expected)
            {
                Some(i) => i,
                None => {
                    out.push(VerifiedSetting {
                        setting: setting.clone(),
                        expected: expected.clone(),
                        verified: 0,
                        checked: 0,
                        observed: observed.clone(),
                    });
                    out.len() - 1
                }
            };
            let v = &mut out[i];
            v.checked += 1;
            if *ok {
                v.verified += 1;
            } else if v.checked - v.verified == 1 {
                // The first failure is the one worth showing.
                v.observed = observed.clone();
            }
        }
    }
    out
}

/// Percentiles of the merged histograms of the valid trials.
fn latency(valid: &[&TrialData]) -> Option<Latency> {
    let mut merged: Option<Histogram<u64>> = None;
    for t in valid {
        let Some(path) = &t.hlog else { continue };
        let Ok(h) = read_histogram(path) else {
            continue;
        };
        match &mut merged {
            Some(m) => {
                let _ = m.add(&h);
            }
            None => merged = Some(h),
        }
    }
    let h = merged.filter(|h| !h.is_empty())?;
    let us = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    Some(Latency {
        p50: us(0.50),
        p90: us(0.90),
        p99: us(0.99),
        p99_9: us(0.999),
        max: h.max() as f64 / 1000.0,
        curve: CURVE.iter().map(|p| (*p, us(p / 100.0))).collect(),
        p50_across_trials: summary(valid, |t| t.latency_p50_us),
        p99_across_trials: summary(valid, |t| t.latency_p99_us),
    })
}
