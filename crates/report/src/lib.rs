//! rubyrace's reports: turns stored results into an answer with its uncertainty attached.
//!
//! `load` reads results directories (via `lab::store`) into trials; `analysis` groups them
//! into cohorts, summarizes them and compares each with the baseline (using `stats`); the
//! renderers turn the resulting `model::Report` into a terminal table, Markdown, CSV, JSON,
//! benchstat text or an offline HTML page with SVG charts.

pub mod analysis;
pub mod input;
pub mod model;
pub mod text;

use std::path::PathBuf;

use anyhow::Result;

pub use analysis::Options;
pub use input::{SourceData, TrialData};
pub use model::Report;

/// Reads the results directories and analyses them.
pub fn build(dirs: &[PathBuf], options: &Options) -> Result<(Report, Vec<SourceData>)> {
    let sources = dirs
        .iter()
        .enumerate()
        .map(|(i, d)| input::read_source(d, i))
        .collect::<Result<Vec<_>>>()?;
    let report = analysis::analyze(&sources, options)?;
    Ok((report, sources))
}
pub mod charts;
pub mod html;
pub mod png;
