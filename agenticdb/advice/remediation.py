"""Root causes in advice (issue 40): a remedy as a recommendation, and the root-cause findings and notes
of ``advise``. The approval gate that queues and runs a remedy is ``advice.remedy_gate``."""

from __future__ import annotations

import structlog

from agenticdb.advice.types import Finding as AdviceFinding
from agenticdb.advice.types import Recommendation
from agenticdb.models import ApplyMode, Layer
from agenticdb.rootcause import Finding, Remedy, RootCauses, blocks_knob, dominant

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
