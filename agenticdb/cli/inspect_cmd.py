"""Bodies of the read-only inspection commands: validate, catalog, report (argument parsing lives in
``agenticdb.cli``). Each returns the process exit code."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agenticdb.cli.output import print_json, print_line, print_table, table_rows
from agenticdb.cli.story_facts import baseline_disturbed
from agenticdb.cli.tune_cmd import (
    _safe_dsn,
    baseline_best_text,
    estimate_text,
    medians_text,
    stage_text,
    verdict_text,
)
from agenticdb.config import Settings
from agenticdb.dialect import family_of
from agenticdb.host.hardware import detect_hardware
from agenticdb.models import ApplyMode, Bottleneck, Catalog, Change, FailedCheck, Layer, Observed, Proposal, Verdict
from agenticdb.redaction import redact
from agenticdb.report.daemon_stop import DaemonStop, daemon_stop
from agenticdb.report.data import report_data
from agenticdb.report.footnotes import Footnotes
from agenticdb.report.labels import higher_is_better, noise_said, objective_label, objective_unit
from agenticdb.rootcause.text import remediation_report_lines
from agenticdb.rootcause.text import report_lines as root_cause_lines
from agenticdb.store.journal import Journal
from agenticdb.store.journal_events import JournalError
from agenticdb.store.memory import MemoryBook
from agenticdb.targets.base import Target
from agenticdb.units import unit_bytes
from agenticdb.units.compare import values_equal
from agenticdb.validation.exclusions import LeftOut, left_out
from agenticdb.validation.rules import load_ruleset
from agenticdb.validation.validator import flavor_of, validate


def run_validate(
    cfg: Settings,
    changes: dict[str, Any],
    stage: str,
    apply_claim: str | None,
    console: Console,
    fmt: str = "text",
) -> int:
    """Validate a change file against the live target (or the Linux host for ``stage = os``); ``fmt``
    ``json`` prints the verdict, one object per change, the warnings and accepted risks as JSON."""
    layer = Layer(stage)
    target = _inspected_target(cfg, layer == Layer.os, console)
    if target is None:
        return 1
    verdict, catalog, current = _validated(cfg, target, layer, changes, apply_claim)
    family = family_of(catalog.target)
    cur = {k.lower(): v for k, v in current.items()}
    # A durability rejection of the value already in effect is a no-op: agenticdb would write nothing.
    # It is reported as "already in effect" (exit 0 if nothing else fails) with a warning that the value
    # in effect is itself durability-risking: agenticdb never *sets* it, but it does not undo a choice
    # the DBA made either.
    noops = [
        f
        for f in verdict.failed
        if f.check == "durability" and _same(family, catalog, f.parameter, f.value, cur.get(f.parameter.lower()))
    ]
    failed = [f for f in verdict.failed if f not in noops]
    table = _verdict_table(verdict, catalog, family, noops, failed)
    warnings = list(verdict.warnings)
    if apply_claim is None:  # no claim was made, so nothing was "corrected"
        warnings = [w for w in warnings if not w.startswith("apply requirement")]
    for f in noops:
        warnings.append(
            f"{f.parameter}={f.value} is already in effect and is durability-risking "
            f"(rule {f.rule_id}); under durability = {cfg.policy.durability} agenticdb would not set it"
        )
    code = 0 if not failed else 1
    _print_verdict(console, fmt, table, verdict, warnings, code)
    return code


def _validated(
    cfg: Settings, target: Target, layer: Layer, changes: dict[str, Any], apply_claim: str | None
) -> tuple[Verdict, Catalog, dict[str, str]]:
    """The validator's verdict on ``changes`` against ``target`` now (its values, the host's hardware and
    the server's usage), with the catalog and values it read; closes ``target``."""
    catalog = target.catalog()
    proposal = Proposal(
        bottleneck=Bottleneck.unknown,
        layer=layer,
        changes=[Change(name=k, value=v) for k, v in changes.items()],
        apply_requirement=ApplyMode(apply_claim) if apply_claim else ApplyMode.dynamic,
        planner="file",
    )
    current = target.current_values(list(catalog.knobs))
    hardware = detect_hardware(target.data_dir, pid=target.server_pid())
    # what capacity rules compare with: the server's usage now (peaks where the server keeps them)
    observed = Observed(gauges=target.runtime_state().gauges, read=target.rule_gauges)
    verdict = validate(
        proposal,
        catalog,
        current,
        hardware,
        cfg.policy,
        layer,
        can_restart=target.can_restart(),
        observed=observed,
    )
    target.close()
    return verdict, catalog, current


def _print_verdict(console: Console, fmt: str, table: Table, verdict: Verdict, warnings: list[str], code: int) -> None:
    """The verdict as a table with warnings and accepted risks, or (``fmt = json``) as one JSON object."""
    if fmt == "json":
        title = str(table.title or "")
        print_json(
            console,
            {
                "verdict": title.split(":", 1)[-1].split()[0].lower() if title else "",
                "summary": title,
                "apply": verdict.apply_requirement.value,
                "changes": table_rows(table),
                "warnings": warnings,
                "accepted_risks": list(verdict.accepted_risks),
                "exit_code": code,
            },
        )
        return
    print_table(console, table)
    for w in warnings:
        print_line(console, f"[yellow]warning:[/] {escape(w)}")
    for r in verdict.accepted_risks:
        print_line(console, f"[yellow]accepted risk:[/] {escape(r)}")


def _inspected_target(cfg: Settings, os_stage: bool, console: Console) -> Target | None:
    """The Linux host for the OS stage, else the configured DBMS (None, said why, when it does not answer)."""
    from agenticdb.app import build_target, linux_target  # lazy: start-up cost (loads 10 modules)

    if os_stage:
        return linux_target(cfg)
    target = build_target(cfg)
    if not target.available():
        why = target.unavailable_reason or "not accepting connections"
        console.print(
            f"[red]error:[/] target at {escape(_safe_dsn(cfg.target.dsn or ''))}: {escape(why)}", highlight=False
        )
        return None
    return target


def _verdict_table(
    verdict: Verdict, catalog: Catalog, family: str, noops: list[FailedCheck], failed: list[FailedCheck]
) -> Table:
    """One row per change: accepted (or already in effect), a durability no-op, or rejected with its rule."""
    if not failed and not verdict.changes and noops:
        title = "verdict: NO-OP (every value is already in effect; nothing to apply)"
    elif not failed:
        title = f"verdict: ACCEPT (apply: {verdict.apply_requirement.value})"
    else:
        title = "verdict: REJECT (nothing of this set would be applied)"
    t = Table(title=title)
    t.add_column("parameter", no_wrap=True)
    t.add_column("value", no_wrap=True)
    t.add_column("result", no_wrap=True)
    t.add_column("rule")
    t.add_column("message", overflow="fold")
    t.add_column("source", overflow="fold")
    failed_names = {f.parameter for f in verdict.failed}
    for c in verdict.changes:
        if c.name in failed_names:
            continue
        unit = catalog.knobs[c.name].unit if c.name in catalog.knobs else None
        same = _same(family, catalog, c.name, c.value, c.previous)
        t.add_row(
            escape(c.name),
            escape(_num_text(c.value, unit)),
            "[green]already in effect[/]" if same else "[green]ok[/]",
            "",
            escape(f"was {_num_text(str(c.previous), unit)}; apply {c.apply.value}" + ("; no change" if same else "")),
            "",
        )
    for f in noops:
        message = (
            f"{f.parameter} is already {f.value}: nothing to apply. The value in effect is itself "
            f"durability-risking ({f.message.split(': ', 1)[-1]}); agenticdb never sets it, "
            "but leaves the DBA's choice alone"
        )
        t.add_row(
            escape(f.parameter),
            escape(f.value),
            "[yellow]already in effect[/]",
            escape(f.rule_id),
            escape(message),
            escape(f.source),
        )
    for f in failed:
        rule = f.check + (f" ({f.rule_id})" if f.rule_id else "")
        t.add_row(
            escape(f.parameter), escape(f.value), "[red]rejected[/]", escape(rule), escape(f.message), escape(f.source)
        )
    return t


def _same(family: str, catalog: Catalog, name: str, value: str, current: str | None) -> bool:
    """True when ``value`` is the value in effect (``units.compare.values_equal`` in the catalog's dialect)."""
    spec = catalog.knobs.get(name)
    return spec is not None and current is not None and values_equal(value, current, spec, family)


# ------------------------------------------------------------------------------------- catalog
def run_catalog(
    cfg: Settings, excluded: bool, os_stage: bool, like: str | None, console: Console, fmt: str = "text"
) -> int:
    """Print the action catalog (or its exclusions with reasons): name, type, unit, range, allowed
    values, the value in effect now, how a change takes effect and the validator's policy for it
    (protected / dangerous / durability, from ``validators/<family>.toml``). Byte-sized limits are
    also shown in KiB/MiB/GiB so a DBA can read them at a glance. Read-only."""
    target = _inspected_target(cfg, os_stage, console)
    if target is None:
        return 1
    cat = target.catalog()
    rules = load_ruleset(family_of(cat.target))
    out = left_out(cat.knobs, cat.excluded, cat.unsupported, rules, flavor_of(cat), cat.version, cfg.policy.durability)
    if excluded:
        t = _excluded_table(cat, out, like)
    else:
        names = sorted(n for n in cat.knobs if like is None or like in n)
        t = _knob_table(cat, out, names, target.current_values(names) if names else {}, like)
    target.close()
    if fmt == "json":
        print_json(console, {"title": str(t.title or ""), "rows": table_rows(t)})
    else:
        print_table(console, t)
    return 0


def catalog_counts(cat: Catalog, out: dict[str, LeftOut]) -> str:
    """The header's counts, from the same entries ``--excluded`` lists: tunable knobs, those of them
    restricted by a durability rule, and the names left out (excluded, unsupported, never tuned)."""
    restricted = sum(1 for item in out.values() if item.restricted)
    return (
        f"{len(cat.knobs)} knobs, {restricted} of them restricted; {len(out) - restricted} left out "
        f"(--excluded: {len(out)} rows)"
    )


def _excluded_table(cat: Catalog, out: dict[str, LeftOut], like: str | None) -> Table:
    t = Table(title=f"{cat.target} {cat.version}: {catalog_counts(cat, out)}: excluded, unsupported and restricted")
    t.add_column("name", no_wrap=True)
    t.add_column("status", no_wrap=True)
    t.add_column("reason", overflow="fold")
    for name in sorted(out, key=str.lower):
        if like is None or like in name:
            t.add_row(escape(name), escape(out[name].status), escape(out[name].reason))
    return t


def _knob_table(
    cat: Catalog, out: dict[str, LeftOut], names: list[str], current: dict[str, str], like: str | None
) -> Table:
    t = Table(
        title=f"{cat.target} {cat.version}: {catalog_counts(cat, out)}"
        + (f" ({len(names)} matching {like!r})" if like is not None else "")
    )
    t.add_column("name", no_wrap=True)
    for col in ("type", "unit", "min", "max"):
        t.add_column(col, no_wrap=True)
    t.add_column("values", overflow="fold")
    t.add_column("current", no_wrap=True)
    t.add_column("apply", no_wrap=True)
    t.add_column("policy", overflow="fold")
    for name in names:
        k = cat.knobs[name]
        t.add_row(
            escape(name),
            k.vartype,
            k.unit or "",
            _num(k.min_value, k.unit),
            _num(k.max_value, k.unit),
            escape(",".join(k.enum_values or [])[:60]),
            escape(_num_text(current.get(name, ""), k.unit)),
            k.apply.value,
            escape(out[name].status if name in out else "tunable"),
        )
    return t


def _human_bytes(n: float) -> str:
    for suffix, size in (("EiB", 2**60), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.4g} {suffix}"
    return f"{n:g} B"


def _num(v: float | None, unit: str | None = None) -> str:
    if v is None:
        return ""
    # DBL_MAX bounds (1.79769e+308) stay in exponent form: 309 digits help no one
    text = str(int(v)) if float(v).is_integer() and abs(v) < 1e15 else f"{v:g}"
    per = unit_bytes(unit)
    # Negative sizes are PostgreSQL's special values (-1: "use another setting" / "no limit"), not sizes.
    if per and v > 0 and v * per >= 1024:
        text += f" ({_human_bytes(v * per)})"
    return text


def _num_text(value: str, unit: str | None) -> str:
    """A current value with its human size when it is a bare number of a size unit."""
    try:
        return _num(float(value), unit) if value.strip().lstrip("-").replace(".", "", 1).isdigit() else value
    except ValueError:
        return value


# -------------------------------------------------------------------------------------- report
def run_report(cfg: Settings, session: str | None, console: Console, fmt: str = "text") -> int:
    """Print a Markdown report of a session (default: the latest) from the journal and the Memory Book.

    ``session`` may be a unique id prefix. The text is written as is (never hard-wrapped, so Markdown
    tables survive a pipe). Returns 1 with a one-line reason on stderr when there is no such session.
    """
    jpath, mpath = cfg.storage.journal_db, cfg.storage.memory_db
    assert jpath is not None and mpath is not None
    errc = Console(stderr=True, highlight=False, soft_wrap=True)
    if not jpath.exists():
        errc.print(f"[red]error:[/] no sessions yet: {escape(str(jpath))} does not exist")
        return 1
    with Journal(jpath, read_only=True) as journal:
        sessions = journal.sessions()
        if not sessions:
            errc.print("[red]error:[/] no sessions yet")
            return 1
        try:
            sid = sessions[-1].id if session is None else journal.find_session(session)
        except JournalError as exc:
            errc.print(f"[red]error:[/] {escape(redact(str(exc)))}")
            return 1
        events = journal.events(sid)
        meta = next(s for s in sessions if s.id == sid)
    rounds = []
    if mpath.exists():
        with MemoryBook(mpath) as memory:
            rounds = memory.rounds(sid)
    if fmt == "json":
        print_json(console, report_data(sid, meta, events, rounds))
        return 0
    text = "\n".join(report_lines(sid, meta, events, rounds)) + "\n"
    console.file.write(text)
    console.file.flush()
    return 0


def report_lines(sid: str, meta: Any, events: list[Any], rounds: list[Any]) -> list[str]:
    """The Markdown report: readable summary, best configuration, start-from changes, rounds, reasons."""
    by: dict[str, Any] = {}
    for e in events:
        by.setdefault(e.event, e.data)
    end, base = by.get("session.end", {}), by.get("baseline", {})
    obj = base.get("objective_name") or (
        rounds[0].objective_name if rounds and hasattr(rounds[0], "objective_name") else None
    )
    unit = objective_unit(obj)
    lines = [f"# agenticdb session {sid}", ""]
    stopped = daemon_stop(events)  # the daemon's pseudo-session, stopped cleanly (as journal show says)
    lines += _report_summary(meta, by, obj, unit, rounds, baseline_disturbed(events), stopped)
    failures = [e.data for e in events if e.event == "failure"]
    if failures:
        lines.append(f"- **failure:** {failures[-1].get('message', '')}")
    lines += root_cause_lines(by.get("root_cause"))
    lines += remediation_report_lines([e.data for e in events if e.event == "remediation"])
    lines += ["", "## Best configuration", ""]
    best_changes = end.get("best_changes") or end.get("best_config")
    if best_changes:
        lines += [f"- `{k} = {v}`" for k, v in best_changes.items()]
    elif end:
        lines.append("the starting configuration (no change beat it beyond the noise)")
    elif stopped is not None:  # the daemon's own events (approvals, remediation): its sessions have their own
        lines.append("none: the daemon's own events are no tuning session; each session it ran has its own report")
    else:
        lines.append("unknown: the session has not ended (still running, or the process died)")
    lines += _report_start_from(by.get("start_from"))
    # workload live: the statements that changed most
    from agenticdb.report.live import live_report_lines  # lazy: start-up cost (loads scipy; 580 modules)

    return lines + _report_rounds(rounds, unit, events) + live_report_lines(events)


def _report_summary(
    meta: Any,
    by: dict[str, Any],
    obj: str | None,
    unit: str,
    rounds: list[Any],
    disturbed: tuple[int, int],
    stopped: DaemonStop | None = None,
) -> list[str]:
    start, end, base = by.get("session.start", {}), by.get("session.end", {}), by.get("baseline", {})
    higher = base.get("higher_is_better", higher_is_better(obj))
    b, best = (
        end.get("baseline_objective", meta.baseline_objective),
        end.get("best_objective", meta.best_objective),
    )
    lines = [f"- **target:** {start.get('target', meta.target or '?')}"]
    lines.append(f"- **workload:** {start.get('workload', meta.workload or '?')}")
    status = end.get("status", meta.status)
    reason = end.get("reason") or (stopped.reason if stopped is not None else "")
    lines.append(f"- **status:** {status}" + (f" — {reason}" if reason else ""))
    lines.append(f"- **objective:** {objective_label(obj)}, {'higher' if higher else 'lower'} is better")
    if b is not None and best is not None:
        gain = ((best - b) / b if higher else (b - best) / b) if b else 0.0
        cv = float(base.get("noise_cv") or 0.0)
        text = baseline_best_text(b, best, rounds, gain, unit, cv, disturbed, higher)
        text = text.removeprefix("baseline ").replace(" → best ", " → ", 1)
        lines.append(f"- **baseline → best:** {text}")
    elif b is not None:
        lines.append(f"- **baseline:** {b:,.3f} {unit}")
    if base.get("noise_cv") is not None:
        runs = ", ".join(f"{r:,.3f}" for r in base.get("objectives", []) if isinstance(r, (int, float)))
        said = noise_said(base["noise_cv"], len([r for r in base.get("objectives", []) if isinstance(r, (int, float))]))
        lines.append(f"- **noise CV:** {said} (baseline runs: {runs or '-'})")
    if start.get("planner"):
        lines.append(
            f"- **planner:** {start['planner']}; durability {start.get('durability', '?')}; "
            f"rounds {end.get('rounds', meta.rounds)}"
        )
    return lines


def _report_start_from(sf: dict[str, Any] | None) -> list[str]:
    if not sf:
        return []
    lines = ["", "## Starting configuration (--start-from)", ""]
    vch = (sf.get("verdict") or {}).get("changes") or []
    if vch:
        lines += [f"- `{c.get('name')} = {c.get('value')}` (was {c.get('previous')})" for c in vch]
    else:
        lines += [f"- `{c.get('name')} = {c.get('value')}`" for c in (sf.get("proposal") or {}).get("changes", [])]
    if not (sf.get("verdict") or {}).get("ok", True):
        lines.append(
            "- refused by the validator: " + "; ".join(f.get("message", "") for f in sf["verdict"].get("failed", []))
        )
    return lines


def _report_rounds(rounds: list[Any], unit: str, events: list[Any] | None = None) -> list[str]:
    """The rounds table: with each round's verdict and why it was not kept, from the round's last ``judged``
    journal event (as ``journal show``'s Judged line; the Memory Book's record when there is none)."""
    judged = {e.round_no: e.data for e in events or [] if e.event == "judged" and e.round_no is not None}
    lines = [
        "",
        "## Rounds",
        "",
        f"| round | stage | bottleneck | changes | candidate vs best ({unit or '-'}, medians of the pairs) "
        "| estimate [interval] | verdict | decision | reason |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rounds:
        ch = ", ".join(f"{k}={v}" for k, v in r.changes.items()) or "—"
        reason = str(r.reason).replace("|", "\\|").replace("\n", " ")
        j = judged.get(r.round_no, {})
        verdict = verdict_text(j.get("verdict", r.judged), str(j.get("reason", r.judged_reason)), r.kept)
        verdict = (verdict or ("kept" if r.kept else "not kept")).replace("|", "\\|")
        lines.append(
            f"| {r.round_no} | {stage_text(r) if r.opening else r.stage.value} | {r.bottleneck.value} | {ch} | "
            f"{medians_text(r)} | "
            f"{estimate_text(r, kept=False)} | {verdict} | {r.decision.value} | {reason} |"
        )
    lines.append("")
    notes = Footnotes()  # a source the rounds repeat is told once, then referred to (as in `journal show`)
    for r in rounds:
        if r.proposal is not None:
            _report_round(r, notes)  # counts the clauses
    notes.settle()
    for r in rounds:
        if r.proposal is not None:
            lines += _report_round(r, notes)
    return lines


def _report_round(r: Any, notes: Footnotes) -> list[str]:
    which = f" ({r.opening_label})" if r.opening_label else ""
    lines = [f"## Round {r.round_no}{which}: {r.bottleneck.value}", f"- rationale: {notes.tell(r.proposal.rationale)}"]
    sourced = {f"{c.name}: {c.rationale}" for c in r.proposal.changes if c.rationale}  # an opening set's evidence
    lines += [f"- evidence: {notes.tell(e)}" for e in r.proposal.evidence if e not in sourced]
    lines += [f"- change `{c.name} = {c.value}`: {notes.tell(c.rationale)}" for c in r.proposal.changes]
    lines += [f"- rejected `{f.parameter} = {f.value}` ({f.check}): {f.message}" for f in r.failed_checks]
    if r.failure:
        lines.append(f"- failure in {r.failure.phase}: {r.failure.message}")
    if r.recovery:
        lines.append(f"- recovery: {r.recovery.action} — {r.recovery.details}")
    return lines + [""]
