"""Static, hardware-only recommendations (competitor 2) and the TPE search space (competitor 3).

PostgreSQL — PGTune-style formulas, restated from the published rules of PGTune
(https://pgtune.leopard.in.ua, le0pard/pgtune) for DB type "oltp"/"dw", SSD storage:
  shared_buffers = RAM/4; effective_cache_size = 3·RAM/4; maintenance_work_mem = RAM/16 (dw: RAM/8),
  capped at 2 GB; checkpoint_completion_target = 0.9; wal_buffers = 3 % of shared_buffers, at most
  16 MB; default_statistics_target = 100 (dw: 500); random_page_cost = 1.1 and
  effective_io_concurrency = 200 (SSD); min/max_wal_size = 2 GB/8 GB (oltp) or 4 GB/16 GB (dw);
  work_mem = (RAM − shared_buffers) / (3 · max_connections) / max_parallel_workers_per_gather
  (dw: halved once more), at least 64 kB; parallel worker settings only with ≥ 4 CPUs.
"RAM" is the memory the server may use: the cgroup limit when there is one (what a DBA would type
into PGTune for a container).

MariaDB — MySQLTuner-style (major/MySQLTuner-perl recommendations): InnoDB buffer pool large enough for
the data but at most 75 % of the memory on a dedicated server; innodb_log_file_size = 25 % of the buffer
pool; one buffer pool instance under 1 GB; innodb_log_buffer_size 16 MB; tmp_table_size =
max_heap_table_size = 32 MB; key_buffer_size and aria_pagecache_buffer_size cut to 8 MB when no
MyISAM/Aria tables are used. Under 4 GiB the pool is capped at 40 % and sort_buffer_size cut to 256K so the
per-connection buffers × max_connections still fit (MySQLTuner's maximum-possible-memory check).
"""

from __future__ import annotations

import math

MiB = 2**20
GiB = 2**30


def _size(nbytes: float, unit: str = "MB") -> str:
    if unit == "kB":
        return f"{max(64, int(nbytes // 1024))}kB"
    return f"{max(1, int(nbytes // MiB))}MB"


def pgtune(
    memory_bytes: int, cpus: int, max_connections: int, olap: bool, disk_free_bytes: int | None = None
) -> dict[str, str]:
    """PGTune-style recommendation (see module docstring for the rules and their source).

    Args:
        memory_bytes: memory the server may use, bytes.
        cpus: CPU count.
        max_connections: the server's max_connections.
        olap: DB type "dw" (True) or "oltp" (False).
        disk_free_bytes: when given, max_wal_size is capped at 1/4 of it (disk budget).

    Returns:
        knob → value in PostgreSQL spelling.
    """
    ram = memory_bytes
    sb = ram / 4
    workers = min(4, math.ceil(cpus / 2)) if cpus >= 4 else 2  # PG default 2 when pgtune leaves it
    work_mem = (ram - sb) / (3 * max_connections) / workers
    if olap:
        work_mem /= 2
    wal_buffers = min(16 * MiB, sb * 0.03)
    max_wal = (16 if olap else 8) * GiB
    if disk_free_bytes:
        max_wal = min(max_wal, disk_free_bytes / 4)
    rec = {
        "shared_buffers": _size(sb),
        "effective_cache_size": _size(ram * 3 / 4),
        "maintenance_work_mem": _size(min(2 * GiB, ram / (8 if olap else 16))),
        "checkpoint_completion_target": "0.9",
        "wal_buffers": _size(max(wal_buffers, 64 * 1024), "kB"),
        "default_statistics_target": "500" if olap else "100",
        "random_page_cost": "1.1",
        "effective_io_concurrency": "200",
        "work_mem": _size(work_mem, "kB"),
        "min_wal_size": _size(min(max_wal / 4, (4 if olap else 2) * GiB)),
        "max_wal_size": _size(max_wal),
    }
    if cpus >= 4:
        rec.update(
            {
                "max_worker_processes": str(cpus),
                "max_parallel_workers": str(cpus),
                "max_parallel_workers_per_gather": str(workers),
            }
        )
    return rec


def mysqltuner(memory_bytes: int, data_bytes: int) -> dict[str, str]:
    """MySQLTuner-style recommendation for MariaDB (module docstring gives the rules and source).

    Args:
        memory_bytes: memory the server may use, bytes.
        data_bytes: InnoDB data + index size, bytes.
    """
    # 75 % of memory is MySQLTuner's ceiling on a dedicated server; the per-connection buffers
    # (sort/join/read × max_connections) must fit beside it, so stay at 50 % of a small cgroup.
    small = memory_bytes < 4 * GiB
    pool = min(memory_bytes * (0.4 if small else 0.75), max(data_bytes * 1.1, 128 * MiB))
    pool = max(pool, 32 * MiB)
    rec = {
        # MySQLTuner sizes the MyISAM key cache to the MyISAM indexes and flags Aria page cache left at
        # its default when no Aria tables are used: both are ~0 here (InnoDB only), so shrink them.
        "key_buffer_size": "8M",
        "aria_pagecache_buffer_size": "8M",
        "innodb_buffer_pool_size": f"{int(pool // MiB)}M",
        "innodb_log_file_size": f"{max(48, int(pool * 0.25 // MiB))}M",
        "innodb_log_buffer_size": "16M",
        "tmp_table_size": "32M",
        "max_heap_table_size": "32M",
    }
    if small:
        # MySQLTuner's "maximum possible memory usage" (global + per-thread buffers × max_connections)
        # must stay below RAM; its advice is to reduce per-thread buffers: sort_buffer_size 2M → 256K.
        rec["sort_buffer_size"] = "256K"
    return rec


# ---- TPE search space (same knob families the heuristic planner's playbooks touch) --------------------
# ("int_bytes", low, high) sizes in bytes (sampled on a log scale); ("int", low, high); ("float", lo, hi);
# ("cat", [values]).


def pg_space(memory_bytes: int, max_connections: int = 100) -> dict[str, tuple]:
    """PostgreSQL knob space for TPE, memory sizes bounded by the server's memory so that most samples
    fit agenticdb's memory-budget check (shared_buffers + work_mem × max_connections + maintenance)."""
    return {
        "shared_buffers": ("int_bytes", 16 * MiB, int(memory_bytes * 0.4)),
        "work_mem": ("int_bytes", 64 * 1024, max(256 * 1024, int(memory_bytes * 0.2 / max_connections))),
        "effective_cache_size": ("int_bytes", 64 * MiB, max(128 * MiB, memory_bytes)),
        "max_wal_size": ("int_bytes", 32 * MiB, 4 * GiB),
        "checkpoint_timeout": ("int", 30, 1800),
        "checkpoint_completion_target": ("float", 0.5, 0.9),
        "wal_buffers": ("int_bytes", 64 * 1024, 64 * MiB),
        "commit_delay": ("int", 0, 1000),
        "commit_siblings": ("int", 1, 10),
        "random_page_cost": ("float", 1.0, 4.0),
        "effective_io_concurrency": ("int", 1, 256),
        "max_parallel_workers_per_gather": ("int", 0, 2),
        "jit": ("cat", ["on", "off"]),
    }


def mariadb_space(memory_bytes: int) -> dict[str, tuple]:
    """MariaDB knob space for TPE."""
    return {
        "innodb_buffer_pool_size": ("int_bytes", 32 * MiB, int(memory_bytes * 0.6)),
        "key_buffer_size": ("int_bytes", 8 * MiB, 128 * MiB),
        "aria_pagecache_buffer_size": ("int_bytes", 8 * MiB, 128 * MiB),
        "innodb_log_file_size": ("int_bytes", 48 * MiB, 1 * GiB),
        "innodb_log_buffer_size": ("int_bytes", 2 * MiB, 64 * MiB),
        "innodb_io_capacity": ("int", 100, 4000),
        "innodb_flush_neighbors": ("cat", ["0", "1"]),
        "innodb_adaptive_hash_index": ("cat", ["ON", "OFF"]),
        "table_open_cache": ("int", 400, 4000),
        "sort_buffer_size": ("int_bytes", 256 * 1024, 2 * MiB),
    }


def render(name: str, kind: str, raw: float | str, dbms: str) -> str:
    """A sampled value in the DBMS's spelling ("64MB"/"64M", plain numbers, enum words)."""
    if kind == "int_bytes":
        b = int(raw)
        if dbms == "postgres":
            return f"{max(64, b // 1024)}kB"
        return f"{max(1, b // MiB)}M"
    if kind == "float":
        return f"{float(raw):.2f}"
    if kind == "int":
        return str(int(raw)) + ("s" if name == "checkpoint_timeout" else "")
    return str(raw)
