"""Auditor decisions are pure: observations in, decision plus a one-line reason out."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agenticdb.auditor import LoopState, decide, judge, noise_cv, relative_gain
from agenticdb.models import Bottleneck, Decision, Failure, Layer, RoundOutcome


def outcome(
    n: int,
    kept: bool,
    stage: Layer = Layer.dbms,
    verdict_ok: bool = True,
    failure: bool = False,
    gain: float | None = 0.0,
) -> RoundOutcome:
    return RoundOutcome(
        session_id="s",
        round_no=n,
        stage=stage,
        bottleneck=Bottleneck.checkpoint,
        verdict_ok=verdict_ok,
        kept=kept,
        gain_vs_best=gain,
        decision=Decision.continue_,
        reason="",
        failure=Failure(phase="restart", message="x") if failure else None,
    )


def state(**kw) -> LoopState:
    base = dict(
        stage=Layer.dbms,
        rounds_done=1,
        max_rounds=10,
        elapsed_s=10,
        time_budget_s=1000,
        plateau_rounds=3,
        os_stage_enabled=False,
    )
    base.update(kw)
    return LoopState(**base)


def test_noise_cv_uses_conservative_default_for_single_run() -> None:
    assert noise_cv([100.0]) == pytest.approx(0.10)
    assert noise_cv([100.0, 100.0]) == pytest.approx(0.03)  # floor
    assert noise_cv([90.0, 110.0]) == pytest.approx(0.1414, abs=1e-3)


def test_gain_inside_noise_is_a_tie() -> None:
    j = judge([108.0], [100.0, 101.0], higher_is_better=True, cv=0.05, min_gain=0.03, noise_factor=2.0)
    assert j.verdict == "tie" and not j.better
    assert "noise band" in j.reason


def test_gain_beyond_noise_is_better_and_loss_is_worse() -> None:
    assert judge([130.0], [100.0], True, 0.05, 0.03, 2.0).verdict == "better"
    assert judge([70.0], [100.0], True, 0.05, 0.03, 2.0).verdict == "worse"


def test_lower_is_better_objective_flips_direction() -> None:
    # OLAP total time: 60 s against 100 s is a 67 % gain.
    j = judge([60.0], [100.0], higher_is_better=False, cv=0.05, min_gain=0.03, noise_factor=2.0)
    assert j.verdict == "better" and j.gain == pytest.approx(100 / 60 - 1)


def test_paired_ratios_cancel_drift() -> None:
    # Both configs drift down 30 % over time; the candidate is 20 % better within each pair.
    # Best measured early (fast), candidate late (slow host): unpaired, the drift hides the gain.
    best = [100.0, 80.0, 64.0]
    cand = [120.0, 96.0, 76.8]
    paired = judge(cand, best, True, 0.05, 0.03, 2.0, paired=True)
    assert paired.gain == pytest.approx(0.20)
    assert paired.better and "paired" in paired.reason
    unpaired_late = judge([76.8], [100.0, 80.0], True, 0.05, 0.03, 2.0)
    assert unpaired_late.verdict != "better"


@given(st.lists(st.floats(min_value=1, max_value=1e6), min_size=1, max_size=5), st.floats(0.0, 0.5))
def test_identical_samples_are_never_better(samples: list[float], cv: float) -> None:
    assert judge(samples, samples, True, cv, 0.01, 2.0).verdict == "tie"


@given(st.floats(1, 1e6), st.floats(1, 1e6))
def test_relative_gain_antisymmetric_sign(a: float, b: float) -> None:
    g = relative_gain(a, b, True)
    assert (g > 0) == (a > b) or a == b


def test_decide_terminates_on_budget_and_max_rounds() -> None:
    d, why = decide([outcome(1, True)], state(elapsed_s=2000))
    assert d == Decision.terminate and "time budget" in why
    d, why = decide([outcome(1, True)], state(rounds_done=10))
    assert d == Decision.terminate and "max rounds" in why


def test_decide_plateau_switches_to_os_when_enabled() -> None:
    hist = [outcome(i, False) for i in range(1, 4)]
    assert decide(hist, state(rounds_done=3, os_stage_enabled=True))[0] == Decision.switch_to_os
    d, why = decide(hist, state(rounds_done=3))
    assert d == Decision.terminate and "no significant gain" in why


def test_decide_continue_after_kept_gain_and_redirect_otherwise() -> None:
    d, why = decide([outcome(1, True, gain=0.12)], state())
    assert d == Decision.continue_ and "+12.0%" in why
    assert decide([outcome(1, False)], state())[0] == Decision.redirect
    d, why = decide([outcome(1, False, failure=True)], state())
    assert d == Decision.redirect and "restart" in why
    d, why = decide([outcome(1, False, verdict_ok=False)], state())
    assert d == Decision.redirect and "rejected" in why


def test_planner_plateau_in_os_stage_terminates() -> None:
    d, _ = decide(
        [outcome(1, False, stage=Layer.os)],
        state(stage=Layer.os, os_stage_enabled=True, planner_plateau=True),
    )
    assert d == Decision.terminate


def test_os_rounds_do_not_count_towards_dbms_plateau() -> None:
    hist = [outcome(1, True), outcome(2, False, stage=Layer.os), outcome(3, False, stage=Layer.os)]
    assert decide(hist, state(rounds_done=3))[0] == Decision.continue_


def test_paired_gain_carried_by_one_lucky_pair_is_a_tie() -> None:
    # Two pairs: the median (= mean) says +410 %, but the second pair says -10 %: not consistent.
    j = judge([152.9, 25.0], [6.6, 27.9], True, 0.2, 0.03, 2.0, paired=True)
    assert j.verdict == "tie" and "consistent" in j.reason
    assert judge([30.0, 25.0], [10.0, 11.0], True, 0.2, 0.03, 2.0, paired=True).better
    assert judge([5.0, 6.0], [10.0, 11.0], True, 0.2, 0.03, 2.0, paired=True).verdict == "worse"


def test_a_pair_near_zero_is_neutral_not_a_contradiction() -> None:
    # Seen on MariaDB: (+14 %, +11 %, -0.09 %) — the third pair says nothing either way.
    j = judge([114.0, 111.0, 99.91], [100.0, 100.0, 100.0], True, 0.05, 0.03, 2.0, paired=True)
    assert j.verdict == "better", j.reason
    # A real contradiction still makes it a tie.
    j = judge([114.0, 111.0, 90.0], [100.0, 100.0, 100.0], True, 0.05, 0.03, 2.0, paired=True)
    assert j.verdict == "tie"
