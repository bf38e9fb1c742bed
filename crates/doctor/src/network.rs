//! The network and limits: ephemeral ports, `tcp_tw_reuse`, the open-file limit.

use nix::sys::resource::{getrlimit, Resource, RLIM_INFINITY};

use crate::finding::{Finding, Status};
use crate::readers::read_trimmed;
use crate::{MIN_EPHEMERAL_PORTS, MIN_OPEN_FILES, TIME_WAIT_SECONDS};

/// `ip_local_port_range` ("32768\t60999") as (first, last).
pub fn parse_port_range(text: &str) -> Option<(u32, u32)> {
    let mut words = text.split_whitespace();
    let first: u32 = words.next()?.parse().ok()?;
    let last: u32 = words.next()?.parse().ok()?;
    if words.next().is_some() || first > last || last > 65535 {
        return None;
    }
    Some((first, last))
}

/// Ports in a range, and the new client-closed connections per second they sustain when
/// each port waits [`TIME_WAIT_SECONDS`] before reuse.
pub fn ports_capacity((first, last): (u32, u32)) -> (u32, u32) {
    let ports = last - first + 1;
    (ports, ports / TIME_WAIT_SECONDS)
}

pub(crate) fn ports_finding() -> Finding {
    let Some(range) =
        read_trimmed("/proc/sys/net/ipv4/ip_local_port_range").and_then(|t| parse_port_range(&t))
    else {
        return Finding::new(
            "ports",
            Status::Info,
            "not visible (/proc/sys/net/ipv4/ip_local_port_range)",
            "",
        );
    };
    let (ports, per_second) = ports_capacity(range);
    let value = format!(
        "{}-{} ({ports} ephemeral ports: about {per_second} new connections/s without port \
         reuse, each port in TIME_WAIT for {TIME_WAIT_SECONDS} s)",
        range.0, range.1
    );
    if ports < MIN_EPHEMERAL_PORTS {
        Finding::new(
            "ports",
            Status::Warn,
            value,
            format!(
                "with --client-close (and --close-header) each request takes a port for \
                 {TIME_WAIT_SECONDS} s; a small range runs out and shows as connect errors: \
                 `sudo sysctl net.ipv4.ip_local_port_range=\"15000 65000\"`"
            ),
        )
    } else {
        Finding::ok("ports", value)
    }
}

pub(crate) fn tcp_tw_reuse_finding() -> Finding {
    let Some(v) = read_trimmed("/proc/sys/net/ipv4/tcp_tw_reuse") else {
        return Finding::new(
            "tcp_tw_reuse",
            Status::Info,
            "not visible (/proc/sys/net/ipv4/tcp_tw_reuse)",
            "",
        );
    };
    match v.as_str() {
        "1" => Finding::ok(
            "tcp_tw_reuse",
            "1 (TIME_WAIT ports reused for every connection)",
        ),
        "2" => Finding::ok(
            "tcp_tw_reuse",
            "2 (TIME_WAIT ports reused for loopback connections only, the default)",
        ),
        _ => Finding::new(
            "tcp_tw_reuse",
            Status::Info,
            format!("{v} (TIME_WAIT ports are not reused)"),
            "with --client-close the client keeps every closed connection's port in TIME_WAIT \
             for 60 s, so it can open at most ports/60 connections per second (see ports) \
             before connect fails; `sudo sysctl net.ipv4.tcp_tw_reuse=2` (loopback only) lets \
             it reuse them; keepalive runs are not affected",
        ),
    }
}

pub(crate) fn open_files_finding() -> Finding {
    let (soft, hard) = match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok(limits) => limits,
        Err(e) => {
            return Finding::new(
                "open_files",
                Status::Info,
                format!("not visible: {}", std::io::Error::from(e)),
                "",
            )
        }
    };
    let show = |v: u64| {
        if v == RLIM_INFINITY {
            "unlimited".to_string()
        } else {
            v.to_string()
        }
    };
    let value = format!("soft {}, hard {}", show(soft), show(hard));
    let low = |v: u64| v != RLIM_INFINITY && v < MIN_OPEN_FILES;
    if low(hard) {
        Finding::new(
            "open_files",
            Status::Warn,
            value,
            format!(
                "every connection is an open file in the load generator and in the server; \
                 the hard limit caps both below {MIN_OPEN_FILES}: raise it in \
                 /etc/security/limits.conf (nofile) or the service's LimitNOFILE"
            ),
        )
    } else if low(soft) {
        Finding::new(
            "open_files",
            Status::Warn,
            value,
            format!(
                "every connection is an open file in the load generator and in the server; \
                 rubyrace load raises its own soft limit when it needs to, but the servers \
                 inherit this one: `ulimit -n {}` in the shell before running",
                show(hard)
            ),
        )
    } else {
        Finding::ok("open_files", value)
    }
}
