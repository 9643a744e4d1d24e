"""PostgresTarget against the session's private PostgreSQL (``pg_sandbox``).

Tests that restart or break the server take a snapshot first and restore it in ``finally``, so the
session sandbox is left running with its original configuration.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from agenticdb.models import ApplyMode, NormalizedChange
from agenticdb.sandbox.postgres import PostgresSandboxInfo
from agenticdb.targets.base import ApplyError, VerifyError
from agenticdb.targets.postgres import ExclusionRules, PostgresTarget, from_config


@pytest.fixture(scope="module")
def pg(pg_sandbox: PostgresSandboxInfo) -> Iterator[PostgresTarget]:
    target = from_config(pg_sandbox.target_config())
    yield target
    target.close()


@pytest.fixture()
def safe(pg: PostgresTarget) -> Iterator[PostgresTarget]:
    """The target, with postgresql.auto.conf and the running server put back after the test."""
    snap = pg.snapshot(["shared_buffers", "work_mem", "wal_level"], label="test-baseline")
    try:
        yield pg
    finally:
        pg.restore(snap)
        assert pg.available()
        assert pg.pending_restart() == []
        assert pg.current_values(list(snap.values)) == snap.values


def change(name: str, value: str, base: float | None, mode: ApplyMode, unit: str | None = None) -> NormalizedChange:
    return NormalizedChange(name=name, value=value, base_value=base, unit=unit, apply=mode)


# ---- catalog ---------------------------------------------------------------------------------------


def test_catalog_from_pg_settings(pg: PostgresTarget) -> None:
    cat = pg.catalog()
    assert cat.target == "postgresql"
    assert cat.version.startswith(f"{pg.major()}.")
    sb = cat.knobs["shared_buffers"]
    assert sb.apply == ApplyMode.restart and sb.unit == "8kB" and sb.vartype == "integer"
    assert sb.min_value == 16 and sb.max_value is not None and sb.max_value > 1e6
    wm = cat.knobs["work_mem"]
    assert wm.apply == ApplyMode.reload and wm.unit == "kB"
    assert cat.knobs["wal_level"].enum_values == ["minimal", "replica", "logical"]
    assert cat.knobs["random_page_cost"].vartype == "real"
    # Not tunables at all: excluded, each with a reason that cites its source.
    for name in (
        "data_directory",
        "port",
        "ssl",
        "log_min_messages",
        "primary_conninfo",
        "zero_damaged_pages",
        "lc_messages",
        "DateStyle",
        "block_size",
        "archive_command",
        "shared_preload_libraries",
    ):
        assert name in cat.excluded and name not in cat.knobs, name
        assert "source:" in cat.excluded[name]
    assert "initdb" in cat.excluded["block_size"]
    # Semantic and durability knobs stay in: the validator rejects them with a named rule.
    for name in (
        "fsync",
        "synchronous_commit",
        "full_page_writes",
        "default_transaction_isolation",
        "search_path",
        "TimeZone",
        "max_wal_senders",
        "archive_mode",
    ):
        assert name in cat.knobs, name
    assert pg.catalog() is cat  # cached


def test_exclusion_rules_file_is_complete() -> None:
    rules = ExclusionRules.load()
    assert len(rules.rule) > 30
    for e in rules.rule:
        assert e.reason.strip() and e.source.startswith("PostgreSQL"), e
    assert rules.reason_for("ssl_cert_file", "Connections and Authentication / SSL", "sighup")
    assert rules.reason_for("work_mem", "Resource Usage / Memory", "user") is None


def test_current_values_and_raw_settings(pg: PostgresTarget) -> None:
    vals = pg.current_values(["shared_buffers", "work_mem", "fsync", "timezone", "no_such_knob"])
    assert vals["shared_buffers"].endswith("MB") and vals["fsync"] == "on"
    assert "no_such_knob" not in vals and vals["timezone"]
    raw = pg.raw_settings(["shared_buffers", "work_mem"])
    assert raw["shared_buffers"][1] == "8kB"
    assert int(raw["shared_buffers"][0]) * 8 * 1024 == _bytes(vals["shared_buffers"])
    assert set(pg.current_values()) == set(pg.catalog().knobs)


def _bytes(pretty: str) -> int:
    for suffix, mult in (("kB", 1024), ("MB", 1024**2), ("GB", 1024**3), ("TB", 1024**4)):
        if pretty.endswith(suffix):
            return int(pretty[: -len(suffix)]) * mult
    return int(pretty)


# ---- apply / verify ----------------------------------------------------------------------------------


def test_apply_reload_and_verify(safe: PostgresTarget) -> None:
    restarted = safe.apply([change("work_mem", "6MB", 6144, ApplyMode.reload, "kB")], ApplyMode.reload)
    assert restarted is False
    assert safe.verify([change("work_mem", "6MB", 6144, ApplyMode.reload, "kB")]) == {"work_mem": "6MB"}
    assert "work_mem = '6MB'" in safe.auto_conf.read_text()
    with pytest.raises(VerifyError, match=r"work_mem: expected '8MB', effective '6MB'"):
        safe.verify([change("work_mem", "8MB", 8192, ApplyMode.reload, "kB")])


def test_apply_restart_and_verify(safe: PostgresTarget) -> None:
    before = safe.raw_settings(["shared_buffers"])["shared_buffers"][0]
    target_pages = 2 * int(before)
    sb = change("shared_buffers", f"{target_pages * 8 // 1024}MB", target_pages, ApplyMode.restart, "8kB")
    assert safe.apply([sb], ApplyMode.restart) is True
    assert safe.verify([sb]) == {"shared_buffers": sb.value}
    assert safe.runtime_state().gauges["settings.shared_buffers_bytes"] == target_pages * 8192


def test_reload_mode_for_postmaster_knob_is_refused(safe: PostgresTarget) -> None:
    before = safe.auto_conf.read_bytes()
    sb = change("shared_buffers", "256MB", 32768, ApplyMode.reload, "8kB")
    with pytest.raises(ApplyError, match=r"shared_buffers.*postmaster.*restart"):
        safe.apply([sb, change("work_mem", "5MB", 5120, ApplyMode.reload, "kB")], ApplyMode.reload)
    assert safe.auto_conf.read_bytes() == before
    assert safe.pending_restart() == []


def test_failing_alter_leaves_auto_conf_identical(safe: PostgresTarget) -> None:
    path = safe.auto_conf
    before, st = path.read_bytes(), path.stat()
    bad = [
        change("work_mem", "7MB", 7168, ApplyMode.reload, "kB"),
        change("random_page_cost", "-3", -3.0, ApplyMode.reload),
    ]
    with pytest.raises(ApplyError, match=r"random_page_cost = '-3'.*outside the valid range") as err:
        safe.apply(bad, ApplyMode.reload)
    assert "ALTER SYSTEM SET random_page_cost" in str(err.value)
    after = path.stat()
    assert path.read_bytes() == before
    assert (after.st_uid, after.st_gid, stat.S_IMODE(after.st_mode)) == (st.st_uid, st.st_gid, 0o600)
    assert safe.current_values(["work_mem"])["work_mem"] != "7MB"


def test_unknown_parameter_is_refused(safe: PostgresTarget) -> None:
    with pytest.raises(ApplyError, match="no_such_param"):
        safe.apply([change("no_such_param", "1", 1, ApplyMode.reload)], ApplyMode.reload)


# ---- failure and restore -----------------------------------------------------------------------------


def test_wal_level_minimal_restart_failure_then_restore(safe: PostgresTarget) -> None:
    snap = safe.snapshot(["wal_level", "max_wal_senders"], label="before-wal-level")
    assert snap.values["wal_level"] == "replica" and snap.values["max_wal_senders"] != "0"
    with pytest.raises(ApplyError, match="restart failed") as err:
        safe.apply([change("wal_level", "minimal", None, ApplyMode.restart)], ApplyMode.restart)
    assert any("FATAL" in line and "wal_level" in line for line in err.value.logs), err.value.logs
    assert not safe.available()
    safe.restore(snap)
    assert safe.available()
    assert safe.current_values(["wal_level"]) == {"wal_level": "replica"}
    assert safe.auto_conf.read_text() == snap.files[str(safe.auto_conf)]


def test_restore_while_server_stopped(safe: PostgresTarget, pg_sandbox: PostgresSandboxInfo) -> None:
    snap = safe.snapshot(["work_mem"], label="before-stop")
    safe.apply([change("work_mem", "9MB", 9216, ApplyMode.reload, "kB")], ApplyMode.reload)
    assert safe.service is not None
    safe.service.stop()
    assert not safe.available()
    # A target built while the server is down still knows where the files are (service data_dir).
    cold = from_config(pg_sandbox.target_config())
    cold.restore(snap)
    assert cold.available()
    assert cold.current_values(["work_mem"]) == snap.values
    assert "9MB" not in cold.auto_conf.read_text()


def test_restore_restarts_for_postmaster_knob(safe: PostgresTarget) -> None:
    snap = safe.snapshot(["shared_buffers"], label="before-sb")
    pid_before = _postmaster_pid(safe)
    sb = change("shared_buffers", "64MB", 8192, ApplyMode.restart, "8kB")
    safe.apply([sb], ApplyMode.restart)
    assert safe.current_values(["shared_buffers"]) == {"shared_buffers": "64MB"}
    safe.restore(snap)
    assert safe.current_values(["shared_buffers"]) == snap.values
    assert safe.pending_restart() == []
    assert _postmaster_pid(safe) != pid_before


def _postmaster_pid(t: PostgresTarget) -> int:
    return int((Path(t.data_dir) / "postmaster.pid").read_text().split()[0])


def test_restore_deletes_file_absent_in_snapshot(safe: PostgresTarget) -> None:
    from agenticdb.models import Snapshot

    extra = Path(safe.data_dir) / "agenticdb-test.conf"
    extra.write_text("# scratch\n")
    safe.restore(Snapshot(target="postgresql", files={str(extra): None}))
    assert not extra.exists()
    assert safe.available()


# ---- runtime state -------------------------------------------------------------------------------

DOCUMENTED_COUNTERS = (
    [
        f"pg_stat_database.{c}"
        for c in (
            "xact_commit",
            "xact_rollback",
            "blks_read",
            "blks_hit",
            "tup_returned",
            "tup_fetched",
            "tup_inserted",
            "tup_updated",
            "tup_deleted",
            "temp_files",
            "temp_bytes",
            "deadlocks",
            "blk_read_time",
            "blk_write_time",
        )
    ]
    + [
        f"pg_stat_bgwriter.{c}"
        for c in (
            "checkpoints_timed",
            "checkpoints_req",
            "checkpoint_write_time",
            "checkpoint_sync_time",
            "buffers_checkpoint",
            "buffers_clean",
            "maxwritten_clean",
            "buffers_backend",
            "buffers_backend_fsync",
            "buffers_alloc",
        )
    ]
    + [
        f"pg_stat_wal.{c}"
        for c in (
            "wal_records",
            "wal_fpi",
            "wal_bytes",
            "wal_buffers_full",
            "wal_write",
            "wal_sync",
            "wal_write_time",
            "wal_sync_time",
        )
    ]
)
DOCUMENTED_GAUGES = [
    "pg_stat_activity.total",
    "pg_stat_activity.active",
    "pg_stat_activity.idle_in_transaction",
    "settings.max_connections",
    "pg_locks.waiting",
    "pg_locks.total",
    "pg_database.size_bytes",
    "settings.shared_buffers_bytes",
    "settings.shared_memory_size_bytes",
    "pg_prepared_xacts.total",
    "pg_replication_slots.total",
    "pg_replication_slots.logical",
    "pg_stat_replication.total",
]


def test_runtime_state_keys_and_counters_rise(pg: PostgresTarget) -> None:
    before = pg.runtime_state()
    assert set(DOCUMENTED_COUNTERS) <= set(before.counters)
    assert set(DOCUMENTED_GAUGES) == set(before.gauges)
    assert before.gauges["settings.max_connections"] == 50
    assert before.gauges["pg_database.size_bytes"] > 1e6
    with psycopg.connect(pg.dsn, autocommit=True) as conn, psycopg.connect(pg.dsn) as idle:
        idle.execute("SELECT 1")  # leaves `idle` idle in transaction
        conn.execute("CREATE TEMP TABLE t AS SELECT g AS id FROM generate_series(1, 5000) g")
        conn.execute("UPDATE t SET id = id + 1")
        for _ in range(20):
            conn.execute("SELECT count(*) FROM pg_class").fetchone()
        # Backends flush their statistics at most once a second when idle (PG15 pgstat); ask for it now.
        conn.execute("SELECT pg_stat_force_next_flush()")
        conn.execute("SELECT 1")
        during = pg.runtime_state()
    assert during.gauges["pg_stat_activity.total"] >= 2
    assert during.gauges["pg_stat_activity.idle_in_transaction"] >= 1
    after = pg.runtime_state()
    for key in (
        "pg_stat_database.xact_commit",
        "pg_stat_database.tup_inserted",
        "pg_stat_database.tup_updated",
        "pg_stat_wal.wal_records",
        "pg_stat_wal.wal_bytes",
    ):
        assert after.counters[key] > before.counters[key], key
    assert all(":" in k and v > 0 for k, v in after.wait_events.items())


def test_available_and_log_tail(pg: PostgresTarget) -> None:
    assert pg.available()
    assert pg.log_tail(5) and len(pg.log_tail(5)) <= 5
    down = PostgresTarget("postgresql://postgres@127.0.0.1:1/postgres", None, data_dir=os.devnull)
    assert down.available() is False
    assert down.log_tail() == []


def test_verify_compares_bool_real_and_enum_spellings(safe: PostgresTarget) -> None:
    changes = [
        change("jit", "off", None, ApplyMode.reload),
        change("random_page_cost", "1.1", 1.1, ApplyMode.reload),
        change("wal_compression", "pglz", None, ApplyMode.reload),
    ]
    safe.apply(changes, ApplyMode.reload)
    spelled = [
        change("jit", "false", None, ApplyMode.reload),
        change("random_page_cost", "1.1000000001", 1.1000000001, ApplyMode.reload),
        change("wal_compression", "PGLZ", None, ApplyMode.reload),
    ]
    assert safe.verify(spelled) == {"jit": "off", "random_page_cost": "1.1", "wal_compression": "pglz"}
    with pytest.raises(VerifyError, match="random_page_cost: expected '1.2'"):
        safe.verify([change("random_page_cost", "1.2", 1.2, ApplyMode.reload)])


def test_restart_without_service_is_refused(pg: PostgresTarget) -> None:
    no_service = PostgresTarget(pg.dsn, None)
    before = no_service.auto_conf.read_bytes()
    with pytest.raises(ApplyError, match="no service controller"):
        no_service.apply([change("shared_buffers", "64MB", 8192, ApplyMode.restart, "8kB")], ApplyMode.restart)
    assert no_service.auto_conf.read_bytes() == before
    assert no_service.data_dir == pg.data_dir  # discovered with SHOW data_directory


def test_from_config_rejects_other_kinds(pg_sandbox: PostgresSandboxInfo) -> None:
    cfg = pg_sandbox.target_config().model_copy(update={"kind": "mariadb"})
    with pytest.raises(ValueError, match="target.kind = 'mariadb'"):
        from_config(cfg)


def test_runtime_state_sees_lock_wait(pg: PostgresTarget) -> None:
    import threading

    with psycopg.connect(pg.dsn, autocommit=True) as admin:
        admin.execute("CREATE TABLE IF NOT EXISTS agenticdb_lock_probe (id int)")
    try:
        with psycopg.connect(pg.dsn) as holder:
            holder.execute("LOCK TABLE agenticdb_lock_probe IN ACCESS EXCLUSIVE MODE")

            def blocked() -> None:
                with psycopg.connect(pg.dsn, autocommit=True) as waiter:
                    waiter.execute("SET statement_timeout = '10s'")
                    waiter.execute("SELECT count(*) FROM agenticdb_lock_probe")

            thread = threading.Thread(target=blocked)
            thread.start()
            # poll by time, not by count: on a loaded 2-core host the waiter's connection took longer than 50
            # samples (a failure seen once beside other suites); both readings must come from one sample
            deadline = time.monotonic() + 8.0
            state = pg.runtime_state()
            while time.monotonic() < deadline:
                if state.gauges["pg_locks.waiting"] >= 1 and state.wait_events.get("Lock:relation", 0) >= 1:
                    break
                time.sleep(0.05)
                state = pg.runtime_state()
            holder.rollback()
            thread.join(timeout=15)
        assert state.gauges["pg_locks.waiting"] >= 1
        assert state.wait_events.get("Lock:relation", 0) >= 1, state.wait_events
        assert state.gauges["pg_stat_activity.active"] >= 1
    finally:
        with psycopg.connect(pg.dsn, autocommit=True) as admin:
            admin.execute("DROP TABLE IF EXISTS agenticdb_lock_probe")
