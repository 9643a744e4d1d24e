"""The session's root-cause step (issue 40): watch the baseline window, then say whether a cause no
setting fixes dominates. When one does, the session proposes no knob for its symptoms, races no whole
configuration, journals a ``root_cause`` event, offers the approved remediation (approve mode with a
remediation DSN) and stops with the one line that names the cause and its evidence.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from agenticdb.config import Settings
from agenticdb.dialect import dsn_location
from agenticdb.rootcause import Finding, RootCauses, Watcher, dominant
from agenticdb.targets.base import Target
from agenticdb.targets.mysql import MySQLTarget
from agenticdb.targets.postgres import PostgresTarget
from agenticdb.workload_kinds import kind_spec

log = structlog.get_logger(__name__)

Remediate = Callable[[str, Finding], dict[str, Any] | None]
"""``(session_id, finding) -> the remediation record`` (journaled by the callee) or None when nothing ran."""


def probe_dsn(cfg: Settings, target: Target) -> str | None:
    """The DSN root causes are read through: the PostgreSQL target's, ``target.dsn`` for MariaDB; None for
    the Linux stage or a target that is no server of ours (tests' in-memory target)."""
    if isinstance(target, PostgresTarget):
        return target.dsn
    if isinstance(target, MySQLTarget):
        return cfg.target.dsn
    return None


def dsn_database(cfg: Settings) -> str | None:
    """The database named in ``target.dsn``; None when it names none (PostgreSQL then connects to the
    database named like the user, MariaDB to no default schema)."""
    return dsn_location(cfg.target.dsn or "")[2] or None


def workload_database(cfg: Settings) -> str | None:
    """The database a tuning session's workload works in: a benchmark's ``target.database`` (created by its
    ``prepare``); an observe-only workload's ``live.database``, else the DSN's (``LiveConfig``)."""
    if kind_spec(cfg.workload.kind).observes_only:
        return cfg.live.database or dsn_database(cfg)
    return cfg.target.database


def watcher_for(cfg: Settings, target: Target, database: str | None) -> Watcher | None:
    """A started root-cause watcher for a PostgreSQL/MariaDB target, or None (disabled, the Linux stage,
    or no DSN: a target built without configuration).

    Args:
        database: the database to probe, chosen by the caller — ``advise`` the one the DBA named in the DSN
            (:func:`dsn_database`), a session its workload's (:func:`workload_database`); None: the DSN's.
    """
    if not cfg.rootcause.enabled:
        return None
    dsn = probe_dsn(cfg, target)
    if not dsn:
        return None
    identity = f"{target.kind}:{database or dsn_database(cfg) or ''}"
    log.info(
        "rootcause.database",
        database=database or "(the DSN's)",
        reason="the database the caller observes: advise the DSN's, a session its workload's",
    )
    return Watcher(target.kind, dsn, database, cfg.rootcause.statements, server=identity).start()


def record(rc: RootCauses) -> dict[str, Any]:
    """The ``root_cause`` journal event's data: the database probed, the dominant finding (or None), all
    findings, ruled-out lines and evidence notes."""
    top = dominant(rc.findings)
    return {
        "database": rc.database,
        "dominant": top.model_dump(mode="json") if top else None,
        "line": top.line() if top else "no root cause beyond the dominance threshold: knobs may help",
        "findings": [f.model_dump(mode="json") for f in rc.findings],
        "ruled_out": [r.model_dump(mode="json") for r in rc.ruled_out],
        "notes": rc.notes,
        "seconds": rc.seconds,
    }


def conclude(
    watcher: Watcher | None, event: Callable[[str, dict[str, Any]], None], status: Callable[[str], object] | None
) -> Finding | None:
    """Finish the watch, journal ``root_cause`` through ``event``, print the line to ``status``; returns the
    dominant finding (None when none or not watched)."""
    if watcher is None:
        return None
    rc = watcher.finish()
    data = record(rc)
    event("root_cause", data)
    top = dominant(rc.findings)
    if top is not None:
        log.warning("session.root_cause", finding=top.id, cause=top.cause.value, reason=top.line())
        if status is not None:
            status(top.line()[:200])
    return top


def stop_reason(top: Finding, remediation: dict[str, Any] | None) -> str:
    """Why the session ends without proposing knobs (the session's end reason)."""
    knobs = ", ".join(top.symptom_knobs[:3])
    done = ""
    if remediation is not None:
        done = f"; remediation {remediation.get('sql')!r}: {remediation.get('result')}"
    elif any(r.automatic for r in top.remedies):
        done = f"; advised: {top.remedies[0].sql} (finding {top.id})"
    else:
        done = f"; advised only (destructive or blocking): {top.remedies[0].sql}" if top.remedies else ""
    return f"{top.line()} — no knob proposed for its symptoms ({knobs}, …) and no configuration raced{done}"
