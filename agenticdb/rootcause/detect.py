"""One PostgreSQL detection pass: read the server after the window, run every detector (issue 40)."""

from __future__ import annotations

import psycopg
import structlog

from agenticdb.dialect import dsn_location
from agenticdb.host import pgss
from agenticdb.rootcause import pg
from agenticdb.rootcause import pg_read as rd
from agenticdb.rootcause.model import RootCauses, t
from agenticdb.units.text import clip

log = structlog.get_logger(__name__)


def detect_pg(
    dsn: str, database: str | None, watch: rd.PgWatch | None, statements: list[str], server: str
) -> RootCauses:
    """Every PostgreSQL detector over the window of ``watch`` (None: cumulative counters, no lock samples),
    in ``database`` (None: the DSN's own; ``RootCauses.database`` names the one read).

    Never raises: an unreadable server gives an empty result with a note naming the error.
    """
    out = RootCauses(family=pg.FAMILY, database=database or dsn_location(dsn)[2])
    try:
        with rd.connect(dsn, database) as conn:
            out.database = rd.current_database(conn)
            after = rd.snapshot(conn)
            w = pg._Window(watch.before if watch is not None else None, after)
            plans = rd.explain_statements(conn, statements, t("explain_timeout_s")) if statements else rd.PlanEvidence()
            if statements:
                out.notes.append(
                    f"plan evidence: EXPLAIN ANALYZE of {plans.explained} of {len(statements)} benchmark statement(s)"
                    + (f" ({len(plans.problems)} not explained: {'; '.join(plans.problems)})" if plans.problems else "")
                )
            else:
                out.notes.append("plan evidence: none ([rootcause] statements not given); table counters only")
            tops = rd.top_statements(conn)
            why = "" if tops else pgss.unreadable(conn) or f"no statement recorded in database {conn.info.dbname}"
            out.notes.append(
                f"pg_stat_statements: {len(tops)} top statement(s) read"
                if tops
                else f"pg_stat_statements not measured: {why}"
            )
            hold = rd.holders(conn)
            samples = (watch.samples if watch is not None else []) or [rd.lock_sample(conn)]
            pg.stale_statistics(w, plans, server, out)
            pg.missing_index(conn, w, plans, tops, server, out)
            pg.vacuum_held_back(w, hold, server, out)
            pg.lock_chains(samples, hold, server, out, w)
            pg.link_chains(out)
            out.notes.append(f"counters {w.label}; {len(samples)} lock sample(s)")
    except psycopg.Error as exc:
        out.notes.append(f"root causes not read: {clip(exc, 200)}")
        log.warning("rootcause.unreadable", error=str(exc)[:200], reason="no root-cause evidence this window")
    return out
