"""Attempts to break the validator's safety promises, against real catalogs.

Each test here failed before its fix (see the report of the "break" helper): semantic knobs that were
accepted, a start-stopping combination that was not a conflict, a no-fsync flush method, a protected
knob reported as a spelling problem instead of as protected, a host-killing kernel value, and booleans
taken for kernel integers. Catalogs and current values come from the private PostgreSQL 15 and
MariaDB 10.11 of conftest and from this host's /proc/sys; hardware is the real host.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agenticdb.config.sections import PolicyConfig
from agenticdb.host.hardware import detect_hardware
from agenticdb.host.listen import listen_backlog
from agenticdb.models import ApplyMode, Bottleneck, Catalog, Change, Hardware, Layer, Proposal, Verdict
from agenticdb.sandbox.mariadb import MariaDBSandboxInfo
from agenticdb.sandbox.postgres import PostgresSandboxInfo
from agenticdb.targets.linux import LinuxTarget
from agenticdb.targets.mysql import MySQLTarget
from agenticdb.targets.postgres import PostgresTarget
from agenticdb.validation.validator import validate


@dataclass
class World:
    catalog: Catalog
    current: dict[str, str]
    hardware: Hardware


@pytest.fixture(scope="module")
def pg(pg_sandbox: PostgresSandboxInfo) -> Iterator[World]:
    t = PostgresTarget.from_config(pg_sandbox.target_config())
    try:
        yield World(t.catalog(), t.current_values(), detect_hardware(pg_sandbox.data_dir))
    finally:
        t.close()


@pytest.fixture(scope="module")
def maria(mariadb_sandbox: MariaDBSandboxInfo) -> Iterator[World]:
    t = MySQLTarget.from_config(mariadb_sandbox.target_config())
    try:
        yield World(t.catalog(), t.current_values(), detect_hardware(mariadb_sandbox.data_dir))
    finally:
        t.close()


@pytest.fixture(scope="module")
def linux() -> World:
    t = LinuxTarget(root=Path("/"), data_dir="/var/tmp")
    return World(t.catalog(), t.current_values(), detect_hardware("/var/tmp"))


def check(world: World, changes: dict[str, Any], stage: Layer = Layer.dbms, **policy: Any) -> Verdict:
    proposal = Proposal(
        bottleneck=Bottleneck.unknown,
        layer=stage,
        apply_requirement=ApplyMode.dynamic,
        changes=[Change(name=k, value=v) for k, v in changes.items()],
    )
    pol = PolicyConfig(**{"max_step_factor": 1000.0, **policy})
    return validate(proposal, world.catalog, world.current, world.hardware, pol, stage)


def rejected_by(verdict: Verdict, check_kind: str, name: str) -> str:
    """The message of the failed check ``check_kind`` for ``name``; asserts parameter, value and rule."""
    assert not verdict.ok, f"{name} accepted: {verdict.changes}"
    hits = [f for f in verdict.failed if f.check == check_kind and f.parameter.lower() == name.lower()]
    assert hits, f"{name}: expected a {check_kind} failure, got {verdict.feedback()}"
    msg = hits[0].message
    assert name.lower() in msg.lower() and (check_kind in msg or hits[0].rule_id in msg), msg
    return msg


# ------------------------------------------------------------------ semantics: PostgreSQL


@pytest.mark.parametrize(
    "name,value",
    [
        ("old_snapshot_threshold", "1min"),  # long queries fail with "snapshot too old"
        ("idle_session_timeout", "1s"),  # the server closes idle application sessions
        ("gin_fuzzy_search_limit", "10"),  # GIN searches return a random subset of rows
        ("xmloption", "document"),  # XML parsing/serialising of the application
        ("xmlbinary", "hex"),  # text of binary values in XML
        ("array_nulls", "off"),  # '{NULL}' becomes the string "NULL"
        ("quote_all_identifiers", "on"),  # SQL text the server generates
    ],
)
def test_pg_semantic_knobs_are_protected(pg: World, name: str, value: str) -> None:
    rejected_by(check(pg, {name: value}), "protected", name)


def test_pg_large_object_privileges_are_dangerous(pg: World) -> None:
    rejected_by(check(pg, {"lo_compat_privileges": "on"}), "dangerous", "lo_compat_privileges")


def test_pg_superuser_reserved_not_below_max_connections_is_a_server_check(pg: World) -> None:
    """PG 15 postmaster exits: 'superuser_reserved_connections (60) must be less than max_connections'."""
    v = check(pg, {"superuser_reserved_connections": 60})
    msg = rejected_by(v, "server_check", "superuser_reserved_connections")
    assert "max_connections" in msg
    assert check(pg, {"superuser_reserved_connections": 5}).ok


def test_pg_protected_knob_with_a_bad_spelling_is_reported_as_protected(pg: World) -> None:
    """A protected knob is protected whatever the value: 'serialisable' is not a spelling problem."""
    v = check(pg, {"default_transaction_isolation": "serialisable", "DateStyle": ""})
    rejected_by(v, "protected", "default_transaction_isolation")
    assert {f.check for f in v.failed} == {"protected"}, v.feedback()


# ------------------------------------------------------------------ MariaDB


@pytest.mark.parametrize(
    "name,value",
    [
        ("lc_time_names", "de_DE"),  # DATE_FORMAT()/DAYNAME() results
        ("default_week_format", "1"),  # WEEK() results
        ("sql_auto_is_null", "ON"),  # WHERE id IS NULL returns the last insert id
        ("updatable_views_with_limit", "NO"),  # UPDATE ... LIMIT on views fails
        ("sql_big_selects", "OFF"),  # big SELECTs fail
        ("sql_select_limit", "1"),  # every SELECT returns one row
        ("max_join_size", "1"),  # joins fail
        ("innodb_rollback_on_timeout", "ON"),  # a lock wait timeout rolls back the whole transaction
        ("sql_mode", ""),  # protected even when the value does not parse as the enum
    ],
)
def test_mariadb_semantic_knobs_are_protected(maria: World, name: str, value: str) -> None:
    rejected_by(check(maria, {name: value}), "protected", name)


@pytest.mark.parametrize("method", ["littlesync", "LITTLESYNC", "nosync"])
def test_mariadb_flush_methods_without_fsync_are_durability(maria: World, method: str) -> None:
    msg = rejected_by(check(maria, {"innodb_flush_method": method}), "durability", "innodb_flush_method")
    assert "relaxed" in msg
    rejected_by(
        check(maria, {"innodb_flush_method": method}, durability="relaxed"),
        "durability",
        "innodb_flush_method",
    )


@pytest.mark.parametrize("method", ["O_DIRECT_NO_FSYNC", "o_direct_no_fsync"])
def test_mariadb_flush_method_without_the_data_file_fsync_is_durability(maria: World, method: str) -> None:
    """O_DIRECT_NO_FSYNC skips the fsync() after O_DIRECT writes (MariaDB KB innodb_flush_method): refused
    by default, a journaled risk under durability = relaxed; O_DIRECT (which keeps the fsync) passes."""
    msg = rejected_by(check(maria, {"innodb_flush_method": method}), "durability", "innodb_flush_method")
    assert "mysql.flush_method_o_direct_no_fsync" in msg and "rejected under durability = " in msg, msg
    relaxed = check(maria, {"innodb_flush_method": method}, durability="relaxed")
    assert relaxed.ok, relaxed.feedback()
    assert any("innodb_flush_method" in r for r in relaxed.accepted_risks), relaxed.accepted_risks
    assert check(maria, {"innodb_flush_method": "O_DIRECT"}).ok


def test_mariadb_io_capacity_above_its_max_is_a_server_check(maria: World) -> None:
    """MariaDB 10.11 silently raises innodb_io_capacity_max or lowers innodb_io_capacity (warning 1210)."""
    v = check(maria, {"innodb_io_capacity": "1000", "innodb_io_capacity_max": "500"})
    msg = rejected_by(v, "server_check", "innodb_io_capacity")
    assert "innodb_io_capacity_max" in msg
    assert check(maria, {"innodb_io_capacity": "1000", "innodb_io_capacity_max": "2000"}).ok


# ------------------------------------------------------------------ Linux


def test_linux_min_free_kbytes_beyond_a_fraction_of_ram_is_refused(linux: World) -> None:
    """kernel Documentation/admin-guide/sysctl/vm.rst: too high a min_free_kbytes OOMs the host at once."""
    huge = int(linux.hardware.memory_limit_bytes * 0.75 / 1024)
    msg = rejected_by(check(linux, {"vm.min_free_kbytes": huge}, Layer.os), "hardware", "vm.min_free_kbytes")
    assert "GiB" in msg and "RAM" in msg
    assert check(linux, {"vm.min_free_kbytes": 131072}, Layer.os).ok


@pytest.mark.parametrize("value", [True, False])
def test_linux_boolean_is_not_an_integer(linux: World, value: bool) -> None:
    v = check(linux, {"vm.swappiness": value}, Layer.os)
    rejected_by(v, "type", "vm.swappiness")


def test_pg_huge_pages_on_needs_reserved_huge_pages(pg: World) -> None:
    """huge_pages=on without enough reserved huge pages stops PostgreSQL at start (recovery test:
    test_break_recovery.test_huge_pages_on_without_huge_pages_is_recovered)."""
    none = World(pg.catalog, pg.current, pg.hardware.model_copy(update={"huge_pages_bytes": 0}))
    msg = rejected_by(check(none, {"huge_pages": "on"}), "hardware", "huge_pages")
    assert "HugePages_Total" in msg and "refuse to start" in msg
    enough = World(pg.catalog, pg.current, pg.hardware.model_copy(update={"huge_pages_bytes": 2 * 1024**3}))
    assert check(enough, {"huge_pages": "on"}).ok
    assert check(none, {"huge_pages": "try"}).ok
    # the real host: what /proc/meminfo says decides
    assert pg.hardware.huge_pages_bytes is not None
    assert check(pg, {"huge_pages": "on"}).ok == (pg.hardware.huge_pages_bytes >= 128 * 1024**2)


# ------------------------------------------------------------------ Linux floors taken from the running server


def test_listen_backlog_is_read_from_the_kernel_for_a_process() -> None:
    """A socket listening with backlog 200 has an accept queue of min(200, somaxconn) (ss's Send-Q)."""
    somaxconn = int(Path("/proc/sys/net/core/somaxconn").read_text())
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(200)
        assert listen_backlog(os.getpid()) == min(200, somaxconn)
    assert listen_backlog(None) is None


def test_linux_somaxconn_not_below_the_database_servers_listen_backlog(
    linux: World, pg_sandbox: PostgresSandboxInfo
) -> None:
    """net.core.somaxconn caps the DBMS's listen() backlog at its next start (kernel net.rst somaxconn):
    0 is refused below the backlog the real PostgreSQL 15 listens with (2 x its backend slots); a value
    above it passes; without a known backlog somaxconn is not lowered at all."""
    t = PostgresTarget.from_config(pg_sandbox.target_config())
    try:
        hw = detect_hardware(pg_sandbox.data_dir, pid=t.server_pid())
    finally:
        t.close()
    assert hw.listen_backlog is not None and hw.listen_backlog >= 2 * 8, hw.listen_backlog
    world = World(linux.catalog, linux.current, hw)
    msg = rejected_by(check(world, {"net.core.somaxconn": 0}, Layer.os), "capacity", "net.core.somaxconn")
    assert "host.listen_backlog" in msg and "linux.somaxconn-db-backlog" in msg, msg
    current = int(linux.current["net.core.somaxconn"])
    if current > 2 * hw.listen_backlog:
        assert check(world, {"net.core.somaxconn": 2 * hw.listen_backlog}, Layer.os).ok
    unknown = World(linux.catalog, linux.current, hw.model_copy(update={"listen_backlog": None}))
    rejected_by(check(unknown, {"net.core.somaxconn": 0}, Layer.os), "capacity", "net.core.somaxconn")
    assert check(unknown, {"net.core.somaxconn": current * 2}, Layer.os).ok
