//! The experiment file: parsing, validation and matrix expansion.
//!
//! An experiment file (TOML, documented in docs/experiment.md) names the Rubies, the base
//! settings of every configuration, the matrix axes, explicit configurations and exclusions.
//! Parsing walks the file with its source spans, so every mistake is reported with the file,
//! line and column, the key, what was expected and a "did you mean" suggestion; all mistakes
//! are collected and reported together (never one per attempt), none is followed by errors
//! that only repeat it, and no key is ever ignored or silently replaced. The result is an
//! `Experiment`: run-level settings plus the expanded, labelled list of `Config`s, and the
//! defaults the file relies on, which `rubyrace run` names before it runs anything.

pub mod conditions;
pub mod design;
pub mod precision;
pub mod schedule;
pub mod servers;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use load::{ConnectionMode, LoadSettings};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value as J};
use toml_edit::{ImDocument, Item, TableLike, Value};

use crate::servers::ServerKind;
use rubies::discovery::{DiscoveredRuby, RubyCapabilities};
use rubies::knobs::{self, AllocatorSetting, Compact, Jit, COMPACTS, JITS};

/// Apps shipped in `ruby/apps/`.
pub const BUNDLED_APPS: [&str; 5] = [
    "rack-hello",
    "rails-hello",
    "sinatra-hello",
    "rails-mixed",
    "known-effect",
];

/// Keys at the top level of the file.
const ROOT_KEYS: [&str; 21] = [
    "name",
    "description",
    "seed",
    "batches",
    "precision",
    "metric",
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
];

pub use crate::schedule::Order;

/// What a configuration measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// An app server under HTTP load.
    Http,
    /// A Ruby script run several times per trial, timed from outside.
    Script,
}

/// One problem found in an experiment file.
#[derive(Clone, Debug, PartialEq)]
pub struct ExperimentError {
    pub file: PathBuf,
    /// Line and column (1-based; the column counts characters) of what the problem is
    /// about; none when it is about the file as a whole (it cannot be read, or it lacks
    /// something), never a made-up one.
    pub position: Option<(usize, usize)>,
    /// Dotted key, e.g. `settings.threads`; empty for file-level problems.
    pub key: String,
    pub message: String,
    pub help: Option<String>,
}

impl fmt::Display for ExperimentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.position {
            Some((line, column)) => write!(f, "{}:{line}:{column}: ", self.file.display())?,
            // A problem of the file as a whole, without a key, names the file itself
            // ("cannot read FILE: ...").
            None if self.key.is_empty() => {}
            None => write!(f, "{}: ", self.file.display())?,
        }
        if !self.key.is_empty() {
            write!(f, "{}: ", self.key)?;
        }
        write!(f, "{}", self.message)?;
        if let Some(help) = &self.help {
            write!(f, "\n    help: {help}")?;
        }
        Ok(())
    }
}

/// Every problem found in one file.
#[derive(Clone, Debug, PartialEq)]
pub struct ExperimentErrors(pub Vec<ExperimentError>);

impl fmt::Display for ExperimentErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        let n = self.0.len();
        write!(
            f,
            "\n{n} error{} in the experiment file; nothing was run",
            if n == 1 { "" } else { "s" }
        )
    }
}

impl std::error::Error for ExperimentErrors {}

/// A Ruby named in `[rubies]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RubyDef {
    /// The executable (resolved to a path) and any fixed options, e.g. `["/usr/bin/ruby"]`.
    pub argv: Vec<String>,
    /// Environment set whenever this Ruby runs.
    pub env: BTreeMap<String, String>,
    /// The Gemfile this Ruby's configurations use unless `gemfile` says otherwise.
    #[serde(default)]
    pub gemfile: Option<PathBuf>,
}

/// A script workload: a Ruby file run `runs` times per trial.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScriptSettings {
    pub path: PathBuf,
    pub args: Vec<String>,
    pub runs: u32,
    /// A run still going after this long is stopped and fails the trial.
    #[serde(with = "humantime_serde", default = "default_script_timeout")]
    pub timeout: Duration,
}

fn default_script_timeout() -> Duration {
    Duration::from_secs(600)
}

/// Everything one configuration runs with, fully resolved (absolute paths, URL mix read).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConfigSettings {
    /// Name of the Ruby in `[rubies]`.
    pub ruby: String,
    /// The Ruby's argv prefix followed by `ruby_opts`.
    pub ruby_argv: Vec<String>,
    pub ruby_opts: Vec<String>,
    /// The Ruby's own environment, overlaid with the configuration's `env`.
    pub env: BTreeMap<String, String>,
    pub workload: Workload,
    /// Bundled app name or the user's directory, as written.
    pub app: String,
    /// Directory holding the app's `config.ru`.
    pub app_dir: PathBuf,
    pub server: ServerKind,
    pub server_argv: Vec<String>,
    pub processes: u32,
    pub threads: u32,
    /// 0 picks a free port per trial.
    pub port: u16,
    pub readiness_path: String,
    #[serde(with = "humantime_serde")]
    pub readiness_timeout: Duration,
    #[serde(with = "humantime_serde")]
    pub stop_timeout: Duration,
    #[serde(with = "humantime_serde")]
    pub sample_interval: Duration,
    /// Percent of failed requests (errors and non-2xx) above which a trial is invalid.
    pub max_error_rate: f64,
    /// Warmup, duration and everything `rubyrace load` accepts.
    pub load: LoadSettings,
    pub script: Option<ScriptSettings>,
    /// The JIT asked for, verified on the running Ruby; none: the Ruby's own default,
    /// recorded but not checked.
    #[serde(default)]
    pub jit: Option<Jit>,
    /// The allocator asked for (its library is in `env` as `LD_PRELOAD` when preloaded).
    #[serde(default)]
    pub allocator: Option<AllocatorSetting>,
    #[serde(default)]
    pub compact: Option<Compact>,
    /// The Gemfile in use: the server runs through `bundle exec` with `BUNDLE_GEMFILE` set.
    #[serde(default)]
    pub gemfile: Option<PathBuf>,
    /// `RUBY_ENGINE` of the Ruby ("ruby", "jruby"), when it answered the check.
    #[serde(default)]
    pub ruby_engine: Option<String>,
}

impl ConfigSettings {
    /// A rough wall time of one trial of this configuration, for estimates before anything
    /// ran: for HTTP, the warmup, the measured time (the duration, or rounds × (slice +
    /// lead-in) when sliced, shared by the `configurations` when co-scheduled) and about
    /// 3 s to start and stop the server; for a script, 2 s per run.
    pub fn estimated_trial_time(
        &self,
        design: &crate::design::Design,
        configurations: usize,
    ) -> Duration {
        match self.workload {
            Workload::Http => {
                let measured = design
                    .loaded_per_configuration(configurations)
                    .unwrap_or(self.load.duration);
                self.load.warmup + measured + Duration::from_secs(3)
            }
            Workload::Script => Duration::from_secs(2) * self.script.as_ref().map_or(1, |x| x.runs),
        }
    }
}

/// One point of the matrix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Config {
    /// 0-based position in the expanded list.
    #[serde(rename = "config_id")]
    pub id: usize,
    pub label: String,
    /// The matrix axes and their value labels for this configuration, e.g. `ruby=3.3`.
    pub axes: BTreeMap<String, String>,
    pub settings: ConfigSettings,
}

/// A parsed, validated and expanded experiment.
#[derive(Clone, Debug)]
pub struct Experiment {
    pub file: PathBuf,
    /// The file's text, stored with the results so a resume never depends on the file.
    pub text: String,
    pub name: String,
    pub description: Option<String>,
    pub seed: u64,
    pub batches: u32,
    pub order: Order,
    /// Extra environment variable names to record with every trial.
    pub record_env: Vec<String>,
    pub rubies: BTreeMap<String, RubyDef>,
    pub configs: Vec<Config>,
    /// What the file leaves to defaults that decide what runs and for how long, as
    /// `key = value` (`batches = 5`, `warmup = "5s"`); see [`Experiment::defaults_note`].
    pub defaults: Vec<String>,
    /// `precision = "1%"`: blocks are added after `batches` until every comparison is that
    /// precise, or the budget is spent (crate::precision).
    pub precision: Option<crate::precision::PrecisionTarget>,
    /// `quiet`, `cpus`, `repeat_noisy`: how trials are kept out of the machine's noise.
    pub conditions: crate::conditions::TrialConditions,
    /// `design`, `slice`, `rounds`: one trial after another, or interleaved (crate::design).
    pub design: crate::design::Design,
}

/// The type and range of one setting.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Str,
    Int { min: i64, max: i64 },
    Float { min: f64, max: f64 },
    Duration,
    StrList,
    StrMap,
    OneOf(&'static [&'static str]),
}

impl Kind {
    fn expected(self) -> String {
        match self {
            Kind::Str => "a string".into(),
            Kind::Int { min, max } => format!("an integer from {min} to {max}"),
            Kind::Float { max, .. } if max == f64::MAX => "a positive number".into(),
            Kind::Float { min, max } => format!("a number from {min} to {max}"),
            Kind::Duration => "a duration string such as \"500ms\", \"10s\" or \"2m\"".into(),
            Kind::StrList => "an array of strings".into(),
            Kind::StrMap => "a table of string values".into(),
            Kind::OneOf(options) => format!("one of {}", quoted_list(options)),
        }
    }
}

const SERVERS: &[&str] = &["puma", "unicorn", "thin", "webrick", "custom"];
const MODES: &[&str] = &["keepalive", "close-header", "client-close"];
const WORKLOADS: &[&str] = &["http", "script"];

/// Every setting a configuration has. Order is the order of the reference in
/// docs/experiment.md.
const SETTINGS: &[(&str, Kind)] = &[
    ("ruby", Kind::Str),
    ("ruby_opts", Kind::StrList),
    ("env", Kind::StrMap),
    ("jit", Kind::OneOf(JITS)),
    ("allocator", Kind::Str),
    ("compact", Kind::OneOf(COMPACTS)),
    ("gemfile", Kind::Str),
    ("workload", Kind::OneOf(WORKLOADS)),
    ("app", Kind::Str),
    ("server", Kind::OneOf(SERVERS)),
    ("server_argv", Kind::StrList),
    ("processes", Kind::Int { min: 1, max: 256 }),
    ("threads", Kind::Int { min: 1, max: 1024 }),
    ("port", Kind::Int { min: 0, max: 65535 }),
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
    ("script_args", Kind::StrList),
    (
        "runs",
        Kind::Int {
            min: 1,
            max: 1_000_000,
        },
    ),
    ("script_timeout", Kind::Duration),
];

fn setting_kind(key: &str) -> Option<Kind> {
    SETTINGS
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, kind)| *kind)
}

fn setting_names() -> Vec<&'static str> {
    SETTINGS.iter().map(|(k, _)| *k).collect()
}

fn quoted_list(options: &[&str]) -> String {
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

/// A checked setting value and where it was written.
#[derive(Clone, Debug)]
struct Placed {
    value: J,
    span: Option<Range<usize>>,
    /// The dotted key where it was written, for messages.
    key: String,
    /// Where each element was written, for an array (so a bad header is pointed at).
    items: Vec<Span>,
}

/// A layer of settings: `[settings]`, one `[[configs]]` entry or one matrix point.
type Layer = BTreeMap<String, Placed>;

/// Where something was written in the file (a byte range), when known.
type Span = Option<Range<usize>>;

/// One `[[configs]]` entry.
struct ConfigEntry {
    layer: Layer,
    /// Its `label`, if it has one.
    label: Option<Placed>,
    span: Span,
    /// One of its values was rejected (so a label made of its keys is not the real one).
    broken: bool,
}

/// One part of a configuration's label (the `[[configs]]` entry's, or one axis value's),
/// with where it comes from, so a duplicate label can be pointed at.
#[derive(Clone, Debug)]
struct LabelPart {
    text: String,
    span: Span,
    /// The dotted key it comes from, e.g. `configs[1].label` or `matrix.threads[0]`.
    key: String,
    /// The matrix axis it comes from, if any.
    axis: Option<String>,
}

/// One expanded configuration before it is resolved.
struct Point {
    layer: Layer,
    label: String,
    parts: Vec<LabelPart>,
    /// The matrix axes and their value labels.
    axes: BTreeMap<String, String>,
    /// The `[[configs]]` entry it comes from.
    span: Span,
}

/// One value of a matrix axis.
#[derive(Clone, Debug)]
struct AxisValue {
    placed: Placed,
    label: String,
    /// The user chose the label: it is used as it is, without `axis=`.
    chosen: bool,
}

/// One `[matrix]` axis.
#[derive(Clone, Debug)]
struct Axis {
    name: String,
    values: Vec<AxisValue>,
    /// Where its key is written.
    span: Span,
    /// Two of its values have the same label (reported already).
    duplicate_labels: bool,
}

/// A Ruby as run: its argv and the environment added to rubyrace's.
type RubyKey = (Vec<String>, Vec<(String, String)>);

struct Parser<'a> {
    file: &'a Path,
    text: &'a str,
    base_dir: PathBuf,
    errors: Vec<ExperimentError>,
    /// `bundle check` for each Ruby and environment (BUNDLE_GEMFILE), run once.
    bundles: HashMap<RubyKey, Result<(), String>>,
    /// What each Ruby (argv and environment) answered, asked once.
    capabilities: HashMap<RubyKey, Result<RubyCapabilities, String>>,
    /// Where `[matrix]` says `ruby = "all"`, if it does.
    ruby_all: Option<Span>,
    /// Settings with a value that was rejected somewhere in the file. Checks that depend
    /// on one of them are skipped: their errors would follow from the first one.
    rejected: std::collections::BTreeSet<String>,
    /// Rubies of `[rubies]` (or `system`) whose definition was rejected.
    failed_rubies: Vec<String>,
    /// Something about the Rubies as a whole was reported (`[rubies]` is not a table, is
    /// empty, no `ruby` on PATH, `ruby = "all"` found none).
    rubies_reported: bool,
    /// Where `[rubies]` is written.
    rubies_span: Span,
    /// Finds the Rubies of the machine, for `ruby = "all"` without `[rubies]`.
    discover: &'a dyn Fn() -> Vec<DiscoveredRuby>,
}

impl<'a> Parser<'a> {
    fn position(&self, span: &Option<Range<usize>>) -> Option<(usize, usize)> {
        span.as_ref().map(|span| line_column(self.text, span.start))
    }

    /// `FILE:LINE:COLUMN` of a span, to name a second place in a message.
    fn at(&self, span: &Span) -> String {
        match self.position(span) {
            Some((line, column)) => format!("{}:{line}:{column}", self.file.display()),
            None => self.file.display().to_string(),
        }
    }

    fn error(
        &mut self,
        span: &Option<Range<usize>>,
        key: &str,
        message: impl Into<String>,
        help: Option<String>,
    ) {
        let position = self.position(span);
        self.errors.push(ExperimentError {
            file: self.file.to_path_buf(),
            position,
            key: key.to_string(),
            message: message.into(),
            help,
        });
    }

    fn unknown_key(&mut self, span: &Option<Range<usize>>, key: &str, name: &str, known: &[&str]) {
        let help = did_you_mean(name, known)
            .map(|k| format!("did you mean `{k}`?"))
            .or_else(|| Some(format!("known keys here: {}", known.join(", "))));
        self.error(span, key, format!("unknown key `{name}`"), help);
    }

    /// Reports a `name` that cannot name a results directory (`results/NAME-...`).
    fn check_name(&mut self, span: &Span, name: &str) {
        let problem = if name.trim().is_empty() {
            format!("expected a non-empty name, found {name:?}")
        } else if let Some(c) = name.chars().find(|c| matches!(c, '/' | '\\')) {
            format!("a name cannot contain {c:?}, found {name:?}")
        } else if control_character(name).is_some() {
            format!("a name cannot contain control characters, found {name:?}")
        } else {
            return;
        };
        self.error(
            span,
            "name",
            problem,
            Some(
                "it names the results directory, results/NAME-YYYYMMDD-HHMMSS: e.g. \
                 name = \"yjit-rack-hello\""
                    .into(),
            ),
        );
    }

    /// Reports a label (chosen, or made from a value) with a control character in it.
    fn check_label(&mut self, span: &Span, key: &str, label: &str) {
        if control_character(label).is_some() {
            self.error(
                span,
                key,
                format!("a label cannot contain control characters, found {label:?}"),
                Some(
                    "labels name configurations in progress lines, tables and Markdown: use \
                     printable characters"
                        .into(),
                ),
            );
        }
    }

    /// The design: the one written (`design = "blocks"`, `"interleaved"` or
    /// `"co-scheduled"`), checked against what the configurations are; or, when none is
    /// written, interleaved for two to [`crate::design::MAX_DEFAULT_INTERLEAVED`] HTTP
    /// configurations that can be (see [`why_blocks_by_default`]) and blocks otherwise.
    /// A sliced design measures each configuration for `rounds` × `slice` per block: from
    /// the `duration` (every configuration's, the same) unless `rounds` is written. `slice`
    /// and `rounds` with the blocks design are errors (no key is silently ignored). Returns
    /// the design and, when it was not written, the note for the defaults list.
    fn design(
        &mut self,
        written_design: Option<(DesignName, Span)>,
        slice: Option<(Duration, Span)>,
        rounds: Option<(u32, Span)>,
        configs: &[Config],
        written: &std::collections::BTreeSet<&str>,
        repeat_noisy: u32,
    ) -> (crate::design::Design, Option<String>) {
        let by_default = written_design.is_none();
        let (name, span) = match written_design {
            Some((DesignName::Blocks, _)) => {
                self.refuse_slicing_keys(&slice, &rounds, "this file sets design = \"blocks\"");
                return (crate::design::Design::Blocks, None);
            }
            Some((name, span)) => (name, span),
            None => match why_blocks_by_default(configs, written, repeat_noisy) {
                Some(reason) => {
                    self.refuse_slicing_keys(
                        &slice,
                        &rounds,
                        &format!("this file's design is blocks by default ({reason})"),
                    );
                    let note =
                        (configs.len() >= 2).then(|| format!("design = \"blocks\" ({reason})"));
                    return (crate::design::Design::Blocks, note);
                }
                None => (DesignName::Interleaved, None),
            },
        };
        let together = name == DesignName::CoScheduled;
        let (a_design, name) = if together {
            ("a co-scheduled", "co-scheduled")
        } else {
            ("an interleaved", "interleaved")
        };
        let problem = |message: String, help: &str| (message, Some(help.to_string()));
        let mut problems = Vec::new();
        if configs.len() < 2 {
            problems.push(problem(
                format!(
                    "{a_design} design measures configurations against each other in the same seconds, and this file has {}",
                    configs.len()
                ),
                "add a [matrix] axis or [[configs]], or remove design",
            ));
        }
        if let Some(c) = configs
            .iter()
            .find(|c| c.settings.workload == Workload::Script)
        {
            problems.push(problem(
                format!(
                    "configuration {:?} is a script workload: only HTTP servers can be {name}",
                    c.label
                ),
                "use design = \"blocks\" for scripts",
            ));
        }
        let fixed: Vec<u16> = configs
            .iter()
            .map(|c| c.settings.port)
            .filter(|&p| p != 0)
            .collect();
        if !fixed.is_empty() {
            problems.push(problem(
                format!("port = {} is fixed, and the servers of {a_design} block run at the same time, each on a port of its own", fixed[0]),
                "remove port: rubyrace picks a free port for every server",
            ));
        }
        if written.contains("requests") {
            problems.push(problem(
                format!("requests does not apply to {a_design} design: each configuration is measured for rounds × slice"),
                "remove it, and set duration (or slice and rounds)",
            ));
        }
        if written.contains("duration") && rounds.is_some() {
            problems.push(problem(
                format!("duration and rounds are both set: {a_design} design measures each configuration for rounds × slice, so give either"),
                "remove rounds (rounds then come from the duration), or remove duration",
            ));
        }
        let durations = distinct_durations(configs);
        if durations.len() > 1 && rounds.is_none() {
            problems.push(problem(
                format!("the configurations' durations differ ({}), and {a_design} design measures every configuration of a block for the same rounds × slice", durations.iter().map(|d| humantime::format_duration(*d).to_string()).collect::<Vec<_>>().join(", ")),
                "give every configuration the same duration, or set rounds",
            ));
        }
        if repeat_noisy > 0 {
            problems.push(problem(
                format!("repeat_noisy applies to the blocks design: {a_design} block's trials share their seconds and their noise"),
                "remove repeat_noisy; the noisy-trials warning still names the trials of a block measured in noise",
            ));
        }
        let duration = durations.first().copied().unwrap_or_default();
        let (slice, rounds) =
            crate::design::slicing_for(duration, slice.map(|s| s.0), rounds.map(|r| r.0));
        if slice < crate::design::MIN_SLICE {
            problems.push(problem(
                format!(
                    "duration = \"{}\" is shorter than the shortest slice, {}",
                    humantime::format_duration(duration),
                    humantime::format_duration(crate::design::MIN_SLICE)
                ),
                "measure for longer, or use design = \"blocks\"",
            ));
        }
        for (message, help) in problems {
            self.error(&span, "design", message, help);
        }
        let design = if together {
            crate::design::Design::CoScheduled { slice, rounds }
        } else {
            crate::design::Design::Interleaved { slice, rounds }
        };
        let note = by_default.then(|| {
            format!(
                "design = \"interleaved\" ({rounds} round{} of {} slices)",
                if rounds == 1 { "" } else { "s" },
                humantime::format_duration(slice)
            )
        });
        (design, note)
    }

    /// `slice` and `rounds` written where the design is blocks: an error each, saying why
    /// the design is blocks (`why`).
    fn refuse_slicing_keys(
        &mut self,
        slice: &Option<(Duration, Span)>,
        rounds: &Option<(u32, Span)>,
        why: &str,
    ) {
        for (key, span) in [
            ("slice", slice.as_ref().map(|s| &s.1)),
            ("rounds", rounds.as_ref().map(|r| &r.1)),
        ] {
            if let Some(span) = span {
                self.error(
                    span,
                    key,
                    format!(
                        "{key} applies to design = \"interleaved\" or \"co-scheduled\", and {why}"
                    ),
                    Some("add design = \"interleaved\", or remove it".into()),
                );
            }
        }
    }

    /// `quiet = true`, or `quiet = { other = "10%", steal = "1%", max_wait = "60s",
    /// window = "500ms" }` (any of them; the rest default).
    fn quiet_rule(&mut self, item: &Item) -> Option<crate::conditions::QuietRule> {
        const KEYS: [&str; 4] = ["other", "steal", "max_wait", "window"];
        let mut rule = crate::conditions::QuietRule::default();
        if let Some(on) = item.as_bool() {
            return on.then_some(rule);
        }
        let Some(table) = item.as_table_like() else {
            let found = describe(item);
            self.error(&item.span(), "quiet", format!("expected true, false or a table such as {{ other = \"10%\", max_wait = \"60s\" }}, found {found}"), None);
            return None;
        };
        for (sub, value) in table.iter() {
            let key = format!("quiet.{sub}");
            match sub {
                "other" | "steal" => match value.as_str().map(parse_percent) {
                    Some(Some(x)) if x >= 0.0 => {
                        if sub == "other" {
                            rule.other_percent = x
                        } else {
                            rule.steal_percent = x
                        }
                    }
                    _ => self.error(
                        &value.span(),
                        &key,
                        format!(
                            "expected a percentage of one CPU such as \"10%\", found {}",
                            describe(value)
                        ),
                        None,
                    ),
                },
                "max_wait" | "window" => {
                    if let Some(J::String(text)) = self.check_value(&key, Kind::Duration, value) {
                        let d = humantime::parse_duration(&text).unwrap_or_default();
                        if sub == "window" && d < Duration::from_millis(100) {
                            self.error(&value.span(), &key, format!("expected at least 100ms, found {text:?}: /proc/stat counts 10 ms ticks"), None);
                        } else if sub == "window" {
                            rule.window = d
                        } else {
                            rule.max_wait = d
                        }
                    }
                }
                other => self.unknown_key(
                    &table.key(other).and_then(|k| k.span()).or(value.span()),
                    &key,
                    other,
                    &KEYS,
                ),
            }
        }
        Some(rule)
    }

    /// `cpus = "split"`, `"none"`, or `{ server = "1-3", load = "0" }`, checked against the
    /// CPUs rubyrace may use here.
    fn cpu_split(&mut self, item: &Item) -> Option<sys::cpus::CpuSplit> {
        use sys::cpus::{CpuSet, CpuSplit};
        let available = match CpuSet::of_this_process() {
            Ok(a) => a,
            Err(e) => {
                self.error(
                    &item.span(),
                    "cpus",
                    format!("cannot read the CPUs rubyrace may use: {e}"),
                    None,
                );
                return None;
            }
        };
        let split = if let Some(word) = item.as_str() {
            match word {
                "none" => return None,
                "split" => CpuSplit::split(&available),
                other => {
                    self.error(&item.span(), "cpus", format!("expected \"split\", \"none\" or a table {{ server = \"1\", load = \"0\" }}, found {other:?}"), None);
                    return None;
                }
            }
        } else if let Some(table) = item.as_table_like() {
            let mut sets = [None, None];
            for (sub, value) in table.iter() {
                let key = format!("cpus.{sub}");
                let slot = match sub {
                    "server" => 0,
                    "load" => 1,
                    other => {
                        self.unknown_key(&value.span(), &key, other, &["server", "load"]);
                        continue;
                    }
                };
                match value.as_str().map(CpuSet::parse) {
                    Some(Ok(set)) => sets[slot] = Some(set),
                    Some(Err(e)) => self.error(
                        &value.span(),
                        &key,
                        format!("expected a CPU list such as \"1-3\" or \"0,2\": {e}"),
                        None,
                    ),
                    None => self.error(
                        &value.span(),
                        &key,
                        format!(
                            "expected a CPU list such as \"1-3\", found {}",
                            describe(value)
                        ),
                        None,
                    ),
                }
            }
            match sets {
                [Some(server), Some(load)] => Ok(CpuSplit { server, load }),
                [None, None] if !self.errors.is_empty() => return None,
                _ => Err("both server and load must be given".to_string()),
            }
        } else {
            Err(format!("expected \"split\", \"none\" or a table {{ server = \"1\", load = \"0\" }}, found {}", describe(item)))
        };
        match split.and_then(|s| s.check(&available).map(|()| s)) {
            Ok(s) => Some(s),
            Err(e) => {
                self.error(&item.span(), "cpus", e, None);
                None
            }
        }
    }

    /// Checks a value against a kind; returns its normalized JSON form.
    fn check_value(&mut self, key: &str, kind: Kind, item: &Item) -> Option<J> {
        let span = item.span();
        let found = describe(item);
        let wrong = |p: &mut Self, detail: Option<String>| {
            let message = match detail {
                Some(d) => format!("expected {}, {d}", kind.expected()),
                None => format!("expected {}, found {found}", kind.expected()),
            };
            p.error(&span, key, message, None);
            None
        };
        if let Kind::StrMap = kind {
            // Inline (`env = { A = "1" }`) or a sub-table (`[settings.env]`).
            return match item.as_table_like() {
                Some(t) => Some(self.string_map(key, t)),
                None => wrong(self, None),
            };
        }
        let value = match item.as_value() {
            Some(v) => v,
            None => return wrong(self, None),
        };
        match kind {
            Kind::Str => value
                .as_str()
                .map(|s| json!(s))
                .or_else(|| wrong(self, None)),
            Kind::Int { min, max } => match value.as_integer() {
                Some(i) if (min..=max).contains(&i) => Some(json!(i)),
                Some(i) => wrong(self, Some(format!("found {i}"))),
                None => wrong(self, None),
            },
            Kind::Float { min, max } => {
                let f = value
                    .as_float()
                    .or_else(|| value.as_integer().map(|i| i as f64));
                match f {
                    Some(f) if f >= min && f <= max => Some(json!(f)),
                    Some(f) => wrong(self, Some(format!("found {f}"))),
                    None => wrong(self, None),
                }
            }
            Kind::Duration => match value.as_str() {
                // humantime would say "expected number at 0".
                Some(s) if s.trim_start().starts_with('-') => {
                    self.error(
                        &span,
                        key,
                        format!(
                            "expected {}, found {s:?}: a duration cannot be negative",
                            kind.expected()
                        ),
                        Some("write a positive duration, e.g. \"5s\"".into()),
                    );
                    None
                }
                Some(s) => match humantime::parse_duration(s) {
                    Ok(_) => Some(json!(s)),
                    Err(e) => wrong(self, Some(format!("found {s:?} ({e})"))),
                },
                None => wrong(self, None),
            },
            Kind::StrList => match value.as_array() {
                Some(a) if a.iter().all(|v| v.as_str().is_some()) => Some(J::Array(
                    a.iter().map(|v| json!(v.as_str().unwrap())).collect(),
                )),
                _ => wrong(self, None),
            },
            Kind::OneOf(options) => match value.as_str() {
                Some(s) if options.contains(&s) => Some(json!(s)),
                Some(s) => {
                    let help = did_you_mean(s, options).map(|k| format!("did you mean \"{k}\"?"));
                    self.error(
                        &span,
                        key,
                        format!("expected {}, found {s:?}", kind.expected()),
                        help,
                    );
                    None
                }
                None => wrong(self, None),
            },
            Kind::StrMap => unreachable!("handled above"),
        }
    }

    /// A table of string values (environment variables); non-strings are reported.
    fn string_map(&mut self, key: &str, t: &dyn TableLike) -> J {
        let mut map = serde_json::Map::new();
        for (k, v) in t.iter() {
            match v.as_str() {
                Some(s) => {
                    map.insert(k.to_string(), json!(s));
                }
                None => {
                    let key = format!("{key}.{k}");
                    self.error(
                        &v.span(),
                        &key,
                        format!("expected a string, found {}", describe(v)),
                        Some("environment values are strings: write \"1\", not 1".into()),
                    );
                }
            }
        }
        J::Object(map)
    }

    /// Reads a table of settings (`[settings]`, a `[[configs]]` entry, an `[[exclude]]`
    /// entry). `extra` names keys allowed besides the settings (e.g. `label`).
    fn settings_layer(
        &mut self,
        table: &dyn TableLike,
        prefix: &str,
        extra: &[&str],
    ) -> (Layer, BTreeMap<String, Placed>) {
        let mut layer = Layer::new();
        let mut others = BTreeMap::new();
        for (name, item) in table.iter() {
            let key_span = table.get_key_value(name).and_then(|(k, _)| k.span());
            let dotted = format!("{prefix}.{name}");
            if extra.contains(&name) {
                if let Some(s) = item.as_str() {
                    others.insert(
                        name.to_string(),
                        Placed {
                            value: json!(s),
                            span: item.span(),
                            key: dotted,
                            items: Vec::new(),
                        },
                    );
                } else {
                    self.rejected.insert(name.to_string());
                    let found = describe(item);
                    self.error(
                        &item.span(),
                        &dotted,
                        format!("expected a string, found {found}"),
                        None,
                    );
                }
                continue;
            }
            let Some(kind) = setting_kind(name) else {
                let mut known = setting_names();
                known.extend_from_slice(extra);
                self.unknown_key(&key_span, &dotted, name, &known);
                continue;
            };
            let errors_before = self.errors.len();
            let checked = self.check_value(&dotted, kind, item);
            if self.errors.len() > errors_before {
                self.rejected.insert(name.to_string());
            }
            if let Some(value) = checked {
                layer.insert(
                    name.to_string(),
                    Placed {
                        value,
                        span: item.span(),
                        key: dotted,
                        items: element_spans(item.as_value()),
                    },
                );
            }
        }
        (layer, others)
    }

    /// Reads `[matrix]`: each key is a setting and its value an array of alternatives.
    fn matrix(&mut self, table: &dyn TableLike) -> Vec<Axis> {
        let mut axes = Vec::new();
        for (name, item) in table.iter() {
            let key_span = table.get_key_value(name).and_then(|(k, _)| k.span());
            let dotted = format!("matrix.{name}");
            let Some(kind) = setting_kind(name) else {
                self.unknown_key(&key_span, &dotted, name, &setting_names());
                continue;
            };
            // `ruby = "all"`: every Ruby of [rubies], or of the machine; the values are
            // filled in once the Rubies are known (see `expand_ruby_all`).
            if name == "ruby" && item.as_str() == Some(RUBY_ALL) {
                self.ruby_all = Some(item.span());
                axes.push(Axis {
                    name: name.to_string(),
                    values: Vec::new(),
                    span: key_span,
                    duplicate_labels: false,
                });
                continue;
            }
            let Some(array) = item.as_array() else {
                let help = match item.as_str() {
                    Some(s) if name == "ruby" && did_you_mean(s, &[RUBY_ALL]).is_some() => format!(
                        "did you mean ruby = \"{RUBY_ALL}\" (every Ruby of [rubies], or of this \
                         machine)? Otherwise list the Rubies: ruby = [a, b]"
                    ),
                    _ if name == "ruby" => "a matrix axis lists the values to compare, e.g. \
                         ruby = [a, b], or ruby = \"all\" for every Ruby; a single value \
                         belongs in [settings]"
                        .to_string(),
                    _ => format!(
                        "a matrix axis lists the values to compare, e.g. {name} = [a, b]; a \
                         single value belongs in [settings]"
                    ),
                };
                self.error(
                    &item.span(),
                    &dotted,
                    format!(
                        "expected an array of alternatives, found {}",
                        describe(item)
                    ),
                    Some(help),
                );
                self.rejected.insert(name.to_string());
                continue;
            };
            if array.is_empty() {
                self.error(
                    &item.span(),
                    &dotted,
                    "a matrix axis needs at least one value",
                    None,
                );
                self.rejected.insert(name.to_string());
                continue;
            }
            let mut values = Vec::new();
            for (i, v) in array.iter().enumerate() {
                let element_key = format!("{dotted}[{i}]");
                // `{ label = "...", value = ... }` names a value.
                let (inner, label) = match labelled(v) {
                    Some((inner, label)) => (inner, Some(label)),
                    None => (v.clone(), None),
                };
                let items = element_spans(Some(&inner));
                let inner_item = Item::Value(inner);
                let errors_before = self.errors.len();
                let checked = self.check_value(&element_key, kind, &inner_item);
                if self.errors.len() > errors_before {
                    self.rejected.insert(name.to_string());
                }
                if let Some(checked) = checked {
                    let chosen = label.is_some();
                    let label = label.unwrap_or_else(|| value_label(name, &checked));
                    // Every value's label is recorded with its configurations (`axes`),
                    // even on an axis of one value.
                    self.check_label(&v.span(), &element_key, &label);
                    values.push(AxisValue {
                        chosen,
                        placed: Placed {
                            value: checked,
                            span: v.span(),
                            key: element_key,
                            items,
                        },
                        label,
                    });
                }
            }
            let mut seen: Vec<&str> = Vec::new();
            let mut duplicate_labels = false;
            for v in &values {
                if seen.contains(&v.label.as_str()) {
                    let (span, key) = (v.placed.span.clone(), dotted.clone());
                    self.error(
                        &span,
                        &key,
                        format!("two values of this axis have the label {:?}", v.label),
                        Some(
                            "give each value its own label: { label = \"...\", value = ... }"
                                .into(),
                        ),
                    );
                    duplicate_labels = true;
                    break;
                }
                seen.push(&v.label);
            }
            axes.push(Axis {
                name: name.to_string(),
                values,
                span: key_span,
                duplicate_labels,
            });
        }
        axes
    }

    /// Reads `[rubies]`.
    fn rubies(
        &mut self,
        table: &dyn TableLike,
    ) -> BTreeMap<String, (RubyDef, Option<Range<usize>>)> {
        let mut rubies = BTreeMap::new();
        for (name, item) in table.iter() {
            let dotted = format!("rubies.{name}");
            let span = item.span();
            let (argv, env, gemfile) = if let Some(program) = item.as_str() {
                (vec![program.to_string()], BTreeMap::new(), None)
            } else if let Some(t) = item.as_table_like() {
                let mut argv = None;
                let mut env = BTreeMap::new();
                let mut gemfile = None;
                for (k, v) in t.iter() {
                    let key = format!("{dotted}.{k}");
                    let key_span = t.get_key_value(k).and_then(|(kk, _)| kk.span());
                    match k {
                        "path" => match v.as_str() {
                            Some(p) => argv = Some(vec![p.to_string()]),
                            None => {
                                let found = describe(v);
                                self.error(
                                    &v.span(),
                                    &key,
                                    format!("expected a string, found {found}"),
                                    None,
                                )
                            }
                        },
                        "argv" => {
                            if let Some(J::Array(a)) = self.check_value(&key, Kind::StrList, v) {
                                if a.is_empty() {
                                    self.error(
                                        &v.span(),
                                        &key,
                                        "expected at least the Ruby executable",
                                        None,
                                    );
                                } else {
                                    argv = Some(
                                        a.iter().map(|s| s.as_str().unwrap().to_string()).collect(),
                                    );
                                }
                            }
                        }
                        "env" => {
                            if let Some(J::Object(m)) = self.check_value(&key, Kind::StrMap, v) {
                                env = m
                                    .into_iter()
                                    .map(|(k, v)| (k, v.as_str().unwrap().to_string()))
                                    .collect();
                            }
                        }
                        "gemfile" => match v.as_str() {
                            Some(g) => {
                                let path = self.resolve_path(g);
                                if !path.is_file() {
                                    self.error(
                                        &v.span(),
                                        &key,
                                        format!("no such Gemfile: {}", path.display()),
                                        None,
                                    );
                                }
                                gemfile = Some(path);
                            }
                            None => {
                                let found = describe(v);
                                self.error(
                                    &v.span(),
                                    &key,
                                    format!("expected a string, found {found}"),
                                    None,
                                )
                            }
                        },
                        other => self.unknown_key(
                            &key_span,
                            &key,
                            other,
                            &["path", "argv", "env", "gemfile"],
                        ),
                    }
                }
                match argv {
                    Some(a) => (a, env, gemfile),
                    None => {
                        // Not said again when `path` or `argv` was there but wrong.
                        if t.get("path").is_none() && t.get("argv").is_none() {
                            self.error(
                                &span,
                                &dotted,
                                "expected `path` (the Ruby executable) or `argv` (executable and options)",
                                Some(format!("e.g. {name} = {{ path = \"/usr/bin/ruby\" }}")),
                            );
                        }
                        self.failed_rubies.push(name.to_string());
                        continue;
                    }
                }
            } else {
                let found = describe(item);
                self.error(
                    &span,
                    &dotted,
                    format!(
                        "expected a path string or a table with `path` or `argv`, found {found}"
                    ),
                    None,
                );
                self.failed_rubies.push(name.to_string());
                continue;
            };
            // Resolve the executable now: a missing Ruby is an error before anything runs.
            let mut argv = argv;
            if argv[0].contains('/') && !argv[0].starts_with('~') {
                argv[0] = self.resolve_path(&argv[0]).display().to_string();
            }
            match rubies::discovery::resolve_executable(&argv[0]) {
                Ok(path) => argv[0] = path.display().to_string(),
                Err(e) => {
                    self.error(
                        &span,
                        &dotted,
                        format!("{e:#}"),
                        Some("`rubyrace rubies` lists the Rubies found on this machine".into()),
                    );
                    self.failed_rubies.push(name.to_string());
                    continue;
                }
            }
            rubies.insert(name.to_string(), (RubyDef { argv, env, gemfile }, span));
        }
        rubies
    }

    /// What a Ruby with these options and environment can do, asked once per experiment.
    fn capabilities(
        &mut self,
        argv: &[String],
        env: &[(String, String)],
    ) -> Result<RubyCapabilities, String> {
        self.capabilities
            .entry((argv.to_vec(), env.to_vec()))
            .or_insert_with(|| {
                rubies::discovery::ruby_capabilities(argv, env).map_err(|e| format!("{e:#}"))
            })
            .clone()
    }

    /// Whether the Gemfile in `env` (BUNDLE_GEMFILE) is satisfied for this Ruby.
    fn bundle_check(&mut self, argv: &[String], env: &[(String, String)]) -> Result<(), String> {
        self.bundles
            .entry((argv.to_vec(), env.to_vec()))
            .or_insert_with(|| {
                rubies::discovery::bundle_check(argv, env).map_err(|e| format!("{e:#}"))
            })
            .clone()
    }

    fn resolve_path(&self, p: &str) -> PathBuf {
        let expanded = match p.strip_prefix("~/") {
            Some(rest) => std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(rest))
                .unwrap_or_else(|| PathBuf::from(p)),
            None => PathBuf::from(p),
        };
        if expanded.is_absolute() {
            expanded
        } else {
            self.base_dir.join(expanded)
        }
    }
}

/// The 1-based line and column (in characters) of a byte offset of `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// The first control character of a label (a newline, a tab, an escape...), which would
/// break progress lines, tables and Markdown.
fn control_character(label: &str) -> Option<char> {
    label.chars().find(|c| c.is_control())
}

/// `{ label = "...", value = ... }`: a matrix value with a chosen label.
fn labelled(v: &Value) -> Option<(Value, String)> {
    let t = v.as_inline_table()?;
    if t.len() != 2 {
        return None;
    }
    let label = t.get("label")?.as_str()?.to_string();
    let value = t.get("value")?.clone();
    Some((value, label))
}

/// Where each element of an array value is written (empty for anything else).
fn element_spans(value: Option<&Value>) -> Vec<Span> {
    value
        .and_then(Value::as_array)
        .map(|a| a.iter().map(Value::span).collect())
        .unwrap_or_default()
}

/// The default label of a matrix value, e.g. `--yjit` or `RUBY_YJIT_ENABLE=1`.
fn value_label(key: &str, value: &J) -> String {
    match value {
        J::String(s) => s.clone(),
        J::Array(a) if a.is_empty() => "none".into(),
        J::Array(a) => a
            .iter()
            .map(|v| v.as_str().unwrap_or_default())
            .collect::<Vec<_>>()
            .join(" "),
        J::Object(m) if m.is_empty() => "none".into(),
        J::Object(m) => m
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
            .collect::<Vec<_>>()
            .join(","),
        other if key.is_empty() => other.to_string(),
        other => other.to_string(),
    }
}

fn describe(item: &Item) -> String {
    match item {
        Item::None => "nothing".into(),
        Item::Value(v) => describe_value(v),
        Item::Table(_) => "a table".into(),
        Item::ArrayOfTables(_) => "an array of tables".into(),
    }
}

fn describe_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("the string {:?}", s.value()),
        Value::Integer(i) => format!("the integer {}", i.value()),
        Value::Float(f) => format!("the number {}", f.value()),
        Value::Boolean(b) => format!("the boolean {}", b.value()),
        Value::Datetime(_) => "a date-time".into(),
        Value::Array(_) => "an array".into(),
        Value::InlineTable(_) => "a table".into(),
    }
}

/// The tables of an array of tables, written either as `[[name]]` or as an inline array.
fn table_list(item: &Item) -> Option<Vec<(&dyn TableLike, Span)>> {
    match item {
        Item::ArrayOfTables(a) => Some(a.iter().map(|t| (t as &dyn TableLike, t.span())).collect()),
        Item::Value(Value::Array(a)) => a
            .iter()
            .map(|v| v.as_inline_table().map(|t| (t as &dyn TableLike, v.span())))
            .collect(),
        _ => None,
    }
}

/// Merges layers: later layers replace a key, except `env`, whose variables are merged.
fn merge(layers: &[&Layer]) -> Layer {
    let mut merged = Layer::new();
    for layer in layers {
        for (k, v) in layer.iter() {
            if k == "env" {
                if let Some(existing) = merged.get_mut("env") {
                    if let (J::Object(into), J::Object(from)) = (&mut existing.value, &v.value) {
                        for (name, value) in from {
                            into.insert(name.clone(), value.clone());
                        }
                        continue;
                    }
                }
            }
            merged.insert(k.clone(), v.clone());
        }
    }
    merged
}

/// Whether every key of an exclusion matches the configuration (`env` as a subset).
fn excluded_by(layer: &Layer, exclusion: &Layer) -> bool {
    exclusion.iter().all(|(k, want)| {
        let have = layer.get(k).map(|p| &p.value);
        match (k.as_str(), have, &want.value) {
            ("env", Some(J::Object(have)), J::Object(want)) => {
                want.iter().all(|(name, v)| have.get(name) == Some(v))
            }
            (_, Some(have), want) => have == want,
            (_, None, _) => false,
        }
    })
}

/// The `[matrix]` value of `ruby` that means every Ruby.
pub const RUBY_ALL: &str = "all";

/// The Rubies `ruby = "all"` stands for, in order: those of `[rubies]` in file order, or,
/// without `[rubies]`, those `discover` finds that run (one per canonical executable, in
/// discovery order: version managers, PATH, then /usr/bin), which then become the
/// experiment's Rubies. `declared` is the file's `[rubies]` table, if it has one.
fn expand_ruby_all(
    p: &mut Parser,
    span: &Span,
    declared: Option<&dyn TableLike>,
    rubies: &mut BTreeMap<String, (RubyDef, Option<Range<usize>>)>,
) -> Vec<AxisValue> {
    let names: Vec<String> = match declared {
        // Rubies that failed to resolve are reported already and left out.
        Some(t) => {
            let names: Vec<String> = t
                .iter()
                .map(|(k, _)| k.to_string())
                .filter(|k| rubies.contains_key(k))
                .collect();
            // Each name is a label part (`ruby=NAME`).
            for name in &names {
                let key_span = t.get_key_value(name).and_then(|(k, _)| k.span());
                p.check_label(&key_span, &format!("rubies.{name}"), name);
            }
            names
        }
        None => {
            rubies.clear();
            let mut seen = std::collections::HashSet::new();
            let mut names = Vec::new();
            for r in (p.discover)() {
                // Those that do not run (`rubyrace rubies` says why) are left out.
                if r.error.is_some() || r.description.is_none() {
                    continue;
                }
                let canonical = std::fs::canonicalize(&r.path).unwrap_or_else(|_| r.path.clone());
                if !seen.insert(canonical) || rubies.contains_key(&r.name) {
                    continue;
                }
                p.check_label(span, "matrix.ruby", &r.name);
                let def = RubyDef {
                    argv: vec![r.path.display().to_string()],
                    env: BTreeMap::new(),
                    gemfile: None,
                };
                rubies.insert(r.name.clone(), (def, None));
                names.push(r.name);
            }
            if names.is_empty() {
                p.error(
                    span,
                    "matrix.ruby",
                    "ruby = \"all\": no Ruby that runs was found on this machine",
                    Some(
                        "`rubyrace rubies` lists what was found; or name the Rubies in [rubies]"
                            .into(),
                    ),
                );
                p.rubies_reported = true;
            }
            names
        }
    };
    names
        .into_iter()
        .map(|name| AxisValue {
            placed: Placed {
                value: json!(name),
                span: span.clone(),
                key: "matrix.ruby".into(),
                items: Vec::new(),
            },
            label: name,
            chosen: false,
        })
        .collect()
}

/// An OS error's message without its number: "No such file or directory".
fn os_message(e: &std::io::Error) -> String {
    let message = e.to_string();
    match message.rfind(" (os error ") {
        Some(i) if message.ends_with(')') => message[..i].to_string(),
        _ => message,
    }
}

/// The `design` key's values.
#[derive(Clone, Copy, PartialEq, Eq)]
enum DesignName {
    Blocks,
    Interleaved,
    CoScheduled,
}

/// Why configurations whose file writes no `design` are measured in blocks rather than
/// interleaved; None when they can be interleaved: two to
/// [`crate::design::MAX_DEFAULT_INTERLEAVED`] HTTP configurations, each on a free port,
/// measured for one and the same duration (not a number of requests), without
/// `repeat_noisy`.
fn why_blocks_by_default(
    configs: &[Config],
    written: &std::collections::BTreeSet<&str>,
    repeat_noisy: u32,
) -> Option<String> {
    let n = configs.len();
    if n < 2 {
        return Some("one configuration".into());
    }
    if configs
        .iter()
        .any(|c| c.settings.workload == Workload::Script)
    {
        return Some("script workloads".into());
    }
    if n > crate::design::MAX_DEFAULT_INTERLEAVED {
        return Some(format!(
            "{n} configurations: an interleaved block keeps every server in memory at once, and more than {} are not interleaved unless design says so",
            crate::design::MAX_DEFAULT_INTERLEAVED
        ));
    }
    if let Some(port) = configs.iter().map(|c| c.settings.port).find(|&p| p != 0) {
        return Some(format!("port = {port} is fixed"));
    }
    if written.contains("requests") {
        return Some("requests is set".into());
    }
    if repeat_noisy > 0 {
        return Some("repeat_noisy is set".into());
    }
    let durations = distinct_durations(configs);
    if durations.len() > 1 {
        return Some("the configurations' durations differ".into());
    }
    if durations[0] < crate::design::MIN_SLICE {
        return Some(format!(
            "duration is shorter than the shortest slice, {}",
            humantime::format_duration(crate::design::MIN_SLICE)
        ));
    }
    None
}

/// The configurations' measured durations, each once, in order of first appearance.
fn distinct_durations(configs: &[Config]) -> Vec<Duration> {
    let mut durations: Vec<Duration> = Vec::new();
    for d in configs.iter().map(|c| c.settings.load.duration) {
        if !durations.contains(&d) {
            durations.push(d);
        }
    }
    durations
}

/// What `defaults_note` names when the file leaves it out: what runs, and for how long.
const NOTED_SETTINGS: [&str; 7] = [
    "app",
    "server",
    "processes",
    "threads",
    "warmup",
    "duration",
    "runs",
];

impl Experiment {
    /// Reads and checks an experiment file.
    pub fn load(file: &Path) -> Result<Experiment, ExperimentErrors> {
        let whole_file = |position, message: String, help: Option<&str>| {
            ExperimentErrors(vec![ExperimentError {
                file: file.to_path_buf(),
                position,
                key: String::new(),
                message,
                help: help.map(str::to_string),
            }])
        };
        let bytes = std::fs::read(file).map_err(|e| {
            whole_file(
                None,
                format!("cannot read {}: {}", file.display(), os_message(&e)),
                None,
            )
        })?;
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => {
                // Where the first invalid byte is: everything before it is valid.
                let offset = e.utf8_error().valid_up_to();
                let bytes = e.as_bytes();
                let valid = std::str::from_utf8(&bytes[..offset]).unwrap_or_default();
                return Err(whole_file(
                    Some(line_column(valid, offset)),
                    format!(
                        "the file is not valid UTF-8: invalid byte 0x{:02X} at byte offset {offset}",
                        bytes[offset]
                    ),
                    Some("save it as UTF-8"),
                ));
            }
        };
        Experiment::parse(file, &text)
    }

    /// Checks an experiment given as text; `file` names it in messages and anchors
    /// relative paths (apps, URL mixes, scripts).
    pub fn parse(file: &Path, text: &str) -> Result<Experiment, ExperimentErrors> {
        Experiment::parse_with(file, text, &rubies::discovery::discover)
    }

    /// What the file leaves to defaults that decide what runs and for how long, as one
    /// line for `rubyrace run` to print before the plan; none when it sets all of them.
    pub fn defaults_note(&self) -> Option<String> {
        (!self.defaults.is_empty()).then(|| {
            format!(
                "{} does not set these, so their defaults apply: {}",
                self.file.display(),
                self.defaults.join(", ")
            )
        })
    }

    /// [`Experiment::parse`] with the machine's Rubies found by `discover` (for
    /// `ruby = "all"` without `[rubies]`), so tests need not depend on the machine.
    fn parse_with(
        file: &Path,
        text: &str,
        discover: &dyn Fn() -> Vec<DiscoveredRuby>,
    ) -> Result<Experiment, ExperimentErrors> {
        let base_dir = file
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let base_dir = std::fs::canonicalize(&base_dir).unwrap_or(base_dir);
        let mut p = Parser {
            file,
            text,
            base_dir,
            errors: Vec::new(),
            capabilities: HashMap::new(),
            bundles: HashMap::new(),
            ruby_all: None,
            rejected: Default::default(),
            failed_rubies: Vec::new(),
            rubies_reported: false,
            rubies_span: None,
            discover,
        };
        let doc = match ImDocument::parse(text.to_string()) {
            Ok(doc) => doc,
            Err(e) => {
                let span = e.span();
                let message = e.message().trim().to_string();
                p.error(&span, "", format!("invalid TOML: {message}"), None);
                return Err(ExperimentErrors(p.errors));
            }
        };
        let root = doc.as_table();

        let mut name = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "experiment".into());
        let mut description = None;
        let mut seed = 1u64;
        let mut batches = 5u32;
        let mut batches_written = false;
        // precision, metric, max_batches, max_duration: value and where it was written.
        let mut precision: Option<(f64, Span)> = None;
        let mut precision_metric: Option<(crate::precision::PrecisionMetric, Span)> = None;
        let mut max_batches: Option<(u32, Span)> = None;
        let mut max_duration: Option<(Duration, Span)> = None;
        let mut order = Order::Random;
        // design, slice, rounds: value and where it was written.
        let mut written_design: Option<(DesignName, Span)> = None;
        let mut slice: Option<(Duration, Span)> = None;
        let mut rounds: Option<(u32, Span)> = None;
        let mut conditions = crate::conditions::TrialConditions::default();
        let mut record_env = Vec::new();
        let mut rubies = BTreeMap::new();
        let mut base = Layer::new();
        let mut axes: Vec<Axis> = Vec::new();
        let mut configs: Vec<ConfigEntry> = Vec::new();
        // Each exclusion, where it is, and whether one of its values was rejected.
        let mut exclusions: Vec<(Layer, Span, bool)> = Vec::new();

        for (key, item) in root.iter() {
            let key_span = root.key(key).and_then(|k| k.span());
            let span = item.span();
            match key {
                "name" | "description" => match item.as_str() {
                    Some(s) if key == "name" => {
                        p.check_name(&span, s);
                        name = s.to_string();
                    }
                    Some(s) => description = Some(s.to_string()),
                    None => {
                        let found = describe(item);
                        p.error(&span, key, format!("expected a string, found {found}"), None)
                    }
                },
                "seed" => {
                    if let Some(J::Number(n)) = p.check_value(key, Kind::Int { min: 0, max: i64::MAX }, item) {
                        seed = n.as_u64().unwrap_or(1);
                    }
                }
                "batches" => {
                    batches_written = true;
                    if let Some(J::Number(n)) = p.check_value(key, Kind::Int { min: 1, max: 100_000 }, item) {
                        batches = n.as_u64().unwrap_or(1) as u32;
                    }
                }
                "precision" => match item.as_str().map(parse_percent) {
                    Some(Some(x)) if x > 0.0 && x < 100.0 => precision = Some((x / 100.0, span.clone())),
                    _ => p.error(
                        &span,
                        key,
                        format!("expected a percentage between 0% and 100% such as \"1%\", found {}", describe(item)),
                        Some("the half-width every comparison's interval must reach, e.g. precision = \"1%\"".into()),
                    ),
                },
                "metric" => {
                    if let Some(J::String(name)) = p.check_value(key, Kind::OneOf(&crate::precision::PrecisionMetric::NAMES), item) {
                        precision_metric = crate::precision::PrecisionMetric::parse(&name).map(|m| (m, span.clone()));
                    }
                }
                "max_batches" => {
                    if let Some(J::Number(n)) = p.check_value(key, Kind::Int { min: 1, max: 100_000 }, item) {
                        max_batches = Some((n.as_u64().unwrap_or(1) as u32, span.clone()));
                    }
                }
                "max_duration" => {
                    if let Some(J::String(text)) = p.check_value(key, Kind::Duration, item) {
                        if let Ok(d) = humantime::parse_duration(&text) {
                            max_duration = Some((d, span.clone()));
                        }
                    }
                }
                "quiet" => conditions.quiet = p.quiet_rule(item),
                "cpus" => conditions.cpus = p.cpu_split(item),
                "repeat_noisy" => {
                    if let Some(J::Number(n)) = p.check_value(key, Kind::Int { min: 0, max: 10 }, item) {
                        conditions.repeat_noisy = n.as_u64().unwrap_or(0) as u32;
                    }
                }
                "design" => {
                    if let Some(J::String(d)) = p.check_value(key, Kind::OneOf(&["blocks", "interleaved", "co-scheduled"]), item) {
                        let name = match d.as_str() {
                            "blocks" => DesignName::Blocks,
                            "interleaved" => DesignName::Interleaved,
                            _ => DesignName::CoScheduled,
                        };
                        written_design = Some((name, span.clone()));
                    }
                }
                "slice" => {
                    if let Some(J::String(text)) = p.check_value(key, Kind::Duration, item) {
                        match humantime::parse_duration(&text) {
                            Ok(d) if d < crate::design::MIN_SLICE => p.error(
                                &span,
                                key,
                                format!("a slice of {text} is shorter than {}: it would measure mostly connection set-up", humantime::format_duration(crate::design::MIN_SLICE)),
                                Some("slices of 250ms to 2s suit most servers, e.g. slice = \"1s\"".into()),
                            ),
                            Ok(d) => slice = Some((d, span.clone())),
                            Err(_) => {}
                        }
                    }
                }
                "rounds" => {
                    if let Some(J::Number(n)) = p.check_value(key, Kind::Int { min: 1, max: 10_000 }, item) {
                        rounds = Some((n.as_u64().unwrap_or(1) as u32, span.clone()));
                    }
                }
                "order" => match p.check_value(key, Kind::OneOf(&["random", "sequential"]), item) {
                    Some(J::String(s)) if s == "sequential" => order = Order::Sequential,
                    _ => {}
                },
                "record_env" => {
                    if let Some(J::Array(a)) = p.check_value(key, Kind::StrList, item) {
                        record_env = a.iter().map(|v| v.as_str().unwrap().to_string()).collect();
                    }
                }
                "rubies" => {
                    p.rubies_span = span.clone();
                    match item.as_table_like() {
                        Some(t) if t.is_empty() => {
                            p.error(&span, key, "no Ruby is defined: [rubies] is empty", Some("add one, e.g. system = \"ruby\", or remove [rubies] to use the ruby on PATH".into()));
                            p.rubies_reported = true;
                        }
                        Some(t) => rubies = p.rubies(t),
                        None => {
                            p.error(&span, key, format!("expected a table, found {}", describe(item)), None);
                            p.rubies_reported = true;
                        }
                    }
                }
                "settings" => match item.as_table_like() {
                    Some(t) => base = p.settings_layer(t, "settings", &[]).0,
                    None => p.error(&span, key, format!("expected a table, found {}", describe(item)), None),
                },
                "matrix" => match item.as_table_like() {
                    Some(t) => axes = p.matrix(t),
                    None => p.error(&span, key, format!("expected a table, found {}", describe(item)), None),
                },
                "configs" => match table_list(item) {
                    Some(list) => {
                        for (i, (t, tspan)) in list.into_iter().enumerate() {
                            let errors_before = p.errors.len();
                            let (layer, mut others) = p.settings_layer(t, &format!("configs[{i}]"), &["label"]);
                            configs.push(ConfigEntry {
                                layer,
                                label: others.remove("label"),
                                span: tspan,
                                broken: p.errors.len() > errors_before,
                            });
                        }
                    }
                    None => p.error(&span, key, format!("expected an array of tables ([[configs]]), found {}", describe(item)), None),
                },
                "exclude" => match table_list(item) {
                    Some(list) => {
                        for (i, (t, tspan)) in list.into_iter().enumerate() {
                            let errors_before = p.errors.len();
                            // A rejected value here makes this exclusion unreliable (`broken`),
                            // not the configurations' checks: they do not use it.
                            let rejected = p.rejected.clone();
                            let (layer, _) = p.settings_layer(t, &format!("exclude[{i}]"), &[]);
                            p.rejected = rejected;
                            if layer.is_empty() && p.errors.len() == errors_before {
                                p.error(&tspan, &format!("exclude[{i}]"), "an exclusion needs at least one setting to match", None);
                            }
                            let broken = p.errors.len() > errors_before;
                            exclusions.push((layer, tspan, broken));
                        }
                    }
                    None => p.error(&span, key, format!("expected an array of tables ([[exclude]]), found {}", describe(item)), None),
                },
                other if setting_kind(other).is_some() => p.error(
                    &key_span,
                    other,
                    format!("`{other}` is a setting of each configuration, not of the experiment"),
                    Some("move it into [settings] (or list alternatives in [matrix])".to_string()),
                ),
                other => match (did_you_mean(other, &ROOT_KEYS), did_you_mean(other, &setting_names())) {
                    (root, Some(setting))
                        if !matches!(root, Some(r) if strsim::jaro_winkler(other, r) >= strsim::jaro_winkler(other, setting)) => p.error(
                        &key_span,
                        other,
                        format!("unknown key `{other}`"),
                        Some(format!("did you mean `{setting}`? It is a setting of each configuration: put it in [settings]")),
                    ),
                    _ => p.unknown_key(&key_span, other, other, &ROOT_KEYS),
                },
            }
        }

        // `ruby = "all"` in [matrix]: every Ruby of [rubies], or of the machine.
        let ruby_all = p.ruby_all.clone();
        if let Some(span) = &ruby_all {
            let declared = root.get("rubies").and_then(|r| r.as_table_like());
            let declared_or_broken = root.get("rubies").is_some();
            let values = if declared_or_broken && declared.is_none() {
                Vec::new() // `rubies` is not a table: reported already
            } else {
                expand_ruby_all(&mut p, span, declared, &mut rubies)
            };
            if let Some(axis) = axes.iter_mut().find(|axis| axis.name == "ruby") {
                axis.values = values;
            }
        }

        // A key set in [settings] or in a [[configs]] entry and also as a matrix axis would
        // be replaced by the axis's values, never used: an error at both places. `env` is
        // merged instead.
        for axis in axes.iter().filter(|axis| axis.name != "env") {
            let at = p.at(&axis.span);
            if let Some(placed) = base.get(&axis.name) {
                p.error(
                    &placed.span,
                    &placed.key,
                    format!(
                        "`{}` is also a [matrix] axis, at {at}, whose values would replace this one",
                        axis.name
                    ),
                    Some("set it in one place: in [settings] or in [matrix]".into()),
                );
            }
            for entry in &configs {
                if let Some(placed) = entry.layer.get(&axis.name) {
                    p.error(
                        &placed.span,
                        &placed.key,
                        format!(
                            "`{}` is also a [matrix] axis, at {at}, whose values would replace this one",
                            axis.name
                        ),
                        Some(
                            "set it in one place: in the [[configs]] entries or in [matrix]".into(),
                        ),
                    );
                }
            }
        }
        // An axis left without values ([rubies] empty or broken) expands to nothing.
        axes.retain(|axis| !axis.values.is_empty());

        // Without [rubies], the `ruby` on PATH is the only Ruby, named "system".
        if ruby_all.is_none() && rubies.is_empty() && root.get("rubies").is_none() {
            match rubies::discovery::resolve_executable("ruby") {
                Ok(path) => {
                    rubies.insert(
                        "system".into(),
                        (
                            RubyDef {
                                argv: vec![path.display().to_string()],
                                env: BTreeMap::new(),
                                gemfile: None,
                            },
                            None,
                        ),
                    );
                }
                Err(e) => {
                    // About the file as a whole: nothing in it names a Ruby.
                    p.error(
                        &None,
                        "rubies",
                        format!("no [rubies] given and {e:#}"),
                        None,
                    );
                    p.failed_rubies.push("system".into());
                    p.rubies_reported = true;
                }
            }
        }

        // Expand: explicit configurations (or one empty one) × the matrix product.
        if configs.is_empty() {
            configs.push(ConfigEntry {
                layer: Layer::new(),
                label: None,
                span: None,
                broken: false,
            });
        }
        let config_parts = labels_for_configs(&mut p, &configs);
        let mut points: Vec<Point> = Vec::new();
        for (entry, config_part) in configs.iter().zip(config_parts) {
            let mut combos: Vec<(Layer, Vec<LabelPart>, BTreeMap<String, String>)> =
                vec![(Layer::new(), Vec::new(), BTreeMap::new())];
            for axis in &axes {
                let mut next = Vec::new();
                for (combo, parts, axis_labels) in &combos {
                    for v in &axis.values {
                        let mut c = combo.clone();
                        c.insert(axis.name.clone(), v.placed.clone());
                        let mut l = parts.clone();
                        // `ruby = "all"` names the Ruby even when it finds only one: what
                        // it expands to depends on the machine, and the label should say.
                        if axis.values.len() > 1 || (axis.name == "ruby" && ruby_all.is_some()) {
                            l.push(LabelPart {
                                text: if axis.name == "env" || v.chosen {
                                    v.label.clone()
                                } else {
                                    format!("{}={}", axis.name, v.label)
                                },
                                span: v.placed.span.clone(),
                                key: v.placed.key.clone(),
                                axis: Some(axis.name.clone()),
                            });
                        }
                        let mut al = axis_labels.clone();
                        al.insert(axis.name.clone(), v.label.clone());
                        next.push((c, l, al));
                    }
                }
                combos = next;
            }
            for (combo, axis_parts, axis_labels) in combos {
                let layer = merge(&[&base, &entry.layer, &combo]);
                let mut parts = Vec::new();
                parts.extend(config_part.clone());
                parts.extend(axis_parts);
                let label = if parts.is_empty() {
                    "default".to_string()
                } else {
                    parts
                        .iter()
                        .map(|part| part.text.as_str())
                        .collect::<Vec<_>>()
                        .join(" ")
                };
                points.push(Point {
                    layer,
                    label,
                    parts,
                    axes: axis_labels,
                    span: entry.span.clone(),
                });
            }
        }
        // An exclusion with a rejected value, or on a setting whose value was rejected
        // elsewhere, cannot be matched reliably: it is left out rather than reported as
        // matching nothing (or everything).
        let mut emptied_by = None;
        for (i, (exclusion, span, broken)) in exclusions.iter().enumerate() {
            if *broken || exclusion.keys().any(|k| p.rejected.contains(k)) {
                continue;
            }
            let before = points.len();
            points.retain(|point| !excluded_by(&point.layer, exclusion));
            if points.len() == before {
                p.error(
                    span,
                    &format!("exclude[{i}]"),
                    "this exclusion matches no configuration",
                    Some("check its values against [matrix]; values must match exactly".into()),
                );
            } else if points.is_empty() {
                emptied_by = Some((i, span.clone()));
            }
        }
        if let Some((i, span)) = &emptied_by {
            p.error(
                span,
                &format!("exclude[{i}]"),
                "every configuration is excluded; nothing would run",
                Some(
                    "an exclusion leaves out every configuration that matches all its keys".into(),
                ),
            );
        }
        // Labels are unique. When a value that makes labels was rejected, the labels are not
        // the ones the file will give: a clash among them would follow from that error.
        let labels_broken = axes.iter().any(|axis| p.rejected.contains(&axis.name))
            || p.rejected.contains("label")
            || (configs.len() > 1 && configs.iter().any(|c| c.label.is_none() && c.broken));
        let duplicate_axes: Vec<&str> = axes
            .iter()
            .filter(|axis| axis.duplicate_labels)
            .map(|axis| axis.name.as_str())
            .collect();
        let mut first_with_label: HashMap<&str, usize> = HashMap::new();
        for (id, point) in points.iter().enumerate() {
            match first_with_label.get(point.label.as_str()) {
                Some(&first) if !labels_broken => duplicate_label(
                    &mut p,
                    &duplicate_axes,
                    (first, &points[first]),
                    (id, point),
                ),
                Some(_) => {}
                None => {
                    first_with_label.insert(&point.label, id);
                }
            }
        }
        let mut expanded = Vec::new();
        for (id, point) in points.iter().enumerate() {
            if let Some(settings) = resolve(&mut p, &point.layer, &rubies, &point.span) {
                expanded.push(Config {
                    id,
                    label: point.label.clone(),
                    axes: point.axes.clone(),
                    settings,
                });
            }
        }
        if !p.errors.is_empty() {
            // Each problem once (a [settings] mistake is found in every configuration),
            // in file order; problems of the file as a whole first.
            let mut errors: Vec<ExperimentError> = Vec::new();
            for e in p.errors {
                if !errors.contains(&e) {
                    errors.push(e);
                }
            }
            errors.sort_by_key(|e| e.position);
            return Err(ExperimentErrors(errors));
        }

        // What the file leaves to defaults that decide what runs and for how long.
        let written: std::collections::BTreeSet<&str> = base
            .keys()
            .chain(configs.iter().flat_map(|c| c.layer.keys()))
            .map(String::as_str)
            .chain(axes.iter().map(|axis| axis.name.as_str()))
            .collect();
        let mut defaults = Vec::new();
        if !batches_written {
            defaults.push(format!("batches = {batches}"));
        }
        for key in NOTED_SETTINGS {
            if written.contains(key) || (key == "duration" && written.contains("requests")) {
                continue;
            }
            let mut values: Vec<String> = Vec::new();
            for s in expanded.iter().map(|c| &c.settings) {
                let value = match (s.workload, key) {
                    (Workload::Http, "app") => format!("{:?}", s.app),
                    (Workload::Http, "server") => format!("{:?}", s.server.as_str()),
                    (Workload::Http, "processes") => s.processes.to_string(),
                    (Workload::Http, "threads") => s.threads.to_string(),
                    (Workload::Http, "warmup") => {
                        format!("\"{}\"", humantime::format_duration(s.load.warmup))
                    }
                    (Workload::Http, "duration") => {
                        format!("\"{}\"", humantime::format_duration(s.load.duration))
                    }
                    (Workload::Script, "runs") => {
                        s.script.as_ref().map_or(0, |x| x.runs).to_string()
                    }
                    _ => continue, // does not apply to this workload
                };
                if !values.contains(&value) {
                    values.push(value);
                }
            }
            if !values.is_empty() {
                defaults.push(format!("{key} = {}", values.join(" or ")));
            }
        }

        let precision = match precision {
            Some((target, _)) => {
                let max = max_batches
                    .as_ref()
                    .map_or(crate::precision::DEFAULT_MAX_BATCHES.max(batches), |m| m.0);
                if let Some((m, span)) = &max_batches {
                    if *m < batches {
                        p.error(span, "max_batches", format!("max_batches = {m} is below batches = {batches}, the minimum of an adaptive run"), None);
                    }
                }
                Some(crate::precision::PrecisionTarget {
                    target,
                    metric: precision_metric
                        .as_ref()
                        .map_or(crate::precision::PrecisionMetric::Throughput, |m| m.0),
                    min_batches: batches,
                    max_batches: max,
                    max_duration: max_duration.as_ref().map(|d| d.0),
                })
            }
            None => {
                // No key is silently ignored: these only mean something with `precision`.
                let spans = [
                    ("metric", precision_metric.clone().map(|m| m.1)),
                    ("max_batches", max_batches.clone().map(|m| m.1)),
                    ("max_duration", max_duration.map(|m| m.1)),
                ];
                for (key, span) in spans {
                    if let Some(span) = span {
                        p.error(
                            &span,
                            key,
                            format!(
                                "{key} applies to adaptive runs, and this file sets no precision"
                            ),
                            Some(
                                "add precision = \"1%\" (the half-width to reach), or remove it"
                                    .into(),
                            ),
                        );
                    }
                }
                None
            }
        };
        if let (Some(t), Some((_, span))) = (&precision, &precision_metric) {
            let script_metric = t.metric == crate::precision::PrecisionMetric::Wall;
            if let Some(c) = expanded
                .iter()
                .find(|c| (c.settings.workload == Workload::Script) != script_metric)
            {
                p.error(span, "metric", format!("metric = \"{}\" does not fit configuration {:?}, a {} workload", t.metric.name(), c.label, if c.settings.workload == Workload::Script { "script" } else { "http" }), Some("scripts use \"wall\"; HTTP workloads throughput, cpu_per_request, latency_p50, latency_p99 or pss_end".into()));
            }
        }
        let precision = precision.map(|mut t| {
            // A script experiment without `metric` targets its wall time.
            if precision_metric.is_none()
                && expanded
                    .iter()
                    .all(|c| c.settings.workload == Workload::Script)
            {
                t.metric = crate::precision::PrecisionMetric::Wall;
            }
            t
        });
        let rounds_written = rounds.is_some();
        let (design, design_note) = p.design(
            written_design,
            slice,
            rounds,
            &expanded,
            &written,
            conditions.repeat_noisy,
        );
        if design != crate::design::Design::Blocks && rounds_written {
            // Measured for the rounds written × slice: the duration's default does not apply.
            defaults.retain(|d| !d.starts_with("duration ="));
        }
        defaults.extend(design_note);
        if !p.errors.is_empty() {
            return Err(ExperimentErrors(p.errors));
        }

        Ok(Experiment {
            design,
            precision,
            conditions,
            file: file.to_path_buf(),
            text: text.to_string(),
            name,
            description,
            seed,
            batches,
            order,
            record_env,
            rubies: rubies.into_iter().map(|(k, (def, _))| (k, def)).collect(),
            configs: expanded,
            defaults,
        })
    }

    /// The same experiment cut down to a quick check: two short blocks (never adaptive).
    pub fn smoke(mut self) -> Experiment {
        self.batches = 2;
        self.precision = None;
        // Interleaved: 2 rounds of at most 500 ms, so each configuration is measured for
        // at most a second per block, as a smoke trial is for two.
        if let crate::design::Design::Interleaved { slice, rounds }
        | crate::design::Design::CoScheduled { slice, rounds } = &mut self.design
        {
            *slice = (*slice).min(Duration::from_millis(500));
            *rounds = (*rounds).min(2);
        }
        for c in &mut self.configs {
            let load = &mut c.settings.load;
            load.warmup = load.warmup.min(Duration::from_secs(1));
            load.duration = load.duration.min(Duration::from_secs(2));
            load.requests = load.requests.map(|n| n.min(1000));
            if let Some(script) = &mut c.settings.script {
                script.runs = 1;
            }
        }
        self
    }
}

/// "1%" → 1.0, "0.5 %" → 0.5; `None` without the percent sign or a number.
fn parse_percent(text: &str) -> Option<f64> {
    text.trim().strip_suffix('%')?.trim().parse().ok()
}

/// Reports configuration `id` having the same label as configuration `first`, at the
/// part of its label where the two differ (the second `[[configs]]` label, or a matrix
/// value), naming where the first one's comes from.
fn duplicate_label(
    p: &mut Parser,
    duplicate_axes: &[&str],
    (first_id, first): (usize, &Point),
    (id, second): (usize, &Point),
) {
    let n = first.parts.len().max(second.parts.len());
    let differs = (0..n).find(|&i| match (first.parts.get(i), second.parts.get(i)) {
        (Some(a), Some(b)) => a.span != b.span || a.text != b.text,
        _ => true,
    });
    let part_of =
        |point: &Point| differs.and_then(|i| point.parts.get(i).or(point.parts.last()).cloned());
    let (theirs, ours) = (part_of(first), part_of(second));
    // Two values of one axis with the same label are reported at the axis already.
    if ours
        .as_ref()
        .and_then(|part| part.axis.as_ref())
        .is_some_and(|axis| duplicate_axes.contains(&axis.as_str()))
    {
        return;
    }
    let first_at = p.at(&theirs
        .as_ref()
        .map_or(first.span.clone(), |part| part.span.clone()));
    let (span, key) = match ours {
        Some(part) => (part.span, part.key),
        None => (second.span.clone(), "configs".to_string()),
    };
    p.error(
        &span,
        &key,
        format!(
            "configurations {first_id} and {id} have the same label {:?}; the first is from {first_at}",
            second.label
        ),
        Some("give them distinct labels: `label` in [[configs]], or { label = \"...\", value = ... } in [matrix]".into()),
    );
}

/// The label part of each `[[configs]]` entry: its `label`, or else, when there are several
/// entries, every key it sets; a single entry without `label` adds nothing.
fn labels_for_configs(p: &mut Parser, configs: &[ConfigEntry]) -> Vec<Option<LabelPart>> {
    let several = configs.len() > 1;
    configs
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            if let Some(label) = &entry.label {
                let text = label.value.as_str().unwrap_or_default().to_string();
                p.check_label(&label.span, &label.key, &text);
                return Some(LabelPart {
                    text,
                    span: label.span.clone(),
                    key: label.key.clone(),
                    axis: None,
                });
            }
            if !several {
                return None;
            }
            let parts: Vec<String> = entry
                .layer
                .iter()
                .map(|(k, v)| {
                    let l = value_label(k, &v.value);
                    p.check_label(&v.span, &v.key, &l);
                    if k == "env" {
                        l
                    } else {
                        format!("{k}={l}")
                    }
                })
                .collect();
            Some(LabelPart {
                text: if parts.is_empty() {
                    "base".into()
                } else {
                    parts.join(" ")
                },
                span: entry.span.clone(),
                key: format!("configs[{i}]"),
                axis: None,
            })
        })
        .collect()
}

/// The setting a dotted key is about: `threads` for `configs[0].threads` or
/// `matrix.threads[1]`.
fn setting_of(key: &str) -> &str {
    let last = key.rsplit('.').next().unwrap_or(key);
    last.split('[').next().unwrap_or(last)
}

/// Every problem `LoadSettings::check` finds, as (setting, message). `check` stops at the
/// first one; so that all are reported at once, the setting it names is put back to its
/// default and the check run again, until it passes. The messages stay those of
/// `rubyrace load`.
fn load_problems(load: &LoadSettings) -> Vec<(String, String)> {
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
            _ => false,
        };
        problems.push((key, message));
        if !known {
            break;
        }
    }
    problems
}

/// Turns merged settings into a `ConfigSettings`, checking what needs several keys or the
/// file system: the Ruby, the app, the URL mix, the script, server combinations.
fn resolve(
    p: &mut Parser,
    layer: &Layer,
    rubies: &BTreeMap<String, (RubyDef, Option<Range<usize>>)>,
    config_span: &Option<Range<usize>>,
) -> Option<ConfigSettings> {
    let errors_before = p.errors.len();
    let get = |k: &str| layer.get(k);
    let span_of = |k: &str| {
        get(k)
            .and_then(|v| v.span.clone())
            .or_else(|| config_span.clone())
    };
    let key_of = |k: &str| {
        get(k)
            .map(|v| v.key.clone())
            .unwrap_or_else(|| format!("settings.{k}"))
    };
    let string = |k: &str, default: &str| {
        get(k)
            .and_then(|v| v.value.as_str().map(str::to_string))
            .unwrap_or_else(|| default.to_string())
    };
    let int = |k: &str| get(k).and_then(|v| v.value.as_i64());
    let float = |k: &str| get(k).and_then(|v| v.value.as_f64());
    let duration = |k: &str, default: Duration| {
        get(k)
            .and_then(|v| v.value.as_str())
            .and_then(|s| humantime::parse_duration(s).ok())
            .unwrap_or(default)
    };
    let list = |k: &str| -> Vec<String> {
        get(k)
            .and_then(|v| v.value.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };

    // Settings whose value was rejected (reported already): checks that depend on them
    // would only report what follows from that error, so they are skipped.
    let rejected = p.rejected.clone();

    // The Ruby. When it cannot be known (its definition or the `ruby` value was rejected,
    // which is reported already), the checks that need it are skipped and the others run.
    let failed_rubies = p.failed_rubies.clone();
    let mut declared: Vec<&str> = rubies
        .keys()
        .map(String::as_str)
        .chain(failed_rubies.iter().map(String::as_str))
        .collect();
    declared.sort_unstable();
    declared.dedup();
    let ruby = match get("ruby").and_then(|v| v.value.as_str()) {
        Some(r) => Some(r.to_string()),
        None if rejected.contains("ruby") => None,
        None if declared.len() == 1 => Some(declared[0].to_string()),
        None if declared.is_empty() => {
            if !p.rubies_reported {
                p.error(
                    config_span,
                    "rubies",
                    "no Ruby is defined",
                    Some("add one to [rubies], e.g. system = \"ruby\"".into()),
                );
            }
            None
        }
        None => {
            let span = config_span.clone().or_else(|| p.rubies_span.clone());
            p.error(
                &span,
                "settings.ruby",
                format!(
                    "several Rubies are defined ({}); say which one each configuration uses",
                    declared.join(", ")
                ),
                Some("set `ruby` in [settings], or list them in [matrix]: ruby = [...]".into()),
            );
            None
        }
    };
    let def = match &ruby {
        None => None,
        Some(r) => match rubies.get(r) {
            Some((def, _)) => Some(def),
            None if failed_rubies.contains(r) => None,
            None if rubies.is_empty() && p.rubies_reported => None,
            None => {
                let all_outside_matrix =
                    r == RUBY_ALL && get("ruby").is_some_and(|v| !v.key.starts_with("matrix."));
                let help = all_outside_matrix
                    .then(|| {
                        "ruby = \"all\" (every Ruby) is a [matrix] axis: move it into [matrix]"
                            .to_string()
                    })
                    .or_else(|| did_you_mean(r, &declared).map(|k| format!("did you mean `{k}`?")))
                    .or_else(|| {
                        Some(format!(
                            "define it in [rubies]; defined: {}",
                            declared.join(", ")
                        ))
                    });
                p.error(
                    &span_of("ruby"),
                    &key_of("ruby"),
                    format!("no Ruby named {r:?} in [rubies]"),
                    help,
                );
                None
            }
        },
    };
    let ruby = ruby.unwrap_or_default();
    let empty_def = RubyDef {
        argv: Vec::new(),
        env: BTreeMap::new(),
        gemfile: None,
    };
    let ruby_known = def.is_some();
    let def = def.unwrap_or(&empty_def);
    let ruby_opts = list("ruby_opts");
    let mut env = def.env.clone();
    if let Some(J::Object(m)) = get("env").map(|v| &v.value) {
        for (k, v) in m {
            env.insert(k.clone(), v.as_str().unwrap_or_default().to_string());
        }
    }

    // Runtime knobs, checked against the Ruby itself (asked once per Ruby and options).
    let jit = get("jit")
        .and_then(|v| v.value.as_str())
        .and_then(Jit::parse);
    let compact = get("compact")
        .and_then(|v| v.value.as_str())
        .and_then(Compact::parse);
    let allocator_value = get("allocator")
        .and_then(|v| v.value.as_str())
        .map(str::to_string);
    let env_pairs: Vec<(String, String)> =
        env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let mut plain_argv = def.argv.clone();
    plain_argv.extend(ruby_opts.iter().cloned());
    let knob = ["jit", "allocator", "compact"]
        .into_iter()
        .find(|k| get(k).is_some());
    let caps = match ruby_known.then(|| p.capabilities(&plain_argv, &env_pairs)) {
        None => None,
        Some(Ok(c)) => Some(c),
        Some(Err(e)) => {
            if let Some(k) = knob {
                p.error(
                    &span_of(k),
                    &key_of(k),
                    format!("cannot check `{k}`: the Ruby {ruby:?} does not answer: {e}"),
                    None,
                );
            }
            None
        }
    };
    let mut jit_flag = None;
    if let Some(j) = jit {
        for o in &ruby_opts {
            if knobs::jit_option_conflict(o, j) {
                p.error(
                    &span_of("ruby_opts"),
                    &key_of("ruby_opts"),
                    format!("`{o}` chooses a JIT, but `jit` = \"{}\" is set too", j.as_str()),
                    Some("choose the JIT with `jit` only; rubyrace adds the right flag and verifies it".into()),
                );
            }
        }
        if let Some(c) = &caps {
            let checked = knobs::check_jit(j, c, |flag| {
                let mut argv = def.argv.clone();
                argv.push(flag.to_string());
                argv.extend(ruby_opts.iter().cloned());
                p.capabilities(&argv, &env_pairs)
            });
            match checked {
                Ok(flag) => jit_flag = flag,
                Err((message, help)) => p.error(&span_of("jit"), &key_of("jit"), message, help),
            }
        }
    }
    let mut ruby_argv = def.argv.clone();
    ruby_argv.extend(jit_flag);
    ruby_argv.extend(ruby_opts.iter().cloned());

    let mut allocator = None;
    if let (Some(value), Some(c)) = (&allocator_value, &caps) {
        let named = ["system", "jemalloc", "tcmalloc"];
        if !value.contains('/') && !named.contains(&value.as_str()) {
            let help = did_you_mean(value, &named)
                .map(|k| format!("did you mean \"{k}\"?"))
                .or_else(|| Some("or give the path of the allocator's shared library".into()));
            p.error(
                &span_of("allocator"),
                &key_of("allocator"),
                format!("expected \"system\", \"jemalloc\", \"tcmalloc\" or a library path, found {value:?}"),
                help,
            );
        } else if env.contains_key("LD_PRELOAD") {
            p.error(
                &span_of("allocator"),
                &key_of("allocator"),
                "LD_PRELOAD is set in `env` too; rubyrace sets it for the allocator",
                Some("choose the allocator with `allocator` only".into()),
            );
        } else {
            let value = if value.contains('/') {
                p.resolve_path(value).display().to_string()
            } else {
                value.clone()
            };
            match knobs::resolve_allocator(&value, c) {
                Ok(a) => {
                    if let Some(lib) = &a.preload {
                        env.insert("LD_PRELOAD".into(), lib.display().to_string());
                    }
                    allocator = Some(a);
                }
                Err((message, help)) => {
                    p.error(&span_of("allocator"), &key_of("allocator"), message, help)
                }
            }
        }
    }
    if let (Some(cm), Some(c)) = (compact, &caps) {
        let missing = match cm {
            Compact::None => None,
            Compact::AfterBoot => (!c.gc_compact).then_some("GC.compact"),
            Compact::Auto => (!c.gc_auto_compact).then_some("GC.auto_compact="),
        };
        if let Some(m) = missing {
            p.error(
                &span_of("compact"),
                &key_of("compact"),
                format!(
                    "{} has no {m}, so compact = \"{}\" cannot run",
                    c.description,
                    cm.as_str()
                ),
                None,
            );
        }
    }
    let ruby_engine = caps.as_ref().map(|c| c.engine.clone());

    let workload = match string("workload", "http").as_str() {
        "script" => Workload::Script,
        _ => Workload::Http,
    };
    let server = ServerKind::parse(&string("server", "puma")).unwrap_or(ServerKind::Puma);
    let processes = int("processes").unwrap_or(1) as u32;
    let threads = int("threads").unwrap_or(1) as u32;

    // The app: a bundled name or a directory with a config.ru.
    let app = string("app", "rack-hello");
    let app_dir = if BUNDLED_APPS.contains(&app.as_str()) {
        rubies::support::bundled_apps_dir().join(&app)
    } else {
        p.resolve_path(&app)
    };
    if workload == Workload::Http {
        if !app_dir.join("config.ru").is_file() {
            let help = if app.contains('/') {
                None
            } else {
                did_you_mean(&app, &BUNDLED_APPS)
                    .map(|k| format!("did you mean the bundled app `{k}`?"))
                    .or_else(|| {
                        Some(format!(
                            "bundled apps: {}; or a directory with a config.ru",
                            BUNDLED_APPS.join(", ")
                        ))
                    })
            };
            p.error(
                &span_of("app"),
                &key_of("app"),
                format!("no config.ru in {}", app_dir.display()),
                help,
            );
        }
        let server_argv = list("server_argv");
        // Which server, and with how many processes and threads, is unknown when one of
        // them was rejected.
        let server_known = !["server", "server_argv", "processes", "threads"]
            .iter()
            .any(|k| rejected.contains(*k));
        if server_known && server == ServerKind::Custom && server_argv.is_empty() {
            p.error(&span_of("server"), &key_of("server"), "server = \"custom\" needs `server_argv`, e.g. [\"{ruby}\", \"-S\", \"falcon\", \"--bind\", \"http://127.0.0.1:{port}\"]", None);
        }
        if server_known && server != ServerKind::Custom && !server_argv.is_empty() {
            p.error(
                &span_of("server_argv"),
                &key_of("server_argv"),
                format!(
                    "`server_argv` is only used with server = \"custom\", but the server is {:?}",
                    server.as_str()
                ),
                None,
            );
        }
        if server_known && processes > 1 && !server.supports_processes() {
            p.error(
                &span_of("processes"),
                &key_of("processes"),
                format!(
                    "{} runs a single process; processes must be 1",
                    server.as_str()
                ),
                None,
            );
        }
        if server_known && threads > 1 && !server.supports_threads() {
            p.error(
                &span_of("threads"),
                &key_of("threads"),
                format!(
                    "{} does not take a thread count; threads must be 1",
                    server.as_str()
                ),
                None,
            );
        }
    }

    // The Gemfile: `gemfile` ("none", or a path where {ruby} is the Ruby's name), else the
    // Ruby's `gemfile`, else BUNDLE_GEMFILE in `env`, else the app's Gemfile.<ruby> or Gemfile.
    let gemfile = match get("gemfile").and_then(|v| v.value.as_str()) {
        Some("none") => None,
        Some(g) => {
            let path = p.resolve_path(&g.replace("{ruby}", &ruby));
            // With `{ruby}` and no known Ruby, the path is unknown too.
            if !path.is_file() && (ruby_known || !g.contains("{ruby}")) {
                p.error(
                    &span_of("gemfile"),
                    &key_of("gemfile"),
                    format!("no such Gemfile: {}", path.display()),
                    None,
                );
            }
            Some(path)
        }
        None => def
            .gemfile
            .clone()
            .or_else(|| env.get("BUNDLE_GEMFILE").map(|g| p.resolve_path(g)))
            .or_else(|| {
                (workload == Workload::Http)
                    .then(|| {
                        [
                            app_dir.join(format!("Gemfile.{ruby}")),
                            app_dir.join("Gemfile"),
                        ]
                        .into_iter()
                        .find(|g| g.is_file())
                    })
                    .flatten()
            }),
    };
    if let Some(g) = &gemfile {
        env.insert("BUNDLE_GEMFILE".into(), g.display().to_string());
        if g.is_file() && caps.is_some() {
            let env_pairs: Vec<(String, String)> =
                env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            if let Err(e) = p.bundle_check(&def.argv, &env_pairs) {
                // Point at what chose the Gemfile: `gemfile`, else the app that has it.
                let chosen_by = if get("gemfile").is_some() {
                    "gemfile"
                } else {
                    "app"
                };
                p.error(
                    &span_of(chosen_by),
                    &key_of(chosen_by),
                    format!(
                        "the gems of {} are not all installed for Ruby {ruby:?}: {e}",
                        g.display()
                    ),
                    Some(format!(
                        "install them: BUNDLE_GEMFILE={} {} -S bundle install",
                        g.display(),
                        def.argv.join(" ")
                    )),
                );
            }
        }
    }

    // The load.
    let urls = match get("urls").and_then(|v| v.value.as_str()) {
        Some(f) => {
            let path = p.resolve_path(f);
            match std::fs::read_to_string(&path) {
                Ok(text) => match load::parse_url_mix(&text, &path.display().to_string()) {
                    Ok(lines) => Some(lines),
                    Err(e) => {
                        p.error(&span_of("urls"), &key_of("urls"), e.to_string(), None);
                        None
                    }
                },
                Err(e) => {
                    p.error(
                        &span_of("urls"),
                        &key_of("urls"),
                        format!("cannot read {}: {e}", path.display()),
                        None,
                    );
                    None
                }
            }
        }
        None => None,
    };
    let mode = match string("mode", "keepalive").as_str() {
        "close-header" => ConnectionMode::CloseHeader,
        "client-close" => ConnectionMode::ClientClose,
        _ => ConnectionMode::Keepalive,
    };
    let load = LoadSettings {
        connections: int("connections")
            .map(|c| c as usize)
            .unwrap_or((processes * threads) as usize),
        threads: int("load_threads").unwrap_or(1) as usize,
        duration: duration("duration", Duration::from_secs(10)),
        requests: int("requests").map(|n| n as u64),
        // A JVM needs far longer than CRuby before its JIT has settled.
        warmup: duration(
            "warmup",
            Duration::from_secs(if ruby_engine.as_deref() == Some("jruby") {
                30
            } else {
                5
            }),
        ),
        mode,
        close_grace: duration("close_grace", Duration::from_millis(100)),
        rate: float("rate"),
        method: string("method", "GET"),
        path: Some(string("path", "/")),
        headers: list("headers"),
        body: get("body")
            .and_then(|v| v.value.as_str())
            .map(|b| b.as_bytes().to_vec()),
        urls: urls.clone(),
        seed: int("url_seed").unwrap_or(1) as u64,
        pipeline: int("pipeline").unwrap_or(1) as usize,
        timeout: duration("timeout", Duration::from_secs(10)),
        connect_stagger: get("connect_stagger")
            .and_then(|v| v.value.as_str())
            .and_then(|s| humantime::parse_duration(s).ok()),
    };
    if workload == Workload::Http {
        for (key, message) in load_problems(&load) {
            if key == "headers" {
                // Each header that is not `Name: value`, where it is written.
                let spans = get("headers").map(|v| v.items.clone()).unwrap_or_default();
                for (i, h) in load.headers.iter().enumerate() {
                    if let Err(e) = load::parse_header(h) {
                        let span = spans.get(i).cloned().flatten();
                        let (span, key) = match span {
                            Some(s) => (Some(s), format!("{}[{i}]", key_of("headers"))),
                            None => (span_of("headers"), key_of("headers")),
                        };
                        p.error(&span, &key, e.to_string(), None);
                    }
                }
                continue;
            }
            let help = match key.as_str() {
                "method" => {
                    let upper = load.method.to_ascii_uppercase();
                    (upper != load.method
                        && load::parse_url_mix(&format!("{upper} /"), "method").is_ok())
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
                "timeout" => {
                    Some("a request needs time to answer, e.g. timeout = \"10s\"".to_string())
                }
                _ => None,
            };
            p.error(&span_of(&key), &key_of(&key), message, help);
        }
        let readiness = string("readiness_path", "/");
        if !readiness.starts_with('/') {
            p.error(
                &span_of("readiness_path"),
                &key_of("readiness_path"),
                format!("expected a path starting with '/', found {readiness:?}"),
                None,
            );
        }
    }

    // A script workload. With a rejected `workload`, which settings apply is unknown.
    let workload_known = !rejected.contains("workload");
    let script = match (workload, get("script").and_then(|v| v.value.as_str())) {
        _ if !workload_known => None,
        (Workload::Script, Some(s)) => {
            let path = p.resolve_path(s);
            if !path.is_file() {
                p.error(
                    &span_of("script"),
                    &key_of("script"),
                    format!("no such script: {}", path.display()),
                    None,
                );
            }
            Some(ScriptSettings {
                path,
                args: list("script_args"),
                runs: int("runs").unwrap_or(3) as u32,
                timeout: duration("script_timeout", default_script_timeout()),
            })
        }
        (Workload::Script, None) => {
            p.error(
                &span_of("workload"),
                &key_of("workload"),
                "workload = \"script\" needs `script`, the Ruby file to run",
                None,
            );
            None
        }
        (Workload::Http, Some(_)) => {
            p.error(
                &span_of("script"),
                &key_of("script"),
                "`script` is only used with workload = \"script\"",
                Some("add workload = \"script\" to the same table".into()),
            );
            None
        }
        (Workload::Http, None) => None,
    };
    // Settings that do not apply to this workload would be silently unused: refuse them.
    let applies = |key: &str| match (workload, key) {
        (_, "ruby" | "ruby_opts" | "env" | "workload" | "jit" | "allocator" | "gemfile") => true,
        (Workload::Script, k) => matches!(k, "script" | "script_args" | "runs" | "script_timeout"),
        (Workload::Http, k) => !matches!(k, "script" | "script_args" | "runs" | "script_timeout"),
    };
    for (key, placed) in layer {
        if workload_known && !applies(key) && key != "script" {
            let kind = match workload {
                Workload::Http => "http",
                Workload::Script => "script",
            };
            p.error(
                &placed.span,
                &placed.key,
                format!("`{key}` does not apply to workload = \"{kind}\""),
                Some(
                    "remove it, or move it to the configurations it applies to ([[configs]])"
                        .into(),
                ),
            );
        }
    }
    if workload == Workload::Http && get("requests").is_some() && get("duration").is_some() {
        p.error(
            &span_of("requests"),
            &key_of("requests"),
            "give either `duration` or `requests`, not both",
            None,
        );
    }
    // A custom argv is checked now, with a stand-in port, rather than failing every trial;
    // unless what it is built from (the Ruby, the app, the counts) has an error already.
    let argv_inputs = [
        "ruby",
        "ruby_opts",
        "jit",
        "app",
        "server",
        "server_argv",
        "processes",
        "threads",
    ];
    let inputs_wrong = argv_inputs.iter().any(|k| rejected.contains(*k))
        || p.errors[errors_before..]
            .iter()
            .any(|e| argv_inputs.contains(&setting_of(&e.key)));
    if workload == Workload::Http && server == ServerKind::Custom && ruby_known && !inputs_wrong {
        let launch = crate::servers::ServerLaunch {
            kind: server,
            ruby: &ruby_argv,
            app_dir: &app_dir,
            port: 9,
            processes,
            threads,
            scratch_dir: &std::env::temp_dir(),
            custom_argv: &list("server_argv"),
            environment: "production",
            bundle_exec: false,
        };
        if let Err(e) = crate::servers::server_command(&launch) {
            p.error(
                &span_of("server_argv"),
                &key_of("server_argv"),
                format!("{e:#}"),
                None,
            );
        }
    }
    if p.errors.len() > errors_before || !ruby_known {
        return None;
    }
    Some(ConfigSettings {
        ruby,
        ruby_argv,
        ruby_opts,
        env,
        workload,
        app,
        app_dir,
        server,
        server_argv: list("server_argv"),
        processes,
        threads,
        port: int("port").unwrap_or(0) as u16,
        readiness_path: string("readiness_path", "/"),
        readiness_timeout: duration("readiness_timeout", Duration::from_secs(60)),
        stop_timeout: duration("stop_timeout", Duration::from_secs(10)),
        sample_interval: duration("sample_interval", Duration::from_secs(1)),
        max_error_rate: float("max_error_rate").unwrap_or(0.0),
        load,
        script,
        jit,
        allocator,
        compact,
        gemfile,
        ruby_engine,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `text` as if it were `/tmp/x/exp.toml`, with `sh` standing in for Ruby.
    fn parse(text: &str) -> Result<Experiment, ExperimentErrors> {
        let text = format!("{text}\n[rubies]\nr = \"/bin/sh\"\n");
        Experiment::parse(Path::new("/tmp/exp.toml"), &text)
    }

    fn errors(text: &str) -> Vec<String> {
        parse(text)
            .expect_err("the file should be rejected")
            .0
            .iter()
            .map(|e| e.to_string())
            .collect()
    }

    fn labels(e: &Experiment) -> Vec<&str> {
        e.configs.iter().map(|c| c.label.as_str()).collect()
    }

    #[test]
    fn defaults_give_one_configuration() {
        let e = parse("").unwrap();
        assert_eq!(labels(&e), ["default"]);
        let s = &e.configs[0].settings;
        assert_eq!((s.server, s.processes, s.threads), (ServerKind::Puma, 1, 1));
        assert_eq!(s.load.connections, 1);
        assert_eq!(s.load.warmup, Duration::from_secs(5));
        assert_eq!(s.load.duration, Duration::from_secs(10));
        assert_eq!(s.ruby_argv, ["/bin/sh"]);
        assert!(s.app_dir.ends_with("apps/rack-hello"));
        assert_eq!((e.batches, e.seed, e.order), (5, 1, Order::Random));
    }

    #[test]
    fn the_matrix_is_a_cartesian_product_labelled_by_the_axes_that_vary() {
        let e = parse(
            "[settings]\nthreads = 2\n[matrix]\nruby_opts = [[], [\"--yjit\"]]\nprocesses = [1, 2]\nmode = [\"keepalive\"]\n",
        )
        .unwrap();
        assert_eq!(
            labels(&e),
            [
                "ruby_opts=none processes=1",
                "ruby_opts=none processes=2",
                "ruby_opts=--yjit processes=1",
                "ruby_opts=--yjit processes=2",
            ]
        );
        assert_eq!(e.configs[3].settings.ruby_argv, ["/bin/sh", "--yjit"]);
        assert_eq!(
            e.configs[3].settings.load.connections, 4,
            "processes × threads"
        );
        assert_eq!(e.configs[1].axes["processes"], "2");
    }

    #[test]
    fn labelled_values_env_axes_configs_and_exclusions() {
        let e = parse(
            r#"
[settings]
env = { A = "1" }
[matrix]
env = [{ label = "yjit", value = { RUBY_YJIT_ENABLE = "1" } }, { RUBY_YJIT_ENABLE = "0" }]
[[configs]]
label = "puma"
[[configs]]
server = "webrick"
[[exclude]]
server = "webrick"
env = { RUBY_YJIT_ENABLE = "0" }
"#,
        )
        .unwrap();
        assert_eq!(
            labels(&e),
            [
                "puma yjit",
                "puma RUBY_YJIT_ENABLE=0",
                "server=webrick yjit"
            ]
        );
        let env = &e.configs[2].settings.env;
        assert_eq!(
            (env["A"].as_str(), env["RUBY_YJIT_ENABLE"].as_str()),
            ("1", "1")
        );
    }

    #[test]
    fn unknown_keys_get_suggestions_and_positions() {
        let errs = errors("durration = \"1s\"\nseeed = 3\n[settings]\nconections = 4\n");
        assert_eq!(
            errs,
            [
                "/tmp/exp.toml:1:1: durration: unknown key `durration`\n    help: did you mean `duration`? It is a setting of each configuration: put it in [settings]",
                "/tmp/exp.toml:2:1: seeed: unknown key `seeed`\n    help: did you mean `seed`?",
                "/tmp/exp.toml:4:1: settings.conections: unknown key `conections`\n    help: did you mean `connections`?",
            ]
        );
    }

    #[test]
    fn trial_conditions_are_read_and_their_mistakes_named() {
        let e = parse("quiet = true\nrepeat_noisy = 2\ncpus = { server = \"0\", load = \"0\" }\n")
            .err();
        let errs: Vec<String> = e.unwrap().0.iter().map(|e| e.to_string()).collect();
        assert_eq!(errs.len(), 1, "{errs:#?}");
        assert!(errs[0].starts_with("/tmp/exp.toml:3:8: cpus: the server's CPUs (0) and the load generator's (0) overlap"), "{}", errs[0]);
        let e =
            parse("quiet = { other = \"5%\", max_wait = \"20s\" }\nrepeat_noisy = 2\n").unwrap();
        let q = e.conditions.quiet.unwrap();
        assert_eq!(
            (q.other_percent, q.steal_percent, q.max_wait),
            (5.0, 1.0, Duration::from_secs(20))
        );
        assert_eq!((e.conditions.repeat_noisy, e.conditions.cpus), (2, None));
        assert!(parse("quiet = false\n").unwrap().conditions.quiet.is_none());
        let errs = errors(
            "quiet = { othr = \"5%\", window = \"10ms\" }\nrepeat_noisy = 11\ncpus = \"half\"\n",
        );
        assert_eq!(errs.len(), 4, "{errs:#?}");
        assert!(
            errs[0]
                .contains("1:11: quiet.othr: unknown key `othr`\n    help: did you mean `other`?"),
            "{}",
            errs[0]
        );
        assert!(
            errs[1].contains("quiet.window: expected at least 100ms"),
            "{}",
            errs[1]
        );
        assert!(
            errs[2].contains("2:16: repeat_noisy: expected an integer from 0 to 10, found 11"),
            "{}",
            errs[2]
        );
        assert!(
            errs[3].contains("3:8: cpus: expected \"split\", \"none\" or a table"),
            "{}",
            errs[3]
        );
    }

    #[test]
    fn wrong_types_and_values_say_what_was_expected() {
        let errs = errors("[settings]\nthreads = \"4\"\nwarmup = \"5 parsecs\"\nenv = { X = 1 }\nserver = \"pumma\"\n");
        assert_eq!(errs.len(), 4, "{errs:#?}");
        assert!(errs[0].contains(
            "settings.threads: expected an integer from 1 to 1024, found the string \"4\""
        ));
        assert!(errs[1].contains("settings.warmup: expected a duration string"));
        assert!(errs[2].contains("settings.env.X: expected a string, found the integer 1"));
        assert!(
            errs[3].ends_with("help: did you mean \"puma\"?"),
            "{}",
            errs[3]
        );
    }

    #[test]
    fn references_to_missing_things_are_errors() {
        let errs = errors("[settings]\nruby = \"rr\"\n");
        assert_eq!(errs, ["/tmp/exp.toml:2:8: settings.ruby: no Ruby named \"rr\" in [rubies]\n    help: did you mean `r`?"]);
        let errs = errors("[settings]\napp = \"rails-helo\"\n");
        assert!(
            errs[0].contains("no config.ru in /tmp/rails-helo"),
            "{errs:?}"
        );
        assert!(
            errs[0].ends_with("did you mean the bundled app `rails-hello`?"),
            "{errs:?}"
        );
        let errs = Experiment::parse(
            Path::new("/tmp/e.toml"),
            "[rubies]\nx = \"/no/such/ruby\"\n",
        )
        .unwrap_err();
        assert!(
            errs.0[0]
                .to_string()
                .starts_with("/tmp/e.toml:2:5: rubies.x: "),
            "{errs}"
        );
    }

    #[test]
    fn combinations_a_server_cannot_run_are_rejected() {
        let errs = errors("[settings]\nserver = \"unicorn\"\nthreads = 4\n");
        assert!(
            errs[0].contains("unicorn does not take a thread count; threads must be 1"),
            "{errs:?}"
        );
        let errs = errors("[settings]\nserver = \"custom\"\n");
        assert!(
            errs[0].contains("server = \"custom\" needs `server_argv`"),
            "{errs:?}"
        );
        let errs = errors("[settings]\nmode = \"client-close\"\npipeline = 4\n");
        assert!(
            errs[0].contains("pipeline needs keepalive connections"),
            "{errs:?}"
        );
    }

    #[test]
    fn exclusions_and_labels_must_make_sense() {
        let errs = errors("[matrix]\nthreads = [1, 2]\n[[exclude]]\nthreads = 3\n");
        assert!(
            errs[0].contains("exclude[0]: this exclusion matches no configuration"),
            "{errs:?}"
        );
        let errs = errors(
            "[matrix]\nthreads = [{ label = \"x\", value = 1 }, { label = \"x\", value = 2 }]\n",
        );
        assert!(
            errs.iter()
                .any(|e| e.contains("two values of this axis have the label \"x\"")),
            "{errs:?}"
        );
        let errs = errors("[matrix]\nthreads = [1, 2]\n[[configs]]\nthreads = 1\n[[configs]]\nmode = \"close-header\"\n");
        assert!(
            errs[0].contains("configs[0].threads: `threads` is also a [matrix] axis"),
            "{errs:?}"
        );
        let errs = errors("[matrix]\nthreads = 2\n");
        assert!(
            errs[0].contains("expected an array of alternatives, found the integer 2"),
            "{errs:?}"
        );
    }

    #[test]
    fn toml_syntax_errors_have_a_position() {
        let errs = errors("[settings]\nthreads = = 2\n");
        assert!(errs[0].starts_with("/tmp/exp.toml:2:"), "{errs:?}");
        assert!(errs[0].contains("invalid TOML"), "{errs:?}");
    }

    #[test]
    fn settings_that_do_not_apply_are_refused() {
        let errs = errors("[settings]\nrequests = 100\nduration = \"5s\"\nruns = 3\n");
        assert!(
            errs[0].contains("settings.requests: give either `duration` or `requests`, not both"),
            "{errs:?}"
        );
        assert!(
            errs[1].contains("settings.runs: `runs` does not apply to workload = \"http\""),
            "{errs:?}"
        );
        let errs = errors(
            "[settings]\nserver = \"custom\"\nserver_argv = [\"{ruby}\", \"x.rb\", \"{prot}\"]\n",
        );
        assert!(errs[0].contains("settings.server_argv: "), "{errs:?}");
        let env_table = parse("[settings.env]\nA = \"1\"\n").unwrap();
        assert_eq!(env_table.configs[0].settings.env["A"], "1");
    }

    #[test]
    fn script_timeout_is_a_script_setting() {
        std::fs::write("/tmp/rubyrace-exp-test-s.rb", "").unwrap();
        let e = parse("[settings]\nworkload = \"script\"\nscript = \"rubyrace-exp-test-s.rb\"\nscript_timeout = \"30s\"\n").unwrap();
        assert_eq!(
            e.configs[0].settings.script.as_ref().unwrap().timeout,
            Duration::from_secs(30)
        );
        let errs = errors("[settings]\nscript_timeout = \"30s\"\n");
        assert!(
            errs[0].contains("`script_timeout` does not apply to workload = \"http\""),
            "{errs:?}"
        );
    }

    #[test]
    fn a_script_workload_needs_its_script() {
        let errs = errors("[settings]\nworkload = \"script\"\n");
        assert!(
            errs[0].contains("workload = \"script\" needs `script`"),
            "{errs:?}"
        );
        let errs = errors("[settings]\nscript = \"x.rb\"\n");
        assert!(
            errs[0].contains("`script` is only used with workload = \"script\""),
            "{errs:?}"
        );
    }

    #[test]
    fn smoke_shortens_but_never_lengthens() {
        let e = parse("batches = 20\n[settings]\nwarmup = \"500ms\"\nduration = \"1m\"\n")
            .unwrap()
            .smoke();
        assert_eq!(e.batches, 2);
        let load = &e.configs[0].settings.load;
        assert_eq!(
            (load.warmup, load.duration),
            (Duration::from_millis(500), Duration::from_secs(2))
        );
    }

    /// A Ruby as `rubyrace rubies` would report it; `error` makes it one that does not run.
    fn found(name: &str, path: &str, error: bool) -> DiscoveredRuby {
        DiscoveredRuby {
            name: name.into(),
            path: path.into(),
            source: "PATH".into(),
            description: (!error).then(|| format!("{name} (fake)")),
            version: Some("3.3.0".into()),
            error: error.then(|| "exit status 1".into()),
        }
    }

    fn no_discovery() -> Vec<DiscoveredRuby> {
        panic!("discovery must not run when the file has [rubies]")
    }

    #[test]
    fn ruby_all_in_the_matrix_is_every_ruby_of_the_rubies_table_in_file_order() {
        let text = "[rubies]\nzz = \"/bin/sh\"\naa = { argv = [\"/bin/sh\", \"-e\"], env = { X = \"1\" } }\n\
                    [matrix]\nruby = \"all\"\nthreads = [1, 2]\n";
        let e = Experiment::parse_with(Path::new("/tmp/e.toml"), text, &no_discovery).unwrap();
        assert_eq!(
            labels(&e),
            [
                "ruby=zz threads=1",
                "ruby=zz threads=2",
                "ruby=aa threads=1",
                "ruby=aa threads=2"
            ]
        );
        let aa = &e.configs[2].settings;
        assert_eq!(
            (aa.ruby.as_str(), aa.ruby_argv.as_slice()),
            ("aa", &["/bin/sh".to_string(), "-e".to_string()][..])
        );
        assert_eq!(aa.env["X"], "1");
        assert_eq!(e.configs[0].axes["ruby"], "zz");
        // Exclusions match the names it expanded to.
        let text = format!("{text}[[exclude]]\nruby = \"aa\"\nthreads = 2\n");
        let e = Experiment::parse_with(Path::new("/tmp/e.toml"), &text, &no_discovery).unwrap();
        assert_eq!(
            labels(&e),
            [
                "ruby=zz threads=1",
                "ruby=zz threads=2",
                "ruby=aa threads=1"
            ]
        );
        // One Ruby: still named in the label, since what "all" finds depends on the machine.
        let e = parse("[matrix]\nruby = \"all\"\nthreads = [1, 2]\n").unwrap();
        assert_eq!(labels(&e), ["ruby=r threads=1", "ruby=r threads=2"]);
    }

    #[test]
    fn ruby_all_without_a_rubies_table_is_every_ruby_found_on_the_machine() {
        // A second name for /bin/sh's executable: the same Ruby found twice.
        let link = std::env::temp_dir().join(format!("rubyrace-exp-all-{}", std::process::id()));
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("/bin/sh", &link).unwrap();
        let sh = std::fs::canonicalize("/bin/sh").unwrap();
        let other = std::fs::canonicalize("/bin/true").unwrap();
        let machine = || {
            vec![
                found("rbenv-3.4.1", sh.to_str().unwrap(), false),
                found("broken", "/bin/false", true),
                found("system", link.to_str().unwrap(), false),
                found("3.3.0", other.to_str().unwrap(), false),
            ]
        };
        let text = "[matrix]\nruby = \"all\"\n[settings]\nthreads = 2\n";
        let e = Experiment::parse_with(Path::new("/tmp/e.toml"), text, &machine).unwrap();
        assert_eq!(labels(&e), ["ruby=rbenv-3.4.1", "ruby=3.3.0"]);
        assert_eq!(
            e.configs[1].settings.ruby_argv,
            [other.display().to_string()]
        );
        assert_eq!(
            e.rubies.keys().collect::<Vec<_>>(),
            ["3.3.0", "rbenv-3.4.1"]
        );
        std::fs::remove_file(&link).unwrap();

        let nothing = Experiment::parse_with(Path::new("/tmp/e.toml"), text, &|| {
            vec![found("broken", "/bin/false", true)]
        })
        .unwrap_err()
        .to_string();
        assert!(
            nothing.starts_with("/tmp/e.toml:2:8: matrix.ruby: ruby = \"all\": no Ruby that runs was found on this machine"),
            "{nothing}"
        );
    }

    #[test]
    fn ruby_all_is_only_a_matrix_value_and_near_misses_keep_their_error() {
        let errs = errors("[matrix]\nruby = \"al\"\n");
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].starts_with("/tmp/exp.toml:2:8: matrix.ruby: expected an array of alternatives, found the string \"al\""),
            "{errs:?}"
        );
        assert!(
            errs[0].contains("help: did you mean ruby = \"all\""),
            "{errs:?}"
        );
        let errs = errors("[matrix]\nthreads = \"all\"\n");
        assert!(
            errs[0].contains(
                "matrix.threads: expected an array of alternatives, found the string \"all\""
            ),
            "{errs:?}"
        );
        let errs = errors("[settings]\nruby = \"all\"\n");
        assert_eq!(
            errs,
            ["/tmp/exp.toml:2:8: settings.ruby: no Ruby named \"all\" in [rubies]\n    help: ruby = \"all\" (every Ruby) is a [matrix] axis: move it into [matrix]"]
        );
        // In an array, "all" is a Ruby's name like any other.
        let errs = errors("[matrix]\nruby = [\"all\"]\n");
        assert!(
            errs[0].contains("no Ruby named \"all\" in [rubies]"),
            "{errs:?}"
        );
    }

    #[test]
    fn a_settings_key_that_is_also_a_matrix_axis_is_an_error_at_both_places() {
        let errs = errors("[settings]\nthreads = 4\n[matrix]\nthreads = [1, 2]\n");
        assert_eq!(
            errs,
            ["/tmp/exp.toml:2:11: settings.threads: `threads` is also a [matrix] axis, at /tmp/exp.toml:4:1, whose values would replace this one\n    help: set it in one place: in [settings] or in [matrix]"]
        );
        // The same clash with a [[configs]] entry names the axis's place too.
        let errs = errors("[matrix]\nthreads = [1, 2]\n[[configs]]\nthreads = 1\n");
        assert_eq!(
            errs,
            ["/tmp/exp.toml:4:11: configs[0].threads: `threads` is also a [matrix] axis, at /tmp/exp.toml:2:1, whose values would replace this one\n    help: set it in one place: in the [[configs]] entries or in [matrix]"]
        );
        // `env` is merged, not replaced.
        let e = parse(
            "[settings]\nenv = { A = \"1\" }\n[matrix]\nenv = [{ B = \"1\" }, { B = \"2\" }]\n",
        )
        .unwrap();
        assert_eq!(e.configs[1].settings.env["A"], "1");
    }

    #[test]
    fn every_problem_of_a_configuration_is_reported_at_once() {
        let errs = errors("[settings]\npath = \"nope\"\nmethod = \"get\"\nheaders = [\"A: b\", \"NoColon\"]\ntimeout = \"0s\"\n");
        assert_eq!(
            errs,
            [
                "/tmp/exp.toml:2:8: settings.path: path \"nope\" must start with '/'\n    help: did you mean \"/nope\"?",
                "/tmp/exp.toml:3:10: settings.method: method \"get\" is not an upper-case HTTP method\n    help: did you mean \"GET\"?",
                "/tmp/exp.toml:4:20: settings.headers[1]: header \"NoColon\": expected \"Name: value\"",
                "/tmp/exp.toml:5:11: settings.timeout: timeout must be longer than zero\n    help: a request needs time to answer, e.g. timeout = \"10s\"",
            ]
        );
        // An unknown Ruby does not hide the other problems of its configuration.
        let errs = errors("[settings]\nruby = \"rr\"\napp = \"no-such-app\"\n");
        assert_eq!(errs.len(), 2, "{errs:#?}");
        assert!(
            errs[0].contains("settings.ruby: no Ruby named \"rr\""),
            "{errs:#?}"
        );
        assert!(
            errs[1].contains("settings.app: no config.ru in"),
            "{errs:#?}"
        );
        // Nor does another problem hide a custom server argv's.
        let errs = errors("[settings]\nserver = \"custom\"\nserver_argv = [\"{ruby}\", \"{prot}\"]\npath = \"x\"\n");
        assert_eq!(errs.len(), 2, "{errs:#?}");
        assert!(errs[0].contains("settings.server_argv: "), "{errs:#?}");
        assert!(errs[1].contains("settings.path: "), "{errs:#?}");
    }

    #[test]
    fn an_earlier_error_causes_no_follow_on_errors() {
        // A Ruby that does not resolve is reported once, not again where it is used.
        let text = "[rubies]\n\"3.9\" = \"/no/such/ruby3.9\"\n[settings]\nruby = \"3.9\"\n";
        let errs = Experiment::parse(Path::new("/tmp/e.toml"), text).unwrap_err();
        assert_eq!(errs.0.len(), 1, "{errs}");
        assert!(
            errs.0[0]
                .to_string()
                .starts_with("/tmp/e.toml:2:9: rubies.3.9: "),
            "{errs}"
        );
        let text = "[rubies]\n\"3.9\" = \"/no/such/ruby3.9\"\nok = \"/bin/sh\"\n[matrix]\nruby = [\"3.9\", \"ok\"]\n";
        let errs = Experiment::parse(Path::new("/tmp/e.toml"), text).unwrap_err();
        assert_eq!(errs.0.len(), 1, "{errs}");
        // A mistyped workload does not make its script settings errors of their own.
        let errs = errors("[settings]\nworkload = \"scrip\"\nscript = \"x.rb\"\nruns = 3\n");
        assert_eq!(errs.len(), 1, "{errs:#?}");
        assert!(
            errs[0].contains("settings.workload: expected one of"),
            "{errs:#?}"
        );
        // Two values of an axis with one label: said once, at the axis, not also at 1:1.
        let errs =
            errors("[matrix]\nenv = [{ A = \"1\" }, { label = \"A=1\", value = { B = \"2\" } }]\n");
        assert_eq!(
            errs,
            ["/tmp/exp.toml:2:21: matrix.env: two values of this axis have the label \"A=1\"\n    help: give each value its own label: { label = \"...\", value = ... }"]
        );
        // A rejected value does not make an exclusion that uses it match nothing, and a
        // rejected value in an exclusion hides no error of the configurations.
        let errs = errors("[settings]\nthreads = \"4\"\n[[exclude]]\nthreads = 4\n");
        assert_eq!(errs.len(), 1, "{errs:#?}");
        let errs =
            errors("[settings]\nserver = \"unicorn\"\nthreads = 4\n[[exclude]]\nthreads = \"x\"\n");
        assert_eq!(errs.len(), 2, "{errs:#?}");
        assert!(
            errs[0].contains("unicorn does not take a thread count"),
            "{errs:#?}"
        );
        // A Ruby table with a wrong `path` is not also said to lack one.
        let errs = Experiment::parse(Path::new("/tmp/e.toml"), "[rubies]\nx = { path = 3 }\n")
            .unwrap_err();
        assert_eq!(errs.0.len(), 1, "{errs}");
    }

    #[test]
    fn unreadable_files_say_why_with_a_real_position_or_none() {
        let dir = std::env::temp_dir().join(format!("rubyrace-exp-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("nope.toml");
        let err = Experiment::load(&missing).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "cannot read {}: No such file or directory\n1 error in the experiment file; nothing was run",
                missing.display()
            )
        );
        let latin1 = dir.join("latin1.toml");
        std::fs::write(&latin1, b"name = \"x\"\ndescription = \"caf\xe9\"\n").unwrap();
        let err = Experiment::load(&latin1).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "{}:2:19: the file is not valid UTF-8: invalid byte 0xE9 at byte offset 29\n    help: save it as UTF-8",
                latin1.display()
            )),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn duplicate_labels_point_at_the_second_label_and_mention_the_first() {
        let errs = errors("[[configs]]\nlabel = \"a\"\n[[configs]]\nlabel = \"a\"\n");
        assert_eq!(
            errs,
            ["/tmp/exp.toml:4:9: configs[1].label: configurations 0 and 1 have the same label \"a\"; the first is from /tmp/exp.toml:2:9\n    help: give them distinct labels: `label` in [[configs]], or { label = \"...\", value = ... } in [matrix]"]
        );
        // Across two axes: at the value of the second configuration where they part.
        let errs = errors("[matrix]\nruby_opts = [{ label = \"a\", value = [] }, { label = \"a b\", value = [\"-W0\"] }]\nthreads = [{ label = \"b c\", value = 1 }, { label = \"c\", value = 2 }]\n");
        assert_eq!(errs.len(), 1, "{errs:#?}");
        assert!(
            errs[0].starts_with("/tmp/exp.toml:2:43: matrix.ruby_opts[1]: configurations 0 and 3 have the same label \"a b c\"; the first is from /tmp/exp.toml:2:14"),
            "{errs:#?}"
        );
    }

    fn interleaved(slice_ms: u64, rounds: u32) -> crate::design::Design {
        crate::design::Design::Interleaved {
            slice: Duration::from_millis(slice_ms),
            rounds,
        }
    }

    #[test]
    fn an_interleaved_design_takes_its_rounds_from_the_duration_unless_written() {
        // The default duration, 10 s, in 500 ms slices.
        let e = parse("design = \"interleaved\"\n[matrix]\nthreads = [1, 2]\n").unwrap();
        assert_eq!(e.design, interleaved(500, 20));
        assert!(
            e.defaults.contains(&"duration = \"10s\"".to_string()),
            "the duration's default measures it: {:?}",
            e.defaults
        );
        assert!(
            !e.defaults.iter().any(|d| d.starts_with("design")),
            "design is written: {:?}",
            e.defaults
        );
        // A slice alone: as many rounds as fill the duration (rounded up).
        let e = parse("design = \"interleaved\"\nslice = \"300ms\"\n[settings]\nduration = \"1s\"\n[matrix]\nthreads = [1, 2]\n").unwrap();
        assert_eq!(e.design, interleaved(300, 4));
        // Neither: equal slices of at most 500 ms that add up to the duration exactly.
        let e = parse("design = \"interleaved\"\n[settings]\nduration = \"1200ms\"\n[matrix]\nthreads = [1, 2]\n").unwrap();
        assert_eq!(e.design, interleaved(400, 3));
        // Rounds written: the duration does not apply, and its default is not named.
        let e =
            parse("design = \"interleaved\"\nrounds = 6\n[matrix]\nthreads = [1, 2]\n").unwrap();
        assert_eq!(e.design, interleaved(500, 6));
        assert!(
            !e.defaults.iter().any(|d| d.starts_with("duration")),
            "{:?}",
            e.defaults
        );
        let smoke = parse("design = \"interleaved\"\nrounds = 20\n[matrix]\nthreads = [1, 2]\n")
            .unwrap()
            .smoke();
        assert_eq!(smoke.design, interleaved(500, 2));
    }

    #[test]
    fn two_to_eight_http_configurations_are_interleaved_unless_the_file_says_otherwise() {
        let e = parse("[settings]\nduration = \"3s\"\n[matrix]\nthreads = [1, 2]\n").unwrap();
        assert_eq!(e.design, interleaved(500, 6));
        assert!(
            e.defaults
                .contains(&"design = \"interleaved\" (6 rounds of 500ms slices)".to_string()),
            "the default design is named with the other defaults: {:?}",
            e.defaults
        );
        // slice and rounds apply to the default design.
        let e = parse("slice = \"250ms\"\nrounds = 4\n[matrix]\nthreads = [1, 2]\n").unwrap();
        assert_eq!(e.design, interleaved(250, 4));
        // Eight are interleaved, nine are not.
        let eight = parse("[matrix]\nthreads = [1, 2, 3, 4, 5, 6, 7, 8]\n").unwrap();
        assert_eq!(eight.design, interleaved(500, 20));
        let nine = parse("[matrix]\nthreads = [1, 2, 3, 4, 5, 6, 7, 8, 9]\n").unwrap();
        assert_eq!(nine.design, crate::design::Design::Blocks);
        assert!(
            nine.defaults.iter().any(|d| d.starts_with(
                "design = \"blocks\" (9 configurations: an interleaved block keeps every server in memory at once"
            )),
            "{:?}",
            nine.defaults
        );
        // Blocks, and why, for what cannot be interleaved.
        std::fs::write("/tmp/rubyrace-exp-test-d.rb", "").unwrap();
        for (file, why) in [
            ("[settings]\nduration = \"3s\"\n", None),
            ("design = \"blocks\"\n[matrix]\nthreads = [1, 2]\n", None),
            ("[settings]\nworkload = \"script\"\nscript = \"rubyrace-exp-test-d.rb\"\n[matrix]\nruns = [1, 2]\n", Some("script workloads")),
            ("[settings]\nport = 9000\n[matrix]\nthreads = [1, 2]\n", Some("port = 9000 is fixed")),
            ("[settings]\nrequests = 100\n[matrix]\nthreads = [1, 2]\n", Some("requests is set")),
            ("repeat_noisy = 1\n[matrix]\nthreads = [1, 2]\n", Some("repeat_noisy is set")),
            ("[[configs]]\nlabel = \"a\"\nduration = \"2s\"\n[[configs]]\nlabel = \"b\"\nduration = \"3s\"\n", Some("the configurations' durations differ")),
            ("[settings]\nduration = \"50ms\"\n[matrix]\nthreads = [1, 2]\n", Some("duration is shorter than the shortest slice, 100ms")),
        ] {
            let e = parse(file).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(e.design, crate::design::Design::Blocks, "{file}");
            let note: Vec<&String> = e.defaults.iter().filter(|d| d.starts_with("design")).collect();
            match why {
                Some(why) => assert_eq!(note, [&format!("design = \"blocks\" ({why})")], "{file}"),
                None => assert!(note.is_empty(), "{file}: {note:?}"),
            }
        }
    }

    #[test]
    fn an_interleaved_design_refuses_what_cannot_be_interleaved() {
        let errs = errors("design = \"interleaved\"\nrepeat_noisy = 1\nrounds = 4\n[settings]\nport = 9000\nduration = \"5s\"\n");
        let all = errs.join("\n");
        for want in [
            "/tmp/exp.toml:1:10: design: an interleaved design measures configurations against each other in the same seconds, and this file has 1",
            "design: port = 9000 is fixed",
            "design: duration and rounds are both set: an interleaved design measures each configuration for rounds × slice, so give either",
            "design: repeat_noisy applies to the blocks design",
        ] {
            assert!(all.contains(want), "{want:?} not in\n{all}");
        }
        let errs = errors("design = \"interleaved\"\n[[configs]]\nlabel = \"a\"\nduration = \"2s\"\n[[configs]]\nlabel = \"b\"\nduration = \"3s\"\n");
        assert!(
            errs[0].contains("design: the configurations' durations differ (2s, 3s), and an interleaved design measures every configuration of a block for the same rounds × slice"),
            "{errs:#?}"
        );
        let errs = errors("design = \"interleaved\"\n[settings]\nduration = \"50ms\"\n[matrix]\nthreads = [1, 2]\n");
        assert!(
            errs[0]
                .contains("design: duration = \"50ms\" is shorter than the shortest slice, 100ms"),
            "{errs:#?}"
        );
        // slice and rounds where the design is blocks: written, or by default.
        let errs =
            errors("design = \"blocks\"\nslice = \"1s\"\nrounds = 3\n[matrix]\nthreads = [1, 2]\n");
        assert_eq!(errs.len(), 2, "{errs:#?}");
        assert!(
            errs[0].starts_with("/tmp/exp.toml:2:9: slice: slice applies to design = \"interleaved\" or \"co-scheduled\", and this file sets design = \"blocks\""),
            "{errs:#?}"
        );
        assert!(
            errs[1].starts_with("/tmp/exp.toml:3:10: rounds: rounds applies to design"),
            "{errs:#?}"
        );
        let errs =
            errors("slice = \"1s\"\n[settings]\nrequests = 10\n[matrix]\nthreads = [1, 2]\n");
        assert!(
            errs[0].starts_with("/tmp/exp.toml:1:9: slice: slice applies to design = \"interleaved\" or \"co-scheduled\", and this file's design is blocks by default (requests is set)"),
            "{errs:#?}"
        );
        let errs =
            errors("design = \"interleaved\"\nslice = \"10ms\"\n[matrix]\nthreads = [1, 2]\n");
        assert!(
            errs[0].contains("slice: a slice of 10ms is shorter than 100ms"),
            "{errs:#?}"
        );
        let errs = errors("design = \"alternating\"\n[matrix]\nthreads = [1, 2]\n");
        assert!(
            errs[0].contains(
                "design: expected one of \"blocks\", \"interleaved\" or \"co-scheduled\", found \"alternating\""
            ),
            "{errs:#?}"
        );
    }

    #[test]
    fn a_co_scheduled_design_reads_like_an_interleaved_one_and_names_itself_in_errors() {
        let e = parse(
            "design = \"co-scheduled\"\nslice = \"2s\"\nrounds = 3\n[matrix]\nthreads = [1, 2]\n",
        )
        .unwrap();
        assert_eq!(
            e.design,
            crate::design::Design::CoScheduled {
                slice: Duration::from_secs(2),
                rounds: 3
            }
        );
        let smoke = e.smoke();
        assert_eq!(
            smoke.design,
            crate::design::Design::CoScheduled {
                slice: Duration::from_millis(500),
                rounds: 2
            }
        );
        let errs = errors("design = \"co-scheduled\"\n[settings]\nport = 9000\nrequests = 100\n");
        let all = errs.join("\n");
        for want in [
            "/tmp/exp.toml:1:10: design: a co-scheduled design measures configurations against each other in the same seconds, and this file has 1",
            "design: port = 9000 is fixed, and the servers of a co-scheduled block run at the same time",
            "design: requests does not apply to a co-scheduled design",
        ] {
            assert!(all.contains(want), "{want:?} not in\n{all}");
        }
    }

    #[test]
    fn negative_durations_say_they_cannot_be_negative() {
        let errs = errors("[settings]\nduration = \"-5s\"\n");
        assert_eq!(
            errs,
            ["/tmp/exp.toml:2:12: settings.duration: expected a duration string such as \"500ms\", \"10s\" or \"2m\", found \"-5s\": a duration cannot be negative\n    help: write a positive duration, e.g. \"5s\""]
        );
    }

    #[test]
    fn labels_with_control_characters_are_rejected() {
        let errs = errors("[[configs]]\nlabel = \"a\\nb\"\n[[configs]]\nlabel = \"c\"\n");
        assert_eq!(
            errs,
            ["/tmp/exp.toml:2:9: configs[0].label: a label cannot contain control characters, found \"a\\nb\"\n    help: labels name configurations in progress lines, tables and Markdown: use printable characters"]
        );
        // Labels made from values: a chosen label, a string value, an env value.
        let errs = errors("[matrix]\nthreads = [{ label = \"one\\u0007\", value = 1 }, 2]\nenv = [{ A = \"1\\t2\" }, {}]\n");
        assert_eq!(errs.len(), 2, "{errs:#?}");
        assert!(errs[0].starts_with("/tmp/exp.toml:2:12: matrix.threads[0]: a label cannot contain control characters, found \"one\\u{7}\""), "{errs:#?}");
        assert!(errs[1].starts_with("/tmp/exp.toml:3:8: matrix.env[0]: a label cannot contain control characters, found \"A=1\\t2\""), "{errs:#?}");
        // Labels made from the keys of [[configs]] entries.
        let errs = errors("[[configs]]\nenv = { A = \"x\\ry\" }\n[[configs]]\nthreads = 2\n");
        assert_eq!(errs.len(), 1, "{errs:#?}");
        assert!(
            errs[0].starts_with(
                "/tmp/exp.toml:2:7: configs[0].env: a label cannot contain control characters"
            ),
            "{errs:#?}"
        );
    }

    #[test]
    fn the_name_must_make_a_results_directory() {
        for (name, why) in [
            ("", "expected a non-empty name, found \"\""),
            ("  ", "expected a non-empty name, found \"  \""),
            ("a/b", "a name cannot contain '/', found \"a/b\""),
            ("a\\\\b", "a name cannot contain '\\\\', found \"a\\\\b\""),
            (
                "a\\nb",
                "a name cannot contain control characters, found \"a\\nb\"",
            ),
        ] {
            let errs = errors(&format!("name = \"{name}\"\n"));
            assert_eq!(errs.len(), 1, "{errs:#?}");
            assert!(
                errs[0].starts_with(&format!("/tmp/exp.toml:1:8: name: {why}")),
                "{errs:#?}"
            );
            assert!(
                errs[0].contains("results/NAME-YYYYMMDD-HHMMSS"),
                "{errs:#?}"
            );
        }
    }

    #[test]
    fn several_rubies_need_a_choice() {
        let errs = Experiment::parse(
            Path::new("/tmp/e.toml"),
            "[rubies]\na = \"/bin/sh\"\nb = \"/bin/sh\"\n",
        )
        .unwrap_err();
        assert!(
            errs.to_string()
                .contains("several Rubies are defined (a, b)"),
            "{errs}"
        );
        let ok = Experiment::parse(
            Path::new("/tmp/e.toml"),
            "[rubies]\na = \"/bin/sh\"\nb = \"/bin/sh\"\n[matrix]\nruby = [\"a\", \"b\"]\n",
        )
        .unwrap();
        assert_eq!(labels(&ok), ["ruby=a", "ruby=b"]);
    }
}
