"""Bottleneck attribution from runtime-state deltas (docs/architecture.md "Roles"; issue 6).

Every hypothesis of :class:`~agenticdb.models.Bottleneck` that belongs to the stage is scored in
[0, 1] from *signals*: counters normalised per transaction or per second, ratios and gauges. A signal
is ``weight × ramp(value, lo, hi)``: 0 at or below ``lo``, ``weight`` at or above ``hi``, linear in
between. A hypothesis scores the strongest of its signals, so it wins on its own evidence only; a
hypothesis whose counters are missing scores 0 and says so. Thresholds are engineering judgement
anchored on the manuals cited per rule or per catalog entry; they are meant to separate the
hypotheses, not to measure anything absolutely.

The DBMS signals are data: ``PG_SIGNALS`` and ``MY_SIGNALS`` (diagnosis_rules.py) are tables of rules
(hypothesis, reader of the value and its evidence line, ramp ``lo``/``hi``, weight, manual source); a
table's order is the order its evidence is listed. Host signals (I/O, CPU, writeback, reclaim) are
shared functions (diagnosis_signals.py). Their thresholds, the tables' volume gates and
:data:`RULED_OUT_BELOW` are data with their basis: catalogs/diagnosis-thresholds.toml.

Counter names follow the target helpers: ``pg_stat_database.*``, ``pg_stat_bgwriter.*``,
``pg_stat_wal.*``, ``global_status.*``, ``host.*`` (CPU seconds), ``diskstats.<dev>.*``,
``vmstat.*``, ``psi.<res>.some_total_us``; wait events are sampled as ``{"<type>:<event>": count}``.
"""

from __future__ import annotations

import structlog
from pydantic import BaseModel, Field

from agenticdb.dialect import flavor_of_text
from agenticdb.models import Bottleneck, Layer, Measurement, RuntimeProfile, StateDelta
from agenticdb.planner.diagnosis_rules import DBMS_HYPOTHESES, MY_SIGNALS, PG_SIGNALS, Sample, table_signals
from agenticdb.planner.diagnosis_signals import Signal, View, add_live, fmt, host_cpu, host_io, os_reclaim, os_writeback
from agenticdb.planner.diagnosis_thresholds import t

log = structlog.get_logger(__name__)

RULED_OUT_BELOW = t("ruled_out_below")
"""A hypothesis scoring below this is reported as ruled out, with the reason (catalogs/diagnosis-thresholds.toml)."""

__all__ = ["DBMS_HYPOTHESES", "OS_HYPOTHESES", "RULED_OUT_BELOW", "Hypothesis", "diagnose"]

OS_HYPOTHESES = (Bottleneck.io_queue, Bottleneck.writeback, Bottleneck.memory_reclaim, Bottleneck.cpu)


class Hypothesis(BaseModel):
    """One scored bottleneck hypothesis.

    ``score`` in [0, 1]; ``evidence`` holds one line with numbers per signal that was available;
    ``ruled_out`` says why the hypothesis was dismissed (None when ``score >= RULED_OUT_BELOW``).
    """

    bottleneck: Bottleneck
    layer: Layer
    score: float = Field(ge=0.0, le=1.0)
    evidence: list[str] = Field(default_factory=list)
    ruled_out: str | None = None

    @property
    def plausible(self) -> bool:
        return self.ruled_out is None


def _transactions(v: View, family: str, measurement: Measurement | None) -> float | None:
    """Transactions in the sample: DBMS commit counters, else the workload's own count."""
    if family == "postgresql":
        tx = v.sum_totals(["pg_stat_database.xact_commit", "pg_stat_database.xact_rollback"])
    else:
        tx = v.sum_totals(["global_status.Com_commit", "global_status.Com_rollback"])
    if tx:
        return tx
    if measurement is not None:
        if measurement.transactions:
            return float(measurement.transactions)
        if measurement.tps:
            return measurement.tps * v.seconds
    return None


def _queries(measurement: Measurement | None) -> int:
    """The queries a query set's run executed (``Measurement.per_query_s``: TPC-H, timed-out ones included), 0 for
    a workload of transactions or without the measurement."""
    return len(measurement.per_query_s) if measurement is not None else 0


# --------------------------------------------------------------------------------------------- API


def _device(profile: RuntimeProfile) -> str | None:
    dev = profile.hardware.data_device
    return dev.removeprefix("/dev/") if dev else None


def _hypothesis(b: Bottleneck, layer: Layer, signals: list[Signal]) -> Hypothesis:
    score = round(min(1.0, max((s.contribution for s in signals), default=0.0)), 3)
    # A signal that did not raise the score says so: the score printed beside it comes from another one
    # ("wal_fsync (score 1.00): wal_buffers_full = 0.00 per 1000 transactions" read as a contradiction).
    evidence = [
        s.text if s.contribution > 0 or score == 0 else f"{s.text} (below {fmt(s.lo)}: not what raised the score)"
        for s in sorted(signals, key=lambda s: -s.contribution)
    ]
    ruled_out = None
    if score < RULED_OUT_BELOW:
        if not signals:
            ruled_out = "no counters for this hypothesis in the sample"
        else:
            ruled_out = "; ".join(f"{s.text} (suspect from {fmt(s.lo)})" for s in signals[:3])
    return Hypothesis(bottleneck=b, layer=layer, score=score, evidence=evidence, ruled_out=ruled_out)


def diagnose(
    delta: StateDelta,
    profile: RuntimeProfile,
    family: str,
    stage: Layer,
    measurement: Measurement | None = None,
) -> list[Hypothesis]:
    """Score every bottleneck hypothesis of ``stage`` from one runtime-state delta.

    Args:
        delta: counter deltas (``totals`` over ``seconds``) and gauges of the measured run.
        profile: hardware (memory for the dirty-page share, data device) and current config.
        family: ``"postgresql"``, ``"mariadb"`` or ``"mysql"``; ignored for the OS stage.
        stage: ``Layer.dbms`` scores the eight DBMS hypotheses, ``Layer.os`` io_queue, writeback,
            memory_reclaim and cpu.
        measurement: the run's workload result, used for transactions when commit counters are absent; a query
            set's run (``per_query_s``) has its per-transaction counters read per 1000 of its queries instead.

    Returns:
        Hypotheses sorted by score, highest first; equal scores by how far their strongest signal reads
        beyond its threshold, then in the order of DBMS_HYPOTHESES/OS_HYPOTHESES.

    Raises:
        ValueError: ``family`` is not a known DBMS family for the DBMS stage.
    """
    v = View(delta)
    dev = _device(profile)
    if stage == Layer.os:
        signals = {
            Bottleneck.io_queue: host_io(v, dev),
            Bottleneck.writeback: os_writeback(v, profile, dev),
            Bottleneck.memory_reclaim: os_reclaim(v),
            Bottleneck.cpu: host_cpu(v),
        }
        order: tuple[Bottleneck, ...] = OS_HYPOTHESES
    else:
        family = flavor_of_text(family) or family  # accept spellings like "postgresql-15" or "MariaDB"
        tx = _transactions(v, family, measurement)
        sample = Sample(v, tx, profile, _queries(measurement))
        if family == "postgresql":
            signals = table_signals(PG_SIGNALS, sample)
        elif family in ("mariadb", "mysql"):
            signals = table_signals(MY_SIGNALS, sample)
        else:
            raise ValueError(f"family={family!r}: expected 'postgresql', 'mariadb' or 'mysql'")
        signals[Bottleneck.io_queue] += host_io(v, dev)
        signals[Bottleneck.cpu] += host_cpu(v)
        add_live(signals, v, measurement)
        order = DBMS_HYPOTHESES
    hyps = [_hypothesis(b, stage, signals[b]) for b in order]
    # Equal scores (most often two hypotheses both at 1.0) are ordered by their strongest signal's
    # reading beyond its certainty threshold: a live window where spilling statements take 80 % of the
    # application's time (3 × that signal's threshold) outranks WAL waits just past theirs.
    strength = {b: max((s.strength for s in signals[b]), default=0.0) for b in order}
    ranked = sorted(hyps, key=lambda h: (-h.score, -strength[h.bottleneck]))
    log.debug(
        "diagnosis.scored",
        stage=stage.value,
        family=family,
        scores={h.bottleneck.value: h.score for h in ranked},
    )
    return ranked
