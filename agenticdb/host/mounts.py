"""The mount table as the kernel gives it (/proc/<pid>/mountinfo, proc(5)): one row per mount, and the mount
that holds a path. Shared by the hardware description (cgroup mounts, the data disk) and the storage probe
(the data directory's filesystem type)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple


class Mount(NamedTuple):
    """One line of mountinfo (proc(5)): ``devno`` "major:minor", ``root`` the mount's root inside its
    filesystem, ``point`` the mount point (octal ``\\040`` read back as a space), ``fstype`` ("ext4",
    "tmpfs", "cgroup2" …), ``source`` ("/dev/vda"), ``options`` the superblock options."""

    devno: str
    root: str
    point: str
    fstype: str
    source: str
    options: str


def mountinfo(proc: str = "/proc") -> list[Mount]:
    """Every mount of <proc>/self/mountinfo, in its order; [] when unreadable."""
    rows: list[Mount] = []
    try:
        text = Path(f"{proc}/self/mountinfo").read_text()
    except OSError:
        return rows
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        f, r = left.split(), right.split()
        if len(f) >= 5 and len(r) >= 2:
            rows.append(Mount(f[2], f[3], f[4].replace("\\040", " "), r[0], r[1], r[-1]))
    return rows


def mount_of(path: str, proc: str = "/proc") -> Mount | None:
    """The mount holding ``path`` (symlinks resolved): the one with the longest mount point containing it;
    None when the mount table is unreadable."""
    real = os.path.realpath(path)
    best: Mount | None = None
    for m in mountinfo(proc):
        if real == m.point or real.startswith(m.point.rstrip("/") + "/") or m.point == "/":
            if best is None or len(m.point) > len(best.point):
                best = m
    return best
