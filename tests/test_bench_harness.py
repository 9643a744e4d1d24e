"""Smoke tests of the benchmark harness (benchmarks/harness): tiny real scenarios, as a user runs them.

``python -m benchmarks.harness run`` with a private server confined to a memory cgroup and one-second
runs: the default and the static peer (PGTune's rules on PostgreSQL, the real MySQLTuner on MariaDB),
and the oracle (TPE with 5 × the budget) with its share-of-oracle-gain column. Checks the Markdown
table, the PNG, that configurations went through agenticdb's validator and were re-measured from
pristine data. Pass/fail never depends on which configuration measured faster.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.harness import pgtune_rules

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("pgbench") is None or shutil.which("rsync") is None,
    reason="needs root (cgroup, PostgreSQL as the postgres user), pgbench and rsync",
)


def _run(
    tmp_path: Path, scenario: str, competitors: str, budget_min: str = "0.1", extra: tuple[str, ...] = ()
) -> tuple[str, dict]:
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.harness", "run", "--scenario", scenario, "--budget-min", budget_min]
        + ["--competitors", competitors, "--repeats", "2", "--duration", "1", "--warmup", "0.5", "--out", str(out)]
        + list(extra),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "AGENTICDB_HOME": str(tmp_path / "home")},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    png = out / f"{scenario}.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = json.loads((out / scenario / "results.json").read_text())
    rows = {r["competitor"]: r for r in summary["rows"]}
    assert set(rows) == set(competitors.split(","))
    for r in rows.values():
        assert len(r["runs"]) == 2 and all(x > 0 for x in r["runs"])
        assert r["result"]["left_down"] == 0
        assert r["verdict_vs_default"] in ("n/a", "better", "worse", "tie")
    assert summary["cgroup"] is None or summary["cgroup"]["limit_bytes"] == 512 * 2**20
    return (out / "results.md").read_text(), summary


@pytest.mark.slow
def test_harness_runs_tiny_scenario_with_pgtune_rules(tmp_path: Path) -> None:
    md, summary = _run(tmp_path, "smoke", "default,static")
    assert "| competitor | objective median |" in md and "| default |" in md
    assert f"| static — {pgtune_rules.LABEL} |" in md
    assert "share of oracle gain" not in md  # no oracle asked for
    static = {r["competitor"]: r for r in summary["rows"]}["static"]["result"]
    assert static["label"] == pgtune_rules.LABEL
    assert static["validator_ms"] and static["failed"] == 0
    # PGTune's rules for an oltp server that do not depend on the host or the memory budget, validated
    # and applied; the inputs a DBA would type are in the notes.
    assert static["changes"]["checkpoint_completion_target"] == "0.9"
    assert static["changes"]["jit"] == "off" and static["changes"]["wal_compression"] == "lz4"
    assert any(
        n.startswith("PGTune inputs: DB version 15, OS linux, DB type oltp, RAM 512 MB") for n in static["notes"]
    )


@pytest.mark.slow
def test_harness_oracle_adds_the_share_column(tmp_path: Path) -> None:
    md, summary = _run(tmp_path, "smoke", "default,static,oracle")
    rows = {r["competitor"]: r for r in summary["rows"]}
    oracle = rows["oracle"]["result"]
    assert oracle["label"].endswith("TPE, 5 × budget") and oracle["rounds"] >= 1
    header = next(line for line in md.splitlines() if line.startswith("| competitor |"))
    assert header.endswith("| share of oracle gain |")
    ref = summary["oracle"]
    assert ref["ran"] is True and ref["verdict"] in ("better", "worse", "tie")
    # The share is shown only when the oracle beats the default beyond the noise; either way the table
    # says which case it is.
    if ref["shown"]:
        assert rows["oracle"]["share_of_oracle_gain"] == pytest.approx(1.0)
        assert rows["default"]["share_of_oracle_gain"] == pytest.approx(0.0)
    else:
        assert all(r["share_of_oracle_gain"] is None for r in rows.values())
        assert "no share is shown" in md
    for line in md.splitlines():
        if line.startswith(("| default", "| static", "| oracle")):
            assert line.count("|") == 14  # 13 columns


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("mysqltuner") is None, reason="mysqltuner not installed (scripts/install.sh)")
def test_harness_mariadb_static_is_the_real_mysqltuner(tmp_path: Path) -> None:
    md, summary = _run(tmp_path, "smoke-mariadb", "default,static")
    static = {r["competitor"]: r for r in summary["rows"]}["static"]["result"]
    assert re.fullmatch(r"MySQLTuner \d+\.\d+\.\d+ \+ rules", static["label"])
    assert f"| static — {static['label']} |" in md
    parsed = next(n for n in static["notes"] if "variable line(s):" in n)
    assert re.search(r"parsed [1-9]\d* variable line\(s\)", parsed)
    assert static["failed"] == 0
    assert (tmp_path / "results" / "smoke-mariadb" / "mysqltuner.txt").read_text().count("Variables to adjust:") == 1


def test_best_so_far_line_never_falls() -> None:
    """Issue 39: the PNG's "best so far" of agenticdb fell at the end of a session."""
    from benchmarks.harness.report import best_so_far

    assert best_so_far([100.0, 140.0, 120.0, 150.0], True) == [100.0, 140.0, 140.0, 150.0]
    assert best_so_far([9.0, 7.0, 8.0], False) == [9.0, 7.0, 7.0]


@pytest.mark.slow
def test_harness_agenticdb_half_runs_with_half_the_budget(tmp_path: Path) -> None:
    """Issue 36's speed target compares agenticdb at half the budget with TPE at the whole one, in one run so
    both are re-measured side by side: the session's journaled budget is half of --budget-min."""
    from agenticdb.store.journal import Journal

    md, summary = _run(tmp_path, "smoke", "default,agenticdb-half", budget_min="0.4")
    half = {r["competitor"]: r for r in summary["rows"]}["agenticdb-half"]
    assert half["result"]["label"] == "agenticdb, heuristic planner, 0.5 × budget"
    assert "default" in half["agenticdb_vs"]
    starts = [e for e in Journal(tmp_path / "results" / "smoke" / "journal.db").events() if e.event == "session.start"]
    assert [e.data["loop"]["time_budget_s"] for e in starts] == [pytest.approx(12.0)]
    assert "| agenticdb-half — agenticdb, heuristic planner, 0.5 × budget |" in md


@pytest.mark.slow
def test_harness_fixed_configurations_run_validated_side_by_side(tmp_path: Path) -> None:
    """--fixed FILE: each table is a competitor 'fixed:<name>', validated as the static peer is (refused knobs
    dropped and noted), applied, re-measured with the others."""
    fixed = tmp_path / "fixed.toml"
    fixed.write_text('[wm]\nwork_mem = "2MB"\n\n[unsafe]\nfsync = "off"\nwork_mem = "1MB"\n')
    _, summary = _run(tmp_path, "smoke", "default,fixed:wm,fixed:unsafe", extra=("--fixed", str(fixed)))
    rows = {r["competitor"]: r for r in summary["rows"]}
    assert set(rows) == {"default", "fixed:wm", "fixed:unsafe"}
    assert rows["fixed:wm"]["result"]["changes"] == {"work_mem": "2MB"}
    unsafe = rows["fixed:unsafe"]["result"]
    assert unsafe["changes"] == {"work_mem": "1MB"} and unsafe["rejected"] == 1
    assert any("fsync=off" in n for n in unsafe["notes"]), unsafe["notes"]
    assert all(len(r["runs"]) == 2 for r in rows.values())
