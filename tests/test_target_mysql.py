"""MySQLTarget against a real private MariaDB 10.11 (the mariadb_sandbox fixture), and the MySQL 8 catalog
merge with the shipped data file (no MySQL server on this host)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agenticdb.host.services import ServiceError
from agenticdb.models import ApplyMode, NormalizedChange
from agenticdb.sandbox.mariadb import MariaDBSandboxInfo
from agenticdb.targets.base import ApplyError, VerifyError
from agenticdb.targets.mysql import MySQLTarget, parse_mysql_dsn, parse_size
from agenticdb.targets.mysql_catalog import load_data, mysql8_catalog

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def target(mariadb_sandbox: MariaDBSandboxInfo) -> Iterator[MySQLTarget]:
    t = MySQLTarget.from_config(mariadb_sandbox.target_config())
    snap = t.snapshot(
        [
            "innodb_io_capacity",
            "innodb_log_buffer_size",
            "innodb_buffer_pool_size",
            "innodb_change_buffering",
        ],
        label="module start",
    )
    yield t
    t.restore(snap)  # leave the shared sandbox as we found it
    t.close()


def change(name: str, value: str, apply: ApplyMode = ApplyMode.dynamic, base: float | None = None) -> NormalizedChange:
    return NormalizedChange(name=name, value=value, base_value=base, apply=apply)


def test_flavour_and_catalog_facts(target: MySQLTarget) -> None:
    assert target.kind == "mariadb"
    assert target.version().startswith("10.11")
    cat = target.catalog()
    bp = cat.knobs["innodb_buffer_pool_size"]
    assert bp.apply == ApplyMode.dynamic and bp.unit == "B" and bp.block_size == MiB
    # 10.11 resizes the redo log online (SYSTEM_VARIABLES.READ_ONLY = NO), the log buffer needs a restart.
    assert cat.knobs["innodb_log_file_size"].apply == ApplyMode.dynamic
    assert cat.knobs["innodb_log_buffer_size"].apply == ApplyMode.restart
    assert cat.knobs["innodb_flush_method"].enum_values is not None
    assert "O_DIRECT" in cat.knobs["innodb_flush_method"].enum_values
    assert cat.knobs["innodb_adaptive_hash_index"].vartype == "bool"
    assert cat.knobs["thread_cache_size"].unit is None  # a count, not bytes
    # durability / semantics stay in the catalog: the validator rejects them by rule
    assert "innodb_flush_log_at_trx_commit" in cat.knobs
    assert cat.knobs["transaction_isolation"].enum_values == cat.knobs["tx_isolation"].enum_values
    for name in (
        "datadir",
        "socket",
        "port",
        "log_error",
        "tmpdir",
        "plugin_dir",
        "bind_address",
        "server_id",
        "wsrep_on",
        "gtid_slave_pos",
        "read_only",
        "ssl_cert",
    ):
        assert name in cat.excluded and "(" in cat.excluded[name], name  # reason (source)
    assert "session-only" in cat.excluded["insert_id"]
    assert "informational" in cat.excluded["version"]
    assert "innodb_redo_log_capacity" not in cat.knobs  # MySQL 8.0.30+ only: the validator says "unknown"


def test_dynamic_change_applied_verified_and_persisted(
    target: MySQLTarget, mariadb_sandbox: MariaDBSandboxInfo
) -> None:
    snap = target.snapshot(["innodb_io_capacity"])
    new = str(int(snap.values["innodb_io_capacity"]) * 2)
    restarted = target.apply([change("innodb_io_capacity", new)], ApplyMode.dynamic)
    assert restarted is False
    assert target.verify([change("innodb_io_capacity", new)]) == {"innodb_io_capacity": new}
    assert f"innodb_io_capacity = {new}" in Path(mariadb_sandbox.option_file).read_text()
    target.restore(snap)
    assert target.current_values(["innodb_io_capacity"]) == snap.values
    assert "innodb_io_capacity" not in Path(mariadb_sandbox.option_file).read_text()


def test_restart_only_change_through_option_file(target: MySQLTarget, mariadb_sandbox: MariaDBSandboxInfo) -> None:
    snap = target.snapshot(["innodb_log_buffer_size"])
    new = int(snap.values["innodb_log_buffer_size"]) + 16 * MiB
    ch = change("innodb_log_buffer_size", str(new), ApplyMode.restart, base=new)
    assert target.apply([ch], ApplyMode.restart) is True
    text = Path(mariadb_sandbox.option_file).read_text()
    assert "[mysqld]" in text and f"innodb_log_buffer_size = {new}" in text
    assert target.verify([ch])["innodb_log_buffer_size"] == str(new)
    target.restore(snap)  # the file goes back and the restart-only value needs a restart
    assert target.current_values(["innodb_log_buffer_size"]) == snap.values


def test_buffer_pool_rounding_is_predicted_and_accepted(target: MySQLTarget) -> None:
    snap = target.snapshot(["innodb_buffer_pool_size"])
    requested = 100_000_000  # not a multiple of the 1 MiB block size
    ch = change("innodb_buffer_pool_size", str(requested), base=requested)
    target.apply([ch], ApplyMode.dynamic)
    effective = target.verify([ch])["innodb_buffer_pool_size"]
    assert int(effective) == requested - requested % MiB
    with pytest.raises(VerifyError, match="innodb_buffer_pool_size: expected"):
        target.verify([change("innodb_buffer_pool_size", str(256 * MiB), base=256 * MiB)])
    target.restore(snap)


def test_failed_statement_rolls_back_the_whole_set(target: MySQLTarget, mariadb_sandbox: MariaDBSandboxInfo) -> None:
    before = target.current_values(["innodb_io_capacity", "innodb_change_buffering"])
    file_before = Path(mariadb_sandbox.option_file).read_text()
    with pytest.raises(ApplyError, match=r"innodb_change_buffering=bogus: server refused"):
        target.apply(
            [change("innodb_io_capacity", "1234"), change("innodb_change_buffering", "bogus")],
            ApplyMode.dynamic,
        )
    assert target.current_values(["innodb_io_capacity", "innodb_change_buffering"]) == before
    assert Path(mariadb_sandbox.option_file).read_text() == file_before
    with pytest.raises(ApplyError, match="not a tunable variable"):
        target.apply([change("datadir", "/tmp")], ApplyMode.restart)


def test_server_that_cannot_start_is_restored(target: MySQLTarget, mariadb_sandbox: MariaDBSandboxInfo) -> None:
    snap = target.snapshot(["innodb_log_buffer_size", "innodb_io_capacity"], label="safe")
    opt = Path(mariadb_sandbox.option_file)
    opt.write_text(opt.read_text() + "innodb_flush_method = no_such_method\n")
    t0 = time.monotonic()
    with pytest.raises(ServiceError) as err:
        target.service.restart()
    assert time.monotonic() - t0 < 20  # early exit detected, not a full start timeout
    assert "no_such_method" in err.value.output or "innodb_flush_method" in err.value.output
    assert not target.available()
    target.restore(snap)  # file written back while the server is down, then started and verified
    assert target.available()
    assert target.current_values(list(snap.values)) == snap.values
    assert "no_such_method" not in opt.read_text()


def test_runtime_state_counters_rise(target: MySQLTarget, mariadb_sandbox: MariaDBSandboxInfo) -> None:
    before = target.runtime_state()
    for key in (
        "global_status.Questions",
        "global_status.Innodb_buffer_pool_read_requests",
        "global_status.Innodb_log_writes",
        "global_status.Handler_read_rnd_next",
        "innodb_metrics.buffer_pool_reads",
    ):
        assert key in before.counters, key
    for key in (
        "global_status.Threads_connected",
        "global_status.Innodb_buffer_pool_pages_total",
        "global_status.Innodb_buffer_pool_pages_free",
        "innodb.checkpoint_age_bytes",
        "innodb.log_sequence_number",
        "variables.max_connections",
        "variables.innodb_buffer_pool_size",
        "variables.innodb_redo_log_capacity",
    ):
        assert key in before.gauges, key
    with mariadb_sandbox.connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS agx_rs")
        cur.execute("CREATE TABLE IF NOT EXISTS agx_rs.t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB")
        for i in range(50):
            cur.execute("REPLACE INTO agx_rs.t VALUES (%s, %s)", (i, i))
        cur.execute("SELECT COUNT(*) FROM agx_rs.t")
        cur.execute("DROP DATABASE agx_rs")
    after = target.runtime_state()
    assert after.counters["global_status.Questions"] > before.counters["global_status.Questions"]
    key = "global_status.Innodb_log_writes"
    assert after.counters[key] >= before.counters[key]
    assert after.gauges["innodb.log_sequence_number"] > before.gauges["innodb.log_sequence_number"]
    assert target.log_tail(5)


def _statements_of(cur: Any, thread: int) -> list[str]:
    """What the server's general query log (log_output = TABLE) holds for connection ``thread``, in order."""
    cur.execute(
        "SELECT CONVERT(argument USING utf8mb4) FROM mysql.general_log WHERE thread_id = %s AND command_type = 'Query'"
        " ORDER BY event_time",
        (thread,),
    )
    return [str(row[0]) for row in cur.fetchall()]


def test_runtime_sample_leaves_memory_tables_to_the_rule(
    target: MySQLTarget, mariadb_sandbox: MariaDBSandboxInfo
) -> None:
    """A runtime sample neither carries memory_tables.* nor scans information_schema.TABLES (slow on a server
    with many tables, and only the max_heap_table_size rule needs it); ``rule_gauges`` reads it on demand.
    What the target's own connection sent is read from the server's general query log."""
    with mariadb_sandbox.connect(timeout=10) as conn, conn.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.general_log, @@GLOBAL.log_output")
        was_on, was_output = cur.fetchone()
        cur.execute("CREATE DATABASE IF NOT EXISTS agx_heap")
        cur.execute("CREATE OR REPLACE TABLE agx_heap.m (id INT PRIMARY KEY) ENGINE=MEMORY")
        cur.execute("INSERT INTO agx_heap.m SELECT seq FROM agx_heap.seq_1_to_1000")
        try:
            thread = target._connect().thread_id()
            cur.execute("TRUNCATE TABLE mysql.general_log")
            cur.execute("SET GLOBAL log_output = 'TABLE', general_log = ON")
            state = target.runtime_state()
            sample = _statements_of(cur, thread)
            read = target.rule_gauges(["memory_tables.largest_bytes"])
            both = _statements_of(cur, thread)
        finally:
            cur.execute("SET GLOBAL general_log = %s, log_output = %s", (was_on, was_output))
            cur.execute("DROP DATABASE agx_heap")
    assert any("SHOW GLOBAL STATUS" in q for q in sample), sample  # the log saw the sample
    assert not [q for q in sample if "information_schema.TABLES" in q], sample
    assert not [n for n in state.gauges if n.startswith("memory_tables.")]
    assert [q for q in both[len(sample) :] if "information_schema.TABLES" in q], both
    assert read["memory_tables.count"] >= 1 and read["memory_tables.largest_bytes"] > 0, read
    assert target.rule_gauges(["global_status.Threads_connected"]) == {}


def test_dsn_and_size_parsing() -> None:
    kw = parse_mysql_dsn("mysql://app:p%40ss@db.example:3307/shop?unix_socket=/run/mysqld/mysqld.sock")
    assert kw == {
        "host": "db.example",
        "port": 3307,
        "user": "app",
        "password": "p@ss",
        "database": "shop",
        "unix_socket": "/run/mysqld/mysqld.sock",
    }
    with pytest.raises(ValueError, match="target.dsn = 'postgresql://x'"):
        parse_mysql_dsn("postgresql://x")
    assert parse_size("512M") == 512 * MiB and parse_size("4G") == 4096 * MiB and parse_size(7) == 7
    with pytest.raises(ValueError, match="'12X'"):
        parse_size("12X")


def test_mysql8_catalog_merges_server_rows_with_data_file() -> None:
    def row(name: str, lo: str, hi: str, source: str = "COMPILED") -> dict[str, str]:
        return {"VARIABLE_NAME": name, "MIN_VALUE": lo, "MAX_VALUE": hi, "VARIABLE_SOURCE": source}

    info_rows = [
        row("innodb_buffer_pool_size", "5242880", "9223372036854775807"),
        row("innodb_log_file_size", "4194304", "18446744073709551615", "PERSISTED"),
        row("innodb_flush_method", "0", "0"),
        row("datadir", "0", "0"),
        row("mysqlx_port", "1", "65535"),
        row("some_new_variable", "0", "10"),
        row("pseudo_thread_id", "0", "1"),
    ]
    values = {
        "innodb_buffer_pool_size": "134217728",
        "innodb_log_file_size": "50331648",
        "innodb_flush_method": "fsync",
        "datadir": "/var/lib/mysql/",
        "mysqlx_port": "33060",
        "some_new_variable": "3",
    }
    cat = mysql8_catalog(info_rows, values, "8.0.29")
    bp = cat.knobs["innodb_buffer_pool_size"]
    assert bp.apply == ApplyMode.dynamic and bp.unit == "B" and bp.min_value == 5242880
    assert "MySQL 8.0 manual" in bp.source
    assert cat.knobs["innodb_log_file_size"].apply == ApplyMode.restart
    fm = cat.knobs["innodb_flush_method"]
    assert fm.apply == ApplyMode.restart and fm.vartype == "enum" and fm.min_value is None
    assert "file location" in cat.excluded["datadir"]
    assert "X Protocol" in cat.excluded["mysqlx_port"]
    assert "not described in catalogs/mysql-8.0.toml" in cat.excluded["some_new_variable"]
    assert "pseudo_thread_id" not in cat.knobs and "pseudo_thread_id" not in cat.excluded
    # 8.0.29 predates innodb_redo_log_capacity (8.0.30)
    assert "innodb_redo_log_capacity" in cat.unsupported


def test_data_files_load_with_reason_and_source() -> None:
    data = load_data()
    assert data.is_bytes("innodb_buffer_pool_size") and not data.is_bytes("thread_cache_size")
    assert data.is_gauge("Threads_running") and not data.is_gauge("Innodb_buffer_pool_reads")
    assert data.aliases["transaction_isolation"][0] == "tx_isolation"
    for name, facts in data.mysql8_knobs.items():
        assert facts["source"].startswith("MySQL 8.0 manual"), name


def test_restart_that_fails_raises_apply_error_with_log_and_is_recoverable(
    target: MySQLTarget, mariadb_sandbox: MariaDBSandboxInfo
) -> None:
    snap = target.snapshot(["innodb_flush_method", "innodb_io_capacity"], label="safe")
    bad = change("innodb_flush_method", "no_such_method", ApplyMode.restart)
    with pytest.raises(ApplyError, match="restart after writing") as err:
        target.apply([bad], ApplyMode.restart)
    assert any("innodb_flush_method" in line or "no_such_method" in line for line in err.value.logs)
    assert not target.available()
    target.restore(snap)
    assert target.current_values(list(snap.values)) == snap.values


def test_the_mysql8_key_cache_in_use_is_counted_in_its_own_block_size() -> None:
    """key_cache_block_size is not in catalogs/mysql-8.0.toml, so the MySQL 8 catalog had neither its value nor a
    fact of it: the trade move (``planner.trade``) counted Key_blocks_used in 1024-B blocks whatever the server's,
    and on a server with 4096-B blocks gave a 128 MiB key cache holding 78 MiB down to 40 MiB. The catalog now keeps
    the global value of every variable that is not a knob, as the MariaDB one does."""
    from agenticdb.models import Hardware, Layer, RuntimeProfile, StateDelta
    from agenticdb.models.planning import Fingerprint, PlanningContext
    from agenticdb.planner.trade import unused_cache_bytes

    rows = [
        {"VARIABLE_NAME": n, "MIN_VALUE": "0", "MAX_VALUE": "0", "VARIABLE_SOURCE": "COMPILED"}
        for n in ("innodb_buffer_pool_size", "key_buffer_size", "key_cache_block_size", "version")
    ]
    values = {
        "innodb_buffer_pool_size": "134217728",
        "key_buffer_size": "134217728",
        "key_cache_block_size": "4096",
        "version": "8.0.36",
    }
    cat = mysql8_catalog(rows, values, "8.0.36")
    assert "key_cache_block_size" not in cat.knobs and cat.facts["key_cache_block_size"] == 4096.0
    assert cat.facts["version"] == "8.0.36" and "key_buffer_size" not in cat.facts
    current = {k: v for k, v in values.items() if k in cat.knobs}
    hw = Hardware(cpu_count=2, memory_bytes=512 * MiB, memory_limit_bytes=512 * MiB, disk_free_bytes=10 * 1024 * MiB)
    in_use = StateDelta(gauges={"global_status.Key_blocks_used": 20000.0})  # × 4096 B = 78 MiB
    ctx = PlanningContext(
        profile=RuntimeProfile(
            target="mysql", dbms_version="8.0.36", hardware=hw, current_config=current, baseline_state=in_use
        ),
        fingerprint=Fingerprint(
            dbms="mysql", version_major="8", benchmark="sysbench", workload_class="oltp", read_fraction=0.7
        ),
        catalog=cat,
        stage=Layer.dbms,
        current_config=current,
    )
    freed, given = unused_cache_bytes(ctx, "mysql", "innodb_buffer_pool_size", current)
    assert (freed, given) == (0.0, []), given  # twice 78 MiB in use is more than the cache holds: nothing to give
