//! PostgreSQL as a service of a run: Debian's server binaries (`initdb`, `postgres`,
//! `psql` from `/usr/lib/postgresql/N/bin`), a private data directory, the one role
//! `rubyrace` with a password made for the run (scram-sha-256) on loopback or a Unix socket
//! only, readiness by a real query, and per-trial databases copied from a template.
//!
//! PostgreSQL refuses to run as root: as root, `initdb` and `postgres` run as the user
//! `postgres` (Debian's package creates it), or `nobody`, in a directory of that user's
//! (`account`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use nix::sys::signal::Signal;

use experiment::services::{Listen, PostgresService};
use results::services::PostgresRecord;
use sys::process::{tail_file, Launch, Supervised};

use super::account;

/// The role the app and rubyrace connect as (loopback or a private socket, with a password).
pub const ROLE: &str = "rubyrace";
/// How long PostgreSQL may take to answer its first query.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Settings recorded besides those the experiment sets.
const RECORDED: [&str; 8] = [
    "server_version",
    "shared_buffers",
    "max_connections",
    "fsync",
    "synchronous_commit",
    "work_mem",
    "effective_cache_size",
    "jit",
];
/// initdb's authentication for every connection, local and over TCP.
const AUTHENTICATION_ARG: &str = "--auth=scram-sha-256";
/// The longest path of a Unix socket (`sun_path`, with its NUL).
const SUN_PATH_MAX: usize = 107;

/// A running PostgreSQL.
pub struct Postgres {
    process: Option<Supervised>,
    bin: PathBuf,
    /// The directory the service owns (data, socket, logs); removed at the end.
    home: PathBuf,
    /// psql's `-h`: 127.0.0.1 or the socket directory.
    host: String,
    port: u16,
    /// The role's password: in `DATABASE_URL`, and psql's `PGPASSWORD`; never recorded.
    password: String,
    pub record: PostgresRecord,
}

/// What the file asks of PostgreSQL that this machine cannot give, found before anything
/// starts: no `postgres` where it looks, or a setting name this PostgreSQL does not have
/// (from `postgres --describe-config`; a typo such as `shared_bufers` used to pass the dry
/// run, fail the run, and fail every resume the same way).
pub fn check(config: &PostgresService) -> Vec<String> {
    let bin = match bin_dir(config) {
        Ok(bin) => bin,
        Err(e) => return vec![format!("{e:#}")],
    };
    if config.settings.is_empty() {
        return Vec::new();
    }
    let described = std::process::Command::new(bin.join("postgres"))
        .arg("--describe-config")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    let Ok(out) = described.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()) else {
        return Vec::new();
    };
    let names: Vec<&str> = out.lines().filter_map(|l| l.split('\t').next()).collect();
    if names.is_empty() {
        return Vec::new();
    }
    config
        .settings
        .keys()
        .filter(|k| !names.iter().any(|n| n.eq_ignore_ascii_case(k)))
        .map(|k| {
            let hint = experiment::did_you_mean(k, &names)
                .map(|n| format!(" (did you mean `{n}`?)"))
                .unwrap_or_default();
            format!(
                "services.postgres.settings.{k}: {} has no setting of that name{hint}",
                bin.join("postgres").display()
            )
        })
        .collect()
}

/// A URL component with every byte but the unreserved ones (RFC 3986: letters, digits,
/// `-._~`) percent-encoded.
fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The `postgres` executable `config` would run.
pub fn program(config: &PostgresService) -> Result<PathBuf> {
    bin_dir(config).map(|bin| bin.join("postgres"))
}

/// The newest `/usr/lib/postgresql/*/bin` holding `postgres`, or `bin_dir`.
fn bin_dir(config: &PostgresService) -> Result<PathBuf> {
    if let Some(dir) = &config.bin_dir {
        if dir.join("postgres").is_file() {
            return Ok(dir.clone());
        }
        bail!(
            "services.postgres.bin_dir: {} holds no `postgres`",
            dir.display()
        );
    }
    match doctor::newest_postgres_bin() {
        Some(bin) => Ok(bin),
        None => bail!(
            "PostgreSQL is not installed: no /usr/lib/postgresql/*/bin/postgres (Debian: apt-get install postgresql; scripts/setup installs it)"
        ),
    }
}

/// The directories of a PostgreSQL being started, and the user it runs as.
struct Dirs {
    /// Where the data and the socket live: `home`, or a private directory outside it.
    data_home: PathBuf,
    data: PathBuf,
    socket_dir: PathBuf,
    /// The user `initdb` and `postgres` run as, when rubyrace is root.
    user: Option<account::ServiceUser>,
}

impl Dirs {
    /// Empties `home` and makes the private directories of the data and the socket.
    fn create(home: &Path) -> Result<Dirs> {
        remove_home(home);
        std::fs::create_dir_all(home)
            .with_context(|| format!("cannot create {}", home.display()))?;
        let user = account::service_user("PostgreSQL", &["postgres", "nobody"])?;
        // The data (and the socket) live in `data_home`: `home`, or outside it.
        let data_home = account::private_dir(home, user.as_ref(), "rubyrace-postgres-")?;
        let data = data_home.join("data");
        let socket_dir = data_home.join("socket");
        std::fs::create_dir_all(&socket_dir)
            .with_context(|| format!("cannot create {}", socket_dir.display()))?;
        account::make_private(&data_home, user.as_ref())?;
        account::make_private(&socket_dir, user.as_ref())?;
        Ok(Dirs {
            data_home,
            data,
            socket_dir,
            user,
        })
    }
}

/// Runs initdb (its output in `home`'s log) and returns the role's new password.
fn init_cluster(
    bin: &Path,
    dirs: &Dirs,
    home: &Path,
    tag: &str,
    ids: Option<(u32, u32)>,
) -> Result<String> {
    // initdb: a password for the one role (read from a private file, so no argv shows
    // it), scram-sha-256 for every connection, no fsync of the new files (a throwaway
    // cluster).
    let password = account::new_password()?;
    let pwfile = dirs.data_home.join("pwfile");
    account::write_private_file(&pwfile, &format!("{password}\n"), dirs.user.as_ref())?;
    let initdb_log = home.join(format!("{}.log", super::log_name("initdb", tag)));
    let mut initdb = Command::new(bin.join("initdb"));
    initdb
        .args(["-D"])
        .arg(&dirs.data)
        .arg(format!("--pwfile={}", pwfile.display()))
        .args([
            "-U",
            ROLE,
            AUTHENTICATION_ARG,
            "--encoding=UTF8",
            "--no-locale",
            "--no-sync",
        ])
        .stdin(std::process::Stdio::null());
    if let Some((uid, gid)) = ids {
        use std::os::unix::process::CommandExt;
        initdb.uid(uid).gid(gid);
    }
    let out = initdb.output();
    let _ = std::fs::remove_file(&pwfile);
    let out = out.with_context(|| format!("cannot run {}", bin.join("initdb").display()))?;
    let _ = std::fs::write(&initdb_log, [&out.stdout[..], &out.stderr[..]].concat());
    if !out.status.success() {
        bail!(
            "PostgreSQL's initdb failed ({}): {}",
            sys::process::describe_status(out.status),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(password)
}

/// psql's host (127.0.0.1 or the socket directory) and the port PostgreSQL listens on.
fn listen_on(config: &PostgresService, socket_dir: &Path) -> Result<(String, u16)> {
    Ok(match config.listen {
        Listen::Tcp => ("127.0.0.1".to_string(), crate::readiness::free_port()?),
        Listen::Unix => {
            let socket = socket_dir.join(".s.PGSQL.5432");
            let len = socket.as_os_str().len();
            if len > SUN_PATH_MAX {
                bail!(
                    "services.postgres: listen = \"unix\", but the socket path {} is {len} bytes, over the {SUN_PATH_MAX} of a Unix socket: use listen = \"tcp\", or a shorter results directory",
                    socket.display()
                );
            }
            (socket_dir.to_string_lossy().into_owned(), 5432)
        }
    })
}

/// `postgres`'s argv: the data directory, the port, where it listens, and the experiment's
/// settings.
fn server_argv(config: &PostgresService, bin: &Path, dirs: &Dirs, port: u16) -> Vec<String> {
    let mut argv = vec![
        bin.join("postgres").to_string_lossy().into_owned(),
        "-D".into(),
        dirs.data.to_string_lossy().into_owned(),
        "-p".into(),
        port.to_string(),
    ];
    let fixed: Vec<(String, String)> = vec![
        (
            "listen_addresses".into(),
            match config.listen {
                Listen::Tcp => "127.0.0.1".into(),
                Listen::Unix => String::new(),
            },
        ),
        (
            "unix_socket_directories".into(),
            match config.listen {
                Listen::Tcp => String::new(),
                Listen::Unix => dirs.socket_dir.to_string_lossy().into_owned(),
            },
        ),
        ("logging_collector".into(), "off".into()),
    ];
    let settings = fixed
        .iter()
        .map(|(k, v)| (k, v))
        .chain(config.settings.iter());
    for (name, value) in settings {
        argv.push("-c".into());
        argv.push(format!("{name}={value}"));
    }
    argv
}

/// The recorded address (`127.0.0.1:PORT` or the socket directory) and the base of
/// `DATABASE_URL`, without the password.
fn addresses(config: &PostgresService, host: &str, port: u16) -> (String, String) {
    let address = match config.listen {
        Listen::Tcp => format!("127.0.0.1:{port}"),
        Listen::Unix => host.to_string(),
    };
    let url_base = match config.listen {
        Listen::Tcp => format!("postgres://{ROLE}@127.0.0.1:{port}"),
        // The socket directory as the URL's host, percent-encoded, as libpq documents
        // (`postgresql://%2Fvar%2Flib%2Fpostgresql/dbname`): ActiveRecord 6.1 refuses
        // `postgres://user@/db?host=DIR` (URI::InvalidURIError) and drops the `host` of
        // `postgres:///db?host=DIR`, while libpq (PG.connect, Sequel) and ActiveRecord
        // all read this one.
        Listen::Unix => format!("postgres://{ROLE}@{}", percent_encode(host)),
    };
    (address, url_base)
}

impl Postgres {
    /// How it ended, when it is no longer running (killed, crashed) though it should be.
    pub fn died(&mut self) -> Option<std::process::ExitStatus> {
        self.process.as_mut().and_then(|p| p.exited())
    }

    /// Creates a cluster under `home` (emptied first) and starts it; returns once a query
    /// is answered. `registry` registers the server's process group, as for app servers.
    /// A start that fails leaves its logs and nothing else (no `data/`, `socket/` or
    /// private directory).
    pub fn start(
        config: &PostgresService,
        home: &Path,
        registry: &Path,
        tag: &str,
    ) -> Result<Postgres> {
        let started = Self::start_in(config, home, registry, tag);
        if started.is_err() {
            remove_home(home);
        }
        started
    }

    /// The start without its cleanup on failure (see [`Postgres::start`]): the directories,
    /// the cluster, the server, and once it answers, what it runs with recorded.
    fn start_in(
        config: &PostgresService,
        home: &Path,
        registry: &Path,
        tag: &str,
    ) -> Result<Postgres> {
        let bin = bin_dir(config)?;
        let dirs = Dirs::create(home)?;
        let ids = dirs.user.as_ref().map(account::ServiceUser::ids);
        let password = init_cluster(&bin, &dirs, home, tag, ids)?;
        let (host, port) = listen_on(config, &dirs.socket_dir)?;
        let argv = server_argv(config, &bin, &dirs, port);
        let launch = Launch {
            argv: argv.clone(),
            env: vec![("LC_ALL".into(), "C".into())],
            cwd: dirs.data_home.clone(),
            cpus: None,
        };
        let started = Instant::now();
        let name = super::log_name("postgres", tag);
        let process = Supervised::spawn_as(&launch, home, &name, registry, ids)
            .context("PostgreSQL did not start")?;
        let (address, url_base) = addresses(config, &host, port);
        let mut pg = Postgres {
            process: Some(process),
            bin,
            home: home.to_path_buf(),
            host,
            port,
            password,
            record: PostgresRecord {
                argv,
                user: account::user_name(dirs.user.as_ref()),
                data_dir: dirs.data,
                address,
                url_base,
                authentication: "scram-sha-256".into(),
                log: home.join(format!("{name}.stderr")),
                ..PostgresRecord::default()
            },
        };
        pg.wait_ready(started)?;
        pg.record.ready_after_s = started.elapsed().as_secs_f64();
        pg.record.version = pg.query("postgres", "SELECT version()")?.trim().to_string();
        pg.record.settings = pg.settings_in_force(config)?;
        Ok(pg)
    }

    /// The settings recorded ([`RECORDED`] and those the experiment sets), as PostgreSQL
    /// reports them.
    fn settings_in_force(&self, config: &PostgresService) -> Result<BTreeMap<String, String>> {
        let mut names: Vec<String> = RECORDED.iter().map(|s| s.to_string()).collect();
        names.extend(config.settings.keys().cloned());
        let list = names
            .iter()
            .map(|n| format!("'{}'", n.replace('\'', "''")))
            .collect::<Vec<_>>()
            .join(",");
        let rows = self.query(
            "postgres",
            &format!("SELECT name, current_setting(name) FROM pg_settings WHERE name IN ({list}) ORDER BY name"),
        )?;
        Ok(rows
            .lines()
            .filter_map(|l| l.split_once('|'))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect())
    }

    /// Polls with `SELECT 1` until PostgreSQL answers; fails with its log's tail when it
    /// exits or does not answer in time.
    fn wait_ready(&mut self, started: Instant) -> Result<()> {
        loop {
            if let Some(status) = self.process.as_mut().and_then(|p| p.exited()) {
                bail!(
                    "PostgreSQL exited before it was ready ({}); the end of its log ({}):\n{}",
                    sys::process::describe_status(status),
                    self.record.log.display(),
                    tail_file(&self.record.log, 2000).trim_end()
                );
            }
            if self
                .query("postgres", "SELECT 1")
                .is_ok_and(|o| o.trim() == "1")
            {
                return Ok(());
            }
            if started.elapsed() > READY_TIMEOUT {
                bail!(
                    "PostgreSQL did not answer a query within {}s; the end of its log ({}):\n{}",
                    READY_TIMEOUT.as_secs(),
                    self.record.log.display(),
                    tail_file(&self.record.log, 2000).trim_end()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs one SQL statement with psql against `database`; its unaligned, tuples-only
    /// output (`a|b` per row).
    pub fn query(&self, database: &str, sql: &str) -> Result<String> {
        let out = Command::new(self.bin.join("psql"))
            .args([
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                &self.host,
                "-p",
            ])
            .arg(self.port.to_string())
            .args(["-U", ROLE, "-d", database, "-c", sql])
            .env("PGCONNECT_TIMEOUT", "5")
            .env("PGPASSWORD", &self.password)
            .stdin(std::process::Stdio::null())
            .output()
            .with_context(|| format!("cannot run {}", self.bin.join("psql").display()))?;
        if !out.status.success() {
            bail!(
                "psql: {}: {}",
                sql,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `DATABASE_URL` for `database`, with the password: for the app's environment only.
    pub fn url(&self, database: &str) -> String {
        let base = self.record.url_base.replacen(
            &format!("//{ROLE}@"),
            &format!("//{ROLE}:{}@", self.password),
            1,
        );
        format!("{base}/{database}")
    }

    pub fn create_database(&self, name: &str, template: Option<&str>) -> Result<()> {
        let sql = match template {
            Some(t) => format!("CREATE DATABASE {name} TEMPLATE {t}"),
            None => format!("CREATE DATABASE {name}"),
        };
        self.query("postgres", &sql).map(|_| ())
    }

    pub fn drop_database(&self, name: &str) -> Result<()> {
        self.query(
            "postgres",
            &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
        )
        .map(|_| ())
    }

    /// The exact row count of every table of `database` (schema `public`), in one query.
    pub fn row_counts(&self, database: &str) -> Result<BTreeMap<String, i64>> {
        let sql = "SELECT table_name, (xpath('/row/c/text()', query_to_xml(format('SELECT count(*) AS c FROM %I.%I', table_schema, table_name), false, true, '')))[1]::text::bigint FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1";
        let out = self.query(database, sql)?;
        Ok(out
            .lines()
            .filter_map(|l| l.split_once('|'))
            .filter_map(|(t, n)| Some((t.to_string(), n.trim().parse().ok()?)))
            .collect())
    }

    /// Fast shutdown (INT), KILL after 10 s; then the directory is removed.
    pub fn stop(mut self) -> String {
        let ended = self
            .process
            .take()
            .map(|mut p| p.stop_with(Signal::SIGINT, Duration::from_secs(10)));
        self.remove_data();
        ended.map_or_else(String::new, |e| format!("{} ({})", e.status, e.stopped_by))
    }

    /// Removes the cluster's files; the logs stay.
    fn remove_data(&mut self) {
        remove_home(&self.home);
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Some(mut p) = self.process.take() {
            p.stop_with(Signal::SIGINT, Duration::from_secs(5));
            self.remove_data();
        }
    }
}

/// Removes what an earlier PostgreSQL of this directory left (rubyrace was killed): the
/// data under it, and the private directory its `outside` link points to.
pub fn remove_home(home: &Path) {
    account::remove_outside(home);
    let _ = std::fs::remove_dir_all(home.join("data"));
    let _ = std::fs::remove_dir_all(home.join("socket"));
}
