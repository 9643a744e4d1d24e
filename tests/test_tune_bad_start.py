"""Issue 6 session-level acceptance on a real private PostgreSQL 15 with real pgbench runs.

* A DBA's bad start (tiny shared_buffers/work_mem/max_wal_size, commit_delay=1000 + commit_siblings=2;
  docs/measurement.md: measured the commit_delay trap at -39 % write TPS) given with ``tune --start-from`` is
  applied before the baseline, diagnosed, undone, and the session ends better than the baseline beyond
  the measured noise band.
* A session whose only candidate is a placebo ends as a tie, keeps nothing and puts the value back.
* A second session on the same home retrieves the first one's Experience and its first proposal says how
  it used it.

The sandbox is created through ``agenticdb sandbox up postgres`` in this module's own home, because these
sessions restart it and leave configurations behind.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from noise import FAULT_FAR_BEYOND_DISTURBANCE

from agenticdb.app import build_target, build_workload, open_stores
from agenticdb.config import Settings
from agenticdb.config.loop_section import LoopConfig
from agenticdb.config.sections import StorageConfig, WorkloadConfig
from agenticdb.loop.session import TuningSession
from agenticdb.models import Bottleneck, Change, Proposal
from agenticdb.models.planning import PlanningContext
from agenticdb.planner.base import Planner
from agenticdb.planner.heuristic import HeuristicPlanner
from agenticdb.sandbox.postgres import PostgresSandbox, PostgresSandboxInfo
from agenticdb.store.journal import Journal

pytestmark = pytest.mark.usefixtures("no_opening")  # diagnosis rounds, not the opening (tests/test_race.py)

CLI = [sys.executable, "-m", "agenticdb.cli"]

# The bad start. Every value passes the validator (it is legal, just slow). commit_delay is at its maximum,
# 100 ms (PostgreSQL 15 manual, 20.5.1): every commit sleeps that long before its WAL flush whenever 2 other
# transactions are open, which 8 pgbench clients always are, so throughput falls by an order of magnitude:
# a fault far beyond this host's run-to-run noise (docs/measurement.md), which is what a test of the
# diagnosis needs (the -39 % of commit_delay = 1000 is inside what a loaded 2-core host can blur).
BAD_START = {
    "shared_buffers": "16MB",
    "work_mem": "256kB",
    "max_wal_size": "32MB",
    "min_wal_size": "32MB",
    "commit_delay": 100000,
    "commit_siblings": 2,
}


def _cli(
    home: Path, *args: str, timeout: float = 1200, env_extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    # A pair with a run the host disturbed is measured again (never judged); on a host shared with other
    # jobs that happens often, so these sessions may repeat up to 10 pairs per decision rather than end in
    # "host too disturbed" (tests/test_disturbance.py and test_auditor.py test that ending).
    env = {**os.environ, "AGENTICDB_HOME": str(home), "AGENTICDB_LOOP__MAX_DISTURBED_REPEATS": "10"}
    env.update(env_extra or {})
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL
    )


_HOMES: list[Path] = []  # session homes (journal + memory only), removed with the module's sandbox


def _new_home(prefix: str) -> Path:
    """A temp dir the postgres OS user can traverse (pytest's tmp dirs are 0700)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o755)
    _HOMES.append(path)
    return path


@pytest.fixture(scope="module")
def home() -> Iterator[Path]:
    base = _new_home("agenticdb-badstart-")
    r = _cli(base, "sandbox", "up", "postgres")
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        yield base
    finally:
        _cli(base, "sandbox", "down", "postgres")
        shutil.rmtree(base, ignore_errors=True)
        for extra in _HOMES:
            shutil.rmtree(extra, ignore_errors=True)


@pytest.fixture(scope="module")
def info(home: Path) -> PostgresSandboxInfo:
    i = PostgresSandbox(home).info()
    assert i is not None
    return i


def _setting(info: PostgresSandboxInfo, name: str) -> str:
    with psycopg.connect(info.dsn, autocommit=True) as c:
        row = c.execute("SELECT setting FROM pg_settings WHERE name = %s", (name,)).fetchone()
        assert row is not None
        return str(row[0])


def _reset(info: PostgresSandboxInfo) -> None:
    """Back to the initdb configuration (ALTER SYSTEM RESET ALL + restart) between tests."""
    with psycopg.connect(info.dsn, autocommit=True) as c:
        c.execute("ALTER SYSTEM RESET ALL")
    pg_ctl = [f"{info.bindir}/pg_ctl", "-D", str(info.data_dir), "-w", "-l", str(info.log_file), "restart"]
    r = subprocess.run(["runuser", "-u", info.os_user, "--", *pg_ctl], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def _events(home: Path, session_id: str | None = None) -> tuple[str, list[Any]]:
    journal = Journal(home / "journal.db")
    sid = session_id or journal.sessions()[-1].id  # the newest: the session just run
    return sid, journal.events(sid)


def _first(events: list[Any], kind: str) -> Any:
    return next(e for e in events if e.event == kind)


def _settings(home: Path, info: PostgresSandboxInfo, **loop: Any) -> Settings:
    loop = {"max_disturbed_repeats": 10, **loop}  # see _cli
    return Settings(
        target=info.target_config(),
        workload=WorkloadConfig(
            kind="pgbench", scale=1, clients=8, threads=2, duration_s=3, warmup_s=1, warmup_max_s=0
        ),
        loop=LoopConfig(**{"opening": False, "max_rounds": 2, "baseline_runs": 3, "max_pairs": 3, **loop}),
        storage=StorageConfig(home=home),
    )


# ------------------------------------------------------------------------------------------- bad start
@pytest.mark.slow
def test_bad_start_is_diagnosed_undone_and_beats_the_baseline_beyond_noise(
    home: Path, info: PostgresSandboxInfo, tmp_path: Path
) -> None:
    _reset(info)
    start = tmp_path / "bad.toml"
    start.write_text("".join(f"{k} = {v!r}\n".replace("'", '"') for k, v in BAD_START.items()))
    r = _cli(
        home,
        "tune",
        "--sandbox",
        "postgres",
        "--workload",
        "pgbench",
        "--rounds",
        "1",
        "--duration",
        "4",
        "--warmup",
        "1",
        "--scale",
        "1",
        "--clients",
        "8",
        "--warmup-max",
        "0",
        "--baseline-runs",
        "3",
        "--max-pairs",
        "4",
        "--start-from",
        str(start),
        env_extra=FAULT_FAR_BEYOND_DISTURBANCE,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    sid, events = _events(home)
    kinds = [e.event for e in events]

    # --start-from went through the validator and was applied and verified before the baseline.
    start_ev = _first(events, "start_from")
    assert start_ev.data["verdict"]["ok"] is True
    i_start, i_base = kinds.index("start_from"), kinds.index("baseline")
    assert i_start < kinds.index("verified") < i_base
    verified = events[kinds.index("verified")].data
    assert "commit_delay" in str(verified), verified
    # ... so the baseline measured the bad start (the profile reads the server after applying it).
    current = _first(events, "profile").data["profile"]["current_config"]
    assert (current["commit_delay"], current["commit_siblings"]) == ("100000", "2"), current
    first_measured = events[kinds.index("measured")].data
    assert "baseline" in str(first_measured.get("label", "")), first_measured

    # Diagnosis: the first proposal fixes the worst offender alone and says why (WAL flush, commit_delay).
    proposal = _first(events, "proposal").data
    assert {c["name"]: str(c["value"]) for c in proposal["changes"]} == {"commit_delay": "0"}, proposal
    assert proposal["bottleneck"] == Bottleneck.wal_fsync.value
    text = proposal["rationale"] + " ".join(c["rationale"] for c in proposal["changes"])
    assert "commit_delay" in text and "worst offender" in text, text
    # ... and names the other bad-start floors that follow in the next round.
    assert "shared_buffers" in proposal["rationale"] and "max_wal_size" in proposal["rationale"]

    # The judged event of that round: better, its interval above zero, from interleaved paired runs.
    judged = [e for e in events if e.event == "judged"]
    round1 = next(e for e in judged if e.round_no == 1).data
    assert round1["verdict"] == "better", round1
    assert round1["low"] > 0 and round1["gain"] > round1["low"], round1
    assert round1["pairs"] >= 2 and len(round1["candidate"]) == len(round1["best"]) == round1["pairs"], round1
    assert "pairs, 95 %" in round1["interval"]

    end = _first(events, "session.end").data
    assert end["status"] == "completed", end
    assert str(end["best_changes"].get("commit_delay")) == "0", end
    baseline_ev = _first(events, "baseline").data
    assert end["best_objective"] > end["baseline_objective"], (end, baseline_ev)
    # The bad setting is undone on the server.
    assert _setting(info, "commit_delay") == "0"
    print(
        f"\nbad start: baseline {end['baseline_objective']:.2f} -> best {end['best_objective']:.2f} "
        f"(cv {baseline_ev['noise_cv']:.1%}); round 1 {round1['interval']}; "
        f"pairs {round1['candidate']} vs {round1['best']}"
    )


# ------------------------------------------------------------------------------------------------ tie
class PlaceboPlanner(Planner):
    """Proposes one placebo change, then reports a plateau."""

    name = "placebo"

    def __init__(self, change: Change) -> None:
        self.change = change

    def propose(self, ctx: PlanningContext) -> Proposal:
        if ctx.rounds:
            return Proposal(
                bottleneck=Bottleneck.unknown,
                changes=[],
                plateau=True,
                planner=self.name,
                rationale="placebo tried",
            )
        return Proposal(
            bottleneck=Bottleneck.io_queue,
            changes=[self.change],
            planner=self.name,
            rationale="a change pgbench cannot feel",
        )


def test_placebo_candidate_is_a_tie_and_is_reverted(home: Path, info: PostgresSandboxInfo) -> None:
    """vacuum_cost_delay throttles only manual VACUUM/ANALYZE (autovacuum has its own
    autovacuum_vacuum_cost_delay, 2ms by default) and ``pgbench -n`` runs none, so the candidate differs
    from the best by noise only. (random_page_cost is no placebo here: on the 1-row pgbench_branches and
    10-row pgbench_tellers it can flip seq scan / index scan plans over bloated pages.)"""
    _reset(info)
    sess_home = _new_home("agenticdb-tie-")
    # 99.9 %: a placebo is called better by chance at most 0.1 % of the time, so the test cannot flake on it
    cfg = _settings(sess_home, info, max_rounds=1, confidence=0.999)
    journal, memory = open_stores(cfg)
    target = build_target(cfg)
    session = TuningSession(
        cfg,
        target,
        build_workload(cfg, target),
        PlaceboPlanner(Change(name="vacuum_cost_delay", value="10ms")),
        journal,
        memory,
    )
    result = session.run()

    assert result.status == "completed", result.reason
    assert len(result.rounds) == 1
    outcome = result.rounds[0]
    assert outcome.changes == {"vacuum_cost_delay": "10ms"}
    assert outcome.kept is False
    judged = _first(journal.events(session.session_id), "judged").data
    assert judged["verdict"] in ("tie", "worse"), judged  # never kept; "worse" would be noise read as a loss
    assert _first(journal.events(session.session_id), "reverted").data["to"] == "baseline"
    assert result.best_changes == {}
    assert _setting(info, "vacuum_cost_delay") == "0"
    exp = memory.retrieve(_fp(journal, session.session_id))
    assert exp and exp[0][1].session_id == session.session_id
    # a tie is stored as inconclusive: neither a direction to repeat nor one to avoid
    if judged["verdict"] == "tie":
        assert exp[0][1].inconclusive and not exp[0][1].beneficial and not exp[0][1].ineffective
    assert not exp[0][1].beneficial
    assert exp[0][1].best_config == {}
    print(f"\nplacebo: {judged['verdict']} {judged['interval']}; candidate {judged['candidate']} best {judged['best']}")


def _fp(journal: Journal, session_id: str) -> Any:
    from agenticdb.models.planning import Fingerprint

    return Fingerprint.model_validate(_first(journal.events(session_id), "profile").data["fingerprint"])


# ------------------------------------------------------------------------------------ experience memory
def test_second_session_retrieves_the_first_ones_experience(home: Path, info: PostgresSandboxInfo) -> None:
    """Session A proposes a shared_buffers the validator refuses (beyond the step bound and the memory
    budget), which its Experience stores as failed; session B on the same home, with the heuristic planner,
    retrieves it and its first proposal says it steers around it."""
    _reset(info)
    sess_home = _new_home("agenticdb-memory-")
    cfg = _settings(sess_home, info, max_rounds=1, baseline_runs=2, min_pairs=1, max_pairs=1)
    cfg.workload.duration_s, cfg.workload.warmup_s = 2, 0.5  # only the retrieval is under test here
    journal, memory = open_stores(cfg)
    target = build_target(cfg)
    first = TuningSession(
        cfg,
        target,
        build_workload(cfg, target),
        PlaceboPlanner(Change(name="shared_buffers", value="64TB")),
        journal,
        memory,
    )
    a = first.run()
    assert a.status == "completed" and a.best_changes == {}, a.reason
    assert a.rounds[0].verdict_ok is False

    second = TuningSession(cfg, target, build_workload(cfg, target), HeuristicPlanner(), journal, memory)
    b = second.run()
    assert b.status == "completed", b.reason
    events = journal.events(second.session_id)
    kinds = [e.event for e in events]
    retrieved = _first(events, "experience.retrieved").data
    assert first.session_id in retrieved["sessions"], retrieved
    assert kinds.index("experience.retrieved") < kinds.index("proposal")
    proposal = _first(events, "proposal").data
    assert f"avoiding retrieved failed shared_buffers=64TB (session {first.session_id})" in proposal["rationale"], (
        proposal["rationale"]
    )
    assert {"name": "shared_buffers", "value": "64TB"} not in [
        {"name": c["name"], "value": str(c["value"])} for c in proposal["changes"]
    ]
    # Both sessions' Experience is now stored; a third would retrieve the newer first among equals.
    assert {e.session_id for _, e in memory.retrieve(_fp(journal, second.session_id))} >= {
        first.session_id,
        second.session_id,
    }
    print(f"\nmemory: B's first proposal: {proposal['rationale']}")
