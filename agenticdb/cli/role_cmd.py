"""``agenticdb setup-role [--apply]``: the least-privilege login role agenticdb tunes with (issue 21).

Prints the SQL (``catalogs/roles.toml`` filled in with the live catalog's knobs); with ``--apply`` it
runs it through the given superuser DSN and prints the role's DSN to put in ``target.dsn``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
import structlog
from psycopg.conninfo import make_conninfo

from agenticdb.config import Settings
from agenticdb.dialect import parse_mysql_dsn
from agenticdb.host import pgss, prewarm
from agenticdb.host.privileges import DEFAULT_ROLE, PrivilegeError, connected_user, role_sql
from agenticdb.redaction import register_secret
from agenticdb.sandbox import sandbox_of

log = structlog.get_logger(__name__)


def role_dsn(dsn: str, role: str, password: str | None) -> str:
    """``dsn`` with its user (and password) replaced by ``role``; a libpq keyword string gets
    ``user=``/``password=`` keywords appended (later keywords win, manual 34.1.2)."""
    if "://" not in dsn:
        return f"{dsn} user={role}" + (f" password={password}" if password else "")
    parts = urlsplit(dsn)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = quote(role) + (f":{quote(password, safe='')}" if password else "") + f"@{host}"
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def read_password(path: Path | None) -> str | None:
    """The role password from ``path`` (first line, stripped); None without a file. Registered for
    redaction so it never reaches a log or the printed SQL.

    Raises:
        PrivilegeError: unreadable or empty file (names the file, never the content).
    """
    if path is None:
        return None
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise PrivilegeError(f"--password-file {path}: cannot be read ({type(exc).__name__})") from None
    if not text:
        raise PrivilegeError(f"--password-file {path}: is empty")
    register_secret(text)
    return text


def catalog_parameters(cfg: Settings) -> list[str]:
    """PostgreSQL: the tunable knobs of the live catalog (what ALTER SYSTEM is granted on), without those
    the validator never lets agenticdb change: protected and dangerous parameters, and durability
    parameters (unless ``policy.durability = "relaxed"`` allows that rule). A grant on ``fsync`` or
    ``session_replication_role`` would let the role do what agenticdb itself refuses."""
    from agenticdb.app import build_target  # lazy: start-up cost (loads 26 modules)
    from agenticdb.validation.exclusions import never_tuned  # lazy: start-up cost (loads 7 modules)
    from agenticdb.validation.rules import load_ruleset  # lazy: start-up cost (loads 6 modules)

    target = build_target(cfg)
    try:
        catalog = target.catalog()
    finally:
        target.close()
    rules = load_ruleset("postgresql")
    durability = cfg.policy.durability
    return [n for n in catalog.knobs if not never_tuned(rules, "postgresql", catalog.version, n, durability)]


def _pg_apply(dsn: str, statements: list[str], role: str, database: str) -> list[str]:
    """Run the PostgreSQL statements (an existing role/database is reused: its password is set and the
    database handed to the role). Returns what was done, one line each."""
    done: list[str] = []
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        has_role = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
        has_db = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone()
        for stmt in statements:
            if stmt.startswith("CREATE ROLE") and has_role:
                stmt = stmt.replace("CREATE ROLE", "ALTER ROLE", 1)
            if stmt.startswith("CREATE DATABASE") and has_db:
                stmt = f"ALTER DATABASE {database} OWNER TO {role}"
            conn.execute(stmt.encode("utf-8"))
            done.append(stmt.split(" TO ")[0][:80])
    # the role cannot create pg_stat_statements itself (not a trusted extension): the superuser does it in the
    # role's benchmark database, where the session reads its statements' statistics (agenticdb.host.pgss)
    with psycopg.connect(make_conninfo(dsn, dbname=database), autocommit=True, connect_timeout=10) as conn:
        done.append(f"pg_stat_statements in {database}: {pgss.ensure(conn)}")
        # pg_prewarm is not trusted either: the executor loads the buffer cache with it after restarts
        done.append(f"pg_prewarm in {database}: {prewarm.ensure(conn)}")
    return done


def _my_apply(dsn: str, statements: list[str]) -> list[str]:
    import pymysql  # lazy: start-up cost (loads pymysql; 21 modules)

    kwargs = {k: v for k, v in parse_mysql_dsn(dsn).items() if k != "database"}
    done: list[str] = []
    with pymysql.connect(**kwargs, connect_timeout=10, autocommit=True) as conn, conn.cursor() as cur:
        for stmt in statements:
            cur.execute(stmt)
            done.append(stmt[:80])
    return done


REMEDIATION_NOTE = (
    "this role does not own the tables: ANALYZE, VACUUM and CREATE INDEX (the remedies of stale statistics, "
    "vacuum held back and missing indexes, issue 40) need the owner or a superuser on PostgreSQL 15, so agenticdb "
    "only advises them; set [remediation] dsn to a DSN of the tables' owner to let approve mode run the "
    "non-destructive ones after approval"
)
REMEDIATION_SET = (
    "[remediation] dsn is set: in approve mode the non-destructive remedies (ANALYZE, plain VACUUM, CREATE INDEX "
    "CONCURRENTLY) run through it after approval; terminating sessions and blocking DDL stay advice"
)


def setup_role(
    cfg: Settings,
    role: str = DEFAULT_ROLE,
    password: str | None = None,
    host: str = "localhost",
    apply: bool = False,
) -> dict[str, Any]:
    """Build (and with ``apply`` run) the role SQL for ``cfg.target``.

    Returns:
        {"statements": [...], "notes": [...], "dsn": the role's DSN (applied only) or None,
        "applied": [one line per statement run]}.

    Raises:
        PrivilegeError: bad names, ``apply`` through a DSN that is not a superuser's.
        psycopg.Error / pymysql.MySQLError: the server refused a statement.
    """
    kind = cfg.target.kind
    dsn = cfg.target.dsn or ""
    params = catalog_parameters(cfg) if kind == "postgresql" else None
    statements, notes = role_sql(kind, role, cfg.target.database, params, password, host)
    notes = [*notes, REMEDIATION_NOTE if not cfg.remediation.dsn else REMEDIATION_SET]
    out: dict[str, Any] = {"statements": statements, "notes": notes, "dsn": None, "applied": []}
    if not apply:
        return out
    user, superuser = connected_user(kind, dsn)
    if not superuser:
        raise PrivilegeError(f"--apply needs a superuser DSN in --target; {user!r} is not a superuser on {kind}")
    if kind == "postgresql":
        out["applied"] = _pg_apply(dsn, statements, role, cfg.target.database)
    else:
        out["applied"] = _my_apply(dsn, statements)
    out["dsn"] = role_dsn(dsn, role, password)
    log.info("privileges.role_created", role=role, kind=kind, statements=len(statements))
    return out


def sandbox_role(cfg: Settings, kind: str, role: str = DEFAULT_ROLE) -> tuple[str, str]:
    """Create ``role`` in the sandbox ``kind`` ("postgres" | "mariadb") of ``cfg`` (once; recorded in
    ``sandbox.json``) and return (role, its DSN). PostgreSQL: the role also gets CREATEDB so benchmark
    databases of any name can be created (a production role owns exactly the one ``setup-role`` makes).
    MariaDB: the account is ``'role'@'127.0.0.1'`` without a password, like the sandbox's root.

    Raises:
        PrivilegeError: no such sandbox.
    """
    info: Any = sandbox_of(kind, cfg.storage.home).info()
    if info is None:
        raise PrivilegeError(f"no {kind} sandbox under {cfg.storage.home}")
    if info.role is None:
        admin = cfg.model_copy(update={"target": cfg.target.model_copy(update={"dsn": info.dsn})})
        setup_role(admin, role, host="127.0.0.1", apply=True)
        if kind == "postgres":
            with psycopg.connect(info.dsn, autocommit=True, connect_timeout=10) as conn:
                conn.execute(f"ALTER ROLE {role} CREATEDB".encode())
        info = info.model_copy(update={"role": role})
        info.save()
    return str(info.role), str(info.tuner_dsn)
