"""``agenticdb advise`` / ``apply`` on the private PostgreSQL and MariaDB (real servers, real parsers).

The output formats are checked by the tools that consume them: ``psql -f`` (ALTER SYSTEM),
``postgres -C`` on a scratch configuration directory, ``mariadbd --defaults-file=… --help --verbose`` and
``sysctl -p`` (which applies: the original value is read first and written back in ``finally``).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agenticdb.advice.advise import advise
from agenticdb.advice.formats import render
from agenticdb.advice.types import Advice, Recommendation
from agenticdb.app import advice_parts, build_target
from agenticdb.config import load_config
from agenticdb.config.sections import TargetConfig
from agenticdb.models import ApplyMode, KnobSpec, Layer
from agenticdb.sandbox.mariadb import MariaDBSandboxInfo
from agenticdb.sandbox.postgres import PostgresSandboxInfo
from agenticdb.store.journal import Journal
from agenticdb.units import parse_value
from agenticdb.units.people import mysql_set_number

ENV = {**os.environ, "COLUMNS": "200", "TERM": "dumb", "NO_COLOR": "1"}


def _toml_value(v: Any) -> str:
    return json.dumps(v) if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else str(v)


def write_config(path: Path, tcfg: TargetConfig, home: Path, extra: str = "") -> Path:
    """A config file for the CLI: the sandbox's [target] (and [target.service]), storage home, extra."""
    t = tcfg.model_dump(mode="json", exclude_none=True)
    service = t.pop("service", {})
    lines = ["[target]"] + [f"{k} = {_toml_value(v)}" for k, v in t.items() if not isinstance(v, dict)]
    lines += ["[target.service]"] + [f"{k} = {_toml_value(v)}" for k, v in service.items()]
    lines += ["[storage]", f"home = {_toml_value(str(home))}", extra]
    path.write_text("\n".join(lines) + "\n")
    return path


def cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agenticdb.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=ENV,
        stdin=subprocess.DEVNULL,
    )


def advice_json(config: Path) -> dict[str, Any]:
    r = cli("advise", "--config", str(config), "--format", "json", "--observe", "0.5")
    assert r.returncode == 0, r.stderr
    data: dict[str, Any] = json.loads(r.stdout)
    return data


RULE_BASED = ("floor:", "trap:", "sizing:")
"""Rules that read no observation window: the configuration in effect and the host's size only."""


def assert_same_advice(first: dict[str, Any], second: dict[str, Any]) -> None:
    """Two ``advise --format json`` runs on one server a moment apart recommend the same wherever both
    derive it from the same readings (the same recommendation keeps its id across runs).

    * Every (knob, rule) both runs recommend carries one id (a hash of server, knob and rule).
    * DBMS layer: the rule-based recommendations (floors, traps, host sizing) are one set with one id
      each; they read the private server's configuration and the host's size, which nothing changes
      between the runs. Only a knob a diagnosis took in either window (an ``entry:`` recommendation: the
      window's statistics are a reading of their own) may move.
    * OS layer: the host's sysctls and memory pressure are shared with every process on it — a
      concurrent OS test applies a sysctl, reads it back and restores it; another process's load makes
      one window diagnose memory_reclaim (commit 8443a04) — so a knob may appear in one run only (a
      ``sizing:vm.min_free_kbytes`` of the first run was missing from the second: its reading moved). A
      knob both runs read at the same value (``current``) and neither diagnosed has the same rule and id.
    * Findings: the same ids, but for the host checks (transparent huge pages, swap in use) that read
      host state the same way.

    Raises:
        AssertionError: naming what moved.
    """
    from agenticdb.advice.findings import SWAP_SOURCE, THP_SOURCE

    a, b = first["recommendations"], second["recommendations"]
    ids = {(r["knob"], r["rule"]): r["id"] for r in b}
    assert all(ids.get((r["knob"], r["rule"]), r["id"]) == r["id"] for r in a), "one (knob, rule), two ids"
    diagnosed = {r["knob"] for r in a + b if r["rule"].startswith("entry:")}

    def rule_based(recs: list[dict[str, Any]], layer: str) -> dict[str, tuple[str, str]]:
        return {
            r["knob"]: (r["rule"], r["id"])
            for r in recs
            if r["layer"] == layer and r["rule"].startswith(RULE_BASED) and r["knob"] not in diagnosed
        }

    dbms = rule_based(a, "dbms")
    assert dbms and dbms == rule_based(b, "dbms"), "DBMS rule-based recommendations changed between the runs"
    read = {r["knob"]: r["current"] for r in b if r["layer"] == "os"}
    same = {k: v for k, v in rule_based(a, "os").items() if k in read and read[k] == _current(a, k)}
    again = rule_based(b, "os")
    assert all(again.get(k) == v for k, v in same.items()), (
        f"OS recommendations read at the same value changed: { {k: (v, again.get(k)) for k, v in same.items()} }"
    )
    host = (SWAP_SOURCE, THP_SOURCE)
    assert {f["id"] for f in first["findings"] if f["source"] not in host} == {
        f["id"] for f in second["findings"] if f["source"] not in host
    }


def _current(recs: list[dict[str, Any]], knob: str) -> str | None:
    return next(r["current"] for r in recs if r["knob"] == knob)


@pytest.fixture()
def pg_config(pg_sandbox: PostgresSandboxInfo, storage_home: Path, tmp_path: Path) -> Path:
    return write_config(tmp_path / "agenticdb.toml", pg_sandbox.target_config("postgres"), storage_home)


def test_pg_json_has_ids_evidence_apply_verdict_and_ids_are_stable(pg_config: Path) -> None:
    first, second = advice_json(pg_config), advice_json(pg_config)
    # the class the sizing rules use is told with its evidence and thresholds (agenticdb.planner.access)
    for adv in (first, second):
        cls_note = next(n for n in adv["notes"] if n.startswith("workload class "))
        assert "assumed: advise knows no workload" in cls_note or "rows per statement" in cls_note, cls_note
    recs = first["recommendations"]
    assert recs, "a fresh cluster (shared_buffers 128MB on this host) must get recommendations"
    for r in recs:
        assert r["id"].startswith("R") and len(r["id"]) == 11
        assert r["evidence"] and r["source"] and r["apply"] in ("dynamic", "reload", "restart")
        assert r["verdict"] in ("accept", "reject") and r["confidence_origin"]
    sb = next(r for r in recs if r["knob"] == "shared_buffers")
    assert sb["apply"] == "restart" and sb["verdict"] == "accept" and sb["current"] == "128MB"
    # rule-based recommendations do not depend on the observation window: the same set, the same ids
    # (a default below the host's size is a sizing rule: a floor fires only below the shipped default),
    # wherever both runs read the same values (see assert_same_advice)
    assert_same_advice(first, second)
    cfg = load_config(pg_config)
    with psycopg.connect(cfg.target.dsn or "", autocommit=True) as conn:
        row = conn.execute("SHOW shared_preload_libraries").fetchone()
    loaded = row is not None and "pg_stat_statements" in str(row[0])
    assert any("pg_stat_statements" in f["title"] for f in first["findings"]) is not loaded


def _pg_advice(config: Path) -> Advice:
    cfg = load_config(config)
    target = build_target(cfg)
    try:
        return advise(cfg, target, observe_s=0.2, os_layer=False, parts=advice_parts())
    finally:
        target.close()


def test_pg_sql_is_accepted_by_psql(pg_sandbox: PostgresSandboxInfo, pg_config: Path, tmp_path: Path) -> None:
    adv = _pg_advice(pg_config)
    sql = render(adv, "sql")
    assert "ALTER SYSTEM SET shared_buffers" in sql and "pg_reload_conf" in sql
    f = tmp_path / "advice.sql"
    f.write_text(sql)
    auto = Path(pg_sandbox.data_dir) / "postgresql.auto.conf"
    before = auto.read_text()
    try:
        r = subprocess.run(
            [shutil.which("psql") or "psql", "-X", "-v", "ON_ERROR_STOP=1", "-d", pg_sandbox.dsn, "-f", str(f)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0, r.stderr
        written = auto.read_text()
        for rec in adv.recommendations:
            if rec.verdict == "accept":
                assert f"{rec.knob} = '{rec.recommended}'" in written
    finally:
        auto.write_text(before)
        with psycopg.connect(pg_sandbox.dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_reload_conf()")


def _postgres_C(info: PostgresSandboxInfo, confdir: Path, name: str) -> subprocess.CompletedProcess[str]:
    cmd = [str(Path(info.bindir) / "postgres"), "-C", name, "-D", str(confdir)]
    if os.geteuid() == 0:
        cmd = ["su", info.os_user or "postgres", "-s", "/bin/sh", "-c", " ".join(cmd)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30)


def test_pg_conf_is_accepted_by_the_server_parser(pg_sandbox: PostgresSandboxInfo, pg_config: Path) -> None:
    """``postgres -C`` reads a scratch postgresql.conf that includes the advice file (the data directory
    is only named; nothing of the running sandbox changes) and reports the values it parsed."""
    adv = _pg_advice(pg_config)
    confdir = Path(tempfile.mkdtemp(prefix="agenticdb-advconf-"))
    try:
        confdir.chmod(0o755)
        (confdir / "advice.conf").write_text(render(adv, "conf"))
        main = f"data_directory = '{pg_sandbox.data_dir}'\ninclude 'advice.conf'\n"
        (confdir / "postgresql.conf").write_text(main)
        accepted = [r for r in adv.recommendations if r.verdict == "accept"]
        assert accepted
        for rec in accepted:
            r = _postgres_C(pg_sandbox, confdir, rec.knob)
            assert r.returncode == 0, r.stderr
            assert r.stdout.strip() not in ("", rec.current)
        (confdir / "advice.conf").write_text("shared_buffers = 'lots'\n")  # the check can fail
        assert _postgres_C(pg_sandbox, confdir, "shared_buffers").returncode != 0
    finally:
        shutil.rmtree(confdir, ignore_errors=True)


def test_fail_on_gates_with_exit_3(pg_config: Path) -> None:
    r = cli("advise", "--config", str(pg_config), "--observe", "0", "--no-os", "--fail-on", "medium")
    assert r.returncode == 3, r.stdout + r.stderr  # shared_buffers 128MB, 1/47 of its host sizing: medium
    assert "shared_buffers" in r.stdout and "reached --fail-on medium" in r.stderr
    r = cli("advise", "--config", str(pg_config), "--observe", "0", "--no-os", "--fail-on", "critical")
    assert r.returncode == 0, r.stderr
    r = cli("advise", "--config", str(pg_config), "--fail-on", "severe")
    assert r.returncode == 2 and "--fail-on 'severe'" in r.stderr


def test_apply_then_rollback_restores_the_values_from_before(
    pg_sandbox: PostgresSandboxInfo, pg_config: Path, storage_home: Path
) -> None:
    recs = advice_json(pg_config)["recommendations"]
    rec = next(r for r in recs if r["knob"] in ("work_mem", "maintenance_work_mem") and r["verdict"] == "accept")

    def show(name: str) -> str:
        with psycopg.connect(pg_sandbox.dsn, autocommit=True) as conn:
            row = conn.execute(f"SHOW {name}").fetchone()
        assert row is not None
        return str(row[0])

    before = show(rec["knob"])
    r = cli("apply", rec["id"], "--config", str(pg_config), "--observe", "0")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "applied and verified" in r.stdout
    assert show(rec["knob"]) == rec["recommended"] != before
    with Journal(storage_home / "journal.db", read_only=True) as j:
        events = [e.event for e in j.events() if "apply" in e.session_id]
    assert {"intent", "applied", "verified", "intent.closed", "session.end"} <= set(events)
    # the undo hint works as pasted: it names the same --config (it said only "rollback --dbms": no target)
    undo = next(ln for ln in r.stdout.splitlines() if ln.startswith("undo with: "))
    assert undo == f"undo with: agenticdb rollback --dbms --config {shlex.quote(str(pg_config))}", undo
    r = cli(*shlex.split(undo.removeprefix("undo with: "))[1:])
    assert r.returncode == 0, r.stdout + r.stderr
    assert show(rec["knob"]) == before


def test_apply_unknown_id_is_a_clear_error(pg_config: Path) -> None:
    r = cli("apply", "Rnothere", "--config", str(pg_config), "--observe", "0")
    assert r.returncode == 2
    assert "'Rnothere' is not among the current recommendations" in r.stderr and "Traceback" not in r.stderr


def test_mariadb_json_and_conf_accepted_by_mariadbd(
    mariadb_sandbox: MariaDBSandboxInfo, storage_home: Path, tmp_path: Path
) -> None:
    config = write_config(
        tmp_path / "agenticdb.toml",
        mariadb_sandbox.target_config(),
        storage_home,
        '[workload]\nkind = "sysbench-oltp-read-write"',
    )
    data, again = advice_json(config), advice_json(config)
    for r in data["recommendations"]:
        assert r["id"].startswith("R") and len(r["id"]) == 11 and r["evidence"] and r["source"]
        assert r["apply"] in ("dynamic", "reload", "restart") and r["verdict"] in ("accept", "reject")
    pool = next(r for r in data["recommendations"] if r["knob"] == "innodb_buffer_pool_size")
    assert pool["verdict"] == "accept", json.dumps(pool)
    # the same recommendation on the same server keeps its id across runs, wherever both runs read the same
    # values (as on PostgreSQL): it failed once when the host's vm.min_free_kbytes reading moved between them
    assert_same_advice(data, again)
    adv = Advice.model_validate(data)
    conf = render(adv, "conf")
    assert "[mysqld]" in conf
    scratch = tmp_path / "scratch.cnf"
    scratch.write_text(conf)
    r = subprocess.run(
        [shutil.which("mariadbd") or "mariadbd", f"--defaults-file={scratch}", "--help", "--verbose"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr[-500:]
    parsed = {line.split()[0]: line.split()[-1] for line in r.stdout.splitlines() if len(line.split()) >= 2}
    # the option file carries the advised spelling ("12052M"); the server reads it as that many bytes
    assert parsed["innodb-buffer-pool-size"] == mysql_set_number(pool["recommended"])
    sql = render(adv, "sql")
    assert "SET GLOBAL innodb_buffer_pool_size" in sql and "-- [mysqld]" in sql
    scratch.write_text("[mysqld]\ninnodb_buffer_pool_sizes = 1\n")  # the check can fail
    bad = subprocess.run(["mariadbd", f"--defaults-file={scratch}", "--help", "--verbose"], capture_output=True)
    assert bad.returncode != 0


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="sysctl -p writes /proc/sys")
def test_sysctl_file_is_accepted_by_sysctl_p(tmp_path: Path) -> None:
    """``sysctl -p`` applies what it parses: the file carries the value in effect, and the original is
    written back in ``finally`` whatever happens."""
    proc = Path("/proc/sys/vm/swappiness")
    original = proc.read_text().strip()
    rec = Recommendation(
        id="Rtest",
        knob="vm.swappiness",
        layer=Layer.os,
        current=original,
        recommended=original,
        apply=ApplyMode.dynamic,
        bottleneck="memory_reclaim",
        rule="test",
        reason="test",
        source="test",
        evidence=["test"],
    )
    adv = Advice(target="t", kind="postgresql", version="15", generated_at="now", observed_s=0, hardware={})
    # sysfs files are not sysctls (sysctl -p would refuse them): comments that name the file
    block = rec.model_copy(update={"id": "Rblk", "knob": "block.vda.iosched.fifo_batch", "recommended": "8"})
    thp = rec.model_copy(update={"id": "Rthp", "knob": "thp.enabled", "recommended": "madvise"})
    adv.recommendations = [rec, block, thp]
    f = tmp_path / "99-agenticdb.conf"
    text = render(adv, "sysctl")
    assert "# not a sysctl: write 8 to /sys/block/vda/queue/iosched/fifo_batch" in text
    assert "# not a sysctl: write madvise to /sys/kernel/mm/transparent_hugepage/enabled" in text
    f.write_text(text)
    try:
        r = subprocess.run(["sysctl", "-p", str(f)], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == f"vm.swappiness = {original}"
    finally:
        proc.write_text(original)
    assert proc.read_text().strip() == original


def test_confidence_says_where_an_experience_comes_from(pg_config: Path, storage_home: Path) -> None:
    """An experience from this host (same DBMS, version, memory, CPUs) is "measured"; one from a host of
    another size is "experience"; both come from the real Memory Book (SQLite)."""
    from agenticdb.advice.advise import host_fingerprint
    from agenticdb.host.hardware import detect_hardware
    from agenticdb.models.planning import Experience
    from agenticdb.store.memory import MemoryBook

    cfg = load_config(pg_config)
    target = build_target(cfg)
    try:
        here = host_fingerprint(target.kind, target.version_major(), detect_hardware(target.data_dir))
        elsewhere = here.model_copy(update={"memory_gib": here.memory_gib * 4, "cpu_count": here.cpu_count + 6})
        assert cfg.storage.memory_db is not None
        with MemoryBook(cfg.storage.memory_db) as book:
            for sid, fp, knob, value in (
                ("s-here", here, "wal_buffers", "16MB"),
                ("s-else", elsewhere, "checkpoint_completion_target", "0.7"),
            ):
                book.write_experience(
                    Experience(
                        fingerprint=fp,
                        session_id=sid,
                        beneficial=[{"changes": {knob: value}, "gain": 0.12, "bottleneck": "wal_fsync"}],
                    )
                )
        adv = advise(cfg, target, observe_s=0.1, os_layer=False, parts=advice_parts())
    finally:
        target.close()
    by = {r.knob: r for r in adv.recommendations}
    assert by["wal_buffers"].confidence == "measured" and "s-here" in by["wal_buffers"].source
    assert by["checkpoint_completion_target"].confidence == "experience"
    assert "similar host" in by["checkpoint_completion_target"].confidence_origin
    assert by["shared_buffers"].confidence == "rule"


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="applying a sysctl writes /proc/sys")
def test_apply_of_a_sysctl_saves_the_original_and_rollback_os_restores_it(pg_config: Path) -> None:
    recs = advice_json(pg_config)["recommendations"]
    rec = next(
        (
            r
            for r in recs
            if r["layer"] == "os"
            and r["verdict"] == "accept"
            and (Path("/proc/sys") / r["knob"].replace(".", "/")).exists()
        ),
        None,
    )
    if rec is None:
        pytest.skip("no accepted sysctl recommendation on this host now")
    proc = Path("/proc/sys") / rec["knob"].replace(".", "/")
    original = proc.read_text().strip()
    try:
        r = cli("apply", rec["id"], "--config", str(pg_config), "--observe", "0")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "rollback --dbms --os" in r.stdout
        assert proc.read_text().strip() == rec["recommended"] != original
        r = cli("rollback", "--os", "--config", str(pg_config))
        assert r.returncode == 0, r.stdout + r.stderr
        assert proc.read_text().strip() == original
    finally:
        proc.write_text(original)


def test_relaxed_durability_is_a_finding_not_a_change(pg_sandbox: PostgresSandboxInfo, pg_config: Path) -> None:
    """synchronous_commit = off on the real server: a medium finding with its evidence, and no
    recommendation touches it (agenticdb never sets durability, and does not undo a DBA's choice)."""
    with psycopg.connect(pg_sandbox.dsn, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET synchronous_commit = off")
        conn.execute("SELECT pg_reload_conf()")
    try:
        adv = _pg_advice(pg_config)
    finally:
        with psycopg.connect(pg_sandbox.dsn, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM RESET synchronous_commit")
            conn.execute("SELECT pg_reload_conf()")
    found = [f for f in adv.findings if "synchronous_commit" in f.title]
    assert len(found) == 1 and found[0].severity == "medium" and "'off'" in found[0].evidence
    assert all(r.knob != "synchronous_commit" for r in adv.recommendations)
    assert adv.worst() in ("medium", "high", "critical")


def test_os_confidence_is_rule_only_when_the_server_was_idle(pg_config: Path) -> None:
    """OS moves the diagnosis of host statistics triggers are "diagnosis" only when the database did work
    in the window (here: a real session running pg_sleep during the observation), and "rule" with an
    origin that says so when it was idle. Windows, catalogs and current values are the real ones; the host
    hypothesis is given at full score so each OS bottleneck's moves are exercised whatever this host's
    pressure is."""
    import threading

    from agenticdb.advice.advise import IDLE_HOST_ORIGIN, Advisor, host_fingerprint, observe, target_identity
    from agenticdb.app import host_state_source, linux_target
    from agenticdb.host.hardware import detect_hardware
    from agenticdb.models import Bottleneck
    from agenticdb.planner.diagnosis import Hypothesis

    cfg = load_config(pg_config)
    target = build_target(cfg)
    try:
        hw = detect_hardware(target.data_dir)
        linux = linux_target(cfg, data_dir=target.data_dir)
        os_cat = linux.catalog()
        os_cur = linux.current_values(list(os_cat.knobs))
        host = host_state_source(cfg, target)
        sources = [target.runtime_state] + ([host] if host is not None else [])
        fp = host_fingerprint(target.kind, target.version_major(), hw)
        ident = target_identity(target.kind, cfg.target.dsn or "")
        hyps = [
            Hypothesis(bottleneck=b, layer=Layer.os, score=1.0, evidence=["given"])
            for b in (Bottleneck.memory_reclaim, Bottleneck.writeback, Bottleneck.io_queue)
        ]

        def os_recs(window_busy: bool) -> tuple[bool, list[Recommendation]]:
            if not window_busy:
                delta = observe(sources, 0.5)
            else:

                def sleeper() -> None:
                    with psycopg.connect(cfg.target.dsn or "", autocommit=True) as conn:
                        conn.execute("SELECT pg_sleep(2)")

                t = threading.Thread(target=sleeper)
                t.start()
                try:
                    delta = observe(sources, 1.0)
                finally:
                    t.join()
            adv = Advisor(os_cat, hw, os_cur, delta, "linux", ident, [], fp)
            return adv.server_busy(), [r for r in adv.recommendations(hyps) if r.rule.startswith("entry:")]

        idle, idle_recs = os_recs(False)
        busy, busy_recs = os_recs(True)
    finally:
        target.close()
    assert not idle and busy
    assert idle_recs and busy_recs, "the host-statistics entries give at least one OS move"
    assert {r.confidence for r in idle_recs} == {"rule"}
    assert all(r.confidence_origin == IDLE_HOST_ORIGIN and "idle" in r.confidence_origin for r in idle_recs)
    assert {r.confidence for r in busy_recs} == {"diagnosis"}


def test_real_advise_work_mem_within_pgtune_and_the_budget(pg_config: Path) -> None:
    doc = advice_json(pg_config)
    recs = {r["knob"]: r for r in doc["recommendations"]}
    wm = recs.get("work_mem")
    if wm is not None:  # sized: PGTune's formula and the budget's room, both named in its reason
        assert "PGTune" in wm["reason"] and "hash_mem_multiplier" in wm["reason"], wm
    ecs = recs.get("effective_cache_size")
    if ecs is not None:
        assert "75 %" in ecs["reason"], ecs
    mem = int(doc["hardware"]["memory_limit_bytes"])
    if wm is not None and "shared_buffers" in recs:
        per = parse_value(wm["recommended"], _spec("work_mem", "kB"))
        sb = parse_value(recs["shared_buffers"]["recommended"], _spec("shared_buffers", "8kB"))
        assert per is not None and sb is not None
        assert per * 1024 <= (mem - sb * 8192) / 3 / 50 * 1.01  # kB vs bytes; sandbox max_connections 50
    assert wm is not None or ecs is not None, doc["recommendations"]


def _spec(name: str, unit: str) -> KnobSpec:
    return KnobSpec(name=name, vartype="integer", unit=unit, apply=ApplyMode.reload)


def test_measured_recommendation_is_the_value_its_experience_cites(pg_config: Path, storage_home: Path) -> None:
    """An experience measured on this host (work_mem=V helped) is recommended at V, not at V less the
    rounding of its stored fraction of memory (16MB of a 23.6 GiB host is 0.000662, 15.99 MiB again, which
    whole-MiB rounding made "16MB -> 15MB" while citing work_mem=16MB). V is one whose fraction rounds
    below it on this host, so the test exercises the rounding wherever it runs."""
    from agenticdb.advice.advise import host_fingerprint
    from agenticdb.host.hardware import detect_hardware
    from agenticdb.models.planning import Experience
    from agenticdb.store.memory import MemoryBook
    from agenticdb.store.memory.experience import relative_values

    cfg = load_config(pg_config)
    target = build_target(cfg)
    try:
        hw = detect_hardware(target.data_dir, pid=target.server_pid())
        mem = hw.memory_limit_bytes
        mib = next(
            (v for v in (16, 24, 32, 48, 40, 56, 64, 80, 96) if round(v * 2**20 / mem, 6) * mem < v * 2**20),
            None,
        )
        if mib is None:
            pytest.skip(f"no candidate size rounds below itself on a {mem}-byte host")
        value = f"{mib}MB"
        here = host_fingerprint(target.kind, target.version_major(), hw)
        assert cfg.storage.memory_db is not None
        with MemoryBook(cfg.storage.memory_db) as book:
            book.write_experience(
                Experience(
                    fingerprint=here,
                    session_id="s-here",
                    beneficial=[{"changes": {"work_mem": value}, "gain": 4.844, "bottleneck": "sort_spill"}],
                    best_config_relative=relative_values({"work_mem": value}, [target.catalog()], hw),
                )
            )
        adv = advise(cfg, target, observe_s=0.1, os_layer=False, parts=advice_parts())
    finally:
        target.close()
    wm = {r.knob: r for r in adv.recommendations}["work_mem"]
    assert wm.confidence == "measured" and "s-here" in wm.source, wm
    assert f"work_mem={value}" in wm.reason, wm
    assert wm.recommended == value, wm
