"""The session's time budget questions (beside the session): is there room for a round or a piece of measured work?

:class:`SessionBudget` holds the one budget rule of a session (``next_move.no_room_to_start``) as the session
asks it: before round 1 and before later rounds while none was measured (``_no_room_for_round``), before any
measured work of a round or of the opening (``_not_started``, journaled ``budget.not_started``), and the cost
priors those questions compare with the time left (``_round_cost``, ``_cost_prior``: seconds, from the
baseline's runs, ``next_move.round_cost_prior``). ``loop.session.TuningSession`` inherits it.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

import structlog

from agenticdb.config import Settings
from agenticdb.loop import next_move
from agenticdb.loop.initializer import Start
from agenticdb.loop.race_cost import CostBasis, proof_cost_s
from agenticdb.loop.steps import SessionRecorder
from agenticdb.models import Layer, Measurement

log = structlog.get_logger(__name__)


class SessionBudget:
    """The budget questions of ``loop.session.TuningSession`` (which sets these attributes in its constructor)."""

    cfg: Settings
    clock: Callable[[], float]  # seconds, monotonic: the time budget's clock
    started: float  # ``clock()`` when the session began
    round_seconds: list[float]  # wall time of each measured round
    last_best_run: dict[Layer, Measurement]  # the best configuration's run measured last, per stage
    recorder: SessionRecorder

    def _no_room_for_round(self, start: Start, layer: Layer = Layer.dbms, first: bool = True) -> str:
        """Why the next round may not start (the time left is less than its smallest decision's cost prior, no
        restart counted: ``next_move.no_room_to_start``; the reason says what it counts), or ''. Asked before round 1
        and before every later round while no round was measured (rounds refused, failed or not planned, an opening
        without proof): ``next_move.decide`` judges the room on the measured rounds' median once there is one."""
        if not first and self.round_seconds:
            return ""  # next_move.decide judged the room on the measured rounds' median right after the last one
        loop = self.cfg.loop
        last = self.last_best_run.get(layer)
        reused = last is not None and not last.disturbed
        prior = self._cost_prior(start, reused, restarts=False)
        elapsed = self.clock() - self.started
        label = next_move.smallest_decision_label(loop.min_pairs, reused, last is not None)
        why = next_move.no_room_to_start(elapsed, loop.time_budget_s, prior, label)
        if why and first:  # what would have paid for one, at this host's measured baseline (the start's warning)
            why += next_move.budget_that_pays(elapsed, prior)
        return why

    def _not_started(self, cost_s: float, what: str, round_no: int | None) -> str:
        """'' when ``cost_s`` seconds of measured work (``what``, named with where its cost prior comes from)
        may start now (``next_move.no_room_to_start``, the session's one budget rule); else why not, journaled
        as ``budget.not_started`` with the time left and the cost prior (seconds) and logged."""
        elapsed = self.clock() - self.started
        budget = self.cfg.loop.time_budget_s
        why = next_move.no_room_to_start(elapsed, budget, cost_s, what)
        if why:
            data = {"work": what, "left_s": round(budget - elapsed, 1), "cost_s": round(cost_s, 1), "reason": why}
            self.recorder.event("budget.not_started", data, round_no)
            log.info(
                "budget.not_started", round=round_no, left_s=round(budget - elapsed), cost_s=round(cost_s), reason=why
            )
        return why

    def _round_cost(self, start: Start, reused: bool, restarts: bool) -> float:
        """What the round about to be tried costs (seconds): the measured rounds' median when there is one,
        plus what its restarts add by the prior (``_cost_prior``'s difference with and without them); before
        any round was measured, the smallest decision's prior."""
        if not self.round_seconds:
            return self._cost_prior(start, reused, restarts)
        extra = self._cost_prior(start, reused, True) - self._cost_prior(start, reused, False) if restarts else 0.0
        return statistics.median(self.round_seconds) + extra

    def _round_label(self, restarts: bool) -> str:
        """Where ``_round_cost`` comes from, for ``no_room_to_start``'s reason."""
        what = "a measured round's median" if self.round_seconds else "the trial's smallest decision's"
        return what + (" with the restarts its change needs" if restarts else "")

    def _cost_prior(self, start: Start, reused: bool, restarts: bool) -> float:
        """The smallest decision's cost before it is measured (``next_move.round_cost_prior``, seconds),
        from the baseline's runs (``race_cost.CostBasis``, as the opening's priors)."""
        basis = CostBasis.of(start.baseline, self.cfg.workload.warmup_s, self.cfg.loop)
        return proof_cost_s(basis, restarts, lone=False, reused_best_run=reused)
