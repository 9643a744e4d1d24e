"""Experience backends (issue 19): one small interface over the local SQLite Memory Book and the central
PostgreSQL one, so retrieval by fingerprint similarity is the same code against both.

=========================  =========================================================================
name                       role
=========================  =========================================================================
:class:`ExperienceRecord`  an experience with its key: origin host + session id (one per session)
:class:`RoundRecord`       a round outcome keyed by host + session + round number
:class:`ExperienceBackend` the interface: ``upsert`` (idempotent by key), ``records``, ``close``
:func:`rank`               similarity ranking shared by every backend (``experience.similarity``)
:class:`SqliteBackend`     the local book's ``experience`` table behind the interface
:func:`host_origin`        the host fingerprint stamped on new experience
:func:`learn`              a finished session distilled into experience and written to the book
=========================  =========================================================================
"""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import sqlite_utils
import structlog
from pydantic import BaseModel

from agenticdb.models import Catalog, Hardware, RoundOutcome
from agenticdb.models.planning import Experience, Fingerprint, HostOrigin
from agenticdb.store.memory.experience import dbms_family, distill_experience, relative_values, similarity


class SyncResult(BaseModel):
    """What one ``central.sync`` did: experience rows uploaded (new in the central book), already there,
    and rounds sent."""

    uploaded: int
    already_there: int
    rounds: int


class CentralCache(Protocol):
    """A local book's link to a central Memory Book (``central.CentralLink``), as the book sees it."""

    def push(self, book: LocalBook) -> SyncResult | None: ...  # pragma: no cover - protocol

    def retry(self) -> None: ...  # pragma: no cover - protocol

    def retrieve(
        self, book: LocalBook, fp: Fingerprint, limit: int, threshold: float
    ) -> list[tuple[float, Experience]] | None: ...  # pragma: no cover - protocol

    def close(self) -> None: ...  # pragma: no cover - protocol


class LocalBook(Protocol):
    """The local Memory Book (``book.MemoryBook``) as the backends and the central link use it, so this
    module and ``central`` sit below ``book`` (the book imports them, never the other way round)."""

    path: Path
    host: str
    db: sqlite_utils.Database
    central: CentralCache | None

    def rounds(self, session_id: str) -> list[RoundOutcome]: ...  # pragma: no cover - protocol

    def write_experience(self, exp: Experience) -> int: ...  # pragma: no cover - protocol

    def insert_experience_row(
        self, exp: Experience, host: str, synced: bool, commit: bool = True
    ) -> int: ...  # pragma: no cover - protocol


log = structlog.get_logger(__name__)


class ExperienceRecord(BaseModel):
    """An experience under its unique key (``host``, ``session_id``); ``created_at`` UTC ISO 8601."""

    host: str
    session_id: str
    created_at: str
    experience: Experience


class RoundRecord(BaseModel):
    """A round outcome under its unique key (``host``, ``session_id``, ``round_no``)."""

    host: str
    session_id: str
    round_no: int
    outcome: RoundOutcome


class ExperienceBackend(Protocol):
    """Where experience is stored. ``upsert`` is idempotent: a record whose key is already stored is
    skipped (never duplicated, never overwritten), so a retried upload cannot double-count."""

    name: str

    def upsert(self, experiences: Sequence[ExperienceRecord], rounds: Sequence[RoundRecord] = ()) -> int:
        """Store what is new in one transaction; returns how many experience rows were inserted."""
        ...

    def records(self, family: str | None = None) -> list[ExperienceRecord]:
        """All experience (of one DBMS family when given), oldest first."""
        ...

    def close(self) -> None:
        """Release the connection."""
        ...


def rank(
    fp: Fingerprint, records: Sequence[ExperienceRecord], limit: int = 3, threshold: float = 0.6
) -> list[tuple[float, ExperienceRecord]]:
    """Records of similar problems, best first: ``(similarity, record)`` with ``similarity >= threshold``
    and > 0 (another DBMS family never); ties go to the newer record (``Experience.created_at``, then the
    later in ``records``). Pure function."""
    scored = [(similarity(fp, r.experience.fingerprint), r.experience.created_at, i, r) for i, r in enumerate(records)]
    kept = [t for t in scored if t[0] > 0.0 and t[0] >= threshold]
    kept.sort(key=lambda t: (t[0], t[1], t[2]), reverse=True)
    return [(t[0], t[3]) for t in kept[:limit]]


def retrieve(
    backend: ExperienceBackend, fp: Fingerprint, limit: int = 3, threshold: float = 0.6
) -> list[tuple[float, ExperienceRecord]]:
    """:func:`rank` over the backend's records of ``fp``'s DBMS family."""
    return rank(fp, backend.records(dbms_family(fp.dbms)), limit, threshold)


def default_host_label(label: str | None) -> str:
    """The configured ``storage.host_label`` or the machine's hostname."""
    return label or socket.gethostname()


def storage_class(device: str | None, sys_root: Path = Path("/sys")) -> str:
    """``nvme``, ``ssd``, ``hdd`` or ``unknown`` for a block device name (``sda``, ``nvme0n1``; a
    partition is looked up through its parent). Source: /sys/block/<dev>/queue/rotational (kernel
    Documentation/block/queue-sysfs.rst: 1 = rotational)."""
    if not device:
        return "unknown"
    name = Path(device).name
    candidates = [name, name.rstrip("0123456789"), name.rsplit("p", 1)[0]]
    for cand in candidates:
        flag = sys_root / "block" / cand / "queue" / "rotational"
        if flag.exists():
            if flag.read_text().strip() == "1":
                return "hdd"
            return "nvme" if cand.startswith("nvme") else "ssd"
    return "unknown"


def host_origin(host: str, fp: Fingerprint, hardware: Hardware) -> HostOrigin:
    """The host fingerprint stamped on experience learned here."""
    return HostOrigin(
        host=host,
        dbms=fp.dbms,
        version_major=fp.version_major,
        cpu_count=hardware.cpu_count,
        memory_gib=round(hardware.memory_limit_bytes / 2**30, 2),
        storage_class=storage_class(hardware.data_device),
        workload_class=fp.workload_class,
    )


def learn(
    book: LocalBook,
    session_id: str,
    fp: Fingerprint,
    hardware: Hardware,
    rounds: Sequence[RoundOutcome],
    best: dict[str, str],
    catalogs: Sequence[Catalog],
    best_gain: float,
) -> Experience:
    """Distil a finished session (``experience.distill_experience``: lessons per round, the best
    configuration absolute and relative to ``hardware``'s memory, ``best_gain`` relative to the baseline,
    positive = better), stamp it with this host's origin and write it to ``book``; returns what was written."""
    relative = relative_values(best, catalogs, hardware)
    exp = distill_experience(session_id, fp, rounds, best, relative, best_gain)
    exp = exp.model_copy(update={"origin": host_origin(book.host, fp, hardware)})
    book.write_experience(exp)
    return exp


def origin_host(exp: Experience, fallback: str) -> str:
    """The host an experience came from (``fallback``, this host, for rows written before issue 19)."""
    return exp.origin.host if exp.origin is not None else fallback


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="microseconds")


# ------------------------------------------------------------------------------ the local SQLite book


def migrate_local(conn: sqlite3.Connection) -> None:
    """Bring a Memory Book file written before issue 19 up to date: ``experience.host`` and
    ``experience.synced_at`` columns, and the index on (host, session_id). Idempotent."""
    cols = {r[1] for r in conn.execute("PRAGMA table_info(experience)")}
    if "host" not in cols:
        conn.execute("ALTER TABLE experience ADD COLUMN host TEXT NOT NULL DEFAULT ''")
    if "synced_at" not in cols:
        conn.execute("ALTER TABLE experience ADD COLUMN synced_at TEXT")
    conn.execute("CREATE INDEX IF NOT EXISTS experience_host_session ON experience (host, session_id)")
    conn.commit()


class SqliteBackend:
    """The local Memory Book's experience behind :class:`ExperienceBackend` (the embedded default).

    Rows written before issue 19 have no host; they are reported under ``book.host`` (this host).
    """

    name = "sqlite"

    def __init__(self, book: LocalBook) -> None:
        self.book = book

    def upsert(self, experiences: Sequence[ExperienceRecord], rounds: Sequence[RoundRecord] = ()) -> int:
        """Insert records whose (host, session_id) is not stored yet, in one IMMEDIATE transaction
        (SQLite serialises writers, so a concurrent writer cannot slip in between check and insert).
        Rounds are stored with the local book's ``record_round`` only for sessions it knows."""
        conn = self.book.db.conn
        added = 0
        conn.execute("BEGIN IMMEDIATE")
        try:
            for rec in experiences:
                row = conn.execute(
                    "SELECT 1 FROM experience WHERE host IN (?, ?) AND session_id = ?",
                    (rec.host, "" if rec.host == self.book.host else rec.host, rec.session_id),
                ).fetchone()
                if row is None:
                    self.book.insert_experience_row(rec.experience, rec.host, synced=True, commit=False)
                    added += 1
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return added

    def records(self, family: str | None = None) -> list[ExperienceRecord]:
        """All experience rows as records, oldest first."""
        out = []
        for row in self.book.db.execute("SELECT host, session_id, created_at, experience FROM experience ORDER BY id"):
            exp = Experience.model_validate_json(row[3])
            if family is not None and dbms_family(exp.fingerprint.dbms) != family:
                continue
            out.append(
                ExperienceRecord(host=row[0] or self.book.host, session_id=row[1], created_at=row[2], experience=exp)
            )
        return out

    def pending(self) -> tuple[list[int], list[ExperienceRecord], list[RoundRecord]]:
        """Experience learned here and not yet pushed to a central book (``synced_at`` NULL): row ids,
        records and the rounds of their sessions."""
        ids: list[int] = []
        recs: list[ExperienceRecord] = []
        rounds: list[RoundRecord] = []
        rows = self.book.db.execute(
            "SELECT id, host, session_id, created_at, experience FROM experience WHERE synced_at IS NULL ORDER BY id"
        ).fetchall()
        for row in rows:
            host = row[1] or self.book.host
            ids.append(int(row[0]))
            recs.append(
                ExperienceRecord(
                    host=host, session_id=row[2], created_at=row[3], experience=Experience.model_validate_json(row[4])
                )
            )
            rounds += [
                RoundRecord(host=host, session_id=row[2], round_no=o.round_no, outcome=o)
                for o in self.book.rounds(row[2])
            ]
        return ids, recs, rounds

    def mark_synced(self, ids: Sequence[int]) -> None:
        """Record that these experience rows are in the central book."""
        now = datetime.now(UTC).isoformat(timespec="microseconds")
        with self.book.db.conn:
            self.book.db.conn.executemany("UPDATE experience SET synced_at = ? WHERE id = ?", [(now, i) for i in ids])

    def close(self) -> None:
        """The book is closed by its owner."""


def record_of(exp: Experience, host: str) -> ExperienceRecord:
    """The record of an experience learned on ``host``."""
    return ExperienceRecord(host=host, session_id=exp.session_id, created_at=_iso(exp.created_at), experience=exp)


def retrieved_payload(found: Sequence[tuple[float, Experience]], here: str, fp: Fingerprint) -> dict[str, object]:
    """The ``experience.retrieved`` journal payload: ``sessions`` (ids, best first) and per experience
    its origin host, similarity, whether it came from another host and, for another host, the memory
    ratio its byte sizes are scaled by (this host's GiB / origin's GiB)."""
    items: list[dict[str, object]] = []
    for score, e in found:
        host = origin_host(e, here)
        item: dict[str, object] = {"session": e.session_id, "host": host, "similarity": score}
        item["from_other_host"] = host != here
        if e.origin is not None:
            item["origin"] = e.origin.model_dump(mode="json")
            if host != here and e.origin.memory_gib and fp.memory_gib:
                item["memory_scale"] = round(fp.memory_gib / e.origin.memory_gib, 4)
        items.append(item)
    return {"sessions": [e.session_id for _, e in found], "host": here, "experience": items}
