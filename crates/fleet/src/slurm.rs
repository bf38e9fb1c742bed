//! The Slurm engine: `sbatch`, `squeue`, `scancel`, `sinfo` and `sacct`, each run with an
//! argv (never through a shell), their output read as `|`-separated fields. `SLURM_CONF`
//! and the rest of Slurm's environment pass through, so a test cluster is used exactly as
//! a real one.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};

/// One array task (or job) as Slurm reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskState {
    /// The array's job id (or the job's, outside an array).
    pub job: String,
    /// The array task id, when it is an array task.
    pub task: Option<u32>,
    /// PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, NODE_FAIL, TIMEOUT...
    pub state: String,
    /// The node(s) it runs or ran on.
    pub nodes: String,
    /// Why it is pending or how it ended, in Slurm's words ("None" when nothing).
    pub reason: String,
}

impl TaskState {
    /// Whether Slurm is done with it (whatever the outcome).
    pub fn ended(&self) -> bool {
        !matches!(
            self.state.as_str(),
            "PENDING"
                | "RUNNING"
                | "CONFIGURING"
                | "COMPLETING"
                | "SUSPENDED"
                | "REQUEUED"
                | "RESIZING"
                | "SIGNALING"
                | "STAGE_OUT"
                | "STOPPED"
                | "RESV_DEL_HOLD"
                | "REQUEUE_FED"
                | "REQUEUE_HOLD"
        )
    }

    /// The state and Slurm's reason, as a clause ("NODE_FAIL (reason: NodeDown)").
    pub fn describe(&self) -> String {
        let nodes = if self.nodes.is_empty() || self.nodes == "(null)" {
            String::new()
        } else {
            format!(" on {}", self.nodes)
        };
        match self.reason.as_str() {
            "" | "None" => format!("{}{nodes}", self.state),
            reason => format!("{}{nodes} (reason: {reason})", self.state),
        }
    }
}

/// What one `sbatch` submits: an array of tasks running `script`.
pub struct Submission<'a> {
    pub script: &'a Path,
    pub job_name: &'a str,
    /// The array's task ids (block numbers); empty for a single job.
    pub array: &'a [u32],
    /// At most this many tasks at once (`%N`).
    pub throttle: u32,
    /// Where each task's output goes (`%A`, `%a`, `%j`, `%N` expand).
    pub output: &'a Path,
    pub time_limit: Duration,
    /// Nodes per task (2 with a separate load host).
    pub nodes: u32,
    /// A node the job must run on (`--nodelist`).
    pub nodelist: Option<&'a str>,
    /// More arguments, as the experiment gives them.
    pub extra: &'a [String],
}

/// The cluster, as rubyrace uses it.
#[derive(Clone, Debug, Default)]
pub struct Slurm {
    /// `--partition`, when the experiment names one.
    pub partition: Option<String>,
}

/// The configuration file Slurm's commands read, in words: `SLURM_CONF`, or Slurm's
/// default when it is not set.
pub fn conf_file() -> String {
    match std::env::var_os("SLURM_CONF").filter(|v| !v.is_empty()) {
        Some(conf) => format!("{} (SLURM_CONF)", Path::new(&conf).display()),
        None => "/etc/slurm/slurm.conf (Slurm's default: SLURM_CONF is not set)".into(),
    }
}

/// The cluster as `sinfo` shows it before anything is submitted: its partitions, and the
/// one a run without `partition` goes to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Partitions {
    pub names: Vec<String>,
    pub default: Option<String>,
}

/// Runs a Slurm command and returns its standard output; a failure names the command and
/// gives its standard error.
fn output(program: &str, args: &[String]) -> Result<String> {
    let out = Command::new(program).args(args).output().with_context(|| {
        format!("cannot run {program} (is Slurm installed? Debian: slurm-client)")
    })?;
    if !out.status.success() {
        bail!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            sys::process::describe_status(out.status),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `sbatch --time` takes minutes (rounded up here, at least one).
pub fn minutes(d: Duration) -> u64 {
    d.as_secs().div_ceil(60).max(1)
}

impl Slurm {
    /// Submits, and returns the job id (`sbatch --parsable`).
    pub fn submit(&self, s: &Submission) -> Result<String> {
        let mut args: Vec<String> = vec![
            "--parsable".into(),
            "--exclusive".into(),
            "--no-requeue".into(),
            format!("--job-name={}", s.job_name),
            format!("--output={}", s.output.display()),
            format!("--time={}", minutes(s.time_limit)),
            format!("--nodes={}", s.nodes),
        ];
        if let Some(p) = &self.partition {
            args.push(format!("--partition={p}"));
        }
        if !s.array.is_empty() {
            args.push(format!(
                "--array={}%{}",
                units::ranges(s.array),
                s.throttle.max(1)
            ));
        }
        if let Some(node) = s.nodelist {
            args.push(format!("--nodelist={node}"));
        }
        args.extend(s.extra.iter().cloned());
        args.push(s.script.display().to_string());
        let out = output("sbatch", &args)?;
        // "JOBID" or "JOBID;CLUSTER".
        let id = out.trim().split(';').next().unwrap_or("").to_string();
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit()) {
            bail!("sbatch printed {:?}, not a job id", out.trim());
        }
        Ok(id)
    }

    /// The tasks of `jobs` that Slurm still knows of (a finished job stays in `squeue -t
    /// all` for MinJobAge, 300 s by default), one per array task.
    pub fn states(&self, jobs: &[String]) -> Result<Vec<TaskState>> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let args: Vec<String> = [
            "--noheader",
            "--array",
            "--states=all",
            "--me",
            "--format=%F|%K|%T|%N|%r",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let out = output("squeue", &args)?;
        Ok(out
            .lines()
            .filter_map(parse_state_line)
            .filter(|t| jobs.contains(&t.job))
            .collect())
    }

    /// How a job Slurm no longer shows in its queue ended, from the accounting database
    /// (`sacct`), when the cluster keeps one.
    pub fn accounting(&self, job: &str) -> Option<Vec<TaskState>> {
        let args: Vec<String> = vec![
            "--noheader".into(),
            "--parsable2".into(),
            "--allocations".into(),
            format!("--jobs={job}"),
            "--format=JobID,State,NodeList,Reason".into(),
        ];
        let out = output("sacct", &args).ok()?;
        let tasks: Vec<TaskState> = out
            .lines()
            .filter_map(|line| {
                let f: Vec<&str> = line.split('|').collect();
                let (id, state, nodes) = (f.first()?, f.get(1)?, f.get(2)?);
                let (job, task) = match id.split_once('_') {
                    Some((j, t)) => (j.to_string(), t.parse().ok()),
                    None => (id.to_string(), None),
                };
                Some(TaskState {
                    job,
                    task,
                    // "CANCELLED by 0" -> CANCELLED
                    state: state.split_whitespace().next().unwrap_or("").to_string(),
                    nodes: nodes.to_string(),
                    reason: f.get(3).unwrap_or(&"").to_string(),
                })
            })
            .collect();
        (!tasks.is_empty()).then_some(tasks)
    }

    /// Cancels `jobs` (every task of each array).
    pub fn cancel(&self, jobs: &[String]) -> Result<()> {
        if jobs.is_empty() {
            return Ok(());
        }
        output("scancel", jobs).map(|_| ())
    }

    /// Checks, before a results directory is made or anything is submitted, that Slurm's
    /// commands reach the cluster and that the partition the experiment names exists.
    /// Errors name Slurm's configuration file and what Slurm said, or the partitions the
    /// cluster has (with the nearest name).
    pub fn check(&self) -> Result<Partitions> {
        if let Some(conf) = std::env::var_os("SLURM_CONF").filter(|v| !v.is_empty()) {
            // Slurm's commands retry a missing file for a minute before they say so.
            let path = Path::new(&conf);
            if let Err(e) = std::fs::metadata(path) {
                bail!(
                    "cannot reach the Slurm cluster: SLURM_CONF names {}, which cannot be read ({e})",
                    path.display()
                );
            }
        }
        let out = output("sinfo", &["--noheader".into(), "--format=%P".into()]).map_err(|e| {
            anyhow::anyhow!(
                "cannot reach the Slurm cluster with the configuration in {}: {e:#}",
                conf_file()
            )
        })?;
        let partitions = parse_partitions(&out);
        if let Some(p) = &self.partition {
            if !partitions.names.contains(p) {
                let known: Vec<&str> = partitions.names.iter().map(String::as_str).collect();
                let hint = experiment::did_you_mean(p, &known)
                    .map(|n| format!("; did you mean `{n}`?"))
                    .unwrap_or_default();
                bail!(
                    "[fleet] partition = {p:?}: the cluster has no partition of that name (its partitions: {}{hint}; Slurm's configuration: {})",
                    if known.is_empty() { "none".to_string() } else { known.join(", ") },
                    conf_file()
                );
            }
        }
        Ok(partitions)
    }

    /// The partition's nodes and their state (`sinfo -N`), each once.
    pub fn nodes(&self) -> Result<Vec<(String, String)>> {
        let mut args: Vec<String> = vec![
            "--noheader".into(),
            "--Node".into(),
            "--format=%N|%T".into(),
        ];
        if let Some(p) = &self.partition {
            args.push(format!("--partition={p}"));
        }
        let out = output("sinfo", &args)?;
        let mut nodes: Vec<(String, String)> = out
            .lines()
            .filter_map(|l| l.split_once('|'))
            .map(|(n, s)| (n.trim().to_string(), s.trim().to_string()))
            .collect();
        nodes.sort();
        nodes.dedup_by(|a, b| a.0 == b.0);
        Ok(nodes)
    }
}

/// The node names of a Slurm host list (`n[1-2]`), as `scontrol show hostnames` expands it.
pub fn hostnames(list: &str) -> Result<Vec<String>> {
    let out = output(
        "scontrol",
        &["show".into(), "hostnames".into(), list.into()],
    )?;
    Ok(out.split_whitespace().map(str::to_string).collect())
}

/// The address other nodes reach node `name` at: its `NodeAddr` (`scontrol show node`),
/// resolved when it is a name.
pub fn node_address(name: &str) -> Result<std::net::IpAddr> {
    let out = output(
        "scontrol",
        &[
            "show".into(),
            "node".into(),
            "--oneliner".into(),
            name.into(),
        ],
    )?;
    let addr = node_addr_field(&out).with_context(|| {
        format!(
            "`scontrol show node {name}` gives no NodeAddr: {}",
            out.trim()
        )
    })?;
    if let Ok(ip) = addr.parse() {
        return Ok(ip);
    }
    use std::net::ToSocketAddrs;
    (addr, 0)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .map(|a| a.ip())
        .with_context(|| format!("node {name}'s NodeAddr {addr} does not resolve to an address"))
}

/// The `NodeAddr=` of one line of `scontrol show node --oneliner`.
fn node_addr_field(line: &str) -> Option<&str> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("NodeAddr="))
        .filter(|a| !a.is_empty())
}

/// The lines of `sinfo --format=%P`: a partition per line, the default one marked `*`.
fn parse_partitions(out: &str) -> Partitions {
    let mut p = Partitions::default();
    for line in out.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let name = line.trim_end_matches('*').to_string();
        if line.ends_with('*') {
            p.default = Some(name.clone());
        }
        if !p.names.contains(&name) {
            p.names.push(name);
        }
    }
    p
}

/// One line of `squeue --format=%F|%K|%T|%N|%r`; a pending array's task range ("[2-5%2]")
/// is expanded by `--array`, so each line is one task.
fn parse_state_line(line: &str) -> Option<TaskState> {
    let f: Vec<&str> = line.split('|').collect();
    if f.len() < 5 {
        return None;
    }
    Some(TaskState {
        job: f[0].trim().to_string(),
        task: f[1].trim().parse().ok(),
        state: f[2].trim().to_string(),
        nodes: f[3].trim().to_string(),
        reason: f[4].trim().to_string(),
    })
}

/// A script for `sbatch` that execs `argv` (each word quoted for /bin/sh), with `$NAME`
/// words left to the shell for Slurm's variables. Slurm runs batch scripts with a shell;
/// this is the only one rubyrace writes, and it only execs.
pub fn exec_script(comment: &str, argv: &[String]) -> String {
    let words: Vec<String> = argv
        .iter()
        .map(|w| {
            if let Some(var) = w
                .strip_prefix('$')
                .filter(|v| v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
            {
                format!("\"${var}\"")
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect();
    format!("#!/bin/sh\n# {comment}\nexec {}\n", words.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_address_is_read_from_scontrol() {
        let line = "NodeName=n2 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 NodeAddr=10.77.0.12 NodeHostName=localhost Version=22.05.8 State=IDLE\n";
        assert_eq!(node_addr_field(line), Some("10.77.0.12"));
        assert_eq!(node_addr_field("NodeName=n2 State=IDLE"), None);
    }

    #[test]
    fn sinfo_lists_partitions_with_the_default_marked() {
        let p = parse_partitions("bench*\ndebug\nbench*\n");
        assert_eq!(p.names, ["bench", "debug"]);
        assert_eq!(p.default.as_deref(), Some("bench"));
        assert_eq!(parse_partitions(""), Partitions::default());
    }

    #[test]
    fn squeue_lines_are_tasks() {
        let t = parse_state_line("41|3|RUNNING|n2|None").unwrap();
        assert_eq!(
            (t.job.as_str(), t.task, t.state.as_str(), t.nodes.as_str()),
            ("41", Some(3), "RUNNING", "n2")
        );
        assert!(!t.ended());
        let t = parse_state_line("41|N/A|NODE_FAIL|n1|NodeDown").unwrap();
        assert_eq!(t.task, None);
        assert!(t.ended());
        assert_eq!(t.describe(), "NODE_FAIL on n1 (reason: NodeDown)");
    }

    #[test]
    fn scripts_quote_every_word_but_slurm_variables() {
        let s = exec_script(
            "x",
            &[
                "/opt/rr bin/rubyrace".into(),
                "it's".into(),
                "$SLURM_ARRAY_TASK_ID".into(),
            ],
        );
        assert_eq!(
            s,
            "#!/bin/sh\n# x\nexec '/opt/rr bin/rubyrace' 'it'\\''s' \"$SLURM_ARRAY_TASK_ID\"\n"
        );
    }
}
