//! From trials to an answer: cohorts (groups of trials sharing the grouping keys), their
//! summaries, comparisons with the baseline (paired by block when the data come from the
//! blocked design, unpaired bootstrap otherwise), the overhead per request, and the
//! warnings that keep a reader honest.
//!
//! `analyze` (here) groups the trials into cohorts and assembles the `Report` (with the
//! timeline, the environment per cohort and the dot matrix of two-axis experiments); the
//! rest is in these modules:
//! - `metrics`: the figures compared (HTTP, or a script's wall time, peak RSS and its own
//!   metrics), and the summaries of a figure over trials;
//! - `cohort`: cohort names, and one cohort's summaries and own warnings (invalid trials,
//!   outliers, noise and drift judged within blocks, differing environments);
//! - `compare`: a cohort against the baseline: pairing by block, the interval
//!   (simultaneous over the cohorts) and the verdict in words read off it, the rank test as
//!   a check;
//! - `overhead`: `--overhead A B`, the time per request one cohort adds to another;
//! - `profile`: each cohort's profile per profiler, and the frames whose time per request
//!   changed against the baseline (paired by block, Holm over the frames);
//! - `warnings`: the warnings drawn from several cohorts or comparisons (too few blocks,
//!   incomplete runs, unreadable latency files, differing sides, pooled configurations,
//!   idle CPU between interleaved slices).

mod cohort;
mod compare;
mod grouping;
mod hosts;
mod metrics;
mod overhead;
mod profile;
mod steps;
mod warnings;

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, Result};

use results::TrialStatus;

use crate::input::{SourceData, TrialData};
use crate::model::{
    CohortEnvironment, Comparison, DotMatrix, Report, Source, TrialPoint, Warning, Workloads,
    REPORT_SCHEMA,
};
use cohort::{block_ratio_outliers, block_residuals, cohort, cohort_name, RunContext};
use compare::{compare, decide, holm_adjust, shape_level};
use grouping::{group_trials, Grouping};
use metrics::{http_metrics, script_metrics, summary, Metric};
use overhead::overhead;
use warnings::{
    differing_sides_warnings, idle_cpu_warnings, incomplete_warnings, latency_file_warnings,
    mixed_configurations_warnings, pooled_warnings, shape_warnings, slice_tail_warnings,
};

pub use metrics::script_metric_higher_is_better;

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

/// Builds the report.
pub fn analyze(sources: &[SourceData], options: &Options) -> Result<Report> {
    let g = group_trials(sources, options)?;
    let http = g.all.iter().any(|t| t.requests_per_s.is_some());
    let workload = workload_of(&g.all);
    // The figure compared first: throughput, or a script's wall time.
    let main: fn(&TrialData) -> Option<f64> = if http {
        |t| t.requests_per_s
    } else {
        |t| t.wall_s
    };

    let mut warnings = Vec::new();
    let cohorts = summarize_cohorts(sources, &g, http, main, &mut warnings);

    // Comparisons with the baseline.
    // Interleaved runs leave out of each trial what its server did while the load was on the
    // others; co-scheduled ones load every server at once, so only the slices' edges are
    // outside them (15–20 ms), which is no one's idle work.
    let interleaved = sources
        .iter()
        .any(|s| matches!(s.design, experiment::design::Design::Interleaved { .. }));
    let compared = compare_cohorts(sources, &g, workload, interleaved, &mut warnings);

    let overhead = overhead_of(options, &g.order, &g.members, compared.confidence)?;

    run_warnings(sources, &g, &cohorts, interleaved, &mut warnings);
    let host_table = host_table(sources, &g, main, compared.main_metric, &mut warnings);
    unimported_warnings(sources, &mut warnings);
    mixed_machines_warning(&g, &mut warnings);

    doctor_warnings(sources, &mut warnings);

    let trials = timeline(&g.all, &g.order, &g.by);

    let matrix = dot_matrix(&g.order, &g.members, workload);
    let environment = cohort_environments(&g.order, &g.members);

    let mut report = Report {
        schema: REPORT_SCHEMA.into(),
        command: options.command.clone(),
        confidence: compared.confidence,
        sources: report_sources(sources),
        workload,
        group_by: g.by,
        baseline: g.baseline,
        cohorts,
        comparisons: compared.comparisons,
        overhead,
        warnings,
        trials,
        matrix,
        environment,
        profiles: compared.profiles,
        frame_changes: compared.frame_changes,
        sparse_frames: compared.sparse_frames,
        steps: compared.steps,
        hosts: host_table,
    };
    let intervals = report.interval_label();
    design_warnings(sources, &intervals, &mut report.warnings);
    Ok(report)
}

/// What the trials measured: HTTP, a script, or both.
fn workload_of(all: &[&TrialData]) -> Workloads {
    let script = all.iter().any(|t| t.wall_s.is_some());
    let http = all.iter().any(|t| t.requests_per_s.is_some());
    match (http, script) {
        (true, true) => Workloads::Mixed,
        (false, true) => Workloads::Script,
        _ => Workloads::Http,
    }
}

/// Each cohort's summaries with its own warnings (outliers and noise judged within
/// blocks, the noise record's conditions), after the warnings about blocks' ratios and
/// noisy blocks shared by the cohorts.
fn summarize_cohorts(
    sources: &[SourceData],
    g: &Grouping,
    http: bool,
    main: fn(&TrialData) -> Option<f64>,
    warnings: &mut Vec<Warning>,
) -> Vec<crate::model::Cohort> {
    let (order, members, by) = (&g.order, &g.members, &g.by);
    let mut cohorts = Vec::new();
    let all_valid = valid(&g.all);
    let (residuals, outlier_residuals, in_pairs) = block_residuals(&all_valid, main);
    let context = RunContext {
        residuals,
        outlier_residuals,
        in_pairs,
        cohorts: order.len(),
    };
    block_ratio_outliers(
        &all_valid,
        main,
        |t| cohort_name(t, by),
        if http { "throughput" } else { "wall time" },
        warnings,
    );
    // Interleaved and co-scheduled blocks share one noise record: their noisy trials are
    // named once, by block.
    let shared_blocks = sources
        .iter()
        .all(|s| !matches!(s.design, experiment::design::Design::Blocks));
    if shared_blocks {
        let shown: Vec<&TrialData> = order
            .iter()
            .flat_map(|n| members[n].iter().copied())
            .collect();
        warnings.extend(crate::noise::noisy_blocks_warning(&shown));
    }
    for name in order {
        let trials = &members[name];
        let mut c = cohort(name, trials, &valid(trials), by, &context, warnings);
        c.noise = crate::noise::cohort_noise(trials);
        if let Some(n) = &c.noise {
            warnings.extend(crate::noise::condition_warnings(name, n));
        }
        if !shared_blocks {
            warnings.extend(crate::noise::noisy_warning(name, trials));
        }
        cohorts.push(c);
    }
    cohorts
}

/// What the cohorts' comparisons with the baseline give the report.
struct Compared {
    /// The level of every interval.
    confidence: f64,
    /// The metric compared first: "throughput", or a script's "wall".
    main_metric: &'static str,
    comparisons: Vec<Comparison>,
    profiles: Vec<crate::model::CohortProfile>,
    frame_changes: Vec<crate::model::FrameChange>,
    sparse_frames: Vec<crate::model::SparseFrames>,
    steps: Vec<crate::model::CohortStep>,
}

/// Every cohort against the baseline: on each metric some trial has, by profile, and by
/// scenario step, with the warnings drawn from the comparisons.
fn compare_cohorts(
    sources: &[SourceData],
    g: &Grouping,
    workload: Workloads,
    interleaved: bool,
    warnings: &mut Vec<Warning>,
) -> Compared {
    let (all, order, members, baseline) = (&g.all, &g.order, &g.members, &g.baseline);
    let metrics: Vec<Metric> = if workload == Workloads::Script {
        script_metrics(all)
    } else {
        let shared_machine = sources
            .iter()
            .any(|s| !matches!(s.design, experiment::design::Design::Blocks));
        http_metrics(
            shared_machine,
            interleaved && all.iter().any(|t| t.cpu_per_request_with_idle.is_some()),
        )
    };
    // Only figures some trial has (memory per worker needs workers): the others would
    // count in the metrics' shape level without being compared.
    let metrics: Vec<Metric> = metrics
        .into_iter()
        .filter(|m| all.iter().any(|t| m.of(t).is_some()))
        .collect();
    // An adaptive run (it stopped when precise enough) is reported at the confidence its
    // stopping rule used, which keeps the coverage at least 95% (experiment::precision).
    let confidence = if sources.iter().any(|s| s.adaptive) {
        experiment::precision::SEQUENTIAL_CONFIDENCE
    } else {
        CONFIDENCE
    };
    let main_metric = if workload == Workloads::Script {
        "wall"
    } else {
        "throughput"
    };
    let comparisons =
        compare_with_baseline(order, members, baseline, &metrics, confidence, main_metric);
    let (profiles, frame_changes, sparse_frames) =
        profile::profiles(order, members, baseline, confidence);
    let steps = steps::scenario_steps(order, members);
    warnings.extend(profile::warnings(&profiles));
    pooled_warnings(&comparisons, warnings);
    shape_warnings(&comparisons, main_metric, warnings);
    Compared {
        confidence,
        main_metric,
        comparisons,
        profiles,
        frame_changes,
        sparse_frames,
        steps,
    }
}

/// The warnings about how the runs went: smoke runs, incomplete runs, interleaved runs'
/// idle CPU and slice tails, unreadable latency files, pooled configurations and, when
/// cohorts are results directories, the sides that differ.
fn run_warnings(
    sources: &[SourceData],
    g: &Grouping,
    cohorts: &[crate::model::Cohort],
    interleaved: bool,
    warnings: &mut Vec<Warning>,
) {
    for s in sources.iter().filter(|s| s.smoke) {
        warnings.push(Warning {
            kind: "smoke".into(),
            cohort: None,
            message: format!("{} is a --smoke run: two short blocks, for checking an experiment, not for conclusions", s.dir.display()),
        });
    }
    incomplete_warnings(sources, &g.baseline, warnings);
    if interleaved {
        idle_cpu_warnings(cohorts, warnings);
        slice_tail_warnings(sources, warnings);
    }
    latency_file_warnings(&g.order, &g.members, warnings);
    mixed_configurations_warnings(&g.order, &g.members, warnings);
    if g.by == ["source"] {
        differing_sides_warnings(&g.order, &g.members, warnings);
    }
}

/// The per-host table (when the trials come from several hosts or a fleet) with its
/// warnings, then a warning per source whose fleet had failed attempts.
fn host_table(
    sources: &[SourceData],
    g: &Grouping,
    main: fn(&TrialData) -> Option<f64>,
    main_metric: &str,
    warnings: &mut Vec<Warning>,
) -> Option<crate::model::HostTable> {
    let failures: Vec<&crate::input::FleetFailure> =
        sources.iter().flat_map(|s| &s.fleet_failures).collect();
    let host_table = hosts::hosts(
        &g.all,
        &failures,
        &g.order,
        &g.baseline,
        main,
        main_metric,
        &|t| cohort_name(t, &g.by),
        warnings,
    );
    for s in sources.iter().filter(|s| !s.fleet_failures.is_empty()) {
        warnings.push(hosts::failures_warning(s));
    }
    host_table
}

/// `fleet-blocks-not-imported`: a source whose fleet finished blocks not imported yet.
fn unimported_warnings(sources: &[SourceData], warnings: &mut Vec<Warning>) {
    for s in sources.iter().filter(|s| !s.unimported_blocks.is_empty()) {
        warnings.push(Warning {
            kind: "fleet-blocks-not-imported".into(),
            cohort: None,
            message: format!(
                "{} of {} finished on the fleet and {} not in this report yet (block {}); `rubyrace run --resume {}` imports them",
                units::count(s.unimported_blocks.len(), "block"),
                s.dir.display(),
                if s.unimported_blocks.len() == 1 { "is" } else { "are" },
                units::ranges(&s.unimported_blocks.iter().map(|b| b + 1).collect::<Vec<_>>()),
                s.dir.display()
            ),
        });
    }
}

/// `mixed-machines`: cohorts pooling trials of several machines outside a fleet.
fn mixed_machines_warning(g: &Grouping, warnings: &mut Vec<Warning>) {
    let machines = &g.machines;
    if machines.len() > 1 && !g.fleet && !g.by.iter().any(|k| k == "machine") {
        warnings.push(Warning {
            kind: "mixed-machines".into(),
            cohort: None,
            message: format!("the trials come from {} machines ({}) and cohorts pool them; add --by ...,machine to keep them apart", machines.len(), machines.iter().copied().collect::<Vec<_>>().join(", ")),
        });
    }
}

/// Every cohort against the baseline on every metric, at a simultaneous level for the
/// family of comparisons, Holm-adjusted per metric, each decided.
fn compare_with_baseline(
    order: &[String],
    members: &BTreeMap<String, Vec<&TrialData>>,
    baseline: &str,
    metrics: &[Metric],
    confidence: f64,
    main_metric: &str,
) -> Vec<Comparison> {
    let mut comparisons = Vec::new();
    let base_valid = valid(&members[baseline]);
    for name in order.iter().filter(|n| *n != baseline) {
        let valid = valid(&members[name]);
        for m in metrics {
            let level = shape_level(
                order.len().saturating_sub(1),
                metrics.len(),
                m.name == main_metric,
            );
            let family = order.len().saturating_sub(1);
            let simultaneous = stats::simultaneous_confidence(confidence, family);
            if let Some(mut c) =
                compare(name, &valid, baseline, &base_valid, m, simultaneous, level)
            {
                c.family_size = family.max(1);
                comparisons.push(c);
            }
        }
    }
    for m in metrics {
        let mut family: Vec<&mut Comparison> = comparisons
            .iter_mut()
            .filter(|c| c.metric == m.name)
            .collect();
        holm_adjust(&mut family);
        for c in family {
            decide(c, m);
        }
    }
    comparisons
}

/// `--overhead A B`: the extra time per request of cohort A over cohort B.
fn overhead_of(
    options: &Options,
    order: &[String],
    members: &BTreeMap<String, Vec<&TrialData>>,
    confidence: f64,
) -> Result<Option<crate::model::Overhead>> {
    match &options.overhead {
        Some((a, b)) => {
            for n in [a, b] {
                if !members.contains_key(n) {
                    bail!(
                        "--overhead: no cohort named {n:?}; cohorts: {}",
                        order.join(", ")
                    );
                }
            }
            Ok(overhead(
                a,
                &valid(&members[a]),
                b,
                &valid(&members[b]),
                confidence,
            ))
        }
        None => Ok(None),
    }
}

/// The valid trials among `trials`.
fn valid<'a>(trials: &[&'a TrialData]) -> Vec<&'a TrialData> {
    trials
        .iter()
        .copied()
        .filter(|t| t.status == TrialStatus::Valid)
        .collect()
}

/// What the doctor found wrong with the machine when the run (or a resume) started: one
/// warning per finding, whatever the number of runs and sessions that saw it (the load
/// average differs a little every time), with each value seen.
fn doctor_warnings(sources: &[SourceData], warnings: &mut Vec<Warning>) {
    // (finding, [(value, results directory)], advice)
    type Seen = (String, Vec<(String, String)>, String);
    let mut found: Vec<Seen> = Vec::new();
    for source in sources {
        for report in &source.doctor {
            for f in report
                .findings
                .iter()
                .filter(|f| matches!(f.status, doctor::Status::Warn | doctor::Status::Bad))
            {
                let value = f.value.replace('\n', "; ");
                let dir = source.dir.display().to_string();
                match found.iter_mut().find(|(name, _, _)| *name == f.name) {
                    Some((_, values, _)) => {
                        if !values.iter().any(|(v, _)| *v == value) {
                            values.push((value, dir));
                        }
                    }
                    None => found.push((f.name.clone(), vec![(value, dir)], f.advice.clone())),
                }
            }
        }
    }
    for (name, values, advice) in found {
        let advice = if advice.is_empty() {
            String::new()
        } else {
            format!(" → {advice}")
        };
        let seen = if values.len() == 1 {
            values[0].0.clone()
        } else {
            values
                .iter()
                .map(|(v, dir)| format!("{v} ({dir})"))
                .collect::<Vec<_>>()
                .join("; ")
        };
        warnings.push(Warning {
            kind: "machine".into(),
            cohort: None,
            message: format!("rubyrace doctor when the run started: {name}: {seen}{advice}"),
        });
    }
}

/// The trials of the reported cohorts as points in the order they ran.
fn timeline(all: &[&TrialData], order: &[String], by: &[String]) -> Vec<TrialPoint> {
    let mut timeline: Vec<&TrialData> = all.to_vec();
    timeline.sort_by(|a, b| {
        (a.source, &a.started_at, a.trial_id).cmp(&(b.source, &b.started_at, b.trial_id))
    });
    timeline
        .iter()
        .enumerate()
        .filter(|(_, t)| order.contains(&cohort_name(t, by)))
        .map(|(i, t)| TrialPoint {
            cohort: cohort_name(t, by),
            source: t.source,
            trial_id: t.trial_id,
            block: t.block,
            sequence: i,
            status: t.status.as_str().to_string(),
            requests_per_s: t.requests_per_s,
            pss_end_bytes: t.pss_end.map(|v| v as u64),
            wall_s: t.wall_s,
        })
        .collect()
}

/// Per cohort, every value each key took among its trials (the URL mix and the source aside).
fn cohort_environments(
    order: &[String],
    members: &BTreeMap<String, Vec<&TrialData>>,
) -> Vec<CohortEnvironment> {
    order
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
        .collect()
}

/// What a source's design means for its figures: an adaptive run's level, a co-scheduled
/// run's shared machine. `intervals` is the level the comparisons' intervals are shown at
/// (`Report::interval_label`): the stopping rule's own with one comparison, higher when
/// its level is shared by several (99.2% each for three at 97.5%).
fn design_warnings(sources: &[SourceData], intervals: &str, warnings: &mut Vec<Warning>) {
    let rule = crate::format::confidence_text(experiment::precision::SEQUENTIAL_CONFIDENCE);
    let level = if intervals == rule {
        format!("its intervals are at {rule}, the level of its stopping rule")
    } else if intervals.ends_with("simultaneous") {
        format!("its intervals are {intervals}, the level of its stopping rule")
    } else {
        format!("its intervals are at {intervals} each, {rule} together, the level of its stopping rule")
    };
    for s in sources {
        if let Some(end) = &s.precision_end {
            warnings.push(Warning {
                kind: "adaptive-run".into(),
                cohort: None,
                message: format!("{}: {}; {level}, which kept their coverage at 95% or more in simulations with symmetric noise (skewed or drifting ratios are warned about apart)", s.dir.display(), end.describe()),
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
}

/// Each results directory as the report names it.
fn report_sources(sources: &[SourceData]) -> Vec<Source> {
    sources
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
            writer: s.writer.as_ref().map(ToString::to_string),
        })
        .collect()
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
mod tests;
