//! Reading results directories into flat trial records: the numbers the report uses, and
//! every key a cohort can be grouped by (`label`, matrix axes, `ruby`, `settings.*`,
//! `env.*`, `machine`, `kernel`, `ruby_description`, `source`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;
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
    pub status: String,
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
    /// Why a valid HTTP trial has no readable histogram (the file is missing or damaged):
    /// the merged percentiles of its cohort then leave it out, and the report says so.
    pub hlog_problem: Option<String>,
    /// The machine's noise over the measured phase; None for script trials and old rows.
    pub noise: Option<lab::noise::NoiseRecord>,
    /// `quiet`: the wait for a quiet machine before the trial.
    pub quiet: Option<lab::conditions::QuietWait>,
    /// `cpus`: the CPUs checked in the server's processes and rubyrace's threads.
    pub pinning: Option<lab::conditions::PinningRecord>,
    /// `repeat_noisy`: attempts of this trial measured in noise and set aside.
    pub noisy_attempts: u32,
    /// An interleaved trial's server CPU between its own slices, µs per second.
    pub idle_cpu_per_s: Option<f64>,
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
    pub doctor: Vec<lab::doctor::Report>,
    pub trials: Vec<TrialData>,
    /// An adaptive run (`precision = ...`), and how it ended once it has.
    pub adaptive: bool,
    pub precision_end: Option<lab::precision::PrecisionEnd>,
    /// Trials the run planned; fewer stored means the run is incomplete.
    pub scheduled: usize,
    /// Per configuration with fewer stored trials than planned: (label, stored, planned).
    pub unfinished: Vec<(String, usize, usize)>,
    /// How its blocks were measured (lab::design::Design).
    pub design: lab::design::Design,
}

fn num(v: &Value, pointer: &str) -> Option<f64> {
    v.pointer(pointer).and_then(Value::as_f64)
}

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
    let store = lab::store::Store::open_read_only(dir)?;
    read_store(&store, index).with_context(|| format!("cannot read {}", store.db_path().display()))
}

fn read_store(store: &lab::store::Store, index: usize) -> Result<SourceData> {
    let configs = store.configs()?;
    let schedule = store.schedule()?;
    let axes_of: BTreeMap<usize, BTreeMap<String, String>> =
        configs.iter().map(|c| (c.id, c.axes.clone())).collect();
    let mut trials = Vec::new();
    for r in store.trial_results()? {
        let trial_id = r["trial_id"].as_u64().context("a trial without trial_id")? as usize;
        let config_id = r["config_id"].as_u64().unwrap_or(0) as usize;
        let label = text(&r["label"]);
        let axes = axes_of.get(&config_id).cloned().unwrap_or_default();
        let mut keys = BTreeMap::new();
        keys.insert("label".to_string(), label.clone());
        keys.insert("source".to_string(), store.dir().display().to_string());
        for (axis, value) in &axes {
            keys.insert(axis.clone(), value.clone());
        }
        flatten("settings", &r["settings"], &mut keys);
        keys.insert("ruby".to_string(), text(&r["settings"]["ruby"]));
        if let Some(env) = r["environment"]["env"].as_object() {
            for (k, v) in env {
                keys.insert(format!("env.{k}"), text(v));
            }
        }
        if let Some(env) = r["settings"]["env"].as_object() {
            for (k, v) in env {
                keys.entry(format!("env.{k}")).or_insert_with(|| text(v));
            }
        }
        let e = &r["environment"];
        keys.insert("machine".into(), text(&e["machine"]["hostname"]));
        keys.insert("kernel".into(), text(&e["machine"]["kernel"]));
        keys.insert("cpu_model".into(), text(&e["machine"]["cpu_model"]));
        keys.insert("ruby_description".into(), text(&e["ruby_description"]));
        keys.insert("rubyrace_version".into(), text(&e["rubyrace_version"]));
        if let Some(sha) = e["app_git"]["sha"].as_str() {
            keys.insert("app_git".into(), sha.to_string());
        }
        if let Some(gems) = r["probe"]["gems"].as_object() {
            for (name, version) in gems {
                keys.insert(format!("gem.{name}"), text(version));
            }
        }
        let mut runtime = BTreeMap::new();
        if let Some(m) = r["probe"]["measured"].as_object() {
            for (k, v) in m {
                if let Some(v) = v.as_f64() {
                    runtime.insert(k.clone(), v);
                }
            }
        }
        for k in ["app_loaded_after_s", "first_request_after_s"] {
            if let Some(v) = r["probe"][k].as_f64() {
                runtime.insert(k.to_string(), v);
            }
        }
        let checks = r["verification"]["checks"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|c| {
                        (
                            text(&c["setting"]),
                            text(&c["expected"]),
                            text(&c["observed"]),
                            c["ok"].as_bool().unwrap_or(false),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let trial_dir = lab::store::trial_dir(store.dir(), trial_id);
        let hlog = trial_dir.join("latency.hlog");
        let status = text(&r["status"]);
        let requests_per_s = num(&r, "/derived/requests_per_s");
        // Only a valid HTTP trial must have one; a failed trial may have stopped before.
        let hlog_problem = if status != "valid" || requests_per_s.is_none() {
            None
        } else if !trial_dir.is_dir() {
            Some(format!("{} is missing", trial_dir.display()))
        } else if !hlog.is_file() {
            Some(format!("{} is missing", hlog.display()))
        } else {
            read_histogram(&hlog).err().map(|e| format!("{e:#}"))
        };
        let metrics = r["script"]["median_metrics"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_f64().map(|v| (k.clone(), v)))
                    .collect()
            })
            .unwrap_or_default();
        trials.push(TrialData {
            source: index,
            trial_id,
            block: r["block"].as_u64().unwrap_or(0) as u32,
            config_id,
            label,
            status,
            reason: r["reason"].as_str().map(str::to_string),
            started_at: text(&r["started_at"]),
            keys,
            axes,
            requests_per_s,
            latency_p50_us: num(&r, "/load/latency_us/p50"),
            latency_p99_us: num(&r, "/load/latency_us/p99"),
            error_rate: num(&r, "/derived/error_rate"),
            rss_end: num(&r, "/resources/end/rss_bytes"),
            pss_end: num(&r, "/resources/end/pss_bytes"),
            uss_end: num(&r, "/resources/end/uss_bytes"),
            rss_peak: num(&r, "/resources/peak_rss_bytes"),
            pss_peak: num(&r, "/resources/peak_pss_bytes"),
            cpu_per_request: num(&r, "/derived/cpu_us_per_request"),
            cpu_user_per_request: num(&r, "/derived/cpu_user_us_per_request"),
            cpu_system_per_request: num(&r, "/derived/cpu_system_us_per_request"),
            wall_s: num(&r, "/script/median_wall_s"),
            user_s: num(&r, "/script/median_user_s"),
            system_s: num(&r, "/script/median_system_s"),
            max_rss: num(&r, "/script/max_rss_bytes"),
            metrics,
            runtime,
            checks,
            hlog: (hlog.is_file() && hlog_problem.is_none()).then_some(hlog),
            hlog_problem,
            // A damaged noise object is no noise record, not an unreadable run.
            noise: serde_json::from_value(r["noise"].clone()).ok().flatten(),
            quiet: serde_json::from_value(r["quiet"].clone()).ok().flatten(),
            pinning: serde_json::from_value(r["pinning"].clone()).ok().flatten(),
            noisy_attempts: r["noisy_attempts"].as_u64().unwrap_or(0) as u32,
            idle_cpu_per_s: num(&r, "/interleaved/idle_cpu_us")
                .zip(num(&r, "/interleaved/idle_s"))
                .filter(|&(_, s)| s > 0.0)
                .map(|(us, s)| us / s),
        });
    }
    let mut unfinished = Vec::new();
    for c in &configs {
        let planned = schedule.iter().filter(|s| s.config_id == c.id).count();
        let stored = trials.iter().filter(|t| t.config_id == c.id).count();
        if stored < planned {
            unfinished.push((c.label.clone(), stored, planned));
        }
    }
    Ok(SourceData {
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

/// The latency histogram of a trial (nanoseconds), merged over the log's intervals.
pub fn read_histogram(path: &Path) -> Result<Histogram<u64>> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut merged: Option<Histogram<u64>> = None;
    let mut deserializer = Deserializer::new();
    for entry in IntervalLogIterator::new(&bytes) {
        let entry = entry.map_err(|e| match e {
            hdrhistogram::serialization::interval_log::LogIteratorError::ParseError { offset } => {
                anyhow::anyhow!(
                    "{}: not an HdrHistogram interval log (unreadable from byte {offset})",
                    path.display()
                )
            }
        })?;
        if let LogEntry::Interval(interval) = entry {
            use base64::Engine as _;
            let raw = base64::engine::general_purpose::STANDARD
                .decode(interval.encoded_histogram())
                .with_context(|| format!("{}: bad base64", path.display()))?;
            let h: Histogram<u64> = deserializer
                .deserialize(&mut &raw[..])
                .map_err(|e| anyhow::anyhow!("{}: a damaged histogram ({e})", path.display()))?;
            match &mut merged {
                Some(m) => m
                    .add(&h)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?,
                None => merged = Some(h),
            }
        }
    }
    merged.with_context(|| format!("{} holds no histogram", path.display()))
}
