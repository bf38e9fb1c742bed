//! An adaptive run (`precision`) on the fleet: the stopping rule looked at after each block
//! stored in block order, the blocks after its decision cancelled and dropped, and `nodes`
//! blocks kept in flight while it has not decided.

use anyhow::Result;
use experiment::precision::{PrecisionEnd, PrecisionTarget};

use super::Controller;

impl Controller<'_> {
    /// The adaptive rule after a block is stored (in block order).
    pub(super) fn look(
        &mut self,
        target: &PrecisionTarget,
        events: &mut dyn FnMut(&str),
    ) -> Result<()> {
        let stored = self.stored_blocks()?;
        let prefix = (0..).find(|b| !stored.contains(b)).unwrap_or(0);
        let initial = self.store.batches()?;
        if prefix < initial {
            return Ok(());
        }
        let configs = self.store.configs()?.len();
        let (status, reason) = lab::runner::precision_look(self.store, target, configs, prefix)?;
        let widest = status.widest.as_ref().and_then(|w| w.half_width);
        events(&format!(
            "after {}: widest interval ±{}{}",
            units::count(prefix as usize, "block"),
            widest.map_or("?".into(), |w| format!("{:.2}%", 100.0 * w)),
            reason.map_or(String::new(), |r| format!(": stop ({r})"))
        ));
        let Some(reason) = reason else { return Ok(()) };
        self.store
            .record_precision_end(&PrecisionEnd::at(reason, prefix, target, &status))?;
        self.target = None;
        // Blocks after the stop: cancelled if in flight, and out of the schedule.
        let beyond: Vec<String> = self
            .state
            .attempts
            .iter()
            .filter(|(b, _)| **b >= prefix)
            .flat_map(|(_, a)| a.iter().filter(|a| !a.ended).map(|a| a.job.clone()))
            .collect();
        for (b, attempts) in self.state.attempts.iter_mut() {
            if *b >= prefix {
                for a in attempts.iter_mut().filter(|a| !a.imported) {
                    if !a.ended {
                        a.ended = true;
                        a.state = "CANCELLED".into();
                    }
                    a.failure
                        .get_or_insert_with(|| "after the stopping rule's decision".into());
                }
            }
        }
        if !beyond.is_empty() {
            let _ = self.cancel_tasks(&beyond, prefix);
        }
        let dropped = self
            .store
            .drop_unstored_blocks_after(prefix.saturating_sub(1))?;
        if dropped > 0 {
            events(&format!(
                "{} after block {prefix} left unrun or not stored (they came after the decision)",
                units::count(dropped, "planned trial")
            ));
        }
        self.refresh_block_trials()?;
        self.state.save(&self.dir)
    }

    /// An adaptive run keeps `nodes` blocks in flight while its rule has not decided.
    pub(super) fn keep_in_flight(&mut self, events: &mut dyn FnMut(&str)) -> Result<()> {
        let Some(target) = self.target.clone() else {
            return Ok(());
        };
        let in_flight = self
            .state
            .attempts
            .values()
            .flatten()
            .filter(|a| !a.ended)
            .count()
            + self.ready().len();
        let planned = self.block_trials.len() as u32;
        let room = (self.fleet.nodes as usize).saturating_sub(in_flight);
        let add = room.min(target.max_batches.saturating_sub(planned) as usize);
        if add == 0 {
            return Ok(());
        }
        let added = self.store.append_blocks(add as u32)?;
        self.refresh_block_trials()?;
        self.submit(&added, events)
    }
}
