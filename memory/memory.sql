-- agenticdb Memory Book (one SQLite file, WAL mode). Loaded by agenticdb/memory.py.
-- JSON columns hold the pydantic models of agenticdb/models.py (model_dump(mode="json")).

CREATE TABLE IF NOT EXISTS sessions (
    id                  TEXT PRIMARY KEY,
    target              TEXT NOT NULL,
    dbms                TEXT NOT NULL,
    version             TEXT NOT NULL,
    workload            TEXT NOT NULL,
    fingerprint         TEXT NOT NULL,      -- Fingerprint JSON
    started_at          TEXT NOT NULL,      -- UTC ISO 8601
    ended_at            TEXT,
    status              TEXT NOT NULL,      -- running | completed | failed | aborted | ...
    baseline_objective  REAL,
    best_objective      REAL,
    best_config         TEXT                -- JSON {name: value}
);

CREATE TABLE IF NOT EXISTS rounds (
    session_id  TEXT    NOT NULL REFERENCES sessions (id),
    round_no    INTEGER NOT NULL,
    stage       TEXT    NOT NULL,
    bottleneck  TEXT    NOT NULL,
    decision    TEXT    NOT NULL,
    objective   REAL,
    kept        INTEGER NOT NULL,
    outcome     TEXT    NOT NULL,           -- RoundOutcome JSON
    PRIMARY KEY (session_id, round_no)
);
CREATE INDEX IF NOT EXISTS rounds_bottleneck ON rounds (bottleneck);
CREATE INDEX IF NOT EXISTS rounds_decision ON rounds (decision);
CREATE INDEX IF NOT EXISTS rounds_stage ON rounds (stage);

-- Fingerprint fields are copied into columns so forget/filters run in SQL.
CREATE TABLE IF NOT EXISTS experience (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id      TEXT NOT NULL,
    dbms            TEXT NOT NULL,
    version_major   TEXT NOT NULL,
    benchmark       TEXT NOT NULL,
    workload_class  TEXT NOT NULL,
    read_fraction   REAL NOT NULL,
    access_pattern  TEXT NOT NULL,
    scale           REAL NOT NULL,
    concurrency     INTEGER NOT NULL,
    objective       TEXT NOT NULL,
    memory_gib      REAL NOT NULL,
    cpu_count       INTEGER NOT NULL,
    fingerprint     TEXT NOT NULL,          -- Fingerprint JSON
    experience      TEXT NOT NULL,          -- Experience JSON
    created_at      TEXT NOT NULL,
    host            TEXT NOT NULL DEFAULT '',   -- origin host label (issue 19); '' = this host, older rows
    synced_at       TEXT                        -- when pushed to the central Memory Book; NULL = pending
);
CREATE INDEX IF NOT EXISTS experience_dbms ON experience (dbms, version_major, workload_class);
CREATE INDEX IF NOT EXISTS experience_session ON experience (session_id);

CREATE TABLE IF NOT EXISTS llm_calls (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id          TEXT    NOT NULL,
    round_no            INTEGER,
    model               TEXT    NOT NULL,
    prompt_tokens       INTEGER NOT NULL,
    completion_tokens   INTEGER NOT NULL,
    cached_tokens       INTEGER NOT NULL,
    latency_ms          REAL    NOT NULL,
    cost_usd            REAL    NOT NULL,
    ok                  INTEGER NOT NULL,
    error               TEXT,
    ts                  TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS llm_calls_session ON llm_calls (session_id, round_no);

-- OS values as they were before agenticdb's first write in a session (first write wins).
CREATE TABLE IF NOT EXISTS os_originals (
    session_id  TEXT NOT NULL,
    name        TEXT NOT NULL,              -- sysctl name or /sys/block path
    original    TEXT NOT NULL,
    saved_at    TEXT NOT NULL,
    restored_at TEXT,
    PRIMARY KEY (session_id, name)
);
CREATE INDEX IF NOT EXISTS os_originals_unrestored ON os_originals (restored_at);
