//! Every ready-made experiment in `examples/<name>/experiment.toml` runs on this machine's
//! Ruby in smoke mode (two short blocks), with the real binary and real servers, and its
//! report has one cohort per configuration of its plan, every trial valid.
//!
//! Each known example is a test of its own (`cargo test -p rubyrace-cli --test it
//! examples::app_servers` runs one); a new example directory is picked up without editing this file, by
//! `examples_without_a_test_of_their_own`, until it is added to the list. Under `make test`
//! one example runs at a time, beside one other test (`.config/nextest.toml`): what is
//! checked is that every trial is valid and every setting in force, not a figure.

use std::path::PathBuf;
use std::time::Duration;

use crate::support::{rubyrace, spawn, workspace_root, TempDir};
use serde_json::Value;

/// The names of the directories of `examples/` that hold an `experiment.toml`, sorted.
fn examples() -> Vec<String> {
    example_dirs_with("experiment.toml")
}

/// The directories under examples/ that hold `file`, sorted.
fn example_dirs_with(file: &str) -> Vec<String> {
    let dir = workspace_root().join("examples");
    let mut found: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().join(file).is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    found
}

/// Runs `examples/<name>/experiment.toml` in smoke mode and checks its report.
fn smoke_test(name: &str) {
    let file: PathBuf = workspace_root()
        .join("examples")
        .join(name)
        .join("experiment.toml");
    assert!(file.is_file(), "examples/{name}/experiment.toml is missing");
    assert!(
        file.with_file_name("README.md").is_file(),
        "examples/{name} has no README.md"
    );
    let scratch = TempDir::new(&format!("example-{name}"));
    let plan = rubyrace(&["run", file.to_str().unwrap(), "--dry-run", "--json"]);
    assert_eq!(plan.code(), Some(0), "{name}: {plan:?}");
    let plan: Value = serde_json::from_str(&plan.stdout).unwrap();
    let mut labels: Vec<String> = plan["configs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["label"].as_str().unwrap().to_string())
        .collect();

    let results = scratch.path("results");
    let run = spawn(&[
        "run",
        file.to_str().unwrap(),
        "--smoke",
        "-o",
        results.to_str().unwrap(),
    ])
    .wait(Duration::from_secs(300));
    assert_eq!(run.code(), Some(0), "{name}: {run:?}");

    let report = rubyrace(&["report", results.to_str().unwrap(), "--format", "json"]);
    assert_eq!(report.code(), Some(0), "{name}: {report:?}");
    let report: Value = serde_json::from_str(&report.stdout).unwrap();
    let mut cohorts: Vec<String> = report["cohorts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            assert_eq!(c["valid"], 2, "{name}: {c}");
            c["name"].as_str().unwrap().to_string()
        })
        .collect();
    labels.sort();
    cohorts.sort();
    assert_eq!(cohorts, labels, "{name}");
    // Settings that are verified in the server were in force in every trial.
    for c in report["cohorts"].as_array().unwrap() {
        for v in c["verified"].as_array().unwrap() {
            assert_eq!(v["verified"], v["checked"], "{name}: {v}");
        }
    }
}

/// One test per known example, and the list of them.
macro_rules! examples {
    ($($test:ident => $name:literal,)*) => {
        const LISTED: &[&str] = &[$($name),*];
        $(
            #[test]
            fn $test() {
                smoke_test($name);
            }
        )*
    };
}

examples! {
    allocators => "allocators",
    app_servers => "app-servers",
    demo => "demo",
    gc_compaction => "gc-compaction",
    jit => "jit",
    keepalive => "keepalive",
    known_effect => "known-effect",
    puma_concurrency => "puma-concurrency",
    rails_forum => "rails-forum",
    rails_overhead => "rails-overhead",
    threads_mtime => "threads-mtime",
    threads_pipes => "threads-pipes",
}

/// Every example directory without a test above runs here, so a new one is never skipped;
/// and every listed example still exists.
#[test]
fn examples_without_a_test_of_their_own() {
    let all = examples();
    assert!(all.len() >= LISTED.len(), "examples found: {all:?}");
    for name in LISTED {
        assert!(
            all.iter().any(|a| a == name),
            "examples/{name}/experiment.toml is listed in tests/it/examples.rs but missing"
        );
    }
    for name in all.iter().filter(|n| !LISTED.contains(&n.as_str())) {
        smoke_test(name);
    }
}

/// Whether an experiment file names a Ruby that is not installed here: one of the
/// project's `debian-ruby` tool (`/opt/debian-rubies/…`, `../shared/tools/debian-ruby
/// install RELEASE`) or a build of `rubyrace ruby build` in the default cache
/// (`~/.cache/rubyrace/rubies/…`, scripts/setup-ruby-versions). Such files are run by hand
/// after their setup, which CI does not do.
fn needs_a_missing_ruby(file: &std::path::Path) -> bool {
    let home = std::env::var("HOME").unwrap_or_default();
    std::fs::read_to_string(file).unwrap().lines().any(|line| {
        line.split('"').any(|s| {
            let path = match s.strip_prefix("~/") {
                Some(rest) => format!("{home}/{rest}"),
                None => s.to_string(),
            };
            (s.starts_with("/opt/debian-rubies/") || s.starts_with("~/.cache/rubyrace/"))
                && !std::path::Path::new(&path).exists()
        })
    })
}

/// Every experiment file of the examples, besides the `experiment.toml` each runs above
/// (`examples/jit/profile.toml`, for one), is accepted as written: a plan, no error.
#[test]
fn every_example_file_is_accepted() {
    let mut checked = 0;
    for dir in std::fs::read_dir(workspace_root().join("examples"))
        .unwrap()
        .flatten()
    {
        for file in std::fs::read_dir(dir.path()).unwrap().flatten() {
            let path = file.path();
            if path.extension().is_some_and(|e| e == "toml") && !needs_a_missing_ruby(&path) {
                let plan = rubyrace(&["run", path.to_str().unwrap(), "--dry-run"]);
                assert_eq!(plan.code(), Some(0), "{}: {plan:?}", path.display());
                checked += 1;
            }
        }
    }
    assert!(checked > LISTED.len(), "{checked} example files");
}

// ---------------------------------------------------------------------------------------
// The figures the study READMEs quote.
//
// A README pastes what `rubyrace report` printed between two markers:
//
//     <!-- report: examples/jit/experiment.toml, 10 blocks -->
//     ... the pasted report ...
//     <!-- /report -->
//
// with `, adaptive` after the blocks for a run that stopped by its precision rule, and
// `, K cohorts` when the report grouped the configurations (`--by`) into K cohorts
// against the baseline. The check below holds each README to what the tool could have
// printed for those blocks and cohorts: the blocks are the file's, or the pasted
// report gives the reason the run stopped there; no p-value is below the smallest the
// signed-rank test allows (2/2ⁿ for n blocks) times Holm's factor for the cohorts; a
// verdict called without "~" has an interval that excludes 1; and every p-value or
// interval quoted in the README's own words is one the pasted reports contain.

/// One pasted report of a README.
#[derive(Debug)]
struct Pasted {
    file: String,
    blocks: usize,
    adaptive: bool,
    cohorts: Option<usize>,
    text: String,
}

/// The pasted reports of a README, and its text outside them; or what is malformed.
fn pasted_reports(readme: &str) -> Result<(Vec<Pasted>, String), String> {
    let mut pasted = Vec::new();
    let mut outside = String::new();
    let mut rest = readme;
    while let Some(start) = rest.find("<!-- report:") {
        outside.push_str(&rest[..start]);
        let after = &rest[start + "<!-- report:".len()..];
        let close = after
            .find("-->")
            .ok_or("a `<!-- report:` marker is not closed")?;
        let header = after[..close].trim();
        let body_start = &after[close + 3..];
        let end = body_start
            .find("<!-- /report -->")
            .ok_or_else(|| format!("`<!-- report: {header} -->` has no `<!-- /report -->`"))?;
        let mut parts = header.split(',').map(str::trim);
        let file = parts.next().unwrap_or_default().to_string();
        let (mut blocks, mut adaptive, mut cohorts) = (None, false, None);
        for part in parts {
            if part == "adaptive" {
                adaptive = true;
            } else if let Some(n) = part.strip_suffix(" blocks") {
                blocks = Some(n.parse().map_err(|_| format!("{header}: `{part}`"))?);
            } else if let Some(n) = part.strip_suffix(" cohorts") {
                cohorts = Some(n.parse().map_err(|_| format!("{header}: `{part}`"))?);
            } else {
                return Err(format!(
                    "{header}: `{part}` is not `N blocks`, `adaptive` or `K cohorts`"
                ));
            }
        }
        let blocks =
            blocks.ok_or_else(|| format!("{header}: the marker does not say `N blocks`"))?;
        pasted.push(Pasted {
            file,
            blocks,
            adaptive,
            cohorts,
            text: body_start[..end].to_string(),
        });
        rest = &body_start[end + "<!-- /report -->".len()..];
    }
    outside.push_str(rest);
    Ok((pasted, outside))
}

/// Every "p=0.031" and "p<0.001" in `text` (also written "p = 0.031"), as the report
/// prints it.
fn p_values(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (i, _) in text.match_indices('p') {
        if i > 0
            && text[..i]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
        {
            continue; // "step=", "sleep<": not a p-value
        }
        let tail = text[i + 1..].trim_start_matches(' ');
        let Some(sign) = tail.chars().next().filter(|c| *c == '=' || *c == '<') else {
            continue;
        };
        let tail = tail[1..].trim_start_matches(' ');
        let len = tail
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(tail.len());
        let mut number = tail[..len].trim_end_matches('.');
        // "p=0.010, adjusted 0.078": the report gives a comparison Holm's adjustment did not
        // call with its own p and the adjusted one; the adjusted p is the one bounded below.
        if let Some(adjusted) = tail[len..].strip_prefix(", adjusted ") {
            let end = adjusted
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(adjusted.len());
            number = adjusted[..end].trim_end_matches('.');
        }
        // The report prints "p<0.001" and nothing else with "<"; "p < 0.05" is the level.
        if number.parse::<f64>().is_ok() && (sign == '=' || number == "0.001") {
            found.push(format!("p{sign}{number}"));
        }
    }
    found
}

/// Every interval "[1.25–1.62]" that follows a ratio "1.43×" in `text` (up to the next
/// bracket on the same line), as (ratio, low, high, the verdict text before the bracket).
fn ratio_intervals(text: &str) -> Vec<(String, f64, f64, String)> {
    let mut found = Vec::new();
    for line in text.lines() {
        let mut from = 0;
        while let Some(x) = line[from..].find('×') {
            let at = from + x;
            from = at + '×'.len_utf8();
            let digits: String = line[..at]
                .chars()
                .rev()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            if digits.parse::<f64>().is_err() {
                continue;
            }
            let after = &line[from..];
            let Some(open) = after.find('[') else {
                continue;
            };
            if after[..open].contains('×') || open > 40 {
                continue;
            }
            let Some(close) = after[open..].find(']') else {
                continue;
            };
            let inside = &after[open + 1..open + close];
            let Some((lo, hi)) = inside.split_once('–') else {
                continue;
            };
            let (Ok(lo), Ok(hi)) = (lo.trim().parse::<f64>(), hi.trim().parse::<f64>()) else {
                continue;
            };
            let start = line[..at].rfind('(').unwrap_or(0);
            found.push((
                format!("{digits}×{}", &after[..open + close + 1]),
                lo,
                hi,
                line[start..from + open].to_string(),
            ));
        }
    }
    found
}

/// The smallest p `rubyrace report` can print for `cohorts` comparisons over `blocks`
/// paired blocks: the exact signed-rank test's 2/2ⁿ (every block on one side; see
/// `stats::ranktest::wilcoxon_min_p`), times Holm's factor for the first of `cohorts`
/// tests, at most 1.
fn smallest_p(blocks: usize, cohorts: usize) -> f64 {
    (cohorts as f64 * 2f64.powi(1 - blocks as i32)).min(1.0)
}

/// A pasted report's file as planned: its configurations, its blocks, and whether it sets
/// `precision`; `None` when it names a Ruby this machine lacks (one of the project's
/// `debian-ruby` installs), so only what the marker states can be checked.
type Plan = Option<(usize, usize, bool)>;

/// What is wrong with the figures of one README. Its own words may also quote what
/// `quotable` holds (for docs/seeds.md: the reports pasted in the studies' READMEs).
fn readme_problems(
    readme: &str,
    quotable: &str,
    plan_of: &mut dyn FnMut(&str) -> Result<Plan, String>,
) -> Vec<String> {
    let (pasted, outside) = match pasted_reports(readme) {
        Ok(p) => p,
        Err(e) => return vec![e],
    };
    let mut problems = Vec::new();
    for p in &pasted {
        let (configs, batches, precision) = match plan_of(&p.file) {
            Ok(Some(plan)) => plan,
            Ok(None) if p.cohorts.is_some() => (p.cohorts.unwrap() + 1, p.blocks, p.adaptive),
            Ok(None) => {
                problems.push(format!(
                    "{}: it needs a Ruby this machine lacks, so the marker must say `K cohorts`",
                    p.file
                ));
                continue;
            }
            Err(e) => {
                problems.push(format!("{}: {e}", p.file));
                continue;
            }
        };
        let cohorts = p.cohorts.unwrap_or(configs.saturating_sub(1)).max(1);
        if p.adaptive {
            if !precision {
                problems.push(format!(
                    "{}: marked adaptive, but the file sets no `precision`",
                    p.file
                ));
            }
            let stopped = format!("after {} blocks", p.blocks);
            if !(p.text.contains("the run stopped") && p.text.contains(&stopped)) {
                problems.push(format!(
                    "{}: an adaptive run of {} blocks must paste the report's reason for stopping (`the run stopped … {stopped}`)",
                    p.file, p.blocks
                ));
            }
        } else if p.blocks != batches {
            problems.push(format!(
                "{}: {} blocks stated, but the file runs {batches}: run the file as it is, or paste the run's stop reason",
                p.file, p.blocks
            ));
        }
        let floor = smallest_p(p.blocks, cohorts);
        // A profile's frame lines ("(Holm, 52 frames)") are t-tests of the per-block log
        // ratios (docs/profiles.md), which have no such floor.
        let verdicts: String = p
            .text
            .lines()
            .filter(|l| !l.contains(" frames)"))
            .flat_map(|l| [l, "\n"])
            .collect();
        for pv in p_values(&verdicts) {
            let ok = match pv.strip_prefix("p=") {
                Some(v) => v.parse::<f64>().unwrap() + 0.0005 >= floor,
                None => floor < 0.001,
            };
            if !ok {
                problems.push(format!(
                    "{}: {pv} is below {floor:.4}, the smallest p {} blocks allow for {cohorts} cohort(s)",
                    p.file, p.blocks
                ));
            }
        }
        for (quoted, lo, hi, verdict) in ratio_intervals(&p.text) {
            let called = (verdict.contains("faster")
                || verdict.contains("slower")
                || verdict.contains("higher")
                || verdict.contains("lower"))
                && !verdict.contains('~');
            if called && lo < 1.0 && hi > 1.0 {
                problems.push(format!(
                    "{}: `{verdict}` is called, but {quoted} includes 1",
                    p.file
                ));
            }
        }
    }
    let all_pasted: String = pasted
        .iter()
        .map(|p| p.text.as_str())
        .chain([quotable])
        .collect();
    for pv in p_values(&outside) {
        if !p_values(&all_pasted).contains(&pv) {
            problems.push(format!(
                "`{pv}` is quoted outside any pasted report, and no pasted report prints it"
            ));
        }
    }
    for (quoted, ..) in ratio_intervals(&outside) {
        if !all_pasted.contains(&quoted) {
            problems.push(format!(
                "`{quoted}` is quoted outside any pasted report, and no pasted report prints it"
            ));
        }
    }
    problems
}

/// The rules above catch the slips once found in the READMEs: figures the tool could not
/// have printed for the blocks and cohorts stated.
#[test]
fn readme_rules_catch_forbidden_figures() {
    let mut plan = |file: &str| -> Result<Plan, String> {
        match file {
            "three.toml" => Ok(Some((4, 10, false))),
            "two.toml" => Ok(Some((2, 10, false))),
            "adaptive.toml" => Ok(Some((4, 7, true))),
            "elsewhere.toml" => Ok(None),
            other => Err(format!("no such file {other}")),
        }
    };
    // 6 blocks of a 10-block file, and p=0.031 across 3 cohorts (the smallest is 0.094).
    let shortened = "<!-- report: three.toml, 6 blocks -->\n| yjit | 1.43×, 42.7% faster [1.25–1.62], p=0.031 |\n<!-- /report -->\n";
    let problems = readme_problems(shortened, "", &mut plan);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0].contains("6 blocks stated, but the file runs 10"),
        "{problems:?}"
    );
    assert!(
        problems[1].contains("p=0.031 is below 0.0938"),
        "{problems:?}"
    );
    // The same figures from the full file are possible.
    let full = "<!-- report: three.toml, 10 blocks -->\n| yjit | 1.43×, 42.7% faster [1.25–1.62], p=0.006 |\n<!-- /report -->\n";
    assert_eq!(readme_problems(full, "", &mut plan), Vec::<String>::new());
    // A comparison Holm did not call: its own p, then the adjusted one, which is checked.
    let not_called = "<!-- report: three.toml, 10 blocks, 8 cohorts -->\n ~ not significant after Holm over 8 cohorts (0.87× [0.80–0.95], p=0.010, adjusted 0.078)\n<!-- /report -->\n";
    assert!(readme_problems(not_called, "", &mut plan).is_empty());
    let too_small = not_called.replace("adjusted 0.078", "adjusted 0.010");
    assert!(readme_problems(&too_small, "", &mut plan)[0].contains("p=0.010 is below 0.0156"));
    // An unadjusted p for two cohorts of a 10-block file (0.004 is the smallest).
    let unadjusted = "<!-- report: three.toml, 10 blocks, 2 cohorts -->\n 0.53×, 47.4% slower [0.49–0.57], p=0.002\n<!-- /report -->\n";
    assert!(readme_problems(unadjusted, "", &mut plan)[0].contains("p=0.002 is below 0.0039"));
    // A verdict called with an interval that includes 1.
    let called = "<!-- report: two.toml, 10 blocks -->\n b throughput 1.06×, 5.9% faster [0.98–1.10], p=0.006\n<!-- /report -->\n";
    assert!(readme_problems(called, "", &mut plan)[0].contains("includes 1"));
    // Prose quoting a figure no pasted report printed (allocators' p99 0.75× of a table
    // that gave 0.41×), and a p-value from nowhere.
    let prose = "<!-- report: two.toml, 10 blocks -->\n p99 0.41× [0.30–0.55], p=0.004\n<!-- /report -->\nThe p99 fell to 0.75× [0.60–0.90], p=0.004; and p=0.01 elsewhere.\n";
    let problems = readme_problems(prose, "", &mut plan);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].contains("p=0.01"), "{problems:?}");
    assert!(problems[1].contains("0.75× [0.60–0.90]"), "{problems:?}");
    // docs/seeds.md may quote what a study's README pasted, and nothing else.
    let study = " p99 0.41× [0.30–0.55], p=0.004\n";
    assert!(readme_problems("p99: 0.41× [0.30–0.55], p=0.004.", study, &mut plan).is_empty());
    assert_eq!(
        readme_problems("p99: 0.42× [0.30–0.55].", study, &mut plan).len(),
        1
    );
    // An adaptive run must paste its stop reason, with the blocks it states.
    let adaptive = "<!-- report: adaptive.toml, 9 blocks, adaptive -->\n 1.37×, 37.4% faster [1.34–1.41], p=0.012\n<!-- /report -->\n";
    assert!(readme_problems(adaptive, "", &mut plan)[0].contains("reason for stopping"));
    let stopped = "<!-- report: adaptive.toml, 9 blocks, adaptive -->\nthe run stopped when precise enough: every comparison reached ±5% on throughput after 9 blocks\n 1.37×, 37.4% faster [1.34–1.41], p=0.012\n<!-- /report -->\n";
    assert_eq!(
        readme_problems(stopped, "", &mut plan),
        Vec::<String>::new()
    );
    // A file for Rubies this machine lacks is held to the cohorts its marker states.
    let elsewhere = "<!-- report: elsewhere.toml, 6 blocks -->\n 2.74×, 174% slower [2.49–3.02], p=0.031\n<!-- /report -->\n";
    assert!(readme_problems(elsewhere, "", &mut plan)[0].contains("must say `K cohorts`"));
    let elsewhere = elsewhere.replace("6 blocks", "6 blocks, 9 cohorts");
    assert!(readme_problems(&elsewhere, "", &mut plan)[0].contains("p=0.031 is below 0.2812"));
    // A profile's frame test is a t-test, with no floor of its own.
    let frames = "<!-- report: three.toml, 10 blocks -->\n| perf | do_syscall_64 | 3.91× [2.92–5.24], p&lt;0.001 (Holm, 52 frames) |\n| x | 2.79× [2.00–3.90], p=0.002 (Holm, 52 frames) |\n<!-- /report -->\n";
    assert_eq!(readme_problems(frames, "", &mut plan), Vec::<String>::new());
    // "p < 0.05" is the level, not a result.
    assert!(readme_problems("called when p < 0.05", "", &mut plan).is_empty());
    // "p = 0.031" is a p-value too.
    assert_eq!(
        readme_problems("ratio 1.09×, p = 0.031", "", &mut plan).len(),
        1
    );
    // Malformed markers are reported, not skipped.
    assert!(
        !readme_problems("<!-- report: two.toml -->\n<!-- /report -->", "", &mut plan).is_empty()
    );
    assert!(!readme_problems("<!-- report: two.toml, 10 blocks -->\n", "", &mut plan).is_empty());
}

/// Every study README holds to the rules above, with its files planned by the real binary.
#[test]
fn readme_verdicts_are_ones_the_tool_could_print() {
    let root = workspace_root();
    let mut plan_of = |file: &str| -> Result<Plan, String> {
        let path = root.join(file);
        if !path.is_file() {
            return Err("no such file (give it from the repository's root)".into());
        }
        if needs_a_missing_ruby(&path) {
            return Ok(None);
        }
        let plan = rubyrace(&["run", path.to_str().unwrap(), "--dry-run", "--json"]);
        if plan.code() != Some(0) {
            return Err(format!("not accepted: {plan:?}"));
        }
        let plan: Value = serde_json::from_str(&plan.stdout).unwrap();
        Ok(Some((
            plan["configs"].as_array().unwrap().len(),
            plan["experiment"]["batches"].as_u64().unwrap() as usize,
            !plan["experiment"]["precision"].is_null(),
        )))
    };
    let mut problems = Vec::new();
    let mut studies = String::new();
    // Every study's README, with or without an experiment.toml (ruby-versions has two
    // files of other names).
    let readmes = example_dirs_with("README.md");
    assert!(readmes.iter().any(|n| n == "ruby-versions"), "{readmes:?}");
    for name in readmes {
        let readme = root.join("examples").join(&name).join("README.md");
        let text = std::fs::read_to_string(&readme).unwrap();
        for p in readme_problems(&text, "", &mut plan_of) {
            problems.push(format!("examples/{name}/README.md: {p}"));
        }
        if let Ok((pasted, _)) = pasted_reports(&text) {
            studies.extend(pasted.into_iter().map(|p| p.text + "\n"));
        }
    }
    // docs/seeds.md quotes the studies' figures side by side with the sources'.
    let seeds = std::fs::read_to_string(root.join("docs/seeds.md")).unwrap();
    for p in readme_problems(&seeds, &studies, &mut plan_of) {
        problems.push(format!("docs/seeds.md: {p}"));
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}
