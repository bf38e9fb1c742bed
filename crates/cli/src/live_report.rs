//! `rubyrace run --live-report`: `DIR/report.html` rewritten after every complete block, to
//! a temporary file renamed over the old one, so a browser tab reloaded at any moment
//! shows a whole report of the blocks done so far. A report that cannot be built or
//! written is said once on stderr and never stops the run. While the run is live the page
//! reloads itself (`<meta http-equiv="refresh">`, every [`REFRESH_S`] seconds); when the
//! run ends, however it ends, it is written once more without it, so a finished report
//! stays still.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use experiment::schedule::ScheduledTrial;
use lab::runner::Progress;
use results::store::Store;
use results::TrialResult;

/// How often the live page reloads itself, seconds.
pub const REFRESH_S: u32 = 15;

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

    /// Writes the report; `live`: the run goes on, so the page reloads itself.
    fn write(dir: &Path, live: bool) -> anyhow::Result<()> {
        let options = report::Options {
            command: format!("rubyrace run --live-report (in {})", dir.display()),
            ..report::Options::default()
        };
        let mut html =
            report::build_rendered(&[dir.to_path_buf()], &options, report::render::Format::Html)?;
        if live {
            html = reloading(&html);
        }
        crate::output::write_file(&LiveReport::path(dir), html.as_bytes())
    }

    /// The run ended (complete, interrupted or stopped): the report of what is stored,
    /// once more, without the reload, if any block was reported live.
    pub fn finish(&mut self) {
        let Some(dir) = &self.dir else { return };
        if self.reported.is_empty() {
            return;
        }
        if let Err(e) = LiveReport::write(dir, false) {
            eprintln!("rubyrace: the last live report was not written: {e:#}");
        }
    }
}

impl Progress for LiveReport {
    fn begin(&mut self, _total: usize, _done: usize, _blocks: u32) {}
    fn trial_started(&mut self, _trial: &ScheduledTrial, _label: &str) {}
    fn note(&mut self, _message: &str) {}

    fn trial_finished(&mut self, result: &TrialResult) {
        let Some(dir) = &self.dir else { return };
        if self.reported.contains(&result.id.block) {
            return;
        }
        let written = LiveReport::block_complete(dir, result.id.block).and_then(|complete| {
            if complete {
                LiveReport::write(dir, true)?;
            }
            Ok(complete)
        });
        match written {
            Ok(true) => {
                self.reported.insert(result.id.block);
            }
            Ok(false) => {}
            Err(e) => {
                let e = format!("{e:#}");
                if self.said.as_ref() != Some(&e) {
                    eprintln!(
                        "rubyrace: the live report after block {} was not written: {e}",
                        result.id.block + 1
                    );
                    self.said = Some(e);
                }
            }
        }
    }
}

/// The page with a reload every [`REFRESH_S`] seconds, right after its charset.
fn reloading(html: &str) -> String {
    let charset = "<meta charset=\"utf-8\">";
    let refresh = format!("<meta http-equiv=\"refresh\" content=\"{REFRESH_S}\">");
    match html.find(charset) {
        Some(at) => {
            let end = at + charset.len();
            format!("{}{refresh}{}", &html[..end], &html[end..])
        }
        None => html.to_string(),
    }
}
