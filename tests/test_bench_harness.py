"""Smoke test of the benchmark harness (benchmarks/harness): one tiny real scenario, two competitors.

Runs ``python -m benchmarks.harness run`` as a user would: a private PostgreSQL confined to a memory
cgroup, pgbench scale 1, the default and the static (PGTune-style) competitor, one-second runs. Checks
the Markdown table, the PNG, and that the static configuration went through agenticdb's validator and
was re-measured from pristine data.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("pgbench") is None or shutil.which("rsync") is None,
    reason="needs root (cgroup, PostgreSQL as the postgres user), pgbench and rsync",
)


def test_harness_runs_tiny_scenario_and_writes_table_and_png(tmp_path: Path) -> None:
    out = tmp_path / "results"
    t0 = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.harness",
            "run",
            "--scenario",
            "smoke",
            "--budget-min",
            "0.1",
            "--competitors",
            "default,static",
            "--repeats",
            "2",
            "--duration",
            "1",
            "--warmup",
            "0.5",
            "--out",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "AGENTICDB_HOME": str(tmp_path / "home")},
    )
    elapsed = time.monotonic() - t0
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert elapsed < 90, f"smoke scenario took {elapsed:.0f}s"

    md = (out / "results.md").read_text()
    assert "| competitor | objective median |" in md
    assert "| default |" in md and "| static |" in md

    png = out / "smoke.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    summary = json.loads((out / "smoke" / "results.json").read_text())
    rows = {r["competitor"]: r for r in summary["rows"]}
    assert set(rows) == {"default", "static"}
    for r in rows.values():
        assert len(r["runs"]) == 2 and all(x > 0 for x in r["runs"])
        assert r["result"]["left_down"] == 0
        assert r["verdict_vs_default"] in ("n/a", "better", "worse", "tie")
    static = rows["static"]["result"]
    # PGTune-style from the 512 MiB cgroup limit: shared_buffers = RAM/4, validated and applied.
    assert static["changes"].get("shared_buffers") == "128MB"
    assert static["validator_ms"] and static["failed"] == 0
    assert summary["cgroup"] is None or summary["cgroup"]["limit_bytes"] == 512 * 2**20
