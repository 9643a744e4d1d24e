"""What a DBA reads of an opening in `journal show` (a new user's trial of scripts/demo.sh, TPC-H SF 0.3):

1. each source and host fact once — the story printed each PGTune or manual source up to three times and the
   storage probe's sentence 8 times in 238 lines;
2. the race's figures say what they measure — the race table read "+4.4 %" for host-sized and the proof's
   rationale "+12.0 %" for the same screen: one the total time, the other the per-query statistic;
3. an "Applied" line tells the candidate's set against the starting configuration — it told the switch from
   the previous screen's configuration, which a DBA read as the candidate's proposal.

A real TuningSession writes a real journal: the in-memory target of tests/memtarget.py, a query-set workload
whose per-query times follow the knobs in effect (one long query and four short ones, so the total time and
the per-query statistic differ), and whole configurations citing their sources as the opening's generator
does (PGTune's rule, the manual's sentence, the storage probe's measurement through the real
``storage_choice``)."""

from __future__ import annotations

import io
import math
import re
from pathlib import Path
from typing import Any

from memtarget import InMemoryTarget, ScriptedPlanner, ScriptedWorkload, VirtualClock
from rich.console import Console

from agenticdb.cli.inspect_cmd import _report_rounds
from agenticdb.cli.story import render_story
from agenticdb.config import Settings
from agenticdb.config.loop_section import LoopConfig
from agenticdb.config.sections import StorageConfig, WorkloadConfig
from agenticdb.host.storage_probe import storage_choice
from agenticdb.loop.session import TuningSession
from agenticdb.models import Measurement
from agenticdb.models.planning import PlanningContext
from agenticdb.planner.opening_host import PG_RPC, PGTUNE
from agenticdb.planner.opening_types import Candidate, Opening
from agenticdb.report.footnotes import MIN_CHARS, clauses
from agenticdb.store.journal import Journal
from agenticdb.store.journal_events import JournalEvent
from agenticdb.store.memory import MemoryBook

PROBE = storage_choice(
    "ssd",
    "median 0.0571 ms random 8 kB O_DIRECT read of /var/lib/pg/base/16384/16397 (p90 0.0862 ms, 64 reads, "
    "CPU wait excluded)",
    "hdd",
    "vda",
)[1]
SETS = [
    Candidate(
        "host-sized",
        {"random_page_cost": "1.1", "effective_io_concurrency": "8"},
        "PGTune's whole configuration for this host: 1.00 GiB memory limit, 2 CPUs, 100 connections (kept), ssd "
        "storage, workload class olap, data 0.50 GiB; work_mem only up to what the memory budget holds",
        {
            "random_page_cost": f"{PGTUNE}: 1.1 on SSD/NVMe; {PG_RPC}; {PROBE}",
            "effective_io_concurrency": f"{PGTUNE}: HDD 2, SSD 200, NVMe 1000; {PROBE}",
        },
    ),
    Candidate(
        "evidence",
        # random_page_cost 2, not host-sized's 1.1: a screen making the leader's own move lends no knob
        # (opening_entries.joined), and host-sized must lend effective_io_concurrency here
        {"work_mem": "8MB", "random_page_cost": "2"},
        "the baseline's sorts spilled to disk and its reads hit the cache",
        {
            "work_mem": "temp files: 412 MB written a run by sorts at work_mem 4MB (pg_stat_database.temp_bytes)",
            "random_page_cost": f"{PG_RPC}; {PROBE}",
        },
    ),
    Candidate("limits", {"random_page_cost": "1.5"}, "the playbook's limits", {"random_page_cost": PG_RPC}),
]


class QuerySet(ScriptedWorkload):
    """One long query (q01, 8 s; 4 s with work_mem 8MB) and four short ones (0.5 s; 0.2 s with
    effective_io_concurrency 8): host-sized gains little total time and much on the per-query statistic.
    random_page_cost 1.5 alone ('limits') makes q01 9 s and the short ones 0.3 s: 2 % slower by total time, 0.8 %
    faster by the per-query statistic (0.8·ln(8/9) + 0.2·ln(0.5/0.3))."""

    def run(self, seconds, warmup_max_s=0.0, on_tool_start=None):  # type: ignore[no-untyped-def]
        m: Measurement = super().run(seconds, warmup_max_s, on_tool_start)
        values = self.target.values
        limits = values.get("random_page_cost") == "1.5"
        short = 0.2 if values.get("effective_io_concurrency") == "8" else 0.3 if limits else 0.5
        long = 4.0 if values.get("work_mem") == "8MB" else 9.0 if limits else 8.0
        times = {"q01": long, **{f"q0{i}": short for i in range(2, 6)}}
        total = sum(times.values())
        update: dict[str, Any] = {"objective": total, "objective_name": "total_time", "higher_is_better": False}
        return m.model_copy(update={**update, "tps": None, "total_time_s": total, "per_query_s": times})


def source(ctx: PlanningContext, k: int) -> Opening:
    return Opening(candidates=SETS[:k], absent=["llm: no LLM planner configured"])


def session(tmp_path: Path, disturb: frozenset[int] = frozenset()) -> tuple[TuningSession, list[JournalEvent], str]:
    """The session run, its journal's events and its story (as `journal show` renders it, 100 columns);
    ``disturb``: the workload's runs measured as disturbed (``ScriptedWorkload.disturb_runs``)."""
    clock = VirtualClock()
    target = InMemoryTarget()
    workload = QuerySet(target, lambda values: 1.0, clock)
    workload.disturb_runs = set(disturb)
    cfg = Settings(
        workload=WorkloadConfig(kind="pgbench", duration_s=1, warmup_s=0),
        loop=LoopConfig(max_rounds=3, baseline_runs=2, plateau_rounds=5, search=False),
        storage=StorageConfig(home=tmp_path),
    )
    s = TuningSession(
        cfg,
        target,
        workload,
        ScriptedPlanner([]),
        Journal(tmp_path / "j.db"),
        MemoryBook(tmp_path / "m.db"),
        opening=source,
        clock=clock.now,
    )
    s.run()
    events = s.journal.events(s.session_id)
    out = io.StringIO()
    render_story(Console(file=out, width=100, soft_wrap=True, highlight=False), s.session_id, events)
    return s, events, out.getvalue()


def unfolded(story: str) -> str:
    """``story`` with each folded source head put back whole: "PGTune (…) [1]: x" and later "PGTune [1]: y" read
    "PGTune (…): x", "PGTune (…): y" (``report.footnotes``: a head shared by clauses is numbered once)."""
    heads = {n: h for h, n in re.findall(r"([A-Z][^:;()\[\]]*? \([^()]+\)) \[(\d+)\]: ", story)}
    for n, head in heads.items():
        story = story.replace(f"{head} [{n}]: ", f"{head}: ")
        story = story.replace(f"{head.partition(' (')[0]} [{n}]: ", f"{head}: ")
    return story


def told(clause: str, story: str) -> bool:
    """Whether ``clause`` is in ``story`` whole, or as its head followed by ``see [n]`` for a tail (after ": ")
    the story told whole before (the proof's rationale ends with its candidate's); a source head the story folded
    is read back whole (:func:`unfolded`)."""
    story = unfolded(story)
    if clause in story:
        return True
    heads = [i + 2 for i in range(len(clause)) if clause.startswith(": ", i)]
    return any(clause[i:] in story and re.search(re.escape(clause[:i]) + r"see \[\d+\]", story) for i in heads)


def test_each_source_and_host_fact_is_told_once_and_every_fact_stays(tmp_path: Path) -> None:
    s, events, story = session(tmp_path)
    probe = clauses(PROBE)[0]  # "storage ssd measured: median 0.0571 ms random 8 kB O_DIRECT read of …"
    assert probe.startswith("storage ssd measured: median 0.0571 ms") and story.count(probe) == 1, story
    for fact in clauses(PG_RPC):  # the manual's two sentences
        assert story.count(fact) == 1, (fact, story)
    # PGTune's name heads two rules: told whole once, numbered, then by its name and number
    assert story.count(PGTUNE) == 1 and re.search(re.escape(PGTUNE) + r" \[(\d+)\]: 1.1 on SSD/NVMe", story), story
    n = re.search(re.escape(PGTUNE) + r" \[(\d+)\]", story).group(1)  # type: ignore[union-attr]
    assert f"effective_io_concurrency = 8: PGTune [{n}]: HDD 2, SSD 200, NVMe 1000 [" in story, story
    # the proof cites its sources by number: the leader's and the lender's, each told in a screen before it
    proof = story[story.index("opening proof of 'evidence+host-sized'") :]
    assert re.search(r"work_mem = 8MB: see \[\d+\]", proof) and re.search(
        r"random_page_cost = 2: see( \[\d+\])+", proof
    )
    # every fact stays: each clause of every source and rationale the journal holds is in the story, whole, and
    # each number cited was told with its clause
    for e in events:
        if e.event != "proposal":
            continue
        for text in [e.data["rationale"], *(c["rationale"] for c in e.data["changes"])]:
            for clause in clauses(text):
                assert len(clause) < MIN_CHARS or told(clause, story), clause
    cited = set(re.findall(r"see (?:\[\d+\] ?)+", story))
    numbers = {n for refs in cited for n in re.findall(r"\[(\d+)\]", refs)}
    assert numbers and all(re.search(rf"\S \[{n}\]", story) for n in numbers), numbers
    # `agenticdb report`'s rounds: the same sources, each told once
    report = "\n".join(_report_rounds(s.rounds, "s"))
    assert report.count(probe) == 1 and report.count(clauses(PG_RPC)[0]) == 1, report
    assert report.count(PGTUNE) == 1 and "PGTune [" in report, report
    assert "- change `random_page_cost = 2`: see [" in report, report
    # the evidence of a candidate is its changes' sources: told with the changes, not again above them
    assert "Evidence" not in story[story.index("Round 1 ·") : story.index("Round 2 ·")], story


def test_the_race_says_what_each_figure_measures(tmp_path: Path) -> None:
    _, events, story = session(tmp_path)
    race = next(e.data for e in events if e.event == "race")
    host = next(r for r in race["table"] if r["candidate"] == "host-sized")
    # total time 10 s → 8.8 s; d = 0.2 · ln(0.5 / 0.2) on the per-query weights (q01 0.8, the short ones 0.05)
    assert host["measured_by"] == "total time" and math.isclose(host["gain_on_start"], 10.0 / 8.8 - 1)
    assert math.isclose(host["per_query_gain"], math.expm1(0.2 * math.log(2.5)))
    assert (
        "8.800 (+13.6% on the starting level by total time, +20.1% by the per-query statistic, one run)"
        in (host["result"])
    )
    # the proof's rationale quotes the per-query statistic: it says so, and it is the table's figure
    assert race["joined"] == [
        "'host-sized' (+20.1% on the start's level by the per-query statistic): effective_io_concurrency"
    ]
    proof = next(e.data for e in events if e.event == "proposal" and e.data["planner"] == "opening:evidence+host-sized")
    assert "('host-sized' (+20.1% on the start's level by the per-query statistic)" in proof["rationale"]
    assert (
        "round 1 host-sized: effective_io_concurrency=8, random_page_cost=1.1 → 8.800 (+13.6% on the starting "
        "level by total time, +20.1% by the per-query statistic, one run)" in story
    )
    # the proof's verdict: the medians are total times, the gain is the per-query statistic's, each said
    assert (
        "Judged       better: candidate 4.80 vs best 10.00 (total time, medians of the pairs); by the per-query "
        "statistic: gain +109 % [" in story
    ), story
    # a screen's own decision says the same
    assert "race screen of 'host-sized': 8.800 (+13.6% on the starting level by total time, +20.1% by" in story


def test_applied_tells_the_candidates_set_against_the_start_then_the_switch(tmp_path: Path) -> None:
    s, events, story = session(tmp_path)
    applied = {e.round_no: e.data for e in events if e.event == "applied"}
    # round 2 (evidence) switched from host-sized's configuration: work_mem set, effective_io_concurrency put back
    assert applied[2]["changes"] == {"work_mem": "8MB", "effective_io_concurrency": "1", "random_page_cost": "2"}
    assert applied[2]["set"] == {"work_mem": "8MB", "random_page_cost": "2"}
    assert applied[2]["start"] == {"work_mem": "4MB", "random_page_cost": "4"}
    line = next(ln for ln in story.splitlines() if ln.startswith("  Applied") and "work_mem 4MB → 8MB" in ln)
    assert line.startswith(
        "  Applied      random_page_cost 4 → 2, work_mem 4MB → 8MB (the candidate's set against "
        "the starting configuration; the switch from the configuration in effect changed only "
        "effective_io_concurrency (back to 1), random_page_cost, work_mem)"
    ), line
    # the first screen switched from the start: its set is the switch, said once
    first = next(ln for ln in story.splitlines() if ln.startswith("  Applied"))
    assert first.endswith("(the candidate's set against the starting configuration)"), first
    # verified: the whole set and what was put back
    verified = next(e.data for e in events if e.event == "verified" and e.round_no == 2)
    assert verified["effective"] == {"work_mem": "8MB", "effective_io_concurrency": "1", "random_page_cost": "2"}


def test_a_journal_written_before_the_set_says_its_applied_line_is_the_switch(tmp_path: Path) -> None:
    """Journals written before ``set``: the line says it is only the switch (the candidate's set is its proposal)."""
    with Journal(tmp_path / "j.db") as j:
        j.append("s1", "session.start", {"target": "postgresql", "workload": "tpch"})
        data = {"purpose": "opening screen of 'evidence'", "mode": "reload", "restarted": False}
        j.append("s1", "applied", {**data, "changes": {"work_mem": "8MB", "effective_io_concurrency": "1"}}, 2)
        out = io.StringIO()
        render_story(Console(file=out, width=100, soft_wrap=True), "s1", j.events("s1"))
    assert (
        "Applied      effective_io_concurrency=1, work_mem=8MB (only what differs from the configuration in "
        "effect: the candidate's set is its Proposal)"
    ) in out.getvalue()


def test_an_opening_proof_with_nothing_to_switch_says_so(tmp_path: Path) -> None:
    """The proof of a race's last screen applies nothing (its set is in effect): the line says that instead of
    an empty list (old journals) or "changed only nothing" (journals with ``set``)."""
    with Journal(tmp_path / "j.db") as j:
        j.append("s1", "session.start", {"target": "mariadb", "workload": "sysbench"})
        data = {"purpose": "opening proof of 'evidence'", "mode": "dynamic", "restarted": False, "changes": {}}
        j.append("s1", "applied", data, 2)
        j.append("s2", "session.start", {"target": "mariadb", "workload": "sysbench"})
        told = {"set": {"innodb_buffer_pool_size": "94371840"}, "start": {"innodb_buffer_pool_size": "67108864"}}
        j.append("s2", "applied", {**data, **told}, 2)
        old, new = io.StringIO(), io.StringIO()
        render_story(Console(file=old, width=200, soft_wrap=True), "s1", j.events("s1"))
        render_story(Console(file=new, width=200, soft_wrap=True), "s2", j.events("s2"))
    assert (
        "Applied      nothing to switch: the configuration in effect is already the candidate's set (its Proposal)"
    ) in old.getvalue()
    assert (
        "Applied      innodb_buffer_pool_size 67108864 → 94371840 (the candidate's set against the starting "
        "configuration; already in effect: nothing was switched)"
    ) in new.getvalue()


def test_a_disturbed_screen_counts_no_gain_and_figures_of_opposite_sign_say_why(tmp_path: Path) -> None:
    """A new user's tune line read "— (screen disturbed: no effect measured); continue: race screen of 'host-sized':
    6.578 (-1.5% on the starting level by total time, +7.5% by the per-query statistic, one run)": the disturbed
    screen's figures are not printed as gains, and a total time and a per-query statistic of opposite signs say
    what that means. Run 3 is host-sized's screen; 'limits' (run 5) is 2 % slower by total time and 0.8 % faster
    by the per-query statistic."""
    s, events, story = session(tmp_path, frozenset({3}))
    reasons = {e.round_no: e.data["reason"] for e in events if e.event == "decision"}
    disturbed, limits = reasons[1], reasons[3]
    assert disturbed.startswith("race screen of 'host-sized': 8.800 (one run the host disturbed: no gain counted)")
    assert "%" not in disturbed and "disturbed: scripted: outside CPU load changed" in disturbed, disturbed
    assert "-2.0% on the starting level by total time, +0.8% by the per-query statistic, one run)" in limits, limits
    assert (
        "the two disagree: the queries that got slower lost more seconds than the faster ones saved, while by "
        "their time ratios, weighted by each query's share of the baseline's time, the faster ones count more"
    ) in limits, limits
    assert "disagree" not in reasons[2], reasons[2]  # evidence: faster by both
