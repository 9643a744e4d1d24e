"""Side by side for one host: PGTune's rules, MySQLTuner and ``agenticdb advise`` (docs/advice.md).

Usage (sandboxes from ``agenticdb sandbox up postgres|mariadb --home HOME``)::

    python -m benchmarks.advice_side_by_side --home HOME > table.md

Prints Markdown: one table per server with the value in effect, PGTune's recommendation (PostgreSQL; the
form filled as a DBA would from the host: OLTP, data size class, storage class from the data device),
MySQLTuner's "Variables to adjust" (MariaDB; run with ``--forcemem`` = the memory limit) and agenticdb's
recommendation with its rule, confidence and the validator's verdict. Nothing is changed on a server.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agenticdb.advice.advise import advise
from agenticdb.advice.types import Advice
from agenticdb.app import advice_parts, build_target, sandbox_target_config
from agenticdb.config import load_config
from agenticdb.host.hardware import detect_hardware
from agenticdb.logs import configure_logging
from benchmarks.harness import mysqltuner, pgtune_rules


def _advice(home: Path, kind: str, observe_s: float) -> tuple[Advice, dict[str, str], int, int]:
    cfg = load_config(None, {"storage": {"home": home, "memory_db": None, "journal_db": None}})
    tcfg = sandbox_target_config(kind, home)
    cfg = cfg.model_copy(update={"target": tcfg})
    target = build_target(cfg)
    try:
        adv = advise(cfg, target, observe_s=observe_s, os_layer=True, parts=advice_parts())
        current = target.current_values(list(target.catalog().knobs))
        size = int(target.runtime_state().gauges.get("pg_database.size_bytes", 0))
        return adv, current, size, tcfg.port if hasattr(tcfg, "port") else 0
    finally:
        target.close()


def _row(name: str, current: str, theirs: str, adv: Advice) -> str:
    ours = next((r for r in adv.recommendations if r.knob == name), None)
    mine = f"{ours.recommended} ({ours.rule}; {ours.confidence}; {ours.verdict})" if ours else "—"
    return f"| `{name}` | {current} | {theirs or '—'} | {mine} |"


def postgres_table(home: Path, observe_s: float) -> list[str]:
    adv, current, size, _ = _advice(home, "postgres", observe_s)
    hw = detect_hardware(None)
    inp = pgtune_rules.PgTuneInputs(
        memory_bytes=hw.memory_limit_bytes,
        cpus=hw.cpu_count,
        connections=int(current.get("max_connections", "100")),
        storage=pgtune_rules.storage_class(str(adv.hardware.get("data_device") or "") or None),
        db_type="oltp",
        db_size=pgtune_rules.data_size_class(size, hw.memory_limit_bytes),
        pg_version=15,
    )
    pgtune = pgtune_rules.recommend(inp)
    names = sorted(set(pgtune) | {r.knob for r in adv.recommendations if r.layer.value == "dbms"})
    lines = [
        f"### PostgreSQL {adv.version} ({adv.target}); PGTune form: {inp}",
        "",
        "| knob | in effect | PGTune | agenticdb advise (rule; confidence; validator) |",
        "|---|---|---|---|",
    ]
    lines += [_row(n, current.get(n, "?"), pgtune.get(n, ""), adv) for n in names]
    return lines + _rest(adv)


def mariadb_table(home: Path, observe_s: float) -> list[str]:
    from agenticdb.sandbox.mariadb import MariaDBSandbox

    adv, current, _, _ = _advice(home, "mariadb", observe_s)
    info = MariaDBSandbox(home).info()
    assert info is not None
    hw = detect_hardware(None)
    report = mysqltuner.run(info.port, hw.memory_limit_bytes, server_log=info.log_file, timeout_s=300)
    tuner = {a.name: f"{a.relation} {a.value}" if a.value else a.raw for a in report.advice if a.name}
    names = sorted(set(tuner) | {r.knob for r in adv.recommendations if r.layer.value == "dbms"})
    lines = [
        f"### MariaDB {adv.version} ({adv.target}); {report.label}",
        "",
        "| variable | in effect | MySQLTuner | agenticdb advise (rule; confidence; validator) |",
        "|---|---|---|---|",
    ]
    lines += [_row(n, current.get(n, "?"), tuner.get(n, ""), adv) for n in names]
    lines += ["", "MySQLTuner lines without a variable: " + "; ".join(a.raw for a in report.advice if not a.name)]
    return lines + _rest(adv)


def _rest(adv: Advice) -> list[str]:
    lines = ["", "agenticdb findings: " + ("; ".join(f"{f.severity}: {f.title}" for f in adv.findings) or "none")]
    os_recs = [r for r in adv.recommendations if r.layer.value == "os"]
    lines.append(
        "agenticdb host advice: " + ("; ".join(f"{r.knob} {r.current} → {r.recommended}" for r in os_recs) or "none")
    )
    return lines + [f"notes: {' '.join(adv.notes) or '-'}", ""]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--observe", type=float, default=5.0, help="agenticdb's observation window (s)")
    args = ap.parse_args()
    configure_logging()  # warnings to stderr: structlog's default prints every log line into the table
    out = postgres_table(args.home, args.observe) + mariadb_table(args.home, args.observe)
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
