//! `rubyrace watch DIR`: a run in progress, from another terminal, without touching it. It
//! reads the store read-only and the run's live file every second (`frame`), draws the
//! frame with ratatui, and exits when the run ends or on `q`; `--once` prints one frame as
//! plain text.

mod frame;

use std::io::{self, IsTerminal, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Wrap};

const REFRESH: Duration = Duration::from_secs(1);
/// Watching a directory of runs (a bisection's rounds), a run that ended is followed by the
/// next one if it appears within this long.
const NEXT_RUN_GRACE: Duration = Duration::from_secs(10);

#[derive(Args, Debug)]
#[command(after_help = "What a frame shows is described in docs/watch.md.")]
pub struct WatchArgs {
    /// A results directory, or a directory of them (the one written last is watched: a
    /// bisection's rounds, a directory of runs).
    pub dir: PathBuf,

    /// Print one frame as plain text and exit.
    #[arg(long)]
    pub once: bool,
}

pub fn watch(args: WatchArgs) -> Result<ExitCode> {
    let dir = frame::resolve(&args.dir)?;
    if args.once {
        let snapshot = frame::snapshot(&dir, &mut None)?;
        print!("{}", frame::text(&snapshot.lines));
        return Ok(ExitCode::SUCCESS);
    }
    if !io::stdout().is_terminal() {
        anyhow::bail!(
            "rubyrace watch draws on a terminal; `rubyrace watch --once {}` prints one frame as text",
            args.dir.display()
        );
    }
    let mut terminal = ratatui::try_init().context("cannot take the terminal")?;
    let last = follow(&mut terminal, &args.dir, dir);
    ratatui::restore();
    // The last frame stays on the screen once the terminal is given back.
    let last = last?;
    let mut out = io::stdout().lock();
    let _ = out.write_all(frame::text(&last).as_bytes());
    Ok(ExitCode::SUCCESS)
}

/// Draws `dir` every second until its run ends (and no newer run under `asked` follows
/// it) or the user quits; returns the last frame.
fn follow(
    terminal: &mut ratatui::DefaultTerminal,
    asked: &Path,
    mut dir: PathBuf,
) -> Result<Vec<Line<'static>>> {
    let mut scroll: u16 = 0;
    let mut ended_at: Option<Instant> = None;
    let mut cache = None;
    loop {
        // A frame that cannot be read (the store being created, a disk gone) says so and
        // is tried again at the next second.
        let snapshot = frame::snapshot(&dir, &mut cache).unwrap_or_else(|e| frame::Snapshot {
            running: true,
            lines: vec![Line::from(format!("cannot read {}: {e:#}", dir.display()))],
        });
        let mut lines = snapshot.lines.clone();
        if !snapshot.running {
            let since = *ended_at.get_or_insert_with(Instant::now);
            let newer = frame::resolve(asked).ok().filter(|d| *d != dir);
            if let Some(next) = newer {
                dir = next;
                ended_at = None;
                cache = None;
                continue;
            }
            // A directory of runs: wait a little for the next one; a single run: done.
            if asked == dir || since.elapsed() >= NEXT_RUN_GRACE {
                return Ok(lines);
            }
            lines.push(Line::from(format!(
                "waiting {} for the next run under {}",
                units::span(NEXT_RUN_GRACE.saturating_sub(since.elapsed())),
                asked.display()
            )));
        }
        let max_scroll = lines.len().saturating_sub(1) as u16;
        scroll = scroll.min(max_scroll);
        terminal.draw(|f| {
            let [body, hint] =
                Layout::vertical([Constraint::Min(1), Constraint::Length(1)]).areas(f.area());
            f.render_widget(
                Paragraph::new(lines.clone())
                    .wrap(Wrap { trim: false })
                    .scroll((scroll, 0)),
                body,
            );
            f.render_widget(
                Paragraph::new("q quits · ↑ ↓ PgUp PgDn scroll · refreshed every second")
                    .style(Style::default().add_modifier(Modifier::DIM)),
                hint,
            );
        })?;
        // Keys until the next refresh; a resize redraws at once.
        let next = Instant::now() + REFRESH;
        while let Some(wait) = next.checked_duration_since(Instant::now()) {
            if !event::poll(wait)? {
                break;
            }
            match event::read()? {
                Event::Key(k) if k.kind == KeyEventKind::Press => match k.code {
                    KeyCode::Char('q') | KeyCode::Esc => return Ok(snapshot.lines),
                    KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                        return Ok(snapshot.lines)
                    }
                    KeyCode::Down | KeyCode::Char('j') => scroll = scroll.saturating_add(1),
                    KeyCode::Up | KeyCode::Char('k') => scroll = scroll.saturating_sub(1),
                    KeyCode::PageDown => scroll = scroll.saturating_add(10),
                    KeyCode::PageUp => scroll = scroll.saturating_sub(10),
                    KeyCode::Home => scroll = 0,
                    _ => {}
                },
                Event::Resize(..) => break,
                _ => {}
            }
        }
    }
}
