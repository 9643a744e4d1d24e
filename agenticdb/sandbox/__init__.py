"""Private database instances for trying agenticdb and for tests (``agenticdb sandbox up|down|status``).

Each sandbox lives under ``<storage home>/sandbox/<kind>/`` with its own data dir, port and socket dir,
and records them in ``sandbox.json`` so later commands (``tune --sandbox postgres``) can find it.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path


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
