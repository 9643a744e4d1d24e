"""Texts a DBA reads (issue 39): ranges in the knob's own spelling, summary lines computed from the
numbers of the decision. Pure functions, no server."""

from __future__ import annotations

import optuna

from agenticdb.cli.tune_cmd import baseline_best_text, largest_effect, medians_text
from agenticdb.models import ApplyMode, Bottleneck, Decision, GainEstimate, KnobSpec, Layer, RoundOutcome
from agenticdb.planner.search import _span


def test_search_range_reads_in_the_knobs_spelling() -> None:
    ms = KnobSpec(name="commit_delay_ms", vartype="integer", unit="ms", apply=ApplyMode.reload)
    text = _span(optuna.distributions.FloatDistribution(50, 800.3, log=True), ms, "postgresql")
    assert text == "50ms .. 800ms, log scale"
    pages = KnobSpec(name="shared_buffers", vartype="integer", unit="8kB", apply=ApplyMode.restart)
    assert _span(optuna.distributions.FloatDistribution(16384, 65536, log=True), pages, "postgresql").startswith(
        "128MB .. 512MB"
    )


def _round(no: int, gain: float, pair_gains: list[float], cand: float = 1006.0, best: float = 977.0) -> RoundOutcome:
    est = GainEstimate(
        gain=gain, low=gain - 0.05, high=gain + 0.05, pairs=len(pair_gains), confidence=0.95,
        text=f"{gain:+.1%}", pair_gains=pair_gains,
    )  # fmt: skip
    return RoundOutcome(
        session_id="s",
        round_no=no,
        stage=Layer.dbms,
        bottleneck=Bottleneck.unknown,
        changes={"work_mem": "8MB"},
        objective=cand,
        best_objective=best,
        estimate=est,
        decision=Decision.continue_,
        reason="tie",
    )


def test_round_line_shows_the_pair_ratios_behind_the_estimate() -> None:
    # medians say +3 %, the pairs say -2.8 % on average: the line shows both so neither reads as a slip
    r = _round(1, -0.028, [0.031, -0.080, -0.035])
    text = medians_text(r, labelled=True)
    assert text.startswith("candidate 1,006.000 vs best 977.000 (medians)")
    assert "pairs candidate/best +3.1 %, -8.0 %, -3.5 %" in text and "geometric mean" in text


def test_largest_effect_is_by_magnitude_and_keeps_its_sign() -> None:
    rounds = [_round(1, 0.03, [0.03]), _round(2, -0.14, [-0.14]), _round(3, 0.05, [0.05])]
    assert largest_effect(rounds).round_no == 2


def test_baseline_to_best_says_when_the_best_was_measured_again() -> None:
    r1 = _round(1, -0.02, [-0.02], cand=1400.0, best=1465.0)  # the starting configuration re-measured at 1,465
    text = baseline_best_text(938.72, 938.72, [r1], 0.0)
    assert text.startswith("baseline 938.720 → best 938.720 (nothing kept")
    assert "re-measured 1,465.000 in round 1's pairs" in text and "+0.0" not in text
    kept = _round(2, 0.2, [0.2], cand=1200.0, best=1000.0)
    kept.kept = True
    later = _round(3, 0.0, [0.0], cand=1150.0, best=1180.0)
    text = baseline_best_text(938.72, 1200.0, [r1, kept, later], 0.278)
    assert "(+27.8%) (best: round 2's kept configuration, its own runs; re-measured 1,180.000 in round 3's" in text


def test_journal_story_says_the_best_was_measured_again() -> None:
    from agenticdb.cli.story import remeasured_note
    from agenticdb.store.journal_events import JournalEvent

    def ev(i: int, name: str, data: dict[str, object], rnd: int | None) -> JournalEvent:
        ts = f"2026-01-01T00:00:{i:02d}+00:00"
        return JournalEvent(id=i, ts=ts, session_id="s", round_no=rnd, event=name, data=data, prev_hash="", hash="")

    events = [
        ev(1, "judged", {"best_median": 1465.0}, 1),
        ev(2, "decision", {"kept": False}, 1),
    ]
    assert (
        remeasured_note(events) == " (nothing kept; the starting configuration re-measured 1,465.00 in round 1's pairs)"
    )
    events += [ev(3, "judged", {"best_median": 1400.0}, 2), ev(4, "decision", {"kept": True}, 2)]
    assert remeasured_note(events) == ""
    events += [ev(5, "judged", {"best_median": 1500.0}, 3)]
    assert remeasured_note(events) == " (round 2's kept configuration re-measured 1,500.00 in round 3's pairs)"
