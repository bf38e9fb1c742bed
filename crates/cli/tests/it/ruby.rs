//! End-to-end tests of rubyrace's Ruby awareness: `jit`, `allocator` and `compact` checked
//! against the Ruby before the run and verified in every process of the running server, the
//! in-process probe (`ruby/probe.rb`) in a forked Puma, Gemfiles, and the bundled apps under
//! load. The real binary runs real experiments on the system Ruby with real Puma servers.

use std::time::Duration;

use crate::support::lab::{trials, Lab, TrialRow};
use crate::support::{rubyrace, workspace_root};
use serde_json::Value;

fn probe_processes(row: &TrialRow) -> Vec<Value> {
    row.result["probe"]["processes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn maps_allocator(process: &Value, prefix: &str) -> bool {
    process["allocator_libraries"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| {
            l.as_str()
                .unwrap()
                .rsplit('/')
                .next()
                .unwrap()
                .starts_with(prefix)
        })
}

#[test]
fn jit_and_allocator_are_verified_in_every_process_of_a_forked_puma() {
    let lab = Lab::new("knobs");
    lab.experiment(
        r#"
name = "knobs"
batches = 1

[settings]
app = "rack-hello"
processes = 2
threads = 2
warmup = "1s"
duration = "2s"

[matrix]
jit = ["none", "yjit"]
allocator = ["system", "jemalloc"]
"#,
    );
    let run = lab.run(&[], Duration::from_secs(120));
    assert_eq!(run.code(), Some(0), "{run:?}");
    let rows = trials(&lab.db());
    assert_eq!(rows.len(), 4, "{run:?}");
    for row in &rows {
        assert_eq!(row.status, "valid", "{}: {:?}", row.label, row.reason);
        let r = &row.result;
        let jit = r["settings"]["jit"].as_str().unwrap();
        let allocator = r["settings"]["allocator"]["name"].as_str().unwrap();
        assert_eq!(row.label, format!("jit={jit} allocator={allocator}"));

        // The verification is stored and true for both settings.
        let v = &r["verification"];
        assert_eq!(v["ok"], true, "{v}");
        let checks = v["checks"].as_array().unwrap();
        assert_eq!(checks.len(), 2, "{v}");
        assert!(checks.iter().all(|c| c["ok"] == true), "{v}");

        // The probe: one file per process, the master and two forked workers, each with
        // both measurement snapshots.
        let dir = lab
            .results()
            .join(format!("trials/{:05}/probe", row.trial_id));
        let files = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
            .count();
        assert_eq!(files, 3, "{}", dir.display());
        let processes = probe_processes(row);
        assert_eq!(processes.len(), 3, "{}", r["probe"]);
        let forked = processes.iter().filter(|p| p["forked"] == true).count();
        assert_eq!(forked, 2, "{}", r["probe"]);
        for p in &processes {
            let snapshots: Vec<&str> = p["snapshots"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap())
                .collect();
            assert!(
                snapshots.contains(&"measure_start") && snapshots.contains(&"measure_end"),
                "{p}"
            );
            assert!(
                p["ruby_description"]
                    .as_str()
                    .unwrap()
                    .starts_with("ruby 3"),
                "{p}"
            );
            // The JIT state each process reported.
            assert_eq!(p["jit"]["yjit"], jit == "yjit", "{p}");
            // jemalloc is mapped exactly in the jemalloc trials, in every process.
            assert_eq!(
                maps_allocator(p, "libjemalloc"),
                allocator == "jemalloc",
                "{p}"
            );
            assert!(p["errors"].as_array().unwrap().is_empty(), "{p}");
        }
        // Workers loaded the app after fork; those that served did so after loading it, and
        // at least one served. (Puma does not promise every worker a request: on a busy
        // machine one worker can take all of a short trial's connections.)
        let workers: Vec<&Value> = processes.iter().filter(|p| p["forked"] == true).collect();
        assert!(!workers.is_empty(), "{processes:?}");
        for w in &workers {
            let loaded = w["app_loaded_after_s"].as_f64().unwrap();
            assert!(loaded > 0.0, "{w}");
            if let Some(first) = w["first_request_after_s"].as_f64() {
                assert!(first >= loaded, "{w}");
            }
        }
        assert!(
            workers.iter().any(|w| w["first_request_after_s"].is_f64()),
            "no worker served: {workers:?}"
        );
        let measured = &r["probe"]["measured"];
        assert!(
            measured["allocated_objects_per_request"].as_f64().unwrap() > 1.0,
            "{measured}"
        );
        assert!(
            measured["heap_allocated_pages"].as_u64().unwrap() > 0,
            "{measured}"
        );
        assert_eq!(
            measured["yjit_code_bytes"].is_u64(),
            jit == "yjit",
            "{measured}"
        );
        // The gems the server loaded, with versions.
        assert!(
            r["probe"]["gems"]["puma"].as_str().is_some(),
            "{}",
            r["probe"]["gems"]
        );
        // LD_PRELOAD is what put jemalloc there, and it is recorded.
        assert_eq!(
            r["environment"]["env"]["LD_PRELOAD"].is_string(),
            allocator == "jemalloc",
            "{}",
            r["environment"]["env"]
        );
    }
    lab.assert_no_leftovers(Duration::from_secs(2));

    // The report shows, per cohort, that the settings were in force.
    let results = lab.results();
    let report = rubyrace(&["report", results.to_str().unwrap()]);
    assert_eq!(report.code(), Some(0), "{report:?}");
    for line in [
        "jit=none ✓ allocator=system ✓",
        "jit=yjit ✓ allocator=jemalloc ✓",
    ] {
        assert!(report.stdout.contains(line), "{line}: {report:?}");
    }
    let json = rubyrace(&["report", results.to_str().unwrap(), "--format", "json"]);
    let v: Value = serde_json::from_str(&json.stdout).unwrap();
    for c in v["cohorts"].as_array().unwrap() {
        let verified = c["verified"].as_array().unwrap();
        assert_eq!(verified.len(), 2, "{c}");
        assert!(
            verified
                .iter()
                .all(|s| s["verified"] == 1 && s["checked"] == 1),
            "{c}"
        );
        assert!(
            c["runtime"]["gc_per_1000_requests"]["p50"]
                .as_f64()
                .is_some(),
            "{c}"
        );
    }
}

/// Runs `rubyrace run --dry-run` on an experiment and returns (exit code, stderr).
fn check_only(lab: &Lab) -> (Option<i32>, String) {
    let run = lab.run(&["--dry-run"], Duration::from_secs(60));
    (run.code(), run.stderr)
}

#[test]
fn a_setting_the_ruby_cannot_honour_is_an_error_before_anything_runs() {
    let lab = Lab::new("mislabelled");
    lab.experiment(
        r#"
[settings]
app = "rack-hello"

[matrix]
allocator = ["system", "/nonexistent/libjemalloc.so.2"]
"#,
    );
    let (code, stderr) = check_only(&lab);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("experiment.toml:7:24: matrix.allocator[1]: no such library: /nonexistent/libjemalloc.so.2"),
        "{stderr}"
    );
    assert!(!lab.results().exists());

    // A JIT this Ruby does not have (Ruby 3.1 has no ZJIT).
    lab.experiment(
        r#"
[settings]
app = "rack-hello"
jit = "zjit"
"#,
    );
    let (code, stderr) = check_only(&lab);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("settings.jit: ruby 3.")
            && stderr.contains(" has no ZJIT: RubyVM::ZJIT is not defined (built without it)"),
        "{stderr}"
    );

    // Choosing the JIT twice.
    lab.experiment(
        r#"
[settings]
app = "rack-hello"
jit = "none"
ruby_opts = ["--yjit"]
"#,
    );
    let (code, stderr) = check_only(&lab);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "settings.ruby_opts: `--yjit` chooses a JIT, but `jit` = \"none\" is set too"
        ),
        "{stderr}"
    );
}

#[test]
fn a_setting_that_is_not_in_force_in_the_server_makes_the_trial_invalid() {
    // The custom command starts Puma with a Ruby of its own, without the `--yjit` rubyrace
    // puts in {ruby}: the check before the run passes (the Ruby has YJIT), the server runs
    // without it, and only the probe can tell.
    let ruby = crate::support::which("ruby").expect("ruby is installed");
    let lab = Lab::new("not-in-force");
    lab.experiment(&format!(
        r#"
batches = 1

[settings]
app = "rack-hello"
jit = "yjit"
server = "custom"
server_argv = ["{}", "-S", "puma", "--no-config", "-b", "tcp://127.0.0.1:{{port}}", "-e", "production", "-q", "{{app}}/config.ru"]
warmup = "500ms"
duration = "1s"
"#,
        ruby.display()
    ));
    let run = lab.run(&[], Duration::from_secs(60));
    assert_eq!(run.code(), Some(3), "{run:?}");
    let rows = trials(&lab.db());
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].status, "invalid", "{:?}", rows[0].reason);
    assert_eq!(
        rows[0].reason.as_deref(),
        Some(
            "settings not verified: jit = \"yjit\" not in force: every JIT off in 1 of 1 processes"
        )
    );
    // The measurement is kept, so the cohort is visible but excluded.
    assert!(
        rows[0].result["derived"]["requests_per_s"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    let results = lab.results();
    let report = rubyrace(&["report", results.to_str().unwrap()]);
    assert!(report.stdout.contains("jit=yjit ✗ 0/1"), "{report:?}");
    lab.assert_no_leftovers(Duration::from_secs(2));
}

#[test]
fn compaction_after_boot_and_auto_compaction_are_verified() {
    let lab = Lab::new("compact");
    lab.experiment(
        r#"
batches = 1

[settings]
app = "rack-hello"
warmup = "500ms"
duration = "1s"

[matrix]
compact = ["none", "after-boot", "auto"]
"#,
    );
    let run = lab.run(&[], Duration::from_secs(90));
    assert_eq!(run.code(), Some(0), "{run:?}");
    let rows = trials(&lab.db());
    assert_eq!(rows.len(), 3);
    for row in &rows {
        assert_eq!(row.status, "valid", "{}: {:?}", row.label, row.reason);
        let check = &row.result["verification"]["checks"][0];
        assert_eq!(check["setting"], "compact");
        assert_eq!(check["ok"], true, "{check}");
        let p = &probe_processes(row)[0];
        match row.result["settings"]["compact"].as_str().unwrap() {
            "after-boot" => {
                assert_eq!(p["compacted_after_boot"], true, "{p}");
                assert!(p["compact_count"].as_u64().unwrap() >= 1, "{p}");
            }
            "auto" => assert_eq!(p["gc_auto_compact"], true, "{p}"),
            _ => {
                assert_eq!(p["compacted_after_boot"], false, "{p}");
                assert_eq!(p["gc_auto_compact"], false, "{p}");
            }
        }
    }
    lab.assert_no_leftovers(Duration::from_secs(2));
}

/// Compaction before fork: Puma preloads the app in its master (`--preload`), the master
/// compacts before forking, and the workers inherit the compacted heap. The report then
/// compares memory per worker (each forked process's own USS, side by side).
#[test]
fn compaction_before_a_preloading_fork_runs_in_the_master_and_memory_is_per_worker() {
    let lab = Lab::new("compact-fork");
    lab.experiment(
        r#"
batches = 2

[settings]
app = "rack-hello"
processes = 2
preload = true
warmup = "500ms"
duration = "1s"

[matrix]
compact = ["none", "after-boot"]
"#,
    );
    let run = lab.run(&[], Duration::from_secs(120));
    assert_eq!(run.code(), Some(0), "{run:?}");
    let rows = trials(&lab.db());
    assert_eq!(rows.len(), 4);
    for row in &rows {
        assert_eq!(row.status, "valid", "{}: {:?}", row.label, row.reason);
        let argv = row.result["server"]["argv"].as_array().unwrap();
        assert!(argv.iter().any(|a| a == "--preload"), "{argv:?}");
        let check = &row.result["verification"]["checks"][0];
        assert_eq!(check["ok"], true, "{check}");
        let procs = probe_processes(row);
        let (workers, masters): (Vec<_>, Vec<_>) = procs.iter().partition(|p| p["forked"] == true);
        assert_eq!((workers.len(), masters.len()), (2, 1), "{procs:?}");
        // The app is built once, in the master; the workers never build it.
        assert!(masters[0]["app_loaded_after_s"].is_number(), "{procs:?}");
        assert!(workers.iter().all(|w| w["app_loaded_after_s"].is_null()));
        let compacted = row.result["settings"]["compact"] == "after-boot";
        assert_eq!(masters[0]["compacted_after_boot"], compacted, "{procs:?}");
        if compacted {
            assert_eq!(
                check["observed"],
                "GC.compact after boot in 1 of the 1 processes that loaded the app"
            );
            // Forked after the compaction: each worker's GC counts it.
            for w in &workers {
                assert!(w["compact_count"].as_u64().unwrap() >= 1, "{w}");
            }
        }
        // Every process's own memory is in the last sample, the workers' included.
        let members = row.result["resources"]["end"]["members"]
            .as_array()
            .unwrap();
        for p in &procs {
            let m = members
                .iter()
                .find(|m| m["pid"] == p["pid"])
                .expect("sampled");
            assert!(m["uss_bytes"].as_u64().unwrap() > 0, "{m}");
        }
    }
    let results = lab.results();
    let report = rubyrace(&["report", results.to_str().unwrap()]);
    assert_eq!(report.code(), Some(0), "{report:?}");
    // Interleaved (the default design): the servers ran side by side, so memory is
    // compared by USS, per worker too.
    assert!(
        report.stdout.contains("worker_uss_end"),
        "{}",
        report.stdout
    );
    assert!(
        !report.stdout.contains("worker_pss_end"),
        "{}",
        report.stdout
    );
    lab.assert_no_leftovers(Duration::from_secs(2));
}

#[test]
fn an_app_with_a_gemfile_runs_through_bundle_exec_and_records_its_gems() {
    let lab = Lab::new("gemfile");
    let app = lab.dir.path("app");
    std::fs::create_dir_all(&app).unwrap();
    std::fs::copy(
        workspace_root().join("ruby/apps/rack-hello/config.ru"),
        app.join("config.ru"),
    )
    .unwrap();
    // The Ruby's own installed gems satisfy it (no network needed).
    std::fs::write(
        app.join("Gemfile"),
        "source \"https://rubygems.org\"\ngem \"rack\"\ngem \"puma\"\n",
    )
    .unwrap();
    lab.experiment(
        r#"
batches = 1

[settings]
app = "app"
warmup = "500ms"
duration = "1s"
"#,
    );
    let run = lab.run(&[], Duration::from_secs(90));
    assert_eq!(run.code(), Some(0), "{run:?}");
    let rows = trials(&lab.db());
    assert_eq!(rows[0].status, "valid", "{:?}", rows[0].reason);
    let r = &rows[0].result;
    let argv: Vec<&str> = r["server"]["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        argv.windows(3).any(|w| w == ["bundle", "exec", "puma"]),
        "{argv:?}"
    );
    let gemfile = app.join("Gemfile").display().to_string();
    assert_eq!(r["server"]["env"]["BUNDLE_GEMFILE"], gemfile.as_str());
    assert_eq!(r["settings"]["gemfile"], gemfile.as_str());
    // Bundler resolved them, and the probe saw the versions in the server.
    let gems = &r["probe"]["gems"];
    for name in ["rack", "puma", "bundler"] {
        assert!(
            gems[name].as_str().is_some_and(|v| !v.is_empty()),
            "{name}: {gems}"
        );
    }

    // A Gemfile whose gems are not installed is an error before the run.
    std::fs::write(
        app.join("Gemfile"),
        "source \"https://rubygems.org\"\ngem \"rack\"\ngem \"no-such-gem-rubyrace\"\n",
    )
    .unwrap();
    std::fs::remove_file(app.join("Gemfile.lock")).ok();
    let (code, stderr) = check_only(&lab);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("experiment.toml:6:7: settings.app: the gems of {gemfile} are not all installed for Ruby \"system\": `")),
        "{stderr}"
    );
    assert!(
        stderr.contains("Bundler can't satisfy your Gemfile's dependencies"),
        "{stderr}"
    );
    lab.assert_no_leftovers(Duration::from_secs(2));
}

#[test]
fn rails_mixed_serves_every_route_of_its_url_mix_with_2xx_for_10_seconds() {
    let lab = Lab::new("rails-mixed");
    let urls = workspace_root().join("ruby/apps/rails-mixed/urls.txt");
    lab.experiment(&format!(
        r#"
batches = 1

[settings]
app = "rails-mixed"
processes = 2
threads = 2
urls = "{}"
warmup = "2s"
duration = "10s"
"#,
        urls.display()
    ));
    let run = lab.run(&[], Duration::from_secs(120));
    assert_eq!(run.code(), Some(0), "{run:?}");
    let rows = trials(&lab.db());
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    // max_error_rate is 0: a single non-2xx or socket error would make the trial invalid.
    assert_eq!(row.status, "valid", "{:?}", row.reason);
    let load = &row.result["load"];
    assert_eq!(load["errors"]["total"], 0, "{load}");
    let statuses: Vec<&String> = load["status"].as_object().unwrap().keys().collect();
    assert!(statuses.iter().all(|s| s.starts_with('2')), "{statuses:?}");
    // Both the page reads (200) and the comment writes (201) were served.
    assert!(load["status"]["200"].as_u64().unwrap() > 100, "{load}");
    assert!(load["status"]["201"].as_u64().unwrap() > 0, "{load}");
    // Every route of the mix is in the plan the load ran.
    let planned: Vec<&str> = load["settings"]["urls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["path"].as_str().unwrap())
        .collect();
    for path in [
        "/posts",
        "/posts/1",
        "/api/posts",
        "/posts/100/comments",
        "/posts/17/like",
        "/cpu",
        "/files",
        "/",
    ] {
        assert!(planned.contains(&path), "{path}: {planned:?}");
    }
    // Active Record was loaded in the server. (Debian's sqlite3 is loaded from vendor_ruby,
    // not activated as a gem, so it is not among the gems.)
    let gems = &row.result["probe"]["gems"];
    assert!(gems["activerecord"].is_string(), "{gems}");
    lab.assert_no_leftovers(Duration::from_secs(3));
}
