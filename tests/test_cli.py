"""CLI surface: golden help output, exit codes and one-line errors (real processes).

Regenerate the golden files after an intended change with ``UPDATE_GOLDEN=1 pytest tests/test_cli.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agenticdb.sandbox.postgres import PostgresSandboxInfo

GOLDEN = Path(__file__).parent / "golden"
ENV = {**os.environ, "COLUMNS": "100", "TERM": "dumb", "NO_COLOR": "1", "_TYPER_FORCE_DISABLE_TERMINAL": "1"}


def run(*args: str, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(ENV)
    if home is not None:
        env["AGENTICDB_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "agenticdb.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(
    "args",
    [[], ["tune"], ["sandbox"], ["journal"], ["rollback"], ["advise"], ["validate"], ["catalog"], ["report"]],
    ids=lambda a: "-".join(a) or "root",
)
def test_help_matches_golden(args: list[str]) -> None:
    r = run(*args, "--help")
    assert r.returncode == 0, r.stderr
    name = ("help-" + "-".join(args) if args else "help-root") + ".txt"
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") or not path.exists():
        path.write_text(r.stdout)
    assert r.stdout == path.read_text()


def test_no_help_text_shows_docstring_markup() -> None:
    """A command's docstring is its --help: reST markup there is printed as it is (a fresh user read "like
    ``tail -f``" in `journal --help`). Every command's and option's help, at every level, is free of it."""
    from typer.main import get_command

    from agenticdb.cli import app

    found: list[str] = []

    def walk(cmd: Any, path: str) -> None:
        texts = [cmd.help or "", cmd.short_help or "", *(getattr(p, "help", None) or "" for p in cmd.params)]
        found.extend(f"{path}: {t[:120]!r}" for t in texts if "``" in t or ":func:`" in t or ":class:`" in t)
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, f"{path} {name}")

    walk(get_command(app), "agenticdb")
    assert not found, found


def test_report_matches_golden(tmp_path: Path) -> None:
    """The Markdown report of a fixed journal (tests/test_cli_inspect._journal) at COLUMNS=100 (issue 39)."""
    from test_cli_inspect import SID, _journal

    _journal(tmp_path)
    r = run("report", SID, "--home", str(tmp_path))
    assert r.returncode == 0, r.stderr
    path = GOLDEN / "report.md"
    if os.environ.get("UPDATE_GOLDEN") or not path.exists():
        path.write_text(r.stdout)
    assert r.stdout == path.read_text()


def test_help_has_no_type_tags_and_tune_shows_defaults() -> None:
    """Issue 39: no "<bool>" beside every flag; tune's options say their default and config key, list every
    workload kind (live included) and describe --allow-restart/--no-restart; --version exists."""
    out = run("tune", "--help").stdout
    assert "<bool>" not in out and "<str>" not in out and "<float>" not in out
    assert "<path>" not in run("validate", "--help").stdout  # arguments too
    flat = " ".join(out.replace("│", " ").split())
    assert "(default: 10; config loop.max_rounds)" in flat and "tpch | command | live" in flat
    assert "--objective" in flat and "--latency-guard" in flat
    assert "may agenticdb restart the server" in flat
    v = run("--version")
    assert v.returncode == 0 and v.stdout.startswith("agenticdb ")


def test_unreachable_target_is_one_line_error(tmp_path: Path) -> None:
    r = run("tune", "--target", "postgresql://postgres@127.0.0.1:1/postgres", "--rounds", "1", home=tmp_path)
    assert r.returncode == 1
    assert "connection refused" in r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr


def test_missing_sandbox_says_how_to_create_it(tmp_path: Path) -> None:
    r = run("tune", "--sandbox", "postgres", home=tmp_path)
    assert r.returncode == 2
    assert "agenticdb sandbox up postgres" in r.stdout + r.stderr


def test_bad_config_exit_2_names_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[loop]\nmax_round = 3\n")
    r = run("validate-config", str(bad))
    assert r.returncode == 2 and "loop.max_round" in r.stdout + r.stderr
    r = run("tune", "--config", str(bad), home=tmp_path)
    assert r.returncode == 2 and "loop.max_round" in r.stdout + r.stderr


def test_sandbox_kinds_are_listed_and_spelled_alike_everywhere(tmp_path: Path) -> None:
    """A DBA's trial: ``sandbox up --help`` listed no kinds, and ``tune --sandbox postgresql`` was refused while
    ``sandbox status postgresql`` was accepted. Help lists every accepted name (agenticdb.sandbox), every
    command takes them, and an unknown one is one error listing them."""
    from agenticdb.sandbox import SANDBOX_ALIASES, SANDBOXES

    for args in (["sandbox", "up"], ["sandbox", "down"], ["sandbox", "status"], ["tune"]):
        flat = " ".join(run(*args, "--help").stdout.replace("│", " ").split())
        assert all(name in flat for name in [*SANDBOXES, *SANDBOX_ALIASES]), (args, flat)
    for name in ("postgresql", "PG"):  # the sandbox does not exist here: the error says how to create it
        r = run("tune", "--sandbox", name, home=tmp_path)
        assert r.returncode == 2 and "agenticdb sandbox up postgres" in r.stderr, r.stderr
    for args in (["tune", "--sandbox", "oracle"], ["sandbox", "up", "oracle"], ["sandbox", "down", "oracle"]):
        r = run(*args, home=tmp_path)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert "'oracle': expected postgres (or postgresql, pg) | mariadb (or mysql)" in r.stderr


def test_latency_guard_help_says_what_off_means() -> None:
    """A DBA's trial: --latency-guard's help read "None = no guard (default: none)"."""
    flat = " ".join(run("tune", "--help").stdout.replace("│", " ").split())
    guard = flat[flat.index("--latency-guard") : flat.index("config loop.latency_guard")]
    assert "None" not in guard and "none" not in guard
    assert "(default: off — decisions on the objective alone;" in guard


def test_rollback_dry_run_writes_nothing(tmp_path: Path) -> None:
    """A DBA's trial: ``rollback --dry-run`` created journal.db, journal.key and memory.db in an empty home.
    It creates no file there, and leaves a home with a session byte for byte as it was (no lock file, no
    schema, no SQLite side files)."""
    from agenticdb.models import Snapshot
    from agenticdb.store.journal import Journal
    from agenticdb.store.memory import MemoryBook

    dsn = "postgresql://u@127.0.0.1:1/x"
    fresh = tmp_path / "fresh"
    r = run("rollback", "--dbms", "--os", "--dry-run", "--target", dsn, home=fresh)
    assert not fresh.exists()
    assert r.returncode == 1 and f"no sessions in {fresh / 'journal.db'}" in r.stderr + r.stdout
    home, sid = tmp_path / "home", "20261206-130000-abcdef"
    with Journal(home / "journal.db", key_file=home / "journal.key") as j:
        j.append(sid, "session.start", {"target": "postgresql", "workload": "pgbench", "planner": "heuristic"})
        snap = Snapshot(target="postgresql", values={"work_mem": "4MB"}, label="baseline")
        j.append(sid, "intent", {"snapshot": snap.model_dump(mode="json")}, 1)
    with MemoryBook(home / "memory.db") as book:
        book.save_os_original(sid, "vm.swappiness", "60")
    before = {p: p.read_bytes() for p in sorted(home.rglob("*"))}
    r = run("rollback", "--os", "--dry-run", "--target", dsn, home=home)
    assert r.returncode == 0 and "vm.swappiness → 60" in r.stdout, r.stdout + r.stderr
    r = run("rollback", "--dbms", "--dry-run", "--target", dsn, home=home)  # the server does not answer: no guess
    assert r.returncode == 1 and "cannot read the server's current values" in r.stdout, r.stdout + r.stderr
    assert {p: p.read_bytes() for p in sorted(home.rglob("*"))} == before


def test_rollback_needs_a_stage(tmp_path: Path) -> None:
    r = run("rollback", home=tmp_path)
    assert r.returncode == 2 and "--dbms" in r.stdout + r.stderr


@pytest.mark.parametrize(
    ("text", "hint"), [("fsync = off\n", 'fsync = "off"'), ("work_mem = 16MB\n", 'work_mem = "16MB"')]
)
def test_change_file_hints_for_postgresql_conf_habits(tmp_path: Path, text: str, hint: str) -> None:
    f = tmp_path / "c.toml"
    f.write_text(text)
    r = run("validate", str(f), "--target", "postgresql://x@127.0.0.1:1/x", home=tmp_path)
    assert r.returncode == 2 and hint in r.stdout + r.stderr


@pytest.mark.parametrize(
    ("text", "said"),
    [("work_mem = 2025-01-01\n", "a TOML date/time is not a knob value"), ("", "nothing to validate")],
    ids=["toml-date", "empty"],
)
def test_change_file_without_knob_values_is_one_line_error(tmp_path: Path, text: str, said: str) -> None:
    """Found by the breaker: a TOML date crashed validate with a traceback; an empty file was ACCEPT."""
    f = tmp_path / "changes.toml"
    f.write_text(text)
    r = run("validate", str(f), "--target", "postgresql://nobody@127.0.0.1:1/none", home=tmp_path)
    assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr + r.stdout


def test_an_agenticdb_configuration_given_to_validate_is_named_as_one(tmp_path: Path) -> None:
    """A new user gave configs/bad/unknown-key.toml to `validate --sandbox postgres` and read
    "loop.max_rounds=5: unknown parameter on postgresql 15.20": the file is named a configuration file, with the
    command that checks one. A change file's dotted knob names (tables once parsed) are still name = value."""
    config = Path(__file__).resolve().parents[1] / "configs" / "bad" / "unknown-key.toml"
    r = run("validate", str(config), "--target", "postgresql://nobody@127.0.0.1:1/none", home=tmp_path)
    said = r.stdout + r.stderr
    assert r.returncode == 2 and "is an agenticdb configuration file ([loop])" in said, said
    assert "agenticdb validate-config" in said and "unknown parameter" not in said, said
    from agenticdb.cli.change_file import parse_change_file

    f = tmp_path / "changes.toml"
    f.write_text('vm.swappiness = 10\nauto_explain.log_min_duration = "1s"\n[kernel]\nsched_autogroup_enabled = 0\n')
    knobs = {"vm.swappiness": 10, "auto_explain.log_min_duration": "1s", "kernel.sched_autogroup_enabled": 0}
    assert parse_change_file(f) == knobs
    f.write_text('[policy]\ndurability = "strict"\n[workload]\nkind = "pgbench"\n')
    r = run("validate", str(f), "--target", "postgresql://nobody@127.0.0.1:1/none", home=tmp_path)
    assert r.returncode == 2 and "configuration file ([policy], [workload])" in r.stdout + r.stderr


def test_demo_tail_matches_golden(tmp_path: Path) -> None:
    """The demo's last lines (scripts/demo_story.sh, run by scripts/demo.sh after `tune`) for a session whose
    opening raced three whole configurations and kept the leader after its proof (an in-memory target and a
    scripted workload, so the numbers are fixed): the Session end block, the best configuration and how to
    read the story again (issue 39). Session ids are replaced by <sid>."""
    from test_race import LOSER, PLACEBO, WINNER, candidates, session

    s, _, _, _ = session(tmp_path, candidates(("placebo", PLACEBO), ("loser", LOSER), ("winner", WINNER)))
    result = s.run()
    assert result.status == "completed" and result.best_changes.get("work_mem") == "8MB", result.reason
    s.journal.close()
    (tmp_path / "j.db").rename(tmp_path / "journal.db")
    env = {**ENV, "AGENTICDB_HOME": str(tmp_path), "ADB": "agenticdb"}
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    script = Path(__file__).parents[1] / "scripts" / "demo_story.sh"
    r = subprocess.run(["bash", str(script), s.session_id], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.replace(s.session_id, "<sid>").splitlines()
    tail = "\n".join(lines[next(i for i, ln in enumerate(lines) if "Session end" in ln) :]) + "\n"
    path = GOLDEN / "demo-tail.txt"
    if os.environ.get("UPDATE_GOLDEN") or not path.exists():
        path.write_text(tail)
    assert tail == path.read_text()


def test_target_help_names_the_dsn_forms_the_option_tells_apart(tmp_path: Path) -> None:
    """A new user read "DSN of the database to tune" and did not know what to pass: the help names each DSN form,
    and each form it names is taken for the family it says (cli.settings)."""
    from agenticdb.cli import settings
    from agenticdb.cli.help_model import TARGET_HELP

    forms = {"postgresql://USER@HOST:PORT/DB": "postgresql", "'host=H dbname=D'": "postgresql"}
    forms["mysql://USER@HOST:PORT/DB"] = "mariadb"
    for form, family in forms.items():
        assert form in TARGET_HELP
        dsn = form.strip("'").replace("USER", "u").replace("HOST", "h").replace("PORT", "5432").replace("DB", "d")
        assert settings(None, dsn, None, tmp_path).target.kind == family, form
    assert "--config" in TARGET_HELP and "--sandbox" in TARGET_HELP


def test_every_mysql_scheme_the_dialect_reads_is_taken_for_mariadb(tmp_path: Path) -> None:
    """--target mariadb://… was taken for PostgreSQL (cli.settings knew only mysql://) and target.dsn refused
    it for kind mariadb, though dialect.parse_mysql_dsn reads mariadb:// and mysql+pymysql:// (MYSQL_SCHEMES)."""
    from agenticdb.cli import settings
    from agenticdb.config.sections import TargetConfig
    from agenticdb.dialect import MYSQL_SCHEMES

    for scheme in MYSQL_SCHEMES:
        dsn = f"{scheme}://root@127.0.0.1:3306/test"
        assert settings(None, dsn, None, tmp_path).target.kind == "mariadb", scheme
        assert TargetConfig(kind="mariadb", dsn=dsn).dsn == dsn
    with pytest.raises(ValueError, match=r"redis://h/0.*scheme one of mysql, mariadb, mysql\+pymysql"):
        TargetConfig(kind="mariadb", dsn="redis://h/0")


def test_rollback_dry_run_with_nothing_to_change_says_so(pg_sandbox: PostgresSandboxInfo, tmp_path: Path) -> None:
    """A new user read "would change 0 value(s):" with nothing after it: when every value in effect is the
    snapshot's, the dry run says there is nothing to change (read-only on the shared sandbox)."""
    import io

    import psycopg
    from rich.console import Console

    from agenticdb.cli.rollback_cmd import run_rollback
    from agenticdb.config import load_config
    from agenticdb.models import Snapshot
    from agenticdb.store.journal import Journal

    with psycopg.connect(pg_sandbox.dsn, autocommit=True) as c:
        row = c.execute("SELECT current_setting('work_mem')").fetchone()
    assert row is not None
    sid = "20261207-030000-abcdef"
    with Journal(tmp_path / "journal.db", key_file=tmp_path / "journal.key") as j:
        j.append(sid, "session.start", {"target": "postgresql", "workload": "pgbench", "planner": "heuristic"})
        snap = Snapshot(target="postgresql", values={"work_mem": str(row[0])}, label="baseline")
        j.append(sid, "intent", {"snapshot": snap.model_dump(mode="json")}, 1)
    storage = {"home": tmp_path, "memory_db": None, "journal_db": None}
    cfg = load_config(None, {"target": pg_sandbox.target_config().model_dump(), "storage": storage})
    out = io.StringIO()
    code = run_rollback(cfg, True, False, sid, "baseline", Console(file=out, width=300), dry_run=True)
    said = out.getvalue()
    assert code == 0 and "nothing to change: the values in effect are the 'baseline' snapshot's" in said, said
    assert "would change 0" not in said, said


def test_home_flag_keeps_the_files_a_config_names(tmp_path: Path) -> None:
    """``--home`` moves what is derived from the home, not a file the configuration names: a config's
    storage.journal_db (and memory_db) stay where it says. The flag used to reset both to None, so `journal list
    -c FILE --home H` read an empty H/journal.db ("no sessions") beside the real journal, and a session would have
    started a second, empty Memory Book."""
    from agenticdb.store.journal import Journal

    (tmp_path / "j").mkdir()
    with Journal(tmp_path / "j" / "journal.db") as j:
        j.append("20261207-030000-abcdef", "session.start", {"target": "postgresql", "workload": "pgbench"})
    cfg = tmp_path / "agenticdb.toml"
    cfg.write_text(f'[storage]\njournal_db = "{tmp_path / "j" / "journal.db"}"\nmemory_db = "{tmp_path / "m.db"}"\n')
    r = run("journal", "list", "--config", str(cfg), "--home", str(tmp_path / "h"))
    assert r.returncode == 0 and "20261207-030000-abcdef" in r.stdout, r.stdout + r.stderr
    r = run("memory", "list", "--config", str(cfg), "--home", str(tmp_path / "h"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert not (tmp_path / "h" / "journal.db").exists() and not (tmp_path / "h" / "memory.db").exists()


def _commands_with_home() -> list[list[str]]:
    """The argv prefix of every command that takes ``--home`` (walked from the click tree, so a new one is in)."""
    import typer

    from agenticdb.cli import app

    out: list[list[str]] = []

    def walk(cmd: Any, path: list[str]) -> None:  # typer's own click (typer._click) in typer >= 0.29
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                walk(sub, [*path, name])
        elif any("--home" in getattr(p, "opts", ()) for p in cmd.params):
            out.append(path)

    walk(typer.main.get_command(app), [])
    return out


def test_a_blank_home_is_refused_by_every_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--home ""`` was ``Path(".")``: `journal list` read ./journal.db, `sandbox status` looked in ./sandbox and
    `tune` would have put its files in whatever directory it ran from, while ``storage.home = ""`` in a file is
    refused (cd43af7). Every command that takes --home refuses a blank one before doing anything: exit 2 and one
    line naming the option, the value and the rule."""
    from typer.testing import CliRunner

    from agenticdb.cli import app

    commands = _commands_with_home()
    assert ["tune"] in commands and ["journal", "list"] in commands and ["sandbox", "status"] in commands
    assert ["memory", "list"] in commands and ["daemon"] in commands, commands
    monkeypatch.chdir(tmp_path)
    for path in commands:
        for blank in ("", " "):
            r = CliRunner().invoke(app, [*path, "--home", blank], env={"COLUMNS": "300"})
            said = r.stdout + (r.stderr if r.stderr_bytes is not None else "")
            assert r.exit_code == 2, (path, r.exit_code, said)
            assert f"error: --home {blank!r}: must be a path (empty is the current directory)" in said, (path, said)
            assert said.count("\n") == 1, (path, said)
    assert list(tmp_path.iterdir()) == []
    r = run("journal", "list", "--home", str(tmp_path / "h"))  # a real path is taken as before
    assert r.returncode == 0 and str(tmp_path / "h" / "journal.db") in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("blank", ["", "  "], ids=["empty", "blank"])
def test_a_blank_agenticdb_home_is_refused(tmp_path: Path, blank: str) -> None:
    """``AGENTICDB_HOME=""`` was taken for unset (``if os.environ.get(...)``): `journal list` read the default
    home's journal (/var/lib/agenticdb as root) and a session would have written there, while ``--home ""`` is
    refused. Now every command refuses it as it refuses a blank --home: exit 2, one line naming the variable, its
    value and the rule, and nothing read or written; also when --home names the home (the variable is a mistake
    the next command without it would make)."""
    env = {**ENV, "AGENTICDB_HOME": blank}
    commands = [
        ["journal", "list"],
        ["memory", "list"],
        ["sandbox", "status", "postgres"],
        ["report"],
        ["journal", "list", "--home", str(tmp_path / "h")],
    ]
    for args in commands:
        r = subprocess.run(
            [sys.executable, "-m", "agenticdb.cli", *args],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
        )
        assert r.returncode == 2, (args, r.returncode, r.stdout + r.stderr)
        assert r.stdout == "", (args, r.stdout)
        assert f"AGENTICDB_HOME = {blank!r}: must be a path (empty is the current directory); leave it out" in (
            r.stderr
        ), (args, r.stderr)
        assert "/var/lib/agenticdb as root" in r.stderr and r.stderr.count("\n") == 1, (args, r.stderr)
    assert list(tmp_path.iterdir()) == []
