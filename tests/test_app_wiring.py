"""The wiring of app.py passes the configuration into the parts it builds (issue 37)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agenticdb.app import build_planner, open_stores
from agenticdb.config import load_config
from agenticdb.planner.heuristic import HeuristicPlanner
from agenticdb.planner.search import RefiningPlanner


@pytest.mark.parametrize("search", [False, True])
def test_loop_min_gain_reaches_the_heuristic_planner(tmp_path: Path, search: bool) -> None:
    # Before issue 37 app.py built HeuristicPlanner() with its default 0.03, whatever loop.min_gain said.
    cfg = load_config(None, {"storage": {"home": tmp_path}, "loop": {"min_gain": 0.11, "search": search}})
    journal, memory = open_stores(cfg)
    try:
        planner = build_planner(cfg, memory, journal, "s1")
        inner = planner.inner if isinstance(planner, RefiningPlanner) else planner
        assert isinstance(planner, RefiningPlanner) is search
        assert isinstance(inner, HeuristicPlanner)
        assert inner.min_gain == 0.11
    finally:
        journal.close()
        memory.close()
