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

from markdown_it import MarkdownIt
from rich.console import Console
from rich.markup import escape

from agenticdb.cli.inspect_cmd import report_lines
from agenticdb.config import Settings
from agenticdb.models import RoundOutcome
from agenticdb.report.plot import PlotError, plot_session
from agenticdb.store.journal import Journal
from agenticdb.store.journal_events import JournalError, JournalEvent
from agenticdb.store.memory import MemoryBook


def _load(cfg: Settings, session: str | None) -> tuple[str, Any, list[JournalEvent], list[RoundOutcome]]:
    """Session id, its journal row, its journal events and its rounds from the Memory Book.

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
        meta = next(s for s in sessions if s.id == sid)
    rounds: list[RoundOutcome] = []
    if mpath.exists():
        with MemoryBook(mpath) as memory:
            rounds = memory.rounds(sid)
    return sid, meta, events, rounds


def run_plot_report(cfg: Settings, session: str | None, plot: Path | None, fmt: str, console: Console) -> int:
    """Write the PNG to ``plot`` (when given) and, with ``fmt == "html"``, print the HTML page."""
    errc = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        sid, meta, events, rounds = _load(cfg, session)
        title = f"agenticdb session {sid}"
        if plot is not None:
            curve = plot_session(events, plot, title)
            raced = f"{len(curve.screens)} race screen(s), " if curve.screens else ""
            errc.print(f"wrote {escape(str(plot))}: {raced}{len(curve.trials)} trial(s), best {curve.best:,.4g}")
        if fmt == "html":
            buf = io.BytesIO()
            try:
                plot_session(events, buf, title)
            except PlotError as exc:  # e.g. a session that failed before its baseline: the page says so
                buf = io.BytesIO()
                no_curve = str(exc)
            else:
                no_curve = ""
            console.file.write(html_page(sid, meta, events, rounds, buf.getvalue(), no_curve))
            console.file.flush()
    except (PlotError, OSError) as exc:
        errc.print(f"[red]error:[/] {escape(str(exc))}")
        return 1
    return 0


def html_page(
    sid: str, meta: Any, events: list[JournalEvent], rounds: list[RoundOutcome], png: bytes, no_curve: str = ""
) -> str:
    """A self-contained HTML page of the Markdown report (:func:`agenticdb.cli.inspect_cmd.report_lines`:
    summary with the noise, best configuration, rounds, each round's rationale, evidence and changes),
    rendered by markdown-it (raw HTML in reasons stays text), with the curve (embedded PNG; ``no_curve``
    says why there is none, e.g. a session that failed before its baseline) after the summary. One report
    model for Markdown and HTML (issue 39: the page lacked the noise, evidence and rationale)."""
    md = report_lines(sid, meta, events, rounds)
    text = "\n".join(md[1:])  # the title becomes the page's <h1>
    head, sep, rest = text.partition("\n## ")
    md_it = MarkdownIt("commonmark", {"html": False}).enable("table")

    def render(text: str) -> str:
        return str(md_it.render(text))

    img = base64.b64encode(png).decode()
    curve = (
        f"<img alt='objective over time' src='data:image/png;base64,{img}'>\n"
        if png
        else f"<p>no curve: {html.escape(no_curve)}</p>\n"
    )
    esc = html.escape
    return (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
        f"<title>agenticdb session {esc(sid)}</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px;font-size:90%}</style></head><body>\n"
        f"<h1>agenticdb session {esc(sid)}</h1>\n"
        + render(head)
        + curve
        + (render(sep.lstrip("\n") + rest) if sep else "")
        + "</body></html>\n"
    )
