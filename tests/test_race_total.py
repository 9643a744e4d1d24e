"""The race of a query set ranks on the per-query statistic but never leads with, or lends the knobs of, a
screen whose total time ran behind the start: its proof could only tie (``auditor._total_time_agrees``).

Seen on pg-tpch-fit (2026-12-07, benchmarks/README.md): host-sized screened −11.3 % by total time and
+11.6 % by the statistic, led the race over 'evidence' (+8.8 % / +9.6 %), and its proof tied on 5 pairs.
"""

from __future__ import annotations

import math

from agenticdb.loop.race import RaceState, Screen, ahead_of_start, passed_over, total_behind
from agenticdb.measure.query_set import QueryWeights
from agenticdb.measure.sequential import Noise
from agenticdb.models import Measurement


def run(q01: float, q02: float) -> Measurement:
    return Measurement(
        workload="tpch",
        objective=q01 + q02,
        objective_name="total_time",
        higher_is_better=False,
        total_time_s=q01 + q02,
        duration_s=q01 + q02,
        per_query_s={"q01": q01, "q02": q02},
    )


START = run(10.0, 10.0)
WEIGHTS = QueryWeights.from_baseline([START, run(10.0, 10.0)])
NOISE = Noise(var=0.02**2, df=4)


def race() -> tuple[RaceState, Screen, Screen]:
    state = RaceState(START, 20.0, higher=False)
    even = Screen("evidence", 1, {}, measurement=run(9.0, 9.0))  # 18 s: d = ln(10/9) = 0.105
    skewed = Screen("host-sized", 2, {}, measurement=run(3.0, 19.0))  # 22 s: d = (ln 10/3 + ln 10/19)/2 = 0.281
    state.add(even)
    state.add(skewed)
    return state, even, skewed


def test_a_screen_behind_the_start_by_total_time_does_not_lead_however_far_ahead_its_statistic() -> None:
    assert WEIGHTS is not None
    state, even, skewed = race()
    assert WEIGHTS.log_ratio(skewed.measurement, START) > WEIGHTS.log_ratio(even.measurement, START)  # type: ignore[arg-type, operator]
    assert total_behind(skewed, 20.0) and not total_behind(even, 20.0)
    leader = state.leader(WEIGHTS, START, 20.0)
    assert leader is even
    notes = passed_over(state, leader, WEIGHTS, START, 20.0)
    assert len(notes) == 1
    assert "'host-sized' ranked after 'evidence'" in notes[0] and "-9.1%" in notes[0]  # 20 s against 22 s


def test_when_every_screen_ran_behind_by_total_time_the_statistic_still_ranks_them() -> None:
    assert WEIGHTS is not None
    state = RaceState(START, 20.0, higher=False)
    a = Screen("a", 1, {}, measurement=run(9.0, 12.0))  # 21 s, d = (ln 10/9 + ln 10/12)/2 < 0
    b = Screen("b", 2, {}, measurement=run(3.0, 19.0))  # 22 s, d = 0.281
    state.add(a)
    state.add(b)
    assert state.leader(WEIGHTS, START, 20.0) is b
    assert passed_over(state, b, WEIGHTS, START, 20.0) == []


def test_a_screen_behind_by_total_time_lends_no_knobs_to_the_leaders_proof() -> None:
    assert WEIGHTS is not None
    _, even, skewed = race()
    assert ahead_of_start(skewed, START, 20.0, False, NOISE, WEIGHTS) is None
    ahead = ahead_of_start(even, START, 20.0, False, NOISE, WEIGHTS)
    assert ahead is not None and math.isclose(ahead[0], math.log(10 / 9))


def test_a_screen_that_makes_the_leaders_own_move_lends_no_knob() -> None:
    """Seen in the scenario suite (mdb-join-buffer-tiny, 2026-12-07 night): host-sized and limits both fixed
    join_buffer_size and screened +154.5 % / +153.9 %; limits lent the proof a 17.35 GiB buffer pool and a 7.8 GiB
    redo log on ~100 MB of data. Its gain was the shared move's: no evidence for its other knobs."""
    from memtarget import KNOBS

    from agenticdb.loop.opening_entries import RaceEntry, joined
    from agenticdb.models import ApplyMode, Change, Proposal, Verdict

    def entry(name: str, changes: dict[str, str]) -> RaceEntry:
        p = Proposal(
            bottleneck="cpu",
            changes=[Change(name=k, value=v, rationale=name) for k, v in changes.items()],
            planner=f"opening:{name}",
        )
        return RaceEntry(name, p, Verdict(ok=True, changes=[], apply_requirement=ApplyMode.reload))

    leader = entry("host-sized", {"work_mem": "8MB", "random_page_cost": "2"})
    sharing = entry("limits", {"work_mem": "8192kB", "effective_io_concurrency": "200"})  # 8MB spelt in kB
    notes: list[str] = []
    assert joined(leader, [(0.9, sharing)], KNOBS, "TPS", notes) is None
    assert notes == [
        "'limits' lends no knob: it makes the leader's own work_mem = 8MB too, so its +146.0% on the start's level "
        "is no evidence for its other knobs"
    ]
    # a screen whose moves are all its own still lends (a different value of a knob both set is its own move)
    own = entry("io", {"work_mem": "16MB", "effective_io_concurrency": "200"})
    made = joined(leader, [(0.4, own)], KNOBS, "TPS", notes)
    assert made is not None and {c.name: c.value for c in made[0].changes} == {
        "work_mem": "8MB",
        "random_page_cost": "2",
        "effective_io_concurrency": "200",
    }
    assert len(notes) == 1
