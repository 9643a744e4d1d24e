"""Root causes on a real private PostgreSQL 15 with huge injected faults (issue 40): a 1M-row table with
autovacuum off and 90 % of its rows modified since ANALYZE; a session idle in transaction holding a row
lock while others wait and dead tuples pile up; a 1M-row table scanned for a column without an index,
and the same scans with an index the planner is told not to use (the knob decoy)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

from agenticdb.rootcause import Cause, RootCauses, Watcher, blocks_knob, dominant
from agenticdb.sandbox.postgres import PostgresSandboxInfo

DB = "rc_test"


@pytest.fixture
def db(pg_sandbox: PostgresSandboxInfo) -> Iterator[str]:
    """A fresh database for each test: one test's tables must not be findings in the next one's window
    (run after the idle-in-transaction test in a random order, the stale-statistics test failed: that
    test's ``accounts``, 600,000 updates with autovacuum off, was still stale after the ANALYZE of
    ``orders``)."""
    with psycopg.connect(pg_sandbox.dsn, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB}")
        c.execute(f"CREATE DATABASE {DB}")
    yield pg_sandbox.dsn
    with psycopg.connect(pg_sandbox.dsn, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")


def _conn(dsn: str) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(psycopg.conninfo.make_conninfo(dsn, dbname=DB), autocommit=True)


def _flushed(c: psycopg.Connection[tuple[object, ...]]) -> None:
    """Make this backend's table counters visible now: PostgreSQL 15 flushes them to shared statistics when
    the backend goes idle, at most every PGSTAT_MIN_INTERVAL (1 s), or when it exits, so a watch window
    that ends right after the queries may read them before they arrive (seen under load).
    ``pg_stat_force_next_flush()`` (manual 28.2, "Statistics Functions") makes the flush happen before
    this call returns."""
    c.execute("SELECT pg_stat_force_next_flush()")


def _orders(dsn: str, name: str) -> None:
    """1M rows, 0.1 % with status 1, index on status, analyzed, autovacuum off for the table."""
    with _conn(dsn) as c:
        c.execute(f"DROP TABLE IF EXISTS {name}")
        c.execute(
            f"CREATE TABLE {name}(id int PRIMARY KEY, customer int, status int, pad text) "
            "WITH (autovacuum_enabled = off)"
        )
        c.execute(
            f"INSERT INTO {name} SELECT g, g % 50000, CASE WHEN g % 1000 = 0 THEN 1 ELSE 0 END, repeat('x', 40) "
            "FROM generate_series(1, 1000000) g"
        )
        c.execute(f"CREATE INDEX ON {name}(status)")
        c.execute(f"ANALYZE {name}")


def _modified_since_analyze(dsn: str, table: str, rows: int, timeout_s: float = 60.0) -> None:
    """Wait until ``pg_stat_user_tables`` shows ``rows`` modifications of ``table``: PostgreSQL 15 flushes a
    backend's table counters to shared statistics when it goes idle or exits (manual 28.2.2, at most every
    PGSTAT_MIN_INTERVAL), so on a loaded host they can arrive after the next reader looked."""
    deadline = time.monotonic() + timeout_s
    with _conn(dsn) as c:
        while True:
            got = c.execute(
                "SELECT coalesce(max(n_mod_since_analyze), 0) FROM pg_stat_user_tables WHERE relname = %s", (table,)
            ).fetchone()
            if got is not None and got[0] >= rows or time.monotonic() > deadline:
                return
            c.execute("SELECT pg_stat_clear_snapshot()")
            time.sleep(0.2)


def test_stale_statistics_on_a_huge_table_dominate_with_plan_evidence_and_analyze_clears_them(db: str) -> None:
    _orders(db, "orders")
    with _conn(db) as c:
        c.execute("UPDATE orders SET status = 1 WHERE id % 10 <> 0")  # 90 % modified, statistics untouched
    _modified_since_analyze(db, "orders", 900_000)
    stmt = "SELECT count(*) FROM orders WHERE status = 1"
    w = Watcher("postgresql", db, DB, [stmt], server="pgtest").start()
    with _conn(db) as c:
        for _ in range(3):
            c.execute(stmt).fetchall()
            _flushed(c)
    rc = w.finish()
    top = dominant(rc.findings)
    assert top is not None and top.cause == Cause.stale_statistics and top.subject == "public.orders"
    text = " ".join(top.evidence)
    assert "n_mod_since_analyze 900,000" in text and "autovacuum_enabled = off" in text
    assert "EXPLAIN ANALYZE" in text  # the benchmark statement's estimate vs actual rows
    assert top.remedies[0].sql == 'ANALYZE "public"."orders"' and top.remedies[0].automatic
    assert blocks_knob(top, "random_page_cost")
    assert {r.cause for r in rc.ruled_out} >= {Cause.vacuum_held_back, Cause.lock_chain}
    with _conn(db) as c:
        c.execute(top.remedies[0].sql)
    again = Watcher("postgresql", db, DB, [stmt], server="pgtest").start().finish()
    assert not any(f.cause == Cause.stale_statistics for f in again.findings)
    assert any(r.cause == Cause.stale_statistics for r in again.ruled_out)


def test_a_statement_the_tuning_role_may_not_read_is_named_with_the_grant_not_called_absent(
    db: str, pg_sandbox: PostgresSandboxInfo
) -> None:
    """A DBA's table is owned by another role: the tuning role's EXPLAIN ANALYZE of ``[rootcause]
    statements`` is refused. The finding said "plan evidence: none (no benchmark statements to EXPLAIN)"
    although a statement was given, and advise showed no reason; now the evidence and the plan-evidence
    note name the refusal and the GRANT, and with the grant the plan evidence makes the table dominant."""
    role = "rc_reader"  # a tuning role as setup-role makes it: pg_monitor, no table of the application's
    with psycopg.connect(pg_sandbox.dsn, autocommit=True) as c:
        c.execute(f"DROP ROLE IF EXISTS {role}")
        c.execute(f"CREATE ROLE {role} LOGIN NOSUPERUSER IN ROLE pg_monitor")
    tuner = f"postgresql://{role}@127.0.0.1:{pg_sandbox.port}/postgres"
    with _conn(db) as c:
        c.execute("CREATE TABLE orders(id int PRIMARY KEY, customer int, status int) WITH (autovacuum_enabled = off)")
        c.execute(
            "INSERT INTO orders SELECT g, g % 10000, CASE WHEN g % 1000 = 0 THEN 1 ELSE 0 END "
            "FROM generate_series(1, 200000) g"
        )
        c.execute("CREATE INDEX ON orders(status)")
        _flushed(c)  # the INSERT's counts land before ANALYZE resets n_mod_since_analyze
        c.execute("ANALYZE orders")
        c.execute("UPDATE orders SET status = 1 WHERE id % 10 <> 0")
    _modified_since_analyze(db, "orders", 180_000)
    stmt = "SELECT count(*) FROM orders WHERE status = 1 AND customer = {r}"
    try:
        rc = Watcher("postgresql", tuner, DB, [stmt], server="pgtest").start().finish()
        stale = next(f for f in rc.findings if f.cause == Cause.stale_statistics)
        plan = next(e for e in stale.evidence if e.startswith("plan evidence"))
        assert "permission denied for table orders" in plan and f"GRANT SELECT ON … TO {role}" in plan, plan
        assert "no benchmark statements" not in plan
        note = next(n for n in rc.notes if n.startswith("plan evidence:"))
        assert note.startswith("plan evidence: EXPLAIN ANALYZE of 0 of 1 benchmark statement(s)"), note
        assert "permission denied" in note
        assert dominant(rc.findings) is None  # counters alone: a suspect
        with _conn(db) as c:
            c.execute(f"GRANT SELECT ON orders TO {role}")
        rc = Watcher("postgresql", tuner, DB, [stmt], server="pgtest").start().finish()
        top = dominant(rc.findings)
        assert top is not None and top.subject == "public.orders", [f.line() for f in rc.findings]
        assert any("EXPLAIN ANALYZE of the benchmark's statements" in e for e in top.evidence)
        assert "plan evidence: EXPLAIN ANALYZE of 1 of 1 benchmark statement(s)" in rc.notes
    finally:
        with _conn(db) as c:
            c.execute(f"DROP OWNED BY {role}")  # its grant on orders, in this database
        with psycopg.connect(pg_sandbox.dsn, autocommit=True) as c:
            c.execute(f"DROP ROLE IF EXISTS {role}")


def test_idle_in_transaction_holding_a_row_lock_is_the_dominant_cause_and_holds_vacuum_back(db: str) -> None:
    with _conn(db) as c:
        c.execute("DROP TABLE IF EXISTS accounts")
        c.execute("CREATE TABLE accounts(id int PRIMARY KEY, balance int) WITH (autovacuum_enabled = off)")
        c.execute("INSERT INTO accounts SELECT g, 0 FROM generate_series(1, 200000) g")
        c.execute("ANALYZE accounts")
    holder = _conn(db)
    holder.autocommit = False
    holder.execute("SELECT * FROM accounts WHERE id = 1 FOR UPDATE")  # then idle in transaction
    pid = holder.info.backend_pid
    stop = threading.Event()

    def waiter() -> None:
        with _conn(db) as c:
            c.execute("SET lock_timeout = '40s'")
            try:
                c.execute("UPDATE accounts SET balance = balance + 1 WHERE id = 1")
            except psycopg.Error:
                pass

    w = Watcher("postgresql", db, DB, server="pgtest").start()
    threads = [threading.Thread(target=waiter) for _ in range(3)]
    for th in threads:
        th.start()
    with _conn(db) as c:  # dead tuples the open snapshot keeps: 3 × 200k updated rows
        for _ in range(3):
            c.execute("UPDATE accounts SET balance = balance + 1 WHERE id > 1")
    time.sleep(max(0.0, 12 - (time.monotonic() - w.started)))  # the holder is now older than holder_age_s
    try:
        rc = w.finish()
    finally:
        stop.set()
        holder.rollback()
        holder.close()
        for th in threads:
            th.join(timeout=70)
    top = dominant(rc.findings)
    assert top is not None and top.cause == Cause.idle_in_transaction and top.subject == f"pid {pid}"
    assert "wait behind it" in top.summary
    assert blocks_knob(top, "deadlock_timeout") and blocks_knob(top, "lock_timeout")
    assert f"pg_terminate_backend({pid})" in top.remedies[0].sql and not top.remedies[0].automatic
    vac = next(f for f in rc.findings if f.cause == Cause.vacuum_held_back)
    assert f"pid {pid}" in vac.summary and "idle in transaction" in vac.summary


BIG_STMT = "SELECT count(*) FROM big WHERE customer = {r}"


def _big(dsn: str) -> None:
    """1M rows, customer 0..49999 without an index, analyzed."""
    with _conn(dsn) as c:
        c.execute("DROP TABLE IF EXISTS big")
        c.execute("CREATE TABLE big(id int PRIMARY KEY, customer int, pad text)")
        c.execute("INSERT INTO big SELECT g, g % 50000, repeat('x', 40) FROM generate_series(1, 1000000) g")
        c.execute("ANALYZE big")


def _scanned(dsn: str, stmt: str) -> RootCauses:
    """A window in which ``stmt`` runs three times ({r} = 1, 2, 3), its counters flushed before it ends."""
    w = Watcher("postgresql", dsn, DB, [stmt], server="pgtest").start()
    with _conn(dsn) as c:
        for r in range(3):
            c.execute(stmt.replace("{r}", str(r + 1))).fetchall()
            _flushed(c)
    return w.finish()


def test_a_missing_index_names_the_column_and_an_unused_index_is_ruled_out_as_a_knob_question(db: str) -> None:
    _big(db)
    rc = _scanned(db, BIG_STMT)
    top = dominant(rc.findings)
    assert top is not None and top.cause == Cause.missing_index and top.subject == "public.big(customer)", (
        rc.findings,
        rc.ruled_out,
        rc.notes,
    )
    # selective: customer = 1 keeps 20 of 1 M rows, measured in the statement's plan
    assert "customer keeps 0.00% of the rows (measured" in " ".join(top.evidence)
    assert top.remedies[0].sql == 'CREATE INDEX CONCURRENTLY "big_customer_idx" ON "public"."big" ("customer")'
    # the decoy: an index exists, but the server is told not to use it (a knob fault with seq-scan symptoms)
    with _conn(db) as c:
        c.execute("CREATE INDEX big_customer_idx ON big(customer)")
        c.execute("ALTER DATABASE rc_test SET enable_indexscan = off")
        c.execute("ALTER DATABASE rc_test SET enable_bitmapscan = off")
    try:
        rc = _scanned(db, BIG_STMT)
    finally:
        with _conn(db) as c:
            c.execute("ALTER DATABASE rc_test RESET ALL")
    assert dominant(rc.findings) is None
    why = next(r.reason for r in rc.ruled_out if r.cause == Cause.missing_index)
    assert "big_customer_idx" in why and "knob" in why


def test_a_missing_index_is_found_when_many_parallel_workers_share_each_scan(db: str) -> None:
    """Each participant of a parallel Seq Scan counts one scan in pg_stat_user_tables and reads its part: with
    six workers and the leader, every scan reads a seventh of the table, below the 'full scan' cut-off of 0.2
    unless the statement's plan (Workers Launched) says how many shared it. A server sized by PGTune
    (max_parallel_workers_per_gather = cores / 2) scans its large tables this way."""
    _big(db)
    with _conn(db) as c:
        for k, v in {
            "max_parallel_workers_per_gather": "6",
            "min_parallel_table_scan_size": "8kB",
            "parallel_setup_cost": "0",
            "parallel_tuple_cost": "0",
        }.items():
            c.execute(f"ALTER DATABASE {DB} SET {k} = '{v}'")
    try:
        with _conn(db) as c:
            plan = c.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + BIG_STMT.replace("{r}", "1")).fetchone()
        rc = _scanned(db, BIG_STMT)
    finally:
        with _conn(db) as c:
            c.execute(f"ALTER DATABASE {DB} RESET ALL")
    assert plan is not None
    launched = plan[0][0]["Plan"]["Plans"][0].get("Workers Launched", 0)
    assert launched >= 4, plan  # the fault: ≥ 5 participants, each reading ≤ 1/5 of the table
    top = dominant(rc.findings)
    assert top is not None and top.cause == Cause.missing_index and top.subject == "public.big(customer)", (
        rc.findings,
        rc.ruled_out,
    )


def _facts(dsn: str) -> None:
    """200,000 rows without an index but the primary key: shipdate 0..999, kind 0/1, analyzed."""
    with _conn(dsn) as c:
        c.execute("CREATE TABLE facts(id int PRIMARY KEY, shipdate int, kind int, pad text)")
        c.execute("INSERT INTO facts SELECT g, g % 1000, g % 2, repeat('x', 40) FROM generate_series(1, 200000) g")
        c.execute("ANALYZE facts")


def test_an_analytic_scan_with_a_filter_keeping_most_rows_is_not_a_missing_index(db: str) -> None:
    """TPC-H's shape (l_shipdate <= …: ~98 % of lineitem): full scans that are the workload's own. The
    share is measured in the statement's plan; the cause is ruled out with it and knob tuning goes on."""
    _facts(db)
    rc = _scanned(db, "SELECT count(*) FROM facts WHERE shipdate <= 980 + {r}")
    assert not [f for f in rc.findings if f.cause == Cause.missing_index], [f.line() for f in rc.findings]
    why = " ".join(r.reason for r in rc.ruled_out if r.cause == Cause.missing_index)
    assert "public.facts: predicate not selective: shipdate keeps 98% of the rows (measured" in why
    assert "an index would not be used" in why


def test_from_statement_texts_alone_the_share_is_estimated_from_pg_stats_or_said_not_measured(db: str) -> None:
    """No statements to explain: pg_stat_statements' normalised texts. kind = $1 on two values keeps half
    the rows by the planner's own estimate (ruled out, said to be an estimate); shipdate > $1 cannot be
    estimated without its constant, so the index is proposed on it with the score lowered."""
    _facts(db)
    with _conn(db) as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    w = Watcher("postgresql", db, DB, server="pgtest").start()
    with _conn(db) as c:
        for r in range(3):
            c.execute(f"SELECT count(*) FROM facts WHERE kind = {r % 2}").fetchall()
            _flushed(c)
    rc = w.finish()
    assert not [f for f in rc.findings if f.cause == Cause.missing_index], [f.line() for f in rc.findings]
    why = " ".join(r.reason for r in rc.ruled_out if r.cause == Cause.missing_index)
    assert "predicate not selective: kind keeps 50% of the rows (estimated from pg_stats for kind = $n" in why
    assert "an estimate" in why
    w = Watcher("postgresql", db, DB, server="pgtest").start()
    with _conn(db) as c:
        for r in range(3):
            c.execute(f"SELECT count(*) FROM facts WHERE shipdate > {990 + r}").fetchall()
            _flushed(c)
    rc = w.finish()
    found = next(f for f in rc.findings if f.cause == Cause.missing_index)
    assert found.subject == "public.facts(shipdate)"  # not kind, which keeps half the rows
    text = " ".join(found.evidence)
    assert "selectivity not measured for shipdate" in text and "not proposed: kind keeps 50%" in text
    assert found.score == pytest.approx(0.75, abs=0.01)  # full share × UNMEASURED_SELECTIVITY


def test_a_join_forced_off_its_nested_loop_is_not_a_missing_index_and_no_other_tables_column_is_blamed(
    db: str,
) -> None:
    """pg-enable-nestloop-off's shape: enable_nestloop = off turns the join served by the accounts' primary
    key into a hash join over a full Seq Scan of the accounts, with no Filter on it. The texts' ``t.tid`` is
    a column of the tellers (alias t), not of the accounts: the accounts' predicate is the join condition on
    aid, which the primary key serves — ruled out as a planner question, from the texts alone and from the
    plans."""
    with _conn(db) as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        c.execute("CREATE TABLE tellers(tid int PRIMARY KEY, bid int, tbalance int)")
        c.execute("INSERT INTO tellers SELECT g, 1, 0 FROM generate_series(1, 100) g")
        c.execute("CREATE TABLE accounts(aid int PRIMARY KEY, bid int, abalance int, filler char(84))")
        c.execute("INSERT INTO accounts SELECT g, 1, 0, '' FROM generate_series(1, 100000) g")
        c.execute("ANALYZE tellers")
        c.execute("ANALYZE accounts")
        c.execute("ALTER DATABASE rc_test SET enable_nestloop = off")
    stmt = "SELECT a.abalance FROM tellers t JOIN accounts a ON a.aid = t.tid * 1000 + {r} WHERE t.tid <= 10"
    try:
        for statements in ([], [stmt]):  # pg_stat_statements' texts alone, then the plans too
            w = Watcher("postgresql", db, DB, statements, server="pgtest").start()
            with _conn(db) as c:
                for r in range(3):
                    c.execute(stmt.replace("{r}", str(r + 1))).fetchall()
                    _flushed(c)
            rc = w.finish()
            assert not [f for f in rc.findings if f.cause == Cause.missing_index], [f.line() for f in rc.findings]
            why = " ".join(r.reason for r in rc.ruled_out if r.cause == Cause.missing_index)
            assert "public.accounts is read by sequential scans" in why and "accounts_pkey on aid" in why, why
            assert "tid" not in why
    finally:
        with _conn(db) as c:
            c.execute("ALTER DATABASE rc_test RESET ALL")
