"""A journal or Memory Book file appears whole: never empty or without its schema (issue 38: a reader
that opened the journal between its creation and the writer's schema got 'no such table', which made
test_metrics flaky)."""

from __future__ import annotations

import multiprocessing
import sqlite3
import stat
from pathlib import Path

from agenticdb.store.journal import Journal
from agenticdb.store.memory.book import MemoryBook
from agenticdb.store.sqlite_create import create_sqlite_atomically


def test_created_whole_private_and_never_replaced(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "x.db"
    assert create_sqlite_atomically(path, "CREATE TABLE IF NOT EXISTS t (a INTEGER);")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    with sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        conn.execute("SELECT a FROM t")
    before = path.read_bytes()
    assert not create_sqlite_atomically(path, "CREATE TABLE other (b INTEGER);")
    assert path.read_bytes() == before
    assert not [p.name for p in path.parent.iterdir() if ".new" in p.name]  # no temporary file left


def _open_journal(path: str, start: multiprocessing.synchronize.Event) -> None:  # type: ignore[name-defined]
    start.wait()
    with Journal(path) as j:
        j.append("s", "probe")


def test_a_reader_never_sees_a_journal_without_its_table(tmp_path: Path) -> None:
    """Six writers create the same journal at once while this process opens it read-only as soon as
    the name exists: every open finds the table (before the fix the file existed empty first)."""
    path = tmp_path / "journal.db"
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_open_journal, args=(str(path), start)) for _ in range(6)]
    for p in procs:
        p.start()
    start.set()
    reads = 0
    while any(p.is_alive() for p in procs) or reads == 0:
        if path.exists():
            with Journal(path, read_only=True) as j:
                j.events()  # raises 'no such table' on a schema-less file
            reads += 1
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    with Journal(path, read_only=True) as j:
        assert [e.event for e in j.events()] == ["probe"] * 6
    assert reads > 0


def test_memory_book_file_is_created_whole(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    MemoryBook(path).db.conn.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "experience" in tables or len(tables) > 3, tables
