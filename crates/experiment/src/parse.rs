//! The walk over the TOML document with its source spans: the root keys, `[rubies]`,
//! `[settings]`, `[matrix]`, `[[configs]]` and `[[exclude]]`, checked value by value into
//! layers of placed values; and the run-wide keys (design, quiet, cpus, precision).

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml_edit::{Item, TableLike, Value};

use crate::error::{line_column, ExperimentError};
use crate::schema::{Config, RubyDef, Workload};
use crate::settings::RUBY_ALL;
use crate::settings::{did_you_mean, setting_kind, setting_names, Kind, SettingValue};
use rubies::discovery::{DiscoveredRuby, RubyCapabilities};

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
}

impl<'a> Parser<'a> {
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

    /// The design: the one written (`design = "blocks"`, `"interleaved"` or
    /// `"co-scheduled"`), checked against what the configurations are; or, when none is
    /// written, interleaved for two to [`crate::design::MAX_DEFAULT_INTERLEAVED`] HTTP
    /// configurations that can be (see [`why_blocks_by_default`]) and blocks otherwise.
    /// A sliced design measures each configuration for `rounds` × `slice` per block: from
    /// the `duration` (every configuration's, the same) unless `rounds` is written. `slice`
    /// and `rounds` with the blocks design are errors (no key is silently ignored). Returns
    /// the design and, when it was not written, the note for the defaults list.
    pub(crate) fn design(
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
    pub(crate) fn refuse_slicing_keys(
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
    pub(crate) fn quiet_rule(&mut self, item: &Item) -> Option<crate::conditions::QuietRule> {
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
                    if let Some(SettingValue::Duration { text, value: d }) =
                        self.check_value(&key, Kind::Duration, value)
                    {
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
    pub(crate) fn cpu_split(&mut self, item: &Item) -> Option<sys::cpus::CpuSplit> {
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

    /// Reads `[matrix]`: each key is a setting and its value an array of alternatives.
    pub(crate) fn matrix(&mut self, table: &dyn TableLike) -> Vec<Axis> {
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
                    let label = label.unwrap_or_else(|| checked.label());
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
    pub(crate) fn rubies(
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
                            if let Some(SettingValue::StrList(a)) =
                                self.check_value(&key, Kind::StrList, v)
                            {
                                if a.is_empty() {
                                    self.error(
                                        &v.span(),
                                        &key,
                                        "expected at least the Ruby executable",
                                        None,
                                    );
                                } else {
                                    argv = Some(a);
                                }
                            }
                        }
                        "env" => {
                            if let Some(SettingValue::StrMap(m)) =
                                self.check_value(&key, Kind::StrMap, v)
                            {
                                env = m.into_iter().collect();
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
    pub(crate) fn capabilities(
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
    pub(crate) fn bundle_check(
        &mut self,
        argv: &[String],
        env: &[(String, String)],
    ) -> Result<(), String> {
        self.bundles
            .entry((argv.to_vec(), env.to_vec()))
            .or_insert_with(|| {
                rubies::discovery::bundle_check(argv, env).map_err(|e| format!("{e:#}"))
            })
            .clone()
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

/// "1%" → 1.0, "0.5 %" → 0.5; `None` without the percent sign or a number.
pub(crate) fn parse_percent(text: &str) -> Option<f64> {
    text.trim().strip_suffix('%')?.trim().parse().ok()
}

/// The `design` key's values.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum DesignName {
    Blocks,
    Interleaved,
    CoScheduled,
}

/// Why configurations whose file writes no `design` are measured in blocks rather than
/// interleaved; None when they can be interleaved: two to
/// [`crate::design::MAX_DEFAULT_INTERLEAVED`] HTTP configurations, each on a free port,
/// measured for one and the same duration (not a number of requests), without
/// `repeat_noisy`.
pub(crate) fn why_blocks_by_default(
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
pub(crate) fn distinct_durations(configs: &[Config]) -> Vec<Duration> {
    let mut durations: Vec<Duration> = Vec::new();
    for d in configs.iter().map(|c| c.settings.load.duration) {
        if !durations.contains(&d) {
            durations.push(d);
        }
    }
    durations
}
