//! The plan of a run before it runs: the JSON document `rubyrace run --dry-run --json`
//! prints, and the spec of each scheduled trial, which the runner runs and `rubyrace trial
//! --spec` runs alone.

use std::path::Path;

use anyhow::{Context, Result};

use experiment::conditions::TrialConditions;
use experiment::schedule::ScheduledTrial;
use experiment::Config;

use crate::trial::{TrialSpec, TRIAL_SPEC_SCHEMA};

/// The plan of a run as one JSON document (schema `rubyrace.plan/1`, what `rubyrace run
/// --dry-run --json` prints): the experiment's run-wide settings, the resolved
/// configurations, the schedule, and every trial's spec, each runnable with `rubyrace trial
/// --spec`, for the results directory `dir`.
pub fn plan(
    experiment: &experiment::Experiment,
    schedule: &[ScheduledTrial],
    dir: &Path,
    smoke: bool,
) -> Result<serde_json::Value> {
    let dir = std::path::absolute(dir)?;
    let specs = schedule
        .iter()
        .map(|t| {
            trial_spec(
                &dir,
                &experiment.configs,
                t,
                &experiment.record_env,
                &experiment.conditions,
            )
        })
        .map(|spec| {
            spec.map(|mut s| {
                s.services = experiment.services.clone();
                s
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(serde_json::json!({
        "schema": "rubyrace.plan/1",
        "experiment": {
            "name": experiment.name,
            "description": experiment.description,
            "file": std::fs::canonicalize(&experiment.file).unwrap_or_else(|_| experiment.file.clone()),
            "smoke": smoke,
            "seed": experiment.seed,
            "batches": experiment.batches,
            "precision": experiment.precision,
            "conditions": experiment.conditions,
            "design": experiment.design,
            "order": experiment.order,
            "record_env": experiment.record_env,
            "services": experiment.services,
        },
        "results_dir": dir,
        "configs": experiment.configs,
        "schedule": schedule,
        "trials": specs,
    }))
}

/// The spec of one scheduled trial of the results directory `results_dir`.
pub fn trial_spec(
    results_dir: &Path,
    configs: &[Config],
    trial: &ScheduledTrial,
    record_env: &[String],
    conditions: &TrialConditions,
) -> Result<TrialSpec> {
    let config = configs
        .iter()
        .find(|c| c.id == trial.config_id)
        .with_context(|| {
            format!(
                "trial {} names configuration {}, which is not stored",
                trial.trial_id, trial.config_id
            )
        })?;
    Ok(TrialSpec {
        schema: TRIAL_SPEC_SCHEMA.into(),
        id: results::TrialIdentity {
            trial_id: trial.trial_id,
            block: trial.block,
            position: trial.position,
            config_id: config.id,
            label: config.label.clone(),
        },
        settings: crate::checkouts::settings_in_checkout(results_dir, &config.settings),
        record_env: record_env.to_vec(),
        out_dir: results::store::trial_dir(results_dir, trial.trial_id),
        registry: results::store::registry(results_dir),
        cpus: conditions.cpus.clone(),
        service_env: Default::default(),
        services: Default::default(),
    })
}
