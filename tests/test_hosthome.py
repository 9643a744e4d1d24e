"""The suite never resolves agenticdb's real data home (tests/hosthome.py), and the home's resolution itself.

A root run of the whole suite once left /var/lib/agenticdb behind (journal.db, journal.key and memory.db, no
rows): a process that was given no home took the host's real one."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hosthome import HostPaths

from agenticdb.config import Settings, load_config
from agenticdb.config.sections import default_data_home


def _in_temp(path: Path) -> bool:
    return Path(tempfile.gettempdir()).resolve() in path.resolve().parents


def test_the_suites_default_home_is_a_temp_dir() -> None:
    home = default_data_home()
    assert home != Path("/var/lib/agenticdb") and _in_temp(home), home
    assert Settings().storage.home == home and load_config(None).storage.journal_db == home / "journal.db"


def test_a_process_a_test_starts_inherits_the_temp_home() -> None:
    code = "from agenticdb.config.sections import default_data_home; print(default_data_home())"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert Path(r.stdout.strip()) == default_data_home(), r.stdout + r.stderr


def test_home_resolution(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """$AGENTICDB_HOME, else /var/lib/agenticdb as root, else $XDG_DATA_HOME/agenticdb (computed only:
    nothing is created)."""
    monkeypatch.setenv("AGENTICDB_HOME", str(tmp_path / "h"))
    assert default_data_home() == tmp_path / "h"
    monkeypatch.delenv("AGENTICDB_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    expected = Path("/var/lib/agenticdb") if os.geteuid() == 0 else tmp_path / "xdg" / "agenticdb"
    assert default_data_home() == expected
    assert load_config(None, {"storage": {"home": tmp_path}}).storage.home == tmp_path  # storage.home wins


def test_a_new_host_path_is_reported_once(tmp_path: Path) -> None:
    """The check behind the suite's guard, on paths under tmp_path: one that existed at the start is not
    reported, a new one is, once."""
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    watch = HostPaths([old, new], unit_glob=str(tmp_path / "unit*"))
    assert watch.new() == []
    new.mkdir()
    (old / "journal.db").touch()  # inside a place that was there before: not the check's business
    (tmp_path / "unit.service").touch()
    assert watch.new() == [new, tmp_path / "unit.service"]
    assert watch.new() == []


def test_only_this_process_writes_blame_a_test(tmp_path: Path) -> None:
    """A test is blamed for a host place only when this process wrote under it during the test (the audit hook):
    a place another process made (a parallel run, scripts/demo.sh as root: /var/lib/agenticdb) is not this
    test's doing and is left to the run's end; a write inside a place that existed before the run is."""
    import sqlite3

    old, made, other = tmp_path / "old", tmp_path / "made", tmp_path / "other"
    old.mkdir()
    watch = HostPaths([old, made, other], unit_glob=str(tmp_path / "unit*"))
    sys.addaudithook(watch.audit)  # stays for this process's life: it only ever matches these tmp paths
    subprocess.run(["mkdir", str(other)], check=True)  # another process
    (old / "notes.txt").read_text() if (old / "notes.txt").exists() else None  # a read is no write
    assert watch.written() == []
    (made / "sub").mkdir(parents=True)
    assert watch.written() == [made]
    sqlite3.connect(old / "journal.db").close()  # inside a place that was there before: a write all the same
    (tmp_path / "unit.service").write_text("[Unit]\n")
    assert watch.written() == [old, tmp_path / "unit.service"]
    assert watch.new() == [other]  # what the run's end reports, blaming no test
    assert watch.written() == [] and watch.new() == []
