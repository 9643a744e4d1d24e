"""LinuxTarget: catalog, get/set/verify/restore on a fake tree and on the real host (root).

Real-host tests change only vm.dirty_background_ratio (and briefly its bytes counterpart) and the data
device's read_ahead_kb; a fixture reads the originals straight from the files first and writes them back
in ``finally`` independently of the code under test, then asserts they are back.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agenticdb.loop.recovery import restore_os_originals, restore_verified
from agenticdb.models import ApplyMode, Layer, NormalizedChange, Snapshot
from agenticdb.resources import data_file
from agenticdb.store.memory import MemoryBook
from agenticdb.targets.base import ApplyError, TargetError, VerifyError
from agenticdb.targets.linux import LinuxTarget, data_devices, load_linux_catalog

SYSCTLS = {
    "kernel/osrelease": "6.1.0-fake\n",
    "vm/dirty_ratio": "20\n",
    "vm/dirty_bytes": "0\n",
    "vm/dirty_background_ratio": "10\n",
    "vm/dirty_background_bytes": "0\n",
    "vm/swappiness": "60\n",
    "vm/overcommit_ratio": "50\n",
    "vm/overcommit_kbytes": "0\n",
    "vm/page-cluster": "3\n",
    "fs/aio-max-nr": "65536\n",
}


def change(name: str, value: str) -> NormalizedChange:
    return NormalizedChange(name=name, value=value, apply=ApplyMode.dynamic, layer=Layer.os)


def build_tree(root: Path, scheduler: str = "none [mq-deadline]\n") -> Path:
    """A fake / with proc/sys, a vda disk holding partition vda1 (mounted at /srv/data), a loop device,
    THP files and a read-only vm.page-cluster."""
    for rel, text in SYSCTLS.items():
        path = root / "proc/sys" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "proc/sys/vm/page-cluster").chmod(0o444)
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/mountinfo").write_text(
        "1 0 7:0 / / rw,relatime - ext4 /dev/loop0 rw\n"
        "27 1 254:1 / /srv/data rw,relatime - ext4 /dev/vda1 rw\n"
        "28 1 253:0 / /srv/lvm rw,relatime - xfs /dev/mapper/vg-data rw\n"
    )
    vda = root / "sys/devices/pci0000:00/virtio1/block/vda"
    loop0 = root / "sys/devices/virtual/block/loop0"
    queue = vda / "queue"
    queue.mkdir(parents=True)
    for name, text in {
        "read_ahead_kb": "128\n",
        "scheduler": scheduler,
        "nr_requests": "256\n",
        "max_sectors_kb": "1280\n",
        "max_hw_sectors_kb": "2048\n",
    }.items():
        (queue / name).write_text(text)
    (vda / "dev").write_text("254:0\n")
    (vda / "vda1").mkdir()
    (vda / "vda1/dev").write_text("254:1\n")
    (vda / "vda1/partition").write_text("1\n")
    (loop0 / "queue").mkdir(parents=True)
    (loop0 / "queue/read_ahead_kb").write_text("128\n")
    (loop0 / "dev").write_text("7:0\n")
    dm0 = root / "sys/devices/virtual/block/dm-0"
    (dm0 / "slaves").mkdir(parents=True)
    (dm0 / "dev").write_text("253:0\n")
    (dm0 / "slaves/vda1").symlink_to(vda / "vda1")
    (root / "sys/block").mkdir(parents=True)
    (root / "sys/class/block").mkdir(parents=True)
    for name, target in (("vda", vda), ("loop0", loop0), ("vda1", vda / "vda1"), ("dm-0", dm0)):
        (root / "sys/class/block" / name).symlink_to(target)
        if name != "vda1":
            (root / "sys/block" / name).symlink_to(target)
    thp = root / "sys/kernel/mm/transparent_hugepage"
    thp.mkdir(parents=True)
    (thp / "enabled").write_text("always [madvise] never\n")
    (thp / "defrag").write_text("always defer defer+madvise [madvise] never\n")
    return root


def read(root: Path, rel: str) -> str:
    return (root / rel).read_text().strip()


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    return build_tree(tmp_path / "root")


# ------------------------------------------------------------------------------------------- catalog


def test_catalog_file_is_valid_and_cited() -> None:
    data = load_linux_catalog()
    assert len(data.params) >= 30
    for name, pdef in data.params.items():
        assert pdef.source and pdef.reason and pdef.affects, name
        assert pdef.type == "enum" or pdef.min is not None, name
        assert ("{dev}" in name) == ("{dev}" in pdef.path), name
    members = {m for p in data.exclusive_pairs for m in p.members}
    assert {
        "vm.dirty_ratio",
        "vm.dirty_bytes",
        "vm.dirty_background_ratio",
        "vm.dirty_background_bytes",
    } <= members
    assert data.params["kernel.sched_migration_cost_ns"].unsupported_on


def test_catalog_on_fake_tree(tree: Path) -> None:
    target = LinuxTarget(root=tree, data_dir="/srv/data/pgdata")
    assert target.devices == ["vda"]  # partition vda1 → parent disk, not loop0 holding /
    assert target.version() == "6.1.0-fake"
    cat = target.catalog()
    assert cat.target == "linux"
    knob = cat.knobs["vm.dirty_background_ratio"]
    assert knob.layer == Layer.os and knob.apply == ApplyMode.dynamic
    assert knob.path == str(tree / "proc/sys/vm/dirty_background_ratio")
    assert "block.vda.read_ahead_kb" in cat.knobs and "block.loop0.read_ahead_kb" not in cat.knobs
    assert cat.knobs["block.vda.max_sectors_kb"].max_value == 2048
    assert cat.knobs["thp.enabled"].enum_values == ["always", "madvise", "never"]
    assert "vm.page-cluster" in cat.excluded and "read-only" in cat.excluded["vm.page-cluster"]
    assert "does not exist on this kernel" in cat.unsupported["block.vda.rq_affinity"]


def test_unsupported_parameter_is_reported_not_fatal(tree: Path) -> None:
    target = LinuxTarget(root=tree, devices=["vda"])
    cat = target.catalog()
    reason = cat.unsupported["kernel.sched_migration_cost_ns"]
    assert "does not exist on this kernel (/proc/sys/kernel/sched_migration_cost_ns)" in reason
    assert "debugfs" in reason
    assert "kernel.sched_migration_cost_ns" not in cat.knobs
    # the rest of the catalog is intact and readable
    assert target.current_values(["vm.swappiness"]) == {"vm.swappiness": "60"}
    with pytest.raises(ApplyError, match="kernel.sched_migration_cost_ns.*does not exist"):
        target.apply([change("kernel.sched_migration_cost_ns", "500000")], ApplyMode.dynamic)


def test_scheduler_not_offered(tree: Path) -> None:
    target = LinuxTarget(root=tree, devices=["vda"])
    spec = target.catalog().knobs["block.vda.scheduler"]
    assert spec.enum_values == ["none", "mq-deadline"]
    assert "noop" not in spec.enum_values
    assert target.current_values(["block.vda.scheduler"]) == {"block.vda.scheduler": "mq-deadline"}
    with pytest.raises(ApplyError, match=r"block.vda.scheduler='noop'.*choices: none, mq-deadline"):
        target.apply([change("vm.swappiness", "10"), change("block.vda.scheduler", "noop")])
    assert read(tree, "proc/sys/vm/swappiness") == "60"  # rejected before anything was written
    assert target.originals() == {}


def test_devices_fallback_to_physical_disks(tree: Path) -> None:
    assert data_devices(tree, None) == ["vda"]
    assert data_devices(tree, "/") == ["loop0"]  # the mount's device itself, even when virtual
    assert data_devices(tree, "/srv/lvm/pgdata") == ["vda"]  # device-mapper → its slave's disk


# ------------------------------------------------------------------------------ get/set/verify/restore


def test_apply_verify_restore_originals_on_fake_tree(tree: Path) -> None:
    stored: list[tuple[str, str]] = []
    target = LinuxTarget(root=tree, devices=["vda"], state_store=lambda n, v: stored.append((n, v)))
    changes = [change("vm.swappiness", "10"), change("block.vda.read_ahead_kb", "256")]
    assert target.apply(changes, ApplyMode.dynamic) is False
    assert read(tree, "proc/sys/vm/swappiness") == "10"
    assert target.verify(changes) == {"vm.swappiness": "10", "block.vda.read_ahead_kb": "256"}
    assert stored == [("vm.swappiness", "60"), ("block.vda.read_ahead_kb", "128")]
    target.apply([change("vm.swappiness", "20")])
    assert target.originals()["vm.swappiness"] == "60"  # saved once, before the first write only
    assert len(stored) == 2
    (tree / "sys/block/vda/queue/read_ahead_kb").write_text("512\n")  # someone else changed it
    with pytest.raises(VerifyError, match="block.vda.read_ahead_kb: expected 256, kernel reports 512"):
        target.verify(changes)
    with pytest.raises(ApplyError, match="vm.nonexistent"):
        target.snapshot(["vm.nonexistent"])
    # the one restore path (recovery.restore_verified -> Target.restore), as rollback --os uses it
    originals = target.originals()
    one = restore_verified(target, Snapshot(target="linux", values={"vm.swappiness": originals["vm.swappiness"]}))
    assert one.verified and one.changed == {"vm.swappiness": ("20", "60")}
    assert read(tree, "sys/block/vda/queue/read_ahead_kb") == "512"
    assert restore_verified(target, Snapshot(target="linux", values=originals)).verified
    assert read(tree, "proc/sys/vm/swappiness") == "60"
    assert read(tree, "sys/block/vda/queue/read_ahead_kb") == "128"


def test_originals_saved_by_a_crashed_session_restore_after_it(tree: Path, tmp_path: Path) -> None:
    memory = MemoryBook(tmp_path / "memory.db")
    memory.save_os_original("crashed", "vm.swappiness", "60")  # saved before the crashed session's write
    (tree / "proc/sys/vm/swappiness").write_text("1\n")  # left behind by the crashed session
    target = LinuxTarget(root=tree, devices=["vda"])  # a new process: nothing saved in this target
    result = restore_os_originals(target, memory, memory.os_originals(), "after the crash")
    assert result.verified, result.problem()
    assert read(tree, "proc/sys/vm/swappiness") == "60"
    assert memory.os_originals() == []  # marked restored


def test_ratio_bytes_pair_is_one_knob(tree: Path) -> None:
    stored: dict[str, str] = {}
    target = LinuxTarget(root=tree, devices=["vda"], state_store=stored.__setitem__)
    snap = target.snapshot(["vm.dirty_ratio"])
    assert snap.values == {"vm.dirty_ratio": "20", "vm.dirty_bytes": "0"}
    with pytest.raises(ApplyError, match="mutually exclusive"):
        target.apply([change("vm.dirty_ratio", "15"), change("vm.dirty_bytes", "67108864")])
    with pytest.raises(ApplyError, match="vm.dirty_bytes=0: cannot be written"):
        target.apply([change("vm.dirty_bytes", "0")])
    assert read(tree, "proc/sys/vm/dirty_ratio") == "20"
    target.apply([change("vm.dirty_bytes", "67108864")])
    assert stored == {"vm.dirty_bytes": "0", "vm.dirty_ratio": "20"}  # both members saved
    # the kernel would now report dirty_ratio 0; emulate it, then make dirty_bytes unwritable: the
    # restore must never write the zero member (EINVAL on a real kernel), only the non-zero one.
    (tree / "proc/sys/vm/dirty_ratio").write_text("0\n")
    bytes_file = tree / "proc/sys/vm/dirty_bytes"
    subprocess.run(["chattr", "+i", str(bytes_file)], check=True)
    try:
        target.restore(snap)
    finally:
        subprocess.run(["chattr", "-i", str(bytes_file)], check=True)
    assert read(tree, "proc/sys/vm/dirty_ratio") == "20"
    assert read(tree, "proc/sys/vm/dirty_bytes") == "67108864"  # untouched: the kernel zeroes it


def test_write_failure_rolls_back_batch(tree: Path) -> None:
    """chattr +i makes a write fail with EPERM even for root; earlier writes of the batch are undone."""
    stored: dict[str, str] = {}
    target = LinuxTarget(root=tree, devices=["vda"], state_store=stored.__setitem__)
    locked = tree / "proc/sys/fs/aio-max-nr"
    subprocess.run(["chattr", "+i", str(locked)], check=True)
    try:
        with pytest.raises(ApplyError) as info:
            target.apply(
                [
                    change("vm.swappiness", "10"),
                    change("block.vda.read_ahead_kb", "64"),
                    change("fs.aio-max-nr", "1048576"),
                ]
            )
    finally:
        subprocess.run(["chattr", "-i", str(locked)], check=True)
    msg = str(info.value)
    assert "fs.aio-max-nr=1048576" in msg and str(locked) in msg and "permission denied: run as root" in msg
    assert "rolled back block.vda.read_ahead_kb, vm.swappiness" in msg
    assert read(tree, "proc/sys/vm/swappiness") == "60"
    assert read(tree, "sys/block/vda/queue/read_ahead_kb") == "128"
    assert stored["vm.swappiness"] == "60"


def _as_nobody(action: Callable[[], object], target: LinuxTarget) -> dict[str, object]:
    """Run ``action`` in a forked child that dropped root for nobody:nogroup; return what it raised."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        status = 1
        try:
            os.close(read_fd)
            os.setgroups([])
            os.setgid(grp.getgrnam("nogroup").gr_gid)
            os.setuid(pwd.getpwnam("nobody").pw_uid)
            try:
                action()
                out = {"error": None}
            except ApplyError as exc:
                out = {"error": str(exc), "originals": target.originals(), "euid": os.geteuid()}
            os.write(write_fd, json.dumps(out).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)
    with os.fdopen(read_fd) as fh:
        text = fh.read()
    _, status = os.waitpid(pid, 0)
    assert status == 0, text
    return json.loads(text)


def test_permission_denied_without_root() -> None:
    """A process without root (setuid nobody) gets EACCES; the batch is rolled back."""
    base = Path(tempfile.mkdtemp(prefix="agenticdb-linux-"))
    try:
        base.chmod(0o755)
        root = build_tree(base / "root")
        for d in [root, *root.rglob("*")]:
            if d.is_dir() and not d.is_symlink():
                d.chmod(0o755)
        (root / "proc/sys/vm/swappiness").chmod(0o666)  # writable by anyone: gets written first
        (root / "proc/sys/vm/dirty_background_ratio").chmod(0o644)  # root only
        target = LinuxTarget(root=root, devices=["vda"])
        target.catalog()
        result = _as_nobody(
            lambda: target.apply([change("vm.swappiness", "10"), change("vm.dirty_background_ratio", "5")]),
            target,
        )
        assert result["error"] is not None and result["euid"] != 0
        assert "vm.dirty_background_ratio=5" in result["error"]
        assert "permission denied: run as root" in result["error"]
        assert "rolled back vm.swappiness" in result["error"]
        assert read(root, "proc/sys/vm/swappiness") == "60"
        assert read(root, "proc/sys/vm/dirty_background_ratio") == "10"
        assert result["originals"]["vm.swappiness"] == "60"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_state_store_failure_rolls_back(tree: Path) -> None:
    def store(name: str, value: str) -> None:
        if name == "fs.aio-max-nr":
            raise RuntimeError("memory book is locked")

    target = LinuxTarget(root=tree, devices=["vda"], state_store=store)
    with pytest.raises(ApplyError, match="fs.aio-max-nr=1.*memory book is locked.*rolled back vm.swappiness"):
        target.apply([change("vm.swappiness", "10"), change("fs.aio-max-nr", "1")])
    assert read(tree, "proc/sys/vm/swappiness") == "60"
    assert read(tree, "proc/sys/fs/aio-max-nr") == "65536"


def test_restore_reports_every_failure(tree: Path) -> None:
    target = LinuxTarget(root=tree, devices=["vda"])
    snap = target.snapshot(["vm.swappiness", "fs.aio-max-nr"])
    (tree / "proc/sys/vm/swappiness").write_text("5\n")
    (tree / "proc/sys/fs/aio-max-nr").write_text("1\n")
    locked = tree / "proc/sys/vm/swappiness"
    subprocess.run(["chattr", "+i", str(locked)], check=True)
    try:
        with pytest.raises(TargetError, match="vm.swappiness=60"):
            target.restore(snap)
    finally:
        subprocess.run(["chattr", "-i", str(locked)], check=True)
    assert read(tree, "proc/sys/fs/aio-max-nr") == "65536"  # the other value was still restored


# ------------------------------------------------------------------------------------------ real host

REAL = [Path("/proc/sys/vm/dirty_background_ratio"), Path("/proc/sys/vm/dirty_background_bytes")]


@pytest.fixture()
def real_host() -> Iterator[tuple[LinuxTarget, str]]:
    if os.geteuid() != 0:
        pytest.skip("needs root to write /proc/sys and /sys/block")
    target = LinuxTarget(data_dir=str(data_file("catalogs", "linux.toml").parent))
    dev = target.devices[0]
    files = [*REAL, Path(f"/sys/block/{dev}/queue/read_ahead_kb")]
    saved = {p: p.read_text().strip() for p in files}
    try:
        yield target, dev
    finally:
        # Independent of the code under test: put the non-zero pair member back last.
        for path in sorted(saved, key=lambda p: (saved[p] != "0", str(p))):
            if saved[path] != "0" and path.read_text().strip() != saved[path]:
                path.write_text(saved[path])
        assert {p: p.read_text().strip() for p in files} == saved


@pytest.mark.root
def test_real_host_apply_verify_restore(real_host: tuple[LinuxTarget, str]) -> None:
    target, dev = real_host
    ra = f"block.{dev}.read_ahead_kb"
    before = target.current_values(["vm.dirty_background_ratio", ra])
    new_ratio = "5" if before["vm.dirty_background_ratio"] != "5" else "6"
    new_ra = "256" if before[ra] != "256" else "512"
    changes = [change("vm.dirty_background_ratio", new_ratio), change(ra, new_ra)]
    target.apply(changes, ApplyMode.dynamic)
    assert Path("/proc/sys/vm/dirty_background_ratio").read_text().strip() == new_ratio
    assert target.verify(changes) == {"vm.dirty_background_ratio": new_ratio, ra: new_ra}
    assert target.originals()["vm.dirty_background_ratio"] == before["vm.dirty_background_ratio"]
    assert restore_verified(target, Snapshot(target="linux", values=target.originals())).verified
    assert target.current_values(["vm.dirty_background_ratio", ra]) == before


@pytest.mark.root
def test_real_host_einval_rolls_back(real_host: tuple[LinuxTarget, str]) -> None:
    target, dev = real_host
    before = target.current_values(["vm.dirty_background_ratio"])["vm.dirty_background_ratio"]
    ra = f"block.{dev}.read_ahead_kb"
    ra_before = target.current_values([ra])[ra]
    ra_new = "256" if ra_before != "256" else "512"
    with pytest.raises(ApplyError, match=r"vm.dirty_background_ratio=101 .*invalid argument") as info:
        # the first write succeeds, the second is EINVAL from the kernel (dirty_background_ratio <= 100)
        target.apply([change(ra, ra_new), change("vm.dirty_background_ratio", "101")])
    assert f"rolled back {ra}" in str(info.value)
    assert target.current_values(["vm.dirty_background_ratio", ra]) == {
        "vm.dirty_background_ratio": before,
        ra: ra_before,
    }


@pytest.mark.root
def test_real_host_ratio_bytes_pair(real_host: tuple[LinuxTarget, str]) -> None:
    target, _ = real_host
    snap = target.snapshot(["vm.dirty_background_ratio"])
    if snap.values["vm.dirty_background_bytes"] != "0":
        pytest.skip("host uses dirty_background_bytes; the ratio side is tested here")
    target.apply([change("vm.dirty_background_bytes", str(64 * 1024 * 1024))])
    # the kernel zeroes the other member of the pair
    assert target.current_values(["vm.dirty_background_ratio"]) == {"vm.dirty_background_ratio": "0"}
    target.restore(snap)
    assert target.current_values(["vm.dirty_background_ratio", "vm.dirty_background_bytes"]) == snap.values


def test_real_host_catalog_reflects_this_kernel() -> None:
    target = LinuxTarget(data_dir=str(data_file("catalogs", "linux.toml").parent))
    cat = target.catalog()
    assert cat.version == Path("/proc/sys/kernel/osrelease").read_text().strip()
    for name, spec in cat.knobs.items():
        scheduler = target._pdef(name).scheduler
        if scheduler is not None and not Path(spec.path or "").exists():
            # an inactive I/O scheduler's tunable: offered, not active, read as the kernel default
            dev = name.split(".")[1]
            active = Path(f"/sys/block/{dev}/queue/scheduler").read_text()
            assert scheduler in active and f"[{scheduler}]" not in active, name
            continue
        assert Path(spec.path or "").is_file(), name
    for name, reason in cat.unsupported.items():
        assert "does not exist on this kernel" in reason, name
    major, minor = (int(x) for x in cat.version.split(".")[:2])
    if (major, minor) >= (5, 13):
        assert "kernel.sched_migration_cost_ns" in cat.unsupported
    dev = target.devices[0]
    sched = cat.knobs.get(f"block.{dev}.scheduler")
    if sched is not None:
        listed = Path(f"/sys/block/{dev}/queue/scheduler").read_text().replace("[", "").replace("]", "").split()
        assert sched.enum_values == listed
        assert target.current_values([sched.name])[sched.name] in listed


def _idle_loop_device() -> str | None:
    """An unattached loop device (size 0) with a blk-mq hardware queue: nothing reads or writes it."""
    for dev in sorted(Path("/sys/block").glob("loop*")):
        try:
            if dev.joinpath("size").read_text().strip() == "0" and any(dev.glob("mq/*/nr_tags")):
                return dev.name
        except OSError:
            continue
    return None


@pytest.fixture()
def idle_loop() -> Iterator[str]:
    if os.geteuid() != 0:
        pytest.skip("needs root to write /sys/block")
    dev = _idle_loop_device()
    if dev is None:
        pytest.skip("no unattached loop device with a hardware queue")
    queue = Path("/sys/block", dev, "queue")
    sched = queue.joinpath("scheduler").read_text()
    saved = {"scheduler": sched[sched.index("[") + 1 : sched.index("]")], "nr_requests": read(queue, "nr_requests")}
    try:
        yield dev
    finally:
        # Independent of the code under test: the scheduler first (switching it resets nr_requests).
        queue.joinpath("scheduler").write_text(saved["scheduler"])
        if read(queue, "nr_requests") != saved["nr_requests"]:
            queue.joinpath("nr_requests").write_text(saved["nr_requests"])
        sched = queue.joinpath("scheduler").read_text()
        assert sched[sched.index("[") + 1 : sched.index("]")] == saved["scheduler"]
        assert read(queue, "nr_requests") == saved["nr_requests"]


@pytest.mark.root
def test_real_kernel_nr_requests_check_agrees_with_the_kernel(idle_loop: str) -> None:
    """The validator's server_check linux.nr_requests_le_hw_depth predicts the kernel's EINVAL: without a
    scheduler nr_requests cannot exceed the hardware queue depth; with one it can (up to 2048). Writing
    the scheduler and nr_requests in one batch works because the scheduler is written first."""
    from agenticdb.config.sections import PolicyConfig
    from agenticdb.host.hardware import detect_hardware
    from agenticdb.models import Bottleneck, Change, Proposal
    from agenticdb.validation.validator import validate

    dev = idle_loop
    target = LinuxTarget(devices=[dev])
    depth = int(target.catalog().facts[f"block.{dev}.hw_queue_depth"])
    sched, nr = f"block.{dev}.scheduler", f"block.{dev}.nr_requests"
    if "mq-deadline" not in (target.catalog().knobs[sched].enum_values or []):
        pytest.skip("mq-deadline is not offered here")
    target.apply([change(sched, "none")])
    snap = target.snapshot([sched, nr])
    hw = detect_hardware(None)

    def verdict(values: dict[str, str]):  # type: ignore[no-untyped-def]
        proposal = Proposal(
            bottleneck=Bottleneck.io_queue, layer=Layer.os, changes=[Change(name=k, value=v) for k, v in values.items()]
        )
        policy = PolicyConfig(max_step_factor=100)
        return validate(proposal, target.catalog(), target.current_values(), hw, policy, Layer.os)

    too_deep = str(min(depth * 2, 2048))
    v = verdict({nr: too_deep})
    assert [f.check for f in v.failed] == ["server_check"] and "hw_queue_depth" in v.failed[0].message
    with pytest.raises(ApplyError, match="invalid argument"):
        target.apply([change(nr, too_deep)])
    assert target.current_values([nr])[nr] == snap.values[nr]
    assert verdict({nr: str(depth // 2)}).ok
    # with a scheduler in the same set the deeper queue is accepted and written after the scheduler
    v = verdict({nr: too_deep, sched: "mq-deadline"})
    assert v.ok, v.feedback()
    target.apply(v.changes)
    assert target.verify(v.changes) == {sched: "mq-deadline", nr: too_deep}
    target.restore(snap)
    assert target.current_values([sched, nr]) == snap.values


@pytest.mark.root
def test_real_kernel_scheduler_tunable_needs_its_scheduler(idle_loop: str) -> None:
    """An inactive scheduler's tunable has no effect (the validator says so); set together with the switch
    it is written after the scheduler and verified; restoring the snapshot switches back, after which the
    tunable reads as the kernel default again."""
    from agenticdb.config.sections import PolicyConfig
    from agenticdb.host.hardware import detect_hardware
    from agenticdb.models import Bottleneck, Change, Proposal
    from agenticdb.validation.validator import validate

    dev = idle_loop
    target = LinuxTarget(devices=[dev])
    sched, lat = f"block.{dev}.scheduler", f"block.{dev}.iosched.read_lat_nsec"
    if lat not in target.catalog().knobs:
        pytest.skip("kyber is not offered here")
    target.apply([change(sched, "none")])
    snap = target.snapshot([sched, lat])
    assert snap.values[lat] == "2000000"  # kyber's default (Documentation/block/kyber-iosched.rst)

    def verdict(values: dict[str, str]):  # type: ignore[no-untyped-def]
        proposal = Proposal(
            bottleneck=Bottleneck.io_queue, layer=Layer.os, changes=[Change(name=k, value=v) for k, v in values.items()]
        )
        return validate(
            proposal, target.catalog(), target.current_values(), detect_hardware(None), PolicyConfig(), Layer.os
        )

    v = verdict({lat: "1000000"})
    assert [f.check for f in v.failed] == ["no_effect"] and "scheduler == 'kyber'" in v.failed[0].message
    v = verdict({lat: "1000000", sched: "kyber"})
    assert v.ok, v.feedback()
    target.apply(v.changes)
    assert target.verify(v.changes) == {lat: "1000000", sched: "kyber"}
    assert Path(f"/sys/block/{dev}/queue/iosched/read_lat_nsec").read_text().strip() == "1000000"
    target.restore(snap)
    assert target.current_values([sched, lat]) == snap.values
    assert not Path(f"/sys/block/{dev}/queue/iosched/read_lat_nsec").exists()
