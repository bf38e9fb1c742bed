//! The finished blocks stored: each block file read and its trials moved into the run's
//! directory and stored in one transaction; an adaptive run's blocks in block order, the
//! rule looking after each.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};

use super::Controller;
use crate::task::{block_dir, BlockFile, BLOCK_FILE};

impl Controller<'_> {
    /// A block whose task finished and that is not stored yet.
    pub(super) fn ready(&self) -> Vec<(u32, usize)> {
        self.state
            .attempts
            .iter()
            .filter_map(|(b, attempts)| {
                attempts
                    .iter()
                    .position(|a| a.ended && a.failure.is_none() && !a.imported)
                    .map(|i| (*b, i))
            })
            .collect()
    }

    pub(super) fn has_ready(&self) -> bool {
        !self.ready().is_empty()
    }

    /// Imports the finished blocks: all of them, or, for an adaptive run, those whose
    /// earlier blocks are all stored, in block order, applying the rule after each.
    pub(super) fn import_ready(&mut self, events: &mut dyn FnMut(&str)) -> Result<()> {
        loop {
            let ready = self.ready();
            let next = match &self.target {
                None => ready.first().copied(),
                Some(_) => {
                    let stored = self.stored_blocks()?;
                    let prefix = (0..).find(|b| !stored.contains(b)).unwrap_or(0);
                    ready.iter().find(|(b, _)| *b == prefix).copied()
                }
            };
            let Some((block, i)) = next else {
                // An adaptive run's finished blocks that wait for earlier ones, told once.
                if self.target.is_some() {
                    let stored = self.stored_blocks()?;
                    let prefix = (0..).find(|b| !stored.contains(b)).unwrap_or(0);
                    for (b, i) in ready {
                        if self.order_told.insert(b) {
                            events(&format!(
                                "block {} finished on {}; it is stored after block {} (the rule looks at blocks in order)",
                                b + 1,
                                self.state.attempts[&b][i].nodes,
                                prefix + 1
                            ));
                        }
                    }
                }
                return Ok(());
            };
            self.import(block, i, events)?;
            if let Some(target) = self.target.clone() {
                self.look(&target, events)?;
            }
        }
    }

    fn import(&mut self, block: u32, i: usize, events: &mut dyn FnMut(&str)) -> Result<()> {
        let attempt = self.state.attempts[&block][i].clone();
        let name = attempt.name(block);
        let adir = block_dir(&self.dir, block).join(&name);
        let file = BlockFile::read(&adir.join(BLOCK_FILE))?;
        let mut moved: Vec<(PathBuf, PathBuf)> = Vec::new();
        for t in &file.trials {
            let from = results::store::trial_dir(&adir, t.id.trial_id);
            let to = self.store.trial_dir(t.id.trial_id);
            if !from.exists() {
                continue;
            }
            if to.exists() {
                std::fs::remove_dir_all(&to)
                    .with_context(|| format!("cannot replace {}", to.display()))?;
            }
            std::fs::create_dir_all(to.parent().expect("trials/")).ok();
            std::fs::rename(&from, &to)
                .with_context(|| format!("cannot move {} to {}", from.display(), to.display()))?;
            moved.push((from, to));
        }
        let record = file.record(i + 1);
        if let Err(e) = self.store.import_block(
            self.session,
            block,
            &file.trials,
            &file.noisy_attempts,
            &record,
        ) {
            for (from, to) in moved {
                let _ = std::fs::rename(&to, &from);
            }
            return Err(e.context(format!(
                "cannot store block {} (every block before it is stored; free space or fix the problem, then `rubyrace run --resume {}`)",
                block + 1,
                self.dir.display()
            )));
        }
        self.state.attempts.get_mut(&block).expect("block")[i].imported = true;
        self.state.save(&self.dir)?;
        let wall: f64 = file.trials.iter().map(|t| t.wall_s).sum();
        let bad = file
            .trials
            .iter()
            .filter(|t| t.status != results::TrialStatus::Valid)
            .count();
        self.stored_on
            .entry(file.node.clone())
            .or_default()
            .push(block);
        let per_host: Vec<String> = self
            .stored_on
            .iter()
            .map(|(node, blocks)| format!("{node} {}", blocks.len()))
            .collect();
        events(&format!(
            "block {} stored: {} on {} in {}{}; {} of {} blocks stored ({})",
            block + 1,
            units::count(file.trials.len(), "trial"),
            file.node,
            units::span(Duration::from_secs_f64(wall)),
            if bad > 0 {
                format!(" ({bad} failed or invalid)")
            } else {
                String::new()
            },
            self.stored_blocks()?.len(),
            self.block_trials.len(),
            per_host.join(", ")
        ));
        Ok(())
    }
}
