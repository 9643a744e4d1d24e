"""Recovery: the one restore-and-verify path and recovery after a failed trial (restore primitives).

Every caller that puts a saved configuration back — the session's revert of a tie or a loss, its final
apply of the best configuration, recovery after a failed trial, the daemon's reconciliation of an open
intent after a crash and ``agenticdb rollback`` — goes through :func:`restore_verified`: the target
writes the snapshot back (``Target.restore``: files, values, start or restart as its kind needs), then
the values are read back and compared with ``Target.values_equal``. Only a restore that is proven is
``verified`` (tuned's plugin ``unapply`` + verify, used by rollback, profile switch and crash recovery
alike; docs/safety.md).

The best known configuration of each stage, keep/revert and the final apply are the session's
bookkeeping (``agenticdb.loop.stage``); this module holds only the restore primitives, below the executor.

Recovery after a failed trial (:class:`Recovery`), in order:
  1. server available and its values already equal the safe snapshot, and the workload failed (not the
     configuration) → "repaired";
  2. restore the snapshot → "restored";
  3. a second restore attempt after a pause (a start can race a slow shutdown);
  4. otherwise "failed": the session stops and says so; the journal keeps the open intent so the daemon
     or ``agenticdb rollback`` can retry.
"""

from __future__ import annotations

import time

import structlog
from pydantic import BaseModel, Field

from agenticdb.host.server_log import with_reason
from agenticdb.host.services import ServiceError
from agenticdb.models import Failure, RecoveryResult, Snapshot
from agenticdb.store.memory import MemoryBook, OsOriginal
from agenticdb.targets.base import Target, TargetError

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
        left_alone: ``{name: why}`` for snapshot values no SET brings back that have no effect in the
            target's configuration (``Target.inert``; not counted as differences).
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
    left_alone: dict[str, str] = Field(default_factory=dict)
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


def values_match(
    target: Target, snapshot: Snapshot, left_alone: dict[str, str] | None = None
) -> tuple[bool, dict[str, tuple[str, str]]]:
    """Compare the target's effective values with ``snapshot.values`` (``Target.values_equal``). A differing
    value that has no effect in the target's configuration (``Target.inert``) is not a difference; why goes
    into ``left_alone`` when given.

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
    inert = target.inert({n: e for n, (e, a) in diff.items() if a not in (NOT_HERE, "<missing>")}) if diff else {}
    if left_alone is not None:
        left_alone.update(inert)
    diff = {n: d for n, d in diff.items() if n not in inert}
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
    left: dict[str, str] = {}
    attempt = 0
    for attempt in range(1, max(attempts, 1) + 1):
        error, left = "", {}
        try:
            target.restore(snapshot)
        except Exception as exc:  # noqa: BLE001 - every error is a reason to try again, then report
            own = exc.logs[-20:] if isinstance(exc, TargetError) else []
            own += exc.output.splitlines()[-20:] if isinstance(exc, ServiceError) else []
            error = with_reason(str(exc), own)  # the server's own reason, e.g. a FATAL line of its log
            logs += own
        available = _available(target)
        try:
            same, diff = values_match(target, snapshot, left) if available else (False, {})
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
    log.info(
        "restore.result",
        label=snapshot.label,
        verified=verified,
        changed=sorted(changed),
        attempts=attempt,
        left_alone=left,
    )
    return RestoreResult(
        label=snapshot.label,
        verified=verified,
        available=available,
        attempts=attempt,
        values=dict(snapshot.values),
        before=before,
        changed=changed,
        differences=diff,
        left_alone=left,
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
