"""The ``command`` workload: the user's own benchmark script, run with ``sh -c workload.command``.

Contract with the script
------------------------
Environment passed in (besides the caller's environment):

    AGENTICDB_PHASE        "run" (a measured run) or "warmup"
    AGENTICDB_DURATION_S   requested run length in seconds (the script may ignore it)
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

Failures (``WorkloadError`` with the output tail): the script exits non-zero, runs past
``workload.timeout_s``, prints no result line, prints an invalid one, or reports errors above
``workload.max_error_rate`` of ``transactions + errors``.
"""

from __future__ import annotations

import json
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agenticdb.config import WorkloadConfig
from agenticdb.models import Measurement
from agenticdb.workloads.base import Connection, Workload, WorkloadError, WorkloadTraits
from agenticdb.workloads.common import (
    check_error_rate,
    ensure_database,
    objective,
    progress_enabled,
    run_tool,
    tail,
)

log = structlog.get_logger(__name__)


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

    def _env(self, phase: str, seconds: float) -> dict[str, str]:
        c = self.conn
        return {
            "AGENTICDB_PHASE": phase,
            "AGENTICDB_DURATION_S": f"{seconds:g}",
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

    def run(self, seconds: float) -> Measurement:
        """Run the script once and read its result line.

        Raises:
            WorkloadError: see the module docstring.
        """
        return self._run("run", seconds)

    def _run(self, phase: str, seconds: float) -> Measurement:
        result = run_tool(
            ["sh", "-c", self.command],
            env=self._env(phase, seconds),
            timeout_s=self.cfg.timeout_s,
            description=f"command {phase}",
            expected_s=seconds or None,
            progress=self.progress,
        )
        out = result.output
        if result.returncode != 0:
            raise WorkloadError(f"workload.command exited with status {result.returncode}", tail(out))
        r = parse_result(out)
        if r.transactions is not None:
            check_error_rate(r.errors, r.transactions, self.cfg.max_error_rate, "command", out)
        obj_name = self.cfg.objective or (
            "total_time" if r.total_time_s is not None and r.tps is None else "tps_per_p95"
        )
        value, hib = objective(
            obj_name, tps=r.tps if r.tps is not None else r.qps, p95_ms=r.p95_ms, total_time_s=r.total_time_s
        )
        if r.tps is not None and r.tps <= 0 and obj_name != "total_time":
            raise WorkloadError("command reported tps=0: no work was measured", tail(out))
        log.info("workload.measured", workload=self.name, objective=obj_name, value=value)
        return Measurement(
            workload=self.name,
            tps=r.tps,
            qps=r.qps,
            latency_mean_ms=r.mean_ms,
            latency_p95_ms=r.p95_ms,
            latency_p99_ms=r.p99_ms,
            transactions=r.transactions or 0,
            errors=r.errors,
            duration_s=r.duration_s if r.duration_s is not None else result.seconds,
            total_time_s=r.total_time_s,
            objective=value,
            objective_name=obj_name,
            higher_is_better=hib,
            raw_tail=tail(out),
        )
