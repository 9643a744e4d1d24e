"""``target.service.cgroup``: a server agenticdb restarts comes back inside the cgroup it was confined in
(real private PostgreSQL and MariaDB, a real memory cgroup; root).

Without it a restarted server is born in the agent's cgroup: a scenario confined to 256 MiB would lose its
limit at the first restart, or (agent inside the server's cgroup) the agent is charged to the server's
memory and OOM-killed (os-read-ahead-tiny, 2026-12-03).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from agenticdb.cli import settings as cli_settings
from agenticdb.config.sections import ServiceConfig
from agenticdb.host.hardware import cgroup_memory_limit
from agenticdb.host.services import build_service
from agenticdb.sandbox.mariadb import MariaDBSandbox
from agenticdb.sandbox.postgres import PostgresSandbox
from benchmarks.harness.cgroup import CgroupError, MemoryCgroup

LIMIT = 768 * 2**20

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="creating a cgroup needs root")


@pytest.fixture()
def cgroup() -> Iterator[MemoryCgroup]:
    try:
        cg = MemoryCgroup(f"agenticdb-test-svc-{os.getpid()}", LIMIT)
    except CgroupError as exc:
        pytest.skip(f"no writable memory cgroup: {exc}")
    try:
        yield cg
    finally:
        cg.remove()


def _shared_tmp(prefix: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o755)
    return path


def _in(cg: MemoryCgroup, pid: int) -> bool:
    return str(pid) in (cg.path / "cgroup.procs").read_text().split()


def test_a_path_that_is_no_cgroup_or_a_kind_that_cannot_use_it_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match=r"target.service.cgroup = .*no cgroup.procs"):
        ServiceConfig(kind="pg_ctl", data_dir="/d", bindir="/b", cgroup=str(tmp_path))
    with pytest.raises(ValidationError, match=r"target.service.cgroup = .*missing': no such directory"):
        ServiceConfig(kind="pg_ctl", data_dir="/d", bindir="/b", cgroup=str(tmp_path / "missing"))
    (tmp_path / "cgroup.procs").write_text("")
    with pytest.raises(ValidationError, match="applies to service kinds 'pg_ctl' and 'mariadbd', not 'systemd'"):
        ServiceConfig(kind="systemd", unit="postgresql", cgroup=str(tmp_path))
    assert ServiceConfig(kind="pg_ctl", data_dir="/d", bindir="/b", cgroup=str(tmp_path)).cgroup == str(tmp_path)


def test_a_restarted_postgresql_comes_back_inside_its_cgroup(cgroup: MemoryCgroup, tmp_path: Path) -> None:
    base = _shared_tmp("agenticdb-svc-cg-pg-")
    sandbox = PostgresSandbox(base)
    try:
        info = sandbox.up()  # started by the sandbox: in our own cgroup, not the limited one
        # --sandbox with a config naming the cgroup keeps it (the sandbox's own target has none)
        cfg_file = tmp_path / "c.toml"
        cfg_file.write_text(f'[target.service]\ncgroup = "{cgroup.path}"\n')
        cfg = cli_settings(cfg_file, None, "postgres", base)
        assert cfg.target.service.kind == "pg_ctl" and cfg.target.service.cgroup == str(cgroup.path)
        target_cfg = cfg.target
        svc = build_service(target_cfg.service, lambda: sandbox.service(info).is_ready())
        pid_file = Path(info.data_dir) / "postmaster.pid"
        before = int(pid_file.read_text().split()[0])
        assert not _in(cgroup, before)
        svc.restart()
        after = int(pid_file.read_text().split()[0])
        assert after != before and _in(cgroup, after)
        # the restart's wall time, for the session's cost priors (race_cost.CostBasis)
        assert len(svc.restart_seconds) == 1 and 0 < svc.restart_seconds[0] < svc.start_timeout_s
        # what agenticdb then reads as the server's memory (hardware.detect_hardware(pid=…))
        assert cgroup_memory_limit(pid=after) == LIMIT
    finally:
        sandbox.down()
        shutil.rmtree(base, ignore_errors=True)


def test_a_restarted_mariadb_comes_back_inside_its_cgroup(cgroup: MemoryCgroup) -> None:
    base = _shared_tmp("agenticdb-svc-cg-my-")
    sandbox = MariaDBSandbox(base)
    try:
        info = sandbox.up()
        service_cfg = info.target_config().service.model_copy(update={"cgroup": str(cgroup.path)})
        plain = sandbox.service(info)
        svc = build_service(service_cfg, plain.is_ready, pid_file=info.pid_file)
        pid_file = Path(info.pid_file)
        before = int(pid_file.read_text().strip())
        assert not _in(cgroup, before)
        svc.restart()
        after = int(pid_file.read_text().strip())
        assert after != before and _in(cgroup, after)
        assert cgroup_memory_limit(pid=after) == LIMIT
    finally:
        sandbox.down()
        shutil.rmtree(base, ignore_errors=True)
