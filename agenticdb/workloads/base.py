"""The ``Workload`` interface: prepare (idempotent), warm up, run, result, cleanup.

A run that produces no result, or errors past ``max_error_rate``, raises ``WorkloadError`` with the
tool's output attached; it is never scored as zero.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

from agenticdb.measure.trial_limit import TrialLimit
from agenticdb.models import Measurement


class WorkloadError(RuntimeError):
    """The workload could not prepare or run; ``output`` is the tail of the tool's output; ``signal`` the
    number of the signal that ended the tool when agenticdb did not send it (``common.outside_signal``:
    someone killed it from outside), else None."""

    def __init__(self, message: str, output: str = "", signal: int | None = None) -> None:
        super().__init__(message)
        self.output = output
        self.signal = signal


class RunStopped(WorkloadError):
    """agenticdb ended the run itself because ``Workload.stop`` said so (the session's stop was requested
    during a run that is worth nothing unfinished: a race screen's). Never the configuration's failure: the
    executor tells it as the stop's interruption (``loop.runwatch.StopInterrupted``)."""


@dataclass
class Connection:
    """How a workload tool reaches the database (filled by the session from the target config).

    ``kind`` is "postgresql" or "mysql" (MariaDB included); ``socket`` is a unix socket path or dir.
    """

    kind: str
    host: str
    port: int
    user: str
    password: str = ""
    database: str = "agenticdb_bench"
    socket: str | None = None
    admin_dsn: str = ""
    extra: dict[str, str] = field(default_factory=dict)


@dataclass
class WorkloadTraits:
    """Fingerprint fields a workload fills (docs/architecture.md "The journal and the Memory Book")."""

    benchmark: str
    workload_class: str  # "oltp" | "olap" | "mixed"
    read_fraction: float
    access_pattern: str
    scale: float
    concurrency: int
    objective: str  # "tps_per_p95" | "tps" | "p95" | "p99" | "total_time"


class Workload(ABC):
    """One benchmark against one database.

    ``limit``: set by the executor for a trial's first run only (``agenticdb.measure.trial_limit``): a workload
    that supports it stops a run far worse than the best configuration early and returns a measurement
    with ``cut_off`` set. None: every run goes to its end.
    """

    name: str
    limit: TrialLimit | None = None
    stop: Callable[[], bool] | None = None
    """Set by the executor for the warm-up and run of a race screen only: a workload that supports it ends the
    run as soon as this returns True (the session's stop request) and raises :class:`RunStopped`; a tool run
    (``common.run_tool``) is asked every 0.25 s, a query set between its queries. None: runs go to their end."""
    samples_host: bool = True
    """Whether the executor samples this host's CPU during the workload's runs to flag disturbed ones
    (docs/measurement.md, "Host disturbance"). A workload whose runs put no load on this host (the session
    tests' scripted workload) sets False: its measurements carry only the disturbance it reports itself."""
    restarts_in_warmup: bool = False
    """Whether ``warmup`` restarts the server before it warms up (the harness's pristine-reset wrapper): the
    executor then leaves the prewarm of the buffer cache (``agenticdb.host.prewarm``) to the workload, after
    that restart, since a restart drops what was loaded before it."""
    warmup_is_pass: bool = False
    """Whether ``warmup`` runs one whole unmeasured pass (a query set, TPC-H) rather than a time: after a restart
    whose prewarm loaded the buffer cache, the executor warms such a workload up as before any run (``warmup_s``),
    not with the extra pass a time warm-up gets (docs/measurement.md "Warm-up after a restart")."""
    observes_only: bool = False
    """Whether the workload only observes the application's own statements (workload live): before its first
    run the executor prewarms the buffer cache only when the server was just started, never evicting the
    application's cache (``agenticdb.loop.executor.JUST_STARTED_S``)."""

    @abstractmethod
    def traits(self) -> WorkloadTraits:
        """Fingerprint fields for this workload and its settings."""

    @abstractmethod
    def prepare(self) -> None:
        """Create the database and load data once; a second call detects the data and returns quickly.

        Raises:
            WorkloadError: loading failed (tool output attached).
        """

    def next_run(self, label: str) -> None:
        """Told the label of the next measured run ("baseline 1", "candidate", "confirm best 2", …) before
        it starts; the default ignores it (the live workload's guard watches candidate windows only)."""

    def warmup(self, seconds: float) -> None:
        """Run unmeasured for ``seconds`` (default: a short run whose result is dropped)."""
        if seconds > 0:
            self.run(seconds)

    @abstractmethod
    def run(
        self, seconds: float, warmup_max_s: float = 0.0, on_tool_start: Callable[[int], object] | None = None
    ) -> Measurement:
        """Run for ``warmup_max_s + seconds`` (OLTP) or the whole query set (OLAP) and return the measurement.

        OLTP workloads record a per-second series and score the run on its steady window, which starts
        where the series becomes stable (MSER-5), at most ``warmup_max_s`` seconds in
        (docs/measurement.md).

        Args:
            seconds: the shortest steady window to score, in seconds.
            warmup_max_s: the longest start-up transient that may be cut (0 = score the whole run).
            on_tool_start: called with the process id of each benchmark tool process the run starts.

        Raises:
            WorkloadError: the tool failed, printed no result, or errors exceeded the threshold.
        """

    def cleanup(self) -> None:
        """Drop what ``prepare`` created (optional)."""
