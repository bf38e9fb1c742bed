//! What a configuration runs: the app (a bundled one or a directory with a `config.ru`),
//! its Gemfile and whether its bundle is installed, or a script workload.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::Lookup;
use crate::model::{
    default_script_timeout, AppCommit, RubyDef, ScriptSettings, Workload, BUNDLED_APPS,
};
use crate::parse::Parser;
use crate::servers::ServerKind;
use crate::settings::did_you_mean;

/// The app (a bundled name or a directory with a config.ru) and its directory, checked for
/// an HTTP workload with the server that will run it.
pub(super) fn resolve_app(
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
pub(super) fn resolve_gemfile(
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
            let path = p.resolve_path(&g.replace("{ruby}", ruby));
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

/// A script workload's script, its arguments, runs and timeout; `script` without one, or
/// one without `script`, is an error.
pub(super) fn resolve_script(
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

/// `ref` with `app_repo`: the commit the configuration runs, resolved now (so every trial
/// runs the same commit whatever the branch does meanwhile), and the app's directory as
/// the canonical path inside the repository that a checkout maps (`in_checkout`). An HTTP
/// app must have its `config.ru` at that commit. None without `ref`.
pub(super) fn resolve_app_commit(
    p: &mut Parser,
    l: &Lookup,
    workload: Workload,
    app_dir: PathBuf,
) -> (PathBuf, Option<AppCommit>) {
    let git_ref = l
        .get("ref")
        .and_then(|v| v.value.as_str())
        .map(str::to_string);
    let repo = l
        .get("app_repo")
        .and_then(|v| v.value.as_str())
        .map(str::to_string);
    let (git_ref, repo) = match (git_ref, repo) {
        (None, None) => return (app_dir, None),
        (Some(_), None) => {
            p.error(
                &l.span_of("ref"),
                &l.key_of("ref"),
                "`ref` needs `app_repo`, the git repository the app is in",
                Some("add app_repo = \".\" (or the repository's path) beside it".into()),
            );
            return (app_dir, None);
        }
        (None, Some(_)) => {
            p.error(
                &l.span_of("app_repo"),
                &l.key_of("app_repo"),
                "`app_repo` needs `ref`, the commit to run (a branch, a tag, a hash)",
                None,
            );
            return (app_dir, None);
        }
        (Some(r), Some(repo)) => (r, repo),
    };
    match AppCommit::resolve(
        &p.resolve_path(&repo),
        &git_ref,
        &app_dir,
        workload == Workload::Http,
    ) {
        Ok((in_repo, commit)) => (in_repo, Some(commit)),
        Err(e) => {
            p.error(&l.span_of(e.key), &l.key_of(e.key), e.message, e.help);
            (app_dir, None)
        }
    }
}

/// With a Gemfile and a built-in server: the trial's server command, up to the server's
/// executable, run now with `--version` under the app's bundle (`servers::server_check_command`).
/// It fails when the server's gem is not in the bundle ("puma is not currently included in
/// the bundle", which `bundle check` cannot see) or when the Ruby refuses a flag in RUBYOPT;
/// and the Ruby that ran the executable (after any exec by `bundle exec`) must have the
/// configuration's JIT on, and no other.
#[allow(clippy::too_many_arguments)]
pub(super) fn check_server_in_bundle(
    p: &mut Parser,
    l: &Lookup,
    ruby: &str,
    server: ServerKind,
    ruby_argv: &[String],
    env: &BTreeMap<String, String>,
    app_dir: &Path,
    gemfile: &Path,
    jit: Option<rubies::knobs::Jit>,
) {
    let Some((executable, gem)) = crate::servers::server_executable(server) else {
        return;
    };
    let command =
        match crate::servers::server_check_command(server, ruby_argv, app_dir, "production") {
            Ok(Some(c)) => c,
            Ok(None) => return,
            Err(e) => {
                let key = if l.get("ruby_opts").is_some() {
                    "ruby_opts"
                } else {
                    "ruby"
                };
                p.error(&l.span_of(key), &l.key_of(key), format!("{e:#}"), None);
                return;
            }
        };
    // The trial's environment: the server's variables, then the configuration's, with the
    // Ruby's flags in front of RUBYOPT.
    let mut vars: BTreeMap<String, String> = command.env.iter().cloned().collect();
    vars.extend(env.iter().map(|(k, v)| (k.clone(), v.clone())));
    if let Some(flags) = &command.rubyopt {
        let existing = vars
            .get("RUBYOPT")
            .cloned()
            .or_else(|| std::env::var("RUBYOPT").ok());
        let rubyopt = crate::servers::prepend_rubyopt(flags, existing.as_deref());
        vars.insert("RUBYOPT".into(), rubyopt);
    }
    let pairs: Vec<(String, String)> = vars.into_iter().collect();
    let chosen_by = if l.get("gemfile").is_some() {
        "gemfile"
    } else {
        "app"
    };
    let shown = command.argv.join(" ");
    match p.server_check(&command.argv, &pairs) {
        Err(e) => {
            let help = server_gem_help(app_dir, gemfile, executable, gem, server);
            p.error(
                &l.span_of(chosen_by),
                &l.key_of(chosen_by),
                format!(
                    "the server {server} (gem {gem:?}) does not start under the bundle of {} for Ruby {ruby:?}: {e}",
                    gemfile.display()
                ),
                Some(help),
            );
        }
        Ok(answer) => {
            let Some(jit) = jit else { return };
            let on = &answer.jits_enabled;
            let in_force = match jit {
                rubies::knobs::Jit::None => on.is_empty(),
                j => on.iter().any(|o| o == j.as_str()) && on.len() == 1,
            };
            if !in_force {
                p.error(
                    &l.span_of("jit"),
                    &l.key_of("jit"),
                    format!(
                        "jit = {:?} is not in force in the Ruby that runs {executable} under `bundle exec` with {}: {} on in `{shown}`",
                        jit.as_str(),
                        gemfile.display(),
                        if on.is_empty() { "no JIT".to_string() } else { on.join(", ") },
                    ),
                    Some("the Ruby's flags go to that Ruby through RUBYOPT; a RUBYOPT or RUBY_YJIT_ENABLE of this configuration's `env` may override them".into()),
                );
            }
        }
    }
}

/// How to add a server's gem to an app's bundle without editing the app: a Gemfile of the
/// experiment written by `rubyrace gemfile`, or the app's own `Gemfile.local` when its
/// Gemfile loads one.
fn server_gem_help(
    app_dir: &Path,
    gemfile: &Path,
    executable: &str,
    gem: &str,
    server: ServerKind,
) -> String {
    let mut help = format!(
        "if {gem} is not in the app's bundle, add it without editing the app: `rubyrace gemfile {} --server {server}` writes Gemfile.rubyrace (the app's Gemfile through eval_gemfile, plus gem {gem:?}); install it (BUNDLE_GEMFILE=$PWD/Gemfile.rubyrace ruby -S bundle install) and set gemfile = \"Gemfile.rubyrace\"",
        app_dir.display()
    );
    if gemfile_loads_local(gemfile) {
        let local = gemfile.with_file_name("Gemfile.local");
        help.push_str(&format!(
            "; or, as this app's Gemfile loads Gemfile.local, add gem {gem:?} to {}",
            local.display()
        ));
    }
    if executable != gem {
        help.push_str(&format!(
            " ({executable} is an executable of the gem {gem})"
        ));
    }
    help
}

/// Whether a Gemfile loads a `Gemfile.local` beside it (a common convention for local
/// additions that are not committed).
fn gemfile_loads_local(gemfile: &Path) -> bool {
    std::fs::read_to_string(gemfile).is_ok_and(|text| {
        text.lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .any(|l| l.contains("Gemfile.local"))
    })
}
