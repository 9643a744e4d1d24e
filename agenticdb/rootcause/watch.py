"""One observation window's raw reads, for either engine: a snapshot of the counters before the window
and lock-wait samples taken in a thread during it (issue 40).

The engine-specific parts are parameters: how to connect, what a snapshot and a sample read, and which
driver error ends a read (``psycopg.Error`` for PostgreSQL in :mod:`agenticdb.rootcause.pg_read`,
``pymysql.MySQLError`` for MariaDB in :mod:`agenticdb.rootcause.my_read`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import closing
from typing import Generic, Protocol, TypeVar

import structlog

log = structlog.get_logger(__name__)


class _Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=_Closable)
S = TypeVar("S")
L = TypeVar("L")


class Watch(Generic[C, S, L]):
    """Counters before a window (``before``), lock waits sampled in a thread every ``interval_s`` during
    it (``samples``), until :meth:`stop`.

    Args:
        connect: opens a new connection to the server (one for the snapshot, one for the sampling thread;
            each is closed after use).
        snapshot: reads the counters over a connection → ``before``.
        sample: reads one lock-wait sample over a connection → appended to ``samples``.
        error: the driver's error type(s); one raised by ``connect``, ``snapshot`` or ``sample`` is logged
            and ends that read — the window keeps what it got (a failed snapshot leaves ``before`` None; a
            restart in the window ends the sampling). Any other exception is not caught.
        interval_s: seconds between samples (the first one ``interval_s`` after :meth:`start`).
    """

    def __init__(
        self,
        connect: Callable[[], C],
        snapshot: Callable[[C], S],
        sample: Callable[[C], L],
        error: type[Exception] | tuple[type[Exception], ...],
        interval_s: float = 1.0,
    ) -> None:
        self._connect, self._snapshot, self._sample, self._error = connect, snapshot, sample, error
        self.interval_s = interval_s
        self.before: S | None = None
        self.samples: list[L] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Watch[C, S, L]:
        """Take the first snapshot and start sampling (a failed snapshot leaves ``before`` None). Returns self."""
        try:
            with closing(self._connect()) as conn:
                self.before = self._snapshot(conn)
        except self._error as exc:
            log.warning("rootcause.snapshot_failed", error=str(exc)[:200], reason="window without counters before")
        self._thread = threading.Thread(target=self._run, name="rootcause-locks", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            with closing(self._connect()) as conn:
                while not self._stop.wait(self.interval_s):
                    self.samples.append(self._sample(conn))
        except self._error as exc:  # a restart in the window ends sampling; what was sampled stays
            log.info("rootcause.sampling_ended", error=str(exc)[:200], samples=len(self.samples))

    def stop(self) -> None:
        """Stop sampling (waits up to 10 s for the thread)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
