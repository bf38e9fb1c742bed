//! `rubyrace history` (issue 52) with the real binary: runs at each commit of a repository
//! made by the test, added to a history file, shown, and checked for a new change at the
//! newest commits.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::commits::git;
use crate::support::lab::Lab;
use crate::support::{path_str, rubyrace, Run};

/// The work per request of the app at commit `i`: the same until commit 5, then 80% more.
/// (With 40% more, a point measured beside other work was once too rough for the change
/// to pass p ≤ 0.001 with two points after it; with 80% more and two points after it, the
/// change was missed once when its last point, measured beside another test, came out at
/// [0.37–0.98] (a clean-clone run of 51eaed4, 2026-11-29). Three points after the change
/// leave it called when one of them is rough.)
fn work_at(i: usize) -> u64 {
    let base = crate::bisect::WORK / 10;
    if i < 5 {
        base
    } else {
        base * 18 / 10
    }
}

/// A repository `repo/` of `n` commits of `app/config.ru`, commit `i` doing `work(i)`
/// iterations per request; its hashes, oldest first.
fn repository(lab: &Lab, n: usize, work: impl Fn(usize) -> u64) -> Vec<String> {
    let repo = lab.dir.path("repo");
    std::fs::create_dir_all(repo.join("app")).unwrap();
    git(&repo, &["init", "--quiet", "--initial-branch=main"]);
    (0..n)
        .map(|i| {
            std::fs::write(
                repo.join("app/config.ru"),
                crate::bisect::work_app(work(i), ""),
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
/// the app against its baseline steps down at commit 5 (80% more work per request). The
/// first four runs add themselves (`run --history`), the rest are added at once (`history
/// add`). The history finds the change at commit 5, with the commits before and after;
/// `history check --near 3` (a change is new while its first point after is among the
/// three newest) alerts on it (exit 1, the summary appended) once, and not again, and
/// the default `--near 2` does not; `history add` on a full disk or killed loses nothing
/// (`adding_survives_a_full_disk_and_kills`); a directory added twice is one run; a
/// directory that is not a run is refused by name; the repository is as it was.
#[test]
fn runs_at_each_commit_make_a_history_whose_change_is_found_and_alerted_once() {
    let lab = Lab::new("history");
    let hashes = repository(&lab, 8, work_at);
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
    adding_survives_a_full_disk_and_kills(&db, &dirs[4..]);

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
    assert_eq!(change["index"], 5, "{change}");
    assert_eq!(change["before"]["commit"], hashes[4].as_str());
    assert_eq!(change["after"]["commit"], hashes[5].as_str());
    assert_eq!(change["after"]["subject"], "commit 5");
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
    let not_near = check(&[]);
    assert_eq!(not_near.code(), Some(0), "{not_near:?}");
    assert!(not_near.stdout.contains("✅ no new change"), "{not_near:?}");
    let alerted = check(&["--near", "3", "--summary", summary.to_str().unwrap()]);
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
    assert!(written.contains(&hashes[5][..12]), "{written}");
    let quiet = check(&["--near", "3"]);
    assert_eq!(
        quiet.code(),
        Some(0),
        "the same change alerted twice: {quiet:?}"
    );
    assert!(quiet.stdout.contains("✅ no new change"), "{quiet:?}");
    assert!(Path::new(&db).is_file());
    the_board_shows_it(&lab, &db, &hashes);
    lab.assert_no_leftovers(Duration::from_secs(5));
}

/// `history add` of `dirs` to a history of four runs, first on a disk that fills (every
/// write past 4 KiB of a file fails, RLIMIT_FSIZE's EFBIG standing for a full disk's ENOSPC),
/// then killed (SIGKILL) at several moments of its work: each time the history stays
/// readable and whole (SQLite's integrity check), with the four runs it had and at most the
/// ones added whole; the full disk is named. The caller's add then completes it.
fn adding_survives_a_full_disk_and_kills(db: &Path, dirs: &[std::path::PathBuf]) {
    let runs = || {
        let shown = history(&["show", "--history", &path_str(db), "--format", "json"]);
        assert_eq!(shown.code(), Some(0), "{shown:?}");
        let doc: Value = serde_json::from_str(&shown.stdout).unwrap();
        let whole: String = rusqlite::Connection::open(db)
            .unwrap()
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(whole, "ok");
        doc["runs"].as_u64().unwrap()
    };
    assert_eq!(runs(), 4);
    let mut args = vec!["history", "add", "--history"];
    let db_arg = path_str(db);
    args.push(&db_arg);
    let dir_args: Vec<String> = dirs.iter().map(|d| path_str(d)).collect();
    args.extend(dir_args.iter().map(String::as_str));

    let full = crate::faults::run_with_file_size_limit(&args, 4096, Duration::from_secs(60));
    assert!(full.code().is_some_and(|c| c != 0), "{full:?}");
    // Which write meets the limit first (the WAL's shared memory as the history opens, or
    // the WAL as a run is added) is SQLite's; either way the error says so, and does not
    // call the file "not a history".
    assert!(
        ["disk is full", "disk I/O error", "File too large"]
            .iter()
            .any(|why| full.stderr.contains(why))
            && !full.stderr.contains("is not a rubyrace history"),
        "{full:?}"
    );
    assert_eq!(runs(), 4, "{full:?}");
    eprintln!("history add on a full disk: {}", full.stderr.trim());

    let mut before = 4;
    for after in [0, 15, 40, 80, 150] {
        let add = crate::support::spawn(&args);
        std::thread::sleep(Duration::from_millis(after));
        // SAFETY: kill(2) on the pid of our own child, not yet waited for.
        unsafe { libc::kill(add.pid() as i32, libc::SIGKILL) };
        let killed = add.wait(Duration::from_secs(60));
        let now = runs();
        assert!(
            (before..=8).contains(&now),
            "killed after {after} ms: {now} runs, {before} before: {killed:?}"
        );
        eprintln!("history add killed after {after} ms: {now} runs");
        before = now;
    }
}

/// `history site` and `show --format html` on the history just made: the board's index, the
/// experiment's page with a chart per series (a point per run, each linking to its run's
/// report, which the board rendered), the change marked at commit 5; drawn by headless
/// Chromium (the screenshot kept as target/tmp/history-board.png); a second `site`
/// renders no report again.
fn the_board_shows_it(lab: &Lab, db: &Path, hashes: &[String]) {
    let site = lab.dir.path("site");
    let made = history(&["site", "--history", &path_str(db), &path_str(&site)]);
    assert_eq!(made.code(), Some(0), "{made:?}");
    assert!(
        made.stdout
            .contains("2 pages; run reports: 8 rendered, 0 unchanged"),
        "{made:?}"
    );
    let reports: Vec<_> = std::fs::read_dir(site.join("runs")).unwrap().collect();
    assert_eq!(reports.len(), 8);
    let page = std::fs::read_to_string(site.join("nightly.html")).unwrap();
    // Four series (throughput, two latencies, CPU per request), eight points each, each a
    // link to a report that is there.
    assert_eq!(page.matches("data-point=").count(), 32, "{page}");
    for link in page.split("<a href=\"").skip(1) {
        let target = link.split('"').next().unwrap();
        if target.starts_with("runs/") {
            assert!(site.join(target).is_file(), "{target}");
        }
    }
    assert_eq!(page.matches("<a href=\"runs/").count(), 32);
    assert!(
        page.contains("<g data-change=\"5\" data-worse=\"true\">"),
        "{page}"
    );
    assert!(page.contains(&hashes[5][..12]));
    let index = std::fs::read_to_string(site.join("index.html")).unwrap();
    assert!(
        index.contains("<a href=\"nightly.html\">nightly</a>"),
        "{index}"
    );

    // Drawn by a browser: every point and change is in the page it laid out.
    let dom = crate::browser::run_chromium(&site, &site.join("nightly.html"), "--dump-dom");
    assert_eq!(
        dom.stdout.matches("data-point=").count(),
        32,
        "{}",
        dom.stderr
    );
    assert!(dom.console().is_empty(), "{:?}", dom.console());
    let shot = site.join("nightly.png");
    crate::browser::run_chromium(
        &site,
        &site.join("nightly.html"),
        &format!("--screenshot={}", shot.display()),
    );
    let png = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
    assert!(
        png > 20_000,
        "a screenshot of {png} bytes: {}",
        shot.display()
    );
    // Kept where a person can look at it after the lab is gone.
    let kept = Path::new(env!("CARGO_TARGET_TMPDIR")).join("history-board.png");
    std::fs::copy(&shot, &kept).unwrap();
    eprintln!("the board's page drawn by Chromium: {}", kept.display());

    let again = history(&["site", "--history", &path_str(db), &path_str(&site)]);
    assert!(
        again
            .stdout
            .contains("run reports: 0 rendered, 8 unchanged"),
        "{again:?}"
    );
    the_nightly_workflow_commands_run_as_written(lab, db);
    let pages = lab.dir.path("pages");
    let shown = history(&[
        "show",
        "--history",
        &path_str(db),
        "--format",
        "html",
        "-o",
        &path_str(&pages),
    ]);
    assert_eq!(shown.code(), Some(0), "{shown:?}");
    assert_eq!(shown.stdout.trim(), path_str(&pages.join("nightly.html")));
}

/// The `rubyrace history` commands of examples/ci/rubyrace-nightly.yml, as written (its
/// variables given the test's paths), on the history just made: the check exits 0 (the
/// change was reported above, and with the workflow's `--near 2` its first point after is
/// no longer among the newest) with its Markdown appended, the board is written and keeps
/// every run's report.
fn the_nightly_workflow_commands_run_as_written(lab: &Lab, db: &Path) {
    let workflow = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ci/rubyrace-nightly.yml"),
    )
    .unwrap();
    let (summary, board) = (lab.dir.path("nightly"), lab.dir.path("board"));
    let commands: Vec<Vec<String>> = workflow
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("rubyrace history "))
        .map(|l| {
            l.split_whitespace()
                .skip(1)
                .map(|w| match w.trim_matches('"') {
                    "$HISTORY" => path_str(db),
                    "$BOARD" => path_str(&board),
                    "$RESULTS.md" => format!("{}.md", path_str(&summary)),
                    other => other.to_string(),
                })
                .collect()
        })
        .collect();
    assert_eq!(commands.len(), 2, "{commands:?}");
    for args in commands {
        let run = rubyrace(&args);
        assert_eq!(run.code(), Some(0), "{args:?}: {run:?}");
    }
    let written = std::fs::read_to_string(format!("{}.md", path_str(&summary))).unwrap();
    assert!(written.contains("✅ no new change"), "{written}");
    assert_eq!(std::fs::read_dir(board.join("runs")).unwrap().count(), 8);
}

/// Issue 52's end-to-end history at full length, for `bench/history-e2e/run` (ignored here:
/// thirty runs take 36 minutes of a machine to itself at 20 blocks, and whether a 3% step is found is a
/// question of the machine's noise, which a benchmark reports and a test cannot promise).
/// A repository of 30 commits of an app whose work per request (about 5 ms of Ruby) steps
/// up 5% at commit 10 and down 3% at commit 20; at each, a run of HISTORY_E2E_BLOCKS (20)
/// interleaved blocks of 1 s against a fixed baseline, added with `run --history`. Prints
/// the changes found in the throughput and CPU-per-request series and checks, in each,
/// both steps found at their commits with intervals that hold the planted sizes, and
/// `history check` alerting on a step at the newest commits (a last commit of 5% more
/// work, two runs); what is missed is listed when the run ends, after the board is drawn,
/// and fails it. The repository is left unchanged.
#[test]
#[ignore = "a benchmark: bench/history-e2e/run"]
fn thirty_commits_with_steps_of_5_and_3_percent() {
    let blocks: usize = std::env::var("HISTORY_E2E_BLOCKS")
        .ok()
        .and_then(|b| b.parse().ok())
        .unwrap_or(20);
    let work = |i: usize| -> u64 {
        let w = crate::bisect::WORK as f64;
        let factor = match i {
            0..10 => 1.0,
            10..20 => 1.05,
            20..30 => 1.05 * 0.97,
            _ => 1.05 * 0.97 * 1.05,
        };
        (w * factor).round() as u64
    };
    let lab = Lab::new("history-30");
    let hashes = repository(&lab, 32, work);
    let repo = lab.dir.path("repo");
    let fixed = lab.dir.path("fixed");
    std::fs::create_dir_all(&fixed).unwrap();
    std::fs::write(
        fixed.join("config.ru"),
        crate::bisect::work_app(work(0), ""),
    )
    .unwrap();
    lab.experiment(&format!(
        "name = \"nightly\"\nblocks = {blocks}\n\n[settings]\nwarmup = \"300ms\"\nduration = \"1s\"\n\n[[configs]]\nlabel = \"base\"\napp = \"{}\"\n\n[[configs]]\nlabel = \"app\"\napp = \"{}\"\n",
        fixed.display(),
        repo.join("app").display()
    ));
    let file = lab.dir.path("experiment.toml");
    let db = lab.dir.path("history.db");
    let run_at = |i: usize| {
        git(&repo, &["checkout", "--quiet", &hashes[i]]);
        let out = lab.dir.path(&format!("results-{i}"));
        let args = [
            "run".to_string(),
            path_str(&file),
            "-o".into(),
            path_str(&out),
            "--history".into(),
            path_str(&db),
        ];
        let run = lab.spawn_marked(&args).wait(Duration::from_secs(600));
        assert_eq!(run.code(), Some(0), "commit {i}: {run:?}");
    };
    let changes_of = |metric: &str| -> Vec<Value> {
        let shown = history(&["show", "--history", &path_str(&db), "--format", "json"]);
        let doc: Value = serde_json::from_str(&shown.stdout).unwrap();
        let series = doc["series"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["series"]["metric"] == metric)
            .unwrap_or_else(|| panic!("no {metric} series: {doc}"))
            .clone();
        series["changes"].as_array().unwrap().clone()
    };
    let said = |metric: &str, changes: &[Value]| {
        for c in changes {
            eprintln!(
                "{metric}: change at commit {} by {:.4}× [{:.4}–{:.4}], p {:.1e}",
                c["index"],
                c["factor"].as_f64().unwrap(),
                c["factor_low"].as_f64().unwrap(),
                c["factor_high"].as_f64().unwrap(),
                c["p_value"].as_f64().unwrap()
            );
        }
    };
    for i in 0..30 {
        run_at(i);
    }
    // Each point as measured: how rough a run of these blocks is on this machine.
    let shown = history(&["show", "--history", &path_str(&db), "--format", "json"]);
    let doc: Value = serde_json::from_str(&shown.stdout).unwrap();
    for s in doc["series"].as_array().unwrap() {
        let points: Vec<String> = s["series"]["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                format!(
                    "{:.3} [{:.3}–{:.3}]",
                    p["value"].as_f64().unwrap(),
                    p["lo"].as_f64().unwrap(),
                    p["hi"].as_f64().unwrap()
                )
            })
            .collect();
        eprintln!("{}: {}", s["series"]["key"], points.join(", "));
    }
    for metric in ["throughput", "cpu_per_request"] {
        said(metric, &changes_of(metric));
    }
    // Each step in each speed metric: found at its commit, with an interval that holds the
    // planted size. CPU per request against the baseline's: 5% more work is at most 5% more
    // CPU (Puma's own share of a request does not grow), 3% less at most 3% less; throughput
    // with one connection, 1/1.05 and 1/0.97 at most. What is missed is collected, and the
    // test goes on to `check` and the board before it fails, so one long run says it all.
    let mut missed: Vec<String> = Vec::new();
    for (metric, planted) in [
        ("cpu_per_request", [[1.05, 1.04], [0.97, 0.975]]),
        (
            "throughput",
            [[1.0 / 1.05, 1.0 / 1.04], [1.0 / 0.97, 1.0 / 0.975]],
        ),
    ] {
        let changes = changes_of(metric);
        for (commit, sizes) in [10u64, 20].into_iter().zip(planted) {
            let at = changes.iter().find(|c| c["index"] == commit);
            let holds = |c: &Value| {
                sizes.iter().any(|&p| {
                    c["factor_low"].as_f64().unwrap() <= p
                        && p <= c["factor_high"].as_f64().unwrap()
                })
            };
            match at {
                Some(c) if holds(c) => {}
                Some(c) => missed.push(format!(
                    "{metric}: the step at commit {commit} is {c}, not {sizes:?}"
                )),
                None => missed.push(format!("{metric}: no change at commit {commit}")),
            }
        }
        if changes.len() != 2 {
            missed.push(format!("{metric}: {} changes, not 2", changes.len()));
        }
    }

    // The newest commits step up 5% again: after two runs, `check` alerts on them.
    let quiet = history(&["check", "--history", &path_str(&db)]);
    eprintln!("{}", quiet.stdout);
    run_at(30);
    run_at(31);
    let alerted = history(&["check", "--history", &path_str(&db)]);
    eprintln!("{}", alerted.stdout);
    if alerted.code() != Some(1) || !alerted.stdout.contains(&hashes[30][..12]) {
        missed.push(format!("check did not alert on commit 30: {alerted:?}"));
    }
    // The board, kept for a person to look at (the lab is removed).
    let site = Path::new(env!("CARGO_TARGET_TMPDIR")).join("history-30-site");
    let _ = std::fs::remove_dir_all(&site);
    let made = history(&["site", "--history", &path_str(&db), &path_str(&site)]);
    assert_eq!(made.code(), Some(0), "{made:?}");
    let shot = site.join("nightly.png");
    crate::browser::run_chromium(
        &site,
        &site.join("nightly.html"),
        &format!("--screenshot={}", shot.display()),
    );
    eprintln!(
        "the board: {}; its page drawn: {}",
        site.display(),
        shot.display()
    );
    git(&repo, &["checkout", "--quiet", "main"]);
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");
    lab.assert_no_leftovers(Duration::from_secs(5));
    assert!(missed.is_empty(), "missed: {missed:#?}");
}

/// A history whose series slides (0.5% slower a night for 30 nights, each point ±1% at
/// 95%), written through the store's own `add` as `history add` writes it: `show` tells
/// one drift for the worse over the 30 points with no bisection and no change, `--format
/// json` gives it with its span, and `check` alerts on it once (exit 1, the drift's row)
/// and not again (exit 0), nor after five more nights of the same slide.
#[test]
fn a_sliding_series_is_one_drift_alerted_once_with_no_bisection() {
    use history::import::{CommitInfo, ImportedRun, PointKind, PointRecord};

    let dir = crate::support::files::TempDir::new("history-drift");
    let db = dir.path("history.db");
    let mut rng = stats::rng::SeededRng::new(30);
    // Nights into `db`, each night's level on the log scale `level(night)`.
    let add_nights = |db: &Path,
                      nights: std::ops::Range<usize>,
                      level: &dyn Fn(usize) -> f64,
                      rng: &mut stats::rng::SeededRng| {
        let mut store = history::History::open(db).unwrap();
        for night in nights {
            let value = (level(night) + 0.01 / 1.96 * rng.standard_normal()).exp();
            let created_at = format!(
                "2026-{:02}-{:02}T02:00:00Z",
                11 + night / 30,
                night % 30 + 1
            );
            store
                .add(&ImportedRun {
                    key: format!("run:nightly:{created_at}"),
                    kind: "run".into(),
                    experiment: "nightly".into(),
                    experiment_file: "/perf/nightly.toml".into(),
                    dir: format!("/results/{night}"),
                    created_at: created_at.clone(),
                    commit: Some(CommitInfo {
                        hash: format!("{:06x}{:034x}", 0xabc000 + night, night),
                        subject: format!("commit {night}"),
                        author_date: created_at,
                        order: Some(2 * night as i64),
                        dirty: false,
                        repo: Some("/src/app".into()),
                    }),
                    host_kind: "cpu × 2".into(),
                    design: "interleaved".into(),
                    rubyrace_version: "0".into(),
                    points: vec![PointRecord {
                        label: "app/base".into(),
                        metric: "throughput".into(),
                        kind: PointKind::Ratio,
                        value,
                        lo: value * (-0.01f64).exp(),
                        hi: value * 0.01f64.exp(),
                        confidence: 0.95,
                        blocks: 6,
                        higher_is_better: true,
                    }],
                })
                .unwrap();
        }
    };
    let slide = |night: usize| -0.005 * night as f64;
    add_nights(&db, 0..30, &slide, &mut rng);
    let file = path_str(&db);

    let shown = history(&["show", "--history", &file]);
    assert_eq!(shown.code(), Some(0), "{shown:?}");
    eprintln!("{}", shown.stdout);
    assert!(shown.stdout.contains("no change found"), "{shown:?}");
    assert!(
        shown.stdout.contains("drift (worse) of throughput by 0.")
            && shown.stdout.contains(
                "over 30 points, from abc000000000 \"commit 0\" to abc01d000000 \"commit 29\""
            )
            && shown.stdout.contains("a slide, no one commit to bisect"),
        "{shown:?}"
    );
    assert!(!shown.stdout.contains("bisect:"), "{shown:?}");

    let json = history(&["show", "--history", &file, "--format", "json"]);
    let doc: Value = serde_json::from_str(&json.stdout).unwrap();
    let series = &doc["series"][0];
    assert_eq!(series["changes"].as_array().unwrap().len(), 0, "{series}");
    let drift = &series["drifts"][0];
    assert_eq!(
        (drift["start"].as_u64(), drift["end"].as_u64()),
        (Some(0), Some(30))
    );
    // 29 nights of −0.5%: exp(−0.145) = 0.865.
    let (lo, hi) = (
        drift["factor_low"].as_f64().unwrap(),
        drift["factor_high"].as_f64().unwrap(),
    );
    assert!(lo <= 0.865 && 0.865 <= hi, "{drift}");
    assert_eq!(drift["worse"], true);

    let alerted = history(&["check", "--history", &file]);
    assert_eq!(alerted.code(), Some(1), "{alerted:?}");
    eprintln!("{}", alerted.stdout);
    assert!(
        alerted
            .stdout
            .starts_with("## rubyrace history check: ❌ 1 drift of 3.0% or more"),
        "{alerted:?}"
    );
    assert!(
        alerted
            .stdout
            .contains("| series | drift | from | to | points |")
            && alerted
                .stdout
                .contains("| 30: a slide, no one commit to bisect |"),
        "{alerted:?}"
    );
    let again = history(&["check", "--history", &file]);
    assert_eq!(again.code(), Some(0), "{again:?}");
    // Five more nights of the same slide: the same drift, not alerted again.
    add_nights(&db, 30..35, &slide, &mut rng);
    let later = history(&["check", "--history", &file]);
    assert_eq!(later.code(), Some(0), "{later:?}");

    // A slide that starts after twelve level nights: its start is found on a grid that
    // moves as nights are added, and each of five nights after the first alert finds the
    // same drift, not a new one.
    let bent = dir.path("bent.db");
    let late = |night: usize| -0.005 * night.saturating_sub(12) as f64;
    add_nights(&bent, 0..30, &late, &mut rng);
    let bent_file = path_str(&bent);
    let first = history(&["check", "--history", &bent_file]);
    assert_eq!(first.code(), Some(1), "{first:?}");
    for night in 30..35 {
        add_nights(&bent, night..night + 1, &late, &mut rng);
        let shown = history(&["show", "--history", &bent_file]);
        eprintln!(
            "night {night}: {}",
            shown
                .stdout
                .lines()
                .filter(|l| l.contains("drift"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        let again = history(&["check", "--history", &bent_file]);
        assert_eq!(again.code(), Some(0), "night {night}: {again:?}");
    }
}
