//! `rubyrace run --live-report`: `DIR/report.html` rewritten after every complete block, to
//! a temporary file renamed over the old one, so a browser tab reloaded at any moment
//! shows a whole report of the blocks done so far. A report that cannot be built or
//! written is said once on stderr and never stops the run.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use experiment::schedule::ScheduledTrial;
use lab::runner::Progress;
use results::store::Store;
use results::TrialResult;

pub struct LiveReport {
    /// The results directory; `None` without `--live-report` (then nothing is done).
    dir: Option<PathBuf>,
    /// Blocks already reported, so a block is written once.
    reported: BTreeSet<u32>,
    /// The last failure said, so it is said once.
    said: Option<String>,
}

impl LiveReport {
    pub fn new(dir: &Path, enabled: bool) -> LiveReport {
        LiveReport {
            dir: enabled.then(|| dir.to_path_buf()),
            reported: BTreeSet::new(),
            said: None,
        }
    }

    /// The report file.
    pub fn path(dir: &Path) -> PathBuf {
        dir.join("report.html")
    }

    /// Every trial of `block` is stored.
    fn block_complete(dir: &Path, block: u32) -> anyhow::Result<bool> {
        let store = Store::open_read_only(dir)?;
        let done = store.completed()?;
        Ok(store
            .schedule()?
            .iter()
            .filter(|t| t.block == block)
            .all(|t| done.contains(&t.trial_id)))
    }

    fn write(dir: &Path) -> anyhow::Result<()> {
        let options = report::Options {
            command: format!("rubyrace run --live-report (in {})", dir.display()),
            ..report::Options::default()
        };
        let html =
            report::build_rendered(&[dir.to_path_buf()], &options, report::render::Format::Html)?;
        crate::output::write_file(&LiveReport::path(dir), html.as_bytes())
    }
}

impl Progress for LiveReport {
    fn begin(&mut self, _total: usize, _done: usize, _blocks: u32) {}
    fn trial_started(&mut self, _trial: &ScheduledTrial, _label: &str) {}
    fn note(&mut self, _message: &str) {}

    fn trial_finished(&mut self, result: &TrialResult) {
        let Some(dir) = &self.dir else { return };
        if self.reported.contains(&result.block) {
            return;
        }
        let written = LiveReport::block_complete(dir, result.block).and_then(|complete| {
            if complete {
                LiveReport::write(dir)?;
            }
            Ok(complete)
        });
        match written {
            Ok(true) => {
                self.reported.insert(result.block);
            }
            Ok(false) => {}
            Err(e) => {
                let e = format!("{e:#}");
                if self.said.as_ref() != Some(&e) {
                    eprintln!(
                        "rubyrace: the live report after block {} was not written: {e}",
                        result.block + 1
                    );
                    self.said = Some(e);
                }
            }
        }
    }
}
