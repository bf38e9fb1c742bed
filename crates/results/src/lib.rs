//! rubyrace's stored record: what a trial records, and the store that holds it.
//!
//! ```text
//! lab (runs trials) ──► TrialResult ──► store::Store (results.db + trials/NNNNN/) ──► report, export, resume
//! ```
//!
//! - `record`: `TrialResult` (schema `rubyrace.trial/1`) and its parts: the server as it
//!   ran, the derived figures, a script's runs, the environment, an interleaved trial's
//!   slices;
//! - `probe`, `conditions`, `profile`, `services`: the parts recorded by the lab's probe,
//!   its trial conditions, its profilers and its services;
//! - `provenance`: the commit the running binary was built from;
//! - `progress`: a run in progress as its process sees it (`progress.json`, for `watch`);
//! - `bisect`: a bisection's record (`bisect.json`), above one store per decision;
//! - `store`: the SQLite database and the trials' directories, written by a run and read
//!   by the report, `export` and `--resume`.
//!
//! Data only, one to one with docs/results.md: nothing here starts a process or measures
//! anything; `lab` does, and writes through this crate; `report` reads through it.

pub mod bisect;
pub mod conditions;
pub mod probe;
pub mod profile;
pub mod progress;
pub mod provenance;
pub mod record;
pub mod services;
pub mod store;

pub use record::{
    Derived, EnvironmentRecord, InterleavedRecord, LoadHostRecord, Placement, RttRecord,
    ScriptOutcome, ScriptRun, ServerRecord, SliceRecord, TrialIdentity, TrialResult, TrialStatus,
    TRIAL_RESULT_SCHEMA,
};

/// Writes `bytes` to `path` through a temporary file and a rename: a reader sees the
/// whole file or none.
pub fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
}
