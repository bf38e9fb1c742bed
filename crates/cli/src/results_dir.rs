//! The default results directory of `run`, `check` and `bisect`:
//! `results/NAME-YYYYMMDD-HHMMSS` under the current directory, the experiment's name made
//! safe as a directory name, and the `results/` directory made with a `.gitignore`.

use std::path::{Path, PathBuf};

/// `results/NAME-YYYYMMDD-HHMMSS` (UTC), `-smoke` after the name for a smoke run.
pub(crate) fn default_output(name: &str, smoke: bool) -> PathBuf {
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    // 2026-11-22T01:02:03Z -> 20261122-010203
    let compact: String = stamp
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == 'T')
        .collect::<String>()
        .replace('T', "-");
    let smoke = if smoke { "-smoke" } else { "" };
    PathBuf::from("results").join(format!("{}{smoke}-{compact}", directory_name(name)))
}

/// [`default_output`], with its `results` directory made if need be: one rubyrace makes
/// holds a `.gitignore` of `*`, so results written inside a repository (a CI job's
/// checkout, the app's own tree) are never untracked files in `git status`. A `results`
/// directory that was there already is left as it is (its owner may commit to it).
pub(crate) fn default_output_made(name: &str, smoke: bool) -> Result<PathBuf, String> {
    let dir = default_output(name, smoke);
    make_results_root(&dir)?;
    Ok(dir)
}

/// Makes the `results` directory that holds `dir` (a [`default_output`]) with its
/// `.gitignore`, when it is not there yet.
pub(crate) fn make_results_root(dir: &Path) -> Result<(), String> {
    let root = dir.parent().expect("results/NAME");
    if !root.exists() {
        std::fs::create_dir_all(root)
            .map_err(|e| format!("cannot create {}: {e}", root.display()))?;
        std::fs::write(
            root.join(".gitignore"),
            "# Made by rubyrace: results stay out of git (docs/results.md).\n*\n",
        )
        .map_err(|e| format!("cannot write {}: {e}", root.join(".gitignore").display()))?;
    }
    Ok(())
}

/// An experiment's name as a directory name: letters and digits of any script kept
/// (`ünïcode-тест` stays as it is), every other character a `-`, runs of them one, and
/// never a leading `-` or `.`, which the shell or the CLI would read as a flag or a hidden
/// file (`ünïcode-тест` once became `-n-code------`).
fn directory_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_alphanumeric() || c == '_' {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    let out = out.trim_end_matches('-');
    if out.is_empty() {
        "experiment".to_string()
    } else {
        out.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::directory_name;

    #[test]
    fn names_keep_their_letters_and_never_start_with_a_dash() {
        assert_eq!(directory_name("ünïcode-тест"), "ünïcode-тест");
        assert_eq!(directory_name("yjit vs. interp"), "yjit-vs-interp");
        assert_eq!(directory_name("--help"), "help");
        assert_eq!(directory_name("../etc"), "etc");
        assert_eq!(directory_name("日本語 テスト"), "日本語-テスト");
        assert_eq!(directory_name("***"), "experiment");
        assert_eq!(directory_name("a_b-c"), "a_b-c");
    }
}
