"""Validator rules on hand-built catalogs (pure, fast), and hardware detection on a copied /proc+/sys tree."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from agenticdb.config.sections import PolicyConfig
from agenticdb.host.hardware import block_device_of, cgroup_memory_limit, detect_hardware, read_meminfo
from agenticdb.models import (
    ApplyMode,
    Bottleneck,
    Catalog,
    Change,
    Hardware,
    KnobSpec,
    Layer,
    Observed,
    Proposal,
    Verdict,
)
from agenticdb.rule_files import RULE_FILES, harmful_rule_ids
from agenticdb.validation.resulting import ResultingConfig
from agenticdb.validation.rules import load_ruleset
from agenticdb.validation.validator import in_window, validate

GiB = 1024**3


def k(name: str, vartype: str = "integer", apply: str = "dynamic", **kw: object) -> KnobSpec:
    return KnobSpec(name=name, vartype=vartype, apply=ApplyMode(apply), **kw)  # type: ignore[arg-type]


PG = Catalog(
    target="postgresql",
    version="15.19",
    knobs={
        s.name: s
        for s in [
            k(
                "shared_buffers",
                unit="8kB",
                min_value=16,
                max_value=1073741823,
                apply="restart",
                default="16384",
            ),
            k("wal_buffers", unit="8kB", min_value=-1, max_value=262143, apply="restart", default="-1"),
            k("work_mem", unit="kB", min_value=64, max_value=2147483647, default="4096"),
            k("maintenance_work_mem", unit="kB", min_value=1024, max_value=2147483647, default="65536"),
            k(
                "autovacuum_work_mem",
                unit="kB",
                min_value=-1,
                max_value=2147483647,
                apply="reload",
                default="-1",
            ),
            k("autovacuum_max_workers", min_value=1, max_value=262143, apply="restart", default="3"),
            k("max_connections", min_value=1, max_value=262143, apply="restart", default="100"),
            k("max_wal_size", unit="MB", min_value=2, max_value=2147483647, apply="reload", default="1024"),
            k("min_wal_size", unit="MB", min_value=2, max_value=2147483647, apply="reload", default="80"),
            k("max_parallel_workers_per_gather", min_value=0, max_value=1024, default="2"),
            k("max_parallel_workers", min_value=0, max_value=1024, default="8"),
            k("max_worker_processes", min_value=0, max_value=262143, apply="restart", default="8"),
            k("random_page_cost", vartype="real", min_value=0, max_value=1.79e308, default="4"),
            k("checkpoint_timeout", unit="s", min_value=30, max_value=86400, apply="reload", default="300"),
            k(
                "synchronous_commit",
                vartype="enum",
                enum_values=["local", "remote_write", "remote_apply", "on", "off"],
                default="on",
            ),
            k("TimeZone", vartype="string", default="UTC"),
        ]
    },
    excluded={"data_directory": "read-only: location of the data files"},
    unsupported={"vacuum_buffer_usage_limit": "PostgreSQL 16+ only"},
)

MARIADB = Catalog(
    target="mariadb",
    version="10.11.19-MariaDB",
    knobs={
        s.name: s
        for s in [
            k(
                "innodb_buffer_pool_size",
                unit="B",
                min_value=2097152,
                max_value=1.8e19,
                block_size=1048576,
                default="134217728",
            ),
            k(
                "innodb_log_buffer_size",
                unit="B",
                min_value=262144,
                max_value=2**32,
                apply="restart",
                default="16777216",
            ),
            k("max_connections", min_value=10, max_value=100000, default="151"),
            k("sort_buffer_size", unit="B", min_value=1024, max_value=2**64, default="2097152"),
            k("innodb_flush_log_at_trx_commit", min_value=0, max_value=3, default="1"),
            k("innodb_read_io_threads", min_value=1, max_value=64, apply="restart", default="4"),
        ]
    },
)

LINUX = Catalog(
    target="linux",
    version="6.1.0",
    knobs={
        s.name: s
        for s in [
            k("vm.dirty_ratio", layer=Layer.os, min_value=0, max_value=100, default="20"),
            k("vm.dirty_bytes", layer=Layer.os, min_value=0, default="0"),
            k("vm.dirty_background_ratio", layer=Layer.os, min_value=0, max_value=100, default="10"),
            k("vm.dirty_background_bytes", layer=Layer.os, min_value=0, default="0"),
            k("vm.swappiness", layer=Layer.os, min_value=0, max_value=200, default="60"),
            k("vm.overcommit_memory", layer=Layer.os, min_value=0, max_value=2, default="0"),
            k("vm.overcommit_ratio", layer=Layer.os, min_value=0, default="50"),
            k("vm.overcommit_kbytes", layer=Layer.os, min_value=0, default="0"),
            k(
                "block.vda.scheduler",
                vartype="enum",
                layer=Layer.os,
                enum_values=["none", "mq-deadline", "kyber", "bfq"],
            ),
        ]
    },
)

HW = Hardware(
    cpu_count=2,
    memory_bytes=24 * GiB,
    memory_limit_bytes=24 * GiB,
    disk_free_bytes=80 * GiB,
    disk_total_bytes=250 * GiB,
    data_device="vda",
    committed_as_bytes=6 * GiB,
    swap_bytes=0,
)
WIDE = PolicyConfig(max_step_factor=1000, max_changes=20)


def check(
    catalog: Catalog,
    changes: dict[str, object],
    *,
    policy: PolicyConfig = WIDE,
    hw: Hardware = HW,
    stage: Layer | None = None,
    claim: str = "dynamic",
    current: dict[str, str] | None = None,
    **kw: object,
) -> Verdict:
    stage = stage or (Layer.os if catalog.target == "linux" else Layer.dbms)
    proposal = Proposal(
        bottleneck=Bottleneck.unknown,
        layer=stage,
        apply_requirement=ApplyMode(claim),
        changes=[Change(name=n, value=v) for n, v in changes.items()],  # type: ignore[arg-type]
    )  # type: ignore[arg-type]
    return validate(proposal, catalog, current or {}, hw, policy, stage, **kw)  # type: ignore[arg-type]


def kinds(v: Verdict) -> dict[str, str]:
    return {f.parameter: f.check for f in v.failed}


def test_accepts_and_normalises_with_previous_values() -> None:
    v = check(PG, {"work_mem": "64MB", "random_page_cost": 1.1}, current={"work_mem": "4MB"})
    assert v.ok and not v.failed
    assert [(c.name, c.value, c.base_value, c.previous) for c in v.changes] == [
        ("work_mem", "64MB", 65536.0, "4MB"),
        ("random_page_cost", "1.1", 1.1, "4"),
    ]


def test_names_are_case_insensitive_on_dbms_and_returned_in_server_spelling() -> None:
    v = check(PG, {"WORK_MEM": "8MB"})
    assert v.ok and v.changes[0].name == "work_mem"


def test_unknown_excluded_unsupported_messages() -> None:
    v = check(PG, {"work_memory": "8MB", "data_directory": "/tmp", "vacuum_buffer_usage_limit": "1MB"})
    msgs = {f.parameter: f.message for f in v.failed}
    assert kinds(v) == {
        "work_memory": "unknown",
        "data_directory": "unknown",
        "vacuum_buffer_usage_limit": "unknown",
    }
    assert "did you mean work_mem" in msgs["work_memory"]
    assert "excluded: read-only" in msgs["data_directory"]
    assert "unsupported on this server/kernel: PostgreSQL 16+ only" in msgs["vacuum_buffer_usage_limit"]


def test_stage_checks() -> None:
    assert kinds(check(PG, {"vm.swappiness": 10})) == {"vm.swappiness": "stage"}
    assert kinds(check(LINUX, {"vm.swappiness": 10}, stage=Layer.dbms)) == {"vm.swappiness": "stage"}
    assert kinds(check(PG, {"work_mem": "8MB"}, stage=Layer.os)) == {"work_mem": "stage"}
    proposal = Proposal(bottleneck=Bottleneck.unknown, layer=Layer.os, changes=[Change(name="work_mem", value="8MB")])
    v = validate(proposal, PG, {}, HW, WIDE, Layer.dbms)
    assert kinds(v) == {"work_mem": "stage"} and "layer os" in v.failed[0].message


def test_all_failures_reported_and_no_partial_set() -> None:
    v = check(
        PG,
        {
            "work_mem": "8 apples",
            "synchronous_commit": "maybe",
            "checkpoint_timeout": "1s",
            "TimeZone": "UTC",
            "random_page_cost": 2,
        },
    )
    assert kinds(v) == {
        "work_mem": "unit",
        "synchronous_commit": "enum",
        "checkpoint_timeout": "range",
        "TimeZone": "protected",
    }
    assert not v.ok
    rng = next(f for f in v.failed if f.check == "range")
    assert "30s .. 1d" in rng.message and "checkpoint_timeout" in rng.message


def test_duplicate_parameter_is_a_conflict() -> None:
    v = check(PG, {"work_mem": "8MB", "Work_Mem": "16MB"})
    assert kinds(v) == {"Work_Mem": "conflict"}


def test_durability_strict_and_relaxed() -> None:
    assert kinds(check(PG, {"synchronous_commit": "off"})) == {"synchronous_commit": "durability"}
    assert check(PG, {"synchronous_commit": "remote_apply"}).ok
    relaxed = WIDE.model_copy(update={"durability": "relaxed"})
    v = check(PG, {"synchronous_commit": "off"}, policy=relaxed)
    assert v.ok and "pg.synchronous_commit" in v.accepted_risks[0]
    v = check(MARIADB, {"innodb_flush_log_at_trx_commit": 0}, policy=relaxed)
    assert kinds(v) == {"innodb_flush_log_at_trx_commit": "durability"}
    assert "not allowed even under durability = relaxed" in v.failed[0].message


def test_memory_budget_uses_cgroup_limit_and_names_both_numbers() -> None:
    small = HW.model_copy(update={"memory_limit_bytes": 2 * GiB, "cgroup_memory_limit_bytes": 2 * GiB})
    assert check(PG, {"shared_buffers": "1GB"}).ok
    v = check(PG, {"shared_buffers": "1800MB"}, hw=small)
    f = v.failed[0]
    assert (f.check, f.parameter, f.rule_id) == ("hardware", "shared_buffers", "memory_budget")
    assert "RAM 24.00 GiB" in f.message and "cgroup limit 2.00 GiB" in f.message and "1.50 GiB" in f.message


def test_memory_budget_terms() -> None:
    # wal_buffers -1 = shared_buffers/32 capped at 16MB; autovacuum_work_mem -1 → maintenance_work_mem
    cfg = ResultingConfig("postgresql", PG, {}, [], {n.lower(): n for n in PG.knobs})
    from agenticdb.validation.host import memory_estimate

    total, parts = memory_estimate(cfg, load_ruleset("postgresql"), PolicyConfig())
    assert parts["shared_buffers"] == 128 * 1024**2
    assert parts["wal_buffers"] == 4 * 1024**2
    assert parts["work_mem"] == 100 * 4 * 1024**2
    assert parts["maintenance_work_mem"] == 3 * 64 * 1024**2
    assert total == sum(parts.values())
    cfg = ResultingConfig(
        "postgresql",
        PG,
        {"autovacuum_work_mem": "1GB", "shared_buffers": "8GB"},
        [],
        {n.lower(): n for n in PG.knobs},
    )
    _, parts = memory_estimate(cfg, load_ruleset("postgresql"), PolicyConfig(per_connection_work_mem_factor=2))
    assert parts["maintenance_work_mem"] == 3 * GiB and parts["wal_buffers"] == 16 * 1024**2
    assert parts["work_mem"] == 2 * 100 * 4 * 1024**2


def test_mariadb_per_connection_budget_blames_the_connection_count() -> None:
    v = check(MARIADB, {"max_connections": 10000}, hw=HW.model_copy(update={"memory_limit_bytes": 8 * GiB}))
    assert kinds(v) == {"max_connections": "hardware"} and "sort_buffer_size" in v.failed[0].message


def test_disk_budget_and_cpu_limits() -> None:
    v = check(PG, {"max_wal_size": "100GB"})
    assert kinds(v) == {"max_wal_size": "hardware"} and "disk_fraction 0.5" in v.failed[0].message
    assert check(PG, {"max_wal_size": "20GB"}).ok
    v = check(PG, {"max_parallel_workers_per_gather": 3})
    assert kinds(v) == {"max_parallel_workers_per_gather": "hardware"} and "2 cores" in v.failed[0].message
    assert kinds(check(MARIADB, {"innodb_read_io_threads": 64})) == {"innodb_read_io_threads": "hardware"}


def test_conflicts_only_blame_changes_and_use_resulting_values() -> None:
    # already in conflict before the change: an unrelated change is not blocked
    bad_now = {"min_wal_size": "2GB", "max_wal_size": "1GB"}
    assert check(PG, {"work_mem": "8MB"}, current=bad_now).ok
    v = check(PG, {"max_wal_size": "1500MB"}, current=bad_now)
    assert kinds(v) == {"max_wal_size": "conflict"} and "pg.min_wal_le_max_wal" in v.failed[0].message
    assert check(PG, {"max_wal_size": "2GB"}, current=bad_now).ok


def test_step_bounds() -> None:
    pol = PolicyConfig(max_changes=2, max_step_factor=4)
    v = check(
        PG,
        {"work_mem": "32MB", "random_page_cost": 1.1, "checkpoint_timeout": "10min"},
        policy=pol,
        current={"work_mem": "4MB", "random_page_cost": "4", "checkpoint_timeout": "5min"},
    )
    assert kinds(v) == {"(proposal)": "step", "work_mem": "step"}
    msg = {f.parameter: f.message for f in v.failed}["work_mem"]
    assert "8×" in msg and "1MB .. 16MB" in msg
    # an integer knob's bounds are the whole values allowed (a trial printed "(12.5 .. 200)" for max_connections)
    v = check(PG, {"max_connections": 300}, policy=pol, claim="restart", current={"max_connections": "50"})
    msg = {f.parameter: f.message for f in v.failed}["max_connections"]
    assert "(13 .. 200)" in msg, msg


def test_apply_requirement_corrected_and_restart_permissions() -> None:
    v = check(PG, {"shared_buffers": "256MB"}, claim="reload")
    assert v.ok and v.apply_requirement == ApplyMode.restart and "corrected from reload to restart" in v.warnings[0]
    for kw in (
        {"policy": WIDE.model_copy(update={"allow_restart": False})},
        {"can_restart": False},
        {
            "policy": WIDE.model_copy(update={"restart_window": "01:00-03:00"}),
            "now": datetime(2024, 1, 1, 12, 0),
        },
    ):
        v = check(PG, {"shared_buffers": "256MB", "work_mem": "8MB"}, **kw)  # type: ignore[arg-type]
        assert kinds(v) == {"shared_buffers": "apply"}, kw
    v = check(
        PG,
        {"shared_buffers": "256MB"},
        policy=WIDE.model_copy(update={"restart_window": "23:00-02:00"}),
        now=datetime(2024, 1, 1, 1, 30),
    )
    assert v.ok


@pytest.mark.parametrize(
    ("window", "hhmm", "inside"),
    [
        (None, "12:00", True),
        ("01:00-03:00", "02:59", True),
        ("01:00-03:00", "03:00", False),
        ("22:00-02:00", "23:30", True),
        ("22:00-02:00", "01:59", True),
        ("22:00-02:00", "12:00", False),
    ],
)
def test_restart_window(window: str | None, hhmm: str, inside: bool) -> None:
    h, m = map(int, hhmm.split(":"))
    assert in_window(window, datetime(2024, 5, 1, h, m)) is inside


def test_linux_rules() -> None:
    v = check(LINUX, {"vm.dirty_ratio": 30, "vm.dirty_bytes": 2**28})
    assert kinds(v) == {"vm.dirty_ratio": "conflict"} and "mutually exclusive" in v.failed[0].message
    assert kinds(check(LINUX, {"vm.dirty_background_ratio": 30})) == {"vm.dirty_background_ratio": "conflict"}
    # with dirty_bytes in use the ratios are not compared
    assert check(LINUX, {"vm.dirty_background_ratio": 30}, current={"vm.dirty_bytes": str(2**30)}).ok
    # no swap on HW: swappiness cannot act (no_effect); with swap, 0 is known harm unless policy allows it
    v = check(LINUX, {"vm.swappiness": 0})
    assert kinds(v) == {"vm.swappiness": "no_effect"} and "host.swap_bytes > 0" in v.failed[0].message
    swap = HW.model_copy(update={"swap_bytes": 4 * GiB})
    assert check(LINUX, {"vm.swappiness": 1}, hw=swap).ok
    v = check(LINUX, {"vm.swappiness": 0}, hw=swap)
    assert kinds(v) == {"vm.swappiness": "harmful"} and v.failed[0].rule_id == "linux.swappiness-zero-with-swap"
    allow = WIDE.model_copy(update={"allow_harmful": ["linux.swappiness-zero-with-swap"]})
    v = check(LINUX, {"vm.swappiness": 0}, hw=swap, policy=allow)
    assert v.ok and v.accepted_risks[0].startswith("vm.swappiness=0") and "allow_harmful" in v.accepted_risks[0]
    v = check(LINUX, {"block.vda.scheduler": "noop"})
    assert kinds(v) == {"block.vda.scheduler": "enum"} and "'none'" in v.failed[0].message
    assert kinds(check(LINUX, {"vm.drop_caches": 3})) == {"vm.drop_caches": "dangerous"}


def test_overcommit_strict_needs_commit_headroom() -> None:
    # commit limit = swap + RAM × ratio: 24 GiB × 50 % = 12 GiB; must exceed Committed_AS 6 GiB + the DBMS's
    # planned memory + 5 % of RAM (1.2 GiB)
    planned = Observed(dbms_memory_bytes=2 * GiB)
    assert check(LINUX, {"vm.overcommit_memory": 2}, observed=planned).ok
    v = check(LINUX, {"vm.overcommit_memory": 2}, observed=Observed(dbms_memory_bytes=5 * GiB))
    assert kinds(v) == {"vm.overcommit_memory": "hardware"}
    assert "Committed_AS 6.00 GiB + DBMS planned memory 5.00 GiB + headroom 1.20 GiB" in v.failed[0].message
    # without a planned figure the DBMS's whole memory budget (0.75 × 24 GiB) counts
    v = check(LINUX, {"vm.overcommit_memory": 2})
    assert "DBMS memory budget" in v.failed[0].message and "18.00 GiB" in v.failed[0].message
    v = check(LINUX, {"vm.overcommit_memory": 2, "vm.overcommit_ratio": 20}, observed=planned)
    assert kinds(v) == {"vm.overcommit_memory": "hardware", "vm.overcommit_ratio": "hardware"}
    assert "overcommit_ratio 20%" in v.failed[0].message
    v = check(LINUX, {"vm.overcommit_memory": 2}, hw=HW.model_copy(update={"committed_as_bytes": None}))
    assert kinds(v) == {"vm.overcommit_memory": "hardware"}


def test_overcommit_message_uses_the_formula_in_force() -> None:
    planned = Observed(dbms_memory_bytes=2 * GiB)
    # overcommit_kbytes replaces the ratio when set (mm/util.c vm_commit_limit)
    v = check(LINUX, {"vm.overcommit_memory": 2, "vm.overcommit_kbytes": 8 * 1024**2}, observed=planned)
    assert "overcommit_kbytes 8388608 kB (8.00 GiB)" in v.failed[0].message and "ratio" not in v.failed[0].message
    assert check(LINUX, {"vm.overcommit_memory": 2, "vm.overcommit_kbytes": 20 * 1024**2}, observed=planned).ok
    # writing the ratio zeroes kbytes: a ratio in the set is the formula in force
    v = check(
        LINUX,
        {"vm.overcommit_memory": 2, "vm.overcommit_ratio": 30},
        current={"vm.overcommit_kbytes": str(30 * 1024**2)},
        observed=planned,
    )
    assert "overcommit_ratio 30%" in v.failed[0].message
    # reserved huge pages are not committable
    huge = HW.model_copy(update={"huge_pages_bytes": 8 * GiB})
    v = check(LINUX, {"vm.overcommit_memory": 2}, hw=huge, observed=planned)
    assert "huge pages 8.00 GiB" in v.failed[0].message
    # ratio or kbytes alone while the mode stays heuristic: no effect, never measured
    v = check(LINUX, {"vm.overcommit_ratio": 80})
    assert kinds(v) == {"vm.overcommit_ratio": "no_effect"} and "vm.overcommit_memory == 2" in v.failed[0].message


# ---------------------------------------------------------------- hardware detection on a copied tree


def _tree(tmp_path: Path, cgroup: str, mountinfo: str, files: dict[str, str]) -> tuple[str, str]:
    proc, sys = tmp_path / "proc", tmp_path / "sys"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "cgroup").write_text(cgroup)
    (proc / "self" / "mountinfo").write_text(mountinfo)
    (proc / "meminfo").write_text("MemTotal:       24000000 kB\nSwapTotal:  1024 kB\nCommitted_AS:  6000 kB\n")
    for rel, text in files.items():
        p = tmp_path / rel.replace("<tmp>", "")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return str(proc), str(sys)


def test_cgroup_v2_limit_is_the_tightest_on_the_path(tmp_path: Path) -> None:
    cg = tmp_path / "cg"
    mi = f"30 1 0:26 / {cg} rw - cgroup2 cgroup2 rw\n"
    proc, _ = _tree(
        tmp_path,
        "0::/app/db\n",
        mi,
        {"cg/app/db/memory.max": "max\n", "cg/app/memory.max": str(2 * GiB) + "\n"},
    )
    assert cgroup_memory_limit(proc=proc) == 2 * GiB


def test_cgroup_v1_limit_and_unlimited(tmp_path: Path) -> None:
    cg = tmp_path / "mem"
    mi = f"35 31 0:32 / {cg} rw,relatime - cgroup cgroup rw,memory\n"
    proc, _ = _tree(tmp_path, "4:memory:/box\n", mi, {"mem/box/memory.limit_in_bytes": "9223372036854771712\n"})
    assert cgroup_memory_limit(proc=proc) is None
    (cg / "box" / "memory.limit_in_bytes").write_text(str(3 * GiB))
    assert cgroup_memory_limit(proc=proc) == 3 * GiB


def test_block_device_resolves_partition_to_disk(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    disk = tmp_path / "sys" / "devices" / "virtual" / "nvme0n1"
    part = disk / "nvme0n1p2"
    part.mkdir(parents=True)
    (part / "dev").write_text("259:2\n")
    (part / "partition").write_text("2\n")
    (disk / "dev").write_text("259:0\n")
    cls = tmp_path / "sys" / "class" / "block"
    cls.mkdir(parents=True)
    (cls / "nvme0n1p2").symlink_to(part)
    (cls / "nvme0n1").symlink_to(disk)
    mi = f"27 1 254:0 / / rw - ext4 /dev/vda rw\n40 27 259:2 / {data} rw - xfs /dev/nvme0n1p2 rw\n"
    proc, sys = _tree(tmp_path, "0::/\n", mi, {})
    assert block_device_of(str(data), proc=proc, sys=sys) == "nvme0n1"


def test_detect_hardware_on_this_host(tmp_path: Path) -> None:
    hw = detect_hardware(str(tmp_path))
    assert hw.cpu_count >= 1 and hw.memory_bytes > 0
    assert hw.memory_limit_bytes == min(hw.memory_bytes, hw.cgroup_memory_limit_bytes or hw.memory_bytes)
    assert 0 < hw.disk_free_bytes <= hw.disk_total_bytes
    assert hw.data_device and Path(f"/sys/block/{hw.data_device}").exists()
    assert hw.committed_as_bytes == read_meminfo()["Committed_AS"] or hw.committed_as_bytes is not None


# ---------------------------------------------------------------- issue 17: rule kinds on hand-built catalogs


def test_policy_allow_harmful_names_only_known_rules() -> None:
    assert PolicyConfig(allow_harmful=["linux.thp-always"]).allow_harmful == ["linux.thp-always"]
    with pytest.raises(ValueError, match="linux.thp-sometimes"):
        PolicyConfig(allow_harmful=["linux.thp-sometimes"])


def test_harmful_ids_the_config_reads_are_those_of_the_full_rule_sets() -> None:
    # config reads only the ids (agenticdb.rule_files, below the validator); the validator loads the rules
    full = {r.id for family in RULE_FILES for r in load_ruleset(family).harmful}
    assert full and harmful_rule_ids() == full


def test_capacity_is_never_lowered_below_the_peak_and_not_at_all_without_one() -> None:
    pg = PG.model_copy(
        update={
            "knobs": {**PG.knobs, "superuser_reserved_connections": k("superuser_reserved_connections", default="3")}
        }
    )
    cur = {"max_connections": "200", "superuser_reserved_connections": "3"}
    # no observation: lowering refused, raising fine
    v = check(pg, {"max_connections": 150}, current=cur)
    assert kinds(v) == {"max_connections": "capacity"} and "unknown to the validator" in v.failed[0].message
    assert check(pg, {"max_connections": 250}, current=cur).ok
    # peak 100 × 1.25 + 3 reserved = 128
    seen = Observed(gauges={"pg_stat_activity.total": 100})
    v = check(pg, {"max_connections": 120}, current=cur, observed=seen)
    assert kinds(v) == {"max_connections": "capacity"} and "= 128" in v.failed[0].message
    assert check(pg, {"max_connections": 130}, current=cur, observed=seen).ok
    tight = WIDE.model_copy(update={"capacity_headroom": 0.0})
    assert check(pg, {"max_connections": 110}, current=cur, observed=seen, policy=tight).ok


def test_capacity_reads_a_gauge_no_sample_carries_once_and_only_for_a_lowering() -> None:
    """memory_tables.largest_bytes is in no runtime sample (an information_schema.TABLES scan): the
    max_heap_table_size rule asks ``Observed.read`` for it when a change lowers the setting, once per
    Observed, and the verdict says what it compared (``Verdict.read``)."""
    heap = k("max_heap_table_size", unit="B", min_value=16384, max_value=2**64, default="16777216")
    maria = MARIADB.model_copy(update={"knobs": {**MARIADB.knobs, "max_heap_table_size": heap}})
    cur = {"max_heap_table_size": "16777216"}
    asked: list[list[str]] = []

    def read(names: list[str]) -> dict[str, float]:
        asked.append(names)
        return {"memory_tables.count": 1.0, "memory_tables.largest_bytes": 9436672.0}

    seen = Observed(read=read)
    raised = check(maria, {"max_heap_table_size": "32M"}, current=cur, observed=seen)
    assert raised.ok and raised.read == {} and asked == []
    v = check(maria, {"max_heap_table_size": "1M"}, current=cur, observed=seen)
    assert kinds(v) == {"max_heap_table_size": "capacity"}, v.failed
    assert v.failed[0].rule_id == "mysql.max_heap_table_size-memory-tables"
    assert v.read == {"memory_tables.largest_bytes": 9436672.0}
    # 9436672 × 1.25 = 11795840 ≤ 12M: passes, with the value read for the 1M check (not read again)
    again = check(maria, {"max_heap_table_size": "12M"}, current=cur, observed=seen)
    assert again.ok and again.read == {"memory_tables.largest_bytes": 9436672.0}
    assert asked == [["memory_tables.largest_bytes"]]
    unread = check(maria, {"max_heap_table_size": "12M"}, current=cur, observed=Observed(read=lambda names: {}))
    assert kinds(unread) == {"max_heap_table_size": "capacity"}
    assert "unknown to the validator" in unread.failed[0].message


def test_server_check_reads_facts_and_skips_when_a_fact_is_unknown() -> None:
    facts = PG.model_copy(update={"facts": {"wal_segment_size": 64 * 1024**2}})
    v = check(facts, {"min_wal_size": "100MB"})  # 64MB segments (initdb --wal-segsize=64): needs 128MB
    assert kinds(v) == {"min_wal_size": "server_check"}
    assert "wal_segment_size=67108864 (64 MiB)" in v.failed[0].message and "refuses to start" in v.failed[0].message
    assert check(facts, {"min_wal_size": "128MB"}).ok
    assert check(PG, {"min_wal_size": "20MB"}).ok  # the segment size is not known here: no guess


def test_no_effect_from_the_servers_own_description() -> None:
    maria = Catalog(
        target="mariadb",
        version="10.11.19-MariaDB",
        knobs={"innodb_lru_flush_size": k("innodb_lru_flush_size", default="32")},
        facts={"ignored:innodb_lru_flush_size": "Deprecated parameter with no effect"},
    )
    v = check(maria, {"innodb_lru_flush_size": 64})
    assert kinds(v) == {"innodb_lru_flush_size": "no_effect"} and v.failed[0].rule_id == "server.ignored"


def test_condition_arithmetic_is_described_as_evaluated() -> None:
    from agenticdb.validation.rules import Condition

    c = Condition(param="a", plus=["b", "c"], op="<=", other="d", factor=2, offset=-512)
    assert c.describe() == "a + b + c <= 2 × d - 512"
    assert c.for_device("vda") == c
    d = Condition(param="block.{dev}.nr_requests", op="<=", other="block.{dev}.hw_queue_depth")
    assert d.for_device("vda").params() == ["block.vda.nr_requests", "block.vda.hw_queue_depth"]


def test_host_facts_from_a_copied_proc_and_sys(tmp_path: Path) -> None:
    from agenticdb.host.hardware import huge_page_sizes, numa_nodes, server_rlimits

    proc, sys = _tree(tmp_path, "0::/\n", "", {})
    Path(sys, "devices/system/node").mkdir(parents=True)
    Path(sys, "devices/system/node/online").write_text("0-1,3\n")
    for size in ("hugepages-2048kB", "hugepages-1048576kB"):
        Path(sys, "kernel/mm/hugepages", size).mkdir(parents=True)
    Path(proc, "42").mkdir()
    Path(proc, "42/limits").write_text(
        "Limit                     Soft Limit           Hard Limit           Units     \n"
        "Max stack size            8388608              unlimited            bytes     \n"
        "Max open files            1024                 524288               files     \n"
    )
    assert numa_nodes(sys=sys) == 3
    assert huge_page_sizes(sys=sys) == [2 * 1024**2, 1024**3]
    assert server_rlimits(proc=proc, pid=42) == {
        "stack_limit_bytes": 8388608,
        "open_files_soft": 1024,
        "open_files_hard": 524288,
    }
    assert numa_nodes(sys=str(tmp_path / "nowhere")) == 1


def test_step_back_to_the_default_is_not_bounded() -> None:
    """A known trap (random_page_cost = 1e6, scenario suite of issue 22) goes back to the server's default
    in one round; any other value still moves at most max_step_factor."""
    pol = PolicyConfig(max_changes=2, max_step_factor=4)
    assert check(PG, {"random_page_cost": "4"}, policy=pol, current={"random_page_cost": "1000000"}).ok
    v = check(PG, {"random_page_cost": "5"}, policy=pol, current={"random_page_cost": "1000000"})
    assert kinds(v) == {"random_page_cost": "step"}
