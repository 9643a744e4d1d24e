"""A session whose baseline is one run (a short budget's, ``loop.baseline``; here ``baseline_runs = 1``) all the
way through, over the in-memory target (tests/memtarget.py) with real journal and Memory Book files: one run
has no spread, so the run CV on record is ``next_move.noise_cv``'s conservative prior (10 %). Every text that
quotes the baseline's noise says it was not measured: the story, the report, the end summary and the LLM
planner's profile said "noise CV 10.0%" ("measured noise CV 10.0% per run") as if a run CV had been read."""

from __future__ import annotations

import io
import json
from pathlib import Path

from memtarget import InMemoryTarget, ScriptedPlanner, ScriptedWorkload
from rich.console import Console
from typer.testing import CliRunner

from agenticdb.cli import app
from agenticdb.cli.tune_cmd import _summary
from agenticdb.config import Settings
from agenticdb.config.loop_section import LoopConfig
from agenticdb.config.sections import StorageConfig, WorkloadConfig
from agenticdb.logs import configure_logging
from agenticdb.loop.session import SessionResult, TuningSession
from agenticdb.models import Proposal
from agenticdb.models.planning import PlanningContext
from agenticdb.planner.context import render_profile
from agenticdb.store.journal import Journal
from agenticdb.store.memory import MemoryBook


def objective(values: dict[str, str]) -> float:
    return 150.0 if values.get("work_mem") == "8MB" else 100.0


class _Seeing(ScriptedPlanner):
    """The scripted planner, keeping every context it was given (what an LLM planner's prompt is built from)."""

    def __init__(self, script: list[dict[str, str] | Exception]) -> None:
        super().__init__(script)
        self.contexts: list[PlanningContext] = []

    def propose(self, ctx: PlanningContext) -> Proposal:
        self.contexts.append(ctx)
        return super().propose(ctx)


def _session(home: Path) -> tuple[SessionResult, list[PlanningContext]]:
    target = InMemoryTarget()
    cfg = Settings(
        workload=WorkloadConfig(kind="pgbench", duration_s=1, warmup_s=0),
        loop=LoopConfig(opening=False, max_rounds=2, baseline_runs=1, plateau_rounds=5),
        storage=StorageConfig(home=home),
    )
    planner = _Seeing([{"work_mem": "8MB"}, {"random_page_cost": "1.1"}])
    with Journal(home / "journal.db") as journal, MemoryBook(home / "memory.db") as memory:
        result = TuningSession(cfg, target, ScriptedWorkload(target, objective), planner, journal, memory).run()
    return result, list(planner.contexts)


def _cli(home: Path, *args: str) -> str:
    try:
        r = CliRunner().invoke(app, [*args, "--home", str(home)])
    finally:
        configure_logging()  # the root callback bound structlog to the runner's stream
    assert r.exit_code == 0, r.stderr
    return r.stdout


def test_a_one_run_baseline_is_never_quoted_as_a_measured_noise(tmp_path: Path) -> None:
    result, contexts = _session(tmp_path)
    assert result.status == "completed" and result.rounds[0].kept, result.reason
    assert result.baseline_disturbed == (0, 1) and result.noise_cv == 0.10  # the prior, no spread measured
    said = "not measured (1 baseline run; 10 % assumed until the pairs measure it)"

    story = _cli(tmp_path, "journal", "show")
    assert f"noise CV {said}" in " ".join(story.split()), story
    assert "noise CV 10.0%" not in story
    report = _cli(tmp_path, "report")
    assert f"- **noise CV:** {said} (baseline runs: 100.000)" in report, report
    data = json.loads(_cli(tmp_path, "report", "--format", "json"))
    assert data["baseline_runs"] == [100.0]  # the record keeps the figure; the texts say what it is
    plot = tmp_path / "curve.png"
    _cli(tmp_path, "report", "--plot", str(plot))
    assert plot.stat().st_size > 10_000

    out = io.StringIO()
    _summary(Console(file=out, soft_wrap=True, width=300), Settings(), result)
    assert f"noise CV {said}" in out.getvalue() and "measured noise CV" not in out.getvalue(), out.getvalue()
    assert contexts and "assumed, not measured (one baseline run)" in render_profile(contexts[0])
