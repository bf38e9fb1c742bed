//! rubyrace's experiment lab: everything between an experiment file and stored results.
//!
//! ```text
//! experiment.toml ─parse─► Experiment ─expand─► [Config] ─schedule(seed)─► [ScheduledTrial]
//!                                                                              │
//!      Store (SQLite + files) ◄── TrialResult ◄── run_trial(TrialSpec) ◄── runner
//! ```
//!
//! The trial is the unit of work: one server configuration started, checked for
//! readiness, warmed up, measured, sampled and stopped, giving one result. `load` sends the
//! HTTP load; this crate knows about Rubies, servers, processes and storage.

pub mod conditions;
pub mod design;
pub mod experiment;
pub mod interleave;
pub mod precision;
pub mod probe;
pub mod readiness;
pub mod runner;
pub mod schedule;
pub mod servers;
pub mod store;
#[cfg(test)]
mod testutil;
pub mod trial;
