"""The workload class ``agenticdb advise`` plans for when it runs no workload of its own.

Where it comes from, first found wins:

1. the latest session in the Memory Book on this server's DBMS, major version and host (same memory and
   CPUs): its fingerprint's class (a TPC-H session is "olap");
2. the server's own counters since their last reset (PostgreSQL pg_stat_database ``tup_returned`` /
   ``tup_fetched`` / transactions; MariaDB handler reads), called by
   :func:`agenticdb.planner.access.class_call` with its borderline band;
3. else assumed "oltp" — and then no recommendation that only that assumption drives is given
   (:func:`class_free`: ``block.<dev>.read_ahead_kb 8192 → 32`` because "OLTP reads single pages at
   random" halves a scanning workload's read throughput).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from agenticdb.advice.recommendation import Recommendation
from agenticdb.models import StateDelta
from agenticdb.models.planning import Fingerprint
from agenticdb.planner.access import class_call
from agenticdb.store.memory import MemoryBook

ASSUMED = "assumed: advise knows no workload, no session on this host and no row counters on the server"
"""The basis of a class nothing measured."""


@dataclass(frozen=True)
class AdvisedClass:
    """The class advise uses and where it came from.

    Attributes:
        cls: "oltp" | "olap" | "mixed".
        basis: for a person, e.g. ``measured by the latest session on this host, 20261207-… (tpch; in the
            Memory Book since 2026-12-07 03:07:31 UTC, after its baseline)``.
        assumed: nothing measured it (recommendations driven by it alone are left out).
        note: the line for ``Advice.notes``.
    """

    cls: str
    basis: str
    assumed: bool
    note: str


def advised_class(memory_db: Path | None, fp: Fingerprint, since_reset: StateDelta | None) -> AdvisedClass:
    """The class for a server of fingerprint ``fp`` (dbms, version, memory_gib, cpu_count are read).

    Args:
        memory_db: the Memory Book's SQLite file (None or absent: no sessions).
        fp: :func:`agenticdb.advice.advise.host_fingerprint` of the server.
        since_reset: the server's counters since their reset as totals (one sample, ``StateDelta(totals=…)``),
            or None.

    Never raises for a missing Memory Book; an unreadable one raises the Memory Book's errors.
    """
    session = _latest_session(memory_db, fp)
    if session is not None:
        sid, workload, recorded, cls = session
        basis = (
            f"measured by the latest session on this host, {sid} ({workload}; in the Memory Book since "
            f"{utc_text(recorded)}, after its baseline)"
        )
        return AdvisedClass(cls, basis, False, f"workload class {cls} ({basis})")
    call = class_call("oltp", since_reset) if since_reset is not None else None
    if call is not None and call.figures is not None:
        basis = "read from the server's counters since their last reset"
        text = call.text(basis)
        return AdvisedClass(call.cls, basis, False, text if basis in text else f"{text} [{basis}]")
    note = (
        f"workload class oltp ({ASSUMED}): recommendations that depend on the class are left out "
        "(they would harm a workload of the other class)"
    )
    return AdvisedClass("oltp", ASSUMED, True, note)


def utc_text(stamp: str) -> str:
    """A Memory Book session's ``started_at`` (ISO 8601, written in UTC by ``MemoryBook.start_session``) as
    "YYYY-MM-DD HH:MM:SS UTC"; a stamp without an offset is taken as UTC, one that is no ISO time is returned
    as it is.

    The time is when the session's Memory Book record was written: a tuning session writes it once its
    fingerprint is known, after profiling, the data load and the baseline (``loop.initializer``
    ``Initializer._retrieve``), so it is later than the journal's "Started" (the session's first event) by
    that much — 40 s in a user's trial ("started 14:01:51" beside the journal's "Started 14:01:11").
    """
    try:
        when = datetime.fromisoformat(stamp)
    except ValueError:
        return stamp
    if when.tzinfo is not None:
        when = when.astimezone(UTC)
    return when.strftime("%Y-%m-%d %H:%M:%S UTC")


def _latest_session(memory_db: Path | None, fp: Fingerprint) -> tuple[str, str, str, str] | None:
    """(id, workload, started_at, class) of the newest Memory Book session of ``fp``'s DBMS, version and
    host size, None when there is none."""
    if memory_db is None or not memory_db.exists():
        return None
    with MemoryBook(memory_db, read_only=True) as book:
        sessions = book.sessions()
    for s in reversed(sessions):  # oldest first
        o = s.fingerprint
        if s.workload == "advice":
            continue  # an applied advice, not a measured workload
        if (o.dbms, o.version_major, o.memory_gib, o.cpu_count) == (
            fp.dbms,
            fp.version_major,
            fp.memory_gib,
            fp.cpu_count,
        ):
            return s.id, s.workload, s.started_at, o.workload_class
    return None


def class_free(assumed: list[Recommendation], other: list[Recommendation]) -> tuple[list[Recommendation], str | None]:
    """``assumed`` (advised under the assumed class) without the recommendations the other class would not
    give at the same value, and the note naming them (None when none is left out)."""
    same = {(r.knob, r.recommended) for r in other}
    kept = [r for r in assumed if (r.knob, r.recommended) in same]
    left = [r for r in assumed if (r.knob, r.recommended) not in same]
    if not left:
        return kept, None
    named = ", ".join(f"{r.knob} {r.current} → {r.recommended}" for r in left)
    return kept, (
        f"left out under the assumed class (another class would not do it, and it may harm that workload): {named}; "
        "run advise under load, or after a tuning session on this server, to have them"
    )
