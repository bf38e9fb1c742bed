//! Fuzzes `load::response::ResponseParser` the way a connection drives it.
//!
//! Input layout (see fuzz/README.md):
//!
//! | byte  | meaning                                                                 |
//! |-------|-------------------------------------------------------------------------|
//! | 0     | HEAD mask: response `i` answers a HEAD request when bit `i % 8` is set   |
//! | 1     | split pattern length `n = byte % 8 + 1`                                  |
//! | 2     | small buffer capacity `32 + 8 * byte` (exercises "head too large")       |
//! | 3..3+n| split pattern: read sizes, cycled; `0` means 20 000 (more than a buffer) |
//! | rest  | the bytes the server sends                                               |
//!
//! Each run models the engine's read loop (`engine.rs`, `on_readable`/`process_input`):
//! a fixed-capacity buffer receives reads of at most the free space, `feed` is called
//! until it neither consumes nor completes, consumed bytes are dropped, and a buffer
//! that is full of unconsumed bytes is "head too large". After each completed response
//! the parser is re-armed with `expect`. At the end of input `finish_at_eof` is called.
//!
//! Invariants checked on every run:
//! * `feed` never reports more bytes than it was given;
//! * a completion always consumes at least one byte, so the loop always progresses
//!   (and the total number of `feed` calls is bounded by the input length);
//! * the bytes of all completed responses equal the bytes consumed when each completes
//!   (every consumed byte belongs to exactly one response), so their sum never
//!   exceeds the total consumed;
//! * completed responses carry a final status (not 0, not 1xx);
//! * after `expect` the parser is idle.
//!
//! And across runs of the same server bytes:
//! * with the same 16 KiB buffer, the split pattern from the input and a single
//!   "everything at once" delivery give the same completions, the same error (if any),
//!   and, without error, the same consumed/leftover bytes and idleness at EOF;
//! * the same with the small buffer capacity;
//! * when the server bytes are shorter than 16 KiB, the buffer can never fill, so the
//!   16 KiB runs are also equal to feeding the whole input to an unbounded buffer.
//!
//! Why the bounded comparison is exact even for inputs over 16 KiB: the parser consumes
//! bodies as they arrive and stalls only at the start of an atomic unit (a head, a
//! chunk-size line, a trailer line). Whatever the split, the bytes it sees at a stall
//! are a prefix of `data[p..p + cap]` for the same position `p`, and "head too large"
//! happens exactly when the unit at `p` does not fit in `cap` bytes. Comparing bounded
//! against unbounded feeding, however, is only valid below the capacity: an unbounded
//! buffer would happily parse a 20 KiB head that the connection rejects.

#![no_main]

use libfuzzer_sys::fuzz_target;
use load::response::{Completed, ParseError, ResponseParser};

/// The connection's read buffer (`engine::READ_BUFFER`).
const READ_BUFFER: usize = 16 * 1024;

#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    /// Every completed response in order, the one completed by EOF included.
    completed: Vec<Completed>,
    /// The first error; parsing stops there.
    error: Option<ParseError>,
    /// Without error: (bytes consumed in total, bytes left unconsumed, parser idle at EOF).
    at_eof: Option<(u64, usize, bool)>,
}

fn is_head(mask: u8, response: usize) -> bool {
    mask & (1 << (response % 8)) != 0
}

/// Delivers `data` in reads of `sizes[i % sizes.len()]` bytes into a buffer of `cap` bytes.
fn run(data: &[u8], sizes: &[usize], cap: usize, head_mask: u8) -> Outcome {
    let mut parser = ResponseParser::new();
    let mut responses = 0usize;
    parser.expect(is_head(head_mask, responses));
    assert!(parser.is_idle());

    let mut completed = Vec::new();
    let mut buf: Vec<u8> = Vec::with_capacity(cap.min(data.len()));
    let mut start = 0usize; // consumed prefix of `buf`
    let mut pos = 0usize; // next byte of `data` the network delivers
    let mut piece_end = 0usize; // end of the piece the network currently holds
    let mut pieces = 0usize;
    let mut consumed: u64 = 0;
    let mut completed_bytes: u64 = 0;
    let mut feeds = 0usize;
    // Each feed consumes a byte, or is the last of a read: at most two per input byte.
    let feed_limit = 2 * data.len() + 2;

    loop {
        // One read from the socket. Like the engine, a buffer full of unconsumed bytes
        // fails before the read (even one that would report EOF).
        if buf.len() == cap {
            if start == 0 {
                return Outcome {
                    completed,
                    error: Some(ParseError::HeadTooLarge),
                    at_eof: None,
                };
            }
            buf.drain(..start);
            start = 0;
        }
        if pos == piece_end {
            if pos == data.len() {
                break; // end of file
            }
            let size = sizes[pieces % sizes.len()];
            pieces += 1;
            piece_end = pos.saturating_add(size).min(data.len());
        }
        let n = (cap - buf.len()).min(piece_end - pos);
        assert!(n > 0, "a read always delivers something");
        buf.extend_from_slice(&data[pos..pos + n]);
        pos += n;

        // Complete every response found in the buffer.
        loop {
            if start == buf.len() {
                buf.clear();
                start = 0;
                break;
            }
            feeds += 1;
            assert!(
                feeds <= feed_limit,
                "feed called {feeds} times for {} bytes",
                data.len()
            );
            let given = buf.len() - start;
            match parser.feed(&buf[start..]) {
                Err(error) => {
                    return Outcome {
                        completed,
                        error: Some(error),
                        at_eof: None,
                    }
                }
                Ok((used, done)) => {
                    assert!(used <= given, "feed used {used} of {given} bytes");
                    start += used;
                    consumed += used as u64;
                    match done {
                        Some(c) => {
                            assert!(used > 0, "completion without consuming: {c:?}");
                            check_completed(&c);
                            completed_bytes += c.bytes;
                            assert_eq!(
                                completed_bytes, consumed,
                                "response bytes vs consumed bytes"
                            );
                            completed.push(c);
                            responses += 1;
                            parser.expect(is_head(head_mask, responses));
                            assert!(parser.is_idle());
                        }
                        None if used == 0 => break, // needs more input
                        None => {}
                    }
                }
            }
        }
    }

    if let Some(c) = parser.finish_at_eof() {
        check_completed(&c);
        completed_bytes += c.bytes;
        assert_eq!(
            completed_bytes, consumed,
            "response bytes vs consumed bytes at EOF"
        );
        completed.push(c);
    }
    assert!(completed_bytes <= consumed);
    let leftover = buf.len() - start;
    assert_eq!(consumed + leftover as u64, data.len() as u64);
    Outcome {
        completed,
        error: None,
        at_eof: Some((consumed, leftover, parser.is_idle())),
    }
}

fn check_completed(c: &Completed) {
    assert!(c.bytes > 0, "empty response: {c:?}");
    assert!(
        c.status != 0,
        "status 0 is the parser's \"no status yet\": {c:?}"
    );
    assert!(
        !(100..200).contains(&c.status),
        "interim status completed a response: {c:?}"
    );
}

fuzz_target!(|input: &[u8]| {
    if input.len() < 3 {
        return;
    }
    let head_mask = input[0];
    let n = usize::from(input[1] % 8) + 1;
    let small_cap = 32 + 8 * usize::from(input[2]);
    let Some(pattern) = input.get(3..3 + n) else {
        return;
    };
    let data = &input[3 + n..];
    let sizes: Vec<usize> = pattern
        .iter()
        .map(|&b| if b == 0 { 20_000 } else { usize::from(b) })
        .collect();
    let whole = [usize::MAX];

    let split = run(data, &sizes, READ_BUFFER, head_mask);
    let at_once = run(data, &whole, READ_BUFFER, head_mask);
    assert_eq!(
        split, at_once,
        "16 KiB buffer: split {sizes:?} vs all at once"
    );
    if data.len() < READ_BUFFER {
        // The buffer never fills: the bound plays no part.
        let unbounded = run(data, &whole, usize::MAX, head_mask);
        assert_eq!(at_once, unbounded, "16 KiB buffer vs unbounded");
    }

    let split = run(data, &sizes, small_cap, head_mask);
    let at_once = run(data, &whole, small_cap, head_mask);
    assert_eq!(
        split, at_once,
        "{small_cap} byte buffer: split {sizes:?} vs all at once"
    );
});
