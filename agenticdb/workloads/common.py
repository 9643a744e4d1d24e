"""Shared helpers for the workload modules: running a benchmark tool with a progress bar, the
objective, latency percentiles, and SQL connections (admin and benchmark database) for both DBMS
families.

Data loads (``prepare``) show a rich bar on a terminal; with stdout piped or under systemd they log
plain ``workload.load_progress`` lines instead (``LoadProgressLog``). Measured runs log none: the
session's table reports them.

The objective rule (docs/measurement.md, AgenticDB paper): OLTP runs are compared on TPS divided by p95 latency
in ms (higher is better); OLAP runs on the total execution time in seconds (lower is better).
``WorkloadConfig.objective`` overrides the default: ``"tps"`` (higher is better), ``"p95"`` and
``"p99"`` (ms, lower is better), ``"total_time"`` (s, lower is better). ``percentile`` (nearest rank)
lives in ``agenticdb.measure.series`` and is re-exported here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any, Literal

import psycopg
import pymysql
import structlog
from psycopg import sql
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

from agenticdb.host import pgss
from agenticdb.measure.series import percentile as percentile  # re-exported for callers of the old home
from agenticdb.units.text import clip
from agenticdb.workloads.base import Connection, RunStopped, WorkloadError

log = structlog.get_logger(__name__)

TAIL_BYTES = 2048


def tail(text: str, limit: int = TAIL_BYTES) -> str:
    """The last ``limit`` characters of ``text`` (tool output kept in ``Measurement.raw_tail``)."""
    return text[-limit:]


def progress_enabled(progress: bool | None) -> bool:
    """``progress`` if given, else True only when stdout is a terminal (the session's live table
    owns the terminal otherwise)."""
    if progress is not None:
        return progress
    return sys.stdout.isatty()


LoadUnit = Literal["bytes", "percent", "seconds"]
"""What a load's ``completed`` counts: bytes, percent done, or seconds against an estimated time."""


class LoadProgressLog:
    """Plain progress of a data load for pipes and journald, called as ``update(completed, text=None)``.

    One ``workload.load_progress`` line each time ``completed`` passes another ``STEP_PERCENT`` of a known
    ``total`` (a jump over several steps gives one line); with no total, or when ``completed`` is only
    time against an estimate (``unit="seconds"``), at most one line every ``EVERY_S`` seconds. Each line
    names what is loading (``text`` renames it, e.g. per table), the percent and bytes done where known,
    and the seconds elapsed.
    """

    STEP_PERCENT = 10.0
    EVERY_S = 30.0

    def __init__(
        self, what: str, total: float | None, unit: LoadUnit, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.what = what
        self.unit = unit
        # A time estimate is no measure of the work done: report elapsed time only, against it.
        self.total = total if total and unit != "seconds" else None
        self.estimate_s = total if unit == "seconds" else None
        self.clock = clock
        self.started = clock()
        self.steps_logged = 0
        self.last_logged = self.started

    def __call__(self, completed: float, text: str | None = None) -> None:
        if text is not None:
            self.what = text
        now = self.clock()
        fields: dict[str, Any] = {}
        if self.total is not None:
            percent = 100.0 * min(completed, self.total) / self.total
            steps = int(percent // self.STEP_PERCENT)
            if steps <= self.steps_logged:
                return
            self.steps_logged = steps
            fields["percent"] = round(percent, 1)
            if self.unit == "bytes":
                fields.update(bytes=int(completed), total_bytes=int(self.total))
        elif now - self.last_logged >= self.EVERY_S:
            if self.estimate_s:
                fields["estimate_s"] = round(self.estimate_s)
        else:
            return
        self.last_logged = now
        log.info("workload.load_progress", what=self.what, elapsed_s=round(now - self.started, 1), **fields)


@contextmanager
def progress_bar(
    enabled: bool, description: str, total: float | None, *, load_unit: LoadUnit | None = None
) -> Iterator[Any]:
    """A rich progress bar (or a no-op stand-in when disabled) yielding ``update(completed, text=None)``.

    ``total`` None gives an indeterminate (pulsing) bar. ``load_unit`` marks a data load counted in that
    unit: with the bar disabled it logs plain progress lines (``LoadProgressLog``) instead of nothing.
    Measured runs leave it None; the session's table reports them.
    """
    if not enabled:
        yield LoadProgressLog(description, total, load_unit) if load_unit else lambda completed, text=None: None
        return
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        transient=True,
    ) as prog:
        task = prog.add_task(description, total=total)

        def update(completed: float, text: str | None = None) -> None:
            if text is None:
                prog.update(task, completed=completed)
            else:
                prog.update(task, completed=completed, description=text)

        yield update


@dataclass
class ToolResult:
    """Exit status and combined stdout+stderr of one tool invocation; ``seconds`` wall time."""

    argv: list[str]
    returncode: int
    output: str
    seconds: float
    stopped: str = ""
    """Why ``watch`` stopped the tool early ('' when it ran to its end)."""


def _read_all(fd: int) -> str:
    """The whole temp file without moving the offset the tool writes at (``os.pread``)."""
    size = os.fstat(fd).st_size
    return os.pread(fd, size, 0).decode(errors="replace")


def _watched(watch: Callable[[str], str] | None, fd: int, elapsed: float, checked: list[float]) -> str:
    """``watch``'s reason to stop, asked at most once a second (``checked`` holds the last time)."""
    if watch is None or elapsed - checked[0] < 1.0:
        return ""
    checked[0] = elapsed
    return watch(_read_all(fd))


def _show_progress(
    update: Callable[[float], object],
    fd: int,
    elapsed: float,
    expected_s: float | None,
    progress_of: Callable[[str], float | None] | None,
) -> None:
    """Move the bar: to the percentage ``progress_of`` reads from the output so far, else to the seconds
    elapsed (capped at ``expected_s``)."""
    if progress_of is not None:
        # pread: the tool shares this file's offset, so the parent must not seek it
        done = progress_of(_read_all(fd))
        if done is not None:
            update(done)
    else:
        update(min(elapsed, expected_s) if expected_s else elapsed)


def _started(
    argv: Sequence[str], out: IO[bytes], env: dict[str, str] | None, cwd: str | None
) -> subprocess.Popen[bytes]:
    """``argv`` started with stdout and stderr into ``out`` and ``env`` merged over ``os.environ``, in a
    session and process group of its own (setsid(2)): the SIGINT a terminal sends its whole foreground
    process group on Ctrl-C (termios(3), ISIG) then reaches agenticdb alone, whose handler lets the run
    end and stops after it; the tool is never killed under a run by the keyboard. agenticdb ends the
    tool's group itself (``_killed``) whenever it stops waiting for it.

    Raises:
        WorkloadError: the executable is missing.
    """
    full_env = dict(os.environ)
    full_env.update(env or {})
    try:
        return subprocess.Popen(
            list(argv), stdout=out, stderr=subprocess.STDOUT, env=full_env, cwd=cwd, start_new_session=True
        )
    except FileNotFoundError as exc:
        raise WorkloadError(f"benchmark tool not found: {argv[0]} ({exc})") from None


def _killed(proc: subprocess.Popen[bytes], fd: int) -> str:
    """Kill the tool's process group (the tool and whatever it started: a ``workload.command`` shell's
    children), reap the tool, and return its whole output."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the group's id is the tool's pid (start_new_session)
    except ProcessLookupError:
        pass  # the group is gone: the tool ended and left no process behind
    proc.wait()
    return _read_all(fd)


def outside_signal(result: ToolResult) -> int | None:
    """The signal number that ended the tool when agenticdb did not send it (``Popen.returncode`` is
    -N for a child killed by signal N, Python subprocess docs), else None: the tool exited by itself, or
    ``watch`` stopped it (``ToolResult.stopped``)."""
    return -result.returncode if result.returncode < 0 and not result.stopped else None


@contextmanager
def _reaped(proc: subprocess.Popen[bytes], fd: int) -> Iterator[None]:
    """Kill the tool's group when the wait for it ends by an exception (a second Ctrl-C's
    KeyboardInterrupt, SIGTERM's ``Stopped``): in a session of its own it would outlive agenticdb."""
    try:
        yield
    except BaseException:
        if proc.returncode is None:  # not reaped yet (the timeout's kill reaped it already)
            _killed(proc, fd)
        raise


def run_tool(
    argv: Sequence[str],
    *,
    timeout_s: float,
    env: dict[str, str] | None = None,
    description: str = "",
    expected_s: float | None = None,
    progress: bool = False,
    cwd: str | None = None,
    on_start: Callable[[int], object] | None = None,
    watch: Callable[[str], str] | None = None,
    progress_of: Callable[[str], float | None] | None = None,
    load: bool = False,
    stop: Callable[[], bool] | None = None,
) -> ToolResult:
    """Run ``argv`` (no shell), capture stdout+stderr to a temp file, show a time-based progress bar.

    Args:
        argv: the command line.
        timeout_s: seconds before the tool is killed.
        env: extra environment variables (merged over ``os.environ``).
        description: progress-bar label.
        expected_s: expected run time in seconds (progress total); None = indeterminate.
        progress: show the bar.
        cwd: working directory.
        on_start: called with the tool's process id right after it started (the executor's disturbance
            sampler counts the tool's CPU as ours, not as outside load).
        watch: called about once a second with the output so far; a non-empty reason kills the tool and
            the result comes back with ``stopped`` set (``agenticdb.measure.trial_limit``: a far worse trial).
        progress_of: reads the output so far and returns the percentage done (rows loaded, e.g. from
            ``pgbench -i``'s "N of M tuples" lines), or None when it cannot tell; the bar then counts
            percent instead of time.
        load: this is a data load (``prepare``): with the bar off, log plain progress lines
            (``LoadProgressLog``: percent from ``progress_of``, else seconds elapsed).
        stop: asked every 0.25 s; True kills the tool's group and raises :class:`RunStopped`
            (``Workload.stop``: the session's stop request during a race screen).

    Raises:
        WorkloadError: the executable is missing, or the timeout passed (output attached).
        RunStopped: ``stop`` returned True (output attached).
    """
    started = time.monotonic()
    checked: list[float] = [0.0]
    with tempfile.TemporaryFile(mode="w+b") as out:
        proc = _started(argv, out, env, cwd)
        if on_start is not None:
            on_start(proc.pid)
        total = 100.0 if progress_of is not None else expected_s
        unit: LoadUnit | None = ("percent" if progress_of is not None else "seconds") if load else None
        with (
            _reaped(proc, out.fileno()),
            progress_bar(progress, description or os.path.basename(argv[0]), total, load_unit=unit) as update,
        ):
            while True:
                try:
                    proc.wait(timeout=0.25)
                    break
                except subprocess.TimeoutExpired:
                    elapsed = time.monotonic() - started
                    if stop is not None and stop():
                        text = _killed(proc, out.fileno())
                        log.info("workload.stopped", tool=argv[0], reason="stop requested", seconds=round(elapsed, 1))
                        raise RunStopped(f"{argv[0]} ended by agenticdb after {elapsed:.1f} s", tail(text)) from None
                    _show_progress(update, out.fileno(), elapsed, expected_s, progress_of if progress or load else None)
                    stopped = _watched(watch, out.fileno(), elapsed, checked)
                    if stopped:
                        text = _killed(proc, out.fileno())
                        log.info("workload.stopped_early", tool=argv[0], reason=stopped, seconds=round(elapsed, 1))
                        return ToolResult(list(argv), proc.returncode, text, elapsed, stopped)
                    if elapsed > timeout_s:
                        text = _killed(proc, out.fileno())
                        raise WorkloadError(
                            f"{argv[0]} did not finish within timeout_s={timeout_s:g} s", tail(text)
                        ) from None
        text = _read_all(out.fileno())
    seconds = time.monotonic() - started
    log.debug("workload.tool_exit", tool=argv[0], rc=proc.returncode, seconds=round(seconds, 2))
    return ToolResult(list(argv), proc.returncode, text, seconds)


def objective(
    name: str,
    *,
    tps: float | None = None,
    p95_ms: float | None = None,
    total_time_s: float | None = None,
    p99_ms: float | None = None,
) -> tuple[float, bool]:
    """Value of objective ``name`` and whether higher is better.

    ``tps_per_p95`` = tps / p95_ms (higher better), ``tps`` (higher better), ``p95`` and ``p99`` in ms
    (lower better), ``total_time`` in s (lower better).

    Raises:
        WorkloadError: the metric the objective needs was not measured, or p95 is not positive.
    """
    if name == "tps_per_p95":
        if tps is None or p95_ms is None or p95_ms <= 0:
            raise WorkloadError(f"objective tps_per_p95 needs tps and a positive p95 (tps={tps}, p95={p95_ms})")
        return tps / p95_ms, True
    if name == "tps":
        if tps is None:
            raise WorkloadError("objective 'tps' needs a throughput; the workload reported none")
        return tps, True
    if name == "p95":
        if p95_ms is None:
            raise WorkloadError("objective 'p95' needs a p95 latency; the workload reported none")
        return p95_ms, False
    if name == "p99":
        if p99_ms is None:
            raise WorkloadError("objective 'p99' needs a p99 latency; the workload reported none")
        return p99_ms, False
    if name == "total_time":
        if total_time_s is None:
            raise WorkloadError("objective 'total_time' needs a total time; the workload reported none")
        return total_time_s, False
    raise WorkloadError(f"objective={name!r}: expected one of tps_per_p95, tps, p95, p99, total_time")


def check_error_rate(errors: int, done: int, max_error_rate: float, what: str, output: str) -> None:
    """Raise when ``errors / (done + errors)`` exceeds ``max_error_rate`` or nothing was done.

    Raises:
        WorkloadError: with the tool output tail.
    """
    if done <= 0:
        raise WorkloadError(f"{what}: no transaction completed ({errors} errors)", tail(output))
    rate = errors / (done + errors)
    if rate > max_error_rate:
        raise WorkloadError(
            f"{what}: error rate {rate:.1%} ({errors} errors, {done} transactions) exceeds "
            f"workload.max_error_rate={max_error_rate:g}",
            tail(output),
        )


# --------------------------------------------------------------------------- SQL connections


def is_postgres(conn: Connection) -> bool:
    return conn.kind == "postgresql"


def pg_params(conn: Connection, database: str | None) -> dict[str, Any]:
    """libpq keyword arguments for ``conn`` (socket or host, port, user, password, ``database``, extras;
    connect_timeout 10 s)."""
    params: dict[str, Any] = {
        "host": conn.socket or conn.host,
        "port": conn.port,
        "user": conn.user,
        "connect_timeout": 10,
    }
    if conn.password:
        params["password"] = conn.password
    if database:
        params["dbname"] = database
    params.update({k: v for k, v in conn.extra.items() if k not in params})
    return params


def my_params(conn: Connection, database: str | None) -> dict[str, Any]:
    """PyMySQL keyword arguments for ``conn`` (socket or host/port, autocommit, LOAD DATA LOCAL for the
    benchmark loaders, connect_timeout 10 s)."""
    params: dict[str, Any] = {
        "user": conn.user,
        "password": conn.password,
        "connect_timeout": 10,
        "autocommit": True,
        "local_infile": True,
    }
    if conn.socket:
        params["unix_socket"] = conn.socket
    else:
        params["host"] = conn.host
        params["port"] = conn.port
    if database:
        params["database"] = database
    return params


def connect(conn: Connection, admin: bool = False) -> Any:
    """A DB-API connection in autocommit mode: to ``conn.database``, or the server's default
    database when ``admin`` (PostgreSQL: the admin DSN's database, MySQL: none).

    Raises:
        WorkloadError: the server refused the connection (message names host/port/database).
    """
    try:
        if is_postgres(conn):
            if admin and conn.admin_dsn:
                return psycopg.connect(conn.admin_dsn, autocommit=True, connect_timeout=10)
            return psycopg.connect(**pg_params(conn, None if admin else conn.database), autocommit=True)
        return pymysql.connect(**my_params(conn, None if admin else conn.database))
    except (psycopg.Error, pymysql.MySQLError) as exc:
        where = conn.socket or f"{conn.host}:{conn.port}"
        db = "(admin)" if admin else conn.database
        raise WorkloadError(f"cannot connect to {conn.kind} at {where} database {db}: {exc}") from None


def ensure_database(conn: Connection) -> bool:
    """Create ``conn.database`` through the admin connection when it does not exist.

    Returns:
        True when the database was created.

    Raises:
        WorkloadError: connection or CREATE DATABASE failed.
    """
    with connect(conn, admin=True) as db:
        cur = db.cursor()
        try:
            if is_postgres(conn):
                cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (conn.database,))
                if cur.fetchone():
                    ensure_pg_stat_statements(conn)
                    return False
                cur.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(conn.database)))
            else:
                cur.execute("SELECT 1 FROM information_schema.schemata WHERE schema_name = %s", (conn.database,))
                if cur.fetchone():
                    return False
                cur.execute(f"CREATE DATABASE `{conn.database.replace('`', '``')}`")
        except (psycopg.Error, pymysql.MySQLError) as exc:
            raise WorkloadError(f"cannot create database {conn.database!r}: {exc}") from None
    log.info("workload.database_created", database=conn.database, kind=conn.kind)
    if is_postgres(conn):
        ensure_pg_stat_statements(conn)
    return True


def ensure_pg_stat_statements(conn: Connection) -> str:
    """pg_stat_statements in the workload's own PostgreSQL database, created as the workload's role when the
    server preloads it and the role may (``agenticdb.host.pgss.ensure``, the one place that does it), so the
    statistics of the statements it runs (JIT time, per-statement times) are read where it runs.

    Returns:
        ``pgss.ensure``'s status ("created", "not preloaded: …", "refused: …"), or "refused: <error>" when the
        database cannot be reached — never raises: a workload runs without it, and what is then not measured
        says why (``pgss.unreadable``).
    """
    try:
        with connect(conn) as db:
            status = pgss.ensure(db)
    except WorkloadError as exc:
        status = f"refused: {clip(exc, 200)}"
    log.info("workload.pg_stat_statements", database=conn.database, status=status, reason="statement evidence")
    return status


def existing_tables(conn: Connection, names: Sequence[str]) -> set[str]:
    """Which of ``names`` exist as tables in ``conn.database`` (public schema for PostgreSQL)."""
    with connect(conn) as db:
        cur = db.cursor()
        if is_postgres(conn):
            cur.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
                "AND table_name = ANY(%s)",
                (list(names),),
            )
        else:
            marks = ",".join(["%s"] * len(names))
            cur.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() "
                f"AND table_name IN ({marks})",
                tuple(names),
            )
        return {str(r[0]) for r in cur.fetchall()}


def scalar(conn: Connection, query: str) -> Any:
    """First column of the first row of ``query`` run in ``conn.database`` (None for no row)."""
    with connect(conn) as db:
        cur = db.cursor()
        cur.execute(query)
        row = cur.fetchone()
        return row[0] if row else None
