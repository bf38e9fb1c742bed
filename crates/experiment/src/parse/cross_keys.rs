//! The checks that compare one key with another, after the root keys are read and the
//! configurations expanded: a setting that a matrix axis would replace, the adaptive keys
//! (`precision` and the keys that only mean something with it) against the
//! configurations, and the design against `[services]` and `[fleet]`. Part of the one walk
//! of [`Parser`].

use std::collections::BTreeSet;

use super::root::RootKeys;
use super::Parser;
use crate::design::Design;
use crate::model::{Config, Workload};
use crate::precision::{PrecisionMetric, PrecisionTarget, DEFAULT_MAX_BATCHES};

impl<'a> Parser<'a> {
    /// A key set in `[settings]` or in a `[[configs]]` entry and also as a matrix axis
    /// would be replaced by the axis's values, never used: an error at both places. `env`
    /// is merged instead.
    pub(crate) fn axes_replacing_settings(&mut self, keys: &RootKeys) {
        for axis in keys.axes.iter().filter(|axis| axis.name != "env") {
            let at = self.at(&axis.span);
            let message = format!(
                "`{}` is also a [matrix] axis, at {at}, whose values would replace this one",
                axis.name
            );
            if let Some(placed) = keys.base.get(&axis.name) {
                self.error(
                    &placed.span,
                    &placed.key,
                    message.clone(),
                    Some("set it in one place: in [settings] or in [matrix]".into()),
                );
            }
            for entry in &keys.configs {
                if let Some(placed) = entry.layer.get(&axis.name) {
                    self.error(
                        &placed.span,
                        &placed.key,
                        message.clone(),
                        Some(
                            "set it in one place: in the [[configs]] entries or in [matrix]".into(),
                        ),
                    );
                }
            }
        }
    }

    /// The adaptive run's target, when the file sets `precision`: `max_blocks` at least
    /// `blocks`, the metric fitting the workloads, two configurations to compare, and
    /// `blocks` raised (in `batches` too) to the first block the rule may stop at. Without
    /// `precision`, each key that only means something with it is an error (none is
    /// silently ignored).
    pub(crate) fn precision_target(
        &mut self,
        keys: &RootKeys,
        configs: &[Config],
        batches: &mut u32,
    ) -> Option<PrecisionTarget> {
        let Some((target, precision_span)) = keys.precision.clone() else {
            let spans = [
                ("metric", keys.precision_metric.clone().map(|m| m.1)),
                ("max_batches", keys.max_batches.clone().map(|m| m.1)),
                ("max_duration", keys.max_duration.clone().map(|m| m.1)),
            ];
            for (key, span) in spans {
                if let Some(span) = span {
                    self.error(
                        &span,
                        key,
                        format!("{key} applies to adaptive runs, and this file sets no precision"),
                        Some(
                            "add precision = \"1%\" (the half-width to reach), or remove it".into(),
                        ),
                    );
                }
            }
            return None;
        };
        let max = keys
            .max_batches
            .as_ref()
            .map_or(DEFAULT_MAX_BATCHES.max(*batches), |m| m.0);
        if let Some((m, span)) = &keys.max_batches {
            if *m < *batches {
                let (max_key, min_key) = (
                    keys.max_batches_key.unwrap_or("max_blocks"),
                    keys.batches_key.unwrap_or("blocks"),
                );
                self.error(
                    span,
                    max_key,
                    format!("{max_key} = {m} is below {min_key} = {batches}, the minimum of an adaptive run"),
                    None,
                );
            }
        }
        let all_scripts = configs
            .iter()
            .all(|c| c.settings.workload == Workload::Script);
        let mut t = PrecisionTarget {
            target,
            // A script experiment without `metric` targets its wall time.
            metric: match &keys.precision_metric {
                Some((m, _)) => *m,
                None if all_scripts => PrecisionMetric::Wall,
                None => PrecisionMetric::Throughput,
            },
            min_batches: *batches,
            max_batches: max,
            max_duration: keys.max_duration.as_ref().map(|d| d.0),
        };
        if let Some((_, span)) = &keys.precision_metric {
            let script_metric = t.metric == PrecisionMetric::Wall;
            if let Some(c) = configs
                .iter()
                .find(|c| (c.settings.workload == Workload::Script) != script_metric)
            {
                let workload = if c.settings.workload == Workload::Script {
                    "script"
                } else {
                    "http"
                };
                self.error(
                    span,
                    "metric",
                    format!(
                        "metric = \"{}\" does not fit configuration {:?}, a {workload} workload",
                        t.metric.name(),
                        c.label
                    ),
                    Some("scripts use \"wall\"; HTTP workloads throughput, cpu_per_request, latency_p50, latency_p99 or pss_end".into()),
                );
            }
        }
        if configs.len() < 2 {
            self.error(
                &precision_span,
                "precision",
                "precision compares every configuration with the first, and this file has one configuration: the run could never reach its target",
                Some("add a configuration to compare with, or remove precision and set batches".into()),
            );
        }
        // The blocks planned from the start: at least those the rule needs before it may
        // stop, so the plan (and the dry run) shows what will run at the least.
        let first_stop = t.first_stop(configs.len());
        if *batches < first_stop {
            *batches = first_stop;
            t.min_batches = first_stop;
        }
        Some(t)
    }

    /// The design (`Parser::design`: written, or chosen for the configurations) and, when
    /// chosen, its note for the defaults list; `[services]` only with blocks.
    pub(crate) fn design_of(
        &mut self,
        keys: &RootKeys,
        configs: &[Config],
        written: &BTreeSet<&str>,
    ) -> (Design, Option<String>) {
        let (design, note) = self.design(
            keys.written_design.clone(),
            keys.slice.clone(),
            keys.rounds.clone(),
            configs,
            written,
            keys.conditions.repeat_noisy,
            !keys.services.is_empty(),
            keys.fleet.as_ref().is_some_and(|f| f.separate_load()),
        );
        if !keys.services.is_empty() && design != Design::Blocks {
            self.error(
                &keys.services_span,
                "services",
                "[services] with an interleaved or co-scheduled design: not supported yet",
                Some(
                    "run these configurations with design = \"blocks\" (one trial after another)"
                        .into(),
                ),
            );
        }
        (design, note)
    }
}
