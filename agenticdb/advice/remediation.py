"""Root causes in advice (issue 40): a remedy as a recommendation, the root-cause findings and notes of
``advise``, and the two steps both approval paths share: which remedy may wait for approval
(:func:`runnable_remedy`) and running an approved one (:func:`run_approved`). The queues are the
session's gate (``advice.remedy_gate``) and, with ``daemon.approve_source = "advice"``, the daemon's
desk (``advice.approval.Desk``)."""

from __future__ import annotations

from typing import Any

import structlog

from agenticdb.advice.types import Finding as AdviceFinding
from agenticdb.advice.types import Recommendation
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


def runnable_remedy(finding: Finding, dsn: str | None) -> Remedy:
    """The remedy of ``finding`` that may wait for approval: its first ``automatic`` one, if it may run
    through the remediation ``dsn``.

    Raises:
        RemedyError: the finding has no non-destructive remedy (the message names the first advised one
            and its lock impact), no remediation DSN is set, or the statement is not one of the
            non-destructive low-lock kinds (:func:`agenticdb.rootcause.remedy.check_runnable`).
    """
    remedy = next((r for r in finding.remedies if r.automatic), None)
    if remedy is None:
        first = finding.remedies[0] if finding.remedies else None
        raise RemedyError(
            f"finding {finding.id}: no non-destructive remedy"
            + (f"; advised: {first.sql} ({first.lock_impact})" if first else "")
        )
    check_runnable(remedy, dsn)
    return remedy


def run_approved(cfg: Settings, journal: Journal, session_id: str, finding: Finding, remedy: Remedy) -> dict[str, Any]:
    """Run an approved ``remedy`` through ``[remediation] dsn`` in the database its finding was made in,
    verify the symptom (plans of ``[rootcause] statements`` and table counters before/after) and journal the
    ``remediation`` event under ``session_id``. Returns that record
    (:func:`agenticdb.rootcause.remedy.run_remedy`).

    Raises:
        RemedyError: the remedy may not run (any more) through the configured DSN.
        psycopg.Error / pymysql.MySQLError: the remediation DSN does not connect.
    """
    # where the cause was found (advise: the DSN's database); a record from before findings kept it: the
    # session's benchmark database, which was the only one probed then
    database = finding.database or cfg.target.database
    rec = run_remedy(finding, remedy, cfg.remediation.dsn, database, cfg.rootcause.statements)
    journal.append(session_id, "remediation", rec, 0)
    return rec


def _how(automatic: bool, remediation_dsn: str | None) -> str:
    """How a remedy would run: after approval only when approve mode has the owner's DSN to run it with."""
    if not automatic:
        return "advised only"
    return "runs after approval" if remediation_dsn else "advice: runs after approval once [remediation] dsn is set"


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
    # where the plan evidence came from, and why a statement was not explained (a tuning role without
    # SELECT on the table: the finding otherwise read "no benchmark statements to EXPLAIN")
    notes += [n for n in rc.notes if n.startswith("plan evidence:")]
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
                evidence="; ".join([f"database {f.database}"] * bool(f.database) + f.evidence),
                advice=" / ".join(f"{x.sql} ({_how(x.automatic, remediation_dsn)})" for x in f.remedies)
                or "no statement fixes it",
                source=f.source,
                sql=sql,
            )
        )
    return out, notes
