"""The race's budget fit and its check before the first screen use one cost prior for a race of one: pg-tpch's
race of 2026-12-07 07:18 was admitted by the fit (296 s of 298 s left) and refused at its first screen (357 s:
the restart and its cold warm-up counted twice), so the session raced nothing."""

from __future__ import annotations

import pytest

from agenticdb.config.loop_section import LoopConfig
from agenticdb.loop.race_cost import CostBasis, opening_cost_s, screen_and_proof_s
from agenticdb.models import ApplyMode, KnobSpec, Measurement

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


def test_a_prewarmed_query_set_prices_a_restart_without_its_warm_up_pass() -> None:
    # pg-tpch's race of one at 8 minutes: 3 runs of 56 s, pair 1's best run the baseline's last; each of the two
    # switches to a restart-only set used to add a whole pass (295.5 s; the fit had ~290 s left after the baseline)
    restart = {"shared_buffers": "32MB", "effective_cache_size": "128MB"}
    cold = screen_and_proof_s(CostBasis(RUNS, 0.0, 2, True, False), restart, {}, [restart], SPECS, True)
    warm = screen_and_proof_s(CostBasis(RUNS, 0.0, 2, True, False, prewarmed=True), restart, {}, [restart], SPECS, True)
    assert cold - warm == pytest.approx(2 * 56.10), (cold, warm)
    dynamic = {"effective_cache_size": "128MB"}
    assert screen_and_proof_s(
        CostBasis(RUNS, 0.0, 2, True, False, prewarmed=True), dynamic, {}, [dynamic], SPECS, True
    ) == (
        pytest.approx(screen_and_proof_s(CostBasis(RUNS, 0.0, 2, True, False), dynamic, {}, [dynamic], SPECS, True))
    )  # no restart, nothing to save


def test_the_cost_basis_is_prewarmed_when_a_baseline_run_was() -> None:
    loop = LoopConfig()
    runs = [Measurement(workload="tpch", objective=56.1, total_time_s=56.1, per_query_s={"q01": 5.0})]
    assert not CostBasis.of(runs, 0.0, loop).prewarmed
    loaded = [
        runs[0].model_copy(update={"prewarm": "pg_prewarm: 16 relations, 115.2 MiB in 0.4 s (shared_buffers full)"})
    ]
    assert CostBasis.of(loaded, 0.0, loop).prewarmed
    refused = [runs[0].model_copy(update={"prewarm": "prewarm not available: refused; time warm-up only"})]
    assert not CostBasis.of(refused, 0.0, loop).prewarmed
