"""Gauges read as the account agenticdb really uses: a read whose answer depends on the account's privileges
must not undercount silently (breaker finding, 2026-12-07).

MariaDB lists in information_schema.TABLES only the tables the account holds a privilege on; the
least-privilege role of ``agenticdb setup-role`` (what ``sandbox up`` makes and ``tune``/``validate`` use)
holds no table privilege on ``*.*``, so an application's MEMORY table in its own schema was invisible, the
rule mysql.max_heap_table_size-memory-tables read largest_bytes 0 and accepted max_heap_table_size = 1M.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pymysql
import pytest
from test_cases import EXTRA, World, run_case

from agenticdb.host.hardware import detect_hardware
from agenticdb.host.privileges import role_sql
from agenticdb.targets.mysql import MySQLTarget

ROLE = "agenticdb_gauge_role"
APP = "agenticdb_gauge_app"


@pytest.fixture
def app_memory_table(mariadb_sandbox: Any) -> Iterator[pymysql.connections.Connection]:
    """The least-privilege role (setup-role's statements) and an application's 8 MB MEMORY table in a schema
    of its own; both dropped afterwards. Yields a root connection."""
    statements, _ = role_sql("mariadb", role=ROLE, host="127.0.0.1")
    conn = mariadb_sandbox.connect(timeout=10)
    try:
        with conn.cursor() as cur:
            for stmt in statements:
                cur.execute(stmt)
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {APP}")
            cur.execute(f"CREATE TABLE {APP}.m (id INT PRIMARY KEY, pad CHAR(200)) ENGINE=MEMORY")
            cur.execute(f"INSERT INTO {APP}.m SELECT seq, REPEAT('a', 200) FROM {APP}.seq_1_to_40000")
        yield conn
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {APP}")
            try:
                cur.execute(f"DROP USER '{ROLE}'@'127.0.0.1'")
            except pymysql.MySQLError:
                pass
        conn.close()


def _judge_as_role(mariadb_sandbox: Any) -> tuple[Any, dict[str, float]]:
    cfg = mariadb_sandbox.target_config().model_copy(
        update={"dsn": f"mysql://{ROLE}@127.0.0.1:{mariadb_sandbox.port}/"}
    )
    t = MySQLTarget.from_config(cfg)
    try:
        hw = detect_hardware(mariadb_sandbox.data_dir, pid=t.server_pid())
        world = World(t.catalog(), t.current_values(), hw, None, t.runtime_state().gauges)
        verdict, _ = run_case(
            {**EXTRA["mariadb-max-heap-below-memory-table"], "observed": {}}, world, read=t.rule_gauges
        )
        return verdict, verdict.read
    finally:
        t.close()


def test_memory_tables_unknown_to_the_least_privilege_role_refuses_a_lowering_and_says_why(
    mariadb_sandbox: Any, app_memory_table: pymysql.connections.Connection
) -> None:
    """As setup-role's account the gauge is unknown (not 0): max_heap_table_size = 1M is refused, and the
    refusal names the account's missing table privilege and what to grant. Granted SHOW VIEW on *.*
    (metadata, no rows) the other schema's table is seen and the rule compares with its real size."""
    verdict, read = _judge_as_role(mariadb_sandbox)
    assert not verdict.ok, f"read as {ROLE}: {read}; {verdict.feedback()}"
    failed = [f for f in verdict.failed if f.rule_id == "mysql.max_heap_table_size-memory-tables"]
    assert failed, verdict.feedback()
    message = failed[0].message
    assert "unknown" in message and "no table privilege on *.*" in message, message
    assert f"'{ROLE}'@'127.0.0.1'" in message and "GRANT SHOW VIEW ON *.*" in message, message
    assert not read, read  # nothing was compared: no undercount was taken for a peak

    with app_memory_table.cursor() as cur:
        cur.execute(f"GRANT SHOW VIEW ON *.* TO '{ROLE}'@'127.0.0.1'")
    verdict, read = _judge_as_role(mariadb_sandbox)
    assert not verdict.ok, verdict.feedback()
    assert read.get("memory_tables.largest_bytes", 0) > 8_000_000, read
    assert "below the observed peak" in verdict.feedback(), verdict.feedback()
