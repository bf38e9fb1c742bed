//! `rubyrace load`: turns command-line options into a `LoadSpec`, runs it, and writes the
//! summary, JSON, raw log and HDR log.

use std::fs;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;
use load::{
    parse_url_mix, ConnectionMode, LoadReport, LoadSettings, LoadSpec, PlanError, RawLog, Setting,
    SettingsError,
};

use crate::output::{self, PendingFile};

/// A duration option (`500ms`, `10s`, `2m`), with the mistakes users make said plainly.
/// `humantime::Duration` prints as it is written, so the defaults in `--help` come from
/// `LoadSettings::default()`.
fn parse_duration(text: &str) -> Result<humantime::Duration, String> {
    if text.trim_start().starts_with('-') {
        return Err(format!("{text:?}: a duration cannot be negative"));
    }
    humantime::parse_duration(text)
        .map(Into::into)
        .map_err(|e| {
            format!("{text:?} is not a duration such as \"500ms\", \"10s\" or \"2m\" ({e})")
        })
}

/// The defaults of every option: those of the load engine itself.
fn defaults() -> LoadSettings {
    LoadSettings::default()
}

/// Exit status of invalid usage: an option or the URL is wrong in itself (clap uses the
/// same status for what it rejects).
const EXIT_USAGE: u8 = 2;
/// Exit status when `--max-error-rate` is exceeded.
const EXIT_ERROR_RATE: u8 = 3;
/// Exit status when not a single response came back in the recorded phase.
const EXIT_NO_RESPONSE: u8 = 4;

#[derive(Args, Debug)]
#[command(
    after_help = "Durations take units: 500ms, 10s, 2m. See docs/load.md for every option, \
the JSON schema and the raw log format."
)]
pub struct LoadArgs {
    /// Target, e.g. http://127.0.0.1:8080/ (HTTP/1.1 over plain TCP).
    pub url: String,

    /// Connections to keep open, all of them used whatever the thread count.
    #[arg(short = 'c', long, default_value_t = defaults().connections as u32, value_parser = clap::value_parser!(u32).range(1..))]
    pub connections: u32,

    /// Threads, each with its own event loop and share of the connections.
    #[arg(short = 't', long, default_value_t = defaults().threads as u32, value_parser = clap::value_parser!(u32).range(1..))]
    pub threads: u32,

    /// How long to measure after the warmup [default: 10s].
    #[arg(short = 'd', long, value_parser = parse_duration, conflicts_with = "requests")]
    pub duration: Option<humantime::Duration>,

    /// Measure this many request attempts (responses plus errors) instead of a duration.
    #[arg(short = 'n', long, value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: Option<u64>,

    /// Send load for this long first, recording nothing.
    #[arg(long, default_value_t = defaults().warmup.into(), value_parser = parse_duration)]
    pub warmup: humantime::Duration,

    /// Reuse connections (HTTP/1.1 keepalive). The default.
    #[arg(long, group = "mode")]
    pub keepalive: bool,

    /// Send `Connection: close`; the server should close after each response.
    #[arg(long, group = "mode")]
    pub close_header: bool,

    /// The client closes the connection after each response.
    #[arg(long, group = "mode")]
    pub client_close: bool,

    /// With --close-header, after a response that does not say `Connection: close`: how
    /// long to wait for the server to close before closing from the client and counting
    /// the server as ignoring the header.
    #[arg(long, default_value_t = defaults().close_grace.into(), value_parser = parse_duration)]
    pub close_grace: humantime::Duration,

    /// Open loop: send this many requests per second in total, on a fixed schedule.
    /// Latency is then measured from the intended send time.
    #[arg(long)]
    pub rate: Option<f64>,

    /// HTTP method.
    #[arg(short = 'm', long, default_value_t = defaults().method)]
    pub method: String,

    /// Extra request header, "Name: value"; repeatable.
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,

    /// Request body.
    #[arg(long, conflicts_with = "body_file")]
    pub body: Option<String>,

    /// Request body read from a file.
    #[arg(long)]
    pub body_file: Option<PathBuf>,

    /// Weighted mix of "[WEIGHT] [METHOD] PATH" lines; replaces the URL's path and -m.
    #[arg(long)]
    pub urls: Option<PathBuf>,

    /// Virtual users walking the scenarios of this file (docs/scenarios.md) instead of a
    /// URL mix: each connection is one user, with its own cookies and variables; the URL
    /// gives the server (its path is not used).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["urls", "body", "body_file"])]
    pub scenario: Option<PathBuf>,

    /// https://: trust the server's certificate if this PEM file holds it or its CA.
    #[arg(long, value_name = "FILE", conflicts_with = "insecure")]
    pub cacert: Option<PathBuf>,

    /// https://: accept any certificate (handshake signatures are still checked).
    #[arg(long)]
    pub insecure: bool,

    /// Seed of the URL mix sequence (each connection draws its own reproducible sequence).
    #[arg(long, default_value_t = defaults().seed)]
    pub seed: u64,

    /// Requests kept in flight per connection (keepalive only).
    #[arg(long, default_value_t = defaults().pipeline as u32, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub pipeline: u32,

    /// A request without a complete response after this long is aborted and counted.
    #[arg(long, default_value_t = defaults().timeout.into(), value_parser = parse_duration)]
    pub timeout: humantime::Duration,

    /// Pause between connection attempts at start [default: 250µs, at most 100ms in all].
    #[arg(long, value_parser = parse_duration)]
    pub connect_stagger: Option<humantime::Duration>,

    /// Exit with status 3 when the error rate (in percent, non-2xx included) exceeds this.
    #[arg(long, value_name = "PERCENT")]
    pub max_error_rate: Option<f64>,

    /// Write the result as JSON (schema rubyrace.load/1) to FILE, or to stdout with "-".
    #[arg(long, value_name = "FILE|-")]
    pub json: Option<String>,

    /// Stream one line per request to FILE (see docs/load.md for the format).
    #[arg(long, value_name = "FILE")]
    pub raw: Option<PathBuf>,

    /// Write the merged latency histogram as an HdrHistogram interval log.
    #[arg(long, value_name = "FILE")]
    pub hdr: Option<PathBuf>,
}

impl LoadArgs {
    fn mode(&self) -> ConnectionMode {
        if self.close_header {
            ConnectionMode::CloseHeader
        } else if self.client_close {
            ConnectionMode::ClientClose
        } else {
            ConnectionMode::Keepalive
        }
    }
}

/// Turns the arguments into load settings, reading the body and URL-mix files.
fn settings(args: &LoadArgs) -> Result<LoadSettings> {
    let body = match (&args.body, &args.body_file) {
        (Some(b), _) => Some(b.clone().into_bytes()),
        (None, Some(path)) => Some(
            fs::read(path)
                .with_context(|| format!("cannot read --body-file {}", path.display()))?,
        ),
        (None, None) => None,
    };
    let urls = match &args.urls {
        Some(path) => {
            let text = fs::read_to_string(path)
                .with_context(|| format!("cannot read --urls {}", path.display()))?;
            Some(parse_url_mix(&text, &path.display().to_string())?)
        }
        None => None,
    };
    let scenario = match &args.scenario {
        Some(path) => Some(load::settings::ScenarioSource {
            name: path.display().to_string(),
            text: fs::read_to_string(path)
                .with_context(|| format!("cannot read --scenario {}", path.display()))?,
        }),
        None => None,
    };
    let tls_trust = match (&args.cacert, args.insecure) {
        (Some(path), _) => Some(load::tls::TlsTrust::CaFile(path.clone())),
        (None, true) => Some(load::tls::TlsTrust::Insecure),
        (None, false) => None,
    };
    Ok(LoadSettings {
        scenario,
        tls_trust,
        connections: args.connections as usize,
        threads: args.threads as usize,
        duration: args.duration.map_or(defaults().duration, Into::into),
        requests: args.requests,
        warmup: args.warmup.into(),
        mode: args.mode(),
        close_grace: args.close_grace.into(),
        rate: args.rate,
        method: args.method.clone(),
        path: None,
        headers: args.headers.clone(),
        body,
        urls,
        seed: args.seed,
        pipeline: args.pipeline as usize,
        timeout: args.timeout.into(),
        connect_stagger: args.connect_stagger.map(Into::into),
    })
}

/// Why `rubyrace load` does not start; it decides the exit status.
enum Refusal {
    /// The command line is wrong in itself (an option's value, the URL): exit status 2.
    Usage(String),
    /// Something it names cannot be used: a file, the URL mix in it, a host name that does
    /// not resolve: exit status 1.
    Input(anyhow::Error),
}

/// Builds the spec from the arguments, checking everything before any load is sent.
/// The messages name the command-line options.
fn build_spec(args: &LoadArgs) -> Result<LoadSpec, Refusal> {
    if let Some(limit) = args.max_error_rate {
        if !(0.0..=100.0).contains(&limit) {
            return Err(Refusal::Usage(format!(
                "--max-error-rate is a percentage between 0 and 100 (got {limit})"
            )));
        }
    }
    let settings = settings(args).map_err(Refusal::Input)?;
    settings.build_spec(&args.url).map_err(|e| match e {
        SettingsError::Invalid { setting, message } => {
            let flag = match setting {
                Setting::Method => "-m".to_string(),
                s => format!("--{}", s.name()),
            };
            Refusal::Usage(message.replacen(setting.name(), &flag, 1))
        }
        e @ (SettingsError::Url { .. } | SettingsError::Plan(PlanError::Header(_))) => {
            Refusal::Usage(e.to_string())
        }
        other => Refusal::Input(anyhow::anyhow!(other)),
    })
}

pub fn run(args: LoadArgs) -> Result<ExitCode> {
    let spec = match build_spec(&args) {
        Ok(spec) => spec,
        Err(Refusal::Usage(message)) => {
            // Worded like clap's own usage errors, which exit with the same status.
            eprintln!(
                "rubyrace: error: {message}\n\nFor more information, try 'rubyrace load --help'."
            );
            return Ok(ExitCode::from(EXIT_USAGE));
        }
        Err(Refusal::Input(e)) => return Err(e),
    };
    // Check every output before the load, so a bad path fails in a second, not after it.
    // Each is written under a temporary name and renamed into place when complete: none
    // can replace a results database or a file of a results directory (output.rs).
    let raw_file = args
        .raw
        .as_deref()
        .map(|p| PendingFile::new(p).context("--raw"))
        .transpose()?;
    let raw = raw_file
        .as_ref()
        .map(|p| {
            RawLog::create(p.temporary()).with_context(|| {
                format!(
                    "cannot create --raw {}",
                    args.raw.as_ref().unwrap().display()
                )
            })
        })
        .transpose()?;
    if let Some(p) = &args.hdr {
        output::check_output_file(p).context("--hdr")?;
    }
    let json_path = args
        .json
        .as_ref()
        .filter(|p| p.as_str() != "-")
        .map(PathBuf::from);
    if let Some(p) = &json_path {
        output::check_output_file(p).context("--json")?;
    }

    let interrupt = crate::invocation::install_interrupt(None)?;

    let outcome = load::run(&spec, raw.as_ref(), interrupt).context("the load run failed")?;
    let report = LoadReport::new(&spec, &args.url, &outcome);

    // The summary goes out first: whatever fails below, the numbers are not lost.
    let json_to_stdout = args.json.as_deref() == Some("-");
    let summary = report.human_summary();
    if json_to_stdout {
        eprint!("{summary}");
    } else {
        print!("{summary}");
    }
    let mut failures = Vec::new();
    match (&outcome.raw_error, raw_file) {
        // A log cut short by a write error is not put in place as if whole.
        (Some(e), _) => failures.push(format!("writing --raw failed: {e}")),
        (None, Some(file)) => {
            drop(raw);
            if let Err(e) = file.commit() {
                failures.push(format!("--raw: {e:#}"));
            }
        }
        (None, None) => {}
    }
    let json = serde_json::to_string_pretty(&report).expect("the report serializes");
    if json_to_stdout {
        // A closed stdout (`| head`) is the end of the output, not a failure.
        if let Err(e) = output::write_stdout(&format!("{json}\n")) {
            failures.push(format!("writing JSON to stdout failed: {e:#}"));
        }
    } else if let Some(path) = &json_path {
        if let Err(e) = output::write_file(path, format!("{json}\n").as_bytes()) {
            failures.push(format!("--json: {e:#}"));
        }
    }
    if let Some(path) = &args.hdr {
        let mut log = Vec::new();
        let written = load::hlog::write_hdr_log(&mut log, &outcome.stats.latency, report.elapsed_s)
            .map_err(anyhow::Error::from)
            .and_then(|_| output::write_file(path, &log));
        if let Err(e) = written {
            failures.push(format!("writing --hdr {} failed: {e:#}", path.display()));
        }
    }
    if !failures.is_empty() {
        bail!("{}", failures.join("; "));
    }
    if outcome.interrupted {
        return Ok(ExitCode::from(crate::invocation::EXIT_INTERRUPTED));
    }
    if let Some(limit) = args.max_error_rate {
        let percent = 100.0 * report.error_rate;
        if percent > limit {
            eprintln!("rubyrace: error rate {percent:.3}% exceeds --max-error-rate {limit}%");
            return Ok(ExitCode::from(EXIT_ERROR_RATE));
        }
    }
    if report.requests == 0 {
        eprintln!(
            "rubyrace: no response came back during the recorded phase (exit status {EXIT_NO_RESPONSE})"
        );
        return Ok(ExitCode::from(EXIT_NO_RESPONSE));
    }
    Ok(ExitCode::SUCCESS)
}
