//! The experiment file: parsing, validation and matrix expansion.
//!
//! An experiment file (TOML, documented in docs/experiment.md) names the Rubies, the base
//! settings of every configuration, the matrix axes, explicit configurations and exclusions.
//! Parsing walks the file with its source spans, so every mistake is reported with the file,
//! line and column, the key, what was expected and a "did you mean" suggestion; all mistakes
//! are collected and reported together (never one per attempt), none is followed by errors
//! that only repeat it, and no key is ever ignored or silently replaced. The result is an
//! `Experiment`: run-level settings plus the expanded, labelled list of `Config`s, and the
//! defaults the file relies on, which `rubyrace run` names before it runs anything.
//!
//! Modules, in the order a file goes through them: `settings` (the keys), `parse` (the
//! TOML walk), `matrix` (configurations and labels), `resolve` (each configuration's
//! settings), `read` (the pipeline, from file to `Experiment`), with `model` (the result) and
//! `error`; and what the run needs besides: `design`, `conditions`, `servers`. The rules
//! that decide without a person (`precision`, `gate`, `locate`, `bisect`, `schedule`) are
//! the `rules` crate's, re-exported here under their old paths.
#![forbid(unsafe_code)]

pub mod conditions;
pub mod design;
mod error;
pub mod fleet;
pub mod gemfile;
mod matrix;
mod model;
mod parse;
mod read;
mod resolve;
pub mod servers;
pub mod services;
mod settings;
pub mod starter;

pub use error::{ExperimentError, ExperimentErrors};
pub use model::{
    estimated_block_time, AppCommit, AppCommitError, Config, ConfigSettings, Experiment, Profiler,
    RubyCommit, RubyDef, ScriptSettings, Workload, BUNDLED_APPS, DEFAULT_PROFILE_RATE_HZ,
    PROFILER_NAMES, YJIT_PERF,
};
pub use read::cached_ruby;
pub use rules::Order;
pub use rules::{bisect, gate, locate, precision, schedule};
pub use settings::{did_you_mean, MAX_PROFILE_RATE_HZ, RUBY_ALL};

#[cfg(test)]
mod tests;
