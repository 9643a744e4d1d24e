"""Rules that say what the server does at start, checked by really starting a scratch server.

``postgres -C`` exits before the cross-setting start-up checks (PostmasterMain checks such as
superuser_reserved_connections < max_connections and wal_level against max_wal_senders run after it
prints), so it cannot tell whether a configuration starts: here each value a rule says the server
refuses is given to ``pg_ctl start`` (as user postgres) on the installed PostgreSQL, and each value a
rule says the server clamps is given to a fresh start of the installed PostgreSQL or MariaDB (mariadbd)
and read back. A rule whose version range excludes the installed version must be wrong about it the
other way: the server accepts its "refused" values (issue 38: ``pg.max_wal_senders_lt_connections``
said ">=10" while PostgreSQL 15 starts with max_connections = 8 and max_wal_senders = 10).

Every rule that claims a start refusal or a clamp must have a case here (the first test checks that),
so a new rule cannot skip the check.
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from agenticdb.host.services import ServiceError, run_as
from agenticdb.sandbox.mariadb import MariaDBSandbox, MariaDBSandboxInfo
from agenticdb.sandbox.postgres import PostgresSandbox, PostgresSandboxInfo
from agenticdb.validation.rules import ConflictRule, ServerCheck, Versioned, load_ruleset


@dataclass(frozen=True)
class StartCase:
    """``refused``: settings the rule says break (a start refusal, or a clamp to ``clamped_to``);
    ``log``: a fragment of the server's message for a refusal; ``accepted``: the repaired settings,
    which must start (None: cannot be started here, reason in ``why_no_accept``)."""

    refused: dict[str, str]
    log: str = ""
    accepted: dict[str, str] | None = None
    clamped_to: dict[str, str] | None = None
    why_no_accept: str = ""
    slot: str = ""
    """A replication slot the server holds while the case is tried ("physical" or "logical"; the
    state-dependent rules): created before, dropped after."""


PG_CASES: dict[str, StartCase] = {
    "pg.wal_level_minimal": StartCase(
        {"wal_level": "minimal", "max_wal_senders": "10"},
        log='WAL streaming (max_wal_senders > 0) requires wal_level "replica" or "logical"',
        accepted={"wal_level": "minimal", "max_wal_senders": "0"},
    ),
    "pg.max_wal_senders_lt_connections": StartCase(
        {"max_connections": "8", "max_wal_senders": "10"},
        log="max_wal_senders must be less than max_connections",
        accepted={"max_connections": "20", "max_wal_senders": "10"},
    ),
    "pg.min_wal_size-segments": StartCase(
        {"min_wal_size": "20MB"},
        log='"min_wal_size" must be at least twice "wal_segment_size"',
        accepted={"min_wal_size": "32MB"},
    ),
    "pg.max_wal_size-segments": StartCase(
        {"max_wal_size": "20MB", "min_wal_size": "32MB"},
        log='"max_wal_size" must be at least twice "wal_segment_size"',
        accepted={"max_wal_size": "32MB", "min_wal_size": "32MB"},
    ),
    "pg.max_backends": StartCase(
        {"max_connections": "262100", "max_worker_processes": "100"},
        log='invalid value for parameter "max_',  # the check hook of whichever summand is set last
        why_no_accept="262,100 backend slots need gigabytes of shared memory (lock table, PGPROC array); "
        "the refused side is the claim that matters",
    ),
    "pg.superuser_reserved_lt_connections": StartCase(
        {"max_connections": "8", "superuser_reserved_connections": "8"},
        log="superuser_reserved_connections (8) must be less than max_connections (8)",
        accepted={"max_connections": "8", "superuser_reserved_connections": "7"},
    ),
    "pg.wal_buffers-at-least-4-pages": StartCase(
        {"wal_buffers": "8kB"}, clamped_to={"wal_buffers": "32kB"}, accepted={"wal_buffers": "32kB"}
    ),
    "pg.autovacuum_work_mem-at-least-1MB": StartCase(
        {"autovacuum_work_mem": "100kB"},
        clamped_to={"autovacuum_work_mem": "1MB"},
        accepted={"autovacuum_work_mem": "1MB"},
    ),
    "pg.wal_level-physical-slots": StartCase(
        {"wal_level": "minimal", "max_wal_senders": "0", "archive_mode": "off"},
        log='physical replication slot "agenticdb_start_slot" exists, but wal_level < replica',
        accepted={"wal_level": "replica"},
        slot="physical",
    ),
    "pg.wal_level-logical-slots": StartCase(
        {"wal_level": "replica"},
        log='logical replication slot "agenticdb_start_slot" exists, but wal_level < logical',
        accepted={"wal_level": "logical"},
        slot="logical",
    ),
}
"""Rule id → case."""

PG_NOT_TESTED = {
    # its clamp depends on the postmaster's RLIMIT_NOFILE and the descriptors it can really open
    "pg.max_files_per_process-rlimit",
    # reserved_connections exists from PostgreSQL 16; only 15 is installed here
    "pg.reserved_connections_lt_connections",
}

MARIADB_CASES: dict[str, StartCase] = {
    "mysql.io_capacity_le_max": StartCase(
        {"innodb_io_capacity": "4000", "innodb_io_capacity_max": "2000"},
        clamped_to={"innodb_io_capacity": "2000"},
        accepted={"innodb_io_capacity": "2000", "innodb_io_capacity_max": "4000"},
    ),
    "mysql.max_dirty_pages_lwm_le_pct": StartCase(
        {"innodb_max_dirty_pages_pct_lwm": "80", "innodb_max_dirty_pages_pct": "50"},
        clamped_to={"innodb_max_dirty_pages_pct_lwm": "50"},
        accepted={"innodb_max_dirty_pages_pct_lwm": "40", "innodb_max_dirty_pages_pct": "50"},
    ),
    # SET GLOBAL clamps it, a start refuses it (found by this test: the rule said "clamp")
    "mysql.buffer_pool_min_16k": StartCase(
        {"innodb_buffer_pool_size": "5242880"},
        log="innodb_page_size=16384 requires innodb_buffer_pool_size >= 6 MiB",
        accepted={"innodb_buffer_pool_size": "6291456"},
    ),
    "mysql.log_write_ahead_size_power_of_two": StartCase(
        {"innodb_log_write_ahead_size": "3000"},
        log="innodb_log_write_ahead_size=3000 is not a power of two",
        accepted={"innodb_log_write_ahead_size": "4096"},
    ),
    "mysql.buffer_pool_size_le_max": StartCase(
        {"innodb_buffer_pool_size": "268435456", "innodb_buffer_pool_size_max": "134217728"},
        clamped_to={"innodb_buffer_pool_size_max": "268435456"},
        accepted={"innodb_buffer_pool_size": "134217728", "innodb_buffer_pool_size_max": "268435456"},
    ),
}


def _claims_start(rule: Versioned) -> bool:
    if isinstance(rule, ServerCheck):
        return rule.enforced in ("start", "clamp")
    return isinstance(rule, ConflictRule) and "refuses to start" in rule.reason


def test_every_start_or_clamp_claim_has_a_start_case() -> None:
    pg = {r.id for r in load_ruleset("postgresql").all_rules() if _claims_start(r)}
    my = {r.id for r in load_ruleset("mysql").all_rules() if _claims_start(r)}
    assert pg == set(PG_CASES) | PG_NOT_TESTED
    assert my == set(MARIADB_CASES)


# ------------------------------------------------------------------------------------------------ PostgreSQL


@dataclass
class ScratchPg:
    info: PostgresSandboxInfo
    version: str

    def start(
        self, settings: dict[str, str], read: list[str] | None = None, sql: str = ""
    ) -> tuple[bool, str, dict[str, str]]:
        """pg_ctl start with ``-c name=value`` for each setting (as postgres); (started, log, read values).
        ``sql`` runs once started. A started server is stopped again (fast)."""
        log = Path(self.info.root) / "start.log"
        log.write_text("")
        if self.info.os_user:
            pw = pwd.getpwnam(self.info.os_user)
            os.chown(log, pw.pw_uid, pw.pw_gid)
        opts = " ".join(shlex.quote(f"-c{k}={v}") for k, v in settings.items())
        pg_ctl = str(Path(self.info.bindir) / "pg_ctl")
        argv = [pg_ctl, "start", "-w", "-t", "60", "-D", self.info.data_dir, "-l", str(log), "-o", opts]
        try:
            run_as(argv, self.info.os_user, timeout=90)
        except ServiceError:
            return False, log.read_text(), {}
        values: dict[str, str] = {}
        try:
            with psycopg.connect(self.info.dsn, connect_timeout=10, autocommit=True) as conn:
                if sql:
                    conn.execute(sql)  # type: ignore[arg-type]
                for name in read or []:
                    row = conn.execute(f"SHOW {name}").fetchone()
                    values[name] = str(row[0]) if row else ""
        finally:
            run_as([pg_ctl, "stop", "-w", "-m", "fast", "-D", self.info.data_dir], self.info.os_user, timeout=90)
        return True, log.read_text(), values


@pytest.fixture(scope="module")
def scratch_pg() -> Iterator[ScratchPg]:
    base = Path(tempfile.mkdtemp(prefix="agenticdb-starts-"))
    os.chmod(base, 0o755)
    sandbox = PostgresSandbox(base)
    info = sandbox.up()
    with psycopg.connect(info.dsn, autocommit=True) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    assert row is not None
    sandbox.service(info).stop()
    try:
        yield ScratchPg(info, str(row[0]).split()[0])
    finally:
        sandbox.down()
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("rule_id", sorted(PG_CASES))
def test_postgresql_start_claim(rule_id: str, scratch_pg: ScratchPg) -> None:
    rule = next(r for r in load_ruleset("postgresql").all_rules() if r.id == rule_id)
    case = PG_CASES[rule_id]
    applies = rule.applies("postgresql", scratch_pg.version)
    read = sorted(case.clamped_to or {})
    if case.slot:
        _slot(scratch_pg, case.slot, create=True)
    try:
        _try_case(rule_id, case, applies, read, scratch_pg)
    finally:
        if case.slot:
            _slot(scratch_pg, case.slot, create=False)


def _slot(scratch_pg: ScratchPg, kind: str, *, create: bool) -> None:
    """Create or drop the case's replication slot on a start with the wal_level the slot needs."""
    level = {"wal_level": "logical" if kind == "logical" else "replica"}
    if not create:
        sql = "SELECT pg_drop_replication_slot('agenticdb_start_slot')"
    elif kind == "logical":
        sql = "SELECT pg_create_logical_replication_slot('agenticdb_start_slot', 'pgoutput')"
    else:
        sql = "SELECT pg_create_physical_replication_slot('agenticdb_start_slot')"
    started, log, _ = scratch_pg.start(level, sql=sql)
    assert started, log[-600:]


def _try_case(rule_id: str, case: StartCase, applies: bool, read: list[str], scratch_pg: ScratchPg) -> None:
    started, log, values = scratch_pg.start(case.refused, read)
    if case.clamped_to is not None:
        assert started, f"{rule_id}: a clamp rule's value must start on {scratch_pg.version}: {log[-600:]}"
        assert (values == case.clamped_to) is applies, (rule_id, scratch_pg.version, values)
    elif applies:
        assert not started, f"{rule_id} says PostgreSQL {scratch_pg.version} refuses {case.refused}, it started"
        assert case.log in log, f"{rule_id}: {log[-600:]}"
    else:
        # outside the rule's range the server must take it (or the range is too narrow)
        assert started, f"{rule_id} excludes {scratch_pg.version}, but the server refused {case.refused}: {log[-600:]}"
    if case.accepted is not None:
        ok, log, _ = scratch_pg.start(case.accepted)
        assert ok, f"{rule_id}: the repaired settings {case.accepted} must start: {log[-600:]}"
    else:
        assert case.why_no_accept


def test_pg15_starts_with_more_wal_senders_than_connections(scratch_pg: ScratchPg) -> None:
    """Issue 38's case: the rule refused this valid configuration on PostgreSQL 15."""
    if int(scratch_pg.version.split(".")[0]) < 12:
        pytest.skip(f"PostgreSQL {scratch_pg.version} counts WAL senders against max_connections")
    started, log, values = scratch_pg.start(
        {"max_connections": "8", "max_wal_senders": "10"}, ["max_connections", "max_wal_senders"]
    )
    assert started, log[-600:]
    assert values == {"max_connections": "8", "max_wal_senders": "10"}


# ------------------------------------------------------------------------------------------------ MariaDB


@dataclass
class ScratchMariaDB:
    sandbox: MariaDBSandbox
    info: MariaDBSandboxInfo
    version: str

    def start(self, settings: dict[str, str]) -> tuple[bool, str, dict[str, str]]:
        """Write ``settings`` to the managed option file, start mariadbd; (started, error log of this
        start, the settings read back). A started server is stopped again."""
        lines = "".join(f"{k} = {v}\n" for k, v in settings.items())
        Path(self.info.option_file).write_text(f"# test_rule_starts\n[mysqld]\n{lines}")
        log = Path(self.info.log_file)
        before = log.stat().st_size
        svc = self.sandbox.service(self.info)
        try:
            svc.start()
        except ServiceError:
            return False, log.read_bytes()[before:].decode(errors="replace"), {}
        try:
            conn = self.info.connect(timeout=10)
            try:
                with conn.cursor() as cur:
                    out = {}
                    for name in settings:
                        cur.execute("SELECT @@GLOBAL." + name)
                        row = cur.fetchone()
                        out[name] = str(row[0]) if row else ""
                    return True, log.read_bytes()[before:].decode(errors="replace"), out
            finally:
                conn.close()
        finally:
            svc.stop()


def _same(values: dict[str, str], expected: dict[str, str]) -> bool:
    """Equal as numbers where both are numbers (the server shows 50 as 50.0)."""

    def norm(v: str) -> object:
        try:
            return float(v)
        except ValueError:
            return v

    return all(norm(values.get(k, "")) == norm(v) for k, v in expected.items())


@pytest.fixture(scope="module")
def scratch_mariadb() -> Iterator[ScratchMariaDB]:
    base = Path(tempfile.mkdtemp(prefix="agenticdb-starts-my-"))
    os.chmod(base, 0o755)
    sandbox = MariaDBSandbox(base)
    info = sandbox.up()
    conn = info.connect(timeout=10)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT VERSION()")
            row = cur.fetchone()
    finally:
        conn.close()
    assert row is not None
    sandbox.service(info).stop()
    try:
        yield ScratchMariaDB(sandbox, info, str(row[0]).split("-")[0])
    finally:
        sandbox.down()
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("rule_id", sorted(MARIADB_CASES))
def test_mariadb_start_claim(rule_id: str, scratch_mariadb: ScratchMariaDB) -> None:
    rule = next(r for r in load_ruleset("mysql").all_rules() if r.id == rule_id)
    case = MARIADB_CASES[rule_id]
    assert case.accepted is not None
    applies = rule.applies("mariadb", scratch_mariadb.version)
    started, log, values = scratch_mariadb.start(case.refused)
    if case.clamped_to is not None:
        assert started, f"{rule_id}: MariaDB {scratch_mariadb.version} did not start with {case.refused}: {log[-600:]}"
        assert _same(values, case.clamped_to) is applies, (rule_id, scratch_mariadb.version, values)
    elif applies:
        assert not started, f"{rule_id} says MariaDB {scratch_mariadb.version} refuses {case.refused}, it started"
        assert case.log in log, f"{rule_id}: {log[-600:]}"
    else:
        assert started, f"{rule_id} excludes {scratch_mariadb.version}, the server refused {case.refused}: {log[-600:]}"
    ok, log, values = scratch_mariadb.start(case.accepted)
    assert ok and _same(values, case.accepted), (rule_id, values, log[-600:])
