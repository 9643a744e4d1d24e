"""Create a SQLite file whole or not at all: a reader never sees an empty or schema-less file.

``create_private`` made the file empty with mode 0600 and the schema came with the writer's first
connection: a reader that opened the file in between (``journal verify``, the metrics collector, a
test polling for the journal) found no table (issue 38: test_metrics was flaky). Here the schema is
written to a private temporary file in the same folder, which is then hard-linked to its name
(``link`` is atomic and fails when the name exists, so a file another process created first is kept,
never replaced) and the temporary name removed.

``connect_read_only`` is the other end: a reader that leaves the folder as it found it.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import structlog

log = structlog.get_logger(__name__)


def create_sqlite_atomically(path: Path, schema_sql: str, wal: bool = True) -> bool:
    """Create ``path`` (mode 0600, parents 0700) holding ``schema_sql`` when it does not exist.

    Args:
        path: the database file.
        schema_sql: statements run once in the new file (``CREATE TABLE IF NOT EXISTS ...``).
        wal: set ``journal_mode=WAL`` in the file's header before it becomes visible.

    Returns:
        True when this call created it, False when it already existed (kept as it was).

    Raises:
        OSError: the folder cannot be written; sqlite3.Error: ``schema_sql`` fails.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.exists():
        return False
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".new", dir=path.parent)
    os.close(fd)  # mkstemp made it 0600; SQLite gives its -wal/-shm files the mode of the database file
    tmp = Path(tmp_name)
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            if wal:
                conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(schema_sql)
        finally:
            conn.close()  # the last connection checkpoints and removes the -wal/-shm files
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        log.debug("sqlite.created", path=str(path))
        return True
    finally:
        for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()


def connect_read_only(path: Path, **kwargs: Any) -> sqlite3.Connection:
    """A connection to ``path`` that writes nothing, for inspection (``journal verify``, ``rollback
    --dry-run``); ``kwargs`` go to ``sqlite3.connect``.

    ``mode=ro`` alone is not enough: reading a WAL database creates its ``-wal`` and ``-shm`` files, and a
    read-only connection leaves them behind (SQLite wal.html, "Read-Only Databases"). When no ``-wal``
    file exists, no writer has the file open and every commit is in the main file, so it is opened
    ``immutable=1`` (no locks, no side files); while a writer is there, its side files exist already.

    Raises:
        sqlite3.Error: the file does not exist or is not a database.
    """
    wal_in_use = Path(f"{path}-wal").exists()
    uri = f"{path.resolve().as_uri()}?mode=ro" + ("" if wal_in_use else "&immutable=1")
    conn: sqlite3.Connection = sqlite3.connect(uri, uri=True, **kwargs)
    return conn
