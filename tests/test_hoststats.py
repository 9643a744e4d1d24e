"""hoststats: parsing of /proc files (fake tree with known numbers) and a real-host sample."""

from __future__ import annotations

import os
import time
from pathlib import Path

from agenticdb.measure.hoststats import derived, host_state
from agenticdb.models import RuntimeState, StateDelta

HZ = os.sysconf("SC_CLK_TCK")


def write_proc(root: Path, cpu: list[int], disk: list[int], vm: dict[str, int], psi_io: int) -> None:
    proc = root / "proc"
    (proc / "pressure").mkdir(parents=True, exist_ok=True)
    (proc / "stat").write_text("cpu  " + " ".join(str(v) for v in cpu) + " 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 1 2 3\n")
    (proc / "meminfo").write_text(
        "MemTotal:       24000000 kB\nMemAvailable:   20000000 kB\nDirty:              1024 kB\n"
        "Writeback:             0 kB\nCommitLimit:    12000000 kB\nCommitted_AS:    3000000 kB\n"
    )
    (proc / "vmstat").write_text("".join(f"{k} {v}\n" for k, v in vm.items()))
    (proc / "diskstats").write_text(
        "   7       0 loop0 1 0 2 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
        " 254       0 vda " + " ".join(str(v) for v in disk) + " 0 0 0 0 0 0\n"
    )
    (proc / "pressure/io").write_text(
        f"some avg10=1.50 avg60=0.20 avg300=0.10 total={psi_io}\n"
        f"full avg10=0.50 avg60=0.10 avg300=0.05 total={psi_io // 2}\n"
    )


def test_host_state_and_derived_on_fake_tree(tmp_path: Path) -> None:
    # cpu: user nice system idle iowait irq softirq steal (ticks)
    write_proc(
        tmp_path,
        cpu=[100, 0, 50, 800, 50, 0, 0, 0],
        disk=[10, 0, 80, 20, 30, 0, 240, 60, 2, 100, 200],
        vm={"nr_dirty": 5, "nr_writeback": 1, "nr_dirtied": 1000, "pgscan_kswapd": 10, "pgscan_direct": 0},
        psi_io=1_000_000,
    )
    before = host_state(tmp_path, ["vda"])
    assert before.counters["host.cpu_user"] == 100 / HZ
    assert before.counters["diskstats.vda.sectors_written"] == 240
    assert "diskstats.loop0.reads" not in before.counters  # only the requested devices
    assert before.gauges["diskstats.vda.in_flight"] == 2
    assert before.gauges["vmstat.nr_dirty"] == 5 and "vmstat.nr_dirty" not in before.counters
    assert before.counters["vmstat.nr_dirtied"] == 1000  # cumulative despite the nr_ prefix
    assert before.gauges["host.commit_limit_bytes"] == 12000000 * 1024
    assert before.gauges["host.committed_as_bytes"] == 3000000 * 1024
    assert before.gauges["host.mem_available_bytes"] == 20000000 * 1024
    assert before.counters["psi.io.some_total_us"] == 1_000_000
    assert before.counters["psi.io.full_total_us"] == 500_000
    assert before.gauges["psi.io.some_avg10"] == 1.5
    assert "psi.cpu.some_total_us" not in before.counters  # absent file is skipped

    # 2 s later: 100 ticks busy (60 user + 40 system), 60 idle, 40 iowait; 10 reads + 30 writes
    write_proc(
        tmp_path,
        cpu=[160, 0, 90, 860, 90, 0, 0, 0],
        disk=[20, 0, 160, 40, 60, 0, 480, 180, 4, 1100, 2200],
        vm={"nr_dirty": 50, "nr_writeback": 9, "nr_dirtied": 3000, "pgscan_kswapd": 410, "pgscan_direct": 20},
        psi_io=1_500_000,
    )
    after = host_state(tmp_path, ["vda"])
    after.taken_at = before.taken_at + 2.0
    d = derived(StateDelta.between(before, after))
    assert abs(d["host.cpu_util"] - 100 / 200) < 1e-9
    assert abs(d["host.iowait_fraction"] - 40 / 200) < 1e-9
    assert d["diskstats.vda.await_ms"] == (20 + 120) / 40
    assert d["diskstats.vda.r_await_ms"] == 2.0 and d["diskstats.vda.w_await_ms"] == 4.0
    assert d["diskstats.vda.util"] == 0.5  # 1000 ms busy of 2000 ms
    assert d["diskstats.vda.avg_queue_depth"] == 1.0  # 2000 weighted ms / 2000 ms
    assert d["diskstats.vda.iops"] == 20.0
    assert d["psi.io.some_fraction"] == 0.25 and d["psi.io.full_fraction"] == 0.125
    assert d["vmstat.pgscan_kswapd_per_s"] == 200.0 and d["vmstat.pgscan_direct_per_s"] == 10.0


def test_derived_with_idle_device_has_no_division_by_zero() -> None:
    state = RuntimeState(counters={"diskstats.sdb.reads": 5.0, "diskstats.sdb.writes": 0.0})
    d = derived(StateDelta.between(state, state.model_copy(update={"taken_at": state.taken_at + 1})))
    assert d["diskstats.sdb.await_ms"] == 0.0 and d["diskstats.sdb.util"] == 0.0


def test_real_host_sample_moves_with_io(tmp_path: Path) -> None:
    dev = next(p.name for p in Path("/sys/block").iterdir() if "/virtual/" not in str(p.resolve()))
    before = host_state(Path("/"), [dev])
    assert before.counters["host.cpu_idle"] > 0
    assert before.gauges["host.mem_available_bytes"] > 0
    assert f"diskstats.{dev}.writes" in before.counters
    assert "vmstat.pgscan_kswapd" in before.counters and "vmstat.nr_dirty" in before.gauges
    if Path("/proc/pressure/io").exists():
        assert "psi.io.some_total_us" in before.counters
    with open(tmp_path / "f", "wb") as fh:  # a real synced write reaches the device
        fh.write(os.urandom(1 << 20))
        fh.flush()
        os.fsync(fh.fileno())
    time.sleep(0.05)
    delta = StateDelta.between(before, host_state(Path("/"), [dev]))
    assert delta.totals[f"diskstats.{dev}.writes"] >= 1
    d = derived(delta)
    assert 0.0 <= d["host.cpu_util"] <= 1.0
    assert 0.0 <= d[f"diskstats.{dev}.util"] <= 1.0
    assert set(d).isdisjoint(before.counters)  # derived names never shadow raw counters
