//! `rubyrace history`: every run remembered by commit (docs/history.md). `add` imports
//! results directories into the history file; `show` prints each series' last points and its
//! changes (text or JSON); `check` exits 1 when a change not reported before lands at or
//! near the newest commit of a series, for a nightly job. The work is the `history` crate's.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use history::store::Added;
use history::{Analysis, Change, Drift, History, Series};
use stats::changepoint::Settings;

#[derive(clap::Subcommand, Debug)]
pub enum HistoryCommand {
    /// Add results directories (runs and checks) to the history; one added again is the
    /// same run, its points replaced by what the directory holds now.
    Add(AddArgs),
    /// Each series' last points as a sparkline, its changes with their size and interval,
    /// and the bisection that would settle each.
    Show(ShowArgs),
    /// Exit 1 when a change not reported before, at least --threshold in size, lands at or
    /// near the newest commit of a series (the nightly job's alert); 0 otherwise.
    Check(CheckArgs),
    /// Write the board to DIR: an index of every series' newest figure and latest change, a
    /// page per experiment, and each run's report, to publish as it is.
    Site(SiteArgs),
}

#[derive(clap::Args, Debug)]
pub struct HistoryFile {
    /// The history file (SQLite; created when missing).
    #[arg(
        long = "history",
        value_name = "FILE",
        default_value = "perf/history.db"
    )]
    pub path: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct AddArgs {
    #[command(flatten)]
    pub file: HistoryFile,
    /// Results directories of `rubyrace run` or `rubyrace check`.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct ShowArgs {
    #[command(flatten)]
    pub file: HistoryFile,
    /// `text`, `json`, or `html` (a page per experiment, written into --output).
    #[arg(long, default_value = "text", value_parser = ["text", "json", "html"])]
    pub format: String,
    /// Points per series in the sparkline.
    #[arg(long, default_value_t = 30)]
    pub last: usize,
    /// With --format html: the directory the pages are written into.
    #[arg(short, long, value_name = "DIR", default_value = "history-html")]
    pub output: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct SiteArgs {
    #[command(flatten)]
    pub file: HistoryFile,
    /// The directory to write (created when missing; its run reports are kept and rendered
    /// again only when their results changed).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// A change is marked new when its first point after is among this many newest points.
    #[arg(long, default_value_t = 2)]
    pub near: usize,
}

#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    #[command(flatten)]
    pub file: HistoryFile,
    /// The smallest change that alerts, as a percentage of the level before.
    #[arg(long, default_value = "3%", value_parser = crate::invocation::parse_percent)]
    pub threshold: f64,
    /// A change alerts when its first point after is among this many newest points.
    #[arg(long, default_value_t = 2)]
    pub near: usize,
    /// Alert on improvements too (by default only on changes for the worse).
    #[arg(long)]
    pub both: bool,
    /// Append the Markdown summary to FILE (GitHub's $GITHUB_STEP_SUMMARY).
    #[arg(long, value_name = "FILE")]
    pub summary: Option<PathBuf>,
}

pub fn history(command: HistoryCommand) -> Result<ExitCode> {
    let outcome = match command {
        HistoryCommand::Add(args) => add(&args),
        HistoryCommand::Show(args) => show(&args),
        HistoryCommand::Check(args) => check(&args),
        HistoryCommand::Site(args) => site(&args),
    };
    outcome.or_else(|e| {
        eprintln!("rubyrace: error: {e:#}");
        Ok(ExitCode::from(2))
    })
}

fn add(args: &AddArgs) -> Result<ExitCode> {
    let mut history = History::open(&args.file.path)?;
    let mut failed = 0;
    for dir in &args.dirs {
        match add_dir(&mut history, dir) {
            Ok(said) => println!("{}: {said}", dir.display()),
            Err(e) => {
                failed += 1;
                eprintln!("rubyrace: error: {e:#}");
            }
        }
    }
    println!("{}: {} runs", args.file.path.display(), history.runs()?);
    Ok(if failed > 0 {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

/// Adds what `dir` holds (a run, a check, or a bisection's commits), and says what.
fn add_dir(history: &mut History, dir: &Path) -> Result<String> {
    let runs = history::read_dir(dir)?;
    let (mut new, mut updated, mut points) = (0, 0, 0);
    for run in &runs {
        match history.add(run)? {
            Added::New { points: p } => (new, points) = (new + 1, points + p),
            Added::Updated { points: p } => (updated, points) = (updated + 1, points + p),
        }
    }
    let first = &runs[0];
    if first.kind == "bisect" {
        return Ok(format!(
            "bisect {}: {} commits ({new} added, {updated} already there: updated)",
            first.experiment,
            runs.len()
        ));
    }
    let commit = first
        .commit
        .as_ref()
        .map(|c| c.hash.chars().take(12).collect::<String>())
        .unwrap_or_else(|| "no commit".into());
    let what = if new > 0 {
        format!("added, {points} points")
    } else {
        format!("already there: updated, {points} points")
    };
    Ok(format!(
        "{} {} at {commit}: {what}",
        first.kind, first.experiment
    ))
}

/// `run`, `check` and `bisect` with `--history FILE`: adds the finished run in `dir` to the
/// history, saying so on stderr; a failure to add is said and leaves the run's own exit
/// status as it is (its results are stored; `history add` adds them later).
pub fn add_after(dir: &Path, file: &Path) {
    let added = History::open(file).and_then(|mut history| {
        add_dir(&mut history, dir)?;
        history.runs()
    });
    match added {
        Ok(runs) => eprintln!(
            "rubyrace: added to the history {} ({runs} runs)",
            file.display()
        ),
        Err(e) => eprintln!(
            "rubyrace: error: not added to the history {}: {e:#}; add it later with `rubyrace history add --history {} {}`",
            file.display(),
            file.display(),
            dir.display()
        ),
    }
}

/// A series and the changes and drifts found in it.
type Analysed = (Series, Analysis);

/// The history's series, each with its changes: whole, or only their `recent` newest
/// points (`History::series_recent`).
fn analysed(path: &Path, recent: Option<usize>) -> Result<(History, Vec<Analysed>)> {
    if !path.exists() {
        anyhow::bail!(
            "{} does not exist: `rubyrace history add --history {} DIR...` starts it",
            path.display(),
            path.display()
        );
    }
    let history = History::open(path)?;
    let settings = Settings::default();
    let series = match recent {
        Some(last) => history.series_recent(last)?,
        None => history.series()?,
    };
    let all = series
        .into_iter()
        .map(|s| {
            let changes = history::analyse(&s, &settings);
            (s, changes)
        })
        .collect();
    Ok((history, all))
}

fn show(args: &ShowArgs) -> Result<ExitCode> {
    let (history, all) = analysed(&args.file.path, None)?;
    if args.format == "html" {
        let board = history::site::Board {
            history: &args.file.path,
            runs: history.runs()?,
            series: &all,
            near: 2,
        };
        let written = history::site::write_pages(&board, &args.output)?;
        for page in &written.pages {
            println!("{}", page.display());
        }
        return Ok(ExitCode::SUCCESS);
    }
    if args.format == "json" {
        let series: Vec<serde_json::Value> = all
            .iter()
            .map(|(s, found)| {
                serde_json::json!({ "series": s, "changes": found.changes, "drifts": found.drifts })
            })
            .collect();
        let doc = serde_json::json!({
            "schema": "rubyrace.history/1",
            "runs": history.runs()?,
            "series": series,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{}: {} runs, {} series",
        args.file.path.display(),
        history.runs()?,
        all.len()
    );
    for (series, found) in &all {
        println!();
        print!("{}", series_text(series, found, args.last));
    }
    Ok(ExitCode::SUCCESS)
}

/// A series in the terminal: its name, the sparkline of its last points, the newest point,
/// every change, and every drift.
fn series_text(series: &Series, found: &Analysis, last: usize) -> String {
    let changes = &found.changes;
    let mut out = String::new();
    let points = &series.points;
    let Some(newest) = points.last() else {
        return out;
    };
    let shown = &points[points.len().saturating_sub(last.max(1))..];
    out.push_str(&format!(
        "{} ({} points)\n  {}  {}\n",
        series.key,
        points.len(),
        sparkline(&shown.iter().map(|p| p.value).collect::<Vec<_>>()),
        point_text(series, newest)
    ));
    if changes.is_empty() {
        out.push_str("  no change found\n");
    }
    for d in &found.drifts {
        out.push_str(&format!("  {}\n", drift_text(series, d)));
    }
    for c in changes {
        out.push_str(&format!("  {}\n", change_text(series, c)));
        if let Some(b) = &c.bisect {
            out.push_str(&format!("    bisect: {b}\n"));
        }
    }
    out
}

fn point_text(series: &Series, p: &history::SeriesPoint) -> String {
    let figure = |v| history::chart::figure(series, v);
    format!(
        "{} [{}–{}] at {} {}",
        figure(p.value),
        figure(p.lo),
        figure(p.hi),
        p.commit_short(),
        quoted(&p.subject)
    )
}

fn change_text(series: &Series, c: &Change) -> String {
    let direction = if c.worse { "worse" } else { "better" };
    let between = match c.commits_between {
        Some(0) => "adjacent commits".to_string(),
        Some(n) => format!("{n} commits between"),
        None => "commits between not known".to_string(),
    };
    format!(
        "change ({direction}) of {} by {:.3}× [{:.3}–{:.3}] (p {}): last before {} {}, first after {} {}; {between}",
        series.metric,
        c.factor,
        c.factor_low,
        c.factor_high,
        history::chart::p_value_text(c.p_value),
        c.before.commit_short(),
        quoted(&c.before.subject),
        c.after.commit_short(),
        quoted(&c.after.subject),
    )
}

/// A drift in a line: its size from the stretch's first point to its last, and both.
fn drift_text(series: &Series, d: &Drift) -> String {
    let direction = if d.worse { "worse" } else { "better" };
    format!(
        "drift ({direction}) of {} by {:.3}× [{:.3}–{:.3}] (p {}) over {} points, from {} {} to {} {}: a slide, no one commit to bisect",
        series.metric,
        d.factor,
        d.factor_low,
        d.factor_high,
        history::chart::p_value_text(d.p_value),
        d.end - d.start,
        d.first.commit_short(),
        quoted(&d.first.subject),
        d.last.commit_short(),
        quoted(&d.last.subject),
    )
}

fn quoted(subject: &str) -> String {
    if subject.is_empty() {
        String::new()
    } else {
        format!("{subject:?}")
    }
}

/// Values as a line of block characters, lowest to highest.
fn sparkline(values: &[f64]) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let (lo, hi) = values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
            (l.min(*v), h.max(*v))
        });
    values
        .iter()
        .map(|v| {
            if hi > lo {
                BARS[(((v - lo) / (hi - lo)) * 7.0).round() as usize]
            } else {
                BARS[3]
            }
        })
        .collect()
}

fn site(args: &SiteArgs) -> Result<ExitCode> {
    let (history, all) = analysed(&args.file.path, None)?;
    let board = history::site::Board {
        history: &args.file.path,
        runs: history.runs()?,
        series: &all,
        near: args.near,
    };
    let written = history::site::write_site(&board, &args.dir)?;
    println!(
        "{}: {} pages; run reports: {} rendered, {} unchanged",
        args.dir.join("index.html").display(),
        written.pages.len(),
        written.reports_rendered,
        written.reports_kept
    );
    if let Some(first) = written.reports_missing.first() {
        eprintln!(
            "rubyrace: {} runs have no report, their results directories being gone or unreadable (the first: {first}); their points link nowhere",
            written.reports_missing.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn check(args: &CheckArgs) -> Result<ExitCode> {
    // Only changes at the newest commits alert: each series' newest window is enough (a
    // change's index is then counted from the window's start, as its newest point is).
    let (mut history, all) = analysed(&args.file.path, Some(stats::changepoint::WINDOW))?;
    let mut alerts: Vec<(&Series, &Change)> = Vec::new();
    // Each with where its stretch begins: the change before it, or the series' start.
    let mut slides: Vec<(&Series, &Drift, usize)> = Vec::new();
    for (series, found) in &all {
        let newest = series.points.len();
        let alerting = |factor: f64, worse: bool| {
            (factor - 1.0).abs() >= args.threshold && (worse || args.both)
        };
        for c in &found.changes {
            if c.index + args.near >= newest && alerting(c.factor, c.worse) {
                alerts.push((series, c));
            }
        }
        // A drift that reaches the newest points: still sliding.
        for d in &found.drifts {
            if d.end + args.near > newest && alerting(d.factor, d.worse) {
                let since = found
                    .changes
                    .iter()
                    .rev()
                    .find(|c| c.index <= d.start)
                    .map_or(0, |c| c.index);
                slides.push((series, d, since));
            }
        }
    }
    let mut new = Vec::new();
    for (series, c) in alerts {
        let after = c
            .after
            .commit
            .clone()
            .unwrap_or_else(|| c.after.dir.clone());
        if !history.reported(&series.key, &after)? {
            new.push((series, c));
            history.mark_reported(&series.key, &after)?;
        }
    }
    // A drift is reported once, by where it starts, however far it slides on: where its
    // start is found may move with the nights added (earlier or later), so a drift reported
    // from any point since the change before it (or the series' start) is the same one.
    let drift_key = |p: &history::SeriesPoint| {
        format!(
            "drift from {}",
            p.commit.clone().unwrap_or_else(|| p.dir.clone())
        )
    };
    let mut new_slides = Vec::new();
    for (series, d, since) in slides {
        let mut seen = false;
        for p in &series.points[since..d.end] {
            seen |= history.reported(&series.key, &drift_key(p))?;
        }
        if !seen {
            new_slides.push((series, d));
            history.mark_reported(&series.key, &drift_key(&d.first))?;
        }
    }
    let markdown = check_markdown(&new, &new_slides, all.len(), args.threshold);
    print!("{markdown}");
    if let Some(path) = &args.summary {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot append to {}", path.display()))?;
        file.write_all(markdown.as_bytes())?;
    }
    Ok(if new.is_empty() && new_slides.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The check's summary in Markdown: a headline, a row per new change, and a row per new
/// drift.
fn check_markdown(
    new: &[(&Series, &Change)],
    slides: &[(&Series, &Drift)],
    series: usize,
    threshold: f64,
) -> String {
    if new.is_empty() && slides.is_empty() {
        return format!(
            "## rubyrace history check: ✅ no new change of {:.1}% or more at the newest commits\n\n{series} series checked.\n",
            threshold * 100.0
        );
    }
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let mut parts = Vec::new();
    if !new.is_empty() {
        parts.push(plural(new.len(), "new change", "new changes"));
    }
    if !slides.is_empty() {
        parts.push(plural(slides.len(), "drift", "drifts"));
    }
    let mut out = format!(
        "## rubyrace history check: ❌ {} of {:.1}% or more\n\n",
        parts.join(" and "),
        threshold * 100.0
    );
    if !new.is_empty() {
        out.push_str(
            "| series | change | last before | first after | bisect |\n|---|---|---|---|---|\n",
        );
    }
    for (s, c) in new {
        out.push_str(&format!(
            "| {} | {:.3}× [{:.3}–{:.3}] | `{}` {} | `{}` {} | {} |\n",
            s.key,
            c.factor,
            c.factor_low,
            c.factor_high,
            c.before.commit_short(),
            c.before.subject.replace('|', "\\|"),
            c.after.commit_short(),
            c.after.subject.replace('|', "\\|"),
            c.bisect
                .as_deref()
                .map(|b| format!("`{b}`"))
                .unwrap_or_else(|| "adjacent commits: the first after is the change".into())
        ));
    }
    if !slides.is_empty() {
        if !new.is_empty() {
            out.push('\n');
        }
        out.push_str("| series | drift | from | to | points |\n|---|---|---|---|---|\n");
        for (s, d) in slides {
            out.push_str(&format!(
                "| {} | {:.3}× [{:.3}–{:.3}] | `{}` {} | `{}` {} | {}: a slide, no one commit to bisect |\n",
                s.key,
                d.factor,
                d.factor_low,
                d.factor_high,
                d.first.commit_short(),
                d.first.subject.replace('|', "\\|"),
                d.last.commit_short(),
                d.last.subject.replace('|', "\\|"),
                d.end - d.start
            ));
        }
    }
    out
}
