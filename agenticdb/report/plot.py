"""The tuning curve of a session (issue 19): ``agenticdb report ID --plot FILE.png``.

Drawn from the journal only: the baseline runs (``baseline``), each trial's paired estimate and interval
(``judged``: gain, low, high relative to the best configuration's median in the same pairs), the kept
changes (``decision`` with kept = true, labelled with their knob changes), the best configuration's
median in the same pairs (what each gain is relative to), the baseline and the best objective as
horizontal lines, and the objective in effect as a step line. The opening's race (the ``race`` event's
table, ``agenticdb.loop.race.race_table``) adds one point per screened candidate at the time of its round's
``decision``, labelled with the candidate's name: its one run's objective, or for a run the race's bound
stopped early (``cut_off``) the level ``TrialLimit.estimate`` scaled from the steady seconds it ran (a
different marker). The leader's proof is a judged round like any other, labelled with the candidate it
proves (``models.opening_label``). matplotlib (the ``plot`` extra) with the non-interactive Agg backend.

A trial's interval in objective units: with best median ``b`` and relative gain ``g`` (positive =
better, ``next_move.relative_gain``) the candidate's objective is ``b·(1+g)`` when higher is better and
``b/(1+g)`` when lower is better; ``low``/``high`` map the same way.
"""

from __future__ import annotations

import io
import math
import statistics
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from agenticdb.models import opening_label
from agenticdb.report.labels import objective_label
from agenticdb.store.journal_events import JournalEvent

#: Figure size in inches and resolution: FIGSIZE × DPI = 1200 × 600 pixels.
FIGSIZE = (12.0, 6.0)
DPI = 100
#: The y axis turns logarithmic when the values span more than this ratio.
LOG_SPAN = 100.0


class PlotError(ValueError):
    """The session has nothing to draw (no baseline in the journal) or matplotlib is missing."""


@dataclass
class Trial:
    """One judged round: time (s since session start), candidate objective and its interval."""

    round_no: int
    t: float
    objective: float
    low: float | None
    high: float | None
    kept: bool = False
    label: str = ""
    best: float | None = None
    """The best configuration's median in the same pairs (what the gain is relative to)."""
    screen_only: bool = False
    """No valid pair (e.g. every pair disturbed): placed by the screen run, no interval."""
    opening: str = ""
    """The opening's candidate the round proves ("opening proof of 'evidence'"), "" for a diagnosis round."""


@dataclass
class RaceScreen:
    """One candidate's screen in the opening's race (a row of the ``race`` event's table): one run, no pairs.

    Attributes:
        round_no: the session round that screened it.
        t: seconds since the session started (its round's ``decision`` event; else the ``race`` event's).
        objective: its run's objective (objective units); a cut-off run's is the level estimated from the
            seconds it ran (``measure.trial_limit.stopped_oltp``) or the query set's time when stopped.
        name: the candidate's name ("host-sized", "evidence", "limits", …).
        cut_off: why the race's bound stopped the run early ("" when it ran to the end).
        disturbed: the host disturbed the run.
        leader: the race's leader (the candidate proven next on fresh pairs).
    """

    round_no: int
    t: float
    objective: float
    name: str
    cut_off: str = ""
    disturbed: bool = False
    leader: bool = False


@dataclass
class Curve:
    """What the plot shows, in objective units; times in seconds since the session started."""

    objective_name: str
    higher_is_better: bool
    baseline: float
    baseline_runs: list[tuple[float, float]] = field(default_factory=list)
    trials: list[Trial] = field(default_factory=list)
    steps: list[tuple[float, float]] = field(default_factory=list)
    best: float = 0.0
    screens: list[RaceScreen] = field(default_factory=list)
    """The opening race's measured screens, in race order (refused or failed candidates have no run: absent)."""


def _at(best: float, gain: float, higher: bool) -> float:
    return best * (1.0 + gain) if higher else best / (1.0 + gain) if gain > -1.0 else best


def _ts(e: JournalEvent) -> float:
    return datetime.fromisoformat(e.ts).timestamp()


def curve_of(events: list[JournalEvent]) -> Curve:
    """The curve of one session's journal events.

    Raises:
        PlotError: no ``baseline`` event (the session ended before measuring anything).
    """
    base = next((e for e in events if e.event == "baseline"), None)
    if base is None:
        raise PlotError("nothing to plot: the session has no baseline in the journal")
    t0 = _ts(events[0])
    higher = bool(base.data.get("higher_is_better", True))
    runs = [float(x) for x in base.data.get("objectives", []) if isinstance(x, int | float)]
    b = base.data.get("objective")
    baseline = float(b) if isinstance(b, int | float) else statistics.median(runs) if runs else 0.0
    curve = Curve(str(base.data.get("objective_name") or "objective"), higher, baseline)
    span = max(_ts(base) - t0, 1e-3)
    curve.baseline_runs = [(span * (i + 1) / (len(runs) + 1), r) for i, r in enumerate(runs)]
    curve.steps = [(_ts(base) - t0, baseline)]
    judged: dict[int, JournalEvent] = {e.round_no: e for e in events if e.event == "judged" and e.round_no is not None}
    curve.screens = screens_of(events, t0)
    screened = {s.round_no for s in curve.screens}
    for e in events:
        if e.event != "decision" or e.round_no is None or e.round_no not in judged or e.round_no in screened:
            continue
        trial = _trial(judged[e.round_no], e, t0, higher, curve.steps[-1][1])
        if trial is None:
            continue
        curve.trials.append(trial)
        if trial.kept:
            curve.steps.append((trial.t, trial.objective))
    end = next((e for e in reversed(events) if e.event == "session.end"), events[-1])
    best = end.data.get("best_objective") if end.event == "session.end" else None
    curve.best = float(best) if isinstance(best, int | float) else curve.steps[-1][1]
    curve.steps.append((_ts(end) - t0, curve.steps[-1][1]))
    return curve


def screens_of(events: list[JournalEvent], t0: float) -> list[RaceScreen]:
    """The measured screens of the session's ``race`` events (one per session; a skipped race has an empty
    table), placed at their round's ``decision`` time in seconds since ``t0`` (the session's first event)."""
    decided = {e.round_no: _ts(e) - t0 for e in events if e.event == "decision" and e.round_no is not None}
    out: list[RaceScreen] = []
    for race in (e for e in events if e.event == "race"):
        rows = race.data.get("table")
        leader = race.data.get("leader")
        for row in rows if isinstance(rows, list) else []:
            y, rnd = (row.get("objective"), row.get("round")) if isinstance(row, dict) else (None, None)
            if not isinstance(y, int | float) or not isinstance(rnd, int):
                continue  # refused by the validator, failed or interrupted: no run to draw
            name = str(row.get("candidate") or f"round {rnd}")
            t = decided.get(rnd, _ts(race) - t0)
            why = str(row.get("cut_off_reason") or ("cut off" if row.get("cut_off") else ""))
            out.append(
                RaceScreen(rnd, t, float(y), name, why, bool(row.get("disturbed")), bool(leader) and leader == name)
            )
    return out


def _trial(j: JournalEvent, d: JournalEvent, t0: float, higher: bool, in_effect: float) -> Trial | None:
    """A judged round as a point; a round decided on its screen run alone (no valid pair: ``best_median``
    None) is placed by its screen gain over the objective in effect, without an interval."""
    data: dict[str, Any] = j.data
    raw_best, cand = data.get("best_median"), data.get("candidate_median")
    gain = data.get("gain")
    screen_only = not isinstance(raw_best, int | float)
    best_med = float(raw_best) if isinstance(raw_best, int | float) else in_effect
    if isinstance(gain, int | float):
        y = _at(best_med, gain, higher)
    elif isinstance(cand, int | float):
        y = float(cand)
    else:
        return None
    low = _at(best_med, data["low"], higher) if isinstance(data.get("low"), int | float) else None
    high = _at(best_med, data["high"], higher) if isinstance(data.get("high"), int | float) else None
    if low is not None and high is not None and low > high:
        low, high = high, low
    changes = d.data.get("changes") or {}
    label = ", ".join(f"{k}={v}" for k, v in changes.items())
    trial = Trial(j.round_no or 0, _ts(d) - t0, y, low, high, bool(d.data.get("kept")), label, float(best_med))
    p = d.data.get("proposal")
    if isinstance(p, dict):
        trial.opening = opening_label(p.get("stage"), p.get("planner"), p.get("rationale") or "")
    if screen_only:
        trial.best, trial.screen_only = None, True
    return trial


def draw(curve: Curve, out: Path | io.BytesIO, title: str) -> None:
    """Write the PNG (``FIGSIZE`` × ``DPI`` pixels) to a path or buffer.

    Raises:
        PlotError: matplotlib is not installed (``pip install 'agenticdb[plot]'``).
    """
    try:
        import matplotlib  # lazy: start-up cost (loads matplotlib; 172 modules)

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # lazy: start-up cost (loads matplotlib; 275 modules)
    except ImportError:
        raise PlotError("matplotlib is not installed: pip install 'agenticdb[plot]'") from None
    fig, ax = plt.subplots(figsize=FIGSIZE, dpi=DPI)
    try:
        _axes(ax, curve, title)
        fig.tight_layout()
        fig.savefig(out, format="png", dpi=DPI)
    finally:
        plt.close(fig)


def _axes(ax: Any, curve: Curve, title: str) -> None:
    if curve.baseline_runs:
        xs, ys = zip(*curve.baseline_runs, strict=True)
        ax.scatter(xs, ys, marker="x", color="grey", label="baseline runs", zorder=3)
    kept = any(t.kept for t in curve.trials)
    if math.isclose(curve.best, curve.baseline, rel_tol=1e-9) and not kept:
        # nothing kept: one line, not baseline, best and "in effect" drawn on top of each other (issue 39)
        ax.axhline(
            curve.baseline,
            color="grey",
            linestyle="--",
            linewidth=1,
            label=f"baseline = best {curve.baseline:,.3g} (nothing kept)",
        )
    else:
        ax.axhline(curve.baseline, color="grey", linestyle="--", linewidth=1, label=f"baseline {curve.baseline:,.3g}")
        ax.axhline(curve.best, color="tab:green", linestyle=":", linewidth=1.5, label=f"best {curve.best:,.3g}")
    if kept:
        sx, sy = zip(*curve.steps, strict=True)
        ax.step(sx, sy, where="post", color="tab:green", linewidth=1, alpha=0.6, label="objective in effect")
    _draw_screens(ax, curve.screens)
    for t in curve.trials:
        _draw_trial(ax, t)
    pairs = [(t.t, t.best) for t in curve.trials if t.best is not None]
    if pairs:
        px, py = zip(*pairs, strict=True)
        ax.scatter(px, py, marker="_", s=200, color="black", label="best config. in the same pairs", zorder=3)
    if any(not (t.screen_only or t.kept) for t in curve.trials):  # a legend entry only for what is drawn
        ax.errorbar([], [], yerr=[], fmt="o", color="tab:blue", capsize=4, label="trial (interval)")
    if kept:
        ax.plot([], [], "*", color="tab:green", markersize=12, label="kept change")
    if any(t.screen_only for t in curve.trials):
        ax.plot([], [], "o", color="tab:blue", mfc="none", label="screen run only (no valid pair)")
    values = [curve.baseline, curve.best, *(y for _, y in curve.baseline_runs), *(t.objective for t in curve.trials)]
    values += [s.objective for s in curve.screens]
    values += [v for t in curve.trials for v in (t.low, t.high, t.best) if v is not None]
    positive = [y for y in values if y > 0]
    if positive and max(positive) / min(positive) > LOG_SPAN:
        ax.set_yscale("log")  # a broken start and its fix differ by orders of magnitude
    direction = "higher" if curve.higher_is_better else "lower"
    ax.set_xlabel("seconds since the session started")
    ax.set_ylabel(f"{objective_label(curve.objective_name)} ({direction} is better)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize=8)


def _draw_trial(ax: Any, t: Trial) -> None:
    err = None
    if t.low is not None and t.high is not None:
        err = [[max(t.objective - t.low, 0.0)], [max(t.high - t.objective, 0.0)]]
    color = "tab:green" if t.kept else "tab:blue"
    ax.errorbar(
        [t.t],
        [t.objective],
        yerr=err,
        fmt="*" if t.kept else "o",
        color=color,
        mfc="none" if t.screen_only else color,
        capsize=4,
        markersize=12 if t.kept else 6,
        zorder=4,
    )
    text = f"r{t.round_no}" + (f" {t.opening.removeprefix('opening ')}" if t.opening else "")
    text += (f" kept: {t.label}" if t.kept and t.label else "") + (" screen" if t.screen_only else "")
    ax.annotate(
        text, (t.t, t.objective), textcoords="offset points", xytext=(6, 8 if t.kept else -12), fontsize=8, color=color
    )


#: The race's markers: a screen run to the end, a screen the race's bound cut off (its level is an estimate).
SCREEN_MARKER, CUT_OFF_MARKER, SCREEN_COLOR = "D", "v", "tab:purple"


def _draw_screens(ax: Any, screens: list[RaceScreen]) -> None:
    """The race's screens: one point each labelled with the candidate's name, a cut-off one hollow and
    pointing down, and one legend entry per kind drawn."""
    for s in screens:
        marker = CUT_OFF_MARKER if s.cut_off else SCREEN_MARKER
        ax.scatter(
            [s.t],
            [s.objective],
            marker=marker,
            s=60,
            facecolors="none" if s.cut_off or s.disturbed else SCREEN_COLOR,
            edgecolors=SCREEN_COLOR,
            zorder=4,
        )
        tags = [t for t, on in (("cut off", s.cut_off), ("disturbed", s.disturbed), ("leader", s.leader)) if on]
        text = s.name + (f" ({', '.join(tags)})" if tags else "")
        ax.annotate(
            text, (s.t, s.objective), textcoords="offset points", xytext=(6, -12), fontsize=8, color=SCREEN_COLOR
        )
    if any(not s.cut_off for s in screens):
        ax.scatter([], [], marker=SCREEN_MARKER, color=SCREEN_COLOR, label="race screen (one run)")
    if any(s.cut_off for s in screens):
        ax.scatter(
            [], [], marker=CUT_OFF_MARKER, facecolors="none", edgecolors=SCREEN_COLOR, label="race screen cut off"
        )


def plot_session(events: list[JournalEvent], out: Path | io.BytesIO, title: str) -> Curve:
    """:func:`curve_of` then :func:`draw`; returns the curve. Raises PlotError (see both)."""
    curve = curve_of(events)
    draw(curve, out, title)
    return curve
