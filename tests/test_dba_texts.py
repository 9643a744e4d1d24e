"""Texts a DBA reads (issue 39): ranges in the knob's own spelling, summary lines computed from the
numbers of the decision. Pure functions, no server."""

from __future__ import annotations

import io

import optuna
from rich.console import Console

from agenticdb.cli.inspect_cmd import _report_rounds
from agenticdb.cli.tune_cmd import (
    _round_printer,
    _summary,
    _verdicts,
    baseline_best_text,
    budget_warning,
    medians_text,
    verdict_text,
)
from agenticdb.config import Settings
from agenticdb.config.loop_section import LoopConfig
from agenticdb.config.sections import WorkloadConfig
from agenticdb.loop.steps import SessionResult
from agenticdb.models import (
    ApplyMode,
    Bottleneck,
    Decision,
    Disturbance,
    GainEstimate,
    KnobSpec,
    Layer,
    Measurement,
    RoundOutcome,
)
from agenticdb.planner.search import _span
from agenticdb.report.effects import decision_effect, effect_summary
from agenticdb.store.journal_events import JournalEvent


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
    assert "gain per pair (candidate vs best, + = candidate better) +3.1 %, -8.0 %, -3.5 %" in text
    assert "geometric mean" in text


def test_the_pair_figures_of_a_lower_is_better_objective_are_labelled_as_gains() -> None:
    """A new user's TPC-H trial (total time, lower is better) read "pairs candidate/best +13.1 %, +9.4 %" for pairs
    whose candidate ran faster: gains, not the candidate/best ratio (which was below 1)."""
    r = _round(4, 0.112, [0.131, 0.094], cand=6.005, best=6.79)
    text = medians_text(r, labelled=True)
    assert "candidate/best" not in text, text
    assert "gain per pair (candidate vs best, + = candidate better) +13.1 %, +9.4 %" in text, text


def test_largest_effect_is_by_magnitude_and_keeps_its_sign() -> None:
    rounds = [_round(1, 0.03, [0.03]), _round(2, -0.14, [-0.14]), _round(3, 0.05, [0.05])]
    assert effect_summary(rounds, {}).startswith("largest effect seen (by magnitude) -14.0% (round 2: work_mem=8MB)")


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
    from agenticdb.cli.story_facts import remeasured_note
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


def _screened(no: int, gain: float, judged: str | None, why: str = "") -> RoundOutcome:
    """A round decided on its screen run alone (no valid pair: no estimate, the screen's gain)."""
    return RoundOutcome(
        session_id="s",
        round_no=no,
        stage=Layer.dbms,
        bottleneck=Bottleneck.unknown,
        changes={"deadlock_timeout": "2s"},
        gain_vs_best=gain,
        judged=judged,  # type: ignore[arg-type]
        judged_reason=why,
        decision=Decision.terminate,
        reason="planner has nothing left",
    )


TOO_DISTURBED = (
    "host too disturbed: 5 pairs discarded, more than loop.max_disturbed_repeats = 4; a tie keeps the simpler "
    "config. Last: pair 1: other processes used 1.8 cores"
)


def test_round_line_and_report_say_the_verdict_and_why_it_was_not_kept() -> None:
    """A tie by a disturbed host read "+36.0% (screen only); terminate" and "Decision terminate": the round
    line and the report's table now say the auditor's verdict, its cause and that the round was reverted, and
    no gain: the decision kept no valid pair (a fresh user read "gain vs best -9.9%" for such a round)."""
    r = _screened(3, 0.36, "tie", TOO_DISTURBED)
    out = io.StringIO()
    _round_printer(Console(file=out, soft_wrap=True, highlight=False), [], None)(r)
    line = out.getvalue().strip()
    assert "— (no valid pair: no effect measured); tie (host too disturbed), reverted; terminate: " in line, line
    assert "36" not in line, line
    table = "\n".join(_report_rounds([r], "TPS"))
    assert "| — (no valid pair: no effect measured) | tie (host too disturbed), reverted | terminate |" in table, table
    assert _summary_of([r]) == (
        "nothing beat the starting configuration: no decision measured an effect, and no screen is quoted: no screen "
        "ran full and undisturbed outside a decision that kept no valid pair (round 3: no valid pair)"
    )
    assert r.counted_gain is None and decision_effect(r) == "no effect measured (no valid pair)"
    # the report reads the verdict from the journal's judged event (older records carry no judged_reason)
    old = r.model_copy(update={"judged_reason": ""})
    data = {"verdict": "tie", "reason": TOO_DISTURBED}
    judged = JournalEvent(id=1, ts="", session_id="s", round_no=3, event="judged", data=data, prev_hash="", hash="")
    assert "| tie (host too disturbed), reverted |" in "\n".join(_report_rounds([old], "TPS", [judged]))
    kept = _round(1, 0.2, [0.2]).model_copy(update={"judged": "better", "kept": True, "judged_reason": "gain …"})
    assert verdict_text(kept.judged, kept.judged_reason, kept.kept) == "better, kept"
    undecided = "undecided: budget ended inside the decision (+4.0 %, not settled); the best configuration so far stays"
    assert (
        verdict_text("undecided", undecided, False) == "undecided (session budget ended inside the decision), reverted"
    )


def _summary_of(rounds: list[RoundOutcome], **baseline: object) -> str:
    out = io.StringIO()
    _verdicts(Console(file=out, soft_wrap=True, highlight=False, width=300), rounds, **baseline)  # type: ignore[arg-type]
    return out.getvalue().strip()


def _run(objective: float, cut_off: str | None = None, disturbed: bool = False, seconds: float = 60.0) -> Measurement:
    noise = Disturbance(samples=15, seconds=15.0, other_cpu_cores=2.5, other_cpu_spread=0.1, disturbed=disturbed)
    return Measurement(workload="sysbench", objective=objective, duration_s=seconds, cut_off=cut_off, disturbance=noise)


def test_the_end_summary_quotes_a_screen_only_as_one_run_and_never_a_cut_off_or_disturbed_one() -> None:
    """A user read "largest effect seen -17.5%" for a screen cut off after 15.7 s on a disturbed host, and
    "-50.8%" with no word that it was one run against the baseline: a faulted screen is never quoted, a clean
    one is said to be one run, not the effect, with the change it belongs to."""
    clean = _screened(1, -0.508, None)
    cut = _screened(2, -0.175, "worse", "cut off after the screen: …")
    cut.measurement = _run(81.0, cut_off="far worse than the best", disturbed=True, seconds=15.7)
    text = _summary_of([clean, cut])
    assert "-17.5" not in text, text
    assert text.startswith(
        "nothing beat the starting configuration: no decision measured an effect; one screen run, not a measurement "
        "of the effect: -50.8% against the baseline (round 1: deadlock_timeout=2s)"
    ), text
    assert _summary_of([cut]) == (
        "nothing beat the starting configuration: no decision measured an effect, and no screen is quoted: no screen "
        "ran full and undisturbed (round 2: screen cut off after 15.7 s, disturbed)"
    )
    # a disturbed baseline: the clean screen's gain against it is not quoted either
    text = _summary_of([clean], base=1000.0, noise_cv=0.02, disturbed=(2, 3))
    assert "-50.8" not in text and "the baseline they ran against does not stand (a baseline that is disturbed" in text
    out = io.StringIO()  # the round line says the same: no percentage for the faulted screen
    _round_printer(Console(file=out, soft_wrap=True, highlight=False), [], None)(cut)
    assert "— (screen cut off after 15.7 s, disturbed: no effect measured); worse" in out.getvalue(), out.getvalue()
    out = io.StringIO()  # a refused round measured nothing: that wording stays for it
    _verdicts(Console(file=out), [_screened(1, 0.0, None).model_copy(update={"gain_vs_best": None})])
    assert out.getvalue().startswith("no change was measured against the starting configuration")


def test_a_decision_with_too_few_pairs_is_quoted_by_its_pairs_not_by_its_screen() -> None:
    """A user read "-73.2% (screen, one run)" quoted for a round whose only valid pair had the candidate ahead: the
    screen's gain against a stale baseline. The medians of the pairs are what the decision measured."""
    r = _screened(4, -0.732, "undecided", "decision's time cap: 1 valid pair")
    r.objective, r.best_objective, r.measurement = 1100.0, 1000.0, _run(1100.0)
    text = _summary_of([_screened(1, -0.90, None), r])
    assert "-73.2" not in text and "-90.0" not in text, text
    pairs = "largest effect seen (by magnitude) +10.0% in the medians of a decision's pairs, too few for an interval "
    assert pairs in text, text
    assert "(round 4: deadlock_timeout=2s; undecided (decision's time cap), reverted)" in text, text
    out = io.StringIO()
    _round_printer(Console(file=out, soft_wrap=True, highlight=False), [], None)(r)
    assert "+10.0% (medians of the decision's pairs, too few for an interval)" in out.getvalue(), out.getvalue()


def test_a_budget_that_cannot_pay_for_the_baseline_and_one_decision_is_warned_at_the_start() -> None:
    """pgbench's first-run defaults: a run is warmup_max_s 10 + duration_s 15 = 25 s; the baseline's fewest runs
    (2: 50 s) and the smallest decision (2 pairs, 3 runs with the baseline's last: 75 s) need 125 s."""
    pgbench = WorkloadConfig(kind="pgbench", duration_s=15, warmup_max_s=10)  # conftest sets warmup_max_s 0
    cfg = Settings().model_copy(update={"workload": pgbench, "loop": LoopConfig(time_budget_s=100)})
    (line,) = budget_warning(cfg)
    assert line.startswith("time budget 100s cannot pay for the baseline and one decision"), line
    assert "2 baseline runs of 25s take 50s" in line
    assert "(2 pairs, 3 runs, the baseline's last run standing as pair 1's best run) 75s, 125s in all" in line
    assert "repeats of runs the host disturbed come on top; a disturbed last baseline run adds one run" in line
    assert "give --time-budget 125 or more" in line
    assert budget_warning(cfg.model_copy(update={"loop": LoopConfig(time_budget_s=125)})) == []
    tpch = Settings(workload=WorkloadConfig(kind="tpch"), loop=LoopConfig(time_budget_s=10))
    assert budget_warning(tpch) == []  # a query set's run length is not known before it runs


def test_the_summary_says_why_no_round_ran() -> None:
    result = SessionResult(
        session_id="s",
        status="completed",
        reason="time budget nearly used: 20s of 180s left, less than the smallest decision's (2 pairs, 3 runs) "
        "cost (84s); a time budget of at least 244s would have paid for one decision",
        baseline_objective=100.0,
        best_objective=100.0,
    )
    out = io.StringIO()
    _summary(Console(file=out, soft_wrap=True, width=300), Settings(), result)
    assert f"no round ran: {result.reason}" in out.getvalue()
    assert "no change was measured" not in out.getvalue()


def test_the_summary_names_the_opening_candidates_the_time_left_could_not_pay_for() -> None:
    """The demo raced 1 of 3 opening candidates and `tune` never said why (the log had opening.budget_drop)."""
    note = (
        "'host-sized' left out of the race: 3 screens and the proof cost 345s by the cost prior, more than the 152s "
        "of the time budget left (the most generic candidate is left out first)"
    )
    result = SessionResult(session_id="s", status="completed", reason="r", opening_left_out=[note])
    out = io.StringIO()
    _summary(Console(file=out, soft_wrap=True, width=300), Settings(), result)
    assert f"opening: {note}" in out.getvalue()


def test_the_gain_is_quoted_against_the_start_re_measured_when_the_baseline_is_stale() -> None:
    # The host got quieter after the baseline (938.72): round 1's undisturbed pairs measured the same start at
    # 1,440 and kept a candidate at 1,500 (+4.2 %). Against the stale baseline the summary said +59.8 %.
    kept = _round(1, 0.04, [0.04], cand=1500.0, best=1440.0)
    kept.kept = True
    result = SessionResult(
        session_id="s", status="completed", reason="done", baseline_objective=938.72, best_objective=1500.0,
        rounds=[kept], noise_cv=0.03,
    )  # fmt: skip
    out = io.StringIO()
    _summary(Console(file=out, soft_wrap=True, width=400), Settings(), result)
    (line,) = [x for x in out.getvalue().splitlines() if x.startswith("baseline ")]
    assert line.startswith(
        "baseline 938.720 → best 1,500.000 (+4.2% against the start as re-measured 1,440.000 in round 1's "
        "undisturbed pairs; the baseline is stale (the same start measured +53.4 % off it later: the host changed))"
    ), line
    assert "+59.8" not in line
    # within twice the noise of a pair of the baseline, the baseline stands (and the text is as before)
    kept.best_objective = 960.0
    text = baseline_best_text(938.72, 1500.0, [kept], 0.598, noise_cv=0.03)
    assert text.startswith("baseline 938.720 → best 1,500.000 (+59.8%) (best: round 1's kept"), text


def test_a_disturbed_baseline_is_named_and_the_gain_taken_from_the_pairs() -> None:
    kept = _round(2, 0.1, [0.1], cand=1100.0, best=1000.0)
    kept.kept = True
    # lower is better (total time, s): baseline 20 s with one of two runs disturbed; the pairs measured the start at
    # 21 s (within the noise) and the kept configuration at 15 s
    kept.objective, kept.best_objective = 15.0, 21.0
    text = baseline_best_text(20.0, 15.0, [kept], 0.333, "s", 0.05, (1, 2), higher=False)
    assert "(+40.0% against the start as re-measured 21.000 in round 2's undisturbed pairs; " in text, text
    assert "the baseline is disturbed (1 of 2 runs))" in text
    # no decision measured the start: the gain stays against the baseline, which is named as disturbed
    text = baseline_best_text(20.0, 15.0, [], 0.333, "s", 0.05, (1, 2), higher=False)
    assert text == (
        "baseline 20.000 → best 15.000 s (+33.3%) (a baseline that is disturbed (1 of 2 runs), the start not "
        "measured again)"
    )


def test_the_stale_bar_uses_the_sequential_tests_pair_floor() -> None:
    from agenticdb.loop.race import AHEAD_SDS
    from agenticdb.measure.sequential import PAIR_SD_FLOOR
    from agenticdb.report import labels

    assert labels.PAIR_SD_FLOOR == PAIR_SD_FLOOR and labels.STALE_SDS == AHEAD_SDS


def test_journal_story_quotes_the_gain_against_the_start_re_measured() -> None:
    from agenticdb.cli.story_facts import remeasured_note, start_gain_note

    def ev(i: int, name: str, data: dict[str, object], rnd: int | None) -> JournalEvent:
        ts = f"2026-01-01T00:00:{i:02d}+00:00"
        return JournalEvent(id=i, ts=ts, session_id="s", round_no=rnd, event=name, data=data, prev_hash="", hash="")

    events = [
        ev(1, "baseline", {"objectives": [930.0, 938.72], "noise_cv": 0.01, "higher_is_better": True}, 0),
        ev(2, "judged", {"best_median": 1440.0}, 1),
        ev(3, "decision", {"kept": True}, 1),
        ev(4, "session.end", {"baseline_objective": 938.72, "best_objective": 1500.0}, None),
    ]
    note = start_gain_note(events)
    assert note.startswith(" (+4.2 % against the start as re-measured 1,440.00 in round 1's undisturbed pairs; "), note
    assert "the baseline is stale" in note and remeasured_note(events) == ""
    events[1] = ev(2, "judged", {"best_median": 945.0}, 1)  # the start measured as at the baseline: it stands
    assert start_gain_note(events) == ""
    events.insert(1, ev(5, "run.disturbed", {"label": "baseline 2", "kept": True}, 0))
    assert "the baseline is disturbed (1 of 2 runs)" in start_gain_note(events)
