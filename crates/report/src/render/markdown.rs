//! `--format markdown`: the report for GitHub issues and Ruby bug reports.

use std::fmt::Write as _;

use super::cells::*;
use crate::format::*;
use crate::model::Report;

/// Markdown: a table ready to paste into a GitHub issue or a Ruby bug report.
pub fn markdown(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "**{}**\n", md_escape(&title(report)));
    let h = headers(report);
    let _ = writeln!(out, "| {} |", h.join(" | "));
    let _ = writeln!(
        out,
        "|{}",
        h.iter()
            .enumerate()
            .map(|(i, _)| if i == 0 || i == 3 {
                " --- |"
            } else {
                " ---: |"
            })
            .collect::<String>()
    );
    for r in rows(report) {
        let mut cells = vec![md_escape(&r.cohort), r.trials, r.main, md_escape(&r.versus)];
        cells.extend(r.rest);
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    if let Some(legend) = legend(report) {
        let _ = writeln!(out, "\n<sub>{}</sub>", md_escape(&legend));
    }
    if let Some((headers, rows)) = runtime_table(report) {
        md_table(&mut out, RUNTIME_TITLE, &headers, &rows, |i| i >= 2);
    }
    out.push_str(&crate::noise::noise_markdown(report, md_escape));
    if let Some((headers, rows)) = hosts_table(report) {
        md_table(&mut out, HOSTS_TITLE, &headers, &rows, |i| {
            (2..5).contains(&i)
        });
    }
    if let Some((headers, rows)) = steps_table(report) {
        md_table(&mut out, STEPS_TITLE, &headers, &rows, |i| i >= 3);
    }
    if let Some((headers, rows)) = profile_table(report) {
        md_table(&mut out, &profile_title(report), &headers, &rows, |i| {
            (3..5).contains(&i)
        });
    }
    for line in sparse_lines(report) {
        let _ = writeln!(out, "\n{}", md_escape(&line));
    }
    if let Some(cost) = profile_cost_line(report) {
        let _ = writeln!(out, "\n<sub>{}</sub>", md_escape(&cost));
    }
    let d = details(report);
    if !d.trim().is_empty() {
        let _ = writeln!(out, "\n<details><summary>Comparisons, precision and warnings</summary>\n\n```\n{}```\n</details>", d.trim_start());
    }
    let _ = writeln!(out, "\n<sub>{}</sub>", md_escape(&provenance(report)));
    out
}

/// A titled Markdown table; the columns `right` says are right-aligned (figures).
fn md_table(
    out: &mut String,
    title: &str,
    headers: &[&str],
    rows: &[Vec<String>],
    right: impl Fn(usize) -> bool,
) {
    let _ = writeln!(out, "\n{title}\n");
    let _ = writeln!(out, "| {} |", headers.join(" | "));
    let align: String = (0..headers.len())
        .map(|i| if right(i) { " ---: |" } else { " --- |" })
        .collect();
    let _ = writeln!(out, "|{align}");
    for row in rows {
        let cells: Vec<String> = row.iter().map(|c| md_escape(c)).collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
}

fn provenance(report: &Report) -> String {
    let machines: Vec<String> = report
        .sources
        .iter()
        .flat_map(|s| s.machines.clone())
        .collect();
    // A field with nothing to say is left out (a report built by `check` has no command
    // of its own; it once printed `rubyrace 0.1.0 ·  · machine vm`).
    let mut parts = vec![format!("rubyrace {}", env!("CARGO_PKG_VERSION"))];
    if !report.command.trim().is_empty() {
        parts.push(report.command.clone());
    }
    if !machines.is_empty() {
        parts.push(format!("machine {}", machines.join(", ")));
    }
    parts.join(" · ")
}
