"""The one home of DBMS family and DSN knowledge (layer 1: no agenticdb imports).

Three names for "which server is this", each for its own question:

- :func:`family_of` — the *value dialect* of a catalog target: "postgresql", "mysql" (MySQL and MariaDB
  spell values alike: MariaDB manual "Server System Variables", MySQL 8.0 manual 5.1.8) or "linux".
  Units, value comparison, playbooks keyed by dialect and the validator's rule files use it.
- :func:`flavor_of_text` — the *server flavour*: "postgresql", "mariadb" or "mysql", from any text that
  names the server ("PostgreSQL 15.4", "mariadb", "10.11.6-MariaDB", a fingerprint's ``dbms``). Rule
  version specifiers, the diagnosis signal tables and the playbooks keyed by flavour use it.
- :func:`memory_family` — the family experience is shared within: "postgresql" or "mysql" (MariaDB
  counts as MySQL); unknown names map to themselves.

DSNs: :func:`parse_mysql_dsn` (``mysql://``, ``mariadb://`` or ``mysql+pymysql://`` URLs with an optional
``?unix_socket=`` or ``?socket=``) and :func:`parse_pg_dsn` (libpq URI or keyword string, PostgreSQL
manual 34.1.1 "Connection Strings", parsed by psycopg), :func:`is_pg_dsn` and :func:`dsn_location`.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from psycopg.conninfo import conninfo_to_dict

MYSQL_SCHEMES = ("mysql", "mariadb", "mysql+pymysql")
"""URL schemes of a MySQL/MariaDB DSN (``mysql+pymysql`` is SQLAlchemy's spelling, accepted everywhere)."""

PG_URI_SCHEMES = ("postgresql://", "postgres://")
"""Prefixes of a libpq connection URI (PostgreSQL manual 34.1.1.2)."""


def family_of(target: str) -> str:
    """Map a catalog ``target`` ("postgresql", "mariadb", "mysql", "linux", …) to a value dialect.

    Returns "postgresql", "mysql" (MySQL and MariaDB share the spelling) or "linux".

    Raises:
        ValueError: the target is none of those.
    """
    t = target.lower()
    if t.startswith("postgres") or t.startswith("pg"):
        return "postgresql"
    if "maria" in t or "mysql" in t:
        return "mysql"
    if t.startswith("linux") or t == "os":
        return "linux"
    raise ValueError(f"target {target!r}: unknown dialect (expected postgresql, mariadb, mysql or linux)")


def flavor_of_text(*texts: str) -> str | None:
    """The server flavour named by the first of ``texts`` that names one: "postgresql", "mariadb" or
    "mysql" (case-insensitive; "postgres"/"pg" prefixes, "maria" before "mysql" because a MariaDB server
    calls itself MySQL-compatible in places). None when no text names a DBMS."""
    for text in texts:
        t = text.lower()
        if "postgres" in t or t.startswith("pg"):
            return "postgresql"
        if "maria" in t:
            return "mariadb"
        if "mysql" in t:
            return "mysql"
    return None


def flavor_of_catalog(target: str, version: str) -> str:
    """ "postgresql", "mariadb", "mysql" or "linux" for a catalog's ``target`` and ``version`` (a MySQL
    catalog of a MariaDB server says so in its version, e.g. "10.11.6-MariaDB").

    Raises:
        ValueError: the target is no known dialect (from :func:`family_of`).
    """
    fam = family_of(target)
    if fam == "mysql":
        return "mariadb" if "maria" in (target + version).lower() else "mysql"
    return fam


_MEMORY_FAMILY = {
    "postgresql": "postgresql",
    "postgres": "postgresql",
    "pg": "postgresql",
    "mysql": "mysql",
    "mariadb": "mysql",
}


def memory_family(dbms: str) -> str:
    """``postgresql`` or ``mysql`` (MariaDB counts as the MySQL family); unknown names map to themselves."""
    key = dbms.strip().lower()
    return _MEMORY_FAMILY.get(key, key)


def is_pg_dsn(dsn: str) -> bool:
    """True for a libpq URI (``postgresql://``, ``postgres://``) or keyword string starting ``host=``."""
    return dsn.startswith(("postgres", "host="))


def is_mysql_dsn(dsn: str) -> bool:
    """True for a MySQL/MariaDB URL: its scheme is one of :data:`MYSQL_SCHEMES` (``mysql://``, ``mariadb://``,
    ``mysql+pymysql://``), the forms :func:`parse_mysql_dsn` reads."""
    return "://" in dsn and dsn.split("://", 1)[0].strip().lower() in MYSQL_SCHEMES


def parse_mysql_dsn(dsn: str) -> dict[str, Any]:
    """``mysql://user:pass@host:port/db?unix_socket=/path`` → PyMySQL connect kwargs.

    Keys: host (default 127.0.0.1), port (3306), user (root), password (""), and when given database
    and unix_socket (``?unix_socket=`` or ``?socket=``). User and password are percent-decoded.

    Raises:
        ValueError: the scheme is not one of :data:`MYSQL_SCHEMES`, or the port is not a number (names
            the DSN and the rule).
    """
    parts = urlsplit(dsn)
    if parts.scheme not in MYSQL_SCHEMES:
        raise ValueError(f"target.dsn = {dsn!r}: expected mysql://user:pass@host:port/db[?unix_socket=...]")
    try:
        port = parts.port or 3306
    except ValueError:
        raise ValueError(f"target.dsn = {dsn!r}: the port is not a number") from None
    query = parse_qs(parts.query)
    kwargs: dict[str, Any] = {
        "host": parts.hostname or "127.0.0.1",
        "port": port,
        "user": unquote(parts.username) if parts.username else "root",
        "password": unquote(parts.password) if parts.password else "",
    }
    if db := parts.path.lstrip("/"):
        kwargs["database"] = db
    if sock := query.get("unix_socket") or query.get("socket"):
        kwargs["unix_socket"] = sock[0]
    return kwargs


def parse_pg_dsn(dsn: str) -> dict[str, Any]:
    """A libpq URI or keyword string → its parameters (``host``, ``port``, ``user``, ``dbname`` …).

    Raises:
        ValueError: psycopg cannot parse it (names the DSN and psycopg's reason).
    """
    try:
        return dict(conninfo_to_dict(dsn))
    except Exception as exc:  # noqa: BLE001 - psycopg raises ProgrammingError for bad conninfo
        raise ValueError(f"target.dsn={dsn!r}: not a valid libpq connection string ({exc})") from None


def dsn_location(dsn: str) -> tuple[str, str, str]:
    """``(host, port, database)`` of a DSN (URL or ``key=value`` form) as written, "" where absent; never
    the user or the password."""
    if "://" in dsn:
        u = urlsplit(dsn)
        return u.hostname or "", str(u.port or ""), u.path.lstrip("/")
    kv = dict(p.split("=", 1) for p in dsn.split() if "=" in p)
    return kv.get("host", ""), kv.get("port", ""), kv.get("dbname", "")
