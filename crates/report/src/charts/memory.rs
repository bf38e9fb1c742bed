//! Memory: PSS and RSS at the end of each trial, the whole process tree.

use std::fmt::Write as _;

use super::svg::{
    c, caption, document, label_chars, label_column, legend, linear, open_series, row_labels,
    source_line, subtitle, x_axis, zero_based_ticks, Scale, Swatch,
};
use super::{cohort_colour, INK, WIDTH};
use crate::format::fmt_sig;
use crate::model::{Report, Summary};

// ---------------------------------------------------------------------------------------
// Memory: PSS and RSS at the end of each trial, whole process tree.

pub(crate) const MIB: f64 = 1024.0 * 1024.0;

/// Memory per cohort from zero, MiB: the median PSS at the end of the trials as a solid bar
/// with its p10–p90 whisker, and the median RSS as a lighter, taller bar behind it.
pub fn memory(report: &Report) -> Option<String> {
    struct Row<'a> {
        name: &'a str,
        colour: &'static str,
        pss: Option<Summary>,
        rss: Option<Summary>,
    }
    let rows: Vec<Row> = report
        .cohorts
        .iter()
        .enumerate()
        .filter(|(_, c)| c.memory.pss_end.is_some() || c.memory.rss_end.is_some())
        .map(|(i, c)| Row {
            name: &c.name,
            colour: cohort_colour(i),
            pss: c.memory.pss_end.clone(),
            rss: c.memory.rss_end.clone(),
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    let max = rows
        .iter()
        .flat_map(|r| {
            r.pss
                .iter()
                .chain(r.rss.iter())
                .flat_map(|s| [s.p50, s.p90])
        })
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
        / MIB;
    let names: Vec<&str> = rows.iter().map(|r| r.name).collect();
    let left = label_column(&names);
    let right = WIDTH - 28.0;
    let mut b = String::new();
    let mut items = Vec::new();
    if rows.iter().any(|r| r.pss.is_some()) {
        items.push((
            Swatch::Bar("#59636e", 1.0),
            "PSS (median, p10–p90 whisker)".to_string(),
        ));
    }
    if rows.iter().any(|r| r.rss.is_some()) {
        items.push((Swatch::Bar("#59636e", 0.3), "RSS (median)".to_string()));
    }
    let top = legend(&mut b, &items, 16.0, 66.0, WIDTH - 16.0) + 6.0;
    let row_h = 40.0;
    let plot_bottom = top + rows.len() as f64 * row_h;
    let (ticks, axis_max) = zero_based_ticks(max, 7, "");
    let x = Scale::new(0.0, axis_max, left, right);
    x_axis(
        &mut b,
        x,
        &ticks,
        top,
        plot_bottom,
        "MiB at the end of the trial, whole server process tree (lower is better)",
        linear(0.0, axis_max),
    );

    let chars = label_chars(left);
    let mut desc =
        String::from("Memory of the server process tree at the end of each trial, MiB, from zero.");
    for (k, row) in rows.iter().enumerate() {
        let cy = top + k as f64 * row_h + row_h / 2.0;
        let mut parts = Vec::new();
        if let Some(p) = &row.pss {
            parts.push(format!("PSS {} MiB", fmt_sig(p.p50 / MIB)));
        }
        if let Some(r) = &row.rss {
            parts.push(format!("RSS {} MiB", fmt_sig(r.p50 / MIB)));
        }
        let numbers = parts.join(" · ");
        let _ = write!(desc, " {}: {}.", row.name, numbers);
        let baseline = row.name == report.baseline;
        if k % 2 == 1 {
            let _ = write!(
                b,
                "<rect x=\"16\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#f6f8fa\" fill-opacity=\"0.7\"/>",
                c(cy - row_h / 2.0),
                c(right - 16.0),
                c(row_h)
            );
        }
        open_series(&mut b, row.name, &format!("{}: {numbers}", row.name));
        row_labels(&mut b, left - 12.0, cy, row.name, chars, baseline, &numbers);
        if let Some(r) = &row.rss {
            let _ = write!(
                b,
                "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"24\" fill=\"{}\" fill-opacity=\"0.3\"/>",
                c(left),
                c(cy - 12.0),
                c(x.at(r.p50 / MIB) - left),
                row.colour
            );
        }
        if let Some(p) = &row.pss {
            let _ = write!(
                b,
                "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"12\" fill=\"{}\"/>",
                c(left),
                c(cy - 6.0),
                c(x.at(p.p50 / MIB) - left),
                row.colour
            );
            if p.p90 > p.p10 {
                let (x10, x90) = (x.at(p.p10 / MIB), x.at(p.p90 / MIB));
                let _ = write!(
                    b,
                    "<path d=\"M{a} {y1}V{y2}M{a} {cy}H{z}M{z} {y1}V{y2}\" stroke=\"{INK}\" stroke-width=\"1.3\" fill=\"none\"/>",
                    a = c(x10),
                    z = c(x90),
                    y1 = c(cy - 5.0),
                    y2 = c(cy + 5.0),
                    cy = c(cy),
                );
            }
        }
        b.push_str("</g>");
    }
    let text = "Memory of the server's whole process tree (master and workers) at the end of each \
                trial, median across valid trials; the whisker spans the 10th to 90th percentile \
                of PSS. PSS divides pages shared between forked workers among them, so it is the \
                fair measure for preforking servers; RSS counts them in every process. The axis \
                starts at zero.";
    let end = caption(
        &mut b,
        text,
        &source_line(report),
        plot_bottom + 62.0,
        WIDTH,
    );
    Some(document(
        "memory",
        "Memory per cohort",
        &desc,
        &subtitle(report),
        WIDTH,
        end + 4.0,
        &b,
    ))
}
