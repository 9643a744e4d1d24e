"""The knob space Optuna's TPE searches (competitors ``tpe`` and ``oracle``), and how a sampled value is
spelled for each DBMS. The knob families are the ones the heuristic planner's playbooks touch; memory
ranges are bounded by the server's memory so that most samples fit agenticdb's memory-budget check.
"""

from __future__ import annotations

MiB = 2**20
GiB = 2**30


# Each entry: ("int_bytes", low, high) sizes in bytes (sampled on a log scale); ("int", low, high);
# ("float", lo, hi); ("cat", [values]).


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
