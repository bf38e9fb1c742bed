//! `--format table`: the terminal table (comfy-table), coloured on a terminal and plain
//! when piped.

use std::fmt::Write as _;

use comfy_table::{presets, Attribute, Cell, CellAlignment, Color, ContentArrangement, Table};

use super::cells::*;
use crate::model::Report;

/// An empty terminal table in rubyrace's style, coloured or not.
/// A table with a bold header row.
pub(crate) fn table_with_header(color: bool, headers: Vec<&str>) -> Table {
    let mut t = new_table(color);
    t.set_header(
        headers
            .into_iter()
            .map(|h| Cell::new(h).add_attribute(Attribute::Bold)),
    );
    t
}

pub(crate) fn new_table(color: bool) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::UTF8_HORIZONTAL_ONLY)
        .set_content_arrangement(ContentArrangement::Dynamic);
    if color {
        t.enforce_styling();
    } else {
        t.force_no_tty();
    }
    t
}

/// The terminal table; `color` adds ANSI colours (only on a terminal).
pub fn table(report: &Report, color: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", title(report));
    let mut t = new_table(color);
    t.set_header(
        headers(report)
            .into_iter()
            .map(|h| Cell::new(h).add_attribute(Attribute::Bold)),
    );
    for r in rows(report) {
        let mut versus = Cell::new(&r.versus);
        if color {
            versus = match r.significant {
                Some(true) => versus.fg(Color::Green),
                Some(false) => versus.fg(Color::DarkGrey),
                None => versus,
            };
        }
        let mut cells = vec![
            Cell::new(&r.cohort),
            Cell::new(&r.trials).set_alignment(CellAlignment::Right),
            Cell::new(&r.main).set_alignment(CellAlignment::Right),
            versus,
        ];
        cells.extend(
            r.rest
                .iter()
                .map(|x| Cell::new(x).set_alignment(CellAlignment::Right)),
        );
        t.add_row(cells);
    }
    let _ = writeln!(out, "{t}");
    if let Some(legend) = legend(report) {
        let _ = writeln!(out, "{legend}");
    }
    if let Some((headers, rows)) = runtime_table(report) {
        let mut t = table_with_header(color, headers);
        for row in rows {
            let mut cells = Vec::new();
            for (i, x) in row.into_iter().enumerate() {
                let mut cell = Cell::new(&x);
                if i >= 2 {
                    cell = cell.set_alignment(CellAlignment::Right);
                }
                if i == 1 && color && x.contains('✗') {
                    cell = cell.fg(Color::Red);
                }
                cells.push(cell);
            }
            t.add_row(cells);
        }
        let _ = writeln!(out, "\n{RUNTIME_TITLE}\n{t}");
    }
    if let Some((headers, rows)) = crate::noise::noise_table(report) {
        let t = aligned_table(color, headers, rows, |i| i >= 1);
        let _ = writeln!(out, "\n{}\n{t}", crate::noise::NOISE_TITLE);
    }
    if let Some((headers, rows)) = hosts_table(report) {
        let t = aligned_table(color, headers, rows, |i| (2..5).contains(&i));
        let _ = writeln!(out, "\n{HOSTS_TITLE}\n{t}");
    }
    if let Some((headers, rows)) = steps_table(report) {
        let t = aligned_table(color, headers, rows, |i| i >= 3);
        let _ = writeln!(out, "\n{STEPS_TITLE}\n{t}");
    }
    if let Some((headers, rows)) = profile_table(report) {
        let t = aligned_table(color, headers, rows, |i| (3..5).contains(&i));
        let _ = writeln!(out, "\n{}\n{t}", profile_title(report));
    }
    for line in sparse_lines(report) {
        let _ = writeln!(out, "{line}");
    }
    if let Some(cost) = profile_cost_line(report) {
        let _ = writeln!(out, "{cost}");
    }
    out.push_str(&details(report));
    out
}

/// A table whose columns for which `right` holds are right-aligned (the numbers).
fn aligned_table(
    color: bool,
    headers: Vec<&'static str>,
    rows: Vec<Vec<String>>,
    right: impl Fn(usize) -> bool,
) -> Table {
    let mut t = table_with_header(color, headers);
    for row in rows {
        t.add_row(row.into_iter().enumerate().map(|(i, x)| {
            let cell = Cell::new(&x);
            if right(i) {
                cell.set_alignment(CellAlignment::Right)
            } else {
                cell
            }
        }));
    }
    t
}
