//! A timerfd that wakes an event loop with microsecond precision. epoll's own timeout is in
//! whole milliseconds, which would make open-loop sends up to 1 ms late.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Instant;

pub struct PreciseTimer {
    fd: OwnedFd,
    /// Instant and CLOCK_MONOTONIC differ only by an offset, measured once.
    created: Instant,
    created_mono_ns: u128,
}

fn monotonic_now_ns() -> u128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128
}

impl PreciseTimer {
    pub fn new() -> io::Result<Self> {
        // SAFETY: plain syscall; the returned fd is owned below.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(PreciseTimer {
            // SAFETY: fd was just created and is owned by nobody else.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            created: Instant::now(),
            created_mono_ns: monotonic_now_ns(),
        })
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Makes the fd readable at `at` (once). Re-arming also clears a past expiry, so the
    /// fd never needs to be read.
    pub fn arm_at(&self, at: Instant) -> io::Result<()> {
        let target = self.created_mono_ns + at.saturating_duration_since(self.created).as_nanos();
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (target / 1_000_000_000) as libc::time_t,
                tv_nsec: (target % 1_000_000_000).max(1) as libc::c_long,
            },
        };
        // SAFETY: valid fd and itimerspec; the old value is not requested.
        let rc = unsafe {
            libc::timerfd_settime(
                self.fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}
