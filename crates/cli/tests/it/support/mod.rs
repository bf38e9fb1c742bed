//! Test support for driving the real `rubyrace` binary against real loopback servers, by
//! topic:
//!
//! - `http_server`: [`Server`], a small HTTP/1.1 server whose answers a closure decides;
//! - `binary`: [`rubyrace`] / [`load`], the binary run with a hard deadline, and [`Report`],
//!   `rubyrace load`'s JSON with accessors that fail loudly;
//! - `puma`: [`Puma`], a real Puma in its own process group, killed by its pgid when dropped;
//! - `files`: [`TempDir`], a scratch directory removed when dropped;
//! - `lab`: a results directory and the `rubyrace run` that fills it;
//! - `shared`: fixtures made once per test run and read by many tests, across processes;
//! - `slurm`: a real Slurm cluster (munged, slurmctld, a slurmd per node) for the fleet tests.

pub mod binary;
pub mod files;
pub mod http_server;
pub mod lab;
pub mod puma;
pub mod rng;
pub mod shared;
pub mod slurm;

pub use binary::*;
pub use files::*;
pub use http_server::*;
pub use puma::*;

use std::time::Duration;

/// Every binary run is killed, and its test failed, after this long.
pub const HARD_DEADLINE: Duration = Duration::from_secs(30);

/// The response of the well-behaved server.
pub const HELLO: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
