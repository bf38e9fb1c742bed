//! Incremental HTTP/1.1 response parsing. The head is parsed by `httparse`; the body is
//! skipped without being copied, framed by Content-Length, chunked encoding (trailers
//! included) or the close of the connection. Bodies are absent for HEAD, 1xx, 204 and 304.
//!
//! The parser never owns a buffer: the connection feeds it whatever bytes it holds and
//! learns how many were used. That keeps it allocation-free and easy to fuzz.

use std::fmt;

/// How many header fields a response head may have.
pub const MAX_HEADERS: usize = 100;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Head,
    FixedBody { remaining: u64 },
    ChunkSize,
    ChunkData { remaining: u64 },
    ChunkDataEnd { seen_cr: bool },
    Trailers,
    UntilClose,
}

/// A complete response, as far as the load engine cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completed {
    pub status: u16,
    /// The server will close (or has closed) the connection after this response.
    pub server_closes: bool,
    /// Every byte of this response, head and body, interim 1xx heads included.
    pub bytes: u64,
}

/// Why a response could not be parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// The head is not valid HTTP/1.x.
    MalformedHead,
    /// Content-Length is not a number or appears with different values.
    BadContentLength,
    /// A chunk-size line or chunk terminator is malformed.
    BadChunk,
    /// The server switched protocols, which a load test cannot follow.
    UnexpectedUpgrade,
    /// The head (or a trailer) does not fit in the connection's read buffer.
    HeadTooLarge,
}

impl ParseError {
    pub fn as_str(self) -> &'static str {
        match self {
            ParseError::MalformedHead => "malformed head",
            ParseError::BadContentLength => "bad content-length",
            ParseError::BadChunk => "bad chunk",
            ParseError::UnexpectedUpgrade => "unexpected upgrade",
            ParseError::HeadTooLarge => "head too large",
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a scenario keeps of a response: its headers, and its body when a step extracts
/// from it. Filled by [`ResponseParser::feed_capturing`]; a URL mix never makes one.
#[derive(Clone, Debug, Default)]
pub struct Capture {
    /// `(lower-case name, value)`, in order; interim (1xx) heads are not kept.
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
    /// Keep the body (up to `body_limit` bytes).
    pub keep_body: bool,
    pub body_limit: usize,
    /// The body was longer than `body_limit`: what was kept is not the whole body.
    pub body_cut: bool,
}

impl Capture {
    /// Empties it for the next response.
    pub fn reset(&mut self, keep_body: bool, body_limit: usize) {
        self.headers.clear();
        self.body.clear();
        self.keep_body = keep_body;
        self.body_limit = body_limit;
        self.body_cut = false;
    }

    fn body_bytes(&mut self, bytes: &[u8]) {
        if !self.keep_body {
            return;
        }
        let room = self.body_limit.saturating_sub(self.body.len());
        if bytes.len() > room {
            self.body_cut = true;
        }
        self.body.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// The whole body, if it was kept and not cut.
    pub fn whole_body(&self) -> Option<&[u8]> {
        (self.keep_body && !self.body_cut).then_some(&self.body[..])
    }
}

/// Parses one response at a time; call [`ResponseParser::expect`] before each.
#[derive(Clone, Debug)]
pub struct ResponseParser {
    state: State,
    expects_body: bool,
    status: u16,
    server_closes: bool,
    bytes: u64,
}

impl Default for ResponseParser {
    fn default() -> Self {
        Self::new()
    }
}

impl ResponseParser {
    pub fn new() -> Self {
        ResponseParser {
            state: State::Head,
            expects_body: true,
            status: 0,
            server_closes: false,
            bytes: 0,
        }
    }

    /// Resets for the next response; `request_was_head` means no body will follow.
    pub fn expect(&mut self, request_was_head: bool) {
        *self = ResponseParser::new();
        self.expects_body = !request_was_head;
    }

    /// True while nothing of the current response has been consumed.
    pub fn is_idle(&self) -> bool {
        self.state == State::Head && self.bytes == 0
    }

    /// Consumes a prefix of `buf`. Returns how many bytes were used and, when the response
    /// ended inside `buf`, the completed response. Zero bytes used without completion means
    /// more input is needed before progress is possible.
    pub fn feed(&mut self, buf: &[u8]) -> Result<(usize, Option<Completed>), ParseError> {
        self.feed_capturing(buf, None)
    }

    /// [`ResponseParser::feed`], keeping the head's headers and the body in `capture`.
    pub fn feed_capturing(
        &mut self,
        buf: &[u8],
        mut capture: Option<&mut Capture>,
    ) -> Result<(usize, Option<Completed>), ParseError> {
        let mut used = 0;
        while used < buf.len() {
            let rest = &buf[used..];
            let step = match self.state {
                State::Head => self.parse_head(rest, capture.as_deref_mut())?,
                State::FixedBody { remaining } => {
                    let n = remaining.min(rest.len() as u64);
                    if let Some(c) = capture.as_deref_mut() {
                        c.body_bytes(&rest[..n as usize]);
                    }
                    self.state = State::FixedBody {
                        remaining: remaining - n,
                    };
                    if remaining == n {
                        self.state = State::Head;
                        self.bytes += n;
                        return Ok((used + n as usize, Some(self.completed())));
                    }
                    n as usize
                }
                State::ChunkSize => match httparse::parse_chunk_size(rest) {
                    Ok(httparse::Status::Complete((n, 0))) => {
                        self.state = State::Trailers;
                        n
                    }
                    Ok(httparse::Status::Complete((n, size))) => {
                        self.state = State::ChunkData { remaining: size };
                        n
                    }
                    Ok(httparse::Status::Partial) => 0,
                    Err(_) => return Err(ParseError::BadChunk),
                },
                State::ChunkData { remaining } => {
                    let n = remaining.min(rest.len() as u64);
                    if let Some(c) = capture.as_deref_mut() {
                        c.body_bytes(&rest[..n as usize]);
                    }
                    self.state = if remaining == n {
                        State::ChunkDataEnd { seen_cr: false }
                    } else {
                        State::ChunkData {
                            remaining: remaining - n,
                        }
                    };
                    n as usize
                }
                State::ChunkDataEnd { seen_cr } => match (seen_cr, rest[0]) {
                    (false, b'\r') => {
                        self.state = State::ChunkDataEnd { seen_cr: true };
                        1
                    }
                    (_, b'\n') => {
                        self.state = State::ChunkSize;
                        1
                    }
                    _ => return Err(ParseError::BadChunk),
                },
                State::Trailers => match memchr_newline(rest) {
                    // An empty line ends the trailer section and the response.
                    Some(0) => {
                        self.bytes += 1;
                        self.state = State::Head;
                        return Ok((used + 1, Some(self.completed())));
                    }
                    Some(1) if rest[0] == b'\r' => {
                        self.bytes += 2;
                        self.state = State::Head;
                        return Ok((used + 2, Some(self.completed())));
                    }
                    Some(end) => end + 1,
                    None => 0,
                },
                State::UntilClose => {
                    if let Some(c) = capture.as_deref_mut() {
                        c.body_bytes(rest);
                    }
                    rest.len()
                }
            };
            if step == 0 {
                // A completed head with no body returns from parse_head directly.
                break;
            }
            self.bytes += step as u64;
            used += step;
            if self.state == State::Head && self.status != 0 && !self.in_interim() {
                return Ok((used, Some(self.completed())));
            }
        }
        Ok((used, None))
    }

    /// The connection reached end of file. A body delimited by the close is complete now;
    /// anything else in progress was cut short (`None`).
    pub fn finish_at_eof(&mut self) -> Option<Completed> {
        if self.state == State::UntilClose {
            self.state = State::Head;
            self.server_closes = true;
            Some(self.completed())
        } else {
            None
        }
    }

    fn in_interim(&self) -> bool {
        (100..200).contains(&self.status)
    }

    fn completed(&mut self) -> Completed {
        let done = Completed {
            status: self.status,
            server_closes: self.server_closes,
            bytes: self.bytes,
        };
        self.status = 0;
        self.bytes = 0;
        done
    }

    fn parse_head(
        &mut self,
        buf: &[u8],
        capture: Option<&mut Capture>,
    ) -> Result<usize, ParseError> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut response = httparse::Response::new(&mut headers);
        let head_len = match response.parse(buf) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Ok(0),
            Err(_) => return Err(ParseError::MalformedHead),
        };
        let status = response.code.ok_or(ParseError::MalformedHead)?;
        // httparse takes any three digits; below 100 is not a status (RFC 9110 §15), and
        // 0 would read as "no head yet" below.
        if status < 100 {
            return Err(ParseError::MalformedHead);
        }
        let http10 = response.version == Some(0);
        let mut content_length: Option<u64> = None;
        let mut chunked = false;
        let mut other_coding = false;
        let mut close = http10;
        for h in response.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                let value = std::str::from_utf8(h.value)
                    .ok()
                    .map(str::trim)
                    .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|v| v.parse::<u64>().ok())
                    .ok_or(ParseError::BadContentLength)?;
                if content_length.is_some_and(|old| old != value) {
                    return Err(ParseError::BadContentLength);
                }
                content_length = Some(value);
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                // Only the last coding frames the body (RFC 9112 §6.3).
                let last = h.value.rsplit(|&b| b == b',').next().unwrap_or(b"");
                chunked = trim_ascii(last).eq_ignore_ascii_case(b"chunked");
                other_coding = !chunked;
            } else if h.name.eq_ignore_ascii_case("connection") {
                for token in h.value.split(|&b| b == b',') {
                    let token = trim_ascii(token);
                    if token.eq_ignore_ascii_case(b"close") {
                        close = true;
                    } else if token.eq_ignore_ascii_case(b"keep-alive") && http10 {
                        close = false;
                    }
                }
            }
        }
        self.status = status;
        if status == 101 {
            return Err(ParseError::UnexpectedUpgrade);
        }
        if self.in_interim() {
            // 100 Continue and friends: the real response follows.
            return Ok(head_len);
        }
        self.server_closes = close;
        if let Some(c) = capture {
            c.headers.extend(
                response
                    .headers
                    .iter()
                    .map(|h| (h.name.to_ascii_lowercase(), h.value.to_vec())),
            );
        }
        let no_body = !self.expects_body || status == 204 || status == 304;
        self.state = if no_body {
            State::Head
        } else if chunked {
            State::ChunkSize
        } else if other_coding {
            self.server_closes = true;
            State::UntilClose
        } else {
            match content_length {
                Some(0) => State::Head,
                Some(n) => State::FixedBody { remaining: n },
                None => {
                    self.server_closes = true;
                    State::UntilClose
                }
            }
        };
        Ok(head_len)
    }
}

fn memchr_newline(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&b| b == b'\n')
}

fn trim_ascii(s: &[u8]) -> &[u8] {
    let start = s
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &s[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `input` in pieces of `step` bytes, the way a connection with a small buffer
    /// would, and returns every completed response.
    fn parse_all(input: &[u8], step: usize, head: bool) -> Result<Vec<Completed>, ParseError> {
        let mut parser = ResponseParser::new();
        parser.expect(head);
        let mut pending: Vec<u8> = Vec::new();
        let mut done = Vec::new();
        for piece in input.chunks(step) {
            pending.extend_from_slice(piece);
            loop {
                let (used, completed) = parser.feed(&pending)?;
                pending.drain(..used);
                match completed {
                    Some(c) => {
                        done.push(c);
                        parser.expect(head);
                    }
                    None if used == 0 || pending.is_empty() => break,
                    None => {}
                }
            }
        }
        if let Some(c) = parser.finish_at_eof() {
            done.push(c);
        }
        Ok(done)
    }

    fn every_split(input: &[u8], head: bool) -> Vec<Completed> {
        let whole = parse_all(input, input.len(), head).unwrap();
        for step in 1..input.len() {
            assert_eq!(
                parse_all(input, step, head).unwrap(),
                whole,
                "split every {step} bytes"
            );
        }
        whole
    }

    #[test]
    fn content_length_bodies_back_to_back() {
        let one = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        let input = [&one[..], &one[..]].concat();
        let got = every_split(&input, false);
        assert_eq!(got.len(), 2);
        assert_eq!(
            got[0],
            Completed {
                status: 200,
                server_closes: false,
                bytes: one.len() as u64
            }
        );
    }

    #[test]
    fn chunked_with_extensions_and_trailers() {
        let input = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
                      5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: yes\r\nX-Two: 2\r\n\r\n\
                      HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
        let got = every_split(input, false);
        assert_eq!(
            got.iter().map(|c| c.status).collect::<Vec<_>>(),
            vec![200, 404]
        );
        assert_eq!(got.iter().map(|c| c.bytes).sum::<u64>(), input.len() as u64);
    }

    #[test]
    fn no_body_for_head_204_304_and_interim_1xx_is_skipped() {
        let head = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n";
        assert_eq!(every_split(head, true).len(), 1);
        let input = b"HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n\
                      HTTP/1.1 304 Not Modified\r\n\r\n\
                      HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok";
        let got = every_split(input, false);
        assert_eq!(
            got.iter().map(|c| c.status).collect::<Vec<_>>(),
            vec![204, 304, 201]
        );
    }

    #[test]
    fn body_until_close_and_http10() {
        let got = every_split(b"HTTP/1.0 200 OK\r\n\r\nsome body", false);
        assert_eq!(
            got,
            vec![Completed {
                status: 200,
                server_closes: true,
                bytes: 28
            }]
        );
        let got = every_split(
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n",
            false,
        );
        assert!(!got[0].server_closes);
        let got = every_split(
            b"HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 0\r\n\r\n",
            false,
        );
        assert!(got[0].server_closes);
    }

    #[test]
    fn cut_short_bodies_are_not_complete() {
        let mut p = ResponseParser::new();
        p.expect(false);
        let (used, done) = p
            .feed(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
            .unwrap();
        assert_eq!((used, done), (42, None));
        assert_eq!(p.finish_at_eof(), None);
    }

    #[test]
    fn malformed_input_is_an_error() {
        let cases: &[(&[u8], ParseError)] = &[
            (b"garbage garbage\r\n\r\n", ParseError::MalformedHead),
            (b"HTTP/1.1 2000 OK\r\n\r\n", ParseError::MalformedHead),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
                ParseError::BadContentLength,
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                ParseError::BadContentLength,
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                ParseError::BadChunk,
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nabc",
                ParseError::BadChunk,
            ),
            (
                b"HTTP/1.1 101 Switching\r\n\r\n",
                ParseError::UnexpectedUpgrade,
            ),
        ];
        for (input, want) in cases {
            assert_eq!(
                parse_all(input, input.len(), false).unwrap_err(),
                *want,
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn partial_head_asks_for_more() {
        let mut p = ResponseParser::new();
        assert_eq!(p.feed(b"HTTP/1.1 200 OK\r\nContent-Le").unwrap(), (0, None));
        assert!(p.is_idle());
    }
    /// Found by `fuzz/fuzz_targets/response_parser.rs`: httparse accepts any three digits,
    /// and status 0 doubled as "no head parsed yet", so a `000` response was either
    /// reported with status 0 (body until close) or not reported at all, its bytes merged
    /// into the next response (no body).
    #[test]
    fn status_code_below_100_is_malformed() {
        let cases: &[&[u8]] = &[
            // The minimized fuzzer input, without its 4-byte harness prefix.
            b"HTTP/1.0 000 \n\r\nb",
            b"HTTP/1.1 000 X\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
            b"HTTP/1.1 000 X\r\nContent-Length: 2\r\n\r\nok",
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 000 X\r\nContent-Length: 0\r\n\r\n",
            b"HTTP/1.1 042 X\r\nContent-Length: 0\r\n\r\n",
        ];
        for input in cases {
            for step in 1..=input.len() {
                assert_eq!(
                    parse_all(input, step, false),
                    Err(ParseError::MalformedHead),
                    "{:?} split every {step} bytes",
                    String::from_utf8_lossy(input)
                );
            }
        }
    }

    #[test]
    fn a_capture_keeps_headers_and_a_chunked_body_across_pieces() {
        let input = b"HTTP/1.1 100 Continue\r\nX-Interim: 1\r\n\r\nHTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
        for step in [1, 3, 7, input.len()] {
            let mut parser = ResponseParser::new();
            parser.expect(false);
            let mut capture = Capture::default();
            capture.reset(true, 1 << 20);
            let mut pending: Vec<u8> = Vec::new();
            let mut done = None;
            for piece in input.chunks(step) {
                pending.extend_from_slice(piece);
                let (used, completed) =
                    parser.feed_capturing(&pending, Some(&mut capture)).unwrap();
                pending.drain(..used);
                if completed.is_some() {
                    done = completed;
                }
            }
            assert_eq!(done.unwrap().status, 200);
            assert_eq!(
                capture.whole_body(),
                Some(&b"hello world"[..]),
                "step {step}"
            );
            let names: Vec<&str> = capture.headers.iter().map(|(n, _)| n.as_str()).collect();
            assert_eq!(
                names,
                ["set-cookie", "set-cookie", "transfer-encoding"],
                "the 100's headers are not kept"
            );
        }
        // A body over the limit is cut, and not handed out as whole.
        let mut parser = ResponseParser::new();
        parser.expect(false);
        let mut capture = Capture::default();
        capture.reset(true, 4);
        parser
            .feed_capturing(
                b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nabcdef",
                Some(&mut capture),
            )
            .unwrap();
        assert!(capture.body_cut);
        assert_eq!(capture.whole_body(), None);
    }
}
