"""``agenticdb memory list | show ID | forget ID | export FILE | import FILE`` (issue 6).

Works on the Memory Book file named by ``storage.memory_db`` (``--config``) or ``--home``.
Exit codes: 0 success, 1 the operation failed, 2 bad usage or configuration.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agenticdb.cli.fleet_cmd import print_other_hosts, run_sync
from agenticdb.cli.journal_cmd import ConfigOpt, HomeOpt, _fail, load_settings
from agenticdb.cli.output import print_json, print_table
from agenticdb.report.labels import objective_label
from agenticdb.store.memory import MemoryBook, MemoryBookError
from agenticdb.store.memory.transfer import export_book, import_book

memory_app = typer.Typer(no_args_is_help=True, help="Inspect and manage the experience memory.")


def _console() -> Console:
    """Stdout console; when stdout is not a terminal it is wide enough that no column is squeezed to
    one character per line and ids stay whole."""
    return Console(soft_wrap=True, highlight=False, width=None if sys.stdout.isatty() else 400)


def _open(config: Path | None, home: Path | None, must_exist: bool = True) -> MemoryBook | None:
    path = load_settings(config, home).storage.memory_db
    assert path is not None  # filled in by StorageConfig
    if not path.exists():
        if must_exist:
            _fail(f"memory file {path} does not exist (set --home or storage.home in --config)")
        return None
    return MemoryBook(path)


@memory_app.command("list")
def list_experience(
    sessions: Annotated[bool, typer.Option("--sessions", help="list sessions instead of experience")] = False,
    from_other_hosts: Annotated[
        bool, typer.Option("--from-other-hosts", help="experience learned on other hosts, with its origin")
    ] = False,
    config: ConfigOpt = None,
    home: HomeOpt = None,
    fmt: Annotated[str, typer.Option("--format", help="text | json")] = "text",
) -> None:
    """List stored experience (or sessions with --sessions)."""
    console = _console()
    if fmt not in ("text", "json"):
        _fail(f"--format {fmt!r}: expected text or json", 2)
    if from_other_hosts:
        print_other_hosts(config, home, console)
        return
    book = _open(config, home, must_exist=False)
    if book is None:
        if fmt == "json":
            print_json(console, [])
            return
        console.print("no memory yet: no session has finished with this storage")
        return
    with book:
        if fmt == "json":
            print_json(console, _as_json(book, sessions))
            return
        print_table(console, _sessions_table(book) if sessions else _experience_table(book))


def _sessions_table(book: MemoryBook) -> Table:
    """``memory list --sessions``: one row per session."""
    table = Table(title=f"sessions in {book.path}")
    table.add_column("session", no_wrap=True)
    for col in ("target", "dbms", "workload", "started (UTC)", "status", "baseline", "best"):
        table.add_column(col, overflow="fold")
    for s in book.sessions():
        table.add_row(
            s.id,
            s.target,
            f"{s.dbms} {s.version}",
            s.workload,
            s.started_at[:19],
            s.status,
            _num(s.baseline_objective),
            _num(s.best_objective),
        )
    return table


def _experience_table(book: MemoryBook) -> Table:
    """``memory list``: one row per stored experience with its fingerprint and best gain."""
    table = Table(title=f"experience in {book.path}")
    table.add_column("id", no_wrap=True)
    table.add_column("session", no_wrap=True)
    for col in (
        "dbms",
        "benchmark",
        "class",
        "read",
        "scale",
        "clients",
        "objective",
        "best gain",
        "created (UTC)",
    ):
        table.add_column(col, overflow="fold")
    for item in book.list_experience():
        fp = item.experience.fingerprint
        table.add_row(
            str(item.id),
            item.experience.session_id,
            f"{fp.dbms} {fp.version_major}",
            fp.benchmark,
            fp.workload_class,
            f"{fp.read_fraction:.2f}",
            f"{fp.scale:g}",
            str(fp.concurrency),
            objective_label(fp.objective),
            f"{item.experience.best_gain * 100:+.1f}%",
            item.created_at[:19],
        )
    return table


def _as_json(book: MemoryBook, sessions: bool) -> list[dict[str, object]]:
    """``memory list --format json``: the session rows, or each experience with its id and date."""
    if sessions:
        return [s.model_dump(mode="json") for s in book.sessions()]
    return [
        {"id": item.id, "created_at": item.created_at, **item.experience.model_dump(mode="json")}
        for item in book.list_experience()
    ]


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


@memory_app.command("show")
def show(
    experience_id: Annotated[int, typer.Argument(help="experience id (see `memory list`)")],
    config: ConfigOpt = None,
    home: HomeOpt = None,
) -> None:
    """Show one experience: fingerprint, what helped, what did not, what tied, what failed, best configuration."""
    book = _open(config, home)
    assert book is not None
    with book:
        try:
            item = book.get_experience(experience_id)
        except MemoryBookError as exc:
            _fail(str(exc))
            return
    console = _console()
    exp = item.experience
    fp = exp.fingerprint
    console.print(f"[bold]Experience {item.id}[/] from session {escape(exp.session_id)} ({item.created_at})")
    console.print(
        escape(
            f"  fingerprint: {fp.dbms} {fp.version_major}, {fp.benchmark} ({fp.workload_class}), read "
            f"{fp.read_fraction:.2f}, {fp.access_pattern}, scale {fp.scale:g}, {fp.concurrency} clients, "
            f"objective {fp.objective}, {fp.memory_gib:g} GiB, {fp.cpu_count} CPUs"
        )
    )
    console.print(f"  best gain: {exp.best_gain * 100:+.1f}%")
    if exp.recurring_bottlenecks:
        console.print(f"  recurring bottlenecks: {escape(', '.join(exp.recurring_bottlenecks))}")
    for title, entries in (
        ("beneficial", exp.beneficial),
        ("ineffective", exp.ineffective),
        ("inconclusive", exp.inconclusive),  # ties (README: remembered as inconclusive, may be tried again)
        ("failed", exp.failed),
    ):
        console.print(f"  [bold]{title}[/] ({len(entries)})")
        for entry in entries:
            console.print("    • " + escape(lesson_text(entry)))
    if exp.best_config:
        console.print("  [bold]best configuration[/]")
        for name, value in exp.best_config.items():
            share = exp.best_config_relative.get(name, {}).get("fraction_of_memory")
            rel = f"  ({float(share):.1%} of the memory limit)" if isinstance(share, int | float) else ""
            console.print("    " + escape(f"{name} = {value}{rel}"))


def lesson_text(entry: dict[str, object]) -> str:
    """One Memory Book lesson (``store.memory.experience._lessons``) as a line: its changes, then the bottleneck,
    the stage, the gain the round counted ("gain -2.4%", "gain not measured" when it counted none) and, for a
    failed one, where and why; other keys of older records as ``key value``. A fresh user read the entry's raw
    dict, "{'bottleneck': 'temp_spill', 'stage': 'dbms', 'gain': -0.024430076366647735}"."""
    changes = entry.get("changes", {})
    text = ", ".join(f"{k}={v}" for k, v in changes.items()) if isinstance(changes, dict) else str(changes)
    said: list[str] = []
    if entry.get("bottleneck"):
        said.append(str(entry["bottleneck"]))
    if entry.get("stage"):
        said.append(f"{entry['stage']} stage")
    if "gain" in entry:
        gain = entry["gain"]
        said.append(f"gain {gain:+.1%}" if isinstance(gain, int | float) else "gain not measured")
    if entry.get("phase") or entry.get("why"):
        said.append(f"failed in {entry.get('phase') or '?'}: {entry.get('why') or 'no reason recorded'}")
    told = {"changes", "bottleneck", "stage", "gain", "phase", "why"}
    said += [f"{k} {v}" for k, v in entry.items() if k not in told]
    return f"{text or 'no change'}: {', '.join(said)}" if said else text or "no change"


@memory_app.command("forget")
def forget(
    experience_id: Annotated[Optional[int], typer.Argument(help="experience id")] = None,  # noqa: UP045
    session: Annotated[Optional[str], typer.Option("--session", help="all experience of a session")] = None,  # noqa: UP045
    dbms: Annotated[Optional[str], typer.Option("--dbms", help="fingerprint dbms")] = None,  # noqa: UP045
    benchmark: Annotated[Optional[str], typer.Option("--benchmark", help="fingerprint benchmark")] = None,  # noqa: UP045
    lessons: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--lessons", help="drop only the failed lessons whose phase or reason contains this"),
    ] = None,
    config: ConfigOpt = None,
    home: HomeOpt = None,
) -> None:
    """Delete experience by id, or every experience matching all given filters; with --lessons, drop
    single failed lessons (e.g. 'administrator command') and keep the rows."""
    if lessons is not None:
        book = _open(config, home)
        assert book is not None
        with book:
            try:
                n = book.forget_lessons(lessons, session_id=session)
            except ValueError as exc:
                _fail(str(exc), code=2)
        if n == 0:
            _fail(f"forget: no failed lesson matched {lessons!r}")
        _console().print(f"forgot {n} lesson(s) matching {lessons!r}; the experience rows stay")
        return
    if experience_id is None and session is None and dbms is None and benchmark is None:
        _fail("forget: give an experience id or at least one of --session, --dbms, --benchmark", code=2)
    book = _open(config, home)
    assert book is not None
    with book:
        count = book.forget(experience_id, session_id=session, dbms=dbms, benchmark=benchmark)
    if count == 0:
        _fail("forget: no experience matched" + (f" id={experience_id}" if experience_id is not None else ""))
    _console().print(f"forgot {count} experience row(s)")


@memory_app.command("export")
def export(
    file: Annotated[Path, typer.Argument(help="JSON file to write")],
    config: ConfigOpt = None,
    home: HomeOpt = None,
) -> None:
    """Export sessions, rounds, experience and LLM calls to a JSON file."""
    book = _open(config, home)
    assert book is not None
    with book:
        counts = export_book(book, file)
    _console().print(escape(f"wrote {file}: " + ", ".join(f"{v} {k}" for k, v in counts.items())))


@memory_app.command("import")
def import_(
    file: Annotated[Path, typer.Argument(help="JSON file written by `memory export`")],
    config: ConfigOpt = None,
    home: HomeOpt = None,
) -> None:
    """Merge an exported Memory Book into this one (existing entries are kept)."""
    path = load_settings(config, home).storage.memory_db
    assert path is not None
    with MemoryBook(path) as book:
        try:
            added = import_book(book, file)
        except MemoryBookError as exc:
            _fail(str(exc))
            return
    _console().print(escape(f"imported into {path}: " + ", ".join(f"{v} {k}" for k, v in added.items())))


@memory_app.command("sync")
def sync_central(config: ConfigOpt = None, home: HomeOpt = None) -> None:
    """Upload experience learned here to the central Memory Book (storage.memory_url); idempotent."""
    run_sync(config, home, _console())
