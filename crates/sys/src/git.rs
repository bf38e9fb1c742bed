//! The git a commit-as-configuration needs (`ref` with `app_repo`): a revision resolved to
//! its commit, a file looked up at a commit, and checkouts of a commit as linked worktrees
//! (`git worktree add --detach`), made and removed without touching the user's working
//! tree, index or branches. Every command goes through `environment::git_command`.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};

use crate::environment::git_command;

/// What went wrong with git: a command that could not start or failed, or what a function
/// here asked of the repository that it does not hold. Its Display is the whole message,
/// the cause included, so the cause is not also a `source` (`{:#}` would print it twice).
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// git could not be started at all.
    #[error("git could not be started: {error}")]
    Spawn { error: std::io::Error },
    /// `git ARGS` ran and failed: what it said on stderr, or, if it said nothing, its
    /// arguments and exit status.
    #[error("{}", failed_message(.args, .status, .stderr))]
    Failed {
        args: Vec<String>,
        status: ExitStatus,
        stderr: String,
    },
    /// [`toplevel`]: `dir` is in no working tree.
    #[error("{} is not in a git repository: {cause}", .dir.display())]
    NotARepository { dir: PathBuf, cause: Box<GitError> },
    /// [`commit_of`]: `rev` looks like an option, not a revision.
    #[error("{rev:?} is not a revision")]
    NotARevision { rev: String },
    /// [`commit_of`]: `rev` names no commit in `repo` (which may be a shallow clone).
    #[error("no commit {rev:?} in {}{}", .repo.display(), shallow_note(*.shallow))]
    NoCommit {
        rev: String,
        repo: PathBuf,
        shallow: bool,
    },
    /// [`snapshot_worktree`]: a step of making the commit failed.
    #[error("cannot snapshot the working tree of {}: {cause}", .repo.display())]
    Snapshot { repo: PathBuf, cause: Box<GitError> },
    /// [`first_parent_history`]: good and bad resolve to one commit.
    #[error("good and bad are the same commit")]
    SameCommit,
    /// [`first_parent_history`]: `good` is not on `bad`'s first-parent line.
    #[error(
        "{} is not an ancestor of {} on its first-parent line",
        short(.good),
        short(.bad)
    )]
    NotOnFirstParentLine { good: String, bad: String },
    /// [`worktree_add`]: `git worktree add` failed.
    #[error("cannot check out {commit} at {target}: {cause}")]
    Checkout {
        commit: String,
        target: String,
        cause: Box<GitError>,
    },
    /// [`worktree_remove`]: `git worktree remove` failed and the checkout is still there.
    #[error("cannot remove the checkout {target}: {cause}")]
    Remove {
        target: String,
        cause: Box<GitError>,
    },
}

fn failed_message(args: &[String], status: &ExitStatus, stderr: &str) -> String {
    if stderr.is_empty() {
        format!("git {} failed ({status})", args.join(" "))
    } else {
        stderr.to_string()
    }
}

fn shallow_note(shallow: bool) -> &'static str {
    if shallow {
        ": this clone is shallow (it holds only the newest commits: `git clone --depth`, \
or actions/checkout without `fetch-depth: 0`); fetch the history with `git fetch --unshallow` \
or check out with `fetch-depth: 0`"
    } else {
        ""
    }
}

/// A commit's hash as messages show it: its first 12 digits.
fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// Runs `git -C dir ARGS`; its trimmed stdout, or what it said on failure.
fn git(dir: &Path, args: &[&str]) -> Result<String, GitError> {
    git_with(dir, args, &[])
}

/// [`git`] with `env` added to git's environment (a private index, an identity).
fn git_with(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &std::ffi::OsStr)],
) -> Result<String, GitError> {
    let out = git_command(dir)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .map_err(|error| GitError::Spawn { error })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(GitError::Failed {
            args: args.iter().map(|a| a.to_string()).collect(),
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// The top directory of the working tree that holds `dir`.
pub fn toplevel(dir: &Path) -> Result<PathBuf, GitError> {
    git(dir, &["rev-parse", "--show-toplevel"])
        .map(PathBuf::from)
        .map_err(|e| GitError::NotARepository {
            dir: dir.to_path_buf(),
            cause: Box::new(e),
        })
}

/// The full hash of the commit `rev` names in the repository at `repo` (a branch, a tag,
/// `HEAD~3`, a hash).
pub fn commit_of(repo: &Path, rev: &str) -> Result<String, GitError> {
    if rev.starts_with('-') {
        return Err(GitError::NotARevision {
            rev: rev.to_string(),
        });
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
    .map_err(|_| GitError::NoCommit {
        rev: rev.to_string(),
        repo: repo.to_path_buf(),
        shallow: is_shallow(repo),
    })
}

/// Whether the repository is a shallow clone (`git clone --depth N`): older commits are
/// missing, so a ref to them names nothing.
pub fn is_shallow(repo: &Path) -> bool {
    git(repo, &["rev-parse", "--is-shallow-repository"]).is_ok_and(|out| out == "true")
}

/// The paths (from the repository's top) that HEAD does not hold as they are: modified,
/// staged, deleted and untracked files (ignored ones are not changes), sorted.
pub fn uncommitted_changes(repo: &Path) -> Result<Vec<String>, GitError> {
    let changed = git(repo, &["diff", "--name-only", "HEAD", "--"])?;
    let untracked = git(
        repo,
        &["ls-files", "--others", "--exclude-standard", "--full-name"],
    )?;
    let mut paths: Vec<String> = changed
        .lines()
        .chain(untracked.lines())
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    paths.sort();
    paths.dedup();
    Ok(paths)
}

/// A commit of the working tree as it is now, as `git add -A && git commit` would make it
/// (tracked changes and untracked files; ignored files left out), on top of HEAD, made
/// without touching the working tree, the index, any branch or the stash: it is written
/// through a private index file, and no ref names it (git keeps such a commit for its
/// `gc.pruneExpire`, two weeks by default, long enough for a resume).
pub fn snapshot_worktree(repo: &Path, private_index: &Path) -> Result<String, GitError> {
    let index = [("GIT_INDEX_FILE", private_index.as_os_str())];
    let head = commit_of(repo, "HEAD")?;
    let message = format!(
        "rubyrace: the working tree on {} (uncommitted changes)",
        &head[..12]
    );
    let (name, email) = (
        std::ffi::OsStr::new("rubyrace"),
        std::ffi::OsStr::new("rubyrace@localhost"),
    );
    let identity = [
        ("GIT_AUTHOR_NAME", name),
        ("GIT_AUTHOR_EMAIL", email),
        ("GIT_COMMITTER_NAME", name),
        ("GIT_COMMITTER_EMAIL", email),
    ];
    let made = (|| {
        git_with(repo, &["read-tree", &head], &index)?;
        git_with(repo, &["add", "--all", "--", "."], &index)?;
        let tree = git_with(repo, &["write-tree"], &index)?;
        git_with(
            repo,
            &["commit-tree", &tree, "-p", &head, "-m", &message],
            &identity,
        )
    })();
    let _ = std::fs::remove_file(private_index);
    made.map_err(|e| GitError::Snapshot {
        repo: repo.to_path_buf(),
        cause: Box::new(e),
    })
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
pub fn describe_commit(repo: &Path, commit: &str) -> Result<(String, String), GitError> {
    let out = git(repo, &["show", "-s", "--format=%s%x00%aI", commit])?;
    let (subject, date) = out.split_once('\0').unwrap_or((out.as_str(), ""));
    Ok((subject.to_string(), date.to_string()))
}

/// How many commits the first-parent line up to `commit` holds, `commit` included: its
/// position in the history a team reads (`rubyrace history` orders series by it).
pub fn first_parent_position(repo: &Path, commit: &str) -> Result<i64, GitError> {
    let count = git(repo, &["rev-list", "--first-parent", "--count", commit])?;
    Ok(count.parse().unwrap_or(0))
}

/// The history a bisection searches: `good`, then every commit on the first-parent line
/// from it to `bad`, oldest first (a merge is one commit of the line, as `git bisect
/// --first-parent` sees it). An error when `good` is not on `bad`'s first-parent line.
pub fn first_parent_history(repo: &Path, good: &str, bad: &str) -> Result<Vec<String>, GitError> {
    let good = commit_of(repo, good)?;
    let bad = commit_of(repo, bad)?;
    if good == bad {
        return Err(GitError::SameCommit);
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
        return Err(GitError::NotOnFirstParentLine { good, bad });
    }
    Ok(history)
}

/// Checks `commit` out at `path` as a linked worktree with a detached HEAD (no branch is
/// made or moved). A worktree already there at that commit is kept.
pub fn worktree_add(repo: &Path, path: &Path, commit: &str) -> Result<(), GitError> {
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
    .map_err(|e| GitError::Checkout {
        commit: commit.to_string(),
        target: target.to_string(),
        cause: Box::new(e),
    })
}

/// Removes the linked worktree at `path` (with whatever the run left in it) and its entry
/// in the repository's list of worktrees.
pub fn worktree_remove(repo: &Path, path: &Path) -> Result<(), GitError> {
    let target = path.to_string_lossy();
    let removed = git(repo, &["worktree", "remove", "--force", &target]);
    // A worktree whose directory is gone already leaves only its entry: prune it.
    let _ = git(repo, &["worktree", "prune"]);
    match removed {
        Ok(_) => Ok(()),
        Err(_) if !path.exists() => Ok(()),
        Err(e) => Err(GitError::Remove {
            target: target.to_string(),
            cause: Box::new(e),
        }),
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
            .to_string()
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

    /// The working tree as a commit: an edited file, a new file and a new untracked file
    /// are in it, an ignored file is not; the working tree, the index (one staged change),
    /// the branch and the stash are as they were. A shallow clone's missing commit says so.
    #[test]
    fn the_working_tree_is_snapshot_without_touching_it() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(repo.join("app")).unwrap();
        run(&repo, &["init", "--quiet", "--initial-branch=main"]);
        std::fs::write(repo.join(".gitignore"), "log/\n").unwrap();
        std::fs::write(repo.join("app/config.ru"), "one").unwrap();
        run(&repo, &["add", "."]);
        run(&repo, &["commit", "--quiet", "-m", "first"]);
        run(
            &repo,
            &["commit", "--quiet", "--allow-empty", "-m", "second"],
        );
        let head = commit_of(&repo, "HEAD").unwrap();
        assert!(uncommitted_changes(&repo).unwrap().is_empty());
        std::fs::write(repo.join("app/config.ru"), "edited").unwrap();
        std::fs::write(repo.join("app/staged.rb"), "staged").unwrap();
        run(&repo, &["add", "app/staged.rb"]);
        std::fs::write(repo.join("app/new.rb"), "untracked").unwrap();
        std::fs::create_dir_all(repo.join("log")).unwrap();
        std::fs::write(repo.join("log/dev.log"), "ignored").unwrap();
        let mut changes = uncommitted_changes(&repo).unwrap();
        changes.sort();
        assert_eq!(changes, ["app/config.ru", "app/new.rb", "app/staged.rb"]);
        let status = git(&repo, &["status", "--porcelain"]).unwrap();

        let snapshot = snapshot_worktree(&repo, &dir.path().join("index")).unwrap();
        assert_ne!(snapshot, head);
        let show = |path: &str| git(&repo, &["show", &format!("{snapshot}:{path}")]);
        assert_eq!(show("app/config.ru").unwrap(), "edited");
        assert_eq!(show("app/new.rb").unwrap(), "untracked");
        assert_eq!(show("app/staged.rb").unwrap(), "staged");
        assert!(show("log/dev.log").is_err(), "ignored files stay out");
        assert_eq!(
            git(&repo, &["rev-parse", &format!("{snapshot}^1")]).unwrap(),
            head
        );
        assert!(!dir.path().join("index").exists());
        assert_eq!(git(&repo, &["status", "--porcelain"]).unwrap(), status);
        assert_eq!(commit_of(&repo, "HEAD").unwrap(), head);
        assert_eq!(git(&repo, &["stash", "list"]).unwrap(), "");

        let shallow = dir.path().join("shallow");
        run(
            dir.path(),
            &[
                "clone",
                "--quiet",
                "--depth",
                "1",
                &format!("file://{}", repo.display()),
                "shallow",
            ],
        );
        assert!(is_shallow(&shallow));
        assert!(!is_shallow(&repo));
        let missing = commit_of(&shallow, "HEAD~1").unwrap_err().to_string();
        assert!(missing.contains("this clone is shallow"), "{missing}");
        assert!(missing.contains("fetch-depth: 0"), "{missing}");
        assert!(!commit_of(&repo, "nope")
            .unwrap_err()
            .to_string()
            .contains("shallow"));
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
            .to_string()
            .contains("not an ancestor"));
        assert!(first_parent_history(&repo, "main", &good).is_err());
        assert!(first_parent_history(&repo, &good, &good).is_err());
    }
}
