"""Export and import of the Memory Book (``agenticdb memory export|import``): a JSON document that carries
sessions, rounds, experience and LLM calls from one host's book to another's, validated before anything
is written.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import structlog
from pydantic import ValidationError

from agenticdb.models import RoundOutcome
from agenticdb.models.planning import Experience, Fingerprint
from agenticdb.redaction import redact_obj
from agenticdb.store.faults import guarded
from agenticdb.store.memory.book import MemoryBook, MemoryBookError

log = structlog.get_logger(__name__)

_EXPORT_FORMAT = "agenticdb-memory"
_EXPORT_VERSION = 1


def export_book(book: MemoryBook, path: Path | str) -> dict[str, int]:
    """Write sessions, rounds, experience and LLM calls to a JSON file.

    Every string is redacted (agenticdb.redaction.redact_obj): no DSN password or API key leaves the host.
    OS originals are host-specific and are not exported: importing them on another host would
    make crash reconciliation "restore" values that were never that host's.

    Returns:
        Row counts per table.
    """
    doc: dict[str, Any] = {"format": _EXPORT_FORMAT, "version": _EXPORT_VERSION}
    for table in ("sessions", "rounds", "experience", "llm_calls"):
        doc[table] = book.table_rows(table)
    Path(path).write_text(json.dumps(redact_obj(doc), indent=1, sort_keys=True))
    return {t: len(doc[t]) for t in ("sessions", "rounds", "experience", "llm_calls")}


@guarded("memory")
def import_book(book: MemoryBook, path: Path | str) -> dict[str, int]:
    """Merge a file written by :func:`export_book`: sessions and rounds already present are kept,
    experience is added unless the same session's experience is already stored; LLM calls of
    imported sessions only. Everything is validated before anything is written.

    Returns:
        Rows added per table.

    Raises:
        MemoryBookError: unreadable file, wrong format, or an entry that does not validate (the
            message names the table and the entry's index).
    """
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise MemoryBookError(f"import file {path}: cannot read JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != _EXPORT_FORMAT:
        raise MemoryBookError(f"import file {path}: format must be {_EXPORT_FORMAT!r}")
    if doc.get("version") != _EXPORT_VERSION:
        raise MemoryBookError(f"import file {path}: version={doc.get('version')!r}, expected 1")
    sessions = _validated(book, path, doc, "sessions", lambda r: Fingerprint.model_validate_json(r["fingerprint"]))
    rounds = _validated(book, path, doc, "rounds", lambda r: RoundOutcome.model_validate_json(r["outcome"]))
    exps = _validated(book, path, doc, "experience", lambda r: Experience.model_validate_json(r["experience"]))
    calls = _validated(book, path, doc, "llm_calls", lambda r: r["session_id"])
    added = {"sessions": 0, "rounds": 0, "experience": 0, "llm_calls": 0}
    try:
        _merge(book, sessions, rounds, exps, calls, added)
    except sqlite3.IntegrityError as exc:
        raise MemoryBookError(f"import file {path}: rejected by the schema: {exc}") from None
    log.info("memory.imported", path=str(path), **added)
    return added


def _merge(
    book: MemoryBook,
    sessions: list[dict[str, Any]],
    rounds: list[dict[str, Any]],
    exps: list[dict[str, Any]],
    calls: list[dict[str, Any]],
    added: dict[str, int],
) -> None:
    with book.db.atomic():
        new_sessions = set()
        for r in sessions:
            if not book.has_session(r["id"]):
                book.insert_row("sessions", r)
                new_sessions.add(r["id"])
                added["sessions"] += 1
        for r in rounds:
            if book.count_rows("rounds", "session_id = ? AND round_no = ?", [r["session_id"], r["round_no"]]) == 0:
                book.insert_row("rounds", r)
                added["rounds"] += 1
        for r in exps:
            if book.count_rows("experience", "session_id = ?", [r["session_id"]]) == 0:
                book.insert_row("experience", {k: v for k, v in r.items() if k != "id"})
                added["experience"] += 1
        for r in calls:
            if r["session_id"] in new_sessions:
                book.insert_row("llm_calls", {k: v for k, v in r.items() if k != "id"})
                added["llm_calls"] += 1


def _validated(book: MemoryBook, path: Path | str, doc: dict[str, Any], table: str, check: Any) -> list[dict[str, Any]]:
    rows = doc.get(table, [])
    if not isinstance(rows, list):
        raise MemoryBookError(f"import file {path}: {table} must be a list")
    columns = book.table_columns(table)
    for i, row in enumerate(rows):
        try:
            if not isinstance(row, dict):
                raise TypeError("not an object")
            unknown = set(row) - columns
            if unknown:
                raise TypeError(f"unknown columns {sorted(unknown)}")
            check(row)
        except (ValidationError, KeyError, TypeError, ValueError) as exc:
            raise MemoryBookError(f"import file {path}: {table}[{i}] is invalid: {exc}") from None
    return rows
