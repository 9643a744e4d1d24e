"""Pure series logic (agenticdb.measure.series): per-second aggregation, MSER-5 steady state, batch-means
standard error. Synthetic series with known structure; property-based where a rule holds for all inputs."""

from __future__ import annotations

import math
import random
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agenticdb.measure.series import (
    SHIFT_CAP,
    batch_means_se,
    batch_slices,
    bin_transactions,
    cv,
    level_shift,
    mser_truncation,
    percentile,
    points_from_bins,
    se_of_batches,
    steady_window,
)

# --------------------------------------------------------------------------- per-second aggregation

events_st = st.lists(
    st.tuples(
        st.floats(min_value=-2.0, max_value=40.0, allow_nan=False),
        st.one_of(st.none(), st.floats(min_value=0.01, max_value=1e4, allow_nan=False)),
    ),
    max_size=300,
)


@given(events_st, st.integers(min_value=1, max_value=30))
def test_binning_keeps_every_transaction_and_puts_it_in_its_second(
    events: list[tuple[float, float | None]], seconds: int
) -> None:
    start = 1_000_000.0
    shifted = [(start + t, lat) for t, lat in events]
    bins = bin_transactions(shifted, start, seconds)
    points = points_from_bins(bins)
    assert len(points) == seconds
    assert [p.t_s for p in points] == [float(i) for i in range(seconds)]
    assert sum(p.tps for p in points) == sum(1 for _, lat in events if lat is not None)
    assert sum(p.errors for p in points) == sum(1 for _, lat in events if lat is None)
    for t, lat in events:
        if lat is not None and 0 <= t < seconds:
            assert lat in bins[int(math.floor(t))].latencies_ms
    for p, b in zip(points, bins, strict=True):
        if b.latencies_ms:
            assert p.latency_p95_ms is not None and p.latency_p99_ms is not None
            assert min(b.latencies_ms) <= p.latency_p95_ms <= p.latency_p99_ms <= max(b.latencies_ms)
        else:
            assert p.latency_p95_ms is None and p.tps == 0


def test_binning_from_log_like_lines() -> None:
    # (end epoch s, latency ms): three in second 0, one failure in second 1, one late one clipped to the end
    start = 1796084716.682
    events = [
        (1796084716.868586, 186.161),
        (1796084716.871523, 2.928),
        (1796084716.873532, 2.004),
        (1796084717.9, None),
        (1796084719.2, 4.0),
    ]
    points = points_from_bins(bin_transactions(events, start, 2))
    assert [(p.tps, p.errors) for p in points] == [(3.0, 0), (1.0, 1)]
    assert points[0].latency_p95_ms == 186.161  # nearest rank of 3 values: the largest
    assert points[1].latency_p95_ms == 4.0
    with pytest.raises(ValueError, match="seconds=0"):
        bin_transactions(events, start, 0)


# --------------------------------------------------------------------------- MSER-5


def _ramp_then_flat(ramp_s: int, total_s: int, rng: random.Random, noise: float = 2.0) -> list[float]:
    return [(100.0 * i / ramp_s if i < ramp_s else 100.0) + rng.uniform(-noise, noise) for i in range(total_s)]


@given(st.integers(min_value=5, max_value=15), st.integers(min_value=0, max_value=2**32 - 1))
def test_mser_cuts_a_ramp_up(ramp_s: int, seed: int) -> None:
    values = _ramp_then_flat(ramp_s, 50, random.Random(seed))
    cut = mser_truncation(values, max_cut=20)
    assert cut % 5 == 0 and cut <= 20
    # every 5-s batch that lies wholly inside the ramp is dropped
    assert cut >= 5 * (ramp_s // 5)


def test_mser_on_a_clear_ramp_cuts_right_after_it() -> None:
    cuts = [mser_truncation(_ramp_then_flat(10, 40, random.Random(seed)), max_cut=20) for seed in range(200)]
    assert min(cuts) >= 10 and max(cuts) <= 20  # never inside the ramp, never past the bound
    assert statistics.mode(cuts) == 10  # usually right where the ramp ends
    start, length = steady_window(_ramp_then_flat(10, 40, random.Random(0)), warmup_max_s=20)
    assert start >= 10 and start + length == 40


@given(
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False),
    st.integers(min_value=0, max_value=80),
    st.integers(min_value=0, max_value=40),
)
def test_mser_does_not_cut_a_constant_series(level: float, n: int, max_cut: int) -> None:
    assert mser_truncation([level] * n, max_cut=max_cut) == 0


def test_mser_on_flat_noise_cuts_near_zero() -> None:
    cuts = []
    for seed in range(200):
        rng = random.Random(seed)
        cuts.append(mser_truncation([100.0 + rng.gauss(0, 10) for _ in range(50)], max_cut=20))
    # With no transient, most series are not cut and the average cut stays far below the 20-s bound.
    assert statistics.fmean(cuts) < 6  # 4.3 s for these seeds
    assert cuts.count(0) > len(cuts) / 2


@given(
    st.lists(st.floats(min_value=0, max_value=1e5, allow_nan=False), min_size=1, max_size=120),
    st.floats(min_value=0, max_value=60),
)
def test_steady_window_stays_inside_the_series_and_the_bound(values: list[float], warmup_max_s: float) -> None:
    start, length = steady_window(values, warmup_max_s)
    assert 0 <= start <= warmup_max_s and start % 5 == 0
    assert start + length == len(values) and length >= 1


def test_steady_window_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="empty"):
        steady_window([], 5)
    with pytest.raises(ValueError, match="warmup_max_s"):
        steady_window([1.0], -1)
    with pytest.raises(ValueError, match="batch"):
        mser_truncation([1.0], max_cut=0, batch=0)


# --------------------------------------------------------------------------- batch means


@given(st.integers(min_value=0, max_value=500), st.one_of(st.none(), st.integers(min_value=1, max_value=60)))
def test_batch_slices_are_equal_disjoint_and_at_the_end(n: int, size: int | None) -> None:
    slices = batch_slices(n, size)
    if not slices:
        assert n < 2 or (size is not None and n // size < 2) or n // max(1, math.isqrt(n)) < 2
        return
    lengths = {len(s) for s in slices}
    assert len(lengths) == 1 and len(slices) >= 2
    assert all(a.stop == b.start for a, b in zip(slices, slices[1:], strict=False))
    assert slices[-1].stop == n and slices[0].start >= 0


def _ar1(phi: float, n: int, rng: random.Random) -> list[float]:
    x, out = 0.0, []
    for _ in range(n):
        x = phi * x + rng.gauss(0, 1)
        out.append(100.0 + x)
    return out


@settings(max_examples=30, deadline=None)
@given(st.floats(min_value=0.6, max_value=0.9), st.integers(min_value=0, max_value=2**32 - 1))
def test_batch_means_se_exceeds_naive_se_under_autocorrelation(phi: float, seed: int) -> None:
    values = _ar1(phi, 900, random.Random(seed))
    naive = statistics.stdev(values) / math.sqrt(len(values))
    se = batch_means_se(values)
    assert se is not None
    # The true ratio is about sqrt((1 + phi) / (1 - phi)) >= 2 for phi >= 0.6.
    assert se > 1.3 * naive


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_batch_means_se_matches_naive_se_without_autocorrelation(seed: int) -> None:
    rng = random.Random(seed)
    values = [rng.gauss(50, 5) for _ in range(900)]
    naive = statistics.stdev(values) / math.sqrt(len(values))
    se = batch_means_se(values)
    assert se is not None and 0.5 * naive < se < 2 * naive


@given(
    st.lists(st.floats(min_value=-1e4, max_value=1e4, allow_nan=False), min_size=4, max_size=100),
    st.floats(min_value=-100, max_value=100, allow_nan=False),
)
def test_batch_means_se_scales_with_the_data(values: list[float], scale: float) -> None:
    se = batch_means_se(values)
    scaled = batch_means_se([scale * v for v in values])
    assert se is not None and scaled is not None
    assert scaled == pytest.approx(abs(scale) * se, rel=1e-6, abs=1e-6)


def test_se_of_constant_is_zero_and_needs_two_batches() -> None:
    assert batch_means_se([7.0] * 25) == 0.0
    assert batch_means_se([1.0]) is None
    assert se_of_batches([3.0]) is None
    assert se_of_batches([1.0, 3.0]) == pytest.approx(1.0)  # stdev sqrt(2) / sqrt(2)


def test_cv_and_percentile() -> None:
    assert cv([10.0, 10.0, 10.0]) == 0.0
    assert cv([1.0]) is None and cv([0.0, 0.0]) is None
    assert cv([9.0, 11.0]) == pytest.approx(statistics.stdev([9.0, 11.0]) / 10.0)
    assert percentile(list(range(1, 101)), 95) == 95


# --------------------------------------------------------------------------- level shift


def test_level_shift_finds_a_step() -> None:
    assert level_shift([10.0] * 6 + [5.0] * 6) == (6, 10.0, 5.0, 2.0)
    split, before, after, factor = level_shift([3.0, 2.9, 3.1, 3.0, 9.0, 9.2, 8.8, 9.1])  # type: ignore[misc]
    assert split == 4 and before == pytest.approx(3.0) and after == pytest.approx(9.025)
    assert factor == pytest.approx(9.025 / 3.0)
    assert level_shift([0.0] * 3 + [4.0] * 3) == (3, 0.0, 4.0, SHIFT_CAP)
    assert level_shift([1.0] * 5) is None  # too short for two parts of three
    with pytest.raises(ValueError, match="non-negative"):
        level_shift([1.0, -1.0] * 4)
    with pytest.raises(ValueError, match="min_side"):
        level_shift([1.0] * 8, min_side=0)


@given(st.lists(st.floats(min_value=0, max_value=1e4, allow_nan=False), min_size=6, max_size=60))
def test_level_shift_is_a_factor_of_the_two_part_means(values: list[float]) -> None:
    shift = level_shift(values)
    assert shift is not None
    split, before, after, factor = shift
    assert 3 <= split <= len(values) - 3 and 1.0 <= factor <= SHIFT_CAP
    assert before == pytest.approx(statistics.fmean(values[:split]))
    assert after == pytest.approx(statistics.fmean(values[split:]))


@given(st.floats(min_value=0, max_value=1e4, allow_nan=False), st.integers(min_value=6, max_value=40))
def test_level_shift_of_a_constant_series_is_one(level: float, n: int) -> None:
    assert level_shift([level] * n)[3] == pytest.approx(1.0)  # type: ignore[index]
