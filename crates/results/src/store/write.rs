//! What a run adds to its store: trials (one transaction each, or one per interleaved
//! block), noisy attempts, blocks of an adaptive run, sessions and the doctor's report of
//! each, and how an adaptive run ended.

use anyhow::Result;
use experiment::schedule::{one_block, ScheduledTrial};
use rusqlite::params;

use super::schema::NOISY_ATTEMPTS;
use super::{insert_schedule, now, Store, DOCTOR_PREFIX, SERVICES_PREFIX};
use crate::record::TrialResult;

/// Why a session of a results directory began (the `sessions` table's `kind`): a new run,
/// or the resume of a stored one (which runs only what is not stored yet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionKind {
    Start,
    Resume,
}

impl SessionKind {
    /// The word stored, as `rubyrace report` and docs/results.md spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionKind::Start => "start",
            SessionKind::Resume => "resume",
        }
    }
}

impl Store {
    /// Stores an attempt of a trial that was measured in noise and will be run again.
    pub fn insert_noisy_attempt(
        &mut self,
        session_id: i64,
        attempt: u32,
        r: &TrialResult,
    ) -> Result<()> {
        self.conn.execute_batch(NOISY_ATTEMPTS)?;
        self.conn
            .execute(
                "INSERT INTO noisy_attempts (trial_id, attempt, session_id, result) VALUES (?1, ?2, ?3, ?4)",
                params![r.id.trial_id as i64, attempt, session_id, serde_json::to_string(r)?],
            )
            .map_err(|e| self.explain(e))?;
        Ok(())
    }

    pub fn record_precision_end(&self, end: &experiment::precision::PrecisionEnd) -> Result<()> {
        self.conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('precision_end', ?1)",
            params![serde_json::to_string(end)?],
        )?;
        Ok(())
    }

    /// Sets `key` in the meta table to `value` (a command's own record, such as the
    /// options `check --resume` keeps).
    pub fn record_meta(&self, key: &str, value: &str) -> Result<()> {
        self.conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
            params![key, value],
        )?;
        Ok(())
    }

    pub fn record_gate_end(&self, end: &experiment::gate::GateEnd) -> Result<()> {
        self.conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('gate_end', ?1)",
            params![serde_json::to_string(end)?],
        )?;
        Ok(())
    }

    /// Adds one block to the schedule (an adaptive run that is not precise enough yet), in
    /// one transaction; the trials are those `schedule::schedule` gives for that block.
    pub fn append_block(&mut self, trials: &[ScheduledTrial]) -> Result<()> {
        let tx = self.conn.transaction()?;
        insert_schedule(&tx, trials)?;
        tx.commit()?;
        Ok(())
    }

    /// Adds `n` blocks after the last one, as `schedule::schedule` would have planned them
    /// (the run's seed and order); their indices (from 0).
    pub fn append_blocks(&mut self, n: u32) -> Result<Vec<u32>> {
        let configs = self.configs()?.len();
        let (order, seed) = (self.order()?, self.seed()?);
        let mut added = Vec::new();
        for _ in 0..n {
            let schedule = self.schedule()?;
            let block = schedule.iter().map(|t| t.block + 1).max().unwrap_or(0);
            self.append_block(&one_block(configs, block, order, seed, schedule.len()))?;
            added.push(block);
        }
        Ok(added)
    }

    /// Records the start of a `rubyrace run` invocation; returns its id.
    pub fn begin_session(&self, kind: SessionKind, command: &str) -> Result<i64> {
        self.conn.execute(
            "INSERT INTO sessions (kind, command, started_at) VALUES (?1, ?2, ?3)",
            params![kind.as_str(), command, now()],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    pub fn end_session(&self, session_id: i64, outcome: &str) -> Result<()> {
        self.conn.execute(
            "UPDATE sessions SET finished_at = ?1, outcome = ?2 WHERE session_id = ?3",
            params![now(), outcome, session_id],
        )?;
        Ok(())
    }

    /// Records what `rubyrace doctor` found on the machine when a session started.
    pub fn record_doctor(&self, session_id: i64, report: &doctor::Report) -> Result<()> {
        self.conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
            params![
                format!("{DOCTOR_PREFIX}{session_id}"),
                serde_json::to_string(report)?
            ],
        )?;
        Ok(())
    }

    /// Records the services a session started and the setup commands they saw run
    /// (meta `services_session_N`), as JSON.
    pub fn record_services(
        &self,
        session_id: i64,
        record: &crate::services::InstancesRecord,
    ) -> Result<()> {
        self.conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
            params![
                format!("{SERVICES_PREFIX}{session_id}"),
                serde_json::to_string(record)?
            ],
        )?;
        Ok(())
    }

    /// Stores one trial in one transaction.
    pub fn insert_trial(&mut self, session_id: i64, r: &TrialResult) -> Result<()> {
        self.insert_trials(session_id, std::slice::from_ref(r))
    }

    /// Stores several trials in one transaction, all or none: the trials of an interleaved
    /// block, which were measured together and are redone together.
    pub fn insert_trials(&mut self, session_id: i64, results: &[TrialResult]) -> Result<()> {
        let stored = (|| -> Result<()> {
            let tx = self.conn.transaction()?;
            for r in results {
                insert_trial_row(&tx, session_id, r)?;
            }
            tx.commit()?;
            Ok(())
        })();
        stored.map_err(|e| match e.downcast::<rusqlite::Error>() {
            Ok(sql) => self.explain(sql),
            Err(other) => other,
        })
    }
}

/// One trial's row, within the caller's transaction.
pub(super) fn insert_trial_row(
    tx: &rusqlite::Transaction,
    session_id: i64,
    r: &TrialResult,
) -> Result<()> {
    let json = serde_json::to_string(r)?;
    let latency = r.load.as_ref().map(|l| &l.latency_us);
    let res = r.resources.as_ref();
    let int = |v: Option<u64>| v.map(|v| v as i64);
    tx.execute(
        "INSERT INTO trials (trial_id, config_id, block, position, label, session_id, status,
                reason, started_at, finished_at, wall_s, requests_per_s, requests, error_rate,
                latency_p50_us, latency_p99_us, rss_end_bytes, pss_end_bytes, uss_end_bytes,
                rss_peak_bytes, pss_peak_bytes, cpu_user_us, cpu_system_us, cpu_us_per_request,
                ctx_voluntary, ctx_involuntary, threads_peak, processes_peak, script_wall_s,
                script_user_s, script_system_s, ruby_description, result)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
                ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31, ?32, ?33)",
        params![
            r.id.trial_id as i64,
            r.id.config_id as i64,
            r.id.block,
            r.id.position as i64,
            r.id.label,
            session_id,
            r.status.as_str(),
            r.reason,
            r.started_at,
            r.finished_at,
            r.wall_s,
            r.derived.requests_per_s,
            r.load.as_ref().map(|l| l.requests as i64),
            r.derived.error_rate,
            latency.map(|l| l.p50),
            latency.map(|l| l.p99),
            int(res.map(|x| x.end.rss_bytes)),
            int(res.map(|x| x.end.pss_bytes)),
            int(res.map(|x| x.end.uss_bytes)),
            int(res.map(|x| x.peak_rss_bytes)),
            int(res.map(|x| x.peak_pss_bytes)),
            int(res.map(|x| x.cpu_user_us)),
            int(res.map(|x| x.cpu_system_us)),
            r.derived.cpu_us_per_request,
            int(res.map(|x| x.ctx_voluntary)),
            int(res.map(|x| x.ctx_involuntary)),
            res.map(|x| x.peak_threads),
            res.map(|x| x.peak_processes),
            r.script.as_ref().and_then(|s| s.median_wall_s),
            r.script.as_ref().and_then(|s| s.median_user_s),
            r.script.as_ref().and_then(|s| s.median_system_s),
            r.environment.ruby_description,
            json,
        ],
    )?;
    Ok(())
}
