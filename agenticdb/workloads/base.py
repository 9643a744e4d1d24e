"""The ``Workload`` interface: prepare (idempotent), warm up, run, result, cleanup.

A run that produces no result, or errors past ``max_error_rate``, raises ``WorkloadError`` with the
tool's output attached; it is never scored as zero.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from agenticdb.models import Measurement


class WorkloadError(RuntimeError):
    """The workload could not prepare or run; ``output`` is the tail of the tool's output."""

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message)
        self.output = output


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
    objective: str  # "tps_per_p95" | "tps" | "p95" | "total_time"


class Workload(ABC):
    """One benchmark against one database."""

    name: str

    @abstractmethod
    def traits(self) -> WorkloadTraits:
        """Fingerprint fields for this workload and its settings."""

    @abstractmethod
    def prepare(self) -> None:
        """Create the database and load data once; a second call detects the data and returns quickly.

        Raises:
            WorkloadError: loading failed (tool output attached).
        """

    def warmup(self, seconds: float) -> None:
        """Run unmeasured for ``seconds`` (default: a short run whose result is dropped)."""
        if seconds > 0:
            self.run(seconds)

    @abstractmethod
    def run(self, seconds: float) -> Measurement:
        """Run for ``seconds`` (OLTP) or the whole query set (OLAP) and return the measurement.

        Raises:
            WorkloadError: the tool failed, printed no result, or errors exceeded the threshold.
        """

    def cleanup(self) -> None:
        """Drop what ``prepare`` created (optional)."""
