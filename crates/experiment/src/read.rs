//! The pipeline from an experiment file to its `Experiment` (the resolved model in
//! `model.rs`): the file read as UTF-8 (with a position for the first bad byte), the root
//! keys, `[rubies]`, `[settings]`, `[matrix]`, `[[configs]]` and `[[exclude]]` parsed,
//! expanded and resolved, the defaults the file relies on noted, and `--smoke` applied.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml_edit::ImDocument;

use crate::error::{line_column, os_message, ExperimentError, ExperimentErrors};
use crate::matrix;
use crate::model::{Config, Experiment, Workload};
use crate::parse::{Parser, RootKeys};
use crate::resolve::resolve;
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
        let separate_load = self.fleet.as_ref().is_some_and(|f| f.separate_load());
        match crate::parse::why_blocks_by_default(
            configs,
            &written,
            self.conditions.repeat_noisy,
            !self.services.is_empty(),
            separate_load,
        ) {
            Some(_) => crate::design::Design::Blocks,
            None => {
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
/// The longest a smoke trial waits for a quiet machine: none, one look (`quiet`'s
/// `max_wait`, a minute by default, is for the figures of a real run, which a smoke run does
/// not give). 5 s a trial, as on 2026-11-30, made the examples' smoke runs in the test
/// suite, beside another test, wait 5 s for every trial: 2 minutes for threads-pipes' 24.
const SMOKE_QUIET_WAIT: Duration = Duration::ZERO;

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
    ///
    /// The passes, in order: the TOML; the root keys (`parse/root.rs`, each section read
    /// by its own method); the Rubies (`ruby = "all"`, the `ruby` on PATH); the settings a
    /// matrix axis would replace; the expansion, exclusions and labels (`matrix.rs`); each
    /// configuration resolved (`resolve/`). Errors so far end the read, each once and in
    /// file order. Then what compares keys with the configurations (`parse/cross_keys.rs`:
    /// the adaptive keys, the design) and the defaults the file relies on.
    pub(crate) fn parse_with(
        file: &Path,
        text: &str,
        discover: &dyn Fn() -> Vec<DiscoveredRuby>,
        build: &dyn Fn(&BuildRequest) -> Result<PathBuf, String>,
    ) -> Result<Experiment, ExperimentErrors> {
        let mut p = Parser::new(file, text, discover, build);
        let doc = match ImDocument::parse(text.to_string()) {
            Ok(doc) => doc,
            Err(e) => {
                let message = e.message().trim().to_string();
                p.error(&e.span(), "", format!("invalid TOML: {message}"), None);
                return Err(ExperimentErrors(p.errors));
            }
        };
        let root = doc.as_table();
        let mut keys = p.root_keys(root);
        matrix::fill_ruby_all(&mut p, root, &mut keys);
        p.axes_replacing_settings(&keys);
        // An axis left without values ([rubies] empty or broken) expands to nothing.
        keys.axes.retain(|axis| !axis.values.is_empty());
        p.system_ruby(root, &mut keys);

        let mut points = matrix::expand(&mut p, &mut keys);
        matrix::apply_exclusions(&mut p, &keys, &mut points);
        matrix::check_unique_labels(&mut p, &keys, &points);
        let configs: Vec<Config> = points
            .iter()
            .enumerate()
            .filter_map(|(id, point)| {
                let settings = resolve(&mut p, &point.layer, &keys.rubies, &point.span)?;
                Some(Config {
                    id,
                    label: point.label.clone(),
                    axes: point.axes.clone(),
                    settings,
                })
            })
            .collect();
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

        // The settings the file writes somewhere: in [settings], a [[configs]] entry or
        // as an axis.
        let written: BTreeSet<&str> = keys
            .base
            .keys()
            .chain(keys.configs.iter().flat_map(|c| c.layer.keys()))
            .map(String::as_str)
            .chain(keys.axes.iter().map(|axis| axis.name.as_str()))
            .collect();
        let mut defaults = noted_defaults(&keys, &written, &configs);
        let mut batches = keys.batches;
        let precision = p.precision_target(&keys, &configs, &mut batches);
        let (design, design_note) = p.design_of(&keys, &configs, &written);
        if design != crate::design::Design::Blocks && keys.rounds.is_some() {
            // Measured for the rounds written × slice: the duration's default does not apply.
            defaults.retain(|d| !d.starts_with("duration ="));
        }
        defaults.extend(design_note);
        if !p.errors.is_empty() {
            return Err(ExperimentErrors(p.errors));
        }

        let design_written = keys.written_design.is_some();
        Ok(Experiment {
            design,
            design_written,
            precision,
            gate: None,
            conditions: keys.conditions,
            file: file.to_path_buf(),
            text: text.to_string(),
            name: keys.name,
            description: keys.description,
            seed: keys.seed,
            batches,
            order: keys.order,
            record_env: keys.record_env,
            rubies: keys
                .rubies
                .into_iter()
                .map(|(k, (def, _))| (k, def))
                .collect(),
            configs,
            defaults,
            services: keys.services,
            fleet: keys.fleet,
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
        // No minute-long waits for quiet, and no noisy trial run again.
        if let Some(quiet) = &mut self.conditions.quiet {
            quiet.max_wait = quiet.max_wait.min(SMOKE_QUIET_WAIT);
        }
        self.conditions.repeat_noisy = 0;
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
        if let Some(quiet) = &self.conditions.quiet {
            parts.push(if quiet.max_wait.is_zero() {
                "one look for quiet and no wait, and no noisy trial repeated".to_string()
            } else {
                format!(
                    "a wait for quiet of at most {} and no noisy trial repeated",
                    humantime::format_duration(quiet.max_wait)
                )
            });
        }
        format!(
            "--smoke shortens the run, whatever the file and its defaults say: {}; no adaptive blocks",
            parts.join(", ")
        )
    }
}

/// What the file leaves to defaults that decide what runs and for how long
/// ([`NOTED_SETTINGS`], and `blocks`), each with the values it takes in `configs`.
fn noted_defaults(keys: &RootKeys, written: &BTreeSet<&str>, configs: &[Config]) -> Vec<String> {
    let mut defaults = Vec::new();
    if keys.batches_key.is_none() {
        defaults.push(format!("blocks = {}", keys.batches));
    }
    for key in NOTED_SETTINGS {
        if written.contains(key) || (key == "duration" && written.contains("requests")) {
            continue;
        }
        let mut values: Vec<String> = Vec::new();
        for s in configs.iter().map(|c| &c.settings) {
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
                (Workload::Script, "runs") => s.script.as_ref().map_or(0, |x| x.runs).to_string(),
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
    defaults
}
