"""One reconfiguration process: the round loop (docs/architecture.md "The loop").

    Initializer → (observe → plan → trial → judge → settle → decide)* → final apply → Experience

Every component is passed in (``agenticdb.app`` builds them); this module only sequences named steps, each handing
the work to its role and returning a one-line ``steps.StepResult`` for the log, systemd STATUS and the journal:

=========  ===========================================================================================
step       role
=========  ===========================================================================================
observe    read the live values; a knob someone else changed is left to them (``stage.StageState``)
plan       planner + validator with feedback retries (``planning``)
trial      snapshot, intent, apply, verify, measure (``executor``); a failure goes to ``recovery``
judge      screen, then paired interleaved confirmation (``auditor.assess``)
settle     keep the change, or revert it and verify the revert (``recovery``)
decide     continue, redirect, switch to the OS stage or terminate (``next_move.decide``)
=========  ===========================================================================================
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable
from datetime import datetime

import structlog

from agenticdb.config import Settings
from agenticdb.errors import SessionError, SessionInterrupted, SessionUsageError
from agenticdb.host.services import ServiceError
from agenticdb.loop import auditor, next_move, rootcause_step
from agenticdb.loop.baseline import BaselineRunCallback
from agenticdb.loop.budget import SessionBudget
from agenticdb.loop.executor import Executor, PairedRuns
from agenticdb.loop.initializer import Initializer, Start
from agenticdb.loop.opening_run import OpeningRun
from agenticdb.loop.opening_source import OpeningSource, default_source
from agenticdb.loop.planning import check, plan_round, planning_context
from agenticdb.loop.round import Round, refused_trial, round_failed
from agenticdb.loop.stage import StageState, apply_final, enter_os_stage, loop_ended, storage_fault_stop
from agenticdb.loop.steps import RoundCallback, SessionRecorder, SessionResult, StepResult
from agenticdb.measure.query_set import QueryWeights
from agenticdb.measure.sequential import Noise
from agenticdb.measure.trial_limit import TrialLimit
from agenticdb.models import (
    ApplyMode,
    Decision,
    Failure,
    FailurePhase,
    Layer,
    Measurement,
    Proposal,
    RoundOutcome,
    RuntimeState,
    StateDelta,
    Verdict,
)
from agenticdb.planner.base import Planner, PlannerError
from agenticdb.rootcause import Finding
from agenticdb.store.faults import StorageError
from agenticdb.store.journal import Journal
from agenticdb.store.memory import MemoryBook
from agenticdb.store.memory.backends import learn
from agenticdb.targets.base import Target, TargetError
from agenticdb.workloads.base import Workload, WorkloadError

__all__ = ["SessionError", "SessionInterrupted", "SessionResult", "SessionUsageError", "TuningSession"]

log = structlog.get_logger(__name__)


class TuningSession(SessionBudget):
    """Runs one tuning session against ``target`` (and, in the OS stage, ``os_target``).

    ``clock`` (seconds, monotonic; default ``time.monotonic``) is the one clock of the session's time
    budget: ``loop.time_budget_s`` is spent by it, and the baseline's share, the room for a round, the
    opening's screens, the decision's time caps and the measured round costs are all read from it. Tests
    pass a virtual clock that only the scripted workload's runs advance, so a busy host cannot change
    what a session decides. ``on_round`` is told of each round as it ends, ``on_baseline_run`` of each baseline run
    (``loop.baseline.BaselineRunCallback``): ``tune``'s lines.
    """

    def __init__(
        self,
        cfg: Settings,
        target: Target,
        workload: Workload,
        planner: Planner,
        journal: Journal,
        memory: MemoryBook,
        os_target: Target | None = None,
        state_sources: list[Callable[[], RuntimeState]] | None = None,
        on_round: RoundCallback | None = None,
        should_stop: Callable[[], bool] | None = None,
        session_id: str | None = None,
        start_from: dict[str, object] | None = None,
        on_status: Callable[[str], object] | None = None,
        approve: Callable[[str, int, Proposal, Verdict], str | None] | None = None,
        remediate: rootcause_step.Remediate | None = None,
        opening: OpeningSource | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_baseline_run: BaselineRunCallback | None = None,
    ) -> None:
        self.cfg = cfg
        self.clock = clock  # seconds, monotonic: the time budget's clock (see the class docstring)
        self.approve = approve  # policy.mode = "approve": None from it means a person allowed the trial
        self.remediate = remediate  # approve mode with [remediation] dsn: runs an approved remedy (issue 40)
        self.root_cause: Finding | None = None  # a dominant cause no setting fixes (agenticdb.rootcause)
        self.target = target
        self.workload = workload
        self.planner = planner
        self.journal = journal
        self.memory = memory
        self.os_target = os_target
        self.extra_state_sources = state_sources or []
        self.on_round = on_round or (lambda outcome: None)
        self.should_stop = should_stop or (lambda: False)
        self.session_id = session_id or datetime.now().strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
        self.start_from = start_from
        self.opening_source = opening  # loop.opening's source (default: agenticdb.planner.opening's generator)
        self.opening_rounds = 0  # rounds the opening used beyond one (it counts as one of loop.max_rounds)
        self.opening_outcome = ""  # why the race ended without a proof (SessionResult.opening), or ''
        self.opening_left_out: list[str] = []  # the candidates the race left out for time (SessionResult's)
        # True while the opening races (until its proof): a stop request ends the screen in flight at once, no
        # further screen or proof starts, the start is put back (OpeningRun); else it lets the round finish
        self.racing = False
        # True until the round loop begins (``_loop``): the start (profile, data load, --start-from, every
        # baseline run due) does not look at a stop request; a stop then ends the session before any round
        self.starting = True
        self.rounds: list[RoundOutcome] = []
        self.current_round = 0
        self.warnings: list[str] = []
        self.started = clock()
        self.noise = Noise()
        self.query_weights: QueryWeights | None = None  # query sets: frozen from the baseline (measure.query_set)
        self.round_seconds: list[float] = []  # wall time of each measured round (next_move.LoopState.round_cost_s)
        self.best_runs: dict[Layer, Measurement] = {}  # a recent run of each stage's best configuration
        # the best configuration's run measured last by the stage's executor, while nothing ran after it
        self.last_best_run: dict[Layer, Measurement] = {}
        self.recorder = SessionRecorder(journal, self.session_id, on_status, cfg.loop.max_rounds)
        self.init = Initializer(
            cfg, target, workload, memory, self.recorder, start_from, self.started, clock, on_baseline_run
        )

    # ------------------------------------------------------------------ the session
    def run(self) -> SessionResult:
        """Initialise, run rounds until the auditor stops, put the best configuration back, learn.

        Raises:
            SessionUsageError: ``loop.reset_data`` on anything but a sandbox (nothing ran).
            SessionError: the target cannot be profiled or measured before the first round.
            SessionInterrupted: Ctrl-C before the first round.
            StorageError: the journal or Memory Book could not be written; when rounds had begun, the
                safe configuration of every stage was put back first (``stage.storage_fault_stop``).
        """
        self.init.open_session(self.planner.name)
        dbms_exec = self._executor(self.target)
        # watches the baseline window, in the database the workload works in
        watcher = rootcause_step.watcher_for(self.cfg, self.target, rootcause_step.workload_database(self.cfg))
        try:
            start = self.init.run(dbms_exec)
        except BaseException:
            if watcher is not None:
                watcher.stop()
            raise
        self.root_cause = rootcause_step.conclude(
            watcher, lambda event, data: self.recorder.event(event, data, 0), self.recorder.on_status
        )
        self.noise = start.noise
        self.query_weights = start.query_weights
        if self.query_weights is not None:
            self._journal_weights(self.query_weights)
        self.warnings += start.warnings
        if start.baseline:
            ordered = sorted(start.baseline, key=lambda m: m.objective)
            self.best_runs[Layer.dbms] = self.best_runs[Layer.os] = ordered[len(ordered) // 2]
            if dbms_exec.last_run is start.baseline[-1]:
                self.last_best_run[Layer.dbms] = start.baseline[-1]
        baseline_samples = [m.objective for m in start.baseline]
        stages = {Layer.dbms: StageState(self.target, dbms_exec, start.catalog, start.snapshot, baseline_samples)}
        layer = Layer.os if self.cfg.loop.stage == "os" else Layer.dbms
        if layer == Layer.os:
            stages[Layer.os] = self._enter_os_stage(baseline_samples)
        try:
            return self._rounds_and_end(stages, layer, start)
        except StorageError as exc:
            raise storage_fault_stop(stages, exc) from exc

    def _rounds_and_end(self, stages: dict[Layer, StageState], layer: Layer, start: Start) -> SessionResult:
        """The round loop, the final apply (always) and the session's end."""
        status, reason = "completed", ""
        try:
            status, reason, layer = self._loop(stages, layer, start)
        finally:
            try:
                start_from = {k: str(v) for k, v in (self.start_from or {}).items()}
                final_problem = apply_final(stages, self.recorder, self.memory, start_from)
            finally:
                self.init.discard()
        if final_problem:
            status, reason = "failed", final_problem
        return self._conclude(stages, layer, start, status, reason or "done")

    def _executor(self, target: Target) -> Executor:
        reset = self.init.reset_data if self.cfg.loop.reset_data else None
        ex = Executor.for_stage(
            self.cfg, target, self.target, self.workload, self.journal, self.session_id, self.extra_state_sources, reset
        )
        ex.should_stop = self.should_stop  # a run an outside signal ends while stopping is no failure
        return ex

    def _enter_os_stage(self, dbms_samples: list[float]) -> StageState:
        if self.os_target is None:
            raise SessionError("OS stage requested but no Linux target is configured")
        return enter_os_stage(self.os_target, self._executor(self.os_target), dbms_samples, self.recorder)

    # ------------------------------------------------------------------ the loop
    def _loop(self, stages: dict[Layer, StageState], layer: Layer, start: Start) -> tuple[str, str, Layer]:
        """Rounds until the auditor terminates, a stop is requested or service cannot be restored.

        Returns (status, reason, the stage the session ended in).
        """
        round_no = 0
        delta: StateDelta | None = start.delta
        self.starting = False  # a stop request from here on is answered: before the opening or the next round
        if self.root_cause is not None:  # not a configuration problem: no knob, no race (issue 40)
            done = self.remediate(self.session_id, self.root_cause) if self.remediate is not None else None
            reason = rootcause_step.stop_reason(self.root_cause, done)
            self.recorder.event("stop", {"decision": Decision.terminate.value, "reason": reason}, 0)
            log.info("session.no_round", reason=reason)
            return "completed", reason, layer
        no_room = self._no_room_for_round(start)
        if no_room:
            self.recorder.event("stop", {"decision": Decision.terminate.value, "reason": no_room}, 0)
            log.info("session.no_round", reason=no_room)
            return "completed", no_room, layer
        try:
            if self.cfg.loop.opening and layer == Layer.dbms and not self.should_stop():
                round_no = OpeningRun(self, stages[layer], start, self.opening_source or default_source(self)).run()
                ended = self._after_opening()
                if ended is not None:
                    return (*ended, layer)
            while not self._stop_requested(round_no):
                no_room = self._no_room_for_round(start, layer, first=False)
                if no_room:
                    self.recorder.event("stop", {"decision": Decision.terminate.value, "reason": no_room}, round_no)
                    log.info("session.no_round", reason=no_room)
                    return "completed", no_room, layer
                round_no += 1
                self.current_round = round_no
                began = self.clock()
                r = self._round(Round(round_no, layer, stages[layer], delta), start)
                if r.outcome is not None and r.outcome.judged is not None:
                    self.round_seconds.append(self.clock() - began)  # a measured round's cost
                delta = r.delta
                outcome, decision = self._decide(r)
                if outcome.recovery is not None and not outcome.recovery.service_available:
                    cause = f"{outcome.failure.message}; " if outcome.failure is not None else ""
                    return "failed", f"{cause}recovery could not restore service: {outcome.recovery.details}", layer
                if decision == Decision.terminate:
                    return "completed", outcome.reason, layer
                if decision == Decision.switch_to_os:
                    layer = Layer.os
                    stages[Layer.os] = self._enter_os_stage(stages[Layer.dbms].samples)
            after = "the last full round" if round_no else "the baseline, before any round"
            return "stopped", f"stop requested (signal): ended after {after}", layer
        except (KeyboardInterrupt, PlannerError, TargetError, ServiceError, WorkloadError, OSError) as exc:
            # outside a trial: entering the OS stage may fail before its stage exists (the DBMS stage's
            # executor journals that failure)
            return (*loop_ended(exc, stages.get(layer, stages[Layer.dbms]), self.recorder, round_no), layer)

    def _after_opening(self) -> tuple[str, str] | None:
        """How the session ends right after the opening ((status, reason)), or None to go on with rounds:
        a recovery that could not restore service, a stop requested (the race stopped at it, the start put back:
        ``opening_run.OpeningRun._stopped``), or the auditor's terminate after the proof."""
        last = self.rounds[-1] if self.rounds else None
        if last is not None and last.opening and last.recovery is not None and not last.recovery.service_available:
            cause = f"{last.failure.message}; " if last.failure is not None else ""
            return "failed", f"{cause}recovery could not restore service: {last.recovery.details}"
        if self._stop_requested(self.current_round):
            return "stopped", f"stop requested (signal): {self.opening_outcome or 'ended after the opening'}"
        if last is None or not last.opening:
            return None
        if last.decision == Decision.terminate and last.judged is not None:
            return "completed", last.reason
        return None

    def _stop_requested(self, after_round: int) -> bool:
        if not self.should_stop():
            return False
        self.recorder.event("stop.requested", {"after_round": after_round}, after_round)
        return True

    def _round(self, r: Round, start: Start) -> Round:
        """One round as named steps; a step that ends the round skips the rest."""
        steps: tuple[Callable[[Round, Start], StepResult], ...] = (
            self._observe,
            self._plan,
            self._trial,
            self._judge,
            self._settle,
        )
        for step in steps:
            if self.recorder.step(r.no, step(r, start)).ends_round:
                break
        return r

    def _decide(self, r: Round) -> tuple[RoundOutcome, Decision]:
        """The auditor's decision after the round; journaled with the round's steps."""
        assert r.outcome is not None
        outcome, loop = r.outcome, self.cfg.loop
        state = next_move.LoopState(
            stage=r.layer,
            rounds_done=r.no - self.opening_rounds,
            max_rounds=loop.max_rounds,
            elapsed_s=self.clock() - self.started,
            time_budget_s=loop.time_budget_s,
            plateau_rounds=loop.plateau_rounds,
            os_stage_enabled=loop.stage == "both" and self.os_target is not None,
            planner_plateau=r.plateau,
            search_patience=loop.search_patience if self.planner.refines else 0,
            round_cost_s=statistics.median(self.round_seconds) if self.round_seconds else 0.0,
            not_started=r.not_started,
        )
        outcome.decision, outcome.reason = next_move.decide(self.rounds, state)
        outcome.finished_at = time.time()
        if outcome.decision in (Decision.terminate, Decision.switch_to_os):
            # why the stage stops, with the figures the rule looked at (budget, rounds, patience)
            figures = next_move.stop_figures(self.rounds, state)
            self.recorder.event("stop", {"decision": outcome.decision.value, "reason": outcome.reason, **figures}, r.no)
        self.memory.record_round(outcome)
        self.recorder.event("decision", {**outcome.model_dump(mode="json"), "steps": self.recorder.take_steps()}, r.no)
        log.info("round.decided", round=r.no, decision=outcome.decision.value, reason=outcome.reason)
        self.on_round(outcome)
        return outcome, outcome.decision

    # ------------------------------------------------------------------ the steps of a round
    def _observe(self, r: Round, start: Start) -> StepResult:
        """Read the live values; a value that differs from what agenticdb left was changed by someone
        else: journaled, left alone and excluded for the rest of the session."""
        r.current = r.stage.target.current_values(list(r.stage.catalog.knobs))
        rivals = r.stage.find_rivals(r.current)
        if rivals:
            r.stage.leave_to_rivals(rivals, self.recorder, r.no)
        left = f"; left to another owner: {', '.join(sorted(rivals))}" if rivals else ""
        return StepResult("observe", f"{len(r.current)} {r.layer.value} values read{left}")

    def _plan(self, r: Round, start: Start) -> StepResult:
        """Planner and validator, with the failed checks fed back up to ``loop.max_planner_retries`` times."""
        ctx = planning_context(
            r.stage,
            r.layer,
            start.profile,
            start.fingerprint,
            self.rounds,
            start.experience,
            r.current,
            r.delta,
            self.cfg.policy,
        )
        plan = plan_round(
            self.planner,
            ctx,
            lambda p: check(p, r.stage, start.profile, r.layer, self.cfg.policy, r.delta),
            self.cfg.loop.max_planner_retries,
            lambda event, data: self.recorder.event(event, data, r.no),
            r.no,
        )
        r.plan, r.plateau = plan, plan.plateau
        r.outcome = plan.outcome(self.session_id, r.no, r.layer)
        self.rounds.append(r.outcome)
        return StepResult("plan", plan.line(), ends_round=not plan.accepted)

    def _trial(self, r: Round, start: Start) -> StepResult:
        """Snapshot, intent, apply, verify and measure once; a failure goes to recovery."""
        assert r.plan is not None and r.plan.verdict is not None and r.outcome is not None
        if self.approve is not None:
            refused = self.approve(self.session_id, r.no, r.plan.proposal, r.plan.verdict)
            if refused is not None:
                return refused_trial(r.outcome, r.plan.verdict, refused, self.recorder, r.no)
        r.safe = r.stage.snapshot
        prior = self.last_best_run.pop(r.layer, None)
        r.prior_best = prior if prior is not None and r.stage.executor.last_run is prior else None
        restarts = r.plan.verdict.apply_requirement == ApplyMode.restart
        reused = r.prior_best is not None and not r.prior_best.disturbed
        r.not_started = self._not_started(self._round_cost(start, reused, restarts), self._round_label(restarts), r.no)
        if r.not_started:  # the planner's time may have used the room the round had when it began
            r.outcome.reason = r.not_started
            if r.prior_best is not None:
                self.last_best_run[r.layer] = r.prior_best  # nothing ran: it is still the last run
            return StepResult("trial", f"not started: {r.not_started}", ends_round=True)
        execution = r.stage.executor.trial(r.plan.verdict, r.safe, r.no, self._trial_limit(r))
        if execution.failure is not None:
            return self._failed(r, "trial", execution.failure)
        assert execution.measurement is not None
        r.screen = execution.measurement
        r.delta = execution.state_delta or r.delta
        how = "restarted" if execution.restarted else r.plan.verdict.apply_requirement.value
        return StepResult("trial", f"applied ({how}), verified, objective {r.screen.objective:,.3f}")

    def _trial_limit(self, r: Round) -> TrialLimit | None:
        """The bound of the trial's first run (``agenticdb.measure.trial_limit``), from a recent best run."""
        return TrialLimit.for_best(self.cfg.loop, r.stage.objective, self.best_runs.get(r.layer))

    def _judge(self, r: Round, start: Start) -> StepResult:
        """The auditor's keep-or-revert protocol (``auditor.assess``): screen, then interleaved pairs until
        the sequential test settles or its caps make it a tie."""
        assert r.screen is not None and r.plan is not None and r.plan.verdict is not None and r.outcome is not None
        assert r.safe is not None
        verdict = r.plan.verdict
        restarts = verdict.apply_requirement == ApplyMode.restart
        runs = PairedRuns(r.stage.executor, list(r.stage.catalog.knobs), r.safe, verdict.changes, r.no, restarts)
        r.runs = runs

        def disturbed(label: str, m: Measurement, reason: str, pair_with: tuple[str, Measurement]) -> None:
            other, om = pair_with
            data = {
                "label": label,
                "reason": reason,
                "objective": m.objective,
                "taken_at": m.taken_at,
                "pair_with": {"label": other, "objective": om.objective, "taken_at": om.taken_at},
            }
            self.recorder.event("run.disturbed", data, r.no)
            log.warning(
                "run.disturbed",
                round=r.no,
                label=label,
                objective=round(m.objective, 3),
                reason=reason,
                discarded_with=other,
            )

        prior = auditor.adoptable_prior(r.prior_best, r.screen)
        if prior is not None:
            log.info("judge.prior_best", round=r.no, objective=round(prior.objective, 3), reason="pair 1's best run")
        try:
            reused = prior is not None
            runs_needed = next_move.decision_runs(self.cfg.loop.min_pairs, reused)
            run_cost = self._cost_prior(start, reused, restarts) / runs_needed
            rules = self._rules(run_cost, reused)
            a = auditor.assess(r.screen, r.stage.objective, runs, rules, disturbed, self.clock, prior_best=prior)
        except (TargetError, ServiceError, WorkloadError, OSError) as exc:
            phase: FailurePhase = "workload" if isinstance(exc, WorkloadError) else "apply"
            failure = r.stage.executor.failure(exc, phase, verdict.changes, r.no, "confirmation run failed")
            return self._failed(r, "judge", failure)
        self.noise = self.noise.pool(Noise.from_pairs(a.log_ratios()))
        fresh = a.candidate if a.better else a.best
        if fresh:
            self.best_runs[r.layer] = fresh[-1]
        r.assessment = a
        auditor.record_assessment(a, r.outcome, r.screen, r.stage.objective, start.higher_is_better)
        judged = {**auditor.judged_event(a, r.outcome, rules), "reused_best_run": prior is not None}
        self.recorder.event("judged", judged, r.no)
        log.info("round.judged", round=r.no, verdict=a.verdict, reason=a.reason)
        return StepResult("judge", a.reason)

    def _rules(self, run_cost_s: float = 0.0, reused_best_run: bool = False) -> auditor.DecisionRules:
        """The decision protocol from ``[loop]``, with the noise learnt so far, the time left and, from one
        run's expected cost (seconds), the pairs that fit in it (``auditor.decision_rules``)."""
        left = self.cfg.loop.time_budget_s - (self.clock() - self.started)
        return auditor.decision_rules(self.cfg.loop, self.noise, left, self.query_weights, run_cost_s, reused_best_run)

    def _journal_weights(self, weights: QueryWeights) -> None:
        """One ``query_weights`` event: the decisions on this query set use the per-query statistic."""
        top = ", ".join(f"{q} {w:.0%}" for q, w in weights.top())
        prior = (  # one baseline run shows no spread (df 0): not a noise of 0 %, none measured
            f"noise prior on the same statistic: run CV {self.noise.run_cv:.1%}"
            if self.noise.df
            else "no noise prior on the same statistic (one baseline run): the pairs estimate it"
        )
        runs = f"{weights.runs} baseline run{'' if weights.runs == 1 else 's'}"
        reason = (
            f"pairs judged on d = Σ w_q·ln(best_q/candidate_q), weights frozen from {runs} (heaviest: {top}); {prior}"
        )
        self.recorder.event("query_weights", {"weights": dict(weights.weights), "reason": reason}, None)
        log.info("judge.query_weights", queries=len(weights.weights), reason=reason)

    def _settle(self, r: Round, start: Start) -> StepResult:
        """Keep a change that beat the best; otherwise revert to the best configuration and verify it."""
        assert r.assessment is not None and r.plan is not None and r.plan.verdict is not None
        assert r.outcome is not None and r.safe is not None
        a = r.assessment
        repair = auditor.repair_kept(a, r.plan.proposal, r.plan.verdict.changes, r.stage.catalog)
        if repair is not None:  # an undecided return to the default from a known bad start stays
            log.info("round.repair_kept", round=r.no, reason=repair)
            self.recorder.event("repair_kept", {"reason": repair}, r.no)
        self._note_last_best_run(r)
        if a.better or repair is not None:
            if r.runs is not None:
                try:
                    r.runs.keep_candidate()  # the last pair may have ended on the best configuration
                except (TargetError, ServiceError) as exc:
                    failure = Failure(phase="apply", message=f"keep failed: {exc}", attempted=r.plan.verdict.changes)
                    return self._failed(r, "settle", failure)
            r.outcome.kept = True
            changes = {c.name: c.value for c in r.plan.verdict.changes}
            r.stage.keep(changes, [m.objective for m in a.candidate], r.no)
            self.recorder.close_intent(r.no, "kept")
            return StepResult("settle", f"kept; best configuration is now '{r.stage.snapshot.label}'")
        reverted = r.stage.revert()
        if reverted.verified:
            self.recorder.event("reverted", {"to": r.safe.label, "reason": a.reason}, r.no)
            self.recorder.close_intent(r.no, "reverted")
            return StepResult("settle", f"reverted to '{r.safe.label}' and verified")
        message = f"revert failed: {reverted.problem('revert')}"
        return self._failed(r, "settle", Failure(phase="apply", message=message, attempted=r.plan.verdict.changes))

    def _note_last_best_run(self, r: Round) -> None:
        """Remember the decision's last run when it measured the configuration that is best after it (the
        candidate when kept, the best one otherwise) and belongs to one of the decision's valid pairs: the
        next trial's pair 1 may reuse it. A run whose pair was discarded as disturbed is never reused, even
        when its own samples looked calm (a new user's demo on 2026-12-06 saw the discarded "best 5" reused
        as round 5's pair 1)."""
        assert r.assessment is not None
        last, active = r.stage.executor.last_run, r.runs.active if r.runs is not None else "candidate"
        better = r.assessment.better
        valid = r.assessment.candidate if better else r.assessment.best
        if last is not None and active == ("candidate" if better else "best") and any(last is m for m in valid):
            self.last_best_run[r.layer] = last

    def _failed(self, r: Round, step: str, failure: Failure) -> StepResult:
        """A failed trial, confirmation or revert: recovery back to the safe snapshot ends the round
        (``round.round_failed``); the summary tells it in full, with the server's own reason."""
        result = round_failed(r, step, failure, self.recorder)
        self.warnings.append(f"round {r.no} {result.line}")
        return result

    # ------------------------------------------------------------------ the end
    def _conclude(
        self, stages: dict[Layer, StageState], layer: Layer, start: Start, status: str, reason: str
    ) -> SessionResult:
        """Experience, the Memory Book's session row, ``session.end`` and the result."""
        best: dict[str, str] = {}
        for st in stages.values():
            best.update(st.changes)
        best_obj = stages[layer].objective
        if any(r.proposal is not None and r.changes for r in self.rounds):
            # A session that tried nothing (stopped at once, planner had nothing) teaches nothing.
            catalogs = [self.target.catalog()] + ([self.os_target.catalog()] if self.os_target else [])
            gain = next_move.relative_gain(best_obj, start.objective, start.higher_is_better)
            learn(self.memory, self.session_id, start.fingerprint, start.hardware, self.rounds, best, catalogs, gain)
        self.memory.end_session(
            self.session_id,
            status=status,
            baseline_objective=start.objective,
            best_objective=best_obj,
            best_config=best,
        )
        usage = self.planner.usage()
        end = {"status": status, "reason": reason, "baseline_objective": start.objective, "best_objective": best_obj}
        self.recorder.event("session.end", {**end, "best_changes": best, "rounds": len(self.rounds), "llm": usage})
        log.info("session.end", session=self.session_id, status=status, reason=reason, best=round(best_obj, 3))
        return SessionResult(
            self.session_id,
            status,
            reason,
            start.objective,
            best_obj,
            start.baseline[0].objective_name,
            start.higher_is_better,
            best,
            list(self.rounds),
            start.cv,
            usage,
            {k: str(v) for k, v in (self.start_from or {}).items()},
            list(self.warnings),
            self.opening_outcome,
            (sum(m.disturbed for m in start.baseline), len(start.baseline)),
            list(self.opening_left_out),
        )
