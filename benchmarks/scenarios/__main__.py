"""``python -m benchmarks.scenarios list|qualify|run|report`` (issue 22; benchmarks/README.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from agenticdb.cli.output import print_table
from benchmarks.scenarios import report
from benchmarks.scenarios.model import ScenarioError, load_all, select
from benchmarks.scenarios.runner import RunOptions, qualify, run

app = typer.Typer(no_args_is_help=True, help="Injected-fault scenarios: Diagnosis, Outcome and Safe Pass rates.")
console = Console()

OnlyOpt = Annotated[str | None, typer.Option("--only", help="comma-separated names (prefix* allowed)")]
OutOpt = Annotated[Path, typer.Option("--out", help="result folder")]


def _pick(only: str | None):  # type: ignore[no-untyped-def]
    try:
        return select(load_all(), only)
    except ScenarioError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from None


@app.command("list")
def list_cmd(only: OnlyOpt = None) -> None:
    """The scenarios: target, fault, expected labels, repair knobs, source."""
    t = Table(title="scenarios")
    for col in ("name", "dbms", "kind", "fault", "expected", "repair", "source"):
        t.add_column(col, overflow="fold")
    for s in _pick(only):
        fault = ", ".join(f"{k}={v}" for k, v in s.fault.settings.items())
        t.add_row(
            s.name,
            s.dbms_label,
            s.kind,
            fault,
            ",".join(s.expect.labels),
            ",".join(s.expect.repair),
            s.fault.source[:60] + ("…" if len(s.fault.source) > 60 else ""),
        )
    print_table(console, t)  # in a pipe: a plain table, or one block per row when wider than a terminal


@app.command("qualify")
def qualify_cmd(
    out: OutOpt,
    only: OnlyOpt = None,
    repeats: Annotated[int, typer.Option(help="runs of each configuration")] = 3,
    keep: Annotated[bool, typer.Option(help="keep the instance folders")] = False,
) -> None:
    """Measure fault-free vs faulty; a scenario counts only when the effect is beyond 5 × the noise."""
    opts = RunOptions(out=out, repeats=repeats, keep=keep)
    rows = []
    for s in _pick(only):
        try:
            q = qualify(s, opts)
        except Exception as exc:  # noqa: BLE001 - one broken scenario must not stop the suite
            q = {"scenario": s.name, "qualified": False, "reason": f"error: {exc}"[:500]}
        rows.append(q)
        console.print(f"{s.name}: {'qualified' if q['qualified'] else 'REJECTED'} — {q.get('reason')}")
        (out / "qualify.json").write_text(json.dumps(rows, indent=2))


@app.command("run")
def run_cmd(
    out: OutOpt,
    planner: Annotated[str, typer.Option(help="heuristic | llm")] = "heuristic",
    only: OnlyOpt = None,
    budget_s: Annotated[float, typer.Option("--budget-s", help="time budget of each tuning session (s)")] = 180,
    rounds: Annotated[int, typer.Option(help="max rounds of each session")] = 6,
    repeats: Annotated[int, typer.Option(help="fault-free / faulty runs each (qualification)")] = 3,
    final_repeats: Annotated[
        int, typer.Option(help="runs of the final configuration (each paired with a fault-free run)")
    ] = 3,
    force: Annotated[bool, typer.Option(help="tune even when the fault did not qualify in this run")] = False,
    keep: Annotated[bool, typer.Option(help="keep the instance folders")] = False,
) -> None:
    """For each scenario: pristine server, inject, one `agenticdb tune` session, score from the journal."""
    if planner not in ("heuristic", "llm"):
        console.print(f"[red]error:[/] --planner {planner!r}: expected 'heuristic' or 'llm'")
        raise typer.Exit(2)
    opts = RunOptions(
        out=out,
        planner=planner,
        budget_s=budget_s,
        max_rounds=rounds,
        repeats=repeats,
        final_repeats=final_repeats,
        force=force,
        keep=keep,
    )
    rows = []
    for s in _pick(only):
        try:
            r = run(s, opts)
        except Exception as exc:  # noqa: BLE001 - recorded as an error row; the suite goes on
            r = {"scenario": s.name, "dbms": s.target.dbms, "kind": s.kind, "status": f"error: {exc}"[:300]}
        rows.append(r)
        report.write(out, rows, planner)
        console.print(f"{s.name}: {r.get('status')} diagnosis={r.get('diagnosis_label')} outcome={r.get('outcome')}")
    console.print(report.markdown(rows, planner))


@app.command("report")
def report_cmd(out: OutOpt, planner: Annotated[str, typer.Option()] = "heuristic") -> None:
    """Rebuild results.md / results.json from every <out>/<scenario>/run.json."""
    rows = report.collect(out)
    report.write(out, rows, planner)
    console.print(report.markdown(rows, planner))


if __name__ == "__main__":
    app()
