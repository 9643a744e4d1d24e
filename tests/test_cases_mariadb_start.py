"""MariaDB changes the published metadata admits and the server then refuses (found by the breaker session of
2026-12-07 on MariaDB 10.11.19), judged by the validator on the real sandbox's catalog, one test per kind:

- fixed when the data directory was created (on-disk format): aria_block_size, innodb_page_size — a start
  with another value aborts (dangerous rules of validators/mysql.toml, left out of catalogs/mariadb.toml);
- values that must be a power of two: innodb_log_write_ahead_size (server_check with op power_of_two);
- session-only variables that SYSTEM_VARIABLES lists with scope SESSION: tcp_nodelay (``[session_only]`` of
  catalogs/mariadb.toml);
- a read-only maximum below its variable: innodb_buffer_pool_size_max < innodb_buffer_pool_size is raised at
  start (server_check, clamp).

tests/test_rule_starts.py starts a scratch server with the refused values of the server_check rules.
"""

from __future__ import annotations

from collections.abc import Iterator

import pymysql
import pytest
from test_cases import World, mariadb_target, run_case, world_of


@pytest.fixture(scope="module")
def maria(mariadb_sandbox, tmp_path_factory) -> Iterator[World]:  # type: ignore[no-untyped-def]
    with world_of(
        mariadb_target(mariadb_sandbox, tmp_path_factory.mktemp("agenticdb-cache")), mariadb_sandbox.data_dir
    ) as w:
        yield w


def _case(propose: dict[str, object], current: dict[str, str] | None = None) -> dict[str, object]:
    """A case without the per-round step bound: `tune --start-from`, `advise` and `apply` judge without it
    (README "Advice, apply and approval"), and these faults are not about step size."""
    return {
        "target": "mariadb-10.11",
        "stage": "dbms",
        "propose": propose,
        "current": current or {},
        "policy": {"max_step_factor": 1e12},
    }


# ---- kind: fixed when the data directory was created (on-disk format)


@pytest.mark.parametrize("value", ["16384", "4K"])
def test_mariadb_aria_block_size_change_is_refused(maria: World, value: str) -> None:
    """aria_block_size is written to aria_log_control when the data directory is made; any other value at
    the next start aborts the server. MariaDB 10.11.19 here, aria_block_size=16384 on a data dir made with
    8192: "Block size in control file (8192) is different than given aria_block_size: 16384", "Plugin 'Aria'
    registration as a STORAGE ENGINE failed", "Aborting" (4096 the same). It was accepted (apply restart)."""
    verdict, _ = run_case(_case({"aria_block_size": value}), maria)
    assert not verdict.ok, f"aria_block_size={value} accepted: {verdict.feedback()}"
    [failed] = verdict.failed
    assert (failed.check, failed.parameter, failed.rule_id) == ("dangerous", "aria_block_size", "mysql.aria_block_size")
    assert f"aria_block_size={value}" in failed.message and "data directory was created" in failed.message
    assert "aria_block_size" in maria.catalog.excluded  # the planner is never offered it


def test_mariadb_innodb_page_size_change_is_refused_by_its_rule(maria: World) -> None:
    """innodb_page_size is the same kind: 8192 on a data directory made with 16384 aborts the start ("Data
    file './ibdata1' uses page size 16384, but the innodb_page_size start-up parameter is 8192", 10.11.19
    here). It was refused only as a name left out of the catalog (rule unknown); the rule says why."""
    verdict, _ = run_case(_case({"innodb_page_size": "8192"}), maria)
    [failed] = verdict.failed
    assert (failed.check, failed.rule_id) == ("dangerous", "mysql.innodb_page_size"), failed.message
    assert "innodb_page_size=8192" in failed.message and "on-disk format" in failed.message


# ---- kind: values that must be a power of two


@pytest.mark.parametrize("value", ["3000", "1536"])
def test_mariadb_log_write_ahead_size_not_a_power_of_two_is_refused(maria: World, value: str) -> None:
    """innodb_log_write_ahead_size's range is 512 .. 4096 here, but InnoDB refuses to start unless it is a
    power of two. MariaDB 10.11.19 here with 3000: "InnoDB: innodb_log_write_ahead_size=3000 is not a power of
    two", "Plugin 'InnoDB' registration as a STORAGE ENGINE failed", "Aborting"."""
    verdict, _ = run_case(_case({"innodb_log_write_ahead_size": value}), maria)
    assert not verdict.ok, f"innodb_log_write_ahead_size={value} accepted: {verdict.feedback()}"
    [failed] = verdict.failed
    assert (failed.check, failed.rule_id) == ("server_check", "mysql.log_write_ahead_size_power_of_two")
    assert f"innodb_log_write_ahead_size={value}" in failed.message and "power of two" in failed.message


def test_mariadb_log_write_ahead_size_power_of_two_passes_the_shape_rule(maria: World) -> None:
    """2048 is a power of two: the shape rule leaves it alone (what the device makes of it is another matter)."""
    verdict, _ = run_case(_case({"innodb_log_write_ahead_size": "2048"}), maria)
    assert "mysql.log_write_ahead_size_power_of_two" not in {f.rule_id for f in verdict.failed}, verdict.feedback()


# ---- kind: session-only variables


def test_mariadb_session_only_variable_is_not_accepted_as_dynamic(maria: World) -> None:
    """tcp_nodelay is a SESSION-only variable in MariaDB 10.11 though information_schema.SYSTEM_VARIABLES says
    VARIABLE_SCOPE = SESSION (both); the validator accepted tcp_nodelay=OFF as 'apply dynamic', and the apply
    then failed: "server refused SET GLOBAL tcp_nodelay: Variable 'tcp_nodelay' is a SESSION variable"."""
    verdict, _ = run_case(_case({"tcp_nodelay": "OFF"}), maria)
    assert not verdict.ok, verdict.feedback()
    [failed] = verdict.failed
    assert failed.parameter == "tcp_nodelay" and "session-only" in failed.message, failed.message


def test_every_dynamic_mariadb_knob_of_session_scope_takes_set_global(maria: World, mariadb_sandbox) -> None:  # type: ignore[no-untyped-def]
    """The kind, not the one variable: every variable of scope SESSION that the catalog offers as a dynamic
    knob must take ``SET GLOBAL`` (of its own global value, which changes nothing) on the real server."""
    dynamic = {n for n, s in maria.catalog.knobs.items() if s.apply.value == "dynamic"}
    conn = mariadb_sandbox.connect(timeout=10)
    refused: dict[str, str] = {}
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT LOWER(VARIABLE_NAME) FROM information_schema.SYSTEM_VARIABLES "
                "WHERE VARIABLE_SCOPE = 'SESSION' AND READ_ONLY = 'NO'"
            )
            names = sorted({str(r[0]) for r in cur.fetchall()} & dynamic)
            assert len(names) > 50, names
            for name in names:
                try:
                    cur.execute(f"SET GLOBAL {name} = @@GLOBAL.{name}")
                except pymysql.MySQLError as exc:
                    if exc.args[0] == 1238:  # ER_INCORRECT_GLOBAL_LOCAL_VAR: "is a SESSION variable"
                        refused[name] = str(exc.args[1])
    finally:
        conn.close()
    assert not refused, refused


# ---- kind: a read-only maximum below the value it bounds (the server raises it at start)


def test_mariadb_buffer_pool_size_max_below_the_pool_is_refused(maria: World) -> None:
    """innodb_buffer_pool_size_max = 128M with innodb_buffer_pool_size = 256M was accepted; MariaDB 10.11.19
    here starts with the max raised to 256M, so the verified value would not match."""
    verdict, _ = run_case(
        _case({"innodb_buffer_pool_size_max": "128M"}, current={"innodb_buffer_pool_size": "268435456"}), maria
    )
    assert not verdict.ok, verdict.feedback()
    [failed] = verdict.failed
    assert (failed.check, failed.rule_id) == ("server_check", "mysql.buffer_pool_size_le_max"), failed.message
    assert "innodb_buffer_pool_size_max=" in failed.message and "innodb_buffer_pool_size=" in failed.message


def test_mariadb_sql_log_bin_is_left_out_as_session_only_and_still_refused_by_its_rule(maria: World) -> None:
    """sql_log_bin is the other variable of the kind on 10.11.19 (SET GLOBAL: error 1238); its protected rule
    still names why a tuner never turns it off, with the catalog's reason after it."""
    assert "session-only" in maria.catalog.excluded["sql_log_bin"]
    verdict, _ = run_case(_case({"sql_log_bin": "OFF"}), maria)
    [failed] = verdict.failed
    assert (failed.check, failed.rule_id) == ("protected", "mysql.sql_log_bin"), failed.message
    assert "session-only" in failed.message, failed.message
