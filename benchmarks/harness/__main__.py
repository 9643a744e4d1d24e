"""``python -m benchmarks.harness run --scenario NAME|all --budget-min M --out results/DATE/``."""

from __future__ import annotations

import json
import sys
import tomllib
from datetime import date
from pathlib import Path

import typer

from benchmarks.harness import report, runner, scenarios
from benchmarks.harness.competitors import DEFAULT_NAMES, NAMES

app = typer.Typer(add_completion=False, help="agenticdb side-by-side tuning benchmarks (benchmarks/README.md).")


@app.command("list")
def list_scenarios() -> None:
    """List the scenarios."""
    for s in scenarios.SCENARIOS.values():
        typer.echo(f"{s.name:26} {s.about}")


@app.command()
def run(
    scenario: str = typer.Option(..., help="scenario name or 'all' (see `list`)"),
    budget_min: float = typer.Option(10.0, help="wall-clock budget per tuning competitor, minutes"),
    out: Path = typer.Option(  # noqa: B008 - typer's documented style
        None, help="results directory (default: results/<today>)"
    ),
    competitors: str = typer.Option(
        ",".join(DEFAULT_NAMES),
        help="comma-separated subset of "
        + ",".join(NAMES)
        + " (oracle: TPE with 5 × the budget; agenticdb-half: agenticdb with half of it; both only when named)",
    ),
    repeats: int = typer.Option(3, min=1, help="interleaved re-measurements of each final configuration"),
    duration: float = typer.Option(None, help="seconds per measured run (default: the scenario's)"),
    warmup: float = typer.Option(None, help="warm-up seconds before each run (default: the scenario's)"),
    seed_budget_min: float = typer.Option(None, help="budget of the experience-seeding session (default: budget)"),
    fixed: Path = typer.Option(  # noqa: B008 - typer's documented style
        None, help="TOML file of configurations given by hand ([name] knob = 'value'): each runs as 'fixed:<name>'"
    ),
) -> None:
    """Run scenario(s) and write results.md, <scenario>.png and <scenario>/results.json under OUT."""
    comps = [c.strip() for c in competitors.split(",") if c.strip()]
    given = fixed_configs(fixed) if fixed is not None else {}
    comps += [c for c in given if c not in comps]
    bad = [c for c in comps if c not in NAMES and c not in given]
    if bad:
        raise typer.BadParameter(
            f"unknown competitor(s) {bad}; expected a subset of {NAMES}", param_hint="--competitors"
        )
    try:
        names = scenarios.MAIN if scenario == "all" else [scenarios.get(scenario).name]
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--scenario") from None
    out = (out or Path("results") / date.today().isoformat()).resolve()
    opts = runner.Options(
        out=out,
        budget_min=budget_min,
        competitors=comps,
        repeats=repeats,
        duration_s=duration,
        warmup_s=warmup,
        seed_budget_min=seed_budget_min,
        fixed=given,
    )
    summaries = []
    for name in names:
        summaries.append(runner.run_scenario(name, opts))
        md, pngs = report.write(summaries, out)  # rewritten after each scenario: partial runs keep results
    typer.echo(md.read_text())
    typer.echo(f"written: {md} " + " ".join(str(p) for p in pngs))


def fixed_configs(path: Path) -> dict[str, dict[str, str]]:
    """``--fixed FILE``: ``{"fixed:<table>": {knob: value}}``, values as strings; a table of non-tables or an
    unreadable file is a BadParameter naming the file and the table."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise typer.BadParameter(f"{path}: {exc}", param_hint="--fixed") from None
    out: dict[str, dict[str, str]] = {}
    for name, table in data.items():
        if not isinstance(table, dict) or not table:
            raise typer.BadParameter(f"{path}: [{name}] must be a table of knob = value", param_hint="--fixed")
        out[f"fixed:{name}"] = {k: str(v) for k, v in table.items()}
    return out


@app.command("report")
def report_cmd(out: Path = typer.Argument(..., help="results directory of an earlier run")) -> None:  # noqa: B008
    """Rebuild results.md and the PNGs from <OUT>/<scenario>/results.json."""
    summaries = [json.loads(p.read_text()) for p in sorted(out.glob("*/results.json"))]
    if not summaries:
        typer.echo(f"no */results.json under {out}", err=True)
        sys.exit(2)
    md, pngs = report.write(summaries, out)
    typer.echo(md.read_text())


if __name__ == "__main__":
    app()
