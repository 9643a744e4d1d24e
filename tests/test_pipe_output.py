"""Output read through a pipe (issue 20, item 2): ``agenticdb validate FILE | cat`` and
``agenticdb catalog --sandbox postgres | cat`` against a real PostgreSQL sandbox, run as real processes
whose stdout is a pipe. No line is longer than 120 characters unless it holds one field whose value
alone is longer; nothing is centred or padded; ``--format json`` gives the same rows as JSON.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from agenticdb.sandbox.postgres import PostgresSandboxInfo

WIDTH = 120
FIELD = re.compile(r"^ {0,2}[\w ()]+: (.*)$")


def _run(pg: PostgresSandboxInfo, *args: str) -> subprocess.CompletedProcess[str]:
    home = Path(pg.root).parent.parent  # the sandbox lives in <home>/sandbox/postgres
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR", "TERM")}
    env["AGENTICDB_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "agenticdb.cli", *args, "--sandbox", "postgres"],
        capture_output=True,  # stdout is a pipe, as in `agenticdb validate FILE | cat`
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def _check_lines(text: str) -> None:
    lines = text.splitlines()
    assert lines, "no output"
    for line in lines:
        assert line == line.rstrip(), f"trailing padding: {line!r}"
        assert not line.startswith("    "), f"centred or indented: {line!r}"
        if len(line) > WIDTH:
            m = FIELD.match(line)
            assert m is not None, f"{len(line)} characters and not a single field: {line[:160]!r}"
            assert len(line) - len(m.group(1)) <= WIDTH  # only the one value is long


def test_validate_piped_is_narrow_and_json_has_the_rows(pg_sandbox: PostgresSandboxInfo, tmp_path: Path) -> None:
    change = tmp_path / "change.toml"
    change.write_text('shared_buffers = "256MB"\nwork_mem = "1GB"\nfsync = "off"\nmax_connections = 5\n')
    r = _run(pg_sandbox, "validate", str(change))
    assert r.returncode == 1, r.stderr  # fsync=off and a 256x step are refused
    _check_lines(r.stdout)
    assert r.stdout.startswith("verdict: REJECT")
    assert "parameter: fsync" in r.stdout and "result: rejected" in r.stdout
    j = _run(pg_sandbox, "validate", str(change), "--format", "json")
    doc = json.loads(j.stdout)
    assert j.returncode == 1 and doc["verdict"] == "reject" and doc["exit_code"] == 1
    by_name = {row["parameter"]: row for row in doc["changes"]}
    assert by_name["fsync"]["result"] == "rejected" and by_name["shared_buffers"]["result"] == "ok"


def test_catalog_piped_is_narrow_and_json_has_every_knob(pg_sandbox: PostgresSandboxInfo) -> None:
    r = _run(pg_sandbox, "catalog")
    assert r.returncode == 0, r.stderr
    _check_lines(r.stdout)
    assert "name: shared_buffers" in r.stdout
    assert "1797690000" not in r.stdout  # DBL_MAX bounds are not written out as 309 digits
    j = _run(pg_sandbox, "catalog", "--format", "json")
    rows = json.loads(j.stdout)["rows"]
    sb = next(row for row in rows if row["name"] == "shared_buffers")
    assert sb["current"].startswith("128MB") and sb["apply"] == "restart"
    narrow = _run(pg_sandbox, "catalog", "--like", "wal_buffers")
    _check_lines(narrow.stdout)
    assert "│ wal_buffers" in narrow.stdout  # a table that fits stays a table
