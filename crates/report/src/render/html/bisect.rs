//! A bisection's page (`bisect.html`): the answer, the chart of cost against good in commit
//! order, and the steps' table, self-contained like the report's page (its style sheet,
//! no script, no network).

use maud::{html, DOCTYPE};
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
                                ul { li { (item.replace("**", "").replace('`', "")) } }
                            } @else {
                                p { (paragraph.replace("**", "").replace('`', "")) }
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
