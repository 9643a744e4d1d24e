"""Storage faults (issue 17, item 8): the journal and Memory Book live on a small tmpfs that is filled
before and during a session, on a real private PostgreSQL 15.

* Full before the session: ``agenticdb tune`` exits 1 with one line naming the file and the cause, no
  traceback, and nothing on the server changed.
* Full during the session: the tmpfs is filled at a fixed point — while the round's candidate is in
  effect, just before its measured run (a state source armed by the planner fills it) — so the next
  journal write fails deterministically. The session puts the safe configuration (the starting values)
  back, verified, and stops with one line naming the journal and the cause.

Needs root (``mount -t tmpfs``); the tmpfs is unmounted in ``finally``.
"""

from __future__ import annotations

import errno
import io
import os
import shutil
import subprocess
import sys
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
from agenticdb.models import Bottleneck, Change, Proposal, RuntimeState
from agenticdb.models.planning import PlanningContext
from agenticdb.planner.base import Planner
from agenticdb.sandbox.postgres import PostgresSandbox, PostgresSandboxInfo
from agenticdb.store.faults import StorageError
from agenticdb.store.journal import Journal
from agenticdb.store.memory import MemoryBook

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")

WATCHED = ["work_mem", "random_page_cost"]


@pytest.fixture(scope="module")
def info() -> Iterator[PostgresSandboxInfo]:
    base = Path(tempfile.mkdtemp(prefix="agenticdb-storefault-"))
    base.chmod(0o755)
    sandbox = PostgresSandbox(base)
    i = sandbox.up()
    try:
        yield i
    finally:
        sandbox.down()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture()
def small_fs() -> Iterator[Path]:
    """A 4 MiB tmpfs (room for a short session's journal and Memory Book, nothing more)."""
    mnt = Path(tempfile.mkdtemp(prefix="agenticdb-tmpfs-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0755", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
        mnt.rmdir()


def fill(fs: Path) -> None:
    """Write zeros to ``fs`` until the device is full (ENOSPC)."""
    chunk = b"\0" * 4096
    with open(fs / "filler", "ab", buffering=0) as fh:
        try:
            while True:
                fh.write(chunk)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc


def values(info: PostgresSandboxInfo) -> dict[str, str]:
    with psycopg.connect(info.dsn, autocommit=True, connect_timeout=5) as c:
        rows = c.execute("SELECT name, setting FROM pg_settings WHERE name = ANY(%s)", (WATCHED,)).fetchall()
    return {str(k): str(v) for k, v in rows}


@pytest.mark.parametrize("stores", ["new", "existing"])
def test_full_disk_before_the_session_is_one_line_and_exit_1(
    small_fs: Path, info: PostgresSandboxInfo, stores: str
) -> None:
    """A new home cannot even create the journal; an existing one cannot take the session's first row."""
    if stores == "existing":
        with Journal(small_fs / "journal.db") as j:
            j.append("earlier", "session.start", {})
        with MemoryBook(small_fs / "memory.db"):
            pass
    fill(small_fs)
    before = values(info)
    env = {
        **os.environ,
        "AGENTICDB_HOME": str(small_fs),
        "AGENTICDB_TARGET__KIND": "postgresql",
        "AGENTICDB_TARGET__DSN": info.dsn,
    }
    r = subprocess.run(
        [sys.executable, "-m", "agenticdb.cli", "tune", "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    errors = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, r.stdout + r.stderr
    assert f"the journal {small_fs / 'journal.db'}: no space left" in errors[0], errors[0]
    assert values(info) == before


class _ArmingPlanner(Planner):
    """Proposes two reload-applied changes once (then a plateau) and arms the filler."""

    name = "arming"

    def __init__(self) -> None:
        self.armed = False

    def propose(self, ctx: PlanningContext) -> Proposal:
        if ctx.rounds:
            return Proposal(bottleneck=Bottleneck.unknown, changes=[], plateau=True, planner=self.name, rationale="-")
        self.armed = True
        return Proposal(
            bottleneck=Bottleneck.io_queue,
            changes=[Change(name="work_mem", value="8MB"), Change(name="random_page_cost", value=2.0)],
            planner=self.name,
            rationale="a candidate that is in effect when the disk fills",
        )


def test_full_disk_during_the_session_puts_the_safe_configuration_back(
    small_fs: Path, info: PostgresSandboxInfo
) -> None:
    before = values(info)
    planner = _ArmingPlanner()
    seen_candidate: list[dict[str, str]] = []

    def filler() -> RuntimeState:
        # The first state sample after the proposal is taken by the executor right before the candidate's
        # measured run: the candidate is applied and verified (journaled); the next write is "measured".
        if planner.armed and not seen_candidate:
            seen_candidate.append(values(info))
            fill(small_fs)
        return RuntimeState()

    cfg = Settings(
        target=info.target_config(),
        workload=WorkloadConfig(kind="pgbench", scale=1, clients=2, threads=1, duration_s=2, warmup_s=0),
        loop=LoopConfig(opening=False, max_rounds=2, baseline_runs=2, baseline_max_runs=2, max_pairs=2),
        storage=StorageConfig(home=small_fs),
    )
    journal, memory = open_stores(cfg)
    target = build_target(cfg)
    try:
        session = TuningSession(
            cfg, target, build_workload(cfg, target), planner, journal, memory, state_sources=[filler]
        )
        with pytest.raises(StorageError) as err:
            session.run()
    finally:
        target.close()
        journal.close()
        memory.close()
    assert seen_candidate == [{"work_mem": "8192", "random_page_cost": "2"}]  # the candidate was in effect
    message = str(err.value)
    assert "\n" not in message and err.value.exit_code == 1
    assert message.startswith(f"cannot write the journal {small_fs / 'journal.db'}: no space left"), message
    assert "dbms: safe configuration 'baseline' put back and verified; session stopped" in message
    assert values(info) == before  # the starting values, read by a fresh client
    # The journal holds everything up to the fault, readable; its last row is the verified candidate.
    with Journal(small_fs / "journal.db", read_only=True) as j:
        events = j.events(session.session_id)
    assert [e.event for e in events][-3:] == ["intent", "applied", "verified"]


def test_full_disk_during_tune_prints_one_line_and_exits_1(
    small_fs: Path, info: PostgresSandboxInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``tune`` as the command runs it (heuristic planner): the disk fills right after the first
    candidate is applied, so the journal cannot take its ``applied`` row. One error line, exit 1, and
    every value the candidate changed is back at its starting value."""
    from agenticdb.cli.tune_cmd import run_tune
    from agenticdb.targets.postgres import PostgresTarget

    real_apply = PostgresTarget.apply

    def apply_then_fill(self: PostgresTarget, changes: list[Any], mode: Any) -> bool:
        restarted = real_apply(self, changes, mode)
        fill(small_fs)
        return restarted

    monkeypatch.setattr(PostgresTarget, "apply", apply_then_fill)
    auto_conf = Path(info.data_dir) / "postgresql.auto.conf"
    conf_before = auto_conf.read_text()
    cfg = Settings(
        target=info.target_config(),
        workload=WorkloadConfig(kind="pgbench", scale=1, clients=2, threads=1, duration_s=2, warmup_s=0),
        loop=LoopConfig(opening=False, max_rounds=1, baseline_runs=2, baseline_max_runs=2, max_pairs=2),
        storage=StorageConfig(home=small_fs),
    )
    with psycopg.connect(info.dsn, autocommit=True) as c:
        settings_before = dict(c.execute("SELECT name, setting FROM pg_settings").fetchall())
    out = io.StringIO()
    code = run_tune(cfg, Console(file=out, width=400), None)
    printed = out.getvalue()
    assert code == 1, printed
    errors = [ln for ln in printed.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in printed, printed
    assert f"cannot write the journal {small_fs / 'journal.db'}: no space left" in errors[0], errors[0]
    assert errors[0].endswith("put back and verified; session stopped"), errors[0]
    with Journal(small_fs / "journal.db", read_only=True) as j:
        intent = [e for e in j.events() if e.event == "intent"][-1]
    changed = [c["name"] for c in intent.data["changes"]]
    assert changed, intent.data
    with psycopg.connect(info.dsn, autocommit=True) as c:
        after = dict(c.execute("SELECT name, setting FROM pg_settings").fetchall())
    assert {n: after[n] for n in changed} == {n: settings_before[n] for n in changed}
    assert auto_conf.read_text() == conf_before


def test_full_disk_right_after_start_from_puts_back_what_it_replaced(
    small_fs: Path, info: PostgresSandboxInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills right after ``--start-from`` is applied (before the baseline): the journal cannot
    take its ``applied`` row; the configuration found before it is put back and the command says so."""
    from agenticdb.cli.tune_cmd import run_tune
    from agenticdb.targets.postgres import PostgresTarget

    real_apply = PostgresTarget.apply

    def apply_then_fill(self: PostgresTarget, changes: list[Any], mode: Any) -> bool:
        restarted = real_apply(self, changes, mode)
        fill(small_fs)
        return restarted

    monkeypatch.setattr(PostgresTarget, "apply", apply_then_fill)
    before = values(info)
    cfg = Settings(
        target=info.target_config(),
        workload=WorkloadConfig(kind="pgbench", scale=1, clients=2, threads=1, duration_s=2, warmup_s=0),
        loop=LoopConfig(opening=False, max_rounds=1, baseline_runs=2),
        storage=StorageConfig(home=small_fs),
    )
    out = io.StringIO()
    code = run_tune(cfg, Console(file=out, width=400), {"work_mem": "8MB", "random_page_cost": 2})
    printed = out.getvalue()
    assert code == 1, printed
    errors = [ln for ln in printed.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, printed
    assert f"cannot write the journal {small_fs / 'journal.db'}: no space left" in errors[0], errors[0]
    assert errors[0].endswith("the configuration before --start-from put back and verified; session stopped")
    assert values(info) == before
