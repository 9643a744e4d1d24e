"""Per-query evidence for query sets (TPC-H; issue 36 point 3): one statistic per pair of runs.

A query-set run (``agenticdb.workloads.tpch``) times each of its queries. Its total time is dominated by
the few longest queries, so a change that makes ten short queries 30 % faster is invisible in the total,
and one long query's stall moves the whole figure. Each pair of runs (candidate ``c``, best ``b``) is
therefore summarised by one statistic::

    d = Σ_q w_q · ln(b_q / c_q)          (positive = the candidate is faster)

with the weights ``w_q`` frozen from the baseline's per-query shares of its time (median time of each
query over the baseline runs, divided by the sum of those medians; Σ w_q = 1), as the live workload does
for the application's statements (``agenticdb.workloads.live``: each statement compared with itself,
weighted by its baseline share). Equivalently ``d = ln(G_b / G_c)`` with the run's score
``G = exp(Σ_q w_q ln t_q)``, the weighted geometric mean query time: the auditor's sequential test
(``agenticdb.measure.sequential``) runs on those scores exactly as on any objective, so ``exp(mean d) − 1`` is the
relative gain it reports.

Why one statistic per pair, not one per query: the queries of one run share the host's steal time, fsync
stalls and cache state, so they are not independent pairs; treating 22 per-query ratios as 22 pairs would
give the test 21 degrees of freedom it does not have. The degrees of freedom stay the pairs. The noise
prior is computed on the same statistic (``QueryWeights.noise``: twice the variance of ``ln G`` over
repeated runs of one configuration, as ``sequential.Noise.from_repeats`` does for any objective).

A run stopped by a trial limit (``Measurement.cut_off``) lacks queries: it has no score and is a screen
result only, never one side of a pair.

Pure functions of their inputs: no I/O, no clock.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agenticdb.measure.sequential import Noise
from agenticdb.models import Measurement

#: The objective whose pairs this statistic replaces (``Measurement.objective_name``).
OBJECTIVE = "total_time"


def is_query_set_run(m: Measurement) -> bool:
    """Whether ``m`` is a full query-set run: per-query times, all positive, not cut off."""
    return not m.cut_off and bool(m.per_query_s) and all(t > 0 for t in m.per_query_s.values())


@dataclass(frozen=True)
class QueryWeights:
    """The frozen per-query weights of a session's query set.

    Attributes:
        weights: query name → its share of the baseline's time (median seconds of the query over the
            baseline runs / the sum of those medians); the values sum to 1.
        runs: how many baseline runs the weights come from.
    """

    weights: Mapping[str, float]
    runs: int = 0

    @staticmethod
    def from_baseline(runs: Sequence[Measurement]) -> QueryWeights | None:
        """Weights from the baseline runs, or None when they are not all full query-set runs of the
        ``total_time`` objective with the same queries (OLTP runs, a cut-off run, another objective)."""
        if not runs or any(m.objective_name != OBJECTIVE or not is_query_set_run(m) for m in runs):
            return None
        names = set(runs[0].per_query_s)
        if any(set(m.per_query_s) != names for m in runs):
            return None
        medians = {q: statistics.median(m.per_query_s[q] for m in runs) for q in sorted(names)}
        total = sum(medians.values())
        return QueryWeights({q: t / total for q, t in medians.items()}, len(runs))

    def log_score(self, m: Measurement) -> float | None:
        """``Σ_q w_q ln t_q`` of run ``m`` (t in seconds), or None when ``m`` is cut off or lacks a
        weighted query (or has a non-positive time for one)."""
        if m.cut_off:
            return None
        total = 0.0
        for q, w in self.weights.items():
            t = m.per_query_s.get(q)
            if t is None or t <= 0:
                return None
            total += w * math.log(t)
        return total

    def score(self, m: Measurement) -> float | None:
        """The run's weighted geometric mean query time ``exp(Σ_q w_q ln t_q)`` in seconds (lower is
        better), or None as for ``log_score``."""
        s = self.log_score(m)
        return None if s is None else math.exp(s)

    def log_ratio(self, candidate: Measurement, best: Measurement) -> float | None:
        """The pair's statistic ``d = Σ_q w_q ln(best_q / candidate_q)`` (positive = candidate faster), or
        None when either run has no score (a cut-off run is a screen only)."""
        c, b = self.log_score(candidate), self.log_score(best)
        return None if c is None or b is None else b - c

    def scores(self, pairs: Sequence[tuple[Measurement, Measurement]]) -> tuple[list[float], list[float]] | None:
        """The (candidate, best) scores of ``pairs`` for the sequential test (lower is better), or None when
        a run of them has no score (the caller then judges on the objective)."""
        cand = [self.score(c) for c, _ in pairs]
        best = [self.score(b) for _, b in pairs]
        if any(v is None for v in (*cand, *best)):
            return None
        return [v for v in cand if v is not None], [v for v in best if v is not None]

    def noise(self, runs: Sequence[Measurement]) -> Noise:
        """The noise of ``d`` between two runs of one configuration, from repeated runs of it: twice the
        variance of their log scores (runs without a score are left out)."""
        scores = [s for m in runs if (s := self.score(m)) is not None]
        return Noise.from_repeats(scores)

    def top(self, n: int = 5) -> list[tuple[str, float]]:
        """The ``n`` heaviest queries with their weights, heaviest first (for the journal and logs)."""
        return sorted(self.weights.items(), key=lambda kv: -kv[1])[:n]
