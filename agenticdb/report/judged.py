"""A decision's verdict read with its evidence (``agenticdb journal show``'s Judged line): each pair's gain and
where the interval's width comes from, from the ``judged`` event (``loop.auditor.judged_event``).

Why: a new user's TPC-H trial read "tie: change +11 % [-4.8 %, +30 %], 5 pairs, 95 %: … not settled after 5
pairs" on a round whose five pairs were all ahead, and took it as "better every time, thrown away". The interval
was wide because of the session's noise prior (baseline run CV 10.8 %), pooled with the pairs' own small spread
(``measure.sequential``, "Pooled noise"); the story said neither (2026-12-07).
"""

from __future__ import annotations

import math
from typing import Any


def _pct(x: float) -> str:
    return f"{x * 100:+.0f} %" if abs(x) >= 0.095 else f"{x * 100:+.1f} %"


def disturbed_told(pairs: int) -> str:
    """``"2 disturbed pair(s) measured again"``: the pairs a decision discarded because the host disturbed a run of
    them (``loop.auditor.Assessment.disturbed``; the ``judged`` event's ``disturbed``), "" for none. The story's
    Judged line and the rounds table of ``tune`` and ``report`` (``RoundOutcome.disturbed_pairs``) say it alike."""
    return f"{pairs} disturbed pair(s) measured again" if pairs else ""


def pairs_told(d: dict[str, Any]) -> str:
    """``"pairs: +12 %, +8 %, +15 % (the candidate ahead in 3 of 3)"``: each pair's gain on the statistic the test
    used (the event's ``pair_gains``; a query set's ``d`` in journals written before them), so a tie on pairs that
    all point one way is read with its reason (:func:`width_told`), not as "better every time, thrown away"."""
    gains = d.get("pair_gains")
    if not isinstance(gains, list) and isinstance(d.get("d"), list):
        gains = [math.expm1(x) for x in d["d"] if isinstance(x, int | float)]
    gains = [g for g in gains or [] if isinstance(g, int | float)]
    if not gains:
        return ""
    ahead = sum(1 for g in gains if g > 0)
    return f"pairs: {', '.join(_pct(g) for g in gains)} (the candidate ahead in {ahead} of {len(gains)})"


def prior_told(w: dict[str, Any]) -> str:
    """The session's noise prior as the width line quotes it, from the event's ``width``: ``prior_cv``,
    ``prior_df`` and where it came from (``prior_runs`` baseline runs, ``prior_pairs`` pairs of ``prior_decisions``
    earlier decisions; ``measure.sequential.Noise``):

    - ``the noise prior (run CV 10.8 %, 9 df: 10 baseline runs)``, ``(… 11 df: 10 baseline runs and 3 pairs of 1
      earlier decision)``;
    - ``the noise prior (run CV 3.1 %, 2 df: 3 pairs of 1 earlier decision; the baseline's one run measured no
      spread)`` after a one-run baseline (``loop.baseline``);
    - ``no noise prior: not measured (the baseline's one run, and no earlier pairs measured a spread)``: the
      interval then rests on these pairs and the 5 % floor. The 10 % run CV the baseline line quotes for a one-run
      baseline (``report.labels.noise_said``) is not used by the interval (``measure.sequential._interval``), so
      it is not said here.

    After a one-run baseline the line read "N df: baseline runs and earlier pairs" when only earlier pairs had
    measured any noise. Journals written before the counts keep that wording ("no noise prior yet" without df).
    """
    df = int(w.get("prior_df") or 0)
    cv = f"run CV {float(w.get('prior_cv') or 0) * 100:.1f} %, {df} df"
    if "prior_runs" not in w:  # written before the counts
        return f"the noise prior ({cv}: baseline runs and earlier pairs)" if df else "no noise prior yet"
    runs, pairs, decisions = (int(w.get(k) or 0) for k in ("prior_runs", "prior_pairs", "prior_decisions"))
    one_run = "the baseline's one run" if runs == 1 else "no baseline run" if runs == 0 else ""
    if not df:  # two baseline runs or more always measure a spread (df = runs - 1)
        return f"no noise prior: not measured ({one_run}, and no earlier pairs measured a spread)"
    parts = [f"{runs} baseline runs"] if runs >= 2 else []
    if pairs:
        parts.append(f"{pairs} pair{'s' * (pairs != 1)} of {decisions} earlier decision{'s' * (decisions != 1)}")
    unmeasured = f"; {one_run} measured no spread" if runs == 1 else ""
    return f"the noise prior ({cv}: {' and '.join(parts)}{unmeasured})"


def width_told(d: dict[str, Any]) -> str:
    """Where the interval's width comes from (the event's ``width``, ``measure.sequential.interval_width``): the
    per-pair spread it used and what set it — these pairs' own spread pooled with the session's noise prior
    (:func:`prior_told`), the 5 % floor or the runs' own series — and the looks the confidence is shared over. ""
    for journals written before ``width``."""
    w = d.get("width")
    if not isinstance(w, dict) or not isinstance(w.get("sd"), int | float):
        return ""
    own = f"these pairs' own {float(w.get('pairs_sd') or 0) * 100:.1f} %"
    prior = prior_told(w)
    source = {
        "floor": f"the 5 % floor ({own}; {prior})",
        "series": f"the runs' own per-second series ({own}; {prior})",
    }.get(str(w.get("bound")), f"{own} pooled with {prior}")
    many = (w.get("looks") or 0) > 1
    looks = f"; {float(d.get('confidence') or 0.95) * 100:.0f} % shared by {w['looks']} looks" if many else ""
    return f"interval width: per-pair sd {float(w['sd']) * 100:.1f} % (log-ratio) = {source}{looks}"


__all__ = ["pairs_told", "prior_told", "width_told"]
