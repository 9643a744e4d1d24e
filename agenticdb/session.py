"""One reconfiguration process: the round loop of DESIGN.md.

Initializer → (Planner → Validator → Executor → Recovery → Auditor)* → apply best, verify, Experience.

Every component is passed in (``agenticdb.app`` builds them from the configuration); this module only
orders the steps and records each decision in the journal and the Memory Book.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import structlog
from pydantic import BaseModel

from agenticdb import auditor
from agenticdb.config import Settings
from agenticdb.executor import Executor
from agenticdb.initializer import build_profile, fingerprint, measure_baseline, profile_target
from agenticdb.journal import Journal
from agenticdb.memory import MemoryBook
from agenticdb.models import (
    ApplyMode,
    Bottleneck,
    Catalog,
    Change,
    Decision,
    Experience,
    FailedCheck,
    Fingerprint,
    Layer,
    Measurement,
    PlanningContext,
    Proposal,
    RecoveryResult,
    RoundOutcome,
    RuntimeProfile,
    Snapshot,
    Verdict,
)
from agenticdb.planner.base import Planner, PlannerError
from agenticdb.pristine import PG_CONFIG_FILES, PristineData
from agenticdb.recovery import Recovery, restore_verified
from agenticdb.targets.base import Target
from agenticdb.validator import validate
from agenticdb.workloads.base import Workload, WorkloadError

log = structlog.get_logger(__name__)

#: Above this baseline CV the session warns that only large effects can be told from noise
#: (MEASUREMENT.md: 5–11 % is reachable on this kind of host with data resets; 19 % without).
NOISE_WARN_CV = 0.15

BYTES_PER_UNIT = {"B": 1, "kB": 1024, "8kB": 8192, "16kB": 16384, "32kB": 32768, "MB": 2**20, "GB": 2**30}


class SessionError(RuntimeError):
    """The session could not continue (initialization failed, or recovery could not restore service)."""

    exit_code = 1


class SessionUsageError(SessionError):
    """The session was asked for something it refuses (e.g. ``reset_data`` on a real server); nothing ran."""

    exit_code = 2


class SessionInterrupted(SessionError):
    """Ctrl-C before the first round."""

    exit_code = 130


@dataclass
class StageState:
    """The best known configuration of one stage: its snapshot and objective samples."""

    target: Target
    executor: Executor
    catalog: Catalog
    snapshot: Snapshot
    samples: list[float]
    changes: dict[str, str] = field(default_factory=dict)
    rivals: dict[str, str] = field(default_factory=dict)

    @property
    def objective(self) -> float:
        return statistics.median(self.samples)

    @property
    def tunable(self) -> Catalog:
        """The catalog minus knobs someone else changed during the session (left alone from then on)."""
        if not self.rivals:
            return self.catalog
        return self.catalog.model_copy(
            update={
                "knobs": {k: v for k, v in self.catalog.knobs.items() if k not in self.rivals},
                "excluded": {**self.catalog.excluded, **self.rivals},
            }
        )


@dataclass
class SessionResult:
    """What ``tune`` prints at the end and returns to the caller."""

    session_id: str
    status: str
    reason: str
    baseline_objective: float | None = None
    best_objective: float | None = None
    objective_name: str = ""
    higher_is_better: bool = True
    best_changes: dict[str, str] = field(default_factory=dict)
    rounds: list[RoundOutcome] = field(default_factory=list)
    noise_cv: float = 0.0
    llm_totals: dict[str, float] = field(default_factory=dict)
    start_from: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


RoundCallback = Callable[[RoundOutcome], None]


class TuningSession:
    """Runs one tuning session against ``target`` (and, in the OS stage, ``os_target``)."""

    def __init__(
        self,
        cfg: Settings,
        target: Target,
        workload: Workload,
        planner: Planner,
        journal: Journal,
        memory: MemoryBook,
        os_target: Target | None = None,
        state_sources: list[Callable[[], object]] | None = None,
        on_round: RoundCallback | None = None,
        should_stop: Callable[[], bool] | None = None,
        session_id: str | None = None,
        start_from: dict[str, object] | None = None,
    ) -> None:
        self.cfg = cfg
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
        self.rounds: list[RoundOutcome] = []
        self.current_round = 0
        self.warnings: list[str] = []
        self.pristine: PristineData | None = None
        self.started = time.monotonic()

    # ------------------------------------------------------------------ helpers
    def _event(self, event: str, data: BaseModel | dict[str, Any], round_no: int | None = None) -> None:
        payload = data.model_dump(mode="json") if isinstance(data, BaseModel) else data
        self.journal.append(self.session_id, event, payload, round_no)

    def _end_failed(self, reason: str, output: str = "") -> None:
        """Journal the end of a session that failed before its first round (nothing was changed)."""
        self._event("session.end", {"status": "failed", "reason": reason, "output": output[-2000:]})

    def _executor(self, target: Target) -> Executor:
        sources = [target.runtime_state]
        if target is not self.target:
            sources.append(self.target.runtime_state)
        sources += self.extra_state_sources  # type: ignore[arg-type]
        return Executor(
            target,
            sources,
            self.workload,
            self.journal,
            self.session_id,
            self.cfg.workload.warmup_s,
            self.cfg.workload.duration_s,
            before_measure=self._reset_data if self.cfg.loop.reset_data else None,
        )

    def _reset_data(self) -> None:
        if self.pristine is not None:
            self.pristine.reset()

    def _setup_pristine(self, executor: Executor) -> None:
        """``loop.reset_data``: copy the loaded sandbox data dir once; every measured run starts from it.

        ``run`` has already refused it on anything but a sandbox (it would lose a real server's data).
        """
        data_dir = getattr(self.target, "data_dir", None)
        service = getattr(self.target, "service", None)
        if not data_dir or service is None:
            raise SessionError("loop.reset_data needs the sandbox's data directory and service controller")
        keep = PG_CONFIG_FILES if self.target.kind == "postgresql" else ()
        self.pristine = PristineData(
            str(data_dir),
            service,
            keep=keep,
            before_stop=getattr(self.target, "prepare_clean_shutdown", None),
        )
        took = self.pristine.capture()
        self._event(
            "pristine.captured",
            {
                "data_dir": str(data_dir),
                "seconds": round(took, 2),
                "reason": "reset before every measured run (MEASUREMENT.md)",
            },
        )

    def _elapsed(self) -> float:
        return time.monotonic() - self.started

    def _validate(
        self, proposal: Proposal, stage: StageState, hardware_profile: RuntimeProfile, layer: Layer
    ) -> Verdict:
        current = stage.target.current_values(list(stage.catalog.knobs))
        can_restart = getattr(getattr(stage.target, "service", None), "can_restart", lambda: True)()
        return validate(
            proposal,
            stage.tunable,
            current,
            hardware_profile.hardware,
            self.cfg.policy,
            layer,
            can_restart=can_restart,
        )

    # ------------------------------------------------------------------ main loop
    def run(self) -> SessionResult:
        """Run the session. Raises SessionError when the target cannot be profiled or brought back."""
        cfg = self.cfg
        if cfg.loop.reset_data and cfg.target.sandbox is None:
            raise SessionUsageError(
                "loop.reset_data = true restores an old copy of the data directory and discards every write "
                "since: it is allowed only on a sandbox (--sandbox postgres|mariadb)"
            )
        self._event(
            "session.start",
            {
                "target": self.target.kind,
                "workload": cfg.workload.kind,
                "planner": self.planner.name,
                "durability": cfg.policy.durability,
                "allow_restart": cfg.policy.allow_restart,
                "loop": cfg.loop.model_dump(mode="json"),
                "policy": cfg.policy.model_dump(mode="json"),
            },
        )
        if cfg.policy.durability == "relaxed":
            self._event("policy.relaxed", {"reason": "durability = relaxed chosen explicitly in configuration"})
        log.info("session.start", session=self.session_id, target=self.target.kind, workload=cfg.workload.kind)
        try:
            try:
                catalog, hardware, version, current = profile_target(self.target)
            except Exception as exc:
                self._event("session.end", {"status": "failed", "reason": f"initialization failed: {exc}"})
                raise SessionError(f"cannot profile the target: {exc}") from exc
            dbms_exec = self._executor(self.target)
            try:
                self.workload.prepare()
            except WorkloadError as exc:
                self._end_failed(f"workload prepare failed: {exc}", exc.output)
                raise SessionError(f"workload {cfg.workload.kind} could not prepare: {exc}") from exc

            if cfg.loop.reset_data:
                self._setup_pristine(dbms_exec)

            if self.start_from:
                self._apply_start_from(catalog, hardware, current, dbms_exec)
                current = self.target.current_values(list(catalog.knobs))

            baseline_snapshot = self.target.snapshot(list(catalog.knobs), label="baseline")
            try:
                baseline, delta, cv = measure_baseline(dbms_exec, cfg.loop.baseline_runs)
            except WorkloadError as exc:
                self._end_failed(f"baseline run failed: {exc}", exc.output)
                raise SessionError(f"baseline measurement failed (nothing was changed): {exc}") from exc
            profile = build_profile(self.target, version, hardware, current, baseline, delta, cv, cfg)
            fp = fingerprint(self.target, version, self.workload, hardware)
            self._event(
                "profile",
                {
                    "profile": profile.model_dump(mode="json"),
                    "fingerprint": fp.model_dump(mode="json"),
                    "catalog": {"knobs": len(catalog.knobs), "excluded": catalog.excluded},
                },
            )
            self._event(
                "baseline",
                {
                    "objectives": [m.objective for m in baseline],
                    "noise_cv": cv,
                    "objective_name": baseline[0].objective_name,
                    "higher_is_better": baseline[0].higher_is_better,
                },
            )
            self.memory.start_session(
                self.session_id, target=self.target.kind, fingerprint=fp, workload=cfg.workload.kind
            )
            experience = [e for _, e in self.memory.retrieve(fp)]
            if experience:
                self._event("experience.retrieved", {"sessions": [e.session_id for e in experience]})

        except KeyboardInterrupt:
            note = (
                "the --start-from configuration remains in effect (agenticdb rollback --dbms undoes it)"
                if self.start_from
                else "nothing was changed"
            )
            self._event(
                "session.end",
                {"status": "interrupted", "reason": f"interrupted before the first round; {note}"},
            )
            raise SessionInterrupted(f"interrupted before the first round; {note}") from None
        if cv > NOISE_WARN_CV:
            band = max(cfg.loop.min_gain, cfg.loop.noise_factor * cv)
            advice = (
                f"measured noise CV {cv:.0%}: only changes beyond ±{band:.0%} "
                "count; lengthen --duration, add --baseline-runs, use --reset-data on a sandbox, or stop other "
                "load on this host"
            )
            self.warnings.append(advice)
            self._event("noise.high", {"noise_cv": cv, "advice": advice})
            log.warning("baseline.noisy", cv=round(cv, 3), reason=advice)
        higher = baseline[0].higher_is_better
        baseline_obj = statistics.median(m.objective for m in baseline)
        stages = {
            Layer.dbms: StageState(self.target, dbms_exec, catalog, baseline_snapshot, [m.objective for m in baseline])
        }
        layer = Layer.os if cfg.loop.stage == "os" else Layer.dbms
        if layer == Layer.os:
            stages[Layer.os] = self._enter_os_stage(stages[Layer.dbms].samples)
        last_delta = delta
        status, reason = "completed", ""
        round_no = 0
        try:
            while True:
                if self.should_stop():
                    status, reason = "stopped", "stop requested (signal): ended after the last full round"
                    self._event("stop.requested", {"after_round": round_no}, round_no)
                    break
                round_no += 1
                self.current_round = round_no
                stage = stages[layer]
                outcome, last_delta, planner_plateau = self._round(
                    round_no, layer, stage, profile, fp, experience, last_delta, higher, cv
                )
                decision, why = auditor.decide(
                    self.rounds,
                    auditor.LoopState(
                        stage=layer,
                        rounds_done=round_no,
                        max_rounds=cfg.loop.max_rounds,
                        elapsed_s=self._elapsed(),
                        time_budget_s=cfg.loop.time_budget_s,
                        plateau_rounds=cfg.loop.plateau_rounds,
                        os_stage_enabled=cfg.loop.stage == "both" and self.os_target is not None,
                        planner_plateau=planner_plateau,
                    ),
                )
                outcome.decision, outcome.reason = decision, why
                outcome.finished_at = time.time()
                self.rounds[-1] = outcome
                self.memory.record_round(outcome)
                self._event("decision", outcome, round_no)
                log.info("round.decided", round=round_no, decision=decision.value, reason=why)
                self.on_round(outcome)
                if outcome.recovery is not None and not outcome.recovery.service_available:
                    status, reason = (
                        "failed",
                        f"recovery could not restore service: {outcome.recovery.details}",
                    )
                    break
                if decision == Decision.terminate:
                    reason = why
                    break
                if decision == Decision.switch_to_os:
                    layer = Layer.os
                    stages[Layer.os] = self._enter_os_stage(stages[Layer.dbms].samples)
        except KeyboardInterrupt:
            status, reason = "interrupted", "interrupted (Ctrl-C); the best configuration so far is put back"
            self._event("interrupted", {"round": round_no}, round_no)
        except PlannerError as exc:
            # e.g. the LLM endpoint refused our key: stop, but still put the best configuration back.
            status, reason = "failed", f"planner error: {exc}"
            self._event("planner.error", {"error": str(exc)}, round_no)
        finally:
            final_reason = self._finish(stages, status)
            if self.pristine is not None:
                self.pristine.discard()
        if final_reason:
            status, reason = "failed", final_reason
        elif status == "completed" and not reason:
            reason = "done"
        best_changes: dict[str, str] = {}
        for st in stages.values():
            best_changes.update(st.changes)
        best_obj = stages[layer].objective
        if any(r.proposal is not None and r.changes for r in self.rounds):
            # A session that tried nothing (stopped at once, planner had nothing) teaches nothing.
            exp = self._experience(fp, best_changes, hardware, baseline_obj, best_obj, higher)
            self.memory.write_experience(exp)
        self.memory.end_session(
            self.session_id,
            status=status,
            baseline_objective=baseline_obj,
            best_objective=best_obj,
            best_config=best_changes,
        )
        llm_totals = dict(getattr(self.planner, "totals", {}) or {})
        self._event(
            "session.end",
            {
                "status": status,
                "reason": reason,
                "baseline_objective": baseline_obj,
                "best_objective": best_obj,
                "best_changes": best_changes,
                "rounds": len(self.rounds),
                "llm": llm_totals,
            },
        )
        log.info(
            "session.end",
            session=self.session_id,
            status=status,
            reason=reason,
            baseline=round(baseline_obj, 3),
            best=round(best_obj, 3),
        )
        return SessionResult(
            self.session_id,
            status,
            reason,
            baseline_obj,
            best_obj,
            baseline[0].objective_name,
            higher,
            best_changes,
            list(self.rounds),
            cv,
            llm_totals,
            {k: str(v) for k, v in (self.start_from or {}).items()},
            list(self.warnings),
        )

    # ------------------------------------------------------------------ one round
    def _round(
        self,
        round_no: int,
        layer: Layer,
        stage: StageState,
        profile: RuntimeProfile,
        fp: Fingerprint,
        experience: list[Experience],
        last_delta,
        higher: bool,
        cv: float,
    ):
        cfg = self.cfg
        current = stage.target.current_values(list(stage.catalog.knobs))
        self._detect_rivals(stage, current, round_no)
        ctx = PlanningContext(
            profile=profile,
            fingerprint=fp,
            catalog=stage.tunable,
            stage=layer,
            rounds=list(self.rounds),
            experience=experience,
            best_config=dict(stage.changes),
            current_config=current,
            last_delta=last_delta,
            max_changes=cfg.policy.max_changes,
            max_step_factor=cfg.policy.max_step_factor,
            allow_restart=cfg.policy.allow_restart,
            durability=cfg.policy.durability,
            untrusted_text=stage.target.log_tail(10),
        )
        proposal: Proposal | None = None
        verdict: Verdict | None = None
        rejected: list[FailedCheck] = []
        for attempt in range(cfg.loop.max_planner_retries + 1):
            proposal = self.planner.propose(ctx)
            self._event("proposal", proposal, round_no)
            log.info(
                "round.proposed",
                round=round_no,
                attempt=attempt + 1,
                bottleneck=proposal.bottleneck.value,
                changes={c.name: c.value for c in proposal.changes},
                plateau=proposal.plateau,
            )
            if proposal.plateau or not proposal.changes:
                outcome = RoundOutcome(
                    session_id=self.session_id,
                    round_no=round_no,
                    stage=layer,
                    bottleneck=proposal.bottleneck,
                    proposal=proposal,
                    verdict_ok=False,
                    failed_checks=rejected,
                    decision=Decision.terminate,
                    reason=proposal.rationale or "planner has nothing left",
                )
                self.rounds.append(outcome)
                return outcome, last_delta, True
            verdict = self._validate(proposal, stage, profile, layer)
            self._event("verdict", verdict, round_no)
            if verdict.ok:
                break
            log.info("round.rejected", round=round_no, attempt=attempt + 1, failed=verdict.feedback())
            rejected += verdict.failed
            ctx = ctx.model_copy(update={"validator_feedback": list(verdict.failed)})
        assert proposal is not None and verdict is not None
        outcome = RoundOutcome(
            session_id=self.session_id,
            round_no=round_no,
            stage=layer,
            bottleneck=proposal.bottleneck,
            proposal=proposal,
            verdict_ok=verdict.ok,
            failed_checks=rejected if not verdict.ok else verdict.failed,
            changes={c.name: c.value for c in verdict.changes},
            decision=Decision.continue_,
            reason="",
        )
        self.rounds.append(outcome)
        if not verdict.ok:
            outcome.changes = {c.name: str(c.value) for c in proposal.changes}
            return outcome, last_delta, False

        safe = stage.snapshot
        execution = stage.executor.trial(verdict, safe, round_no)
        if execution.failure is not None:
            outcome.failure = execution.failure
            outcome.recovery = self._recover(stage, execution.failure, safe, round_no)
            return outcome, last_delta, False

        assert execution.measurement is not None
        candidate = [execution.measurement.objective]
        best_samples = list(stage.samples)
        judgement = auditor.judge(candidate, best_samples, higher, cv, cfg.loop.min_gain, cfg.loop.noise_factor)
        measurements = [execution.measurement]
        # A single unpaired run is only a screen: any change beyond the minimum gain is re-measured
        # interleaved, and the paired runs decide (a placebo's one run lands outside a band estimated from
        # 2-3 baseline runs ~10% of the time; a real gain on a drifting, noisy host may land inside it).
        if abs(judgement.gain) > cfg.loop.min_gain and cfg.loop.confirm_runs > 0:
            judgement, measurements = self._confirm(stage, verdict, safe, round_no, higher, cv, measurements)
        outcome.measurement = measurements[-1]
        outcome.objective = statistics.median(m.objective for m in measurements)
        outcome.gain_vs_best = judgement.gain
        outcome.judged = judgement.verdict  # type: ignore[assignment]
        self._event(
            "judged",
            {
                "verdict": judgement.verdict,
                "gain": judgement.gain,
                "threshold": judgement.threshold,
                "reason": judgement.reason,
                "candidate": [m.objective for m in measurements],
                "best": best_samples,
            },
            round_no,
        )
        log.info("round.judged", round=round_no, verdict=judgement.verdict, reason=judgement.reason)
        if judgement.better:
            outcome.kept = True
            stage.changes.update({c.name: c.value for c in verdict.changes})
            stage.samples = [m.objective for m in measurements]
            stage.snapshot = stage.target.snapshot(list(stage.catalog.knobs), label=f"round {round_no}")
            self._close_intent(round_no, "kept")
        else:
            # Back to the best configuration; a revert that fails is a failure like any other.
            reverted = restore_verified(stage.target, safe)
            if reverted.verified:
                self._event("reverted", {"to": safe.label, "reason": judgement.reason}, round_no)
                self._close_intent(round_no, "reverted")
            else:
                from agenticdb.models import Failure

                message = f"revert failed: {reverted.problem('revert')}"
                outcome.failure = Failure(phase="apply", message=message, attempted=verdict.changes)
                outcome.recovery = self._recover(stage, outcome.failure, safe, round_no)
        return outcome, execution.state_delta or last_delta, False

    def _detect_rivals(self, stage: StageState, current: dict[str, str], round_no: int) -> None:
        """Compare the live values with what agenticdb last left in effect (the stage snapshot). A value
        that differs was changed by someone else (a DBA's ALTER SYSTEM, config management, tuned): it is
        left alone, journaled, and excluded for the rest of the session. The safe snapshot is retaken so
        later reverts and the final apply keep the other owner's value."""
        changed = {
            name: (expected, current[name])
            for name, expected in stage.snapshot.values.items()
            if name in current
            and name not in stage.rivals
            and current[name].strip().lower() != expected.strip().lower()
        }
        if not changed:
            return
        for name, (expected, actual) in changed.items():
            stage.rivals[name] = f"changed outside agenticdb during the session ({expected} → {actual}): left alone"
            self._event(
                "rival.detected",
                {
                    "parameter": name,
                    "agenticdb_value": expected,
                    "live_value": actual,
                    "action": "excluded for this session",
                },
                round_no,
            )
            log.warning(
                "rival.detected",
                parameter=name,
                expected=expected,
                actual=actual,
                reason="another owner changed it; excluded for this session",
            )
            stage.changes.pop(name, None)
        stage.snapshot = stage.target.snapshot(
            list(stage.catalog.knobs), label=f"after outside change of {', '.join(sorted(changed))}"
        )

    def _confirm(
        self,
        stage: StageState,
        verdict: Verdict,
        safe: Snapshot,
        round_no: int,
        higher: bool,
        cv: float,
        measurements: list[Measurement],
    ) -> tuple[auditor.Judgement, list[Measurement]]:
        """Re-measure best and candidate interleaved (best, candidate, best, candidate …) and judge the
        median of paired ratios (MEASUREMENT.md: interleaving cut the effect of drift)."""
        candidate_snapshot = stage.target.snapshot(list(stage.catalog.knobs), label=f"candidate {round_no}")
        best_vals: list[float] = []
        cand_vals: list[float] = []
        restarts = verdict.apply_requirement == ApplyMode.restart
        confirmed: list[Measurement] = []
        for i in range(self.cfg.loop.confirm_runs):
            stage.target.restore(safe)
            b, _ = stage.executor.measure(round_no, f"confirm best {i + 1}", after_restart=restarts)
            stage.target.restore(candidate_snapshot)
            stage.target.verify(verdict.changes)
            c, _ = stage.executor.measure(round_no, f"confirm candidate {i + 1}", after_restart=restarts)
            best_vals.append(b.objective)
            cand_vals.append(c.objective)
            confirmed.append(c)
        j = auditor.judge(
            cand_vals, best_vals, higher, cv, self.cfg.loop.min_gain, self.cfg.loop.noise_factor, paired=True
        )
        # The decision rests on the paired runs only; the first (unpaired) run just made us look closer.
        return j, confirmed

    def _recover(self, stage: StageState, failure, safe: Snapshot, round_no: int) -> RecoveryResult:
        result = Recovery(stage.target).recover(failure, safe)
        self._event("recovery", result, round_no)
        self._close_intent(round_no, f"recovery:{result.action}")
        log.warning(
            "round.recovered",
            round=round_no,
            action=result.action,
            available=result.service_available,
            details=result.details,
        )
        return result

    def _close_intent(self, round_no: int, how: str) -> None:
        self.journal.close_intent(self.session_id, round_no, how)

    # ------------------------------------------------------------------ stages, start and end
    def _enter_os_stage(self, dbms_samples: list[float]) -> StageState:
        if self.os_target is None:
            raise SessionError("OS stage requested but no Linux target is configured")
        catalog = self.os_target.catalog()
        snap = self.os_target.snapshot(list(catalog.knobs), label="os originals")
        self._event(
            "stage.os",
            {"parameters": len(catalog.knobs), "unsupported": catalog.unsupported, "originals": snap.values},
        )
        log.info("stage.switched", stage="os", parameters=len(catalog.knobs))
        return StageState(self.os_target, self._executor(self.os_target), catalog, snap, list(dbms_samples))

    def _apply_start_from(self, catalog: Catalog, hardware, current: dict[str, str], executor: Executor) -> None:
        """``tune --start-from FILE``: apply a starting configuration through validator and executor."""
        assert self.start_from is not None
        proposal = Proposal(
            bottleneck=Bottleneck.unknown,
            changes=[
                Change(name=k, value=v)  # type: ignore[arg-type]
                for k, v in self.start_from.items()
            ],
            rationale="starting configuration from --start-from",
            planner="start-from",
        )
        policy = self.cfg.policy.model_copy(
            update={"max_changes": max(len(proposal.changes), 1), "max_step_factor": 1e12}
        )
        verdict = validate(
            proposal,
            catalog,
            current,
            hardware,
            policy,
            Layer.dbms,
            can_restart=getattr(getattr(self.target, "service", None), "can_restart", lambda: True)(),
        )
        self._event(
            "start_from",
            {"proposal": proposal.model_dump(mode="json"), "verdict": verdict.model_dump(mode="json")},
        )
        if not verdict.ok:
            raise SessionError("--start-from refused by the validator:\n" + verdict.feedback())
        safe = self.target.snapshot(list(catalog.knobs), label="before start-from")
        try:
            executor.apply(verdict.changes, verdict.apply_requirement, 0, safe, purpose="start-from")
        except Exception as exc:
            Recovery(self.target).recover(None, safe)
            raise SessionError(f"--start-from could not be applied: {exc}") from exc
        self._close_intent(0, "start-from applied")

    def _finish(self, stages: dict[Layer, StageState], status: str) -> str:
        """Apply and verify the best configuration of every stage; returns an error text or ''."""
        problems = []
        for layer, st in stages.items():
            # An intent for the final apply too: a crash in the middle is reconciled to the best snapshot.
            self.journal.append(
                self.session_id,
                "intent",
                {
                    "purpose": "final",
                    "target": st.target.kind,
                    "mode": "restore",
                    "changes": [{"name": k, "value": v} for k, v in st.changes.items()],
                    "snapshot": st.snapshot.model_dump(mode="json"),
                },
                None,
            )
            restored = restore_verified(st.target, st.snapshot)
            if restored.verified:
                self._event(
                    "final",
                    {
                        "stage": layer.value,
                        "snapshot": st.snapshot.label,
                        "changes": st.changes,
                        "start_from": {k: str(v) for k, v in (self.start_from or {}).items()}
                        if layer == Layer.dbms
                        else {},
                        "verified": True,
                    },
                )
                log.info("session.final_applied", stage=layer.value, changes=st.changes)
                self.journal.close_intent(self.session_id, None, f"final {layer.value} configuration verified")
                if layer == Layer.os:
                    # Values not kept are back at their originals: reconciliation must not touch them again.
                    for name in st.snapshot.values:
                        if name not in st.changes:
                            self.memory.mark_os_restored(self.session_id, name)
            else:
                result = Recovery(st.target).recover(None, st.snapshot)
                error = restored.error or f"differences {restored.differences}"
                self._event(
                    "final",
                    {
                        "stage": layer.value,
                        "verified": False,
                        "error": error,
                        "recovery": result.model_dump(mode="json"),
                    },
                )
                if result.verified:
                    self.journal.close_intent(self.session_id, None, f"final {layer.value} configuration recovered")
                if not result.verified:
                    problems.append(f"{layer.value}: best configuration not verified ({error}); {result.details}")
        if not problems:
            # A trial interrupted mid-round (Ctrl-C, stop signal) left its intent open; the verified final
            # apply above superseded it.
            for intent in self.journal.open_intents():
                if intent.session_id == self.session_id:
                    self.journal.close_intent(
                        self.session_id, intent.round_no, "superseded by the verified final apply"
                    )
        return "; ".join(problems)

    def _relative(self, best: dict[str, str], hardware) -> dict[str, dict[str, float | str]]:
        """Best values as they transfer to another host: memory sizes as a fraction of the memory limit."""
        from agenticdb.units import UnitError, bytes_of, family_of, normalize

        out: dict[str, dict[str, float | str]] = {}
        catalogs = [self.target.catalog()] + ([self.os_target.catalog()] if self.os_target else [])
        for name, value in best.items():
            out[name] = {"value": value}
            for cat in catalogs:
                spec = cat.get(name)
                if spec is None:
                    continue
                family = family_of(cat.target)
                try:
                    parsed = normalize(family, spec, value)
                except (UnitError, ValueError):
                    break
                nbytes = bytes_of(family, spec, parsed.base_value) if parsed.base_value is not None else None
                if nbytes and hardware.memory_limit_bytes:
                    out[name]["fraction_of_memory"] = round(nbytes / hardware.memory_limit_bytes, 6)
                break
        return out

    def _experience(
        self, fp: Fingerprint, best: dict[str, str], hardware, baseline: float, best_obj: float, higher: bool
    ) -> Experience:
        beneficial, ineffective, inconclusive, failed = [], [], [], []
        for r in self.rounds:
            item = {
                "changes": r.changes,
                "bottleneck": r.bottleneck.value,
                "stage": r.stage.value,
                "gain": r.gain_vs_best,
            }
            if r.failure is not None or (r.proposal is not None and r.changes and not r.verdict_ok):
                failed.append({**item, "why": r.failure.message if r.failure else "rejected"})
            elif r.kept:
                beneficial.append(item)
            elif r.judged == "worse":
                ineffective.append(item)
            elif r.measurement is not None:
                inconclusive.append(item)
        relative = self._relative(best, hardware)
        counts: dict[str, int] = {}
        for r in self.rounds:
            counts[r.bottleneck.value] = counts.get(r.bottleneck.value, 0) + 1
        return Experience(
            fingerprint=fp,
            session_id=self.session_id,
            recurring_bottlenecks=[b for b, n in sorted(counts.items(), key=lambda kv: -kv[1]) if b != "unknown"],
            beneficial=beneficial,
            ineffective=ineffective,
            inconclusive=inconclusive,
            failed=failed,
            best_config=best,
            best_config_relative=relative,
            best_gain=auditor.relative_gain(best_obj, baseline, higher),
        )
