//! The walk over the TOML document with its source spans: the root keys, `[rubies]`,
//! `[settings]`, `[matrix]`, `[[configs]]` and `[[exclude]]`, checked value by value into
//! layers of placed values; and the run-wide keys (design, quiet, cpus, precision).
//!
//! One [`Parser`] does the whole walk, so that every error has the file, line and column
//! and checks can skip what an earlier error explains. `read.rs`'s `parse_with` runs its
//! passes in order; its methods are in these files:
//! - this one: positions, errors, names and labels, one setting's value, `[settings]`
//!   and `[[configs]]` layers;
//! - `root`: the first pass, every root key into [`RootKeys`];
//! - `sections`: `[matrix]` and `[rubies]` (with `ruby = "all"` and the `ruby` on PATH);
//!   `services` and `fleet`: those sections;
//! - `run_keys`: `design`, `quiet`, `cpus`, and why a file is in blocks by default;
//! - `cross_keys`: what compares keys with each other and with the expanded
//!   configurations (a setting an axis replaces, the adaptive keys, the design).

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::{Path, PathBuf};

use toml_edit::{Item, TableLike, Value};

use crate::error::{line_column, ExperimentError};
use crate::settings::{did_you_mean, setting_kind, setting_names, Kind, SettingValue};
use rubies::discovery::{DiscoveredRuby, RubyCapabilities};

mod cross_keys;
mod fleet;
mod root;
mod run_keys;
mod sections;
mod services;

pub(crate) use root::RootKeys;
pub(crate) use run_keys::{parse_percent, why_blocks_by_default, DesignName};

/// A checked setting value and where it was written.
#[derive(Clone, Debug)]
pub(crate) struct Placed {
    pub(crate) value: SettingValue,
    pub(crate) span: Option<Range<usize>>,
    /// The dotted key where it was written, for messages.
    pub(crate) key: String,
    /// Where each element was written, for an array (so a bad header is pointed at).
    pub(crate) items: Vec<Span>,
}

/// A layer of settings: `[settings]`, one `[[configs]]` entry or one matrix point.
pub(crate) type Layer = BTreeMap<String, Placed>;

/// Where something was written in the file (a byte range), when known.
pub(crate) type Span = Option<Range<usize>>;

/// One `[[configs]]` entry.
pub(crate) struct ConfigEntry {
    pub(crate) layer: Layer,
    /// Its `label`, if it has one.
    pub(crate) label: Option<Placed>,
    pub(crate) span: Span,
    /// One of its values was rejected (so a label made of its keys is not the real one).
    pub(crate) broken: bool,
}

/// One part of a configuration's label (the `[[configs]]` entry's, or one axis value's),
/// with where it comes from, so a duplicate label can be pointed at.
#[derive(Clone, Debug)]
pub(crate) struct LabelPart {
    pub(crate) text: String,
    pub(crate) span: Span,
    /// The dotted key it comes from, e.g. `configs[1].label` or `matrix.threads[0]`.
    pub(crate) key: String,
    /// The matrix axis it comes from, if any.
    pub(crate) axis: Option<String>,
}

/// One expanded configuration before it is resolved.
pub(crate) struct Point {
    pub(crate) layer: Layer,
    pub(crate) label: String,
    pub(crate) parts: Vec<LabelPart>,
    /// The matrix axes and their value labels.
    pub(crate) axes: BTreeMap<String, String>,
    /// The `[[configs]]` entry it comes from.
    pub(crate) span: Span,
}

/// One value of a matrix axis.
#[derive(Clone, Debug)]
pub(crate) struct AxisValue {
    pub(crate) placed: Placed,
    pub(crate) label: String,
    /// The user chose the label: it is used as it is, without `axis=`.
    pub(crate) chosen: bool,
}

/// One `[matrix]` axis.
#[derive(Clone, Debug)]
pub(crate) struct Axis {
    pub(crate) name: String,
    pub(crate) values: Vec<AxisValue>,
    /// Where its key is written.
    pub(crate) span: Span,
    /// Two of its values have the same label (reported already).
    pub(crate) duplicate_labels: bool,
}

/// A Ruby as run: its argv and the environment added to rubyrace's.
pub(crate) type RubyKey = (Vec<String>, Vec<(String, String)>);

pub(crate) struct Parser<'a> {
    pub(crate) file: &'a Path,
    pub(crate) text: &'a str,
    pub(crate) base_dir: PathBuf,
    pub(crate) errors: Vec<ExperimentError>,
    /// `bundle check` for each Ruby and environment (BUNDLE_GEMFILE), run once.
    pub(crate) bundles: HashMap<RubyKey, Result<(), String>>,
    /// A built-in server's `--version` through `bundle exec`, for each command and
    /// environment (`ruby/server_check.rb`'s answer), run once.
    pub(crate) server_checks: HashMap<RubyKey, Result<rubies::discovery::BundledServer, String>>,
    /// What each Ruby (argv and environment) answered, asked once.
    pub(crate) capabilities: HashMap<RubyKey, Result<RubyCapabilities, String>>,
    /// Where `[matrix]` says `ruby = "all"`, if it does.
    pub(crate) ruby_all: Option<Span>,
    /// Settings with a value that was rejected somewhere in the file. Checks that depend
    /// on one of them are skipped: their errors would follow from the first one.
    pub(crate) rejected: std::collections::BTreeSet<String>,
    /// Rubies of `[rubies]` (or `system`) whose definition was rejected.
    pub(crate) failed_rubies: Vec<String>,
    /// Something about the Rubies as a whole was reported (`[rubies]` is not a table, is
    /// empty, no `ruby` on PATH, `ruby = "all"` found none).
    pub(crate) rubies_reported: bool,
    /// Where `[rubies]` is written.
    pub(crate) rubies_span: Span,
    /// Finds the Rubies of the machine, for `ruby = "all"` without `[rubies]`.
    pub(crate) discover: &'a dyn Fn() -> Vec<DiscoveredRuby>,
    /// Builds (or finds) the Ruby of a commit, for `ruby_ref`.
    pub(crate) build_ruby: &'a dyn Fn(&rubies::build::BuildRequest) -> Result<PathBuf, String>,
    /// What `build_ruby` answered for each request, asked once per file.
    pub(crate) ruby_builds: HashMap<RubyBuildKey, Result<PathBuf, String>>,
}

/// A commit's build as `ruby_ref` asks for it: the repository, the commit and the
/// configure options.
pub(crate) type RubyBuildKey = (PathBuf, String, Vec<String>);

impl<'a> Parser<'a> {
    /// A parser of `text`, the file `file`, whose relative paths are from the file's
    /// directory.
    pub(crate) fn new(
        file: &'a Path,
        text: &'a str,
        discover: &'a dyn Fn() -> Vec<DiscoveredRuby>,
        build_ruby: &'a dyn Fn(&rubies::build::BuildRequest) -> Result<PathBuf, String>,
    ) -> Parser<'a> {
        let base_dir = file
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        Parser {
            file,
            text,
            base_dir: std::fs::canonicalize(&base_dir).unwrap_or(base_dir),
            errors: Vec::new(),
            capabilities: HashMap::new(),
            bundles: HashMap::new(),
            server_checks: HashMap::new(),
            ruby_all: None,
            rejected: Default::default(),
            failed_rubies: Vec::new(),
            rubies_reported: false,
            rubies_span: None,
            discover,
            build_ruby,
            ruby_builds: HashMap::new(),
        }
    }

    pub(crate) fn position(&self, span: &Option<Range<usize>>) -> Option<(usize, usize)> {
        span.as_ref().map(|span| line_column(self.text, span.start))
    }

    /// `FILE:LINE:COLUMN` of a span, to name a second place in a message.
    pub(crate) fn at(&self, span: &Span) -> String {
        match self.position(span) {
            Some((line, column)) => format!("{}:{line}:{column}", self.file.display()),
            None => self.file.display().to_string(),
        }
    }

    pub(crate) fn error(
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

    pub(crate) fn unknown_key(
        &mut self,
        span: &Option<Range<usize>>,
        key: &str,
        name: &str,
        known: &[&str],
    ) {
        let help = did_you_mean(name, known)
            .map(|k| format!("did you mean `{k}`?"))
            .or_else(|| Some(format!("known keys here: {}", known.join(", "))));
        self.error(span, key, format!("unknown key `{name}`"), help);
    }

    /// Reports a `name` that cannot name a results directory (`results/NAME-...`).
    pub(crate) fn check_name(&mut self, span: &Span, name: &str) {
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
    pub(crate) fn check_label(&mut self, span: &Span, key: &str, label: &str) {
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

    /// Checks a value against a kind; returns it typed.
    pub(crate) fn check_value(
        &mut self,
        key: &str,
        kind: Kind,
        item: &Item,
    ) -> Option<SettingValue> {
        let span = item.span();
        let found = describe(item);
        let wrong = |p: &mut Self, detail: Option<String>| {
            let (message, help) = match detail {
                Some(d) => (
                    format!("expected {}, {d}", kind.expected()),
                    crate::settings::range_help(crate::settings::setting_of(key)),
                ),
                None => (format!("expected {}, found {found}", kind.expected()), None),
            };
            p.error(&span, key, message, help);
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
                .map(|s| SettingValue::Str(s.to_string()))
                .or_else(|| wrong(self, None)),
            Kind::Int { min, max } => match value.as_integer() {
                Some(i) if (min..=max).contains(&i) => Some(SettingValue::Int(i)),
                Some(i) => wrong(self, Some(format!("found {i}"))),
                None => wrong(self, None),
            },
            Kind::Float { min, max } => {
                let f = value
                    .as_float()
                    .or_else(|| value.as_integer().map(|i| i as f64));
                match f {
                    Some(f) if f >= min && f <= max => Some(SettingValue::Float(f)),
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
                    Ok(d) => Some(SettingValue::Duration {
                        text: s.to_string(),
                        value: d,
                    }),
                    Err(e) => wrong(self, Some(format!("found {s:?} ({e})"))),
                },
                None => wrong(self, None),
            },
            Kind::StrList => match value.as_array() {
                Some(a) => match a.iter().map(|v| v.as_str().map(str::to_string)).collect() {
                    Some(list) => Some(SettingValue::StrList(list)),
                    None => wrong(self, None),
                },
                None => wrong(self, None),
            },
            Kind::ArgvList => {
                let argvs: Option<Vec<Vec<String>>> = value.as_array().and_then(|a| {
                    a.iter()
                        .map(|argv| {
                            argv.as_array()
                                .filter(|argv| !argv.is_empty())
                                .and_then(|argv| {
                                    argv.iter()
                                        .map(|v| v.as_str().map(str::to_string))
                                        .collect()
                                })
                        })
                        .collect()
                });
                match argvs {
                    Some(list) => Some(SettingValue::ArgvList(list)),
                    None => wrong(self, None),
                }
            }
            Kind::OneOf(options) => match value.as_str() {
                Some(s) if options.contains(&s) => Some(SettingValue::Str(s.to_string())),
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
            Kind::Bool => value
                .as_bool()
                .map(SettingValue::Bool)
                .or_else(|| wrong(self, None)),
            Kind::SomeOf(options) => {
                let written: Option<Vec<&str>> = match value.as_array() {
                    Some(a) => a.iter().map(|v| v.as_str()).collect(),
                    None => value.as_str().map(|s| vec![s]),
                };
                let Some(written) = written else {
                    return wrong(self, None);
                };
                let mut chosen: Vec<String> = Vec::new();
                for s in written {
                    if !options.contains(&s) {
                        let help =
                            did_you_mean(s, options).map(|k| format!("did you mean \"{k}\"?"));
                        self.error(
                            &span,
                            key,
                            format!("expected {}, found {s:?}", kind.expected()),
                            help,
                        );
                        return None;
                    }
                    if chosen.iter().any(|c| c == s) {
                        return wrong(self, Some(format!("found {s:?} twice")));
                    }
                    chosen.push(s.to_string());
                }
                Some(SettingValue::StrList(chosen))
            }
            Kind::StrMap => unreachable!("handled above"),
        }
    }

    /// A table of string values (environment variables); non-strings are reported.
    pub(crate) fn string_map(&mut self, key: &str, t: &dyn TableLike) -> SettingValue {
        let mut map = BTreeMap::new();
        for (k, v) in t.iter() {
            match v.as_str() {
                Some(s) => {
                    map.insert(k.to_string(), s.to_string());
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
        SettingValue::StrMap(map)
    }

    /// Reads a table of settings (`[settings]`, a `[[configs]]` entry, an `[[exclude]]`
    /// entry). `extra` names keys allowed besides the settings (e.g. `label`).
    pub(crate) fn settings_layer(
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
                            value: SettingValue::Str(s.to_string()),
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

    pub(crate) fn resolve_path(&self, p: &str) -> PathBuf {
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

/// The first control character of a label (a newline, a tab, an escape...), which would
/// break progress lines, tables and Markdown.
pub(crate) fn control_character(label: &str) -> Option<char> {
    label.chars().find(|c| c.is_control())
}

/// `{ label = "...", value = ... }`: a matrix value with a chosen label.
pub(crate) fn labelled(v: &Value) -> Option<(Value, String)> {
    let t = v.as_inline_table()?;
    if t.len() != 2 {
        return None;
    }
    let label = t.get("label")?.as_str()?.to_string();
    let value = t.get("value")?.clone();
    Some((value, label))
}

/// Where each element of an array value is written (empty for anything else).
pub(crate) fn element_spans(value: Option<&Value>) -> Vec<Span> {
    value
        .and_then(Value::as_array)
        .map(|a| a.iter().map(Value::span).collect())
        .unwrap_or_default()
}

pub(crate) fn describe(item: &Item) -> String {
    match item {
        Item::None => "nothing".into(),
        Item::Value(v) => describe_value(v),
        Item::Table(_) => "a table".into(),
        Item::ArrayOfTables(_) => "an array of tables".into(),
    }
}

pub(crate) fn describe_value(v: &Value) -> String {
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
pub(crate) fn table_list(item: &Item) -> Option<Vec<(&dyn TableLike, Span)>> {
    match item {
        Item::ArrayOfTables(a) => Some(a.iter().map(|t| (t as &dyn TableLike, t.span())).collect()),
        Item::Value(Value::Array(a)) => a
            .iter()
            .map(|v| v.as_inline_table().map(|t| (t as &dyn TableLike, v.span())))
            .collect(),
        _ => None,
    }
}
