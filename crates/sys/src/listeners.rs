//! Who listens on a TCP address: the listening sockets of `/proc/net/tcp` and `tcp6`, and
//! the processes whose file descriptors hold them. A trial asks it once its server answers
//! the readiness check, so that an answer from another process's server on the same port
//! (one that took the port between rubyrace's pick and the server's bind) is never taken
//! for the server's.

use std::collections::BTreeSet;
use std::io;
use std::net::{IpAddr, SocketAddr};

use procfs::net::TcpState;
use procfs::process::{FDTarget, Process};

use crate::resources::tree_pids;

/// Whose listening sockets a TCP address has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listeners {
    /// Every listening socket on it is held by the server's process tree.
    Tree,
    /// Some are held by processes outside the tree (pid and command line of each that could
    /// be read; empty when none could): alone (`shared` false), or beside the tree's own
    /// (a port shared with SO_REUSEPORT, so connections go to either).
    Others {
        owners: Vec<(i32, String)>,
        shared: bool,
    },
    /// No listening socket on it is in the tables (a server in another network namespace,
    /// or one that closed it again): nothing to tell.
    NotFound,
}

impl Listeners {
    /// A sentence for a trial's reason: who listens besides the server.
    pub fn describe_others(owners: &[(i32, String)], shared: bool) -> String {
        let who = if owners.is_empty() {
            "a process rubyrace cannot see".to_string()
        } else {
            owners
                .iter()
                .map(|(pid, cmd)| format!("pid {pid} ({cmd})"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if shared {
            format!("{who} listens on it as well as the server")
        } else {
            format!("{who} listens on it, and no process of the server does")
        }
    }
}

/// Whose listening sockets `addr` has: those on its port bound to its IP or to the
/// unspecified address, held by the tree of `root` (with process group `pgid`, as
/// [`tree_pids`] lists it) or by other processes.
pub fn listeners(addr: SocketAddr, root: i32, pgid: i32) -> io::Result<Listeners> {
    let wanted = listening_inodes(addr)?;
    if wanted.is_empty() {
        return Ok(Listeners::NotFound);
    }
    let mut held_by_tree = BTreeSet::new();
    for pid in tree_pids(root, pgid)? {
        held_by_tree.extend(socket_inodes(pid).intersection(&wanted).copied());
    }
    let others: BTreeSet<u64> = wanted.difference(&held_by_tree).copied().collect();
    if others.is_empty() {
        return Ok(Listeners::Tree);
    }
    Ok(Listeners::Others {
        owners: owners_of(&others),
        shared: !held_by_tree.is_empty(),
    })
}

/// The inodes of the listening sockets on `addr`'s port bound to its IP or to the
/// unspecified address (an IPv6 socket's v4-mapped address counts as the IPv4 one).
fn listening_inodes(addr: SocketAddr) -> io::Result<BTreeSet<u64>> {
    let mut entries = procfs::net::tcp().map_err(to_io)?;
    // A kernel without IPv6 has no tcp6 table.
    entries.extend(procfs::net::tcp6().unwrap_or_default());
    let matches = |local: SocketAddr| {
        let ip = match local.ip() {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        };
        local.port() == addr.port() && (ip == addr.ip() || ip.is_unspecified())
    };
    Ok(entries
        .into_iter()
        .filter(|e| e.state == TcpState::Listen && matches(e.local_address))
        .map(|e| e.inode)
        .collect())
}

/// The socket inodes `pid`'s file descriptors hold (none when it is gone or unreadable).
fn socket_inodes(pid: i32) -> BTreeSet<u64> {
    let Ok(fds) = Process::new(pid).and_then(|p| p.fd()) else {
        return BTreeSet::new();
    };
    fds.flatten()
        .filter_map(|fd| match fd.target {
            FDTarget::Socket(inode) => Some(inode),
            _ => None,
        })
        .collect()
}

/// The processes holding any of `inodes`, with their command lines: every process whose
/// descriptors can be read (another user's cannot, unless rubyrace runs as root).
fn owners_of(inodes: &BTreeSet<u64>) -> Vec<(i32, String)> {
    let Ok(all) = procfs::process::all_processes() else {
        return Vec::new();
    };
    all.flatten()
        .filter(|p| !socket_inodes(p.pid).is_disjoint(inodes))
        .map(|p| (p.pid, crate::process::cmdline(p.pid)))
        .collect()
}

fn to_io(e: procfs::ProcError) -> io::Error {
    io::Error::other(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::process::{Command, Stdio};

    /// This process's own listener is its tree's; a child's listener on the same port seen
    /// from another tree is someone else's, named by its pid; a port nobody listens on has
    /// no listener.
    #[test]
    fn a_listener_is_told_apart_by_whose_tree_holds_it() {
        let me = std::process::id() as i32;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        assert_eq!(listeners(addr, me, 0).unwrap(), Listeners::Tree);

        // A Ruby child listening on a port of its own, seen from a tree it is not in
        // (pid 1's, with no process group): the child is named.
        let mut child = Command::new("ruby")
            .args([
                "-rsocket",
                "-e",
                "s = TCPServer.new('127.0.0.1', 0); puts s.addr[1]; STDOUT.flush; sleep 30",
            ])
            .stdout(Stdio::piped())
            .spawn()
            .expect("ruby");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let port: u16 = line.trim().parse().unwrap();
        let theirs = SocketAddr::from(([127, 0, 0, 1], port));
        let seen = listeners(theirs, i32::MAX, 0);
        let from_its_parent = listeners(theirs, me, 0);
        let _ = child.kill();
        let _ = child.wait();
        match seen.unwrap() {
            Listeners::Others { owners, shared } => {
                assert!(!shared);
                assert_eq!(owners.len(), 1, "{owners:?}");
                assert_eq!(owners[0].0, child.id() as i32);
                assert!(owners[0].1.contains("TCPServer"), "{owners:?}");
            }
            other => panic!("{other:?}"),
        }
        // From the tree it is in (its parent's), it is the tree's.
        assert_eq!(from_its_parent.unwrap(), Listeners::Tree);

        drop(listener);
        assert_eq!(listeners(addr, me, 0).unwrap(), Listeners::NotFound);
    }

    #[test]
    fn others_are_described_by_pid_and_command() {
        let owners = vec![(42, "puma 6.4 (tcp://127.0.0.1:20000)".to_string())];
        assert_eq!(
            Listeners::describe_others(&owners, false),
            "pid 42 (puma 6.4 (tcp://127.0.0.1:20000)) listens on it, and no process of the server does"
        );
        assert_eq!(
            Listeners::describe_others(&[], true),
            "a process rubyrace cannot see listens on it as well as the server"
        );
    }
}
