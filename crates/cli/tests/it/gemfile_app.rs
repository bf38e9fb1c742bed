//! A real app with a Gemfile and a Gemfile.lock, as a user brings one: `rails new
//! --minimal --database=postgresql` from Debian's railties (6.1), its Gemfile reduced to
//! the gems Debian installs (railties and activerecord instead of the `rails` metagem, which
//! Debian does not install; no byebug, listen or sass-rails) and locked offline with
//! `bundle lock --local`; one route that queries PostgreSQL ([services.postgres]). The real
//! binary runs it through `bundle exec`:
//! - the JIT chosen is in force in every server process, although Debian's puma executable
//!   is exec'd by `bundle exec` as a new Ruby (issue 46, item 18);
//! - a Gemfile without puma is an error before the run that names the Gemfile, the gem and
//!   the way out, and `rubyrace gemfile` adds puma without editing the app (item 19).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::support::lab::{trials, Lab};
use crate::support::{path_str, rubyrace};

/// `rails new` in `dir`, its Gemfile made installable from Debian's gems (with puma or
/// without), a route that asks PostgreSQL, locked with `bundle lock --local`. Returns the
/// app's directory.
pub(crate) fn rails_new_app(dir: &Path, with_puma: bool) -> PathBuf {
    let app = dir.join("shop");
    let out = Command::new("rails")
        .args([
            "new",
            &path_str(&app),
            "--minimal",
            "--database=postgresql",
            "--skip-bundle",
            "--skip-git",
            "--skip-sprockets",
            "--skip-test",
            "--skip-bootsnap",
        ])
        .output()
        .expect("rails (ruby-railties, scripts/setup) runs");
    assert!(out.status.success(), "rails new: {out:?}");
    // Debian installs railties and activerecord, not the `rails` metagem; the development
    // and test groups' gems (byebug, listen) are not installed.
    let gemfile = std::fs::read_to_string(app.join("Gemfile")).unwrap();
    let mut kept = Vec::new();
    let mut in_group = false;
    for line in gemfile.lines() {
        if line.starts_with("group ") {
            in_group = true;
        } else if in_group {
            in_group = line != "end";
        } else if line.starts_with("gem 'rails'") {
            kept.push("gem 'railties', '~> 6.1.7'".to_string());
            kept.push("gem 'activerecord', '~> 6.1.7'".to_string());
        } else if with_puma || !line.starts_with("gem 'puma'") {
            kept.push(line.to_string());
        }
    }
    let gemfile = kept.join("\n") + "\n";
    assert!(gemfile.contains("gem 'pg'"), "{gemfile}");
    assert_eq!(gemfile.contains("gem 'puma'"), with_puma, "{gemfile}");
    std::fs::write(app.join("Gemfile"), gemfile).unwrap();
    std::fs::write(
        app.join("config/routes.rb"),
        "Rails.application.routes.draw do\n  root \"hello#index\"\nend\n",
    )
    .unwrap();
    std::fs::write(
        app.join("app/controllers/hello_controller.rb"),
        "class HelloController < ApplicationController\n  def index\n    render plain: \"hello #{ActiveRecord::Base.connection.select_value('SELECT 1')}\"\n  end\nend\n",
    )
    .unwrap();
    // Production needs a secret_key_base; the app keeps it in config/secrets.yml.
    std::fs::write(
        app.join("config/secrets.yml"),
        format!("production:\n  secret_key_base: {}\n", "5e".repeat(64)),
    )
    .unwrap();
    bundle_lock(&app.join("Gemfile"));
    app
}

/// `ruby -S bundle lock --local` for a Gemfile: resolved from the installed gems only.
fn bundle_lock(gemfile: &Path) {
    let out = Command::new("ruby")
        .args(["-S", "bundle", "lock", "--local"])
        .env("BUNDLE_GEMFILE", gemfile)
        .current_dir(gemfile.parent().unwrap())
        .output()
        .unwrap();
    assert!(out.status.success(), "bundle lock --local: {out:?}");
}

/// The experiment: the app on Puma with PostgreSQL, `jit` in `[matrix]`.
fn experiment(app: &Path, jits: &str, extra_settings: &str) -> String {
    format!(
        r#"
batches = 1

[settings]
app = "{}"
processes = 2
threads = 2
warmup = "1s"
duration = "1s"
readiness_timeout = "90s"
{extra_settings}

[matrix]
jit = [{jits}]

[services.postgres]
settings = {{ fsync = "off" }}
"#,
        app.display()
    )
}

/// Every trial is valid with its JIT verified: on in every process the probe saw, through
/// `bundle exec puma` with the app's bundle (railties 6.1 and pg loaded).
fn assert_jit_in_force_through_bundle_exec(lab: &Lab, trials_expected: usize) {
    let rows = trials(&lab.db());
    assert_eq!(rows.len(), trials_expected);
    for row in &rows {
        assert_eq!(row.status, "valid", "{}: {:?}", row.label, row.reason);
        let r = &row.result;
        let jit = r["settings"]["jit"].as_str().unwrap();
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
        let flag = if jit == "yjit" { "--yjit" } else { "--mjit" };
        let rubyopt = r["server"]["env"]["RUBYOPT"].as_str().unwrap();
        assert!(
            rubyopt.split(' ').any(|o| o == flag),
            "{flag} not in RUBYOPT {rubyopt}"
        );
        let checks = r["verification"]["checks"].as_array().unwrap();
        let check = checks.iter().find(|c| c["setting"] == "jit").unwrap();
        assert_eq!(check["ok"], true, "{check}");
        let processes = r["probe"]["processes"].as_array().unwrap();
        assert_eq!(processes.len(), 3, "{}", r["probe"]);
        for p in processes {
            assert_eq!(p["jit"][jit], true, "{jit}: {p}");
        }
        let gems = &r["probe"]["gems"];
        assert!(
            gems["railties"].as_str().unwrap().starts_with("6.1."),
            "{gems}"
        );
        assert!(gems["pg"].is_string() && gems["puma"].is_string(), "{gems}");
        assert!(r["load"]["requests"].as_u64().unwrap() > 0, "{r}");
    }
}

#[test]
fn a_jit_is_in_force_through_bundle_exec_in_a_rails_app_with_a_gemfile() {
    let lab = Lab::new_short("gemfile-jit");
    let app = rails_new_app(&lab.dir.path(""), true);
    lab.experiment(&experiment(&app, "\"yjit\", \"mjit\"", ""));
    let run = lab.spawn_marked_run(&[]).wait(Duration::from_secs(300));
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert_jit_in_force_through_bundle_exec(&lab, 2);
    lab.assert_no_leftovers(Duration::from_secs(10));

    // A RUBYOPT of the configuration's that turns YJIT off again reaches only the Ruby that
    // `bundle exec` starts anew (the command line's --yjit wins in the first): the check
    // before the run asks that Ruby, and refuses.
    std::fs::remove_dir_all(lab.results()).unwrap();
    lab.experiment(&format!(
        "[settings]\napp = \"{}\"\n\n[[configs]]\njit = \"yjit\"\nenv = {{ RUBYOPT = \"--disable=yjit\" }}\n",
        app.display()
    ));
    let run = lab.run(&["--dry-run"], Duration::from_secs(120));
    assert_eq!(run.code(), Some(2), "{run:?}");
    assert!(
        run.stderr.contains(&format!(
            "configs[0].jit: jit = \"yjit\" is not in force in the Ruby that runs puma under `bundle exec` with {}: no JIT on in `",
            app.join("Gemfile").display()
        )),
        "{}",
        run.stderr
    );
}

#[test]
fn a_server_outside_the_apps_bundle_is_an_error_before_the_run_and_rubyrace_gemfile_adds_it() {
    let lab = Lab::new_short("gemfile-server");
    let app = rails_new_app(&lab.dir.path(""), false);
    let app_gemfile = app.join("Gemfile");
    lab.experiment(&experiment(&app, "\"yjit\"", ""));
    let run = lab.run(&["--dry-run"], Duration::from_secs(120));
    assert_eq!(run.code(), Some(2), "{run:?}");
    let stderr = &run.stderr;
    assert!(
        stderr.contains(&format!(
            "settings.app: the server puma (gem \"puma\") does not start under the bundle of {} for Ruby \"system\": `",
            app_gemfile.display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("puma is not currently included in the bundle"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "help: if puma is not in the app's bundle, add it without editing the app: `rubyrace gemfile {} --server puma`",
            app.display()
        )),
        "{stderr}"
    );
    // The app's own Gemfile.local convention is named where the app has one.
    assert!(!stderr.contains("Gemfile.local"), "{stderr}");
    let with_local = std::fs::read_to_string(&app_gemfile).unwrap()
        + "eval_gemfile \"Gemfile.local\" if File.exist?(File.join(__dir__, \"Gemfile.local\"))\n";
    std::fs::write(&app_gemfile, &with_local).unwrap();
    let run = lab.run(&["--dry-run"], Duration::from_secs(120));
    assert_eq!(run.code(), Some(2), "{run:?}");
    assert!(
        run.stderr.contains(&format!(
            "or, as this app's Gemfile loads Gemfile.local, add gem \"puma\" to {}",
            app.join("Gemfile.local").display()
        )),
        "{}",
        run.stderr
    );
    assert!(!lab.results().exists());

    // `rubyrace gemfile` writes the experiment's Gemfile; the app is not touched.
    let app_lock = std::fs::read_to_string(app.join("Gemfile.lock")).unwrap();
    let ours = lab.dir.path("Gemfile.rubyrace");
    let written = rubyrace(&[
        "gemfile",
        &path_str(&app),
        "--server",
        "puma",
        "-o",
        &path_str(&ours),
    ]);
    assert_eq!(written.code(), Some(0), "{written:?}");
    let text = std::fs::read_to_string(&ours).unwrap();
    assert!(
        text.ends_with(&format!(
            "eval_gemfile {:?}\ngem \"puma\"\n",
            path_str(&app_gemfile.canonicalize().unwrap())
        )),
        "{text}"
    );
    // Its lock starts from the app's, so the app's versions are kept.
    assert_eq!(
        std::fs::read_to_string(lab.dir.path("Gemfile.rubyrace.lock")).unwrap(),
        app_lock
    );
    let again = rubyrace(&["gemfile", &path_str(&app), "-o", &path_str(&ours)]);
    assert_eq!(again.code(), Some(2), "{again:?}");
    assert!(again.stderr.contains("exists"), "{again:?}");
    bundle_lock(&ours);
    assert_eq!(std::fs::read_to_string(&app_gemfile).unwrap(), with_local);
    assert_eq!(
        std::fs::read_to_string(app.join("Gemfile.lock")).unwrap(),
        app_lock
    );

    lab.experiment(&experiment(
        &app,
        "\"yjit\"",
        &format!("gemfile = \"{}\"", ours.display()),
    ));
    let run = lab.spawn_marked_run(&[]).wait(Duration::from_secs(300));
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert_jit_in_force_through_bundle_exec(&lab, 1);
    let rows = trials(&lab.db());
    assert_eq!(
        rows[0].result["settings"]["gemfile"],
        path_str(&ours).as_str()
    );
    lab.assert_no_leftovers(Duration::from_secs(10));
}
