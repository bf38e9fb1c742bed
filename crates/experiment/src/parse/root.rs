//! The first pass over an experiment file: every root key, read once in file order into
//! [`RootKeys`] (what the later passes need of it, with where each was written). The
//! sections' contents are read by their own methods (`sections`, `services`, `fleet`);
//! what compares one key with another comes after the expansion (`cross_keys`).

use std::collections::BTreeMap;
use std::time::Duration;

use toml_edit::{Item, Table};

use super::{
    describe, parse_percent, table_list, Axis, ConfigEntry, DesignName, Layer, Parser, Span,
};
use crate::model::RubyDef;
use crate::precision::PrecisionMetric;
use crate::schedule::Order;
use crate::settings::{did_you_mean, setting_kind, setting_names, Kind, SettingValue, ROOT_KEYS};

/// The root keys of a file as written: values, their places, and the sections read into
/// layers. A key the file leaves out keeps its default here.
pub(crate) struct RootKeys {
    pub(crate) name: String,
    pub(crate) description: Option<String>,
    pub(crate) seed: u64,
    pub(crate) batches: u32,
    /// The name the number of blocks was written under: `blocks`, or `batches`, its
    /// older synonym (and `max_blocks` or `max_batches` likewise), to answer in its words.
    pub(crate) batches_key: Option<&'static str>,
    pub(crate) max_batches_key: Option<&'static str>,
    /// precision, metric, max_blocks, max_duration: value and where it was written.
    pub(crate) precision: Option<(f64, Span)>,
    pub(crate) precision_metric: Option<(PrecisionMetric, Span)>,
    pub(crate) max_batches: Option<(u32, Span)>,
    pub(crate) max_duration: Option<(Duration, Span)>,
    pub(crate) order: Order,
    /// design, slice, rounds: value and where it was written.
    pub(crate) written_design: Option<(DesignName, Span)>,
    pub(crate) slice: Option<(Duration, Span)>,
    pub(crate) rounds: Option<(u32, Span)>,
    pub(crate) conditions: crate::conditions::TrialConditions,
    pub(crate) record_env: Vec<String>,
    pub(crate) services: crate::services::Services,
    pub(crate) services_span: Span,
    pub(crate) fleet: Option<crate::fleet::Fleet>,
    /// `[rubies]`: each Ruby's definition and where it is written.
    pub(crate) rubies: BTreeMap<String, (RubyDef, Span)>,
    /// `[settings]`.
    pub(crate) base: Layer,
    /// `[matrix]`.
    pub(crate) axes: Vec<Axis>,
    /// `[[configs]]`.
    pub(crate) configs: Vec<ConfigEntry>,
    /// Each `[[exclude]]`, where it is, and whether one of its values was rejected.
    pub(crate) exclusions: Vec<(Layer, Span, bool)>,
}

impl<'a> Parser<'a> {
    /// Reads every root key of `root` (the file's table); `name` defaults to the file's
    /// stem. Each problem is an error of the parser, and its key keeps its default.
    pub(crate) fn root_keys(&mut self, root: &Table) -> RootKeys {
        let mut keys = RootKeys {
            name: self
                .file
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "experiment".into()),
            description: None,
            seed: 1,
            batches: 5,
            batches_key: None,
            max_batches_key: None,
            precision: None,
            precision_metric: None,
            max_batches: None,
            max_duration: None,
            order: Order::Random,
            written_design: None,
            slice: None,
            rounds: None,
            conditions: Default::default(),
            record_env: Vec::new(),
            services: Default::default(),
            services_span: None,
            fleet: None,
            rubies: BTreeMap::new(),
            base: Layer::new(),
            axes: Vec::new(),
            configs: Vec::new(),
            exclusions: Vec::new(),
        };
        for (key, item) in root.iter() {
            let key_span = root.key(key).and_then(|k| k.span());
            let span = item.span();
            if !self.run_key(&mut keys, key, item, &span)
                && !self.section(&mut keys, key, item, &span, &key_span)
            {
                self.not_a_root_key(&key_span, key);
            }
        }
        keys
    }

    /// One of the run-wide scalar keys (name, seed, blocks, precision, design, order...)
    /// into `keys`; false when `key` is not one.
    fn run_key(&mut self, keys: &mut RootKeys, key: &str, item: &Item, span: &Span) -> bool {
        match key {
            "name" | "description" => match item.as_str() {
                Some(s) if key == "name" => {
                    self.check_name(span, s);
                    keys.name = s.to_string();
                }
                Some(s) => keys.description = Some(s.to_string()),
                None => {
                    let found = describe(item);
                    self.error(span, key, format!("expected a string, found {found}"), None)
                }
            },
            "seed" => {
                if let Some(SettingValue::Int(n)) = self.check_value(key, Kind::Int { min: 0, max: i64::MAX }, item) {
                    keys.seed = n as u64;
                }
            }
            "blocks" | "batches" => {
                let key = if key == "blocks" { "blocks" } else { "batches" };
                if let Some(n) = block_count(self, &mut keys.batches_key, key, span, item) {
                    keys.batches = n;
                }
            }
            "precision" => match item.as_str().map(parse_percent) {
                Some(Some(x)) if x > 0.0 && x < 100.0 => keys.precision = Some((x / 100.0, span.clone())),
                _ => self.error(
                    span,
                    key,
                    format!("expected a percentage above 0% and below 100% such as \"1%\", found {}", describe(item)),
                    Some("the half-width every comparison's interval must reach, e.g. precision = \"1%\"".into()),
                ),
            },
            "metric" => {
                if let Some(SettingValue::Str(name)) = self.check_value(key, Kind::OneOf(crate::precision::PrecisionMetric::NAMES), item) {
                    keys.precision_metric = crate::precision::PrecisionMetric::parse(&name).map(|m| (m, span.clone()));
                }
            }
            "max_blocks" | "max_batches" => {
                let key = if key == "max_blocks" { "max_blocks" } else { "max_batches" };
                if let Some(n) = block_count(self, &mut keys.max_batches_key, key, span, item) {
                    keys.max_batches = Some((n, span.clone()));
                }
            }
            "max_duration" => {
                if let Some(d) = self.check_value(key, Kind::Duration, item).and_then(|v| v.as_duration()) {
                    if d.is_zero() {
                        self.error(span, key, "max_duration = \"0s\" would stop the run before its first block", Some("the most measuring time an adaptive run may spend, e.g. max_duration = \"20m\"".into()));
                    } else {
                        keys.max_duration = Some((d, span.clone()));
                    }
                }
            }
            "quiet" => keys.conditions.quiet = self.quiet_rule(item),
            "cpus" => keys.conditions.cpus = self.cpu_split(item),
            "repeat_noisy" => {
                if let Some(SettingValue::Int(n)) = self.check_value(key, Kind::Int { min: 0, max: 10 }, item) {
                    keys.conditions.repeat_noisy = n as u64 as u32;
                }
            }
            "design" => {
                if let Some(SettingValue::Str(d)) = self.check_value(key, Kind::OneOf(&["blocks", "interleaved", "co-scheduled"]), item) {
                    let name = match d.as_str() {
                        "blocks" => DesignName::Blocks,
                        "interleaved" => DesignName::Interleaved,
                        _ => DesignName::CoScheduled,
                    };
                    keys.written_design = Some((name, span.clone()));
                }
            }
            "slice" => {
                if let Some(SettingValue::Duration { text, value: d }) = self.check_value(key, Kind::Duration, item) {
                    // Too short wherever the load comes from (design::slice_problem; a
                    // separate load host's longer minimum is checked with the design).
                    if let Some(short) = crate::design::slice_problem(d, false) {
                        self.error(
                            span,
                            key,
                            format!("a slice of {text} is shorter than {}: it would measure mostly its lead-in", humantime::format_duration(short.minimum())),
                            Some("slices of 20ms to 2s suit most servers, e.g. slice = \"50ms\"".into()),
                        );
                    } else {
                        keys.slice = Some((d, span.clone()));
                    }
                }
            }
            "rounds" => {
                if let Some(SettingValue::Int(n)) = self.check_value(key, Kind::Int { min: 1, max: 10_000 }, item) {
                    keys.rounds = Some((n as u64 as u32, span.clone()));
                }
            }
            "order" => {
                if let Some(SettingValue::Str(s)) = self.check_value(key, Kind::OneOf(Order::NAMES), item) {
                    keys.order = s.parse().unwrap_or(keys.order);
                }
            }
            "record_env" => {
                if let Some(SettingValue::StrList(a)) = self.check_value(key, Kind::StrList, item) {
                    keys.record_env = a;
                }
            }
            _ => return false,
        }
        true
    }

    /// One of the sections (`[fleet]`, `[services]`, `[rubies]`, `[settings]`, `[matrix]`,
    /// `[[configs]]`, `[[exclude]]`), read by its own method into `keys`; false when `key`
    /// is not one.
    fn section(
        &mut self,
        keys: &mut RootKeys,
        key: &str,
        item: &Item,
        span: &Span,
        key_span: &Span,
    ) -> bool {
        match key {
            "fleet" => keys.fleet = self.fleet(item),
            "services" => {
                keys.services_span = key_span.clone();
                keys.services = self.services(item);
            }
            "rubies" => {
                self.rubies_span = span.clone();
                match item.as_table_like() {
                    Some(t) if t.is_empty() => {
                        self.error(span, key, "no Ruby is defined: [rubies] is empty", Some("add one, e.g. system = \"ruby\", or remove [rubies] to use the ruby on PATH".into()));
                        self.rubies_reported = true;
                    }
                    Some(t) => keys.rubies = self.rubies(t),
                    None => {
                        self.error(
                            span,
                            key,
                            format!("expected a table, found {}", describe(item)),
                            None,
                        );
                        self.rubies_reported = true;
                    }
                }
            }
            "settings" => match item.as_table_like() {
                Some(t) => keys.base = self.settings_layer(t, "settings", &[]).0,
                None => self.error(
                    span,
                    key,
                    format!("expected a table, found {}", describe(item)),
                    None,
                ),
            },
            "matrix" => match item.as_table_like() {
                Some(t) => keys.axes = self.matrix(t),
                None => self.error(
                    span,
                    key,
                    format!("expected a table, found {}", describe(item)),
                    None,
                ),
            },
            "configs" => match table_list(item) {
                Some(list) => {
                    for (i, (t, tspan)) in list.into_iter().enumerate() {
                        let errors_before = self.errors.len();
                        let (layer, mut others) =
                            self.settings_layer(t, &format!("configs[{i}]"), &["label"]);
                        keys.configs.push(ConfigEntry {
                            layer,
                            label: others.remove("label"),
                            span: tspan,
                            broken: self.errors.len() > errors_before,
                        });
                    }
                }
                None => self.error(
                    span,
                    key,
                    format!(
                        "expected an array of tables ([[configs]]), found {}",
                        describe(item)
                    ),
                    None,
                ),
            },
            "exclude" => match table_list(item) {
                Some(list) => {
                    for (i, (t, tspan)) in list.into_iter().enumerate() {
                        let errors_before = self.errors.len();
                        // A rejected value here makes this exclusion unreliable (`broken`),
                        // not the configurations' checks: they do not use it.
                        let rejected = self.rejected.clone();
                        let (layer, _) = self.settings_layer(t, &format!("exclude[{i}]"), &[]);
                        self.rejected = rejected;
                        if layer.is_empty() && self.errors.len() == errors_before {
                            self.error(
                                &tspan,
                                &format!("exclude[{i}]"),
                                "an exclusion needs at least one setting to match",
                                None,
                            );
                        }
                        let broken = self.errors.len() > errors_before;
                        keys.exclusions.push((layer, tspan, broken));
                    }
                }
                None => self.error(
                    span,
                    key,
                    format!(
                        "expected an array of tables ([[exclude]]), found {}",
                        describe(item)
                    ),
                    None,
                ),
            },
            _ => return false,
        }
        true
    }

    /// A root key that is none of the file's: a setting of each configuration written at
    /// the root (to move into `[settings]`), or an unknown key with the nearest name.
    fn not_a_root_key(&mut self, key_span: &Span, key: &str) {
        match key {
            other if setting_kind(other).is_some() => self.error(
                key_span,
                other,
                format!("`{other}` is a setting of each configuration, not of the experiment"),
                Some("move it into [settings] (or list alternatives in [matrix])".to_string()),
            ),
            other => match (did_you_mean(other, &ROOT_KEYS), did_you_mean(other, &setting_names())) {
                (root, Some(setting))
                    if !matches!(root, Some(r) if strsim::jaro_winkler(other, r) >= strsim::jaro_winkler(other, setting)) => self.error(
                    key_span,
                    other,
                    format!("unknown key `{other}`"),
                    Some(format!("did you mean `{setting}`? It is a setting of each configuration: put it in [settings]")),
                ),
                _ => self.unknown_key(key_span, other, other, &ROOT_KEYS),
            },
        }
    }
}

/// A count of blocks written under one of its two names (`blocks` or its older `batches`;
/// `max_blocks` or `max_batches`): notes the name in `seen` and returns the count. The
/// second name written is an error at its place, and its value is not read.
fn block_count(
    p: &mut Parser,
    seen: &mut Option<&'static str>,
    key: &'static str,
    span: &Span,
    item: &toml_edit::Item,
) -> Option<u32> {
    if let Some(first) = *seen {
        p.error(span, key, format!("`{key}` and `{first}` name the same setting (`batches` and `max_batches` are the older names of `blocks` and `max_blocks`): keep one"), None);
        return None;
    }
    *seen = Some(key);
    match p.check_value(
        key,
        Kind::Int {
            min: 1,
            max: 100_000,
        },
        item,
    ) {
        Some(SettingValue::Int(n)) => Some(n as u64 as u32),
        _ => None,
    }
}
