"""pgbench (PostgreSQL only): the built-in TPC-B-like script.

prepare: create the database when missing, then ``pgbench -i -s scale`` only when the pgbench tables
are missing or were initialised at another scale (``count(*)`` of ``pgbench_branches`` is the scale,
pgbench manual: "the number of rows in pgbench_branches ... is the scale factor").

run: ``pgbench -n -c clients -j threads -T seconds -l``. Everything is computed from the
per-transaction log (manual, "Per-Transaction Logging": the third column is the elapsed time in µs, or
``failed``/``serialization``/``deadlock`` for a failed transaction in PostgreSQL 15+; the fifth and
sixth say when it completed): the per-second series (TPS, p95, p99, failures per second), and over the
steady window the TPS and the exact mean/p95/p99 of all its latencies. ``-n`` (``--no-vacuum``) keeps
runs from vacuuming between trials.
"""

from __future__ import annotations

import glob
import os
import re
import tempfile
from collections.abc import Callable

import structlog

from agenticdb.config.sections import WorkloadConfig
from agenticdb.measure.series import SecondBin, bin_transactions, percentile, points_from_bins
from agenticdb.measure.trial_limit import progress_tps, stopped_oltp
from agenticdb.models import Measurement
from agenticdb.workload_kinds import announce_load
from agenticdb.workloads.base import Connection, Workload, WorkloadError, WorkloadTraits
from agenticdb.workloads.common import (
    ToolResult,
    check_error_rate,
    ensure_database,
    existing_tables,
    outside_signal,
    progress_enabled,
    run_tool,
    scalar,
    tail,
)
from agenticdb.workloads.steady import WindowStats, score_steady

log = structlog.get_logger(__name__)

PGBENCH_TABLES = ("pgbench_accounts", "pgbench_branches", "pgbench_tellers", "pgbench_history")
# TPC-B-like script: 1 SELECT among 5 statements (3 UPDATE, 1 INSERT) — pgbench manual "What Is the
# Transaction Actually Performed in pgbench?".
TPCB_READ_FRACTION = 0.2

_TPS_RE = re.compile(r"^tps = ([0-9.]+)", re.M)
_PROCESSED_RE = re.compile(r"number of transactions actually processed: (\d+)")
_INIT_RE = re.compile(r"(\d+) of (\d+) tuples \((\d+)%\) done")


def init_progress(output: str) -> float | None:
    """Percent of ``pgbench -i`` rows generated so far, from its last "N of M tuples (P%) done" line
    (printed every 5 s with -q); None before the first one."""
    found = _INIT_RE.findall(output)
    return 100.0 * int(found[-1][0]) / max(1, int(found[-1][1])) if found else None


_FAILED_RE = re.compile(r"number of failed transactions: (\d+)")


class PgbenchWorkload(Workload):
    """pgbench TPC-B-like against a PostgreSQL ``Connection``.

    Raises (constructor):
        WorkloadError: the connection is not PostgreSQL, or ``scale`` is not a whole number ≥ 1.
    """

    name = "pgbench"

    def __init__(self, cfg: WorkloadConfig, conn: Connection, progress: bool | None = None) -> None:
        if conn.kind != "postgresql":
            raise WorkloadError(
                f"workload.kind='pgbench' (the default) needs PostgreSQL; the target is {conn.kind}: choose one "
                "for MariaDB/MySQL, e.g. --workload sysbench-oltp-read-write (or ycsb-a, tpch, live)"
            )
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
        est = announce_load("pgbench", self.scale)
        result = run_tool(
            ["pgbench", "-i", "-q", "-s", str(self.scale)],
            env=self._env(),
            timeout_s=self.cfg.timeout_s,
            description=f"pgbench -i -s {self.scale}",
            expected_s=est.seconds if est else None,
            progress_of=init_progress,
            progress=self.progress,
            load=True,
        )
        if result.returncode != 0:
            raise WorkloadError(
                f"pgbench -i -s {self.scale} failed (exit {result.returncode})",
                tail(result.output),
                outside_signal(result),
            )

    def run(
        self, seconds: float, warmup_max_s: float = 0.0, on_tool_start: Callable[[int], object] | None = None
    ) -> Measurement:
        """Run for ``warmup_max_s + seconds`` (rounded to whole seconds, at least 1; pgbench -T takes
        integers) and score the steady window of the per-second series built from the transaction log.

        Raises:
            WorkloadError: pgbench exited non-zero (e.g. missing tables, aborted clients), printed no
                result, or failed transactions exceeded ``max_error_rate``.
        """
        secs = max(1, round(warmup_max_s + seconds))
        limit = self.limit
        watch = (lambda text: limit.oltp(progress_tps(text, warmup_max_s))) if limit is not None else None
        result, events = self._run_logged(secs, on_tool_start, watch)
        out = result.output
        if result.stopped and limit is not None:
            tps = progress_tps(out, warmup_max_s)
            obj = self.cfg.objective or "tps_per_p95"
            return stopped_oltp(self.name, limit, tps, result.seconds, obj, tail(out), result.stopped)
        if result.returncode != 0:
            raise WorkloadError(f"pgbench run failed (exit {result.returncode})", tail(out), outside_signal(result))
        done_m = _PROCESSED_RE.search(out)
        ok = [(end, lat) for end, lat in events if lat is not None]
        if not _TPS_RE.search(out) or not done_m or not ok:
            raise WorkloadError("pgbench printed no result (no tps line or empty transaction log)", tail(out))
        failed_m = _FAILED_RE.search(out)
        errors = max(int(failed_m.group(1)) if failed_m else 0, len(events) - len(ok))
        done = int(done_m.group(1))
        check_error_rate(errors, done, self.cfg.max_error_rate, "pgbench", out)
        # The run's clock starts when the first transaction began (after the connections were made).
        start = min(end - lat / 1000.0 for end, lat in ok)
        bins = bin_transactions(events, start, secs)
        points = points_from_bins(bins)
        obj_name = self.cfg.objective or "tps_per_p95"
        steady = score_steady(points, warmup_max_s, obj_name, lambda a, b: _bin_stats(bins, a, b))
        st = steady.stats
        log.info(
            "workload.measured",
            workload=self.name,
            tps=round(st.tps, 1),
            p95_ms=st.p95_ms,
            errors=errors,
            steady_start_s=steady.start,
        )
        return Measurement(
            workload=self.name,
            tps=st.tps,
            latency_mean_ms=st.mean_ms,
            latency_p95_ms=st.p95_ms,
            latency_p99_ms=st.p99_ms,
            transactions=done,
            errors=errors,
            duration_s=float(secs),
            objective=steady.objective,
            objective_name=obj_name,
            higher_is_better=steady.higher_is_better,
            raw_tail=tail(out),
            series=points,
            steady_start_s=float(steady.start),
            steady_s=float(steady.length),
            series_cv=steady.series_cv,
            objective_se=steady.objective_se,
        )

    def _run_logged(
        self, secs: int, on_tool_start: Callable[[int], object] | None, watch: Callable[[str], str] | None = None
    ) -> tuple[ToolResult, list[tuple[float, float | None]]]:
        """Run ``pgbench -T secs -l`` and read its per-transaction logs before the temp dir goes; with
        ``watch``, also ``--progress=1`` so a far worse run can be stopped early."""
        clients = self.cfg.clients
        threads = max(1, min(self.cfg.threads, clients))
        with tempfile.TemporaryDirectory(prefix="agenticdb-pgbench-") as tmp:
            prefix = os.path.join(tmp, "pgbench_log")
            argv = ["pgbench", "-n", "-c", str(clients), "-j", str(threads), "-T", str(secs)]
            argv += ["-l", f"--log-prefix={prefix}"] + (["--progress=1"] if watch is not None else [])
            result = run_tool(
                argv,
                env=self._env(),
                timeout_s=secs + self.cfg.timeout_s,
                description=f"pgbench {secs}s",
                expected_s=secs,
                progress=self.progress,
                on_start=on_tool_start,
                watch=watch,
                stop=self.stop,
            )
            return result, read_logs(glob.glob(prefix + ".*"))

    def cleanup(self) -> None:
        """Drop the pgbench tables (``pgbench -i -I d``)."""
        run_tool(["pgbench", "-i", "-I", "d"], env=self._env(), timeout_s=self.cfg.timeout_s)


def read_logs(paths: list[str]) -> list[tuple[float, float | None]]:
    """``(end time in epoch s, latency in ms)`` per transaction from pgbench ``-l`` files (one per thread:
    ``prefix.PID`` and ``prefix.PID.N``); the latency is None for a failed transaction.

    Columns (pgbench manual, "Per-Transaction Logging"): ``client_id transaction_no time script_no
    time_epoch time_us [schedule_lag] [retries]``; ``time`` is the elapsed time in µs, or ``failed`` /
    ``serialization`` / ``deadlock`` (PostgreSQL 15+) for a failed one, or ``skipped`` (-R with -L);
    ``time_epoch``/``time_us`` say when the transaction completed. Skipped transactions never ran and
    are left out.
    """
    events: list[tuple[float, float | None]] = []
    for path in paths:
        with open(path) as f:
            for line in f:
                cols = line.split()
                if len(cols) < 6 or cols[2] == "skipped":
                    continue
                end = int(cols[4]) + int(cols[5]) / 1e6
                try:
                    events.append((end, float(cols[2]) / 1000.0))
                except ValueError:
                    events.append((end, None))  # "failed", "serialization", "deadlock"
    return events


def _bin_stats(bins: list[SecondBin], a: int, b: int) -> WindowStats:
    """Exact statistics over seconds ``[a, b)``: every latency in them, pooled."""
    lat = [v for bin_ in bins[a:b] for v in bin_.latencies_ms]
    if not lat:
        return WindowStats(tps=0.0, p95_ms=None, p99_ms=None)
    return WindowStats(
        tps=len(lat) / (b - a),
        p95_ms=percentile(lat, 95),
        p99_ms=percentile(lat, 99),
        mean_ms=sum(lat) / len(lat),
    )
