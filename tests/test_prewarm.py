"""The buffer cache after a restart (``agenticdb.host.prewarm``, ``Executor._prewarm``), on a real private
PostgreSQL 15 sandbox made as ``agenticdb sandbox up postgres`` makes it (its least-privilege role included).

Issue 36: after a restart the first measured run was cold: shared_buffers 128MB → 512MB measured 493.9 TPS/p95
on its first run after the restart and 862 on the next. The executor now loads the workload's relations into
shared_buffers with pg_prewarm after every restart, before its time warm-up; where the role may not create the
extension it says why and warms up by time alone. The probe workload below counts, when its run starts, how
many of the workload table's and index's pages are in shared_buffers (pg_buffercache): the run itself reads
nothing, so only the prewarm can have put them there.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from structlog.testing import capture_logs

from agenticdb.cli.role_cmd import sandbox_role
from agenticdb.config import Settings
from agenticdb.config.loop_section import LoopConfig
from agenticdb.config.sections import StorageConfig
from agenticdb.host import prewarm
from agenticdb.loop import executor as executor_module
from agenticdb.loop.executor import Executor, prewarm_after_restart
from agenticdb.loop.race_cost import CostBasis, screen_cost_s
from agenticdb.models import Measurement
from agenticdb.sandbox.postgres import PostgresSandbox, PostgresSandboxInfo
from agenticdb.store.journal import Journal
from agenticdb.targets.postgres import PostgresTarget
from agenticdb.workloads.base import Workload, WorkloadTraits

DB = "agenticdb_bench"
ROWS = 60_000  # about 14 MiB of heap and 1.3 MiB of index: well inside the sandbox's shared_buffers


@pytest.fixture(scope="module")
def sandbox() -> Iterator[tuple[PostgresSandbox, PostgresSandboxInfo]]:
    """A private sandbox after `sandbox up postgres` and its agenticdb role, with a table ``t`` (and an index)
    owned by that role in the workload's database, and pg_buffercache (made by the superuser) to count buffers."""
    home = Path(tempfile.mkdtemp(prefix="agenticdb-prewarm-"))
    os.chmod(home, 0o755)
    sb = PostgresSandbox(home)
    sb.up()
    sandbox_role(Settings(storage=StorageConfig(home=home)), "postgres")
    info = sb.info()
    assert info is not None and info.role == "agenticdb"
    with psycopg.connect(make_conninfo(info.tuner_dsn, dbname=DB), autocommit=True) as db:
        db.execute(f"CREATE TABLE t AS SELECT g AS id, repeat('x', 200) AS pad FROM generate_series(1, {ROWS}) g")
        db.execute("CREATE INDEX t_id ON t (id)")
    with psycopg.connect(make_conninfo(info.dsn, dbname=DB), autocommit=True) as db:
        db.execute("CREATE EXTENSION IF NOT EXISTS pg_buffercache")
    try:
        yield sb, info
    finally:
        sb.down()
        shutil.rmtree(home, ignore_errors=True)


def _cached(info: PostgresSandboxInfo) -> tuple[int, int]:
    """(buffers of t and t_id in shared_buffers, their pages on disk)."""
    with psycopg.connect(make_conninfo(info.dsn, dbname=DB), autocommit=True) as db:
        row = db.execute(
            "SELECT (SELECT count(*) FROM pg_buffercache b WHERE b.reldatabase = (SELECT oid FROM pg_database "
            "WHERE datname = current_database()) AND b.relfilenode IN (pg_relation_filenode('t'), "
            "pg_relation_filenode('t_id'))), "
            "(pg_relation_size('t') + pg_relation_size('t_id')) / current_setting('block_size')::int"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


class BufferProbe(Workload):
    """A workload whose run reads nothing: it records how many of t's pages were cached when it started."""

    name = "probe"
    samples_host = False

    def __init__(self, cached: Callable[[], tuple[int, int]]) -> None:
        self.cached = cached
        self.seen: list[tuple[int, int]] = []

    def traits(self) -> WorkloadTraits:
        return WorkloadTraits("probe", "oltp", 1.0, "point", 1, 1, "tps")

    def prepare(self) -> None:
        return None

    def warmup(self, seconds: float) -> None:
        return None  # a time warm-up that reads nothing: only the prewarm can cache the pages

    def run(
        self, seconds: float, warmup_max_s: float = 0.0, on_tool_start: Callable[[int], object] | None = None
    ) -> Measurement:
        self.seen.append(self.cached())
        return Measurement(workload=self.name, tps=1.0, objective=1.0, objective_name="tps", duration_s=seconds)


def _executor(target: PostgresTarget, probe: BufferProbe, journal: Journal, **kw: float) -> Executor:
    return Executor(target, [], probe, journal, "s1", 0.0, 0.1, watch_host=False, **kw)  # type: ignore[arg-type]


def test_after_a_restart_the_workload_relations_are_in_shared_buffers_before_the_run(
    sandbox: tuple[PostgresSandbox, PostgresSandboxInfo], tmp_path: Path
) -> None:
    sb, info = sandbox
    journal = Journal(tmp_path / "journal.db")
    # the tuning role, as tune --sandbox connects: pg_prewarm was made in the workload's database by `sandbox up`
    target = PostgresTarget(info.tuner_dsn, sb.service(info), data_dir=info.data_dir, database=DB)
    probe = BufferProbe(lambda: _cached(info))

    sb.service(info).restart()
    _executor(target, probe, journal, prewarm_max_s=0).measure(0, "candidate", after_restart=True)
    cold, pages = probe.seen[-1]
    assert cold < pages * 0.1, (cold, pages)  # without the prewarm the restart left them on disk

    sb.service(info).restart()
    with capture_logs() as logs:
        m, _ = _executor(target, probe, journal).measure(0, "candidate", after_restart=True)
    warm, pages = probe.seen[-1]
    assert warm >= pages * 0.95, (warm, pages)
    assert m.prewarm is not None and m.prewarm.startswith("pg_prewarm: "), m.prewarm
    line = next(e for e in logs if e["event"] == "run.prewarm")
    assert set(line["relations"]) == {"t", "t_id"} and line["stopped"] == "all loaded", line
    assert line["mib"] >= pages * 8192 / 2**20 * 0.95 and line["seconds"] >= 0, line
    measured = [e for e in journal.events("s1") if e.event == "measured"]
    assert measured[-1].data["measurement"]["prewarm"] == m.prewarm  # in the journal with the run


def test_the_prewarm_step_is_timed_on_the_run_and_priced_in_a_restart(
    sandbox: tuple[PostgresSandbox, PostgresSandboxInfo], tmp_path: Path
) -> None:
    """The prewarm's own time (up to PREWARM_MAX_S of loading) was in no cost prior: the run records it
    (``Measurement.prewarm_s``, monotonic seconds, in the journal) and the baseline's figure is added to every run
    after a restart (``CostBasis.prewarm_s``)."""
    sb, info = sandbox
    journal = Journal(tmp_path / "journal.db")
    target = PostgresTarget(info.tuner_dsn, sb.service(info), data_dir=info.data_dir, database=DB)
    sb.service(info).restart()
    m, _ = _executor(target, BufferProbe(lambda: _cached(info)), journal).measure(0, "baseline 1", after_restart=True)
    assert m.prewarm is not None and m.prewarm.startswith("pg_prewarm: "), m.prewarm
    loading = float(m.prewarm.split(" in ")[1].split(" s ")[0])  # the note's loading time, 0.1-s precision
    # the step (connect, extension check, listing, loading) includes the loading the note reports
    assert m.prewarm_s is not None and m.prewarm_s >= loading - 0.05, (m.prewarm_s, m.prewarm)
    measured = [e for e in journal.events("s1") if e.event == "measured"]
    assert measured[-1].data["measurement"]["prewarm_s"] == m.prewarm_s
    basis = CostBasis.of([m], 0.0, LoopConfig())
    assert basis.prewarm_s == m.prewarm_s
    without = CostBasis.of([m.model_copy(update={"prewarm_s": None})], 0.0, LoopConfig())
    assert screen_cost_s(basis, True) - screen_cost_s(without, True) == pytest.approx(m.prewarm_s)


def test_the_first_run_of_a_server_just_started_is_prewarmed_and_a_later_run_without_restart_is_not(
    sandbox: tuple[PostgresSandbox, PostgresSandboxInfo], tmp_path: Path
) -> None:
    sb, info = sandbox
    journal = Journal(tmp_path / "journal.db")
    target = PostgresTarget(info.tuner_dsn, sb.service(info), data_dir=info.data_dir, database=DB)
    probe = BufferProbe(lambda: _cached(info))
    sb.service(info).restart()
    ex = _executor(target, probe, journal)
    first, _ = ex.measure(0, "baseline 1")  # no restart by the executor, but the server was just started
    assert first.prewarm is not None and first.prewarm.startswith("pg_prewarm: "), first.prewarm
    assert first.prewarm_s is not None and first.prewarm_s > 0, first
    second, _ = ex.measure(0, "baseline 2")
    assert second.prewarm is None and second.prewarm_s is None


def test_an_observe_only_workload_on_a_server_up_for_a_while_keeps_the_application_cache(
    sandbox: tuple[PostgresSandbox, PostgresSandboxInfo], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sb, info = sandbox
    target = PostgresTarget(info.tuner_dsn, sb.service(info), data_dir=info.data_dir, database=DB)
    probe = BufferProbe(lambda: _cached(info))
    probe.observes_only = True  # as workload live
    monkeypatch.setattr(executor_module, "JUST_STARTED_S", 0.0)  # "up for a while": longer than 0 s
    first, _ = _executor(target, probe, Journal(tmp_path / "journal.db")).measure(0, "baseline 1")
    assert first.prewarm is None


def test_what_is_loaded_is_bounded_by_the_budget_and_the_last_relation_loaded_in_part(
    sandbox: tuple[PostgresSandbox, PostgresSandboxInfo],
) -> None:
    _, info = sandbox
    with psycopg.connect(make_conninfo(info.tuner_dsn, dbname=DB), autocommit=True) as db:
        done = prewarm.load(db, budget_bytes=2 * 2**20, max_s=30)
    assert done.stopped == "shared_buffers full" and 0 < done.bytes_loaded <= 2 * 2**20, done
    assert done.relations[-1].endswith("(part)"), done.relations
    with psycopg.connect(make_conninfo(info.tuner_dsn, dbname=DB), autocommit=True) as db:
        timed = prewarm.load(db, budget_bytes=2**30, max_s=0)
    assert timed.stopped == "time bound reached" and timed.bytes_loaded == 0, timed


def test_where_the_role_may_not_create_pg_prewarm_the_run_says_why_and_warms_up_by_time(
    sandbox: tuple[PostgresSandbox, PostgresSandboxInfo], tmp_path: Path
) -> None:
    sb, info = sandbox
    with psycopg.connect(info.tuner_dsn, autocommit=True) as db:  # the role creates a database (CREATEDB) ...
        db.execute("CREATE DATABASE other_wl")
    journal = Journal(tmp_path / "journal.db")
    target = PostgresTarget(info.tuner_dsn, sb.service(info), data_dir=info.data_dir, database="other_wl")
    probe = BufferProbe(lambda: (0, 0))
    sb.service(info).restart()
    with capture_logs() as logs:
        m, _ = _executor(target, probe, journal).measure(0, "candidate", after_restart=True)
    # ... but may not create the extension in it (not trusted): said in the run's note, the log and the journal
    assert m.prewarm is not None, m
    assert m.prewarm.startswith(
        "prewarm not available: CREATE EXTENSION pg_prewarm in database other_wl refused: permission denied to "
        'create extension "pg_prewarm"'
    ), m.prewarm
    assert m.prewarm.endswith(
        "; to prewarm, a superuser runs CREATE EXTENSION pg_prewarm in database other_wl (agenticdb setup-role "
        "--apply creates it in target.database); time warm-up only"
    ), m.prewarm
    line = next(e for e in logs if e["event"] == "run.prewarm")
    assert line["log_level"] == "warning" and line["reason"] == m.prewarm, line
    measured = [e for e in journal.events("s1") if e.event == "measured"]
    assert measured[-1].data["measurement"]["prewarm"] == m.prewarm
    with psycopg.connect(make_conninfo(info.dsn, dbname="other_wl")) as db:
        assert db.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_prewarm'").fetchone() is None


class PassProbe(BufferProbe):
    """A query set's shape: its warm-up is one whole pass (``warmup_is_pass``); it records each warm-up asked."""

    warmup_is_pass = True

    def __init__(self, cached: Callable[[], tuple[int, int]]) -> None:
        super().__init__(cached)
        self.warmups: list[float] = []

    def warmup(self, seconds: float) -> None:
        self.warmups.append(seconds)


def test_a_query_set_prewarmed_after_a_restart_gets_no_extra_warm_up_pass(
    sandbox: tuple[PostgresSandbox, PostgresSandboxInfo], tmp_path: Path
) -> None:
    sb, info = sandbox
    target = PostgresTarget(info.tuner_dsn, sb.service(info), data_dir=info.data_dir, database=DB)
    journal = Journal(tmp_path / "journal.db")
    queries, timed = PassProbe(lambda: _cached(info)), BufferProbe(lambda: _cached(info))
    timed_warmups: list[float] = []
    timed.warmup = timed_warmups.append  # type: ignore[method-assign]
    sb.service(info).restart()
    m, _ = _executor(target, queries, journal).measure(0, "candidate", after_restart=True)
    # the cache was loaded: the warm-up is the usual one (warmup_s = 0 here: none), not a whole extra pass
    assert m.prewarm is not None and m.prewarm.startswith("pg_prewarm: ") and queries.warmups == [], (m, queries)
    sb.service(info).restart()
    _executor(target, queries, journal, prewarm_max_s=0).measure(0, "candidate", after_restart=True)
    assert queries.warmups == [3.0], queries.warmups  # nothing loaded: the pass after a restart stays
    sb.service(info).restart()
    _executor(target, timed, journal).measure(0, "candidate", after_restart=True)
    assert timed_warmups == [3.0], timed_warmups  # a time warm-up is longer after a restart, prewarmed or not


def test_a_prewarm_that_loaded_no_relation_keeps_the_pass_and_the_cost_basis_cold(
    sandbox: tuple[PostgresSandbox, PostgresSandboxInfo], tmp_path: Path
) -> None:
    # The workload's database has pg_prewarm (made by a superuser) but the tuning role may not read its tables:
    # every relation is skipped and the note says "pg_prewarm: 0 relations, …". That loaded nothing, so the
    # query set keeps its pass after the restart and a baseline run with that note prices restarts with the pass.
    sb, info = sandbox
    with psycopg.connect(info.dsn, autocommit=True) as admin:
        admin.execute("CREATE DATABASE not_readable")
    try:
        with psycopg.connect(make_conninfo(info.dsn, dbname="not_readable"), autocommit=True) as db:
            db.execute("CREATE TABLE u AS SELECT g AS id FROM generate_series(1, 10000) g")
            db.execute("CREATE EXTENSION pg_prewarm")
        target = PostgresTarget(info.tuner_dsn, sb.service(info), data_dir=info.data_dir, database="not_readable")
        queries = PassProbe(lambda: (0, 0))
        sb.service(info).restart()
        m, _ = _executor(target, queries, Journal(tmp_path / "journal.db")).measure(0, "candidate", after_restart=True)
        assert m.prewarm is not None and m.prewarm.startswith("pg_prewarm: 0 relations, 0.0 MiB"), m.prewarm
        assert "1 skipped: permission denied for table u" in m.prewarm, m.prewarm
        assert not prewarm.loaded(m.prewarm)
        assert queries.warmups == [3.0], queries.warmups  # nothing was loaded: the pass after a restart stays
        baseline = [m.model_copy(update={"per_query_s": {"q01": 1.0}, "total_time_s": 1.0})]
        assert not CostBasis.of(baseline, 0.0, LoopConfig()).prewarmed
    finally:
        with psycopg.connect(info.dsn, autocommit=True) as admin:
            admin.execute("DROP DATABASE IF EXISTS not_readable WITH (FORCE)")


def test_mariadb_and_the_linux_target_are_left_alone() -> None:
    class NotPostgres:
        family = "mysql"

    assert prewarm_after_restart(NotPostgres()) == ""  # type: ignore[arg-type]
