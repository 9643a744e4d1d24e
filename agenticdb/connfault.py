"""One line for a connection fault at the edges (issue 38): what happened, in words an operator acts on.

psycopg and PyMySQL raise errors whose text is several lines (libpq adds "Is the server running on that
host...?", a terminated backend's error carries a traceback's worth of context), and a caller that only
asked "available?" used to say "not accepting connections" for every cause, a refused password
included. :func:`describe_fault` gives the cause in one line: authentication (never the password: the
user name only), a connection ended by the server (SQLSTATE 57P01 admin shutdown: a shutdown or
``pg_terminate_backend``; MariaDB ER_SERVER_SHUTDOWN 1053, CR_SERVER_LOST 2013, CR_SERVER_GONE_ERROR
2006), refused, timed out, unknown database/role, else the first line of the driver's message.

Sources: PostgreSQL 15 manual Appendix A (SQLSTATE 57P01 admin_shutdown, 28P01 invalid_password,
28000 invalid_authorization_specification, 3D000 invalid_catalog_name); libpq's connection messages
("password authentication failed for user", "Connection refused", "timeout expired"); MariaDB KB
"MariaDB Error Codes" (1045 ER_ACCESS_DENIED_ERROR, 1049 ER_BAD_DB_ERROR, 1053 ER_SERVER_SHUTDOWN,
2003 CR_CONN_HOST_ERROR, 2006 CR_SERVER_GONE_ERROR, 2013 CR_SERVER_LOST).
"""

from __future__ import annotations

import re

import psycopg
import pymysql

#: SQLSTATE of a connection the server ended on an administrator's command (shutdown, pg_terminate_backend).
ADMIN_SHUTDOWN = "57P01"
#: MariaDB/MySQL error numbers of a connection ended by a server shutdown or lost mid-statement.
MYSQL_SHUTDOWN = 1053
MYSQL_LOST = (2006, 2013)

_PG_AUTH = re.compile(r'(?:password|\w+) authentication failed for user "([^"]*)"')
_PG_ROLE = re.compile(r'role "([^"]*)" does not exist')
_PG_DB = re.compile(r'database "([^"]*)" does not exist')
_MY_AUTH = re.compile(r"Access denied for user '([^']*)'")


def _first_line(text: str) -> str:
    line = next((s.strip() for s in text.splitlines() if s.strip()), "")
    return re.sub(r"^(?:connection failed: )?connection to server at [^:]*failed: (?:FATAL:\s+)?", "", line)


def is_admin_shutdown(exc: BaseException) -> bool:
    """True when ``exc`` is a connection the server ended on an administrator's command: PostgreSQL
    SQLSTATE 57P01 (psycopg.errors.AdminShutdown) or MariaDB ER_SERVER_SHUTDOWN (1053). A lost
    connection (2006/2013) alone is not evidence of a requested shutdown (a crash looks the same)."""
    if isinstance(exc, psycopg.Error):
        return exc.sqlstate == ADMIN_SHUTDOWN or "terminating connection due to administrator command" in str(exc)
    if isinstance(exc, pymysql.MySQLError):
        return bool(exc.args) and exc.args[0] == MYSQL_SHUTDOWN
    return False


def describe_fault(exc: BaseException) -> str:
    """The cause of a connection fault in one line, without any password.

    Args:
        exc: a psycopg or PyMySQL error (anything else: its first line).

    Returns:
        e.g. ``authentication failed for user "tuner"``, ``the server ended the connection (administrator
        command, SQLSTATE 57P01: a shutdown or pg_terminate_backend)``, ``connection refused (is the
        server running and listening there?)``.
    """
    if isinstance(exc, psycopg.Error):
        return _describe_pg(exc)
    if isinstance(exc, pymysql.MySQLError) and exc.args:
        return _describe_mysql(exc)
    return _first_line(str(exc)) or type(exc).__name__


_PG_ENDED = (
    "the server ended the connection (administrator command, SQLSTATE 57P01: a shutdown or pg_terminate_backend)"
)
_PG_PHRASES = (
    ("Connection refused", "connection refused (is the server running and listening there?)"),
    ("timeout expired", "connection timed out"),
    (
        "server closed the connection unexpectedly",
        "the server closed the connection unexpectedly (crash, restart or network cut)",
    ),
    ("consuming input failed", "the server closed the connection unexpectedly (crash, restart or network cut)"),
)


def _describe_pg(exc: psycopg.Error) -> str:
    text = str(exc)
    if m := _PG_AUTH.search(text):
        return f'authentication failed for user "{m.group(1)}" (the server refused the credentials)'
    if exc.sqlstate in ("28P01", "28000"):
        return f"authentication failed (SQLSTATE {exc.sqlstate})"
    if is_admin_shutdown(exc):
        return _PG_ENDED
    if m := _PG_ROLE.search(text):
        return f'authentication failed for user "{m.group(1)}" (no such role)'
    if m := _PG_DB.search(text):
        return f'database "{m.group(1)}" does not exist'
    for phrase, said in _PG_PHRASES:
        if phrase in text:
            return said
    sqlstate = f" (SQLSTATE {exc.sqlstate})" if exc.sqlstate else ""
    return f"{_first_line(text)}{sqlstate}"


def _describe_mysql(exc: pymysql.MySQLError) -> str:
    code, msg = exc.args[0], str(exc.args[1]) if len(exc.args) > 1 else ""
    if code == 1045:
        m = _MY_AUTH.search(msg)
        return f"authentication failed for user '{m.group(1) if m else '?'}' (error 1045)"
    if code == MYSQL_SHUTDOWN:
        return "the server ended the connection (server shutdown in progress, error 1053)"
    if code in MYSQL_LOST:
        return f"the connection to the server was lost (error {code})"
    if code == 2003:
        return f"connection refused (error 2003: {msg.split('(')[-1].rstrip(')')})"
    return f"{_first_line(msg)} (error {code})"
