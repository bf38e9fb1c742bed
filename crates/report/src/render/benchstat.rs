//! `--format benchstat`: every valid trial as a line of Go's benchmark format, for
//! benchstat and other tools that read it.

use std::fmt::Write as _;

use crate::model::{Report, Workloads};

/// A benchstat name: no spaces (benchstat splits on them).
/// A name as one part of a Go benchmark name: no whitespace or control characters (they end
/// or break the line), no `/` (benchstat's sub-benchmark separator; shown as `∕`, U+2215),
/// and no trailing `-N` (benchstat reads it as GOMAXPROCS; a `_` is added after it).
fn bench_name(s: &str) -> String {
    let mut name: String = s
        .chars()
        .map(|c| match c {
            c if c.is_whitespace() || c.is_control() => '_',
            '/' => '∕',
            c => c,
        })
        .collect();
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits > 0 && name[..name.len() - digits].ends_with('-') {
        name.push('_');
    }
    name
}

/// Go benchmark format, one line per valid trial, for `benchstat`.
pub fn benchstat(report: &Report, trials: &[crate::input::TrialData]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "goos: linux");
    let experiments: Vec<&str> = report
        .sources
        .iter()
        .map(|s| s.experiment.as_str())
        .collect();
    let _ = writeln!(out, "pkg: rubyrace/{}", bench_name(&experiments.join("+")));
    if let Some(cpu) = trials.iter().find_map(|t| t.keys.get("cpu_model")) {
        let _ = writeln!(out, "cpu: {cpu}");
    }
    for cohort in &report.cohorts {
        for t in trials.iter().filter(|t| {
            t.status == results::TrialStatus::Valid
                && report.trials.iter().any(|p| {
                    p.cohort == cohort.name && p.trial_id == t.trial_id && p.source == t.source
                })
        }) {
            let mut line = format!(
                "Benchmark{}/cohort={} 1",
                if report.workload == Workloads::Script {
                    "Script"
                } else {
                    "Http"
                },
                bench_name(&cohort.name)
            );
            if let Some(rps) = t.requests_per_s {
                let _ = write!(line, " {:.0} ns/op {rps:.1} req/s", 1e9 / rps);
            }
            if let Some(w) = t.wall_s {
                let _ = write!(line, " {:.0} ns/op", w * 1e9);
            }
            if let Some(v) = t.latency_p99_us {
                let _ = write!(line, " {:.0} p99-ns", v * 1000.0);
            }
            if let Some(v) = t.pss_end {
                let _ = write!(line, " {v:.0} pss-B");
            }
            if let Some(v) = t.cpu_per_request {
                let _ = write!(line, " {:.0} cpu-ns/op", v * 1000.0);
            }
            let _ = writeln!(out, "{line}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/` split a cohort into sub-benchmarks, and a trailing `-4` was read
    /// as GOMAXPROCS by Go's benchstat.
    #[test]
    fn benchstat_names_keep_one_part_and_no_gomaxprocs_suffix() {
        assert_eq!(bench_name("/tmp/results run"), "∕tmp∕results_run");
        assert_eq!(bench_name("threads=puma-4"), "threads=puma-4_");
        assert_eq!(bench_name("a\nb\tc"), "a_b_c");
        assert_eq!(bench_name("x-y"), "x-y");
        assert_eq!(bench_name("v4"), "v4");
    }
}
