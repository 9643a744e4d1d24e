"""PostgresTarget against the session's private PostgreSQL (``pg_sandbox``).

Tests that restart or break the server take a snapshot first and restore it in ``finally``, so the
session sandbox is left running with its original configuration.
"""

from __future__ import annotations

import os
import stat
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
    for name in ("data_directory", "port", "ssl", "log_min_messages", "primary_conninfo", "zero_damaged_pages",
                 "lc_messages", "DateStyle", "block_size", "archive_command", "shared_preload_libraries"):
        assert name in cat.excluded and name not in cat.knobs, name
        assert "source:" in cat.excluded[name]
    assert "initdb" in cat.excluded["block_size"]
    # Semantic and durability knobs stay in: the validator rejects them with a named rule.
    for name in ("fsync", "synchronous_commit", "full_page_writes", "default_transaction_isolation",
                 "search_path", "TimeZone", "max_wal_senders", "archive_mode"):
        assert name in cat.knobs, name
    assert pg.catalog() is cat  # cached


def test_exclusion_rules_file_is_complete() -> None:
    rules = ExclusionRules.load()
    entries = [*rules.name, *rules.prefix, *rules.category, *rules.context]
    assert len(entries) > 30
    for e in entries:
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
