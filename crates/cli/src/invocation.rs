//! How rubyrace was invoked and how a command ends: the command line as typed (recorded
//! with results and reports), the exit statuses several commands share, the flags
//! `check` and `bisect` share (which repository's commits they measure), and Ctrl-C.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};

/// Exit status of a malformed experiment file.
pub const EXIT_BAD_EXPERIMENT: u8 = 2;

/// Exit status of a run that completed with failed or invalid trials (or stopped by
/// --fail-fast).
pub const EXIT_TRIALS_FAILED: u8 = 3;

/// Exit status of `rubyrace check` when its gate is inconclusive at the budget (unless
/// `--inconclusive pass|fail` says otherwise); 1 is a slowdown beyond the threshold.
pub const EXIT_INCONCLUSIVE: u8 = 4;

/// Exit status after Ctrl-C.
pub const EXIT_INTERRUPTED: u8 = 130;

/// What `run` and `trial` print at the first Ctrl-C.
pub const STOPPING: &str = "\nrubyrace: stopping the current trial (Ctrl-C again to quit at once)";

/// Sets the interrupt flag on Ctrl-C, printing `notice` (when there is one) the first time;
/// a second Ctrl-C exits at once with [`EXIT_INTERRUPTED`] (the parent-death signal and the
/// live-server registry still take care of any server).
pub fn install_interrupt(notice: Option<&'static str>) -> Result<Arc<AtomicBool>> {
    install_interrupt_with(notice, None)
}

/// [`install_interrupt`], printing `on_quit` when a second Ctrl-C quits at once (a run's
/// resume command: the trials stored so far are safe, the current one is not stored, and
/// its servers die with rubyrace through the parent-death signal).
pub fn install_interrupt_with(
    notice: Option<&'static str>,
    on_quit: Option<String>,
) -> Result<Arc<AtomicBool>> {
    let interrupt = Arc::new(AtomicBool::new(false));
    let flag = interrupt.clone();
    ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            if let Some(message) = &on_quit {
                eprintln!("{message}");
            }
            std::process::exit(i32::from(EXIT_INTERRUPTED));
        }
        if let Some(notice) = notice {
            eprintln!("{notice}");
        }
    })
    .context("cannot install the Ctrl-C handler")?;
    Ok(interrupt)
}

/// [`install_interrupt_with`] for the commands that run trials (`run`, `check`, `bisect`):
/// the first Ctrl-C stops the current trial, a second quits at once and prints `resume`,
/// the command that goes on.
pub fn install_run_interrupt(resume: &str) -> Result<Arc<AtomicBool>> {
    install_interrupt_with(
        Some(STOPPING),
        Some(format!(
            "\nrubyrace: quit at once; every trial finished before this point is stored, the current one is not. Resume with:\n  {resume}"
        )),
    )
}

/// The command line as typed, recorded with results and reports.
pub fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

/// A percentage flag (`3%`) as a fraction.
pub fn parse_percent(s: &str) -> Result<f64, String> {
    let number = s
        .trim()
        .strip_suffix('%')
        .ok_or("expected a percentage, e.g. 3%")?;
    match number.trim().parse::<f64>() {
        Ok(p) if p > 0.0 && p < 100.0 => Ok(p / 100.0),
        _ => Err(format!(
            "expected a percentage above 0% and below 100%, not {s}"
        )),
    }
}

/// A flag whose values are a library enum's names (`--format`, `--order`): clap offers and
/// checks `names`, and the enum parses the one given. The names come from the enum's own
/// list (strum's `VARIANTS`), so the flag cannot drift from the type.
pub fn one_of<T>(names: &'static [&'static str]) -> impl clap::builder::TypedValueParser<Value = T>
where
    T: std::str::FromStr + Clone + Send + Sync + 'static,
{
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(names).map(|name| {
        name.parse()
            .unwrap_or_else(|_| unreachable!("{name:?} is one of the enum's own names"))
    })
}

/// A metric flag (`--metric`), as the precision rule names them.
pub fn parse_metric(s: &str) -> Result<experiment::precision::PrecisionMetric, String> {
    experiment::precision::PrecisionMetric::parse(s).ok_or_else(|| {
        format!(
            "expected one of {}",
            experiment::precision::PrecisionMetric::NAMES.join(", ")
        )
    })
}

/// Which repository's commits `check` and `bisect` measure: an app's (each commit checked
/// out) or CRuby's (each commit built). Both commands take it; with `--resume` neither.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct CommitSource {
    /// The git repository of the app: each commit measured is checked out (the file's
    /// `app` must be inside it).
    #[arg(
        long,
        required_unless_present_any = ["ruby_repo", "resume"],
        conflicts_with = "ruby_repo"
    )]
    pub app_repo: Option<std::path::PathBuf>,
    /// A CRuby git repository: each commit measured is built (`rubyrace ruby build --ref`,
    /// cached by its hash) and the configuration runs on it.
    #[arg(long)]
    pub ruby_repo: Option<std::path::PathBuf>,
    /// With --ruby-repo: one more ./configure argument of every build (repeatable).
    #[arg(
        long = "configure-opts",
        value_name = "OPT",
        allow_hyphen_values = true,
        requires = "ruby_repo"
    )]
    pub configure_opts: Vec<String>,
}
