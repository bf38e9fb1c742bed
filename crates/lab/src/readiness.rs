//! Readiness: a server is ready when a real GET on the readiness path returns 2xx. A
//! refused connection means "not yet"; a 503 means "still booting"; any other status,
//! an answer that is not HTTP, or a server that exits fails the trial at once; so does a
//! 2xx when a process outside the server's tree listens on its address too.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use load::response::ResponseParser;
use load::tls::TlsClient;

use sys::listeners::Listeners;
use sys::process::{describe_status, Supervised};

/// A free loopback port for a server rubyrace starts ([`free_port_on`]).
pub fn free_port() -> std::io::Result<u16> {
    free_port_on(std::net::Ipv4Addr::LOCALHOST.into())
}

/// The lowest port [`free_port_on`] picks from, above the usual services' (PostgreSQL 5432,
/// Redis 6379, 8080, ...).
pub const PICKED_PORTS_FROM: u16 = 16_384;

/// A free port on `host`, an address of this machine, picked at random below the kernel's
/// ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`, 32768 by default) and found
/// free by binding it. A port the kernel hands out to a process that binds port 0 (a test's
/// server, another tool) or to an outgoing connection is always in that range, so none can
/// take this one between the pick and the server's bind. When it was bound to port 0 and
/// given back (before 2026-11-30), a test server beside a run took such a port: the run's
/// Puma failed with EADDRINUSE while its readiness check had been answered by the other
/// server, which then got the run's load. Other rubyrace runs pick from the same range at
/// random; the one that binds second fails its trial by the server's own error. Where the
/// range leaves no room below it, the kernel's choice (port 0) is used.
pub fn free_port_on(host: std::net::IpAddr) -> std::io::Result<u16> {
    let low = ephemeral_low().unwrap_or(32_768);
    if low > PICKED_PORTS_FROM + 1024 {
        let span = u64::from(low - PICKED_PORTS_FROM);
        for _ in 0..64 {
            let draw = getrandom::u64().map_err(|e| std::io::Error::other(e.to_string()))?;
            let port = PICKED_PORTS_FROM + (draw % span) as u16;
            match TcpListener::bind((host, port)) {
                Ok(_) => return Ok(port),
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => continue,
                Err(e) => return Err(e),
            }
        }
    }
    Ok(TcpListener::bind((host, 0))?.local_addr()?.port())
}

/// The first port of the kernel's ephemeral range.
fn ephemeral_low() -> Option<u16> {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    range.split_whitespace().next()?.parse().ok()
}

/// Time between attempts while the server is booting.
const POLL: Duration = Duration::from_millis(50);
/// Longest wait for one answer.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, PartialEq)]
pub enum Readiness {
    Ready { after: Duration },
    Failed(String),
    Interrupted,
}

/// What one GET produced.
#[derive(Debug, PartialEq)]
pub enum Probe {
    /// Nothing is listening yet.
    Refused,
    /// The connection was accepted but no complete answer came within the attempt's time.
    NoAnswer,
    Status(u16),
    /// The server answered with something that is not an HTTP response, or closed early.
    Garbage(String),
}

/// One GET `path` with `Connection: close`, waiting at most `limit` for the answer.
pub fn probe(addr: SocketAddr, path: &str, limit: Duration, tls: Option<&TlsClient>) -> Probe {
    let limit = limit.max(Duration::from_millis(10));
    let stream = match TcpStream::connect_timeout(&addr, limit) {
        Ok(s) => s,
        Err(_) => return Probe::Refused,
    };
    let _ = stream.set_read_timeout(Some(limit));
    let _ = stream.set_write_timeout(Some(limit));
    match tls {
        None => exchange(stream, addr, path),
        Some(client) => match load::tls::blocking_stream(client, stream) {
            Ok(s) => exchange(s, addr, path),
            Err(e) => Probe::Garbage(format!("TLS: {e}")),
        },
    }
}

/// Sends the readiness GET on `stream` and reads the answer's status.
fn exchange(mut stream: impl Read + Write, addr: SocketAddr, path: &str) -> Probe {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nUser-Agent: rubyrace-readiness\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return Probe::Refused;
    }
    let mut parser = ResponseParser::new();
    parser.expect(false);
    let mut buf = vec![0u8; 16 * 1024];
    let mut pending: Vec<u8> = Vec::new();
    loop {
        let n = match stream.read(&mut buf) {
            Ok(n) => n,
            // A signal (a child's SIGCHLD) interrupted the read: nothing was read, read again.
            // Taken for garbage, it failed a resumed run's trial in CI (2026-11-30).
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset && pending.is_empty() => {
                return Probe::Refused
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Probe::NoAnswer
            }
            Err(e) => return Probe::Garbage(format!("reading the answer failed: {e}")),
        };
        if n == 0 {
            return match parser.finish_at_eof() {
                Some(done) => Probe::Status(done.status),
                None if pending.is_empty() => Probe::Refused,
                None => Probe::Garbage(format!("closed after {:?}", preview(&pending))),
            };
        }
        pending.extend_from_slice(&buf[..n]);
        match parser.feed(&pending) {
            Ok((_, Some(done))) => return Probe::Status(done.status),
            Ok((used, None)) => {
                pending.drain(..used);
            }
            Err(e) => return Probe::Garbage(format!("{e}: {:?}", preview(&pending))),
        }
    }
}

fn preview(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(60)]);
    text.into_owned()
}

/// Polls until the server is ready, fails, exits, `timeout` passes or `interrupt` is set.
pub fn wait_ready(
    addr: SocketAddr,
    path: &str,
    tls: Option<&TlsClient>,
    timeout: Duration,
    server: &mut Supervised,
    interrupt: &AtomicBool,
) -> Readiness {
    let started = Instant::now();
    loop {
        if interrupt.load(Ordering::SeqCst) {
            return Readiness::Interrupted;
        }
        if let Some(status) = server.exited() {
            return Readiness::Failed(format!(
                "the server exited ({}) before it was ready",
                describe_status(status)
            ));
        }
        let remaining = timeout.saturating_sub(started.elapsed());
        let last = match probe(addr, path, remaining.min(ATTEMPT_TIMEOUT), tls) {
            Probe::Status(s) if (200..300).contains(&s) => {
                return match answered_by_another(addr, server.pid()) {
                    Some(others) => Readiness::Failed(format!(
                        "GET {path} on {addr} was answered, but not by the server alone: {others}"
                    )),
                    None => Readiness::Ready {
                        after: started.elapsed(),
                    },
                };
            }
            Probe::Status(503) => Probe::Status(503),
            Probe::Status(s) => {
                return Readiness::Failed(format!(
                    "the readiness check GET {path} answered {s}, not 2xx"
                ))
            }
            Probe::Garbage(what) => {
                return Readiness::Failed(format!(
                    "the readiness check GET {path} got an answer that is not HTTP ({what})"
                ))
            }
            other => other,
        };
        if started.elapsed() >= timeout {
            let state = match last {
                Probe::Status(s) => format!("it still answered {s}"),
                Probe::NoAnswer => {
                    format!("{addr} accepted the connection but never answered GET {path}")
                }
                _ => format!("nothing answered on {addr}"),
            };
            return Readiness::Failed(format!(
                "the server was not ready after {}: {state}",
                humantime::format_duration(timeout)
            ));
        }
        std::thread::sleep(POLL);
    }
}

/// Whether processes outside the server's tree (`pid` and its process group) listen on
/// `addr` too: `Some` with who they are. Without it, a server that took the port between
/// rubyrace's pick and the server's bind would answer the readiness check and then be
/// loaded as if it were the one started (seen in CI, 2026-11-29, between two tests' servers
/// before ports were picked below the ephemeral range). When the tables cannot be read, or
/// hold no listener on `addr` (a server in another network namespace), nothing is said.
fn answered_by_another(addr: SocketAddr, pid: i32) -> Option<String> {
    match sys::listeners::listeners(addr, pid, pid) {
        Ok(Listeners::Others { owners, shared }) => {
            Some(Listeners::describe_others(&owners, shared))
        }
        Ok(Listeners::Tree | Listeners::NotFound) | Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    /// The picked ports lie below the kernel's ephemeral range (where a process binding
    /// port 0 or connecting out gets its port), are free, and are not one port every time.
    #[test]
    fn picked_ports_are_free_and_below_the_ephemeral_range() {
        let low = super::ephemeral_low().expect("ip_local_port_range");
        let host = std::net::Ipv4Addr::LOCALHOST.into();
        let ports: Vec<u16> = (0..20)
            .map(|_| super::free_port_on(host).unwrap())
            .collect();
        for &port in &ports {
            assert!(
                (super::PICKED_PORTS_FROM..low).contains(&port),
                "{port} is not in {}..{low}",
                super::PICKED_PORTS_FROM
            );
            std::net::TcpListener::bind((host, port)).expect("the picked port is free");
        }
        let distinct: std::collections::BTreeSet<_> = ports.iter().collect();
        assert!(distinct.len() > 10, "{ports:?}");
    }

    use super::*;
    use std::net::TcpListener;

    const T: Duration = Duration::from_secs(2);

    fn serve_once(answer: &'static [u8]) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            if let Ok((mut s, _)) = listener.accept() {
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf);
                let _ = s.write_all(answer);
            }
        });
        addr
    }

    #[test]
    fn probes_tell_statuses_garbage_and_silence_apart() {
        let ok = serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        assert_eq!(probe(ok, "/", T, None), Probe::Status(200));
        let err = serve_once(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(probe(err, "/", T, None), Probe::Status(500));
        let garbage = serve_once(b"SSH-2.0-OpenSSH_9.2\r\n");
        assert!(matches!(probe(garbage, "/", T, None), Probe::Garbage(_)));
        let closed = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        assert_eq!(probe(closed, "/", T, None), Probe::Refused);
    }
}
