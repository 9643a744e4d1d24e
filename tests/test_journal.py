"""Journal: hash chain, append-only triggers, tamper detection, intents, export, and the journal CLI on
real SQLite files."""

from __future__ import annotations

import io
import json
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agenticdb.cli.journal_cmd import journal_app
from agenticdb.models import (
    ApplyMode,
    Bottleneck,
    Change,
    Decision,
    FailedCheck,
    Layer,
    Measurement,
    NormalizedChange,
    Proposal,
    RoundOutcome,
    Snapshot,
    Verdict,
)
from agenticdb.store.journal import GENESIS_HASH, Journal, row_hash
from agenticdb.store.journal_events import JournalError

runner = CliRunner()
N_ROWS = 19  # rows written by _write_session


def _snapshot() -> Snapshot:
    return Snapshot(
        target="postgresql",
        values={"shared_buffers": "128MB"},
        files={"/data/postgresql.auto.conf": "# empty\n"},
        label="round 1 safe",
    )


def _write_session(j: Journal, sid: str = "sess-0001") -> None:
    """A realistic two-round session as the round loop journals it."""
    j.append(sid, "session.start", {"target": "postgresql 15 @ sandbox", "workload": "pgbench"})
    pristine = {"data_dir": "/srv/pg/data", "seconds": 0.4, "reason": "reset before every measured run"}
    j.append(sid, "pristine.captured", pristine, round_no=0)
    j.append(sid, "baseline", {"objectives": [98.0, 100.0, 103.0], "noise_cv": 0.05}, round_no=0)
    proposal = Proposal(
        bottleneck=Bottleneck.buffer_cache,
        changes=[Change(name="shared_buffers", value="512MB", rationale="hit ratio 0.81 below 0.99")],
        evidence=["blks_read/s=1200, hit ratio 0.81"],
        ruled_out=["wal_fsync: wal_sync 0.1 ms/tx"],
        rationale="reads miss the buffer cache",
        apply_requirement=ApplyMode.restart,
    )
    j.append(sid, "proposal", proposal, round_no=1)
    verdict = Verdict(
        ok=True,
        apply_requirement=ApplyMode.restart,
        changes=[
            NormalizedChange(
                name="shared_buffers",
                value="512MB",
                base_value=65536,
                unit="8kB",
                apply=ApplyMode.restart,
                previous="128MB",
            )
        ],
    )
    j.append(sid, "verdict", verdict, round_no=1)
    j.append(
        sid,
        "intent",
        {
            "snapshot": _snapshot().model_dump(mode="json"),
            "changes": [c.model_dump(mode="json") for c in verdict.changes],
            "target": "postgresql",
        },
        round_no=1,
    )
    j.append(sid, "applied", {"effective": {"shared_buffers": "512MB"}, "restarted": True}, round_no=1)
    m = Measurement(workload="pgbench", tps=820.0, latency_p95_ms=6.5, objective=126.2, duration_s=5)
    j.append(sid, "measured", m, round_no=1)
    j.append(
        sid,
        "decision",
        RoundOutcome(
            session_id=sid,
            round_no=1,
            stage=Layer.dbms,
            bottleneck=Bottleneck.buffer_cache,
            proposal=proposal,
            verdict_ok=True,
            changes={"shared_buffers": "512MB"},
            measurement=m,
            objective=126.2,
            gain_vs_best=0.262,
            kept=True,
            decision=Decision.continue_,
            reason="gain 26.2% beats noise 10%",
        ),
        round_no=1,
    )
    rejected = Verdict(
        ok=False,
        failed=[
            FailedCheck(
                check="durability",
                parameter="fsync",
                value="off",
                message="can lose committed data",
                source="PostgreSQL docs 20.5.1",
            )
        ],
    )
    j.append(sid, "verdict", rejected, round_no=2)
    # round 3 as the executor and session journal it: a candidate judged as noise and reverted
    j.append(
        sid,
        "intent",
        {
            "purpose": "trial",
            "mode": "reload",
            "target": "postgresql",
            "changes": [{"name": "work_mem", "value": "64MB"}],
            "snapshot": _snapshot().model_dump(mode="json"),
        },
        round_no=3,
    )
    j.append(
        sid,
        "applied",
        {"purpose": "trial", "mode": "reload", "restarted": False, "changes": {"work_mem": "64MB"}},
        round_no=3,
    )
    j.append(sid, "verified", {"purpose": "trial", "effective": {"work_mem": "64MB"}}, round_no=3)
    j.append(
        sid,
        "measured",
        {
            "label": "candidate",
            "measurement": m.model_copy(update={"tps": 790.0, "objective": 121.5}).model_dump(mode="json"),
        },
        round_no=3,
    )
    j.append(
        sid,
        "judged",
        {"verdict": "tie", "gain": -0.037, "threshold": 0.1, "reason": "inside the noise band"},
        round_no=3,
    )
    j.append(sid, "reverted", {"to": "round 1", "reason": "inside the noise band"}, round_no=3)
    stop = {
        "decision": "terminate",
        "reason": "time budget used",
        "elapsed_s": 231.5,
        "time_budget_s": 240.0,
        "budget_used": 0.965,
        "rounds_done": 3,
        "max_rounds": 100,
        "round_cost_s": 41.0,
        "search_rounds": [{"round": 3, "judged": "tie", "kept": False, "gain": -0.037, "low": -0.09, "high": 0.02}],
    }
    j.append(sid, "stop", stop, round_no=3)
    j.close_intent(sid, 3, "reverted")
    j.append(
        sid,
        "session.end",
        {
            "status": "completed",
            "baseline_objective": 100.0,
            "best_objective": 126.2,
            "best_changes": {"shared_buffers": "512MB"},
        },
    )


def test_chain_verifies_and_links(tmp_path: Path) -> None:
    j = Journal(tmp_path / "journal.db")
    _write_session(j)
    result = j.verify()
    assert result.ok and result.rows_checked == N_ROWS and result.first_bad_id is None
    events = j.events("sess-0001")
    assert events[0].prev_hash == GENESIS_HASH
    for before, after in zip(events, events[1:], strict=False):
        assert after.prev_hash == before.hash
    raw = (
        sqlite3.connect(tmp_path / "journal.db")
        .execute("SELECT id, ts, session_id, round_no, event, data, prev_hash, hash FROM journal WHERE id = 3")
        .fetchone()
    )
    assert row_hash(raw[6], raw[0], raw[1], raw[2], raw[3], raw[4], raw[5]) == raw[7]
    # canonical JSON: sorted keys, no spaces
    assert raw[5] == json.dumps(json.loads(raw[5]), sort_keys=True, separators=(",", ":"))


def test_triggers_forbid_update_and_delete(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    Journal(path).append("s", "session.start", {"target": "x"})
    conn = sqlite3.connect(path)
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("UPDATE journal SET event = 'x'")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("DELETE FROM journal")


def test_tampered_row_is_named(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    j = Journal(path)
    _write_session(j)
    # An attacker with file access drops the trigger and rewrites row 8 (the measurement).
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER journal_no_update")
    conn.execute("UPDATE journal SET data = replace(data, '820.0', '9820.0') WHERE id = 8")
    conn.commit()
    result = Journal(path).verify()
    assert not result.ok
    assert result.first_bad_id == 8
    assert "modified" in result.reason

    res = runner.invoke(journal_app, ["verify", "--home", str(tmp_path)])
    assert res.exit_code == 1
    assert "row 8" in res.output


def test_deleted_rows_are_detected(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    _write_session(Journal(path))
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER journal_no_delete")
    conn.execute("DELETE FROM journal WHERE id = 4")
    conn.commit()
    result = Journal(path).verify()
    assert (result.ok, result.first_bad_id) == (False, 5)
    assert "row 3" in result.reason
    conn.execute("DROP TRIGGER IF EXISTS journal_no_delete")
    conn.execute("DELETE FROM journal WHERE id >= 5")  # rows 5..19
    conn.commit()
    conn.close()
    tail = Journal(path).verify()  # rows 1..3 chain fine, but 5..10 were handed out and are gone
    assert not tail.ok and tail.first_bad_id == 4 and "tail deleted" in tail.reason


def test_bad_input_names_the_value(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.db")
    with pytest.raises(JournalError, match="event='Bad Event'"):
        j.append("s", "Bad Event", {})
    with pytest.raises(JournalError, match="round_no=-1"):
        j.append("s", "proposal", {}, round_no=-1)
    with pytest.raises(JournalError, match="session_id=''"):
        j.append("", "proposal", {})
    with pytest.raises(JournalError, match="canonical JSON"):
        j.append("s", "measured", {"objective": float("nan")})
    assert j.last_id() == 0


def test_open_and_closed_intents(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.db")
    snap = _snapshot().model_dump(mode="json")
    # round 1: intent, applied, measured, then the session closes it (kept or reverted) -> closed
    j.append("a", "intent", {"snapshot": snap, "changes": [], "target": "postgresql"}, round_no=1)
    j.append("a", "applied", {}, round_no=1)
    j.append("a", "measured", {"objective": 1.0}, round_no=1)
    j.close_intent("a", 1, "reverted")
    # round 2: intent, applied, crash before measurement -> open
    j.append("a", "intent", {"snapshot": snap, "changes": [{"name": "work_mem"}], "target": "pg"}, round_no=2)
    j.append("a", "applied", {}, round_no=2)
    # round 3: intent then recovery -> closed
    j.append("a", "intent", {"snapshot": snap}, round_no=3)
    j.append("a", "failure", {"phase": "restart"}, round_no=3)
    j.append("a", "recovery", {"action": "restored"}, round_no=3)
    # other session, round 2: a decision does not close it (only the session's explicit close does)
    j.append("b", "intent", {"snapshot": snap}, round_no=2)
    j.append("b", "decision", {"reason": "x"}, round_no=2)
    # intent without a round (final best apply of the session)
    j.append("a", "intent", {"snapshot": snap})
    opened = j.open_intents()
    assert [(i.session_id, i.round_no) for i in opened] == [("a", 2), ("b", 2), ("a", None)]
    assert opened[0].changes == [{"name": "work_mem"}]
    assert opened[2].snapshot is not None and opened[2].snapshot.values == {"shared_buffers": "128MB"}
    # a measurement does not close it: the trial config is in effect until kept or reverted
    j.append("a", "measured", {"objective": 2.0}, round_no=2)
    assert len(j.open_intents()) == 3
    j.append("a", "reconcile", {"target": "pg"}, round_no=2)
    assert [(i.session_id, i.round_no) for i in j.open_intents()] == [("b", 2), ("a", None)]
    j.close_intent("a", None, "best configuration verified")
    j.close_intent("b", 2, "restored by reconcile")
    assert j.open_intents() == []


def test_open_intent_after_crash_carries_snapshot(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.db")
    j.append(
        "s",
        "intent",
        {
            "snapshot": _snapshot().model_dump(mode="json"),
            "changes": [{"name": "shared_buffers", "value": "1GB"}],
            "target": "postgresql",
        },
        round_no=4,
    )
    j.append("s", "applied", {"effective": {"shared_buffers": "1GB"}}, round_no=4)
    # a reader process opening the file after the crash
    (intent,) = Journal(tmp_path / "j.db").open_intents()
    assert intent.round_no == 4 and intent.target == "postgresql"
    assert intent.snapshot is not None
    assert intent.snapshot.files == {"/data/postgresql.auto.conf": "# empty\n"}
    assert intent.changes == [{"name": "shared_buffers", "value": "1GB"}]


def test_sessions_tail_export(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.db")
    _write_session(j, "sess-A")
    j.append("sess-B", "session.start", {"target": "mariadb", "workload": "sysbench"})
    (a, b) = j.sessions()
    assert (a.id, a.status, a.rounds, a.baseline_objective, a.best_objective) == (
        "sess-A",
        "completed",
        3,
        100.0,
        126.2,
    )
    assert a.target == "postgresql 15 @ sandbox" and a.ended is not None
    assert (b.id, b.status, b.workload, b.ended) == ("sess-B", "unfinished", "sysbench", None)
    assert [e.event for e in j.tail(2)] == ["session.end", "session.start"]
    buf = io.StringIO()
    assert j.export_jsonl(buf, session_id="sess-A") == N_ROWS
    lines = [json.loads(line) for line in buf.getvalue().splitlines()]
    assert lines[0]["event"] == "session.start" and lines[-1]["data"]["best_objective"] == 126.2
    assert {line["session_id"] for line in lines} == {"sess-A"}
    assert j.find_session("sess-B") == "sess-B"
    with pytest.raises(JournalError, match="ambiguous"):
        j.find_session("sess-")


def test_follow_sees_appends_from_another_writer(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    reader = Journal(path)
    writer = Journal(path)

    def write() -> None:
        for i in range(3):
            writer.append("s", "measured", {"objective": float(i)}, round_no=1)

    start = reader.last_id()  # follow from here, whenever the generator first runs
    t = threading.Timer(0.2, write)
    t.start()
    # Wait for the three events (a generous idle timeout only ends a follow that would otherwise hang).
    events = reader.follow(after_id=start, poll_s=0.05, idle_timeout_s=60.0)
    got = [next(events).data["objective"] for _ in range(3)]
    t.join()
    assert got == [0.0, 1.0, 2.0]


def test_concurrent_writers_keep_one_chain(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    journals = [Journal(path) for _ in range(4)]

    def work(j: Journal, n: int) -> None:
        for i in range(25):
            j.append(f"s{n}", "llm.call", {"i": i})

    threads = [threading.Thread(target=work, args=(j, n)) for n, j in enumerate(journals)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    result = Journal(path).verify()
    assert result.ok and result.rows_checked == 100


def test_two_processes_append_to_one_chain(tmp_path: Path) -> None:
    """A daemon and a CLI are separate processes: their appends must interleave into one chain."""
    path = tmp_path / "j.db"
    Journal(path).append("main", "session.start", {})
    code = (
        "import sys; from agenticdb.store.journal import Journal\n"
        "j = Journal(sys.argv[1])\n"
        "for i in range(40): j.append('child', 'measured', {'i': i}, round_no=1)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code, str(path)])
    j = Journal(path)
    for i in range(40):
        j.append("main", "measured", {"i": i}, round_no=1)
    assert child.wait(timeout=60) == 0
    result = j.verify()
    assert result.ok and result.rows_checked == 81
    assert [e.data["i"] for e in j.events("child")] == list(range(40))


# -- CLI on real files ---------------------------------------------------------------------------


def test_cli_list_show_tail_export(tmp_path: Path) -> None:
    j = Journal(tmp_path / "journal.db")
    _write_session(j, "sess-0001")
    j.close()
    home = ["--home", str(tmp_path)]

    res = runner.invoke(journal_app, ["list", *home])
    assert res.exit_code == 0, res.output
    assert "sess-0001" in res.output and "completed" in res.output

    res = runner.invoke(journal_app, ["show", "sess-0", *home], env={"COLUMNS": "160"})
    assert res.exit_code == 0, res.output
    out = res.output
    # the story, in order, per round
    order = [
        "Pristine",
        "data copied from /srv/pg/data in 0.4 s; reset before every measured run",
        "Round 1",
        "Evidence",
        "blks_read/s=1200",
        "Diagnosis",
        "buffer_cache",
        "Proposal",
        "shared_buffers = 512MB",
        "Verdict",
        "Intent",
        "Applied",
        "server restarted",
        "Measurement",
        "820",
        "Decision",
        "continue",
        "gain 26.2%",
        "Round 2",
        "rejected",
        "fsync=off",
        "can lose committed data",
        "Round 3",
        "Intent",
        "trial apply reload",
        "Applied",
        "work_mem=64MB",
        "Measurement",
        "[candidate]",
        "790",
        "Judged",
        "tie",
        "Reverted",
        "back to round 1",
        "Stop",
        "terminate: time budget used; 231.5 s of a 240 s budget (96%), 3 of 100 rounds",
        "search round 3: tie, gain -3.7% [-9.0%, +2.0%], not kept",
        "Session end",
        "Best config",
        "shared_buffers=512MB",
    ]
    at = 0
    for word in order:  # each piece appears after the one before it
        found = out.find(word, at)
        assert found >= 0, f"{word!r} missing after position {at} in:\n{out}"
        at = found + len(word)

    res = runner.invoke(journal_app, ["tail", "-n", "2", *home])
    assert res.exit_code == 0 and "session.end" in res.output and "proposal" not in res.output

    res = runner.invoke(journal_app, ["verify", *home])
    assert res.exit_code == 0 and f"{N_ROWS} rows" in res.output

    out_file = tmp_path / "out.jsonl"
    res = runner.invoke(
        journal_app, ["export", "--format", "jsonl", "--session", "sess-0001", "-o", str(out_file), *home]
    )
    assert res.exit_code == 0, res.output
    assert len(out_file.read_text().splitlines()) == N_ROWS

    res = runner.invoke(journal_app, ["export", "--format", "csv", *home])
    assert res.exit_code != 0 and "csv" in res.output

    res = runner.invoke(journal_app, ["show", "nope", *home])
    assert res.exit_code == 1 and "nope" in res.output


def test_cli_tail_follow_stops_when_idle(tmp_path: Path) -> None:
    j = Journal(tmp_path / "journal.db")
    j.append("s", "session.start", {"target": "t"})
    res = runner.invoke(journal_app, ["tail", "-f", "--idle-timeout", "0.3", "--home", str(tmp_path)])
    assert res.exit_code == 0 and "session.start" in res.output


def test_cli_config_points_at_storage(tmp_path: Path) -> None:
    home = tmp_path / "data"
    Journal(home / "journal.db").append("cfg-session", "session.start", {"target": "t"})
    cfg = tmp_path / "agenticdb.toml"
    cfg.write_text(f'[storage]\nhome = "{home}"\n')
    res = runner.invoke(journal_app, ["list", "--config", str(cfg)])
    assert res.exit_code == 0 and "cfg-session" in res.output
    res = runner.invoke(journal_app, ["verify", "--home", str(tmp_path / "empty")])
    assert res.exit_code == 1 and "does not exist" in res.output
