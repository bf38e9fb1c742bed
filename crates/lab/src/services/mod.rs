//! The services of a run (`[services]`: PostgreSQL, Redis) and the app's `setup`: started
//! before the trials that need them, checked for real, reset between trials, stopped and
//! removed at the end, after Ctrl-C and, through the process registry and the parent-death
//! signal, after rubyrace itself was killed.
//!
//! The runner holds one [`RunServices`] per session:
//! - `start`: the services that live through the run (`lifetime = "run"`);
//! - `before_trial`: the services that live for one trial, the `setup` commands the first
//!   time a (Ruby, Gemfile, app) meets its PostgreSQL (once per session, or every trial
//!   with a per-trial PostgreSQL), the trial's own database
//!   (`reset = "template"`) or a flushed Redis (`reset = "flush"`), and the tables' row
//!   counts; gives the environment the app gets (`DATABASE_URL`, `REDIS_URL`);
//! - `after_trial`: the row counts again, the trial's database dropped, the trial's
//!   services stopped; all of it recorded in the trial's result (`services`).
//!
//! Each (Ruby, Gemfile, app) has its own database (`database`, or `database_N` when the
//! experiment has several), so Rails apps on two Rubies with their own Rails versions never
//! migrate one schema twice.

pub mod account;
pub mod postgres;
pub mod redis;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use experiment::services::{Lifetime, Reset, Services};
use experiment::{Config, ConfigSettings};
use sys::process::{describe_status, tail_file, Launch, Supervised};

use postgres::Postgres;
use redis::Redis;
use results::services::{InstancesRecord, SetupRecord, TrialServicesRecord};

/// How long one setup command may run.
const SETUP_TIMEOUT: Duration = Duration::from_secs(600);
/// The directory of the services in a results directory.
pub const SERVICES_DIR: &str = "services";

/// One (Ruby, Gemfile, app): what `setup` runs for, and what has a database of its own.
#[derive(Clone, Debug, PartialEq)]
struct SetupKey {
    ruby: String,
    gemfile: Option<PathBuf>,
    app_dir: PathBuf,
}

impl SetupKey {
    fn of(s: &ConfigSettings) -> SetupKey {
        SetupKey {
            ruby: s.ruby.clone(),
            gemfile: s.gemfile.clone(),
            app_dir: s.app_dir.clone(),
        }
    }
}

/// Services running, for one session or one trial.
#[derive(Default)]
struct Instances {
    postgres: Option<Postgres>,
    redis: Option<Redis>,
    /// The keys whose setup ran against these services (the run's).
    set_up: BTreeSet<usize>,
    record: InstancesRecord,
}

/// A log's name: `postgres`, or `postgres-s2` for session 2 (see `Instances::start`).
fn log_name(program: &str, tag: &str) -> String {
    if tag.is_empty() {
        program.to_string()
    } else {
        format!("{program}-{tag}")
    }
}

impl Instances {
    /// Starts the services of `services` whose lifetime is `lifetime`, under `home`; their
    /// logs' names carry `tag` (the session, `s2`, for those of the run), so that a resume
    /// keeps the logs of the sessions before it.
    fn start(
        services: &Services,
        lifetime: Lifetime,
        home: &Path,
        registry: &Path,
        tag: &str,
    ) -> Result<Instances> {
        let mut started = Instances::default();
        if let Some(pg) = services
            .postgres
            .as_ref()
            .filter(|p| p.lifetime == lifetime)
        {
            let p = Postgres::start(pg, &home.join("postgres"), registry, tag)
                .context("services.postgres")?;
            started.record.postgres = Some(p.record.clone());
            started.postgres = Some(p);
        }
        if let Some(r) = services.redis.as_ref().filter(|r| r.lifetime == lifetime) {
            let r =
                Redis::start(r, &home.join("redis"), registry, tag).context("services.redis")?;
            started.record.redis = Some(r.record.clone());
            started.redis = Some(r);
        }
        Ok(started)
    }

    /// A service of these that is no longer running, in words: which, how it ended, where
    /// its log is.
    fn died(&mut self) -> Option<String> {
        if let Some(p) = self.postgres.as_mut() {
            if let Some(status) = p.died() {
                return Some(format!(
                    "services.postgres: PostgreSQL died during the run ({}; its log: {})",
                    sys::process::describe_status(status),
                    p.record.log.display()
                ));
            }
        }
        if let Some(r) = self.redis.as_mut() {
            if let Some(status) = r.died() {
                return Some(format!(
                    "services.redis: Redis died during the run ({}; its log: {})",
                    sys::process::describe_status(status),
                    r.record.log.display()
                ));
            }
        }
        None
    }

    fn stop(&mut self) {
        if let Some(p) = self.postgres.take() {
            self.record.stopped.insert("postgres".into(), p.stop());
        }
        if let Some(r) = self.redis.take() {
            self.record.stopped.insert("redis".into(), r.stop());
        }
    }
}

/// What `before_trial` prepared, for `after_trial`.
pub struct PreparedTrial {
    /// `DATABASE_URL`, `REDIS_URL`: added to the app's environment.
    pub env: BTreeMap<String, String>,
    /// The setup commands that ran for this trial.
    pub setup_ran: Vec<SetupRecord>,
    record: TrialServicesRecord,
    own: Option<Instances>,
    /// The trial's own database, dropped after it.
    trial_database: Option<String>,
}

/// The services and setup of one `rubyrace run` session.
pub struct RunServices {
    services: Services,
    results_dir: PathBuf,
    registry: PathBuf,
    session: i64,
    keys: Vec<SetupKey>,
    run: Instances,
}

impl RunServices {
    /// Starts the services that live through the run. Nothing runs when the experiment
    /// has no services and no setup.
    pub fn start(
        services: &Services,
        configs: &[Config],
        results_dir: &Path,
        registry: &Path,
        session: i64,
    ) -> Result<RunServices> {
        let mut keys: Vec<SetupKey> = Vec::new();
        for c in configs {
            let key = SetupKey::of(&c.settings);
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        let home = results_dir.join(SERVICES_DIR);
        let tag = format!("s{session}");
        let run = Instances::start(services, Lifetime::Run, &home, registry, &tag)?;
        Ok(RunServices {
            services: services.clone(),
            results_dir: results_dir.to_path_buf(),
            registry: registry.to_path_buf(),
            session,
            keys,
            run,
        })
    }

    /// The services started for the session, as recorded with it.
    pub fn record(&self) -> &InstancesRecord {
        &self.run.record
    }

    pub fn is_empty(&self) -> bool {
        self.services.is_empty()
    }

    /// The database of the (Ruby, Gemfile, app) numbered `key` (1-based).
    fn database(&self, key: usize) -> Option<String> {
        let pg = self.services.postgres.as_ref()?;
        Some(if self.keys.len() > 1 {
            format!("{}_{key}", pg.database)
        } else {
            pg.database.clone()
        })
    }

    /// Prepares the services for one trial of `settings` (see the module documentation).
    /// An error stops the run: a service that does not start, a setup command that fails.
    pub fn before_trial(
        &mut self,
        settings: &ConfigSettings,
        trial_id: usize,
        interrupt: &AtomicBool,
    ) -> Result<PreparedTrial> {
        if let Some(why) = self.run.died() {
            bail!("{why}; `rubyrace run --resume` starts the services afresh");
        }
        let key = SetupKey::of(settings);
        let key_number = self.keys.iter().position(|k| *k == key).map_or_else(
            || {
                self.keys.push(key.clone());
                self.keys.len()
            },
            |i| i + 1,
        );
        let mut own = if self.services.any_per_trial() {
            let home = self
                .results_dir
                .join(SERVICES_DIR)
                .join(format!("trial-{trial_id}"));
            Some(Instances::start(
                &self.services,
                Lifetime::Trial,
                &home,
                &self.registry,
                "",
            )?)
        } else {
            None
        };
        let database = self.database(key_number);
        let mut env = BTreeMap::new();
        let mut record = TrialServicesRecord::default();

        // The setup runs once per (Ruby, Gemfile, app) for the life of the PostgreSQL it
        // sets up: every trial with a per-trial PostgreSQL, once per session otherwise.
        let own_postgres = own.as_ref().is_some_and(|o| o.postgres.is_some());
        let needs_setup = own_postgres || !self.run.set_up.contains(&key_number);
        if let Some(r) = redis_of(&own, &self.run) {
            env.insert("REDIS_URL".to_string(), r.url());
        }
        let mut setup_env = env.clone();
        if let (Some(pg), Some(db)) = (postgres_of(&own, &self.run), &database) {
            setup_env.insert("DATABASE_URL".to_string(), pg.url(db));
        }
        let mut setup_ran = Vec::new();
        if needs_setup {
            if let (Some(pg), Some(db)) = (postgres_of(&own, &self.run), &database) {
                let exists = pg
                    .query(
                        "postgres",
                        &format!("SELECT 1 FROM pg_database WHERE datname = '{db}'"),
                    )?
                    .trim()
                    == "1";
                if !exists {
                    pg.create_database(db, None).with_context(|| {
                        format!("services.postgres: cannot create the database {db}")
                    })?;
                }
            }
            let dir = match &own {
                Some(_) if own_postgres => self
                    .results_dir
                    .join(SERVICES_DIR)
                    .join(format!("trial-{trial_id}")),
                _ => self.results_dir.join(SERVICES_DIR),
            };
            let records = run_setup(
                settings,
                key_number,
                database.clone(),
                &setup_env,
                &dir,
                &self.results_dir,
                &format!("setup-s{}-k{key_number}", self.session),
                &self.registry,
                interrupt,
            )?;
            setup_ran = records.clone();
            match &mut own {
                Some(o) if own_postgres => o.record.setup.extend(records),
                _ => {
                    self.run.set_up.insert(key_number);
                    self.run.record.setup.extend(records);
                }
            }
        }

        let mut trial_database = None;
        if let (Some(pg), Some(db)) = (postgres_of(&own, &self.run), &database) {
            let reset = self.services.postgres.as_ref().map(|p| p.reset);
            let used = if reset == Some(Reset::Template) {
                let copy = format!("{db}_t{trial_id}");
                // An interrupted attempt of this trial may have left its copy.
                pg.drop_database(&copy)?;
                pg.create_database(&copy, Some(db)).with_context(|| {
                    format!("services.postgres: cannot copy the database {db} for trial {trial_id}")
                })?;
                record.template = Some(db.clone());
                trial_database = Some(copy.clone());
                copy
            } else {
                db.clone()
            };
            record.rows_at_start = pg.row_counts(&used)?;
            env.insert("DATABASE_URL".to_string(), pg.url(&used));
            record.database = Some(used);
        }
        if let Some(r) = redis_of(&own, &self.run) {
            if self.services.redis.as_ref().map(|r| r.reset) == Some(Reset::Flush) {
                r.flush_all().context("services.redis: FLUSHALL")?;
                record.redis_flushed = true;
            }
            record.redis_keys_at_start = Some(r.key_count()?);
        }
        Ok(PreparedTrial {
            env,
            setup_ran,
            record,
            own,
            trial_database,
        })
    }

    /// Counts again, drops the trial's database, stops the trial's services; returns the
    /// record for the trial's result. Problems here are recorded, never fatal: the trial's
    /// measurement is already taken.
    pub fn after_trial(&mut self, mut prepared: PreparedTrial) -> TrialServicesRecord {
        let mut record = std::mem::take(&mut prepared.record);
        {
            if let (Some(pg), Some(db)) = (
                postgres_of(&prepared.own, &self.run),
                record.database.clone(),
            ) {
                match pg.row_counts(&db) {
                    Ok(rows) => record.rows_at_end = rows,
                    Err(e) => record
                        .problems
                        .push(format!("row counts at the end: {e:#}")),
                }
                if let Some(copy) = &prepared.trial_database {
                    if let Err(e) = pg.drop_database(copy) {
                        record.problems.push(format!("cannot drop {copy}: {e:#}"));
                    }
                }
            }
            if let Some(r) = redis_of(&prepared.own, &self.run) {
                match r.key_count() {
                    Ok(n) => record.redis_keys_at_end = Some(n),
                    Err(e) => record
                        .problems
                        .push(format!("Redis DBSIZE at the end: {e:#}")),
                }
            }
        }
        if let Some(mut own) = prepared.own.take() {
            own.stop();
            if own.record != InstancesRecord::default() {
                record.instances = Some(own.record);
            }
        }
        record
    }

    /// Stops the run's services and removes their data; returns their record.
    pub fn stop(mut self) -> InstancesRecord {
        self.run.stop();
        std::mem::take(&mut self.run.record)
    }
}

/// The PostgreSQL a trial uses: its own, else the run's.
fn postgres_of<'a>(own: &'a Option<Instances>, run: &'a Instances) -> Option<&'a Postgres> {
    own.as_ref()
        .and_then(|o| o.postgres.as_ref())
        .or(run.postgres.as_ref())
}

/// The Redis a trial uses: its own, else the run's.
fn redis_of<'a>(own: &'a Option<Instances>, run: &'a Instances) -> Option<&'a Redis> {
    own.as_ref()
        .and_then(|o| o.redis.as_ref())
        .or(run.redis.as_ref())
}

/// What the experiment's services need that this machine does not have, checked before
/// anything starts (the dry run included): each problem in one line, keyed as in the file.
pub fn check(services: &experiment::services::Services) -> Vec<String> {
    let mut problems = Vec::new();
    if let Some(p) = &services.postgres {
        problems.extend(postgres::check(p));
    }
    if let Some(r) = &services.redis {
        problems.extend(redis::check(r));
    }
    problems
}

/// The services as the dry run shows them, one line each: the program this machine would
/// run (found as `check` finds it) and the file's keys.
pub fn describe(services: &experiment::services::Services) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(p) = &services.postgres {
        let program = postgres::program(p).map_or_else(
            |e| format!("not found: {e:#}"),
            |path| path.display().to_string(),
        );
        lines.push(format!("PostgreSQL ({program}): {}", p.describe()));
    }
    if let Some(r) = &services.redis {
        let program = redis::program(r).map_or_else(
            |e| format!("not found: {e:#}"),
            |path| path.display().to_string(),
        );
        lines.push(format!("Redis ({program}): {}", r.describe()));
    }
    lines
}

/// Removes what services of an earlier session left in `results_dir` (rubyrace was killed
/// before it could stop them; their processes were killed with it, or by the registry),
/// and the private directories any killed rubyrace left under /var/tmp.
pub fn remove_leftovers(results_dir: &Path) {
    // Also what a killed rubyrace left under /var/tmp, whatever its results directory.
    account::sweep_abandoned();
    let home = results_dir.join(SERVICES_DIR);
    let Ok(entries) = std::fs::read_dir(&home) else {
        return;
    };
    postgres::remove_home(&home.join("postgres"));
    redis::remove_home(&home.join("redis"));
    for e in entries.flatten() {
        if e.file_name().to_string_lossy().starts_with("trial-") {
            postgres::remove_home(&e.path().join("postgres"));
            redis::remove_home(&e.path().join("redis"));
        }
    }
}

/// Runs the setup commands of one configuration's (Ruby, Gemfile, app), in order, in the
/// app's directory, with the app's environment and the services' URLs. Fails with the
/// command's output when one fails.
#[allow(clippy::too_many_arguments)]
fn run_setup(
    settings: &ConfigSettings,
    key: usize,
    database: Option<String>,
    services_env: &BTreeMap<String, String>,
    dir: &Path,
    results_dir: &Path,
    name: &str,
    registry: &Path,
    interrupt: &AtomicBool,
) -> Result<Vec<SetupRecord>> {
    let mut records = Vec::new();
    let mut env: BTreeMap<String, String> = [
        ("RACK_ENV", "production"),
        ("RAILS_ENV", "production"),
        ("APP_ENV", "production"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    env.extend(services_env.clone());
    env.extend(settings.env.clone());
    for (i, argv) in settings.setup.iter().enumerate() {
        let launch = Launch {
            argv: argv.clone(),
            env: env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            cwd: settings.app_dir.clone(),
            cpus: None,
        };
        let log_name = format!("{name}-{}", i + 1);
        let started = Instant::now();
        let shown = sys::process::display_argv(
            &argv
                .iter()
                .map(std::ffi::OsString::from)
                .collect::<Vec<_>>(),
        );
        let mut child = Supervised::spawn(&launch, dir, &log_name, registry)
            .with_context(|| format!("setup: cannot run {shown}"))?;
        let status = loop {
            if let Some(s) = child.exited() {
                break Some(s);
            }
            if interrupt.load(Ordering::SeqCst) || started.elapsed() > SETUP_TIMEOUT {
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let relative = |p: &Path| p.strip_prefix(results_dir).unwrap_or(p).to_path_buf();
        let stdout = relative(child.stdout_path());
        let stderr = relative(child.stderr_path());
        let Some(status) = status else {
            child.stop(Duration::from_secs(5));
            if interrupt.load(Ordering::SeqCst) {
                bail!("setup: interrupted while running {shown}");
            }
            bail!(
                "setup: {shown} did not finish within {} s; the end of its output ({}):\n{}",
                SETUP_TIMEOUT.as_secs(),
                child.stderr_path().display(),
                tail_file(child.stderr_path(), 2000).trim_end()
            );
        };
        child.stop(Duration::from_secs(5));
        records.push(SetupRecord {
            key,
            ruby: settings.ruby.clone(),
            app_dir: settings.app_dir.clone(),
            argv: argv.clone(),
            database: database.clone(),
            status: describe_status(status),
            wall_s: started.elapsed().as_secs_f64(),
            stdout,
            stderr,
        });
        if !status.success() {
            let mut tail = tail_file(child.stderr_path(), 2000);
            if tail.trim().is_empty() {
                tail = tail_file(child.stdout_path(), 2000);
            }
            let error = [child.stderr_path(), child.stdout_path()]
                .into_iter()
                .find_map(sys::process::ruby_error_line)
                .map(|line| format!(": {line}"))
                .unwrap_or_default();
            bail!(
                "setup: {shown} failed ({}) in {}{error}; the end of its output ({}):\n{}",
                describe_status(status),
                settings.app_dir.display(),
                child.stderr_path().display(),
                tail.trim_end()
            );
        }
    }
    Ok(records)
}
