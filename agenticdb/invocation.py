"""The flags this process was started with, for the "run this next" hints it prints (layer 3).

A hint such as ``undo with: agenticdb rollback --dbms`` fails as pasted ("no target given", exit 2) when
the user named the server with ``--sandbox postgres`` or ``--target DSN``: the next command needs the
same flags. The command line records them once (:func:`remember`, from ``agenticdb.cli.settings``) and
every hint, at any layer, is spelled by :func:`command`. A ``--target`` DSN is shown with its password
redacted (``agenticdb.redaction``); a configuration file or the environment (``AGENTICDB_TARGET__DSN``)
carry over as they are, so nothing is added for them.
"""

from __future__ import annotations

import shlex
import threading
from pathlib import Path

from agenticdb.redaction import redact

TARGET_FLAGS = ("config", "target", "sandbox", "home")
"""The flags naming the server and the data dir (rollback, apply, advise, tune, catalog, validate)."""
STORE_FLAGS = ("config", "home")
"""The flags naming only the data dir (journal, report, pending, approve)."""

_lock = threading.Lock()
_given: dict[str, str] = {}


def remember(config: Path | None, target: str | None, sandbox: str | None, home: Path | None) -> None:
    """Record the flags the user gave this command (None: not given). Called once per command; the daemon's
    threads read what its start recorded."""
    given = {"config": config, "target": target, "sandbox": sandbox, "home": home}
    with _lock:
        _given.clear()
        _given.update({k: str(v) for k, v in given.items() if v is not None and str(v) != ""})


def flags(which: tuple[str, ...] = TARGET_FLAGS) -> str:
    """`` --sandbox postgres --home /x`` (leading space) for the recorded flags among ``which``; ``--target``'s
    DSN redacted; each value quoted for a POSIX shell. "" when none was given."""
    with _lock:
        given = dict(_given)
    parts = []
    for name in TARGET_FLAGS:
        if name in which and name in given:
            value = redact(given[name]) if name == "target" else given[name]
            parts.append(f" --{name} {shlex.quote(value)}")
    return "".join(parts)


def command(words: str, which: tuple[str, ...] = TARGET_FLAGS) -> str:
    """``agenticdb <words>`` with the flags among ``which`` this process was given, ready to paste."""
    return f"agenticdb {words}{flags(which)}"
