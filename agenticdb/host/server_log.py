"""The server's own reason for a failure, read from its log text (issue 17, "failures told in full").

When a restart or an apply fails, the server says why in its log: PostgreSQL writes a ``FATAL`` (or
``PANIC``) line — ``FATAL:  "min_wal_size" must be at least twice "wal_segment_size"`` — and MariaDB /
MySQL an ``[ERROR]`` line — ``[ERROR] /usr/sbin/mariadbd: unknown variable 'sql_buffer_result=ON'``.
:func:`server_reason` finds that one line in log text (the server log tail, ``pg_ctl`` output, the
error-log tail a failed ``mariadbd`` start leaves) so the one-line error a user sees carries it.

The functions here are pure: they read lines and return text, nothing else.

Formats (the servers' own):

* PostgreSQL: ``log_line_prefix`` (anything) followed by the severity and two spaces, e.g.
  ``2026-12-01 03:57:34.812 UTC [19649] FATAL:  "min_wal_size" must be ...``; severities from the
  manual, 20.8.2 "Message Severity Levels" (FATAL aborts the session or, at start, the server; PANIC
  aborts every session). FATAL lines a *client* gets while the server stops or starts ("the database
  system is shutting down", "terminating connection due to administrator command") are effects of
  the restart itself, not its cause, and are skipped.
* MariaDB / MySQL: ``<date> <time> <thread> [ERROR] <message>`` (MariaDB KB "Error Log", format of
  entries); MySQL 8 writes ``[ERROR] [MY-000067] [Server] unknown variable ...``. The *first* error
  of the last start attempt is the cause; the ones after it (``Aborting``, "Plugin 'InnoDB'
  registration as a STORAGE ENGINE failed", "Unknown/unsupported storage engine") are consequences.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from agenticdb.units.text import clip

_PG_SEVERE = re.compile(r"\b(FATAL|PANIC):\s+(?P<msg>\S.*)$")
_MY_ERROR = re.compile(r"\[ERROR\]\s+(?:\[[^\]]*\]\s+)*(?P<msg>\S.*)$")
_MY_START = re.compile(r"\[Note\].*(?:Starting MariaDB|starting as process|mysqld \(.*\) starting as)")
_MY_READY = re.compile(r"\bready for connections\b")
_PG_READY = "database system is ready to accept connections"

#: PostgreSQL FATAL messages a client receives because the server is stopping or starting: never a cause.
_PG_CLIENT_NOISE = (
    "the database system is shutting down",
    "the database system is starting up",
    "the database system is not yet accepting connections",
    "the database system is not accepting connections",
    "terminating connection due to administrator command",
    "terminating connection due to unexpected postmaster exit",
    "connection to client lost",
)

#: MariaDB/MySQL error lines that follow the real cause of an aborted start.
_MY_CONSEQUENCES = (
    "aborting",
    "unknown/unsupported storage engine",
    "registration as a storage engine failed",
    "plugin initialization aborted",
    "failed to initialize plugins",
)

#: Longest reason returned, characters (it goes into a one-line error message).
MAX_REASON = 300


def _clip(text: str) -> str:
    return clip(text, MAX_REASON)


def postgres_reason(lines: Iterable[str]) -> str | None:
    """The last FATAL/PANIC line of PostgreSQL log text, as ``FATAL: <message>``; None when there is none
    or the server logged "database system is ready to accept connections" after it (a log tail read
    after a later failure of another kind must not repeat an old, recovered start failure).

    Args:
        lines: log lines, oldest first (server log tail or ``pg_ctl`` output); any ``log_line_prefix``.
    """
    found: str | None = None
    for line in lines:
        if _PG_READY in line:
            found = None  # the server came up after it: an earlier FATAL is not the reason now
            continue
        m = _PG_SEVERE.search(line)
        if m is None:
            continue
        msg = m.group("msg").strip()
        if any(noise in msg for noise in _PG_CLIENT_NOISE):
            continue
        found = f"{m.group(1)}: {msg}"
    return _clip(found) if found else None


def mysql_reason(lines: Iterable[str]) -> str | None:
    """The first ``[ERROR]`` of the last start attempt in MariaDB/MySQL error-log text, as
    ``[ERROR] <message>``; None when there is none or the server was "ready for connections" after it.

    Args:
        lines: error-log lines, oldest first.
    """
    errors: list[str] = []
    for line in lines:
        if _MY_START.search(line) or _MY_READY.search(line):
            errors = []  # a new start attempt, or a start that succeeded: earlier errors are not the reason
            continue
        m = _MY_ERROR.search(line)
        if m is not None:
            errors.append(m.group("msg").strip())
    causes = [e for e in errors if not any(c in e.lower() for c in _MY_CONSEQUENCES)]
    pick = causes[0] if causes else (errors[0] if errors else None)
    return _clip(f"[ERROR] {pick}") if pick else None


def server_reason(lines: Iterable[str] | str) -> str | None:
    """The server's own reason in log text of either server family; None when it gives none.

    Tries the MariaDB/MySQL ``[ERROR]`` form first (its lines never carry ``FATAL:``), then the
    PostgreSQL ``FATAL``/``PANIC`` form.

    Args:
        lines: log lines oldest first, or one text with newlines.
    """
    seq = lines.splitlines() if isinstance(lines, str) else list(lines)
    return mysql_reason(seq) or postgres_reason(seq)


def with_reason(message: str, lines: Iterable[str] | str) -> str:
    """``message`` followed by ``; server log: <reason>`` when the log gives a reason the message does
    not already contain (a message is never lengthened twice)."""
    reason = server_reason(lines)
    if not reason:
        return message
    bare = reason.split(":", 1)[1].strip() if reason.startswith(("FATAL:", "PANIC:")) else reason[len("[ERROR] ") :]
    if bare in message:
        return message
    return f"{message}; server log: {reason}"
