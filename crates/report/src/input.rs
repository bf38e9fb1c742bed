//! Reading results directories into flat trial records: the numbers the report uses, and
//! every key a cohort can be grouped by (`label`, matrix axes, `ruby`, `settings.*`,
//! `env.*`, `machine`, `kernel`, `ruby_description`, `source`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use results::{TrialResult, TrialStatus};
use serde_json::Value;

/// One stored trial, flattened.
#[derive(Clone, Debug, Default)]
pub struct TrialData {
    /// Index of its results directory among the report's inputs.
    pub source: usize,
    pub trial_id: usize,
    pub block: u32,
    pub config_id: usize,
    pub label: String,
    pub status: TrialStatus,
    pub reason: Option<String>,
    pub started_at: String,
    /// Every groupable key and its value for this trial.
    pub keys: BTreeMap<String, String>,
    /// The matrix axes of its configuration (axis → value label).
    pub axes: BTreeMap<String, String>,
    pub requests_per_s: Option<f64>,
    pub latency_p50_us: Option<f64>,
    pub latency_p99_us: Option<f64>,
    pub error_rate: Option<f64>,
    pub rss_end: Option<f64>,
    pub pss_end: Option<f64>,
    pub uss_end: Option<f64>,
    /// Memory per worker at the end (the mean over the server's forked Ruby processes of
    /// each one's own PSS and USS); None without workers.
    pub worker_pss_end: Option<f64>,
    pub worker_uss_end: Option<f64>,
    pub rss_peak: Option<f64>,
    pub pss_peak: Option<f64>,
    pub cpu_per_request: Option<f64>,
    pub cpu_user_per_request: Option<f64>,
    pub cpu_system_per_request: Option<f64>,
    pub wall_s: Option<f64>,
    pub user_s: Option<f64>,
    pub system_s: Option<f64>,
    pub max_rss: Option<f64>,
    pub metrics: BTreeMap<String, f64>,
    /// The probe's figures (`gc_per_1000_requests`, `app_loaded_after_s`, ...).
    pub runtime: BTreeMap<String, f64>,
    /// The verification of `jit`, `allocator`, `compact`: (setting, expected, observed, ok).
    pub checks: Vec<(String, String, String, bool)>,
    /// The trial's latency histogram (HdrHistogram interval log), if it has a readable one.
    pub hlog: Option<PathBuf>,
    /// `[fleet] load = "separate"`: the median round-trip time from the load's host to the
    /// server, in microseconds.
    pub load_rtt_us: Option<f64>,
    /// Why a valid HTTP trial has no readable histogram (the file is missing or damaged):
    /// the merged percentiles of its cohort then leave it out, and the report says so.
    pub hlog_problem: Option<String>,
    /// The machine's noise over the measured phase; None for script trials and old rows.
    pub noise: Option<sys::noise::NoiseRecord>,
    /// `quiet`: the wait for a quiet machine before the trial.
    pub quiet: Option<results::conditions::QuietWait>,
    /// `cpus`: the CPUs checked in the server's processes and rubyrace's threads.
    pub pinning: Option<results::conditions::PinningRecord>,
    /// `repeat_noisy`: attempts of this trial measured in noise and set aside.
    pub noisy_attempts: u32,
    /// An interleaved trial's server CPU outside its recorded windows and their lead-ins
    /// (its background work: timers, GC threads, a JIT), µs per second outside its windows.
    pub idle_cpu_per_s: Option<f64>,
    /// That CPU as a share of the CPU in its recorded windows (0.02: 2% more work than its
    /// CPU per request counts).
    pub idle_cpu_share: Option<f64>,
    /// CPU per request charged with all the CPU outside its recorded windows too (lead-ins
    /// included), µs: (window CPU + idle CPU) / requests.
    pub cpu_per_request_with_idle: Option<f64>,
    /// A held-open interleaved trial's slices, as far as their edges go (empty for other
    /// trials and for results stored before slices recorded their lead-in and drain).
    pub held_slices: Vec<HeldSlice>,
    /// The trial's profiles (`profile = ...`), their files relative to `dir`.
    pub profiles: Vec<results::profile::ProfileRecord>,
    /// The trial's own directory (`trials/NNNNN`).
    pub dir: PathBuf,
    /// Scenario runs: each step's figures in this trial.
    pub steps: Vec<StepPoint>,
}

/// One slice of a held-open interleaved trial, at its edges. Seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HeldSlice {
    /// When the slice (its lead-in) began, from the start of the block's measured phase,
    /// which the block's trials share.
    pub start_s: f64,
    /// Its unrecorded lead-in.
    pub lead_in_s: f64,
    /// How long its last requests took to complete after its close.
    pub drain_s: f64,
    /// Its recorded window.
    pub recorded_s: f64,
}

/// One scenario step in one trial.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepPoint {
    pub scenario: String,
    pub step: String,
    pub requests: u64,
    /// Unexpected statuses, extractions that found nothing, attempts without a response.
    pub failures: u64,
    pub p50_us: f64,
    pub p99_us: f64,
}

/// One results directory.
#[derive(Clone, Debug)]
pub struct SourceData {
    pub dir: PathBuf,
    pub experiment: String,
    pub created_at: String,
    pub commands: Vec<String>,
    pub smoke: bool,
    /// What `rubyrace doctor` found when each session of the run started.
    pub doctor: Vec<doctor::Report>,
    pub trials: Vec<TrialData>,
    /// An adaptive run (`precision = ...`), and how it ended once it has.
    pub adaptive: bool,
    pub precision_end: Option<experiment::precision::PrecisionEnd>,
    /// Trials the run planned; fewer stored means the run is incomplete.
    pub scheduled: usize,
    /// Per configuration with fewer stored trials than planned: (label, stored, planned).
    pub unfinished: Vec<(String, usize, usize)>,
    /// How its blocks were measured (experiment::design::Design).
    pub design: experiment::design::Design,
    /// The run writing it now, if one is (results::store::writer).
    pub writer: Option<results::store::writer::Writer>,
    /// The command that finishes it (`Store::resume_command`: a bisection's step, a check
    /// and a run each have their own).
    pub resume_command: String,
    /// A fleet run: blocks (0-based) that finished on their nodes and are not imported
    /// into the store yet (`run --detach`; `run --resume` imports them).
    pub unimported_blocks: Vec<u32>,
    /// A fleet run: the attempts of its blocks that failed (meta `fleet.failure.*`).
    pub fleet_failures: Vec<FleetFailure>,
}

/// A failed attempt of a fleet block, as the controller recorded it (docs/results.md).
#[derive(Clone, Debug, PartialEq)]
pub struct FleetFailure {
    /// 0-based.
    pub block: u32,
    /// The node(s) Slurm gave it.
    pub nodes: String,
    /// Slurm's state of the task (NODE_FAIL, CANCELLED, TIMEOUT, FAILED...).
    pub state: String,
    /// Why it gave no block, in the controller's words.
    pub failure: String,
    /// Whether the block was submitted again (else it was named missing).
    pub retried: bool,
}

impl FleetFailure {
    fn from_record(v: &Value) -> FleetFailure {
        FleetFailure {
            block: v["block"].as_u64().unwrap_or(0) as u32,
            nodes: v["nodes"].as_str().unwrap_or("").to_string(),
            state: v["state"].as_str().unwrap_or("").to_string(),
            failure: v["failure"].as_str().unwrap_or("").to_string(),
            retried: v["retried"].as_bool().unwrap_or(false),
        }
    }
}

/// A JSON value as a grouping key's text: strings as they are, lists joined by spaces.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(text).collect::<Vec<_>>().join(" "),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Adds `prefix.key` for every scalar (or list of scalars) in a JSON object, recursively.
fn flatten(prefix: &str, v: &Value, out: &mut BTreeMap<String, String>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                flatten(&format!("{prefix}.{k}"), v, out);
            }
        }
        other => {
            out.insert(prefix.to_string(), text(other));
        }
    }
}

/// Reads one results directory, changing nothing in it. Every error names the database.
pub fn read_source(dir: &Path, index: usize) -> Result<SourceData> {
    let store = results::store::Store::open_read_only(dir)?;
    read_store(&store, index).with_context(|| format!("cannot read {}", store.db_path().display()))
}

fn read_store(store: &results::store::Store, index: usize) -> Result<SourceData> {
    let configs = store.configs()?;
    let schedule = store.schedule()?;
    let axes_of: BTreeMap<usize, BTreeMap<String, String>> =
        configs.iter().map(|c| (c.id, c.axes.clone())).collect();
    let run_services = run_service_keys(&store.session_services()?);
    let mut trials = Vec::new();
    for r in store.trial_results()? {
        let trials_dir = results::store::trial_dir(store.dir(), r.id.trial_id);
        let mut t = trial_data(r, index, store.dir(), &trials_dir, &axes_of);
        for (k, v) in &run_services {
            t.keys.entry(k.clone()).or_insert_with(|| v.clone());
        }
        trials.push(t);
    }
    let mut unfinished = Vec::new();
    for c in &configs {
        let planned = schedule.iter().filter(|s| s.config_id == c.id).count();
        let stored = trials.iter().filter(|t| t.config_id == c.id).count();
        if stored < planned {
            unfinished.push((c.label.clone(), stored, planned));
        }
    }
    let unimported_blocks = if store.fleet()?.is_some() {
        let imported: Vec<u32> = store
            .fleet_blocks()?
            .iter()
            .filter_map(|b| b["block"].as_u64().map(|n| n as u32))
            .collect();
        results::store::block::finished_unimported_blocks(store.dir(), &imported)
    } else {
        Vec::new()
    };
    let fleet_failures = if store.fleet()?.is_some() {
        store
            .fleet_failures()?
            .iter()
            .map(FleetFailure::from_record)
            .collect()
    } else {
        Vec::new()
    };
    Ok(SourceData {
        resume_command: store.resume_command(),
        unimported_blocks,
        fleet_failures,
        writer: results::store::writer::current_writer(store.dir()),
        design: store.design()?,
        adaptive: store.precision_target()?.is_some(),
        precision_end: store.precision_end()?,
        scheduled: schedule.len(),
        unfinished,
        dir: store.dir().to_path_buf(),
        experiment: store.meta("experiment_name")?.unwrap_or_default(),
        created_at: store.meta("created_at")?.unwrap_or_default(),
        commands: store.session_commands()?,
        smoke: store.meta("smoke")?.as_deref() == Some("true"),
        doctor: store.doctor_reports()?,
        trials,
    })
}

/// The services a run's sessions started, as grouping keys (`services.postgres`,
/// `services.redis`): the version and the recorded settings. A service the sessions
/// describe differently (a resume on another PostgreSQL) says so rather than pick one.
fn run_service_keys(
    sessions: &[(i64, results::services::InstancesRecord)],
) -> BTreeMap<String, String> {
    let mut seen: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (_, record) in sessions {
        for (k, v) in service_keys(record) {
            seen.entry(k).or_default().insert(v);
        }
    }
    seen.into_iter()
        .map(|(k, values)| {
            let v = if values.len() == 1 {
                values.into_iter().next().unwrap_or_default()
            } else {
                format!(
                    "varies by session: {}",
                    values.into_iter().collect::<Vec<_>>().join(" | ")
                )
            };
            (k, v)
        })
        .collect()
}

/// One services record's keys: `services.postgres` = `15.18 (Debian …) · fsync=off …`,
/// `services.redis` = `7.0.15 · maxmemory=0 …`.
fn service_keys(record: &results::services::InstancesRecord) -> Vec<(String, String)> {
    let settings = |m: &BTreeMap<String, String>, skip: &str| {
        m.iter()
            .filter(|(k, _)| k.as_str() != skip)
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut keys = Vec::new();
    if let Some(p) = &record.postgres {
        keys.push((
            "services.postgres".to_string(),
            format!(
                "{} · {}",
                p.server_version(),
                settings(&p.settings, "server_version")
            ),
        ));
    }
    if let Some(r) = &record.redis {
        keys.push((
            "services.redis".to_string(),
            format!("{} · {}", r.version, settings(&r.settings, "")),
        ));
    }
    keys
}

/// One stored trial as the report's flat record: its figures, field by field, and every key
/// a cohort can be grouped by.
fn trial_data(
    r: TrialResult,
    index: usize,
    source_dir: &Path,
    trial_dir: &Path,
    axes_of: &BTreeMap<usize, BTreeMap<String, String>>,
) -> TrialData {
    let axes = axes_of.get(&r.id.config_id).cloned().unwrap_or_default();
    let mut keys = trial_keys(&r, source_dir, &axes);
    let runtime = runtime_figures(&r, &mut keys);
    let checks = verified_checks(&r);
    let hlog = trial_dir.join(results::store::trial_files::LATENCY_HLOG);
    let requests_per_s = r.derived.requests_per_s;
    let hlog_problem = latency_log_problem(&r, trial_dir, &hlog);
    let steps = scenario_steps(&r);
    let held_slices = held_slices(&r);
    let latency = r.load.as_ref().map(|l| &l.latency_us);
    let (worker_pss_end, worker_uss_end) = worker_memory(&r);
    let resources = r.resources.as_ref();
    let bytes = |v: Option<u64>| v.map(|b| b as f64);
    let script = r.script.as_ref();
    let window_cpu_us = resources.map(|x| (x.cpu_user_us + x.cpu_system_us) as f64);
    // All the CPU outside the recorded windows (charged by cpu_per_request_with_idle), and
    // the part of it that was not the slices' own lead-ins: the server's background work,
    // which the idle figures and their warning are about (the lead-ins' requests are in no
    // figure either, so their CPU leaves no figure per request wrong).
    let idle_share_of = |idle: Option<u64>| {
        idle.zip(window_cpu_us)
            .filter(|&(_, window)| window > 0.0)
            .map(|(idle, window)| idle as f64 / window)
    };
    let idle_cpu_all = r.interleaved.as_ref().and_then(|i| i.idle_cpu_us);
    let background_cpu = r.interleaved.as_ref().and_then(|i| {
        i.idle_cpu_us
            .map(|idle| idle.saturating_sub(i.lead_in_cpu_us.unwrap_or(0)))
    });
    let idle_cpu_share = idle_share_of(background_cpu);
    TrialData {
        source: index,
        trial_id: r.id.trial_id,
        block: r.id.block,
        config_id: r.id.config_id,
        label: r.id.label,
        status: r.status,
        reason: r.reason,
        started_at: r.started_at,
        keys,
        axes,
        requests_per_s,
        latency_p50_us: latency.map(|l| l.p50),
        latency_p99_us: latency.map(|l| l.p99),
        error_rate: r.derived.error_rate,
        rss_end: bytes(resources.map(|x| x.end.rss_bytes)),
        pss_end: bytes(resources.map(|x| x.end.pss_bytes)),
        uss_end: bytes(resources.map(|x| x.end.uss_bytes)),
        worker_pss_end,
        worker_uss_end,
        rss_peak: bytes(resources.map(|x| x.peak_rss_bytes)),
        pss_peak: bytes(resources.map(|x| x.peak_pss_bytes)),
        cpu_per_request: r.derived.cpu_us_per_request,
        cpu_user_per_request: r.derived.cpu_user_us_per_request,
        cpu_system_per_request: r.derived.cpu_system_us_per_request,
        wall_s: script.and_then(|s| s.median_wall_s),
        user_s: script.and_then(|s| s.median_user_s),
        system_s: script.and_then(|s| s.median_system_s),
        max_rss: bytes(script.and_then(|s| s.max_rss_bytes)),
        metrics: script.map(|s| s.median_metrics.clone()).unwrap_or_default(),
        runtime,
        checks,
        hlog: (hlog.is_file() && hlog_problem.is_none()).then_some(hlog),
        load_rtt_us: r
            .load_host
            .as_ref()
            .and_then(|l| l.rtt.as_ref())
            .map(|rtt| rtt.median_us),
        hlog_problem,
        noise: r.noise,
        quiet: r.quiet,
        pinning: r.pinning,
        noisy_attempts: r.noisy_attempts,
        idle_cpu_per_s: background_cpu
            .map(|us| us as f64)
            .zip(r.interleaved.as_ref().and_then(|i| i.idle_s))
            .filter(|&(_, s)| s > 0.0)
            .map(|(us, s)| us / s),
        idle_cpu_share,
        cpu_per_request_with_idle: r
            .derived
            .cpu_us_per_request
            .zip(idle_share_of(idle_cpu_all))
            .map(|(cpu, share)| cpu * (1.0 + share)),
        held_slices,
        profiles: r.profiles,
        dir: trial_dir.to_path_buf(),
        steps,
    }
}

/// The values a trial can be grouped or compared by: its label, source, matrix axes,
/// every setting (`settings.threads`), environment variables (`env.NAME`), the machine and
/// host, the Ruby, the app's commit, and the trial's own services.
fn trial_keys(
    r: &TrialResult,
    source_dir: &Path,
    axes: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut keys = BTreeMap::new();
    keys.insert("label".to_string(), r.id.label.clone());
    keys.insert("source".to_string(), source_dir.display().to_string());
    for (axis, value) in axes {
        keys.insert(axis.clone(), value.clone());
    }
    // Every setting, by its name in the results (`settings.threads`, `settings.load.mode`).
    if let Ok(settings) = serde_json::to_value(&r.settings) {
        flatten("settings", &settings, &mut keys);
    }
    keys.insert("ruby".to_string(), r.settings.ruby.clone());
    for (k, v) in &r.environment.env {
        keys.insert(format!("env.{k}"), v.clone());
    }
    for (k, v) in &r.settings.env {
        keys.entry(format!("env.{k}")).or_insert_with(|| v.clone());
    }
    let e = &r.environment;
    keys.insert("machine".into(), e.machine.hostname.clone());
    keys.insert("host".into(), r.host().to_string());
    keys.insert("cpus".into(), e.machine.cpus_online.to_string());
    if let Some(p) = &e.placement {
        keys.insert("fleet".into(), p.engine.clone());
    }
    if let Some(l) = &r.load_host {
        keys.insert("load_host".into(), l.node.clone());
    }
    keys.insert("kernel".into(), e.machine.kernel.clone());
    keys.insert("cpu_model".into(), e.machine.cpu_model.clone());
    keys.insert(
        "ruby_description".into(),
        e.ruby_description.clone().unwrap_or_default(),
    );
    keys.insert("rubyrace_version".into(), e.rubyrace_version.clone());
    if let Some(git) = &e.app_git {
        keys.insert("app_git".into(), git.sha.clone());
    }
    // Services of this trial alone (`lifetime = "trial"`); the run's are added by the caller.
    if let Some(instances) = r.services.as_ref().and_then(|s| s.instances.as_ref()) {
        keys.extend(service_keys(instances));
    }
    keys
}

/// What the probe measured inside the server (GC, allocations, YJIT, boot times), by
/// name; the gems it saw loaded go into `keys` (`gem.NAME`).
fn runtime_figures(r: &TrialResult, keys: &mut BTreeMap<String, String>) -> BTreeMap<String, f64> {
    let mut runtime = BTreeMap::new();
    if let Some(probe) = &r.probe {
        for (name, version) in &probe.gems {
            keys.insert(format!("gem.{name}"), version.clone());
        }
        // The measured figures by name (`gc_per_1000_requests`, ...), those that are numbers.
        if let Some(Value::Object(m)) = probe
            .measured
            .as_ref()
            .map(|m| serde_json::to_value(m).unwrap_or_default())
        {
            for (k, v) in m {
                if let Some(v) = v.as_f64() {
                    runtime.insert(k, v);
                }
            }
        }
        for (k, v) in [
            ("app_loaded_after_s", probe.app_loaded_after_s),
            ("first_request_after_s", probe.first_request_after_s),
        ] {
            if let Some(v) = v {
                runtime.insert(k.to_string(), v);
            }
        }
    }
    runtime
}

/// The settings checked on the running server: setting, expected, observed, and whether
/// they agreed.
fn verified_checks(r: &TrialResult) -> Vec<(String, String, String, bool)> {
    r.verification
        .as_ref()
        .map(|v| {
            v.checks
                .iter()
                .map(|c| {
                    (
                        c.setting.clone(),
                        c.expected.clone(),
                        c.observed.clone(),
                        c.ok,
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Why a valid HTTP trial's latency log `hlog` cannot be read, if it cannot (a failed
/// trial may have stopped before it wrote one).
fn latency_log_problem(r: &TrialResult, trial_dir: &Path, hlog: &Path) -> Option<String> {
    if r.status != TrialStatus::Valid || r.derived.requests_per_s.is_none() {
        None
    } else if !trial_dir.is_dir() {
        Some(format!("{} is missing", trial_dir.display()))
    } else if !hlog.is_file() {
        Some(format!("{} is missing", hlog.display()))
    } else {
        read_histogram(hlog).err().map(|e| format!("{e:#}"))
    }
}

/// A scenario's steps as the trial measured them.
fn scenario_steps(r: &TrialResult) -> Vec<StepPoint> {
    r.load
        .as_ref()
        .and_then(|l| l.scenario.as_ref())
        .map(|sc| {
            sc.steps
                .iter()
                .map(|st| StepPoint {
                    scenario: st.scenario.clone(),
                    step: st.step.clone(),
                    requests: st.requests,
                    failures: st.unexpected_status + st.extract_failures + st.errors,
                    p50_us: st.latency_us.p50,
                    p99_us: st.latency_us.p99,
                })
                .collect()
        })
        .unwrap_or_default()
}

/// An interleaved trial's held-open slices: when each started, its lead-in, its drain and
/// what was recorded.
fn held_slices(r: &TrialResult) -> Vec<HeldSlice> {
    r.interleaved
        .as_ref()
        .filter(|i| i.held_open)
        .map(|i| {
            i.slices
                .iter()
                .filter_map(|s| {
                    Some(HeldSlice {
                        start_s: s.start_s,
                        lead_in_s: s.lead_in_s?,
                        drain_s: s.drain_s?,
                        recorded_s: s.elapsed_s,
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The latency histogram of a trial (nanoseconds), merged over the log's intervals (read
/// by `load::hlog`, where its writer is); an error names the file and its cause.
pub fn read_histogram(path: &Path) -> Result<Histogram<u64>> {
    Ok(load::hlog::read_hdr_log(path)?)
}

/// Memory per worker at the end of a trial: the mean, over the processes the probe saw
/// forked (Puma's or unicorn's workers), of each one's own PSS and USS from the tree's last
/// sample. None for a server without workers or a trial without per-process figures.
fn worker_memory(r: &TrialResult) -> (Option<f64>, Option<f64>) {
    let (Some(resources), Some(probe)) = (&r.resources, &r.probe) else {
        return (None, None);
    };
    let forked: BTreeSet<i32> = probe
        .processes
        .iter()
        .filter(|p| p.forked)
        .map(|p| p.pid)
        .collect();
    let workers: Vec<&sys::resources::MemberMemory> = resources
        .end
        .members
        .iter()
        .filter(|m| forked.contains(&m.pid))
        .collect();
    if workers.is_empty() {
        return (None, None);
    }
    let mean = |f: fn(&sys::resources::MemberMemory) -> u64| {
        Some(workers.iter().map(|m| f(m) as f64).sum::<f64>() / workers.len() as f64)
    };
    (mean(|m| m.pss_bytes), mean(|m| m.uss_bytes))
}
