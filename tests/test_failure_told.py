"""Failures told in full (issue 17, item 7) on a real private PostgreSQL 15.

A value the server refuses only at its next start (``min_wal_size`` below twice ``wal_segment_size``) is
forced past the validator — the validator refuses it since issue 17's server checks, so the test
replaces the validator's verdict with an accepting one: the only way such a value reaches the executor
is a validator gap, which is what this safety net is for. The checks: the journal holds failure →
recovery → session end, the error the user sees carries the server's own FATAL line, and the server is
up again with its previous configuration.

The module has its own sandbox: these tests break its configuration on purpose.
"""

from __future__ import annotations

import io
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from rich.console import Console

from agenticdb.app import build_target, build_workload, open_stores
from agenticdb.config import Settings
from agenticdb.config.loop_section import LoopConfig
from agenticdb.config.sections import StorageConfig, WorkloadConfig
from agenticdb.loop.session import TuningSession
from agenticdb.models import ApplyMode, Bottleneck, Catalog, Change, NormalizedChange, Proposal, Verdict
from agenticdb.models.planning import PlanningContext
from agenticdb.planner.base import Planner
from agenticdb.sandbox.mariadb import MariaDBSandbox, MariaDBSandboxInfo
from agenticdb.sandbox.postgres import PostgresSandbox, PostgresSandboxInfo
from agenticdb.store.journal import Journal
from agenticdb.targets.mysql import MySQLTarget

pytestmark = pytest.mark.usefixtures("no_opening")  # diagnosis rounds, not the opening (tests/test_race.py)

REASON = 'FATAL: "min_wal_size" must be at least twice "wal_segment_size"'
BAD = NormalizedChange(name="min_wal_size", value="20MB", base_value=20, unit="MB", apply=ApplyMode.restart)


@pytest.fixture(scope="module")
def info() -> Iterator[PostgresSandboxInfo]:
    base = Path(tempfile.mkdtemp(prefix="agenticdb-failtold-"))
    base.chmod(0o755)
    sandbox = PostgresSandbox(base)
    i = sandbox.up()
    try:
        yield i
    finally:
        sandbox.down()
        shutil.rmtree(base, ignore_errors=True)


def _settings(home: Path, info: PostgresSandboxInfo, **loop: Any) -> Settings:
    return Settings(
        target=info.target_config(),
        workload=WorkloadConfig(kind="pgbench", scale=1, clients=2, threads=1, duration_s=2, warmup_s=0),
        loop=LoopConfig(**{"opening": False, "max_rounds": 1, "baseline_runs": 2, "max_pairs": 2, **loop}),
        storage=StorageConfig(home=home),
    )


def _forced(*args: Any, **kwargs: Any) -> Verdict:
    """The validator with a gap: it accepts the value the server refuses at its next start."""
    return Verdict(ok=True, changes=[BAD], apply_requirement=ApplyMode.restart)


def _min_wal_size(info: PostgresSandboxInfo) -> str:
    with psycopg.connect(info.dsn, autocommit=True, connect_timeout=5) as c:
        row = c.execute("SELECT current_setting('min_wal_size')").fetchone()
        assert row is not None
        return str(row[0])


def _kinds(journal: Journal, session_id: str) -> list[str]:
    return [e.event for e in journal.events(session_id)]


def test_failed_start_from_is_journaled_and_told_with_the_servers_reason(
    tmp_path: Path, info: PostgresSandboxInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agenticdb.cli.tune_cmd import run_tune

    monkeypatch.setattr("agenticdb.loop.initializer.validate", _forced)
    before = _min_wal_size(info)
    out = io.StringIO()
    code = run_tune(_settings(tmp_path, info), Console(file=out, width=400), {"min_wal_size": "20MB"})
    printed = out.getvalue()

    assert code == 1, printed
    assert "Traceback" not in printed
    error = [ln for ln in printed.splitlines() if ln.startswith("error:")]
    assert len(error) == 1 and REASON in error[0], printed
    assert "configuration before it is back and verified" in error[0]

    journal = Journal(tmp_path / "journal.db", read_only=True)
    (session,) = journal.sessions()
    assert session.status == "failed"
    kinds = _kinds(journal, session.id)
    assert kinds[kinds.index("intent") :] == ["intent", "failure", "recovery", "intent.closed", "session.end"], kinds
    events = {e.event: e for e in journal.events(session.id)}
    assert events["failure"].data["phase"] == "restart"
    assert events["failure"].data["server_reason"] == REASON
    assert events["recovery"].data["action"] == "restored" and events["recovery"].data["verified"]
    assert REASON in events["session.end"].data["reason"]
    assert journal.open_intents() == []
    # the server is up on its previous configuration
    assert _min_wal_size(info) == before
    assert "min_wal_size" not in (Path(info.data_dir) / "postgresql.auto.conf").read_text()


class _BadPlanner(Planner):
    """Proposes the change the server refuses at its next start once, then reports a plateau."""

    name = "bad-restart"

    def propose(self, ctx: PlanningContext) -> Proposal:
        if ctx.rounds:
            return Proposal(
                bottleneck=Bottleneck.unknown, changes=[], plateau=True, planner=self.name, rationale="done"
            )
        return Proposal(
            bottleneck=Bottleneck.io_queue,
            changes=[Change(name="min_wal_size", value="20MB")],
            planner=self.name,
            rationale="forced past the validator",
        )


def test_failed_trial_restart_is_journaled_recovered_and_in_the_summary(
    tmp_path: Path, info: PostgresSandboxInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("agenticdb.loop.session.check", _forced)
    before = _min_wal_size(info)
    cfg = _settings(tmp_path, info)
    journal, memory = open_stores(cfg)
    target = build_target(cfg)
    try:
        session = TuningSession(cfg, target, build_workload(cfg, target), _BadPlanner(), journal, memory)
        result = session.run()
    finally:
        target.close()
    assert result.status == "completed" and result.best_changes == {}
    told = [w for w in result.warnings if "round 1 failed in restart" in w]
    assert len(told) == 1 and REASON in told[0] and told[0].endswith("recovery restored"), result.warnings
    assert result.rounds[0].failure is not None and result.rounds[0].failure.server_reason == REASON

    kinds = _kinds(journal, session.session_id)
    i = kinds.index("failure")
    assert kinds[i : i + 3] == ["failure", "recovery", "intent.closed"], kinds
    assert kinds[-1] == "session.end"
    assert journal.open_intents() == []
    assert _min_wal_size(info) == before


# ------------------------------------------------------------------------------------------- MariaDB
MY_REASON = "[ERROR] /usr/sbin/mariadbd: unknown variable 'sql_buffer_result=ON'"


@pytest.fixture(scope="module")
def maria() -> Iterator[MariaDBSandboxInfo]:
    base = Path(tempfile.mkdtemp(prefix="agenticdb-failtold-maria-"))
    base.chmod(0o755)
    sandbox = MariaDBSandbox(base)
    i = sandbox.up()
    try:
        yield i
    finally:
        sandbox.down()
        shutil.rmtree(base, ignore_errors=True)


def test_mariadb_unknown_variable_in_the_option_file_is_told_and_recovered(
    tmp_path: Path, maria: MariaDBSandboxInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stale option-form list (the gap issue 17 item 2 closes) lets a runtime-only variable reach the
    managed option file: the restart aborts with 'unknown variable'; the error says so, the journal
    holds failure → recovery → session end, and the server is back with the option file as before."""
    from agenticdb.cli.tune_cmd import run_tune

    real_catalog = MySQLTarget.catalog

    def stale_catalog(self: MySQLTarget) -> Catalog:
        cat = real_catalog(self)
        knob = cat.knobs["sql_buffer_result"].model_copy(update={"option_file": True, "apply": ApplyMode.restart})
        return cat.model_copy(update={"knobs": {**cat.knobs, "sql_buffer_result": knob}})

    bad = NormalizedChange(name="sql_buffer_result", value="ON", apply=ApplyMode.restart)
    monkeypatch.setattr(MySQLTarget, "catalog", stale_catalog)
    monkeypatch.setattr(
        "agenticdb.loop.initializer.validate",
        lambda *a, **k: Verdict(ok=True, changes=[bad], apply_requirement=ApplyMode.restart),
    )
    tcfg = maria.target_config()
    option_file = Path(tcfg.option_file or "")
    before_file = option_file.read_text()
    cfg = Settings(
        target=tcfg,
        workload=WorkloadConfig(kind="sysbench-oltp-read-write", scale=1000, tables=1, clients=2, duration_s=2),
        loop=LoopConfig(opening=False, max_rounds=1, baseline_runs=2),
        storage=StorageConfig(home=tmp_path),
    )
    out = io.StringIO()
    code = run_tune(cfg, Console(file=out, width=400), {"sql_buffer_result": "ON"})
    printed = out.getvalue()

    assert code == 1, printed
    error = [ln for ln in printed.splitlines() if ln.startswith("error:")]
    assert len(error) == 1 and MY_REASON in error[0], printed
    journal = Journal(tmp_path / "journal.db", read_only=True)
    (session,) = journal.sessions()
    kinds = _kinds(journal, session.id)
    assert kinds[kinds.index("intent") :] == ["intent", "failure", "recovery", "intent.closed", "session.end"], kinds
    events = {e.event: e for e in journal.events(session.id)}
    assert events["failure"].data["server_reason"] == MY_REASON
    assert events["recovery"].data["action"] == "restored" and events["recovery"].data["verified"]
    assert session.status == "failed"
    assert option_file.read_text() == before_file
    conn = maria.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT @@GLOBAL.sql_buffer_result")
            row = cur.fetchone()
    finally:
        conn.close()
    assert row is not None and int(row[0]) == 0
