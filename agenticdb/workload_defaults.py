"""Per-workload defaults for a first run, and the size and time of a benchmark's data load.

A first ``agenticdb tune --workload KIND`` without ``--scale`` should take minutes on a small host
(2 cores, a few GiB of RAM), not load gigabytes: ``workload.scale`` means something different for each
benchmark (pgbench scale factor, sysbench/YCSB rows per table, TPC-H scale factor), so one default for
all of them cannot fit. ``WorkloadConfig`` fills the keys below from ``FIRST_RUN`` when neither the
command line, the environment nor the config file set them (precedence: CLI > env > file > these).

``estimate_load`` gives the data size and an estimated load time; ``announce_load`` prints them, with
how to pick a smaller scale, before a load that takes more than ``ANNOUNCE_S`` seconds or more than
``ANNOUNCE_BYTES`` bytes. Sizes are from the benchmarks' documentation; the load rates were measured
on the 2-core reference host (see the ``_RATE`` comments) and are rough: the host's disk and CPU decide.

This module imports nothing from agenticdb (``config`` imports it).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

#: Keys of ``WorkloadConfig`` a per-workload default may fill.
DEFAULT_KEYS = ("scale", "clients", "duration_s", "warmup_max_s")

_OLTP = {"clients": 4, "duration_s": 15.0, "warmup_max_s": 10.0}

#: workload.kind → first-run defaults. Why these:
#: - pgbench scale 10: 1,000,000 pgbench_accounts rows, about 160 MB with indexes (pgbench manual,
#:   https://www.postgresql.org/docs/15/pgbench.html: scale 1 = 100,000 accounts rows); loads in ~15 s.
#: - sysbench 100,000 rows per table × 4 tables: ~100 MB (a row is ~190 bytes of data + 2 indexes).
#: - YCSB 100,000 records of 10 × 100-byte fields (YCSB core defaults): ~110 MB.
#: - TPC-H scale factor 0.1: ~100 MB of CSV (TPC-H spec 4.2.5: SF 1 = 1 GB); the 22 queries run in
#:   seconds, so a round (baseline runs + interleaved pairs) takes a minute or two. Concurrency 1 (the
#:   power test) and no warm-up transient (an OLAP run is the whole query set).
#: - command: the user's own load; the generic defaults.
FIRST_RUN: dict[str, dict[str, float]] = {
    "pgbench": {"scale": 10, **_OLTP},
    **{f"sysbench-oltp-{m}": {"scale": 100_000, **_OLTP} for m in ("read-only", "write-only", "read-write")},
    **{f"ycsb-{w}": {"scale": 100_000, **_OLTP} for w in "abcdef"},
    "tpch": {"scale": 0.1, "clients": 1, "duration_s": 15.0, "warmup_max_s": 0.0},
    "command": {"scale": 10, **_OLTP},
}

ANNOUNCE_S = 60.0
ANNOUNCE_BYTES = 1 << 30

# Bytes in the database per unit of workload.scale (data + indexes), and load rate in bytes/s on the
# reference host (2 cores, PostgreSQL 15 sandbox, other jobs running).
_BYTES_PER_UNIT = {
    "pgbench": 16_000_000,  # per scale unit: 100,000 accounts rows + keys (scale 10 measured 150 MB)
    "sysbench": 250,  # per row per table: id, k, c CHAR(120), pad CHAR(60), 2 indexes (4 × 100,000: 100 MB)
    "ycsb": 1_150,  # per record: 10 × 100-byte fields + key + row header (100,000 records: 113 MB)
    "tpch": 1_750_000_000,  # per scale factor: 1 GB of CSV; SF 0.1 measured 175 MB with indexes
}
# Measured on the reference host (PostgreSQL 15 sandbox, 2 cores, other jobs running), 2026-12-01:
# pgbench -i -s 10 in 9.7 s; sysbench prepare 4 × 100,000 rows in 11.8 s; YCSB 100,000 records in
# 36.8 s (ycsb.lua inserts row by row); TPC-H SF 0.1 (tpchgen, COPY, indexes, ANALYZE) in about 30 s.
_RATE = {
    "pgbench": 14_000_000,
    "sysbench": 8_000_000,
    "ycsb": 3_000_000,
    "tpch": 6_000_000,
}


def first_run_defaults(kind: str) -> dict[str, float]:
    """The first-run defaults of ``workload.kind`` (keys of ``DEFAULT_KEYS``); {} for an unknown kind."""
    return dict(FIRST_RUN.get(kind, {}))


def family(kind: str) -> str:
    """``pgbench``, ``sysbench``, ``ycsb``, ``tpch`` or ``command`` for a ``workload.kind``."""
    for fam in ("sysbench", "ycsb"):
        if kind.startswith(fam):
            return fam
    return kind


@dataclass(frozen=True)
class LoadEstimate:
    """Size (bytes, in the database with indexes) and estimated load time (s) of a benchmark's data."""

    kind: str
    scale: float
    bytes: int
    seconds: float

    @property
    def large(self) -> bool:
        """True when the load deserves a warning: over ``ANNOUNCE_S`` seconds or ``ANNOUNCE_BYTES`` bytes."""
        return self.seconds > ANNOUNCE_S or self.bytes > ANNOUNCE_BYTES

    def line(self) -> str:
        """One line: what will be loaded, its size and estimated time."""
        return (
            f"loading {self.kind} data at workload.scale = {self.scale:g} ({_unit(self.kind)}): "
            f"about {human_bytes(self.bytes)}, roughly {human_seconds(self.seconds)} on a 2-core host"
        )

    def text(self) -> str:
        """``line`` and, for a large load, how to choose a smaller scale."""
        if not self.large:
            return self.line()
        default = FIRST_RUN.get(self.kind, {}).get("scale")
        smaller = f"--scale {default:g}" if default is not None and default < self.scale else "a smaller --scale"
        return (
            f"{self.line()}. For a quicker first try use {smaller} (or workload.scale in the config file / "
            "AGENTICDB_WORKLOAD__SCALE); the data is kept and reused by later runs at the same scale."
        )


def _unit(kind: str) -> str:
    return {
        "pgbench": "pgbench scale factor, 100,000 accounts rows each",
        "sysbench": "rows per table",
        "ycsb": "records",
        "tpch": "TPC-H scale factor, 1 GB of CSV each",
    }.get(family(kind), "scale")


def estimate_load(kind: str, scale: float, tables: int = 1) -> LoadEstimate | None:
    """Size and load time of ``kind`` at ``scale`` (``tables``: sysbench table count); None for
    ``command`` (the user's own load has no known size)."""
    fam = family(kind)
    if fam not in _BYTES_PER_UNIT:
        return None
    size = _BYTES_PER_UNIT[fam] * scale * (max(1, tables) if fam == "sysbench" else 1)
    return LoadEstimate(kind=kind, scale=scale, bytes=int(size), seconds=size / _RATE[fam])


def announce_load(kind: str, scale: float, tables: int = 1, file: Any = None) -> LoadEstimate | None:
    """Print the size and estimated time of a load to ``file`` (default: stderr, so piped stdout stays
    clean), with how to choose a smaller scale when it is large (``LoadEstimate.large``); returns the
    estimate (None for ``command``, whose size is unknown)."""
    est = estimate_load(kind, scale, tables)
    if est is not None:
        print(("warning: " if est.large else "") + est.text(), file=file or sys.stderr, flush=True)
    return est


def human_bytes(n: float) -> str:
    """``n`` bytes as ``1.5 GiB`` / ``160 MiB`` / ``12 KiB`` / ``80 B``."""
    for suffix, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {suffix}"
    return f"{n:g} B"


def human_seconds(s: float) -> str:
    """``s`` seconds as ``45 s`` / ``12 min`` / ``2.5 h``."""
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"
