"""MariaDB's marks of a changed world (issue 38) on the private MariaDB 10.11: a truncated
performance_schema digest table, FLUSH STATUS and a restart by someone else are seen; the restart is
called outside only with the log's normal shutdown."""

from __future__ import annotations

import time
from pathlib import Path

import pymysql
import pytest

from agenticdb.loop.runwatch import RunWatch
from agenticdb.measure.worldwatch import CLOCK_SLACK_S, world_changes
from agenticdb.sandbox.mariadb import MariaDBSandbox, MariaDBSandboxInfo
from agenticdb.targets.mysql import MySQLTarget
from agenticdb.workloads.base import WorkloadError


def test_mariadb_marks_see_truncation_flush_and_an_outside_restart(mariadb_sandbox: MariaDBSandboxInfo) -> None:
    info = mariadb_sandbox
    target = MySQLTarget.from_config(info.target_config())
    conn = info.connect()
    with conn.cursor() as cur:
        for _ in range(20):
            cur.execute("SELECT COUNT(*) FROM mysql.user")
    before = target.world_mark()
    assert world_changes(before, target.world_mark()) == []
    with conn.cursor() as cur:
        cur.execute("TRUNCATE TABLE performance_schema.events_statements_summary_by_digest")
    seen = world_changes(before, target.world_mark())
    assert any("truncated" in s for s in seen), seen
    # a flush is told from the start by its time: wait (on the server's clock) until it is well after it
    with conn.cursor() as cur:
        while True:
            cur.execute("SHOW GLOBAL STATUS LIKE 'Uptime_since_flush_status'")
            row = cur.fetchone()
            if row and int(row[1]) >= 3 * CLOCK_SLACK_S:
                break
            time.sleep(0.2)
    before = target.world_mark()
    with conn.cursor() as cur:
        cur.execute("FLUSH STATUS")
    after = target.world_mark()
    assert any("FLUSH STATUS" in s for s in world_changes(before, after)), (before, after)
    before = target.world_mark()
    with conn.cursor() as cur:
        cur.execute("SET GLOBAL sort_buffer_size = 4194304")  # a rival's change (the fixture's own server)
        cur.execute("SET GLOBAL sort_buffer_size = DEFAULT")
        cur.execute("SET GLOBAL max_connect_errors = 150")
    seen = world_changes(before, target.world_mark())
    with conn.cursor() as cur:
        cur.execute("SET GLOBAL max_connect_errors = DEFAULT")
    assert any("settings changed by someone else" in s and "max_connect_errors 100 → 150" in s for s in seen), seen

    pid = int(Path(info.pid_file).read_text().strip())
    watch = RunWatch(target, lambda: pid)
    watch.begin()
    base = Path(info.root).parent.parent
    MariaDBSandbox(base).service(info).restart()  # someone else restarts it (SIGTERM: a normal shutdown)
    with pytest.raises(pymysql.MySQLError) as err, conn.cursor() as cur:
        cur.execute("SELECT 1")
    assert any("restarted" in s for s in watch.changes())
    outside, evidence = watch.outside(WorkloadError(str(err.value)))
    assert outside and "Normal shutdown" in evidence, evidence
    target.close()
