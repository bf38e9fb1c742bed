//! The history as pages (docs/history.md, "The pages and the board"): one offline page per
//! experiment (`rubyrace history show --format html`), and the board of `rubyrace history
//! site DIR`: those pages, an index of every series' latest value and change, and each
//! run's report, so the directory can be published as it is (a team's own speed.yjit.org).
//!
//! Every page is self-contained like the report's: its style sheet, inline SVG, no script,
//! no network (the same Content-Security-Policy). Strings from the history (experiment
//! names, labels, subjects) are escaped by maud, or by the chart helpers in the SVG.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use maud::{html, Markup, PreEscaped, DOCTYPE};

use crate::chart::{self, figure, percent, Link};
use crate::series::{Analysis, Drift, Series, SeriesPoint};

/// No script, no network: the report's policy.
const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:";

/// The board's own style, beside the report's.
const STYLE: &str = "svg.spark{vertical-align:middle} td.alert{color:#B2182B;font-weight:600} code.cmd{white-space:pre-wrap;word-break:break-all}";

/// What the pages are made of: the series with their changes, by experiment.
pub struct Board<'a> {
    pub history: &'a Path,
    pub runs: usize,
    pub series: &'a [(Series, Analysis)],
    /// A change is new when its first point after is among this many newest points (the
    /// index marks it, as `history check --near` does).
    pub near: usize,
}

/// An experiment on the board: its name, its page's file name, its series.
struct Experiment<'a> {
    name: &'a str,
    file: String,
    series: Vec<&'a (Series, Analysis)>,
}

impl Board<'_> {
    /// The experiments, each with its series, in name order; each page's file name is
    /// `page_name`'s, made unique (`a b` and `a-b` are `a-b.html` and `a-b-2.html`) and
    /// never `index.html`.
    fn experiments(&self) -> Vec<Experiment<'_>> {
        let mut by: BTreeMap<&str, Vec<&(Series, Analysis)>> = BTreeMap::new();
        for s in self.series {
            by.entry(s.0.experiment.as_str()).or_default().push(s);
        }
        let mut taken = std::collections::BTreeSet::from(["index.html".to_string()]);
        by.into_iter()
            .map(|(name, series)| {
                let base = page_name(name);
                let mut file = base.clone();
                let mut k = 2;
                while !taken.insert(file.clone()) {
                    file = format!("{}-{k}.html", base.trim_end_matches(".html"));
                    k += 1;
                }
                Experiment { name, file, series }
            })
            .collect()
    }
}

/// What was written.
#[derive(Debug, Default)]
pub struct Written {
    pub pages: Vec<PathBuf>,
    /// Run reports rendered now, kept from before (their results had not changed), and
    /// runs without a report (their results directory is gone or unreadable).
    pub reports_rendered: usize,
    pub reports_kept: usize,
    pub reports_missing: Vec<String>,
}

/// An experiment's page's file name: its name with anything but letters, digits, `-` and
/// `_` as `-`.
pub fn page_name(experiment: &str) -> String {
    let slug: String = experiment
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!(
        "{}.html",
        if slug.is_empty() { "experiment" } else { &slug }
    )
}

/// `rubyrace history show --format html`: a page per experiment in `dir`, each point
/// linking to its run's `report.html` where the run has one beside its results.
pub fn write_pages(board: &Board, dir: &Path) -> Result<Written> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    // A run's report.html, or a bisection's bisect.html, where there is one.
    let link = |p: &SeriesPoint| {
        ["report.html", "bisect.html"]
            .iter()
            .map(|page| Path::new(&p.dir).join(page))
            .find(|page| page.is_file())
            .map(|page| format!("file://{}", page.display()))
    };
    let mut written = Written::default();
    for e in board.experiments() {
        let path = dir.join(&e.file);
        write(
            &path,
            &experiment_page(board, e.name, &e.series, &link, None),
        )?;
        written.pages.push(path);
    }
    Ok(written)
}

/// `rubyrace history site DIR`: the board. `index.html`, a page per experiment, and
/// `runs/ID.html`, each run's report, rendered from its results directory (again only when
/// its results changed since; a run whose directory is gone keeps the report it had, or
/// has none).
pub fn write_site(board: &Board, dir: &Path) -> Result<Written> {
    let runs_dir = dir.join("runs");
    std::fs::create_dir_all(&runs_dir)
        .with_context(|| format!("cannot create {}", runs_dir.display()))?;
    let mut written = Written::default();
    let mut seen = std::collections::BTreeSet::new();
    for (series, _) in board.series {
        for p in &series.points {
            if seen.insert(p.run_id) {
                match render_report(p, &runs_dir) {
                    Ok(Some(true)) => written.reports_rendered += 1,
                    Ok(Some(false)) => written.reports_kept += 1,
                    Ok(None) => written.reports_missing.push(p.dir.clone()),
                    Err(e) => {
                        written.reports_missing.push(format!("{}: {e:#}", p.dir));
                    }
                }
            }
        }
    }
    let link = |p: &SeriesPoint| {
        runs_dir
            .join(format!("{}.html", p.run_id))
            .is_file()
            .then(|| format!("runs/{}.html", p.run_id))
    };
    for e in board.experiments() {
        let path = dir.join(&e.file);
        write(
            &path,
            &experiment_page(board, e.name, &e.series, &link, Some("index.html")),
        )?;
        written.pages.push(path);
    }
    let index = dir.join("index.html");
    write(&index, &index_page(board))?;
    written.pages.insert(0, index);
    Ok(written)
}

/// Renders the report of `p`'s run (the bisection's page for a bisection's commit) into
/// `runs/ID.html`: Some(true) rendered, Some(false) kept (newer than its results, or its
/// results are gone), None when its results cannot be read and none was rendered before.
fn render_report(p: &SeriesPoint, runs_dir: &Path) -> Result<Option<bool>> {
    let out = runs_dir.join(format!("{}.html", p.run_id));
    let dir = Path::new(&p.dir);
    // A bisection's commit links to the bisection's page; a run's or a check's, to its report.
    let bisect = dir.join(results::bisect::BISECT_FILE);
    let source = if bisect.is_file() {
        bisect
    } else {
        dir.join("results.db")
    };
    let Ok(changed) = std::fs::metadata(&source).and_then(|m| m.modified()) else {
        // Gone (a CI job's results are): the report rendered while it was there stays.
        return Ok(out.is_file().then_some(false));
    };
    if let Ok(made) = std::fs::metadata(&out).and_then(|m| m.modified()) {
        if made >= changed {
            return Ok(Some(false));
        }
    }
    let html = if source.ends_with(results::bisect::BISECT_FILE) {
        report::render::html::bisect::page(&results::bisect::BisectRecord::read(dir)?)
    } else {
        let options = report::Options {
            command: "rubyrace history site".into(),
            ..report::Options::default()
        };
        report::build_rendered(&[dir.to_path_buf()], &options, report::render::Format::Html)?
    };
    write(&out, &html)?;
    Ok(Some(true))
}

fn write(path: &Path, text: &str) -> Result<()> {
    results::write_atomically(path, text.as_bytes())
}

fn page(title: &str, body: Markup) -> String {
    html! {
        (DOCTYPE) "\n"
        html lang="en" {
            "\n"
            (report::render::html::head(title, CSP))
            "\n"
            body { "\n" style { (PreEscaped(STYLE)) } "\n" main { "\n" (body) "\n" } "\n" }
            "\n"
        }
        "\n"
    }
    .into_string()
}

/// The newest point's figure with its interval, and its commit.
fn newest_cell(series: &Series) -> Markup {
    match series.points.last() {
        None => html! { td { "–" } },
        Some(p) => html! {
            td.num {
                (figure(series, p.value))
                span.sub { "[" (figure(series, p.lo)) "–" (figure(series, p.hi)) "] " code { (p.commit_short()) } }
            }
        },
    }
}

/// The latest change of a series, or its drift when that reaches the newest points (a
/// slide still going on), as a cell; alerting when it is among the newest points.
fn latest_change_cell(series: &Series, found: &Analysis, near: usize) -> Markup {
    let newest = series.points.len();
    if let Some(d) = sliding(series, found, near) {
        let class = if d.worse { "alert" } else { "better" };
        return html! {
            td class=(class) {
                "drift " (percent(d.factor)) " [" (percent(d.factor_low)) ", " (percent(d.factor_high)) "] · sliding"
                span.sub { "over " (d.end - d.start) " points from " code { (d.first.commit_short()) } " " (d.first.subject) }
            }
        };
    }
    let Some(c) = found.changes.last() else {
        return html! { td.same { "no change found" } };
    };
    let new = c.index + near >= newest;
    let class = match (c.worse, new) {
        (true, true) => "alert",
        (true, false) => "worse",
        (false, _) => "better",
    };
    html! {
        td class=(class) {
            (percent(c.factor)) " [" (percent(c.factor_low)) ", " (percent(c.factor_high)) "]"
            @if new { " · new" }
            span.sub { "at " code { (c.after.commit_short()) } " " (c.after.subject) }
        }
    }
}

/// A series' drift that reaches its `near` newest points and began after its last change
/// (as `history check` alerts on it).
fn sliding<'a>(series: &Series, found: &'a Analysis, near: usize) -> Option<&'a Drift> {
    let last_change = found.changes.last().map_or(0, |c| c.index);
    found
        .drifts
        .iter()
        .rev()
        .find(|d| d.end + near > series.points.len() && d.start >= last_change)
}

/// The page of one experiment: a table of its series, then each series' chart and changes.
fn experiment_page(
    board: &Board,
    experiment: &str,
    series: &[&(Series, Analysis)],
    link: Link,
    index: Option<&str>,
) -> String {
    let title = format!("rubyrace history: {experiment}");
    let runs: std::collections::BTreeSet<i64> = series
        .iter()
        .flat_map(|(s, _)| s.points.iter().map(|p| p.run_id))
        .collect();
    let body = html! {
        header {
            @if let Some(index) = index { p.kicker { a href=(index) { "← every experiment" } } }
            h1 { (title) }
            p.meta { b { (series.len()) } " series from " b { (runs.len()) } " runs of "
                code { (board.history.display().to_string()) } ", in commit order" }
        }
        "\n"
        section id="series" {
            h2 { "Series" }
            div.table-wrap { table {
                thead { tr { th { "series" } th { "points" } th { "newest" } th { "latest change" } } }
                tbody {
                    @for (i, (s, found)) in series.iter().enumerate() {
                        tr {
                            th { a href=(format!("#series-{i}")) { (s.label) " · " (s.metric) }
                                @if let Some(h) = &s.host_kind { span.sub { "host " (h) } } }
                            td.num { (s.points.len()) }
                            (newest_cell(s))
                            (latest_change_cell(s, found, board.near))
                        }
                    }
                }
            } }
        }
        @for (i, (s, found)) in series.iter().enumerate() {
            @let changes = &found.changes;
            "\n"
            section id=(format!("series-{i}")) {
                h2 { (s.label) " · " (s.metric) }
                figure { (PreEscaped(chart::series_chart(s, found, &format!("series-{i}"), link))) }
                @if !found.drifts.is_empty() {
                    div.table-wrap { table {
                        thead { tr { th { "drift" } th { "p" } th { "from" } th { "to" } th { "points" } } }
                        tbody {
                            @for d in &found.drifts {
                                tr {
                                    td class=(if d.worse { "worse" } else { "better" }) {
                                        (percent(d.factor)) span.sub { "95% " (percent(d.factor_low)) " to " (percent(d.factor_high)) } }
                                    td.num { (chart::p_value_text(d.p_value)) }
                                    td { code { (d.first.commit_short()) } " " (d.first.subject) }
                                    td { code { (d.last.commit_short()) } " " (d.last.subject) }
                                    td.num { (d.end - d.start) " (a slide: no one commit to bisect)" }
                                }
                            }
                        }
                    } }
                }
                @if changes.is_empty() {
                    p { "No change found in " (s.points.len()) " points." }
                } @else {
                    div.table-wrap { table {
                        thead { tr { th { "change" } th { "p" } th { "last before" } th { "first after" } th { "to settle the commits between" } } }
                        tbody {
                            @for c in changes {
                                tr {
                                    td class=(if c.worse { "worse" } else { "better" }) {
                                        (percent(c.factor)) span.sub { "95% " (percent(c.factor_low)) " to " (percent(c.factor_high)) } }
                                    td.num { (chart::p_value_text(c.p_value)) }
                                    td { code { (c.before.commit_short()) } " " (c.before.subject) }
                                    td { code { (c.after.commit_short()) } " " (c.after.subject) }
                                    td { @match (&c.bisect, c.commits_between) {
                                        (Some(b), _) => code.cmd { (b) },
                                        (None, Some(0)) => "adjacent commits: the first after is the change",
                                        (None, _) => "–",
                                    } }
                                }
                            }
                        }
                    } }
                }
            }
        }
        footer { "Made by rubyrace history from " (board.history.display().to_string()) " · " (board.runs) " runs" }
    };
    page(&title, body)
}

/// The board's index: every experiment's series with the newest figure, a sparkline and
/// the latest change.
fn index_page(board: &Board) -> String {
    let experiments = board.experiments();
    let new: usize = board
        .series
        .iter()
        .filter(|(s, found)| {
            let changed = found
                .changes
                .last()
                .is_some_and(|c| c.worse && c.index + board.near >= s.points.len());
            changed || sliding(s, found, board.near).is_some_and(|d| d.worse)
        })
        .count();
    let body = html! {
        header {
            h1 { "rubyrace history" }
            p.meta { b { (experiments.len()) } " experiments, " b { (board.series.len()) } " series, "
                b { (board.runs) } " runs · "
                @if new == 0 { "no new change for the worse at the newest commits" }
                @else { b { (new) } " series with a new change or a drift for the worse" } }
        }
        @for e in &experiments {
            "\n"
            section {
                h2 { a href=(e.file) { (e.name) } }
                div.table-wrap { table {
                    thead { tr { th { "series" } th { "last 30" } th { "newest" } th { "latest change" } } }
                    tbody {
                        @for (s, found) in &e.series {
                            tr {
                                th { (s.label) " · " (s.metric) @if let Some(h) = &s.host_kind { span.sub { "host " (h) } } }
                                td { (PreEscaped(chart::sparkline(s, 30))) }
                                (newest_cell(s))
                                (latest_change_cell(s, found, board.near))
                            }
                        }
                    }
                } }
            }
        }
        footer { "Made by rubyrace history site from " (board.history.display().to_string()) }
    };
    page("rubyrace history", body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::series::{analyse, tests::sliding, tests::stepped};

    /// A sliding series' page: the drift's line through the stretch in place of its level,
    /// and the drift's row with its size and no bisection.
    #[test]
    fn a_drift_is_drawn_as_its_line_and_listed_without_a_bisection() {
        let series = sliding();
        let found = analyse(&series, &stats::changepoint::Settings::default());
        assert_eq!((found.changes.len(), found.drifts.len()), (0, 1));
        let all = vec![(series, found)];
        let board = Board {
            history: Path::new("perf/history.db"),
            runs: 30,
            series: &all,
            near: 2,
        };
        let dir = tempfile::tempdir().unwrap();
        let written = write_pages(&board, dir.path()).unwrap();
        let page = std::fs::read_to_string(&written.pages[0]).unwrap();
        assert_eq!(page.matches("data-drift=\"0-29\"").count(), 1, "{page}");
        assert_eq!(page.matches("data-level=").count(), 0, "{page}");
        assert!(
            page.contains("(a slide: no one commit to bisect)"),
            "{page}"
        );
        assert!(!page.contains("rubyrace bisect"), "{page}");
        // The line falls: its end is lower on the value axis, so further down the SVG.
        let line = &page[page.find("data-drift=").unwrap()..];
        let attr = |name: &str| -> f64 {
            let at = line.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
            line[at..at + line[at..].find('"').unwrap()]
                .parse()
                .unwrap()
        };
        assert!(attr("y2") > attr("y1"), "{line}");

        // The board's index: the series is still sliding, for the worse.
        let site = dir.path().join("site");
        write_site(&board, &site).unwrap();
        let index = std::fs::read_to_string(site.join("index.html")).unwrap();
        assert!(
            index.contains("1</b> series with a new change or a drift for the worse"),
            "{index}"
        );
        assert!(index.contains("<td class=\"alert\">drift −"), "{index}");
        assert!(index.contains("· sliding"), "{index}");
    }

    #[test]
    fn the_pages_show_every_point_and_change_escaped_and_link_only_to_reports_there_are() {
        let mut series = stepped();
        series.points[29].subject = "Use <Vec> & \"friends\"".into();
        let changes = analyse(&series, &stats::changepoint::Settings::default());
        assert_eq!(changes.changes.len(), 2);
        assert!(changes.drifts.is_empty());
        let all = vec![(series, changes)];
        let dir = tempfile::tempdir().unwrap();
        // One run's results directory with a report beside it: only its point links.
        let run = dir.path().join("run-3");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(run.join("report.html"), "<p>report</p>").unwrap();
        let mut all = all;
        all[0].0.points[3].dir = run.display().to_string();
        let board = Board {
            history: Path::new("perf/history.db"),
            runs: 30,
            series: &all,
            near: 2,
        };

        let written = write_pages(&board, &dir.path().join("pages")).unwrap();
        assert_eq!(written.pages, vec![dir.path().join("pages/nightly.html")]);
        let page = std::fs::read_to_string(&written.pages[0]).unwrap();
        assert_eq!(page.matches("data-point=").count(), 30, "{page}");
        assert_eq!(page.matches("<g data-change=").count(), 2);
        assert!(page.contains("data-change=\"12\" data-worse=\"false\""));
        assert!(page.contains("data-change=\"22\" data-worse=\"true\""));
        assert_eq!(page.matches("<a href=\"file://").count(), 1);
        assert!(page.contains(&format!(
            "<a href=\"file://{}/report.html\">",
            run.display()
        )));
        assert!(
            page.contains("Use &lt;Vec&gt; &amp; &quot;friends&quot;"),
            "{page}"
        );
        assert!(!page.contains("<Vec>"));
        // The change for the worse, and its bisection between commits two apart.
        assert!(page.contains("<td class=\"worse\">−"), "{page}");
        assert!(page.contains("rubyrace bisect /perf/nightly.toml"));

        // The board: an index, the page, and no run report (no results.db anywhere).
        let site = dir.path().join("site");
        let written = write_site(&board, &site).unwrap();
        assert_eq!(
            written.pages,
            vec![site.join("index.html"), site.join("nightly.html")]
        );
        assert_eq!(
            (written.reports_rendered, written.reports_missing.len()),
            (0, 30)
        );
        let index = std::fs::read_to_string(site.join("index.html")).unwrap();
        assert!(
            index.contains("<a href=\"nightly.html\">nightly</a>"),
            "{index}"
        );
        assert_eq!(index.matches("class=\"spark\"").count(), 1);
        // The newest change is 8 points back: not new with --near 2.
        assert!(index.contains("no new change for the worse"), "{index}");
        assert!(!std::fs::read_to_string(site.join("nightly.html"))
            .unwrap()
            .contains("<a href=\"runs/"));
    }

    #[test]
    fn experiments_whose_names_clash_get_pages_of_their_own() {
        let mut a = stepped();
        a.experiment = "a b".into();
        let mut b = stepped();
        b.experiment = "a-b".into();
        let mut c = stepped();
        c.experiment = "index".into();
        let all: Vec<(Series, Analysis)> = [a, b, c]
            .into_iter()
            .map(|s| (s, Analysis::default()))
            .collect();
        let board = Board {
            history: Path::new("h.db"),
            runs: 90,
            series: &all,
            near: 2,
        };
        let files: Vec<String> = board.experiments().into_iter().map(|e| e.file).collect();
        assert_eq!(files, vec!["a-b.html", "a-b-2.html", "index-2.html"]);
    }

    #[test]
    fn page_names_are_safe_file_names() {
        assert_eq!(page_name("nightly"), "nightly.html");
        assert_eq!(page_name("../etc/passwd"), "---etc-passwd.html");
        assert_eq!(page_name("a b/c"), "a-b-c.html");
        assert_eq!(page_name(""), "experiment.html");
    }
}
