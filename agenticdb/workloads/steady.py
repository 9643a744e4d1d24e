"""Score an OLTP run on its steady window: find the window in the per-second series (MSER-5), compute
the objective over it, and its batch-means standard error (``agenticdb.measure.series``, docs/measurement.md).

Each workload supplies ``stats_of(a, b)``: TPS and latency percentiles over seconds ``a`` … ``b - 1`` of
its run. pgbench computes them exactly from its per-transaction log; sysbench and the command workload
only have per-second percentiles and use ``stats_from_points`` (an approximation, see there).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agenticdb.measure.series import batch_slices, cv, se_of_batches, steady_window
from agenticdb.models import SeriesPoint
from agenticdb.workloads.base import WorkloadError
from agenticdb.workloads.common import objective


@dataclass(frozen=True)
class WindowStats:
    """Throughput (per s) and latencies (ms) over a span of seconds of one run."""

    tps: float
    p95_ms: float | None
    p99_ms: float | None
    mean_ms: float | None = None


@dataclass(frozen=True)
class Steady:
    """A run scored on its steady window: seconds ``start`` … ``start + length - 1`` of the series."""

    start: int
    length: int
    stats: WindowStats
    objective: float
    higher_is_better: bool
    objective_se: float | None
    series_cv: float | None


def stats_from_points(points: Sequence[SeriesPoint], a: int, b: int) -> WindowStats:
    """Window statistics from per-second points alone: TPS is the mean of the per-second TPS; p95/p99 are
    the TPS-weighted means of the per-second percentiles.

    This is an approximation: a percentile of the pooled latencies is not the mean of per-second
    percentiles (they agree when the latency distribution is the same in every second). It is used for
    every run of a tool that reports only per-interval percentiles (sysbench ``--report-interval``),
    so all runs compared with each other use the same estimator.
    """
    window = points[a:b]
    if not window:
        raise ValueError(f"empty window [{a}, {b}) of a {len(points)}-s series")
    tps = statistics.fmean(p.tps for p in window)
    return WindowStats(tps=tps, p95_ms=_weighted(window, "latency_p95_ms"), p99_ms=_weighted(window, "latency_p99_ms"))


def _weighted(points: Sequence[SeriesPoint], field: str) -> float | None:
    pairs: list[tuple[float, float]] = [
        (float(getattr(p, field)), p.tps) for p in points if getattr(p, field) is not None
    ]
    if not pairs:
        return None
    weight = sum(w for _, w in pairs)
    if weight <= 0:
        return statistics.fmean(v for v, _ in pairs)
    return sum(v * w for v, w in pairs) / weight


def score_steady(
    points: Sequence[SeriesPoint],
    warmup_max_s: float,
    objective_name: str,
    stats_of: Callable[[int, int], WindowStats],
) -> Steady:
    """Find the steady window of ``points`` and score the run on it.

    Args:
        points: the run's per-second series (one point per second, in order).
        warmup_max_s: the longest start-up transient MSER-5 may cut (``workload.warmup_max_s``).
        objective_name: ``workload.objective`` (tps_per_p95, tps, p95, p99).
        stats_of: statistics over seconds ``[a, b)`` of the run.

    Returns:
        The window, its statistics, the objective over it, the batch-means standard error of the
        objective (batches of ``⌊√length⌋`` seconds; None when fewer than two batches fit or a batch
        lacks the latency the objective needs) and the CV of the per-second TPS in the window.

    Raises:
        WorkloadError: the window lacks what the objective needs (e.g. no p95 at all).
    """
    start, length = steady_window([p.tps for p in points], warmup_max_s)
    end = start + length
    stats = stats_of(start, end)
    value, higher = objective(objective_name, tps=stats.tps, p95_ms=stats.p95_ms, p99_ms=stats.p99_ms)
    per_batch: list[float] = []
    for span in batch_slices(length):
        b = stats_of(start + span.start, start + span.stop)
        try:
            per_batch.append(objective(objective_name, tps=b.tps, p95_ms=b.p95_ms, p99_ms=b.p99_ms)[0])
        except WorkloadError:
            per_batch = []  # a batch without a usable latency: no honest error estimate
            break
    return Steady(
        start=start,
        length=length,
        stats=stats,
        objective=value,
        higher_is_better=higher,
        objective_se=se_of_batches(per_batch),
        series_cv=cv([p.tps for p in points[start:end]]),
    )
