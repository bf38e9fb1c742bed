//! The open-file limit a load run needs: one descriptor per connection, two per thread.
//! Raised here, at the start of every run, so `rubyrace load`, a trial and an interleaved
//! slice all get it.

use std::io;

/// Raises the soft open-file limit to what `connections` over `threads` need (up to the
/// hard limit), and refuses a run that cannot have its connections, before any load is
/// sent.
pub fn ensure_open_files(connections: usize, threads: usize) -> io::Result<()> {
    // Each connection is one fd; each thread has an epoll fd and a timerfd; plus stdio,
    // output files and some slack.
    let needed = (connections + 2 * threads + 64) as libc::rlim_t;
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the valid struct passed.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 || limit.rlim_cur >= needed
    {
        return Ok(());
    }
    if limit.rlim_max < needed {
        return Err(io::Error::other(format!(
            "{connections} connections need about {needed} open files but the hard limit is {}; \
             raise it (ulimit -Hn, /etc/security/limits.conf) or use fewer connections",
            limit.rlim_max
        )));
    }
    let raised = libc::rlimit {
        rlim_cur: needed.max(limit.rlim_cur),
        rlim_max: limit.rlim_max,
    };
    // SAFETY: setrlimit reads the valid struct passed.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        return Err(io::Error::other(format!(
            "cannot raise the open-file limit to {needed}: {}",
            io::Error::last_os_error()
        )));
    }
    Ok(())
}
