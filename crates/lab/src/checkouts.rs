//! The checkouts of a run's commits (`ref` with `app_repo`): each commit a configuration
//! names is checked out as a linked git worktree in the results directory
//! (`checkouts/<commit>`), never in the user's working tree, before the first trial, and
//! removed with its entry in the repository's worktree list when the session ends however
//! it ends (a resume checks out again). Settings move into the checkout with
//! `ConfigSettings::in_checkout`, so the server, its Gemfile and `setup` run there.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};
use experiment::{AppCommit, Config, ConfigSettings};

/// Where the commit `commit` of a run in `results_dir` is checked out.
pub fn checkout_path(results_dir: &Path, commit: &str) -> PathBuf {
    results_dir
        .join("checkouts")
        .join(&commit[..commit.len().min(12)])
}

/// `text` (a trial's reason, a server's error line) with the paths inside the checkouts of
/// a run in `results_dir` said as the repository says them: `checkouts/<commit>/app/x.rb`
/// becomes `app/x.rb`, since the checkout is gone once the session ends and the path
/// inside the repository is what a person opens.
pub fn in_repository_terms(text: &str, results_dir: &Path) -> String {
    let root = format!("{}/", results_dir.join("checkouts").display());
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(&root) {
        out.push_str(&rest[..at]);
        let after = &rest[at + root.len()..];
        match after.find('/') {
            Some(slash) if after[..slash].chars().all(|c| c.is_ascii_hexdigit()) => {
                rest = &after[slash + 1..];
            }
            _ => {
                out.push_str(&root);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// `settings` moved into its commit's checkout under `results_dir` (unchanged without
/// `app_commit`).
pub fn settings_in_checkout(results_dir: &Path, settings: &ConfigSettings) -> ConfigSettings {
    match &settings.app_commit {
        Some(c) => settings.in_checkout(&checkout_path(results_dir, &c.commit)),
        None => settings.clone(),
    }
}

/// The checkouts of one session; removed when dropped.
#[derive(Default)]
pub struct Checkouts {
    made: Vec<(AppCommit, PathBuf)>,
}

impl Checkouts {
    /// Checks out every commit `configs` name, under `results_dir`. On an error, what was
    /// made so far is removed.
    pub fn prepare(results_dir: &Path, configs: &[Config]) -> Result<Checkouts> {
        let mut checkouts = Checkouts::default();
        for c in configs
            .iter()
            .filter_map(|c| c.settings.app_commit.as_ref())
        {
            let path = checkout_path(results_dir, &c.commit);
            if checkouts.made.iter().any(|(_, p)| *p == path) {
                continue;
            }
            sys::git::worktree_add(&c.repo, &path, &c.commit)
                .map_err(|e| anyhow!("ref = {:?} of {}: {e}", c.git_ref, c.repo.display()))?;
            checkouts.made.push((c.clone(), path));
        }
        Ok(checkouts)
    }

    /// The checkouts made, as (commit, path).
    pub fn made(&self) -> impl Iterator<Item = (&AppCommit, &Path)> {
        self.made.iter().map(|(c, p)| (c, p.as_path()))
    }
}

impl Drop for Checkouts {
    fn drop(&mut self) {
        for (c, path) in self.made.drain(..) {
            if let Err(e) = sys::git::worktree_remove(&c.repo, &path) {
                eprintln!("rubyrace: {e}");
            }
            // `checkouts/` itself, once empty.
            if let Some(parent) = path.parent() {
                let _ = std::fs::remove_dir(parent);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_names_the_file_in_the_repository_not_in_the_checkout() {
        let dir = Path::new("/r/results/x");
        assert_eq!(
            in_repository_terms(
                "the server exited: /r/results/x/checkouts/0123456789ab/app/config.ru:3: syntax error",
                dir
            ),
            "the server exited: app/config.ru:3: syntax error"
        );
        // Anything else is as it was.
        let other = "from /r/results/x/checkouts/notes/a.rb and /elsewhere/app.rb";
        assert_eq!(in_repository_terms(other, dir), other);
    }
}
