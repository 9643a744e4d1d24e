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

from agenticdb.advice.approval import Desk, Pending, offerable_remedy, queue_remedy, status_line
from agenticdb.advice.remediation import run_approved
from agenticdb.advice.types import stable_id
from agenticdb.config import Settings
from agenticdb.rootcause import Finding
from agenticdb.store.journal import Journal
from agenticdb.units.text import clip

log = structlog.get_logger(__name__)


def remedy_gate(
    cfg: Settings, desk: Desk, journal: Journal, should_stop: Callable[[], bool], status: Callable[[str], object]
) -> Callable[[str, Finding], dict[str, Any] | None]:
    """The session's ``remediate`` callback (``TuningSession(remediate=...)``, approve mode)."""

    def remediate(session_id: str, finding: Finding) -> dict[str, Any] | None:
        remedy = offerable_remedy(cfg, journal, session_id, finding, 0)
        if remedy is None:
            return None
        pid = stable_id("R", session_id, finding.id)
        p = queue_remedy(
            desk, journal, session_id, 0, pid=pid, target=session_id, finding=finding, remedy=remedy, keep_finding=False
        )
        log.info("approval.waiting", id=p.id, finding=finding.id, sql=remedy.sql, reason="policy.mode = approve")
        decided = _wait(desk, journal, session_id, p, should_stop, status)
        if decided is not None:
            return None
        rec = run_approved(cfg, journal, session_id, finding, remedy)
        status(clip(f"remediation {remedy.sql}: {rec['result']}, verified {rec['verified']}", 200))
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
            journal.append(session_id, "approval.expired", {**p.ids(), "recommendation": brief}, 0)
            return "expired"
        for prop, d, who in desk.queue.take_decisions():
            if prop is None or prop.id != p.id:
                desk._act(journal, prop, d, who)
                continue
            if who.startswith("refused:"):
                journal.append(session_id, "approval.ignored", {**p.ids(), "user": who}, 0)
                continue
            event = "approval.approved" if d.decision == "approve" else "approval.rejected"
            journal.append(session_id, event, {**p.ids(), "user": who, "why": d.why, "recommendation": brief}, 0)
            desk.queue.close(p, rejected=d.decision == "reject")
            return None if d.decision == "approve" else f"rejected by {who}"
        if should_stop():
            desk.queue.close(p, rejected=False)
            return "stopping"
        status(status_line(desk.queue.pending()))
        time.sleep(0.5)
