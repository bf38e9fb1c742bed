//! The tests of discovery: fake trees of version managers, hanging and noisy
//! interpreters, resolution of what a user typed, naming and ordering.

use std::cmp::Ordering;
use std::collections::HashSet;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use sys::process::is_executable_file;

use super::candidates::{is_ruby_name, natural_cmp, Candidate, Origin};
use super::process::tail_output;
use super::query::{query, query_script, Answer, MARKER};
use super::resolve::resolve_in;
use super::{
    discover, discover_in, engine_name, find, manager_label, name_all, resolve_executable,
    ruby_description, ManagerDir, SearchRoots,
};

const SYSTEM_RUBY: &str = "/usr/bin/ruby";

/// Debian's Ruby is a prerequisite (scripts/setup installs it): its absence fails the
/// tests rather than letting them pass without checking anything.
fn require_system_ruby() {
    assert!(
        is_executable_file(Path::new(SYSTEM_RUBY)),
        "{SYSTEM_RUBY} is not installed: run scripts/setup"
    );
}

fn write_script(path: &Path, body: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn symlink(target: &Path, link: &Path) {
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(target, link).unwrap();
}

#[test]
fn discover_finds_the_system_ruby() {
    require_system_ruby();
    let rubies = discover();
    eprintln!("discovered: {rubies:#?}");
    let canonical = std::fs::canonicalize(SYSTEM_RUBY).unwrap();
    let found = rubies
        .iter()
        .find(|r| r.path == canonical)
        .unwrap_or_else(|| panic!("{} not among {rubies:#?}", canonical.display()));
    let description = found.description.as_deref().unwrap();
    assert!(description.starts_with("ruby 3."), "{description}");
    assert!(found.version.as_deref().unwrap().starts_with("3."));
    assert!(found.error.is_none());
    let names: HashSet<&str> = rubies.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names.len(), rubies.len(), "names are unique: {rubies:#?}");
    let paths: HashSet<&PathBuf> = rubies.iter().map(|r| &r.path).collect();
    assert_eq!(paths.len(), rubies.len(), "paths are unique: {rubies:#?}");
}

#[test]
fn discover_in_a_fake_tree_of_version_managers() {
    require_system_ruby();
    let tmp = tempfile::Builder::new().prefix("tree").tempdir().unwrap();
    let root = tmp.path();
    let forward = format!("exec {SYSTEM_RUBY} \"$@\"");
    // rbenv: a working 3.1.2, an alias symlink to it, a broken 9.9.9, a dir without bin/ruby.
    write_script(&root.join("rbenv/versions/3.1.2/bin/ruby"), &forward);
    symlink(Path::new("3.1.2"), &root.join("rbenv/versions/3.1"));
    write_script(
        &root.join("rbenv/versions/9.9.9/bin/ruby"),
        "echo 'ruby: boom, cannot load libruby.so' >&2\nexit 1",
    );
    std::fs::create_dir_all(root.join("rbenv/versions/empty")).unwrap();
    // chruby: a symlink to the system ruby (canonicalized, so PATH's copy is a duplicate).
    symlink(
        Path::new(SYSTEM_RUBY),
        &root.join("rubies/ruby-3.1.2/bin/ruby"),
    );
    // PATH: a shims dir (skipped), and a bin dir with a `ruby`, a duplicate, non-Rubies.
    write_script(&root.join("shims/ruby"), "exit 3");
    write_script(&root.join("bin/ruby"), &forward);
    symlink(Path::new(SYSTEM_RUBY), &root.join("bin/ruby3.1"));
    write_script(&root.join("bin/ruby-build"), "exit 0");
    write_script(&root.join("bin/rubocop"), "exit 0");
    std::fs::write(root.join("bin/ruby9.9"), "not executable").unwrap();

    let roots = SearchRoots {
        managers: vec![
            ManagerDir::new("rbenv", root.join("rbenv/versions")),
            ManagerDir::new("chruby", root.join("rubies")),
            ManagerDir::new("asdf", root.join("does-not-exist")),
        ],
        path_dirs: vec![root.join("shims"), root.join("bin")],
        system_dirs: vec![],
    };
    let rubies = discover_in(&roots);
    let summary: Vec<(&str, &str)> = rubies
        .iter()
        .map(|r| (r.name.as_str(), r.source.as_str()))
        .collect();
    assert_eq!(
        summary,
        [
            ("rbenv-3.1.2", "rbenv"),
            ("rbenv-9.9.9", "rbenv"),
            ("chruby-3.1.2", "chruby"),
            ("system", "PATH")
        ],
        "{rubies:#?}"
    );

    let good = &rubies[0];
    assert_eq!(
        good.path,
        std::fs::canonicalize(root.join("rbenv/versions/3.1.2/bin/ruby")).unwrap()
    );
    assert!(
        good.description.as_deref().unwrap().starts_with("ruby 3."),
        "{good:?}"
    );
    assert!(good.version.as_deref().unwrap().starts_with("3."));
    assert_eq!(good.error, None);

    let broken = &rubies[1];
    assert_eq!(broken.description, None);
    assert_eq!(broken.version, None);
    let error = broken.error.as_deref().unwrap();
    assert!(
        error.contains("failed (exit status 1)") && error.contains("boom"),
        "{error}"
    );
    assert!(error.contains("9.9.9/bin/ruby"), "names the argv: {error}");

    assert_eq!(rubies[2].path, std::fs::canonicalize(SYSTEM_RUBY).unwrap());
    assert!(rubies[2].description.is_some());
    assert_eq!(
        rubies[3].path,
        std::fs::canonicalize(root.join("bin/ruby")).unwrap()
    );

    // Lookup by name, by unique version, and the error for a typo.
    assert_eq!(find(&rubies, "system").unwrap().source, "PATH");
    let err = find(&rubies, "rbenv-3.1.3").unwrap_err().to_string();
    assert!(err.contains("did you mean `rbenv-3.1.2`"), "{err}");
    let version = good.version.clone().unwrap();
    let err = find(&rubies, &version).unwrap_err().to_string();
    assert!(err.contains("several Rubies have version"), "{err}");
}

#[test]
fn a_ruby_that_hangs_is_killed_at_the_timeout() {
    let tmp = tempfile::Builder::new().prefix("hang").tempdir().unwrap();
    let exe = tmp.path().join("ruby");
    // `sleep` is a grandchild holding the pipes: the whole group must go.
    write_script(&exe, "sleep 30 &\nsleep 30");
    let started = Instant::now();
    let err = query(
        &[exe.clone().into(), "-e".into(), query_script().into()],
        &[],
        &[],
        Duration::from_millis(300),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("did not answer within 0.3 s"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn a_leftover_grandchild_holding_the_pipes_is_killed() {
    let tmp = tempfile::Builder::new()
        .prefix("leftover")
        .tempdir()
        .unwrap();
    let exe = tmp.path().join("ruby");
    write_script(
        &exe,
        &format!("sleep 30 &\nprintf '{MARKER}\\nfake 1.0\\n1.0\\n'"),
    );
    let started = Instant::now();
    let answer = query(&[exe.into_os_string()], &[], &[], Duration::from_secs(20)).unwrap();
    assert_eq!(
        answer,
        Answer {
            description: "fake 1.0".into(),
            version: "1.0".into()
        }
    );
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn ruby_description_reflects_options_and_ignores_noise() {
    require_system_ruby();
    let argv = |args: &[&str]| args.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let plain = ruby_description(&argv(&[SYSTEM_RUBY]), &[]).unwrap();
    assert!(plain.starts_with("ruby 3."), "{plain}");

    // Warnings on stderr and stray stdout before the answer do not matter.
    let noisy = ruby_description(
        &argv(&[
            SYSTEM_RUBY,
            "-W2",
            "-e",
            r#"warn "warning: noise"; puts "stdout noise""#,
        ]),
        &[("RUBY_TEST_NOISE".into(), "1".into())],
    )
    .unwrap();
    assert_eq!(noisy, plain);

    // Options show in the description when the build supports them.
    let yjit = ruby_description(&argv(&[SYSTEM_RUBY, "--yjit"]), &[]);
    if let Ok(yjit) = yjit {
        assert!(yjit.contains("+YJIT"), "{yjit}");
        let via_env = ruby_description(
            &argv(&[SYSTEM_RUBY]),
            &[("RUBYOPT".into(), "--yjit".into())],
        )
        .unwrap();
        assert!(via_env.contains("+YJIT"), "{via_env}");
    }

    let err = format!(
        "{:#}",
        ruby_description(&argv(&[SYSTEM_RUBY, "--no-such-option"]), &[]).unwrap_err()
    );
    assert!(
        err.contains(SYSTEM_RUBY) && err.contains("--no-such-option"),
        "{err}"
    );
    assert!(err.contains("failed (exit status 1)"), "{err}");
    assert!(err.contains("invalid option"), "stderr tail: {err}");

    let err = format!(
        "{:#}",
        ruby_description(&argv(&["/nonexistent/ruby"]), &[]).unwrap_err()
    );
    assert!(
        err.contains("could not run `/nonexistent/ruby") && err.contains("No such file"),
        "{err}"
    );
    assert!(ruby_description(&[], &[]).is_err());
}

#[test]
fn resolve_executable_handles_names_paths_and_home() {
    let tmp = tempfile::Builder::new()
        .prefix("resolve")
        .tempdir()
        .unwrap();
    let bin = tmp.path().join("bin");
    write_script(&bin.join("ruby"), "exit 0");
    std::fs::write(bin.join("notexec"), "").unwrap();
    let path_var =
        std::env::join_paths([Path::new("relative/dir"), &tmp.path().join("empty"), &bin]).unwrap();
    let home = tmp.path();
    let cwd = tmp.path();

    assert_eq!(
        resolve_in("ruby", Some(&path_var), Some(home), cwd).unwrap(),
        bin.join("ruby")
    );
    assert_eq!(
        resolve_in("~/bin/ruby", None, Some(home), Path::new("/")).unwrap(),
        bin.join("ruby")
    );
    assert_eq!(
        resolve_in("./bin/ruby", None, None, cwd).unwrap(),
        cwd.join("./bin/ruby")
    );
    assert_eq!(
        resolve_in(&bin.join("ruby").to_string_lossy(), None, None, cwd).unwrap(),
        bin.join("ruby")
    );

    let err = resolve_in("ruby9", Some(&path_var), Some(home), cwd)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`ruby9` was not found on PATH") && err.contains(&bin.display().to_string()),
        "{err}"
    );
    let err = resolve_in("notexec", Some(&path_var), Some(home), cwd)
        .unwrap_err()
        .to_string();
    assert!(err.contains("exists but is not executable"), "{err}");
    let err = resolve_in("./bin/notexec", None, None, cwd)
        .unwrap_err()
        .to_string();
    assert!(err.contains("is not executable"), "{err}");
    let err = resolve_in("./bin", None, None, cwd)
        .unwrap_err()
        .to_string();
    assert!(err.contains("is a directory"), "{err}");
    let err = resolve_in("/nonexistent/ruby", None, None, cwd)
        .unwrap_err()
        .to_string();
    assert!(err.contains("not found"), "{err}");
    assert!(resolve_in("~/bin/ruby", None, None, cwd)
        .unwrap_err()
        .to_string()
        .contains("$HOME"));
    assert!(resolve_in("~bob/ruby", None, Some(home), cwd).is_err());
    assert!(resolve_in("", None, None, cwd).is_err());

    require_system_ruby();
    {
        let found = resolve_executable("ruby").unwrap();
        assert!(is_executable_file(&found), "{}", found.display());
        assert_eq!(
            resolve_executable(SYSTEM_RUBY).unwrap(),
            PathBuf::from(SYSTEM_RUBY)
        );
    }
}

#[test]
fn search_roots_follow_the_environment() {
    let vars = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    };
    let roots = SearchRoots::from_vars(vars(&[
        ("HOME", "/home/u"),
        ("PATH", "/a/bin:relative:/home/u/.rbenv/shims"),
    ]));
    let dirs: Vec<(&str, &Path)> = roots
        .managers
        .iter()
        .map(|m| (m.source.as_str(), m.dir.as_path()))
        .collect();
    assert_eq!(
        dirs,
        [
            ("rbenv", Path::new("/home/u/.rbenv/versions")),
            ("rvm", Path::new("/home/u/.rvm/rubies")),
            ("rvm", Path::new("/usr/local/rvm/rubies")),
            ("chruby", Path::new("/opt/rubies")),
            ("chruby", Path::new("/home/u/.rubies")),
            ("asdf", Path::new("/home/u/.asdf/installs/ruby")),
            ("mise", Path::new("/home/u/.local/share/mise/installs/ruby")),
            ("rubyrace", Path::new("/home/u/.cache/rubyrace/rubies")),
        ]
    );
    assert_eq!(
        roots.path_dirs,
        [
            PathBuf::from("/a/bin"),
            PathBuf::from("/home/u/.rbenv/shims")
        ]
    );
    assert_eq!(roots.system_dirs, [PathBuf::from("/usr/bin")]);

    let roots = SearchRoots::from_vars(vars(&[
        ("HOME", "/home/u"),
        ("RBENV_ROOT", "/opt/rbenv"),
        ("rvm_path", "/home/u/.rvm"),
        ("ASDF_DATA_DIR", "/data/asdf"),
        ("XDG_DATA_HOME", "/xdg"),
    ]));
    let dir_of = |source: &str| {
        roots
            .managers
            .iter()
            .find(|m| m.source == source)
            .unwrap()
            .dir
            .clone()
    };
    assert_eq!(dir_of("rbenv"), Path::new("/opt/rbenv/versions"));
    assert_eq!(dir_of("asdf"), Path::new("/data/asdf/installs/ruby"));
    assert_eq!(dir_of("mise"), Path::new("/xdg/mise/installs/ruby"));
    assert_eq!(
        roots.managers.iter().filter(|m| m.source == "rvm").count(),
        2,
        "rvm_path == ~/.rvm counted once"
    );
    assert!(roots.path_dirs.is_empty());

    let roots = SearchRoots::from_vars(vars(&[("MISE_DATA_DIR", "/m"), ("XDG_DATA_HOME", "/xdg")]));
    assert_eq!(
        roots
            .managers
            .iter()
            .find(|m| m.source == "mise")
            .unwrap()
            .dir,
        Path::new("/m/installs/ruby")
    );
    assert!(
        roots.managers.iter().all(|m| m.dir.is_absolute()),
        "no HOME, no home-relative dirs"
    );
}

#[test]
fn names_and_orders() {
    assert!(
        is_ruby_name("ruby")
            && is_ruby_name("ruby3.1")
            && is_ruby_name("ruby2.7")
            && is_ruby_name("jruby")
    );
    assert!(is_ruby_name("truffleruby"));
    assert!(
        !is_ruby_name("ruby-build")
            && !is_ruby_name("rubocop")
            && !is_ruby_name("ruby3.1.bak")
            && !is_ruby_name("irb")
    );
    assert!(!is_ruby_name("ruby.") && !is_ruby_name("rubyx"));

    assert_eq!(natural_cmp("3.9.1", "3.10.0"), Ordering::Less);
    assert_eq!(natural_cmp("3.3.0", "3.3.0-preview1"), Ordering::Less);
    assert_eq!(natural_cmp("jruby-9.4.5.0", "3.3.0"), Ordering::Greater);
    let mut v = vec!["3.10.0", "2.7.8", "3.2.2", "jruby-9.4.5.0", "3.9.9"];
    v.sort_by(|a, b| natural_cmp(a, b));
    assert_eq!(v, ["2.7.8", "3.2.2", "3.9.9", "3.10.0", "jruby-9.4.5.0"]);

    assert_eq!(manager_label("ruby-3.3.0"), "3.3.0");
    assert_eq!(manager_label("jruby-9.4.5.0"), "jruby-9.4.5.0");
    assert_eq!(manager_label("ruby-head"), "ruby-head");

    assert_eq!(
        engine_name(
            "ruby 3.1.2p20 (2022-04-12 revision 4491bb740a) [x86_64-linux-gnu]",
            Some("3.1.2")
        )
        .as_deref(),
        Some("3.1.2")
    );
    assert_eq!(
        engine_name("jruby 9.4.5.0 (3.1.4) 2023-11-02 1abae2700f OpenJDK 64-Bit Server VM 17.0.9+9 on 17.0.9+9 +jit [x86_64-linux]", Some("3.1.4")).as_deref(),
        Some("jruby-9.4.5.0")
    );
    assert_eq!(
        engine_name(
            "truffleruby 24.0.0, like ruby 3.2.2, Oracle GraalVM Native [x86_64-linux]",
            Some("3.2.2")
        )
        .as_deref(),
        Some("truffleruby-24.0.0")
    );

    let answer = |d: &str, v: &str| -> anyhow::Result<Answer> {
        Ok(Answer {
            description: d.into(),
            version: v.into(),
        })
    };
    let cand = |source: &str, origin: Origin| Candidate {
        source: source.into(),
        path: PathBuf::from("/x"),
        origin,
    };
    let named = name_all(
        vec![
            cand("rvm", Origin::Manager("ruby-3.3.0".into())),
            cand("PATH", Origin::Loose("ruby".into())),
            cand("PATH", Origin::Loose("ruby".into())),
            cand("PATH", Origin::Loose("ruby3.3".into())),
            cand("PATH", Origin::Loose("jruby".into())),
            cand("system", Origin::Loose("ruby3.4".into())),
        ],
        vec![
            answer("ruby 3.3.0", "3.3.0"),
            answer("ruby 3.2.2", "3.2.2"),
            answer("ruby 3.3.0", "3.3.0"),
            answer("ruby 3.3.0", "3.3.0"),
            answer("jruby 9.4.5.0 (3.1.4)", "3.1.4"),
            Err(anyhow!("broken")),
        ],
    );
    let names: Vec<&str> = named.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "rvm-3.3.0",
            "system",
            "3.3.0",
            "3.3.0-2",
            "jruby-9.4.5.0",
            "ruby3.4"
        ]
    );
    assert_eq!(named[5].error.as_deref(), Some("broken"));
}

#[test]
fn answers_are_found_after_the_marker() {
    assert!(query_script().contains(MARKER));
    let long: Vec<u8> = (0..100)
        .flat_map(|i| format!("line {i}\n").into_bytes())
        .collect();
    let t = tail_output(&long);
    assert!(t.starts_with("line 88") && t.ends_with("line 99"), "{t}");
}
