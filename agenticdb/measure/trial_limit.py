"""A bounded cost per bad trial (issue 14): a candidate's first run that is far worse than the best
configuration is stopped early instead of running to the end.

* OLTP (pgbench, sysbench): the run prints one progress line per second (``pgbench --progress=1``,
  manual "pgbench": ``progress: 5.0 s, 312.4 tps, lat 25.6 ms stddev 3.1``; sysbench
  ``--report-interval=1``: ``[ 5s ] thds: 4 tps: 312.40 …``). After the warm-up part and at least
  ``min_points`` steady seconds, a median TPS below ``ratio`` × the best configuration's TPS stops it.
* OLAP (TPC-H): the query set stops once its elapsed time passes ``time_factor`` × the best
  configuration's query-set time.
* Race (issue 36, :meth:`TrialLimit.race`): λ-Tune's bounded evaluation (Giannakouris & Trummer, "λ-Tune:
  Harnessing Large Language Models for Automated Database System Tuning", SIGMOD 2025: each configuration
  runs under a timeout that is a function of the best run time so far, so a bad candidate costs at most a
  multiple of the best). Both bounds are k × the best's: the query set's total time, and each query's own
  time, never below ``QUERY_FLOOR_S`` (a 3-ms query would otherwise be cut by a 10-ms scheduling hiccup).
  They are enforced inside the query, through the session's statement timeout on the workload's own
  connection (PostgreSQL ``statement_timeout``, MariaDB ``max_statement_time``, MySQL
  ``max_execution_time``): the timeout for a query is the smaller of its own bound and the total time left
  (:meth:`TrialLimit.query_bound`). A query the bound stops ends the run as a ``cut_off`` result — a screen
  result, never a ``WorkloadError``.

The stopped run comes back as a :class:`~agenticdb.models.Measurement` with ``cut_off`` set and an
objective estimated from the part that ran; the auditor counts it as worse at once unless the host
disturbed the run (``agenticdb.measure.disturbance``): a disturbed run is measured again in pairs, as the
auditor's rules say. The limits are far outside the noise (the screen cut-off of ``auditor.cut_off``
uses the same 0.5 ratio).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field

from agenticdb.config.loop_section import LoopConfig
from agenticdb.models import Measurement

#: The smallest per-query bound of a race run, seconds. Judgement: TPC-H SF 0.3 has queries of a few ms
#: on this host (q02, q11, q16 …) whose times move by several times their length with the scheduler; a
#: 1-s floor keeps k × their time from cutting a run over a hiccup, and costs at most 1 s per query.
QUERY_FLOOR_S = 1.0

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
        best_query_s: race form: the best configuration's time of each query (seconds, by query name);
            empty = no per-query bound.
        query_factor: race form: a query is stopped past ``query_factor`` × its best time (at least
            ``query_floor_s``); 0 = no per-query bound.
        query_floor_s: the smallest per-query bound, seconds (``QUERY_FLOOR_S``).
    """

    best_objective: float
    best_tps: float | None = None
    best_seconds: float | None = None
    ratio: float = 0.5
    time_factor: float = 3.0
    min_points: int = 3
    best_query_s: Mapping[str, float] = field(default_factory=dict)
    query_factor: float = 0.0
    query_floor_s: float = QUERY_FLOOR_S

    @classmethod
    def race(cls, best: Measurement, k: float, floor_s: float = QUERY_FLOOR_S) -> TrialLimit:
        """The race form for a query set (module docstring): total time bound ``k`` × ``best.total_time_s``
        and, per query, ``k`` × the best's time of that query, at least ``floor_s`` seconds.

        Args:
            best: a full (not cut-off) run of the best configuration so far, with ``per_query_s``.
            k: the factor (> 1; λ-Tune's bound is a multiple of the best time).
            floor_s: the smallest per-query bound (seconds, > 0).

        Raises:
            ValueError: ``k`` ≤ 1 or ``floor_s`` ≤ 0 (the parameter, its value and the rule are named), or
                ``best`` is cut off or has no per-query times (not a query set run).
        """
        if not k > 1:
            raise ValueError(f"race k={k:g}: must be > 1 (k ≤ 1 would cut the best configuration itself)")
        if not floor_s > 0:
            raise ValueError(f"race floor_s={floor_s:g}: must be > 0 seconds")
        if best.cut_off or not best.per_query_s or not best.total_time_s:
            why = f"cut off ({best.cut_off})" if best.cut_off else "without per-query times"
            raise ValueError(f"race bound from a {best.workload} run {why}: needs a full query-set run of the best")
        return cls(
            best_objective=best.objective,
            best_seconds=best.total_time_s,
            time_factor=k,
            best_query_s=dict(best.per_query_s),
            query_factor=k,
            query_floor_s=floor_s,
        )

    def query_bound(self, query: str, elapsed_s: float) -> tuple[float, str] | None:
        """The statement timeout for ``query`` when ``elapsed_s`` seconds of the query set have run, and
        why, or None when this limit bounds no query (not a race form, or nothing known of the best).

        The bound is the smaller of ``query_factor`` × the best's time of ``query`` (at least
        ``query_floor_s``) and the query set's total bound (``time_factor`` × ``best_seconds``) less
        ``elapsed_s`` (at least 1 ms: a zero statement timeout means "none")."""
        bounds: list[tuple[float, str]] = []
        best_q = self.best_query_s.get(query)
        if self.query_factor > 0 and best_q is not None:
            bounds.append(
                (
                    max(self.query_factor * best_q, self.query_floor_s),
                    f"{query} ran past {self.query_factor:g} × the best configuration's {best_q:,.3f} s "
                    f"(at least {self.query_floor_s:g} s)",
                )
            )
        if self.query_factor > 0 and self.best_seconds:
            total = self.time_factor * self.best_seconds
            bounds.append(
                (
                    max(total - elapsed_s, 0.001),
                    f"{query} ran the query set past {self.time_factor:g} × the best configuration's "
                    f"query-set time of {self.best_seconds:,.1f} s",
                )
            )
        return min(bounds) if bounds else None

    def estimate_total_s(self, done: Mapping[str, float], queries: list[str]) -> float:
        """The whole query set's time estimated for a run stopped with ``done`` (seconds of each query that
        ran, the stopped one at its bound): those seconds plus the best's time of each query of ``queries``
        that did not run. It leans in the candidate's favour (the stopped query counts only its bound, the
        skipped ones the best's time), so a cut-off run is never ranked worse than it was."""
        rest = sum(self.best_query_s.get(q, 0.0) for q in queries if q not in done)
        return sum(done.values()) + rest

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
