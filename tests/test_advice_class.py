"""The workload class ``agenticdb advise`` plans for, and the idle window's diagnosis (real PostgreSQL).

A new user's trial: advise on a TPC-H sandbox said ``workload class oltp (assumed …)`` and recommended
``block.vda.read_ahead_kb 8192 → 32`` ("OLTP reads single pages at random") although the session on that
server had measured an analytic workload; and it printed diagnosis scores of an idle window.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.console import Console

from agenticdb.advice.advise import _class_free, advise, host_fingerprint, observe, target_identity
from agenticdb.advice.workload_class import advised_class, utc_text
from agenticdb.app import advice_parts, build_target, linux_target
from agenticdb.cli.advise_cmd import print_text
from agenticdb.config import load_config
from agenticdb.host.hardware import detect_hardware
from agenticdb.models import Bottleneck, Layer, StateDelta
from agenticdb.models.planning import Fingerprint
from agenticdb.planner.diagnosis import Hypothesis
from agenticdb.sandbox.postgres import PostgresSandboxInfo
from agenticdb.store.memory import MemoryBook
from tests.test_advice import write_config


@pytest.fixture()
def pg_config(pg_sandbox: PostgresSandboxInfo, storage_home: Path, tmp_path: Path) -> Path:
    return write_config(tmp_path / "agenticdb.toml", pg_sandbox.target_config("postgres"), storage_home)


def test_class_of_the_latest_session_on_this_host_is_used_and_said(
    pg_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A TPC-H session in the Memory Book on this host (same DBMS, version, memory, CPUs) makes advise plan
    for "olap" and say which session measured it; an idle window prints no diagnosis scores."""
    cfg = load_config(pg_config)
    target = build_target(cfg)
    try:
        here = host_fingerprint(target.kind, target.version_major(), detect_hardware(target.data_dir))
        assert cfg.storage.memory_db is not None
        with MemoryBook(cfg.storage.memory_db) as book:
            book.start_session("s-oltp-old", "postgresql", here, workload="pgbench", started_at="2026-12-06T01:00:00")
            olap = here.model_copy(update={"workload_class": "olap", "benchmark": "tpch"})
            book.start_session("s-tpch", "postgresql", olap, workload="tpch", started_at="2026-12-07T03:07:31")
        adv = advise(cfg, target, observe_s=0.3, os_layer=True, parts=advice_parts())
    finally:
        target.close()
    assert adv.notes[0].startswith("workload class olap (measured by the latest session on this host, s-tpch"), (
        adv.notes
    )
    assert not any("assumed" in n for n in adv.notes), adv.notes
    assert not any("read_ahead_kb" in r.knob and r.recommended == "32" for r in adv.recommendations)
    assert adv.idle and adv.diagnosis == [], adv.diagnosis  # nothing runs on the sandbox in the window
    capsys.readouterr()
    print_text(adv, Console(width=200))
    assert "diagnosis: idle sample: no diagnosis" in capsys.readouterr().out


def test_an_assumed_class_drives_no_recommendation_the_other_class_would_not_give(pg_config: Path) -> None:
    """With no session and no row counters the class is assumed "oltp", and the io_queue move that only
    OLTP makes (read_ahead_kb 8192 → 32, which halves an analytic scan's reads) is left out and named;
    a measured "oltp" keeps it. Real Linux catalog and values (the data device's read-ahead set to 8192
    as in the trial), the io_queue hypothesis given at full score."""
    cfg = load_config(pg_config)
    target = build_target(cfg)
    try:
        from agenticdb.advice.advise import Advisor

        hw = detect_hardware(target.data_dir)
        linux = linux_target(cfg, data_dir=target.data_dir)
        os_cat = linux.catalog()
        knob = next((k for k in os_cat.knobs if k.endswith(".read_ahead_kb")), None)
        if knob is None:
            pytest.skip("no block device under the data directory")
        cur = {**linux.current_values(list(os_cat.knobs)), knob: "8192"}
        fp = host_fingerprint(target.kind, target.version_major(), hw)
        delta = observe([target.runtime_state], 0.2)
        osa = Advisor(os_cat, hw, cur, delta, "linux", target_identity(target.kind, cfg.target.dsn or ""), [], fp)
        hyps = [Hypothesis(bottleneck=Bottleneck.io_queue, layer=Layer.os, score=1.0, evidence=["given"])]
        recs = osa.recommendations(hyps)
    finally:
        target.close()
    assert any(r.knob == knob and r.recommended == "32" for r in recs), [(r.knob, r.recommended) for r in recs]
    assumed = advised_class(None, fp, None)
    assert assumed.assumed and "assumed" in assumed.note
    kept, notes = _class_free(osa, assumed, hyps, recs)
    assert not any(r.knob == knob for r in kept)
    assert len(notes) == 1 and f"{knob} 8192 → 32" in notes[0], notes
    measured = advised_class(
        None,
        fp,
        StateDelta(
            totals={
                "pg_stat_database.tup_returned": 1000.0,
                "pg_stat_database.tup_fetched": 990.0,
                "pg_stat_database.xact_commit": 100.0,
            }
        ),
    )
    assert not measured.assumed and measured.cls == "oltp", measured
    assert _class_free(osa, measured, hyps, recs) == (recs, [])


def test_the_session_time_advise_quotes_says_what_it_is(tmp_path: Path) -> None:
    """The time advise quotes is when the session's Memory Book record was written (after its baseline), in UTC,
    and the note says so — not "started", which a user compared with the journal's "Started" 40 s earlier. A
    real SQLite Memory Book; the record's time is the book's own (UTC, microseconds)."""
    db = tmp_path / "memory.db"
    fp = Fingerprint(
        dbms="postgresql",
        version_major="15",
        benchmark="tpch",
        workload_class="olap",
        read_fraction=1.0,
        access_pattern="uniform",
        scale=0.3,
        concurrency=1,
        objective="total_time",
        memory_gib=8.0,
        cpu_count=4,
    )
    with MemoryBook(db) as book:
        book.start_session("s-tpch", "postgresql", fp, workload="tpch")
        recorded = book.sessions()[0].started_at
    got = advised_class(db, fp, None)
    assert got.cls == "olap" and not got.assumed, got
    assert "started" not in got.basis, got.basis
    when = datetime.fromisoformat(recorded).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    assert got.basis == (
        f"measured by the latest session on this host, s-tpch (tpch; in the Memory Book since {when}, "
        "after its baseline)"
    ), got.basis
    assert utc_text("2026-12-07T14:01:51.512345+00:00") == "2026-12-07 14:01:51 UTC"
    assert utc_text("2026-12-07T15:01:51+01:00") == "2026-12-07 14:01:51 UTC"
    assert utc_text("2026-12-07T03:07:31") == "2026-12-07 03:07:31 UTC"  # no offset: the book writes UTC
    assert utc_text("yesterday") == "yesterday"
