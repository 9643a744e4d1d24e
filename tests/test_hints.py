""" "Run this next" hints carry the flags the user gave (a fresh-user trial pasted ``undo with: agenticdb
rollback --dbms`` after ``apply --sandbox postgres`` and got "error: no target given", exit 2)."""

from __future__ import annotations

import io
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from agenticdb.cli.tune_cmd import _summary
from agenticdb.config import Settings
from agenticdb.invocation import STORE_FLAGS, command, remember
from agenticdb.loop.steps import SessionResult


@pytest.fixture(autouse=True)
def _forget() -> Iterator[None]:
    yield
    remember(None, None, None, None)  # other tests in this process print hints without flags


def test_hints_carry_the_target_flags_with_the_password_redacted() -> None:
    remember(Path("my conf.toml"), "postgresql://bob:s3cret@db:5432/app", None, Path("/srv/adb"))
    hint = command("rollback --dbms")
    assert "s3cret" not in hint
    assert shlex.split(hint) == [
        "agenticdb", "rollback", "--dbms", "--config", "my conf.toml",
        "--target", "postgresql://bob:***@db:5432/app", "--home", "/srv/adb",
    ]  # fmt: skip
    assert (
        command("journal show s1", STORE_FLAGS) == "agenticdb journal show s1 --config 'my conf.toml' --home /srv/adb"
    )
    remember(None, None, "postgres", None)
    assert command("apply R1") == "agenticdb apply R1 --sandbox postgres"
    remember(None, None, None, None)  # a config file or AGENTICDB_TARGET__DSN carries over by itself
    assert command("rollback --dbms") == "agenticdb rollback --dbms"


def test_tune_summary_hints_name_the_same_target(tmp_path: Path) -> None:
    remember(None, None, "postgres", tmp_path)
    result = SessionResult(session_id="s1", status="completed", reason="done", start_from={"work_mem": "8MB"})
    out = io.StringIO()
    _summary(Console(file=out, soft_wrap=True, width=300), Settings(), result)
    text = out.getvalue()
    assert f"`agenticdb rollback --dbms --sandbox postgres --home {tmp_path}` undoes it" in text, text
    assert f"(agenticdb journal show s1 --home {tmp_path})" in text, text  # journal takes no --sandbox


def test_missing_sandbox_hint_names_the_home_given(tmp_path: Path) -> None:
    env = {**os.environ, "NO_COLOR": "1", "TERM": "dumb"}
    env.pop("AGENTICDB_HOME", None)
    r = subprocess.run(
        [sys.executable, "-m", "agenticdb.cli", "tune", "--sandbox", "postgres", "--home", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 2
    assert f"run `agenticdb sandbox up postgres --home {tmp_path}` first" in r.stderr, r.stderr
