"""Workload kinds, self-described: the one table (:data:`KINDS`) of what each ``workload.kind`` is.

Each :class:`KindSpec` says what the kind is (``description``), which ``workload.objective`` values it
can produce, its first-run defaults, the size and load rate of its data, whether it only observes the
application (``live``), where it runs and which class builds it. Everything that knows about kinds reads
this table: the configuration (the allowed ``workload.kind`` values and so the ``--workload`` help, the
objective check ``config.PRODUCIBLE_OBJECTIVES``, the first-run defaults, the target and command checks),
``workloads.registry`` (the builder, imported only when a workload is built), ``app`` (observe-only
kinds) and the workloads' load announcements. Adding a kind: its ``Workload`` module under
``agenticdb/workloads/`` and one ``KindSpec`` in :data:`KINDS` (docs/architecture.md "Adding a workload
kind").

First-run defaults: a first ``agenticdb tune --workload KIND`` without ``--scale`` should take minutes
on a small host (2 cores, a few GiB of RAM), not load gigabytes: ``workload.scale`` means something
different for each benchmark (pgbench scale factor, sysbench/YCSB rows per table, TPC-H scale factor),
so one default for all of them cannot fit. ``WorkloadConfig`` fills the keys of ``DEFAULT_KEYS`` from
``KindSpec.first_run`` when neither the command line, the environment nor the config file set them
(precedence: CLI > env > file > these).

``estimate_load`` gives the data size and an estimated load time; ``announce_load`` prints them, with
how to pick a smaller scale, before a load that takes more than ``ANNOUNCE_S`` seconds or more than
``ANNOUNCE_BYTES`` bytes. Sizes are from the benchmarks' documentation; the load rates were measured
on the 2-core reference host (see :class:`LoadSize`) and are rough: the host's disk and CPU decide.

This module imports nothing from agenticdb (layer 1; ``config`` imports it).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: Keys of ``WorkloadConfig`` a per-workload default may fill.
DEFAULT_KEYS = ("scale", "clients", "duration_s", "warmup_max_s")

ANNOUNCE_S = 60.0
ANNOUNCE_BYTES = 1 << 30


@dataclass(frozen=True)
class LoadSize:
    """The data a benchmark loads: ``bytes_per_unit`` in the database (data + indexes) per unit of
    ``workload.scale`` (times ``workload.tables`` when ``per_table``), the load ``rate`` in bytes/s on
    the 2-core reference host, and what one ``unit`` of scale is (for the announcement)."""

    bytes_per_unit: float
    rate: float
    unit: str
    per_table: bool = False


# Sizes and rates. Rates measured on the reference host (PostgreSQL 15 sandbox, 2 cores, other jobs
# running), 2026-12-01: pgbench -i -s 10 in 9.7 s; sysbench prepare 4 × 100,000 rows in 11.8 s; YCSB
# 100,000 records in 36.8 s (ycsb.lua inserts row by row). TPC-H (tpchgen, COPY, indexes, ANALYZE), 2026-12-06,
# `nice -n 19 .venv/bin/python -m benchmarks.bench_tpch_load 0.1 0.3 1` beside a benchmark (load average 8 on
# 2 cores): CPU time 6.0 s, 17.4 s and 50.4 s (wall 21 s, 70 s and 171 s, the wall time of a loaded host); a new
# user's demo loaded SF 0.3 in ~12 s on this host when quiet. The old 6 MB/s (SF 0.1 in ~30 s on a loaded host)
# said 88 s for SF 0.3.
_PGBENCH_LOAD = LoadSize(
    16_000_000,  # per scale unit: 100,000 accounts rows + keys (scale 10 measured 150 MB)
    14_000_000,
    "pgbench scale factor, 100,000 accounts rows each",
)
_SYSBENCH_LOAD = LoadSize(
    250,  # per row per table: id, k, c CHAR(120), pad CHAR(60), 2 indexes (4 × 100,000: 100 MB)
    8_000_000,
    "rows per table",
    per_table=True,
)
_YCSB_LOAD = LoadSize(
    1_150,  # per record: 10 × 100-byte fields + key + row header (100,000 records: 113 MB)
    3_000_000,
    "records",
)
_TPCH_LOAD = LoadSize(
    1_750_000_000,  # per scale factor: 1 GB of CSV; SF 0.1 measured 175 MB with indexes (SF 1: 1,755 MB)
    # 25 MB/s: a little under the measured CPU-time rates (29, 30, 35 MB/s at SF 0.1, 0.3, 1), so the estimate
    # (7 s, 21 s, 70 s) stays on the long side of an idle host's load and within 2 × of it (SF 0.3: 12 s)
    25_000_000,
    "TPC-H scale factor, 1 GB of CSV each",
)

# First-run defaults. Why these:
# - pgbench scale 10: 1,000,000 pgbench_accounts rows, about 160 MB with indexes (pgbench manual,
#   https://www.postgresql.org/docs/15/pgbench.html: scale 1 = 100,000 accounts rows); loads in ~15 s.
# - sysbench 100,000 rows per table × 4 tables: ~100 MB (a row is ~190 bytes of data + 2 indexes).
# - YCSB 100,000 records of 10 × 100-byte fields (YCSB core defaults): ~110 MB.
# - TPC-H scale factor 0.1: ~100 MB of CSV (TPC-H spec 4.2.5: SF 1 = 1 GB); the 22 queries run in
#   seconds, so a round (baseline runs + interleaved pairs) takes a minute or two. Concurrency 1 (the
#   power test) and no warm-up transient (an OLAP run is the whole query set).
# - command: the user's own load; the generic defaults.
# - live: none (the application's own load; the generic defaults of WorkloadConfig apply).
_OLTP = {"clients": 4, "duration_s": 15.0, "warmup_max_s": 10.0}

OLTP_OBJECTIVES = ("tps_per_p95", "tps", "p95", "p99")
"""OLTP benchmarks run for a fixed time, so a total time says nothing (agenticdb.workloads.steady scores
tps and percentiles)."""
OLAP_OBJECTIVES = ("total_time", "p95", "p99")
"""TPC-H runs a fixed query set once: no transactions, so no tps (22 queries / total time is the total
time under another name); its percentiles are those of the query times (agenticdb.workloads.tpch)."""


@dataclass(frozen=True)
class KindSpec:
    """One ``workload.kind``.

    Attributes:
        name: the ``workload.kind`` value.
        description: what it runs, in a few words.
        objectives: the ``workload.objective`` values it can produce; None: not known in advance (the
            command's output decides); (): it takes none (live scores its own ``live_time_index``).
        first_run: first-run defaults, keys of ``DEFAULT_KEYS`` (empty: the generic defaults).
        load: the size and load rate of its data; None: unknown (command) or nothing loaded (live).
        builder: ``"module:attribute"`` of the class (or function) that builds it, imported only when
            a workload is built (``workloads.registry.build_workload``). A load generator is called as
            ``builder(cfg, conn, *variant, progress=...)``, an observe-only kind as
            ``builder(cfg, live, conn)`` (``live``: the ``[live]`` settings).
        variant: an extra argument of the builder (the sysbench script, the YCSB core workload letter).
        observes_only: sends no load; measures the application's own statements (live mode). ``app``
            refuses restart changes without a restart window and checks its set-up before the session.
        targets: the ``target.kind`` values it runs on; () = every target.
        targets_label: those targets in words, for the error message (e.g. "PostgreSQL").
        needs_command: ``workload.command`` must be set (the shell command to run).
        tools: names of the benchmark tool processes its runs start (the daemon kills them on a second
            stop signal, ``daemon.BENCHMARK_TOOLS``).
    """

    name: str
    description: str
    objectives: tuple[str, ...] | None
    builder: str
    first_run: Mapping[str, float] = field(default_factory=dict)
    load: LoadSize | None = None
    variant: str | None = None
    observes_only: bool = False
    targets: tuple[str, ...] = ()
    targets_label: str = ""
    needs_command: bool = False
    tools: tuple[str, ...] = ()


_WL = "agenticdb.workloads."
_YCSB = {  # YCSB wiki "Core Workloads"
    "a": "update heavy: 50% reads, 50% updates, zipfian",
    "b": "read mostly: 95% reads, 5% updates, zipfian",
    "c": "read only, zipfian",
    "d": "read latest: 95% reads, 5% inserts, latest records",
    "e": "short ranges: 95% scans, 5% inserts, zipfian",
    "f": "read-modify-write: 50% reads, 50% read-modify-writes, zipfian",
}

KINDS: tuple[KindSpec, ...] = (
    KindSpec(
        "pgbench",
        "pgbench's TPC-B-like transactions",
        OLTP_OBJECTIVES,
        _WL + "pgbench:PgbenchWorkload",
        first_run={"scale": 10, **_OLTP},
        load=_PGBENCH_LOAD,
        targets=("postgresql",),
        targets_label="PostgreSQL",  # pgbench speaks only the PostgreSQL protocol
        tools=("pgbench",),
    ),
    *(
        KindSpec(
            f"sysbench-oltp-{mode}",
            f"sysbench {script}",
            OLTP_OBJECTIVES,
            _WL + "sysbench:SysbenchWorkload",
            first_run={"scale": 100_000, **_OLTP},
            load=_SYSBENCH_LOAD,
            variant=script,
            tools=("sysbench",),
        )
        for mode, script in (
            ("read-only", "oltp_read_only"),
            ("write-only", "oltp_write_only"),
            ("read-write", "oltp_read_write"),
        )
    ),
    *(
        KindSpec(
            f"ycsb-{letter}",
            f"YCSB workload {letter.upper()} ({mix})",
            OLTP_OBJECTIVES,
            _WL + "sysbench:YcsbWorkload",
            first_run={"scale": 100_000, **_OLTP},
            load=_YCSB_LOAD,
            variant=letter,
            tools=("sysbench",),  # ycsb.lua runs in sysbench
        )
        for letter, mix in _YCSB.items()
    ),
    KindSpec(
        "tpch",
        "the 22 TPC-H queries, run once (OLAP)",
        OLAP_OBJECTIVES,
        _WL + "tpch:TpchWorkload",
        first_run={"scale": 0.1, "clients": 1, "duration_s": 15.0, "warmup_max_s": 0.0},
        load=_TPCH_LOAD,
    ),
    KindSpec(
        "command",
        "your own shell command; its result line is the measurement",
        None,
        _WL + "command:CommandWorkload",
        first_run={"scale": 10, **_OLTP},
        needs_command=True,
    ),
    KindSpec(
        "live",
        "observe the application's own statements; no load of ours",
        (),
        _WL + "live:build_live",
        observes_only=True,
    ),
)
"""Every workload kind, in the order ``--workload`` lists them."""

KIND_NAMES: tuple[str, ...] = tuple(k.name for k in KINDS)
_BY_NAME: dict[str, KindSpec] = {k.name: k for k in KINDS}

FIRST_RUN: dict[str, dict[str, float]] = {k.name: dict(k.first_run) for k in KINDS if k.first_run}
"""workload.kind → first-run defaults (the kinds that have some), read from :data:`KINDS`."""


def kind_spec(name: str) -> KindSpec:
    """The spec of ``workload.kind`` ``name``.

    Raises:
        KeyError: not a workload kind (the message lists them).
    """
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"workload.kind={name!r}: expected one of {', '.join(KIND_NAMES)}") from None


def kind_patterns(specs: tuple[KindSpec, ...] | list[KindSpec]) -> str:
    """The kinds of ``specs`` in words, kinds of one builder shortened to their common prefix and ``*``:
    ``"sysbench-oltp-*, ycsb-*, tpch or command"``."""
    groups: dict[str, list[str]] = {}
    for spec in specs:
        groups.setdefault(spec.builder, []).append(spec.name)
    words = [names[0] if len(names) == 1 else os.path.commonprefix(names) + "*" for names in groups.values()]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def kinds_help() -> str:
    """Every kind with its description, ``"pgbench: pgbench's TPC-B-like transactions; …"`` (the
    description of ``workload.kind`` in the configuration model)."""
    return "; ".join(f"{k.name}: {k.description}" for k in KINDS)


def other_kinds_for(name: str) -> str:
    """The load-generating kinds that run on every target, but ``name``, in words (:func:`kind_patterns`):
    what to use when ``name`` does not fit the target."""
    return kind_patterns([k for k in KINDS if k.name != name and not k.targets and not k.observes_only])


def first_run_defaults(kind: str) -> dict[str, float]:
    """The first-run defaults of ``workload.kind`` (keys of ``DEFAULT_KEYS``); {} for an unknown kind."""
    return dict(FIRST_RUN.get(kind, {}))


@dataclass(frozen=True)
class LoadEstimate:
    """Size (bytes, in the database with indexes) and estimated load time (s) of a benchmark's data."""

    kind: str
    scale: float
    bytes: int
    seconds: float
    unit: str = "scale"

    @property
    def large(self) -> bool:
        """True when the load deserves a warning: over ``ANNOUNCE_S`` seconds or ``ANNOUNCE_BYTES`` bytes."""
        return self.seconds > ANNOUNCE_S or self.bytes > ANNOUNCE_BYTES

    def line(self) -> str:
        """One line: what will be loaded, its size and estimated time."""
        return (
            f"loading {self.kind} data at workload.scale = {self.scale:g} ({self.unit}): "
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


def estimate_load(kind: str, scale: float, tables: int = 1) -> LoadEstimate | None:
    """Size and load time of ``kind`` at ``scale`` (``tables``: sysbench table count, counted when the
    kind's ``LoadSize.per_table``); None for ``command`` and ``live`` (no known size) and unknown kinds."""
    spec = _BY_NAME.get(kind)
    if spec is None or spec.load is None:
        return None
    load = spec.load
    size = load.bytes_per_unit * scale * (max(1, tables) if load.per_table else 1)
    return LoadEstimate(kind=kind, scale=scale, bytes=int(size), seconds=size / load.rate, unit=load.unit)


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
