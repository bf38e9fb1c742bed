//! The rules that decide without a person, each with its simulations: `precision` (the
//! adaptive run's stopping rule: when every comparison's interval is narrow enough),
//! `gate` (`rubyrace check`'s verdict on a change, with its planned looks), `locate`
//! (`rubyrace bisect`'s model of where a change is and its k-section search), `bisect`
//! (the step-by-step search before it, kept as the baseline the simulations compare with),
//! and `schedule` (the order of a run's blocks).
//!
//! They depend on `stats` only (and serde, strum and the seeded RNG): none reads an
//! experiment file, the store or a process, so a statistician changing a rule changes this
//! crate, and its tests (reference values and seeded simulations of false positives,
//! coverage and power) are beside it. `experiment` re-exports each module under its old
//! path (`experiment::precision`, ...).
#![forbid(unsafe_code)]

pub mod bisect;
pub mod gate;
pub mod locate;
pub mod precision;
pub mod schedule;

pub use crate::schedule::Order;
