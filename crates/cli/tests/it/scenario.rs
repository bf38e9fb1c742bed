//! User sessions: the real `rubyrace load --scenario` and `rubyrace run` with a
//! `scenario` against a real Puma serving `fixtures/session_app`, whose login checks a CSRF
//! token from a meta tag and a session cookie, redirects with an absolute Location, and
//! whose API hands out ids a later step must use (a wrong id is a 404). Checked: every step
//! of the member's session passes, so the token, the cookie, the redirect and the id were
//! all carried; a step whose extraction fails is counted against that step, named, and
//! ends the session; a malformed scenario file is refused with its line and column.

use std::time::Duration;

use crate::support::lab::Lab;
use crate::support::{load_run, path_str, Puma, TempDir};
use serde_json::Value;

const APP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/session_app");

fn steps(report: &Value) -> Vec<Value> {
    report["scenario"]["steps"].as_array().unwrap().clone()
}

#[test]
fn a_member_walks_the_whole_session_and_a_failing_extraction_is_named() {
    let puma = Puma::start(&std::path::Path::new(APP).join("config.ru"));
    let url = format!("http://127.0.0.1:{}/", puma.port);
    let scenario = format!("{APP}/scenario.toml");
    let run = load_run(&url, &["--scenario", &scenario, "-c", "4", "-d", "2s"]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    let report: Value = serde_json::from_str(&run.stdout).unwrap();
    let steps = steps(&report);
    let names: Vec<String> = steps
        .iter()
        .map(|s| {
            format!(
                "{}/{}",
                s["scenario"].as_str().unwrap(),
                s["step"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            "member/login form",
            "member/log in",
            "member/home",
            "member/create",
            "member/show",
            "broken/no token"
        ]
    );
    for s in &steps[..5] {
        // Every step of the member's session passed: the CSRF token and the cookie made
        // the login a 302, its Location led home (200 only when logged in), and the id
        // from the JSON body was a real one (a wrong id is a 404).
        assert!(s["requests"].as_u64().unwrap() > 20, "{s}");
        assert_eq!(s["unexpected_status"], 0, "{s}");
        assert_eq!(s["extract_failures"], 0, "{s}");
        assert_eq!(s["errors"], 0, "{s}");
        assert_eq!(s["latency_us"]["count"], s["responses"], "{s}");
        assert!(s["latency_us"]["p50"].as_f64().unwrap() > 0.0, "{s}");
    }
    let broken = &steps[5];
    let failed = broken["extract_failures"].as_u64().unwrap();
    assert!(failed > 20, "{broken}");
    assert_eq!(failed, broken["responses"].as_u64().unwrap());
    let why = broken["failures"][0].as_str().unwrap();
    assert_eq!(
        why,
        "extract t: no <meta name=\"csrf-token\" content=...> in the body"
    );
    // The run's errors: the extractions, and no status error although 302s came back.
    assert_eq!(report["errors"]["extract"].as_u64().unwrap(), failed);
    assert_eq!(report["errors"]["status"], 0);
    assert!(report["status"]["302"].as_u64().unwrap() > 20);
    assert_eq!(report["errors"]["total"].as_u64().unwrap(), failed);
    let sc = &report["scenario"];
    assert_eq!(sc["sessions_failed"].as_u64().unwrap(), failed);
    // A session is complete when its last step passed (one may end after the recording).
    let completed = sc["sessions_completed"].as_u64().unwrap();
    let shown = steps[4]["responses"].as_u64().unwrap();
    assert!(
        completed <= shown && completed + 4 >= shown,
        "{completed} sessions, {shown} shows"
    );
    // The human summary has the per-step table and names the failure.
    assert!(run.stderr.contains("member / log in"), "{run:?}");
    assert!(
        run.stderr.contains("failed: broken / no token: extract t:"),
        "{run:?}"
    );
}

#[test]
fn a_malformed_scenario_file_is_refused_with_its_position() {
    let dir = TempDir::new("scenario-bad");
    let file = dir.write(
        "bad.toml",
        "[[scenario]]\nname = \"a\"\n[[scenario.step]]\nname = \"x\"\npath = \"/${csrf}\"\nthink = \"soon\"\n",
    );
    // Nothing listens there: the file is refused before any connection.
    let run = load_run("http://127.0.0.1:9/", &["--scenario", &path_str(&file)]);
    assert_eq!(run.code(), Some(1), "{run:?}");
    let at = path_str(&file);
    assert!(
        run.stderr.contains(&format!(
            "{at}:5:8: scenario[0].step[0].path: ${{csrf}} is not defined here"
        )),
        "{run:?}"
    );
    assert!(
        run.stderr.contains(&format!(
            "{at}:6:9: scenario[0].step[0].think: expected a duration"
        )),
        "{run:?}"
    );
}

#[test]
fn an_experiment_runs_users_through_a_scenario() {
    let lab = Lab::new("scenario-run");
    // The member's scenario only; the file is relative to the experiment file.
    let full = std::fs::read_to_string(format!("{APP}/scenario.toml")).unwrap();
    let member = full
        .split("[[scenario]]\nname = \"broken\"")
        .next()
        .unwrap();
    lab.dir.write("member.toml", member);
    lab.experiment(&format!(
        r#"
batches = 1
[settings]
app = "{APP}"
threads = 2
warmup = "500ms"
duration = "2s"
scenario = "member.toml"
"#
    ));
    let run = lab.run(&[], Duration::from_secs(120));
    assert_eq!(run.code(), Some(0), "{run:?}");
    let export = crate::support::rubyrace(&["export", &path_str(&lab.results()), "--json"]);
    let export: Value = serde_json::from_str(&export.stdout).unwrap();
    let trial = &export["trials"][0];
    assert_eq!(trial["status"], "valid", "{trial}");
    let steps = steps(&trial["load"]);
    assert_eq!(steps.len(), 5);
    assert!(steps
        .iter()
        .all(|s| s["responses"].as_u64().unwrap() > 0 && s["unexpected_status"] == 0));
    // The scenario's text is stored with the configuration: a resume does not need the file.
    let stored = &export["configs"][0]["settings"]["load"]["scenario"];
    assert!(
        stored["text"]
            .as_str()
            .unwrap()
            .contains("name = \"log in\""),
        "{stored}"
    );
    lab.assert_no_leftovers(Duration::from_secs(10));
}

/// A scenario whose extraction fails (the `broken` scenario looks for a
/// meta name the page does not have) makes the trial invalid; the reason says which step
/// failed and how (it said `exceeds max_error_rate 0% ()`), in the progress line and in the
/// report.
#[test]
fn a_failing_scenario_step_is_named_with_its_first_failure() {
    let lab = Lab::new("scenario-broken");
    lab.experiment(&format!(
        r#"
batches = 1
[settings]
app = "{APP}"
threads = 2
warmup = "300ms"
duration = "1s"
scenario = "{APP}/scenario.toml"
"#
    ));
    let run = lab.run(&[], Duration::from_secs(120));
    assert_eq!(run.code(), Some(3), "{run:?}");
    let said = "step \"no token\" of broken failed ";
    let how = ", first: extract t: no <meta name=\"csrf-token\" content=...> in the body";
    assert!(
        run.stderr.contains("exceeds max_error_rate 0% (")
            && run.stderr.contains(said)
            && run.stderr.contains(how),
        "{run:?}"
    );
    assert!(!run.stderr.contains("0% ()"), "{run:?}");
    let report =
        crate::support::rubyrace(&["report", &path_str(&lab.results()), "--format", "json"]);
    let v: Value = serde_json::from_str(&report.stdout).unwrap();
    let invalid: Vec<&str> = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["kind"] == "invalid-trials")
        .map(|w| w["message"].as_str().unwrap())
        .collect();
    assert!(
        invalid.iter().any(|m| m.contains(said) && m.contains(how)),
        "{invalid:?}"
    );
    lab.assert_no_leftovers(Duration::from_secs(10));
}

#[test]
fn users_arrive_at_a_fixed_rate_in_open_loop() {
    let puma = Puma::start(&std::path::Path::new(APP).join("config.ru"));
    let url = format!("http://127.0.0.1:{}/", puma.port);
    let dir = TempDir::new("scenario-open");
    let full = std::fs::read_to_string(format!("{APP}/scenario.toml")).unwrap();
    let member = dir.write(
        "member.toml",
        full.split("[[scenario]]\nname = \"broken\"")
            .next()
            .unwrap(),
    );
    let run = load_run(
        &url,
        &[
            "--scenario",
            &path_str(&member),
            "--rate",
            "40",
            "-c",
            "8",
            "-d",
            "3s",
        ],
    );
    assert_eq!(run.code(), Some(0), "{run:?}");
    let report: Value = serde_json::from_str(&run.stdout).unwrap();
    let sc = &report["scenario"];
    // 40 sessions a second for 3 s, on a schedule: 120, give or take the slots' phase.
    let started = sc["sessions_started"].as_u64().unwrap();
    assert!(
        (112..=128).contains(&started),
        "{started} sessions started: {sc}"
    );
    assert_eq!(report["rate"]["target"], 40.0);
    assert!(
        report["rate"]["reached"].as_bool().unwrap(),
        "{}",
        report["rate"]
    );
    // Five steps per session, each passing.
    let steps = steps(&report);
    assert!(steps
        .iter()
        .all(|s| s["unexpected_status"] == 0 && s["extract_failures"] == 0));
    assert!(run.stderr.contains("open loop at 40 users/s"), "{run:?}");
}

/// Weighted scenarios: users draw a scenario per session by weight. Two one-step scenarios
/// weighted 3 and 1 against a real Puma: about three sessions in four are the first (a
/// binomial draw: within five of its standard deviations).
#[test]
fn users_draw_their_scenario_by_weight() {
    let puma =
        Puma::start(&crate::support::workspace_root().join("ruby/apps/rack-hello/config.ru"));
    let url = format!("http://127.0.0.1:{}/", puma.port);
    let dir = TempDir::new("scenario-weights");
    let file = dir.write(
        "weights.toml",
        "[[scenario]]\nname = \"often\"\nweight = 3\n\n[[scenario.step]]\nname = \"home\"\npath = \"/\"\n\n\
         [[scenario]]\nname = \"rarely\"\nweight = 1\n\n[[scenario.step]]\nname = \"home\"\npath = \"/\"\n",
    );
    let run = load_run(
        &url,
        &["--scenario", &path_str(&file), "-c", "4", "-d", "2s"],
    );
    assert_eq!(run.code(), Some(0), "{run:?}");
    let report: Value = serde_json::from_str(&run.stdout).unwrap();
    let requests = |name: &str| {
        steps(&report)
            .iter()
            .find(|s| s["scenario"] == name)
            .unwrap_or_else(|| panic!("no step of {name}: {report}"))["responses"]
            .as_u64()
            .unwrap() as f64
    };
    let (often, rarely) = (requests("often"), requests("rarely"));
    let n = often + rarely;
    assert!(n > 200.0, "{often} + {rarely} sessions");
    // Within five standard deviations of a binomial draw of n sessions at 3/4 (a false
    // alarm about once in 3.5 million runs; ±0.020 for the 11 500 sessions of a run here).
    let share = often / n;
    let allowed = 5.0 * (0.75 * 0.25 / n).sqrt();
    assert!(
        (share - 0.75).abs() <= allowed,
        "share of the weight-3 scenario: {share:.3} of {n} sessions (allowed ±{allowed:.3})"
    );
}

/// Open loop, free of coordinated omission: users arrive on a schedule whether or not the
/// server keeps up. A Puma whose first response takes a second holds up the sessions due
/// meanwhile; their latency runs from when they were due, not from when the engine could
/// send them, so a tenth of the sessions or more show hundreds of milliseconds although
/// every response but one took about a millisecond.
#[test]
fn late_sessions_count_from_when_they_were_due() {
    let dir = TempDir::new("scenario-late");
    let app = dir.write(
        "config.ru",
        "stalled = false\nlock = Mutex.new\n\
         run ->(env) {\n  first = env[\"PATH_INFO\"] == \"/s\" && \
         lock.synchronize { f = !stalled; stalled = true; f }\n  sleep 1.0 if first\n  [200, { \"content-type\" => \"text/plain\" }, [\"ok\"]]\n}\n",
    );
    let puma = Puma::start(&app);
    let url = format!("http://127.0.0.1:{}/", puma.port);
    let scenario = dir.write(
        "one.toml",
        "[[scenario]]\nname = \"visit\"\n\n[[scenario.step]]\nname = \"home\"\npath = \"/s\"\n",
    );
    let run = load_run(
        &url,
        &[
            "--scenario",
            &path_str(&scenario),
            "--rate",
            "20",
            "-c",
            "1",
            "-d",
            "3s",
        ],
    );
    assert_eq!(run.code(), Some(0), "{run:?}");
    let report: Value = serde_json::from_str(&run.stdout).unwrap();
    let step = &steps(&report)[0];
    let latency = &step["latency_us"];
    // About 60 sessions due; the ~19 due during the stall wait 50–950 ms.
    assert!(step["responses"].as_u64().unwrap() >= 40, "{step}");
    assert!(latency["max"].as_f64().unwrap() >= 900_000.0, "{latency}");
    assert!(
        latency["p90"].as_f64().unwrap() >= 300_000.0,
        "the late sessions' wait is in their latency: {latency}"
    );
    assert!(latency["p50"].as_f64().unwrap() < 300_000.0, "{latency}");
}
