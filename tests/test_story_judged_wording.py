"""What a new user's TPC-H trial (objective total time, 2026-12-07) read wrongly in `journal show`:

1. a round whose five pairs were all ahead was judged a tie ("+11 % [-4.8 %, +30 %], 5 pairs, 95 % … not settled
   after 5 pairs"), and the Judged line named neither the pairs nor why the interval was that wide (the session's
   noise prior, baseline run CV 10.8 %, pooled with the pairs' small spread);
2. "safe snapshot 'baseline' of postgresql saved (169 values, 1 files)" told whole 6 times;
3. "1 clients", "a olap workload", and "tps -, p95 - ms" on every Measurement line of a query set.

The decision is the real auditor's (``auditor.assess`` with the real sequential test and ``judged_event``) over
runs a query set gives (total time, lower is better); the journal is a real one; the session is the real
TuningSession of tests/test_story_opening.py."""

from __future__ import annotations

import io
import math
import re
from pathlib import Path

from rich.console import Console
from test_story_opening import session

from agenticdb.cli.story import render_story
from agenticdb.config.loop_section import LoopConfig
from agenticdb.loop import auditor
from agenticdb.measure.sequential import Noise
from agenticdb.models import Bottleneck, Decision, Disturbance, Layer, Measurement, RoundOutcome
from agenticdb.store.journal import Journal
from agenticdb.units.text import a_workload, counted

BASELINE = [100.0, 113.0, 89.0, 104.0, 119.0, 95.0, 108.0, 86.0, 101.0, 115.0]  # total time, s: run CV ≈ 10.8 %


class QuerySetRuns:
    """A query set's runs in pair order: the candidate 10 % faster than the best in every pair (total time, s)."""

    def __init__(self) -> None:
        self.n = 0

    def run(self, config: str, label: str) -> Measurement:
        self.n += 1
        base = 100.0 + 2.0 * (self.n % 3)
        total = base / 1.11 if config == "candidate" else base
        return Measurement(workload="tpch", objective=total, objective_name="total_time", higher_is_better=False)


def _story(tmp_path: Path, events: list[tuple[str, dict, int | None]]) -> str:
    with Journal(tmp_path / "j.db") as j:
        j.append("s1", "session.start", {"target": "postgresql", "workload": "tpch"})
        for kind, data, round_no in events:
            j.append("s1", kind, data, round_no)
        out = io.StringIO()
        render_story(Console(file=out, width=200, soft_wrap=True, highlight=False), "s1", j.events("s1"))
    return out.getvalue()


def test_a_tie_on_pairs_all_ahead_lists_them_and_says_where_its_width_comes_from(tmp_path: Path) -> None:
    prior = Noise.from_repeats(BASELINE)
    assert math.isclose(prior.run_cv, 0.108, abs_tol=0.003), prior.run_cv
    rules = auditor.decision_rules(LoopConfig(max_pairs=5), prior, left_s=3600.0)
    screen = QuerySetRuns().run("candidate", "candidate 1")
    a = auditor.assess(screen, 100.0, QuerySetRuns(), rules, clock=lambda: 0.0)
    assert a.verdict == "tie" and len(a.candidate) == 5 and "not settled after 5 pairs" in a.reason, a
    outcome = RoundOutcome(
        session_id="s1",
        round_no=3,
        stage=Layer.dbms,
        bottleneck=Bottleneck.unknown,
        decision=Decision.continue_,
        reason="",
    )
    auditor.record_assessment(a, outcome, screen, 100.0, False)
    event = auditor.judged_event(a, outcome, rules)
    width = event["width"]
    assert isinstance(width, dict) and width["bound"] == "pooled" and width["prior_df"] == 9, width
    assert width["pairs_sd"] < 0.05 < width["sd"], width  # the pairs agree closely; the prior makes it wide
    story = _story(tmp_path, [("judged", event, 3)])
    judged = story[story.index("Judged") :]
    pairs = re.search(r"• pairs: (.*) \(the candidate ahead in 5 of 5\)", judged)
    assert pairs and len(pairs.group(1).split(", ")) == 5, judged
    assert all(g.startswith("+") for g in pairs.group(1).split(", ")), judged
    assert re.search(
        r"• interval width: per-pair sd 1\d\.\d % \(log-ratio\) = these pairs' own \d\.\d % pooled with the noise "
        r"prior \(run CV 10\.\d %, 9 df: 10 baseline runs\); 95 % shared by 4 looks",
        judged,
    ), judged


def _judged_width(prior: Noise, tmp_path: Path, round_no: int) -> tuple[dict, str]:
    """The real auditor's decision on the query set's runs (candidate 10 % faster) with ``prior`` as the session's
    noise, its ``judged`` event's width and the story's interval width line."""
    rules = auditor.decision_rules(LoopConfig(max_pairs=3), prior, left_s=3600.0)
    screen = QuerySetRuns().run("candidate", "candidate 1")
    a = auditor.assess(screen, 100.0, QuerySetRuns(), rules, clock=lambda: 0.0)
    outcome = RoundOutcome(
        session_id="s1", round_no=round_no, stage=Layer.dbms, bottleneck=Bottleneck.unknown,
        decision=Decision.continue_, reason="",
    )  # fmt: skip
    auditor.record_assessment(a, outcome, screen, 100.0, False)
    event = auditor.judged_event(a, outcome, rules)
    story = _story(tmp_path / f"r{round_no}", [("judged", event, round_no)])
    line = next(x for x in story.splitlines() if "interval width" in x)
    assert isinstance(event["width"], dict), event
    return event["width"], line


def test_after_a_one_run_baseline_the_width_says_the_noise_came_from_earlier_pairs_or_was_not_measured(
    tmp_path: Path,
) -> None:
    """A short budget's one-run baseline (``loop.baseline``) measures no spread. The width line said "N df:
    baseline runs and earlier pairs" for a prior only the earlier decision's pairs had measured; now it says
    where the noise came from, and, for the first decision, that none was measured (the interval then rests on the
    pairs and the 5 % floor: the 10 % the baseline line assumes is not in it). The session pools each decision's
    pairs into its noise (``TuningSession``'s judge step: ``noise.pool(Noise.from_pairs(a.log_ratios()))``)."""
    (tmp_path / "r1").mkdir()
    (tmp_path / "r2").mkdir()
    one_run = Noise.from_repeats([100.0])
    assert one_run.df == 0 and one_run.baseline_runs == 1
    width, first = _judged_width(one_run, tmp_path, 1)
    assert (width["prior_df"], width["prior_runs"], width["prior_pairs"]) == (0, 1, 0), width
    assert "no noise prior: not measured (the baseline's one run, and no earlier pairs measured a spread)" in first
    assert "baseline runs" not in first, first
    rules = auditor.decision_rules(LoopConfig(max_pairs=3), one_run, left_s=3600.0)
    a = auditor.assess(QuerySetRuns().run("candidate", "c"), 100.0, QuerySetRuns(), rules, clock=lambda: 0.0)
    pooled = one_run.pool(Noise.from_pairs(a.log_ratios()))
    n = len(a.log_ratios())
    assert pooled.df == n - 1 >= 1 and (pooled.pairs, pooled.decisions) == (n, 1), pooled
    width, second = _judged_width(pooled, tmp_path, 2)
    assert width["prior_df"] == n - 1 and width["prior_runs"] == 1 and width["prior_pairs"] == n, width
    assert re.search(
        rf"the noise prior \(run CV \d+\.\d %, {n - 1} df: {n} pairs of 1 earlier decision; the baseline's one run "
        r"measured no spread\)",
        second,
    ), second
    assert "baseline runs" not in second, second


def test_a_width_of_a_journal_written_before_the_counts_keeps_its_wording(tmp_path: Path) -> None:
    width = {"sd": 0.12, "df": 11, "pairs_sd": 0.02, "prior_cv": 0.108, "prior_df": 9, "looks": 4, "bound": "pooled"}
    story = _story(tmp_path, [("judged", {"verdict": "tie", "reason": "r", "width": width}, 2)])
    assert "(run CV 10.8 %, 9 df: baseline runs and earlier pairs)" in story, story


def test_a_judged_event_without_pair_gains_or_width_prints_no_bullets(tmp_path: Path) -> None:
    story = _story(tmp_path, [("judged", {"verdict": "tie", "reason": "change +1 %: a tie"}, 2)])
    assert "Judged       tie: change +1 %: a tie" in story and "pairs:" not in story and "width" not in story


def test_a_query_sets_measurement_gives_no_tps_and_says_its_p95_is_of_query_times(tmp_path: Path) -> None:
    times = {f"q{i:02d}": 0.5 + i / 10 for i in range(1, 23)}
    m = Measurement(
        workload="tpch",
        qps=22 / sum(times.values()),
        latency_p95_ms=2_610.0,
        transactions=22,
        total_time_s=sum(times.values()),
        per_query_s=times,
        objective=sum(times.values()),
        objective_name="total_time",
        higher_is_better=False,
    )
    pgbench = Measurement(workload="pgbench", tps=1_200.0, latency_p95_ms=9.5, objective=126.3)
    story = _story(
        tmp_path,
        [
            ("measured", {"label": "baseline 1", "measurement": m.model_dump(mode="json")}, 0),
            ("measured", {"label": "baseline 1", "measurement": pgbench.model_dump(mode="json")}, 0),
        ],
    )
    assert "Measurement  tpch [baseline 1]: objective 36.30, errors 0, p95 2,610.00 ms of its 22 queries' times" in (
        story
    ), story
    assert "tps -" not in story and "Measurement  pgbench [baseline 1]: tps 1,200.00, p95 9.50 ms, objective" in story


def test_a_snapshot_told_again_is_said_once_and_counts_are_in_the_singular_when_one(tmp_path: Path) -> None:
    _, _, story = session(tmp_path)
    assert story.count("safe snapshot 'baseline' of postgresql saved (4 values, 0 files)") == 1, story
    assert story.count("safe snapshot 'baseline' saved (as above)") == 3, story
    assert "safe snapshot 'round 4' of postgresql saved (4 values, 0 files)" in story  # another snapshot: whole
    assert ", 1 client, 2 CPUs," in story and "1 clients" not in story
    assert "tps -" not in story and "p95 - ms" not in story


def test_articles_and_plurals() -> None:
    classes = [a_workload(c) for c in ("olap", "oltp", "mixed")]
    assert classes == ["an OLAP workload", "an OLTP workload", "a mixed workload"]
    assert [counted(n, "file") for n in (0, 1, 2)] == ["0 files", "1 file", "2 files"]


def test_a_decision_line_gives_no_gain_where_none_was_counted(tmp_path: Path) -> None:
    """A fresh user's demo read "Decision continue, gain vs best -2.4%: race screen of 'evidence': … (one run the
    host disturbed: no gain counted)" and "Decision terminate, gain vs best -9.9%" for a round with no valid pair:
    the decision line quotes the effect only as far as it was measured."""
    noisy = Disturbance(samples=15, seconds=15.0, other_cpu_cores=2.5, other_cpu_spread=0.1, disturbed=True)
    run = Measurement(workload="tpch", objective=50.1, objective_name="total_time", higher_is_better=False)
    screen = RoundOutcome(
        session_id="s1",
        round_no=1,
        stage=Layer.dbms,
        bottleneck=Bottleneck.temp_spill,
        changes={"work_mem": "8MB"},
        measurement=run.model_copy(update={"disturbance": noisy}),
        objective=50.1,
        gain_vs_best=-0.0244,
        decision=Decision.continue_,
        reason="race screen of 'evidence': 50.100 (one run the host disturbed: no gain counted)",
    )
    clean = screen.model_copy(update={"round_no": 2, "measurement": run, "reason": "race screen of 'limits'"})
    unpaired = screen.model_copy(
        update={
            "round_no": 3,
            "measurement": run,
            "objective": None,
            "gain_vs_best": -0.099,
            "judged": "tie",
            "decision": Decision.terminate,
            "reason": "planner has nothing left",
        }
    )
    older = {"decision": "continue", "reason": "an older record", "gain_vs_best": -0.05, "unknown_field": 1}
    story = _story(
        tmp_path,
        [("decision", {**r.model_dump(mode="json"), "steps": []}, r.round_no) for r in (screen, clean, unpaired)]
        + [("decision", older, 4)],
    )
    lines = [ln.strip() for ln in story.splitlines() if ln.strip().startswith("Decision")]
    assert lines[0].startswith("Decision     continue, no effect measured (screen disturbed): race screen"), lines
    assert lines[1].startswith("Decision     continue, -2.4% in one screen run (not an interval): race"), lines
    assert lines[2] == "Decision     terminate, no effect measured (no valid pair): planner has nothing left", lines
    assert lines[3] == "Decision     continue: an older record", lines
    assert "gain vs best" not in story, story
