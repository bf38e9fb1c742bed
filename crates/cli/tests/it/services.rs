//! `[services]`: real PostgreSQL and real Redis (Debian's, installed by
//! scripts/setup) started by the real `rubyrace run` for a real Puma serving
//! `fixtures/services_app`, which writes a row and a Redis key per POST. Checked: the
//! setup runs once and its output is kept; every trial starts from the same rows
//! (`reset = "template"`) and writes happen; a per-trial Redis starts empty; nothing is
//! left running or on disk, after a clean end, after SIGKILL and a resume, after a setup
//! that fails and after a service that does not start.
//!
//! rubyrace runs with the lab's marker in its own environment, so PostgreSQL, Redis, Puma
//! and the setup commands all carry it and a scan of /proc finds any of them left behind
//! (rubyrace starts Redis with `set-proc-title no`: Redis would otherwise write its title
//! over its environment). The tests that kill a run first check that the scan sees all
//! three servers.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::lab::Lab;
use crate::support::path_str;
use serde_json::Value;

const APP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/services_app");

/// An experiment on services_app: `extra` goes at the end of the file (more tables).
fn experiment(batches: u32, duration: &str, extra: &str) -> String {
    format!(
        r#"
batches = {batches}

[settings]
app = "{APP}"
method = "POST"
warmup = "500ms"
duration = "{duration}"
setup = [["{{ruby}}", "{{app}}/setup.rb"]]

[matrix]
threads = [1, 2]

{extra}
"#
    )
}

const SERVICES: &str = r#"
[services.postgres]
reset = "template"
settings = { fsync = "off", shared_buffers = "32MB" }

[services.redis]
lifetime = "trial"
"#;

fn export(lab: &Lab) -> Value {
    let run = crate::support::rubyrace(&["export", &path_str(&lab.results()), "--json"]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    serde_json::from_str(&run.stdout).unwrap()
}

/// No PostgreSQL or Redis data, socket or private directory is left in the results directory.
fn assert_no_service_data(results: &Path) {
    let services = results.join("services");
    for left in [
        "postgres/data",
        "postgres/socket",
        "postgres/outside",
        "redis/data",
        "redis/outside",
    ] {
        assert!(
            !services.join(left).exists(),
            "{} was left behind",
            services.join(left).display()
        );
    }
}

/// As root, a service runs as its own unprivileged user; as anyone else, as that user.
fn assert_service_user(record: &Value, as_root: &str) {
    use std::os::unix::fs::MetadataExt;
    let root = std::fs::metadata("/proc/self").unwrap().uid() == 0;
    let user = record["user"].as_str().unwrap();
    if root {
        assert_eq!(user, as_root, "{record}");
    } else {
        assert!(!user.is_empty() && user != "root", "{record}");
    }
}

/// The service's data directory is gone, and so is the private directory under /var/tmp
/// it was in, when the results directory was out of the service user's reach.
fn assert_removed(record: &Value) {
    let data = Path::new(record["data_dir"].as_str().unwrap());
    assert!(!data.exists(), "{} was left behind", data.display());
    let parent = data.parent().unwrap();
    if parent.starts_with("/var/tmp") {
        assert!(!parent.exists(), "{} was left behind", parent.display());
    }
}

#[test]
fn every_trial_starts_from_the_template_and_nothing_is_left() {
    let lab = Lab::new("services");
    lab.experiment(&experiment(2, "2s", SERVICES));
    let run = lab.spawn_marked_run(&[]).wait(Duration::from_secs(240));
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert!(run.stderr.contains("services: PostgreSQL 15"), "{run:?}");
    assert!(run.stderr.contains("setup 1 (system)"), "{run:?}");
    lab.assert_no_leftovers(Duration::from_secs(10));
    assert_no_service_data(&lab.results());

    let export = export(&lab);
    let trials = export["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 4);
    let mut databases = Vec::new();
    for t in trials {
        assert_eq!(t["status"], "valid", "{t}");
        let s = &t["services"];
        // The setup's three rows, whatever the trials before wrote.
        assert_eq!(s["rows_at_start"]["hits"], 3, "{s}");
        let end = s["rows_at_end"]["hits"].as_i64().unwrap();
        let requests = t["load"]["requests"].as_i64().unwrap_or(0);
        assert!(
            end > 3 + requests / 2,
            "writes happened: {end} rows after {requests} requests: {s}"
        );
        assert_eq!(s["template"], "app");
        // PostgreSQL and Redis worked for the app while it was measured: their CPU is the
        // run's own, not other work, in the trial's noise record.
        let noise = &t["noise"];
        assert!(
            noise["services_percent"].as_f64().unwrap_or(0.0) > 1.0,
            "{noise}"
        );
        databases.push(s["database"].as_str().unwrap().to_string());
        // Redis lives for the trial: empty at the start, written during it.
        assert_eq!(s["redis_keys_at_start"], 0, "{s}");
        assert!(s["redis_keys_at_end"].as_i64().unwrap() > 0, "{s}");
        let redis = &s["instances"]["redis"];
        assert!(
            redis["version"].as_str().unwrap().starts_with('7'),
            "{redis}"
        );
        assert!(redis["url"]
            .as_str()
            .unwrap()
            .starts_with("redis://127.0.0.1:"));
        assert_service_user(redis, "redis");
        assert_removed(redis);
    }
    databases.sort();
    databases.dedup();
    assert_eq!(databases.len(), 4, "a database per trial: {databases:?}");

    let sessions = export["sessions_services"].as_array().unwrap();
    assert_eq!(sessions.len(), 1);
    let record = &sessions[0]["services"];
    let pg = &record["postgres"];
    assert!(
        pg["version"].as_str().unwrap().starts_with("PostgreSQL 15"),
        "{pg}"
    );
    assert_service_user(pg, "postgres");
    assert_removed(pg);
    assert_eq!(pg["settings"]["fsync"], "off");
    assert_eq!(pg["settings"]["shared_buffers"], "32MB");
    assert_eq!(
        record["stopped"]["postgres"].as_str().unwrap(),
        "exit status 0 (term)"
    );
    // The setup ran once, for the one (Ruby, Gemfile, app), and its output is kept.
    let setup = record["setup"].as_array().unwrap();
    assert_eq!(setup.len(), 1, "{record}");
    assert_eq!(setup[0]["status"], "exit status 0");
    let stdout = lab.results().join(setup[0]["stdout"].as_str().unwrap());
    let said = std::fs::read_to_string(&stdout).unwrap();
    assert_eq!(said.trim(), "seeded 3 rows into app");

    // The report names the services each cohort ran against, as keys to group by.
    let report = lab.report_json();
    for cohort in report["environment"].as_array().unwrap() {
        let values = &cohort["values"];
        let pg = values["services.postgres"][0].as_str().unwrap_or_default();
        assert!(pg.starts_with("15."), "{cohort}");
        assert!(
            pg.contains("fsync=off") && pg.contains("shared_buffers=32MB"),
            "{pg}"
        );
        let redis = values["services.redis"][0].as_str().unwrap_or_default();
        assert!(
            redis.starts_with("7.") && redis.contains("save="),
            "{redis}"
        );
    }
}

/// Both services on Unix sockets only: the app reaches them through the URLs rubyrace
/// gives, writes happen, and nothing is left.
#[test]
fn services_on_unix_sockets_serve_the_app() {
    let lab = Lab::new_short("services-unix");
    lab.experiment(&experiment(
        1,
        "1s",
        "[services.postgres]\nlisten = \"unix\"\nreset = \"template\"\n\n[services.redis]\nlisten = \"unix\"\nreset = \"flush\"\n",
    ));
    let run = lab.spawn_marked_run(&[]).wait(Duration::from_secs(240));
    assert_eq!(run.code(), Some(0), "{run:?}");
    lab.assert_no_leftovers(Duration::from_secs(10));
    assert_no_service_data(&lab.results());
    let export = export(&lab);
    let record = &export["sessions_services"][0]["services"];
    let socket_dir = record["postgres"]["address"].as_str().unwrap();
    assert!(socket_dir.starts_with('/'), "{record}");
    assert!(
        record["postgres"]["url_base"]
            .as_str()
            .unwrap()
            .starts_with("postgres://rubyrace@"),
        "{record}"
    );
    assert!(
        !Path::new(socket_dir).exists(),
        "{socket_dir} was left behind"
    );
    let redis_url = record["redis"]["url"].as_str().unwrap();
    assert!(redis_url.starts_with("unix:///"), "{record}");
    for t in export["trials"].as_array().unwrap() {
        assert_eq!(t["status"], "valid", "{t}");
        let s = &t["services"];
        let requests = t["load"]["requests"].as_i64().unwrap();
        assert!(requests > 0, "{t}");
        assert!(s["rows_at_end"]["hits"].as_i64().unwrap() > 3, "{s}");
        assert!(s["redis_keys_at_end"].as_i64().unwrap() > 0, "{s}");
        assert!(
            s["database"].as_str().unwrap().starts_with("app_t"),
            "a copy of the template per trial: {s}"
        );
    }
}

/// Rails-forum (ActiveRecord 6.1 on Debian's Ruby) on PostgreSQL over a
/// Unix socket: its setup migrates and seeds through DATABASE_URL, and the members' posts
/// are rows. ActiveRecord could not parse the URL rubyrace gave before.
#[test]
fn the_forum_runs_on_postgres_over_a_unix_socket() {
    let lab = Lab::new_short("forum-unix");
    let root = crate::support::workspace_root();
    lab.experiment(&format!(
        r#"
batches = 1
[settings]
app = "rails-forum"
processes = 1
threads = 2
warmup = "1s"
duration = "2s"
scenario = "{}"
setup = [["{{ruby}}", "{{app}}/db/setup.rb"]]

[services.postgres]
listen = "unix"
reset = "template"

[services.redis]
listen = "unix"
"#,
        root.join("ruby/apps/rails-forum/scenarios.toml").display()
    ));
    let run = lab.spawn_marked_run(&[]).wait(Duration::from_secs(300));
    assert_eq!(run.code(), Some(0), "{run:?}");
    let export = export(&lab);
    let url_base = export["sessions_services"][0]["services"]["postgres"]["url_base"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        url_base.starts_with("postgres://rubyrace@%2F"),
        "{url_base}"
    );
    let t = &export["trials"][0];
    assert_eq!(t["status"], "valid", "{t}");
    assert!(t["load"]["requests"].as_i64().unwrap() > 0, "{t}");
    lab.assert_no_leftovers(Duration::from_secs(10));
    assert_no_service_data(&lab.results());
}

/// PostgreSQL and Redis let in only a client with the password made for
/// the run. A setup command with the URLs rubyrace gives, their passwords taken out, is
/// refused by both; with them, it gets in. The passwords appear nowhere rubyrace wrote:
/// not in its output, the store, the logs or any file of the results directory.
#[test]
fn services_refuse_a_client_without_the_run_password() {
    let lab = Lab::new("services-password");
    let passwords = lab.results().with_file_name("passwords.txt");
    lab.experiment(&format!(
        r#"
batches = 1

[settings]
app = "{APP}"
warmup = "500ms"
duration = "1s"
setup = [["{{ruby}}", "{{app}}/setup.rb"], ["{{ruby}}", "{{app}}/intruder.rb", "{}"]]

[services.postgres]

[services.redis]
"#,
        passwords.display()
    ));
    let run = lab.spawn_marked_run(&[]).wait(Duration::from_secs(240));
    assert_eq!(run.code(), Some(0), "{run:?}");
    let export = export(&lab);
    let record = &export["sessions_services"][0]["services"];
    let setup = record["setup"].as_array().unwrap();
    let said =
        std::fs::read_to_string(lab.results().join(setup[1]["stdout"].as_str().unwrap())).unwrap();
    let answers: Vec<&str> = said.lines().collect();
    assert!(
        answers[0].starts_with("postgres without password: refused:")
            && answers[0].contains("password"),
        "{said}"
    );
    assert_eq!(answers[1], "postgres with password: connected", "{said}");
    assert!(
        answers[2].starts_with("redis without password: -NOAUTH"),
        "{said}"
    );
    assert_eq!(answers[3], "redis with password: +PONG", "{said}");
    assert_eq!(
        record["postgres"]["authentication"], "scram-sha-256",
        "{record}"
    );
    assert_eq!(record["redis"]["authentication"], "requirepass", "{record}");

    let secrets = std::fs::read_to_string(&passwords).unwrap();
    let secrets: Vec<&str> = secrets.lines().collect();
    assert_eq!(secrets.len(), 2, "{secrets:?}");
    for secret in &secrets {
        assert_eq!(secret.len(), 32, "{secrets:?}");
        assert!(!run.stdout.contains(secret) && !run.stderr.contains(secret));
        assert!(!export.to_string().contains(secret));
        for file in crate::support::files_under(&lab.results()) {
            let bytes = std::fs::read(&file).unwrap_or_default();
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "{} holds a service's password",
                file.display()
            );
        }
    }
    lab.assert_no_leftovers(Duration::from_secs(10));
    assert_no_service_data(&lab.results());
}

/// A spec from `run --dry-run --json` of a services experiment runs on
/// its own with `rubyrace trial --spec`: PostgreSQL and Redis are started for it, the setup
/// seeds the database, the app writes rows and keys, and everything is stopped and removed.
/// The spec used to drop the services, and the app could not start without DATABASE_URL.
#[test]
fn a_spec_of_a_services_experiment_runs_alone() {
    let lab = Lab::new("services-spec");
    lab.experiment(&experiment(1, "1s", SERVICES));
    let plan = lab.run(&["--dry-run", "--json"], Duration::from_secs(30));
    assert_eq!(plan.code(), Some(0), "{plan:?}");
    let plan: Value = serde_json::from_str(&plan.stdout).unwrap();
    let mut spec = plan["trials"][0].clone();
    assert_eq!(spec["services"]["postgres"]["reset"], "template", "{spec}");
    let out = lab.results().with_file_name("alone");
    spec["out_dir"] = Value::String(out.display().to_string());
    let spec_file = lab.results().with_file_name("spec.json");
    std::fs::write(&spec_file, serde_json::to_string(&spec).unwrap()).unwrap();
    let run = lab
        .spawn_marked(&["trial", "--spec", &path_str(&spec_file)])
        .wait(Duration::from_secs(120));
    assert_eq!(run.code(), Some(0), "{run:?}");
    let result: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(result["status"], "valid", "{result}");
    let services = &result["services"];
    assert_eq!(services["rows_at_start"]["hits"], 3, "{services}");
    assert!(
        services["rows_at_end"]["hits"].as_i64().unwrap() > 3,
        "{services}"
    );
    assert!(
        services["redis_keys_at_end"].as_i64().unwrap() > 0,
        "{services}"
    );
    let instances = &services["instances"];
    assert!(
        instances["postgres"]["version"]
            .as_str()
            .unwrap()
            .starts_with("PostgreSQL"),
        "{instances}"
    );
    assert_eq!(
        instances["setup"].as_array().unwrap().len(),
        1,
        "{instances}"
    );
    assert_eq!(instances["stopped"]["postgres"], "exit status 0 (term)");
    assert_removed(&instances["postgres"]);
    assert_removed(&instances["redis"]);
    assert_no_service_data(&out);
    lab.assert_no_leftovers(Duration::from_secs(10));
}

/// The dry run shows what else each configuration runs with (setup,
/// scenario, TLS, profilers) and the services with the programs this machine would run,
/// and its estimate counts the profiled phase (the duration again and about 1 s).
#[test]
fn the_dry_run_shows_services_setup_scenario_tls_and_profilers() {
    let lab = Lab::new("services-dry-run");
    let scenario = crate::support::workspace_root().join("ruby/apps/rails-forum/scenarios.toml");
    let file = |profile: &str| {
        format!(
            r#"
batches = 3
[settings]
app = "{APP}"
warmup = "1s"
duration = "10s"
tls = true
scenario = "{}"
setup = [["{{ruby}}", "{{app}}/setup.rb"]]
{profile}

[services.postgres]
reset = "template"
settings = {{ fsync = "off" }}

[services.redis]
listen = "unix"
"#,
            scenario.display()
        )
    };
    let estimate = |text: &str| -> u64 {
        let line = text.lines().find(|l| l.starts_with("About ")).unwrap();
        let span = line["About ".len()..].split(" (").next().unwrap();
        humantime::parse_duration(span).unwrap().as_secs()
    };
    lab.experiment(&file(""));
    let plain = lab.run(&["--dry-run"], Duration::from_secs(30));
    assert_eq!(plain.code(), Some(0), "{plain:?}");
    lab.experiment(&file("profile = [\"rbspy\"]"));
    let run = lab.run(&["--dry-run"], Duration::from_secs(30));
    assert_eq!(run.code(), Some(0), "{run:?}");
    let out = &run.stdout;
    assert!(
        out.lines()
            .any(|l| l.starts_with("      setup: /") && l.ends_with(&format!(" {APP}/setup.rb"))),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "      scenario: {}: visitor (weight 3, 4 steps), member (weight 1, 8 steps)",
            scenario.display()
        )),
        "{out}"
    );
    assert!(out.contains("      TLS: the server serves HTTPS"), "{out}");
    assert!(
        out.contains(
            "      profiled: rbspy at 99 Hz in a profiled phase of 10s after the measured one"
        ),
        "{out}"
    );
    assert!(
        out.contains("\nServices (given to the app as DATABASE_URL and REDIS_URL):\n"),
        "{out}"
    );
    assert!(
        out.contains("  PostgreSQL (/usr/lib/postgresql/")
            && out.contains(
                "database app, lifetime run, listen tcp, reset template, settings fsync=off"
            ),
        "{out}"
    );
    assert!(
        out.contains("  Redis (/") && out.contains("lifetime run, listen unix, reset none"),
        "{out}"
    );
    // 3 trials, each with a profiled phase of 10 s and about 1 s more.
    assert_eq!(
        estimate(out) - estimate(&plain.stdout),
        3 * 11,
        "{out}\n{plain:?}"
    );
    assert!(out.contains("+ the profiled phase"), "{out}");
    assert!(!lab.results().exists());
}

/// The private directories under /var/tmp whose owner file names `pid` (services of a
/// rubyrace running as root, whose results directory their user cannot reach).
fn private_dirs_of(pid: u32) -> Vec<std::path::PathBuf> {
    std::fs::read_dir("/var/tmp")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("rubyrace-"))
        .filter(|e| {
            std::fs::read_to_string(e.path().join("rubyrace.owner"))
                .is_ok_and(|o| o.split_whitespace().next() == Some(&pid.to_string()))
        })
        .map(|e| e.path())
        .collect()
}

/// A rubyrace killed with SIGKILL leaves PostgreSQL's and Redis's private
/// directories under /var/tmp (as root, when their users cannot reach the results
/// directory); the next rubyrace run removes them, even after the killed run's results
/// directory was deleted (they used to stay until a resume of that directory: forever, once
/// it was deleted).
#[test]
fn what_a_killed_run_left_in_var_tmp_goes_with_the_next_run() {
    let lab = Lab::new("services-var-tmp");
    lab.experiment(&experiment(2, "3s", SERVICES));
    // A directory only its owner may enter, as /root is: PostgreSQL's and Redis's users
    // cannot reach a results directory in it.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(lab.dir.path(""), std::fs::Permissions::from_mode(0o700)).unwrap();
    let mut running = lab.spawn_marked_run(&[]);
    wait_until_the_scan_sees_every_server(&lab, &mut running);
    let pid = running.pid();
    let left = private_dirs_of(pid);
    // SAFETY: the rubyrace this test started, by pid.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let killed = running.wait(Duration::from_secs(30));
    assert_eq!(killed.code(), None, "{killed:?}");
    lab.assert_no_leftovers(Duration::from_secs(10));
    std::fs::remove_dir_all(lab.results()).unwrap();
    if nix_is_root() {
        // As root, with a results directory PostgreSQL's user cannot reach (the lab's is
        // mode 700): both services' data went to /var/tmp.
        assert_eq!(left.len(), 2, "rubyrace {pid}: {left:?}");
        assert!(left.iter().all(|d| d.exists()), "{left:?}");
    }
    // Any run sweeps them: here one without services, into another directory.
    let other = Lab::new("services-var-tmp-next");
    other.experiment(
        "batches = 1\n[settings]\napp = \"rack-hello\"\nwarmup = \"200ms\"\nduration = \"300ms\"\n",
    );
    let next = other.run(&[], Duration::from_secs(60));
    assert_eq!(next.code(), Some(0), "{next:?}");
    for dir in &left {
        assert!(!dir.exists(), "{} was left behind", dir.display());
    }
}

/// Whether the tests run as root (services then run as their own users).
fn nix_is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").unwrap().uid() == 0
}

/// A PostgreSQL that fails to start (here its initdb fails) leaves its
/// log and nothing else: no `data/`, `socket/` or private directory under /var/tmp.
#[test]
fn a_postgres_whose_initdb_fails_leaves_only_its_log() {
    let lab = Lab::new("services-initdb-fails");
    // As /root is: as root, PostgreSQL's data would go to a private directory in /var/tmp.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(lab.dir.path(""), std::fs::Permissions::from_mode(0o700)).unwrap();
    // Where PostgreSQL's user can reach it (the lab's directory is private).
    let fake = crate::support::TempDir::new("fake-postgres-bin");
    let bin = fake.path("");
    for (name, body) in [
        ("postgres", "#!/bin/sh\nexit 0\n"),
        (
            "initdb",
            "#!/bin/sh\necho 'initdb: the disk says no' >&2\nexit 1\n",
        ),
    ] {
        let path = bin.join(name);
        std::fs::write(&path, body).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    lab.experiment(&experiment(
        1,
        "1s",
        &format!("[services.postgres]\nbin_dir = \"{}\"\n", bin.display()),
    ));
    let running = lab.spawn_marked_run(&[]);
    let pid = running.pid();
    let run = running.wait(Duration::from_secs(60));
    assert_ne!(run.code(), Some(0), "{run:?}");
    assert!(
        run.stderr.contains("PostgreSQL's initdb failed")
            && run.stderr.contains("the disk says no"),
        "{run:?}"
    );
    assert_no_service_data(&lab.results());
    assert!(
        private_dirs_of(pid).is_empty(),
        "{:?}",
        private_dirs_of(pid)
    );
    let home = lab.results().join("services/postgres");
    let left: Vec<String> = std::fs::read_dir(&home)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["initdb-s1.log"], "{left:?}");
}

/// The program names of `pids` (those still alive): the file name of the first word of
/// their command line, as `ps` shows it (Debian's redis-server is a link to another
/// executable, so /proc/PID/exe would not say).
fn program_names(pids: &[i32]) -> Vec<String> {
    pids.iter()
        .filter_map(|p| std::fs::read(format!("/proc/{p}/cmdline")).ok())
        .filter_map(|c| {
            let first = String::from_utf8_lossy(&c)
                .split(['\0', ' '])
                .next()?
                .to_string();
            Some(first.rsplit('/').next()?.to_string())
        })
        .collect()
}

/// Waits until PostgreSQL, Redis and Puma are all up and the scan for leftovers sees each
/// of them, so that it seeing none after a kill means something.
fn wait_until_the_scan_sees_every_server(lab: &Lab, running: &mut crate::support::Running) {
    let seen = Instant::now();
    loop {
        let names = program_names(&lab.leftovers());
        let has = |n: &str| names.iter().any(|x| x.starts_with(n));
        if has("postgres") && has("redis-server") && has("puma") {
            return;
        }
        assert!(
            seen.elapsed() < Duration::from_secs(30) && running.is_running(),
            "the scan does not see PostgreSQL, Redis and Puma mid-run: {names:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts the lab's run and waits (at most `within`) until a trial is stored and the scan
/// sees PostgreSQL, Redis and Puma.
fn running_with_a_trial_stored(lab: &Lab, within: Duration) -> crate::support::Running {
    let mut running = lab.spawn_marked_run(&[]);
    let started = Instant::now();
    while lab.stored_trials() < 1 {
        assert!(
            running.is_running(),
            "the run ended before a trial was stored"
        );
        assert!(started.elapsed() < within, "no trial stored in {within:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    wait_until_the_scan_sees_every_server(lab, &mut running);
    running
}

/// Starts the lab's run, waits (at most `within`) until a trial is stored and the scan sees
/// PostgreSQL, Redis and Puma, then sends rubyrace `signal`; how it ended.
fn stop_mid_run(lab: &Lab, signal: i32, within: Duration) -> crate::support::Run {
    let running = running_with_a_trial_stored(lab, within);
    // SAFETY: the rubyrace this test started, by pid.
    unsafe { libc::kill(running.pid() as i32, signal) };
    running.wait(Duration::from_secs(30))
}

/// `rubyrace run --resume` of the lab's results, marked as the lab's.
fn resume(lab: &Lab, within: Duration) -> crate::support::Run {
    crate::support::spawn_with_env(
        &["run", "--resume", &path_str(&lab.results())],
        &[("RUBYRACE_TEST_MARKER", &lab.marker)],
    )
    .wait(within)
}

/// PostgreSQL killed mid-run (it lives through the run): the run stops before the next
/// trial, saying the service died and how, with the resume command; nothing is left; the
/// resume starts PostgreSQL afresh and completes the run, every trial stored once.
#[test]
fn a_service_that_dies_mid_run_stops_the_run_saying_so_and_the_resume_completes_it() {
    let lab = Lab::new("services-died");
    lab.experiment(&experiment(2, "2s", SERVICES));
    let running = running_with_a_trial_stored(&lab, Duration::from_secs(120));
    // The postmaster: the first PostgreSQL process of the lab (its children come after it).
    let postmaster = lab
        .leftovers()
        .into_iter()
        .filter(|pid| {
            program_names(&[*pid])
                .iter()
                .any(|n| n.starts_with("postgres"))
        })
        .min()
        .expect("PostgreSQL runs");
    // SAFETY: a process of this lab (found by its marker), by pid.
    unsafe { libc::kill(postmaster, libc::SIGKILL) };
    let stopped = running.wait(Duration::from_secs(120));
    assert_eq!(stopped.code(), Some(1), "{stopped:?}");
    assert!(
        stopped.stderr.contains(
            "services.postgres: PostgreSQL died during the run (killed by signal 9 (SIGKILL); its log: "
        ),
        "{stopped:?}"
    );
    assert!(
        stopped.stderr.contains("rubyrace run --resume"),
        "{stopped:?}"
    );
    lab.assert_no_leftovers(Duration::from_secs(10));
    let resumed = resume(&lab, Duration::from_secs(180));
    assert!(matches!(resumed.code(), Some(0) | Some(3)), "{resumed:?}");
    crate::support::lab::assert_store_equals_schedule(&lab.db());
    lab.assert_no_leftovers(Duration::from_secs(10));
}

/// Stops a run mid-trial with `signal`, checks that nothing is left running, resumes it,
/// and checks the whole run.
fn interrupt_and_resume(name: &str, signal: i32) {
    let lab = Lab::new(name);
    lab.experiment(&experiment(2, "3s", SERVICES));
    // Mid-run: PostgreSQL, a per-trial Redis and Puma are up.
    let stopped = stop_mid_run(&lab, signal, Duration::from_secs(120));
    if signal == libc::SIGKILL {
        assert_eq!(stopped.code(), None, "{stopped:?}");
    } else {
        // Ctrl-C: the trial is abandoned, the services stopped, and the exit says so.
        assert_eq!(stopped.code(), Some(130), "{stopped:?}");
    }
    // SIGKILL: the parent-death signal takes PostgreSQL, Redis and Puma down with rubyrace.
    lab.assert_no_leftovers(Duration::from_secs(10));
    if signal != libc::SIGKILL {
        assert_no_service_data(&lab.results());
    }

    let resumed = resume(&lab, Duration::from_secs(240));
    assert_eq!(resumed.code(), Some(0), "{resumed:?}");
    lab.assert_no_leftovers(Duration::from_secs(10));
    assert_no_service_data(&lab.results());
    let export = export(&lab);
    let trials = export["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 4);
    for t in trials {
        assert_eq!(t["status"], "valid", "{t}");
        assert_eq!(t["services"]["rows_at_start"]["hits"], 3, "{t}");
    }
    // The resumed session started its own services and ran the setup again.
    let sessions = export["sessions_services"].as_array().unwrap();
    assert_eq!(sessions.len(), 2, "{sessions:?}");
    assert_eq!(
        sessions[1]["services"]["setup"].as_array().unwrap().len(),
        1
    );
    if signal != libc::SIGKILL {
        // Stopped by rubyrace itself: PostgreSQL's fast shutdown.
        let stopped = &sessions[0]["services"]["stopped"]["postgres"];
        assert_eq!(stopped, "exit status 0 (term)", "{sessions:?}");
    }
    // Each session's service logs are its own (the resume used to rewrite
    // the first one's), and a resume of the complete run starts nothing and keeps them.
    let postgres = lab.results().join("services/postgres");
    let logs = |dir: &Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".log") || n.ends_with(".stderr") || n.ends_with(".stdout"))
            .collect();
        names.sort();
        names
    };
    let before = logs(&postgres);
    for name in [
        "initdb-s1.log",
        "initdb-s2.log",
        "postgres-s1.stderr",
        "postgres-s2.stderr",
    ] {
        assert!(before.contains(&name.to_string()), "{name}: {before:?}");
    }
    let first_log = std::fs::read(postgres.join("postgres-s2.stderr")).unwrap();
    let again = resume(&lab, Duration::from_secs(60));
    assert_eq!(again.code(), Some(0), "{again:?}");
    assert!(
        !again.stderr.contains("services:"),
        "a complete run started services: {again:?}"
    );
    assert_eq!(logs(&postgres), before);
    assert_eq!(
        std::fs::read(postgres.join("postgres-s2.stderr")).unwrap(),
        first_log
    );
    lab.assert_no_leftovers(Duration::from_secs(10));
}

#[test]
fn a_killed_run_leaves_no_service_and_resumes() {
    interrupt_and_resume("services-kill", libc::SIGKILL);
}

#[test]
fn ctrl_c_stops_the_services_and_the_run_resumes() {
    interrupt_and_resume("services-int", libc::SIGINT);
}

#[test]
fn a_failing_setup_stops_the_run_with_its_output() {
    let lab = Lab::new("services-setup");
    let file = experiment(1, "1s", SERVICES).replace(
        r#"setup = [["{ruby}", "{app}/setup.rb"]]"#,
        r#"setup = [["{ruby}", "-e", "puts 'migrating'; warn 'the migration exploded'; exit 3"]]"#,
    );
    lab.experiment(&file);
    let run = lab.spawn_marked_run(&[]).wait(Duration::from_secs(120));
    assert_ne!(run.code(), Some(0), "{run:?}");
    assert!(run.stderr.contains("setup: "), "{run:?}");
    assert!(run.stderr.contains("failed (exit status 3)"), "{run:?}");
    assert!(run.stderr.contains("the migration exploded"), "{run:?}");
    assert_eq!(lab.stored_trials(), 0);
    lab.assert_no_leftovers(Duration::from_secs(10));
    assert_no_service_data(&lab.results());
}

/// Where a service listens and keeps its data is rubyrace's to choose (it
/// hands the app the URL); `port` made PostgreSQL listen elsewhere and the run wait 60 s.
/// Refused when the file is checked, each at its place.
#[test]
fn settings_rubyrace_controls_are_refused_when_the_file_is_checked() {
    let lab = Lab::new("services-reserved");
    let file = lab.experiment(&experiment(
        1,
        "1s",
        "[services.postgres]\nsettings = { port = 54329, unix_socket_directories = \"/tmp\" }\n\n[services.redis]\nsettings = { bind = \"0.0.0.0\" }\n",
    ));
    let run = lab.run(&["--dry-run"], Duration::from_secs(20));
    assert_eq!(run.code(), Some(2), "{run:?}");
    for key in [
        "services.postgres.settings.port",
        "services.postgres.settings.unix_socket_directories",
        "services.redis.settings.bind",
    ] {
        let name = key.rsplit('.').next().unwrap();
        assert!(
            run.stderr.contains(&format!(
                "{key}: {name} is rubyrace's to set: it chooses where the server listens"
            )),
            "{key}: {run:?}"
        );
    }
    assert!(run.stderr.contains(&file.display().to_string()), "{run:?}");
    assert_eq!(lab.stored_trials(), 0);
}

/// A service this machine cannot start, or a PostgreSQL setting it does not
/// have, is found by the dry run (it passed, the run failed, and every resume failed the same
/// way); a run that stopped before its first trial says so instead of only suggesting a
/// resume, and its empty directory takes the fixed file.
#[test]
fn bad_services_are_found_before_the_run_and_an_empty_directory_is_reused() {
    let lab = Lab::new("services-bad");
    let file = lab.experiment(&experiment(
        1,
        "1s",
        "[services.postgres]\nbin_dir = \"/nonexistent\"\n\n[services.redis]\nexecutable = \"redis-serverr\"\n",
    ));
    let run = lab.run(&["--dry-run"], Duration::from_secs(20));
    assert_eq!(run.code(), Some(2), "{run:?}");
    for said in [
        "services.postgres.bin_dir: /nonexistent holds no `postgres`",
        "services.redis.executable: redis-serverr is not found on PATH",
    ] {
        assert!(
            run.stderr.contains(&format!("{}: {said}", file.display())),
            "{said}: {run:?}"
        );
    }
    lab.experiment(&experiment(
        1,
        "1s",
        "[services.postgres]\nsettings = { shared_bufers = \"32MB\" }\n",
    ));
    let run = lab.run(&["--dry-run"], Duration::from_secs(20));
    assert_eq!(run.code(), Some(2), "{run:?}");
    assert!(
        run.stderr
            .contains("services.postgres.settings.shared_bufers: ")
            && run
                .stderr
                .contains("has no setting of that name (did you mean `shared_buffers`?)"),
        "{run:?}"
    );
    assert!(!lab.results().exists(), "a refused file creates nothing");

    // A value PostgreSQL refuses is only found when it starts: the run stops before its
    // first trial, says no trial is stored, and the fixed file reuses the directory.
    lab.experiment(&experiment(
        1,
        "1s",
        "[services.postgres]\nsettings = { shared_buffers = \"plenty\" }\n",
    ));
    let failed = lab.spawn_marked_run(&[]).wait(Duration::from_secs(120));
    assert_eq!(failed.code(), Some(1), "{failed:?}");
    assert!(
        failed
            .stderr
            .contains("No trial is stored. Fix the cause and run the experiment again"),
        "{failed:?}"
    );
    assert_eq!(lab.stored_trials(), 0);
    lab.experiment(&experiment(1, "1s", SERVICES));
    let fixed = lab.spawn_marked_run(&[]).wait(Duration::from_secs(300));
    assert_eq!(fixed.code(), Some(0), "{fixed:?}");
    assert_eq!(lab.stored_trials(), 2);
    lab.assert_no_leftovers(Duration::from_secs(10));
}

#[test]
fn a_service_that_does_not_start_stops_the_run_with_its_log() {
    let lab = Lab::new("services-broken");
    lab.experiment(&experiment(
        1,
        "1s",
        "[services.postgres]\nsettings = { shared_buffers = \"plenty\" }\n",
    ));
    let run = lab.spawn_marked_run(&[]).wait(Duration::from_secs(120));
    assert_ne!(run.code(), Some(0), "{run:?}");
    assert!(
        run.stderr.contains("PostgreSQL exited before it was ready"),
        "{run:?}"
    );
    // The tail of PostgreSQL's own log says why.
    assert!(
        run.stderr
            .contains("invalid value for parameter \"shared_buffers\""),
        "{run:?}"
    );
    assert_eq!(lab.stored_trials(), 0);
    lab.assert_no_leftovers(Duration::from_secs(10));
    assert_no_service_data(&lab.results());
}

#[test]
fn a_redis_that_does_not_start_stops_the_run_with_its_log() {
    let lab = Lab::new("services-broken-redis");
    lab.experiment(&experiment(
        1,
        "1s",
        "[services.postgres]\n\n[services.redis]\nsettings = { maxmemory = \"lots\" }\n",
    ));
    let run = lab.spawn_marked_run(&[]).wait(Duration::from_secs(120));
    assert_ne!(run.code(), Some(0), "{run:?}");
    assert!(
        run.stderr.contains("Redis exited before it was ready"),
        "{run:?}"
    );
    // The tail of Redis's own log says why.
    assert!(
        run.stderr.contains("argument must be a memory value"),
        "{run:?}"
    );
    assert_eq!(lab.stored_trials(), 0);
    lab.assert_no_leftovers(Duration::from_secs(10));
    assert_no_service_data(&lab.results());
}

/// rails-forum on PostgreSQL and Redis under both scenarios, killed (SIGKILL) in its second
/// trial and resumed: nothing is left running, every trial starts from the seed's rows,
/// the members' replies are rows, and no step failed.
#[test]
fn the_forum_serves_visitors_and_members_on_postgres_from_the_same_start() {
    let lab = Lab::new("services-forum");
    let root = crate::support::workspace_root();
    lab.experiment(&format!(
        r#"
batches = 2
[settings]
app = "rails-forum"
processes = 2
threads = 2
warmup = "1s"
duration = "3s"
scenario = "{}"
setup = [["{{ruby}}", "{{app}}/db/setup.rb"]]

[services.postgres]
reset = "template"

[services.redis]
reset = "flush"
"#,
        root.join("ruby/apps/rails-forum/scenarios.toml").display()
    ));
    // Killed in its second trial, with users in sessions on PostgreSQL, Redis and Puma:
    // nothing is left running; the resumed run ends the experiment.
    let killed = stop_mid_run(&lab, libc::SIGKILL, Duration::from_secs(240));
    assert_eq!(killed.code(), None, "{killed:?}");
    lab.assert_no_leftovers(Duration::from_secs(10));
    let resumed = resume(&lab, Duration::from_secs(300));
    assert_eq!(resumed.code(), Some(0), "{resumed:?}");
    lab.assert_no_leftovers(Duration::from_secs(10));
    assert_no_service_data(&lab.results());
    let export = export(&lab);
    let trials = export["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 2);
    let starts: Vec<&Value> = trials
        .iter()
        .map(|t| &t["services"]["rows_at_start"])
        .collect();
    // The seed of db/setup.rb, whatever the first trial wrote.
    assert_eq!(starts[0], starts[1]);
    assert_eq!(starts[0]["users"], 50);
    assert_eq!(starts[0]["topics"], 100);
    for t in trials {
        assert_eq!(t["status"], "valid", "{t}");
        let s = &t["services"];
        let before = s["rows_at_start"]["posts"].as_i64().unwrap();
        let after = s["rows_at_end"]["posts"].as_i64().unwrap();
        let steps = t["load"]["scenario"]["steps"].as_array().unwrap();
        let replies = steps
            .iter()
            .find(|st| st["scenario"] == "member" && st["step"] == "reply")
            .unwrap();
        // Every reply of the members is a row (warmup replies too: at least these).
        let recorded = replies["responses"].as_i64().unwrap();
        assert!(recorded > 0, "{replies}");
        assert!(
            after >= before + recorded,
            "{before} -> {after} posts, {recorded} replies"
        );
        // The topics the users read were counted in Redis, flushed before the trial.
        assert_eq!(s["redis_keys_at_start"], 0, "{s}");
        assert!(s["redis_keys_at_end"].as_i64().unwrap() > 0, "{s}");
        for st in steps {
            assert_eq!(st["unexpected_status"], 0, "{st}");
            assert_eq!(st["extract_failures"], 0, "{st}");
            assert_eq!(st["errors"], 0, "{st}");
        }
    }
    // The report shows each step per cohort: the sums are the trials' own.
    let report = lab.report_json();
    let steps = report["steps"].as_array().expect("steps in the report");
    let reply = steps
        .iter()
        .find(|st| st["scenario"] == "member" && st["step"] == "reply")
        .unwrap_or_else(|| panic!("{steps:?}"));
    let summed: i64 = trials
        .iter()
        .flat_map(|t| t["load"]["scenario"]["steps"].as_array().unwrap())
        .filter(|st| st["scenario"] == "member" && st["step"] == "reply")
        .map(|st| st["requests"].as_i64().unwrap())
        .sum();
    assert_eq!(reply["requests"].as_i64().unwrap(), summed, "{reply}");
    assert_eq!(reply["trials"], 2, "{reply}");
    assert_eq!(reply["failures"], 0, "{reply}");
    assert!(reply["p50_us"].as_f64().unwrap() > 0.0, "{reply}");
    let text = crate::support::rubyrace(&["report", &path_str(&lab.results())]);
    assert_eq!(text.code(), Some(0), "{text:?}");
    assert!(text.stdout.contains("Scenario steps"), "{}", text.stdout);
    let row = text
        .stdout
        .lines()
        .find(|l| l.contains("member") && l.contains("reply"))
        .unwrap_or_else(|| panic!("no member/reply row: {}", text.stdout));
    assert!(row.contains(&summed.to_string()), "{row}");
}

/// `lifetime = "trial"` for PostgreSQL: a new server per trial, set up from scratch (the
/// setup runs in every trial), removed after it; the writes of one trial are not in the
/// next.
#[test]
fn a_postgres_per_trial_is_set_up_afresh_and_removed() {
    let lab = Lab::new("services-pg-trial");
    lab.experiment(&experiment(
        2,
        "1s",
        "[services.postgres]\nlifetime = \"trial\"\n\n[services.redis]\n",
    ));
    let run = lab.spawn_marked_run(&[]).wait(Duration::from_secs(240));
    assert_eq!(run.code(), Some(0), "{run:?}");
    lab.assert_no_leftovers(Duration::from_secs(10));
    assert_no_service_data(&lab.results());

    let export = export(&lab);
    let trials = export["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 4);
    let mut data_dirs = Vec::new();
    for t in trials {
        assert_eq!(t["status"], "valid", "{t}");
        let s = &t["services"];
        assert_eq!(s["rows_at_start"]["hits"], 3, "{s}");
        assert!(s["rows_at_end"]["hits"].as_i64().unwrap() > 3, "{s}");
        let pg = &s["instances"]["postgres"];
        assert_removed(pg);
        assert_eq!(
            s["instances"]["stopped"]["postgres"], "exit status 0 (term)",
            "{s}"
        );
        let setup = s["instances"]["setup"].as_array().unwrap();
        assert_eq!(setup.len(), 1, "the setup ran in this trial: {s}");
        assert_eq!(setup[0]["status"], "exit status 0");
        data_dirs.push(pg["data_dir"].as_str().unwrap().to_string());
    }
    data_dirs.sort();
    data_dirs.dedup();
    assert_eq!(data_dirs.len(), 4, "a server per trial: {data_dirs:?}");
    // The run's own services: Redis only.
    let session = &export["sessions_services"][0]["services"];
    assert!(session["postgres"].is_null(), "{session}");
    assert!(session["redis"].is_object(), "{session}");
}
