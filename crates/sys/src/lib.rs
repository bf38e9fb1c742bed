//! The Linux layer under rubyrace: processes it starts and supervises (process groups,
//! reaping, orphans, deaths), the process tree's resources, the listeners of a port and
//! the machine's noise read from `/proc`, CPU sets and pinning, and what the machine and
//! its environment are. It knows nothing of experiments or trials.

pub mod cpus;
pub mod environment;
pub mod git;
pub mod listeners;
pub mod noise;
pub mod process;
pub mod registry;
pub mod resources;
