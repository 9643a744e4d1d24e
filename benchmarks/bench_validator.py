"""Latency of agenticdb.validation.validator.validate for a 20-change proposal against a cached catalog.

Run: ``python benchmarks/bench_validator.py [--reps 2000] [--pg-dsn postgresql://...]``. Without a DSN the
catalog is a hand-built PostgreSQL 15 subset (the validator cost does not depend on where the catalog came
from; it is cached in memory in both cases). Prints median, p95, min, max and the spread (IQR) in ms.
Target (issue 3): well under 10 ms.
"""

from __future__ import annotations

import argparse
import statistics
import time

from agenticdb.config.sections import PolicyConfig
from agenticdb.models import ApplyMode, Bottleneck, Catalog, Change, Hardware, KnobSpec, Layer, Proposal
from agenticdb.validation.validator import validate


def _catalog() -> Catalog:
    knobs = [
        KnobSpec(
            name="shared_buffers",
            vartype="integer",
            unit="8kB",
            min_value=16,
            max_value=1073741823,
            apply=ApplyMode.restart,
            default="16384",
        ),
        KnobSpec(
            name="work_mem",
            vartype="integer",
            unit="kB",
            min_value=64,
            max_value=2147483647,
            apply=ApplyMode.dynamic,
            default="4096",
        ),
        KnobSpec(
            name="max_connections",
            vartype="integer",
            min_value=1,
            max_value=262143,
            apply=ApplyMode.restart,
            default="100",
        ),
        KnobSpec(
            name="checkpoint_timeout",
            vartype="integer",
            unit="s",
            min_value=30,
            max_value=86400,
            apply=ApplyMode.reload,
            default="300",
        ),
        KnobSpec(
            name="synchronous_commit",
            vartype="enum",
            apply=ApplyMode.dynamic,
            default="on",
            enum_values=["local", "remote_write", "remote_apply", "on", "off"],
        ),
    ]
    for i in range(15):
        knobs.append(
            KnobSpec(
                name=f"knob_{i}",
                vartype="integer",
                unit="kB",
                min_value=0,
                max_value=2**31,
                apply=ApplyMode.dynamic,
                default="1024",
            )
        )
    for i in range(300):  # a catalog of realistic size (pg_settings has ~350 rows)
        knobs.append(KnobSpec(name=f"filler_{i}", vartype="real", apply=ApplyMode.dynamic, default="1"))
    return Catalog(target="postgresql", version="15.19", knobs={k.name: k for k in knobs})


def _proposal() -> Proposal:
    changes = [
        Change(name="shared_buffers", value="256M"),
        Change(name="work_mem", value="8MB"),
        Change(name="max_connections", value=120),
        Change(name="checkpoint_timeout", value="10min"),
        Change(name="synchronous_commit", value="on"),
    ]
    changes += [Change(name=f"knob_{i}", value=f"{2 + i % 3}MB") for i in range(15)]
    return Proposal(bottleneck=Bottleneck.unknown, changes=changes, apply_requirement=ApplyMode.restart)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--pg-dsn", default=None, help="take the catalog and current values from a live server")
    args = ap.parse_args()
    catalog, current = _catalog(), {}
    if args.pg_dsn:
        from agenticdb.targets.postgres import PostgresTarget

        target = PostgresTarget(args.pg_dsn, None)
        catalog, current = target.catalog(), target.current_values()
        target.close()
    proposal = _proposal()
    hw = Hardware(cpu_count=2, memory_bytes=24 * 1024**3, memory_limit_bytes=24 * 1024**3, disk_free_bytes=80 * 1024**3)
    policy = PolicyConfig(max_changes=20, max_step_factor=100)
    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))  # no per-call log output
    verdict = validate(proposal, catalog, current, hw, policy, Layer.dbms)  # warm the rule cache
    times = []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        validate(proposal, catalog, current, hw, policy, Layer.dbms)
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    q = statistics.quantiles(times, n=20)
    q1, q3 = statistics.quantiles(times, n=4)[0], statistics.quantiles(times, n=4)[2]
    print(
        f"validate(): {len(proposal.changes)} changes, catalog {len(catalog.knobs)} knobs, {args.reps} reps, "
        f"verdict ok={verdict.ok} ({len(verdict.failed)} failed checks)"
    )
    print(
        f"  median {statistics.median(times):.3f} ms  p95 {q[18]:.3f} ms  min {times[0]:.3f} ms  "
        f"max {times[-1]:.3f} ms  IQR {q1:.3f}..{q3:.3f} ms  stdev {statistics.stdev(times):.3f} ms"
    )


if __name__ == "__main__":
    main()
