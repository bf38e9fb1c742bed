//! What is read back from a store: the run's meta, configurations and schedule, its
//! settings (design, conditions, precision), the stored trials (typed, or as stored for
//! export), what an adaptive run observed, sessions and the doctor's reports.

use std::collections::HashSet;

use anyhow::{Context, Result};
use experiment::schedule::ScheduledTrial;
use experiment::Config;
use rusqlite::{params, OptionalExtension};

use super::summary::SummaryRow;
use super::{Store, DOCTOR_PREFIX, SERVICES_PREFIX};
use crate::record::TrialResult;

impl Store {
    /// A meta value (`experiment_name`, `created_at`, `doctor.session.N`...).
    /// The run's seed, as stored.
    pub fn seed(&self) -> Result<u64> {
        let text = self.meta("seed")?.context("the results hold no seed")?;
        text.parse()
            .with_context(|| format!("the stored seed {text:?} is not a number"))
    }

    /// The blocks the experiment file planned (`blocks`), as stored: an adaptive run's first
    /// look comes after them.
    pub fn batches(&self) -> Result<u32> {
        let text = self
            .meta("batches")?
            .context("the results hold no planned blocks")?;
        text.parse()
            .with_context(|| format!("the stored planned blocks {text:?} are not a number"))
    }

    /// How the run orders the trials of a block, as stored.
    pub fn order(&self) -> Result<experiment::Order> {
        let text = self.meta("order")?.context("the results hold no order")?;
        text.parse().map_err(|_| {
            anyhow::anyhow!(
                "the stored order {text:?} is none of {}",
                experiment::Order::NAMES.join(", ")
            )
        })
    }

    pub fn meta(&self, key: &str) -> Result<Option<String>> {
        Ok(self
            .conn
            .query_row("SELECT value FROM meta WHERE key = ?1", params![key], |r| {
                r.get(0)
            })
            .optional()?)
    }

    pub fn configs(&self) -> Result<Vec<Config>> {
        let mut stmt = self
            .conn
            .prepare("SELECT config_id, label, axes, settings FROM configs ORDER BY config_id")?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
            ))
        })?;
        let mut configs = Vec::new();
        for row in rows {
            let (id, label, axes, settings) = row?;
            configs.push(Config {
                id: id as usize,
                label,
                axes: serde_json::from_str(&axes).context("stored configuration axes")?,
                settings: serde_json::from_str(&settings)
                    .context("stored configuration settings")?,
            });
        }
        Ok(configs)
    }

    pub fn schedule(&self) -> Result<Vec<ScheduledTrial>> {
        let mut stmt = self.conn.prepare(
            "SELECT trial_id, block, position, config_id FROM schedule ORDER BY trial_id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(ScheduledTrial {
                trial_id: r.get::<_, i64>(0)? as usize,
                block: r.get(1)?,
                position: r.get::<_, i64>(2)? as usize,
                config_id: r.get::<_, i64>(3)? as usize,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The precision target of an adaptive run (`precision = "1%"`), if it is one.
    pub fn precision_target(&self) -> Result<Option<experiment::precision::PrecisionTarget>> {
        match self.meta("precision")? {
            Some(text) if !text.is_empty() => Ok(Some(
                serde_json::from_str(&text).context("the stored precision target")?,
            )),
            _ => Ok(None),
        }
    }

    /// The run's trial conditions (`quiet`, `cpus`, `repeat_noisy`); none for runs made
    /// before they existed.
    pub fn conditions(&self) -> Result<experiment::conditions::TrialConditions> {
        match self.meta("conditions")? {
            Some(text) => serde_json::from_str(&text).context("the stored trial conditions"),
            None => Ok(Default::default()),
        }
    }

    /// The services each session started, by session, in session order.
    pub fn session_services(&self) -> Result<Vec<(i64, crate::services::InstancesRecord)>> {
        let mut stmt = self
            .conn
            .prepare("SELECT key, value FROM meta WHERE key LIKE ?1")?;
        let rows = stmt.query_map([format!("{SERVICES_PREFIX}%")], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (key, value) = row?;
            let session: i64 = key[SERVICES_PREFIX.len()..].parse().unwrap_or(0);
            out.push((
                session,
                serde_json::from_str(&value).context("a stored services record")?,
            ));
        }
        out.sort_by_key(|(s, _)| *s);
        Ok(out)
    }

    /// `[services]` as stored (none for a results directory from before services).
    pub fn services(&self) -> Result<experiment::services::Services> {
        match self.meta("services")? {
            Some(s) if !s.is_empty() => {
                serde_json::from_str(&s).context("the stored services are not readable")
            }
            _ => Ok(Default::default()),
        }
    }

    /// How the run measures its blocks (`design`); blocks for runs made before it existed.
    pub fn design(&self) -> Result<experiment::design::Design> {
        match self.meta("design")? {
            Some(text) => serde_json::from_str(&text).context("the stored design"),
            None => Ok(Default::default()),
        }
    }

    /// The stored noisy attempts of every trial, in trial and attempt order (none when the
    /// table does not exist: an older run, or one that never repeated a trial).
    pub fn noisy_attempts(&self) -> Result<Vec<TrialResult>> {
        let exists: i64 = self.conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'noisy_attempts'",
            [],
            |r| r.get(0),
        )?;
        if exists == 0 {
            return Ok(Vec::new());
        }
        let mut stmt = self
            .conn
            .prepare("SELECT result FROM noisy_attempts ORDER BY trial_id, attempt")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        let mut attempts = Vec::new();
        for row in rows {
            attempts.push(serde_json::from_str(&row?).context("a stored noisy attempt")?);
        }
        Ok(attempts)
    }

    /// How an adaptive run ended, once it has.
    pub fn precision_end(&self) -> Result<Option<experiment::precision::PrecisionEnd>> {
        match self.meta("precision_end")? {
            Some(text) => Ok(Some(
                serde_json::from_str(&text).context("the stored precision_end")?,
            )),
            None => Ok(None),
        }
    }

    /// The gate of a run `rubyrace check` made; none for other runs.
    /// The fleet of a run made with `--slurm`.
    pub fn fleet(&self) -> Result<Option<experiment::fleet::Fleet>> {
        self.meta("fleet")?
            .map(|v| serde_json::from_str(&v).context("stored fleet"))
            .transpose()
    }

    pub fn gate(&self) -> Result<Option<experiment::gate::GateTarget>> {
        self.meta("gate")?
            .map(|text| serde_json::from_str(&text).context("the stored gate"))
            .transpose()
    }

    /// How the gate ended, once it has.
    pub fn gate_end(&self) -> Result<Option<experiment::gate::GateEnd>> {
        self.meta("gate_end")?
            .map(|text| serde_json::from_str(&text).context("the stored gate_end"))
            .transpose()
    }

    /// The command that goes on with this run: a round of a bisection goes on with the
    /// bisection (`bisect --resume` of its directory: a `run --resume` of the round would
    /// measure outside the search), a check's directory (its stored gate) with `check
    /// --resume`, any other with `run --resume` (a fleet run's too: it attaches).
    pub fn resume_command(&self) -> String {
        if let Some(bisection) = crate::bisect::bisection_of(self.dir()) {
            return format!("rubyrace bisect --resume {}", bisection.display());
        }
        let command = if self.gate().ok().flatten().is_some() {
            "check"
        } else {
            "run"
        };
        format!("rubyrace {command} --resume {}", self.dir().display())
    }

    /// A run that decides when to stop (adaptive precision, a gate) and has not decided
    /// yet: the blocks at its rule's next look, which is the fewest blocks the run will
    /// have, `scheduled` being the blocks its schedule holds now. None for a run of a fixed plan, or one whose rule has decided. Progress counts
    /// and times left of such a run are minimums ("at least"), never a promise.
    pub fn next_look(&self, scheduled: u32) -> Result<Option<u32>> {
        let next = |looks: Vec<u32>| {
            looks
                .iter()
                .copied()
                .find(|l| *l >= scheduled)
                .unwrap_or(scheduled)
        };
        if let Some(target) = self.precision_target()? {
            if self.precision_end()?.is_none() {
                // From its first look on, the rule looks after every block.
                let first = target.first_stop(self.configs()?.len());
                return Ok(Some(scheduled.max(first)));
            }
        }
        if let Some(gate) = self.gate()? {
            if self.gate_end()?.is_none() {
                return Ok(Some(next(gate.rule.looks())));
            }
        }
        Ok(None)
    }

    /// The valid trials' values of `metric`, for the precision rule.
    pub fn observations(
        &self,
        metric: experiment::precision::PrecisionMetric,
    ) -> Result<Vec<experiment::precision::Observation>> {
        let sql = format!(
            "SELECT config_id, block, {} FROM trials WHERE status = 'valid' AND {} IS NOT NULL",
            column_of(metric),
            column_of(metric)
        );
        let mut stmt = self.conn.prepare(&sql)?;
        let rows = stmt.query_map([], |r| {
            Ok(experiment::precision::Observation {
                config_id: r.get::<_, i64>(0)? as usize,
                block: r.get(1)?,
                value: r.get::<_, f64>(2)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The measuring time spent so far: the stored trials' own wall time, summed; the trials
    /// of an interleaved block ran at the same time, so a block counts once (its longest).
    pub fn trials_wall_time(&self) -> Result<std::time::Duration> {
        let query = match self.design()? {
            experiment::design::Design::Blocks => "SELECT sum(wall_s) FROM trials",
            experiment::design::Design::Interleaved { .. }
            | experiment::design::Design::CoScheduled { .. } => {
                "SELECT sum(w) FROM (SELECT max(wall_s) AS w FROM trials GROUP BY block)"
            }
        };
        let s: Option<f64> = self.conn.query_row(query, [], |r| r.get(0))?;
        Ok(std::time::Duration::from_secs_f64(
            s.unwrap_or(0.0).max(0.0),
        ))
    }

    /// Trials already stored (whatever their status).
    pub fn completed(&self) -> Result<HashSet<usize>> {
        let mut stmt = self.conn.prepare("SELECT trial_id FROM trials")?;
        let rows = stmt.query_map([], |r| r.get::<_, i64>(0))?;
        Ok(rows
            .map(|r| r.map(|id| id as usize))
            .collect::<Result<_, _>>()?)
    }

    /// The doctor's reports of every session, in session order.
    pub fn doctor_reports(&self) -> Result<Vec<doctor::Report>> {
        let mut stmt = self
            .conn
            .prepare("SELECT key, value FROM meta WHERE key LIKE 'doctor.session.%'")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
        let mut reports = Vec::new();
        for row in rows {
            let (key, value) = row?;
            let session: i64 = key[DOCTOR_PREFIX.len()..].parse().unwrap_or(0);
            if let Ok(report) = serde_json::from_str(&value) {
                reports.push((session, report));
            }
        }
        reports.sort_by_key(|(s, _)| *s);
        Ok(reports.into_iter().map(|(_, r)| r).collect())
    }

    /// The command lines of every `rubyrace run` session, in order.
    pub fn session_commands(&self) -> Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare("SELECT command FROM sessions ORDER BY session_id")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The whole results directory as one JSON document (schema `rubyrace.export/1`, what
    /// `rubyrace export --json` writes): the run's meta, its configurations and schedule,
    /// every stored trial's JSON as it was stored, and the noisy attempts set aside.
    pub fn export(&self) -> Result<serde_json::Value> {
        const META_KEYS: [&str; 17] = [
            "schema_version",
            "rubyrace_version",
            "rubyrace_commit",
            "created_at",
            "experiment_name",
            "experiment_description",
            "experiment_file",
            "experiment_text",
            "seed",
            "batches",
            "order",
            "record_env",
            "smoke",
            "precision",
            "precision_end",
            "conditions",
            "services",
        ];
        let mut meta = serde_json::Map::new();
        for k in META_KEYS {
            if let Some(v) = self.meta(k)? {
                meta.insert(k.to_string(), serde_json::Value::String(v));
            }
        }
        Ok(serde_json::json!({
            "schema": "rubyrace.export/1",
            "meta": meta,
            "configs": self.configs()?,
            "schedule": self.schedule()?,
            "trials": self.trial_results_json()?,
            "noisy_attempts": self.noisy_attempts()?,
            "sessions_services": self
                .session_services()?
                .into_iter()
                .map(|(session, record)| serde_json::json!({ "session": session, "services": record }))
                .collect::<Vec<_>>(),
        }))
    }

    /// Every stored trial, in schedule order. A row that does not read as a trial result
    /// is an error naming the trial and the field.
    pub fn trial_results(&self) -> Result<Vec<TrialResult>> {
        self.stored_trials(|id, text| {
            serde_json::from_str(text)
                .with_context(|| format!("stored trial {id} does not read as a trial result"))
        })
    }

    /// Every stored trial's JSON as it was stored (for `rubyrace export`, which hands it on
    /// unchanged), in schedule order.
    pub fn trial_results_json(&self) -> Result<Vec<serde_json::Value>> {
        self.stored_trials(|id, text| {
            serde_json::from_str(text)
                .with_context(|| format!("stored trial {id} is not valid JSON"))
        })
    }

    /// Every stored trial's `result` column read by `read` (given the trial id), in
    /// schedule order.
    fn stored_trials<T>(&self, read: impl Fn(i64, &str) -> Result<T>) -> Result<Vec<T>> {
        let mut stmt = self
            .conn
            .prepare("SELECT trial_id, result FROM trials ORDER BY trial_id")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?;
        let mut out = Vec::new();
        for row in rows {
            let (id, text) = row?;
            out.push(read(id, &text)?);
        }
        Ok(out)
    }

    /// Per-configuration counts and medians for the end-of-run summary:
    /// (label, valid, invalid, failed, requests/s values, PSS-at-end values, script wall values).
    pub fn summary_rows(&self) -> Result<Vec<SummaryRow>> {
        let configs = self.configs()?;
        let mut rows = Vec::new();
        for c in configs {
            let mut stmt = self.conn.prepare(
                "SELECT status, requests_per_s, rss_end_bytes, pss_end_bytes, script_wall_s
                 FROM trials WHERE config_id = ?1 ORDER BY trial_id",
            )?;
            let mut row = SummaryRow {
                label: c.label.clone(),
                ..SummaryRow::default()
            };
            let trials = stmt.query_map(params![c.id as i64], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, Option<f64>>(1)?,
                    r.get::<_, Option<i64>>(2)?,
                    r.get::<_, Option<i64>>(3)?,
                    r.get::<_, Option<f64>>(4)?,
                ))
            })?;
            for t in trials {
                let (status, rps, rss, pss, wall) = t?;
                match status.as_str() {
                    "valid" => {
                        row.valid += 1;
                        row.requests_per_s.extend(rps);
                        row.rss_end_bytes.extend(rss.map(|v| v as f64));
                        row.pss_end_bytes.extend(pss.map(|v| v as f64));
                        row.script_wall_s.extend(wall);
                    }
                    "invalid" => row.invalid += 1,
                    _ => row.failed += 1,
                }
            }
            rows.push(row);
        }
        Ok(rows)
    }
}

/// The column of the `trials` table that holds a precision metric.
fn column_of(metric: experiment::precision::PrecisionMetric) -> &'static str {
    use experiment::precision::PrecisionMetric;
    match metric {
        PrecisionMetric::Throughput => "requests_per_s",
        PrecisionMetric::CpuPerRequest => "cpu_us_per_request",
        PrecisionMetric::LatencyP50 => "latency_p50_us",
        PrecisionMetric::LatencyP99 => "latency_p99_us",
        PrecisionMetric::PssEnd => "pss_end_bytes",
        PrecisionMetric::Wall => "script_wall_s",
    }
}
