"""Readable names and units of objectives for the command line (report, validate, journal, memory).

The objective definitions are those of :func:`agenticdb.workloads.common.objective`.
"""

from __future__ import annotations

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


def higher_is_better(name: str | None) -> bool:
    """True for throughput-like objectives, False for p95 and total_time."""
    return OBJECTIVES.get(name or "", ("", "", True))[2]
