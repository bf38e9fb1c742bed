//! The end of a run, local or on a fleet: the summary table of what is stored, and where
//! the trials are, with exit status 3 when some failed or were invalid.

use std::process::ExitCode;

use anyhow::Result;
use results::store::Store;

use crate::invocation::EXIT_TRIALS_FAILED;

/// How many unusable trials the end of a run names with their reasons.
const SHOWN_REASONS: usize = 5;

/// The end of a run whose every trial is stored: where they are, and exit status 3 when
/// some failed or were invalid.
pub fn finish_complete(store: &Store) -> Result<ExitCode> {
    let total = store.schedule()?.len();
    let dir = store.dir();
    let rows = store.summary_rows()?;
    let bad: usize = rows.iter().map(|r| r.invalid + r.failed).sum();
    if total == 1 {
        println!("\nThe trial is stored in {}.", dir.display());
    } else {
        println!("\nAll {total} trials are stored in {}.", dir.display());
    }
    println!(
        "Every trial as JSON: rubyrace export {} --json",
        dir.display()
    );
    if bad > 0 {
        eprintln!("rubyrace: {bad} trial(s) failed or were invalid:");
        let unusable: Vec<_> = store
            .trial_results()?
            .into_iter()
            .filter(|t| t.status != results::record::TrialStatus::Valid)
            .collect();
        for t in unusable.iter().take(SHOWN_REASONS) {
            eprintln!(
                "  block {} · {} · {}: {}",
                t.id.block + 1,
                t.id.label,
                t.status.as_str(),
                t.reason.as_deref().unwrap_or("no reason recorded")
            );
        }
        if unusable.len() > SHOWN_REASONS {
            eprintln!(
                "  … and {} more: rubyrace export {} --json",
                unusable.len() - SHOWN_REASONS,
                dir.display()
            );
        }
        return Ok(ExitCode::from(EXIT_TRIALS_FAILED));
    }
    Ok(ExitCode::SUCCESS)
}

pub fn print_summary(store: &Store) -> Result<()> {
    print!(
        "\n{}",
        results::store::summary_table(&store.summary_rows()?)
    );
    Ok(())
}
