"""Root-cause logic without a server (issue 40): thresholds and their bases, dominance along chains,
the PostgreSQL detectors on hand-made counter snapshots, predicate parsing. Real-server tests:
test_rootcause_pg.py, test_rootcause_mariadb.py."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from agenticdb.rootcause import Cause, Finding, RootCauses, blocks_knob, dominant, my_read
from agenticdb.rootcause import pg as det
from agenticdb.rootcause import pg_read as rd
from agenticdb.rootcause.model import REQUIRED, ramp, stable_id, thresholds


def _f(cause: Cause, score: float, fid: str, caused_by: str | None = None) -> Finding:
    return Finding(id=fid, cause=cause, family="postgresql", subject="s", score=score, summary=fid, caused_by=caused_by)


def test_every_threshold_has_a_basis_that_is_a_manual_a_measurement_or_judgement() -> None:
    th = thresholds()
    assert set(REQUIRED) <= set(th)
    for name, x in th.items():
        assert re.search(r"manual|MariaDB KB|measurement|judgement", x.basis), (name, x.basis)


def test_dominant_is_none_below_the_threshold_and_the_highest_above() -> None:
    assert dominant([_f(Cause.missing_index, 0.5, "a")]) is None
    top = dominant([_f(Cause.missing_index, 0.7, "a"), _f(Cause.stale_statistics, 0.9, "b")])
    assert top is not None and top.id == "b"


def test_dominant_follows_a_lock_chain_to_its_upstream_cause() -> None:
    # DBA-Bench's composite chain: stale statistics → slow transaction → lock waits. The waits score
    # highest; the cause named is the stale statistics (even below the threshold on its own).
    stale = _f(Cause.stale_statistics, 0.4, "stale")
    chain = _f(Cause.lock_chain, 1.0, "chain", caused_by="stale")
    top = dominant([chain, stale])
    assert top is not None and top.cause == Cause.stale_statistics
    # a missing upstream id leaves the chain itself; a cycle ends
    assert dominant([_f(Cause.lock_chain, 1.0, "x", caused_by="gone")]).id == "x"  # type: ignore[union-attr]
    loop = [_f(Cause.lock_chain, 1.0, "p", caused_by="q"), _f(Cause.lock_chain, 0.9, "q", caused_by="p")]
    assert dominant(loop) is not None


def test_symptom_knobs_are_blocked_only_while_their_cause_dominates() -> None:
    idle = _f(Cause.idle_in_transaction, 1.0, "i")
    assert blocks_knob(idle, "deadlock_timeout")
    assert not blocks_knob(idle, "shared_buffers")
    assert not blocks_knob(None, "deadlock_timeout")


def test_ids_are_stable_and_differ_by_object() -> None:
    assert stable_id("pg:db", "stale_statistics", "public.t") == stable_id("pg:db", "stale_statistics", "public.t")
    assert stable_id("pg:db", "stale_statistics", "public.t") != stable_id("pg:db", "stale_statistics", "public.u")


def test_ramp() -> None:
    assert ramp(0.1, 0.2, 0.5) == 0.0
    assert ramp(0.35, 0.2, 0.5) == pytest.approx(0.5)
    assert ramp(9, 0.2, 0.5) == 1.0


def test_predicate_columns_from_plan_filters_and_normalised_texts() -> None:
    assert rd.predicate_columns("(customer = 42)") == {"customer"}
    assert rd.predicate_columns("((o.status = 1) AND (region >= 3))") == {"status", "region"}
    assert rd.predicate_columns("c.k = $1 and pad ~~ 'x%'") == {"k", "pad"}


def test_predicate_operators_name_each_column_s_comparison() -> None:
    assert rd.predicate_operators("k != $2 and c.x = ANY($1) and abalance <> 3") == {
        "k": {"<>"},
        "x": {"in"},
        "abalance": {"<>"},
    }
    assert rd.predicate_operators("(shipdate <= 981)") == {"shipdate": {"<="}}


def test_plan_evidence_keeps_the_smallest_share_a_seq_scan_filter_kept_per_column() -> None:
    """Per loop (EXPLAIN ANALYZE divides both figures by the loops): a parallel scan's workers keep 100 of
    9,900 + 100 rows each = 1 %; another statement filtering on the same column keeps 60 %: the column is
    selective for the first one."""
    ev = rd.PlanEvidence()
    scan = {"Node Type": "Seq Scan", "Relation Name": "t", "Filter": "(c = 1)", "Plan Rows": 100}
    gather = {
        "Node Type": "Gather",
        "Plans": [{**scan, "Actual Rows": 100, "Actual Loops": 3, "Rows Removed by Filter": 9900}],
    }
    rd._walk(gather, "q1", ev)
    rd._walk(
        {
            **scan,
            "Filter": "((c <> 1) AND (d > 5))",
            "Actual Rows": 600,
            "Actual Loops": 1,
            "Rows Removed by Filter": 400,
        },
        "q2",
        ev,
    )
    rd._walk({**scan, "Relation Name": "u", "Actual Rows": 0, "Actual Loops": 0, "Rows Removed by Filter": 0}, "q3", ev)
    assert ev.seq_kept == {"t": {"c": pytest.approx(0.01), "d": pytest.approx(0.6)}}
    assert ev.seq_filters == {"t": {"c", "d"}, "u": {"c"}}


ACCOUNTS = {"aid", "bid", "abalance", "filler"}
JOIN_TEXT = (
    "SELECT a.abalance FROM pgbench_tellers t JOIN pgbench_accounts a ON a.aid = t.tid * $1 + $2 WHERE t.tid <= $3"
)


def test_statement_texts_attribute_a_column_only_to_the_table_its_alias_names() -> None:
    """pg-enable-nestloop-off's normalised text: ``t.tid`` belongs to the tellers, never to the accounts;
    the accounts' predicate is the join condition on aid. Unqualified columns count only for a statement
    reading one table; a name the table does not have never counts."""
    assert rd.statement_predicates(JOIN_TEXT, "pgbench_accounts", ACCOUNTS) == {"aid": {"="}}
    assert "tid" in rd.statement_predicates(JOIN_TEXT, "pgbench_tellers", {"tid", "bid", "tbalance"})
    assert rd.statement_predicates("SELECT * FROM big WHERE customer = $1", "big", {"id", "customer"}) == {
        "customer": {"="}
    }
    two = "SELECT * FROM big b, other o WHERE customer = $1 AND o.id > b.id"
    assert rd.statement_predicates(two, "big", {"id", "customer"}) == {"id": {"<"}}  # customer: which table?
    assert rd.statement_predicates("SELECT 1 FROM big WHERE tid = $1", "big", {"id"}) == {}
    assert rd.statement_predicates(JOIN_TEXT, "big", {"aid"}) == {}  # the text does not read big


def test_a_join_condition_over_a_seq_scan_names_the_scanned_table_s_column() -> None:
    """Hash Join with enable_nestloop = off: the accounts' Seq Scan has no Filter; the Hash Cond names
    its aid (alias a) and the tellers' tid (alias t), each for its own table."""
    ev = rd.PlanEvidence()
    accounts = {"Node Type": "Seq Scan", "Relation Name": "pgbench_accounts", "Alias": "a", "Plan Rows": 1e5}
    tellers = {"Node Type": "Seq Scan", "Relation Name": "pgbench_tellers", "Alias": "t", "Plan Rows": 10}
    join = {
        "Node Type": "Hash Join",
        "Hash Cond": "(a.aid = ((t.tid * 1000) + 1))",
        "Plans": [accounts, {"Node Type": "Hash", "Plans": [tellers]}],
    }
    rd._walk(join, "q", ev)
    assert ev.seq_joins == {"pgbench_accounts": {"aid"}, "pgbench_tellers": {"tid"}}
    assert ev.seq_filters == {}


def _ts(
    name: str,
    reltuples: float,
    mod: int,
    *,
    dead: int = 0,
    seq: int = 0,
    seq_read: int = 0,
    idx: int = 0,
    on: bool = True,
) -> rd.TableStats:
    opts = () if on else ("autovacuum_enabled=off",)
    return rd.TableStats(
        f"public.{name}", reltuples, int(reltuples), dead, mod, seq, seq_read, 0, idx, True, opts, 10**8, name
    )


def _win(before: list[rd.TableStats], after: list[rd.TableStats]) -> det._Window:
    s = {"autovacuum": "on", "autovacuum_analyze_threshold": "50", "autovacuum_analyze_scale_factor": "0.1"}
    s |= {"autovacuum_vacuum_threshold": "50", "autovacuum_vacuum_scale_factor": "0.2"}
    return det._Window(
        rd.Snapshot({t.name: t for t in before}, s, 0.0), rd.Snapshot({t.name: t for t in after}, s, 60.0)
    )


def test_stale_statistics_scores_the_modified_share_and_halves_what_autovacuum_will_heal() -> None:
    out = RootCauses(family="postgresql")
    before = [_ts("orders", 1e6, 900_000, on=False), _ts("items", 1e6, 900_000), _ts("small", 100, 90)]
    after = [
        _ts("orders", 1e6, 900_000, idx=5000, on=False),
        _ts("items", 1e6, 900_000, idx=5000),
        _ts("small", 100, 90, idx=9),
    ]
    plans = rd.PlanEvidence(error={"orders": (50.0, 10, 500, "q"), "items": (50.0, 10, 500, "q")}, explained=1)
    det.stale_statistics(_win(before, after), plans, "srv", out)
    by = {f.subject: f for f in out.findings}
    assert by["public.orders"].score == 1.0
    assert by["public.items"].score == 0.5  # autovacuum enabled: due on its next pass
    assert "public.small" not in by  # below min_table_rows
    assert by["public.orders"].remedies[0].sql == 'ANALYZE "public"."orders"'
    assert by["public.orders"].remedies[0].automatic
    assert any("threshold 50 + 0.1 × reltuples = 100,050" in e for e in by["public.orders"].evidence)


def test_modification_counters_alone_make_a_suspect_not_a_dominant_cause() -> None:
    out = RootCauses(family="postgresql")
    before = [_ts("orders", 1e6, 900_000, on=False)]
    det.stale_statistics(_win(before, [_ts("orders", 1e6, 900_000, idx=9, on=False)]), rd.PlanEvidence(), "s", out)
    assert out.findings[0].score == 0.5 and dominant(out.findings) is None
    assert any("table counters only" in e for e in out.findings[0].evidence)


def test_a_stale_table_the_workload_does_not_read_cannot_dominate() -> None:
    out = RootCauses(family="postgresql")
    rows = [_ts("archive", 1e6, 900_000, on=False)]
    plans = rd.PlanEvidence(error={"archive": (50.0, 10, 500, "q")}, explained=1)
    det.stale_statistics(_win(rows, rows), plans, "srv", out)
    assert out.findings[0].score < 0.6 and dominant(out.findings) is None
    assert any("never read" in e for e in out.findings[0].evidence)


def test_fresh_statistics_are_ruled_out_with_the_threshold() -> None:
    out = RootCauses(family="postgresql")
    rows = [_ts("orders", 1e6, 1000, idx=10)]
    det.stale_statistics(_win(rows, rows), rd.PlanEvidence(), "srv", out)
    assert not out.findings
    assert out.ruled_out[0].cause == Cause.stale_statistics and "analyze threshold" in out.ruled_out[0].reason


def test_plan_error_confirms_stale_statistics() -> None:
    out = RootCauses(family="postgresql")
    before = [_ts("orders", 1e6, 150_000, on=False)]
    after = [_ts("orders", 1e6, 150_000, idx=100, on=False)]
    plans = rd.PlanEvidence(error={"orders": (400.0, 2000, 800_000, "SELECT …")}, explained=1)
    det.stale_statistics(_win(before, after), plans, "srv", out)
    assert out.findings[0].score == 1.0  # 15 % modified alone ramps low; the 400× misestimate is certain
    assert any("EXPLAIN ANALYZE" in e and "400" in e for e in out.findings[0].evidence)


def test_vacuum_held_back_needs_dead_tuples_and_an_old_holder() -> None:
    rows = [_ts("accounts", 1e6, 0, dead=900_000)]
    old = rd.Holder("session", "pid 42", "idle in transaction", 120.0, 50_000, "SELECT 1", ["public.accounts"], 3)
    young = rd.Holder("session", "pid 43", "active", 2.0, 10, "UPDATE …")
    out = RootCauses(family="postgresql")
    det.vacuum_held_back(_win(rows, rows), [young], "srv", out)
    assert not out.findings and "no transaction" in out.ruled_out[0].reason
    out = RootCauses(family="postgresql")
    det.vacuum_held_back(_win(rows, rows), [old, young], "srv", out)
    f = out.findings[0]
    assert f.cause == Cause.vacuum_held_back and f.score == 1.0 and "pid 42" in f.summary
    # terminating the holder is only advised (destructive); the VACUUM may run
    assert [r.automatic for r in f.remedies] == [False, True]
    assert "pg_terminate_backend(42)" in f.remedies[0].sql and "destructive" in f.remedies[0].lock_impact
    # the holder is itself a finding: the vacuum finding points at it, and it is what dominates
    idle = Finding(
        id="I", cause=Cause.idle_in_transaction, family="postgresql", subject="pid 42", score=1.0, summary="i"
    )
    out.findings.insert(0, idle)
    det.link_chains(out)
    assert f.caused_by == "I" and dominant(out.findings) is idle


def test_an_idle_holder_at_the_head_of_a_lock_chain_is_named_idle_in_transaction() -> None:
    samples = [rd.LockSample(3, {42: ("idle in transaction", 300.0, "SELECT … FOR UPDATE")}, [])] * 8
    samples += [rd.LockSample(0, {}, [])] * 2
    hold = [rd.Holder("session", "pid 42", "idle in transaction", 300.0, 9, "SELECT", ["public.accounts"], 4)]
    out = RootCauses(family="postgresql")
    rows = [_ts("accounts", 1e6, 0)]
    det.lock_chains(samples, hold, "srv", out, _win(rows, rows))
    assert [f.cause for f in out.findings] == [Cause.idle_in_transaction]
    f = out.findings[0]
    assert f.score == 1.0 and "3.0 session(s) wait" in f.summary and not any(r.automatic for r in f.remedies)
    assert blocks_knob(dominant(out.findings), "deadlock_timeout")


def test_a_lock_chain_behind_a_statement_on_a_stale_table_is_caused_by_it() -> None:
    out = RootCauses(family="postgresql")
    stale = Finding(
        id="S", cause=Cause.stale_statistics, family="postgresql", subject="public.orders", score=0.7,
        summary="stale", tables=["public.orders", "orders"],
    )  # fmt: skip
    out.findings.append(stale)
    samples = [rd.LockSample(2, {7: ("active", 40.0, "UPDATE orders SET x = 1 WHERE status = 1")}, [])] * 5
    det.lock_chains(samples, [], "srv", out, _win([], []))
    det.link_chains(out)
    chain = next(f for f in out.findings if f.cause == Cause.lock_chain)
    assert chain.caused_by == "S"
    assert dominant(out.findings) is stale


def test_no_waits_and_no_idle_holder_rule_the_lock_chain_out() -> None:
    out = RootCauses(family="postgresql")
    det.lock_chains([rd.LockSample(0, {}, [])] * 5, [], "srv", out, _win([], []))
    assert not out.findings and out.ruled_out[0].cause == Cause.lock_chain
    assert "0 of 5 lock samples" in out.ruled_out[0].reason


def test_waits_behind_short_lived_holders_are_workload_contention_not_a_lock_chain() -> None:
    # pgbench at scale 1: every client queues on the one branch row; each holder is milliseconds old
    samples = [
        rd.LockSample(3, {100 + i: ("idle in transaction", 0.01, "UPDATE pgbench_branches …")}, []) for i in range(9)
    ]
    out = RootCauses(family="postgresql")
    det.lock_chains(samples, [], "srv", out, _win([], []))
    assert not out.findings
    assert "9 more behind short-lived holders" in out.ruled_out[0].reason


def test_a_misestimated_plan_makes_a_table_changed_below_the_threshold_stale() -> None:
    # pg-rc-stale-stats: 100,000 of 1 M rows changed, 50 short of the 100,050 analyze threshold
    rows = [_ts("orders", 1e6, 100_000, idx=10, on=False)]
    out = RootCauses(family="postgresql")
    det.stale_statistics(_win(rows, rows), rd.PlanEvidence(), "srv", out)
    assert not out.findings
    out = RootCauses(family="postgresql")
    plans = rd.PlanEvidence(error={"orders": (90_000.0, 1, 90_000, "q")}, explained=1)
    det.stale_statistics(_win(rows, rows), plans, "srv", out)
    assert out.findings[0].score == 1.0 and "≤ analyze threshold" in out.findings[0].evidence[0]


@pytest.mark.parametrize(
    ("reads", "dsn"), [(rd, "postgresql://nobody@127.0.0.1:1/x"), (my_read, "mysql://nobody@127.0.0.1:1/x")]
)
def test_a_server_that_does_not_answer_gives_a_window_without_counters_or_samples(reads: Any, dsn: str) -> None:
    """Each engine's watch catches its own driver's error (psycopg.Error, pymysql.MySQLError: port 1
    refuses the connection), never raises, and stops."""
    watch = reads.watch(dsn, None, 0.05).start()
    time.sleep(0.3)
    watch.stop()
    assert watch.before is None and watch.samples == []
    assert watch._thread is not None and not watch._thread.is_alive()
