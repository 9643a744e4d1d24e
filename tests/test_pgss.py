"""pg_stat_statements where the workload runs (``agenticdb.host.pgss``), on a real private PostgreSQL 15 sandbox
made as ``agenticdb sandbox up postgres`` makes it (its least-privilege role included).

A new user's demo read "pg_stat_statements: not readable" for the JIT and parallel evidence: the extension was
created only in the sandbox's ``postgres`` database, the workload ran in ``agenticdb_bench`` and the tuning role
may not create it there (not a trusted extension). Now ``sandbox up`` creates it in the workload's database too,
the target reads the JIT counters there (that database's statements only), ``tune --sandbox`` with another
database gets it from the sandbox's superuser, and where nobody could create it the statistics and the opening's
notes say "not measured" and why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from openingctx import context_of
from psycopg.conninfo import make_conninfo

from agenticdb.app import build_workload
from agenticdb.cli.role_cmd import sandbox_role
from agenticdb.config import Settings
from agenticdb.config.sections import PolicyConfig, StorageConfig, WorkloadConfig
from agenticdb.models import StateDelta
from agenticdb.planner.opening import generate_opening
from agenticdb.sandbox.postgres import PostgresSandbox, PostgresSandboxInfo
from agenticdb.store.journal import Journal
from agenticdb.targets.postgres import PostgresTarget
from agenticdb.workloads.common import ensure_database, ensure_pg_stat_statements
from agenticdb.workloads.registry import connection_from_dsn

JIT = "SET jit = on; SET jit_above_cost = 0; SET jit_inline_above_cost = 0; SET jit_optimize_above_cost = 0"


@pytest.fixture(scope="module")
def sandbox() -> Iterator[tuple[Path, PostgresSandboxInfo]]:
    """(home, info) of a private sandbox after `sandbox up postgres`: the server, then its agenticdb role."""
    home = Path(tempfile.mkdtemp(prefix="agenticdb-pgss-"))
    os.chmod(home, 0o755)
    sb = PostgresSandbox(home)
    sb.up()
    sandbox_role(Settings(storage=StorageConfig(home=home)), "postgres")
    info = sb.info()
    assert info is not None and info.role == "agenticdb"
    try:
        yield home, info
    finally:
        sb.down()
        shutil.rmtree(home, ignore_errors=True)


def _created(info: PostgresSandboxInfo, database: str) -> bool:
    with psycopg.connect(make_conninfo(info.dsn, dbname=database)) as db:
        return db.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements'").fetchone() is not None


def test_sandbox_up_creates_it_in_the_workload_database_and_the_target_reads_that_database_there(
    sandbox: tuple[Path, PostgresSandboxInfo],
) -> None:
    _, info = sandbox
    assert _created(info, "agenticdb_bench") and _created(info, "postgres")
    # the tuning role, as tune --sandbox connects: nothing for it to create, and it says so
    conn = connection_from_dsn("postgresql", info.tuner_dsn, "agenticdb_bench")
    assert ensure_pg_stat_statements(conn) == "created"
    target = PostgresTarget(info.tuner_dsn, None, data_dir=info.data_dir, database="agenticdb_bench")
    began = time.monotonic()
    before = target.runtime_state()
    assert "pg_stat_statements.jit_time" in before.counters and not before.unread, before.unread
    with psycopg.connect(make_conninfo(info.tuner_dsn, dbname="agenticdb_bench"), autocommit=True) as db:
        db.execute(JIT)  # type: ignore[arg-type]
        db.execute("CREATE TABLE IF NOT EXISTS w AS SELECT g AS x FROM generate_series(1, 50000) g")
        for _ in range(3):
            db.execute("SELECT sum(x * 2 + 1), avg(x) FROM w WHERE x % 3 = 1").fetchone()
    # The workload database's statements ran inside this wall time, so their summed execution time is below
    # it however loaded the host; a sleep twice as long in another database would exceed it if it were counted.
    workload_s = time.monotonic() - began
    sleep_s = max(1.5, 2 * workload_s + 0.5)
    with psycopg.connect(info.tuner_dsn) as db:  # agenticdb's own database: not the workload's statements
        db.execute(f"SELECT pg_sleep({sleep_s:.3f})")  # type: ignore[arg-type]
    time.sleep(0.1)
    d = StateDelta.between(before, target.runtime_state())
    assert d.totals["pg_stat_statements.jit_time"] > 0, d.totals
    total_ms = d.totals["pg_stat_statements.total_exec_time"]
    assert 0 < total_ms < 1000 * sleep_s, (d.totals, sleep_s)  # the other database's sleep is left out


def test_where_the_role_may_not_create_it_the_statistics_and_the_opening_say_why(
    sandbox: tuple[Path, PostgresSandboxInfo],
) -> None:
    _, info = sandbox
    conn = connection_from_dsn("postgresql", info.tuner_dsn, "other_wl")
    assert ensure_database(conn)  # the role creates it (CREATEDB) ...
    status = ensure_pg_stat_statements(conn)  # ... but may not create the extension in it
    assert status.startswith("refused: permission denied to create extension"), status
    assert not _created(info, "other_wl")
    target = PostgresTarget(info.tuner_dsn, None, data_dir=info.data_dir, database="other_wl")
    ctx = context_of(target, workload_class="olap", benchmark="tpch")
    delta = ctx.profile.baseline_state
    assert delta is not None and "pg_stat_statements.jit_time" not in delta.totals
    why = delta.unread["pg_stat_statements"]
    assert why.startswith("not created in database other_wl: CREATE EXTENSION pg_stat_statements there needs"), why
    opening = generate_opening(ctx, policy=PolicyConfig())
    note = next(n for n in opening.notes if n.startswith("JIT share not measured"))
    assert "pg_stat_statements not created in database other_wl" in note, opening.notes


def test_journal_show_tells_a_person_what_the_baseline_did_not_measure_and_why(
    sandbox: tuple[Path, PostgresSandboxInfo], tmp_path: Path
) -> None:
    """The baseline event journals ``not_measured`` (loop.initializer: the baseline state's ``unread``); the
    story of ``agenticdb journal show`` says it in one line under the baseline, with the server's reason."""
    _, info = sandbox
    conn = connection_from_dsn("postgresql", info.tuner_dsn, "story_wl")  # its own: tests run in any order
    ensure_database(conn)
    ensure_pg_stat_statements(conn)  # refused for the role (see above)
    target = PostgresTarget(info.tuner_dsn, None, data_dir=info.data_dir, database="story_wl")
    unread = StateDelta.between(target.runtime_state(), target.runtime_state()).unread
    why = unread["pg_stat_statements"]
    sid = "20261206-160000-pgss00"
    with Journal(tmp_path / "journal.db") as j:
        j.append(sid, "session.start", {"target": "postgresql", "workload": "tpch", "planner": "heuristic"})
        # the payload loop.initializer.Initializer._record journals
        j.append(
            sid,
            "baseline",
            {
                "objectives": [12.5, 12.9],
                "noise_cv": 0.02,
                "objective_name": "total_time",
                "higher_is_better": False,
                "not_measured": dict(unread),
            },
            0,
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTICDB_")}
    r = subprocess.run(
        [sys.executable, "-m", "agenticdb.cli", "journal", "show", sid, "--home", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "COLUMNS": "80", "NO_COLOR": "1"},
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stdout.splitlines() if "not measured" in line]
    assert len(lines) == 1, r.stdout
    assert lines[0].strip() == f"• pg_stat_statements not measured: {why}", lines
    assert why.startswith("not created in database story_wl: CREATE EXTENSION pg_stat_statements there needs")
    baseline = next(i for i, line in enumerate(r.stdout.splitlines()) if line.strip().startswith("Baseline"))
    assert r.stdout.splitlines()[baseline + 1] == lines[0]  # right under the baseline it qualifies


def test_tune_on_the_sandbox_gets_it_in_another_database_from_the_sandbox_superuser(
    sandbox: tuple[Path, PostgresSandboxInfo],
) -> None:
    home, info = sandbox
    cfg = Settings(
        storage=StorageConfig(home=home),
        target=info.target_config(database="tune_wl"),
        workload=WorkloadConfig(kind="pgbench", scale=1),
    )
    target = PostgresTarget(info.tuner_dsn, None, data_dir=info.data_dir)
    build_workload(cfg, target)  # before prepare(): the database and its extension, made by the superuser
    assert _created(info, "tune_wl")
    assert target.database == "tune_wl"  # the session's target reads the statements' statistics there
    with psycopg.connect(info.dsn) as db:
        owner = db.execute("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'tune_wl'").fetchone()
    assert owner == ("agenticdb",)  # the role's database, as setup-role makes it
    state = target.runtime_state()
    assert "pg_stat_statements.jit_time" in state.counters and not state.unread, state.unread
