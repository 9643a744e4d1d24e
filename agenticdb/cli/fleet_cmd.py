"""``agenticdb memory sync`` and ``agenticdb memory list --from-other-hosts`` (issue 19).

``sync`` uploads experience learned here and not yet in the central Memory Book
(``storage.memory_url``); it is idempotent, so running it twice uploads nothing the second time.
Exit codes: 0 success, 1 the central book is unreachable, 2 no ``storage.memory_url`` configured.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agenticdb.cli.journal_cmd import _fail, load_settings
from agenticdb.store.memory import MemoryBook
from agenticdb.store.memory.backends import ExperienceRecord, SqliteBackend
from agenticdb.store.memory.central import CentralError, PostgresBackend, fault, safe_url, sync


def run_sync(config: Path | None, home: Path | None, console: Console) -> None:
    """Upload pending local experience to the central book; prints what was uploaded.

    Raises:
        typer.Exit: 2 without ``storage.memory_url``; 1 when the central book cannot be reached.
    """
    cfg = load_settings(config, home)
    url = cfg.storage.memory_url
    if not url:
        _fail("memory sync: storage.memory_url is not set (the central Memory Book's postgresql:// URL)", code=2)
        return
    assert cfg.storage.memory_db is not None
    with MemoryBook(cfg.storage.memory_db, host=cfg.storage.host_label) as book:
        try:
            central = PostgresBackend(url)
        except CentralError as exc:
            pending = len(SqliteBackend(book).pending()[0])
            _fail(f"{exc}; {pending} experience row(s) stay pending in {book.path}")
            return
        try:
            result = sync(book, central)
        except (CentralError, psycopg.Error) as exc:
            # one line: what, where, what stays pending (issue 38: a killed upsert printed a traceback)
            cause = str(exc) if isinstance(exc, CentralError) else fault(url, "upload", exc)
            pending = len(SqliteBackend(book).pending()[0])
            _fail(f"{cause}; {pending} experience row(s) stay pending in {book.path} (the next sync uploads them)")
            return
        finally:
            central.close()
    console.print(
        escape(
            f"synced with {safe_url(url)} as host {book.host}: {result.uploaded} experience uploaded, "
            f"{result.already_there} already there, {result.rounds} round(s) sent"
        )
    )


def other_host_records(config: Path | None, home: Path | None) -> tuple[str, str, list[ExperienceRecord]]:
    """``(this host, where read, records of other hosts)``: from the central book when configured and
    reachable, else from the local book (imported or cached experience)."""
    cfg = load_settings(config, home)
    assert cfg.storage.memory_db is not None
    with MemoryBook(cfg.storage.memory_db, host=cfg.storage.host_label) as book:
        here = book.host
        records: list[ExperienceRecord] | None = None
        source = str(book.path)
        if cfg.storage.memory_url:
            try:
                central = PostgresBackend(cfg.storage.memory_url)
                try:
                    records, source = central.records(), safe_url(cfg.storage.memory_url)
                    if central.newer:
                        Console(stderr=True).print(
                            f"warning: the central schema is version {central.central_version}, newer than this "
                            f"agenticdb's {central.code_version}: read as far as understood, never written",
                            highlight=False,
                        )
                except psycopg.Error as exc:
                    raise CentralError(fault(cfg.storage.memory_url, "read", exc)) from None
                finally:
                    central.close()
            except CentralError as exc:
                Console(stderr=True).print(f"warning: {escape(str(exc))}; showing the local cache", highlight=False)
        if records is None:
            records = SqliteBackend(book).records()
    return here, source, [r for r in records if r.host != here]


def print_other_hosts(config: Path | None, home: Path | None, console: Console) -> None:
    """The table of experience learned on other hosts, with each one's origin host fingerprint."""
    here, source, records = other_host_records(config, home)
    table = Table(title=f"experience from hosts other than {here} ({source})")
    for col in ("host", "session", "dbms", "cores", "memory GiB", "storage", "class", "benchmark", "best gain"):
        table.add_column(col, overflow="fold")
    for r in records:
        fp, o = r.experience.fingerprint, r.experience.origin
        table.add_row(
            r.host,
            r.session_id,
            f"{fp.dbms} {fp.version_major}",
            str(o.cpu_count if o else fp.cpu_count),
            f"{(o.memory_gib if o else fp.memory_gib):g}",
            o.storage_class if o else "unknown",
            fp.workload_class,
            fp.benchmark,
            f"{r.experience.best_gain * 100:+.1f}%",
        )
    console.print(table)
    if not records:
        console.print("no experience from other hosts")
