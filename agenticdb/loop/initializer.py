"""Initializer: everything before the first round — runtime profile, fingerprint, action catalog,
workload preparation, the pristine data copy, ``--start-from``, the baseline and retrieved experience.

The baseline (``loop.baseline``) is measured ``loop.baseline_runs`` times (3 by default; 2 or 1 when a short
time budget would otherwise leave no room for a decision) so the auditor knows the run-to-run noise of this host
before it judges any change (docs/measurement.md).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import structlog

from agenticdb.config import Settings
from agenticdb.errors import SessionError, SessionInterrupted, SessionUsageError, Stopped, stop_cause
from agenticdb.host.hardware import detect_hardware, storage_after_load
from agenticdb.host.services import ServiceError
from agenticdb.invocation import command
from agenticdb.loop.baseline import NOISE_WARN_CV, BaselineRunCallback, measure_baseline
from agenticdb.loop.executor import Executor
from agenticdb.loop.next_move import noise_remedies
from agenticdb.loop.recovery import Recovery, restore_verified
from agenticdb.loop.runwatch import StopInterrupted
from agenticdb.loop.steps import SessionRecorder
from agenticdb.measure.query_set import QueryWeights
from agenticdb.measure.sequential import Noise, SequentialPolicy, detectable_gain
from agenticdb.models import (
    ApplyMode,
    Bottleneck,
    Catalog,
    Change,
    FailurePhase,
    Hardware,
    Layer,
    Measurement,
    Proposal,
    RuntimeProfile,
    Snapshot,
    StateDelta,
    Verdict,
)
from agenticdb.models.planning import Experience, Fingerprint
from agenticdb.sandbox.pristine import PristineData, PristineError
from agenticdb.store.faults import StorageError
from agenticdb.store.memory import MemoryBook
from agenticdb.store.memory.backends import retrieved_payload
from agenticdb.targets.base import Target, TargetError
from agenticdb.validation.validator import validate
from agenticdb.workloads.base import Workload, WorkloadError

log = structlog.get_logger(__name__)


WORKLOAD_CLASSES: dict[str, Literal["oltp", "olap", "mixed"]] = {"oltp": "oltp", "olap": "olap", "mixed": "mixed"}


def fingerprint(target: Target, version: str, workload: Workload, hardware: Hardware) -> Fingerprint:
    """Fingerprint from the DBMS identity, the workload's traits and the host size."""
    t = workload.traits()
    return Fingerprint(
        dbms=target.kind,
        version_major=target.version_major(),
        benchmark=t.benchmark,
        workload_class=WORKLOAD_CLASSES.get(t.workload_class, "oltp"),
        read_fraction=t.read_fraction,
        access_pattern=t.access_pattern,
        scale=t.scale,
        concurrency=t.concurrency,
        objective=t.objective,
        memory_gib=round(hardware.memory_limit_bytes / 2**30, 1),
        cpu_count=hardware.cpu_count,
    )


def profile_target(target: Target) -> tuple[Catalog, Hardware, str, dict[str, str]]:
    """Catalog, hardware, version and current values of every catalog knob."""
    catalog = target.catalog()
    version = target.version()
    hardware = detect_hardware(target.data_dir, pid=target.server_pid())
    current = target.current_values(list(catalog.knobs))
    log.info(
        "init.profiled",
        target=target.kind,
        version=version,
        knobs=len(catalog.knobs),
        excluded=len(catalog.excluded),
        cpus=hardware.cpu_count,
        memory_limit_gib=round(hardware.memory_limit_bytes / 2**30, 1),
    )
    return catalog, hardware, version, current


def build_profile(
    target: Target,
    version: str,
    hardware: Hardware,
    current: dict[str, str],
    baseline: list[Measurement],
    delta: StateDelta,
    cv: float,
    cfg: Settings,
) -> RuntimeProfile:
    """Assemble the RuntimeProfile the planners read."""
    return RuntimeProfile(
        target=target.kind,
        dbms_version=version,
        hardware=hardware,
        current_config=current,
        service_status="available" if target.available() else "unavailable",
        baseline=baseline,
        baseline_state=delta,
        noise_cv=cv,
    )


# ------------------------------------------------------------------ the initialisation sequence


@dataclass
class Start:
    """What initialisation hands the round loop.

    Attributes:
        catalog, hardware, profile, fingerprint: the DBMS target as found (after ``--start-from``).
        baseline: the baseline runs; ``delta`` the runtime-state delta of the last one; ``cv`` their
            coefficient of variation (the session's noise estimate).
        snapshot: the safe snapshot ("baseline") the DBMS stage starts from; experience: the Memory Book's, best first.
        warnings: what the user should know (a noisy baseline).
    """

    catalog: Catalog
    hardware: Hardware
    profile: RuntimeProfile
    fingerprint: Fingerprint
    baseline: list[Measurement]
    delta: StateDelta
    cv: float
    snapshot: Snapshot
    experience: list[Experience] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def higher_is_better(self) -> bool:
        """Direction of the objective."""
        return self.baseline[0].higher_is_better

    @property
    def query_weights(self) -> QueryWeights | None:
        """Query sets (total_time): the per-query weights frozen from the baseline (``agenticdb.measure.query_set``);
        None for any other workload or objective."""
        return QueryWeights.from_baseline(self.baseline)

    @property
    def noise(self) -> Noise:
        """The pair noise the baseline's repeated runs show: the sequential test's first prior, on the
        statistic the test uses (the per-query statistic for query sets)."""
        weights = self.query_weights
        if weights is not None:
            return weights.noise(self.baseline)
        return Noise.from_repeats([m.objective for m in self.baseline])

    @property
    def objective(self) -> float:
        """Median baseline objective."""
        return statistics.median(m.objective for m in self.baseline)


class Initializer:
    """Runs everything before the first round, in order: refuse unsafe options and open the session's
    record (:meth:`open_session`), then (:meth:`run`) profile the target, prepare the workload, capture
    a pristine data copy (``loop.reset_data``), apply ``--start-from``, snapshot and measure the
    baseline, record profile and fingerprint, retrieve experience, warn about noise.

    A failure is journaled as ``session.end`` (status failed or interrupted) and raised as a
    ``SessionError`` whose exit code the command line returns; nothing was changed unless
    ``--start-from`` was applied, which the message then says.
    """

    def __init__(
        self,
        cfg: Settings,
        target: Target,
        workload: Workload,
        memory: MemoryBook,
        recorder: SessionRecorder,
        start_from: dict[str, object] | None = None,
        started: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_baseline_run: BaselineRunCallback | None = None,
    ) -> None:
        self.cfg = cfg
        self.on_baseline_run = on_baseline_run  # each baseline run as it ends (measure_baseline's on_run)
        self.clock = clock  # seconds, monotonic: the session's time budget clock (TuningSession.clock)
        self.started = clock() if started is None else started  # when the session's budget began, by ``clock``
        self.target = target
        self.workload = workload
        self.memory = memory
        self.rec = recorder
        self.start_from = start_from
        self.pristine: PristineData | None = None
        self.ended = False  # session.end journaled (an initialization failure)
        self.before_start_from: Snapshot | None = None  # what --start-from replaced (put back on a storage fault)

    def open_session(self, planner: str) -> None:
        """Refuse unsafe options before anything runs, then journal ``session.start`` (and
        ``policy.relaxed`` when durability was relaxed explicitly).

        Raises:
            SessionUsageError: ``loop.reset_data`` on anything but a sandbox (it would lose a real
                server's data); nothing was journaled.
        """
        cfg = self.cfg
        if cfg.loop.reset_data and cfg.target.sandbox is None:
            raise SessionUsageError(
                "loop.reset_data = true restores an old copy of the data directory and discards every write "
                "since: it is allowed only on a sandbox (--sandbox postgres|mariadb)"
            )
        self.rec.event(
            "session.start",
            {
                "target": self.target.kind,
                "workload": cfg.workload.kind,
                "planner": planner,
                "durability": cfg.policy.durability,
                "allow_restart": cfg.policy.allow_restart,
                "loop": cfg.loop.model_dump(mode="json"),
                "policy": cfg.policy.model_dump(mode="json"),
            },
        )
        if cfg.policy.durability == "relaxed":
            self.rec.event("policy.relaxed", {"reason": "durability = relaxed chosen explicitly in configuration"})
        log.info("session.start", session=self.rec.session_id, target=self.target.kind, workload=cfg.workload.kind)

    def reset_data(self) -> None:
        """Before every measured run with ``loop.reset_data``: put the pristine data copy back."""
        if self.pristine is not None:
            self.pristine.reset()

    def discard(self) -> None:
        """Remove the pristine copy (end of session)."""
        if self.pristine is not None:
            self.pristine.discard()

    def run(self, executor: Executor) -> Start:
        """The initialisation sequence with ``executor`` measuring the DBMS target.

        Every failure is journaled (``session.end`` with status failed; a failed ``--start-from`` also as
        ``failure`` and ``recovery``) unless the journal itself cannot be written.

        Raises:
            SessionError: profiling, workload preparation, ``--start-from`` or the baseline failed.
            SessionInterrupted: Ctrl-C before the first round.
            StorageError: the journal or Memory Book cannot be written.
        """
        try:
            catalog, hardware, version, current = self._profile()
            self._prepare_workload()
            hardware = storage_after_load(hardware)  # a fresh sandbox was profiled before its data load
            if self.cfg.loop.reset_data:
                self._capture_pristine()
            if self.start_from:
                self._apply_start_from(catalog, hardware, current, executor)
                current = self.target.current_values(list(catalog.knobs))
            snapshot = self.target.snapshot(list(catalog.knobs), label="baseline")
            baseline, delta, cv = self._baseline(executor)
            profile = build_profile(self.target, version, hardware, current, baseline, delta, cv, self.cfg)
            fp = fingerprint(self.target, version, self.workload, hardware)
            start = Start(catalog, hardware, profile, fp, baseline, delta, cv, snapshot)
            self._record(start)
            start.experience = self._retrieve(fp)
        except KeyboardInterrupt as exc:
            note = (
                f"the --start-from configuration remains in effect ({command('rollback --dbms')} undoes it)"
                if self.start_from
                else "nothing was changed"
            )
            status, words = stop_cause(exc)
            self._end(status, f"{words} before the first round; {note}")
            raise SessionInterrupted(f"{words} before the first round; {note}") from None
        except StorageError as exc:
            # The journal cannot take a session.end either: put back what --start-from replaced, if
            # anything, and stop with the file and the cause.
            raise self._storage_fault(exc) from exc
        except SessionError as exc:
            if not self.ended:
                self._end("failed", str(exc))
            raise
        except (TargetError, ServiceError, OSError) as exc:
            self._end("failed", f"initialization failed: {exc}")
            raise SessionError(f"initialization failed: {exc}") from exc
        start.warnings = self._noise_warning(cv, start.noise, any(m.per_query_s for m in start.baseline))
        return start

    def _storage_fault(self, exc: StorageError) -> StorageError:
        if self.before_start_from is None:
            return StorageError(exc.path, exc.what, exc.cause, exc.action, "nothing was changed")
        result = restore_verified(self.target, self.before_start_from, attempts=2, retry_pause_s=1.0)
        done = "put back and verified" if result.verified else f"NOT verified ({result.problem()})"
        log.error("storage.fault_restore", snapshot=self.before_start_from.label, verified=result.verified)
        return StorageError(
            exc.path, exc.what, exc.cause, exc.action, f"the configuration before --start-from {done}; session stopped"
        )

    def _end(self, status: str, reason: str, output: str | None = None) -> None:
        self.ended = True
        data: dict[str, str] = {"status": status, "reason": reason}
        if output is not None:
            data["output"] = output[-2000:]
        self.rec.event("session.end", data)

    def _profile(self) -> tuple[Catalog, Hardware, str, dict[str, str]]:
        try:
            return profile_target(self.target)
        except Exception as exc:
            self._end("failed", f"initialization failed: {exc}")
            raise SessionError(f"cannot profile the target: {exc}") from exc

    def _prepare_workload(self) -> None:
        try:
            self.workload.prepare()
        except WorkloadError as exc:
            self._end("failed", f"workload prepare failed: {exc}", exc.output)
            raise SessionError(f"workload {self.cfg.workload.kind} could not prepare: {exc}") from exc

    def _capture_pristine(self) -> None:
        """``loop.reset_data``: copy the loaded sandbox data dir once; every measured run starts from it.

        The session has already refused it on anything but a sandbox (it would lose a real server's data).
        """
        try:
            self.pristine = PristineData.for_target(self.target)
            took = self.pristine.capture()
        except PristineError as exc:
            self._end("failed", f"pristine data copy failed: {exc}")
            raise SessionError(str(exc)) from exc
        self.rec.event(
            "pristine.captured",
            {
                "data_dir": str(self.pristine.data_dir),
                "seconds": round(took, 2),
                "reason": "reset before every measured run (docs/measurement.md)",
            },
        )

    def _apply_start_from(
        self, catalog: Catalog, hardware: Hardware, current: dict[str, str], executor: Executor
    ) -> None:
        """``tune --start-from FILE``: apply a starting configuration through validator and executor."""
        assert self.start_from is not None
        proposal = Proposal(
            bottleneck=Bottleneck.unknown,
            changes=[Change(name=k, value=v) for k, v in self.start_from.items()],  # type: ignore[arg-type]
            rationale="starting configuration from --start-from",
            planner="start-from",
        )
        # A starting configuration is the user's, not a tuning step: no step bound, any number of changes.
        policy = self.cfg.policy.model_copy(
            update={"max_changes": max(len(proposal.changes), 1), "max_step_factor": 1e12}
        )
        can_restart = self.target.can_restart()
        verdict = validate(proposal, catalog, current, hardware, policy, Layer.dbms, can_restart=can_restart)
        self.rec.event(
            "start_from", {"proposal": proposal.model_dump(mode="json"), "verdict": verdict.model_dump(mode="json")}
        )
        if not verdict.ok:
            message = "--start-from refused by the validator:\n" + verdict.feedback()
            self._end("failed", message)
            raise SessionError(message)
        safe = self.target.snapshot(list(catalog.knobs), label="before start-from")
        self.before_start_from = safe
        try:
            executor.apply(verdict.changes, verdict.apply_requirement, 0, safe, purpose="start-from")
        except StorageError:
            raise  # the journal failed, not the server: run() puts back what was replaced
        except Exception as exc:  # whatever stopped the apply: recover and tell it
            raise self._start_from_failed(exc, verdict, executor, safe) from exc
        self.rec.close_intent(0, "start-from applied")

    def _start_from_failed(self, exc: Exception, verdict: Verdict, executor: Executor, safe: Snapshot) -> SessionError:
        """A ``--start-from`` that failed to apply: journal the failure (with the server's reason), the
        recovery to the configuration found before it, and the session's end; the error to raise."""
        phase: FailurePhase = "restart" if verdict.apply_requirement == ApplyMode.restart else "apply"
        failure = executor.failure(exc, phase, verdict.changes, 0, "--start-from could not be applied")
        result = Recovery(self.target).recover(failure, safe)
        self.rec.event("recovery", result, 0)
        if result.verified:
            self.rec.close_intent(0, f"recovery:{result.action}")
        else:  # an open intent holding the safe snapshot: the daemon's reconciliation or `rollback` finishes
            data = {"purpose": "start-from recovery", "target": self.target.kind, "mode": "restore", "changes": []}
            self.rec.event("intent", {**data, "snapshot": safe.model_dump(mode="json")}, 0)
        where = (
            "the configuration before it is back and verified"
            if result.verified
            else f"recovery failed: {result.details}"
        )
        message = f"{failure.message}; {where}"
        self._end("failed", message)
        log.warning("start_from.failed", reason=failure.server_reason or failure.message, recovery=result.action)
        return SessionError(message)

    def budget_left(self) -> float:
        """Seconds of ``loop.time_budget_s`` the session has not used yet (negative when overrun)."""
        return self.cfg.loop.time_budget_s - (self.clock() - self.started)

    def _baseline(self, executor: Executor) -> tuple[list[Measurement], StateDelta, float]:
        def disturbed(label: str, m: Measurement, kept: str) -> None:
            reason = m.disturbance.reason if m.disturbance else ""
            reason += f"; kept: {kept}" if kept else ""
            data = dict(label=label, reason=reason, objective=m.objective, kept=bool(kept), taken_at=m.taken_at)
            self.rec.event("run.disturbed", data, 0)
            log.warning("run.disturbed", label=label, reason=reason, kept=kept)

        try:
            return measure_baseline(
                executor, self.cfg.loop, disturbed, self.clock, self.budget_left, on_run=self.on_baseline_run
            )
        except StopInterrupted as exc:  # the stop ended a baseline run: told as the stop (run), not a failure
            log.warning("baseline.interrupted", evidence=exc.evidence)
            raise Stopped("stop requested (signal) during the baseline") from exc
        except WorkloadError as exc:
            self._end("failed", f"baseline run failed: {exc}", exc.output)
            raise SessionError(f"baseline measurement failed (nothing was changed): {exc}") from exc

    def _record(self, start: Start) -> None:
        catalog = start.catalog
        self.rec.event(
            "profile",
            {
                "profile": start.profile.model_dump(mode="json"),
                "fingerprint": start.fingerprint.model_dump(mode="json"),
                "catalog": {"knobs": len(catalog.knobs), "excluded": catalog.excluded},
            },
        )
        self.rec.event(
            "baseline",
            {
                "objectives": [m.objective for m in start.baseline],
                "noise_cv": start.cv,
                "objective_name": start.baseline[0].objective_name,
                "higher_is_better": start.higher_is_better,
                # statistics the baseline could not read, and why (pg_stat_statements outside its database)
                "not_measured": dict(start.profile.baseline_state.unread) if start.profile.baseline_state else {},
            },
        )

    def _retrieve(self, fp: Fingerprint) -> list[Experience]:
        self.memory.start_session(
            self.rec.session_id, target=self.target.kind, fingerprint=fp, workload=self.cfg.workload.kind
        )
        found = self.memory.retrieve(fp)
        experience = [e for _, e in found]
        if experience:
            self.rec.event("experience.retrieved", retrieved_payload(found, self.memory.host, fp))
            for score, e in found:
                if e.origin is not None and e.origin.host != self.memory.host:
                    log.info(
                        "init.experience_from_other_host",
                        session=e.session_id,
                        host=e.origin.host,
                        similarity=score,
                        reason="a similar host's experience; byte sizes are rescaled to this host's memory",
                    )
        return experience

    def _noise_warning(self, cv: float, noise: Noise, query_set: bool) -> list[str]:
        """A warning (journaled as ``noise.high``) when the baseline CV leaves only large effects visible:
        it names the smallest gain a decision can settle within ``loop.max_pairs`` pairs and what can still
        be done (``next_move.noise_remedies``; ``query_set``: the baseline ran a query set)."""
        if cv <= NOISE_WARN_CV:
            return []
        loop = self.cfg.loop
        policy = SequentialPolicy(min_gain=loop.min_gain, confidence=loop.confidence, max_pairs=loop.max_pairs)
        smallest = detectable_gain(noise, policy)
        remedies = noise_remedies(self.cfg.workload.duration_s, loop.max_pairs, loop.reset_data, query_set)
        advice = (
            f"measured noise CV {cv:.0%} per run: within {loop.max_pairs} pairs a decision can settle only "
            f"effects beyond about ±{smallest:.0%}; {', '.join(remedies)}"
        )
        self.rec.event("noise.high", {"noise_cv": cv, "detectable_gain": smallest, "advice": advice})
        log.warning("baseline.noisy", cv=round(cv, 3), reason=advice)
        return [advice]
