"""`agenticdb report ID --plot FILE.png` and `--format html` (issue 19): a session over the in-memory
target (tests/memtarget.py) with real journal and Memory Book files, then the real CLI process."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import Result
from memtarget import InMemoryTarget, ScriptedPlanner, ScriptedWorkload
from PIL import Image
from typer.testing import CliRunner

from agenticdb.cli import app
from agenticdb.config import Settings
from agenticdb.config.loop_section import LoopConfig
from agenticdb.config.sections import StorageConfig, WorkloadConfig
from agenticdb.logs import configure_logging
from agenticdb.loop.session import TuningSession
from agenticdb.report.plot import DPI, FIGSIZE, Curve, PlotError, Trial, curve_of
from agenticdb.store.journal import Journal
from agenticdb.store.journal_events import JournalEvent
from agenticdb.store.memory import MemoryBook

WIDTH, HEIGHT = int(FIGSIZE[0] * DPI), int(FIGSIZE[1] * DPI)


def objective(values: dict[str, str]) -> float:
    """work_mem 8MB is a large real gain; anything else changes nothing."""
    return 150.0 if values.get("work_mem") == "8MB" else 100.0


@pytest.fixture()
def home(tmp_path: Path) -> Path:
    """A home with one finished session: round 1 kept (work_mem=8MB), round 2 a tie, reverted."""
    target = InMemoryTarget()
    cfg = Settings(
        workload=WorkloadConfig(kind="pgbench", duration_s=1, warmup_s=0),
        loop=LoopConfig(opening=False, max_rounds=2, baseline_runs=2, plateau_rounds=5),
        storage=StorageConfig(home=tmp_path),
    )
    with Journal(tmp_path / "journal.db") as journal, MemoryBook(tmp_path / "memory.db") as memory:
        session = TuningSession(
            cfg,
            target,
            ScriptedWorkload(target, objective),
            ScriptedPlanner([{"work_mem": "8MB"}, {"random_page_cost": "1.1"}]),
            journal,
            memory,
        )
        result = session.run()
    assert result.status == "completed" and [r.kept for r in result.rounds] == [True, False]
    return tmp_path


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agenticdb.cli", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ},
        stdin=subprocess.DEVNULL,
    )


def test_plot_png_has_the_expected_size(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "curve.png"
    r = cli(home, "report", "--plot", str(out))
    assert r.returncode == 0, r.stderr
    assert "# agenticdb session" in r.stdout  # the Markdown report still prints
    assert out.exists() and out.stat().st_size > 10_000
    with Image.open(out) as img:
        assert img.format == "PNG" and img.size == (WIDTH, HEIGHT)
        # Not a blank canvas: the curve, markers and labels use many colours.
        assert len(img.convert("RGB").getcolors(maxcolors=100_000) or []) > 50


def test_curve_follows_the_journal(home: Path) -> None:
    with Journal(home / "journal.db", read_only=True) as j:
        events = j.events(j.sessions()[-1].id)
    curve = curve_of(events)
    judged = {e.round_no: e.data for e in events if e.event == "judged"}
    assert curve.baseline == 100.0 and curve.best == 150.0 and curve.higher_is_better
    assert [t.kept for t in curve.trials] == [True, False]
    kept = curve.trials[0]
    assert kept.label == "work_mem=8MB"
    # the interval in objective units: best median × (1 + low/high)
    j1 = judged[1]
    assert kept.low == pytest.approx(j1["best_median"] * (1 + j1["low"]))
    assert kept.high == pytest.approx(j1["best_median"] * (1 + j1["high"]))
    assert kept.low <= kept.objective <= kept.high
    assert [y for _, y in curve.steps] == [100.0, 150.0, 150.0]  # baseline, the kept change, the end
    with pytest.raises(PlotError, match="no baseline"):
        curve_of([e for e in events if e.event != "baseline"])


def test_lower_is_better_intervals_map_through_the_ratio() -> None:
    def ev(i: int, name: str, data: dict[str, object], rnd: int | None = None) -> JournalEvent:
        return JournalEvent(
            id=i, ts=f"2026-01-01T00:00:{i:02d}+00:00", session_id="s", round_no=rnd, event=name, data=data,
            prev_hash="", hash="",
        )  # fmt: skip

    events = [
        ev(1, "session.start", {}),
        ev(2, "baseline", {"objectives": [10.0], "higher_is_better": False, "objective_name": "p95_ms"}),
        ev(3, "judged", {"gain": 0.25, "low": 0.0, "high": 0.5, "best_median": 10.0}, 1),
        ev(4, "decision", {"kept": True, "changes": {"work_mem": "8MB"}}, 1),
        ev(5, "session.end", {"best_objective": 8.0}),
    ]
    curve = curve_of(events)
    t = curve.trials[0]
    assert t.objective == pytest.approx(8.0) and (t.low, t.high) == (pytest.approx(10 / 1.5), pytest.approx(10.0))
    assert curve.best == 8.0 and not curve.higher_is_better


def run(home: Path, *args: str) -> Result:
    """The command in process (typer's runner): the same code path without a second interpreter start."""
    try:
        return CliRunner().invoke(app, [*args, "--home", str(home)])
    finally:
        configure_logging()  # the root callback bound structlog to the runner's stream, closed by now


def test_html_report_embeds_the_curve_and_the_round_table(home: Path) -> None:
    r = run(home, "report", "--format", "html")
    assert r.exit_code == 0, r.stderr
    page = r.stdout
    assert page.startswith("<!DOCTYPE html>") and "<table>" in page
    m = re.search(r"data:image/png;base64,([A-Za-z0-9+/=]+)", page)
    assert m is not None
    assert base64.b64decode(m.group(1))[:8] == b"\x89PNG\r\n\x1a\n"
    rows = re.findall(r"<tr>\s*<td>(\d+)</td>", page)
    assert rows == ["1", "2"] and "work_mem=8MB" in page
    # the page is the Markdown report rendered (issue 39): noise, each round's rationale and evidence
    assert "<strong>noise CV:</strong>" in page and "rationale:" in page


def test_bad_format_and_unknown_session_are_clear_errors(home: Path, tmp_path: Path) -> None:
    r = run(home, "report", "--format", "pdf")
    assert r.exit_code == 2 and "--format='pdf'" in r.stderr
    r = run(home, "report", "nosuchsession", "--plot", str(tmp_path / "x.png"))
    assert r.exit_code == 1 and "error" in r.stderr and "nosuchsession" in r.stderr
    assert not (tmp_path / "x.png").exists()


def test_a_round_decided_on_its_screen_alone_is_drawn_without_interval() -> None:
    def ev(i: int, name: str, data: dict[str, object], rnd: int | None = None) -> JournalEvent:
        return JournalEvent(
            id=i, ts=f"2026-01-01T00:00:{i:02d}+00:00", session_id="s", round_no=rnd, event=name, data=data,
            prev_hash="", hash="",
        )  # fmt: skip

    events = [
        ev(1, "session.start", {}),
        ev(2, "baseline", {"objectives": [100.0, 100.0]}),
        ev(3, "judged", {"gain": -0.25, "low": None, "high": None, "best_median": None}, 1),
        ev(4, "decision", {"kept": False, "changes": {"jit": "off"}}, 1),
    ]
    t = curve_of(events).trials[0]
    assert t.screen_only and t.objective == pytest.approx(75.0) and t.low is None and t.best is None


def test_html_of_a_session_that_failed_before_its_baseline(tmp_path: Path) -> None:
    """Found by the breaker: report --format html said only "nothing to plot" for a session that failed at
    --start-from. The page renders with the failure and says why there is no curve."""
    with Journal(tmp_path / "journal.db") as journal:
        journal.append("s-failed", "session.start", {"target": "postgresql", "workload": "pgbench"})
        journal.append("s-failed", "failure", {"phase": "restart", "message": "server did not start: FATAL x"})
        journal.append("s-failed", "session.end", {"status": "failed", "reason": "start-from failed"})
    r = cli(tmp_path, "report", "s-failed", "--format", "html")
    assert r.returncode == 0, r.stderr
    assert "no curve: nothing to plot" in r.stdout and "server did not start: FATAL x" in r.stdout
    assert "<strong>status:</strong> failed" in r.stdout


def _legend(curve: Curve) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from agenticdb.report.plot import _axes

    fig, ax = plt.subplots()
    try:
        _axes(ax, curve, "t")
        return list(ax.get_legend_handles_labels()[1])
    finally:
        plt.close(fig)


def test_legend_says_only_what_happened() -> None:
    """Issue 39: nothing kept → no "kept change" and one line for baseline = best, not three at one value."""
    flat = Curve("tps", True, 100.0, trials=[Trial(1, 30.0, 95.0, 90.0, 101.0)], steps=[(0, 100.0), (60, 100.0)])
    flat.best = 100.0
    labels = _legend(flat)
    assert "kept change" not in labels and "objective in effect" not in labels, labels
    assert [x for x in labels if x.startswith(("baseline", "best"))] == ["baseline = best 100 (nothing kept)"]
    kept = Curve(
        "tps", True, 100.0, trials=[Trial(1, 30.0, 130.0, 120.0, 140.0, kept=True)], steps=[(0, 100.0), (30, 130.0)]
    )
    kept.best = 130.0
    labels = _legend(kept)
    assert {"kept change", "objective in effect", "baseline 100", "best 130"} <= set(labels), labels
    assert "trial (interval)" in _legend(flat) and "trial (interval)" not in labels  # the kept one is the star
    none = Curve("tps", True, 100.0, trials=[], steps=[(0, 100.0)])
    none.best = 100.0
    assert "trial (interval)" not in _legend(none)  # a session that tried nothing draws no trial
