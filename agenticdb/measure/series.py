"""Pure statistics of the per-second series inside one measured run (docs/measurement.md).

Three pieces, all free of I/O so they are property-tested (tests/test_series.py):

- **Per-second aggregation**: transactions (end time, latency) → one bin per second of the run
  (``bin_transactions``), each bin → a ``SeriesPoint`` with TPS and the nearest-rank p95/p99.
- **Steady state**: MSER-5, the Marginal Standard Error Rule applied to batch means of 5 observations
  (White, K. P. Jr. (1997), "An effective truncation heuristic for bias reduction in simulation output",
  *Simulation* 69(6):323-334; the batch-of-5 variant MSER-5 from White, Cobb & Spratt (2000), "A comparison
  of five steady-state truncation heuristics for simulation", *Proc. Winter Simulation Conference*,
  755-760). For a truncation of ``d`` batches it computes ``MSER(d) = Σ_{i>d} (Z_i − Z̄_d)² / (k − d)²`` over
  the k batch means ``Z`` and keeps the ``d`` with the smallest value: the cut that best trades the
  bias of a transient start against the precision lost by dropping data.
- **Level shift**: the split of a series into a before and an after part whose means differ by the
  largest factor (``level_shift``), to tell a load that started or stopped mid-run from jitter.
- **Standard error under autocorrelation**: non-overlapping batch means (Law, A. M. (2015),
  *Simulation Modeling and Analysis*, 5th ed., §9.5.3). Successive seconds of a database benchmark are
  correlated (checkpoints, fsync stalls, cache warming last several seconds), so the naive
  ``s/√n`` understates the error; the variance of means of long enough batches does not. The batch
  size defaults to ``⌊√n⌋``, the choice that keeps the estimator consistent as ``n`` grows (Chien,
  Goldsman & Melamed (1997), "Large-sample results for batch means", *Management Science*
  43(9):1288-1295). For a statistic that is not a mean (a p95, a TPS/p95 ratio) the same batches give
  the batched estimator of its error (Schmeiser, B. (1982), "Batch size effects in the analysis of
  simulation output", *Operations Research* 30(3):556-568; Heidelberger & Lewis (1984), "Quantile
  estimation in dependent sequences", *Operations Research* 32(1):185-209).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from agenticdb.models import SeriesPoint

#: Smallest standard deviation assumed for one pair's log-ratio: 5 % per run (docs/measurement.md: the
#: lowest TPS CV seen for PostgreSQL on this kind of host even with pristine data resets). Here, not in
#: ``sequential`` (which loads scipy), so the report's texts read the same figure without scipy.
PAIR_SD_FLOOR = 0.05

MSER_BATCH = 5
"""Observations per batch of MSER-5 (White, Cobb & Spratt 2000)."""


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (``pct`` in 0–100) of ``values``; the same definition pgbench and
    sysbench use for their reports (the smallest value with at least pct % of samples at or below it).

    Raises:
        ValueError: ``values`` is empty.
    """
    if not values:
        raise ValueError("percentile of an empty sample")
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100.0 * len(ordered)))
    return float(ordered[rank - 1])


# --------------------------------------------------------------------------- per-second aggregation


@dataclass
class SecondBin:
    """Transactions that ended in one second of a run: latencies (ms) of the successful ones, failures."""

    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0


def bin_transactions(events: Iterable[tuple[float, float | None]], start_s: float, seconds: int) -> list[SecondBin]:
    """Put each transaction into the second of the run in which it ended.

    Args:
        events: ``(end time in s, latency in ms)`` per transaction, ``None`` latency for a failed one.
            End times are on the same clock as ``start_s`` (pgbench: Unix epoch).
        start_s: when the run started (bin 0 begins here).
        seconds: number of bins (the run length in whole seconds, ≥ 1).

    Returns:
        ``seconds`` bins. Transactions ending before ``start_s`` count in bin 0, those ending after the
        last second (in flight when the run's clock stopped) in the last bin, so no transaction is lost.

    Raises:
        ValueError: ``seconds`` < 1.
    """
    if seconds < 1:
        raise ValueError(f"seconds={seconds}: a run has at least one 1-s bin")
    bins = [SecondBin() for _ in range(seconds)]
    for end_s, latency_ms in events:
        idx = min(max(int(math.floor(end_s - start_s)), 0), seconds - 1)
        if latency_ms is None:
            bins[idx].errors += 1
        else:
            bins[idx].latencies_ms.append(latency_ms)
    return bins


def points_from_bins(bins: Sequence[SecondBin]) -> list[SeriesPoint]:
    """One ``SeriesPoint`` per 1-s bin: TPS = successful transactions in the bin, p95/p99 (ms) by nearest
    rank, or None for a second without a successful transaction."""
    out = []
    for i, b in enumerate(bins):
        lat = b.latencies_ms
        out.append(
            SeriesPoint(
                t_s=float(i),
                tps=float(len(lat)),
                latency_p95_ms=percentile(lat, 95) if lat else None,
                latency_p99_ms=percentile(lat, 99) if lat else None,
                errors=b.errors,
            )
        )
    return out


# --------------------------------------------------------------------------- steady state (MSER-5)


def batch_means(values: Sequence[float], batch: int) -> list[float]:
    """Means of consecutive non-overlapping batches of ``batch`` values from the start; an incomplete
    last batch is left out (as in MSER-5)."""
    k = len(values) // batch
    return [statistics.fmean(values[i * batch : (i + 1) * batch]) for i in range(k)]


def mser_truncation(values: Sequence[float], max_cut: int, batch: int = MSER_BATCH) -> int:
    """MSER-``batch`` truncation point: how many leading observations to drop.

    Args:
        values: the per-second series (e.g. TPS), in time order.
        max_cut: the largest cut allowed, in observations (``workload.warmup_max_s`` for a per-second
            series); the cut is a multiple of ``batch`` not above it.
        batch: observations per batch (5 = MSER-5).

    Returns:
        The cut (0 … ``max_cut``), a multiple of ``batch``. At least two batches are always kept;
        among equal MSER values the smallest cut wins, so a constant series is not cut.

    Raises:
        ValueError: ``batch`` < 1 or ``max_cut`` < 0.
    """
    if batch < 1 or max_cut < 0:
        raise ValueError(f"batch={batch}, max_cut={max_cut}: need batch ≥ 1 and max_cut ≥ 0")
    z = batch_means(values, batch)
    k = len(z)
    if k < 3:
        return 0  # cutting a batch would leave fewer than two
    stats = []
    for d in range(0, min(max_cut // batch, k - 2) + 1):
        tail = z[d:]
        mean = statistics.fmean(tail)
        stats.append(sum((x - mean) ** 2 for x in tail) / (k - d) ** 2)
    # Smallest statistic; a later cut must beat an earlier one by more than rounding to be taken.
    rounding = (1e-9 * max(abs(x) for x in z)) ** 2
    best_d = 0
    for d, stat in enumerate(stats):
        if stat < stats[best_d] * (1 - 1e-9) - rounding:
            best_d = d
    return best_d * batch


def steady_window(tps: Sequence[float], warmup_max_s: float, batch: int = MSER_BATCH) -> tuple[int, int]:
    """Steady window of a per-second series: ``(start index, length)`` in seconds.

    MSER-5 on ``tps``, with the cut restricted to the first ``warmup_max_s`` seconds (the run was made
    ``warmup_max_s`` longer for this), so the window is never shorter than the run minus that bound.

    Raises:
        ValueError: the series is empty or ``warmup_max_s`` is negative.
    """
    if not tps:
        raise ValueError("steady window of an empty series")
    if warmup_max_s < 0:
        raise ValueError(f"warmup_max_s={warmup_max_s:g}: must be ≥ 0")
    cut = mser_truncation(tps, int(math.floor(warmup_max_s)), batch)
    return cut, len(tps) - cut


# --------------------------------------------------------------------------- batch-means standard error


def batch_slices(n: int, batch_size: int | None = None) -> list[range]:
    """Index ranges of the non-overlapping batches used for the standard error of ``n`` observations.

    The batch size is ``batch_size`` or ``⌊√n⌋`` (Chien, Goldsman & Melamed 1997); the ``n mod b``
    leading observations are left out (they are the ones nearest the transient start).
    Fewer than two batches (``n`` < 2, or ``batch_size`` > n/2) gives an empty list.

    Raises:
        ValueError: ``batch_size`` < 1.
    """
    if batch_size is not None and batch_size < 1:
        raise ValueError(f"batch_size={batch_size}: must be ≥ 1")
    b = batch_size or max(1, math.isqrt(n))
    k = n // b if n > 0 else 0
    if k < 2:
        return []
    skip = n - k * b
    return [range(skip + i * b, skip + (i + 1) * b) for i in range(k)]


def se_of_batches(batch_values: Sequence[float]) -> float | None:
    """Standard error of an estimate from its values on k non-overlapping batches: ``s(batch values)/√k``
    (Law 2015 §9.5.3). None for fewer than two batches."""
    if len(batch_values) < 2:
        return None
    return statistics.stdev(batch_values) / math.sqrt(len(batch_values))


def batch_means_se(values: Sequence[float], batch_size: int | None = None) -> float | None:
    """Batch-means standard error of the mean of ``values`` (see ``batch_slices`` for the batches).

    Returns:
        The standard error in the unit of ``values``; None when there are fewer than two batches.
    """
    slices = batch_slices(len(values), batch_size)
    return se_of_batches([statistics.fmean(values[s.start : s.stop]) for s in slices])


def cv(values: Sequence[float]) -> float | None:
    """Coefficient of variation (sample standard deviation / mean); None for fewer than two values or
    a mean of 0."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    if mean == 0:
        return None
    return statistics.stdev(values) / abs(mean)


# --------------------------------------------------------------------------- level shift

SHIFT_CAP = 1000.0
"""Largest factor ``level_shift`` reports (a part whose mean is 0 would make it infinite)."""


def level_shift(values: Sequence[float], min_side: int = 3) -> tuple[int, float, float, float] | None:
    """Where a series of non-negative values changed level the most.

    Every split ``i`` (``min_side`` ≤ i ≤ n − ``min_side``) divides ``values`` into ``values[:i]`` and
    ``values[i:]``; the split whose two means differ by the largest factor (larger mean / smaller mean)
    wins. Averaging over whole parts keeps per-second jitter from looking like a shift.

    Returns:
        ``(split index, mean before, mean after, factor ≥ 1)``, the factor capped at ``SHIFT_CAP``; None
        when the series is shorter than ``2 × min_side``.

    Raises:
        ValueError: ``min_side`` < 1 or a value is negative.
    """
    if min_side < 1:
        raise ValueError(f"min_side={min_side}: must be ≥ 1")
    if any(v < 0 for v in values):
        raise ValueError("level_shift needs non-negative values")
    n = len(values)
    best: tuple[int, float, float, float] | None = None
    for i in range(min_side, n - min_side + 1):
        before, after = statistics.fmean(values[:i]), statistics.fmean(values[i:])
        low, high = min(before, after), max(before, after)
        factor = min(high / low, SHIFT_CAP) if low > 0 else (1.0 if high == 0 else SHIFT_CAP)
        if best is None or factor > best[3]:
            best = (i, before, after, factor)
    return best
