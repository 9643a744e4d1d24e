"""Approval of a root cause's remedy (issue 40): in ``policy.mode = "approve"`` a session whose baseline
found a dominant cause no setting fixes queues its non-destructive remedy (ANALYZE, plain VACUUM, CREATE
INDEX CONCURRENTLY) in the approval queue, waits for ``agenticdb approve|reject``, runs it through
``[remediation] dsn`` (the tables' owner) when approved, verifies the symptom (plans before/after) and
journals ``remediation``. Without a remediation DSN, or for a remedy that terminates a session or
blocks writes, it journals ``remediation.advice_only`` and runs nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import structlog

from agenticdb.advice.advise import Finding as AdviceFinding
from agenticdb.advice.advise import Recommendation, stable_id
from agenticdb.advice.approval import Desk, Pending, _write, status_line
from agenticdb.config import Settings
from agenticdb.models import ApplyMode, Layer
from agenticdb.rootcause import Finding, Remedy, RootCauses, blocks_knob, dominant
from agenticdb.rootcause.remedy import RemedyError, check_runnable, run_remedy
from agenticdb.store.journal import Journal

log = structlog.get_logger(__name__)


def remedy_recommendation(finding: Finding, remedy: Remedy) -> Recommendation:
    """The remedy as a queue entry people read with ``agenticdb pending`` (``knob`` names the cause and
    object, ``recommended`` the statement, ``risk`` its lock impact)."""
    return Recommendation(
        id=finding.id,
        knob=f"{finding.cause.value}:{finding.subject}",
        layer=Layer.dbms,
        current=None,
        recommended=remedy.sql,
        apply=ApplyMode.dynamic,
        bottleneck=finding.cause.value,
        rule="rootcause",
        reason=finding.summary,
        source=finding.source,
        effect=remedy.verify,
        risk=remedy.lock_impact,
        evidence=finding.evidence[:5],
        severity="high",
        confidence="diagnosis",
        confidence_origin="read from the server's statistics views (agenticdb.rootcause)",
    )


def remedy_gate(
    cfg: Settings, desk: Desk, journal: Journal, should_stop: Callable[[], bool], status: Callable[[str], object]
) -> Callable[[str, Finding], dict[str, Any] | None]:
    """The session's ``remediate`` callback (``TuningSession(remediate=...)``, approve mode)."""

    def remediate(session_id: str, finding: Finding) -> dict[str, Any] | None:
        remedy = next((r for r in finding.remedies if r.automatic), None)
        try:
            if remedy is None:
                first = finding.remedies[0] if finding.remedies else None
                raise RemedyError(
                    f"finding {finding.id}: no non-destructive remedy"
                    + (f"; advised: {first.sql} ({first.lock_impact})" if first else "")
                )
            check_runnable(remedy, cfg.remediation.dsn)
        except RemedyError as exc:
            journal.append(session_id, "remediation.advice_only", {"finding": finding.id, "reason": str(exc)}, 0)
            log.info("remediation.advice_only", finding=finding.id, reason=str(exc))
            return None
        now = time.time()
        p = Pending(
            id=stable_id("R", session_id, finding.id),
            created_at=now,
            expires_at=now + cfg.daemon.proposal_ttl_s,
            mode="approve",
            target=session_id,
            recommendation=remedy_recommendation(finding, remedy),
            kind="remedy",
        )
        _write(desk.queue.proposals / f"{p.id}.json", p, 0o640)
        brief = {"finding": finding.id, "sql": remedy.sql, "lock_impact": remedy.lock_impact}
        journal.append(session_id, "approval.proposed", {"id": p.id, "kind": "remedy", "remedy": brief}, 0)
        log.info("approval.waiting", id=p.id, sql=remedy.sql, reason="policy.mode = approve")
        decided = _wait(desk, journal, session_id, p, should_stop, status)
        if decided is not None:
            return None
        rec = run_remedy(finding, remedy, cfg.remediation.dsn, cfg.target.database, cfg.rootcause.statements)
        journal.append(session_id, "remediation", rec, 0)
        status(f"remediation {remedy.sql}: {rec['result']}, verified {rec['verified']}"[:200])
        return rec

    return remediate


def _wait(
    desk: Desk,
    journal: Journal,
    session_id: str,
    p: Pending,
    should_stop: Callable[[], bool],
    status: Callable[[str], object],
) -> str | None:
    """Wait for the decision on ``p``: None when approved, else why not (journaled)."""
    brief = {"knob": p.recommendation.knob, "recommended": p.recommendation.recommended}
    while True:
        if any(g.id == p.id for g in desk.queue.expire()):
            journal.append(session_id, "approval.expired", {"id": p.id, "recommendation": brief}, 0)
            return "expired"
        for prop, d, who in desk.queue.take_decisions():
            if prop is None or prop.id != p.id:
                desk._act(journal, prop, d, who)
                continue
            if who.startswith("refused:"):
                journal.append(session_id, "approval.ignored", {"id": p.id, "user": who}, 0)
                continue
            event = "approval.approved" if d.decision == "approve" else "approval.rejected"
            journal.append(session_id, event, {"id": p.id, "user": who, "why": d.why, "recommendation": brief}, 0)
            desk.queue.close(p, rejected=d.decision == "reject")
            return None if d.decision == "approve" else f"rejected by {who}"
        if should_stop():
            desk.queue.close(p, rejected=False)
            return "stopping"
        status(status_line(desk.queue.pending()))
        time.sleep(0.5)


def root_cause_advice(
    rc: RootCauses | None, recs: list[Recommendation], remediation_dsn: str | None
) -> tuple[list[AdviceFinding], list[str]]:
    """``advise``'s share of a root-cause pass: one finding per cause (its stable ``RC…`` id, evidence,
    remedies as SQL), recommendations of the dominant cause's symptom knobs turned to ``reject`` (changed
    in place), and notes (the one line; "advice only" without a remediation DSN)."""
    if rc is None:
        return [], []
    top = dominant(rc.findings)
    notes: list[str] = []
    if top is not None:
        notes.append(top.line())
        for r in recs:
            if r.verdict == "accept" and blocks_knob(top, r.knob):
                r.verdict, r.verdict_detail = "reject", f"a symptom of {top.id}, not its cause: {top.summary}"
    runnable = [f for f in rc.findings if any(x.automatic for x in f.remedies)]
    if runnable and not remediation_dsn:
        notes.append(
            "remediation is advice only: [remediation] dsn (the tables' owner) is not set, so agenticdb runs "
            "none of these statements; run them as the owner or set it (approve mode then runs them after approval)"
        )
    out = []
    for f in rc.findings:
        sql = [x.sql + ";" for x in f.remedies if x.automatic]
        sql += [f"-- advised only ({x.lock_impact}): {x.sql};" for x in f.remedies if not x.automatic]
        out.append(
            AdviceFinding(
                id=f.id,
                title=("dominant: " if f is top else "") + f.summary,
                severity="high" if f is top else "medium",
                evidence="; ".join(f.evidence),
                advice=" / ".join(
                    f"{x.sql} ({'runs after approval' if x.automatic else 'advised only'})" for x in f.remedies
                )
                or "no statement fixes it",
                source=f.source,
                sql=sql,
            )
        )
    return out, notes
