"""One source for every reason a knob is left out (issue 39): validator rules beat the catalog file and
missing privileges, setup-role grants what the rules allow, and ``catalog`` through the sandbox's limited
role neither warns nor calls fsync a privilege problem (real PostgreSQL 15, real CLI processes)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from conftest import _shared_tmp

from agenticdb.models import Catalog
from agenticdb.targets.mysql import MySQLTarget
from agenticdb.targets.postgres import PostgresTarget
from agenticdb.validation.exclusions import denied_reason, left_out, never_tuned, policy_of
from agenticdb.validation.rules import load_ruleset

ENV = {k: v for k, v in os.environ.items() if not k.startswith("AGENTICDB_")}
ENV.update(COLUMNS="100", TERM="dumb", NO_COLOR="1")
RULES = load_ruleset("postgresql")


def test_strongest_reason_wins_with_rule_id() -> None:
    excluded = {
        "fsync": denied_reason(RULES, "postgresql", "15.4", "fsync", "agenticdb").reason,
        "work_mem": denied_reason(RULES, "postgresql", "15.4", "work_mem", "agenticdb").reason,
        "cluster_name": "cluster identity (source: manual)",
    }
    out = left_out(
        {"shared_buffers": 1, "wal_sync_method": 1},
        excluded,
        {"old_knob": "unsupported here"},
        RULES,
        "postgresql",
        "15.4",
        "strict",
    )
    assert out["fsync"].status.startswith("durability: off never set") and "rule pg.fsync" in out["fsync"].reason
    assert "setup-role never grants it" in out["fsync"].reason
    assert out["work_mem"].status == "unprivileged" and "setup-role --apply" in out["work_mem"].reason
    assert out["cluster_name"].status == "excluded" and out["old_knob"].status == "unsupported"
    assert "shared_buffers" not in out  # an ordinary knob is not listed
    assert sorted(out) == ["cluster_name", "fsync", "old_knob", "work_mem"]


def test_setup_role_grant_follows_the_durability_policy() -> None:
    assert never_tuned(RULES, "postgresql", "15.4", "synchronous_commit", "strict")
    assert not never_tuned(RULES, "postgresql", "15.4", "synchronous_commit", "relaxed")
    assert never_tuned(RULES, "postgresql", "15.4", "fsync", "relaxed")
    assert never_tuned(RULES, "postgresql", "15.4", "statement_timeout", "relaxed")
    assert not never_tuned(RULES, "postgresql", "15.4", "work_mem", "strict")
    why = denied_reason(RULES, "postgresql", "15.4", "synchronous_commit", "agenticdb").reason
    assert "only under policy.durability = relaxed" in why
    pol = policy_of(RULES, "postgresql", "15.4", "statement_timeout", "strict")
    assert pol is not None and pol.status == "protected: never tuned" and "rule pg.statement_timeout" in pol.reason


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agenticdb.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**ENV, "AGENTICDB_HOME": str(home)},
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture()
def sandbox_home() -> Iterator[tuple[Path, str]]:
    """A fresh `sandbox up postgres` home (limited role agenticdb) and the superuser DSN; down at the end.
    The home is readable by user postgres (conftest._shared_tmp), which runs the server."""
    base = _shared_tmp("agenticdb-excl-")
    home = base / "home"
    r = _cli(home, "sandbox", "up", "postgres")
    assert r.returncode == 0, r.stdout + r.stderr
    dsn = next(w for w in r.stdout.split() if w.startswith("postgresql://postgres@"))
    try:
        yield home, dsn
    finally:
        _cli(home, "sandbox", "down", "postgres")
        shutil.rmtree(base, ignore_errors=True)


def _records(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    name = ""
    for line in text.splitlines():
        if line.startswith("name: "):
            name = line.removeprefix("name: ")
            out[name] = ""
        elif name:
            out[name] += line + "\n"
    return out


def test_fresh_sandbox_catalog_reasons_counts_and_no_warning(sandbox_home: tuple[Path, str]) -> None:
    home, super_dsn = sandbox_home
    r = _cli(home, "catalog", "--sandbox", "postgres", "--excluded")
    assert r.returncode == 0, r.stderr
    assert "catalog.unprivileged" not in r.stderr and "warning" not in r.stderr, r.stderr
    title = r.stdout.splitlines()[0]
    records = _records(r.stdout)
    assert f"(--excluded: {len(records)} rows)" in title, title
    for name in ("fsync", "full_page_writes", "synchronous_commit", "statement_timeout"):
        assert "rule pg." in records[name] and "lacks ALTER SYSTEM" not in records[name], records[name]
        assert "durability" in records[name] or "protected" in records[name], records[name]
    assert not any("unprivileged" in text for text in records.values())
    head = _cli(home, "catalog", "--sandbox", "postgres").stdout.splitlines()[0]
    assert title.startswith(head), (head, title)

    # a real privilege gap is the one warning, and its reason says how to close it
    with psycopg.connect(super_dsn, autocommit=True) as conn:
        conn.execute("REVOKE ALTER SYSTEM ON PARAMETER work_mem FROM agenticdb")
    r = _cli(home, "catalog", "--sandbox", "postgres", "--excluded")
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("catalog.unprivileged") == 1 and "work_mem" in r.stderr, r.stderr
    row = _records(r.stdout)["work_mem"]
    assert "unprivileged" in row and "setup-role --apply" in row, row
    r = _cli(home, "validate", "--sandbox", "postgres", str(_changes(home, 'fsync = "off"\n')))
    assert r.returncode == 1
    assert "rule unknown" not in r.stdout and "pg.fsync" in r.stdout, r.stdout


def _changes(home: Path, text: str) -> Path:
    path = home / "changes.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "knob", ["backslash_quote", "client_min_messages", "transaction_read_only", "transaction_deferrable"]
)
def test_semantic_and_security_settings_are_never_tuned(knob: str) -> None:
    """Found by a new user's trial (2026-12-06): `validate` accepted these; they change what the application
    sees or parse, not performance, so a protected rule names each (validators/postgresql.toml)."""
    denied = denied_reason(RULES, "postgresql", "15.20", knob, "agenticdb")
    assert denied is not None and denied.status == "protected: never tuned", denied
    assert "setup-role never grants it" in denied.reason, denied
    tuned = denied_reason(RULES, "postgresql", "15.20", "work_mem", "agenticdb")
    assert tuned is None or not tuned.status.startswith("protected"), tuned  # an ordinary knob is not


# What a variable does, in the server's own words (information_schema.SYSTEM_VARIABLES.VARIABLE_COMMENT):
# an action ("Trigger an immediate dump of the buffer pool", "Abort a currently running load", "Wait until
# History list length is below …", "Write back dirty pages … and update the log checkpoint", "Reset a
# monitor counter") or a log ("… to the slow log", "… to MariaDB error log", "How logs should be written").
_ACTION = re.compile(r"^(Trigger|Abort|Wait until|Write back|Reset|Evict)\b")
_LOGGING = re.compile(r"slow (query )?log|general[ _]log|error log|^How logs should be written", re.I)


@pytest.fixture(scope="module")
def mariadb_described(mariadb_sandbox, tmp_path_factory) -> tuple[Catalog, dict[str, str]]:  # type: ignore[no-untyped-def]
    """The real MariaDB 10.11's catalog and each variable's own description (lower-case name → comment)."""
    t = MySQLTarget.from_config(mariadb_sandbox.target_config())
    t.cache_dir = tmp_path_factory.mktemp("agenticdb-cache")
    try:
        cat = t.catalog()
        with mariadb_sandbox.connect() as conn, conn.cursor() as cur:
            cur.execute("SELECT LOWER(VARIABLE_NAME), VARIABLE_COMMENT FROM information_schema.SYSTEM_VARIABLES")
            comments = {str(n): str(c or "") for n, c in cur.fetchall()}
    finally:
        t.close()
    return cat, comments


def test_mariadb_actions_are_not_knobs(mariadb_described: tuple[Catalog, dict[str, str]]) -> None:
    """Found by the variant tester (2026-12-06): innodb_buffer_pool_dump_now, _load_now, _load_abort and
    innodb_log_checkpoint_now were tuning knobs, though writing one does a thing once and reads OFF again
    (a trial of an action measures nothing). The kind, on the real MariaDB 10.11: every variable whose own
    description is an action is left out of the catalog with its reason (catalogs/mariadb.toml)."""
    cat, comments = mariadb_described
    actions = {n for n, c in comments.items() if _ACTION.search(c)}
    named = {"innodb_buffer_pool_dump_now", "innodb_buffer_pool_load_now", "innodb_buffer_pool_load_abort",
             "innodb_log_checkpoint_now", "innodb_max_purge_lag_wait"}  # fmt: skip
    assert named <= actions, named - actions  # the server still describes them as actions
    assert not actions & set(cat.knobs), sorted(actions & set(cat.knobs))
    for name in named:
        assert "an action, not a setting" in cat.excluded[name], cat.excluded[name]


def test_mariadb_logging_is_left_out_like_postgresql_logging(
    mariadb_described: tuple[Catalog, dict[str, str]],
    pg_sandbox,  # type: ignore[no-untyped-def]
) -> None:
    """Found by the variant tester (2026-12-06): general_log and slow_query_log were knobs on MariaDB while
    PostgreSQL's logging settings are left out. One rule for both: every MariaDB variable whose own
    description is about the general, slow or error log is excluded as a logging-only setting, as
    PostgreSQL's log_* and logging_collector are (catalogs/postgresql.toml)."""
    cat, comments = mariadb_described
    logging = {n for n, c in comments.items() if _LOGGING.search(c)}
    assert {"general_log", "slow_query_log", "log_output", "long_query_time"} <= logging, logging
    assert not logging & set(cat.knobs), sorted(logging & set(cat.knobs))
    for name in ("general_log", "slow_query_log", "log_slow_query", "log_output", "long_query_time"):
        assert "logging-only setting" in cat.excluded[name], (name, cat.excluded[name])
    pg = PostgresTarget.from_config(pg_sandbox.target_config())
    try:
        pg_cat = pg.catalog()
    finally:
        pg.close()
    for name in ("log_min_duration_statement", "log_statement", "logging_collector"):
        assert name not in pg_cat.knobs and "logging-only setting" in pg_cat.excluded[name], name
