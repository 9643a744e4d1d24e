-- agenticdb audit journal (one SQLite file, WAL mode). Loaded by agenticdb/journal.py.
--
-- Every row is chained to the previous one: hash = sha256(prev_hash || canonical row fields), see
-- agenticdb.journal.row_hash. The triggers make the table append-only for every client that goes
-- through SQLite; someone with write access to the file can still drop them, which is what
-- `agenticdb journal verify` detects by recomputing the chain.
CREATE TABLE IF NOT EXISTS journal (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,  -- AUTOINCREMENT: ids are never reused, gaps show deletions
    ts          TEXT    NOT NULL,                   -- UTC ISO 8601 with microseconds
    session_id  TEXT    NOT NULL,
    round_no    INTEGER,                            -- NULL for session-level events
    event       TEXT    NOT NULL,                   -- e.g. session.start, intent, decision
    data        TEXT    NOT NULL,                   -- canonical JSON (sorted keys, no spaces)
    prev_hash   TEXT    NOT NULL,                   -- hash of the row before, 64 zeros for the first
    hash        TEXT    NOT NULL UNIQUE
);

CREATE INDEX IF NOT EXISTS journal_session ON journal (session_id, round_no, id);
CREATE INDEX IF NOT EXISTS journal_event ON journal (event, id);

CREATE TRIGGER IF NOT EXISTS journal_no_update BEFORE UPDATE ON journal
BEGIN
    SELECT RAISE(ABORT, 'journal is append-only: UPDATE is forbidden');
END;

CREATE TRIGGER IF NOT EXISTS journal_no_delete BEFORE DELETE ON journal
BEGIN
    SELECT RAISE(ABORT, 'journal is append-only: DELETE is forbidden');
END;
