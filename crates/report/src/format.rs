//! Numbers, units, p-values and escaping for every renderer. The HTML page and its SVG
//! charts share `fmt_num`, `fmt_sig` and `fmt_us`; the text formats use the compact forms
//! (`micros`, `mib`, `rate`); a p-value is written by `format_p` everywhere.

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

/// `v` with `decimals` decimals and commas between thousands: `12,345.6`.
pub fn fmt_num(v: f64, decimals: usize) -> String {
    if !v.is_finite() {
        return "–".to_string();
    }
    let s = format!("{:.*}", decimals, v.abs());
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i.to_string(), Some(f.to_string())),
        None => (s.clone(), None),
    };
    let mut grouped = String::new();
    for (i, ch) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(ch);
    }
    let negative = v < 0.0 && s.chars().any(|c| c.is_ascii_digit() && c != '0');
    let mut out = String::new();
    if negative {
        out.push('−');
    }
    out.push_str(&grouped);
    if let Some(f) = frac {
        out.push('.');
        out.push_str(&f);
    }
    out
}

/// About three significant digits: `12,345`, `123`, `12.3`, `1.23`, `0.123`.
pub fn fmt_sig(v: f64) -> String {
    let a = v.abs();
    let decimals = if a >= 100.0 || a == 0.0 {
        0
    } else if a >= 10.0 {
        1
    } else if a >= 1.0 {
        2
    } else {
        (2.0 - a.log10().floor()).clamp(0.0, 6.0) as usize
    };
    fmt_num(v, decimals)
}

/// A latency in µs as people read it: `845 µs`, `1.23 ms`, `12.3 ms`, `123 ms`.
pub fn fmt_us(us: f64) -> String {
    if !us.is_finite() {
        "–".to_string()
    } else if us < 1000.0 {
        format!("{} µs", fmt_num(us, 0))
    } else if us < 10_000.0 {
        format!("{} ms", fmt_num(us / 1000.0, 2))
    } else if us < 100_000.0 {
        format!("{} ms", fmt_num(us / 1000.0, 1))
    } else {
        format!("{} ms", fmt_num(us / 1000.0, 0))
    }
}

/// "p<0.001" or "p=0.021".
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

pub(crate) fn micros(us: f64) -> String {
    if us >= 1000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
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

    /// Issue 13 item 18: `&` was left as is (GitHub then reads `&lt;` in a label as `<`).
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
    fn numbers_are_formatted_for_people() {
        assert_eq!(fmt_num(1234567.0, 0), "1,234,567");
        assert_eq!(fmt_num(-1234.5, 1), "−1,234.5");
        assert_eq!(fmt_num(-0.0001, 2), "0.00");
        assert_eq!(fmt_num(999.0, 0), "999");
        assert_eq!(fmt_sig(12345.4), "12,345");
        assert_eq!(fmt_sig(12.345), "12.3");
        assert_eq!(fmt_sig(0.01234), "0.0123");
        assert_eq!(fmt_us(845.0), "845 µs");
        assert_eq!(fmt_us(1234.0), "1.23 ms");
        assert_eq!(fmt_us(123456.0), "123 ms");
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
