"""Kinds of fault a breaker trial got past the validator, each checked against a real private server.

1. Special values that stand for another one (PostgreSQL wal_buffers = -1 is "auto" and pg_settings then
   reports the computed size): the validator says what the value means and verification compares with the
   value the server computes, so apply + verify succeed on the real server instead of wasting a restart.
2. Enum values the running MariaDB build cannot accept (innodb_compression_algorithm = lzma needs the
   provider_lzma plugin): refused before apply, from what the server itself reports.
3. MariaDB switches that change query results or safety are refused as protected (semantics), never tuned.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from agenticdb.config.sections import PolicyConfig
from agenticdb.host.hardware import detect_hardware
from agenticdb.models import ApplyMode, Bottleneck, Change, Layer, NormalizedChange, Proposal, Verdict
from agenticdb.sandbox.mariadb import MariaDBSandboxInfo
from agenticdb.sandbox.postgres import PostgresSandboxInfo
from agenticdb.targets.mysql import MySQLTarget
from agenticdb.targets.postgres import PostgresTarget
from agenticdb.validation.validator import validate


@pytest.fixture(scope="module")
def pgt(pg_sandbox: PostgresSandboxInfo) -> Iterator[PostgresTarget]:
    t = PostgresTarget.from_config(pg_sandbox.target_config())
    try:
        yield t
    finally:
        t.close()


def pg_check(t: PostgresTarget, data_dir: str, changes: dict[str, Any]) -> Verdict:
    proposal = Proposal(
        bottleneck=Bottleneck.unknown,
        layer=Layer.dbms,
        apply_requirement=ApplyMode.restart,
        changes=[Change(name=k, value=v) for k, v in changes.items()],
    )
    return validate(
        proposal,
        t.catalog(),
        t.current_values(),
        detect_hardware(data_dir),
        PolicyConfig(max_step_factor=1000.0),
        Layer.dbms,
    )


# ------------------------------------------------------------------ 1. special values


def test_pg_wal_buffers_auto_applies_and_verifies_on_the_real_server(
    pgt: PostgresTarget, pg_sandbox: PostgresSandboxInfo
) -> None:
    """wal_buffers=-1 with shared_buffers=64MB: the server computes 64MB/32 = 2MB (256 pages) and reports
    it; the validator says so and verification compares with it (PG 15 manual 20.5.1)."""
    snap = pgt.snapshot(["shared_buffers", "wal_buffers"], label="before-wal-buffers-auto")
    try:
        v = pg_check(pgt, str(pg_sandbox.data_dir), {"shared_buffers": "64MB", "wal_buffers": -1})
        assert v.ok, v.feedback()
        wal = next(c for c in v.changes if c.name == "wal_buffers")
        assert (wal.value, wal.expected_base) == ("-1", 256.0)
        assert any("wal_buffers=-1 means auto" in w and "2MB" in w and "20.5.1" in w for w in v.warnings), v.warnings
        assert pgt.apply(v.changes, v.apply_requirement) is True
        assert pgt.verify(v.changes)["wal_buffers"] == "2MB"
        assert "wal_buffers = '-1'" in pgt.auto_conf.read_text()
    finally:
        pgt.restore(snap)
    assert pgt.current_values(["shared_buffers", "wal_buffers"]) == snap.values


def test_pg_special_value_kept_by_the_server_is_explained(pgt: PostgresTarget, pg_sandbox: PostgresSandboxInfo) -> None:
    """autovacuum_work_mem=-1 stays -1 in pg_settings and means maintenance_work_mem: the warning says so."""
    v = pg_check(pgt, str(pg_sandbox.data_dir), {"autovacuum_work_mem": -1})
    assert v.ok, v.feedback()
    assert v.changes[0].expected_base is None
    assert any("autovacuum_work_mem=-1 means use maintenance_work_mem" in w for w in v.warnings), v.warnings


def test_pg_wal_buffers_below_four_pages_is_refused_and_the_server_clamps_it(
    pgt: PostgresTarget, pg_sandbox: PostgresSandboxInfo
) -> None:
    """16kB (2 pages) passes pg_settings' range but check_wal_buffers() raises it to 4 pages: refused as a
    server_check; forced onto the real server, pg_settings indeed reports 32kB."""
    v = pg_check(pgt, str(pg_sandbox.data_dir), {"wal_buffers": "16kB"})
    assert not v.ok
    hit = [f for f in v.failed if f.check == "server_check" and f.parameter == "wal_buffers"]
    assert hit and "pg.wal_buffers-at-least-4-pages" in hit[0].message, v.feedback()
    snap = pgt.snapshot(["wal_buffers"], label="before-wal-buffers-clamp")
    try:
        ch = NormalizedChange(name="wal_buffers", value="16kB", base_value=2.0, unit="8kB", apply=ApplyMode.restart)
        pgt.apply([ch], ApplyMode.restart)
        assert pgt.raw_settings(["wal_buffers"])["wal_buffers"][0] == "4"
    finally:
        pgt.restore(snap)


# ------------------------------------------------------------------ 2. enum values this build refuses


@pytest.fixture(scope="module")
def myt(mariadb_sandbox: MariaDBSandboxInfo) -> Iterator[MySQLTarget]:
    t = MySQLTarget.from_config(mariadb_sandbox.target_config())
    try:
        yield t
    finally:
        t.close()


def my_check(t: MySQLTarget, data_dir: str, changes: dict[str, Any]) -> Verdict:
    proposal = Proposal(
        bottleneck=Bottleneck.unknown,
        layer=Layer.dbms,
        apply_requirement=ApplyMode.dynamic,
        changes=[Change(name=k, value=v) for k, v in changes.items()],
    )
    return validate(
        proposal,
        t.catalog(),
        t.current_values(),
        detect_hardware(data_dir),
        PolicyConfig(max_step_factor=1000.0),
        Layer.dbms,
    )


@pytest.mark.parametrize("algorithm", ["lzma", "lz4", "lzo", "bzip2", "snappy", "zlib", "none"])
def test_mariadb_compression_algorithm_agrees_with_the_server(
    myt: MySQLTarget, mariadb_sandbox: MariaDBSandboxInfo, algorithm: str
) -> None:
    """The validator refuses exactly the values the real server refuses: SYSTEM_VARIABLES lists all seven,
    but since 10.7 lz4/lzo/lzma/bzip2/snappy need their provider_* plugin (MariaDB KB, Compression Plugins).
    The server is asked with a real SET GLOBAL; the value is put back in ``finally``."""
    v = my_check(myt, str(mariadb_sandbox.data_dir), {"innodb_compression_algorithm": algorithm})
    conn = pymysql.connect(**myt.connect_kwargs)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT @@GLOBAL.innodb_compression_algorithm")
            before = cur.fetchone()[0]
            try:
                cur.execute("SET GLOBAL innodb_compression_algorithm = %s", (algorithm,))
                server_accepts = True
            except pymysql.err.OperationalError as exc:
                assert exc.args[0] == 1231, exc
                server_accepts = False
            finally:
                cur.execute("SET GLOBAL innodb_compression_algorithm = %s", (before,))
            cur.execute(
                "SELECT COUNT(*) FROM information_schema.PLUGINS WHERE PLUGIN_NAME = %s AND PLUGIN_STATUS = 'ACTIVE'",
                (f"provider_{algorithm}",),
            )
            provider_active = cur.fetchone()[0] == 1
    finally:
        conn.close()
    assert v.ok == server_accepts, v.feedback()
    if not server_accepts:
        assert not provider_active
        [fail] = v.failed
        assert fail.check == "enum" and fail.parameter == "innodb_compression_algorithm"
        assert f"provider_{algorithm}" in fail.message and "zlib" in fail.message, fail.message
        assert algorithm not in (myt.catalog().knobs["innodb_compression_algorithm"].enum_values or [])


# ------------------------------------------------------------------ 3. MariaDB semantics and safety switches


SEMANTICS = {
    # (value to propose): the switch changes results, errors, security or replication, never speed
    "check_constraint_checks": "OFF",
    "auto_increment_increment": 2,
    "innodb_autoinc_lock_mode": 2,
    "idle_transaction_timeout": 5,
    "default_regex_flags": "DOTALL",
    "max_sort_length": 64,
    "standard_compliant_cte": "OFF",
    "alter_algorithm": "INSTANT",
    "max_error_count": 10,
    "max_prepared_stmt_count": 10,
    "innodb_default_row_format": "redundant",
    "innodb_read_only_compressed": "ON",
    "innodb_ft_min_token_size": 1,
    "require_secure_transport": "ON",
    "default_password_lifetime": 1,
    "log_bin_trust_function_creators": "ON",
    "binlog_row_image": "MINIMAL",
    "binlog_expire_logs_seconds": 60,
    "slave_exec_mode": "IDEMPOTENT",
    "innodb_checksum_algorithm": "strict_crc32",
    # already refused before: the kind the brief names
    "sql_select_limit": 1,
    "sql_safe_updates": "ON",
    "foreign_key_checks": "OFF",
    "unique_checks": "OFF",
    "sql_auto_is_null": "ON",
    "sql_mode": "ANSI",
    "autocommit": "OFF",
    "big_tables": "ON",
    "max_join_size": 1000,
}
"""sql_log_bin is protected too, but the catalog leaves it out as a session-only variable (SET GLOBAL refuses
it); tests/test_cases_mariadb_start.py checks its refusal."""


@pytest.mark.parametrize("name,value", sorted(SEMANTICS.items()))
def test_mariadb_semantics_switches_are_refused_with_the_rule(
    myt: MySQLTarget, mariadb_sandbox: MariaDBSandboxInfo, name: str, value: Any
) -> None:
    """Each name exists on the real MariaDB 10.11 (the rule would be dead otherwise) and is refused as
    protected with its rule id and the semantics wording, never as a performance question."""
    assert name in myt.catalog().knobs
    v = my_check(myt, str(mariadb_sandbox.data_dir), {name: value})
    assert not v.ok
    [fail] = v.failed
    assert fail.check == "protected" and fail.rule_id == f"mysql.{name}", v.feedback()
    assert f"rule mysql.{name}" in fail.message and "semantics" in fail.message, fail.message
    assert fail.source.startswith("MariaDB KB"), fail.source


@pytest.mark.parametrize("name", ["sql_slave_skip_counter", "ignore_builtin_innodb", "read_only"])
def test_mariadb_never_tuned_switches_are_dangerous(
    myt: MySQLTarget, mariadb_sandbox: MariaDBSandboxInfo, name: str
) -> None:
    v = my_check(myt, str(mariadb_sandbox.data_dir), {name: 1})
    assert not v.ok
    assert any(f.check == "dangerous" and f.rule_id == f"mysql.{name}" for f in v.failed), v.feedback()
