"""The isolation check of tests/leakcheck.py (issue 39) on a small pytest run of its own (one subprocess
for the module): a test that leaves a process or a private server running errors at teardown, naming it;
a clean test, and a module-scoped fixture's process shared by two tests, pass."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from agenticdb.sandbox.postgres import PostgresSandbox

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

CONFTEST = """
from leakcheck import register

def pytest_configure(config):
    register(config)
"""

CHILDREN = """
import subprocess
from pathlib import Path

def test_leaky():
    proc = subprocess.Popen(["sleep", "30"])
    Path({out!r}, "leak.pid").write_text(str(proc.pid))

def test_clean():
    subprocess.run(["sleep", "0.1"], check=True)
"""

MODULE_FIXTURES = """
import subprocess
from pathlib import Path
import pytest

@pytest.fixture(scope="module")
def stopped():
    proc = subprocess.Popen(["sleep", "30"])
    yield proc
    proc.kill()
    proc.wait()

@pytest.fixture(scope="module")
def forgotten():
    proc = subprocess.Popen(["sleep", "31"])
    Path({out!r}, "forgotten.pid").write_text(str(proc.pid))
    yield proc

def test_one(stopped, forgotten):
    assert stopped.poll() is None

def test_two(stopped, forgotten):
    assert stopped.poll() is None
"""

SERVER = """
import os
import tempfile
from pathlib import Path
from agenticdb.sandbox.postgres import PostgresSandbox

def test_forgets_its_server():
    base = Path(tempfile.mkdtemp(prefix="agenticdb-leak-"))
    os.chmod(base, 0o755)  # the postgres OS user must traverse it
    Path({out!r}, "base.txt").write_text(str(base))
    PostgresSandbox(base).up()
"""


@dataclass
class Inner:
    out: str
    """What the inner run printed (stdout + stderr)."""
    files: Path
    """Where its tests wrote the pids and dirs of what they left."""

    def section(self, test: str) -> str:
        """The ERROR block of ``test``'s teardown."""
        head = f"ERROR at teardown of {test} "
        assert head in self.out, self.out
        return self.out.split(head, 1)[1].split("\n_", 1)[0].split("\n==", 1)[0]


def kill(pid: int) -> None:
    """Kill a leftover of the inner run (an orphan by now, so no wait: poll until it is gone)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 5
    while psutil.pid_exists(pid) and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.fixture(scope="module")
def inner() -> Iterator[Inner]:
    """One pytest run (file order: -p no:randomly) of three files under the check; its leftovers are
    removed afterwards."""
    work = Path(tempfile.mkdtemp(prefix="agenticdb-leakcheck-"))
    files = work / "files"
    files.mkdir()
    (work / "pytest.ini").write_text("[pytest]\n")
    (work / "conftest.py").write_text(CONFTEST)
    for name, source in (("test_a.py", CHILDREN), ("test_b.py", MODULE_FIXTURES), ("test_c.py", SERVER)):
        (work / name).write_text(source.format(out=str(files)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(ROOT)]))
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", str(work)]
    try:
        r = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=300)
        yield Inner(r.stdout + r.stderr, files)
    finally:
        for name in ("leak.pid", "forgotten.pid"):
            if (files / name).exists():
                kill(int((files / name).read_text()))
        if (files / "base.txt").exists():
            base = Path((files / "base.txt").read_text())
            PostgresSandbox(base).down()
            shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


def test_the_run_errors_exactly_the_three_leaky_tests(inner: Inner) -> None:
    assert "5 passed, 3 errors" in inner.out, inner.out
    summary = inner.out.split("short test summary")[-1]
    assert "test_clean" not in summary and "test_one" not in summary, summary


def test_leftover_child_process_is_named_with_pid_and_command_line(inner: Inner) -> None:
    pid = int((inner.files / "leak.pid").read_text())
    text = inner.section("test_leaky")
    assert f"pid {pid} (started during the test or by its function-scoped fixtures): sleep 30" in text, text


def test_module_fixture_process_is_allowed_until_the_fixture_ends(inner: Inner) -> None:
    """A module fixture's process lives across its tests; one its finalizer forgets is reported at the
    teardown of the module's last test, naming the fixture."""
    pid = int((inner.files / "forgotten.pid").read_text())
    text = inner.section("test_two")
    assert f"pid {pid} (set up by module-scoped fixture 'forgotten', already finalized): sleep 31" in text, text
    assert "sleep 30" not in text, text


def test_private_postgres_left_running_is_reported_with_its_data_dir(inner: Inner) -> None:
    """pg_ctl detaches the postmaster (no descendant of pytest): it is found by its data dir, which lies in
    a temp dir the run made."""
    base = Path((inner.files / "base.txt").read_text())
    text = inner.section("test_forgets_its_server")
    assert f"data dir {os.path.realpath(base / 'sandbox' / 'postgres' / 'data')}" in text, text
