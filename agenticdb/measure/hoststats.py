"""Host runtime statistics for the OS stage: CPU times, /proc/vmstat, /proc/diskstats, PSI, meminfo.

All files are read under a root path (default ``/``) so logic tests can point at a fake tree. Names are
namespaced so they never collide with the DBMS targets' states (which the executor merges with these):

- counters (monotonic): ``host.cpu_<user|nice|system|idle|iowait|irq|softirq|steal>`` in seconds,
  ``vmstat.<name>`` for event counts, ``diskstats.<dev>.<field>`` (I/O counts, 512-byte sectors, ms),
  ``psi.<cpu|io|memory>.<some|full>_total_us`` (µs of stall time);
- gauges (point in time): ``vmstat.nr_*`` page counts (nr_dirty, nr_writeback, …),
  ``diskstats.<dev>.in_flight``, ``host.mem_available_bytes``, ``host.committed_as_bytes``,
  ``host.commit_limit_bytes``, ``host.mem_total_bytes``, ``host.dirty_bytes``, ``host.writeback_bytes``,
  ``psi.<res>.<some|full>_avg10`` (percent).

Sources: proc(5) (/proc/stat, /proc/meminfo, /proc/vmstat), Documentation/admin-guide/iostats.rst
(/proc/diskstats fields), Documentation/accounting/psi.rst (/proc/pressure).
"""

from __future__ import annotations

import os
from pathlib import Path

import structlog

from agenticdb.models import RuntimeState, StateDelta

log = structlog.get_logger(__name__)

# /proc/stat "cpu" line columns, in USER_HZ ticks (proc(5)).
_CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")

# /proc/diskstats columns after "major minor name" (Documentation/admin-guide/iostats.rst, fields 1-11).
_DISK_FIELDS = (
    "reads",
    "reads_merged",
    "sectors_read",
    "time_reading_ms",
    "writes",
    "writes_merged",
    "sectors_written",
    "time_writing_ms",
    "in_flight",
    "io_ticks_ms",
    "weighted_ms",
)

# nr_* entries of /proc/vmstat are current page counts (gauges) except these cumulative ones
# (mm/vmstat.c: nr_dirtied / nr_written count events since boot).
_VMSTAT_CUMULATIVE_NR = frozenset({"nr_dirtied", "nr_written", "nr_foll_pin_acquired", "nr_foll_pin_released"})

# /proc/meminfo keys (kB) reported as gauges in bytes.
_MEMINFO_GAUGES = {
    "MemTotal": "host.mem_total_bytes",
    "MemAvailable": "host.mem_available_bytes",
    "Committed_AS": "host.committed_as_bytes",
    "CommitLimit": "host.commit_limit_bytes",
    "Dirty": "host.dirty_bytes",
    "Writeback": "host.writeback_bytes",
}

PSI_RESOURCES = ("cpu", "io", "memory")


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError as exc:
        log.debug("hoststats.unreadable", path=str(path), error=exc.strerror)
        return None


def _cpu(root: Path, counters: dict[str, float]) -> None:
    text = _read(root / "proc/stat")
    if text is None:
        return
    hz = os.sysconf("SC_CLK_TCK")
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            for name, ticks in zip(_CPU_FIELDS, parts[1:], strict=False):
                counters[f"host.cpu_{name}"] = int(ticks) / hz
            return


def _meminfo(root: Path, gauges: dict[str, float]) -> None:
    text = _read(root / "proc/meminfo")
    if text is None:
        return
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in _MEMINFO_GAUGES:
            gauges[_MEMINFO_GAUGES[key]] = float(rest.split()[0]) * 1024


def _vmstat(root: Path, counters: dict[str, float], gauges: dict[str, float]) -> None:
    text = _read(root / "proc/vmstat")
    if text is None:
        return
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 2:
            continue
        name, value = parts[0], float(parts[1])
        if name.startswith("nr_") and name not in _VMSTAT_CUMULATIVE_NR:
            gauges[f"vmstat.{name}"] = value
        else:
            counters[f"vmstat.{name}"] = value


def _diskstats(root: Path, devices: list[str] | None, counters: dict[str, float], gauges: dict[str, float]) -> None:
    text = _read(root / "proc/diskstats")
    if text is None:
        return
    wanted = set(devices) if devices is not None else None
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 3 + len(_DISK_FIELDS):
            continue
        dev = parts[2]
        if wanted is not None and dev not in wanted:
            continue
        for name, value in zip(_DISK_FIELDS, parts[3:], strict=False):
            key = f"diskstats.{dev}.{name}"
            if name == "in_flight":
                gauges[key] = float(value)
            else:
                counters[key] = float(value)


def read_psi(resource: str, root: Path = Path("/")) -> dict[str, dict[str, float]]:
    """One /proc/pressure file: ``{"some": {"avg10": %, "avg60": %, "avg300": %, "total": µs}, "full": …}``.

    Documentation/accounting/psi.rst: ``avgN`` is the share of wall time (%) in which some (or all)
    non-idle tasks were stalled on ``resource`` over the last N seconds; ``total`` the stall time in µs
    since boot. Empty when the kernel has no PSI (file missing).
    """
    text = _read(root / "proc/pressure" / resource)
    out: dict[str, dict[str, float]] = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if parts and parts[0] in ("some", "full"):
            out[parts[0]] = {k: float(v) for k, v in (p.split("=", 1) for p in parts[1:] if "=" in p)}
    return out


def _pressure(root: Path, counters: dict[str, float], gauges: dict[str, float]) -> None:
    for resource in PSI_RESOURCES:
        for kind, fields in read_psi(resource, root).items():
            if "total" in fields:
                counters[f"psi.{resource}.{kind}_total_us"] = fields["total"]
            if "avg10" in fields:
                gauges[f"psi.{resource}.{kind}_avg10"] = fields["avg10"]


def host_state(root: Path = Path("/"), devices: list[str] | None = None) -> RuntimeState:
    """Sample the host's counters and gauges (names in the module docstring).

    Args:
        root: filesystem root holding ``proc/`` (``/`` on a real host, a fake tree in tests).
        devices: block device names (``["vda"]``) whose /proc/diskstats lines to keep; None keeps all.

    Returns:
        RuntimeState; sources that are missing (no /proc/pressure on kernels without PSI) are skipped.
    """
    counters: dict[str, float] = {}
    gauges: dict[str, float] = {}
    _cpu(root, counters)
    _meminfo(root, gauges)
    _vmstat(root, counters, gauges)
    _diskstats(root, devices, counters, gauges)
    _pressure(root, counters, gauges)
    return RuntimeState(counters=counters, gauges=gauges)


def _devices_in(delta: StateDelta) -> list[str]:
    devs = {k.split(".")[1] for k in delta.totals if k.startswith("diskstats.")}
    return sorted(devs)


def derived(delta: StateDelta) -> dict[str, float]:
    """Compute the figures a DBA reads from ``iostat -x`` / ``vmstat`` out of a host StateDelta.

    Returns keys (only those whose inputs are present):
        ``host.cpu_util`` (0..1, busy share of all CPU time), ``host.iowait_fraction`` (0..1),
        ``host.steal_fraction`` (0..1); per device ``diskstats.<dev>.await_ms`` (mean ms per completed
        I/O), ``.r_await_ms``, ``.w_await_ms``, ``.util`` (0..1, share of wall time the device was busy),
        ``.avg_queue_depth`` (weighted ms / elapsed ms, iostat's aqu-sz), ``.iops``;
        ``psi.<res>.<some|full>_fraction`` (0..1, share of wall time stalled);
        ``vmstat.pgscan_direct_per_s`` and ``vmstat.pgscan_kswapd_per_s`` (pages scanned per second).

    Formulas follow sysstat's iostat (await = Δ(time_reading+time_writing) / Δ(reads+writes),
    %util = Δio_ticks / Δt, aqu-sz = Δweighted / Δt) and Documentation/admin-guide/iostats.rst.
    """
    out: dict[str, float] = {}
    t = delta.totals
    cpu = {name: t[f"host.cpu_{name}"] for name in _CPU_FIELDS if f"host.cpu_{name}" in t}
    total = sum(cpu.values())
    if total > 0:
        idle = cpu.get("idle", 0.0) + cpu.get("iowait", 0.0)
        out["host.cpu_util"] = (total - idle) / total
        out["host.iowait_fraction"] = cpu.get("iowait", 0.0) / total
        out["host.steal_fraction"] = cpu.get("steal", 0.0) / total
    elapsed_ms = delta.seconds * 1000.0
    for dev in _devices_in(delta):
        p = f"diskstats.{dev}."
        reads, writes = t.get(p + "reads", 0.0), t.get(p + "writes", 0.0)
        ios = reads + writes
        rt, wt = t.get(p + "time_reading_ms", 0.0), t.get(p + "time_writing_ms", 0.0)
        out[p + "await_ms"] = (rt + wt) / ios if ios else 0.0
        out[p + "r_await_ms"] = rt / reads if reads else 0.0
        out[p + "w_await_ms"] = wt / writes if writes else 0.0
        if elapsed_ms > 0:
            out[p + "util"] = min(t.get(p + "io_ticks_ms", 0.0) / elapsed_ms, 1.0)
            out[p + "avg_queue_depth"] = t.get(p + "weighted_ms", 0.0) / elapsed_ms
            out[p + "iops"] = ios / delta.seconds
    for key, value in t.items():
        if key.startswith("psi.") and key.endswith("_total_us") and delta.seconds > 0:
            out[key.removesuffix("_total_us") + "_fraction"] = min(value / (delta.seconds * 1e6), 1.0)
    for name in ("pgscan_direct", "pgscan_kswapd"):
        if f"vmstat.{name}" in delta.per_second:
            out[f"vmstat.{name}_per_s"] = delta.per_second[f"vmstat.{name}"]
    return out
