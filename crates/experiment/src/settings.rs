//! The keys an experiment file may hold: the root keys, and every setting of a
//! configuration with the kind of value it takes (the table docs/experiment.md documents),
//! and the "did you mean" suggestions for unknown ones.

use std::collections::BTreeMap;
use std::time::Duration;

use rubies::knobs::{COMPACTS, JITS};

/// Keys at the top level of the file.
/// The `[matrix]` value of `ruby` that means every Ruby.
pub const RUBY_ALL: &str = "all";

pub(crate) const ROOT_KEYS: [&str; 25] = [
    "name",
    "description",
    "seed",
    "blocks",
    "batches",
    "precision",
    "metric",
    "max_blocks",
    "max_batches",
    "max_duration",
    "quiet",
    "cpus",
    "repeat_noisy",
    "design",
    "slice",
    "rounds",
    "order",
    "record_env",
    "rubies",
    "settings",
    "matrix",
    "configs",
    "exclude",
    "services",
    "fleet",
];

/// The type and range of one setting.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    Str,
    Int {
        min: i64,
        max: i64,
    },
    Float {
        min: f64,
        max: f64,
    },
    Duration,
    StrList,
    /// An array of argvs (each an array of strings), e.g. `setup`.
    ArgvList,
    StrMap,
    OneOf(&'static [&'static str]),
    /// One of the options, or an array of them (each at most once).
    SomeOf(&'static [&'static str]),
    Bool,
}

impl Kind {
    pub(crate) fn expected(self) -> String {
        match self {
            Kind::Str => "a string".into(),
            Kind::Int { min, max } => format!("an integer from {min} to {max}"),
            Kind::Float { max, .. } if max == f64::MAX => "a positive number".into(),
            Kind::Float { min, max } => format!("a number from {min} to {max}"),
            Kind::Duration => "a duration string such as \"500ms\", \"10s\" or \"2m\"".into(),
            Kind::StrList => "an array of strings".into(),
            Kind::ArgvList => {
                "an array of commands, each an array of strings, e.g. [[\"{ruby}\", \"bin/rails\", \"db:prepare\"]]".into()
            }
            Kind::StrMap => "a table of string values".into(),
            Kind::OneOf(options) => format!("one of {}", quoted_list(options)),
            Kind::SomeOf(options) => {
                format!("one of {}, or an array of them", quoted_list(options))
            }
            Kind::Bool => "true or false".into(),
        }
    }
}

/// The `server` kinds, named once, by `servers::ServerKind`.
pub(crate) const SERVERS: &[&str] = crate::servers::ServerKind::NAMES;

pub(crate) const MODES: &[&str] = &["keepalive", "close-header", "client-close"];

pub(crate) const WORKLOADS: &[&str] = &["http", "script"];

/// Every setting a configuration has. Order is the order of the reference in
/// docs/experiment.md.
pub(crate) const SETTINGS: &[(&str, Kind)] = &[
    ("ruby", Kind::Str),
    ("ruby_repo", Kind::Str),
    ("ruby_ref", Kind::Str),
    ("ruby_configure_opts", Kind::StrList),
    ("ruby_opts", Kind::StrList),
    ("env", Kind::StrMap),
    ("jit", Kind::OneOf(JITS)),
    ("allocator", Kind::Str),
    ("compact", Kind::OneOf(COMPACTS)),
    ("gemfile", Kind::Str),
    ("workload", Kind::OneOf(WORKLOADS)),
    ("app", Kind::Str),
    ("app_repo", Kind::Str),
    ("ref", Kind::Str),
    ("server", Kind::OneOf(SERVERS)),
    ("server_argv", Kind::StrList),
    ("processes", Kind::Int { min: 1, max: 256 }),
    ("preload", Kind::Bool),
    ("threads", Kind::Int { min: 1, max: 1024 }),
    ("port", Kind::Int { min: 0, max: 65535 }),
    ("tls", Kind::Bool),
    ("readiness_path", Kind::Str),
    ("readiness_timeout", Kind::Duration),
    ("stop_timeout", Kind::Duration),
    ("sample_interval", Kind::Duration),
    ("warmup", Kind::Duration),
    ("duration", Kind::Duration),
    (
        "requests",
        Kind::Int {
            min: 1,
            max: i64::MAX,
        },
    ),
    (
        "max_error_rate",
        Kind::Float {
            min: 0.0,
            max: 100.0,
        },
    ),
    (
        "connections",
        Kind::Int {
            min: 1,
            max: 1_000_000,
        },
    ),
    ("load_threads", Kind::Int { min: 1, max: 1024 }),
    ("mode", Kind::OneOf(MODES)),
    ("close_grace", Kind::Duration),
    (
        "rate",
        Kind::Float {
            min: f64::MIN_POSITIVE,
            max: f64::MAX,
        },
    ),
    ("method", Kind::Str),
    ("path", Kind::Str),
    ("headers", Kind::StrList),
    ("body", Kind::Str),
    ("urls", Kind::Str),
    ("scenario", Kind::Str),
    (
        "url_seed",
        Kind::Int {
            min: 0,
            max: i64::MAX,
        },
    ),
    ("pipeline", Kind::Int { min: 1, max: 1024 }),
    ("timeout", Kind::Duration),
    ("connect_stagger", Kind::Duration),
    ("script", Kind::Str),
    ("profile", Kind::SomeOf(crate::model::PROFILER_NAMES)),
    ("profile_measured", Kind::Bool),
    (
        "profile_rate",
        Kind::Int {
            min: 1,
            max: MAX_PROFILE_RATE_HZ as i64,
        },
    ),
    ("profile_runs", Kind::Int { min: 1, max: 1000 }),
    ("perf_map", Kind::Bool),
    ("script_args", Kind::StrList),
    (
        "runs",
        Kind::Int {
            min: 1,
            max: 1_000_000,
        },
    ),
    ("script_timeout", Kind::Duration),
    ("setup", Kind::ArgvList),
];

/// The highest `profile_rate`: rbspy pauses the Ruby at every sample (its accurate mode) and
/// documents no limit, perf refuses a rate above `kernel.perf_event_max_sample_rate`
/// (100000 by default, lowered by the kernel when sampling takes too long); 10 kHz already
/// costs a profiled Ruby much of its speed.
pub const MAX_PROFILE_RATE_HZ: u32 = 10_000;

/// The help of an out-of-range value, for the settings whose range needs a reason.
pub(crate) fn range_help(setting: &str) -> Option<String> {
    (setting == "profile_rate").then(|| {
        format!(
            "samples per second, 99 by default; at most {MAX_PROFILE_RATE_HZ}: rbspy pauses \
             the Ruby at every sample, and perf refuses a rate above \
             kernel.perf_event_max_sample_rate. For more samples, profile longer \
             (profile_runs for a script, duration for HTTP)"
        )
    })
}

pub(crate) fn setting_kind(key: &str) -> Option<Kind> {
    SETTINGS
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, kind)| *kind)
}

pub(crate) fn setting_names() -> Vec<&'static str> {
    SETTINGS.iter().map(|(k, _)| *k).collect()
}

pub(crate) fn quoted_list(options: &[&str]) -> String {
    let quoted: Vec<String> = options.iter().map(|o| format!("\"{o}\"")).collect();
    match quoted.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// The closest known name, when it is close enough to be a likely typo.
pub fn did_you_mean<'a>(unknown: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (strsim::jaro_winkler(unknown, k), *k))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}

/// The setting a dotted key is about: `threads` for `configs[0].threads` or
/// `matrix.threads[1]`.
pub(crate) fn setting_of(key: &str) -> &str {
    let last = key.rsplit('.').next().unwrap_or(key);
    last.split('[').next().unwrap_or(last)
}

/// A setting's value once checked against its [`Kind`]: typed, so nothing downstream
/// re-parses a string or reasserts a type with `unwrap`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum SettingValue {
    /// `Kind::Str` and `Kind::OneOf`.
    Str(String),
    Int(i64),
    Float(f64),
    /// A duration as written (`"500ms"`, kept for labels and messages) and its value.
    Duration {
        text: String,
        value: Duration,
    },
    /// `Kind::StrList` and `Kind::SomeOf`.
    StrList(Vec<String>),
    /// `Kind::ArgvList`.
    ArgvList(Vec<Vec<String>>),
    StrMap(BTreeMap<String, String>),
    Bool(bool),
}

impl SettingValue {
    /// A string, or a duration as written.
    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            SettingValue::Str(s) | SettingValue::Duration { text: s, .. } => Some(s),
            _ => None,
        }
    }

    pub(crate) fn as_i64(&self) -> Option<i64> {
        match self {
            SettingValue::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// A number, an integer included.
    pub(crate) fn as_f64(&self) -> Option<f64> {
        match self {
            SettingValue::Float(f) => Some(*f),
            SettingValue::Int(i) => Some(*i as f64),
            _ => None,
        }
    }

    pub(crate) fn as_duration(&self) -> Option<Duration> {
        match self {
            SettingValue::Duration { value, .. } => Some(*value),
            _ => None,
        }
    }

    pub(crate) fn as_list(&self) -> Option<&[String]> {
        match self {
            SettingValue::StrList(l) => Some(l),
            _ => None,
        }
    }

    pub(crate) fn as_argv_list(&self) -> Option<&[Vec<String>]> {
        match self {
            SettingValue::ArgvList(l) => Some(l),
            _ => None,
        }
    }

    pub(crate) fn as_bool(&self) -> Option<bool> {
        match self {
            SettingValue::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub(crate) fn as_map(&self) -> Option<&BTreeMap<String, String>> {
        match self {
            SettingValue::StrMap(m) => Some(m),
            _ => None,
        }
    }

    /// The value as a matrix label shows it by default: a string as it is, a list joined by
    /// spaces and a map as `K=V,...` ("none" when empty), a number as JSON writes it.
    pub(crate) fn label(&self) -> String {
        let join_or_none = |parts: Vec<String>, sep: &str| {
            if parts.is_empty() {
                "none".to_string()
            } else {
                parts.join(sep)
            }
        };
        match self {
            SettingValue::Str(s) | SettingValue::Duration { text: s, .. } => s.clone(),
            SettingValue::Int(i) => i.to_string(),
            SettingValue::Bool(b) => b.to_string(),
            SettingValue::Float(f) => {
                serde_json::Number::from_f64(*f).map_or_else(|| f.to_string(), |n| n.to_string())
            }
            SettingValue::StrList(l) => join_or_none(l.clone(), " "),
            SettingValue::ArgvList(l) => {
                join_or_none(l.iter().map(|a| a.join(" ")).collect(), "; ")
            }
            SettingValue::StrMap(m) => {
                join_or_none(m.iter().map(|(k, v)| format!("{k}={v}")).collect(), ",")
            }
        }
    }
}
