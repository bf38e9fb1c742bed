//! Test support for driving the real `rubyrace` binary against real loopback servers.
//!
//! - [`Server`]: a small HTTP/1.1 server in plain std (a listener thread plus one thread per
//!   connection) whose answers are decided per request by a closure returning a [`Reply`].
//!   It records every request it parses and counts the connections it accepts. It binds
//!   127.0.0.1:0 and is stopped and joined when dropped.
//! - [`rubyrace`] / [`load`]: run the binary with a hard deadline; a run that exceeds it is
//!   killed (by its pid, it is our child) and the test fails.
//! - [`Puma`]: a Puma process in its own process group, killed by its pgid when dropped.
//! - [`TempDir`]: a scratch directory removed when dropped.

#![allow(dead_code)]

pub mod lab;

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

/// Every binary run is killed, and its test failed, after this long.
pub const HARD_DEADLINE: Duration = Duration::from_secs(30);

/// The response of the well-behaved server.
pub const HELLO: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";

// ---------------------------------------------------------------------------------------
// Servers
// ---------------------------------------------------------------------------------------

/// One request as the server parsed it.
#[derive(Clone, Debug)]
pub struct Request {
    /// Server-side connection number, in accept order (0-based).
    pub conn: usize,
    /// Arrival order over the whole server (0-based).
    pub index: usize,
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn wants_close(&self) -> bool {
        self.header("connection")
            .is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")))
    }
}

/// What the server does with one request.
pub enum Reply {
    /// Write these bytes and keep the connection (unless the request asked to close and
    /// the server honours that).
    Send(Vec<u8>),
    /// Write these bytes, then close the connection (FIN). Response and FIN leave in one
    /// segment (TCP_CORK), so the client sees the close together with the response.
    SendThenClose(Vec<u8>),
    /// Write these bytes, wait this long, then close (the client sees an idle close).
    SendThenCloseAfter(Vec<u8>, Duration),
    /// Close the connection with a TCP reset (SO_LINGER 0), answering nothing.
    Reset,
    /// Never answer: keep reading and discarding until the client goes away.
    Hang,
    /// Write these bytes in pieces of the given size, pausing 1 ms between pieces, then
    /// keep the connection.
    Dribble(Vec<u8>, usize),
}

type Handler = Arc<dyn Fn(&Request) -> Reply + Send + Sync>;

pub struct ServerBuilder {
    handler: Handler,
    honour_close: bool,
    batch: usize,
}

impl ServerBuilder {
    pub fn new(handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Self {
        ServerBuilder {
            handler: Arc::new(handler),
            honour_close: true,
            batch: 1,
        }
    }

    /// Keep the connection open after a `Connection: close` request, and do not say close.
    pub fn ignore_close(mut self) -> Self {
        self.honour_close = false;
        self
    }

    /// Answer only when at least `n` complete requests are waiting on the connection: a
    /// client that does not pipeline `n` requests gets no answer at all.
    pub fn batch(mut self, n: usize) -> Self {
        self.batch = n.max(1);
        self
    }

    pub fn start(self) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            accepted: AtomicUsize::new(0),
            requests: Mutex::new(Vec::new()),
            handlers: Mutex::new(Vec::new()),
            handler: self.handler,
            honour_close: self.honour_close,
            batch: self.batch,
        });
        let accept_shared = shared.clone();
        let accept = std::thread::Builder::new()
            .name(format!("server-{}", addr.port()))
            .spawn(move || accept_loop(listener, accept_shared))
            .unwrap();
        Server {
            addr,
            shared,
            accept: Some(accept),
        }
    }
}

struct Shared {
    stop: AtomicBool,
    accepted: AtomicUsize,
    requests: Mutex<Vec<Request>>,
    handlers: Mutex<Vec<JoinHandle<()>>>,
    handler: Handler,
    honour_close: bool,
    batch: usize,
}

/// A running loopback server; stopped and joined on drop.
pub struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    /// The well-behaved keepalive server: `HELLO` to every request.
    pub fn hello() -> Server {
        ServerBuilder::new(|_| Reply::Send(HELLO.to_vec())).start()
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Every request parsed so far, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        self.shared.requests.lock().unwrap().clone()
    }

    pub fn request_count(&self) -> usize {
        self.shared.requests.lock().unwrap().len()
    }

    /// Requests per server connection (conn -> count), for connections that sent any.
    pub fn requests_per_connection(&self) -> BTreeMap<usize, usize> {
        let mut per = BTreeMap::new();
        for r in self.shared.requests.lock().unwrap().iter() {
            *per.entry(r.conn).or_insert(0) += 1;
        }
        per
    }

    /// How many requests had this path.
    pub fn count_path(&self, path: &str) -> u64 {
        self.shared
            .requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.path == path)
            .count() as u64
    }

    /// Waits (bounded) until the server has parsed at least `n` requests.
    pub fn wait_for_requests(&self, n: usize, limit: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < limit {
            if self.request_count() >= n {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
        let handlers: Vec<_> = self.shared.handlers.lock().unwrap().drain(..).collect();
        for h in handlers {
            let _ = h.join();
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = stream else {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        };
        let conn = shared.accepted.fetch_add(1, Ordering::SeqCst);
        let conn_shared = shared.clone();
        let handle = std::thread::Builder::new()
            .name(format!("conn-{conn}"))
            .spawn(move || serve_connection(stream, conn, conn_shared))
            .unwrap();
        let mut handlers = shared.handlers.lock().unwrap();
        // Reap finished handlers so a long run does not pile up join handles.
        let (done, running): (Vec<_>, Vec<_>) = handlers.drain(..).partition(|h| h.is_finished());
        *handlers = running;
        handlers.push(handle);
        drop(handlers);
        for h in done {
            let _ = h.join();
        }
    }
}

/// Sets one socket option, failing the test if the kernel refuses it.
fn set_socket_option<T>(
    stream: &TcpStream,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
    what: &str,
) {
    // SAFETY: valid fd, valid pointer and length for the option value.
    let rc = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            level,
            name,
            value as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "setsockopt({what}): {}", io::Error::last_os_error());
}

/// Sets SO_LINGER to 0 so that closing the socket sends a reset.
pub fn set_linger_zero(stream: &TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    set_socket_option(
        stream,
        libc::SOL_SOCKET,
        libc::SO_LINGER,
        &linger,
        "SO_LINGER",
    );
}

/// Sets TCP_CORK: partial segments wait until the option is cleared or a FIN is sent.
pub fn set_cork(stream: &TcpStream, on: bool) {
    let value: libc::c_int = on.into();
    set_socket_option(
        stream,
        libc::IPPROTO_TCP,
        libc::TCP_CORK,
        &value,
        "TCP_CORK",
    );
}

/// Inserts `Connection: close` after the status line of a response.
fn with_close_header(response: &[u8]) -> Vec<u8> {
    match response.windows(2).position(|w| w == b"\r\n") {
        Some(i) => {
            let mut out = response[..i + 2].to_vec();
            out.extend_from_slice(b"Connection: close\r\n");
            out.extend_from_slice(&response[i + 2..]);
            out
        }
        None => response.to_vec(),
    }
}

fn serve_connection(mut stream: TcpStream, conn: usize, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    // Short read timeouts so the thread notices the stop flag; writes must not block forever.
    let _ = stream.set_read_timeout(Some(Duration::from_millis(50)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(5)));
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut pending: Vec<Request> = Vec::new();
    let mut hanging = false;
    loop {
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        if !hanging {
            loop {
                match parse_request(&buf) {
                    Parsed::Complete {
                        method,
                        path,
                        headers,
                        body,
                        used,
                    } => {
                        buf.drain(..used);
                        let mut log = shared.requests.lock().unwrap();
                        let request = Request {
                            conn,
                            index: log.len(),
                            method,
                            path,
                            headers,
                            body,
                        };
                        log.push(request.clone());
                        pending.push(request);
                    }
                    Parsed::Partial => break,
                    Parsed::Invalid => return,
                }
            }
            if !pending.is_empty() && pending.len() >= shared.batch {
                let mut out = Vec::new();
                let mut then: Option<Reply> = None;
                for request in pending.drain(..) {
                    match (shared.handler)(&request) {
                        Reply::Send(bytes) if shared.honour_close && request.wants_close() => {
                            out.extend_from_slice(&with_close_header(&bytes));
                            then = Some(Reply::SendThenClose(Vec::new()));
                            break;
                        }
                        Reply::Send(bytes) => out.extend_from_slice(&bytes),
                        Reply::Dribble(bytes, piece) => {
                            if stream.write_all(&out).is_err() {
                                return;
                            }
                            out.clear();
                            for part in bytes.chunks(piece.max(1)) {
                                if stream.write_all(part).and_then(|_| stream.flush()).is_err() {
                                    return;
                                }
                                std::thread::sleep(Duration::from_millis(1));
                            }
                        }
                        Reply::SendThenClose(bytes) => {
                            out.extend_from_slice(&bytes);
                            then = Some(Reply::SendThenClose(Vec::new()));
                            break;
                        }
                        Reply::SendThenCloseAfter(bytes, wait) => {
                            out.extend_from_slice(&bytes);
                            then = Some(Reply::SendThenCloseAfter(Vec::new(), wait));
                            break;
                        }
                        other => {
                            then = Some(other);
                            break;
                        }
                    }
                }
                if matches!(then, Some(Reply::SendThenClose(_))) {
                    // Hold the response back until the FIN, so that both leave in one
                    // segment: the client then sees the close with the response, never
                    // in between (when it could already have sent its next request).
                    set_cork(&stream, true);
                }
                if !out.is_empty() && stream.write_all(&out).is_err() {
                    return;
                }
                match then {
                    None => {}
                    Some(Reply::SendThenCloseAfter(_, wait)) => {
                        std::thread::sleep(wait);
                        let _ = stream.shutdown(Shutdown::Write);
                        drain_until_eof(&mut stream, &shared, Duration::from_secs(2));
                        return;
                    }
                    Some(Reply::SendThenClose(_)) => {
                        let _ = stream.flush();
                        let _ = stream.shutdown(Shutdown::Write);
                        // Let the client see the FIN before the socket is released; a
                        // close with unread input would turn it into a reset.
                        drain_until_eof(&mut stream, &shared, Duration::from_secs(2));
                        return;
                    }
                    Some(Reply::Reset) => {
                        set_linger_zero(&stream);
                        return; // dropping the stream sends the RST
                    }
                    Some(Reply::Hang) => hanging = true,
                    Some(Reply::Send(_)) | Some(Reply::Dribble(..)) => unreachable!(),
                }
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => {
                if !hanging {
                    buf.extend_from_slice(&chunk[..n]);
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(_) => return,
        }
    }
}

/// After our FIN: read and discard until the client closes (or a limit passes).
fn drain_until_eof(stream: &mut TcpStream, shared: &Shared, limit: Duration) {
    let start = Instant::now();
    let mut sink = [0u8; 4096];
    while start.elapsed() < limit && !shared.stop.load(Ordering::SeqCst) {
        match stream.read(&mut sink) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(_) => return,
        }
    }
}

enum Parsed {
    Complete {
        method: String,
        path: String,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
        used: usize,
    },
    Partial,
    Invalid,
}

/// Parses one request (head plus Content-Length body) from the front of `buf`.
fn parse_request(buf: &[u8]) -> Parsed {
    let Some(head_end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return if buf.len() > 64 * 1024 {
            Parsed::Invalid
        } else {
            Parsed::Partial
        };
    };
    let Ok(head) = std::str::from_utf8(&buf[..head_end]) else {
        return Parsed::Invalid;
    };
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or("");
    let mut parts = request_line.split(' ');
    let (Some(method), Some(path), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Parsed::Invalid;
    };
    if !version.starts_with("HTTP/1.") || parts.next().is_some() {
        return Parsed::Invalid;
    }
    let mut headers = Vec::new();
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Parsed::Invalid;
        };
        headers.push((name.trim().to_string(), value.trim().to_string()));
    }
    let length = match headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
    {
        Some((_, v)) => match v.parse::<usize>() {
            Ok(n) => n,
            Err(_) => return Parsed::Invalid,
        },
        None => 0,
    };
    let body_start = head_end + 4;
    if buf.len() < body_start + length {
        return Parsed::Partial;
    }
    Parsed::Complete {
        method: method.to_string(),
        path: path.to_string(),
        headers,
        body: buf[body_start..body_start + length].to_vec(),
        used: body_start + length,
    }
}

/// A port on which nothing listens (bound, then released).
pub fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A listener that never accepts, with the smallest accept queue: once one connection
/// waits in it, further SYNs are dropped and those connects never complete.
pub struct FullBacklog {
    listener: TcpListener,
    /// Connections made by the guard itself to fill the queue.
    fillers: Vec<TcpStream>,
}

impl FullBacklog {
    pub fn start() -> FullBacklog {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        // SAFETY: listen(2) on our own listening socket, only changing its backlog.
        let rc = unsafe { libc::listen(listener.as_raw_fd(), 0) };
        assert_eq!(rc, 0, "listen: {}", io::Error::last_os_error());
        let addr = listener.local_addr().unwrap();
        // Fill the queue ourselves so that every connect from the binary hangs.
        let mut fillers = Vec::new();
        for _ in 0..4 {
            match TcpStream::connect_timeout(&addr, Duration::from_millis(300)) {
                Ok(s) => fillers.push(s),
                Err(_) => break,
            }
        }
        assert!(!fillers.is_empty(), "could not fill the accept queue");
        FullBacklog { listener, fillers }
    }

    pub fn url(&self) -> String {
        format!("http://{}/", self.listener.local_addr().unwrap())
    }

    /// True when a further connect cannot complete within `wait`.
    pub fn connect_hangs(&self, wait: Duration) -> bool {
        TcpStream::connect_timeout(&self.listener.local_addr().unwrap(), wait).is_err()
    }
}

// ---------------------------------------------------------------------------------------
// Running the binary
// ---------------------------------------------------------------------------------------

/// A finished run of the binary.
pub struct Run {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
    pub args: Vec<String>,
}

impl Run {
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// The JSON report written to stdout by `--json -`.
    pub fn report(&self) -> Report {
        match serde_json::from_str::<Value>(&self.stdout) {
            Ok(v) => {
                assert_eq!(v["schema"], "rubyrace.load/1", "unexpected schema in {v}");
                Report(v)
            }
            Err(e) => panic!(
                "stdout of {:?} is not JSON ({e}):\n{}\nstderr:\n{}",
                self.args, self.stdout, self.stderr
            ),
        }
    }
}

impl fmt::Debug for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rubyrace {:?}\n  status {:?} after {:?}\n  stdout:\n{}\n  stderr:\n{}",
            self.args, self.status, self.elapsed, self.stdout, self.stderr
        )
    }
}

/// A running binary; killed (by pid) if dropped before it is waited for.
pub struct Running {
    child: Option<Child>,
    started: Instant,
    args: Vec<String>,
    out: Option<JoinHandle<String>>,
    err: Option<JoinHandle<String>>,
}

fn read_all(mut r: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = r.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

impl Running {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Still running?
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().unwrap().try_wait(), Ok(None))
    }

    /// Waits for the exit; past `deadline` (since the start) the process is killed and the
    /// test fails.
    pub fn wait(mut self, deadline: Duration) -> Run {
        let mut child = self.child.take().unwrap();
        let status = loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                break status;
            }
            if self.started.elapsed() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                let stdout = self.out.take().unwrap().join().unwrap_or_default();
                let stderr = self.err.take().unwrap().join().unwrap_or_default();
                panic!(
                    "rubyrace {:?} still running after {deadline:?}: killed\nstdout:\n{stdout}\nstderr:\n{stderr}",
                    self.args
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let elapsed = self.started.elapsed();
        Run {
            status,
            stdout: self.out.take().unwrap().join().unwrap_or_default(),
            stderr: self.err.take().unwrap().join().unwrap_or_default(),
            elapsed,
            args: self.args.clone(),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Starts `rubyrace ARGS...`.
pub fn spawn<S: AsRef<str>>(args: &[S]) -> Running {
    let args: Vec<String> = args.iter().map(|a| a.as_ref().to_string()).collect();
    let mut child = Command::new(env!("CARGO_BIN_EXE_rubyrace"))
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the rubyrace binary");
    let out = read_all(child.stdout.take().unwrap());
    let err = read_all(child.stderr.take().unwrap());
    Running {
        child: Some(child),
        started: Instant::now(),
        args,
        out: Some(out),
        err: Some(err),
    }
}

/// Runs `rubyrace ARGS...` to completion under [`HARD_DEADLINE`].
pub fn rubyrace<S: AsRef<str>>(args: &[S]) -> Run {
    spawn(args).wait(HARD_DEADLINE)
}

/// Runs `rubyrace load URL ARGS... --json -`, expects exit status 0, returns the report.
pub fn load<S: AsRef<str>>(url: &str, args: &[S]) -> (Run, Report) {
    let run = load_run(url, args);
    assert_eq!(run.code(), Some(0), "{run:?}");
    let report = run.report();
    (run, report)
}

/// Runs `rubyrace load URL ARGS... --json -` whatever its exit status.
pub fn load_run<S: AsRef<str>>(url: &str, args: &[S]) -> Run {
    let mut all = vec!["load".to_string(), url.to_string()];
    all.extend(args.iter().map(|a| a.as_ref().to_string()));
    all.extend(["--json".to_string(), "-".to_string()]);
    rubyrace(&all)
}

/// The JSON report, with accessors that fail loudly (showing the whole report).
#[derive(Clone)]
pub struct Report(pub Value);

impl Report {
    pub fn value(&self, pointer: &str) -> &Value {
        self.0
            .pointer(pointer)
            .unwrap_or_else(|| panic!("no {pointer} in report:\n{self}"))
    }

    pub fn u(&self, pointer: &str) -> u64 {
        self.value(pointer)
            .as_u64()
            .unwrap_or_else(|| panic!("{pointer} is not an unsigned integer in report:\n{self}"))
    }

    pub fn f(&self, pointer: &str) -> f64 {
        self.value(pointer)
            .as_f64()
            .unwrap_or_else(|| panic!("{pointer} is not a number in report:\n{self}"))
    }

    pub fn b(&self, pointer: &str) -> bool {
        self.value(pointer)
            .as_bool()
            .unwrap_or_else(|| panic!("{pointer} is not a bool in report:\n{self}"))
    }

    pub fn requests(&self) -> u64 {
        self.u("/requests")
    }

    pub fn err(&self, kind: &str) -> u64 {
        self.u(&format!("/errors/{kind}"))
    }

    /// Responses with this status code (0 when absent from the map).
    pub fn status(&self, code: u16) -> u64 {
        let map = self
            .value("/status")
            .as_object()
            .expect("status is an object");
        map.get(&code.to_string())
            .map_or(0, |v| v.as_u64().expect("status counts are integers"))
    }

    /// Responses over all status codes.
    pub fn status_total(&self) -> u64 {
        let map = self
            .value("/status")
            .as_object()
            .expect("status is an object");
        map.values().map(|v| v.as_u64().unwrap()).sum()
    }

    /// Errors that lost a request (every kind but `status`).
    pub fn failed_attempts(&self) -> u64 {
        ["connect", "read", "write", "timeout", "parse"]
            .iter()
            .map(|k| self.err(k))
            .sum()
    }

    /// Recorded attempts: responses plus failed attempts.
    pub fn attempts(&self) -> u64 {
        self.requests() + self.failed_attempts()
    }

    pub fn warnings(&self) -> Vec<String> {
        self.value("/warnings")
            .as_array()
            .expect("warnings is an array")
            .iter()
            .map(|w| w.as_str().unwrap().to_string())
            .collect()
    }

    pub fn has_warning(&self, needle: &str) -> bool {
        self.warnings().iter().any(|w| w.contains(needle))
    }

    pub fn connections_per_thread(&self) -> Vec<u64> {
        self.value("/actual/connections_per_thread")
            .as_array()
            .expect("an array")
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect()
    }

    /// Checks what holds for every run: the error total adds up, the status map sums to
    /// the responses, and the error rate is consistent with both.
    pub fn assert_consistent(&self) {
        let total = self.failed_attempts() + self.err("status");
        assert_eq!(
            self.err("total"),
            total,
            "errors.total does not add up:\n{self}"
        );
        assert_eq!(
            self.status_total(),
            self.requests(),
            "status counts do not sum to requests:\n{self}"
        );
        let non_2xx: u64 = self
            .value("/status")
            .as_object()
            .unwrap()
            .iter()
            .filter(|(code, _)| !code.starts_with('2'))
            .map(|(_, v)| v.as_u64().unwrap())
            .sum();
        assert_eq!(
            self.err("status"),
            non_2xx,
            "errors.status is not the non-2xx count:\n{self}"
        );
        let attempts = self.attempts();
        let want = if attempts == 0 {
            0.0
        } else {
            total as f64 / attempts as f64
        };
        assert!(
            (self.f("/error_rate") - want).abs() < 1e-9,
            "error_rate is not {want}:\n{self}"
        );
        assert_eq!(
            self.u("/actual/connections"),
            self.connections_per_thread().iter().sum::<u64>(),
            "actual.connections is not the sum per thread:\n{self}"
        );
    }

    /// `-n N` semantics: exactly N attempts recorded, nothing left in flight.
    pub fn assert_attempts(&self, n: u64) {
        self.assert_consistent();
        assert_eq!(
            self.attempts(),
            n,
            "requests + failed attempts != -n {n}:\n{self}"
        );
        assert_eq!(
            self.u("/in_flight_at_end"),
            0,
            "requests left in flight with -n:\n{self}"
        );
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", serde_json::to_string_pretty(&self.0).unwrap())
    }
}

// ---------------------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------------------

/// A scratch directory under cargo's per-target temporary directory, removed on drop.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "load-{name}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir { path }
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.path.join(file)
    }

    pub fn write(&self, file: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let p = self.path(file);
        std::fs::write(&p, contents).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

pub fn path_str(p: &Path) -> String {
    p.to_str().expect("UTF-8 path").to_string()
}

// ---------------------------------------------------------------------------------------
// Puma
// ---------------------------------------------------------------------------------------

/// The workspace root (two levels above this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Finds an executable on PATH.
pub fn which(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// A Puma server in its own process group; the whole group is terminated on drop.
pub struct Puma {
    child: Option<Child>,
    pgid: i32,
    pub port: u16,
    log: PathBuf,
    _dir: Option<TempDir>,
}

/// Sends one `GET /` and returns the status line, if any.
fn probe(port: u16) -> Option<String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"GET / HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    text.lines().next().map(str::to_string)
}

impl Puma {
    /// Starts `puma -b tcp://127.0.0.1:PORT -t 1:4 -w 0 CONFIG_RU` on a free port and waits
    /// until it answers 200. Fails the test (never skips) when puma is not on PATH.
    pub fn start(config_ru: &Path) -> Puma {
        let puma = which("puma").unwrap_or_else(|| {
            panic!(
                "`puma` is not on PATH ({:?}); it is required by this test. \
                 Run scripts/setup (it installs the Debian packages ruby, puma and ruby-rack).",
                std::env::var("PATH").unwrap_or_default()
            )
        });
        assert!(
            config_ru.is_file(),
            "{} does not exist",
            config_ru.display()
        );
        let dir = TempDir::new("puma");
        let mut last_log = String::new();
        for attempt in 0..5 {
            let port = closed_port();
            let log = dir.path(&format!("puma-{attempt}.log"));
            let log_file = std::fs::File::create(&log).unwrap();
            let child = Command::new(&puma)
                .args([
                    "-b",
                    &format!("tcp://127.0.0.1:{port}"),
                    "-t",
                    "1:4",
                    "-w",
                    "0",
                ])
                .arg(config_ru)
                .current_dir(config_ru.parent().unwrap())
                .stdin(Stdio::null())
                .stdout(log_file.try_clone().unwrap())
                .stderr(log_file)
                .process_group(0)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", puma.display()));
            let pgid = child.id() as i32;
            let mut guard = Puma {
                child: Some(child),
                pgid,
                port,
                log: log.clone(),
                _dir: None,
            };
            let started = Instant::now();
            let mut exited = false;
            while started.elapsed() < Duration::from_secs(30) {
                if exited_unreaped(pgid) {
                    exited = true;
                    break;
                }
                if let Some(line) = probe(port) {
                    if line.starts_with("HTTP/1.1 200") || line.starts_with("HTTP/1.0 200") {
                        guard._dir = Some(dir);
                        return guard;
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            last_log = std::fs::read_to_string(&log).unwrap_or_default();
            drop(guard); // terminates the group
            if !exited {
                panic!("puma on port {port} did not answer 200 within 30 s; its log:\n{last_log}");
            }
            // Exited early: most likely the port was taken in the meantime. Retry.
        }
        panic!("puma failed to start 5 times; last log:\n{last_log}");
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Puma {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // Only our own child's process group is signalled (pgid == its pid, set by
        // process_group(0)), never anything found by name. The leader is not reaped before
        // the final SIGKILL, so its pid (and so the group id) cannot have been reused.
        // SAFETY: plain kill(2) on our child's process group.
        unsafe { libc::kill(-self.pgid, libc::SIGTERM) };
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) && !exited_unreaped(self.pgid) {
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: as above; whatever of the group survived the grace period is killed.
        unsafe { libc::kill(-self.pgid, libc::SIGKILL) };
        let _ = child.wait();
    }
}

/// Has the child `pid` exited? Leaves it a zombie (WNOWAIT) so its pid stays reserved.
fn exited_unreaped(pid: i32) -> bool {
    // SAFETY: a zeroed siginfo_t is a valid out-parameter for waitid(2).
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid on our own child with a valid siginfo_t pointer.
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: si_pid is valid to read after a successful waitid.
    rc == 0 && unsafe { info.si_pid() } != 0
}
