"""Host disturbance during a measured run: CPU load that is not ours (docs/measurement.md).

A sampler thread reads, about once a second while the workload runs:

- the host's CPU time from /proc/stat (psutil ``cpu_times``): busy = user + nice + system + irq +
  softirq (guest time is inside user, proc(5)), and steal, the time the hypervisor ran other guests;
- PSI, the stall time of /proc/pressure/cpu ``some`` (Documentation/accounting/psi.rst), per interval
  from its ``total`` counter, which is exact where ``avg10`` is a 10-s moving average;
- our processes (``agenticdb.measure.procstats``): the database server's process tree (from its pid file), the
  benchmark tool's process tree (pids reported by ``run_tool(on_start=…)``) and agenticdb's own
  process: their CPU time, and their CPU share (the part of their runnable time they got a CPU).

Per second, ``other = busy − ours`` in cores. On a host with spare CPU a new outside load shows up
there in full. On a saturated host it cannot: the outside can only take CPU from ours, so other-CPU
grows by what ours loses, which may be little when ours was small; our CPU share shows it anyway. On
the reference 2-core host under a load average of 3-5, two busy loops started mid-run while pgbench
ran raised other-CPU from 1.0 to 1.7 cores and cut our CPU share from 37 % to 13 %; under a load
average of 6, other-CPU rose by only 0.15 core but our share fell from 14 % to 6 %. (A host-wide
run-queue time needs /proc/schedstat, absent on kernels without CONFIG_SCHEDSTATS, and sampling
``procs_running`` was too noisy: 1-2 tasks between seconds.)

``summarize`` turns the samples into a ``Disturbance``; ``classify`` (pure) decides whether the run is
disturbed. A constant outside load is not a disturbance: it is the same in both runs of a pair, and
interleaving the pair's runs cancels it. A load that changes within the run, a high steal time, or an
outside load different from the paired run's is.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import structlog

from agenticdb.config.loop_section import LoopConfig
from agenticdb.measure.hoststats import read_psi
from agenticdb.measure.procstats import OursCpu, OursDelta
from agenticdb.measure.series import level_shift, percentile
from agenticdb.models import Disturbance

log = structlog.get_logger(__name__)

SAMPLE_INTERVAL_S = 1.0
"""Seconds between the sampler's reads: the per-second grain of the workloads' TPS series, so a sample
lines up with a second of the run (judgement; docs/measurement.md "Host disturbance": about once a
second)."""
MIN_SAMPLE_S = 0.2
"""A last interval shorter than this (s) is dropped: /proc/stat counts CPU time in USER_HZ ticks, 1/100 s
on most architectures (proc(5)), so over 0.2 s one tick is already 5 % of a core and a shorter sliver is
mostly rounding (the cut itself: judgement)."""
STOP_JOIN_S = 10.0
"""How long ``stop`` waits for the sampler thread (s): one read takes milliseconds; a thread still
running after this is left (it is a daemon thread) rather than holding up the run (judgement)."""
SPREAD_PERCENTILES = (10, 90)
"""The spread of a per-second series is p90 − p10 (nearest rank): one odd second in ten on either side
does not count as a changed load (judgement; the measured steady and disturbed spreads behind
``loop.disturbance_cpu_cores`` are p90 − p10, ``LoopConfig``)."""
CORES_DIGITS = 3
"""Rounding of the recorded CPU figures (cores): 0.001 core, far below ``loop.disturbance_cpu_cores``
(presentation, judgement)."""
PCT_DIGITS = 2
"""Rounding of the recorded percentages (CPU share, steal, PSI): 0.01 % (presentation, judgement)."""
SHIFT_DIGITS = 3
"""Rounding of the recorded share shift factor: 0.001, far below ``loop.disturbance_share_ratio - 1``
(presentation, judgement)."""
_PSI_US_PER_PCT_S = 1e4
"""PSI ``total`` counts microseconds (Documentation/accounting/psi.rst): stalled µs / 1e4 / interval s = %."""


def _loop_default(name: str) -> float:
    """The default of ``LoopConfig.<name>``: the one home of the disturbance limits and their measured
    basis (``LoopConfig``'s docstring, docs/measurement.md "Host disturbance")."""
    return float(LoopConfig.model_fields[name].default)


@dataclass(frozen=True)
class DisturbanceThresholds:
    """When a run counts as disturbed (``loop.disturbance_*``; reasons in ``LoopConfig``'s docstring).

    ``cpu_cores``: largest allowed p90 − p10 of the per-second other-CPU within a run, and largest
    allowed difference of its mean from the paired run's (cores). ``share_ratio``: largest allowed
    factor between our mean CPU share before and after a point of the run. ``steal_pct``: largest
    allowed steal time (% of all CPU time).
    """

    cpu_cores: float = _loop_default("disturbance_cpu_cores")
    share_ratio: float = _loop_default("disturbance_share_ratio")
    steal_pct: float = _loop_default("disturbance_steal_pct")

    @classmethod
    def from_config(cls, loop: LoopConfig) -> DisturbanceThresholds:
        return cls(
            cpu_cores=loop.disturbance_cpu_cores,
            share_ratio=loop.disturbance_share_ratio,
            steal_pct=loop.disturbance_steal_pct,
        )


@dataclass(frozen=True)
class HostSample:
    """One interval of the sampler. ``t_s``: end of the interval, seconds after the sampler started;
    ``seconds``: its length; CPU figures in cores (CPU seconds per second); ``ours_share_pct``,
    ``steal_pct`` and ``psi_some_pct`` in % (None when not measurable: our threads idle, no PSI)."""

    t_s: float
    seconds: float
    busy_cores: float
    ours_cores: float
    ours_share_pct: float | None
    steal_pct: float
    psi_some_pct: float | None

    @property
    def other_cores(self) -> float:
        """CPU used outside our processes (never below 0: the two reads are a few ms apart)."""
        return max(self.busy_cores - self.ours_cores, 0.0)


# --------------------------------------------------------------------------- pure: summary and verdict


def _spread(values: Sequence[float]) -> float:
    """p90 − p10 (nearest rank, ``SPREAD_PERCENTILES``); 0 for fewer than two values."""
    low, high = SPREAD_PERCENTILES
    return percentile(values, high) - percentile(values, low) if len(values) >= 2 else 0.0


def summarize(samples: Sequence[HostSample], from_s: float = 0.0) -> Disturbance | None:
    """A ``Disturbance`` (not yet classified) from the samples of the scored window.

    Args:
        samples: the sampler's intervals, in order.
        from_s: start of the scored (steady) window, seconds after the sampler started; samples whose
            middle lies before it belong to the unscored warm-up and are left out.

    Returns:
        None when no sample covers the window.
    """
    # a sample belongs to the window when its middle (t_s - seconds / 2) lies in it
    kept = [s for s in samples if s.t_s - 0.5 * s.seconds >= from_s] or [s for s in samples if s.t_s > from_s]
    if not kept:
        return None
    other = [s.other_cores for s in kept]
    share = [s.ours_share_pct for s in kept if s.ours_share_pct is not None]
    shift = level_shift(share)
    seconds = sum(s.seconds for s in kept)
    psi = [s.psi_some_pct for s in kept if s.psi_some_pct is not None]
    return Disturbance(
        samples=len(kept),
        seconds=round(seconds, CORES_DIGITS),
        other_cpu_cores=round(statistics.fmean(other), CORES_DIGITS),
        other_cpu_spread=round(_spread(other), CORES_DIGITS),
        other_cpu_series=[round(v, CORES_DIGITS) for v in other],
        ours_cpu_cores=round(statistics.fmean(s.ours_cores for s in kept), CORES_DIGITS),
        ours_share_pct=round(statistics.fmean(share), PCT_DIGITS) if share else None,
        ours_share_shift=round(shift[3], SHIFT_DIGITS) if shift else None,
        ours_share_series=[None if s.ours_share_pct is None else round(s.ours_share_pct, PCT_DIGITS) for s in kept],
        host_busy_cores=round(statistics.fmean(s.busy_cores for s in kept), CORES_DIGITS),
        steal_pct=round(sum(s.steal_pct * s.seconds for s in kept) / seconds, PCT_DIGITS) if seconds > 0 else 0.0,
        psi_cpu_some_pct=round(statistics.fmean(psi), PCT_DIGITS) if psi else None,
    )


def classify(d: Disturbance, reference: Disturbance | None, thresholds: DisturbanceThresholds) -> tuple[bool, str]:
    """Is the run disturbed, and why (one sentence).

    Disturbed when (any of):

    - the outside CPU load changed within the run: the p90 − p10 of the per-second other-CPU is above
      ``thresholds.cpu_cores``, or our CPU share before and after some point of the run differs by more
      than the factor ``thresholds.share_ratio`` (a CPU hog that started or stopped mid-run; on a
      saturated host it shows in our share more than in other-CPU);
    - the hypervisor's steal time is above ``thresholds.steal_pct``;
    - ``reference`` (the run this one is paired with) is given and the mean other-CPU of the two
      differs by more than ``thresholds.cpu_cores``.

    A constant outside load, the same in both runs of a pair, is not a disturbance.

    Returns:
        ``(disturbed, reason)``.
    """
    reasons = []
    if d.world:  # the server changed under the run (worldwatch): never judged, whatever the CPU did
        reasons.append("the server changed under the run: " + "; ".join(d.world))
    changed = _changed_within(d, thresholds)
    if changed:
        reasons.append("outside CPU load changed within the run: " + changed)
    if d.steal_pct > thresholds.steal_pct:
        reasons.append(
            f"steal time {d.steal_pct:.1f} % of CPU time > loop.disturbance_steal_pct={thresholds.steal_pct:g}"
        )
    if reference is not None and abs(d.other_cpu_cores - reference.other_cpu_cores) > thresholds.cpu_cores:
        reasons.append(
            f"outside CPU load differs from the paired run: other-CPU {d.other_cpu_cores:.2f} vs "
            f"{reference.other_cpu_cores:.2f} cores (difference > loop.disturbance_cpu_cores="
            f"{thresholds.cpu_cores:g})"
        )
    if reasons:
        return True, "; ".join(reasons)
    paired = f", paired run {reference.other_cpu_cores:.2f} cores" if reference is not None else ""
    share = f", our CPU share {d.ours_share_pct:.0f} % (shift ×{d.ours_share_shift:.2f})" if d.ours_share_shift else ""
    return False, (
        f"outside CPU load steady: other-CPU {d.other_cpu_cores:.2f} cores (spread {d.other_cpu_spread:.2f})"
        f"{paired}{share}, steal {d.steal_pct:.1f} %"
    )


def _changed_within(d: Disturbance, thresholds: DisturbanceThresholds) -> str:
    """Why the outside load counts as changed within the run ("" when it does not)."""
    parts = []
    if d.other_cpu_spread > thresholds.cpu_cores:
        low, high = _p10_p90(d.other_cpu_series, d.other_cpu_cores)
        parts.append(
            f"other-CPU went between {low:.2f} and {high:.2f} cores (p10-p90 spread {d.other_cpu_spread:.2f} > "
            f"loop.disturbance_cpu_cores={thresholds.cpu_cores:g})"
        )
    if d.ours_share_shift is not None and d.ours_share_shift > thresholds.share_ratio:
        parts.append(_share_reason(d, thresholds.share_ratio))
    return "; ".join(parts)


def _share_reason(d: Disturbance, limit: float) -> str:
    """ "our CPU share fell from 15 % to 6 % … while other-CPU went from 1.67 to 1.83 cores"."""
    valid = [(i, v) for i, v in enumerate(d.ours_share_series) if v is not None]
    shift = level_shift([v for _, v in valid])
    if shift is None:
        return f"our CPU share shifted ×{d.ours_share_shift:.2f} (> loop.disturbance_share_ratio={limit:g})"
    split, before, after, factor = shift
    at = valid[split][0]
    other = d.other_cpu_series
    other_text = ""
    if 0 < at < len(other):
        other_text = (
            f" while other-CPU went from {statistics.fmean(other[:at]):.2f} to {statistics.fmean(other[at:]):.2f} cores"
        )
    direction = "fell" if after < before else "rose"
    return (
        f"our processes' CPU share {direction} from {before:.0f} % to {after:.0f} % of their runnable time after "
        f"{at} of {d.samples} s (×{factor:.2f} > loop.disturbance_share_ratio={limit:g}){other_text}"
    )


def classified(d: Disturbance, reference: Disturbance | None, thresholds: DisturbanceThresholds) -> Disturbance:
    """``d`` with ``disturbed`` and ``reason`` set by ``classify``."""
    disturbed, reason = classify(d, reference, thresholds)
    return d.model_copy(update={"disturbed": disturbed, "reason": reason})


def _p10_p90(series: Sequence[float], mean: float) -> tuple[float, float]:
    if len(series) < 2:
        return mean, mean
    low, high = SPREAD_PERCENTILES
    return percentile(series, low), percentile(series, high)


# --------------------------------------------------------------------------- the sampler thread

_Reading = tuple[float, Any, float | None, OursDelta]


class DisturbanceSampler:
    """Samples host and our CPU about every ``interval_s`` seconds between ``start`` and ``stop``.

    Args:
        server_pid: the database server's main process (postmaster / mariadbd), or None when unknown
            (its CPU then counts as outside load; the executor logs that).
        interval_s: seconds between samples.
        root: filesystem root holding ``proc/pressure`` (PSI).
    """

    def __init__(self, server_pid: int | None, interval_s: float = SAMPLE_INTERVAL_S, root: Path = Path("/")) -> None:
        self.ours = OursCpu()
        if server_pid is not None:
            self.ours.add_root(server_pid)
        self.server_pid = server_pid
        self.interval_s = interval_s
        self.root = root
        self.samples: list[HostSample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="disturbance-sampler", daemon=True)
        self._t0 = 0.0

    def add_process(self, pid: int) -> None:
        """Count ``pid`` (a benchmark tool) and its descendants as ours; ``run_tool(on_start=…)`` calls this."""
        self.ours.add_root(pid)

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._thread.start()

    def stop(self) -> list[HostSample]:
        """Stop sampling (takes a last, possibly shorter, sample) and return the samples."""
        self._stop.set()
        self._thread.join(timeout=STOP_JOIN_S)
        return list(self.samples)

    def _read(self) -> _Reading:
        psi = read_psi("cpu", self.root).get("some", {}).get("total")
        return time.monotonic(), psutil.cpu_times(), psi, self.ours.read()

    def _loop(self) -> None:
        try:
            prev = self._read()
            while True:
                stopped = self._stop.wait(self.interval_s)
                cur = self._read()
                if cur[0] - prev[0] >= MIN_SAMPLE_S:  # a final sliver is noise, not a sample
                    self.samples.append(self._sample(prev, cur))
                prev = cur
                if stopped:
                    return
        except Exception as exc:  # noqa: BLE001 - a failed sampler must not fail the measured run
            log.warning("disturbance.sampler_failed", error=str(exc))

    def _sample(self, prev: _Reading, cur: _Reading) -> HostSample:
        (t1, c1, psi1, _), (t2, c2, psi2, ours) = prev, cur
        dt = t2 - t1
        busy = sum(getattr(c2, f) - getattr(c1, f) for f in ("user", "nice", "system", "irq", "softirq"))
        total = busy + sum(getattr(c2, f) - getattr(c1, f) for f in ("idle", "iowait", "steal"))
        return HostSample(
            t_s=t2 - self._t0,
            seconds=dt,
            busy_cores=busy / dt,
            ours_cores=ours.cpu_s / dt,
            ours_share_pct=ours.share_pct,
            steal_pct=100.0 * (c2.steal - c1.steal) / total if total > 0 else 0.0,
            psi_some_pct=(psi2 - psi1) / _PSI_US_PER_PCT_S / dt if psi1 is not None and psi2 is not None else None,
        )
