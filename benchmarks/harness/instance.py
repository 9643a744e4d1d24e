"""One private server per scenario: sandbox creation, a memory-confined start, pristine-data resets.

The server is started by a child process that first joins the scenario's memory cgroup
(``preexec_fn``), so the postmaster / mariadbd and every page it caches are charged to the cgroup from
the first byte (see ``cgroup.py`` for why moving it after start is not enough). The same holds for the
copy that restores the pristine data directory.

Pristine data (docs/measurement.md "What cut the noise"): after loading, the server is shut down cleanly
(MariaDB: ``innodb_fast_shutdown=0`` first) and its data directory copied aside; ``reset_data`` stops
the server, copies the pristine directory back (``rsync -a --delete``; PostgreSQL's
``postgresql.auto.conf`` is kept unless asked, so the configuration under test survives) and starts.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import psycopg
import pymysql
import structlog

from agenticdb.config.sections import TargetConfig
from agenticdb.host.services import MariadbdService, PgCtlService, run_as
from agenticdb.targets.base import Target
from benchmarks.harness.cgroup import MemoryCgroup

log = structlog.get_logger(__name__)


def _cg(cgroup: MemoryCgroup | None) -> str | None:
    """The cgroup directory agenticdb's services start a process in (``target.service.cgroup``)."""
    return str(cgroup.path) if cgroup else None


class Instance:
    """A private PostgreSQL or MariaDB for one scenario under ``base``.

    Args:
        kind: "postgres" or "mariadb" (sandbox kinds of ``agenticdb sandbox``).
        base: folder holding ``sandbox/<kind>/`` and ``pristine/``.
        cgroup: memory cgroup the server runs in (None = unconfined).
    """

    def __init__(self, kind: str, base: Path, cgroup: MemoryCgroup | None) -> None:
        if kind not in ("postgres", "mariadb"):
            raise ValueError(f"instance kind={kind!r}: expected 'postgres' or 'mariadb'")
        self.kind = kind
        self.base = Path(base)
        self.cgroup = cgroup
        self.pristine = self.base / "pristine"
        self.info = None

    # ---- life cycle ---------------------------------------------------------------------------------
    def up(self) -> TargetConfig:
        """Create the sandbox if needed and (re)start it inside the cgroup; returns its TargetConfig."""
        self.base.mkdir(parents=True, exist_ok=True)
        os.chmod(self.base, 0o755)
        if self.kind == "postgres":
            from agenticdb.sandbox.postgres import PostgresSandbox

            sb = PostgresSandbox(self.base)
            info = sb.info()
            if info is None:
                info = sb._create()  # creation only; we start it ourselves, inside the cgroup
        else:
            from agenticdb.sandbox.mariadb import MariaDBSandbox

            sb = MariaDBSandbox(self.base)  # type: ignore[assignment]
            info = sb.info()
            if info is None:
                info = sb._create()  # type: ignore[attr-defined]
        self.info = info
        self.stop()  # a server started outside the cgroup (earlier run) is restarted inside it
        self.service().start()
        if self.kind == "postgres":
            from agenticdb.sandbox.postgres import (  # lazy: as above, per kind
                PostgresSandboxInfo,
                create_pg_stat_statements,
            )

            # in the target's and the workload's database (created if absent): the session's statistics read
            # pg_stat_statements where the workload runs (issue 36 point 4; pg-tpch's 2026-12-05 run had no JIT
            # evidence because it was never created)
            assert isinstance(info, PostgresSandboxInfo)
            create_pg_stat_statements(info)
        return info.target_config()  # type: ignore[union-attr]

    def service(self) -> PgCtlService | MariadbdService:
        """The confined service controller for this instance."""
        info = self.info
        assert info is not None, "call up() first"
        if self.kind == "postgres":

            def ready() -> bool:
                with psycopg.connect(info.dsn, connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return True

            return PgCtlService(
                ready, info.data_dir, info.bindir, info.os_user, "", info.log_file, 120.0, cgroup=_cg(self.cgroup)
            )

        def ready_m() -> bool:
            info.connect(timeout=2).close()
            return True

        return MariadbdService(
            ready_m,
            info.defaults_file,
            info.pid_file,
            info.os_user or "mysql",
            log_file=info.log_file,
            start_timeout_s=120.0,
            cgroup=_cg(self.cgroup),
        )

    def target(self) -> Target:
        """A fresh agenticdb Target using the confined service (so tuner restarts stay confined)."""
        info = self.info
        assert info is not None, "call up() first"
        if self.kind == "postgres":
            from agenticdb.targets.postgres import PostgresTarget

            return PostgresTarget(
                info.dsn,
                self.service(),
                data_dir=info.data_dir,
                log_file=info.log_file,
                database=info.target_config().database,  # pg_stat_statements read in the workload's database
            )
        from agenticdb.targets.mysql import MySQLTarget, parse_mysql_dsn

        return MySQLTarget(
            parse_mysql_dsn(info.dsn), self.service(), option_file=info.option_file, log_file=info.log_file
        )

    def available(self) -> bool:
        """The server answers a real login now."""
        return self.service().is_ready()

    def stop(self, slow: bool = False) -> None:
        """Clean shutdown. ``slow`` (MariaDB): ``innodb_fast_shutdown=0`` first, so a copy of the files
        needs no purge or crash recovery (docs/measurement.md); not needed when the files are replaced next."""
        if slow and self.kind == "mariadb" and self.available():
            try:
                with self.info.connect() as conn, conn.cursor() as cur:  # type: ignore[union-attr]
                    cur.execute("SET GLOBAL innodb_fast_shutdown=0")
            except pymysql.MySQLError as exc:
                log.warning("instance.fast_shutdown_unset", error=str(exc))
        self.service().stop()

    # ---- pristine data --------------------------------------------------------------------------------
    @property
    def data_dir(self) -> str:
        return self.info.data_dir  # type: ignore[union-attr]

    def save_pristine(self) -> None:
        """Stop cleanly, copy the data directory to ``pristine/``, start again."""
        self.stop(slow=True)
        self._rsync(self.data_dir, str(self.pristine), keep_config=False)
        self.service().start()
        log.info("instance.pristine_saved", kind=self.kind, path=str(self.pristine))

    def reset_data(self, keep_config: bool = True) -> float:
        """Stop, copy the pristine data back (keeping ``postgresql.auto.conf`` when ``keep_config``),
        start inside the cgroup. Returns the seconds it took.

        Raises:
            ServiceError: the server does not come back.
        """
        t0 = time.monotonic()
        self.stop()
        self._rsync(str(self.pristine), self.data_dir, keep_config=keep_config)
        self.service().start()
        return time.monotonic() - t0

    def _rsync(self, src: str, dst: str, keep_config: bool) -> None:
        argv = ["rsync", "-a", "--delete", "--exclude", "postmaster.pid"]
        if keep_config and self.kind == "postgres":
            argv += ["--exclude", "postgresql.auto.conf"]
        argv += [src.rstrip("/") + "/", dst.rstrip("/") + "/"]
        run_as(argv, None, 600, cgroup=_cg(self.cgroup))
        run_as(["sync"], None, 120)
