"""Memory Book on real SQLite files: sessions and rounds, experience retrieval by fingerprint similarity,
LLM accounting, OS originals, export/import, and the memory CLI."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from agenticdb.cli.memory_cmd import memory_app
from agenticdb.models import Bottleneck, Decision, Disturbance, Layer, Measurement, RoundOutcome
from agenticdb.models.planning import Experience, Fingerprint
from agenticdb.store.memory import WEIGHTS, MemoryBook, MemoryBookError, similarity
from agenticdb.store.memory.experience import distill_experience
from agenticdb.store.memory.transfer import export_book, import_book

runner = CliRunner()


def fp(**kw: object) -> Fingerprint:
    base: dict[str, object] = dict(
        dbms="postgresql",
        version_major="15",
        benchmark="pgbench",
        workload_class="oltp",
        read_fraction=0.7,
        access_pattern="uniform",
        scale=10,
        concurrency=4,
        objective="tps_per_p95",
    )
    base.update(kw)
    return Fingerprint.model_validate(base)


def exp(session_id: str, f: Fingerprint, gain: float = 0.1) -> Experience:
    return Experience(
        fingerprint=f,
        session_id=session_id,
        recurring_bottlenecks=["buffer_cache"],
        beneficial=[{"changes": {"shared_buffers": "1GB"}, "gain": gain, "bottleneck": "buffer_cache"}],
        failed=[{"changes": {"wal_level": "minimal"}, "reason": "server did not start"}],
        best_config={"shared_buffers": "1GB"},
        best_config_relative={"shared_buffers": {"fraction_of_memory": 0.25}},
        best_gain=gain,
    )


def test_weights_sum_to_one() -> None:
    assert sum(WEIGHTS.values()) == pytest.approx(1.0)


def test_similarity_orders_by_closeness() -> None:
    me = fp()
    assert similarity(me, me) == 1.0
    same_class = fp(read_fraction=0.6, scale=20)
    other_class = fp(workload_class="olap", read_fraction=1.0, benchmark="tpch", objective="total_time")
    mixed = fp(workload_class="mixed")
    assert similarity(me, same_class) > similarity(me, mixed) > similarity(me, fp(workload_class="olap"))
    assert similarity(me, same_class) > similarity(me, other_class)
    assert similarity(me, fp(dbms="mariadb", version_major="10.11")) == 0.0  # other family: no transfer
    mysql, maria = fp(dbms="mysql", version_major="8.0"), fp(dbms="mariadb", version_major="10.11")
    assert 0 < similarity(mysql, maria) < 1
    assert similarity(me, fp(version_major="16")) < 1.0


@settings(max_examples=200, deadline=None)
@given(
    rf_a=st.floats(0, 1),
    rf_b=st.floats(0, 1),
    scale=st.floats(0.01, 1e7),
    clients=st.integers(1, 4096),
    cls=st.sampled_from(["oltp", "olap", "mixed"]),
    pattern=st.sampled_from(["uniform", "zipfian"]),
)
def test_similarity_is_symmetric_and_bounded(
    rf_a: float, rf_b: float, scale: float, clients: int, cls: str, pattern: str
) -> None:
    a = fp(read_fraction=rf_a, scale=scale, concurrency=clients, workload_class=cls)
    b = fp(read_fraction=rf_b, access_pattern=pattern)
    s = similarity(a, b)
    assert 0.0 <= s <= 1.0
    assert s == similarity(b, a)


def test_retrieval_ranks_same_class_first_and_respects_threshold(tmp_path: Path) -> None:
    book = MemoryBook(tmp_path / "memory.db")
    olap = fp(workload_class="olap", read_fraction=1.0, benchmark="tpch", objective="total_time", scale=1)
    book.write_experience(exp("s-olap", olap))
    book.write_experience(exp("s-oltp", fp(read_fraction=0.65, scale=16)))
    book.write_experience(exp("s-maria", fp(dbms="mariadb", version_major="10.11")))
    me = fp()
    found = book.retrieve(me, limit=5, threshold=0.0)
    assert [e.session_id for _, e in found] == ["s-oltp", "s-olap"]  # other family: never
    assert found[0][0] > found[1][0]
    # the default threshold drops the OLAP experience
    assert [e.session_id for _, e in book.retrieve(me)] == ["s-oltp"]
    assert book.retrieve(me, threshold=1.0) == []
    assert len(book.retrieve(me, limit=1, threshold=0.0)) == 1
    with pytest.raises(MemoryBookError, match="threshold=1.5"):
        book.retrieve(me, threshold=1.5)
    # a second reader process sees the same data (real file, WAL)
    again = MemoryBook(tmp_path / "memory.db").retrieve(me)
    assert again[0][1] == found[0][1]


def test_sessions_and_rounds_roundtrip(tmp_path: Path) -> None:
    book = MemoryBook(tmp_path / "memory.db")
    book.start_session("s1", "postgresql@sandbox", fp())
    with pytest.raises(MemoryBookError, match="already exists"):
        book.start_session("s1", "x", fp())
    outcome = RoundOutcome(
        session_id="s1",
        round_no=1,
        stage=Layer.dbms,
        bottleneck=Bottleneck.checkpoint,
        measurement=Measurement(workload="pgbench", tps=500, objective=80.0),
        objective=80.0,
        kept=True,
        decision=Decision.continue_,
        reason="gain 6% beats noise",
    )
    book.record_round(outcome)
    book.record_round(outcome.model_copy(update={"round_no": 2, "kept": False, "decision": Decision.terminate}))
    assert book.rounds("s1")[0] == outcome
    assert [r.decision for r in book.rounds("s1")] == [Decision.continue_, Decision.terminate]
    with pytest.raises(MemoryBookError, match="session_id='nope'"):
        book.record_round(outcome.model_copy(update={"session_id": "nope"}))
    book.end_session(
        "s1", "completed", baseline_objective=75.0, best_objective=80.0, best_config={"max_wal_size": "2GB"}
    )
    s = book.session("s1")
    assert (s.status, s.best_objective, s.best_config, s.ended_at is not None) == (
        "completed",
        80.0,
        {"max_wal_size": "2GB"},
        True,
    )
    # indexed columns are filled for SQL queries
    row = (
        sqlite3.connect(tmp_path / "memory.db")
        .execute("SELECT stage, bottleneck, decision, objective, kept FROM rounds WHERE round_no = 1")
        .fetchone()
    )
    assert row == ("dbms", "checkpoint", "continue", 80.0, 1)


def test_llm_totals_sum(tmp_path: Path) -> None:
    book = MemoryBook(tmp_path / "memory.db")
    book.record_llm_call("s1", 1, "m", 1000, 200, 100, 1500.0, 0.002, True)
    book.record_llm_call("s1", 2, "m", 1200, 300, 0, 900.5, 0.003, False, error="timeout")
    book.record_llm_call("s2", 1, "m", 5, 5, 5, 5.0, 5.0, True)
    totals = book.llm_totals("s1")
    assert totals == {
        "calls": 2,
        "ok_calls": 1,
        "failed_calls": 1,
        "prompt_tokens": 2200,
        "completion_tokens": 500,
        "cached_tokens": 100,
        "latency_ms": pytest.approx(2400.5),
        "cost_usd": pytest.approx(0.005),
    }
    assert book.llm_totals()["calls"] == 3
    assert book.llm_totals("none")["calls"] == 0
    with pytest.raises(MemoryBookError, match="prompt_tokens=-1"):
        book.record_llm_call("s1", 1, "m", -1, 0, 0, 1.0, 0.0, True)


def test_os_originals_first_write_wins(tmp_path: Path) -> None:
    book = MemoryBook(tmp_path / "memory.db")
    assert book.save_os_original("s1", "vm.swappiness", "60") is True
    assert book.save_os_original("s1", "vm.swappiness", "10") is False  # a trial value, not the original
    assert book.save_os_original("s1", "sda/queue/read_ahead_kb", "128") is True
    assert book.save_os_original("s2", "vm.swappiness", "10") is True  # another session
    got = {(o.session_id, o.name): o.original for o in book.os_originals()}
    assert got == {
        ("s1", "vm.swappiness"): "60",
        ("s1", "sda/queue/read_ahead_kb"): "128",
        ("s2", "vm.swappiness"): "10",
    }
    assert book.mark_os_restored("s1", "vm.swappiness") == 1
    assert [o.name for o in book.os_originals("s1")] == ["sda/queue/read_ahead_kb"]
    assert len(book.os_originals("s1", unrestored_only=False)) == 2
    assert book.mark_os_restored("s1") == 1
    assert book.os_originals("s1") == []


def test_forget_and_export_import(tmp_path: Path) -> None:
    book = MemoryBook(tmp_path / "a.db")
    book.start_session("s1", "pg", fp())
    book.record_round(
        RoundOutcome(
            session_id="s1",
            round_no=1,
            stage=Layer.dbms,
            bottleneck=Bottleneck.cpu,
            decision=Decision.terminate,
            reason="done",
        )
    )
    book.record_llm_call("s1", 1, "m", 10, 10, 0, 1.0, 0.1, True)
    book.save_os_original("s1", "vm.swappiness", "60")
    id1 = book.write_experience(exp("s1", fp()))
    book.write_experience(exp("s2", fp(benchmark="sysbench")))
    out = tmp_path / "export.json"
    assert export_book(book, out) == {"sessions": 1, "rounds": 1, "experience": 2, "llm_calls": 1}
    assert "os_originals" not in json.loads(out.read_text())

    other = MemoryBook(tmp_path / "b.db")
    assert import_book(other, out) == {"sessions": 1, "rounds": 1, "experience": 2, "llm_calls": 1}
    assert import_book(other, out) == {"sessions": 0, "rounds": 0, "experience": 0, "llm_calls": 0}
    assert other.list_experience()[0].experience == book.get_experience(id1).experience
    assert other.os_originals() == []

    with pytest.raises(MemoryBookError, match="give an experience id"):
        book.forget()
    assert book.forget(benchmark="sysbench") == 1
    assert book.forget(id1) == 1
    assert book.list_experience() == []

    bad = tmp_path / "bad.json"
    doc = json.loads(out.read_text())
    doc["experience"][1]["experience"] = json.dumps({"session_id": "x"})
    bad.write_text(json.dumps(doc))
    with pytest.raises(MemoryBookError, match=r"experience\[1\] is invalid"):
        import_book(MemoryBook(tmp_path / "c.db"), bad)
    assert MemoryBook(tmp_path / "c.db").sessions() == []  # nothing written before validation


def test_memory_cli(tmp_path: Path) -> None:
    book = MemoryBook(tmp_path / "memory.db")
    book.start_session("sess-1", "pg", fp())
    eid = book.write_experience(exp("sess-1", fp(), gain=0.12))
    book.close()
    home = ["--home", str(tmp_path)]

    res = runner.invoke(memory_app, ["list", *home], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "sess-1" in res.output and "+12.0%" in res.output
    res = runner.invoke(memory_app, ["list", "--sessions", *home], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "sess-1" in res.output and "running" in res.output

    res = runner.invoke(memory_app, ["show", str(eid), *home], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "shared_buffers=1GB" in res.output and "wal_level=minimal" in res.output
    assert "shared_buffers=1GB: buffer_cache, gain +12.0%" in res.output, res.output  # no raw dict
    assert "wal_level=minimal: reason server did not start" in res.output, res.output
    assert "shared_buffers = 1GB  (25.0% of the memory limit)" in res.output, res.output
    assert "{'" not in res.output, res.output
    res = runner.invoke(memory_app, ["show", "99", *home])
    assert res.exit_code == 1 and "id=99" in res.output

    out = tmp_path / "x.json"
    res = runner.invoke(memory_app, ["export", str(out), *home])
    assert res.exit_code == 0 and out.exists()

    res = runner.invoke(memory_app, ["forget", str(eid), *home])
    assert res.exit_code == 0 and "forgot 1" in res.output
    res = runner.invoke(memory_app, ["forget", str(eid), *home])
    assert res.exit_code == 1
    res = runner.invoke(memory_app, ["forget", *home])
    assert res.exit_code == 2

    other = tmp_path / "other"
    res = runner.invoke(memory_app, ["import", str(out), "--home", str(other)])
    assert res.exit_code == 0, res.output
    assert MemoryBook(other / "memory.db").retrieve(fp())[0][1].session_id == "sess-1"
    res = runner.invoke(memory_app, ["import", str(tmp_path / "missing.json"), *home])
    assert res.exit_code == 1 and "missing.json" in res.output


def test_memory_show_prints_the_ties_stored_as_inconclusive(tmp_path: Path) -> None:
    """A session whose one measured round tied: ``distill_experience`` files it as inconclusive, the real SQLite
    Memory Book keeps it, and ``memory show`` prints it under its own heading (a new user saw only "beneficial
    (0) / ineffective (0) / failed (0)" while the README says ties are remembered as inconclusive)."""
    tie = RoundOutcome(
        session_id="s-tie",
        round_no=1,
        stage=Layer.dbms,
        bottleneck=Bottleneck.buffer_cache,
        changes={"shared_buffers": "512MB"},
        measurement=Measurement(workload="tpch", objective=61.0),
        objective=61.0,
        gain_vs_best=0.004,
        judged="tie",
        decision=Decision.continue_,
        reason="tie",
    )
    book = MemoryBook(tmp_path / "memory.db")
    book.start_session("s-tie", "pg", fp())
    eid = book.write_experience(distill_experience("s-tie", fp(), [tie], {}, {}, 0.0))
    book.close()
    stored = MemoryBook(tmp_path / "memory.db").get_experience(eid).experience
    assert [e["changes"] for e in stored.inconclusive] == [{"shared_buffers": "512MB"}], stored
    res = runner.invoke(memory_app, ["show", str(eid), "--home", str(tmp_path)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "inconclusive (1)" in res.output and "shared_buffers=512MB" in res.output, res.output
    assert "beneficial (0)" in res.output and "ineffective (0)" in res.output and "failed (0)" in res.output


def test_memory_show_says_a_gain_only_where_the_round_counted_one(tmp_path: Path) -> None:
    """A fresh user's `memory show` printed "{'bottleneck': 'temp_spill', 'stage': 'dbms', 'gain':
    -0.024430076366647735}" for an opening screen whose one run the host disturbed ("no gain counted"): the
    Memory Book stores no gain for it, and each lesson reads as text."""
    noisy = Disturbance(samples=15, seconds=15.0, other_cpu_cores=2.5, other_cpu_spread=0.1, disturbed=True)
    screen = RoundOutcome(
        session_id="s-busy",
        round_no=1,
        stage=Layer.dbms,
        bottleneck=Bottleneck.temp_spill,
        changes={"jit": "off", "work_mem": "8MB"},
        measurement=Measurement(workload="tpch", objective=50.1, higher_is_better=False, disturbance=noisy),
        objective=50.1,
        gain_vs_best=-0.0244,
        decision=Decision.continue_,
        reason="race screen of 'evidence': 50.100 (one run the host disturbed: no gain counted)",
    )
    clean = screen.model_copy(
        update={"round_no": 2, "measurement": Measurement(workload="tpch", objective=48.0, higher_is_better=False)}
    )
    book = MemoryBook(tmp_path / "memory.db")
    book.start_session("s-busy", "pg", fp())
    eid = book.write_experience(distill_experience("s-busy", fp(), [screen, clean], {}, {}, 0.0))
    book.close()
    stored = MemoryBook(tmp_path / "memory.db").get_experience(eid).experience
    assert [e["gain"] for e in stored.inconclusive] == [None, -0.0244], stored.inconclusive
    res = runner.invoke(memory_app, ["show", str(eid), "--home", str(tmp_path)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "jit=off, work_mem=8MB: temp_spill, dbms stage, gain not measured" in res.output, res.output
    assert "jit=off, work_mem=8MB: temp_spill, dbms stage, gain -2.4%" in res.output, res.output
    assert "{'" not in res.output, res.output
