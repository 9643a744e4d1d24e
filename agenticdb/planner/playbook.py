"""The heuristic planner's playbook: knowledge as data (``catalogs/playbook-*.toml``) plus sizing.

A playbook file lists, per bottleneck, the knobs a DBA would move, the direction, a first value sized
from the host, step factors that shrink (×2, ×1.5, ×1.25), limits, and a reason and a source for each
entry; ``[[floor]]`` rules catch a bad starting configuration (a knob far below a sane floor for the
hardware, or a known trap such as ``commit_delay``); ``[[measured]]`` rules undo a setting whose own cost
the server's counters show (JIT compile time against statement time); ``[[report]]`` notes say what a DBA should do
when no knob helps. Sizes are computed by :func:`size` from structured fields — never by ``eval``.

Values are handled in the knob's *base unit* (``KnobSpec.unit``: PostgreSQL "8kB", "kB", "MB", "ms",
"s"; MySQL "B"; Linux the catalog unit) and written back in a form the validator accepts
(``agenticdb.units.format_value``: PostgreSQL sizes as "512MB", times as "200ms"/"15min"; MySQL sizes
as integer bytes; sysctls as integers).
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agenticdb.models import Bottleneck, Hardware, KnobSpec, Layer, StateDelta
from agenticdb.resources import data_dir
from agenticdb.units import unit_bytes


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Sizing(_Strict):
    """A value computed from the host. Exactly one base term, then optional scaling and clamps.

    Base terms: ``value`` (knob base unit), ``bytes``, ``fraction_of_memory`` (of the memory limit:
    RAM or cgroup limit, whichever is lower), ``fraction_of_ram``, ``fraction_of_disk_free``,
    ``per_cpu`` (× cpu_count, base unit), ``multiply_current`` (× the current value).
    ``divide_by_max_connections`` divides the base term by max_connections (per-session memory).
    Clamps: ``min``/``max`` in base unit, ``min_bytes``/``max_bytes``, ``cap_fraction_of_memory``.
    """

    value: float | None = None
    bytes: float | None = None
    fraction_of_memory: float | None = Field(default=None, gt=0, le=1)
    fraction_of_ram: float | None = Field(default=None, gt=0, le=1)
    fraction_of_disk_free: float | None = Field(default=None, gt=0, le=1)
    per_cpu: float | None = Field(default=None, gt=0)
    multiply_current: float | None = Field(default=None, gt=0)
    divide_by_max_connections: bool = False
    min: float | None = None
    max: float | None = None
    min_bytes: float | None = None
    max_bytes: float | None = None
    cap_fraction_of_memory: float | None = Field(default=None, gt=0, le=1)

    @model_validator(mode="after")
    def _one_base(self) -> Sizing:
        terms = [
            k
            for k in (
                "value",
                "bytes",
                "fraction_of_memory",
                "fraction_of_ram",
                "fraction_of_disk_free",
                "per_cpu",
                "multiply_current",
            )
            if getattr(self, k) is not None
        ]
        if len(terms) != 1:
            raise ValueError(f"sizing needs exactly one base term, got {terms or 'none'}")
        return self


def measured_share(delta: StateDelta, part: str, whole: str, min_whole_per_s: float = 0.0) -> float | None:
    """``part / whole`` of two counters of the sample (same unit, e.g. ms), capped at 1; ``None`` when a
    counter is missing, ``whole`` is 0, or ``whole`` grew by less than ``min_whole_per_s`` a second (too
    little volume for the share to mean anything)."""
    p, w = delta.totals.get(part), delta.totals.get(whole)
    if p is None or not w or w <= 0 or delta.seconds <= 0 or w / delta.seconds < min_whole_per_s:
        return None
    return min(p / w, 1.0)


class MeasuredShare(_Strict):
    """A cost the server measures as a share of a whole (two counters of the last sample, same unit):
    ``part / whole``, e.g. pg_stat_statements JIT time over statement execution time (ms). An entry with
    ``absent_below`` is skipped when the sample holds both counters, ``whole`` grew by at least
    ``min_whole_per_s`` a second, and the share is below ``below``: the cost it removes was measured and
    is not there (a move that cannot help is a placebo). Without the counters (extension not installed)
    or the volume, the entry applies as written."""

    part: str
    whole: str
    below: float = Field(gt=0, le=1)
    min_whole_per_s: float = Field(default=0.0, ge=0)

    def share(self, delta: StateDelta) -> float | None:
        """:func:`measured_share` of this pair over ``delta``."""
        return measured_share(delta, self.part, self.whole, self.min_whole_per_s)


class NeededCounter(_Strict):
    """The counter an entry's problem shows in: the move serves only when ``counter`` (a key of the runtime
    sample's counters, ``<source>.<name>``: ``global_status.Innodb_log_waits``) grew by more than ``above`` over
    the last sample (its own unit, the whole interval). When the sample holds the counter and it did not, the
    problem was measured and is not there: a larger log buffer with no ``Innodb_log_waits`` only takes memory (the
    opening's limits set raised innodb_log_buffer_size to 256 MiB for a wal_fsync diagnosis on a baseline with
    none, and the memory budget then shrank it to 132 MiB in a 512 MiB server, 2026-12-07). Without the counter
    in the sample (not read, another server) the entry applies as written."""

    counter: str = Field(pattern=r"^[a-z_]+\.[A-Za-z0-9_.]+$")
    above: float = Field(default=0.0, ge=0)

    def ruled_out(self, delta: StateDelta) -> str | None:
        """``"Innodb_log_waits = 0 measured"`` when ``delta`` measured the counter at or below ``above``; None when
        it grew beyond it or the sample does not hold it."""
        if self.counter in delta.totals:
            value = delta.totals[self.counter]
        elif self.counter in delta.per_second:
            value = delta.per_second[self.counter] * delta.seconds
        else:
            return None
        if value > self.above:
            return None
        bar = f" (the move needs more than {self.above:g})" if self.above else ""
        return f"{self.counter.split('.', 1)[1]} = {value:g} measured{bar}"


class PlaybookEntry(_Strict):
    """One move of the playbook: ``knob`` towards ``direction`` when ``bottleneck`` is diagnosed.

    ``direction = "set"`` writes ``value`` or the first of ``prefer`` the knob's enum offers, unless
    the current value is in ``unless_current_in``. ``limit`` is the upper bound for "up" and the lower
    bound for "down". ``workload_classes`` restricts the entry (empty: all); ``min_score`` asks for a
    stronger diagnosis (e.g. raise max_connections only when really near the limit); ``absent_below``
    skips it when the server measured the cost it removes and found almost none (:class:`MeasuredShare`);
    ``needs`` skips it when the counter its problem shows in was measured and did not grow (:class:`NeededCounter`:
    the heuristic planner's moves and the opening's limits set leave it, saying the measurement).
    ``<dev>`` in a Linux knob name is the data device.
    """

    bottleneck: Bottleneck
    knob: str
    direction: Literal["up", "down", "set"]
    first: Sizing | None = None
    limit: Sizing | None = None
    value: str | None = None
    prefer: list[str] = Field(default_factory=list)
    unless_current_in: list[str] = Field(default_factory=list)
    steps: list[float] = Field(default_factory=lambda: [2.0, 1.5, 1.25])
    workload_classes: list[str] = Field(default_factory=list)
    min_score: float = 0.0
    absent_below: MeasuredShare | None = None
    needs: NeededCounter | None = None
    effect: str
    risk: str = ""
    reason: str
    source: str

    @model_validator(mode="after")
    def _shape(self) -> PlaybookEntry:
        if self.direction in ("up", "down") and self.first is None:
            raise ValueError(f"entry {self.knob!r}: direction {self.direction!r} needs 'first'")
        if self.direction == "set" and self.value is None and not self.prefer:
            raise ValueError(f"entry {self.knob!r}: direction 'set' needs 'value' or 'prefer'")
        if any(f <= 1.0 for f in self.steps) or not self.steps:
            raise ValueError(f"entry {self.knob!r}: steps must be factors > 1, got {self.steps}")
        return self


def measured_absent(entry: PlaybookEntry, delta: StateDelta | None) -> str | None:
    """Why the heuristic planner leaves ``entry``: the sample ``delta`` measured the cost it removes below
    ``absent_below`` (``"not jit: measured pg_stat_statements.jit_time / … = 0.0%, below 1%: the cost it removes is
    not there"``) or the counter its problem shows in did not grow (``needs``: ``"not innodb_log_buffer_size:
    Innodb_log_waits = 0 measured: the problem it serves is not there"``); None when neither was measured so."""
    if delta is None:
        return None
    gate = entry.absent_below
    if gate is not None and (share := gate.share(delta)) is not None and share < gate.below:
        return (
            f"not {entry.knob}: measured {gate.part} / {gate.whole} = {share:.1%}, below {gate.below:.0%}: the cost "
            "it removes is not there"
        )
    if entry.needs is not None and (absent := entry.needs.ruled_out(delta)) is not None:
        return f"not {entry.knob}: {absent}: the problem it serves is not there"
    return None


class ProbeEntry(PlaybookEntry):
    """A first, low-risk move for a stage in which no hypothesis reached the action threshold.

    Offered once per session (a probe that did not help is a dead direction like any other), only
    while the data device served at least ``min_device_iops`` I/Os per second in the last measured
    run: a setting of a device the workload does not use cannot change the objective.
    """

    min_device_iops: float = Field(default=20.0, ge=0)

    @model_validator(mode="after")
    def _no_measured_checks(self) -> ProbeEntry:
        for key in ("absent_below", "needs"):
            if getattr(self, key) is not None:
                raise ValueError(f"probe {self.knob!r}: {key!r} is for [[entry]] moves, not probes")
        return self


class FloorRule(_Strict):
    """A floor rule: raise ``knob`` to ``floor`` when below it, or set it to ``value`` when above
    ``revert_above`` or equal to ``revert_if`` (a known trap: a number too high, or a switch such as
    ``enable_indexscan = off``). ``value = "default"`` puts a trap back to the server's shipped default
    (pg_settings.boot_val, information_schema.SYSTEM_VARIABLES.DEFAULT_VALUE), for knobs whose default
    differs between the families a playbook serves. ``unless_in`` lists values with a meaning of their own
    that are never a bad start (0 = no limit). Checked before any diagnosis-driven move. ``reason`` must hold
    whatever the value in effect; the case's own words (the value, whether it is the default, the floor
    and its basis, "bad start" only below the default or for a trap) come from ``planner.wording``."""

    knob: str
    bottleneck: Bottleneck
    floor: Sizing | None = None
    revert_above: float | None = None
    revert_if: str | None = None
    value: str | None = None
    unless_in: list[str] = Field(default_factory=list)
    effect: str
    reason: str
    source: str

    @model_validator(mode="after")
    def _shape(self) -> FloorRule:
        given = [k for k in ("floor", "revert_above", "revert_if") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                f"floor rule {self.knob!r}: give exactly one of 'floor', 'revert_above' or 'revert_if' "
                f"(given: {', '.join(given) or 'none'})"
            )
        if self.is_trap and self.value is None:
            raise ValueError(f"floor rule {self.knob!r}: '{given[0]}' needs 'value'")
        return self

    @property
    def is_trap(self) -> bool:
        """A known harmful value put back (``revert_above`` / ``revert_if``), not a floor to reach."""
        return self.revert_above is not None or self.revert_if is not None


class MeasuredRule(_Strict):
    """A setting whose own cost the server measures: set ``knob`` to ``value`` when, over the last
    sample, counter ``part`` reached ``above`` of counter ``whole`` (e.g. JIT compile time over statement
    execution time, both ms) while ``whole`` grew by at least ``min_whole_per_s`` a second (its unit per
    second; the volume below which a share means little). Checked with the floor rules, before any
    diagnosis-driven move; ``what`` names the cost in the rationale ("JIT compilation")."""

    knob: str
    bottleneck: Bottleneck
    value: str
    part: str
    whole: str
    above: float = Field(gt=0, le=1)
    min_whole_per_s: float = Field(default=0.0, ge=0)
    what: str
    effect: str
    reason: str
    source: str


class ReportNote(_Strict):
    """Advice for a bottleneck that knobs cannot fix (reported in the rationale)."""

    bottleneck: Bottleneck
    message: str
    source: str


class Playbook(_Strict):
    """One playbook file: the families it serves, its layer, entries, floors, report notes and probes
    (first low-risk moves when nothing scores as a bottleneck)."""

    families: list[str]
    layer: Layer
    description: str = ""
    entry: list[PlaybookEntry] = Field(default_factory=list)
    floor: list[FloorRule] = Field(default_factory=list)
    measured: list[MeasuredRule] = Field(default_factory=list)
    report: list[ReportNote] = Field(default_factory=list)
    probe: list[ProbeEntry] = Field(default_factory=list)

    def entries_for(self, bottleneck: Bottleneck) -> list[PlaybookEntry]:
        return [e for e in self.entry if e.bottleneck == bottleneck]

    def notes_for(self, bottleneck: Bottleneck) -> list[ReportNote]:
        return [n for n in self.report if n.bottleneck == bottleneck]


def load_playbook_file(path: Path) -> Playbook:
    """Parse and validate one playbook TOML file.

    Raises:
        ValueError: the file is not valid TOML or breaks the schema (message names file and field).
    """
    try:
        raw = tomllib.loads(path.read_text())
        return Playbook.model_validate(raw)
    except (tomllib.TOMLDecodeError, ValidationError) as exc:
        raise ValueError(f"playbook {path}: {exc}") from exc


@lru_cache(maxsize=8)
def load_playbook(family: str) -> Playbook:
    """The shipped playbook serving ``family`` ("postgresql", "mariadb", "mysql" or "linux").

    Raises:
        ValueError: no shipped ``catalogs/playbook-*.toml`` lists ``family``, or a file is invalid.
    """
    for path in sorted(data_dir("catalogs").glob("playbook-*.toml")):
        book = load_playbook_file(path)
        if family in book.families:
            return book
    raise ValueError(f"family={family!r}: no catalogs/playbook-*.toml lists it in 'families'")


# ------------------------------------------------------------------------------------------ sizing


def round_base(base: float, spec: KnobSpec) -> float:
    """Round a computed size to a tidy value: whole MiB for sizes ≥ 1 MiB, ``block_size`` multiples,
    integers for integer knobs, and clamp to the knob's own min/max."""
    ub = unit_bytes(spec.unit)
    if spec.vartype == "integer":
        if ub and base * ub >= 2**20:
            base = math.floor(base * ub / 2**20) * 2**20 / ub
        if spec.block_size:
            base = max(spec.block_size, math.floor(base / spec.block_size) * spec.block_size)
        base = float(round(base))
    if spec.min_value is not None:
        base = max(base, spec.min_value)
    if spec.max_value is not None:
        base = min(base, spec.max_value)
    return base


@dataclass(frozen=True)
class HostFacts:
    """What sizing may read. Sizes in bytes."""

    memory_limit_bytes: int
    ram_bytes: int
    cpu_count: int
    disk_free_bytes: int
    max_connections: int = 100

    @classmethod
    def of(cls, hw: Hardware, current: dict[str, str]) -> HostFacts:
        """The facts of ``hw`` (memory limit = the cgroup limit when there is one, else RAM) and the
        configuration in effect (``max_connections``; 100, PostgreSQL's default, when unreadable)."""
        try:
            maxc = int(float(current.get("max_connections", "100")))
        except ValueError:
            maxc = 100
        return cls(
            memory_limit_bytes=hw.memory_limit_bytes or hw.memory_bytes,
            ram_bytes=hw.memory_bytes,
            cpu_count=max(1, hw.cpu_count),
            disk_free_bytes=hw.disk_free_bytes,
            max_connections=maxc,
        )


def size(s: Sizing, facts: HostFacts, spec: KnobSpec, current: float | None) -> float | None:
    """Evaluate a Sizing for ``spec``; returns base units, or None when an input is unknown.

    Raises:
        ValueError: a byte-based term is used on a knob without a size unit (names the knob).
    """
    ub = unit_bytes(spec.unit)

    def from_bytes(b: float) -> float:
        if not ub:
            raise ValueError(f"knob {spec.name!r} (unit {spec.unit!r}): byte sizing needs a size unit")
        return b / ub

    if s.value is not None:
        base = s.value
    elif s.bytes is not None:
        base = from_bytes(s.bytes)
    elif s.fraction_of_memory is not None:
        base = from_bytes(s.fraction_of_memory * facts.memory_limit_bytes)
    elif s.fraction_of_ram is not None:
        base = from_bytes(s.fraction_of_ram * facts.ram_bytes)
    elif s.fraction_of_disk_free is not None:
        if not facts.disk_free_bytes:
            return None
        base = from_bytes(s.fraction_of_disk_free * facts.disk_free_bytes)
    elif s.per_cpu is not None:
        base = s.per_cpu * facts.cpu_count
    else:
        if current is None:
            return None
        base = current * (s.multiply_current or 1.0)
    if s.divide_by_max_connections:
        base /= max(1, facts.max_connections)
    if s.min_bytes is not None:
        base = max(base, from_bytes(s.min_bytes))
    if s.min is not None:
        base = max(base, s.min)
    if s.max_bytes is not None:
        base = min(base, from_bytes(s.max_bytes))
    if s.cap_fraction_of_memory is not None:
        base = min(base, from_bytes(s.cap_fraction_of_memory * facts.memory_limit_bytes))
    if s.max is not None:
        base = min(base, s.max)
    return base
