//! What the tests of several crates share (a dev-dependency only): golden files compared
//! byte for byte, with the first line that differs and `UPDATE_GOLDEN=1` to rewrite them;
//! a free loopback port; and the number words the docs count with.
#![forbid(unsafe_code)]

use std::net::TcpListener;
use std::path::Path;

/// Compares every `(file name, output)` with the file of that name under `dir`, or, with
/// `UPDATE_GOLDEN` set, writes them there. Panics with every file that differs (and the
/// first line where it does), naming `rerun`, the command that rewrites them. A file under
/// `dir` that is no output any more is a failure too, unless `dir` holds other tests'
/// files (`own_dir` false).
pub fn assert_golden(dir: &Path, outputs: &[(String, String)], rerun: &str, own_dir: bool) {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut changed = Vec::new();
    for (name, got) in outputs {
        assert!(!got.is_empty(), "{name} is empty");
        let path = dir.join(name);
        if update {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (UPDATE_GOLDEN=1 {rerun} writes it)",
                path.display()
            )
        });
        if *got != want {
            changed.push(format!("{name}: {}", first_difference(got, &want)));
        }
    }
    if own_dir && !update {
        for entry in std::fs::read_dir(dir).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            assert!(
                outputs.iter().any(|(n, _)| *n == name),
                "{name} in {} is no output any more",
                dir.display()
            );
        }
    }
    assert!(
        changed.is_empty(),
        "outputs differ from {} (UPDATE_GOLDEN=1 {rerun} rewrites them if that is meant):\n{}",
        dir.display(),
        changed.join("\n")
    );
}

/// The first line where `got` and `want` differ, for a failure message.
pub fn first_difference(got: &str, want: &str) -> String {
    let (mut g, mut w) = (got.lines(), want.lines());
    for number in 1.. {
        match (g.next(), w.next()) {
            (Some(a), Some(b)) if a == b => continue,
            (None, None) => break,
            (a, b) => return format!("line {number}:\n  now:    {a:?}\n  before: {b:?}"),
        }
    }
    "the same lines, different line endings".into()
}

/// A loopback port nothing listens on right now (bound, then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// English number words from zero to twenty, as the docs count things ("a Cargo
/// workspace of thirteen crates", "always all eighteen").
pub const NUMBER_WORDS: [&str; 21] = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_difference_names_its_line() {
        assert_eq!(
            first_difference("a\nb\nc", "a\nx\nc"),
            "line 2:\n  now:    Some(\"b\")\n  before: Some(\"x\")"
        );
        assert_eq!(
            first_difference("a\n", "a\nb\n"),
            "line 2:\n  now:    None\n  before: Some(\"b\")"
        );
        assert_eq!(
            first_difference("a\r\n", "a\n"),
            "the same lines, different line endings"
        );
    }

    #[test]
    fn a_golden_file_that_differs_fails_and_one_that_matches_passes() {
        let dir = std::env::temp_dir().join(format!("testkit-golden-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.txt"), "one\ntwo\n").unwrap();
        let same = vec![("a.txt".to_string(), "one\ntwo\n".to_string())];
        assert_golden(&dir, &same, "cargo test", true);
        let other = vec![("a.txt".to_string(), "one\nthree\n".to_string())];
        let failed = std::panic::catch_unwind(|| assert_golden(&dir, &other, "cargo test", true));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(failed.is_err());
    }
}
