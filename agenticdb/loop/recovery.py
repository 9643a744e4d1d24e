"""Recovery: the one restore-and-verify path, keep or revert, the final apply, and failed trials.

Every caller that puts a saved configuration back — the session's revert of a tie or a loss, its final
apply of the best configuration, recovery after a failed trial, the daemon's reconciliation of an open
intent after a crash and ``agenticdb rollback`` — goes through :func:`restore_verified`: the target
writes the snapshot back (``Target.restore``: files, values, start or restart as its kind needs), then
the values are read back and compared with ``Target.values_equal``. Only a restore that is proven is
``verified`` (tuned's plugin ``unapply`` + verify, used by rollback, profile switch and crash recovery
alike; docs/safety.md).

It also owns the best known configuration of each stage (:class:`StageState`): a kept round retakes
its safe snapshot, a tie or a loss reverts to it, a knob changed by someone else is left to them, and
at the end :func:`apply_final` puts every stage's best configuration back and verifies it.

Recovery after a failed trial (:class:`Recovery`), in order:
  1. server available and its values already equal the safe snapshot, and the workload failed (not the
     configuration) → "repaired";
  2. restore the snapshot → "restored";
  3. a second restore attempt after a pause (a start can race a slow shutdown);
  4. otherwise "failed": the session stops and says so; the journal keeps the open intent so the daemon
     or ``agenticdb rollback`` can retry.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog
from pydantic import BaseModel, Field

from agenticdb.host.server_log import with_reason
from agenticdb.host.services import ServiceError
from agenticdb.loop.steps import SessionRecorder, StepResult
from agenticdb.models import Catalog, Failure, Layer, RecoveryResult, Snapshot
from agenticdb.planner.base import PlannerError
from agenticdb.store.memory import MemoryBook, OsOriginal
from agenticdb.targets.base import Target, TargetError
from agenticdb.workloads.base import WorkloadError

if TYPE_CHECKING:
    from agenticdb.loop.executor import Executor
    from agenticdb.loop.steps import Round

log = structlog.get_logger(__name__)

#: Shown as the value of a snapshot parameter the target does not have (another kernel, another server).
NOT_HERE = "<not on this host>"


class RestoreResult(BaseModel):
    """What :func:`restore_verified` did.

    Attributes:
        label: the snapshot's label ("baseline", "round 3", "os originals").
        verified: the target is available and every snapshot value is in effect.
        available: the target answered after the restore.
        attempts: restore attempts made (1 or 2).
        values: the snapshot's values (what was put back).
        before: values in effect before the restore (empty when the target was down).
        changed: ``{name: (before, snapshot value)}`` for values the restore put back.
        differences: ``{name: (snapshot value, actual)}`` still differing afterwards.
        error: the last error the target raised ("" when none).
        logs: server log lines that came with the error.
    """

    label: str
    verified: bool
    available: bool
    attempts: int = 1
    values: dict[str, str] = Field(default_factory=dict)
    before: dict[str, str] = Field(default_factory=dict)
    changed: dict[str, tuple[str, str]] = Field(default_factory=dict)
    differences: dict[str, tuple[str, str]] = Field(default_factory=dict)
    error: str = ""
    logs: list[str] = Field(default_factory=list)

    def problem(self, what: str = "restore") -> str:
        """One line saying why the restore is not verified ("" when it is)."""
        if self.verified:
            return ""
        if self.error:
            return self.error
        if not self.available:
            return f"the target does not answer after {what}"
        return f"values differ after {what}: {self.differences}"


def values_match(target: Target, snapshot: Snapshot) -> tuple[bool, dict[str, tuple[str, str]]]:
    """Compare the target's effective values with ``snapshot.values`` (``Target.values_equal``).

    Returns:
        (all equal, ``{name: (expected, actual)}`` for the differences); a parameter the target does not
        have shows :data:`NOT_HERE` as its actual value.
    """
    if not snapshot.values:
        return True, {}
    known = [n for n in snapshot.values if target.knows(n)]
    actual = target.current_values(known) if known else {}
    diff: dict[str, tuple[str, str]] = {}
    for name, expected in snapshot.values.items():
        if name not in known:
            diff[name] = (expected, NOT_HERE)
        elif name not in actual:
            diff[name] = (expected, "<missing>")
        elif not target.values_equal(name, expected, actual[name]):
            diff[name] = (expected, actual[name])
    return not diff, diff


def _read_before(target: Target, snapshot: Snapshot) -> dict[str, str]:
    """Values in effect now for the snapshot's parameters; {} while the target cannot answer."""
    try:
        if not target.available():
            return {}
        return target.current_values([n for n in snapshot.values if target.knows(n)])
    except Exception as exc:  # noqa: BLE001 - a target that cannot answer now is restored all the same
        log.info("restore.before_unreadable", error=str(exc))
        return {}


def _available(target: Target) -> bool:
    try:
        return target.available()
    except Exception:  # noqa: BLE001 - "does not answer" is the answer
        return False


def restore_verified(
    target: Target, snapshot: Snapshot, attempts: int = 1, retry_pause_s: float = 2.0
) -> RestoreResult:
    """Put ``snapshot`` back on ``target`` and prove it: the target answers and every value is in effect.

    Never raises for a target failure: the result says what went wrong (``problem()``).

    Args:
        target: the DBMS or the Linux host the snapshot was taken of.
        snapshot: values and files to put back (a parameter this target lacks counts as a difference).
        attempts: restore attempts; a failed one is retried after ``retry_pause_s`` seconds (a start can
            race a slow shutdown).
        retry_pause_s: pause between attempts, seconds.
    """
    before = _read_before(target, snapshot)
    error, logs = "", []
    available, diff = False, dict[str, tuple[str, str]]()
    attempt = 0
    for attempt in range(1, max(attempts, 1) + 1):
        error = ""
        try:
            target.restore(snapshot)
        except Exception as exc:  # noqa: BLE001 - every error is a reason to try again, then report
            own = exc.logs[-20:] if isinstance(exc, TargetError) else []
            own += exc.output.splitlines()[-20:] if isinstance(exc, ServiceError) else []
            error = with_reason(str(exc), own)  # the server's own reason, e.g. a FATAL line of its log
            logs += own
        available = _available(target)
        try:
            same, diff = values_match(target, snapshot) if available else (False, {})
        except Exception as exc:  # noqa: BLE001 - a read that fails leaves the restore unproven
            same, error = False, error or f"cannot read the values back: {exc}"
            diff = {n: (v, "<unreadable>") for n, v in snapshot.values.items()}
        if available and same and not error:
            break
        log.warning("restore.attempt_failed", label=snapshot.label, attempt=attempt, error=error, differences=diff)
        if attempt < attempts:
            time.sleep(retry_pause_s)
    verified = available and not diff and not error
    changed = {
        n: (was, v)
        for n, v in snapshot.values.items()
        if (was := before.get(n)) is not None
        if not target.values_equal(n, v, was)
    }
    log.info("restore.result", label=snapshot.label, verified=verified, changed=sorted(changed), attempts=attempt)
    return RestoreResult(
        label=snapshot.label,
        verified=verified,
        available=available,
        attempts=attempt,
        values=dict(snapshot.values),
        before=before,
        changed=changed,
        differences=diff,
        error=error,
        logs=logs,
    )


def restore_os_originals(linux: Target, memory: MemoryBook, originals: list[OsOriginal], label: str) -> RestoreResult:
    """Put saved OS originals back through :func:`restore_verified` and mark each one restored that is
    verified in effect. When several sessions saved one name, the oldest value (the host's own) wins:
    ``originals`` are oldest first.
    """
    values: dict[str, str] = {}
    for o in originals:
        values.setdefault(o.name, o.original)
    result = restore_verified(linux, Snapshot(target="linux", values=values, label=label))
    for o in originals:
        if result.available and o.name not in result.differences:
            memory.mark_os_restored(o.session_id, o.name)
    return result


class Recovery:
    """Brings a target back to its last safe snapshot after a ``Failure``."""

    def __init__(self, target: Target, retry_pause_s: float = 2.0) -> None:
        self.target = target
        self.retry_pause_s = retry_pause_s

    def _already_safe(self, safe: Snapshot) -> bool:
        try:
            return self.target.available() and values_match(self.target, safe)[0]
        except Exception as exc:  # noqa: BLE001 - unknown state: restore it
            log.info("recovery.check_failed", error=str(exc))
            return False

    def recover(self, failure: Failure | None, safe: Snapshot) -> RecoveryResult:
        """Repair or restore; never raises (a failure to recover is reported in the result)."""
        excerpt = list(failure.logs[-20:]) if failure else []
        if failure is not None and failure.phase == "workload" and self._already_safe(safe):
            return RecoveryResult(
                action="repaired",
                service_available=True,
                verified=True,
                details="server up with the safe values; the workload failed, not the config",
                log_excerpt=excerpt,
            )
        result = restore_verified(self.target, safe, attempts=2, retry_pause_s=self.retry_pause_s)
        if result.verified:
            log.info("recovery.restored", attempt=result.attempts, values=len(safe.values))
            return RecoveryResult(
                action="restored",
                service_available=True,
                verified=True,
                details=(
                    f"restored the last safe snapshot ({safe.label or 'safe'}) and verified {len(safe.values)} values"
                    + (f" on attempt {result.attempts}" if result.attempts > 1 else "")
                ),
                log_excerpt=excerpt,
            )
        why = result.error or with_reason(
            f"after restore: available={result.available}, differing values={result.differences}", result.logs
        )
        return RecoveryResult(
            action="failed",
            service_available=result.available,
            verified=False,
            details=f"could not restore the safe snapshot: {why}",
            log_excerpt=(excerpt + result.logs)[-40:],
        )


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


def round_failed(r: Round, step: str, failure: Failure, recorder: SessionRecorder) -> StepResult:
    """A failed trial, confirmation or revert of round ``r`` (in ``step``): recovery back to the round's safe
    snapshot (:func:`recover_round`), both kept on the round's outcome; the returned step ends the round and
    tells the failure with the server's own reason (``Failure.message``) and how recovery ended."""
    assert r.outcome is not None and r.safe is not None
    r.outcome.failure = failure
    r.outcome.recovery = recover_round(r.stage.target, failure, r.safe, recorder, r.no)
    return StepResult(step, f"failed in {failure.phase}: {failure.message}; recovery {r.outcome.recovery.action}", True)


def loop_ended(exc: BaseException, stage: StageState, recorder: SessionRecorder, round_no: int) -> tuple[str, str]:
    """How the round loop ends on an exception raised outside a trial's own recovery: ``(status, reason)``.
    The session's final apply puts the best configuration of every stage back afterwards in every case.

    - ``KeyboardInterrupt`` (Ctrl-C): journaled as ``interrupted``; status "interrupted".
    - ``PlannerError`` (e.g. the LLM endpoint refused our key): journaled as ``planner.error``; "failed".
    - ``TargetError``, ``ServiceError``, ``WorkloadError``, ``OSError`` (reading the live values, entering the
      OS stage, retaking a snapshot): journaled as a ``failure`` with the server's reason through ``stage``'s
      executor; "failed", the reason being the failure's message.

    Raises:
        BaseException: ``exc`` itself when it is none of these.
    """
    if isinstance(exc, KeyboardInterrupt):
        recorder.event("interrupted", {"round": round_no}, round_no)
        return "interrupted", "interrupted (Ctrl-C); the best configuration so far is put back"
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
