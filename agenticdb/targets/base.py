"""Abstract base of every tuning target (tuned's get / set / verify / restore pattern).

A target owns one parameter namespace: a PostgreSQL server (GUCs), a MySQL/MariaDB server (system
variables) or the Linux host (sysctl + /sys/block). Everything outside ``agenticdb.targets`` talks to a
target only through this interface (docs/architecture.md, "Targets"): what differs by kind — the data
directory, the service controller, the pid file, which files of the data directory are configuration,
how a clean shutdown is prepared, how a version is cut to its major — is answered by the target itself,
never by a ``kind == ...`` branch elsewhere.

Restoring a snapshot *and proving it* is one function for every caller: ``agenticdb.loop.recovery.
restore_verified`` (the session's revert and final apply, recovery, the daemon's reconciliation and
``agenticdb rollback`` all go through it); targets implement the ``restore`` step it calls.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from agenticdb.dialect import family_of
from agenticdb.host.services import Service
from agenticdb.models import ApplyMode, Catalog, NormalizedChange, RuntimeState, Snapshot
from agenticdb.units.compare import values_equal


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
    """One tunable system. ``kind`` is "postgresql", "mariadb", "mysql" or "linux".

    Attributes:
        kind: the target kind (a MySQL-family target learns "mysql" vs "mariadb" from the server).
        service: the controller that starts, stops and restarts the server; None when nothing can
            (the Linux host, or a DBMS configured without one).
    """

    kind: str
    service: Service | None = None
    unavailable_reason: str | None = None
    """Why the last :meth:`available` said False, in one line (``agenticdb.connfault``); None: it answered."""

    # ---- identity ------------------------------------------------------------------------------

    @property
    def family(self) -> str:
        """Value dialect and rule-file family: "postgresql", "mysql" (MySQL and MariaDB) or "linux"."""
        return family_of(self.kind)

    @abstractmethod
    def version(self) -> str:
        """Server/kernel version string, e.g. "15.19" or "10.11.19-MariaDB" or "6.1.0"."""

    def version_major(self) -> str:
        """The version as experience is keyed by it: major.minor ("10.11", "6.1"); PostgreSQL overrides
        with the major number alone ("15"), its versioning since 10 (manual, "Versioning Policy")."""
        return ".".join(self.version().split(".")[:2])

    def owns(self, snapshot: Snapshot) -> bool:
        """True when ``snapshot`` was taken of a target of this family (a MariaDB snapshot restores on
        a target that reports "mysql" and back: one adapter serves both)."""
        return family_of(snapshot.target) == self.family

    # ---- what the host knows about the server ----------------------------------------------------

    @property
    def data_dir(self) -> str | None:
        """The server's data directory (disk budgets, data device, sandbox data resets); None when
        unknown or not applicable."""
        return None

    def server_pid(self) -> int | None:
        """Process id of the server (so memory budgets read the server's cgroup, not agenticdb's);
        None when unknown."""
        return None

    def can_restart(self) -> bool:
        """True when agenticdb can restart this target (a service controller that restarts)."""
        return self.service is not None and self.service.can_restart()

    def pristine_keep_files(self) -> tuple[str, ...]:
        """Names of files inside ``data_dir`` that are configuration and survive a pristine data reset."""
        return ()

    def prepare_clean_shutdown(self) -> None:
        """Make the next shutdown leave data files that start without crash recovery (no-op by default)."""

    # ---- get / set / verify / restore ------------------------------------------------------------

    @abstractmethod
    def catalog(self) -> Catalog:
        """Tunable parameters of this server/kernel with exclusions (cached after the first call)."""

    def knows(self, name: str) -> bool:
        """True when ``name`` is a tunable parameter of this target (in its catalog)."""
        return name in self.catalog().knobs

    @abstractmethod
    def current_values(self, names: list[str] | None = None) -> dict[str, str]:
        """Effective values as canonical strings (all catalog knobs when ``names`` is None)."""

    def values_equal(self, name: str, expected: str, actual: str) -> bool:
        """True when ``actual`` is ``expected`` in effect for parameter ``name``.

        The one comparison of values (``agenticdb.units.compare.values_equal``: case, quotes, numeric and
        boolean spellings); a target overrides it only where its server spells a value two ways.
        """
        return values_equal(expected, actual)

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

        Works while a DBMS is down. Raises TargetError when the target cannot be brought back. Callers
        use ``agenticdb.loop.recovery.restore_verified``, which also proves the values are in effect.
        """

    @abstractmethod
    def available(self) -> bool:
        """True when the target answers a real query / the files are readable."""

    @abstractmethod
    def runtime_state(self) -> RuntimeState:
        """Counters and gauges for bottleneck diagnosis."""

    def rule_gauges(self, names: list[str]) -> dict[str, float]:
        """Those of the gauges ``names`` that a runtime sample leaves out because they are too slow to read on
        every sample, read now for a validator rule that needs them (``Observed.read``); by name, in the units
        the gauge's name documents. Names the target does not read on demand are left out (none by default).
        A read that fails answers nothing (the rule then treats the gauge as unknown); one whose answer this
        account cannot trust (it would undercount) raises ``errors.GaugeUnknown`` with the reason."""
        return {}

    def inert(self, values: dict[str, str]) -> dict[str, str]:
        """Of ``values`` (name → a snapshot's value that a restore could not bring back), those that have no
        effect in the target's present configuration, with why by name: a restore leaves them alone and
        says so instead of failing. None by default (every difference fails the restore).

        Raises:
            Exception: the driver's error when the target cannot be read (the restore then fails)."""
        return {}

    def log_tail(self, lines: int = 50) -> list[str]:
        """Last lines of the server log (empty when unknown)."""
        return []

    def world_mark(self) -> dict[str, str]:
        """Markers that change only when someone restarts the server, resets its statistics or reloads its
        configuration (``agenticdb.measure.worldwatch``); empty when the target has none.

        Raises:
            Exception: the driver's error when the server cannot be read (callers treat it as no mark).
        """
        return {}

    def close(self) -> None:
        """Release connections."""
