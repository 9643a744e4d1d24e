"""Bodies of the read-only inspection commands: validate, catalog, report (argument parsing lives in
``agenticdb.cli``). Each returns the process exit code."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.table import Table

from agenticdb.cli.tune_cmd import _fmt_obj, _get, _safe_dsn
from agenticdb.config import Settings
from agenticdb.models import ApplyMode, Bottleneck, Change, Layer, Proposal
from agenticdb.targets.base import Target


def run_validate(cfg: Settings, changes: dict[str, Any], stage: str, apply_claim: str | None,
                 console: Console) -> int:
    """Validate a change file against the live target (or the Linux host for ``stage = os``)."""
    from agenticdb.app import build_target
    from agenticdb.hardware import detect_hardware
    from agenticdb.validator import validate

    layer = Layer(stage)
    target: Target
    if layer == Layer.os:
        from agenticdb.targets.linux import LinuxTarget

        target = LinuxTarget(root=cfg.os.root, devices=cfg.os.devices or None)
    else:
        target = build_target(cfg)
        if not target.available():
            console.print(f"[red]error:[/] target at {_safe_dsn(cfg.target.dsn)} is not accepting connections")
            return 1
    catalog = target.catalog()
    proposal = Proposal(bottleneck=Bottleneck.unknown, layer=layer,
                        changes=[Change(name=k, value=v) for k, v in changes.items()],
                        apply_requirement=ApplyMode(apply_claim) if apply_claim else ApplyMode.dynamic,
                        planner="file")
    current = target.current_values(list(catalog.knobs))
    can_restart = getattr(getattr(target, "service", None), "can_restart", lambda: True)()
    verdict = validate(proposal, catalog, current, detect_hardware(getattr(target, "data_dir", None)),
                       cfg.policy, layer, can_restart=can_restart)
    t = Table(title=f"verdict: {'ACCEPT' if verdict.ok else 'REJECT'} (apply: {verdict.apply_requirement.value})")
    for col in ("parameter", "value", "result", "rule", "message", "source"):
        t.add_column(col, overflow="fold")
    failed_names = {f.parameter for f in verdict.failed}
    for c in verdict.changes:
        if c.name not in failed_names:
            t.add_row(c.name, c.value, "[green]ok[/]", "", f"was {c.previous}; apply {c.apply.value}", "")
    for f in verdict.failed:
        t.add_row(f.parameter, f.value, "[red]rejected[/]", f.check + (f" ({f.rule_id})" if f.rule_id else ""),
                  f.message, f.source)
    console.print(t)
    for w in verdict.warnings:
        console.print(f"[yellow]warning:[/] {w}", highlight=False)
    for r in verdict.accepted_risks:
        console.print(f"[yellow]accepted risk:[/] {r}", highlight=False)
    target.close()
    return 0 if verdict.ok else 1


# ------------------------------------------------------------------------------------- catalog
def run_catalog(cfg: Settings, excluded: bool, os_stage: bool, like: str | None, console: Console) -> int:
    """Print the action catalog (or its exclusions with reasons): name, type, unit, range, allowed
    values, the value in effect now and how a change takes effect. Byte-sized limits are also shown
    in KiB/MiB/GiB so a DBA can read them at a glance."""
    from agenticdb.app import build_target

    target: Target
    if os_stage:
        from agenticdb.targets.linux import LinuxTarget

        target = LinuxTarget(root=cfg.os.root, devices=cfg.os.devices or None)
    else:
        target = build_target(cfg)
        if not target.available():
            dsn = _safe_dsn(cfg.target.dsn)
            console.print(f"[red]error:[/] target at {dsn} is not accepting connections")
            return 1
    cat = target.catalog()
    if excluded:
        t = Table(title=f"{cat.target} {cat.version}: excluded / unsupported")
        t.add_column("name")
        t.add_column("reason", overflow="fold")
        for name, reason in sorted({**cat.excluded, **cat.unsupported}.items()):
            if like is None or like in name:
                t.add_row(name, reason)
    else:
        names = sorted(n for n in cat.knobs if like is None or like in n)
        current = target.current_values(names) if names else {}
        t = Table(title=f"{cat.target} {cat.version}: {len(cat.knobs)} tunable parameters"
                  + (f" ({len(names)} matching {like!r})" if like is not None else ""))
        for col in ("name", "type", "unit", "min", "max", "values", "current", "apply"):
            t.add_column(col, overflow="fold")
        for name in names:
            k = cat.knobs[name]
            t.add_row(name, k.vartype, k.unit or "", _num(k.min_value, k.unit), _num(k.max_value, k.unit),
                      ",".join(k.enum_values or [])[:60], _num_text(current.get(name, ""), k.unit),
                      k.apply.value)
    console.print(t)
    target.close()
    return 0


_SIZE_UNITS = {"B": 1, "kB": 1024, "8kB": 8192, "16kB": 16384, "32kB": 32768, "MB": 2**20}


def _human_bytes(n: float) -> str:
    for suffix, size in (("EiB", 2**60), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.4g} {suffix}"
    return f"{n:g} B"


def _num(v: float | None, unit: str | None = None) -> str:
    if v is None:
        return ""
    text = str(int(v)) if float(v).is_integer() else f"{v:g}"
    per = _SIZE_UNITS.get(unit or "")
    if per and abs(v) * per >= 1024:
        text += f" ({_human_bytes(abs(v) * per)})"
    return text


def _num_text(value: str, unit: str | None) -> str:
    """A current value with its human size when it is a bare number of a size unit."""
    try:
        return _num(float(value), unit) if value.strip().lstrip("-").replace(".", "", 1).isdigit() else value
    except ValueError:
        return value


# ------------------------------------------------------------------------------------ rollback
def run_report(cfg: Settings, session: str | None, console: Console) -> int:
    """Print a Markdown report of a session from the Memory Book and journal."""
    from agenticdb.app import open_stores

    journal, memory = open_stores(cfg)
    sessions = journal.sessions()
    if not sessions:
        console.print("no sessions yet")
        return 1
    if session is None:
        session = _get(sessions[0], "id")
    rounds = memory.rounds(session)
    lines = [f"# agenticdb session {session}", ""]
    meta = next((s for s in sessions if _get(s, "id") == session), None)
    if meta is not None:
        lines.append("```")
        lines.append(json.dumps(meta if isinstance(meta, dict) else meta.model_dump(mode="json"), indent=2,
                                default=str))
        lines.append("```")
    lines += ["", "| round | stage | bottleneck | changes | objective | gain vs best | kept | decision | reason |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in rounds:
        ch = ", ".join(f"{k}={v}" for k, v in r.changes.items()) or "—"
        gain = "—" if r.gain_vs_best is None else f"{r.gain_vs_best:+.1%}"
        lines.append(f"| {r.round_no} | {r.stage.value} | {r.bottleneck.value} | {ch} | {_fmt_obj(r.objective)} | "
                     f"{gain} | {'yes' if r.kept else 'no'} | {r.decision.value} | {r.reason} |")
    lines.append("")
    for r in rounds:
        if r.proposal is None:
            continue
        lines.append(f"## Round {r.round_no}: {r.bottleneck.value}")
        lines.append(f"- rationale: {r.proposal.rationale}")
        for e in r.proposal.evidence:
            lines.append(f"- evidence: {e}")
        for c in r.proposal.changes:
            lines.append(f"- change `{c.name} = {c.value}`: {c.rationale}")
        for f in r.failed_checks:
            lines.append(f"- rejected `{f.parameter} = {f.value}` ({f.check}): {f.message}")
        if r.failure:
            lines.append(f"- failure in {r.failure.phase}: {r.failure.message}")
        if r.recovery:
            lines.append(f"- recovery: {r.recovery.action} — {r.recovery.details}")
        lines.append("")
    console.print("\n".join(lines), markup=False, highlight=False)
    return 0
