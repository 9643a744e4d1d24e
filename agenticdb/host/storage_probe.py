"""The data device's storage class measured from the device (issue 36): timed random 8 kB O_DIRECT reads of a
relation data file in the server's data directory (:func:`is_relation_file`).

Why: the kernel's flag /sys/block/<dev>/queue/rotational says what the driver or hypervisor declares, not what
the device does. This VM's virtio disk vda says rotational = 1, yet a random 8 kB O_DIRECT read of a file on it
takes 0.07 ms median on a quiet host, 0.18–0.46 ms from a cgroup capped at one CPU beside a benchmark (a
flash-backed or host-cached virtual disk); read from the flag, the opening sized effective_io_concurrency 2 and
random_page_cost 4, as for a spinning disk.

Classification (:func:`classify`, on the median latency of the reads):

- A rotating disk cannot serve a random read faster than its rotational latency plus the seek. The head waits
  on average (and at the median, the sector's position being uniform) half a revolution: 60 s / 7200 / 2 =
  4.17 ms at 7200 rpm, 60 s / 15000 / 2 = 2 ms at 15 000 rpm; seeks add from ~0.2 ms (track to track) to
  several ms. A median of random reads at or below 1 ms is therefore no rotating disk: at most an eighth of a
  7200 rpm disk's and a quarter of a 15k rpm disk's random reads wait less than 1 ms for the platter.
- Flash serves a random 4–8 kB read at queue depth 1 in ~0.1 ms (a NAND page read takes tens of µs, plus the
  controller and the kernel's block layer).

So median ≤ :data:`SSD_MAX_MS` (1 ms) → "ssd"; ≥ :data:`HDD_MIN_MS` (3 ms, 30× a flash read, above a 15k rpm
disk's 2 ms rotational latency) → "hdd"; between (a 15k rpm disk with short seeks, a busy flash device,
network storage) → "unknown", and the caller keeps the kernel's flag and says so (:func:`storage_choice`).

Load only ever slows a read, so the evidence is one-sided: a fast median is flash whatever else runs, a slow one
may be flash behind another workload's I/O. Each latency is the read's wall time less this thread's wait for a
CPU (schedstat), a pass that is not "ssd" is repeated once and the faster pass counts, and a measured "hdd"
does not overrule a kernel flag that says flash (:func:`storage_choice`).

NVMe is not told by latency: at queue depth 1 a SATA and an NVMe flash device both take ~0.1 ms per random read
(the NAND read dominates); they differ in how many reads they serve at once (SATA NCQ: one queue of 32
commands; NVMe: up to 65 535 I/O queues of up to 65 536 commands, NVM Express Base Specification), which a
probe at depth 1 does not measure. "nvme" comes from the device's name, as before (a measured "ssd" on an
nvme* device is "nvme").

Limits, said here rather than hidden: a virtual disk the hypervisor caches in its RAM measures as flash — which
is what the guest's random reads cost, so what the planner's costs should say; a spinning disk's own read cache
may serve a small file's blocks after the first reads (the largest relation data file is read to make that
unlikely, and never a WAL segment or redo log: those were just written, so a disk's write cache may still hold
them, and a user's trial found a fresh sandbox's probe reading pg_wal/000000010000000000000001 before the
workload's data was loaded);
filesystems that ignore O_DIRECT and serve from their own cache (ZFS before 2.3) measure memory; a latency says
what one read costs, not how many may be in flight (network block storage at several ms measures "hdd", which
counts only where the kernel's flag does not say flash).
"""

from __future__ import annotations

import errno
import math
import mmap
import os
import random
import re
import stat
import statistics
import time
from dataclasses import dataclass

from agenticdb.host.mounts import mount_of

#: The read size in bytes: PostgreSQL's page (BLCKSZ 8192, the default build) and a multiple of every
#: logical block size O_DIRECT requires alignment to (512 or 4096 bytes; open(2), "O_DIRECT").
READ_BYTES = 8192
#: The smallest file read, in bytes (8 MiB = 1024 pages to choose random ones from).
MIN_FILE_BYTES = 8 * 1024**2
#: A median at or below this (ms) is flash: no rotating disk serves random reads this fast (module docstring).
SSD_MAX_MS = 1.0
#: A median at or above this (ms) is a spinning disk (module docstring).
HDD_MIN_MS = 3.0
#: Fewer timed reads than this give no class.
MIN_READS = 16
#: Seconds between two passes of :func:`probe_storage`.
PASS_PAUSE_S = 0.5
#: Directory entries looked at, at most, when choosing the file (a data directory of many relations).
MAX_ENTRIES = 20_000
#: Filesystems in memory: nothing on a device to measure (this host's Linux 6.18 accepts O_DIRECT on tmpfs).
MEMORY_FILESYSTEMS = frozenset({"tmpfs", "ramfs", "devtmpfs", "hugetlbfs"})


#: A PostgreSQL relation's main-fork segment: base/<database oid>/<relfilenode>[.<segment>] (PostgreSQL docs
#: "Database File Layout"; the _fsm, _vm and _init forks are small and not matched).
_PG_RELATION = re.compile(r"(^|/)base/\d+/\d+(\.\d+)?$")


def is_relation_file(relpath: str) -> bool:
    """Whether ``relpath`` (relative to the data directory, "/"-separated) holds table or index pages: a
    PostgreSQL main-fork segment under base/<dboid>/ or an InnoDB file-per-table tablespace (``*.ibd``, MariaDB
    KB "InnoDB File-Per-Table Tablespaces"). WAL segments (pg_wal/), redo logs (ib_logfile*), the InnoDB
    system tablespace (ibdata*) and everything else are not. Pure function."""
    return bool(_PG_RELATION.search(relpath)) or relpath.endswith(".ibd")


@dataclass(frozen=True)
class StorageProbe:
    """What :func:`probe_storage` measured.

    Attributes:
        storage_class: "ssd", "hdd" or "unknown" (never "nvme": see the module docstring).
        median_ms: the median latency of the timed reads in ms (None: none done).
        p90_ms: their 90th percentile in ms (None: fewer than 2).
        reads: timed reads done.
        file: the file read (None: none chosen).
        source: one line — the figures and the file, or why there is no class.
    """

    storage_class: str
    median_ms: float | None
    p90_ms: float | None
    reads: int
    file: str | None
    source: str


def classify(latencies_ms: list[float], min_reads: int = MIN_READS) -> tuple[str, str]:
    """The class of random-read latencies in ms and why: ``("ssd" | "hdd" | "unknown", reason)``.

    Pure function; thresholds :data:`SSD_MAX_MS`, :data:`HDD_MIN_MS` and their sources in the module docstring.
    Fewer than ``min_reads`` latencies give "unknown".
    """
    if len(latencies_ms) < min_reads:
        return "unknown", f"{len(latencies_ms)} reads, fewer than the {min_reads} a class needs"
    median = statistics.median(latencies_ms)
    if median <= SSD_MAX_MS:
        return "ssd", f"median {median:.3g} ms ≤ {SSD_MAX_MS:g} ms: faster than any rotating disk's random read"
    if median >= HDD_MIN_MS:
        return "hdd", f"median {median:.3g} ms ≥ {HDD_MIN_MS:g} ms: a rotating disk's seek and rotational latency"
    return "unknown", f"median {median:.3g} ms between {SSD_MAX_MS:g} and {HDD_MIN_MS:g} ms: neither class"


def pick_file(
    directory: str, min_bytes: int = MIN_FILE_BYTES, max_entries: int = MAX_ENTRIES
) -> tuple[str | None, str]:
    """The largest readable relation data file (:func:`is_relation_file`) of at least ``min_bytes`` under
    ``directory`` on its filesystem, and why none when there is none: ``(path, "")`` or ``(None, reason)``;
    the reason names the largest relation file seen and says the workload's data may not be loaded yet.

    Symlinks are not followed (a PostgreSQL tablespace may sit on another device) and files of another
    filesystem are skipped. A sparse file (allocated < 90 % of its size) is skipped: a hole is read without the
    device. At most ``max_entries`` files are looked at. Nothing is written.
    """
    try:
        root_dev = os.stat(directory).st_dev
    except OSError as exc:
        return None, f"cannot read {directory}: {exc.strerror}"
    best: tuple[str, int] | None = None
    seen = 0
    largest = 0  # bytes of the largest relation file seen, whatever its size
    for dirpath, _dirs, files in os.walk(directory):
        for name in files:
            seen += 1
            path = os.path.join(dirpath, name)
            if not is_relation_file(os.path.relpath(path, directory).replace(os.sep, "/")):
                continue
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode) or st.st_dev != root_dev:
                continue
            largest = max(largest, st.st_size)
            if st.st_size < min_bytes:
                continue
            if st.st_blocks * 512 < 0.9 * st.st_size or not os.access(path, os.R_OK):
                continue
            if best is None or st.st_size > best[1]:
                best = (path, st.st_size)
        if seen >= max_entries:
            break
    if best is None:
        most = f"the largest {largest / 1024**2:.1f} MiB" if largest else "none found"
        return None, (
            f"no readable relation data file of ≥ {min_bytes // 1024**2} MiB in {directory} (PostgreSQL "
            f"base/<db>/<relfilenode>, InnoDB *.ibd; {most}, {seen} files looked at): the workload's data may "
            "not be loaded yet"
        )
    return best[0], ""


def _open_direct(path: str) -> int:
    """``path`` opened read-only with O_DIRECT, with O_NOATIME when allowed (no access-time write: the
    caller must own the file or hold CAP_FOWNER, open(2))."""
    flags = os.O_RDONLY | os.O_DIRECT
    try:
        return os.open(path, flags | os.O_NOATIME)
    except PermissionError:
        return os.open(path, flags)


def _open_cpu_wait(proc: str) -> int | None:
    """An open descriptor of /proc/thread-self/schedstat for :func:`_cpu_wait_ns`, None when unreadable."""
    try:
        fd = os.open(f"{proc}/thread-self/schedstat", os.O_RDONLY)
    except OSError:
        return None
    if _cpu_wait_ns(fd) is None:
        os.close(fd)
        return None
    return fd


def _cpu_wait_ns(fd: int | None) -> int | None:
    """This thread's time spent runnable but waiting for a CPU, in ns: the second field of
    /proc/thread-self/schedstat (``run_delay``; kernel Documentation/scheduler/sched-stats.rst), None when
    unreadable. A read's wall time on a busy host includes that wait after the I/O completes, which is no part
    of the device's latency."""
    if fd is None:
        return None
    try:
        return int(os.pread(fd, 128, 0).split()[1])
    except (OSError, ValueError, IndexError):
        return None


def time_reads(path: str, reads: int, cap_s: float, proc: str = "/proc") -> tuple[list[float], bool]:
    """Latencies in ms of up to ``reads`` random 8 kB-aligned O_DIRECT reads of ``path`` (distinct pages, in
    random order), stopping when ``cap_s`` seconds of wall time are used; and whether the CPU wait was taken
    out of them (each is the read's wall time less the thread's runqueue wait during it, :func:`_cpu_wait_ns`;
    False: wall time, schedstat unreadable).

    Raises:
        OSError: the file cannot be opened with O_DIRECT, or a read fails (EINVAL: O_DIRECT refused).
    """
    pages = os.stat(path).st_size // READ_BYTES
    order = random.sample(range(pages), min(reads, pages))
    buf = mmap.mmap(-1, READ_BYTES)  # page-aligned: O_DIRECT needs an aligned buffer (open(2))
    fd = _open_direct(path)
    sched = _open_cpu_wait(proc)
    out: list[float] = []
    try:
        start = time.monotonic()
        for page in order:
            if time.monotonic() - start >= cap_s:
                break
            t0 = time.perf_counter_ns()
            w0 = _cpu_wait_ns(sched)
            got = os.preadv(fd, [buf], page * READ_BYTES)
            w1 = _cpu_wait_ns(sched)
            took = time.perf_counter_ns() - t0 - (w1 - w0 if w0 is not None and w1 is not None else 0)
            if got < READ_BYTES:
                break  # the file shrank under us
            out.append(max(took, 0) / 1e6)
    finally:
        if sched is not None:
            os.close(sched)
        os.close(fd)
        buf.close()
    return out, sched is not None


def probe_storage(
    directory: str, reads: int = 64, cap_s: float = 2.0, proc: str = "/proc", passes: int = 2
) -> StorageProbe:
    """Measure the storage class of the device under ``directory`` (the server's data directory).

    Args:
        directory: the directory whose largest relation data file (:func:`pick_file`) is read; never written.
        reads: timed random 8 kB reads per pass (default 64; 64 × 8 kB = 512 kB read).
        cap_s: wall-time cap of one pass in seconds (default 2: 64 reads of a 7200 rpm disk take ~0.8 s).
        proc: procfs root (/proc/self/mountinfo for the filesystem type, schedstat for the CPU wait).
        passes: passes at most; another is made, after :data:`PASS_PAUSE_S`, only while no pass classed
            "ssd", and the pass with the lower median counts. Load only ever slows reads (a device's queue
            behind other I/O, CPU throttling): measured here in a 1-CPU-capped cgroup beside a benchmark, 1 of
            20 single passes had a median of 4.5 ms on a disk whose other passes had 0.18–0.41 ms.

    Returns:
        A :class:`StorageProbe`; "unknown" with why for a memory filesystem, no file to read, O_DIRECT refused
        or a read error, too few reads in ``cap_s``, or a median between the classes. Never raises.
    """
    mount = mount_of(directory, proc)
    if mount is not None and mount.fstype in MEMORY_FILESYSTEMS:
        why = f"{directory} is on {mount.fstype} (memory, no device to measure)"
        return StorageProbe("unknown", None, None, 0, None, why)
    path, why = pick_file(directory)
    if path is None:
        return StorageProbe("unknown", None, None, 0, None, why)
    made: list[list[float]] = []
    try:
        for n in range(max(passes, 1)):
            if n:
                time.sleep(PASS_PAUSE_S)
            lat, corrected = time_reads(path, reads, cap_s, proc)
            made.append(lat)
            if classify(lat)[0] == "ssd":
                break
    except OSError as exc:
        what = "O_DIRECT refused" if exc.errno == errno.EINVAL else "cannot read it"
        return StorageProbe("unknown", None, None, 0, path, f"{what} for {path}: {exc.strerror}")
    lat = min(made, key=lambda x: statistics.median(x) if x else math.inf)
    cls, reason = classify(lat)
    median = statistics.median(lat) if lat else None
    p90 = statistics.quantiles(lat, n=10)[-1] if len(lat) >= 2 else None
    how = ("CPU wait excluded" if corrected else "wall time") + (
        f", the faster of {len(made)} passes" * (len(made) > 1)
    )
    figures = (
        f"median {median:.3g} ms random 8 kB O_DIRECT read of {path} (p90 {p90:.3g} ms, {len(lat)} reads, {how})"
        if median is not None and p90 is not None
        else f"{len(lat)} reads of {path}"
    )
    return StorageProbe(cls, median, p90, len(lat), path, figures if cls != "unknown" else f"{figures}: {reason}")


_KNOWN: dict[str, StorageProbe] = {}


def measured_storage(directory: str, proc: str = "/proc") -> StorageProbe:
    """:func:`probe_storage` of ``directory``, once per process: a known class is kept (the device under a
    running server does not change, and the probe's reads stay out of later measured runs); an "unknown" is
    measured again on the next call (the directory may only later hold a relation file large enough: the
    workload's data loaded after the first call)."""
    key = os.path.realpath(directory)
    if key in _KNOWN:
        return _KNOWN[key]
    probe = probe_storage(directory, proc=proc)
    if probe.storage_class != "unknown":
        _KNOWN[key] = probe
    return probe


def storage_choice(measured: str | None, probe: str, flag_class: str, device: str | None) -> tuple[str, str]:
    """The storage class the opening sizes from and its source text: ``(class, "storage <class> …")``.

    Args:
        measured: the probe's class ("ssd" | "hdd"), None when it gave none.
        probe: the probe's line (figures and file, or why no class); "" when it did not run.
        flag_class: the class from /sys/block/<dev>/queue/rotational (``store.memory.backends.storage_class``):
            "nvme" | "ssd" | "hdd" | "unknown".
        device: the data device's name (None: unknown).

    A measured "ssd" wins (load never makes a rotating disk fast), and stays "nvme" on a device the flag path
    calls "nvme" (latency cannot tell them apart). A measured "hdd" wins only over a flag that says "hdd" or
    nothing: against a flag that says flash it may be flash under load (another workload's I/O queued ahead,
    throttled CPU — the probe's passes lower that chance, not to nil), and taking flash for a spinning disk
    costs less than the reverse, so the flag is kept and the text says both. Without a measured class the
    flag's class is used, and the text says why. Pure function.
    """
    flag_src = f"/sys/block/{device}/queue/rotational" if device else "no data device found"
    if measured == "ssd" and flag_class == "nvme":
        return "nvme", f"storage nvme measured: {probe}; nvme from the device name {device} (latency alone cannot tell)"
    if measured == "ssd" or (measured == "hdd" and flag_class in ("hdd", "unknown")):
        text = f"storage {measured} measured: {probe}"
        if flag_class not in (measured, "unknown"):
            text += f"; the kernel's flag says {flag_class} ({flag_src})"
        return measured, text
    text = f"storage {flag_class} ({flag_src})"
    if measured == "hdd":
        return flag_class, (
            f"{text}, kept over a measured hdd ({probe}): flash under load reads slowly too, and a disk never fast"
        )
    return flag_class, text + (f"; no class measured: {probe}" if probe else "")
