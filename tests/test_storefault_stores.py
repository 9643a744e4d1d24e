"""The journal and Memory Book on a real tmpfs that fills up or turns read-only (issue 17, item 8):
every write fails as one StorageError naming the file and the cause — never SQLite's "cannot rollback -
no transaction is active", never a bare sqlite3 error — and what was written before stays readable."""

from __future__ import annotations

import errno
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agenticdb.store.faults import StorageError, cause_of
from agenticdb.store.journal import Journal
from agenticdb.store.memory import MemoryBook

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


@pytest.fixture()
def fs() -> Iterator[Path]:
    mnt = Path(tempfile.mkdtemp(prefix="agenticdb-tmpfs-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
        mnt.rmdir()


def fill(fs: Path) -> None:
    with open(fs / "filler", "ab", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC


def test_full_disk_journal_append_names_the_file_and_keeps_the_rows(fs: Path) -> None:
    with Journal(fs / "journal.db") as j:
        j.append("s1", "session.start", {"n": 1})
        fill(fs)
        with pytest.raises(StorageError) as err:
            for i in range(50):  # a page or two may still fit in space SQLite already holds
                j.append("s1", "measured", {"payload": "x" * 3000, "i": i})
        assert str(err.value).startswith(f"cannot write the journal {fs / 'journal.db'}: no space left on the device")
        assert "rollback" not in str(err.value)
        assert j.events("s1")[0].event == "session.start"
        assert j.verify().ok


def test_full_disk_memory_write_names_the_memory_file(fs: Path) -> None:
    with MemoryBook(fs / "memory.db") as m:
        fill(fs)
        with pytest.raises(StorageError) as err:
            for i in range(50):
                m.save_os_original(f"s{i}", "vm.swappiness", "60" * 1000)
        assert err.value.what == "memory" and err.value.path == fs / "memory.db"
        assert "no space left" in str(err.value)


def test_read_only_file_system(fs: Path) -> None:
    with Journal(fs / "journal.db") as j:
        j.append("s1", "session.start", {})
    subprocess.run(["mount", "-o", "remount,ro", str(fs)], check=True)
    with pytest.raises(StorageError) as err:
        with Journal(fs / "journal.db") as j:
            j.append("s1", "session.end", {})
    assert f"the journal {fs / 'journal.db'}: read-only file system" in str(err.value)
    with pytest.raises(StorageError, match="memory .*read-only file system"):
        MemoryBook(fs / "memory.db")


def test_cause_of_errno() -> None:
    assert cause_of(OSError(errno.ENOSPC, "x")) == "no space left on the device (disk full)"
    assert cause_of(OSError(errno.EACCES, "x")) == "permission denied"


def test_cli_on_a_read_only_home_is_one_line_exit_1(fs: Path) -> None:
    """``tune`` with its home on a read-only mount: one line naming the folder and the cause, exit 1 (the
    target is never contacted: the stores are opened first)."""
    import sys

    subprocess.run(["mount", "-o", "remount,ro", str(fs)], check=True)
    env = {**os.environ, "AGENTICDB_HOME": str(fs / "home")}
    r = subprocess.run(
        [sys.executable, "-m", "agenticdb.cli", "tune", "--target", "postgresql://x@127.0.0.1:1/x"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    out = r.stdout + r.stderr
    assert r.returncode == 1 and "Traceback" not in out, out
    assert out.strip() == f"error: cannot create the home folder {fs / 'home'}: read-only file system"
