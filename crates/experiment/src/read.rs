//! The pipeline from an experiment file to its `Experiment` (the resolved model in
//! `model.rs`): the file read as UTF-8 (with a position for the first bad byte), the root
//! keys, `[rubies]`, `[settings]`, `[matrix]`, `[[configs]]` and `[[exclude]]` parsed,
//! expanded and resolved, the defaults the file relies on noted, and `--smoke` applied.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml_edit::ImDocument;

use crate::error::{line_column, os_message, ExperimentError, ExperimentErrors};
use crate::matrix::{duplicate_label, excluded_by, expand_ruby_all, labels_for_configs, merge};
use crate::model::{Config, Experiment, RubyDef, Workload};
use crate::parse::{
    describe, parse_percent, table_list, Axis, ConfigEntry, DesignName, LabelPart, Layer, Parser,
    Point, Span,
};
use crate::resolve::resolve;
use crate::schedule::Order;
use crate::settings::{did_you_mean, setting_kind, setting_names, Kind, SettingValue, ROOT_KEYS};
use rubies::build::BuildRequest;
use rubies::discovery::DiscoveredRuby;

/// The Ruby of a commit (`ruby_ref`) when the cache has its build; otherwise why not, and
/// what builds it. What reading a file does when it is not about to run it.
pub fn cached_ruby(request: &BuildRequest) -> Result<PathBuf, String> {
    match rubies::build::find_built(request) {
        Ok(Some(record)) => Ok(record.prefix.join("bin/ruby")),
        Ok(None) => Err(
            "its Ruby is not built yet: `rubyrace run` (or `check`) builds it before the run, \
             into rubyrace's cache, where any later run finds it"
                .into(),
        ),
        Err(e) => Err(format!("{e:#}")),
    }
}

/// What `defaults_note` names when the file leaves it out: what runs, and for how long.
pub(crate) const NOTED_SETTINGS: [&str; 7] = [
    "app",
    "server",
    "processes",
    "threads",
    "warmup",
    "duration",
    "runs",
];

impl Experiment {
    /// The design `run` chooses for `configs` when the file does not write one: interleaved
    /// for two to eight HTTP configurations that can share a block, else blocks (`rubyrace
    /// check` asks it for the two commits of a file's one configuration).
    pub fn default_design(&self, configs: &[Config]) -> crate::design::Design {
        let mut written = std::collections::BTreeSet::new();
        if configs.iter().any(|c| c.settings.load.requests.is_some()) {
            written.insert("requests");
        }
        match crate::parse::why_blocks_by_default(
            configs,
            &written,
            self.conditions.repeat_noisy,
            !self.services.is_empty(),
        ) {
            Some(_) => crate::design::Design::Blocks,
            None => {
                let separate_load = self.fleet.as_ref().is_some_and(|f| f.separate_load());
                let (slice, rounds) = crate::design::slicing_for(
                    configs[0].settings.load.duration,
                    None,
                    None,
                    crate::design::default_slice(false, separate_load),
                );
                crate::design::Design::Interleaved { slice, rounds }
            }
        }
    }
}

/// The most a smoke run's sliced block measures each configuration for.
const SMOKE_MEASURED: Duration = Duration::from_secs(1);

impl Experiment {
    /// Reads and checks an experiment file.
    pub fn load(file: &Path) -> Result<Experiment, ExperimentErrors> {
        Experiment::load_building(file, &cached_ruby)
    }

    /// [`Experiment::load`], building with `build` the Ruby of every `ruby_ref` the cache
    /// does not have yet (`rubyrace run` and `check` pass a build that shows its progress;
    /// `load` only finds builds, and a missing one is an error of the file).
    pub fn load_building(
        file: &Path,
        build: &dyn Fn(&BuildRequest) -> Result<PathBuf, String>,
    ) -> Result<Experiment, ExperimentErrors> {
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
        Experiment::parse_with(file, &text, &rubies::discovery::discover, build)
    }

    /// Checks an experiment given as text; `file` names it in messages and anchors
    /// relative paths (apps, URL mixes, scripts).
    pub fn parse(file: &Path, text: &str) -> Result<Experiment, ExperimentErrors> {
        Experiment::parse_with(file, text, &rubies::discovery::discover, &cached_ruby)
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
    /// `ruby = "all"` without `[rubies]`), so tests need not depend on the machine, and the
    /// Ruby of a `ruby_ref` built (or found) by `build`.
    pub(crate) fn parse_with(
        file: &Path,
        text: &str,
        discover: &dyn Fn() -> Vec<DiscoveredRuby>,
        build: &dyn Fn(&BuildRequest) -> Result<PathBuf, String>,
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
            server_checks: HashMap::new(),
            ruby_all: None,
            rejected: Default::default(),
            failed_rubies: Vec::new(),
            rubies_reported: false,
            rubies_span: None,
            discover,
            build_ruby: build,
            ruby_builds: HashMap::new(),
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
        // The name the number of blocks was written under: `blocks`, or `batches`, its
        // older synonym (and `max_blocks` or `max_batches` likewise), to answer in its words.
        let mut batches_key: Option<&'static str> = None;
        let mut max_batches_key: Option<&'static str> = None;
        // precision, metric, max_blocks, max_duration: value and where it was written.
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
        let mut services = crate::services::Services::default();
        let mut services_span: Span = None;
        let mut fleet = None;
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
                    if let Some(SettingValue::Int(n)) = p.check_value(key, Kind::Int { min: 0, max: i64::MAX }, item) {
                        seed = n as u64;
                    }
                }
                "blocks" | "batches" => {
                    let key = if key == "blocks" { "blocks" } else { "batches" };
                    if let Some(n) = block_count(&mut p, &mut batches_key, key, &span, item) {
                        batches = n;
                    }
                }
                "precision" => match item.as_str().map(parse_percent) {
                    Some(Some(x)) if x > 0.0 && x < 100.0 => precision = Some((x / 100.0, span.clone())),
                    _ => p.error(
                        &span,
                        key,
                        format!("expected a percentage above 0% and below 100% such as \"1%\", found {}", describe(item)),
                        Some("the half-width every comparison's interval must reach, e.g. precision = \"1%\"".into()),
                    ),
                },
                "metric" => {
                    if let Some(SettingValue::Str(name)) = p.check_value(key, Kind::OneOf(crate::precision::PrecisionMetric::NAMES), item) {
                        precision_metric = crate::precision::PrecisionMetric::parse(&name).map(|m| (m, span.clone()));
                    }
                }
                "max_blocks" | "max_batches" => {
                    let key = if key == "max_blocks" { "max_blocks" } else { "max_batches" };
                    if let Some(n) = block_count(&mut p, &mut max_batches_key, key, &span, item) {
                        max_batches = Some((n, span.clone()));
                    }
                }
                "max_duration" => {
                    if let Some(d) = p.check_value(key, Kind::Duration, item).and_then(|v| v.as_duration()) {
                        if d.is_zero() {
                            p.error(&span, key, "max_duration = \"0s\" would stop the run before its first block", Some("the most measuring time an adaptive run may spend, e.g. max_duration = \"20m\"".into()));
                        } else {
                            max_duration = Some((d, span.clone()));
                        }
                    }
                }
                "quiet" => conditions.quiet = p.quiet_rule(item),
                "cpus" => conditions.cpus = p.cpu_split(item),
                "repeat_noisy" => {
                    if let Some(SettingValue::Int(n)) = p.check_value(key, Kind::Int { min: 0, max: 10 }, item) {
                        conditions.repeat_noisy = n as u64 as u32;
                    }
                }
                "design" => {
                    if let Some(SettingValue::Str(d)) = p.check_value(key, Kind::OneOf(&["blocks", "interleaved", "co-scheduled"]), item) {
                        let name = match d.as_str() {
                            "blocks" => DesignName::Blocks,
                            "interleaved" => DesignName::Interleaved,
                            _ => DesignName::CoScheduled,
                        };
                        written_design = Some((name, span.clone()));
                    }
                }
                "slice" => {
                    if let Some(SettingValue::Duration { text, value: d }) = p.check_value(key, Kind::Duration, item) {
                        if d < crate::design::MIN_SLICE {
                            p.error(
                                &span,
                                key,
                                format!("a slice of {text} is shorter than {}: it would measure mostly its lead-in", humantime::format_duration(crate::design::MIN_SLICE)),
                                Some("slices of 20ms to 2s suit most servers, e.g. slice = \"50ms\"".into()),
                            );
                        } else {
                            slice = Some((d, span.clone()));
                        }
                    }
                }
                "rounds" => {
                    if let Some(SettingValue::Int(n)) = p.check_value(key, Kind::Int { min: 1, max: 10_000 }, item) {
                        rounds = Some((n as u64 as u32, span.clone()));
                    }
                }
                "order" => {
                    if let Some(SettingValue::Str(s)) = p.check_value(key, Kind::OneOf(Order::NAMES), item) {
                        order = s.parse().unwrap_or(order);
                    }
                }
                "record_env" => {
                    if let Some(SettingValue::StrList(a)) = p.check_value(key, Kind::StrList, item) {
                        record_env = a;
                    }
                }
                "fleet" => fleet = p.fleet(item),
                "services" => {
                    services_span = key_span.clone();
                    services = p.services(item);
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
        if batches_key.is_none() {
            defaults.push(format!("blocks = {batches}"));
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

        let precision_span = precision.as_ref().map(|p| p.1.clone());
        let precision = match precision {
            Some((target, _)) => {
                let max = max_batches
                    .as_ref()
                    .map_or(crate::precision::DEFAULT_MAX_BATCHES.max(batches), |m| m.0);
                if let Some((m, span)) = &max_batches {
                    if *m < batches {
                        let (max_key, min_key) = (
                            max_batches_key.unwrap_or("max_blocks"),
                            batches_key.unwrap_or("blocks"),
                        );
                        p.error(span, max_key, format!("{max_key} = {m} is below {min_key} = {batches}, the minimum of an adaptive run"), None);
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
        if let (Some(_), Some(span)) = (&precision, &precision_span) {
            if expanded.len() < 2 {
                p.error(span, "precision", "precision compares every configuration with the first, and this file has one configuration: the run could never reach its target", Some("add a configuration to compare with, or remove precision and set batches".into()));
            }
        }
        let precision = precision.map(|mut t| {
            // The blocks planned from the start: at least those the rule needs before it may
            // stop, so the plan (and the dry run) shows what will run at the least.
            let first_stop = t.first_stop(expanded.len());
            if batches < first_stop {
                batches = first_stop;
                t.min_batches = first_stop;
            }
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
        let design_written = written_design.is_some();
        let slice_span: Span = slice.as_ref().and_then(|(_, span)| span.clone());
        let (design, design_note) = p.design(
            written_design,
            slice,
            rounds,
            &expanded,
            &written,
            conditions.repeat_noisy,
            !services.is_empty(),
            fleet.as_ref().is_some_and(|f| f.separate_load()),
        );
        if design != crate::design::Design::Blocks && rounds_written {
            // Measured for the rounds written × slice: the duration's default does not apply.
            defaults.retain(|d| !d.starts_with("duration ="));
        }
        defaults.extend(design_note);
        if !services.is_empty() && design != crate::design::Design::Blocks {
            p.error(
                &services_span,
                "services",
                "[services] with an interleaved or co-scheduled design: not supported yet",
                Some(
                    "run these configurations with design = \"blocks\" (one trial after another)"
                        .into(),
                ),
            );
        }
        if let (Some(fleet), Some((slice, _))) = (&fleet, design.slicing()) {
            if fleet.separate_load() && slice < crate::design::MIN_SLICE_SEPARATE_LOAD {
                p.error(
                    &slice_span,
                    "slice",
                    format!(
                        "a slice of {} with [fleet] load = \"separate\": a separate load host runs a load per slice on new connections, so slices shorter than {} would measure mostly connection set-up",
                        humantime::format_duration(slice),
                        humantime::format_duration(crate::design::MIN_SLICE_SEPARATE_LOAD)
                    ),
                    Some("slice = \"100ms\" or longer, or load = \"same\" (held-open slices)".into()),
                );
            }
        }
        if !p.errors.is_empty() {
            return Err(ExperimentErrors(p.errors));
        }

        Ok(Experiment {
            design,
            design_written,
            precision,
            gate: None,
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
            services,
            fleet,
        })
    }

    /// The same experiment cut down to a quick check: two short blocks (never adaptive).
    /// A sliced design measures each configuration for at most `SMOKE_MEASURED` a block.
    pub fn smoke(mut self) -> Experiment {
        self.batches = 2;
        self.precision = None;
        // Interleaved: slices of at most 500 ms, and as many rounds as measure each
        // configuration for at most a second per block, as a smoke trial is for two.
        if let crate::design::Design::Interleaved { slice, rounds }
        | crate::design::Design::CoScheduled { slice, rounds } = &mut self.design
        {
            *slice = (*slice).min(crate::design::DEFAULT_LONG_SLICE);
            let fit = SMOKE_MEASURED.as_nanos() / slice.as_nanos().max(1);
            *rounds = (*rounds).min(fit.clamp(1, u128::from(u32::MAX)) as u32);
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

    /// What `--smoke` runs, in one sentence, from an experiment it shortened: printed after
    /// the defaults note, whose values (`6 rounds`, `10s`) the smoke run does not use.
    pub fn smoke_note(&self) -> String {
        let mut parts = vec![format!(
            "{} blocks, warmup at most 1s and duration at most 2s per trial",
            self.batches
        )];
        if let Some((slice, rounds)) = self.design.slicing() {
            parts.push(format!(
                "{rounds} rounds of {} slices",
                humantime::format_duration(slice)
            ));
        }
        if self.configs.iter().any(|c| c.settings.script.is_some()) {
            parts.push("one run per script trial".into());
        }
        format!(
            "--smoke shortens the run, whatever the file and its defaults say: {}; no adaptive blocks",
            parts.join(", ")
        )
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
