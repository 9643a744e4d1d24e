"""The baseline: the unchanged configuration measured before the first round, the noise estimate every later
decision starts from (docs/measurement.md "Decisions"), and how many runs a short time budget can pay for.
Was part of ``loop.initializer``, which runs it (``Initializer``)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import structlog

from agenticdb.config.loop_section import LoopConfig
from agenticdb.loop.executor import Executor
from agenticdb.loop.next_move import RUN_SPREAD, decision_runs, noise_cv
from agenticdb.models import Measurement, StateDelta

log = structlog.get_logger(__name__)


BaselineRunCallback = Callable[[str, Measurement, str], object]
"""Told of every baseline run as it ends: its label ("baseline 2", "baseline 1, repeat 1"), the run and, for a run the
host disturbed, why it is used all the same ('' = it is measured again; :func:`measure_baseline`)."""

#: Above this baseline CV the session warns that only large effects can be told from noise
#: (docs/measurement.md: 5–11 % is reachable on this kind of host with data resets; 19 % without).
NOISE_WARN_CV = 0.15


def first_decision_runs(loop: LoopConfig) -> int:
    """Runs the session's first decision measures at least: the smallest paired decision with the
    baseline's last run as pair 1's best run (``next_move.decision_runs``). The opening (``loop.opening``)
    costs the same at least: a race of one screen is proven as a round is, the screen and the baseline's
    last run being pair 1 (``OpeningRun._prove``); more screens are dropped before the opening is."""
    return decision_runs(loop.min_pairs, True)


def _why_kept(
    loop: LoopConfig, repeats: int, spent_s: float, run_s: float, measured: int, budget_left: Callable[[], float] | None
) -> str:
    """Why a disturbed baseline run is kept rather than measured again (the first that applies), or '' to
    repeat it: ``repeats`` made so far, ``spent_s`` seconds the baseline took, ``run_s`` a run's mean cost,
    ``measured`` runs kept so far (see :func:`measure_baseline`)."""
    if repeats >= loop.max_disturbed_repeats:
        return f"no repeat left (loop.max_disturbed_repeats={loop.max_disturbed_repeats})"
    if spent_s >= (share_s := loop.baseline_budget_share * loop.time_budget_s):
        return (
            f"the baseline used its share of the time budget ({spent_s:.0f}s of {share_s:.3g}s: "
            f"loop.baseline_budget_share={loop.baseline_budget_share:g})"
        )
    # Discarding this run costs the runs still needed for two; they must leave one decision's room.
    if budget_left is not None:
        left, needed, decision = budget_left(), max(2 - measured, 1), first_decision_runs(loop)
        if left - needed * run_s < decision * run_s:
            return (
                f"a repeat would leave the time budget no room for one decision ({left:.0f}s left, {needed} more "
                f"baseline run(s) and the decision's {decision} at {run_s:.0f}s each)"
            )
    return ""


def measure_baseline(
    executor: Executor,
    loop: LoopConfig,
    on_disturbed: Callable[[str, Measurement, str], object] | None = None,
    clock: Callable[[], float] = time.monotonic,
    budget_left: Callable[[], float] | None = None,
    on_run: BaselineRunCallback | None = None,
) -> tuple[list[Measurement], StateDelta, float]:
    """Measure the unchanged configuration: ``loop.baseline_runs`` runs, and more (up to
    ``loop.baseline_max_runs``) while their CV is above ``NOISE_WARN_CV``: the baseline is the noise
    estimate every later decision starts from, so a noisy host gets a better one. A run the host
    disturbed is measured again (at most ``loop.max_disturbed_repeats`` times).

    Extra runs and repeats stop once the baseline has used ``loop.baseline_budget_share`` of
    ``loop.time_budget_s`` (seconds, by ``clock``): on a host that disturbs every other run they would
    otherwise eat a short session's whole budget before the first round (seen on the reference host:
    an 8-minute MariaDB session spent 9 min on its baseline, steal time 16-28 %, and judged nothing).
    Past that share the ``baseline_runs`` minimum is still measured and a disturbed run is kept: it
    widens the noise estimate, which only makes later decisions more careful. ``on_disturbed(label, run,
    kept)`` is told of every disturbed run, ``kept`` '' when it is measured again, else why not (:func:`_why_kept`);
    a repeat's label says so ("baseline 1, repeat 2": a new user read "[baseline 1]" four times). ``on_run`` is told
    of every run the same way, disturbed or not (``tune``'s line per baseline run: a piped ``tune`` printed nothing
    for the 8 minutes of a busy host's baseline).

    ``budget_left()`` (seconds of the session's time budget still unused) lowers the minimum to 2 runs
    when one more run would leave less than the smallest decision (``next_move.decision_runs``: 2 ×
    ``loop.min_pairs`` − 1 runs, the baseline's last run standing as pair 1's best run, at the runs' mean
    cost + RUN_SPREAD): a third baseline run of 77 s in an 8-minute TPC-H session left 230 s for a decision that
    needed 308 s, and the session ended with nothing judged. Two runs are the fewest that
    show a spread; the pairs of every decision estimate the noise again (``agenticdb.measure.sequential``).
    One run, when a second would leave no room for that decision even at the runs' mean cost but the decision fits
    without it: a 4-minute pg-pgbench-badstart session at 57 s a run took 2 and judged nothing (2026-12-07). Its pairs
    then estimate the noise alone (1 df at 2 pairs, ``sequential.decide``): only a large, consistent effect is kept.
    By the same measure a disturbed run is kept rather than repeated when the runs still needed after
    discarding it would leave less than that decision (an 8-minute TPC-H session at 122 s a run repeated
    its disturbed first run, then had 119 s left and judged nothing).

    Returns:
        (the runs kept, the runtime-state delta of the last run, their CV).

    Raises:
        WorkloadError: a run failed.
    """
    measurements: list[Measurement] = []
    delta = StateDelta()
    repeats = again = 0  # repeats in all (loop.max_disturbed_repeats), of the run being measured
    began = clock()
    share_s = loop.baseline_budget_share * loop.time_budget_s
    taken = 0  # runs measured, repeats included: their mean is the cost of one more
    tight = False
    while len(measurements) < loop.baseline_max_runs:
        over = clock() - began >= share_s
        enough = len(measurements) >= loop.baseline_runs
        if enough and (over or noise_cv([m.objective for m in measurements]) <= NOISE_WARN_CV):
            break
        if measurements and budget_left is not None:
            mean, left, runs = (clock() - began) / taken, budget_left(), first_decision_runs(loop)
            cost = mean * (1 + RUN_SPREAD)  # the next run may be slower than the mean
            # one run only when a second leaves no room even at the mean cost and the decision fits without it,
            # the run undisturbed: it is pair 1's best run (a disturbed one is not, and the decision needs one more)
            one = not measurements[-1].disturbed and left - mean < runs * mean <= left
            tight = left - cost < runs * cost if len(measurements) >= 2 else one
            if tight:
                break
        taken += 1
        label = f"baseline {len(measurements) + 1}" + (f", repeat {again}" if again else "")
        m, delta = executor.measure(0, label)
        kept = _why_kept(loop, repeats, clock() - began, (clock() - began) / taken, len(measurements), budget_left)
        if m.disturbed and on_disturbed is not None:
            on_disturbed(label, m, kept)
        if on_run is not None:
            on_run(label, m, kept if m.disturbed else "")
        if m.disturbed and not kept:
            repeats, again = repeats + 1, again + 1
            continue
        again = 0
        measurements.append(m)
    cv = noise_cv([m.objective for m in measurements])
    extra = len(measurements) > loop.baseline_runs
    log.info(
        "init.baseline",
        runs=len(measurements),
        median=round(statistics.median(m.objective for m in measurements), 3),
        cv=round(cv, 3),
        seconds=round(clock() - began, 1),
        reason="more runs while the CV is above 15 %"
        if extra
        else "one run: a second would leave the time budget no room for one decision; its pairs estimate the noise"
        if tight and len(measurements) == 1
        else "fewer runs: one more would leave the time budget no room for one decision"
        if tight
        else "",
    )
    return measurements, delta, cv


__all__ = ["NOISE_WARN_CV", "BaselineRunCallback", "first_decision_runs", "measure_baseline"]
