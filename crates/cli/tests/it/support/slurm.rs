//! A real Slurm cluster on this machine for the fleet tests: `munged`, `slurmctld` and one
//! `slurmd -N NAME` per node, started as plain foreground processes with a private
//! configuration (ports, spool directories, munge socket and key of their own) and stopped
//! by pid when dropped. Debian's packages (slurm-wlm, munge; scripts/setup) with
//! `ProctrackType=proctrack/linuxproc`, as the recipe. Its slurm.conf comes from
//! the template scripts/slurm-test-cluster fills in for users (`slurm_conf`).
//!
//! A node can be given paths that it must not see: its slurmd runs in a mount namespace of
//! its own where an empty tmpfs covers each (what a node without the shared storage, or
//! without a Ruby, looks like).
//!
//! A cluster can be networked (`Cluster::start_networked`): each slurmd then runs in a
//! network namespace of its own, joined by a veth pair to a bridge on this machine that
//! slurmctld listens on, so the nodes have different addresses and what one sends another
//! crosses the veths (whose packet counters the tests read).

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

/// The network of a networked cluster: a bridge with the controller's address, and per
/// node a network namespace joined to it by a veth pair. Removed when dropped.
pub struct Network {
    bridge: String,
    /// The controller's address on the bridge.
    pub controller: std::net::Ipv4Addr,
    /// Per node: its name, namespace, host-side veth and address.
    pub nodes: Vec<(String, String, String, std::net::Ipv4Addr)>,
}

/// `ip ARGS`, which must succeed.
fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("run ip (iproute2)");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Network {
    fn create(names: &[&str]) -> Network {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let tag = format!("{}{n}", std::process::id() % 100_000);
        // A /24 of 10.0.0.0/8 that this process and this cluster make their own.
        let subnet = [
            10u8,
            100 + (std::process::id() % 100) as u8,
            (n % 250) as u8,
        ];
        let at = |host: u8| std::net::Ipv4Addr::new(subnet[0], subnet[1], subnet[2], host);
        let bridge = format!("rrb{tag}");
        ip(&["link", "add", &bridge, "type", "bridge"]);
        let mut network = Network {
            bridge: bridge.clone(),
            controller: at(1),
            nodes: Vec::new(),
        };
        ip(&["addr", "add", &format!("{}/24", at(1)), "dev", &bridge]);
        ip(&["link", "set", &bridge, "up"]);
        for (i, name) in names.iter().enumerate() {
            let ns = format!("rr{tag}{name}");
            let host_side = format!("rrh{tag}{name}");
            let node_side = format!("rrn{tag}{name}");
            let address = at(11 + i as u8);
            ip(&["netns", "add", &ns]);
            network
                .nodes
                .push((name.to_string(), ns.clone(), host_side.clone(), address));
            ip(&[
                "link", "add", &host_side, "type", "veth", "peer", "name", &node_side,
            ]);
            ip(&["link", "set", &node_side, "netns", &ns]);
            ip(&["link", "set", &host_side, "master", &bridge, "up"]);
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{address}/24"),
                "dev",
                &node_side,
            ]);
            ip(&["-n", &ns, "link", "set", &node_side, "up"]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
        }
        network
    }

    /// Node `name`'s namespace and address.
    fn node(&self, name: &str) -> Option<&(String, String, String, std::net::Ipv4Addr)> {
        self.nodes.iter().find(|n| n.0 == name)
    }

    /// Packets the bridge received from node `name` (its host-side veth's rx counter).
    pub fn packets_from(&self, name: &str) -> u64 {
        let (_, _, host_side, _) = self.node(name).expect("a node of the network");
        std::fs::read_to_string(format!("/sys/class/net/{host_side}/statistics/rx_packets"))
            .expect("the veth's counter")
            .trim()
            .parse()
            .unwrap()
    }

    /// Node `name`'s address.
    pub fn address(&self, name: &str) -> std::net::Ipv4Addr {
        self.node(name).expect("a node of the network").3
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        for (_, ns, host_side, _) in &self.nodes {
            let _ = Command::new("ip").args(["link", "del", host_side]).output();
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge])
            .output();
    }
}

pub struct Cluster {
    pub dir: TempDir,
    /// The networked cluster's network (`start_networked`).
    pub network: Option<Network>,
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
        Cluster::start_on(nodes, None)
    }

    /// Starts a cluster whose nodes each have a network namespace and an address of their
    /// own (`Network`).
    pub fn start_networked(nodes: Vec<Node>) -> Cluster {
        let names: Vec<&str> = nodes.iter().map(|n| n.name).collect();
        let network = Network::create(&names);
        Cluster::start_on(nodes, Some(network))
    }

    fn start_on(nodes: Vec<Node>, network: Option<Network>) -> Cluster {
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
        let controller = network
            .as_ref()
            .map_or("127.0.0.1".to_string(), |n| n.controller.to_string());
        let cpus = std::thread::available_parallelism().map_or(1, |c| c.get());
        let node_lines: Vec<(String, String, u16)> = nodes
            .iter()
            .map(|n| {
                let address = network.as_ref().map_or("127.0.0.1".to_string(), |net| {
                    net.address(n.name).to_string()
                });
                (n.name.to_string(), address, free_port())
            })
            .collect();
        let conf = slurm_conf(
            &dir.path("").display().to_string(),
            &controller,
            ctld_port,
            &node_lines,
            cpus,
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
            network,
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
        if let Some((_, ns, _, _)) = self.network.as_ref().and_then(|n| n.node(node.name)) {
            let netns = std::fs::File::open(format!("/run/netns/{ns}")).expect("the node's netns");
            // SAFETY: only setns(2) between fork and exec; the file lives in the closure.
            unsafe {
                c.pre_exec(move || {
                    use std::os::fd::AsRawFd;
                    if libc::setns(netns.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
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

    /// The cluster's state for a failing test's message: the nodes, the queue (with each
    /// job's reason) and the tail of slurmctld's and each slurmd's log.
    pub fn describe(&self) -> String {
        let run = |program: &str, args: &[&str]| {
            self.command(program).args(args).output().map_or_else(
                |e| format!("{program}: {e}"),
                |o| {
                    String::from_utf8_lossy(&o.stdout).into_owned()
                        + &String::from_utf8_lossy(&o.stderr)
                },
            )
        };
        let tail = |file: &str| {
            let text = std::fs::read_to_string(self.dir.path(file)).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(25)..].join("\n")
        };
        let mut out = format!(
            "sinfo:\n{}\nsqueue:\n{}",
            run("sinfo", &["--Node", "--format=%N|%T|%E"]),
            run("squeue", &["--array", "--format=%i|%T|%R|%M|%N"]),
        );
        for (name, _) in &self.slurmd {
            out += &format!(
                "\nslurmd {name} log:\n{}",
                tail(&format!("log/slurmd-{name}.log"))
            );
        }
        out + &format!("\nslurmctld log:\n{}", tail("log/slurmctld.log"))
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

/// The test cluster's slurm.conf, from the template scripts/slurm-test-cluster fills in
/// too (one home for it): `dir` holds the cluster's files; each node is (name, NodeAddr,
/// slurmd's port).
pub fn slurm_conf(
    dir: &str,
    controller: &str,
    controller_port: u16,
    nodes: &[(String, String, u16)],
    cpus: usize,
) -> String {
    const TEMPLATE: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/slurm-test-cluster.conf"
    ));
    let dir = dir.trim_end_matches('/');
    let names: Vec<&str> = nodes.iter().map(|n| n.0.as_str()).collect();
    let mut conf = String::new();
    for line in TEMPLATE.lines().filter(|l| !l.starts_with('#')) {
        if line.contains("@NODE@") {
            for (name, address, port) in nodes {
                conf += &line
                    .replace("@NODE@", name)
                    .replace("@NODE_ADDR@", address)
                    .replace("@NODE_PORT@", &port.to_string())
                    .replace("@CPUS@", &cpus.to_string());
                conf.push('\n');
            }
        } else {
            conf += &line
                .replace("@DIR@", dir)
                .replace("@CONTROLLER_ADDR@", controller)
                .replace("@CONTROLLER_PORT@", &controller_port.to_string())
                .replace("@NODES@", &names.join(","));
            conf.push('\n');
        }
    }
    assert!(!conf.contains('@'), "a word of the template left: {conf}");
    conf
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
