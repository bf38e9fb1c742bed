//! The results store: one SQLite database (`results.db`, WAL mode, one transaction per
//! trial) plus one directory of files per trial (`trials/NNNNN/`: server output, latency
//! histogram). The schema is versioned and documented in docs/results.md.
//!
//! The database holds the experiment's text, its expanded configurations and its schedule,
//! so a resume runs exactly the planned trials with exactly the stored settings, whatever
//! happened to the experiment file since. A trial is either committed whole or absent:
//! an interrupted trial leaves no row and is run again.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};

use crate::trial::TrialResult;
use experiment::schedule::ScheduledTrial;
use experiment::{Config, Experiment};

pub const DB_FILE: &str = "results.db";
/// Bumped on any incompatible change of the tables below.
pub const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &str = "
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE configs (
    config_id INTEGER PRIMARY KEY,
    label     TEXT NOT NULL UNIQUE,
    axes      TEXT NOT NULL,   -- JSON object: matrix axis -> value label
    settings  TEXT NOT NULL    -- JSON: the resolved ConfigSettings
);
CREATE TABLE schedule (
    trial_id  INTEGER PRIMARY KEY,
    block     INTEGER NOT NULL,
    position  INTEGER NOT NULL,
    config_id INTEGER NOT NULL REFERENCES configs(config_id),
    UNIQUE (block, position)
);
CREATE TABLE sessions (
    session_id  INTEGER PRIMARY KEY,
    kind        TEXT NOT NULL CHECK (kind IN ('start', 'resume')),
    command     TEXT NOT NULL,
    started_at  TEXT NOT NULL,
    finished_at TEXT,
    outcome     TEXT            -- 'complete', 'interrupted', 'stopped after trial N (--fail-fast)',
                                -- 'failed: <error>'; NULL if rubyrace was killed
);
CREATE TABLE trials (
    trial_id        INTEGER PRIMARY KEY REFERENCES schedule(trial_id),
    config_id       INTEGER NOT NULL REFERENCES configs(config_id),
    block           INTEGER NOT NULL,
    position        INTEGER NOT NULL,
    label           TEXT NOT NULL,
    session_id      INTEGER REFERENCES sessions(session_id),
    status          TEXT NOT NULL CHECK (status IN ('valid', 'invalid', 'failed')),
    reason          TEXT,
    started_at      TEXT NOT NULL,
    finished_at     TEXT NOT NULL,
    wall_s          REAL NOT NULL,
    requests_per_s  REAL,
    requests        INTEGER,
    error_rate      REAL,
    latency_p50_us  REAL,
    latency_p99_us  REAL,
    rss_end_bytes   INTEGER,
    pss_end_bytes   INTEGER,
    uss_end_bytes   INTEGER,
    rss_peak_bytes  INTEGER,
    pss_peak_bytes  INTEGER,
    cpu_user_us     INTEGER,
    cpu_system_us   INTEGER,
    cpu_us_per_request REAL,
    ctx_voluntary   INTEGER,
    ctx_involuntary INTEGER,
    threads_peak    INTEGER,
    processes_peak  INTEGER,
    script_wall_s   REAL,
    script_user_s   REAL,
    script_system_s REAL,
    ruby_description TEXT,
    result          TEXT NOT NULL  -- JSON: the whole TrialResult (schema rubyrace.trial/1)
);
";

/// Trials measured in noise and run again (`repeat_noisy`): kept, out of the statistics.
/// Created on demand, so results directories made before it existed still open.
const NOISY_ATTEMPTS: &str = "
CREATE TABLE IF NOT EXISTS noisy_attempts (
    trial_id   INTEGER NOT NULL REFERENCES schedule(trial_id),
    attempt    INTEGER NOT NULL,  -- 1, 2, ...: the attempts before the stored trial
    session_id INTEGER REFERENCES sessions(session_id),
    result     TEXT NOT NULL,     -- JSON: the attempt's whole TrialResult
    PRIMARY KEY (trial_id, attempt)
);
";

/// Where the files of trial `trial_id` of the results directory `dir` go.
/// Meta key prefix of the doctor's report of a session (`doctor.session.<id>`).
const DOCTOR_PREFIX: &str = "doctor.session.";

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

/// An open results directory.
pub struct Store {
    conn: Connection,
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
        if db.exists() && matches!(created_completely(&db), Ok(false)) {
            // rubyrace was killed while creating the store (one transaction): nothing in it.
            for suffix in ["", "-wal", "-shm", "-journal"] {
                let f = dir.join(format!("{DB_FILE}{suffix}"));
                if f.exists() {
                    std::fs::remove_file(&f)
                        .with_context(|| format!("cannot remove {}", f.display()))?;
                }
            }
        }
        if db.exists() {
            bail!(
                "{} already holds results; continue it with `rubyrace run --resume {}`, or choose another directory with -o",
                dir.display(),
                dir.display()
            );
        }
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let mut conn = open_connection(&db)?;
        let tx = conn.transaction()?;
        tx.execute_batch(SCHEMA)?;
        tx.execute_batch(NOISY_ATTEMPTS)?;
        let file =
            std::fs::canonicalize(&experiment.file).unwrap_or_else(|_| experiment.file.clone());
        let meta: Vec<(&str, String)> = vec![
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
            (
                "precision",
                match &experiment.precision {
                    Some(t) => serde_json::to_string(t)?,
                    None => String::new(),
                },
            ),
        ];
        for (k, v) in meta {
            tx.execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2)",
                params![k, v],
            )?;
        }
        for c in &experiment.configs {
            tx.execute(
                "INSERT INTO configs (config_id, label, axes, settings) VALUES (?1, ?2, ?3, ?4)",
                params![
                    c.id as i64,
                    c.label,
                    serde_json::to_string(&c.axes)?,
                    serde_json::to_string(&c.settings)?
                ],
            )?;
        }
        insert_schedule(&tx, schedule)?;
        tx.commit()?;
        Ok(Store {
            conn,
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
        let (conn, snapshot) = match access {
            Access::ReadWrite => (open_connection(&db)?, None),
            Access::ReadOnly => open_read_only_connection(&db)?,
        };
        let store = Store {
            conn,
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

    /// A meta value (`experiment_name`, `created_at`, `doctor.session.N`...).
    pub fn meta(&self, key: &str) -> Result<Option<String>> {
        Ok(self
            .conn
            .query_row("SELECT value FROM meta WHERE key = ?1", params![key], |r| {
                r.get(0)
            })
            .optional()?)
    }

    pub fn configs(&self) -> Result<Vec<Config>> {
        let mut stmt = self
            .conn
            .prepare("SELECT config_id, label, axes, settings FROM configs ORDER BY config_id")?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
            ))
        })?;
        let mut configs = Vec::new();
        for row in rows {
            let (id, label, axes, settings) = row?;
            configs.push(Config {
                id: id as usize,
                label,
                axes: serde_json::from_str(&axes).context("stored configuration axes")?,
                settings: serde_json::from_str(&settings)
                    .context("stored configuration settings")?,
            });
        }
        Ok(configs)
    }

    pub fn schedule(&self) -> Result<Vec<ScheduledTrial>> {
        let mut stmt = self.conn.prepare(
            "SELECT trial_id, block, position, config_id FROM schedule ORDER BY trial_id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(ScheduledTrial {
                trial_id: r.get::<_, i64>(0)? as usize,
                block: r.get(1)?,
                position: r.get::<_, i64>(2)? as usize,
                config_id: r.get::<_, i64>(3)? as usize,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The precision target of an adaptive run (`precision = "1%"`), if it is one.
    pub fn precision_target(&self) -> Result<Option<experiment::precision::PrecisionTarget>> {
        match self.meta("precision")? {
            Some(text) if !text.is_empty() => Ok(Some(
                serde_json::from_str(&text).context("the stored precision target")?,
            )),
            _ => Ok(None),
        }
    }

    /// The run's trial conditions (`quiet`, `cpus`, `repeat_noisy`); none for runs made
    /// before they existed.
    pub fn conditions(&self) -> Result<experiment::conditions::TrialConditions> {
        match self.meta("conditions")? {
            Some(text) => serde_json::from_str(&text).context("the stored trial conditions"),
            None => Ok(Default::default()),
        }
    }

    /// How the run measures its blocks (`design`); blocks for runs made before it existed.
    pub fn design(&self) -> Result<experiment::design::Design> {
        match self.meta("design")? {
            Some(text) => serde_json::from_str(&text).context("the stored design"),
            None => Ok(Default::default()),
        }
    }

    /// Stores an attempt of a trial that was measured in noise and will be run again.
    pub fn insert_noisy_attempt(
        &mut self,
        session_id: i64,
        attempt: u32,
        r: &TrialResult,
    ) -> Result<()> {
        self.conn.execute_batch(NOISY_ATTEMPTS)?;
        self.conn
            .execute(
                "INSERT INTO noisy_attempts (trial_id, attempt, session_id, result) VALUES (?1, ?2, ?3, ?4)",
                params![r.trial_id as i64, attempt, session_id, serde_json::to_string(r)?],
            )
            .map_err(|e| self.explain(e))?;
        Ok(())
    }

    /// The stored noisy attempts of every trial, in trial and attempt order (none when the
    /// table does not exist: an older run, or one that never repeated a trial).
    pub fn noisy_attempts(&self) -> Result<Vec<TrialResult>> {
        let exists: i64 = self.conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'noisy_attempts'",
            [],
            |r| r.get(0),
        )?;
        if exists == 0 {
            return Ok(Vec::new());
        }
        let mut stmt = self
            .conn
            .prepare("SELECT result FROM noisy_attempts ORDER BY trial_id, attempt")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        let mut attempts = Vec::new();
        for row in rows {
            attempts.push(serde_json::from_str(&row?).context("a stored noisy attempt")?);
        }
        Ok(attempts)
    }

    /// How an adaptive run ended, once it has.
    pub fn precision_end(&self) -> Result<Option<experiment::precision::PrecisionEnd>> {
        match self.meta("precision_end")? {
            Some(text) => Ok(Some(
                serde_json::from_str(&text).context("the stored precision_end")?,
            )),
            None => Ok(None),
        }
    }

    pub fn record_precision_end(&self, end: &experiment::precision::PrecisionEnd) -> Result<()> {
        self.conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('precision_end', ?1)",
            params![serde_json::to_string(end)?],
        )?;
        Ok(())
    }

    /// The valid trials' values of `metric`, for the precision rule.
    pub fn observations(
        &self,
        metric: experiment::precision::PrecisionMetric,
    ) -> Result<Vec<experiment::precision::Observation>> {
        let sql = format!(
            "SELECT config_id, block, {} FROM trials WHERE status = 'valid' AND {} IS NOT NULL",
            metric.column(),
            metric.column()
        );
        let mut stmt = self.conn.prepare(&sql)?;
        let rows = stmt.query_map([], |r| {
            Ok(experiment::precision::Observation {
                config_id: r.get::<_, i64>(0)? as usize,
                block: r.get(1)?,
                value: r.get::<_, f64>(2)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The measuring time spent so far: the stored trials' own wall time, summed; the trials
    /// of an interleaved block ran at the same time, so a block counts once (its longest).
    pub fn trials_wall_time(&self) -> Result<std::time::Duration> {
        let query = match self.design()? {
            experiment::design::Design::Blocks => "SELECT sum(wall_s) FROM trials",
            experiment::design::Design::Interleaved { .. }
            | experiment::design::Design::CoScheduled { .. } => {
                "SELECT sum(w) FROM (SELECT max(wall_s) AS w FROM trials GROUP BY block)"
            }
        };
        let s: Option<f64> = self.conn.query_row(query, [], |r| r.get(0))?;
        Ok(std::time::Duration::from_secs_f64(
            s.unwrap_or(0.0).max(0.0),
        ))
    }

    /// Adds one block to the schedule (an adaptive run that is not precise enough yet), in
    /// one transaction; the trials are those `schedule::schedule` gives for that block.
    pub fn append_block(&mut self, trials: &[ScheduledTrial]) -> Result<()> {
        let tx = self.conn.transaction()?;
        insert_schedule(&tx, trials)?;
        tx.commit()?;
        Ok(())
    }

    /// Trials already stored (whatever their status).
    pub fn completed(&self) -> Result<HashSet<usize>> {
        let mut stmt = self.conn.prepare("SELECT trial_id FROM trials")?;
        let rows = stmt.query_map([], |r| r.get::<_, i64>(0))?;
        Ok(rows
            .map(|r| r.map(|id| id as usize))
            .collect::<Result<_, _>>()?)
    }

    /// Records the start of a `rubyrace run` invocation; returns its id.
    pub fn begin_session(&self, kind: &str, command: &str) -> Result<i64> {
        self.conn.execute(
            "INSERT INTO sessions (kind, command, started_at) VALUES (?1, ?2, ?3)",
            params![kind, command, now()],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    pub fn end_session(&self, session_id: i64, outcome: &str) -> Result<()> {
        self.conn.execute(
            "UPDATE sessions SET finished_at = ?1, outcome = ?2 WHERE session_id = ?3",
            params![now(), outcome, session_id],
        )?;
        Ok(())
    }

    /// Records what `rubyrace doctor` found on the machine when a session started.
    pub fn record_doctor(&self, session_id: i64, report: &doctor::Report) -> Result<()> {
        self.conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
            params![
                format!("{DOCTOR_PREFIX}{session_id}"),
                serde_json::to_string(report)?
            ],
        )?;
        Ok(())
    }

    /// The doctor's reports of every session, in session order.
    pub fn doctor_reports(&self) -> Result<Vec<doctor::Report>> {
        let mut stmt = self
            .conn
            .prepare("SELECT key, value FROM meta WHERE key LIKE 'doctor.session.%'")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
        let mut reports = Vec::new();
        for row in rows {
            let (key, value) = row?;
            let session: i64 = key[DOCTOR_PREFIX.len()..].parse().unwrap_or(0);
            if let Ok(report) = serde_json::from_str(&value) {
                reports.push((session, report));
            }
        }
        reports.sort_by_key(|(s, _)| *s);
        Ok(reports.into_iter().map(|(_, r)| r).collect())
    }

    /// The command lines of every `rubyrace run` session, in order.
    pub fn session_commands(&self) -> Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare("SELECT command FROM sessions ORDER BY session_id")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Stores one trial in one transaction.
    pub fn insert_trial(&mut self, session_id: i64, r: &TrialResult) -> Result<()> {
        self.insert_trials(session_id, std::slice::from_ref(r))
    }

    /// Stores several trials in one transaction, all or none: the trials of an interleaved
    /// block, which were measured together and are redone together.
    pub fn insert_trials(&mut self, session_id: i64, results: &[TrialResult]) -> Result<()> {
        let stored = (|| -> Result<()> {
            let tx = self.conn.transaction()?;
            for r in results {
                insert_trial_row(&tx, session_id, r)?;
            }
            tx.commit()?;
            Ok(())
        })();
        stored.map_err(|e| match e.downcast::<rusqlite::Error>() {
            Ok(sql) => self.explain(sql),
            Err(other) => other,
        })
    }
}

/// One trial's row, within the caller's transaction.
fn insert_trial_row(tx: &rusqlite::Transaction, session_id: i64, r: &TrialResult) -> Result<()> {
    let json = serde_json::to_string(r)?;
    let latency = r.load.as_ref().map(|l| &l.latency_us);
    let res = r.resources.as_ref();
    let int = |v: Option<u64>| v.map(|v| v as i64);
    tx.execute(
        "INSERT INTO trials (trial_id, config_id, block, position, label, session_id, status,
                reason, started_at, finished_at, wall_s, requests_per_s, requests, error_rate,
                latency_p50_us, latency_p99_us, rss_end_bytes, pss_end_bytes, uss_end_bytes,
                rss_peak_bytes, pss_peak_bytes, cpu_user_us, cpu_system_us, cpu_us_per_request,
                ctx_voluntary, ctx_involuntary, threads_peak, processes_peak, script_wall_s,
                script_user_s, script_system_s, ruby_description, result)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
                ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31, ?32, ?33)",
        params![
            r.trial_id as i64,
            r.config_id as i64,
            r.block,
            r.position as i64,
            r.label,
            session_id,
            r.status.as_str(),
            r.reason,
            r.started_at,
            r.finished_at,
            r.wall_s,
            r.derived.requests_per_s,
            r.load.as_ref().map(|l| l.requests as i64),
            r.derived.error_rate,
            latency.map(|l| l.p50),
            latency.map(|l| l.p99),
            int(res.map(|x| x.end.rss_bytes)),
            int(res.map(|x| x.end.pss_bytes)),
            int(res.map(|x| x.end.uss_bytes)),
            int(res.map(|x| x.peak_rss_bytes)),
            int(res.map(|x| x.peak_pss_bytes)),
            int(res.map(|x| x.cpu_user_us)),
            int(res.map(|x| x.cpu_system_us)),
            r.derived.cpu_us_per_request,
            int(res.map(|x| x.ctx_voluntary)),
            int(res.map(|x| x.ctx_involuntary)),
            res.map(|x| x.peak_threads),
            res.map(|x| x.peak_processes),
            r.script.as_ref().and_then(|s| s.median_wall_s),
            r.script.as_ref().and_then(|s| s.median_user_s),
            r.script.as_ref().and_then(|s| s.median_system_s),
            r.environment.ruby_description,
            json,
        ],
    )?;
    Ok(())
}

impl Store {
    /// The whole results directory as one JSON document (schema `rubyrace.export/1`, what
    /// `rubyrace export --json` writes): the run's meta, its configurations and schedule,
    /// every stored trial's JSON as it was stored, and the noisy attempts set aside.
    pub fn export(&self) -> Result<serde_json::Value> {
        const META_KEYS: [&str; 15] = [
            "schema_version",
            "rubyrace_version",
            "created_at",
            "experiment_name",
            "experiment_description",
            "experiment_file",
            "experiment_text",
            "seed",
            "batches",
            "order",
            "record_env",
            "smoke",
            "precision",
            "precision_end",
            "conditions",
        ];
        let mut meta = serde_json::Map::new();
        for k in META_KEYS {
            if let Some(v) = self.meta(k)? {
                meta.insert(k.to_string(), serde_json::Value::String(v));
            }
        }
        Ok(serde_json::json!({
            "schema": "rubyrace.export/1",
            "meta": meta,
            "configs": self.configs()?,
            "schedule": self.schedule()?,
            "trials": self.trial_results_json()?,
            "noisy_attempts": self.noisy_attempts()?,
        }))
    }

    /// Every stored trial, in schedule order. A row that does not read as a trial result
    /// is an error naming the trial and the field.
    pub fn trial_results(&self) -> Result<Vec<TrialResult>> {
        self.stored_trials(|id, text| {
            serde_json::from_str(text)
                .with_context(|| format!("stored trial {id} does not read as a trial result"))
        })
    }

    /// Every stored trial's JSON as it was stored (for `rubyrace export`, which hands it on
    /// unchanged), in schedule order.
    pub fn trial_results_json(&self) -> Result<Vec<serde_json::Value>> {
        self.stored_trials(|id, text| {
            serde_json::from_str(text)
                .with_context(|| format!("stored trial {id} is not valid JSON"))
        })
    }

    /// Every stored trial's `result` column read by `read` (given the trial id), in
    /// schedule order.
    fn stored_trials<T>(&self, read: impl Fn(i64, &str) -> Result<T>) -> Result<Vec<T>> {
        let mut stmt = self
            .conn
            .prepare("SELECT trial_id, result FROM trials ORDER BY trial_id")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?;
        let mut out = Vec::new();
        for row in rows {
            let (id, text) = row?;
            out.push(read(id, &text)?);
        }
        Ok(out)
    }

    /// Per-configuration counts and medians for the end-of-run summary:
    /// (label, valid, invalid, failed, requests/s values, PSS-at-end values, script wall values).
    pub fn summary_rows(&self) -> Result<Vec<SummaryRow>> {
        let configs = self.configs()?;
        let mut rows = Vec::new();
        for c in configs {
            let mut stmt = self.conn.prepare(
                "SELECT status, requests_per_s, rss_end_bytes, pss_end_bytes, script_wall_s
                 FROM trials WHERE config_id = ?1 ORDER BY trial_id",
            )?;
            let mut row = SummaryRow {
                label: c.label.clone(),
                ..SummaryRow::default()
            };
            let trials = stmt.query_map(params![c.id as i64], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, Option<f64>>(1)?,
                    r.get::<_, Option<i64>>(2)?,
                    r.get::<_, Option<i64>>(3)?,
                    r.get::<_, Option<f64>>(4)?,
                ))
            })?;
            for t in trials {
                let (status, rps, rss, pss, wall) = t?;
                match status.as_str() {
                    "valid" => {
                        row.valid += 1;
                        row.requests_per_s.extend(rps);
                        row.rss_end_bytes.extend(rss.map(|v| v as f64));
                        row.pss_end_bytes.extend(pss.map(|v| v as f64));
                        row.script_wall_s.extend(wall);
                    }
                    "invalid" => row.invalid += 1,
                    _ => row.failed += 1,
                }
            }
            rows.push(row);
        }
        Ok(rows)
    }
}

/// The end-of-run summary `rubyrace run` prints: per configuration, its trials by status and
/// the medians over its valid trials (throughput or a script's wall time, RSS and PSS at
/// the end), as an aligned table (comfy-table: labels of any width line up).
pub fn summary_table(rows: &[SummaryRow]) -> String {
    use comfy_table::{presets, CellAlignment, Table};
    let mut table = Table::new();
    table.load_preset(presets::NOTHING).set_header([
        "configuration",
        "valid",
        "invalid",
        "failed",
        "median",
        "median RSS",
        "median PSS",
    ]);
    for r in rows {
        let median = |v: &[f64]| stats::median(v);
        let main = median(&r.requests_per_s)
            .map(|v| format!("{v:.1} req/s"))
            .or_else(|| median(&r.script_wall_s).map(|w| format!("{w:.3} s wall")))
            .unwrap_or_else(|| "-".into());
        let mem = |v: &[f64]| {
            median(v)
                .map(|b| load::report::bytes(b as u64))
                .unwrap_or_else(|| "-".into())
        };
        table.add_row([
            r.label.clone(),
            r.valid.to_string(),
            r.invalid.to_string(),
            r.failed.to_string(),
            main,
            mem(&r.rss_end_bytes),
            mem(&r.pss_end_bytes),
        ]);
    }
    for column in 0..7 {
        if let Some(c) = table.column_mut(column) {
            // Two spaces between columns, none before the first.
            c.set_padding((0, if column == 6 { 0 } else { 2 }));
            if column > 0 {
                c.set_cell_alignment(CellAlignment::Right);
            }
        }
    }
    let mut text = table.trim_fmt();
    text.push_str(
        "\n(medians over valid trials; memory is the server's whole process tree at the end of the measurement; scripts show wall time)\n",
    );
    text
}

/// What the end-of-run summary shows for one configuration (valid trials only).
#[derive(Clone, Debug, Default)]
pub struct SummaryRow {
    pub label: String,
    pub valid: usize,
    pub invalid: usize,
    pub failed: usize,
    pub requests_per_s: Vec<f64>,
    pub rss_end_bytes: Vec<f64>,
    pub pss_end_bytes: Vec<f64>,
    pub script_wall_s: Vec<f64>,
}
