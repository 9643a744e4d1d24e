"""The server's reason extracted from real log text (tests/data/server_logs, captured from the real
PostgreSQL 15 and MariaDB 10.11 servers; see its README)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agenticdb.host.server_log import mysql_reason, postgres_reason, server_reason, with_reason

LOGS = Path(__file__).parent / "data" / "server_logs"


def text(name: str) -> str:
    return (LOGS / name).read_text()


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("pg-min_wal_size.log", 'FATAL: "min_wal_size" must be at least twice "wal_segment_size"'),
        ("pgctl-min_wal_size.out", 'FATAL: "min_wal_size" must be at least twice "wal_segment_size"'),
        ("pg-shared_buffers.log", "FATAL: could not map anonymous shared memory: Cannot allocate memory"),
        ("pgctl-shared_buffers.out", "FATAL: could not map anonymous shared memory: Cannot allocate memory"),
        ("my-sql_buffer_result.log", "[ERROR] /usr/sbin/mariadbd: unknown variable 'sql_buffer_result=ON'"),
        ("my-innodb_buffer_pool_size.log", "[ERROR] mariadbd: Out of memory (Needed 0 bytes)"),
    ],
)
def test_reason_of_a_real_failed_start(name: str, reason: str) -> None:
    assert server_reason(text(name)) == reason


def test_postgres_takes_the_last_fatal_and_skips_what_clients_are_told() -> None:
    """The shared_buffers log also holds the earlier min_wal_size FATAL; a client's FATAL after the
    failed start is an effect of the restart, not its cause."""
    lines = text("pg-shared_buffers.log").splitlines()
    assert 'min_wal_size" must be' in "\n".join(lines)  # the earlier failure is in the tail
    lines.append("2026-12-01 03:57:36.001 UTC [19700] FATAL:  the database system is shutting down")
    lines.append("2026-12-01 03:57:36.002 UTC [19701] FATAL:  terminating connection due to administrator command")
    assert postgres_reason(lines) == "FATAL: could not map anonymous shared memory: Cannot allocate memory"


def test_mariadb_takes_the_first_error_of_the_last_start() -> None:
    """Two failed starts in one error log: the reason is the later start's first real error, not
    'Aborting' nor the storage-engine errors that follow it."""
    both = text("my-sql_buffer_result.log") + text("my-innodb_buffer_pool_size.log")
    assert mysql_reason(both.splitlines()) == "[ERROR] mariadbd: Out of memory (Needed 0 bytes)"
    assert "Aborting" not in (mysql_reason(text("my-sql_buffer_result.log").splitlines()) or "")


def test_no_reason_in_a_clean_log() -> None:
    clean = [ln for ln in text("pg-min_wal_size.log").splitlines() if "FATAL" not in ln]
    assert server_reason(clean) is None
    assert server_reason("") is None
    assert with_reason("restart failed", clean) == "restart failed"


def test_with_reason_appends_once() -> None:
    msg = with_reason("PostgreSQL restart failed: pg_ctl exited 1", text("pg-min_wal_size.log"))
    assert msg.endswith('; server log: FATAL: "min_wal_size" must be at least twice "wal_segment_size"')
    assert with_reason(msg, text("pg-min_wal_size.log")) == msg
    my = with_reason("mariadbd exited with code 7", text("my-sql_buffer_result.log"))
    reason = "[ERROR] /usr/sbin/mariadbd: unknown variable 'sql_buffer_result=ON'"
    assert my == f"mariadbd exited with code 7; server log: {reason}"


def test_a_fatal_the_server_came_up_after_is_not_the_reason() -> None:
    """The shared_buffers log holds the min_wal_size FATAL, then a successful start ("ready to accept
    connections"), then the shared_buffers FATAL: cut before the latter, there is no current reason."""
    lines = text("pg-shared_buffers.log").splitlines()
    cut = next(i for i, ln in enumerate(lines) if "could not map anonymous shared memory" in ln)
    assert any("min_wal_size" in ln for ln in lines[:cut])
    assert postgres_reason(lines[:cut]) is None
    assert postgres_reason(lines) == "FATAL: could not map anonymous shared memory: Cannot allocate memory"


def test_mariadb_errors_before_a_successful_start_are_not_the_reason() -> None:
    ready = "2026-12-01  3:57:55 0 [Note] /usr/sbin/mariadbd: ready for connections."
    assert mysql_reason([*text("my-sql_buffer_result.log").splitlines(), ready]) is None
