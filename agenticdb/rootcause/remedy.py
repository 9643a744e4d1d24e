"""Running one approved remedy and proving it worked (issue 40).

Only remedies marked ``automatic`` run — ANALYZE, plain VACUUM, CREATE INDEX CONCURRENTLY (PostgreSQL),
ANALYZE TABLE and online ADD INDEX (MariaDB): non-destructive and low-lock. Terminating a session,
VACUUM FULL or DDL that blocks writes are refused here; they stay advice with their lock impact.

They run through ``[remediation] dsn``, the tables' owner: on PostgreSQL 15 ANALYZE, VACUUM and CREATE
INDEX need the owner or a superuser (manual: ANALYZE "To analyze a table, one must ordinarily be the
table's owner or a superuser"; CREATE INDEX needs the table's owner), which the tuning role is not.

The record says what was run, the plans of the workload's statements before and after (the symptom
check: the plan changed / the index is used), the table counters before and after, and whether the
symptom is gone.
"""

from __future__ import annotations

import re
import time
from typing import Any

import structlog

from agenticdb.rootcause.model import Finding, Remedy
from agenticdb.units.text import clip

log = structlog.get_logger(__name__)

ALLOWED = re.compile(
    r"^(?!.*\bFULL\b)(?!.*;)\s*(ANALYZE\b|VACUUM\b|CREATE INDEX CONCURRENTLY\b|"
    r"ALTER TABLE\s+\S+\s+ADD INDEX\b.*LOCK=NONE\s*$)",
    re.I | re.S,
)
"""Statements agenticdb may run after approval (anything else is refused even if marked automatic)."""


class RemedyError(ValueError):
    """A remedy that agenticdb does not run (destructive, blocking, or no remediation DSN); the message
    names the statement and the rule."""


def check_runnable(remedy: Remedy, dsn: str | None) -> None:
    """Raise RemedyError unless ``remedy`` may run through ``dsn``.

    Raises:
        RemedyError: no ``[remediation] dsn``; the remedy is advice only; the statement is not one of
            the non-destructive low-lock kinds (``ALLOWED``).
    """
    if not dsn:
        raise RemedyError(
            f"remedy {remedy.sql!r}: [remediation] dsn is not set (the tables' owner runs it); advice only"
        )
    if not remedy.automatic:
        raise RemedyError(f"remedy {remedy.sql!r} is advised only: {remedy.lock_impact}")
    if not ALLOWED.match(remedy.sql):
        raise RemedyError(
            f"remedy {remedy.sql!r}: only ANALYZE, plain VACUUM, CREATE INDEX CONCURRENTLY and online ADD INDEX run"
        )


def _pg(dsn: str, database: str | None, remedy: Remedy, statements: list[str]) -> dict[str, Any]:
    import psycopg  # lazy: PostgreSQL only

    from agenticdb.rootcause import pg_read as rd  # lazy: psycopg only for PostgreSQL

    def state(conn: psycopg.Connection[Any]) -> dict[str, Any]:
        plans = {}
        for s in statements:
            try:
                plans[s] = rd.plan_of(conn, s)
            except psycopg.Error as exc:
                plans[s] = f"EXPLAIN failed: {clip(exc, 120)}"
        counters = {}
        if remedy.table:
            row = conn.execute(
                "SELECT n_mod_since_analyze, n_dead_tup, seq_scan, coalesce(idx_scan, 0) FROM pg_stat_user_tables "
                "WHERE relid = %s::regclass",
                (remedy.table,),
            ).fetchone()
            if row is not None:
                counters = dict(zip(("n_mod_since_analyze", "n_dead_tup", "seq_scan", "idx_scan"), row, strict=True))
        return {"plans": plans, "counters": counters}

    with rd.connect(dsn, database) as conn:
        before = state(conn)
        notices: list[str] = []
        conn.add_notice_handler(lambda d: notices.append(str(d.message_primary)))
        result = "done"
        try:
            conn.execute(remedy.sql)  # built from quoted identifiers (pg.py)
        except psycopg.Error as exc:
            result = f"failed: {clip(exc, 200)}"
            invalid = _drop_invalid_index(conn, remedy)
            if invalid:
                result += f"; {invalid}"
        after = state(conn)
    return {"before": before, "after": after, "result": result, "server_messages": notices[-6:]}


def _drop_invalid_index(conn: Any, remedy: Remedy) -> str:
    """After a failed CREATE INDEX CONCURRENTLY: drop the index it left INVALID (manual, CREATE INDEX
    "Building Indexes Concurrently": the failed build leaves an invalid index to drop)."""
    m = re.search(r'CREATE INDEX CONCURRENTLY\s+("?[\w]+"?)', remedy.sql, re.I)
    if not m:
        return ""
    name = m.group(1).strip('"')
    row = conn.execute("SELECT NOT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", (name,)).fetchone()
    if row and row[0]:
        conn.execute(f'DROP INDEX CONCURRENTLY "{name}"')
        return f"invalid index {name} dropped again (DROP INDEX CONCURRENTLY)"
    return ""


def _my(dsn: str, database: str | None, remedy: Remedy, statements: list[str]) -> dict[str, Any]:
    import pymysql  # lazy: MariaDB only

    from agenticdb.rootcause import my_read as rd  # lazy: PyMySQL only for MariaDB

    def state(conn: Any) -> dict[str, Any]:
        plans = {}
        for s in statements:
            try:
                plans[s] = rd.plan_of(conn, s)
            except pymysql.MySQLError as exc:
                plans[s] = f"EXPLAIN failed: {exc}"
        return {"plans": plans}

    conn = rd.connect(dsn, database)
    try:
        before = state(conn)
        result = "done"
        try:
            with conn.cursor() as cur:
                cur.execute(remedy.sql)
                cur.fetchall()
        except pymysql.MySQLError as exc:
            result = f"failed: {exc}"
        after = state(conn)
    finally:
        conn.close()
    return {"before": before, "after": after, "result": result}


def run_remedy(
    finding: Finding, remedy: Remedy, dsn: str | None, database: str | None, statements: list[str]
) -> dict[str, Any]:
    """Run one approved ``remedy`` of ``finding`` through the remediation ``dsn`` and verify it.

    Returns the journal record: finding id, cause, sql, result ("done" | "failed: …"), before/after
    plans of ``statements`` and table counters, ``plan_changed``, ``verified`` and ``seconds``.

    Raises:
        RemedyError: the remedy may not run (see :func:`check_runnable`).
    """
    check_runnable(remedy, dsn)
    assert dsn is not None
    t0 = time.monotonic()
    run = _pg if finding.family == "postgresql" else _my
    rec = run(dsn, database, remedy, statements)
    changed = [s for s in statements if rec["before"]["plans"].get(s) != rec["after"]["plans"].get(s)]
    counters_after = rec["after"].get("counters", {})
    fixed_counters = (
        counters_after.get("n_mod_since_analyze") == 0 if finding.cause.value == "stale_statistics" else None
    )
    verified = rec["result"] == "done" and (bool(changed) or bool(fixed_counters))
    rec.update(
        finding=finding.id,
        cause=finding.cause.value,
        subject=finding.subject,
        sql=remedy.sql,
        lock_impact=remedy.lock_impact,
        plan_changed=changed,
        verified=verified,
        verify=remedy.verify,
        seconds=round(time.monotonic() - t0, 2),
    )
    log.info(
        "rootcause.remedied",
        finding=finding.id,
        sql=remedy.sql,
        result=rec["result"],
        verified=verified,
        reason=f"plans changed: {len(changed)} of {len(statements)}" if statements else "counters checked",
    )
    return rec
