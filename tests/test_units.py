"""Unit parsing and formatting (pure): PostgreSQL, MySQL/MariaDB and Linux spellings, with round-trips."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agenticdb.units as units
from agenticdb.models import ApplyMode, KnobSpec
from agenticdb.units import (
    UnitError,
    format_pg,
    linux_parse,
    mysql_parse,
    parse_mysql_value,
    parse_pg_value,
    pg_parse,
)


def pg(name: str, vartype: str = "integer", unit: str | None = None, **kw: object) -> KnobSpec:
    return KnobSpec(name=name, vartype=vartype, unit=unit, apply=ApplyMode.dynamic, **kw)  # type: ignore[arg-type]


SHARED_BUFFERS = pg("shared_buffers", unit="8kB", min_value=16, max_value=1073741823)
WORK_MEM = pg("work_mem", unit="kB")
MAX_WAL = pg("max_wal_size", unit="MB")
CHECKPOINT_TIMEOUT = pg("checkpoint_timeout", unit="s")
COST_DELAY = pg("vacuum_cost_delay", vartype="real", unit="ms")
MAX_CONN = pg("max_connections")
RANDOM_PAGE_COST = pg("random_page_cost", vartype="real")
FSYNC = pg("fsync", vartype="bool")
SYNC_COMMIT = pg(
    "synchronous_commit", vartype="enum", enum_values=["local", "remote_write", "remote_apply", "on", "off"]
)


@pytest.mark.parametrize(
    ("spec", "raw", "canonical", "base"),
    [
        # the pg-unit-spelling case, exactly
        (SHARED_BUFFERS, "512M", "512MB", 65536.0),
        (WORK_MEM, "655KB", "655kB", 655.0),
        (pg("effective_cache_size", unit="8kB"), "4 gb", "4GB", 524288.0),
        # other spellings of the same kind
        (SHARED_BUFFERS, "1g", "1GB", 131072.0),
        (SHARED_BUFFERS, 200, "1600kB", 200.0),
        (SHARED_BUFFERS, "524288kB", "512MB", 65536.0),
        (WORK_MEM, "1.5MB", "1536kB", 1536.0),
        (WORK_MEM, "4096", "4MB", 4096.0),
        (MAX_WAL, "2TB", "2TB", 2097152.0),
        (MAX_WAL, "1024", "1GB", 1024.0),
        (CHECKPOINT_TIMEOUT, "10s", "10s", 10.0),
        (CHECKPOINT_TIMEOUT, "1min", "1min", 60.0),
        (CHECKPOINT_TIMEOUT, "90s", "90s", 90.0),
        (CHECKPOINT_TIMEOUT, "1H", "1h", 3600.0),
        (CHECKPOINT_TIMEOUT, "1d", "1d", 86400.0),
        (COST_DELAY, "500us", "500us", 0.5),
        (COST_DELAY, 2, "2ms", 2.0),
        (MAX_CONN, "200", "200", 200.0),
        (MAX_CONN, -1, "-1", -1.0),
        (RANDOM_PAGE_COST, "1.1", "1.1", 1.1),
        (FSYNC, True, "on", None),
        (FSYNC, "off", "off", None),
        (FSYNC, "No", "off", None),
        (FSYNC, 1, "on", None),
        (SYNC_COMMIT, "OFF", "off", None),
        (SYNC_COMMIT, "Remote_Apply", "remote_apply", None),
        (SYNC_COMMIT, False, "off", None),
        (SYNC_COMMIT, "true", "on", None),
    ],
)
def test_pg_spellings(spec: KnobSpec, raw: object, canonical: str, base: float | None) -> None:
    assert parse_pg_value(spec, raw) == (canonical, base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("spec", "raw", "check", "words"),
    [
        (MAX_WAL, "28PB", "unit", ["max_wal_size", "28PB", "PB", "kB, MB, GB or TB"]),
        (WORK_MEM, "64 bananas", "unit", ["work_mem", "bananas"]),
        (WORK_MEM, "10s", "unit", ["work_mem", "'s'", "memory unit"]),
        (CHECKPOINT_TIMEOUT, "5MB", "unit", ["checkpoint_timeout", "MB", "us, ms, s, min, h or d"]),
        (CHECKPOINT_TIMEOUT, "5m", "unit", ["checkpoint_timeout", "'m'"]),
        (MAX_CONN, "200MB", "unit", ["max_connections", "no unit"]),
        (MAX_CONN, "lots", "type", ["max_connections", "lots"]),
        (MAX_CONN, True, "type", ["max_connections", "boolean"]),
        (FSYNC, "maybe", "type", ["fsync", "maybe", "on/off"]),
        (SYNC_COMMIT, "sometimes", "enum", ["synchronous_commit", "sometimes", "remote_apply"]),
        (WORK_MEM, float("nan"), "type", ["work_mem"]),
    ],
)
def test_pg_rejects_with_parameter_value_and_rule(spec: KnobSpec, raw: object, check: str, words: list[str]) -> None:
    with pytest.raises(UnitError) as info:
        parse_pg_value(spec, raw)  # type: ignore[arg-type]
    assert info.value.check == check
    assert isinstance(info.value, ValueError)
    for w in words:
        assert w in str(info.value)


def test_pg_integer_rounds_like_the_server_and_warns() -> None:
    p = pg_parse(SHARED_BUFFERS, "1000kB")  # 125 pages exactly
    assert (p.canonical, p.base_value, p.warnings) == ("1000kB", 125.0, ())
    p = pg_parse(SHARED_BUFFERS, "1001kB")  # 125.125 pages → 125
    assert p.base_value == 125.0 and p.canonical == "1000kB" and "rounded" in p.warnings[0]


@given(st.integers(min_value=1, max_value=2**31 - 1), st.sampled_from(["8kB", "kB", "MB", "B", "s", "ms", "min"]))
def test_pg_round_trip(base: int, unit: str) -> None:
    """format → parse gives the same base value, and the spelling is a fixed point."""
    spec = pg("x", unit=unit)
    text = format_pg(spec, base)
    canonical, parsed = parse_pg_value(spec, text)
    assert parsed == base
    assert canonical == text
    # the same value spelled in lower case / with a space parses the same (except the ambiguous time "m")
    if not text.endswith("min"):
        assert parse_pg_value(spec, re.sub(r"^(\d+)", r"\1 ", text).lower())[1] == base


@given(st.integers(min_value=1, max_value=10**9))
def test_pg_real_time_round_trip(micro: int) -> None:
    spec = COST_DELAY
    text = format_pg(spec, micro / 1000)
    assert parse_pg_value(spec, text)[1] == pytest.approx(micro / 1000)


# ---------------------------------------------------------------- MySQL / MariaDB

POOL = KnobSpec(
    name="innodb_buffer_pool_size", vartype="integer", unit="B", apply=ApplyMode.dynamic, block_size=1048576
)
SORT = KnobSpec(name="sort_buffer_size", vartype="integer", unit="B", apply=ApplyMode.dynamic)
DOUBLEWRITE = KnobSpec(name="innodb_doublewrite", vartype="bool", apply=ApplyMode.restart)
FLUSH = KnobSpec(
    name="innodb_flush_method",
    vartype="enum",
    apply=ApplyMode.restart,
    enum_values=["fsync", "O_DSYNC", "littlesync", "nosync", "O_DIRECT", "O_DIRECT_NO_FSYNC"],
)


@pytest.mark.parametrize(
    ("spec", "raw", "canonical"),
    [
        (POOL, "2G", "2147483648"),
        (POOL, "512m", "536870912"),
        (POOL, 134217728, "134217728"),
        (SORT, "256K", "262144"),
        (SORT, "1t", str(1024**4)),
        (DOUBLEWRITE, "on", "ON"),
        (DOUBLEWRITE, 0, "OFF"),
        (DOUBLEWRITE, False, "OFF"),
        (FLUSH, "o_direct", "O_DIRECT"),
    ],
)
def test_mysql_spellings(spec: KnobSpec, raw: object, canonical: str) -> None:
    c, b = parse_mysql_value(spec, raw)  # type: ignore[arg-type]
    assert c == canonical
    assert b == (float(canonical) if spec.vartype == "integer" else None)


def test_mysql_block_size_rounds_down_with_a_warning_not_an_error() -> None:
    p = mysql_parse(POOL, str(128 * 1024**2 + 1000))
    assert p.base_value == 128 * 1024**2
    assert "block size 1048576" in p.warnings[0] and "innodb_buffer_pool_size" in p.warnings[0]


@pytest.mark.parametrize(
    ("spec", "raw", "check"),
    [
        (POOL, "2GB", "unit"),
        (POOL, "1.5G", "type"),
        (DOUBLEWRITE, "maybe", "type"),
        (FLUSH, "directio", "enum"),
    ],
)
def test_mysql_rejects(spec: KnobSpec, raw: str, check: str) -> None:
    with pytest.raises(UnitError) as info:
        parse_mysql_value(spec, raw)
    assert info.value.check == check and spec.name in str(info.value) and raw in str(info.value)


@given(st.integers(min_value=0, max_value=2**50), st.sampled_from(["", "K", "M", "G", "k", "m", "g"]))
def test_mysql_round_trip(n: int, suffix: str) -> None:
    mult = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[suffix.lower()]
    canonical, base = parse_mysql_value(SORT, f"{n}{suffix}")
    assert base == n * mult
    assert parse_mysql_value(SORT, canonical) == (canonical, base)


# ---------------------------------------------------------------- Linux

SCHED = KnobSpec(
    name="block.vda.scheduler",
    vartype="enum",
    apply=ApplyMode.dynamic,
    enum_values=["none", "mq-deadline", "kyber", "bfq"],
)
RATIO = KnobSpec(name="vm.dirty_ratio", vartype="integer", unit="%", apply=ApplyMode.dynamic)


def test_linux_values() -> None:
    assert linux_parse(RATIO, "20").canonical == "20"
    assert linux_parse(SCHED, "MQ-Deadline").canonical == "mq-deadline"
    with pytest.raises(UnitError) as info:
        linux_parse(SCHED, "noop")
    assert info.value.check == "enum" and "none, mq-deadline" in str(info.value)
    with pytest.raises(UnitError) as info:
        linux_parse(RATIO, "20%")
    assert info.value.check == "unit"


def test_parse_value_reads_exponent_notation() -> None:
    """pg_settings reports large reals as '1e+06' (random_page_cost = 1000000; scenario suite, issue 22):
    unparsed, the planner's trap rule never saw the value."""
    from agenticdb.units import parse_value

    spec = KnobSpec(name="random_page_cost", vartype="real", apply="reload", default="4")
    assert parse_value("1e+06", spec) == 1_000_000.0
    assert parse_value("2.5E-3", spec) == 0.0025
    assert parse_value("4", spec) == 4.0


def test_a_size_too_large_to_represent_is_a_range_error_not_an_overflow() -> None:
    """Found by the fuzz test: 2.19e304 for an 8kB-page knob overflowed to inf and crashed round()."""
    with pytest.raises(UnitError) as err:
        pg_parse(SHARED_BUFFERS, "2.1944496275174755e+304GB")
    assert err.value.check == "range" and "shared_buffers" in str(err.value)
    # a bare number in pages that overflows only when spelt in bytes: parsed, left to the range check
    assert pg_parse(SHARED_BUFFERS, 2.1944496275174755e304).base_value == 2.1944496275174755e304
    assert pg_parse(CHECKPOINT_TIMEOUT, 2.1944496275174755e304).base_value == 2.1944496275174755e304


def test_a_dbms_flavour_finds_its_value_dialect() -> None:
    """The playbook's family ("mariadb") reaches the units helpers from the search's range text and the
    trade move; it spells values as MySQL does (a KeyError 'mariadb' ended a MariaDB session twice)."""
    assert units.readable("mariadb", SORT, 1048576) == units.readable("mysql", SORT, 1048576)
    assert units.bytes_of("mariadb", POOL, 134217728) == 134217728
    with pytest.raises(ValueError, match="unknown dialect"):
        units.readable("oracle", SORT, 1.0)
