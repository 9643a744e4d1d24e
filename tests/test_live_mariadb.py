"""Live mode on a real private MariaDB (performance_schema statement digests): the set-up check, and a
change of the traffic mix alone is a tie. The application is ``tests/live_app_my.py`` in its own process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agenticdb import auditor
from agenticdb.config import LiveConfig, WorkloadConfig
from agenticdb.disturbance import DisturbanceThresholds
from agenticdb.models import Measurement
from agenticdb.sandbox.mariadb import MariaDBSandboxInfo
from agenticdb.sequential import Noise, SequentialPolicy
from agenticdb.workloads.live import LiveWorkload
from agenticdb.workloads.livestats import MyStatReader
from agenticdb.workloads.registry import connection_from_dsn

APP = [sys.executable, str(Path(__file__).with_name("live_app_my.py"))]
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d[T ]\d")  # structlog lines (the superuser warning), not output

CLI = [sys.executable, "-m", "agenticdb.cli"]


@pytest.fixture(scope="module")
def my(mariadb_sandbox: MariaDBSandboxInfo, tmp_path_factory: pytest.TempPathFactory) -> MariaDBSandboxInfo:
    mix = tmp_path_factory.mktemp("mix") / "mix"
    mix.write_text("A")
    subprocess.run([*APP, mariadb_sandbox.socket, "0", "--mix-file", str(mix), "--setup"], check=True, timeout=120)
    return mariadb_sandbox


@pytest.fixture()
def mix_app(my: MariaDBSandboxInfo, tmp_path: Path) -> Iterator[Path]:
    mix = tmp_path / "mix"
    mix.write_text("A")
    app = subprocess.Popen([*APP, my.socket, "120", "--mix-file", str(mix)])
    try:
        yield mix
    finally:
        app.terminate()
        app.wait(timeout=30)


def workload(my: MariaDBSandboxInfo) -> LiveWorkload:
    conn = connection_from_dsn("mariadb", my.dsn + f"?unix_socket={my.socket}", "liveapp")
    return LiveWorkload(
        WorkloadConfig(kind="live"), LiveConfig(min_calls=2, database="liveapp"), MyStatReader(conn, "liveapp")
    )


class MixRuns:
    """Mix A in "candidate" windows, mix B in "best" windows; the configuration never changes."""

    def __init__(self, w: LiveWorkload, mix: Path) -> None:
        self.w, self.mix = w, mix
        self.by: dict[str, list[Measurement]] = {"candidate": [], "best": []}

    def run(self, config: auditor.Config, label: str) -> Measurement:
        self.mix.write_text("A" if config == "candidate" else "B")
        time.sleep(0.3)
        m = self.w.run(3)
        self.by[config].append(m)
        return m


def test_mariadb_mix_only_change_is_a_tie(my: MariaDBSandboxInfo, mix_app: Path) -> None:
    w = workload(my)
    w.prepare()
    runs = MixRuns(w, mix_app)
    base = runs.run("candidate", "baseline")
    screen = runs.run("candidate", "candidate")
    rules = auditor.DecisionRules(SequentialPolicy(min_pairs=2, max_pairs=3), Noise(), DisturbanceThresholds(), 0, 300)
    a = auditor.assess(screen, base.objective, runs, rules)
    assert a.verdict == "tie", a.reason
    assert a.estimate is not None and a.estimate.low < 0 < a.estimate.high
    # The mix did change: statements per second differ by more than 1.3× between A and B windows.
    qps_a = sum(m.qps or 0 for m in runs.by["candidate"]) / len(runs.by["candidate"])
    qps_b = sum(m.qps or 0 for m in runs.by["best"]) / len(runs.by["best"])
    assert qps_a > 1.3 * qps_b, (qps_a, qps_b)
    texts = {q.text for m in runs.by["best"] for q in m.live_queries}
    assert any("ORDER BY" in t and "?" in t for t in texts), texts  # digest text, literals replaced


def test_mariadb_without_statement_digests_exits_with_one_line(my: MariaDBSandboxInfo) -> None:
    home = Path(my.root).parent.parent  # the sandbox lives in HOME/sandbox/mariadb
    db = my.connect()
    try:
        db.cursor().execute(
            "UPDATE performance_schema.setup_consumers SET ENABLED = 'NO' WHERE NAME = 'statements_digest'"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTICDB_")}
        env["AGENTICDB_POLICY__ALLOW_SUPERUSER"] = "true"  # the sandbox fixture connects as root
        r = subprocess.run(
            [*CLI, "tune", "--home", str(home), "--sandbox", "mariadb", "--workload", "live", "--rounds", "1"],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    finally:
        db.cursor().execute(
            "UPDATE performance_schema.setup_consumers SET ENABLED = 'YES' WHERE NAME = 'statements_digest'"
        )
        db.close()
    assert r.returncode != 0
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip() and not LOG_LINE.match(ln)]
    assert len(lines) == 1, lines
    assert "performance_schema" in lines[0] and "statements_digest = NO" in lines[0]
