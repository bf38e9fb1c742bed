//! Every ready-made experiment in `examples/<name>/experiment.toml` runs on this machine's
//! Ruby in smoke mode (two short blocks), with the real binary and real servers, and its
//! report has one cohort per configuration of its plan, every trial valid.
//!
//! Each known example is a test of its own (`cargo test -p rubyrace-cli --test it
//! examples::app_servers` runs one); a new example directory is picked up without editing this file, by
//! `examples_without_a_test_of_their_own`, until it is added to the list. Under `make test`
//! one example runs at a time, beside one other test (`.config/nextest.toml`): what is
//! checked is that every trial is valid and every setting in force, not a figure.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::support::{rubyrace, spawn, spawn_in, workspace_root, TempDir};
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

    let results = if name == "demo" {
        demo_smoke(&scratch)
    } else {
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
        results
    };

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

/// The demo's smoke run through `rubyrace demo --smoke`, as an installed rubyrace runs it:
/// from a directory outside the repository, with the experiment built into the binary;
/// the plan, the run, the text report and the HTML report, into `results/` there (with
/// its `.gitignore`). Returns the results directory.
fn demo_smoke(scratch: &TempDir) -> PathBuf {
    let here = scratch.path("elsewhere");
    std::fs::create_dir_all(&here).unwrap();
    let run = spawn_in(Some(&here), &["demo", "--smoke"], &[]).wait(Duration::from_secs(300));
    assert_eq!(run.code(), Some(0), "demo: {run:?}");
    let made: Vec<PathBuf> = std::fs::read_dir(here.join("results"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(made.len(), 1, "{made:?}");
    let dir = &made[0];
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("demo-smoke-"), "{name}");
    assert!(here.join("results/.gitignore").is_file());
    assert!(dir.join("report.html").is_file(), "{run:?}");
    for said in [
        "demo: the plan",
        "4 configurations × 7 blocks",
        "demo: the report (rubyrace report results/demo-smoke-",
        "demo: HTML report: results/demo-smoke-",
    ] {
        assert!(run.stdout.contains(said), "`{said}`: {run:?}");
    }
    dir.clone()
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
    problems.extend(quiet_claims(&outside, &all_pasted));
    // Command outputs pasted in code blocks (a `rubyrace load`, an export) back figures too.
    let fenced: String = outside
        .split("```")
        .skip(1)
        .step_by(2)
        .flat_map(|block| [block, "\n"])
        .collect();
    let prose: String = outside
        .split("```")
        .enumerate()
        .map(|(i, part)| match i % 2 {
            0 => part,
            _ if part.contains("rubyrace ") => "\n\n\u{0}",
            _ => "\n\n",
        })
        .collect();
    for (figure, paragraph) in unbacked_figures(&prose, &format!("{all_pasted}{fenced}")) {
        // A ratio quoted with its interval is reported above already.
        if problems.iter().any(|p| p.contains(&format!("`{figure}"))) {
            continue;
        }
        problems.push(format!(
            "`{figure}` is neither in a pasted output nor sourced in its clause: `{paragraph}`"
        ));
    }
    problems
}

/// The units of the figures a report prints; a ratio is written `1.37×`, with no space.
const FIGURE_UNITS: [&str; 5] = ["req/s", "requests/s", "ms", "µs", "MiB"];

/// Words that give a paragraph's figures a source other than this README's pastes: a
/// published source, a link, a command that prints them, a default or an expectation.
const SOURCED_BY: [&str; 16] = [
    "the source",
    "examples/",
    "updown",
    "RSB",
    "RRB",
    "Rails Simpler Bench",
    "Rails Ruby Bench",
    "](",
    "`rubyrace ",
    "`ruby ",
    ".toml`",
    "default",
    "expected",
    "the report's advisor",
    "the dry run",
    "the pasted medians",
];

/// Figures of `prose` with a unit a report prints (`FIGURE_UNITS`, or `×`) that `pasted`
/// does not print and whose paragraph names no source (`SOURCED_BY`), with the paragraph.
/// A range `639–802 requests/s` is two figures. A figure followed by "slice" is a setting.
/// `prose` holds a `\u{0}` where a code block with a `rubyrace` command stood: the
/// paragraph right after it reads that command's output.
fn unbacked_figures(prose: &str, pasted: &str) -> Vec<(String, String)> {
    let pasted = pasted.replace('\u{a0}', " ");
    // `number` in `pasted` as a whole number (not the end of 1600 nor the start of 6001),
    // followed by what `then` accepts.
    let found = |number: &str, then: &dyn Fn(&str) -> bool| {
        pasted.match_indices(number).any(|(i, _)| {
            let before = pasted[..i].chars().next_back();
            let rest = &pasted[i + number.len()..];
            let joined_before = before.is_some_and(|c| c.is_ascii_digit() || c == '.' || c == ',');
            // More digits, or a decimal part, follow: another number.
            let goes_on = rest
                .trim_start_matches('.')
                .starts_with(|c: char| c.is_ascii_digit());
            !joined_before && !goes_on && then(rest)
        })
    };
    // A ratio as printed, `1.37×`; other figures as numbers, since the report's tables
    // give the unit in their header.
    let printed = |number: &str, unit: &str| {
        found(number, &|rest: &str| unit != "×" || rest.starts_with('×'))
    };
    let mut found = Vec::new();
    let mut after_command = false;
    for paragraph in prose.split("\n\n") {
        let paragraph = paragraph.split_whitespace().collect::<Vec<_>>().join(" ");
        if paragraph.is_empty() {
            continue;
        }
        if paragraph == "\u{0}" {
            after_command = true;
            continue;
        }
        if std::mem::take(&mut after_command) {
            continue;
        }
        // A source names the figures of its own clause: a table's cell, or a sentence or its
        // part between `;`, `:` and parentheses.
        let clauses: Vec<&str> = if paragraph.starts_with('|') {
            paragraph.split('|').collect()
        } else {
            paragraph
                .split(". ")
                .flat_map(|s| s.split([';', ':', '(', ')']))
                .collect()
        };
        let clauses = clauses.into_iter();
        let unsourced = clauses.filter(|clause| {
            let lower = clause.to_lowercase();
            !SOURCED_BY.iter().any(|s| lower.contains(&s.to_lowercase()))
        });
        for clause in unsourced {
            for (number, unit) in figures_with_units(clause) {
                if !printed(&number, &unit) {
                    let figure = match unit.as_str() {
                        "×" => format!("{number}×"),
                        _ => format!("{number} {unit}"),
                    };
                    found.push((figure, clause.trim().to_string()));
                }
            }
        }
    }
    found
}

/// Every number followed by a unit of `FIGURE_UNITS` (after an optional space) or by `×`
/// (with none) in `text`; both ends of a range `A–B unit`.
fn figures_with_units(text: &str) -> Vec<(String, String)> {
    let is_number_char = |c: char| c.is_ascii_digit() || c == '.' || c == ',';
    let mut found = Vec::new();
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut k = 0;
    while k < chars.len() {
        let (start, c) = chars[k];
        let previous = text[..start].chars().next_back();
        let starts_number = c.is_ascii_digit()
            && !previous.is_some_and(|p| p.is_alphanumeric() || p == '.' || p == '_' || p == '-');
        if !starts_number {
            k += 1;
            continue;
        }
        // The number, then an optional `–B` of a range.
        let mut end = k;
        while end < chars.len() && is_number_char(chars[end].1) {
            end += 1;
        }
        let number_end = |e: usize| chars.get(e).map_or(text.len(), |(i, _)| *i);
        let first = text[start..number_end(end)]
            .trim_end_matches(['.', ','])
            .to_string();
        let mut numbers = vec![first];
        let mut after = end;
        if chars.get(after).is_some_and(|(_, c)| *c == '–') {
            let second_start = after + 1;
            let mut second_end = second_start;
            while second_end < chars.len() && is_number_char(chars[second_end].1) {
                second_end += 1;
            }
            if second_end > second_start {
                numbers.push(
                    text[number_end(second_start)..number_end(second_end)]
                        .trim_end_matches(['.', ','])
                        .to_string(),
                );
                after = second_end;
            }
        }
        let rest = &text[number_end(after)..];
        let unit = if let Some(after_times) = rest.strip_prefix('×') {
            // `1×4` is Puma's shape, processes × threads, not a ratio.
            (!after_times.starts_with(|c: char| c.is_ascii_digit())).then_some("×")
        } else {
            let spaced = rest.strip_prefix(' ').unwrap_or(rest);
            FIGURE_UNITS.iter().copied().find(|u| {
                spaced.starts_with(u)
                    && !spaced[u.len()..]
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_alphanumeric() || c == '/')
            })
        };
        let setting = text[number_end(after)..]
            .trim_start()
            .split_once(' ')
            .is_some_and(|(_, next)| next.starts_with("slice"));
        if let Some(unit) = unit.filter(|_| !setting) {
            found.extend(numbers.into_iter().map(|n| (n, unit.to_string())));
        }
        k = after.max(k + 1);
    }
    found
}

/// What a pasted report prints when its run was not measured on a quiet machine: the
/// doctor's warning at the start (a load average above one per CPU, busy processes) and
/// trials measured in noise.
const NOT_QUIET: [&str; 2] = ["! [machine]", "! [noisy-trials]"];

/// Words that say a run was measured on a quiet machine. "wait for a quiet machine" and "a
/// question for a quiet machine" are advice, not a claim.
fn quiet_claim_at(prose: &str) -> Vec<usize> {
    let lower = prose.to_lowercase().replace('\n', " ");
    let mut at: Vec<usize> = lower
        .match_indices("nothing else running")
        .map(|(i, _)| i)
        .collect();
    at.extend(
        lower
            .match_indices("quiet machine")
            .filter(|(i, _)| !lower[..*i].ends_with("for a "))
            .map(|(i, _)| i),
    );
    at.sort();
    at
}

/// A claim that a run was quiet where the pasted reports say it was not (`NOT_QUIET`):
/// say what the machine was doing instead, and what it means for the figures.
fn quiet_claims(prose: &str, pasted: &str) -> Vec<String> {
    let Some(warning) = NOT_QUIET.iter().find(|w| pasted.contains(*w)) else {
        return Vec::new();
    };
    quiet_claim_at(prose)
        .into_iter()
        .map(|i| {
            let start = prose[..i].rfind('\n').map_or(0, |s| s + 1);
            let end = prose[i..].find('\n').map_or(prose.len(), |e| i + e);
            format!(
                "`{}` claims a quiet machine, but a pasted report warns `{warning}`: say what the machine was doing",
                prose[start..end].trim()
            )
        })
        .collect()
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
    // A quiet machine claimed beside a paste that warns otherwise; advice is not a claim.
    let busy = "<!-- report: two.toml, 10 blocks -->\n  ! [machine] rubyrace doctor when the run started: load: 4.21\n<!-- /report -->\n";
    let claimed = format!("Run with nothing else running.\n{busy}");
    assert!(readme_problems(&claimed, "", &mut plan)[0].contains("claims a quiet machine"));
    let claimed = format!("{busy}The run above was made on a quiet machine.\n");
    assert!(readme_problems(&claimed, "", &mut plan)[0].contains("claims a quiet machine"));
    let advice = format!("{busy}A question for a quiet machine; wait for a quiet machine.\n");
    assert!(readme_problems(&advice, "", &mut plan).is_empty());
    let quiet = busy.replace(
        "! [machine] rubyrace doctor when the run started: load: 4.21",
        "",
    );
    assert!(readme_problems(&format!("Nothing else running.\n{quiet}"), "", &mut plan).is_empty());
    // docs/seeds.md's claims are held to the studies' pastes.
    assert_eq!(
        readme_problems("on a quiet machine", busy, &mut plan).len(),
        1
    );
    // A figure in the prose is one a paste prints, or its paragraph gives its source.
    let pasted = "<!-- report: two.toml, 10 blocks -->\n| x | 251 [238–265] | 466.6 MiB | 1.37× |\n<!-- /report -->\n";
    let exact = format!("{pasted}YJIT served 251 requests/s, PSS 466.6 MiB, 1.37× faster.\n");
    assert!(readme_problems(&exact, "", &mut plan).is_empty());
    let rounded = format!("{pasted}PSS 467 MiB against 96.1 ms and 2.3–3.2× faster.\n");
    let problems = readme_problems(&rounded, "", &mut plan);
    let figures: Vec<&str> = problems
        .iter()
        .map(|p| p.split('`').nth(1).unwrap())
        .collect();
    assert_eq!(
        figures,
        ["467 MiB", "96.1 ms", "2.3×", "3.2×"],
        "{problems:?}"
    );
    let sourced = format!("{pasted}The source measured 13,577 req/s; Puma 2 × 8 threads.\n");
    assert!(readme_problems(&sourced, "", &mut plan).is_empty());
    let command =
        format!("{pasted}```sh\nrubyrace export d --json\n```\n\n- 69.6 µs at 0, on Puma 1×1.\n");
    assert!(readme_problems(&command, "", &mut plan).is_empty());
    let not_a_command = command.replace("rubyrace export", "jq");
    assert_eq!(readme_problems(&not_a_command, "", &mut plan).len(), 1);
    assert!(readme_problems(&sourced, "", &mut plan).is_empty());
    let fenced = format!("{pasted}```\n85.8 req/s\n```\n\nIt gave 85.8 req/s.\n");
    assert!(readme_problems(&fenced, "", &mut plan).is_empty());
    // "p < 0.05" is the level, not a result.
    assert!(readme_problems("called when p < 0.05", "", &mut plan).is_empty());
    // "p = 0.031" is a p-value too.
    assert_eq!(
        readme_problems("the ratio's p = 0.031", "", &mut plan).len(),
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

// ---------------------------------------------------------------------------------------
// docs/seeds.md's verdicts, by its own key.
//
// The key: "agrees" when the source's figure lies inside rubyrace's interval (or near it)
// and the interval shows a direction; "differs" when the interval excludes the source's
// figure; "not reproduced" when the interval holds both the source's figure and no effect.
// The sources' figures are below, from ../shared/SEED-FINDINGS.md (the post each quotes),
// each beside the figure of seeds.md's row it is compared with.

/// One comparison of a seeds.md row: the figure quoted in its "rubyrace here" cell, as the
/// report prints it, and the source's figure on the same scale.
struct SourceFigure {
    row: u32,
    /// The quoted figure, its interval in brackets: "0.52×, 48.2% slower [0.50–0.54]".
    quoted: &'static str,
    /// The source's figure: a ratio, or for an overhead its size in the quoted unit.
    source: f64,
    /// What no effect is on that scale: 1 for a ratio, 0 for an overhead.
    none: f64,
}

const SOURCE_FIGURES: &[SourceFigure] = &[
    // RSB keepalive: 10,185 req/s with `Connection: close` against 13,577 with keepalive.
    SourceFigure {
        row: 1,
        quoted: "0.47×, 52.8% slower [0.46–0.49]",
        source: 10_185.0 / 13_577.0,
        none: 1.0,
    },
    // RSB: the client closing each connection, 7,087 req/s, against `Connection: close`'s
    // 10,185: the comparable figure (issue 50).
    SourceFigure {
        row: 2,
        quoted: "0.64×, 35.8% slower [0.61–0.67]",
        source: 7_087.0 / 10_185.0,
        none: 1.0,
    },
    // RSB: "around 900 usec/request for modern Ruby".
    SourceFigure {
        row: 3,
        quoted: "+309.8 µs per request [+290.6 – +329.0]",
        source: 900.0,
        none: 0.0,
    },
    // updown.io: "7% faster with YJIT" on Ruby 3.1.2.
    SourceFigure {
        row: 4,
        quoted: "1.37×, 37.5% faster [1.33–1.43]",
        source: 1.07,
        none: 1.0,
    },
    SourceFigure {
        row: 4,
        quoted: "1.30×, 30.0% faster [1.18–1.43]",
        source: 1.07,
        none: 1.0,
    },
    // RRB: 110.4 against 175.6 req/s with and without MJIT; RSB: 1060 against 1280.
    SourceFigure {
        row: 6,
        quoted: "0.99× [0.95–1.04]",
        source: 110.4 / 175.6,
        none: 1.0,
    },
    SourceFigure {
        row: 6,
        quoted: "0.99× [0.95–1.04]",
        source: 1060.0 / 1280.0,
        none: 1.0,
    },
    // RRB: "about an 11% speedup with jemalloc"; tcmalloc +4.68% throughput.
    SourceFigure {
        row: 7,
        quoted: "1.06× [0.89–1.26]",
        source: 1.11,
        none: 1.0,
    },
    SourceFigure {
        row: 7,
        quoted: "1.09× [0.96–1.22]",
        source: 1.0468,
        none: 1.0,
    },
    // RSB: compaction in one process that never forks saved "around 554 kilobytes" of
    // RSS; here, 554,000 bytes of the source-setting run's median RSS without compaction
    // (58,535,936 bytes, its report's JSON).
    SourceFigure {
        row: 10,
        quoted: "1.00×, 0.4% less memory (PSS) [1.00–1.00]",
        source: 1.0 - 554_000.0 / 58_535_936.0,
        none: 1.0,
    },
    // Compaction and speed: no change, "well within the margin of measurement error".
    SourceFigure {
        row: 11,
        quoted: "0.98× [0.95–1.02]",
        source: 1.0,
        none: 1.0,
    },
    // "using just fibers and a single reactor doubled the speed".
    SourceFigure {
        row: 13,
        quoted: "2.00×, 100.2% higher messages_per_s [1.91–2.10]",
        source: 2.0,
        none: 1.0,
    },
    // RRB: a larger global method cache, 2-3% faster (both ends of the range).
    SourceFigure {
        row: 17,
        quoted: "1.00× [0.99–1.01]",
        source: 1.02,
        none: 1.0,
    },
    SourceFigure {
        row: 17,
        quoted: "1.00× [0.99–1.01]",
        source: 1.03,
        none: 1.0,
    },
];

/// The interval in a quoted figure: "[0.50–0.54]" or "[+349.6 – +385.7]".
fn bracketed_interval(quoted: &str) -> Option<(f64, f64)> {
    let inside = quoted.split_once('[')?.1.split_once(']')?.0;
    let (lo, hi) = inside.split_once('–')?;
    let number = |s: &str| s.trim().trim_start_matches('+').parse::<f64>().ok();
    Some((number(lo)?, number(hi)?))
}

/// The verdict seeds.md's key gives a source's figure against rubyrace's interval.
fn verdict_by_key(source: f64, none: f64, (lo, hi): (f64, f64)) -> &'static str {
    let holds = |x: f64| lo <= x && x <= hi;
    if !holds(source) {
        "differs"
    } else if holds(none) && source != none {
        "not reproduced"
    } else {
        "agrees"
    }
}

#[test]
fn the_key_gives_each_verdict() {
    assert_eq!(verdict_by_key(0.75, 1.0, (0.50, 0.54)), "differs");
    assert_eq!(verdict_by_key(1.11, 1.0, (0.92, 1.12)), "not reproduced");
    assert_eq!(verdict_by_key(1.0, 1.0, (0.95, 1.02)), "agrees");
    assert_eq!(verdict_by_key(2.0, 1.0, (1.91, 2.10)), "agrees");
    assert_eq!(verdict_by_key(900.0, 0.0, (349.6, 385.7)), "differs");
    assert_eq!(
        bracketed_interval("+367.6 µs per request [+349.6 – +385.7]"),
        Some((349.6, 385.7))
    );
    assert_eq!(
        bracketed_interval("0.52×, 48.2% slower [0.50–0.54]"),
        Some((0.5, 0.54))
    );
}

/// Each row of seeds.md's table with a source figure above quotes that figure and gives
/// the verdict the key gives it.
#[test]
fn seeds_verdicts_follow_the_key() {
    let seeds = std::fs::read_to_string(workspace_root().join("docs/seeds.md")).unwrap();
    let rows: BTreeMap<u32, Vec<String>> = seeds
        .lines()
        .filter_map(|line| {
            let cells: Vec<String> = line.split('|').map(|c| c.trim().to_string()).collect();
            let row = cells.get(1)?.parse::<u32>().ok()?;
            Some((row, cells))
        })
        .collect();
    assert!(rows.len() >= 17, "seeds.md's table: {} rows", rows.len());
    let mut problems = Vec::new();
    for f in SOURCE_FIGURES {
        let cells = &rows[&f.row];
        // | # | finding | the source | study | rubyrace here | verdict | why |
        let (here, verdict) = (&cells[5], &cells[6]);
        if !here.contains(f.quoted) {
            problems.push(format!("row {}: `{}` is not quoted", f.row, f.quoted));
            continue;
        }
        let interval = bracketed_interval(f.quoted).unwrap();
        let want = verdict_by_key(f.source, f.none, interval);
        if !verdict.starts_with(want) {
            problems.push(format!(
                "row {}: the source's {:.3} against `{}` is `{want}` by the key; the row says `{verdict}`",
                f.row, f.source, f.quoted
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "docs/seeds.md:\n{}",
        problems.join("\n")
    );
}
