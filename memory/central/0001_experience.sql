-- agenticdb central Memory Book, migration 1 (issue 19): experience and rounds shared by a fleet.
-- Applied by agenticdb/memory/central.py inside one transaction under an advisory lock; recorded in
-- agenticdb.schema_version. JSON columns hold the pydantic models of agenticdb/models.py.

CREATE TABLE IF NOT EXISTS agenticdb.experience (
    id              BIGSERIAL PRIMARY KEY,
    host            TEXT NOT NULL,
    session_id      TEXT NOT NULL,
    dbms            TEXT NOT NULL,
    version_major   TEXT NOT NULL,
    benchmark       TEXT NOT NULL,
    workload_class  TEXT NOT NULL,
    family          TEXT NOT NULL,          -- postgresql | mysql (experience.dbms_family)
    fingerprint     JSONB NOT NULL,         -- Fingerprint
    origin          JSONB,                  -- HostOrigin
    experience      JSONB NOT NULL,         -- Experience
    created_at      TIMESTAMPTZ NOT NULL,
    uploaded_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (host, session_id)
);
CREATE INDEX IF NOT EXISTS experience_family ON agenticdb.experience (family, workload_class);

CREATE TABLE IF NOT EXISTS agenticdb.rounds (
    host        TEXT    NOT NULL,
    session_id  TEXT    NOT NULL,
    round_no    INTEGER NOT NULL,
    decision    TEXT    NOT NULL,
    kept        BOOLEAN NOT NULL,
    outcome     JSONB   NOT NULL,           -- RoundOutcome
    PRIMARY KEY (host, session_id, round_no)
);
