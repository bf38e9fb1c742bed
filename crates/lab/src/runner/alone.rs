//! One trial outside a run (`rubyrace trial --spec`): its checkouts, services and `setup`
//! made for it alone, as a session makes them before its first trial, and removed after it.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Result;

use experiment::Config;

use crate::services::RunServices;
use crate::trial::{run_trial, TrialOutcome, TrialSpec};

/// One trial outside a run (`rubyrace trial --spec`): the spec's services started and its
/// `setup` run for it alone, in its directory, exactly as a run does before its first
/// trial; stopped and removed after it. The services' record goes into the result's
/// `services.instances`.
pub fn run_alone(spec: &TrialSpec, interrupt: &Arc<AtomicBool>) -> Result<TrialOutcome> {
    let config = Config {
        id: spec.id.config_id,
        label: spec.id.label.clone(),
        axes: Default::default(),
        settings: spec.settings.clone(),
    };
    // `ref`: the spec's paths are in its commit's checkout in the results directory its
    // trial directory is in (`DIR/trials/NNNNN`), made for this trial and removed after it.
    let results_dir = spec
        .out_dir
        .parent()
        .and_then(Path::parent)
        .unwrap_or(&spec.out_dir);
    let _checkouts =
        crate::checkouts::Checkouts::prepare(results_dir, std::slice::from_ref(&config))?;
    if spec.services.is_empty() && spec.settings.setup.is_empty() {
        return Ok(run_trial(spec, interrupt));
    }
    crate::services::remove_leftovers(&spec.out_dir);
    let mut services =
        RunServices::start(&spec.services, &[config], &spec.out_dir, &spec.registry, 1)?;
    let prepared = match services.before_trial(&spec.settings, spec.id.trial_id, interrupt) {
        Ok(p) => p,
        Err(_) if interrupt.load(Ordering::SeqCst) => return Ok(TrialOutcome::Interrupted),
        Err(e) => return Err(e),
    };
    let mut spec = spec.clone();
    spec.service_env = prepared.env.clone();
    let outcome = run_trial(&spec, interrupt);
    let mut record = services.after_trial(prepared);
    // The services of the "run" lived for this trial too: one record of them all.
    let run = services.stop();
    let instances = record.instances.get_or_insert_with(Default::default);
    instances.postgres = instances.postgres.take().or(run.postgres);
    instances.redis = instances.redis.take().or(run.redis);
    instances.setup.extend(run.setup);
    instances.stopped.extend(run.stopped);
    Ok(match outcome {
        TrialOutcome::Done(mut result) => {
            result.services = Some(record);
            TrialOutcome::Done(result)
        }
        other => other,
    })
}
