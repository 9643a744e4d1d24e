"""Append-only, hash-chained audit journal in SQLite (docs/architecture.md "The journal and the Memory Book"; issue 9).

One row per event of a tuning session. Rows are chained: ``hash = sha256(prev_hash + canonical
fields)`` (see :func:`row_hash`), and triggers in ``memory/journal.sql`` forbid UPDATE and DELETE. The
file is in WAL mode so a daemon can append while ``agenticdb journal tail -f`` reads.

Events and their payloads: :mod:`agenticdb.store.journal_events`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import sqlite3
import statistics
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import structlog
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from agenticdb.models import Snapshot
from agenticdb.redaction import redact_obj
from agenticdb.resources import data_file
from agenticdb.store.faults import guarded
from agenticdb.store.journal_events import Intent, JournalError, JournalEvent, SessionSummary, VerifyResult
from agenticdb.store.journal_key import KEYED_PREFIX, JournalKey, load_key, load_or_create_key
from agenticdb.store.sqlite_create import connect_read_only, create_sqlite_atomically

log = structlog.get_logger(__name__)

GENESIS_HASH = "0" * 64
"""``prev_hash`` of the first row."""

_EVENT_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$")
_BUSY_TIMEOUT_S = 30.0


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no insignificant spaces, so equal payloads hash equally.

    Raises:
        JournalError: the value holds NaN/Infinity or something that has no JSON form.
    """
    try:
        return json.dumps(
            to_jsonable_python(value),
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
            allow_nan=False,
        )
    except (TypeError, ValueError) as exc:
        raise JournalError(f"journal data is not canonical JSON: {exc}") from None


def row_hash(prev_hash: str, row_id: int, ts: str, session_id: str, round_no: int | None, event: str, data: str) -> str:
    """``sha256(prev_hash + canonical JSON of [id, ts, session_id, round_no, event, data])`` as hex.

    ``data`` is the stored canonical JSON text. The row id is part of the hash so a row cannot be moved.
    """
    fields = _fields(row_id, ts, session_id, round_no, event, data)
    return hashlib.sha256((prev_hash + fields).encode("utf-8")).hexdigest()


def _fields(row_id: int, ts: str, session_id: str, round_no: int | None, event: str, data: str) -> str:
    return json.dumps([row_id, ts, session_id, round_no, event, data], separators=(",", ":"))


def _payload(data: dict[str, Any] | BaseModel) -> dict[str, Any]:
    if isinstance(data, BaseModel):
        return data.model_dump(mode="json")
    if not isinstance(data, dict):
        raise JournalError(f"journal data={data!r}: must be a dict or a pydantic model")
    return data


def _stopped(row: sqlite3.Row) -> bool:
    """A ``sessions()`` row whose last ``daemon.stop`` follows its last ``daemon.start`` (agenticdb/daemon.py
    writes the stop in its shutdown's ``finally``): the daemon ended, it is not running or dead."""
    return row["last_stop"] is not None and bool(row["last_stop"] > (row["last_start"] or 0))


def _baseline(objective: float | None, runs_json: str | None) -> float | None:
    """The baseline objective, or the median of the baseline runs ({"objectives": [...]})."""
    if objective is not None or not runs_json:
        return objective
    try:
        runs = [float(v) for v in json.loads(runs_json)]
    except (TypeError, ValueError):
        return None
    return statistics.median(runs) if runs else None


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


class Journal:
    """The audit journal in one SQLite file (created with its parent folder when missing).

    Safe for several processes: WAL mode, a busy timeout, and appends under ``BEGIN IMMEDIATE`` so two
    writers never chain onto the same previous row. One instance may be shared between threads.

    Args:
        path: the SQLite file, usually ``Settings.storage.journal_db``.
        read_only: open with SQLite ``mode=ro`` (no schema creation, no trigger repair, no writes);
            for ``journal verify`` and other inspection.
        key_file: the HMAC key (agenticdb.store.journal_key); a writer creates it (0600) when missing, a
            reader only loads it. None: the journal's sibling ``<name>.key`` when it exists (so every
            writer of a keyed journal keeps keying), else a plain SHA-256 chain.

    A new journal file is created with mode 0600. Every payload is redacted
    (:func:`agenticdb.redaction.redact_obj`) before it is stored.

    Raises:
        agenticdb.store.journal_key.JournalKeyError: the key file is malformed.
    """

    @guarded("journal", "open")
    def __init__(self, path: Path | str, read_only: bool = False, key_file: Path | str | None = None) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        self.read_only = read_only
        sibling = self.path.with_suffix(".key")
        self.key_file = Path(key_file) if key_file is not None else (sibling if sibling.exists() else None)
        self.key: JournalKey | None = None
        if read_only:
            # Inspection (``journal verify``) must not change the evidence: no schema, no trigger repair.
            self._conn = connect_read_only(
                self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
            self._conn.row_factory = sqlite3.Row
            self.key = load_key(self.key_file) if self.key_file is not None else None
            return
        create_sqlite_atomically(self.path, data_file("memory", "journal.sql").read_text())
        self._conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA journal_mode=WAL")
        # FULL: an appended audit row survives a power loss (SQLite "PRAGMA synchronous" docs).
        self._conn.execute("PRAGMA synchronous=FULL")
        self._ensure_schema()
        if self.key_file is not None:
            self.key = load_or_create_key(self.key_file, self.last_id())

    def _ensure_schema(self) -> None:
        names = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type='trigger'")}
        has_table = self._conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='journal'").fetchone()
        if has_table and not {"journal_no_update", "journal_no_delete"} <= names:
            log.warning("journal.triggers_missing", path=str(self.path), reason="recreating; run verify")
        self._conn.executescript(data_file("memory", "journal.sql").read_text())

    def missing_triggers(self) -> list[str]:
        """Names of the append-only triggers (``journal_no_update``, ``journal_no_delete``) that are gone
        (a sign of tampering: they forbid UPDATE and DELETE)."""
        with self._lock:
            names = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type='trigger'")}
        return sorted({"journal_no_update", "journal_no_delete"} - names)

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing -------------------------------------------------------------------------------

    @guarded("journal")
    def append(
        self,
        session_id: str,
        event: str,
        data: dict[str, Any] | BaseModel | None = None,
        round_no: int | None = None,
    ) -> int:
        """Append one event and return its row id.

        Args:
            session_id: the session the event belongs to (non-empty).
            event: a dotted lower-case name, see :data:`agenticdb.store.journal_events.CORE_EVENTS`.
            data: a dict or a pydantic model (stored as canonical JSON).
            round_no: the round (>= 0), or None for session-level events.

        Raises:
            JournalError: empty session id, malformed event name, negative round or non-JSON data.
            StorageError: the file cannot be written (disk full, read-only, permissions).
        """
        if not session_id or not isinstance(session_id, str):
            raise JournalError(f"session_id={session_id!r}: must be a non-empty string")
        if not _EVENT_NAME.match(event):
            raise JournalError(f"event={event!r}: must be a dotted lower-case name such as 'session.start'")
        if round_no is not None and (not isinstance(round_no, int) or round_no < 0):
            raise JournalError(f"round_no={round_no!r}: must be an integer >= 0 or None")
        text = canonical_json(redact_obj(_payload(data if data is not None else {})))
        ts = _utc_now()
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                last = self._conn.execute("SELECT hash FROM journal ORDER BY id DESC LIMIT 1").fetchone()
                prev = last[0] if last else GENESIS_HASH
                seq = self._conn.execute("SELECT seq FROM sqlite_sequence WHERE name='journal'").fetchone()
                row_id = (seq[0] if seq else 0) + 1
                digest = self._hash(prev, row_id, ts, session_id, round_no, event, text)
                self._conn.execute(
                    "INSERT INTO journal (id, ts, session_id, round_no, event, data, prev_hash, hash)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (row_id, ts, session_id, round_no, event, text, prev, digest),
                )
                self._conn.execute("COMMIT")
            except BaseException:
                # SQLite may already have rolled back (SQLITE_FULL, SQLITE_IOERR: sqlite.org/lang_transaction.html
                # "Response To Errors Within A Transaction"); a second ROLLBACK would hide the real error.
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
        return row_id

    def _hash(self, prev: str, row_id: int, ts: str, sid: str, round_no: int | None, event: str, data: str) -> str:
        """The row's hash: keyed (HMAC) when a key is loaded and the row is newer than the key."""
        if self.key is not None and row_id > self.key.unkeyed_until:
            return self.key.row_hash(prev, _fields(row_id, ts, sid, round_no, event, data))
        return row_hash(prev, row_id, ts, sid, round_no, event, data)

    def head(self) -> tuple[int, str]:
        """(id, hash) of the newest row; (0, GENESIS_HASH) for an empty journal."""
        with self._lock:
            row = self._conn.execute("SELECT id, hash FROM journal ORDER BY id DESC LIMIT 1").fetchone()
        return (0, GENESIS_HASH) if row is None else (int(row[0]), str(row[1]))

    def close_intent(self, session_id: str, round_no: int | None, how: str) -> int:
        """Close the open intent(s) of ``session_id``/``round_no`` with an ``intent.closed`` event.

        ``how`` says why it is safe now (e.g. "kept", "reverted", "restored by reconcile").
        Returns the new row id.
        """
        return self.append(session_id, "intent.closed", {"how": how}, round_no=round_no)

    # -- reading -------------------------------------------------------------------------------

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[JournalEvent]:
        with self._lock:
            rows = self._conn.execute(sql, params).fetchall()
        return [self._event(r) for r in rows]

    @staticmethod
    def _event(r: sqlite3.Row) -> JournalEvent:
        try:
            data = json.loads(r["data"])
        except json.JSONDecodeError:
            data = {"_undecodable": r["data"]}
        if not isinstance(data, dict):
            data = {"_value": data}
        return JournalEvent(
            id=r["id"],
            ts=r["ts"],
            session_id=r["session_id"],
            round_no=r["round_no"],
            event=r["event"],
            data=data,
            prev_hash=r["prev_hash"],
            hash=r["hash"],
        )

    def events(self, session_id: str | None = None, after_id: int = 0) -> list[JournalEvent]:
        """Events in append order, of one session or all, with ``id > after_id``."""
        if session_id is None:
            return self._rows("SELECT * FROM journal WHERE id > ? ORDER BY id", (after_id,))
        return self._rows("SELECT * FROM journal WHERE session_id = ? AND id > ? ORDER BY id", (session_id, after_id))

    def tail(self, n: int = 20) -> list[JournalEvent]:
        """The last ``n`` events, oldest first.

        Raises:
            JournalError: ``n`` < 1.
        """
        if n < 1:
            raise JournalError(f"n={n}: must be >= 1")
        rows = self._rows("SELECT * FROM journal ORDER BY id DESC LIMIT ?", (n,))
        return rows[::-1]

    def follow(
        self, after_id: int | None = None, poll_s: float = 0.5, idle_timeout_s: float | None = None
    ) -> Iterator[JournalEvent]:
        """Yield events as they are appended (like ``tail -f``), polling every ``poll_s`` seconds.

        Args:
            after_id: start after this row id; None starts at the current end.
            poll_s: polling interval in seconds (WAL lets this read while a daemon writes).
            idle_timeout_s: stop after this many seconds without a new event; None follows forever.
        """
        last = after_id if after_id is not None else self.last_id()
        idle_since = time.monotonic()
        while True:
            new = self.events(after_id=last)
            for ev in new:
                last = ev.id
                yield ev
            if new:
                idle_since = time.monotonic()
            elif idle_timeout_s is not None and time.monotonic() - idle_since >= idle_timeout_s:
                return
            time.sleep(poll_s)

    def last_id(self) -> int:
        """Id of the newest row (0 for an empty journal)."""
        with self._lock:
            row = self._conn.execute("SELECT COALESCE(MAX(id), 0) FROM journal").fetchone()
        return int(row[0])

    def find_session(self, prefix: str) -> str:
        """The session id equal to ``prefix`` or the only one starting with it.

        Raises:
            JournalError: no session or more than one session matches.
        """
        with self._lock:
            rows = self._conn.execute(
                "SELECT DISTINCT session_id FROM journal WHERE session_id = ? OR substr(session_id, 1, ?) = ?",
                (prefix, len(prefix), prefix),
            ).fetchall()
        ids = [r[0] for r in rows]
        if prefix in ids:
            return prefix
        if len(ids) == 1:
            return str(ids[0])
        if not ids:
            raise JournalError(f"session {prefix!r}: not in the journal {self.path}")
        raise JournalError(f"session {prefix!r}: ambiguous, matches {', '.join(sorted(ids))}")

    def newest_session(self) -> str:
        """The id of the session whose first event is the newest in the journal.

        Raises:
            JournalError: the journal holds no session.
        """
        with self._lock:
            row = self._conn.execute(
                "SELECT session_id FROM journal GROUP BY session_id ORDER BY MIN(id) DESC LIMIT 1"
            ).fetchone()
        if row is None:
            raise JournalError(f"no session in the journal {self.path}")
        return str(row[0])

    def sessions(self) -> list[SessionSummary]:
        """One summary per session, oldest first, from session.start/baseline/decision/session.end; the
        daemon's pseudo-session is "stopped" (ended at its last ``daemon.stop``) when that event follows its
        last ``daemon.start``, else "unfinished" like any session without session.end."""
        sql = """
        SELECT session_id,
          MIN(ts) AS started,
          MAX(CASE WHEN event = 'session.end' THEN ts END) AS ended,
          MAX(CASE WHEN event = 'session.start' THEN json_extract(data, '$.target') END) AS target,
          MAX(CASE WHEN event = 'session.start' THEN json_extract(data, '$.workload') END) AS workload,
          COUNT(DISTINCT CASE WHEN round_no >= 1 THEN round_no END) AS rounds,
          COALESCE(MAX(CASE WHEN event = 'session.end' THEN json_extract(data, '$.baseline_objective') END),
                   MAX(CASE WHEN event = 'baseline' THEN json_extract(data, '$.objective') END))
              AS baseline_objective,
          MAX(CASE WHEN event = 'baseline' THEN json_extract(data, '$.objectives') END) AS baseline_runs,
          MAX(CASE WHEN event = 'session.end' THEN json_extract(data, '$.best_objective') END)
              AS best_objective,
          MAX(CASE WHEN event = 'session.end' THEN COALESCE(json_extract(data, '$.status'), 'ended') END)
              AS status,
          MAX(CASE WHEN event = 'daemon.start' THEN id END) AS last_start,
          MAX(CASE WHEN event = 'daemon.stop' THEN id END) AS last_stop,
          MAX(CASE WHEN event = 'daemon.stop' THEN ts END) AS stopped
        FROM journal GROUP BY session_id ORDER BY MIN(id)
        """
        with self._lock:
            rows = self._conn.execute(sql).fetchall()
        return [
            SessionSummary(
                id=r["session_id"],
                started=r["started"],
                ended=r["ended"] or (r["stopped"] if _stopped(r) else None),
                target=None if r["target"] is None else str(r["target"]),
                workload=None if r["workload"] is None else str(r["workload"]),
                rounds=r["rounds"],
                baseline_objective=_baseline(r["baseline_objective"], r["baseline_runs"]),
                best_objective=r["best_objective"],
                status=r["status"] or ("stopped" if _stopped(r) else "unfinished"),
            )
            for r in rows
        ]

    # -- integrity -----------------------------------------------------------------------------

    def verify(self) -> VerifyResult:
        """Recompute the hash chain from the first row.

        Detects a changed row (its hash no longer matches its fields), a deleted or inserted row
        (``prev_hash`` no longer matches the row before) and a truncated tail (ids handed out by
        AUTOINCREMENT beyond the last row). ``first_bad_id`` is the first row that fails.

        With the key loaded, every row after the key's ``unkeyed_until`` must carry a valid HMAC: a
        row rewritten and an unkeyed chain recomputed after it fails. Without a key, a keyed row
        cannot be checked and fails with a reason that names ``storage.journal_key_file``; a journal
        with no keyed row verifies, with a note that a plain chain only shows accidental edits.
        """
        checked = keyed = 0
        prev = GENESIS_HASH
        prev_id = 0
        with self._lock:
            for r in self._conn.execute("SELECT * FROM journal ORDER BY id"):
                checked += 1
                why = self._row_problem(r, prev, prev_id)
                if why:
                    return VerifyResult(ok=False, rows_checked=checked, first_bad_id=r["id"], reason=why)
                keyed += str(r["hash"]).startswith(KEYED_PREFIX)
                prev, prev_id = r["hash"], r["id"]
            seq = self._conn.execute("SELECT seq FROM sqlite_sequence WHERE name='journal'").fetchone()
        if seq is not None and seq[0] > prev_id:
            return VerifyResult(
                ok=False,
                rows_checked=checked,
                first_bad_id=prev_id + 1,
                reason=f"rows {prev_id + 1}..{seq[0]} were handed out but are missing (tail deleted)",
            )
        return VerifyResult(ok=True, rows_checked=checked, keyed_rows=keyed, note=self._note(checked, keyed))

    def _note(self, checked: int, keyed: int) -> str:
        if self.key is None:
            return (
                "no key: plain SHA-256 chain, which shows accidental edits but not a rewrite that "
                "recomputes every later hash (set storage.journal_key_file; the daemon and tune create it)"
            )
        plain = checked - keyed
        if plain:
            return (
                f"rows 1..{self.key.unkeyed_until} predate the key ({self.key.path}) and are plain SHA-256: "
                "they show accidental edits only; later rows are keyed"
            )
        return f"every row keyed with {self.key.path}"

    def _row_problem(self, r: sqlite3.Row, prev: str, prev_id: int) -> str:
        """Why row ``r`` breaks the chain ('' when it does not)."""
        if r["prev_hash"] != prev:
            if prev_id == 0:
                return "first row does not start the chain"
            return f"prev_hash does not match the hash of row {prev_id} (a row was removed or inserted)"
        stored = str(r["hash"])
        fields = (r["id"], r["ts"], r["session_id"], r["round_no"], r["event"], r["data"])
        if self.key is not None and r["id"] > self.key.unkeyed_until:
            if not stored.startswith(KEYED_PREFIX):
                return (
                    f"row is not keyed, but {self.key.path} says every row after {self.key.unkeyed_until} is "
                    "(the row was rewritten without the key)"
                )
            expected = self.key.row_hash(prev, _fields(*fields))
        elif stored.startswith(KEYED_PREFIX):
            if self.key is None:
                return "row is HMAC-keyed but no key was given: set storage.journal_key_file to verify it"
            return f"row is keyed, but {self.key.path} says rows up to {self.key.unkeyed_until} predate the key"
        else:
            expected = row_hash(prev, *fields)
        if not hmac.compare_digest(stored, expected):
            return "hash does not match the row's content (the row was modified)"
        return ""

    # -- crash safety --------------------------------------------------------------------------

    def open_intents(self) -> list[Intent]:
        """Intents whose trial may still be in effect, oldest first.

        An ``intent`` row stays open until a later row of the same session and round is
        ``intent.closed`` (the session kept or reverted the trial), ``recovery`` or ``reconcile``.
        A measurement does not close it: between "measured" and the auditor's keep/revert the trial
        configuration is still in effect, and a crash there must be reconciled too.
        """
        sql = """
        SELECT i.* FROM journal AS i
        WHERE i.event = 'intent'
          AND NOT EXISTS (
            SELECT 1 FROM journal AS c
            WHERE c.session_id = i.session_id AND c.round_no IS i.round_no AND c.id > i.id
              AND c.event IN ('intent.closed', 'recovery', 'reconcile'))
        ORDER BY i.id
        """
        out: list[Intent] = []
        for ev in self._rows(sql):
            snapshot: Snapshot | None = None
            raw = ev.data.get("snapshot")
            if raw is not None:
                try:
                    snapshot = Snapshot.model_validate(raw)
                except ValueError as exc:
                    log.warning("journal.intent_snapshot_invalid", id=ev.id, error=str(exc))
            changes = ev.data.get("changes", [])
            out.append(
                Intent(
                    id=ev.id,
                    ts=ev.ts,
                    session_id=ev.session_id,
                    round_no=ev.round_no,
                    target=ev.data.get("target"),
                    snapshot=snapshot,
                    changes=changes if isinstance(changes, list) else [changes],
                    data=ev.data,
                )
            )
        return out

    # -- export --------------------------------------------------------------------------------

    def export_jsonl(self, dest: Path | str | IO[str], session_id: str | None = None) -> int:
        """Write events as JSON lines (one row object per line, ``data`` as an object).

        Args:
            dest: a file path (overwritten) or a text stream.
            session_id: only this session; None exports everything.

        Returns:
            The number of lines written.
        """
        events = self.events(session_id)
        if isinstance(dest, (str, Path)):
            with open(dest, "w", encoding="utf-8") as fh:
                return self._write_lines(fh, events)
        return self._write_lines(dest, events)

    @staticmethod
    def _write_lines(fh: IO[str], events: list[JournalEvent]) -> int:
        for ev in events:
            fh.write(json.dumps(ev.model_dump(mode="json"), sort_keys=True, ensure_ascii=False) + "\n")
        return len(events)
