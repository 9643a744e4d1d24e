"""Did the world change under a measured run? Resets, restarts and reloads agenticdb did not make (issue 38).

A mark is read from the server before and after each measured run (``Target.world_mark``); during the run
agenticdb changes nothing, so any difference is someone else's doing, and the run is disturbed: repeated
within the caps, never judged, journaled with what was seen (``Disturbance.world``).

PostgreSQL marks (manual 9.27.2 "Session Information Functions", 28.2 "The Cumulative Statistics System",
F.32 "pg_stat_statements"):

- ``pg_postmaster_start_time()``: a restart;
- ``pg_conf_load_time()``: a configuration reload (``pg_reload_conf``, SIGHUP);
- ``pg_stat_database.stats_reset`` of the database: ``pg_stat_reset()``;
- ``pg_stat_statements_info.stats_reset`` (PostgreSQL 14+): ``pg_stat_statements_reset()`` of everything;
  ``dealloc`` counts evictions (not a reset) and the sum of ``calls`` going down with ``dealloc`` unchanged is
  a reset of some statements (``pg_stat_statements_reset(userid, dbid, queryid)`` leaves ``stats_reset``).

MariaDB marks (MariaDB KB "Server Status Variables", "Performance Schema"):

- server start = now − ``Uptime`` (a restart moves it by more than :data:`CLOCK_SLACK_S`);
- ``FLUSH STATUS`` = now − ``Uptime_since_flush_status``;
- the sum of ``COUNT_STAR`` of ``events_statements_summary_by_digest`` going down: the table was truncated
  (``TRUNCATE TABLE``, ``performance_schema`` counts only grow otherwise).

An outside restart (:func:`outside_restart`) is called so only on evidence: the connection ended with
SQLSTATE 57P01 (admin shutdown) or MariaDB ER_SERVER_SHUTDOWN 1053 / a lost connection, the server log
written during the run shows a requested shutdown (PostgreSQL "received fast/smart shutdown request",
MariaDB "Normal shutdown"), and the server's cgroup saw no OOM kill (``memory.events`` ``oom_kill``,
kernel Documentation/admin-guide/cgroup-v2.rst). An OOM kill is the candidate's failure, whatever else.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import structlog

log = structlog.get_logger(__name__)

CLOCK_SLACK_S = 2.0
"""Seconds two readings of "now − uptime" may differ without a restart (uptime is whole seconds and the
two reads are not atomic: judgement, 1 s rounding each side)."""

_NUMERIC_START = ("server_started_s", "status_flushed_s")
GLOBAL = "global."
"""Prefix of the server's global settings in a mark (pg_settings; MariaDB GLOBAL_VARIABLES without the
GTID positions, which move with every write when the binary log is on): the rival-owner check of every run,
since agenticdb changes nothing while a run is measured."""

_PG_MARK = (
    "SELECT pg_postmaster_start_time()::text, pg_conf_load_time()::text, "
    "coalesce((SELECT stats_reset::text FROM pg_stat_database WHERE datname = current_database()), '')"
)
_PG_STATEMENTS = "SELECT coalesce(stats_reset::text, ''), dealloc::text FROM pg_stat_statements_info"
_PG_CALLS = "SELECT coalesce(sum(calls), 0)::text FROM pg_stat_statements"


def pg_mark(conn: Any) -> dict[str, str]:
    """The PostgreSQL mark over a psycopg connection (autocommit); statement keys only when
    pg_stat_statements is created in the connected database."""
    row = conn.execute(_PG_MARK).fetchone()
    mark = {"server_started": str(row[0]), "config_loaded": str(row[1]), "database_stats_reset": str(row[2])}
    if conn.execute("SELECT to_regclass('pg_stat_statements_info') IS NOT NULL").fetchone()[0]:
        reset, dealloc = conn.execute(_PG_STATEMENTS).fetchone()
        mark |= {"statements_reset": str(reset), "statements_dealloc": str(dealloc)}
        mark["statements_calls"] = str(conn.execute(_PG_CALLS).fetchone()[0])
    for name, setting in conn.execute("SELECT name, setting FROM pg_settings WHERE source <> 'session'"):
        mark[f"{GLOBAL}{name}"] = str(setting)
    return mark


def my_mark(cur: Any) -> dict[str, str]:
    """The MariaDB/MySQL mark over a PyMySQL cursor."""
    cur.execute(
        "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
        "WHERE VARIABLE_NAME IN ('UPTIME', 'UPTIME_SINCE_FLUSH_STATUS')"
    )
    status = {str(k).upper(): float(v) for k, v in cur.fetchall()}
    now = time.time()
    mark = {"server_started_s": f"{now - status.get('UPTIME', 0.0):.0f}"}
    if "UPTIME_SINCE_FLUSH_STATUS" in status:
        mark["status_flushed_s"] = f"{now - status['UPTIME_SINCE_FLUSH_STATUS']:.0f}"
    cur.execute(
        "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES "
        "WHERE VARIABLE_NAME NOT LIKE 'GTID\\_%'"
    )
    for name, value in cur.fetchall():
        mark[f"{GLOBAL}{str(name).lower()}"] = str(value)
    try:
        cur.execute("SELECT coalesce(sum(COUNT_STAR), 0) FROM performance_schema.events_statements_summary_by_digest")
        mark["digest_calls"] = str(int(cur.fetchone()[0]))
    except Exception:  # noqa: BLE001 - performance_schema off: no digest mark (the other marks still count)
        pass
    return mark


_SAID = {
    "server_started": "the server restarted (pg_postmaster_start_time {a} → {b})",
    "server_started_s": "the server restarted (start time from Uptime moved from {a} to {b}, epoch s)",
    "config_loaded": "the configuration was reloaded by someone else (pg_conf_load_time {a} → {b})",
    "database_stats_reset": "the database statistics were reset (pg_stat_database.stats_reset {a} → {b})",
    "statements_reset": "the statement statistics were reset (pg_stat_statements_info.stats_reset {a} → {b})",
    "status_flushed_s": "the status counters were flushed (FLUSH STATUS: Uptime_since_flush_status restarted)",
}


def world_changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """What changed between two marks, one sentence each (empty: nothing). Keys missing on either side
    are not compared (a mark that could not be read is no evidence)."""
    out = []
    for key, said in _SAID.items():
        if key not in before or key not in after:
            continue
        a, b = before[key], after[key]
        moved = abs(float(a) - float(b)) > CLOCK_SLACK_S if key in _NUMERIC_START else a != b
        if moved:
            out.append(said.format(a=a or "never", b=b or "never"))
    if _went_down(before, after, "statements_calls") and before.get("statements_dealloc") == after.get(
        "statements_dealloc"
    ):
        if not any("statement statistics" in s for s in out):
            out.append(
                f"statement statistics went down (pg_stat_statements calls {before['statements_calls']} → "
                f"{after['statements_calls']}, no eviction): some statements were reset"
            )
    changed = sorted(k[len(GLOBAL) :] for k in before if k.startswith(GLOBAL) and k in after and before[k] != after[k])
    if changed and not any(s.startswith("the server restarted") for s in out):
        shown = ", ".join(f"{n} {before[GLOBAL + n]} → {after[GLOBAL + n]}" for n in changed[:5])
        more = f" and {len(changed) - 5} more" if len(changed) > 5 else ""
        out.append(f"settings changed by someone else during the run: {shown}{more}")
    if _went_down(before, after, "digest_calls"):
        out.append(
            f"performance_schema statement digests were truncated (COUNT_STAR sum {before['digest_calls']} → "
            f"{after['digest_calls']})"
        )
    return out


def _went_down(before: dict[str, str], after: dict[str, str], key: str) -> bool:
    try:
        return key in before and key in after and float(after[key]) < float(before[key])
    except ValueError:
        return False


# ------------------------------------------------------------------------------------------------ restarts

ADMIN_SHUTDOWN_TEXT = (
    "terminating connection due to administrator command",
    "57P01",
    "AdminShutdown",
    "Server shutdown in progress",
    "(1053,",
    "(2013,",  # lost connection: needs the log's normal shutdown too (below)
    "(2006,",
    "Lost connection to MySQL server",
    "Lost connection to server",
)
REQUESTED_SHUTDOWN = re.compile(
    r"received (fast|smart) shutdown request|\bNormal shutdown\b|\bshutdown requested\b", re.IGNORECASE
)
CRASH = re.compile(r"terminated by signal|\bOOM\b|out of memory|mysqld got signal|mariadbd got signal", re.I)


def oom_kills(events: Path | None) -> int | None:
    """``oom_kill`` of a memory cgroup's ``memory.events`` (v2) or ``memory.oom_control`` (v1): processes in it
    killed by an OOM killer; None when unreadable (``agenticdb.host.hardware.memory_events_file`` finds it)."""
    if events is None:
        return None
    try:
        for line in events.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        return None
    return None


def outside_restart(
    error_text: str, log_since_start: list[str], oom_before: int | None, oom_after: int | None
) -> tuple[bool, str]:
    """Was a failed run ended by someone else's requested restart? ``(outside, evidence or why not)``.

    Args:
        error_text: the workload error and its tool output.
        log_since_start: the server log lines written since the run began.
        oom_before, oom_after: ``oom_kill`` of the server's cgroup before the run and now (None: unknown).
    """
    if oom_before is not None and oom_after is not None and oom_after > oom_before:
        return False, f"an OOM kill in the server's cgroup (memory.events oom_kill {oom_before} → {oom_after})"
    cut = next((t for t in ADMIN_SHUTDOWN_TEXT if t in error_text), "")
    if not cut:
        return False, "the connection did not end with an administrator shutdown (57P01 / 1053 / lost connection)"
    requested = next((ln.strip() for ln in log_since_start if REQUESTED_SHUTDOWN.search(ln)), "")
    if not requested:
        return False, "the server log written during the run shows no requested (fast/smart/normal) shutdown"
    crash = next((ln.strip() for ln in log_since_start if CRASH.search(ln)), "")
    if crash:
        return False, f"the server log shows a crash: {crash}"
    oom = "no OOM kill in its cgroup" if oom_after is not None else "its cgroup's OOM count unreadable"
    return True, f"connection ended ({cut}); server log: {requested}; {oom}"


def lines_after(anchor: list[str], tail: list[str]) -> list[str]:
    """The lines of ``tail`` written after ``anchor`` (the log's last lines before the run); all of
    ``tail`` when the anchor is not found (rotated or truncated log)."""
    n = len(anchor)
    if not n:
        return tail
    for i in range(len(tail) - 1, -1, -1):
        k = min(n, i + 1)
        if tail[i - k + 1 : i + 1] == anchor[n - k :]:
            return tail[i + 1 :]
    return tail
