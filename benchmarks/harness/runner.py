"""Runs one scenario end to end: set up the confined server and data, run the competitors one after
another from the same pristine state, then re-measure every final configuration ``repeats`` times,
interleaved (A B C … then rotated), and judge each against the default with paired ratios.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import structlog

from agenticdb.host.hardware import detect_hardware
from agenticdb.loop.executor import prewarm_after_restart
from agenticdb.measure.series import cv as series_cv
from agenticdb.models import ApplyMode, Snapshot
from agenticdb.store.journal import Journal
from benchmarks.harness import competitors as C
from benchmarks.harness import scenarios
from benchmarks.harness.cgroup import CgroupError, MemoryCgroup
from benchmarks.harness.instance import Instance
from benchmarks.harness.static import run_fixed, run_static

log = structlog.get_logger(__name__)

NOISE_FACTOR = 2.5
"""A difference counts as real only beyond 2.5 × the measured CV (docs/measurement.md "What cut the noise")."""


@dataclass
class Options:
    """Run options (CLI flags)."""

    out: Path
    budget_min: float
    competitors: list[str]
    repeats: int = 3
    duration_s: float | None = None
    warmup_s: float | None = None
    seed_budget_min: float | None = None
    fixed: dict[str, dict[str, str]] = field(default_factory=dict)
    """``--fixed FILE``'s configurations by competitor name (``fixed:<table>``), knob → value."""


@dataclass
class Remeasure:
    objective: list[float] = field(default_factory=list)
    tps: list[float] = field(default_factory=list)
    p95_ms: list[float] = field(default_factory=list)


def _cgroups(name: str, scenario: scenarios.Scenario) -> tuple[MemoryCgroup | None, MemoryCgroup | None]:
    if scenario.memory_limit_bytes is None:
        return None, None
    tag = f"agbench-{os.getpid()}-{name}"
    try:
        return (
            MemoryCgroup(tag + "-server", scenario.memory_limit_bytes),
            MemoryCgroup(tag + "-agent", scenario.memory_limit_bytes),
        )
    except CgroupError as exc:
        log.warning("bench.unconfined", scenario=name, reason=str(exc))
        return None, None


def setup(scenario: scenarios.Scenario, out: Path, opts: Options, budget_s: float) -> C.Bench:
    """Sandbox inside the cgroup, data loaded, starting configuration applied, pristine copy saved."""
    server_cg, agent_cg = _cgroups(scenario.name, scenario)
    # Short path: a Unix socket path must fit in 107 bytes (PostgreSQL refuses to start otherwise).
    base = Path(tempfile.mkdtemp(prefix=f"agb-{scenario.name[:16]}-", dir="/tmp"))
    link = out / "instance"
    out.mkdir(parents=True, exist_ok=True)  # a missing out dir left the fresh temp dir behind (symlink_to failed)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(base)
    inst = Instance(scenario.dbms, base, server_cg)
    try:
        return _setup(scenario, out, opts, budget_s, inst, agent_cg)
    except BaseException:
        # Leave nothing behind: no running server, no instance folder, no cgroup.
        if inst.info is not None:
            try:
                inst.stop()
            except Exception as exc:  # noqa: BLE001
                log.warning("bench.setup_cleanup_failed", error=str(exc))
        shutil.rmtree(base, ignore_errors=True)
        for cg in (server_cg, agent_cg):
            if cg is not None:
                cg.remove()
        raise


def _setup(
    scenario: scenarios.Scenario,
    out: Path,
    opts: Options,
    budget_s: float,
    inst: Instance,
    agent_cg: MemoryCgroup | None,
) -> C.Bench:
    tcfg = inst.up()
    duration = opts.duration_s if opts.duration_s is not None else scenario.duration_s
    warmup = opts.warmup_s if opts.warmup_s is not None else scenario.warmup_s
    settings = C.settings_for(scenario, tcfg, out, duration, warmup)
    target = inst.target()
    workload = C.build_workload_for(settings, target)
    t0 = time.monotonic()
    workload.prepare()
    log.info("bench.prepared", scenario=scenario.name, seconds=round(time.monotonic() - t0, 1))
    catalog = target.catalog()
    hw = detect_hardware(inst.data_dir)
    if scenario.memory_limit_bytes:
        hw = hw.model_copy(
            update={
                "memory_limit_bytes": min(hw.memory_limit_bytes, scenario.memory_limit_bytes),
                "cgroup_memory_limit_bytes": scenario.memory_limit_bytes,
            }
        )
    bench = C.Bench(
        scenario,
        inst,
        settings,
        target,
        workload,
        catalog,
        hw,
        target.snapshot(list(catalog.knobs), "pristine"),
        out,
        budget_s,
        agent_cg,
    )
    if scenario.start_config:
        verdict, _ = C.validate_config(bench, scenario.start_config, "start")
        if not verdict.ok:
            raise RuntimeError(
                f"scenario {scenario.name}: starting configuration refused by the validator:\n" + verdict.feedback()
            )
        target.apply(verdict.changes, ApplyMode.restart)
        target.verify(verdict.changes)
    inst.save_pristine()
    bench.start = target.snapshot(list(catalog.knobs), "start")
    return bench


def teardown(bench: C.Bench, keep: bool = False) -> None:
    """Stop the server, keep its log next to the results, remove the instance (unless ``keep``) and
    the cgroups."""
    bench.instance.stop()
    info = bench.instance.info
    if info is not None and Path(info.log_file).exists():
        shutil.copyfile(info.log_file, bench.out / "server.log")
    if not keep:
        shutil.rmtree(bench.instance.base, ignore_errors=True)
    for cg in (bench.instance.cgroup, bench.agent_cgroup):
        if cg is not None:
            cg.remove()


def measure_final(bench: C.Bench, snap: Snapshot) -> tuple[float, float | None, float | None]:
    """Pristine data + ``snap`` (the server restarted), the workload's relations loaded into the buffer cache
    (``prewarm_after_restart``) and a warm-up of ``max(3 s, 2 × warmup_s)`` — for a query set a whole unmeasured
    pass, which the session's executor no longer adds after a prewarmed restart (docs/measurement.md "Warm-up
    after a restart"): kept here as the more conservative protocol, the same for every competitor — then one
    measured run. A final configuration with a larger cache is no longer measured on a cache its run has to
    fill (issue 36)."""
    C.set_config(bench, snap)
    w = bench.settings.workload
    prewarm_after_restart(bench.target)
    bench.workload.warmup(max(3.0, 2 * w.warmup_s))
    m = bench.workload.run(w.duration_s)
    return m.objective, m.tps, m.latency_p95_ms


def cv(xs: list[float]) -> float:
    """Coefficient of variation (agenticdb.measure.series.cv), 0 for fewer than two values or a mean of 0."""
    return series_cv(xs) or 0.0


def same_configuration(results: dict[str, C.Result]) -> dict[str, str]:
    """competitor → the first competitor (in ``results``' order) whose final configuration has the same
    effective values (``Snapshot.values``), itself when none before it has.

    Competitors that ended on one configuration are re-measured as one arm and share its runs: measured
    apart, the same configuration differed by 12 % on the medians and was once called "worse" than a peer
    that its twin tied (mariadb-sysbench-rw-oom, 2026-12-07, benchmarks/README.md), which is the noise
    speaking, not the configuration. A final with no values (taken while the server was down:
    ``PostgresTarget.snapshot``) is its own arm: its configuration is in its files, not compared here."""
    first: dict[tuple, str] = {}
    out: dict[str, str] = {}
    for comp, r in results.items():
        key = tuple(sorted(r.final.values.items()))
        out[comp] = first.setdefault(key, comp) if key else comp
    return out


def judge(cand: list[float], ref: list[float], higher: bool, noise_cv: float) -> tuple[str, float]:
    """("better" | "worse" | "tie", median paired gain) — real only beyond NOISE_FACTOR × CV and with every
    paired ratio on the same side."""
    ratios = [c / r for c, r in zip(cand, ref, strict=False) if r]
    if not ratios:
        return "tie", 0.0
    if len(ratios) < 2 or noise_cv <= 0:
        # One pair (or no noise estimate) cannot separate an effect from noise.
        g1 = statistics.median((r - 1) if higher else (1 / r - 1) for r in ratios)
        return "tie", g1
    gains = [(r - 1) if higher else (1 / r - 1) for r in ratios]
    g = statistics.median(gains)
    band = NOISE_FACTOR * noise_cv
    if abs(math.log1p(g)) > band and (all(x > 0 for x in gains) or all(x < 0 for x in gains)):
        return ("better" if g > 0 else "worse"), g
    return "tie", g


def run_scenario(name: str, opts: Options) -> dict:
    """Run ``name`` with every competitor in ``opts.competitors``; writes results.json under
    ``opts.out/name`` and returns the summary dict (see report.py)."""
    scenario = scenarios.get(name)
    out = opts.out / name
    out.mkdir(parents=True, exist_ok=True)
    budget_s = opts.budget_min * 60
    t_scn = time.monotonic()
    bench = setup(scenario, out, opts, budget_s)
    journal = Journal(out / "journal.db")
    results: dict[str, C.Result] = {}
    seed_info: dict = {}
    try:
        for comp in opts.competitors:
            bench.instance.stop()
            bench.instance._rsync(str(bench.instance.pristine), bench.instance.data_dir, keep_config=False)
            bench.target.restore(bench.start)
            log.info("bench.competitor", scenario=name, competitor=comp, budget_s=budget_s)
            if comp == "default":
                r = C.run_default(bench, journal)
            elif comp == "static":
                r = run_static(bench, journal)
            elif comp == "tpe":
                r = C.run_tpe(bench, journal)
            elif comp == "oracle":
                r = C.run_oracle(bench, journal)
            elif comp == "agenticdb":
                r = C.run_agenticdb(bench, comp, out / "memory-session-only.db")
            elif comp.startswith("fixed:"):
                r = run_fixed(bench, journal, comp, opts.fixed[comp])
            elif comp == "agenticdb-half":
                r = C.run_agenticdb(bench, comp, out / "memory-half.db", budget_factor=C.HALF_BUDGET_FACTOR)
            elif comp == "agenticdb+experience":
                mem = out / "memory-experience.db"
                seed_info = seed_memory(scenario, opts, mem)
                r = C.run_agenticdb(bench, comp, mem)
                r.notes.append(f"experience seeded from scenario {seed_info.get('scenario')}")
            else:
                raise ValueError(f"--competitors: unknown competitor {comp!r}; expected {C.NAMES}")
            results[comp] = r
            log.info("bench.competitor_done", competitor=comp, rounds=r.rounds, changes=r.changes)

        higher = bench.workload.traits().objective != "total_time"
        same = same_configuration(results)
        finals: dict[str, Remeasure] = {c: Remeasure() for c in results}
        order = [c for c in results if same[c] == c]
        remeasure_failures = 0
        for rep in range(opts.repeats):
            k = rep % len(order)
            for comp in order[k:] + order[:k]:
                try:
                    obj, tps, p95 = measure_final(bench, results[comp].final)
                except Exception as exc:  # noqa: BLE001 - counted, and the server is brought back
                    remeasure_failures += 1
                    log.warning("bench.remeasure_failed", competitor=comp, error=str(exc))
                    if not bench.instance.available():
                        bench.instance.service().start()
                    continue
                finals[comp].objective.append(obj)
                if tps is not None:
                    finals[comp].tps.append(tps)
                if p95 is not None:
                    finals[comp].p95_ms.append(p95)
        for comp, rep_comp in same.items():
            finals[comp] = finals[rep_comp]
        cvs = [cv(finals[c].objective) for c in order if len(finals[c].objective) >= 2]
        noise = statistics.median(cvs) if cvs else 0.0
        summary = summarize(name, scenario, results, finals, higher, noise, opts, seed_info)
        for row in summary["rows"]:
            twin = same[row["competitor"]]
            row["same_configuration_as"] = twin if twin != row["competitor"] else None
        summary["remeasure_failures"] = remeasure_failures
        summary["wall_min"] = round((time.monotonic() - t_scn) / 60, 1)
        cg = bench.instance.cgroup
        summary["server_oom_kills"] = cg.oom_kills() if cg else 0
        summary["cgroup"] = (
            {
                "path": str(cg.path),
                "version": cg.version,
                "limit_bytes": cg.limit_bytes,
                "usage_bytes_at_end": cg.usage_bytes(),
            }
            if cg
            else None
        )
        (out / "results.json").write_text(json.dumps(summary, indent=2, default=str))
        return summary
    finally:
        teardown(bench)


def seed_memory(scenario: scenarios.Scenario, opts: Options, memory_db: Path) -> dict:
    """Fill ``memory_db`` with the experience of an agenticdb session on ``scenario.seed``."""
    if scenario.seed is None:
        return {"scenario": None}
    seed = scenarios.get(scenario.seed)
    out = opts.out / scenario.name / f"seed-{seed.name}"
    out.mkdir(parents=True, exist_ok=True)
    budget = (opts.seed_budget_min or opts.budget_min) * 60
    bench = setup(seed, out, opts, budget)
    try:
        r = C.run_agenticdb(bench, "seed", memory_db)
    finally:
        teardown(bench)
    return {"scenario": seed.name, "rounds": r.rounds, "changes": r.changes, "notes": r.notes}


def summarize(
    name: str,
    scenario: scenarios.Scenario,
    results: dict[str, C.Result],
    finals: dict[str, Remeasure],
    higher: bool,
    noise: float,
    opts: Options,
    seed_info: dict,
) -> dict:
    default = finals.get("default")
    rows = []
    oracle = oracle_reference(results, finals, higher, noise)
    for comp, r in results.items():
        f = finals[comp]
        med = statistics.median(f.objective) if f.objective else None
        verdict, gain = ("n/a", 0.0)
        if default is not None and comp != "default" and f.objective and default.objective:
            verdict, gain = judge(f.objective, default.objective, higher, noise)
        pair = {}
        if comp.startswith("agenticdb"):
            for other in ("static", "tpe", "default"):
                if other in finals and finals[other].objective and f.objective:
                    pair[other] = judge(f.objective, finals[other].objective, higher, noise)
        rows.append(
            {
                "competitor": comp,
                "median": med,
                "runs": f.objective,
                "spread": [min(f.objective), max(f.objective)] if f.objective else None,
                "tps_median": statistics.median(f.tps) if f.tps else None,
                "p95_median_ms": statistics.median(f.p95_ms) if f.p95_ms else None,
                "gain_vs_default": gain,
                "verdict_vs_default": verdict,
                "share_of_oracle_gain": share_of_oracle(med, oracle),
                "agenticdb_vs": pair,
                "result": {k: v for k, v in asdict(r).items() if k != "final"},
            }
        )
    return {
        "scenario": name,
        "about": scenario.about,
        "higher_is_better": higher,
        "noise_cv": noise,
        "budget_min": opts.budget_min,
        "repeats": opts.repeats,
        "rows": rows,
        "oracle": oracle,
        "seed": seed_info,
        "memory_limit_mib": (scenario.memory_limit_bytes or 0) // 2**20,
    }


def oracle_reference(results: dict[str, C.Result], finals: dict[str, Remeasure], higher: bool, noise: float) -> dict:
    """Whether the share-of-oracle-gain column can be shown: the oracle and the default were both
    re-measured and the oracle beats the default beyond the noise (``judge``). Returns {"ran", "shown",
    "default_median", "oracle_median", "verdict", "gain", "reason"}."""
    if "oracle" not in results:
        return {"ran": False, "shown": False, "reason": "oracle not run (add it with --competitors …,oracle)"}
    o, d = finals.get("oracle"), finals.get("default")
    if not (o and o.objective and d and d.objective):
        return {"ran": True, "shown": False, "reason": "oracle or default has no re-measurement"}
    verdict, gain = judge(o.objective, d.objective, higher, noise)
    ref = {
        "ran": True,
        "default_median": statistics.median(d.objective),
        "oracle_median": statistics.median(o.objective),
        "verdict": verdict,
        "gain": gain,
    }
    if verdict != "better":
        ref.update(
            shown=False,
            reason=f"the oracle's gain over default ({100 * gain:+.1f} %) is {verdict}, not beyond "
            f"the noise ({100 * NOISE_FACTOR * noise:.1f} %): no share is shown",
        )
        return ref
    ref.update(shown=True, reason="")
    return ref


def share_of_oracle(median: float | None, oracle: dict) -> float | None:
    """(competitor − default) / (oracle − default) on re-measured medians, when ``oracle["shown"]``; the
    ratio is direction-free (both differences change sign together when lower is better)."""
    if median is None or not oracle.get("shown"):
        return None
    span = oracle["oracle_median"] - oracle["default_median"]
    return (median - oracle["default_median"]) / span if span else None
