"""Rival owners: a DBA changes a knob while a session runs; agenticdb leaves it alone, journals it and
excludes it for the rest of the session — also at the final apply (private PostgreSQL, real session)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from agenticdb.app import build_session, build_target, build_workload, open_stores
from agenticdb.config import load_config
from agenticdb.models import RoundOutcome
from agenticdb.sandbox.postgres import PostgresSandbox, PostgresSandboxInfo

pytestmark = pytest.mark.usefixtures("no_opening")  # diagnosis rounds, not the opening (tests/test_race.py)


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresSandboxInfo]:
    base = Path(tempfile.mkdtemp(prefix="agenticdb-rival-"))
    base.chmod(0o755)
    sb = PostgresSandbox(base)
    info = sb.up()
    try:
        yield info
    finally:
        sb.down()


@pytest.mark.slow
def test_knob_changed_by_a_dba_mid_session_is_left_alone(pg: PostgresSandboxInfo, tmp_path: Path) -> None:
    cfg = load_config(
        None,
        {
            "target": pg.target_config().model_dump(),
            "workload": {
                "kind": "pgbench",
                "scale": 1,
                "clients": 2,
                "threads": 1,
                "duration_s": 2,
                "warmup_s": 0,
            },
            "loop": {
                "opening": False,
                "max_rounds": 3,
                "baseline_runs": 1,
                "min_pairs": 1,
                "max_pairs": 1,
                "plateau_rounds": 5,
            },
            "storage": {"home": tmp_path, "memory_db": None, "journal_db": None},
        },
    )
    journal, memory = open_stores(cfg)
    target = build_target(cfg)
    workload = build_workload(cfg, target)

    def dba_changes_a_knob(outcome: RoundOutcome) -> None:
        if outcome.round_no == 1:
            with psycopg.connect(pg.dsn, autocommit=True) as c:
                c.execute("ALTER SYSTEM SET autovacuum_naptime = '17s'")
                c.execute("SELECT pg_reload_conf()")

    session = build_session(cfg, target, workload, journal, memory, on_round=dba_changes_a_knob)
    result = session.run()
    assert result.status == "completed", result.reason

    rivals = [e for e in journal.events(result.session_id) if e.event == "rival.detected"]
    assert [e.data["parameter"] for e in rivals] == ["autovacuum_naptime"]
    assert rivals[0].data["live_value"] == "17s"
    assert "autovacuum_naptime" not in result.best_changes
    # The final apply kept the DBA's value instead of restoring agenticdb's snapshot over it.
    with psycopg.connect(pg.dsn, autocommit=True) as c:
        row = c.execute("SELECT current_setting('autovacuum_naptime')").fetchone()
    assert row is not None and row[0] == "17s"
    # No later round proposed the knob someone else owns now.
    later = [r for r in result.rounds if r.round_no > 1]
    assert all("autovacuum_naptime" not in r.changes for r in later)
