//! From merged settings to a `ConfigSettings`: what needs several keys or the file system
//! (the Ruby, the app, the URL mix, the script, server combinations, the load settings).

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use load::{ConnectionMode, LoadSettings};

use crate::parse::{Layer, Parser, Placed};
use crate::schema::{
    default_script_timeout, ConfigSettings, RubyDef, ScriptSettings, Workload, BUNDLED_APPS,
};
use crate::servers::ServerKind;
use crate::settings::RUBY_ALL;
use crate::settings::{did_you_mean, setting_of};
use rubies::discovery::RubyCapabilities;
use rubies::knobs::{self, AllocatorSetting, Compact, Jit};

/// Every problem `LoadSettings::check` finds, as (setting, message). `check` stops at the
/// first one; so that all are reported at once, the setting it names is put back to its
/// default and the check run again, until it passes. The messages stay those of
/// `rubyrace load`.
pub(crate) fn load_problems(load: &LoadSettings) -> Vec<(String, String)> {
    let defaults = LoadSettings::default();
    let mut load = load.clone();
    let mut problems = Vec::new();
    // Each round puts one setting back, so there are at most as many rounds as settings.
    for _ in 0..16 {
        let Err(e) = load.check() else { break };
        let message = e.to_string();
        // The experiment file's name for the setting (its `threads` are the server's).
        let key = match &e {
            load::SettingsError::Invalid {
                setting: load::Setting::Threads,
                ..
            } => "load_threads",
            load::SettingsError::Invalid { setting, .. } => setting.name(),
            load::SettingsError::Plan(load::PlanError::Header(_)) => "headers",
            _ => message.split_whitespace().next().unwrap_or(""),
        }
        .to_string();
        let known = match key.as_str() {
            "connections" => {
                load.connections = 1;
                true
            }
            "load_threads" => {
                load.threads = 1;
                true
            }
            "pipeline" => {
                load.pipeline = 1;
                true
            }
            "rate" => {
                load.rate = None;
                true
            }
            "timeout" => {
                load.timeout = defaults.timeout;
                true
            }
            "requests" => {
                load.requests = None;
                true
            }
            "headers" => {
                load.headers.clear();
                true
            }
            "method" => {
                load.method = defaults.method.clone();
                true
            }
            "path" => {
                load.path = Some("/".into());
                true
            }
            _ => false,
        };
        problems.push((key, message));
        if !known {
            break;
        }
    }
    problems
}

/// A configuration's merged settings, read by key: the value, where it was written (or
/// the configuration, for a default) and under which name, and typed accessors with
/// defaults.
struct Lookup<'a> {
    layer: &'a Layer,
    config_span: &'a Option<Range<usize>>,
}

impl Lookup<'_> {
    fn get(&self, k: &str) -> Option<&Placed> {
        self.layer.get(k)
    }

    fn span_of(&self, k: &str) -> Option<Range<usize>> {
        self.get(k)
            .and_then(|v| v.span.clone())
            .or_else(|| self.config_span.clone())
    }

    fn key_of(&self, k: &str) -> String {
        self.get(k)
            .map(|v| v.key.clone())
            .unwrap_or_else(|| format!("settings.{k}"))
    }

    fn string(&self, k: &str, default: &str) -> String {
        self.get(k)
            .and_then(|v| v.value.as_str().map(str::to_string))
            .unwrap_or_else(|| default.to_string())
    }

    fn int(&self, k: &str) -> Option<i64> {
        self.get(k).and_then(|v| v.value.as_i64())
    }

    fn float(&self, k: &str) -> Option<f64> {
        self.get(k).and_then(|v| v.value.as_f64())
    }

    fn duration(&self, k: &str, default: Duration) -> Duration {
        self.get(k)
            .and_then(|v| v.value.as_duration())
            .unwrap_or(default)
    }

    fn list(&self, k: &str) -> Vec<String> {
        self.get(k)
            .and_then(|v| v.value.as_list())
            .map(<[String]>::to_vec)
            .unwrap_or_default()
    }
}

/// The configuration's Ruby: the one it names, the only one defined, or an error (none
/// defined, several and none named, a name not in `[rubies]`); and its definition, when it
/// is known. Rejected definitions and values were reported already and add nothing.
fn choose_ruby<'r>(
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

/// What the runtime knobs (`jit`, `allocator`, `compact`) make of a configuration, checked
/// against the Ruby itself (asked once per Ruby and options).
struct Knobs {
    jit: Option<Jit>,
    compact: Option<Compact>,
    allocator: Option<AllocatorSetting>,
    /// The Ruby's argv: its definition's, the JIT's flag, then `ruby_opts`.
    ruby_argv: Vec<String>,
    /// What the Ruby can do; None when it is unknown or did not answer.
    caps: Option<RubyCapabilities>,
}

/// Resolves the knobs of a configuration whose Ruby is `ruby` (`def`, known or not), adding
/// to `env` what they need (`LD_PRELOAD` for an allocator).
fn resolve_knobs(
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
    let knob = ["jit", "allocator", "compact"]
        .into_iter()
        .find(|k| l.get(k).is_some());
    let caps = match ruby_known.then(|| p.capabilities(&plain_argv, &env_pairs)) {
        None => None,
        Some(Ok(c)) => Some(c),
        Some(Err(e)) => {
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
    };
    let mut jit_flag = None;
    if let Some(j) = jit {
        for o in ruby_opts {
            if knobs::jit_option_conflict(o, j) {
                p.error(
                    &l.span_of("ruby_opts"),
                    &l.key_of("ruby_opts"),
                    format!("`{o}` chooses a JIT, but `jit` = \"{}\" is set too", j.as_str()),
                    Some("choose the JIT with `jit` only; rubyrace adds the right flag and verifies it".into()),
                );
            }
        }
        if let Some(c) = &caps {
            let checked = knobs::check_jit(j, c, |flag| {
                let mut argv = def.argv.clone();
                argv.push(flag.to_string());
                argv.extend(ruby_opts.iter().cloned());
                p.capabilities(&argv, &env_pairs)
            });
            match checked {
                Ok(flag) => jit_flag = flag,
                Err((message, help)) => p.error(&l.span_of("jit"), &l.key_of("jit"), message, help),
            }
        }
    }
    let mut ruby_argv = def.argv.clone();
    ruby_argv.extend(jit_flag);
    ruby_argv.extend(ruby_opts.iter().cloned());

    let mut allocator = None;
    if let (Some(value), Some(c)) = (&allocator_value, &caps) {
        let named = ["system", "jemalloc", "tcmalloc"];
        if !value.contains('/') && !named.contains(&value.as_str()) {
            let help = did_you_mean(value, &named)
                .map(|k| format!("did you mean \"{k}\"?"))
                .or_else(|| Some("or give the path of the allocator's shared library".into()));
            p.error(
                &l.span_of("allocator"),
                &l.key_of("allocator"),
                format!("expected \"system\", \"jemalloc\", \"tcmalloc\" or a library path, found {value:?}"),
                help,
            );
        } else if env.contains_key("LD_PRELOAD") {
            p.error(
                &l.span_of("allocator"),
                &l.key_of("allocator"),
                "LD_PRELOAD is set in `env` too; rubyrace sets it for the allocator",
                Some("choose the allocator with `allocator` only".into()),
            );
        } else {
            let value = if value.contains('/') {
                p.resolve_path(value).display().to_string()
            } else {
                value.clone()
            };
            match knobs::resolve_allocator(&value, c) {
                Ok(a) => {
                    if let Some(lib) = &a.preload {
                        env.insert("LD_PRELOAD".into(), lib.display().to_string());
                    }
                    allocator = Some(a);
                }
                Err((message, help)) => p.error(
                    &l.span_of("allocator"),
                    &l.key_of("allocator"),
                    message,
                    help,
                ),
            }
        }
    }
    if let (Some(cm), Some(c)) = (compact, &caps) {
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
    Knobs {
        jit,
        compact,
        allocator,
        ruby_argv,
        caps,
    }
}

/// The app (a bundled name or a directory with a config.ru) and its directory, checked for
/// an HTTP workload with the server that will run it.
fn resolve_app(
    p: &mut Parser,
    l: &Lookup,
    workload: Workload,
    server: ServerKind,
    processes: u32,
    threads: u32,
    rejected: &BTreeSet<String>,
) -> (String, PathBuf) {
    // The app: a bundled name or a directory with a config.ru.
    let app = l.string("app", "rack-hello");
    let app_dir = if BUNDLED_APPS.contains(&app.as_str()) {
        rubies::support::bundled_apps_dir().join(&app)
    } else {
        p.resolve_path(&app)
    };
    if workload == Workload::Http {
        if !app_dir.join("config.ru").is_file() {
            let help = if app.contains('/') {
                None
            } else {
                did_you_mean(&app, &BUNDLED_APPS)
                    .map(|k| format!("did you mean the bundled app `{k}`?"))
                    .or_else(|| {
                        Some(format!(
                            "bundled apps: {}; or a directory with a config.ru",
                            BUNDLED_APPS.join(", ")
                        ))
                    })
            };
            p.error(
                &l.span_of("app"),
                &l.key_of("app"),
                format!("no config.ru in {}", app_dir.display()),
                help,
            );
        }
        let server_argv = l.list("server_argv");
        // Which server, and with how many processes and threads, is unknown when one of
        // them was rejected.
        let server_known = !["server", "server_argv", "processes", "threads"]
            .iter()
            .any(|k| rejected.contains(*k));
        if server_known && server == ServerKind::Custom && server_argv.is_empty() {
            p.error(&l.span_of("server"), &l.key_of("server"), "server = \"custom\" needs `server_argv`, e.g. [\"{ruby}\", \"-S\", \"falcon\", \"--bind\", \"http://127.0.0.1:{port}\"]", None);
        }
        if server_known && server != ServerKind::Custom && !server_argv.is_empty() {
            p.error(
                &l.span_of("server_argv"),
                &l.key_of("server_argv"),
                format!(
                    "`server_argv` is only used with server = \"custom\", but the server is {:?}",
                    server.as_str()
                ),
                None,
            );
        }
        if server_known && processes > 1 && !server.supports_processes() {
            p.error(
                &l.span_of("processes"),
                &l.key_of("processes"),
                format!(
                    "{} runs a single process; processes must be 1",
                    server.as_str()
                ),
                None,
            );
        }
        if server_known && threads > 1 && !server.supports_threads() {
            p.error(
                &l.span_of("threads"),
                &l.key_of("threads"),
                format!(
                    "{} does not take a thread count; threads must be 1",
                    server.as_str()
                ),
                None,
            );
        }
    }
    (app, app_dir)
}

/// The Gemfile, and `BUNDLE_GEMFILE` in `env` set to it; its gems checked with the Ruby
/// when the Ruby answers (`ruby_answers`).
#[allow(clippy::too_many_arguments)]
fn resolve_gemfile(
    p: &mut Parser,
    l: &Lookup,
    ruby: &str,
    ruby_known: bool,
    ruby_answers: bool,
    def: &RubyDef,
    env: &mut BTreeMap<String, String>,
    workload: Workload,
    app_dir: &Path,
) -> Option<PathBuf> {
    // The Gemfile: `gemfile` ("none", or a path where {ruby} is the Ruby's name), else the
    // Ruby's `gemfile`, else BUNDLE_GEMFILE in `env`, else the app's Gemfile.<ruby> or Gemfile.
    let gemfile = match l.get("gemfile").and_then(|v| v.value.as_str()) {
        Some("none") => None,
        Some(g) => {
            let path = p.resolve_path(&g.replace("{ruby}", &ruby));
            // With `{ruby}` and no known Ruby, the path is unknown too.
            if !path.is_file() && (ruby_known || !g.contains("{ruby}")) {
                p.error(
                    &l.span_of("gemfile"),
                    &l.key_of("gemfile"),
                    format!("no such Gemfile: {}", path.display()),
                    None,
                );
            }
            Some(path)
        }
        None => def
            .gemfile
            .clone()
            .or_else(|| env.get("BUNDLE_GEMFILE").map(|g| p.resolve_path(g)))
            .or_else(|| {
                (workload == Workload::Http)
                    .then(|| {
                        [
                            app_dir.join(format!("Gemfile.{ruby}")),
                            app_dir.join("Gemfile"),
                        ]
                        .into_iter()
                        .find(|g| g.is_file())
                    })
                    .flatten()
            }),
    };
    if let Some(g) = &gemfile {
        env.insert("BUNDLE_GEMFILE".into(), g.display().to_string());
        if g.is_file() && ruby_answers {
            let env_pairs: Vec<(String, String)> =
                env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            if let Err(e) = p.bundle_check(&def.argv, &env_pairs) {
                // Point at what chose the Gemfile: `gemfile`, else the app that has it.
                let chosen_by = if l.get("gemfile").is_some() {
                    "gemfile"
                } else {
                    "app"
                };
                p.error(
                    &l.span_of(chosen_by),
                    &l.key_of(chosen_by),
                    format!(
                        "the gems of {} are not all installed for Ruby {ruby:?}: {e}",
                        g.display()
                    ),
                    Some(format!(
                        "install them: BUNDLE_GEMFILE={} {} -S bundle install",
                        g.display(),
                        def.argv.join(" ")
                    )),
                );
            }
        }
    }
    gemfile
}

/// The load settings: the URL mix, the engine's settings with the experiment file's
/// defaults, each checked as `rubyrace load` checks it (for an HTTP workload).
fn resolve_load(
    p: &mut Parser,
    l: &Lookup,
    workload: Workload,
    processes: u32,
    threads: u32,
    ruby_engine: Option<&str>,
) -> LoadSettings {
    // The load.
    let urls = match l.get("urls").and_then(|v| v.value.as_str()) {
        Some(f) => {
            let path = p.resolve_path(f);
            match std::fs::read_to_string(&path) {
                Ok(text) => match load::parse_url_mix(&text, &path.display().to_string()) {
                    Ok(lines) => Some(lines),
                    Err(e) => {
                        p.error(&l.span_of("urls"), &l.key_of("urls"), e.to_string(), None);
                        None
                    }
                },
                Err(e) => {
                    p.error(
                        &l.span_of("urls"),
                        &l.key_of("urls"),
                        format!("cannot read {}: {e}", path.display()),
                        None,
                    );
                    None
                }
            }
        }
        None => None,
    };
    // The experiment file's defaults are the load generator's (LoadSettings::default()),
    // except where a server's configuration decides: connections (one per server thread),
    // the path ("/"), and the warmup (5 s; 30 s for a JVM, which needs far longer than CRuby
    // before its JIT has settled).
    let engine = LoadSettings::default();
    let mode = match l.get("mode").and_then(|v| v.value.as_str()) {
        Some("close-header") => ConnectionMode::CloseHeader,
        Some("client-close") => ConnectionMode::ClientClose,
        Some(_) => ConnectionMode::Keepalive,
        None => engine.mode,
    };
    let load = LoadSettings {
        connections: l
            .int("connections")
            .map(|c| c as usize)
            .unwrap_or((processes * threads) as usize),
        threads: l.int("load_threads").map_or(engine.threads, |n| n as usize),
        duration: l.duration("duration", engine.duration),
        requests: l.int("requests").map(|n| n as u64),
        warmup: l.duration(
            "warmup",
            Duration::from_secs(if ruby_engine == Some("jruby") { 30 } else { 5 }),
        ),
        mode,
        close_grace: l.duration("close_grace", engine.close_grace),
        rate: l.float("rate"),
        method: l.string("method", &engine.method),
        path: Some(l.string("path", "/")),
        headers: l.list("headers"),
        body: l
            .get("body")
            .and_then(|v| v.value.as_str())
            .map(|b| b.as_bytes().to_vec()),
        urls: urls.clone(),
        seed: l.int("url_seed").map_or(engine.seed, |n| n as u64),
        pipeline: l.int("pipeline").map_or(engine.pipeline, |n| n as usize),
        timeout: l.duration("timeout", engine.timeout),
        connect_stagger: l.get("connect_stagger").and_then(|v| v.value.as_duration()),
    };
    if workload == Workload::Http {
        for (key, message) in load_problems(&load) {
            if key == "headers" {
                // Each header that is not `Name: value`, where it is written.
                let spans = l
                    .get("headers")
                    .map(|v| v.items.clone())
                    .unwrap_or_default();
                for (i, h) in load.headers.iter().enumerate() {
                    if let Err(e) = load::parse_header(h) {
                        let span = spans.get(i).cloned().flatten();
                        let (span, key) = match span {
                            Some(s) => (Some(s), format!("{}[{i}]", l.key_of("headers"))),
                            None => (l.span_of("headers"), l.key_of("headers")),
                        };
                        p.error(&span, &key, e.to_string(), None);
                    }
                }
                continue;
            }
            let help = match key.as_str() {
                "method" => {
                    let upper = load.method.to_ascii_uppercase();
                    (upper != load.method
                        && load::parse_url_mix(&format!("{upper} /"), "method").is_ok())
                    .then(|| format!("did you mean {upper:?}?"))
                }
                "path" => load.path.as_ref().map(|path| match path.split_once("://") {
                    // The server's address is the trial's; only the path is given.
                    Some((_, rest)) => format!(
                        "give the path alone, e.g. {:?}",
                        rest.find('/').map_or("/", |i| &rest[i..])
                    ),
                    None => format!("did you mean {:?}?", format!("/{path}")),
                }),
                "timeout" => {
                    Some("a request needs time to answer, e.g. timeout = \"10s\"".to_string())
                }
                _ => None,
            };
            p.error(&l.span_of(&key), &l.key_of(&key), message, help);
        }
        let readiness = l.string("readiness_path", "/");
        if !readiness.starts_with('/') {
            p.error(
                &l.span_of("readiness_path"),
                &l.key_of("readiness_path"),
                format!("expected a path starting with '/', found {readiness:?}"),
                None,
            );
        }
    }
    load
}

/// A script workload's script, its arguments, runs and timeout; `script` without one, or
/// one without `script`, is an error.
fn resolve_script(
    p: &mut Parser,
    l: &Lookup,
    workload: Workload,
    workload_known: bool,
) -> Option<ScriptSettings> {
    // A script workload.
    let script = match (workload, l.get("script").and_then(|v| v.value.as_str())) {
        _ if !workload_known => None,
        (Workload::Script, Some(s)) => {
            let path = p.resolve_path(s);
            if !path.is_file() {
                p.error(
                    &l.span_of("script"),
                    &l.key_of("script"),
                    format!("no such script: {}", path.display()),
                    None,
                );
            }
            Some(ScriptSettings {
                path,
                args: l.list("script_args"),
                runs: l.int("runs").unwrap_or(3) as u32,
                timeout: l.duration("script_timeout", default_script_timeout()),
            })
        }
        (Workload::Script, None) => {
            p.error(
                &l.span_of("workload"),
                &l.key_of("workload"),
                "workload = \"script\" needs `script`, the Ruby file to run",
                None,
            );
            None
        }
        (Workload::Http, Some(_)) => {
            p.error(
                &l.span_of("script"),
                &l.key_of("script"),
                "`script` is only used with workload = \"script\"",
                Some("add workload = \"script\" to the same table".into()),
            );
            None
        }
        (Workload::Http, None) => None,
    };
    script
}

/// Settings that do not apply to the workload would be silently unused: each is an error;
/// so are `duration` and `requests` together.
fn refuse_inapplicable(
    p: &mut Parser,
    l: &Lookup,
    layer: &Layer,
    workload: Workload,
    workload_known: bool,
) {
    // Settings that do not apply to this workload would be silently unused: refuse them.
    let applies = |key: &str| match (workload, key) {
        (_, "ruby" | "ruby_opts" | "env" | "workload" | "jit" | "allocator" | "gemfile") => true,
        (Workload::Script, k) => matches!(k, "script" | "script_args" | "runs" | "script_timeout"),
        (Workload::Http, k) => !matches!(k, "script" | "script_args" | "runs" | "script_timeout"),
    };
    for (key, placed) in layer {
        if workload_known && !applies(key) && key != "script" {
            let kind = match workload {
                Workload::Http => "http",
                Workload::Script => "script",
            };
            p.error(
                &placed.span,
                &placed.key,
                format!("`{key}` does not apply to workload = \"{kind}\""),
                Some(
                    "remove it, or move it to the configurations it applies to ([[configs]])"
                        .into(),
                ),
            );
        }
    }
    if workload == Workload::Http && l.get("requests").is_some() && l.get("duration").is_some() {
        p.error(
            &l.span_of("requests"),
            &l.key_of("requests"),
            "give either `duration` or `requests`, not both",
            None,
        );
    }
}

/// A custom server's argv, built now with a stand-in port (`server_command`), so a mistake
/// in it is an error of the file rather than of every trial; skipped when what it is built
/// from (the Ruby, the app, the counts) has an error already (since `errors_before`).
#[allow(clippy::too_many_arguments)]
fn check_custom_argv(
    p: &mut Parser,
    l: &Lookup,
    rejected: &BTreeSet<String>,
    errors_before: usize,
    ruby_argv: &[String],
    app_dir: &Path,
    processes: u32,
    threads: u32,
) {
    let server = ServerKind::Custom;
    // A custom argv is checked now, with a stand-in port, rather than failing every trial;
    // unless what it is built from (the Ruby, the app, the counts) has an error already.
    let argv_inputs = [
        "ruby",
        "ruby_opts",
        "jit",
        "app",
        "server",
        "server_argv",
        "processes",
        "threads",
    ];
    let inputs_wrong = argv_inputs.iter().any(|k| rejected.contains(*k))
        || p.errors[errors_before..]
            .iter()
            .any(|e| argv_inputs.contains(&setting_of(&e.key)));
    if !inputs_wrong {
        let launch = crate::servers::ServerLaunch {
            kind: server,
            ruby: ruby_argv,
            app_dir,
            port: 9,
            processes,
            threads,
            scratch_dir: &std::env::temp_dir(),
            custom_argv: &l.list("server_argv"),
            environment: "production",
            bundle_exec: false,
        };
        if let Err(e) = crate::servers::server_command(&launch) {
            p.error(
                &l.span_of("server_argv"),
                &l.key_of("server_argv"),
                format!("{e:#}"),
                None,
            );
        }
    }
}

/// Turns merged settings into a `ConfigSettings`, checking what needs several keys or the
/// file system: the Ruby, the app, the URL mix, the script, server combinations.
pub(crate) fn resolve(
    p: &mut Parser,
    layer: &Layer,
    rubies: &BTreeMap<String, (RubyDef, Option<Range<usize>>)>,
    config_span: &Option<Range<usize>>,
) -> Option<ConfigSettings> {
    let errors_before = p.errors.len();
    let l = Lookup { layer, config_span };

    // Settings whose value was rejected (reported already): checks that depend on them
    // would only report what follows from that error, so they are skipped.
    let rejected = p.rejected.clone();
    let (ruby, def) = choose_ruby(p, &l, rubies);
    let ruby = ruby.unwrap_or_default();
    let empty_def = RubyDef {
        argv: Vec::new(),
        env: BTreeMap::new(),
        gemfile: None,
    };
    let ruby_known = def.is_some();
    let def = def.unwrap_or(&empty_def);
    let ruby_opts = l.list("ruby_opts");
    let mut env = def.env.clone();
    if let Some(m) = l.get("env").and_then(|v| v.value.as_map()) {
        env.extend(m.clone());
    }

    let Knobs {
        jit,
        compact,
        allocator,
        ruby_argv,
        caps,
    } = resolve_knobs(p, &l, &ruby, def, ruby_known, &ruby_opts, &mut env);
    let ruby_engine = caps.as_ref().map(|c| c.engine.clone());

    let workload = match l.string("workload", "http").as_str() {
        "script" => Workload::Script,
        _ => Workload::Http,
    };
    let server = ServerKind::parse(&l.string("server", "puma")).unwrap_or(ServerKind::Puma);
    let processes = l.int("processes").unwrap_or(1) as u32;
    let threads = l.int("threads").unwrap_or(1) as u32;

    let (app, app_dir) = resolve_app(p, &l, workload, server, processes, threads, &rejected);

    let gemfile = resolve_gemfile(
        p,
        &l,
        &ruby,
        ruby_known,
        caps.is_some(),
        def,
        &mut env,
        workload,
        &app_dir,
    );

    let load = resolve_load(p, &l, workload, processes, threads, ruby_engine.as_deref());

    // With a rejected `workload`, which settings apply is unknown.
    let workload_known = !rejected.contains("workload");
    let script = resolve_script(p, &l, workload, workload_known);
    refuse_inapplicable(p, &l, layer, workload, workload_known);
    if workload == Workload::Http && server == ServerKind::Custom && ruby_known {
        check_custom_argv(
            p,
            &l,
            &rejected,
            errors_before,
            &ruby_argv,
            &app_dir,
            processes,
            threads,
        );
    }
    if p.errors.len() > errors_before || !ruby_known {
        return None;
    }
    Some(ConfigSettings {
        ruby,
        ruby_argv,
        ruby_opts,
        env,
        workload,
        app,
        app_dir,
        server,
        server_argv: l.list("server_argv"),
        processes,
        threads,
        port: l.int("port").unwrap_or(0) as u16,
        readiness_path: l.string("readiness_path", "/"),
        readiness_timeout: l.duration("readiness_timeout", Duration::from_secs(60)),
        stop_timeout: l.duration("stop_timeout", Duration::from_secs(10)),
        sample_interval: l.duration("sample_interval", Duration::from_secs(1)),
        max_error_rate: l.float("max_error_rate").unwrap_or(0.0),
        load,
        script,
        jit,
        allocator,
        compact,
        gemfile,
        ruby_engine,
    })
}
