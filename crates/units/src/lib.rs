//! How rubyrace writes numbers with units, one way each: a latency, a byte count, a number
//! with grouped thousands, a number with about three significant digits. The load
//! generator's summary, the doctor, the run's progress lines and the report all print
//! through these functions, so "1.23 ms" or "512 MiB" reads the same everywhere.
//!
//! Report tables that must line up in one fixed unit (MiB columns, CPU ms/s) keep their
//! own column formats in `report::format`; this crate is for figures read one at a time.
#![forbid(unsafe_code)]

/// "1 block", "4 blocks": a count with its noun, singular for one.
pub fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// A span of time as people say it, to the second: `45s`, `3m 05s`, `2h 04m`,
/// `21d 1h` (humantime wrote `21days 1h 33m 12s`). Hours and days drop the seconds.
pub fn span(d: std::time::Duration) -> String {
    let s = d.as_secs();
    let (days, hours, minutes, seconds) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    if days > 0 {
        format!("{days}d {hours}h")
    } else if hours > 0 {
        format!("{hours}h {minutes:02}m")
    } else if minutes > 0 {
        format!("{minutes}m {seconds:02}s")
    } else {
        format!("{seconds}s")
    }
}

/// `v` with `decimals` decimals and commas between thousands: `12,345.6`; a negative
/// number gets a true minus sign, and a value that is not finite is "–".
pub fn fmt_num(v: f64, decimals: usize) -> String {
    if !v.is_finite() {
        return "–".to_string();
    }
    let s = format!("{:.*}", decimals, v.abs());
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (s.as_str(), None),
    };
    let mut out = String::new();
    let negative = v < 0.0 && s.chars().any(|c| c.is_ascii_digit() && c != '0');
    if negative {
        out.push('−');
    }
    for (i, ch) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if let Some(f) = frac {
        out.push('.');
        out.push_str(f);
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

/// A duration given in microseconds, as people read a latency: `845 µs`, `1.23 ms`,
/// `12.3 ms`, `123 ms`, `2.50 s`; "–" when it is not finite.
pub fn micros(us: f64) -> String {
    if !us.is_finite() {
        "–".to_string()
    } else if us < 1000.0 {
        format!("{} µs", fmt_num(us, 0))
    } else if us < 10_000.0 {
        format!("{} ms", fmt_num(us / 1000.0, 2))
    } else if us < 100_000.0 {
        format!("{} ms", fmt_num(us / 1000.0, 1))
    } else if us < 1_000_000.0 {
        format!("{} ms", fmt_num(us / 1000.0, 0))
    } else {
        format!("{} s", fmt_num(us / 1_000_000.0, 2))
    }
}

/// A byte count in binary units with about three significant digits: `512 B`,
/// `1.50 KiB`, `12.3 MiB`, `512 MiB`, `4.00 GiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else if value < 10.0 {
        format!("{value:.2} {}", UNITS[unit])
    } else if value < 100.0 {
        format!("{value:.1} {}", UNITS[unit])
    } else {
        format!("{value:.0} {}", UNITS[unit])
    }
}

/// Integers as a list of ranges, the way the kernel writes CPU lists and Slurm array
/// indices: `[0, 1, 2, 3, 8, 10, 11]` is "0-3,8,10-11" (sorted, each value once).
pub fn ranges(values: &[u32]) -> String {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_written_as_cpu_lists() {
        assert_eq!(ranges(&[0, 1, 2, 3, 7, 9, 10]), "0-3,7,9-10");
        assert_eq!(ranges(&[5]), "5");
        assert_eq!(ranges(&[3, 1, 2, 1]), "1-3");
        assert_eq!(ranges(&[]), "");
    }

    #[test]
    fn spans_read_as_people_say_them() {
        use std::time::Duration;
        assert_eq!(span(Duration::from_secs(45)), "45s");
        assert_eq!(span(Duration::from_secs(185)), "3m 05s");
        assert_eq!(span(Duration::from_secs(2 * 3600 + 4 * 60 + 9)), "2h 04m");
        assert_eq!(
            span(Duration::from_secs(21 * 86_400 + 3600 + 33 * 60)),
            "21d 1h"
        );
        assert_eq!(span(Duration::from_millis(900)), "0s");
    }

    #[test]
    fn numbers_are_grouped_and_signed() {
        assert_eq!(fmt_num(12345.678, 1), "12,345.7");
        assert_eq!(fmt_num(-1234.0, 0), "−1,234");
        assert_eq!(fmt_num(-0.001, 1), "0.0");
        assert_eq!(fmt_num(f64::NAN, 1), "–");
        assert_eq!(fmt_num(999.0, 0), "999");
    }

    #[test]
    fn significant_digits() {
        assert_eq!(fmt_sig(12345.0), "12,345");
        assert_eq!(fmt_sig(12.34), "12.3");
        assert_eq!(fmt_sig(1.234), "1.23");
        assert_eq!(fmt_sig(0.1234), "0.123");
        assert_eq!(fmt_sig(0.0), "0");
    }

    #[test]
    fn latencies_take_the_unit_a_person_reads() {
        assert_eq!(micros(845.0), "845 µs");
        assert_eq!(micros(1234.0), "1.23 ms");
        assert_eq!(micros(12_345.0), "12.3 ms");
        assert_eq!(micros(123_456.0), "123 ms");
        assert_eq!(micros(2_500_000.0), "2.50 s");
        assert_eq!(micros(f64::INFINITY), "–");
    }

    #[test]
    fn byte_counts_in_binary_units() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(bytes(20 * 1024 * 1024 + 300 * 1024), "20.3 MiB");
        assert_eq!(bytes(512 * 1024 * 1024), "512 MiB");
        assert_eq!(bytes(4 * 1024 * 1024 * 1024), "4.00 GiB");
    }
}
