//! The hosts of a run spread over machines (a fleet, docs/fleet.md): a table of what each
//! host measured, a `hosts-differ` warning when their hardware, kernel or a Ruby's build
//! differ, and a `host-interaction` warning when a comparison's ratio differs between kinds
//! of host (or, on hosts all of one kind, between hosts) beyond their noise (Welch's one-way
//! test on the per-block log ratios of each, which allows each its own noise). Pairing within a block cancels a host's speed from every
//! ratio; a ratio that still depends on the host is a finding about the configuration.

use std::collections::{BTreeMap, BTreeSet};

use results::TrialStatus;

use crate::input::{FleetFailure, TrialData};
use crate::model::{HostRow, HostTable, Warning};

/// One block's values of the compared figure, per cohort.
type BlockValues = BTreeMap<String, Vec<f64>>;

/// The level of the interaction test (a warning, not a verdict).
pub const INTERACTION_ALPHA: f64 = 0.01;
/// The fewest blocks a host needs to take part in the interaction test.
const MIN_HOST_BLOCKS: usize = 3;

/// The per-host table and its warnings, when the trials come from more than one host or
/// from a fleet. `main` is the figure compared (throughput or wall time), `cohort_of` names
/// a trial's cohort, `failures` are a fleet's failed attempts.
#[allow(clippy::too_many_arguments)]
pub(super) fn hosts(
    all: &[&TrialData],
    failures: &[&FleetFailure],
    order: &[String],
    baseline: &str,
    main: fn(&TrialData) -> Option<f64>,
    metric: &str,
    cohort_of: &dyn Fn(&TrialData) -> String,
    warnings: &mut Vec<Warning>,
) -> Option<HostTable> {
    let trial_hosts: BTreeSet<String> = all.iter().map(|t| host_of(t)).collect();
    let mut hosts = trial_hosts.clone();
    hosts.extend(failures.iter().map(|f| f.nodes.clone()));
    let fleet = all.iter().any(|t| t.keys.contains_key("fleet"));
    if hosts.len() < 2 && !fleet {
        return None;
    }
    differ_warnings(all, &trial_hosts, warnings);
    let blocks = block_values(all, main, cohort_of);
    let others: Vec<&String> = order.iter().filter(|c| c.as_str() != baseline).collect();
    let mut rows = Vec::new();
    // cohort -> host -> per-block log ratios
    let mut log_ratios: BTreeMap<&String, BTreeMap<String, Vec<f64>>> = BTreeMap::new();
    for h in &hosts {
        let (row, ratios) = host_row(h, all, failures, &blocks, baseline, &others);
        for (c, lr) in others.iter().zip(ratios) {
            log_ratios.entry(c).or_default().insert(h.clone(), lr);
        }
        rows.push(row);
    }
    interaction_warnings(all, &hosts, &log_ratios, baseline, metric, warnings);
    Some(HostTable {
        metric: metric.into(),
        baseline: baseline.into(),
        cohorts: others.into_iter().cloned().collect(),
        rows,
    })
}

/// The host a trial ran on ("" without a `host` key).
fn host_of(t: &TrialData) -> String {
    t.keys.get("host").cloned().unwrap_or_default()
}

/// Each block's values of the compared figure per cohort, with the block's host:
/// (source, block) -> (host, cohort -> values); valid trials with a positive value only.
fn block_values(
    all: &[&TrialData],
    main: fn(&TrialData) -> Option<f64>,
    cohort_of: &dyn Fn(&TrialData) -> String,
) -> BTreeMap<(usize, u32), (String, BlockValues)> {
    // Each block's value per cohort: (source, block) -> cohort -> values.
    let mut blocks: BTreeMap<(usize, u32), (String, BlockValues)> = BTreeMap::new();
    for t in all.iter().filter(|t| t.status == TrialStatus::Valid) {
        if let Some(v) = main(t).filter(|v| *v > 0.0 && v.is_finite()) {
            let entry = blocks
                .entry((t.source, t.block))
                .or_insert_with(|| (host_of(t), BTreeMap::new()));
            entry.1.entry(cohort_of(t)).or_default().push(v);
        }
    }
    blocks
}

/// Host `h`'s row of the table, and per cohort of `others` the per-block log ratios
/// against the baseline of the blocks it ran.
fn host_row(
    h: &String,
    all: &[&TrialData],
    failures: &[&FleetFailure],
    blocks: &BTreeMap<(usize, u32), (String, BlockValues)>,
    baseline: &str,
    others: &[&String],
) -> (HostRow, Vec<Vec<f64>>) {
    let mean_log = |vs: &Vec<f64>| vs.iter().map(|v| v.ln()).sum::<f64>() / vs.len() as f64;
    let mine: Vec<&BlockValues> = blocks
        .values()
        .filter(|(bh, _)| bh == h)
        .map(|(_, v)| v)
        .collect();
    let trials: Vec<&&TrialData> = all.iter().filter(|t| &host_of(t) == h).collect();
    let base: Vec<f64> = mine
        .iter()
        .filter_map(|b| b.get(baseline))
        .flatten()
        .copied()
        .collect();
    let mut ratios = Vec::new();
    let mut log_ratios = Vec::new();
    for c in others {
        let lr: Vec<f64> = mine
            .iter()
            .filter_map(|b| Some(mean_log(b.get(c.as_str())?) - mean_log(b.get(baseline)?)))
            .collect();
        ratios.push(stats::median(&lr).map(f64::exp));
        log_ratios.push(lr);
    }
    let failed_attempts: Vec<String> = failures
        .iter()
        .filter(|f| &f.nodes == h)
        .map(|f| format!("block {}: {}", f.block + 1, f.state))
        .collect();
    let first = trials.first();
    let row = HostRow {
        host: h.clone(),
        machine: first
            .map(|t| {
                let k = |key: &str| t.keys.get(key).cloned().unwrap_or_default();
                format!(
                    "{} · {}",
                    k("cpu_model"),
                    k("kernel").split_whitespace().next().unwrap_or("")
                )
            })
            .unwrap_or_default(),
        blocks: trials
            .iter()
            .map(|t| (t.source, t.block))
            .collect::<BTreeSet<_>>()
            .len(),
        trials: trials.len(),
        baseline_median: stats::median(&base),
        ratios,
        load_hosts: trials
            .iter()
            .filter_map(|t| t.keys.get("load_host").cloned())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
        load_rtt_us: stats::median(
            &trials
                .iter()
                .filter_map(|t| t.load_rtt_us)
                .collect::<Vec<_>>(),
        ),
        failed_attempts,
    };
    (row, log_ratios)
}

/// `host-interaction`: per cohort, a ratio that differs between kinds of host (or hosts)
/// beyond their noise, from `log_ratios` (cohort -> host -> per-block log ratios).
fn interaction_warnings(
    all: &[&TrialData],
    hosts: &BTreeSet<String>,
    log_ratios: &BTreeMap<&String, BTreeMap<String, Vec<f64>>>,
    baseline: &str,
    metric: &str,
    warnings: &mut Vec<Warning>,
) {
    // The interaction is tested between kinds of host (CPU model and count, kernel) when
    // the fleet has several, each kind's blocks pooled over its hosts: hosts of one kind
    // agree by construction, and a kind of slow nodes that each ran two blocks still
    // counts. With one kind, between hosts (a node that misbehaves).
    let kind_of_host: BTreeMap<String, String> = hosts
        .iter()
        .map(|h| {
            let kind = all
                .iter()
                .find(|t| &host_of(t) == h)
                .map(|t| host_kind(t))
                .unwrap_or_default();
            (h.clone(), kind)
        })
        .collect();
    let by_kind = kind_of_host.values().collect::<BTreeSet<_>>().len() > 1;
    for (c, per_host) in log_ratios {
        let mut pooled: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for (h, v) in per_host {
            let group = if by_kind {
                let hosts_of_kind: Vec<&str> = kind_of_host
                    .iter()
                    .filter(|(_, k)| *k == &kind_of_host[h])
                    .map(|(h, _)| h.as_str())
                    .collect();
                format!("{} ({})", hosts_of_kind.join(", "), kind_of_host[h])
            } else {
                h.clone()
            };
            pooled.entry(group).or_default().extend(v);
        }
        let groups: Vec<(&String, &Vec<f64>)> = pooled
            .iter()
            .filter(|(_, v)| v.len() >= MIN_HOST_BLOCKS)
            .collect();
        if groups.len() < 2 {
            continue;
        }
        let Some(test) = interaction_test(&groups) else {
            continue;
        };
        if test.p_value >= INTERACTION_ALPHA {
            continue;
        }
        let each: Vec<String> = groups
            .iter()
            .map(|(h, v)| {
                format!(
                    "{h}: ×{:.3} over {} blocks",
                    (v.iter().sum::<f64>() / v.len() as f64).exp(),
                    v.len()
                )
            })
            .collect();
        warnings.push(Warning {
            kind: "host-interaction".into(),
            cohort: Some((*c).clone()),
            message: format!(
                "{c} against {baseline}: the {metric} ratio differs between {} ({}; {} p = {:.3}): the configuration's effect depends on the host, a finding rather than noise; the pooled ratio averages hosts that disagree (the per-host table, or --by host,label)",
                if by_kind { "kinds of host" } else { "hosts" },
                each.join("; "),
                "Welch's one-way test",
                test.p_value
            ),
        });
    }
}

/// The interaction test between groups of per-block log ratios (kinds of host, or hosts):
/// Welch's one-way test on their means ([`stats::ttest::welch_anova`]), which does not
/// assume the groups are equally noisy. Kruskal–Wallis, used before issue 47, does: with
/// equal ratios on a quiet and a noisy kind of host it fired in several times its 1% level.
pub(super) fn interaction_test(groups: &[(&String, &Vec<f64>)]) -> Option<stats::TestResult> {
    let groups: Vec<stats::ttest::Group> = groups
        .iter()
        .map(|(_, x)| {
            let n = x.len() as f64;
            let mean = x.iter().sum::<f64>() / n;
            let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
            stats::ttest::Group {
                mean,
                se: (var / n).sqrt(),
                df: n - 1.0,
            }
        })
        .collect();
    stats::ttest::welch_anova(&groups)
}

/// Where a trial ran: its host and the kind of that host, or `None` outside a fleet or a
/// run over several hosts (no `host` key).
pub(super) fn placement(t: &TrialData) -> Option<(String, String)> {
    let host = t.keys.get("host")?;
    Some((host.clone(), host_kind(t)))
}

/// A host's kind, as its trials record it: CPU model, core count and kernel release.
pub(super) fn host_kind(t: &TrialData) -> String {
    let k = |key: &str| t.keys.get(key).cloned().unwrap_or_default();
    let kernel = k("kernel");
    let release = kernel.split_whitespace().next().unwrap_or("").to_string();
    let cpus = k("cpus");
    let mut parts = vec![k("cpu_model")];
    if !cpus.is_empty() {
        parts.push(format!("{cpus} CPUs"));
    }
    if !release.is_empty() {
        parts.push(release);
    }
    parts.retain(|p| !p.is_empty());
    parts.join(" · ")
}

/// `hosts-differ`: a CPU, core count, kernel or the build of a configuration's Ruby that
/// is not the same on every host.
fn differ_warnings(all: &[&TrialData], hosts: &BTreeSet<String>, warnings: &mut Vec<Warning>) {
    if hosts.len() < 2 {
        return;
    }
    let mut parts = Vec::new();
    for (key, what) in [
        ("cpu_model", "CPU"),
        ("cpus", "core count"),
        ("kernel", "kernel"),
    ] {
        let mut per_host: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for t in all {
            if let (Some(h), Some(v)) = (t.keys.get("host"), t.keys.get(key)) {
                per_host.entry(v.as_str()).or_default().insert(h.as_str());
            }
        }
        if per_host.len() > 1 {
            parts.push(format!("{what}: {}", which_hosts(&per_host)));
        }
    }
    let mut rubies: BTreeMap<&str, BTreeMap<&str, BTreeSet<&str>>> = BTreeMap::new();
    for t in all {
        if let (Some(h), Some(d)) = (t.keys.get("host"), t.keys.get("ruby_description")) {
            rubies
                .entry(t.label.as_str())
                .or_default()
                .entry(d.as_str())
                .or_default()
                .insert(h.as_str());
        }
    }
    for (label, builds) in rubies.iter().filter(|(_, b)| b.len() > 1) {
        parts.push(format!("the Ruby of {label}: {}", which_hosts(builds)));
    }
    if !parts.is_empty() {
        warnings.push(Warning {
            kind: "hosts-differ".into(),
            cohort: None,
            message: format!(
                "the hosts are not alike ({}); pairing within a block cancels a host's speed, but not a configuration that behaves differently on different hardware: read the per-host table",
                parts.join(" · ")
            ),
        });
    }
}

/// "A on n1, n2; B on n3": each value and the hosts that have it.
fn which_hosts(values: &BTreeMap<&str, BTreeSet<&str>>) -> String {
    values
        .iter()
        .map(|(v, hosts)| {
            format!(
                "{v} on {}",
                hosts.iter().copied().collect::<Vec<_>>().join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// `fleet-failed-attempts`: the attempts of a fleet's blocks that gave no block (a node
/// that went down, a cancelled task, a time limit), each with its node and Slurm's word,
/// and whether the block ran again. The stored blocks are complete attempts only, so the
/// figures hide them; this says they happened, and where.
pub(super) fn failures_warning(source: &crate::input::SourceData) -> Warning {
    let failures = &source.fleet_failures;
    let down: BTreeSet<&str> = failures
        .iter()
        .filter(|f| f.state == "NODE_FAIL")
        .map(|f| f.nodes.as_str())
        .collect();
    let each: Vec<String> = failures
        .iter()
        .map(|f| {
            format!(
                "block {} on {} ended {}{}",
                f.block + 1,
                if f.nodes.is_empty() { "?" } else { &f.nodes },
                f.state,
                if f.retried {
                    ", run again"
                } else {
                    ", not run again (missing, or resumed later)"
                }
            )
        })
        .collect();
    let retried = failures.iter().filter(|f| f.retried).count();
    Warning {
        kind: "fleet-failed-attempts".into(),
        cohort: None,
        message: format!(
            "{} of the fleet's blocks gave no block ({retried} run again): {}{}; the stored blocks are attempts that finished (the per-host table counts each host's failed attempts; fleet.failure.* in {} has Slurm's words)",
            units::count(failures.len(), "attempt"),
            each.join("; "),
            if down.is_empty() {
                String::new()
            } else {
                format!(
                    "; node {} went down (NODE_FAIL)",
                    down.into_iter().collect::<Vec<_>>().join(", ")
                )
            },
            source.dir.display()
        ),
    }
}
