"""Plan evidence of the session's own workload for the opening (issue 36 point 4): the plans of the workload's
statements, read once after the baseline and outside any measured run, in the workload's own database.

By default the plans are only planned (``EXPLAIN (FORMAT JSON)``: milliseconds, nothing executed) and weighted by
the baseline's measured per-statement times, which gives the share of the time in parallel plans and in plans
that JIT-compile; ``analyze=True`` executes them once (``EXPLAIN ANALYZE``: a whole query set's time, ~60 s for
TPC-H SF 1 here) and also measures JIT compile time of the leader and its workers.
"""

from __future__ import annotations

import statistics

import psycopg

from agenticdb.models import PlanningContext
from agenticdb.targets.postgres_plans import PlanEvidence, explain_statements
from agenticdb.units import family_of
from agenticdb.workloads.base import WorkloadError
from agenticdb.workloads.common import connect, is_postgres


def baseline_query_ms(ctx: PlanningContext) -> dict[str, float]:
    """The median time in ms of each statement over the baseline runs (``Measurement.per_query_s``)."""
    times: dict[str, list[float]] = {}
    for m in ctx.profile.baseline:
        for q, s in m.per_query_s.items():
            times.setdefault(q, []).append(s * 1000.0)
    return {q: statistics.median(v) for q, v in times.items()}


def workload_plans(
    ctx: PlanningContext, workload: object, *, analyze: bool = False, timeout_s: float = 60.0
) -> tuple[PlanEvidence | None, str]:
    """The plan evidence of ``workload``'s statements (a query-set workload with ``queries()`` and a PostgreSQL
    ``conn``), or (None, why not).

    Never raises: a workload without a statement set (pgbench, sysbench: their evidence is pg_stat_statements),
    another DBMS, or a connection error gives None and the reason, which the opening journals.
    """
    if family_of(ctx.catalog.target) != "postgresql":
        return None, f"plan evidence is read on PostgreSQL only (target {ctx.catalog.target})"
    queries = getattr(workload, "queries", None)
    conn = getattr(workload, "conn", None)
    if not callable(queries) or conn is None or not is_postgres(conn):
        return None, "the workload has no statement set to explain (its evidence is pg_stat_statements)"
    weights = baseline_query_ms(ctx)
    if not analyze and not weights:
        return None, "no per-statement baseline times to weight the plans with"
    try:
        statements = dict(queries())
        with connect(conn) as db:
            return explain_statements(db, statements, timeout_s, analyze=analyze, weights_ms=weights), ""
    except (WorkloadError, psycopg.Error, OSError) as exc:
        return None, f"{type(exc).__name__}: {str(exc).strip()[:200]}"
