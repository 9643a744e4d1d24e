"""PGTune's current recommendation rules for PostgreSQL on Linux, written here as cited facts.

Source: the formulas of PGTune (https://pgtune.leopard.in.ua, repository le0pard/pgtune), file
``src/features/configuration/configurationSlice.js`` as of commit 830d3bb (2026-06-09), read together
with its git history to date each rule. The rules were restated from that reading (tables of numbers
and the arithmetic they describe); no code was taken from it. Every rule below names the PGTune commit
that introduced its current form; rules without a newer commit are older than the 2023-08-06 move of
the file (e82f21b) and unchanged since.

Inputs are what a DBA types into PGTune's form (``PgTuneInputs``); all memory arithmetic is done in
kB with floor rounding, as PGTune does, and values are printed the way PGTune prints them (GB or MB
when the kB value is an exact multiple, else kB).

Rules (knob: rule [PGTune commit of its current form]):

- shared_buffers: RAM/4 (desktop RAM/16) [before e82f21b].
- effective_cache_size: 3·RAM/4 (desktop RAM/4) [before e82f21b].
- maintenance_work_mem: RAM/16 (dw RAM/8), at most 8 GB, was 2 GB [6919ea7, 2026-04-04].
- checkpoint_completion_target: 0.9 [before e82f21b].
- wal_buffers: 3 % of shared_buffers, at most 16 MB, raised to 16 MB above 14 MB, at least 32 kB
  [before e82f21b].
- default_statistics_target: 100 (dw 500) [before e82f21b].
- random_page_cost: 1.1 when the data fits in RAM; else 4 on HDD, 4 for dw, 1.1 otherwise
  [fc06b14, 2026-04-05; 3532ca0, 2026-04-19].
- effective_io_concurrency: HDD 2, SSD 200, SAN 300, NVMe 1000 [NVMe: 01bb644, 2026-04-05].
- with ≥ 4 CPUs only: max_worker_processes = max_parallel_workers = CPUs; max_parallel_workers_per_gather
  = ceil(CPUs/2), at most 4 except for dw; max_parallel_maintenance_workers = ceil(CPUs/2), at most 4
  (PG ≥ 11) [before e82f21b].
- work_mem: (RAM − shared_buffers) / ((connections + max_worker_processes) · 3), where
  max_worker_processes is the CPUs with ≥ 4 CPUs, else PostgreSQL's default 8 [7d204bd, 2025-04-30];
  halved for dw and mixed, /6 for desktop; ×1.3 when the data fits in RAM, ×0.9 when it is more than
  3× RAM [fc06b14, 2026-04-05]; at least 4 MB, was 64 kB [6919ea7, 2026-04-04].
- huge_pages: try when shared_buffers ≥ 2 GB, else off [6919ea7, 2026-04-04].
- jit: off for web, oltp and mixed (PG ≥ 12); not set for dw and desktop [bfbd524, 2026-04-04].
- wal_compression: lz4 (PG ≥ 15), on (PG 10–14) [bfbd524, 2026-04-04].
- autovacuum_max_workers: 4 with ≥ 16 CPUs, 5 with ≥ 32 CPUs [bfbd524, 2026-04-04].
- autovacuum_work_mem: 2 GB when maintenance_work_mem ≥ 2 GB [bfbd524, 2026-04-04].
- min_wal_size / max_wal_size: web and mixed 1 GB / 4 GB, oltp 2 GB / 8 GB, dw 4 GB / 16 GB, desktop
  100 MB / 2 GB [before e82f21b].
- wal_level = minimal and max_wal_senders = 0 for desktop [af1b8b5, 2024-08-03].

The later commits to the file (io_method / io_workers, 421728c and 830d3bb) concern PostgreSQL 18 only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

PGTUNE_COMMIT = "830d3bb"
PGTUNE_DATE = "2026-06-09"
LABEL = f"PGTune (rules as of {PGTUNE_DATE}, le0pard/pgtune@{PGTUNE_COMMIT})"
"""Row label in the harness table."""

DbType = Literal["web", "oltp", "dw", "desktop", "mixed"]
Storage = Literal["hdd", "ssd", "san", "nvme"]
DbSize = Literal["less_ram", "mid_ram", "greater_ram"]

KB_PER_MB = 1024
KB_PER_GB = 1024 * 1024
WORK_MEM_FLOOR_KB = 4 * KB_PER_MB  # 6919ea7
DEFAULT_MAX_WORKER_PROCESSES = 8  # PostgreSQL's default, used by PGTune when it sets no parallel knobs

# Per database type: (shared_buffers divisor, effective_cache_size fraction, maintenance divisor,
# default_statistics_target, work_mem divisor after the connection formula, min_wal_size MB,
# max_wal_size MB).
_BY_TYPE: dict[str, tuple[int, float, int, int, int, int, int]] = {
    "web": (4, 0.75, 16, 100, 1, 1024, 4096),
    "oltp": (4, 0.75, 16, 100, 1, 2048, 8192),
    "dw": (4, 0.75, 8, 500, 2, 4096, 16384),
    "desktop": (16, 0.25, 16, 100, 6, 100, 2048),
    "mixed": (4, 0.75, 16, 100, 2, 1024, 4096),
}
_IO_CONCURRENCY: dict[str, int] = {"hdd": 2, "ssd": 200, "san": 300, "nvme": 1000}
_DATA_SIZE_WORK_MEM: dict[str, float] = {"less_ram": 1.3, "mid_ram": 1.0, "greater_ram": 0.9}


@dataclass(frozen=True)
class PgTuneInputs:
    """What a DBA types into PGTune's form (OS is Linux here).

    Attributes:
        memory_bytes: "Total Memory (RAM)": the memory the server may use (cgroup limit), bytes.
        cpus: "Number of CPUs".
        connections: "Number of Connections": the server's max_connections.
        storage: "Data Storage": hdd / ssd / san / nvme.
        db_type: "DB Type": web / oltp / dw / desktop / mixed.
        db_size: "Total Data Size": less_ram / mid_ram (1×–3× RAM) / greater_ram (> 3× RAM).
        pg_version: major version of the server.
    """

    memory_bytes: int
    cpus: int
    connections: int
    storage: Storage
    db_type: DbType
    db_size: DbSize
    pg_version: int = 15

    def __post_init__(self) -> None:
        if self.memory_bytes < 1024 * 1024:
            raise ValueError(f"memory_bytes={self.memory_bytes}: PGTune needs at least 1 MB of RAM")
        if self.cpus < 1 or self.connections < 1:
            raise ValueError(f"cpus={self.cpus}, connections={self.connections}: both must be at least 1")
        for field, value, allowed in (
            ("storage", self.storage, _IO_CONCURRENCY),
            ("db_type", self.db_type, _BY_TYPE),
            ("db_size", self.db_size, _DATA_SIZE_WORK_MEM),
        ):
            if value not in allowed:
                raise ValueError(f"{field}={value!r}: expected one of {sorted(allowed)} (PGTune's form)")


def format_kb(kb: int) -> str:
    """A kB amount the way PGTune prints it: "2GB" / "512MB" when exact, else "7864kB"."""
    if kb % KB_PER_GB == 0:
        return f"{kb // KB_PER_GB}GB"
    if kb % KB_PER_MB == 0:
        return f"{kb // KB_PER_MB}MB"
    return f"{kb}kB"


def _parallel(inp: PgTuneInputs) -> dict[str, int]:
    if inp.cpus < 4:
        return {}
    half = math.ceil(inp.cpus / 2)
    out = {
        "max_worker_processes": inp.cpus,
        "max_parallel_workers_per_gather": half if inp.db_type == "dw" else min(half, 4),
    }
    if inp.pg_version >= 10:
        out["max_parallel_workers"] = inp.cpus
    if inp.pg_version >= 11:
        out["max_parallel_maintenance_workers"] = min(half, 4)
    return out


def work_mem_kb(inp: PgTuneInputs, shared_buffers_kb: int) -> int:
    """work_mem in kB (rule in the module table; divisor 7d204bd, floor 6919ea7, data size fc06b14)."""
    ram_kb = inp.memory_bytes // 1024
    workers = _parallel(inp).get("max_worker_processes", DEFAULT_MAX_WORKER_PROCESSES)
    per_conn = (ram_kb - shared_buffers_kb) / ((inp.connections + workers) * 3)
    kb = math.floor(per_conn / _BY_TYPE[inp.db_type][4])
    factor = _DATA_SIZE_WORK_MEM[inp.db_size]
    if factor != 1.0:
        kb = math.floor(kb * factor)
    return max(kb, WORK_MEM_FLOOR_KB)


def random_page_cost(inp: PgTuneInputs) -> float:
    """1.1 when the data fits in RAM; 4 on HDD; 4 for dw that does not fit; else 1.1 (3532ca0)."""
    if inp.db_size == "less_ram":
        return 1.1
    if inp.storage == "hdd" or inp.db_type == "dw":
        return 4.0
    return 1.1


def recommend(inp: PgTuneInputs) -> dict[str, str]:
    """PGTune's recommendation for ``inp`` (every rule and its commit: module docstring).

    Returns:
        knob → value in PostgreSQL spelling. max_connections is PGTune's input, not a change, and is
        left out.
    """
    sb_div, ecs_frac, mwm_div, stats, _wm_div, min_wal_mb, max_wal_mb = _BY_TYPE[inp.db_type]
    ram_kb = inp.memory_bytes // 1024
    sb = ram_kb // sb_div
    mwm = min(ram_kb // mwm_div, 8 * KB_PER_GB)
    wal = min(math.floor(sb * 3 / 100), 16 * KB_PER_MB)
    if 14 * KB_PER_MB < wal < 16 * KB_PER_MB:
        wal = 16 * KB_PER_MB
    wal = max(wal, 32)
    rpc = random_page_cost(inp)
    rec: dict[str, str] = {
        "shared_buffers": format_kb(sb),
        "effective_cache_size": format_kb(math.floor(ram_kb * ecs_frac)),
        "maintenance_work_mem": format_kb(mwm),
        "checkpoint_completion_target": "0.9",
        "wal_buffers": format_kb(wal),
        "default_statistics_target": str(stats),
        "random_page_cost": "4" if rpc == 4.0 else f"{rpc:g}",
        "effective_io_concurrency": str(_IO_CONCURRENCY[inp.storage]),
        "work_mem": format_kb(work_mem_kb(inp, sb)),
        "huge_pages": "try" if sb >= 2 * KB_PER_GB else "off",
        "min_wal_size": format_kb(min_wal_mb * KB_PER_MB),
        "max_wal_size": format_kb(max_wal_mb * KB_PER_MB),
    }
    if inp.pg_version >= 12 and inp.db_type in ("web", "oltp", "mixed"):
        rec["jit"] = "off"
    if inp.pg_version >= 15:
        rec["wal_compression"] = "lz4"
    elif inp.pg_version >= 10:
        rec["wal_compression"] = "on"
    if inp.cpus >= 16:
        rec["autovacuum_max_workers"] = "5" if inp.cpus >= 32 else "4"
    if mwm >= 2 * KB_PER_GB:
        rec["autovacuum_work_mem"] = format_kb(2 * KB_PER_GB)
    rec.update({k: str(v) for k, v in _parallel(inp).items()})
    if inp.db_type == "desktop":
        rec.update({"wal_level": "minimal", "max_wal_senders": "0"})
    return rec


# ---- the inputs a DBA would type, read from the host --------------------------------------------------


def storage_class(device: str | None, sys: str = "/sys") -> Storage:
    """PGTune's "Data Storage" from the data device: ``queue/rotational`` = 1 → hdd, else nvme for an
    nvme* device, else ssd. Unknown device → ssd (PGTune's form default).

    A virtio disk (vda) reports rotational = 1 unless the hypervisor says otherwise, so on such a VM
    a DBA reading the flag picks HDD (Linux Documentation/block/queue-sysfs.rst, "rotational").
    """
    if not device:
        return "ssd"
    try:
        rotational = (Path(sys) / "block" / device / "queue" / "rotational").read_text().strip()
    except OSError:
        return "ssd"
    if rotational == "1":
        return "hdd"
    return "nvme" if device.startswith("nvme") else "ssd"


def data_size_class(data_bytes: int, memory_bytes: int) -> DbSize:
    """PGTune's "Total Data Size" choice: less than RAM, 1×–3× RAM, or more than 3× RAM (fc06b14)."""
    if data_bytes < memory_bytes:
        return "less_ram"
    if data_bytes <= 3 * memory_bytes:
        return "mid_ram"
    return "greater_ram"


def db_type_for(workload_class: str) -> DbType:
    """PGTune's "DB Type" for a workload class: olap → dw, anything else → oltp."""
    return "dw" if workload_class == "olap" else "oltp"
