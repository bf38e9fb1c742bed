//! `[services]`: the servers an app needs besides itself (PostgreSQL, Redis), as the
//! experiment file states them. Plain data: `lab::services` starts, checks, resets and
//! stops them; docs/services.md documents the keys.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The services of an experiment; none by default.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Services {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postgres: Option<PostgresService>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis: Option<RedisService>,
}

impl Services {
    pub fn is_empty(&self) -> bool {
        self.postgres.is_none() && self.redis.is_none()
    }

    /// Whether a service starts afresh for every trial.
    pub fn any_per_trial(&self) -> bool {
        self.postgres
            .as_ref()
            .is_some_and(|p| p.lifetime == Lifetime::Trial)
            || self
                .redis
                .as_ref()
                .is_some_and(|r| r.lifetime == Lifetime::Trial)
    }
}

/// How long one instance of a service lives.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Lifetime {
    /// Started when a `rubyrace run` session starts, stopped and removed when it ends.
    #[default]
    Run,
    /// Started before each trial, stopped and removed after it.
    Trial,
}

pub const LIFETIMES: &[&str] = &["run", "trial"];

/// Where a service listens.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Listen {
    /// A free port on 127.0.0.1.
    #[default]
    Tcp,
    /// A Unix socket in the service's directory.
    Unix,
}

pub const LISTENS: &[&str] = &["tcp", "unix"];

/// What every trial starts from, for a service that lives through the run.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Reset {
    /// Nothing: a trial sees what the trials before it wrote.
    #[default]
    None,
    /// PostgreSQL: after the setup, the database becomes a template; each trial gets its
    /// own copy (`CREATE DATABASE ... TEMPLATE`), dropped when the trial ends.
    Template,
    /// Redis: `FLUSHALL` before each trial.
    Flush,
}

pub const POSTGRES_RESETS: &[&str] = &["none", "template"];
pub const REDIS_RESETS: &[&str] = &["none", "flush"];

/// `[services.postgres]`: Debian's PostgreSQL server in a private data directory.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PostgresService {
    #[serde(default)]
    pub lifetime: Lifetime,
    #[serde(default)]
    pub listen: Listen,
    /// The database the app is given (`DATABASE_URL`); created empty before the setup.
    pub database: String,
    #[serde(default)]
    pub reset: Reset,
    /// Server settings, passed as `-c name=value` and recorded with their effective values.
    #[serde(default)]
    pub settings: BTreeMap<String, String>,
    /// The directory of `initdb`, `postgres` and `psql`; default: the newest
    /// `/usr/lib/postgresql/*/bin`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bin_dir: Option<PathBuf>,
}

/// `[services.redis]`: Debian's redis-server with a private directory and no persistence
/// unless its settings ask for it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct RedisService {
    #[serde(default)]
    pub lifetime: Lifetime,
    #[serde(default)]
    pub listen: Listen,
    #[serde(default)]
    pub reset: Reset,
    /// Configuration directives (`maxmemory = "64mb"`), passed as `--name value`.
    #[serde(default)]
    pub settings: BTreeMap<String, String>,
    /// The redis-server executable; default: `redis-server` on PATH.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executable: Option<PathBuf>,
}

/// The database name used when `[services.postgres]` does not set one.
pub const DEFAULT_DATABASE: &str = "app";

impl Lifetime {
    pub const fn as_str(self) -> &'static str {
        match self {
            Lifetime::Run => "run",
            Lifetime::Trial => "trial",
        }
    }
}

impl Listen {
    pub const fn as_str(self) -> &'static str {
        match self {
            Listen::Tcp => "tcp",
            Listen::Unix => "unix",
        }
    }
}

impl Reset {
    pub const fn as_str(self) -> &'static str {
        match self {
            Reset::None => "none",
            Reset::Template => "template",
            Reset::Flush => "flush",
        }
    }
}

/// `lifetime run, listen tcp, reset template, settings fsync=off shared_buffers=32MB`: a
/// service's keys as the file set them (or their defaults), for the dry run.
fn describe_keys(
    lifetime: Lifetime,
    listen: Listen,
    reset: Reset,
    settings: &BTreeMap<String, String>,
) -> String {
    let mut text = format!(
        "lifetime {}, listen {}, reset {}",
        lifetime.as_str(),
        listen.as_str(),
        reset.as_str()
    );
    if !settings.is_empty() {
        let pairs: Vec<String> = settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
        text.push_str(&format!(", settings {}", pairs.join(" ")));
    }
    text
}

impl PostgresService {
    /// Its keys in one line (database first), for the dry run.
    pub fn describe(&self) -> String {
        format!(
            "database {}, {}",
            self.database,
            describe_keys(self.lifetime, self.listen, self.reset, &self.settings)
        )
    }
}

impl RedisService {
    /// Its keys in one line, for the dry run.
    pub fn describe(&self) -> String {
        describe_keys(self.lifetime, self.listen, self.reset, &self.settings)
    }
}
