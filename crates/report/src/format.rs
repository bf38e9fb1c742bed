//! Numbers, units, p-values and escaping for every renderer. Figures read one at a time
//! (`fmt_num`, `fmt_sig`, `micros`) come from the `units` crate, shared with the load
//! generator and the doctor; the table columns that must line up in one unit (`mib`,
//! `rate`, `cpu_rate`) are here; a p-value is written by `format_p` everywhere.

/// Escapes `s` for HTML and XML text and for quoted attribute values: `&`, `<`, `>`, `"`
/// and `'` become entities, and control characters that XML forbids become U+FFFD, so the
/// SVG stays well-formed for renderers stricter than a browser.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' | '\r' => out.push(ch),
            c if (c as u32) < 0x20 || c == '\u{7f}' || c == '\u{fffe}' || c == '\u{ffff}' => {
                out.push('\u{fffd}')
            }
            c => out.push(c),
        }
    }
    out
}

pub use units::{fmt_num, fmt_sig, micros};

/// "p<0.001" or "p=0.021".
/// A confidence level in percent, to one decimal, without a trailing ".0": 0.95 → "95%",
/// 0.98333 → "98.3%".
pub fn confidence_text(confidence: f64) -> String {
    let pct = format!("{:.1}", 100.0 * confidence);
    format!("{}%", pct.trim_end_matches(".0"))
}

pub fn p_text(p: f64) -> String {
    if p < 0.001 {
        "p<0.001".into()
    } else {
        format!("p={}", format_p(p))
    }
}

/// p-values as people read them.
pub fn format_p(p: f64) -> String {
    if p < 0.001 {
        "<0.001".into()
    } else {
        format!("{p:.3}")
    }
}

/// A p-value in a table cell: as [`format_p`] prints it, "–" when there is none.
pub fn p_cell(p: Option<f64>) -> String {
    match p {
        Some(p) if p.is_finite() => format_p(p),
        _ => "–".to_string(),
    }
}

pub(crate) fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / (1024.0 * 1024.0))
}

pub(crate) fn rate(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

pub(crate) fn seconds(v: f64) -> String {
    format!("{v:.3} s")
}

/// A number with about four significant digits.
pub(crate) fn fmt_g(v: f64) -> String {
    if v.abs() >= 1000.0 || v == v.trunc() {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

pub(crate) fn dash() -> String {
    "-".into()
}

/// Bytes as KiB below a MiB, else MiB.
pub(crate) fn bytes(v: f64) -> String {
    if v < 1024.0 * 1024.0 {
        format!("{:.0} KiB", v / 1024.0)
    } else {
        mib(v)
    }
}

pub(crate) fn count_k(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else {
        fmt_g(v)
    }
}

/// A CPU rate in µs per second, in milliseconds of CPU per second.
pub(crate) fn cpu_rate(us_per_s: f64) -> String {
    format!("{:.1} ms/s", us_per_s / 1000.0)
}

/// Text for a Markdown table cell: `&` first (so `&lt;` in a name stays literal), then the
/// table's `|`, and `<`, `>` that GitHub would read as HTML.
pub(crate) fn md_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('|', "\\|")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `&` was left as is (GitHub then reads `&lt;` in a label as `<`).
    #[test]
    fn markdown_cells_escape_ampersands_pipes_and_markup() {
        assert_eq!(md_escape("a & b"), "a &amp; b");
        assert_eq!(md_escape("&lt;b&gt;"), "&amp;lt;b&amp;gt;");
        assert_eq!(md_escape("x | <b>"), "x \\| &lt;b&gt;");
    }

    #[test]
    fn a_p_value_reads_the_same_in_every_format() {
        assert_eq!(format_p(0.0213), "0.021");
        assert_eq!(format_p(0.25), "0.250");
        assert_eq!(format_p(0.0004), "<0.001");
        assert_eq!(p_text(0.0213), "p=0.021");
        assert_eq!(p_cell(Some(0.0213)), "0.021");
        assert_eq!(p_cell(None), "–");
        assert_eq!(p_cell(Some(f64::NAN)), "–");
    }

    #[test]
    fn escape_covers_text_and_attributes() {
        assert_eq!(
            escape("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(escape("plain µs ±1%"), "plain µs ±1%");
        assert_eq!(escape("nul\0bell\x07"), "nul\u{fffd}bell\u{fffd}");
        assert_eq!(escape("tab\tnl\n"), "tab\tnl\n");
    }
}
