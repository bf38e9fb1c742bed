//! The repository's own scripts that tests do not otherwise run: `scripts/test-times`, which
//! turns nextest's JUnit report and `scripts/test`'s phase clocks into docs/TESTS.md.

use std::process::Command;

use crate::support::{workspace_root, TempDir};

/// A JUnit report of three tests (one failed, one flaky: failed, then passed on its retry)
/// and two phases give the slowest tests in order, the failure and the flaky test marked,
/// the totals and the phases with their sum, and the CPUs' busy, idle and stolen shares of
/// each phase and of the whole (given only when every phase has its ticks).
#[test]
fn test_times_lists_the_slowest_tests_and_the_phases() {
    let dir = TempDir::new("test-times");
    let junit = dir.write(
        "junit.xml",
        r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="nextest-run" tests="3" failures="1" errors="0" time="125.5">
  <testsuite name="rubyrace-cli::it" tests="2" failures="1" errors="0">
    <testcase name="fleet::six_blocks" classname="rubyrace-cli::it" time="100.25">
      <flakyFailure type="test failure">no block was stored</flakyFailure>
    </testcase>
    <testcase name="load::a_quick_one" classname="rubyrace-cli::it" time="0.5">
      <failure type="test failure">assertion failed</failure>
    </testcase>
  </testsuite>
  <testsuite name="rubyrace-stats" tests="1" failures="0" errors="0">
    <testcase name="tests::bootstrap" classname="rubyrace-stats" time="20"/>
  </testsuite>
</testsuites>
"#,
    );
    let phases = dir.write(
        "phases.tsv",
        "lint\t130\t200\t50\t10\ntests\t1505\t2000\t1800\t200\n",
    );
    // scripts/test-times on the JUnit report and a phases file: the Markdown it writes.
    let times = |phases: &std::path::Path, name: &str| {
        let out = dir.path(name);
        let run = Command::new(workspace_root().join("scripts/test-times"))
            .arg(&out)
            .env("RUBYRACE_JUNIT", &junit)
            .env("RUBYRACE_PHASES", phases)
            .output()
            .expect("run scripts/test-times");
        assert!(run.status.success(), "{run:?}");
        std::fs::read_to_string(&out).unwrap()
    };
    let md = times(&phases, "TESTS.md");
    assert!(
        md.contains("3 run by cargo-nextest, 1 failed, 1 flaky; the run took 2 min 06 s"),
        "{md}"
    );
    assert!(
        md.contains("| lint | 2 min 10 s | 77% | 19% | 4% |"),
        "{md}"
    );
    assert!(
        md.contains("| tests | 25 min 05 s | 50% | 45% | 5% |"),
        "{md}"
    );
    assert!(
        md.contains("| **all** | **27 min 15 s** | 52% | 43% | 5% |"),
        "{md}"
    );
    // Phases written before the ticks were: the times, and no shares.
    let old = dir.write("old-phases.tsv", "lint\t130\ntests\t1505\n");
    let md_old = times(&old, "OLD.md");
    assert!(
        md_old.contains("| lint | 2 min 10 s |  |  |  |"),
        "{md_old}"
    );
    assert!(
        md_old.contains("| **all** | **27 min 15 s** |  |  |  |"),
        "{md_old}"
    );
    let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| `")).collect();
    assert_eq!(
        rows,
        [
            "| `fleet::six_blocks` | rubyrace-cli::it | 100.2 s (flaky: passed on a retry) |",
            "| `tests::bootstrap` | rubyrace-stats | 20.0 s |",
            "| `load::a_quick_one` | rubyrace-cli::it | 0.5 s (failed) |",
        ],
        "{md}"
    );
    assert!(
        md.contains("## Flaky: failed, then passed on a retry\n\n- `fleet::six_blocks` (rubyrace-cli::it)\n"),
        "{md}"
    );
}
