"""The best known configuration of each stage and the session's bookkeeping around it (beside the session).

:class:`StageState` owns a stage's safe snapshot: a kept round retakes it, a tie or a loss reverts to it
(through ``recovery.restore_verified``), a knob changed by someone else is left to them, and at the end
:func:`apply_final` puts every stage's best configuration back and verifies it. :func:`recover_round`
journals recovery after a failed trial, :func:`loop_ended` says how the round loop ends on an exception,
and :func:`storage_fault_stop` puts every stage back when the journal or Memory Book cannot be written.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog

from agenticdb.errors import Stopped, stop_cause
from agenticdb.host.services import ServiceError
from agenticdb.loop.recovery import Recovery, RestoreResult, restore_verified
from agenticdb.loop.steps import SessionRecorder
from agenticdb.models import Catalog, Failure, Layer, RecoveryResult, Snapshot
from agenticdb.planner.base import PlannerError
from agenticdb.store.faults import StorageError
from agenticdb.store.memory import MemoryBook
from agenticdb.targets.base import Target, TargetError
from agenticdb.workloads.base import WorkloadError

if TYPE_CHECKING:
    from agenticdb.loop.executor import Executor

log = structlog.get_logger(__name__)


def recover_round(
    target: Target, failure: Failure, safe: Snapshot, recorder: SessionRecorder, round_no: int
) -> RecoveryResult:
    """Recovery after a failed trial, confirmation or revert of a round: journaled as ``recovery``, the
    round's intent closed with how it ended."""
    result = Recovery(target).recover(failure, safe)
    recorder.event("recovery", result, round_no)
    recorder.close_intent(round_no, f"recovery:{result.action}")
    log.warning(
        "round.recovered",
        round=round_no,
        action=result.action,
        available=result.service_available,
        details=result.details,
    )
    return result


def loop_ended(exc: BaseException, stage: StageState, recorder: SessionRecorder, round_no: int) -> tuple[str, str]:
    """How the round loop ends on an exception raised outside a trial's own recovery: ``(status, reason)``.
    The session's final apply puts the best configuration of every stage back afterwards in every case.

    - ``KeyboardInterrupt`` (Ctrl-C): journaled as ``interrupted``; status "interrupted"; a stop signal
      (:class:`agenticdb.errors.Stopped`, SIGTERM) is journaled with its signal; status "stopped".
    - ``PlannerError`` (e.g. the LLM endpoint refused our key): journaled as ``planner.error``; "failed".
    - ``TargetError``, ``ServiceError``, ``WorkloadError``, ``OSError`` (reading the live values, entering the
      OS stage, retaking a snapshot): journaled as a ``failure`` with the server's reason through ``stage``'s
      executor; "failed", the reason being the failure's message.

    Raises:
        BaseException: ``exc`` itself when it is none of these.
    """
    if isinstance(exc, KeyboardInterrupt):
        status, words = stop_cause(exc)
        signal = exc.signal_name if isinstance(exc, Stopped) else "SIGINT"
        recorder.event("interrupted", {"round": round_no, "signal": signal}, round_no)
        return status, f"{words}; the best configuration so far is put back"
    if isinstance(exc, PlannerError):
        recorder.event("planner.error", {"error": str(exc)}, round_no)
        return "failed", f"planner error: {exc}"
    if isinstance(exc, TargetError | ServiceError | WorkloadError | OSError):
        failure = stage.executor.failure(exc, "connect", [], round_no, f"round {round_no} failed")
        return "failed", failure.message
    raise exc


# ------------------------------------------------------------------ the best configuration of a stage


@dataclass
class StageState:
    """The best known configuration of one stage (DBMS or OS): its safe snapshot and objective samples.

    Attributes:
        target, executor, catalog: the stage's target, the executor that measures it, its catalog.
        snapshot: the last safe configuration (baseline, then each kept round); every revert and the
            final apply restore it.
        samples: objective values measured for that configuration.
        changes: what agenticdb changed and kept, by name.
        rivals: knobs another owner changed during the session, with the reason they are left alone.
    """

    target: Target
    executor: Executor
    catalog: Catalog
    snapshot: Snapshot
    samples: list[float]
    changes: dict[str, str] = field(default_factory=dict)
    rivals: dict[str, str] = field(default_factory=dict)

    @property
    def objective(self) -> float:
        """Median objective of the best configuration."""
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

    def retake(self, label: str) -> None:
        """Make the configuration in effect now the stage's safe snapshot."""
        self.snapshot = self.target.snapshot(list(self.catalog.knobs), label=label)

    def find_rivals(self, current: dict[str, str]) -> dict[str, tuple[str, str]]:
        """Knobs whose live value differs from what agenticdb last left in effect (the safe snapshot):
        ``{name: (agenticdb's value, live value)}``. Someone else changed them (a DBA's ALTER SYSTEM,
        config management, tuned)."""
        return {
            name: (expected, current[name])
            for name, expected in self.snapshot.values.items()
            if name in current
            and name not in self.rivals
            and not self.target.values_equal(name, expected, current[name])
        }

    def leave_to_rivals(self, changed: dict[str, tuple[str, str]], recorder: SessionRecorder, round_no: int) -> None:
        """Exclude ``changed`` knobs for the rest of the session (each journaled as ``rival.detected``) and
        retake the safe snapshot, so later reverts and the final apply keep the other owner's values."""
        for name, (expected, actual) in changed.items():
            self.rivals[name] = f"changed outside agenticdb during the session ({expected} → {actual}): left alone"
            self.changes.pop(name, None)
            recorder.event(
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
        self.retake(f"after outside change of {', '.join(sorted(changed))}")

    def keep(self, changes: dict[str, str], samples: list[float], round_no: int) -> None:
        """The round's changes beat the best: they become part of the best configuration."""
        self.changes.update(changes)
        self.samples = list(samples)
        self.retake(f"round {round_no}")

    def revert(self) -> RestoreResult:
        """Back to the safe snapshot (a tie or a loss keeps the simpler configuration), verified."""
        return restore_verified(self.target, self.snapshot)


def enter_os_stage(
    os_target: Target, executor: Executor, dbms_samples: list[float], recorder: SessionRecorder
) -> StageState:
    """The OS stage's starting state: the Linux parameters' values now (snapshot "os originals") are its safe
    configuration, the DBMS stage's best samples its best objective; journaled as ``stage.os``."""
    catalog = os_target.catalog()
    snap = os_target.snapshot(list(catalog.knobs), label="os originals")
    recorder.event(
        "stage.os",
        {"parameters": len(catalog.knobs), "unsupported": catalog.unsupported, "originals": snap.values},
    )
    log.info("stage.switched", stage="os", parameters=len(catalog.knobs))
    return StageState(os_target, executor, catalog, snap, list(dbms_samples))


# ------------------------------------------------------------------ the final apply


def apply_final(
    stages: dict[Layer, StageState], recorder: SessionRecorder, memory: MemoryBook, start_from: dict[str, str]
) -> str:
    """Apply and verify the best configuration of every stage; returns an error text or "".

    Each stage gets an intent first (a crash in the middle is reconciled to the best snapshot); a stage
    that does not verify goes through :class:`Recovery`. When everything verified, intents a trial left
    open (Ctrl-C, a stop signal mid-round) are closed as superseded.
    """
    problems = [p for layer, st in stages.items() if (p := _final_stage(layer, st, recorder, memory, start_from))]
    if not problems:
        for intent in recorder.open_intents():
            recorder.close_intent(intent.round_no, "superseded by the verified final apply")
    return "; ".join(problems)


def _final_stage(
    layer: Layer, st: StageState, recorder: SessionRecorder, memory: MemoryBook, start_from: dict[str, str]
) -> str:
    changes = [{"name": k, "value": v} for k, v in st.changes.items()]
    snapshot = st.snapshot.model_dump(mode="json")
    recorder.event(
        "intent",
        {"purpose": "final", "target": st.target.kind, "mode": "restore", "changes": changes, "snapshot": snapshot},
    )
    restored = restore_verified(st.target, st.snapshot)
    if restored.verified:
        recorder.event(
            "final",
            {
                "stage": layer.value,
                "snapshot": st.snapshot.label,
                "changes": st.changes,
                "start_from": start_from if layer == Layer.dbms else {},
                "verified": True,
            },
        )
        log.info("session.final_applied", stage=layer.value, changes=st.changes)
        recorder.close_intent(None, f"final {layer.value} configuration verified")
        if layer == Layer.os:
            # Values not kept are back at their originals: reconciliation must not touch them again.
            for name in st.snapshot.values:
                if name not in st.changes:
                    memory.mark_os_restored(recorder.session_id, name)
        return ""
    result = Recovery(st.target).recover(None, st.snapshot)
    error = restored.error or f"differences {restored.differences}"
    recorder.event(
        "final",
        {"stage": layer.value, "verified": False, "error": error, "recovery": result.model_dump(mode="json")},
    )
    if result.verified:
        recorder.close_intent(None, f"final {layer.value} configuration recovered")
        return ""
    return f"{layer.value}: best configuration not verified ({error}); {result.details}"


# ------------------------------------------------------------------ storage faults


def storage_fault_stop(stages: dict[Layer, StageState], exc: StorageError) -> StorageError:
    """A running session lost its journal or Memory Book: put every stage's safe configuration back
    (its last verified snapshot, through ``recovery.restore_verified``) without writing to either store,
    and return the error to stop with, saying whether the restore verified.

    Nothing is journaled: the journal is what failed. An OS stage's originals stay marked unrestored in
    the Memory Book, so ``agenticdb rollback --os`` and the daemon's reconciliation still know them.
    """
    notes = []
    for layer, st in reversed(list(stages.items())):
        result = restore_verified(st.target, st.snapshot, attempts=2, retry_pause_s=1.0)
        if result.verified:
            notes.append(f"{layer.value}: safe configuration '{st.snapshot.label}' put back and verified")
        else:
            notes.append(f"{layer.value}: safe configuration '{st.snapshot.label}' NOT verified ({result.problem()})")
        log.error(
            "storage.fault_restore",
            stage=layer.value,
            snapshot=st.snapshot.label,
            verified=result.verified,
            reason=f"{exc.what} {exc.path} cannot be written: the session stops with its safe configuration",
        )
    return StorageError(exc.path, exc.what, exc.cause, exc.action, "; ".join(notes) + "; session stopped")
