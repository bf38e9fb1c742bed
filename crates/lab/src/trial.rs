//! The trial, rubyrace's unit of work: start one server configuration, check readiness,
//! warm up, measure while sampling the server's process tree, stop, and describe the
//! outcome in one `TrialResult`. A script workload runs its script several times instead.
//!
//! `run_trial` takes a self-contained `TrialSpec` (JSON-serializable), so the local
//! scheduler, a resume and `rubyrace trial --spec` all run exactly the same thing.

use std::collections::BTreeMap;
use std::fs;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};
use stats::median;

use crate::conditions::PinningRecord;
use crate::probe::{self, ProbeSummary, Verification};
use crate::readiness::{wait_ready, Readiness};
use experiment::servers::{server_command, ServerLaunch};
use experiment::{ConfigSettings, Workload};
use sys::environment::{self, GitState, Machine};
use sys::noise::NoiseRecord;
use sys::process::{
    describe_orphans, describe_status, kill_orphans, Death, DeathWatch, Ended, Launch, Orphan,
    Supervised,
};
use sys::resources::{ResourceSummary, Sampler};

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

/// The server as it ran.
#[derive(Clone, Debug, Serialize, Deserialize, Default)]
pub struct ServerRecord {
    pub argv: Vec<String>,
    /// Variables set for the server on top of rubyrace's environment.
    pub env: BTreeMap<String, String>,
    pub cwd: PathBuf,
    pub port: u16,
    pub pid: Option<i32>,
    pub ready_after_s: Option<f64>,
    pub ended: Option<Ended>,
    /// The end of the server's stderr (the whole file is `server.stderr` in the trial
    /// directory).
    pub stderr_tail: String,
    /// Processes of the server's tree that ended during the warmup or the measurement
    /// (the first process excepted: its end is `ended`).
    #[serde(default)]
    pub deaths: Vec<Death>,
    /// Processes the server left running outside its process group (it daemonized, or a
    /// child called setsid), found and killed by rubyrace after the stop.
    #[serde(default)]
    pub orphans: Vec<Orphan>,
}

/// Figures derived from the load and the resource samples.
#[derive(Clone, Debug, Serialize, Deserialize, Default)]
pub struct Derived {
    pub requests_per_s: Option<f64>,
    /// Share of attempts that failed (0..1), non-2xx included.
    pub error_rate: Option<f64>,
    /// Server CPU (user + system, whole tree) per completed request.
    pub cpu_us_per_request: Option<f64>,
    pub cpu_user_us_per_request: Option<f64>,
    pub cpu_system_us_per_request: Option<f64>,
}

/// One run of a script workload.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ScriptRun {
    pub wall_s: f64,
    pub user_s: f64,
    pub system_s: f64,
    pub max_rss_bytes: u64,
    pub status: String,
    /// `rubyrace-metric name=value` lines the script printed.
    pub metrics: BTreeMap<String, f64>,
}

/// A script workload's runs and their medians.
#[derive(Clone, Debug, Serialize, Deserialize, Default)]
pub struct ScriptOutcome {
    pub argv: Vec<String>,
    pub runs: Vec<ScriptRun>,
    pub median_wall_s: Option<f64>,
    pub median_user_s: Option<f64>,
    pub median_system_s: Option<f64>,
    pub max_rss_bytes: Option<u64>,
    pub median_metrics: BTreeMap<String, f64>,
}

/// What is recorded about the environment of every trial.
#[derive(Clone, Debug, Serialize, Deserialize, Default)]
pub struct EnvironmentRecord {
    pub rubyrace_version: String,
    pub ruby_description: Option<String>,
    /// RUBY*, GEM*, BUNDLE*, MALLOC*, LD_PRELOAD and the names in `record_env`, as the
    /// server or script saw them.
    pub env: BTreeMap<String, String>,
    pub machine: Machine,
    pub load_average_before: Option<[f64; 3]>,
    pub app_git: Option<GitState>,
}

/// The outcome of one trial.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TrialResult {
    pub schema: String,
    pub trial_id: usize,
    pub block: u32,
    pub position: usize,
    pub config_id: usize,
    pub label: String,
    pub status: TrialStatus,
    /// Why the trial is invalid or failed.
    pub reason: Option<String>,
    pub started_at: String,
    pub finished_at: String,
    pub wall_s: f64,
    pub settings: ConfigSettings,
    pub environment: EnvironmentRecord,
    pub server: Option<ServerRecord>,
    /// The load report (schema rubyrace.load/1) of the measured phase.
    pub load: Option<load::LoadReport>,
    pub resources: Option<ResourceSummary>,
    pub derived: Derived,
    pub script: Option<ScriptOutcome>,
    /// What the in-process probe reported (GC, JIT, heap, boot time, gems per process).
    #[serde(default)]
    pub probe: Option<ProbeSummary>,
    /// Whether `jit`, `allocator` and `compact` were in force in every Ruby process; absent
    /// when none was set. A failed verification makes the trial invalid.
    #[serde(default)]
    pub verification: Option<Verification>,
    /// How quiet the machine was over the measured phase: steal, other processes' CPU, load
    /// average (`sys::noise`). Absent for script workloads, when /proc/stat could not be
    /// read, and in rows stored before it existed.
    #[serde(default)]
    pub noise: Option<NoiseRecord>,
    /// `quiet`: how long the trial waited for a quiet machine, and whether it got one.
    #[serde(default)]
    pub quiet: Option<crate::conditions::QuietWait>,
    /// `cpus`: the CPUs of every server process and rubyrace thread, checked at the start of
    /// the measured phase. A process on other CPUs makes the trial invalid.
    #[serde(default)]
    pub pinning: Option<crate::conditions::PinningRecord>,
    /// `repeat_noisy`: the attempts before this one that were measured in noise (stored
    /// apart, out of the statistics).
    #[serde(default)]
    pub noisy_attempts: u32,
    /// `design = "interleaved"`: the slices this trial's figures add up, and its server's
    /// CPU while the load was on the other servers of the block. Absent for a trial of its
    /// own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interleaved: Option<InterleavedRecord>,
    /// Files of this trial, relative to its directory.
    pub files: Vec<String>,
}

/// What an interleaved trial was made of (crate::interleave).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InterleavedRecord {
    pub slice_s: f64,
    /// The unrecorded start of every slice (experiment::design::lead_in).
    #[serde(default)]
    pub lead_in_s: f64,
    pub rounds: u32,
    /// The trials measured in the same seconds as this one (its block), this one included.
    pub block_trials: Vec<usize>,
    /// This configuration's slices, in the order they ran.
    pub slices: Vec<SliceRecord>,
    /// CPU the server's tree used between its own slices (whole, lead-ins and wind-downs
    /// included), over the block's measured phase: background work (timers, GC, threads)
    /// while the load was on the other servers, which the trial's CPU per request leaves
    /// out. µs.
    pub idle_cpu_us: Option<u64>,
    /// How long that was: the measured phase less its own slices, whole. Seconds.
    #[serde(default)]
    pub idle_s: Option<f64>,
}

/// One slice of an interleaved trial (a window of a co-scheduled one).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SliceRecord {
    /// 0-based round, and this configuration's turn in it.
    pub round: u32,
    pub turn: usize,
    /// When the slice began, from the start of the block's measured phase.
    pub start_s: f64,
    /// The load's recorded time.
    pub elapsed_s: f64,
    pub requests: u64,
    pub errors: u64,
    /// The server tree's CPU time over the slice's recorded window; the sum over the slices
    /// is what the trial's CPU per request uses.
    pub cpu_us: Option<u64>,
    /// `cpu_us` is from the threads' nanosecond counters; false: from clock ticks (10 ms),
    /// because a process or thread of the tree ended within the window (and in results
    /// stored before slices read the threads' counters).
    #[serde(default)]
    pub cpu_fine: bool,
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

/// A free loopback port. Another process may take it before the server binds it; the
/// readiness check then fails with the server's own error in its stderr tail.
pub fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
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
        Workload::Http => http_trial(spec, interrupt, &mut result),
        Workload::Script => script_trial(spec, interrupt, &mut result),
    };
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
    ) || name == experiment::servers::UNICORN_CONFIG
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

fn http_trial(
    spec: &TrialSpec,
    interrupt: &Arc<AtomicBool>,
    result: &mut TrialResult,
) -> Result<(), Stop> {
    let Some(mut sut) = start_server(spec, interrupt, result)? else {
        return Ok(());
    };
    let outcome = measure(spec, &mut sut, interrupt, result);
    stop_server(sut, spec, result);
    outcome
}

/// A configuration's server, started and answering: what the phases after the start
/// share, in a trial of its own or in an interleaved block.
pub(crate) struct ServerUnderTest {
    pub server: Supervised,
    pub record: ServerRecord,
    pub addr: SocketAddr,
    pub probe_dir: PathBuf,
    /// The allocators each process had mapped at the start of the measured phase.
    pub maps: BTreeMap<i32, Vec<String>>,
}

/// Steps 1 to 3 of a trial: a port, the server started (with the probe, on its CPUs), and
/// readiness. `Ok(None)` when it did not come up: the result says why, and the server is
/// stopped and recorded.
pub(crate) fn start_server(
    spec: &TrialSpec,
    interrupt: &Arc<AtomicBool>,
    result: &mut TrialResult,
) -> Result<Option<ServerUnderTest>, Stop> {
    let s = &spec.settings;

    // 1. A port.
    let port = if s.port == 0 {
        match free_port() {
            Ok(p) => p,
            Err(e) => {
                result.reason = Some(format!("cannot find a free port: {e}"));
                return Ok(None);
            }
        }
    } else {
        // A fixed port that is taken would send the load to someone else's server.
        if let Err(e) = TcpListener::bind(("127.0.0.1", s.port)) {
            result.reason = Some(format!(
                "port {} is already in use on 127.0.0.1 ({e}); another server is listening there",
                s.port
            ));
            return Ok(None);
        }
        s.port
    };
    let addr = SocketAddr::from(([127, 0, 0, 1], port));

    // 2. Start the server.
    let command = match server_command(&ServerLaunch {
        kind: s.server,
        ruby: &s.ruby_argv,
        app_dir: &s.app_dir,
        port,
        processes: s.processes,
        threads: s.threads,
        scratch_dir: &spec.out_dir,
        custom_argv: &s.server_argv,
        environment: "production",
        bundle_exec: s.gemfile.is_some(),
    }) {
        Ok(c) => c,
        Err(e) => {
            result.reason = Some(format!("cannot build the server command: {e:#}"));
            return Ok(None);
        }
    };
    let mut env: BTreeMap<String, String> = command.env.iter().cloned().collect();
    env.extend(s.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    let probe_dir = spec.out_dir.join(probe::PROBE_DIR);
    if let Err(e) = with_probe(&mut env, &probe_dir, s) {
        result.reason = Some(e);
        return Ok(None);
    }
    // Record the environment the server really gets: rubyrace's, the server command's
    // (RACK_ENV...), then the configuration's.
    let mut effective: BTreeMap<String, String> = std::env::vars().collect();
    effective.extend(env.iter().map(|(k, v)| (k.clone(), v.clone())));
    result.environment.env = environment::captured_env(&effective, &spec.record_env);
    let launch = Launch {
        argv: command.argv.clone(),
        env: env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        cwd: command.cwd.clone(),
        cpus: spec.cpus.as_ref().map(|c| c.server.clone()),
    };
    let mut record = ServerRecord {
        argv: launch.argv.clone(),
        env,
        cwd: launch.cwd.clone(),
        port,
        ..ServerRecord::default()
    };
    let mut server = match Supervised::spawn(&launch, &spec.out_dir, "server", &spec.registry) {
        Ok(server) => server,
        Err(e) if is_storage_error(&e) => {
            return Err(Stop::WriteFailed(format!(
                "cannot write the server's output files in {}: {e}",
                spec.out_dir.display()
            )))
        }
        Err(e) => {
            result.reason = Some(format!("the server did not start: {e}"));
            result.server = Some(record);
            return Ok(None);
        }
    };
    record.pid = Some(server.pid());

    // 3. Readiness.
    let ready = wait_ready(
        addr,
        &s.readiness_path,
        s.readiness_timeout,
        &mut server,
        interrupt,
    );
    let sut = ServerUnderTest {
        server,
        record,
        addr,
        probe_dir,
        maps: BTreeMap::new(),
    };
    match ready {
        Readiness::Ready { after } => {
            let mut sut = sut;
            sut.record.ready_after_s = Some(after.as_secs_f64());
            Ok(Some(sut))
        }
        Readiness::Failed(reason) => {
            result.reason = Some(reason);
            stop_server(sut, spec, result);
            Ok(None)
        }
        Readiness::Interrupted => {
            stop_server(sut, spec, result);
            Err(Stop::Interrupted)
        }
    }
}

/// Step 6: stop the server, kill whatever escaped its process group, record how it ended;
/// then the probe's summary and the verification of the settings, for a measured trial.
pub(crate) fn stop_server(sut: ServerUnderTest, spec: &TrialSpec, result: &mut TrialResult) {
    let stopped = stop_process(sut, spec);
    let orphans = kill_orphans(&[stopped.pid]);
    record_stopped(stopped, orphans, Orphans::Its, result);
}

/// A server whose processes are stopped, not recorded yet.
pub(crate) struct StoppedServer {
    pub pid: i32,
    record: ServerRecord,
    probe_dir: PathBuf,
    maps: BTreeMap<i32, Vec<String>>,
}

/// Whose the orphans handed to [`record_stopped`] are.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Orphans {
    /// This server's: it was the only one up.
    Its,
    /// Left by one of the servers of an interleaved block, which cannot be told apart.
    OneOfTheBlock,
}

/// Stops the server's process group and records how it ended.
pub(crate) fn stop_process(sut: ServerUnderTest, spec: &TrialSpec) -> StoppedServer {
    let ServerUnderTest {
        mut server,
        mut record,
        probe_dir,
        maps,
        ..
    } = sut;
    let ended = server.stop(spec.settings.stop_timeout);
    record.stderr_tail = server.stderr_tail(STDERR_TAIL);
    record.ended = Some(ended);
    StoppedServer {
        pid: server.pid(),
        record,
        probe_dir,
        maps,
    }
}

/// Records a stopped server in its trial's result, with the orphans found once it (and any
/// other server up with it) had stopped; then the probe's summary and the verification of
/// the settings, for a measured trial.
pub(crate) fn record_stopped(
    stopped: StoppedServer,
    orphans: Vec<Orphan>,
    whose: Orphans,
    result: &mut TrialResult,
) {
    let StoppedServer {
        mut record,
        probe_dir,
        maps,
        ..
    } = stopped;
    record.orphans = orphans.clone();
    result.server = Some(record);
    if result.load.is_some() {
        let requests = result.load.as_ref().map(|l| l.requests);
        let summary = probe::summarize(&probe::read_records(&probe_dir), &maps, requests);
        apply_probe(result, summary);
    }
    if !orphans.is_empty() {
        note_orphans(result, &orphans, whose);
    }
}

/// A server that left processes outside its process group: they were not measured with
/// it and would outlive it, so a valid trial becomes invalid, and the reason says what
/// happened.
fn note_orphans(result: &mut TrialResult, orphans: &[Orphan], whose: Orphans) {
    let what = match whose {
        Orphans::Its => format!(
            "{} (a server must stay in the foreground and in its process group: does it daemonize?)",
            describe_orphans(orphans)
        ),
        Orphans::OneOfTheBlock => format!(
            "one of the servers of this interleaved block (which one cannot be told): {} (a server must stay in the foreground and in its process group: does one daemonize?)",
            describe_orphans(orphans)
        ),
    };
    if result.status == TrialStatus::Valid {
        result.status = TrialStatus::Invalid;
    }
    result.reason = Some(match result.reason.take() {
        Some(r) => format!("{r}; {what}"),
        None => what,
    });
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

/// Warmup and measurement with resource sampling; sets status, load, resources, derived.
fn measure(
    spec: &TrialSpec,
    sut: &mut ServerUnderTest,
    interrupt: &Arc<AtomicBool>,
    result: &mut TrialResult,
) -> Result<(), Stop> {
    let s = &spec.settings;
    let addr = sut.addr;
    let server = &mut sut.server;
    let record = &mut sut.record;
    let maps = &mut sut.maps;
    let url = format!("http://{addr}{}", s.load.path.as_deref().unwrap_or("/"));
    let load_spec = match s.load.build_spec(&url) {
        Ok(l) => l,
        Err(e) => {
            result.reason = Some(format!("invalid load settings: {e}"));
            return Ok(());
        }
    };
    let pid = server.pid();
    let start_at = Instant::now() + load_spec.warmup;
    // With a duration, the window's end is known: sample it then, not after the wind-down.
    let end_at = match load_spec.stop {
        load::StopCondition::Duration(d) => Some(start_at + d),
        load::StopCondition::Requests(_) => None,
    };
    let sampler = Sampler::start_window(pid, pid, start_at, end_at, s.sample_interval);
    // At the start of the measured phase: the probe's first snapshot, and which allocator
    // each process has mapped.
    let probe_dir = spec.out_dir.join(probe::PROBE_DIR);
    let preload = s.allocator.as_ref().and_then(|a| a.preload.clone());
    let starter = {
        let probe_dir = probe_dir.clone();
        let cpus = spec.cpus.clone();
        std::thread::spawn(move || {
            std::thread::sleep(start_at.saturating_duration_since(Instant::now()));
            mark_measured_start(&probe_dir, pid, preload.as_deref(), cpus.as_ref())
        })
    };
    let watch = DeathWatch::start(pid, pid);
    let outcome = load::run(&load_spec, None, interrupt.clone());
    record.deaths = watch.finish();
    // The first process's own end is told by its exit status.
    record.deaths.retain(|d| d.pid != pid);
    let (resources, noise) = sampler.finish_with_noise();
    result.noise = noise;
    if let Ok((found, pinning)) = starter.join() {
        *maps = found;
        result.pinning = pinning;
    }
    if !interrupt.load(Ordering::SeqCst) {
        probe::request_snapshot(&probe_dir, probe::MEASURE_END, pid, pid);
    }
    if interrupt.load(Ordering::SeqCst) {
        return Err(Stop::Interrupted);
    }
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            result.reason = Some(format!("the load generator failed: {e}"));
            return Ok(());
        }
    };
    let report = load::LoadReport::new(&load_spec, &url, &outcome);
    write_latency_log(&spec.out_dir, &outcome.stats.latency, report.elapsed_s)?;
    let derived = derive(&report, resources.as_ref().ok());
    result.derived = derived;
    result.resources = resources.as_ref().ok().cloned();
    result.status = verdict(
        result,
        &report,
        server.exited(),
        record,
        resources.as_ref().err(),
    );
    result.load = Some(report);
    Ok(())
}

/// The status of a measured HTTP trial, from its load report and what became of its
/// server (the reason is set on `result`): failed when the server exited or nothing was
/// answered; invalid when a process died, errors exceeded `max_error_rate`, the server
/// ignored `Connection: close`, or its resources could not be sampled; else valid.
pub(crate) fn verdict(
    result: &mut TrialResult,
    report: &load::LoadReport,
    exited: Option<std::process::ExitStatus>,
    record: &ServerRecord,
    resources_error: Option<&String>,
) -> TrialStatus {
    let max_error_rate = result.settings.max_error_rate;
    let (status, reason) = if let Some(exit) = exited {
        (
            TrialStatus::Failed,
            format!(
                "the server exited during the measurement ({})",
                describe_status(exit)
            ),
        )
    } else if report.requests == 0 {
        let breakdown = error_breakdown(report);
        (
            TrialStatus::Failed,
            if breakdown.is_empty() {
                format!("no response was completed ({} errors)", report.errors.total)
            } else {
                format!(
                    "no response was completed ({} errors: {breakdown})",
                    report.errors.total
                )
            },
        )
    } else if record.deaths.iter().any(Death::is_abnormal) {
        let died: Vec<String> = record
            .deaths
            .iter()
            .filter(|d| d.is_abnormal())
            .map(Death::describe)
            .collect();
        let mut reason = format!(
            "{} of the server died during the measurement: {}",
            if died.len() == 1 {
                "a process".to_string()
            } else {
                format!("{} processes", died.len())
            },
            died.join("; ")
        );
        if report.error_rate > 0.0 {
            reason.push_str(&format!(
                "; error rate {:.3}% ({})",
                100.0 * report.error_rate,
                error_breakdown(report)
            ));
        }
        (TrialStatus::Invalid, reason)
    } else if 100.0 * report.error_rate > max_error_rate {
        (
            TrialStatus::Invalid,
            format!(
                "error rate {:.3}% exceeds max_error_rate {}% ({})",
                100.0 * report.error_rate,
                max_error_rate,
                error_breakdown(report)
            ),
        )
    } else if report.close_ignored > 0 {
        // close-header mode measures a new connection per request; a server that keeps
        // the connection open makes every request wait close_grace for a close.
        (
            TrialStatus::Invalid,
            format!(
                "the server ignored `Connection: close` on {} of {} responses: rubyrace waited {} ms for each close, then closed itself, so the figures measure that wait, not the server",
                report.close_ignored,
                report.requests,
                (report.settings.close_grace_s * 1000.0).round()
            ),
        )
    } else if let Some(e) = resources_error {
        (
            TrialStatus::Invalid,
            format!("the server's resources could not be sampled: {e}"),
        )
    } else {
        return TrialStatus::Valid;
    };
    result.reason = Some(reason);
    status
}

/// At the start of the measured phase: the probe's first snapshot, the allocators each
/// process of the server's tree has mapped, and (with `cpus`) where each process may run.
pub(crate) fn mark_measured_start(
    probe_dir: &Path,
    pid: i32,
    preload: Option<&Path>,
    cpus: Option<&sys::cpus::CpuSplit>,
) -> (BTreeMap<i32, Vec<String>>, Option<PinningRecord>) {
    probe::request_snapshot(probe_dir, probe::MEASURE_START, pid, pid);
    let mut maps = BTreeMap::new();
    let pids = sys::resources::tree_pids(pid, pid).unwrap_or_default();
    for &p in &pids {
        if let Ok(found) = probe::mapped_allocators(p, preload) {
            maps.insert(p, found);
        }
    }
    let pinning = cpus.map(|split| PinningRecord::check(split, &pids));
    (maps, pinning)
}

/// Writes the trial's latency histogram (`latency.hlog`). A histogram cut short by a full
/// disk must not be stored as if whole: the run stops.
pub(crate) fn write_latency_log(
    out_dir: &Path,
    latency: &load::Histogram<u64>,
    elapsed_s: f64,
) -> Result<(), Stop> {
    let hdr_path = out_dir.join("latency.hlog");
    let written = fs::File::create(&hdr_path).and_then(|mut f| {
        load::report::write_hdr_log(&mut f, latency, elapsed_s)?;
        std::io::Write::flush(&mut f)
    });
    written.map_err(|e| write_failed(&hdr_path, &e))
}

/// The figures derived from a trial's load report and its server's resources.
pub(crate) fn derive(report: &load::LoadReport, resources: Option<&ResourceSummary>) -> Derived {
    let mut derived = Derived {
        requests_per_s: Some(report.requests_per_s),
        error_rate: Some(report.error_rate),
        ..Derived::default()
    };
    if let Some(r) = resources.filter(|_| report.requests > 0) {
        let per = |us: u64| us as f64 / report.requests as f64;
        derived.cpu_us_per_request = Some(per(r.cpu_user_us + r.cpu_system_us));
        derived.cpu_user_us_per_request = Some(per(r.cpu_user_us));
        derived.cpu_system_us_per_request = Some(per(r.cpu_system_us));
    }
    derived
}

fn error_breakdown(report: &load::LoadReport) -> String {
    let e = &report.errors;
    let mut parts = Vec::new();
    for (name, n) in [
        ("connect", e.connect),
        ("read", e.read),
        ("write", e.write),
        ("timeout", e.timeout),
        ("parse", e.parse),
    ] {
        if n > 0 {
            parts.push(format!("{n} {name}"));
        }
    }
    for (status, n) in &report.status {
        if !status.starts_with('2') {
            parts.push(format!("{n} × {status}"));
        }
    }
    parts.join(", ")
}

fn script_trial(
    spec: &TrialSpec,
    interrupt: &Arc<AtomicBool>,
    result: &mut TrialResult,
) -> Result<(), Stop> {
    let s = &spec.settings;
    let Some(script) = &s.script else {
        result.reason = Some("a script workload without a script".into());
        return Ok(());
    };
    let mut argv = s.ruby_argv.clone();
    if s.gemfile.is_some() {
        // The Gemfile's gems (BUNDLE_GEMFILE is in the environment), as `bundle exec` would.
        argv.push("-rbundler/setup".to_string());
    }
    argv.push(script.path.display().to_string());
    argv.extend(script.args.iter().cloned());
    let mut env = s.env.clone();
    let probe_dir = spec.out_dir.join(probe::PROBE_DIR);
    if let Err(e) = with_probe(&mut env, &probe_dir, s) {
        result.reason = Some(e);
        return Ok(());
    }
    let launch = Launch {
        argv: argv.clone(),
        env: env.into_iter().collect(),
        cwd: script
            .path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from(".")),
        cpus: spec.cpus.as_ref().map(|c| c.server.clone()),
    };
    let mut outcome = ScriptOutcome {
        argv,
        ..ScriptOutcome::default()
    };
    let limit = script.timeout;
    for run in 0..script.runs {
        let name = format!("run{}", run + 1);
        let since = Instant::now();
        let mut child = match Supervised::spawn(&launch, &spec.out_dir, &name, &spec.registry) {
            Ok(c) => c,
            Err(e) if is_storage_error(&e) => {
                return Err(Stop::WriteFailed(format!(
                    "cannot write the script's output files in {}: {e}",
                    spec.out_dir.display()
                )))
            }
            Err(e) => {
                result.reason = Some(format!("the script did not start: {e}"));
                result.script = Some(outcome);
                return Ok(());
            }
        };
        if let (0, Some(split)) = (run, &spec.cpus) {
            result.pinning = Some(PinningRecord::check(split, &[child.pid()]));
        }
        let waited = child.wait_with_usage(since, limit, interrupt);
        let Some((status, usage, wall)) = waited else {
            child.stop(Duration::from_secs(1));
            kill_orphans(&[child.pid()]);
            if interrupt.load(Ordering::SeqCst) {
                return Err(Stop::Interrupted);
            }
            result.reason = Some(format!(
                "run {} did not finish within {}",
                run + 1,
                humantime::format_duration(limit)
            ));
            result.script = Some(outcome);
            return Ok(());
        };
        child.stop(Duration::from_secs(1));
        let orphans = kill_orphans(&[child.pid()]);
        if !orphans.is_empty() {
            result.reason = Some(format!(
                "run {} of the script: {}",
                run + 1,
                describe_orphans(&orphans)
            ));
            result.script = Some(summarize_script(outcome));
            return Ok(());
        }
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        let stdout = fs::read_to_string(child.stdout_path()).unwrap_or_default();
        outcome.runs.push(ScriptRun {
            wall_s: wall.as_secs_f64(),
            user_s: tv(usage.ru_utime),
            system_s: tv(usage.ru_stime),
            max_rss_bytes: usage.ru_maxrss.max(0) as u64 * 1024,
            status: describe_status(status),
            metrics: parse_metrics(&stdout),
        });
        if !status.success() {
            result.reason = Some(format!(
                "run {} of the script ended with {}: {}",
                run + 1,
                describe_status(status),
                child.stderr_tail(STDERR_TAIL).trim()
            ));
            result.script = Some(summarize_script(outcome));
            return Ok(());
        }
    }
    result.script = Some(summarize_script(outcome));
    result.status = TrialStatus::Valid;
    let summary = probe::summarize(&probe::read_records(&probe_dir), &BTreeMap::new(), None);
    apply_probe(result, summary);
    Ok(())
}

fn summarize_script(mut o: ScriptOutcome) -> ScriptOutcome {
    o.median_wall_s = median(&o.runs.iter().map(|r| r.wall_s).collect::<Vec<_>>());
    o.median_user_s = median(&o.runs.iter().map(|r| r.user_s).collect::<Vec<_>>());
    o.median_system_s = median(&o.runs.iter().map(|r| r.system_s).collect::<Vec<_>>());
    o.max_rss_bytes = o.runs.iter().map(|r| r.max_rss_bytes).max();
    let names: std::collections::BTreeSet<&String> =
        o.runs.iter().flat_map(|r| r.metrics.keys()).collect();
    o.median_metrics = names
        .into_iter()
        .filter_map(|name| {
            median(
                &o.runs
                    .iter()
                    .filter_map(|r| r.metrics.get(name).copied())
                    .collect::<Vec<_>>(),
            )
            .map(|m| (name.clone(), m))
        })
        .collect();
    o
}

/// Reads `rubyrace-metric name=value [name=value ...]` lines.
pub fn parse_metrics(stdout: &str) -> BTreeMap<String, f64> {
    let mut metrics = BTreeMap::new();
    for line in stdout.lines() {
        let Some(rest) = line.trim().strip_prefix("rubyrace-metric ") else {
            continue;
        };
        for pair in rest.split_whitespace() {
            if let Some((k, v)) = pair.split_once('=') {
                if let Ok(v) = v.parse::<f64>() {
                    if v.is_finite() {
                        metrics.insert(k.to_string(), v);
                    }
                }
            }
        }
    }
    metrics
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_lines_are_read_and_other_output_ignored() {
        let m = parse_metrics("warming up\nrubyrace-metric iterations_per_s=1234.5 objects=10\nrubyrace-metric bad=x\n");
        assert_eq!(m.len(), 2);
        assert_eq!(m["iterations_per_s"], 1234.5);
        assert_eq!(m["objects"], 10.0);
    }

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
