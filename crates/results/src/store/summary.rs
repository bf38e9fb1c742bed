//! The end-of-run summary `rubyrace run` prints.

/// The end-of-run summary `rubyrace run` prints: per configuration, its trials by status and
/// the medians over its valid trials (throughput or a script's wall time, RSS and PSS at
/// the end), as an aligned table (comfy-table: labels of any width line up).
pub fn summary_table(rows: &[SummaryRow]) -> String {
    use comfy_table::{presets, CellAlignment, Table};
    let mut table = Table::new();
    table.load_preset(presets::NOTHING).set_header([
        "configuration",
        "valid",
        "invalid",
        "failed",
        "median",
        "median RSS",
        "median PSS",
    ]);
    for r in rows {
        let median = |v: &[f64]| stats::median(v);
        let main = median(&r.requests_per_s)
            .map(|v| format!("{v:.1} req/s"))
            .or_else(|| median(&r.script_wall_s).map(|w| format!("{w:.3} s wall")))
            .unwrap_or_else(|| "-".into());
        let mem = |v: &[f64]| {
            median(v)
                .map(|b| units::bytes(b as u64))
                .unwrap_or_else(|| "-".into())
        };
        table.add_row([
            r.label.clone(),
            r.valid.to_string(),
            r.invalid.to_string(),
            r.failed.to_string(),
            main,
            mem(&r.rss_end_bytes),
            mem(&r.pss_end_bytes),
        ]);
    }
    for column in 0..7 {
        if let Some(c) = table.column_mut(column) {
            // Two spaces between columns, none before the first.
            c.set_padding((0, if column == 6 { 0 } else { 2 }));
            if column > 0 {
                c.set_cell_alignment(CellAlignment::Right);
            }
        }
    }
    let mut text = table.trim_fmt();
    text.push_str(
        "\n(medians over valid trials; memory is the server's whole process tree at the end of the measurement; scripts show wall time)\n",
    );
    text
}

/// What the end-of-run summary shows for one configuration (valid trials only).
#[derive(Clone, Debug, Default)]
pub struct SummaryRow {
    pub label: String,
    pub valid: usize,
    pub invalid: usize,
    pub failed: usize,
    pub requests_per_s: Vec<f64>,
    pub rss_end_bytes: Vec<f64>,
    pub pss_end_bytes: Vec<f64>,
    pub script_wall_s: Vec<f64>,
}
