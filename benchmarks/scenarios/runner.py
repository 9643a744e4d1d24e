"""``qualify`` and ``run`` for one scenario (issue 22).

qualify: after one discarded fault-free run, fault-free and faulty configurations measured ``repeats``
times each, interleaved (free, faulty, faulty, free, …), every run from the pristine data. The *noise*
is the larger coefficient of variation of the two groups; the *effect* is |ln(median faulty / median
free)|. A scenario counts only when effect > 5 × noise.

run: the same measurements (so the fault-free reference and the qualification come from the same run),
then the fault is put in effect on pristine data and one ``agenticdb tune`` session (a child process:
``python -m agenticdb.cli tune --sandbox … --home …``; it restarts the server into the server's cgroup)
tunes it with a small budget. The configuration the session leaves is measured ``final_repeats`` times,
interleaved with fault-free runs, and scored from the journal (``score.py``).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from agenticdb.measure.series import cv as series_cv
from benchmarks.scenarios.fixture import Fixture, State
from benchmarks.scenarios.model import Scenario
from benchmarks.scenarios.score import score

log = structlog.get_logger(__name__)

NOISE_MULTIPLE = 5.0
"""A fault counts only when its effect exceeds this multiple of the run-to-run noise (issue 22)."""


@dataclass
class RunOptions:
    """CLI options of ``run`` / ``qualify``."""

    out: Path
    planner: str = "heuristic"
    budget_s: float = 180.0  # the whole suite must fit 2 hours (issue 22): ~6 min per qualified scenario
    max_rounds: int = 6
    repeats: int = 3
    final_repeats: int = 3
    force: bool = False
    keep: bool = False


def cv(xs: list[float]) -> float:
    """Coefficient of variation (agenticdb.measure.series.cv), 0 for fewer than two values or a mean of 0."""
    return series_cv(xs) or 0.0


def qualification(free: list[float], faulty: list[float]) -> dict[str, Any]:
    """Figures of the fault-free vs faulty comparison and whether the effect is beyond 5 × the noise."""
    if not free or not faulty or min(free + faulty) <= 0:
        return {"free": free, "faulty": faulty, "qualified": False, "reason": "a measurement failed or was 0"}
    mf, mx = statistics.median(free), statistics.median(faulty)
    noise = max(cv(free), cv(faulty))
    effect = abs(math.log(mx / mf))
    ok = effect > NOISE_MULTIPLE * noise
    return {
        "free": [round(x, 3) for x in free],
        "faulty": [round(x, 3) for x in faulty],
        "median_free": round(mf, 3),
        "median_faulty": round(mx, 3),
        "effect_pct": round(100 * (mx / mf - 1), 1),
        "effect_log": round(effect, 3),
        "noise_cv": round(noise, 3),
        "ratio_to_noise": round(effect / noise, 1) if noise else None,
        "qualified": ok,
        "reason": (f"|ln(faulty/free)| = {effect:.3f} {'>' if ok else '≤'} {NOISE_MULTIPLE:g} × noise CV {noise:.3f}"),
    }


def recovered(final: list[float], free: list[float], faulty: list[float]) -> float | None:
    """Share of the fault's gap the final configuration closed, in % (100 = back to fault-free):
    (median final − median faulty) / (median free − median faulty). Shown next to Outcome, whose
    15 % margin a noisy host can miss with a complete repair."""
    if not (final and free and faulty):
        return None
    gap = statistics.median(free) - statistics.median(faulty)
    if gap == 0:
        return None
    return round(100 * (statistics.median(final) - statistics.median(faulty)) / gap, 1)


def _interleaved(fx: Fixture, a: State, b: State, n: int) -> tuple[list[float], list[float], list[tuple[float, float]]]:
    """``n`` rounds of (a, b), the order alternating (a b | b a | …), every run from the pristine data.

    Returns (a's values, b's values, the rounds in which both runs succeeded as (a, b) pairs): a pair's
    two runs are adjacent in time, so their ratio is free of the host's drift between rounds."""
    xs: list[float] = []
    ys: list[float] = []
    pairs: list[tuple[float, float]] = []
    for i in range(n):
        got: dict[str, float] = {}
        order = [("a", a, xs), ("b", b, ys)] if i % 2 == 0 else [("b", b, ys), ("a", a, xs)]
        for key, state, sink in order:
            value = _measured_or_none(fx, state)
            if value is not None:
                got[key] = value
                sink.append(value)
        if len(got) == 2:
            pairs.append((got["a"], got["b"]))
    return xs, ys, pairs


def _measured_or_none(fx: Fixture, state: State, in_place: bool = False) -> float | None:
    """One run of ``state``; None when it failed (logged, the server brought back)."""
    try:
        return fx.measure(state, in_place=in_place)
    except Exception as exc:  # noqa: BLE001 - a failed run is recorded as missing, the server brought back
        log.warning("scenario.run_failed", scenario=fx.scn.name, state=state.label, error=str(exc)[:300])
        if not fx.inst.available():
            fx.inst.service().start()
        return None


def _discarded(fx: Fixture, state: State) -> None:
    """One run of ``state`` whose result is not used (logged)."""
    value = _measured_or_none(fx, state)
    log.info("scenario.discarded_run", scenario=fx.scn.name, state=state.label, objective=value)


def _prepare(scn: Scenario, opts: RunOptions) -> tuple[Fixture, State, State, dict[str, Any], float]:
    out = opts.out / scn.name
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    fx = Fixture(scn, out)
    try:
        fx.setup()
        free = fx.capture("fault-free")
        faulty = fx.inject()
        t1 = time.monotonic()
        # One run discarded: the first run after loading was off in most scenarios of the quiet-host
        # run of 2026-12-03 (pg-checkpoint-storm fault-free 858 then 1597, 1630 TPS; 6 of 9 MariaDB
        # scenarios low by 7–34 %), and it alone decided the noise of several rejections.
        _discarded(fx, free)
        xs, ys, _ = _interleaved(fx, free, faulty, opts.repeats)
    except BaseException:
        fx.close(opts.keep)  # nothing left behind: server stopped, host values back, cgroup removed
        raise
    q = qualification(xs, ys)
    # where a scenario's minutes go (the whole suite must fit 2 hours: benchmarks/README.md)
    q.update(setup_min=round((t1 - t0) / 60, 2), measure_min=round((time.monotonic() - t1) / 60, 2))
    return fx, free, faulty, q, t0


def qualify(scn: Scenario, opts: RunOptions) -> dict[str, Any]:
    """Measure fault-free vs faulty; returns the qualification figures (also written to qualify.json)."""
    fx, _, _, q, t0 = _prepare(scn, opts)
    try:
        q.update(scenario=scn.name, wall_min=round((time.monotonic() - t0) / 60, 1))
        (opts.out / scn.name / "qualify.json").write_text(json.dumps(q, indent=2))
        return q
    finally:
        fx.close(opts.keep)


def session_argv(fx: Fixture, opts: RunOptions, config: Path) -> list[str]:
    """The ``agenticdb tune`` command line of the scenario's session."""
    return [
        sys.executable,
        "-m",
        "agenticdb.cli",
        "tune",
        "--config",
        str(config),
        "--sandbox",
        fx.scn.target.dbms,
        "--home",
        str(fx.base),
        "--planner",
        opts.planner,
        "--stage",
        fx.scn.expect.stage,
        "--time-budget",
        f"{opts.budget_s:g}",
        "--rounds",
        str(opts.max_rounds),
        "--allow-restart" if fx.scn.safety.allow_restart else "--no-restart",
    ]


def _toml_value(v: object) -> str:
    return json.dumps(v)  # strings, numbers and booleans are spelled the same in JSON and TOML


def write_session_config(fx: Fixture, path: Path) -> None:
    """A TOML config holding the scenario's workload and safety sections (durability strict), the
    database the data was loaded into, and the server's cgroup (``target.service.cgroup``: a restart by
    the session starts the server inside it, so the scenario's memory limit holds)."""
    lines = ["[workload]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in fx.workload_fields.items()]
    lines += ["", "[policy]", f'durability = "{fx.scn.safety.durability}"']
    if fx.settings is not None:  # the database the data was loaded into (the sandbox default differs)
        lines += ["", "[target]", f"database = {_toml_value(fx.settings.target.database)}"]
    if fx.cgroup is not None:
        lines += ["", "[target.service]", f"cgroup = {_toml_value(str(fx.cgroup.path))}"]
    queries = fx.scn.workload.get("queries")
    if queries:  # the workload's own statements: plan evidence of the root-cause pass (issue 40)
        lines += [
            "",
            "[rootcause]",
            f"statements = {_toml_value([q for q in queries if q.lower().startswith('select')])}",
        ]
    if sql_fault(fx.scn) and fx.inst.info is not None and fx.settings is not None:
        # approve mode: a remedy waits for `agenticdb approve` (the runner, as a person); the superuser
        # of the private instance owns the tables, so it is the remediation DSN
        owner = remediation_dsn(fx)
        lines = [*lines[: lines.index("[policy]") + 1], 'mode = "approve"', *lines[lines.index("[policy]") + 1 :]]
        lines += ["", "[remediation]", f"dsn = {_toml_value(owner)}"]
    path.write_text("\n".join(lines) + "\n")


def sql_fault(scn: Scenario) -> bool:
    """True for the scenarios of issue 40: a root cause, a decoy, or a fault made of SQL."""
    return bool(scn.expect.root_cause or scn.expect.decoy or scn.fault.sql or scn.fault.hold)


def remediation_dsn(fx: Fixture) -> str:
    """The private instance's superuser DSN on the workload's database (it owns the loaded tables)."""
    info, settings = fx.inst.info, fx.settings
    assert info is not None and settings is not None
    if fx.scn.target.dbms == "postgres":
        import psycopg  # lazy: PostgreSQL scenarios only

        return psycopg.conninfo.make_conninfo(info.dsn, dbname=settings.target.database)
    return info.dsn.rstrip("/") + "/" + settings.target.database


def run_session(fx: Fixture, opts: RunOptions) -> dict[str, Any]:
    """One ``agenticdb tune`` session in a child process; its journal is copied to the result folder.

    The session runs outside the server's cgroup, as an agent on a confined host would: it reads the
    server's limit from the server's own cgroup (``detect_hardware(pid=…)``) and restarts the server
    into it (``target.service.cgroup``). Run inside the cgroup, the agent and its workload clients were
    charged to the server's memory: os-read-ahead-tiny's session (≈160 MiB) was OOM-killed inside
    its 256 MiB limit (2026-12-03)."""
    out = fx.out
    config = out / "session.toml"
    write_session_config(fx, config)
    argv = session_argv(fx, opts, config)
    env = dict(os.environ)
    # the scenario's private instance is reached as its superuser (the harness injects faults with it)
    env["AGENTICDB_POLICY__ALLOW_SUPERUSER"] = "true"
    t0 = time.monotonic()
    approved: list[str] = []
    with open(out / "session.log", "w") as logf:
        proc = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, env=env)
        deadline = t0 + opts.budget_s * 3 + 600
        while proc.poll() is None and time.monotonic() < deadline:
            approved += approve_waiting(fx, env, approved)
            time.sleep(1)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    journal = fx.base / "journal.db"
    if journal.exists():
        shutil.copyfile(journal, out / "journal.db")
        key = journal.with_suffix(".key")  # the journal's HMAC key (agenticdb.store.journal_key): verify needs it
        if key.exists():
            shutil.copyfile(key, out / "journal.key")
    return {
        "exit_code": proc.returncode,
        "argv": argv,
        "approved": approved,
        "wall_min": round((time.monotonic() - t0) / 60, 2),
    }


def approve_waiting(fx: Fixture, env: dict[str, str], done: list[str]) -> list[str]:
    """Approve, as a person would (``agenticdb approve ID``), every remedy the session queued (issue 40).
    Trials of knob changes are never queued in a scenario (tune does not gate them)."""
    new = []
    for f in sorted((fx.base / "approvals" / "proposals").glob("*.json")):
        if f.stem in done or f.stem in new:
            continue
        argv = [sys.executable, "-m", "agenticdb.cli", "approve", f.stem, "--home", str(fx.base)]
        r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
        log.info("scenario.approved", scenario=fx.scn.name, id=f.stem, exit_code=r.returncode, output=r.stdout[-200:])
        new.append(f.stem)
    return new


def run(scn: Scenario, opts: RunOptions) -> dict[str, Any]:
    """Qualify in-run, tune the faulty server once, measure the result, score it (run.json)."""
    fx, free, faulty, q, t0 = _prepare(scn, opts)
    result: dict[str, Any] = {
        "scenario": scn.name,
        "dbms": scn.target.dbms,
        "kind": scn.kind,
        "planner": opts.planner,
        "expected": [b.value for b in scn.expect.labels],
        "qualification": q,
    }
    try:
        if not q["qualified"] and not opts.force:
            result["status"] = "rejected"
            return result
        fx.put(faulty)
        result["session"] = run_session(fx, opts)
        up = fx.inst.available()
        if not up:
            fx.inst.service().start()
        final = fx.capture("final")
        result["final_config_text"] = final.conf_text
        t_final = time.monotonic()
        if sql_fault(scn):
            # the server as the session left it (a remedy lives in the data, the holder in a session):
            # measured in place first, then the fault-free runs (each resets the data)
            finals = [v for v in (_measured_or_none(fx, final, in_place=True) for _ in range(opts.final_repeats)) if v]
            frees = [v for v in (_measured_or_none(fx, free) for _ in range(opts.final_repeats)) if v]
            pairs = list(zip(finals, frees, strict=False))
        else:
            finals, frees, pairs = _interleaved(fx, final, free, opts.final_repeats)
        result["final_min"] = round((time.monotonic() - t_final) / 60, 2)
        # The reference is the fault-free runs interleaved with the final ones (same host load); the
        # pre-session runs only when those failed. This host's load drifts by tens of % in minutes.
        free_ref = frees or q.get("free", [])
        result["final"] = [round(x, 3) for x in finals]
        result["free_after"] = [round(x, 3) for x in frees]
        result["final_pairs"] = [[round(x, 3), round(y, 3)] for x, y in pairs]
        journal = opts.out / scn.name / "journal.db"
        if journal.exists():
            every_free = list(q.get("free", [])) + frees
            result.update(
                score(journal, scn, finals, free_ref, fx.higher_is_better, up, pairs=pairs, free_runs=every_free)
            )
            result["recovered_pct"] = recovered(finals, free_ref, q.get("faulty", []))
            result["reference"] = (
                "fault-free runs interleaved with the final ones" if frees else "pre-session fault-free runs"
            )
            result["status"] = "scored"
        else:
            result["status"] = "no journal"
        return result
    finally:
        result["wall_min"] = round((time.monotonic() - t0) / 60, 1)
        (opts.out / scn.name / "run.json").write_text(json.dumps(result, indent=2, default=str))
        fx.close(opts.keep)
