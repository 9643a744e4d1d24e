"""The race's budget fit and its check before the first screen use one cost prior for a race of one: pg-tpch's
race of 2026-12-07 07:18 was admitted by the fit (296 s of 298 s left) and refused at its first screen (357 s:
the restart and its cold warm-up counted twice), so the session raced nothing."""

from __future__ import annotations

import pytest

from agenticdb.config.loop_section import LoopConfig
from agenticdb.loop.next_move import RESTART_PRIOR_S
from agenticdb.loop.race_cost import (
    CostBasis,
    opening_cost_s,
    proof_cost_s,
    screen_and_proof_s,
    screen_cost_s,
    session_floor_s,
)
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


def test_the_session_floor_prices_a_query_set_run_as_a_pass_from_the_cost_basis() -> None:
    """The start's warning floor (``session_floor_s``) used to price every run as a fixed-duration run (query set
    False): a query set's warm-up is a whole pass, so a TPC-H floor counted 5 s where a 60-s pass is spent."""
    pass_s, warmup_s = 60.0, 5.0
    queries = CostBasis([pass_s], warmup_s, 2, query_set=True, reset_each_run=False)
    baseline, decision = session_floor_s(queries, 3)
    assert baseline == pytest.approx(2 * (pass_s + pass_s))  # the 2 fewest baseline runs, each after a warm-up pass
    assert decision == pytest.approx(3 * (pass_s + pass_s))  # 2 pairs, 3 runs, the baseline's last reused
    # the same prior as the session budget's before round 1 (SessionBudget._cost_prior)
    assert decision == pytest.approx(proof_cost_s(queries, restarts=False, lone=False, reused_best_run=True))
    timed = CostBasis([pass_s], warmup_s, 2, query_set=False, reset_each_run=False)
    assert session_floor_s(timed, 3) == pytest.approx((2 * (pass_s + warmup_s), 3 * (pass_s + warmup_s)))
    # reset each run: every run starts cold after a restart; a query set's cold warm-up is a pass unless prewarmed
    reset = CostBasis([pass_s], warmup_s, 2, query_set=True, reset_each_run=True)
    assert session_floor_s(reset, 3)[0] == pytest.approx(2 * (pass_s + pass_s + reset.restart_s))
    reset_warm = CostBasis([pass_s], 0.0, 2, query_set=True, reset_each_run=True, prewarmed=True, prewarm_s=4.0)
    assert session_floor_s(reset_warm, 3)[0] == pytest.approx(2 * (pass_s + 4.0 + reset_warm.restart_s))
    assert session_floor_s(CostBasis([], warmup_s, 2, True, False), 3) == (0.0, 0.0)


def _timed(prewarm_s: float | None, total_s: float = 56.1) -> Measurement:
    note = None if prewarm_s is None else f"pg_prewarm: 16 relations, 115.2 MiB in {prewarm_s:.1f} s (all loaded)"
    m = Measurement(workload="tpch", objective=total_s, total_time_s=total_s, per_query_s={"q01": 5.0})
    return m.model_copy(update={"prewarm": note, "prewarm_s": prewarm_s})


def test_the_cost_basis_takes_the_prewarm_time_the_baseline_recorded() -> None:
    loop = LoopConfig()
    assert CostBasis.of([_timed(None), _timed(None)], 0.0, loop).prewarm_s == 0.0  # none recorded: nothing added
    assert CostBasis.of([_timed(12.5), _timed(None), _timed(None)], 0.0, loop).prewarm_s == 12.5
    assert CostBasis.of([_timed(3.0), _timed(19.0), _timed(7.0)], 0.0, loop).prewarm_s == 7.0  # the upper median


def test_a_restart_prior_counts_the_prewarm_step_before_each_run_after_a_restart() -> None:
    """pg_prewarm runs after every restart, before the warm-up (up to 20 s of loading): no prior counted it."""
    prewarm_s = 12.5
    for query_set in (True, False):
        plain = CostBasis(RUNS, 5.0, 2, query_set, False, prewarmed=True)
        timed = CostBasis(RUNS, 5.0, 2, query_set, False, prewarmed=True, prewarm_s=prewarm_s)
        # a decision with restarts: 2 pairs on fresh runs, 4 runs, 3 of them right after a restart (the trial's
        # and one switch per pair); the revert's restart has no run after it in the round
        extra = proof_cost_s(timed, True, False, False) - proof_cost_s(plain, True, False, False)
        assert extra == pytest.approx(3 * prewarm_s), query_set
        assert proof_cost_s(timed, False, False, False) == pytest.approx(proof_cost_s(plain, False, False, False))
        assert screen_cost_s(timed, True) - screen_cost_s(plain, True) == pytest.approx(prewarm_s)
        assert screen_cost_s(timed, False) == pytest.approx(screen_cost_s(plain, False))  # no restart, no prewarm

        def fitted(prewarm: float, query_set: bool = query_set) -> float:
            """The opening's fit for a two-screen race with one restart and a restarting proof."""
            return opening_cost_s(
                RUNS,
                5.0,
                2,
                2,
                race_restarts=1,
                proof_restarts=True,
                query_set=query_set,
                reset_each_run=False,
                prewarmed=True,
                prewarm_s=prewarm,
            )

        restart = {"shared_buffers": "32MB"}
        race = [restart, {"effective_cache_size": "128MB"}]
        fit = fitted(prewarm_s)
        at_screen = screen_and_proof_s(timed, restart, {}, race, SPECS, False)
        assert fit - fitted(0.0) == pytest.approx(
            4 * prewarm_s
        )  # the restarted screen and the proof's 3 runs after a restart
        assert at_screen == pytest.approx(screen_cost_s(timed, True) + proof_cost_s(timed, True, False, False))
    # every run after a reset of the data starts after a restart: each pays the prewarm
    reset = CostBasis(RUNS, 5.0, 2, False, True, prewarm_s=prewarm_s)
    no_prewarm = CostBasis(RUNS, 5.0, 2, False, True)
    assert proof_cost_s(reset, False, False, True) - proof_cost_s(no_prewarm, False, False, True) == pytest.approx(
        3 * prewarm_s
    )


def test_a_restart_costs_what_this_session_measured_once_it_measured_one() -> None:
    """pg-pgbench-badstart at 4 min (2026-12-07 17:16): a +252 % screen's proof was not started, 127 s by the prior
    against 125 s left, 15 s of it for 3 restarts at RESTART_PRIOR_S while PostgreSQL restarted in under 1 s."""
    loop = LoopConfig()
    runs = [Measurement(workload="pgbench", objective=300.0, duration_s=40.0)] * 2
    prior = CostBasis.of(runs, 8.0, loop)
    measured = CostBasis.of(runs, 8.0, loop, restarts_s=[0.6, 0.9])
    assert prior.restart_s == RESTART_PRIOR_S and measured.restart_s == 0.9  # the longest measured
    saved = proof_cost_s(prior, True, True, True) - proof_cost_s(measured, True, True, True)
    assert saved == pytest.approx(3 * (RESTART_PRIOR_S - 0.9))  # the switch to best, to candidate, the revert
    assert proof_cost_s(measured, True, True, True) < 125.0 <= proof_cost_s(prior, True, True, True)
