//! A session of a run ([`run_pending`]): takes charge of the processes, checks out the
//! commits, examines the machine, pins rubyrace, starts the services; runs the schedule,
//! then the adaptive rule or the gate until it ends; stops the services and records how the
//! session ended.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{Context, Result};

use experiment::Config;
use results::store::Store;
use sys::cpus::pin_this_process;
use sys::process::{become_subreaper, kill_registered_leftovers};

use super::progress::Progress;
use super::{Run, RunEnd};
use crate::services::RunServices;

/// Runs every scheduled trial not stored yet, as a session of `kind`; `command`
/// is recorded as the session's command line.
pub fn run_pending(
    store: &mut Store,
    kind: results::store::SessionKind,
    command: &str,
    fail_fast: bool,
    interrupt: &Arc<AtomicBool>,
    progress: &mut dyn Progress,
) -> Result<RunEnd> {
    take_charge_of_processes(store, progress);
    let stored_configs = store.configs()?;
    let schedule = store.schedule()?;
    let record_env: Vec<String> = store
        .meta("record_env")?
        .map(|v| serde_json::from_str(&v))
        .transpose()
        .context("stored record_env")?
        .unwrap_or_default();
    let blocks = schedule.iter().map(|t| t.block + 1).max().unwrap_or(0);
    let done = store.completed()?;
    // `ref`: each commit checked out in the results directory for this session, and every
    // configuration's paths moved there (the services' `setup` runs there too).
    // A complete run (every planned trial stored, and an adaptive one ended) has nothing to
    // run: its resume checks nothing out, starts no service and keeps every log as it was.
    let complete = is_complete(store, &schedule, &done)?;
    let checkouts = if complete {
        crate::checkouts::Checkouts::default()
    } else {
        crate::checkouts::Checkouts::prepare(store.dir(), &stored_configs)?
    };
    for (c, path) in checkouts.made() {
        progress.note(&format!(
            "checked out {} ({}) at {}",
            c.git_ref,
            &c.commit[..12.min(c.commit.len())],
            path.display()
        ));
    }
    let configs: Vec<Config> = stored_configs
        .into_iter()
        .map(|c| Config {
            settings: crate::checkouts::settings_in_checkout(store.dir(), &c.settings),
            ..c
        })
        .collect();
    let conditions = store.conditions()?;
    progress.begin(schedule.len(), done.len(), blocks);
    progress.at_least(store.next_look(blocks)?);
    let session = store.begin_session(kind, command)?;
    // What makes this machine noisy right now, recorded with the session (quick: no CPU
    // sampling, no Ruby queries; about 50 ms).
    let doctor = doctor::examine_with(&doctor::Options {
        quick: true,
        ..doctor::Options::default()
    });
    store.record_doctor(session, &doctor)?;
    if let Some(split) = &conditions.cpus {
        // After the doctor, which reads rubyrace's own affinity as the machine's. Every
        // thread rubyrace starts from now on (the load generator's among them) inherits
        // this; servers are moved to their own CPUs before exec.
        pin_this_process(&split.load).with_context(|| {
            format!(
                "cpus: cannot pin rubyrace to CPU {} (the server would go on CPU {})",
                split.load, split.server
            )
        })?;
    }
    // [services] and setup: started now, before the first trial; a service that does not
    // start ends the session here, with its log's tail.
    crate::services::remove_leftovers(store.dir());
    let services = if complete {
        None
    } else {
        start_services(store, &configs, session, progress)?
    };
    let design = store.design()?;
    let seed = store.seed()?;
    let mut run = Run {
        store,
        session,
        configs,
        record_env,
        fail_fast,
        conditions,
        design,
        seed,
        interrupt,
        progress,
        services,
        profilers_told: Default::default(),
    };
    let mut end = run.run_schedule(&schedule, &done);
    if let (Ok(RunEnd::Complete), Some(target)) = (&end, run.store.precision_target()?) {
        if run.store.precision_end()?.is_none() {
            end = run.run_until_precise(&target);
        }
    }
    if let (Ok(RunEnd::Complete), Some(gate)) = (&end, run.store.gate()?) {
        if run.store.gate_end()?.is_none() {
            end = run.run_until_decided(&gate);
        }
    }
    let outcome = session_outcome(&end);
    if let Some(services) = run.services.take() {
        let record = services.stop();
        let _ = run.store.record_services(session, &record);
    }
    // Best effort: with a full disk even this may fail, and the error above matters more.
    let _ = run.store.end_session(session, &outcome);
    drop(checkouts);
    end
}

/// The session's `[services]` and `setup` (None when the experiment has neither). A service
/// that does not start ends the session, with its log's tail in the error.
fn start_services(
    store: &Store,
    configs: &[Config],
    session: i64,
    progress: &mut dyn Progress,
) -> Result<Option<RunServices>> {
    if store.services()?.is_empty() && configs.iter().all(|c| c.settings.setup.is_empty()) {
        return Ok(None);
    }
    match RunServices::start(
        &store.services()?,
        configs,
        store.dir(),
        &store.registry(),
        session,
    ) {
        Ok(s) => {
            if let Some(summary) = s.record().summary() {
                progress.note(&format!("services: {summary}"));
            }
            store.record_services(session, s.record())?;
            Ok(Some(s))
        }
        Err(e) => {
            let _ = store.end_session(session, &format!("failed: {e:#}"));
            Err(e)
        }
    }
}

/// Before a session: rubyrace becomes the reaper of its servers' orphans (a server that
/// daemonized comes back to it, to be killed at the end of its trial), and kills the
/// servers an earlier rubyrace left running (its registry).
fn take_charge_of_processes(store: &Store, progress: &mut dyn Progress) {
    if let Err(e) = become_subreaper() {
        progress.note(&format!(
            "cannot become a child subreaper ({e}): a server that daemonizes could outlive its trial"
        ));
    }
    for killed in kill_registered_leftovers(&store.registry()) {
        progress.note(&format!(
            "killed {killed}, a server left running by an earlier rubyrace that did not exit cleanly"
        ));
    }
}

/// Whether the run has nothing left to do: every planned trial stored, and an adaptive run
/// or a gate ended.
fn is_complete(
    store: &Store,
    schedule: &[experiment::schedule::ScheduledTrial],
    done: &std::collections::HashSet<usize>,
) -> Result<bool> {
    Ok(schedule.iter().all(|t| done.contains(&t.trial_id))
        && (store.precision_target()?.is_none() || store.precision_end()?.is_some())
        && (store.gate()?.is_none() || store.gate_end()?.is_some()))
}

/// How a session ended, as its row in the `sessions` table says.
fn session_outcome(end: &Result<RunEnd>) -> String {
    match end {
        Ok(RunEnd::Complete) => "complete".to_string(),
        Ok(RunEnd::Interrupted) => "interrupted".to_string(),
        Ok(RunEnd::StoppedAfterFailure { trial_id }) => {
            format!("stopped after trial {trial_id} (--fail-fast)")
        }
        Ok(end @ RunEnd::CannotBoot { block, .. }) => format!(
            "stopped after block {block}: cannot run ({})",
            end.cannot_boot_lines().join("; ")
        ),
        Err(e) => format!("failed: {e:#}"),
    }
}
