//! The trial, rubyrace's unit of work: start one server configuration, check readiness,
//! warm up, measure while sampling the server's process tree, stop, and describe the
//! outcome in one `TrialResult`. A script workload runs its script several times instead.
//!
//! `run_trial` takes a self-contained `TrialSpec` (JSON-serializable), so the local
//! scheduler, a resume and `rubyrace trial --spec` all run exactly the same thing.
//!
//! This module holds only the course of a trial: the spec, `begin_trial` (directory and
//! environment), the workload, `finish` (the files listed). The record it fills is
//! `results::TrialResult`. The parts, each read top to bottom:
//! - `directory`: the trial's files, cleared before an attempt and listed after, and what
//!   a failed write means;
//! - `environment`: what is recorded of the environment before the trial runs;
//! - `http`: an HTTP trial: its server started (`server`), warmed up and measured, profiled
//!   when asked, stopped;
//! - `figures`: what a measured phase found (the load's report, the server's resources)
//!   and how it enters the record: the derived figures and the verdict;
//! - `server`: the server of an HTTP trial started, checked for readiness and stopped;
//! - `script`: a script workload's runs and their medians.

mod directory;
mod environment;
mod figures;
mod http;
mod script;
mod server;

pub use directory::is_storage_error;

pub(crate) use figures::PhaseFigures;
pub(crate) use http::{mark_measured_start, write_latency_log};
pub(crate) use server::{
    record_stopped, start_server, stop_process, Orphans, ServerUnderTest, StoppedServer,
};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::probe;
use experiment::services::Services;
use experiment::{ConfigSettings, Workload};
use results::{
    Derived, EnvironmentRecord, TrialIdentity, TrialResult, TrialStatus, TRIAL_RESULT_SCHEMA,
};

pub const TRIAL_SPEC_SCHEMA: &str = "rubyrace.trial-spec/1";

/// Everything one trial needs.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TrialSpec {
    pub schema: String,
    #[serde(flatten)]
    pub id: TrialIdentity,
    pub settings: ConfigSettings,
    /// Extra environment variable names to record.
    pub record_env: Vec<String>,
    /// Where the trial writes its files (server output, latency histogram).
    pub out_dir: PathBuf,
    /// Where live server groups are registered, for cleanup after a crash.
    pub registry: PathBuf,
    /// `cpus`: the server's tree runs on `server`, and rubyrace was pinned to `load`
    /// (`crate::conditions`); checked in every server process.
    #[serde(default)]
    pub cpus: Option<sys::cpus::CpuSplit>,
    /// The services' URLs (`DATABASE_URL`, `REDIS_URL`), added to the app's environment
    /// before the configuration's own `env` (crate::services).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub service_env: BTreeMap<String, String>,
    /// The experiment's `[services]`, in the specs of `run --dry-run --json`: `rubyrace trial
    /// --spec` starts them (and runs the `setup`) for its one trial
    /// (`runner::run_alone`). `rubyrace run` starts them itself and fills `service_env`.
    #[serde(default, skip_serializing_if = "Services::is_empty")]
    pub services: Services,
}

/// How a trial ended.
pub enum TrialOutcome {
    Done(Box<TrialResult>),
    /// Ctrl-C: the server is stopped and nothing is recorded; a resume runs it again.
    Interrupted,
    /// A file of the trial could not be written (a full disk, a file size limit): the
    /// server is stopped and nothing is recorded; the run must stop, and a resume runs the
    /// trial again. The message names the path and the cause.
    WriteFailed(String),
}

/// Why a trial stopped without a result.
pub(crate) enum Stop {
    Interrupted,
    WriteFailed(String),
}

/// Runs one trial. Only Ctrl-C (`interrupt`) makes it return without a result: every
/// other failure is a result with status `failed` and a reason.
pub fn run_trial(spec: &TrialSpec, interrupt: &Arc<AtomicBool>) -> TrialOutcome {
    let started = Instant::now();
    let mut result = match begin_trial(spec) {
        Ok(result) => result,
        Err(what) => return TrialOutcome::WriteFailed(what),
    };
    if result.reason.is_some() {
        return finish(result, started, &spec.out_dir);
    }
    let outcome = match spec.settings.workload {
        Workload::Http => http::http_trial(spec, interrupt, &mut result),
        Workload::Script => script::script_trial(spec, interrupt, &mut result),
    };
    if spec
        .settings
        .ruby_argv
        .iter()
        .any(|a| a == experiment::YJIT_PERF)
    {
        crate::profile::remove_perf_maps(&spec.out_dir.join(probe::PROBE_DIR));
    }
    match outcome {
        Ok(()) => {
            if let Some(failure) = result.pinning.as_ref().and_then(|p| p.failure()) {
                result.invalidate(failure);
            }
            finish(result, started, &spec.out_dir)
        }
        Err(Stop::Interrupted) => TrialOutcome::Interrupted,
        Err(Stop::WriteFailed(what)) => TrialOutcome::WriteFailed(what),
    }
}

/// A trial's result before anything ran: its directory prepared (the files of an earlier,
/// interrupted attempt removed) and its environment captured. When the Ruby does not run,
/// the result is already failed with the reason. `Err` when the directory cannot be written.
pub(crate) fn begin_trial(spec: &TrialSpec) -> Result<TrialResult, String> {
    let mut result = TrialResult {
        schema: TRIAL_RESULT_SCHEMA.into(),
        id: spec.id.clone(),
        status: TrialStatus::Failed,
        reason: None,
        started_at: environment::now_rfc3339(),
        finished_at: String::new(),
        wall_s: 0.0,
        settings: spec.settings.clone(),
        environment: EnvironmentRecord::default(),
        server: None,
        load: None,
        resources: None,
        derived: Derived::default(),
        script: None,
        probe: None,
        verification: None,
        noise: None,
        quiet: None,
        pinning: None,
        noisy_attempts: 0,
        profiles: Vec::new(),
        services: None,
        interleaved: None,
        load_host: None,
        files: Vec::new(),
    };
    // A rerun (after an interruption) starts afresh: the files an earlier attempt wrote
    // go.
    if let Err(e) = directory::prepare(&spec.out_dir) {
        return Err(format!(
            "cannot prepare the trial directory {}: {e}",
            spec.out_dir.display()
        ));
    }
    let (environment, ruby_error) = environment::capture(spec);
    result.environment = environment;
    if let Some(e) = ruby_error {
        result.reason = Some(format!("the Ruby does not run: {e}"));
    }
    Ok(result)
}

pub(crate) fn finish(mut result: TrialResult, started: Instant, out_dir: &Path) -> TrialOutcome {
    result.finished_at = environment::now_rfc3339();
    result.wall_s = started.elapsed().as_secs_f64();
    result.files = directory::list(out_dir);
    TrialOutcome::Done(Box::new(result))
}
