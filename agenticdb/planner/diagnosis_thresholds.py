"""The diagnosis thresholds as data: ``catalogs/diagnosis-thresholds.toml`` (issue 37).

Each entry has a ``value``, a ``unit`` and a ``basis`` (a manual section, a measurement on this host, or
"judgement" named as such). The file is read once; the set of names is fixed here, so a missing or an
unknown name, or an entry with a missing or unknown key, is an error that names it.
"""

from __future__ import annotations

import tomllib
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agenticdb.resources import data_dir

CATALOG = "diagnosis-thresholds.toml"

NAMES = (
    "ruled_out_below",
    # host CPU
    "host_cpu_busy_lo",
    "host_cpu_busy_hi",
    "psi_cpu_lo",
    "psi_cpu_hi",
    "psi_cpu_weight",
    # host I/O
    "disk_util_lo",
    "disk_util_hi",
    "disk_queue_lo",
    "disk_queue_hi",
    "disk_await_lo_ms",
    "disk_await_hi_ms",
    "disk_await_gate_iops",
    "iowait_share_lo",
    "iowait_share_hi",
    "psi_io_lo",
    "psi_io_hi",
    # writeback
    "dirty_share_lo",
    "dirty_share_hi",
    "writeback_share_lo",
    "writeback_share_hi",
    "writeback_share_weight",
    "write_busy_lo",
    "write_busy_hi",
    "write_busy_weight",
    # memory reclaim
    "pgscan_direct_lo",
    "pgscan_direct_hi",
    "pgscan_kswapd_lo",
    "pgscan_kswapd_hi",
    "pgscan_kswapd_weight",
    "swap_lo",
    "swap_hi",
    "allocstall_lo",
    "allocstall_hi",
    "psi_memory_lo",
    "psi_memory_hi",
    # the application's statements (workload live)
    "live_spill_share_lo",
    "live_spill_share_hi",
    "live_miss_lo",
    "live_miss_hi",
    "live_miss_gate_reads",
    # volume gates of the DBMS signal tables
    "pg_miss_gate_reads",
    "pg_backend_writes_gate",
    "pg_requested_checkpoints_gate",
    "pg_read_time_gate_reads",
    "pg_jit_gate_share",
    "my_miss_gate_reads",
    "my_lock_time_gate_waits",
    "my_thread_cache_gate_connections",
)
"""Every threshold the diagnosis reads, by name."""


class Threshold(BaseModel):
    """One entry: ``value`` (float, in ``unit``), ``unit`` and ``basis`` (manual / measurement / judgement)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float
    unit: str = Field(min_length=1)
    basis: str = Field(min_length=10)


def parse(text: str, where: str = CATALOG) -> dict[str, Threshold]:
    """Validate the TOML text of the catalog into ``{name: Threshold}`` in the order of :data:`NAMES`.

    Raises:
        ValueError: the text has no ``[threshold.*]`` table, lacks a name of :data:`NAMES`, has a name
            not in it, or an entry has a missing/unknown key or a wrong type (the message names which).
    """
    raw = tomllib.loads(text).get("threshold")
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: no [threshold.<name>] tables (rule: every threshold is a table under 'threshold')")
    missing = [n for n in NAMES if n not in raw]
    unknown = sorted(set(raw) - set(NAMES))
    if missing or unknown:
        raise ValueError(
            f"{where}: missing threshold(s) {missing or 'none'}, unknown threshold(s) {unknown or 'none'} "
            "(rule: exactly the names of agenticdb.planner.diagnosis_thresholds.NAMES)"
        )
    out: dict[str, Threshold] = {}
    for name in NAMES:
        try:
            out[name] = Threshold.model_validate(raw[name])
        except ValidationError as e:
            keys = ", ".join(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors())
            raise ValueError(f"{where}: threshold {name!r}: {keys} (rule: keys value, unit, basis)") from e
    return out


@lru_cache(maxsize=1)
def thresholds() -> dict[str, Threshold]:
    """The shipped catalog, read once.

    Raises:
        ValueError: see :func:`parse`.
    """
    return parse((data_dir("catalogs") / CATALOG).read_text(), f"catalogs/{CATALOG}")


def t(name: str) -> float:
    """The value of threshold ``name``.

    Raises:
        KeyError: ``name`` is not one of :data:`NAMES`.
    """
    return thresholds()[name].value
