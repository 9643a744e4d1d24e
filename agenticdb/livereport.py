"""Which of the application's statements changed time most, per round of a live session (``workload.kind
= "live"``), from the journal's ``measured`` events (each carries ``live_queries``).

A round's windows are paired as the auditor paired them (``auditor.assess``), by the pair number in their
labels: the candidate window of pair N (``candidate`` for pair 1, ``confirm candidate N``) with the best
window of pair N (``confirm best N``); a pair measured again after a disturbed run keeps its later windows.
The screen has no partner in the round when pair 1's best run was the one measured before the trial (the
baseline's, journaled outside the round): it is left out. Per statement
and pair, the log-ratio of its mean time (candidate / best); the change is ``exp(mean) − 1`` with a
Student-t 95 % interval over the pairs (the same construction as ``agenticdb.sequential``, without the
pooled prior: each statement has its own spread). A pair in which the statement had no call is left out.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from scipy import stats

CONFIDENCE = 0.95


@dataclass(frozen=True)
class QueryChange:
    """One statement's mean-time change in a round: ``change`` = candidate/best − 1 (negative = faster),
    ``low``/``high`` its 95 % interval (None with fewer than two pairs); times in ms (medians over
    the pairs)."""

    round_no: int
    queryid: str
    text: str
    best_ms: float
    candidate_ms: float
    change: float
    low: float | None
    high: float | None
    pairs: int

    def text_line(self) -> str:
        ci = f" [{self.low:+.0%}, {self.high:+.0%}]" if self.low is not None and self.high is not None else ""
        return (
            f"`{self.queryid}` {self.text}: {self.best_ms:,.2f} ms → {self.candidate_ms:,.2f} ms "
            f"({self.change:+.0%}{ci}, {self.pairs} pairs)"
        )


def _side(label: str) -> tuple[str, int] | None:
    """(side, pair number) of a window's label, or None for a window outside the pairs."""
    if label == "candidate":
        return "candidate", 1
    for side in ("candidate", "best"):
        prefix = f"confirm {side} "
        if label.startswith(prefix) and label[len(prefix) :].isdigit():
            return side, int(label[len(prefix) :])
    return None


def _means(m: dict[str, Any]) -> dict[str, tuple[float, str]]:
    return {
        str(q["queryid"]): (float(q["mean_ms"]), str(q["text"]))
        for q in m.get("live_queries") or []
        if q.get("mean_ms") and q.get("calls")
    }


def round_changes(round_no: int, measured: Iterable[dict[str, Any]]) -> list[QueryChange]:
    """Per-statement changes of one round from its ``measured`` event data (``label``, ``measurement``),
    largest absolute change first."""
    sides: dict[str, dict[int, dict[str, tuple[float, str]]]] = {"candidate": {}, "best": {}}
    for d in measured:
        found = _side(str(d.get("label", "")))
        if found is not None:
            side, pair = found
            sides[side][pair] = _means(d.get("measurement") or {})  # a repeated pair: its later window
    per: dict[str, list[tuple[float, float]]] = {}
    texts: dict[str, str] = {}
    numbers = sorted(set(sides["candidate"]) & set(sides["best"]))
    for cand, best in ((sides["candidate"][n], sides["best"][n]) for n in numbers):
        for qid, (c_ms, text) in cand.items():
            if qid in best and c_ms > 0 and best[qid][0] > 0:
                per.setdefault(qid, []).append((c_ms, best[qid][0]))
                texts[qid] = text
    out = [_change(round_no, qid, texts[qid], pairs) for qid, pairs in per.items()]
    return sorted(out, key=lambda c: -abs(math.log1p(c.change)))


def _change(round_no: int, qid: str, text: str, pairs: list[tuple[float, float]]) -> QueryChange:
    logs = [math.log(c / b) for c, b in pairs]
    mean = statistics.fmean(logs)
    low = high = None
    if len(logs) >= 2:
        half = stats.t.ppf(0.5 + CONFIDENCE / 2, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
        low, high = math.expm1(mean - half), math.expm1(mean + half)
    return QueryChange(
        round_no=round_no,
        queryid=qid,
        text=text,
        best_ms=statistics.median(b for _, b in pairs),
        candidate_ms=statistics.median(c for c, _ in pairs),
        change=math.expm1(mean),
        low=low,
        high=high,
        pairs=len(pairs),
    )


def live_report_lines(events: Iterable[Any], top: int = 5) -> list[str]:
    """Markdown lines "Application statements whose time changed most", per round (empty when the
    session was not live). ``events``: journal events with ``event``, ``round_no`` and ``data``."""
    by_round: dict[int, list[dict[str, Any]]] = {}
    for e in events:
        if e.event == "measured" and e.round_no is not None and (e.data.get("measurement") or {}).get("live_queries"):
            by_round.setdefault(int(e.round_no), []).append(e.data)
    lines: list[str] = []
    for rno in sorted(by_round):
        changes = round_changes(rno, by_round[rno])[:top]
        if changes:
            lines += ["", f"## Round {rno}: application statements whose time changed most (candidate vs best)", ""]
            lines += [f"- {c.text_line()}" for c in changes]
    return lines
