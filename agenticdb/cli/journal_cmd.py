"""``agenticdb journal list | show ID | tail [-n N] [-f] | verify | export`` (issue 9, "Journal CLI").

``show`` tells a session as a story, one block per round: evidence → diagnosis → proposal → verdict →
apply → measurement → decision, from the payloads documented in :mod:`agenticdb.journal`.
Exit codes: 0 success, 1 the operation failed (broken chain, unknown session, missing file),
2 bad usage or configuration.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.rule import Rule
from rich.table import Table

from agenticdb.cli.labels import objective_label, objective_unit
from agenticdb.config import ConfigError, Settings, load_config
from agenticdb.journal import Journal, JournalError, JournalEvent

journal_app = typer.Typer(no_args_is_help=True, help="Read and check the audit journal.")

ConfigOpt = Annotated[Optional[Path], typer.Option("--config", "-c", help="agenticdb.toml")]  # noqa: UP045
HomeOpt = Annotated[
    Optional[Path], typer.Option("--home", help="agenticdb data dir holding journal.db and memory.db")  # noqa: UP045
]


EXPORT_FORMATS = ("jsonl",)
"""Formats of ``journal export`` (JSON lines: one event per line, for log pipelines)."""


def load_settings(config: Path | None, home: Path | None) -> Settings:
    """Settings from ``--config`` with ``--home`` overriding where the SQLite files are.

    Exits with code 2 and the config error on stderr when the file is invalid.
    """
    overrides: dict[str, Any] = {}
    if home is not None:
        overrides["storage"] = {"home": home, "memory_db": None, "journal_db": None}
    try:
        return load_config(config, overrides or None)
    except ConfigError as exc:
        _fail(str(exc), code=2)
        raise  # unreachable: _fail raises


def _fail(message: str, code: int = 1) -> None:
    Console(stderr=True).print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _open(config: Path | None, home: Path | None, must_exist: bool = True, read_only: bool = False) -> Journal | None:
    path = load_settings(config, home).storage.journal_db
    assert path is not None  # filled in by StorageConfig
    if not path.exists():
        if must_exist:
            _fail(f"journal file {path} does not exist (set --home or storage.home in --config)")
        return None
    try:
        return Journal(path, read_only=read_only)
    except sqlite3.DatabaseError as exc:
        _fail(f"journal file {path} cannot be opened: {exc}")
        raise  # unreachable: _fail raises


def _console() -> Console:
    """Stdout console; when stdout is not a terminal, wide enough that tables are never squeezed
    (ids must stay whole so people can copy them)."""
    return Console(soft_wrap=True, highlight=False, width=None if sys.stdout.isatty() else 400)


def _num(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{float(value):,.{digits}f}"


@journal_app.command("list")
def list_sessions(config: ConfigOpt = None, home: HomeOpt = None) -> None:
    """List the sessions in the journal, oldest first."""
    console = _console()
    journal = _open(config, home, must_exist=False)
    if journal is None:
        console.print("no journal yet: no session has run with this storage")
        return
    with journal:
        table = Table(title=f"sessions in {journal.path}")
        table.add_column("session", no_wrap=True)
        table.add_column("started (UTC)", no_wrap=True)
        table.add_column("target", min_width=8, overflow="fold")
        table.add_column("workload", min_width=8, overflow="fold")
        for col in ("rounds", "baseline", "best"):
            table.add_column(col, justify="right", no_wrap=True)
        table.add_column("status", no_wrap=True)
        for s in journal.sessions():
            table.add_row(
                s.id,
                s.started[:16].replace("T", " "),
                s.target or "-",
                s.workload or "-",
                str(s.rounds),
                _num(s.baseline_objective),
                _num(s.best_objective),
                s.status,
            )
        console.print(table)


@journal_app.command("show")
def show(
    session_id: Annotated[str, typer.Argument(help="session id (a unique prefix is enough)")],
    config: ConfigOpt = None,
    home: HomeOpt = None,
) -> None:
    """Tell one session as a story, round by round."""
    journal = _open(config, home)
    assert journal is not None
    with journal:
        try:
            sid = journal.find_session(session_id)
        except JournalError as exc:
            _fail(str(exc))
            return
        # soft_wrap keeps lines whole; 100 columns only sizes the round separators when piped
        story = Console(soft_wrap=True, highlight=False, width=None if sys.stdout.isatty() else 100)
        render_story(story, sid, journal.events(sid))


@journal_app.command("tail")
def tail(
    n: Annotated[int, typer.Option("-n", "--lines", min=1, help="how many of the last events")] = 20,
    follow: Annotated[bool, typer.Option("-f", "--follow", help="keep printing new events")] = False,
    idle_timeout: Annotated[
        Optional[float],  # noqa: UP045
        typer.Option("--idle-timeout", help="with -f: stop after this many seconds without events"),
    ] = None,
    config: ConfigOpt = None,
    home: HomeOpt = None,
) -> None:
    """Print the last events; with -f, keep following like ``tail -f``."""
    console = _console()
    journal = _open(config, home)
    assert journal is not None
    with journal:
        last = 0
        for ev in journal.tail(n):
            console.print(_one_line(ev))
            last = ev.id
        if follow:
            try:
                for ev in journal.follow(after_id=last, idle_timeout_s=idle_timeout):
                    console.print(_one_line(ev))
            except KeyboardInterrupt:
                pass


@journal_app.command("verify")
def verify(config: ConfigOpt = None, home: HomeOpt = None) -> None:
    """Check the hash chain; exit 1 naming the first broken row."""
    journal = _open(config, home, read_only=True)
    assert journal is not None
    with journal:
        result = journal.verify()
        missing = journal.missing_triggers()
    if not result.ok:
        _fail(
            f"journal {journal.path} is broken at row {result.first_bad_id}: {result.reason} "
            f"({result.rows_checked} rows checked)"
        )
    if missing:
        _fail(
            f"journal {journal.path}: the append-only trigger(s) {', '.join(missing)} were dropped (the "
            f"file was tampered with; the chain of {result.rows_checked} rows still verifies)"
        )
    _console().print(f"journal {journal.path}: chain intact, {result.rows_checked} rows verified")


@journal_app.command("export")
def export(
    fmt: Annotated[str, typer.Option("--format", help="output format (only jsonl)")] = "jsonl",
    session: Annotated[Optional[str], typer.Option("--session", help="only this session")] = None,  # noqa: UP045
    output: Annotated[Optional[Path], typer.Option("-o", "--output", help="file (default stdout)")] = None,  # noqa: UP045
    config: ConfigOpt = None,
    home: HomeOpt = None,
) -> None:
    """Write events as JSON lines for log pipelines."""
    if fmt not in EXPORT_FORMATS:
        _fail(f"--format {fmt}: only jsonl is supported (one JSON event per line)", code=2)
    journal = _open(config, home, read_only=True)
    assert journal is not None
    with journal:
        sid = None
        if session is not None:
            try:
                sid = journal.find_session(session)
            except JournalError as exc:
                _fail(str(exc))
        count = journal.export_jsonl(output if output is not None else sys.stdout, session_id=sid)
    if output is not None:
        _console().print(f"wrote {count} events to {output}")


# -- rendering -----------------------------------------------------------------------------------


def _one_line(ev: JournalEvent) -> str:
    rnd = "-" if ev.round_no is None else str(ev.round_no)
    summary = json.dumps(ev.data, sort_keys=True, separators=(",", ":"))
    if len(summary) > 160:
        summary = summary[:157] + "..."
    return escape(f"{ev.id:>6} {ev.ts[:23]} {ev.session_id} r{rnd} {ev.event} {summary}")


def _line(console: Console, label: str, text: str, style: str = "bold") -> None:
    console.print(f"  [{style}]{label:<12}[/] {escape(text)}")


def _bullets(console: Console, items: list[Any]) -> None:
    for item in items:
        console.print(f"  {'':<12} • {escape(str(item))}")


def _changes_text(changes: list[dict[str, Any]]) -> list[str]:
    out = []
    for c in changes:
        text = f"{c.get('name')} = {c.get('value')}"
        if c.get("previous") is not None:
            text += f" (was {c['previous']})"
        if c.get("rationale"):
            text += f": {c['rationale']}"
        out.append(text)
    return out


def _render_event(console: Console, ev: JournalEvent) -> None:
    d = ev.data
    match ev.event:
        case "baseline":
            runs = d.get("objectives") or [m.get("objective") for m in d.get("measurements", [])]
            runs = [r for r in runs if isinstance(r, (int, float))]
            median = d.get("objective") or (statistics.median(runs) if runs else None)
            cv = _num((d.get("noise_cv") or 0) * 100, 1)
            unit = objective_unit(d.get("objective_name"))
            _line(
                console,
                "Baseline",
                f"objective {_num(median)}{' ' + unit if unit else ''} (runs: "
                f"{', '.join(_num(r) for r in runs) or '-'}), noise CV {cv}%; objective = "
                f"{objective_label(d.get('objective_name'))}",
            )
        case "profile":
            f = d.get("fingerprint") or {}
            if f:
                _line(
                    console,
                    "Profile",
                    f"{f.get('dbms')} {f.get('version_major')}, {f.get('benchmark')} "
                    f"({f.get('workload_class')}, read {f.get('read_fraction')}), scale {f.get('scale')}, "
                    f"{f.get('concurrency')} clients, {f.get('cpu_count')} CPUs, {f.get('memory_gib')} GiB",
                )
        case "proposal":
            _line(console, "Evidence", "" if d.get("evidence") else "(none given)")
            _bullets(console, d.get("evidence", []))
            _line(
                console,
                "Diagnosis",
                f"{d.get('bottleneck')} ({d.get('layer', 'dbms')}, planner "
                f"{d.get('planner', '?')}): {d.get('rationale', '')}",
            )
            if d.get("ruled_out"):
                _bullets(console, [f"ruled out: {r}" for r in d["ruled_out"]])
            _line(
                console,
                "Proposal",
                f"{len(d.get('changes', []))} change(s), apply {d.get('apply_requirement', '?')}",
            )
            _bullets(console, _changes_text(d.get("changes", [])))
            if d.get("risks"):
                _bullets(console, [f"risk: {r}" for r in d["risks"]])
        case "verdict":
            if d.get("ok"):
                _line(console, "Verdict", f"accepted, apply {d.get('apply_requirement', '?')}", "bold green")
                _bullets(console, _changes_text(d.get("changes", [])))
            else:
                _line(console, "Verdict", "rejected", "bold red")
                _bullets(
                    console,
                    [
                        f"[{f.get('check')}] {f.get('parameter')}={f.get('value')}: "
                        f"{f.get('message')}" + (f" (source: {f['source']})" if f.get("source") else "")
                        for f in d.get("failed", [])
                    ],
                )
            _bullets(console, [f"warning: {w}" for w in d.get("warnings", [])])
        case "intent":
            snap = d.get("snapshot") or {}
            purpose = f"{d['purpose']} " if d.get("purpose") else ""
            label = f" {snap['label']!r}" if snap.get("label") else ""
            mode = f" {d['mode']}" if d.get("mode") else ""
            _line(
                console,
                "Intent",
                f"{purpose}apply{mode}: safe snapshot{label} of "
                f"{snap.get('target', d.get('target', '?'))} saved "
                f"({len(snap.get('values', {}))} values, {len(snap.get('files', {}))} files)",
            )
        case "applied":
            changes = d.get("effective") or d.get("changes") or {}
            if isinstance(changes, list):
                changes = {c.get("name"): c.get("value") for c in changes if isinstance(c, dict)}
            how = " (server restarted)" if d.get("restarted") else ""
            _line(console, "Applied", ", ".join(f"{k}={v}" for k, v in changes.items()) + how)
        case "verified":
            _line(
                console,
                "Verified",
                ", ".join(f"{k}={v}" for k, v in d.get("effective", {}).items()) or "effective values match",
            )
        case "measured":
            m = d.get("measurement", d)
            role = d.get("label") or d.get("role")
            role = f" [{role}]" if role else ""
            _line(
                console,
                "Measurement",
                f"{m.get('workload', '')}{role}: tps {_num(m.get('tps'))}, p95 "
                f"{_num(m.get('latency_p95_ms'))} ms, objective {_num(m.get('objective'))}, errors "
                f"{m.get('errors', 0)}",
            )
        case "failure":
            _line(console, "Failure", f"{d.get('phase')}: {d.get('message')}", "bold red")
            _bullets(console, d.get("logs", [])[-3:])
        case "recovery":
            _line(
                console,
                "Recovery",
                f"{d.get('action')}: {d.get('details')} (service available: "
                f"{d.get('service_available')}, verified: {d.get('verified')})",
                "bold yellow",
            )
        case "decision":
            gain = d.get("gain_vs_best")
            gain_text = "" if gain is None else f", gain vs best {gain * 100:+.1f}%"
            _line(
                console,
                "Decision",
                f"{d.get('decision')}{' (kept)' if d.get('kept') else ''}{gain_text}: {d.get('reason', '')}",
                "bold cyan",
            )
        case "judged":
            gain = d.get("gain")
            _line(
                console,
                "Judged",
                f"{d.get('verdict')}"
                + ("" if gain is None else f", gain {gain * 100:+.1f}%")
                + f": {d.get('reason', '')}",
            )
        case "reverted":
            _line(console, "Reverted", f"back to {d.get('to')}: {d.get('reason', '')}", "bold yellow")
        case "final":
            changes = d.get("changes") or {}
            start = d.get("start_from") or {}
            unchanged = "the starting configuration, unchanged" + (
                " (from --start-from: " + ", ".join(f"{k}={v}" for k, v in start.items()) + ")" if start else ""
            )
            _line(
                console,
                "Final",
                f"{d.get('stage', '')} best configuration: "
                + (", ".join(f"{k}={v}" for k, v in changes.items()) or unchanged)
                + ("" if d.get("verified", True) else f" NOT verified: {d.get('error', '')}"),
            )
        case "intent.closed":
            _line(console, "Closed", f"intent closed: {d.get('how')}", "dim")
        case _:
            text = json.dumps(d, sort_keys=True, separators=(",", ":"))
            _line(console, ev.event, text if len(text) <= 200 else text[:197] + "...", "dim")


def render_story(console: Console, session_id: str, events: list[JournalEvent]) -> None:
    """Print a session's events as a story: header, one block per round, and the session end."""
    start = next((e.data for e in events if e.event == "session.start"), {})
    console.print(f"[bold]Session {escape(session_id)}[/]")
    if start:
        _line(console, "Target", str(start.get("target", "?")))
        _line(console, "Workload", str(start.get("workload", "?")))
    if events:
        _line(console, "Started", events[0].ts)
    current: int | None = None
    for ev in events:
        if ev.event == "session.start":
            continue
        if ev.event == "session.end":
            d = ev.data
            console.print(Rule("Session end"))
            _line(console, "Status", f"{d.get('status', '?')}: {d.get('reason', '')}".rstrip(": "))
            _line(
                console,
                "Objective",
                f"baseline {_num(d.get('baseline_objective'))} → best {_num(d.get('best_objective'))}",
            )
            best = d.get("best_config") or d.get("best_changes")
            if best:
                _line(console, "Best config", ", ".join(f"{k}={v}" for k, v in best.items()))
            continue
        if ev.round_no is not None and ev.round_no != current:
            current = ev.round_no
            console.print(Rule("Baseline" if current == 0 else f"Round {current}"))
        _render_event(console, ev)
    if not any(e.event == "session.end" for e in events):
        console.print(Rule("unfinished"))
        console.print("  the session has no session.end event (still running, or the process died)")
