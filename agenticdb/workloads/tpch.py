"""TPC-H: data from the ``tpchgen-cli`` wheel at scale factor ``workload.scale``, loaded with COPY
(PostgreSQL) or LOAD DATA LOCAL INFILE (MySQL/MariaDB); the 22 queries from
``benchmarks/tpch/<dialect>/qNN.sql`` with fixed validation parameters (see the README there).

prepare: creates ``benchmarks/tpch/schema.sql``, loads the 8 tables, creates
``benchmarks/tpch/indexes.sql``, runs ANALYZE and records the scale factor and row counts in
``agenticdb_tpch_meta``. A later prepare finds that table, the same scale factor and the same row
counts and returns; anything else (partial load, other scale) is dropped and loaded again.

run: every query once in order with a per-query statement timeout (``workload.query_timeout_s``;
PostgreSQL ``statement_timeout``, MariaDB ``max_statement_time``, MySQL ``max_execution_time``).
Timeout policy: a timed-out query counts as one error and adds the full timeout to ``total_time_s``
(a penalty, so a configuration cannot look faster by timing out); the run still returns a measurement
unless the timed-out fraction of the 22 queries exceeds ``workload.max_error_rate``, which raises
``WorkloadError``. Any other SQL error (e.g. a missing table) raises ``WorkloadError`` at once.

Trial limits (``agenticdb.measure.trial_limit``): the query set stops once it has run ``time_factor`` × the best
configuration's time; in the race form each query also runs under the statement timeout
``TrialLimit.query_bound`` gives (k × the best's time of the query, at least 1 s, and no more than the
total time left). A query stopped by that bound ends the run as a ``cut_off`` measurement (a screen
result), never a ``WorkloadError`` and never a timeout penalty. ``Workload.stop`` (a race screen's run when
the session's stop is requested) is asked before each query: the query set ends there (``RunStopped``).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pymysql
import structlog
from psycopg import sql

from agenticdb.config.sections import WorkloadConfig
from agenticdb.measure.series import percentile
from agenticdb.models import Measurement
from agenticdb.resources import data_dir
from agenticdb.workload_kinds import announce_load
from agenticdb.workloads.base import Connection, RunStopped, Workload, WorkloadError, WorkloadTraits
from agenticdb.workloads.common import (
    connect,
    ensure_database,
    existing_tables,
    is_postgres,
    objective,
    outside_signal,
    progress_bar,
    progress_enabled,
    run_tool,
    tail,
)

log = structlog.get_logger(__name__)

TABLES = ("region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem")
META = "agenticdb_tpch_meta"
QUERIES = tuple(f"q{n:02d}" for n in range(1, 23))
# MariaDB ER_STATEMENT_TIMEOUT (1969), MySQL ER_QUERY_TIMEOUT (3024): statement time limit reached.
_MYSQL_TIMEOUT_ERRNOS = {1969, 3024}


def _statements(text: str) -> list[str]:
    """Split a SQL file on ``;`` at line ends, dropping comment-only chunks."""
    out = []
    for chunk in text.split(";\n"):
        body = "\n".join(line for line in chunk.splitlines() if not line.strip().startswith("--")).strip()
        if body:
            out.append(body.rstrip(";"))
    return out


def tpchgen_path() -> str:
    """The ``tpchgen-cli`` executable: on PATH or next to the running Python (virtualenv bin).

    Raises:
        WorkloadError: not installed (``pip install agenticdb[tpch]``).
    """
    found = shutil.which("tpchgen-cli") or shutil.which("tpchgen-cli", path=str(Path(sys.executable).parent))
    if not found:
        raise WorkloadError("tpchgen-cli not found: install the TPC-H extra (pip install 'agenticdb[tpch]')")
    return found


class TpchWorkload(Workload):
    """The 22 TPC-H queries at scale factor ``workload.scale`` (e.g. 0.01 = 10 MB, 1 = 1 GB)."""

    name = "tpch"
    warmup_is_pass = True

    def __init__(self, cfg: WorkloadConfig, conn: Connection, progress: bool | None = None) -> None:
        if cfg.scale <= 0:
            raise WorkloadError(f"workload.scale={cfg.scale:g}: the TPC-H scale factor must be > 0")
        if cfg.query_timeout_s <= 0:
            raise WorkloadError(f"workload.query_timeout_s={cfg.query_timeout_s:g}: must be > 0")
        self.cfg = cfg
        self.conn = conn
        self.scale = float(cfg.scale)
        self.progress = progress_enabled(progress)
        self.dialect = "postgresql" if is_postgres(conn) else "mysql"
        self.query_dir = data_dir("benchmarks") / "tpch" / self.dialect
        self.last_rows: dict[str, int] = {}
        self.last_timeouts: list[str] = []
        self._mariadb: bool | None = None

    def traits(self) -> WorkloadTraits:
        # Every TPC-H query is read-only; the power test runs one stream.
        return WorkloadTraits(
            benchmark="tpch",
            workload_class="olap",
            read_fraction=1.0,
            access_pattern="scan",
            scale=self.scale,
            concurrency=1,
            objective=self.cfg.objective or "total_time",
        )

    def queries(self) -> dict[str, str]:
        """Query name (``q01``…``q22``) → SQL text for this connection's dialect.

        Raises:
            WorkloadError: a query file is missing from the shipped data.
        """
        out = {}
        for q in QUERIES:
            path = self.query_dir / f"{q}.sql"
            if not path.exists():
                raise WorkloadError(f"TPC-H query file missing: {path}")
            out[q] = _statements(path.read_text())[0]
        return out

    # ------------------------------------------------------------------ prepare
    def loaded_counts(self) -> dict[str, int] | None:
        """Row counts per table when a complete load at this scale factor is present, else None."""
        if existing_tables(self.conn, [*TABLES, META]) != {*TABLES, META}:
            return None
        with connect(self.conn) as db:
            cur = db.cursor()
            cur.execute(f"SELECT table_name, row_count, scale_factor FROM {META}")
            recorded = {str(t): (int(n), float(sf)) for t, n, sf in cur.fetchall()}
            if set(recorded) != set(TABLES) or any(abs(sf - self.scale) > 1e-9 for _, sf in recorded.values()):
                return None
            counts = {}
            for t in TABLES:
                cur.execute(f"SELECT count(*) FROM {t}")
                counts[t] = int(cur.fetchone()[0])
        if any(counts[t] != recorded[t][0] for t in TABLES):
            return None
        return counts

    def prepare(self) -> None:
        """Create the database and load TPC-H at ``workload.scale`` unless already loaded.

        Raises:
            WorkloadError: tpchgen-cli or loading failed (message names the table).
        """
        ensure_database(self.conn)
        if (counts := self.loaded_counts()) is not None:
            log.info(
                "workload.prepare_skipped",
                workload=self.name,
                reason="tables loaded at this scale",
                scale=self.scale,
                lineitem=counts["lineitem"],
            )
            return
        log.info("workload.prepare", workload=self.name, scale=self.scale)
        est = announce_load("tpch", self.scale)
        with tempfile.TemporaryDirectory(prefix="agenticdb-tpch-") as tmp:
            gen = run_tool(
                [tpchgen_path(), "csv", "-s", f"{self.scale:g}", "-o", tmp],
                timeout_s=self.cfg.timeout_s,
                description=f"tpchgen SF {self.scale:g}",
                expected_s=est.seconds / 10 if est else None,  # generating is ~1/10 of the load
                progress=self.progress,
                load=True,
            )
            if gen.returncode != 0:
                raise WorkloadError(
                    f"tpchgen-cli -s {self.scale:g} failed (exit {gen.returncode})",
                    tail(gen.output),
                    outside_signal(gen),
                )
            files = {t: Path(tmp) / f"{t}.csv" for t in TABLES}
            missing = [str(p) for p in files.values() if not p.exists()]
            if missing:
                raise WorkloadError(f"tpchgen-cli did not write {missing}", tail(gen.output))
            self._load(files)

    def _load(self, files: dict[str, Path]) -> None:
        schema = _statements((data_dir("benchmarks") / "tpch" / "schema.sql").read_text())
        indexes = _statements((data_dir("benchmarks") / "tpch" / "indexes.sql").read_text())
        total = sum(p.stat().st_size for p in files.values())
        with connect(self.conn) as db:
            cur = db.cursor()
            try:
                for t in (META, *reversed(TABLES)):
                    cur.execute(f"DROP TABLE IF EXISTS {t}")
                for stmt in schema:
                    cur.execute(stmt)
                done = 0
                with progress_bar(self.progress, "TPC-H load", total, load_unit="bytes") as update:
                    for t in TABLES:
                        update(done, f"TPC-H load {t}")
                        if is_postgres(self.conn):
                            done = self._copy_pg(cur, t, files[t], done, update)
                        else:
                            self._load_mysql(cur, t, files[t])
                            done += files[t].stat().st_size
                        update(done)
                for stmt in indexes:
                    cur.execute(stmt)
                if is_postgres(self.conn):
                    cur.execute("ANALYZE")
                else:
                    cur.execute("ANALYZE TABLE " + ", ".join(TABLES))
                    cur.fetchall()
                cur.execute(
                    f"CREATE TABLE {META} (table_name VARCHAR(32) NOT NULL PRIMARY KEY, "
                    "row_count BIGINT NOT NULL, scale_factor DOUBLE PRECISION NOT NULL)"
                )
                for t in TABLES:
                    cur.execute(f"SELECT count(*) FROM {t}")
                    n = int(cur.fetchone()[0])
                    cur.execute(f"INSERT INTO {META} VALUES (%s, %s, %s)", (t, n, self.scale))
            except (psycopg.Error, pymysql.MySQLError) as exc:
                raise WorkloadError(f"TPC-H load into {self.conn.database} failed: {exc}") from None
        log.info("workload.prepared", workload=self.name, scale=self.scale, bytes=total)

    @staticmethod
    def _copy_pg(cur: Any, table: str, path: Path, done: int, update: Any) -> int:
        stmt = sql.SQL("COPY {} FROM STDIN (FORMAT csv, HEADER true)").format(sql.Identifier(table))
        with cur.copy(stmt) as copy, open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                copy.write(chunk)
                done += len(chunk)
                update(done)
        return done

    @staticmethod
    def _load_mysql(cur: Any, table: str, path: Path) -> None:
        cur.execute(
            f"LOAD DATA LOCAL INFILE %s INTO TABLE {table} CHARACTER SET utf8mb4 FIELDS TERMINATED BY ',' "
            "OPTIONALLY ENCLOSED BY '\"' LINES TERMINATED BY '\\n' IGNORE 1 LINES",
            (os.fspath(path),),
        )

    # ------------------------------------------------------------------ run
    def warmup(self, seconds: float) -> None:
        """One unmeasured pass over the 22 queries when ``seconds`` > 0 (OLAP runs are query sets)."""
        if seconds > 0:
            self.run(seconds)

    def _set_timeout(self, cur: Any, seconds: float) -> None:
        """The session's statement timeout on the workload's connection, in seconds (≥ 1 ms)."""
        ms = max(int(seconds * 1000), 1)  # 0 would mean "no timeout"
        if is_postgres(self.conn):
            cur.execute(f"SET statement_timeout = {ms}")
            return
        if self._mariadb is None:
            cur.execute("SELECT VERSION()")
            self._mariadb = "mariadb" in str(cur.fetchone()[0]).lower()
        if self._mariadb:
            cur.execute(f"SET SESSION max_statement_time = {ms / 1000:g}")
        else:
            cur.execute(f"SET SESSION max_execution_time = {ms}")

    def _is_timeout(self, exc: Exception) -> bool:
        if isinstance(exc, psycopg.errors.QueryCanceled):
            return True
        return isinstance(exc, pymysql.MySQLError) and bool(exc.args) and exc.args[0] in _MYSQL_TIMEOUT_ERRNOS

    def run(
        self, seconds: float = 0.0, warmup_max_s: float = 0.0, on_tool_start: Callable[[int], object] | None = None
    ) -> Measurement:
        """Run q01…q22 once and keep each query's time (``seconds`` and ``warmup_max_s`` are ignored: an
        OLAP run is the whole query set, with no steady state to find; no tool process is started, the
        queries run from this process).

        Raises:
            WorkloadError: a query failed with an SQL error (missing table, syntax), or more than
                ``max_error_rate`` of the queries timed out.
            RunStopped: ``stop`` returned True before a query.
        """
        queries = self.queries()
        per_query: dict[str, float] = {}
        rows: dict[str, int] = {}
        timeouts: list[str] = []
        lines: list[str] = []
        timeout_s = self.cfg.query_timeout_s
        with connect(self.conn) as db:
            cur = db.cursor()
            self._set_timeout(cur, timeout_s)
            in_effect = timeout_s
            with progress_bar(self.progress, "TPC-H", len(queries)) as update:
                for i, (q, text) in enumerate(queries.items()):
                    update(i, f"TPC-H {q}")
                    if self.stop is not None and self.stop():
                        log.info("workload.stopped", workload=self.name, reason="stop requested", queries=i)
                        raise RunStopped(f"TPC-H ended by agenticdb before {q}", tail("\n".join(lines)))
                    bound = self.limit.query_bound(q, sum(per_query.values())) if self.limit is not None else None
                    bounded = bound is not None and bound[0] < timeout_s
                    wanted = bound[0] if bound is not None and bounded else timeout_s
                    if wanted != in_effect:
                        self._set_timeout(cur, wanted)
                        in_effect = wanted
                    start = time.perf_counter()
                    try:
                        cur.execute(text)
                        rows[q] = len(cur.fetchall())
                        per_query[q] = time.perf_counter() - start
                        lines.append(f"{q} {per_query[q]:.3f}s {rows[q]} rows")
                        stop = self.limit.olap(sum(per_query.values())) if self.limit is not None else ""
                        if stop:
                            return self._stopped(per_query, stop, lines, list(queries))
                    except (psycopg.Error, pymysql.MySQLError) as exc:
                        if not self._is_timeout(exc):
                            lines.append(f"{q} ERROR {exc}")
                            raise WorkloadError(f"TPC-H {q} failed: {exc}", tail("\n".join(lines))) from None
                        if is_postgres(self.conn):
                            db.rollback()
                        if bound is not None and bounded:
                            per_query[q] = bound[0]  # ran at least this long
                            why = f"cut off after {sum(per_query.values()):,.1f} s: {bound[1]} ({bound[0]:,.3f} s)"
                            return self._stopped(per_query, why, lines, list(queries))
                        timeouts.append(q)
                        per_query[q] = timeout_s
                        lines.append(f"{q} TIMEOUT after {timeout_s:g}s")
                        log.warning("workload.query_timeout", workload=self.name, query=q, timeout_s=per_query[q])
                update(len(queries))
        self.last_rows, self.last_timeouts = rows, timeouts
        return self._measurement(per_query, timeouts, "\n".join(lines))

    def _measurement(self, per_query: dict[str, float], timeouts: list[str], output: str) -> Measurement:
        """The query set's measurement from each query's seconds (a timed-out query counts its timeout).

        Raises:
            WorkloadError: more than ``max_error_rate`` of the queries timed out.
        """
        n = len(per_query)  # every query of the set: its time or its timeout
        if len(timeouts) / n > self.cfg.max_error_rate:
            raise WorkloadError(
                f"TPC-H: {len(timeouts)} of {n} queries timed out after "
                f"workload.query_timeout_s={self.cfg.query_timeout_s:g} s (more than "
                f"workload.max_error_rate={self.cfg.max_error_rate:g})",
                tail(output),
            )
        total = sum(per_query.values())
        times_ms = [v * 1000 for v in per_query.values()]
        obj_name = self.cfg.objective or "total_time"
        p95, p99 = percentile(times_ms, 95), percentile(times_ms, 99)
        value, hib = objective(obj_name, tps=n / total, p95_ms=p95, p99_ms=p99, total_time_s=total)
        output += f"\ntotal {total:.3f}s, {len(timeouts)} timeouts"
        log.info("workload.measured", workload=self.name, total_time_s=round(total, 3), timeouts=len(timeouts))
        return Measurement(
            workload=self.name,
            qps=n / total,
            latency_mean_ms=sum(times_ms) / len(times_ms),
            latency_p95_ms=p95,
            latency_p99_ms=p99,
            transactions=n - len(timeouts),
            errors=len(timeouts),
            duration_s=total,
            total_time_s=total,
            per_query_s=per_query,
            objective=value,
            objective_name=obj_name,
            higher_is_better=hib,
            raw_tail=tail(output),
        )

    def _stopped(self, per_query: dict[str, float], reason: str, lines: list[str], queries: list[str]) -> Measurement:
        """The measurement of a query set stopped as far slower than the best (``agenticdb.measure.trial_limit``):
        ``per_query`` holds the queries that ran (a query stopped by its bound at that bound); the total is
        estimated by ``TrialLimit.estimate_total_s`` (what ran, plus the best's time of the queries that did
        not) and the objective scaled from the best level by the time ratio (for ``total_time`` it is that
        estimate itself)."""
        assert self.limit is not None
        elapsed = sum(per_query.values())
        total = max(self.limit.estimate_total_s(per_query, queries), elapsed)
        obj_name = self.cfg.objective or "total_time"
        higher = obj_name not in ("p95", "p99", "total_time")
        ratio = (self.limit.best_seconds or total) / total if total > 0 else 1.0
        best = self.limit.best_objective
        log.info("workload.stopped_early", workload=self.name, reason=reason, queries=len(per_query))
        return Measurement(
            workload=self.name,
            duration_s=elapsed,
            total_time_s=total,
            per_query_s=dict(per_query),
            objective=best * ratio if higher else best / ratio,
            objective_name=obj_name,
            higher_is_better=higher,
            raw_tail=tail("\n".join([*lines, reason])),
            cut_off=reason,
        )

    def cleanup(self) -> None:
        """Drop the TPC-H tables and the meta table."""
        with connect(self.conn) as db:
            cur = db.cursor()
            for t in (META, *reversed(TABLES)):
                cur.execute(f"DROP TABLE IF EXISTS {t}")
