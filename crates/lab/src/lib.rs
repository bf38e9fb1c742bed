//! rubyrace's experiment lab: everything between an experiment file and stored results.
//!
//! ```text
//! experiment.toml ─parse─► Experiment ─expand─► [Config] ─schedule(seed)─► [TrialSpec]
//!                                                                              │
//!              Store (SQLite + files) ◄── TrialResult ◄── run_trial(TrialSpec) ◄┘
//! ```
//!
//! The trial is the unit of work: one server configuration started, checked for
//! readiness, warmed up, measured, sampled and stopped, giving one result. `load` sends the
//! HTTP load; this crate knows about Rubies, servers, processes and storage.

pub mod environment;
pub mod resources;
pub mod rubies;
pub mod servers;
