//! `rubyrace init` (issue 51, items 4 and 5), run as a user runs it, from a directory outside
//! the app: on the bundled apps; on an app made by `rails new` (Debian's railties) with a
//! scaffold and PostgreSQL, whose written file then runs as it is and leaves the app as it
//! was; and `--ci github`, whose workflow parses, names real flags, and whose shell steps
//! run against a local repository and a local stand-in for GitHub's comments API.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::commits::git;
use crate::support::lab::{trials, Lab};
use crate::support::{path_str, rubyrace, Reply, Run, ServerBuilder};

/// `rubyrace init ARGS...` in `cwd`, waited for; what it starts carries the lab's marker.
fn init_in(lab: &Lab, cwd: &Path, args: &[&str]) -> Run {
    let mut all = vec!["init"];
    all.extend(args);
    lab.spawn_marked_in(cwd, &all)
        .wait(Duration::from_secs(240))
}

/// `rubyrace run FILE --smoke -o RESULTS` in `cwd`, waited for, marked.
fn smoke_in(lab: &Lab, cwd: &Path, file: &str, results: &Path) -> Run {
    lab.spawn_marked_in(cwd, &["run", file, "--smoke", "-o", &path_str(results)])
        .wait(Duration::from_secs(300))
}

/// Every file under `dir` (`.git` aside) with its contents: the app as it was.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    crate::support::files_under(dir)
        .into_iter()
        .filter(|p| !p.components().any(|c| c.as_os_str() == ".git"))
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

/// On each bundled app but rails-forum: exit 0, a file naming the app, its two JIT
/// configurations and the dry run's plan; rack-hello's file then runs as written (its smoke,
/// every trial valid). rails-forum needs its own db/setup.rb, which init cannot know: exit
/// 1, naming the exception its server logged. A directory without config.ru, and an
/// existing output file, are errors that say so (exit 2).
#[test]
fn init_writes_a_running_experiment_for_the_bundled_apps() {
    let lab = Lab::new("init-bundled");
    let here = &lab.dir;
    for app in [
        "rack-hello",
        "sinatra-hello",
        "rails-hello",
        "rails-mixed",
        "known-effect",
    ] {
        let out = format!("{app}.toml");
        let run = init_in(&lab, &here.path(""), &[app, "-o", &out]);
        assert_eq!(run.code(), Some(0), "{app}: {run:?}");
        let text = std::fs::read_to_string(here.path(&out)).unwrap();
        assert!(text.contains(&format!("app = \"{app}\"")), "{text}");
        assert!(
            text.contains("{ label = \"interp\", value = \"none\" }")
                && text.contains("{ label = \"yjit\", value = \"yjit\" }"),
            "{text}"
        );
        assert!(text.contains("path = \"/\""), "{text}");
        assert!(
            run.stdout
                .contains("2 configurations × 7 blocks = 14 trials"),
            "{app}: {run:?}"
        );
        // Every key but the matrix's has a comment saying why it is so.
        for line in text
            .lines()
            .filter(|l| l.contains(" = ") && !l.starts_with(' '))
        {
            assert!(
                line.contains('#') || line.starts_with("jit") || line.starts_with("name"),
                "{app}: a key without its reason: {line}"
            );
        }
    }
    let rails = std::fs::read_to_string(here.path("rails-hello.toml")).unwrap();
    assert!(rails.contains("RAILS_LOG_TO_STDOUT = \"1\""), "{rails}");
    let sinatra = std::fs::read_to_string(here.path("sinatra-hello.toml")).unwrap();
    assert!(sinatra.contains("(Sinatra)"), "{sinatra}");

    let smoke = smoke_in(&lab, &here.path(""), "rack-hello.toml", &lab.results());
    assert_eq!(smoke.code(), Some(0), "{smoke:?}");
    let rows = trials(&lab.db());
    assert_eq!(rows.len(), 4, "{smoke:?}");
    assert!(rows.iter().all(|r| r.status == "valid"), "{smoke:?}");

    let forum = init_in(&lab, &here.path(""), &["rails-forum", "-o", "forum.toml"]);
    assert_eq!(forum.code(), Some(1), "{forum:?}");
    assert!(
        forum.stderr.contains("no GET path of the app answered 2xx")
            && forum.stderr.contains("GET / answered 500")
            && forum.stderr.contains("PG::UndefinedTable"),
        "{forum:?}"
    );

    let empty = here.path("not-an-app");
    std::fs::create_dir_all(&empty).unwrap();
    let refused = init_in(&lab, &here.path(""), &["not-an-app"]);
    assert_eq!(refused.code(), Some(2), "{refused:?}");
    assert!(refused.stderr.contains("has no config.ru"), "{refused:?}");
    let again = init_in(
        &lab,
        &here.path(""),
        &["rack-hello", "-o", "rack-hello.toml"],
    );
    assert_eq!(again.code(), Some(2), "{again:?}");
    assert!(again.stderr.contains("rack-hello.toml exists"), "{again:?}");
    lab.assert_no_leftovers(Duration::from_secs(10));
}

/// `rails new --database=postgresql` (Debian's railties 6.1, the Gemfile made installable
/// as `gemfile_app` makes it), `bin/rails generate scaffold Post`, a root that asks
/// PostgreSQL, and the generated config/puma.rb's `workers` and `preload_app!` lines
/// uncommented (as a team that deploys with workers has them). init reads 2 workers × 5
/// threads with preload, PostgreSQL, the index route /posts beside the root; boots the app
/// to find both answer 2xx; writes a URL mix of both; the written file runs as it is
/// (smoke: 4 valid trials, JIT verified, only 2xx); the app's files are as they were.
#[test]
fn init_on_a_rails_new_app_with_a_scaffold_and_postgresql_runs_as_written() {
    let lab = Lab::new_short("init-rails");
    let app = crate::gemfile_app::rails_new_app(&lab.dir.path(""), true);
    let generated = Command::new("ruby")
        .args([
            "bin/rails",
            "generate",
            "scaffold",
            "Post",
            "title:string",
            "body:text",
        ])
        .current_dir(&app)
        .env("RAILS_ENV", "production")
        .env("SECRET_KEY_BASE", "x")
        .output()
        .unwrap();
    assert!(generated.status.success(), "{generated:?}");
    let routes = std::fs::read_to_string(app.join("config/routes.rb")).unwrap();
    std::fs::write(
        app.join("config/routes.rb"),
        routes.replace("draw do\n", "draw do\n  resources :posts\n"),
    )
    .unwrap();
    let puma = std::fs::read_to_string(app.join("config/puma.rb")).unwrap();
    assert!(
        puma.contains("# workers ENV.fetch(\"WEB_CONCURRENCY\") { 2 }"),
        "{puma}"
    );
    std::fs::write(
        app.join("config/puma.rb"),
        puma.replace("# workers ENV", "workers ENV")
            .replace("# preload_app!", "preload_app!"),
    )
    .unwrap();
    let before = tree(&app);

    let here = lab.dir.path("");
    let made = init_in(&lab, &here, &[&path_str(&app)]);
    assert_eq!(made.code(), Some(0), "{made:?}");
    let text = std::fs::read_to_string(here.join("rubyrace.toml")).unwrap();
    for expected in [
        "processes = 2   # config/puma.rb: workers",
        "threads = 5   # config/puma.rb: threads (the maximum)",
        "preload = true   # config/puma.rb: preload_app!",
        "[services.postgres]",
        "setup = [[\"{ruby}\", \"bin/rails\", \"db:prepare\"]]",
        "design = \"blocks\"",
        "urls = \"rubyrace.urls\"",
        "server = \"puma\"   # Gemfile.lock: puma",
    ] {
        assert!(text.contains(expected), "{expected:?} not in:\n{text}");
    }
    let urls = std::fs::read_to_string(here.join("rubyrace.urls")).unwrap();
    assert!(
        urls.contains("1 GET /\n") && urls.contains("1 GET /posts\n"),
        "{urls}"
    );
    assert!(made.stdout.contains("PostgreSQL"), "{made:?}");
    assert_eq!(tree(&app), before, "init changed the app");

    let smoke = smoke_in(&lab, &here, "rubyrace.toml", &lab.results());
    assert_eq!(smoke.code(), Some(0), "{smoke:?}");
    let rows = trials(&lab.db());
    assert_eq!(rows.len(), 4, "{smoke:?}");
    for row in &rows {
        assert_eq!(row.status, "valid", "{}: {:?}", row.label, row.reason);
        let r = &row.result;
        let status = r["load"]["status"].as_object().unwrap();
        assert!(status.keys().all(|k| k.starts_with('2')), "{status:?}");
        let check = r["verification"]["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["setting"] == "jit")
            .unwrap()
            .clone();
        assert_eq!(check["ok"], true, "{check}");
        assert_eq!(r["probe"]["processes"].as_array().unwrap().len(), 3, "{r}");
    }
    assert_eq!(tree(&app), before, "the run changed the app");
    lab.assert_no_leftovers(Duration::from_secs(10));
}

/// A stand-in for GitHub's issue comments API (list, create, update), over a real socket:
/// what the workflow's comment step calls. Holds the comments by id.
fn comments_api(comments: Arc<Mutex<Vec<(u64, String)>>>) -> crate::support::Server {
    ServerBuilder::new(move |req| {
        let respond = |code: &str, v: Value| {
            let body = v.to_string();
            Reply::Send(
                format!(
                    "HTTP/1.1 {code}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                )
                .into_bytes(),
            )
        };
        if req.header("authorization") != Some("Bearer test-token") {
            return respond("401 Unauthorized", json!({"message": "Bad credentials"}));
        }
        let mut all = comments.lock().unwrap();
        let path = req.path.split('?').next().unwrap_or("");
        match (req.method.as_str(), path) {
            ("GET", "/repos/team/shop/issues/7/comments") => {
                let page = if req.path.contains("page=1") {
                    all.iter()
                        .map(|(id, body)| json!({"id": id, "body": body}))
                        .collect()
                } else {
                    Vec::new()
                };
                respond("200 OK", Value::Array(page))
            }
            ("POST", "/repos/team/shop/issues/7/comments") => {
                let body: Value = serde_json::from_slice(&req.body).unwrap();
                let id = 1000 + all.len() as u64;
                all.push((id, body["body"].as_str().unwrap().to_string()));
                respond("201 Created", json!({"id": id}))
            }
            ("PATCH", p) if p.starts_with("/repos/team/shop/issues/comments/") => {
                let id: u64 = p.rsplit('/').next().unwrap().parse().unwrap();
                let body: Value = serde_json::from_slice(&req.body).unwrap();
                let Some(c) = all.iter_mut().find(|(i, _)| *i == id) else {
                    return respond("404 Not Found", json!({}));
                };
                c.1 = body["body"].as_str().unwrap().to_string();
                respond("200 OK", json!({"id": id}))
            }
            _ => respond("404 Not Found", json!({"message": "Not Found"})),
        }
    })
    .start()
}

/// An app doing `factor` times a fixed amount of work per request (`bisect::work_app`).
fn work(factor: u64) -> String {
    crate::bisect::work_app(crate::bisect::WORK / 10 * factor, "")
}

/// The steps of the workflow, parsed by Ruby's YAML (Psych), as JSON.
fn workflow_steps(workflow: &Path) -> Vec<Value> {
    let out = Command::new("ruby")
        .args([
            "-ryaml",
            "-rjson",
            "-e",
            "puts JSON.generate(YAML.load_file(ARGV[0]))",
            &path_str(workflow),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "the workflow is not YAML: {out:?}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    // Psych reads YAML 1.1, where a bare `on` is the boolean true; GitHub reads it as the
    // key "on".
    let on = doc.get("on").or(doc.get("true")).expect("an `on:` key");
    assert!(
        on.as_object().unwrap().contains_key("pull_request"),
        "{doc}"
    );
    assert_eq!(doc["permissions"]["pull-requests"], "write", "{doc}");
    doc["jobs"]["gate"]["steps"].as_array().unwrap().clone()
}

/// `rubyrace init --ci github` in a repository of a Rack app: the gate's experiment and the
/// workflow, both in the repository (where they were asked for). The workflow parses; the
/// checkout keeps history; every `--flag` of its rubyrace command is one `rubyrace check`
/// has. Its shell steps, as written, then run here: in a clone whose pull request doubles
/// the app's work, "Gate the change" exits 1 with the verdict appended to the step summary
/// and the report where the upload step looks; "Comment the verdict" (Ruby) posts one
/// comment with the verdict to the API stand-in, and a second push updates that comment
/// rather than adding one. Not run: the install step (it downloads the package from GitHub
/// and installs it as root with apt); the binary under test is on PATH instead.
#[test]
fn the_ci_workflow_init_writes_runs_as_written() {
    let lab = Lab::new("init-ci");
    let repo = lab.dir.path("shop");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "--quiet", "--initial-branch=main"]);
    std::fs::write(repo.join("config.ru"), work(1)).unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "--quiet", "-m", "the app"]);

    let made = init_in(
        &lab,
        &lab.dir.path(""),
        &[&path_str(&repo), "--ci", "github"],
    );
    assert_eq!(made.code(), Some(0), "{made:?}");
    let experiment = repo.join("perf/rubyrace-check.toml");
    let workflow = repo.join(".github/workflows/rubyrace.yml");
    let text = std::fs::read_to_string(&experiment).unwrap();
    assert!(text.contains("app = \"..\""), "{text}");
    assert!(
        !text.contains("[matrix]") && !text.contains("precision"),
        "{text}"
    );
    let steps = workflow_steps(&workflow);
    let named = |name: &str| -> Value {
        steps
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no step {name:?}: {steps:?}"))
            .clone()
    };
    let checkout = steps
        .iter()
        .find(|s| s["uses"] == "actions/checkout@v4")
        .unwrap();
    assert_eq!(checkout["with"]["fetch-depth"], 0, "{checkout}");
    let gate = named("Gate the change");
    let script = gate["run"].as_str().unwrap().to_string();
    let help = rubyrace(&["check", "--help"]);
    let flags: Vec<&str> = script
        .lines()
        .find(|l| l.trim_start().starts_with("rubyrace check"))
        .unwrap()
        .split_whitespace()
        .filter(|w| w.starts_with("--") || w.starts_with("-o"))
        .collect();
    assert!(flags.len() >= 5, "{flags:?}");
    for flag in &flags {
        assert!(help.stdout.contains(flag), "{flag} is no flag of check");
    }
    let upload = steps
        .iter()
        .find(|s| s["uses"] == "actions/upload-artifact@v4")
        .unwrap();
    let report = upload["with"]["path"].as_str().unwrap().to_string();

    // The files are committed; the pull request doubles the work, in a clone.
    // The written durations are for a real app; this one is told apart in a second.
    std::fs::write(
        &experiment,
        text.replace("warmup = \"10s\"", "warmup = \"300ms\"")
            .replace("duration = \"5s\"", "duration = \"1s\""),
    )
    .unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "--quiet", "-m", "rubyrace gate"]);
    git(
        &lab.dir.path(""),
        &["clone", "--quiet", &path_str(&repo), "clone"],
    );
    let clone = lab.dir.path("clone");
    std::fs::write(clone.join("config.ru"), work(2)).unwrap();
    git(&clone, &["commit", "--quiet", "-am", "the pull request"]);
    let status = git(&clone, &["status", "--porcelain"]);

    // The upload step looks where the gate writes: `$RESULTS/report.html` of the job's env.
    let written = std::fs::read_to_string(&workflow).unwrap();
    assert!(
        written.contains(&format!(
            "      RESULTS: {}\n",
            report.trim_end_matches("/report.html")
        )),
        "{report} is not under the job's RESULTS"
    );
    // Here RESULTS is in the lab (tests run side by side).
    let env = &gate_env(&lab, &workflow, &clone);
    let report = format!("{}/report.html", env["RESULTS"]);
    let gated = run_step("bash", &script, &clone, env);
    assert_eq!(gated.status.code(), Some(1), "{gated:?}");
    let summary = std::fs::read_to_string(&env["GITHUB_STEP_SUMMARY"]).unwrap();
    assert!(summary.contains("## rubyrace check: ❌ fail"), "{summary}");
    assert!(
        std::fs::read_to_string(&env["GITHUB_OUTPUT"])
            .unwrap()
            .contains("exit=1"),
        "{gated:?}"
    );
    assert!(Path::new(&report).is_file(), "{gated:?}");
    assert_eq!(git(&clone, &["status", "--porcelain"]), status);

    let comments = Arc::new(Mutex::new(Vec::new()));
    let api = comments_api(comments.clone());
    let comment = named("Comment the verdict on the pull request");
    assert_eq!(comment["shell"], "ruby {0}", "{comment}");
    assert_eq!(
        comment["if"],
        "always() && github.event_name == 'pull_request'"
    );
    let mut env = env.clone();
    env.insert(
        "GITHUB_API_URL".into(),
        api.url("").trim_end_matches('/').into(),
    );
    env.insert("GITHUB_TOKEN".into(), "test-token".into());
    env.insert("PR_NUMBER".into(), "7".into());
    env.insert("GATE_EXIT".into(), "1".into());
    let script = comment["run"].as_str().unwrap();
    let first = run_step("ruby", script, &clone, &env);
    assert!(first.status.success(), "{first:?}");
    let second = run_step("ruby", script, &clone, &env);
    assert!(second.status.success(), "{second:?}");
    assert!(
        String::from_utf8_lossy(&second.stdout).starts_with("updated comment 1000"),
        "{second:?}"
    );
    let all = comments.lock().unwrap().clone();
    assert_eq!(all.len(), 1, "one comment, updated: {all:?}");
    assert!(
        all[0]
            .1
            .starts_with("<!-- rubyrace check -->\n## rubyrace check: ❌ fail"),
        "{all:?}"
    );
    lab.assert_no_leftovers(Duration::from_secs(2));
}

/// The variables GitHub gives a step of the workflow (those its steps read), with the job's
/// `env` as written, pointing into the lab; the binary under test first on PATH.
fn gate_env(lab: &Lab, workflow: &Path, clone: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(workflow).unwrap();
    let mut env = BTreeMap::new();
    for key in ["EXPERIMENT", "MAX_SLOWDOWN"] {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{key}: ")))
            .unwrap();
        env.insert(
            key.to_string(),
            line.split_once(": ").unwrap().1.trim().to_string(),
        );
    }
    env.insert("RESULTS".into(), path_str(&lab.dir.path("rubyrace-check")));
    let bin = Path::new(env!("CARGO_BIN_EXE_rubyrace")).parent().unwrap();
    env.insert(
        "PATH".into(),
        format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
    );
    let home = lab.dir.path("home");
    std::fs::create_dir_all(&home).unwrap();
    env.insert("HOME".into(), path_str(&home));
    env.insert("RUBYRACE_TEST_MARKER".into(), lab.marker.clone());
    env.insert("GITHUB_WORKSPACE".into(), path_str(clone));
    env.insert("GITHUB_BASE_REF".into(), "main".into());
    env.insert("GITHUB_REPOSITORY".into(), "team/shop".into());
    env.insert("GITHUB_SERVER_URL".into(), "https://github.com".into());
    env.insert("GITHUB_RUN_ID".into(), "42".into());
    for (key, file) in [
        ("GITHUB_STEP_SUMMARY", "step-summary.md"),
        ("GITHUB_OUTPUT", "step-output"),
    ] {
        let path = lab.dir.path(file);
        std::fs::write(&path, "").unwrap();
        env.insert(key.into(), path_str(&path));
    }
    env
}

/// A step's `run` script run as GitHub runs it: `bash -e FILE` (GitHub's `bash --noprofile
/// --norc -eo pipefail {0}`) or `ruby FILE`, in the checkout.
fn run_step(
    shell: &str,
    script: &str,
    dir: &Path,
    env: &BTreeMap<String, String>,
) -> std::process::Output {
    let file = dir.parent().unwrap().join(format!("step.{shell}"));
    std::fs::write(&file, script).unwrap();
    let mut cmd = Command::new(shell);
    if shell == "bash" {
        cmd.args(["--noprofile", "--norc", "-eo", "pipefail"]);
    }
    cmd.arg(&file).current_dir(dir).envs(env);
    cmd.output().unwrap()
}
