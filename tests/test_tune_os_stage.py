"""OS stage end to end on the real host (issue 8, session level; we are root).

1. A full ``tune --stage both`` session on a private PostgreSQL whose DBMS stage is forced to plateau
   after one round without a kept gain (``AGENTICDB_LOOP__PLATEAU_ROUNDS=1``) switches to the OS stage,
   applies at least one OS change, and ends with every OS value it touched either kept (and named in the
   best configuration) or back at the value read from /proc/sys and /sys/block before the test.
2. ``agenticdb rollback --os`` after interrupted sessions puts back the host's own values saved in the
   Memory Book (the oldest original wins when two sessions saved one name).

Every test reads the touched files itself before starting and, in ``finally``, writes them back
without the code under test — then asserts they were already equal.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agenticdb.models import ApplyMode, NormalizedChange
from agenticdb.sandbox.postgres import PostgresSandbox
from agenticdb.store.journal import Journal
from agenticdb.store.memory import MemoryBook
from agenticdb.targets.linux import LinuxTarget

CLI = [sys.executable, "-m", "agenticdb.cli"]

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="writes /proc/sys and /sys/block: needs root")


def cli(
    home: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "AGENTICDB_HOME": str(home), "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=timeout, env=full, stdin=subprocess.DEVNULL
    )


def read_raw(path: Path) -> str:
    """What the kernel file says, with the selected choice of a bracketed list ("[mq-deadline]")."""
    text = path.read_text().strip()
    m = re.search(r"\[([^\]]+)\]", text)
    return m.group(1) if m else " ".join(text.split())


def host_values(linux: LinuxTarget) -> dict[str, tuple[Path, str]]:
    """Every tunable OS parameter of this host: name → (file, value), read straight from the files."""
    out = {}
    for name, spec in linux.catalog().knobs.items():
        assert spec.path, name
        if not Path(spec.path).exists():
            continue  # a tunable of an I/O scheduler that is not active: no file until it is switched to
        out[name] = (Path(spec.path), read_raw(Path(spec.path)))
    return out


def put_back(saved: dict[str, tuple[Path, str]]) -> list[str]:
    """Write back what differs (independent of agenticdb); zero members of ratio/bytes pairs are never
    written (the kernel zeroes them when the partner is set), non-zero values go last. Returns the
    names that had to be written."""
    wrong = [n for n, (p, v) in saved.items() if read_raw(p) != v]
    # schedulers first: switching one resets nr_requests and the iosched files
    for name in sorted(wrong, key=lambda n: (not n.endswith(".scheduler"), saved[n][1] != "0")):
        path, value = saved[name]
        if value == "0" and name.endswith("_bytes"):
            continue
        path.write_text(value)
    return wrong


@pytest.fixture(scope="module")
def pg_home() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="agenticdb-os-stage-"))
    base.chmod(0o755)  # postgres must traverse it
    r = cli(base, "sandbox", "up", "postgres")
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        yield base
    finally:
        cli(base, "sandbox", "down", "postgres")


@pytest.mark.slow
@pytest.mark.root
def test_session_switches_to_os_stage_and_restores_what_was_not_kept(pg_home: Path) -> None:
    info = PostgresSandbox(pg_home).info()
    assert info is not None
    linux = LinuxTarget(data_dir=info.data_dir)
    before = host_values(linux)
    try:
        r = cli(
            pg_home,
            "tune",
            "--sandbox",
            "postgres",
            "--workload",
            "pgbench",
            "--stage",
            "both",
            "--rounds",
            "4",
            "--duration",
            "3",
            "--warmup",
            "1",
            "--scale",
            "1",
            "--clients",
            "2",
            "--baseline-runs",
            "2",
            "--max-pairs",
            "1",
            env={"AGENTICDB_LOOP__PLATEAU_ROUNDS": "1", "AGENTICDB_LOOP__SEARCH": "false"},  # plateau → OS stage
        )
        print(r.stdout)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]

        journal = Journal(pg_home / "journal.db")
        sid = journal.sessions()[-1].id  # the newest: the session this test just ran
        events = journal.events(sid)
        kinds = [e.event for e in events]
        assert "stage.os" in kinds, kinds
        switch = kinds.index("stage.os")
        os_rounds = {e.round_no for e in events if e.event == "decision" and e.data["stage"] == "os"}
        assert os_rounds, "no OS round ran"
        dbms_decisions = [e for e in events[:switch] if e.event == "decision"]
        assert dbms_decisions[-1].data["decision"] == "switch_to_os", dbms_decisions[-1].data
        os_applied = [e for e in events if e.event == "applied" and e.round_no in os_rounds]
        assert os_applied, f"no OS change applied in rounds {os_rounds}"
        # Every applied OS change names a host parameter and has its original saved before the write.
        touched = {n for e in os_applied for n in e.data["changes"]}
        saved = {e.data["name"]: e.data["value"] for e in events if e.event == "os.original"}
        assert touched <= set(saved), (touched, saved)
        for name, value in saved.items():
            assert before[name][1] == value, f"{name}: original saved {value}, file said {before[name][1]}"

        end = [e for e in events if e.event == "session.end"][-1].data
        assert end["status"] == "completed"
        kept = {k: v for k, v in end["best_changes"].items() if k in before}
        now = host_values(linux)
        for name in saved:
            expected = str(kept[name]) if name in kept else before[name][1]
            assert now[name][1] == expected, f"{name}: {now[name][1]} after the session, expected {expected}"
        untouched = set(before) - set(saved)
        assert {n: now[n][1] for n in untouched} == {n: before[n][1] for n in untouched}
        assert not journal.open_intents()

        # What was kept stays until the user rolls it back: rollback --os puts every original back.
        rb = cli(pg_home, "rollback", "--os")
        assert rb.returncode == 0, rb.stdout + rb.stderr
        assert {n: v for n, (_, v) in host_values(linux).items()} == {n: v for n, (_, v) in before.items()}
        for name in kept:
            assert name in rb.stdout
    finally:
        wrong = put_back(before)
    assert not wrong, f"the session/rollback left {wrong} changed; the test put them back"


@pytest.mark.root
def test_rollback_os_restores_originals_of_interrupted_sessions(tmp_path: Path) -> None:
    linux = LinuxTarget(data_dir=str(tmp_path))
    dev = linux.devices[0]
    ra, ratio = f"block.{dev}.read_ahead_kb", "vm.dirty_background_ratio"
    before = {n: v for n, v in host_values(linux).items() if n in (ra, ratio, "vm.dirty_background_bytes")}
    memory = MemoryBook(tmp_path / "memory.db")
    try:
        orig_ratio, orig_ra = before[ratio][1], before[ra][1]
        first = "5" if orig_ratio != "5" else "6"
        second = "7" if orig_ratio != "7" else "8"
        new_ra = "256" if orig_ra != "256" else "512"

        # Session A changes two values and is "killed" (its target object is simply dropped) ...
        a = LinuxTarget(data_dir=str(tmp_path), state_store=lambda n, v: memory.save_os_original("A", n, v))
        a.apply(
            [
                NormalizedChange(name=ratio, value=first, apply=ApplyMode.dynamic),
                NormalizedChange(name=ra, value=new_ra, apply=ApplyMode.dynamic),
            ],
            ApplyMode.dynamic,
        )
        # ... then session B saves A's trial value as its "original" and is killed too.
        b = LinuxTarget(data_dir=str(tmp_path), state_store=lambda n, v: memory.save_os_original("B", n, v))
        b.apply([NormalizedChange(name=ratio, value=second, apply=ApplyMode.dynamic)], ApplyMode.dynamic)
        assert read_raw(before[ratio][0]) == second and read_raw(before[ra][0]) == new_ra
        assert {(o.session_id, o.name): o.original for o in memory.os_originals()}[("B", ratio)] == first

        r = cli(tmp_path, "rollback", "--os")
        assert r.returncode == 0, r.stdout + r.stderr
        assert read_raw(before[ratio][0]) == orig_ratio, "the host's own value (session A's original) wins"
        assert read_raw(before[ra][0]) == orig_ra
        assert f"{ratio}: {second} → {orig_ratio}" in r.stdout and f"{ra}: {new_ra} → {orig_ra}" in r.stdout
        assert "verified" in r.stdout
        assert memory.os_originals() == []  # all marked restored
        again = cli(tmp_path, "rollback", "--os")
        assert again.returncode == 0 and "nothing to restore" in again.stdout
        logged = [e for e in Journal(tmp_path / "journal.db").events() if e.event == "rollback"]
        assert logged and logged[0].data["verified"] is True and logged[0].data["values"][ratio] == orig_ratio
    finally:
        wrong = put_back(before)
    assert not wrong, f"rollback --os left {wrong} changed; the test put them back"


@pytest.mark.root
def test_os_catalog_and_validate_cli(tmp_path: Path) -> None:
    linux = LinuxTarget()
    dev = linux.devices[0]
    cat = cli(tmp_path, "catalog", "--os", "--like", "vm.dirty_background", "--format", "json")
    assert cat.returncode == 0, cat.stdout + cat.stderr
    line = next(
        " ".join(x.values()) for x in json.loads(cat.stdout)["rows"] if x["name"] == "vm.dirty_background_ratio"
    )
    assert read_raw(Path("/proc/sys/vm/dirty_background_ratio")) in line and "percent" in line

    f = tmp_path / "os.toml"  # bare dotted keys, as a sysadmin writes sysctl names
    f.write_text(f'vm.dirty_background_ratio = 5\nvm.no_such_sysctl = 1\nblock.{dev}.scheduler = "no-such"\n')
    r = cli(tmp_path, "validate", "--stage", "os", str(f), "--format", "json")
    assert r.returncode == 1, r.stdout + r.stderr
    rows = {c["parameter"]: " ".join(c.values()) for c in json.loads(r.stdout)["changes"]}
    assert "ok" in rows["vm.dirty_background_ratio"]
    assert "rejected" in rows["vm.no_such_sysctl"] and "unknown" in rows["vm.no_such_sysctl"]
    assert "rejected" in rows[f"block.{dev}.scheduler"] and "enum" in rows[f"block.{dev}.scheduler"]
    ok = tmp_path / "ok.toml"
    ok.write_text('"vm.dirty_background_ratio" = 5\n')
    assert cli(tmp_path, "validate", "--stage", "os", str(ok)).returncode == 0
