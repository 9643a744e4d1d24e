"""A planning context read from a real server, for the opening's tests (issue 36)."""

from __future__ import annotations

import time
from collections.abc import Callable

from agenticdb.host.hardware import detect_hardware
from agenticdb.models import Layer, RuntimeProfile, StateDelta
from agenticdb.models.planning import Fingerprint, PlanningContext
from agenticdb.targets.base import Target


def context_of(
    target: Target,
    *,
    workload_class: str = "oltp",
    memory: int | None = None,
    benchmark: str = "pgbench",
    load: Callable[[], None] | None = None,
) -> PlanningContext:
    """A planning context read from a real server: catalog, values in effect, a 1-s statistics delta and this
    host's hardware (``memory``: a cgroup limit to pretend, bytes; ``load``: run between the two statistics
    readings)."""
    catalog = target.catalog()
    current = target.current_values()
    before = target.runtime_state()
    if load is not None:
        load()
    time.sleep(1.0)
    delta = StateDelta.between(before, target.runtime_state())
    hw = detect_hardware(target.data_dir)
    if memory is not None:
        hw = hw.model_copy(update={"memory_limit_bytes": memory, "cgroup_memory_limit_bytes": memory})
    fp = Fingerprint(
        dbms=catalog.target,
        version_major=target.version_major(),
        benchmark=benchmark,
        workload_class=workload_class,  # type: ignore[arg-type]
        read_fraction=0.9,
    )
    profile = RuntimeProfile(
        target=catalog.target, dbms_version=target.version(), hardware=hw, current_config=current, baseline_state=delta
    )
    return PlanningContext(profile=profile, fingerprint=fp, catalog=catalog, stage=Layer.dbms, current_config=current)
