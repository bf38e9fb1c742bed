//! `rubyrace init [APP_DIR]`: a starting experiment for an app rubyrace has never seen. It
//! reads the app's files (`experiment::starter`), lists candidate GET paths (the root, and
//! for Rails the index routes `rails routes` prints), boots the app once per candidate
//! through a short run of its own in a temporary directory to keep the paths that answer
//! 2xx, writes an experiment comparing the interpreter with YJIT on the app's own server
//! settings, and prints its dry run. The app's directory is read, never written.
//! `--ci github` writes a GitHub Actions workflow instead (`ci_workflow`).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use experiment::starter::{self, AppSurvey, Framework, PathsLoad, Purpose};

use super::ci_workflow;
use super::demo::parsed;
use super::run::RunArgs;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  rubyrace init ~/src/shop                  # writes rubyrace.toml here, then its dry run
  rubyrace init ~/src/shop -o perf/jit.toml
  rubyrace init . --ci github               # perf/rubyrace-check.toml and .github/workflows/rubyrace.yml

Nothing is written into the app's directory unless -o (or the current directory) points
there. See docs/init.md.")]
pub struct InitArgs {
    /// The app's directory (the one holding its config.ru), or a bundled app's name.
    #[arg(value_name = "APP_DIR", default_value = ".")]
    pub app: String,
    /// The experiment file to write [default: rubyrace.toml in the current directory; with
    /// --ci github, perf/rubyrace-check.toml in the app's repository, beside the workflow
    /// .github/workflows/rubyrace.yml].
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace the file if it exists.
    #[arg(long)]
    pub force: bool,
    /// Do not boot the app to find which paths answer 2xx: write the root (or the first
    /// index route) unchecked.
    #[arg(long, conflicts_with = "ci")]
    pub no_check: bool,
    /// Write a CI workflow for the app's repository instead: `github` (GitHub Actions), which
    /// runs `rubyrace check` on every pull request against its base.
    #[arg(long, value_name = "SYSTEM", value_parser = ["github"])]
    pub ci: Option<String>,
}

pub fn init(args: InitArgs) -> Result<ExitCode> {
    match init_inner(&args) {
        Ok(code) => Ok(code),
        Err(e) => {
            eprintln!("rubyrace: error: {e:#}");
            Ok(ExitCode::from(2))
        }
    }
}

fn init_inner(args: &InitArgs) -> Result<ExitCode> {
    let (dir, bundled) = app_dir(&args.app)?;
    let mut survey = starter::survey(&dir, bundled.as_deref())?;
    // With --ci, the files go into the app's repository: the gate's experiment names the app
    // relative to itself, so the clone in CI finds it wherever it is checked out.
    let repo = match &args.ci {
        Some(_) => Some(repository_root(&survey.dir)?),
        None => None,
    };
    let out = match (&args.output, &repo) {
        (Some(o), _) => o.clone(),
        (None, Some(root)) => root.join(ci_workflow::GATE_EXPERIMENT),
        (None, None) => PathBuf::from("rubyrace.toml"),
    };
    let workflow = repo.as_ref().map(|root| root.join(ci_workflow::WORKFLOW));
    for file in std::iter::once(&out).chain(workflow.iter()) {
        if file.exists() && !args.force {
            bail!(
                "{} exists; give another file with -o, or --force to replace it",
                file.display()
            );
        }
    }
    print_survey(&survey);
    let candidates = candidate_paths(&survey);
    let (load, failures) = if args.no_check {
        let path = candidates.last().cloned().unwrap_or_else(|| "/".into());
        println!("init: not booting the app (--no-check): path {path} is unchecked");
        (PathsLoad::Path(path), Vec::new())
    } else {
        let checked = check_paths(&survey, &candidates)?;
        let passed: Vec<String> = checked
            .iter()
            .filter(|c| c.answered_2xx)
            .map(|c| c.path.clone())
            .collect();
        let failures: Vec<PathCheck> = checked.into_iter().filter(|c| !c.answered_2xx).collect();
        let load = match passed.len() {
            0 => PathsLoad::Path("/".into()),
            1 => PathsLoad::Path(passed[0].clone()),
            _ => PathsLoad::Mix {
                file: urls_file_name(&out),
                paths: passed,
            },
        };
        (load, failures)
    };
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot make {}", parent.display()))?;
    }
    let purpose = if repo.is_some() {
        let from = std::path::absolute(&out)?
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        survey.app_setting = relative_path(&from, &survey.dir);
        Purpose::Gate { load: &load }
    } else {
        Purpose::Experiment { load: &load }
    };
    let text = starter::experiment_text(&survey, &purpose);
    if let PathsLoad::Mix { file, paths } = &load {
        let urls = out.with_file_name(file);
        write_new(&urls, &starter::url_mix_text(paths), args.force)?;
        println!("init: wrote {} ({} paths)", urls.display(), paths.len());
    }
    write_new(&out, &text, args.force)?;
    println!("init: wrote {}", out.display());
    if let (Some(root), Some(workflow)) = (&repo, &workflow) {
        let experiment = std::path::absolute(&out)?;
        let experiment = experiment.strip_prefix(root).unwrap_or(&experiment);
        std::fs::create_dir_all(workflow.parent().unwrap_or(root))?;
        write_new(
            workflow,
            &ci_workflow::github_workflow(&ci_workflow::default_deb_url(), experiment),
            args.force,
        )?;
        println!("init: wrote {}", workflow.display());
    }
    let nothing_answered = !args.no_check && failures.len() == candidates.len();
    if nothing_answered {
        eprintln!(
            "rubyrace: error: no GET path of the app answered 2xx when it was booted; the file names \"/\": edit `path` and `readiness_path`:"
        );
        for f in &failures {
            eprintln!("  {}: {}", f.path, f.why);
        }
        return Ok(ExitCode::from(1));
    }
    for f in &failures {
        println!("init: left out {}: {}", f.path, f.why);
    }
    println!();
    println!(
        "init: its dry run (rubyrace run {} --dry-run):",
        out.display()
    );
    let plan = super::run::run(parsed::<RunArgs>(&[
        out.clone().into_os_string(),
        "--dry-run".into(),
    ])?)?;
    if plan == ExitCode::SUCCESS {
        println!();
        if repo.is_some() {
            println!(
                "init: next: commit {} and the workflow; try the gate here first: `rubyrace check {} --app-repo . --base main --head HEAD`",
                out.display(),
                out.display()
            );
        } else {
            println!(
                "init: next: `rubyrace run {} --smoke` (a minute: does it boot and answer?), then `rubyrace run {}`",
                out.display(),
                out.display()
            );
        }
    }
    Ok(plan)
}

/// The root of the git repository `dir` is in.
fn repository_root(dir: &Path) -> Result<PathBuf> {
    sys::git::toplevel(dir).map_err(|_| {
        anyhow::anyhow!(
            "--ci: {} is not in a git repository; the workflow gates the repository's pull requests",
            dir.display()
        )
    })
}

/// `to` relative to the directory `from` (both absolute): "..", "../app", ".".
fn relative_path(from: &Path, to: &Path) -> String {
    let from: Vec<_> = from.components().collect();
    let to: Vec<_> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".into(); from.len() - common];
    parts.extend(
        to[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    }
}

/// The app's directory, and its name when it is a bundled app given by name.
fn app_dir(app: &str) -> Result<(PathBuf, Option<String>)> {
    let given = PathBuf::from(app);
    if given.is_dir() {
        return Ok((given, None));
    }
    let bundled = rubies::support::bundled_apps_dir().join(app);
    if experiment::BUNDLED_APPS.contains(&app) && bundled.is_dir() {
        return Ok((bundled, Some(app.to_string())));
    }
    bail!(
        "{app}: no such directory (nor a bundled app: {})",
        experiment::BUNDLED_APPS.join(", ")
    )
}

/// The URL mix's file name for the experiment `out`: `NAME.urls` beside it.
fn urls_file_name(out: &Path) -> String {
    let stem = out
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "rubyrace".into());
    format!("{stem}.urls")
}

fn write_new(path: &Path, text: &str, force: bool) -> Result<()> {
    if path.exists() && !force {
        bail!(
            "{} exists; give another file with -o, or --force to replace it",
            path.display()
        );
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

fn print_survey(s: &AppSurvey) {
    println!(
        "init: {} is a {} app ({})",
        s.dir.display(),
        s.framework.value.name(),
        s.framework.from
    );
    match &s.gemfile {
        Some(g) => println!(
            "init: its Gemfile {} (the server starts through `bundle exec`)",
            g.display()
        ),
        None => println!("init: no Gemfile: the Ruby's own gems"),
    }
    println!(
        "init: {} ({}), {} process(es) ({}) × {} threads ({})",
        s.server.value.as_str(),
        s.server.from,
        s.processes.value,
        s.processes.from,
        s.threads.value,
        s.threads.from
    );
    println!("init: database: {}", s.database.from);
    if let Some(r) = &s.redis {
        println!("init: redis: {r}");
    }
}

/// At most this many index routes besides the root.
const MAX_ROUTES: usize = 5;

/// The root, and for a Rails app with `bin/rails` its index routes (GET, no parameters,
/// `#index` actions, none of Rails' own `/rails/...`), as `rails routes` lists them.
fn candidate_paths(s: &AppSurvey) -> Vec<String> {
    let mut paths = vec!["/".to_string()];
    if s.framework.value != Framework::Rails || !s.has_bin_rails {
        return paths;
    }
    let ruby = std::env::var("RUBYRACE_INIT_RUBY").unwrap_or_else(|_| "ruby".into());
    let mut cmd = Command::new(ruby);
    cmd.args(["bin/rails", "routes"])
        .current_dir(&s.dir)
        .env("RAILS_ENV", "production")
        .env("RAILS_LOG_TO_STDOUT", "1")
        .env("SECRET_KEY_BASE", "rubyrace-init-routes");
    if let Some(g) = &s.gemfile {
        cmd.env("BUNDLE_GEMFILE", g);
    }
    println!("init: listing the app's routes (bin/rails routes)");
    match rubies::discovery::run_captured(cmd, Duration::from_secs(120)) {
        Ok(out) if out.status.success() => {
            let routes = index_routes(&String::from_utf8_lossy(&out.stdout));
            paths.extend(routes.into_iter().filter(|p| p != "/").take(MAX_ROUTES));
        }
        Ok(out) => println!(
            "init: `bin/rails routes` failed ({}), so only / is tried: {}",
            sys::process::describe_status(out.status),
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
        ),
        Err(e) => println!("init: cannot run bin/rails routes ({e}), so only / is tried"),
    }
    paths
}

/// The parameterless GET index routes of `rails routes`' output, in its order.
pub fn index_routes(listing: &str) -> Vec<String> {
    let mut paths = Vec::new();
    for line in listing.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(i) = words.iter().position(|w| *w == "GET") else {
            continue;
        };
        let (Some(pattern), Some(action)) = (words.get(i + 1), words.get(i + 2)) else {
            continue;
        };
        let path = pattern.trim_end_matches("(.:format)");
        if !path.starts_with('/')
            || path.contains(':')
            || path.contains('*')
            || path.contains('(')
            || path.starts_with("/rails/")
            || !action.ends_with("#index")
        {
            continue;
        }
        if !paths.iter().any(|p| p == path) {
            paths.push(path.to_string());
        }
    }
    paths
}

/// One candidate path's answer when the app was booted.
struct PathCheck {
    path: String,
    answered_2xx: bool,
    why: String,
}

/// Boots the app once per candidate (a run of one block, each candidate its own
/// configuration and readiness path, two requests each) in a temporary directory, and says
/// which answered 2xx. A readiness path that answers another status fails its trial at
/// once, with the status in the trial's reason.
fn check_paths(s: &AppSurvey, candidates: &[String]) -> Result<Vec<PathCheck>> {
    let scratch = tempfile::Builder::new()
        .prefix("rubyrace-init-")
        .tempdir()
        .context("cannot make a temporary directory")?;
    let file = scratch.path().join("paths.toml");
    std::fs::write(
        &file,
        starter::experiment_text(s, &Purpose::PathCheck { candidates }),
    )?;
    let results = scratch.path().join("results");
    println!(
        "init: booting the app once per candidate path ({}) to keep those that answer 2xx; the run's output follows",
        candidates.join(", ")
    );
    let code = super::run::run(parsed::<RunArgs>(&[
        file.into_os_string(),
        "-o".into(),
        results.clone().into_os_string(),
    ])?)?;
    if !results.join("results.db").is_file() {
        bail!("the app could not be booted to check its paths (the run above says why; {code:?})");
    }
    println!("init: (that run's directory was temporary and is removed)");
    let store = results::store::Store::open_read_only(&results)?;
    let trials = store.trial_results()?;
    Ok(candidates
        .iter()
        .map(|path| {
            let trial = trials
                .iter()
                .find(|t| t.settings.load.path.as_deref().unwrap_or("/") == path);
            let (answered_2xx, why) = match trial {
                None => (false, "not checked".to_string()),
                Some(t) => {
                    let ok = t.load.as_ref().is_some_and(|l| {
                        l.requests > 0 && l.status.keys().all(|k| k.starts_with('2'))
                    });
                    let mut why = t
                        .reason
                        .clone()
                        .unwrap_or_else(|| format!("{:?}", t.status));
                    if !ok {
                        why.push_str(&server_log_end(&results, t.id.trial_id));
                    }
                    (ok, why)
                }
            };
            PathCheck {
                path: path.clone(),
                answered_2xx,
                why,
            }
        })
        .collect())
}

/// What a trial's server log says went wrong, for a path that did not answer 2xx: the last
/// exception a Rails log names (`ActiveRecord::StatementInvalid (PG::UndefinedTable: ...`),
/// else Ruby's own error line, else the log's last lines. Its stderr first (Puma's), then
/// its stdout (a Rails log with RAILS_LOG_TO_STDOUT).
fn server_log_end(results: &Path, trial_id: usize) -> String {
    let dir = results::store::trial_dir(results, trial_id);
    let mut last_lines = None;
    use results::store::trial_files::{SERVER_STDERR, SERVER_STDOUT};
    for name in [SERVER_STDERR, SERVER_STDOUT] {
        let path = dir.join(name);
        let tail = sys::process::tail_file(&path, 16 * 1024);
        if let Some(line) = tail.lines().rev().find(|l| names_an_exception(l)) {
            return format!("; the server's log: {}", line.trim());
        }
        if let Some(line) = sys::process::ruby_error_line(&path) {
            return format!("; the server's log: {line}");
        }
        let lines: Vec<&str> = tail.lines().filter(|l| !l.trim().is_empty()).collect();
        if last_lines.is_none() && !lines.is_empty() {
            let last = &lines[lines.len().saturating_sub(3)..];
            last_lines = Some(format!(
                "; the server's {name} ends:\n      {}",
                last.join("\n      ")
            ));
        }
    }
    last_lines.unwrap_or_default()
}

/// A log line with a namespaced exception class followed by its message in parentheses, as
/// Rails logs a request's error.
fn names_an_exception(line: &str) -> bool {
    let words: Vec<&str> = line.split_whitespace().collect();
    words.windows(2).any(|w| {
        w[0].starts_with(|c: char| c.is_ascii_uppercase())
            && w[0].contains("::")
            && w[0]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == ':' || c == '_')
            && w[1].starts_with('(')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_routes_keep_parameterless_get_index_actions() {
        // Trimmed from `bin/rails routes` of a Rails 6.1 app with `resources :posts` and a
        // root, 2026-11-29.
        let listing = "\
                                   Prefix Verb   URI Pattern                                                                                       Controller#Action
                                    posts GET    /posts(.:format)                                                                                  posts#index
                                          POST   /posts(.:format)                                                                                  posts#create
                                 new_post GET    /posts/new(.:format)                                                                              posts#new
                                edit_post GET    /posts/:id/edit(.:format)                                                                         posts#edit
                                     post GET    /posts/:id(.:format)                                                                              post#show
                                     root GET    /                                                                                                 hello#index
        rails_service_blob GET    /rails/active_storage/blobs/redirect/:signed_id/*filename(.:format)                               active_storage/blobs/redirect#show
     rails_conductor_inbound_emails GET    /rails/conductor/action_mailbox/inbound_emails(.:format)                                          rails/conductor/action_mailbox/inbound_emails#index
";
        assert_eq!(index_routes(listing), vec!["/posts", "/"]);
    }
}
