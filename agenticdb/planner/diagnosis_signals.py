"""Host signals of the bottleneck diagnosis: the counter view, the ramp, and the CPU, I/O, writeback,
reclaim and application-statement signals (split from diagnosis.py, issue 37).

A signal is ``weight × ramp(value, lo, hi)`` (see agenticdb/planner/diagnosis.py). The ramps, weights and
gates of these signals are data: catalogs/diagnosis-thresholds.toml, each with its basis (read through
:func:`agenticdb.planner.diagnosis_thresholds.t`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from agenticdb.models import Bottleneck, Measurement, RuntimeProfile, StateDelta
from agenticdb.planner.diagnosis_thresholds import t

PAGE_BYTES = 4096
"""Linux page size assumed for ``vmstat.nr_dirty`` / ``nr_writeback`` (x86-64 and most arm64 kernels;
getconf PAGESIZE = 4096 on this host)."""

# Wait-event types that say nothing about server work (idle backends, background loops, the client).
_IDLE_WAIT_TYPES = ("Activity", "Client", "Extension")


@dataclass(frozen=True)
class Signal:
    text: str
    value: float
    lo: float
    hi: float
    weight: float = 1.0
    gate: float = 1.0  # volume gate in [0, 1]: a high ratio over a handful of events means little

    @property
    def contribution(self) -> float:
        return min(self.weight * max(0.0, min(1.0, self.gate)), self.strength)

    @property
    def strength(self) -> float:
        """The contribution before it is capped at the signal's ``hi`` (how far beyond certainty the
        reading goes): it orders hypotheses whose scores are equal at the cap."""
        if self.hi <= self.lo:
            return 0.0
        x = (self.value - self.lo) / (self.hi - self.lo)
        return self.weight * max(0.0, min(1.0, self.gate)) * max(0.0, x)


def fmt(x: float) -> str:
    """Numbers for evidence lines: 3 significant digits, no exponent for everyday magnitudes."""
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.3g}"


class View:
    """Read access to a StateDelta: totals, rates, gauges and wait-event shares."""

    def __init__(self, delta: StateDelta) -> None:
        self.d = delta
        self.seconds = delta.seconds if delta.seconds > 0 else 1.0

    def total(self, name: str) -> float | None:
        if name in self.d.totals:
            return self.d.totals[name]
        if name in self.d.per_second:
            return self.d.per_second[name] * self.seconds
        return None

    def rate(self, name: str) -> float | None:
        if name in self.d.per_second:
            return self.d.per_second[name]
        t = self.d.totals.get(name)
        return None if t is None else t / self.seconds

    def gauge(self, name: str) -> float | None:
        return self.d.gauges.get(name)

    def sum_totals(self, names: Iterable[str]) -> float | None:
        vals = [v for v in (self.total(n) for n in names) if v is not None]
        return sum(vals) if vals else None

    def wait_share(self, match: Callable[[str], bool]) -> tuple[float, int, int] | None:
        """(share, matching samples, busy samples) of busy wait-event samples matching ``match``."""
        busy = {k: n for k, n in self.d.wait_events.items() if k.split(":", 1)[0] not in _IDLE_WAIT_TYPES}
        # Targets may sample only sessions that wait (no on-CPU entries): never divide by fewer than the
        # active sessions, or one waiting backend would look like 100 % of the work.
        denom = max(sum(busy.values()), int(self.d.gauges.get("pg_stat_activity.active", 0)))
        if denom <= 0:
            return None
        hit = sum(n for k, n in busy.items() if match(k))
        return hit / denom, hit, denom

    @property
    def over(self) -> str:
        return f"over {self.seconds:.1f} s"


def ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return num / den


# --------------------------------------------------------------------------------------- host signals


def host_cpu(v: View) -> list[Signal]:
    sigs: list[Signal] = []
    user, system = v.total("host.cpu_user"), v.total("host.cpu_system")
    rest = [v.total(f"host.cpu_{k}") for k in ("idle", "iowait", "steal")]
    if user is not None and system is not None:
        all_s = user + system + sum(x for x in rest if x is not None)
        if all_s > 0:
            util = (user + system) / all_s
            sigs.append(
                Signal(
                    f"host CPU busy (user+system)/all = {util:.2f} {v.over}",
                    util,
                    t("host_cpu_busy_lo"),
                    t("host_cpu_busy_hi"),
                )
            )
    psi = v.total("psi.cpu.some_total_us")
    if psi is not None:
        frac = psi / (v.seconds * 1e6)
        sigs.append(
            Signal(
                f"psi.cpu some = {frac:.2f} of wall time {v.over}",
                frac,
                t("psi_cpu_lo"),
                t("psi_cpu_hi"),
                t("psi_cpu_weight"),
            )
        )
    return sigs


def _disk_devices(v: View) -> list[str]:
    devs = {k.split(".")[1] for k in (*v.d.totals, *v.d.per_second) if k.startswith("diskstats.")}
    return sorted(devs)


def host_io(v: View, device: str | None) -> list[Signal]:
    sigs: list[Signal] = []
    devs = _disk_devices(v)
    if device and device in devs:
        devs = [device]
    ms = v.seconds * 1000.0
    for dev in devs:
        p = f"diskstats.{dev}."
        ticks, weighted = v.total(p + "io_ticks_ms"), v.total(p + "weighted_ms")
        ios = v.sum_totals([p + "reads", p + "writes"])
        busy_ms = v.sum_totals([p + "time_reading_ms", p + "time_writing_ms"])
        if ticks is not None:
            util = ticks / ms
            sigs.append(
                Signal(
                    f"{dev} utilisation io_ticks/elapsed = {util:.2f} {v.over}",
                    util,
                    t("disk_util_lo"),
                    t("disk_util_hi"),
                )
            )
        if weighted is not None:
            aqu = weighted / ms
            sigs.append(
                Signal(
                    f"{dev} average queue depth weighted_ms/elapsed = {aqu:.2f} {v.over}",
                    aqu,
                    t("disk_queue_lo"),
                    t("disk_queue_hi"),
                )
            )
        if ios and busy_ms is not None:
            await_ms = busy_ms / ios
            iops = ios / v.seconds
            sigs.append(
                Signal(
                    f"{dev} await = {await_ms:.2f} ms per I/O at {fmt(iops)} IOPS",
                    await_ms,
                    t("disk_await_lo_ms"),
                    t("disk_await_hi_ms"),
                    gate=iops / t("disk_await_gate_iops"),
                )
            )
    iowait = v.total("host.cpu_iowait")
    cpu_all = v.sum_totals([f"host.cpu_{k}" for k in ("user", "system", "idle", "iowait", "steal")])
    if iowait is not None and cpu_all:
        frac = iowait / cpu_all
        sigs.append(
            Signal(
                f"host iowait share = {frac:.2f} of CPU time {v.over}", frac, t("iowait_share_lo"), t("iowait_share_hi")
            )
        )
    psi = v.total("psi.io.some_total_us")
    if psi is not None:
        frac = psi / (v.seconds * 1e6)
        sigs.append(Signal(f"psi.io some = {frac:.2f} of wall time {v.over}", frac, t("psi_io_lo"), t("psi_io_hi")))
    return sigs


def os_writeback(v: View, profile: RuntimeProfile, device: str | None) -> list[Signal]:
    sigs: list[Signal] = []
    mem = profile.hardware.memory_limit_bytes or profile.hardware.memory_bytes
    dirty, wb = v.gauge("vmstat.nr_dirty"), v.gauge("vmstat.nr_writeback")
    if dirty is not None and mem:
        frac = dirty * PAGE_BYTES / mem
        sigs.append(
            Signal(
                f"vmstat.nr_dirty = {fmt(dirty)} pages ({frac:.3f} of memory)",
                frac,
                t("dirty_share_lo"),
                t("dirty_share_hi"),
            )
        )
    if wb is not None and mem:
        frac = wb * PAGE_BYTES / mem
        sigs.append(
            Signal(
                f"vmstat.nr_writeback = {fmt(wb)} pages ({frac:.4f} of memory)",
                frac,
                t("writeback_share_lo"),
                t("writeback_share_hi"),
                t("writeback_share_weight"),
            )
        )
    devs = _disk_devices(v)
    if device and device in devs:
        devs = [device]
    for dev in devs:
        p = f"diskstats.{dev}."
        tr, tw, ticks = (
            v.total(p + "time_reading_ms"),
            v.total(p + "time_writing_ms"),
            v.total(p + "io_ticks_ms"),
        )
        if tr is not None and tw is not None and ticks is not None and tr + tw > 0:
            write_busy = tw / (tr + tw) * ticks / (v.seconds * 1000.0)
            sigs.append(
                Signal(
                    f"{dev} write share of busy time × utilisation = {write_busy:.2f} {v.over}",
                    write_busy,
                    t("write_busy_lo"),
                    t("write_busy_hi"),
                    t("write_busy_weight"),
                )
            )
    return sigs


def os_reclaim(v: View) -> list[Signal]:
    sigs: list[Signal] = []
    direct = v.rate("vmstat.pgscan_direct")
    if direct is not None:
        sigs.append(
            Signal(
                f"vmstat.pgscan_direct = {fmt(direct)} pages/s {v.over}",
                direct,
                t("pgscan_direct_lo"),
                t("pgscan_direct_hi"),
            )
        )
    kswapd = v.rate("vmstat.pgscan_kswapd")
    if kswapd is not None:
        sigs.append(
            Signal(
                f"vmstat.pgscan_kswapd = {fmt(kswapd)} pages/s",
                kswapd,
                t("pgscan_kswapd_lo"),
                t("pgscan_kswapd_hi"),
                t("pgscan_kswapd_weight"),
            )
        )
    swap = [v.rate("vmstat.pswpin"), v.rate("vmstat.pswpout")]
    if any(s is not None for s in swap):
        s = sum(x for x in swap if x is not None)
        sigs.append(Signal(f"vmstat.pswpin+pswpout = {fmt(s)} pages/s", s, t("swap_lo"), t("swap_hi")))
    stalls = [k for k in (*v.d.totals, *v.d.per_second) if k.startswith("vmstat.allocstall")]
    if stalls:
        s = sum(v.rate(k) or 0.0 for k in set(stalls))
        sigs.append(Signal(f"vmstat.allocstall* = {fmt(s)}/s", s, t("allocstall_lo"), t("allocstall_hi")))
    psi = v.total("psi.memory.some_total_us")
    if psi is not None:
        frac = psi / (v.seconds * 1e6)
        sigs.append(
            Signal(f"psi.memory some = {frac:.3f} of wall time {v.over}", frac, t("psi_memory_lo"), t("psi_memory_hi"))
        )
    return sigs


def add_live(signals: dict[Bottleneck, list[Signal]], v: View, m: Measurement | None) -> None:
    """Signals from the application's own statements (``live.*`` counters of workload live,
    agenticdb/workloads/live.py): the share of its execution time spent in statements that spill to
    temporary files (work_mem / tmp_table_size), and its statements' buffer-cache miss ratio.

    In a live window the host's CPU also serves the application and everything else on the host, so the
    host-wide cpu signals are gated by the database server's share of the busy CPU (``Disturbance``:
    ours / host busy cores; agenticdb runs no load of its own then)."""
    if m is not None and m.workload == "live" and m.disturbance is not None and m.disturbance.host_busy_cores > 0:
        share = min(1.0, m.disturbance.ours_cpu_cores / m.disturbance.host_busy_cores)
        signals[Bottleneck.cpu] = [
            replace(s, text=f"{s.text} (the server used {share:.0%} of the busy CPU)", gate=s.gate * share)
            for s in signals[Bottleneck.cpu]
        ]
    exec_ms, spill_ms = v.total("live.exec_ms"), v.total("live.spill_exec_ms")
    if exec_ms and spill_ms is not None:
        share = spill_ms / exec_ms
        signals[Bottleneck.temp_spill].append(
            Signal(
                f"statements that spill to temp files take {share:.0%} of the application's time",
                share,
                t("live_spill_share_lo"),
                t("live_spill_share_hi"),
            )
        )
    rd, hit = v.total("live.read_blocks"), v.total("live.hit_blocks")
    if rd is not None and hit is not None and rd + hit > 0:
        signals[Bottleneck.buffer_cache].append(
            Signal(
                f"application statements read {rd / (rd + hit):.1%} of their blocks from outside the buffer cache",
                rd / (rd + hit),
                t("live_miss_lo"),
                t("live_miss_hi"),
                gate=rd / v.seconds / t("live_miss_gate_reads"),
            )
        )
