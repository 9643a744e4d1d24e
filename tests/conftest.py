"""Shared fixtures: private database instances created per test session and removed afterwards.

PostgreSQL and MariaDB sandboxes live in a temp dir readable by the ``postgres``/``mysql`` OS users
(pytest's own tmp dir is 0700 and unreachable for them).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hosthome import register as register_hosthome
from leakcheck import register as register_leakcheck

from agenticdb.sandbox.mariadb import MariaDBSandbox, MariaDBSandboxInfo
from agenticdb.sandbox.postgres import PostgresSandbox, PostgresSandboxInfo
from agenticdb.targets.postgres import PostgresTarget

# Test sessions score their whole (short) runs: steady-state detection would make every measured run
# workload.warmup_max_s (default 10 s) longer. It is tested on its own (test_series.py,
# test_workload_series.py, test_workloads_dbms.py); a test may still set it explicitly (CLI flags win).
os.environ.setdefault("AGENTICDB_WORKLOAD__WARMUP_MAX_S", "0")
# Most tests connect to their private sandboxes as the superuser (the fixtures make no limited role).
# agenticdb refuses that by default (issue 21); tests of the refusal and of the limited role
# (test_privileges.py) unset this.
os.environ.setdefault("AGENTICDB_POLICY__ALLOW_SUPERUSER", "true")


def pytest_configure(config: pytest.Config) -> None:
    """Test isolation (issue 39): a test whose processes or private servers outlive it errors at teardown
    (tests/leakcheck.py). $AGENTICDB_HOME is a temp dir of this run, and a test that creates agenticdb's real
    places on the host (/var/lib/agenticdb, /etc/agenticdb, ...) errors at teardown (tests/hosthome.py)."""
    register_leakcheck(config)
    register_hosthome(config)  # after leakcheck: the session home is one of this run's temp dirs


def _shared_tmp(prefix: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(path, 0o755)
    return path


@pytest.fixture(scope="session")
def pg_sandbox() -> Iterator[PostgresSandboxInfo]:
    """A private PostgreSQL for the whole test session (initdb, own port and socket dir)."""
    base = _shared_tmp("agenticdb-pg-")
    sandbox = PostgresSandbox(base)
    info = sandbox.up()
    try:
        yield info
    finally:
        sandbox.down()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture()
def pg(pg_sandbox: PostgresSandboxInfo) -> Iterator[PostgresTarget]:
    """A PostgresTarget on the session's private sandbox as the superuser, without a service (nothing restarts it
    through this target), closed after the test. A test file that needs another ``pg`` defines its own."""
    t = PostgresTarget(pg_sandbox.dsn, None, data_dir=pg_sandbox.data_dir)
    yield t
    t.close()


@pytest.fixture()
def storage_home(tmp_path: Path) -> Path:
    """An empty agenticdb home (SQLite memory + journal) for one test."""
    home = tmp_path / "home"
    home.mkdir()
    return home


@pytest.fixture(scope="session")
def mariadb_sandbox() -> Iterator[MariaDBSandboxInfo]:
    """A private MariaDB for the whole test session (mariadb-install-db, own port, socket, option files).

    Tests that restart it or change knobs must leave it running with the managed option file restored.
    """
    base = _shared_tmp("agenticdb-mariadb-")
    sandbox = MariaDBSandbox(base)
    info = sandbox.up()
    try:
        yield info
    finally:
        sandbox.down()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def no_opening(monkeypatch: pytest.MonkeyPatch) -> None:
    """``loop.opening = false`` for every session this test starts through the configuration or the command
    line (AGENTICDB_LOOP__OPENING): a test of the diagnosis rounds from a bad start tests those rounds, not
    the opening's race of whole configurations (tests/test_race.py tests that)."""
    monkeypatch.setenv("AGENTICDB_LOOP__OPENING", "false")
