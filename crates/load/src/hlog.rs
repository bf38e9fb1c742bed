//! A trial's latency log (`latency.hlog`): the merged latency histogram written as an
//! HdrHistogram interval log, readable by HistogramLogProcessor and HdrHistogram's plotting
//! tools, and read back, merged over its intervals, by the report. The reader is the
//! writer's inverse; both live here so the format has one home.

use std::io;
use std::path::{Path, PathBuf};

use hdrhistogram::serialization::interval_log::{
    IntervalLogIterator, IntervalLogWriterBuilder, IntervalLogWriterError, LogEntry,
    LogIteratorError, Tag,
};
use hdrhistogram::serialization::{DeserializeError, Deserializer, V2SerializeError, V2Serializer};
use hdrhistogram::{AdditionError, Histogram};

/// Writes the merged latency histogram (nanoseconds) as one interval of an HdrHistogram
/// interval log, readable by HistogramLogProcessor and HdrHistogram's plotting tools.
pub fn write_hdr_log<W: io::Write>(
    out: &mut W,
    histogram: &Histogram<u64>,
    elapsed_s: f64,
) -> io::Result<()> {
    let mut serializer = V2Serializer::new();
    let now = std::time::SystemTime::now();
    let mut writer = IntervalLogWriterBuilder::new()
        .with_start_time(now)
        .with_base_time(now)
        .with_max_value_divisor(1_000_000.0)
        .add_comment("rubyrace load: latency in nanoseconds; max column in milliseconds")
        .begin_log_with(out, &mut serializer)?;
    writer
        .write_histogram(
            histogram,
            std::time::Duration::ZERO,
            std::time::Duration::from_secs_f64(elapsed_s.max(0.0)),
            Tag::new("latency"),
        )
        .map_err(hdr_log_error)?;
    Ok(())
}

/// The I/O error inside a histogram log error, kept as it is (so "No space left on device"
/// reads as such, and its OS code survives); the others described in words.
fn hdr_log_error(e: IntervalLogWriterError<V2SerializeError>) -> io::Error {
    use IntervalLogWriterError as Log;
    use V2SerializeError as V2;
    match e {
        Log::IoError(e) | Log::SerializeError(V2::IoError(e)) => e,
        Log::SerializeError(V2::CountNotSerializable) => {
            io::Error::other("a latency count is too large to serialize")
        }
        Log::SerializeError(V2::UsizeTypeTooSmall) => {
            io::Error::other("the latency histogram is too large to serialize")
        }
    }
}

/// Why a latency log could not be read; every message starts with the file's path (the
/// report shows them as they are, with their sources after a colon).
#[derive(Debug, thiserror::Error)]
pub enum HdrLogReadError {
    #[error("cannot read {}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        error: io::Error,
    },
    #[error(
        "{}: not an HdrHistogram interval log (unreadable from byte {offset})",
        .path.display()
    )]
    NotALog { path: PathBuf, offset: usize },
    #[error("{}: bad base64", .path.display())]
    BadBase64 {
        path: PathBuf,
        #[source]
        error: base64::DecodeError,
    },
    #[error("{}: a damaged histogram ({detail})", .path.display())]
    DamagedHistogram {
        path: PathBuf,
        detail: DeserializeError,
    },
    #[error("{}: {detail}", .path.display())]
    Merge {
        path: PathBuf,
        detail: AdditionError,
    },
    #[error("{} holds no histogram", .path.display())]
    NoHistogram { path: PathBuf },
}

/// The latency histogram of a trial (nanoseconds), merged over the log's intervals: what
/// `write_hdr_log` wrote.
pub fn read_hdr_log(path: &Path) -> Result<Histogram<u64>, HdrLogReadError> {
    use base64::Engine as _;
    let at = || path.to_path_buf();
    let bytes = std::fs::read(path).map_err(|error| HdrLogReadError::Read { path: at(), error })?;
    let mut merged: Option<Histogram<u64>> = None;
    let mut deserializer = Deserializer::new();
    for entry in IntervalLogIterator::new(&bytes) {
        let entry = entry.map_err(|e| match e {
            LogIteratorError::ParseError { offset } => {
                HdrLogReadError::NotALog { path: at(), offset }
            }
        })?;
        if let LogEntry::Interval(interval) = entry {
            let raw = base64::engine::general_purpose::STANDARD
                .decode(interval.encoded_histogram())
                .map_err(|error| HdrLogReadError::BadBase64 { path: at(), error })?;
            let h: Histogram<u64> = deserializer
                .deserialize(&mut &raw[..])
                .map_err(|detail| HdrLogReadError::DamagedHistogram { path: at(), detail })?;
            match &mut merged {
                Some(m) => m
                    .add(&h)
                    .map_err(|detail| HdrLogReadError::Merge { path: at(), detail })?,
                None => merged = Some(h),
            }
        }
    }
    merged.ok_or_else(|| HdrLogReadError::NoHistogram { path: at() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn latency_histogram() -> Histogram<u64> {
        let mut h = crate::stats::new_latency_histogram();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        h
    }

    #[test]
    fn hdr_log_round_trips() {
        let h = latency_histogram();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("latency.hlog");
        let mut buf = Vec::new();
        write_hdr_log(&mut buf, &h, 1.0).unwrap();
        let text = String::from_utf8(buf.clone()).unwrap();
        assert!(text.contains("#[StartTime:"), "{text}");
        std::fs::write(&path, &buf).unwrap();
        let back = read_hdr_log(&path).unwrap();
        assert_eq!(back.len(), 1000);
        assert_eq!(back, h);
        for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(back.value_at_quantile(q), h.value_at_quantile(q), "q {q}");
        }
    }

    /// Several intervals (a log HdrHistogram's own tools wrote) are merged into one.
    #[test]
    fn the_intervals_of_a_log_are_merged() {
        let h = latency_histogram();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("latency.hlog");
        let mut buf = Vec::new();
        write_hdr_log(&mut buf, &h, 1.0).unwrap();
        let interval = String::from_utf8(buf.clone())
            .unwrap()
            .lines()
            .find(|l| l.starts_with("Tag=latency,"))
            .unwrap()
            .to_string();
        buf.extend_from_slice(format!("{interval}\n").as_bytes());
        std::fs::write(&path, &buf).unwrap();
        let back = read_hdr_log(&path).unwrap();
        assert_eq!(back.len(), 2000);
        assert_eq!(back.value_at_quantile(0.5), h.value_at_quantile(0.5));
    }

    /// The report shows these messages as they are: each names the file and what is wrong.
    #[test]
    fn a_missing_empty_or_damaged_log_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("latency.hlog");
        let shown = |e: HdrLogReadError| e.to_string();
        let missing = read_hdr_log(&path).unwrap_err();
        // The OS's words follow as its source (`{:#}` of an anyhow error shows both).
        let cause = std::error::Error::source(&missing).and_then(|e| e.downcast_ref::<io::Error>());
        assert_eq!(cause.map(io::Error::kind), Some(io::ErrorKind::NotFound));
        assert_eq!(shown(missing), format!("cannot read {}", path.display()));

        std::fs::write(&path, "").unwrap();
        let empty = shown(read_hdr_log(&path).unwrap_err());
        assert_eq!(empty, format!("{} holds no histogram", path.display()));

        std::fs::write(&path, "#[StartTime: 1 (seconds since epoch)]\nnot a log\n").unwrap();
        let garbage = shown(read_hdr_log(&path).unwrap_err());
        assert!(
            garbage.starts_with(&format!(
                "{}: not an HdrHistogram interval log (unreadable from byte ",
                path.display()
            )),
            "{garbage}"
        );

        let mut buf = Vec::new();
        write_hdr_log(&mut buf, &latency_histogram(), 1.0).unwrap();
        let text = String::from_utf8(buf).unwrap();
        // The serialized histogram's cookie (its first bytes) made zero: still base64.
        let damaged = text.replace(",HIST", ",AAAA");
        assert_ne!(damaged, text, "{text}");
        std::fs::write(&path, damaged).unwrap();
        let damaged = shown(read_hdr_log(&path).unwrap_err());
        assert!(
            damaged.starts_with(&format!("{}: a damaged histogram (", path.display())),
            "{damaged}"
        );
    }
}
