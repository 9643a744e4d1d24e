"""Abstract base of every tuning target (tuned's get / set / verify / restore pattern).

A target owns one parameter namespace: a PostgreSQL server (GUCs), a MySQL/MariaDB server (system
variables) or the Linux host (sysctl + /sys/block). The executor only talks to this interface.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from agenticdb.models import ApplyMode, Catalog, NormalizedChange, RuntimeState, Snapshot


class TargetError(RuntimeError):
    """A target operation failed; ``logs`` holds server log lines that explain it."""

    def __init__(self, message: str, logs: list[str] | None = None) -> None:
        super().__init__(message)
        self.logs = logs or []


class ApplyError(TargetError):
    """Writing a change failed (SQL error, EINVAL from a /proc/sys write, restart failed)."""


class VerifyError(TargetError):
    """A change is not in effect after apply (pending restart, rounded away, reverted by someone)."""


class Target(ABC):
    """One tunable system. ``kind`` is "postgresql", "mariadb", "mysql" or "linux"."""

    kind: str

    @abstractmethod
    def version(self) -> str:
        """Server/kernel version string, e.g. "15.19" or "10.11.19-MariaDB" or "6.1.0"."""

    @abstractmethod
    def catalog(self) -> Catalog:
        """Tunable parameters of this server/kernel with exclusions (cached after the first call)."""

    @abstractmethod
    def current_values(self, names: list[str] | None = None) -> dict[str, str]:
        """Effective values as canonical strings (all catalog knobs when ``names`` is None)."""

    @abstractmethod
    def snapshot(self, names: list[str] | None = None, label: str = "") -> Snapshot:
        """Save values and config files needed to restore the current configuration."""

    @abstractmethod
    def apply(self, changes: list[NormalizedChange], mode: ApplyMode) -> bool:
        """Write ``changes`` and make them take effect by ``mode``. Returns True when it restarted.

        Raises:
            ApplyError: the write, reload or restart failed (nothing is rolled back here: recovery does).
        """

    @abstractmethod
    def verify(self, changes: list[NormalizedChange]) -> dict[str, str]:
        """Read back effective values; return them by name.

        Raises:
            VerifyError: a value is not in effect (message names parameter, expected and actual).
        """

    @abstractmethod
    def restore(self, snapshot: Snapshot) -> None:
        """Put the snapshot's files/values back and bring the target up with them (restart if needed).

        Works while a DBMS is down. Raises TargetError when the target cannot be brought back.
        """

    @abstractmethod
    def available(self) -> bool:
        """True when the target answers a real query / the files are readable."""

    @abstractmethod
    def runtime_state(self) -> RuntimeState:
        """Counters and gauges for bottleneck diagnosis."""

    def log_tail(self, lines: int = 50) -> list[str]:
        """Last lines of the server log (empty when unknown)."""
        return []

    def close(self) -> None:
        """Release connections."""
