//! The open-file limit a load run needs: one descriptor per connection, two per thread.
//! Raised here, at the start of every run, so `rubyrace load`, a trial and an interleaved
//! slice all get it.

use std::io;

use nix::sys::resource::{getrlimit, setrlimit, Resource};

/// Raises the soft open-file limit to what `connections` over `threads` need (up to the
/// hard limit), and refuses a run that cannot have its connections, before any load is
/// sent.
pub fn ensure_open_files(connections: usize, threads: usize) -> io::Result<()> {
    // Each connection is one fd; each thread has an epoll fd and a timerfd; plus stdio,
    // output files and some slack.
    let needed = (connections + 2 * threads + 64) as u64;
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return Ok(());
    };
    if soft >= needed {
        return Ok(());
    }
    if hard < needed {
        return Err(io::Error::other(format!(
            "{connections} connections need about {needed} open files but the hard limit is {hard}; \
             raise it (ulimit -Hn, /etc/security/limits.conf) or use fewer connections"
        )));
    }
    setrlimit(Resource::RLIMIT_NOFILE, needed.max(soft), hard).map_err(|e| {
        io::Error::other(format!(
            "cannot raise the open-file limit to {needed}: {}",
            io::Error::from(e)
        ))
    })
}
