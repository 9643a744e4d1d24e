"""Resources of the host as the DBMS sees them: cores, RAM, the cgroup memory limit, the data disk.

The memory budget must use the lower of RAM and the cgroup limit: a container that sees 24 GiB of RAM
but may use 2 GiB aborts the buffer pool allocation with errno 12 (docker-library/mysql issue 248).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import psutil
import structlog

from agenticdb.host.listen import listen_backlog
from agenticdb.host.mounts import mount_of, mountinfo
from agenticdb.host.storage_probe import StorageProbe, measured_storage
from agenticdb.models import Hardware

log = structlog.get_logger(__name__)

# cgroup v1 reports "no limit" as a page-rounded 2^63-1; anything this large is unlimited.
_UNLIMITED = 1 << 60


def detect_hardware(
    data_dir: str | None,
    *,
    proc: str = "/proc",
    sys: str = "/sys",
    pid: int | None = None,
    measure_storage: bool = True,
) -> Hardware:
    """Describe this host: CPU count, RAM, the server's cgroup memory limit and the data dir's disk.

    Args:
        data_dir: the DBMS data directory (None: disk fields stay 0, device None).
        proc, sys: roots of procfs and sysfs (tests point them at a copied tree).
        pid: the database server's process id; its cgroup's limit is what the server may use (a server
            in a container or a memory-limited unit). None: our own cgroup.
        measure_storage: time random reads of the data dir's largest relation file for the storage class
            (``host.storage_probe.measured_storage``: once per process and directory, ≤ 2 s, 512 kB read);
            False for callers that need only the device (the probe then does not run).

    Returns:
        Hardware with sizes in bytes; ``memory_limit_bytes = min(RAM, cgroup limit)``;
        ``committed_as_bytes``/``swap_bytes``/``commit_limit_bytes`` from /proc/meminfo; NUMA nodes,
        huge page sizes, host-wide file handles and AIO contexts; the server's stack and open-files
        rlimits from /proc/<pid>/limits (ours when ``pid`` is None or unreadable); the accept-queue limit
        of the server's listening TCP sockets (None without ``pid``); ``storage_measured`` and
        ``storage_probe`` from the probe.
    """
    ram = int(psutil.virtual_memory().total)
    cgroup = cgroup_memory_limit(proc=proc, pid=pid)
    meminfo = read_meminfo(f"{proc}/meminfo")
    disk_total = disk_free = 0
    device = None
    if data_dir:
        usage = psutil.disk_usage(data_dir)
        disk_total, disk_free = int(usage.total), int(usage.free)
        device = block_device_of(data_dir, proc=proc, sys=sys)
    probe = measured_storage(data_dir, proc=proc) if data_dir and measure_storage else None
    hw = Hardware(
        cpu_count=psutil.cpu_count(logical=True) or 1,
        memory_bytes=ram,
        memory_limit_bytes=min(ram, cgroup) if cgroup else ram,
        cgroup_memory_limit_bytes=cgroup,
        disk_total_bytes=disk_total,
        disk_free_bytes=disk_free,
        data_dir=data_dir,
        data_device=device,
        storage_measured=_storage_class(probe),
        storage_probe=probe.source if probe else "",
        swap_bytes=meminfo.get("SwapTotal", 0),
        committed_as_bytes=meminfo.get("Committed_AS"),
        commit_limit_bytes=meminfo.get("CommitLimit"),
        huge_pages_bytes=(
            meminfo["HugePages_Total"] * meminfo.get("Hugepagesize", 0) if "HugePages_Total" in meminfo else None
        ),
        huge_page_sizes_bytes=huge_page_sizes(sys=sys),
        numa_nodes=numa_nodes(sys=sys),
        file_handles_allocated=_first_int(f"{proc}/sys/fs/file-nr"),
        aio_requests=_first_int(f"{proc}/sys/fs/aio-nr"),
        listen_backlog=listen_backlog(pid, proc=proc),
        **server_rlimits(proc=proc, pid=pid),
    )
    log.info("hardware.detected", cpus=hw.cpu_count, ram=ram, cgroup_limit=cgroup, device=device)
    if probe is not None:
        log.info("hardware.storage_measured", device=device, storage=probe.storage_class, reason=probe.source)
    return hw


def _storage_class(probe: StorageProbe | None) -> str | None:
    """Hardware's ``storage_measured`` of ``probe``: its class, None for no probe or "unknown"."""
    return None if probe is None or probe.storage_class == "unknown" else probe.storage_class


def storage_after_load(hw: Hardware, proc: str = "/proc") -> Hardware:
    """``hw`` with the storage class measured again when the first probe had no relation file large enough to
    read (a fresh sandbox profiled before its workload's data load: ``measured_storage`` does not keep an
    "unknown", and the loaded tables' files are there now). Unchanged when a class is known or there is no
    data dir; a second "unknown" keeps the fallback to the kernel's rotational flag (``storage_choice``)."""
    if hw.storage_measured is not None or not hw.data_dir:
        return hw
    probe = measured_storage(hw.data_dir, proc=proc)
    log.info("hardware.storage_measured", device=hw.data_device, storage=probe.storage_class, reason=probe.source)
    return hw.model_copy(update={"storage_measured": _storage_class(probe), "storage_probe": probe.source})


def _first_int(path: str) -> int | None:
    try:
        return int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def numa_nodes(*, sys: str = "/sys") -> int:
    """Online NUMA nodes from /sys/devices/system/node/online ("0", "0-1", "0,2-3"); 1 when unknown."""
    try:
        text = Path(f"{sys}/devices/system/node/online").read_text().strip()
    except OSError:
        return 1
    count = 0
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        count += (int(hi) - int(lo) + 1) if hi else 1
    return max(count, 1)


def huge_page_sizes(*, sys: str = "/sys") -> list[int]:
    """Huge page sizes in bytes the kernel supports (/sys/kernel/mm/hugepages/hugepages-<N>kB)."""
    try:
        entries = list(Path(f"{sys}/kernel/mm/hugepages").iterdir())
    except OSError:
        return []
    sizes = []
    for entry in entries:
        m = re.fullmatch(r"hugepages-(\d+)kB", entry.name)
        if m:
            sizes.append(int(m.group(1)) * 1024)
    return sorted(sizes)


_LIMIT_FIELDS = {"Max stack size": "stack", "Max open files": "nofile"}


def server_rlimits(*, proc: str = "/proc", pid: int | None = None) -> dict[str, int | None]:
    """The server process's soft RLIMIT_STACK (bytes) and soft/hard RLIMIT_NOFILE from /proc/<pid>/limits
    (proc(5)); "unlimited" and unreadable values are None. Keys are Hardware fields."""
    out: dict[str, int | None] = {"stack_limit_bytes": None, "open_files_soft": None, "open_files_hard": None}
    try:
        text = Path(f"{proc}/{pid if pid else 'self'}/limits").read_text()
    except OSError:
        return out if pid is None else server_rlimits(proc=proc)
    for line in text.splitlines():
        for label, key in _LIMIT_FIELDS.items():
            if not line.startswith(label):
                continue
            soft, hard = (line[len(label) :].split() + ["", ""])[:2]
            if key == "stack":
                out["stack_limit_bytes"] = int(soft) if soft.isdigit() else None
            else:
                out["open_files_soft"] = int(soft) if soft.isdigit() else None
                out["open_files_hard"] = int(hard) if hard.isdigit() else None
    return out


def read_meminfo(path: str = "/proc/meminfo") -> dict[str, int]:
    """/proc/meminfo as bytes by field name ("MemTotal", "Committed_AS", …); {} when unreadable."""
    out: dict[str, int] = {}
    try:
        text = Path(path).read_text()
    except OSError:
        return out
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[name.strip()] = int(parts[0]) * (1024 if len(parts) > 1 and parts[1] == "kB" else 1)
    return out


def cgroup_memory_limit(*, proc: str = "/proc", pid: int | None = None) -> int | None:
    """Memory limit in bytes of the cgroup of ``pid`` (default: ours), the tightest along the path to the
    hierarchy root. A ``pid`` that cannot be read falls back to our own cgroup.

    cgroup v2: ``memory.max`` ("max" = none); v1: ``memory.limit_in_bytes`` (kernel
    Documentation/admin-guide/cgroup-v2.rst and cgroup-v1/memory.rst). Returns None when unlimited or
    unreadable.
    """
    try:
        lines = Path(f"{proc}/{pid if pid else 'self'}/cgroup").read_text().splitlines()
    except OSError:
        if pid is None:
            return None
        return cgroup_memory_limit(proc=proc)
    mounts = mountinfo(proc)
    limits: list[int] = []
    for line in lines:
        hid, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if hid == "0" and controllers == "":
            cands = [(m[1], m[2]) for m in mounts if m[3] == "cgroup2"]
            fname = "memory.max"
        elif "memory" in controllers.split(","):
            cands = [(m[1], m[2]) for m in mounts if m[3] == "cgroup" and "memory" in m[5].split(",")]
            fname = "memory.limit_in_bytes"
        else:
            continue
        for root, mnt in cands:
            rel = os.path.relpath(path, root) if path.startswith(root) else path.lstrip("/")
            limits.extend(_walk_limits(Path(mnt), rel, fname))
    limits = [x for x in limits if 0 < x < _UNLIMITED]
    return min(limits) if limits else None


def memory_events_file(pid: int, proc: str = "/proc") -> Path | None:
    """The file counting OOM kills in the memory cgroup of ``pid``: v2 ``memory.events``, v1
    ``memory.oom_control`` (both have an ``oom_kill N`` line; kernel cgroup-v2.rst, cgroup-v1/memory.rst
    since 4.13). None when the process or its memory cgroup cannot be found."""
    try:
        lines = Path(f"{proc}/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    mounts = mountinfo(proc)
    for line in lines:
        hid, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if hid == "0" and controllers == "":
            cands, fname = [(m[1], m[2]) for m in mounts if m[3] == "cgroup2"], "memory.events"
        elif "memory" in controllers.split(","):
            cands = [(m[1], m[2]) for m in mounts if m[3] == "cgroup" and "memory" in m[5].split(",")]
            fname = "memory.oom_control"
        else:
            continue
        for root, mnt in cands:
            rel = os.path.relpath(path, root) if path.startswith(root) else path.lstrip("/")
            f = Path(mnt) / rel / fname
            if f.exists():
                return f
    return None


def _walk_limits(mnt: Path, rel: str, fname: str) -> list[int]:
    found = []
    parts = [] if rel in (".", "") else rel.split("/")
    for i in range(len(parts), -1, -1):
        f = mnt.joinpath(*parts[:i]) / fname
        try:
            text = f.read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            found.append(int(text))
    return found


def block_device_of(path: str, *, proc: str = "/proc", sys: str = "/sys") -> str | None:
    """Name of the whole-disk block device holding ``path`` ("vda" for /dev/vda1), or None.

    Finds the mount with the longest mount point that contains ``path`` in mountinfo, takes its
    major:minor, and resolves it through /sys/class/block (a partition's parent directory is its disk).
    """
    mount = mount_of(path, proc)
    if mount is None:
        return None
    cls = Path(sys) / "class" / "block"
    try:
        entries = list(cls.iterdir())
    except OSError:
        return None
    for entry in entries:
        try:
            if (entry / "dev").read_text().strip() != mount.devno:
                continue
        except OSError:
            continue
        if (entry / "partition").exists():
            return Path(os.path.realpath(entry)).parent.name
        return entry.name
    return None
