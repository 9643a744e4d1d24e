"""Least privilege on the database side (issue 21): the role ``agenticdb setup-role`` creates, the
superuser refusal, and the knobs a limited role may not change.

The grants are data (``catalogs/roles.toml``, with their manual sections). agenticdb refuses to tune
through a superuser connection unless ``policy.allow_superuser = true``:

- PostgreSQL: ``pg_roles.rolsuper`` of ``current_user`` (manual 54.9 pg_roles).
- MariaDB / MySQL: the account holds ``ALL PRIVILEGES``, ``GRANT OPTION`` or ``CREATE USER`` on ``*.*``
  (``SHOW GRANTS FOR CURRENT_USER()``); on MySQL 8 also ``SUPER``. MariaDB 10.11 still needs SUPER for
  ``SET GLOBAL`` (no narrower privilege exists), so SUPER alone does not count as superuser there.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

import psycopg
import structlog

from agenticdb.dialect import parse_mysql_dsn
from agenticdb.resources import data_file

log = structlog.get_logger(__name__)

DEFAULT_ROLE = "agenticdb"
"""Name of the login role ``setup-role`` creates unless ``--role`` says otherwise."""

_IDENT = re.compile(r"^[a-z_][a-z0-9_$]*$")
_PARAM = re.compile(r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)?$")


class PrivilegeError(RuntimeError):
    """The connection is a superuser's and ``policy.allow_superuser`` is false, or a role name is bad."""


def refusal(user: str, kind: str) -> str:
    """The message of the superuser refusal (names ``setup-role`` and the override)."""
    return (
        f"the target DSN connects as {user!r}, a database superuser on {kind}: agenticdb refuses to tune "
        "with more rights than it needs. Create a limited role with `agenticdb setup-role --target "
        "<superuser DSN> --apply` and put that role in target.dsn, or set policy.allow_superuser = true "
        "(AGENTICDB_POLICY__ALLOW_SUPERUSER=true) to accept the risk"
    )


def check_identifier(name: str, what: str = "--role") -> str:
    """``name`` when it is a plain lower-case SQL identifier (letters, digits, _, $; no quoting needed).

    Raises:
        PrivilegeError: naming the value and the rule.
    """
    if not _IDENT.match(name) or len(name) > 63:
        raise PrivilegeError(f"{what} = {name!r}: must be a lower-case identifier [a-z_][a-z0-9_$]*, at most 63 chars")
    return name


def _roles(kind: str) -> dict[str, Any]:
    data = tomllib.loads(data_file("catalogs", "roles.toml").read_text(encoding="utf-8"))
    section = "mariadb" if kind == "mariadb" else "mysql" if kind == "mysql" else "postgresql"
    return dict(data[section])


def _literal(text: str, mysql: bool) -> str:
    """A SQL string literal: quotes doubled; on MySQL/MariaDB backslashes doubled too (they escape there;
    PostgreSQL's standard_conforming_strings keeps them literal)."""
    if mysql:
        text = text.replace("\\", "\\\\")
    return "'" + text.replace("'", "''") + "'"


def role_sql(
    kind: str,
    role: str = DEFAULT_ROLE,
    database: str = "agenticdb_bench",
    parameters: list[str] | None = None,
    password: str | None = None,
    host: str = "localhost",
) -> tuple[list[str], list[str]]:
    """The SQL statements that create the least-privilege role, and the notes to print with them.

    Args:
        kind: "postgresql", "mariadb" or "mysql".
        role: the login role (a plain identifier).
        database: the benchmark database the role owns (a plain identifier).
        parameters: PostgreSQL: the tunable knobs to grant ``ALTER SYSTEM`` on (GUC names, any case).
        password: the role's password (None: no password clause; peer/trust/socket authentication).
        host: MariaDB/MySQL account host part.

    Raises:
        PrivilegeError: a bad identifier, or PostgreSQL without any parameter.
    """
    check_identifier(role)
    check_identifier(database, "--database")
    spec = _roles(kind)
    names = sorted({p.lower() for p in parameters or [] if _PARAM.match(p.lower())})
    if kind == "postgresql" and not names:
        raise PrivilegeError("no tunable parameter to grant ALTER SYSTEM on (the catalog is empty)")
    my = kind != "postgresql"
    clause = ""
    if password:
        clause = f" IDENTIFIED BY {_literal(password, my)}" if my else f" PASSWORD {_literal(password, my)}"
    fields = {
        "role": role,
        "account": f"{_literal(role, True)}@{_literal(host, True)}",
        "password_clause": clause,
        "database": database,
        "parameters": ", ".join(names),
    }
    return [s.format(**fields) for s in spec["statements"]], list(spec.get("notes", []))


def pg_is_superuser(conn: Any) -> tuple[str, bool]:
    """(current_user, rolsuper) over a psycopg connection."""
    row = conn.execute("SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()
    return str(row[0]), bool(row[1])


def my_is_superuser(cur: Any, kind: str) -> tuple[str, bool]:
    """(CURRENT_USER(), superuser?) over a PyMySQL cursor, from ``SHOW GRANTS FOR CURRENT_USER()``."""
    cur.execute("SELECT CURRENT_USER()")
    user = str(cur.fetchone()[0])
    cur.execute("SHOW GRANTS FOR CURRENT_USER()")
    grants = [str(r[0]).upper() for r in cur.fetchall()]
    return user, any(_my_super_line(g, kind) for g in grants)


def _my_super_line(grant: str, kind: str) -> bool:
    if " ON *.* " not in grant:
        return False
    if "ALL PRIVILEGES" in grant or "WITH GRANT OPTION" in grant or "CREATE USER" in grant:
        return True
    return kind == "mysql" and re.search(r"\bSUPER\b", grant) is not None


def unprivileged_parameters(conn: Any, names: list[str]) -> list[str]:
    """PostgreSQL 15+: the GUCs of ``names`` the current role may not ``ALTER SYSTEM``
    (``has_parameter_privilege``, manual 9.26 Table 9.66)."""
    rows = conn.execute(
        "SELECT n FROM unnest(%s::text[]) AS n WHERE NOT has_parameter_privilege(n, 'ALTER SYSTEM')",
        ([n.lower() for n in names],),
    ).fetchall()
    return sorted(str(r[0]) for r in rows)


def connected_user(kind: str, dsn: str) -> tuple[str, bool]:
    """(user, is_superuser) of a connection to ``dsn`` (see the module docstring for the rule).

    Raises:
        psycopg.Error / pymysql.MySQLError: the server cannot be reached.
    """
    if kind == "postgresql":
        with psycopg.connect(dsn, connect_timeout=10, autocommit=True) as conn:
            return pg_is_superuser(conn)
    import pymysql  # lazy: start-up cost (loads pymysql; 24 modules)

    kwargs = {k: v for k, v in parse_mysql_dsn(dsn).items() if k != "database"}
    with pymysql.connect(**kwargs, connect_timeout=10) as my_conn, my_conn.cursor() as cur:
        return my_is_superuser(cur, kind)


def check_not_superuser(kind: str, dsn: str, allow_superuser: bool) -> str:
    """Refuse a superuser connection unless allowed; returns the connected user.

    Raises:
        PrivilegeError: the connection is a superuser's and ``allow_superuser`` is false (the message
            names ``agenticdb setup-role`` and ``policy.allow_superuser``).
    """
    user, superuser = connected_user(kind, dsn)
    if superuser and not allow_superuser:
        raise PrivilegeError(refusal(user, kind))
    if superuser:
        log.warning("privileges.superuser_allowed", user=user, reason="policy.allow_superuser = true")
    return user
