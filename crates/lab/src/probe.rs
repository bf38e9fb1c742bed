//! rubyrace's side of the in-process probe (`ruby/probe.rb`): the environment that loads it
//! into every Ruby process of a server, asking for snapshots (SIGURG) at the edges of the
//! measured phase, reading the per-process files, the figures derived from them (GC and
//! YJIT per 1000 requests, heap, boot time, gems) and the verification that `jit`,
//! `allocator` and `compact` were really in force in every process.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::de::{DeserializeOwned, Deserializer};
use serde::Deserialize;
use serde_json::Value;

use experiment::ConfigSettings;
use results::probe::{Check, MeasuredRuntime, ProbeProcess, ProbeSummary, Verification};
use results::TrialResult;
use rubies::knobs::{AllocatorSetting, Compact, Jit, ALLOCATOR_PREFIXES};

pub const PROBE_SCHEMA: &str = "rubyrace.probe/1";
/// The trial's subdirectory where each process writes `<pid>.json`.
pub const PROBE_DIR: &str = "probe";
/// The snapshots a trial asks for, in order.
pub const MEASURE_START: &str = "measure_start";
pub const MEASURE_END: &str = "measure_end";
/// Written by the probe when a process exits through Ruby.
pub const EXIT: &str = "exit";
/// How long a snapshot request waits for every probed process to answer.
pub const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(3);

/// The probe script.
pub fn probe_script() -> PathBuf {
    rubies::support::ruby_support_dir().join("probe.rb")
}

/// Variables that load the probe into every Ruby process started with them: `RUBYOPT`
/// gains `-r<probe.rb>` (kept across `bundle exec`, re-execs and forks), the probe writes
/// into `dir`, and `compact` tells it what to do about compaction. `rubyopt` is the RUBYOPT
/// the Ruby would have had otherwise. RUBYOPT splits on spaces, so a probe path with a space
/// is an error.
pub fn probe_env(
    dir: &Path,
    rubyopt: Option<&str>,
    compact: Option<Compact>,
) -> Result<Vec<(String, String)>, String> {
    let script = probe_script();
    let script = script
        .to_str()
        .ok_or_else(|| format!("the probe's path {} is not UTF-8", script.display()))?;
    if script.chars().any(char::is_whitespace) {
        return Err(format!(
            "the probe's path {script:?} contains a space, which RUBYOPT cannot carry; \
             install rubyrace (or set RUBYRACE_RUBY_DIR) under a path without spaces"
        ));
    }
    let mut opt = format!("-r{script}");
    if let Some(existing) = rubyopt.filter(|o| !o.trim().is_empty()) {
        opt.push(' ');
        opt.push_str(existing);
    }
    let mut env = vec![
        ("RUBYOPT".to_string(), opt),
        ("RUBYRACE_PROBE_DIR".to_string(), dir.display().to_string()),
    ];
    if let Some(c) = compact {
        env.push(("RUBYRACE_COMPACT".to_string(), c.as_str().to_string()));
    }
    Ok(env)
}

/// One process's file, `<pid>.json`, as `ruby/probe.rb` writes it (schema
/// `rubyrace.probe/1`): only the fields rubyrace reads. The probe runs inside Rubies from
/// 2.7 on, so every field may be missing, null or of another type than expected; such a
/// field reads as its default rather than losing the whole process.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ProbeRecord {
    #[serde(deserialize_with = "lenient")]
    pub schema: String,
    #[serde(deserialize_with = "lenient")]
    pub pid: i32,
    #[serde(deserialize_with = "lenient")]
    pub forked: bool,
    #[serde(deserialize_with = "lenient")]
    pub ruby_description: String,
    #[serde(deserialize_with = "lenient")]
    pub app_loaded_after_s: Option<f64>,
    #[serde(deserialize_with = "lenient")]
    pub first_request_after_s: Option<f64>,
    /// Set when GC.compact ran after boot; null otherwise.
    #[serde(deserialize_with = "lenient")]
    pub compaction: Compaction,
    /// By phase: `measure_start`, `measure_end`, `exit`.
    #[serde(deserialize_with = "lenient")]
    pub snapshots: BTreeMap<String, Snapshot>,
    #[serde(deserialize_with = "lenient")]
    pub errors: Vec<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Compaction {
    #[serde(deserialize_with = "lenient")]
    pub ran: bool,
}

/// What a process reported at one phase.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Snapshot {
    /// Which JITs are on (`yjit` → enabled?).
    #[serde(deserialize_with = "lenient")]
    pub jit: BTreeMap<String, bool>,
    /// `GC.stat`.
    #[serde(deserialize_with = "lenient")]
    pub gc: GcStat,
    #[serde(deserialize_with = "lenient")]
    pub gc_auto_compact: Option<bool>,
    /// `RubyVM::YJIT.runtime_stats`, when YJIT is on.
    #[serde(deserialize_with = "lenient")]
    pub yjit: YjitStats,
    /// Allocator libraries in the process's own `/proc/self/maps`.
    #[serde(deserialize_with = "lenient")]
    pub allocator_libraries: Vec<String>,
    /// Loaded gems, name → version.
    #[serde(deserialize_with = "lenient")]
    pub gems: BTreeMap<String, String>,
}

/// The counters of `GC.stat` that rubyrace uses; a Ruby without one leaves it `None`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct GcStat {
    #[serde(deserialize_with = "lenient")]
    pub count: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    pub minor_gc_count: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    pub major_gc_count: Option<u64>,
    /// Milliseconds in GC (Ruby >= 3.1).
    #[serde(deserialize_with = "lenient")]
    pub time: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    pub total_allocated_objects: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    pub compact_count: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    pub heap_allocated_pages: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    pub heap_live_slots: Option<u64>,
}

/// The counters of `RubyVM::YJIT.runtime_stats` that rubyrace uses. `ratio_in_yjit` and
/// `invalidation_count` need `--yjit-stats`; the code size keys changed across versions.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct YjitStats {
    #[serde(deserialize_with = "lenient")]
    pub code_region_size: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    pub inline_code_size: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    pub outlined_code_size: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    pub invalidation_count: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    pub ratio_in_yjit: Option<f64>,
}

impl YjitStats {
    /// YJIT's generated code: `code_region_size`, or inline + outlined on older Rubies.
    fn code_bytes(&self) -> Option<u64> {
        self.code_region_size
            .or_else(|| Some(self.inline_code_size? + self.outlined_code_size?))
    }
}

/// Any JSON value: `T` if it reads as one, else `T::default()`.
fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned + Default>(d: D) -> Result<T, D::Error> {
    let value = Value::deserialize(d)?;
    Ok(T::deserialize(value).unwrap_or_default())
}

impl ProbeRecord {
    /// The snapshot taken at `phase`, if the process took it.
    pub fn snapshot(&self, phase: &str) -> Option<&Snapshot> {
        self.snapshots.get(phase)
    }

    /// The first of `phases` the process took.
    fn first_snapshot(&self, phases: [&str; 3]) -> Option<&Snapshot> {
        phases.into_iter().find_map(|p| self.snapshot(p))
    }

    /// The latest snapshot: at exit, else at the end of the measurement, else its start.
    fn last_snapshot(&self) -> Option<&Snapshot> {
        self.first_snapshot([EXIT, MEASURE_END, MEASURE_START])
    }

    /// The snapshot of the process while it served: measure_end, else measure_start, else
    /// at exit.
    fn serving_snapshot(&self) -> Option<&Snapshot> {
        self.first_snapshot([MEASURE_END, MEASURE_START, EXIT])
    }
}

/// Reads every `<pid>.json` in the probe directory, in pid order. Unreadable or partial
/// files, and files of another schema, are skipped (the probe renames complete files into
/// place).
pub fn read_records(dir: &Path) -> Vec<ProbeRecord> {
    let mut records: Vec<ProbeRecord> = fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
                .filter_map(|e| fs::read(e.path()).ok())
                .filter_map(|bytes| serde_json::from_slice::<ProbeRecord>(&bytes).ok())
                .filter(|r| r.schema == PROBE_SCHEMA)
                .collect()
        })
        .unwrap_or_default();
    records.sort_by_key(|r| r.pid);
    records
}

fn is_alive(pid: i32) -> bool {
    sys::process::proc_stat(pid).is_some_and(|s| s.state != 'Z')
}

/// Asks every probed process of the server (its registered pids that are in the server's
/// tree) for a snapshot named `phase`, and waits until each has written it or is gone, or
/// [`SNAPSHOT_TIMEOUT`] passes. Returns the pids that were asked. Only processes of the
/// server's tree are signalled: never anything rubyrace did not start.
pub fn request_snapshot(dir: &Path, phase: &str, root: i32, pgid: i32) -> Vec<i32> {
    if fs::write(dir.join("phase"), phase).is_err() {
        return Vec::new();
    }
    let tree = sys::resources::tree_pids(root, pgid).unwrap_or_default();
    let asked: Vec<i32> = read_records(dir)
        .iter()
        .map(|r| r.pid)
        .filter(|pid| tree.contains(pid))
        .collect();
    for pid in &asked {
        // A process of the server's tree: ask it for a snapshot.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid),
            nix::sys::signal::Signal::SIGURG,
        );
    }
    let deadline = Instant::now() + SNAPSHOT_TIMEOUT;
    loop {
        let records = read_records(dir);
        let pending = asked.iter().any(|pid| {
            is_alive(*pid)
                && !records
                    .iter()
                    .any(|r| r.pid == *pid && r.snapshot(phase).is_some())
        });
        if !pending || Instant::now() >= deadline {
            return asked;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The allocator libraries mapped into a process, from `/proc/PID/maps`: jemalloc,
/// tcmalloc, and `extra` (a preloaded library of the user's).
pub fn mapped_allocators(pid: i32, extra: Option<&Path>) -> std::io::Result<Vec<String>> {
    let maps = fs::read_to_string(format!("/proc/{pid}/maps"))?;
    let extra = extra.map(|p| p.display().to_string());
    let mut found: Vec<String> = Vec::new();
    for line in maps.lines() {
        let Some(path) = line.split_whitespace().nth(5) else {
            continue;
        };
        let base = path.rsplit('/').next().unwrap_or(path);
        let wanted = ALLOCATOR_PREFIXES.iter().any(|(_, p)| base.starts_with(p))
            || extra.as_deref() == Some(path);
        if wanted && !found.iter().any(|f| f == path) {
            found.push(path.to_string());
        }
    }
    Ok(found)
}

/// One process from its record; `maps` are rubyrace's own readings of `/proc/PID/maps`.
fn process_of(record: &ProbeRecord, maps: &BTreeMap<i32, Vec<String>>) -> ProbeProcess {
    let serving = record.serving_snapshot();
    ProbeProcess {
        pid: record.pid,
        forked: record.forked,
        ruby_description: record.ruby_description.clone(),
        app_loaded_after_s: record.app_loaded_after_s,
        first_request_after_s: record.first_request_after_s,
        snapshots: record.snapshots.keys().cloned().collect(),
        jit: serving.map(|s| s.jit.clone()).unwrap_or_default(),
        gc_auto_compact: serving.and_then(|s| s.gc_auto_compact),
        compacted_after_boot: record.compaction.ran,
        compact_count: record.last_snapshot().and_then(|s| s.gc.compact_count),
        allocator_libraries: maps.get(&record.pid).cloned().unwrap_or_else(|| {
            serving
                .map(|s| s.allocator_libraries.clone())
                .unwrap_or_default()
        }),
        errors: record.errors.clone(),
    }
}

/// The growth of a counter between two snapshots.
fn delta(start: Option<u64>, end: Option<u64>) -> Option<u64> {
    Some(end?.saturating_sub(start?))
}

/// Sums the measured phase over processes. `requests`: measured requests, for the rates.
fn measured_runtime(records: &[ProbeRecord], requests: Option<u64>) -> Option<MeasuredRuntime> {
    let mut m = MeasuredRuntime::default();
    let mut gc_time = None::<f64>;
    let mut allocated = None::<u64>;
    let mut compact = None::<u64>;
    let mut pages = None::<u64>;
    let mut live = None::<u64>;
    let mut code = None::<u64>;
    let mut invalidations = None::<u64>;
    let mut ratios = Vec::new();
    let add = |acc: &mut Option<u64>, v: Option<u64>| {
        if let Some(v) = v {
            *acc = Some(acc.unwrap_or(0) + v);
        }
    };
    for r in records {
        let (Some(start), Some(end)) = (r.snapshot(MEASURE_START), r.snapshot(MEASURE_END)) else {
            continue;
        };
        m.processes += 1;
        let (gs, ge) = (&start.gc, &end.gc);
        m.gc_count += delta(gs.count, ge.count).unwrap_or(0);
        m.minor_gc_count += delta(gs.minor_gc_count, ge.minor_gc_count).unwrap_or(0);
        m.major_gc_count += delta(gs.major_gc_count, ge.major_gc_count).unwrap_or(0);
        if let Some(t) = delta(gs.time, ge.time) {
            gc_time = Some(gc_time.unwrap_or(0.0) + t as f64);
        }
        add(
            &mut allocated,
            delta(gs.total_allocated_objects, ge.total_allocated_objects),
        );
        add(&mut compact, delta(gs.compact_count, ge.compact_count));
        add(&mut pages, ge.heap_allocated_pages);
        add(&mut live, ge.heap_live_slots);
        add(&mut code, end.yjit.code_bytes());
        add(
            &mut invalidations,
            delta(start.yjit.invalidation_count, end.yjit.invalidation_count),
        );
        if let Some(ratio) = end.yjit.ratio_in_yjit {
            ratios.push(ratio);
        }
    }
    if m.processes == 0 {
        return None;
    }
    m.gc_time_ms = gc_time;
    m.allocated_objects = allocated;
    m.compact_count = compact;
    m.heap_allocated_pages = pages;
    m.heap_live_slots = live;
    m.yjit_code_bytes = code;
    m.yjit_invalidations = invalidations;
    m.yjit_ratio_in_yjit =
        (!ratios.is_empty()).then(|| ratios.iter().sum::<f64>() / ratios.len() as f64);
    if let Some(n) = requests.filter(|n| *n > 0) {
        let per_1000 = |x: f64| x * 1000.0 / n as f64;
        m.gc_per_1000_requests = Some(per_1000(m.gc_count as f64));
        m.minor_gc_per_1000_requests = Some(per_1000(m.minor_gc_count as f64));
        m.major_gc_per_1000_requests = Some(per_1000(m.major_gc_count as f64));
        m.gc_time_ms_per_1000_requests = m.gc_time_ms.map(per_1000);
        m.allocated_objects_per_request = m.allocated_objects.map(|a| a as f64 / n as f64);
    }
    Some(m)
}

/// Summarizes the probe's files. `maps`: `/proc/PID/maps` allocator readings by pid;
/// `requests`: the measured requests (none for a script workload).
pub fn summarize(
    records: &[ProbeRecord],
    maps: &BTreeMap<i32, Vec<String>>,
    requests: Option<u64>,
) -> Option<ProbeSummary> {
    if records.is_empty() {
        return None;
    }
    let processes: Vec<ProbeProcess> = records.iter().map(|r| process_of(r, maps)).collect();
    let mut gems = BTreeMap::new();
    for snapshot in records.iter().filter_map(ProbeRecord::last_snapshot) {
        gems.extend(snapshot.gems.clone());
    }
    let slowest =
        |f: fn(&ProbeProcess) -> Option<f64>| processes.iter().filter_map(f).max_by(f64::total_cmp);
    Some(ProbeSummary {
        ruby_description: processes.first().map(|p| p.ruby_description.clone()),
        app_loaded_after_s: slowest(|p| p.app_loaded_after_s),
        first_request_after_s: slowest(|p| p.first_request_after_s),
        measured: measured_runtime(records, requests),
        gems,
        processes,
    })
}

/// Adds the probe to a server's or script's environment (RUBYOPT, its directory, the
/// compaction mode) and creates its directory.
pub(crate) fn add_to_env(
    env: &mut BTreeMap<String, String>,
    dir: &Path,
    compact: Option<Compact>,
) -> Result<(), String> {
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let rubyopt = env
        .get("RUBYOPT")
        .cloned()
        .or_else(|| std::env::var("RUBYOPT").ok());
    let vars = probe_env(dir, rubyopt.as_deref(), compact)?;
    env.extend(vars);
    Ok(())
}

/// Stores the probe's summary and the verification of the settings in a trial's result;
/// settings that were not in force make a valid trial invalid.
pub(crate) fn apply(result: &mut TrialResult, summary: Option<ProbeSummary>) {
    let verification = verify(&result.settings, summary.as_ref());
    if let Some(failure) = verification.as_ref().and_then(Verification::failure) {
        result.invalidate(failure);
    }
    result.probe = summary;
    result.verification = verification;
}

/// Checks `jit`, `allocator` and `compact` against the processes. The processes checked are
/// those that served (took a measurement snapshot), or, for a script, all of them. None
/// when none of the three was asked for.
pub fn verify(settings: &ConfigSettings, summary: Option<&ProbeSummary>) -> Option<Verification> {
    if settings.jit.is_none() && settings.allocator.is_none() && settings.compact.is_none() {
        return None;
    }
    let procs = checked_processes(summary);
    let mut checks = Vec::new();
    if let Some(jit) = settings.jit {
        checks.push(check_jit(jit, &procs));
    }
    if let Some(a) = &settings.allocator {
        checks.push(check_allocator(a, &procs));
    }
    if let Some(c) = settings.compact {
        checks.push(check_compact(c, &procs));
    }
    Some(Verification {
        ok: checks.iter().all(|c| c.ok),
        checks,
    })
}

/// What a check observes when no process answered.
const NONE_ANSWERED: &str = "no Ruby process of the server answered the probe (ruby/probe.rb was not loaded, or the processes died)";

/// The processes [`verify`] checks: those that served, or all of them when none did.
fn checked_processes(summary: Option<&ProbeSummary>) -> Vec<&ProbeProcess> {
    let all: Vec<&ProbeProcess> = summary
        .map(|s| s.processes.iter().collect())
        .unwrap_or_default();
    let serving: Vec<&ProbeProcess> = all
        .iter()
        .copied()
        .filter(|p| {
            p.snapshots
                .iter()
                .any(|s| s == MEASURE_START || s == MEASURE_END)
        })
        .collect();
    if serving.is_empty() {
        all
    } else {
        serving
    }
}

/// The check of `jit`: only the JIT asked for is on, in every process.
fn check_jit(jit: Jit, procs: &[&ProbeProcess]) -> Check {
    let n = procs.len();
    let (ok, observed) = if n == 0 {
        (false, NONE_ANSWERED.to_string())
    } else {
        let matching = procs
            .iter()
            .filter(|p| {
                p.jit
                    .iter()
                    .all(|(name, on)| *on == (jit != Jit::None && name == jit.as_str()))
                    && (jit == Jit::None || p.jit.get(jit.as_str()) == Some(&true))
            })
            .count();
        // Each process's state, e.g. "yjit on" or "every JIT off", counted.
        let mut states: BTreeMap<String, usize> = BTreeMap::new();
        for p in procs {
            let on: Vec<&str> = p
                .jit
                .iter()
                .filter(|(_, on)| **on)
                .map(|(name, _)| name.as_str())
                .collect();
            let state = if on.is_empty() {
                "every JIT off".to_string()
            } else {
                format!("{} on", on.join(", "))
            };
            *states.entry(state).or_default() += 1;
        }
        let observed: Vec<String> = states
            .iter()
            .map(|(state, count)| format!("{state} in {count} of {n} processes"))
            .collect();
        (matching == n, observed.join(", "))
    };
    Check {
        setting: "jit".into(),
        expected: jit.as_str().into(),
        observed,
        ok,
    }
}

/// The check of `allocator`: its library mapped in every process, or, for "system", none.
fn check_allocator(a: &AllocatorSetting, procs: &[&ProbeProcess]) -> Check {
    let n = procs.len();
    let has = |p: &ProbeProcess| -> bool {
        match &a.preload {
            Some(lib) if a.name != "jemalloc" && a.name != "tcmalloc" => {
                p.allocator_libraries.iter().any(|l| Path::new(l) == lib)
            }
            _ => {
                let prefix = ALLOCATOR_PREFIXES
                    .iter()
                    .find(|(name, _)| *name == a.name)
                    .map(|(_, prefix)| *prefix);
                p.allocator_libraries.iter().any(|l| {
                    let base = l.rsplit('/').next().unwrap_or(l);
                    prefix.is_some_and(|pre| base.starts_with(pre))
                })
            }
        }
    };
    let (ok, observed) = if n == 0 {
        (false, NONE_ANSWERED.to_string())
    } else if a.name == "system" {
        let clean = procs
            .iter()
            .filter(|p| p.allocator_libraries.is_empty())
            .count();
        let mapped: Vec<&str> = procs
            .iter()
            .flat_map(|p| p.allocator_libraries.iter().map(String::as_str))
            .collect();
        (
            clean == n,
            if clean == n {
                format!("no allocator library mapped in any of {n} processes")
            } else {
                format!("{} mapped in {} of {n} processes", mapped[0], n - clean)
            },
        )
    } else {
        let with = procs.iter().filter(|p| has(p)).count();
        let lib = procs
            .iter()
            .flat_map(|p| p.allocator_libraries.first())
            .next()
            .cloned()
            .unwrap_or_else(|| format!("lib{}", a.name));
        (
            with == n,
            format!("{lib} mapped in {with} of {n} processes"),
        )
    };
    Check {
        setting: "allocator".into(),
        expected: a.name.clone(),
        observed,
        ok,
    }
}

/// The check of `compact`: automatic compaction on, a compaction after boot, or neither,
/// in every process.
fn check_compact(c: Compact, procs: &[&ProbeProcess]) -> Check {
    let n = procs.len();
    let count_of = |ok: usize, what: &str| format!("{what} in {ok} of {n} processes");
    let (ok, observed) = if n == 0 {
        (false, NONE_ANSWERED.to_string())
    } else {
        match c {
            Compact::Auto => {
                let on = procs
                    .iter()
                    .filter(|p| p.gc_auto_compact == Some(true))
                    .count();
                (on == n, count_of(on, "GC.auto_compact true"))
            }
            Compact::AfterBoot => {
                let booted: Vec<&&ProbeProcess> = procs
                    .iter()
                    .filter(|p| p.app_loaded_after_s.is_some())
                    .collect();
                let done = booted
                    .iter()
                    .filter(|p| p.compacted_after_boot && p.compact_count != Some(0))
                    .count();
                (
                    !booted.is_empty() && done == booted.len(),
                    format!(
                        "GC.compact after boot in {done} of the {} processes that loaded the app",
                        booted.len()
                    ),
                )
            }
            Compact::None => {
                let clean = procs
                    .iter()
                    .filter(|p| !p.compacted_after_boot && p.gc_auto_compact != Some(true))
                    .count();
                (clean == n, count_of(clean, "no compaction set up"))
            }
        }
    };
    Check {
        setting: "compact".into(),
        expected: c.as_str().into(),
        observed,
        ok,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use experiment::Experiment;
    use rubies::knobs::AllocatorSetting;

    /// Settings of a one-configuration experiment on the `ruby` on PATH, with no knob set.
    fn settings() -> ConfigSettings {
        let e = Experiment::parse(Path::new("/tmp/probe-test.toml"), "[settings]\n").unwrap();
        e.configs[0].settings.clone()
    }

    fn process(pid: i32, yjit: bool, libs: &[&str]) -> ProbeProcess {
        ProbeProcess {
            pid,
            snapshots: vec![MEASURE_START.into(), MEASURE_END.into()],
            jit: [("yjit".to_string(), yjit), ("mjit".to_string(), false)].into(),
            allocator_libraries: libs.iter().map(|s| s.to_string()).collect(),
            gc_auto_compact: Some(false),
            ..ProbeProcess::default()
        }
    }

    fn summary(processes: Vec<ProbeProcess>) -> ProbeSummary {
        ProbeSummary {
            processes,
            ..ProbeSummary::default()
        }
    }

    const JEMALLOC: &str = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";

    #[test]
    fn nothing_is_verified_when_nothing_was_asked() {
        let s = summary(vec![process(1, true, &[])]);
        assert_eq!(verify(&settings(), Some(&s)), None);
    }

    #[test]
    fn a_jit_must_be_on_in_every_process() {
        let mut set = settings();
        set.jit = Some(Jit::Yjit);
        let all_on = summary(vec![process(1, true, &[]), process(2, true, &[])]);
        let v = verify(&set, Some(&all_on)).unwrap();
        assert!(v.ok);
        assert_eq!(v.checks[0].observed, "yjit on in 2 of 2 processes");
        let one_off = summary(vec![process(1, true, &[]), process(2, false, &[])]);
        let v = verify(&set, Some(&one_off)).unwrap();
        assert!(!v.ok);
        assert_eq!(
            v.checks[0].observed,
            "every JIT off in 1 of 2 processes, yjit on in 1 of 2 processes"
        );
        assert_eq!(
            v.failure().unwrap(),
            "settings not verified: jit = \"yjit\" not in force: every JIT off in 1 of 2 processes, yjit on in 1 of 2 processes"
        );
        set.jit = Some(Jit::None);
        assert!(!verify(&set, Some(&all_on)).unwrap().ok);
        assert!(
            verify(&set, Some(&summary(vec![process(1, false, &[])])))
                .unwrap()
                .ok
        );
    }

    #[test]
    fn an_allocator_must_be_mapped_in_every_process_and_system_in_none() {
        let mut set = settings();
        set.allocator = Some(AllocatorSetting {
            name: "jemalloc".into(),
            preload: Some(JEMALLOC.into()),
            linked: false,
        });
        let mapped = summary(vec![
            process(1, false, &[JEMALLOC]),
            process(2, false, &[JEMALLOC]),
        ]);
        let v = verify(&set, Some(&mapped)).unwrap();
        assert!(v.ok, "{v:?}");
        assert_eq!(
            v.checks[0].observed,
            format!("{JEMALLOC} mapped in 2 of 2 processes")
        );
        let half = summary(vec![process(1, false, &[JEMALLOC]), process(2, false, &[])]);
        assert!(!verify(&set, Some(&half)).unwrap().ok);
        set.allocator = Some(AllocatorSetting {
            name: "system".into(),
            preload: None,
            linked: false,
        });
        assert!(!verify(&set, Some(&mapped)).unwrap().ok);
        let clean = summary(vec![process(1, false, &[])]);
        let v = verify(&set, Some(&clean)).unwrap();
        assert!(v.ok);
        assert_eq!(
            v.checks[0].observed,
            "no allocator library mapped in any of 1 processes"
        );
    }

    #[test]
    fn compaction_after_boot_counts_the_processes_that_loaded_the_app() {
        let mut set = settings();
        set.compact = Some(Compact::AfterBoot);
        let mut master = process(1, false, &[]);
        master.app_loaded_after_s = None; // cluster mode: the master never loads the app
        let mut worker = process(2, false, &[]);
        worker.app_loaded_after_s = Some(0.5);
        worker.compacted_after_boot = true;
        worker.compact_count = Some(1);
        let v = verify(&set, Some(&summary(vec![master.clone(), worker.clone()]))).unwrap();
        assert!(v.ok, "{v:?}");
        assert_eq!(
            v.checks[0].observed,
            "GC.compact after boot in 1 of the 1 processes that loaded the app"
        );
        worker.compacted_after_boot = false;
        assert!(
            !verify(&set, Some(&summary(vec![master, worker])))
                .unwrap()
                .ok
        );
    }

    #[test]
    fn without_probe_data_every_check_fails() {
        let mut set = settings();
        set.jit = Some(Jit::Yjit);
        set.compact = Some(Compact::Auto);
        let v = verify(&set, None).unwrap();
        assert!(!v.ok);
        assert_eq!(v.checks.len(), 2);
        assert!(v.checks.iter().all(|c| c
            .observed
            .starts_with("no Ruby process of the server answered the probe")));
    }

    #[test]
    fn measured_figures_are_deltas_summed_over_processes_and_per_request() {
        let record = |pid: i64, start: u64, end: u64| {
            serde_json::json!({
                "schema": PROBE_SCHEMA, "pid": pid, "ruby_description": "ruby 3.1.2",
                "snapshots": {
                    "measure_start": {"gc": {"count": start, "minor_gc_count": start, "major_gc_count": 1, "time": 10, "total_allocated_objects": 1000, "heap_allocated_pages": 50}},
                    "measure_end": {"gc": {"count": end, "minor_gc_count": end - 1, "major_gc_count": 2, "time": 30, "total_allocated_objects": 6000, "heap_allocated_pages": 60},
                                    "yjit": {"inline_code_size": 100, "outlined_code_size": 50}, "gems": {"puma": "5.6.5"}}
                }
            })
        };
        let records: Vec<ProbeRecord> = [record(1, 10, 20), record(2, 5, 9)]
            .into_iter()
            .map(|v| serde_json::from_value(v).unwrap())
            .collect();
        let s = summarize(&records, &BTreeMap::new(), Some(2000)).unwrap();
        let m = s.measured.unwrap();
        assert_eq!(m.processes, 2);
        assert_eq!(
            (m.gc_count, m.minor_gc_count, m.major_gc_count),
            (14, 12, 2)
        );
        assert_eq!(m.gc_time_ms, Some(40.0));
        assert_eq!(m.allocated_objects, Some(10_000));
        assert_eq!(m.heap_allocated_pages, Some(120));
        assert_eq!(m.yjit_code_bytes, Some(300));
        assert_eq!(m.gc_per_1000_requests, Some(7.0));
        assert_eq!(m.allocated_objects_per_request, Some(5.0));
        assert_eq!(s.gems["puma"], "5.6.5");
    }

    #[test]
    fn a_field_of_an_unexpected_type_reads_as_its_default_and_keeps_the_process() {
        let record: ProbeRecord = serde_json::from_value(serde_json::json!({
            "schema": PROBE_SCHEMA, "pid": 42, "forked": "yes", "compaction": null,
            "app_loaded_after_s": 1.5, "errors": "not a list",
            "snapshots": {"measure_end": {"gc": {"count": 7.5, "time": 12}, "yjit": false,
                                          "jit": {"yjit": true}, "gems": {"puma": "6.4.0"}}}
        }))
        .unwrap();
        assert_eq!(
            (record.pid, record.forked, record.compaction.ran),
            (42, false, false)
        );
        assert_eq!(record.app_loaded_after_s, Some(1.5));
        assert!(record.errors.is_empty());
        let end = record.snapshot(MEASURE_END).unwrap();
        assert_eq!((end.gc.count, end.gc.time), (None, Some(12)));
        assert_eq!(end.yjit.code_bytes(), None);
        assert_eq!(end.jit.get("yjit"), Some(&true));
        let s = summarize(&[record], &BTreeMap::new(), None).unwrap();
        assert_eq!(s.gems["puma"], "6.4.0");
        assert_eq!(s.processes[0].jit.get("yjit"), Some(&true));
    }
}
