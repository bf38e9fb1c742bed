//! The git a commit-as-configuration needs (`ref` with `app_repo`): a revision resolved to
//! its commit, a file looked up at a commit, and checkouts of a commit as linked worktrees
//! (`git worktree add --detach`), made and removed without touching the user's working
//! tree, index or branches. Every command goes through `environment::git_command`.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::environment::git_command;

/// Runs `git -C dir ARGS`; its trimmed stdout, or what it said on failure.
fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = git_command(dir)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("git could not be started: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        let said = String::from_utf8_lossy(&out.stderr).trim().to_string();
        Err(if said.is_empty() {
            format!("git {} failed ({})", args.join(" "), out.status)
        } else {
            said
        })
    }
}

/// The top directory of the working tree that holds `dir`.
pub fn toplevel(dir: &Path) -> Result<PathBuf, String> {
    git(dir, &["rev-parse", "--show-toplevel"])
        .map(PathBuf::from)
        .map_err(|e| format!("{} is not in a git repository: {e}", dir.display()))
}

/// The full hash of the commit `rev` names in the repository at `repo` (a branch, a tag,
/// `HEAD~3`, a hash).
pub fn commit_of(repo: &Path, rev: &str) -> Result<String, String> {
    if rev.starts_with('-') {
        return Err(format!("{rev:?} is not a revision"));
    }
    git(
        repo,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{rev}^{{commit}}"),
        ],
    )
    .map_err(|_| format!("no commit {rev:?} in {}", repo.display()))
}

/// Whether `path` (relative to the repository's top) is a file at `commit`.
pub fn has_file(repo: &Path, commit: &str, path: &Path) -> bool {
    git(
        repo,
        &["cat-file", "-e", &format!("{commit}:{}", path.display())],
    )
    .is_ok()
}

/// The commit's first line and its author date (ISO 8601).
pub fn describe_commit(repo: &Path, commit: &str) -> Result<(String, String), String> {
    let out = git(repo, &["show", "-s", "--format=%s%x00%aI", commit])?;
    let (subject, date) = out.split_once('\0').unwrap_or((out.as_str(), ""));
    Ok((subject.to_string(), date.to_string()))
}

/// The history a bisection searches: `good`, then every commit on the first-parent line
/// from it to `bad`, oldest first (a merge is one commit of the line, as `git bisect
/// --first-parent` sees it). An error when `good` is not on `bad`'s first-parent line.
pub fn first_parent_history(repo: &Path, good: &str, bad: &str) -> Result<Vec<String>, String> {
    let good = commit_of(repo, good)?;
    let bad = commit_of(repo, bad)?;
    if good == bad {
        return Err("good and bad are the same commit".into());
    }
    let line = git(
        repo,
        &[
            "rev-list",
            "--first-parent",
            "--reverse",
            &format!("{good}..{bad}"),
        ],
    )?;
    let mut history = vec![good.clone()];
    history.extend(line.lines().map(str::to_string));
    let on_the_line = history.get(1).is_some_and(|first| {
        git(repo, &["rev-parse", &format!("{first}^1")]).is_ok_and(|parent| parent == good)
    });
    if !on_the_line {
        return Err(format!(
            "{} is not an ancestor of {} on its first-parent line",
            &good[..12],
            &bad[..12]
        ));
    }
    Ok(history)
}

/// Checks `commit` out at `path` as a linked worktree with a detached HEAD (no branch is
/// made or moved). A worktree already there at that commit is kept.
pub fn worktree_add(repo: &Path, path: &Path, commit: &str) -> Result<(), String> {
    if path.join(".git").exists() {
        if git(path, &["rev-parse", "HEAD"]).is_ok_and(|head| head == commit) {
            return Ok(());
        }
        worktree_remove(repo, path)?;
    }
    let target = path.to_string_lossy();
    git(
        repo,
        &["worktree", "add", "--detach", "--quiet", &target, commit],
    )
    .map(|_| ())
    .map_err(|e| format!("cannot check out {commit} at {target}: {e}"))
}

/// Removes the linked worktree at `path` (with whatever the run left in it) and its entry
/// in the repository's list of worktrees.
pub fn worktree_remove(repo: &Path, path: &Path) -> Result<(), String> {
    let target = path.to_string_lossy();
    let removed = git(repo, &["worktree", "remove", "--force", &target]);
    // A worktree whose directory is gone already leaves only its entry: prune it.
    let _ = git(repo, &["worktree", "prune"]);
    match removed {
        Ok(_) => Ok(()),
        Err(_) if !path.exists() => Ok(()),
        Err(e) => Err(format!("cannot remove the checkout {target}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(dir: &Path, args: &[&str]) {
        let ok = git_command(dir)
            .args(args)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .stdout(Stdio::null())
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    }

    #[test]
    fn a_commit_is_checked_out_beside_the_working_tree_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(repo.join("app")).unwrap();
        run(&repo, &["init", "--quiet"]);
        std::fs::write(repo.join("app/config.ru"), "one").unwrap();
        run(&repo, &["add", "."]);
        run(&repo, &["commit", "--quiet", "-m", "first"]);
        let first = commit_of(&repo, "HEAD").unwrap();
        std::fs::write(repo.join("app/config.ru"), "two").unwrap();
        run(&repo, &["commit", "--quiet", "-am", "second"]);
        std::fs::write(repo.join("app/config.ru"), "uncommitted").unwrap();

        assert_eq!(
            toplevel(&repo.join("app")).unwrap(),
            repo.canonicalize().unwrap()
        );
        assert_eq!(commit_of(&repo, "HEAD~1").unwrap(), first);
        assert!(commit_of(&repo, "nope")
            .unwrap_err()
            .contains("no commit \"nope\""));
        assert!(commit_of(&repo, "--all").is_err());
        assert!(has_file(&repo, &first, Path::new("app/config.ru")));
        assert!(!has_file(&repo, &first, Path::new("app/Gemfile")));
        assert_eq!(describe_commit(&repo, &first).unwrap().0, "first");

        let checkout = dir.path().join("checkouts/first");
        worktree_add(&repo, &checkout, &first).unwrap();
        assert_eq!(
            std::fs::read_to_string(checkout.join("app/config.ru")).unwrap(),
            "one"
        );
        // Again at the same commit: kept.
        worktree_add(&repo, &checkout, &first).unwrap();
        worktree_remove(&repo, &checkout).unwrap();
        assert!(!checkout.exists());
        // The user's working tree, uncommitted change included, and the list of worktrees
        // are as they were.
        assert_eq!(
            std::fs::read_to_string(repo.join("app/config.ru")).unwrap(),
            "uncommitted"
        );
        let list = git(&repo, &["worktree", "list", "--porcelain"]).unwrap();
        assert_eq!(list.matches("worktree ").count(), 1, "{list}");
    }

    /// A history with a merge: the first-parent line from good to bad, the merge one commit
    /// of it; a good that is not on that line, or the same commit twice, is an error.
    #[test]
    fn the_history_is_the_first_parent_line() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        run(&repo, &["init", "--quiet", "--initial-branch=main"]);
        let commit = |name: &str| {
            std::fs::write(repo.join(name), name).unwrap();
            run(&repo, &["add", "."]);
            run(&repo, &["commit", "--quiet", "-m", name]);
            commit_of(&repo, "HEAD").unwrap()
        };
        let good = commit("a");
        let b = commit("b");
        run(&repo, &["checkout", "--quiet", "-b", "side"]);
        let side = commit("s");
        run(&repo, &["checkout", "--quiet", "main"]);
        let c = commit("c");
        run(&repo, &["merge", "--quiet", "--no-edit", "side"]);
        let merge = commit_of(&repo, "HEAD").unwrap();
        let bad = commit("d");
        assert_eq!(
            first_parent_history(&repo, &good, "main").unwrap(),
            vec![good.clone(), b, c, merge, bad]
        );
        assert!(first_parent_history(&repo, &side, "main")
            .unwrap_err()
            .contains("not an ancestor"));
        assert!(first_parent_history(&repo, "main", &good).is_err());
        assert!(first_parent_history(&repo, &good, &good).is_err());
    }
}
