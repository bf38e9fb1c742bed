//! `rubyrace history` (issue 52) with the real binary: runs at each commit of a repository
//! made by the test, added to a history file, shown, and checked for a new change at the
//! newest commits.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::commits::git;
use crate::support::lab::Lab;
use crate::support::{path_str, rubyrace, Run};

/// The work per request of the app at commit `i`: the same until commit 6, then 80% more.
/// (With 40% more, a point measured beside other work was once too rough for the change
/// to pass p ≤ 0.001 with two points after it.)
fn work_at(i: usize) -> u64 {
    let base = crate::bisect::WORK / 10;
    if i < 6 {
        base
    } else {
        base * 18 / 10
    }
}

/// A repository `repo/` of eight commits of `app/config.ru`, commit `i` doing `work_at(i)`;
/// its hashes, oldest first.
fn repository(lab: &Lab) -> Vec<String> {
    let repo = lab.dir.path("repo");
    std::fs::create_dir_all(repo.join("app")).unwrap();
    git(&repo, &["init", "--quiet", "--initial-branch=main"]);
    (0..8)
        .map(|i| {
            std::fs::write(
                repo.join("app/config.ru"),
                crate::bisect::work_app(work_at(i), ""),
            )
            .unwrap();
            std::fs::write(repo.join("app/CHANGES"), format!("change {i}\n")).unwrap();
            git(&repo, &["add", "."]);
            git(&repo, &["commit", "--quiet", "-m", &format!("commit {i}")]);
            git(&repo, &["rev-parse", "HEAD"]).trim().to_string()
        })
        .collect()
}

fn history(args: &[&str]) -> Run {
    let mut all = vec!["history"];
    all.extend(args);
    rubyrace(&all)
}

/// Eight commits; at each, a short interleaved run of the app against a fixed baseline (the
/// same app outside the repository, never changing), added to the history. The series of
/// the app against its baseline steps down at commit 6 (80% more work per request). The
/// first four runs add themselves (`run --history`), the rest are added at once (`history
/// add`). The history finds the change at commit 6, with the commits before and after; `history check`
/// alerts on it (exit 1, the summary appended) once, and not again; a directory added twice
/// is one run; a directory that is not a run is refused by name; the repository is as it
/// was.
#[test]
fn runs_at_each_commit_make_a_history_whose_change_is_found_and_alerted_once() {
    let lab = Lab::new("history");
    let hashes = repository(&lab);
    let repo = lab.dir.path("repo");
    let fixed = lab.dir.path("fixed");
    std::fs::create_dir_all(&fixed).unwrap();
    std::fs::write(
        fixed.join("config.ru"),
        crate::bisect::work_app(work_at(0), ""),
    )
    .unwrap();
    lab.experiment(&format!(
        r#"
name = "nightly"
blocks = 4

[settings]
warmup = "300ms"
duration = "1s"

[[configs]]
label = "base"
app = "{}"

[[configs]]
label = "app"
app = "{}"
"#,
        fixed.display(),
        repo.join("app").display()
    ));
    let file = lab.dir.path("experiment.toml");
    let db = lab.dir.path("perf/history.db");
    let mut dirs = Vec::new();
    for (i, hash) in hashes.iter().enumerate() {
        git(&repo, &["checkout", "--quiet", hash]);
        let out = lab.dir.path(&format!("results-{i}"));
        // The first four add themselves as they end (`run --history`); the rest are added
        // below, all at once.
        let mut args = vec![
            "run".to_string(),
            path_str(&file),
            "-o".into(),
            path_str(&out),
        ];
        if i < 4 {
            args.extend(["--history".to_string(), path_str(&db)]);
        }
        let run = lab.spawn_marked(&args).wait(Duration::from_secs(180));
        assert_eq!(run.code(), Some(0), "commit {i}: {run:?}");
        if i < 4 {
            assert!(
                run.stderr.contains(&format!(
                    "rubyrace: added to the history {} ({} runs)",
                    db.display(),
                    i + 1
                )),
                "{run:?}"
            );
        }
        dirs.push(out);
    }
    git(&repo, &["checkout", "--quiet", "main"]);
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");

    let mut add = vec!["add".to_string(), "--history".into(), path_str(&db)];
    add.extend(dirs[4..].iter().map(|d| path_str(d)));
    let added = rubyrace(
        &std::iter::once("history".to_string())
            .chain(add)
            .collect::<Vec<_>>(),
    );
    assert_eq!(added.code(), Some(0), "{added:?}");
    assert!(added.stdout.contains(": 8 runs"), "{added:?}");
    let again = history(&["add", "--history", &path_str(&db), &path_str(&dirs[3])]);
    assert_eq!(again.code(), Some(0), "{again:?}");
    assert!(
        again.stdout.contains("already there") && again.stdout.contains(": 8 runs"),
        "{again:?}"
    );
    let refused = history(&["add", "--history", &path_str(&db), &path_str(&repo)]);
    assert_eq!(refused.code(), Some(2), "{refused:?}");
    assert!(
        refused.stderr.contains("is not a results directory"),
        "{refused:?}"
    );

    let shown = history(&["show", "--history", &path_str(&db), "--format", "json"]);
    assert_eq!(shown.code(), Some(0), "{shown:?}");
    let doc: Value = serde_json::from_str(&shown.stdout).unwrap();
    assert_eq!(doc["runs"], 8);
    let throughput = doc["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["series"]["key"] == "nightly · app/base · throughput")
        .unwrap_or_else(|| panic!("no throughput series: {doc}"));
    let points = throughput["series"]["points"].as_array().unwrap();
    assert_eq!(points.len(), 8);
    let commits: Vec<&str> = points
        .iter()
        .map(|p| p["commit"].as_str().unwrap())
        .collect();
    assert_eq!(
        commits,
        hashes.iter().map(String::as_str).collect::<Vec<_>>()
    );
    let changes = throughput["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "{throughput}");
    let change = &changes[0];
    assert_eq!(change["index"], 6, "{change}");
    assert_eq!(change["before"]["commit"], hashes[5].as_str());
    assert_eq!(change["after"]["commit"], hashes[6].as_str());
    assert_eq!(change["after"]["subject"], "commit 6");
    assert_eq!(change["commits_between"], 0);
    assert_eq!(change["worse"], true);
    // 80% more work per request: throughput falls to about 1/1.8 of the baseline's.
    let (lo, hi) = (
        change["factor_low"].as_f64().unwrap(),
        change["factor_high"].as_f64().unwrap(),
    );
    assert!(lo < hi && hi < 0.85 && lo > 0.35, "{change}");

    let text = history(&["show", "--history", &path_str(&db)]);
    assert_eq!(text.code(), Some(0), "{text:?}");
    eprintln!("{}", text.stdout);
    assert!(
        text.stdout
            .contains("nightly · app/base · throughput (8 points)"),
        "{text:?}"
    );
    assert!(
        text.stdout.contains("change (worse) of throughput"),
        "{text:?}"
    );

    let summary = lab.dir.path("summary.md");
    let check = |args: &[&str]| {
        let mut all = vec!["check", "--history", db.to_str().unwrap()];
        all.extend(args);
        history(&all)
    };
    let alerted = check(&["--summary", summary.to_str().unwrap()]);
    assert_eq!(alerted.code(), Some(1), "{alerted:?}");
    let written = std::fs::read_to_string(&summary).unwrap();
    eprintln!("{written}");
    assert!(
        written.starts_with("## rubyrace history check: ❌"),
        "{written}"
    );
    assert!(
        written.contains("nightly · app/base · throughput"),
        "{written}"
    );
    assert!(written.contains(&hashes[6][..12]), "{written}");
    let quiet = check(&[]);
    assert_eq!(
        quiet.code(),
        Some(0),
        "the same change alerted twice: {quiet:?}"
    );
    assert!(quiet.stdout.contains("✅ no new change"), "{quiet:?}");
    assert!(Path::new(&db).is_file());
    lab.assert_no_leftovers(Duration::from_secs(5));
}
