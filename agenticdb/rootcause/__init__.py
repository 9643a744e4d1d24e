"""Root causes a setting cannot fix (issue 40): stale statistics, missing indexes, vacuum held back, lock
chains, idle-in-transaction sessions, InnoDB purge lag — found from the server's own views, said in one
line, and never chased with knobs.

Layer: beside ``agenticdb.planner`` (it reads the target's server through its DSN; the loop, advice and
the daemon use it). The API other parts call (also in /work/notes/ROOTCAUSE_API.md):

* :class:`Watcher` — ``w = Watcher.for_target(kind, dsn, database, statements).start()`` before an
  observation window (the session's baseline, advise's observation), ``w.finish()`` after it → a
  :class:`RootCauses` (findings, ruled-out lines, notes).
* :func:`dominant` — ``dominant(findings) -> Finding | None``: the cause that explains the slowdown
  (score ≥ ``dominant_score``, followed upstream along ``caused_by``); while it is not None the loop
  proposes no knob and no whole configuration is raced.
* :func:`blocks_knob` — whether a knob is a symptom knob of the dominant finding.
"""

from __future__ import annotations

import time
from typing import Any

import structlog

from agenticdb.rootcause.model import Cause, Finding, Remedy, RootCauses, RuledOut, t, thresholds

__all__ = [
    "Cause",
    "Finding",
    "Remedy",
    "RootCauses",
    "RuledOut",
    "Watcher",
    "blocks_knob",
    "dominant",
    "first_row",
    "thresholds",
]

log = structlog.get_logger(__name__)

WEAK_SCORE = 0.1
"""A finding scoring below this is listed as ruled out with its figures (judgement: the ramps' lowest tenth)."""


def first_row(family: str, dsn: str, database: str | None, query: str) -> dict[str, Any] | None:
    """The first row of a read-only evidence ``query`` in ``database`` (None: the DSN's own) of a PostgreSQL
    or MariaDB server, by column name plus ``database`` (where it ran); None when it returns no row.

    Raises:
        psycopg.Error / pymysql.MySQLError: the server does not connect or the query fails.
    """
    if "postgres" in family.lower():
        from agenticdb.rootcause import pg_read  # lazy: psycopg only for PostgreSQL targets

        return pg_read.first_row(dsn, database, query)
    from agenticdb.rootcause import my_read  # lazy: PyMySQL only for MariaDB targets

    return my_read.first_row(dsn, database, query)


def dominant(findings: list[Finding]) -> Finding | None:
    """The finding that explains the slowdown, or None.

    The highest-scoring finding with score ≥ the ``dominant_score`` threshold (catalogs/causes.toml,
    judgement); when it names an upstream finding (``caused_by``, e.g. a lock chain whose holder runs a
    statement on a table with stale statistics) that is present, the upstream one is returned: the chain
    is cut at its cause, not its last symptom.
    """
    strong = sorted((f for f in findings if f.score >= t("dominant_score")), key=lambda f: -f.score)
    if not strong:
        return None
    top = strong[0]
    by_id = {f.id: f for f in findings}
    seen = {top.id}
    while top.caused_by and top.caused_by in by_id and top.caused_by not in seen:
        top = by_id[top.caused_by]
        seen.add(top.id)
    return top


def blocks_knob(finding: Finding | None, knob: str) -> bool:
    """True when ``knob`` only treats a symptom of ``finding`` (``model.SYMPTOM_KNOBS``)."""
    return finding is not None and knob.lower() in finding.symptom_knobs


class Watcher:
    """One observation window of root-cause evidence for a PostgreSQL or MariaDB server.

    Args:
        family: "postgresql" | "mariadb" | "mysql".
        dsn: the server's DSN (the target's; read-only statistics queries).
        database: the database to probe (PostgreSQL table statistics are per database; None: the DSN's
            own). The caller chooses it: ``agenticdb.loop.rootcause_step`` (advise: the DSN's; a session:
            its workload's).
        statements: the benchmark's own statements to EXPLAIN (``[rootcause] statements``); may be empty.
        server: identity for stable finding ids (default: the DSN without credentials is not needed —
            the caller passes the target identity).
    """

    def __init__(
        self, family: str, dsn: str, database: str | None, statements: list[str] | None = None, server: str = ""
    ) -> None:
        self.family = "postgresql" if "postgres" in family.lower() else "mariadb"
        self.dsn, self.database = dsn, database
        self.statements = list(statements or [])
        self.server = server or f"{self.family}:{database or ''}"
        self._watch: Any = None
        self.started = time.monotonic()

    def start(self) -> Watcher:
        """Take the counters before the window and start sampling lock waits. Never raises: a server
        that cannot be read gives a window without counters (logged)."""
        self.started = time.monotonic()
        if self.family == "postgresql":
            from agenticdb.rootcause.pg_read import watch  # lazy: psycopg only for PostgreSQL targets

            self._watch = watch(self.dsn, self.database).start()
        else:
            from agenticdb.rootcause.my_read import watch as my_watch  # lazy: PyMySQL only for MariaDB

            self._watch = my_watch(self.dsn, self.database).start()
        return self

    def stop(self) -> None:
        """Stop sampling without detecting (the window was cut short)."""
        if self._watch is not None:
            self._watch.stop()

    def finish(self) -> RootCauses:
        """Stop sampling and run every detector. Never raises: a detector that fails adds a note."""
        if self._watch is not None:
            self._watch.stop()
        if self.family == "postgresql":
            from agenticdb.rootcause.detect import detect_pg  # lazy: psycopg only for PostgreSQL targets

            rc = detect_pg(self.dsn, self.database, self._watch, self.statements, self.server)
        else:
            from agenticdb.rootcause.mariadb import detect_mariadb  # lazy: PyMySQL only for MariaDB targets

            rc = detect_mariadb(self.dsn, self.database, self._watch, self.statements, self.server)
        rc.seconds = round(time.monotonic() - self.started, 1)
        for f in rc.findings:
            f.database = f.database or rc.database  # the remedy runs where the cause was found
        weak = [f for f in rc.findings if f.score < WEAK_SCORE]
        rc.ruled_out += [
            RuledOut(cause=f.cause, reason=f"{f.summary}: score {f.score:.2f}; {f.evidence[0]}") for f in weak
        ]
        rc.findings = sorted((f for f in rc.findings if f.score >= WEAK_SCORE), key=lambda f: -f.score)
        top = dominant(rc.findings)
        log.info(
            "rootcause.detected",
            findings={f.id: f"{f.cause.value} {f.score:.2f}" for f in rc.findings},
            dominant=top.id if top else None,
            reason=top.line() if top else "no cause beyond the dominance threshold",
        )
        return rc
