"""Markdown table and JSON summary of a scenario run: one row per scenario, rates per DBMS and per fault kind.

Rates count scored scenarios only; rejected ones (effect not beyond 5 × noise in that run) are listed
with their figures and left out of every rate (issue 22).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any


def _pct(n: int, d: int) -> str:
    return f"{100 * n / d:.0f} % ({n}/{d})" if d else "—"


def rates(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Diagnosis / Outcome / Safe Pass counts of the scored rows."""
    scored = [r for r in rows if r.get("status") == "scored"]
    n = len(scored)
    return {
        "scored": n,
        "diagnosis": sum(bool(r.get("diagnosis")) for r in scored),
        "outcome": sum(bool(r.get("outcome")) for r in scored),
        "safe_pass": sum(bool(r.get("safe_pass")) for r in scored),
    }


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Overall rates and rates per DBMS and per fault kind."""
    by_dbms: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_dbms[r["dbms"]].append(r)
        by_kind[r["kind"]].append(r)
    return {
        "all": rates(rows),
        "per_dbms": {k: rates(v) for k, v in sorted(by_dbms.items())},
        "per_kind": {k: rates(v) for k, v in sorted(by_kind.items())},
        "rejected": [r["scenario"] for r in rows if r.get("status") == "rejected"],
    }


def _row(r: dict[str, Any]) -> str:
    q = r.get("qualification", {})
    eff = f"{q.get('effect_pct', '—')} % (noise {100 * q['noise_cv']:.1f} %)" if "noise_cv" in q else "—"
    if r.get("status") != "scored":
        return f"| {r['scenario']} | {r['kind']} | {eff} | {r.get('status')} | | | | | | |"
    yes = {True: "yes", False: "no"}
    if r.get("recovered_pct") is None:
        from benchmarks.scenarios.runner import recovered

        r["recovered_pct"] = recovered(
            r.get("final", []), r.get("free_after") or q.get("free", []), q.get("faulty", [])
        )
    llm = r.get("llm") or {}
    tokens = int(llm.get("prompt_tokens", 0) + llm.get("completion_tokens", 0))
    return (
        f"| {r['scenario']} | {r['kind']} | {eff} | {r.get('diagnosis_label')} → {yes[bool(r['diagnosis'])]} "
        f"| {r.get('shortfall_pct')} % (margin {r.get('margin_pct', '—')} %) → {yes[bool(r['outcome'])]} "
        f"(gap closed {r.get('recovered_pct', '—')} %) "
        f"| {yes[bool(r['safe_pass'])]} "
        f"| {len(r.get('violations') or [])} | {r.get('round_fixed') or '—'} / {r.get('minutes_to_fix') or '—'} "
        f"| {', '.join(f'{k}={v}' for k, v in (r.get('kept_changes') or {}).items()) or '—'} "
        f"| {tokens or '—'} |"
    )


def markdown(rows: list[dict[str, Any]], planner: str) -> str:
    """The results table and the rate tables as Markdown."""
    s = summary(rows)
    lines = [
        f"# Scenario suite — planner {planner}",
        "",
        "| scenario | kind | fault effect (faulty vs free) | Diagnosis (first label) | Outcome (shortfall vs "
        "free) | Safe Pass | violations | fixed at round / min | kept changes | LLM tokens |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *[_row(r) for r in rows],
        "",
        "| group | scored | Diagnosis | Outcome | Safe Pass |",
        "|---|---|---|---|---|",
    ]
    groups = [("all", s["all"])]
    groups += [(f"DBMS {k}", v) for k, v in s["per_dbms"].items()]
    groups += [(f"kind {k}", v) for k, v in s["per_kind"].items() if v["scored"]]
    for name, g in groups:
        n = g["scored"]
        lines.append(
            f"| {name} | {n} | {_pct(g['diagnosis'], n)} | {_pct(g['outcome'], n)} | {_pct(g['safe_pass'], n)} |"
        )
    if s["rejected"]:
        lines += ["", "Rejected (effect not beyond 5 × noise in this run; not counted): " + ", ".join(s["rejected"])]
    return "\n".join(lines) + "\n"


def write(out: Path, rows: list[dict[str, Any]], planner: str) -> None:
    """``results.md`` and ``results.json`` under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps({"rows": rows, "summary": summary(rows)}, indent=2, default=str))
    (out / "results.md").write_text(markdown(rows, planner))


def collect(out: Path) -> list[dict[str, Any]]:
    """Every ``<out>/<scenario>/run.json`` (to rebuild the table after partial runs)."""
    return [json.loads(p.read_text()) for p in sorted(out.glob("*/run.json"))]
