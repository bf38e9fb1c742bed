//! rubyrace's lab: from a planned trial to stored results.
//!
//! ```text
//! experiment (file → [Config] → schedule) ──► runner ──► run_trial(TrialSpec) ──► TrialResult ──► Store
//!                                                └─► run_interleaved_block (all servers of a block up at once)
//! ```
//!
//! The trial is the unit of work: one server configuration started, checked for
//! readiness, warmed up, measured, sampled and stopped, giving one result. `load` sends the
//! HTTP load, `sys` supervises the processes and reads /proc, `rubies` knows the Rubies,
//! `doctor` examines the machine when a run starts; this crate puts them together and
//! stores what came out. `bisect` runs `rubyrace bisect`'s search, round by round, over
//! the runner.
#![forbid(unsafe_code)]

pub mod bisect;
pub mod certificate;
pub mod checkouts;
pub mod conditions;
pub mod interleave;
pub mod live;
pub mod phase;
pub mod probe;
pub mod profile;
pub mod readiness;
pub mod remote_load;
pub mod runner;
pub mod services;
pub mod trial;
