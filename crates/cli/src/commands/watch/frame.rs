//! What one frame of `rubyrace watch` says, read from a results directory without writing
//! to it: the store (read-only, beside a live writer, over its WAL), the report's analysis
//! of the trials stored so far, the run's live file (`progress.json`) and a fleet's state.
//! The same lines are drawn in the terminal (ratatui) and printed by `--once`.

use std::path::{Path, PathBuf};

use anyhow::Result;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use results::progress::{now_unix, Progress as Live, RunState};
use results::store::Store;
use results::TrialStatus;

/// How many recent trials the noise line looks at.
const RECENT: usize = 6;
/// Rows of warnings, failed trials and notes shown at most, each.
const LISTED: usize = 6;
/// A live file on another machine not rewritten for this long is taken as a dead run.
const STALE_S: f64 = 30.0;

/// What the directory holds now.
pub struct Snapshot {
    /// The run is still going (its process alive and the file `running`).
    pub running: bool,
    pub lines: Vec<Line<'static>>,
}

/// The results directory to watch under `dir`: `dir` itself when it holds a store, else
/// the store below it (three levels at most: a bisection's `rounds/NN/`) whose live file or
/// database changed last.
pub fn resolve(dir: &Path) -> Result<PathBuf> {
    if dir.join(results::store::DB_FILE).is_file() {
        return Ok(dir.to_path_buf());
    }
    let mut found: Vec<(std::time::SystemTime, PathBuf)> = Vec::new();
    collect_stores(dir, 3, &mut found);
    found.sort();
    match found.pop() {
        Some((_, store)) => Ok(store),
        None if dir.is_dir() => anyhow::bail!(
            "{} holds no results directory (no {} in it or up to three levels below)",
            dir.display(),
            results::store::DB_FILE
        ),
        None => anyhow::bail!("{} is not a directory", dir.display()),
    }
}

fn collect_stores(dir: &Path, depth: u32, found: &mut Vec<(std::time::SystemTime, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if path.join(results::store::DB_FILE).is_file() {
            let changed = [
                results::progress::PROGRESS_FILE,
                "results.db-wal",
                results::store::DB_FILE,
            ]
            .iter()
            .filter_map(|f| {
                std::fs::metadata(path.join(f))
                    .and_then(|m| m.modified())
                    .ok()
            })
            .max()
            .unwrap_or(std::time::UNIX_EPOCH);
            found.push((changed, path));
        } else if depth > 1 {
            collect_stores(&path, depth - 1, found);
        }
    }
}

fn heading(text: &str) -> Line<'static> {
    Line::from(Span::styled(
        text.to_string(),
        Style::default().add_modifier(Modifier::BOLD),
    ))
}

fn plain(text: String) -> Line<'static> {
    Line::from(text)
}

fn colored(text: String, color: Color) -> Line<'static> {
    Line::from(Span::styled(text, Style::default().fg(color)))
}

fn ago(seconds: f64) -> String {
    units::span(std::time::Duration::from_secs_f64(seconds.max(0.0)))
}

/// What the report says of the stored trials, as lines: the comparisons, then the rest
/// (noise, trouble, warnings, services and profilers, hosts).
pub struct Analysed {
    reported: bool,
    comparisons: Vec<Line<'static>>,
    rest: Vec<Line<'static>>,
}

/// What tells that the store changed: the sizes and times of its database and log.
pub type StoreKey = Vec<(u64, Option<std::time::SystemTime>)>;

fn store_key(dir: &Path) -> StoreKey {
    [results::store::DB_FILE, "results.db-wal"]
        .iter()
        .map(|f| {
            std::fs::metadata(dir.join(f))
                .map(|m| (m.len(), m.modified().ok()))
                .unwrap_or((0, None))
        })
        .collect()
}

fn analyse(dir: &Path, store: &Store) -> Analysed {
    match report::build(&[dir.to_path_buf()], &report::Options::default()) {
        Ok((report, sources)) => {
            let trials: Vec<&report::TrialData> =
                sources.iter().flat_map(|s| s.trials.iter()).collect();
            let mut rest = noise_lines(&trials);
            rest.extend(trouble_lines(&trials));
            rest.extend(warning_lines(&report));
            rest.extend(services_and_profilers(store, &trials));
            rest.extend(host_lines(&report));
            Analysed {
                reported: true,
                comparisons: comparison_lines(&report),
                rest,
            }
        }
        Err(e) => Analysed {
            reported: false,
            comparisons: vec![plain(format!("No report yet: {e:#}"))],
            rest: Vec::new(),
        },
    }
}

/// Reads `dir` (a results directory) and says what it holds; `cache` keeps the report's
/// part between frames (a frame every second must not analyse an unchanged store again).
pub fn snapshot(dir: &Path, cache: &mut Option<(StoreKey, Analysed)>) -> Result<Snapshot> {
    let live = Live::read(dir).unwrap_or(None);
    // A process holding the store's writer lock: a run without a live file yet (creating
    // its store) or without one at all (a fleet's controller).
    let writer = results::store::writer::current_writer(dir);
    let running = match &live {
        Some(l) => l.is_live(STALE_S),
        None => writer.is_some(),
    };
    let mut lines = Vec::new();
    let store = match Store::open_read_only(dir) {
        Ok(store) => store,
        // A run creating its store: the next frame will read it.
        Err(e) if running || writer.is_some() => {
            lines.push(heading(&format!("rubyrace watch · {}", dir.display())));
            lines.push(plain(format!("the store cannot be read yet: {e:#}")));
            return Ok(Snapshot { running, lines });
        }
        Err(e) => return Err(e),
    };
    let name = store.meta("experiment_name")?.unwrap_or_default();
    let resume = store.resume_command();
    let fleet = FleetProgress::read(dir, &store);
    // A detached fleet run has no controller: its blocks run on the cluster by themselves,
    // and watch follows their block files until every block submitted has one.
    let detached = live.as_ref().is_some_and(|l| l.state == RunState::Detached);
    let following = running || (detached && fleet.as_ref().is_some_and(|f| !f.out.is_empty()));
    let configs = store.configs()?;
    let schedule = store.schedule()?;
    let done = store.completed()?;
    let design = store.design()?;
    let per_block = configs.len().max(1);
    let blocks_planned = schedule.len().div_ceil(per_block);
    let blocks_done = (0..blocks_planned as u32)
        .filter(|b| {
            schedule
                .iter()
                .filter(|t| t.block == *b)
                .all(|t| done.contains(&t.trial_id))
        })
        .count();

    lines.push(heading(&format!("rubyrace watch · {}", dir.display())));
    lines.push(state_line(
        &name,
        live.as_ref(),
        running,
        writer.as_ref(),
        &resume,
    ));
    // A run whose rule decides when it stops: the plan is a minimum, to its next look.
    let at_least = store.next_look(blocks_planned as u32).ok().flatten();
    let (blocks_shown, trials_shown, min_trials) = match at_least {
        Some(n) => {
            let trials = schedule.len().max(n as usize * per_block);
            (
                format!(
                    "at least {} planned (its rule decides when it stops; its next look after {})",
                    (n as usize).max(blocks_planned),
                    units::count(n as usize, "block")
                ),
                format!("at least {trials}"),
                Some(trials),
            )
        }
        None => (
            format!("{blocks_planned} planned"),
            schedule.len().to_string(),
            None,
        ),
    };
    lines.push(plain(format!(
        "design {} · {} · blocks {blocks_done} done of {blocks_shown} · trials {} of {trials_shown} stored",
        design.describe(),
        units::count(configs.len(), "configuration"),
        done.len(),
    )));
    if let Some(l) = live.as_ref().filter(|_| running) {
        lines.extend(now_lines(l, min_trials));
    }
    if let Some(fleet) = &fleet {
        lines.extend(fleet.lines(detached, &resume));
    }
    if let Some(gate) = store.gate().ok().flatten() {
        lines.extend(gate_lines(&store, &gate, blocks_done, at_least));
    }
    if let Some(bisection) = results::bisect::bisection_of(dir) {
        lines.extend(bisection_lines(&bisection, dir, &store));
    }

    // The report's part, analysed again only when the store changed.
    let key = store_key(dir);
    let analysed = match cache.take() {
        Some((k, a)) if k == key => a,
        _ => analyse(dir, &store),
    };
    lines.push(plain(String::new()));
    lines.extend(analysed.comparisons.iter().cloned());
    if let (Some(l), true) = (&live, analysed.reported) {
        lines.extend(precision_lines(l, running));
    }
    lines.extend(analysed.rest.iter().cloned());
    *cache = Some((key, analysed));
    if let Some(l) = &live {
        lines.extend(note_lines(l));
    }
    Ok(Snapshot {
        running: following,
        lines,
    })
}

fn state_line(
    name: &str,
    live: Option<&Live>,
    running: bool,
    writer: Option<&results::store::writer::Writer>,
    resume: &str,
) -> Line<'static> {
    let Some(l) = live else {
        return match writer {
            Some(w) => colored(
                format!("{name} · being written by pid {} (since {}), which keeps no live file", w.pid, w.since),
                Color::Green,
            ),
            None => plain(format!(
                "{name} · not running; no live file (a run older than rubyrace watch, or not started by `rubyrace run`)"
            )),
        };
    };
    let now = now_unix();
    let since = ago(now - l.started_unix);
    if running {
        return colored(
            format!(
                "{name} · running (pid {} on {}) for {since} · updated {} ago",
                l.pid,
                l.host,
                ago(now - l.updated_unix)
            ),
            Color::Green,
        );
    }
    let ended = match l.state {
        RunState::Running => format!(
            "ended without a word: pid {} on {} is gone (killed?); `{resume}` goes on",
            l.pid, l.host
        ),
        RunState::Detached => format!(
            "detached {} ago: no controller is running, the blocks run on the cluster by themselves and are stored when one attaches: `{resume}` (it imports the blocks that finished and watches the rest)",
            ago(now - l.updated_unix)
        ),
        RunState::Complete => format!("complete · {} ago", ago(now - l.updated_unix)),
        state => format!(
            "{}{} · {} ago · `{resume}` goes on",
            state.as_str(),
            l.ended_reason
                .as_ref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default(),
            ago(now - l.updated_unix)
        ),
    };
    let color = match l.state {
        RunState::Complete => Color::Cyan,
        RunState::Detached => Color::Green,
        _ => Color::Yellow,
    };
    colored(format!("{name} · {ended}"), color)
}

/// The current trial or block and its phase, and the time left at this session's pace
/// (`min_trials`: a run whose rule decides when it stops, which has at least these many
/// trials: then the time left is the least, to the rule's next look).
fn now_lines(l: &Live, min_trials: Option<usize>) -> Vec<Line<'static>> {
    let now = now_unix();
    let mut out = Vec::new();
    if let Some(c) = &l.current {
        let what = match c.trial_id {
            Some(id) => format!(
                "trial {id} · block {} · {}",
                c.block + 1,
                c.labels.join(", ")
            ),
            None => format!("block {} · {}", c.block + 1, c.labels.join(", ")),
        };
        let phase = c.phase.as_ref().map_or_else(String::new, |p| {
            let t = now - p.since_unix;
            let step = match (p.warmup_s, p.measured_s) {
                (Some(w), Some(_)) if t < w => format!("warming up {} of {}", ago(t), ago(w)),
                (Some(w), Some(m)) => format!("measuring {} of {}", ago(t - w), ago(m)),
                (None, Some(m)) => format!("{} {} of {}", p.name, ago(t), ago(m)),
                _ => format!("{} ({})", p.name, ago(t)),
            };
            format!(" · {step}")
        });
        out.push(plain(format!("now: {what}{phase}")));
    }
    let left = l.total.max(min_trials.unwrap_or(0)).saturating_sub(l.done);
    if let Some(per) = pace_s(l).filter(|_| left > 0) {
        out.push(plain(match min_trials {
            Some(_) => format!(
                "time left: at least {} for the {} to the rule's next look, at this session's pace (the rule may add blocks after it)",
                ago(per * left as f64),
                units::count(left, "trial")
            ),
            None => format!(
                "time left: about {} for the {} planned, at this session's pace",
                ago(per * left as f64),
                units::count(left, "trial")
            ),
        }));
    }
    out
}

/// A check's gate: the slowdown allowed, its looks, and the head's slowdown so far (or how
/// the gate ended).
fn gate_lines(
    store: &Store,
    gate: &experiment::gate::GateTarget,
    blocks_done: usize,
    at_least: Option<u32>,
) -> Vec<Line<'static>> {
    let looks: Vec<String> = gate.rule.looks().iter().map(u32::to_string).collect();
    let mut out = vec![plain(format!(
        "gate: the head may be at most {}% slower than the base on {} (a slowdown factor up to {:.4}×) · looks after {} blocks",
        trim_float(100.0 * gate.rule.max_slowdown),
        gate.metric.name(),
        1.0 + gate.rule.max_slowdown,
        looks.join(", ")
    ))];
    if let Some(end) = store.gate_end().ok().flatten() {
        out.push(colored(format!("gate: {}", end.describe()), Color::Cyan));
        return out;
    }
    let worse = store
        .observations(gate.metric)
        .map(|o| gate.worse_by_block(&o))
        .unwrap_or_default();
    let decision = gate.rule.decide(&worse);
    let so_far = match (decision.factor, decision.low, decision.high) {
        (Some(f), Some(lo), Some(hi)) => format!(
            "slowdown so far {f:.4}× [{lo:.4}–{hi:.4}] ({:.2}% interval, as the rule's looks use)",
            100.0 * decision.confidence
        ),
        _ => "no interval yet".to_string(),
    };
    let next = at_least
        .map(|n| {
            format!(
                " · its next look after {}",
                units::count(n as usize, "block")
            )
        })
        .unwrap_or_default();
    out.push(plain(format!(
        "gate after {}: {so_far}{next}",
        units::count(blocks_done, "block")
    )));
    out
}

/// A bisection's search, seen from its round `dir` (`BISECTION/rounds/NN`), from the
/// bisection's record alone (rewritten by the search after every block): the round and its
/// commits, the blocks spent of the budget, the part searched with its most probable first
/// bad commit, what was found so far, the commits skipped.
fn bisection_lines(bisection: &Path, dir: &Path, store: &Store) -> Vec<Line<'static>> {
    use results::bisect::BisectRecord;
    let Ok(record) = BisectRecord::read(bisection) else {
        return Vec::new();
    };
    let how = if record.metric_given {
        "given"
    } else if record.metric_chosen {
        "chosen"
    } else {
        "provisional"
    };
    let mut out = vec![heading(&format!(
        "Bisection of {} commits ({} .. {}) on {} ({how}): {}",
        record.commits.len(),
        record.good_ref,
        record.bad_ref,
        record.metric.name(),
        bisection.display()
    ))];
    let (round, current) = bisection_round(&record, dir, store);
    out.extend(round_lines(&record, round.as_ref(), current));
    if let Some(s) = &record.searching {
        let range = if s.first == s.last {
            format!("commit {}", s.first)
        } else {
            format!("commits {}–{}", s.first, s.last)
        };
        out.push(plain(format!(
            "  most probable first bad commit: {} with {}; {} of the probability in {range}, the smallest range holding 95% (the part {}..{} searched)",
            commit_named(&record, s.most_probable),
            percent(s.probability),
            percent(s.range_probability),
            s.lo,
            s.hi
        )));
    }
    if !record.next.is_empty() && round.as_ref().is_none_or(|r| r.1 != record.next) {
        out.push(plain(format!(
            "  the next block measures commits {} (a new round)",
            commit_list(&record.next)
        )));
    }
    for finding in &record.findings {
        out.push(plain(finding_line(&record, finding)));
    }
    out.extend(bisection_end_lines(&record));
    out
}

/// A bisection's round: its number, its commits and its blocks (None before its first
/// block is recorded).
type Round = (usize, Vec<usize>, Option<u32>);

/// The round `dir` is of the bisection `record`, or None when it is not known; and
/// whether it is the search's current round.
fn bisection_round(
    record: &results::bisect::BisectRecord,
    dir: &Path,
    store: &Store,
) -> (Option<Round>, bool) {
    use results::bisect::{RoundMeta, ROUND_META};
    // The round: by its directory in the record, or (its first block not recorded yet)
    // by the round's own meta in its store.
    let name = dir.file_name();
    let index = record.rounds.iter().position(|r| r.dir.file_name() == name);
    let round = match index {
        Some(i) => Some((
            i + 1,
            record.rounds[i].commits.clone(),
            Some(record.rounds[i].blocks),
        )),
        None => store
            .meta(ROUND_META)
            .ok()
            .flatten()
            .and_then(|text| serde_json::from_str::<RoundMeta>(&text).ok())
            .map(|m| (m.round, m.commits, None)),
    };
    let current = index.is_none_or(|i| i + 1 == record.rounds.len());
    (round, current)
}

/// The round's line (its number and commits, and the candidates when it is `current`),
/// when the `round` is known; and the line of the blocks spent.
fn round_lines(
    record: &results::bisect::BisectRecord,
    round: Option<&Round>,
    current: bool,
) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    if let Some((number, commits, _)) = round {
        // Candidates: the commits strictly inside the part searched, when this round
        // measures that part's ends (the others are ends of parts).
        let candidates = record
            .searching
            .as_ref()
            .filter(|s| current && commits.contains(&s.lo) && commits.contains(&s.hi))
            .map(|s| commits.iter().filter(|&&c| c > s.lo && c < s.hi).count());
        out.push(plain(format!(
            "  round {number} of the search: commits {} side by side{}",
            commit_list(commits),
            candidates
                .map(|k| format!(" ({} beside the ends)", units::count(k, "candidate")))
                .unwrap_or_default()
        )));
    }
    let this_round = match round.map(|r| r.2) {
        Some(Some(b)) => format!(" (this round: {b})"),
        Some(None) => " (this round: none recorded yet)".to_string(),
        None => String::new(),
    };
    let measuring = if record.measuring_s() > 0.0 {
        format!(" · {} of measuring", ago(record.measuring_s()))
    } else {
        String::new()
    };
    out.push(plain(format!(
        "  blocks: {} of at most {} over the whole search{this_round}{measuring}",
        record.blocks(),
        record.max_blocks
    )));
    out
}

/// A finding of the search, as its line.
fn finding_line(
    record: &results::bisect::BisectRecord,
    finding: &results::bisect::Finding,
) -> String {
    use results::bisect::Finding;
    match finding {
        Finding::Commit {
            commit,
            probability,
            step,
        } => format!(
            "  found: {}, {:.3}× [{:.3}–{:.3}] against the commit before it ({} probable, {})",
            commit_named(record, *commit),
            step.ratio,
            step.low,
            step.high,
            percent(*probability),
            units::count(step.blocks, "block")
        ),
        Finding::Skipped {
            first,
            last,
            probability,
            step,
        } => format!(
            "  found: one of commits {first}–{last} (the others do not build or boot), {:.3}× [{:.3}–{:.3}] against commit {} ({} probable)",
            step.ratio,
            step.low,
            step.high,
            first - 1,
            percent(*probability)
        ),
        Finding::Range {
            first,
            last,
            probability,
            to_settle,
        } => {
            let settle = to_settle.as_ref().map_or(String::new(), |t| {
                let at = |blocks: Option<u32>, minutes: Option<f64>, level: &str| match blocks {
                    Some(b) => format!(
                        "{}{} would place it with {level}",
                        units::count(b as usize, "more block"),
                        minutes
                            .map(|m| format!(" (~{})", ago(60.0 * m)))
                            .unwrap_or_default()
                    ),
                    None => format!("more than four budgets would place it with {level}"),
                };
                format!(
                    "; {}, {}",
                    at(t.blocks_80, t.minutes_80, "80%"),
                    at(t.blocks_95, t.minutes_95, "95%")
                )
            });
            format!(
                "  found: a change whose first bad commit is one of commits {first}–{last} ({} of the probability){settle}",
                percent(*probability)
            )
        }
        Finding::Unaccounted { lo, hi, up_to } => format!(
            "  not accounted for: the part {lo}..{hi} may hold a change of its own, up to {up_to:.3}× (it could not be shown smaller than {}%)",
            trim_float(100.0 * record.min_change)
        ),
    }
}

/// How the search ended, when it has, and the commits it skipped, a line each.
fn bisection_end_lines(record: &results::bisect::BisectRecord) -> Vec<Line<'static>> {
    use results::bisect::BisectOutcome;
    let mut out = Vec::new();
    match &record.outcome {
        Some(BisectOutcome::NothingToFind { exhausted: false }) => out.push(plain(format!(
            "  ended: nothing to find (the ends' interval lies below {}%)",
            trim_float(100.0 * record.min_change)
        ))),
        Some(BisectOutcome::NothingToFind { exhausted: true }) => out.push(plain(
            "  ended: nothing found (the budget ended before the ends showed a regression)"
                .to_string(),
        )),
        Some(_) => out.push(plain(
            "  ended: the findings above are its answer".to_string(),
        )),
        None => {}
    }
    for (c, why) in &record.skipped {
        out.push(plain(format!(
            "  skipped commit {c} ({}): {}",
            record.short(*c),
            why.lines().next().unwrap_or("")
        )));
    }
    out
}

/// "commit 3 (abc1234)", or "commit 3" for an index outside the record's history.
fn commit_named(record: &results::bisect::BisectRecord, c: usize) -> String {
    if c < record.commits.len() {
        format!("commit {c} ({})", record.short(c))
    } else {
        format!("commit {c}")
    }
}

/// Commits' indices as "1, 4, 7".
fn commit_list(commits: &[usize]) -> String {
    commits
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A probability as a percentage with at most one decimal: 0.5 → "50%", 0.1234 → "12.3%".
fn percent(p: f64) -> String {
    format!("{}%", trim_float((100.0 * p * 10.0).round() / 10.0))
}

/// 3 for 3.0, 2.5 for 2.5.
fn trim_float(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Seconds per trial this session, once a trial of it is stored.
fn pace_s(l: &Live) -> Option<f64> {
    let session_done = l.done.saturating_sub(l.done_before);
    (session_done > 0).then(|| (now_unix() - l.started_unix) / session_done as f64)
}

/// A fleet run's blocks as its directory shows them (read-only): those in flight by the
/// controller's record (`fleet/state.json`, with Slurm's last word), and those whose task
/// left a block file that no controller has imported yet (a detached run's, or an
/// adaptive run's waiting for an earlier block).
pub struct FleetProgress {
    /// In flight by the record: (block, Slurm's state, nodes).
    in_flight: Vec<(u32, String, String)>,
    /// Finished on the cluster, not stored: (block, node, trials, how it ended).
    finished: Vec<(u32, String, usize, String)>,
    /// Submitted and neither finished nor stored (no block file yet).
    out: Vec<u32>,
    missing: usize,
}

impl FleetProgress {
    fn read(dir: &Path, store: &Store) -> Option<FleetProgress> {
        store.fleet().ok().flatten()?;
        let state = fleet::controller::FleetState::load(dir).unwrap_or_default();
        let imported: Vec<u32> = store
            .fleet_blocks()
            .unwrap_or_default()
            .iter()
            .filter_map(|b| b["block"].as_u64().map(|n| n as u32))
            .collect();
        let finished_blocks = results::store::block::finished_unimported_blocks(dir, &imported);
        let mut finished = Vec::new();
        for &block in &finished_blocks {
            let file = std::fs::read_dir(fleet::task::block_dir(dir, block))
                .into_iter()
                .flatten()
                .flatten()
                .map(|a| a.path().join(fleet::task::BLOCK_FILE))
                .filter(|f| f.is_file())
                .max_by_key(|f| f.metadata().and_then(|m| m.modified()).ok());
            let read = file.map(|f| fleet::task::BlockFile::read(&f));
            finished.push(match read {
                Some(Ok(b)) => (block, b.node, b.trials.len(), b.outcome),
                _ => (block, "?".into(), 0, "unreadable".into()),
            });
        }
        let mut in_flight = Vec::new();
        let mut out = Vec::new();
        for (block, attempts) in &state.attempts {
            let Some(last) = attempts.last() else {
                continue;
            };
            if imported.contains(block) || finished_blocks.contains(block) {
                continue;
            }
            if !last.ended {
                in_flight.push((*block, last.state.clone(), last.nodes.clone()));
                out.push(*block);
            }
        }
        Some(FleetProgress {
            in_flight,
            finished,
            out,
            missing: state.missing.len(),
        })
    }

    /// Its lines; `detached`: no controller watches the queue, so Slurm's states in the
    /// record are those of the moment it detached.
    fn lines(&self, detached: bool, resume: &str) -> Vec<Line<'static>> {
        let mut out = Vec::new();
        if !self.finished.is_empty() {
            let each: Vec<String> = self
                .finished
                .iter()
                .map(|(block, node, trials, outcome)| {
                    let how = if outcome == "complete" {
                        String::new()
                    } else {
                        format!(", {outcome}")
                    };
                    format!(
                        "block {} on {node} ({}{how})",
                        block + 1,
                        units::count(*trials, "trial")
                    )
                })
                .collect();
            out.push(plain(format!(
                "fleet: {} finished on the cluster and not stored yet (their block files are read; a controller imports them: `{resume}`): {}",
                units::count(self.finished.len(), "block"),
                each.join(", ")
            )));
        }
        if detached {
            if self.out.is_empty() {
                out.push(plain(format!(
                    "fleet: every block submitted has finished on the cluster; `{resume}` stores them"
                )));
            } else {
                let blocks: Vec<String> = self.out.iter().map(|b| (b + 1).to_string()).collect();
                out.push(plain(format!(
                    "fleet: still out (submitted, no block file yet): {} {} (watch reads the directory only, not Slurm's queue; q quits)",
                    if self.out.len() == 1 { "block" } else { "blocks" },
                    blocks.join(", ")
                )));
            }
        } else if !self.in_flight.is_empty() || self.finished.is_empty() {
            let each: Vec<String> = self
                .in_flight
                .iter()
                .map(|(block, state, nodes)| {
                    let on = if nodes.is_empty() {
                        String::new()
                    } else {
                        format!(" on {nodes}")
                    };
                    format!("block {} {state}{on}", block + 1)
                })
                .collect();
            out.push(plain(format!(
                "fleet: {}",
                if each.is_empty() {
                    "nothing in flight".to_string()
                } else {
                    each.join(", ")
                }
            )));
        }
        if self.missing > 0 {
            out.push(plain(format!(
                "fleet: {} missing after every retry",
                units::count(self.missing, "block")
            )));
        }
        out
    }
}

fn comparison_lines(report: &report::Report) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    if report.comparisons.is_empty() {
        out.push(plain(format!(
            "{}: no comparison yet (one cohort, or too few trials)",
            report.baseline
        )));
        return out;
    }
    out.push(heading(&format!(
        "Comparisons (against {}, {} intervals)",
        report.baseline,
        report.interval_label()
    )));
    let width = |f: fn(&report::model::Comparison) -> &str| {
        report
            .comparisons
            .iter()
            .map(|c| f(c).chars().count())
            .max()
            .unwrap_or(0)
    };
    let (cohorts, metrics) = (width(|c| &c.cohort), width(|c| &c.metric));
    for c in &report.comparisons {
        let color = if c.significant {
            Color::Magenta
        } else {
            Color::Reset
        };
        out.push(colored(
            format!(
                "  {:<cohorts$}  {:<metrics$}  {} · ±{:.2}% · {}",
                c.cohort,
                c.metric,
                c.verdict,
                c.half_width_pct,
                units::count(c.n, "block")
            ),
            color,
        ));
    }
    out
}

/// The stopping rule's last look (adaptive runs).
fn precision_lines(l: &Live, running: bool) -> Vec<Line<'static>> {
    let Some(p) = &l.precision else {
        return Vec::new();
    };
    let widest = p
        .status
        .widest
        .as_ref()
        .and_then(|w| w.half_width)
        .map_or("not measurable yet".to_string(), |h| {
            format!("±{:.2}%", 100.0 * h)
        });
    let next = if !p.added {
        "the rule ended the run".to_string()
    } else {
        match p.status.blocks_left {
            Some(n) => {
                let budget = p.target.max_batches.saturating_sub(p.status.blocks_done) as usize;
                if n > budget {
                    format!("the budget (max_blocks = {}) ends the run before the target, which needs about {n} more blocks", p.target.max_batches)
                } else {
                    let per_block = l.blocks.max(1) as f64;
                    let time = pace_s(l)
                        .map(|t| {
                            format!(
                                " (~{} at this session's pace)",
                                ago(t * n as f64 * l.total as f64 / per_block)
                            )
                        })
                        .unwrap_or_default();
                    format!("about {}{time}", units::count(n, "more block"))
                }
            }
            None => "adding blocks until it can tell".to_string(),
        }
    };
    let mut line = format!(
        "Stopping rule after {} (target ±{}% on {}, {} intervals): widest {widest} · {next}",
        units::count(p.status.blocks_done as usize, "block"),
        100.0 * p.target.target,
        p.target.metric.name(),
        report::format::confidence_text(p.status.confidence)
    );
    if !running && p.added {
        line.push_str(" (when the run stopped)");
    }
    vec![plain(line)]
}

fn noise_lines(trials: &[&report::TrialData]) -> Vec<Line<'static>> {
    let mut recent: Vec<&&report::TrialData> = trials.iter().collect();
    recent.sort_by(|a, b| {
        a.started_at
            .cmp(&b.started_at)
            .then(a.trial_id.cmp(&b.trial_id))
    });
    let recent: Vec<_> = recent.into_iter().rev().take(RECENT).collect();
    let noise: Vec<&sys::noise::NoiseRecord> =
        recent.iter().filter_map(|t| t.noise.as_ref()).collect();
    if noise.is_empty() {
        return Vec::new();
    }
    let max =
        |f: fn(&sys::noise::NoiseRecord) -> f64| noise.iter().map(|n| f(n)).fold(0.0_f64, f64::max);
    let median = |f: fn(&sys::noise::NoiseRecord) -> f64| {
        let mut v: Vec<f64> = noise.iter().map(|n| f(n)).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    vec![plain(format!(
        "Noise (last {}): other processes {:.1}% of a CPU (max {:.1}%) · steal {:.1}% (max {:.1}%)",
        units::count(noise.len(), "trial"),
        median(|n| n.other_percent),
        max(|n| n.other_percent),
        median(|n| n.steal_percent),
        max(|n| n.steal_percent),
    ))]
}

fn trouble_lines(trials: &[&report::TrialData]) -> Vec<Line<'static>> {
    let bad: Vec<&&report::TrialData> = trials
        .iter()
        .filter(|t| t.status != TrialStatus::Valid)
        .collect();
    if bad.is_empty() {
        return Vec::new();
    }
    let mut out = vec![heading(&format!("Not valid ({})", bad.len()))];
    for t in bad.iter().rev().take(LISTED) {
        let status = if t.status == TrialStatus::Failed {
            "FAILED"
        } else {
            "INVALID"
        };
        out.push(colored(
            format!(
                "  trial {} · block {} · {} · {status}: {}",
                t.trial_id,
                t.block + 1,
                t.label,
                t.reason.as_deref().unwrap_or("")
            ),
            Color::Red,
        ));
    }
    out
}

fn warning_lines(report: &report::Report) -> Vec<Line<'static>> {
    if report.warnings.is_empty() {
        return Vec::new();
    }
    let mut out = vec![heading(&format!("Warnings ({})", report.warnings.len()))];
    for w in report.warnings.iter().take(LISTED) {
        let cohort = w
            .cohort
            .as_ref()
            .map(|c| format!(" ({c})"))
            .unwrap_or_default();
        out.push(colored(
            format!("  {}{cohort}: {}", w.kind, w.message),
            Color::Yellow,
        ));
    }
    if report.warnings.len() > LISTED {
        out.push(plain(format!(
            "  and {} more (rubyrace report)",
            report.warnings.len() - LISTED
        )));
    }
    out
}

fn services_and_profilers(store: &Store, trials: &[&report::TrialData]) -> Vec<Line<'static>> {
    let mut parts = Vec::new();
    if let Ok(services) = store.services() {
        if let Some(p) = &services.postgres {
            parts.push(format!("postgres ({})", p.describe()));
        }
        if let Some(r) = &services.redis {
            parts.push(format!("redis ({})", r.describe()));
        }
    }
    let mut profiles = std::collections::BTreeMap::<String, (usize, usize)>::new();
    for t in trials {
        for p in &t.profiles {
            let name = p.profiler.map_or("?", |p| p.as_str()).to_string();
            let e = profiles.entry(name).or_default();
            e.0 += 1;
            e.1 += usize::from(p.error.is_some());
        }
    }
    for (name, (n, failed)) in profiles {
        parts.push(format!(
            "{name}: {}{}",
            units::count(n, "profile"),
            if failed > 0 {
                format!(", {failed} without samples")
            } else {
                String::new()
            }
        ));
    }
    if parts.is_empty() {
        Vec::new()
    } else {
        vec![plain(parts.join(" · "))]
    }
}

fn host_lines(report: &report::Report) -> Vec<Line<'static>> {
    let Some(hosts) = &report.hosts else {
        return Vec::new();
    };
    let rows: Vec<String> = hosts
        .rows
        .iter()
        .map(|r| format!("{} ({})", r.host, units::count(r.blocks, "block")))
        .collect();
    vec![plain(format!("Hosts: {}", rows.join(" · ")))]
}

fn note_lines(l: &Live) -> Vec<Line<'static>> {
    if l.notes.is_empty() {
        return Vec::new();
    }
    let now = now_unix();
    let mut out = vec![heading("Notes")];
    let start = l.notes.len().saturating_sub(LISTED / 2);
    for n in &l.notes[start..] {
        out.push(plain(format!("  {} ago: {}", ago(now - n.at_unix), n.text)));
    }
    out
}

/// The frame as plain text, a line per line (what `--once` prints).
pub fn text(lines: &[Line<'static>]) -> String {
    let mut out = String::new();
    for line in lines {
        for span in &line.spans {
            out.push_str(&span.content);
        }
        out.push('\n');
    }
    out
}
