"""Build a ``Workload`` from ``WorkloadConfig`` and a ``Connection`` from a target DSN.

The class of each ``workload.kind`` is named in the kinds table (``agenticdb.workload_kinds.KINDS``,
``KindSpec.builder``) and imported only when a workload is built: its module loads the database drivers.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import cast

from agenticdb.config.sections import LiveConfig, WorkloadConfig
from agenticdb.dialect import parse_mysql_dsn, parse_pg_dsn
from agenticdb.workload_kinds import KIND_NAMES, KindSpec, kind_spec
from agenticdb.workloads.base import Connection, Workload, WorkloadError


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


def builder_of(spec: KindSpec) -> Callable[..., Workload]:
    """The class (or function) ``spec.builder`` names, ``"module:attribute"``, imported now.

    Importing here and not at the top is the start-up cost of the workload modules (each loads pymysql,
    about 125 modules), paid only by a command that builds a workload.

    Raises:
        WorkloadError: the module or attribute does not exist (a wrong entry in the kinds table).
    """
    module, _, attribute = spec.builder.partition(":")
    try:
        loaded = importlib.import_module(module)  # lazy: start-up cost (loads pymysql; about 125 modules)
        return cast("Callable[..., Workload]", getattr(loaded, attribute))
    except (ImportError, AttributeError) as exc:
        raise WorkloadError(f"workload.kind={spec.name!r}: cannot load its builder {spec.builder!r}: {exc}") from exc


def build_workload(
    cfg: WorkloadConfig, conn: Connection, progress: bool | None = None, live: LiveConfig | None = None
) -> Workload:
    """The workload named by ``cfg.kind`` against ``conn``, built by its ``KindSpec.builder``.

    Args:
        cfg: workload settings (scale, tables, clients, threads, durations, timeouts, objective).
        conn: where the tool connects.
        progress: rich progress bars; None = only when stdout is a terminal.
        live: the ``[live]`` settings an observe-only kind (``live``) is built with
            (``agenticdb.app.build_workload`` passes them and checks the set-up).

    Raises:
        WorkloadError: the kind does not fit the DBMS (pgbench needs PostgreSQL), ``command`` without
            ``workload.command``, an unknown kind, or an observe-only kind without ``live``.
    """
    try:
        spec = kind_spec(cfg.kind)
    except KeyError:
        raise WorkloadError(f"workload.kind={cfg.kind!r}: expected one of {', '.join(KIND_NAMES)}") from None
    build = builder_of(spec)
    if spec.observes_only:
        if live is None:
            raise WorkloadError(
                f"workload.kind={cfg.kind!r} observes the application's own statements: it is built with the "
                "[live] settings (agenticdb.app.build_workload)"
            )
        return build(cfg, live, conn)
    variant = () if spec.variant is None else (spec.variant,)
    return build(cfg, conn, *variant, progress=progress)
