"""pgbench (PostgreSQL only): the built-in TPC-B-like script.

prepare: create the database when missing, then ``pgbench -i -s scale`` only when the pgbench tables
are missing or were initialised at another scale (``count(*)`` of ``pgbench_branches`` is the scale,
pgbench manual: "the number of rows in pgbench_branches ... is the scale factor").

run: ``pgbench -n -c clients -j threads -T seconds -l``. Throughput is pgbench's own ``tps`` line;
mean, p95 and p99 latency come from the per-transaction log (manual, "Per-Transaction Logging": the
third column is the elapsed time in µs, or ``failed``/``serialization``/``deadlock`` for a failed
transaction in PostgreSQL 15+). ``-n`` (``--no-vacuum``) keeps runs from vacuuming between trials.
"""

from __future__ import annotations

import glob
import os
import re
import tempfile

import structlog

from agenticdb.config import WorkloadConfig
from agenticdb.models import Measurement
from agenticdb.workloads.base import Connection, Workload, WorkloadError, WorkloadTraits
from agenticdb.workloads.common import (
    check_error_rate,
    ensure_database,
    existing_tables,
    objective,
    percentile,
    progress_enabled,
    run_tool,
    scalar,
    tail,
)

log = structlog.get_logger(__name__)

PGBENCH_TABLES = ("pgbench_accounts", "pgbench_branches", "pgbench_tellers", "pgbench_history")
# TPC-B-like script: 1 SELECT among 5 statements (3 UPDATE, 1 INSERT) — pgbench manual "What Is the
# Transaction Actually Performed in pgbench?".
TPCB_READ_FRACTION = 0.2

_TPS_RE = re.compile(r"^tps = ([0-9.]+)", re.M)
_PROCESSED_RE = re.compile(r"number of transactions actually processed: (\d+)")
_FAILED_RE = re.compile(r"number of failed transactions: (\d+)")


class PgbenchWorkload(Workload):
    """pgbench TPC-B-like against a PostgreSQL ``Connection``.

    Raises (constructor):
        WorkloadError: the connection is not PostgreSQL, or ``scale`` is not a whole number ≥ 1.
    """

    name = "pgbench"

    def __init__(self, cfg: WorkloadConfig, conn: Connection, progress: bool | None = None) -> None:
        if conn.kind != "postgresql":
            raise WorkloadError(f"workload.kind='pgbench' needs PostgreSQL; the target is {conn.kind}")
        if cfg.scale < 1 or cfg.scale != int(cfg.scale):
            raise WorkloadError(f"workload.scale={cfg.scale:g}: pgbench needs a whole scale factor ≥ 1")
        self.cfg = cfg
        self.conn = conn
        self.scale = int(cfg.scale)
        self.progress = progress_enabled(progress)

    def traits(self) -> WorkloadTraits:
        return WorkloadTraits(
            benchmark="pgbench-tpcb",
            workload_class="oltp",
            read_fraction=TPCB_READ_FRACTION,
            access_pattern="uniform",
            scale=float(self.scale),
            concurrency=self.cfg.clients,
            objective=self.cfg.objective or "tps_per_p95",
        )

    def _env(self) -> dict[str, str]:
        env = {
            "PGHOST": self.conn.socket or self.conn.host,
            "PGPORT": str(self.conn.port),
            "PGUSER": self.conn.user,
            "PGDATABASE": self.conn.database,
        }
        if self.conn.password:
            env["PGPASSWORD"] = self.conn.password
        if sslmode := self.conn.extra.get("sslmode"):
            env["PGSSLMODE"] = sslmode
        return env

    def loaded_scale(self) -> int | None:
        """Scale of the loaded pgbench tables, or None when any of them is missing."""
        if existing_tables(self.conn, PGBENCH_TABLES) != set(PGBENCH_TABLES):
            return None
        return int(scalar(self.conn, "SELECT count(*) FROM pgbench_branches"))

    def prepare(self) -> None:
        """Create the database and run ``pgbench -i -s scale`` unless already loaded at this scale.

        Raises:
            WorkloadError: database creation or pgbench -i failed (output attached).
        """
        ensure_database(self.conn)
        current = self.loaded_scale()
        if current == self.scale:
            log.info(
                "workload.prepare_skipped",
                workload=self.name,
                reason="tables loaded at this scale",
                scale=self.scale,
            )
            return
        log.info("workload.prepare", workload=self.name, scale=self.scale, found_scale=current)
        result = run_tool(
            ["pgbench", "-i", "-q", "-s", str(self.scale)],
            env=self._env(),
            timeout_s=self.cfg.timeout_s,
            description=f"pgbench -i -s {self.scale}",
            expected_s=None,
            progress=self.progress,
        )
        if result.returncode != 0:
            raise WorkloadError(f"pgbench -i -s {self.scale} failed (exit {result.returncode})", tail(result.output))

    def run(self, seconds: float) -> Measurement:
        """Run for ``seconds`` (rounded to whole seconds, at least 1; pgbench -T takes integers).

        Raises:
            WorkloadError: pgbench exited non-zero (e.g. missing tables, aborted clients), printed no
                result, or failed transactions exceeded ``max_error_rate``.
        """
        secs = max(1, round(seconds))
        clients = self.cfg.clients
        threads = max(1, min(self.cfg.threads, clients))
        with tempfile.TemporaryDirectory(prefix="agenticdb-pgbench-") as tmp:
            prefix = os.path.join(tmp, "pgbench_log")
            argv = [
                "pgbench",
                "-n",
                "-c",
                str(clients),
                "-j",
                str(threads),
                "-T",
                str(secs),
                "-l",
                f"--log-prefix={prefix}",
            ]
            result = run_tool(
                argv,
                env=self._env(),
                timeout_s=secs + self.cfg.timeout_s,
                description=f"pgbench {secs}s",
                expected_s=secs,
                progress=self.progress,
            )
            latencies_us, failed_logged = _read_logs(glob.glob(prefix + ".*"))
        out = result.output
        if result.returncode != 0:
            raise WorkloadError(f"pgbench run failed (exit {result.returncode})", tail(out))
        tps_m = _TPS_RE.search(out)
        done_m = _PROCESSED_RE.search(out)
        if not tps_m or not done_m or not latencies_us:
            raise WorkloadError("pgbench printed no result (no tps line or empty transaction log)", tail(out))
        failed_m = _FAILED_RE.search(out)
        errors = max(int(failed_m.group(1)) if failed_m else 0, failed_logged)
        done = int(done_m.group(1))
        check_error_rate(errors, done, self.cfg.max_error_rate, "pgbench", out)
        tps = float(tps_m.group(1))
        lat_ms = [v / 1000.0 for v in latencies_us]
        p95 = percentile(lat_ms, 95)
        obj_name = self.cfg.objective or "tps_per_p95"
        value, hib = objective(obj_name, tps=tps, p95_ms=p95)
        m = Measurement(
            workload=self.name,
            tps=tps,
            latency_mean_ms=sum(lat_ms) / len(lat_ms),
            latency_p95_ms=p95,
            latency_p99_ms=percentile(lat_ms, 99),
            transactions=done,
            errors=errors,
            duration_s=float(secs),
            objective=value,
            objective_name=obj_name,
            higher_is_better=hib,
            raw_tail=tail(out),
        )
        log.info("workload.measured", workload=self.name, tps=round(tps, 1), p95_ms=round(p95, 2), errors=errors)
        return m

    def cleanup(self) -> None:
        """Drop the pgbench tables (``pgbench -i -I d``)."""
        run_tool(["pgbench", "-i", "-I", "d"], env=self._env(), timeout_s=self.cfg.timeout_s)


def _read_logs(paths: list[str]) -> tuple[list[float], int]:
    """Latencies in µs of successful transactions and the number of failed ones from pgbench ``-l``
    files (one per thread: ``prefix.PID`` and ``prefix.PID.N``)."""
    latencies: list[float] = []
    failed = 0
    for path in paths:
        with open(path) as f:
            for line in f:
                cols = line.split()
                if len(cols) < 3:
                    continue
                try:
                    latencies.append(float(cols[2]))
                except ValueError:
                    if cols[2] != "skipped":
                        failed += 1  # "failed", "serialization", "deadlock" (PostgreSQL 15+)
    return latencies, failed
