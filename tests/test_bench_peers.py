"""The harness's static peers: PGTune's current rules (pure), MySQLTuner's output parser (captured real
output under tests/data/mysqltuner/), the rules that turn its directions into numbers, and the real
MySQLTuner against the private MariaDB of conftest.py.

Expected PGTune values are worked out by hand from the rules cited in benchmarks/harness/pgtune_rules.py
(kB arithmetic, floor rounding), not taken from running PGTune.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any, cast

import pytest

from benchmarks.harness import mysqltuner as M
from benchmarks.harness import pgtune_rules as P

DATA = Path(__file__).parent / "data" / "mysqltuner"
GiB = 2**30
MiB = 2**20


# ---- PGTune ---------------------------------------------------------------------------------------------


def test_pgtune_tpch_scenario_inputs_give_the_4mb_work_mem_floor() -> None:
    # pg-tpch as a DBA types it: 1 GiB (cgroup), 2 CPUs, 50 connections, vda rotational → hdd, dw,
    # data 1×–3× RAM, PostgreSQL 15.
    rec = P.recommend(P.PgTuneInputs(1 * GiB, 2, 50, "hdd", "dw", "mid_ram", 15))
    # RAM 1048576 kB: shared_buffers 262144 kB; ECS 786432 kB; maintenance 1048576/8 = 131072 kB;
    # wal_buffers floor(262144·0.03) = 7864 kB; work_mem (1048576−262144)/((50+8)·3) = 4519.7 → /2 =
    # 2259 kB → below the 4 MB floor → 4096 kB.
    assert rec == {
        "shared_buffers": "256MB",
        "effective_cache_size": "768MB",
        "maintenance_work_mem": "128MB",
        "checkpoint_completion_target": "0.9",
        "wal_buffers": "7864kB",
        "default_statistics_target": "500",
        "random_page_cost": "4",  # hdd, and dw not fitting in RAM
        "effective_io_concurrency": "2",  # hdd
        "work_mem": "4MB",
        "huge_pages": "off",  # shared_buffers < 2 GB
        "wal_compression": "lz4",  # PG 15
        "min_wal_size": "4GB",
        "max_wal_size": "16GB",
    }
    assert "jit" not in rec  # left at PostgreSQL's default for dw


def test_pgtune_oltp_server_with_parallel_workers_and_data_in_ram() -> None:
    rec = P.recommend(P.PgTuneInputs(16 * GiB, 8, 200, "ssd", "oltp", "less_ram", 15))
    # RAM 16777216 kB; sb 4194304 kB = 4GB → huge_pages try; wal 3 % = 125829 kB → capped 16MB;
    # work_mem (16777216−4194304)/((200+8)·3) = 20164.9 → 20164 → ×1.3 = 26213 kB.
    assert rec["shared_buffers"] == "4GB"
    assert rec["effective_cache_size"] == "12GB"
    assert rec["maintenance_work_mem"] == "1GB"
    assert rec["wal_buffers"] == "16MB"
    assert rec["work_mem"] == "26213kB"
    assert rec["huge_pages"] == "try"
    assert rec["random_page_cost"] == "1.1"
    assert rec["effective_io_concurrency"] == "200"
    assert rec["jit"] == "off"
    assert rec["max_worker_processes"] == "8" and rec["max_parallel_workers"] == "8"
    assert rec["max_parallel_workers_per_gather"] == "4" and rec["max_parallel_maintenance_workers"] == "4"
    assert (rec["min_wal_size"], rec["max_wal_size"]) == ("2GB", "8GB")
    assert "autovacuum_max_workers" not in rec and "autovacuum_work_mem" not in rec


def test_pgtune_big_dw_server_caps_and_autovacuum() -> None:
    rec = P.recommend(P.PgTuneInputs(64 * GiB, 32, 100, "hdd", "dw", "greater_ram", 16))
    # sb 16GB; maintenance 64GB/8 = 8GB = the cap → autovacuum_work_mem 2GB; per_gather ceil(32/2) = 16
    # (dw is not capped at 4); work_mem (67108864−16777216)/((100+32)·3) = 127100.1 → /2 = 63550 →
    # ×0.9 = 57195 kB.
    assert rec["maintenance_work_mem"] == "8GB"
    assert rec["autovacuum_work_mem"] == "2GB"
    assert rec["autovacuum_max_workers"] == "5"
    assert rec["max_parallel_workers_per_gather"] == "16"
    assert rec["max_parallel_maintenance_workers"] == "4"
    assert rec["work_mem"] == "57195kB"
    assert rec["random_page_cost"] == "4"


def test_pgtune_wal_buffers_rounds_up_near_16mb_and_desktop_rules() -> None:
    # 2 GiB: sb 524288 kB, 3 % = 15728 kB, between 14 and 16 MB → 16MB.
    assert P.recommend(P.PgTuneInputs(2 * GiB, 2, 100, "ssd", "web", "mid_ram"))["wal_buffers"] == "16MB"
    rec = P.recommend(P.PgTuneInputs(4 * GiB, 2, 20, "ssd", "desktop", "mid_ram"))
    # sb 4194304/16 = 262144 kB; work_mem (4194304−262144)/((20+8)·3) = 46811.4 → /6 = 7801 kB.
    assert rec["shared_buffers"] == "256MB" and rec["effective_cache_size"] == "1GB"
    assert rec["work_mem"] == "7801kB"
    assert (rec["wal_level"], rec["max_wal_senders"]) == ("minimal", "0")
    assert (rec["min_wal_size"], rec["max_wal_size"]) == ("100MB", "2GB")


def test_pgtune_dw_that_fits_in_ram_gets_low_random_page_cost() -> None:
    inp = P.PgTuneInputs(1 * GiB, 2, 50, "hdd", "dw", "less_ram")
    assert P.random_page_cost(inp) == 1.1


def test_pgtune_inputs_from_host_facts(tmp_path: Path) -> None:
    for dev, flag in (("vda", "1"), ("sda", "0"), ("nvme0n1", "0")):
        (tmp_path / "block" / dev / "queue").mkdir(parents=True)
        (tmp_path / "block" / dev / "queue" / "rotational").write_text(flag + "\n")
    assert P.storage_class("vda", sys=str(tmp_path)) == "hdd"
    assert P.storage_class("sda", sys=str(tmp_path)) == "ssd"
    assert P.storage_class("nvme0n1", sys=str(tmp_path)) == "nvme"
    assert P.storage_class(None) == "ssd"
    assert P.data_size_class(100, 1000) == "less_ram"
    assert P.data_size_class(3000, 1000) == "mid_ram"
    assert P.data_size_class(3001, 1000) == "greater_ram"
    assert P.db_type_for("olap") == "dw" and P.db_type_for("oltp") == "oltp"
    assert P.LABEL.startswith("PGTune (rules as of 2026-")


def test_pgtune_inputs_are_checked() -> None:
    with pytest.raises(ValueError, match="storage='tape'"):
        P.PgTuneInputs(GiB, 2, 50, "tape", "dw", "mid_ram")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cpus=0"):
        P.PgTuneInputs(GiB, 0, 50, "ssd", "dw", "mid_ram")


# ---- MySQLTuner: parser on captured output ---------------------------------------------------------------


def test_parser_reads_captured_mysqltuner_run() -> None:
    # Real MySQLTuner 1.9.9 output against a private MariaDB 10.11 after 15 s of sysbench oltp_read_write
    # (4 × 100k rows), --forcemem 512.
    rep = M.parse((DATA / "mariadb-10.11-sysbench-rw.txt").read_text())
    assert rep.version == "1.9.9" and rep.complete
    assert rep.label == "MySQLTuner 1.9.9 + rules"
    assert [(a.name, a.relation, a.value) for a in rep.advice] == [
        ("performance_schema", "=", "ON"),
        ("innodb_buffer_pool_size", ">=", "95.5M"),
        ("innodb_log_file_size", "=", "16M"),
    ]
    assert rep.warnings == [
        "MySQL's maximum memory usage is dangerously high",
        "Add RAM before increasing MySQL buffer variables",
    ]
    assert rep.max_memory == "2.2G (438.28% of installed RAM)"


def test_parser_marks_a_run_that_died_before_its_recommendations() -> None:
    # The same MySQLTuner without the chunk-size shim: "Illegal division by zero" in mysql_innodb.
    rep = M.parse((DATA / "mariadb-10.11-chunk-size-crash.txt").read_text(), exit_code=255)
    assert not rep.complete and rep.advice == [] and rep.exit_code == 255
    assert "Illegal division by zero" in rep.output
    assert rep.failure == (
        "MySQLTuner 1.9.9 ended before its recommendations (exit 255): "
        "Illegal division by zero at /usr/bin/mysqltuner line 6024"
    )
    assert M.parse((DATA / "mariadb-10.11-sysbench-rw.txt").read_text()).failure == ""


def test_parser_names_the_read_only_crash() -> None:
    # Real 1.9.9 output with the chunk-size shim only, on a fresh MariaDB 10.11 that had written no redo log
    # (reads only): its log-waits line divides by Innodb_log_writes = 0, right after "Write Log efficiency".
    rep = M.parse((DATA / "mariadb-10.11-no-log-writes-crash.txt").read_text(), exit_code=255)
    assert not rep.complete and rep.advice == []
    assert "InnoDB Write Log efficiency: 0% (0 hits/ 0 total)" in rep.output
    assert rep.failure.endswith("Illegal division by zero at /usr/bin/mysqltuner line 6099")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # Lines in the formats MySQLTuner 1.9.9's code prints (its push(@adjvars, …) strings).
        ("join_buffer_size (> 256.0K, or always use indexes with JOINs)", ("join_buffer_size", ">", "256.0K")),
        ("tmp_table_size (> 16.0M)", ("tmp_table_size", ">", "16.0M")),
        ("table_definition_cache(400) > 612 or -1 (autosizing if supported)", ("table_definition_cache", ">", "612")),
        ("thread_cache_size (start at 4)", ("thread_cache_size", "=", "4")),
        ("key_buffer_size (~ 12K)", ("key_buffer_size", "~", "12K")),
        ("key_buffer_size=0", ("key_buffer_size", "=", "0")),
        ("SET innodb_stats_on_metadata = OFF", ("innodb_stats_on_metadata", "=", "OFF")),
        ("long_query_time (<= 10)", ("long_query_time", "<=", "10")),
        ("wait_timeout (< 28800)", ("wait_timeout", "<", "28800")),
        ("innodb_buffer_pool_instances(=1)", ("innodb_buffer_pool_instances", "=", "1")),
        ("thread_pool_size between 16 and 36 for InnoDB usage", ("thread_pool_size", "between", "16")),
        ("set up parameter wsrep_notify_cmd to be notify", ("", "text", None)),
    ],
)
def test_parser_line_formats(line: str, expected: tuple[str, str, str | None]) -> None:
    a = M.parse_line(line)
    assert (a.name, a.relation, a.value) == expected
    assert a.raw == line


def _report(*lines: str) -> M.TunerReport:
    text = " >>  MySQLTuner 1.9.9\n-------- Recommendations ----\nVariables to adjust:\n"
    return M.parse(text + "".join(f"    {x}\n" for x in lines))


def test_choose_applies_numbers_and_picks_directions_within_the_budget() -> None:
    rep = _report(
        "performance_schema=ON",
        "innodb_buffer_pool_size (>= 800.0M) if possible.",
        "innodb_log_file_size should be (=16M) if possible, so InnoDB total log files size equals 25% of "
        "buffer pool size.",
        "join_buffer_size (> 256.0K, or always use indexes with JOINs)",
        "thread_cache_size (start at 4)",
    )
    current = {"innodb_buffer_pool_size": str(64 * MiB), "join_buffer_size": str(256 * 1024)}

    def fits(cfg: dict[str, str]) -> bool:  # a stand-in budget: the pool may not exceed 300M
        pool = M.to_number(cfg.get("innodb_buffer_pool_size", "0")) or 0
        return pool <= 300 * MiB

    ch = M.choose(rep, current, 1024 * MiB, fits)
    # ≥ 800M is capped at 75 % of 1024M = 768M, then cut to the largest fitting value, 300M.
    assert ch.values["innodb_buffer_pool_size"] == "300M"
    # 25 % of the buffer pool that is set, not of the old one.
    assert ch.values["innodb_log_file_size"] == "75M"
    assert ch.values["join_buffer_size"] == str(512 * 1024)  # twice the current value
    assert ch.values["thread_cache_size"] == "4"
    assert "performance_schema" not in ch.values
    assert any("not a number" in n and "performance_schema" in n for n in ch.notes)
    assert any("cut from 768M" in n for n in ch.notes)


def test_choose_leaves_the_pool_when_no_increase_fits() -> None:
    rep = _report("innodb_buffer_pool_size (>= 95.5M) if possible.")
    ch = M.choose(rep, {"innodb_buffer_pool_size": str(64 * MiB)}, 512 * MiB, lambda cfg: False)
    assert ch.values == {}
    assert ch.notes == [
        "not applied: innodb_buffer_pool_size (>= 95.5M) if possible. (no increase fits agenticdb's memory budget)"
    ]


# ---- MySQLTuner: the real tool --------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("mysqltuner") is None, reason="mysqltuner not installed (scripts/install.sh)")
@pytest.mark.slow
def test_real_mysqltuner_against_private_mariadb(mariadb_sandbox) -> None:  # type: ignore[no-untyped-def]
    with mariadb_sandbox.connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS peers_t")
        cur.execute("CREATE TABLE IF NOT EXISTS peers_t.t (id INT PRIMARY KEY, v VARCHAR(200)) ENGINE=InnoDB")
        cur.execute("INSERT IGNORE INTO peers_t.t SELECT seq, REPEAT('x', 200) FROM peers_t.seq_1_to_20000")
        cur.execute("SELECT COUNT(*), MAX(v) FROM peers_t.t")
    try:
        rep = M.run(mariadb_sandbox.port, 512 * MiB, server_log=mariadb_sandbox.log_file, timeout_s=300)
    finally:
        with mariadb_sandbox.connect() as conn, conn.cursor() as cur:
            cur.execute("DROP DATABASE IF EXISTS peers_t")
    assert rep.exit_code == 0 and rep.complete, rep.output[-2000:]
    assert re.fullmatch(r"\d+\.\d+\.\d+", rep.version) and rep.version == M.version()
    assert "Assuming 512 MB of physical memory" in rep.output
    assert rep.advice, rep.output[-2000:]
    section = rep.output[rep.output.index("Variables to adjust:") :]
    for a in rep.advice:
        assert a.raw in section
    # With 512 MB told, 100 connections × MariaDB's default per-thread buffers exceed RAM by its formula.
    assert rep.max_memory is not None and "of installed RAM" in rep.max_memory


@pytest.mark.skipif(shutil.which("mysqltuner") is None, reason="mysqltuner not installed (scripts/install.sh)")
def test_real_mysqltuner_advises_on_a_server_that_wrote_no_redo_log() -> None:
    import os
    import tempfile

    from agenticdb.sandbox.mariadb import MariaDBSandbox

    # A fresh private MariaDB (not the session's shared one, which other tests write to) with reads only:
    # no InnoDB redo log write since it started, which 1.9.9 divides by.
    base = Path(tempfile.mkdtemp(prefix="agenticdb-mt-ro-"))
    os.chmod(base, 0o755)  # the mysql user must reach its data and socket directories
    sandbox = MariaDBSandbox(base)
    info = sandbox.up()
    try:
        with info.connect() as conn, conn.cursor() as cur:
            cur.execute("SELECT COUNT(*), SUM(seq) FROM mysql.seq_1_to_200000")  # reads only (Sequence engine)
            cur.execute("SELECT COUNT(*) FROM information_schema.tables")
            cur.execute("SHOW GLOBAL STATUS LIKE 'Innodb_log_writes'")
            assert cur.fetchall() == (("Innodb_log_writes", "0"),)  # the precondition of the crash
        rep = M.run(info.port, 512 * MiB, server_log=info.log_file, timeout_s=300)
    finally:
        sandbox.down()
        shutil.rmtree(base, ignore_errors=True)
    assert rep.exit_code == 0 and rep.complete and rep.failure == "", rep.output[-2000:]
    assert "Illegal division by zero" not in rep.output
    # the shim hid "Innodb_log_writes 0": 1.9.9's "status not available" branch (1 request, 1 write)
    assert "InnoDB log waits: 0.00% (0 waits / 1 writes)" in rep.output
    assert "Variables to adjust:" in rep.output


def test_choose_a_refused_number_does_not_block_the_directions() -> None:
    rep = _report("key_buffer_size=0", "innodb_buffer_pool_size (>= 95.5M) if possible.")

    def fits(cfg: dict[str, str]) -> bool:  # stand-in validator that refuses key_buffer_size=0
        return "key_buffer_size" not in cfg

    ch = M.choose(rep, {"innodb_buffer_pool_size": str(64 * MiB)}, 512 * MiB, fits)
    assert ch.values == {"innodb_buffer_pool_size": "96M"}  # 95.5M rounded up to whole MiB
    assert ch.notes[0].startswith("not applied: key_buffer_size=0") and "refused" in ch.notes[0]


# ---- share of oracle gain ------------------------------------------------------------------------------


def _finals(**objs: list[float]) -> tuple[dict, dict]:
    from benchmarks.harness.competitors import Result
    from benchmarks.harness.runner import Remeasure

    results = {k: Result(k, None) for k in objs}  # type: ignore[arg-type]
    return results, {k: Remeasure(objective=v) for k, v in objs.items()}


def test_share_of_oracle_gain_lower_is_better() -> None:
    from benchmarks.harness.runner import oracle_reference, share_of_oracle

    # TPC-H total time: default 100 s, oracle 50 s in every pair (far beyond a 2 % noise), agenticdb 75 s.
    results, finals = _finals(default=[100.0, 100.0, 100.0], oracle=[50.0, 50.0, 50.0])
    ref = oracle_reference(results, finals, higher=False, noise=0.02)
    assert ref["shown"] and ref["verdict"] == "better"
    assert share_of_oracle(75.0, ref) == 0.5
    assert share_of_oracle(100.0, ref) == 0.0 and share_of_oracle(50.0, ref) == 1.0


def test_share_is_not_shown_when_the_oracle_gain_is_noise() -> None:
    from benchmarks.harness.runner import oracle_reference, share_of_oracle

    results, finals = _finals(default=[100.0, 120.0, 90.0], oracle=[110.0, 115.0, 95.0])
    ref = oracle_reference(results, finals, higher=True, noise=0.15)
    assert ref["ran"] and not ref["shown"] and "no share is shown" in ref["reason"]
    assert share_of_oracle(130.0, ref) is None
    results, finals = _finals(default=[100.0])
    assert oracle_reference(results, finals, higher=True, noise=0.1) == {
        "ran": False,
        "shown": False,
        "reason": "oracle not run (add it with --competitors …,oracle)",
    }


def test_competitors_on_one_configuration_are_one_arm() -> None:
    """Competitors whose final configurations have the same effective values are grouped to the first of
    them (the re-measurement then measures that arm once per repeat and shares its runs); a value that
    differs, even one knob, keeps its own arm."""
    from agenticdb.models import Snapshot
    from benchmarks.harness.competitors import Result
    from benchmarks.harness.runner import same_configuration

    start = {"innodb_buffer_pool_size": "134217728", "innodb_log_file_size": "100663296"}
    results = {
        "default": Result("default", Snapshot(target="mariadb", values=dict(start), label="start")),
        "tpe": Result("tpe", Snapshot(target="mariadb", values={**start, "innodb_buffer_pool_size": "85983232"})),
        # the same values in another order, written by another competitor at another time
        "agenticdb": Result("agenticdb", Snapshot(target="mariadb", values=dict(reversed(start.items())))),
        "agenticdb-half": Result("agenticdb-half", Snapshot(target="mariadb", values=dict(start), label="x")),
    }
    assert same_configuration(results) == {
        "default": "default",
        "tpe": "tpe",
        "agenticdb": "default",
        "agenticdb-half": "default",
    }


def test_finals_with_no_values_read_are_never_one_arm() -> None:
    """A final snapshot taken while the server was down has no values (``PostgresTarget.snapshot``: "empty while
    the server is down"); its configuration is in its files only. Two such competitors, their files different,
    were grouped as one configuration (the same empty values) and re-measured as one arm."""
    from agenticdb.models import Snapshot
    from benchmarks.harness.competitors import Result
    from benchmarks.harness.runner import same_configuration

    conf = "/var/lib/pg/data/postgresql.auto.conf"
    down = {
        "agenticdb": Result("agenticdb", Snapshot(target="postgresql", files={conf: "work_mem = '64MB'\n"})),
        "agenticdb-half": Result("agenticdb-half", Snapshot(target="postgresql", files={conf: "work_mem = '8MB'\n"})),
        "tpe": Result("tpe", Snapshot(target="postgresql", files={conf: "work_mem = '8MB'\n"})),
    }
    assert same_configuration(down) == {c: c for c in down}


def test_report_shows_labels_and_the_share_column() -> None:
    from benchmarks.harness.report import markdown

    def row(name: str, med: float, share: float | None, label: str = "") -> dict:
        res = {"label": label, "time_to_best_s": 0.0, "rounds": 0, "failed": 0, "recovered": 0, "rejected": 0}
        res |= {"left_down": 0, "validator_ms": [], "planner_ms": [], "overhead": {}, "changes": {}, "notes": []}
        return {
            "competitor": name,
            "median": med,
            "spread": [med, med],
            "tps_median": None,
            "p95_median_ms": None,
            "gain_vs_default": 0.0,
            "verdict_vs_default": "n/a",
            "agenticdb_vs": {},
            "share_of_oracle_gain": share,
            "result": res,
        }

    summary = {
        "scenario": "x",
        "about": "",
        "higher_is_better": False,
        "noise_cv": 0.02,
        "budget_min": 1,
        "repeats": 3,
        "oracle": {"ran": True, "shown": True, "reason": ""},
        "rows": [row("default", 100, 0.0), row("static", 75, 0.5, P.LABEL), row("oracle", 50, 1.0, "Optuna TPE")],
    }
    md = markdown([summary])
    assert f"| static — {P.LABEL} | 75.00 |" in md
    assert "could not advise" not in md
    assert "| 50 % |" in md and "| 100 % |" in md
    assert next(x for x in md.splitlines() if x.startswith("| competitor")).endswith("| share of oracle gain |")


def test_report_shows_a_peer_that_could_not_advise() -> None:
    from benchmarks.harness.report import markdown

    res = {"label": "MySQLTuner 1.9.9 + rules", "time_to_best_s": 0.0, "rounds": 0, "failed": 0, "recovered": 0}
    res |= {"rejected": 0, "left_down": 0, "validator_ms": [], "planner_ms": [], "overhead": {}, "changes": {}}
    rep = M.parse((DATA / "mariadb-10.11-no-log-writes-crash.txt").read_text(), exit_code=255)
    res |= {"notes": ["output in out/mysqltuner.txt"], "could_not_advise": rep.failure}
    row = {
        "competitor": "static",
        "median": 100.0,
        "spread": [99.0, 101.0],
        "tps_median": 50.0,
        "p95_median_ms": 2.0,
        "gain_vs_default": 0.0,
        "verdict_vs_default": "tie",
        "agenticdb_vs": {},
        "share_of_oracle_gain": None,
        "result": res,
    }
    summary = {"scenario": "mariadb-x", "about": "", "higher_is_better": True, "noise_cv": 0.05, "budget_min": 8}
    md = markdown([summary | {"repeats": 3, "oracle": {}, "rows": [row]}])
    line = next(x for x in md.splitlines() if x.startswith("| static"))
    assert "| could not advise: MySQLTuner 1.9.9 ended before its recommendations (exit 255): Illegal division" in line
    assert "| tie |" not in line  # never shown as if it had advised the start configuration
    assert "- **static**: could not advise: MySQLTuner 1.9.9" in md


def test_a_peers_trial_may_lower_a_cache_the_server_does_not_use(mariadb_sandbox) -> None:  # type: ignore[no-untyped-def]
    """The peers' trials are validated with the server's runtime gauges, as agenticdb's own sets are: the capacity
    rule of the MyISAM key cache (c9f3df9) refused TPE's key_buffer_size 22 MiB (its best MariaDB set of
    2026-12-07) because the harness gave the validator no observation of the blocks in use."""

    from agenticdb.config import Settings
    from agenticdb.host.hardware import detect_hardware
    from agenticdb.targets.mysql import MySQLTarget
    from benchmarks.harness.competitors import Bench, validate_config

    target = MySQLTarget.from_config(mariadb_sandbox.target_config())
    try:
        bench = Bench(
            scenario=cast(Any, None),
            instance=cast(Any, None),
            settings=Settings(),
            target=target,
            workload=cast(Any, None),
            catalog=target.catalog(),
            hardware=detect_hardware(target.data_dir),
            start=cast(Any, None),
            out=Path("."),
            budget_s=0.0,
        )
        verdict, _ = validate_config(bench, {"key_buffer_size": str(22 * MiB)}, "tpe")
    finally:
        target.close()
    assert verdict.ok, [f.message for f in verdict.failed]
