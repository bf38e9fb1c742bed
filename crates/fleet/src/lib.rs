//! A fleet: an experiment's blocks spread over many machines by Slurm (docs/fleet.md).
//!
//! - `slurm`: the engine's commands (`sbatch`, `squeue`, `scancel`, `sinfo`, `sacct`);
//! - `probe`: one job per node checks the shared results directory, the binary and the
//!   Rubies before anything is submitted;
//! - `task`: what a node runs, one block in local scratch, written back as a block file;
//! - `controller`: submits, watches, imports, resubmits, cancels.
#![forbid(unsafe_code)]

pub mod controller;
pub mod probe;
pub mod slurm;
pub mod task;
