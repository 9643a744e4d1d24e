"""Which of the application's statements changed time most, per round of a live session (``workload.kind
= "live"``), from the journal's ``measured`` events (each carries ``live_queries``).

A round's windows are paired as the auditor paired them (``auditor.assess``), by the pair number in their
labels: the candidate window of pair N (``candidate`` for pair 1, ``confirm candidate N``) with the best
window of pair N (``confirm best N``); a pair measured again after a disturbed run keeps its later windows.
When pair 1's best run was the one measured just before the trial (``judged.reused_best_run``: the
baseline's last window, or the previous round's last), ``round_windows`` adds that window as pair 1's best
one; without it the screen has no partner and is left out. Per statement
and pair, the log-ratio of its mean time (candidate / best); the change is ``exp(mean) − 1`` with a
Student-t 95 % interval over the pairs (the same construction as ``agenticdb.measure.sequential``, without the
pooled prior: each statement has its own spread). A pair in which the statement had no call is left out.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from agenticdb.measure.sequential import t_half_width

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
        half = t_half_width(statistics.variance(logs), len(logs), len(logs) - 1, 1.0 - CONFIDENCE)
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


def round_windows(events: Iterable[Any], round_no: int) -> list[dict[str, Any]]:
    """The ``measured`` event data of round ``round_no``, in journal order, and, when its ``judged`` event
    says pair 1 reused the best run measured just before the trial, that run (the ``measured`` event right
    before the round's screen, from the baseline or the round before) labelled ``confirm best 1``.
    ``events``: journal events in order, with ``event``, ``round_no`` and ``data``."""
    out: list[dict[str, Any]] = []
    previous: dict[str, Any] | None = None
    reused = False
    for e in events:
        if e.event == "judged" and e.round_no == round_no:
            reused = bool(e.data.get("reused_best_run"))
        if e.event != "measured":
            continue
        if e.round_no == round_no:
            if not out and previous is not None and e.data.get("label") == "candidate":
                out.append({**previous, "label": "confirm best 1", "reused": True})
            out.append(e.data)
        previous = e.data
    return out if reused else [d for d in out if not d.get("reused")]


def live_report_lines(events: Iterable[Any], top: int = 5) -> list[str]:
    """Markdown lines "Application statements whose time changed most", per round (empty when the
    session was not live). ``events``: journal events with ``event``, ``round_no`` and ``data``."""
    events = list(events)
    live = [e for e in events if e.event == "measured" and (e.data.get("measurement") or {}).get("live_queries")]
    rounds = sorted({int(e.round_no) for e in live if e.round_no is not None})
    lines: list[str] = []
    for rno in rounds:
        changes = round_changes(rno, round_windows(events, rno))[:top]
        if changes:
            lines += ["", f"## Round {rno}: application statements whose time changed most (candidate vs best)", ""]
            lines += [f"- {c.text_line()}" for c in changes]
    return lines
