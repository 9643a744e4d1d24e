"""Bodies of the tune / validate / catalog / rollback / report commands (kept apart from argument
parsing in ``agenticdb.cli``). Each returns the process exit code."""

from __future__ import annotations

import json
import statistics
from typing import Any

import structlog
from rich.console import Console
from rich.live import Live
from rich.table import Table

from agenticdb.config import Settings
from agenticdb.models import ApplyMode, Change, Bottleneck, Layer, Proposal, RoundOutcome

log = structlog.get_logger(__name__)


def _fmt_obj(v: float | None) -> str:
    return "—" if v is None else f"{v:,.3f}"


def rounds_table(rounds: list[RoundOutcome], higher: bool = True) -> Table:
    """The live table of rounds: round, stage, bottleneck, changes, objective, gain vs best, decision, reason."""
    t = Table(title="agenticdb rounds", expand=False, show_lines=False)
    for col in ("round", "stage", "bottleneck", "changes", "objective", "gain vs best", "decision", "reason"):
        t.add_column(col, overflow="fold")
    for r in rounds:
        changes = ", ".join(f"{k}={v}" for k, v in r.changes.items()) or "—"
        if not r.verdict_ok and r.failed_checks:
            changes += f"  [red](rejected: {r.failed_checks[0].check})[/]"
        if r.failure:
            changes += f"  [red](failed: {r.failure.phase}; {r.recovery.action if r.recovery else 'no recovery'})[/]"
        gain = "—" if r.gain_vs_best is None else f"{r.gain_vs_best:+.1%}" + (" kept" if r.kept else "")
        t.add_row(str(r.round_no), r.stage.value, r.bottleneck.value, changes, _fmt_obj(r.objective), gain,
                  r.decision.value, r.reason)
    return t


def run_tune(cfg: Settings, console: Console, start_from: dict[str, Any] | None) -> int:
    """Build the components, run one session with a live table, print the summary."""
    from agenticdb.app import SetupError, build_session, build_target, build_workload, open_stores
    from agenticdb.lock import TargetLock, LockError
    from agenticdb.session import SessionError

    journal, memory = open_stores(cfg)
    try:
        target = build_target(cfg)
        if not target.available():
            console.print(f"[red]error:[/] target {cfg.target.kind} at {_safe_dsn(cfg.target.dsn)} is not "
                          "accepting connections")
            return 1
        workload = build_workload(cfg, target)
    except (SetupError, ValueError) as exc:
        console.print(f"[red]error:[/] {exc}")
        return 2
    rounds: list[RoundOutcome] = []
    live = Live(rounds_table(rounds), console=console, refresh_per_second=2, transient=False) \
        if console.is_terminal else None

    def on_round(outcome: RoundOutcome) -> None:
        rounds.append(outcome)
        if live is not None:
            live.update(rounds_table(rounds))
        else:
            console.print(f"round {outcome.round_no} [{outcome.stage.value}] {outcome.bottleneck.value}: "
                          f"{', '.join(f'{k}={v}' for k, v in outcome.changes.items()) or '—'} → "
                          f"objective {_fmt_obj(outcome.objective)}, gain "
                          f"{'—' if outcome.gain_vs_best is None else f'{outcome.gain_vs_best:+.1%}'}"
                          f"{' kept' if outcome.kept else ''}; {outcome.decision.value}: {outcome.reason}",
                          highlight=False)

    try:
        lock = TargetLock(cfg.storage.home, cfg.target.dsn)
        lock.acquire()
    except LockError as exc:
        console.print(f"[red]error:[/] {exc}")
        return 1
    try:
        session = build_session(cfg, target, workload, journal, memory, on_round=on_round, start_from=start_from)
        console.print(f"agenticdb session [bold]{session.session_id}[/]: {cfg.target.kind} at "
                      f"{_safe_dsn(cfg.target.dsn)}, workload {cfg.workload.kind}, planner {session.planner.name}, "
                      f"up to {cfg.loop.max_rounds} rounds, durability {cfg.policy.durability}", highlight=False)
        try:
            if live is not None:
                with live:
                    result = session.run()
            else:
                result = session.run()
        except SessionError as exc:
            console.print(f"[red]error:[/] {exc}")
            return 1
    finally:
        lock.release()
        target.close()
    _summary(console, cfg, result)
    return 0 if result.status == "completed" else 1


def _safe_dsn(dsn: str) -> str:
    """DSN without a password (for printing and the journal)."""
    import re

    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", dsn)


def _summary(console: Console, cfg: Settings, result: Any) -> None:
    direction = "higher is better" if result.higher_is_better else "lower is better"
    gain = None
    if result.baseline_objective and result.best_objective:
        from agenticdb.auditor import relative_gain

        gain = relative_gain(result.best_objective, result.baseline_objective, result.higher_is_better)
    console.print()
    console.print(f"[bold]session {result.session_id}[/]: {result.status} — {result.reason}", highlight=False)
    console.print(f"objective {result.objective_name} ({direction}); measured noise CV {result.noise_cv:.1%}")
    console.print(f"baseline {_fmt_obj(result.baseline_objective)} → best {_fmt_obj(result.best_objective)}"
                  + (f" ({gain:+.1%})" if gain is not None else ""))
    if result.best_changes:
        console.print("best configuration (in effect and verified):")
        for k, v in result.best_changes.items():
            console.print(f"  {k} = {v}", highlight=False)
    else:
        console.print("best configuration: the starting configuration (no change beat it beyond noise)")
    if result.llm_totals:
        console.print(f"LLM usage: {json.dumps(result.llm_totals)}")
    console.print(f"journal: {cfg.storage.journal_db}   (agenticdb journal show {result.session_id})")
    console.print(f"memory:  {cfg.storage.memory_db}")


# ------------------------------------------------------------------------------------ validate
def run_validate(cfg: Settings, changes: dict[str, Any], stage: str, apply_claim: str | None,
                 console: Console) -> int:
    """Validate a change file against the live target (or the Linux host for ``stage = os``)."""
    from agenticdb.app import build_target
    from agenticdb.hardware import detect_hardware
    from agenticdb.validator import validate

    layer = Layer(stage)
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
    """Print the action catalog (or its exclusions with reasons)."""
    from agenticdb.app import build_target

    if os_stage:
        from agenticdb.targets.linux import LinuxTarget

        target = LinuxTarget(root=cfg.os.root, devices=cfg.os.devices or None)
    else:
        target = build_target(cfg)
    cat = target.catalog()
    if excluded:
        t = Table(title=f"{cat.target} {cat.version}: excluded / unsupported")
        t.add_column("name")
        t.add_column("reason", overflow="fold")
        for name, reason in sorted({**cat.excluded, **cat.unsupported}.items()):
            if like is None or like in name:
                t.add_row(name, reason)
    else:
        t = Table(title=f"{cat.target} {cat.version}: {len(cat.knobs)} tunable parameters")
        for col in ("name", "type", "unit", "min", "max", "values", "apply"):
            t.add_column(col, overflow="fold")
        for name, k in sorted(cat.knobs.items()):
            if like is not None and like not in name:
                continue
            t.add_row(name, k.vartype, k.unit or "", _num(k.min_value), _num(k.max_value),
                      ",".join(k.enum_values or [])[:60], k.apply.value)
    console.print(t)
    target.close()
    return 0


def _num(v: float | None) -> str:
    if v is None:
        return ""
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


# ------------------------------------------------------------------------------------ rollback
def run_rollback(cfg: Settings, dbms: bool, os_: bool, session: str | None, to: str, console: Console) -> int:
    """Restore the DBMS snapshot of a session (baseline or last safe) and/or the saved OS originals."""
    from agenticdb.app import build_target, open_stores
    from agenticdb.models import Snapshot
    from agenticdb.recovery import values_match

    journal, memory = open_stores(cfg)
    sessions = journal.sessions()
    if session is None and sessions:
        session = sessions[0]["id"] if isinstance(sessions[0], dict) else sessions[0].id
    code = 0
    if dbms:
        if session is None:
            console.print("[red]error:[/] no session in the journal to roll back")
            return 1
        snap = _find_snapshot(journal, session, to)
        if snap is None:
            console.print(f"[red]error:[/] session {session} has no {to} snapshot in the journal")
            return 1
        target = build_target(cfg)
        target.restore(snap)
        ok, diff = values_match(target, snap)
        journal.append(session, "rollback", {"stage": "dbms", "to": to, "snapshot": snap.label, "verified": ok})
        console.print(f"DBMS restored to {to} of session {session}: "
                      + ("[green]verified[/]" if ok else f"[red]differences {diff}[/]"))
        code = 0 if ok else 1
        target.close()
    if os_:
        from agenticdb.targets.linux import LinuxTarget

        originals = memory.os_originals(session_id=None, unrestored_only=True)
        if not originals:
            console.print("OS: nothing to restore (no unrestored originals saved)")
        else:
            linux = LinuxTarget(root=cfg.os.root, devices=cfg.os.devices or None)
            values = {_get(o, "name"): _get(o, "original") for o in originals}
            linux.restore(Snapshot(target="linux", values=values, label="os originals"))
            now = linux.current_values(list(values))
            bad = {k: (v, now.get(k)) for k, v in values.items() if str(now.get(k, "")).strip() != str(v).strip()}
            for o in originals:
                memory.mark_os_restored(_get(o, "session_id"), _get(o, "name"))
            journal.append(session or "rollback", "rollback", {"stage": "os", "values": values, "verified": not bad})
            console.print(f"OS: restored {len(values)} original values" + (f" [red]differences {bad}[/]" if bad else ""))
            code = code or (1 if bad else 0)
    return code


def _get(o: Any, key: str) -> Any:
    return o[key] if isinstance(o, dict) else getattr(o, key)


def _find_snapshot(journal: Any, session: str, to: str):  # type: ignore[no-untyped-def]
    from agenticdb.models import Snapshot

    events = journal.events(session)
    intents = [e for e in events if _get(e, "event") == "intent"]
    if not intents:
        return None
    chosen = intents[0] if to == "baseline" else intents[-1]
    data = _get(chosen, "data")
    if isinstance(data, str):
        data = json.loads(data)
    return Snapshot.model_validate(data["snapshot"])


# -------------------------------------------------------------------------------------- report
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
