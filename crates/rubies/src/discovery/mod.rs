//! Which Rubies are installed here, and what each one says it is.
//!
//! Experiments name their Rubies ("system", "rbenv-3.3.0", a path...). This module finds
//! the interpreters on PATH, in the usual version managers' directories (rbenv, rvm,
//! chruby/ruby-install, asdf, mise) and among Debian-style alternates (`/usr/bin/ruby3.1`),
//! runs each one once to read `RUBY_DESCRIPTION`/`RUBY_VERSION`, and resolves what a user
//! typed to an executable. Every child process is run from an argv (never a shell), in its
//! own process group, with a timeout, so a hung or broken interpreter costs a few seconds
//! and an error message, never a hung lab.
//!
//! `candidates` finds the interpreters ([`SearchRoots`]), `query` asks each one what it is
//! (through `process`, which runs a child with a timeout), `resolve` turns what a user
//! typed into an executable; this module names what was found and looks names up.

mod candidates;
mod process;
mod query;
mod resolve;

pub use candidates::{ManagerDir, SearchRoots, RUBYRACE_BUILDS};
pub use process::{run_captured, Captured};
pub use query::{
    bundle_check, bundled_server_check, ruby_capabilities, ruby_description, BundledServer,
    RubyCapabilities, DESCRIPTION_TIMEOUT, SERVER_CHECK_TIMEOUT,
};
pub use resolve::resolve_executable;

use std::cmp::Ordering;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail};

use candidates::{candidates, Candidate, Origin};
use query::{query_all, Answer};

/// How long one interpreter may take to answer during discovery (JRuby starts in seconds).
pub const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(10);

/// One interpreter found by [`discover`].
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct DiscoveredRuby {
    /// Short unique name for experiment files: "system" (the first `ruby` on PATH that no
    /// version manager owns), `<source>-<version dir>` for managed Rubies ("rbenv-3.3.0",
    /// "rvm-jruby-9.4.5.0"; rvm/chruby's "ruby-" prefix dropped), and for other PATH or
    /// /usr/bin interpreters the CRuby version ("3.3.0") or `<engine>-<version>`
    /// ("jruby-9.4.5.0"). Clashes get "-2", "-3"... appended.
    pub name: String,
    /// The executable, canonicalized when possible (it is what was run).
    pub path: PathBuf,
    /// Where it was found: "rbenv", "rvm", "chruby", "asdf", "mise", "PATH", or "system"
    /// (a `/usr/bin/rubyX.Y` alternate not reachable through PATH).
    pub source: String,
    /// `RUBY_DESCRIPTION`; None if the Ruby failed to run.
    pub description: Option<String>,
    /// `RUBY_VERSION` (for JRuby and TruffleRuby, the Ruby language version they implement).
    pub version: Option<String>,
    /// Why it failed to run, if it did.
    pub error: Option<String>,
}

/// Finds the Rubies of this machine ([`SearchRoots::from_env`]); see [`discover_in`].
pub fn discover() -> Vec<DiscoveredRuby> {
    discover_in(&SearchRoots::from_env())
}

/// Finds the Rubies under `roots`: version managers first, then PATH, then the system
/// directories; deduplicated by canonical path (the first find wins); each one run (a few
/// at a time, [`DISCOVERY_TIMEOUT`] each, `RUBYOPT` unset) for its description and version.
/// Rubies that fail to run are kept, with `error` set.
pub fn discover_in(roots: &SearchRoots) -> Vec<DiscoveredRuby> {
    let candidates = candidates(roots);
    let exes: Vec<&Path> = candidates.iter().map(|c| c.path.as_path()).collect();
    let answers = query_all(&exes, DISCOVERY_TIMEOUT);
    name_all(candidates, answers)
}

/// Finds `name` among discovered Rubies: an exact name, else the one Ruby whose
/// `RUBY_VERSION` is `name`. The error lists what exists and the closest names.
pub fn find<'a>(rubies: &'a [DiscoveredRuby], name: &str) -> anyhow::Result<&'a DiscoveredRuby> {
    if let Some(ruby) = rubies.iter().find(|r| r.name == name) {
        return Ok(ruby);
    }
    let by_version: Vec<&DiscoveredRuby> = rubies
        .iter()
        .filter(|r| r.version.as_deref() == Some(name))
        .collect();
    match by_version.as_slice() {
        [one] => return Ok(*one),
        [] => {}
        many => bail!(
            "several Rubies have version {name}: {}; use one of these names",
            many.iter()
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
    if rubies.is_empty() {
        bail!(
            "no Ruby named `{name}`: no Rubies were found (give a path to the executable instead)"
        );
    }
    let mut close: Vec<(f64, &str)> = rubies
        .iter()
        .map(|r| (strsim::jaro_winkler(name, &r.name), r.name.as_str()))
        .filter(|(score, _)| *score >= 0.8)
        .collect();
    close.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap_or(Ordering::Equal));
    let mut msg = format!("no Ruby named `{name}`");
    if let Some((_, best)) = close.first() {
        msg.push_str(&format!(" (did you mean `{best}`?)"));
    }
    msg.push_str(&format!(
        "; found: {}",
        rubies
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    Err(anyhow!(msg))
}

// ---------------------------------------------------------------------------------------
// Naming

fn name_all(
    candidates: Vec<Candidate>,
    answers: Vec<anyhow::Result<Answer>>,
) -> Vec<DiscoveredRuby> {
    let mut taken: HashSet<String> = HashSet::new();
    let mut system_named = false;
    let mut out = Vec::with_capacity(candidates.len());
    for (cand, answer) in candidates.into_iter().zip(answers) {
        let (description, version, error) = match answer {
            Ok(a) => (Some(a.description), Some(a.version), None),
            Err(e) => (None, None, Some(format!("{e:#}"))),
        };
        let wanted = match &cand.origin {
            Origin::Manager(label) => format!("{}-{}", cand.source, manager_label(label)),
            Origin::Loose(file) if file == "ruby" && !system_named => {
                system_named = true;
                "system".to_string()
            }
            Origin::Loose(file) => description
                .as_deref()
                .and_then(|d| engine_name(d, version.as_deref()))
                .unwrap_or_else(|| file.clone()),
        };
        let mut name = wanted.clone();
        let mut n = 2;
        while taken.contains(&name) {
            name = format!("{wanted}-{n}");
            n += 1;
        }
        taken.insert(name.clone());
        out.push(DiscoveredRuby {
            name,
            path: cand.path,
            source: cand.source,
            description,
            version,
            error,
        });
    }
    out
}

/// rvm and ruby-install call CRuby directories "ruby-3.3.0"; the name keeps "3.3.0".
fn manager_label(label: &str) -> &str {
    match label.strip_prefix("ruby-") {
        Some(rest) if rest.starts_with(|c: char| c.is_ascii_digit()) => rest,
        _ => label,
    }
}

/// "3.1.2" for CRuby, "jruby-9.4.5.0", "truffleruby-24.0.0" for the others, from the
/// description's first two words ("jruby 9.4.5.0 (3.1.4) ...", "truffleruby 24.0.0, like ruby 3.2.2, ...").
fn engine_name(description: &str, version: Option<&str>) -> Option<String> {
    let mut words = description.split_whitespace();
    let engine = words.next()?;
    if engine == "ruby" {
        return version.filter(|v| !v.is_empty()).map(str::to_string);
    }
    let engine_version = words.next()?.trim_end_matches(',');
    if engine.is_empty() || engine_version.is_empty() {
        return None;
    }
    Some(format!("{engine}-{engine_version}"))
}

#[cfg(test)]
mod tests;
