"""Build a ``Workload`` from ``WorkloadConfig`` and a ``Connection`` from a target DSN.

``workload.kind`` names (config.py ``WorkloadKind``): ``pgbench``; ``sysbench-oltp-read-only``,
``sysbench-oltp-write-only``, ``sysbench-oltp-read-write``; ``ycsb-a`` … ``ycsb-f``; ``tpch``;
``command``. ``observe`` generates no load and is not built here.
"""

from __future__ import annotations

from agenticdb.config.sections import WorkloadConfig
from agenticdb.dialect import parse_mysql_dsn, parse_pg_dsn
from agenticdb.workloads.base import Connection, Workload, WorkloadError

SYSBENCH_KINDS = {
    "sysbench-oltp-read-only": "oltp_read_only",
    "sysbench-oltp-write-only": "oltp_write_only",
    "sysbench-oltp-read-write": "oltp_read_write",
}
YCSB_KINDS = {f"ycsb-{w}": w for w in "abcdef"}


def connection_from_dsn(kind: str, dsn: str, database: str) -> Connection:
    """Turn a target DSN into the ``Connection`` the benchmark tools use.

    Args:
        kind: ``TargetConfig.kind``: "postgresql", "mariadb" or "mysql".
        dsn: PostgreSQL libpq URI or keyword string (``postgresql://user:pw@host:port/db``,
            ``host=/run/postgresql port=5432``); MySQL/MariaDB ``mysql://user:pw@host:port/db`` with
            an optional ``?unix_socket=/path`` (``socket=`` also accepted); parsed by ``agenticdb.dialect``.
        database: the benchmark database (created by ``prepare()`` via the admin DSN).

    Returns:
        A Connection whose ``admin_dsn`` is ``dsn`` (it reaches an existing database).

    Raises:
        ValueError: unknown ``kind`` or a DSN that cannot be parsed (message names the value).
    """
    if kind == "postgresql":
        params = parse_pg_dsn(dsn)
        host = str(params.pop("host", "") or "127.0.0.1")
        port = int(params.pop("port", 5432) or 5432)
        user = str(params.pop("user", "") or "postgres")
        password = str(params.pop("password", "") or "")
        params.pop("dbname", None)
        pg_socket = host if host.startswith("/") else None
        extra = {k: str(v) for k, v in params.items() if v is not None}
        return Connection(
            kind="postgresql",
            host=host,
            port=port,
            user=user,
            password=password,
            database=database,
            socket=pg_socket,
            admin_dsn=dsn,
            extra=extra,
        )
    if kind in ("mariadb", "mysql"):
        my = parse_mysql_dsn(dsn)
        return Connection(
            kind="mysql",
            host=my["host"],
            port=my["port"],
            user=my["user"],
            password=my["password"],
            database=database,
            socket=my.get("unix_socket"),
            admin_dsn=dsn,
        )
    raise ValueError(f"target.kind={kind!r}: expected postgresql, mariadb or mysql")


def build_workload(cfg: WorkloadConfig, conn: Connection, progress: bool | None = None) -> Workload:
    """The workload named by ``cfg.kind`` against ``conn``.

    Args:
        cfg: workload settings (scale, tables, clients, threads, durations, timeouts, objective).
        conn: where the tool connects.
        progress: rich progress bars; None = only when stdout is a terminal.

    Raises:
        WorkloadError: the kind does not fit the DBMS (pgbench needs PostgreSQL), ``command`` without
            ``workload.command``, or ``observe`` (no load generator).
    """
    kind = cfg.kind
    if kind == "pgbench":
        from agenticdb.workloads.pgbench import PgbenchWorkload  # lazy: start-up cost (loads pymysql; 127 modules)

        return PgbenchWorkload(cfg, conn, progress=progress)
    if kind in SYSBENCH_KINDS:
        from agenticdb.workloads.sysbench import SysbenchWorkload  # lazy: start-up cost (loads pymysql; 126 modules)

        return SysbenchWorkload(cfg, conn, SYSBENCH_KINDS[kind], progress=progress)
    if kind in YCSB_KINDS:
        from agenticdb.workloads.sysbench import YcsbWorkload  # lazy: start-up cost (loads pymysql; 126 modules)

        return YcsbWorkload(cfg, conn, YCSB_KINDS[kind], progress=progress)
    if kind == "tpch":
        from agenticdb.workloads.tpch import TpchWorkload  # lazy: start-up cost (loads pymysql; 125 modules)

        return TpchWorkload(cfg, conn, progress=progress)
    if kind == "command":
        from agenticdb.workloads.command import CommandWorkload  # lazy: start-up cost (loads pymysql; 126 modules)

        return CommandWorkload(cfg, conn, progress=progress)
    raise WorkloadError(
        f"workload.kind={kind!r}: not a load generator (live observes the application's own statements and "
        "is built by agenticdb.app.build_live_workload); "
        "expected pgbench, sysbench-oltp-*, ycsb-a..ycsb-f, tpch or command"
    )
