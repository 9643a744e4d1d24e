"""Three probes of pg-tpch (TPC-H SF 1 under a 1 GiB cgroup, the harness's scenario) behind issue 36's rules.

    python -m benchmarks.bench_tpch_probe jit --out /tmp/probe-jit.json
    python -m benchmarks.bench_tpch_probe restart --cycles 3 --out /tmp/probe-restart.json
    python -m benchmarks.bench_tpch_probe plans --scenario pg-tpch-fit --out /tmp/probe-ecs.json

``jit``: each of the 22 queries under ``EXPLAIN (ANALYZE, FORMAT JSON)`` with jit on / off and
effective_cache_size 4GB / 128MB (set in the session; two repetitions, the second in reverse order), with its
execution time, total cost, JIT compile time ("JIT" → "Timing" → "Total", leader and workers) and JIT options.
It showed that the plans that LLVM-optimise compile at another order of time than the plain ones (Q18: 3.3 s
of 8.3 s; the plain compiles 40–340 ms of 1.4–5 s), which ``opening_plans._sample_jit`` now samples by class.

``restart``: the query set's pass right after a restart + pg_prewarm against the next pass, for shared_buffers
128MB and 32MB in turn: whether a prewarmed query set needs a whole warm-up pass after a restart
(``Executor.measure``, docs/measurement.md "Warm-up after a restart").

``plans``: each query under each set of session settings (default: effective_cache_size 4GB and 128MB, jit off)
with its execution time and its plan's own time per node type (an index scan repeated inside a nested loop
counted apart): which plans a setting changes. On pg-tpch-fit it showed the index probes behind
``opening_cache.probe_cache``.

All three build the scenario with the harness (private instance in a cgroup, data loaded) and remove it at the end.
Writes every row to ``--out`` as JSON and prints one line per pass.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import psycopg
import typer

from agenticdb.loop.executor import prewarm_after_restart
from agenticdb.workloads.common import connect
from benchmarks.harness import runner, scenarios

app = typer.Typer(add_completion=False, help=__doc__.split("\n\n")[0])


def _bench(work: Path, scenario: str = "pg-tpch") -> Any:
    sc = scenarios.get(scenario)
    work.mkdir(parents=True, exist_ok=True)
    return runner.setup(sc, work, runner.Options(out=work, budget_min=8, competitors=[]), 480)


@app.command()
def jit(out: Annotated[Path, typer.Option(help="JSON file for the rows")], reps: int = 2) -> None:
    """Per-query time and JIT compile time with jit on/off and effective_cache_size 4GB/128MB."""
    bench, rows = _bench(out.with_suffix(".d")), list[dict[str, Any]]()
    try:
        queries = dict(bench.workload.queries())
        combos = [("on", "4GB"), ("off", "4GB"), ("on", "128MB"), ("off", "128MB")]
        for rep in range(reps):
            for jit_, ecs in combos if rep % 2 == 0 else combos[::-1]:
                with connect(bench.workload.conn) as db:
                    db.execute(f"SET jit = {jit_}")
                    db.execute(f"SET effective_cache_size = '{ecs}'")
                    total = 0.0
                    for name, sql in queries.items():
                        plan = db.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql).fetchone()[0][0]
                        j = plan.get("JIT") or {}
                        rows.append(
                            {
                                "rep": rep,
                                "jit": jit_,
                                "ecs": ecs,
                                "query": name,
                                "exec_ms": plan.get("Execution Time"),
                                "cost": plan["Plan"]["Total Cost"],
                                "jit_ms": (j.get("Timing") or {}).get("Total"),
                                "jit_options": j.get("Options"),
                            }
                        )
                        total += float(plan.get("Execution Time") or 0.0) / 1000.0
                typer.echo(f"rep {rep} jit {jit_} effective_cache_size {ecs}: {total:.2f} s")
                out.write_text(json.dumps(rows, indent=1))
    finally:
        runner.teardown(bench)


def _node_times(node: dict[str, Any], acc: dict[str, float]) -> float:
    """Add each plan node's own time (ms: actual total time × loops, less its children's; parallel workers'
    loops counted as the planner reports them) to ``acc`` under its node type (an index scan under a nested
    loop as "Index Scan (nested loop inner)"); returns the node's inclusive time."""
    inclusive = float(node.get("Actual Total Time") or 0.0) * float(node.get("Actual Loops") or 1)
    children = node.get("Plans") or []
    own = inclusive - sum(_node_times(c, acc) for c in children)
    kind = str(node.get("Node Type"))
    if node.get("Parent Relationship") == "Inner" and "Index" in kind and float(node.get("Actual Loops") or 1) > 1:
        kind += " (nested loop inner)"
    acc[kind] = acc.get(kind, 0.0) + max(own, 0.0)
    return inclusive


@app.command()
def plans(
    out: Annotated[Path, typer.Option(help="JSON file for the rows")],
    scenario: str = "pg-tpch-fit",
    settings: Annotated[list[str], typer.Option(help="NAME=VALUE sets, ';'-separated, compared in turn")] = [  # noqa: B006
        "effective_cache_size=4GB;jit=off",
        "effective_cache_size=128MB;jit=off",
    ],
    reps: int = 2,
) -> None:
    """Each query's execution time and where its plan spends it (node types, own time) under each set of
    session settings: which plans a setting changes and by how much (issue 36's pg-tpch-fit, where TPE's best
    lowered effective_cache_size to 64MB)."""
    bench, rows = _bench(out.with_suffix(".d"), scenario), list[dict[str, Any]]()
    try:
        queries = dict(bench.workload.queries())
        for rep in range(reps):
            for text in settings if rep % 2 == 0 else settings[::-1]:
                with connect(bench.workload.conn) as db:
                    for pair in text.split(";"):
                        name, value = pair.split("=", 1)
                        db.execute(f"SET {name} = '{value}'")
                    total = 0.0
                    for name, sql in queries.items():
                        plan = db.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql).fetchone()[0][0]
                        acc: dict[str, float] = {}
                        _node_times(plan["Plan"], acc)
                        rows.append(
                            {
                                "rep": rep,
                                "settings": text,
                                "query": name,
                                "exec_ms": plan.get("Execution Time"),
                                "cost": plan["Plan"]["Total Cost"],
                                "nodes_ms": acc,
                            }
                        )
                        total += float(plan.get("Execution Time") or 0.0) / 1000.0
                typer.echo(f"rep {rep} {text}: {total:.2f} s")
                out.write_text(json.dumps(rows, indent=1))
    finally:
        runner.teardown(bench)


@app.command()
def restart(out: Annotated[Path, typer.Option(help="JSON file for the rows")], cycles: int = 3) -> None:
    """The pass right after restart + pg_prewarm against the next pass, shared_buffers 128MB and 32MB."""
    bench, rows = _bench(out.with_suffix(".d")), list[dict[str, Any]]()
    try:
        workload = bench.workload
        workload.run()  # the first pass after the load
        for cycle in range(cycles):
            for shared_buffers in ("128MB", "32MB"):
                with psycopg.connect(bench.settings.target.dsn, autocommit=True) as db:
                    db.execute(f"ALTER SYSTEM SET shared_buffers = '{shared_buffers}'")  # type: ignore[arg-type]
                bench.instance.service().restart()
                t0 = time.monotonic()
                note = prewarm_after_restart(bench.target)
                prewarm_s = time.monotonic() - t0
                after, following = workload.run().objective, workload.run().objective
                rows.append(
                    {
                        "cycle": cycle,
                        "shared_buffers": shared_buffers,
                        "after_restart_s": after,
                        "next_pass_s": following,
                        "prewarm": note,
                        "prewarm_s": prewarm_s,
                    }
                )
                typer.echo(
                    f"cycle {cycle} shared_buffers {shared_buffers}: {after:.2f} s then {following:.2f} s ({note})"
                )
                out.write_text(json.dumps(rows, indent=1))
    finally:
        runner.teardown(bench)


if __name__ == "__main__":
    app()
