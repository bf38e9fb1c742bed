//! The docs hold to what a reader relies on without checking: each heading once in a file
//! (a second gets another anchor, and two texts compete under one title), the time
//! `make test` is said to take bracketing the time docs/TESTS.md measured, and no file a
//! reader copies (a TOML block) naming this machine's checkout.

use std::path::{Path, PathBuf};

use crate::support::workspace_root;

/// The Markdown files a reader reads: the README, docs/, and every study's README.
fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md")];
    for dir in ["docs", "examples", "bench", "fuzz", "ruby/apps"] {
        let mut walk = vec![root.join(dir)];
        while let Some(dir) = walk.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for path in entries.flatten().map(|e| e.path()) {
                if path.is_dir() {
                    walk.push(path);
                } else if path.extension().is_some_and(|e| e == "md") {
                    files.push(path);
                }
            }
        }
    }
    files.sort();
    files
}

/// A Markdown file's lines outside fenced code blocks, with their numbers (from 1), and its
/// fenced blocks as (info string, body).
struct Fenced<'a> {
    prose: Vec<(usize, &'a str)>,
    blocks: Vec<(String, String)>,
}

fn split_fences(text: &str) -> Fenced<'_> {
    let mut prose = Vec::new();
    let mut blocks = Vec::new();
    let mut open: Option<(String, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let fence = line.trim_start().starts_with("```");
        match (&mut open, fence) {
            (None, true) => {
                open = Some((line.trim_start()[3..].trim().to_string(), String::new()));
            }
            (None, false) => prose.push((i + 1, line)),
            (Some(_), true) => blocks.push(open.take().unwrap()),
            (Some((_, body)), false) => {
                body.push_str(line);
                body.push('\n');
            }
        }
    }
    Fenced { prose, blocks }
}

/// Headings that appear twice in one file: (file's line, heading).
fn repeated_headings(text: &str) -> Vec<(usize, String)> {
    let prose = split_fences(text).prose;
    let mut seen = std::collections::BTreeSet::new();
    let mut repeated = Vec::new();
    for (number, line) in prose {
        let heading = line.starts_with('#') && line.trim_start_matches('#').starts_with(' ');
        if heading && !seen.insert(line.trim().to_string()) {
            repeated.push((number, line.trim().to_string()));
        }
    }
    repeated
}

#[test]
fn no_markdown_file_has_a_heading_twice() {
    let root = workspace_root();
    let files = markdown_files(&root);
    assert!(files.len() > 30, "{files:?}");
    let mut problems = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (line, heading) in repeated_headings(&text) {
            problems.push(format!(
                "{}:{line}: `{heading}` is a heading already",
                file.strip_prefix(&root).unwrap().display()
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_heading_reader_finds_a_repeat_outside_code_only() {
    let text = "# A\n## B\ntext\n```sh\n## B\n```\n## C\n## B\n";
    assert_eq!(repeated_headings(text), vec![(8, "## B".to_string())]);
    assert!(repeated_headings("## B\n### B\n#B\n#B\n").is_empty());
}

/// `A–B minutes` in `line`, the first such range.
fn minutes_range(line: &str) -> Option<(u64, u64)> {
    let at = line.find(" minutes")?;
    let before = &line[..at];
    let start = before
        .rfind(|c: char| !(c.is_ascii_digit() || c == '–'))
        .map_or(0, |i| i + 1);
    let (lo, hi) = before[start..].split_once('–')?;
    Some((lo.parse().ok()?, hi.parse().ok()?))
}

/// docs/TESTS.md's total for the whole of `make test`, in minutes (rounded).
fn measured_minutes(tests_md: &str) -> f64 {
    let row = tests_md
        .lines()
        .find(|l| l.starts_with("| **all** |"))
        .expect("docs/TESTS.md has the `| **all** |` row");
    let figure = row.split("**").nth(3).expect("the row's figure in bold");
    let (minutes, seconds) = figure
        .strip_suffix(" s")
        .and_then(|f| f.split_once(" min "))
        .unwrap_or_else(|| panic!("`{figure}` is not `M min S s`"));
    minutes.parse::<f64>().unwrap() + seconds.parse::<f64>().unwrap() / 60.0
}

/// What the README and the quick start say `make test` takes holds the time docs/TESTS.md
/// measured on a clean clone.
#[test]
fn the_time_make_test_is_said_to_take_is_the_measured_one() {
    let root = workspace_root();
    let measured = measured_minutes(&std::fs::read_to_string(root.join("docs/TESTS.md")).unwrap());
    for (file, marker) in [
        ("README.md", "make test   #"),
        ("docs/quickstart.md", "`make test` runs"),
    ] {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        let line = text
            .lines()
            .find(|l| l.starts_with(marker))
            .unwrap_or_else(|| panic!("{file} has no line starting `{marker}`"));
        let (lo, hi) =
            minutes_range(line).unwrap_or_else(|| panic!("{file}: `{line}` says no `A–B minutes`"));
        assert!(
            lo as f64 - 0.5 <= measured && measured < hi as f64 + 0.5,
            "{file} says {lo}–{hi} minutes; docs/TESTS.md measured {measured:.1}: {line}"
        );
    }
}

#[test]
fn the_time_readers_read_ranges_and_the_total() {
    assert_eq!(
        minutes_range("a test (44–46 minutes on a clean clone)"),
        Some((44, 46))
    );
    assert_eq!(minutes_range("about 25 minutes"), None);
    let tests_md = "| tests | 30 min 32 s |\n| **all** | **43 min 36 s** |\n";
    assert!((measured_minutes(tests_md) - 43.6).abs() < 1e-9);
}

/// A TOML block in the docs is a file a reader copies: it names no path of the checkout it
/// was written in, nor a home directory (a bundled app by its name, a file by a path
/// relative to the experiment file).
#[test]
fn no_toml_block_names_this_checkout() {
    let root = workspace_root();
    let checkout = root.to_string_lossy().into_owned();
    let mut problems = Vec::new();
    for file in markdown_files(&root) {
        let text = std::fs::read_to_string(&file).unwrap();
        for (info, body) in split_fences(&text).blocks {
            if info != "toml" {
                continue;
            }
            // This checkout, wherever it is, and where checkouts were when the docs were
            // written.
            let named = [checkout.as_str(), "\"/work/", "\"/root/", "\"/home/"]
                .into_iter()
                .find(|path| body.contains(path));
            if let Some(path) = named {
                problems.push(format!(
                    "{}: a TOML block names {}",
                    file.strip_prefix(&root).unwrap().display(),
                    path.trim_start_matches('"')
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
