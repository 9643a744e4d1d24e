"""The session's cost priors (issue 36 point 5), seconds, all from one :class:`CostBasis` of the baseline's runs:
what screens, their warm-ups and restarts and the proof after them cost at least (``next_move.round_cost_prior``),
the smallest decision the session budget asks before a round (``loop.budget.SessionBudget``) and the least budget
the start's warning asks for (:func:`session_floor_s`). The opening's budget fit (``OpeningRun._fit_budget``) and
its checks before each screen and before the proof ask these.

A query set's warm-up is one unmeasured pass; after a restart it is a pass too unless the baseline's runs show
that the buffer cache is loaded after a restart (``CostBasis.prewarmed``, ``Executor.measure``). The warm-up after
a restart includes the pg_prewarm step's own time as the baseline's runs measured it (``CostBasis.prewarm_s``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agenticdb.config.loop_section import LoopConfig
from agenticdb.host.prewarm import loaded
from agenticdb.loop.next_move import RESTART_PRIOR_S, round_cost_prior, warm_costs
from agenticdb.loop.race import restart_names
from agenticdb.models import KnobSpec, Measurement


def opening_cost_s(
    run_durations_s: list[float],
    warmup_s: float,
    screens: int,
    min_pairs: int,
    *,
    race_restarts: int,
    proof_restarts: bool,
    query_set: bool,
    reset_each_run: bool,
    restart_s: float = RESTART_PRIOR_S,
    reused_best_run: bool = False,
    prewarmed: bool = False,
    prewarm_s: float = 0.0,
) -> float:
    """What the opening costs at least (seconds): ``screens`` screen runs with their warm-ups and the race's
    restarts, then the proof's smallest decision on fresh pairs (``next_move.round_cost_prior`` with
    restarts, no reused best run). 0 when no baseline run was measured.

    One screen is a round's cost (``round_cost_prior``, the screen included): a lone candidate was not
    selected from several noisy runs, so its screen is pair 1's candidate run (``OpeningRun._prove``) and,
    with ``reused_best_run``, the baseline's last run right before it pair 1's best run. ``prewarmed``: a query
    set's restart costs no warm-up pass; ``prewarm_s``: the pg_prewarm step every run after a restart pays first
    (seconds, ``next_move.warm_costs``)."""
    if not run_durations_s:
        return 0.0
    if screens == 1:
        return round_cost_prior(
            run_durations_s,
            warmup_s,
            min_pairs,
            reused_best_run,
            restarts=proof_restarts or race_restarts > 0,
            restart_s=restart_s,
            query_set=query_set,
            reset_each_run=reset_each_run,
            prewarmed=prewarmed,
            prewarm_s=prewarm_s,
        )
    ordered = sorted(run_durations_s)
    run = ordered[len(ordered) // 2]  # as next_move.round_cost_prior: the upper median
    warm, cold = warm_costs(run, warmup_s, query_set, prewarmed, prewarm_s)
    cold_screens = screens if reset_each_run else min(race_restarts, screens)
    race = screens * run + cold_screens * cold + (screens - cold_screens) * warm + race_restarts * restart_s
    proof = round_cost_prior(
        run_durations_s,
        warmup_s,
        min_pairs,
        False,
        restarts=proof_restarts,
        restart_s=restart_s,
        query_set=query_set,
        reset_each_run=reset_each_run,
        prewarmed=prewarmed,
        prewarm_s=prewarm_s,
    )
    return race + proof


@dataclass(frozen=True)
class CostBasis:
    """What the session's cost priors are computed from: the baseline's run times (seconds, the query set's
    total when it has one), ``workload.warmup_s``, ``loop.min_pairs``, whether a run is a query set,
    whether each run resets the data (``loop.reset_data``), whether the baseline's runs were prewarmed
    (``prewarmed``: pg_prewarm loaded the buffer cache, ``host.prewarm.loaded``) and how long their prewarm
    step took (``prewarm_s``, seconds: the upper median of the runs' ``Measurement.prewarm_s``, 0 when none
    recorded one), which every run after a restart pays before its warm-up (``next_move.warm_costs``)."""

    run_durations_s: list[float]
    warmup_s: float
    min_pairs: int
    query_set: bool
    reset_each_run: bool
    restart_s: float = RESTART_PRIOR_S
    prewarmed: bool = False
    prewarm_s: float = 0.0

    @classmethod
    def of(
        cls, baseline: Sequence[Measurement], warmup_s: float, loop: LoopConfig, restarts_s: Sequence[float] = ()
    ) -> CostBasis:
        """From the baseline's runs, ``workload.warmup_s`` (seconds) and ``[loop]``; ``restarts_s``: the wall times
        of the restarts this session measured (``Service.restart_seconds``), whose longest is each restart's cost
        once there is one; before that ``RESTART_PRIOR_S`` (5 s). A PostgreSQL restart measured 0.5–1 s here,
        and the prior's 15 s for a lone screen's proof (3 restarts) left pg-pgbench-badstart's 4-minute proof
        2 s short (127 s against 125 s left, 2026-12-07 17:16) after a +252 % screen.

        ``prewarm_s``: the executor prewarms before its first run (a benchmark's always) and after every restart,
        so a baseline usually records one prewarm (every run with ``loop.reset_data``). The first run's may find
        part of the data already cached after a load and so understate a restart's; it is the measured figure the
        session has (a prewarm is bounded by ``executor.PREWARM_MAX_S`` of loading)."""
        durations = [m.total_time_s or m.duration_s for m in baseline]
        query_set = any(m.per_query_s for m in baseline)
        prewarmed = any(loaded(m.prewarm) for m in baseline)
        timed = sorted(m.prewarm_s for m in baseline if m.prewarm_s is not None)
        prewarm_s = timed[len(timed) // 2] if timed else 0.0  # as next_move.round_cost_prior: the upper median
        restart_s = max(restarts_s) if restarts_s else RESTART_PRIOR_S
        return cls(
            durations,
            warmup_s,
            loop.min_pairs,
            query_set,
            loop.reset_data,
            restart_s=restart_s,
            prewarmed=prewarmed,
            prewarm_s=prewarm_s,
        )


def screen_cost_s(basis: CostBasis, restart: bool) -> float:
    """One screen's cost prior (seconds), as :func:`opening_cost_s` counts each: the baseline's (upper)
    median run with its warm-up, the cold one after a restart (``restart``: the switch to it restarts the
    server, ``restart_s`` more) or a data reset. 0 when no baseline run was measured."""
    if not basis.run_durations_s:
        return 0.0
    run = sorted(basis.run_durations_s)[len(basis.run_durations_s) // 2]
    warm, cold = warm_costs(run, basis.warmup_s, basis.query_set, basis.prewarmed, basis.prewarm_s)
    return run + (basis.restart_s if restart else 0.0) + (cold if restart or basis.reset_each_run else warm)


def proof_cost_s(basis: CostBasis, restarts: bool, lone: bool, reused_best_run: bool) -> float:
    """The proof's smallest decision still to measure (seconds): ``next_move.round_cost_prior``; for a
    ``lone`` screen (pair 1's candidate run, already measured) less that screen's warm run."""
    prior = round_cost_prior(
        basis.run_durations_s,
        basis.warmup_s,
        basis.min_pairs,
        reused_best_run,
        restarts=restarts,
        restart_s=basis.restart_s,
        query_set=basis.query_set,
        reset_each_run=basis.reset_each_run,
        prewarmed=basis.prewarmed,
        prewarm_s=basis.prewarm_s,
    )
    return max(prior - screen_cost_s(basis, False), 0.0) if lone else prior


def screen_and_proof_s(
    basis: CostBasis,
    screen: dict[str, str],
    in_effect: dict[str, str],
    race: Sequence[dict[str, str]],
    specs: dict[str, KnobSpec],
    reused_best_run: bool,
) -> float:
    """What the next screen and the proof after it cost at least (seconds): the screen of ``screen``'s changes,
    switched to from ``in_effect``'s (a restart when either sets a restart-only knob), then the proof's smallest
    decision (restarts when any of the ``race``'s candidates needs one). A race of one is proven as a round
    (``opening_cost_s``): its screen is pair 1's candidate run, the start's last run its best run when
    ``reused_best_run``."""
    switch, proof_restarts = bool(restart_names([screen, in_effect], specs)), bool(restart_names(race, specs))
    if len(race) == 1:
        # the same prior as the budget fit's (``opening_cost_s`` with one screen): pg-tpch's race of 2026-12-07
        # 07:18 was admitted by the fit at 296 s of 298 s left, then refused at its first screen at 357 s —
        # the restart and its cold warm-up counted twice, once in the screen and once in the proof's round
        return opening_cost_s(
            basis.run_durations_s,
            basis.warmup_s,
            1,
            basis.min_pairs,
            race_restarts=int(switch),
            proof_restarts=proof_restarts,
            query_set=basis.query_set,
            reset_each_run=basis.reset_each_run,
            restart_s=basis.restart_s,
            reused_best_run=reused_best_run,
            prewarmed=basis.prewarmed,
            prewarm_s=basis.prewarm_s,
        )
    return screen_cost_s(basis, switch) + proof_cost_s(basis, proof_restarts, False, False)


def session_floor_s(basis: CostBasis, baseline_runs: int) -> tuple[float, float]:
    """(the baseline's cost, the smallest decision's cost), seconds, before anything was measured: the
    baseline's fewest runs (2, or ``baseline_runs`` when fewer: ``baseline.measure_baseline`` stops at 2
    when a third would leave no room for a decision), each the ``basis``'s (upper) median run with its warm-up
    (``next_move.warm_costs``; with ``reset_each_run`` the restart's ``restart_s`` and the warm-up after it), then
    the smallest decision whose pair 1 reuses the baseline's last run, no restart (:func:`proof_cost_s`: the
    session budget's prior before round 1, ``SessionBudget._cost_prior``). Their sum is the least time budget that
    lets a session judge one change; a first data load and each run's start-up come on top. (0, 0) without a run.

    Was ``next_move.session_floor_s(run_s, warmup_s, …)``, which priced every run as a run of a fixed duration
    (query set False, no prewarm): for a query set (TPC-H) a run is a whole pass of its queries and its warm-up
    another pass (``warm_costs``), so that floor undercounted each run's warm-up (``warmup_s`` instead of a
    pass) and, with ``reset_each_run``, the cold pass after each reset. It now reads the same :class:`CostBasis`
    as every other prior, so the floor and the budget's checks before round 1 agree on one workload's figures."""
    if not basis.run_durations_s:
        return 0.0, 0.0
    run = sorted(basis.run_durations_s)[len(basis.run_durations_s) // 2]
    warm, cold = warm_costs(run, basis.warmup_s, basis.query_set, basis.prewarmed, basis.prewarm_s)
    per_run = run + (cold + basis.restart_s if basis.reset_each_run else warm)
    decision = proof_cost_s(basis, restarts=False, lone=False, reused_best_run=True)
    return min(baseline_runs, 2) * per_run, decision


__all__ = ["CostBasis", "opening_cost_s", "proof_cost_s", "screen_and_proof_s", "screen_cost_s", "session_floor_s"]
