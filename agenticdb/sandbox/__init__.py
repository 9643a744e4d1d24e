"""Private database instances for trying agenticdb and for tests (``agenticdb sandbox up|down|status``).

Each sandbox lives under ``<storage home>/sandbox/<kind>/`` with its own data dir, port and socket dir,
and records them in ``sandbox.json`` so later commands (``tune --sandbox postgres``) can find it.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from agenticdb.config.sections import TargetConfig


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read it back)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_traversable(path: Path) -> None:
    """Add search (x) permission for others on every parent of ``path`` that lacks it, so the server's
    OS user (postgres, mysql) can reach its data and socket directories below a root-created home."""
    for parent in path.parents:
        if parent == Path("/"):
            break
        mode = parent.stat().st_mode
        if not mode & 0o001:
            os.chmod(parent, mode | 0o711)


class SandboxInfo(Protocol):
    """Where a sandbox runs (``sandbox.json``): its DSN, data directory and how to reach it as a target."""

    @property
    def dsn(self) -> str: ...  # pragma: no cover - protocol

    data_dir: str

    def target_config(self, database: str = "agenticdb_bench") -> TargetConfig: ...  # pragma: no cover


class Sandbox(Protocol):
    """A private instance of one DBMS kind under a storage home (``root`` = ``<home>/sandbox/<kind>``)."""

    root: Path

    def info(self) -> SandboxInfo | None: ...  # pragma: no cover - protocol

    def up(self) -> SandboxInfo: ...  # pragma: no cover

    def down(self) -> None: ...  # pragma: no cover

    def status(self) -> dict[str, object]: ...  # pragma: no cover


def _postgres(home: Path) -> Sandbox:
    from agenticdb.sandbox.postgres import PostgresSandbox  # lazy: start-up cost (loads psycopg; 421 modules)

    return PostgresSandbox(home)


def _mariadb(home: Path) -> Sandbox:
    from agenticdb.sandbox.mariadb import MariaDBSandbox  # lazy: start-up cost (loads pymysql; 354 modules)

    return MariaDBSandbox(home)


SANDBOXES: dict[str, Callable[[Path], Sandbox]] = {"postgres": _postgres, "mariadb": _mariadb}
"""Sandbox kinds (``--sandbox postgres|mariadb``) and how each is built under a storage home."""

SANDBOX_ALIASES: dict[str, str] = {"postgresql": "postgres", "pg": "postgres", "mysql": "mariadb"}
"""Other names of a sandbox kind, accepted wherever a kind is given (``sandbox up|down|status KIND``,
``--sandbox KIND``): the target kinds' spellings (``target.kind = "postgresql"``); the sandbox of MySQL is a
MariaDB server."""


def sandbox_kinds_help() -> str:
    """The accepted kind names for help and errors: ``postgres (or postgresql, pg) | mariadb (or mysql)``."""
    parts = []
    for kind in SANDBOXES:
        others = [name for name, canon in SANDBOX_ALIASES.items() if canon == kind]
        parts.append(f"{kind} (or {', '.join(others)})" if others else kind)
    return " | ".join(parts)


def sandbox_kind(name: str) -> str:
    """The sandbox kind (a key of :data:`SANDBOXES`) that ``name`` spells, case and spaces ignored.

    Raises:
        ValueError: an unknown name (the message lists every accepted one).
    """
    key = name.strip().lower()
    kind = SANDBOX_ALIASES.get(key, key)
    if kind not in SANDBOXES:
        raise ValueError(f"sandbox kind {name!r}: expected {sandbox_kinds_help()}")
    return kind


def sandbox_of(kind: str, home: Path) -> Sandbox:
    """The sandbox ``kind`` (any name :func:`sandbox_kind` accepts) under ``home``.

    Raises:
        ValueError: an unknown kind (names the kinds there are).
    """
    return SANDBOXES[sandbox_kind(kind)](home)
