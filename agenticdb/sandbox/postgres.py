"""Private PostgreSQL instance: initdb in a data dir, own port and socket dir, controlled by pg_ctl.

PostgreSQL refuses to run as root, so when we are root initdb and the server run as the ``postgres``
OS user (``runuser``); the sandbox folder is chowned to that user.
"""

from __future__ import annotations

import glob
import json
import os
import pwd
import shutil
from pathlib import Path

import psycopg
import structlog
from psycopg import sql
from psycopg.conninfo import make_conninfo
from pydantic import BaseModel

from agenticdb.config.sections import ServiceConfig, TargetConfig
from agenticdb.host import pgss, prewarm
from agenticdb.host.services import PgCtlService, ServiceError, run_as
from agenticdb.sandbox import free_port, make_traversable

log = structlog.get_logger(__name__)

WORKLOAD_DATABASE = "agenticdb_bench"
"""The benchmark database a sandbox's target points the workload at (``TargetConfig.database``'s default)."""


def find_pg_bindir() -> str:
    """Directory holding initdb/pg_ctl/postgres: ``$AGENTICDB_PG_BINDIR`` or the newest
    ``/usr/lib/postgresql/<major>/bin`` (Debian layout).

    Raises:
        FileNotFoundError: no PostgreSQL server binaries found.
    """
    if env := os.environ.get("AGENTICDB_PG_BINDIR"):
        return env
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name))
    if not dirs:
        raise FileNotFoundError("PostgreSQL server binaries not found (install postgresql or set AGENTICDB_PG_BINDIR)")
    return dirs[-1]


class PostgresSandboxInfo(BaseModel):
    """What ``sandbox.json`` records."""

    root: str
    data_dir: str
    socket_dir: str
    port: int
    bindir: str
    os_user: str | None
    log_file: str
    role: str | None = None
    """The least-privilege login role ``agenticdb sandbox up`` created (``setup-role``); None: none yet."""

    @property
    def dsn(self) -> str:
        """The superuser's DSN (administration, test fixtures)."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def tuner_dsn(self) -> str:
        """The DSN agenticdb tunes with: the limited role when there is one, else the superuser."""
        return f"postgresql://{self.role}@127.0.0.1:{self.port}/postgres" if self.role else self.dsn

    def save(self) -> None:
        """Write this record back to ``<root>/sandbox.json``."""
        (Path(self.root) / "sandbox.json").write_text(self.model_dump_json(indent=2))

    def target_config(self, database: str = WORKLOAD_DATABASE) -> TargetConfig:
        """A TargetConfig that points agenticdb at this sandbox (service kind pg_ctl)."""
        return TargetConfig(
            kind="postgresql",
            dsn=self.tuner_dsn,
            database=database,
            sandbox="postgres",
            service=ServiceConfig(
                kind="pg_ctl",
                data_dir=self.data_dir,
                bindir=self.bindir,
                os_user=self.os_user,
                log_file=self.log_file,
            ),
        )


class PostgresSandbox:
    """Create, start, stop and remove a private PostgreSQL under ``base/sandbox/postgres``."""

    def __init__(self, base: Path) -> None:
        self.root = Path(base) / "sandbox" / "postgres"
        self.state_file = self.root / "sandbox.json"

    def info(self) -> PostgresSandboxInfo | None:
        """The recorded instance, or None when there is none."""
        if not self.state_file.exists():
            return None
        return PostgresSandboxInfo.model_validate_json(self.state_file.read_text())

    def service(self, info: PostgresSandboxInfo) -> PgCtlService:
        def ready() -> bool:
            with psycopg.connect(info.dsn, connect_timeout=2):
                return True

        return PgCtlService(ready, info.data_dir, info.bindir, info.os_user, "", info.log_file)

    def up(self) -> PostgresSandboxInfo:
        """Create (initdb) when absent, then start; idempotent. Returns the instance info.

        Raises:
            ServiceError: initdb or start failed (output attached).
        """
        info = self.info()
        if info is None:
            info = self._create()
        svc = self.service(info)
        if not svc.is_ready():
            svc.start()
        statements = create_pg_stat_statements(info)
        log.info("sandbox.up", kind="postgres", port=info.port, data_dir=info.data_dir, pg_stat_statements=statements)
        return info

    def _create(self) -> PostgresSandboxInfo:
        bindir = find_pg_bindir()
        os_user = "postgres" if os.geteuid() == 0 else None
        data = self.root / "data"
        sock = self.root / "run"
        if self.root.exists():
            shutil.rmtree(self.root)
        sock.mkdir(parents=True)
        data.mkdir(mode=0o700)
        if os_user:
            pw = pwd.getpwnam(os_user)
            for p in (self.root, sock, data):
                os.chown(p, pw.pw_uid, pw.pw_gid)
            make_traversable(self.root)
        run_as(
            [
                str(Path(bindir) / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--no-instructions",
            ],
            os_user,
            timeout=120,
        )
        info = PostgresSandboxInfo(
            root=str(self.root),
            data_dir=str(data),
            socket_dir=str(sock),
            port=free_port(),
            bindir=bindir,
            os_user=os_user,
            log_file=str(self.root / "postgresql.log"),
        )
        # Port and socket go into postgresql.conf so a plain restart (ours or a DBA's) keeps them.
        with open(data / "postgresql.conf", "a") as f:
            f.write(
                f"\n# agenticdb sandbox\nport = {info.port}\nunix_socket_directories = '{sock}'\n"
                "listen_addresses = '127.0.0.1'\nmax_connections = 50\n"
            )
        with open(data / "postgresql.conf", "a") as f:
            # live mode (workload.kind = "live") reads pg_stat_statements; loading it is a start-up setting
            # (manual F.32), so the sandbox has it from the start. up() creates the extension (in the workload's
            # database too: create_pg_stat_statements).
            f.write("shared_preload_libraries = 'pg_stat_statements'\npg_stat_statements.track = top\n")
        if os_user:
            pw = pwd.getpwnam(os_user)
            Path(info.log_file).touch()
            os.chown(info.log_file, pw.pw_uid, pw.pw_gid)
        self.state_file.write_text(info.model_dump_json(indent=2))
        return info

    def status(self) -> dict[str, object]:
        """{"exists", "running", plus the recorded info} for ``sandbox status``."""
        info = self.info()
        if info is None:
            return {"exists": False, "running": False}
        return {
            "exists": True,
            "running": self.service(info).is_ready(),
            **json.loads(info.model_dump_json()),
        }

    def down(self) -> None:
        """Stop the server (if running) and remove the sandbox folder."""
        info = self.info()
        if info is not None:
            try:
                self.service(info).stop()
            except ServiceError as exc:
                log.warning("sandbox.stop_failed", error=str(exc))
        if self.root.exists():
            shutil.rmtree(self.root)
        log.info("sandbox.down", kind="postgres")


def create_pg_stat_statements(info: PostgresSandboxInfo, database: str = WORKLOAD_DATABASE) -> dict[str, str]:
    """pg_stat_statements, as the sandbox's superuser, in its ``postgres`` database and in the workload's
    ``database`` (created first when absent, owned by the sandbox's role when it has one, as ``setup-role``
    makes it), so the statistics of the workload's statements are read where it runs: the tuning role may not
    create the extension itself (``agenticdb.host.pgss``). Sandboxes created before the library was preloaded
    are left as they are (``pgss.ensure`` says "not preloaded"). pg_prewarm is created in the workload's
    database too (not trusted either), for the executor's prewarm after restarts (``agenticdb.host.prewarm``).

    Returns:
        database → ``pgss.ensure``'s status.

    Raises:
        psycopg.Error: the server cannot be reached or refused CREATE DATABASE.
    """
    out: dict[str, str] = {}
    with psycopg.connect(info.dsn, autocommit=True, connect_timeout=10) as db:
        out["postgres"] = pgss.ensure(db)
        if db.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone() is None:
            owner = sql.SQL(" OWNER {}").format(sql.Identifier(info.role)) if info.role else sql.SQL("")
            db.execute(sql.SQL("CREATE DATABASE {}{}").format(sql.Identifier(database), owner))
            log.info("sandbox.database_created", database=database, owner=info.role or "postgres")
    with psycopg.connect(make_conninfo(info.dsn, dbname=database), autocommit=True, connect_timeout=10) as db:
        if database != "postgres":
            out[database] = pgss.ensure(db)
        prewarm.ensure(db)  # the executor's prewarm after restarts, as the tuning role (agenticdb.host.prewarm)
    return out
