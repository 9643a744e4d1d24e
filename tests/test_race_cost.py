"""The race's budget fit and its check before the first screen use one cost prior for a race of one: pg-tpch's
race of 2026-12-07 07:18 was admitted by the fit (296 s of 298 s left) and refused at its first screen (357 s:
the restart and its cold warm-up counted twice), so the session raced nothing."""

from __future__ import annotations

import pytest

from agenticdb.loop.race import CostBasis, opening_cost_s, screen_and_proof_s
from agenticdb.models import ApplyMode, KnobSpec

SPECS = {
    "shared_buffers": KnobSpec(name="shared_buffers", vartype="integer", unit="8kB", apply=ApplyMode.restart),
    "effective_cache_size": KnobSpec(
        name="effective_cache_size", vartype="integer", unit="8kB", apply=ApplyMode.reload
    ),
}
RUNS = [59.02, 56.10, 50.96]  # pg-tpch's baseline at 07:15 (total time of the query set, s)


@pytest.mark.parametrize("reused", [True, False])
@pytest.mark.parametrize(
    "changes", [{"shared_buffers": "32MB", "effective_cache_size": "128MB"}, {"effective_cache_size": "128MB"}]
)
def test_a_race_of_one_costs_at_its_screen_what_the_fit_counted(changes: dict[str, str], reused: bool) -> None:
    basis = CostBasis(RUNS, 0.0, 2, query_set=True, reset_each_run=False)
    restart = "shared_buffers" in changes
    fit = opening_cost_s(
        RUNS,
        0.0,
        1,
        2,
        race_restarts=int(restart),
        proof_restarts=restart,
        query_set=True,
        reset_each_run=False,
        reused_best_run=reused,
    )
    at_screen = screen_and_proof_s(basis, changes, {}, [changes], SPECS, reused)
    assert at_screen == pytest.approx(fit), (at_screen, fit)
    assert fit > 0
