"""Competitor 2, ``static``: the tools a DBA reaches for first, as they are today, applied once.

- PostgreSQL: PGTune's current rules (``pgtune_rules``, each rule citing the PGTune commit it reflects)
  fed with what a DBA would type into PGTune's form: RAM = the server's memory limit (cgroup), CPUs,
  connections = the server's max_connections, storage from the data device's rotational flag, DB type
  from the workload class (OLAP → dw, else oltp), data size = the databases' size against RAM, and
  the server's major version. Row label: ``pgtune_rules.LABEL``.
- MariaDB: the real MySQLTuner (Debian package) run against the confined server after a warm-up load,
  its "Variables to adjust" parsed and turned into numbers by the rules in ``mysqltuner``. Row label:
  "MySQLTuner <version> + rules", and the notes list every line it printed and what became of it. When
  the tool dies before its recommendations (or does not run), ``Result.could_not_advise`` says why and
  the table shows "could not advise: <reason>" — never an empty configuration as if it had advised none.

Either way the configuration goes through agenticdb's validator; what it refuses is dropped (and
listed in the notes), the rest is applied once through agenticdb's executor and verified.
"""

from __future__ import annotations

import subprocess
import time

import psycopg
import structlog

from agenticdb.loop.recovery import Recovery
from agenticdb.models import Verdict
from agenticdb.store.journal import Journal
from benchmarks.harness import mysqltuner, pgtune_rules
from benchmarks.harness.competitors import Bench, Result, executor, validate_config
from benchmarks.harness.pgtune_rules import PgTuneInputs

log = structlog.get_logger(__name__)
MiB = 2**20


def pg_inputs(bench: Bench) -> tuple[PgTuneInputs, str]:
    """PGTune's form filled in as a DBA would for this server; returns (inputs, one-line description)."""
    info = bench.instance.info
    assert info is not None
    maxconn = int(bench.target.current_values(["max_connections"]).get("max_connections", "100"))
    version = int(bench.target.version().split(".")[0])
    with psycopg.connect(info.dsn, connect_timeout=10) as conn:  # type: ignore[union-attr]
        row = conn.execute("SELECT sum(pg_database_size(datname))::bigint FROM pg_database").fetchone()
    data_bytes = int(row[0]) if row and row[0] is not None else 0
    mem = bench.hardware.memory_limit_bytes
    device = bench.hardware.data_device
    inp = PgTuneInputs(
        memory_bytes=mem,
        cpus=bench.hardware.cpu_count,
        connections=maxconn,
        storage=pgtune_rules.storage_class(device),
        db_type=pgtune_rules.db_type_for(bench.scenario.workload_class),
        db_size=pgtune_rules.data_size_class(data_bytes, mem),
        pg_version=version,
    )
    text = (
        f"PGTune inputs: DB version {version}, OS linux, DB type {inp.db_type}, RAM {mem // MiB} MB "
        f"(server memory limit), CPUs {inp.cpus}, connections {maxconn}, storage {inp.storage} "
        f"(device {device or 'unknown'}), data size {data_bytes / 2**30:.2f} GiB → {inp.db_size}"
    )
    return inp, text


def mariadb_recommendation(bench: Bench, res: Result) -> dict[str, str]:
    """Warm-up load, real MySQLTuner, its advice turned into values (notes and label go on ``res``)."""
    info = bench.instance.info
    assert info is not None
    w = bench.settings.workload
    load_s = max(10.0, w.warmup_s + w.duration_s)
    # MySQLTuner reads status counters (hit rates, temp tables, joins): give it a load to read.
    bench.workload.run(load_s)
    try:
        report = mysqltuner.run(info.port, bench.hardware.memory_limit_bytes, server_log=info.log_file)  # type: ignore[union-attr]
    except (FileNotFoundError, subprocess.TimeoutExpired) as exc:
        res.label = "MySQLTuner + rules"
        res.could_not_advise = f"MySQLTuner did not run: {exc}"
        return {}
    (bench.out / "mysqltuner.txt").write_text(report.output)
    res.label = report.label
    if not report.complete:
        res.could_not_advise = report.failure
        res.notes.append(f"output in {bench.out / 'mysqltuner.txt'}")
        log.warning("static.could_not_advise", label=report.label, reason=report.failure)
        return {}
    res.notes.append(
        f"{report.label} after a {load_s:.0f}-s load, --forcemem {bench.hardware.memory_limit_bytes // MiB}: "
        f"parsed {len(report.advice)} variable line(s): " + " | ".join(a.raw for a in report.advice)
    )
    if report.warnings or report.max_memory:
        res.notes.append(
            f"MySQLTuner also said: {'; '.join(report.warnings)} (maximum possible memory {report.max_memory})"
        )
    names = sorted({a.name for a in report.advice if a.name} | {"innodb_buffer_pool_size"})
    current = bench.target.current_values(names)

    def fits(config: dict[str, str]) -> bool:
        verdict, ms = validate_config(bench, config, "static")
        res.validator_ms.append(ms)
        return verdict.ok

    choice = mysqltuner.choose(report, current, bench.hardware.memory_limit_bytes, fits)
    res.notes += choice.notes
    return choice.values


def _apply_once(bench: Bench, journal: Journal, verdict: Verdict | None, res: Result) -> None:
    """Apply what ``verdict`` accepted once through agenticdb's executor (``res.name`` is the purpose); a
    failure is counted and recovered like any trial's. Nothing to do without an accepted change."""
    if verdict is None or not verdict.ok or not verdict.changes:
        return
    ex = executor(bench, journal, "bench-" + res.name.replace(":", "-"))
    try:
        ex.apply(verdict.changes, verdict.apply_requirement, 0, bench.start, purpose=res.name)
        res.changes = {c.name: c.value for c in verdict.changes}
    except Exception as exc:  # noqa: BLE001 - a failure is counted and recovered like any trial
        res.failed += 1
        rr = Recovery(bench.target).recover(None, bench.start)
        res.recovered += int(rr.service_available)
        res.notes.append(f"apply failed: {exc}")


def _validated(bench: Bench, rec: dict[str, str], res: Result) -> Verdict:
    """Validate ``rec``, dropping what the validator refuses until the rest passes (or nothing is left)."""
    verdict, ms = validate_config(bench, rec, "static")
    res.validator_ms.append(ms)
    for _ in range(len(rec)):
        if verdict.ok or not rec:
            break
        dropped = sorted({f.parameter for f in verdict.failed if f.parameter and f.parameter in rec})
        res.rejected += 1
        refused = ", ".join(f"{f.parameter}={f.value} ({f.rule_id or f.check})" for f in verdict.failed)
        # The first refusal with its full reason; later ones name the knob and the rule only.
        detail = "" if any(n.startswith("validator refused") for n in res.notes) else ": " + verdict.failed[0].message
        res.notes.append(f"validator refused {refused}{detail[:400]}")
        if not dropped:
            break
        rec = {k: v for k, v in rec.items() if k not in dropped}
        verdict, ms = validate_config(bench, rec, "static")
        res.validator_ms.append(ms)
    return verdict


def run_static(bench: Bench, journal: Journal) -> Result:
    """PGTune (PostgreSQL) or MySQLTuner (MariaDB), validated and applied once."""
    t0 = time.monotonic()
    res = Result("static", bench.start)
    if bench.scenario.dbms == "postgres":
        inp, text = pg_inputs(bench)
        res.label = pgtune_rules.LABEL
        res.notes.append(text)
        rec = pgtune_rules.recommend(inp)
        res.notes.append("recommended: " + ", ".join(f"{k}={v}" for k, v in rec.items()))
    else:
        rec = mariadb_recommendation(bench, res)
    _apply_once(bench, journal, _validated(bench, rec, res) if rec else None, res)
    res.final = bench.target.snapshot(list(bench.catalog.knobs), label="static")
    res.elapsed_s = time.monotonic() - t0
    log.info("static.done", label=res.label, changes=res.changes)
    return res


def run_fixed(bench: Bench, journal: Journal, name: str, config: dict[str, str]) -> Result:
    """A configuration given by hand (``--fixed FILE``: a TOML table per configuration), validated as the
    static peer's is (what the validator refuses is dropped and noted) and applied once: to measure one
    knob's share of a peer's gain alone, side by side with the others. ``name``: ``fixed:<table>``."""
    t0 = time.monotonic()
    res = Result(name, bench.start, label="given: " + ", ".join(f"{k}={v}" for k, v in config.items()))
    _apply_once(bench, journal, _validated(bench, dict(config), res) if config else None, res)
    res.final = bench.target.snapshot(list(bench.catalog.knobs), label=name)
    res.elapsed_s = time.monotonic() - t0
    log.info("fixed.done", name=name, changes=res.changes)
    return res
