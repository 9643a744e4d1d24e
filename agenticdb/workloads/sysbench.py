"""sysbench 1.0 (Debian package) OLTP scripts and the YCSB script ``benchmarks/ycsb.lua``, for
PostgreSQL (``--db-driver=pgsql``) and MySQL/MariaDB (``--db-driver=mysql``, socket or TCP).

sysbench ``--threads`` is the number of client connections, so it is set from ``workload.clients``
(the concurrency in the fingerprint). ``workload.scale`` is the rows per table (sysbench
``--table-size``, YCSB ``--recordcount``); ``workload.tables`` the sysbench table count.

The run report is sysbench's documented text format (sysbench README, "General command line
options" / report); the parsed lines are ``transactions: N (X per sec.)``, ``ignored errors: N``,
``reconnects: N``, ``avg:``, ``95th percentile:`` (from ``--percentile=95``), the latency histogram
(``--histogram=on``, whole run only) and the per-second reports of ``--report-interval=1`` (TPS and
the ``--percentile`` latency of each interval).

The run is scored on its steady window (docs/measurement.md): TPS is the mean of the per-second TPS
in it, and the p95 an approximation, the TPS-weighted mean of the per-second p95s, since sysbench 1.0
keeps no histogram per interval (``workloads.steady.stats_from_points``). With ``objective = "p99"``
the per-second percentile is the p99 (``--percentile=99``) and the p95 is the whole run's, from the
histogram; otherwise p99 is the whole run's (nearest rank over the bucket counts). The mean latency is
the whole run's ``avg``.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Callable

import structlog

from agenticdb.config.sections import WorkloadConfig
from agenticdb.measure.trial_limit import interval_tps, stopped_oltp
from agenticdb.models import Measurement, SeriesPoint
from agenticdb.resources import data_file
from agenticdb.workload_kinds import announce_load
from agenticdb.workloads.base import Connection, Workload, WorkloadError, WorkloadTraits
from agenticdb.workloads.common import (
    check_error_rate,
    connect,
    ensure_database,
    existing_tables,
    outside_signal,
    progress_enabled,
    run_tool,
    scalar,
    tail,
)
from agenticdb.workloads.steady import WindowStats, score_steady, stats_from_points

log = structlog.get_logger(__name__)

# Statements per transaction of the sysbench OLTP scripts with default options (oltp_common.lua:
# 10 point selects + 4 range selects; 2 updates + 1 delete + 1 insert).
OLTP_READ_FRACTION = {"oltp_read_only": 1.0, "oltp_write_only": 0.0, "oltp_read_write": 14 / 18}
# YCSB core workloads: read fraction and request distribution (YCSB wiki "Core Workloads").
YCSB_MIX = {
    "a": (0.50, "zipfian"),
    "b": (0.95, "zipfian"),
    "c": (1.00, "zipfian"),
    "d": (0.95, "latest"),
    "e": (0.95, "zipfian"),
    "f": (0.50, "zipfian"),
}

_TX_RE = re.compile(r"transactions:\s+(\d+)\s+\(([0-9.]+) per sec\.\)")
_QUERIES_RE = re.compile(r"queries:\s+(\d+)\s+\(([0-9.]+) per sec\.\)")
_IGNORED_RE = re.compile(r"ignored errors:\s+(\d+)")
_RECONNECTS_RE = re.compile(r"reconnects:\s+(\d+)")
_AVG_RE = re.compile(r"avg:\s+([0-9.]+)")
_PCT_RE = re.compile(r"(\d+)th percentile:\s+([0-9.]+)")
_TOTAL_RE = re.compile(r"total time:\s+([0-9.]+)s")
# "[ 3s ] thds: 4 tps: 512.00 qps: 10240.00 (r/w/o: ...) lat (ms,95%): 9.91 err/s: 0.00 reconn/s: 0.00"
_INTERVAL_RE = re.compile(
    r"^\[\s*(?P<t>\d+)s\s*\]\s+thds:\s*\d+\s+tps:\s*(?P<tps>[0-9.]+).*?"
    r"lat \(ms,(?P<pct>\d+)%\):\s*(?P<lat>[0-9.]+)\s+err/s:\s*(?P<err>[0-9.]+)\s+reconn/s:\s*(?P<reconn>[0-9.]+)",
    re.M,
)
_HIST_RE = re.compile(r"^\s*([0-9.]+) \|\**\s+(\d+)\s*$", re.M)


def histogram_percentile(output: str, pct: float) -> float | None:
    """Latency (ms) at percentile ``pct`` from sysbench's ``--histogram`` block: the smallest bucket
    value whose cumulative count reaches ``pct`` % of all events; None when there is no histogram."""
    buckets = [(float(v), int(c)) for v, c in _HIST_RE.findall(output)]
    total = sum(c for _, c in buckets)
    if total == 0:
        return None
    need = pct / 100.0 * total
    seen = 0
    for value, count in sorted(buckets):
        seen += count
        if seen >= need:
            return value
    return buckets[-1][0]


class _SysbenchBase(Workload):
    """Connection options, prepare/run plumbing and report parsing shared by OLTP and YCSB."""

    script: str
    tables_expected: list[str]

    def __init__(self, cfg: WorkloadConfig, conn: Connection, progress: bool | None = None) -> None:
        if cfg.scale < 1 or cfg.scale != int(cfg.scale):
            raise WorkloadError(f"workload.scale={cfg.scale:g}: sysbench/YCSB need a whole row count ≥ 1")
        if cfg.clients < 1:
            raise WorkloadError(f"workload.clients={cfg.clients}: must be ≥ 1")
        self.cfg = cfg
        self.conn = conn
        self.rows = int(cfg.scale)
        self.progress = progress_enabled(progress)

    # -- command line
    def _db_args(self) -> list[str]:
        c = self.conn
        if c.kind == "postgresql":
            args = [
                "--db-driver=pgsql",
                f"--pgsql-host={c.socket or c.host}",
                f"--pgsql-port={c.port}",
                f"--pgsql-user={c.user}",
                f"--pgsql-db={c.database}",
            ]
            if c.password:
                args.append(f"--pgsql-password={c.password}")
            return args
        args = ["--db-driver=mysql", f"--mysql-user={c.user}", f"--mysql-db={c.database}"]
        if c.socket:
            args.append(f"--mysql-socket={c.socket}")
        else:
            args += [f"--mysql-host={c.host}", f"--mysql-port={c.port}"]
        if c.password:
            args.append(f"--mysql-password={c.password}")
        return args

    @abstractmethod
    def _script_args(self) -> list[str]:
        """The Lua script's own options (tables and size for OLTP, record/field counts for YCSB)."""

    def _argv(self, command: str, extra: list[str]) -> list[str]:
        return ["sysbench", self.script, *self._db_args(), *self._script_args(), *extra, command]

    # -- prepare
    @abstractmethod
    def is_loaded(self) -> bool:
        """True when the script's tables are present at the configured size."""

    def prepare(self) -> None:
        """Create the database, then load the tables unless they are present at this size
        (a partial or other-size load is dropped with ``sysbench … cleanup`` first).

        Raises:
            WorkloadError: sysbench prepare failed (output attached).
        """
        ensure_database(self.conn)
        if self.is_loaded():
            log.info(
                "workload.prepare_skipped",
                workload=self.name,
                reason="tables loaded at this size",
                rows=self.rows,
            )
            return
        log.info("workload.prepare", workload=self.name, rows=self.rows)
        self._tool("cleanup", [], "cleanup")
        est = announce_load(self.name, self.rows, self.cfg.tables)  # tables counts for sysbench only
        expected_s = est.seconds if est else None
        self._tool("prepare", self._prepare_extra(), f"{self.name}: loading", expected_s=expected_s, load=True)
        if not self.is_loaded():
            raise WorkloadError(f"{self.name}: sysbench prepare finished but the tables are incomplete")

    def _prepare_extra(self) -> list[str]:
        return []

    def _tool(
        self, command: str, extra: list[str], label: str, expected_s: float | None = None, load: bool = False
    ) -> str:
        result = run_tool(
            self._argv(command, extra),
            timeout_s=self.cfg.timeout_s,
            description=label,
            expected_s=expected_s,
            progress=self.progress,
            load=load,
        )
        if result.returncode != 0:
            raise WorkloadError(
                f"sysbench {self.script} {command} failed (exit {result.returncode})",
                tail(result.output),
                outside_signal(result),
            )
        return result.output

    def cleanup(self) -> None:
        """Drop the benchmark tables (``sysbench … cleanup``)."""
        self._tool("cleanup", [], "cleanup")

    # -- run
    def _percentile(self) -> int:
        """The latency percentile sysbench reports per interval and for the run (``--percentile``)."""
        return 99 if self.cfg.objective == "p99" else 95

    def run(
        self, seconds: float, warmup_max_s: float = 0.0, on_tool_start: Callable[[int], object] | None = None
    ) -> Measurement:
        """Run for ``warmup_max_s + seconds`` (whole seconds, at least 1) with ``workload.clients``
        threads, reporting every second, and score the steady window of that series.

        Raises:
            WorkloadError: sysbench exited non-zero (missing tables, a fatal SQL error), printed no
                report, or ignored errors + reconnects exceeded ``workload.max_error_rate``.
        """
        secs = max(1, round(warmup_max_s + seconds))
        extra = [
            f"--threads={self.cfg.clients}",
            f"--time={secs}",
            f"--percentile={self._percentile()}",
            "--histogram=on",
            "--report-interval=1",
            "--events=0",
        ]
        limit = self.limit
        result = run_tool(
            self._argv("run", extra),
            timeout_s=secs + self.cfg.timeout_s,
            description=f"{self.name} {secs}s",
            expected_s=secs,
            progress=self.progress,
            on_start=on_tool_start,
            watch=(lambda text: limit.oltp(interval_tps(text, warmup_max_s))) if limit is not None else None,
            stop=self.stop,
        )
        out = result.output
        if result.stopped and limit is not None:
            tps = interval_tps(out, warmup_max_s)
            obj = self.cfg.objective or "tps_per_p95"
            return stopped_oltp(self.name, limit, tps, result.seconds, obj, tail(out), result.stopped)
        if result.returncode != 0:
            raise WorkloadError(
                f"sysbench {self.name} run failed (exit {result.returncode})", tail(out), outside_signal(result)
            )
        return self._parse(out, secs, warmup_max_s)

    def _parse(self, out: str, secs: int, warmup_max_s: float = 0.0) -> Measurement:
        tx, avg, pct = _TX_RE.search(out), _AVG_RE.search(out), _PCT_RE.search(out)
        if not tx or not avg or not pct:
            raise WorkloadError(f"sysbench {self.name} printed no report", tail(out))
        done = int(tx.group(1))
        ignored = int(m.group(1)) if (m := _IGNORED_RE.search(out)) else 0
        reconnects = int(m.group(1)) if (m := _RECONNECTS_RE.search(out)) else 0
        errors = ignored + reconnects
        check_error_rate(errors, done, self.cfg.max_error_rate, f"sysbench {self.name}", out)
        duration = float(m.group(1)) if (m := _TOTAL_RE.search(out)) else float(secs)
        points = interval_points(out, secs, done, duration)
        # The percentile sysbench reports per interval is scored on the window; the other one exists
        # only for the whole run (histogram), as does the reported one when no interval line came out
        # (a run of a second or two can end before the first report).
        whole = {95: histogram_percentile(out, 95), 99: histogram_percentile(out, 99)}
        whole[int(pct.group(1))] = float(pct.group(2))

        def stats_of(a: int, b: int) -> WindowStats:
            st = stats_from_points(points, a, b)
            p95 = st.p95_ms if st.p95_ms is not None else whole[95]
            return WindowStats(tps=st.tps, p95_ms=p95, p99_ms=st.p99_ms if st.p99_ms is not None else whole[99])

        obj_name = self.cfg.objective or "tps_per_p95"
        steady = score_steady(points, warmup_max_s, obj_name, stats_of)
        p95_ms, p99_ms = steady.stats.p95_ms, steady.stats.p99_ms
        qps = float(m.group(2)) if (m := _QUERIES_RE.search(out)) else None
        tps = steady.stats.tps
        log.info(
            "workload.measured",
            workload=self.name,
            tps=round(tps, 1),
            p95_ms=p95_ms,
            errors=errors,
            steady_start_s=steady.start,
        )
        return Measurement(
            workload=self.name,
            tps=tps,
            qps=qps,
            latency_mean_ms=float(avg.group(1)),
            latency_p95_ms=p95_ms,
            latency_p99_ms=p99_ms,
            transactions=done,
            errors=errors,
            duration_s=duration,
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


def interval_points(output: str, secs: int, transactions: int, total_time_s: float) -> list[SeriesPoint]:
    """The per-second series from sysbench's ``--report-interval=1`` lines, ``secs`` points long.

    Each ``[ Ns ] thds: … tps: X … lat (ms,P%): L err/s: E reconn/s: R`` line becomes the point for
    second ``N - 1`` (TPS X, the P-th percentile L of that interval, E + R errors). sysbench often
    ends before printing the last interval(s); those seconds get the TPS of the remaining transactions
    (``transactions`` minus the reported ones, over the remaining time) and no latency.
    """
    points: dict[int, SeriesPoint] = {}
    for m in _INTERVAL_RE.finditer(output):
        second = int(m.group("t")) - 1
        if not 0 <= second < secs:
            continue
        lat = float(m.group("lat"))
        points[second] = SeriesPoint(
            t_s=float(second),
            tps=float(m.group("tps")),
            latency_p95_ms=lat if m.group("pct") == "95" else None,
            latency_p99_ms=lat if m.group("pct") == "99" else None,
            errors=round(float(m.group("err")) + float(m.group("reconn"))),
        )
    reported = max(points) + 1 if points else 0
    if reported < secs:
        left_tx = max(transactions - sum(p.tps for p in points.values()), 0.0)
        left_s = max(total_time_s - reported, secs - reported, 1e-9)
        for second in range(reported, secs):
            points[second] = SeriesPoint(t_s=float(second), tps=left_tx / left_s)
    return [points.get(i, SeriesPoint(t_s=float(i), tps=0.0)) for i in range(secs)]


class SysbenchWorkload(_SysbenchBase):
    """sysbench ``oltp_read_only`` / ``oltp_write_only`` / ``oltp_read_write`` (tables ``sbtest1..N``)."""

    def __init__(self, cfg: WorkloadConfig, conn: Connection, script: str, progress: bool | None = None) -> None:
        if script not in OLTP_READ_FRACTION:
            raise WorkloadError(f"sysbench script {script!r}: expected one of {sorted(OLTP_READ_FRACTION)}")
        if cfg.tables < 1:
            raise WorkloadError(f"workload.tables={cfg.tables}: must be ≥ 1")
        super().__init__(cfg, conn, progress)
        self.script = script
        self.name = "sysbench-" + script.replace("_", "-")

    def traits(self) -> WorkloadTraits:
        return WorkloadTraits(
            benchmark=self.name,
            workload_class="oltp",
            read_fraction=round(OLTP_READ_FRACTION[self.script], 3),
            access_pattern="uniform",
            scale=float(self.rows),
            concurrency=self.cfg.clients,
            objective=self.cfg.objective or "tps_per_p95",
        )

    def _script_args(self) -> list[str]:
        # --rand-type=uniform: sysbench 1.0's default is "special"; uniform matches the fingerprint.
        return [f"--tables={self.cfg.tables}", f"--table-size={self.rows}", "--rand-type=uniform"]

    def _prepare_extra(self) -> list[str]:
        return [f"--threads={max(1, min(self.cfg.tables, 4))}"]

    def is_loaded(self) -> bool:
        names = [f"sbtest{i}" for i in range(1, self.cfg.tables + 1)]
        if existing_tables(self.conn, names) != set(names):
            return False
        # sysbench write scripts delete and re-insert the same id, so the row count stays the table size.
        with connect(self.conn) as db:
            cur = db.cursor()
            for name in (names[0], names[-1]):
                cur.execute(f"SELECT count(*) FROM {name}")
                if int(cur.fetchone()[0]) != self.rows:
                    return False
        return True


class YcsbWorkload(_SysbenchBase):
    """YCSB core workload ``a``–``f`` through ``benchmarks/ycsb.lua`` (table ``usertable``).

    Records are ``workload.scale`` rows of 10 fields × 100 characters (YCSB defaults); inserts of
    workloads D and E add keys above the loaded range, so a loaded table counts as present when keys
    1..recordcount are all there.
    """

    FIELD_COUNT = 10
    FIELD_LENGTH = 100
    ZIPFIAN_CONSTANT = 0.99  # YCSB ZipfianGenerator.ZIPFIAN_CONSTANT

    def __init__(self, cfg: WorkloadConfig, conn: Connection, letter: str, progress: bool | None = None) -> None:
        if letter not in YCSB_MIX:
            raise WorkloadError(f"YCSB workload {letter!r}: expected one of a, b, c, d, e, f")
        super().__init__(cfg, conn, progress)
        self.letter = letter
        self.name = f"ycsb-{letter}"
        self.script = str(data_file("benchmarks", "ycsb.lua"))

    def traits(self) -> WorkloadTraits:
        read_fraction, pattern = YCSB_MIX[self.letter]
        return WorkloadTraits(
            benchmark=self.name,
            workload_class="oltp",
            read_fraction=read_fraction,
            access_pattern=pattern,
            scale=float(self.rows),
            concurrency=self.cfg.clients,
            objective=self.cfg.objective or "tps_per_p95",
        )

    def _script_args(self) -> list[str]:
        return [
            f"--workload={self.letter}",
            f"--recordcount={self.rows}",
            f"--fieldcount={self.FIELD_COUNT}",
            f"--fieldlength={self.FIELD_LENGTH}",
            f"--zipfconst={self.ZIPFIAN_CONSTANT}",
        ]

    def is_loaded(self) -> bool:
        if existing_tables(self.conn, ["usertable"]) != {"usertable"}:
            return False
        n = scalar(self.conn, f"SELECT count(*) FROM usertable WHERE ycsb_key BETWEEN 1 AND {self.rows}")
        return int(n) == self.rows
