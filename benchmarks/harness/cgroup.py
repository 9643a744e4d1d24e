"""A memory-limited cgroup for the benchmark server (cgroup v2 ``memory.max`` or v1
``memory.limit_in_bytes``, whichever hierarchy holds the memory controller on this host).

Why: the OLTP scenarios need a data set larger than the memory the server may use, so the buffer and
cache knobs have something to decide. On a 24 GiB host that only happens if the server is confined.
Page cache is charged to the cgroup of the process that first touches a page (kernel
Documentation/admin-guide/cgroup-v2.rst "Memory Ownership"; cgroup-v1/memory.rst §2.2), so the server
must be *born* inside the cgroup, not moved there after it has already read its files: the harness
starts pg_ctl / mariadbd (and the pristine-data copy) from a child process that first writes its own pid
to ``cgroup.procs`` (see ``instance.py``). Children (postmaster, backends) inherit the cgroup.

The child cgroup is created below the cgroup the harness itself runs in, so it also obeys any limit
above it, and removed at the end (it must be empty first).
"""

from __future__ import annotations

import os
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)


class CgroupError(RuntimeError):
    """The memory cgroup cannot be created or joined (message names the path and the errno text)."""


def _mounts() -> list[tuple[str, str, str]]:
    out = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 4:
            out.append((parts[1], parts[2], parts[3]))
    return out


def memory_hierarchy() -> tuple[int, Path]:
    """(version, directory of our own cgroup in the hierarchy holding the memory controller).

    Raises:
        CgroupError: no memory controller is mounted.
    """
    own: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        hid, controllers, path = line.split(":", 2)
        for c in controllers.split(",") if controllers else ["<v2>"]:
            own[c] = path
    for mnt, fstype, opts in _mounts():
        if fstype == "cgroup" and "memory" in opts.split(","):
            return 1, Path(mnt) / own.get("memory", "/").lstrip("/")
    for mnt, fstype, _ in _mounts():
        if fstype == "cgroup2":
            base = Path(mnt) / own.get("<v2>", "/").lstrip("/")
            if "memory" in (Path(mnt) / "cgroup.controllers").read_text().split():
                return 2, base
    raise CgroupError(
        "no cgroup memory controller mounted (checked /proc/self/mounts for cgroup v1 'memory' "
        "and cgroup2 with 'memory' in cgroup.controllers)"
    )


class MemoryCgroup:
    """A child cgroup with a hard memory limit.

    Args:
        name: directory name of the child (e.g. ``agbench-1234-server``).
        limit_bytes: hard limit in bytes (v2 ``memory.max``, v1 ``memory.limit_in_bytes``).

    Raises:
        CgroupError: creation or limit write failed (not root, controller not delegated).
    """

    def __init__(self, name: str, limit_bytes: int) -> None:
        self.version, parent = memory_hierarchy()
        self.path = parent / name
        self.limit_bytes = int(limit_bytes)
        try:
            if self.version == 2:
                # The memory controller must be enabled for children of the parent (cgroup-v2.rst
                # "Enabling and Disabling"); harmless when already enabled.
                ctl = parent / "cgroup.subtree_control"
                if "memory" not in ctl.read_text().split():
                    ctl.write_text("+memory")
            self.path.mkdir(exist_ok=True)
            limit_file = "memory.max" if self.version == 2 else "memory.limit_in_bytes"
            (self.path / limit_file).write_text(str(self.limit_bytes))
        except OSError as exc:
            raise CgroupError(
                f"cannot create memory cgroup {self.path} with limit {self.limit_bytes} bytes: {exc.strerror}"
            ) from exc
        log.info("cgroup.created", path=str(self.path), version=self.version, limit_bytes=self.limit_bytes)

    def join_self(self) -> None:
        """Move the calling process into the cgroup (used as ``preexec_fn`` before exec)."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def add(self, pid: int) -> None:
        """Move process ``pid`` into the cgroup (its later children follow it)."""
        (self.path / "cgroup.procs").write_text(str(pid))

    def pids(self) -> list[int]:
        """Process ids in the cgroup now."""
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def usage_bytes(self) -> int | None:
        """Current charge (page cache included) in bytes."""
        fname = "memory.current" if self.version == 2 else "memory.usage_in_bytes"
        try:
            return int((self.path / fname).read_text())
        except (OSError, ValueError):
            return None

    def oom_kills(self) -> int:
        """OOM kills inside the cgroup so far (v2 memory.events oom_kill; v1 memory.oom_control)."""
        fname = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            for line in (self.path / fname).read_text().splitlines():
                key, _, val = line.partition(" ")
                if key == "oom_kill":
                    return int(val)
        except (OSError, ValueError):
            pass
        return 0

    def remove(self) -> None:
        """Remove the cgroup (it must be empty); logs and carries on when processes remain."""
        try:
            self.path.rmdir()
        except OSError as exc:
            log.warning("cgroup.remove_failed", path=str(self.path), error=exc.strerror, pids=self.pids())
