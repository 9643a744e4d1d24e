"""Single-instance lock: two agenticdb processes (daemon or ``tune``) never tune the same target at once.

An ``fcntl.flock`` on ``<home>/locks/<hash of the DSN>.lock``: the kernel drops it when the process dies,
so a crashed daemon never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from pathlib import Path


class LockError(RuntimeError):
    """Another process holds the lock (message names the target and the holder's pid)."""


class TargetLock:
    """Exclusive, non-blocking lock per target DSN."""

    def __init__(self, home: Path, dsn: str) -> None:
        digest = hashlib.sha256(dsn.encode()).hexdigest()[:16]
        self.path = Path(home) / "locks" / f"{digest}.lock"
        self.dsn = dsn
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise LockError at once."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise LockError(
                f"another agenticdb process (pid {holder}) is tuning this target; lock {self.path}"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Release the lock (idempotent)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> TargetLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
