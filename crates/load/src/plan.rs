//! Request plans: every distinct request is serialized to bytes once, before the load
//! starts, and the hot path only copies those bytes. A plan holds one request, or a
//! weighted mix read from a `--urls` file; `UrlPicker` draws from the mix with a seeded,
//! reproducible generator.

use rand_core::{RngCore, SeedableRng};
use rand_pcg::Pcg64Mcg;

use crate::mode::ConnectionMode;

/// One line of a URL mix: how often, which method, which path.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UrlLine {
    pub weight: u32,
    pub method: String,
    pub path: String,
}

/// A request ready to be written.
#[derive(Clone, Debug)]
pub struct PlannedRequest {
    pub line: UrlLine,
    pub bytes: Vec<u8>,
    /// False for HEAD, whose responses never carry a body.
    pub response_has_body: bool,
}

/// All requests of a run, and the cumulative weights to draw them.
#[derive(Clone, Debug)]
pub struct RequestPlan {
    pub requests: Vec<PlannedRequest>,
    cumulative_weights: Vec<u64>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlanError {
    #[error("{source_name}:{line}: {message}")]
    UrlFile {
        source_name: String,
        line: usize,
        message: String,
    },
    #[error("header {0:?}: expected \"Name: value\"")]
    Header(String),
    #[error("{0}")]
    Invalid(String),
}

/// What is common to every request of a run.
#[derive(Clone, Debug, Default)]
pub struct RequestTemplate {
    /// Value of the Host header (`host:port`).
    pub host: String,
    /// Extra headers, in order, as given with `-H`.
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
}

fn is_token(s: &str) -> bool {
    // RFC 9110 token characters.
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Parses `Name: value` as given to `-H`.
pub fn parse_header(raw: &str) -> Result<(String, String), PlanError> {
    let (name, value) = raw
        .split_once(':')
        .ok_or_else(|| PlanError::Header(raw.to_string()))?;
    let name = name.trim();
    if !is_token(name) || value.contains(['\r', '\n']) {
        return Err(PlanError::Header(raw.to_string()));
    }
    Ok((name.to_string(), value.trim().to_string()))
}

/// An upper-case HTTP method: an RFC 9110 token starting with a letter, without
/// lower-case letters (every registered method looks so; `5` or `-1` is a typo).
pub(crate) fn is_method(s: &str) -> bool {
    is_token(s)
        && s.starts_with(|c: char| c.is_ascii_uppercase())
        && !s.bytes().any(|b| b.is_ascii_lowercase())
}

/// A request target rubyrace sends: an absolute path (with its query), or `*`.
pub(crate) fn is_path(s: &str) -> bool {
    s.starts_with('/') || s == "*"
}

/// What a URL-mix line looks like, quoted in every error about one.
const URL_LINE_FORM: &str = "a line is \"[WEIGHT] [METHOD] PATH\"";

/// Parses a URL mix. Each non-blank line not starting with `#` is
/// `[WEIGHT] [METHOD] PATH`: the weight defaults to 1 and the method to GET.
///
/// An error names the source, the line, the field (1-based) and what was expected there.
pub fn parse_url_mix(text: &str, source_name: &str) -> Result<Vec<UrlLine>, PlanError> {
    let mut lines = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let url_line = parse_url_line(&fields).map_err(|message| PlanError::UrlFile {
            source_name: source_name.to_string(),
            line: index + 1,
            message,
        })?;
        lines.push(url_line);
    }
    if lines.is_empty() {
        return Err(PlanError::UrlFile {
            source_name: source_name.to_string(),
            line: text.lines().count().max(1),
            message: "no request lines found".into(),
        });
    }
    Ok(lines)
}

/// One line of a URL mix, split into its fields (at least one). The error says which
/// field is wrong and what it should have been.
fn parse_url_line(fields: &[&str]) -> Result<UrlLine, String> {
    let field = |n: usize, problem: &str| format!("field {n} {:?}: {problem}", fields[n - 1]);
    if fields.len() > 3 {
        let extra = match fields.len() - 3 {
            1 => "one field too many".to_string(),
            n => format!("{n} fields too many"),
        };
        return Err(format!("{}; {URL_LINE_FORM}", field(4, &extra)));
    }
    // With three fields the first is a weight; with two, a first field that starts like a
    // number is taken for a (bad) weight rather than sent as a method.
    let first = fields[0];
    let looks_numeric = first.starts_with(|c: char| c.is_ascii_digit() || c == '+' || c == '-');
    let has_weight = match fields.len() {
        3 => true,
        2 => looks_numeric,
        _ => first.bytes().all(|b| b.is_ascii_digit()),
    };
    let mut weight = 1u32;
    if has_weight {
        if !first.bytes().all(|b| b.is_ascii_digit()) {
            return Err(if fields.len() == 3 {
                format!(
                    "{}; {URL_LINE_FORM}",
                    field(
                        1,
                        "expected a weight (a positive integer), since the line has 3 fields"
                    )
                )
            } else {
                field(
                    1,
                    "expected a weight (a positive integer) or an upper-case method",
                )
            });
        }
        weight = first
            .parse()
            .map_err(|_| field(1, &format!("a weight must be at most {}", u32::MAX)))?;
        if weight == 0 {
            return Err(field(1, "a weight must be at least 1"));
        }
    }
    let rest_start = usize::from(has_weight);
    let (method, path, method_field) = match &fields[rest_start..] {
        [path] => ("GET", *path, None),
        [method, path] => (*method, *path, Some(rest_start + 1)),
        _ => {
            return Err(format!(
                "{}; {URL_LINE_FORM}",
                field(1, "a weight alone: expected a path after it")
            ))
        }
    };
    if let Some(n) = method_field {
        if !is_method(method) {
            return Err(field(n, "expected an upper-case HTTP method such as GET"));
        }
    }
    if !is_path(path) {
        return Err(field(fields.len(), "expected a path starting with '/'"));
    }
    Ok(UrlLine {
        weight,
        method: method.to_string(),
        path: path.to_string(),
    })
}

impl RequestPlan {
    /// Serializes every line of the mix once.
    pub fn build(
        lines: Vec<UrlLine>,
        template: &RequestTemplate,
        mode: ConnectionMode,
    ) -> Result<Self, PlanError> {
        if lines.is_empty() {
            return Err(PlanError::Invalid(
                "a plan needs at least one request".into(),
            ));
        }
        let has = |name: &str| {
            template
                .headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case(name))
        };
        let mut requests = Vec::with_capacity(lines.len());
        let mut cumulative_weights = Vec::with_capacity(lines.len());
        let mut total = 0u64;
        for line in lines {
            let mut bytes = Vec::with_capacity(128);
            bytes.extend_from_slice(line.method.as_bytes());
            bytes.push(b' ');
            bytes.extend_from_slice(line.path.as_bytes());
            bytes.extend_from_slice(b" HTTP/1.1\r\n");
            if !has("host") {
                push_header(&mut bytes, "Host", &template.host);
            }
            for (name, value) in &template.headers {
                push_header(&mut bytes, name, value);
            }
            // RFC 9110 §8.6: a request whose method gives content a meaning carries a
            // Content-Length even without a body (WEBrick answers 411 otherwise).
            let takes_content = matches!(line.method.as_str(), "POST" | "PUT" | "PATCH");
            match &template.body {
                Some(body) if !has("content-length") => {
                    push_header(&mut bytes, "Content-Length", &body.len().to_string());
                }
                None if takes_content && !has("content-length") => {
                    push_header(&mut bytes, "Content-Length", "0");
                }
                _ => {}
            }
            if mode == ConnectionMode::CloseHeader && !has("connection") {
                push_header(&mut bytes, "Connection", "close");
            }
            bytes.extend_from_slice(b"\r\n");
            if let Some(body) = &template.body {
                bytes.extend_from_slice(body);
            }
            total += u64::from(line.weight);
            cumulative_weights.push(total);
            requests.push(PlannedRequest {
                response_has_body: line.method != "HEAD",
                line,
                bytes,
            });
        }
        Ok(RequestPlan {
            requests,
            cumulative_weights,
        })
    }

    pub fn total_weight(&self) -> u64 {
        *self.cumulative_weights.last().unwrap_or(&0)
    }

    /// Index of the request whose weight interval holds `ticket` (0 ≤ ticket < total).
    pub fn index_for_ticket(&self, ticket: u64) -> usize {
        self.cumulative_weights.partition_point(|&c| c <= ticket)
    }

    /// The longest serialized request, to size write buffers once.
    pub fn max_request_len(&self) -> usize {
        self.requests
            .iter()
            .map(|r| r.bytes.len())
            .max()
            .unwrap_or(0)
    }
}

fn push_header(bytes: &mut Vec<u8>, name: &str, value: &str) {
    bytes.extend_from_slice(name.as_bytes());
    bytes.extend_from_slice(b": ");
    bytes.extend_from_slice(value.as_bytes());
    bytes.extend_from_slice(b"\r\n");
}

/// Draws request indices for one connection. The sequence depends only on the seed and the
/// connection's global index, so a run is reproducible whatever the thread layout.
pub struct UrlPicker {
    rng: Option<Pcg64Mcg>,
}

impl UrlPicker {
    pub fn new(plan: &RequestPlan, seed: u64, connection_index: u64) -> Self {
        let rng = (plan.requests.len() > 1).then(|| {
            // SplitMix64 of (seed, connection) so neighbouring connections are unrelated.
            let mut z = seed ^ connection_index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            Pcg64Mcg::seed_from_u64(z ^ (z >> 31))
        });
        UrlPicker { rng }
    }

    #[inline]
    pub fn next(&mut self, plan: &RequestPlan) -> usize {
        match &mut self.rng {
            None => 0,
            Some(rng) => {
                // Lemire's multiply-shift: unbiased enough for weights far below 2^32.
                let ticket = ((rng.next_u64() as u128 * plan.total_weight() as u128) >> 64) as u64;
                plan.index_for_ticket(ticket)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template() -> RequestTemplate {
        RequestTemplate {
            host: "127.0.0.1:8080".into(),
            ..Default::default()
        }
    }

    #[test]
    fn builds_a_minimal_get() {
        let plan = RequestPlan::build(
            vec![UrlLine {
                weight: 1,
                method: "GET".into(),
                path: "/".into(),
            }],
            &template(),
            ConnectionMode::Keepalive,
        )
        .unwrap();
        assert_eq!(
            plan.requests[0].bytes,
            b"GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n".to_vec()
        );
    }

    #[test]
    fn close_header_mode_adds_connection_close_and_body_gets_length() {
        let mut t = template();
        t.headers.push(parse_header("X-Test:  yes ").unwrap());
        t.body = Some(b"abc".to_vec());
        let plan = RequestPlan::build(
            vec![UrlLine {
                weight: 1,
                method: "POST".into(),
                path: "/p?q=1".into(),
            }],
            &t,
            ConnectionMode::CloseHeader,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(plan.requests[0].bytes.clone()).unwrap(),
            "POST /p?q=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nX-Test: yes\r\n\
             Content-Length: 3\r\nConnection: close\r\n\r\nabc"
        );
    }

    #[test]
    fn user_host_header_replaces_the_default() {
        let mut t = template();
        t.headers.push(parse_header("host: example.test").unwrap());
        let plan = RequestPlan::build(
            vec![UrlLine {
                weight: 1,
                method: "HEAD".into(),
                path: "/".into(),
            }],
            &t,
            ConnectionMode::Keepalive,
        )
        .unwrap();
        let text = String::from_utf8(plan.requests[0].bytes.clone()).unwrap();
        assert_eq!(text, "HEAD / HTTP/1.1\r\nhost: example.test\r\n\r\n");
        assert!(!plan.requests[0].response_has_body);
    }

    #[test]
    fn a_post_without_a_body_says_content_length_0() {
        let lines = parse_url_mix("POST /posts\nPUT /x\nGET /\n", "mix").unwrap();
        let plan = RequestPlan::build(lines, &template(), ConnectionMode::Keepalive).unwrap();
        let texts: Vec<String> = plan
            .requests
            .iter()
            .map(|r| String::from_utf8(r.bytes.clone()).unwrap())
            .collect();
        assert!(
            texts[0].starts_with("POST /posts HTTP/1.1\r\n"),
            "{}",
            texts[0]
        );
        assert!(
            texts[0].ends_with("Content-Length: 0\r\n\r\n"),
            "{}",
            texts[0]
        );
        assert!(
            texts[1].ends_with("Content-Length: 0\r\n\r\n"),
            "{}",
            texts[1]
        );
        assert!(!texts[2].contains("Content-Length"), "{}", texts[2]);
    }

    #[test]
    fn bad_headers_are_rejected() {
        assert!(parse_header("NoColon").is_err());
        assert!(parse_header("Bad Name: x").is_err());
        assert!(parse_header("X: a\r\nInjected: b").is_err());
    }

    #[test]
    fn url_mix_parses_weights_methods_and_comments() {
        let mix = parse_url_mix("# comment\n\n5 GET /a\n/b\n2 /c\nPOST /d\n", "mix.txt").unwrap();
        let got: Vec<(u32, &str, &str)> = mix
            .iter()
            .map(|l| (l.weight, l.method.as_str(), l.path.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (5, "GET", "/a"),
                (1, "GET", "/b"),
                (2, "GET", "/c"),
                (1, "POST", "/d")
            ]
        );
    }

    #[test]
    fn url_mix_errors_name_the_line_and_the_field() {
        let err = |text: &str| parse_url_mix(text, "mix.txt").unwrap_err().to_string();
        assert_eq!(
            err("/ok\n0 /zero\n"),
            "mix.txt:2: field 1 \"0\": a weight must be at least 1"
        );
        assert_eq!(
            err("99999999999 /big\n"),
            "mix.txt:1: field 1 \"99999999999\": a weight must be at most 4294967295"
        );
        assert_eq!(
            err("/ok\nget /lower\n"),
            "mix.txt:2: field 1 \"get\": expected an upper-case HTTP method such as GET"
        );
        assert_eq!(
            err("3 get /lower\n"),
            "mix.txt:1: field 2 \"get\": expected an upper-case HTTP method such as GET"
        );
        assert_eq!(
            err("GET nopath\n"),
            "mix.txt:1: field 2 \"nopath\": expected a path starting with '/'"
        );
        // Three fields: the first is a weight, whatever it looks like.
        assert_eq!(
            err("abc GET /x\n"),
            "mix.txt:1: field 1 \"abc\": expected a weight (a positive integer), since the \
             line has 3 fields; a line is \"[WEIGHT] [METHOD] PATH\""
        );
        // Four fields or more: the first extra one is named.
        assert_eq!(
            err("1 GET / extra\n"),
            "mix.txt:1: field 4 \"extra\": one field too many; a line is \"[WEIGHT] [METHOD] PATH\""
        );
        assert_eq!(
            err("1 GET / a b\n"),
            "mix.txt:1: field 4 \"a\": 2 fields too many; a line is \"[WEIGHT] [METHOD] PATH\""
        );
        // A number-like first field of two is a bad weight, not a method.
        assert_eq!(
            err("-1 /a\n"),
            "mix.txt:1: field 1 \"-1\": expected a weight (a positive integer) or an upper-case method"
        );
        assert_eq!(
            err("5\n"),
            "mix.txt:1: field 1 \"5\": a weight alone: expected a path after it; a line is \
             \"[WEIGHT] [METHOD] PATH\""
        );
        assert_eq!(
            err("# only comments\n"),
            "mix.txt:1: no request lines found"
        );
    }

    #[test]
    fn picker_follows_weights_and_is_reproducible() {
        let lines = parse_url_mix("3 /a\n1 /b\n", "m").unwrap();
        let plan = RequestPlan::build(lines, &template(), ConnectionMode::Keepalive).unwrap();
        let draw = |seed, conn| {
            let mut p = UrlPicker::new(&plan, seed, conn);
            (0..40_000).map(|_| p.next(&plan)).collect::<Vec<_>>()
        };
        let a = draw(7, 0);
        assert_eq!(
            a,
            draw(7, 0),
            "same seed and connection give the same sequence"
        );
        assert_ne!(a, draw(8, 0));
        assert_ne!(a, draw(7, 1));
        let share_a = a.iter().filter(|&&i| i == 0).count() as f64 / a.len() as f64;
        assert!((share_a - 0.75).abs() < 0.01, "share of /a was {share_a}");
    }

    #[test]
    fn ticket_lookup_respects_interval_edges() {
        let lines = parse_url_mix("2 /a\n1 /b\n", "m").unwrap();
        let plan = RequestPlan::build(lines, &template(), ConnectionMode::Keepalive).unwrap();
        assert_eq!(plan.index_for_ticket(0), 0);
        assert_eq!(plan.index_for_ticket(1), 0);
        assert_eq!(plan.index_for_ticket(2), 1);
    }
}
