//! A block of a fleet run (docs/fleet.md): its plan written as a results database of its
//! own, which a task on a node runs as an ordinary results directory in local scratch, and
//! the import of what it measured back into the run's store, in one transaction.

use std::path::Path;

use anyhow::{Context, Result};
use rusqlite::{params, Connection};

use super::schema::{NOISY_ATTEMPTS, SCHEMA};
use super::write::insert_trial_row;
use super::{Store, DOCTOR_PREFIX, SERVICES_PREFIX};
use crate::record::TrialResult;

/// The directory of block `block` (0-based) of the fleet run in `dir`: its plan, and a
/// directory per attempt holding the attempt's block file (docs/fleet.md).
pub fn block_dir(dir: &Path, block: u32) -> std::path::PathBuf {
    dir.join("fleet")
        .join("blocks")
        .join(format!("{:04}", block + 1))
}

/// The block file of an attempt's directory.
pub const BLOCK_FILE: &str = "block.json";

/// Blocks (0-based) of the fleet run in `dir` whose task left a block file that is not in
/// `imported`: finished on their nodes, and not stored until a controller imports them
/// (`rubyrace run --resume` after `--detach`). Read from the directory only.
pub fn finished_unimported_blocks(dir: &Path, imported: &[u32]) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir(dir.join("fleet").join("blocks")) else {
        return Vec::new();
    };
    let mut out: Vec<u32> = entries
        .flatten()
        .filter_map(|e| {
            let block = e
                .file_name()
                .to_str()?
                .parse::<u32>()
                .ok()?
                .checked_sub(1)?;
            let attempts = std::fs::read_dir(e.path()).ok()?;
            let finished = attempts
                .flatten()
                .any(|a| a.path().join(BLOCK_FILE).is_file());
            (finished && !imported.contains(&block)).then_some(block)
        })
        .collect();
    out.sort_unstable();
    out
}

/// Meta keys a block's plan does not take: what only the run's controller decides (when
/// to stop, the fleet) and what its own sessions recorded.
fn controller_only(key: &str) -> bool {
    matches!(key, "gate" | "fleet" | "precision_end" | "gate_end")
        || key.starts_with(DOCTOR_PREFIX)
        || key.starts_with(SERVICES_PREFIX)
        || key.starts_with(BLOCK_PREFIX)
        || key.starts_with(FAILURE_PREFIX)
}

/// Meta key prefix of an imported block's record (`fleet.block.<block>`).
pub const BLOCK_PREFIX: &str = "fleet.block.";
/// Meta key prefix of a failed attempt's record (`fleet.failure.<block>.<n>`, n from 1).
pub const FAILURE_PREFIX: &str = "fleet.failure.";

impl Store {
    /// Writes the plan of block `block` (0-based) into a new results database `dest`: the
    /// run's meta but for what only the controller decides (an adaptive run's precision
    /// among them: a block is a fixed set of trials), its configurations and the block's
    /// trials. Written in rollback-journal mode, in one transaction, so that it can be
    /// copied whole from shared storage.
    pub fn write_block_plan(&self, block: u32, dest: &Path) -> Result<()> {
        if dest.exists() {
            std::fs::remove_file(dest)
                .with_context(|| format!("cannot replace {}", dest.display()))?;
        }
        let mut plan =
            Connection::open(dest).with_context(|| format!("cannot create {}", dest.display()))?;
        let tx = plan.transaction()?;
        tx.execute_batch(SCHEMA)?;
        tx.execute_batch(NOISY_ATTEMPTS)?;
        let mut meta = self.conn.prepare("SELECT key, value FROM meta")?;
        let rows = meta.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
        for row in rows {
            let (key, value) = row?;
            if controller_only(&key) {
                continue;
            }
            let value = if key == "precision" {
                String::new()
            } else {
                value
            };
            tx.execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2)",
                params![key, value],
            )?;
        }
        tx.execute(
            "INSERT INTO meta (key, value) VALUES ('fleet_block', ?1)",
            params![block.to_string()],
        )?;
        for c in self.configs()? {
            super::insert_config(&tx, &c)?;
        }
        let trials: Vec<_> = self
            .schedule()?
            .into_iter()
            .filter(|t| t.block == block)
            .collect();
        anyhow::ensure!(
            !trials.is_empty(),
            "block {} is not in the schedule",
            block + 1
        );
        super::insert_schedule(&tx, &trials)?;
        tx.commit()
            .with_context(|| format!("cannot write {}", dest.display()))?;
        Ok(())
    }

    /// Stores a block a node ran, in one transaction: its trials, the noisy attempts made
    /// before them (in the order they were made), and the block's record (meta
    /// `fleet.block.<block>`: node, job, attempt, the node's doctor report).
    pub fn import_block(
        &mut self,
        session_id: i64,
        block: u32,
        trials: &[TrialResult],
        noisy: &[TrialResult],
        record: &serde_json::Value,
    ) -> Result<()> {
        let stored = (|| -> Result<()> {
            let tx = self.conn.transaction()?;
            tx.execute_batch(NOISY_ATTEMPTS)?;
            let mut attempts: std::collections::HashMap<usize, u32> = Default::default();
            for r in noisy {
                let attempt = attempts.entry(r.id.trial_id).or_default();
                *attempt += 1;
                tx.execute(
                    "INSERT INTO noisy_attempts (trial_id, attempt, session_id, result) VALUES (?1, ?2, ?3, ?4)",
                    params![r.id.trial_id as i64, *attempt, session_id, serde_json::to_string(r)?],
                )?;
            }
            for r in trials {
                insert_trial_row(&tx, session_id, r)?;
            }
            tx.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
                params![
                    format!("{BLOCK_PREFIX}{block}"),
                    serde_json::to_string(record)?
                ],
            )?;
            tx.commit()?;
            Ok(())
        })();
        stored.map_err(|e| match e.downcast::<rusqlite::Error>() {
            Ok(sql) => self.explain(sql),
            Err(other) => other,
        })
    }

    /// The records of the blocks a fleet ran, in block order.
    pub fn fleet_blocks(&self) -> Result<Vec<serde_json::Value>> {
        let mut stmt = self.conn.prepare(
            "SELECT value FROM meta WHERE key LIKE 'fleet.block.%' ORDER BY CAST(substr(key, 13) AS INTEGER)",
        )?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        rows.map(|r| Ok(serde_json::from_str(&r?)?)).collect()
    }

    /// Records a failed attempt of block `block` (0-based): its task ended without a
    /// complete block file (its node died, it was cancelled, it ran past its time limit,
    /// it failed), as meta `fleet.failure.<block>.<n>`, n counting the block's failures
    /// from 1 over every session.
    pub fn record_fleet_failure(&mut self, block: u32, record: &serde_json::Value) -> Result<()> {
        let prefix = format!("{FAILURE_PREFIX}{block}.");
        let before: i64 = self.conn.query_row(
            "SELECT count(*) FROM meta WHERE substr(key, 1, length(?1)) = ?1",
            params![prefix],
            |r| r.get(0),
        )?;
        self.conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
            params![
                format!("{prefix}{}", before + 1),
                serde_json::to_string(record)?
            ],
        )?;
        Ok(())
    }

    /// The failed attempts of a fleet run's blocks, in block order, each block's in the
    /// order they failed.
    pub fn fleet_failures(&self) -> Result<Vec<serde_json::Value>> {
        let mut stmt = self
            .conn
            .prepare("SELECT key, value FROM meta WHERE substr(key, 1, length(?1)) = ?1")?;
        let rows = stmt.query_map(params![FAILURE_PREFIX], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })?;
        let mut out: Vec<((u64, u64), serde_json::Value)> = Vec::new();
        for row in rows {
            let (key, value) = row?;
            let mut n = key[FAILURE_PREFIX.len()..]
                .split('.')
                .map(|x| x.parse::<u64>().unwrap_or(u64::MAX));
            let order = (n.next().unwrap_or(0), n.next().unwrap_or(0));
            out.push((order, serde_json::from_str(&value)?));
        }
        out.sort_by_key(|(k, _)| *k);
        Ok(out.into_iter().map(|(_, v)| v).collect())
    }

    /// Removes the trials of blocks after `last` (0-based) that are planned and not stored:
    /// an adaptive fleet run that stopped with blocks in flight.
    pub fn drop_unstored_blocks_after(&mut self, last: u32) -> Result<usize> {
        Ok(self.conn.execute(
            "DELETE FROM schedule WHERE block > ?1 AND trial_id NOT IN (SELECT trial_id FROM trials)",
            params![last],
        )?)
    }
}
