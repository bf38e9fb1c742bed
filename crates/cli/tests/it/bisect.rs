//! `rubyrace bisect` on git repositories the tests make: a Rack app whose every request
//! does a fixed amount of work, committed 20 times. The real binary searches the history,
//! measuring the ends and up to six candidates side by side on real Puma servers, block
//! after block, each round (a set of commits) a results directory of its own.
//!
//! - Commit 13 does 50% more work per request; commit 12, just before it, raises at boot
//!   (13 fixes it). The search skips commit 12 by name and answers that the first bad
//!   commit is one of 12–13 (no block can tell them apart), with commit 13's cost against
//!   commit 11; it is killed (SIGKILL) in the middle of its search and resumed: it ends with
//!   the same answer, every stored block kept, and leaves no server and no worktree behind.
//! - The same history with no slowdown: nothing to find (`--precision 15%`: the ends'
//!   interval lies below 15% within a few blocks).
//! - Two slowdowns of 50% (commits 6 and 15): both named.
//!
//! The planted slowdowns are large and the searches run beside one other test
//! (`.config/nextest.toml`): these tests check the search, not how small a change it finds
//! (the seeded simulations of experiment::locate do that, and docs/bisect.md gives real runs
//! of a 2.6% change). The search on a flat history and the one with two changes decide on
//! CPU per request, which does not count the time a process waits for a CPU (it is not much
//! steadier than throughput beside a CPU-bound neighbour: .config/nextest.toml); the first
//! keeps the search's own choice of metric, for a 50% change.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde_json::Value;

use crate::commits::git;
use crate::support::lab::Lab;
use crate::support::spawn;

/// Iterations of work per request at good (about 5 ms of Ruby on this machine, so Puma's
/// own cost per request is a small share and the cost ratio is near the work's ratio).
pub(crate) const WORK: u64 = 150_000;

/// A Rack app doing `work` iterations per request, with `boot` (Ruby) before it.
pub(crate) fn work_app(work: u64, boot: &str) -> String {
    format!(
        "{boot}WORK = {work}\nrun ->(env) {{ x = 0; WORK.times {{ |i| x += i }}; [200, {{ \"content-type\" => \"text/plain\" }}, [x.to_s]] }}\n"
    )
}

/// A repository `repo/` in the lab with 20 commits of `app/config.ru`, commit `i` doing
/// `work(i)` iterations per request and raising at boot when `broken(i)`; the hashes.
pub(crate) fn history(
    lab: &Lab,
    work: impl Fn(usize) -> u64,
    broken: impl Fn(usize) -> bool,
) -> Vec<String> {
    let repo = lab.dir.path("repo");
    std::fs::create_dir_all(repo.join("app")).unwrap();
    git(&repo, &["init", "--quiet", "--initial-branch=main"]);
    let mut hashes = Vec::new();
    for i in 0..20 {
        let boot = if broken(i) {
            "raise \"commit {i} does not boot\"\n"
        } else {
            ""
        };
        std::fs::write(
            repo.join("app/config.ru"),
            work_app(work(i), &boot.replace("{i}", &i.to_string())),
        )
        .unwrap();
        std::fs::write(repo.join("app/CHANGES"), format!("change {i}\n")).unwrap();
        git(&repo, &["add", "."]);
        git(&repo, &["commit", "--quiet", "-m", &format!("commit {i}")]);
        hashes.push(git(&repo, &["rev-parse", "HEAD"]));
    }
    hashes
}

/// A repository `repo/` in the lab with `n` commits of `app/config.ru`, commit `i` doing
/// `work(i)` iterations per request, written in one `git fast-import` (a commit a process
/// would take seconds for hundreds); the hashes.
pub(crate) fn long_history(lab: &Lab, n: usize, work: impl Fn(usize) -> u64) -> Vec<String> {
    let repo = lab.dir.path("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "--quiet", "--initial-branch=main"]);
    let mut stream = String::new();
    for i in 0..n {
        let message = format!("commit {i}");
        stream.push_str(&format!(
            "commit refs/heads/main\nmark :{}\ncommitter rubyrace test <test@example.com> {} +0000\ndata {}\n{message}\n",
            i + 1,
            1_700_000_000 + i,
            message.len()
        ));
        if i > 0 {
            stream.push_str(&format!("from :{i}\n"));
        }
        for (path, text) in [
            ("app/config.ru", work_app(work(i), "")),
            ("app/CHANGES", format!("change {i}\n")),
        ] {
            stream.push_str(&format!(
                "M 100644 inline {path}\ndata {}\n{text}\n",
                text.len()
            ));
        }
    }
    let mut import = std::process::Command::new("git")
        .arg("-C")
        .arg(&repo)
        .args(["fast-import", "--quiet"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(import.stdin.as_mut().unwrap(), stream.as_bytes()).unwrap();
    drop(import.stdin.take());
    assert!(import.wait().unwrap().success(), "git fast-import");
    git(&repo, &["reset", "--hard", "--quiet", "main"]);
    git(&repo, &["rev-list", "--reverse", "main"])
        .lines()
        .map(str::to_string)
        .collect()
}

/// Short trials: the planted changes are 50%, and eight servers a block on two CPUs take
/// most of a test's time as it is (1 s trials made each search 2.5–3 minutes).
const EXPERIMENT: &str = r#"
name = "bisect"

[settings]
app = "repo/app"
warmup = "200ms"
duration = "600ms"
"#;

pub(crate) fn bisect_args(lab: &Lab, out: &Path, extra: &[&str]) -> Vec<String> {
    bisect_args_of(lab, EXPERIMENT, out, extra)
}

/// [`bisect_args`] with an experiment file of the caller's.
pub(crate) fn bisect_args_of(
    lab: &Lab,
    experiment: &str,
    out: &Path,
    extra: &[&str],
) -> Vec<String> {
    let file = lab.experiment(experiment);
    let mut args: Vec<String> = vec![
        "bisect".into(),
        file.to_string_lossy().into_owned(),
        "--app-repo".into(),
        lab.dir.path("repo").to_string_lossy().into_owned(),
        "--good".into(),
        "main~19".into(),
        "--bad".into(),
        "main".into(),
        "-o".into(),
        out.to_string_lossy().into_owned(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

fn record(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("bisect.json")).unwrap()).unwrap()
}

/// Trials stored in a round's results directory.
fn stored(round: &Path) -> i64 {
    Connection::open(round.join("results.db"))
        .unwrap()
        .query_row("SELECT count(*) FROM trials", [], |r| r.get(0))
        .unwrap()
}

fn round_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir.join("rounds"))
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    dirs.sort();
    dirs
}

/// Blocks the record says were measured.
fn blocks(r: &Value) -> u64 {
    r["rounds"]
        .as_array()
        .map(|rounds| rounds.iter().map(|r| r["blocks"].as_u64().unwrap()).sum())
        .unwrap_or(0)
}

/// The history `bisect --history` added to: one series, the bisection's own, a point per
/// commit measured with an interval (the good end among them), in commit order, each at
/// its commit with its cost against good as the record has it; on the board, each point
/// links to the bisection's page.
fn bisection_in_the_history(db: &Path, r: &Value, hashes: &[String]) {
    let shown = spawn(&[
        "history",
        "show",
        "--history",
        db.to_str().unwrap(),
        "--format",
        "json",
    ])
    .wait(Duration::from_secs(60));
    assert_eq!(shown.code(), Some(0), "{shown:?}");
    let doc: Value = serde_json::from_str(&shown.stdout).unwrap();
    let series = doc["series"].as_array().unwrap();
    assert_eq!(series.len(), 1, "{doc}");
    let s = &series[0]["series"];
    assert_eq!(
        s["label"].as_str().unwrap(),
        format!(
            "{} against {} (bisect)",
            r["config"].as_str().unwrap(),
            &hashes[0][..12]
        ),
        "{s}"
    );
    assert_eq!(s["higher_is_better"], false);
    let mut measured: Vec<&Value> = r["estimates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| !e["low"].is_null() && !e["high"].is_null())
        .collect();
    measured.sort_by_key(|e| e["commit"].as_u64());
    let points = s["points"].as_array().unwrap();
    assert_eq!(points.len(), measured.len(), "{s}");
    for (p, e) in points.iter().zip(measured) {
        let commit = e["commit"].as_u64().unwrap() as usize;
        assert_eq!(p["commit"], hashes[commit].trim(), "{p} {e}");
        assert_eq!(p["value"], e["ratio"], "{p} {e}");
    }
    // On the board, each commit's point links to the bisection's page.
    let site = db.with_file_name("site");
    let made = spawn(&[
        "history",
        "site",
        "--history",
        db.to_str().unwrap(),
        site.to_str().unwrap(),
    ])
    .wait(Duration::from_secs(60));
    assert_eq!(made.code(), Some(0), "{made:?}");
    let first = site.join(format!("runs/{}.html", points[0]["run_id"]));
    let page = std::fs::read_to_string(&first).unwrap_or_default();
    assert!(
        page.contains("data-chart=\"bisect\""),
        "{}: {made:?}",
        first.display()
    );
}

#[test]
fn bisect_names_the_commit_skips_what_does_not_boot_and_resumes_after_a_kill() {
    let lab = Lab::new("bisect");
    let hashes = history(
        &lab,
        |i| if i >= 13 { WORK * 150 / 100 } else { WORK },
        |i| i == 12,
    );
    let repo = lab.dir.path("repo");
    let out = lab.dir.path("search");
    // The planted change is 50%: the parts beside it need only be shown free of a change
    // of 10% (at the default 2% each took its whole allowance of fresh blocks).
    let args = bisect_args(&lab, &out, &["--precision", "10%"]);

    // Killed once two blocks are stored (the ends' first call needs three).
    let mut running = spawn(&args);
    let deadline = Instant::now() + Duration::from_secs(600);
    while !out.join("bisect.json").is_file() || blocks(&record(&out)) < 2 {
        assert!(running.is_running(), "bisect ended before the kill");
        assert!(Instant::now() < deadline, "two blocks were never stored");
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: the pid of the rubyrace this test started.
    unsafe { libc::kill(running.pid() as i32, libc::SIGKILL) };
    // (`wait`'s deadline counts from the start.)
    let killed = running.wait(Duration::from_secs(900));
    assert_eq!(killed.code(), None, "{killed:?}");
    let before: Vec<(PathBuf, i64)> = round_dirs(&out)
        .iter()
        .map(|d| (d.clone(), stored(d)))
        .collect();
    assert!(!before.is_empty());

    // The resumed search adds its commits to a history as it ends (`--history`).
    let db = lab.dir.path("history.db");
    let resumed = spawn(&[
        "bisect",
        "--resume",
        out.to_str().unwrap(),
        "--history",
        db.to_str().unwrap(),
    ])
    .wait(Duration::from_secs(900));
    assert_eq!(resumed.code(), Some(0), "{resumed:?}");
    let r = record(&out);
    bisection_in_the_history(&db, &r, &hashes);
    assert_eq!(r["schema"], "rubyrace.bisect/2");
    assert_eq!(r["outcome"]["kind"], "range", "{resumed:?}");
    assert_eq!(
        (
            &r["outcome"]["first"],
            &r["outcome"]["last"],
            &r["outcome"]["cannot_tell"]
        ),
        (&Value::from(12), &Value::from(13), &Value::from(false)),
        "{resumed:?}"
    );
    assert!(
        resumed.stdout.contains(&format!(
            "**The first bad commit is one of commits 12–13** (`{}` commit 12",
            &hashes[12][..12]
        )),
        "{resumed:?}"
    );
    // The finding: commit 13 against commit 11, about the planted 50% (Puma's own share of
    // a request's time is not slowed), 12 and 13 holding at least 95% of the probability.
    let found = &r["findings"][0];
    assert_eq!(found["kind"], "skipped", "{r}");
    assert!(found["probability"].as_f64().unwrap() >= 0.95, "{found}");
    let ratio = found["ratio"].as_f64().unwrap();
    assert!(
        (1.25..1.7).contains(&ratio),
        "commit 13 against 11: ×{ratio}"
    );
    assert!(found["low"].as_f64().unwrap() > 1.0, "{found}");
    // Commit 13's cost against good agrees with the bad end's (the same code).
    let estimate = |c: u64| {
        r["estimates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["commit"] == c)
            .unwrap_or_else(|| panic!("commit {c} was measured: {r}"))
            .clone()
    };
    let (e13, e19) = (estimate(13), estimate(19));
    assert!(
        e13["low"].as_f64().unwrap() < e19["high"].as_f64().unwrap()
            && e19["low"].as_f64().unwrap() < e13["high"].as_f64().unwrap(),
        "commit 13 against good: {e13}; bad against good: {e19}"
    );
    // Commit 12 was skipped, by name, with why; the reason names the file in the
    // repository, not the deleted checkout (46.17).
    assert_eq!(r["skipped"][0][0], 12, "{r}");
    assert!(
        resumed.stdout.contains("Skipped commit 12")
            && resumed.stdout.contains("commit 12 does not boot"),
        "{resumed:?}"
    );
    let why = r["skipped"][0][1].as_str().unwrap();
    assert!(
        why.contains("app/config.ru:") && !why.contains("checkouts/"),
        "{why}"
    );
    // Every block stored before the kill is kept: the rounds that had ended are unchanged,
    // and the one that was running has as many trials or more.
    for (i, (dir, n)) in before.iter().enumerate() {
        let now = stored(dir);
        if i + 1 < before.len() {
            assert_eq!(now, *n, "{} was measured again", dir.display());
        } else {
            assert!(now >= *n, "{} lost trials", dir.display());
        }
    }
    assert!(blocks(&r) <= 60, "{}", blocks(&r));
    // The reports, and nothing left behind.
    let html = std::fs::read_to_string(out.join("bisect.html")).unwrap();
    assert!(html.contains("data-chart=\"bisect\""), "{html}");
    assert!(html.contains("does not boot"), "{html}");
    let list = git(&repo, &["worktree", "list", "--porcelain"]);
    assert_eq!(list.matches("worktree ").count(), 1, "{list}");
    lab.assert_no_leftovers(Duration::from_secs(2));
}

#[test]
fn a_history_without_a_slowdown_has_nothing_to_find() {
    let lab = Lab::new("bisect-flat");
    history(&lab, |_| WORK, |_| false);
    let out = lab.dir.path("search");
    // Eight servers a block on two cores: a block's throughput ratio spread 8% beside
    // the other tests (2026-11-28), so 8% took most of the budget; 15% on CPU per request
    // is reached in a few blocks. Under a heavier load the budget (30 blocks here) may end
    // first: then "no regression could be shown", never a commit. When a false alarm on
    // the ends starts a search (in CI, on the search's own choice of metric, latency_p99's
    // first 4 blocks, 2026-11-28), the budget's end withdraws it: still nothing to find,
    // said so.
    let run = spawn(&bisect_args(
        &lab,
        &out,
        &[
            "--precision",
            "15%",
            "--max-blocks",
            "30",
            "--metric",
            "cpu_per_request",
        ],
    ))
    .wait(Duration::from_secs(900));
    assert_eq!(run.code(), Some(0), "{run:?}");
    let r = record(&out);
    assert_eq!(r["outcome"]["kind"], "nothing_to_find", "{run:?}");
    assert!(r["findings"].as_array().unwrap().is_empty(), "{r}");
    let withdrawn = r["ends_withdrawn"] == true;
    assert_eq!(
        withdrawn,
        run.stdout.contains("so that call is withdrawn"),
        "{run:?}"
    );
    if r["outcome"]["exhausted"] == false {
        assert!(run.stdout.contains("**No regression to find**"), "{run:?}");
        let high = r["ends"]["high"].as_f64().unwrap();
        assert!(
            high < 1.15,
            "the ends' interval lies below 15%: {}",
            r["ends"]
        );
        assert!(withdrawn || blocks(&r) < 30, "{}", blocks(&r));
    } else {
        assert!(
            run.stdout.contains("**No regression could be shown**"),
            "{run:?}"
        );
        assert!(blocks(&r) >= 30, "{r}");
        eprintln!("the budget ended first: {}", r["ends"]);
    }
    lab.assert_no_leftovers(Duration::from_secs(2));
}

/// Two slowdowns of 50% (commits 6 and 15): the search names one, the part of the history
/// beside it shows a change of its own in fresh blocks, and that part is searched in turn.
/// Both are named (or, where the budget ended first, a range holding one, exit 4), never
/// a commit that is neither.
#[test]
fn two_slowdowns_are_each_found() {
    let lab = Lab::new("bisect-two");
    history(
        &lab,
        |i| WORK * [100, 150, 225][(i >= 6) as usize + (i >= 15) as usize] / 100,
        |_| false,
    );
    let out = lab.dir.path("search");
    let run = spawn(&bisect_args(
        &lab,
        &out,
        &["--precision", "8%", "--metric", "cpu_per_request"],
    ))
    .wait(Duration::from_secs(1200));
    let r = record(&out);
    assert_eq!(r["more_than_one_change"], true, "{run:?}");
    assert_eq!(r["outcome"]["kind"], "changes", "{run:?}");
    let changes = r["outcome"]["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 2, "{r}");
    for (change, planted) in changes.iter().zip([6, 15]) {
        let (first, last) = (
            change["first"].as_u64().unwrap(),
            change["last"].as_u64().unwrap(),
        );
        assert!(
            (first..=last).contains(&planted),
            "{change} should hold {planted}"
        );
    }
    match run.code() {
        Some(0) => {
            assert!(changes.iter().all(|c| c["first"] == c["last"]), "{r}");
        }
        Some(4) => assert!(changes.iter().any(|c| c["cannot_tell"] == true), "{r}"),
        other => panic!("exit {other:?}: {run:?}"),
    }
    eprintln!("{}", run.stdout);
    lab.assert_no_leftovers(Duration::from_secs(2));
}

/// The fake CRuby source tree of [`ruby_history`]: `configure` fails when the tree has a
/// file `broken`, else writes a Makefile whose `install` puts into the prefix a `bin/ruby`
/// that runs the host's Ruby with the tree's `prelude.rb` required first.
const FAKE_CONFIGURE: &str = r#"#!/bin/sh
if [ -f broken ]; then
  echo "configure: error: this commit does not build (on purpose)" >&2
  exit 1
fi
prefix=/nonexistent
for a in "$@"; do
  case "$a" in --prefix=*) prefix="${a#--prefix=}" ;; esac
done
host=$(command -v ruby)
cat > fake-ruby <<EOF
#!/bin/sh
exec $host -r$prefix/lib/prelude.rb "\$@"
EOF
tab=$(printf '\t')
cat > Makefile <<EOF
all:
${tab}@echo "compiling nothing"
install:
${tab}mkdir -p "$prefix/bin" "$prefix/lib"
${tab}cp fake-ruby "$prefix/bin/ruby"
${tab}chmod 755 "$prefix/bin/ruby"
${tab}cp prelude.rb "$prefix/lib/prelude.rb"
EOF
"#;

/// What the slow commits' Ruby does: File.mtime calls stat(2) twice, as
/// scripts/check-bisect-ruby plants in a real CRuby's file.c.
const SLOW_MTIME: &str = "module TwiceStat; def mtime(f) = (super; super); end\nFile.singleton_class.prepend(TwiceStat)\n";

/// A git repository `ruby/` of a fake CRuby with 8 commits: commit 5 makes File.mtime
/// slower, commit 3 does not build (commit 4 fixes it).
fn ruby_history(lab: &Lab) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let repo = lab.dir.path("ruby");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "--quiet", "--initial-branch=master"]);
    for i in 0..8 {
        let configure = repo.join("configure");
        std::fs::write(&configure, FAKE_CONFIGURE).unwrap();
        std::fs::set_permissions(&configure, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(repo.join("configure.ac"), "AC_INIT([fake])\n").unwrap();
        let prelude = if i >= 5 {
            SLOW_MTIME
        } else {
            "# as fast as ever\n"
        };
        std::fs::write(repo.join("prelude.rb"), prelude).unwrap();
        std::fs::write(repo.join("NEWS"), format!("change {i}\n")).unwrap();
        let broken = repo.join("broken");
        if i == 3 {
            std::fs::write(&broken, "").unwrap();
        } else if broken.exists() {
            std::fs::remove_file(&broken).unwrap();
        }
        git(&repo, &["add", "--all"]);
        git(
            &repo,
            &["commit", "--quiet", "-m", &format!("ruby commit {i}")],
        );
    }
    repo
}

/// The `[settings]` of the tests on a fake CRuby's history: the threaded File.mtime script
/// (2 threads, 30,000 calls, 3 runs per trial); copied beside the file by [`ruby_lab`].
pub(crate) const MTIME_SETTINGS: &str = r#"
[settings]
workload = "script"
script = "mtime.rb"
script_args = ["2", "30000"]
runs = 3
"#;

/// A lab with [`ruby_history`] in `ruby/` and the File.mtime script beside it.
pub(crate) fn ruby_lab(name: &str) -> (Lab, PathBuf) {
    let lab = Lab::new(name);
    let repo = ruby_history(&lab);
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/threads-mtime/mtime.rb"),
        lab.dir.path("mtime.rb"),
    )
    .unwrap();
    (lab, repo)
}

/// `--ruby-repo`: each commit of the Ruby's history built (`rubyrace ruby build --ref`,
/// into a cache of the test's), the script workload run on it. The search names commit 5,
/// skips commit 3 because it does not build, and a second search over the same history
/// builds nothing: every commit's build is reused from the cache.
#[test]
fn bisect_searches_a_ruby_history_building_each_commit() {
    let (lab, repo) = ruby_lab("bisect-ruby");
    let file = lab.experiment(&format!("name = \"bisect-ruby\"\n{MTIME_SETTINGS}"));
    let cache = lab.dir.path("cache");
    let search = |name: &str, extra: &[&str]| {
        let out = lab.dir.path(name);
        let mut args = vec![
            "bisect",
            file.to_str().unwrap(),
            "--ruby-repo",
            repo.to_str().unwrap(),
            "--good",
            "master~7",
            "--bad",
            "master",
            "--metric",
            "wall",
            "-o",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let run =
            crate::support::spawn_with_env(&args, &[("RUBYRACE_CACHE", cache.to_str().unwrap())])
                .wait(Duration::from_secs(600));
        (run, record(&out))
    };
    let (run, r) = search("first", &[]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert_eq!(r["history_of"], "ruby");
    assert_eq!(r["outcome"]["commit"], 5, "{run:?}");
    assert_eq!(r["skipped"][0][0], 3, "{r}");
    assert!(
        r["skipped"][0][1]
            .as_str()
            .unwrap()
            .contains("does not build"),
        "{r}"
    );
    assert!(run.stdout.contains("commit 3"), "{run:?}");
    // Every trial ran on a Ruby of the cache.
    let mut argv0: Vec<String> = Vec::new();
    for round in round_dirs(&lab.dir.path("first")) {
        argv0.extend(
            Connection::open(round.join("results.db"))
                .unwrap()
                .prepare("SELECT json_extract(result, '$.settings.ruby_argv[0]') FROM trials")
                .unwrap()
                .query_map([], |row| row.get(0))
                .unwrap()
                .map(Result::unwrap),
        );
    }
    assert!(!argv0.is_empty());
    for ruby in &argv0 {
        assert!(ruby.starts_with(cache.to_str().unwrap()), "{ruby}");
    }
    // `rubyrace report` on the bisection's directory: its answer, and its page.
    let out = lab.dir.path("first");
    let report = crate::support::rubyrace(&["report", out.to_str().unwrap()]);
    assert_eq!(report.code(), Some(0), "{report:?}");
    assert!(
        report.stdout.contains("**The first bad commit is"),
        "{report:?}"
    );
    std::fs::remove_file(out.join("bisect.html")).unwrap();
    let page = crate::support::rubyrace(&["report", out.to_str().unwrap(), "--format", "html"]);
    assert_eq!(page.code(), Some(0), "{page:?}");
    assert!(std::fs::read_to_string(out.join("bisect.html"))
        .unwrap()
        .contains("data-chart=\"bisect\""));
    let built = run.stderr.matches(": built ").count();
    assert!(built >= 4, "{built} builds: {run:?}");
    // The same history again: every build is reused; only the commit that does not build
    // is tried again (a failure is not cached). Eight commits fit one round, so its first
    // block has every commit: three blocks show the cache (the answer was checked above).
    let (again, _) = search("second", &["--max-blocks", "3"]);
    assert!(matches!(again.code(), Some(0 | 4)), "{again:?}");
    assert_eq!(again.stderr.matches(": built ").count(), 0, "{again:?}");
    assert_eq!(
        again.stderr.matches(": reusing ").count(),
        built,
        "{again:?}"
    );
    assert_eq!(
        again.stderr.matches("configure... ").count(),
        1,
        "{again:?}"
    );
    lab.assert_no_leftovers(Duration::from_secs(2));
}

/// (48.4) A budget that ends before the answer, then a larger one: with `--max-blocks 3`
/// the search (commit 613 of 1,000 doing 50% more work) ends in a range, exit 4, saying how
/// many more blocks would settle it and the resume that goes on; `--resume DIR
/// --max-blocks 40` goes on from the three stored blocks (every one kept) and names commit
/// 613, exit 0.
///
/// A thousand commits make the range certain: a block measures the ends and at most six
/// candidates, so three blocks leave at least 1,000 / 7³ ≈ 3 commits. With the 20 commits
/// of the other searches, three decisive blocks on a quiet machine named the commit (a
/// clean-clone CI run, 2026-11-29: exit 0 where 4 was expected).
#[test]
fn a_budget_that_ends_in_a_range_goes_on_with_a_larger_one() {
    let lab = Lab::new("bisect-budget");
    long_history(
        &lab,
        1000,
        |i| if i >= 613 { WORK * 150 / 100 } else { WORK },
    );
    let out = lab.dir.path("search");
    let mut args = bisect_args(
        &lab,
        &out,
        &[
            "--metric",
            "cpu_per_request",
            "--max-blocks",
            "3",
            "--precision",
            "10%",
        ],
    );
    // The whole history: good is the first of the thousand commits.
    for a in args.iter_mut().filter(|a| *a == "main~19") {
        *a = "main~999".into();
    }
    let first = spawn(&args).wait(Duration::from_secs(600));
    assert_eq!(first.code(), Some(4), "{first:?}");
    assert!(
        first
            .stdout
            .contains("**The first bad commit is one of commits "),
        "{first:?}"
    );
    assert!(
        first
            .stdout
            .contains("with a larger `--max-blocks` (at least "),
        "{first:?}"
    );
    let r = record(&out);
    assert_eq!(blocks(&r), 3, "{r}");
    let before: Vec<(PathBuf, i64)> = round_dirs(&out)
        .iter()
        .map(|d| (d.clone(), stored(d)))
        .collect();

    let o = out.to_str().unwrap();
    let resumed =
        spawn(&["bisect", "--resume", o, "--max-blocks", "40"]).wait(Duration::from_secs(900));
    assert_eq!(resumed.code(), Some(0), "{resumed:?}");
    assert!(
        resumed
            .stderr
            .contains("the budget goes from 3 to 40 blocks"),
        "{resumed:?}"
    );
    let r = record(&out);
    assert_eq!(r["outcome"]["kind"], "commit", "{resumed:?}");
    assert_eq!(r["outcome"]["commit"], 613, "{resumed:?}");
    assert!(blocks(&r) > 3, "{r}");
    assert_eq!(r["max_blocks"], 40);
    // Every block stored before is kept (a round may have gone on with more).
    for (dir, trials) in before {
        assert!(stored(&dir) >= trials, "{}", dir.display());
    }
    lab.assert_no_leftovers(Duration::from_secs(5));
}
