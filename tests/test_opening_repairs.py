"""Every opening candidate carries the playbook's floors and traps (planner/opening_repairs.py): a whole
configuration that keeps a known harmful setting would lose its screen to the fault, not to its sizing.
Real private PostgreSQL 15 with two traps set server-wide, put back in ``finally``."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from openingctx import context_of

from agenticdb.config.sections import PolicyConfig
from agenticdb.planner.opening import generate_opening
from agenticdb.planner.opening_repairs import Repair, with_repairs
from agenticdb.planner.opening_types import Candidate
from agenticdb.sandbox.postgres import PostgresSandboxInfo
from agenticdb.targets.postgres import PostgresTarget

GiB = 1024**3
TRAPS = {"enable_indexscan": "off", "commit_delay": "100000"}


@pytest.fixture()
def trapped(pg_sandbox: PostgresSandboxInfo) -> Iterator[PostgresTarget]:
    with psycopg.connect(pg_sandbox.dsn, autocommit=True) as c:
        for k, v in TRAPS.items():
            c.execute(f"ALTER SYSTEM SET {k} = '{v}'")
        c.execute("SELECT pg_reload_conf()")
    t = PostgresTarget(pg_sandbox.dsn, None, data_dir=pg_sandbox.data_dir)
    try:
        yield t
    finally:
        t.close()
        with psycopg.connect(pg_sandbox.dsn, autocommit=True) as c:
            for k in TRAPS:
                c.execute(f"ALTER SYSTEM RESET {k}")
            c.execute("SELECT pg_reload_conf()")


def test_every_candidate_puts_the_traps_back(trapped: PostgresTarget) -> None:
    ctx = context_of(trapped, workload_class="oltp", memory=4 * GiB)
    assert ctx.profile.current_config["enable_indexscan"] == "off"  # the trap is in effect
    opening = generate_opening(ctx, policy=PolicyConfig())
    assert opening.candidates
    for c in opening.candidates:
        assert c.changes.get("enable_indexscan") == "on", (c.name, c.changes)
        assert c.changes.get("commit_delay") == "0", (c.name, c.changes)
        assert "playbook floor (trap put back)" in c.sources["enable_indexscan"], c.sources
        assert "enable_indexscan off → on" in c.rationale


def test_a_candidates_own_value_wins_over_a_repair() -> None:
    cand = Candidate(name="llm", changes={"work_mem": "64MB"}, rationale="r.", sources={"work_mem": "LLM"})
    reps = [
        Repair("work_mem", "4MB", "64kB", "floor", trap=False),
        Repair("enable_nestloop", "on", "off", "trap", trap=True),
    ]
    got = with_repairs(cand, reps)
    assert got.changes == {"work_mem": "64MB", "enable_nestloop": "on"}
    assert got.sources["work_mem"] == "LLM"
    assert with_repairs(cand, reps[:1]) is cand  # nothing added: the same candidate
