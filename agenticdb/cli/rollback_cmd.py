"""Body of the ``rollback`` command (kept apart from argument parsing in ``agenticdb.cli``): put back a
session's DBMS snapshot and/or the saved OS originals, or with ``--dry-run`` only say what would change
(reading the journal and the Memory Book read-only, writing no file). Returns the process exit code."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from agenticdb.config import Settings
from agenticdb.dialect import family_of
from agenticdb.loop.recovery import restore_os_originals, restore_verified
from agenticdb.models import Snapshot
from agenticdb.redaction import redact
from agenticdb.store.journal import Journal
from agenticdb.store.journal_events import JournalError
from agenticdb.store.lock import LockError, TargetLock
from agenticdb.store.memory import MemoryBook
from agenticdb.targets.base import Target


def _latest_session(journal: Journal, kind: str) -> str | None:
    """Newest session that changed a target of ``kind``'s family (the journal lists sessions oldest first)."""
    family = family_of(kind)
    for s in reversed(journal.sessions()):
        # Skip sessions that never changed anything (refused or interrupted before a snapshot was taken).
        if s.target and family_of(s.target) == family and _find_snapshot(journal, s.id, "baseline") is not None:
            return s.id
    return None


def run_rollback(
    cfg: Settings,
    dbms: bool,
    os_: bool,
    session: str | None,
    to: str,
    console: Console,
    dry_run: bool = False,
) -> int:
    """Restore the DBMS snapshot of a session (baseline or last safe) and/or the saved OS originals,
    printing every value that changed (``name: now → restored``) and verifying the result.

    Both go through ``agenticdb.loop.recovery.restore_verified``, the path the session's revert and the
    daemon's reconciliation use. OS originals come from the Memory Book (saved before agenticdb's first
    write of each parameter); when several interrupted sessions saved one name, the oldest value is the
    host's own and wins.
    """
    from agenticdb.app import open_stores  # lazy: start-up cost (loads 9 modules)

    if to not in ("baseline", "last-safe"):
        console.print(f"[red]error:[/] --to {to!r}: expected 'baseline' or 'last-safe'")
        return 2
    journal, memory = _stores_to_read(cfg) if dry_run else open_stores(cfg)
    if journal is None:  # a dry run on a home without a journal (it creates none)
        if dbms or session is not None:
            console.print(f"[red]error:[/] no sessions in {cfg.storage.journal_db}: nothing to roll back")
            return 1
    elif session is not None:
        try:
            session = journal.find_session(session)
        except JournalError as exc:  # unknown or ambiguous prefix: say which
            console.print(f"[red]error:[/] --session {session}: {exc}")
            return 2
    elif dbms:
        session = _latest_session(journal, cfg.target.kind)
    code = 0
    if dbms:
        if session is None:
            console.print(f"[red]error:[/] no {cfg.target.kind} session with a snapshot in the journal to roll back")
            return 1
        assert journal is not None  # checked above: a session was found in it
        code = _rollback_dbms(cfg, journal, session, to, console, dry_run)
        if code == 2:  # a usage error (the snapshot is of another kind of server): nothing else runs
            return code
    if os_:
        code = code or _rollback_os(cfg, journal, memory, session, console, dry_run)
    return code


def _stores_to_read(cfg: Settings) -> tuple[Journal | None, MemoryBook | None]:
    """``rollback --dry-run``: the journal and the Memory Book opened read-only, None for a file that does
    not exist: a dry run changes nothing, and creates no file either."""
    jpath, mpath = cfg.storage.journal_db, cfg.storage.memory_db
    assert jpath is not None and mpath is not None  # filled in by StorageConfig
    key = cfg.storage.key_path()
    journal = Journal(jpath, read_only=True, key_file=key if key.exists() else None) if jpath.exists() else None
    return journal, MemoryBook(mpath, read_only=True) if mpath.exists() else None


def _rollback_dbms(cfg: Settings, journal: Journal, session: str, to: str, console: Console, dry_run: bool) -> int:
    """``rollback --dbms``: the session's baseline or last safe snapshot, under the target lock."""
    from agenticdb.app import build_target  # lazy: start-up cost (loads 9 modules)

    snap = _find_snapshot(journal, session, to)
    if snap is None:
        console.print(f"[red]error:[/] session {session} has no {to} DBMS snapshot in the journal")
        return 1
    lock = TargetLock(cfg.storage.home, cfg.target.dsn or "")
    try:
        if not dry_run:  # a dry run only reads: no lock (its file would be created), no cache written
            lock.acquire()
    except LockError as exc:
        console.print(f"[red]error:[/] {escape(redact(str(exc)))}", highlight=False, soft_wrap=True)
        return 1
    target = build_target(cfg, cache=not dry_run)
    try:
        if not target.owns(snap):
            console.print(f"[red]error:[/] session {session} snapshot is of {snap.target}, the target is {target.kind}")
            return 2
        if dry_run:
            return _print_dry_run(console, target, snap, f"restoring {to} of session {session}")
        result = restore_verified(target, snap)
    finally:
        target.close()
        lock.release()
    if result.error:
        console.print(f"[red]error:[/] DBMS restore to {to} of session {session} failed: {result.error}")
        return 1
    changed = {k: list(v) for k, v in result.changed.items()}
    payload = {"stage": "dbms", "to": to, "snapshot": snap.label, "verified": result.verified, "changed": changed}
    if result.left_alone:  # values no SET brings back that have no effect here (Target.inert)
        payload["left_alone"] = dict(result.left_alone)
    journal.append(session, "rollback", payload)
    verdict = "[green]verified[/]" if result.verified else f"[red]differences {result.differences}[/]"
    console.print(
        f"DBMS ({snap.target}) restored to {to} (snapshot '{snap.label}') of session {session}: {verdict}",
        highlight=False,
    )
    for k, (was, now) in sorted(result.changed.items()):
        console.print(f"  {k}: {was} → {now}", highlight=False)
    for k, why in sorted(result.left_alone.items()):
        console.print(f"  {k}: left alone, not set back to {snap.values.get(k)}: {why}", highlight=False)
    if not result.changed and result.before:
        console.print("  (every value was already at the snapshot)")
    return 0 if result.verified else 1


def _print_dry_run(console: Console, target: Target, snap: Snapshot, what: str) -> int:
    """Print the values restoring ``snap`` would change; 1 when the server does not answer (then nobody
    can tell: "would change 0 values" would be a guess)."""
    if not target.available():
        reason = target.unavailable_reason or "it does not answer"
        console.print(
            f"[red]error:[/] dry run: {what}: cannot read the server's current values ({escape(redact(reason))})",
            highlight=False,
            soft_wrap=True,
        )
        return 1
    before = target.current_values([n for n in snap.values if target.knows(n)])
    pending = {
        k: (before[k], v) for k, v in snap.values.items() if k in before and not target.values_equal(k, v, before[k])
    }
    if not pending:  # "would change 0 value(s):" with nothing after it read as a cut-off list
        whose = f"the {snap.label!r} snapshot's" if snap.label else "the snapshot's"
        console.print(f"dry run: {what}: nothing to change: the values in effect are {whose}", highlight=False)
        return 0
    console.print(f"dry run: {what} would change {len(pending)} value(s):", highlight=False)
    for k, (was, now) in sorted(pending.items()):
        console.print(f"  {k}: {was} → {now}", highlight=False)
    return 0


def _rollback_os(
    cfg: Settings,
    journal: Journal | None,
    memory: MemoryBook | None,
    session: str | None,
    console: Console,
    dry_run: bool,
) -> int:
    """``rollback --os``: every unrestored OS original saved in the Memory Book (None: a dry run found
    no Memory Book file)."""
    from agenticdb.app import linux_target  # lazy: start-up cost (loads 9 modules)

    originals = memory.os_originals(session_id=None, unrestored_only=True) if memory is not None else []
    if not originals:
        console.print("OS: nothing to restore (no unrestored originals saved)")
        return 0
    if dry_run:
        console.print("dry run: OS originals that would be restored:")
        for o in originals:
            console.print(f"  {o.name} → {o.original} (saved by session {o.session_id})", highlight=False)
        return 0
    assert journal is not None and memory is not None  # opened for writing: not a dry run
    result = restore_os_originals(linux_target(cfg), memory, originals, "os originals")
    values, bad = result.values, result.differences
    journal.append(
        session or "rollback",
        "rollback",
        {"stage": "os", "values": values, "verified": not bad, "error": result.error or None},
    )
    console.print(
        f"OS: restored {len(values) - len(bad)} of {len(values)} original values"
        + (" [green]verified[/]" if not bad else ""),
        highlight=False,
    )
    for k, v in sorted(values.items()):
        mark = f"  [red]NOT restored: now {bad[k][1]}[/]" if k in bad else ""
        console.print(f"  {k}: {result.before.get(k, '?')} → {v}{mark}", highlight=False)
    if result.error:
        console.print(f"[red]error:[/] {result.error}", highlight=False)
    return 1 if bad else 0


def _find_snapshot(journal: Journal, session: str, to: str) -> Snapshot | None:
    """The DBMS snapshot of the first (``baseline``) or last (``last-safe``) intent of ``session``;
    intents of the OS stage (snapshot target ``linux``) are skipped."""
    snaps = []
    for e in journal.events(session):
        if e.event == "intent" and isinstance(e.data.get("snapshot"), dict):
            snap = Snapshot.model_validate(e.data["snapshot"])
            if family_of(snap.target) != "linux":
                snaps.append(snap)
    if not snaps:
        return None
    return snaps[0] if to == "baseline" else snaps[-1]
