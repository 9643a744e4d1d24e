"""The Memory Book: sessions, rounds, experience, LLM call accounting and saved OS originals in SQLite.

docs/architecture.md "Memory" and issue 6 "Experience memory". The schema is data (``memory/memory.sql``); rows
are written and read through sqlite-utils. JSON columns hold the pydantic models of
``agenticdb.models`` so a reader gets back exactly what a writer stored.

Experience retrieval ranks stored experience by ``agenticdb.store.memory.experience.similarity``.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlite_utils
import structlog
from pydantic import BaseModel

from agenticdb.models import RoundOutcome
from agenticdb.models.planning import Experience, Fingerprint
from agenticdb.resources import data_file
from agenticdb.store.faults import guarded
from agenticdb.store.memory.backends import (
    CentralCache,
    SqliteBackend,
    default_host_label,
    migrate_local,
    origin_host,
    rank,
)
from agenticdb.store.memory.experience import drop_lessons
from agenticdb.store.sqlite_create import connect_read_only, create_sqlite_atomically

log = structlog.get_logger(__name__)


class MemoryBookError(ValueError):
    """Bad input to the Memory Book or a bad import file; the message names the value and the rule."""


class SessionRecord(BaseModel):
    """One row of ``sessions``."""

    id: str
    target: str
    dbms: str
    version: str
    workload: str
    fingerprint: Fingerprint
    started_at: str
    ended_at: str | None = None
    status: str
    baseline_objective: float | None = None
    best_objective: float | None = None
    best_config: dict[str, str] = {}


class StoredExperience(BaseModel):
    """An experience row: its id in the book plus the Experience."""

    id: int
    created_at: str
    experience: Experience


class OsOriginal(BaseModel):
    """An OS value as it was before agenticdb's first write in a session."""

    session_id: str
    name: str
    original: str
    saved_at: str
    restored_at: str | None = None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _dumps(value: Any) -> str:
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(value, sort_keys=True)


def _nonneg(name: str, value: float) -> None:
    if value is None or value < 0 or (isinstance(value, float) and math.isnan(value)):
        raise MemoryBookError(f"{name}={value!r}: must be a number >= 0")


class MemoryBook:
    """The Memory Book in one SQLite file (WAL mode; created with its folder when missing).

    Args:
        path: the SQLite file, usually ``Settings.storage.memory_db``.
        read_only: open an existing file without writing anything (no schema, no migration, no WAL
            switch, no side files; ``rollback --dry-run``); every write then fails.
    """

    @guarded("memory", "open")
    def __init__(self, path: Path | str, host: str | None = None, read_only: bool = False) -> None:
        self.path = Path(path)
        if read_only:
            self.db = sqlite_utils.Database(connect_read_only(self.path, timeout=30))
        else:
            # 0600: configurations and host facts are the operator's business; whole or not at all
            create_sqlite_atomically(self.path, data_file("memory", "memory.sql").read_text())
            self.db = sqlite_utils.Database(self.path)
            self.db.conn.execute("PRAGMA busy_timeout = 30000")
            self.db.enable_wal()
            self.db.conn.executescript(data_file("memory", "memory.sql").read_text())
            migrate_local(self.db.conn)
        self.host = default_host_label(host)
        """This host's label in a shared Memory Book (``storage.host_label``, default the hostname)."""
        self.central: CentralCache | None = None
        """The central Memory Book this book caches (issue 19; ``memory.central.attach_central``)."""
        self.last_session: str | None = None
        """The session most recently started here (events about the central book are journaled under it)."""

    def _t(self, name: str) -> sqlite_utils.db.Table:
        return self.db.table(name)

    def close(self) -> None:
        """Close the connection (and the central Memory Book's, when attached)."""
        if self.central is not None:
            self.central.close()
        self.db.close()

    def __enter__(self) -> MemoryBook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sessions and rounds -------------------------------------------------------------------

    @guarded("memory")
    def start_session(
        self,
        session_id: str,
        target: str,
        fingerprint: Fingerprint,
        workload: str | None = None,
        started_at: str | None = None,
    ) -> None:
        """Record a new session (status ``running``); DBMS and version come from ``fingerprint``.

        Raises:
            MemoryBookError: empty ``session_id`` or a session with that id already exists.
        """
        if not session_id:
            raise MemoryBookError(f"session_id={session_id!r}: must be a non-empty string")
        if self._session_row(session_id) is not None:
            raise MemoryBookError(f"session_id={session_id!r}: a session with this id already exists")
        self.last_session = session_id
        self._t("sessions").insert(
            {
                "id": session_id,
                "target": target,
                "dbms": fingerprint.dbms,
                "version": fingerprint.version_major,
                "workload": workload or fingerprint.benchmark,
                "fingerprint": _dumps(fingerprint),
                "started_at": started_at or _now(),
                "ended_at": None,
                "status": "running",
                "baseline_objective": None,
                "best_objective": None,
                "best_config": None,
            }
        )

    @guarded("memory")
    def end_session(
        self,
        session_id: str,
        status: str,
        baseline_objective: float | None = None,
        best_objective: float | None = None,
        best_config: dict[str, str] | None = None,
    ) -> None:
        """Close a session with its final ``status`` (completed, failed, aborted, ...) and results.

        Raises:
            MemoryBookError: the session was never started.
        """
        self._require_session(session_id)
        self._t("sessions").update(
            session_id,
            {
                "ended_at": _now(),
                "status": status,
                "baseline_objective": baseline_objective,
                "best_objective": best_objective,
                "best_config": None if best_config is None else _dumps(best_config),
            },
        )

    def _session_row(self, session_id: str) -> dict[str, Any] | None:
        rows = list(self._t("sessions").rows_where("id = ?", [session_id]))
        return rows[0] if rows else None

    def _require_session(self, session_id: str) -> dict[str, Any]:
        row = self._session_row(session_id)
        if row is None:
            raise MemoryBookError(f"session_id={session_id!r}: no such session (call start_session first)")
        return row

    @staticmethod
    def _session_record(row: dict[str, Any]) -> SessionRecord:
        return SessionRecord(
            **{
                **row,
                "fingerprint": Fingerprint.model_validate_json(row["fingerprint"]),
                "best_config": json.loads(row["best_config"]) if row["best_config"] else {},
            }
        )

    def session(self, session_id: str) -> SessionRecord:
        """One session. Raises MemoryBookError when unknown."""
        return self._session_record(self._require_session(session_id))

    def sessions(self) -> list[SessionRecord]:
        """All sessions, oldest first."""
        return [self._session_record(r) for r in self._t("sessions").rows_where(order_by="started_at")]

    @guarded("memory")
    def record_round(self, outcome: RoundOutcome) -> None:
        """Store (or replace) the consolidated outcome of one round.

        Raises:
            MemoryBookError: the outcome's session was never started.
        """
        self._require_session(outcome.session_id)
        self._t("rounds").insert(
            {
                "session_id": outcome.session_id,
                "round_no": outcome.round_no,
                "stage": outcome.stage.value,
                "bottleneck": outcome.bottleneck.value,
                "decision": outcome.decision.value,
                "objective": outcome.objective,
                "kept": int(outcome.kept),
                "outcome": _dumps(outcome),
            },
            replace=True,
        )

    def rounds(self, session_id: str) -> list[RoundOutcome]:
        """Round outcomes of a session in round order."""
        return [
            RoundOutcome.model_validate_json(r["outcome"])
            for r in self._t("rounds").rows_where("session_id = ?", [session_id], order_by="round_no")
        ]

    # -- experience ----------------------------------------------------------------------------

    @guarded("memory")
    def write_experience(self, exp: Experience) -> int:
        """Store an Experience under its fingerprint; returns its id. With a central Memory Book attached
        the new row (and anything still pending) is pushed there too; when it is unreachable the row
        stays pending for ``agenticdb memory sync``."""
        fp = exp.fingerprint
        exp_id = self.insert_experience_row(exp, origin_host(exp, self.host), synced=False)
        log.info(
            "memory.experience_written",
            id=exp_id,
            session_id=exp.session_id,
            dbms=fp.dbms,
            workload_class=fp.workload_class,
            benchmark=fp.benchmark,
        )
        if self.central is not None:
            self.central.push(self)
        return exp_id

    def has_pending(self) -> bool:
        """True when experience learned here is not yet in the central Memory Book."""
        return self.db.execute("SELECT 1 FROM experience WHERE synced_at IS NULL LIMIT 1").fetchone() is not None

    def insert_experience_row(self, exp: Experience, host: str, synced: bool, commit: bool = True) -> int:
        """Insert one experience row as is (no duplicate check; see ``backends.SqliteBackend.upsert``)."""
        fp = exp.fingerprint
        created = datetime.fromtimestamp(exp.created_at, UTC).isoformat(timespec="microseconds")
        cols = {
            "session_id": exp.session_id,
            **fp.model_dump(mode="json"),
            "fingerprint": _dumps(fp),
            "experience": _dumps(exp),
            "created_at": created,
            "host": host,
            "synced_at": _now() if synced else None,
        }
        names = ", ".join(cols)
        marks = ", ".join("?" for _ in cols)
        cur = self.db.conn.execute(f"INSERT INTO experience ({names}) VALUES ({marks})", list(cols.values()))
        if commit:
            self.db.conn.commit()
        return int(cur.lastrowid or 0)

    def list_experience(self) -> list[StoredExperience]:
        """All experience, oldest first."""
        return [self._stored(r) for r in self._t("experience").rows_where(order_by="id")]

    def get_experience(self, experience_id: int) -> StoredExperience:
        """One experience by id. Raises MemoryBookError when unknown."""
        rows = list(self._t("experience").rows_where("id = ?", [experience_id]))
        if not rows:
            raise MemoryBookError(f"experience id={experience_id}: no such experience in {self.path}")
        return self._stored(rows[0])

    @staticmethod
    def _stored(row: dict[str, Any]) -> StoredExperience:
        return StoredExperience(
            id=row["id"],
            created_at=row["created_at"],
            experience=Experience.model_validate_json(row["experience"]),
        )

    def retrieve(self, fp: Fingerprint, limit: int = 3, threshold: float = 0.6) -> list[tuple[float, Experience]]:
        """Experience of similar problems, best first: ``(similarity, Experience)`` with
        ``similarity >= threshold`` (and > 0, so another DBMS family is never returned); ties go to
        the newer experience.

        Raises:
            MemoryBookError: ``limit`` < 1 or ``threshold`` outside [0, 1].
        """
        if limit < 1:
            raise MemoryBookError(f"limit={limit}: must be >= 1")
        if not 0.0 <= threshold <= 1.0:
            raise MemoryBookError(f"threshold={threshold}: must be within [0, 1]")
        if self.central is not None:
            found = self.central.retrieve(self, fp, limit, threshold)
            if found is not None:
                return found
        # 0 = other DBMS family: never useful (rank drops it)
        return [(score, rec.experience) for score, rec in rank(fp, SqliteBackend(self).records(), limit, threshold)]

    @guarded("memory")
    def forget(
        self,
        experience_id: int | None = None,
        *,
        session_id: str | None = None,
        dbms: str | None = None,
        version_major: str | None = None,
        benchmark: str | None = None,
        workload_class: str | None = None,
    ) -> int:
        """Delete experience by id or by fingerprint fields (all given filters must match).

        Returns:
            The number of experience rows deleted.

        Raises:
            MemoryBookError: no id and no filter given (forgetting everything must be explicit).
        """
        filters = {
            "id": experience_id,
            "session_id": session_id,
            "dbms": dbms,
            "version_major": version_major,
            "benchmark": benchmark,
            "workload_class": workload_class,
        }
        given = {k: v for k, v in filters.items() if v is not None}
        if not given:
            raise MemoryBookError("forget: give an experience id or at least one fingerprint filter")
        where = " AND ".join(f"{k} = ?" for k in given)
        params = list(given.values())
        count = self._t("experience").count_where(where, params)
        self._t("experience").delete_where(where, params)
        log.info("memory.forgotten", count=count, **{k: str(v) for k, v in given.items()})
        return count

    @guarded("memory")
    def forget_lessons(self, match: str, session_id: str | None = None) -> int:
        """Drop the failed lessons whose phase or reason contains ``match`` from every experience row (of
        ``session_id`` when given); the rows stay. Returns the lessons dropped.

        Raises:
            ValueError: ``match`` is empty.
        """
        where, params = ("session_id = ?", [session_id]) if session_id else (None, [])
        dropped = 0
        for row in list(self._t("experience").rows_where(where, params)):
            exp, gone = drop_lessons(Experience.model_validate_json(row["experience"]), match)
            if gone:
                self._t("experience").update(row["id"], {"experience": exp.model_dump_json()})
                dropped += len(gone)
                log.info("memory.lessons_forgotten", id=row["id"], session=row["session_id"], dropped=len(gone))
        return dropped

    # -- LLM accounting ------------------------------------------------------------------------

    @guarded("memory")
    def record_llm_call(
        self,
        session_id: str,
        round_no: int | None,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        cached_tokens: int,
        latency_ms: float,
        cost_usd: float,
        ok: bool,
        error: str | None = None,
    ) -> int:
        """Record one LLM call (tokens as reported by the endpoint, latency in ms, cost in USD).

        Raises:
            MemoryBookError: a negative count, latency or cost.
        """
        for name, value in (
            ("prompt_tokens", prompt_tokens),
            ("completion_tokens", completion_tokens),
            ("cached_tokens", cached_tokens),
            ("latency_ms", latency_ms),
            ("cost_usd", cost_usd),
        ):
            _nonneg(name, value)
        table = self._t("llm_calls").insert(
            {
                "session_id": session_id,
                "round_no": round_no,
                "model": model,
                "prompt_tokens": int(prompt_tokens),
                "completion_tokens": int(completion_tokens),
                "cached_tokens": int(cached_tokens),
                "latency_ms": float(latency_ms),
                "cost_usd": float(cost_usd),
                "ok": int(bool(ok)),
                "error": error,
                "ts": _now(),
            }
        )
        return int(table.last_pk or 0)

    def llm_totals(self, session_id: str | None = None) -> dict[str, float | int]:
        """Sums over the LLM calls of a session (all sessions for None).

        Returns:
            ``{"calls", "ok_calls", "failed_calls", "prompt_tokens", "completion_tokens",
            "cached_tokens", "latency_ms", "cost_usd"}`` (zeros when there were no calls).
        """
        where, params = ("WHERE session_id = ?", [session_id]) if session_id is not None else ("", [])
        row = next(
            self.db.query(
                "SELECT COUNT(*) AS calls, COALESCE(SUM(ok), 0) AS ok_calls,"
                " COALESCE(SUM(prompt_tokens), 0) AS prompt_tokens,"
                " COALESCE(SUM(completion_tokens), 0) AS completion_tokens,"
                " COALESCE(SUM(cached_tokens), 0) AS cached_tokens,"
                " COALESCE(SUM(latency_ms), 0.0) AS latency_ms, COALESCE(SUM(cost_usd), 0.0) AS cost_usd"
                f" FROM llm_calls {where}",
                params,
            )
        )
        row["failed_calls"] = row["calls"] - row["ok_calls"]
        return row

    # -- OS originals --------------------------------------------------------------------------

    @guarded("memory")
    def save_os_original(self, session_id: str, name: str, value: str) -> bool:
        """Save the value of an OS parameter before the session first writes it.

        Only the first value per name and session is kept (later calls would save a trial value).

        Returns:
            True when saved, False when an original for ``name`` was already saved in the session.
        """
        cursor = self.db.execute(
            "INSERT OR IGNORE INTO os_originals (session_id, name, original, saved_at, restored_at)"
            " VALUES (?, ?, ?, ?, NULL)",
            [session_id, name, str(value), _now()],
        )
        self.db.conn.commit()
        saved = cursor.rowcount == 1
        if saved:
            log.info("memory.os_original_saved", session_id=session_id, name=name, original=str(value))
        return saved

    def os_originals(self, session_id: str | None = None, unrestored_only: bool = True) -> list[OsOriginal]:
        """Saved OS originals, oldest first, of one session or all; by default only those not yet
        restored (what crash reconciliation must put back)."""
        clauses, params = [], []
        if session_id is not None:
            clauses.append("session_id = ?")
            params.append(session_id)
        if unrestored_only:
            clauses.append("restored_at IS NULL")
        rows = self._t("os_originals").rows_where(
            " AND ".join(clauses) or None, params or None, order_by="saved_at, name"
        )
        return [OsOriginal(**r) for r in rows]

    @guarded("memory")
    def mark_os_restored(self, session_id: str, name: str | None = None) -> int:
        """Mark the originals of a session (or one ``name``) as restored; returns how many rows."""
        sql = "UPDATE os_originals SET restored_at = ? WHERE session_id = ? AND restored_at IS NULL"
        params: list[Any] = [_now(), session_id]
        if name is not None:
            sql += " AND name = ?"
            params.append(name)
        cursor = self.db.execute(sql, params)
        self.db.conn.commit()
        return int(cursor.rowcount)

    # -- rows for export / import (agenticdb.store.memory.transfer) ------------------------------------

    def table_rows(self, table: str) -> list[dict[str, Any]]:
        """Every row of ``table`` ("sessions", "rounds", "experience", "llm_calls") as stored."""
        return list(self._t(table).rows)

    def table_columns(self, table: str) -> set[str]:
        """The column names of ``table``."""
        return set(self._t(table).columns_dict)

    def has_session(self, session_id: str) -> bool:
        """True when a session row ``session_id`` exists."""
        return self._session_row(session_id) is not None

    def count_rows(self, table: str, where: str, params: list[Any]) -> int:
        """Rows of ``table`` matching the SQL condition ``where`` with ``params``."""
        return int(self._t(table).count_where(where, params))

    def insert_row(self, table: str, row: dict[str, Any]) -> None:
        """Insert ``row`` into ``table`` as is (the caller checks for duplicates; inside :attr:`db` ``atomic()``)."""
        self._t(table).insert(row)
