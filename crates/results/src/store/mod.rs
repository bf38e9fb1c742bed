//! The results store: one SQLite database (`results.db`, WAL mode, one transaction per
//! trial) plus one directory of files per trial (`trials/NNNNN/`: server output, latency
//! histogram). The schema is versioned and documented in docs/results.md.
//!
//! The database holds the experiment's text, its expanded configurations and its schedule,
//! so a resume runs exactly the planned trials with exactly the stored settings, whatever
//! happened to the experiment file since. A trial is either committed whole or absent:
//! an interrupted trial leaves no row and is run again.
//!
//! `schema` holds the tables, `write` what a run adds (trials, sessions, blocks), `read`
//! what the report, resume and export read back, and `summary` the end-of-run table.

pub mod block;
mod read;
mod schema;
mod summary;
mod write;
pub mod writer;

pub use block::BLOCK_PREFIX;
pub use summary::{summary_table, SummaryRow};
pub use write::SessionKind;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use experiment::schedule::ScheduledTrial;
use experiment::Experiment;
use rusqlite::{params, Connection, OpenFlags};

use schema::{NOISY_ATTEMPTS, SCHEMA};

pub const DB_FILE: &str = "results.db";

/// Bumped on any incompatible change of the tables below.
pub const SCHEMA_VERSION: i64 = 1;

/// Meta key prefix of the doctor's report of a session (`doctor.session.<id>`).
const DOCTOR_PREFIX: &str = "doctor.session.";
/// Meta keys of the services each session started.
const SERVICES_PREFIX: &str = "services.session.";

/// The files of a trial's directory (`trials/NNNNN/`), named once: the lab writes them,
/// the report and the command line read them.
pub mod trial_files {
    /// The server's log name: its output goes to `server.stdout` and `server.stderr`.
    pub const SERVER_LOG: &str = "server";
    pub const SERVER_STDOUT: &str = "server.stdout";
    pub const SERVER_STDERR: &str = "server.stderr";
    /// The measured phase's latency histogram, an HdrHistogram interval log.
    pub const LATENCY_HLOG: &str = "latency.hlog";
}

/// Where the files of trial `trial_id` of the results directory `dir` go.
pub fn trial_dir(dir: &Path, trial_id: usize) -> PathBuf {
    dir.join("trials").join(format!("{trial_id:05}"))
}

/// Where the live server groups of the results directory `dir` are registered.
pub fn registry(dir: &Path) -> PathBuf {
    dir.join("live")
}

/// Whether a results database is opened to add trials or only to read them.
enum Access {
    ReadWrite,
    ReadOnly,
}

/// Removes a results database that holds nothing worth keeping, with its journal files.
fn remove_database_files(dir: &Path) -> Result<()> {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let f = dir.join(format!("{DB_FILE}{suffix}"));
        if f.exists() {
            std::fs::remove_file(&f).with_context(|| format!("cannot remove {}", f.display()))?;
        }
    }
    Ok(())
}

/// How many trials (of any status) a results database holds.
fn stored_trials(db: &Path) -> Result<i64> {
    let (conn, _snapshot) = open_read_only_connection(db)?;
    Ok(conn.query_row("SELECT count(*) FROM trials", [], |r| r.get(0))?)
}

/// An open results directory.
pub struct Store {
    conn: Connection,
    /// A writer's lock on the directory (`writer`), held as long as the store is open;
    /// readers hold none.
    _writer: Option<writer::WriterLock>,
    /// The private copy a reader reads when a stopped run left a write-ahead log (see
    /// `open_read_only_connection`); removed after `conn` is closed.
    _snapshot: Option<tempfile::TempDir>,
    dir: PathBuf,
}

fn open_connection(path: &Path) -> Result<Connection> {
    let conn = Connection::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    // WAL keeps readers (a report during a run) from blocking the writer; FULL makes a
    // committed trial survive a power loss.
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    Ok(conn)
}

/// A read-only connection for readers (`report`, `export`, `compare`), which must never
/// change a byte of a results directory and must work on read-only media: no
/// `journal_mode` pragma, no `-wal` or `-shm` file created or changed.
///
/// - No `-wal` beside the database: no run is writing and every committed trial is in the
///   main file, so it is opened `immutable` (no locks, no shared-memory file).
/// - A `-wal` that a live connection holds (a run in progress): the reader goes through
///   SQLite's write-ahead log and its shared-memory index, which belong to that run.
/// - A `-wal` that nobody holds (a run that was killed): SQLite would rebuild, or create,
///   the `-shm` index to read it. The database and its log are copied into a private
///   temporary directory instead and read there; the copy lives as long as the connection.
fn open_read_only_connection(db: &Path) -> Result<(Connection, Option<tempfile::TempDir>)> {
    let wal = db.with_file_name(format!("{DB_FILE}-wal"));
    let shm = db.with_file_name(format!("{DB_FILE}-shm"));
    if !wal.exists() {
        return Ok((open_uri(db, "mode=ro&immutable=1")?, None));
    }
    if is_held_by_a_connection(&shm) {
        return Ok((open_uri(db, "mode=ro")?, None));
    }
    let snapshot = tempfile::Builder::new()
        .prefix("rubyrace-read-")
        .tempdir()
        .with_context(|| format!("cannot make a private copy of {} to read it", db.display()))?;
    let copy = snapshot.path().join(DB_FILE);
    for (from, to) in [
        (db.to_path_buf(), copy.clone()),
        (wal, copy.with_file_name(format!("{DB_FILE}-wal"))),
    ] {
        std::fs::copy(&from, &to).with_context(|| {
            format!(
                "cannot copy {} to read it (its write-ahead log was left by a run that stopped)",
                from.display()
            )
        })?;
    }
    let conn = open_uri(&copy, "mode=ro")
        .with_context(|| format!("cannot open {} for reading", db.display()))?;
    Ok((conn, Some(snapshot)))
}

fn open_uri(db: &Path, options: &str) -> Result<Connection> {
    let absolute = std::path::absolute(db).unwrap_or_else(|_| db.to_path_buf());
    // A URI path: '%', '?' and '#' would otherwise be read as escapes, query or fragment.
    let mut path = String::new();
    for c in absolute.to_string_lossy().chars() {
        match c {
            '%' => path.push_str("%25"),
            '?' => path.push_str("%3f"),
            '#' => path.push_str("%23"),
            c => path.push(c),
        }
    }
    let conn = Connection::open_with_flags(
        format!("file:{path}?{options}"),
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .with_context(|| format!("cannot open {} for reading", db.display()))?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    Ok(conn)
}

/// Whether a process has the database of this `-shm` file open: every SQLite connection to
/// a WAL database holds a read lock on byte 128 of its `-shm` file (the "dead man switch"
/// of SQLite's unix VFS, `UNIX_SHM_DMS`) for as long as it is open. Read from /proc/locks,
/// by inode, so that the file is not even opened (closing a descriptor would drop this
/// process's own POSIX locks on it).
fn is_held_by_a_connection(shm: &Path) -> bool {
    const SHM_DMS_BYTE: u64 = 128;
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(shm) else {
        return false;
    };
    let Ok(locks) = procfs::locks() else {
        // Cannot tell: read in place, as SQLite itself would.
        return true;
    };
    locks.iter().any(|l| {
        l.inode == meta.ino()
            && l.offset_first <= SHM_DMS_BYTE
            && l.offset_last.is_none_or(|last| last >= SHM_DMS_BYTE)
    })
}

/// Whether the creating transaction of a results database was committed (its tables exist).
/// `Err` when the database cannot be read at all (then nothing is assumed about it).
fn created_completely(db: &Path) -> Result<bool> {
    let (conn, _snapshot) = open_read_only_connection(db)?;
    let n: i64 = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'",
        [],
        |r| r.get(0),
    )?;
    Ok(n == 1)
}

/// One configuration's row, within the caller's transaction.
fn insert_config(tx: &rusqlite::Transaction, c: &experiment::Config) -> Result<()> {
    tx.execute(
        "INSERT INTO configs (config_id, label, axes, settings) VALUES (?1, ?2, ?3, ?4)",
        params![
            c.id as i64,
            c.label,
            serde_json::to_string(&c.axes)?,
            serde_json::to_string(&c.settings)?
        ],
    )?;
    Ok(())
}

fn insert_schedule(tx: &rusqlite::Transaction, trials: &[ScheduledTrial]) -> Result<()> {
    for t in trials {
        tx.execute(
            "INSERT INTO schedule (trial_id, block, position, config_id) VALUES (?1, ?2, ?3, ?4)",
            params![
                t.trial_id as i64,
                t.block,
                t.position as i64,
                t.config_id as i64
            ],
        )?;
    }
    Ok(())
}

fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

impl Store {
    /// Creates a new results directory for `experiment`. Refuses a directory that already
    /// holds results.
    pub fn create(
        dir: &Path,
        experiment: &Experiment,
        schedule: &[ScheduledTrial],
        smoke: bool,
    ) -> Result<Store> {
        // Absolute, because servers run in their app's directory and are given paths in here.
        let dir = &std::path::absolute(dir)
            .with_context(|| format!("cannot resolve {}", dir.display()))?;
        let db = dir.join(DB_FILE);
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let lock = writer::acquire(dir)?;
        if db.exists() && matches!(created_completely(&db), Ok(false)) {
            // rubyrace was killed while creating the store (one transaction): nothing in it.
            remove_database_files(dir)?;
        }
        if db.exists() && matches!(stored_trials(&db), Ok(0)) {
            // A run that stopped before its first trial (a service that would not start, a
            // setup that failed): its plan may be what was wrong, so a fixed file replaces
            // it. Its trial directories, if any, hold no stored trial.
            remove_database_files(dir)?;
            let trials = dir.join("trials");
            if trials.exists() {
                std::fs::remove_dir_all(&trials)
                    .with_context(|| format!("cannot remove {}", trials.display()))?;
            }
        }
        if db.exists() {
            bail!(
                "{} already holds results; continue it with `rubyrace run --resume {}`, or choose another directory with -o",
                dir.display(),
                dir.display()
            );
        }
        let mut conn = open_connection(&db)?;
        let tx = conn.transaction()?;
        tx.execute_batch(SCHEMA)?;
        tx.execute_batch(NOISY_ATTEMPTS)?;
        let file =
            std::fs::canonicalize(&experiment.file).unwrap_or_else(|_| experiment.file.clone());
        let mut meta: Vec<(&str, String)> = vec![
            ("schema_version", SCHEMA_VERSION.to_string()),
            ("rubyrace_version", env!("CARGO_PKG_VERSION").to_string()),
            ("created_at", now()),
            ("experiment_name", experiment.name.clone()),
            (
                "experiment_description",
                experiment.description.clone().unwrap_or_default(),
            ),
            ("experiment_file", file.display().to_string()),
            ("experiment_text", experiment.text.clone()),
            ("seed", experiment.seed.to_string()),
            ("batches", experiment.batches.to_string()),
            (
                "order",
                serde_json::to_value(experiment.order)?
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            ),
            ("record_env", serde_json::to_string(&experiment.record_env)?),
            ("smoke", smoke.to_string()),
            ("conditions", serde_json::to_string(&experiment.conditions)?),
            ("design", serde_json::to_string(&experiment.design)?),
            ("services", serde_json::to_string(&experiment.services)?),
            (
                "precision",
                match &experiment.precision {
                    Some(t) => serde_json::to_string(t)?,
                    None => String::new(),
                },
            ),
        ];
        if let Some(commit) = crate::provenance::build_commit() {
            meta.push(("rubyrace_commit", commit.to_string()));
        }
        for (k, v) in meta {
            tx.execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2)",
                params![k, v],
            )?;
        }
        // `rubyrace run --slurm`: the fleet that runs the blocks (docs/fleet.md).
        if let Some(fleet) = &experiment.fleet {
            tx.execute(
                "INSERT INTO meta (key, value) VALUES ('fleet', ?1)",
                params![serde_json::to_string(fleet)?],
            )?;
        }
        // `rubyrace check`'s gate, only in the runs it makes.
        if let Some(gate) = &experiment.gate {
            tx.execute(
                "INSERT INTO meta (key, value) VALUES ('gate', ?1)",
                params![serde_json::to_string(gate)?],
            )?;
        }
        for c in &experiment.configs {
            insert_config(&tx, c)?;
        }
        insert_schedule(&tx, schedule)?;
        tx.commit()?;
        Ok(Store {
            conn,
            _writer: Some(lock),
            _snapshot: None,
            dir: dir.to_path_buf(),
        })
    }

    /// Opens an existing results directory to add trials (`run --resume`).
    pub fn open(dir: &Path) -> Result<Store> {
        Store::open_with(dir, Access::ReadWrite)
    }

    /// Opens an existing results directory to read it, changing nothing in it (see
    /// `open_read_only_connection`). Every error names the database file.
    pub fn open_read_only(dir: &Path) -> Result<Store> {
        Store::open_with(dir, Access::ReadOnly)
    }

    fn open_with(dir: &Path, access: Access) -> Result<Store> {
        let dir = &std::path::absolute(dir)
            .with_context(|| format!("cannot resolve {}", dir.display()))?;
        let db = dir.join(DB_FILE);
        if !db.is_file() {
            bail!(
                "{} holds no rubyrace results ({} is missing)",
                dir.display(),
                DB_FILE
            );
        }
        let header = std::fs::File::open(&db).and_then(|mut f| {
            let mut buf = [0u8; 16];
            let n = std::io::Read::read(&mut f, &mut buf)?;
            Ok(buf[..n].to_vec())
        });
        match header {
            Err(e) => bail!("cannot read {}: {e}", db.display()),
            Ok(h) if h.is_empty() => bail!(
                "{} is empty: not a results database (rubyrace was stopped while creating it, or the file was truncated)",
                db.display()
            ),
            Ok(h) if h != b"SQLite format 3\0" => {
                bail!("{} is not an SQLite database (its first bytes are not \"SQLite format 3\")", db.display())
            }
            Ok(_) => {}
        }
        if matches!(created_completely(&db), Ok(false)) {
            bail!(
                "{} was not created completely (rubyrace was stopped while creating it) and holds no trial; start the run again with `rubyrace run EXPERIMENT -o {}`",
                db.display(),
                dir.display()
            );
        }
        let (conn, snapshot, lock) = match access {
            Access::ReadWrite => {
                let lock = writer::acquire(dir)?;
                (open_connection(&db)?, None, Some(lock))
            }
            Access::ReadOnly => {
                let (conn, snapshot) = open_read_only_connection(&db)?;
                (conn, snapshot, None)
            }
        };
        let store = Store {
            conn,
            _writer: lock,
            _snapshot: snapshot,
            dir: dir.to_path_buf(),
        };
        let version: i64 = store
            .meta("schema_version")
            .with_context(|| format!("cannot read {}", db.display()))?
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("{} has no schema version", db.display()))?;
        if version != SCHEMA_VERSION {
            bail!(
                "{} was written with results schema {version}; this rubyrace reads schema {SCHEMA_VERSION}",
                db.display()
            );
        }
        Ok(store)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The database file.
    pub fn db_path(&self) -> PathBuf {
        self.dir.join(DB_FILE)
    }

    /// Adds the operating system's error (ENOSPC, EFBIG...) to an SQLite error, which
    /// alone says only "disk I/O error".
    fn explain(&self, e: rusqlite::Error) -> anyhow::Error {
        // SAFETY: the handle of our open connection; sqlite3_system_errno only reads it.
        let errno = unsafe { rusqlite::ffi::sqlite3_system_errno(self.conn.handle()) };
        if errno != 0 {
            anyhow::Error::new(e).context(format!("{}", std::io::Error::from_raw_os_error(errno)))
        } else {
            anyhow::Error::new(e)
        }
    }

    /// Where a trial's files go.
    pub fn trial_dir(&self, trial_id: usize) -> PathBuf {
        trial_dir(&self.dir, trial_id)
    }

    /// Where live server groups are registered.
    pub fn registry(&self) -> PathBuf {
        registry(&self.dir)
    }
}
