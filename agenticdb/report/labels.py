"""Readable names and units of objectives for the command line (report, validate, journal, memory).

The objective definitions are those of :func:`agenticdb.workloads.common.objective`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from agenticdb.measure.series import PAIR_SD_FLOOR
from agenticdb.models import Measurement

OBJECTIVES: dict[str, tuple[str, str, bool]] = {
    "tps_per_p95": ("TPS/p95", "transactions per s per ms of p95 latency", True),
    "tps": ("TPS", "transactions per s", True),
    "p95": ("p95", "ms of 95th-percentile latency", False),
    "total_time": ("total time", "s for the whole query set", False),
    "live_time_index": ("live time index", "top statements' mean time / their baseline mean, mix-normalised", False),
}
"""objective name → (short label, unit in words, higher is better)."""


def objective_label(name: str | None) -> str:
    """``"tps_per_p95"`` → ``"TPS/p95 (transactions per s per ms of p95 latency)"``; unknown names as is."""
    if not name:
        return "-"
    short, unit, _ = OBJECTIVES.get(name, (name, "", True))
    return f"{short} ({unit})" if unit else short


def objective_unit(name: str | None) -> str:
    """The short unit text appended after a number: ``"TPS/p95"``, ``"ms"`` (p95), ``"s"`` (total time)."""
    return {"tps_per_p95": "TPS/p95", "tps": "TPS", "p95": "ms", "total_time": "s", "live_time_index": "×"}.get(
        name or "", ""
    )


def baseline_run_text(label: str, m: Measurement, kept: str) -> str:
    """``tune``'s line for one baseline run as it ends: ``baseline 1: 48.970 s``, and for a run the host disturbed
    ``baseline 1: 61.200 s (disturbed: other-CPU …; measured again)`` or ``(…; used all the same: <kept>)``
    (``kept``: why it is used, from ``loop.baseline.measure_baseline``). A piped ``tune`` printed nothing between
    its header and round 1 for the 8 minutes of a busy host's baseline."""
    text = f"{label}: {f'{m.objective:,.3f} {objective_unit(m.objective_name)}'.rstrip()}"
    if not m.disturbed:
        return text
    why = m.disturbance.reason if m.disturbance is not None and m.disturbance.reason else "the host's other load"
    return f"{text} (disturbed: {why}; {f'used all the same: {kept}' if kept else 'measured again'})"


def higher_is_better(name: str | None) -> bool:
    """True for throughput-like objectives, False for p95 and total_time."""
    return OBJECTIVES.get(name or "", ("", "", True))[2]


def noise_said(cv: float | None, runs: int) -> str:
    """The baseline's run CV as the session's texts quote it: ``"5.0%"``; with fewer than two baseline runs
    (a short budget's one run, ``loop.baseline``) there is no spread to measure and the CV on record is the
    conservative prior ``next_move.noise_cv`` assumes (10 %): said as such, never as a measurement.
    ``cv``: a fraction (None: not recorded); ``runs``: the baseline runs kept."""
    if runs < 2:
        assumed = f"; {cv * 100:.0f} % assumed until the pairs measure it" if cv else ""
        return f"not measured ({runs} baseline run{'' if runs == 1 else 's'}{assumed})"
    return f"{(cv or 0.0) * 100:.1f}%"


STALE_SDS = 2.0
"""How far (in standard deviations of a pair's log-ratio) the start's re-measurement in a decision's pairs may lie
from the baseline's median before the baseline counts as stale: the bar ``agenticdb.loop.race.AHEAD_SDS`` sets
for a screen to run ahead of the start (a configuration only as good as the start gets this far in one run with
less than ~2.3 % chance)."""


def start_reference(
    base: float,
    again: tuple[int, float] | None,
    noise_cv: float,
    disturbed: tuple[int, int] = (0, 0),
    fmt: Callable[[float], str] = lambda v: f"{v:,.3f}",
) -> tuple[float, str]:
    """Which level of the starting configuration an end summary's gain is quoted against, and why.

    ``base`` is the baseline's median (the objective's unit); ``again`` (round, level) the start as re-measured
    in a decision's valid (undisturbed) pairs: the median of its runs in the first kept round's pairs, the
    freshest measurement of the start any decision used; None when no decision measured it. ``noise_cv`` is
    the baseline's run CV (a fraction), ``disturbed`` (disturbed runs kept, runs) the baseline's runs the host
    disturbed (``Measurement.disturbed``) and that it still used for want of repeats.

    Returns ``(level, why)``: ``(base, "")`` while the baseline stands (undisturbed, and the re-measurement
    within ``STALE_SDS`` × the noise of a pair, ``max(√2·noise_cv, PAIR_SD_FLOOR)``, of it); otherwise the
    re-measured level and a clause naming it and what is wrong with the baseline ("the start as re-measured
    1,440.000 in round 2's undisturbed pairs; the baseline is stale (the same start measured +53.4 % off it
    later: the host changed)"),
    or without a re-measurement ``base`` and a clause saying the baseline is disturbed. Never raises.
    """
    faults = []
    if disturbed[0]:
        faults.append(f"disturbed ({disturbed[0]} of {disturbed[1]} runs)")
    if again is not None and base > 0 and again[1] > 0:
        sd = max(math.sqrt(2.0) * noise_cv, PAIR_SD_FLOOR)
        if abs(math.log(again[1] / base)) > STALE_SDS * sd:
            moved = f"{again[1] / base - 1:+.1%}".replace("%", " %")
            faults.append(f"stale (the same start measured {moved} off it later: the host changed)")
    if not faults:
        return base, ""
    faults_text = " and ".join(faults)
    if again is None or again[1] <= 0:
        return base, f"a baseline that is {faults_text}, the start not measured again"
    where = f"the start as re-measured {fmt(again[1])} in round {again[0]}'s undisturbed pairs"
    return again[1], f"{where}; the baseline is {faults_text}"


def gain_over(level: float, reference: float, higher: bool) -> float:
    """Relative improvement of ``level`` over ``reference`` (0.24 = +24 %, positive = better whatever the
    direction), as ``agenticdb.loop.next_move.relative_gain``; 0.0 when either is 0."""
    if not reference or not level:
        return 0.0
    return level / reference - 1.0 if higher else reference / level - 1.0
