"""Which effect a round measured, in words a DBA can quote: the paired estimate, the medians of the pairs a
decision ran when they were too few for an estimate, or one screen run — never a screen that was cut off or
disturbed, and never a screen against a baseline that is stale (:func:`agenticdb.report.labels.start_reference`).

A user read "largest effect seen -73.2% (screen, one run)" for a round whose only valid pair had the candidate
ahead, and "-17.5%" for a screen cut off after 15.7 s on a disturbed host: both were one run against a baseline
measured earlier, not the change's effect.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from agenticdb.models import RoundOutcome
from agenticdb.report.labels import start_reference


def screen_fault(r: RoundOutcome) -> str:
    """Why a round's screen run says nothing about its effect: "cut off after 15.7 s", "disturbed", both
    joined by ", "; "" for a full, undisturbed run (or no run). A run stopped early
    (``Measurement.cut_off``, ``agenticdb.measure.trial_limit``) has an objective estimated from its first
    seconds; a disturbed one (``Measurement.disturbed``) measured the host's other load as much as the change."""
    m = r.measurement
    if m is None:
        return ""
    faults = [f"cut off after {m.duration_s:.1f} s"] if m.cut_off else []
    if m.disturbed:
        faults.append("disturbed")
    return ", ".join(faults)


def paired_medians_gain(r: RoundOutcome) -> float | None:
    """The relative gain of the candidate's median over the best configuration's median in the same pairs
    (positive = better, the objective's direction from the run), when a decision ran pairs but had too few
    for an estimate; None with an estimate, or without paired medians (``RoundOutcome.medians_gain``)."""
    return r.medians_gain


def round_effect(r: RoundOutcome) -> str:
    """A round's effect for its line in the rounds table: the estimate's text; "+4.0% (medians of the
    decision's pairs, too few for an interval)"; "-36.0% (screen only)" for one clean screen run; "— (screen cut
    off after 15.7 s, disturbed: no effect measured)"; "— (no valid pair: no effect measured)" for a decision that
    kept no pair (``RoundOutcome.unpaired``); "—" when nothing was measured."""
    if r.estimate is not None:
        return r.estimate.text
    paired = paired_medians_gain(r)
    if paired is not None:
        return f"{paired:+.1%} (medians of the decision's pairs, too few for an interval)"
    if r.gain_vs_best is None:
        return "—"
    fault = screen_fault(r)
    if fault:
        return f"— (screen {fault}: no effect measured)"
    if r.unpaired:
        return "— (no valid pair: no effect measured)"
    return f"{r.gain_vs_best:+.1%} (screen only)"


def decision_effect(r: RoundOutcome) -> str:
    """A round's effect on ``journal show``'s decision line, only as far as it was measured
    (``RoundOutcome.counted_gain``): "estimate +24 % [+11 %, +38 %], 5 pairs, 95 %"; "+4.0% in the medians of
    the decision's pairs, too few for an interval"; "-36.0% in one screen run (not an interval)"; "no effect
    measured (screen disturbed)" when the host disturbed the only run or the trial bound cut it off, "no effect
    measured (no valid pair)" for a decision that kept no pair (``RoundOutcome.unpaired``); "" when nothing was
    measured. A fresh user read "gain vs best -2.4%" beside "one run the host disturbed: no gain
    counted", and a gain for a round with no valid pair."""
    if r.estimate is not None:
        return f"estimate {r.estimate.text}"
    paired = r.medians_gain
    if paired is not None:
        return f"{paired:+.1%} in the medians of the decision's pairs, too few for an interval"
    if r.gain_vs_best is None:
        return ""
    fault = screen_fault(r)
    if fault:
        return f"no effect measured (screen {fault})"
    if r.unpaired:
        return "no effect measured (no valid pair)"
    return f"{r.gain_vs_best:+.1%} in one screen run (not an interval)"


def decision_event_effect(event: dict[str, Any]) -> str:
    """:func:`decision_effect` of a ``decision`` journal event (a dumped ``RoundOutcome`` with its ``steps``); an
    event this version cannot read as one (an older record) quotes its estimate only, or nothing."""
    try:
        r = RoundOutcome.model_validate({k: v for k, v in event.items() if k != "steps"})
    except ValidationError:
        estimate = event.get("estimate")
        return f"estimate {estimate['text']}" if isinstance(estimate, dict) and estimate.get("text") else ""
    return decision_effect(r)


def _where(r: RoundOutcome, verdict: str) -> str:
    changes = ", ".join(f"{k}={v}" for k, v in r.changes.items()) or "no change"
    label = f", {r.opening_label}" if r.opening_label else ""
    return f"(round {r.round_no}{label}: {changes}{f'; {verdict}' if verdict else ''})"


def effect_summary(
    rounds: list[RoundOutcome],
    verdict: dict[int, str],
    base: float | None = None,
    start_again: tuple[int, float] | None = None,
    noise_cv: float = 0.0,
    disturbed: tuple[int, int] = (0, 0),
) -> str:
    """The end summary's line when nothing was kept: the largest effect a decision measured, with the change
    it belongs to. ``verdict`` maps a round number to its verdict text; ``base`` the baseline's median,
    ``start_again`` (round, median) of the start in a later decision's pairs, ``noise_cv`` and ``disturbed``
    as in :func:`agenticdb.report.labels.start_reference`.

    In order of trust: the paired estimates (largest by magnitude, sign kept); else the medians of pairs too few
    for an estimate; else one screen run, said to be no measurement of the effect, and only when it ran full and
    undisturbed against a baseline that stands (not stale, not disturbed), and not as the first run of a decision
    that kept no valid pair (``RoundOutcome.unpaired``: its run was discarded with its pair, or never paired);
    else what the screens were.
    "" when no round measured anything."""
    estimated = [r for r in rounds if r.estimate is not None]
    if estimated:
        top = max(estimated, key=lambda r: abs(r.estimate.gain if r.estimate else 0.0))
        text = top.estimate.text if top.estimate else ""
        return f"largest effect seen (by magnitude) {text} {_where(top, verdict.get(top.round_no, ''))}"
    paired = [(g, r) for r in rounds if (g := paired_medians_gain(r)) is not None]
    if paired:
        g, top = max(paired, key=lambda x: abs(x[0]))
        return (
            f"largest effect seen (by magnitude) {g:+.1%} in the medians of a decision's pairs, too few for an "
            f"interval {_where(top, verdict.get(top.round_no, ''))}"
        )
    screens = [r for r in rounds if r.gain_vs_best is not None]
    if not screens:
        return ""
    clean = [r for r in screens if not screen_fault(r) and not r.unpaired]
    faulted = "; ".join(
        f"round {r.round_no}: screen {screen_fault(r)}" if screen_fault(r) else f"round {r.round_no}: no valid pair"
        for r in screens
        if r not in clean
    )
    _, stale = start_reference(base, start_again, noise_cv, disturbed) if base is not None else (0.0, "")
    if clean and not stale:
        top = max(clean, key=lambda r: abs(r.gain_vs_best or 0.0))
        return (
            f"no decision measured an effect; one screen run, not a measurement of the effect: "
            f"{top.gain_vs_best or 0.0:+.1%} against the baseline {_where(top, verdict.get(top.round_no, ''))}"
        )
    why = f"the baseline they ran against does not stand ({stale})" if clean else "no screen ran full and undisturbed"
    if not clean and any(r.unpaired and not screen_fault(r) for r in screens):
        why += " outside a decision that kept no valid pair"
    return f"no decision measured an effect, and no screen is quoted: {why}" + (f" ({faulted})" if faulted else "")
