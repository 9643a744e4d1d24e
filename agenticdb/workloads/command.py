"""The ``command`` workload: the user's own benchmark script, run with ``sh -c workload.command``.

Contract with the script
------------------------
Environment passed in (besides the caller's environment):

    AGENTICDB_PHASE        "run" (a measured run) or "warmup"
    AGENTICDB_DURATION_S   requested run length in seconds (the script may ignore it); for a measured
                           run this includes AGENTICDB_WARMUP_MAX_S
    AGENTICDB_WARMUP_MAX_S the longest start-up transient agenticdb may cut from a reported series
    AGENTICDB_CLIENTS      workload.clients;  AGENTICDB_SCALE  workload.scale
    AGENTICDB_DB_KIND      "postgresql" or "mysql"
    AGENTICDB_DB_HOST, AGENTICDB_DB_PORT, AGENTICDB_DB_USER, AGENTICDB_DB_PASSWORD,
    AGENTICDB_DB_NAME, AGENTICDB_DB_SOCKET (empty when TCP)

Output: the script prints one JSON object per line somewhere in stdout/stderr; the last line that is
a JSON object with ``"agenticdb": 1`` is the result (later lines win). Fields (all optional except
that an OLTP objective needs ``tps``/``p95_ms`` and ``total_time`` needs ``total_time_s``)::

    {"agenticdb": 1, "tps": 812.5, "qps": 9000.0, "mean_ms": 4.1, "p95_ms": 9.8, "p99_ms": 15.2,
     "transactions": 8125, "errors": 0, "duration_s": 10.0, "total_time_s": null}

Units: throughput per second, latencies in ms, times in seconds. The objective is
``workload.objective`` when set, else ``total_time`` when only ``total_time_s`` is reported, else
``tps_per_p95``.

Optional per-second series: ``"series": [{"t_s": 0, "tps": 790.0, "p95_ms": 10.2, "p99_ms": 16.0,
"errors": 0}, …]``, one point per second in time order (only ``t_s`` and ``tps`` are required). With a
series, an OLTP run is scored on its steady window (docs/measurement.md): TPS is the mean per-second
TPS there and p95/p99 the TPS-weighted means of the per-second values (an approximation); a latency the
series does not carry is taken from the whole-run fields. ``total_time`` runs ignore the series.

Failures (``WorkloadError`` with the output tail): the script exits non-zero, runs past
``workload.timeout_s``, prints no result line, prints an invalid one, or reports errors above
``workload.max_error_rate`` of ``transactions + errors``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agenticdb.config.sections import WorkloadConfig
from agenticdb.models import Measurement, SeriesPoint
from agenticdb.workloads.base import Connection, Workload, WorkloadError, WorkloadTraits
from agenticdb.workloads.common import (
    check_error_rate,
    ensure_database,
    objective,
    outside_signal,
    progress_enabled,
    run_tool,
    tail,
)
from agenticdb.workloads.steady import WindowStats, score_steady, stats_from_points

log = structlog.get_logger(__name__)


class CommandPoint(BaseModel):
    """One second of the script's optional ``series`` (units as in the result line)."""

    model_config = ConfigDict(extra="forbid")

    t_s: float = Field(ge=0)
    tps: float = Field(ge=0)
    p95_ms: float | None = Field(default=None, ge=0)
    p99_ms: float | None = Field(default=None, ge=0)
    errors: int = Field(default=0, ge=0)


class CommandResult(BaseModel):
    """One ``{"agenticdb": 1, ...}`` result line (see the module docstring for units)."""

    model_config = ConfigDict(extra="forbid")

    agenticdb: int = Field(description="format version; must be 1")
    tps: float | None = Field(default=None, ge=0)
    qps: float | None = Field(default=None, ge=0)
    mean_ms: float | None = Field(default=None, ge=0)
    p95_ms: float | None = Field(default=None, ge=0)
    p99_ms: float | None = Field(default=None, ge=0)
    transactions: int | None = Field(default=None, ge=0)
    errors: int = Field(default=0, ge=0)
    duration_s: float | None = Field(default=None, ge=0)
    total_time_s: float | None = Field(default=None, ge=0)
    series: list[CommandPoint] | None = None

    @field_validator("series")
    @classmethod
    def _in_time_order(cls, v: list[CommandPoint] | None) -> list[CommandPoint] | None:
        if v is not None and any(b.t_s <= a.t_s for a, b in zip(v, v[1:], strict=False)):
            raise ValueError("series: t_s must increase from one point to the next (one point per second)")
        return v


def parse_result(output: str) -> CommandResult:
    """The last ``{"agenticdb": 1, ...}`` line of ``output``.

    Raises:
        WorkloadError: no such line, or the last one has a wrong version/field (message says which).
    """
    found: dict[str, Any] | None = None
    for line in output.splitlines():
        line = line.strip()
        if not (line.startswith("{") and line.endswith("}")):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and "agenticdb" in obj:
            found = obj
    if found is None:
        raise WorkloadError('command printed no result line ({"agenticdb": 1, ...})', tail(output))
    try:
        result = CommandResult.model_validate(found)
    except ValidationError as exc:
        raise WorkloadError(f"command result line is invalid: {exc}", tail(output)) from None
    if result.agenticdb != 1:
        raise WorkloadError(f"command result line: agenticdb={result.agenticdb}: expected format 1", tail(output))
    return result


class CommandWorkload(Workload):
    """The user's script (``workload.command``) as the benchmark.

    Raises (constructor):
        WorkloadError: ``workload.command`` is empty.
    """

    name = "command"

    def __init__(self, cfg: WorkloadConfig, conn: Connection, progress: bool | None = None) -> None:
        if not cfg.command or not cfg.command.strip():
            raise WorkloadError("workload.kind='command' needs workload.command (a shell command line)")
        self.cfg = cfg
        self.conn = conn
        self.command = cfg.command
        self.progress = progress_enabled(progress)

    def traits(self) -> WorkloadTraits:
        obj = self.cfg.objective or "tps_per_p95"
        # The script's read/write mix is unknown to agenticdb: 0.5 says "mixed, unknown".
        return WorkloadTraits(
            benchmark="command",
            workload_class="olap" if obj == "total_time" else "oltp",
            read_fraction=0.5,
            access_pattern="unknown",
            scale=float(self.cfg.scale),
            concurrency=self.cfg.clients,
            objective=obj,
        )

    def prepare(self) -> None:
        """Create ``conn.database`` when missing (the script loads its own data)."""
        ensure_database(self.conn)

    def _env(self, phase: str, seconds: float, warmup_max_s: float = 0.0) -> dict[str, str]:
        c = self.conn
        return {
            "AGENTICDB_PHASE": phase,
            "AGENTICDB_DURATION_S": f"{seconds + warmup_max_s:g}",
            "AGENTICDB_WARMUP_MAX_S": f"{warmup_max_s:g}",
            "AGENTICDB_CLIENTS": str(self.cfg.clients),
            "AGENTICDB_SCALE": f"{self.cfg.scale:g}",
            "AGENTICDB_DB_KIND": c.kind,
            "AGENTICDB_DB_HOST": c.host,
            "AGENTICDB_DB_PORT": str(c.port),
            "AGENTICDB_DB_USER": c.user,
            "AGENTICDB_DB_PASSWORD": c.password,
            "AGENTICDB_DB_NAME": c.database,
            "AGENTICDB_DB_SOCKET": c.socket or "",
        }

    def warmup(self, seconds: float) -> None:
        if seconds > 0:
            self._run("warmup", seconds)

    def run(
        self, seconds: float, warmup_max_s: float = 0.0, on_tool_start: Callable[[int], object] | None = None
    ) -> Measurement:
        """Run the script once and read its result line (and its series, when it prints one).

        Raises:
            WorkloadError: see the module docstring.
        """
        return self._run("run", seconds, warmup_max_s, on_tool_start)

    def _run(
        self,
        phase: str,
        seconds: float,
        warmup_max_s: float = 0.0,
        on_tool_start: Callable[[int], object] | None = None,
    ) -> Measurement:
        total_s = seconds + warmup_max_s
        result = run_tool(
            ["sh", "-c", self.command],
            env=self._env(phase, seconds, warmup_max_s),
            timeout_s=self.cfg.timeout_s,
            description=f"command {phase}",
            expected_s=total_s or None,
            progress=self.progress,
            on_start=on_tool_start,
            stop=self.stop,
        )
        out = result.output
        if result.returncode != 0:
            raise WorkloadError(
                f"workload.command exited with status {result.returncode}", tail(out), outside_signal(result)
            )
        r = parse_result(out)
        if r.transactions is not None:
            check_error_rate(r.errors, r.transactions, self.cfg.max_error_rate, "command", out)
        obj_name = self.cfg.objective or (
            "total_time" if r.total_time_s is not None and r.tps is None else "tps_per_p95"
        )
        if r.tps is not None and r.tps <= 0 and obj_name != "total_time":
            raise WorkloadError("command reported tps=0: no work was measured", tail(out))
        fields = _scored(r, obj_name, warmup_max_s)
        log.info("workload.measured", workload=self.name, objective=obj_name, value=fields["objective"])
        return Measurement(
            workload=self.name,
            qps=r.qps,
            latency_mean_ms=r.mean_ms,
            transactions=r.transactions or 0,
            errors=r.errors,
            duration_s=r.duration_s if r.duration_s is not None else result.seconds,
            total_time_s=r.total_time_s,
            objective_name=obj_name,
            raw_tail=tail(out),
            **fields,
        )


def _scored(r: CommandResult, obj_name: str, warmup_max_s: float) -> dict[str, Any]:
    """Measurement fields that depend on the objective: from the steady window of the series when the
    script printed one (OLTP objectives), else from the whole-run fields of the result line.

    Raises:
        WorkloadError: the objective's metric is missing.
    """
    if not r.series or obj_name == "total_time":
        value, higher = objective(
            obj_name,
            tps=r.tps if r.tps is not None else r.qps,
            p95_ms=r.p95_ms,
            p99_ms=r.p99_ms,
            total_time_s=r.total_time_s,
        )
        return {
            "tps": r.tps,
            "latency_p95_ms": r.p95_ms,
            "latency_p99_ms": r.p99_ms,
            "objective": value,
            "higher_is_better": higher,
        }
    points = [
        SeriesPoint(t_s=p.t_s, tps=p.tps, latency_p95_ms=p.p95_ms, latency_p99_ms=p.p99_ms, errors=p.errors)
        for p in r.series
    ]

    def stats_of(a: int, b: int) -> WindowStats:
        st = stats_from_points(points, a, b)
        p95 = st.p95_ms if st.p95_ms is not None else r.p95_ms
        return WindowStats(tps=st.tps, p95_ms=p95, p99_ms=st.p99_ms if st.p99_ms is not None else r.p99_ms)

    steady = score_steady(points, warmup_max_s, obj_name, stats_of)
    return {
        "tps": steady.stats.tps,
        "latency_p95_ms": steady.stats.p95_ms,
        "latency_p99_ms": steady.stats.p99_ms,
        "objective": steady.objective,
        "higher_is_better": steady.higher_is_better,
        "series": points,
        "steady_start_s": points[steady.start].t_s,
        "steady_s": float(steady.length),
        "series_cv": steady.series_cv,
        "objective_se": steady.objective_se,
    }
