"""Planner latency per proposal on a live PostgreSQL 15 catalog (the planner's own CPU time, no I/O).

Starts a private PostgreSQL (sandbox in a temp dir, removed afterwards) unless ``--pg-dsn`` is given,
runs pgbench for a few seconds between two runtime-state samples so the diagnosis sees real statistics,
takes the live catalog from pg_settings exactly as a tuning session does, then times:

* ``heuristic first``: ``HeuristicPlanner.propose`` for round 1 (diagnosis + playbook, no history);
* ``heuristic full``: the same with every list at the cap the LLM context applies (12 earlier rounds,
  3 experiences, 4 validator failures, 20 untrusted items; ``bench_llm_context.full_ctx``);
* ``llm render first/full``: the LLM planner's local work per request — ``build_messages`` (diagnosis
  for the hypotheses + context rendering) and ``request_messages`` + ``format_kwargs`` (system prompt,
  Proposal schema) — i.e. everything but the HTTP round trip, which the endpoint dominates.

Each case is timed ``--reps`` times after one warm-up call (playbooks and prompt files are cached after
the first load, as in a session) and reported as median, p95 and max in ms.

Usage::

    python benchmarks/bench_planner.py [--reps 200] [--pg-dsn postgresql://...] [--json out.json]

Needs root without ``--pg-dsn`` (the sandbox runs as the postgres OS user).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from agenticdb.config.sections import PlannerConfig, WorkloadConfig
from agenticdb.models import Catalog, StateDelta
from agenticdb.models.planning import PlanningContext
from agenticdb.planner.heuristic import HeuristicPlanner
from agenticdb.planner.llm import LLMPlanner
from agenticdb.sandbox.postgres import PostgresSandbox
from agenticdb.targets.postgres import PostgresTarget
from agenticdb.workloads import build_workload, connection_from_dsn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_llm_context import _Unused, first_round_ctx, full_ctx


def live_inputs(dsn: str, data_dir: Path | None, load_s: float) -> tuple[Catalog, dict[str, str], StateDelta, str]:
    """Catalog, current values, version and the runtime-state delta over ``load_s`` seconds of pgbench
    (scale 1, 2 clients) against the server at ``dsn``."""
    target = PostgresTarget(dsn, None, data_dir=data_dir)
    try:
        catalog = target.catalog()
        current = target.current_values(list(catalog.knobs))
        workload = build_workload(
            WorkloadConfig(kind="pgbench", scale=1, clients=2, threads=1, duration_s=load_s),
            connection_from_dsn("postgresql", dsn, "agenticdb_bench"),
        )
        workload.prepare()
        before = target.runtime_state()
        workload.run(load_s)
        after = target.runtime_state()
        return catalog, current, StateDelta.between(before, after), target.version()
    finally:
        target.close()


def timed(fn: Callable[[], Any], reps: int) -> dict[str, float]:
    """Median, p95 and max wall time of ``fn`` in ms over ``reps`` calls (after one warm-up call)."""
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {
        "median_ms": statistics.median(times),
        "p95_ms": times[min(len(times) - 1, int(0.95 * len(times)))],
        "max_ms": times[-1],
        "reps": reps,
    }


def run_cases(ctx: PlanningContext, reps: int) -> dict[str, dict[str, float]]:
    """Latency of every case for the round-1 context ``ctx`` and its capped ("full") variant."""
    llm = LLMPlanner(
        PlannerConfig(kind="llm", model="bench", api_key="unused", base_url="http://127.0.0.1:9/v1"),
        _Unused(),
    )
    full = full_ctx(ctx)
    out: dict[str, dict[str, float]] = {}
    for case, c in (("first", ctx), ("full", full)):
        # A fresh planner per call: HeuristicPlanner keeps no state between calls, but this makes sure.
        out[f"heuristic {case}"] = timed(lambda c=c: HeuristicPlanner().propose(c), reps)
        out[f"llm render {case}"] = timed(
            lambda c=c: (llm.request_messages(llm.build_messages(c)), llm.format_kwargs()), reps
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--pg-dsn", default=None, help="use this server instead of a private sandbox")
    parser.add_argument("--load", type=float, default=3.0, help="seconds of pgbench for the statistics delta")
    parser.add_argument("--json", type=Path, help="write the results as JSON to this file")
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))  # no per-call log lines
    base: Path | None = None
    if args.pg_dsn:
        catalog, current, delta, version = live_inputs(args.pg_dsn, None, args.load)
    else:
        base = Path(tempfile.mkdtemp(prefix="agenticdb-bench-planner-"))
        base.chmod(0o755)
        sandbox = PostgresSandbox(base)
        info = sandbox.up()
        try:
            catalog, current, delta, version = live_inputs(info.dsn, info.data_dir, args.load)
        finally:
            sandbox.down()
            shutil.rmtree(base, ignore_errors=True)
    ctx = first_round_ctx("postgresql", version, catalog, current, delta)
    proposal = HeuristicPlanner().propose(ctx)
    results = run_cases(ctx, args.reps)
    print(
        f"postgresql {version}: {len(catalog.knobs)} tunable parameters; heuristic round-1 proposal: "
        f"{proposal.bottleneck.value} { ({c.name: c.value for c in proposal.changes}) }"
    )
    print(f"{'case':<22}{'median ms':>11}{'p95 ms':>10}{'max ms':>10}")
    for case, r in results.items():
        print(f"{case:<22}{r['median_ms']:>11.2f}{r['p95_ms']:>10.2f}{r['max_ms']:>10.2f}")
    if args.json:
        args.json.write_text(json.dumps({"version": version, "knobs": len(catalog.knobs), "cases": results}, indent=2))


if __name__ == "__main__":
    main()
