//! rubyrace installed the way Ruby teams install tools (docs/install.md): the platform gem
//! `scripts/gem` builds (here from the binary under test), installed into an empty
//! GEM_HOME, run from a directory outside the repository, directly and through a Gemfile
//! with `bundle exec`, then uninstalled without a trace.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::{workspace_root, TempDir};

/// Runs `program args` in `cwd` with gems installed into `gem_home` (`GEM_HOME`) and found
/// there first, then where this machine's Ruby finds them (Debian's puma and rails: the
/// demo's servers), for at most five minutes (coreutils' `timeout`: a hang fails the
/// test, not CI).
fn run_in(cwd: &Path, gem_home: &Path, program: &Path, args: &[&str]) -> Output {
    let system = Command::new("ruby")
        .args(["-e", "print Gem.path.join(':')"])
        .env_remove("GEM_HOME")
        .env_remove("GEM_PATH")
        .output()
        .unwrap();
    let gem_path = format!(
        "{}:{}",
        gem_home.display(),
        String::from_utf8_lossy(&system.stdout)
    );
    Command::new("timeout")
        .arg("300")
        .arg(program)
        .args(args)
        .current_dir(cwd)
        .env("GEM_HOME", gem_home)
        .env("GEM_PATH", gem_path)
        .env_remove("BUNDLE_GEMFILE")
        .env_remove("RUBYOPT")
        .output()
        .unwrap()
}

fn succeeded(what: &str, out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what}: {:?}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Every path under `dir` whose name holds `rubyrace`.
fn named_rubyrace(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut walk = vec![dir.to_path_buf()];
    while let Some(d) = walk.pop() {
        for path in std::fs::read_dir(&d).unwrap().flatten().map(|e| e.path()) {
            if path
                .file_name()
                .unwrap()
                .to_string_lossy()
                .contains("rubyrace")
            {
                found.push(path.clone());
            }
            if path.is_dir() && !path.is_symlink() {
                walk.push(path);
            }
        }
    }
    found
}

#[test]
fn the_gem_installs_runs_the_demo_anywhere_and_uninstalls_cleanly() {
    let root = workspace_root();
    let scratch = TempDir::new("gem");
    let pkg = scratch.path("pkg");
    let gem_home = scratch.path("gem-home");
    let built = Command::new(root.join("scripts/gem"))
        .env("RUBYRACE_BINARY", env!("CARGO_BIN_EXE_rubyrace"))
        .env("OUT", &pkg)
        .output()
        .unwrap();
    let gem_file = PathBuf::from(succeeded("scripts/gem", &built).trim());
    let platform = format!("{}-linux", std::env::consts::ARCH);
    assert_eq!(
        gem_file,
        pkg.join(format!(
            "rubyrace-{}-{platform}.gem",
            env!("CARGO_PKG_VERSION")
        ))
    );
    // RubyGems' conventions, as `gem specification` reads them from the file.
    let spec = Command::new("gem")
        .args(["specification", "--ruby"])
        .arg(&gem_file)
        .output()
        .unwrap();
    let spec = succeeded("gem specification", &spec);
    for field in [
        "s.name = \"rubyrace\".freeze".to_string(),
        format!("s.platform = \"{platform}\".freeze"),
        "s.licenses = [\"MIT\".freeze, \"Apache-2.0\".freeze]".to_string(),
        "s.required_ruby_version = Gem::Requirement.new(\">= 2.7\".freeze)".to_string(),
        "s.executables = [\"rubyrace\".freeze]".to_string(),
        "s.summary = \"A benchmarking lab for Ruby web stacks\".freeze".to_string(),
    ] {
        assert!(spec.contains(&field), "`{field}` in:\n{spec}");
    }

    std::fs::create_dir_all(&gem_home).unwrap();
    let gem = PathBuf::from("gem");
    let install = run_in(
        &scratch.path(""),
        &gem_home,
        &gem,
        &[
            "install",
            "--local",
            "--no-document",
            gem_file.to_str().unwrap(),
        ],
    );
    succeeded("gem install", &install);
    let installed = gem_home.join("bin/rubyrace");
    let elsewhere = scratch.path("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let version = run_in(&elsewhere, &gem_home, &installed, &["--version"]);
    let ours = Command::new(env!("CARGO_BIN_EXE_rubyrace"))
        .arg("--version")
        .output()
        .unwrap();
    assert_eq!(
        succeeded("the gem's rubyrace --version", &version),
        succeeded("rubyrace --version", &ours)
    );

    // The demo's smoke from a directory outside the repository, on the gem's own copy of
    // the bundled apps (not the source tree's, which the binary would find last).
    let demo = run_in(&elsewhere, &gem_home, &installed, &["demo", "--smoke"]);
    let said = succeeded("the gem's rubyrace demo --smoke", &demo);
    assert!(
        said.contains("demo: HTML report: results/demo-smoke-"),
        "{said}"
    );
    let results = std::fs::read_dir(elsewhere.join("results"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .expect("the demo's results directory");
    assert!(results.join("report.html").is_file());
    let export = run_in(
        &elsewhere,
        &gem_home,
        &installed,
        &["export", results.to_str().unwrap(), "--json"],
    );
    let export: Value = serde_json::from_str(&succeeded("export", &export)).unwrap();
    let app_dir = export["trials"][0]["settings"]["app_dir"].as_str().unwrap();
    let gems_apps = gem_home.join(format!(
        "gems/rubyrace-{}-{platform}/share/rubyrace/ruby/apps/rails-hello",
        env!("CARGO_PKG_VERSION")
    ));
    assert_eq!(Path::new(app_dir), gems_apps, "the app the demo ran");

    // From a Gemfile: `bundle exec rubyrace` runs the gem, and the apps rubyrace starts do
    // not inherit the caller's bundle (a script trial records RUBYOPT and BUNDLE_GEMFILE).
    let app = scratch.path("app");
    std::fs::create_dir_all(&app).unwrap();
    std::fs::write(
        app.join("Gemfile"),
        "source \"https://rubygems.org\"\ngem \"rubyrace\"\n",
    )
    .unwrap();
    let bundle = PathBuf::from("bundle");
    succeeded(
        "bundle install --local",
        &run_in(&app, &gem_home, &bundle, &["install", "--local"]),
    );
    std::fs::write(
        app.join("env.rb"),
        "File.write(File.join(__dir__, \"seen.txt\"), [ENV[\"RUBYOPT\"].to_s, ENV[\"BUNDLE_GEMFILE\"].to_s].join(\"|\"))\n",
    )
    .unwrap();
    std::fs::write(
        app.join("env.toml"),
        "name = \"env\"\nbatches = 1\n[settings]\nworkload = \"script\"\nscript = \"env.rb\"\nruns = 1\n",
    )
    .unwrap();
    let bundled = run_in(
        &app,
        &gem_home,
        &bundle,
        &["exec", "rubyrace", "run", "env.toml", "-o", "env-results"],
    );
    succeeded("bundle exec rubyrace run", &bundled);
    let seen = std::fs::read_to_string(app.join("seen.txt")).unwrap();
    assert!(
        !seen.contains("bundler/setup") && !seen.contains("Gemfile"),
        "the script saw the caller's bundle: {seen}"
    );

    let uninstall = run_in(
        &scratch.path(""),
        &gem_home,
        &gem,
        &["uninstall", "rubyrace", "--executables", "--all"],
    );
    succeeded("gem uninstall", &uninstall);
    assert_eq!(named_rubyrace(&gem_home), Vec::<PathBuf>::new());
}
