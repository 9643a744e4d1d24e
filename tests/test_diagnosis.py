"""Bottleneck diagnosis over recorded runtime-state deltas (tests/data/states/*.json).

Each file holds one StateDelta in the target helpers' counter names, the DBMS family, the stage and
the bottleneck a DBA would name. Every hypothesis must win on its own file and lose on the others.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agenticdb.models import Bottleneck, Hardware, Layer, Measurement, RuntimeProfile, StateDelta
from agenticdb.planner.diagnosis import DBMS_HYPOTHESES, OS_HYPOTHESES, RULED_OUT_BELOW, diagnose

STATES = Path(__file__).parent / "data" / "states"
FILES = sorted(STATES.glob("*.json"))


def _profile(**config: str) -> RuntimeProfile:
    hw = Hardware(
        cpu_count=2,
        memory_bytes=24 * 2**30,
        memory_limit_bytes=24 * 2**30,
        disk_free_bytes=50 * 2**30,
        data_device="/dev/vda",
    )
    return RuntimeProfile(target="postgresql", dbms_version="15.18", hardware=hw, current_config=dict(config))


def _load(path: Path) -> tuple[dict, StateDelta]:
    raw = json.loads(path.read_text())
    return raw, StateDelta.model_validate(raw["delta"])


def _scores(path: Path) -> dict[Bottleneck, float]:
    raw, delta = _load(path)
    return {h.bottleneck: h.score for h in diagnose(delta, _profile(), raw["family"], Layer(raw["stage"]))}


def test_every_hypothesis_has_a_recorded_state() -> None:
    seen = {
        (
            json.loads(f.read_text())["family"],
            json.loads(f.read_text())["stage"],
            json.loads(f.read_text())["expected"],
        )
        for f in FILES
    }
    for fam in ("postgresql", "mariadb"):
        for b in DBMS_HYPOTHESES:
            assert (fam, "dbms", b.value) in seen, f"no recorded {fam} state for {b.value}"
    for b in OS_HYPOTHESES:
        assert any(s == "os" and e == b.value for _, s, e in seen), f"no recorded OS state for {b.value}"


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_hypothesis_wins_on_its_own_evidence(path: Path) -> None:
    raw, delta = _load(path)
    hyps = diagnose(delta, _profile(), raw["family"], Layer(raw["stage"]))
    expected = Bottleneck(raw["expected"])
    top = hyps[0]
    assert top.bottleneck == expected, [(h.bottleneck.value, h.score) for h in hyps]
    assert top.score >= 0.6
    assert top.ruled_out is None
    runner_up = hyps[1]
    margin = top.score - runner_up.score  # 1.0 − 0.8 is 0.19999… in floats
    assert margin >= 0.2 - 1e-9, f"{expected} barely beats {runner_up.bottleneck}"
    # evidence lines carry numbers
    assert top.evidence and any(ch.isdigit() for ch in top.evidence[0])
    assert all(0.0 <= h.score <= 1.0 for h in hyps)
    expected_set = set(DBMS_HYPOTHESES if raw["stage"] == "dbms" else OS_HYPOTHESES)
    assert {h.bottleneck for h in hyps} == expected_set


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_hypothesis_loses_on_the_others_evidence(path: Path) -> None:
    raw, _ = _load(path)
    expected = Bottleneck(raw["expected"])
    own = _scores(path)[expected]
    for other in FILES:
        o = json.loads(other.read_text())
        if other == path or o["stage"] != raw["stage"] or o["expected"] == raw["expected"]:
            continue
        if raw["stage"] == "dbms" and o["family"] != raw["family"]:
            continue
        theirs = _scores(other)
        assert theirs[expected] < own, f"{expected.value} scores {theirs[expected]} on {other.stem}"
        assert theirs[expected] < theirs[Bottleneck(o["expected"])]


def test_buffer_cache_evidence_names_the_ratio_and_the_window() -> None:
    raw, delta = _load(STATES / "pg_buffer_cache.json")
    hyps = {h.bottleneck: h for h in diagnose(delta, _profile(), "postgresql", Layer.dbms)}
    assert "blks_read/(blks_read+blks_hit) = 0.300 over 15.0 s" in hyps[Bottleneck.buffer_cache].evidence[0]
    cp = hyps[Bottleneck.checkpoint]
    assert cp.score < RULED_OUT_BELOW
    assert cp.ruled_out and "no checkpoint over 15.0 s" in cp.ruled_out


def test_missing_counters_give_no_evidence_and_say_so() -> None:
    delta = StateDelta(seconds=10.0, totals={"pg_stat_database.xact_commit": 1000.0})
    hyps = diagnose(delta, _profile(), "postgresql", Layer.dbms)
    assert all(h.score == 0.0 for h in hyps)
    lock = next(h for h in hyps if h.bottleneck == Bottleneck.lock_contention)
    assert lock.ruled_out == "no counters for this hypothesis in the sample"


def test_commit_delay_in_config_is_wal_evidence() -> None:
    raw, delta = _load(STATES / "pg_cpu.json")
    plain = {h.bottleneck: h for h in diagnose(delta, _profile(), "postgresql", Layer.dbms)}
    trapped = {
        h.bottleneck: h
        for h in diagnose(delta, _profile(commit_delay="1000", commit_siblings="2"), "postgresql", Layer.dbms)
    }
    assert plain[Bottleneck.wal_fsync].score < RULED_OUT_BELOW
    assert trapped[Bottleneck.wal_fsync].score >= 0.5
    assert any("commit_delay = 1,000 µs" in e for e in trapped[Bottleneck.wal_fsync].evidence)


def test_transactions_fall_back_to_the_measurement() -> None:
    # MariaDB log waits normalise per transaction; without Com_commit the workload count is used.
    delta = StateDelta(seconds=10.0, totals={"global_status.Innodb_log_waits": 100.0})
    m = Measurement(workload="sysbench", transactions=5000, objective=1.0)
    hyps = {h.bottleneck: h for h in diagnose(delta, _profile(), "mariadb", Layer.dbms, m)}
    assert hyps[Bottleneck.wal_fsync].evidence == ["Innodb_log_waits = 20.00 per 1000 transactions"]
    assert hyps[Bottleneck.wal_fsync].score == 1.0
    no_tx = {h.bottleneck: h for h in diagnose(delta, _profile(), "mariadb", Layer.dbms)}
    assert no_tx[Bottleneck.wal_fsync].score == 0.0


def test_one_waiting_backend_is_not_the_whole_server() -> None:
    # The PostgreSQL target samples only sessions with a wait event; active sessions bound the share.
    delta = StateDelta(seconds=10.0, gauges={"pg_stat_activity.active": 8}, wait_events={"IO:WALSync": 1})
    hyps = {h.bottleneck: h for h in diagnose(delta, _profile(), "postgresql", Layer.dbms)}
    assert hyps[Bottleneck.wal_fsync].score < RULED_OUT_BELOW


def test_unknown_family_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="family='oracle'"):
        diagnose(StateDelta(), _profile(), "oracle", Layer.dbms)


def test_family_spellings_are_normalised() -> None:
    raw, delta = _load(STATES / "mariadb_wal_fsync.json")
    hyps = diagnose(delta, _profile(), "MariaDB-10.11", Layer.dbms)
    assert hyps[0].bottleneck == Bottleneck.wal_fsync


@pytest.mark.parametrize(("spill_share", "wal_waits", "first"), [(0.8, 6, "temp_spill"), (0.32, 9, "wal_fsync")])
def test_scores_equal_at_the_cap_are_ordered_by_how_far_their_evidence_goes(
    spill_share: float, wal_waits: int, first: str
) -> None:
    """A live window where statements that spill take 80 % of the application's time (over 3 × that
    signal's certainty threshold of 30 %) and WAL waits just past theirs (50 %) both score 1.0: the spill
    comes first, not the hypothesis listed first in DBMS_HYPOTHESES; with the readings the other way
    round, WAL does."""
    delta = StateDelta(
        seconds=10.0,
        totals={"live.exec_ms": 10_000.0, "live.spill_exec_ms": 10_000.0 * spill_share},
        gauges={"pg_stat_activity.active": 10},
        wait_events={"IO:WALSync": wal_waits, "IO:BufFileRead": 10 - wal_waits},
    )
    hyps = diagnose(delta, _profile(), "postgresql", Layer.dbms)
    top = {h.bottleneck.value: h.score for h in hyps[:2]}
    assert top == {"temp_spill": 1.0, "wal_fsync": 1.0}, [(h.bottleneck.value, h.score) for h in hyps]
    assert hyps[0].bottleneck.value == first


def test_a_query_set_counts_its_spills_per_query_not_per_transaction() -> None:
    """A TPC-H run has no transactions of its own (each query runs once, autocommitted; MariaDB's Com_commit does
    not count them at all), yet its evidence read "temp_files = 366.67 per 1000 transactions", the server's commit
    counter including the run's SET statements. A query set's counters are normalised by the queries its run
    executed (``Measurement.per_query_s``), said so; a workload of transactions reads as before."""
    per_query = {f"q{i:02d}": 1.0 for i in range(1, 23)}
    tpch = Measurement(
        workload="tpch", transactions=22, total_time_s=22.0, per_query_s=per_query, objective=22.0,
        higher_is_better=False,
    )  # fmt: skip
    delta = StateDelta(
        seconds=22.0,
        totals={"pg_stat_database.temp_files": 11.0, "pg_stat_database.xact_commit": 30.0},
    )
    hyps = {h.bottleneck: h for h in diagnose(delta, _profile(), "postgresql", Layer.dbms, tpch)}
    assert (
        "temp_files = 500.00 per 1000 queries (11 in the query set's 22 queries)"
        in hyps[Bottleneck.temp_spill].evidence
    )
    assert not any("transactions" in e for h in hyps.values() for e in h.evidence), hyps
    my = StateDelta(seconds=22.0, totals={"global_status.Innodb_log_waits": 2.0})
    waits = {h.bottleneck: h for h in diagnose(my, _profile(), "mariadb", Layer.dbms, tpch)}[Bottleneck.wal_fsync]
    assert waits.evidence == ["Innodb_log_waits = 90.91 per 1000 queries (2 in the query set's 22 queries)"]
    # transactions (pgbench): as before
    pgbench = Measurement(workload="pgbench", transactions=3000, tps=200.0, objective=200.0)
    oltp = {h.bottleneck: h for h in diagnose(delta, _profile(), "postgresql", Layer.dbms, pgbench)}
    assert "temp_files = 366.67 per 1000 transactions" in oltp[Bottleneck.temp_spill].evidence
