"""``agenticdb journal list | show ID | tail [-n N] [-f] | verify | export`` (issue 9, "Journal CLI").

``show`` tells a session as a story, one block per round: evidence → diagnosis → proposal → verdict →
apply → measurement → decision, from the payloads documented in :mod:`agenticdb.store.journal`.
Exit codes: 0 success, 1 the operation failed (broken chain, unknown session, missing file),
2 bad usage or configuration.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agenticdb.cli.output import print_json, print_table
from agenticdb.cli.story import render_story
from agenticdb.config import ConfigError, Settings, load_config
from agenticdb.config.sections import HOME_ORDER, empty_path_rule
from agenticdb.redaction import redact
from agenticdb.store.journal import Journal
from agenticdb.store.journal_events import JournalError, JournalEvent
from agenticdb.store.journal_key import JournalKeyError
from agenticdb.units.text import clip

journal_app = typer.Typer(no_args_is_help=True, help="Read and check the audit journal.")


def home_path(value: str) -> Path:
    """``--home``'s value as a path; a blank one exits with code 2 and a one-line error naming the option, the value
    and the rule (:func:`agenticdb.config.sections.empty_path_rule`, the rule of ``storage.home`` in a file).

    click turned ``--home ""`` into ``Path("")``, which is ``Path(".")``: the data went to whatever directory the
    command ran from.
    """
    if not value.strip():
        _fail(f"--home {value!r}: {empty_path_rule(HOME_ORDER)}", code=2)
    return Path(value)


def home_option(what: str) -> Any:
    """The ``--home`` option of every command (here, ``agenticdb.cli.memory_cmd`` and ``agenticdb.cli``): help ``what``
    followed by where the data dir is without it; the value parsed by :func:`home_path`."""
    return typer.Option("--home", parser=home_path, help=f"{what}; without it {HOME_ORDER}")


ConfigOpt = Annotated[Optional[Path], typer.Option("--config", "-c", help="agenticdb.toml")]  # noqa: UP045
HomeOpt = Annotated[Optional[Path], home_option("agenticdb data dir holding journal.db and memory.db")]  # noqa: UP045


EXPORT_FORMATS = ("jsonl",)
"""Formats of ``journal export`` (JSON lines: one event per line, for log pipelines)."""


def load_settings(config: Path | None, home: Path | None) -> Settings:
    """Settings from ``--config`` with ``--home`` overriding the data dir: the SQLite files are there unless the
    file or environment names them (``storage.journal_db``/``memory_db`` win, as in ``cli.settings``).

    Exits with code 2 and the config error on stderr when the file is invalid.
    """
    overrides: dict[str, Any] = {}
    if home is not None:
        overrides["storage"] = {"home": home}  # a journal_db/memory_db the file names stays (StorageConfig._paths)
    try:
        return load_config(config, overrides or None)
    except ConfigError as exc:
        _fail(str(exc), code=2)
        raise  # unreachable: _fail raises


def _fail(message: str, code: int = 1) -> None:
    Console(stderr=True).print(f"[bold red]error:[/] {escape(redact(message))}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _open(config: Path | None, home: Path | None, must_exist: bool = True, read_only: bool = False) -> Journal | None:
    storage = load_settings(config, home).storage
    path = storage.journal_db
    assert path is not None  # filled in by StorageConfig
    if not path.exists():
        if must_exist:
            _fail(f"journal file {path} does not exist (set --home or storage.home in --config)")
        return None
    try:
        key = storage.key_path()
        # Only tune and the daemon create the key; inspecting a journal never does (nor as another user).
        return Journal(path, read_only=read_only, key_file=key if key.exists() or read_only else None)
    except JournalKeyError as exc:
        _fail(str(exc))
        raise  # unreachable: _fail raises
    except sqlite3.DatabaseError as exc:
        _fail(f"journal file {path} cannot be opened: {exc}")
        raise  # unreachable: _fail raises


NO_SESSIONS = "no sessions in {path} (nothing has been tuned with this storage yet)"
"""What ``journal list``, ``show`` and ``tail`` say when there is no session to show, whether the journal
file is missing or holds none (issue 39 and a DBA's trial: one sentence everywhere, exit 0)."""


def _no_sessions(console: Console, config: Path | None, home: Path | None) -> None:
    """Print :data:`NO_SESSIONS` with the journal file (exit 0: an empty home is not an error)."""
    console.print(NO_SESSIONS.format(path=load_settings(config, home).storage.journal_db))


def _console() -> Console:
    """Stdout console; when stdout is not a terminal, wide enough that tables are never squeezed
    (ids must stay whole so people can copy them)."""
    return Console(soft_wrap=True, highlight=False, width=None if sys.stdout.isatty() else 400)


def _num(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{float(value):,.{digits}f}"


@journal_app.command("list")
def list_sessions(
    config: ConfigOpt = None,
    home: HomeOpt = None,
    fmt: Annotated[str, typer.Option("--format", help="text | json")] = "text",
) -> None:
    """List the sessions in the journal, oldest first."""
    console = _console()
    if fmt not in ("text", "json"):
        _fail(f"--format {fmt!r}: expected text or json", 2)
    journal = _open(config, home, must_exist=False)
    if journal is None:
        if fmt == "json":
            print_json(console, [])
            return
        _no_sessions(console, config, home)
        return
    with journal:
        sessions = journal.sessions()
        if fmt == "json":
            print_json(console, [s.model_dump(mode="json") for s in sessions])
            return
        if not sessions:  # an empty table under a title says less than show does
            _no_sessions(console, config, home)
            return
        table = Table(title=f"sessions in {journal.path}")
        table.add_column("session", no_wrap=True)
        table.add_column("started (UTC)", no_wrap=True)
        table.add_column("target", min_width=8, overflow="fold")
        table.add_column("workload", min_width=8, overflow="fold")
        for col in ("rounds", "baseline", "best"):
            table.add_column(col, justify="right", no_wrap=True)
        table.add_column("status", no_wrap=True)
        for s in sessions:
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
        print_table(console, table)


@journal_app.command("show")
def show(
    session_id: Annotated[
        Optional[str],  # noqa: UP045
        typer.Argument(help="session id (a unique prefix is enough); default: the newest session"),
    ] = None,
    config: ConfigOpt = None,
    home: HomeOpt = None,
) -> None:
    """Tell one session as a story, round by round (the newest one when no id is given)."""
    journal = _open(config, home, must_exist=False)
    if journal is None:
        _no_sessions(_console(), config, home)
        return
    with journal:
        if session_id is None and not journal.sessions():
            _no_sessions(_console(), config, home)
            return
        try:
            sid = journal.find_session(session_id) if session_id is not None else journal.newest_session()
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
    """Print the last events; with -f, keep printing new ones as tail -f does."""
    console = _console()
    journal = _open(config, home, must_exist=False)
    if journal is None:
        _no_sessions(console, config, home)
        return
    with journal:
        last = 0
        events = journal.tail(n)
        if not events and not follow:
            _no_sessions(console, config, home)
        for ev in events:
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
    _console().print(
        f"journal {journal.path}: chain intact, {result.rows_checked} rows verified "
        f"({result.keyed_rows} keyed); {result.note}"
    )


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
    summary = clip(json.dumps(ev.data, sort_keys=True, separators=(",", ":")), 160)
    return escape(f"{ev.id:>6} {ev.ts[:23]} {ev.session_id} r{rnd} {ev.event} {summary}")
