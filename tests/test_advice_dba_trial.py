"""Findings of a DBA's trial of ``agenticdb advise``, each on the private PostgreSQL / MariaDB:

1. root causes are probed in the database the DSN names (not the benchmark's ``target.database``), the
   output says which, and an approved remedy runs there too;
2. ``autovacuum = off`` (server-wide) is a finding with its evidence, its fix and the manual's chapter;
3. MariaDB: the redo log is sized from the buffer pool advise recommends, and sizes read in human units.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pymysql
import pytest
from rich.console import Console
from test_advice import write_config

from agenticdb.advice.advise import advise, advised_database
from agenticdb.advice.formats import render
from agenticdb.advice.remediation import run_approved
from agenticdb.advice.types import Advice
from agenticdb.app import advice_parts, build_target
from agenticdb.cli.advise_cmd import print_text
from agenticdb.config import Settings, load_config
from agenticdb.rootcause import Finding
from agenticdb.sandbox.mariadb import MariaDBSandboxInfo
from agenticdb.sandbox.postgres import PostgresSandboxInfo
from agenticdb.store.journal import Journal

APP_DB = "dba_app"
"""The DBA's own database; ``target.database`` stays the default ``agenticdb_bench`` (a benchmark's)."""

MiB = 1024**2


def _with_db(dsn: str, db: str) -> str:
    return psycopg.conninfo.make_conninfo(dsn, dbname=db)


def _advice(config: Path) -> tuple[Settings, Advice]:
    cfg = load_config(config)
    target = build_target(cfg)
    try:
        return cfg, advise(cfg, target, observe_s=0.3, os_layer=False, parts=advice_parts())
    finally:
        target.close()


def _text(adv: Advice) -> str:
    out = io.StringIO()
    print_text(adv, Console(file=out, width=250, color_system=None, highlight=False))
    return out.getvalue()


# ------------------------------------------------------------------------------------------ PostgreSQL
@pytest.fixture
def pg_app(pg_sandbox: PostgresSandboxInfo, storage_home: Path, tmp_path: Path) -> Iterator[Path]:
    """``dba_app`` on the private server with one table of stale statistics (50,000 rows, 90 % updated since
    its ANALYZE, autovacuum off for the table) and 55,000 dead rows (45,000 updated, 10,000 deleted); a
    config whose DSN names ``dba_app``."""
    with psycopg.connect(pg_sandbox.dsn, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {APP_DB} WITH (FORCE)")
        c.execute(f"CREATE DATABASE {APP_DB}")
    with psycopg.connect(_with_db(pg_sandbox.dsn, APP_DB), autocommit=True) as c:
        c.execute("CREATE TABLE orders(id int PRIMARY KEY, status int) WITH (autovacuum_enabled = off)")
        c.execute("INSERT INTO orders SELECT g, 0 FROM generate_series(1, 50000) g")
        c.execute("ANALYZE orders")
        c.execute("UPDATE orders SET status = 1 WHERE id % 10 <> 0")
        c.execute("DELETE FROM orders WHERE id <= 10000")
    tcfg = pg_sandbox.target_config()
    tcfg = tcfg.model_copy(update={"dsn": _with_db(tcfg.dsn or "", APP_DB)})
    assert tcfg.database == "agenticdb_bench"
    try:
        yield write_config(tmp_path / "agenticdb.toml", tcfg, storage_home)
    finally:
        with psycopg.connect(pg_sandbox.dsn, autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {APP_DB} WITH (FORCE)")


def test_pg_root_causes_are_probed_in_the_dsn_database_and_the_remedy_runs_there(
    pg_sandbox: PostgresSandboxInfo, pg_app: Path, tmp_path: Path
) -> None:
    cfg, adv = _advice(pg_app)
    assert adv.root_cause is not None
    stale = [f for f in adv.root_cause["findings"] if f["cause"] == "stale_statistics"]
    assert [f["subject"] for f in stale] == ["public.orders"], adv.root_cause
    assert adv.root_cause.get("database") == APP_DB, adv.root_cause
    assert f"root causes probed in database '{APP_DB}' (named in target.dsn)" in adv.notes
    assert f"root causes probed in database '{APP_DB}'" in _text(adv)
    shown = next(f for f in adv.findings if f.id == stale[0]["id"])
    assert shown.evidence.startswith(f"database {APP_DB}; ") and 'ANALYZE "public"."orders";' in shown.sql
    # the approved remedy runs in the database the cause was found in, not in target.database
    finding = Finding.model_validate(stale[0])
    assert finding.database == APP_DB
    cfg.remediation.dsn = pg_sandbox.dsn  # the tables' owner (the superuser of the private server)
    with Journal(tmp_path / "journal.db") as journal:
        rec = run_approved(cfg, journal, "s-trial", finding, finding.remedies[0])
    assert rec["result"] == "done" and rec["verified"], rec
    with psycopg.connect(_with_db(pg_sandbox.dsn, APP_DB), autocommit=True) as c:
        row = c.execute("SELECT n_mod_since_analyze FROM pg_stat_user_tables WHERE relname = 'orders'").fetchone()
    assert row is not None and row[0] == 0


def test_which_database_each_caller_probes(pg_app: Path) -> None:
    """advise: the DSN's; a benchmark session: ``target.database``; a live session: ``live.database``, else
    the DSN's (where the application's statements run)."""
    from agenticdb.loop.rootcause_step import dsn_database, workload_database  # lazy: the other tests run without

    cfg = load_config(pg_app)
    assert dsn_database(cfg) == APP_DB and workload_database(cfg) == "agenticdb_bench"
    live = cfg.model_copy(update={"workload": cfg.workload.model_copy(update={"kind": "live"})})
    assert workload_database(live) == APP_DB
    live.live.database = "shop"
    assert workload_database(live) == "shop"
    bare = cfg.model_copy(update={"target": cfg.target.model_copy(update={"dsn": "host=127.0.0.1 port=5432"})})
    assert dsn_database(bare) is None

    # advise on a sandbox whose DSN names the maintenance database probes the workload's; a named one stays
    def sandboxed(dsn: str) -> Settings:
        target = cfg.target.model_copy(update={"dsn": dsn, "sandbox": "postgres"})
        return cfg.model_copy(update={"target": target})

    assert advised_database(cfg) == APP_DB
    assert advised_database(sandboxed("postgresql://postgres@127.0.0.1:5999/postgres")) == "agenticdb_bench"
    assert advised_database(sandboxed("host=127.0.0.1 port=5999")) == "agenticdb_bench"
    assert advised_database(sandboxed(f"postgresql://postgres@127.0.0.1:5999/{APP_DB}")) == APP_DB


def test_pg_autovacuum_off_is_a_finding_with_evidence_fix_and_source(
    pg_sandbox: PostgresSandboxInfo, pg_app: Path
) -> None:
    with psycopg.connect(pg_sandbox.dsn, autocommit=True) as c:
        c.execute("ALTER SYSTEM SET autovacuum = off")
        c.execute("SELECT pg_reload_conf()")
    try:
        _, adv = _advice(pg_app)
        found = [f for f in adv.findings if f.title.startswith("autovacuum = off")]
        assert len(found) == 1, [f.title for f in adv.findings]
        f = found[0]
        assert f.severity == "high" and "server-wide" in f.title
        assert f.evidence.startswith("autovacuum = 'off'; "), f.evidence
        assert f"database {APP_DB}: 55,000 dead tuples in 1 table(s), most in public.orders (55000)" in f.evidence
        assert "1 table(s) never vacuumed" in f.evidence
        assert f.sql == ["ALTER SYSTEM SET autovacuum = on;", "SELECT pg_reload_conf();"]
        assert "25.1 Routine Vacuuming" in f.source and "PostgreSQL 15 manual" in f.source
        sql = render(adv, "sql")
        assert f"-- {f.id}: {f.title}\nALTER SYSTEM SET autovacuum = on;\nSELECT pg_reload_conf();" in sql
        assert "autovacuum = off" in _text(adv)
        # the fix as printed turns it on without a restart
        with psycopg.connect(pg_sandbox.dsn, autocommit=True) as c:
            for stmt in f.sql:
                c.execute(stmt.rstrip(";"))
        with psycopg.connect(pg_sandbox.dsn, autocommit=True) as c:
            row = c.execute("SHOW autovacuum").fetchone()
        assert row is not None and row[0] == "on"
        _, again = _advice(pg_app)
        assert not any(x.title.startswith("autovacuum = off") for x in again.findings)
    finally:
        with psycopg.connect(pg_sandbox.dsn, autocommit=True) as c:
            c.execute("ALTER SYSTEM RESET autovacuum")
            c.execute("SELECT pg_reload_conf()")


# ------------------------------------------------------------------------------------------ MariaDB
@pytest.fixture(scope="module")
def maria_config(mariadb_sandbox: MariaDBSandboxInfo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A config for the private MariaDB whose DSN names ``dba_app`` (target.database stays the default)."""
    conn = pymysql.connect(**_my_params(mariadb_sandbox), autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {APP_DB}")
        tcfg = mariadb_sandbox.target_config()
        dsn = re.sub(r"(mysql://[^/?]+)/?[^?]*", rf"\1/{APP_DB}", tcfg.dsn or "", count=1)
        tcfg = tcfg.model_copy(update={"dsn": dsn})
        home = tmp_path_factory.mktemp("home")
        workload = '[workload]\nkind = "sysbench-oltp-read-write"'
        yield write_config(tmp_path_factory.mktemp("cfg") / "agenticdb.toml", tcfg, home, workload)
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {APP_DB}")
        conn.close()


@pytest.fixture(scope="module")
def maria_advice(maria_config: Path) -> Advice:
    """One advise run on the private MariaDB."""
    return _advice(maria_config)[1]


def _my_params(info: MariaDBSandboxInfo) -> dict[str, Any]:
    from agenticdb.dialect import parse_mysql_dsn  # lazy: only the MariaDB tests parse its DSN

    return dict(parse_mysql_dsn(info.dsn))


def test_mariadb_root_causes_are_probed_in_the_dsn_database(maria_advice: Advice) -> None:
    rc = maria_advice.root_cause
    assert rc is not None and not any("root causes not read" in n for n in rc["notes"]), rc["notes"]
    assert rc.get("database") == APP_DB, rc
    assert f"root causes probed in database '{APP_DB}' (named in target.dsn)" in maria_advice.notes


def _size(text: str) -> int:
    """Bytes of a size in human units ("12052M")."""
    m = re.fullmatch(r"(\d+)([KMGT])", text)
    assert m is not None, f"{text!r} is not a size in human units"
    return int(m.group(1)) * 1024 ** " KMGT".index(m.group(2))


def _bytes(text: str) -> int:
    """Bytes of a size in either spelling (for the ratio, before the spelling is checked)."""
    return int(text) if text.isdigit() else _size(text)


def test_mariadb_redo_log_follows_the_advised_pool_in_human_units(maria_advice: Advice) -> None:
    recs = {r.knob: r for r in maria_advice.recommendations}
    pool, log = recs["innodb_buffer_pool_size"], recs["innodb_log_file_size"]
    assert pool.verdict == "accept" and log.verdict == "accept", (pool, log)
    # 25 % of the pool advise recommends (MySQLTuner's ratio), not of a pool it does not recommend
    assert _bytes(log.recommended) == _bytes(pool.recommended) // 4 // MiB * MiB, (pool.recommended, log.recommended)
    assert f"({_bytes(pool.recommended) // MiB} MiB)" in log.reason, log.reason
    for r in (pool, log):
        assert r.current is not None
        _size(r.current)  # "128M", not 134217728
        assert not any(re.search(r"\d{7,}", e) for e in r.evidence), r.evidence
    text = _text(maria_advice)
    assert f"{pool.current} → {pool.recommended}" in text and str(_size(pool.current or "")) not in text
    # SET takes no suffix: the SQL output writes byte counts; the option-file section the human spelling
    sql = render(maria_advice, "sql")
    assert f"SET GLOBAL innodb_buffer_pool_size = {_size(pool.recommended)};" in sql
    assert f"-- innodb_log_file_size = {log.recommended}" in sql
    assert f"innodb_buffer_pool_size = {pool.recommended}" in render(maria_advice, "conf")
    assert json.loads(render(maria_advice, "json"))["recommendations"]


def test_mariadb_redo_log_follows_the_current_pool_when_no_pool_is_recommended(maria_config: Path) -> None:
    """Without a buffer pool recommendation the reference sizes the redo log from the pool in effect; when
    that keeps the log where it is, the playbook's memory-sized log is not advised either."""
    from agenticdb.advice.advise import Advisor, host_fingerprint, judge, observe  # lazy: internals of advise
    from agenticdb.advice.sizing import advised_reference, hold_to_reference, without_no_ops
    from agenticdb.host.hardware import detect_hardware

    cfg = load_config(maria_config)
    target = build_target(cfg)
    try:
        catalog = target.catalog()
        current = target.current_values(list(catalog.knobs))
        hw = detect_hardware(target.data_dir, pid=target.server_pid())
        fp = host_fingerprint(target.kind, target.version_major(), hw)
        delta = observe([target.runtime_state], 0.1)
    finally:
        target.close()
    adv = Advisor(catalog, hw, current, delta, "mariadb", "trial", [], fp)
    recs = adv.recommendations(adv.hypotheses())
    assert {"innodb_buffer_pool_size", "innodb_log_file_size"} <= {r.knob for r in recs}
    recs = [r for r in recs if r.knob != "innodb_buffer_pool_size"]  # the advice recommends no pool

    def judged(rs: list[Any]) -> None:
        judge(rs, catalog, current, hw, cfg.policy, True)

    ref = advised_reference(recs, adv.ctx, cfg.policy, catalog, judged)
    assert ref is not None and "innodb_buffer_pool_size" not in ref.changes
    pool_now, log_now = int(current["innodb_buffer_pool_size"]), int(current["innodb_log_file_size"])
    assert pool_now // 4 <= log_now, "the private server's pool is too large for this case"
    assert "innodb_log_file_size" not in ref.changes
    assert f"({pool_now // MiB} MiB), not below the value in effect" in ref.kept["innodb_log_file_size"]
    hold_to_reference(recs, ref, catalog)
    assert "innodb_log_file_size" not in {r.knob for r in without_no_ops(recs, catalog)}


def test_sizes_spelled_for_people_and_back_for_set() -> None:
    from agenticdb.models import ApplyMode, KnobSpec  # lazy: only this pure test builds a spec
    from agenticdb.units.people import for_people, mysql_set_number

    pool = KnobSpec(name="innodb_buffer_pool_size", vartype="integer", unit="B", apply=ApplyMode.dynamic)
    count = KnobSpec(name="thread_cache_size", vartype="integer", apply=ApplyMode.dynamic)
    assert for_people("mariadb", pool, "134217728") == "128M" and for_people("mysql", pool, "12637437952") == "12052M"
    assert for_people("mariadb", pool, str(2 * 1024**3)) == "2G" and for_people("mariadb", pool, "1025") == "1025"
    assert for_people("mariadb", count, "1024") == "1024"  # a count, not bytes
    assert for_people("postgresql", pool, "128MB") == "128MB"
    assert mysql_set_number("12052M") == "12637437952" and mysql_set_number("ON") == "ON"


def test_no_empty_table_when_there_is_no_finding_or_recommendation() -> None:
    """A fresh user's `advise` printed "0 finding(s)" over an empty table: with none, one line says so."""
    adv = Advice(
        target="t", kind="postgresql", version="15", generated_at="2026-12-07T00:00:00Z", observed_s=1.0, hardware={}
    )
    for terminal in (False, True):
        out = io.StringIO()
        print_text(adv, Console(file=out, width=200, force_terminal=terminal, color_system=None, highlight=False))
        text = out.getvalue()
        assert "0 finding(s)" not in text and "0 recommendation(s)" not in text, text
        assert "advice (source)" not in text and "why (source)" not in text, text  # no table headers
        assert "no recommendation\n" in text and "no finding\n" in text, text
