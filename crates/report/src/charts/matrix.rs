//! The dot matrix of a two-axis experiment: one cell per combination, coloured by its
//! figure.

use std::fmt::Write as _;

use super::svg::{
    c, caption, clip, document, label, open_series, source_line, subtitle, text_width,
};
use super::{GRID, INK, WIDTH};
use crate::format::fmt_sig;
use crate::model::{DotMatrix, Report};

// ---------------------------------------------------------------------------------------
// Dot matrix for two-axis experiments.

/// Viridis at five stops (colour-blind safe and monotone in lightness), interpolated.
pub(crate) fn viridis(t: f64) -> String {
    const STOPS: [(f64, f64, f64); 5] = [
        (68.0, 1.0, 84.0),
        (59.0, 82.0, 139.0),
        (33.0, 145.0, 140.0),
        (94.0, 201.0, 98.0),
        (253.0, 231.0, 37.0),
    ];
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.5
    };
    let pos = t * 4.0;
    let i = (pos.floor() as usize).min(3);
    let f = pos - i as f64;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    let mix = |x: f64, y: f64| (x + (y - x) * f).round() as u8;
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(a.0, b.0),
        mix(a.1, b.1),
        mix(a.2, b.2)
    )
}

/// Two-axis experiments: a rows × columns grid with one dot per cell whose area (from zero)
/// and colour encode the cell's median, with the number printed on the dot.
pub fn matrix(report: &Report) -> Option<String> {
    let m = report.matrix.as_ref()?;
    if m.rows.is_empty() || m.cols.is_empty() {
        return None;
    }
    let l = Layout::of(report, m);
    let mut b = String::new();
    headers(&mut b, m, &l);
    let mut desc = format!(
        "Median {} per cell of {} (rows) by {} (columns); dot area is proportional to the value.",
        m.unit, m.row_key, m.col_key
    );
    for (i, row) in m.rows.iter().enumerate() {
        // Dots sit a little above the middle when a ratio line goes under them.
        let cy = l.grid_top + l.cell_h * i as f64 + 10.0 + l.r_max;
        let _ = write!(
            b,
            "<line x1=\"16\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{GRID}\"/>",
            c(l.grid_right),
            y = c(l.grid_top + l.cell_h * i as f64),
        );
        label(l.left - 12.0, cy + 4.0)
            .end()
            .size(12.5)
            .tooltip(row)
            .draw(&mut b, &clip(row, 36));
        for j in 0..m.cols.len() {
            cell_mark(&mut b, &mut desc, report, m, &l, (i, j), cy);
        }
    }
    let grid_bottom = l.grid_top + l.cell_h * m.rows.len() as f64;
    let _ = write!(
        b,
        "<line x1=\"16\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{GRID}\"/>",
        c(l.grid_right),
        y = c(grid_bottom)
    );
    let key_y = grid_bottom + 24.0;
    colour_key(&mut b, m, &l, key_y);
    let text =
        format!(
        "Median {} of each combination of {} and {}. A dot's area is proportional to its value \
         (zero is no dot) and its colour runs from dark (smallest) to yellow (largest); the \
         number is printed on each dot{}. {}",
        m.unit,
        m.row_key,
        m.col_key,
        if l.baseline_value.is_some() { " and its ratio to the baseline under it" } else { "" },
        if l.lower_is_better { "Lower is better." } else { "Higher is better." }
    );
    let end = caption(&mut b, &text, &source_line(report), key_y + 38.0, l.width);
    let title = format!("Median {} by {} and {}", m.unit, m.row_key, m.col_key);
    Some(document(
        "matrix",
        &title,
        &desc,
        &subtitle(report),
        l.width,
        end + 4.0,
        &b,
    ))
}

/// The grid's geometry and the values' range, computed once from the matrix.
struct Layout {
    /// Whether any cell has a value (the colour key's ends are "–" otherwise).
    any_value: bool,
    vmin: f64,
    vmax: f64,
    /// The left edge of the grid (the row labels' column is before it).
    left: f64,
    cell_w: f64,
    cell_h: f64,
    width: f64,
    grid_top: f64,
    grid_right: f64,
    /// The radius of the largest dot.
    r_max: f64,
    /// The baseline's value, when it is one of the cells.
    baseline_value: Option<f64>,
    lower_is_better: bool,
}

impl Layout {
    /// The layout of `m`, `report`'s matrix (at least one row and one column).
    fn of(report: &Report, m: &DotMatrix) -> Layout {
        let values: Vec<f64> = m
            .cells
            .iter()
            .flatten()
            .flatten()
            .map(|(_, v)| *v)
            .filter(|v| v.is_finite() && *v >= 0.0)
            .collect();
        let vmax = values.iter().copied().fold(0.0, f64::max);
        let vmin = values.iter().copied().fold(f64::INFINITY, f64::min);
        let row_names: Vec<&str> = m.rows.iter().map(String::as_str).collect();
        let left = (row_names
            .iter()
            .map(|n| text_width(&clip(n, 36), 12.5))
            .fold(text_width(&m.row_key, 12.0), f64::max)
            + 34.0)
            .clamp(110.0, 300.0);
        let cols = m.cols.len() as f64;
        let cell_w = ((WIDTH - left - 28.0) / cols).clamp(84.0, 190.0);
        // The baseline's value, when it is one of the cells: each other cell shows its ratio.
        let baseline_value = m
            .cells
            .iter()
            .flatten()
            .flatten()
            .find(|(cohort, v)| *cohort == report.baseline && v.is_finite() && *v > 0.0)
            .map(|(_, v)| *v);
        let cell_h = if baseline_value.is_some() {
            106.0
        } else {
            84.0
        };
        let width = (left + cell_w * cols + 28.0).max(WIDTH);
        let grid_right = left + cell_w * cols;
        let r_max = ((cell_w.min(80.0)) / 2.0 - 6.0).min(34.0);
        let lower_is_better = m.unit.contains("wall") || m.unit.trim() == "s";
        Layout {
            any_value: !values.is_empty(),
            vmin,
            vmax,
            left,
            cell_w,
            cell_h,
            width,
            grid_top: 102.0,
            grid_right,
            r_max,
            baseline_value,
            lower_is_better,
        }
    }
}

/// The axes' names over the grid and a header per column.
fn headers(b: &mut String, m: &DotMatrix, l: &Layout) {
    let (left, cell_w, cols) = (l.left, l.cell_w, m.cols.len() as f64);
    let col_key_y = 72.0;
    let head_y = 92.0;
    label(left + cell_w * cols / 2.0, col_key_y)
        .middle()
        .size(12.0)
        .bold(true)
        .draw(b, &format!("{} →", m.col_key));
    label(left - 12.0, head_y)
        .end()
        .size(12.0)
        .bold(true)
        .draw(b, &format!("{} ↓", clip(&m.row_key, 36)));
    let col_chars = ((cell_w - 8.0) / (12.0 * 0.58)) as usize;
    for (j, col) in m.cols.iter().enumerate() {
        label(left + cell_w * (j as f64 + 0.5), head_y)
            .middle()
            .size(12.0)
            .tooltip(col)
            .draw(b, &clip(col, col_chars.max(4)));
    }
}

/// Cell (row i, column j) at height `cy`: its dot with the value on it and the ratio to the
/// baseline under it (its figures added to `desc`), or "no data".
fn cell_mark(
    b: &mut String,
    desc: &mut String,
    report: &Report,
    m: &DotMatrix,
    l: &Layout,
    (i, j): (usize, usize),
    cy: f64,
) {
    let (vmin, vmax, r_max) = (l.vmin, l.vmax, l.r_max);
    let row = &m.rows[i];
    let cx = l.left + l.cell_w * (j as f64 + 0.5);
    let cell = m
        .cells
        .get(i)
        .and_then(|r| r.get(j))
        .and_then(|c| c.as_ref());
    match cell {
        Some((cohort, v)) if v.is_finite() && *v >= 0.0 => {
            let r = if vmax > 0.0 {
                r_max * (v / vmax).sqrt()
            } else {
                0.0
            };
            let t = if vmax > vmin {
                (v - vmin) / (vmax - vmin)
            } else {
                0.5
            };
            let text = fmt_sig(*v);
            let _ = write!(
                desc,
                " {} × {} ({}): {} {}.",
                row, m.cols[j], cohort, text, m.unit
            );
            let ratio = l.baseline_value.map(|base| {
                if *cohort == report.baseline {
                    "baseline".to_string()
                } else {
                    // The table's ratio (paired by block where possible), so the
                    // chart never disagrees with it; medians only as a fallback.
                    let metric = if m.unit == "requests/s" {
                        "throughput"
                    } else {
                        "wall"
                    };
                    let ratio = report
                        .comparisons
                        .iter()
                        .find(|c| &c.cohort == cohort && c.metric == metric)
                        .map_or(v / base, |c| c.ratio);
                    format!("{ratio:.2}× baseline")
                }
            });
            open_series(b, cohort, &format!("{cohort}: {text} {}", m.unit));
            let _ = write!(
                b,
                "<circle cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{}\" stroke=\"#ffffff\" stroke-width=\"1\"/>",
                c(cx),
                c(cy),
                c(r.max(1.5)),
                viridis(t),
            );
            label(cx, cy + 4.0)
                .middle()
                .size(12.0)
                .bold(true)
                .fill(INK)
                .halo()
                .draw(b, &text);
            if let Some(ratio) = ratio {
                label(cx, cy + r_max + 16.0)
                    .middle()
                    .size(11.0)
                    .muted()
                    .draw(b, &ratio);
            }
            b.push_str("</g>");
        }
        _ => {
            label(cx, cy + 4.0).middle().muted().draw(b, "no data");
        }
    }
}

/// The colour key at height `key_y`: the gradient from the smallest to the largest value.
fn colour_key(b: &mut String, m: &DotMatrix, l: &Layout, key_y: f64) {
    let key_x = l.left;
    let key_w = 180.0;
    let _ = write!(
        b,
        "<defs><linearGradient id=\"rr-matrix-scale\" x1=\"0\" x2=\"1\" y1=\"0\" y2=\"0\">\
         <stop offset=\"0\" stop-color=\"{}\"/><stop offset=\"0.25\" stop-color=\"{}\"/>\
         <stop offset=\"0.5\" stop-color=\"{}\"/><stop offset=\"0.75\" stop-color=\"{}\"/>\
         <stop offset=\"1\" stop-color=\"{}\"/></linearGradient></defs>\
         <rect x=\"{}\" y=\"{}\" width=\"{key_w}\" height=\"10\" fill=\"url(#rr-matrix-scale)\"/>",
        viridis(0.0),
        viridis(0.25),
        viridis(0.5),
        viridis(0.75),
        viridis(1.0),
        c(key_x),
        c(key_y),
    );
    let (lo, hi) = if l.any_value {
        (fmt_sig(l.vmin), fmt_sig(l.vmax))
    } else {
        ("–".to_string(), "–".to_string())
    };
    label(key_x - 6.0, key_y + 9.0)
        .end()
        .size(11.0)
        .muted()
        .draw(b, &lo);
    label(key_x + key_w + 6.0, key_y + 9.0)
        .size(11.0)
        .muted()
        .draw(b, &format!("{hi} {}", m.unit));
}
