"""Every shipped rule file loads, and every parameter a rule names exists in the real catalog of the
versions it claims (STYLE.md: pg_activity once shipped a path to a file that did not exist).

PostgreSQL rules are checked against pg_settings of the private PostgreSQL 15 (``pg_sandbox``), MariaDB
rules against information_schema.SYSTEM_VARIABLES of the private MariaDB 10.11 (``mariadb_sandbox``),
Linux rules against this kernel's /proc/sys and /sys/block/<dev>/queue, and MySQL-8-only names against
catalogs/mysql-8.0.toml (names that file does not describe are skipped with the reason).
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from agenticdb.models import Catalog
from agenticdb.resources import data_dir
from agenticdb.targets.mysql import MySQLTarget
from agenticdb.targets.postgres import PostgresTarget
from agenticdb.validation.rules import (
    RULE_FILES,
    RuleFileError,
    RuleSet,
    Versioned,
    load_ruleset,
    load_ruleset_file,
    split_flavor,
)

RULE_DIR = data_dir("validators")


def named(rules: RuleSet) -> list[tuple[Versioned | None, str]]:
    """(rule or None for the version-less budgets, parameter name) for every name in a rule set."""
    out: list[tuple[Versioned | None, str]] = []
    for r in (*rules.protected, *rules.dangerous, *rules.durability, *rules.cpu_limit):
        out.append((r, r.parameter))  # type: ignore[attr-defined]
    for c in rules.conflict:
        out.extend((c, p) for p in c.params())
    if rules.memory_budget:
        out.extend((None, p) for p in rules.memory_budget.params())
    if rules.disk_budget:
        out.extend((None, p) for p in rules.disk_budget.parameters)
    return out


def names_of(catalog: Catalog) -> set[str]:
    return {n.lower() for n in (*catalog.knobs, *catalog.excluded)}


@pytest.fixture(scope="module")
def pg_catalog(pg_sandbox) -> Iterator[Catalog]:  # type: ignore[no-untyped-def]
    target = PostgresTarget.from_config(pg_sandbox.target_config())
    try:
        yield target.catalog()
    finally:
        target.close()


@pytest.fixture(scope="module")
def mariadb_catalog(mariadb_sandbox) -> Iterator[Catalog]:  # type: ignore[no-untyped-def]
    target = MySQLTarget.from_config(mariadb_sandbox.target_config())
    try:
        yield target.catalog()
    finally:
        target.close()


def test_every_rule_file_loads_and_every_family_has_one() -> None:
    files = sorted(p.name for p in RULE_DIR.glob("*.toml"))
    assert files == sorted(RULE_FILES.values())
    for family, name in RULE_FILES.items():
        rules = load_ruleset_file(RULE_DIR / name)
        assert rules.family == family
        for r in (*rules.protected, *rules.dangerous, *rules.durability, *rules.conflict, *rules.cpu_limit):
            assert r.reason.strip() and r.source.strip(), r.id
            for v in r.versions:
                split_flavor(v)
    assert load_ruleset("postgresql") is load_ruleset("postgresql")  # cached


def test_required_conflicts_are_present() -> None:
    ids = {r.id for f in RULE_FILES for r in load_ruleset(f).conflict}
    assert {
        "pg.wal_level_minimal",
        "pg.max_wal_senders_lt_connections",
        "pg.parallel_workers_le_worker_processes",
        "pg.per_gather_le_parallel_workers",
        "pg.maintenance_workers_le_parallel_workers",
        "pg.min_wal_le_max_wal",
        "mysql.rc_statement_binlog",
        "linux.dirty_ratio_xor_bytes",
        "linux.dirty_background_ratio_xor_bytes",
        "linux.dirty_background_lt_dirty",
    } <= ids


def test_bad_rule_file_is_rejected_naming_file_and_entry(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(
        'family = "postgresql"\n[[conflict]]\nid = "x"\nreason = "r"\nsource = "s"\n'
        'versions = [">=10"]\nwhen = { wal_level = "minimal" }\n'
    )
    with pytest.raises(RuleFileError) as info:
        load_ruleset_file(bad)
    assert "bad.toml" in str(info.value) and "conflict" in str(info.value)
    bad.write_text(
        'family = "postgresql"\n[[durability]]\nid = "d"\nparameter = "fsync"\nreason = "r"\n'
        'source = "s"\nversions = ["not a version"]\nunsafe = ["off"]\n'
    )
    with pytest.raises(RuleFileError, match="not a version"):
        load_ruleset_file(bad)


def test_postgresql_rule_names_exist_in_real_pg_settings(pg_catalog: Catalog) -> None:
    rules = load_ruleset("postgresql")
    real = names_of(pg_catalog)
    checked, missing = 0, []
    for rule, name in named(rules):
        if rule is not None and not rule.applies("postgresql", pg_catalog.version):
            continue
        checked += 1
        if name.lower() not in real:
            missing.append((rule.id if rule else "budget", name))
    assert checked > 50
    assert missing == [], f"rule parameters absent from PostgreSQL {pg_catalog.version}: {missing}"


def test_mariadb_rule_names_exist_in_real_system_variables(mariadb_catalog: Catalog) -> None:
    rules = load_ruleset("mysql")
    real = names_of(mariadb_catalog)
    checked, missing = 0, []
    for rule, name in named(rules):
        if rule is None:
            # budgets span both flavours: a term may exist on one only (innodb_redo_log_capacity is MySQL)
            continue
        if not rule.applies("mariadb", mariadb_catalog.version):
            continue
        checked += 1
        if name.lower() not in real:
            missing.append((rule.id, name))
    assert checked > 50
    assert missing == [], f"rule parameters absent from MariaDB {mariadb_catalog.version}: {missing}"
    budget_terms = [p for p in rules.memory_budget.params() if p.lower() in real] if rules.memory_budget else []
    assert len(budget_terms) >= 10


def _mysql8_names() -> set[str]:
    data = tomllib.loads((data_dir("catalogs") / "mysql-8.0.toml").read_text())
    names = set(data.get("knobs", {}))
    for entry in data.get("name", []) + data.get("exclude", []):
        if isinstance(entry, dict) and "name" in entry:
            names.add(entry["name"])
    return {n.lower() for n in names}


def _mysql_only() -> list[tuple[str, str]]:
    rules = load_ruleset("mysql")
    out = []
    for rule, name in named(rules):
        if rule is None:
            continue
        claims = [split_flavor(v)[0] for v in rule.versions]
        if "mysql" in claims and "mariadb" not in claims and rule.applies("mysql", "8.0.40"):
            out.append((rule.id, name))
    return out


@pytest.mark.parametrize(("rule_id", "name"), _mysql_only())
def test_mysql8_only_names_against_the_mysql8_catalog(rule_id: str, name: str) -> None:
    if name.lower() not in _mysql8_names():
        pytest.skip(
            f"{name} ({rule_id}): catalogs/mysql-8.0.toml describes only the tuned knobs and no MySQL 8 "
            "server runs here; claimed from the MySQL 8.0 manual"
        )
    assert name.lower() in _mysql8_names()


def test_linux_rule_names_exist_on_this_kernel() -> None:
    rules = load_ruleset("linux")
    devices = [p.name for p in Path("/sys/block").iterdir() if (p / "queue" / "scheduler").exists()]
    assert devices
    missing = []
    for rule, name in named(rules):
        if name.startswith("block."):
            _, dev, fname = name.split(".", 2)
            paths = [Path("/sys/block") / d / "queue" / fname for d in (devices if dev == "*" else [dev])]
            ok = any(p.exists() for p in paths)
        else:
            ok = (Path("/proc/sys") / name.replace(".", "/")).exists()
        if not ok:
            missing.append((rule.id if rule else "budget", name))
    assert missing == []
    for hint in rules.enum_hint:
        assert hint.parameter.startswith("block.") and hint.source
