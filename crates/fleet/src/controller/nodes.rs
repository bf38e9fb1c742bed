//! The nodes checked before a first submission: every node probed (`crate::probe`) for the
//! binary, the shared directory and the Rubies the configurations need, a separate load
//! host's limits, and how the probed hosts differ.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{bail, Result};
use experiment::fleet::Fleet;
use results::store::Store;

use crate::probe::{probe_nodes, ProbeReport, ProbeRequest};
use crate::slurm::Slurm;

/// Probes every node (crate::probe) for what the stored configurations need.
pub(super) fn probe(
    store: &Store,
    slurm: &Slurm,
    fleet: &Fleet,
    binary: &Path,
    events: &mut dyn FnMut(&str),
) -> Result<Vec<ProbeReport>> {
    let configs = store.configs()?;
    if fleet.separate_load() {
        separate_load_fits(&configs)?;
    }
    let mut rubies: Vec<(Vec<String>, Vec<String>)> = Vec::new();
    let mut dirs = BTreeSet::new();
    for c in &configs {
        match rubies
            .iter_mut()
            .find(|(argv, _)| *argv == c.settings.ruby_argv)
        {
            Some((_, labels)) => labels.push(c.label.clone()),
            None => rubies.push((c.settings.ruby_argv.clone(), vec![c.label.clone()])),
        }
        if c.settings.app_commit.is_none() {
            match &c.settings.script {
                Some(s) => {
                    if let Some(parent) = s.path.parent() {
                        dirs.insert(parent.to_path_buf());
                    }
                }
                None => {
                    dirs.insert(c.settings.app_dir.clone());
                }
            }
        }
    }
    let request = ProbeRequest {
        token: token()?,
        rubies,
        dirs: dirs.into_iter().collect(),
    };
    match probe_nodes(
        slurm,
        store.dir(),
        binary,
        &request,
        fleet.probe_timeout,
        &fleet.sbatch,
        events,
    )? {
        Ok(reports) => {
            if fleet.separate_load() && reports.len() < 2 {
                bail!(
                    "[fleet] load = \"separate\" gives each block two nodes, but only {} of the partition can run it; nothing was submitted",
                    units::count(reports.len(), "node")
                );
            }
            for r in &reports {
                events(&format!(
                    "node {}: {} ({} CPUs, kernel {}), {}",
                    r.node,
                    r.machine.cpu_model,
                    r.machine.cpus_online,
                    r.machine.kernel.split_whitespace().next().unwrap_or(""),
                    r.rubies
                        .iter()
                        .filter_map(|(_, d)| d.as_ref().ok())
                        .map(|d| d.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
                        .collect::<BTreeSet<_>>()
                        .into_iter()
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            Ok(reports)
        }
        Err(problems) => bail!(
            "the fleet cannot run this experiment; nothing was submitted:\n  {}",
            problems.join("\n  ")
        ),
    }
}

/// `load = "separate"` sends HTTP load from a second node: refused, naming the
/// configuration, for a workload without HTTP load (a script) and for `tls = true`, whose
/// certificate names the loopback only.
fn separate_load_fits(configs: &[experiment::Config]) -> Result<()> {
    for c in configs {
        if c.settings.workload == experiment::Workload::Script {
            bail!("[fleet] load = \"separate\": configuration {:?} runs a script, which has no HTTP load to send from another node; nothing was submitted", c.label);
        }
        if c.settings.tls {
            bail!("[fleet] load = \"separate\": configuration {:?} has tls = true, which a separate load host does not support yet (its certificate names 127.0.0.1); nothing was submitted", c.label);
        }
    }
    Ok(())
}

/// How the probed hosts differ (hardware, kernel, a Ruby's build), each as a sentence.
pub fn hosts_differ(reports: &[ProbeReport]) -> Vec<String> {
    let mut out = Vec::new();
    let mut differ = |what: &str, values: Vec<(String, String)>| {
        let distinct: BTreeSet<&String> = values.iter().map(|(_, v)| v).collect();
        if distinct.len() > 1 {
            let each: Vec<String> = values.iter().map(|(n, v)| format!("{n}: {v}")).collect();
            out.push(format!(
                "{what} differs between nodes ({})",
                each.join("; ")
            ));
        }
    };
    differ(
        "the CPU",
        reports
            .iter()
            .map(|r| (r.node.clone(), r.machine.cpu_model.clone()))
            .collect(),
    );
    differ(
        "the core count",
        reports
            .iter()
            .map(|r| (r.node.clone(), r.machine.cpus_online.to_string()))
            .collect(),
    );
    differ(
        "the kernel",
        reports
            .iter()
            .map(|r| (r.node.clone(), r.machine.kernel.clone()))
            .collect(),
    );
    let rubies: BTreeSet<&Vec<String>> = reports
        .iter()
        .flat_map(|r| r.rubies.iter().map(|(a, _)| a))
        .collect();
    for argv in rubies {
        differ(
            &format!("the build of `{}`", argv.join(" ")),
            reports
                .iter()
                .filter_map(|r| {
                    r.rubies
                        .iter()
                        .find(|(a, _)| a == argv)
                        .and_then(|(_, d)| d.as_ref().ok())
                        .map(|d| (r.node.clone(), d.clone()))
                })
                .collect(),
        );
    }
    out
}

/// A random token, to tell the controller's results directory from another.
fn token() -> Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no random token: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
