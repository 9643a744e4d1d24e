"""A bounded cost per bad trial (issue 14): a candidate's first run that is far worse than the best
configuration is stopped early instead of running to the end.

* OLTP (pgbench, sysbench): the run prints one progress line per second (``pgbench --progress=1``,
  manual "pgbench": ``progress: 5.0 s, 312.4 tps, lat 25.6 ms stddev 3.1``; sysbench
  ``--report-interval=1``: ``[ 5s ] thds: 4 tps: 312.40 …``). After the warm-up part and at least
  ``min_points`` steady seconds, a median TPS below ``ratio`` × the best configuration's TPS stops it.
* OLAP (TPC-H): the query set stops once its elapsed time passes ``time_factor`` × the best
  configuration's query-set time.

The stopped run comes back as a :class:`~agenticdb.models.Measurement` with ``cut_off`` set and an
objective estimated from the part that ran; the auditor counts it as worse at once unless the host
disturbed the run (``agenticdb.measure.disturbance``): a disturbed run is measured again in pairs, as the
auditor's rules say. The limits are far outside the noise (the screen cut-off of ``auditor.cut_off``
uses the same 0.5 ratio).
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass

from agenticdb.config import LoopConfig
from agenticdb.models import Measurement

_PROGRESS_RE = re.compile(r"^progress: ([\d.]+) s, ([\d.]+) tps", re.M)
# sysbench --report-interval=1: "[ 3s ] thds: 4 tps: 512.00 qps: ..." (sysbench 1.0 manual, "General options")
_INTERVAL_RE = re.compile(r"^\[\s*(\d+)s\s*\]\s+thds:\s*\d+\s+tps:\s*([0-9.]+)", re.M)


@dataclass(frozen=True)
class TrialLimit:
    """The bound of one trial run.

    Attributes:
        best_objective: the best configuration's objective level (median of its runs).
        best_tps: the best configuration's TPS (OLTP), None when unknown (then no OLTP cut).
        best_seconds: the best configuration's query-set time in seconds (OLAP), None when unknown.
        ratio: OLTP: cut when the steady median TPS is below ``ratio`` × ``best_tps``.
        time_factor: OLAP: cut when the query set has run ``time_factor`` × ``best_seconds``.
        min_points: OLTP: steady one-second points needed before judging.
    """

    best_objective: float
    best_tps: float | None = None
    best_seconds: float | None = None
    ratio: float = 0.5
    time_factor: float = 3.0
    min_points: int = 3

    @classmethod
    def for_best(cls, loop: LoopConfig, best_objective: float, ref: Measurement | None) -> TrialLimit | None:
        """The bound from a recent run ``ref`` of the best configuration and ``[loop]``'s
        ``trial_cut_ratio`` / ``trial_time_factor``; None without a reference run or when both are 0."""
        if ref is None or (loop.trial_cut_ratio <= 0 and loop.trial_time_factor <= 0):
            return None
        return cls(
            best_objective=best_objective,
            best_tps=ref.tps if loop.trial_cut_ratio > 0 else None,
            best_seconds=ref.total_time_s if loop.trial_time_factor > 0 else None,
            ratio=loop.trial_cut_ratio,
            time_factor=loop.trial_time_factor,
        )

    def oltp(self, tps_points: list[float]) -> str:
        """Why the run should stop, from its steady per-second TPS so far, or ''."""
        if not self.best_tps or len(tps_points) < self.min_points:
            return ""
        median = statistics.median(tps_points)
        if median >= self.ratio * self.best_tps:
            return ""
        return (
            f"cut off after {len(tps_points)} steady seconds: median {median:,.1f} TPS is below "
            f"{self.ratio:g} × the best configuration's {self.best_tps:,.1f} TPS"
        )

    def olap(self, elapsed_s: float) -> str:
        """Why the query set should stop after ``elapsed_s`` seconds, or ''."""
        if not self.best_seconds or elapsed_s <= self.time_factor * self.best_seconds:
            return ""
        return (
            f"cut off after {elapsed_s:,.1f} s: past {self.time_factor:g} × the best configuration's "
            f"query-set time of {self.best_seconds:,.1f} s"
        )

    def estimate(self, tps_points: list[float], higher_is_better: bool) -> float:
        """The objective of a stopped OLTP run, scaled from the best level by its TPS ratio."""
        if not tps_points or not self.best_tps:
            return 0.0
        ratio = max(statistics.median(tps_points), 1e-9) / self.best_tps
        return self.best_objective * ratio if higher_is_better else self.best_objective / ratio


def progress_tps(text: str, skip_s: float = 0.0) -> list[float]:
    """Per-second TPS from ``pgbench --progress`` lines in ``text``, after the first ``skip_s`` seconds."""
    return [float(tps) for t, tps in _PROGRESS_RE.findall(text) if float(t) > skip_s]


def interval_tps(text: str, skip_s: float = 0.0) -> list[float]:
    """Per-second TPS from sysbench ``--report-interval=1`` lines in ``text``, after the first ``skip_s`` s."""
    return [float(tps) for t, tps in _INTERVAL_RE.findall(text) if float(t) > skip_s]


def stopped_oltp(
    workload: str, limit: TrialLimit, tps: list[float], seconds: float, objective_name: str, output: str, reason: str
) -> Measurement:
    """The measurement of an OLTP run stopped early: median TPS of its steady seconds, the objective scaled
    from the best level by the TPS ratio (``TrialLimit.estimate``), ``cut_off`` = ``reason``."""
    higher = objective_name not in ("p95", "p99", "total_time")
    return Measurement(
        workload=workload,
        tps=statistics.median(tps) if tps else 0.0,
        duration_s=seconds,
        objective=limit.estimate(tps, higher),
        objective_name=objective_name,
        higher_is_better=higher,
        raw_tail=output[-2000:],
        cut_off=reason,
    )
