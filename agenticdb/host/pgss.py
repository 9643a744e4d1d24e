"""pg_stat_statements where the workload runs (issue 36 point 4): created there when the server preloads it and
the connected role may, and when it cannot be read there, why.

One place for every path that needs the statements' statistics in the workload's own database: the sandbox
(``agenticdb sandbox up`` and ``tune --sandbox``, as its superuser), the workloads' ``prepare`` (the tune path,
as the tuning role) and the target's statistics (``PostgresTarget.runtime_state`` reads the JIT counters
there). PostgreSQL 15 manual F.32: the module must be in ``shared_preload_libraries`` (a start-up setting) and
the extension created in a database to read the view there; CREATE EXTENSION pg_stat_statements needs a
superuser (the extension is not marked trusted), so a least-privilege role is refused unless a DBA created it.
"""

from __future__ import annotations

from typing import Any

import psycopg
import structlog

log = structlog.get_logger(__name__)

EXTENSION = "pg_stat_statements"


def _libraries(db: psycopg.Connection[Any]) -> str:
    row = db.execute("SHOW shared_preload_libraries").fetchone()
    return str(row[0]) if row is not None else ""


def preloaded(libraries: str) -> bool:
    """Whether ``shared_preload_libraries`` (its text) loads pg_stat_statements."""
    return EXTENSION in [s.strip().strip('"') for s in libraries.split(",")]


def _created(db: psycopg.Connection[Any]) -> bool:
    return db.execute("SELECT 1 FROM pg_extension WHERE extname = %s", (EXTENSION,)).fetchone() is not None


def ensure(db: psycopg.Connection[Any]) -> str:
    """``CREATE EXTENSION IF NOT EXISTS pg_stat_statements`` in the database ``db`` (autocommit) is connected
    to, when the server preloads the library.

    Returns:
        "created" (now or earlier), "not preloaded: …" (nothing to create: the server collects no statement
        statistics), or "refused: <server's error>" (e.g. a role that is not a superuser). Never raises a
        psycopg error: a workload runs without the extension, and what is then not measured says why.
    """
    try:
        libraries = _libraries(db)
        if not preloaded(libraries):
            status = f"not preloaded: shared_preload_libraries = '{libraries}'"
        elif _created(db):
            status = "created"
        else:
            db.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            status = "created"
    except psycopg.Error as exc:
        status = f"refused: {error_line(exc)}"
    log.info("pg_stat_statements.ensured", database=db.info.dbname, status=status, reason="statement evidence")
    return status


def error_line(exc: Exception) -> str:
    """The first line of a server error (≤ 200 characters), or the exception's type when it says nothing."""
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


def unreadable(db: psycopg.Connection[Any]) -> str:
    """Why pg_stat_statements cannot be read in the database ``db`` is connected to; "" when it can.

    The reasons name the database and what would make it readable (preload, then CREATE EXTENSION there).
    """
    database = db.info.dbname
    try:
        libraries = _libraries(db)
        if not preloaded(libraries):
            return (
                f"not preloaded (shared_preload_libraries = '{libraries}'): the server collects no statement "
                "statistics until it is added and the server restarted"
            )
        if not _created(db):
            return (
                f"not created in database {database}: CREATE EXTENSION pg_stat_statements there needs a superuser "
                "(or a DBA who created it); agenticdb's role could not"
            )
        with db.transaction():
            db.execute("SELECT 1 FROM pg_stat_statements LIMIT 1").fetchone()
    except psycopg.Error as exc:
        return f"not readable in database {database}: {str(exc).strip()[:200]}"
    return ""
