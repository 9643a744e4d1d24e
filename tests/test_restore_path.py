"""One restore-and-verify path (docs/architecture.md "One restore path"), on a private PostgreSQL.

The session's revert, the daemon's reconciliation of an open intent and ``agenticdb rollback`` each put a
configuration back through ``recovery.restore_verified``: the test drives all three against one real
server and checks, for each, that the restore was verified (its ``restore.result`` line), journaled, and
that a fresh client sees the restored value.
"""

from __future__ import annotations

import io
import logging
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
import structlog
from rich.console import Console

from agenticdb.app import build_target, build_workload, open_stores
from agenticdb.cli.rollback_cmd import run_rollback
from agenticdb.config import Settings, load_config
from agenticdb.daemon import reconcile
from agenticdb.loop.session import TuningSession
from agenticdb.models import Bottleneck, Change, Proposal
from agenticdb.models.planning import PlanningContext
from agenticdb.planner.base import Planner
from agenticdb.sandbox.postgres import PostgresSandbox, PostgresSandboxInfo
from agenticdb.store.journal import Journal
from agenticdb.store.memory import MemoryBook

pytestmark = pytest.mark.usefixtures("no_opening")  # diagnosis rounds, not the opening (tests/test_race.py)


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresSandboxInfo]:
    base = Path(tempfile.mkdtemp(prefix="agenticdb-restore-"))
    base.chmod(0o755)
    sb = PostgresSandbox(base)
    info = sb.up()
    try:
        yield info
    finally:
        sb.down()


def work_mem(info: PostgresSandboxInfo) -> str:
    """What a fresh client sees."""
    with psycopg.connect(info.dsn, autocommit=True) as c:
        row = c.execute("SELECT current_setting('work_mem')").fetchone()
    assert row is not None
    return str(row[0])


def alter_work_mem(info: PostgresSandboxInfo, value: str) -> None:
    """Someone (a crashed trial, a stray tool) leaves work_mem changed."""
    with psycopg.connect(info.dsn, autocommit=True) as c:
        c.execute(f"ALTER SYSTEM SET work_mem = '{value}'")
        c.execute("SELECT pg_reload_conf()")


@contextmanager
def restores() -> Iterator[list[dict[str, Any]]]:
    """The ``restore.result`` lines ``restore_verified`` logs while the block runs (all levels captured)."""
    old = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    try:
        with structlog.testing.capture_logs() as logs:
            done: list[dict[str, Any]] = []
            yield done
            done += [e for e in logs if e["event"] == "restore.result"]
    finally:
        structlog.configure(**old)


class OneChange(Planner):
    """Our Planner interface with a fixed first proposal (the mechanics test forces its trial)."""

    name = "fixed"

    def __init__(self) -> None:
        self.calls = 0

    def propose(self, ctx: PlanningContext) -> Proposal:
        self.calls += 1
        if self.calls > 1:
            return Proposal(bottleneck=Bottleneck.unknown, changes=[], plateau=True, planner=self.name)
        return Proposal(
            bottleneck=Bottleneck.temp_spill,
            changes=[Change(name="work_mem", value="8MB", rationale="forced trial")],
            planner=self.name,
        )


def settings(info: PostgresSandboxInfo, home: Path) -> Settings:
    return load_config(
        None,
        {
            "target": info.target_config().model_dump(),
            "workload": {"kind": "pgbench", "scale": 1, "clients": 2, "threads": 1, "duration_s": 2, "warmup_s": 0},
            # Any change is a tie (min_gain 500 %): the trial is reverted whatever the noise.
            "loop": {
                "opening": False,
                "max_rounds": 1,
                "baseline_runs": 1,
                "min_pairs": 1,
                "max_pairs": 1,
                "min_gain": 5.0,
            },
            "storage": {"home": home, "memory_db": None, "journal_db": None},
        },
    )


@pytest.mark.slow
def test_revert_reconcile_and_rollback_share_one_verified_restore(pg: PostgresSandboxInfo, tmp_path: Path) -> None:
    cfg = settings(pg, tmp_path)
    journal, memory = open_stores(cfg)
    before = work_mem(pg)
    assert before != "8MB"

    # 1. The session's revert of a tie.
    target = build_target(cfg)
    session = TuningSession(cfg, target, build_workload(cfg, target), OneChange(), journal, memory)
    with restores() as done:
        result = session.run()
    target.close()
    assert result.status == "completed", result.reason
    reverted = [e for e in journal.events(result.session_id) if e.event == "reverted"]
    assert len(reverted) == 1 and reverted[0].data["to"] == "baseline"
    assert done[0]["label"] == "baseline" and done[0]["verified"] is True and done[0]["changed"] == ["work_mem"]
    assert work_mem(pg) == before

    # 2. agenticdb rollback --dbms of that session, after work_mem was left changed.
    alter_work_mem(pg, "9MB")
    out = io.StringIO()
    with restores() as done:
        code = run_rollback(cfg, True, False, result.session_id, "baseline", Console(file=out, width=200))
    assert code == 0, out.getvalue()
    assert "verified" in out.getvalue() and f"work_mem: 9MB → {before}" in out.getvalue()
    assert [(d["label"], d["verified"], d["changed"]) for d in done] == [("baseline", True, ["work_mem"])]
    rollback = [e for e in journal.events(result.session_id) if e.event == "rollback"][-1].data
    assert rollback["verified"] is True and rollback["changed"] == {"work_mem": ["9MB", before]}
    assert work_mem(pg) == before

    # 3. The daemon's reconciliation of an open intent (a crash mid-trial).
    reconcile_journal_and_check(cfg, pg, journal, memory, before)


def reconcile_journal_and_check(
    cfg: Settings, info: PostgresSandboxInfo, journal: Journal, memory: MemoryBook, before: str
) -> None:
    target = build_target(cfg)
    safe = target.snapshot(list(target.catalog().knobs), label="before the crashed trial")
    target.close()
    journal.append(
        "crashed",
        "intent",
        {"purpose": "trial", "target": "postgresql", "mode": "reload", "changes": [], "snapshot": safe.model_dump()},
        1,
    )
    alter_work_mem(info, "11MB")  # the trial in effect when the process died
    with restores() as done:
        actions = reconcile(cfg, journal, memory)
    assert len(actions) == 1 and "before the crashed trial" in actions[0]
    assert [(d["label"], d["verified"], d["changed"]) for d in done] == [
        ("before the crashed trial", True, ["work_mem"])
    ]
    rec = [e for e in journal.events("crashed") if e.event == "reconcile"]
    assert rec and rec[0].data["verified"] is True
    assert not [i for i in journal.open_intents() if i.session_id == "crashed"]
    assert work_mem(info) == before
