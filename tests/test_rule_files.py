"""Every shipped rule file loads, and every parameter a rule names exists in the real catalog of the
versions it claims (a rule that names a missing parameter would silently never apply).

PostgreSQL rules are checked against pg_settings of the private PostgreSQL 15 (``pg_sandbox``), MariaDB
rules against information_schema.SYSTEM_VARIABLES of the private MariaDB 10.11 (``mariadb_sandbox``),
Linux rules against this kernel's /proc/sys and /sys/block/<dev>/queue, and MySQL-8-only names against
catalogs/mysql-8.0.toml (names that file does not describe are skipped with the reason).
"""

from __future__ import annotations

import fnmatch
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from agenticdb.models import Catalog, Hardware
from agenticdb.resources import data_dir
from agenticdb.targets.linux import LinuxTarget
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
    """(rule or None for the version-less budgets, parameter name or pattern) for every name in a rule
    set, host facts (``host.*``, Hardware fields) and runtime gauges (``observed.*``) left out: they are
    checked against the model and the real runtime state."""
    out: list[tuple[Versioned | None, str]] = []
    for r in (
        *rules.protected,
        *rules.dangerous,
        *rules.durability,
        *rules.cpu_limit,
        *rules.no_effect,
        *rules.harmful,
        *rules.capacity,
    ):
        out.append((r, r.parameter))  # type: ignore[attr-defined]
    for r in (*rules.no_effect, *rules.harmful):
        out.extend((r, p) for c in (*getattr(r, "require", []), *getattr(r, "when", [])) for p in c.params())
    for cap in rules.capacity:
        out.extend((cap, p) for p in (*cap.reserve, *([cap.observed_in] if cap.observed_in else [])))
    for c in (*rules.conflict, *rules.server_check):
        out.extend((c, p) for p in c.params())
    if rules.memory_budget:
        out.extend((None, p) for p in rules.memory_budget.judged())
    if rules.disk_budget:
        out.extend((None, p) for p in rules.disk_budget.parameters)
    return [(r, n) for r, n in out if not n.startswith(("host.", "observed."))]


def names_of(catalog: Catalog) -> set[str]:
    return {n.lower() for n in (*catalog.knobs, *catalog.excluded, *catalog.facts)}


def exists(name: str, real: set[str]) -> bool:
    """``name`` is in ``real``, or a pattern (``parallel_*_cost``) that matches at least one name there."""
    if any(c in name for c in "*?["):
        return any(fnmatch.fnmatchcase(n, name.lower()) for n in real)
    return name.lower() in real


def test_host_facts_named_by_rules_are_hardware_fields() -> None:
    fields = set(Hardware.model_fields)
    for family in RULE_FILES:
        rules = load_ruleset(family)
        facts = [p for r in rules.all_rules() for p in _all_params(r) if p.startswith("host.")]
        assert all(p[5:] in fields for p in facts), (family, facts)


def _all_params(rule: Versioned) -> list[str]:
    names = [getattr(rule, "parameter", "")]
    for attr in ("when", "require"):
        names += [p for c in getattr(rule, attr, []) for p in c.params()]
    names += list(getattr(rule, "observed", [])) + list(getattr(rule, "reserve", []))
    return [n for n in names if n]


def test_every_rule_of_the_new_kinds_has_reason_source_and_version() -> None:
    """server_check, no_effect, harmful and capacity rules are data with a source each (issue 17)."""
    counts = {"server_check": 0, "no_effect": 0, "harmful": 0, "capacity": 0}
    for family in RULE_FILES:
        rules = load_ruleset(family)
        for kind in counts:
            for r in getattr(rules, kind):
                assert r.reason.strip() and r.source.strip() and r.versions, r.id
                counts[kind] += 1
    assert all(n >= 3 for n in counts.values()), counts


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
        for r in rules.all_rules():
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
        if not exists(name, real):
            missing.append((rule.id if rule else "budget", name))
    assert checked > 50
    assert missing == [], f"rule parameters absent from PostgreSQL {pg_catalog.version}: {missing}"
    assert "wal_segment_size" in pg_catalog.facts  # a server fact the server checks compare with


def test_postgresql_gauges_named_by_rules_are_in_the_real_runtime_state(pg_sandbox) -> None:  # type: ignore[no-untyped-def]
    """An ``observed.<gauge>`` a rule reads is a gauge PostgresTarget.runtime_state() really reports (a
    misspelt gauge is never observed, and the rule would silently never apply)."""
    rules = load_ruleset("postgresql")
    wanted = {p[len("observed.") :] for r in rules.all_rules() for p in _all_params(r) if p.startswith("observed.")}
    assert wanted
    target = PostgresTarget.from_config(pg_sandbox.target_config())
    try:
        gauges = target.runtime_state().gauges
    finally:
        target.close()
    assert wanted <= set(gauges), sorted(wanted - set(gauges))


def test_mariadb_gauges_named_by_capacity_rules_are_in_the_real_runtime_state(mariadb_sandbox) -> None:  # type: ignore[no-untyped-def]
    """A capacity rule's observed gauge is one MySQLTarget really reports on MariaDB, in its runtime sample or
    read on demand for the rule (``rule_gauges``: memory_tables.*, too slow for every sample) — a gauge never
    observed would leave the setting unlowerable, or a misspelt one the rule silently idle."""
    rules = load_ruleset("mysql")
    wanted = {
        n for r in rules.capacity if r.applies("mariadb", "10.11") for n in r.observed if not n.startswith("host.")
    }
    assert "memory_tables.largest_bytes" in wanted
    target = MySQLTarget.from_config(mariadb_sandbox.target_config())
    try:
        gauges = target.runtime_state().gauges
        on_demand = target.rule_gauges(sorted(wanted))
    finally:
        target.close()
    assert "memory_tables.largest_bytes" in on_demand and "memory_tables.largest_bytes" not in gauges
    assert wanted <= set(gauges) | set(on_demand), sorted(wanted - set(gauges) - set(on_demand))


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
        if not exists(name, real):
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
    """Sysctl and THP names against /proc/sys and sysfs; block names (``block.*.x``, ``block.{dev}.x``)
    against the catalog this kernel gives for its block devices (a scheduler's tunables exist only while it
    is active, so the catalog knows them from the scheduler list; device facts such as hw_queue_depth are
    catalog facts)."""
    rules = load_ruleset("linux")
    devices = [p.name for p in Path("/sys/block").iterdir() if (p / "queue" / "scheduler").exists()]
    assert devices
    cat = LinuxTarget(devices=devices).catalog()
    # Schedulers this kernel offers (built in or loaded). A rule that needs a scheduler the kernel lacks
    # (bfq is a build option, CONFIG_IOSCHED_BFQ) names files that cannot exist here: not checkable.
    offered = {s.strip("[]") for d in devices for s in (Path("/sys/block") / d / "queue/scheduler").read_text().split()}
    missing, skipped = [], []
    for rule, name in named(rules):
        needs = [c.value for c in getattr(rule, "require", []) if c.param == "block.{dev}.scheduler" and c.op == "=="]
        if needs and not set(map(str, needs)) & offered:
            skipped.append((rule.id if rule else "budget", name))
            continue
        if name.startswith("block."):
            _, dev, fname = name.split(".", 2)
            names = [f"block.{d}.{fname}" for d in (devices if dev in ("*", "{dev}") else [dev])]
            files = [Path("/sys/block", n.split(".")[1], "queue", *fname.split(".")) for n in names]
            ok = any(n in cat.knobs or n in cat.facts for n in names) or any(f.exists() for f in files)
        elif name.startswith("thp."):
            ok = (Path("/sys/kernel/mm/transparent_hugepage") / name[4:]).exists()
        else:
            ok = (Path("/proc/sys") / name.replace(".", "/")).exists()
        if not ok:
            missing.append((rule.id if rule else "budget", name))
    assert missing == [], (
        f"missing {missing}; not checkable (scheduler not in this kernel: {sorted(offered)}): {skipped}"
    )
    for hint in rules.enum_hint:
        assert hint.parameter.startswith("block.") and hint.source


# Knobs of the shared MySQL/MariaDB playbook that only MariaDB has (MariaDB KB; MySQL 8.0 manual 5.1.8 has
# no such variable): on MySQL 8 their rules are skipped because the catalog lacks them, which is right.
MARIADB_ONLY = {
    "binlog_commit_wait_count": "MariaDB KB, Group Commit for the Binary Log",
    "join_cache_level": "MariaDB KB, join_cache_level (MySQL has block nested loop / hash join instead)",
    "optimizer_max_sel_arg_weight": "MariaDB KB, optimizer_max_sel_arg_weight (MariaDB 10.5.9+)",
}


def test_every_mysql_playbook_knob_is_in_the_mysql8_catalog_or_mariadb_only() -> None:
    """A rule of playbook-mysql.toml whose knob catalogs/mysql-8.0.toml does not describe never fires on
    MySQL 8 (mysql8_catalog excludes undescribed variables): optimizer_prune_level's trap was such a rule
    until the catalog described it (review of 2026-12-03)."""
    book = tomllib.loads((data_dir("catalogs") / "playbook-mysql.toml").read_text())
    mysql8 = tomllib.loads((data_dir("catalogs") / "mysql-8.0.toml").read_text())["knobs"]
    knobs = {r["knob"] for kind in ("floor", "entry", "measured", "probe") for r in book.get(kind, [])}
    assert sorted(k for k in knobs if k not in mysql8 and k not in MARIADB_ONLY) == []
    assert "optimizer_prune_level" in mysql8 and mysql8["optimizer_prune_level"]["default"] == "1"
