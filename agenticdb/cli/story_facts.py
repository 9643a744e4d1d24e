"""What ``agenticdb journal show``'s story reads across a session's events before telling them: the runs a later
``run.disturbed`` event discards, the title of an opening round's block, an event written late about an earlier
round, and the notes of the Session end's Objective line (the best configuration re-measured, the gain against
the start when the baseline is stale or disturbed). Pure functions of the event list; the telling is
:mod:`agenticdb.cli.story`'s, which was 600 lines with them.
"""

from __future__ import annotations

from typing import Any

from agenticdb.models import opening_label
from agenticdb.report.labels import gain_over, higher_is_better, start_reference
from agenticdb.store.journal_events import JournalEvent


def number(value: Any, digits: int = 2) -> str:
    """``value`` as the story prints a number: ``"1,465.00"`` (thousands separated, ``digits`` decimals), ``"-"``
    for None."""
    return "-" if value is None else f"{float(value):,.{digits}f}"


def discarded_runs(events: list[JournalEvent]) -> dict[float, str]:
    """``taken_at`` → why, for each run a ``run.disturbed`` event discards: the run the host disturbed, and the
    other run of its pair (``pair_with``: a pair must see the same host). A baseline run kept for want of
    repeats (``kept``) is not discarded. Events written before they carried ``taken_at`` mark nothing."""
    out: dict[float, str] = {}
    for e in events:
        if e.event != "run.disturbed" or e.data.get("kept"):
            continue
        if isinstance(e.data.get("taken_at"), int | float):
            out[float(e.data["taken_at"])] = "discarded: the host disturbed it"
        other = e.data.get("pair_with") or {}
        if isinstance(other.get("taken_at"), int | float):
            out.setdefault(float(other["taken_at"]), f"discarded with its pair ({e.data.get('label')} was not usable)")
    return out


def remeasured_note(events: list[JournalEvent]) -> str:
    """``" (nothing kept; the starting configuration re-measured 1,465.000 in round 3's pairs)"``: the
    best configuration's latest runs after the round that made it best (the ``judged`` events'
    ``best_median``), as ``tune``'s summary says it (issue 39); "" when it was not measured again."""
    kept, again = None, None
    for e in events:
        if e.event == "decision" and e.data.get("kept"):
            kept, again = e.round_no, None
        elif e.event == "judged" and isinstance(e.data.get("best_median"), int | float) and e.round_no != kept:
            again = (e.round_no, float(e.data["best_median"]))
    if again is None:
        return " (nothing kept)" if kept is None else ""
    who = "the starting configuration" if kept is None else f"round {kept}'s kept configuration"
    return (
        f" ({'nothing kept; ' if kept is None else ''}{who} re-measured {number(again[1])} in round {again[0]}'s pairs)"
    )


def baseline_disturbed(events: list[JournalEvent]) -> tuple[int, int]:
    """(disturbed runs the baseline used, baseline runs): the baseline's ``run.disturbed`` events (round 0) with
    ``kept`` true — runs the host disturbed (``Measurement.disturbed``) kept for want of repeats — and the
    ``baseline`` event's objectives; (0, 0) without a baseline."""
    runs = next((len(e.data.get("objectives") or []) for e in events if e.event == "baseline"), 0)
    used = sum(1 for e in events if e.event == "run.disturbed" and e.round_no == 0 and e.data.get("kept"))
    return used, runs


def start_gain_note(events: list[JournalEvent]) -> str:
    """``" (+4.2 % against the start as re-measured 1,440.00 in round 2's undisturbed pairs; the baseline is
    stale (…))"``: the kept configuration's gain when the baseline is stale or disturbed
    (``agenticdb.report.labels.start_reference``), against the start as the first kept round's pairs measured it
    (the ``judged`` event's ``best_median``); "" while the baseline stands, or nothing was kept."""
    end = next((e.data for e in events if e.event == "session.end"), {})
    base_ev = next((e.data for e in events if e.event == "baseline"), {})
    base, best = end.get("baseline_objective"), end.get("best_objective")
    if not isinstance(base, int | float) or not isinstance(best, int | float):
        return ""
    medians = {e.round_no: e.data.get("best_median") for e in events if e.event == "judged"}
    kept = next((e.round_no for e in events if e.event == "decision" and e.data.get("kept")), None)
    if kept is None:
        return ""
    level = medians.get(kept)
    again = (kept, float(level)) if isinstance(level, int | float) else None
    cv = base_ev.get("noise_cv")
    cv = float(cv) if isinstance(cv, int | float) else 0.0
    reference, why = start_reference(float(base), again, cv, baseline_disturbed(events), number)
    if not why:
        return ""
    higher = base_ev.get("higher_is_better", higher_is_better(base_ev.get("objective_name")))
    gain = f"{gain_over(float(best), reference, bool(higher)):+.1%}".replace("%", " %")
    return f" ({gain} against {why})"


def late_event(ev: JournalEvent, current: int | None) -> bool:
    """True for an event about an earlier round written while a later round runs (the race closes the previous
    screen's intent once the next screen's switch holds its own): told inside the round it happened in, never
    by re-opening the earlier round's block."""
    return ev.round_no is not None and current is not None and 0 < ev.round_no < current


def round_titles(events: list[JournalEvent]) -> dict[int, str]:
    """Round → what its block is about when it is one of the opening's (``Round 2 · opening screen of
    'evidence'``), from the round's first proposal of the opening; other rounds are left out."""
    titles: dict[int, str] = {}
    for e in events:
        if e.event == "proposal" and e.round_no is not None and e.round_no not in titles:
            d = e.data
            if which := opening_label(d.get("stage"), d.get("planner"), d.get("rationale")):
                titles[e.round_no] = f"Round {e.round_no} · {which}"
    return titles
