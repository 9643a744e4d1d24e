"""How well does the auditor decide? A/A placebos and one real effect on a real private PostgreSQL.

    python benchmarks/bench_auditor.py --decisions 20 --json out.json
    python -m benchmarks.bench_auditor --mode query-set --decisions 5 --json out.json   # TPC-H (issue 36)

``--mode query-set`` is described in ``benchmarks/bench_auditor_qset.py``; the rest of this text is the
default ``--mode oltp``.

Runs ``--decisions`` A/A decisions (the candidate is the best configuration itself: any "better" is a
false positive) and as many decisions on a real effect: sysbench write-only on PostgreSQL 15 with
``commit_delay = 1000, commit_siblings = 2`` as the best configuration and ``commit_delay = 0`` as the
candidate (docs/measurement.md: the delay cost 39 % of write-only TPS on this kind of host, so the fix is
a gain of about +64 %). Decisions alternate (A/A, real, A/A, …) in one session-like sequence: a baseline
of ``--baseline-runs`` runs gives the first noise estimate and every decision's residuals are pooled into
it, as a tuning session does. Each decision is made by the product's own path: executor (apply, verify,
measure with steady-state scoring and host-disturbance sampling), ``PairedRuns`` (switches through the one
restore path) and ``auditor.assess`` (the sequential test) with the defaults of ``[loop]``.

Writes ``{"aa_false_better": k, "aa_decisions": N, "real_detected": k, "real_decisions": N,
"median_pairs": x, "median_seconds_per_decision": y, ...}`` (plus every decision's verdict, interval and
timing) to ``--json`` and prints a summary. Targets (issue 13): false "better" on A/A ≤ 5 %, real effect
detected ≥ 90 %, median decision under 3 minutes.

Everything runs on a private instance under a temp directory (initdb, own port), removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agenticdb.app import build_target, build_workload
from agenticdb.config import Settings
from agenticdb.config.loop_section import LoopConfig
from agenticdb.config.sections import StorageConfig, WorkloadConfig
from agenticdb.loop import auditor
from agenticdb.loop.baseline import measure_baseline
from agenticdb.loop.executor import Executor, PairedRuns
from agenticdb.loop.recovery import restore_verified
from agenticdb.measure.disturbance import DisturbanceThresholds
from agenticdb.measure.sequential import Noise, SequentialPolicy
from agenticdb.sandbox.postgres import PostgresSandbox
from agenticdb.sandbox.pristine import PristineData
from agenticdb.store.journal import Journal
from agenticdb.targets.base import Target
from benchmarks import bench_auditor_qset
from benchmarks.bench_apply import apply_values

BEST = {"commit_delay": "1000", "commit_siblings": "2"}
FIX = {"commit_delay": "0"}


def _decide(
    kind: str, target: Target, executor: Executor, cfg: Settings, noise: Noise, names: list[str], level: float
) -> tuple[auditor.Assessment, float]:
    """One decision: best = BEST in effect; candidate = BEST again (A/A) or FIX (real). ``level`` is the best
    configuration's objective level (the auditor's cut-off of catastrophic screens compares with it)."""
    best_snap = target.snapshot(names, label="best")
    started = time.monotonic()
    changes = apply_values(target, executor, dict(BEST) if kind == "aa" else dict(FIX), cfg, f"{kind} candidate")
    screen, _ = executor.measure(0, f"{kind} screen")
    runs = PairedRuns(executor, names, best_snap, changes, 0, after_restart=False)
    loop = cfg.loop
    rules = auditor.DecisionRules(
        SequentialPolicy(
            min_gain=loop.min_gain, confidence=loop.confidence, min_pairs=loop.min_pairs, max_pairs=loop.max_pairs
        ),
        noise,
        DisturbanceThresholds.from_config(loop),
        loop.max_disturbed_repeats,
        loop.decision_budget_s - (time.monotonic() - started),
    )
    assessment = auditor.assess(screen, level, runs, rules)
    seconds = time.monotonic() - started
    restored = restore_verified(target, best_snap)
    if not restored.verified:
        raise SystemExit(f"bench: could not put the best configuration back: {restored.problem()}")
    return assessment, seconds


def run(args: argparse.Namespace) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="agenticdb-bench-auditor-"))
    os.chmod(base, 0o755)
    sandbox = PostgresSandbox(base / "sandbox")
    info = sandbox.up()
    try:
        cfg = Settings(
            target=info.target_config(),
            workload=WorkloadConfig(
                kind="sysbench-oltp-write-only",
                tables=args.tables,
                scale=args.rows,
                clients=args.clients,
                duration_s=args.duration,
                warmup_s=0,
                warmup_max_s=args.warmup_max,
                objective=args.objective,
            ),
            loop=LoopConfig(baseline_runs=args.baseline_runs, decision_budget_s=args.decision_budget or 180.0),
            storage=StorageConfig(home=base / "home"),
        )
        (base / "home").mkdir()
        target = build_target(cfg)
        workload = build_workload(cfg, target)
        print(f"bench: loading sysbench write-only ({args.tables} tables x {args.rows:g} rows)", flush=True)
        workload.prepare()
        journal = Journal(base / "home" / "journal.db")
        executor = Executor(
            target,
            [target.runtime_state],
            workload,
            journal,
            "bench-auditor",
            0.0,
            args.duration,
            warmup_max_s=args.warmup_max,
            disturbance=DisturbanceThresholds.from_config(cfg.loop),
        )
        names = list(target.catalog().knobs)
        apply_values(target, executor, dict(BEST), cfg, "best configuration")
        pristine = None
        if args.reset:
            pristine = PristineData.for_target(target)
            pristine.capture()
            executor.before_measure = pristine.reset
        baseline, _, cv = measure_baseline(executor, cfg.loop)
        noise = Noise.from_repeats([m.objective for m in baseline])
        level = statistics.median(m.objective for m in baseline)  # the best configuration's level (cut-off)
        print(f"bench: baseline {[round(m.objective, 2) for m in baseline]} (CV {cv:.1%})", flush=True)
        rows: list[dict[str, Any]] = []
        for i in range(args.decisions * 2):
            kind = "aa" if i % 2 == 0 else "real"
            a, seconds = _decide(kind, target, executor, cfg, noise, names, level)
            noise = noise.pool(Noise.from_pairs(a.log_ratios()))
            row = {
                "kind": kind,
                "verdict": a.verdict,
                "interval": a.estimate.text() if a.estimate else None,
                "pairs": a.estimate.pairs if a.estimate else 0,
                "seconds": round(seconds, 1),
                "disturbed": len(a.disturbed),
                "reason": a.reason,
            }
            rows.append(row)
            print(f"bench: {i + 1:3d} {kind:4s} {a.verdict:6s} {seconds:6.0f}s {row['interval']}", flush=True)
        if pristine is not None:
            pristine.discard()
        target.close()
    finally:
        sandbox.down()
        shutil.rmtree(base, ignore_errors=True)
    aa = [r for r in rows if r["kind"] == "aa"]
    real = [r for r in rows if r["kind"] == "real"]
    return {
        "aa_false_better": sum(r["verdict"] == "better" for r in aa),
        "aa_decisions": len(aa),
        "real_detected": sum(r["verdict"] == "better" for r in real),
        "real_decisions": len(real),
        "median_pairs": statistics.median(r["pairs"] for r in rows),
        "median_seconds_per_decision": statistics.median(r["seconds"] for r in rows),
        "baseline_cv": cv,
        "settings": {
            "workload": f"sysbench-oltp-write-only {args.tables}x{args.rows:g}, {args.clients} clients",
            "duration_s": args.duration,
            "warmup_max_s": args.warmup_max,
            "objective": args.objective or "tps_per_p95",
            "reset_data": args.reset,
            "loop": cfg.loop.model_dump(
                include={"confidence", "min_gain", "min_pairs", "max_pairs", "decision_budget_s", "baseline_runs"}
            ),
            "load_average": os.getloadavg(),
        },
        "decisions": rows,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--decisions", type=int, default=20, help="A/A decisions and as many real-effect decisions")
    p.add_argument("--json", type=Path, help="write the figures here")
    p.add_argument("--duration", type=float, default=10.0, help="scored seconds per run")
    p.add_argument("--warmup-max", type=float, default=5.0, help="steady-state detection bound (s)")
    p.add_argument("--objective", default=None, help="tps_per_p95 (default) | tps | p95 | p99")
    p.add_argument("--tables", type=int, default=4)
    p.add_argument("--rows", type=float, default=50000)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--baseline-runs", type=int, default=3)
    p.add_argument(
        "--decision-budget",
        type=float,
        default=None,
        help="seconds per decision (loop.decision_budget_s); 180 in oltp mode, 300 (the [loop] default) in query-set",
    )
    p.add_argument("--no-reset", dest="reset", action="store_false", help="no pristine data reset before runs")
    p.add_argument("--mode", choices=("oltp", "query-set"), default="oltp", help="oltp (sysbench) or query-set (TPC-H)")
    bench_auditor_qset.add_arguments(p)
    args = p.parse_args(argv)
    if os.geteuid() != 0:
        print("bench_auditor: run as root (the private PostgreSQL runs as the postgres user)", file=sys.stderr)
        return 2
    # SIGTERM (kill, a CI timeout) unwinds like Ctrl-C, so run()'s finally stops and removes the sandbox
    signal.signal(signal.SIGTERM, lambda signo, frame: sys.exit(128 + signo))
    out = bench_auditor_qset.run(args) if args.mode == "query-set" else run(args)
    summary = {k: v for k, v in out.items() if k not in ("decisions", "settings", "weights")}
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
