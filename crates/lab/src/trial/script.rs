//! A script workload: the script run several times under the probe, each run's time,
//! memory and `rubyrace-metric` lines, and their medians; with `profile`, one more run
//! (`profile_runs` more) with the profilers attached, their samples added up.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use stats::median;

use super::directory::{is_storage_error, STDERR_TAIL};
use super::{Stop, TrialSpec};
use crate::conditions::check_pinning;
use crate::{probe, profile};
use results::{ScriptOutcome, ScriptRun, TrialResult, TrialStatus};
use sys::process::{describe_orphans, describe_status, kill_orphans, Launch, Supervised};
use sys::resources::Sampler;

/// The longest interval between the noise samples of a script run.
const SCRIPT_NOISE_INTERVAL: Duration = Duration::from_millis(50);

pub(super) fn script_trial(
    spec: &TrialSpec,
    interrupt: &Arc<AtomicBool>,
    result: &mut TrialResult,
) -> Result<(), Stop> {
    let s = &spec.settings;
    crate::phase::set("script runs", None, None);
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
    let mut env = spec.service_env.clone();
    env.extend(s.env.clone());
    let probe_dir = spec.out_dir.join(probe::PROBE_DIR);
    if let Err(e) = probe::add_to_env(&mut env, &probe_dir, s.compact) {
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
    let mut noises = Vec::new();
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
            result.pinning = Some(check_pinning(split, &[child.pid()]));
        }
        // The machine's noise over the run, as an HTTP trial's measured phase has it: the
        // script's process tree is the "server", the run's services are its own. Sampled at
        // least every 50 ms: the run is reaped before a last sample could be taken, so the
        // window ends at the last sample while the script lived.
        let sampler = Sampler::start_window_beside(
            child.pid(),
            child.pid(),
            since,
            None,
            s.sample_interval.min(SCRIPT_NOISE_INTERVAL),
            Some(spec.registry.clone()),
        );
        let waited = child.wait_with_usage(since, limit, interrupt);
        if let (_, Some(noise)) = sampler.finish_with_noise() {
            noises.push(noise);
        }
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
    // Over every run: what `repeat_noisy` and the report's noise table read.
    result.noise = sys::noise::NoiseRecord::over_windows(&noises);
    result.status = TrialStatus::Valid;
    let summary = probe::summarize(&probe::read_records(&probe_dir), &BTreeMap::new(), None);
    probe::apply(result, summary);
    if !s.profile.is_empty() {
        result.profiles = profiled_runs(spec, &launch, interrupt)?;
    }
    Ok(())
}

/// `profile`: `profile_runs` more runs of the script after the measured ones (one by
/// default), each with the profilers attached from its start; their time is not in the
/// measured figures. Each profiler's samples add up over the runs into one record, which
/// says how many script runs it sampled and how much CPU time they took (the unit and the
/// clock of the report's frame times). A run that fails ends the profiled runs.
fn profiled_runs(
    spec: &TrialSpec,
    launch: &Launch,
    interrupt: &Arc<AtomicBool>,
) -> Result<Vec<results::profile::ProfileRecord>, Stop> {
    let mut sum = profile::Accumulated::default();
    for run in 1..=spec.settings.profile_runs.max(1) {
        let (records, script_ok) = profiled_run(spec, launch, interrupt, run)?;
        sum.add(&spec.out_dir, run, records);
        if !script_ok {
            break;
        }
    }
    Ok(sum.finish(&spec.out_dir))
}

/// The `run`-th profiled run (from 1): the profilers' records, and whether the script ran
/// to a successful end.
fn profiled_run(
    spec: &TrialSpec,
    launch: &Launch,
    interrupt: &Arc<AtomicBool>,
    run: u32,
) -> Result<(Vec<results::profile::ProfileRecord>, bool), Stop> {
    let s = &spec.settings;
    let limit = s
        .script
        .as_ref()
        .map_or(Duration::from_secs(60), |x| x.timeout);
    // The run waits at the probe's start gate until the profilers are attached.
    let gate = spec.out_dir.join(profile::START_GATE_FILE);
    let mut launch = launch.clone();
    launch
        .env
        .push((profile::START_GATE_ENV.into(), gate.display().to_string()));
    let since = Instant::now();
    let log_name = match run {
        1 => "profiled".to_string(),
        n => format!("profiled{n}"),
    };
    let mut child = match Supervised::spawn(&launch, &spec.out_dir, &log_name, &spec.registry) {
        Ok(c) => c,
        Err(e) => {
            let records = profile::failed_records(
                &s.profile,
                s.profile_rate,
                &format!("the profiled run did not start: {e}"),
            );
            return Ok((records, false));
        }
    };
    let pid = child.pid();
    let session = profile::Session::start(
        &s.profile,
        profile::Target {
            root: pid,
            pgid: pid,
            dir: spec.out_dir.clone(),
            registry: spec.registry.clone(),
            phase: results::profile::PROFILED_PHASE.into(),
            rate_hz: s.profile_rate,
        },
        since,
    );
    session.wait_attached(Duration::from_secs(10));
    let opened = fs::write(&gate, b"");
    let waited = child.wait_with_usage(since, limit, interrupt);
    let _ = fs::remove_file(&gate);
    // How long the probe waited at the gate (it writes it once let through).
    let gate_wait = std::path::PathBuf::from({
        let mut name = gate.clone().into_os_string();
        name.push(".waited");
        name
    });
    let at_gate = fs::read_to_string(&gate_wait)
        .ok()
        .and_then(|t| t.trim().parse::<f64>().ok());
    let _ = fs::remove_file(&gate_wait);
    let mut records = session.finish();
    child.stop(Duration::from_secs(1));
    kill_orphans(&[pid]);
    if interrupt.load(Ordering::SeqCst) {
        return Err(Stop::Interrupted);
    }
    if let Err(e) = opened {
        return Err(Stop::WriteFailed(format!(
            "cannot write {}: {e}",
            gate.display()
        )));
    }
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    let script_ok = matches!(&waited, Some((status, _, _)) if status.success());
    match waited {
        Some((status, usage, wall)) if status.success() => {
            for r in &mut records {
                r.script_runs = Some(1);
                r.cpu_us = Some(tv(usage.ru_utime) + tv(usage.ru_stime));
                r.wall_s = at_gate.map(|w| (wall.as_secs_f64() - w).max(0.0));
            }
        }
        Some((status, _, _)) => {
            for r in &mut records {
                r.error.get_or_insert_with(|| {
                    format!("the profiled run ended with {}", describe_status(status))
                });
            }
        }
        None => {
            for r in &mut records {
                r.error.get_or_insert_with(|| {
                    format!(
                        "the profiled run did not finish within {}",
                        humantime::format_duration(limit)
                    )
                });
            }
        }
    }
    Ok((records, script_ok))
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
pub(super) fn parse_metrics(stdout: &str) -> BTreeMap<String, f64> {
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
}
