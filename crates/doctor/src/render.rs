//! The doctor's report as aligned text for a terminal: one row per finding (status, check,
//! value), the advice under the value, wrapped to 100 columns, then a summary line.

use crate::{Finding, Report, Status};

/// Lines are wrapped to this width.
const WIDTH: usize = 100;
/// The status column, with its gap.
const STATUS_WIDTH: usize = 8;

/// The report as aligned text: one row per finding (status, check, value), the advice
/// under the value, then a summary line.
pub(crate) fn render(report: &Report) -> String {
    let name_width = report
        .findings
        .iter()
        .map(|f| f.name.len())
        .max()
        .unwrap_or(5)
        .max("check".len());
    let indent = STATUS_WIDTH + name_width + 2;
    let text_width = WIDTH.saturating_sub(indent).max(30);
    let pad = " ".repeat(indent);
    let mut out = format!(
        "{:<STATUS_WIDTH$}{:<name_width$}  value / advice\n",
        "status", "check"
    );
    for f in &report.findings {
        let mut lines = value_lines(f, text_width);
        let first = if lines.is_empty() {
            String::new()
        } else {
            lines.remove(0)
        };
        out.push_str(&format!(
            "{:<STATUS_WIDTH$}{:<name_width$}  {first}\n",
            f.status.as_str(),
            f.name
        ));
        for line in lines {
            out.push_str(&format!("{pad}{line}\n"));
        }
        if !f.advice.is_empty() {
            for line in wrap(&format!("→ {}", f.advice), text_width, 2) {
                out.push_str(&format!("{pad}{line}\n"));
            }
        }
    }
    let counts = [Status::Bad, Status::Warn, Status::Info]
        .iter()
        .filter_map(|s| {
            let n = report.count(*s);
            (n > 0).then(|| format!("{n} {s}"))
        })
        .collect::<Vec<_>>();
    out.push_str(&format!(
        "\n{} checks at {}: {}.\n",
        report.findings.len(),
        report.checked_at,
        if counts.is_empty() {
            "all ok".to_string()
        } else {
            counts.join(", ")
        }
    ));
    out
}

/// A finding's value, each of its lines wrapped.
fn value_lines(f: &Finding, width: usize) -> Vec<String> {
    f.value
        .lines()
        .flat_map(|line| wrap(line, width, 2))
        .collect()
}

/// Wraps `text` at spaces to `width` columns; continuation lines are indented by
/// `hang` spaces. A word longer than the width gets a line of its own.
fn wrap(text: &str, width: usize, hang: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let len = line.chars().count();
        if len > 0 && len + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
            line = " ".repeat(hang);
        }
        if !line.trim().is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.trim().is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_every_word_and_the_width() {
        let text = "one two three four five six seven eight nine ten";
        let lines = wrap(text, 12, 2);
        assert!(lines.iter().all(|l| l.chars().count() <= 12), "{lines:?}");
        assert_eq!(lines[0], "one two");
        assert!(lines[1].starts_with("  "), "{lines:?}");
        let words: Vec<&str> = lines.iter().flat_map(|l| l.split_whitespace()).collect();
        assert_eq!(words.join(" "), text);
        assert_eq!(
            wrap("averyveryverylongword x", 5, 2),
            vec!["averyveryverylongword", "  x"]
        );
    }

    #[test]
    fn render_aligns_and_summarizes() {
        let report = Report {
            schema: crate::SCHEMA.into(),
            checked_at: "2025-01-01T00:00:00Z".into(),
            findings: vec![
                Finding {
                    name: "cpus".into(),
                    status: Status::Ok,
                    value: "2 online".into(),
                    advice: String::new(),
                },
                Finding {
                    name: "open_files".into(),
                    status: Status::Warn,
                    value: "soft 1024, hard 4096".into(),
                    advice: "ulimit -n 4096".into(),
                },
            ],
            failed_checks: vec![],
        };
        let text = render(&report);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "status  check       value / advice");
        assert_eq!(lines[1], "ok      cpus        2 online");
        assert_eq!(lines[2], "warn    open_files  soft 1024, hard 4096");
        assert_eq!(lines[3], "                    → ulimit -n 4096");
        assert!(
            text.ends_with("2 checks at 2025-01-01T00:00:00Z: 1 warn.\n"),
            "{text}"
        );
    }
}
