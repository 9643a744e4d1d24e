"""Auditor: pure decisions over measurements and round history (docs/measurement.md).

Two questions, each answered with a one-line reason:

* ``judge``: is a candidate configuration better than the best one beyond the measured noise?
  Measurements on a 2-core host vary by 5–20 % run to run (docs/measurement.md: TPS CV 11–19 % without data
  resets, TPS/p95 about twice that), so a gain counts only when the median of paired
  candidate/best ratios beats ``max(min_gain, noise_factor × CV)``. A difference inside that band is a
  tie, and a tie keeps the best (simpler, closer to default) configuration.
* ``decide``: continue, redirect, switch_to_os or terminate after a round.
* ``assess``: the screen-then-confirm protocol around ``judge``: one unpaired run is a screen; any change
  beyond the minimum gain is re-measured interleaved with the best configuration (best, candidate,
  best, candidate …) and the paired runs decide. It runs measurements only through the callables it is
  given, so ``judge`` and ``decide`` stay pure (docs/measurement.md).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from agenticdb.models import Decision, Layer, Measurement, RoundOutcome

# Share of paired runs that must agree in direction with the median before a difference counts: all of
# 2 or 3 pairs, 3 of 4, 4 of 5 — a sign-test flavour on top of the noise band (docs/measurement.md saw single
# runs swing by 2× when other jobs share the two cores).
_PAIR_AGREEMENT = 0.75


@dataclass(frozen=True)
class Judgement:
    """Outcome of comparing a candidate with the best configuration.

    ``gain`` is the relative improvement of the candidate (0.10 = 10 % better, whatever the direction
    of the objective); ``threshold`` the band a gain had to beat; ``verdict`` one of
    "better", "worse", "tie".
    """

    gain: float
    threshold: float
    verdict: str
    reason: str

    @property
    def better(self) -> bool:
        return self.verdict == "better"


def noise_cv(values: list[float], floor: float = 0.03) -> float:
    """Coefficient of variation (stdev / mean) of repeated measurements of one configuration.

    With fewer than two values the spread is unknown, so the conservative 0.10 is used (docs/measurement.md
    saw 5–19 % on this kind of host). ``floor`` keeps a lucky quiet baseline from making every wiggle
    "significant".
    """
    if len(values) < 2:
        return 0.10
    mean = statistics.fmean(values)
    if mean == 0:
        return 0.10
    return max(statistics.stdev(values) / abs(mean), floor)


def relative_gain(candidate: float, best: float, higher_is_better: bool) -> float:
    """Relative improvement of ``candidate`` over ``best`` (positive = better)."""
    if best == 0:
        return 0.0
    if higher_is_better:
        return candidate / best - 1.0
    return best / candidate - 1.0 if candidate else 0.0


#: Smallest per-pair noise assumed in the paired-ratio test: 5 % is the lowest TPS CV docs/measurement.md saw
#: for PostgreSQL on this kind of host even with pristine data resets.
PAIR_NOISE_FLOOR = 0.05

#: Paired gains within this of zero count as neutral in the direction-agreement rule.
PAIR_NEUTRAL = 0.01


def judge(
    candidate: list[float],
    best: list[float],
    higher_is_better: bool,
    cv: float,
    min_gain: float,
    noise_factor: float,
    paired: bool = False,
) -> Judgement:
    """Compare candidate and best objective samples.

    Args:
        candidate: objective values of the candidate (≥1).
        best: objective values of the best configuration (≥1); with ``paired`` the i-th best sample was
            measured right before/after the i-th candidate sample (interleaved A B A B).
        higher_is_better: objective direction (TPS/p95: True; OLAP total time: False).
        cv: measured coefficient of variation of the objective for one configuration.
        min_gain: minimum relative gain to count at all (policy), e.g. 0.03.
        noise_factor: gains must exceed ``noise_factor × cv`` (docs/measurement.md suggests ~2.5× CV).

    Returns:
        Judgement with the median gain and the verdict. With ``paired``, a gain or loss beyond the band
        also has to point the same way in at least 75 % of the pairs (all of two or three), else it is a
        tie: the median of two ratios is their mean, which one disturbed run can carry. With three or more
        pairs the band is ``noise_factor × max(stdev of the paired gains, 5 %) / sqrt(pairs)``.
    """
    if not candidate or not best:
        raise ValueError("judge needs at least one candidate and one best sample")
    agree = 1.0
    if paired and len(candidate) == len(best):
        gains = [relative_gain(c, b, higher_is_better) for c, b in zip(candidate, best, strict=True)]
        gain = statistics.median(gains)
        how = f"median of {len(gains)} paired ratios"
        # With two pairs the median is the mean, so one lucky pair (a neighbour's load burst during a best
        # run) can carry it: a gain also has to show in the same direction in most pairs (all of 2 or 3).
        # A pair within ±1 % of zero is neutral: it neither supports nor contradicts the direction.
        agree = sum(1 for g in gains if not ((g > 0) != (gain > 0) and abs(g) > PAIR_NEUTRAL)) / len(gains)
        if agree < _PAIR_AGREEMENT:
            listed = ", ".join(f"{g:+.0%}" for g in gains)
            how += f", only {agree:.0%} of the pairs agree in direction ({listed})"
    else:
        gain = relative_gain(statistics.median(candidate), statistics.median(best), higher_is_better)
        how = f"median of {len(candidate)} vs {len(best)} runs"
    threshold = max(min_gain, noise_factor * cv)
    if paired and len(candidate) == len(best) and len(candidate) >= 3:
        # A paired-ratio test (docs/measurement.md): drift between configurations cancels within a pair, so
        # the band comes from the spread of the paired gains themselves (standard error of their mean,
        # with a per-pair floor), not from the baseline's run-to-run CV, which drift inflates.
        spread = max(statistics.stdev(gains), PAIR_NOISE_FLOOR)
        threshold = max(min_gain, noise_factor * spread / math.sqrt(len(gains)))
        how += f", paired band from their spread {spread:.1%}"
    if abs(gain) > threshold and agree < _PAIR_AGREEMENT:
        verdict = "tie"
        reason = f"change {gain:+.1%} ({how}) is not consistent across the paired runs: a tie keeps the simpler config"
    elif gain > threshold:
        verdict = "better"
        reason = f"gain {gain:+.1%} ({how}) beats the noise band ±{threshold:.1%}"
    elif gain < -threshold:
        verdict = "worse"
        reason = f"loss {gain:+.1%} ({how}) is beyond the noise band ±{threshold:.1%}"
    else:
        verdict = "tie"
        reason = f"change {gain:+.1%} ({how}) is inside the noise band ±{threshold:.1%}: a tie keeps the simpler config"
    return Judgement(gain=gain, threshold=threshold, verdict=verdict, reason=reason)


def objective_of(m: Measurement) -> float:
    """The objective value of a measurement (kept as a function so the direction is never guessed)."""
    return m.objective


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


def decide(history: list[RoundOutcome], state: LoopState) -> tuple[Decision, str]:
    """Decide what the loop does after the latest round.

    Rules, in order:
      1. time budget or max rounds reached → terminate;
      2. the planner has nothing left (plateau) → switch_to_os in the DBMS stage when the OS stage is
         enabled, else terminate;
      3. no kept gain in the last ``plateau_rounds`` rounds of this stage → switch_to_os / terminate;
      4. the latest round kept a gain → continue in that direction;
      5. otherwise (tie, loss, rejection, failure) → redirect to another hypothesis.
    """
    if state.elapsed_s >= state.time_budget_s:
        return Decision.terminate, f"time budget of {state.time_budget_s:.0f}s used ({state.elapsed_s:.0f}s)"
    if state.rounds_done >= state.max_rounds:
        return Decision.terminate, f"reached max rounds ({state.max_rounds})"

    def plateau_exit(why: str) -> tuple[Decision, str]:
        if state.stage == Layer.dbms and state.os_stage_enabled:
            return Decision.switch_to_os, f"{why}: switching to the OS stage"
        return Decision.terminate, f"{why}: stopping"

    if state.planner_plateau:
        return plateau_exit(f"no promising {state.stage.value} change left")
    stage_rounds = [r for r in history if r.stage == state.stage]
    recent = stage_rounds[-state.plateau_rounds :]
    if len(recent) >= state.plateau_rounds and not any(r.kept for r in recent):
        return plateau_exit(f"no significant gain in the last {state.plateau_rounds} {state.stage.value} rounds")
    if not stage_rounds:
        return Decision.continue_, "first round of the stage"
    last = stage_rounds[-1]
    if last.kept:
        gain = f"{last.gain_vs_best:+.1%}" if last.gain_vs_best is not None else "a gain"
        return Decision.continue_, f"{last.bottleneck.value} direction paid ({gain}): push further"
    if last.failure is not None:
        return (
            Decision.redirect,
            f"round failed in {last.failure.phase}: never repeat it, try another direction",
        )
    if not last.verdict_ok:
        return Decision.redirect, "proposal rejected by the validator: try another direction"
    return Decision.redirect, f"{last.bottleneck.value} direction did not beat the best beyond noise"


@dataclass(frozen=True)
class Assessment:
    """The auditor's verdict on a candidate and the runs it rests on.

    ``runs`` are the candidate's measurements the decision used: the screen run alone, or the paired
    candidate runs of the confirmation (the unpaired screen only made the auditor look closer).
    """

    judgement: Judgement
    runs: list[Measurement]


def assess(
    screen: Measurement,
    best: list[float],
    higher_is_better: bool,
    cv: float,
    min_gain: float,
    noise_factor: float,
    confirm_runs: int,
    measure_best: Callable[[int], Measurement],
    measure_candidate: Callable[[int], Measurement],
) -> Assessment:
    """Judge a candidate from its screen run, confirming interleaved when the screen moved.

    A single unpaired run is only a screen: a placebo's one run lands outside a band estimated from 2–3
    baseline runs about 10 % of the time, and a real gain on a drifting, noisy host may land inside it.
    So any change beyond ``min_gain`` is re-measured ``confirm_runs`` times interleaved with the best
    configuration (pair i: ``measure_best(i)`` then ``measure_candidate(i)``), and the paired-ratio test
    of :func:`judge` decides (docs/measurement.md: interleaving cut the effect of drift).

    Args:
        screen: the candidate's first measurement.
        best: objective samples of the best configuration so far.
        higher_is_better, cv, min_gain, noise_factor: as for :func:`judge`.
        confirm_runs: pairs to measure (0: the screen decides).
        measure_best, measure_candidate: put that configuration in effect and measure it once; they raise
            what the executor raises (WorkloadError, TargetError) and the caller handles it.
    """
    first = judge([screen.objective], best, higher_is_better, cv, min_gain, noise_factor)
    if abs(first.gain) <= min_gain or confirm_runs <= 0:
        return Assessment(first, [screen])
    best_values: list[float] = []
    runs: list[Measurement] = []
    for i in range(confirm_runs):
        best_values.append(measure_best(i).objective)
        runs.append(measure_candidate(i))
    paired = judge([m.objective for m in runs], best_values, higher_is_better, cv, min_gain, noise_factor, paired=True)
    return Assessment(paired, runs)
