//! The streaming per-request log (`--raw FILE`). Each thread formats its lines into its own
//! fixed buffer and hands full buffers to one file opened in append mode, so every line is
//! written whole, memory stays flat and the cost per request is one small formatting step.
//!
//! Format (tab-separated text, one request per line, documented in docs/load.md):
//! `start_ns latency_ns status bytes conn url error`. Lines from different threads
//! interleave in blocks; sort on the first column for a time-ordered view.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

pub const RAW_HEADER: &str =
    "# rubyrace raw v1\nstart_ns\tlatency_ns\tstatus\tbytes\tconn\turl\terror\n";

const FLUSH_AT: usize = 60 * 1024;

/// The file all threads append to.
pub struct RawLog {
    file: File,
}

impl RawLog {
    pub fn create(path: &Path) -> io::Result<Self> {
        let mut file = File::create(path)?;
        file.write_all(RAW_HEADER.as_bytes())?;
        drop(file);
        let file = std::fs::OpenOptions::new().append(true).open(path)?;
        Ok(RawLog { file })
    }

    /// A buffered writer for one thread.
    pub fn writer(&self) -> io::Result<RawWriter> {
        Ok(RawWriter {
            file: self.file.try_clone()?,
            buffer: Vec::with_capacity(FLUSH_AT + 256),
            failed: None,
        })
    }
}

/// One thread's view of the raw log.
pub struct RawWriter {
    file: File,
    buffer: Vec<u8>,
    failed: Option<io::Error>,
}

/// One line of the raw log.
pub struct RawRecord {
    pub start_ns: u64,
    pub latency_ns: u64,
    pub status: u16,
    pub bytes: u64,
    pub conn: u64,
    pub url: u32,
    pub error: Option<&'static str>,
}

impl RawWriter {
    #[inline]
    pub fn record(&mut self, r: &RawRecord) {
        let mut num = itoa::Buffer::new();
        let b = &mut self.buffer;
        let numbers = [
            r.start_ns,
            r.latency_ns,
            u64::from(r.status),
            r.bytes,
            r.conn,
            u64::from(r.url),
        ];
        for n in numbers {
            b.extend_from_slice(num.format(n).as_bytes());
            b.push(b'\t');
        }
        b.extend_from_slice(r.error.unwrap_or("-").as_bytes());
        b.push(b'\n');
        if b.len() >= FLUSH_AT {
            self.flush();
        }
    }

    /// Writes the buffered lines. The first write error is kept and reported at the end;
    /// the load itself goes on so that the summary is not lost.
    pub fn flush(&mut self) {
        if !self.buffer.is_empty() && self.failed.is_none() {
            if let Err(e) = self.file.write_all(&self.buffer) {
                self.failed = Some(e);
            }
        }
        self.buffer.clear();
    }

    /// Flushes and returns the first error, if any.
    pub fn finish(mut self) -> io::Result<()> {
        self.flush();
        match self.failed.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
