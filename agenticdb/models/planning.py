"""What a planner is given (docs/architecture.md "Roles"): :class:`PlanningContext`, the tuning problem's
:class:`Fingerprint` and the :class:`Experience` retrieved for it (with its :class:`HostOrigin`). The other
types crossing module boundaries are in :mod:`agenticdb.models`."""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import Field

from agenticdb.models import Catalog, FailedCheck, Layer, RoundOutcome, RuntimeProfile, StateDelta, Strict


class Fingerprint(Strict):
    """What makes two tuning problems alike: DBMS, workload and scale (docs/architecture.md, "Memory Book").

    ``read_fraction`` in [0, 1]; ``scale`` is the benchmark's scale (pgbench scale, rows per table,
    TPC-H scale factor); ``concurrency`` the client count.
    """

    dbms: str
    version_major: str
    benchmark: str
    workload_class: Literal["oltp", "olap", "mixed"]
    read_fraction: float
    access_pattern: str = "uniform"
    scale: float = 1.0
    concurrency: int = 1
    objective: str = "tps_per_p95"
    memory_gib: float = 0.0
    cpu_count: int = 0


class HostOrigin(Strict):
    """The host an experience was learned on (issue 19): its name in a shared Memory Book and the host
    fingerprint — DBMS and major version, cores, memory (GiB, the cgroup-aware limit), storage class
    (``ssd``, ``hdd``, ``nvme`` or ``unknown``, from /sys/block/<dev>/queue/rotational) and workload class.

    ``storage_class`` stays the kernel flag's even where the opening sizes from a measured class
    (``agenticdb.host.storage_probe``): it labels where experience was learned and keys no retrieval
    (``similarity`` reads the fingerprint alone), the flag is the same in every session of a host (a probe
    may find no file to read in one), and rows already in a shared book keep their meaning."""

    host: str
    dbms: str
    version_major: str
    cpu_count: int
    memory_gib: float
    storage_class: str = "unknown"
    workload_class: str = "oltp"


class Experience(Strict):
    """What a finished session learned, stored under its fingerprint for later sessions.

    ``beneficial`` entries: {"changes": {name: value}, "gain": relative gain, "bottleneck": ...}.
    ``ineffective`` holds changes measured worse beyond the noise band; ``inconclusive`` those that tied
    (inside the noise: no evidence either way, so later sessions may try them again).
    ``best_config_relative`` expresses byte sizes as a fraction of host memory so they scale to another
    host (key -> {"fraction_of_memory": f} or {"value": v}).
    """

    fingerprint: Fingerprint
    session_id: str
    recurring_bottlenecks: list[str] = Field(default_factory=list)
    beneficial: list[dict[str, Any]] = Field(default_factory=list)
    ineffective: list[dict[str, Any]] = Field(default_factory=list)
    inconclusive: list[dict[str, Any]] = Field(default_factory=list)
    failed: list[dict[str, Any]] = Field(default_factory=list)
    best_config: dict[str, str] = Field(default_factory=dict)
    best_config_relative: dict[str, dict[str, float | str]] = Field(default_factory=dict)
    best_gain: float = 0.0
    created_at: float = Field(default_factory=time.time)
    origin: HostOrigin | None = None
    """Where it was learned (None: written before issue 19, treated as this host's)."""


class PlanningContext(Strict):
    """Everything a planner may read (docs/architecture.md "Roles")."""

    profile: RuntimeProfile
    fingerprint: Fingerprint
    catalog: Catalog
    stage: Layer
    rounds: list[RoundOutcome] = Field(default_factory=list)
    experience: list[Experience] = Field(default_factory=list)
    best_config: dict[str, str] = Field(default_factory=dict)
    current_config: dict[str, str] = Field(default_factory=dict)
    last_delta: StateDelta | None = None
    validator_feedback: list[FailedCheck] = Field(default_factory=list)
    max_changes: int = 4
    max_step_factor: float = 4.0
    allow_restart: bool = True
    durability: Literal["strict", "relaxed"] = "strict"
    capacity_headroom: float = 0.25
    """``policy.capacity_headroom``: the capacity rules hold a cache at its blocks in use × (1 + this), so a trade
    gives it no lower (``agenticdb.planner.trade.kept_in_use``)."""
    untrusted_text: list[str] = Field(default_factory=list)
