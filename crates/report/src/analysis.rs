//! From trials to an answer: cohorts (groups of trials sharing the grouping keys), their
//! summaries, comparisons with the baseline (paired by block when the data come from the
//! blocked design, unpaired bootstrap otherwise), the overhead per request, and the
//! warnings that keep a reader honest.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, Result};
use hdrhistogram::Histogram;

use lab::trial::TrialStatus;

use crate::format::{format_p, p_text};
use crate::input::{read_histogram, SourceData, TrialData};
use crate::model::*;

/// Confidence level of every interval.
pub const CONFIDENCE: f64 = 0.95;
/// Significance level of every test (after Holm's adjustment within a metric).
pub const ALPHA: f64 = 0.05;
/// Bootstrap resamples of unpaired comparisons.
const RESAMPLES: usize = 10_000;
/// Seed of the bootstrap, so a report is reproducible.
const BOOTSTRAP_SEED: u64 = 20_260_101;
/// A coefficient of variation above this is warned about.
pub const HIGH_CV: f64 = 0.05;
/// Percentiles of the latency curve.
const CURVE: [f64; 12] = [
    0.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99, 99.999, 100.0,
];

/// What the user asked for.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Grouping keys; empty means the default (the configuration label, plus the machine
    /// when the trials come from several machines).
    pub by: Vec<String>,
    pub baseline: Option<String>,
    /// `--overhead A B`.
    pub overhead: Option<(String, String)>,
    /// Keep only these cohorts (in this order), e.g. for `rubyrace compare DIR A B`.
    pub only: Vec<String>,
    /// The command line, recorded in the report.
    pub command: String,
}

/// One metric the comparisons cover.
struct Metric {
    name: String,
    higher_is_better: bool,
    value: MetricValue,
    /// Words for "more" and "less" of it.
    more: String,
    less: String,
}

/// Where a metric's value comes from.
enum MetricValue {
    /// A figure rubyrace measures.
    Measured(fn(&TrialData) -> Option<f64>),
    /// A figure the script printed (`rubyrace-metric NAME=VALUE`).
    Script(String),
}

impl Metric {
    fn measured(
        name: &str,
        higher_is_better: bool,
        value: fn(&TrialData) -> Option<f64>,
        more: &str,
        less: &str,
    ) -> Metric {
        Metric {
            name: name.into(),
            higher_is_better,
            value: MetricValue::Measured(value),
            more: more.into(),
            less: less.into(),
        }
    }

    /// A script's own metric. Rates (names ending in `_per_s`, `_per_sec` or
    /// `_per_second`) are better higher; every other figure (a time, a size, a count) is
    /// better lower (docs/report.md).
    fn script(name: &str) -> Metric {
        Metric {
            name: name.into(),
            higher_is_better: script_metric_higher_is_better(name),
            value: MetricValue::Script(name.into()),
            more: format!("higher {name}"),
            less: format!("lower {name}"),
        }
    }

    fn of(&self, t: &TrialData) -> Option<f64> {
        match &self.value {
            MetricValue::Measured(f) => f(t),
            MetricValue::Script(name) => t.metrics.get(name).copied(),
        }
    }
}

/// Whether a script metric is better higher: rates are.
pub fn script_metric_higher_is_better(name: &str) -> bool {
    ["_per_s", "_per_sec", "_per_second"]
        .iter()
        .any(|suffix| name.ends_with(suffix))
}

fn http_metrics() -> Vec<Metric> {
    vec![
        Metric::measured("throughput", true, |t| t.requests_per_s, "faster", "slower"),
        Metric::measured(
            "latency_p50",
            false,
            |t| t.latency_p50_us,
            "higher p50 latency",
            "lower p50 latency",
        ),
        Metric::measured(
            "latency_p99",
            false,
            |t| t.latency_p99_us,
            "higher p99 latency",
            "lower p99 latency",
        ),
        Metric::measured(
            "pss_end",
            false,
            |t| t.pss_end,
            "more memory (PSS)",
            "less memory (PSS)",
        ),
        Metric::measured(
            "cpu_per_request",
            false,
            |t| t.cpu_per_request,
            "more CPU per request",
            "less CPU per request",
        ),
    ]
}

/// Wall time and peak RSS, then every metric the script printed (in name order).
fn script_metrics(trials: &[&TrialData]) -> Vec<Metric> {
    let mut metrics = vec![
        Metric::measured(
            "wall",
            false,
            |t| t.wall_s,
            "slower (wall time)",
            "faster (wall time)",
        ),
        Metric::measured(
            "max_rss",
            false,
            |t| t.max_rss,
            "more peak memory",
            "less peak memory",
        ),
    ];
    let names: BTreeSet<&String> = trials.iter().flat_map(|t| t.metrics.keys()).collect();
    metrics.extend(names.into_iter().map(|n| Metric::script(n)));
    metrics
}

fn values(trials: &[&TrialData], f: impl Fn(&TrialData) -> Option<f64>) -> Vec<f64> {
    trials.iter().filter_map(|t| f(t)).collect()
}

fn summary(trials: &[&TrialData], f: fn(&TrialData) -> Option<f64>) -> Option<Summary> {
    Summary::of(&values(trials, f))
}

/// The cohort name of a trial under the grouping keys, as one line of plain text: a control
/// character in a value (a newline in an environment variable, a terminal escape) is shown
/// escaped (`\n`, `\u{1b}`), so it cannot break a table row or recolour a terminal.
fn cohort_name(t: &TrialData, by: &[String]) -> String {
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

/// Builds the report.
pub fn analyze(sources: &[SourceData], options: &Options) -> Result<Report> {
    let all: Vec<&TrialData> = sources.iter().flat_map(|s| s.trials.iter()).collect();
    if all.is_empty() {
        bail!(
            "no trials are stored in the given results director{}",
            if sources.len() == 1 { "y" } else { "ies" }
        );
    }
    let machines: BTreeSet<&str> = all
        .iter()
        .map(|t| t.keys.get("machine").map(String::as_str).unwrap_or(""))
        .collect();
    let by: Vec<String> = if options.by.is_empty() {
        let mut by = vec!["label".to_string()];
        if machines.len() > 1 {
            by.push("machine".into());
        }
        by
    } else {
        options.by.clone()
    };
    let known: BTreeSet<&String> = all.iter().flat_map(|t| t.keys.keys()).collect();
    for k in &by {
        if !known.contains(k) {
            let names: Vec<&str> = known
                .iter()
                .map(|s| s.as_str())
                .filter(|s| !s.starts_with("settings.load.urls"))
                .collect();
            let hint = experiment::did_you_mean(k, &names)
                .map(|s| format!(" (did you mean `{s}`?)"))
                .unwrap_or_default();
            bail!("--by {k}: no trial has this key{hint}; keys include label, the matrix axes, ruby, machine, kernel, ruby_description, env.NAME and settings.NAME");
        }
    }

    // Cohorts in order of first appearance by (source, config).
    let mut order: Vec<String> = Vec::new();
    let mut members: BTreeMap<String, Vec<&TrialData>> = BTreeMap::new();
    let mut sorted = all.clone();
    sorted.sort_by_key(|t| (t.source, t.config_id, t.trial_id));
    for t in &sorted {
        let name = cohort_name(t, &by);
        if !members.contains_key(&name) {
            order.push(name.clone());
        }
        members.entry(name).or_default().push(t);
    }
    if !options.only.is_empty() {
        for name in &options.only {
            if !members.contains_key(name) {
                bail!("no cohort named {name:?}; cohorts: {}", order.join(", "));
            }
        }
        order = options.only.clone();
    }
    let baseline = match &options.baseline {
        Some(b) if members.contains_key(b) => b.clone(),
        Some(b) => bail!(
            "--baseline {b:?} is not a cohort; cohorts: {}",
            order.join(", ")
        ),
        None => order[0].clone(),
    };
    let script = all.iter().any(|t| t.wall_s.is_some());
    let http = all.iter().any(|t| t.requests_per_s.is_some());
    let workload = match (http, script) {
        (true, true) => Workloads::Mixed,
        (false, true) => Workloads::Script,
        _ => Workloads::Http,
    };

    let mut warnings = Vec::new();
    let mut cohorts = Vec::new();
    let all_valid: Vec<&TrialData> = all
        .iter()
        .copied()
        .filter(|t| t.status == TrialStatus::Valid)
        .collect();
    let main: fn(&TrialData) -> Option<f64> = if http {
        |t| t.requests_per_s
    } else {
        |t| t.wall_s
    };
    let context = RunContext {
        residuals: block_residuals(&all_valid, main),
        cohorts: order.len(),
    };
    for name in &order {
        let trials = &members[name];
        let valid: Vec<&TrialData> = trials
            .iter()
            .copied()
            .filter(|t| t.status == TrialStatus::Valid)
            .collect();
        let mut c = cohort(name, trials, &valid, &by, &context, &mut warnings);
        c.noise = crate::noise::cohort_noise(trials);
        if let Some(n) = &c.noise {
            warnings.extend(crate::noise::condition_warnings(name, n));
        }
        warnings.extend(crate::noise::noisy_warning(name, trials));
        cohorts.push(c);
    }

    // Comparisons with the baseline.
    let metrics: Vec<Metric> = if workload == Workloads::Script {
        script_metrics(&all)
    } else {
        http_metrics()
    };
    // An adaptive run (it stopped when precise enough) is reported at the confidence its
    // stopping rule used, which keeps the coverage at least 95% (experiment::precision).
    let confidence = if sources.iter().any(|s| s.adaptive) {
        experiment::precision::SEQUENTIAL_CONFIDENCE
    } else {
        CONFIDENCE
    };
    let mut comparisons = Vec::new();
    let base_valid: Vec<&TrialData> = members[&baseline]
        .iter()
        .copied()
        .filter(|t| t.status == TrialStatus::Valid)
        .collect();
    for name in order.iter().filter(|n| **n != baseline) {
        let valid: Vec<&TrialData> = members[name]
            .iter()
            .copied()
            .filter(|t| t.status == TrialStatus::Valid)
            .collect();
        for m in &metrics {
            if let Some(c) = compare(name, &valid, &baseline, &base_valid, m, confidence) {
                comparisons.push(c);
            }
        }
    }
    for m in &metrics {
        let mut family: Vec<&mut Comparison> = comparisons
            .iter_mut()
            .filter(|c| c.metric == m.name)
            .collect();
        holm_adjust(&mut family);
        for c in family {
            decide(c, m);
        }
    }
    too_few_warnings(&comparisons, &mut warnings);
    pooled_warnings(&comparisons, &mut warnings);

    let overhead = match &options.overhead {
        Some((a, b)) => {
            for n in [a, b] {
                if !members.contains_key(n) {
                    bail!(
                        "--overhead: no cohort named {n:?}; cohorts: {}",
                        order.join(", ")
                    );
                }
            }
            let va: Vec<&TrialData> = members[a]
                .iter()
                .copied()
                .filter(|t| t.status == TrialStatus::Valid)
                .collect();
            let vb: Vec<&TrialData> = members[b]
                .iter()
                .copied()
                .filter(|t| t.status == TrialStatus::Valid)
                .collect();
            overhead(a, &va, b, &vb, confidence)
        }
        None => None,
    };

    for s in sources.iter().filter(|s| s.smoke) {
        warnings.push(Warning {
            kind: "smoke".into(),
            cohort: None,
            message: format!("{} is a --smoke run: two short blocks, for checking an experiment, not for conclusions", s.dir.display()),
        });
    }
    incomplete_warnings(sources, &baseline, &mut warnings);
    idle_cpu_warnings(&cohorts, &mut warnings);
    latency_file_warnings(&order, &members, &mut warnings);
    if by == ["source"] {
        differing_sides_warnings(&order, &members, &mut warnings);
    }
    if machines.len() > 1 && !by.iter().any(|k| k == "machine") {
        warnings.push(Warning {
            kind: "mixed-machines".into(),
            cohort: None,
            message: format!("the trials come from {} machines ({}) and cohorts pool them; add --by ...,machine to keep them apart", machines.len(), machines.iter().copied().collect::<Vec<_>>().join(", ")),
        });
    }

    // What the doctor found wrong with the machine when the run (or a resume) started.
    let mut seen_findings = BTreeSet::new();
    for source in sources {
        for report in &source.doctor {
            for f in &report.findings {
                let serious = matches!(f.status, doctor::Status::Warn | doctor::Status::Bad);
                if serious && seen_findings.insert((f.name.clone(), f.value.clone())) {
                    let advice = if f.advice.is_empty() {
                        String::new()
                    } else {
                        format!(" → {}", f.advice)
                    };
                    warnings.push(Warning {
                        kind: "machine".into(),
                        cohort: None,
                        message: format!(
                            "rubyrace doctor when the run started: {}: {}{advice}",
                            f.name,
                            f.value.replace('\n', "; ")
                        ),
                    });
                }
            }
        }
    }

    // Trial points in the order they ran.
    let mut timeline: Vec<&TrialData> = all.clone();
    timeline.sort_by(|a, b| {
        (a.source, &a.started_at, a.trial_id).cmp(&(b.source, &b.started_at, b.trial_id))
    });
    let trials = timeline
        .iter()
        .enumerate()
        .filter(|(_, t)| order.contains(&cohort_name(t, &by)))
        .map(|(i, t)| TrialPoint {
            cohort: cohort_name(t, &by),
            source: t.source,
            trial_id: t.trial_id,
            block: t.block,
            sequence: i,
            status: t.status.as_str().to_string(),
            requests_per_s: t.requests_per_s,
            pss_end_bytes: t.pss_end.map(|v| v as u64),
            wall_s: t.wall_s,
        })
        .collect();

    let matrix = dot_matrix(&order, &members, workload);
    let environment = order
        .iter()
        .map(|name| {
            let mut values: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for t in &members[name] {
                for (k, v) in &t.keys {
                    if k.starts_with("settings.load.urls") || k == "source" {
                        continue;
                    }
                    values.entry(k.clone()).or_default().insert(v.clone());
                }
            }
            CohortEnvironment {
                cohort: name.clone(),
                values: values
                    .into_iter()
                    .map(|(k, v)| (k, v.into_iter().collect()))
                    .collect(),
            }
        })
        .collect();

    for s in sources {
        if let Some(end) = &s.precision_end {
            warnings.push(Warning {
                kind: "adaptive-run".into(),
                cohort: None,
                message: format!("{}: {}; its intervals are at 97.5%, the level of its stopping rule, which keeps their coverage at least 95%", s.dir.display(), end.describe()),
            });
        }
        if matches!(s.design, experiment::design::Design::CoScheduled { .. }) {
            warnings.push(Warning {
                kind: "co-scheduled".into(),
                cohort: None,
                message: format!("{}: every server of a block was loaded at once, sharing the same CPUs, so throughput and latency are each server's share of a contended machine, not what it does alone; CPU per request is the figure that compares the configurations", s.dir.display()),
            });
        }
    }
    Ok(Report {
        schema: REPORT_SCHEMA.into(),
        command: options.command.clone(),
        confidence,
        sources: sources
            .iter()
            .map(|s| Source {
                dir: s.dir.display().to_string(),
                experiment: s.experiment.clone(),
                created_at: s.created_at.clone(),
                machines: s
                    .trials
                    .iter()
                    .filter_map(|t| t.keys.get("machine").cloned())
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect(),
                trials: s.trials.len(),
                commands: s.commands.clone(),
                smoke: s.smoke,
                design: s.design.describe(),
                doctor: s.doctor.clone(),
            })
            .collect(),
        workload,
        group_by: by,
        baseline,
        cohorts,
        comparisons,
        overhead,
        warnings,
        trials,
        matrix,
        environment,
    })
}

/// Cohorts of interleaved trials whose servers used CPU between their slices at rates more
/// than this apart (µs per second: 1% of one CPU).
const IDLE_CPU_APART: f64 = 10_000.0;

/// Interleaved trials leave out what a server does while the load is on the others: when
/// the cohorts' servers did different amounts of it, their figures per request leave out
/// different amounts of work, which a blocks design would have charged.
fn idle_cpu_warnings(cohorts: &[Cohort], warnings: &mut Vec<Warning>) {
    let rates: Vec<(&str, f64)> = cohorts
        .iter()
        .filter_map(|c| Some((c.name.as_str(), c.cpu.idle_per_s.as_ref()?.p50)))
        .collect();
    let (Some(low), Some(high)) = (
        rates.iter().min_by(|a, b| a.1.total_cmp(&b.1)),
        rates.iter().max_by(|a, b| a.1.total_cmp(&b.1)),
    ) else {
        return;
    };
    if high.1 - low.1 <= IDLE_CPU_APART {
        return;
    }
    let listed: Vec<String> = rates
        .iter()
        .map(|(name, rate)| format!("{name} {}", crate::format::cpu_rate(*rate)))
        .collect();
    warnings.push(Warning {
        kind: "idle-cpu-differs".into(),
        cohort: None,
        message: format!(
            "between their slices, the servers of these interleaved trials used CPU at different rates ({}): what a server does while the load is on the others is in neither its throughput nor its CPU per request, and a blocks design would have charged it",
            listed.join(", ")
        ),
    });
}

/// What the per-cohort warnings need to know of the whole run.
struct RunContext {
    /// Per (source, trial_id): the log of the trial's main value (throughput, or wall time)
    /// minus the mean log of its block's valid trials, for blocks with trials of two or
    /// more configurations. The noise and outlier warnings judge these, not the raw values:
    /// differences between blocks are cancelled by the pairing and would otherwise make
    /// every run look noisy (the raw CV fired in 92–100% of runs whose spread was between
    /// blocks).
    residuals: BTreeMap<(usize, usize), f64>,
    /// How many cohorts are judged (for the Bonferroni bounds of the drift and outlier
    /// warnings).
    cohorts: usize,
}

fn block_residuals(
    valid: &[&TrialData],
    main: fn(&TrialData) -> Option<f64>,
) -> BTreeMap<(usize, usize), f64> {
    let mut blocks: BTreeMap<(usize, u32), Vec<(&TrialData, f64)>> = BTreeMap::new();
    for t in valid {
        if let Some(v) = main(t).filter(|v| *v > 0.0) {
            blocks
                .entry((t.source, t.block))
                .or_default()
                .push((t, v.ln()));
        }
    }
    let mut out = BTreeMap::new();
    for trials in blocks.values() {
        let configs: BTreeSet<usize> = trials.iter().map(|(t, _)| t.config_id).collect();
        if configs.len() < 2 {
            continue;
        }
        let centre = trials.iter().map(|(_, v)| v).sum::<f64>() / trials.len() as f64;
        for (t, v) in trials {
            out.insert((t.source, t.trial_id), v - centre);
        }
    }
    out
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

/// Summaries and per-cohort warnings.
fn cohort(
    name: &str,
    trials: &[&TrialData],
    valid: &[&TrialData],
    by: &[String],
    context: &RunContext,
    warnings: &mut Vec<Warning>,
) -> Cohort {
    let count = |s: TrialStatus| trials.iter().filter(|t| t.status == s).count();
    let (invalid, failed) = (count(TrialStatus::Invalid), count(TrialStatus::Failed));
    let warn = |warnings: &mut Vec<Warning>, kind: &str, message: String| {
        warnings.push(Warning {
            kind: kind.into(),
            cohort: Some(name.to_string()),
            message,
        });
    };
    if invalid + failed > 0 {
        let reasons: BTreeSet<&str> = trials
            .iter()
            .filter(|t| t.status != TrialStatus::Valid)
            .filter_map(|t| t.reason.as_deref())
            .collect();
        let first = reasons.iter().next().copied().unwrap_or("");
        warn(warnings, "invalid-trials", format!("{invalid} invalid and {failed} failed trial(s) excluded from the statistics (e.g. \"{first}\")"));
    }

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
    let outliers: Vec<String> = stats::outliers::robust_outliers(&spread_values, outlier_level)
        .into_iter()
        .map(|i| format!("{}:{}", spread_trials[i].source, spread_trials[i].trial_id))
        .collect();
    if !outliers.is_empty() {
        warn(
            warnings,
            "outliers",
            format!(
                "{} {main_name} outlier(s){} beyond robust fences for {} trials (trials {}); flagged, not dropped",
                outliers.len(),
                if within_blocks { " within their blocks" } else { "" },
                spread_values.len(),
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
            warn(warnings, "high-cv", format!("{main_name} varies a lot {what}: more blocks, longer trials or a quieter machine"));
        }
    }
    // One test per cohort: Bonferroni over the cohorts keeps a clean run's chance of any
    // drift warning near 5%.
    let drift_alpha = ALPHA / context.cohorts.max(1) as f64;
    if let Some(t) = stats::trend::mann_kendall(&series) {
        if t.p_value < drift_alpha {
            let slope = stats::trend::sen_slope(&series).unwrap_or(0.0);
            let per = main_summary
                .as_ref()
                .map(|s| 100.0 * slope / s.p50)
                .unwrap_or(0.0);
            warn(warnings, "drift", format!("{main_name} drifts over the run ({per:+.2}% of the median per trial, Mann–Kendall p={:.3}): something changed while it ran", t.p_value));
        }
    }
    // A recorded value that differs within the cohort although the user did not group by it.
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
                "environment-differs",
                format!(
                    "trials of this cohort differ in {key}: {}",
                    shown.join(" vs ")
                ),
            );
        }
    }

    let latency = latency(valid);
    let script = valid.iter().any(|t| t.wall_s.is_some()).then(|| {
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
    });
    let runtime = valid.iter().any(|t| !t.runtime.is_empty()).then(|| {
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
    });
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
        },
        error_rate: summary(valid, |t| t.error_rate),
        script,
        outliers,
        noise: None,
    }
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

/// The values of two cohorts paired by block (same run, same block), one value per side and
/// block. A cohort may hold several configurations per block (`--by allocator` on a jit ×
/// allocator run): then each side's value in a block is the geometric mean of its
/// configurations' trials there, and a block counts only when each side has a value from
/// every one of its configurations in it, so both sides always average the same mix.
/// Pairing every trial with one baseline trial instead would count blocks twice and compare
/// mismatched configurations (the audit of issue 14 found 71–100% false verdicts).
struct BlockPairs {
    a: Vec<f64>,
    b: Vec<f64>,
    /// Blocks in which each side has at least one value.
    blocks_a: usize,
    blocks_b: usize,
    /// The most configurations either side holds within one run.
    configs_per_block: usize,
}

fn pairs(a: &[&TrialData], b: &[&TrialData], f: impl Fn(&TrialData) -> Option<f64>) -> BlockPairs {
    /// Per (source, block): the side's values by configuration; and per source, the
    /// configurations the side holds.
    type ByBlock = BTreeMap<(usize, u32), BTreeMap<usize, Vec<f64>>>;
    let by_block = |side: &[&TrialData]| -> (ByBlock, BTreeMap<usize, BTreeSet<usize>>) {
        let mut blocks: ByBlock = BTreeMap::new();
        let mut configs: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
        for t in side {
            if let Some(v) = f(t) {
                blocks
                    .entry((t.source, t.block))
                    .or_default()
                    .entry(t.config_id)
                    .or_default()
                    .push(v);
                configs.entry(t.source).or_default().insert(t.config_id);
            }
        }
        (blocks, configs)
    };
    let (blocks_a, configs_a) = by_block(a);
    let (blocks_b, configs_b) = by_block(b);
    // The value of one side in one block, if every configuration of the side is there.
    let block_value = |values: &BTreeMap<usize, Vec<f64>>, configs: &BTreeSet<usize>| {
        let complete = values.len() == configs.len();
        complete.then(|| {
            let all: Vec<f64> = values.values().flatten().copied().collect();
            geometric_mean(&all)
        })
    };
    let mut out = BlockPairs {
        a: Vec::new(),
        b: Vec::new(),
        blocks_a: blocks_a.len(),
        blocks_b: blocks_b.len(),
        configs_per_block: configs_a
            .values()
            .chain(configs_b.values())
            .map(BTreeSet::len)
            .max()
            .unwrap_or(0),
    };
    for (key, values_a) in &blocks_a {
        let Some(values_b) = blocks_b.get(key) else {
            continue;
        };
        let va = block_value(values_a, &configs_a[&key.0]);
        let vb = block_value(values_b, &configs_b[&key.0]);
        if let (Some(va), Some(vb)) = (va, vb) {
            out.a.push(va);
            out.b.push(vb);
        }
    }
    out
}

/// exp(mean ln x); 0 when any value is 0 (then no ratio is computed from it).
fn geometric_mean(x: &[f64]) -> f64 {
    if x.len() == 1 {
        return x[0];
    }
    if x.iter().any(|v| *v <= 0.0) {
        return 0.0;
    }
    (x.iter().map(|v| v.ln()).sum::<f64>() / x.len() as f64).exp()
}

fn compare(
    name: &str,
    valid: &[&TrialData],
    baseline: &str,
    base: &[&TrialData],
    m: &Metric,
    confidence: f64,
) -> Option<Comparison> {
    let value = |t: &TrialData| m.of(t);
    let pairs = pairs(valid, base, value);
    let (pa, pb) = (&pairs.a, &pairs.b);
    let a = values(valid, value);
    let b = values(base, value);
    if a.is_empty() || b.is_empty() {
        return None;
    }
    // Paired when most blocks pair up (the blocked design); unpaired otherwise.
    let paired = pa.len() >= 2 && pa.len() * 2 >= pairs.blocks_a.max(pairs.blocks_b);
    let (ci, test, test_name, n, n_base) = if paired {
        let ci = stats::ci::paired_ratio(pa, pb, confidence)?;
        let diffs: Vec<f64> = pa.iter().zip(pb).map(|(x, y)| x.ln() - y.ln()).collect();
        (
            ci,
            stats::ranktest::wilcoxon_signed_rank(&diffs),
            "wilcoxon-signed-rank",
            pa.len(),
            pb.len(),
        )
    } else {
        let ci = stats::ci::unpaired_ratio(&a, &b, confidence, RESAMPLES, BOOTSTRAP_SEED)?;
        (
            ci,
            stats::ranktest::mann_whitney_u(&a, &b),
            "mann-whitney-u",
            a.len(),
            b.len(),
        )
    };
    let p = test.map(|t| t.p_value);
    let min_p = if paired {
        let diffs: Vec<f64> = pa.iter().zip(pb).map(|(x, y)| x.ln() - y.ln()).collect();
        stats::ranktest::wilcoxon_min_p(&diffs)
    } else {
        stats::ranktest::mann_whitney_min_p(&a, &b)
    };
    let log_half_width = (ci.high.ln() - ci.low.ln()) / 2.0;
    // e^h − 1, as the precision rule of adaptive runs measures it: the two agree.
    let half_width_pct = ci.half_width_pct();
    Some(Comparison {
        cohort: name.to_string(),
        baseline: baseline.to_string(),
        metric: m.name.clone(),
        higher_is_better: m.higher_is_better,
        method: if paired { "paired" } else { "unpaired" }.into(),
        n,
        n_baseline: n_base,
        configs_per_block: if paired { pairs.configs_per_block } else { 1 },
        ratio: ci.ratio,
        ci_low: ci.low,
        ci_high: ci.high,
        test: test_name.into(),
        p_value: p,
        p_adjusted: p,
        family_size: 1,
        min_p_value: min_p,
        // Without any test (every difference zero) there is nothing a test could find.
        testable: min_p.is_some_and(|q| q <= ALPHA),
        significant: false,
        verdict: String::new(),
        half_width_pct,
        needed_for_1pct: stats::advice::blocks_for_log_half_width(
            log_half_width,
            n.min(n_base),
            0.01,
            confidence,
        ),
    })
}

/// Holm's step-down adjustment of the p-values of one family (one metric, every cohort
/// against the baseline): the i-th smallest of m p-values becomes
/// max over j ≤ i of min(1, (m − j + 1)·p₍ⱼ₎), which keeps the chance of any false
/// "significant" in the family at most α, where eight A/A cohorts tested one by one reach
/// 17–23%.
fn holm_adjust(family: &mut [&mut Comparison]) {
    let mut order: Vec<usize> = (0..family.len())
        .filter(|&i| family[i].p_value.is_some())
        .collect();
    let m = order.len();
    order.sort_by(|&i, &j| {
        family[i]
            .p_value
            .unwrap()
            .total_cmp(&family[j].p_value.unwrap())
    });
    let mut running: f64 = 0.0;
    for (rank, &i) in order.iter().enumerate() {
        let scaled = ((m - rank) as f64 * family[i].p_value.unwrap()).min(1.0);
        running = running.max(scaled);
        family[i].p_adjusted = Some(running);
    }
    for c in family.iter_mut() {
        c.family_size = m.max(1);
    }
}

/// The decision and its words, once the family's p-values are adjusted.
fn decide(c: &mut Comparison, m: &Metric) {
    // Holm's first step multiplies the smallest p by the family size, and no adjusted p is
    // below it: with m cohorts a comparison is testable only if m × its smallest possible p
    // can reach α (6 blocks and 3 cohorts cannot: 3 × 2/64 = 0.094).
    c.testable = c
        .min_p_value
        .is_some_and(|q| q * c.family_size as f64 <= ALPHA);
    let excludes_one = c.ci_low > 1.0 || c.ci_high < 1.0;
    c.significant = c.testable && excludes_one && c.p_adjusted.is_some_and(|p| p < ALPHA);
    let interval = format!("{:.2}× [{:.2}–{:.2}]", c.ratio, c.ci_low, c.ci_high);
    let p_words = match (c.p_value, c.p_adjusted) {
        (Some(_), Some(adjusted)) if c.family_size > 1 => {
            format!("{} (Holm, {} cohorts)", p_text(adjusted), c.family_size)
        }
        (Some(p), _) => p_text(p),
        _ => "no test".to_string(),
    };
    c.verdict = if !c.testable {
        let sample = if c.method == "paired" {
            format!("{} blocks allow", c.n)
        } else {
            format!("{} and {} trials allow", c.n, c.n_baseline)
        };
        match c.min_p_value {
            Some(q) if c.family_size > 1 && q <= ALPHA => format!(
                "too few {} to test {} cohorts: the smallest p-value {sample} is {}, {} after Holm's adjustment ({interval})",
                if c.method == "paired" { "blocks" } else { "trials" },
                c.family_size,
                format_min_p(q),
                format_min_p((q * c.family_size as f64).min(1.0))
            ),
            Some(q) => format!(
                "too few {} to test: the smallest p-value {sample} is {} ({interval})",
                if c.method == "paired" { "blocks" } else { "trials" },
                format_min_p(q)
            ),
            None => format!("~ no difference at all ({interval}, every block equal)"),
        }
    } else if c.significant {
        let pct = (c.ratio - 1.0) * 100.0;
        let words = if pct > 0.0 { &m.more } else { &m.less };
        format!(
            "{:.2}×, {:.1}% {words} [{:.2}–{:.2}], {p_words}",
            c.ratio,
            pct.abs(),
            c.ci_low,
            c.ci_high
        )
    } else if excludes_one && c.p_value.is_some_and(|p| p < ALPHA) && c.family_size > 1 {
        format!(
            "~ not significant after Holm over {} cohorts ({interval}, {}, adjusted {})",
            c.family_size,
            p_text(c.p_value.unwrap_or(1.0)),
            format_p(c.p_adjusted.unwrap_or(1.0))
        )
    } else {
        format!("~ no significant difference ({interval}, {p_words})")
    };
}

/// The smallest p-value a sample allows, exactly enough to check by hand: 2/32 = 0.0625.
fn format_min_p(q: f64) -> String {
    let text = format!("{q:.4}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Names the cohorts whose comparisons cannot be significant whatever the data: the
/// smallest p-value their blocks (or trials) allow is above α. The same rule decides the
/// verdict, so "too few" never sits next to a significant result.
fn too_few_warnings(comparisons: &[Comparison], warnings: &mut Vec<Warning>) {
    let mut seen = BTreeSet::new();
    for c in comparisons.iter().filter(|c| !c.testable) {
        let Some(q) = c.min_p_value else { continue };
        // The fewest blocks (trials) whose smallest p, times the family size, reaches α.
        let alpha = ALPHA / c.family_size.max(1) as f64;
        let (what, need) = if c.method == "paired" {
            let n = stats::advice::min_blocks_for_signed_rank(alpha).unwrap_or(6);
            (format!("{} blocks", c.n), format!("{n} blocks"))
        } else {
            let n = stats::advice::min_trials_for_rank_sum(alpha).unwrap_or(4);
            (
                format!("{} and {} trials", c.n, c.n_baseline),
                format!("{n} trials per cohort"),
            )
        };
        let family = if c.family_size > 1 {
            format!(
                " ({} after Holm's adjustment over {} cohorts)",
                format_min_p((q * c.family_size as f64).min(1.0)),
                c.family_size
            )
        } else {
            String::new()
        };
        if seen.insert(c.cohort.clone()) {
            warnings.push(Warning {
                kind: "too-few-trials".into(),
                cohort: Some(c.cohort.clone()),
                message: format!("{what} against {}: the smallest p-value they allow is {}{family}, so no difference can be called significant; the rank test needs at least {need}", c.baseline, format_min_p(q)),
            });
        }
    }
}

/// Says which runs are incomplete (interrupted, or still running), how much is missing, and
/// how to finish them: the cohorts shown are only what exists, and the baseline may not be
/// the configuration the experiment meant.
fn incomplete_warnings(sources: &[SourceData], baseline: &str, warnings: &mut Vec<Warning>) {
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
        warnings.push(Warning {
            kind: "incomplete-run".into(),
            cohort: None,
            message: format!(
                "{} is incomplete: {stored} of {} planned trials are stored ({}){absent}; finish it with `rubyrace run --resume {}`",
                s.dir.display(),
                s.scheduled,
                missing.join(", "),
                s.dir.display()
            ),
        });
    }
}

/// Names the valid HTTP trials whose latency histogram is missing or damaged: the merged
/// percentiles of their cohort leave them out.
fn latency_file_warnings(
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
fn differing_sides_warnings(
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

/// Says when a comparison combined several configurations per block, and how.
fn pooled_warnings(comparisons: &[Comparison], warnings: &mut Vec<Warning>) {
    let mut seen = BTreeSet::new();
    for c in comparisons.iter().filter(|c| c.configs_per_block > 1) {
        if seen.insert(c.cohort.clone()) {
            warnings.push(Warning {
                kind: "pooled-configurations".into(),
                cohort: Some(c.cohort.clone()),
                message: format!("{} and {} each hold up to {} configurations per block: each side's value in a block is the geometric mean of its configurations' trials, and only blocks where both sides have every configuration are paired ({} blocks)", c.cohort, c.baseline, c.configs_per_block, c.n),
            });
        }
    }
}

fn overhead(
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

/// For experiments with exactly two matrix axes that vary: the median per cell.
fn dot_matrix(
    order: &[String],
    members: &BTreeMap<String, Vec<&TrialData>>,
    workload: Workloads,
) -> Option<DotMatrix> {
    let first: Vec<&TrialData> = order
        .iter()
        .filter_map(|n| members[n].first().copied())
        .collect();
    let axis_names: BTreeSet<&String> = first.iter().flat_map(|t| t.axes.keys()).collect();
    let varying: Vec<&String> = axis_names
        .into_iter()
        .filter(|a| {
            first
                .iter()
                .filter_map(|t| t.axes.get(*a))
                .collect::<BTreeSet<_>>()
                .len()
                > 1
        })
        .collect();
    if varying.len() != 2 {
        return None;
    }
    let (rk, ck) = (varying[0], varying[1]);
    let mut rows: Vec<String> = Vec::new();
    let mut cols: Vec<String> = Vec::new();
    for t in &first {
        let (r, c) = (t.axes.get(rk)?.clone(), t.axes.get(ck)?.clone());
        if !rows.contains(&r) {
            rows.push(r);
        }
        if !cols.contains(&c) {
            cols.push(c);
        }
    }
    let script = workload == Workloads::Script;
    let mut cells = vec![vec![None; cols.len()]; rows.len()];
    for name in order {
        let ts = &members[name];
        let t = ts.first()?;
        let r = rows.iter().position(|x| Some(x) == t.axes.get(rk))?;
        let c = cols.iter().position(|x| Some(x) == t.axes.get(ck))?;
        let valid: Vec<&TrialData> = ts
            .iter()
            .copied()
            .filter(|t| t.status == TrialStatus::Valid)
            .collect();
        let s = if script {
            summary(&valid, |t| t.wall_s)
        } else {
            summary(&valid, |t| t.requests_per_s)
        };
        cells[r][c] = s.map(|s| (name.clone(), s.p50));
    }
    Some(DotMatrix {
        row_key: rk.clone(),
        col_key: ck.clone(),
        rows,
        cols,
        cells,
        unit: if script { "s wall" } else { "requests/s" }.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A valid trial of `label` in `block` with `rps`, on `machine`.
    fn trial(
        source: usize,
        id: usize,
        block: u32,
        label: &str,
        rps: f64,
        machine: &str,
    ) -> TrialData {
        let mut keys = BTreeMap::new();
        keys.insert("label".to_string(), label.to_string());
        keys.insert("machine".to_string(), machine.to_string());
        keys.insert("ruby_description".to_string(), "ruby 3.3.0".to_string());
        TrialData {
            source,
            trial_id: id,
            block,
            config_id: usize::from(label != "base"),
            label: label.into(),
            status: TrialStatus::Valid,
            started_at: format!("2026-01-01T00:{:02}:00Z", id),
            keys,
            requests_per_s: Some(rps),
            ..TrialData::default()
        }
    }

    fn source(trials: Vec<TrialData>) -> SourceData {
        SourceData {
            dir: PathBuf::from("/r"),
            experiment: "t".into(),
            created_at: String::new(),
            commands: vec![],
            smoke: false,
            doctor: vec![],
            adaptive: false,
            precision_end: None,
            scheduled: trials.len(),
            unfinished: vec![],
            design: experiment::design::Design::Blocks,
            trials,
        }
    }

    /// Eight blocks; "fast" is 10% faster than "base" in every block, with block-to-block
    /// drift that pairing cancels.
    fn blocked(machine_of: impl Fn(u32) -> &'static str) -> Vec<TrialData> {
        let mut t = Vec::new();
        for b in 0..8u32 {
            let level = 10_000.0 * (1.0 + 0.05 * f64::from(b % 3));
            t.push(trial(0, t.len(), b, "base", level, machine_of(b)));
            // Distinct ratios (no ties), so the signed-rank test is exact.
            let ratio = 1.10 + 0.001 * f64::from(b);
            t.push(trial(0, t.len(), b, "fast", level * ratio, machine_of(b)));
        }
        t
    }

    fn kinds(r: &Report) -> Vec<&str> {
        r.warnings.iter().map(|w| w.kind.as_str()).collect()
    }

    #[test]
    fn blocked_data_are_compared_by_block() {
        let r = analyze(&[source(blocked(|_| "m1"))], &Options::default()).unwrap();
        assert_eq!(r.baseline, "base");
        let c = r
            .comparisons
            .iter()
            .find(|c| c.metric == "throughput")
            .unwrap();
        assert_eq!((c.method.as_str(), c.n), ("paired", 8));
        assert!((c.ratio - 1.1035).abs() < 1e-3, "{c:?}");
        assert!(c.significant, "{c:?}");
        assert!(
            c.verdict
                .starts_with("1.10×, 10.3% faster [1.10–1.11], p=0.008"),
            "{}",
            c.verdict
        );
        assert_eq!(c.p_value, Some(2.0 / 256.0));
    }

    /// Interleaved trials: the design is named, each cohort's CPU between its slices is
    /// shown, and a warning comes only when those rates are more than 1% of a CPU apart.
    #[test]
    fn interleaved_runs_name_their_design_and_warn_when_idle_cpu_differs() {
        let run = |fast_idle: f64| {
            let mut trials = blocked(|_| "m1");
            for t in &mut trials {
                t.idle_cpu_per_s = Some(if t.label == "base" {
                    2_000.0
                } else {
                    fast_idle
                });
            }
            let mut s = source(trials);
            s.design = experiment::design::Design::Interleaved {
                slice: std::time::Duration::from_secs(1),
                rounds: 10,
            };
            analyze(&[s], &Options::default()).unwrap()
        };
        let close = run(11_000.0);
        assert!(
            !kinds(&close).contains(&"idle-cpu-differs"),
            "{:?}",
            close.warnings
        );
        assert_eq!(
            close.sources[0].design,
            "interleaved: 10 rounds of 1s slices per block"
        );
        assert_eq!(
            crate::render::cells::design_lines(&close),
            ["Design of /r: interleaved: 10 rounds of 1s slices per block. A trial's figures are its slices'; between them its server used (median CPU per second): base 2.0 ms/s, fast 11.0 ms/s."]
        );
        let apart = run(12_500.0);
        let w = apart
            .warnings
            .iter()
            .find(|w| w.kind == "idle-cpu-differs")
            .expect("10.5 ms/s apart");
        assert!(
            w.message.contains("(base 2.0 ms/s, fast 12.5 ms/s)"),
            "{}",
            w.message
        );
        // A blocks run says nothing of a design.
        let blocks = analyze(&[source(blocked(|_| "m1"))], &Options::default()).unwrap();
        assert!(crate::render::cells::design_lines(&blocks).is_empty());
        assert_eq!(blocks.sources[0].design, "blocks");
    }

    /// Script trials: wall time, and the script's own metrics compared like any other, a
    /// rate (`_per_s`) being better higher and a time better lower.
    #[test]
    fn script_metrics_are_compared_with_the_baseline() {
        let mut trials = Vec::new();
        for b in 0..8u32 {
            for (label, slower) in [("base", 1.0), ("slow", 2.0 + 0.01 * f64::from(b))] {
                let mut t = trial(0, trials.len(), b, label, 0.0, "m1");
                t.requests_per_s = None;
                t.wall_s = Some(1.0 * slower);
                t.metrics.insert("calls_per_s".into(), 1000.0 / slower);
                t.metrics.insert("setup_ms".into(), 5.0 * slower);
                trials.push(t);
            }
        }
        let r = analyze(&[source(trials)], &Options::default()).unwrap();
        let find = |metric: &str| {
            r.comparisons
                .iter()
                .find(|c| c.metric == metric)
                .unwrap_or_else(|| panic!("no {metric} in {:?}", r.comparisons))
        };
        let rate = find("calls_per_s");
        assert!(rate.higher_is_better && rate.significant, "{rate:?}");
        assert!((rate.ratio - 1.0 / 2.035).abs() < 0.01, "{rate:?}");
        assert!(
            rate.verdict.starts_with("0.49×, 50.9% lower calls_per_s ["),
            "{}",
            rate.verdict
        );
        let time = find("setup_ms");
        assert!(!time.higher_is_better && time.significant, "{time:?}");
        assert!(time.verdict.contains("higher setup_ms"), "{}", time.verdict);
        assert!(find("wall").verdict.contains("slower (wall time)"));
        assert!(r.comparisons.iter().all(|c| c.metric != "throughput"));
    }

    #[test]
    fn several_machines_are_kept_apart_by_default() {
        let r = analyze(
            &[source(blocked(|b| if b < 4 { "m1" } else { "m2" }))],
            &Options::default(),
        )
        .unwrap();
        assert_eq!(r.group_by, ["label", "machine"]);
        let names: Vec<&str> = r.cohorts.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "base machine=m1",
                "base machine=m2",
                "fast machine=m1",
                "fast machine=m2"
            ]
        );
        // Pooled on request, with a warning.
        let pooled = Options {
            by: vec!["label".into()],
            ..Options::default()
        };
        let r = analyze(
            &[source(blocked(|b| if b < 4 { "m1" } else { "m2" }))],
            &pooled,
        )
        .unwrap();
        assert!(kinds(&r).contains(&"mixed-machines"), "{:?}", r.warnings);
        assert!(
            kinds(&r).contains(&"environment-differs"),
            "{:?}",
            r.warnings
        );
    }

    #[test]
    fn trials_without_shared_blocks_are_compared_unpaired() {
        let mut t = Vec::new();
        for i in 0..6 {
            t.push(trial(
                0,
                t.len(),
                i,
                "base",
                10_000.0 + 10.0 * i as f64,
                "m",
            ));
        }
        for i in 0..6 {
            t.push(trial(
                1,
                t.len(),
                i,
                "fast",
                12_000.0 + 10.0 * i as f64,
                "m",
            ));
        }
        let r = analyze(&[source(t)], &Options::default()).unwrap();
        let c = r
            .comparisons
            .iter()
            .find(|c| c.metric == "throughput")
            .unwrap();
        assert_eq!(
            (c.method.as_str(), c.test.as_str()),
            ("unpaired", "mann-whitney-u")
        );
        assert!(c.significant && c.ratio > 1.19 && c.ratio < 1.21, "{c:?}");
    }

    #[test]
    fn drift_noise_outliers_and_differing_rubies_are_warned_about() {
        let mut t = Vec::new();
        for i in 0..10u32 {
            // base drifts down steadily; fast is noisy with one wild trial.
            t.push(trial(
                0,
                t.len(),
                i,
                "base",
                10_000.0 - 200.0 * f64::from(i),
                "m",
            ));
            let wild = if i == 4 {
                30_000.0
            } else {
                11_000.0 + 100.0 * f64::from(i % 2)
            };
            t.push(trial(0, t.len(), i, "fast", wild, "m"));
        }
        t[3].keys
            .insert("ruby_description".into(), "ruby 3.3.1".into());
        // Every trial has a probe directory of its own: that is no difference.
        for (i, x) in t.iter_mut().enumerate() {
            x.keys.insert(
                "env.RUBYRACE_PROBE_DIR".into(),
                format!("/r/trials/{i:05}/probe"),
            );
        }
        let r = analyze(&[source(t)], &Options::default()).unwrap();
        let of = |kind: &str, cohort: &str| {
            r.warnings
                .iter()
                .any(|w| w.kind == kind && w.cohort.as_deref() == Some(cohort))
        };
        assert!(of("drift", "base"), "{:?}", r.warnings);
        assert!(of("high-cv", "fast"), "{:?}", r.warnings);
        assert!(of("outliers", "fast"), "{:?}", r.warnings);
        assert!(of("environment-differs", "fast"), "{:?}", r.warnings);
        assert!(!of("environment-differs", "base"), "{:?}", r.warnings);
        assert!(!of("drift", "fast"), "{:?}", r.warnings);
    }

    #[test]
    fn the_doctors_warnings_at_run_start_are_report_warnings() {
        use doctor::{Finding, Report as Doctor, Status};
        let finding = |name: &str, status: Status| Finding {
            name: name.into(),
            status,
            value: format!("{name} value"),
            advice: format!("fix {name}"),
        };
        let doctor = Doctor {
            schema: doctor::SCHEMA.into(),
            checked_at: "2026-11-22T00:00:00Z".into(),
            findings: vec![
                finding("load", Status::Warn),
                finding("swap", Status::Ok),
                finding("aslr", Status::Info),
            ],
            failed_checks: vec![],
        };
        let mut src = source(blocked(|_| "m"));
        // A run and its resume found the same thing: said once.
        src.doctor = vec![doctor.clone(), doctor];
        let r = analyze(&[src], &Options::default()).unwrap();
        let machine: Vec<&Warning> = r.warnings.iter().filter(|w| w.kind == "machine").collect();
        assert_eq!(machine.len(), 1, "{:?}", r.warnings);
        assert_eq!(
            machine[0].message,
            "rubyrace doctor when the run started: load: load value → fix load"
        );
    }

    #[test]
    fn invalid_trials_are_counted_and_excluded() {
        let mut t = blocked(|_| "m");
        t[1].status = TrialStatus::Invalid;
        t[1].reason = Some("error rate 3% exceeds max_error_rate 0%".into());
        t[1].requests_per_s = Some(1.0);
        let r = analyze(&[source(t)], &Options::default()).unwrap();
        let fast = r.cohorts.iter().find(|c| c.name == "fast").unwrap();
        assert_eq!((fast.valid, fast.invalid), (7, 1));
        assert!(fast.throughput.as_ref().unwrap().min > 10_000.0);
        assert!(r
            .warnings
            .iter()
            .any(|w| w.kind == "invalid-trials" && w.message.contains("error rate 3%")));
    }

    /// A 2×2 of jit (none/yjit; yjit `jit_effect`× as fast) × allocator (glibc/jemalloc;
    /// jemalloc `alloc_effect`× as fast), `blocks` blocks, each block with its own level
    /// and every trial with lognormal noise of SD `sd` (log scale).
    fn jit_by_allocator(
        rng: &mut stats::SeededRng,
        blocks: u32,
        sd: f64,
        jit_effect: f64,
        alloc_effect: f64,
    ) -> Vec<TrialData> {
        let mut t = Vec::new();
        for b in 0..blocks {
            let level = 1000.0 * (0.2 * rng.standard_normal()).exp();
            let configs = [
                ("none", "glibc"),
                ("none", "jemalloc"),
                ("yjit", "glibc"),
                ("yjit", "jemalloc"),
            ];
            for (config_id, (jit, alloc)) in configs.into_iter().enumerate() {
                let effect = if jit == "yjit" { jit_effect } else { 1.0 }
                    * if alloc == "jemalloc" {
                        alloc_effect
                    } else {
                        1.0
                    };
                let rps = level * effect * (sd * rng.standard_normal()).exp();
                let mut x = trial(0, t.len(), b, &format!("{jit} {alloc}"), rps, "m");
                x.config_id = config_id;
                x.keys.insert("jit".into(), jit.into());
                x.keys.insert("allocator".into(), alloc.into());
                t.push(x);
            }
        }
        t
    }

    fn by_allocator() -> Options {
        Options {
            by: vec!["allocator".into()],
            ..Options::default()
        }
    }

    fn throughput(r: &Report) -> &Comparison {
        r.comparisons
            .iter()
            .find(|c| c.metric == "throughput")
            .expect("a throughput comparison")
    }

    /// Issue 13 item 4 / issue 14 item 1: `--by allocator` on a jit × allocator run used to
    /// pair every jemalloc trial with the last glibc trial of its block (n doubled, YJIT
    /// trials against interpreter trials).
    #[test]
    fn cohorts_of_several_configurations_are_paired_block_by_block() {
        let mut rng = stats::SeededRng::new(7);
        let r = analyze(
            &[source(jit_by_allocator(&mut rng, 12, 0.02, 1.5, 1.0))],
            &by_allocator(),
        )
        .unwrap();
        let c = throughput(&r);
        assert_eq!(
            (c.cohort.as_str(), c.baseline.as_str()),
            ("allocator=jemalloc", "allocator=glibc")
        );
        assert_eq!(
            (c.method.as_str(), c.n, c.configs_per_block),
            ("paired", 12, 2)
        );
        assert!(c.ci_low < 1.0 && c.ci_high > 1.0, "{c:?}");
        assert!((c.ratio - 1.0).abs() < 0.02, "{c:?}");
        assert!(
            kinds(&r).contains(&"pooled-configurations"),
            "{:?}",
            r.warnings
        );

        // A block missing one configuration of one side is left out, not half-compared.
        let mut trials = jit_by_allocator(&mut rng, 12, 0.02, 1.5, 1.0);
        trials.retain(|t| !(t.block == 3 && t.label == "yjit glibc"));
        let r = analyze(&[source(trials)], &by_allocator()).unwrap();
        assert_eq!(throughput(&r).n, 11);
    }

    /// Seeded simulation on synthetic truth of pooled cohorts: with no allocator effect
    /// (and a 1.5× jit effect inside each cohort) a difference is called in at most 5% of
    /// runs and the 95% interval covers 1 in 95% ± 1.5 of them, the issue's bounds; with a
    /// real 1.10× effect it is found nearly always. Before the fix, 71–100% of null runs
    /// were "significant". 2000 runs: the Monte-Carlo standard error of either rate near 5%
    /// is 0.49 points, so ± 1.5 is 3 of them. Measured with this seed: 3.55% false
    /// positives (the signed-rank test is conservative at 10 blocks), 95.6% coverage, 99.95%
    /// power.
    #[test]
    fn pooled_cohorts_keep_their_false_positive_rate_coverage_and_power() {
        let mut rng = stats::SeededRng::new(2026);
        let runs = 2000;
        let (mut false_positives, mut covered, mut found) = (0, 0, 0);
        for _ in 0..runs {
            let null = analyze(
                &[source(jit_by_allocator(&mut rng, 10, 0.05, 1.5, 1.0))],
                &by_allocator(),
            )
            .unwrap();
            let c = throughput(&null);
            false_positives += usize::from(c.significant);
            covered += usize::from(c.ci_low <= 1.0 && 1.0 <= c.ci_high);
            let real = analyze(
                &[source(jit_by_allocator(&mut rng, 10, 0.05, 1.5, 1.10))],
                &by_allocator(),
            )
            .unwrap();
            found += usize::from(throughput(&real).significant);
        }
        let rate = |k: usize| k as f64 / runs as f64;
        assert!(
            rate(false_positives) <= 0.05,
            "false positives {}",
            rate(false_positives)
        );
        assert!(
            (rate(covered) - 0.95).abs() <= 0.015,
            "coverage {}",
            rate(covered)
        );
        assert!(rate(found) >= 0.90, "power {}", rate(found));
    }

    /// Issue 13 item 18: a value with a newline or a terminal escape (grouped by an
    /// environment variable) made a cohort name that broke every table row.
    #[test]
    fn cohort_names_show_control_characters_escaped() {
        let mut t = blocked(|_| "m");
        for x in &mut t {
            let v = if x.label == "base" {
                "a\nb"
            } else {
                "\u{1b}[31mred"
            };
            x.keys.insert("env.X".into(), v.into());
        }
        let options = Options {
            by: vec!["env.X".into()],
            ..Options::default()
        };
        let r = analyze(&[source(t)], &options).unwrap();
        let names: Vec<&str> = r.cohorts.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["env.X=a\\nb", "env.X=\\u{1b}[31mred"]);
    }

    /// `n` blocks of `cohorts` configurations ("c0" the baseline), cohort k `effect(k)`× the
    /// baseline, block levels with SD 0.2 and trial noise with SD `sd` (log scale).
    fn blocks_of(
        rng: &mut stats::SeededRng,
        n: u32,
        cohorts: usize,
        sd: f64,
        effect: impl Fn(usize) -> f64,
    ) -> Vec<TrialData> {
        let mut t = Vec::new();
        for b in 0..n {
            let level = 1000.0 * (0.2 * rng.standard_normal()).exp();
            for k in 0..cohorts {
                let rps = level * effect(k) * (sd * rng.standard_normal()).exp();
                let mut x = trial(0, t.len(), b, &format!("c{k}"), rps, "m");
                x.config_id = k;
                t.push(x);
            }
        }
        t
    }

    /// Issue 14 item 3: with 5 blocks a plain 1.5× effect read "~ no significant
    /// difference", and "too-few-trials" could sit next to a significant verdict. Both now
    /// come from the smallest p-value the data allow.
    #[test]
    fn too_few_blocks_say_so_instead_of_no_difference() {
        let mut rng = stats::SeededRng::new(3);
        let r = analyze(
            &[source(blocks_of(&mut rng, 5, 2, 0.02, |k| {
                if k == 1 {
                    1.5
                } else {
                    1.0
                }
            }))],
            &Options::default(),
        )
        .unwrap();
        let c = throughput(&r);
        assert!(!c.testable && !c.significant, "{c:?}");
        assert!(
            c.verdict.starts_with(
                "too few blocks to test: the smallest p-value 5 blocks allow is 0.0625 (1.4"
            ),
            "{}",
            c.verdict
        );
        assert!(c.ci_low > 1.4, "{c:?}");
        assert!(kinds(&r).contains(&"too-few-trials"));
        let r = analyze(
            &[source(blocks_of(&mut rng, 6, 2, 0.02, |k| {
                if k == 1 {
                    1.5
                } else {
                    1.0
                }
            }))],
            &Options::default(),
        )
        .unwrap();
        let c = throughput(&r);
        assert!(c.testable && c.significant, "{c:?}");
        assert!(c.verdict.ends_with("p=0.031"), "{}", c.verdict);
        assert!(!kinds(&r).contains(&"too-few-trials"), "{:?}", r.warnings);
        // p-values below 0.001 read "p<0.001", not "p=<0.001".
        assert_eq!(p_text(0.0004), "p<0.001");
        assert_eq!(p_text(0.0213), "p=0.021");
    }

    /// Holm's method against reference values: p = (0.01, 0.04, 0.03, 0.5) adjust to
    /// (0.04, 0.09, 0.09, 0.5) (R: p.adjust(c(0.01, 0.04, 0.03, 0.5), "holm")).
    #[test]
    fn holm_adjusts_like_r() {
        let mut rng = stats::SeededRng::new(1);
        let r = analyze(
            &[source(blocks_of(&mut rng, 8, 2, 0.02, |_| 1.0))],
            &Options::default(),
        )
        .unwrap();
        let mut cs: Vec<Comparison> = [0.01, 0.04, 0.03, 0.5]
            .iter()
            .map(|&p| Comparison {
                p_value: Some(p),
                ..throughput(&r).clone()
            })
            .collect();
        let mut family: Vec<&mut Comparison> = cs.iter_mut().collect();
        holm_adjust(&mut family);
        let adjusted: Vec<f64> = cs.iter().map(|c| c.p_adjusted.unwrap()).collect();
        let want = [0.04, 0.09, 0.09, 0.5];
        for (a, w) in adjusted.iter().zip(want) {
            assert!((a - w).abs() < 1e-12, "{adjusted:?}");
        }
        assert!(cs.iter().all(|c| c.family_size == 4));
    }

    /// Seeded simulations through `analyze()` of A/A experiments (no effect anywhere):
    /// one cohort against the baseline over 10 blocks, false "significant" ≤ 5% and 95%
    /// coverage ± 1.5; eight cohorts against the baseline, the chance of any false
    /// "significant" ≤ 5% with Holm (17–23% without, found by the audit of issue 14).
    #[test]
    fn a_over_a_false_positives_and_coverage_with_and_without_many_cohorts() {
        let mut rng = stats::SeededRng::new(20261123);
        let runs = 2000;
        let (mut false_positives, mut covered) = (0, 0);
        for _ in 0..runs {
            let r = analyze(
                &[source(blocks_of(&mut rng, 10, 2, 0.05, |_| 1.0))],
                &Options::default(),
            )
            .unwrap();
            let c = throughput(&r);
            false_positives += usize::from(c.significant);
            covered += usize::from(c.ci_low <= 1.0 && 1.0 <= c.ci_high);
        }
        let rate = |k: usize, n: usize| k as f64 / n as f64;
        assert!(
            rate(false_positives, runs) <= 0.05,
            "A/A false positives {}",
            rate(false_positives, runs)
        );
        assert!(
            (rate(covered, runs) - 0.95).abs() <= 0.015,
            "coverage {}",
            rate(covered, runs)
        );

        let runs = 400;
        let mut any = 0;
        for _ in 0..runs {
            let r = analyze(
                &[source(blocks_of(&mut rng, 10, 9, 0.05, |_| 1.0))],
                &Options::default(),
            )
            .unwrap();
            let family: Vec<&Comparison> = r
                .comparisons
                .iter()
                .filter(|c| c.metric == "throughput")
                .collect();
            assert_eq!(family.len(), 8);
            assert!(family.iter().all(|c| c.family_size == 8));
            any += usize::from(family.iter().any(|c| c.significant));
        }
        assert!(
            rate(any, runs) <= 0.05,
            "any of 8 A/A cohorts significant: {}",
            rate(any, runs)
        );
    }

    /// Issue 14 item 6, seeded simulation on clean data: 2 configurations × 6 blocks (the
    /// demo's size), 4 × 10 and 8 × 10, the blocks differing by 20% (which pairing cancels)
    /// and trials by 2% within a block. Each warning fires in at most 10% of reports, the
    /// issue's goal, whatever the number of cohorts (raw Tukey fences fired in 45–59% of
    /// runs, the raw CV in 92–100%; robust fences at a fixed 2% per cohort fired in 19% of
    /// these 8-cohort runs and 6.8% of the 4-cohort ones, so they are Bonferroni-adjusted
    /// over the cohorts like the drift test: measured 2.0%, 5.0%, 5.5% for 2, 4, 8 cohorts).
    /// `high-cv` is a threshold on an estimate (5% within blocks), not a test at a level:
    /// with 2% noise it fired in none of the 1200 clean runs, and more cohorts cannot push
    /// it near 10% unless the noise itself is near the threshold, so it is not adjusted. 400 runs each: the Monte-Carlo standard error of a rate near 5% is 1.1 points,
    /// so a true rate of 5% passes the 10% bound with a margin of over 4 of them.
    ///
    /// And they still find what they are for, in 100 runs of each size: one trial 40% slow
    /// is flagged, and noisy trials are called high: 10% noise per trial with 4 and 8
    /// configurations, 15% with 2, because the within-block SD that `high-cv` judges is a
    /// trial's spread against its block's mean, σ·√(1 − 1/k) for k configurations per
    /// block, which for k = 2 is σ/√2 (10% noise reads 7.1%, and 6 blocks put that below the
    /// 5% threshold in about a fifth of runs).
    #[test]
    fn warnings_rarely_fire_on_clean_data_and_still_find_real_trouble() {
        let mut rng = stats::SeededRng::new(61);
        for (configs, blocks, slow_trial, noisy_sd) in
            [(2, 6, 7, 0.15), (4, 10, 13, 0.10), (8, 10, 43, 0.10)]
        {
            let runs = 400;
            let mut fired: BTreeMap<String, usize> = BTreeMap::new();
            for _ in 0..runs {
                let r = analyze(
                    &[source(blocks_of(&mut rng, blocks, configs, 0.02, |k| {
                        1.0 + 0.1 * k as f64
                    }))],
                    &Options::default(),
                )
                .unwrap();
                let kinds: BTreeSet<&str> = r.warnings.iter().map(|w| w.kind.as_str()).collect();
                for k in kinds {
                    *fired.entry(k.to_string()).or_default() += 1;
                }
            }
            for kind in ["outliers", "high-cv", "drift"] {
                let rate = fired.get(kind).copied().unwrap_or(0) as f64 / runs as f64;
                assert!(
                    rate <= 0.10,
                    "{configs} × {blocks}: {kind} fired in {rate} of clean runs ({fired:?})"
                );
            }

            let (mut flagged, mut noisy) = (0, 0);
            let slow = format!("0:{slow_trial}");
            for _ in 0..100 {
                let mut t = blocks_of(&mut rng, blocks, configs, 0.02, |_| 1.0);
                assert_eq!(t[slow_trial].trial_id, slow_trial);
                t[slow_trial].requests_per_s = t[slow_trial].requests_per_s.map(|v| v * 0.6);
                let r = analyze(&[source(t)], &Options::default()).unwrap();
                flagged += usize::from(
                    r.warnings
                        .iter()
                        .any(|w| w.kind == "outliers" && w.message.contains(&slow)),
                );
                let r = analyze(
                    &[source(blocks_of(
                        &mut rng,
                        blocks,
                        configs,
                        noisy_sd,
                        |_| 1.0,
                    ))],
                    &Options::default(),
                )
                .unwrap();
                noisy += usize::from(kinds(&r).contains(&"high-cv"));
            }
            assert!(
                flagged >= 90,
                "{configs} × {blocks}: a 40% slow trial flagged in {flagged} of 100 runs"
            );
            assert!(
                noisy >= 90,
                "{configs} × {blocks}: {noisy_sd} noise within blocks called high in {noisy} of 100 runs"
            );
        }
    }

    /// With several cohorts the smallest possible p is multiplied by Holm's first step: 6
    /// blocks and 3 cohorts cannot reach p < 0.05 (3 × 2/64 = 0.094), and say so, where a
    /// plain 1.5× effect used to read "~ no significant difference after Holm's adjustment";
    /// 7 blocks can (3 × 2/128 = 0.047).
    #[test]
    fn too_few_blocks_count_the_cohorts_they_are_adjusted_over() {
        let mut rng = stats::SeededRng::new(8);
        let effect = |k: usize| if k == 0 { 1.0 } else { 1.5 };
        let r = analyze(
            &[source(blocks_of(&mut rng, 6, 4, 0.02, effect))],
            &Options::default(),
        )
        .unwrap();
        let c = throughput(&r);
        assert!(!c.testable && !c.significant, "{c:?}");
        assert!(
            c.verdict.starts_with("too few blocks to test 3 cohorts: the smallest p-value 6 blocks allow is 0.0312, 0.0938 after Holm's adjustment (1.5"),
            "{}",
            c.verdict
        );
        let w: Vec<&Warning> = r
            .warnings
            .iter()
            .filter(|w| w.kind == "too-few-trials")
            .collect();
        assert_eq!(w.len(), 3);
        assert!(
            w[0].message
                .ends_with("the rank test needs at least 7 blocks"),
            "{}",
            w[0].message
        );
        let r = analyze(
            &[source(blocks_of(&mut rng, 7, 4, 0.02, effect))],
            &Options::default(),
        )
        .unwrap();
        assert!(
            r.comparisons
                .iter()
                .filter(|c| c.metric == "throughput")
                .all(|c| c.significant),
            "{:?}",
            r.comparisons
        );
    }
}
