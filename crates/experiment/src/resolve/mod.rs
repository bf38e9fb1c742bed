//! From merged settings to a `ConfigSettings`: what needs several keys or the file system
//! (the Ruby, the app, the URL mix, the script, server combinations, the load settings).
//!
//! [`resolve`] reads one configuration's merged layer through a [`Lookup`] and calls one
//! function per part: `ruby` (the Ruby and its knobs), `app` (the app, its Gemfile, or the
//! script), `load_settings` (the load); then it refuses what does not apply together.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use crate::model::{
    ConfigSettings, Profiler, RubyCommit, RubyDef, Workload, DEFAULT_PROFILE_RATE_HZ,
};
use crate::parse::{Layer, Parser, Placed};
use crate::servers::ServerKind;
use crate::settings::setting_of;

mod app;
mod load_settings;
mod ruby;

use app::{
    check_server_in_bundle, resolve_app, resolve_app_commit, resolve_gemfile, resolve_script,
};
use load_settings::resolve_load;
use ruby::{choose_ruby, resolve_knobs, resolve_ruby_commit, Knobs};

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

    pub(super) fn list(&self, k: &str) -> Vec<String> {
        self.get(k)
            .and_then(|v| v.value.as_list())
            .map(<[String]>::to_vec)
            .unwrap_or_default()
    }
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
        (
            _,
            "ruby"
            | "ruby_repo"
            | "ruby_ref"
            | "ruby_configure_opts"
            | "ruby_opts"
            | "env"
            | "workload"
            | "jit"
            | "allocator"
            | "gemfile",
        ) => true,
        (Workload::Script, k) => matches!(
            k,
            "script"
                | "script_args"
                | "runs"
                | "script_timeout"
                | "profile"
                | "profile_rate"
                | "profile_runs"
                | "perf_map"
                | "setup"
        ),
        (Workload::Http, k) => !matches!(
            k,
            "script" | "script_args" | "runs" | "script_timeout" | "profile_runs"
        ),
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
            host: std::net::Ipv4Addr::LOCALHOST.into(),
            port: 9,
            processes,
            threads,
            scratch_dir: &std::env::temp_dir(),
            custom_argv: &l.list("server_argv"),
            environment: "production",
            bundle_exec: false,
            tls: None,
            preload: false,
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
    let (ruby, def, ruby_commit) = which_ruby(p, &l, rubies);
    let ruby_known = def.is_some();
    let def = def.unwrap_or(RubyDef {
        argv: Vec::new(),
        env: BTreeMap::new(),
        gemfile: None,
    });
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
    } = resolve_knobs(p, &l, &ruby, &def, ruby_known, &ruby_opts, &mut env);
    let ruby_engine = caps.as_ref().map(|c| c.engine.clone());

    let workload = match l.string("workload", "http").as_str() {
        "script" => Workload::Script,
        _ => Workload::Http,
    };
    let server = ServerKind::parse(&l.string("server", "puma")).unwrap_or(ServerKind::Puma);
    let processes = l.int("processes").unwrap_or(1) as u32;
    let threads = l.int("threads").unwrap_or(1) as u32;

    let (app, app_dir) = resolve_app(p, &l, workload, server, processes, threads, &rejected);
    let (app_dir, app_commit) = resolve_app_commit(p, &l, workload, app_dir);

    let gemfile = resolve_gemfile(
        p,
        &l,
        &ruby,
        ruby_known,
        caps.is_some(),
        &def,
        &mut env,
        workload,
        &app_dir,
    );

    // The server under the app's bundle, as a trial will start it: only when nothing it
    // is built from has an error already (a failed `bundle check` says more).
    if let Some(g) = gemfile.as_ref().filter(|g| g.is_file()) {
        let clean = p.errors.len() == errors_before && !rejected.contains("server");
        if workload == Workload::Http && caps.is_some() && clean {
            check_server_in_bundle(p, &l, &ruby, server, &ruby_argv, &env, &app_dir, g, jit);
        }
    }

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
    let (profile, profile_measured, profile_rate, profile_runs) = resolve_profile(p, &l, &rejected);
    let tls = resolve_tls(p, &l, server, &rejected);
    let preload =
        workload == Workload::Http && resolve_preload(p, &l, server, processes, &rejected);
    // `{ruby}` in setup is the Ruby itself, without the configuration's JIT or options.
    let setup = resolve_setup(p, &l, &def.argv, &app_dir);
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
        app_commit,
        ruby_commit,
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
        profile,
        profile_measured,
        profile_rate,
        profile_runs,
        setup,
        tls,
        preload,
    })
}

/// The configuration's Ruby: its name, its definition (None when it cannot be known, an
/// error reported already) and, for a Ruby built from a commit, the commit.
fn which_ruby(
    p: &mut Parser,
    l: &Lookup,
    rubies: &BTreeMap<String, (RubyDef, Option<Range<usize>>)>,
) -> (String, Option<RubyDef>, Option<RubyCommit>) {
    // A commit's Ruby (`ruby_ref`), or one of `[rubies]`.
    let (ruby, def, ruby_commit) = match resolve_ruby_commit(p, l) {
        Some(Some((name, def, commit))) => (Some(name), Some(def), Some(commit)),
        Some(None) => (None, None, None),
        None => {
            let (ruby, def) = choose_ruby(p, l, rubies);
            (ruby, def.cloned(), None)
        }
    };
    (ruby.unwrap_or_default(), def, ruby_commit)
}

/// The profilers chosen, `profile_measured`, and the profile's rate and runs; an error
/// for `profile_measured` without a profiler.
fn resolve_profile(
    p: &mut Parser,
    l: &Lookup,
    rejected: &BTreeSet<String>,
) -> (Vec<Profiler>, bool, u32, u32) {
    let profile: Vec<Profiler> = l
        .list("profile")
        .iter()
        .filter_map(|name| Profiler::parse(name))
        .collect();
    let profile_measured = l
        .get("profile_measured")
        .and_then(|v| v.value.as_bool())
        .unwrap_or(false);
    if profile_measured && profile.is_empty() && !rejected.contains("profile") {
        p.error(
            &l.span_of("profile_measured"),
            &l.key_of("profile_measured"),
            "profile_measured = true, but no profiler is chosen",
            Some("add profile = \"rbspy\" (or \"perf\", or both)".into()),
        );
    }
    let (profile_rate, profile_runs) = resolve_profile_sampling(
        p,
        l,
        &profile,
        rejected.contains("profile"),
        perf_max_sample_rate(),
    );
    (profile, profile_measured, profile_rate, profile_runs)
}

/// `tls = true`, which only Puma is started with; an error for another server.
fn resolve_tls(
    p: &mut Parser,
    l: &Lookup,
    server: ServerKind,
    rejected: &BTreeSet<String>,
) -> bool {
    let tls = l
        .get("tls")
        .and_then(|v| v.value.as_bool())
        .unwrap_or(false);
    if tls && server != ServerKind::Puma && !rejected.contains("server") {
        p.error(
            &l.span_of("tls"),
            &l.key_of("tls"),
            format!("tls = true starts Puma with an ssl:// bind and a certificate made for the run; server = \"{}\" is not supported", server.as_str()),
            Some("use server = \"puma\", or remove tls".into()),
        );
    }
    tls
}

/// `preload = true`: a master that loads the app and forks workers, which only Puma's
/// cluster mode and unicorn have.
fn resolve_preload(
    p: &mut Parser,
    l: &Lookup,
    server: ServerKind,
    processes: u32,
    rejected: &BTreeSet<String>,
) -> bool {
    let preload = l
        .get("preload")
        .and_then(|v| v.value.as_bool())
        .unwrap_or(false);
    if !preload || rejected.contains("server") || rejected.contains("processes") {
        return preload;
    }
    let problem = if !matches!(server, ServerKind::Puma | ServerKind::Unicorn) {
        Some((
            format!("preload = true loads the app in a master before it forks workers, which server = \"{}\" does not do", server.as_str()),
            "use server = \"puma\" or \"unicorn\" with processes above 1, or remove preload",
        ))
    } else if processes < 2 {
        Some((
            format!("preload = true needs workers to fork, but processes = {processes} runs the app in one process"),
            "set processes = 2 or more, or remove preload",
        ))
    } else {
        None
    };
    if let Some((message, help)) = problem {
        p.error(
            &l.span_of("preload"),
            &l.key_of("preload"),
            message,
            Some(help.into()),
        );
    }
    preload
}

/// `profile_rate` and `profile_runs`, each refused without a profiler (it would be silently
/// unused), and a rate perf would refuse: above `perf_max` (this machine's
/// `kernel.perf_event_max_sample_rate`, when known) with perf among the profilers.
fn resolve_profile_sampling(
    p: &mut Parser,
    l: &Lookup,
    profile: &[Profiler],
    profile_rejected: bool,
    perf_max: Option<u32>,
) -> (u32, u32) {
    let rate = l
        .int("profile_rate")
        .map_or(DEFAULT_PROFILE_RATE_HZ, |r| r as u32);
    let runs = l.int("profile_runs").map_or(1, |r| r as u32);
    for key in ["profile_rate", "profile_runs"] {
        if l.get(key).is_some() && profile.is_empty() && !profile_rejected {
            p.error(
                &l.span_of(key),
                &l.key_of(key),
                format!("{key} is set, but no profiler is chosen"),
                Some("add profile = \"rbspy\" (or \"perf\", or both), or remove it".into()),
            );
        }
    }
    if let Some((message, help)) = perf_refuses(rate, profile, perf_max) {
        p.error(
            &l.span_of("profile_rate"),
            &l.key_of("profile_rate"),
            message,
            Some(help),
        );
    }
    (rate, runs)
}

/// Why perf would refuse `rate` (with perf among `profile`, above `perf_max`), and the fix.
pub(crate) fn perf_refuses(
    rate: u32,
    profile: &[Profiler],
    perf_max: Option<u32>,
) -> Option<(String, String)> {
    let max = perf_max.filter(|&max| rate > max && profile.contains(&Profiler::Perf))?;
    Some((
        format!(
            "profile_rate = {rate}, but perf refuses a rate above this machine's \
             kernel.perf_event_max_sample_rate, {max} now"
        ),
        format!(
            "lower profile_rate to {max} or less, or raise the limit: sysctl \
             kernel.perf_event_max_sample_rate={rate} (the kernel lowers it again when \
             sampling takes too long)"
        ),
    ))
}

/// `kernel.perf_event_max_sample_rate`: the highest rate perf records at, here and now.
fn perf_max_sample_rate() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The placeholders of a `setup` command.
const SETUP_PLACEHOLDERS: [&str; 2] = ["{ruby}", "{app}"];

/// `setup`: each command with `{ruby}` (the Ruby's argv, as separate arguments; only as a
/// whole argument) and `{app}` (the app directory, anywhere) expanded.
fn resolve_setup(
    p: &mut Parser,
    l: &Lookup,
    ruby_argv: &[String],
    app_dir: &std::path::Path,
) -> Vec<Vec<String>> {
    let Some(placed) = l.get("setup") else {
        return Vec::new();
    };
    let Some(commands) = placed.value.as_argv_list() else {
        return Vec::new();
    };
    let (span, key) = (placed.span.clone(), placed.key.clone());
    let app = app_dir.to_string_lossy();
    let mut expanded = Vec::new();
    for (i, command) in commands.iter().enumerate() {
        let mut argv = Vec::new();
        for arg in command {
            if arg == "{ruby}" {
                argv.extend(ruby_argv.iter().cloned());
            } else if arg.contains("{ruby}") {
                p.error(&span, &format!("{key}[{i}]"), format!("{{ruby}} must be an argument on its own (it expands to several arguments), not part of {arg:?}"), None);
            } else if let Some(unknown) =
                crate::servers::first_unknown_placeholder(arg, &SETUP_PLACEHOLDERS)
            {
                p.error(&span, &format!("{key}[{i}]"), format!("unknown placeholder {unknown} in {arg:?}; the placeholders of setup are {}", SETUP_PLACEHOLDERS.join(", ")), None);
            } else {
                argv.push(arg.replace("{app}", &app));
            }
        }
        expanded.push(argv);
    }
    expanded
}
