//! The trial, rubyrace's unit of work: start one server configuration, check readiness,
//! warm up, measure while sampling the server's process tree, stop, and describe the
//! outcome in one `TrialResult`. A script workload runs its script several times instead.
//!
//! `run_trial` takes a self-contained `TrialSpec` (JSON-serializable), so the local
//! scheduler, a resume and `rubyrace trial --spec` all run exactly the same thing.
//!
//! - `record`: what a trial records (`TrialResult` and its parts), as stored;
//! - `server`: the server of an HTTP trial started, checked for readiness and stopped;
//! - `http`: the measured phase of an HTTP trial, its derived figures and its verdict;
//! - `script`: a script workload's runs and their medians.
//!
//! This module holds the spec, the status, the trial's course (`run_trial`), its directory
//! and environment, and what the parts share (the probe's environment and summary,
//! `invalidate`, storage errors).

mod http;
mod record;
mod script;
mod server;

pub(crate) use http::{derive, mark_measured_start, verdict, write_latency_log};
pub use record::{
    Derived, EnvironmentRecord, InterleavedRecord, ScriptOutcome, ScriptRun, ServerRecord,
    SliceRecord, TrialResult,
};
pub use script::parse_metrics;
pub(crate) use server::{
    record_stopped, start_server, stop_process, Orphans, ServerUnderTest, StoppedServer,
};

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use serde::{Deserialize, Serialize};

use crate::probe::{self, ProbeSummary, Verification};
use experiment::services::Services;
use experiment::{ConfigSettings, Workload};
use sys::environment;

pub const TRIAL_SPEC_SCHEMA: &str = "rubyrace.trial-spec/1";
pub const TRIAL_RESULT_SCHEMA: &str = "rubyrace.trial/1";

/// Bytes of server stderr kept in the result (the whole file stays on disk).
const STDERR_TAIL: u64 = 4000;

/// Everything one trial needs.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TrialSpec {
    pub schema: String,
    pub trial_id: usize,
    pub block: u32,
    pub position: usize,
    pub config_id: usize,
    pub label: String,
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

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TrialStatus {
    /// Measured, and within the error policy: used by the statistics. (The default only
    /// for records built field by field, as in tests.)
    #[default]
    Valid,
    /// Measured, but breaking the error policy: stored, excluded from statistics, counted.
    Invalid,
    /// No usable measurement: the server did not start, was not ready, or died.
    Failed,
}

impl TrialStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TrialStatus::Valid => "valid",
            TrialStatus::Invalid => "invalid",
            TrialStatus::Failed => "failed",
        }
    }
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

/// Errors that mean "the disk cannot take more", not "this trial went wrong".
pub fn is_storage_error(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOSPC | libc::EFBIG | libc::EDQUOT | libc::EROFS | libc::EIO)
    )
}

fn write_failed(path: &Path, e: &std::io::Error) -> Stop {
    Stop::WriteFailed(format!("cannot write {}: {e}", path.display()))
}

fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

pub use crate::readiness::free_port;

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
                invalidate(&mut result, failure);
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
        trial_id: spec.trial_id,
        block: spec.block,
        position: spec.position,
        config_id: spec.config_id,
        label: spec.label.clone(),
        status: TrialStatus::Failed,
        reason: None,
        started_at: now_rfc3339(),
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
        files: Vec::new(),
    };
    // A rerun (after an interruption) starts afresh: the files an earlier attempt wrote
    // go. Only those: a spec naming some other directory never loses anything else.
    if let Err(e) =
        fs::create_dir_all(&spec.out_dir).and_then(|_| remove_trial_files(&spec.out_dir))
    {
        return Err(format!(
            "cannot prepare the trial directory {}: {e}",
            spec.out_dir.display()
        ));
    }
    let (environment, ruby_error) = capture_environment(spec);
    result.environment = environment;
    if let Some(e) = ruby_error {
        result.reason = Some(format!("the Ruby does not run: {e}"));
    }
    Ok(result)
}

/// Names of the files a trial writes in its directory.
fn is_trial_file(name: &str) -> bool {
    let stem = name.split('.').next().unwrap_or("");
    let run_log = stem
        .strip_prefix("run")
        .is_some_and(|n| n.parse::<u32>().is_ok())
        && (name.ends_with(".stdout") || name.ends_with(".stderr"));
    matches!(
        name,
        "server.stdout" | "server.stderr" | "latency.hlog" | probe::PROBE_DIR
    ) || name.starts_with(crate::profile::FILE_PREFIX)
        || name == experiment::servers::UNICORN_CONFIG
        || name == experiment::servers::PUMA_CONFIG
        || run_log
}

fn remove_trial_files(dir: &Path) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)?.flatten() {
        if is_trial_file(&entry.file_name().to_string_lossy()) {
            if entry.file_type()?.is_dir() {
                fs::remove_dir_all(entry.path())?;
            } else {
                fs::remove_file(entry.path())?;
            }
        }
    }
    Ok(())
}

pub(crate) fn finish(mut result: TrialResult, started: Instant, out_dir: &Path) -> TrialOutcome {
    result.finished_at = now_rfc3339();
    result.wall_s = started.elapsed().as_secs_f64();
    let mut files: Vec<String> = fs::read_dir(out_dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| is_trial_file(name))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    result.files = files;
    TrialOutcome::Done(Box::new(result))
}

/// The environment of a trial, and why the Ruby did not answer when it did not.
fn capture_environment(spec: &TrialSpec) -> (EnvironmentRecord, Option<String>) {
    let s = &spec.settings;
    let mut effective: BTreeMap<String, String> = std::env::vars().collect();
    effective.extend(s.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    let env_pairs: Vec<(String, String)> =
        s.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let description = rubies::discovery::ruby_description(&s.ruby_argv, &env_pairs);
    let ruby_error = description.as_ref().err().map(|e| format!("{e:#}"));
    let record = EnvironmentRecord {
        rubyrace_version: env!("CARGO_PKG_VERSION").into(),
        ruby_description: description.ok(),
        env: environment::captured_env(&effective, &spec.record_env),
        machine: environment::machine(),
        load_average_before: environment::load_average(),
        app_git: match s.workload {
            Workload::Http => environment::git_state(&s.app_dir),
            Workload::Script => s
                .script
                .as_ref()
                .and_then(|sc| sc.path.parent().and_then(environment::git_state)),
        },
    };
    (record, ruby_error)
}

/// A measured trial whose figures cannot be trusted for `why`: a valid trial becomes
/// invalid with that reason, an invalid one adds it to its reason; a failed one keeps its
/// own.
pub(crate) fn invalidate(result: &mut TrialResult, why: String) {
    match result.status {
        TrialStatus::Valid => {
            result.status = TrialStatus::Invalid;
            result.reason = Some(why);
        }
        TrialStatus::Invalid => {
            let reason = result.reason.take().unwrap_or_default();
            result.reason = Some(format!("{reason}; {why}"));
        }
        TrialStatus::Failed => {}
    }
}

/// Adds the probe to a server's or script's environment (RUBYOPT, its directory, the
/// compaction mode) and creates its directory.
fn with_probe(
    env: &mut BTreeMap<String, String>,
    dir: &Path,
    s: &ConfigSettings,
) -> Result<(), String> {
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let rubyopt = env
        .get("RUBYOPT")
        .cloned()
        .or_else(|| std::env::var("RUBYOPT").ok());
    let vars = probe::probe_env(dir, rubyopt.as_deref(), s.compact)?;
    env.extend(vars);
    Ok(())
}

/// Stores the probe's summary and the verification of the settings; settings that were not
/// in force make a valid trial invalid.
fn apply_probe(result: &mut TrialResult, summary: Option<ProbeSummary>) {
    let verification = probe::verify(&result.settings, summary.as_ref());
    if let Some(failure) = verification.as_ref().and_then(Verification::failure) {
        invalidate(result, failure);
    }
    result.probe = summary;
    result.verification = verification;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_trial_files_are_cleaned_up() {
        assert!(
            is_trial_file("server.stderr")
                && is_trial_file("run12.stdout")
                && is_trial_file("latency.hlog")
        );
        assert!(
            !is_trial_file("notes.txt")
                && !is_trial_file("runner.stdout")
                && !is_trial_file("server.rb")
        );
    }
}
