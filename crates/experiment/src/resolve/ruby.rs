//! A configuration's Ruby (which one of `[rubies]`) and its knobs: JIT, allocator, GC
//! compaction and environment, checked against what that Ruby says it supports.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;

use super::Lookup;
use crate::model::{Profiler, RubyCommit, RubyDef, YJIT_PERF};
use crate::parse::Parser;
use crate::settings::did_you_mean;
use crate::settings::RUBY_ALL;
use rubies::discovery::RubyCapabilities;
use rubies::knobs::{self, AllocatorSetting, Compact, Jit};

/// The configuration's Ruby: the one it names, the only one defined, or an error (none
/// defined, several and none named, a name not in `[rubies]`); and its definition, when it
/// is known. Rejected definitions and values were reported already and add nothing.
pub(super) fn choose_ruby<'r>(
    p: &mut Parser,
    l: &Lookup,
    rubies: &'r BTreeMap<String, (RubyDef, Option<Range<usize>>)>,
) -> (Option<String>, Option<&'r RubyDef>) {
    let rejected = p.rejected.clone();
    let config_span = l.config_span;

    // The Ruby. When it cannot be known (its definition or the `ruby` value was rejected,
    // which is reported already), the checks that need it are skipped and the others run.
    let failed_rubies = p.failed_rubies.clone();
    let mut declared: Vec<&str> = rubies
        .keys()
        .map(String::as_str)
        .chain(failed_rubies.iter().map(String::as_str))
        .collect();
    declared.sort_unstable();
    declared.dedup();
    let ruby = match l.get("ruby").and_then(|v| v.value.as_str()) {
        Some(r) => Some(r.to_string()),
        None if rejected.contains("ruby") => None,
        None if declared.len() == 1 => Some(declared[0].to_string()),
        None if declared.is_empty() => {
            if !p.rubies_reported {
                p.error(
                    config_span,
                    "rubies",
                    "no Ruby is defined",
                    Some("add one to [rubies], e.g. system = \"ruby\"".into()),
                );
            }
            None
        }
        None => {
            let span = config_span.clone().or_else(|| p.rubies_span.clone());
            p.error(
                &span,
                "settings.ruby",
                format!(
                    "several Rubies are defined ({}); say which one each configuration uses",
                    declared.join(", ")
                ),
                Some("set `ruby` in [settings], or list them in [matrix]: ruby = [...]".into()),
            );
            None
        }
    };
    let def = match &ruby {
        None => None,
        Some(r) => match rubies.get(r) {
            Some((def, _)) => Some(def),
            None if failed_rubies.contains(r) => None,
            None if rubies.is_empty() && p.rubies_reported => None,
            None => {
                let all_outside_matrix =
                    r == RUBY_ALL && l.get("ruby").is_some_and(|v| !v.key.starts_with("matrix."));
                let help = all_outside_matrix
                    .then(|| {
                        "ruby = \"all\" (every Ruby) is a [matrix] axis: move it into [matrix]"
                            .to_string()
                    })
                    .or_else(|| did_you_mean(r, &declared).map(|k| format!("did you mean `{k}`?")))
                    .or_else(|| {
                        Some(format!(
                            "define it in [rubies]; defined: {}",
                            declared.join(", ")
                        ))
                    });
                p.error(
                    &l.span_of("ruby"),
                    &l.key_of("ruby"),
                    format!("no Ruby named {r:?} in [rubies]"),
                    help,
                );
                None
            }
        },
    };
    (ruby, def)
}

/// `ruby_ref` with `ruby_repo` (and `ruby_configure_opts`): the Ruby built from that
/// commit, named `commit-HASH12`, with its definition and the commit. None when the
/// configuration names no commit; `Some(None)` when it does and something was wrong
/// (reported: the keys' combination, the repository, the ref, or the build).
pub(super) fn resolve_ruby_commit(
    p: &mut Parser,
    l: &Lookup,
) -> Option<Option<(String, RubyDef, RubyCommit)>> {
    let text = |k: &str| l.get(k).and_then(|v| v.value.as_str()).map(str::to_string);
    let (git_ref, repo) = (text("ruby_ref"), text("ruby_repo"));
    let configure_opts = l.list("ruby_configure_opts");
    let (git_ref, repo) = match (git_ref, repo) {
        (None, None) => {
            if l.get("ruby_configure_opts").is_some() {
                p.error(
                    &l.span_of("ruby_configure_opts"),
                    &l.key_of("ruby_configure_opts"),
                    "`ruby_configure_opts` is for a Ruby built from a commit (`ruby_ref` with `ruby_repo`)",
                    Some("for a Ruby built by name, pass --configure-opts to `rubyrace ruby build`".into()),
                );
            }
            return None;
        }
        (Some(_), None) => {
            p.error(
                &l.span_of("ruby_ref"),
                &l.key_of("ruby_ref"),
                "`ruby_ref` needs `ruby_repo`, the CRuby git repository to build it from",
                Some("add ruby_repo = \"~/src/ruby\" (the checkout's path) beside it".into()),
            );
            return Some(None);
        }
        (None, Some(_)) => {
            p.error(
                &l.span_of("ruby_repo"),
                &l.key_of("ruby_repo"),
                "`ruby_repo` needs `ruby_ref`, the commit to build (a branch, a tag, a hash)",
                None,
            );
            return Some(None);
        }
        (Some(r), Some(repo)) => (r, repo),
    };
    if let Some(named) = l.get("ruby") {
        let named_key = named.key.clone();
        p.error(
            &l.span_of("ruby_ref"),
            &l.key_of("ruby_ref"),
            format!(
                "`ruby_ref` builds this configuration's Ruby from a commit, and `{named_key}` names another ({})",
                p.at(&l.span_of("ruby"))
            ),
            Some("set `ruby` only in the configurations that do not build a commit".into()),
        );
        return Some(None);
    }
    let at_ref = |p: &mut Parser, message: String, help: Option<String>| {
        p.error(&l.span_of("ruby_ref"), &l.key_of("ruby_ref"), message, help);
        Some(None)
    };
    let repo_path = p.resolve_path(&repo);
    let top = match sys::git::toplevel(&repo_path) {
        Ok(top) => top,
        Err(e) => {
            p.error(
                &l.span_of("ruby_repo"),
                &l.key_of("ruby_repo"),
                e.to_string(),
                None,
            );
            return Some(None);
        }
    };
    let commit = match sys::git::commit_of(&top, &git_ref) {
        Ok(c) => c,
        Err(e) => {
            return at_ref(
                p,
                e.to_string(),
                Some(format!(
                    "its commits: git -C {} log --oneline",
                    top.display()
                )),
            )
        }
    };
    let short = commit[..12.min(commit.len())].to_string();
    let cache = match rubies::build::default_cache_dir() {
        Ok(c) => c,
        Err(e) => return at_ref(p, format!("{e:#}"), None),
    };
    let request = rubies::build::commit_request(&cache, &top, &commit, &configure_opts);
    let key = (top.clone(), commit.clone(), configure_opts.clone());
    let built = match p.ruby_builds.get(&key) {
        Some(answer) => answer.clone(),
        None => {
            let answer = (p.build_ruby)(&request);
            p.ruby_builds.insert(key, answer.clone());
            answer
        }
    };
    let ruby = match built {
        Ok(ruby) => ruby,
        Err(e) => return at_ref(p, format!("{git_ref} ({short}): {e}"), None),
    };
    let prefix = ruby
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let def = RubyDef {
        argv: vec![ruby.display().to_string()],
        env: BTreeMap::new(),
        gemfile: None,
    };
    let commit = RubyCommit {
        repo: top,
        git_ref,
        commit,
        configure_opts,
        prefix,
    };
    Some(Some((format!("commit-{short}"), def, commit)))
}

/// What the runtime knobs (`jit`, `allocator`, `compact`) make of a configuration, checked
/// against the Ruby itself (asked once per Ruby and options).
pub(super) struct Knobs {
    pub(super) jit: Option<Jit>,
    pub(super) compact: Option<Compact>,
    pub(super) allocator: Option<AllocatorSetting>,
    /// The Ruby's argv: its definition's, the JIT's flag, then `ruby_opts`.
    pub(super) ruby_argv: Vec<String>,
    /// What the Ruby can do; None when it is unknown or did not answer.
    pub(super) caps: Option<RubyCapabilities>,
}

/// Whether the configuration's `profile` includes perf.
fn profiles_with_perf(l: &Lookup) -> bool {
    l.list("profile")
        .iter()
        .any(|name| name == Profiler::Perf.as_str())
}

/// Resolves the knobs of a configuration whose Ruby is `ruby` (`def`, known or not), adding
/// to `env` what they need (`LD_PRELOAD` for an allocator).
pub(super) fn resolve_knobs(
    p: &mut Parser,
    l: &Lookup,
    ruby: &str,
    def: &RubyDef,
    ruby_known: bool,
    ruby_opts: &[String],
    env: &mut BTreeMap<String, String>,
) -> Knobs {
    // Runtime knobs, checked against the Ruby itself (asked once per Ruby and options).
    let jit = l
        .get("jit")
        .and_then(|v| v.value.as_str())
        .and_then(Jit::parse);
    let compact = l
        .get("compact")
        .and_then(|v| v.value.as_str())
        .and_then(Compact::parse);
    let allocator_value = l
        .get("allocator")
        .and_then(|v| v.value.as_str())
        .map(str::to_string);
    let env_pairs: Vec<(String, String)> =
        env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let mut plain_argv = def.argv.clone();
    plain_argv.extend(ruby_opts.iter().cloned());
    let caps = ruby_known
        .then(|| ruby_capabilities(p, l, ruby, &plain_argv, &env_pairs))
        .flatten();
    let jit_flag = jit.and_then(|j| resolve_jit_flag(p, l, j, def, ruby_opts, &caps, &env_pairs));
    let perf_map = yjit_perf_map(p, l, jit_flag.as_deref(), def, ruby_opts, &env_pairs);
    let mut ruby_argv = def.argv.clone();
    ruby_argv.extend(jit_flag);
    if perf_map {
        ruby_argv.push(YJIT_PERF.to_string());
    }
    ruby_argv.extend(ruby_opts.iter().cloned());

    let allocator = match (&allocator_value, &caps) {
        (Some(value), Some(c)) => resolve_allocator_knob(p, l, value, c, env),
        _ => None,
    };
    if let (Some(cm), Some(c)) = (compact, &caps) {
        check_compact(p, l, cm, c);
    }
    Knobs {
        jit,
        compact,
        allocator,
        ruby_argv,
        caps,
    }
}

/// What the known Ruby `ruby` (run as `argv` in `env_pairs`) can do; None, with an error
/// of the first knob written (`jit`, `allocator`, `compact`), when it does not answer.
fn ruby_capabilities(
    p: &mut Parser,
    l: &Lookup,
    ruby: &str,
    argv: &[String],
    env_pairs: &[(String, String)],
) -> Option<RubyCapabilities> {
    let knob = ["jit", "allocator", "compact"]
        .into_iter()
        .find(|k| l.get(k).is_some());
    match p.capabilities(argv, env_pairs) {
        Ok(c) => Some(c),
        Err(e) => {
            if let Some(k) = knob {
                p.error(
                    &l.span_of(k),
                    &l.key_of(k),
                    format!("cannot check `{k}`: the Ruby {ruby:?} does not answer: {e}"),
                    None,
                );
            }
            None
        }
    }
}

/// The flag that turns on the JIT `j`, checked against the Ruby (when it answered,
/// `caps`); an error for a `ruby_opts` option that chooses a JIT too.
fn resolve_jit_flag(
    p: &mut Parser,
    l: &Lookup,
    j: Jit,
    def: &RubyDef,
    ruby_opts: &[String],
    caps: &Option<RubyCapabilities>,
    env_pairs: &[(String, String)],
) -> Option<String> {
    let mut jit_flag = None;
    for o in ruby_opts {
        if knobs::jit_option_conflict(o, j) {
            p.error(
                &l.span_of("ruby_opts"),
                &l.key_of("ruby_opts"),
                format!(
                    "`{o}` chooses a JIT, but `jit` = \"{}\" is set too",
                    j.as_str()
                ),
                Some(
                    "choose the JIT with `jit` only; rubyrace adds the right flag and verifies it"
                        .into(),
                ),
            );
        }
    }
    if let Some(c) = caps {
        let checked = knobs::check_jit(j, c, |flag| {
            let mut argv = def.argv.clone();
            argv.push(flag.to_string());
            argv.extend(ruby_opts.iter().cloned());
            p.capabilities(&argv, env_pairs)
        });
        match checked {
            Ok(flag) => jit_flag = flag,
            Err((message, help)) => p.error(&l.span_of("jit"), &l.key_of("jit"), message, help),
        }
    }
    jit_flag
}

/// Whether the Ruby's argv takes YJIT's perf map flag, its JIT flag being `jit_flag`.
fn yjit_perf_map(
    p: &mut Parser,
    l: &Lookup,
    jit_flag: Option<&str>,
    def: &RubyDef,
    ruby_opts: &[String],
    env_pairs: &[(String, String)],
) -> bool {
    // With perf attached, YJIT's perf map (Ruby 3.3+, `--yjit-perf`): perf then names the
    // JIT's machine code by Ruby method instead of `[unknown]`. Only when this Ruby takes
    // the flag, and unless `perf_map = false`; it keeps frame pointers in JIT code, in the
    // measured phase too (the report warns).
    let wants_perf_map = l
        .get("perf_map")
        .and_then(|v| v.value.as_bool())
        .unwrap_or(true);
    if jit_flag == Some("--yjit") && profiles_with_perf(l) && wants_perf_map {
        let mut argv = def.argv.clone();
        argv.extend(["--yjit".to_string(), YJIT_PERF.to_string()]);
        argv.extend(ruby_opts.iter().cloned());
        p.capabilities(&argv, env_pairs)
            .is_ok_and(|c| c.jits_enabled.iter().any(|j| j == "yjit"))
    } else {
        false
    }
}

/// The allocator named or given by path (`value`), checked against the Ruby (`c`), with
/// its library added to `env` as `LD_PRELOAD`; None, with an error, when it cannot be.
fn resolve_allocator_knob(
    p: &mut Parser,
    l: &Lookup,
    value: &str,
    c: &RubyCapabilities,
    env: &mut BTreeMap<String, String>,
) -> Option<AllocatorSetting> {
    let named = ["system", "jemalloc", "tcmalloc"];
    if !value.contains('/') && !named.contains(&value) {
        let help = did_you_mean(value, &named)
            .map(|k| format!("did you mean \"{k}\"?"))
            .or_else(|| Some("or give the path of the allocator's shared library".into()));
        p.error(
            &l.span_of("allocator"),
            &l.key_of("allocator"),
            format!("expected \"system\", \"jemalloc\", \"tcmalloc\" or a library path, found {value:?}"),
            help,
        );
        None
    } else if env.contains_key("LD_PRELOAD") {
        p.error(
            &l.span_of("allocator"),
            &l.key_of("allocator"),
            "LD_PRELOAD is set in `env` too; rubyrace sets it for the allocator",
            Some("choose the allocator with `allocator` only".into()),
        );
        None
    } else {
        let value = if value.contains('/') {
            p.resolve_path(value).display().to_string()
        } else {
            value.to_string()
        };
        match knobs::resolve_allocator(&value, c) {
            Ok(a) => {
                if let Some(lib) = &a.preload {
                    env.insert("LD_PRELOAD".into(), lib.display().to_string());
                }
                Some(a)
            }
            Err((message, help)) => {
                p.error(
                    &l.span_of("allocator"),
                    &l.key_of("allocator"),
                    message,
                    help,
                );
                None
            }
        }
    }
}

/// `compact` (`cm`) checked against the Ruby (`c`): an error when it lacks what `cm` calls.
fn check_compact(p: &mut Parser, l: &Lookup, cm: Compact, c: &RubyCapabilities) {
    let missing = match cm {
        Compact::None => None,
        Compact::AfterBoot => (!c.gc_compact).then_some("GC.compact"),
        Compact::Auto => (!c.gc_auto_compact).then_some("GC.auto_compact="),
    };
    if let Some(m) = missing {
        p.error(
            &l.span_of("compact"),
            &l.key_of("compact"),
            format!(
                "{} has no {m}, so compact = \"{}\" cannot run",
                c.description,
                cm.as_str()
            ),
            None,
        );
    }
}
