//! The end of the HTML report: the overhead per request, the environment each cohort
//! recorded, and where the numbers come from (the command, the results directories, the
//! commands that produced them and what `rubyrace doctor` found on the machine).

use std::collections::BTreeSet;

use maud::{html, Markup};

use crate::format::fmt_sig;
use crate::model::Report;

/// The time each request of one cohort costs on top of the other's.
pub(super) fn overhead(report: &Report) -> Markup {
    let Some(o) = &report.overhead else {
        return html! {};
    };
    let more = o.us_per_request >= 0.0;
    html! {
        h2 #overhead { "Overhead per request" } "\n"
        p.overhead {
            b { (o.cohort) } " spends "
            b { (fmt_sig(o.us_per_request.abs())) " µs " @if more { "more" } @else { "less" } }
            " per request than " b { (o.baseline) }
            " (" (report.confidence_label()) " CI " (fmt_sig(o.ci_low)) " to "
            (fmt_sig(o.ci_high)) " µs; " (o.method) ", n = " (o.n)
            "). This is 1/rate − 1/rate of the two cohorts: the time each request costs on \
             top of the other."
        }
        "\n"
    }
}

/// What each cohort's trials recorded about themselves, against the baseline's.
pub(super) fn environment(report: &Report) -> Markup {
    if report.environment.is_empty() {
        return html! {};
    }
    let baseline = report
        .environment
        .iter()
        .find(|e| e.cohort == report.baseline);
    html! {
        h2 #environment { "Recorded environment and configuration" } "\n"
        p {
            "What the trials of each cohort recorded about themselves: configuration, verified \
             settings, versions, environment variables and the machine. Keys whose values \
             differ from the baseline’s are highlighted; a key with more than one value varied \
             within the cohort."
        }
        "\n"
        @for env in &report.environment {
            @let against = baseline.filter(|b| b.cohort != env.cohort);
            @let differs = against.map_or(0, |b| {
                let keys: BTreeSet<&String> = env.values.keys().chain(b.values.keys()).collect();
                keys.into_iter().filter(|k| env.values.get(*k) != b.values.get(*k)).count()
            });
            details {
                summary {
                    (env.cohort)
                    span.sub {
                        (env.values.len()) " keys"
                        @if env.cohort == report.baseline { " · baseline" }
                        @if differs > 0 { " · " (differs) " differ from the baseline" }
                    }
                }
                "\n"
                table {
                    "\n"
                    tbody {
                        "\n"
                        @for (key, values) in &env.values {
                            @let differs = against.is_some_and(|b| b.values.get(key) != Some(values));
                            @let varies = values.len() > 1;
                            tr class=[(differs || varies).then_some("differs")] {
                                td.key { (key) }
                                td.value {
                                    @for (i, v) in values.iter().enumerate() {
                                        @if i > 0 { br; }
                                        (v)
                                    }
                                    @if varies {
                                        span.mark { "varies within the cohort" }
                                    } @else if differs {
                                        span.mark { "≠ baseline" }
                                    }
                                }
                            }
                            "\n"
                        }
                    }
                }
            }
            "\n"
        }
    }
}

/// The command of this report, its results directories and the commands that made them.
pub(super) fn sources(report: &Report) -> Markup {
    html! {
        h2 #sources { "Sources and commands" } "\n"
        @if !report.command.is_empty() {
            h3 { "This report" } "\n"
            pre { code { (report.command) } } "\n"
        }
        @if !report.sources.is_empty() {
            h3 { "Results directories" } "\n"
            div.table-wrap {
                table {
                    "\n"
                    thead {
                        tr {
                            th { "Directory" } th { "Experiment" } th { "Design" }
                            th { "Created" } th { "Machines" } th.num { "Trials" }
                        }
                    }
                    "\n"
                    tbody {
                        "\n"
                        @for s in &report.sources {
                            tr {
                                td.value { (s.dir) }
                                td {
                                    (s.experiment)
                                    @if s.smoke { span.badge.smoke { "smoke" } }
                                }
                                td { (s.design) }
                                td { (s.created_at) }
                                td { (s.machines.join(", ")) }
                                td.num { (s.trials) }
                            }
                            "\n"
                        }
                    }
                }
            }
            "\n"
            @for line in crate::render::cells::design_lines(report) {
                p { (line) } "\n"
            }
            @for s in report.sources.iter().filter(|s| !s.commands.is_empty()) {
                h3 { "Commands that produced " code { (s.dir) } } "\n"
                pre { code { (s.commands.join("\n")) } } "\n"
            }
            @for s in &report.sources {
                @for d in &s.doctor {
                    (doctor_findings(&s.dir, d))
                }
            }
        }
    }
}

/// What `rubyrace doctor` found when a run (or a resume) started: every finding, so a reader
/// sees the machine the numbers came from, not only what was wrong with it.
fn doctor_findings(dir: &str, d: &doctor::Report) -> Markup {
    html! {
        h3 {
            "The machine for " code { (dir) } ": " code { "rubyrace doctor" } " at " (d.checked_at)
        }
        "\n"
        div.table-wrap {
            table.doctor {
                "\n"
                thead { tr { th { "Status" } th { "Check" } th { "Value and advice" } } }
                "\n"
                tbody {
                    "\n"
                    @for f in &d.findings {
                        tr {
                            td { span.kind { (f.status.as_str()) } }
                            td { (f.name) }
                            td.value {
                                @for (i, line) in f.value.split('\n').enumerate() {
                                    @if i > 0 { br; }
                                    (line)
                                }
                                @if !f.advice.is_empty() { br; small { "→ " (f.advice) } }
                            }
                        }
                        "\n"
                    }
                }
            }
        }
        "\n"
    }
}
