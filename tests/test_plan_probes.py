"""Index probes counted from the plans of a real private PostgreSQL 15 (``postgres_plans.index_probes``), the
figure behind the opening's effective_cache_size rule for probes beyond shared buffers (``opening_cache.probe_cache``).

The opening reads plain EXPLAIN (nothing executed): a nested loop's probes are then its outer side's estimated
rows. That counted 600,000 probes for a Memoize that probed its index 97 times (one per distinct key) and for a
Materialize whose index scan ran once, and 8,824 for a parallel loop that probed 15,000 times (the outer rows of
a partial plan are per process).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from agenticdb.sandbox.postgres import PostgresSandboxInfo
from agenticdb.targets.postgres_plans import PROBE_LOOPS, explain_statements, index_probes

DB = "plan_probes"
NO_HASH = ("SET enable_hashjoin = off", "SET enable_mergejoin = off")
SERIAL = (*NO_HASH, "SET max_parallel_workers_per_gather = 0")


@pytest.fixture(scope="module")
def probe_db(pg_sandbox: PostgresSandboxInfo) -> Iterator[psycopg.Connection[Any]]:
    base = pg_sandbox.dsn.rsplit("/", 1)[0]
    with psycopg.connect(pg_sandbox.dsn, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DB}")
        admin.execute(f"CREATE DATABASE {DB}")
    try:
        with psycopg.connect(f"{base}/{DB}", autocommit=True) as db:
            db.execute("CREATE TABLE o AS SELECT g AS id, g % 10 AS k FROM generate_series(1, 30000) g")
            db.execute(
                "CREATE TABLE l AS SELECT g AS id, g % 30000 + 1 AS o_id, g % 97 AS v FROM generate_series(1, 180000) g"
            )
            db.execute("CREATE INDEX l_o_id ON l (o_id)")
            db.execute("CREATE INDEX o_id ON o (id)")
            db.execute("ANALYZE o")
            db.execute("ANALYZE l")
            yield db
    finally:
        with psycopg.connect(pg_sandbox.dsn, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {DB}")


def _types(node: dict[str, Any]) -> set[str]:
    return {node["Node Type"]}.union(*(_types(c) for c in node.get("Plans") or []))


def _probes(
    db: psycopg.Connection[Any], settings: tuple[str, ...], sql: str
) -> tuple[set[str], float, float, tuple[str, ...]]:
    """(node types of the plan, probes counted from plain EXPLAIN, from EXPLAIN ANALYZE, the statements
    explain_statements counts as probing from plain EXPLAIN) under the session ``settings``."""
    db.execute("RESET ALL")
    for s in settings:
        db.execute(s)  # type: ignore[arg-type]
    try:
        plain = db.execute(f"EXPLAIN (FORMAT JSON) {sql}").fetchone()[0][0]  # type: ignore[index]
        run = db.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}").fetchone()[0][0]  # type: ignore[index]
        ev = explain_statements(db, {"q": sql}, analyze=False, weights_ms={"q": 1000.0})
    finally:
        db.execute("RESET ALL")
    return _types(plain["Plan"]), index_probes(plain["Plan"]), index_probes(run["Plan"]), ev.probe_planned


def test_a_memoized_or_materialized_inner_index_is_not_probed_per_outer_row(probe_db: psycopg.Connection[Any]) -> None:
    # 180,000 rows of l join o on 97 distinct keys: the Memoize probes o's index once per key
    types, plain, run, probing = _probes(probe_db, SERIAL, "SELECT count(*) FROM l JOIN o ON o.id = l.v + 1")
    assert {"Memoize", "Nested Loop"} <= types, types
    assert run < 100, run
    assert plain < PROBE_LOOPS and probing == (), (plain, probing)
    # a join on an inequality: the 49 rows of o's index scan are read once and kept by a Materialize
    sql = "SELECT count(*) FROM l JOIN o ON l.v < o.k WHERE o.id < 50"
    types, plain, run, probing = _probes(probe_db, (*SERIAL, "SET enable_memoize = off"), sql)
    assert {"Materialize", "Nested Loop"} <= types, types
    assert plain == run == 0.0 and probing == (), (plain, run, probing)


def test_a_parallel_loop_counts_the_probes_of_every_process(probe_db: psycopg.Connection[Any]) -> None:
    parallel = (
        *NO_HASH,
        "SET parallel_setup_cost = 0",
        "SET parallel_tuple_cost = 0",
        "SET min_parallel_table_scan_size = 0",
        "SET min_parallel_index_scan_size = 0",
        "SET max_parallel_workers_per_gather = 1",
    )
    sql = "SELECT count(*), sum(l.v) FROM o JOIN l ON l.o_id = o.id WHERE o.id <= 15000"
    types, plain, run, probing = _probes(probe_db, parallel, sql)
    assert {"Gather", "Nested Loop"} <= types, types
    assert run == 15000, run
    assert plain == pytest.approx(run, rel=0.1), plain  # 15,000 / 1.7 per process on the old count
    assert probing == ("q",)
