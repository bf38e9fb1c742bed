//! Every output format of a report, one module each (as hyperfine's exporters): the
//! terminal table, Markdown, CSV, JSON, benchstat's format and the HTML page (maud
//! templates: `html.rs`, its sections in `html/`, the profiles among them); `png` writes
//! the charts as files. `cells` holds what the text formats share.

pub mod benchstat;
pub mod cells;
pub mod csv;
pub mod html;
pub mod markdown;
pub mod png;
pub mod table;

use crate::input::TrialData;
use crate::model::Report;

/// The formats `rubyrace report` and `compare` write, named as `--format` takes them (the
/// command line's list is `Format::VARIANTS`).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, strum::EnumString, strum::IntoStaticStr, strum::VariantNames,
)]
#[strum(serialize_all = "lowercase")]
pub enum Format {
    /// The terminal table (coloured when `render` is asked for colour).
    Table,
    Markdown,
    Csv,
    Json,
    Benchstat,
    Html,
}

/// `report` in `format`; benchstat lists `trials` (the report's sources' trials); the table
/// is coloured when `color`.
pub fn render(
    report: &Report,
    format: Format,
    color: bool,
    trials: &[TrialData],
) -> anyhow::Result<String> {
    Ok(match format {
        Format::Table => table::table(report, color),
        Format::Markdown => markdown::markdown(report),
        Format::Csv => csv::csv(report)?,
        Format::Json => serde_json::to_string_pretty(report)? + "\n",
        Format::Benchstat => benchstat::benchstat(report, trials),
        Format::Html => html::render(report),
    })
}
