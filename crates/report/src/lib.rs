//! rubyrace's reports: turns stored results into an answer with its uncertainty attached.
//!
//! `load` reads results directories (via `lab::store`) into trials; `analysis` groups them
//! into cohorts, summarizes them and compares each with the baseline (using `stats`); the
//! renderers turn the resulting `model::Report` into a terminal table, Markdown, CSV, JSON,
//! benchstat text or an offline HTML page with SVG charts.

pub mod model;
