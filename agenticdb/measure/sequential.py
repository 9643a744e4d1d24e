"""Sequential paired test: is a candidate configuration better than the best one, at a stated confidence?

The auditor compares configurations on interleaved runs (best, candidate, candidate, best, …) so that
drift in the data or the host hits both alike (docs/measurement.md, "Decisions"). Each pair ``i`` gives
the log-ratio ``d_i = ln(candidate_i / best_i)`` (``ln(best_i / candidate_i)`` when lower is better), so a
positive ``d`` means the candidate was better in that pair and ``exp(mean d) − 1`` is the relative gain.

After every pair (from ``min_pairs`` on) the test computes a t-interval for the mean log-ratio and stops
as soon as the question is settled:

* **better**: the interval lies above zero, the estimate beats ``min_gain`` and most pairs agree;
* **worse**: the interval lies below zero (or the p95 latency guard is broken beyond doubt);
* **tie, settled**: the interval's upper end is below ``min_gain``: whatever the truth, the candidate
  cannot beat the best by the minimum gain that counts;
* otherwise another pair is measured, up to ``max_pairs`` (or the caller's time cap), after which the
  decision is a tie: "not settled".

Two things make clear effects settle in 2–3 pairs on a noisy host without letting noise through:

1. **Pooled noise.** Two pairs alone estimate their own spread badly (one degree of freedom). The test
   pools their spread with the session's earlier knowledge of the noise — the baseline's repeated runs
   and the residuals of every earlier paired decision — as the pooled variance of a two-sample t-test
   does, and never below a per-pair floor of 5 % (the lowest run-to-run CV docs/measurement.md reports
   for PostgreSQL even with pristine data resets) or below what the runs' own per-second series say
   (``objective_se``).
2. **Repeated looks are paid for.** Looking after every pair and stopping at the first significant look
   raises the false-positive rate. The interval at each look uses ``α / K`` for ``K`` possible looks
   (Bonferroni), so the whole sequence of intervals holds with the stated confidence at once (a
   confidence sequence): the interval the user sees is the one the decision used, and "95 %" means 95 %
   over the whole sequential procedure.

Pure functions of their inputs: no I/O, no clock. Sources: Student's t pooled-variance interval (any
statistics text, e.g. NIST/SEMATECH e-Handbook §7.3.1); Bonferroni correction for multiple looks
(Jennison & Turnbull, *Group Sequential Methods*, 2000, ch. 2 discusses it as the conservative bound).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from scipy import stats

from agenticdb.measure.series import PAIR_SD_FLOOR

Verdict = Literal["better", "worse", "tie"]


#: Paired log-ratios within ±1 % of zero neither support nor contradict a direction.
NEUTRAL = math.log(1.01)


@dataclass(frozen=True)
class Noise:
    """Pooled estimate of the variance of one pair's log-ratio when nothing changed.

    Attributes:
        var: variance of ``ln(x_a / x_b)`` for two runs of the same configuration (dimensionless, log
            scale; 2 × the per-run variance of ``ln(objective)``).
        df: degrees of freedom behind ``var`` (0 = nothing measured yet).
        baseline_runs: the baseline's runs behind it (:meth:`from_repeats`; 1 = a one-run baseline, which
            measures no spread and adds no df).
        pairs: the earlier decisions' pairs behind it, of decisions with two pairs or more (one pair shows no
            spread: :meth:`from_pairs`).
        decisions: how many decisions those pairs came from.

    The three counts say where the noise came from (the ``judged`` event's ``width``, the story's "interval width"
    line): a one-run baseline pooled with one decision's three pairs read "baseline runs and earlier pairs".
    """

    var: float = 0.0
    df: int = 0
    baseline_runs: int = 0
    pairs: int = 0
    decisions: int = 0

    @staticmethod
    def from_repeats(values: Sequence[float]) -> Noise:
        """Noise from repeated runs of one configuration (e.g. the baseline's objective values).

        Non-positive values are ignored (a log-ratio needs positive objectives); with fewer than two left the
        spread is unmeasured (``var`` and ``df`` 0) and ``baseline_runs`` still counts them.
        """
        logs = [math.log(v) for v in values if v > 0]
        if len(logs) < 2:
            return Noise(baseline_runs=len(logs))
        return Noise(2.0 * statistics.variance(logs), len(logs) - 1, baseline_runs=len(logs))

    @staticmethod
    def from_pairs(log_ratios: Sequence[float]) -> Noise:
        """Noise from one decision's paired log-ratios: their spread around their own mean (nothing from one)."""
        if len(log_ratios) < 2:
            return Noise()
        return Noise(statistics.variance(log_ratios), len(log_ratios) - 1, pairs=len(log_ratios), decisions=1)

    def pool(self, other: Noise) -> Noise:
        """The pooled estimate of two independent estimates of the same variance (weighted by df); the counts of
        where it came from add up."""
        df = self.df + other.df
        var = (self.var * self.df + other.var * other.df) / df if df else 0.0
        return Noise(
            var,
            df,
            self.baseline_runs + other.baseline_runs,
            self.pairs + other.pairs,
            self.decisions + other.decisions,
        )

    @property
    def run_cv(self) -> float:
        """The per-run coefficient of variation this noise corresponds to (≈ sd of ln objective)."""
        return math.sqrt(self.var / 2.0)


@dataclass(frozen=True)
class SequentialPolicy:
    """How the sequential test decides.

    Attributes:
        min_gain: smallest relative gain that counts (0.03 = 3 %); also the equivalence margin.
        confidence: overall confidence of the whole sequence of intervals (0.95).
        min_pairs: pairs measured before any verdict (2: one pair cannot show agreement).
        max_pairs: pairs after which an unsettled decision is a tie.
        agreement: share of pairs that must point the same way as the estimate for better/worse
            (a guard against one disturbed pair carrying the mean at small n).
        latency_guard: with a throughput objective, a candidate whose paired p95 latency is worse by
            more than this fraction (and beyond doubt) is worse whatever its throughput; None = off.
        planned_pairs: the most pairs this decision can measure, fixed before its first pair (e.g. by the
            time left and the runs' cost); None = ``max_pairs``. The error rate is split over the looks
            that can happen (Bonferroni is valid for any number of looks fixed in advance), so a decision
            the budget allows only 2 pairs looks once at the whole α instead of at α / 5; the caller ends
            the decision at that many pairs.
    """

    min_gain: float = 0.03
    confidence: float = 0.95
    min_pairs: int = 2
    max_pairs: int = 6
    agreement: float = 0.75
    latency_guard: float | None = None
    planned_pairs: int | None = None

    @property
    def last_pair(self) -> int:
        """The pair after which the decision ends at the latest: ``max_pairs``, or fewer when planned."""
        if self.planned_pairs is None:
            return self.max_pairs
        return max(min(self.planned_pairs, self.max_pairs), self.min_pairs)

    @property
    def looks(self) -> int:
        """Number of looks the error rate is split over (one after each pair from ``min_pairs`` on, up to
        ``last_pair``)."""
        return max(self.last_pair - self.min_pairs + 1, 1)

    @property
    def alpha_per_look(self) -> float:
        """Two-sided error rate of each look's interval (Bonferroni over ``looks``)."""
        return (1.0 - self.confidence) / self.looks


@dataclass(frozen=True)
class Estimate:
    """The estimated relative gain of the candidate with its interval (positive = better).

    ``gain``, ``low`` and ``high`` are relative (0.24 = +24 %); ``confidence`` is the overall confidence
    of the sequential procedure the interval belongs to; ``sd`` the per-pair standard deviation of the
    log-ratio used, with ``df`` degrees of freedom.
    """

    gain: float
    low: float
    high: float
    pairs: int
    confidence: float
    sd: float = 0.0
    df: int = 0

    def text(self) -> str:
        """Human form, e.g. ``"+24 % [+11 %, +38 %], 5 pairs, 95 %"``."""
        return (
            f"{_pct(self.gain)} [{_pct(self.low)}, {_pct(self.high)}], "
            f"{self.pairs} pair{'s' if self.pairs != 1 else ''}, {self.confidence * 100:.0f} %"
        )


@dataclass(frozen=True)
class PairDecision:
    """Result of one look: a verdict (None = not settled, measure another pair), the estimate, a reason.

    ``capped``: the verdict is a tie only because ``max_pairs`` or the caller's time cap was reached, not
    because the rules settled it (the caller may call such an end "undecided" when the cap was not the
    decision's own).
    """

    verdict: Verdict | None
    estimate: Estimate
    reason: str
    capped: bool = False

    @property
    def settled(self) -> bool:
        return self.verdict is not None


def _pct(x: float) -> str:
    return f"{x * 100:+.0f} %" if abs(x) >= 0.095 else f"{x * 100:+.1f} %"


def log_ratios(candidate: Sequence[float], best: Sequence[float], higher_is_better: bool) -> list[float]:
    """Per-pair ``ln(candidate/best)`` oriented so that positive = candidate better.

    Raises:
        ValueError: different lengths, or a non-positive objective (no ratio exists).
    """
    if len(candidate) != len(best):
        raise ValueError(f"paired samples differ in length: {len(candidate)} candidate vs {len(best)} best")
    out = []
    for c, b in zip(candidate, best, strict=True):
        if c <= 0 or b <= 0:
            raise ValueError(f"objective values must be positive for a ratio (candidate {c}, best {b})")
        d = math.log(c / b)
        out.append(d if higher_is_better else -d)
    return out


def t_half_width(var: float, n: int, df: int, alpha: float) -> float:
    """Half-width of the two-sided ``1 - alpha`` Student-t interval for the mean of ``n`` values whose
    variance is ``var`` (estimated with ``df`` degrees of freedom): ``t(1 - alpha/2, df) * sqrt(var / n)``.
    The one paired interval of agenticdb (decisions, detectable gains, the live report's per-statement
    changes)."""
    return float(stats.t.ppf(1.0 - alpha / 2.0, df)) * math.sqrt(var / n)


def _interval(ds: Sequence[float], prior: Noise, within_var: float, alpha: float) -> tuple[float, float, float, int]:
    """Mean, half-width, sd and df of the t-interval for the mean log-ratio with pooled noise."""
    n = len(ds)
    mean = statistics.fmean(ds)
    pooled = prior.pool(Noise.from_pairs(ds))
    var = max(pooled.var, PAIR_SD_FLOOR**2, within_var)
    df = max(pooled.df, 1)
    return mean, t_half_width(var, n, df, alpha), math.sqrt(var), df


def _agreement(ds: Sequence[float], direction: float) -> float:
    """Share of pairs that do not contradict ``direction`` (pairs within ±1 % are neutral)."""
    return sum(1 for d in ds if abs(d) <= NEUTRAL or (d > 0) == (direction > 0)) / len(ds)


def decide(
    candidate: Sequence[float],
    best: Sequence[float],
    higher_is_better: bool,
    policy: SequentialPolicy,
    prior: Noise = Noise(),
    within_se: Sequence[float] = (),
    p95: tuple[Sequence[float], Sequence[float]] | None = None,
    final: bool = False,
) -> PairDecision:
    """One look of the sequential test over the pairs measured so far.

    Args:
        candidate: objective of the candidate in each pair (positive numbers, any unit).
        best: objective of the best configuration in the same pairs (same length).
        higher_is_better: objective direction (TPS/p95, TPS: True; p95, total time: False).
        policy: thresholds (see ``SequentialPolicy``).
        prior: the session's pooled noise from earlier runs (baseline repeats, earlier decisions).
        within_se: relative standard errors of the runs' objectives from their per-second series
            (``Measurement.objective_se / objective``), all runs of these pairs; they floor the variance.
        p95: (candidate p95 ms, best p95 ms) per pair for the latency guard; None = no guard.
        final: the caller's time cap is reached: an unsettled look becomes a tie.

    Returns:
        PairDecision; ``verdict`` None means "measure another pair".

    Raises:
        ValueError: empty or mismatched samples, or non-positive objectives.
    """
    if not candidate:
        raise ValueError("the sequential test needs at least one pair")
    ds = log_ratios(candidate, best, higher_is_better)
    mean, half, est = _estimate(ds, policy, prior, within_se)
    if len(ds) < policy.min_pairs and not final:
        return PairDecision(None, est, f"{est.text()}: fewer than {policy.min_pairs} pairs, measuring another")
    if len(ds) < 2 and prior.df == 0:
        # one pair and no spread measured before it (a one-run baseline): its interval would rest on the floors alone
        why = "one pair and no noise measured before it (a one-run baseline)"
        if not final:
            return PairDecision(None, est, f"{est.text()}: {why}, measuring another")
        said = f"change {est.text()}: not settled, {why}; a tie keeps the simpler config"
        return PairDecision("tie", est, said, True)
    if p95 is not None and policy.latency_guard is not None:
        guard = _latency_guard(p95, policy, prior, len(ds))
        if guard:
            return PairDecision("worse", est, f"{est.text()}; {guard}")
    return _rules(ds, mean, half, est, policy, final)


def _estimate(
    ds: Sequence[float], policy: SequentialPolicy, prior: Noise, within_se: Sequence[float]
) -> tuple[float, float, Estimate]:
    """Mean log-ratio, half-width of its interval at this look, and the Estimate (relative gain) they give."""
    within_var = 0.0
    if within_se:
        # One pair's log-ratio carries the sampling error of both runs: 2 × the mean squared relative SE.
        within_var = 2.0 * statistics.fmean(se * se for se in within_se)
    mean, half, sd, df = _interval(ds, prior, within_var, policy.alpha_per_look)
    est = Estimate(
        gain=math.exp(mean) - 1.0,
        low=math.exp(mean - half) - 1.0,
        high=math.exp(mean + half) - 1.0,
        pairs=len(ds),
        confidence=policy.confidence,
        sd=sd,
        df=df,
    )
    return mean, half, est


def _rules(
    ds: Sequence[float], mean: float, half: float, est: Estimate, policy: SequentialPolicy, final: bool
) -> PairDecision:
    """The stopping rules of the module docstring (better, worse, settled tie, unsettled) at one look."""
    said = est.text()
    n = len(ds)
    agree = _agreement(ds, mean)
    margin = math.log1p(policy.min_gain)
    if mean - half > 0 and mean > margin and agree >= policy.agreement:
        return PairDecision("better", est, f"gain {said}: above zero and beyond min_gain {policy.min_gain:.0%}")
    if mean + half < 0 and agree >= policy.agreement:
        return PairDecision("worse", est, f"loss {said}: below zero beyond the noise")
    if mean + half < margin:
        return PairDecision(
            "tie", est, f"change {said}: cannot beat min_gain {policy.min_gain:.0%}; a tie keeps the simpler config"
        )
    if n >= policy.last_pair or final:
        if n >= policy.max_pairs:
            why = f"after {n} pairs"
        elif n >= policy.last_pair:
            why = f"at the {n} pairs the decision's time cap allows"
        else:
            why = "when the decision's time cap was reached"
        if agree < policy.agreement:
            why += f", pairs disagree in direction ({', '.join(_pct(math.expm1(d)) for d in ds)})"
        return PairDecision("tie", est, f"change {said}: not settled {why}; a tie keeps the simpler config", True)
    return PairDecision(None, est, f"{said}: not settled yet, measuring another pair")


def _latency_guard(p95: tuple[Sequence[float], Sequence[float]], policy: SequentialPolicy, prior: Noise, n: int) -> str:
    """A reason text when the candidate's p95 is worse than the guard allows beyond doubt, else ''."""
    cand, best = p95
    if len(cand) != n or len(best) != n or any(v <= 0 for v in (*cand, *best)):
        return ""
    worse = [math.log(c / b) for c, b in zip(cand, best, strict=True)]  # positive = slower
    # p95 moves like 1/TPS with a fixed client count (docs/measurement.md), so the same pooled noise applies.
    mean, half, _, _ = _interval(worse, prior, 0.0, policy.alpha_per_look)
    assert policy.latency_guard is not None
    if mean > math.log1p(policy.latency_guard) and mean - half > 0:
        return (
            f"p95 latency worse by {_pct(math.expm1(mean))} [{_pct(math.expm1(mean - half))}, "
            f"{_pct(math.expm1(mean + half))}], beyond the latency guard of +{policy.latency_guard:.0%}"
        )
    return ""


def interval_width(ds: Sequence[float], prior: Noise, est: Estimate, looks: int) -> dict[str, float | int | str]:
    """Where an interval's width comes from, for the journal (``judged`` event's ``width``) and the DBA.

    Args:
        ds: the pairs' oriented log-ratios the estimate rests on.
        prior: the session's noise before these pairs (the baseline's repeats and earlier decisions' pairs).
        est: the estimate decided on (its ``sd`` is the per-pair sd of the log-ratio the interval used).
        looks: the looks the confidence is shared over (``SequentialPolicy.looks``, Bonferroni).

    Returns:
        ``sd`` (per-pair sd of ln ratio used), ``df``, ``pairs_sd`` (these pairs' own sd around their mean; 0
        with fewer than 2), ``prior_cv`` and ``prior_df`` (the prior's per-run CV and degrees of freedom),
        ``prior_runs``, ``prior_pairs`` and ``prior_decisions`` (where the prior came from: the baseline's runs, the
        earlier decisions' pairs and their number, ``Noise``), ``looks``, and ``bound``: "pooled" (the pairs pooled
        with the prior, ``_interval``), "floor" (the per-pair floor ``PAIR_SD_FLOOR``, 5 %) or "series" (the runs' own
        per-second series, ``within_se``).
        A new user read a tie on 5 of 5 pairs ahead as "better every time, thrown away": the width was the
        prior's (run CV 10.8 %), not the pairs' spread (2026-12-07). Pure.
    """
    pooled = prior.pool(Noise.from_pairs(ds))
    var = est.sd * est.sd
    bound = "pooled"
    if var > pooled.var * (1 + 1e-9) + 1e-15:
        bound = "floor" if math.isclose(est.sd, PAIR_SD_FLOOR, rel_tol=1e-9) else "series"
    return {
        "sd": est.sd,
        "df": est.df,
        "pairs_sd": statistics.stdev(ds) if len(ds) >= 2 else 0.0,
        "prior_cv": prior.run_cv,
        "prior_df": prior.df,
        "prior_runs": prior.baseline_runs,
        "prior_pairs": prior.pairs,
        "prior_decisions": prior.decisions,
        "looks": looks,
        "bound": bound,
    }


def detectable_gain(prior: Noise, policy: SequentialPolicy) -> float:
    """The smallest relative gain a decision can settle as better within ``max_pairs`` pairs when the
    noise is ``prior`` (its interval at the last look just clears zero); 0.25 = +25 %.

    Used to tell the user, after the baseline, which effects this host's noise leaves visible.
    """
    n = max(policy.max_pairs, 1)
    var = max(prior.var, PAIR_SD_FLOOR**2)
    df = max(prior.df + n - 1, 1)
    half = t_half_width(var, n, df, policy.alpha_per_look)
    return max(math.expm1(half), policy.min_gain)
