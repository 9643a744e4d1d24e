"""CLI inspection commands as a fresh user meets them: validate, validate-config, catalog, report,
journal, memory, sandbox — real processes, stdout piped (not a terminal), COLUMNS=80, a real private
PostgreSQL for validate/catalog and real SQLite journals. Every bad input ends in one line, exit 2."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from agenticdb.store.journal import Journal

ENV = {**os.environ, "COLUMNS": "80", "TERM": "dumb", "NO_COLOR": "1", "_TYPER_FORCE_DISABLE_TERMINAL": "1"}
# a fresh user's settings, in the suite's temp home (tests/hosthome.py) when a command is given no --home
ENV = {k: v for k, v in ENV.items() if not k.startswith("AGENTICDB_") or k == "AGENTICDB_HOME"}


def run(*args: str, home: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    e = dict(ENV, **(env or {}))
    if home is not None:
        e["AGENTICDB_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "agenticdb.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=e,
        stdin=subprocess.DEVNULL,
    )


def one_line_error(r: subprocess.CompletedProcess[str], code: int = 2) -> str:
    out = r.stdout + r.stderr
    assert r.returncode == code, out
    assert "Traceback" not in out
    return out


# ------------------------------------------------------------------------------ validate-config
def test_config_directory_and_non_utf8_are_config_errors(tmp_path: Path) -> None:
    out = one_line_error(run("validate-config", str(tmp_path)))
    assert "is a directory" in out and str(tmp_path) in out
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(b"[loop]\n# caf\xe9\n")
    out = one_line_error(run("validate-config", str(bad)))
    assert "not UTF-8" in out and "latin1.toml" in out


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        (
            '[target]\nkind = "mariadb"\ndsn = "postgresql://u@h/db"\n[workload]\nkind = "sysbench-oltp-read-only"\n',
            "target.dsn",
        ),
        (
            '[target]\nkind = "postgresql"\ndsn = "mysql://u@h/db"\n',
            "does not fit target.kind = 'postgresql'",
        ),
        (
            '[target]\nkind = "mariadb"\ndsn = "mysql://u@h/db"\n',
            "workload.kind = 'pgbench' runs only on PostgreSQL",
        ),
        ('[workload]\nkind = "command"\n', "workload.command"),
        ('[target.service]\nkind = "systemd"\n', "target.service.unit"),
        ('[target.service]\nkind = "pg_ctl"\ndata_dir = "/d"\n', "target.service.bindir"),
        ('[target.service]\nkind = "command"\nstart = "x"\n', "target.service.stop"),
        ('[daemon]\nwindows = ["01:00"]\n', "daemon.windows[0]"),
        ('[policy]\nrestart_window = "25:00-02:00"\n', "hour 25 is not 00-23"),
        ("[workload]\nduration_s = -5\n", "workload.duration_s"),
        ("[workload]\nscale = 0\n", "workload.scale = 0: must be > 0"),
        ("[workload]\nclients = 0\n", "workload.clients"),
        ("[loop]\nmax_round = 3\n", "loop.max_round = 3: unknown key (not a setting of [loop])"),
    ],
)
def test_configs_that_cannot_work_are_refused(tmp_path: Path, text: str, expect: str) -> None:
    f = tmp_path / "a.toml"
    f.write_text(text)
    out = one_line_error(run("validate-config", str(f)))
    assert expect in out


def test_good_configs_pass_and_llm_without_model_is_a_warning(tmp_path: Path) -> None:
    f = tmp_path / "a.toml"
    f.write_text(
        '[target]\nkind = "mariadb"\ndsn = "mysql://root@127.0.0.1:3306/x"\n'
        '[workload]\nkind = "tpch"\n[planner]\nkind = "llm"\n[daemon]\nwindows = ["22:00-02:00"]\n'
    )
    r = run("validate-config", str(f))
    assert r.returncode == 0, r.stderr
    assert "warning:" in r.stderr and "AGENTICDB_LLM_MODEL" in r.stderr
    r = run("validate-config", str(f), env={"AGENTICDB_LLM_MODEL": "m"})
    assert r.returncode == 0 and "warning" not in r.stderr
    f.write_text('[target]\ndsn = "host=/tmp port=5 dbname=x"\n')
    assert run("validate-config", str(f)).returncode == 0


@pytest.mark.parametrize(
    ("text", "key", "value", "write"),
    [
        ("[loop]\nmin_gain = 3\n", "loop.min_gain", "3", "0.03"),
        ("[loop]\nlatency_guard = 25\n", "loop.latency_guard", "25", "0.25"),
        ("[daemon]\ndrift_threshold = 20\n", "daemon.drift_threshold", "20", "0.2"),
        ("[workload]\nmax_error_rate = 5\n", "workload.max_error_rate", "5", "0.05"),
    ],
)
def test_a_percent_typed_into_a_fraction_is_a_warning(
    tmp_path: Path, text: str, key: str, value: str, write: str
) -> None:
    """A DBA's trial: ``min_gain = 3`` (300 %) passed validate-config silently. Every fraction-typed setting
    warns at a value >= 1 with one line naming the key, the value and the rule; still exit 0 (a test may
    mean 500 %)."""
    f = tmp_path / "a.toml"
    f.write_text(text)
    r = run("validate-config", str(f))
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith(f"warning: {key} = {value} means {value}00 %: ") and r.stderr.count("\n") == 1
    assert "almost surely a percent" in r.stderr and f"{key} is a fraction" in r.stderr and f"write {write}" in r.stderr


def test_a_percent_in_a_bounded_fraction_says_it_is_a_fraction(tmp_path: Path) -> None:
    """``confidence = 95`` was already refused ("less than 1"); the error now says why 95 is wrong, and a
    fraction set from a tune flag warns too."""
    f = tmp_path / "a.toml"
    f.write_text("[loop]\nconfidence = 95\n")
    out = one_line_error(run("validate-config", str(f)))
    assert "loop.confidence = 95: Input should be less than 1 (loop.confidence is a fraction: 0.95 = 95 %; " in out
    assert "for 95 % write 0.95)" in out
    r = run("tune", "--latency-guard", "25", "--target", "postgresql://u@127.0.0.1:1/x", home=tmp_path / "h")
    assert "warning: loop.latency_guard = 25 means 2500 %" in r.stderr


def test_a_fraction_typed_into_a_percent_is_a_warning(tmp_path: Path) -> None:
    """The opposite trap: ``disturbance_steal_pct = 0.1`` meant 10 % and is read as 0.1 %. Every
    percent-typed setting warns at a value in (0, 1), in validate-config and at tune start; 0 and 1 do not."""
    f = tmp_path / "a.toml"
    f.write_text("[loop]\ndisturbance_steal_pct = 0.1\n")
    r = run("validate-config", str(f))
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith("warning: loop.disturbance_steal_pct = 0.1 means 0.1 %: ") and r.stderr.count("\n") == 1
    assert "almost surely a fraction" in r.stderr and "loop.disturbance_steal_pct is a percent: 10 = 10 %" in r.stderr
    assert "for 10 % write 10)" in r.stderr
    r = run("tune", "-c", str(f), "--target", "postgresql://u@127.0.0.1:1/x", home=tmp_path / "h")
    assert "warning: loop.disturbance_steal_pct = 0.1 means 0.1 %" in r.stderr
    for quiet in ("0", "1", "25"):
        f.write_text(f"[loop]\ndisturbance_steal_pct = {quiet}\n")
        r = run("validate-config", str(f))
        assert r.returncode == 0 and "warning" not in r.stderr, (quiet, r.stderr)


def test_environment_error_names_the_variable(tmp_path: Path) -> None:
    f = tmp_path / "a.toml"
    f.write_text("[loop]\nmax_rounds = 3\n")
    out = one_line_error(run("validate-config", str(f), env={"AGENTICDB_LOOP__MAX_ROUNDS": "abc"}))
    assert "AGENTICDB_LOOP__MAX_ROUNDS" in out


def test_negative_duration_flag_is_refused_with_section_visible(tmp_path: Path) -> None:
    out = one_line_error(run("tune", "--duration", "-5", "--target", "postgresql://u@127.0.0.1:1/x", home=tmp_path))
    assert "[workload]" in out and "duration_s" in out and "greater than 0" in out


# ------------------------------------------------------------------------------------ validate
def _changes(tmp_path: Path, text: str) -> str:
    f = tmp_path / "c.toml"
    f.write_text(text)
    return str(f)


def test_bad_apply_claim_and_unquoted_unit(tmp_path: Path) -> None:
    out = one_line_error(
        run(
            "validate",
            _changes(tmp_path, 'work_mem = "8MB"\n'),
            "--target",
            "postgresql://u@127.0.0.1:1/x",
            "--apply",
            "bogus",
            home=tmp_path,
        )
    )
    assert "--apply" in out and "bogus" in out
    out = one_line_error(
        run(
            "validate",
            _changes(tmp_path, "work_mem = 16MB\n"),
            "--target",
            "postgresql://u@127.0.0.1:1/x",
            home=tmp_path,
        )
    )
    assert 'values with units must be quoted: work_mem = "16MB"' in out


def test_validate_messages(tmp_path: Path, pg_sandbox) -> None:  # type: ignore[no-untyped-def]
    dsn = pg_sandbox.dsn
    cfg = tmp_path / "agenticdb.toml"  # a restartable service, so the verdict is about the apply claim
    cfg.write_text(
        f'[target]\ndsn = "{dsn}"\n[target.service]\nkind = "pg_ctl"\n'
        f'data_dir = "{pg_sandbox.data_dir}"\nbindir = "{pg_sandbox.bindir}"\n'
        f'os_user = "{pg_sandbox.os_user}"\n'
    )
    f = _changes(tmp_path, 'shared_buffers = "256MB"\nwork_mem = "8MB"\n')
    r = run("validate", f, "--config", str(cfg), "--apply", "dynamic", home=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    warn = next(line for line in r.stdout.splitlines() if "corrected from" in line)
    assert "shared_buffers" in warn and "work_mem" not in warn
    assert "ACCEPT (apply: restart)" in r.stdout
    r = run("validate", f, "--config", str(cfg), home=tmp_path)  # no claim made: nothing to "correct"
    assert r.returncode == 0 and "corrected" not in r.stdout
    r = run(
        "validate",
        _changes(tmp_path, 'full_page_writes = "off"\nsearch_path = "x"\n'),
        "--target",
        dsn,
        home=tmp_path,
    )
    assert r.returncode == 1
    assert "REJECT" in r.stdout and "(apply:" not in r.stdout
    assert "search_path" in r.stdout and "full_page_writes" in r.stdout  # names never split when piped
    # fsync is on already: setting it "on" is a no-op, not a durability question
    r = run("validate", _changes(tmp_path, 'fsync = "on"\n'), "--target", dsn, home=tmp_path)
    assert r.returncode == 0 and "already in effect" in r.stdout


# ------------------------------------------------------------------------------------- catalog
def test_catalog_shows_policy_and_excluded_lists_protected(tmp_path: Path, pg_sandbox) -> None:  # type: ignore[no-untyped-def]
    r = run("catalog", "--target", pg_sandbox.dsn, "--like", "sync", home=tmp_path)
    assert r.returncode == 0, r.stderr
    row = _piped_records(r.stdout)["fsync"]  # piped and wider than 120 columns: one field per line
    assert "durability" in row and "never set" in row
    assert "name: max_sync_workers_per_subscription\n" in r.stdout  # a long name stays on one line
    r = run("catalog", "--target", pg_sandbox.dsn, "--excluded", home=tmp_path)
    records = _piped_records(r.stdout)
    for name in ("fsync", "full_page_writes", "TimeZone", "search_path", "default_transaction_isolation"):
        line = records.get(name, "")
        assert ("protected" in line or "durability" in line) and "rule pg." in line, name


def _piped_records(text: str) -> dict[str, str]:
    """``name: X`` records of a table listed one field per line (agenticdb.cli.output.print_table)."""
    out: dict[str, str] = {}
    name = ""
    for line in text.splitlines():
        if line.startswith("name: "):
            name = line.removeprefix("name: ")
            out[name] = ""
        elif name:
            out[name] += line + "\n"
    return out


# ---------------------------------------------------------------------------- report / journal
SID = "20260101-000000-abcdef"


def _journal(home: Path) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "journal.db"
    with Journal(path) as j:
        j.append(
            SID,
            "session.start",
            {
                "target": "postgresql",
                "workload": "sysbench-oltp-read-write-long-name",
                "planner": "heuristic",
                "durability": "strict",
            },
        )
        j.append(
            SID,
            "start_from",
            {
                "proposal": {"changes": [{"name": "work_mem", "value": "8MB"}]},
                "verdict": {"ok": True, "changes": [{"name": "work_mem", "value": "8MB", "previous": "4MB"}]},
            },
            0,
        )
        j.append(
            SID,
            "baseline",
            {
                "objective_name": "tps_per_p95",
                "higher_is_better": True,
                "noise_cv": 0.05,
                "objectives": [100.0, 110.0],
            },
            0,
        )
        j.append(
            SID,
            "session.end",
            {
                "status": "completed",
                "reason": "reached max rounds (1)",
                "baseline_objective": 105.0,
                "best_objective": 126.0,
                "rounds": 1,
                "best_changes": {"shared_buffers": "256MB"},
            },
        )
    return path


def test_report_summary_prefix_and_missing(tmp_path: Path) -> None:
    _journal(tmp_path)
    r = run("report", SID[:10], "--home", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "{" not in r.stdout.split("## Rounds")[0]  # no raw JSON header
    assert "105.000 → 126.000 TPS/p95 (+20.0%)" in r.stdout
    assert "TPS/p95 (transactions per s per ms of p95 latency)" in r.stdout
    assert "noise CV:** 5.0%" in r.stdout
    assert "## Best configuration" in r.stdout and "`shared_buffers = 256MB`" in r.stdout
    assert "`work_mem = 8MB` (was 4MB)" in r.stdout
    table_header = next(line for line in r.stdout.splitlines() if line.startswith("| round"))
    assert table_header.endswith("| reason |")  # not hard-wrapped at 80 columns
    r = run("report", "nope", "--home", str(tmp_path))
    assert r.returncode == 1 and "not in the journal" in r.stderr and "Traceback" not in r.stderr


def test_journal_list_keeps_ids_and_columns(tmp_path: Path) -> None:
    _journal(tmp_path)
    r = run("journal", "list", "--home", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert SID in r.stdout and "sysbench-oltp-read-write-long-name" in r.stdout and "postgresql" in r.stdout


def test_journal_export_format_and_verify_is_read_only(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    out = one_line_error(run("journal", "export", "--format", "csv", "--home", str(tmp_path)))
    assert "only jsonl is supported" in out
    with sqlite3.connect(path) as c:
        c.execute("DROP TRIGGER journal_no_update")
    r = run("journal", "verify", "--home", str(tmp_path))
    assert r.returncode == 1 and "journal_no_update" in r.stderr
    with sqlite3.connect(path) as c:
        names = {n for (n,) in c.execute("SELECT name FROM sqlite_master WHERE type='trigger'")}
    assert "journal_no_update" not in names  # verify did not repair (= modify) the evidence


def test_memory_list_not_squeezed(tmp_path: Path) -> None:
    from agenticdb.store.memory import MemoryBook

    with MemoryBook(tmp_path / "memory.db"):
        pass
    r = run("memory", "list", "--home", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "created (UTC)" in r.stdout  # a header split one char per line would not contain this


# ------------------------------------------------------------------------------------- sandbox
def test_sandbox_aliases_and_down_when_absent(tmp_path: Path) -> None:
    r = run("sandbox", "status", "postgresql", "--home", str(tmp_path))
    assert r.returncode == 1 and '"exists": false' in r.stdout
    # which home it looked in (a fresh user's root and user homes differ): in the JSON and on one stderr line
    assert f'"checked": "{tmp_path}/sandbox/postgres"' in r.stdout, r.stdout
    assert r.stderr.strip().splitlines() == [
        f"no postgres sandbox in {tmp_path}/sandbox/postgres: the home is --home, else storage.home, else "
        "$AGENTICDB_HOME, else /var/lib/agenticdb as root, else $XDG_DATA_HOME/agenticdb (~/.local/share/agenticdb)"
    ], r.stderr
    r = run("sandbox", "status", "--help", env={"COLUMNS": "200"})
    assert "$AGENTICDB_HOME, else /var/lib/agenticdb as root" in r.stdout, r.stdout
    r = run("sandbox", "down", "mysql", "--home", str(tmp_path))
    assert r.returncode == 0 and "no mariadb sandbox here" in r.stdout
    out = one_line_error(run("sandbox", "status", "oracle", "--home", str(tmp_path)))
    assert "expected postgres (or postgresql, pg) | mariadb (or mysql)" in out


def test_journal_show_names_the_objective(tmp_path: Path) -> None:
    _journal(tmp_path)
    r = run("journal", "show", SID[:8], "--home", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "TPS/p95 (transactions per s per ms of p95 latency)" in r.stdout


def test_journal_show_without_id_tells_the_newest_session(tmp_path: Path) -> None:
    # an empty home: list, show and tail say the same, exit 0 (issue 39: show used to fail with exit 1)
    said = []
    for cmd in ("list", "show", "tail"):
        r = run("journal", cmd, "--home", str(tmp_path))
        assert r.returncode == 0 and r.stderr == "", (cmd, r.stdout, r.stderr)
        said.append(r.stdout)
    assert said[0] == f"no sessions in {tmp_path / 'journal.db'} (nothing has been tuned with this storage yet)\n"
    assert len(set(said)) == 1
    # a journal file that holds no session (a DBA's trial: list printed an empty table, show "no journal yet")
    Journal(tmp_path / "journal.db").close()
    for cmd in ("list", "show", "tail"):
        r = run("journal", cmd, "--home", str(tmp_path))
        assert r.returncode == 0 and r.stdout == said[0], (cmd, r.stdout, r.stderr)
    _journal(tmp_path)
    newer = "20261202-070000-bbbbbb"
    with Journal(tmp_path / "journal.db") as j:
        j.append(newer, "session.start", {"target": "mysql", "workload": "sysbench", "planner": "heuristic"})
    r = run("journal", "show", "--home", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert f"Session {newer}" in r.stdout and SID not in r.stdout
    r = run("journal", "show", SID[:8], "--home", str(tmp_path))
    assert r.returncode == 0 and f"Session {SID}" in r.stdout
