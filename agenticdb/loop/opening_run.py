"""The opening in a tuning session (issue 36): diagnosis event, candidates, one approval, the race, the proof.

:class:`OpeningRun` runs before the diagnosis rounds of the DBMS stage when ``loop.opening`` is on:

1. **candidates** — up to ``loop.opening_candidates`` whole configurations from the opening's generator
   (``loop.opening_source.default_source``; a test or a caller may pass its own source), each
   validated again as one set against the starting values (its normalised changes are what is applied);
2. **diagnosis** — a ``diagnosis`` journal event says what the baseline showed, as the session's planner
   diagnosed it (the scenario suite scores it): the LLM planner's bottleneck from the reply that gave its
   whole configuration, else the playbook's (the heuristic planner's first proposal), with the playbook's
   scored hypotheses and their evidence (``loop.opening_source.journal_diagnosis``);
3. **budget** — screens are dropped, the most generic candidate first (:data:`SCREEN_PRIORITY`), while the
   opening's cost prior (``race_cost.opening_cost_s``: screens, their warm-ups and restarts, then the proof's
   smallest decision) does not fit the time left; when not even one screen and the proof fit, the candidates
   are tried again without their restart-only knobs (``opening_types.without_restart``: no restart, no warm-up after
   it), and only when that does not fit either is the opening skipped, journaled;
4. **approval** — in approve mode one approval covers the whole opening (every candidate's change set);
5. **race** — one screen each (``agenticdb.loop.race``), a round outcome per screen, a ``race`` event;
6. **proof** — the leader on fresh pairs against the starting configuration (a lone screen is pair 1, as in
   a round: nothing was selected), through the session's own
   judge and settle steps (``TuningSession._judge`` / ``_settle``): kept, or the start is put back. Neither a
   screen nor the proof starts when it and the proof no longer fit the time left (the screens ran longer than
   their prior; ``TuningSession._not_started``): the start is put back, the figures journaled. A leader
   whose screen is behind the start's level beyond the noise (``race.behind_start``) is not proven: "no
   candidate ahead of the start in its screen", the start is put back (journaled ``reverted``).

**A stop request** (``TuningSession.should_stop``: a first Ctrl-C, a service stop) is asked before each screen and
before the proof, and ends a screen's run at once (``Executor.measure(stoppable=True)``: a screen proves nothing
without the proof that will not follow): the run is an interruption (``run.interrupted``, never a failure or a
cut-off), no further screen or proof starts, the start is put back and verified, and the session ends as stopped,
saying the race was interrupted. The proof, once started, is a round: a stop lets it finish. ``TuningSession.racing``
says which of the two a stop request does now (the command line's Ctrl-C message).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import structlog

from agenticdb.host.services import ServiceError
from agenticdb.loop.next_move import relative_gain
from agenticdb.loop.opening_entries import RaceEntry, approval, entry_of, joined, most_generic
from agenticdb.loop.opening_source import OpeningSource, journal_diagnosis
from agenticdb.loop.planning import Plan, check, planning_context
from agenticdb.loop.race import (
    RaceState,
    Screen,
    ahead_of_start,
    behind_start,
    counted_worse,
    left_out_note,
    passed_over,
    per_query,
    race_limit,
    race_order,
    race_table,
    restart_names,
    restarts_needed,
    switch_changes,
)
from agenticdb.loop.race_cost import CostBasis, opening_cost_s, proof_cost_s, screen_and_proof_s
from agenticdb.loop.round import Round
from agenticdb.loop.runwatch import STOPPING, Interrupted
from agenticdb.loop.stage import StageState, recover_round
from agenticdb.loop.steps import StepResult
from agenticdb.models import (
    OPENING_PROOF,
    ApplyMode,
    Change,
    Decision,
    FailurePhase,
    Layer,
    Measurement,
    NormalizedChange,
    Proposal,
    RoundOutcome,
    Verdict,
)
from agenticdb.planner.opening_types import Candidate, apply_modes, restart_only, without_restart
from agenticdb.targets.base import TargetError
from agenticdb.workloads.base import Workload, WorkloadError

if TYPE_CHECKING:
    from agenticdb.config import Settings
    from agenticdb.loop.initializer import Start
    from agenticdb.loop.steps import SessionRecorder
    from agenticdb.measure.query_set import QueryWeights
    from agenticdb.measure.sequential import Noise
    from agenticdb.models import Failure, Measurement
    from agenticdb.planner.base import Planner
    from agenticdb.store.memory import MemoryBook
    from agenticdb.targets.base import Target

log = structlog.get_logger(__name__)


class TuningSession(Protocol):
    """What the opening uses of ``loop.session.TuningSession`` (a protocol: the session imports this module)."""

    cfg: Settings
    recorder: SessionRecorder
    planner: Planner
    target: Target
    workload: Workload
    memory: MemoryBook
    session_id: str
    rounds: list[RoundOutcome]
    best_runs: dict[Layer, Measurement]
    last_best_run: dict[Layer, Measurement]
    noise: Noise
    query_weights: QueryWeights | None
    started: float
    clock: Callable[[], float]
    current_round: int
    opening_rounds: int
    opening_outcome: str
    opening_left_out: list[str]
    round_seconds: list[float]
    approve: Callable[[str, int, Proposal, Verdict], str | None] | None
    on_round: Callable[[RoundOutcome], None]
    should_stop: Callable[[], bool]
    racing: bool  # True from the opening's start until its proof starts: a stop then ends the race at once

    def _judge(self, r: Round, start: Start) -> StepResult: ...
    def _settle(self, r: Round, start: Start) -> StepResult: ...
    def _decide(self, r: Round) -> tuple[RoundOutcome, Decision]: ...
    def _failed(self, r: Round, step: str, failure: Failure) -> StepResult: ...
    def _not_started(self, cost_s: float, what: str, round_no: int | None) -> str: ...


class OpeningRun:
    """The opening of one session's DBMS stage (see the module docstring)."""

    def __init__(self, session: TuningSession, stage: StageState, start: Start, source: OpeningSource) -> None:
        self.s = session
        self.stage = stage
        self.start = start
        self.source = source
        self.cfg = session.cfg
        self.rec = session.recorder
        self.higher = start.higher_is_better

    # ------------------------------------------------------------------ the whole opening
    def run(self) -> int:
        """Run the opening; returns the last round number it used (0 when it did not run). ``TuningSession.racing``
        is True while it runs, until the proof starts (:meth:`_prove`): a stop request then ends it at once."""
        self.s.racing = True
        try:
            return self._open()
        finally:
            self.s.racing = False

    def _open(self) -> int:
        ctx = planning_context(
            self.stage,
            Layer.dbms,
            self.start.profile,
            self.start.fingerprint,
            self.s.rounds,
            self.start.experience,
            self.stage.target.current_values(list(self.stage.catalog.knobs)),
            self.start.delta,
            self.cfg.policy,
        )
        opening = self.source(ctx, self.cfg.loop.opening_candidates)
        notes = [*opening.absent, *opening.notes, *(f"dropped {n}: {why}" for n, why in opening.dropped)]
        top = journal_diagnosis(ctx, self.start, self.cfg, self.s.planner, self.rec, opening.diagnosis)
        candidates = list(opening.candidates)[: self.cfg.loop.opening_candidates]
        if not candidates:
            return self._skip("the generator produced no candidate configuration", notes)
        start_values = dict(self.stage.snapshot.values)
        plans = self._fit_budget(self._ordered([self._plan(c, top) for c in candidates], start_values))
        if not plans:
            specs = self.stage.catalog.knobs
            lighter = self._ordered([self._plan(c, top) for c in without_restart(candidates, specs)], start_values)
            plans = self._fit_budget(lighter)
            if plans:
                dropped = sorted({k for c in candidates for k in restart_only(c, specs)})
                note = (
                    "the time budget pays for no restart (a restart costs a warm-up, for a query set a whole pass): "
                    f"the candidates race without their restart-only knobs ({', '.join(dropped)}), which later "
                    "rounds may still try"
                )
                notes.append(note)
                log.info("opening.without_restart", knobs=dropped, reason=note)
        notes += self.s.opening_left_out
        if not plans:
            return self._skip("the time budget leaves no room for one screen and the proof", notes)
        if self.s.approve is not None:
            refused = self.s.approve(self.s.session_id, self.s.current_round + 1, *approval(plans, top))
            if refused is not None:
                self.rec.event("opening.refused", {"reason": refused})
                log.info("opening.refused", reason=refused)
                return 0
        return self._race(plans, notes)

    def _skip(self, why: str, notes: list[str]) -> int:
        self.rec.event("race", {"skipped": why, "notes": notes, "table": []}, 1)
        log.info("opening.skipped", reason=why)
        return 0

    def _plan(self, c: Candidate, top: Proposal) -> RaceEntry:
        """The candidate as a proposal, validated as one set against the starting values (no step bound: a
        whole configuration is a start, not a step)."""
        proposal = Proposal(
            bottleneck=top.bottleneck,
            layer=Layer.dbms,
            changes=[Change(name=k, value=v, rationale=c.sources.get(k, "")) for k, v in c.changes.items()],
            evidence=[f"{k}: {c.sources[k]}" for k in c.changes if k in c.sources],
            rationale=f"opening candidate '{c.name}': {c.rationale}",
            planner=f"opening:{c.name}",
            stage="opening",
            # what the set needs, from the server's metadata the generator read (a proposal that said
            # "dynamic" for shared_buffers drew the validator's "corrected to restart" warning every time)
            apply_requirement=ApplyMode.strongest(list(apply_modes(c, self.stage.catalog.knobs).values())),
        )
        policy = self.cfg.policy.model_copy(update={"max_changes": max(len(c.changes), 1), "max_step_factor": 1e300})
        verdict = check(proposal, self.stage, self.start.profile, Layer.dbms, policy, self.start.delta)
        return RaceEntry(c.name, proposal, verdict)

    def _fit_budget(self, plans: list[RaceEntry]) -> list[RaceEntry]:
        """The screens the time left pays for, with the proof after them (``race_cost.opening_cost_s``); the
        candidates left out with their cost against the time left are the session's ``opening_left_out``
        (``race.left_out_note``)."""
        loop, basis, specs, snap = self.cfg.loop, self._basis(), self.stage.catalog.knobs, self.stage.snapshot
        self.s.opening_left_out = left_out = list[str]()
        left = loop.time_budget_s - (self.s.clock() - self.s.started)
        reused = self._start_run_last() is not None
        while plans:
            changes = [p.proposal_changes for p in plans]
            cost = opening_cost_s(
                basis.run_durations_s,
                basis.warmup_s,
                len(plans),
                loop.min_pairs,
                race_restarts=restarts_needed(changes, snap.values, specs),
                proof_restarts=bool(restart_names(changes, specs)),
                query_set=basis.query_set,
                reset_each_run=loop.reset_data,
                reused_best_run=reused,
                prewarmed=basis.prewarmed,
                prewarm_s=basis.prewarm_s,
            )
            if cost <= left:
                log.info("opening.budget", screens=len(plans), cost_s=round(cost), left_s=round(left))
                return plans
            dropped = plans.pop(most_generic(plans))
            left_out.append(left_out_note(dropped.name, len(plans) + 1, cost, left))
            log.info("opening.budget_drop", candidate=dropped.name, cost_s=round(cost), reason=left_out[-1])
        return plans

    def _ordered(self, plans: list[RaceEntry], start_values: dict[str, str]) -> list[RaceEntry]:
        """``plans`` in the race's order (fewest restarts, ``race.race_order``)."""
        order = race_order([p.proposal_changes for p in plans], start_values, self.stage.catalog.knobs)
        return [plans[i] for i in order]

    # ------------------------------------------------------------------ the race
    def _start_run_last(self) -> Measurement | None:
        """The start's recent run when it is the last run measured and undisturbed (the baseline's last run
        before the race), else None: the one run a lone screen's pair 1 may take as its best run."""
        run = self.s.last_best_run.get(Layer.dbms)  # best_runs holds the baseline's median run, not its last
        if run is None or self.stage.executor.last_run is not run:
            return None
        return None if run.disturbed else run

    def _race(self, plans: list[RaceEntry], notes: list[str]) -> int:
        """One screen each while the time left pays for it and the proof, then :meth:`_lead`. The session's stop
        request is asked before each screen and before the proof (:meth:`_stopped`); returns the last round used."""
        best_level, start_run = self.stage.objective, self.s.best_runs.get(Layer.dbms)
        before_race = self._start_run_last()
        state = RaceState(start_run, best_level, self.higher)
        in_effect: dict[str, str] = {}  # the changes of the configuration in effect (start = none)
        round_no = self.s.current_round
        for i, entry in enumerate(plans):
            if self.s.should_stop():
                break  # no further screen: the stop is seen below, before the proof
            if self._no_room_for_screen(entry, plans, in_effect, round_no + 1, notes):
                if i == 0:  # an approval that waited, or a generator that took long, used the room
                    return self._skip(notes[-1], notes)
                break  # the screens left and the proof after them would end past the budget
            round_no += 1
            self.s.current_round = round_no
            screen, in_effect = self._screen(entry, round_no, state, in_effect)
            state.add(screen)
            if screen.failure is not None and self.s.rounds[-1].recovery is not None:
                if not self.s.rounds[-1].recovery.service_available:
                    return round_no  # the session sees the failed recovery and stops
        if self.s.should_stop():  # asked before the proof: a stop requested during the race ends it here
            return self._stopped(state, best_level, round_no, in_effect, notes)
        return self._lead(plans, notes, state, round_no, in_effect, before_race)

    def _lead(
        self,
        plans: list[RaceEntry],
        notes: list[str],
        state: RaceState,
        round_no: int,
        in_effect: dict[str, str],
        before_race: Measurement | None,
    ) -> int:
        """After the screens: the leader (joined by the screens ahead), the ``race`` event, then the leader's
        proof, or the start put back (no leader, a leader behind the start, no room for the proof)."""
        best_level, start_run = self.stage.objective, self.s.best_runs.get(Layer.dbms)  # the start's, as in _race
        leader = state.leader(self.s.query_weights, start_run, best_level)
        notes.extend(passed_over(state, leader, self.s.query_weights, start_run, best_level))
        table = race_table(state, best_level, self.s.noise, self.s.query_weights, start_run)
        behind = ""
        if leader is not None:
            behind = behind_start(leader, start_run, best_level, self.higher, self.s.noise, self.s.query_weights)
        proven: RaceEntry | None = None
        lent: list[str] = []
        if leader is not None and not behind:
            proven = entry_of(plans, leader.name, leader.round_no)
            proven, lent = self._joined(proven, leader, state, plans, start_run, best_level, notes)
        self.rec.event(
            "race",
            {
                "table": table,
                "leader": leader.name if leader is not None and not behind else None,
                "best_screen": leader.name if leader is not None else None,
                "not_proven": behind,
                "proven": proven.name if proven is not None else None,
                "joined": lent,
                "best_level": best_level,
                "race_time_factor": self.cfg.loop.race_time_factor,
                "restarts": state.restarts,
                "notes": notes,
            },
            round_no,
        )
        log.info("opening.race", screens=len(table), leader=leader.name if leader else None, reason=behind or "led")
        if leader is None:
            return self._back_to_start(round_no, in_effect, "no candidate ran to the end undisturbed")
        if behind or proven is None:
            return self._back_to_start(round_no, in_effect, behind)
        measured = [sc for sc in state.screens if sc.measurement is not None]
        lone = len(measured) == 1 and leader.measurement is not None and not leader.measurement.cut_off
        restarts = bool(restart_names([proven.proposal_changes], self.stage.catalog.knobs))
        cost = proof_cost_s(self._basis(), restarts, lone, reused_best_run=lone and before_race is not None)
        why = self.s._not_started(cost, "the proof's smallest decision", round_no + 1)
        if why:
            return self._back_to_start(round_no, in_effect, f"the proof of '{proven.name}' was not started: {why}")
        if lone and leader.measurement is not None:
            # a lone candidate was not picked from several noisy runs: its screen is pair 1's candidate run
            return self._prove(proven, round_no + 1, in_effect, (leader.measurement, before_race))
        return self._prove(proven, round_no + 1, in_effect)

    def _basis(self) -> CostBasis:
        """What the opening's cost priors are computed from."""
        service = getattr(self.stage.target, "service", None)
        restarts = service.restart_seconds if service is not None else []
        return CostBasis.of(self.start.baseline, self.cfg.workload.warmup_s, self.cfg.loop, restarts)

    def _no_room_for_screen(
        self, entry: RaceEntry, plans: list[RaceEntry], in_effect: dict[str, str], round_no: int, notes: list[str]
    ) -> str:
        """Why the screen of ``entry`` may not start (``TuningSession._not_started``: it and the proof's smallest
        decision, ``race_cost.screen_and_proof_s``, do not fit the time left: the screens before it ran longer than
        ``_fit_budget`` expected, or an approval waited), added to the race's notes; else ''."""
        changes, specs, reused = [p.proposal_changes for p in plans], self.stage.catalog.knobs, self._start_run_last()
        cost = screen_and_proof_s(self._basis(), entry.proposal_changes, in_effect, changes, specs, reused is not None)
        why = self.s._not_started(cost, f"the screen of '{entry.name}' and the proof's", round_no)
        if why:
            notes.append(f"screens from '{entry.name}' on not started: {why}")
        return why

    def _joined(
        self,
        entry: RaceEntry,
        leader: Screen,
        state: RaceState,
        plans: list[RaceEntry],
        start_run: Measurement | None,
        level: float,
        notes: list[str],
    ) -> tuple[RaceEntry, list[str]]:
        """The entry to prove: the leader joined by the knobs of the other screens ahead of the start beyond
        the noise (``opening_entries.joined``; a screen making one of the leader's own moves lends nothing, said in
        ``notes``), validated as one set; the leader alone when none lends a knob or the joined set is refused
        (logged). Returns the entry and the lenders' lines."""
        ahead: list[tuple[float, RaceEntry]] = []
        by = "the objective"
        for sc in state.screens:
            d = (
                None
                if sc is leader
                else ahead_of_start(sc, start_run, level, self.higher, self.s.noise, self.s.query_weights)
            )
            if d is not None:
                ahead.append((d[0], entry_of(plans, sc.name, sc.round_no)))
                by = d[1]
        made = joined(entry, sorted(ahead, key=lambda a: -a[0]), self.stage.catalog.knobs, by, notes)
        if made is None:
            return entry, []
        proposal, lent = made
        policy = self.cfg.policy.model_copy(update={"max_changes": len(proposal.changes), "max_step_factor": 1e300})
        verdict = check(proposal, self.stage, self.start.profile, Layer.dbms, policy, self.start.delta)
        if not verdict.ok:
            why = verdict.failed[0].message if verdict.failed else "no reason given"
            log.info("opening.not_joined", leader=entry.name, reason=f"the joined set was refused: {why}")
            return entry, []
        both = RaceEntry(proposal.planner.removeprefix("opening:"), proposal, verdict)
        both.round_no = entry.round_no
        log.info("opening.joined", leader=entry.name, proven=both.name, reason="; ".join(lent))
        return both, lent

    def _screen(
        self, entry: RaceEntry, round_no: int, state: RaceState, in_effect: dict[str, str]
    ) -> tuple[Screen, dict[str, str]]:
        """Switch to the candidate as one change set and measure it once under the race's bound."""
        entry.round_no = round_no
        plan = Plan(entry.proposal, entry.verdict)
        outcome = plan.outcome(self.s.session_id, round_no, Layer.dbms)
        self.s.rounds.append(outcome)
        self.rec.event("proposal", entry.proposal, round_no)
        self.rec.event("verdict", entry.verdict, round_no)
        screen = Screen(entry.name, round_no, dict(outcome.changes))
        began = self.s.clock()
        if not entry.verdict.ok:
            screen.refused = entry.verdict.failed[0].message if entry.verdict.failed else "no reason given"
            self._close_screen(outcome, screen, f"'{entry.name}' refused by the validator: {screen.refused}")
            return screen, in_effect
        executor, target = self.stage.executor, self.stage.target
        phase: FailurePhase = "apply"
        try:
            delta = self._switch(entry.verdict.changes, in_effect)
            mode = ApplyMode.strongest([c.apply for c in delta])
            phase = "restart" if mode == ApplyMode.restart else "apply"
            purpose = f"opening screen of '{entry.name}'"  # the journal's intent names the candidate
            whole = entry.verdict.changes  # the story tells the candidate's set against the start, not the switch
            restarted, _ = executor.apply(delta, mode, round_no, self.stage.snapshot, purpose=purpose, whole=whole)
            target.verify(entry.verdict.changes)
            self._supersede(round_no)
            state.restarts += restarted
            screen.apply = "restart" if restarted else mode.value
            phase = "workload"
            limit = race_limit(self.cfg.loop, state.reference, state.reference_level, self.start.baseline)
            # stoppable: the stop request ends the screen's run at once (no proof would follow it)
            m, _ = executor.measure(round_no, f"race {entry.name}", restarted, limit, stoppable=True)
        except (TargetError, ServiceError, WorkloadError, OSError) as exc:
            self._supersede(round_no)
            said = f"race screen of '{entry.name}' {'ended' if isinstance(exc, Interrupted) else 'failed'}"
            failure = executor.failure(exc, phase, entry.verdict.changes, round_no, said)
            outcome.failure, outcome.interrupted = (None, failure.outside) if failure.outside else (failure, "")
            outcome.recovery = recover_round(target, failure, self.stage.snapshot, self.rec, round_no)
            screen.failure, screen.seconds = failure, self.s.clock() - began
            how = "was interrupted" if failure.outside else f"failed in {failure.phase}"  # runwatch.Interrupted
            why = f"race screen of '{entry.name}' {how}; recovery {outcome.recovery.action}"
            self._close_screen(outcome, screen, why)
            return screen, {}
        screen.measurement, screen.seconds = m, self.s.clock() - began
        outcome.measurement, outcome.objective = m, m.objective
        outcome.gain_vs_best = relative_gain(m.objective, self.stage.objective, self.higher)
        if counted_worse(screen, self.stage.objective, self.s.noise):
            outcome.judged = "worse"
        d = per_query(screen, self.s.query_weights, self.s.best_runs.get(Layer.dbms))  # the start's run, as _lead
        result = screen.result(self.stage.objective, self.higher, d)
        self._close_screen(outcome, screen, f"race screen of '{entry.name}': {result}")
        return screen, dict(outcome.changes)

    def _switch(self, wanted: list[NormalizedChange], in_effect: dict[str, str]) -> list[NormalizedChange]:
        target = self.stage.target
        current = target.current_values(list(self.stage.catalog.knobs))
        start = dict(self.stage.snapshot.values)
        return switch_changes(wanted, in_effect, start, current, self.stage.catalog, target.values_equal)

    def _supersede(self, round_no: int) -> None:
        """Close the previous screen's intent once this round's switch holds its own (both hold the start)."""
        for intent in self.rec.open_intents():
            if intent.round_no is not None and intent.round_no < round_no:
                self.rec.close_intent(intent.round_no, f"superseded by round {round_no}'s switch")

    def _close_screen(self, outcome: RoundOutcome, screen: Screen, reason: str) -> None:
        """The screen's round ends without a decision of its own: journaled, remembered, told."""
        outcome.decision, outcome.reason = Decision.continue_, reason
        outcome.finished_at = time.time()
        self.s.memory.record_round(outcome)
        line = StepResult("trial", reason)
        self.rec.step(outcome.round_no, line)
        self.rec.event(
            "decision", {**outcome.model_dump(mode="json"), "steps": self.rec.take_steps()}, outcome.round_no
        )
        log.info("race.screened", round=outcome.round_no, candidate=screen.name, reason=reason)
        self.s.on_round(outcome)

    def _stopped(
        self, state: RaceState, best_level: float, round_no: int, in_effect: dict[str, str], notes: list[str]
    ) -> int:
        """The session's stop was requested during the race (``TuningSession.should_stop``, a first Ctrl-C or a
        service stop): no further screen and no proof start; a screen's run it ended is an interruption
        (``runwatch.StopInterrupted``: journaled ``run.interrupted``, never a failure). The race so far is
        journaled with why it stopped (``race`` event, ``stopped``), the start put back and verified
        (:meth:`_back_to_start`); the session ends as stopped (``TuningSession._after_opening``)."""
        last = state.screens[-1] if state.screens else None
        if last is not None and last.failure is not None and STOPPING in last.failure.outside:
            why = f"the opening's race was interrupted in round {last.round_no} (its screen of '{last.name}' ended"
            why += " at the stop request)"
        elif last is not None:
            why = f"the opening's race was interrupted after round {last.round_no}"
        else:
            why = "the opening's race was interrupted before its first screen"
        why += ": no further screen and no proof started"
        log.info("opening.stopped", screens=len(state.screens), reason=why)
        if last is None:
            self.s.opening_outcome = why
            return self._skip(why, notes)
        table = race_table(state, best_level, self.s.noise, self.s.query_weights, self.s.best_runs.get(Layer.dbms))
        data = {"table": table, "leader": None, "stopped": why, "restarts": state.restarts, "notes": notes}
        self.rec.event("race", data, round_no)
        return self._back_to_start(round_no, in_effect, why)

    def _back_to_start(self, round_no: int, in_effect: dict[str, str], why: str) -> int:
        """No leader: put the starting configuration back (verified), said so (journal, log, the end summary)."""
        self.s.opening_rounds = round_no - 1  # the opening counts as one round of loop.max_rounds
        self.s.opening_outcome = f"{why}: the start stays (the screens' one-run effects prove nothing)"
        reverted = self.stage.revert()
        self.rec.event("reverted", {"to": self.stage.snapshot.label, "reason": f"opening: {why}"}, round_no)
        if reverted.verified:
            self._supersede(round_no + 1)
        log.info("opening.no_leader", reason=why, reverted=reverted.verified)
        return round_no

    # ------------------------------------------------------------------ the proof
    def _prove(
        self,
        entry: RaceEntry,
        round_no: int,
        in_effect: dict[str, str],
        lone: tuple[Measurement, Measurement | None] | None = None,
    ) -> int:
        """The leader against the starting configuration on fresh pairs: never the race's runs when several
        candidates raced (the leader is the best of K noisy screens, biased upward). ``lone`` (the race had
        one measured screen, the leader's): that screen and the start's run right before it (None: not
        adoptable) are pair 1, as in any round, since nothing was selected; the proof costs a round."""
        s = self.s
        s.racing = False  # the proof is a round: a stop request lets it finish
        s.current_round = round_no
        s.opening_rounds = round_no - 1  # the opening counts as one round of loop.max_rounds
        proposal = entry.proposal.model_copy(
            update={"rationale": f"{OPENING_PROOF} '{entry.name}' on fresh pairs: {entry.proposal.rationale}"}
        )
        r = Round(round_no, Layer.dbms, self.stage, self.start.delta)
        r.plan = Plan(proposal, entry.verdict)
        r.outcome = r.plan.outcome(s.session_id, round_no, Layer.dbms)
        s.rounds.append(r.outcome)
        self.rec.event("proposal", proposal, round_no)
        r.safe, began = self.stage.snapshot, self.s.clock()
        if lone is not None:
            r.prior_best = lone[1]
        step = self.rec.step(round_no, self._proof_trial(r, in_effect, lone[0] if lone is not None else None))
        if not step.ends_round:
            for judge_or_settle in (s._judge, s._settle):
                if self.rec.step(round_no, judge_or_settle(r, self.start)).ends_round:
                    break
        if r.outcome.judged is not None:
            s.round_seconds.append(self.s.clock() - began)
        outcome, _ = s._decide(r)
        log.info("opening.proof", leader=entry.name, judged=outcome.judged, kept=outcome.kept)
        return round_no

    def _proof_trial(self, r: Round, in_effect: dict[str, str], screen: Measurement | None = None) -> StepResult:
        """Switch to the leader (one change set, verified) and measure its first fresh run; with ``screen``
        (the lone screen, the leader still in effect) that run is the screen."""
        assert r.plan is not None and r.plan.verdict is not None and r.safe is not None
        ex, verdict = self.stage.executor, r.plan.verdict
        label = r.outcome.opening_label if r.outcome is not None else "opening proof"  # "opening proof of 'evidence'"
        try:
            delta = self._switch(verdict.changes, in_effect)
            mode = ApplyMode.strongest([c.apply for c in delta])
            restarted, _ = ex.apply(delta, mode, r.no, r.safe, purpose=label, whole=verdict.changes)
            self.stage.target.verify(verdict.changes)
            self._supersede(r.no)
            if screen is not None and not delta:
                r.screen = screen
                why = "the race's one screen is pair 1's candidate run (one candidate raced: nothing was selected)"
                return StepResult("trial", f"{label}: {why}, objective {screen.objective:,.3f}")
            r.screen, _ = ex.measure(r.no, "candidate", after_restart=restarted)
        except (TargetError, ServiceError, WorkloadError, OSError) as exc:
            self._supersede(r.no)
            phase: FailurePhase = "workload" if isinstance(exc, WorkloadError) else "apply"
            return self.s._failed(r, "trial", ex.failure(exc, phase, verdict.changes, r.no, f"{label}: run failed"))
        return StepResult("trial", f"{label}: fresh run, objective {r.screen.objective:,.3f}")
