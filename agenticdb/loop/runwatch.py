"""One measured run's watch on the world: marks before and after, and the evidence for an outside restart.

Used by ``Executor.measure`` (issue 38): :meth:`RunWatch.begin` right before the workload runs,
:meth:`RunWatch.changes` after it (what changed under the run: the run is then disturbed, repeated within
the caps and never judged), :meth:`RunWatch.outside` when it failed (was it someone else's requested
restart? see :func:`agenticdb.measure.worldwatch.outside_restart`).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import structlog

from agenticdb.host.hardware import memory_events_file
from agenticdb.measure.worldwatch import lines_after, oom_kills, outside_restart, world_changes
from agenticdb.models import Disturbance, Measurement
from agenticdb.targets.base import Target
from agenticdb.workloads.base import RunStopped, WorkloadError

log = structlog.get_logger(__name__)

LOG_ANCHOR_LINES = 5
LOG_SCAN_LINES = 2000
"""Server log lines read after a failed run to find what was written during it (a run's log is short:
a shutdown and a start write about 10-30 lines on PostgreSQL 15 / MariaDB 10.11 here)."""


class Interrupted(WorkloadError):
    """The run ended for a cause outside the candidate (``evidence``): never the candidate's failure."""

    def __init__(self, message: str, evidence: str, output: str = "") -> None:
        super().__init__(message, output)
        self.evidence = evidence


class OutsideRestart(Interrupted):
    """The run ended because someone else restarted the server (``evidence``): not the candidate's failure."""

    def __init__(self, message: str, evidence: str, output: str = "") -> None:
        super().__init__(f"interrupted by an outside restart: {message}", evidence, output)


STOPPING = "while the session was stopping"
"""Marks the evidence of a :class:`StopInterrupted` run (``round.round_failed`` tells it so)."""


class StopInterrupted(Interrupted):
    """The benchmark tool was ended by a signal agenticdb did not send while a stop was requested (a
    Ctrl-C typed at a terminal reaches the whole foreground process group, termios(3) ISIG; a service
    manager's stop signals every process of the unit, systemd.kill(5) KillMode=control-group): the stop
    ended the run, not the configuration."""

    def __init__(self, message: str, evidence: str, output: str = "") -> None:
        super().__init__(f"interrupted {STOPPING}: {message}", evidence, output)


STOP_GRACE_S = 1.0
"""Seconds a run ended by an outside signal waits for agenticdb's own stop request (the same Ctrl-C or
service stop reaches the tool and agenticdb at nearly the same moment, in either order)."""


def stop_interruption(exc: WorkloadError, should_stop: Callable[[], bool], grace_s: float = STOP_GRACE_S) -> str:
    """The evidence that ``exc`` is the session's stop, not a failure ('' when it is not): agenticdb ended the
    run itself at the stop request (``workloads.base.RunStopped``: a race screen's run), or the tool ended
    by a signal agenticdb did not send (``WorkloadError.signal``) and a stop is requested (``should_stop``,
    asked for up to ``grace_s`` seconds)."""
    if isinstance(exc, RunStopped):
        return f"agenticdb ended the run at the stop request, {STOPPING} (stop requested): {exc}"
    if exc.signal is None:
        return ""
    deadline = time.monotonic() + grace_s
    while not should_stop():
        if time.monotonic() >= deadline:
            return ""
        time.sleep(0.05)
    try:
        name = signal.Signals(exc.signal).name
    except ValueError:
        name = f"signal {exc.signal}"
    return f"the benchmark tool ended by {name}, which agenticdb did not send, {STOPPING} (stop requested)"


class RunWatch:
    """Marks of one run. ``server_pid`` gives the server's pid (its cgroup's OOM count); None: unknown."""

    def __init__(self, target: Target, server_pid: Callable[[], int | None]) -> None:
        self.target = target
        self.server_pid = server_pid
        self.mark: dict[str, str] = {}
        self.anchor: list[str] = []
        self.cgroup: Path | None = None
        self.oom_before: int | None = None

    def _mark(self) -> dict[str, str]:
        try:
            return self.target.world_mark()
        except Exception as exc:  # noqa: BLE001 - an unreadable mark is no evidence either way
            log.debug("world.mark_unreadable", error=str(exc))
            return {}

    def begin(self) -> None:
        """Read the marks, the server log's last lines and the cgroup's OOM count before the run."""
        self.mark = self._mark()
        self.anchor = self.target.log_tail(LOG_ANCHOR_LINES)
        try:
            pid = self.server_pid()
            self.cgroup = memory_events_file(pid) if pid is not None else None
        except Exception:  # noqa: BLE001 - no pid: no OOM evidence (the failure stays the candidate's)
            self.cgroup = None
        self.oom_before = oom_kills(self.cgroup)

    def changes(self) -> list[str]:
        """What changed under the run (empty: nothing seen)."""
        return world_changes(self.mark, self._mark()) if self.mark else []

    def outside(self, exc: WorkloadError) -> tuple[bool, str]:
        """Was ``exc`` caused by someone else's requested restart? ``(outside, evidence or why not)``."""
        text = f"{exc}\n{exc.output}"
        since = lines_after(self.anchor, self.target.log_tail(LOG_SCAN_LINES))
        outside, why = outside_restart(text, since, self.oom_before, oom_kills(self.cgroup))
        log.info("run.failure_cause", outside=outside, reason=why)
        return outside, why


def with_world(m: Measurement, world: list[str]) -> Measurement:
    """``m`` marked disturbed by ``world`` (what changed under it), merged with its host disturbance."""
    said = "the server changed under the run: " + "; ".join(world)
    d = m.disturbance
    if d is None:
        d = Disturbance(samples=0, seconds=m.duration_s, other_cpu_cores=0.0, other_cpu_spread=0.0)
    merged = [*d.world, *(w for w in world if w not in d.world)]
    reason = said if not d.disturbed or not d.reason else f"{said}; {d.reason}"
    return m.model_copy(
        update={"disturbance": d.model_copy(update={"world": merged, "disturbed": True, "reason": reason})}
    )
