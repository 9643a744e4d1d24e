"""The memory budget uses the database server's cgroup limit, not agenticdb's own (real cgroup, root)."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from agenticdb.host.hardware import cgroup_memory_limit, detect_hardware

V1 = Path("/sys/fs/cgroup/memory")
V2 = Path("/sys/fs/cgroup")


def _make_cgroup(limit: int) -> tuple[Path, str]:
    name = f"agenticdb-test-{uuid.uuid4().hex[:8]}"
    if (V1 / "memory.limit_in_bytes").exists():
        path = V1 / name
        path.mkdir()
        (path / "memory.limit_in_bytes").write_text(str(limit))
        return path, "cgroup.procs"
    if (V2 / "cgroup.controllers").exists() and "memory" in (V2 / "cgroup.controllers").read_text():
        path = V2 / name
        path.mkdir()
        (path / "memory.max").write_text(str(limit))
        return path, "cgroup.procs"
    pytest.skip("no writable memory cgroup controller on this host")


@pytest.mark.skipif(os.geteuid() != 0, reason="creating a cgroup needs root")
def test_limit_of_the_server_process_cgroup(tmp_path: Path) -> None:
    limit = 512 * 2**20
    path, procs = _make_cgroup(limit)
    # A stand-in "server": a real process placed in the limited cgroup before it starts working.
    server = subprocess.Popen(["sh", "-c", f"echo $$ > {path / procs}; exec sleep 30"])
    try:
        for _ in range(50):
            if str(server.pid) in (path / procs).read_text().split():
                break
            subprocess.run(["sleep", "0.1"], check=True)
        assert cgroup_memory_limit(pid=server.pid) == limit
        own = cgroup_memory_limit()
        assert own is None or own != limit  # agenticdb itself is not in that cgroup
        hw = detect_hardware(str(tmp_path), pid=server.pid)
        assert hw.memory_limit_bytes == limit and hw.cgroup_memory_limit_bytes == limit
        # An unreadable pid falls back to our own cgroup instead of failing.
        assert cgroup_memory_limit(pid=2**22 + 12345) == own
    finally:
        server.kill()
        server.wait()
        path.rmdir()
