"""Approval mode with real processes: the daemon (policy.mode = "approve") proposes, waits, applies only
after ``agenticdb approve ID`` and drops a rejected proposal; every decision is journaled with the OS user.
Private PostgreSQL (the session's pg_sandbox); the values from before are put back by ``rollback --dbms``."""

from __future__ import annotations

import json
import os
import pwd
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from memtarget import InMemoryTarget, ScriptedPlanner, ScriptedWorkload

from agenticdb.advice.approval import Desk, Queue, may_decide
from agenticdb.app import advice_parts
from agenticdb.config import Settings
from agenticdb.config.loop_section import LoopConfig
from agenticdb.config.sections import DaemonConfig, PolicyConfig, StorageConfig, WorkloadConfig
from agenticdb.loop.session import TuningSession
from agenticdb.models.planning import PlanningContext
from agenticdb.planner.opening_types import Candidate, Opening
from agenticdb.sandbox.postgres import PostgresSandboxInfo
from agenticdb.store.journal import Journal
from agenticdb.store.memory import MemoryBook
from tests.test_advice import cli, write_config
from tests.test_daemon import NotifySocket

pytestmark = pytest.mark.usefixtures("no_opening")  # diagnosis rounds, not the opening (tests/test_race.py)


def _show(info: PostgresSandboxInfo, name: str) -> str:
    with psycopg.connect(info.dsn, autocommit=True) as conn:
        row = conn.execute(f"SHOW {name}").fetchone()
    assert row is not None
    return str(row[0])


def _events(journal: Path, prefix: str) -> list[tuple[str, dict[str, object]]]:
    with Journal(journal, read_only=True) as j:
        return [(e.event, e.data) for e in j.events() if e.event.startswith(prefix)]


def _wait(pred, timeout: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.3)
    return bool(pred())


def test_daemon_in_approve_mode_applies_only_approved_advice(
    pg_sandbox: PostgresSandboxInfo, storage_home: Path, tmp_path: Path
) -> None:
    queue = tmp_path / "queue"
    config = write_config(
        tmp_path / "agenticdb.toml",
        pg_sandbox.target_config("postgres"),
        storage_home,
        f"""[policy]
mode = "approve"
[loop]
stage = "dbms"
[daemon]
run_on_start = true
interval_hours = 100
watchdog_s = 3
approval_dir = "{queue}"
approve_source = "advice"
proposal_ttl_s = 600
advice_observe_s = 0
""",
    )
    notify = NotifySocket(tmp_path / "notify.sock")
    log = open(tmp_path / "daemon.log", "a")
    proc = subprocess.Popen(
        [sys.executable, "-m", "agenticdb.cli", "daemon", "--config", str(config)],
        env={**os.environ, "NOTIFY_SOCKET": str(notify.path)},
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    journal = storage_home / "journal.db"
    before = {k: _show(pg_sandbox, k) for k in ("work_mem", "maintenance_work_mem", "shared_buffers")}
    try:
        assert notify.wait_for("awaiting approval", 120), (tmp_path / "daemon.log").read_text()[-3000:]
        assert oct((queue / "decisions").stat().st_mode & 0o7777) == "0o2770"
        r = cli("pending", "--config", str(config))
        assert r.returncode == 0 and "work_mem" in r.stdout, r.stdout + r.stderr
        pending = {p.recommendation.knob: p for p in Queue(queue).pending()}
        time.sleep(1.5)  # proposals wait: nothing is applied without a decision
        assert {k: _show(pg_sandbox, k) for k in before} == before
        ok, no = pending["work_mem"], pending["maintenance_work_mem"]

        r = cli("reject", no.id, "--config", str(config), "--why", "change freeze", "--wait", "60")
        assert r.returncode == 0, r.stdout + r.stderr
        r = cli("approve", ok.id[:6], "--config", str(config), "--wait", "60")
        assert r.returncode == 0, r.stdout + r.stderr
        assert _wait(lambda: any(e == "approval.applied" for e, _ in _events(journal, "approval.")), 90)

        assert _show(pg_sandbox, "work_mem") == ok.recommendation.recommended
        assert _show(pg_sandbox, "maintenance_work_mem") == before["maintenance_work_mem"]
        assert _show(pg_sandbox, "shared_buffers") == before["shared_buffers"]  # never approved
        events = _events(journal, "approval.")
        me = pwd.getpwuid(os.getuid()).pw_name
        rejected = next(d for e, d in events if e == "approval.rejected")
        assert rejected["id"] == no.id and rejected["user"] == me and rejected["why"] == "change freeze"
        approved = next(d for e, d in events if e == "approval.applied")
        assert approved["id"] == ok.id and approved["user"] == me and "applied in session" in str(approved["result"])
        left = {p.id for p in Queue(queue).pending()}
        assert ok.id not in left and no.id not in left
        assert (queue / "rejected" / f"{no.id}.json").exists()
        r = cli("approve", no.id, "--config", str(config))
        assert r.returncode == 1 and "no pending proposal" in r.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        notify.close()
        log.close()
    r = cli("rollback", "--dbms", "--config", str(config))
    assert r.returncode == 0, r.stdout + r.stderr
    assert _show(pg_sandbox, "work_mem") == before["work_mem"]


def test_proposals_expire_and_the_group_decides(tmp_path: Path) -> None:
    from agenticdb.advice.types import Recommendation
    from agenticdb.models import ApplyMode, Layer

    q = Queue(tmp_path / "q")
    q.create()
    rec = Recommendation(
        id="Rabc",
        knob="work_mem",
        layer=Layer.dbms,
        current="4MB",
        recommended="8MB",
        apply=ApplyMode.reload,
        bottleneck="temp_spill",
        rule="r",
        reason="r",
        source="s",
    )
    assert q.propose([rec], "t", "approve", ttl_s=0.01) == ["Rabc"]
    time.sleep(0.05)
    assert q.pending() == [] and [p.id for p in q.expire()] == ["Rabc"]
    assert json.loads(json.dumps(os.listdir(q.proposals))) == []
    nobody = pwd.getpwnam("nobody").pw_uid
    assert may_decide(0, "root") and may_decide(nobody, None)
    assert not may_decide(nobody, "root")


@pytest.mark.parametrize("mode", ["advise"])
def test_advise_mode_never_applies(tmp_path: Path, mode: str) -> None:
    from agenticdb.advice.approval import ApprovalError
    from agenticdb.advice.types import Recommendation
    from agenticdb.models import ApplyMode, Layer

    q = Queue(tmp_path / "q")
    q.create()
    rec = Recommendation(
        id="Rdef",
        knob="work_mem",
        layer=Layer.dbms,
        current="4MB",
        recommended="8MB",
        apply=ApplyMode.reload,
        bottleneck="temp_spill",
        rule="r",
        reason="r",
        source="s",
    )
    q.propose([rec], "t", mode, ttl_s=60)  # type: ignore[arg-type]
    with pytest.raises(ApprovalError, match="never applies"):
        q.decide("Rdef", "approve")


def _start(config: Path, notify: NotifySocket, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "agenticdb.cli", "daemon", "--config", str(config)],
        env={**os.environ, "NOTIFY_SOCKET": str(notify.path)},
        stdout=open(log, "a"),
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )


def _waiting_trial(queue: Path, not_id: str | None, timeout: float) -> str | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        trials = [p for p in Queue(queue).pending() if p.kind == "trial" and p.id != not_id]
        if trials:
            return trials[0].id
        time.sleep(0.3)
    return None


@pytest.mark.slow
def test_daemon_session_waits_before_each_trial(
    pg_sandbox: PostgresSandboxInfo, storage_home: Path, tmp_path: Path
) -> None:
    """policy.mode = "approve" with the tuning session: the baseline is measured as usual, each round's
    change set waits in the queue; a rejected one is never applied (and its knobs are not proposed again),
    an approved one is tried and judged like any round."""
    queue = tmp_path / "queue"
    config = write_config(
        tmp_path / "agenticdb.toml",
        pg_sandbox.target_config(),
        storage_home,
        f"""[policy]
mode = "approve"
[workload]
kind = "pgbench"
scale = 1
clients = 2
threads = 1
duration_s = 2
warmup_s = 0
[loop]
max_rounds = 2
baseline_runs = 1
min_pairs = 1
max_pairs = 1
[daemon]
run_on_start = true
interval_hours = 100
watchdog_s = 3
approval_dir = "{queue}"
proposal_ttl_s = 600
""",
    )
    notify = NotifySocket(tmp_path / "notify.sock")
    proc = _start(config, notify, tmp_path / "daemon.log")
    journal = storage_home / "journal.db"
    try:
        # read the notify socket from the start: a full datagram queue would drop the STATUS line
        assert notify.wait_for("awaiting approval", 180), (tmp_path / "daemon.log").read_text()[-3000:]
        first = _waiting_trial(queue, None, 10)
        assert first is not None
        with Journal(journal, read_only=True) as j:
            assert not [e for e in j.events() if e.event == "applied"]  # nothing applied while it waits
        r = cli("reject", first, "--config", str(config), "--why", "not during business hours", "--wait", "60")
        assert r.returncode == 0, r.stdout + r.stderr
        second = _waiting_trial(queue, first, 120)
        assert second is not None, (tmp_path / "daemon.log").read_text()[-3000:]
        r = cli("approve", second, "--config", str(config), "--wait", "60")
        assert r.returncode == 0, r.stdout + r.stderr
        assert _wait(lambda: any(e == "approval.approved" for e, _ in _events(journal, "approval.")), 30)

        def ended() -> bool:
            with Journal(journal, read_only=True) as j:
                return any(e.event == "session.end" for e in j.events())

        assert _wait(ended, 180), (tmp_path / "daemon.log").read_text()[-3000:]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
        notify.close()
    with Journal(journal, read_only=True) as j:
        events = [e for e in j.events() if e.session_id != "daemon"]
    names = [e.event for e in events]
    rejected = next(e for e in events if e.event == "approval.rejected")
    approved = next(e for e in events if e.event == "approval.approved")
    me = pwd.getpwuid(os.getuid()).pw_name
    assert rejected.data["user"] == me and rejected.data["id"] == first
    assert approved.data["user"] == me and approved.data["id"] == second
    refused = next(e for e in events if e.event == "approval.refused")
    assert refused.round_no == rejected.round_no == 1 and "not during business hours" in refused.data["reason"]
    applied = [e for e in events if e.event == "applied"]
    assert applied and all(e.id > approved.id for e in applied)  # the only trial applied is the approved one
    rejected_knobs = set(refused.data["changes"])
    assert not rejected_knobs & set(applied[0].data["changes"])
    assert "session.end" in names


def _decide_as(uid: int, gid: int, root: Path, group: str, conn) -> None:  # type: ignore[no-untyped-def]
    from agenticdb.advice.approval import ApprovalError

    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    try:
        Queue(root, group).decide("Rabc", "approve")
        conn.send("decided")
    except ApprovalError as exc:
        conn.send(f"refused: {exc}")
    except Exception as exc:  # noqa: BLE001 - the parent asserts on what came back
        conn.send(f"crashed: {type(exc).__name__}: {exc}")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another OS user")
def test_a_user_outside_the_group_cannot_decide(tmp_path: Path) -> None:
    """A real process running as ``nobody`` (not in the queue's group) is refused with a one-line reason,
    and the proposal stays pending."""
    import multiprocessing

    from agenticdb.advice.types import Recommendation
    from agenticdb.models import ApplyMode, Layer

    tmp_path.chmod(0o755)
    q = Queue(tmp_path / "q", "root")
    q.create()
    rec = Recommendation(
        id="Rabc",
        knob="work_mem",
        layer=Layer.dbms,
        current="4MB",
        recommended="8MB",
        apply=ApplyMode.reload,
        bottleneck="temp_spill",
        rule="r",
        reason="r",
        source="s",
    )
    q.propose([rec], "t", "approve", ttl_s=60)
    nobody = pwd.getpwnam("nobody")
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    p = ctx.Process(target=_decide_as, args=(nobody.pw_uid, nobody.pw_gid, q.root, "root", child))
    p.start()
    p.join(30)
    answer = parent.recv()
    assert answer.startswith("refused:") and "not in its group 'root'" in answer, answer
    assert [x.id for x in q.pending()] == ["Rabc"] and not list(q.decisions.iterdir())


# ------------------------------------------------------------------ the opening in approve mode (issue 36)
OPENING_SETS = [("fast", {"work_mem": "8MB"}), ("plain", {"random_page_cost": "2"})]


def _opening_session(
    tmp_path: Path, script: list[dict[str, str]]
) -> tuple[threading.Thread, dict[str, Any], Desk, Path]:
    """A session over the in-memory target (tests/memtarget.py: work_mem 8MB runs 3 × the start) whose
    opening races ``OPENING_SETS``, gated by the daemon's real approval desk (``Desk.gate``) on a real queue
    directory; people decide with the real ``agenticdb approve|reject`` commands. The session runs in a
    thread (its SQLite stores are made there); returns (thread, box with its "session" and "result" or
    "error", the desk, the config file for the commands)."""
    queue = tmp_path / "queue"
    config = tmp_path / "agenticdb.toml"
    config.write_text(f'[storage]\nhome = "{tmp_path}"\n[daemon]\napproval_dir = "{queue}"\n')
    cfg = Settings(
        workload=WorkloadConfig(kind="pgbench", duration_s=1, warmup_s=0),
        loop=LoopConfig(opening=True, max_rounds=1, baseline_runs=2, plateau_rounds=5, search=False),
        policy=PolicyConfig(mode="approve"),
        storage=StorageConfig(home=tmp_path),
        daemon=DaemonConfig(approval_dir=queue, proposal_ttl_s=600),
    )

    def source(ctx: PlanningContext, k: int) -> Opening:
        return Opening([Candidate(n, dict(ch), f"test set {n}", {x: "test" for x in ch}) for n, ch in OPENING_SETS])

    desk = Desk(cfg, advice_parts())
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            target = InMemoryTarget()
            workload = ScriptedWorkload(target, lambda v: 300.0 if v.get("work_mem") == "8MB" else 100.0)
            journal = Journal(tmp_path / "journal.db")
            gate = desk.gate(journal, lambda: False, lambda status: None)
            s = box["session"] = TuningSession(
                cfg, target, workload, ScriptedPlanner(list(script)), journal, MemoryBook(tmp_path / "m.db"),
                approve=gate, opening=source,
            )  # fmt: skip
            box["result"] = s.run()
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box, desk, config


def _journal_events(tmp_path: Path, session_id: str) -> list[Any]:
    with Journal(tmp_path / "journal.db", read_only=True) as j:
        return [e for e in j.events() if e.session_id == session_id]


def test_one_approval_covers_the_whole_opening(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTICDB_LOOP__OPENING")  # this module's no_opening fixture; the environment wins
    t, box, desk, config = _opening_session(tmp_path, script=[])
    first = _waiting_trial(desk.queue.root, None, 60)
    assert first is not None
    rec = next(p for p in desk.queue.pending() if p.id == first).recommendation
    # the one proposal names every candidate's changes and says it is the opening
    assert set(rec.knob.split(", ")) == {"work_mem", "random_page_cost"} and rec.source == "opening planner"
    assert "races 2 whole configurations" in rec.reason
    r = cli("approve", first, "--config", str(config), "--wait", "60")
    assert r.returncode == 0, r.stdout + r.stderr
    t.join(120)
    assert not t.is_alive() and "error" not in box, box
    events = _journal_events(tmp_path, box["session"].session_id)
    # one approval for the two screens and the proof: nothing else was queued
    assert [e.data["id"] for e in events if e.event == "approval.proposed"] == [first]
    race = next(e for e in events if e.event == "race").data
    assert [row["candidate"] for row in race["table"]] == ["fast", "plain"] and race["leader"] == "fast"
    approved = next(e for e in events if e.event == "approval.approved")
    assert all(e.id > approved.id for e in events if e.event == "applied")  # nothing applied before it
    assert box["result"].best_changes == {"work_mem": "8MB"}


def test_a_refused_opening_is_skipped_and_bans_no_knob(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTICDB_LOOP__OPENING")  # this module's no_opening fixture; the environment wins
    # the diagnosis round after the refusal proposes one of the refused opening's knobs again
    t, box, desk, config = _opening_session(tmp_path, script=[{"work_mem": "8MB"}])
    first = _waiting_trial(desk.queue.root, None, 60)
    assert first is not None
    r = cli("reject", first, "--config", str(config), "--why", "no whole configurations today", "--wait", "60")
    assert r.returncode == 0, r.stdout + r.stderr
    second = _waiting_trial(desk.queue.root, first, 60)
    assert second is not None, "the diagnosis round's work_mem change was never queued: the refusal banned it"
    assert next(p for p in desk.queue.pending() if p.id == second).recommendation.knob == "work_mem"
    r = cli("approve", second, "--config", str(config), "--wait", "60")
    assert r.returncode == 0, r.stdout + r.stderr
    t.join(120)
    assert not t.is_alive() and "error" not in box, box
    events = _journal_events(tmp_path, box["session"].session_id)
    refused = next(e for e in events if e.event == "opening.refused")
    assert "no whole configurations today" in refused.data["reason"]
    assert not [e for e in events if e.event == "race"]  # skipped: no screen ran
    # no knob banned: no round holds a failed 'approval' check, and the round's work_mem change was kept
    result = box["result"]
    assert not [c for o in result.rounds for c in o.failed_checks if c.check == "approval"]
    assert result.best_changes == {"work_mem": "8MB"}


def _stale(table: str) -> Any:
    """A stale-statistics finding on ``table`` with its ANALYZE, as the root-cause pass makes one."""
    from agenticdb.rootcause import Cause, Finding, Remedy
    from agenticdb.rootcause.model import stable_id

    return Finding(
        id=stable_id("stale_statistics", table, "app"),
        cause=Cause.stale_statistics,
        family="postgresql",
        subject=table,
        score=0.9,
        summary=f"stale statistics on {table}",
        evidence=[f"{table}: n_mod_since_analyze 180,000 of 200,000 rows"],
        remedies=[Remedy(sql=f"ANALYZE {table}", automatic=True, lock_impact="SHARE UPDATE EXCLUSIVE")],
        database="app",
    )


def test_a_remedy_is_named_by_its_finding_id_beside_its_own(tmp_path: Path) -> None:
    """A DBA reads a finding id (RC…) in ``advise`` and a proposal id (R…) in ``pending``: pending, the
    STATUS line and the journal name both, and ``approve RC…`` takes the finding id when exactly one
    pending remedy carries it; otherwise the error names the proposals with their findings."""
    from agenticdb.advice.approval import queue_remedy, status_line

    queue = tmp_path / "queue"
    config = tmp_path / "agenticdb.toml"
    config.write_text(f'[storage]\nhome = "{tmp_path}"\n[daemon]\napproval_dir = "{queue}"\n')
    cfg = Settings(
        policy=PolicyConfig(mode="approve"),
        storage=StorageConfig(home=tmp_path),
        daemon=DaemonConfig(approval_dir=queue, proposal_ttl_s=600),
    )
    desk, journal = Desk(cfg, advice_parts()), Journal(tmp_path / "journal.db")
    orders, items = _stale("public.orders"), _stale("public.items")

    def offer(pid: str, finding: Any, session: str = "daemon") -> Any:
        return queue_remedy(
            desk, journal, session, None, pid=pid, target="t", finding=finding,
            remedy=finding.remedies[0], keep_finding=session == "daemon",
        )  # fmt: skip

    a, b = offer("Raaaaaaaaaa", orders), offer("Rbbbbbbbbbb", items)
    r = cli("pending", "--config", str(config))
    assert r.returncode == 0, r.stdout + r.stderr
    assert orders.id in r.stdout[r.stdout.index(a.id) : r.stdout.index(b.id)], r.stdout  # beside its proposal
    assert f"{a.id} (finding {orders.id})" in status_line(desk.queue.pending())
    proposed = {e.data["id"]: e.data.get("finding") for e in journal.events("daemon") if e.event == "approval.proposed"}
    assert proposed == {a.id: orders.id, b.id: items.id}

    r = cli("approve", orders.id, "--config", str(config))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{a.id} (finding {orders.id})" in r.stdout and (queue / "decisions" / f"{a.id}.json").exists()
    desk.tick(journal)  # the desk takes the decision (the remedy itself fails: no [remediation] dsn)
    approved = next(e.data for e in journal.events("daemon") if e.event == "approval.approved")
    assert approved["id"] == a.id and approved["finding"] == orders.id

    c = offer("Rcccccccccc", items, session="s1")  # the session's gate queued the same finding's remedy
    r = cli("approve", items.id, "--config", str(config))
    assert r.returncode == 1 and "carried by 2 pending remedies" in r.stderr, r.stderr
    assert f"{b.id} (finding {items.id})" in r.stderr and f"{c.id} (finding {items.id})" in r.stderr
    r = cli("reject", "RC0123456789", "--config", str(config))
    assert r.returncode == 1 and "no pending remedy carries finding 'RC0123456789'" in r.stderr, r.stderr
    assert f"{b.id} (finding {items.id})" in r.stderr
    # knob proposals queued earlier: the STATUS line (200 characters kept) still names the remedies first
    from agenticdb.advice.types import Recommendation
    from agenticdb.models import ApplyMode, Layer

    knobs = [
        Recommendation(
            id=f"Rk{i}",
            knob=k,
            layer=Layer.dbms,
            current="4MB",
            recommended="64MB",
            apply=ApplyMode.reload,
            bottleneck="temp_spill",
            rule="r",
            reason="r",
            source="s",
        )
        for i, k in enumerate(("work_mem", "maintenance_work_mem", "temp_buffers"))
    ]
    for p in desk.queue.pending():  # made newer than the knobs' (the desk queues advice's knobs first)
        (desk.queue.proposals / f"{p.id}.json").write_text(p.model_copy(update={"created_at": 1e10}).model_dump_json())
    desk.queue.propose(knobs, "t", "approve", ttl_s=600)
    line = status_line(desk.queue.pending())
    assert line.startswith(f"awaiting approval: 5 proposal(s): {b.id} (finding {items.id})"), line
    journal.close()
