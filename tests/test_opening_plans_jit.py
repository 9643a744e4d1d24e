"""The JIT sample of the plan evidence takes the LLVM-optimising plans too (issue 36 point 4), on a real private
PostgreSQL 15: cheapest-first alone sampled only plain compiles on pg-tpch and missed Q18's 3.3-s optimised
compile (benchmarks/README.md, 2026-12-07)."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from openingctx import context_of

from agenticdb.models import Measurement
from agenticdb.models.planning import PlanningContext
from agenticdb.planner.opening_plans import workload_plans
from agenticdb.sandbox.postgres import PostgresSandboxInfo
from agenticdb.targets.postgres import PostgresTarget
from agenticdb.workloads.base import Connection
from agenticdb.workloads.common import ensure_database
from agenticdb.workloads.registry import connection_from_dsn

DB = "opening_plans_jit"
# Every plan JIT-compiles; only plans above cost 10,000 (the big table's scan) inline and optimise.
SETTINGS = {
    "jit": "on",
    "jit_above_cost": "0",
    "jit_inline_above_cost": "10000",
    "jit_optimize_above_cost": "10000",
    "max_parallel_workers_per_gather": "0",
}
STATEMENTS = {
    "small1": "SELECT sum(x) FROM small WHERE x % 3 = 1",
    "small2": "SELECT avg(x) FROM small WHERE x % 5 = 1",
    "small3": "SELECT max(x) FROM small WHERE x % 7 = 1",
    "big": "SELECT sum(x * 2), avg(x) FROM big WHERE x % 3 = 1",
}


class _QuerySet:
    """A query-set workload's two parts the plan reader uses: its statements and its connection."""

    def __init__(self, conn: Connection, statements: dict[str, str] | None = None) -> None:
        self.conn = conn
        self.statements = dict(statements or STATEMENTS)

    def queries(self) -> dict[str, str]:
        return dict(self.statements)


@pytest.fixture()
def jit_db(pg_sandbox: PostgresSandboxInfo) -> Iterator[Connection]:
    """The database ``DB`` with a small and a big table, where every plan JIT-compiles (``SETTINGS``)."""
    conn = connection_from_dsn("postgresql", pg_sandbox.dsn, DB)
    ensure_database(conn)
    try:
        with psycopg.connect(pg_sandbox.dsn.rsplit("/", 1)[0] + "/" + DB, autocommit=True) as db:
            db.execute("CREATE TABLE small AS SELECT g AS x FROM generate_series(1, 1000) g")
            db.execute("CREATE TABLE big AS SELECT g AS x FROM generate_series(1, 2000000) g")
            db.execute("ANALYZE small")
            db.execute("ANALYZE big")
            for name, value in SETTINGS.items():
                db.execute(f"ALTER DATABASE {DB} SET {name} = {value}")  # type: ignore[arg-type]
        yield conn
    finally:
        with psycopg.connect(pg_sandbox.dsn, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {DB}")


def _with_baseline(ctx: PlanningContext, per_query_s: dict[str, float]) -> PlanningContext:
    """``ctx`` whose baseline is one run with these per-statement times (seconds: the sample's weights)."""
    run = Measurement(workload="tpch", objective=sum(per_query_s.values()), per_query_s=per_query_s)
    return ctx.model_copy(update={"profile": ctx.profile.model_copy(update={"baseline": [run]})})


def test_the_jit_sample_takes_an_optimised_plan_that_cheapest_first_would_leave_out(
    pg: PostgresTarget, jit_db: Connection
) -> None:
    ctx = context_of(pg, workload_class="olap")
    # The baseline's times (ms as weights): three cheap plain compiles of 1 s each and the optimised 3-s one.
    # A 4.5-s budget filled cheapest first takes the three plain ones and leaves the optimised plan out.
    ctx = _with_baseline(ctx, {"small1": 1.0, "small2": 1.0, "small3": 1.0, "big": 3.0})
    plans, why = workload_plans(ctx, _QuerySet(jit_db), jit_budget_s=4.5)
    assert plans is not None, why
    assert plans.jit_optimized == ("big",), plans
    assert set(plans.jit_planned) == set(STATEMENTS), plans
    # one of each class: the optimised plan and the cheapest plain one (4 s), not three plain ones
    assert plans.analyzed and plans.jit_sampled == 2, plans
    assert plans.jit_share is not None and plans.jit_share > 0, plans
    assert "1 with LLVM optimisation" in plans.summary(), plans.summary()
    assert plans.jit_borrowed == "" and "taken from" not in plans.summary(), plans.summary()


def test_an_optimised_class_whose_sample_timed_out_takes_the_plain_share_not_nothing(
    pg: PostgresTarget, jit_db: Connection
) -> None:
    # The optimised plan sleeps past the sample's timeout (EXPLAIN ANALYZE executes it; plain EXPLAIN does not).
    # Its class then has no share of its own: as a class the budget left out, it takes the plain one (a lower
    # bound). Before, it counted nothing: 0.1 s of plain statements' compile share over 3.3 s, ≤ 9 % whatever
    # the share, where the plain share (a 1000-row scan: mostly its compile) applies to the whole 3.3 s.
    statements = {**STATEMENTS, "big": "SELECT sum(x * 2), avg(x) FROM big, pg_sleep(5) WHERE x % 3 = 1"}
    ctx = _with_baseline(
        context_of(pg, workload_class="olap"), {"small1": 0.1, "small2": 0.1, "small3": 0.1, "big": 3.0}
    )
    plans, why = workload_plans(ctx, _QuerySet(jit_db, statements), timeout_s=2.0, jit_budget_s=3.5)
    assert plans is not None, why
    assert plans.jit_optimized == ("big",), plans
    assert plans.jit_sampled == 3, plans  # the three plain ones; the optimised one timed out
    assert plans.jit_share is not None and plans.jit_share > 0.1, plans
    assert plans.jit_borrowed == "optimised", plans
    assert plans.summary().endswith("their compile share taken from the plain ones, a lower bound"), plans.summary()
