//! rubyrace's HTTP/1.1 load engine.
//!
//! It sends closed-loop load (each connection sends its next request when the previous
//! response is in) or open-loop load (a constant-rate schedule, latency measured from the
//! intended send time, so free of coordinated omission), over keepalive, `Connection:
//! close` or client-closed connections. One event loop per thread; per-thread HDR
//! histograms merged at the end; errors counted by kind and never dropped.
//!
//! Instead of a URL mix it can walk virtual users through scenarios (`scenario`): steps
//! with variables, a cookie jar per user, values extracted from responses, think times.
//!
//! It knows nothing about experiments, Rubies or servers: `lab` drives it, and the CLI
//! exposes it as `rubyrace load`.

pub mod engine;
pub mod hlog;
pub mod limits;
pub mod mode;
pub mod plan;
pub mod raw;
pub mod report;
pub mod response;
pub mod scenario;
pub mod settings;
pub mod sockets;
pub mod spec;
pub mod stats;
mod timer;
pub mod tls;
pub mod windows;
pub mod wire;

pub use engine::{run, run_in_windows, OpenPeak, RunOutcome};
pub use hdrhistogram::Histogram;
pub use plan::{parse_header, parse_url_mix, PlanError, RequestPlan, RequestTemplate, UrlLine};
pub use raw::RawLog;
pub use report::LoadReport;
pub use settings::{LoadSettings, Setting, SettingsError};
pub use sockets::TimeWait;
pub use spec::{ConnectionMode, LoadSpec, SpecOrigin, StopCondition};
pub use windows::{Window, WindowStats};
