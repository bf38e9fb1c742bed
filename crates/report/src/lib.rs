//! rubyrace's reports: turns stored results into an answer with its uncertainty attached.
//!
//! `input` reads results directories (via `results::store`) into trials; `analysis` groups them
//! into cohorts, summarizes them and compares each with the baseline (using `stats`); the
//! renderers turn the resulting `model::Report` into a terminal table, Markdown, CSV, JSON,
//! benchstat text or an offline HTML page with SVG charts.
#![forbid(unsafe_code)]

pub mod analysis;
pub mod bisect;
pub mod input;
pub mod model;
pub mod noise;
pub mod render;

use std::path::PathBuf;

use anyhow::Result;

pub use analysis::Options;
pub use input::{SourceData, TrialData};
pub use model::Report;

/// Reads the results directories and analyses them.
pub fn build(dirs: &[PathBuf], options: &Options) -> Result<(Report, Vec<SourceData>)> {
    refuse_repeated_directories(dirs)?;
    let sources = dirs
        .iter()
        .enumerate()
        .map(|(i, d)| input::read_source(d, i))
        .collect::<Result<Vec<_>>>()?;
    let report = analysis::analyze(&sources, options)?;
    Ok((report, sources))
}
/// Reads and analyses the results directories (`build`) and renders the report as `format`
/// (a table without colour).
pub fn build_rendered(
    dirs: &[PathBuf],
    options: &Options,
    format: render::Format,
) -> Result<String> {
    let (report, sources) = build(dirs, options)?;
    let trials: Vec<TrialData> = sources
        .iter()
        .flat_map(|s| s.trials.iter().cloned())
        .collect();
    render::render(&report, format, false, &trials)
}

/// The same results directory given twice would count every trial twice, as one cohort
/// (`compare DIR DIR`) or as two identical ones: refused, with what to do instead.
fn refuse_repeated_directories(dirs: &[PathBuf]) -> Result<()> {
    let mut seen: Vec<(PathBuf, &PathBuf)> = Vec::new();
    for dir in dirs {
        let resolved = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone());
        if let Some((_, first)) = seen.iter().find(|(r, _)| *r == resolved) {
            anyhow::bail!(
                "{} and {} are the same results directory: its trials would be counted twice. To measure the noise between identical setups, run an A/A experiment (two [[configs]] with the same settings) and compare its two cohorts with `rubyrace compare DIR A B`",
                first.display(),
                dir.display()
            );
        }
        seen.push((resolved, dir));
    }
    Ok(())
}

pub mod charts;
pub mod format;
