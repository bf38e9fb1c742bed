//! The figures a comparison covers (what rubyrace measures of HTTP or script trials, and
//! a script's own `rubyrace-metric` values), and the values and summaries of a figure.

use std::collections::BTreeSet;

use crate::input::TrialData;
use crate::model::Summary;

/// One metric the comparisons cover.
pub(super) struct Metric {
    pub(super) name: String,
    pub(super) higher_is_better: bool,
    value: MetricValue,
    /// Words for "more" and "less" of it.
    pub(super) more: String,
    pub(super) less: String,
}

/// Where a metric's value comes from.
enum MetricValue {
    /// A figure rubyrace measures.
    Measured(fn(&TrialData) -> Option<f64>),
    /// A figure the script printed (`rubyrace-metric NAME=VALUE`).
    Script(String),
}

impl Metric {
    fn measured(
        name: &str,
        higher_is_better: bool,
        value: fn(&TrialData) -> Option<f64>,
        more: &str,
        less: &str,
    ) -> Metric {
        Metric {
            name: name.into(),
            higher_is_better,
            value: MetricValue::Measured(value),
            more: more.into(),
            less: less.into(),
        }
    }

    /// A script's own metric. Rates (names ending in `_per_s`, `_per_sec` or
    /// `_per_second`) are better higher; every other figure (a time, a size, a count) is
    /// better lower (docs/report.md).
    fn script(name: &str) -> Metric {
        Metric {
            name: name.into(),
            higher_is_better: script_metric_higher_is_better(name),
            value: MetricValue::Script(name.into()),
            more: format!("higher {name}"),
            less: format!("lower {name}"),
        }
    }

    pub(super) fn of(&self, t: &TrialData) -> Option<f64> {
        match &self.value {
            MetricValue::Measured(f) => f(t),
            MetricValue::Script(name) => t.metrics.get(name).copied(),
        }
    }
}

/// Whether a script metric is better higher: rates are.
pub fn script_metric_higher_is_better(name: &str) -> bool {
    ["_per_s", "_per_sec", "_per_second"]
        .iter()
        .any(|suffix| name.ends_with(suffix))
}

/// The figures compared in HTTP runs. `shared_machine`: interleaved and co-scheduled runs,
/// whose servers run side by side: their memory is compared by USS, as a process's PSS
/// counts a share of the library pages it shares with its neighbours (a Ruby process's PSS
/// fell 2.9% next to a 4-process Ruby neighbour, the statistics audit), which biases
/// configurations of different process counts or Ruby builds; and `with_idle`: their CPU
/// per request charged with the CPU outside the recorded windows, when it was recorded.
pub(super) fn http_metrics(shared_machine: bool, with_idle: bool) -> Vec<Metric> {
    let memory = if shared_machine {
        Metric::measured(
            "uss_end",
            false,
            |t| t.uss_end,
            "more memory (USS)",
            "less memory (USS)",
        )
    } else {
        Metric::measured(
            "pss_end",
            false,
            |t| t.pss_end,
            "more memory (PSS)",
            "less memory (PSS)",
        )
    };
    let mut metrics = vec![
        Metric::measured("throughput", true, |t| t.requests_per_s, "faster", "slower"),
        Metric::measured(
            "latency_p50",
            false,
            |t| t.latency_p50_us,
            "higher p50 latency",
            "lower p50 latency",
        ),
        Metric::measured(
            "latency_p99",
            false,
            |t| t.latency_p99_us,
            "higher p99 latency",
            "lower p99 latency",
        ),
        memory,
        Metric::measured(
            "cpu_per_request",
            false,
            |t| t.cpu_per_request,
            "more CPU per request",
            "less CPU per request",
        ),
    ];
    // Memory per worker (servers with forked workers only; see `worker_memory` of the
    // input): by USS everywhere, and by PSS where the servers did not run side by side.
    if !shared_machine {
        metrics.push(Metric::measured(
            "worker_pss_end",
            false,
            |t| t.worker_pss_end,
            "more memory per worker (PSS)",
            "less memory per worker (PSS)",
        ));
    }
    metrics.push(Metric::measured(
        "worker_uss_end",
        false,
        |t| t.worker_uss_end,
        "more memory per worker (USS)",
        "less memory per worker (USS)",
    ));
    if with_idle {
        metrics.push(Metric::measured(
            "cpu_per_request_with_idle",
            false,
            |t| t.cpu_per_request_with_idle,
            "more CPU per request (idle CPU included)",
            "less CPU per request (idle CPU included)",
        ));
    }
    metrics
}

/// Wall time and peak RSS, then every metric the script printed (in name order).
pub(super) fn script_metrics(trials: &[&TrialData]) -> Vec<Metric> {
    let mut metrics = vec![
        Metric::measured(
            "wall",
            false,
            |t| t.wall_s,
            "slower (wall time)",
            "faster (wall time)",
        ),
        Metric::measured(
            "max_rss",
            false,
            |t| t.max_rss,
            "more peak memory",
            "less peak memory",
        ),
    ];
    let names: BTreeSet<&String> = trials.iter().flat_map(|t| t.metrics.keys()).collect();
    metrics.extend(names.into_iter().map(|n| Metric::script(n)));
    metrics
}

pub(super) fn values(trials: &[&TrialData], f: impl Fn(&TrialData) -> Option<f64>) -> Vec<f64> {
    trials.iter().filter_map(|t| f(t)).collect()
}

pub(super) fn summary(trials: &[&TrialData], f: fn(&TrialData) -> Option<f64>) -> Option<Summary> {
    Summary::of(&values(trials, f))
}
