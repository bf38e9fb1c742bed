//! Load settings as a user states them (connections, mode, rate, URL mix, ...), and their
//! checked translation into a `LoadSpec` for one target URL. `rubyrace load` fills them from
//! the command line and `rubyrace run` from an experiment file, so both accept exactly the
//! same things and reject them with the same messages.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::plan::{
    is_method, is_path, parse_header, PlanError, RequestPlan, RequestTemplate, UrlLine,
};
use crate::scenario::{parse_scenarios, ScenarioSet};
use crate::spec::{ConnectionMode, LoadSpec, ScenarioRun, StopCondition};

/// Everything `rubyrace load` accepts besides the URL and the outputs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadSettings {
    pub connections: usize,
    pub threads: usize,
    /// Measure this long (after the warmup) ...
    #[serde(with = "humantime_serde")]
    pub duration: Duration,
    /// ... or this many request attempts instead.
    pub requests: Option<u64>,
    #[serde(with = "humantime_serde")]
    pub warmup: Duration,
    pub mode: ConnectionMode,
    #[serde(with = "humantime_serde")]
    pub close_grace: Duration,
    /// Open loop: requests per second in total.
    pub rate: Option<f64>,
    /// Method and path when there is no URL mix; the path replaces the URL's.
    pub method: String,
    pub path: Option<String>,
    /// "Name: value" lines.
    pub headers: Vec<String>,
    pub body: Option<Vec<u8>>,
    /// A weighted URL mix (already read from its file).
    pub urls: Option<Vec<UrlLine>>,
    pub seed: u64,
    pub pipeline: usize,
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    #[serde(with = "humantime_serde", default)]
    pub connect_stagger: Option<Duration>,
    /// Virtual users walking the scenarios of this file (already read) instead of a URL
    /// mix: each connection is one user (docs/scenarios.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario: Option<ScenarioSource>,
    /// `https://`: how the server's certificate is trusted (`--cacert FILE` or
    /// `--insecure`); required for an https:// URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_trust: Option<crate::tls::TlsTrust>,
}

/// A scenario file as read: its name (for messages) and its text, stored with the settings
/// so a resumed run never depends on the file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScenarioSource {
    pub name: String,
    pub text: String,
}

impl ScenarioSource {
    /// Reads and checks the scenarios.
    pub fn parse(&self) -> Result<ScenarioSet, SettingsError> {
        parse_scenarios(&self.name, &self.text).map_err(|errors| {
            SettingsError::Scenario(
                errors
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("\n"),
            )
        })
    }
}

impl Default for LoadSettings {
    fn default() -> Self {
        LoadSettings {
            connections: 10,
            threads: 1,
            duration: Duration::from_secs(10),
            requests: None,
            warmup: Duration::ZERO,
            mode: ConnectionMode::Keepalive,
            close_grace: Duration::from_millis(100),
            rate: None,
            method: "GET".into(),
            path: None,
            headers: Vec::new(),
            body: None,
            urls: None,
            seed: 1,
            pipeline: 1,
            timeout: Duration::from_secs(10),
            connect_stagger: None,
            scenario: None,
            tls_trust: None,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SettingsError {
    /// The URL itself is wrong (syntax, scheme, host, port): a mistake in what was typed.
    #[error("invalid URL {url:?}: {reason}")]
    Url { url: String, reason: String },
    /// The URL is well formed but its host name does not resolve (here and now).
    #[error("URL {url:?}: cannot resolve {host}: {reason}")]
    Unresolved {
        url: String,
        host: String,
        reason: String,
    },
    /// A setting out of its range or not fitting the others; the message starts with the
    /// setting's name.
    #[error("{message}")]
    Invalid { setting: Setting, message: String },
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The scenario file's mistakes, one `FILE:LINE:COLUMN: key: message` per line.
    #[error("{0}")]
    Scenario(String),
    /// The TLS settings cannot be used (an unreadable `--cacert`, a host TLS cannot check).
    #[error("{0}")]
    Tls(String),
}

/// A load setting, as `rubyrace load` spells it: what a [`SettingsError::Invalid`] is
/// about, so a caller can point at the option or the key without reading the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    Connections,
    Threads,
    Pipeline,
    Rate,
    Timeout,
    Requests,
    Duration,
    Method,
    Path,
    Scenario,
}

impl Setting {
    /// The name the messages start with (`rubyrace load`'s option without its dashes).
    pub fn name(self) -> &'static str {
        match self {
            Setting::Connections => "connections",
            Setting::Threads => "threads",
            Setting::Pipeline => "pipeline",
            Setting::Rate => "rate",
            Setting::Timeout => "timeout",
            Setting::Requests => "requests",
            Setting::Duration => "duration",
            Setting::Method => "method",
            Setting::Path => "path",
            Setting::Scenario => "scenario",
        }
    }
}

fn invalid(setting: Setting, message: impl Into<String>) -> SettingsError {
    let message = message.into();
    debug_assert!(message.starts_with(setting.name()), "{message}");
    SettingsError::Invalid { setting, message }
}

impl LoadSettings {
    /// Checks the settings on their own, without a target: what an experiment file can be
    /// checked for before any server exists. Messages name the settings as `rubyrace load`
    /// spells them; `build_spec` runs the same checks.
    pub fn check(&self) -> Result<(), SettingsError> {
        if self.connections == 0 {
            return Err(invalid(
                Setting::Connections,
                "connections must be at least 1",
            ));
        }
        if self.threads == 0 {
            return Err(invalid(Setting::Threads, "threads must be at least 1"));
        }
        if !(1..=1024).contains(&self.pipeline) {
            return Err(invalid(
                Setting::Pipeline,
                "pipeline must be between 1 and 1024",
            ));
        }
        if self.pipeline > 1 && self.mode != ConnectionMode::Keepalive {
            return Err(invalid(
                Setting::Pipeline,
                format!(
                    "pipeline needs keepalive connections; it cannot be combined with {}",
                    self.mode.as_str()
                ),
            ));
        }
        if let Some(rate) = self.rate {
            if !(rate.is_finite() && rate > 0.0) {
                return Err(invalid(
                    Setting::Rate,
                    format!("rate must be a positive number of requests per second (got {rate})"),
                ));
            }
        }
        if self.timeout.is_zero() {
            return Err(invalid(
                Setting::Timeout,
                "timeout must be longer than zero",
            ));
        }
        if self.requests == Some(0) {
            return Err(invalid(Setting::Requests, "requests must be at least 1"));
        }
        if self.requests.is_none() && self.duration.is_zero() {
            return Err(invalid(
                Setting::Duration,
                "duration must be longer than zero",
            ));
        }
        for h in &self.headers {
            parse_header(h)?;
        }
        if let Some(source) = &self.scenario {
            self.check_scenario_fits()?;
            source.parse()?;
        } else if self.urls.is_none() {
            self.single_line("/")?;
        }
        Ok(())
    }

    /// The settings a scenario replaces or cannot follow.
    fn check_scenario_fits(&self) -> Result<(), SettingsError> {
        let refuse = |what: &str| Err(invalid(Setting::Scenario, format!("scenario: {what}")));
        if self.urls.is_some() {
            return refuse("a scenario replaces the URL mix: give one or the other");
        }
        if self.body.is_some() || self.method != "GET" {
            return refuse(
                "each step has its own method and body: the method and body settings do not apply",
            );
        }
        if self.path.is_some() {
            return refuse("each step has its own path: the path setting does not apply");
        }
        if self.pipeline > 1 {
            return refuse(
                "a user waits for each response before its next step: pipeline must be 1",
            );
        }
        Ok(())
    }

    /// The request line used without a URL mix, checked like a mix line.
    fn single_line(&self, url_path: &str) -> Result<UrlLine, SettingsError> {
        let path = self.path.as_deref().unwrap_or(url_path);
        let method = &self.method;
        if !is_method(method) {
            return Err(invalid(
                Setting::Method,
                format!("method {method:?} is not an upper-case HTTP method"),
            ));
        }
        if !is_path(path) {
            return Err(invalid(
                Setting::Path,
                format!("path {path:?} must start with '/'"),
            ));
        }
        if path.contains(|c: char| c.is_whitespace() || c.is_control()) {
            return Err(invalid(
                Setting::Path,
                format!("path {path:?} must not contain spaces or control characters"),
            ));
        }
        Ok(UrlLine {
            weight: 1,
            method: method.clone(),
            path: path.to_string(),
        })
    }

    /// The spec another host built from `origin` (a fleet's load agent): the same settings
    /// and URL, built here.
    pub fn spec_from_origin(origin: &crate::spec::SpecOrigin) -> Result<LoadSpec, String> {
        let settings: LoadSettings = serde_json::from_value(origin.settings.clone())
            .map_err(|e| format!("not load settings: {e}"))?;
        settings.build_spec(&origin.url).map_err(|e| e.to_string())
    }

    /// Resolves `url` and serializes the requests: everything checked before any load is sent.
    pub fn build_spec(&self, url: &str) -> Result<LoadSpec, SettingsError> {
        self.check()?;
        let url_err = |reason: String| SettingsError::Url {
            url: url.to_string(),
            reason,
        };
        if !url.contains("://") {
            // `127.0.0.1:9/` is a relative URL to the parser and `localhost:9/` one with
            // the scheme `localhost`: say what is missing rather than either.
            let guess = format!("http://{url}");
            if url::Url::parse(&guess).is_ok_and(|u| u.host().is_some()) {
                return Err(url_err(format!(
                    "http:// is missing: did you mean {guess}?"
                )));
            }
        }
        let parsed = url::Url::parse(url).map_err(|e| url_err(e.to_string()))?;
        let https = match parsed.scheme() {
            "http" => false,
            "https" => true,
            other => {
                return Err(url_err(format!(
                    "only http:// and https:// URLs are supported (got {other}://)"
                )))
            }
        };
        let host = parsed
            .host_str()
            .ok_or_else(|| url_err("the URL has no host".into()))?;
        let port = parsed.port_or_known_default().unwrap_or(80);
        if port == 0 {
            return Err(url_err(
                "port 0 is not a port a server listens on; give the server's port".into(),
            ));
        }
        // IP literals need no resolver; `host_str` of an IPv6 literal keeps its brackets,
        // which no resolver accepts.
        let addr = match parsed.host() {
            Some(url::Host::Ipv4(ip)) => SocketAddr::from((ip, port)),
            Some(url::Host::Ipv6(ip)) => SocketAddr::from((ip, port)),
            _ => {
                let unresolved = |reason: String| SettingsError::Unresolved {
                    url: url.to_string(),
                    host: format!("{host}:{port}"),
                    reason,
                };
                (host, port)
                    .to_socket_addrs()
                    .map_err(|e| unresolved(e.to_string()))?
                    .next()
                    .ok_or_else(|| unresolved("it resolves to no address".into()))?
            }
        };
        let lines = match &self.urls {
            Some(lines) => lines.clone(),
            // The plan is not used by a scenario run; the URL's path stands in.
            None if self.scenario.is_some() => vec![UrlLine {
                weight: 1,
                method: "GET".into(),
                path: "/".into(),
            }],
            None => {
                let mut path = parsed.path().to_string();
                if let Some(q) = parsed.query() {
                    path.push('?');
                    path.push_str(q);
                }
                vec![self.single_line(&path)?]
            }
        };
        let default_port = parsed.port().is_none();
        let host_header = match (parsed.host(), default_port) {
            (Some(url::Host::Ipv6(ip)), true) => format!("[{ip}]"),
            (Some(url::Host::Ipv6(ip)), false) => format!("[{ip}]:{port}"),
            (_, true) => host.to_string(),
            (_, false) => format!("{host}:{port}"),
        };
        let template = RequestTemplate {
            host: host_header,
            headers: self
                .headers
                .iter()
                .map(|h| parse_header(h))
                .collect::<Result<Vec<_>, _>>()?,
            body: self.body.clone(),
        };
        let tls = match (https, &self.tls_trust) {
            (false, _) => None,
            (true, None) => {
                return Err(url_err(
                    "an https:// URL needs --cacert FILE (the server's certificate or its CA, PEM) or --insecure".into(),
                ))
            }
            (true, Some(trust)) => Some(
                crate::tls::TlsClient::new(host, trust).map_err(SettingsError::Tls)?,
            ),
        };
        let plan = RequestPlan::build(lines, &template, self.mode)?;
        let scenario = match &self.scenario {
            Some(source) => Some(std::sync::Arc::new(ScenarioRun {
                set: source.parse()?,
                host: template.host.clone(),
                headers: template.headers.clone(),
            })),
            None => None,
        };
        Ok(LoadSpec {
            origin: std::sync::Arc::new(crate::spec::SpecOrigin {
                settings: serde_json::to_value(self).expect("load settings serialize"),
                url: url.to_string(),
            }),
            scenario,
            tls,
            addr,
            plan,
            threads: self.threads,
            connections: self.connections,
            mode: self.mode,
            rate: self.rate,
            pipeline: self.pipeline,
            timeout: self.timeout,
            warmup: self.warmup,
            stop: match self.requests {
                Some(n) => StopCondition::Requests(n),
                None => StopCondition::Duration(self.duration),
            },
            close_grace: self.close_grace,
            seed: self.seed,
            connect_stagger: self
                .connect_stagger
                .unwrap_or_else(|| LoadSpec::default_connect_stagger(self.connections)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a load agent on another host builds from a spec's origin is the same run.
    #[test]
    fn a_spec_is_built_again_from_its_origin() {
        let s = LoadSettings {
            connections: 3,
            method: "POST".into(),
            rate: Some(100.0),
            ..LoadSettings::default()
        };
        let spec = s.build_spec("http://10.77.0.11:9292/items?x=1").unwrap();
        let again = LoadSettings::spec_from_origin(&spec.origin).unwrap();
        assert_eq!(again.addr, spec.addr);
        assert_eq!(again.connections, 3);
        assert_eq!(again.rate, Some(100.0));
        assert_eq!(again.stop, spec.stop);
        assert_eq!(format!("{:?}", again.plan), format!("{:?}", spec.plan));
        let mut broken = (*spec.origin).clone();
        broken.settings = serde_json::json!({"connections": "many"});
        assert!(LoadSettings::spec_from_origin(&broken)
            .unwrap_err()
            .contains("not load settings"));
    }

    #[test]
    fn settings_round_trip_through_json() {
        let s = LoadSettings {
            rate: Some(250.0),
            connect_stagger: Some(Duration::from_millis(1)),
            ..LoadSettings::default()
        };
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains("\"duration\":\"10s\""), "{json}");
        assert_eq!(serde_json::from_str::<LoadSettings>(&json).unwrap(), s);
    }

    #[test]
    fn path_and_method_replace_the_url_path() {
        let s = LoadSettings {
            method: "POST".into(),
            path: Some("/items?x=1".into()),
            ..LoadSettings::default()
        };
        let spec = s.build_spec("http://127.0.0.1:9/ignored").unwrap();
        let bytes = String::from_utf8(spec.plan.requests[0].bytes.clone()).unwrap();
        assert!(
            bytes.starts_with("POST /items?x=1 HTTP/1.1\r\nHost: 127.0.0.1:9\r\n"),
            "{bytes}"
        );
    }

    #[test]
    fn urls_are_checked_and_ip_literals_need_no_resolver() {
        let s = LoadSettings::default();
        let reason = |url: &str| match s.build_spec(url).unwrap_err() {
            SettingsError::Url { reason, .. } => reason,
            other => panic!("{url}: {other}"),
        };
        assert_eq!(
            reason("127.0.0.1:9/"),
            "http:// is missing: did you mean http://127.0.0.1:9/?"
        );
        assert_eq!(
            reason("localhost:9"),
            "http:// is missing: did you mean http://localhost:9?"
        );
        assert!(reason("http://127.0.0.1:0/").starts_with("port 0 "));
        assert!(reason("https://127.0.0.1/").contains("needs --cacert FILE"));
        assert!(reason("ftp://127.0.0.1/").starts_with("only http:// and https://"));
        let spec = s.build_spec("http://[::1]:8080/x").unwrap();
        assert_eq!(spec.addr, "[::1]:8080".parse().unwrap());
        let bytes = String::from_utf8(spec.plan.requests[0].bytes.clone()).unwrap();
        assert!(bytes.contains("\r\nHost: [::1]:8080\r\n"), "{bytes}");
    }

    #[test]
    fn bad_settings_are_named() {
        let bad = |s: LoadSettings| s.check().unwrap_err().to_string();
        let pipelined_close = LoadSettings {
            pipeline: 4,
            mode: ConnectionMode::ClientClose,
            ..LoadSettings::default()
        };
        assert_eq!(
            bad(pipelined_close),
            "pipeline needs keepalive connections; it cannot be combined with client-close"
        );
        let lower = LoadSettings {
            method: "get".into(),
            ..LoadSettings::default()
        };
        assert_eq!(
            bad(lower),
            "method \"get\" is not an upper-case HTTP method"
        );
        let relative = LoadSettings {
            path: Some("items".into()),
            ..LoadSettings::default()
        };
        assert_eq!(bad(relative), "path \"items\" must start with '/'");
        let numeric = LoadSettings {
            method: "5".into(),
            ..LoadSettings::default()
        };
        assert_eq!(
            bad(numeric),
            "method \"5\" is not an upper-case HTTP method"
        );
        let nothing = LoadSettings {
            duration: Duration::ZERO,
            ..LoadSettings::default()
        };
        assert_eq!(bad(nothing), "duration must be longer than zero");
        let counted = LoadSettings {
            duration: Duration::ZERO,
            requests: Some(5),
            ..LoadSettings::default()
        };
        assert_eq!(counted.check(), Ok(()), "-n ignores the duration");
    }
}
