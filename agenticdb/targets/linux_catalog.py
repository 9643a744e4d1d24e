"""Linux parameter metadata (``catalogs/linux.toml``) and discovery of the disks holding the data directory.

The catalog file gives each sysctl, block-queue and THP parameter its type, unit, range, path, reason and
source; exclusive pairs (vm.dirty_ratio / vm.dirty_bytes …) are written as one knob (kernel vm.rst).
Device discovery follows proc(5) (``/proc/self/mountinfo``) and the sysfs block layout.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import structlog
from pydantic import BaseModel, ConfigDict, Field

from agenticdb.resources import data_file

log = structlog.get_logger(__name__)


# ----------------------------------------------------------------------------------------- catalog data


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ParamDef(_Entry):
    """One entry of ``[params."<name>"]`` in catalogs/linux.toml (``{dev}`` in block names and paths)."""

    type: str = Field(pattern="^(integer|enum)$")
    unit: str | None = None
    min: int | None = None
    max: int | None = None
    max_from: str | None = None
    enum_from_file: bool = False
    default: str | None = None
    path: str
    category: str
    affects: str
    reason: str
    source: str
    unsupported_on: str | None = None
    scheduler: str | None = None


class ExclusivePair(_Entry):
    """``[[exclusive_pairs]]``: writing one member makes the kernel zero the other."""

    members: tuple[str, str]
    reason: str
    source: str


class LinuxCatalogData(_Entry):
    """catalogs/linux.toml as validated data."""

    meta: dict[str, str]
    exclusive_pairs: list[ExclusivePair]
    params: dict[str, ParamDef]

    def pair_of(self, name: str) -> ExclusivePair | None:
        """The exclusive pair ``name`` belongs to, or None."""
        return next((p for p in self.exclusive_pairs if name in p.members), None)


def load_linux_catalog(path: Path | None = None) -> LinuxCatalogData:
    """Load and validate catalogs/linux.toml (or ``path``).

    Raises:
        FileNotFoundError: the file is missing.
        pydantic.ValidationError: an entry lacks a field or has an unknown one (names the entry).
        ValueError: an exclusive pair names a parameter the catalog does not define.
    """
    path = path or data_file("catalogs", "linux.toml")
    with path.open("rb") as fh:
        data = LinuxCatalogData.model_validate(tomllib.load(fh))
    for pair in data.exclusive_pairs:
        for member in pair.members:
            if member not in data.params:
                raise ValueError(f"{path}: exclusive pair member {member!r} is not a catalog parameter")
    return data


# ------------------------------------------------------------------------------------- device discovery


def _mount_of(root: Path, data_dir: str) -> tuple[str, str] | None:
    """(major:minor, mount source) of the mount holding ``data_dir`` from <root>/proc/self/mountinfo.

    Fields per proc(5): id, parent, major:minor, root, mount point, options, …, "-", fstype, source.
    """
    try:
        text = (root / "proc/self/mountinfo").read_text()
    except OSError:
        return None
    target = os.path.realpath(data_dir)
    best: tuple[int, str, str] | None = None
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 5 or "-" not in parts:
            continue
        mount_point = parts[4].replace("\\040", " ")
        inside = target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
        if inside and (best is None or len(mount_point) >= best[0]):
            tail = parts[parts.index("-") + 1 :]
            best = (len(mount_point), parts[2], tail[1] if len(tail) > 1 else "")
    return (best[1], best[2]) if best else None


def _block_by_devnum(root: Path, majmin: str) -> str | None:
    base = root / "sys/class/block"
    if not base.is_dir():
        return None
    for entry in sorted(base.iterdir()):
        try:
            if (entry / "dev").read_text().strip() == majmin:
                return entry.name
        except OSError:
            continue
    return None


def _parent_disks(root: Path, name: str) -> list[str]:
    """Whole disks under block device ``name``: a partition's parent, a dm/md device's slaves."""
    node = root / "sys/class/block" / name
    if (node / "partition").exists():
        return [node.resolve().parent.name]
    slaves = node / "slaves"
    if slaves.is_dir() and any(slaves.iterdir()):
        found: list[str] = []
        for slave in sorted(slaves.iterdir()):
            found += [d for d in _parent_disks(root, slave.name) if d not in found]
        return found
    return [name]


def physical_disks(root: Path = Path("/")) -> list[str]:
    """Block devices under <root>/sys/block that are not virtual (loop, zram, ram are skipped)."""
    base = root / "sys/block"
    if not base.is_dir():
        return []
    return sorted(e.name for e in base.iterdir() if "/devices/virtual/" not in str(e.resolve()))


def data_devices(root: Path = Path("/"), data_dir: str | None = None) -> list[str]:
    """The disk(s) holding ``data_dir``, else all non-virtual disks.

    Resolution: the longest mount point containing ``data_dir`` in /proc/self/mountinfo gives
    major:minor (or a /dev source for filesystems with anonymous device numbers); /sys/class/block maps
    it to a device name, a partition to its parent disk, a device-mapper/md device to its slaves' disks.
    """
    if data_dir:
        mount = _mount_of(root, data_dir)
        if mount:
            majmin, source = mount
            name = _block_by_devnum(root, majmin)
            if name is None and source.startswith("/dev/"):
                candidate = Path(source).name
                name = candidate if (root / "sys/class/block" / candidate).exists() else None
            if name:
                return _parent_disks(root, name)
        log.info("linux.data_device_unknown", data_dir=data_dir, reason="no block device for its mount")
    return physical_disks(root)
