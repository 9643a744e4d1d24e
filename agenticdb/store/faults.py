"""Storage faults: the journal or Memory Book SQLite file cannot be opened or written (issue 17, item 8).

A full disk, a read-only file system or missing permissions make SQLite raise ``sqlite3.OperationalError``
("database or disk is full", "attempt to write a readonly database", "unable to open database file")
and the file system raise ``OSError`` (ENOSPC, EROFS, EACCES). :class:`StorageError` turns either into
one line naming the file and the cause; it is a :class:`~agenticdb.errors.SessionError`, so ``agenticdb
tune`` prints it on one line and exits 1, and a running session puts the safe configuration back
before it stops (``session.TuningSession.run``): the journal cannot record a trial, so none may remain.

SQLite result codes: https://www.sqlite.org/rescode.html (SQLITE_FULL, SQLITE_READONLY, SQLITE_CANTOPEN,
SQLITE_IOERR); errno names: errno(3).
"""

from __future__ import annotations

import errno
import functools
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import structlog

from agenticdb.errors import SessionError

log = structlog.get_logger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

_ERRNO_CAUSE = {
    errno.ENOSPC: "no space left on the device (disk full)",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EIO: "input/output error",
    errno.ENOENT: "a folder on its path does not exist and cannot be created there",
}

_SQLITE_CAUSE = (
    ("disk is full", "no space left on the device (disk full)"),
    ("readonly database", "the file or its folder is read-only (read-only file system or permissions)"),
    ("unable to open database file", "cannot open or create the file (missing folder, permissions or disk full)"),
    ("disk i/o error", "input/output error (disk full, read-only or failing device)"),
)


class StorageError(SessionError):
    """The journal or the Memory Book cannot be opened or written.

    Attributes:
        path: the SQLite file.
        what: "journal" or "memory" (the Memory Book).
        cause: the cause in words ("no space left on the device (disk full)").
    """

    exit_code = 1

    def __init__(self, path: Path | str, what: str, cause: str, action: str = "write", note: str = "") -> None:
        self.path = Path(path)
        self.what = what
        self.cause = cause
        self.action = action
        super().__init__(f"cannot {action} the {what} {self.path}: {cause}" + (f"; {note}" if note else ""))


def folder_state(path: Path) -> str | None:
    """What the file system of ``path``'s folder says now: read-only mount (``ST_RDONLY``), no free
    block (disk full), not writable by this user; None when none of these holds (statvfs(3), access(2))."""
    folder = path.parent
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    if st.f_flag & os.ST_RDONLY:
        return _ERRNO_CAUSE[errno.EROFS]
    if st.f_bavail == 0:
        return _ERRNO_CAUSE[errno.ENOSPC]
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return _ERRNO_CAUSE[errno.EACCES]
    return None


def cause_of(exc: BaseException, path: Path | None = None) -> str:
    """The cause of a storage error in words: from the errno of an ``OSError``; for an ``sqlite3.Error``
    from the state of ``path``'s file system when it explains it (SQLite reports a full disk during
    its shared-memory set-up as a bare "disk I/O error"), else from SQLite's message."""
    if isinstance(exc, OSError) and exc.errno in _ERRNO_CAUSE:
        return _ERRNO_CAUSE[exc.errno]
    text = str(exc)
    state = folder_state(path) if path is not None else None
    if state is not None:
        return f"{state} [{text}]"
    low = text.lower()
    for needle, cause in _SQLITE_CAUSE:
        if needle in low:
            return f"{cause} [{text}]"
    return text or type(exc).__name__


def _close_quietly(store: Any) -> None:
    try:
        store.close()
    except Exception:  # noqa: BLE001 - the store never opened fully; the open error is what matters
        log.debug("storage.close_after_failed_open", path=str(getattr(store, "path", "?")))


def guarded(what: str, action: str = "write") -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorator for a method of a store whose ``self.path`` is its SQLite file: an ``sqlite3.Error`` or
    ``OSError`` raised inside becomes a :class:`StorageError` naming that file.

    Args:
        what: "journal" or "memory".
        action: "write" or "open", for the message.
    """

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def inner(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return fn(*args, **kwargs)
            except (sqlite3.Error, OSError) as exc:
                store: Any = args[0]
                if action == "open":
                    _close_quietly(store)  # a half-opened connection would keep the file (and its mount) busy
                raise StorageError(store.path, what, cause_of(exc, Path(store.path)), action) from exc

        return inner

    return wrap
