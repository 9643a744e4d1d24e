"""One private server per scenario, its pristine data, and the three configurations a run compares.

A *configuration state* is what the fault changes, captured as files and host values: PostgreSQL's
``postgresql.auto.conf`` (written by ``ALTER SYSTEM``), MariaDB's managed option file (``agenticdb.cnf``,
``!include``d by the sandbox's my.cnf), and the fault's sysfs/sysctl values. ``measure(state)`` puts the
pristine data back (``Instance.reset_data``), writes the state, starts the server, warms up and runs the
workload once, so fault-free, faulty and final configurations are measured the same way in one run.

The fault is injected directly — ``ALTER SYSTEM SET`` (PostgreSQL), the managed option file (MariaDB),
a sysfs/procfs write (OS) — never through agenticdb's validator. Host values are read first, read
back after each write, and put back by ``close()`` (call it in ``finally``).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import structlog
from psycopg import sql

from agenticdb.config import Settings
from agenticdb.config.sections import StorageConfig, WorkloadConfig
from agenticdb.host.hardware import detect_hardware
from agenticdb.loop.executor import prewarm_after_restart
from agenticdb.workloads.base import Workload
from benchmarks.harness.cgroup import CgroupError, MemoryCgroup
from benchmarks.harness.competitors import build_workload_for
from benchmarks.harness.instance import Instance
from benchmarks.scenarios.model import Scenario

log = structlog.get_logger(__name__)

QLOOP = Path(__file__).parent / "qloop.py"

SERVER_DEFAULTS: dict[str, dict[str, str]] = {
    # The sandbox starts MariaDB with a 64 MiB buffer pool and a 48 MiB redo log (agenticdb/sandbox/
    # mariadb.py: small enough for several test servers); the scenario's fault-free configuration is the
    # server's shipped defaults, so the only thing wrong is the injected fault. Under the sandbox's values
    # every MariaDB session began with the buffer-pool floor ("bad start") instead of the fault
    # (mdb-redo-log-tiny, 2026-12-03). MariaDB 10.11 defaults: innodb_buffer_pool_size 128MiB,
    # innodb_log_file_size 96MiB (MariaDB KB, InnoDB System Variables).
    "mariadb": {"innodb_buffer_pool_size": "134217728", "innodb_log_file_size": "100663296"},
}


class InjectError(RuntimeError):
    """A fault could not be written or read back (message names the parameter, value and path)."""


@dataclass
class State:
    """A configuration state: the DBMS configuration file's text and host parameter values by path."""

    label: str
    conf_text: str
    host: dict[str, str] = field(default_factory=dict)
    sql: list[str] = field(default_factory=list)  # run after each pristine reset (issue 40)
    hold: list[str] = field(default_factory=list)  # run on a session left open in its transaction


def workload_config(scn: Scenario, out: Path) -> dict[str, object]:
    """The scenario's workload as ``WorkloadConfig`` fields; a ``queries`` list (with ``rmax``) becomes a
    ``command`` workload running ``qloop.py`` on a JSON file written to ``out``."""
    wl = dict(scn.workload)
    queries = wl.pop("queries", None)
    rmax = wl.pop("rmax", 1)
    if queries is not None:
        spec = out / "queries.json"
        spec.write_text(json.dumps({"queries": queries, "rmax": rmax}))
        wl["kind"] = "command"
        wl["command"] = f"{sys.executable} {QLOOP} {spec}"
    return wl


class Fixture:
    """The private server of one scenario (in ``/tmp``: Unix socket paths must stay short).

    Args:
        scn: the scenario.
        out: its result folder (queries file, server log).
    """

    def __init__(self, scn: Scenario, out: Path) -> None:
        self.scn = scn
        self.out = out
        self.cgroup: MemoryCgroup | None = None
        if scn.target.memory_limit_mib:
            try:
                self.cgroup = MemoryCgroup(f"agscn-{os.getpid()}-{scn.name}", scn.target.memory_limit_mib * 2**20)
            except CgroupError as exc:
                log.warning("scenario.unconfined", scenario=scn.name, reason=str(exc))
        self.base = Path(tempfile.mkdtemp(prefix=f"agscn-{scn.name[:12]}-", dir="/tmp"))
        self.inst = Instance(scn.target.dbms, self.base, self.cgroup)
        self.workload_fields = workload_config(scn, out)
        self.host_original: dict[str, str] = {}
        self.workload: Workload | None = None
        self.settings: Settings | None = None
        self.holders: list[object] = []  # sessions of fault.hold, open until the next stop

    # ---- set-up ---------------------------------------------------------------------------------------
    def setup(self) -> None:
        """Create and start the server, load the workload's data, run ``setup_sql``, save pristine data."""
        tcfg = self.inst.up()
        base = {**SERVER_DEFAULTS.get(self.scn.target.dbms, {}), **self.scn.target.base_settings}
        if base:
            self.write_settings(base)
            self.inst.stop()
            self.inst.service().start()
        self.settings = Settings(
            target=tcfg, workload=WorkloadConfig(**self.workload_fields), storage=StorageConfig(home=self.out)
        )
        self.workload = build_workload_for(self.settings, self.inst.target())
        t0 = time.monotonic()
        loader = {k: v for k, v in self.scn.workload.items() if k not in ("queries", "rmax")}
        if loader != self.workload_fields:
            # A query-driven scenario: the data comes from the benchmark named in the file (pgbench init,
            # sysbench prepare); the measured runs are qloop.py's.
            load_settings = self.settings.model_copy(update={"workload": WorkloadConfig(**loader)})
            build_workload_for(load_settings, self.inst.target()).prepare()
        self.workload.prepare()
        for statement in self.scn.target.setup_sql:
            self.execute(statement)
        self.inst.save_pristine()
        log.info("scenario.prepared", scenario=self.scn.name, seconds=round(time.monotonic() - t0, 1))

    def execute(self, statement: str) -> None:
        """Run one statement on the workload's database as the superuser."""
        info = self.inst.info
        assert info is not None and self.settings is not None
        if self.scn.target.dbms == "postgres":
            dsn = psycopg.conninfo.make_conninfo(info.dsn, dbname=self.settings.target.database)
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(statement)  # type: ignore[arg-type]
        else:
            with info.connect(self.settings.target.database) as conn, conn.cursor() as cur:  # type: ignore[attr-defined]
                cur.execute(statement)

    # ---- configuration states -------------------------------------------------------------------------
    @property
    def conf_path(self) -> Path:
        info = self.inst.info
        assert info is not None
        if self.scn.target.dbms == "postgres":
            return Path(info.data_dir) / "postgresql.auto.conf"
        return Path(info.option_file)  # type: ignore[attr-defined]

    def host_path(self, name: str) -> Path:
        """sysfs/procfs path of ``block.<dev>.<attr>`` (``<dev>``: the data directory's disk) or a sysctl."""
        if name.startswith("block."):
            _, dev, attr = name.split(".", 2)
            if dev == "<dev>":
                dev = detect_hardware(self.inst.data_dir).data_device or ""
                if not dev:
                    raise InjectError(f"fault {name}: no data device found for {self.inst.data_dir}")
            return Path("/sys/block") / dev / "queue" / attr
        return Path("/proc/sys") / name.replace(".", "/")

    def capture(self, label: str) -> State:
        """The configuration in effect now, as a State."""
        host = {str(self.host_path(k)): self.host_path(k).read_text().strip() for k in self.scn.fault.os_settings()}
        return State(label, self.conf_path.read_text(), host)

    def inject(self) -> State:
        """Write the fault (ALTER SYSTEM / option file / sysfs), restart the server, return the faulty State.

        Raises:
            InjectError: a host value did not read back as written.
            psycopg.Error / ServiceError: the server refused a setting or did not start.
        """
        self.write_settings(self.scn.fault.dbms_settings())
        for k, v in self.scn.fault.os_settings().items():
            self.write_host(str(self.host_path(k)), v)
        self.inst.stop()
        self.inst.service().start()
        faulty = self.capture("faulty")
        faulty.sql, faulty.hold = list(self.scn.fault.sql), list(self.scn.fault.hold)
        return faulty

    def sql_faults(self, state: State) -> None:
        """Run ``state.sql`` and open ``state.hold``'s session (left idle in its transaction)."""
        for statement in state.sql:
            self.execute(statement)
        if state.hold:
            self.holders.append(self._hold(state.hold))
            log.info("scenario.holding", scenario=self.scn.name, statements=len(state.hold))

    def _hold(self, statements: list[str]) -> object:
        info = self.inst.info
        assert info is not None and self.settings is not None
        if self.scn.target.dbms == "postgres":
            dsn = psycopg.conninfo.make_conninfo(info.dsn, dbname=self.settings.target.database)
            conn = psycopg.connect(dsn)  # not autocommit: the transaction stays open, idle
            for statement in statements:
                conn.execute(statement)  # type: ignore[arg-type]
            return conn
        conn2 = info.connect(self.settings.target.database)  # type: ignore[attr-defined]
        conn2.autocommit(False)
        with conn2.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
        return conn2

    def release_holders(self) -> None:
        """Close the held sessions (their transactions roll back)."""
        for conn in self.holders:
            try:
                conn.close()  # type: ignore[attr-defined]
            except Exception:  # noqa: BLE001 - a server restart already ended it
                pass
        self.holders = []

    def write_settings(self, settings: dict[str, str]) -> None:
        """DBMS knobs into the configuration (``ALTER SYSTEM SET`` / the managed option file); in effect
        after the next restart."""
        if self.scn.target.dbms == "postgres":
            info = self.inst.info
            assert info is not None
            with psycopg.connect(info.dsn, autocommit=True) as conn:
                for k, v in settings.items():
                    conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(k), sql.Literal(v)))
            return
        text = self.conf_path.read_text().rstrip("\n") + "\n"
        if "[mysqld]" not in text:
            text += "[mysqld]\n"
        text += "".join(f"{k} = {v}\n" for k, v in settings.items())
        self.conf_path.write_text(text)

    def write_host(self, path: str, value: str) -> None:
        """Write one sysfs/procfs value (original saved first, read back after).

        Raises:
            InjectError: the write failed or the value did not read back.
        """
        p = Path(path)
        if path not in self.host_original:
            self.host_original[path] = p.read_text().strip()
        try:
            p.write_text(value)
        except OSError as exc:
            raise InjectError(f"cannot write {value!r} to {path}: {exc.strerror}") from None
        got = p.read_text().strip()
        if got.split()[0] != value.split()[0] and f"[{value}]" not in got:
            raise InjectError(f"{path}: wrote {value!r}, read back {got!r}")

    def put(self, state: State, reset_data: bool = True) -> None:
        """Stop, (pristine data back,) write ``state``, start inside the cgroup, then its SQL faults."""
        self.release_holders()
        self.inst.stop()
        if reset_data:
            self.inst._rsync(str(self.inst.pristine), self.inst.data_dir, keep_config=True)
        owner = self.conf_path.stat()
        self.conf_path.write_text(state.conf_text)
        os.chown(self.conf_path, owner.st_uid, owner.st_gid)
        for path, value in state.host.items():
            self.write_host(path, value)
        self.inst.service().start()
        self.sql_faults(state)

    def measure(self, state: State, in_place: bool = False) -> float:
        """Pristine data + ``state`` (``in_place``: the server as it is, e.g. after a session's remedy),
        warm-up, one measured run; returns the objective. After the restart of ``put`` the buffer cache is
        loaded first, as the session's executor does after a restart (``prewarm_after_restart``, issue 36: a
        decoy's final state with shared_buffers 6 GB measured 16 % short of fault-free on a cold cache)."""
        assert self.workload is not None and self.settings is not None
        if not in_place:
            self.put(state)
            prewarm_after_restart(self.inst.target())
        w = self.settings.workload
        self.workload.warmup(max(3.0, 2 * w.warmup_s))
        m = self.workload.run(w.duration_s, w.warmup_max_s)
        log.info("scenario.measured", scenario=self.scn.name, state=state.label, objective=round(m.objective, 3))
        return m.objective

    @property
    def higher_is_better(self) -> bool:
        assert self.workload is not None
        return self.workload.traits().objective not in ("total_time", "p95", "p99")

    # ---- tear-down ------------------------------------------------------------------------------------
    def close(self, keep: bool = False) -> None:
        """Put host values back, stop the server, keep its log, remove the instance and the cgroup."""
        self.release_holders()
        for path, value in self.host_original.items():
            try:
                Path(path).write_text(value)
                log.info("scenario.host_restored", path=path, value=value)
            except OSError as exc:
                log.error("scenario.host_restore_failed", path=path, value=value, error=exc.strerror)
        try:
            if self.inst.info is not None:
                self.inst.stop()
                if Path(self.inst.info.log_file).exists():
                    shutil.copyfile(self.inst.info.log_file, self.out / "server.log")
        finally:
            if not keep:
                shutil.rmtree(self.base, ignore_errors=True)
            if self.cgroup is not None:
                self.cgroup.remove()
