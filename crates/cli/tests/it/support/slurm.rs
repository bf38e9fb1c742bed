//! A real Slurm cluster on this machine for the fleet tests: `munged`, `slurmctld` and one
//! `slurmd -N NAME` per node, started as plain foreground processes with a private
//! configuration (ports, spool directories, munge socket and key of their own) and stopped
//! by pid when dropped. Debian's packages (slurm-wlm, munge; scripts/setup) with
//! `ProctrackType=proctrack/linuxproc`, as the recipe.
//!
//! A node can be given paths that it must not see: its slurmd runs in a mount namespace of
//! its own where an empty tmpfs covers each (what a node without the shared storage, or
//! without a Ruby, looks like).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::TempDir;

/// One node of the test cluster.
pub struct Node {
    pub name: &'static str,
    /// Paths covered by an empty tmpfs in this node's mount namespace.
    pub hidden: Vec<PathBuf>,
}

impl Node {
    pub fn new(name: &'static str) -> Node {
        Node {
            name,
            hidden: Vec::new(),
        }
    }
}

pub struct Cluster {
    pub dir: TempDir,
    conf: PathBuf,
    munged: Option<Child>,
    slurmctld: Option<Child>,
    slurmd: Vec<(&'static str, Child)>,
}

fn free_port() -> u16 {
    testkit::free_port()
}

impl Cluster {
    /// Starts a cluster of `nodes` and waits until every node is idle.
    pub fn start(nodes: Vec<Node>) -> Cluster {
        // Short: the munge socket's path must fit in a Unix socket address.
        let dir = TempDir::new_in("slurm", Path::new("/tmp"));
        let d = |f: &str| dir.path(f);
        for sub in ["state", "spool", "log"] {
            std::fs::create_dir_all(d(sub)).unwrap();
        }
        let key: Vec<u8> = (0..1024u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        std::fs::write(d("munge.key"), key).unwrap();
        std::fs::set_permissions(
            d("munge.key"),
            std::os::unix::fs::PermissionsExt::from_mode(0o400),
        )
        .unwrap();
        let munged = Command::new("munged")
            .arg("--foreground")
            .arg(format!("--key-file={}", d("munge.key").display()))
            .arg(format!("--socket={}", d("munge.sock").display()))
            .arg(format!("--pid-file={}", d("munged.pid").display()))
            .arg(format!("--log-file={}", d("log/munged.log").display()))
            .arg(format!("--seed-file={}", d("munge.seed").display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start munged (scripts/setup installs munge)");
        let ctld_port = free_port();
        let mut conf = format!(
            "ClusterName=rrtest\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort={ctld_port}\nSlurmUser=root\nSlurmdUser=root\n\
AuthType=auth/munge\nAuthInfo=socket={sock}\nCredType=cred/munge\nStateSaveLocation={state}\n\
SlurmdSpoolDir={spool}/%n\nSlurmctldPidFile={dir}/slurmctld.pid\nSlurmdPidFile={dir}/slurmd-%n.pid\n\
SlurmctldLogFile={dir}/log/slurmctld.log\nSlurmdLogFile={dir}/log/slurmd-%n.log\n\
ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n\
AccountingStorageType=accounting_storage/none\nJobCompType=jobcomp/none\nSchedulerType=sched/backfill\n\
SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nReturnToService=2\nMinJobAge=3600\n\
SlurmdTimeout=5\nKillWait=5\nMpiDefault=none\nSchedulerParameters=sched_interval=1\n",
            sock = d("munge.sock").display(),
            state = d("state").display(),
            spool = d("spool").display(),
            dir = dir.path("").display(),
        );
        let names: Vec<&str> = nodes.iter().map(|n| n.name).collect();
        for n in &nodes {
            conf += &format!(
                "NodeName={} NodeHostname=localhost NodeAddr=127.0.0.1 Port={} CPUs={} State=UNKNOWN\n",
                n.name,
                free_port(),
                std::thread::available_parallelism().map_or(1, |c| c.get())
            );
        }
        conf += &format!(
            "PartitionName=bench Nodes={} Default=YES MaxTime=INFINITE State=UP\n",
            names.join(",")
        );
        let conf_path = dir.write("slurm.conf", conf);
        wait_for(
            Duration::from_secs(10),
            || d("munge.sock").exists(),
            "munged's socket",
        );
        let slurmctld = Command::new("slurmctld")
            .args(["-D", "-c", "-f"])
            .arg(&conf_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start slurmctld (scripts/setup installs slurm-wlm)");
        let mut cluster = Cluster {
            conf: conf_path.clone(),
            munged: Some(munged),
            slurmctld: Some(slurmctld),
            slurmd: Vec::new(),
            dir,
        };
        for n in &nodes {
            let child = cluster.slurmd_command(n).spawn().expect("start slurmd");
            cluster.slurmd.push((n.name, child));
        }
        let started = Instant::now();
        loop {
            let out = cluster
                .command("sinfo")
                .args(["--noheader", "--Node", "--format=%N|%T"])
                .output();
            let idle = out
                .as_ref()
                .map(|o| {
                    String::from_utf8_lossy(&o.stdout)
                        .lines()
                        .filter(|l| l.ends_with("|idle"))
                        .count()
                })
                .unwrap_or(0);
            if idle == nodes.len() {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the test cluster's nodes did not become idle: {:?}\nslurmctld log: {}",
                out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()),
                std::fs::read_to_string(cluster.dir.path("log/slurmctld.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
        cluster
    }

    fn slurmd_command(&self, node: &Node) -> Command {
        let mut c = Command::new("slurmd");
        c.args(["-D", "-N", node.name, "-f"])
            .arg(&self.conf)
            .env("SLURM_CONF", &self.conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if !node.hidden.is_empty() {
            let hidden: Vec<std::ffi::CString> = node
                .hidden
                .iter()
                .map(|p| std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap())
                .collect();
            // SAFETY: only async-signal-safe calls (unshare, mount) between fork and exec.
            unsafe {
                c.pre_exec(move || {
                    if libc::unshare(libc::CLONE_NEWNS) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    let root = c"/";
                    if libc::mount(
                        std::ptr::null(),
                        root.as_ptr(),
                        std::ptr::null(),
                        libc::MS_REC | libc::MS_PRIVATE,
                        std::ptr::null(),
                    ) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                    for p in &hidden {
                        if libc::mount(
                            c"tmpfs".as_ptr(),
                            p.as_ptr(),
                            c"tmpfs".as_ptr(),
                            0,
                            std::ptr::null(),
                        ) != 0
                        {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                    Ok(())
                });
            }
        }
        c
    }

    /// A Slurm client command (sinfo, squeue...) talking to this cluster.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("SLURM_CONF", &self.conf);
        c
    }

    /// The environment a `rubyrace run --slurm` needs to use this cluster.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![("SLURM_CONF", self.conf.display().to_string())]
    }

    /// Every job Slurm still runs or queues.
    pub fn active_jobs(&self) -> Vec<String> {
        let out = self
            .command("squeue")
            .args(["--noheader", "--array", "--format=%i|%T"])
            .output()
            .expect("squeue");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Kills node `name` as a dead machine would die: its slurmd, and every process of
    /// the jobs on it (slurmstepd, rubyrace's task, its servers).
    pub fn kill_node(&mut self, name: &str) {
        let i = self
            .slurmd
            .iter()
            .position(|(n, _)| *n == name)
            .expect("a node of the cluster");
        let (_, mut child) = self.slurmd.remove(i);
        let doomed: Vec<i32> = self
            .job_processes()
            .into_iter()
            .filter(|(_, node, _)| node == name)
            .map(|(p, _, _)| p)
            .collect();
        let _ = child.kill();
        let _ = child.wait();
        for p in doomed {
            // SAFETY: plain kill(2) of a process this test's cluster started.
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
    }

    /// Every process of this cluster's jobs: each slurmstepd (they leave slurmd's tree)
    /// whose job runs with this cluster's SLURM_CONF, and what it runs; with the node.
    pub fn job_processes(&self) -> Vec<(i32, String, String)> {
        let conf = format!("SLURM_CONF={}", self.conf.display());
        let mut out = Vec::new();
        for (p, cmd) in processes() {
            if !cmd.starts_with("slurmstepd") {
                continue;
            }
            let below = descendants(p);
            let node = below.iter().find_map(|c| {
                let env = std::fs::read(format!("/proc/{c}/environ")).ok()?;
                let vars: Vec<String> = env
                    .split(|b| *b == 0)
                    .map(|v| String::from_utf8_lossy(v).into_owned())
                    .collect();
                if !vars.contains(&conf) {
                    return None;
                }
                vars.iter()
                    .find_map(|v| v.strip_prefix("SLURMD_NODENAME=").map(str::to_string))
            });
            let Some(node) = node else { continue };
            out.push((p, node.clone(), cmd));
            for d in below {
                let cmd = std::fs::read_to_string(format!("/proc/{d}/cmdline"))
                    .unwrap_or_default()
                    .replace('\0', " ");
                out.push((d, node.clone(), cmd));
            }
        }
        out
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.command("scancel").args(["--me"]).output();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.active_jobs().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(300));
        }
        for (_, child) in &mut self.slurmd {
            let _ = child.kill();
            let _ = child.wait();
        }
        for (p, _, _) in self.job_processes() {
            // SAFETY: plain kill(2) of a process this test's cluster started.
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
        for child in [self.slurmctld.take(), self.munged.take()]
            .into_iter()
            .flatten()
        {
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn wait_for(limit: Duration, mut ok: impl FnMut() -> bool, what: &str) {
    let started = Instant::now();
    while !ok() {
        assert!(
            started.elapsed() < limit,
            "{what} did not appear within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every process: pid and command line.
fn processes() -> Vec<(i32, String)> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
                .map(|p| {
                    (
                        p,
                        std::fs::read_to_string(format!("/proc/{p}/cmdline"))
                            .unwrap_or_default()
                            .replace('\0', " "),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The descendants of `pid` (children, their children...).
pub fn descendants(pid: i32) -> Vec<i32> {
    let parent_of = |p: i32| -> Option<i32> {
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
        let after = &stat[stat.rfind(')')? + 2..];
        after.split_whitespace().nth(1)?.parse().ok()
    };
    let all: Vec<(i32, i32)> = processes()
        .into_iter()
        .filter_map(|(p, _)| Some((p, parent_of(p)?)))
        .collect();
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        for (c, _) in all.iter().filter(|(_, parent)| *parent == p) {
            out.push(*c);
            frontier.push(*c);
        }
    }
    out
}
