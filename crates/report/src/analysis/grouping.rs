//! Which trials make which cohort: the keys they are grouped by (`--by`, or the label and
//! the machine), the cohorts in order of first appearance (`--only`), the baseline
//! (`--baseline`), and why there is nothing to report when no trial is stored.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, Result};

use super::cohort::cohort_name;
use super::Options;
use crate::input::{SourceData, TrialData};

/// The trials grouped into cohorts: every trial, the machines they ran on, the grouping
/// keys, the cohorts in order with their trials, and the baseline.
pub(super) struct Grouping<'a> {
    pub(super) all: Vec<&'a TrialData>,
    pub(super) machines: BTreeSet<&'a str>,
    /// Whether every trial comes from a fleet.
    pub(super) fleet: bool,
    pub(super) by: Vec<String>,
    pub(super) order: Vec<String>,
    pub(super) members: Members<'a>,
    pub(super) baseline: String,
}

/// Groups the sources' trials into cohorts and picks the baseline (`--baseline`, else the
/// first cohort); an error when nothing is stored or an option names no cohort or key.
pub(super) fn group_trials<'a>(
    sources: &'a [SourceData],
    options: &Options,
) -> Result<Grouping<'a>> {
    let all: Vec<&TrialData> = sources.iter().flat_map(|s| s.trials.iter()).collect();
    if all.is_empty() {
        return Err(nothing_stored(sources));
    }
    let machines: BTreeSet<&str> = all
        .iter()
        .map(|t| t.keys.get("machine").map(String::as_str).unwrap_or(""))
        .collect();
    // A fleet's trials come from several machines by design: cohorts pool them (pairing
    // within a block cancels a host's speed) and the hosts get a table of their own.
    let fleet = all.iter().all(|t| t.keys.contains_key("fleet"));
    let by = grouping_keys(&all, machines.len(), fleet, options)?;

    let (order, members) = cohorts_in_order(&all, &by, options)?;
    let baseline = match &options.baseline {
        Some(b) if members.contains_key(b) => b.clone(),
        Some(b) => bail!(
            "--baseline {b:?} is not a cohort; cohorts: {}",
            order.join(", ")
        ),
        None => order[0].clone(),
    };
    Ok(Grouping {
        all,
        machines,
        fleet,
        by,
        order,
        members,
        baseline,
    })
}

/// The keys trials are grouped by: `--by`, each checked to name a key some trial has; else
/// the label, and the machine when the trials come from several (a fleet's aside).
fn grouping_keys(
    all: &[&TrialData],
    machines: usize,
    fleet: bool,
    options: &Options,
) -> Result<Vec<String>> {
    let by: Vec<String> = if options.by.is_empty() {
        let mut by = vec!["label".to_string()];
        if machines > 1 && !fleet {
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
    Ok(by)
}

/// Each cohort's trials, by its name.
pub(super) type Members<'a> = BTreeMap<String, Vec<&'a TrialData>>;

/// The cohorts' names in order of first appearance by (source, configuration), with their
/// trials; only those `--only` names, in its order.
fn cohorts_in_order<'a>(
    all: &[&'a TrialData],
    by: &[String],
    options: &Options,
) -> Result<(Vec<String>, Members<'a>)> {
    // Cohorts in order of first appearance by (source, config).
    let mut order: Vec<String> = Vec::new();
    let mut members: Members = BTreeMap::new();
    let mut sorted = all.to_vec();
    sorted.sort_by_key(|t| (t.source, t.config_id, t.trial_id));
    for t in &sorted {
        let name = cohort_name(t, by);
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
    Ok((order, members))
}

/// Why there is nothing to report: a run still writing its first trial, fleet blocks not
/// imported yet, or no trial at all.
fn nothing_stored(sources: &[SourceData]) -> anyhow::Error {
    if let Some(s) = sources.iter().find(|s| s.writer.is_some()) {
        return anyhow::anyhow!(
            "no trial is stored yet in {}: a run ({}) is writing it; its first trial is stored when it ends",
            s.dir.display(),
            s.writer.as_ref().map(ToString::to_string).unwrap_or_default()
        );
    }
    if let Some(s) = sources.iter().find(|s| !s.unimported_blocks.is_empty()) {
        return anyhow::anyhow!(
            "no trial is stored yet in {}: {} finished on the fleet and {} not imported yet; `rubyrace run --resume {}` imports them (and watches the rest)",
            s.dir.display(),
            units::count(s.unimported_blocks.len(), "block"),
            if s.unimported_blocks.len() == 1 { "is" } else { "are" },
            s.dir.display()
        );
    }
    anyhow::anyhow!(
        "no trials are stored in the given results director{}",
        if sources.len() == 1 { "y" } else { "ies" }
    )
}
