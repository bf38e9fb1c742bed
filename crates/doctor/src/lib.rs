//! `rubyrace doctor`: what on this machine makes benchmarks noisy or wrong, and what to do
//! about each finding.
//!
//! [`examine`] looks at the CPUs (count, affinity, pinning, frequency governor, turbo), the
//! load and the processes using CPU right now, swap, ASLR, the ephemeral ports and
//! `tcp_tw_reuse` (for the close modes), the open-file limit, `perf`, the Rubies and the
//! servers they can load, the allocator libraries and `wrk`. Each check gives one
//! [`Finding`]: a name, a [`Status`], what was seen and what to do. Nothing is changed on
//! the machine: files under /proc and /sys are read, a few programs are run from an argv
//! (never a shell) with a timeout (`ruby`, `perf --version`, `wrk -v`, `ldconfig -p`), and
//! the process's own CPU affinity is set to the mask it already has, to see whether it can
//! be set. A missing file is a finding ("not visible"), never an error.
//!
//! The [`Report`] is serializable (schema [`SCHEMA`]) so a run can keep the doctor's
//! findings next to its trials. A whole examination takes about 1 s: 0.5 s of CPU sampling
//! ([`BUSY_SAMPLE`]) and the Ruby queries; [`Options::quick`] skips both. docs/doctor.md
//! describes every check and threshold.
//!
//! Modules: `report` (findings and the checks run), and one per area: `cpu`, `busy`,
//! `kernel`, `network`, `programs`, `ruby`; `readers` for the files they read; `render`
//! for the text.
#![forbid(unsafe_code)]

mod busy;
mod cpu;
mod finding;
mod kernel;
mod network;
mod programs;
mod readers;
mod render;
mod report;
mod ruby;
#[cfg(test)]
mod tests;

pub use busy::BusyProcess;
pub use cpu::summarize_governors;
pub use finding::{Finding, Status};
pub use network::{parse_port_range, ports_capacity};
pub use programs::newest_postgres_bin;
pub use readers::{format_cpu_list, parse_cpu_list};
pub use report::{examine, examine_with, Options, Report, CHECKS};

use std::time::Duration;

/// The schema name of a [`Report`] as JSON.
pub const SCHEMA: &str = "rubyrace.doctor/1";

/// Fewer usable CPUs than this: the load generator and the server share a core.
pub const MIN_USABLE_CPUS: u32 = 2;
/// A 1-minute load average above this many times the usable CPUs is a warning.
pub const LOAD_PER_CPU_WARN: f64 = 0.5;
/// The governor every CPU should have.
pub const WANTED_GOVERNOR: &str = "performance";
/// How long the CPU use of every process is sampled.
pub const BUSY_SAMPLE: Duration = Duration::from_millis(500);
/// A process using at least this much of one CPU (in %) during the sample is listed.
pub const BUSY_LIST_PERCENT: f64 = 1.0;
/// A process using at least this much of one CPU (in %) during the sample is a warning.
pub const BUSY_WARN_PERCENT: f64 = 10.0;
/// How many busy processes are listed by default.
pub const BUSY_SHOWN: usize = 5;
/// An ephemeral port range smaller than this is a warning (the Linux default, 32768-60999,
/// has 28232 ports).
pub const MIN_EPHEMERAL_PORTS: u32 = 28_000;
/// How long a port stays in TIME_WAIT on Linux (fixed in the kernel: `TCP_TIMEWAIT_LEN`).
pub const TIME_WAIT_SECONDS: u32 = 60;
/// A soft open-file limit below this is a warning.
pub const MIN_OPEN_FILES: u64 = 4096;
/// `perf_event_paranoid` above this keeps unprivileged users from every perf counter.
pub const MAX_PERF_PARANOID: i64 = 2;
/// How long each program the doctor runs (`ruby`, `perf`, `wrk`) may take.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the kernel's CPU files are.
const CPU_SYS: &str = "/sys/devices/system/cpu";
