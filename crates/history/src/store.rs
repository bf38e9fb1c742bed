//! The history file: one SQLite database a team keeps (`perf/history.db`, say), written in
//! transactions (a killed process or a full disk leaves it as it was before the add), in
//! WAL mode with a busy timeout (a `show` beside a nightly `add` waits, never fails). Its
//! schema is docs/history.md's, "The history file"; `schema_version` in `meta` says which.

use std::path::Path;

use anyhow::{Context, Result};
use rusqlite::{params, Connection, OptionalExtension};

use crate::import::{ImportedRun, PointKind};
use crate::series::{Series, SeriesPoint};

/// The schema this code writes and reads.
pub const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
  id INTEGER PRIMARY KEY,
  key TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL,
  experiment TEXT NOT NULL,
  experiment_file TEXT NOT NULL,
  dir TEXT NOT NULL,
  created_at TEXT NOT NULL,
  added_at TEXT NOT NULL,
  commit_hash TEXT,
  commit_subject TEXT,
  commit_date TEXT,
  commit_order INTEGER,
  commit_dirty INTEGER,
  repo TEXT,
  host_kind TEXT NOT NULL,
  design TEXT NOT NULL,
  rubyrace_version TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS points (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  series TEXT NOT NULL,
  label TEXT NOT NULL,
  metric TEXT NOT NULL,
  kind TEXT NOT NULL,
  value REAL NOT NULL,
  lo REAL NOT NULL,
  hi REAL NOT NULL,
  confidence REAL NOT NULL,
  blocks INTEGER NOT NULL,
  higher_is_better INTEGER NOT NULL,
  PRIMARY KEY (run_id, series)
);
CREATE INDEX IF NOT EXISTS points_by_series ON points(series);
CREATE TABLE IF NOT EXISTS reported (
  series TEXT NOT NULL,
  after_commit TEXT NOT NULL,
  reported_at TEXT NOT NULL,
  PRIMARY KEY (series, after_commit)
);
";

/// The columns a series' point is read from, in the order `series_where` reads them.
const POINT_COLUMNS: &str = "p.series, p.label, p.metric, p.kind, p.higher_is_better,
    r.experiment, r.host_kind, r.id, r.commit_hash, r.commit_subject, r.commit_date,
    r.commit_order, r.created_at, r.dir, r.repo, r.experiment_file,
    p.value, p.lo, p.hi, p.confidence, p.blocks";

/// Every point, by series, in commit order (`History::series`).
const POINTS_IN_ORDER: &str = "FROM points p JOIN runs r ON r.id = p.run_id
    ORDER BY p.series, r.commit_order IS NULL, r.commit_order,
             coalesce(r.commit_date, r.created_at), r.created_at, r.id";

/// Why a history could not be prepared, in the user's words: a file that is not an SQLite
/// database (or is damaged) is not a history; anything else (a full disk, an I/O error, a
/// file that cannot be written) is said as SQLite says it, not blamed on the file.
fn opening_error(path: &Path, e: rusqlite::Error) -> anyhow::Error {
    use rusqlite::ErrorCode::{DatabaseCorrupt, NotADatabase};
    let what = match e.sqlite_error_code() {
        Some(NotADatabase) | Some(DatabaseCorrupt) => "is not a rubyrace history",
        _ => "cannot be opened as a history",
    };
    anyhow::Error::new(e).context(format!("{} {what}", path.display()))
}

/// An open history file.
pub struct History {
    conn: Connection,
}

/// What adding a run did.
#[derive(Debug, PartialEq, Eq)]
pub enum Added {
    /// A run the history did not have.
    New { points: usize },
    /// A run it had (the same results directory, or a copy of it): its points replaced by
    /// what the directory holds now (a run resumed since holds more).
    Updated { points: usize },
}

impl History {
    /// Opens the history at `path`, creating it (and its directory) when it does not exist.
    /// A file of a newer schema is refused.
    pub fn open(path: &Path) -> Result<History> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let conn = Connection::open(path)
            .with_context(|| format!("cannot open the history {}", path.display()))?;
        let prepared = (|| -> rusqlite::Result<()> {
            conn.busy_timeout(std::time::Duration::from_secs(30))?;
            conn.pragma_update(None, "journal_mode", "WAL")?;
            conn.pragma_update(None, "synchronous", "FULL")?;
            conn.pragma_update(None, "foreign_keys", "ON")?;
            conn.execute_batch(SCHEMA)
        })();
        prepared.map_err(|e| opening_error(path, e))?;
        let version: Option<String> = conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .optional()?;
        match version.map(|v| v.parse::<i64>()) {
            None => {
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema_version', ?1)",
                    [SCHEMA_VERSION.to_string()],
                )?;
            }
            Some(Ok(v)) if v == SCHEMA_VERSION => {}
            Some(v) => anyhow::bail!(
                "{} is a history of schema {v:?}; this rubyrace reads schema {SCHEMA_VERSION}",
                path.display()
            ),
        }
        Ok(History { conn })
    }

    /// Adds `run` in one transaction: a run already there (by its key) has its record and
    /// points replaced.
    pub fn add(&mut self, run: &ImportedRun) -> Result<Added> {
        let tx = self.conn.transaction()?;
        let existing: Option<i64> = tx
            .query_row("SELECT id FROM runs WHERE key = ?1", [&run.key], |r| {
                r.get(0)
            })
            .optional()?;
        if let Some(id) = existing {
            tx.execute("DELETE FROM points WHERE run_id = ?1", [id])?;
            tx.execute("DELETE FROM runs WHERE id = ?1", [id])?;
        }
        let commit = run.commit.as_ref();
        tx.execute(
            "INSERT INTO runs (key, kind, experiment, experiment_file, dir, created_at, added_at,
               commit_hash, commit_subject, commit_date, commit_order, commit_dirty, repo,
               host_kind, design, rubyrace_version)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
            params![
                run.key,
                run.kind,
                run.experiment,
                run.experiment_file,
                run.dir,
                run.created_at,
                now(),
                commit.map(|c| &c.hash),
                commit.map(|c| &c.subject),
                commit.map(|c| &c.author_date),
                commit.and_then(|c| c.order),
                commit.map(|c| c.dirty),
                commit.and_then(|c| c.repo.as_ref()),
                run.host_kind,
                run.design,
                run.rubyrace_version,
            ],
        )?;
        let id = tx.last_insert_rowid();
        for p in &run.points {
            tx.execute(
                "INSERT OR REPLACE INTO points (run_id, series, label, metric, kind, value, lo, hi,
                   confidence, blocks, higher_is_better)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                params![
                    id,
                    p.series_key(run),
                    p.label,
                    p.metric,
                    p.kind.as_str(),
                    p.value,
                    p.lo,
                    p.hi,
                    p.confidence,
                    p.blocks as i64,
                    p.higher_is_better,
                ],
            )?;
        }
        tx.commit()?;
        let points = run.points.len();
        Ok(if existing.is_some() {
            Added::Updated { points }
        } else {
            Added::New { points }
        })
    }

    /// How many runs the history holds.
    pub fn runs(&self) -> Result<usize> {
        Ok(self
            .conn
            .query_row("SELECT count(*) FROM runs", [], |r| r.get::<_, i64>(0))?
            as usize)
    }

    /// Every series, each with its points in commit order: first-parent order where the
    /// commit's repository was at hand when the run was added, else the commit's date, else
    /// the run's; runs of the same commit in the order they ran.
    pub fn series(&self) -> Result<Vec<Series>> {
        self.series_where(&format!("SELECT {POINT_COLUMNS} {POINTS_IN_ORDER}"), None)
    }

    /// Every series with only its `last` newest points, in the same order (what `history
    /// check` needs: a history of a million points is not read whole).
    pub fn series_recent(&self, last: usize) -> Result<Vec<Series>> {
        let sql = format!(
            "SELECT * FROM (SELECT {POINT_COLUMNS}, row_number() OVER (PARTITION BY p.series
                 ORDER BY r.commit_order IS NULL DESC, r.commit_order DESC,
                          coalesce(r.commit_date, r.created_at) DESC, r.created_at DESC,
                          r.id DESC) AS newest
                 FROM points p JOIN runs r ON r.id = p.run_id)
             WHERE newest <= ?1
             ORDER BY series, newest DESC"
        );
        self.series_where(&sql, Some(last as i64))
    }

    /// The series of `sql`'s rows (`POINT_COLUMNS`, by series, in commit order).
    fn series_where(&self, sql: &str, last: Option<i64>) -> Result<Vec<Series>> {
        let mut stmt = self.conn.prepare(sql)?;
        let mut rows = match last {
            Some(last) => stmt.query([last])?,
            None => stmt.query([])?,
        };
        let mut all: Vec<Series> = Vec::new();
        while let Some(row) = rows.next()? {
            let key: String = row.get(0)?;
            let kind: String = row.get(3)?;
            let point = SeriesPoint {
                run_id: row.get(7)?,
                commit: row.get(8)?,
                subject: row.get::<_, Option<String>>(9)?.unwrap_or_default(),
                commit_date: row.get(10)?,
                commit_order: row.get(11)?,
                created_at: row.get(12)?,
                dir: row.get(13)?,
                repo: row.get(14)?,
                experiment_file: row.get(15)?,
                value: row.get(16)?,
                lo: row.get(17)?,
                hi: row.get(18)?,
                confidence: row.get(19)?,
                blocks: row.get::<_, i64>(20)? as usize,
            };
            if all.last().is_none_or(|s| s.key != key) {
                all.push(Series {
                    kind: PointKind::parse(&kind),
                    label: row.get(1)?,
                    metric: row.get(2)?,
                    higher_is_better: row.get(4)?,
                    experiment: row.get(5)?,
                    host_kind: (PointKind::parse(&kind) == PointKind::Absolute)
                        .then(|| row.get(6))
                        .transpose()?,
                    key,
                    points: Vec::new(),
                });
            }
            if let Some(series) = all.last_mut() {
                series.points.push(point);
            }
        }
        Ok(all)
    }

    /// Whether the change of `series` whose first commit after is `after_commit` was
    /// reported already.
    pub fn reported(&self, series: &str, after_commit: &str) -> Result<bool> {
        Ok(self
            .conn
            .query_row(
                "SELECT 1 FROM reported WHERE series = ?1 AND after_commit = ?2",
                [series, after_commit],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }

    /// Records that the change was reported, so `history check` does not report it again.
    pub fn mark_reported(&mut self, series: &str, after_commit: &str) -> Result<()> {
        self.conn.execute(
            "INSERT OR IGNORE INTO reported (series, after_commit, reported_at) VALUES (?1, ?2, ?3)",
            params![series, after_commit, now()],
        )?;
        Ok(())
    }
}

/// Now, as RFC 3339 to the second (UTC).
fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::{CommitInfo, PointRecord};

    /// A run at commit number `order` of an experiment, one ratio point of `value`.
    fn run(order: i64, value: f64, created_at: &str) -> ImportedRun {
        ImportedRun {
            key: format!("run:nightly:{created_at}"),
            kind: "run".into(),
            experiment: "nightly".into(),
            experiment_file: "/perf/nightly.toml".into(),
            dir: format!("/results/{created_at}"),
            created_at: created_at.into(),
            commit: Some(CommitInfo {
                hash: format!("{order:040x}"),
                subject: format!("commit {order}"),
                author_date: created_at.into(),
                order: Some(order),
                dirty: false,
                repo: Some("/src/app".into()),
            }),
            host_kind: "cpu × 2".into(),
            design: "blocks".into(),
            rubyrace_version: "0.1.0".into(),
            points: vec![PointRecord {
                label: "yjit/interp".into(),
                metric: "throughput".into(),
                kind: PointKind::Ratio,
                value,
                lo: value * 0.99,
                hi: value * 1.01,
                confidence: 0.95,
                blocks: 7,
                higher_is_better: true,
            }],
        }
    }

    #[test]
    fn a_run_added_twice_is_one_run_and_points_come_in_commit_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("perf/history.db");
        let mut h = History::open(&path).unwrap();
        // Added out of order: commit 3 first, then 1 and 2.
        assert_eq!(
            h.add(&run(3, 1.30, "2026-11-03T00:00:00Z")).unwrap(),
            Added::New { points: 1 }
        );
        h.add(&run(1, 1.10, "2026-11-01T00:00:00Z")).unwrap();
        h.add(&run(2, 1.20, "2026-11-02T00:00:00Z")).unwrap();
        assert_eq!(
            h.add(&run(2, 1.25, "2026-11-02T00:00:00Z")).unwrap(),
            Added::Updated { points: 1 }
        );
        assert_eq!(h.runs().unwrap(), 3);
        drop(h);
        // Reopened: the same.
        let h = History::open(&path).unwrap();
        let series = h.series().unwrap();
        assert_eq!(series.len(), 1);
        assert_eq!(series[0].key, "nightly · yjit/interp · throughput");
        let values: Vec<f64> = series[0].points.iter().map(|p| p.value).collect();
        assert_eq!(values, vec![1.10, 1.25, 1.30]);
        assert_eq!(series[0].host_kind, None);
    }

    #[test]
    fn the_recent_points_are_the_newest_in_commit_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut h = History::open(&dir.path().join("h.db")).unwrap();
        // Added out of commit order; commits 7 and 8 without a first-parent position come
        // after every positioned one, by date.
        for (order, value) in [(5, 1.5), (1, 1.1), (3, 1.3), (2, 1.2), (4, 1.4)] {
            h.add(&run(order, value, &format!("2026-11-0{order}T00:00:00Z")))
                .unwrap();
        }
        for (i, value) in [(7, 1.7), (8, 1.8)] {
            let mut r = run(i, value, &format!("2026-11-0{i}T00:00:00Z"));
            r.commit.as_mut().unwrap().order = None;
            h.add(&r).unwrap();
        }
        let values = |s: &[Series]| s[0].points.iter().map(|p| p.value).collect::<Vec<f64>>();
        let all = h.series().unwrap();
        assert_eq!(values(&all), vec![1.1, 1.2, 1.3, 1.4, 1.5, 1.7, 1.8]);
        assert_eq!(values(&h.series_recent(3).unwrap()), vec![1.5, 1.7, 1.8]);
        assert_eq!(h.series_recent(100).unwrap(), all);
    }

    #[test]
    fn a_reported_change_is_remembered() {
        let dir = tempfile::tempdir().unwrap();
        let mut h = History::open(&dir.path().join("h.db")).unwrap();
        assert!(!h.reported("s", "abc").unwrap());
        h.mark_reported("s", "abc").unwrap();
        h.mark_reported("s", "abc").unwrap();
        assert!(h.reported("s", "abc").unwrap());
        assert!(!h.reported("s", "abd").unwrap());
    }

    #[test]
    fn a_file_that_is_not_a_history_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.db");
        std::fs::write(&path, "not a database at all, just some text ".repeat(100)).unwrap();
        let e = History::open(&path).err().unwrap().to_string();
        assert!(e.contains("notes.db is not a rubyrace history"), "{e}");
    }

    /// An I/O error (SQLite's when a full disk stops it growing the WAL's shared memory, as
    /// cli's history test makes it with a file size limit) is not called "not a history":
    /// the error says what SQLite said.
    #[test]
    fn an_io_error_is_not_called_not_a_history() {
        let path = Path::new("perf/h.db");
        let e = opening_error(
            path,
            rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_IOERR_SHMMAP),
                Some("disk I/O error".into()),
            ),
        );
        let said = format!("{e:#}");
        assert!(
            said.contains("h.db cannot be opened as a history: "),
            "{said}"
        );
        assert!(said.contains("disk I/O error"), "{said}");
    }
}
