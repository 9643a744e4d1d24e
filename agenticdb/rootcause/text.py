"""Text of a ``root_cause`` journal event for ``report`` and ``journal show`` (issue 40)."""

from __future__ import annotations

from typing import Any


def report_lines(data: dict[str, Any] | None) -> list[str]:
    """Markdown lines of a ``root_cause`` event's data (``loop.rootcause_step.record``); empty for None."""
    if not data:
        return []
    lines = ["", "## Root cause (not a knob)" if data.get("dominant") else "## Root causes checked", ""]
    top = data.get("dominant")
    if top:
        lines.append(f"**{data.get('line', '')}**")
        lines.append("")
        lines += [f"- evidence: {e}" for e in top.get("evidence", [])]
        for r in top.get("remedies", []):
            how = "may run after approval" if r.get("automatic") else "advised only"
            lines.append(f"- remedy ({how}): `{r.get('sql')}` — {r.get('lock_impact')}")
        lines.append(f"- finding id: `{top.get('id')}`; source: {top.get('source')}")
    else:
        lines.append(str(data.get("line", "")))
    others = [f for f in data.get("findings", []) if not top or f.get("id") != top.get("id")]
    lines += [f"- also: {f.get('summary')} (score {f.get('score')})" for f in others]
    lines += [f"- ruled out {r.get('cause')}: {r.get('reason')}" for r in data.get("ruled_out", [])]
    lines += [f"- evidence source: {n}" for n in data.get("notes", [])]
    return lines


def story_line(data: dict[str, Any]) -> str:
    """One line for ``journal show``: the dominant cause, or how many causes were checked."""
    if data.get("dominant"):
        return str(data.get("line", ""))
    return f"{data.get('line', '')} ({len(data.get('ruled_out', []))} cause(s) ruled out)"


def _counts(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def remediation_text(data: dict[str, Any]) -> tuple[str, list[str]]:
    """A ``remediation`` event (``agenticdb.rootcause.remedy.run_remedy``'s record) for a person: the
    headline (statement, finding, result, whether the symptom is gone) and the detail lines — the table
    counters before → after, then for each of ``[rootcause] statements`` its plan before and after (plain
    ``EXPLAIN``, one plan line a line) or that it did not change. ``journal show`` printed the record as
    JSON cut at 200 characters, so the plans, the proof of an ANALYZE, were never visible."""
    statements = list((data.get("before") or {}).get("plans") or {})
    changed = data.get("plan_changed") or []
    proof = f"plans changed: {len(changed)} of {len(statements)}" if statements else "no statement to explain"
    verdict = "symptom gone" if data.get("verified") else "symptom not shown gone"
    head = (
        f"{data.get('sql')} (finding {data.get('finding')}): {data.get('result')}, {verdict} ({proof}; "
        f"{data.get('seconds', '?')} s)"
    )
    lines: list[str] = []
    before_c = (data.get("before") or {}).get("counters") or {}
    after_c = (data.get("after") or {}).get("counters") or {}
    if before_c or after_c:
        pairs = [f"{k} {_counts(before_c.get(k, '?'))} → {_counts(after_c.get(k, '?'))}" for k in before_c or after_c]
        lines.append(f"counters of {data.get('subject')}: " + ", ".join(pairs))
    for s in statements:
        before = str((data.get("before") or {}).get("plans", {}).get(s, ""))
        after = str((data.get("after") or {}).get("plans", {}).get(s, ""))
        lines.append(f"statement: {s}")
        lines += ["plan before:"] + [f"  {p}" for p in before.splitlines()]
        lines += ["plan after:"] + ([f"  {p}" for p in after.splitlines()] if after != before else ["  (unchanged)"])
    lines += [f"server said: {m}" for m in data.get("server_messages") or []]
    return head, lines


def remediation_report_lines(records: list[dict[str, Any]]) -> list[str]:
    """Markdown lines of a session's ``remediation`` events for ``report``; empty when none ran."""
    if not records:
        return []
    lines = ["", "## Remediation (approved)", ""]
    for d in records:
        head, details = remediation_text(d)
        lines.append(f"- {head}")
        lines += ["", "```text", *details, "```", ""]
    return lines
