//! The doctor's report: findings with a status, the checks run (each guarded: a check
//! that crashes becomes a finding, not a crash), and the options.

use rubies::discovery;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::SystemTime;
use sys::environment;

use crate::busy::{busy_finding, load_finding, sample_busy};
use crate::cpu::{cpu_counts, cpus_finding, governor_finding, pinning_finding, turbo_finding};
use crate::finding::{Finding, Status};
use crate::kernel::{aslr_finding, swap_finding};
use crate::network::{open_files_finding, ports_finding, tcp_tw_reuse_finding};
use crate::programs::{perf_finding, rbspy_finding, services_finding, wrk_finding};
use crate::ruby::{allocators_finding, rubies_finding, server_query, servers_finding};
use crate::{BUSY_SHOWN, SCHEMA};

/// Every check, in the order of a report.
pub const CHECKS: &[&str] = &[
    "cpus",
    "pinning",
    "governor",
    "turbo",
    "load",
    "busy_processes",
    "swap",
    "aslr",
    "ports",
    "tcp_tw_reuse",
    "open_files",
    "perf",
    "rbspy",
    "rubies",
    "servers",
    "allocators",
    "services",
    "wrk",
];

/// What the doctor found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// [`SCHEMA`].
    pub schema: String,
    /// When the examination started (RFC 3339, UTC).
    pub checked_at: String,
    /// One per check, in the order of [`CHECKS`].
    pub findings: Vec<Finding>,
    /// Checks that crashed (a bug in rubyrace); their findings say "the check failed".
    /// Absent from the JSON when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_checks: Vec<String>,
}

impl Report {
    /// The report as aligned text, as `rubyrace doctor` prints it.
    pub fn render(&self) -> String {
        crate::render::render(self)
    }

    /// The finding of a check, by name.
    pub fn finding(&self, name: &str) -> Option<&Finding> {
        self.findings.iter().find(|f| f.name == name)
    }

    /// How many findings have `status`.
    pub fn count(&self, status: Status) -> usize {
        self.findings.iter().filter(|f| f.status == status).count()
    }
}

/// What [`examine_with`] does.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// Skip the slow parts: the CPU sampling of every process and the Ruby queries (their
    /// findings say "not checked"). About 50 ms instead of about 1 s.
    pub quick: bool,
    /// How many busy processes to list at most.
    pub top: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            quick: false,
            top: BUSY_SHOWN,
        }
    }
}

/// Examines this machine with every check ([`Options::default`]).
pub fn examine() -> Report {
    examine_with(&Options::default())
}

/// Examines this machine. Never fails: a check that cannot see what it looks for says so in
/// its finding, and a check that crashes is recorded in [`Report::failed_checks`].
pub fn examine_with(options: &Options) -> Report {
    let checked_at = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let mut failed: Vec<String> = Vec::new();

    // The CPU sampling runs first, alone with the cheap checks, so that no Ruby of ours
    // takes CPU from the processes being measured.
    let (sample, mut cheap) = std::thread::scope(|scope| {
        let sampler = (!options.quick).then(|| scope.spawn(sample_busy));
        let mut cheap: Vec<(&str, std::thread::Result<Finding>)> = Vec::new();
        let cpus = cpu_counts();
        let usable = cpus.effective();
        cheap.push(("cpus", guarded(|| cpus_finding(&cpus))));
        cheap.push(("pinning", guarded(pinning_finding)));
        cheap.push(("governor", guarded(governor_finding)));
        cheap.push(("turbo", guarded(turbo_finding)));
        cheap.push((
            "load",
            guarded(|| load_finding(environment::load_average(), usable)),
        ));
        cheap.push(("swap", guarded(swap_finding)));
        cheap.push(("aslr", guarded(aslr_finding)));
        cheap.push(("ports", guarded(ports_finding)));
        cheap.push(("tcp_tw_reuse", guarded(tcp_tw_reuse_finding)));
        cheap.push(("open_files", guarded(open_files_finding)));
        cheap.push(("perf", guarded(perf_finding)));
        cheap.push(("rbspy", guarded(rbspy_finding)));
        cheap.push(("services", guarded(services_finding)));
        cheap.push(("wrk", guarded(wrk_finding)));
        let sample = sampler.map(|h| h.join());
        (sample, cheap)
    });

    let busy = match sample {
        None => Ok(Finding::new(
            "busy_processes",
            Status::Info,
            "not checked (--quick)",
            "",
        )),
        Some(Ok(sample)) => guarded(|| busy_finding(sample, options.top)),
        Some(Err(panic)) => Err(panic),
    };
    cheap.push(("busy_processes", busy));

    // The Rubies, and what the Ruby on PATH can load, in parallel.
    let (rubies, servers_and_allocators) = if options.quick {
        let skipped = |name: &str| Finding::new(name, Status::Info, "not checked (--quick)", "");
        let allocators = guarded(|| allocators_finding(None));
        (Ok(skipped("rubies")), (Ok(skipped("servers")), allocators))
    } else {
        std::thread::scope(|scope| {
            let rubies = scope.spawn(|| rubies_finding(&discovery::discover()));
            let servers = scope.spawn(|| {
                let query = server_query();
                let linked = query.as_ref().ok().and_then(|q| q.linked_allocator.clone());
                (
                    guarded(|| servers_finding(&query)),
                    guarded(|| allocators_finding(linked.as_deref())),
                )
            });
            let servers = servers.join().unwrap_or_else(|panic| {
                let also: Box<dyn std::any::Any + Send> =
                    Box::new(format!("with servers: {}", panic_message(&panic)));
                (Err(panic), Err(also))
            });
            (rubies.join(), servers)
        })
    };
    cheap.push(("rubies", rubies));
    cheap.push(("servers", servers_and_allocators.0));
    cheap.push(("allocators", servers_and_allocators.1));

    let mut by_name: HashMap<&str, std::thread::Result<Finding>> = cheap.into_iter().collect();
    let findings = CHECKS
        .iter()
        .map(|name| match by_name.remove(name) {
            Some(Ok(finding)) => finding,
            Some(Err(panic)) => {
                failed.push(name.to_string());
                crashed(name, &panic_message(&panic))
            }
            None => {
                failed.push(name.to_string());
                crashed(name, "the check did not run")
            }
        })
        .collect();
    Report {
        schema: SCHEMA.to_string(),
        checked_at,
        findings,
        failed_checks: failed,
    }
}

/// Runs one check, catching a panic (a bug) so the other checks still report.
pub(crate) fn guarded(check: impl FnOnce() -> Finding) -> std::thread::Result<Finding> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(check))
}

pub(crate) fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_string())
}

pub(crate) fn crashed(name: &str, message: &str) -> Finding {
    Finding::new(
        name,
        Status::Bad,
        format!("the check failed: {message}"),
        "this is a bug in rubyrace: please report it with this output",
    )
}
