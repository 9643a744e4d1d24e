"""Plan evidence (issue 36 point 4): where a query set's time goes, read once from the plans of the workload's
own statements with ``EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)``, outside measured runs.

What the cumulative statistics cannot say, the executed plans do:

- JIT: the plan's "JIT" section sums the compilation time of the leader and of every parallel worker
  (PostgreSQL 15 manual, 14.1 Using EXPLAIN and 32.4 JIT Configuration; ``explain.c`` ExplainPrintJITSummary
  aggregates the workers' instrumentation). pg_stat_statements' jit_*_time counts the leader only (manual
  F.32), so with 95 % of the time in parallel plans it understates what JIT costs;
- parallel query: statements whose plans launched parallel workers (Gather / Gather Merge nodes, "Workers
  Launched"), and the time of those statements;
- temporary files and buffer misses per statement ("Temp Written Blocks", "Shared Read Blocks", BUFFERS).

EXPLAIN ANALYZE executes the statement (manual: "the statement is actually executed"): only read-only
statements (SELECT / WITH … SELECT / VALUES / TABLE) are explained, each inside a transaction that is rolled
back, under a statement timeout.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import psycopg
import structlog

from agenticdb.units.text import clip

log = structlog.get_logger(__name__)

_READ_ONLY = re.compile(r"^\s*(select|with|values|table)\b", re.IGNORECASE)
_WRITES = re.compile(r"\b(insert|update|delete|merge|create|drop|alter|truncate|copy|grant|revoke)\b", re.IGNORECASE)
SOURCE = "PostgreSQL 15 manual, 14.1 Using EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) and 32 Just-in-Time Compilation"
PROBE_LOOPS = 10_000
"""Index probes inside one nested loop (its outer side's rows: estimated, or the inner scan's actual loops) from
which a statement counts as probing (judgement: an OLTP join probes a few rows per statement; TPC-H SF 1's Q07,
Q13 and Q21 probe lineitem or orders hundreds of thousands of times, benchmarks/README.md pg-tpch-fit)."""
_INDEX_SCANS = ("Index Scan", "Index Only Scan", "Bitmap Heap Scan")


@dataclass(frozen=True)
class PlanEvidence:
    """What the executed plans of a statement set showed (times in ms, sizes in 8 kB blocks).

    Attributes:
        statements: statements explained.
        exec_ms: their execution time (sum of "Execution Time").
        jit_ms: JIT compilation time, leader and workers summed ("JIT" → "Timing" → "Total").
        jit_functions: functions JIT-compiled.
        parallel_ms: execution time of the statements whose plan launched at least one parallel worker.
        workers_planned, workers_launched: over all Gather / Gather Merge nodes.
        temp_written_blocks: temporary-file blocks written (the top plan node counts its children).
        shared_read_blocks, shared_hit_blocks: shared-buffer misses and hits.
        skipped: statement name → why it was not explained (not read-only, an error, the timeout).
        analyzed: True for EXPLAIN ANALYZE; False for plans only (nothing executed): times are then the
            baseline's per-statement times given as weights, and JIT compile time is unknown (0).
        jit_planned_ms: time of the statements whose plan JIT-compiles (plans only: the plan's "JIT" section).
        jit_planned: the names of those statements.
        jit_optimized: the names of those whose plan also inlines or optimises with LLVM (the plan's "JIT" →
            "Options" "Optimization" or "Inlining": total cost above jit_optimize_above_cost or
            jit_inline_above_cost, manual 20.7.4). Their compile time is of another order: on pg-tpch (TPC-H
            SF 1, this host, 2026-12-07) Q18's optimised compile took 3.3 s of its 8.3 s while the plain
            compiles took 40–340 ms of 1.4–5 s.
        jit_sampled: when > 0, ``jit_ms`` is estimated from EXPLAIN ANALYZE of this many of the JIT-compiling
            statements (their compile share × the JIT-compiling statements' time; see
            ``agenticdb.planner.opening_plans.workload_plans``).
        jit_borrowed: the class of JIT-compiling plans that was not sampled (left out by the budget, or every
            statement of its sample failed or timed out) and took the other class's compile share: "optimised"
            (the estimate is then a lower bound), "plain" (an upper bound), or "" (each class its own share).
        probe_ms: time of the statements whose plan probes an index inside a nested loop at least
            :data:`PROBE_LOOPS` times (:func:`index_probes`).
        probe_planned: the names of those statements.
    """

    statements: int = 0
    exec_ms: float = 0.0
    jit_ms: float = 0.0
    jit_functions: int = 0
    parallel_ms: float = 0.0
    workers_planned: int = 0
    workers_launched: int = 0
    temp_written_blocks: int = 0
    shared_read_blocks: int = 0
    shared_hit_blocks: int = 0
    skipped: dict[str, str] = field(default_factory=dict)
    analyzed: bool = True
    jit_planned_ms: float = 0.0
    jit_planned: tuple[str, ...] = ()
    jit_sampled: int = 0
    jit_optimized: tuple[str, ...] = ()
    jit_borrowed: str = ""
    probe_ms: float = 0.0
    probe_planned: tuple[str, ...] = ()

    @property
    def jit_share(self) -> float | None:
        """JIT compilation time over execution time (capped at 1; the sum over workers can exceed the wall
        time); None when nothing was explained or the plans were not executed (compile time unknown)."""
        return min(self.jit_ms / self.exec_ms, 1.0) if self.exec_ms > 0 and self.analyzed else None

    @property
    def jit_planned_share(self) -> float | None:
        """Share of the time in statements whose plans JIT-compile; None when nothing was explained."""
        return self.jit_planned_ms / self.exec_ms if self.exec_ms > 0 else None

    @property
    def probe_share(self) -> float | None:
        """Share of the time in statements whose plans probe an index inside a nested loop at least
        :data:`PROBE_LOOPS` times; None when nothing was explained."""
        return self.probe_ms / self.exec_ms if self.exec_ms > 0 else None

    @property
    def parallel_share(self) -> float | None:
        """Share of execution time in statements that ran parallel workers; None when nothing was explained."""
        return self.parallel_ms / self.exec_ms if self.exec_ms > 0 else None

    def counters(self) -> dict[str, float]:
        """The evidence as ``plans.*`` counters (a ``StateDelta.totals`` shape: ms, blocks, counts)."""
        return {
            "plans.statements": float(self.statements),
            "plans.exec_time": self.exec_ms,
            "plans.jit_time": self.jit_ms,
            "plans.jit_functions": float(self.jit_functions),
            "plans.parallel_exec_time": self.parallel_ms,
            "plans.workers_planned": float(self.workers_planned),
            "plans.workers_launched": float(self.workers_launched),
            "plans.temp_written_blocks": float(self.temp_written_blocks),
            "plans.shared_read_blocks": float(self.shared_read_blocks),
            "plans.shared_hit_blocks": float(self.shared_hit_blocks),
            "plans.jit_planned_time": self.jit_planned_ms,
            "plans.index_probe_time": self.probe_ms,
        }

    def summary(self) -> str:
        """One line for the journal: the shares and the statements explained or skipped."""
        if not self.statements:
            return f"no statement explained ({len(self.skipped)} skipped)"
        js, ps = self.jit_share or 0.0, self.parallel_share or 0.0
        if self.jit_sampled:
            return (
                f"{self.statements} statements planned, weighted by the baseline's {self.exec_ms / 1000:.1f} s: "
                f"{ps:.0%} of the time in parallel plans, {self.jit_planned_share or 0.0:.0%} in plans that "
                f"JIT-compile ({len(self.jit_optimized)} with LLVM optimisation); JIT compilation ≈ {js:.1%} of the "
                f"time (EXPLAIN ANALYZE of {self.jit_sampled} of them, leader and workers){self._probe_text()}"
                + (f"; {_BORROWED[self.jit_borrowed]}" if self.jit_borrowed in _BORROWED else "")
            )
        if not self.analyzed:
            return (
                f"{self.statements} statements planned (EXPLAIN, not executed), weighted by the baseline's "
                f"{self.exec_ms / 1000:.1f} s: {ps:.0%} of the time in parallel plans, "
                f"{self.jit_planned_share or 0.0:.0%} in plans that JIT-compile (compile time not measured)"
                + self._probe_text()
                + (f"; {len(self.skipped)} skipped" if self.skipped else "")
            )
        reads = self.shared_read_blocks + self.shared_hit_blocks
        miss = self.shared_read_blocks / reads if reads else 0.0
        return (
            f"{self.statements} statements explained ({self.exec_ms / 1000:.1f} s): JIT compilation {js:.1%} of "
            f"execution time ({self.jit_functions} functions, leader and workers), {ps:.0%} of the time in "
            f"parallel plans ({self.workers_launched}/{self.workers_planned} workers launched), "
            f"{self.temp_written_blocks * 8 / 1024:.0f} MiB written to temporary files, shared-buffer misses "
            f"{miss:.0%}{self._probe_text()}" + (f"; {len(self.skipped)} skipped" if self.skipped else "")
        )

    def _probe_text(self) -> str:
        """ ", N % in plans that probe an index inside a nested loop ≥ 10,000 times" ('' when none does)."""
        share = self.probe_share
        if not share:
            return ""
        return f", {share:.0%} in plans that probe an index inside a nested loop ≥ {PROBE_LOOPS:,} times"


_BORROWED = {
    "optimised": "no LLVM-optimised plan sampled (budget, error or timeout): their compile share taken from the "
    "plain ones, a lower bound",
    "plain": "no plain plan sampled (budget, error or timeout): their compile share taken from the LLVM-optimised "
    "ones, an upper bound",
}


def _jit_total(jit: dict[str, Any]) -> float:
    """JIT "Timing" → "Total" in ms; PostgreSQL 17 nests each phase as {"Total": …}."""
    timing = jit.get("Timing") or {}
    total = timing.get("Total")
    if isinstance(total, dict):
        total = total.get("Total")
    return float(total or 0.0)


def _walk(node: dict[str, Any]) -> tuple[int, int]:
    """(workers planned, workers launched) over the Gather / Gather Merge nodes under ``node``."""
    planned = launched = 0
    if node.get("Node Type") in ("Gather", "Gather Merge"):
        planned += int(node.get("Workers Planned") or 0)
        launched += int(node.get("Workers Launched") or 0)
    for child in node.get("Plans") or []:
        p, w = _walk(child)
        planned, launched = planned + p, launched + w
    return planned, launched


def parallel_divisor(workers: int) -> float:
    """The processes a partial plan's estimated rows are divided among under a Gather of ``workers`` planned
    workers: the workers plus the leader's share, 1 − 0.3 × workers while positive (PostgreSQL ``costsize.c``
    ``get_parallel_divisor``, parallel_leader_participation on, its default). A partial node's "Plan Rows" in
    plain EXPLAIN are per process: the whole is that × this (1 worker: 1.7, 2: 2.4, 4 or more: the workers)."""
    if workers <= 0:
        return 1.0
    return workers + max(1.0 - 0.3 * workers, 0.0)


def _inner_probes(outer: dict[str, Any], inner: dict[str, Any], processes: float) -> float:
    """The index probes of one nested loop's ``inner`` child (``outer`` its outer child; ``processes`` the
    :func:`parallel_divisor` of the Gather above it, 1 outside one), as :func:`index_probes` counts them."""
    if inner.get("Node Type") == "Materialize":
        # its child runs once and the rescans read the stored rows (nodeMaterial.c); the planner materializes only
        # an inner path that takes no parameter from the outer side (joinpath.c match_unsorted_outer)
        return 0.0
    memo = inner if inner.get("Node Type") == "Memoize" and inner.get("Plans") else None
    if memo is not None:
        inner = memo["Plans"][0]
    if inner.get("Node Type") not in _INDEX_SCANS:
        return 0.0
    loops = inner.get("Actual Loops")
    if loops is not None:  # EXPLAIN ANALYZE: every process's executions (a Memoize's: its cache misses)
        return float(loops)
    if memo is None:
        return float(outer.get("Plan Rows") or 0.0) * processes
    # a Memoize probes the index once per cache miss; PostgreSQL 15's plain EXPLAIN gives no estimate of them,
    # PostgreSQL 19's "Estimated Lookups" and "Estimated Hit Percent" (explain.c show_memoize_info)
    lookups, hits = memo.get("Estimated Lookups"), memo.get("Estimated Hit Percent")
    if lookups is None or hits is None:
        return 0.0
    return float(lookups) * (1.0 - float(hits) / 100.0) * processes


def index_probes(node: dict[str, Any], processes: float = 1.0) -> float:
    """The most index probes one nested loop under ``node`` makes: for each "Nested Loop" whose inner child is an
    index scan (Index Scan, Index Only Scan, Bitmap Heap Scan), that child's "Actual Loops" (EXPLAIN ANALYZE:
    summed over a parallel plan's processes) or else the outer child's estimated "Plan Rows" × the processes
    sharing them (plain EXPLAIN: a partial plan's rows are per process; :func:`parallel_divisor` of the Gather
    above, ``processes`` when ``node`` is under one). Under a Memoize, the probes are its cache misses (the
    child's actual loops, or the estimate PostgreSQL 19 shows; none counted without either); under a
    Materialize, none (the inner side runs once). 0 when there is none.

    Seen on PostgreSQL 15 (tests/test_plan_probes.py): a Memoize over 97 distinct keys of 600,000 outer rows
    probed 97 times and a Materialize over an index scan once, both counted 600,000 from the plain plan; a
    parallel loop of 15,000 probes counted 8,824 (per process with one worker)."""
    if node.get("Node Type") in ("Gather", "Gather Merge"):
        processes = parallel_divisor(int(node.get("Workers Planned") or 0))
    most = 0.0
    children = node.get("Plans") or []
    if node.get("Node Type") == "Nested Loop" and len(children) == 2:
        most = _inner_probes(children[0], children[1], processes)
    for child in children:
        most = max(most, index_probes(child, processes))
    return most


def parse_plan(doc: list[dict[str, Any]] | dict[str, Any]) -> dict[str, float]:
    """The figures of one ``EXPLAIN [(ANALYZE, BUFFERS,] FORMAT JSON)`` result: jit_planned (1 when the plan has a
    "JIT" section), jit_optimized (1 when its "Options" inline or optimise), exec_ms, jit_ms, jit_functions,
    workers_planned, workers_launched, temp_written, shared_read, shared_hit (0 where plain EXPLAIN has no figure),
    index_probes (:func:`index_probes`).

    Raises:
        ValueError: the document has no "Plan" (not an EXPLAIN ANALYZE result).
    """
    top = doc[0] if isinstance(doc, list) else doc
    plan = top.get("Plan")
    if not isinstance(plan, dict):
        raise ValueError(f"EXPLAIN result without a 'Plan': keys {sorted(top)}")
    planned, launched = _walk(plan)
    jit = top.get("JIT") or {}
    options = jit.get("Options") or {}
    return {
        "jit_planned": 1.0 if jit else 0.0,
        "jit_optimized": 1.0 if options.get("Optimization") or options.get("Inlining") else 0.0,
        "exec_ms": float(top.get("Execution Time") or 0.0),
        "jit_ms": _jit_total(jit),
        "jit_functions": float(jit.get("Functions") or 0),
        "workers_planned": float(planned),
        "workers_launched": float(launched),
        "temp_written": float(plan.get("Temp Written Blocks") or 0),
        "shared_read": float(plan.get("Shared Read Blocks") or 0),
        "shared_hit": float(plan.get("Shared Hit Blocks") or 0),
        "index_probes": index_probes(plan),
    }


def explain_statements(
    conn: psycopg.Connection[Any],
    statements: dict[str, str],
    timeout_s: float = 300.0,
    *,
    analyze: bool = True,
    weights_ms: dict[str, float] | None = None,
) -> PlanEvidence:
    """Run ``EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)`` once for each read-only statement of ``statements``
    (name → SQL) on ``conn`` (a connection to the workload's own database, with the configuration to be
    judged), each in a transaction rolled back, under ``statement_timeout`` = ``timeout_s``.

    With ``analyze=False`` only ``EXPLAIN (FORMAT JSON)`` runs (milliseconds: nothing is executed); each
    statement's time is then its weight in ``weights_ms`` (the baseline's measured time, ms; statements
    without one are skipped), so the shares are of the measured time.

    Returns:
        PlanEvidence; statements not read-only, or that failed or timed out, are in ``skipped`` with why.
    """
    totals = dict.fromkeys(
        (
            "exec_ms",
            "jit_ms",
            "jit_functions",
            "workers_planned",
            "workers_launched",
            "temp_written",
            "shared_read",
            "shared_hit",
        ),
        0.0,
    )
    parallel_ms, jit_planned_ms, probe_ms, done = 0.0, 0.0, 0.0, 0
    jit_names: list[str] = []
    probing: list[str] = []
    optimized: list[str] = []
    skipped: dict[str, str] = {}
    for name, text in statements.items():
        sql = text.strip().rstrip(";")
        if not _READ_ONLY.match(sql) or _WRITES.search(sql):
            skipped[name] = "not a read-only statement (EXPLAIN ANALYZE executes it)"
            continue
        weight = (weights_ms or {}).get(name)
        if not analyze and not weight:
            skipped[name] = "no measured time to weight its plan with"
            continue
        how = "ANALYZE, BUFFERS, FORMAT JSON" if analyze else "FORMAT JSON"
        try:
            with conn.transaction(force_rollback=True):
                conn.execute(f"SET LOCAL statement_timeout = {int(timeout_s * 1000)}")
                row = conn.execute(f"EXPLAIN ({how}) {sql}").fetchone()
        except psycopg.Error as exc:
            skipped[name] = f"{type(exc).__name__}: {clip(exc, 200)}"
            continue
        if row is None:
            skipped[name] = "EXPLAIN returned no row"
            continue
        doc = row[0] if not isinstance(row[0], str) else json.loads(row[0])
        got = parse_plan(doc)
        if not analyze:
            got["exec_ms"] = float(weight or 0.0)
        for key in totals:
            totals[key] += got[key]
        if got["workers_launched" if analyze else "workers_planned"] > 0:
            parallel_ms += got["exec_ms"]
        if got["jit_functions"] > 0 or got["jit_planned"] > 0:
            jit_planned_ms += got["exec_ms"]
            jit_names.append(name)
            if got["jit_optimized"]:
                optimized.append(name)
        if got["index_probes"] >= PROBE_LOOPS:
            probe_ms += got["exec_ms"]
            probing.append(name)
        done += 1
    ev = PlanEvidence(
        statements=done,
        exec_ms=totals["exec_ms"],
        jit_ms=totals["jit_ms"],
        jit_functions=int(totals["jit_functions"]),
        parallel_ms=parallel_ms,
        workers_planned=int(totals["workers_planned"]),
        workers_launched=int(totals["workers_launched"]),
        temp_written_blocks=int(totals["temp_written"]),
        shared_read_blocks=int(totals["shared_read"]),
        shared_hit_blocks=int(totals["shared_hit"]),
        skipped=skipped,
        analyzed=analyze,
        jit_planned_ms=jit_planned_ms,
        jit_planned=tuple(jit_names),
        jit_optimized=tuple(optimized),
        probe_ms=probe_ms,
        probe_planned=tuple(probing),
    )
    log.info("plans.explained", statements=done, skipped=len(skipped), reason=ev.summary())
    return ev
