"""The loop's next move after a round (docs/measurement.md "Decisions"): ``decide`` (continue, redirect,
switch_to_os or terminate; pure), the figures of a stop, search convergence, and the numbers the decisions
use: run-noise CV, relative gain, round cost priors and the room left in the time budget. The keep-or-revert
protocol of one candidate (``assess``) is :mod:`agenticdb.loop.auditor`."""

from __future__ import annotations

import math
from dataclasses import dataclass

from agenticdb.measure import series
from agenticdb.models import Decision, Layer, RoundOutcome

#: A restart's cost before the session measured one (seconds): PostgreSQL restarts in ~0.6 s and MariaDB in
#: ~1.4 s on the idle reference host (docs MEASUREMENT.md "Start-up costs"); the shutdown checkpoint after a
#: write run and a loaded 2-core host make it several seconds (judgement, kept on the side of caution).
RESTART_PRIOR_S = 5.0


def noise_cv(values: list[float], floor: float = 0.03) -> float:
    """Coefficient of variation (stdev / mean) of repeated measurements of one configuration.

    With fewer than two values the spread is unknown, so the conservative 0.10 is used (docs/measurement.md
    saw 5–19 % on this kind of host). ``floor`` keeps a lucky quiet baseline from making every wiggle
    "significant".
    """
    spread = series.cv(values)
    return 0.10 if spread is None else max(spread, floor)


def relative_gain(candidate: float, best: float, higher_is_better: bool) -> float:
    """Relative improvement of ``candidate`` over ``best`` (positive = better)."""
    if best == 0:
        return 0.0
    if higher_is_better:
        return candidate / best - 1.0
    return best / candidate - 1.0 if candidate else 0.0


@dataclass(frozen=True)
class LoopState:
    """What ``decide`` needs beyond the round history."""

    stage: Layer
    rounds_done: int
    max_rounds: int
    elapsed_s: float
    time_budget_s: float
    plateau_rounds: int
    os_stage_enabled: bool
    planner_plateau: bool = False
    search_patience: int = 0
    """>0: the planner refines with search (``agenticdb.planner.search``); the session stops when this
    many search suggestions in a row were measured without a kept gain, instead of ``plateau_rounds``."""
    round_cost_s: float = 0.0
    """Median wall time of this session's measured rounds (s); 0 = none yet. A round is not started when
    less time than this is left: it could not finish inside the budget (issue 14: a session overran an
    8-min budget by 194 s by starting a round 40 s before its end)."""
    not_started: str = ""
    """Why the round's measured work was not started (``no_room_to_start``'s reason: its trial's cost prior,
    a restart's included, did not fit the time left), or '': the session terminates with it."""


def decision_runs(min_pairs: int, reused_best_run: bool) -> int:
    """Runs the smallest decision measures: ``min_pairs`` interleaved pairs, the screen included, less
    the best run of pair 1 when a best run measured right before the trial stands for it
    (``adoptable_prior``: the baseline's last run before round 1)."""
    return 2 * min_pairs - (1 if reused_best_run else 0)


def smallest_decision_label(min_pairs: int, reused_best_run: bool, best_run_measured: bool = True) -> str:
    """The smallest decision named with what it counts, for ``no_room_to_start``: "the smallest decision's (2 pairs,
    3 runs)", and when no best run measured right before the trial stands for pair 1's (``reused_best_run``
    False: the last one was disturbed, or none was measured) "(2 pairs, 4 runs, pair 1's best run among them: the
    last one was disturbed)" — the start's warning (``race_cost.session_floor_s``) counts 3, and a new user read
    both."""
    runs = decision_runs(min_pairs, reused_best_run)
    own = (
        ""
        if reused_best_run
        else ", pair 1's best run among them" + (": the last one was disturbed" if best_run_measured else "")
    )
    return f"the smallest decision's ({min_pairs} pairs, {runs} runs{own})"


def budget_that_pays(elapsed_s: float, decision_s: float) -> str:
    """ "; a time budget of at least 154s (54s spent before it on …) would have paid for one decision": the
    seconds spent so far (``elapsed_s``: the data load, the baseline and its repeats of disturbed runs, which the
    start's warning does not count) plus the decision's cost prior (``decision_s``), rounded up."""
    spent = f"{elapsed_s:.0f}s spent before it on the data load, the baseline and its repeats of disturbed runs"
    return (
        f"; a time budget of at least {math.ceil(elapsed_s + decision_s)}s ({spent}) would have paid for one decision"
    )


def pairs_within(cap_s: float, run_cost_s: float, reused_best_run: bool) -> int | None:
    """How many pairs a decision can measure in ``cap_s`` seconds when one run (with its warm-up, reset or
    restart) costs ``run_cost_s``: pair 1 needs the best's run after the screen (none when the best run
    before the trial stands for it), every further pair two runs. None when the cost is unknown (≤ 0).

    ``agenticdb.measure.sequential.SequentialPolicy.planned_pairs`` takes it: the looks the error rate is
    split over are then the ones the budget allows (issue 36: an 8-minute TPC-H session's proof had room
    for 2 pairs, yet each look paid α / 5 for six pairs it could never measure)."""
    if run_cost_s <= 0:
        return None
    first = 0.0 if reused_best_run else run_cost_s
    if cap_s < first:
        return 1
    return 1 + int((cap_s - first) // (2 * run_cost_s))


RUN_SPREAD = 0.15
"""How much longer than the mean of the runs so far the next run may take, where the budget decides whether a
third baseline run still leaves room for a decision (``baseline.measure_baseline``): pg-tpch's third baseline
run took 91.6 s after 78.3 and 79.1 s (+16 %, 2026-12-07 09:56), left 228 s for a 237-s decision, and the
8-minute session judged nothing; TPC-H SF 1 passes varied by ±10 % (benchmarks/README.md, bench_tpch_probe)."""


def round_cost_prior(
    run_durations_s: list[float],
    warmup_s: float,
    min_pairs: int,
    reused_best_run: bool = False,
    *,
    restarts: bool = False,
    restart_s: float = 0.0,
    query_set: bool = False,
    reset_each_run: bool = False,
    prewarmed: bool = False,
    prewarm_s: float = 0.0,
) -> float:
    """What a round costs at least before any round is measured (seconds): ``decision_runs`` runs, each
    as long as the baseline's median run (``Measurement.duration_s``, or the TPC-H query set's time) plus
    its warm-up (:func:`warm_costs`). 0 when no baseline run was measured.

    A change that needs a restart (``restarts``) restarts the server at the trial, at every switch between
    the two configurations (one per pair) and at the revert: each costs ``restart_s`` and the longer warm-up
    after it; for a query set that warm-up is a whole unmeasured pass (issue 36: pg-tpch's one round cost
    340 s against 171 s expected), unless ``prewarmed`` (:func:`warm_costs`); every run after a restart also pays
    the pg_prewarm step before it (``prewarm_s``, seconds, :func:`warm_costs`). ``reset_each_run``
    (``loop.reset_data``): every run starts after a restart.

    A session that spent its budget on the baseline (disturbed runs repeated on a busy host) used to start
    round 1 with 32 s of a 240-s budget left and end at 488 s (issue 14)."""
    if not run_durations_s:
        return 0.0
    ordered = sorted(run_durations_s)
    run = ordered[len(ordered) // 2]
    runs = decision_runs(min_pairs, reused_best_run)
    warm, cold = warm_costs(run, warmup_s, query_set, prewarmed, prewarm_s)
    switches = min(runs, min_pairs + (0 if reused_best_run else 1)) if restarts else 0
    cold_runs = runs if reset_each_run else switches
    restart_cost = (switches + 1) * max(restart_s, 0.0) if restarts else 0.0
    return runs * run + cold_runs * cold + (runs - cold_runs) * warm + restart_cost


def warm_costs(
    run_s: float, warmup_s: float, query_set: bool, prewarmed: bool = False, prewarm_s: float = 0.0
) -> tuple[float, float]:
    """(the warm-up before a run, the warm-up after a restart), seconds, as ``Executor.measure`` does them:
    ``warmup_s``, or after a restart ``max(3 s, 2 × warmup_s)``. A query set warms up with one unmeasured
    pass of the set instead (``workloads.tpch``: any warm-up > 0 is one pass), so after a restart too unless
    ``prewarmed``: the baseline's runs show pg_prewarm loading the buffer cache after a restart, and the executor
    then warms a query set up as before any run (docs/measurement.md "Warm-up after a restart").

    The warm-up after a restart includes the pg_prewarm step the executor runs first (``prewarm_s``, seconds:
    the baseline's measured ``Measurement.prewarm_s``, up to ``executor.PREWARM_MAX_S`` of loading; 0 when no
    run recorded one, e.g. MariaDB, which reloads its own buffer pool)."""
    prewarm = max(prewarm_s, 0.0)
    if query_set:
        warm = run_s if warmup_s > 0 else 0.0
        return warm, (warm if prewarmed else run_s) + prewarm
    return max(warmup_s, 0.0), max(3.0, 2 * warmup_s) + prewarm


def noise_remedies(duration_s: float, max_pairs: int, reset_data: bool, query_set: bool) -> list[str]:
    """What the user can still do against a noisy baseline (the ``noise.high`` warning), leaving out what is
    already in effect. ``duration_s``: ``workload.duration_s`` (seconds), named only where it applies: a query
    set (``Measurement.per_query_s``: TPC-H) runs its queries once per run whatever ``--duration`` says, so it
    is offered a larger ``--scale`` instead (longer queries, against which start-up and timer jitter weigh
    less) and fewer disturbances."""
    if query_set:
        out = ["a larger --scale (--duration does not apply: a run is one pass of the query set)"]
    else:
        out = [f"lengthen --duration (now {duration_s:g} s)"]
    if max_pairs < 8:
        out.append(f"allow more pairs (--max-pairs, now {max_pairs})")
    if not reset_data:
        out.append("use --reset-data on a sandbox")
    out.append("or stop other load on this host")
    return out


def no_room_to_start(elapsed_s: float, time_budget_s: float, cost_s: float, what: str) -> str:
    """The session's one budget rule: can ``cost_s`` seconds of work start now? '' when they fit the time left
    (``time_budget_s − elapsed_s``, seconds), else why not, with both figures, for the journal and the log.

    Every phase asks it before it starts measured work: the first round (``TuningSession._no_room_for_round``,
    the smallest decision's prior), every later round and its trial (a restart's prior included), the opening's
    screens and its proof (``OpeningRun``), each further pair of a decision the session's budget caps
    (``auditor._Pairs``), and ``decide`` (a measured round's median). A phase that cannot finish inside the
    budget is not started, so a session ends by its budget give or take what one run took beyond its prior
    (issue 14: a round started 40 s before the end of an 8-min budget overran it by 194 s; the harness's
    pg-pgbench-badstart run of 2026-12-06 ended 95 s past its 480 s).

    ``what`` names the work and where its cost comes from ("a measured round's median", "the proof's smallest
    decision"); the reason reads "time budget nearly used: 30s of 480s left, less than <what> cost (64s)"."""
    left = time_budget_s - elapsed_s
    if cost_s <= left:
        return ""
    return (
        f"time budget nearly used: {max(left, 0):.0f}s of {time_budget_s:.0f}s left, less than {what} cost "
        f"({cost_s:.0f}s)"
    )


def decide(history: list[RoundOutcome], state: LoopState) -> tuple[Decision, str]:
    """Decide what the loop does after the latest round.

    Rules, in order:
      1. time budget or max rounds reached, the round's trial not started for want of time
         (``LoopState.not_started``), or less time left than a measured round's median cost
         (``no_room_to_start``) → terminate;
      2. the planner has nothing left (plateau) → switch_to_os in the DBMS stage when the OS stage is
         enabled, else terminate;
      3. without search: no kept gain in the last ``plateau_rounds`` rounds of this stage → switch_to_os /
         terminate; with search (``search_patience`` > 0): the last ``search_patience`` measured search
         suggestions of this stage all stayed inside the noise band (not kept) → switch_to_os / terminate,
         with their gains and intervals in the reason (``search_converged``);
      4. the latest round kept a gain → continue in that direction;
      5. otherwise (tie, loss, rejection, failure) → redirect to another hypothesis.
    """
    if state.elapsed_s >= state.time_budget_s:
        return Decision.terminate, f"time budget of {state.time_budget_s:.0f}s used ({state.elapsed_s:.0f}s)"
    if state.not_started:
        return Decision.terminate, state.not_started
    if state.rounds_done >= state.max_rounds:
        return Decision.terminate, f"reached max rounds ({state.max_rounds})"
    no_room = no_room_to_start(state.elapsed_s, state.time_budget_s, state.round_cost_s, "a measured round's median")
    if no_room:
        return Decision.terminate, no_room

    def plateau_exit(why: str) -> tuple[Decision, str]:
        if state.stage == Layer.dbms and state.os_stage_enabled:
            return Decision.switch_to_os, f"{why}: switching to the OS stage"
        return Decision.terminate, f"{why}: stopping"

    if state.planner_plateau:
        return plateau_exit(f"no promising {state.stage.value} change left")
    stage_rounds = [r for r in history if r.stage == state.stage]
    stalled = _stalled(stage_rounds, state)
    if stalled:
        return plateau_exit(stalled)
    if not stage_rounds:
        return Decision.continue_, "first round of the stage"
    return _after(stage_rounds[-1], stage_rounds)


def _after(last: RoundOutcome, stage_rounds: list[RoundOutcome]) -> tuple[Decision, str]:
    """The decision that follows the stage's last round."""
    if last.kept:
        gain = f"{last.gain_vs_best:+.1%}" if last.gain_vs_best is not None else "a gain"
        return Decision.continue_, f"{last.bottleneck.value} direction paid ({gain}): push further"
    if last.interrupted:
        before = stage_rounds[-2] if len(stage_rounds) > 1 else None
        if before is not None and before.interrupted:
            return Decision.terminate, "interrupted by an outside restart twice in a row: stopping"
        return Decision.continue_, "round interrupted by an outside restart (not the candidate's failure): try again"
    if last.failure is not None:
        return (
            Decision.redirect,
            f"round failed in {last.failure.phase}: never repeat it, try another direction",
        )
    if not last.verdict_ok:
        return Decision.redirect, "proposal rejected by the validator: try another direction"
    return Decision.redirect, f"{last.bottleneck.value} direction did not beat the best beyond noise"


def _stalled(stage_rounds: list[RoundOutcome], state: LoopState) -> str:
    """Why the stage stalled, or '': the search's patience rule, else ``plateau_rounds`` unkept rounds."""
    if state.search_patience > 0:
        return search_converged(stage_rounds, state.search_patience)
    # the opening's screens are single runs of whole configurations, not diagnosis rounds
    recent = [r for r in stage_rounds if not r.opening][-state.plateau_rounds :]
    if len(recent) >= state.plateau_rounds and not any(r.kept for r in recent):
        return f"no significant gain in the last {state.plateau_rounds} {state.stage.value} rounds"
    return ""


def stop_figures(history: list[RoundOutcome], state: LoopState) -> dict[str, object]:
    """The figures a stop rests on, for the journal's ``stop`` event: time used of the budget, rounds of
    the maximum, the patience rule and the measured search suggestions it counted (gain and interval)."""
    stage_rounds = [r for r in history if r.stage == state.stage]
    measured = [
        r for r in stage_rounds if r.proposal is not None and r.proposal.stage == "search" and r.judged is not None
    ]
    recent = measured[-state.search_patience :] if state.search_patience > 0 else []
    return {
        "elapsed_s": round(state.elapsed_s, 1),
        "time_budget_s": state.time_budget_s,
        "budget_used": round(state.elapsed_s / state.time_budget_s, 3) if state.time_budget_s else None,
        "rounds_done": state.rounds_done,
        "max_rounds": state.max_rounds,
        "round_cost_s": round(state.round_cost_s, 1),
        "search_patience": state.search_patience,
        "plateau_rounds": state.plateau_rounds,
        "search_rounds": [
            {
                "round": r.round_no,
                "judged": r.judged,
                "kept": r.kept,
                "gain": r.counted_gain,  # None: no gain counted (a lone disturbed or cut-off run)
                "low": r.estimate.low if r.estimate is not None else None,
                "high": r.estimate.high if r.estimate is not None else None,
            }
            for r in recent
        ],
    }


def _unestimated(r: RoundOutcome) -> str:
    """A decision's figure without an estimate: its counted gain (``RoundOutcome.counted_gain``) and where it comes
    from, or "no gain counted" for a lone run the host disturbed or the trial bound cut off."""
    gain = r.counted_gain
    if gain is None:
        return "no gain counted"
    return f"{gain:+.1%} ({'medians of too few pairs' if r.medians_gain is not None else 'screen'})"


def search_converged(stage_rounds: list[RoundOutcome], patience: int) -> str:
    """Why the refinement search has converged, or '': the last ``patience`` search suggestions that were
    measured (refused ones cost nothing and do not count) were none of them kept, i.e. the improvement
    each one showed stayed inside the noise band of the auditor's paired test. The reason lists each
    suggestion's round, gain and interval."""
    measured = [
        r for r in stage_rounds if r.proposal is not None and r.proposal.stage == "search" and r.judged is not None
    ]
    recent = measured[-patience:]
    if patience <= 0 or len(recent) < patience or any(r.kept for r in recent):
        return ""
    figures = "; ".join(
        f"round {r.round_no} {r.judged} " + (r.estimate.text if r.estimate is not None else _unestimated(r))
        for r in recent
    )
    return (
        f"search converged: the last {patience} measured search suggestions stayed inside the noise band "
        f"(none kept; loop.search_patience = {patience}): {figures}"
    )
