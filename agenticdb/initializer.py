"""Initializer: runtime profile, fingerprint and action catalog before the first round.

The baseline is measured ``loop.baseline_runs`` times (at least twice by default) so the auditor knows
the run-to-run noise of this host before it judges any change (MEASUREMENT.md).
"""

from __future__ import annotations

import statistics
from typing import Literal

import structlog

from agenticdb.auditor import noise_cv
from agenticdb.config import Settings
from agenticdb.executor import Executor
from agenticdb.hardware import detect_hardware
from agenticdb.models import Catalog, Fingerprint, Hardware, Measurement, RuntimeProfile, StateDelta
from agenticdb.targets.base import Target
from agenticdb.workloads.base import Workload

log = structlog.get_logger(__name__)


WORKLOAD_CLASSES: dict[str, Literal["oltp", "olap", "mixed"]] = {
    "oltp": "oltp",
    "olap": "olap",
    "mixed": "mixed",
}


def fingerprint(target: Target, version: str, workload: Workload, hardware: Hardware) -> Fingerprint:
    """Fingerprint from the DBMS identity, the workload's traits and the host size."""
    t = workload.traits()
    return Fingerprint(
        dbms=target.kind,
        version_major=target.version_major(),
        benchmark=t.benchmark,
        workload_class=WORKLOAD_CLASSES.get(t.workload_class, "oltp"),
        read_fraction=t.read_fraction,
        access_pattern=t.access_pattern,
        scale=t.scale,
        concurrency=t.concurrency,
        objective=t.objective,
        memory_gib=round(hardware.memory_limit_bytes / 2**30, 1),
        cpu_count=hardware.cpu_count,
    )


def profile_target(target: Target) -> tuple[Catalog, Hardware, str, dict[str, str]]:
    """Catalog, hardware, version and current values of every catalog knob."""
    catalog = target.catalog()
    version = target.version()
    hardware = detect_hardware(target.data_dir, pid=target.server_pid())
    current = target.current_values(list(catalog.knobs))
    log.info(
        "init.profiled",
        target=target.kind,
        version=version,
        knobs=len(catalog.knobs),
        excluded=len(catalog.excluded),
        cpus=hardware.cpu_count,
        memory_limit_gib=round(hardware.memory_limit_bytes / 2**30, 1),
    )
    return catalog, hardware, version, current


def measure_baseline(executor: Executor, runs: int) -> tuple[list[Measurement], StateDelta, float]:
    """Measure the unchanged configuration ``runs`` times; return the runs, the last state delta and the CV."""
    measurements: list[Measurement] = []
    delta = StateDelta()
    for i in range(runs):
        m, delta = executor.measure(0, f"baseline {i + 1}/{runs}")
        measurements.append(m)
    cv = noise_cv([m.objective for m in measurements])
    log.info(
        "init.baseline",
        runs=runs,
        median=round(statistics.median(m.objective for m in measurements), 3),
        cv=round(cv, 3),
    )
    return measurements, delta, cv


def build_profile(
    target: Target,
    version: str,
    hardware: Hardware,
    current: dict[str, str],
    baseline: list[Measurement],
    delta: StateDelta,
    cv: float,
    cfg: Settings,
) -> RuntimeProfile:
    """Assemble the RuntimeProfile the planners read."""
    return RuntimeProfile(
        target=target.kind,
        dbms_version=version,
        hardware=hardware,
        current_config=current,
        service_status="available" if target.available() else "unavailable",
        baseline=baseline,
        baseline_state=delta,
        noise_cv=cv,
    )
