//! A small HTTP/1.1 server in plain std (a listener thread plus one thread per connection)
//! whose answers are decided per request by a closure returning a [`Reply`]. It records
//! every request it parses (with httparse) and counts the connections it accepts. It binds
//! 127.0.0.1:0 and is stopped and joined when dropped. Also: a closed port, and a listener
//! whose accept queue is full.

#![allow(dead_code, unused_imports)]

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

use super::HELLO;

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

/// Parses one request (head plus Content-Length body) from the front of `buf`, with
/// httparse (the parser the load engine uses for responses).
fn parse_request(buf: &[u8]) -> Parsed {
    let mut slots = [httparse::EMPTY_HEADER; 64];
    let mut request = httparse::Request::new(&mut slots);
    let head_end = match request.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() <= 64 * 1024 => return Parsed::Partial,
        _ => return Parsed::Invalid,
    };
    let (Some(method), Some(path)) = (request.method, request.path) else {
        return Parsed::Invalid;
    };
    let mut headers = Vec::new();
    for h in request.headers.iter() {
        let Ok(value) = std::str::from_utf8(h.value) else {
            return Parsed::Invalid;
        };
        headers.push((h.name.to_string(), value.trim().to_string()));
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
    if buf.len() < head_end + length {
        return Parsed::Partial;
    }
    Parsed::Complete {
        method: method.to_string(),
        path: path.to_string(),
        headers,
        body: buf[head_end..head_end + length].to_vec(),
        used: head_end + length,
    }
}

/// A port on which nothing listens (bound, then released).
pub fn closed_port() -> u16 {
    testkit::free_port()
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
