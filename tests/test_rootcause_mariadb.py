"""Root causes on a real private MariaDB 10.11 with huge injected faults (issue 40): a 300k-row table with
STATS_AUTO_RECALC=0 and 90 % of its rows modified; a connection idle in a transaction holding a row lock
while others wait; a statement examining the whole table for a column without an index."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pymysql
import pytest

from agenticdb.rootcause import Cause, Watcher, blocks_knob, dominant
from agenticdb.sandbox.mariadb import MariaDBSandboxInfo

DB = "rc_test"


@pytest.fixture
def my(mariadb_sandbox: MariaDBSandboxInfo) -> Iterator[MariaDBSandboxInfo]:
    """A fresh database for each test: one test's tables must not be findings in the next one's window (a
    window after the keyword test found its 100,000-row ``events``, loaded but not yet recalculated, stale)."""
    with mariadb_sandbox.connect() as c, c.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DB}")
        cur.execute(f"CREATE DATABASE {DB}")
    yield mariadb_sandbox
    with mariadb_sandbox.connect() as c, c.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DB}")


def _exec(info: MariaDBSandboxInfo, *stmts: str) -> None:
    with info.connect(DB) as c, c.cursor() as cur:
        for s in stmts:
            cur.execute(s)
            cur.fetchall()


def test_stale_statistics_with_recalculation_off_and_an_unindexed_statement_are_found(my: MariaDBSandboxInfo) -> None:
    _exec(
        my,
        "DROP TABLE IF EXISTS orders",
        "CREATE TABLE orders(id int PRIMARY KEY, customer int, status int, pad char(40)) STATS_AUTO_RECALC=0",
        "INSERT INTO orders SELECT seq, seq % 50000, 0, 'x' FROM seq_1_to_1000",
        "ANALYZE TABLE orders",  # statistics of a 1,000-row table ...
        "INSERT INTO orders SELECT seq, seq % 50000, 1, 'x' FROM seq_1001_to_300000",  # ... that grew 300 times
    )
    stmt = "SELECT count(*) FROM orders WHERE status = 1"
    w = Watcher("mariadb", my.dsn, DB, [stmt], server="mytest").start()
    _exec(my, *["SELECT count(*) FROM orders WHERE customer = 7"] * 5)
    # a monitor's catalog read that takes longer than the workload (the watcher's own TABLESTATS join did on a
    # busy CI host) is not the workload's statement time
    _exec(my, "SELECT sleep(2) FROM information_schema.ENGINES LIMIT 1")
    rc = w.finish()
    stale = next(f for f in rc.findings if f.cause == Cause.stale_statistics)
    # InnoDB keeps the row count current and the range estimates come from index dives: the statement's
    # estimate is right, so the stale statistics stay a suspect (0.5), below the dominance threshold
    assert stale.subject == "rc_test.orders" and stale.score == 0.5
    assert "MODIFIED_COUNTER 299,000" in stale.evidence[0] and "STATS_AUTO_RECALC=0" in stale.evidence[1]
    assert "plan evidence" in stale.evidence[2]
    assert stale.remedies[0].sql == "ANALYZE TABLE `rc_test`.`orders`"
    miss = next(f for f in rc.findings if f.cause == Cause.missing_index)
    assert miss.subject == "rc_test.orders(customer)" and miss.score >= 0.6  # most of the window's statement time
    assert "ADD INDEX `orders_customer_idx` (`customer`), ALGORITHM=INPLACE, LOCK=NONE" in miss.remedies[0].sql
    _exec(my, stale.remedies[0].sql, miss.remedies[0].sql)
    w = Watcher("mariadb", my.dsn, DB, server="mytest").start()
    _exec(my, *["SELECT count(*) FROM orders WHERE customer = 7"] * 5)
    again = w.finish()
    assert not any(f.cause in (Cause.stale_statistics, Cause.missing_index) for f in again.findings), again.findings
    assert {r.cause for r in again.ruled_out} >= {Cause.stale_statistics, Cause.missing_index, Cause.purge_lag}


def test_an_idle_transaction_holding_a_row_lock_heads_the_lock_chain(my: MariaDBSandboxInfo) -> None:
    _exec(
        my,
        "DROP TABLE IF EXISTS orders",
        "DROP TABLE IF EXISTS accounts",
        "CREATE TABLE accounts(id int PRIMARY KEY, balance int)",
        "INSERT INTO accounts SELECT seq, 0 FROM seq_1_to_1000",
    )
    holder = my.connect(DB)
    holder.autocommit(False)
    with holder.cursor() as cur:
        cur.execute("SELECT * FROM accounts WHERE id = 1 FOR UPDATE")
    thread = holder.thread_id()

    def waiter() -> None:
        with my.connect(DB) as c, c.cursor() as cur:
            cur.execute("SET SESSION innodb_lock_wait_timeout = 30")
            try:
                cur.execute("UPDATE accounts SET balance = balance + 1 WHERE id = 1")
            except pymysql.MySQLError:
                pass

    threads = [threading.Thread(target=waiter) for _ in range(3)]
    for th in threads:
        th.start()
    # the holder grows older than holder_age_s (10 s) before the window opens, so every sample of the
    # window sees an old holder with waiters (the waiters' lock wait timeout is 30 s: they wait throughout)
    time.sleep(11)
    w = Watcher("mariadb", my.dsn, DB, server="mytest").start()
    time.sleep(8)
    try:
        rc = w.finish()
    finally:
        holder.rollback()
        holder.close()
        for th in threads:
            th.join(timeout=40)
    top = dominant(rc.findings)
    assert top is not None, (rc.findings, getattr(rc, "ruled_out", None))
    assert top.cause == Cause.idle_in_transaction and top.subject == f"thread {thread}", top
    assert "idle in transaction" in top.summary and "wait behind it" in top.summary
    assert top.remedies[0].sql == f"KILL {thread}" and not top.remedies[0].automatic
    assert blocks_knob(top, "innodb_lock_wait_timeout")


def test_a_table_named_like_a_keyword_keeps_its_case_in_the_remedy(my: MariaDBSandboxInfo) -> None:
    # digest texts upper-case names that are keywords too (FROM EVENTS); table names are case-sensitive
    _exec(
        my,
        "DROP TABLE IF EXISTS events",
        "CREATE TABLE events(id int PRIMARY KEY, user_id int, pad char(40))",
        "INSERT INTO events SELECT seq, seq % 5000, 'x' FROM seq_1_to_100000",
    )
    w = Watcher("mariadb", my.dsn, DB, server="mytest").start()
    _exec(my, *["SELECT count(*) FROM events WHERE user_id = 7"] * 5)
    miss = next(f for f in w.finish().findings if f.cause == Cause.missing_index)
    assert miss.subject == "rc_test.events(user_id)"
    _exec(my, miss.remedies[0].sql)  # runs: the table is found under its own name
    _exec(my, "DROP TABLE events")


def test_stale_statistics_of_another_schema_are_not_this_database_s(my: MariaDBSandboxInfo) -> None:
    """Table statistics are read for the watched database only, as PostgreSQL's are per database: a stale
    table of another schema on the same server is not the workload's cause."""
    other = "rc_other"
    with my.connect() as c, c.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS {other}")
    try:
        with my.connect(other) as c, c.cursor() as cur:
            cur.execute("CREATE TABLE stale(id int PRIMARY KEY, v int) STATS_AUTO_RECALC=0")
            cur.execute("INSERT INTO stale SELECT seq, 0 FROM seq_1_to_1000")
            cur.execute("ANALYZE TABLE stale")
            cur.fetchall()
            cur.execute("INSERT INTO stale SELECT seq, 0 FROM seq_1001_to_100000")
        rc = Watcher("mariadb", my.dsn, DB, server="mytest").start().finish()
        assert not any(f.cause == Cause.stale_statistics for f in rc.findings), rc.findings
        assert Cause.stale_statistics in {r.cause for r in rc.ruled_out}
        whole = Watcher("mariadb", my.dsn, other, server="mytest").start().finish()
        assert any(f.subject == f"{other}.stale" for f in whole.findings if f.cause == Cause.stale_statistics)
    finally:
        with my.connect() as c, c.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {other}")
