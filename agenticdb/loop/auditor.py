"""Auditor: keep-or-revert decisions and the loop's next move (docs/measurement.md "Decisions").

* ``assess``: is a candidate better than the best configuration? The candidate's first run (the trial)
  is a screen: a catastrophically worse, undisturbed screen is cut off at once (a bad trial costs one
  run). Otherwise best and candidate are measured in interleaved pairs (candidate, best, best,
  candidate, …: one switch per pair, and the order alternates so linear drift cancels) and the
  sequential test of :mod:`agenticdb.measure.sequential` decides after every pair, stopping as soon as the
  decision is settled at the stated confidence, or as a tie after ``max_pairs`` pairs or the decision's
  time cap; the session's time budget (when it is the shorter cap) starts no pair it cannot pay for, even
  below ``min_pairs`` (``next_move.no_room_to_start``). A pair with a run the host disturbed
  (``agenticdb.measure.disturbance``) is measured again, at most ``max_disturbed_repeats`` times and within
  the time cap; never a verdict from disturbed runs. A decision its caps cut short uses the valid pairs
  when they are decisive by the sequential rule's own criterion (an interval at a final look, even on one
  pair: a +17,104 % first pair is not a tie);
  otherwise it is a tie ("host too disturbed", or the decision's time cap), or "undecided" when the
  session's time budget ended it (not a measured tie; the best configuration so far stays).
  ``assess`` measures only through the :class:`RunSource` it is given.
* ``decide`` (the loop's next move after a round) is in :mod:`agenticdb.loop.next_move`.

Every decision carries its estimate and interval ("+24 % [+11 %, +38 %], 5 pairs, 95 %").
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from agenticdb.config.loop_section import LoopConfig
from agenticdb.loop.next_move import no_room_to_start, pairs_within, relative_gain
from agenticdb.measure.disturbance import DisturbanceThresholds, classified
from agenticdb.measure.query_set import QueryWeights
from agenticdb.measure.sequential import Estimate, Noise, PairDecision, SequentialPolicy, interval_width
from agenticdb.measure.sequential import decide as sequential_decide
from agenticdb.models import (
    Catalog,
    GainEstimate,
    KnobSpec,
    Measurement,
    NormalizedChange,
    Proposal,
    RoundOutcome,
)
from agenticdb.units import canonical, parse_value

Config = Literal["best", "candidate"]
Judgement = Literal["better", "worse", "tie", "undecided"]


# ------------------------------------------------------------------ the keep-or-revert protocol

#: A screen run this far below the best level (as a ratio) is cut off without pairs, when it is also
#: beyond ``CUTOFF_SDS`` run-noise standard deviations and the host did not disturb it.
CUTOFF_RATIO = 0.5
CUTOFF_SDS = 5.0


class RunSource(Protocol):
    """Measures one configuration once, switching to it first when it is not in effect.

    ``run`` raises what the executor raises (WorkloadError, TargetError); the session handles it.
    """

    def run(self, config: Config, label: str) -> Measurement: ...


class OnDisturbed(Protocol):
    """Told of one run of a pair the host disturbed: its label in the decision ("best 4"), its measurement, why
    it cannot be used (``agenticdb.measure.disturbance``), and ``pair_with``: the other run of the pair (label,
    measurement), discarded with it (a pair must see the same host)."""

    def __call__(self, label: str, m: Measurement, reason: str, pair_with: tuple[str, Measurement]) -> object: ...


@dataclass
class Assessment:
    """The auditor's verdict on a candidate and the runs it rests on.

    Attributes:
        verdict: "better", "worse", "tie", or "undecided" (the session's time budget ended inside the
            decision before its evidence was decisive: not a measured tie; the best configuration stays).
        reason: one line, with the estimate and its interval.
        estimate: the paired estimate (None when the screen was cut off before any pair).
        candidate, best: the runs of the valid pairs, in pair order (the screen alone when cut off).
        disturbed: one line per run discarded as disturbed.
        seconds: wall time the decision took.
    """

    verdict: Judgement
    reason: str
    estimate: Estimate | None
    candidate: list[Measurement]
    best: list[Measurement] = field(default_factory=list)
    disturbed: list[str] = field(default_factory=list)
    seconds: float = 0.0
    query_weights: QueryWeights | None = None

    @property
    def better(self) -> bool:
        return self.verdict == "better"

    def log_ratios(self) -> list[float]:
        """The valid pairs' oriented log-ratios (positive = candidate better), on the statistic the test
        used (``query_weights``: the per-query statistic of ``agenticdb.measure.query_set``); for the noise estimate."""
        if self.query_weights is not None:
            ds = [self.query_weights.log_ratio(c, b) for c, b in zip(self.candidate, self.best, strict=False)]
            return [d for d in ds if d is not None]
        out = []
        for c, b in zip(self.candidate, self.best, strict=False):
            if c.objective > 0 and b.objective > 0:
                d = math.log(c.objective / b.objective)
                out.append(d if c.higher_is_better else -d)
        return out


@dataclass(frozen=True)
class DecisionRules:
    """Everything ``assess`` needs beyond the runs: the test's policy, the noise known so far, how to
    recognise a disturbed run and the caps. ``budget_s``: the decision's time cap (seconds)."""

    policy: SequentialPolicy
    prior: Noise
    thresholds: DisturbanceThresholds
    max_disturbed_repeats: int
    budget_s: float
    latency_guard: bool = False
    session_cap: bool = False
    """``budget_s`` is the session's time left, not ``loop.decision_budget_s``: it binds below
    ``min_pairs`` too (no pair starts that the budget cannot pay for, ``next_move.no_room_to_start``), and a
    decision it cuts short without decisive evidence is "undecided: budget ended", never a tie or "better"."""
    query_weights: QueryWeights | None = None
    """Query sets (total_time): the pairs are judged on the per-query statistic of ``agenticdb.measure.query_set``
    with these frozen weights, not on the total time."""
    run_cost_s: float = 0.0
    """One run's cost prior (seconds, with its warm-up and restarts; 0 = unknown): the next pair's cost
    before the decision measured a pair of its own (pair 1 reused the best run measured before the trial)."""


def cut_off(screen: Measurement, best_level: float, prior: Noise) -> str:
    """A reason to stop after the screen, or '': the candidate ran far below the best (a bad trial costs
    one run), or its run was already stopped early by the trial limit (``Measurement.cut_off``). Only an
    undisturbed screen below ``CUTOFF_RATIO`` × the best level and beyond ``CUTOFF_SDS`` standard
    deviations of the run noise (at least 10 % per run) is cut."""
    if screen.disturbed:
        return ""
    if screen.cut_off:
        # stopped early by the trial limit (agenticdb.measure.trial_limit), on a host that did not disturb it
        return f"{screen.cut_off}; counted as worse (the host was not disturbed)"
    if screen.objective <= 0 or best_level <= 0:
        return ""
    ratio = screen.objective / best_level if screen.higher_is_better else best_level / screen.objective
    sd = max(prior.run_cv, 0.10)
    if ratio < CUTOFF_RATIO and math.log(ratio) < -CUTOFF_SDS * sd:
        return (
            f"cut off after the screen: {ratio - 1:+.0%} against the best level, beyond {CUTOFF_SDS:g} × the run "
            f"noise ({sd:.0%}) and the host was not disturbed"
        )
    return ""


#: The most a best run measured before the screen may precede it, in screen run lengths (beyond the apply
#: and the screen run itself); further apart, the host may have moved between them (docs/measurement.md).
PRIOR_GAP_RUNS = 2.0
PRIOR_GAP_SLACK_S = 60.0


def adoptable_prior(prior: Measurement | None, screen: Measurement) -> Measurement | None:
    """``prior`` when it may stand as the best run of pair 1 beside ``screen``, else None.

    ``prior`` is the best configuration's run measured last before the candidate was applied (the
    baseline's last run before round 1, or the last run of a decision that ended on the configuration now
    best; the caller checks that no other run came between). It is used when it was not disturbed by the
    host, scores the same objective and ended at most ``PRIOR_GAP_RUNS`` screen run lengths plus
    ``PRIOR_GAP_SLACK_S`` seconds before the screen ended (``Measurement.taken_at``): an approval that
    waited, or a planner that took minutes, leaves the pair apart in time, and then the decision measures
    its own best run as usual. Reusing it saves one run of the smallest decision: with 90-s TPC-H runs
    the 2 baseline runs and a 2-pair decision fit an 8-minute budget only this way (issue 14)."""
    if prior is None or prior.disturbed:
        return None
    if prior.objective <= 0 or prior.objective_name != screen.objective_name or prior.cut_off:
        return None
    run_s = screen.total_time_s or (screen.duration_s + (screen.steady_start_s or 0.0))
    gap = screen.taken_at - prior.taken_at
    if gap < 0 or gap > PRIOR_GAP_RUNS * max(run_s, 1.0) + run_s + PRIOR_GAP_SLACK_S:
        return None
    return prior


def _disturbed(first: Measurement, second: Measurement, thresholds: DisturbanceThresholds) -> tuple[str, str]:
    """Why each run of the pair (first, second) cannot be used, '' for a run that can: ``(first's reason,
    second's reason)``. The second run is also compared with the first's outside load (a pair must see the same
    host): a difference is told on the second run. A cut-off run is a screen only, never one side of a pair."""
    why_first = first.disturbance.reason if first.disturbance is not None and first.disturbance.disturbed else ""
    why_second = ""
    if second.disturbance is not None:
        d = classified(second.disturbance, first.disturbance, thresholds)
        why_second = d.reason if d.disturbed else ""
    cut = "a cut-off run is a screen only"
    return (
        "; ".join(r for r in (why_first, cut if first.cut_off else "") if r),
        "; ".join(r for r in (why_second, cut if second.cut_off else "") if r),
    )


def assess(
    screen: Measurement,
    best_level: float,
    runs: RunSource,
    protocol: DecisionRules,
    on_disturbed: OnDisturbed | None = None,
    clock: Callable[[], float] = time.monotonic,
    prior_best: Measurement | None = None,
) -> Assessment:
    """Decide whether the candidate (in effect, measured once as ``screen``) beats the best configuration.

    Args:
        screen: the candidate's first run (the trial's measurement): the first run of pair 1.
        best_level: the best configuration's objective level so far (median of its runs), for the cut-off.
        runs: measures best or candidate once (switching when needed).
        protocol: the sequential test's policy and prior noise, disturbance thresholds, caps.
        on_disturbed: called for each run the host disturbed, with its label ("best 4"), its measurement, why,
            and the other run of the pair discarded with it (``OnDisturbed``; the journal).
        clock: seconds, monotonic (the decision's time cap).
        prior_best: the run of the best configuration measured right before the screen (nothing measured in
            between, e.g. the baseline's last run before round 1): pair 1 is then (``prior_best``,
            ``screen``) and costs no run, and pair 2 starts with the candidate, which is in effect (the
            order stays best, candidate | candidate, best | …). The caller vouches that nothing but the
            candidate's apply happened between the two runs (``adoptable_prior``).

    Returns:
        The Assessment; ``verdict`` is "tie" when the test did not settle within the caps or the host
        stayed too disturbed.

    Raises:
        WorkloadError, TargetError, ServiceError: from ``runs`` (the session turns them into a failure).
    """
    started = clock()
    why = cut_off(screen, best_level, protocol.prior)
    if why:
        return Assessment("worse", why, None, [screen], seconds=clock() - started)
    pairs = _Pairs(runs, protocol, clock, started, on_disturbed)
    first, first_config, first_label = screen, _CANDIDATE, f"{_CANDIDATE} 1"
    if screen.cut_off:  # disturbed (else cut_off() made it worse): a screen only, never one side of a pair
        if protocol.session_cap and pairs._out_of_time():  # pair 1 is two more runs: none the budget can't pay
            return pairs._cut_short("")
        first, prior_best = runs.run(_CANDIDATE, f"{_CANDIDATE} 1"), None
    if prior_best is not None:
        done = pairs.judge((prior_best, "best 1"), "best", screen, f"{_CANDIDATE} 1", 0.0)
        if done is not None:
            return done
        first_label = f"{_CANDIDATE} {len(pairs.valid) + 1}"
        first = runs.run(_CANDIDATE, first_label)
    while True:
        done = pairs.complete((first, first_label), first_config)
        if done is not None:
            return done
        # The next pair starts with the configuration now in effect: one switch per pair.
        first_config = _other(first_config)
        first_label = f"{first_config} {len(pairs.valid) + 1}"
        first = runs.run(first_config, first_label)


_CANDIDATE: Config = "candidate"


def _other(config: Config) -> Config:
    """The configuration a pair compares ``config`` with."""
    return "best" if config == "candidate" else "candidate"


@dataclass
class _Pairs:
    """One decision's pairs so far: the valid ones (candidate, best), the discarded ones and the time each
    valid pair's second run took (the estimate of the next pair's cost against the time cap)."""

    runs: RunSource
    protocol: DecisionRules
    clock: Callable[[], float]
    started: float
    on_disturbed: OnDisturbed | None
    valid: list[tuple[Measurement, Measurement]] = field(default_factory=list)
    disturbed: list[str] = field(default_factory=list)
    pair_s: list[float] = field(default_factory=list)
    no_room: str = ""  # why the next pair was not started (``_out_of_time``): the time left and its cost

    def complete(self, first: tuple[Measurement, str], first_config: Config) -> Assessment | None:
        """Measure the other configuration after ``first`` (its run and label, with ``first_config``) and look at
        the pairs; the Assessment when the decision ends, None to measure another pair."""
        t0 = self.clock()
        other = _other(first_config)
        label = f"{other} {len(self.valid) + 1}"
        second = self.runs.run(other, label)
        return self.judge(first, first_config, second, label, self.clock() - t0)

    def judge(
        self, first_run: tuple[Measurement, str], first_config: Config, second: Measurement, label: str, took_s: float
    ) -> Assessment | None:
        """Add the pair (``first_run``: the run of ``first_config`` and its label, then ``second`` of the other
        configuration, labelled ``label``, which took ``took_s`` seconds; 0 when it was measured before the
        decision) and look at the pairs."""
        first = first_run[0]
        reasons = _disturbed(first, second, self.protocol.thresholds)
        if any(reasons):
            return self._discard((first_run, (second, label)), reasons, took_s)
        self.valid.append((first, second) if first_config == "candidate" else (second, first))
        if took_s > 0:
            self.pair_s.append(took_s)
        # The time cap applies once the minimum pairs are in: a decision never ends on fewer valid pairs
        # (except when the host disturbs the pairs that would make them up, see _discard).
        # The session's time budget binds below the minimum pairs too: a pair it cannot pay for is not started
        # (``next_move.no_room_to_start``) and the decision ends as a cut one (``_cut_short``).
        policy = self.protocol.policy
        planned_end = len(self.valid) >= policy.last_pair  # the looks the error rate was split over are used
        enough = len(self.valid) >= policy.min_pairs or self.protocol.session_cap
        late = enough and (self._out_of_time() or planned_end)
        look = _look(self.valid, self.protocol, final=late)
        if look.verdict is None:
            return None
        if look.capped and late and len(self.valid) < policy.max_pairs:
            return self._cut_short("", look)
        return self.assessment(look.verdict, look.reason, look.estimate)

    def _discard(
        self, pair: tuple[tuple[Measurement, str], tuple[Measurement, str]], reasons: tuple[str, str], took_s: float
    ) -> Assessment | None:
        """A pair the host disturbed (``pair``: its runs and labels in the order measured; ``reasons``: why
        each cannot be used, '' for a run that can): each disturbed run is journaled under its own label, with
        the other run discarded with it, and the pair is measured again until the repeats or the time are used
        up; then the valid pairs decide when they are decisive on their own."""
        told = "; ".join(f"{label}: {r}" for (_, label), r in zip(pair, reasons, strict=True) if r)
        self.disturbed.append(f"pair {len(self.valid) + 1}: {told}")
        if self.on_disturbed is not None:
            for (m, label), (other, other_label), reason in zip(pair, pair[::-1], reasons, strict=True):
                if reason:
                    self.on_disturbed(label, m, reason, (other_label, other))
        if len(self.disturbed) > self.protocol.max_disturbed_repeats:
            return self._cut_short("host too disturbed")
        if self._out_of_time(took_s):
            return self._cut_short("")
        return None

    def _out_of_time(self, took_s: float = 0.0) -> bool:
        """True when another pair would pass the decision's time cap (``next_move.no_room_to_start``).
        ``pair_s`` holds the time of each valid pair's second run (the first run of pair 1 is the screen,
        measured before the decision); the next pair is two runs, so it costs twice the slowest of them, or
        twice ``DecisionRules.run_cost_s`` before any was timed (pair 1 reused a best run: an 8-min session
        then measured pair 2 past its budget). (Counting one run let a 480-s harness session start a third
        pair with 6 s left and end at 534 s.)"""
        timed = [t for t in (*self.pair_s, took_s) if t > 0]
        next_pair_s = 2 * (max(timed) if timed else self.protocol.run_cost_s)
        elapsed = self.clock() - self.started
        if not no_room_to_start(elapsed, self.protocol.budget_s, next_pair_s, "the next pair's"):
            return False
        self.no_room = f"{max(self.protocol.budget_s - elapsed, 0):.0f}s left, the next pair's cost {next_pair_s:.0f}s"
        return True

    def _cut_short(self, disturbed: str, look: PairDecision | None = None) -> Assessment:
        """The end of a decision its caps stopped before the rules settled it (``disturbed``: the host
        disturbed more pairs than the protocol repeats; '' = the time cap). Evidence already decisive by
        the sequential rule's own criterion (its interval at a final look, even on fewer than ``min_pairs``
        valid pairs) is the verdict; otherwise "host too disturbed" and the decision's own time cap are a
        tie, and the session's time budget ending is "undecided": nothing was measured to a tie, and the
        best configuration so far stays."""
        if look is None and self.valid:
            look = _look(self.valid, self.protocol, final=True)
        if look is not None and not look.capped and look.verdict is not None:
            cap = "the session's time budget ended" if self.protocol.session_cap else "the time cap was reached"
            ended = disturbed or cap
            why = f"{look.reason} ({ended} after {len(self.valid)} valid pair(s): decided on them)"
            return self.assessment(look.verdict, why, look.estimate)
        estimate = look.estimate if look is not None else None
        if disturbed:
            return self.assessment("tie", _too_disturbed_reason(self.disturbed, self.protocol, estimate), estimate)
        if self.protocol.session_cap:
            seen = f"{estimate.text()}, not settled" if estimate is not None else "no valid pair"
            figures = f" ({self.no_room})" if self.no_room else ""
            reason = (
                f"undecided: budget ended inside the decision ({seen}){figures}; the best configuration so far stays"
            )
            return self.assessment("undecided", reason, estimate)
        if look is not None and look.capped:
            return self.assessment("tie", look.reason, estimate)
        return self.assessment("tie", "the decision's time cap was reached before a valid pair; a tie", estimate)

    def assessment(self, verdict: Judgement, reason: str, estimate: Estimate | None) -> Assessment:
        """The Assessment of ``verdict`` over the valid pairs so far."""
        cand, best = [c for c, _ in self.valid], [b for _, b in self.valid]
        took = self.clock() - self.started
        return Assessment(verdict, reason, estimate, cand, best, self.disturbed, took, self.protocol.query_weights)


def _look(pairs: list[tuple[Measurement, Measurement]], protocol: DecisionRules, final: bool) -> PairDecision:
    """One look of the sequential test over the valid pairs (``verdict`` None = measure another pair); on
    the per-query scores of ``agenticdb.measure.query_set`` when the protocol has query weights."""
    cand = [c.objective for c, _ in pairs]
    best = [b.objective for _, b in pairs]
    higher = pairs[0][0].higher_is_better
    scored = protocol.query_weights.scores(pairs) if protocol.query_weights is not None else None
    if scored is not None:
        cand, best, higher = scored[0], scored[1], False
    within = [m.objective_se / m.objective for pair in pairs for m in pair if m.objective_se and m.objective > 0]
    p95: tuple[list[float], list[float]] | None = None
    if protocol.latency_guard and all(c.latency_p95_ms and b.latency_p95_ms for c, b in pairs):
        p95 = ([float(c.latency_p95_ms or 0) for c, _ in pairs], [float(b.latency_p95_ms or 0) for _, b in pairs])
    look = sequential_decide(cand, best, higher, protocol.policy, protocol.prior, within, p95, final=final)
    return _total_time_agrees(look, pairs, final) if scored is not None else look


def _total_time_agrees(look: PairDecision, pairs: list[tuple[Measurement, Measurement]], final: bool) -> PairDecision:
    """A "better" on the per-query statistic stands only if the pairs' total times do not say the candidate is
    slower (median of ln(best/candidate) over the pairs < 0): the statistic, a weighted geometric mean, credits a
    short query made 5 × faster more than the seconds it saves, so a long query made slower can cost more total
    time than the statistic shows (docs/measurement.md "Query sets"), and total time is the objective the user
    chose. Such a look is not settled (measure another pair), or a tie at the final look or the pairs' cap."""
    if look.verdict != "better":
        return look
    total = statistics.median(math.log(b.objective / c.objective) for c, b in pairs if c.objective > 0)
    if total >= 0:
        return look
    why = (
        f"{look.reason}; but the pairs' total time says the candidate is slower (median {math.expm1(total):+.1%}): "
        "the per-query statistic alone does not keep it"
    )
    return PairDecision("tie" if final or look.capped else None, look.estimate, why, look.capped)


def _too_disturbed_reason(disturbed: list[str], protocol: DecisionRules, estimate: Estimate | None) -> str:
    """Why a decision ends in a tie when the host disturbed more runs than the protocol repeats."""
    seen = f" (so far {estimate.text()})" if estimate is not None else ""
    return (
        f"host too disturbed: {len(disturbed)} pairs discarded, more than loop.max_disturbed_repeats = "
        f"{protocol.max_disturbed_repeats}{seen}; a tie keeps the simpler config. Last: {disturbed[-1]}"
    )


def repair_kept(a: Assessment, proposal: Proposal, changes: Sequence[NormalizedChange], catalog: Catalog) -> str | None:
    """Why an undecided round is kept after all, or None (revert as usual).

    A round whose every change puts a knob back to the server's shipped default from a known bad start
    (``Proposal.repairs``: a trap such as commit_delay = 1000, or a size below its default under a floor
    rule; each checked here against the catalog's default) does not need to prove a gain to stay: the
    default is the vendor's own starting point and the value it replaces is known to be harmful. When the
    session's budget ended inside the decision ("undecided") with the candidate ahead on the median of the
    valid pairs, it is kept. Anything measured worse, a tie, or a median at or below 0 is reverted as
    usual. (Scenarios mdb-tmp-table-tiny: +156 % [−7 %, +610 %] on 2 pairs, and os-read-ahead-tiny: +18 %
    [−7 %, +48 %] on 3 pairs, were reverted to the fault when the 180-s budget ended, 2026-12-03.)

    A trade move that pays for such a repair only by lowering caches measured unused
    (``Proposal.releases``, set by ``agenticdb.planner.trade`` only; each must lower its knob here) is a
    repair too: the 512 MiB MariaDB scenario's buffer pool back to 128 MiB from 64 MiB needed the idle
    MyISAM key cache to give (+20 % [−0.3 %, +44 %] on 3 pairs when the 8-min budget ended, 2026-12-05)."""
    if a.verdict != "undecided" or a.estimate is None or a.estimate.gain <= 0 or not changes:
        return None
    repaired: list[str] = []
    released: list[str] = []
    for ch in changes:
        spec = catalog.knobs.get(ch.name)
        if spec is None:
            return None
        if ch.name in proposal.releases and _lowers(ch, spec):
            released.append(f"{ch.name}={ch.value}")
            continue
        if ch.name not in proposal.repairs or spec.default is None:
            return None
        if canonical(ch.name, str(ch.value), spec) != canonical(ch.name, spec.default, spec):
            return None
        repaired.append(f"{ch.name}={ch.value}")
    if not repaired:
        return None
    paid = f", paid for by lowering caches measured unused ({', '.join(released)})," if released else ""
    return (
        f"kept: {', '.join(repaired)} puts the server's default back from a known bad start{paid} and the "
        f"candidate was ahead when the budget ended ({a.estimate.text()}, not settled); a repair to the "
        "default needs no proof of gain, only no measured loss"
    )


def _lowers(ch: NormalizedChange, spec: KnobSpec) -> bool:
    """Whether ``ch`` sets a numeric knob below the value in effect before it."""
    before = parse_value(ch.previous, spec) if ch.previous is not None else None
    after = ch.base_value if ch.base_value is not None else parse_value(ch.value, spec)
    return before is not None and after is not None and after < before


def decision_rules(
    loop: LoopConfig,
    noise: Noise,
    left_s: float,
    query_weights: QueryWeights | None = None,
    run_cost_s: float = 0.0,
    reused_best_run: bool = False,
) -> DecisionRules:
    """The decision protocol of ``[loop]`` with the session's pooled ``noise``; the decision's time cap is
    ``loop.decision_budget_s`` or the session's time left (``left_s``, seconds), whichever is shorter
    (``session_cap`` says it is the session's). ``query_weights``: judge query-set pairs on the per-query
    statistic (``agenticdb.measure.query_set``); ``noise`` must then be of that statistic too.

    ``run_cost_s`` (one run with its warm-up and restarts, seconds; 0 = unknown): the pairs that fit the cap
    (``next_move.pairs_within``) become the policy's ``planned_pairs``, so the test's error rate is split
    over the looks that can happen and the decision ends at that many pairs."""
    cap_s = max(min(loop.decision_budget_s, left_s), 0.0)
    policy = SequentialPolicy(
        min_gain=loop.min_gain,
        confidence=loop.confidence,
        min_pairs=loop.min_pairs,
        max_pairs=loop.max_pairs,
        latency_guard=loop.latency_guard,
        planned_pairs=pairs_within(cap_s, run_cost_s, reused_best_run),
    )
    return DecisionRules(
        policy,
        noise,
        DisturbanceThresholds.from_config(loop),
        loop.max_disturbed_repeats,
        cap_s,
        latency_guard=loop.latency_guard is not None,
        session_cap=left_s < loop.decision_budget_s,
        query_weights=query_weights,
        run_cost_s=max(run_cost_s, 0.0),
    )


def record_assessment(
    a: Assessment, outcome: RoundOutcome, screen: Measurement, best_level: float, higher_is_better: bool
) -> None:
    """Put the numbers the decision used into ``outcome``: the medians of the paired runs, the verdict, the pairs
    it discarded as disturbed and the estimate with its interval (or, without pairs, the screen's gain over
    ``best_level``)."""
    outcome.measurement = a.candidate[-1] if a.candidate else screen
    outcome.objective = statistics.median(m.objective for m in a.candidate) if a.candidate else None
    outcome.best_objective = statistics.median(m.objective for m in a.best) if a.best else None
    outcome.judged, outcome.judged_reason = a.verdict, a.reason
    outcome.disturbed_pairs = list(a.disturbed)
    if a.estimate is not None:
        e = a.estimate
        outcome.gain_vs_best = e.gain
        outcome.estimate = GainEstimate(
            gain=e.gain,
            low=e.low,
            high=e.high,
            pairs=e.pairs,
            confidence=e.confidence,
            text=e.text(),
            pair_gains=[math.expm1(d) for d in a.log_ratios()],
        )
    else:
        outcome.gain_vs_best = relative_gain(screen.objective, best_level, higher_is_better)


def judged_event(a: Assessment, outcome: RoundOutcome, rules: DecisionRules | None = None) -> dict[str, object]:
    """The ``judged`` journal event: the verdict, the estimate with its interval, and the runs it rests on
    (objective values; medians as shown by ``tune`` and ``report``); each pair's gain (``pair_gains``, relative,
    positive = candidate better, on the statistic the test used) and, given the decision's ``rules``, where the
    interval's width comes from (``width``: ``sequential.interval_width``); for query sets also the statistic the
    test ran on and each pair's ``d`` (``agenticdb.measure.query_set``)."""
    e = outcome.estimate
    event: dict[str, object] = {
        "verdict": a.verdict,
        "gain": outcome.gain_vs_best,
        "low": e.low if e else None,
        "high": e.high if e else None,
        "pairs": e.pairs if e else 0,
        "confidence": e.confidence if e else None,
        "interval": e.text if e else None,
        "reason": a.reason,
        "candidate": [m.objective for m in a.candidate],
        "best": [m.objective for m in a.best],
        "candidate_median": outcome.objective,
        "best_median": outcome.best_objective,
        "disturbed": a.disturbed,
        "seconds": round(a.seconds, 1),
    }
    if e is not None:
        event["pair_gains"] = list(e.pair_gains)
    if rules is not None and a.estimate is not None:
        event["width"] = interval_width(a.log_ratios(), rules.prior, a.estimate, rules.policy.looks)
    if a.query_weights is not None:
        event |= {"statistic": "per-query d = Σ w_q·ln(best_q/candidate_q)", "d": a.log_ratios()}
    return event
