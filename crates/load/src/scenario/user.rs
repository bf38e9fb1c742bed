//! One virtual user at run time: which scenario and step it is at, its variables and its
//! cookie jar. It writes the request of its current step into a connection's buffer, and
//! checks the response: the status the step expects, then each extraction into its
//! variable. A failed check ends the user's session (the next steps would act on a page it
//! does not have); the user then starts a new session.

use std::sync::OnceLock;
use std::time::Duration;

use rand_core::{RngCore, SeedableRng};
use rand_pcg::Pcg64Mcg;
use regex::Regex;

use super::{Body, ScenarioSet, Source, Step, Think, VarDef, SESSION_SLOT, VU_SLOT};

/// What a response meant for the user.
#[derive(Debug, PartialEq)]
pub enum StepOutcome {
    /// The step passed; the next one goes after `think`.
    Next { think: Duration },
    /// The step passed and was the scenario's last; a new session starts after `think`.
    SessionDone { think: Duration },
    /// The step failed its check: the session ends.
    Failed(StepFailure),
}

/// Why a step failed although a response came.
#[derive(Debug, Clone, PartialEq)]
pub enum StepFailure {
    /// A status the step does not expect.
    Status(u16),
    /// An extraction found nothing.
    Extract { var: String, why: String },
}

impl StepFailure {
    pub fn describe(&self) -> String {
        match self {
            StepFailure::Status(s) => format!("unexpected status {s}"),
            StepFailure::Extract { var, why } => format!("extract {var}: {why}"),
        }
    }
}

/// Bodies larger than this are not kept for extraction (the extraction then fails).
pub const MAX_CAPTURED_BODY: usize = 4 << 20;

pub struct VirtualUser {
    /// 1-based, global across threads (the `vu` variable).
    number: u64,
    sessions: u64,
    rng: Pcg64Mcg,
    scenario: usize,
    step: usize,
    vars: Vec<String>,
    /// Cookies by name, in the order they were first set.
    jar: Vec<(String, String)>,
    scratch: Vec<u8>,
}

impl VirtualUser {
    pub fn new(number: u64, seed: u64) -> VirtualUser {
        // SplitMix64 of (seed, user), as the URL picker does for connections.
        let mut z = seed ^ number.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        VirtualUser {
            number,
            sessions: 0,
            rng: Pcg64Mcg::seed_from_u64(z ^ (z >> 31)),
            scenario: 0,
            step: 0,
            vars: Vec::new(),
            jar: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// Starts a new session: a scenario drawn by weight, its variables drawn, an empty
    /// cookie jar, the first step.
    pub fn start_session(&mut self, set: &ScenarioSet) {
        self.sessions += 1;
        let ticket = ((self.rng.next_u64() as u128 * set.total_weight() as u128) >> 64) as u64;
        self.scenario = set.pick(ticket);
        self.step = 0;
        self.jar.clear();
        let scenario = &set.scenarios[self.scenario];
        self.vars.clear();
        self.vars.resize(scenario.var_names.len(), String::new());
        self.vars[VU_SLOT] = self.number.to_string();
        self.vars[SESSION_SLOT] = self.sessions.to_string();
        for (slot, def) in &scenario.vars {
            let value = match def {
                VarDef::Random { lo, hi } => {
                    let span = (hi - lo) as u128 + 1;
                    let pick = ((self.rng.next_u64() as u128 * span) >> 64) as i64;
                    (lo + pick).to_string()
                }
                VarDef::Pick(options) => {
                    let i = ((self.rng.next_u64() as u128 * options.len() as u128) >> 64) as usize;
                    options[i].clone()
                }
                VarDef::Text(t) => t.render(&self.vars),
            };
            self.vars[*slot] = value;
        }
    }

    /// The global index of the current step (for the per-step statistics).
    pub fn global_step(&self, set: &ScenarioSet) -> usize {
        set.global_step(self.scenario, self.step)
    }

    /// Whether the current step is its session's first.
    pub fn at_first_step(&self) -> bool {
        self.step == 0
    }

    pub fn step<'a>(&self, set: &'a ScenarioSet) -> &'a Step {
        &set.scenarios[self.scenario].steps[self.step]
    }

    /// Appends the current step's request to `out`. `headers` are the run's own (`-H`),
    /// sent first; `close` adds `Connection: close`. Returns whether the response has a
    /// body (not for HEAD).
    pub fn write_request(
        &mut self,
        set: &ScenarioSet,
        host: &str,
        headers: &[(String, String)],
        close: bool,
        out: &mut Vec<u8>,
    ) -> bool {
        let step = &set.scenarios[self.scenario].steps[self.step];
        self.scratch.clear();
        let content_type = match &step.body {
            Some(Body::Form(fields)) => {
                let mut form = url::form_urlencoded::Serializer::new(String::new());
                for (name, value) in fields {
                    form.append_pair(name, &value.render(&self.vars));
                }
                self.scratch.extend_from_slice(form.finish().as_bytes());
                Some("application/x-www-form-urlencoded")
            }
            Some(Body::Raw(t)) => {
                t.render_into(&self.vars, &mut self.scratch);
                None
            }
            None => None,
        };
        out.extend_from_slice(step.method.as_bytes());
        out.push(b' ');
        step.path.render_into(&self.vars, out);
        out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
        out.extend_from_slice(host.as_bytes());
        out.extend_from_slice(b"\r\n");
        for (name, value) in headers {
            push_header(out, name.as_bytes(), value.as_bytes());
        }
        for (name, value) in &step.headers {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            value.render_into(&self.vars, out);
            out.extend_from_slice(b"\r\n");
        }
        if !self.jar.is_empty() {
            out.extend_from_slice(b"Cookie: ");
            for (i, (name, value)) in self.jar.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(b"; ");
                }
                out.extend_from_slice(name.as_bytes());
                out.push(b'=');
                out.extend_from_slice(value.as_bytes());
            }
            out.extend_from_slice(b"\r\n");
        }
        if let Some(ct) = content_type {
            push_header(out, b"Content-Type", ct.as_bytes());
        }
        let takes_content = matches!(step.method.as_str(), "POST" | "PUT" | "PATCH");
        if step.body.is_some() || takes_content {
            push_header(
                out,
                b"Content-Length",
                self.scratch.len().to_string().as_bytes(),
            );
        }
        if close {
            push_header(out, b"Connection", b"close");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&self.scratch);
        step.method != "HEAD"
    }

    /// Checks the response of the current step (`headers` as `(lower-case name, value)`;
    /// `body` only when the step reads it), keeps its cookies, extracts its values and
    /// moves on.
    pub fn on_response(
        &mut self,
        set: &ScenarioSet,
        status: u16,
        headers: &[(String, Vec<u8>)],
        body: Option<&[u8]>,
    ) -> StepOutcome {
        for (name, value) in headers {
            if name == "set-cookie" {
                self.keep_cookie(value);
            }
        }
        let scenario = &set.scenarios[self.scenario];
        let step = &scenario.steps[self.step];
        if !step.expect.accepts(status) {
            return StepOutcome::Failed(StepFailure::Status(status));
        }
        for e in &step.extract {
            match extract(&e.source, headers, body) {
                Ok(value) => self.vars[e.slot] = value,
                Err(why) => {
                    return StepOutcome::Failed(StepFailure::Extract {
                        var: e.var.clone(),
                        why,
                    })
                }
            }
        }
        let think = self.think(step.think);
        self.step += 1;
        if self.step == scenario.steps.len() {
            StepOutcome::SessionDone { think }
        } else {
            StepOutcome::Next { think }
        }
    }

    fn uniform(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn think(&mut self, think: Think) -> Duration {
        match think {
            Think::None => Duration::ZERO,
            Think::Fixed(d) => d,
            Think::Uniform(min, max) => min + (max - min).mul_f64(self.uniform()),
            Think::Exponential(mean) => {
                let x = -(1.0 - self.uniform()).ln();
                mean.mul_f64(x.min(10.0))
            }
        }
    }

    /// `Set-Cookie: name=value; attributes`: kept by name, or removed by `Max-Age=0` or a
    /// past `Expires`... only `Max-Age` is read: a session's cookies live for the session.
    fn keep_cookie(&mut self, header: &[u8]) {
        let text = String::from_utf8_lossy(header);
        let mut parts = text.split(';');
        let Some((name, value)) = parts.next().and_then(|p| p.split_once('=')) else {
            return;
        };
        let (name, value) = (name.trim(), value.trim());
        if name.is_empty() {
            return;
        }
        let removed = parts.any(|a| {
            a.split_once('=').is_some_and(|(k, v)| {
                k.trim().eq_ignore_ascii_case("max-age")
                    && v.trim().parse::<i64>().is_ok_and(|n| n <= 0)
            })
        });
        match self.jar.iter().position(|(n, _)| n == name) {
            Some(i) if removed => {
                self.jar.remove(i);
            }
            Some(i) => self.jar[i].1 = value.to_string(),
            None if !removed => self.jar.push((name.to_string(), value.to_string())),
            None => {}
        }
    }

    #[cfg(test)]
    pub(crate) fn var(&self, set: &ScenarioSet, name: &str) -> Option<&str> {
        let scenario = &set.scenarios[self.scenario];
        let slot = scenario.var_names.iter().position(|n| n == name)?;
        Some(&self.vars[slot])
    }

    #[cfg(test)]
    pub(crate) fn cookies(&self) -> &[(String, String)] {
        &self.jar
    }
}

fn push_header(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// One value from a response, or why there is none.
fn extract(
    source: &Source,
    headers: &[(String, Vec<u8>)],
    body: Option<&[u8]>,
) -> Result<String, String> {
    let body_text = || -> Result<String, String> {
        match body {
            Some(b) => Ok(String::from_utf8_lossy(b).into_owned()),
            None => Err(format!(
                "the body was not kept (over {} MiB)",
                MAX_CAPTURED_BODY >> 20
            )),
        }
    };
    match source {
        Source::Meta(name) => {
            let text = body_text()?;
            meta_content(&text, name)
                .ok_or_else(|| format!("no <meta name=\"{name}\" content=...> in the body"))
        }
        Source::Json(pointer) => {
            let value: serde_json::Value =
                serde_json::from_slice(body.ok_or("the body was not kept")?)
                    .map_err(|e| format!("the body is not JSON ({e})"))?;
            match value.pointer(pointer) {
                Some(serde_json::Value::String(s)) => Ok(s.clone()),
                Some(serde_json::Value::Null) | None => {
                    Err(format!("nothing at {pointer} in the JSON body"))
                }
                Some(v @ (serde_json::Value::Array(_) | serde_json::Value::Object(_))) => Err(
                    format!("{pointer} is not a single value: {}", short(&v.to_string())),
                ),
                Some(v) => Ok(v.to_string()),
            }
        }
        Source::Header { name, regex } => {
            let value = headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
                .ok_or_else(|| format!("no {name} header in the response"))?;
            match regex {
                None => Ok(value),
                Some(r) => first_capture(r, &value).ok_or_else(|| {
                    format!("{name}: {} does not match {:?}", short(&value), r.as_str())
                }),
            }
        }
        Source::Body(r) => {
            let text = body_text()?;
            first_capture(r, &text)
                .ok_or_else(|| format!("the body does not match {:?}", r.as_str()))
        }
    }
}

fn first_capture(r: &Regex, text: &str) -> Option<String> {
    let c = r.captures(text)?;
    Some(c.get(1).or_else(|| c.get(0))?.as_str().to_string())
}

fn short(s: &str) -> String {
    if s.len() <= 60 {
        s.to_string()
    } else {
        let end = (0..=60).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0);
        format!("{}...", &s[..end])
    }
}

/// The `content` of the first `<meta>` tag whose `name` is `name`, HTML entities decoded.
fn meta_content(html: &str, name: &str) -> Option<String> {
    static TAG: OnceLock<Regex> = OnceLock::new();
    static ATTR: OnceLock<Regex> = OnceLock::new();
    let tag = TAG.get_or_init(|| Regex::new(r"(?is)<meta\s[^>]*>").expect("a valid regex"));
    let attr = ATTR.get_or_init(|| {
        Regex::new(r#"(?is)([a-z-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))"#)
            .expect("a valid regex")
    });
    for m in tag.find_iter(html) {
        let mut is_it = false;
        let mut content = None;
        for c in attr.captures_iter(m.as_str()) {
            let key = c.get(1).map_or("", |k| k.as_str());
            let value = c
                .get(2)
                .or(c.get(3))
                .or(c.get(4))
                .map_or("", |v| v.as_str());
            if key.eq_ignore_ascii_case("name") && value == name {
                is_it = true;
            } else if key.eq_ignore_ascii_case("content") {
                content = Some(value);
            }
        }
        if is_it {
            return content.map(unescape_html);
        }
    }
    None
}

/// Decodes the HTML character references an attribute value may hold (`&amp;`,
/// `&quot;`, `&#43;`, `&#x2F;`, ...).
fn unescape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let decoded = after.find(';').filter(|&end| end <= 10).and_then(|end| {
            let entity = &after[..end];
            let c = match entity {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" | "#39" => Some('\''),
                e if e.starts_with("#x") || e.starts_with("#X") => u32::from_str_radix(&e[2..], 16)
                    .ok()
                    .and_then(char::from_u32),
                e if e.starts_with('#') => e[1..].parse().ok().and_then(char::from_u32),
                _ => None,
            }?;
            Some((c, end))
        });
        match decoded {
            Some((c, end)) => {
                out.push(c);
                rest = &after[end + 1..];
            }
            None => {
                out.push('&');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_csrf_meta_tag_of_rails_is_found_in_either_attribute_order() {
        // As Rails' csrf_meta_tags writes it (actionview/lib/action_view/helpers/csrf_helper.rb).
        let html = r#"<head><meta name="csrf-param" content="authenticity_token" />
<meta name="csrf-token" content="k9P&#43;xZ2/ab==&amp;x" /></head>"#;
        assert_eq!(meta_content(html, "csrf-token").unwrap(), "k9P+xZ2/ab==&x");
        assert_eq!(
            meta_content(html, "csrf-param").unwrap(),
            "authenticity_token"
        );
        let swapped = "<META content='t0k' NAME='csrf-token'>";
        assert_eq!(meta_content(swapped, "csrf-token").unwrap(), "t0k");
        assert_eq!(meta_content(html, "missing"), None);
    }

    #[test]
    fn values_come_from_json_headers_and_regexes() {
        let headers = vec![("location".to_string(), b"http://x/topics/42".to_vec())];
        let body = br#"{"id": 7, "post": {"slug": "hello"}, "none": null}"#;
        let json = |p: &str| extract(&Source::Json(p.into()), &headers, Some(body));
        assert_eq!(json("/id").unwrap(), "7");
        assert_eq!(json("/post/slug").unwrap(), "hello");
        assert!(json("/none").unwrap_err().contains("nothing at /none"));
        assert!(json("/post").unwrap_err().contains("not a single value"));
        let re = |r: &str| Some(Regex::new(r).unwrap());
        let header = |r| Source::Header {
            name: "Location".into(),
            regex: r,
        };
        assert_eq!(
            extract(&header(re(r"/topics/(\d+)")), &headers, None).unwrap(),
            "42"
        );
        assert_eq!(
            extract(&header(None), &headers, None).unwrap(),
            "http://x/topics/42"
        );
        assert!(extract(&header(re(r"/posts/(\d+)")), &headers, None)
            .unwrap_err()
            .contains("does not match"));
        let missing = Source::Header {
            name: "etag".into(),
            regex: None,
        };
        assert!(extract(&missing, &headers, None)
            .unwrap_err()
            .contains("no etag header"));
        let body_re = Source::Body(Regex::new(r#""slug": "(\w+)""#).unwrap());
        assert_eq!(extract(&body_re, &headers, Some(body)).unwrap(), "hello");
        assert!(extract(&body_re, &headers, None)
            .unwrap_err()
            .contains("not kept"));
    }

    #[test]
    fn entities_decode_and_stray_ampersands_stay() {
        assert_eq!(
            unescape_html("a&amp;b&#x2F;c&#47;&lt;&unknown; & x"),
            "a&b/c/<&unknown; & x"
        );
    }
}
