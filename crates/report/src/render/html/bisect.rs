//! A bisection's page (`bisect.html`, the k-section search of issue 48): the answer, the
//! chart of each measured commit's cost against good and its probability of being the first
//! bad commit, how the metric was chosen, and the tables of every commit measured and every
//! round; self-contained like the report's page (its style sheet, no script, no network).
//! The words and figures are the Markdown report's (`crate::bisect`), escaped by maud.

use maud::{html, Markup, DOCTYPE};
use results::bisect::BisectRecord;

use super::trusted;
use crate::bisect::{commit_rows, metric_rows, round_rows};
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
    let metrics = metric_rows(record);
    let commits = commit_rows(record);
    let rounds = round_rows(record);
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
                        p.meta { (record.commits.len()) " commits of " code { (record.repo.display().to_string()) }
                            ", configuration " code { (record.config) } " of " code { (record.experiment.display().to_string()) }
                            "; searched on " b { (record.metric.name()) } " for a change of at least "
                            (crate::format::confidence_text(record.min_change)) ", "
                            (record.candidates) " candidate" (if record.candidates == 1 { "" } else { "s" })
                            " per block beside the two ends, at most " (record.max_blocks) " blocks." }
                    }
                    "\n"
                    section id="answer" {
                        h2 { "The answer" }
                        @for paragraph in answer.split("\n\n").map(str::trim).filter(|p| !p.is_empty()) {
                            @if let Some(item) = paragraph.strip_prefix("- ") {
                                ul { li { (inline(&item.replace("**", ""))) } }
                            } @else if paragraph.starts_with("Skipped commit ") {
                                p.skipped { (inline(&paragraph.replace("**", ""))) }
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
                    section id="metric" {
                        h2 { "The metric" }
                        p { (inline(&crate::bisect::metric_choice(record))) }
                        @if !metrics.is_empty() {
                            div.table-wrap { table {
                                thead { tr { th { "metric" } th { "bad/good cost [interval]" } th { "per-block spread" } th { "regression/spread" } th { "blocks" } } }
                                tbody {
                                    @for m in &metrics {
                                        tr data-metric=(m.metric) {
                                            td { (m.metric)
                                                @if m.searched { span.badge { "searched" } }
                                                @if !m.shows_regression { span.badge { "no regression" } } }
                                            td.num { (m.ratio) } td.num { (m.spread) } td.num { (m.signal_to_noise) } td.num { (m.blocks) }
                                        }
                                    }
                                }
                            } }
                        }
                        p { (crate::bisect::settings(record)) }
                    }
                    "\n"
                    @if !commits.is_empty() {
                        section id="commits" {
                            h2 { "Every commit measured" }
                            div.table-wrap { table {
                                thead { tr { th { "#" } th { "commit" } th { "cost against good [95% interval]" } th { "blocks" } th { "first bad" } th { "note" } } }
                                tbody {
                                    @for r in &commits {
                                        tr class=[r.skipped.is_some().then_some("skipped")] data-commit=(r.commit) {
                                            td.num { (r.commit) }
                                            td.name { code { (r.hash) } " " (r.subject) }
                                            td.num { (r.cost) }
                                            td.num { (r.blocks.map(|b| b.to_string()).unwrap_or_default()) }
                                            td.num { (r.probability_text()) }
                                            td {
                                                @if r.named { span.bad { "first bad commit" } }
                                                @if let Some(end) = r.end { span.badge { (end) } }
                                                @if let Some(why) = &r.skipped { span.kind { "skipped" } (why) }
                                            }
                                        }
                                    }
                                }
                            } }
                        }
                        "\n"
                    }
                    section id="rounds" {
                        h2 { "Every round" }
                        @if !rounds.is_empty() {
                            div.table-wrap { table {
                                thead { tr { th { "round" } th { "commits" } th { "blocks" } th { "minutes" } th { "results" } } }
                                tbody {
                                    @for r in &rounds {
                                        tr data-round=(r.round) {
                                            td.num { (r.round) } td { (r.commits) } td.num { (r.blocks) }
                                            td.num { (format!("{:.1}", r.minutes)) } td { code { (r.dir) } }
                                        }
                                    }
                                }
                            } }
                        }
                        p { (crate::bisect::totals(record, None)) " Every round's trials are in its own results directory under "
                            code { "rounds/" } "; " code { "rubyrace report rounds/DIR" } " shows one in full." }
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

    #[test]
    fn the_page_has_the_answer_chart_and_tables_escaped() {
        let page = page(&crate::bisect::tests::record());
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(page.contains("<section id=\"answer\">"));
        assert!(page.contains(
            "<p>The first bad commit is <code>4abcdef01234</code> Use &lt;Vec&gt; for the cache (2026-01-05T10:00:00+00:00).</p>"
        ), "{page}");
        assert!(page.contains("1.0261× [1.0102–1.0423] (interval at the search's level, 6 blocks)"));
        assert!(page.contains("data-chart=\"bisect\"") && page.contains("data-answer=\"4-4\""));
        assert!(page.contains("data-skipped=\"2\""));
        // The skipped commit, in the answer and in the table, its backtick kept.
        assert!(
            page.contains("<p class=\"skipped\">Skipped commit 2, <code>2abcdef01234</code>"),
            "{page}"
        );
        assert!(page.contains(
            "<tr class=\"skipped\" data-commit=\"2\"><td class=\"num\">2</td><td class=\"name\"><code>2abcdef01234</code> commit number 2</td><td class=\"num\"></td><td class=\"num\"></td><td class=\"num\">–</td><td><span class=\"kind\">skipped</span>commit 2 does not boot: config.ru:1:in `&lt;main&gt;'</td></tr>"
        ), "{page}");
        // The named commit's row, with its probability.
        assert!(page.contains(
            "<tr data-commit=\"4\"><td class=\"num\">4</td><td class=\"name\"><code>4abcdef01234</code> Use &lt;Vec&gt; for the cache</td><td class=\"num\">1.0490× [1.0390–1.0590]</td><td class=\"num\">6</td><td class=\"num\">99.1%</td><td><span class=\"bad\">first bad commit</span></td></tr>"
        ), "{page}");
        assert!(page.contains(
            "<tr data-round=\"2\"><td class=\"num\">2</td><td>0, 3, 4, 6</td><td class=\"num\">6</td><td class=\"num\">5.5</td><td><code>rounds/02</code></td></tr>"
        ), "{page}");
        assert!(page.contains("<tr data-metric=\"cpu_per_request\">"));
        assert!(page.contains("14 blocks in 2 rounds, 13.5 minutes measuring."));
        assert!(!page.contains("<Vec>") && !page.contains("`<main>'"));
        assert_eq!(page.matches("<script").count(), 0);
    }

    #[test]
    fn a_search_not_begun_still_has_a_page() {
        let mut r = crate::bisect::tests::record();
        r.estimates.clear();
        r.rounds.clear();
        r.findings.clear();
        r.skipped.clear();
        r.outcome = None;
        let page = page(&r);
        assert!(page.contains("The search has not ended yet."));
        assert!(!page.contains("data-chart"));
        assert!(!page.contains("id=\"commits\""));
        assert!(page.contains("0 blocks in 0 rounds"));
    }
}
