//! The text `rubyrace init` writes for a surveyed app: the experiment (or the gate's, or
//! the short run that checks which paths answer 2xx), every key with a comment saying where
//! its value came from, and the URL mix.

use std::fmt::Write as _;

use super::{AppSurvey, Database, Framework};

/// What the written file is for: the run itself, or the short check of which paths answer
/// 2xx (one configuration per candidate path, each its own readiness path, a few requests).
#[derive(Clone, Debug)]
pub enum Purpose<'a> {
    /// The experiment, loading `load` (a path, or a URL mix file beside the experiment).
    Experiment { load: &'a PathsLoad },
    /// The pull-request gate's experiment (`rubyrace check`): one configuration, the app's
    /// own settings, no precision of its own (the gate brings its rule).
    Gate { load: &'a PathsLoad },
    /// The check of `candidates`.
    PathCheck { candidates: &'a [String] },
}

/// The load the experiment sends.
#[derive(Clone, Debug)]
pub enum PathsLoad {
    /// One path.
    Path(String),
    /// Several, in equal weights, from a URL mix file (its name, relative to the
    /// experiment's directory), with the paths it holds.
    Mix { file: String, paths: Vec<String> },
}

impl PathsLoad {
    pub fn readiness_path(&self) -> &str {
        match self {
            PathsLoad::Path(p) => p,
            PathsLoad::Mix { paths, .. } => &paths[0],
        }
    }
}

/// The URL mix file's text for `paths`: one line each, equal weights.
pub fn url_mix_text(paths: &[String]) -> String {
    let mut text = String::from(
        "# Written by `rubyrace init`: the GET paths that answered 2xx, in equal weights.\n\
         # [WEIGHT] [METHOD] PATH per line (docs/load.md#url-mixes).\n",
    );
    for p in paths {
        let _ = writeln!(text, "1 GET {p}");
    }
    text
}

/// A TOML string.
fn q(s: &str) -> String {
    toml_edit::Value::from(s).to_string()
}

/// The experiment file's text (or the path check's) for the surveyed app.
/// The experiment file's text (or the path check's) for the surveyed app: its header
/// comment, root keys, `[settings]`, configurations and services, in the order TOML needs.
pub fn experiment_text(app: &AppSurvey, purpose: &Purpose) -> String {
    let mut t = String::new();
    header_text(&mut t, app, purpose);
    root_keys_text(&mut t, app, purpose);
    settings_text(&mut t, app, purpose);
    configurations_text(&mut t, purpose);
    services_text(&mut t, app);
    t
}

/// The comment that opens the file: what it asks and how to run it.
fn header_text(w: &mut String, app: &AppSurvey, purpose: &Purpose) {
    let check = matches!(purpose, Purpose::PathCheck { .. });
    let gate = matches!(purpose, Purpose::Gate { .. });
    if gate {
        let _ = writeln!(
            w,
            "# Written by `rubyrace init --ci github` for {} ({} app): the experiment the pull-request\n\
             # gate runs (.github/workflows/rubyrace.yml). One configuration on the app's own server\n\
             # settings; `rubyrace check` runs it at the base and at the head, in the same blocks,\n\
             # until the head's slowdown is decided (docs/check.md). Every key is explained on\n\
             # its line; docs/experiment.md has them all. Try it locally:\n\
             #\n\
             #   rubyrace check {{this file}} --app-repo . --base main --head HEAD",
            app.name,
            app.framework.value.name(),
        );
    } else if check {
        let _ = writeln!(
            w,
            "# rubyrace init's check of which GET paths of {} answer 2xx: each path its own\n# configuration, its readiness path, and two requests.",
            app.name
        );
    } else {
        let _ = writeln!(
            w,
            "# Written by `rubyrace init` for {} ({} app), in {}.\n\
             # Is YJIT faster than the interpreter for this app on its own server settings, and\n\
             # what does it cost in memory? Every key is explained on its line; docs/experiment.md\n\
             # has them all.\n\
             #\n\
             #   rubyrace run {{this file}} --dry-run   # the plan; nothing runs\n\
             #   rubyrace run {{this file}} --smoke     # two short blocks: does it boot and answer?\n\
             #   rubyrace run {{this file}}             # the run, then `rubyrace report DIR`\n\
             #\n\
             # Nothing here changes the app; the run starts its own server (and database) for\n\
             # every trial and stops them after.",
            app.name,
            app.framework.value.name(),
            app.dir.display()
        );
    }
}

/// The root keys: name, description, seed, the run's length and its design.
fn root_keys_text(w: &mut String, app: &AppSurvey, purpose: &Purpose) {
    let check = matches!(purpose, Purpose::PathCheck { .. });
    let gate = matches!(purpose, Purpose::Gate { .. });
    let suffix = match purpose {
        Purpose::PathCheck { .. } => "-paths",
        Purpose::Gate { .. } => "-gate",
        Purpose::Experiment { .. } => "-jit",
    };
    let _ = writeln!(w, "name = {}", q(&format!("{}{suffix}", app.name)));
    if gate {
        let _ = writeln!(
            w,
            "description = {}   # the report's title\n\
             seed = 1   # the order of base and head in each block",
            q(&format!(
                "The pull request's head against its base on {} ({}), {} {}×{}",
                app.name,
                app.framework.value.name(),
                app.server.value.as_str(),
                app.processes.value,
                app.threads.value
            ))
        );
    } else if check {
        let _ = writeln!(w, "blocks = 1\ndesign = \"blocks\"\nseed = 1");
    } else {
        let _ = writeln!(
            w,
            "description = {}   # the report's title\n\
             seed = 1                  # the order of the configurations in each block: a rerun with the same seed runs the same order\n\
             blocks = 7                # at least 7 blocks, the fewest that can show a difference at p < 0.05\n\
             precision = \"3%\"          # then more blocks until the comparison's interval is within ±3%...\n\
             max_duration = \"20m\"      # ...or until 20 minutes of trials are spent; the report says which\n\
             cpus = \"split\"            # the servers on some CPUs and the load generator on the others",
            q(&format!(
                "Interpreter vs YJIT on {} ({}), {} {}×{}",
                app.name,
                app.framework.value.name(),
                app.server.value.as_str(),
                app.processes.value,
                app.threads.value
            ))
        );
    }
    let design = design_line(app);
    // A gate's file leaves the design to `rubyrace check` (base and head interleaved),
    // unless the app's services need blocks.
    let left_to_check = gate && interleaved(app);
    if !check && !left_to_check {
        let _ = writeln!(w, "{design}");
    }
}

/// `[settings]` and `[settings.env]`: the app, its server and concurrency, the load, the
/// setup and the environment.
fn settings_text(w: &mut String, app: &AppSurvey, purpose: &Purpose) {
    let check = matches!(purpose, Purpose::PathCheck { .. });
    let gate = matches!(purpose, Purpose::Gate { .. });
    let _ = writeln!(w, "\n[settings]");
    let _ = writeln!(
        w,
        "app = {}   # {}",
        q(&app.app_setting),
        app.framework.from
    );
    let _ = writeln!(
        w,
        "server = {}   # {}",
        q(app.server.value.as_str()),
        app.server.from
    );
    if !app.server_in_bundle {
        let _ = writeln!(
            w,
            "# The app's bundle has no server rubyrace starts: `rubyrace gemfile {} --server puma`\n\
             # writes a Gemfile of the experiment's own that adds it; then set gemfile = \"Gemfile.rubyrace\".",
            app.dir.display()
        );
    }
    let _ = writeln!(
        w,
        "processes = {}   # {}",
        app.processes.value, app.processes.from
    );
    let _ = writeln!(
        w,
        "threads = {}   # {}",
        app.threads.value, app.threads.from
    );
    if app.preload.value {
        let _ = writeln!(w, "preload = true   # {}", app.preload.from);
    }
    if check {
        let _ = writeln!(
            w,
            "connections = 1\nwarmup = \"0s\"\nrequests = 2\nreadiness_timeout = \"120s\"\nmax_error_rate = 100"
        );
    } else {
        let _ = writeln!(
            w,
            "# connections: processes × threads by default, every server thread kept busy"
        );
        let _ = writeln!(w, "warmup = \"10s\"   # load sent and not measured first, so YJIT compiles the hot paths before the measurement");
        let _ = writeln!(
            w,
            "duration = \"5s\"   # measured per trial{}",
            if interleaved(app) && !gate {
                " (in interleaved blocks: 100 slices of 50 ms)"
            } else {
                ""
            }
        );
        let _ = writeln!(w, "readiness_timeout = \"120s\"   # how long the app may take to boot and answer its readiness path");
    }
    if let Purpose::Experiment { load } | Purpose::Gate { load } = purpose {
        let readiness = load.readiness_path();
        if readiness != "/" {
            let _ = writeln!(
                w,
                "readiness_path = {}   # \"/\" did not answer 2xx; a trial starts once this does",
                q(readiness)
            );
        }
        match load {
            PathsLoad::Path(p) => {
                let _ = writeln!(w, "path = {}   # the GET path that answered 2xx when `rubyrace init` booted the app", q(p));
            }
            PathsLoad::Mix { file, paths } => {
                let _ = writeln!(
                    w,
                    "urls = {}   # a mix of the {} GET paths that answered 2xx when `rubyrace init` booted the app",
                    q(file),
                    paths.len()
                );
            }
        }
    }
    if let Some((argv, why)) = database_setup(app) {
        let argv: Vec<String> = argv.iter().map(|a| q(a)).collect();
        let _ = writeln!(
            w,
            "# {why}, once before the first trial, with the database's URL in the environment"
        );
        let _ = writeln!(w, "setup = [[{}]]", argv.join(", "));
    }
    let mut env: Vec<(&str, &str, &str)> = Vec::new();
    if app.framework.value == Framework::Rails {
        env.push((
            "RAILS_LOG_TO_STDOUT",
            "1",
            "the log goes to the trial's server log, not into the app's log/",
        ));
        if !app.has_own_secret {
            env.push((
                "SECRET_KEY_BASE",
                "rubyrace-init-not-a-secret-0123456789abcdef0123456789abcdef",
                "production needs one; the app keeps none in config/master.key or secrets.yml",
            ));
        }
    }
    if !env.is_empty() {
        let _ = writeln!(
            w,
            "\n[settings.env]   # for the server, on top of RAILS_ENV = RACK_ENV = production"
        );
        for (k, v, why) in env {
            let _ = writeln!(w, "{k} = {}   # {why}", q(v));
        }
    }
}

/// The configurations: the JIT axis, or one configuration per candidate path.
fn configurations_text(w: &mut String, purpose: &Purpose) {
    match purpose {
        Purpose::PathCheck { candidates } => {
            for c in *candidates {
                let _ = writeln!(
                    w,
                    "\n[[configs]]\nlabel = {}\npath = {}\nreadiness_path = {}",
                    q(c),
                    q(c),
                    q(c)
                );
            }
        }
        Purpose::Gate { .. } => {}
        Purpose::Experiment { .. } => {
            let _ = writeln!(
                w,
                "\n[matrix]   # two configurations, measured in the same blocks\n\
                 # jit is checked against the Ruby before the run and verified in every server process.\n\
                 jit = [\n  {{ label = \"interp\", value = \"none\" }},\n  {{ label = \"yjit\", value = \"yjit\" }},\n]"
            );
        }
    }
}

/// The design: interleaved (both servers up at once, measured in the same seconds) unless
/// the app needs a database service or a setup, which interleaved blocks do not take yet.
fn design_line(app: &AppSurvey) -> &'static str {
    if !interleaved(app) {
        "design = \"blocks\"         # one trial after another: the app's database service and setup need it (interleaved blocks do not take them yet)"
    } else {
        "design = \"interleaved\"    # both servers up at once, the load moving between them in 50 ms slices, so both are measured in the same seconds"
    }
}

/// The app's configurations can run interleaved: it needs no service and no setup.
fn interleaved(app: &AppSurvey) -> bool {
    !needs_services(app) && database_setup(app).is_none()
}

/// The app is given a PostgreSQL or a Redis.
fn needs_services(app: &AppSurvey) -> bool {
    app.database.value == Database::Postgres || app.redis.is_some()
}

/// The app's database preparation, run before the first trial, and why.
fn database_setup(app: &AppSurvey) -> Option<(Vec<String>, String)> {
    if app.framework.value != Framework::Rails || !app.has_bin_rails {
        return None;
    }
    let argv = || vec!["{ruby}".into(), "bin/rails".into(), "db:prepare".into()];
    match &app.database.value {
        Database::Postgres => Some((
            argv(),
            "setup: `bin/rails db:prepare` creates and migrates the run's own PostgreSQL database".into(),
        )),
        Database::Sqlite { file, exists: false } => Some((
            argv(),
            format!("setup: `bin/rails db:prepare` creates {file}, which is not there yet, in the app's directory"),
        )),
        _ => None,
    }
}

/// `[services.*]` for the app's database and Redis.
fn services_text(w: &mut String, app: &AppSurvey) {
    match &app.database.value {
        Database::Postgres => {
            let _ = writeln!(
                w,
                "\n# {}: rubyrace starts a PostgreSQL for the run and gives the app DATABASE_URL\n\
                 # (docs/services.md). fsync off: the database's disk is not what is measured.\n\
                 [services.postgres]\nsettings = {{ fsync = \"off\" }}",
                app.database.from
            );
        }
        Database::Sqlite { file, .. } => {
            let _ = writeln!(
                w,
                "\n# {}: the app uses {file} as it is.",
                app.database.from
            );
        }
        Database::Other(adapter) => {
            let _ = writeln!(
                w,
                "\n# {}: rubyrace starts no {adapter} server; the app must reach one of its own\n\
                 # (set DATABASE_URL in [settings.env]).",
                app.database.from
            );
        }
        Database::None => {}
    }
    if let Some(why) = &app.redis {
        let _ = writeln!(
            w,
            "\n# {why}: rubyrace starts a Redis for the run and gives the app REDIS_URL.\n[services.redis]"
        );
    }
}
