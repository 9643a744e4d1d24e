"""``agenticdb report ID --plot FILE.png`` and ``agenticdb report ID --format html`` (issue 19).

The PNG is drawn by ``agenticdb.report.plot`` from the journal; the HTML page embeds it (base64 data URI)
above the summary and the round table, so one file can be mailed or attached to a ticket.
Exit codes: 0 written, 1 no such session / nothing to draw / matplotlib missing.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from agenticdb.cli.tune_cmd import estimate_text, medians_text
from agenticdb.config import Settings
from agenticdb.models import RoundOutcome
from agenticdb.report.labels import objective_label
from agenticdb.report.plot import PlotError, plot_session
from agenticdb.store.journal import Journal, JournalError, JournalEvent
from agenticdb.store.memory import MemoryBook


def _load(cfg: Settings, session: str | None) -> tuple[str, list[JournalEvent], list[RoundOutcome]]:
    """Session id, its journal events and its rounds from the Memory Book.

    Raises:
        PlotError: no journal, no sessions or no such session (the message says which).
    """
    jpath, mpath = cfg.storage.journal_db, cfg.storage.memory_db
    assert jpath is not None and mpath is not None
    if not jpath.exists():
        raise PlotError(f"no sessions yet: {jpath} does not exist")
    with Journal(jpath, read_only=True) as journal:
        sessions = journal.sessions()
        if not sessions:
            raise PlotError("no sessions yet")
        try:
            sid = sessions[-1].id if session is None else journal.find_session(session)
        except JournalError as exc:
            raise PlotError(str(exc)) from None
        events = journal.events(sid)
    rounds: list[RoundOutcome] = []
    if mpath.exists():
        with MemoryBook(mpath) as memory:
            rounds = memory.rounds(sid)
    return sid, events, rounds


def run_plot_report(cfg: Settings, session: str | None, plot: Path | None, fmt: str, console: Console) -> int:
    """Write the PNG to ``plot`` (when given) and, with ``fmt == "html"``, print the HTML page."""
    errc = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        sid, events, rounds = _load(cfg, session)
        title = f"agenticdb session {sid}"
        if plot is not None:
            curve = plot_session(events, plot, title)
            errc.print(f"wrote {escape(str(plot))}: {len(curve.trials)} trial(s), best {curve.best:,.4g}")
        if fmt == "html":
            buf = io.BytesIO()
            try:
                plot_session(events, buf, title)
            except PlotError as exc:  # e.g. a session that failed before its baseline: the page says so
                buf = io.BytesIO()
                no_curve = str(exc)
            else:
                no_curve = ""
            console.file.write(html_page(sid, events, rounds, buf.getvalue(), no_curve))
            console.file.flush()
    except (PlotError, OSError) as exc:
        errc.print(f"[red]error:[/] {escape(str(exc))}")
        return 1
    return 0


def html_page(sid: str, events: list[JournalEvent], rounds: list[RoundOutcome], png: bytes, no_curve: str = "") -> str:
    """A self-contained HTML page: title, summary, the curve (embedded PNG; ``no_curve`` says why there is
    none, e.g. a session that failed before its baseline) and the round table."""
    by: dict[str, dict[str, Any]] = {}
    for e in events:
        by.setdefault(e.event, e.data)
    end, base = by.get("session.end", {}), by.get("baseline", {})
    esc = html.escape
    summary = [
        f"<li>objective: {esc(objective_label(base.get('objective_name')))}</li>",
        f"<li>status: {esc(str(end.get('status', 'running')))} {esc(str(end.get('reason', '')))}</li>",
    ]
    if end.get("baseline_objective") is not None and end.get("best_objective") is not None:
        summary.append(f"<li>baseline → best: {end['baseline_objective']:,.3f} → {end['best_objective']:,.3f}</li>")
    head = ["round", "stage", "bottleneck", "changes", "candidate vs best", "estimate [interval]", "kept", "decision"]
    rows = []
    for r in rounds:
        cells = [
            str(r.round_no),
            r.stage.value,
            r.bottleneck.value,
            ", ".join(f"{k}={v}" for k, v in r.changes.items()) or "—",
            medians_text(r),
            estimate_text(r),
            "yes" if r.kept else "no",
            f"{r.decision.value}: {r.reason}",
        ]
        rows.append("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
    img = base64.b64encode(png).decode()
    curve = (
        f"<img alt='objective over time' src='data:image/png;base64,{img}'>\n"
        if png
        else f"<p>no curve: {esc(no_curve)}</p>\n"
    )
    failures = [e.data for e in events if e.event == "failure"]
    if failures:
        summary.append(f"<li>failure: {esc(str(failures[-1].get('message', '')))}</li>")
    return (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
        f"<title>agenticdb session {esc(sid)}</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px;font-size:90%}</style></head><body>\n"
        f"<h1>agenticdb session {esc(sid)}</h1>\n<ul>{''.join(summary)}</ul>\n"
        + curve
        + "<h2>Rounds</h2>\n<table><tr>"
        + "".join(f"<th>{esc(h)}</th>" for h in head)
        + "</tr>\n"
        + "\n".join(rows)
        + "\n</table>\n</body></html>\n"
    )
