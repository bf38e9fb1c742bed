//! The commit the rubyrace binary is built from, for `rubyrace --version` and every results
//! directory (`meta.rubyrace_commit`): `RUBYRACE_BUILD_COMMIT` when set (a package built
//! from an archive without git's history), else `git rev-parse HEAD` of this checkout,
//! else "unknown". Rerun when HEAD or the branch it names moves.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("git")
        .arg("-C")
        .arg(&root)
        .args(args)
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=RUBYRACE_BUILD_COMMIT");
    let (commit, date) = match std::env::var("RUBYRACE_BUILD_COMMIT") {
        Ok(commit) if !commit.is_empty() => (commit, String::new()),
        _ => {
            // HEAD, the branch file it points to and the packed refs: a commit or a
            // checkout changes one of them.
            for name in ["HEAD", "packed-refs"] {
                if let Some(path) = git(&["rev-parse", "--git-path", name]) {
                    watch(&path);
                }
            }
            if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
                if let Some(path) = git(&["rev-parse", "--git-path", &branch]) {
                    watch(&path);
                }
            }
            (
                git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into()),
                git(&["show", "-s", "--format=%cs", "HEAD"]).unwrap_or_default(),
            )
        }
    };
    println!("cargo:rustc-env=RUBYRACE_COMMIT={commit}");
    // `rubyrace --version`: "0.1.0 (commit 0123456789ab, 2026-11-29)".
    let short = &commit[..commit.len().min(12)];
    let version = env!("CARGO_PKG_VERSION");
    let long = match date.as_str() {
        "" => format!("{version} (commit {short})"),
        date => format!("{version} (commit {short}, {date})"),
    };
    println!("cargo:rustc-env=RUBYRACE_VERSION_LONG={long}");
}

/// Reruns this script when `path` (relative to the checkout, or absolute) changes; a path
/// that does not exist is not watched (cargo would rerun on every build).
fn watch(path: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let path = root.join(path);
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}
