"""The diagnosis thresholds as data (catalogs/diagnosis-thresholds.toml, issue 37).

Every threshold has a non-empty basis; the catalog round-trips to the values the diagnosis reads, and
those values are the ones the code held before they moved (so the diagnosis did not change); a catalog
with a missing or unknown name or key is refused with the name in the message; and a huge host fault
scores the signal whose thresholds come from the catalog.
"""

from __future__ import annotations

import tomllib

import pytest

from agenticdb.models import Bottleneck, Hardware, Layer, RuntimeProfile, StateDelta
from agenticdb.planner import diagnosis, diagnosis_thresholds
from agenticdb.planner.diagnosis_thresholds import NAMES, parse, t, thresholds
from agenticdb.resources import data_dir

CATALOG = data_dir("catalogs") / "diagnosis-thresholds.toml"

# The literals of planner/diagnosis.py before they moved to the catalog (commit 889b82f).
BEFORE = {
    "ruled_out_below": 0.25,
    "host_cpu_busy_lo": 0.75,
    "host_cpu_busy_hi": 0.97,
    "psi_cpu_lo": 0.3,
    "psi_cpu_hi": 0.8,
    "psi_cpu_weight": 0.8,
    "disk_util_lo": 0.6,
    "disk_util_hi": 0.95,
    "disk_queue_lo": 2.0,
    "disk_queue_hi": 16.0,
    "disk_await_lo_ms": 5.0,
    "disk_await_hi_ms": 50.0,
    "disk_await_gate_iops": 20.0,
    "iowait_share_lo": 0.1,
    "iowait_share_hi": 0.4,
    "psi_io_lo": 0.15,
    "psi_io_hi": 0.5,
    "dirty_share_lo": 0.04,
    "dirty_share_hi": 0.12,
    "writeback_share_lo": 0.002,
    "writeback_share_hi": 0.02,
    "writeback_share_weight": 0.9,
    "write_busy_lo": 0.5,
    "write_busy_hi": 0.9,
    "write_busy_weight": 0.8,
    "pgscan_direct_lo": 50.0,
    "pgscan_direct_hi": 5000.0,
    "pgscan_kswapd_lo": 1000.0,
    "pgscan_kswapd_hi": 50000.0,
    "pgscan_kswapd_weight": 0.6,
    "swap_lo": 10.0,
    "swap_hi": 500.0,
    "allocstall_lo": 1.0,
    "allocstall_hi": 50.0,
    "psi_memory_lo": 0.02,
    "psi_memory_hi": 0.2,
    "live_spill_share_lo": 0.05,
    "live_spill_share_hi": 0.3,
    "live_miss_lo": 0.02,
    "live_miss_hi": 0.2,
    "live_miss_gate_reads": 50.0,
    "pg_miss_gate_reads": 200.0,
    "pg_backend_writes_gate": 1000.0,
    "pg_requested_checkpoints_gate": 2.0,
    "pg_read_time_gate_reads": 50.0,
    "pg_jit_gate_share": 0.2,
    "my_miss_gate_reads": 50.0,
    "my_lock_time_gate_waits": 10.0,
    "my_thread_cache_gate_connections": 5.0,
}


def test_every_threshold_has_a_basis_and_a_unit() -> None:
    for name, th in thresholds().items():
        assert th.basis.strip(), f"{name}: empty basis"
        assert th.unit.strip(), f"{name}: empty unit"
        # a basis is a manual section, a measurement on this host, or judgement named as such
        assert "judgement" in th.basis or "manual" in th.basis or "Documentation/" in th.basis or "(1)" in th.basis, (
            f"{name}: basis {th.basis!r} names no manual section, measurement or judgement"
        )


def test_the_catalog_round_trips_to_the_values_the_diagnosis_reads() -> None:
    raw = tomllib.loads(CATALOG.read_text())["threshold"]
    assert list(thresholds()) == list(NAMES)
    assert set(raw) == set(NAMES)
    for name in NAMES:
        assert t(name) == float(raw[name]["value"]), name
    assert t("ruled_out_below") == diagnosis.RULED_OUT_BELOW


def test_the_values_are_those_the_code_held_before_they_moved() -> None:
    assert {n: t(n) for n in NAMES} == BEFORE


def _catalog_without(name: str) -> str:
    text = CATALOG.read_text()
    start = text.index(f"[threshold.{name}]")
    end = text.index("[threshold.", start + 1)
    return text[:start] + text[end:]


def test_a_missing_threshold_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="missing threshold.*disk_util_hi"):
        parse(_catalog_without("disk_util_hi"))


def test_an_unknown_threshold_is_refused_by_name() -> None:
    text = CATALOG.read_text() + '\n[threshold.disk_util_max]\nvalue = 1\nunit = "x"\nbasis = "judgement: a test"\n'
    with pytest.raises(ValueError, match="unknown threshold.*disk_util_max"):
        parse(text)


def test_an_unknown_or_missing_key_is_refused_by_name() -> None:
    text = CATALOG.read_text()
    with pytest.raises(ValueError, match="'swap_lo'.*source"):
        parse(text.replace("[threshold.swap_lo]\n", '[threshold.swap_lo]\nsource = "x"\n'))
    start = text.index("[threshold.swap_hi]")
    cut = text.index("basis = ", start)
    end = text.index("\n", cut) + 1
    with pytest.raises(ValueError, match="'swap_hi'.*basis"):
        parse(text[:cut] + text[end:])


def test_the_catalog_is_read_once() -> None:
    assert diagnosis_thresholds.thresholds() is diagnosis_thresholds.thresholds()


def _profile() -> RuntimeProfile:
    hw = Hardware(
        cpu_count=2, memory_bytes=2**30, memory_limit_bytes=2**30, disk_free_bytes=2**30, data_device="/dev/vda"
    )
    return RuntimeProfile(target="postgresql", dbms_version="15", hardware=hw, current_config={})


def _disk(io_ticks_ms: float) -> StateDelta:
    return StateDelta(seconds=10.0, totals={"diskstats.vda.io_ticks_ms": io_ticks_ms})


def test_the_disk_utilisation_ramp_is_the_catalogs() -> None:
    """io_ticks over 10 s at the catalog's lo scores 0, at its hi scores 1: the catalog's values are used."""
    lo, hi = t("disk_util_lo"), t("disk_util_hi")

    def io_score(util: float) -> float:
        hyps = diagnose_os(_disk(util * 10_000.0))
        return next(h.score for h in hyps if h.bottleneck == Bottleneck.io_queue)

    assert io_score(lo) == 0.0
    assert io_score(hi) == 1.0
    assert io_score((lo + hi) / 2) == pytest.approx(0.5, abs=0.01)


def diagnose_os(delta: StateDelta) -> list[diagnosis.Hypothesis]:
    return diagnosis.diagnose(delta, _profile(), "postgresql", Layer.os)


def test_the_diagnosis_reads_the_catalog_not_a_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """With disk_util_hi moved from 0.95 to 0.7 in the catalog text, 70 % utilisation scores 1 instead of ~0.29."""
    before = next(h.score for h in diagnose_os(_disk(7_000.0)) if h.bottleneck == Bottleneck.io_queue)
    edited = parse(CATALOG.read_text().replace("value = 0.95\n", "value = 0.7\n", 1))
    assert edited["disk_util_hi"].value == 0.7
    monkeypatch.setattr(diagnosis_thresholds, "thresholds", lambda: edited)
    after = next(h.score for h in diagnose_os(_disk(7_000.0)) if h.bottleneck == Bottleneck.io_queue)
    assert before == pytest.approx(0.286, abs=0.01)
    assert after == 1.0
