"""The storage class measured from the device (issue 36, agenticdb.host.storage_probe): the thresholds on given
latencies (pure), the probe on real files of this host's disk and of tmpfs, and the host-sized candidate of a
real private PostgreSQL naming the measured class in its effective_io_concurrency source."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from openingctx import context_of

from agenticdb.config.sections import PolicyConfig
from agenticdb.host.hardware import detect_hardware, storage_after_load
from agenticdb.host.storage_probe import (
    MIN_FILE_BYTES,
    classify,
    is_relation_file,
    measured_storage,
    probe_storage,
    storage_choice,
)
from agenticdb.planner.opening_host import host_sized
from agenticdb.planner.opening_values import SourceInput, host_view
from agenticdb.sandbox.postgres import PostgresSandbox, PostgresSandboxInfo
from agenticdb.targets.postgres import PostgresTarget
from agenticdb.validation.validator import flavor_of

MiB = 1024**2


def _write(path: Path, nbytes: int) -> None:
    """A fully allocated file of random bytes, on the device (fsync: no delayed allocation left)."""
    with path.open("wb") as f:
        for _ in range(nbytes // MiB):
            f.write(os.urandom(MiB))
        f.flush()
        os.fsync(f.fileno())


def test_classify_by_the_median_with_rotational_latency_bounds() -> None:
    """≤ 1 ms is flash, ≥ 3 ms a rotating disk (7200 rpm: 4.17 ms half a revolution), between is neither;
    too few reads give no class. Latencies are given, not timed."""
    assert classify([0.07] * 64)[0] == "ssd"
    assert classify([0.05] * 40 + [9.0] * 24)[0] == "ssd"  # the median, not the tail
    assert classify([1.0] * 16)[0] == "ssd"
    assert classify([3.0] * 16)[0] == "hdd"
    cls, why = classify([4.17 + 8.5] * 64)  # a 7200 rpm disk: rotational latency + an average seek
    assert cls == "hdd" and "≥ 3 ms" in why, why
    cls, why = classify([2.0] * 64)  # a 15k rpm disk's 2 ms rotational latency with short seeks, or busy flash
    assert cls == "unknown" and "between 1 and 3 ms" in why, why
    cls, why = classify([0.07] * 15)
    assert cls == "unknown" and "15 reads, fewer than the 16" in why, why


def test_storage_choice_prefers_the_measured_class_and_says_which() -> None:
    """A measured ssd wins over the kernel's flag and the text says both; without a measured class the flag's
    class is used with its sysfs path and why nothing was measured; nvme comes from the device's name alone; a
    measured hdd counts where the flag says hdd, never over a flag that says flash."""
    line = "median 0.07 ms random 8 kB O_DIRECT read of /d/f (p90 0.2 ms, 64 reads)"
    cls, text = storage_choice("ssd", line, "hdd", "vda")
    assert cls == "ssd" and text.startswith(f"storage ssd measured: {line}"), text
    assert "the kernel's flag says hdd (/sys/block/vda/queue/rotational)" in text, text
    cls, text = storage_choice("ssd", line, "nvme", "nvme0n1")
    assert cls == "nvme" and "measured" in text and "latency alone cannot tell" in text, text
    cls, text = storage_choice(None, "no readable file of ≥ 8 MiB in /d (3 files looked at)", "hdd", "vda")
    assert cls == "hdd" and text.startswith("storage hdd (/sys/block/vda/queue/rotational); no class measured: "), text
    assert storage_choice(None, "", "unknown", None) == ("unknown", "storage unknown (no data device found)")
    slow = "median 4.5 ms random 8 kB O_DIRECT read of /d/f (p90 12.6 ms, 64 reads)"
    cls, text = storage_choice("hdd", slow, "hdd", "sda")
    assert cls == "hdd" and text == f"storage hdd measured: {slow}", text
    cls, text = storage_choice("hdd", slow, "ssd", "sdb")  # flash under load reads slowly too: the flag is kept
    assert cls == "ssd" and text.startswith("storage ssd (/sys/block/sdb/queue/rotational), kept over a measured hdd")


def test_a_real_file_on_this_disk_measures_as_flash(tmp_path: Path) -> None:
    """64 random 8 kB O_DIRECT reads of a 16 MiB file on this VM's disk (vda, rotational = 1): the median is
    far below any rotating disk's (measured here 0.18–0.46 ms in the tests' CPU-capped cgroup, 0.07 ms on a quiet
    host, against ≥ 4.17 ms at 7200 rpm)."""
    (tmp_path / "base" / "16384").mkdir(parents=True)
    f = tmp_path / "base" / "16384" / "16397"  # a PostgreSQL relation's main fork
    _write(f, 16 * MiB)
    (tmp_path / "small").write_bytes(b"x" * 4096)
    probe = probe_storage(str(tmp_path))
    assert probe.file == str(f) and probe.reads == 64, probe
    assert probe.median_ms is not None and probe.p90_ms is not None and 0 < probe.median_ms <= probe.p90_ms, probe
    assert probe.storage_class == "ssd", probe
    assert probe.source.startswith("median ") and f"random 8 kB O_DIRECT read of {f}" in probe.source, probe
    again = measured_storage(str(tmp_path))  # once per process: the second call is the first's answer
    assert measured_storage(str(tmp_path)) is again


def test_no_file_large_enough_or_only_holes_gives_unknown_with_why(tmp_path: Path) -> None:
    """Relation files under 8 MiB are not read, nor a sparse one (its holes are read without the device)."""
    rel = tmp_path / "base" / "5"
    rel.mkdir(parents=True)
    (rel / "1259").write_bytes(os.urandom(MiB))
    with (rel / "1260").open("wb") as f:
        f.truncate(4 * MIN_FILE_BYTES)
    probe = probe_storage(str(tmp_path))
    assert probe.storage_class == "unknown" and probe.reads == 0 and probe.file is None, probe
    assert probe.source == (
        f"no readable relation data file of ≥ 8 MiB in {tmp_path} (PostgreSQL base/<db>/<relfilenode>, InnoDB "
        "*.ibd; the largest 32.0 MiB, 2 files looked at): the workload's data may not be loaded yet"
    ), probe


def test_only_relation_data_files_are_read_never_wal_or_redo(tmp_path: Path) -> None:
    """A fresh sandbox before the workload's load: its largest files are a 16 MiB WAL segment (PostgreSQL) or
    redo log and system tablespace (InnoDB), all just written; none is read, and the note says why no class
    (a user's trial read pg_wal/000000010000000000000001). Once a relation file is large enough it is read:
    PostgreSQL's main fork under base/<dboid>/, InnoDB's *.ibd; not a free-space-map fork."""
    (tmp_path / "pg_wal").mkdir()
    _write(tmp_path / "pg_wal" / "000000010000000000000001", 16 * MiB)
    _write(tmp_path / "ib_logfile0", 9 * MiB)
    _write(tmp_path / "ibdata1", 12 * MiB)
    (tmp_path / "base" / "5").mkdir(parents=True)
    (tmp_path / "base" / "5" / "1259").write_bytes(os.urandom(MiB // 8))
    probe = probe_storage(str(tmp_path))
    assert probe.storage_class == "unknown" and probe.file is None and probe.reads == 0, probe
    assert "no readable relation data file of ≥ 8 MiB" in probe.source, probe.source
    assert "the largest 0.1 MiB" in probe.source and "may not be loaded yet" in probe.source, probe.source
    _write(tmp_path / "base" / "5" / "16400_fsm", 9 * MiB)  # not the main fork
    assert probe_storage(str(tmp_path)).file is None
    (tmp_path / "tpch").mkdir()
    _write(tmp_path / "tpch" / "lineitem.ibd", 9 * MiB)
    assert probe_storage(str(tmp_path)).file == str(tmp_path / "tpch" / "lineitem.ibd")
    _write(tmp_path / "base" / "5" / "16400.1", 10 * MiB)  # a relation's second segment
    probe = probe_storage(str(tmp_path))
    assert probe.file == str(tmp_path / "base" / "5" / "16400.1") and probe.storage_class == "ssd", probe


def test_is_relation_file() -> None:
    """The names PostgreSQL and InnoDB give table and index data (pure)."""
    assert is_relation_file("base/16384/16397") and is_relation_file("base/1/2619.3")
    assert is_relation_file("tpch/lineitem.ibd")
    for other in (
        "pg_wal/000000010000000000000001",
        "base/16384/16397_vm",
        "base/16384/16397_fsm",
        "global/1262",
        "ibdata1",
        "ib_logfile0",
        "undo001",
        "base/pgsql_tmp/pgsql_tmp1.0",
    ):
        assert not is_relation_file(other), other


def test_a_memory_filesystem_gives_unknown_with_why() -> None:
    """/dev/shm is tmpfs: nothing on a device to measure (this host's Linux 6.18 accepts O_DIRECT there, so the
    filesystem type decides, not a refused open)."""
    if not Path("/dev/shm").is_dir():
        pytest.skip("no /dev/shm on this host")
    d = Path(tempfile.mkdtemp(dir="/dev/shm", prefix="agenticdb-probe-"))
    try:
        _write(d / "f", 9 * MiB)
        probe = probe_storage(str(d))
        assert probe.storage_class == "unknown" and probe.reads == 0, probe
        assert probe.source == f"{d} is on tmpfs (memory, no device to measure)", probe
    finally:
        for p in d.iterdir():
            p.unlink()
        d.rmdir()


@pytest.fixture()
def pg(pg_sandbox: PostgresSandboxInfo) -> Iterator[PostgresTarget]:
    t = PostgresTarget(pg_sandbox.dsn, None, data_dir=pg_sandbox.data_dir)
    yield t
    t.close()


def _load_table(dsn: str, mib: int) -> str:
    """A table of about ``mib`` MiB in the database of ``dsn``, checkpointed to its file; its file's path
    relative to the data directory (``pg_relation_filepath``)."""
    with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as c:
        c.execute(
            "CREATE TABLE IF NOT EXISTS probe_rel AS SELECT g, repeat('x', 500) AS pad "
            f"FROM generate_series(1, {mib * MiB // 540}) g"
        )
        c.execute("CHECKPOINT")
        row = c.execute("SELECT pg_relation_filepath('probe_rel')").fetchone()
    assert row is not None
    return str(row[0])


def test_a_fresh_sandbox_is_probed_on_its_data_once_loaded() -> None:
    """A new private PostgreSQL before any data load has a 16 MiB WAL segment and no relation file of 8 MiB:
    the probe reads none and says the data may not be loaded yet (the kernel's flag is then used); after a
    12 MiB table is loaded and checkpointed, ``measured_storage`` measures again and reads that table's file."""
    base = Path(tempfile.mkdtemp(prefix="agenticdb-probe-"))
    base.chmod(0o755)
    sandbox = PostgresSandbox(base)
    info = sandbox.up()
    try:
        wal = list((Path(info.data_dir) / "pg_wal").glob("0000*"))
        assert wal and wal[0].stat().st_size >= MIN_FILE_BYTES, wal  # what the old probe read
        before = measured_storage(info.data_dir)
        assert before.storage_class == "unknown" and before.file is None, before
        profiled = detect_hardware(info.data_dir)  # what a session's profile holds before its data load
        assert profiled.storage_measured is None and "may not be loaded yet" in profiled.storage_probe
        assert "no readable relation data file of ≥ 8 MiB" in before.source, before.source
        assert "may not be loaded yet" in before.source and "pg_wal" not in before.source, before.source
        rel = _load_table(info.dsn, 12)
        after = measured_storage(info.data_dir)
        assert after.file == os.path.join(info.data_dir, rel) and after.storage_class == "ssd", after
        # the session's initializer measures again once the workload's data is loaded (storage_after_load)
        loaded = storage_after_load(profiled)
        assert loaded.storage_measured == "ssd" and rel in loaded.storage_probe, loaded.storage_probe
        assert storage_after_load(loaded) is loaded  # a known class is not measured again
    finally:
        sandbox.down()
        shutil.rmtree(base, ignore_errors=True)


def test_the_host_sized_io_concurrency_names_the_measured_class(pg: PostgresTarget) -> None:
    """A real private PostgreSQL 15 on this VM's disk: the hardware read for its data directory carries the
    measured class (a 12 MiB table's file under base/<dboid>/ is read, not a WAL segment), and the host-sized
    candidate's effective_io_concurrency is the flash figure with a source naming the measurement — not the
    rotational flag's hdd and 2."""
    _load_table(pg.dsn, 12)
    ctx = context_of(pg)
    hw = ctx.profile.hardware
    assert hw.storage_measured == "ssd", hw.storage_probe
    assert pg.data_dir is not None and f"read of {pg.data_dir}/base/" in hw.storage_probe, hw.storage_probe
    host = host_view(ctx, flavor_of(ctx.catalog))
    assert host.storage == "ssd" and host.storage_source.startswith("storage ssd measured: median "), host
    c = host_sized(SourceInput(ctx, host, PolicyConfig())).candidate
    assert c is not None
    src = {**c.kept, **c.sources}["effective_io_concurrency"]
    assert "storage ssd measured: median " in src and "random 8 kB O_DIRECT read of " in src, src
    assert pg.data_dir is not None and pg.data_dir in src, src
    assert {**pg.current_values(), **c.changes}["effective_io_concurrency"] == "200", c.changes
