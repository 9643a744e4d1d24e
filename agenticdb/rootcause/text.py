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
