"""A restore of a value no SET GLOBAL can bring back (breaker finding, 2026-12-07).

A freshly started MariaDB 10.11 reports thread_pool_size = 2 (the CPU count; thread_handling is
one-thread-per-connection, so there is no pool) and innodb_lru_flush_size = 0 (below its own minimum 1; the
server describes it as "Deprecated parameter with no effect"). Once anyone set either, ``SET GLOBAL`` of the
snapshot's value reads back 0 / 1 (warning 1292 "Truncated incorrect …"), and ``agenticdb rollback --dbms``
failed with "values differ after restore". Such a knob has no effect in this configuration: the restore
leaves it alone and says why; a knob that matters still fails the restore.
"""

from __future__ import annotations

from typing import Any

import pytest

from agenticdb.loop.recovery import restore_verified
from agenticdb.models import Snapshot
from agenticdb.targets.base import TargetError
from agenticdb.targets.mysql import MySQLTarget


@pytest.mark.parametrize(
    "name,outside,why",
    [
        ("thread_pool_size", "1", "thread_handling"),
        ("innodb_lru_flush_size", "32", "Deprecated parameter with no effect"),
    ],
)
def test_mariadb_restore_leaves_alone_a_value_without_effect_that_no_set_reproduces(
    mariadb_sandbox: Any, name: str, outside: str, why: str
) -> None:
    t = MySQLTarget.from_config(mariadb_sandbox.target_config())
    try:
        t.service.restart()  # the values a server start gives
        t.close()
        snap = t.snapshot(list(t.catalog().knobs), label="fresh start")
        conn = mariadb_sandbox.connect(timeout=10)
        try:
            with conn.cursor() as cur:
                cur.execute(f"SET GLOBAL {name} = {outside}")
        finally:
            conn.close()
        t.restore(snap)  # before the fix: TargetError "values differ after restore"
        result = restore_verified(t, snap)
        assert result.verified, result.problem()
        assert set(result.left_alone) == {name}, result.left_alone
        assert why in result.left_alone[name], result.left_alone
        assert "no effect" in result.left_alone[name], result.left_alone
    finally:
        t.close()
        t.service.restart()  # fresh-start values back for the other tests
        t.close()


def test_mariadb_restore_still_fails_for_a_knob_that_matters_and_cannot_be_set_back(mariadb_sandbox: Any) -> None:
    """max_connections = 5 is below its minimum 10: SET GLOBAL reads back 10, and max_connections acts in
    every configuration, so the restore fails and names it (and the inert knob beside it is not named)."""
    t = MySQLTarget.from_config(mariadb_sandbox.target_config())
    try:
        snap = Snapshot(target="mariadb", values={"max_connections": "5", "thread_pool_size": "7"}, label="bad")
        with pytest.raises(TargetError, match="max_connections") as err:
            t.restore(snap)
        assert "thread_pool_size" not in str(err.value), err.value
        result = restore_verified(t, snap)
        assert not result.verified and set(result.differences) == {"max_connections"}, result
        assert set(result.left_alone) == {"thread_pool_size"}, result.left_alone
    finally:
        t.close()
        t.service.restart()  # start values back (SET GLOBAL is not kept across a start) for the other tests
        t.close()
