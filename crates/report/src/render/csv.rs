//! `--format csv`: one row per cohort and metric, for spreadsheets.

use crate::model::{Report, Summary};

/// CSV: one row per cohort and metric summary.
pub fn csv(report: &Report) -> anyhow::Result<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "cohort",
        "metric",
        "n",
        "mean",
        "sd",
        "cv",
        "min",
        "p10",
        "p50",
        "p90",
        "max",
        "ratio",
        "ci_low",
        "ci_high",
        "p_value",
        "significant",
        "method",
    ])?;
    for c in &report.cohorts {
        let mut metrics: Vec<(&str, &Option<Summary>)> = vec![
            ("throughput", &c.throughput),
            ("pss_end", &c.memory.pss_end),
            ("uss_end", &c.memory.uss_end),
            ("rss_end", &c.memory.rss_end),
            ("pss_peak", &c.memory.pss_peak),
            ("rss_peak", &c.memory.rss_peak),
            ("cpu_per_request", &c.cpu.per_request),
            ("cpu_per_request_with_idle", &c.cpu.per_request_with_idle),
            ("cpu_user_per_request", &c.cpu.user_per_request),
            ("cpu_system_per_request", &c.cpu.system_per_request),
            ("error_rate", &c.error_rate),
        ];
        let lat = c.latency.as_ref();
        let lat50 = lat.and_then(|l| l.p50_across_trials.clone());
        let lat99 = lat.and_then(|l| l.p99_across_trials.clone());
        metrics.push(("latency_p50", &lat50));
        metrics.push(("latency_p99", &lat99));
        let script = c.script.clone().unwrap_or_default();
        metrics.push(("wall", &script.wall));
        metrics.push(("max_rss", &script.max_rss_bytes));
        for (name, s) in metrics {
            let Some(s) = s else { continue };
            let cmp = report.comparison(&c.name, name);
            let f = |v: f64| format!("{v}");
            w.write_record([
                c.name.clone(),
                name.to_string(),
                s.n.to_string(),
                f(s.mean),
                f(s.sd),
                f(s.cv),
                f(s.min),
                f(s.p10),
                f(s.p50),
                f(s.p90),
                f(s.max),
                cmp.map(|x| f(x.ratio)).unwrap_or_default(),
                cmp.map(|x| f(x.ci_low)).unwrap_or_default(),
                cmp.map(|x| f(x.ci_high)).unwrap_or_default(),
                cmp.and_then(|x| x.p_value).map(f).unwrap_or_default(),
                cmp.map(|x| x.significant.to_string()).unwrap_or_default(),
                cmp.map(|x| x.method.clone()).unwrap_or_default(),
            ])?;
        }
    }
    Ok(String::from_utf8(w.into_inner()?)?)
}
