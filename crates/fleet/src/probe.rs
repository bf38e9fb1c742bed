//! Before a fleet run submits a block, one probe job per node checks what the run needs
//! there, and the run is refused, naming the node, when something is missing:
//! - the results directory is the controller's (the node reads the controller's random
//!   token in it and writes its report there);
//! - the same rubyrace (the SHA-256 of the binary the blocks will run);
//! - every configuration's Ruby runs (its `RUBY_DESCRIPTION`), and its app directory exists.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::slurm::{exec_script, Slurm, Submission, TaskState};
use crate::task::write_atomically;

/// What the controller asks every node (`fleet/probe/request.json`).
#[derive(Debug, Serialize, Deserialize)]
pub struct ProbeRequest {
    pub token: String,
    /// The configurations' interpreters (`ruby_argv`), each with the configurations using it.
    pub rubies: Vec<(Vec<String>, Vec<String>)>,
    /// The directories the configurations run in.
    pub dirs: Vec<PathBuf>,
}

/// What a node answers (`fleet/probe/NODE.json`).
#[derive(Debug, Serialize, Deserialize)]
pub struct ProbeReport {
    pub node: String,
    pub token: String,
    pub rubyrace_version: String,
    pub binary_sha256: String,
    pub machine: sys::environment::Machine,
    /// Each Ruby's description, or why it does not run.
    pub rubies: Vec<(Vec<String>, Result<String, String>)>,
    /// The directories that are missing on the node.
    pub missing_dirs: Vec<PathBuf>,
}

pub fn probe_dir(dir: &Path) -> PathBuf {
    dir.join("fleet").join("probe")
}

/// The SHA-256 of the running rubyrace binary.
pub fn binary_sha256() -> Result<String> {
    let exe = std::env::current_exe().context("cannot find the rubyrace binary")?;
    let mut file =
        std::fs::File::open(&exe).with_context(|| format!("cannot read {}", exe.display()))?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)
        .with_context(|| format!("cannot read {}", exe.display()))?;
    Ok(format!("{:x}", hasher.finalize()))
}

/// The node's side (`rubyrace fleet-probe DIR`): reads the request in DIR, answers it.
pub fn answer(dir: &Path) -> Result<PathBuf> {
    let probe = probe_dir(dir);
    let request_path = probe.join("request.json");
    let request: ProbeRequest = serde_json::from_str(
        &std::fs::read_to_string(&request_path)
            .with_context(|| format!("cannot read {}", request_path.display()))?,
    )
    .with_context(|| format!("{} is not a probe request", request_path.display()))?;
    let node = crate::task::node_name();
    let rubies = request
        .rubies
        .iter()
        .map(|(argv, _)| {
            (
                argv.clone(),
                rubies::discovery::ruby_description(argv, &[]).map_err(|e| format!("{e:#}")),
            )
        })
        .collect();
    let report = ProbeReport {
        node: node.clone(),
        token: request.token,
        rubyrace_version: env!("CARGO_PKG_VERSION").into(),
        binary_sha256: binary_sha256()?,
        machine: sys::environment::machine(),
        rubies,
        missing_dirs: request.dirs.into_iter().filter(|d| !d.is_dir()).collect(),
    };
    let path = probe.join(format!("{node}.json"));
    write_atomically(&path, &serde_json::to_vec_pretty(&report)?)?;
    Ok(path)
}

/// Whether a node in `sinfo`'s state `state` (`idle`, `down*`, `drained`...) gets no job.
pub fn unusable(state: &str) -> bool {
    let word = state.trim_end_matches(['*', '~', '#', '!', '%', '$', '@', '^', '-']);
    matches!(
        word,
        "down"
            | "drained"
            | "draining"
            | "fail"
            | "failing"
            | "future"
            | "maint"
            | "reserved"
            | "unknown"
            | "not_responding"
    )
}

/// The controller's side: probes every node of the partition that can take jobs and
/// returns their reports, or every problem found, each naming its node.
pub fn probe_nodes(
    slurm: &Slurm,
    dir: &Path,
    binary: &Path,
    request: &ProbeRequest,
    timeout: Duration,
    extra: &[String],
    note: &mut dyn FnMut(&str),
) -> Result<Result<Vec<ProbeReport>, Vec<String>>> {
    let round = Round {
        dir,
        binary,
        request,
        timeout,
        probe: probe_dir(dir),
    };
    let script = round.write_files()?;
    let jobs = round.submit(slurm, &script, extra, note)?;
    let last = round.wait(slurm, &jobs, note)?;
    let own_sha = binary_sha256()?;
    let mut problems = Vec::new();
    let mut reports = Vec::new();
    for (node, job) in &jobs {
        let state = last.iter().find(|s| &s.job == job);
        let report: Option<ProbeReport> = std::fs::read_to_string(round.report_path(node))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        let Some(report) = report else {
            problems.push(round.no_report(node, job, state));
            continue;
        };
        problems.extend(round.problems_of(node, &report, &own_sha));
        reports.push(report);
    }
    Ok(if problems.is_empty() {
        Ok(reports)
    } else {
        Err(problems)
    })
}

/// One probe of the nodes: what its steps share.
struct Round<'a> {
    /// The results directory.
    dir: &'a Path,
    /// The rubyrace binary the nodes run.
    binary: &'a Path,
    request: &'a ProbeRequest,
    /// `probe_timeout`: how long the probe jobs may take, queueing included.
    timeout: Duration,
    /// `fleet/probe` in the results directory.
    probe: PathBuf,
}

impl Round<'_> {
    /// Empties the probe's directory of earlier answers, writes the request and the job's
    /// script; returns the script's path.
    fn write_files(&self) -> Result<PathBuf> {
        let probe = &self.probe;
        std::fs::create_dir_all(probe)
            .with_context(|| format!("cannot create {}", probe.display()))?;
        for entry in std::fs::read_dir(probe)? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "json" || e == "out") {
                let _ = std::fs::remove_file(&path);
            }
        }
        write_atomically(
            &probe.join("request.json"),
            &serde_json::to_vec_pretty(self.request)?,
        )?;
        let script = probe.join("probe.sh");
        std::fs::write(
            &script,
            exec_script(
                "rubyrace run --slurm: the probe of one node (docs/fleet.md)",
                &[
                    self.binary.display().to_string(),
                    "fleet-probe".into(),
                    self.dir.display().to_string(),
                ],
            ),
        )?;
        Ok(script)
    }

    /// Submits a probe job to every node that can take one; its nodes and job ids. Fails
    /// when no node can.
    fn submit(
        &self,
        slurm: &Slurm,
        script: &Path,
        extra: &[String],
        note: &mut dyn FnMut(&str),
    ) -> Result<Vec<(String, String)>> {
        let mut jobs: Vec<(String, String)> = Vec::new();
        let nodes = slurm.nodes()?;
        for (node, state) in nodes.clone() {
            if unusable(&state) {
                note(&format!(
                    "node {node} is {state}: not probed, and Slurm gives it no block"
                ));
                continue;
            }
            let output = self.output_path(&node);
            let job = slurm.submit(&Submission {
                script,
                job_name: "rubyrace-probe",
                array: &[],
                throttle: 1,
                output: &output,
                time_limit: Duration::from_secs(300),
                nodes: 1,
                nodelist: Some(&node),
                extra,
            })?;
            jobs.push((node, job));
        }
        if jobs.is_empty() {
            let partition = slurm
                .partition
                .as_ref()
                .map_or("the cluster's default partition".to_string(), |p| {
                    format!("partition {p:?}")
                });
            let states: Vec<String> = nodes.iter().map(|(n, s)| format!("{n} {s}")).collect();
            anyhow::bail!(
                "no node of {partition} can take a job ({}); nothing was submitted",
                if states.is_empty() {
                    "sinfo lists none".to_string()
                } else {
                    format!("sinfo: {}", states.join(", "))
                }
            );
        }
        note(&format!(
            "probing {} node(s): {}",
            jobs.len(),
            jobs.iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
        Ok(jobs)
    }

    /// Waits until every probe job has ended, or the timeout (saying after 10 s which nodes
    /// it waits for), then cancels the unfinished ones; the jobs' last states.
    fn wait(
        &self,
        slurm: &Slurm,
        jobs: &[(String, String)],
        note: &mut dyn FnMut(&str),
    ) -> Result<Vec<TaskState>> {
        let ids: Vec<String> = jobs.iter().map(|(_, j)| j.clone()).collect();
        let started = Instant::now();
        let mut told = false;
        let last = loop {
            let states = slurm.states(&ids)?;
            if states.iter().all(|s| s.ended()) || started.elapsed() > self.timeout {
                break states;
            }
            if !told && started.elapsed() > Duration::from_secs(10) {
                told = true;
                let waiting: Vec<String> = jobs
                    .iter()
                    .filter_map(|(node, job)| {
                        let s = states.iter().find(|s| &s.job == job)?;
                        (s.state == "PENDING").then(|| format!("{node} ({})", s.reason))
                    })
                    .collect();
                if !waiting.is_empty() {
                    note(&format!(
                        "the probe waits for node(s) {} (exclusive: behind the jobs running there), at most probe_timeout = {}",
                        waiting.join(", "),
                        humantime::format_duration(self.timeout)
                    ));
                }
            }
            std::thread::sleep(Duration::from_millis(300));
        };
        let unfinished: Vec<String> = last
            .iter()
            .filter(|s| !s.ended())
            .map(|s| s.job.clone())
            .collect();
        let _ = slurm.cancel(&unfinished);
        Ok(last)
    }

    /// Where `node` writes its report.
    fn report_path(&self, node: &str) -> PathBuf {
        self.probe.join(format!("{node}.json"))
    }

    /// Where Slurm writes the output of `node`'s probe job.
    fn output_path(&self, node: &str) -> PathBuf {
        self.probe.join(format!("{node}.out"))
    }

    /// The problem of a node whose probe job wrote no report: how the job ended, and the
    /// end of its output.
    fn no_report(&self, node: &str, job: &str, state: Option<&TaskState>) -> String {
        let how = match state {
            Some(s) if !s.ended() => format!(
                "did not end within probe_timeout = {} ({})",
                humantime::format_duration(self.timeout),
                s.describe()
            ),
            Some(s) => format!("ended {}", s.describe()),
            None => "left Slurm's queue".into(),
        };
        let output = sys::process::tail_file(&self.output_path(node), 600);
        let output = if output.trim().is_empty() {
            String::new()
        } else {
            format!("; its output: {}", output.trim())
        };
        format!(
            "node {node}: its probe job {job} {how} without writing {}: the node cannot see the results directory {} (shared storage), or cannot run {}{output}",
            self.report_path(node).display(),
            self.dir.display(),
            self.binary.display()
        )
    }

    /// What `node`'s report shows missing or different: the results directory, the
    /// rubyrace build (`own_sha` is the controller's), the Rubies, the directories.
    fn problems_of(&self, node: &str, report: &ProbeReport, own_sha: &str) -> Vec<String> {
        let mut problems = Vec::new();
        if report.token != self.request.token {
            problems.push(format!("node {node}: the results directory it sees at {} is not the controller's (another token)", self.dir.display()));
        }
        if report.binary_sha256 != own_sha {
            problems.push(format!(
                "node {node}: {} is another build of rubyrace (version {}, SHA-256 {}; the controller runs {})",
                self.binary.display(),
                report.rubyrace_version,
                &report.binary_sha256[..12.min(report.binary_sha256.len())],
                &own_sha[..12]
            ));
        }
        for (argv, outcome) in &report.rubies {
            if let Err(e) = outcome {
                let users = self
                    .request
                    .rubies
                    .iter()
                    .find(|(a, _)| a == argv)
                    .map(|(_, labels)| labels.join(", "))
                    .unwrap_or_default();
                problems.push(format!(
                    "node {node}: the Ruby `{}` of [{users}] does not run there: {e}",
                    argv.join(" ")
                ));
            }
        }
        for d in &report.missing_dirs {
            problems.push(format!("node {node}: {} is missing there", d.display()));
        }
        problems
    }
}
