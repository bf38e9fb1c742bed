//! Throughput (HTTP) and wall time (scripts): one row per cohort, the p10–p90 band, the
//! median, and every trial as a dot.

use std::fmt::Write as _;

use super::svg::{
    c, caption, document, is_valid, jitter, label_chars, label_column, legend, linear, open_series,
    row_labels, source_line, subtitle, x_axis, zero_based_ticks, Scale, Swatch,
};
use super::{cohort_colour, INK, INVALID, WIDTH};
use crate::format::fmt_num;
use crate::model::{Report, Summary, TrialPoint};

// ---------------------------------------------------------------------------------------
// Throughput and wall time: one row per cohort, band p10–p90, median, every trial.

/// Requests per second per cohort: the p10–p90 band of valid trials, a bar at the median,
/// and every trial as a jittered dot (invalid or failed trials as hollow rings).
pub fn throughput(report: &Report) -> Option<String> {
    spread(
        report,
        SpreadSpec {
            name: "throughput",
            title: "Throughput per cohort",
            axis: "requests per second (higher is better)",
            unit: "req/s",
            what: "Requests per second",
            summary: |r, i| r.cohorts[i].throughput.clone(),
            value: |t| t.requests_per_s,
        },
    )
}

/// Wall time of a script workload per cohort, drawn like [`throughput`].
pub fn wall(report: &Report) -> Option<String> {
    spread(
        report,
        SpreadSpec {
            name: "wall",
            title: "Wall time per cohort",
            axis: "wall time, seconds (lower is better)",
            unit: "s",
            what: "Wall time",
            summary: |r, i| r.cohorts[i].script.as_ref().and_then(|s| s.wall.clone()),
            value: |t| t.wall_s,
        },
    )
}

pub(crate) struct SpreadSpec {
    pub(crate) name: &'static str,
    pub(crate) title: &'static str,
    pub(crate) axis: &'static str,
    pub(crate) unit: &'static str,
    pub(crate) what: &'static str,
    pub(crate) summary: fn(&Report, usize) -> Option<Summary>,
    pub(crate) value: fn(&TrialPoint) -> Option<f64>,
}

/// One figure per cohort, as `spec` says: a row per cohort with a summary or a trial value,
/// drawn as [`throughput`] describes.
pub(crate) fn spread(report: &Report, spec: SpreadSpec) -> Option<String> {
    let rows = spread_rows(report, &spec);
    if rows.is_empty() {
        return None;
    }
    let mut b = String::new();
    let top = key(&mut b, &rows) + 6.0;
    let l = Layout::of(&rows, top);
    x_axis(
        &mut b,
        l.x,
        &l.ticks,
        l.plot_top,
        l.plot_bottom,
        spec.axis,
        linear(0.0, l.axis_max),
    );

    let mut desc = format!("{} per cohort; the axis starts at zero.", spec.what);
    for (k, row) in rows.iter().enumerate() {
        row_mark(&mut b, &mut desc, report, &spec, &l, k, row);
    }

    let text = format!(
        "{} of each trial (dots, spread vertically so they do not overlap). The band spans the \
         10th to 90th percentile of the valid trials and the black bar marks their median. \
         Hollow rings are invalid or failed trials, shown but left out of every statistic. \
         The axis starts at zero.",
        spec.what
    );
    let end = caption(
        &mut b,
        &text,
        &source_line(report),
        l.plot_bottom + 62.0,
        WIDTH,
    );
    Some(document(
        spec.name,
        spec.title,
        &desc,
        &subtitle(report),
        WIDTH,
        end + 4.0,
        &b,
    ))
}

/// One cohort's row.
struct Row<'a> {
    name: &'a str,
    colour: &'static str,
    summary: Option<Summary>,
    /// Each trial with a value, and the value.
    trials: Vec<(&'a TrialPoint, f64)>,
}

/// The rows: cohorts with a summary or at least one trial value, in report order.
fn spread_rows<'a>(report: &'a Report, spec: &SpreadSpec) -> Vec<Row<'a>> {
    let mut rows: Vec<Row> = Vec::new();
    for (i, cohort) in report.cohorts.iter().enumerate() {
        let summary = (spec.summary)(report, i);
        let trials: Vec<(&TrialPoint, f64)> = report
            .trials
            .iter()
            .filter(|t| t.cohort == cohort.name)
            .filter_map(|t| {
                (spec.value)(t)
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .map(|v| (t, v))
            })
            .collect();
        if summary.is_some() || !trials.is_empty() {
            rows.push(Row {
                name: &cohort.name,
                colour: cohort_colour(i),
                summary,
                trials,
            });
        }
    }
    rows
}

/// The legend above the plot (the ring only when some trial is invalid); the y under it.
fn key(b: &mut String, rows: &[Row]) -> f64 {
    let any_invalid = rows
        .iter()
        .any(|r| r.trials.iter().any(|(t, _)| !is_valid(t)));
    let mut legend_items = vec![
        (
            Swatch::Band("#59636e"),
            "p10–p90 of valid trials".to_string(),
        ),
        (Swatch::MedianTick, "median".to_string()),
        (Swatch::Dot("#59636e"), "one trial".to_string()),
    ];
    if any_invalid {
        legend_items.push((
            Swatch::Ring,
            "invalid or failed trial (not in the statistics)".to_string(),
        ));
    }
    legend(b, &legend_items, 16.0, 66.0, WIDTH - 16.0)
}

/// The plot's edges, rows and value scale, computed once.
struct Layout {
    /// The left edge of the plot (the row labels' column is before it).
    left: f64,
    right: f64,
    plot_top: f64,
    plot_bottom: f64,
    row_h: f64,
    /// The value axis's ticks, from zero to `axis_max`.
    ticks: Vec<(f64, String)>,
    axis_max: f64,
    x: Scale,
    /// The characters a row label may have.
    chars: usize,
}

impl Layout {
    /// The layout of `rows` under the legend, whose bottom is `top`.
    fn of(rows: &[Row], top: f64) -> Layout {
        let max = rows
            .iter()
            .flat_map(|r| {
                r.trials
                    .iter()
                    .map(|(_, v)| *v)
                    .chain(r.summary.iter().flat_map(|s| [s.p90, s.max]))
            })
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max);
        let names: Vec<&str> = rows.iter().map(|r| r.name).collect();
        let left = label_column(&names);
        let right = WIDTH - 28.0;
        let row_h = 40.0;
        let plot_top = top;
        let plot_bottom = plot_top + rows.len() as f64 * row_h;
        let (ticks, axis_max) = zero_based_ticks(max, 7, "");
        Layout {
            left,
            right,
            plot_top,
            plot_bottom,
            row_h,
            ticks,
            axis_max,
            x: Scale::new(0.0, axis_max, left, right),
            chars: label_chars(left),
        }
    }
}

/// The decimals a value in `unit` is printed with: seconds get 3 (1 from 100 s), the rest 0.
fn decimals_for(unit: &str, v: f64) -> usize {
    if unit == "s" {
        if v >= 100.0 {
            1
        } else {
            3
        }
    } else {
        0
    }
}

/// Row `k`: its zebra stripe, labels, band, trials and median, with its figures added to
/// `desc`.
fn row_mark(
    b: &mut String,
    desc: &mut String,
    report: &Report,
    spec: &SpreadSpec,
    l: &Layout,
    k: usize,
    row: &Row,
) {
    let (x, row_h, right) = (l.x, l.row_h, l.right);
    let cy = l.plot_top + k as f64 * row_h + row_h / 2.0;
    let baseline = row.name == report.baseline;
    let mut tooltip = row.name.to_string();
    let mut second;
    if let Some(s) = &row.summary {
        let d = decimals_for(spec.unit, s.p50);
        second = format!("median {} {}", fmt_num(s.p50, d), spec.unit);
        let _ = write!(
            tooltip,
            ": median {} {u}, p10–p90 {}–{} {u}, n = {}",
            fmt_num(s.p50, d),
            fmt_num(s.p10, d),
            fmt_num(s.p90, d),
            s.n,
            u = spec.unit
        );
        let _ = write!(
            desc,
            " {}: median {} {u} (p10 {}, p90 {}, {} valid trials).",
            row.name,
            fmt_num(s.p50, d),
            fmt_num(s.p10, d),
            fmt_num(s.p90, d),
            s.n,
            u = spec.unit
        );
    } else {
        second = "no valid trials".to_string();
        let _ = write!(desc, " {}: no valid trials.", row.name);
    }
    if baseline {
        second.push_str(" · baseline");
    }
    // Zebra background and the row's labels.
    if k % 2 == 1 {
        let _ = write!(
            b,
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#f6f8fa\" fill-opacity=\"0.7\"/>",
            c(16.0),
            c(cy - row_h / 2.0),
            c(right - 16.0),
            c(row_h)
        );
    }
    open_series(b, row.name, &tooltip);
    row_labels(b, l.left - 12.0, cy, row.name, l.chars, baseline, &second);
    if let Some(s) = &row.summary {
        let _ = write!(
            b,
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"18\" rx=\"3\" fill=\"{}\" fill-opacity=\"0.25\"/>",
            c(x.at(s.p10)),
            c(cy - 9.0),
            c((x.at(s.p90) - x.at(s.p10)).max(1.0)),
            row.colour
        );
    }
    for (t, v) in &row.trials {
        let dy = jitter(t.source, t.trial_id) * 10.0;
        if is_valid(t) {
            let _ = write!(
                b,
                "<circle cx=\"{}\" cy=\"{}\" r=\"3.6\" fill=\"{}\" fill-opacity=\"0.85\" stroke=\"#ffffff\" stroke-width=\"0.6\"/>",
                c(x.at(*v)),
                c(cy + dy),
                row.colour
            );
        } else {
            let _ = write!(
                b,
                "<circle cx=\"{}\" cy=\"{}\" r=\"3.6\" fill=\"#ffffff\" stroke=\"{INVALID}\" stroke-width=\"1.6\"/>",
                c(x.at(*v)),
                c(cy + dy)
            );
        }
    }
    if let Some(s) = &row.summary {
        let _ = write!(
            b,
            "<rect x=\"{}\" y=\"{}\" width=\"3\" height=\"26\" fill=\"{INK}\"/>",
            c(x.at(s.p50) - 1.5),
            c(cy - 13.0)
        );
    }
    b.push_str("</g>");
}
