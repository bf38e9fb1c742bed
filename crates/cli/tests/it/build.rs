//! End-to-end tests of `rubyrace ruby build` and `rubyrace ruby list`: the real binary
//! builds a FAKE Ruby source tree (made here: a `configure` shell script that records its
//! arguments and writes a Makefile whose `install` puts a shell-script `bin/ruby` into
//! the prefix) from a .tar.gz and from a git repository, into a cache in a temporary
//! directory (`RUBYRACE_CACHE`).
//!
//! The fake tree's scripts write what happened under `$FAKE_RECORD` (a directory of the
//! test): `configure.calls` (one line per run), `configure.args` (the last run's
//! arguments, one per line), `make.flags` (MAKEFLAGS of `make`), `autogen.calls`. The
//! fake `ruby` answers the three queries rubyrace makes: `-e 'print RUBY_DESCRIPTION'`,
//! `-rrbconfig -e 'print RbConfig::CONFIG["MAINLIBS"]'` (with `-ljemalloc` only when
//! configure got `--with-jemalloc`) and `--yjit -e 'print RubyVM::YJIT.enabled?'`.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const DEADLINE: Duration = Duration::from_secs(60);

/// A scratch directory under the system's temporary directory (not cargo's target dir,
/// which sits inside this repository: the tests need directories outside any git
/// repository), removed on drop; its path canonical.
struct TempDir {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = tempfile::Builder::new()
            .prefix(&format!("rubyrace-build-test-{name}-"))
            .tempdir()
            .unwrap();
        TempDir {
            path: dir.path().canonicalize().unwrap(),
            _dir: dir,
        }
    }
}

/// The fake `configure`: records its arguments, fails on request, writes the Makefile and
/// the fake interpreter (with answers that depend on the options it got).
const CONFIGURE: &str = r#"#!/bin/sh
echo "configure $$" >> "$FAKE_RECORD/configure.calls"
: > "$FAKE_RECORD/configure.args"
for a in "$@"; do printf '%s\n' "$a" >> "$FAKE_RECORD/configure.args"; done
echo "checking for a fake compiler... yes"
if [ -n "$FAKE_CONFIGURE_FAIL" ]; then
  echo "configure: error: no fake compiler found (on request)" >&2
  exit 1
fi
prefix=/nonexistent
mainlibs="-lz -lm"
yjit=false
for a in "$@"; do
  case "$a" in
    --prefix=*) prefix="${a#--prefix=}" ;;
    --with-jemalloc) mainlibs="$mainlibs -ljemalloc" ;;
    --enable-yjit) yjit=true ;;
  esac
done
[ -n "$FAKE_NO_JEMALLOC" ] && mainlibs="-lz -lm"
[ -n "$FAKE_NO_YJIT" ] && yjit=false
mark=$(cat mark)
cat > fake-ruby <<EOF
#!/bin/sh
case "\$*" in
  *YJIT*) printf '%s' '$yjit' ;;
  *MAINLIBS*) printf '%s' '$mainlibs' ;;
  *RUBY_DESCRIPTION*) printf '%s' 'ruby 3.3.8 fake $mark [x86_64-linux]' ;;
  *) echo "fake ruby: unexpected arguments: \$*" >&2; exit 2 ;;
esac
EOF
tab=$(printf '\t')
cat > Makefile <<EOF
all:
${tab}@echo "compiling nothing"
${tab}@printf '%s\n' "\$(MAKEFLAGS)" > "\$(FAKE_RECORD)/make.flags"
install:
${tab}mkdir -p "$prefix/bin"
${tab}cp fake-ruby "$prefix/bin/ruby"
${tab}chmod 755 "$prefix/bin/ruby"
${tab}if [ -f gems/bundled_gems ]; then cp gems/bundled_gems "$prefix/bundled_gems.seen"; fi
EOF
"#;

/// The autogen.sh of the git tree (which has no `configure`): makes one.
const AUTOGEN: &str = r#"#!/bin/sh
echo autogen >> "$FAKE_RECORD/autogen.calls"
cp tool/configure.sh configure
chmod 755 configure
"#;

const BUNDLED_GEMS: &str = "# gem-name version repository-url [revision]\n#\nminitest        5.20.0  https://github.com/minitest/minitest\nrake            13.1.0  https://github.com/ruby/rake\n";

fn write_exec(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Writes a fake Ruby source tree at `dir`.
fn fake_tree(dir: &Path, mark: &str, with_gem_file: bool) {
    write_exec(&dir.join("configure"), CONFIGURE);
    std::fs::write(dir.join("configure.ac"), "AC_INIT([fake])\n").unwrap();
    std::fs::write(dir.join("mark"), format!("{mark}\n")).unwrap();
    std::fs::create_dir_all(dir.join("gems")).unwrap();
    std::fs::write(dir.join("gems/bundled_gems"), BUNDLED_GEMS).unwrap();
    if with_gem_file {
        std::fs::write(dir.join("gems/rake-13.1.0.gem"), "not really a gem").unwrap();
    }
}

fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Makes `<dir>/<name>.tar.gz` holding the fake tree under `ruby-3.3.8/`.
fn fake_tarball(dir: &Path, name: &str, mark: &str, with_gem_file: bool) -> PathBuf {
    let staging = dir.join(format!("{name}-staging"));
    fake_tree(&staging.join("ruby-3.3.8"), mark, with_gem_file);
    let tarball = dir.join(format!("{name}.tar.gz"));
    run_ok(
        Command::new("tar")
            .arg("-czf")
            .arg(&tarball)
            .arg("-C")
            .arg(&staging)
            .arg("ruby-3.3.8"),
    );
    tarball
}

fn sha256sum(path: &Path) -> String {
    let out = run_ok(Command::new("sha256sum").arg(path));
    out.split_whitespace().next().unwrap().to_string()
}

fn git(dir: &Path, args: &[&str]) -> String {
    run_ok(
        Command::new("git")
            .arg("-C")
            .arg(dir)
            .args([
                "-c",
                "user.name=rubyrace test",
                "-c",
                "user.email=test@example.invalid",
                "-c",
                "commit.gpgsign=false",
                "-c",
                "tag.gpgsign=false",
            ])
            .args(args),
    )
}

struct Outcome {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}\n--- stdout:\n{}\n--- stderr:\n{}",
            self.status, self.stdout, self.stderr
        )
    }
}

/// A cache, a record directory for the fake scripts, and the binary run against them.
struct Lab {
    dir: TempDir,
}

impl Lab {
    fn new(name: &str) -> Lab {
        let lab = Lab {
            dir: TempDir::new(&format!("build-{name}")),
        };
        std::fs::create_dir_all(lab.record_dir()).unwrap();
        lab
    }

    fn root(&self) -> PathBuf {
        self.dir.path.clone()
    }

    fn cache(&self) -> PathBuf {
        self.root().join("cache")
    }

    fn rubies(&self) -> PathBuf {
        self.cache().join("rubies")
    }

    fn record_dir(&self) -> PathBuf {
        self.dir.path.join("record")
    }

    /// `rubyrace ARGS` with the cache, the record dir and `env`; killed after DEADLINE.
    fn rubyrace(&self, args: &[&str], env: &[(&str, &str)]) -> Outcome {
        let mut child = Command::new(env!("CARGO_BIN_EXE_rubyrace"))
            .args(args)
            .env("RUBYRACE_CACHE", self.cache())
            .env("FAKE_RECORD", self.record_dir())
            .env_remove("FAKE_CONFIGURE_FAIL")
            .env_remove("FAKE_NO_YJIT")
            .env_remove("FAKE_NO_JEMALLOC")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the rubyrace binary");
        let read = |mut r: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut s = String::new();
                let _ = r.read_to_string(&mut s);
                s
            })
        };
        let out = read(Box::new(child.stdout.take().unwrap()));
        let err = read(Box::new(child.stderr.take().unwrap()));
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > DEADLINE {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "rubyrace {args:?} still running after {DEADLINE:?}; stderr:\n{}",
                    err.join().unwrap()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        Outcome {
            status,
            stdout: out.join().unwrap(),
            stderr: err.join().unwrap(),
        }
    }

    fn build_ok(&self, args: &[&str]) -> Outcome {
        let mut all = vec!["ruby", "build"];
        all.extend_from_slice(args);
        let out = self.rubyrace(&all, &[]);
        assert!(out.status.success(), "rubyrace {all:?} failed: {out:?}");
        out
    }

    fn configure_calls(&self) -> usize {
        std::fs::read_to_string(self.record_dir().join("configure.calls"))
            .map(|s| s.lines().count())
            .unwrap_or(0)
    }

    fn configure_args(&self) -> Vec<String> {
        std::fs::read_to_string(self.record_dir().join("configure.args"))
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The record behind a name in the cache.
    fn record(&self, name: &str) -> Value {
        let path = self.rubies().join(name).join("rubyrace-build.json");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str(&text).unwrap()
    }

    /// The prefix directories (not names, logs, build dirs) in the cache.
    fn prefixes(&self) -> Vec<String> {
        let mut out: Vec<String> = std::fs::read_dir(self.rubies())
            .unwrap()
            .flatten()
            .filter(|e| e.file_type().unwrap().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with("build-"))
            .collect();
        out.sort();
        out
    }

    fn build_dirs(&self) -> Vec<String> {
        let mut out: Vec<String> = std::fs::read_dir(self.rubies())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("build-"))
            .collect();
        out.sort();
        out
    }
}

fn s(v: &Value) -> &str {
    v.as_str()
        .unwrap_or_else(|| panic!("expected a string, got {v}"))
}

#[test]
fn a_tarball_build_gets_its_options_a_record_a_name_and_is_reused() {
    let lab = Lab::new("tarball");
    let tarball = fake_tarball(&lab.root(), "ruby-3.3.8", "from-tarball", false);
    let t = tarball.to_str().unwrap();

    let out = lab.build_ok(&[
        "3.3.8",
        "--source",
        t,
        "--yjit",
        "--jemalloc",
        "--configure-opts",
        "--enable-shared",
        "--jobs",
        "2",
        "--",
        "CFLAGS=-O2 -g",
    ]);
    assert_eq!(lab.configure_calls(), 1);
    let name = "3.3.8-yjit-jemalloc";
    let record = lab.record(name);

    // The prefix: <cache>/rubies/3.3.8-<first 12 of the key>, given to configure.
    let key = s(&record["key"]);
    assert_eq!(key.len(), 64, "{record}");
    assert!(key.chars().all(|c| c.is_ascii_hexdigit()), "{record}");
    let prefix = lab.rubies().join(format!("3.3.8-{}", &key[..12]));
    assert_eq!(s(&record["prefix"]), prefix.to_str().unwrap());
    assert!(prefix.join("bin/ruby").is_file());
    let args = lab.configure_args();
    assert_eq!(
        args,
        [
            format!("--prefix={}", prefix.display()),
            "--disable-install-doc".to_string(),
            "--enable-yjit".to_string(),
            "--with-jemalloc".to_string(),
            "--enable-shared".to_string(),
            "CFLAGS=-O2 -g".to_string(),
        ]
    );
    let makeflags = std::fs::read_to_string(lab.record_dir().join("make.flags")).unwrap();
    assert!(makeflags.contains("j2"), "make got -j2: {makeflags:?}");

    // The record.
    assert_eq!(record["schema"], "rubyrace.ruby-build/1");
    assert_eq!(record["version"], "3.3.8");
    assert_eq!(record["name"], name);
    assert_eq!(record["source"]["kind"], "tarball");
    assert_eq!(s(&record["source"]["path"]), t);
    assert_eq!(s(&record["source"]["sha256"]), sha256sum(&tarball));
    assert_eq!(record["options"]["yjit"], true);
    assert_eq!(record["options"]["jemalloc"], true);
    assert_eq!(
        record["options"]["configure_opts"],
        serde_json::json!(["--enable-shared", "CFLAGS=-O2 -g"])
    );
    let configure_argv: Vec<&str> = record["configure_argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(s)
        .collect();
    assert_eq!(configure_argv[0], "./configure");
    assert_eq!(&configure_argv[1..], args.as_slice());
    assert_eq!(
        record["ruby_description"],
        "ruby 3.3.8 fake from-tarball [x86_64-linux]"
    );
    assert!(s(&record["mainlibs"]).contains("-ljemalloc"), "{record}");
    let built_at = s(&record["built_at"]);
    assert!(
        built_at.len() == 20 && built_at.as_bytes()[10] == b'T' && built_at.ends_with('Z'),
        "RFC 3339: {built_at}"
    );
    assert!(record["build_seconds"].as_f64().unwrap() >= 0.0);
    assert_eq!(record["rubyrace_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(record["jobs"], 2);

    // The bundled gems: no .gem files in gems/, so the list was emptied before install.
    assert_eq!(
        record["bundled_gems_removed"],
        serde_json::json!(["minitest 5.20.0", "rake 13.1.0"])
    );
    let seen = std::fs::read_to_string(prefix.join("bundled_gems.seen")).unwrap();
    assert!(
        seen.lines().all(|l| l.starts_with('#')) && seen.contains("# gem-name"),
        "make install saw: {seen:?}"
    );
    assert!(out.stderr.contains("bundled_gems"), "{out:?}");

    // The log, the progress, the name and the printed TOML.
    let log =
        std::fs::read_to_string(lab.rubies().join(format!("3.3.8-{}.log", &key[..12]))).unwrap();
    assert!(log.contains("checking for a fake compiler... yes"), "{log}");
    for command in [
        format!("==> tar -xf {t} -C "),
        format!("==> ./configure --prefix={} ", prefix.display()),
        "==> make -j2\n".to_string(),
        "==> make install\n".to_string(),
    ] {
        assert!(log.contains(&command), "{command:?} in the log:\n{log}");
    }
    assert!(log.contains("compiling nothing"), "{log}");
    for step in [
        "extract... ",
        "configure... ",
        "make -j2... ",
        "install... ",
    ] {
        assert!(out.stderr.contains(step), "progress {step:?}: {out:?}");
    }
    let link = lab.rubies().join(name);
    assert_eq!(
        std::fs::read_link(&link).unwrap(),
        PathBuf::from(prefix.file_name().unwrap())
    );
    let ruby = link.join("bin/ruby");
    let toml = format!("[rubies]\n\"{name}\" = \"{}\"", ruby.display());
    assert!(out.stdout.contains(&toml), "{out:?}");
    assert_eq!(
        run_ok(Command::new(&ruby).args(["-e", "print RUBY_DESCRIPTION"])),
        "ruby 3.3.8 fake from-tarball [x86_64-linux]"
    );
    assert!(lab.build_dirs().is_empty(), "sources removed after success");

    // The same request again: reused, configure not run.
    let again = lab.build_ok(&[
        "3.3.8",
        "--source",
        t,
        "--jemalloc",
        "--yjit",
        "--configure-opts=--enable-shared",
        "-j",
        "7",
        "--",
        "CFLAGS=-O2 -g",
    ]);
    assert_eq!(lab.configure_calls(), 1, "{again:?}");
    assert!(
        again
            .stderr
            .contains(&format!("reusing {} (built {built_at})", prefix.display())),
        "{again:?}"
    );
    assert!(again.stdout.contains(&toml), "{again:?}");
    // A copy of the tarball elsewhere is the same source.
    let copy = lab.root().join("copy.tar.gz");
    std::fs::copy(&tarball, &copy).unwrap();
    let copied = lab.build_ok(&[
        "3.3.8",
        "--source",
        copy.to_str().unwrap(),
        "--yjit",
        "--jemalloc",
        "--configure-opts",
        "--enable-shared",
        "--name",
        "same-again",
        "--",
        "CFLAGS=-O2 -g",
    ]);
    assert_eq!(lab.configure_calls(), 1, "{copied:?}");
    assert_eq!(
        std::fs::read_link(lab.rubies().join("same-again")).unwrap(),
        PathBuf::from(prefix.file_name().unwrap())
    );

    // --force rebuilds in place.
    lab.build_ok(&[
        "3.3.8",
        "--source",
        t,
        "--yjit",
        "--jemalloc",
        "--configure-opts",
        "--enable-shared",
        "--force",
        "--",
        "CFLAGS=-O2 -g",
    ]);
    assert_eq!(lab.configure_calls(), 2);
    assert_eq!(lab.prefixes().len(), 1);

    // Other options: another prefix, another name, no jemalloc in MAINLIBS.
    let other = lab.build_ok(&["3.3.8", "--source", t, "--yjit"]);
    assert_eq!(lab.configure_calls(), 3, "{other:?}");
    let yjit_only = lab.record("3.3.8-yjit");
    assert_ne!(yjit_only["key"], record["key"]);
    assert_eq!(lab.prefixes().len(), 2, "{:?}", lab.prefixes());
    assert!(!s(&yjit_only["mainlibs"]).contains("jemalloc"));
    assert!(!lab
        .configure_args()
        .contains(&"--with-jemalloc".to_string()));

    // An interrupted build (a prefix without its record) is removed and rebuilt.
    let yjit_prefix = PathBuf::from(s(&yjit_only["prefix"]));
    std::fs::remove_file(yjit_prefix.join("rubyrace-build.json")).unwrap();
    std::fs::write(yjit_prefix.join("half-installed"), "").unwrap();
    let rebuilt = lab.build_ok(&["3.3.8", "--source", t, "--yjit"]);
    assert_eq!(lab.configure_calls(), 4, "{rebuilt:?}");
    assert!(rebuilt.stderr.contains("interrupted build"), "{rebuilt:?}");
    assert!(!yjit_prefix.join("half-installed").exists());
    assert!(yjit_prefix.join("rubyrace-build.json").is_file());

    // `ruby list` shows both builds from their records.
    let list = lab.rubyrace(&["ruby", "list"], &[]);
    assert!(list.status.success(), "{list:?}");
    for needle in [
        "3.3.8-yjit-jemalloc, same-again",
        "3.3.8-yjit\n",
        "ruby 3.3.8 fake from-tarball",
        &format!("tarball {t}"),
        "yjit; jemalloc; configure: --enable-shared CFLAGS=-O2 -g",
        &format!(
            "\"3.3.8-yjit\" = \"{}\"",
            lab.rubies().join("3.3.8-yjit/bin/ruby").display()
        ),
    ] {
        assert!(list.stdout.contains(needle), "{needle:?} in {list:?}");
    }
    let json = lab.rubyrace(&["ruby", "list", "--json"], &[]);
    let builds: Value = serde_json::from_str(&json.stdout).unwrap();
    let builds = builds.as_array().unwrap();
    assert_eq!(builds.len(), 2, "{json:?}");
    assert!(builds
        .iter()
        .all(|b| b["record"]["schema"] == "rubyrace.ruby-build/1"));

    // A recorded build whose Ruby no longer runs is rebuilt.
    std::fs::remove_file(yjit_prefix.join("bin/ruby")).unwrap();
    let broken = lab.build_ok(&["3.3.8", "--source", t, "--yjit"]);
    assert_eq!(lab.configure_calls(), 5, "{broken:?}");
    assert!(broken.stderr.contains("does not run"), "{broken:?}");
    assert!(yjit_prefix.join("bin/ruby").is_file());

    // A record rubyrace cannot read (another schema) is left alone, unless --force.
    let record_file = yjit_prefix.join("rubyrace-build.json");
    let other = std::fs::read_to_string(&record_file)
        .unwrap()
        .replace("rubyrace.ruby-build/1", "rubyrace.ruby-build/99");
    std::fs::write(&record_file, &other).unwrap();
    let refused = lab.rubyrace(&["ruby", "build", "3.3.8", "--source", t, "--yjit"], &[]);
    assert!(!refused.status.success(), "{refused:?}");
    assert!(refused.stderr.contains("--force"), "{refused:?}");
    assert_eq!(std::fs::read_to_string(&record_file).unwrap(), other);
    assert_eq!(lab.configure_calls(), 5);
    lab.build_ok(&["3.3.8", "--source", t, "--yjit", "--force"]);
    assert_eq!(lab.configure_calls(), 6);
    assert_eq!(lab.record("3.3.8-yjit")["schema"], "rubyrace.ruby-build/1");
}

#[test]
fn bundled_gems_are_left_alone_when_gem_files_are_there() {
    let lab = Lab::new("gems");
    let tarball = fake_tarball(&lab.root(), "with-gems", "gems", true);
    lab.build_ok(&["3.3.8", "--source", tarball.to_str().unwrap()]);
    let record = lab.record("3.3.8");
    assert_eq!(record["bundled_gems_removed"], serde_json::json!([]));
    let prefix = PathBuf::from(s(&record["prefix"]));
    assert_eq!(
        std::fs::read_to_string(prefix.join("bundled_gems.seen")).unwrap(),
        BUNDLED_GEMS
    );
}

#[test]
fn a_git_source_is_built_from_the_commit_not_the_working_tree() {
    let lab = Lab::new("git");
    let repo = lab.root().join("ruby-src");
    fake_tree(&repo, "committed-v1", false);
    // Like a git checkout of CRuby: no configure, an autogen.sh that makes it.
    std::fs::rename(repo.join("configure"), repo.join("tool-configure.sh")).unwrap();
    std::fs::create_dir_all(repo.join("tool")).unwrap();
    std::fs::rename(
        repo.join("tool-configure.sh"),
        repo.join("tool/configure.sh"),
    )
    .unwrap();
    write_exec(&repo.join("autogen.sh"), AUTOGEN);
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "v1"]);
    git(&repo, &["tag", "v1"]);
    let v1 = git(&repo, &["rev-parse", "HEAD"]);
    let r = repo.to_str().unwrap();

    // Uncommitted changes: refused without --ref, ignored with it.
    std::fs::write(repo.join("mark"), "working-tree\n").unwrap();
    let dirty = lab.rubyrace(&["ruby", "build", "3.4-dev", "--source", r], &[]);
    assert!(!dirty.status.success(), "{dirty:?}");
    assert!(
        dirty.stderr.contains("uncommitted changes") && dirty.stderr.contains("--ref"),
        "{dirty:?}"
    );
    assert_eq!(lab.configure_calls(), 0);

    let out = lab.build_ok(&["3.4-dev", "--source", r, "--ref", "v1"]);
    let record = lab.record("3.4-dev");
    assert_eq!(record["source"]["kind"], "git");
    assert_eq!(s(&record["source"]["path"]), r);
    assert_eq!(record["source"]["commit"], v1.as_str());
    assert_eq!(record["source"]["ref"], "v1");
    assert_eq!(
        record["ruby_description"], "ruby 3.3.8 fake committed-v1 [x86_64-linux]",
        "{out:?}"
    );
    assert_eq!(
        std::fs::read_to_string(lab.record_dir().join("autogen.calls"))
            .unwrap()
            .lines()
            .count(),
        1,
        "autogen.sh made configure"
    );
    assert!(out.stderr.contains("autogen... "), "{out:?}");

    // Commit the change: HEAD is a new commit, so a new build with the new content.
    git(&repo, &["commit", "-q", "-am", "v2"]);
    let v2 = git(&repo, &["rev-parse", "HEAD"]);
    lab.build_ok(&["3.4-dev", "--source", r, "--name", "dev-head"]);
    let head = lab.record("dev-head");
    assert_eq!(head["source"]["commit"], v2.as_str());
    assert_eq!(head["source"]["ref"], "HEAD");
    assert_eq!(
        head["ruby_description"],
        "ruby 3.3.8 fake working-tree [x86_64-linux]"
    );
    assert_ne!(head["prefix"], record["prefix"]);
    assert_eq!(lab.configure_calls(), 2);

    // The ref names the same commit as before: reused.
    lab.build_ok(&["3.4-dev", "--source", r, "--ref", &v1]);
    assert_eq!(lab.configure_calls(), 2);

    // A ref that is not there; a directory that is not a git repository; a subdirectory.
    let missing = lab.rubyrace(
        &["ruby", "build", "3.4-dev", "--source", r, "--ref", "nope"],
        &[],
    );
    assert!(
        !missing.status.success() && missing.stderr.contains("`nope` is not a commit"),
        "{missing:?}"
    );
    let plain = lab.root().join("plain");
    fake_tree(&plain, "plain", false);
    let not_git = lab.rubyrace(
        &[
            "ruby",
            "build",
            "3.3.8",
            "--source",
            plain.to_str().unwrap(),
        ],
        &[],
    );
    assert!(
        !not_git.status.success() && not_git.stderr.contains("not a git repository"),
        "{not_git:?}"
    );
    let sub = lab.rubyrace(
        &[
            "ruby",
            "build",
            "3.3.8",
            "--source",
            repo.join("tool").to_str().unwrap(),
        ],
        &[],
    );
    assert!(
        !sub.status.success() && sub.stderr.contains("top directory"),
        "{sub:?}"
    );
    assert_eq!(lab.configure_calls(), 2);
}

#[test]
fn a_failed_configure_names_the_step_and_the_log_and_leaves_no_build() {
    let lab = Lab::new("fail");
    let tarball = fake_tarball(&lab.root(), "ruby-3.3.8", "fails", false);
    let t = tarball.to_str().unwrap();
    let out = lab.rubyrace(
        &["ruby", "build", "3.3.8", "--source", t, "--jemalloc"],
        &[("FAKE_CONFIGURE_FAIL", "1")],
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(lab.configure_calls(), 1);
    let err = &out.stderr;
    assert!(err.contains("configure failed (exit status 1)"), "{out:?}");
    let logs: Vec<PathBuf> = std::fs::read_dir(lab.rubies())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert!(
        err.contains(&format!("Log: {}", logs[0].display())),
        "names the log: {out:?}"
    );
    assert!(
        err.contains("configure: error: no fake compiler found (on request)"),
        "shows the end of the log: {out:?}"
    );
    assert!(lab.prefixes().is_empty(), "no prefix: {:?}", lab.prefixes());
    assert_eq!(lab.build_dirs().len(), 1, "sources kept for inspection");
    assert!(err.contains(
        &lab.rubies()
            .join(&lab.build_dirs()[0])
            .display()
            .to_string()
    ));
    assert!(!lab.rubies().join("3.3.8-jemalloc").exists(), "no name");
    assert!(lab.rubyrace(&["ruby", "list", "--json"], &[]).stdout.trim() == "[]");

    // While another process holds the key's lock, a build of that key is refused.
    let lock_path = lab.rubies().join(format!(".{}.lock", lab.build_dirs()[0]));
    let lock =
        std::fs::File::open(&lock_path).unwrap_or_else(|e| panic!("{}: {e}", lock_path.display()));
    // SAFETY: flock(2) on a descriptor this test owns.
    let rc = unsafe {
        libc::flock(
            std::os::fd::AsRawFd::as_raw_fd(&lock),
            libc::LOCK_EX | libc::LOCK_NB,
        )
    };
    assert_eq!(rc, 0);
    let busy = lab.rubyrace(
        &["ruby", "build", "3.3.8", "--source", t, "--jemalloc"],
        &[],
    );
    assert!(
        !busy.status.success() && busy.stderr.contains("another rubyrace is building"),
        "{busy:?}"
    );
    assert_eq!(lab.configure_calls(), 1);
    drop(lock);

    // Fixed: the same request builds, and cleans up after itself.
    lab.build_ok(&["3.3.8", "--source", t, "--jemalloc"]);
    assert_eq!(lab.configure_calls(), 2);
    assert!(lab.record("3.3.8-jemalloc")["mainlibs"]
        .as_str()
        .unwrap()
        .contains("jemalloc"));
    assert!(lab.build_dirs().is_empty());
}

#[test]
fn a_build_without_the_asked_for_yjit_or_jemalloc_is_refused() {
    let lab = Lab::new("checks");
    let tarball = fake_tarball(&lab.root(), "ruby-3.3.8", "checks", false);
    let t = tarball.to_str().unwrap();

    let out = lab.rubyrace(
        &["ruby", "build", "3.3.8", "--source", t, "--yjit"],
        &[("FAKE_NO_YJIT", "1")],
    );
    assert!(!out.status.success(), "{out:?}");
    assert!(
        out.stderr.contains("check failed") && out.stderr.contains("YJIT enabled? is \"false\""),
        "{out:?}"
    );
    assert!(lab.prefixes().is_empty(), "{:?}", lab.prefixes());

    let out = lab.rubyrace(
        &["ruby", "build", "3.3.8", "--source", t, "--jemalloc"],
        &[("FAKE_NO_JEMALLOC", "1")],
    );
    assert!(!out.status.success(), "{out:?}");
    assert!(
        out.stderr.contains("without jemalloc") && out.stderr.contains("-lz -lm"),
        "{out:?}"
    );
    assert!(lab.prefixes().is_empty(), "{:?}", lab.prefixes());
}

#[test]
fn bad_requests_are_refused_before_anything_runs() {
    let lab = Lab::new("bad");
    let tarball = fake_tarball(&lab.root(), "ruby-3.3.8", "bad", false);
    let t = tarball.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["ruby", "build", "../x", "--source", t], "version `../x`"),
        (
            &["ruby", "build", "3.3.8", "--source", t, "--name", "a/b"],
            "name `a/b`",
        ),
        (
            &["ruby", "build", "3.3.8", "--source", t, "--ref", "main"],
            "--ref is for a git",
        ),
        (
            &[
                "ruby",
                "build",
                "3.3.8",
                "--source",
                "/nonexistent/x.tar.gz",
            ],
            "/nonexistent/x.tar.gz",
        ),
        (
            &["ruby", "build", "3.3.8", "--source", t, "--jobs", "0"],
            "--jobs",
        ),
    ];
    for (args, needle) in cases {
        let out = lab.rubyrace(args, &[]);
        assert!(!out.status.success(), "{args:?}: {out:?}");
        assert!(
            out.stderr.contains(needle),
            "{args:?}: {needle:?} in {out:?}"
        );
    }
    assert_eq!(lab.configure_calls(), 0);

    // A name that is a real file in the cache is not replaced.
    std::fs::create_dir_all(lab.rubies().join("taken")).unwrap();
    let out = lab.rubyrace(
        &["ruby", "build", "3.3.8", "--source", t, "--name", "taken"],
        &[],
    );
    assert!(
        !out.status.success() && out.stderr.contains("not a name rubyrace made"),
        "{out:?}"
    );
    assert_eq!(lab.configure_calls(), 0);
}
