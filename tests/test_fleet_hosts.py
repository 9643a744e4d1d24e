"""Issue 19 end to end: three private PostgreSQL instances as tuned hosts (A, B, C), a fourth as the
central Memory Book, real `agenticdb tune` processes with very short sessions.

1. a session on A stores its experience in the central book;
2. sessions on B and C run at the same time: both retrieve A's experience (journaled as from host A)
   and both write theirs at once — nothing is lost;
3. with the central database stopped, a session on A completes on the local cache (the outage said
   once in the journal), and `agenticdb memory sync` afterwards uploads it exactly once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from agenticdb.sandbox.postgres import PostgresSandbox, PostgresSandboxInfo
from agenticdb.store.journal import Journal

pytestmark = pytest.mark.usefixtures("no_opening")  # diagnosis rounds, not the opening (tests/test_race.py)

CLI = [sys.executable, "-m", "agenticdb.cli"]
TUNE = [
    "tune",
    "--sandbox",
    "postgres",
    "--workload",
    "pgbench",
    "--rounds",
    "1",
    "--duration",
    "2",
    "--warmup",
    "0",
    "--scale",
    "1",
    "--clients",
    "2",
    "--baseline-runs",
    "1",
    "--max-pairs",
    "1",
]


def _tmp(prefix: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def fleet() -> Iterator[dict[str, tuple[PostgresSandbox, PostgresSandboxInfo, Path]]]:
    """host name → (sandbox, info, agenticdb home); "central" is the Memory Book."""
    out: dict[str, tuple[PostgresSandbox, PostgresSandboxInfo, Path]] = {}
    try:
        for name in ("central", "host-a", "host-b", "host-c"):
            home = _tmp(f"agenticdb-fleet-{name}-")
            sb = PostgresSandbox(home)
            out[name] = (sb, sb.up(), home)
        yield out
    finally:
        for sb, _, _ in out.values():
            sb.down()


def _url(fleet: dict[str, tuple[PostgresSandbox, PostgresSandboxInfo, Path]]) -> str:
    return f"postgresql://postgres@127.0.0.1:{fleet['central'][1].port}/postgres"


def _env(fleet: dict[str, tuple[PostgresSandbox, PostgresSandboxInfo, Path]], host: str) -> dict[str, str]:
    return {
        **os.environ,
        "AGENTICDB_HOME": str(fleet[host][2]),
        "AGENTICDB_STORAGE__MEMORY_URL": _url(fleet),
        "AGENTICDB_STORAGE__HOST_LABEL": host,
        "AGENTICDB_LOOP__MIN_PAIRS": "1",
    }


def tune(fleet: dict[str, tuple[PostgresSandbox, PostgresSandboxInfo, Path]], host: str) -> subprocess.Popen[str]:
    log = open(fleet[host][2] / "tune.log", "a")
    return subprocess.Popen(
        [*CLI, *TUNE], env=_env(fleet, host), stdout=log, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL
    )


def finish(
    fleet: dict[str, tuple[PostgresSandbox, PostgresSandboxInfo, Path]], host: str, p: subprocess.Popen[str]
) -> None:
    code = p.wait(600)
    assert code == 0, (fleet[host][2] / "tune.log").read_text()[-4000:]


def cli(
    fleet: dict[str, tuple[PostgresSandbox, PostgresSandboxInfo, Path]], host: str, *args: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], env=_env(fleet, host), capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )


def central_rows(fleet: dict[str, tuple[PostgresSandbox, PostgresSandboxInfo, Path]]) -> list[tuple[str, str]]:
    with psycopg.connect(_url(fleet)) as c:
        return [(r[0], r[1]) for r in c.execute("SELECT host, session_id FROM agenticdb.experience ORDER BY id")]


def central_rounds(fleet: dict[str, tuple[PostgresSandbox, PostgresSandboxInfo, Path]]) -> int:
    with psycopg.connect(_url(fleet)) as c:
        row = c.execute("SELECT count(*) FROM agenticdb.rounds").fetchone()
        return int(row[0]) if row else 0


def events(home: Path, name: str) -> list[dict[str, object]]:
    with Journal(home / "journal.db", read_only=True) as j:
        return [{"session": e.session_id, **e.data} for e in j.events() if e.event == name]


def local_rounds(home: Path) -> int:
    import sqlite3

    with sqlite3.connect(home / "memory.db") as db:
        return int(db.execute("SELECT count(*) FROM rounds").fetchone()[0])


@pytest.mark.slow
def test_three_hosts_share_one_memory_book(fleet: dict[str, tuple[PostgresSandbox, PostgresSandboxInfo, Path]]) -> None:
    # 1. host A learns; its experience and rounds land in the central book.
    finish(fleet, "host-a", tune(fleet, "host-a"))
    rows = central_rows(fleet)
    assert [h for h, _ in rows] == ["host-a"], rows
    a_session = rows[0][1]

    # 2. B and C at once: both retrieve A's experience, journaled as from host A; both writes survive.
    pb, pc = tune(fleet, "host-b"), tune(fleet, "host-c")
    finish(fleet, "host-b", pb)
    finish(fleet, "host-c", pc)
    for host in ("host-b", "host-c"):
        got = events(fleet[host][2], "experience.retrieved")
        assert got, f"{host} retrieved nothing"
        items = got[0]["experience"]
        assert isinstance(items, list)
        from_a = [i for i in items if i["session"] == a_session]
        assert from_a and from_a[0]["host"] == "host-a" and from_a[0]["from_other_host"] is True, items
        assert from_a[0]["origin"]["cpu_count"] >= 1 and from_a[0]["origin"]["storage_class"]
    rows = central_rows(fleet)
    assert sorted(h for h, _ in rows) == ["host-a", "host-b", "host-c"], rows
    assert central_rounds(fleet) == sum(local_rounds(fleet[h][2]) for h in ("host-a", "host-b", "host-c"))
    other = cli(fleet, "host-b", "memory", "list", "--from-other-hosts")
    assert other.returncode == 0 and "host-a" in other.stdout and "host-c" in other.stdout, other.stdout + other.stderr
    assert other.stdout.count("host-b") == 1  # only in the title: B's own experience is not listed

    # 3. central stopped: a session on A completes on the local cache, says so once, syncs once later.
    csb, cinfo, _ = fleet["central"]
    svc = csb.service(cinfo)
    svc.stop()
    try:
        finish(fleet, "host-a", tune(fleet, "host-a"))
    finally:
        svc.start()
    said = events(fleet["host-a"][2], "memory.central_unreachable")
    assert len(said) == 1, said
    assert len(central_rows(fleet)) == 3
    first = cli(fleet, "host-a", "memory", "sync")
    assert first.returncode == 0 and "1 experience uploaded" in first.stdout, first.stdout + first.stderr
    again = cli(fleet, "host-a", "memory", "sync")
    assert again.returncode == 0 and "0 experience uploaded" in again.stdout, again.stdout + again.stderr
    rows = central_rows(fleet)
    assert sorted(h for h, _ in rows) == ["host-a", "host-a", "host-b", "host-c"] and len(set(rows)) == 4
    assert central_rounds(fleet) == sum(local_rounds(fleet[h][2]) for h in ("host-a", "host-b", "host-c"))
