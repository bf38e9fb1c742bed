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

/// The Debian package `scripts/deb` builds (here from the binary under test): its control
/// fields, the files it holds, and, unpacked into a directory, a binary that runs, finds
/// its Ruby side beside itself, and man pages and completions that load. Installing it
/// into a fresh Debian root and removing it again is `make check-deb` (minutes, and the
/// Debian mirror: outside `make test`).
#[test]
fn the_deb_holds_the_binary_its_ruby_side_man_pages_and_completions() {
    let root = workspace_root();
    let scratch = TempDir::new("deb");
    let pkg = scratch.path("pkg");
    let built = Command::new(root.join("scripts/deb"))
        .env("RUBYRACE_BINARY", env!("CARGO_BIN_EXE_rubyrace"))
        .env("OUT", &pkg)
        .output()
        .unwrap();
    let deb = PathBuf::from(succeeded("scripts/deb", &built).trim());
    let field = |name: &str| {
        let out = Command::new("dpkg-deb")
            .arg("-f")
            .arg(&deb)
            .arg(name)
            .output()
            .unwrap();
        succeeded("dpkg-deb -f", &out).trim().to_string()
    };
    assert_eq!(field("Package"), "rubyrace");
    assert_eq!(field("Version"), env!("CARGO_PKG_VERSION"));
    let depends = field("Depends");
    for needed in ["libc6 (>= 2.", "ruby", "puma"] {
        assert!(depends.contains(needed), "Depends: {depends}");
    }
    for recommended in ["ruby-railties", "libjemalloc2", "linux-perf"] {
        assert!(field("Recommends").contains(recommended));
    }
    assert!(field("Suggests").contains("slurm-wlm"));

    let unpacked = scratch.path("root");
    succeeded(
        "dpkg-deb -x",
        &Command::new("dpkg-deb")
            .arg("-x")
            .arg(&deb)
            .arg(&unpacked)
            .output()
            .unwrap(),
    );
    for file in [
        "usr/bin/rubyrace",
        "usr/share/rubyrace/ruby/probe.rb",
        "usr/share/rubyrace/ruby/apps/rails-hello/config.ru",
        "usr/share/man/man1/rubyrace.1.gz",
        "usr/share/man/man1/rubyrace-run.1.gz",
        "usr/share/man/man1/rubyrace-check.1.gz",
        "usr/share/bash-completion/completions/rubyrace",
        "usr/share/zsh/vendor-completions/_rubyrace",
        "usr/share/fish/vendor_completions.d/rubyrace.fish",
        "usr/share/doc/rubyrace/copyright",
        "usr/share/doc/rubyrace/changelog.gz",
    ] {
        assert!(
            unpacked.join(file).is_file(),
            "{file} is not in the package"
        );
    }
    // No page for a hidden command (the fleet's tasks, `man` itself).
    assert!(!unpacked
        .join("usr/share/man/man1/rubyrace-man.1.gz")
        .exists());
    let binary = unpacked.join("usr/bin/rubyrace");
    let version = Command::new(&binary).arg("--version").output().unwrap();
    let ours = Command::new(env!("CARGO_BIN_EXE_rubyrace"))
        .arg("--version")
        .output()
        .unwrap();
    assert_eq!(
        succeeded("the package's rubyrace --version", &version),
        succeeded("rubyrace --version", &ours)
    );
    // The plan of a bundled app names the package's copy of it.
    std::fs::write(
        scratch.path("exp.toml"),
        "name = \"deb\"\n[settings]\napp = \"rack-hello\"\n",
    )
    .unwrap();
    let plan = Command::new(&binary)
        .args(["run", "exp.toml", "--dry-run", "--json"])
        .current_dir(scratch.path(""))
        .output()
        .unwrap();
    let plan: Value = serde_json::from_str(&succeeded("run --dry-run --json", &plan)).unwrap();
    let app_dir = plan["trials"][0]["settings"]["app_dir"].as_str().unwrap();
    assert_eq!(
        Path::new(app_dir),
        unpacked.join("usr/share/rubyrace/ruby/apps/rack-hello")
    );
    // The man page renders, and bash loads the completion.
    let page = Command::new("sh")
        .arg("-c")
        .arg("zcat \"$1\" | head -20")
        .arg("sh")
        .arg(unpacked.join("usr/share/man/man1/rubyrace-run.1.gz"))
        .output()
        .unwrap();
    let page = succeeded("zcat", &page);
    assert!(page.contains(".TH rubyrace-run 1"), "{page}");
    // Its synopsis is the command as typed.
    assert!(page.contains("\\fBrubyrace run\\fR"), "{page}");
    let completion = Command::new("bash")
        .arg("-c")
        .arg("source \"$1\" && complete -p rubyrace")
        .arg("bash")
        .arg(unpacked.join("usr/share/bash-completion/completions/rubyrace"))
        .output()
        .unwrap();
    assert!(succeeded("bash completion", &completion).contains("rubyrace"));
}
