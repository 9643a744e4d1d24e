"""Single instance: two agenticdb processes never tune the same target at once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agenticdb.store.lock import LockError, TargetLock


def test_second_holder_is_refused_and_named(tmp_path: Path) -> None:
    dsn = "postgresql://postgres@127.0.0.1:5999/postgres"
    with TargetLock(tmp_path, dsn):
        code = (
            "import sys; from pathlib import Path; from agenticdb.store.lock import TargetLock, LockError\n"
            f"try:\n    TargetLock(Path({str(tmp_path)!r}), {dsn!r}).acquire()\nexcept LockError as e:\n"
            "    print(e); sys.exit(3)\n"
        )
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
        assert r.returncode == 3 and "another agenticdb process" in r.stdout
        with pytest.raises(LockError):
            TargetLock(tmp_path, dsn).acquire()
        TargetLock(tmp_path, dsn + "x").acquire()  # another target is independent
    # Released: the next process gets it.
    lock = TargetLock(tmp_path, dsn)
    lock.acquire()
    lock.release()
