"""Recovery: after a failed trial, repair in place or restore the last safe snapshot, then prove the
service is available with a real connection and the snapshot's values in effect.

Order of attempts:
  1. server available and its values already equal the safe snapshot (the target undid a failed batch
     itself) → "repaired";
  2. restore the snapshot (config files written back while the server may be down, then start/restart)
     → "restored";
  3. a second restore attempt after a pause (a start can race a slow shutdown);
  4. otherwise "failed": the session stops and says so; the journal keeps the open intent so the daemon
     or ``agenticdb rollback`` can retry.
"""

from __future__ import annotations

import time

import structlog

from agenticdb.models import Failure, RecoveryResult, Snapshot
from agenticdb.targets.base import Target

log = structlog.get_logger(__name__)


def _norm(v: str) -> str:
    return v.strip().lower()


def values_match(target: Target, snapshot: Snapshot) -> tuple[bool, dict[str, tuple[str, str]]]:
    """Compare the target's effective values with ``snapshot.values``.

    Returns (all equal, {name: (expected, actual)} for the differences).
    """
    if not snapshot.values:
        return True, {}
    actual = target.current_values(list(snapshot.values))
    diff = {
        k: (v, actual.get(k, "<missing>")) for k, v in snapshot.values.items() if _norm(actual.get(k, "")) != _norm(v)
    }
    return not diff, diff


class Recovery:
    """Brings a target back to its last safe snapshot after a ``Failure``."""

    def __init__(self, target: Target, retry_pause_s: float = 2.0) -> None:
        self.target = target
        self.retry_pause_s = retry_pause_s

    def recover(self, failure: Failure | None, safe: Snapshot) -> RecoveryResult:
        """Repair or restore; never raises (a failure to recover is reported in the result)."""
        excerpt = list(failure.logs[-20:]) if failure else []
        try:
            if self.target.available():
                same, diff = values_match(self.target, safe)
                if same and failure is not None and failure.phase == "workload":
                    return RecoveryResult(
                        action="repaired",
                        service_available=True,
                        verified=True,
                        details="server up with the safe values; the workload failed, not the config",
                        log_excerpt=excerpt,
                    )
        except Exception as exc:  # noqa: BLE001
            log.info("recovery.check_failed", error=str(exc))
        last_error = ""
        for attempt in (1, 2):
            try:
                self.target.restore(safe)
                available = self.target.available()
                same, diff = values_match(self.target, safe) if available else (False, {})
                if available and same:
                    details = (
                        f"restored the last safe snapshot ({safe.label or 'safe'}) and verified "
                        f"{len(safe.values)} values" + (f" on attempt {attempt}" if attempt > 1 else "")
                    )
                    log.info("recovery.restored", attempt=attempt, values=len(safe.values))
                    return RecoveryResult(
                        action="restored",
                        service_available=True,
                        verified=True,
                        details=details,
                        log_excerpt=excerpt,
                    )
                last_error = f"after restore: available={available}, differing values={diff}"
            except Exception as exc:  # noqa: BLE001 - every error is a reason to try again, then report
                last_error = str(exc)
                excerpt += list(getattr(exc, "logs", []) or [])[-20:]
            log.warning("recovery.attempt_failed", attempt=attempt, error=last_error)
            time.sleep(self.retry_pause_s)
        available = False
        try:
            available = self.target.available()
        except Exception:  # noqa: BLE001
            pass
        return RecoveryResult(
            action="failed",
            service_available=available,
            verified=False,
            details=f"could not restore the safe snapshot: {last_error}",
            log_excerpt=excerpt[-40:],
        )
