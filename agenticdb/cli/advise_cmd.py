"""Bodies of ``agenticdb advise``, ``apply``, ``pending``, ``approve`` and ``reject`` (issue 16).

Exit codes: 0 success; 1 the operation failed (one-line reason on stderr); 2 bad usage; 3 ``advise
--fail-on SEVERITY`` found something at or above that severity (for CI gates).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Literal

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agenticdb.advice.formats import FORMATS, render
from agenticdb.advice.types import SEVERITIES, Advice, Recommendation
from agenticdb.app import advice_parts, build_target
from agenticdb.cli.output import print_line, print_table
from agenticdb.cli.tune_cmd import _safe_dsn
from agenticdb.config import Settings
from agenticdb.invocation import command
from agenticdb.store.lock import LockError

FAIL_ON_EXIT = 3
"""Exit code of ``advise --fail-on`` when a finding or accepted recommendation reaches the threshold."""


def _err(message: str) -> None:
    Console(stderr=True, highlight=False, soft_wrap=True).print(f"[bold red]error:[/] {escape(message)}")


def compute(cfg: Settings, observe_s: float, os_layer: bool) -> Advice | None:
    """Advice for the configured target (None, said why on stderr, when it does not answer)."""
    from agenticdb.advice.advise import advise  # lazy: start-up cost (loads 30 modules)

    target = build_target(cfg)
    try:
        if not target.available():
            why = target.unavailable_reason or "not accepting connections"
            _err(f"target at {_safe_dsn(cfg.target.dsn or '')}: {why}")
            return None
        return advise(cfg, target, observe_s=observe_s, os_layer=os_layer, parts=advice_parts())
    finally:
        target.close()


def run_advise(cfg: Settings, fmt: str, fail_on: str | None, observe_s: float, os_layer: bool, console: Console) -> int:
    """Print the advice in ``fmt``; exit 3 when ``fail_on`` is reached (see the module docstring)."""
    if fmt not in FORMATS:
        _err(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
        return 2
    if fail_on is not None and fail_on not in SEVERITIES:
        _err(f"--fail-on {fail_on!r}: expected one of {', '.join(SEVERITIES)}")
        return 2
    advice = compute(cfg, observe_s, os_layer)
    if advice is None:
        return 1
    if fmt == "text":
        print_text(advice, console)
    else:
        console.file.write(render(advice, fmt))
        console.file.flush()
    worst = advice.worst()
    if fail_on is not None and worst is not None and SEVERITIES.index(worst) >= SEVERITIES.index(fail_on):
        Console(stderr=True, highlight=False).print(f"advise: severity {worst} reached --fail-on {fail_on}")
        return FAIL_ON_EXIT
    return 0


def print_text(advice: Advice, console: Console) -> None:
    """Recommendations and findings as tables, with the diagnosis in one line; "no recommendation" or "no
    finding" as a line where there are none (a fresh user read "0 finding(s)" over an empty table)."""
    gib = int(advice.hardware.get("memory_limit_bytes") or 0) / 2**30
    print_line(
        console,
        escape(
            f"agenticdb advise: {advice.target} ({advice.kind} {advice.version}), "
            f"observed {advice.observed_s:.1f} s, {advice.hardware.get('cpu_count')} CPUs, {gib:.1f} GiB"
        ),
    )
    top = [f"{d['layer']}:{d['bottleneck']} {d['score']}" for d in advice.diagnosis[:6]]
    said = ", ".join(top) if top else "no pressure seen in the window"
    print_line(console, "diagnosis: " + ("idle sample: no diagnosis" if advice.idle else said))
    for note in advice.notes:
        print_line(console, f"note: {escape(note)}")
    if advice.recommendations:
        print_table(console, _recommendations(advice))
    else:
        print_line(console, "no recommendation")
    if advice.findings:
        print_table(console, _findings(advice))
    else:
        print_line(console, "no finding")


def _recommendations(advice: Advice) -> Table:
    t = Table(title=f"{len(advice.recommendations)} recommendation(s)")
    for col in ("id", "layer", "knob", "current → recommended", "apply", "severity", "confidence", "verdict"):
        t.add_column(col, no_wrap=True)
    t.add_column("why (source)", overflow="fold")
    for r in advice.recommendations:
        verdict = "[green]accept[/]" if r.verdict == "accept" else f"[red]reject[/] {escape(r.verdict_detail)}"
        t.add_row(
            r.id,
            r.layer.value,
            escape(r.knob),
            escape(f"{r.current} → {r.recommended}"),
            r.apply.value,
            r.severity,
            f"{r.confidence}",
            verdict,
            escape(f"{r.reason} ({r.source})"),
        )
    return t


def _findings(advice: Advice) -> Table:
    f = Table(title=f"{len(advice.findings)} finding(s)")
    for col in ("id", "severity", "finding", "evidence"):
        f.add_column(col, no_wrap=col in ("id", "severity"))
    f.add_column("advice (source)", overflow="fold")
    for x in advice.findings:
        f.add_row(x.id, x.severity, escape(x.title), escape(x.evidence), escape(f"{x.advice} ({x.source})"))
    return f


def pick(advice: Advice, ids: list[str]) -> list[Recommendation] | str:
    """The recommendations named by ``ids`` (unique prefixes accepted), or an error message."""
    chosen: list[Recommendation] = []
    for rid in ids:
        hits = [r for r in advice.recommendations if r.id.startswith(rid)]
        if len(hits) != 1:
            known = ", ".join(f"{r.id} ({r.knob})" for r in advice.recommendations) or "none"
            what = "is ambiguous" if hits else "is not among the current recommendations"
            return f"id {rid!r} {what}; current ids: {known}"
        if hits[0].verdict != "accept":
            return f"{hits[0].id} ({hits[0].knob} = {hits[0].recommended}) was rejected: {hits[0].verdict_detail}"
        chosen.append(hits[0])
    return chosen


def run_apply(cfg: Settings, ids: list[str], measure: bool, observe_s: float, console: Console) -> int:
    """Recompute the advice, apply the chosen recommendations (``agenticdb.advice.apply``)."""
    from agenticdb.advice.apply import ApplyRefused, apply_recommendations  # lazy: start-up cost (loads 34 modules)

    advice = compute(cfg, observe_s, os_layer=True)
    if advice is None:
        return 1
    chosen = pick(advice, ids)
    if isinstance(chosen, str):
        _err(chosen)
        return 2
    target = build_target(cfg)
    try:
        done = apply_recommendations(cfg, target, chosen, measure=measure, parts=advice_parts())
    except (ApplyRefused, LockError) as exc:
        _err(str(exc))
        return 1
    finally:
        target.close()
    console.print(f"applied and verified in session {done.session_id}:", highlight=False)
    for r in chosen:
        console.print(f"  {r.id} {r.knob}: {r.current} → {done.effective.get(r.knob, r.recommended)}", highlight=False)
    if done.objectives:
        obj = ", ".join(f"{k} {v:,.3f}" for k, v in done.objectives.items())
        console.print(f"objective (one run each; noise not estimated): {obj}", highlight=False)
    undo = "rollback --dbms" + (" --os" if any(r.layer.value == "os" for r in chosen) else "")
    console.print(f"undo with: {command(undo)}", highlight=False, soft_wrap=True, markup=False)
    return 0


def run_pending(cfg: Settings, console: Console) -> int:
    """List the proposals waiting in the daemon's queue."""
    from agenticdb.advice.approval import (  # lazy: start-up cost (loads 36 modules)
        ApprovalError,
        Queue,
        change_text,
        queue_dir,
    )

    q = Queue(queue_dir(cfg), cfg.daemon.approval_group)
    try:
        pending = q.pending()
    except ApprovalError as exc:
        _err(str(exc))
        return 1
    if not pending:
        console.print(f"nothing waits (queue {q.root})", highlight=False)
        return 0
    t = Table(title=f"{len(pending)} proposal(s) waiting ({q.root})")
    # a root cause's remedy: the finding id `advise` showed beside the proposal id (`approve` takes either)
    findings = any(p.finding_id for p in pending)
    for col in ("id", *(("finding",) if findings else ()), "mode", "change", "apply", "expires (UTC)"):
        t.add_column(col, no_wrap=True)
    t.add_column("evidence / expected effect", overflow="fold")
    for p in pending:
        r = p.recommendation
        t.add_row(
            p.id,
            *((p.finding_id or "-",) if findings else ()),
            p.mode,
            escape(change_text(p)),
            r.apply.value,
            datetime.fromtimestamp(p.expires_at, UTC).strftime("%Y-%m-%d %H:%M"),
            escape("; ".join(r.evidence[:2]) + (f" — {r.effect}" if r.effect else "")),
        )
    print_table(console, t)
    return 0


def run_decide(
    cfg: Settings, rid: str, decision: Literal["approve", "reject"], why: str, wait_s: float, console: Console
) -> int:
    """Write a decision for the daemon; with ``wait_s`` > 0, wait until the daemon consumed it."""
    from agenticdb.advice.approval import (  # lazy: start-up cost (loads 36 modules)
        ApprovalError,
        Queue,
        change_text,
        queue_dir,
    )

    q = Queue(queue_dir(cfg), cfg.daemon.approval_group)
    try:
        p = q.decide(rid, decision, why)
    except ApprovalError as exc:
        _err(str(exc))
        return 1
    verb = "approved" if decision == "approve" else "rejected"
    console.print(f"{p.label()} ({change_text(p)}) {verb}", highlight=False)
    deadline = time.monotonic() + wait_s
    decision_file = q.decisions / f"{p.id}.json"
    while wait_s > 0 and decision_file.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    if wait_s > 0 and decision_file.exists():
        _err(f"the daemon did not take the decision within {wait_s:g} s (is it running with policy.mode approve?)")
        return 1
    return 0
