"""The journal's HMAC key, private files and the external anchor of the chain head (issue 21).

A plain hash chain only shows accidental edits: whoever rewrites a row and recomputes every later hash
passes the check. With a key kept outside the journal (``[storage] journal_key_file``, default
``<home>/journal.key``, created 0600 on first start) every new row is chained with
``HMAC-SHA256(key, prev_hash + fields)`` (RFC 2104; Python ``hmac``) and its hash is stored as
``hmac-sha256:<hex>``. Without the key nobody can compute a row that verifies.

Journals that predate the key: rows up to ``unkeyed_until`` (the last row id when the key was
created, recorded in the key file, not in the journal) stay plain SHA-256; ``journal verify`` still
checks them but says that they are only protected against accidental edits. Every row after that must
be keyed: a rewritten tail with a recomputed unkeyed chain fails.

After each daemon session the chain head (row id + hash) is written to the system journal
(:func:`anchor_head`) so a rewrite of the whole file, key included, still disagrees with a record the
service cannot change afterwards.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import shutil
import subprocess
import tomllib
from pathlib import Path

import structlog
from pydantic import BaseModel, ConfigDict

log = structlog.get_logger(__name__)

KEYED_PREFIX = "hmac-sha256:"
"""Prefix of a keyed row's ``hash`` (the plain chain stores 64 hex digits)."""

ANCHOR_TAG = "agenticdb-journal"
"""syslog identifier of the chain-head anchors (``journalctl -t agenticdb-journal``)."""


class JournalKeyError(ValueError):
    """The key file is unreadable or malformed (the message names the file, never the key)."""


class JournalKey(BaseModel):
    """The HMAC key (32 random bytes) and the last row id that predates it (0 for a new journal)."""

    model_config = ConfigDict(frozen=True)

    path: Path
    key: bytes
    unkeyed_until: int = 0

    def row_hash(self, prev_hash: str, fields: str) -> str:
        """``hmac-sha256:`` + HMAC-SHA256(key, prev_hash + fields) in hex."""
        mac = hmac.new(self.key, (prev_hash + fields).encode("utf-8"), hashlib.sha256).hexdigest()
        return KEYED_PREFIX + mac


def create_private(path: Path) -> None:
    """Create ``path`` empty with mode 0600 (owner read/write) when it does not exist; parents 0700
    when they are created. SQLite gives its -wal/-shm files the mode of the database file."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    os.close(fd)


def load_key(path: Path) -> JournalKey | None:
    """The key in ``path``, or None when the file does not exist.

    Raises:
        JournalKeyError: unreadable file or no 64-hex-digit ``key``.
    """
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise JournalKeyError(f"journal key file {path}: cannot be read ({type(exc).__name__})") from None
    try:
        key = bytes.fromhex(str(data["key"]))
        until = int(data.get("unkeyed_until", 0))
    except (KeyError, ValueError, TypeError):
        raise JournalKeyError(f"journal key file {path}: needs key = '<64 hex digits>'") from None
    if len(key) != 32 or until < 0:
        raise JournalKeyError(f"journal key file {path}: key must be 32 bytes (64 hex digits)")
    return JournalKey(path=path, key=key, unkeyed_until=until)


def load_or_create_key(path: Path, last_row_id: int) -> JournalKey:
    """The key in ``path``; created (0600, O_EXCL so two starting processes agree) when missing, with
    ``unkeyed_until = last_row_id`` (rows of an existing journal stay plain SHA-256).

    Raises:
        JournalKeyError: the existing file is malformed.
    """
    existing = load_key(path)
    if existing is not None:
        return existing
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    text = (
        "# agenticdb journal HMAC key: keep it secret and apart from copies of the journal.\n"
        "# unkeyed_until: rows up to this id predate the key and are plain SHA-256.\n"
        f"key = '{secrets.token_hex(32)}'\nunkeyed_until = {last_row_id}\n"
    )
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        key = load_key(path)
        assert key is not None
        return key
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    log.info("journal.key_created", path=str(path), unkeyed_until=last_row_id)
    key = load_key(path)
    assert key is not None
    return key


JOURNALD_SOCKET = Path("/run/systemd/journal/stdout")
"""journald's stream socket (systemd-journald.service(8)); ``systemd-cat`` writes to it."""
SYSLOG_SOCKET = Path("/dev/log")
"""The local syslog socket (journald's or rsyslog's), used by ``logger`` and Python's ``syslog``."""


def anchor_head(session_id: str, row_id: int, head: str) -> str:
    """Write the chain head to the system journal; returns the channel used.

    ``systemd-cat -t agenticdb-journal`` when journald's socket exists, else ``logger -t
    agenticdb-journal`` (syslog) when ``/dev/log`` exists, else nothing. Returns "journald",
    "syslog" or "none: <why>". Never raises: a missing anchor is reported, not fatal.
    """
    line = f"agenticdb journal head session={session_id} row={row_id} hash={head}"
    tried: list[str] = []
    for channel, sock, argv in (
        ("journald", JOURNALD_SOCKET, ["systemd-cat", "-t", ANCHOR_TAG, "-p", "info"]),
        ("syslog", SYSLOG_SOCKET, ["logger", "-t", ANCHOR_TAG, "--", line]),
    ):
        if not sock.exists() or shutil.which(argv[0]) is None:
            tried.append(f"{channel}: no {sock}" if not sock.exists() else f"{channel}: no {argv[0]}")
            continue
        try:
            proc = subprocess.run(  # own session: out of reach of a terminal's Ctrl-C
                argv, input=line, text=True, capture_output=True, timeout=10, check=False, start_new_session=True
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            tried.append(f"{channel}: {exc}")
            continue
        if proc.returncode == 0:
            return channel
        tried.append(f"{channel}: {argv[0]} exit {proc.returncode}")
    return "none: " + "; ".join(tried)
