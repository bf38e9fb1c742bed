//! How many connections are open at once: each thread's exact counts, published in an
//! atomic of its own at its timer checks, and the peaks the main thread samples from them.

use std::sync::atomic::{AtomicU64, Ordering};

/// The most connections open at once over the whole run, warmup included.
///
/// Open means connected from the client's side (the kernel completed the handshake) and
/// not closed yet. That includes connections waiting in the server's accept queue, and
/// half-open ones whose handshake's last ACK the server dropped because that queue was
/// full: the client cannot tell them apart from served ones, except that no response
/// comes. So the most open connections at once that had received a response is
/// counted too.
///
/// Each thread counts its own connections exactly, at every connect, first response and
/// close (plain integers). With one thread those counts give the peaks. With several, the
/// main thread sums, every `OPEN_SAMPLE_INTERVAL`, the counts each thread last published
/// at its timer check (at least every 10 ms): a sample can miss a peak shorter than that,
/// or add counts up to 10 ms apart. Each peak reported is the larger of the sampled sums
/// and of the largest single thread's exact peak (a true lower bound); the sum of the
/// threads' own peaks in `per_thread` is an upper bound of `open`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OpenPeak {
    /// Connections open at the busiest moment.
    pub open: u64,
    /// Connections still in their TCP handshake at that moment.
    pub connecting: u64,
    /// The most open connections at once that had each received a response.
    pub answered: u64,
    /// Each thread's own exact peak of `open`.
    pub per_thread: Vec<u64>,
    /// True with one thread: the peaks are then exact rather than sampled.
    pub exact: bool,
}

/// A thread's connection counts at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct OpenCount {
    /// Connected and not closed.
    pub(super) open: u64,
    /// In their TCP handshake.
    pub(super) connecting: u64,
    /// Open, and a response has arrived on them since they connected.
    pub(super) answered: u64,
}

impl OpenCount {
    pub(super) fn plus(self, other: OpenCount) -> OpenCount {
        OpenCount {
            open: self.open + other.open,
            connecting: self.connecting + other.connecting,
            answered: self.answered + other.answered,
        }
    }
}

/// One thread's `OpenCount`, published at its timer checks for the main thread to sample.
/// On a cache line of its own, so that the sampler's reads cost the thread nothing.
#[repr(align(64))]
#[derive(Default)]
pub(super) struct OpenGauge(AtomicU64);

/// Bits of each count packed in an `OpenGauge`: up to 2,097,151 connections per thread,
/// more than the kernel's maximum number of open files (`fs.nr_open`, 1,048,576).
const GAUGE_BITS: u32 = 21;
const GAUGE_MASK: u64 = (1 << GAUGE_BITS) - 1;

impl OpenGauge {
    pub(super) fn publish(&self, count: OpenCount) {
        let packed = count.open.min(GAUGE_MASK)
            | count.connecting.min(GAUGE_MASK) << GAUGE_BITS
            | count.answered.min(GAUGE_MASK) << (2 * GAUGE_BITS);
        self.0.store(packed, Ordering::Relaxed);
    }

    pub(super) fn read(&self) -> OpenCount {
        let packed = self.0.load(Ordering::Relaxed);
        OpenCount {
            open: packed & GAUGE_MASK,
            connecting: packed >> GAUGE_BITS & GAUGE_MASK,
            answered: packed >> (2 * GAUGE_BITS) & GAUGE_MASK,
        }
    }
}
