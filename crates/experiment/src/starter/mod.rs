//! `rubyrace init`'s reading of an app it has never seen, and the starting experiment it
//! writes for it. The survey reads files only (`config.ru`, the Gemfile and its lock,
//! `config/database.yml`, `config/puma.rb` or `config/unicorn.rb`, `config/cable.yml`) and
//! never runs the app; which paths answer 2xx is the command's to find out, by booting it
//! (`commands::init`). Every choice is written into the file with where it came from, so a
//! person can check it line by line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::servers::ServerKind;

/// The servers `init` takes from an app's Gemfile, in this order of preference (WEBrick is
/// no production server); with none of them, the experiment names Puma and says the bundle
/// lacks it.
const GEMFILE_SERVERS: [ServerKind; 3] = [ServerKind::Puma, ServerKind::Unicorn, ServerKind::Thin];

mod text;
pub use text::{experiment_text, url_mix_text, PathsLoad, Purpose};

/// What kind of Rack app it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framework {
    Rails,
    Sinatra,
    Rack,
}

impl Framework {
    pub fn name(self) -> &'static str {
        match self {
            Framework::Rails => "Rails",
            Framework::Sinatra => "Sinatra",
            Framework::Rack => "Rack",
        }
    }
}

/// The database the app uses in production.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Database {
    /// None found (no `config/database.yml`).
    None,
    /// PostgreSQL: rubyrace starts one per run (`[services.postgres]`).
    Postgres,
    /// SQLite: used as the app has it. `exists`: the production database file is there.
    Sqlite { file: String, exists: bool },
    /// An adapter rubyrace starts no service for (MySQL, ...).
    Other(String),
}

/// A setting read from the app, and where it was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found<T> {
    pub value: T,
    pub from: String,
}

fn found<T>(value: T, from: impl Into<String>) -> Found<T> {
    Found {
        value,
        from: from.into(),
    }
}

/// What `rubyrace init` read of an app.
#[derive(Clone, Debug)]
pub struct AppSurvey {
    /// The app's directory, absolute.
    pub dir: PathBuf,
    /// What to write as `app = ...`: a bundled app's name, or the directory.
    pub app_setting: String,
    /// A short name for the experiment (the directory's name).
    pub name: String,
    pub framework: Found<Framework>,
    /// The app's Gemfile, when it has one (the run then goes through `bundle exec`).
    pub gemfile: Option<PathBuf>,
    /// Gems and versions from `Gemfile.lock` (or, without a lock, the Gemfile's names with
    /// an empty version).
    pub gems: BTreeMap<String, String>,
    pub server: Found<ServerKind>,
    /// The server's gem is in the app's bundle (always true without a Gemfile).
    pub server_in_bundle: bool,
    pub processes: Found<u32>,
    pub threads: Found<u32>,
    pub preload: Found<bool>,
    pub database: Found<Database>,
    /// Why the app is given a Redis, if it is.
    pub redis: Option<String>,
    /// `bin/rails` is there (the setup and `rails routes` use it).
    pub has_bin_rails: bool,
    /// Rails keeps its secret in `config/master.key` or `config/secrets.yml`.
    pub has_own_secret: bool,
}

/// Reads the app in `dir`. `bundled_name` is the name of a bundled app when `dir` is one.
/// Errors: no `config.ru` (rubyrace runs Rack apps).
pub fn survey(dir: &Path, bundled_name: Option<&str>) -> anyhow::Result<AppSurvey> {
    let dir = dir
        .canonicalize()
        .map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
    let config_ru = dir.join("config.ru");
    let Ok(rackup) = std::fs::read_to_string(&config_ru) else {
        anyhow::bail!(
            "{} has no config.ru: rubyrace runs a Rack app (Rails, Sinatra, Hanami, Roda...) from the directory that holds its config.ru",
            dir.display()
        );
    };
    let read = |rel: &str| std::fs::read_to_string(dir.join(rel)).ok();
    let gemfile = dir.join("Gemfile");
    let gemfile = gemfile.is_file().then_some(gemfile);
    let gems = match (read("Gemfile.lock"), read("Gemfile")) {
        (Some(lock), _) => locked_gems(&lock),
        (None, Some(gemfile)) => gemfile_gems(&gemfile),
        (None, None) => BTreeMap::new(),
    };
    let gems_from = if dir.join("Gemfile.lock").is_file() {
        "Gemfile.lock"
    } else {
        "Gemfile"
    };
    let framework = if gems.contains_key("railties") || gems.contains_key("rails") {
        found(Framework::Rails, format!("{gems_from}: railties"))
    } else if dir.join("config/application.rb").is_file() {
        found(Framework::Rails, "config/application.rb")
    } else if gems.contains_key("sinatra") {
        found(Framework::Sinatra, format!("{gems_from}: sinatra"))
    } else if loads(&rackup, "sinatra") {
        found(Framework::Sinatra, "config.ru loads Sinatra")
    } else if loads(&rackup, "rails") {
        found(Framework::Rails, "config.ru loads Rails")
    } else {
        found(Framework::Rack, "config.ru")
    };

    let (server, server_in_bundle) = if gemfile.is_none() {
        (
            found(
                ServerKind::Puma,
                "the app has no Gemfile: the Ruby's own puma",
            ),
            true,
        )
    } else if let Some(kind) = GEMFILE_SERVERS
        .into_iter()
        .find(|k| k.gem().is_some_and(|g| gems.contains_key(g.name)))
    {
        let gem = kind.gem().map(|g| g.name).unwrap_or_default();
        (found(kind, format!("{gems_from}: {gem}")), true)
    } else {
        (
            found(
                ServerKind::Puma,
                format!(
                    "{gems_from} has none of {}",
                    GEMFILE_SERVERS.map(ServerKind::as_str).join(", ")
                ),
            ),
            false,
        )
    };

    let (processes, threads, preload) = match server.value {
        ServerKind::Unicorn => {
            let workers = read("config/unicorn.rb")
                .and_then(|t| ruby_config_int(&t, "worker_processes"))
                .map(|n| found(n, "config/unicorn.rb: worker_processes"))
                .unwrap_or_else(|| found(1, "unicorn's default"));
            let preload = read("config/unicorn.rb")
                .filter(|t| code_lines(t).any(|l| l.starts_with("preload_app true")))
                .map(|_| found(true, "config/unicorn.rb: preload_app true"))
                .unwrap_or_else(|| found(false, "unicorn's default"));
            (
                workers,
                found(1, "unicorn runs one thread per process"),
                preload,
            )
        }
        _ => puma_concurrency(read("config/puma.rb").as_deref()),
    };
    let preload = if processes.value > 1 {
        preload
    } else {
        found(false, preload.from)
    };

    let database = match read("config/database.yml") {
        None => found(Database::None, "no config/database.yml"),
        Some(yml) => match production_database(&yml) {
            None => found(
                Database::None,
                "config/database.yml names no adapter for production",
            ),
            Some((adapter, file)) => {
                let from = format!("config/database.yml: production adapter {adapter}");
                let value = match adapter.as_str() {
                    "postgresql" | "postgis" => Database::Postgres,
                    "sqlite3" => {
                        let file = file.unwrap_or_else(|| "db/production.sqlite3".into());
                        let exists = dir.join(&file).is_file();
                        Database::Sqlite { file, exists }
                    }
                    other => Database::Other(other.to_string()),
                };
                found(value, from)
            }
        },
    };
    let redis = if read("config/cable.yml")
        .and_then(|t| production_adapter(&t))
        .is_some_and(|a| a == "redis")
    {
        Some("config/cable.yml: production adapter redis".to_string())
    } else if gems.contains_key("redis") {
        Some(format!("{gems_from}: redis"))
    } else {
        None
    };
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "app".into());
    Ok(AppSurvey {
        app_setting: bundled_name
            .map(str::to_string)
            .unwrap_or_else(|| dir.display().to_string()),
        name,
        framework,
        gemfile,
        gems,
        server,
        server_in_bundle,
        processes,
        threads,
        preload,
        database,
        redis,
        has_bin_rails: dir.join("bin/rails").is_file(),
        has_own_secret: dir.join("config/master.key").is_file()
            || dir.join("config/secrets.yml").is_file(),
        dir,
    })
}

/// The gems of a `Gemfile.lock`: every `    name (version)` line of its specs.
pub fn locked_gems(lock: &str) -> BTreeMap<String, String> {
    lock.lines()
        .filter(|l| l.starts_with("    ") && !l.starts_with("     "))
        .filter_map(|l| {
            let (name, rest) = l.trim().split_once(" (")?;
            Some((name.to_string(), rest.strip_suffix(')')?.to_string()))
        })
        .collect()
}

/// The gems a Gemfile names (`gem "name"`), without versions.
fn gemfile_gems(gemfile: &str) -> BTreeMap<String, String> {
    code_lines(gemfile)
        .filter_map(|l| {
            let rest = l.strip_prefix("gem ")?.trim_start();
            let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
            let name = rest[1..].split(quote).next()?;
            Some((name.to_string(), String::new()))
        })
        .collect()
}

/// Whether a Ruby file's code (its comments aside) mentions `name` (`require "rails"`,
/// `Rails.application`, `Sinatra::Base`), case aside.
fn loads(ruby: &str, name: &str) -> bool {
    code_lines(ruby).any(|l| l.to_ascii_lowercase().contains(name))
}

/// A Ruby file's lines without comments and leading blanks.
fn code_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(|l| l.trim())
        .filter(|l| !l.starts_with('#') && !l.is_empty())
}

/// An integer a Ruby config computes the usual ways: a literal, `ENV.fetch("X") { N }`,
/// `ENV.fetch("X", N)`, `ENV["X"] || N`, wrapped in `Integer(...)` or followed by
/// `.to_i`, or a local variable assigned one of those earlier in the file. The defaults are
/// what apply where the variable is not set, which is how rubyrace starts the server.
fn int_expression(expr: &str, vars: &BTreeMap<String, u32>) -> Option<u32> {
    let mut e = expr.trim().trim_end_matches(".to_i").trim();
    if let Some(inner) = e.strip_prefix("Integer(").and_then(|r| r.strip_suffix(')')) {
        e = inner.trim();
    }
    if let Ok(n) = e.parse() {
        return Some(n);
    }
    if let Some(n) = vars.get(e) {
        return Some(*n);
    }
    if let Some((_, default)) = e.split_once("||") {
        return int_expression(default, vars);
    }
    if e.starts_with("ENV.fetch(") {
        if let Some(block) = e.split_once('{').and_then(|(_, b)| b.rsplit_once('}')) {
            return int_expression(block.0, vars);
        }
        let args = e.strip_prefix("ENV.fetch(")?.rsplit_once(')')?.0;
        return int_expression(args.split_once(',')?.1, vars);
    }
    None
}

/// `name N` (or `name(N)`) in a Ruby config, N as [`int_expression`] reads it.
fn ruby_config_int(text: &str, name: &str) -> Option<u32> {
    let vars = int_variables(text);
    code_lines(text).find_map(|l| {
        let rest = l.strip_prefix(name)?;
        let rest = rest
            .strip_prefix('(')
            .map_or(rest, |r| r.trim_end_matches(')'));
        if !rest.is_empty() && !rest.starts_with(' ') && !l[name.len()..].starts_with('(') {
            return None;
        }
        int_expression(rest, &vars)
    })
}

/// The file's `name = <integer expression>` assignments, in order.
fn int_variables(text: &str) -> BTreeMap<String, u32> {
    let mut vars = BTreeMap::new();
    for l in code_lines(text) {
        let Some((name, expr)) = l.split_once(" = ") else {
            continue;
        };
        let name = name.trim();
        if name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            if let Some(n) = int_expression(expr, &vars) {
                vars.insert(name.to_string(), n);
            }
        }
    }
    vars
}

/// Puma's workers, threads (the maximum) and `preload_app!` from `config/puma.rb`, with
/// Puma's defaults where it says nothing.
fn puma_concurrency(config: Option<&str>) -> (Found<u32>, Found<u32>, Found<bool>) {
    let Some(text) = config else {
        return (
            found(1, "no config/puma.rb: single mode"),
            found(5, "no config/puma.rb: Puma's default of 5 threads"),
            found(false, "no config/puma.rb"),
        );
    };
    let workers = ruby_config_int(text, "workers")
        .map(|n| found(n.max(1), "config/puma.rb: workers"))
        .unwrap_or_else(|| found(1, "config/puma.rb sets no workers: single mode"));
    let vars = int_variables(text);
    let threads = code_lines(text)
        .find_map(|l| {
            let args = l.strip_prefix("threads")?;
            let args = args.trim().trim_start_matches('(').trim_end_matches(')');
            let (_, max) = args.split_once(',')?;
            int_expression(max, &vars)
        })
        .map(|n| found(n.max(1), "config/puma.rb: threads (the maximum)"))
        .unwrap_or_else(|| found(5, "config/puma.rb sets no threads: Puma's default of 5"));
    let preload = if code_lines(text).any(|l| l.starts_with("preload_app!")) {
        found(true, "config/puma.rb: preload_app!")
    } else {
        found(false, "config/puma.rb has no preload_app!")
    };
    (workers, threads, preload)
}

/// The production adapter of a Rails YAML config (`config/database.yml`,
/// `config/cable.yml`), following `<<: *anchor`.
fn production_adapter(yml: &str) -> Option<String> {
    production_database(yml).map(|(adapter, _)| adapter)
}

/// The production section's `adapter` and `database` of `config/database.yml`, each from the
/// section itself or the anchor it merges (`<<: *default`). ERB in a value is left out.
fn production_database(yml: &str) -> Option<(String, Option<String>)> {
    #[derive(Default)]
    struct Section {
        anchor: Option<String>,
        merges: Option<String>,
        adapter: Option<String>,
        database: Option<String>,
    }
    let mut sections: Vec<(String, Section)> = Vec::new();
    for line in yml.lines() {
        if line.trim_start().starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let indented = line.starts_with(' ') || line.starts_with('\t');
        let Some((key, value)) = line.trim().split_once(':') else {
            continue;
        };
        let value = value.trim().trim_matches(|c| c == '"' || c == '\'');
        if !indented {
            let anchor = value.strip_prefix('&').map(|a| a.trim().to_string());
            sections.push((
                key.trim().to_string(),
                Section {
                    anchor,
                    ..Section::default()
                },
            ));
            continue;
        }
        let Some((_, section)) = sections.last_mut() else {
            continue;
        };
        let plain = (!value.is_empty() && !value.contains("<%")).then(|| value.to_string());
        match key.trim() {
            "<<" => section.merges = value.strip_prefix('*').map(|a| a.trim().to_string()),
            "adapter" => section.adapter = plain,
            "database" => section.database = plain,
            _ => {}
        }
    }
    let production = &sections.iter().find(|(k, _)| k == "production")?.1;
    let merged = production.merges.as_ref().and_then(|m| {
        sections
            .iter()
            .find(|(_, s)| s.anchor.as_deref() == Some(m.as_str()))
            .map(|(_, s)| s)
    });
    let adapter = production
        .adapter
        .clone()
        .or_else(|| merged.and_then(|m| m.adapter.clone()))?;
    let database = production
        .database
        .clone()
        .or_else(|| merged.and_then(|m| m.database.clone()));
    Some((adapter, database))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn puma_configs_are_read_with_their_environment_defaults() {
        // Rails 6.1's generated config/puma.rb with its `workers` and `preload_app!` lines
        // uncommented, as a team that deploys with workers has it.
        let rails = r#"
max_threads_count = ENV.fetch("RAILS_MAX_THREADS") { 5 }
min_threads_count = ENV.fetch("RAILS_MIN_THREADS") { max_threads_count }
threads min_threads_count, max_threads_count
# workers ENV.fetch("WEB_CONCURRENCY") { 9 }
workers ENV.fetch("WEB_CONCURRENCY") { 2 }
preload_app!
"#;
        let (w, t, p) = puma_concurrency(Some(rails));
        assert_eq!((w.value, t.value, p.value), (2, 5, true));
        // Heroku's long-standing template.
        let heroku = "workers Integer(ENV['WEB_CONCURRENCY'] || 3)\nthreads_count = Integer(ENV['RAILS_MAX_THREADS'] || 8)\nthreads threads_count, threads_count\n";
        let (w, t, p) = puma_concurrency(Some(heroku));
        assert_eq!((w.value, t.value, p.value), (3, 8, false));
        let literal = "threads 1, 16\nworkers(4)\n";
        let (w, t, _) = puma_concurrency(Some(literal));
        assert_eq!((w.value, t.value), (4, 16));
        let (w, t, _) = puma_concurrency(None);
        assert_eq!((w.value, t.value), (1, 5));
        assert!(t.from.contains("Puma's default"), "{}", t.from);
    }

    #[test]
    fn the_production_database_follows_the_default_anchor() {
        let yml = "default: &default\n  adapter: postgresql\n  encoding: unicode\n  pool: <%= 5 %>\n\ndevelopment:\n  <<: *default\n  database: shop_development\n\nproduction:\n  <<: *default\n  database: shop_production\n";
        assert_eq!(
            production_database(yml),
            Some(("postgresql".into(), Some("shop_production".into())))
        );
        let sqlite = "production:\n  adapter: sqlite3\n  database: db/production.sqlite3\n";
        assert_eq!(
            production_database(sqlite),
            Some(("sqlite3".into(), Some("db/production.sqlite3".into())))
        );
        let erb = "production:\n  adapter: mysql2\n  database: <%= ENV['DB'] %>\n";
        assert_eq!(production_database(erb), Some(("mysql2".into(), None)));
        assert_eq!(
            production_database("development:\n  adapter: sqlite3\n"),
            None
        );
    }

    #[test]
    fn a_lock_files_specs_are_its_gems() {
        let lock = "GEM\n  remote: https://rubygems.org/\n  specs:\n    pg (1.4.5)\n    puma (5.6.5)\n      nio4r (~> 2.0)\n    railties (6.1.7.10)\n\nPLATFORMS\n  x86_64-linux\n";
        let gems = locked_gems(lock);
        assert_eq!(
            gems.keys().collect::<Vec<_>>(),
            vec!["pg", "puma", "railties"]
        );
        assert_eq!(gems["puma"], "5.6.5");
        let gemfile =
            "source 'https://rubygems.org'\ngem 'sinatra', '~> 3'\n# gem 'puma'\ngem \"thin\"\n";
        assert_eq!(
            gemfile_gems(gemfile).keys().collect::<Vec<_>>(),
            vec!["sinatra", "thin"]
        );
    }

    #[test]
    fn an_app_without_config_ru_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let e = survey(dir.path(), None).unwrap_err().to_string();
        assert!(e.contains("has no config.ru"), "{e}");
    }
}
