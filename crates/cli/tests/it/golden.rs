//! Golden outputs of the whole pipeline from stored results to answer: the real binary's
//! `rubyrace report` (every format), `compare` and `export --json` on two results
//! directories written by this release (tests/fixtures/results/: a blocks run of two Puma
//! configurations and a script, and an interleaved run), compared byte for byte with the
//! files under tests/golden/. They pin what rubyrace printed before its data path was typed
//! and its crates reshaped: a change that moves one byte of any output, or a
//! release that can no longer read these directories, fails here with the first line that
//! differs.
//!
//! Each run works on a copy of the fixture (SQLite may add files next to a database it
//! opens) in a scratch directory named for the test, not the process, so the paths are the
//! same in every run once the scratch root is written as `SCRATCH`; the binary's path is
//! written as `rubyrace` and the crate's version as `VERSION`. After a change meant to change an output,
//! `UPDATE_GOLDEN=1 cargo test -p rubyrace-cli --test it golden::` rewrites the files, and the
//! diff shows what changed.

use std::path::{Path, PathBuf};

use crate::support::{rubyrace, workspace_root};

fn fixture(name: &str) -> PathBuf {
    workspace_root()
        .join("crates/cli/tests/fixtures/results")
        .join(name)
}

fn golden_dir() -> PathBuf {
    workspace_root().join("crates/cli/tests/golden")
}

/// A scratch directory with a fixed name under the target's temporary directory, so the
/// paths in the outputs are the same in every run; removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("golden-{name}"));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Scratch(path)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Copies of both fixtures (blocks-mixed, interleaved) in a scratch directory named `name`.
fn fixture_copies(name: &str) -> (Scratch, PathBuf, PathBuf) {
    let scratch = Scratch::new(name);
    let mixed = scratch.path("mixed");
    let interleaved = scratch.path("interleaved");
    copy_tree(&fixture("blocks-mixed"), &mixed);
    copy_tree(&fixture("interleaved"), &interleaved);
    (scratch, mixed, interleaved)
}

/// Copies a directory tree (files and directories only).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Runs `rubyrace ARGS` (with `{A}` and `{B}` standing for the copies of the fixtures) and
/// gives its stdout, normalised; it must succeed.
fn output(args: &[&str], a: &Path, b: &Path) -> String {
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let argv: Vec<String> = args
        .iter()
        .map(|s| s.replace("{A}", a).replace("{B}", b))
        .collect();
    let run = rubyrace(&argv);
    assert_eq!(run.code(), Some(0), "{run:?}");
    normalise(&run.stdout)
}

/// `text` with what depends on where the test runs written as words: the scratch directory
/// that holds the fixtures' copies as `SCRATCH`, the binary in this test's own command lines
/// (which a report records) as `rubyrace`, and the version as `VERSION`. The command lines
/// stored in the fixtures are data, left as they are.
fn normalise(text: &str) -> String {
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let mut text = text.to_string();
    for command in ["report", "compare", "export"] {
        text = text.replace(
            &format!("{} {command} ", env!("CARGO_BIN_EXE_rubyrace")),
            &format!("rubyrace {command} "),
        );
    }
    text.replace(scratch.to_str().unwrap(), "SCRATCH")
        .replace(env!("CARGO_PKG_VERSION"), "VERSION")
}

#[test]
fn report_compare_and_export_of_stored_results_print_what_they_printed_before() {
    let (scratch, mixed, interleaved) = fixture_copies("pipeline");

    let mut outputs: Vec<(String, String)> = Vec::new();
    for (name, dir) in [("blocks-mixed", &mixed), ("interleaved", &interleaved)] {
        for (format, file) in [
            ("table", "report.txt"),
            ("markdown", "report.md"),
            ("csv", "report.csv"),
            ("json", "report.json"),
            ("benchstat", "report.benchstat"),
        ] {
            outputs.push((
                format!("{name}/{file}"),
                output(&["report", "{A}", "--format", format], dir, dir),
            ));
        }
        // HTML goes to a file (DIR/report.html unless -o).
        let html = scratch.path(&format!("{name}.html"));
        output(
            &[
                "report",
                "{A}",
                "--format",
                "html",
                "-o",
                html.to_str().unwrap(),
            ],
            dir,
            dir,
        );
        outputs.push((
            format!("{name}/report.html"),
            normalise(&std::fs::read_to_string(&html).unwrap()),
        ));
        outputs.push((
            format!("{name}/export.json"),
            output(&["export", "{A}", "--json"], dir, dir),
        ));
    }
    // The two fixtures side by side, the blocks run's Puma cohorts against the
    // interleaved run's.
    outputs.push((
        "compare/compare.md".into(),
        output(
            &["compare", "{A}", "{B}", "--format", "markdown"],
            &mixed,
            &interleaved,
        ),
    ));
    outputs.push((
        "compare/compare.json".into(),
        output(
            &["compare", "{A}", "{B}", "--format", "json"],
            &mixed,
            &interleaved,
        ),
    ));

    testkit::assert_golden(
        &golden_dir(),
        &outputs,
        "cargo test -p rubyrace-cli --test it golden::",
        false,
    );
}

/// The fixtures are what they claim to be: the blocks one holds HTTP trials and script
/// trials, the interleaved one trials with their slices, every trial valid. (Were a fixture
/// replaced by something else, the goldens above would pin the wrong thing.)
#[test]
fn the_fixtures_hold_a_blocks_run_with_a_script_and_an_interleaved_run() {
    let (_scratch, mixed, interleaved) = fixture_copies("fixtures");
    let export = |dir: &Path| -> serde_json::Value {
        serde_json::from_str(&output(&["export", "{A}", "--json"], dir, dir)).unwrap()
    };
    let m = export(&mixed);
    let trials = m["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 9);
    assert!(trials.iter().all(|t| t["status"] == "valid"));
    assert_eq!(trials.iter().filter(|t| !t["script"].is_null()).count(), 3);
    assert_eq!(trials.iter().filter(|t| !t["load"].is_null()).count(), 6);
    let i = export(&interleaved);
    let trials = i["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 6);
    assert!(trials.iter().all(
        |t| t["status"] == "valid" && t["interleaved"]["slices"].as_array().unwrap().len() == 2
    ));
}
