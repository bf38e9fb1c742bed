//! A bisection's page (`bisect.html`): the answer, the chart of cost against good in commit
//! order, and the steps' table, self-contained like the report's page (its style sheet,
//! no script, no network).

use maud::{html, Markup, DOCTYPE};
use results::bisect::BisectRecord;

use super::trusted;
use crate::bisect::{ratio_text, rows};
use crate::charts::Chart;

/// The page.
pub fn page(record: &BisectRecord) -> String {
    let chart = crate::charts::bisect::bisect(record).map(|svg| Chart {
        name: "bisect",
        title: "Where the regression came in".into(),
        svg,
    });
    let title = format!("rubyrace bisect: {} .. {}", record.good_ref, record.bad_ref);
    let answer = crate::bisect::answer(record);
    let page = html! {
        (DOCTYPE) "\n"
        html lang="en" {
            "\n"
            (super::head(&title, "default-src 'none'; style-src 'unsafe-inline'; img-src data:"))
            "\n"
            body {
                "\n"
                main {
                    "\n"
                    header {
                        h1 { (title) }
                        p { (record.commits.len()) " commits of " code { (record.repo.display().to_string()) }
                            ", configuration " code { (record.config) } " of " code { (record.experiment.display().to_string()) }
                            "; decided on " (record.metric.name()) ", " (record.min_blocks) "–" (record.max_blocks) " blocks per decision." }
                    }
                    "\n"
                    section id="answer" {
                        h2 { "The answer" }
                        @for paragraph in answer.split("\n\n").filter(|p| !p.trim().is_empty()) {
                            @if let Some(item) = paragraph.trim().strip_prefix("- ") {
                                ul { li { (inline(&item.replace("**", ""))) } }
                            } @else {
                                p { (inline(&paragraph.replace("**", ""))) }
                            }
                        }
                    }
                    "\n"
                    @if let Some(chart) = &chart {
                        section id="chart" { figure { (trusted::chart(chart)) } }
                        "\n"
                    }
                    section id="steps" {
                        h2 { "Every step" }
                        table {
                            thead { tr { th { "step" } th { "commit" } th { "range" } th { "θ [interval]" } th { "cost against its good end" } th { "blocks" } th { "minutes" } th { "decision" } } }
                            tbody {
                                @for r in rows(record) {
                                    tr data-commit=(r.commit.map(|c| c.to_string()).unwrap_or_else(|| "ends".into())) {
                                        td { (r.step) } td { (r.what) } td { (r.range) } td { (r.theta) } td { (ratio_text(r.ratio)) }
                                        td { (r.blocks) } td { (format!("{:.1}", r.minutes)) } td { (r.decision) }
                                    }
                                }
                            }
                        }
                        p { "Every step's trials are in its own results directory under " code { "steps/" } "; "
                            code { "rubyrace report steps/DIR" } " shows one in full." }
                    }
                    "\n"
                    footer { "Made by rubyrace from bisect.json · this page is self-contained: no scripts, no network." }
                    "\n"
                }
                "\n"
            }
            "\n"
        }
        "\n"
    };
    page.into_string()
}

/// A piece of the Markdown answer: plain text, or a code span.
enum Inline<'a> {
    Text(&'a str),
    Code(&'a str),
}

/// Markdown's code spans as CommonMark reads them: a run of backticks opens one, the next
/// run of the same length closes it; a run with no partner is literal text. So the
/// answer's `` `HASH` `` becomes code, and a reason quoting Ruby's `` `eval' `` keeps its
/// backtick (every backtick was once dropped).
fn spans(text: &str) -> Vec<Inline<'_>> {
    let run_at = |i: usize| text[i..].bytes().take_while(|&b| b == b'`').count();
    let mut out = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < text.len() {
        if text.as_bytes()[i] != b'`' {
            i += 1;
            continue;
        }
        let n = run_at(i);
        // The closing run: the next run of exactly n backticks.
        let mut j = i + n;
        let close = loop {
            match text[j..].find('`') {
                None => break None,
                Some(k) => {
                    let m = run_at(j + k);
                    if m == n {
                        break Some(j + k);
                    }
                    j += k + m;
                }
            }
        };
        match close {
            Some(c) => {
                if start < i {
                    out.push(Inline::Text(&text[start..i]));
                }
                let inner = &text[i + n..c];
                let trimmed = if inner.len() > 1 && inner.starts_with(' ') && inner.ends_with(' ') {
                    &inner[1..inner.len() - 1]
                } else {
                    inner
                };
                out.push(Inline::Code(trimmed));
                i = c + n;
                start = i;
            }
            None => i += n,
        }
    }
    if start < text.len() {
        out.push(Inline::Text(&text[start..]));
    }
    out
}

fn inline(text: &str) -> Markup {
    html! {
        @for piece in spans(text) {
            @match piece {
                Inline::Text(t) => (t),
                Inline::Code(c) => code { (c) },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_spans_are_code_and_a_lone_backtick_stays() {
        assert_eq!(
            inline("commit `abc123` failed: from config.ru:1:in `eval'").into_string(),
            "commit <code>abc123</code> failed: from config.ru:1:in `eval'"
        );
        assert_eq!(
            inline("`` `eval' `` and `x`").into_string(),
            "<code>`eval'</code> and <code>x</code>"
        );
        assert_eq!(inline("no code").into_string(), "no code");
    }
}
