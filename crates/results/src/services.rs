//! The services of a run as recorded (`lab::services` starts them): the PostgreSQL and
//! Redis of a session or a trial, the setup commands that ran, and what one trial's
//! services were (its database, row counts, Redis keys).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The services started for a session or a trial, as recorded.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct InstancesRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postgres: Option<PostgresRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis: Option<RedisRecord>,
    /// The setup commands these services saw run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub setup: Vec<SetupRecord>,
    /// How each service ended (`exit status 0 (term)`), once stopped.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub stopped: BTreeMap<String, String>,
}

impl InstancesRecord {
    /// One line for the progress: what runs where.
    pub fn summary(&self) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(p) = &self.postgres {
            parts.push(format!(
                "PostgreSQL {} on {} as {} (ready in {:.1} s)",
                p.server_version(),
                p.address,
                p.user,
                p.ready_after_s
            ));
        }
        if let Some(r) = &self.redis {
            parts.push(format!(
                "Redis {} on {} (ready in {:.1} s)",
                r.version, r.address, r.ready_after_s
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

impl SetupRecord {
    /// One line for the progress.
    pub fn summary(&self) -> String {
        let argv: Vec<std::ffi::OsString> = self.argv.iter().map(Into::into).collect();
        format!(
            "setup {} ({}): {} in {:.1} s{}",
            self.key,
            self.ruby,
            sys::process::display_argv(&argv),
            self.wall_s,
            self.database
                .as_ref()
                .map(|d| format!(", database {d}"))
                .unwrap_or_default()
        )
    }
}

/// One setup command that ran.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SetupRecord {
    /// The (Ruby, Gemfile, app) it ran for: 1, 2, ... in the order of the configurations.
    pub key: usize,
    pub ruby: String,
    pub app_dir: PathBuf,
    pub argv: Vec<String>,
    /// The database it set up, if PostgreSQL is a service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    pub status: String,
    pub wall_s: f64,
    /// Its output, relative to the results directory.
    pub stdout: PathBuf,
    pub stderr: PathBuf,
}

/// What the services were for one trial, in its result.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TrialServicesRecord {
    /// The database the app was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    /// The database it was copied from (`reset = "template"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// Exact row counts of the database's tables when the trial started, and when its
    /// server had stopped.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rows_at_start: BTreeMap<String, i64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rows_at_end: BTreeMap<String, i64>,
    /// Redis: flushed before the trial (`reset = "flush"`), and its key counts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub redis_flushed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_keys_at_start: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_keys_at_end: Option<i64>,
    /// Services that lived for this trial only (`lifetime = "trial"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instances: Option<InstancesRecord>,
    /// What went wrong after the trial (a count or a drop that failed); the trial's
    /// measurement is kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

/// What a started PostgreSQL was, as recorded with the run (or the trial).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PostgresRecord {
    /// `SELECT version()`.
    pub version: String,
    pub argv: Vec<String>,
    /// The user it runs as.
    pub user: String,
    pub data_dir: PathBuf,
    /// `127.0.0.1:PORT` or the socket directory.
    pub address: String,
    /// `DATABASE_URL` without a database and without its password:
    /// `postgres://rubyrace@127.0.0.1:PORT`.
    pub url_base: String,
    /// How a client proves itself: `scram-sha-256` with a password made for the run, given
    /// to the app in `DATABASE_URL` and never recorded.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub authentication: String,
    /// Effective values of the settings the experiment set and of `RECORDED`, with units
    /// (`128MB`).
    pub settings: BTreeMap<String, String>,
    pub ready_after_s: f64,
    pub log: PathBuf,
}

impl PostgresRecord {
    /// `SHOW server_version` as recorded (`15.18 (Debian 15.18-0+deb12u1)`), else the
    /// whole `SELECT version()`.
    pub fn server_version(&self) -> &str {
        self.settings
            .get("server_version")
            .map_or(self.version.as_str(), String::as_str)
    }
}

/// What a started Redis was, as recorded.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct RedisRecord {
    /// `redis_version` of `INFO server`.
    pub version: String,
    pub argv: Vec<String>,
    /// The user it runs as (as root: `redis`, else `nobody`).
    #[serde(default)]
    pub user: String,
    /// Its working directory (`--dir`), private to that user.
    #[serde(default)]
    pub data_dir: PathBuf,
    /// `127.0.0.1:PORT` or the socket's path.
    pub address: String,
    /// `REDIS_URL` without its password.
    pub url: String,
    /// How a client proves itself: `requirepass` (a password made for the run, given to
    /// the app in `REDIS_URL` and never recorded), or `unix socket, mode 700`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub authentication: String,
    /// `CONFIG GET` of the settings the experiment set and of `RECORDED`.
    pub settings: BTreeMap<String, String>,
    pub ready_after_s: f64,
    pub log: PathBuf,
}
