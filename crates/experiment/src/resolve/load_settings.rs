//! A configuration's load: connections, threads, duration or requests, the connection
//! mode, the URL or URL mix, as one `LoadSettings` checked the way `rubyrace load` checks it.

use std::time::Duration;

use load::{ConnectionMode, LoadSettings};

use super::Lookup;
use crate::model::Workload;
use crate::parse::Parser;

/// The load settings: the URL mix, the engine's settings with the experiment file's
/// defaults, each checked as `rubyrace load` checks it (for an HTTP workload).
pub(super) fn resolve_load(
    p: &mut Parser,
    l: &Lookup,
    workload: Workload,
    processes: u32,
    threads: u32,
    ruby_engine: Option<&str>,
) -> LoadSettings {
    // The load.
    let urls = url_mix(p, l);
    // A scenario file: read and checked now, its text stored with the settings.
    let scenario = scenario_source(p, l);
    // The experiment file's defaults are the load generator's (LoadSettings::default()),
    // except where a server's configuration decides: connections (one per server thread),
    // the path ("/"), and the warmup (5 s; 30 s for a JVM, which needs far longer than CRuby
    // before its JIT has settled).
    let engine = LoadSettings::default();
    let mode = match l.get("mode").and_then(|v| v.value.as_str()) {
        Some("close-header") => ConnectionMode::CloseHeader,
        Some("client-close") => ConnectionMode::ClientClose,
        Some(_) => ConnectionMode::Keepalive,
        None => engine.mode,
    };
    let load = LoadSettings {
        connections: l
            .int("connections")
            .map(|c| c as usize)
            .unwrap_or((processes * threads) as usize),
        threads: l.int("load_threads").map_or(engine.threads, |n| n as usize),
        duration: l.duration("duration", engine.duration),
        requests: l.int("requests").map(|n| n as u64),
        warmup: l.duration(
            "warmup",
            Duration::from_secs(if ruby_engine == Some("jruby") { 30 } else { 5 }),
        ),
        mode,
        close_grace: l.duration("close_grace", engine.close_grace),
        rate: l.float("rate"),
        method: l.string("method", &engine.method),
        // A scenario's steps have their own paths.
        path: match (&scenario, l.get("path")) {
            (Some(_), None) => None,
            _ => Some(l.string("path", "/")),
        },
        headers: l.list("headers"),
        body: l
            .get("body")
            .and_then(|v| v.value.as_str())
            .map(|b| b.as_bytes().to_vec()),
        urls: urls.clone(),
        seed: l.int("url_seed").map_or(engine.seed, |n| n as u64),
        pipeline: l.int("pipeline").map_or(engine.pipeline, |n| n as usize),
        timeout: l.duration("timeout", engine.timeout),
        connect_stagger: l.get("connect_stagger").and_then(|v| v.value.as_duration()),
        scenario,
        // `tls = true`: the trial trusts the certificate it generates for its server.
        tls_trust: None,
    };
    if workload == Workload::Http {
        check_http_load(p, l, &load);
    }
    load
}

/// The URL mix of the `urls` file, read and parsed; None, with an error of `urls`, when
/// it cannot be read or parsed, and None when no `urls` is written.
fn url_mix(p: &mut Parser, l: &Lookup) -> Option<Vec<load::UrlLine>> {
    match l.get("urls").and_then(|v| v.value.as_str()) {
        Some(f) => {
            let path = p.resolve_path(f);
            match std::fs::read_to_string(&path) {
                Ok(text) => match load::parse_url_mix(&text, &path.display().to_string()) {
                    Ok(lines) => Some(lines),
                    Err(e) => {
                        p.error(&l.span_of("urls"), &l.key_of("urls"), e.to_string(), None);
                        None
                    }
                },
                Err(e) => {
                    p.error(
                        &l.span_of("urls"),
                        &l.key_of("urls"),
                        format!("cannot read {}: {e}", path.display()),
                        None,
                    );
                    None
                }
            }
        }
        None => None,
    }
}

/// The `scenario` file, read and its scenarios checked; None, with an error of `scenario`
/// for each problem, when it cannot be read or is wrong, and None when none is written.
fn scenario_source(p: &mut Parser, l: &Lookup) -> Option<load::settings::ScenarioSource> {
    match l.get("scenario").and_then(|v| v.value.as_str()) {
        Some(f) => {
            let path = p.resolve_path(f);
            match std::fs::read_to_string(&path) {
                Ok(text) => {
                    let source = load::settings::ScenarioSource {
                        name: path.display().to_string(),
                        text,
                    };
                    match load::scenario::parse_scenarios(&source.name, &source.text) {
                        Ok(_) => Some(source),
                        Err(errors) => {
                            for e in errors {
                                p.error(
                                    &l.span_of("scenario"),
                                    &l.key_of("scenario"),
                                    e.to_string(),
                                    None,
                                );
                            }
                            None
                        }
                    }
                }
                Err(e) => {
                    p.error(
                        &l.span_of("scenario"),
                        &l.key_of("scenario"),
                        format!("cannot read {}: {e}", path.display()),
                        None,
                    );
                    None
                }
            }
        }
        None => None,
    }
}

/// An HTTP workload's load checked as `rubyrace load` checks it, and its readiness path:
/// an error for each problem, where its setting is written.
fn check_http_load(p: &mut Parser, l: &Lookup, load: &LoadSettings) {
    for (key, message) in load_problems(load) {
        if key == "headers" {
            header_errors(p, l, load);
            continue;
        }
        let help = load_problem_help(&key, load);
        p.error(&l.span_of(&key), &l.key_of(&key), message, help);
    }
    let readiness = l.string("readiness_path", "/");
    if !readiness.starts_with('/') {
        p.error(
            &l.span_of("readiness_path"),
            &l.key_of("readiness_path"),
            format!("expected a path starting with '/', found {readiness:?}"),
            None,
        );
    }
}

/// Each header that is not `Name: value`, where it is written.
fn header_errors(p: &mut Parser, l: &Lookup, load: &LoadSettings) {
    let spans = l
        .get("headers")
        .map(|v| v.items.clone())
        .unwrap_or_default();
    for (i, h) in load.headers.iter().enumerate() {
        if let Err(e) = load::parse_header(h) {
            let span = spans.get(i).cloned().flatten();
            let (span, key) = match span {
                Some(s) => (Some(s), format!("{}[{i}]", l.key_of("headers"))),
                None => (l.span_of("headers"), l.key_of("headers")),
            };
            p.error(&span, &key, e.to_string(), None);
        }
    }
}

/// The help for a problem of the load's setting `key`: the likely meant value of
/// `method` or `path`, an example `timeout`; None for the others.
fn load_problem_help(key: &str, load: &LoadSettings) -> Option<String> {
    match key {
        "method" => {
            let upper = load.method.to_ascii_uppercase();
            (upper != load.method && load::parse_url_mix(&format!("{upper} /"), "method").is_ok())
                .then(|| format!("did you mean {upper:?}?"))
        }
        "path" => load.path.as_ref().map(|path| match path.split_once("://") {
            // The server's address is the trial's; only the path is given.
            Some((_, rest)) => format!(
                "give the path alone, e.g. {:?}",
                rest.find('/').map_or("/", |i| &rest[i..])
            ),
            None => format!("did you mean {:?}?", format!("/{path}")),
        }),
        "timeout" => Some("a request needs time to answer, e.g. timeout = \"10s\"".to_string()),
        _ => None,
    }
}

/// Every problem `LoadSettings::check` finds, as (setting, message). `check` stops at the
/// first one; so that all are reported at once, the setting it names is put back to its
/// default and the check run again, until it passes. The messages stay those of
/// `rubyrace load`.
pub(crate) fn load_problems(load: &LoadSettings) -> Vec<(String, String)> {
    let defaults = LoadSettings::default();
    let mut load = load.clone();
    let mut problems = Vec::new();
    // Each round puts one setting back, so there are at most as many rounds as settings.
    for _ in 0..16 {
        let Err(e) = load.check() else { break };
        let message = e.to_string();
        // The experiment file's name for the setting (its `threads` are the server's).
        let key = match &e {
            load::SettingsError::Invalid {
                setting: load::Setting::Threads,
                ..
            } => "load_threads",
            load::SettingsError::Invalid { setting, .. } => setting.name(),
            load::SettingsError::Plan(load::PlanError::Header(_)) => "headers",
            load::SettingsError::Scenario(_) => "scenario",
            _ => message.split_whitespace().next().unwrap_or(""),
        }
        .to_string();
        let known = match key.as_str() {
            "connections" => {
                load.connections = 1;
                true
            }
            "load_threads" => {
                load.threads = 1;
                true
            }
            "pipeline" => {
                load.pipeline = 1;
                true
            }
            "rate" => {
                load.rate = None;
                true
            }
            "timeout" => {
                load.timeout = defaults.timeout;
                true
            }
            "requests" => {
                load.requests = None;
                true
            }
            "headers" => {
                load.headers.clear();
                true
            }
            "method" => {
                load.method = defaults.method.clone();
                true
            }
            "path" => {
                load.path = Some("/".into());
                true
            }
            "scenario" => {
                load.scenario = None;
                true
            }
            _ => false,
        };
        problems.push((key, message));
        if !known {
            break;
        }
    }
    problems
}
