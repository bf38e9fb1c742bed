//! Asking a Ruby what it is: a script run with `-e` whose answer follows a marker line,
//! for the description and version (discovery's queries, [`ruby_description`]) and for
//! what the Ruby can do ([`ruby_capabilities`]); `bundle check` through a Ruby; and which
//! Ruby really runs a server's executable under `bundle exec` ([`bundled_server_check`]). Each
//! Ruby is run from an argv, never a shell, with a timeout ([`run_captured`]).

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::time::Duration;

use anyhow::{anyhow, bail};

use sys::process::{describe_status, display_argv};

use super::process::{run_captured, tail_output};

/// How long [`ruby_description`] waits.
pub const DESCRIPTION_TIMEOUT: Duration = Duration::from_secs(30);

/// Printed before the answer so anything else a Ruby writes to stdout (from RUBYOPT, a
/// `-r`'d library, `-v`...) cannot be mistaken for it.
pub(super) const MARKER: &str = "__rubyrace_ruby__";

/// The query: plain `print` of two constants every Ruby since 1.9 (CRuby, JRuby,
/// TruffleRuby) defines. Warnings go to stderr, which is only read for error messages.
pub(super) fn query_script() -> String {
    format!(r#"print "\n{MARKER}\n", RUBY_DESCRIPTION, "\n", RUBY_VERSION, "\n""#)
}

/// Runs `argv_prefix` (an interpreter and its options, e.g. `["/usr/bin/ruby", "--yjit"]`)
/// plus `-e <query>`, with `env` added to this process's environment, and returns
/// `RUBY_DESCRIPTION`, which reflects options such as YJIT ("+YJIT"). Fails with the argv,
/// exit status and the end of stderr, or after [`DESCRIPTION_TIMEOUT`].
pub fn ruby_description(
    argv_prefix: &[String],
    env: &[(String, String)],
) -> anyhow::Result<String> {
    if argv_prefix.is_empty() {
        bail!("ruby_description: empty argv (expected a Ruby executable and its options)");
    }
    let mut argv: Vec<OsString> = argv_prefix.iter().map(OsString::from).collect();
    argv.push("-e".into());
    argv.push(query_script().into());
    let answer = query(&argv, env, &[], DESCRIPTION_TIMEOUT)?;
    Ok(answer.description)
}

/// What a Ruby answered to [`query_script`].
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Answer {
    pub(super) description: String,
    pub(super) version: String,
}

/// Runs the query on each of `exes`, a few at a time (`RUBYOPT` unset, `timeout` each):
/// the answers in the order of `exes`.
pub(super) fn query_all(exes: &[&Path], timeout: Duration) -> Vec<anyhow::Result<Answer>> {
    let n = exes.len();
    if n == 0 {
        return Vec::new();
    }
    let workers = std::thread::available_parallelism()
        .map(|p| p.get())
        .unwrap_or(2)
        .clamp(1, 8)
        .min(n);
    let next = AtomicUsize::new(0);
    let script = query_script();
    let mut indexed: Vec<(usize, anyhow::Result<Answer>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, AtomicOrdering::Relaxed);
                        if i >= n {
                            break mine;
                        }
                        let argv: Vec<OsString> =
                            vec![exes[i].into(), "-e".into(), script.clone().into()];
                        mine.push((i, query(&argv, &[], &["RUBYOPT"], timeout)));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    indexed.sort_by_key(|(i, _)| *i);
    let mut answers: Vec<Option<anyhow::Result<Answer>>> = (0..n).map(|_| None).collect();
    for (i, a) in indexed {
        answers[i] = Some(a);
    }
    answers
        .into_iter()
        .map(|a| a.unwrap_or_else(|| Err(anyhow!("query thread panicked"))))
        .collect()
}

/// Runs `argv` (ending in `-e <query_script>`) and parses the answer.
pub(super) fn query(
    argv: &[OsString],
    env: &[(String, String)],
    env_remove: &[&str],
    timeout: Duration,
) -> anyhow::Result<Answer> {
    let (lines, shown, stderr_tail) = query_lines(argv, env, env_remove, timeout)?;
    match (lines.first(), lines.get(1)) {
        (Some(d), Some(v)) if !d.trim().is_empty() => Ok(Answer {
            description: d.trim().to_string(),
            version: v.trim().to_string(),
        }),
        _ => bail!(with_stderr(
            format!("`{shown}` exited 0 but printed no RUBY_DESCRIPTION (stdout: {lines:?})"),
            &stderr_tail
        )),
    }
}

fn with_stderr(msg: String, stderr_tail: &str) -> String {
    if stderr_tail.is_empty() {
        msg
    } else {
        format!("{msg}; stderr: {stderr_tail}")
    }
}

/// Runs `argv` (a Ruby with `-e` and a script that prints [`MARKER`] on a line of its
/// own, then its answer) and returns the answer's lines, the argv as shown in messages and
/// the end of stderr. Fails on a timeout, a non-zero exit or a missing marker.
fn query_lines(
    argv: &[OsString],
    env: &[(String, String)],
    env_remove: &[&str],
    timeout: Duration,
) -> anyhow::Result<(Vec<String>, String, String)> {
    let shown = display_argv(argv);
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    for name in env_remove {
        cmd.env_remove(name);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = run_captured(cmd, timeout).map_err(|e| anyhow!("could not run `{shown}`: {e}"))?;
    let stderr_tail = tail_output(&out.stderr);
    if out.timed_out {
        bail!(with_stderr(
            format!(
                "`{shown}` did not answer within {} s and was killed",
                timeout.as_secs_f64()
            ),
            &stderr_tail
        ));
    }
    if !out.status.success() {
        bail!(with_stderr(
            format!("`{shown}` failed ({})", describe_status(out.status)),
            &stderr_tail
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !stdout.lines().any(|l| l.trim_end() == MARKER) {
        bail!(with_stderr(
            format!(
                "`{shown}` exited 0 but did not answer (stdout: {:?})",
                tail_output(&out.stdout)
            ),
            &stderr_tail
        ));
    }
    let lines = stdout
        .lines()
        .skip_while(|l| l.trim_end() != MARKER)
        .skip(1)
        .map(str::to_string)
        .collect();
    Ok((lines, shown, stderr_tail))
}

/// What a Ruby can do, asked of the Ruby itself with the options under test.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RubyCapabilities {
    /// `RUBY_ENGINE`: "ruby" for CRuby, "jruby", "truffleruby".
    pub engine: String,
    pub version: String,
    pub description: String,
    /// Which JITs this Ruby was built with (`RubyVM::YJIT` etc. defined).
    pub jits_built: Vec<String>,
    /// Which JITs are on in a process started with these options (`enabled?`).
    pub jits_enabled: Vec<String>,
    /// `RbConfig::CONFIG["MAINLIBS"]`: libraries the interpreter is linked with.
    pub mainlibs: String,
    pub gc_compact: bool,
    pub gc_auto_compact: bool,
    /// Whatever the Ruby wrote to stderr (e.g. why a JIT could not start).
    pub stderr: String,
}

/// The capability query. `defined?` and `respond_to?` only: it runs on any Ruby.
fn capabilities_script() -> String {
    format!(
        r#"print "\n{MARKER}\n"
puts "engine=#{{defined?(RUBY_ENGINE) ? RUBY_ENGINE : "ruby"}}"
puts "version=#{{RUBY_VERSION}}"
puts "description=#{{RUBY_DESCRIPTION}}"
built = []; on = []
if defined?(RubyVM)
  {{ "yjit" => :YJIT, "mjit" => :MJIT, "rjit" => :RJIT, "zjit" => :ZJIT }}.each do |name, const|
    next unless RubyVM.const_defined?(const)
    built << name
    jit = RubyVM.const_get(const)
    on << name if jit.respond_to?(:enabled?) && jit.enabled?
  end
end
puts "jits_built=#{{built.join(",")}}"
puts "jits_enabled=#{{on.join(",")}}"
puts "mainlibs=#{{defined?(RbConfig) ? RbConfig::CONFIG["MAINLIBS"] : ""}}"
puts "gc_compact=#{{GC.respond_to?(:compact)}}"
puts "gc_auto_compact=#{{GC.respond_to?(:auto_compact=)}}"
"#
    )
}

/// Asks the Ruby `argv_prefix` (with its options, e.g. `--yjit`) and `env` what it can do:
/// engine, version, which JITs it was built with and which are on, what it links. Fails
/// like [`ruby_description`].
pub fn ruby_capabilities(
    argv_prefix: &[String],
    env: &[(String, String)],
) -> anyhow::Result<RubyCapabilities> {
    if argv_prefix.is_empty() {
        bail!("ruby_capabilities: empty argv (expected a Ruby executable and its options)");
    }
    let mut argv: Vec<OsString> = argv_prefix.iter().map(OsString::from).collect();
    argv.push("-e".into());
    argv.push(capabilities_script().into());
    let (lines, _, stderr) = query_lines(&argv, env, &[], DESCRIPTION_TIMEOUT)?;
    let mut caps = RubyCapabilities {
        stderr,
        ..RubyCapabilities::default()
    };
    let list = |v: &str| -> Vec<String> {
        v.split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    };
    for line in &lines {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        match key {
            "engine" => caps.engine = value.to_string(),
            "version" => caps.version = value.to_string(),
            "description" => caps.description = value.to_string(),
            "jits_built" => caps.jits_built = list(value),
            "jits_enabled" => caps.jits_enabled = list(value),
            "mainlibs" => caps.mainlibs = value.to_string(),
            "gc_compact" => caps.gc_compact = value == "true",
            "gc_auto_compact" => caps.gc_auto_compact = value == "true",
            _ => {}
        }
    }
    if caps.description.is_empty() {
        bail!("`{}` did not describe itself", argv_prefix.join(" "));
    }
    Ok(caps)
}

/// `bundle check` through the Ruby `argv_prefix` (`<ruby> -S bundle check`), with `env`
/// (which names the Gemfile in BUNDLE_GEMFILE): whether every gem of the Gemfile is
/// installed for that Ruby. The error carries what bundler said.
pub fn bundle_check(argv_prefix: &[String], env: &[(String, String)]) -> anyhow::Result<()> {
    if argv_prefix.is_empty() {
        bail!("bundle_check: empty argv");
    }
    let mut cmd = Command::new(&argv_prefix[0]);
    cmd.args(&argv_prefix[1..]).args(["-S", "bundle", "check"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let shown = format!("{} -S bundle check", argv_prefix.join(" "));
    let out = run_captured(cmd, DESCRIPTION_TIMEOUT)
        .map_err(|e| anyhow!("could not run `{shown}`: {e}"))?;
    if out.timed_out {
        bail!(
            "`{shown}` did not answer within {} s",
            DESCRIPTION_TIMEOUT.as_secs()
        );
    }
    if !out.status.success() {
        let said = format!("{} {}", tail_output(&out.stdout), tail_output(&out.stderr));
        bail!(
            "`{shown}` failed ({}): {}",
            describe_status(out.status),
            said.trim()
        );
    }
    Ok(())
}

/// How long [`bundled_server_check`] waits: Bundler resolves the app's whole bundle first.
pub const SERVER_CHECK_TIMEOUT: Duration = Duration::from_secs(60);

/// What the Ruby that ran a server's executable under `bundle exec` said as it exited
/// (`ruby/server_check.rb`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BundledServer {
    /// Which JITs were on in that Ruby.
    pub jits_enabled: Vec<String>,
    /// The gems it had loaded, name to version.
    pub gems: std::collections::BTreeMap<String, String>,
}

/// Runs `argv` (a server's command through `bundle exec`, ending in the server's
/// `--version`) with `env`, and `-r<ruby/server_check.rb>` in front of `RUBYOPT` (the
/// env's, else this process's): which JITs are on in the Ruby that ran the executable and
/// which gems it loaded. Fails with the argv, the exit status and what Bundler or the server
/// said (a server gem that is not in the bundle: "can't find executable puma for gem puma"),
/// or after [`SERVER_CHECK_TIMEOUT`].
pub fn bundled_server_check(
    argv: &[String],
    env: &[(String, String)],
) -> anyhow::Result<BundledServer> {
    if argv.is_empty() {
        bail!("bundled_server_check: empty argv");
    }
    let script = crate::support::ruby_support_dir().join("server_check.rb");
    let script = script
        .to_str()
        .filter(|s| !s.chars().any(char::is_whitespace))
        .ok_or_else(|| anyhow!("the path {} cannot go into RUBYOPT", script.display()))?
        .to_string();
    let existing = env
        .iter()
        .rev()
        .find(|(k, _)| k == "RUBYOPT")
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var("RUBYOPT").ok())
        .filter(|o| !o.trim().is_empty());
    let rubyopt = match existing {
        Some(o) => format!("-r{script} {o}"),
        None => format!("-r{script}"),
    };
    let mut env: Vec<(String, String)> = env
        .iter()
        .filter(|(k, _)| k != "RUBYOPT")
        .cloned()
        .collect();
    env.push(("RUBYOPT".to_string(), rubyopt));
    let argv: Vec<OsString> = argv.iter().map(OsString::from).collect();
    let (lines, _, _) = query_lines(&argv, &env, &[], SERVER_CHECK_TIMEOUT)?;
    let mut answer = BundledServer::default();
    for line in &lines {
        match line.split_once('=') {
            Some(("jits_enabled", v)) => {
                answer.jits_enabled = v
                    .split(',')
                    .filter(|j| !j.is_empty())
                    .map(str::to_string)
                    .collect()
            }
            Some(("gems", v)) => {
                answer.gems = v
                    .split(',')
                    .filter_map(|g| g.split_once(':'))
                    .map(|(n, v)| (n.to_string(), v.to_string()))
                    .collect()
            }
            _ => {}
        }
    }
    Ok(answer)
}
