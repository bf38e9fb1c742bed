//! The run-wide keys of the experiment file: `design` (with `slice`, `rounds` and the
//! default design's reasons), `quiet` and `cpus`. Part of the one walk of [`Parser`].

use std::time::Duration;

use toml_edit::Item;

use super::{describe, Parser, Span};
use crate::design::SliceProblem;
use crate::model::{Config, Workload};
use crate::settings::{Kind, SettingValue};

impl<'a> Parser<'a> {
    /// The design: the one written (`design = "blocks"`, `"interleaved"` or
    /// `"co-scheduled"`), checked against what the configurations are; or, when none is
    /// written, interleaved for two to [`crate::design::MAX_DEFAULT_INTERLEAVED`] HTTP
    /// configurations that can be (see [`why_blocks_by_default`]) and blocks otherwise.
    /// A sliced design measures each configuration for `rounds` × `slice` per block: from
    /// the `duration` (every configuration's, the same) unless `rounds` is written. `slice`
    /// and `rounds` with the blocks design are errors (no key is silently ignored). Returns
    /// the design and, when it was not written, the note for the defaults list.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn design(
        &mut self,
        written_design: Option<(DesignName, Span)>,
        slice: Option<(Duration, Span)>,
        rounds: Option<(u32, Span)>,
        configs: &[Config],
        written: &std::collections::BTreeSet<&str>,
        repeat_noisy: u32,
        has_services: bool,
        separate_load: bool,
    ) -> (crate::design::Design, Option<String>) {
        let by_default = written_design.is_none();
        let (name, span) = match written_design {
            Some((DesignName::Blocks, _)) => {
                self.refuse_slicing_keys(&slice, &rounds, "this file sets design = \"blocks\"");
                return (crate::design::Design::Blocks, None);
            }
            Some((name, span)) => (name, span),
            None => match why_blocks_by_default(
                configs,
                written,
                repeat_noisy,
                has_services,
                separate_load,
            ) {
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
        let mut problems =
            sliced_design_problems(together, configs, written, rounds.is_some(), repeat_noisy);
        let (slice, rounds) = self.slicing(
            together,
            slice,
            rounds,
            configs,
            separate_load,
            &mut problems,
        );
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

    /// A sliced design's slice and rounds, from the written `slice` and `rounds` or the
    /// configurations' duration; a slice too short is an error of `slice` where it is
    /// written, else a problem of the design added to `problems`.
    fn slicing(
        &mut self,
        together: bool,
        slice: Option<(Duration, Span)>,
        rounds: Option<(u32, Span)>,
        configs: &[Config],
        separate_load: bool,
        problems: &mut Vec<(String, Option<String>)>,
    ) -> (Duration, u32) {
        let duration = distinct_durations(configs)
            .first()
            .copied()
            .unwrap_or_default();
        let slice_span = slice.as_ref().map(|s| s.1.clone());
        let (slice, rounds) = crate::design::slicing_for(
            duration,
            slice.map(|s| s.0),
            rounds.map(|r| r.0),
            crate::design::default_slice(together, separate_load),
        );
        match (crate::design::slice_problem(slice, separate_load), &slice_span) {
            (None, _) => {}
            // A written slice: shorter than MIN_SLICE, it was refused where it is written
            // (and not used); too short for a separate load host, it is refused here.
            (Some(SliceProblem::MostlyLeadIn), Some(_)) => {}
            (Some(SliceProblem::MostlyConnectionSetUp), Some(span)) => self.error(
                span,
                "slice",
                format!(
                    "a slice of {} with [fleet] load = \"separate\": a separate load host runs a load per slice on new connections, so slices shorter than {} would measure mostly connection set-up",
                    humantime::format_duration(slice),
                    humantime::format_duration(crate::design::MIN_SLICE_SEPARATE_LOAD)
                ),
                Some("slice = \"100ms\" or longer, or load = \"same\" (held-open slices)".into()),
            ),
            (Some(short), None) => problems.push((
                format!(
                    "duration = \"{}\" is {}",
                    humantime::format_duration(duration),
                    shorter_than_a_slice(short)
                ),
                Some("measure for longer, or use design = \"blocks\"".to_string()),
            )),
        }
        (slice, rounds)
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
                "split" => CpuSplit::split(&available).map_err(|e| e.to_string()),
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
        match split.and_then(|s| s.check(&available).map(|()| s).map_err(|e| e.to_string())) {
            Ok(s) => Some(s),
            Err(e) => {
                self.error(&item.span(), "cpus", e, None);
                None
            }
        }
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
    has_services: bool,
    separate_load: bool,
) -> Option<String> {
    let n = configs.len();
    if n < 2 {
        return Some("one configuration".into());
    }
    if has_services {
        return Some("[services]: each trial has the database to itself".into());
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
    if configs.iter().any(|c| !c.settings.profile.is_empty()) {
        return Some("profile is set".into());
    }
    if configs.iter().any(|c| !c.settings.setup.is_empty()) {
        return Some("setup is set".into());
    }
    let durations = distinct_durations(configs);
    if durations.len() > 1 {
        return Some("the configurations' durations differ".into());
    }
    // The slices the duration would be cut into by default.
    let (slice, _) = crate::design::slicing_for(
        durations[0],
        None,
        None,
        crate::design::default_slice(false, separate_load),
    );
    crate::design::slice_problem(slice, separate_load)
        .map(|short| format!("duration is {}", shorter_than_a_slice(short)))
}

/// What keeps the configurations from being measured in an interleaved (or, `together`,
/// a co-scheduled) design, as the design's errors: message and help, in the order they
/// are reported. `rounds_written` says whether the file writes `rounds`.
fn sliced_design_problems(
    together: bool,
    configs: &[Config],
    written: &std::collections::BTreeSet<&str>,
    rounds_written: bool,
    repeat_noisy: u32,
) -> Vec<(String, Option<String>)> {
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
    if written.contains("duration") && rounds_written {
        problems.push(problem(
            format!("duration and rounds are both set: {a_design} design measures each configuration for rounds × slice, so give either"),
            "remove rounds (rounds then come from the duration), or remove duration",
        ));
    }
    let durations = distinct_durations(configs);
    if durations.len() > 1 && !rounds_written {
        problems.push(problem(
            format!("the configurations' durations differ ({}), and {a_design} design measures every configuration of a block for the same rounds × slice", durations.iter().map(|d| humantime::format_duration(*d).to_string()).collect::<Vec<_>>().join(", ")),
            "give every configuration the same duration, or set rounds",
        ));
    }
    if let Some(c) = configs.iter().find(|c| !c.settings.profile.is_empty()) {
        problems.push(problem(
            format!(
                "configuration {:?} sets profile: profiles are taken in a phase of a trial of its own, which {a_design} block does not have yet",
                c.label
            ),
            "use design = \"blocks\" for a profiled run",
        ));
    }
    if let Some(c) = configs.iter().find(|c| !c.settings.setup.is_empty()) {
        problems.push(problem(
            format!(
                "configuration {:?} sets setup: setup commands run before a trial of their own, which {a_design} block does not have yet",
                c.label
            ),
            "use design = \"blocks\" when the app needs setup",
        ));
    }
    if repeat_noisy > 0 {
        problems.push(problem(
            format!("repeat_noisy applies to the blocks design: {a_design} block's trials share their seconds and their noise"),
            "remove repeat_noisy; the noisy-trials warning still names the trials of a block measured in noise",
        ));
    }
    problems
}

/// "shorter than the shortest slice, 20ms", and the like for a separate load host: a
/// duration cut into slices that `short` describes.
fn shorter_than_a_slice(short: SliceProblem) -> String {
    let minimum = humantime::format_duration(short.minimum());
    match short {
        SliceProblem::MostlyLeadIn => format!("shorter than the shortest slice, {minimum}"),
        SliceProblem::MostlyConnectionSetUp => format!(
            "shorter than the shortest slice with [fleet] load = \"separate\", {minimum} (each slice is a load run of its own on new connections)"
        ),
    }
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
