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
        let _ = writeln!(out, "\n{RUNTIME_TITLE}\n");
        let _ = writeln!(out, "| {} |", headers.join(" | "));
        let _ = writeln!(
            out,
            "|{}",
            (0..headers.len())
                .map(|i| if i < 2 { " --- |" } else { " ---: |" })
                .collect::<String>()
        );
        for row in rows {
            let cells: Vec<String> = row.iter().map(|c| md_escape(c)).collect();
            let _ = writeln!(out, "| {} |", cells.join(" | "));
        }
    }
    out.push_str(&crate::noise::noise_markdown(report, md_escape));
    let d = details(report);
    if !d.trim().is_empty() {
        let _ = writeln!(out, "\n<details><summary>Comparisons, precision and warnings</summary>\n\n```\n{}```\n</details>", d.trim_start());
    }
    let _ = writeln!(out, "\n<sub>{}</sub>", md_escape(&provenance(report)));
    out
}

fn provenance(report: &Report) -> String {
    let machines: Vec<String> = report
        .sources
        .iter()
        .flat_map(|s| s.machines.clone())
        .collect();
    format!(
        "rubyrace {} · {} · machine {}",
        env!("CARGO_PKG_VERSION"),
        report.command,
        machines.join(", ")
    )
}
