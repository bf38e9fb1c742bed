//! A trial's load from another host (`[fleet] load = "separate"`, docs/fleet.md): the
//! server listens on its node's routable address, and the load runs in a load agent on a
//! second node (`rubyrace load-agent`, which a fleet task starts there as a Slurm job step).
//!
//! - The agent (`serve`) reads one JSON request per line on stdin and answers one JSON
//!   line per request on stdout: `hello` (its machine), `ping`, `rtt` (TCP connects to the
//!   server's port, timed), `run` (a load run, built there from the same settings and URL
//!   by `LoadSettings::build_spec`, with the caller's warmup, stop and seed) and
//!   `interrupt`. Runs go on at once on threads of their own (a co-scheduled window runs
//!   several), so every reply names its request.
//! - The client (`LoadAgent`) starts the agent's command, asks its machine, and measures
//!   the pipe's round trip. A process that uses one installs it (`install`): from then on
//!   its trials' servers listen on the agent's `server_address` and every load run of a
//!   trial (`run`, the one entry point `crate::trial` and `crate::interleave` call) goes to
//!   the agent; without one, the load runs here, in this process, as always.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use load::{LoadSpec, RunOutcome, SpecOrigin, StopCondition};
use results::{LoadHostRecord, RttRecord};
use serde::{Deserialize, Serialize};
use sys::environment::Machine;

/// The agent's protocol, checked at `hello`.
pub const PROTOCOL: &str = "rubyrace.load-agent/1";

/// Connects timed for a trial's round-trip time.
pub const RTT_CONNECTS: u32 = 20;

/// A request to the agent, one JSON line.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Request {
    Hello {
        id: u64,
    },
    Ping {
        id: u64,
    },
    Rtt {
        id: u64,
        addr: SocketAddr,
        connects: u32,
    },
    Run {
        id: u64,
        origin: Box<SpecOrigin>,
        warmup: Duration,
        stop: StopCondition,
        seed: u64,
    },
    Interrupt {
        id: u64,
    },
}

/// The agent's answer to the request `id`, one JSON line.
#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reply {
    Hello {
        id: u64,
        protocol: String,
        rubyrace_version: String,
        node: String,
        machine: Machine,
    },
    Pong {
        id: u64,
    },
    Rtt {
        id: u64,
        rtt: Result<RttRecord, String>,
    },
    Ran {
        id: u64,
        outcome: Box<RunOutcome>,
    },
    Failed {
        id: u64,
        error: String,
    },
}

impl Reply {
    fn id(&self) -> u64 {
        match self {
            Reply::Hello { id, .. }
            | Reply::Pong { id }
            | Reply::Rtt { id, .. }
            | Reply::Ran { id, .. }
            | Reply::Failed { id, .. } => *id,
        }
    }
}

// ---- The agent ---------------------------------------------------------------------

/// Serves requests from `input` until it ends (the task closed the pipe, or Slurm ended
/// the step), answering on `output`. Runs still going at the end are interrupted and
/// waited for.
pub fn serve(input: impl BufRead, output: impl Write + Send + 'static) -> Result<()> {
    let output = Arc::new(Mutex::new(output));
    let flags: Arc<Mutex<HashMap<u64, Arc<AtomicBool>>>> = Arc::default();
    let mut running = Vec::new();
    let answer = {
        let output = output.clone();
        move |reply: Reply| {
            let mut out = output.lock().unwrap_or_else(|e| e.into_inner());
            let line = serde_json::to_string(&reply).expect("replies serialize");
            // The task is gone when its pipe is: nothing is left to tell.
            let _ = writeln!(out, "{line}").and_then(|()| out.flush());
        }
    };
    for line in input.lines() {
        let line = line.context("reading the load agent's requests")?;
        if line.trim().is_empty() {
            continue;
        }
        let request: Request = match serde_json::from_str(&line) {
            Ok(r) => r,
            Err(e) => bail!("not a load agent request ({e}): {line}"),
        };
        match request {
            Request::Hello { id } => answer(Reply::Hello {
                id,
                protocol: PROTOCOL.into(),
                rubyrace_version: env!("CARGO_PKG_VERSION").into(),
                node: sys::environment::node_name(),
                machine: sys::environment::machine(),
            }),
            Request::Ping { id } => answer(Reply::Pong { id }),
            Request::Rtt { id, addr, connects } => {
                let answer = answer.clone();
                running.push(std::thread::spawn(move || {
                    answer(Reply::Rtt {
                        id,
                        rtt: measure_rtt(addr, connects),
                    })
                }));
            }
            Request::Run {
                id,
                origin,
                warmup,
                stop,
                seed,
            } => {
                let flag = Arc::new(AtomicBool::new(false));
                flags
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(id, flag.clone());
                let answer = answer.clone();
                let flags = flags.clone();
                running.push(std::thread::spawn(move || {
                    let reply = match run_here(&origin, warmup, stop, seed, flag) {
                        Ok(outcome) => Reply::Ran {
                            id,
                            outcome: Box::new(outcome),
                        },
                        Err(error) => Reply::Failed { id, error },
                    };
                    flags.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                    answer(reply);
                }));
            }
            Request::Interrupt { id } => {
                if let Some(flag) = flags.lock().unwrap_or_else(|e| e.into_inner()).get(&id) {
                    flag.store(true, Ordering::SeqCst);
                }
            }
        }
        running.retain(|t: &std::thread::JoinHandle<()>| !t.is_finished());
    }
    for flag in flags.lock().unwrap_or_else(|e| e.into_inner()).values() {
        flag.store(true, Ordering::SeqCst);
    }
    for t in running {
        let _ = t.join();
    }
    Ok(())
}

/// A load run on this host, from what another host built its spec from.
fn run_here(
    origin: &SpecOrigin,
    warmup: Duration,
    stop: StopCondition,
    seed: u64,
    interrupt: Arc<AtomicBool>,
) -> Result<RunOutcome, String> {
    let mut spec = load::LoadSettings::spec_from_origin(origin)
        .map_err(|e| format!("invalid load settings: {e}"))?;
    spec.warmup = warmup;
    spec.stop = stop;
    spec.seed = seed;
    load::run(&spec, None, interrupt).map_err(|e| e.to_string())
}

/// Times `connects` TCP handshakes with `addr`, one after the other.
pub fn measure_rtt(addr: SocketAddr, connects: u32) -> Result<RttRecord, String> {
    let mut times = Vec::with_capacity(connects as usize);
    for _ in 0..connects.max(1) {
        let started = Instant::now();
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
            .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
        times.push(started.elapsed().as_secs_f64() * 1e6);
        drop(stream);
    }
    times.sort_by(f64::total_cmp);
    Ok(RttRecord {
        connects: times.len() as u32,
        min_us: times[0],
        median_us: stats::median(&times).unwrap_or(times[0]),
        max_us: times[times.len() - 1],
    })
}

// ---- The client --------------------------------------------------------------------

type Pending = Arc<Mutex<HashMap<u64, Sender<Reply>>>>;

/// A running load agent, from the side of the trials that use it.
pub struct LoadAgent {
    child: Mutex<Child>,
    stdin: Mutex<Option<ChildStdin>>,
    pending: Pending,
    next_id: AtomicU64,
    /// Why the agent's output ended, once it has.
    ended: Arc<Mutex<Option<String>>>,
    /// The address this host's servers listen on, which the agent reaches.
    pub server_address: IpAddr,
    /// The agent's node and machine.
    pub node: String,
    pub machine: Machine,
    pub rubyrace_version: String,
    /// Half the best round trip of a ping through the agent's pipe.
    pub latency: Duration,
}

impl LoadAgent {
    /// Starts `argv` (the agent, e.g. through `srun`), which must speak [`PROTOCOL`] on
    /// its stdin and stdout, and waits up to `timeout` for its hello.
    pub fn start(argv: &[String], server_address: IpAddr, timeout: Duration) -> Result<LoadAgent> {
        let (program, args) = argv
            .split_first()
            .context("the load agent's command is empty")?;
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("cannot start the load agent ({program})"))?;
        // Not an orphan of a trial: it serves them all.
        sys::process::own(child.id() as i32);
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped");
        let pending: Pending = Arc::default();
        let ended = Arc::new(Mutex::new(None));
        {
            let pending = pending.clone();
            let ended = ended.clone();
            std::thread::spawn(move || {
                let why = read_replies(BufReader::new(stdout), &pending);
                *ended.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
                // Every request still waiting learns that no answer will come.
                pending.lock().unwrap_or_else(|e| e.into_inner()).clear();
            });
        }
        let mut agent = LoadAgent {
            child: Mutex::new(child),
            stdin: Mutex::new(stdin),
            pending,
            next_id: AtomicU64::new(1),
            ended,
            server_address,
            node: String::new(),
            machine: Machine::default(),
            rubyrace_version: String::new(),
            latency: Duration::ZERO,
        };
        let id = agent.new_id();
        match agent.ask(Request::Hello { id }, id, timeout)? {
            Reply::Hello {
                protocol,
                rubyrace_version,
                node,
                machine,
                ..
            } => {
                if protocol != PROTOCOL {
                    bail!("the load agent speaks {protocol:?}, this rubyrace {PROTOCOL:?}");
                }
                agent.node = node;
                agent.machine = machine;
                agent.rubyrace_version = rubyrace_version;
            }
            _ => bail!("the load agent did not answer its hello"),
        }
        let mut best = Duration::MAX;
        for _ in 0..5 {
            let id = agent.new_id();
            let sent = Instant::now();
            agent.ask(Request::Ping { id }, id, timeout)?;
            best = best.min(sent.elapsed());
        }
        agent.latency = best / 2;
        Ok(agent)
    }

    fn new_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::SeqCst)
    }

    fn send(&self, request: &Request) -> Result<()> {
        let mut stdin = self.stdin.lock().unwrap_or_else(|e| e.into_inner());
        let pipe = stdin.as_mut().context("the load agent was stopped")?;
        let line = serde_json::to_string(request)?;
        writeln!(pipe, "{line}")
            .and_then(|()| pipe.flush())
            .map_err(|e| anyhow::anyhow!("cannot reach the load agent ({e}){}", self.why_ended()))
    }

    fn why_ended(&self) -> String {
        match &*self.ended.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(why) => format!(": {why}"),
            None => String::new(),
        }
    }

    /// Where the reply to `id` will arrive.
    fn expect(&self, id: u64) -> Receiver<Reply> {
        let (tx, rx) = channel();
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, tx);
        rx
    }

    /// No reply to `id` is waited for any more.
    fn forget(&self, id: u64) {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
    }

    /// Sends `request` and waits up to `timeout` for the reply to `id`.
    fn ask(&self, request: Request, id: u64, timeout: Duration) -> Result<Reply> {
        let rx = self.expect(id);
        self.send(&request)?;
        let reply = rx.recv_timeout(timeout);
        if reply.is_err() {
            self.forget(id);
        }
        reply.map_err(|e| match e {
            RecvTimeoutError::Timeout => anyhow::anyhow!(
                "the load agent on {} did not answer within {}",
                self.node_or_command(),
                humantime::format_duration(timeout)
            ),
            RecvTimeoutError::Disconnected => anyhow::anyhow!(
                "the load agent on {} ended{}",
                self.node_or_command(),
                self.why_ended()
            ),
        })
    }

    fn node_or_command(&self) -> &str {
        if self.node.is_empty() {
            "its node"
        } else {
            &self.node
        }
    }

    /// The round-trip time to `addr`, from the agent's host.
    pub fn rtt(&self, addr: SocketAddr) -> Result<RttRecord, String> {
        let id = self.new_id();
        let request = Request::Rtt {
            id,
            addr,
            connects: RTT_CONNECTS,
        };
        match self.ask(request, id, Duration::from_secs(60)) {
            Ok(Reply::Rtt { rtt, .. }) => rtt,
            Ok(_) => Err("the load agent answered something else".into()),
            Err(e) => Err(format!("{e:#}")),
        }
    }

    /// Runs `spec` on the agent's host, as `load::run` runs it here. `interrupt` is passed
    /// on: the run ends early and its outcome comes back.
    pub fn run(&self, spec: &LoadSpec, interrupt: &Arc<AtomicBool>) -> io::Result<RunOutcome> {
        if spec.tls.is_some() {
            return Err(io::Error::other(
                "tls = true is not supported with a separate load host yet",
            ));
        }
        let id = self.new_id();
        let rx = self.expect(id);
        self.send(&Request::Run {
            id,
            origin: Box::new((*spec.origin).clone()),
            warmup: spec.warmup,
            stop: spec.stop,
            seed: spec.seed,
        })
        .map_err(|e| io::Error::other(format!("{e:#}")))?;
        // A run that overstays its time by this much is given up on (its load has its own
        // timeouts; this only guards against a stuck agent).
        let deadline = match spec.stop {
            StopCondition::Duration(d) => {
                Some(Instant::now() + spec.warmup + d + spec.timeout + Duration::from_secs(60))
            }
            StopCondition::Requests(_) => None,
        };
        let mut interrupted = false;
        loop {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(Reply::Ran { outcome, .. }) => return Ok(*outcome),
                Ok(Reply::Failed { error, .. }) => {
                    return Err(io::Error::other(format!(
                        "the load agent on {}: {error}",
                        self.node
                    )))
                }
                Ok(_) => return Err(io::Error::other("the load agent answered something else")),
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(io::Error::other(format!(
                        "the load agent on {} ended{}",
                        self.node,
                        self.why_ended()
                    )))
                }
                Err(RecvTimeoutError::Timeout) => {
                    if interrupt.load(Ordering::SeqCst) && !interrupted {
                        interrupted = true;
                        let _ = self.send(&Request::Interrupt { id });
                    }
                    if deadline.is_some_and(|d| Instant::now() > d) {
                        self.forget(id);
                        return Err(io::Error::other(format!(
                            "the load agent on {} did not return its run in time",
                            self.node
                        )));
                    }
                }
            }
        }
    }

    /// What a trial records of its load's host: this agent, the server's address, and the
    /// round-trip time to `server` measured now.
    pub fn record(&self, server: SocketAddr) -> LoadHostRecord {
        let rtt = self.rtt(server);
        LoadHostRecord {
            node: self.node.clone(),
            machine: self.machine.clone(),
            rubyrace_version: self.rubyrace_version.clone(),
            server_address: server.ip().to_string(),
            rtt_error: rtt.as_ref().err().cloned(),
            rtt: rtt.ok(),
            agent_latency_us: self.latency.as_secs_f64() * 1e6,
        }
    }

    /// Closes the agent's input (it interrupts what runs and exits) and waits up to
    /// `grace` for its command to end, then kills it.
    pub fn stop(&self, grace: Duration) {
        self.stdin.lock().unwrap_or_else(|e| e.into_inner()).take();
        let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        let until = Instant::now() + grace;
        let mut ended = false;
        while Instant::now() < until && !ended {
            ended = matches!(child.try_wait(), Ok(Some(_)));
            if !ended {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        if !ended {
            let _ = child.kill();
            let _ = child.wait();
        }
        sys::process::disown(child.id() as i32);
    }
}

/// Reads the agent's replies and hands each to the request waiting for it; returns why
/// the replies ended.
fn read_replies(output: impl BufRead, pending: &Pending) -> String {
    for line in output.lines() {
        let line = match line {
            Ok(l) => l,
            Err(e) => return format!("its output could not be read: {e}"),
        };
        let reply: Reply = match serde_json::from_str(&line) {
            Ok(r) => r,
            Err(e) => return format!("it wrote something that is not a reply ({e}): {line:.200}"),
        };
        let waiting = pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&reply.id());
        if let Some(tx) = waiting {
            let _ = tx.send(reply);
        }
    }
    "its output ended".into()
}

// ---- This process's load host ------------------------------------------------------

static INSTALLED: Mutex<Option<Arc<LoadAgent>>> = Mutex::new(None);

/// From now on, this process's trials take their load from `agent`.
pub fn install(agent: LoadAgent) {
    *INSTALLED.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(agent));
}

/// Stops and forgets the installed agent, if any.
pub fn uninstall(grace: Duration) {
    let agent = INSTALLED.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(agent) = agent {
        agent.stop(grace);
    }
}

/// The installed agent.
pub(crate) fn installed() -> Option<Arc<LoadAgent>> {
    INSTALLED.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// The address a trial's server listens on: the loopback, or with an agent installed,
/// the address the agent reaches.
pub(crate) fn server_address() -> IpAddr {
    installed().map_or(IpAddr::V4(Ipv4Addr::LOCALHOST), |a| a.server_address)
}

/// What a trial whose server listens on `server` records of its load's host, with the
/// round-trip time measured now; `None` when the load runs here.
pub(crate) fn load_host_record(server: SocketAddr) -> Option<LoadHostRecord> {
    installed().map(|agent| agent.record(server))
}

/// A trial's load run: here, or on the installed agent's host.
pub(crate) fn run(spec: &LoadSpec, interrupt: &Arc<AtomicBool>) -> io::Result<RunOutcome> {
    match installed() {
        Some(agent) => agent.run(spec, interrupt),
        None => load::run(spec, None, interrupt.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// Connects to a real listening socket are timed; without a listener, the error names
    /// the address. (The client and the agent together are tested through the binary, on
    /// a Slurm cluster of two network namespaces: tests/it/fleet.rs.)
    #[test]
    fn rtt_is_measured_against_a_listening_port_and_refused_without_one() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let rtt = measure_rtt(addr, 5).unwrap();
        assert_eq!(rtt.connects, 5);
        assert!(rtt.min_us > 0.0 && rtt.min_us <= rtt.median_us && rtt.median_us <= rtt.max_us);
        drop(listener);
        let e = measure_rtt(addr, 5).unwrap_err();
        assert!(e.contains(&addr.to_string()), "{e}");
    }

    #[test]
    fn serve_answers_each_request_by_its_id_and_ends_with_its_input() {
        let input = [
            r#"{"kind":"hello","id":7}"#,
            r#"{"kind":"ping","id":8}"#,
            r#"{"kind":"interrupt","id":99}"#,
        ]
        .join("\n");
        let out = Arc::new(Mutex::new(Vec::new()));
        struct Shared(Arc<Mutex<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                self.0.lock().unwrap().write(b)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        serve(io::Cursor::new(input), Shared(out.clone())).unwrap();
        let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
        let replies: Vec<Reply> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(replies.len(), 2, "{text}");
        assert!(
            matches!(&replies[0], Reply::Hello { id: 7, protocol, .. } if protocol == PROTOCOL)
        );
        assert!(matches!(replies[1], Reply::Pong { id: 8 }));
        let e = serve(io::Cursor::new("{\"kind\":\"dance\"}"), Shared(out)).unwrap_err();
        assert!(
            format!("{e:#}").contains("not a load agent request"),
            "{e:#}"
        );
    }
}
