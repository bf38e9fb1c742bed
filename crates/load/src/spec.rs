//! What a load run should do: the target, the load model, the connection mode and the
//! stop condition. A `LoadSpec` is plain data; `engine::run` carries it out.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub use crate::mode::ConnectionMode;
use crate::plan::RequestPlan;
use crate::scenario::ScenarioSet;

/// A scenario run: the scenarios, and what every request of them carries.
#[derive(Debug)]
pub struct ScenarioRun {
    pub set: ScenarioSet,
    /// The Host header.
    pub host: String,
    /// The run's own headers (`-H`), sent before each step's.
    pub headers: Vec<(String, String)>,
}

/// When the measured phase ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum StopCondition {
    /// Measure for this long after the warmup.
    Duration(Duration),
    /// Measure until this many requests have been attempted (after the warmup).
    Requests(u64),
}

/// Everything the engine needs for one run.
#[derive(Clone, Debug)]
pub struct LoadSpec {
    /// Resolved address of the target.
    pub addr: SocketAddr,
    /// The request(s) to send, pre-serialized.
    pub plan: RequestPlan,
    pub threads: usize,
    pub connections: usize,
    pub mode: ConnectionMode,
    /// Open-loop target in requests per second across all connections; `None` is closed loop.
    pub rate: Option<f64>,
    /// Requests kept in flight per connection.
    pub pipeline: usize,
    /// A request without a complete response after this long is aborted.
    pub timeout: Duration,
    /// Load runs but nothing is recorded.
    pub warmup: Duration,
    pub stop: StopCondition,
    /// How long to wait for the server to close after a `Connection: close` request.
    pub close_grace: Duration,
    /// Seed of the per-connection URL sequences.
    pub seed: u64,
    /// Pause between two connection attempts at start, so the accept queue is not flooded.
    pub connect_stagger: Duration,
    /// Virtual users walking scenarios instead of `plan`: each connection is one user.
    pub scenario: Option<Arc<ScenarioRun>>,
    /// `https://`: every connection speaks TLS.
    pub tls: Option<crate::tls::TlsClient>,
    /// What the spec was built from: another host builds the same spec from it (a fleet's
    /// load agent), then sets the fields a caller may have changed (warmup, stop, seed).
    pub origin: Arc<SpecOrigin>,
}

/// The settings and URL a `LoadSpec` was built from (`LoadSettings::build_spec`). The
/// settings are kept as their JSON (this module is below `settings`, which builds specs);
/// `LoadSettings::from_origin` reads them back.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SpecOrigin {
    pub settings: serde_json::Value,
    pub url: String,
}

impl LoadSpec {
    /// How many connections each thread owns: every connection asked for is used, the
    /// remainder going to the first threads (`-t 3 -c 14` gives 5, 5, 4).
    pub fn connections_per_thread(&self) -> Vec<usize> {
        split_evenly(self.connections as u64, self.threads)
            .into_iter()
            .map(|n| n as usize)
            .collect()
    }

    /// The default stagger: 250 µs between connects, but at most 100 ms for all of them.
    pub fn default_connect_stagger(connections: usize) -> Duration {
        let spread = Duration::from_millis(100) / connections.max(1) as u32;
        spread.min(Duration::from_micros(250))
    }
}

/// Splits `total` into `parts` shares that differ by at most one, larger shares first.
pub fn split_evenly(total: u64, parts: usize) -> Vec<u64> {
    let parts = parts.max(1) as u64;
    (0..parts)
        .map(|i| total / parts + u64::from(i < total % parts))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_connection_is_used_when_threads_do_not_divide_connections() {
        assert_eq!(split_evenly(14, 3), vec![5, 5, 4]);
        assert_eq!(split_evenly(14, 3).iter().sum::<u64>(), 14);
        assert_eq!(split_evenly(2, 4), vec![1, 1, 0, 0]);
        assert_eq!(split_evenly(0, 2), vec![0, 0]);
    }

    #[test]
    fn stagger_is_bounded() {
        assert_eq!(
            LoadSpec::default_connect_stagger(10),
            Duration::from_micros(250)
        );
        assert_eq!(
            LoadSpec::default_connect_stagger(1000),
            Duration::from_micros(100)
        );
    }
}
