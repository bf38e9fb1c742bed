//! The Rubies, the app servers they can load, and the allocator libraries.

use rubies::servers::ServerKind;
use rubies::{discovery, knobs};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use sys::process::is_executable_file;

use crate::finding::{Finding, Status};
use crate::programs::{first_line, run_program};
use crate::readers::on_path;
use crate::COMMAND_TIMEOUT;

pub(crate) fn rubies_finding(found: &[discovery::DiscoveredRuby]) -> Finding {
    if found.is_empty() {
        return Finding::new(
            "rubies",
            Status::Bad,
            "no Ruby found on PATH, in /usr/bin or in rbenv, rvm, chruby, asdf, mise",
            "install one (Debian: apt install ruby) or build one with `rubyrace ruby build`",
        );
    }
    let lines: Vec<String> = found
        .iter()
        .map(|r| {
            let what = match (&r.description, &r.error) {
                (Some(d), _) => d.clone(),
                (None, Some(e)) => format!("does not run: {}", first_line(e)),
                (None, None) => "unknown".to_string(),
            };
            format!("{}: {what}, {}", r.name, r.path.display())
        })
        .collect();
    let broken: Vec<&str> = found
        .iter()
        .filter(|r| r.description.is_none())
        .map(|r| r.name.as_str())
        .collect();
    if broken.len() == found.len() {
        Finding::new(
            "rubies",
            Status::Bad,
            lines.join("\n"),
            "no Ruby here runs: reinstall one, or build one with `rubyrace ruby build`",
        )
    } else if !broken.is_empty() {
        Finding::new(
            "rubies",
            Status::Warn,
            lines.join("\n"),
            format!(
                "{} does not run; experiments naming it will fail before they start",
                broken.join(", ")
            ),
        )
    } else {
        Finding::ok("rubies", lines.join("\n"))
    }
}

pub(crate) const SERVER_MARKER: &str = "__rubyrace_doctor__";

/// Requires each server's library in one Ruby process, and prints what happened.
pub(crate) fn server_script() -> String {
    let mut script = format!(
        "print \"\\n{SERVER_MARKER}\\n\"\n\
         puts \"mainlibs=#{{defined?(RbConfig) ? RbConfig::CONFIG['MAINLIBS'] : ''}}\"\n"
    );
    for (server, gem) in ServerKind::built_in() {
        let (lib, constant) = (gem.library, gem.version_constant);
        script.push_str(&format!(
            "begin\n  require '{lib}'\n  v = (Object.const_get('{constant}').to_s rescue '')\n  \
             puts \"{server}=ok #{{v}}\"\nrescue ScriptError, StandardError => e\n  \
             puts \"{server}=no #{{e.class}}: #{{e.message.lines.first.to_s.strip}}\"\nend\n"
        ));
    }
    script
}

/// What the Ruby on PATH can load.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ServerQuery {
    pub(crate) ruby: PathBuf,
    /// Per built-in server, in `ServerKind::built_in` order: Ok(version) or Err(why it does
    /// not load).
    pub(crate) loads: Vec<Result<String, String>>,
    /// The allocator the Ruby links (`MAINLIBS`), if any.
    pub(crate) linked_allocator: Option<String>,
}

/// Parses the output of [`server_script`].
pub(crate) fn parse_server_answer(stdout: &str) -> Option<(Vec<Result<String, String>>, String)> {
    let mut lines = stdout.lines().skip_while(|l| l.trim_end() != SERVER_MARKER);
    lines.next()?;
    let mut mainlibs = String::new();
    let mut answers: HashMap<&str, Result<String, String>> = HashMap::new();
    for line in lines {
        let Some((key, rest)) = line.split_once('=') else {
            continue;
        };
        if key == "mainlibs" {
            mainlibs = rest.trim().to_string();
        } else if let Some(v) = rest.strip_prefix("ok") {
            answers.insert(key, Ok(v.trim().to_string()));
        } else if let Some(why) = rest.strip_prefix("no") {
            answers.insert(key, Err(why.trim().to_string()));
        }
    }
    let loads = ServerKind::built_in()
        .map(|(server, _)| {
            answers
                .remove(server.as_str())
                .unwrap_or_else(|| Err("no answer".to_string()))
        })
        .collect();
    Some((loads, mainlibs))
}

pub(crate) fn server_query() -> Result<ServerQuery, String> {
    let ruby = discovery::resolve_executable("ruby").map_err(|e| format!("{e:#}"))?;
    let script = server_script();
    // RUBYOPT is left out as in discovery: a `-rbundler/setup` in it would answer for a
    // Gemfile, not for the Ruby.
    let ran = run_program(
        &ruby,
        &[OsStr::new("-e"), OsStr::new(&script)],
        &["RUBYOPT"],
        COMMAND_TIMEOUT,
    )
    .map_err(|e| format!("cannot run {}: {e}", ruby.display()))?;
    if ran.timed_out {
        return Err(format!(
            "{} did not answer within {} s",
            ruby.display(),
            COMMAND_TIMEOUT.as_secs()
        ));
    }
    let Some((loads, mainlibs)) = parse_server_answer(&ran.stdout) else {
        return Err(format!(
            "{} did not answer: {}",
            ruby.display(),
            first_line(&format!("{}\n{}", ran.stderr, ran.stdout))
        ));
    };
    Ok(ServerQuery {
        ruby,
        loads,
        linked_allocator: knobs::linked_allocator(&mainlibs).map(str::to_string),
    })
}

/// Where `ruby -S NAME` finds NAME: the Ruby's directory (rubyrace sets RUBYPATH to it),
/// then PATH.
pub(crate) fn server_executable(ruby: &Path, name: &str) -> Option<PathBuf> {
    ruby.parent()
        .map(|dir| dir.join(name))
        .filter(|p| is_executable_file(p))
        .or_else(|| on_path(name))
}

pub(crate) fn servers_finding(query: &Result<ServerQuery, String>) -> Finding {
    let q = match query {
        Ok(q) => q,
        Err(e) => {
            return Finding::new(
                "servers",
                Status::Warn,
                format!("not checked: {e}"),
                "the built-in servers are started through the `ruby` on PATH unless the \
                 experiment names its Rubies; see rubies",
            )
        }
    };
    let mut parts = Vec::new();
    let mut missing = Vec::new();
    for ((server, gem), load) in ServerKind::built_in().zip(&q.loads) {
        let (server, exe) = (server.as_str(), gem.executable);
        let found = server_executable(&q.ruby, exe);
        match (load, found) {
            (Ok(v), Some(_)) => parts.push(if v.is_empty() {
                server.to_string()
            } else {
                format!("{server} {v}")
            }),
            (Ok(_), None) => {
                parts.push(format!(
                    "{server} loads but `{exe}` is not next to the Ruby or on PATH"
                ));
                missing.push(server);
            }
            (Err(why), _) => {
                parts.push(format!("{server} missing ({why})"));
                missing.push(server);
            }
        }
    }
    let value = format!("{} (ruby {})", parts.join(", "), q.ruby.display());
    let install = format!(
        "install them for this Ruby ({}), or use a Gemfile that has them",
        ServerKind::install_hint()
    );
    if missing.len() == ServerKind::built_in().count() {
        Finding::new(
            "servers",
            Status::Warn,
            value,
            format!("no built-in server can start with this Ruby: {install}"),
        )
    } else if !missing.is_empty() {
        Finding::new(
            "servers",
            Status::Info,
            value,
            format!(
                "experiments with server = {} will fail before they start: {install}",
                missing.join(" or ")
            ),
        )
    } else {
        Finding::ok("servers", value)
    }
}

pub(crate) fn allocators_finding(linked: Option<&str>) -> Finding {
    let mut parts = Vec::new();
    let mut missing = Vec::new();
    for (name, _) in knobs::ALLOCATOR_PREFIXES {
        match knobs::find_allocator_library(name) {
            Some(path) => parts.push(format!("{name} {}", path.display())),
            None => {
                parts.push(format!("{name} not found"));
                missing.push(*name);
            }
        }
    }
    let mut value = parts.join("; ");
    if let Some(linked) = linked {
        value.push_str(&format!("; the Ruby on PATH links {linked}"));
    }
    if missing.is_empty() {
        Finding::ok("allocators", value)
    } else {
        Finding::new(
            "allocators",
            Status::Info,
            value,
            format!(
                "`allocator = \"{}\"` needs the library (Debian: libjemalloc2, \
                 libtcmalloc-minimal4); the system allocator always works",
                missing.join("\" or \"")
            ),
        )
    }
}

// ---------------------------------------------------------------------------------------
