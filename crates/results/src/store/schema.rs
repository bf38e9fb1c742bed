//! The tables of `results.db` (docs/results.md describes them; `SCHEMA_VERSION` counts
//! their versions).

pub(super) const SCHEMA: &str = "
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
pub(super) const NOISY_ATTEMPTS: &str = "
CREATE TABLE IF NOT EXISTS noisy_attempts (
    trial_id   INTEGER NOT NULL REFERENCES schedule(trial_id),
    attempt    INTEGER NOT NULL,  -- 1, 2, ...: the attempts before the stored trial
    session_id INTEGER REFERENCES sessions(session_id),
    result     TEXT NOT NULL,     -- JSON: the attempt's whole TrialResult
    PRIMARY KEY (trial_id, attempt)
);
";
