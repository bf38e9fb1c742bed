//! Sockets left in TIME_WAIT, counted from /proc/net/tcp and /proc/net/tcp6 when a run
//! ends. Every TCP close leaves a TIME_WAIT socket (60 s on Linux) on the side that closed
//! first. On the client's side each one holds a local port towards the target; when the
//! local port range is used up, connects fail with EADDRNOTAVAIL. So the count explains
//! connects that failed, or will fail in the next run, where the load engine alone only
//! sees an errno.

use std::fs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The TCP state number of TIME_WAIT in /proc/net/tcp (`st` column, hexadecimal).
const TIME_WAIT_STATE: &str = "06";

/// Sockets in TIME_WAIT involving the target, in this network namespace, whichever
/// process (or earlier run) closed them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TimeWait {
    /// Sockets whose remote end is the target: local ports held by closed connections
    /// to it. On loopback Linux may reuse them for new connects (`net.ipv4.tcp_tw_reuse`).
    pub local_ports: u64,
    /// Sockets whose local end is the target: the server's side of connections the server
    /// closed first, when the server runs on this machine.
    pub at_target: u64,
    /// `net.ipv4.ip_local_port_range`: the ports connects draw from (both ends included).
    pub local_port_range: Option<(u16, u16)>,
}

/// Counts the sockets in TIME_WAIT to and at `target`; `None` when /proc/net/tcp cannot
/// be read (not Linux, or /proc not mounted).
pub fn time_wait(target: SocketAddr) -> Option<TimeWait> {
    let mut counts = TimeWait {
        local_port_range: local_port_range(),
        ..TimeWait::default()
    };
    let mut read_any = false;
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = fs::read_to_string(table) else {
            continue;
        };
        read_any = true;
        count_time_wait(&text, target, &mut counts);
    }
    read_any.then_some(counts)
}

/// Adds the TIME_WAIT sockets of one /proc/net/tcp{,6} table to `counts`.
fn count_time_wait(table: &str, target: SocketAddr, counts: &mut TimeWait) {
    let target = normalized(target);
    // Header line first; then "sl local_address rem_address st ...".
    for line in table.lines().skip(1) {
        let mut fields = line.split_whitespace().skip(1);
        let (Some(local), Some(remote), Some(state)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if state != TIME_WAIT_STATE {
            continue;
        }
        if parse_proc_addr(remote) == Some(target) {
            counts.local_ports += 1;
        }
        if parse_proc_addr(local) == Some(target) {
            counts.at_target += 1;
        }
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is (a dual-stack server's sockets
/// show IPv4 clients that way in /proc/net/tcp6).
fn normalized(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), addr.port()),
            None => addr,
        },
        IpAddr::V4(_) => addr,
    }
}

/// Parses `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6). The kernel prints the
/// address as 32-bit words in host byte order.
fn parse_proc_addr(text: &str) -> Option<SocketAddr> {
    let (ip_hex, port_hex) = text.split_once(':')?;
    let port = u16::from_str_radix(port_hex, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        let hex = ip_hex.get(i * 8..i * 8 + 8)?;
        Some(u32::from_str_radix(hex, 16).ok()?.to_ne_bytes())
    };
    let ip = match ip_hex.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut octets = [0u8; 16];
            for i in 0..4 {
                octets[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(octets))
        }
        _ => return None,
    };
    Some(normalized(SocketAddr::new(ip, port)))
}

/// `net.ipv4.ip_local_port_range` (it applies to IPv6 too).
fn local_port_range() -> Option<(u16, u16)> {
    let text = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut ports = text.split_whitespace().map(|p| p.parse::<u16>().ok());
    Some((ports.next()??, ports.next()??))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_addresses_parse_in_host_byte_order() {
        if cfg!(target_endian = "little") {
            assert_eq!(
                parse_proc_addr("0100007F:1F90"),
                Some("127.0.0.1:8080".parse().unwrap())
            );
            assert_eq!(
                parse_proc_addr("00000000000000000000000001000000:0050"),
                Some("[::1]:80".parse().unwrap())
            );
            // ::ffff:127.0.0.1, as a dual-stack listener's sockets show an IPv4 client.
            assert_eq!(
                parse_proc_addr("0000000000000000FFFF00000100007F:0050"),
                Some("127.0.0.1:80".parse().unwrap())
            );
        }
        assert_eq!(parse_proc_addr("zz:1"), None);
        assert_eq!(parse_proc_addr("0100007F"), None);
    }

    #[test]
    fn only_time_wait_sockets_of_the_target_count() {
        if !cfg!(target_endian = "little") {
            return;
        }
        let table = "  sl  local_address rem_address   st tx_queue rx_queue\n\
            0: 0100007F:D431 0100007F:1F90 06 00000000:00000000\n\
            1: 0100007F:D432 0100007F:1F90 06 00000000:00000000\n\
            2: 0100007F:D433 0100007F:1F90 01 00000000:00000000\n\
            3: 0100007F:1F90 0100007F:D434 06 00000000:00000000\n\
            4: 0100007F:D435 0100007F:1F91 06 00000000:00000000\n";
        let mut counts = TimeWait::default();
        count_time_wait(table, "127.0.0.1:8080".parse().unwrap(), &mut counts);
        assert_eq!((counts.local_ports, counts.at_target), (2, 1));
    }
}
