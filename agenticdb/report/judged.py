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


def width_told(d: dict[str, Any]) -> str:
    """Where the interval's width comes from (the event's ``width``, ``measure.sequential.interval_width``): the
    per-pair spread it used and what set it — these pairs' own spread pooled with the session's noise prior (the
    baseline's runs and earlier decisions' pairs), the 5 % floor or the runs' own series — and the looks the
    confidence is shared over. "" for journals written before ``width``."""
    w = d.get("width")
    if not isinstance(w, dict) or not isinstance(w.get("sd"), int | float):
        return ""
    own = f"these pairs' own {float(w.get('pairs_sd') or 0) * 100:.1f} %"
    prior = (
        f"the noise prior (run CV {float(w.get('prior_cv') or 0) * 100:.1f} %, {w.get('prior_df')} df: baseline runs "
        "and earlier pairs)"
        if w.get("prior_df")
        else "no noise prior yet"
    )
    source = {
        "floor": f"the 5 % floor ({own}; {prior})",
        "series": f"the runs' own per-second series ({own}; {prior})",
    }.get(str(w.get("bound")), f"{own} pooled with {prior}")
    many = (w.get("looks") or 0) > 1
    looks = f"; {float(d.get('confidence') or 0.95) * 100:.0f} % shared by {w['looks']} looks" if many else ""
    return f"interval width: per-pair sd {float(w['sd']) * 100:.1f} % (log-ratio) = {source}{looks}"


__all__ = ["pairs_told", "width_told"]
