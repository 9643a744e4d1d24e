"""Parse and format parameter values in each target's canonical spelling.

PostgreSQL (manual 19.1.1 "Parameter Names and Values"): memory units are ``B``, ``kB``, ``MB``, ``GB``,
``TB`` (multiplier 1024) and time units ``us``, ``ms``, ``s``, ``min``, ``h``, ``d``; the server accepts
them **case-sensitively** only, and a wrong spelling in postgresql.conf stops the server from starting
(sclorg/postgresql-container issue 109). We accept them case-insensitively and accept the shorthands
``K``/``M``/``G``/``T`` for memory (what people and LLMs write), but always *write* the canonical spelling.
Integer parameters given a fractional value are rounded to the nearest base unit, as the server does
(manual 19.1.1: "the value is rounded to the nearest integer").

MySQL/MariaDB (MariaDB KB "Server System Variables", MySQL manual 5.1.8 "Using System Variables"):
integer sizes are bytes, optionally with a ``K``/``M``/``G``/``T``/``P``/``E`` suffix (case-insensitive,
powers of 1024); the canonical spelling is the byte count as an integer string. A value that is not a
multiple of the variable's ``NUMERIC_BLOCK_SIZE`` is rounded down by the server: we do the same and warn.
Booleans are ``ON``/``OFF``; enums take the server's own spelling.

Linux: sysctl and /sys/block/<dev>/queue values are integers or, for ``scheduler``, one of the names the
device's ``queue/scheduler`` file lists.

This is the one module that knows units and spellings: each value dialect is a class (:class:`Dialect`;
:func:`dialect_of` picks it from a catalog's target), the heuristic planner's base-unit arithmetic
(:func:`parse_value`, :func:`format_value`, :func:`canonical`) lives here too; the one comparison of two
spellings of a value (verify, revert checks, rival detection, rollback) is
:func:`agenticdb.units.compare.values_equal`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import ClassVar

from agenticdb.dialect import family_of as family_of  # re-exported for old callers; the home is dialect
from agenticdb.models import KnobSpec

PG_MEMORY_UNITS: dict[str, int] = {"B": 1, "kB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}
"""PostgreSQL memory units in bytes (manual 19.1.1)."""

PG_TIME_UNITS: dict[str, float] = {
    "us": 0.001,
    "ms": 1.0,
    "s": 1000.0,
    "min": 60_000.0,
    "h": 3_600_000.0,
    "d": 86_400_000.0,
}
"""PostgreSQL time units in milliseconds (manual 19.1.1)."""

_PG_MEMORY_INPUT = {
    "b": "B",
    "k": "kB",
    "kb": "kB",
    "m": "MB",
    "mb": "MB",
    "g": "GB",
    "gb": "GB",
    "t": "TB",
    "tb": "TB",
}
_PG_TIME_INPUT = {"us": "us", "ms": "ms", "s": "s", "min": "min", "h": "h", "d": "d"}
_MYSQL_SUFFIX = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4, "p": 1024**5, "e": 1024**6}
_NUMBER = re.compile(r"^\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*([A-Za-z%]*)\s*$")
_PG_TRUE = {"on", "true", "yes", "1", "t", "tr", "tru", "y", "ye"}
_PG_FALSE = {"off", "false", "no", "0", "f", "fa", "fal", "fals", "n", "of"}
"""PostgreSQL's boolean spellings, unique prefixes included (manual 19.1.1)."""
TRUE_WORDS = frozenset({"on", "true", "1", "yes"})
FALSE_WORDS = frozenset({"off", "false", "0", "no"})
"""The boolean spellings every target accepts (MySQL/MariaDB ``ON``/``1``/``TRUE``; sysctl 1/0)."""

SIZE_SUFFIX_BYTES: dict[str, int] = {
    "b": 1,
    "bytes": 1,
    "k": 1024,
    "kb": 1024,
    "kib": 1024,
    "m": 2**20,
    "mb": 2**20,
    "mib": 2**20,
    "g": 2**30,
    "gb": 2**30,
    "gib": 2**30,
    "t": 2**40,
    "tb": 2**40,
    "tib": 2**40,
}
"""Bytes per size spelling, lower-cased (the planner's sizes and the base units of size knobs)."""
_NUM_UNIT = re.compile(r"^\s*(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)\s*([a-zA-Z]*)\s*$")


class UnitError(ValueError):
    """A value cannot be normalised. ``check`` is the validator rule kind: "unit", "type" or "enum".

    The message names the parameter, the value and the accepted units or values.
    """

    def __init__(self, message: str, check: str = "unit") -> None:
        super().__init__(message)
        self.check = check


@dataclass(frozen=True)
class Parsed:
    """A normalised value: ``canonical`` is what is written to the target; ``base_value`` is the number in
    the knob's base unit (``KnobSpec.unit``: 8kB pages, kB, ms, bytes, …) or None for non-numeric knobs;
    ``warnings`` say what was rounded."""

    canonical: str
    base_value: float | None
    warnings: tuple[str, ...] = field(default=())


def _dialect(family: str) -> Dialect:
    """The value dialect of ``family``: a dialect name ("postgresql", "mysql", "linux") or a DBMS flavour
    ("mariadb" spells values as "mysql", :func:`family_of`) — one lookup for every caller, so passing the
    playbook's family is not a KeyError (d92bb22's trade and the search's range text both did)."""
    found = DIALECTS.get(family)
    return found if found is not None else DIALECTS[family_of(family)]


def normalize(family: str, spec: KnobSpec, raw: str | int | float | bool) -> Parsed:
    """Normalise ``raw`` for ``spec`` in the dialect ``family`` (see :func:`family_of`).

    Raises:
        UnitError: the value cannot be written in the target's canonical form.
    """
    return _dialect(family).parse(spec, raw)


# ---------------------------------------------------------------- PostgreSQL


def _pg_unit_kind(unit: str | None) -> tuple[str, float] | None:
    """("memory", bytes per base unit) or ("time", ms per base unit) for a pg_settings unit like "8kB"."""
    if not unit:
        return None
    m = re.fullmatch(r"(\d*)\s*([A-Za-z]+)", unit)
    if not m:
        return None
    mult = int(m.group(1) or 1)
    if m.group(2) in PG_MEMORY_UNITS:
        return "memory", mult * PG_MEMORY_UNITS[m.group(2)]
    if m.group(2) in PG_TIME_UNITS:
        return "time", mult * PG_TIME_UNITS[m.group(2)]
    return None


def _split_number(spec: KnobSpec, raw: str | int | float | bool, accepted: str) -> tuple[float, str]:
    if isinstance(raw, bool):
        raise UnitError(f"{spec.name}={raw!r}: a boolean is not a number; expected {accepted}", "type")
    if isinstance(raw, int | float):
        if not math.isfinite(raw):
            raise UnitError(f"{spec.name}={raw!r}: not a finite number; expected {accepted}", "type")
        return float(raw), ""
    m = _NUMBER.match(str(raw))
    if not m:
        raise UnitError(f"{spec.name}={raw!r}: not a number with an optional unit; expected {accepted}", "type")
    number = float(m.group(1))
    if not math.isfinite(number):
        raise UnitError(f"{spec.name}={raw!r}: not a finite number; expected {accepted}", "type")
    return number, m.group(2)


def pg_parse(spec: KnobSpec, raw: str | int | float | bool) -> Parsed:
    """Normalise a PostgreSQL value. See :func:`parse_pg_value`."""
    if spec.vartype == "bool":
        return Parsed(_pg_bool(spec, raw), None)
    if spec.vartype == "enum":
        return Parsed(_enum(spec, raw, pg_bools=True), None)
    if spec.vartype == "string":
        return Parsed(str(raw), None)
    kind = _pg_unit_kind(spec.unit)
    if kind is None:
        accepted = "a plain number (this parameter has no unit)"
    elif kind[0] == "memory":
        accepted = "a number with unit B, kB, MB, GB or TB (no unit = " + str(spec.unit) + ")"
    else:
        accepted = "a number with unit us, ms, s, min, h or d (no unit = " + str(spec.unit) + ")"
    number, unit = _split_number(spec, raw, accepted)
    if unit:
        if kind is None:
            raise UnitError(
                f"{spec.name}={raw!r}: unit {unit!r} given but the parameter has no unit; expected {accepted}"
            )
        table = _PG_MEMORY_INPUT if kind[0] == "memory" else _PG_TIME_INPUT
        canon_unit = table.get(unit.lower())
        if canon_unit is None:
            raise UnitError(
                f"{spec.name}={raw!r}: unit {unit!r} is not a valid {kind[0]} unit; "
                f"expected {accepted} (PostgreSQL manual 19.1.1)"
            )
        per = PG_MEMORY_UNITS[canon_unit] if kind[0] == "memory" else PG_TIME_UNITS[canon_unit]
        base = number * per / kind[1]
    else:
        base = number
    if not math.isfinite(base):  # 2e304 kB overflows to inf when converted (found by the fuzz test)
        raise UnitError(
            f"{spec.name}={raw!r}: too large to represent in {spec.unit or 'its unit'}; expected {accepted}", "range"
        )
    warnings: list[str] = []
    if spec.vartype == "integer" and base != round(base):
        rounded = float(round(base))
        warnings.append(f"{spec.name}={raw!r} rounded to {rounded:g} {spec.unit or ''} (integer parameter)")
        base = rounded
    return Parsed(format_pg(spec, base), base, tuple(warnings))


def format_pg(spec: KnobSpec, base: float) -> str:
    """Canonical spelling of ``base`` (in ``spec.unit``): the largest unit that represents it exactly.

    ``shared_buffers`` (unit 8kB) 65536 → "512MB"; ``work_mem`` (kB) 655 → "655kB";
    ``checkpoint_timeout`` (s) 300 → "5min"; values ≤ 0 (PostgreSQL's "-1 = default" markers) and
    unit-less values are written as plain numbers.
    """
    kind = _pg_unit_kind(spec.unit)
    if kind is None or base <= 0:
        return _plain(base)
    if kind[0] == "memory":
        total = base * kind[1]
        if not math.isfinite(total):  # 2e304 pages of 8kB: no unit spells it; the range check refuses it
            return _plain(base)
        if total == int(total):
            total_i = int(total)
            for name in ("TB", "GB", "MB", "kB"):
                size = PG_MEMORY_UNITS[name]
                if total_i % size == 0:
                    return f"{total_i // size}{name}"
            return f"{total_i}B"
        return f"{_plain(base)}{spec.unit}"
    micro = base * kind[1] * 1000
    if not math.isfinite(micro):  # as above, for times: left to the range check
        return _plain(base)
    if abs(micro - round(micro)) < 1e-6:
        micro_i = round(micro)
        for name in ("d", "h", "min", "s", "ms", "us"):
            size = round(PG_TIME_UNITS[name] * 1000)
            if micro_i % size == 0:
                return f"{micro_i // size}{name}"
    return f"{_plain(base)}{spec.unit}"


def _plain(x: float) -> str:
    return str(int(x)) if x == int(x) else repr(x)


def _pg_bool(spec: KnobSpec, raw: str | int | float | bool) -> str:
    if isinstance(raw, bool):
        return "on" if raw else "off"
    s = str(raw).strip().lower()
    if s in _PG_TRUE:
        return "on"
    if s in _PG_FALSE:
        return "off"
    raise UnitError(f"{spec.name}={raw!r}: not a boolean; expected on/off (also true/false, yes/no, 1/0)", "type")


def _enum(spec: KnobSpec, raw: str | int | float | bool, *, pg_bools: bool = False) -> str:
    values = spec.enum_values or []
    lowered = {v.lower(): v for v in values}
    if isinstance(raw, bool):
        raw = "on" if raw else "off"
    s = str(raw).strip().lower()
    if s in lowered:
        return lowered[s]
    # PostgreSQL enums such as synchronous_commit accept the boolean spellings as hidden values.
    if pg_bools and "on" in lowered and "off" in lowered:
        if s in _PG_TRUE:
            return lowered["on"]
        if s in _PG_FALSE:
            return lowered["off"]
    raise UnitError(f"{spec.name}={raw!r}: not one of the values the server accepts: {', '.join(values)}", "enum")


def parse_pg_value(spec: KnobSpec, raw: str | int | float | bool) -> tuple[str, float | None]:
    """Parse a PostgreSQL parameter value into ``(canonical, base_value)``.

    Accepts "512M", "655KB", "4 gb", 200, "10s", "1min", True, "on", … Memory units are accepted
    case-insensitively with the shorthands K/M/G/T (PostgreSQL itself only accepts B, kB, MB, GB, TB
    case-sensitively — manual 19.1.1 "Parameter Names and Values"); time units us, ms, s, min, h, d.
    A number without a unit is in the knob's base unit (``spec.unit``, e.g. 8kB pages for shared_buffers).

    Returns:
        canonical: the spelling to write, the largest unit that represents the value exactly
            ("512MB", "655kB", "4GB", "5min", "on", the server's enum spelling);
        base_value: the number in ``spec.unit`` (shared_buffers "512MB" → 65536.0 pages) or None for
            bool/enum/string knobs.

    Raises:
        UnitError: unknown unit, unit on a unit-less knob, non-numeric text, not a boolean, or not one of
            the enum values; the message names parameter, value and what is accepted.
    """
    p = pg_parse(spec, raw)
    return p.canonical, p.base_value


# ---------------------------------------------------------------- MySQL / MariaDB


def _check_mysql_max(spec: KnobSpec, raw: object, value: int, accepted: str) -> None:
    """Raise UnitError ("range") for an integer too large for a float (found by
    tests/test_fuzz_validator.py: '20E304K' overflowed float()); smaller values meet the server's max
    in the range check."""
    try:
        float(value)
    except OverflowError:
        raise UnitError(
            f"{spec.name}={raw!r}: a {len(str(abs(value)))}-digit number is far beyond the largest value a "
            f"server variable holds (2^64 - 1); expected {accepted}",
            "range",
        ) from None


def mysql_parse(spec: KnobSpec, raw: str | int | float | bool) -> Parsed:
    """Normalise a MySQL/MariaDB value. See :func:`parse_mysql_value`."""
    if spec.vartype == "bool":
        if isinstance(raw, bool):
            return Parsed("ON" if raw else "OFF", None)
        flag = bool_of(str(raw))
        if flag is not None:
            return Parsed("ON" if flag else "OFF", None)
        raise UnitError(f"{spec.name}={raw!r}: not a boolean; expected ON or OFF (also 1/0, TRUE/FALSE)", "type")
    if spec.vartype == "enum":
        return Parsed(_enum(spec, raw), None)
    if spec.vartype == "string":
        return Parsed(str(raw), None)
    accepted = "an integer number of bytes/units, optionally with suffix K, M, G, T (powers of 1024)"
    if spec.vartype == "real":
        accepted = "a decimal number"
    number, suffix = _split_number(spec, raw, accepted)
    if suffix.lower() not in _MYSQL_SUFFIX:
        raise UnitError(f"{spec.name}={raw!r}: suffix {suffix!r} is not valid; expected {accepted}")
    if spec.vartype == "real":
        if suffix:
            raise UnitError(f"{spec.name}={raw!r}: a decimal parameter takes no suffix; expected {accepted}")
        return Parsed(_plain(number), number)
    if number != int(number):
        raise UnitError(f"{spec.name}={raw!r}: the server accepts only whole numbers here; expected {accepted}", "type")
    value = int(number) * _MYSQL_SUFFIX[suffix.lower()]
    _check_mysql_max(spec, raw, value, accepted)
    warnings: tuple[str, ...] = ()
    if spec.block_size and spec.block_size > 1 and value % spec.block_size:
        rounded = value - value % spec.block_size
        warnings = (
            f"{spec.name}={raw!r} is not a multiple of the server's block size {spec.block_size}; "
            f"the server rounds it down to {rounded}",
        )
        value = rounded
    return Parsed(str(value), float(value), warnings)


def parse_mysql_value(spec: KnobSpec, raw: str | int | float | bool) -> tuple[str, float | None]:
    """Parse a MySQL/MariaDB system variable value into ``(canonical, base_value)``.

    Sizes: bytes, or a number with suffix K/M/G/T/P/E (case-insensitive, ×1024 each; MariaDB KB
    "Server System Variables"); canonical is the byte count ("2G" → "2147483648", base 2147483648.0).
    Values off the variable's ``block_size`` are rounded down (a warning in :func:`mysql_parse`, not an
    error). Booleans → "ON"/"OFF"; enums → the server's spelling.

    Raises:
        UnitError: bad suffix, fractional integer, not a boolean, not an enum value.
    """
    p = mysql_parse(spec, raw)
    return p.canonical, p.base_value


# ---------------------------------------------------------------- Linux


def linux_parse(spec: KnobSpec, raw: str | int | float | bool) -> Parsed:
    """Normalise a sysctl or block-queue value: integers as decimal strings, enums (the I/O scheduler)
    as listed by the kernel, strings with whitespace collapsed (multi-value sysctls like tcp_rmem).

    Raises:
        UnitError: not an integer, or not one of the names the kernel lists.
    """
    if spec.vartype == "enum":
        return Parsed(_enum(spec, raw), None)
    if spec.vartype == "string":
        return Parsed(" ".join(str(raw).split()), None)
    accepted = "an integer" + (f" in {spec.unit}" if spec.unit else "")
    number, unit = _split_number(spec, raw, accepted)
    if unit:
        raise UnitError(
            f"{spec.name}={raw!r}: kernel parameters take plain numbers, not unit {unit!r}; expected {accepted}"
        )
    if spec.vartype != "real" and number != int(number):
        raise UnitError(f"{spec.name}={raw!r}: not a whole number; expected {accepted}", "type")
    return Parsed(_plain(number), number)


def readable(family: str, spec: KnobSpec, base: float) -> str:
    """A human spelling of ``base`` (in ``spec.unit``) for messages: "16TB", "2147483647 (2GiB)"."""
    return _dialect(family).readable(spec, base)


def quantity(family: str, spec: KnobSpec, base: float) -> float:
    """``base`` converted to a dimension-wide unit (bytes for memory, ms for time) so knobs with different
    base units compare (work_mem in kB against shared_buffers in 8kB pages)."""
    return _dialect(family).quantity(spec, base)


def bytes_of(family: str, spec: KnobSpec, base: float) -> float | None:
    """``base`` in bytes when ``spec`` is a memory knob (PostgreSQL memory units, MySQL "B"), else None."""
    return _dialect(family).bytes_of(spec, base)


# ---------------------------------------------------------------- dialects


class Dialect:
    """How one family of targets spells and sizes values; one instance per family in :data:`DIALECTS`."""

    family: ClassVar[str] = ""

    def parse(self, spec: KnobSpec, raw: str | int | float | bool) -> Parsed:
        """Normalise ``raw`` (see :func:`pg_parse`, :func:`mysql_parse`, :func:`linux_parse`).

        Raises:
            UnitError: the value cannot be written in the target's canonical form.
        """
        raise NotImplementedError

    def readable(self, spec: KnobSpec, base: float) -> str:
        """A human spelling of ``base`` (in ``spec.unit``) for messages."""
        return _plain(base)

    def quantity(self, spec: KnobSpec, base: float) -> float:
        """``base`` in a dimension-wide unit (bytes, ms) where the dialect has unit-scaled knobs."""
        return base

    def bytes_of(self, spec: KnobSpec, base: float) -> float | None:
        """``base`` in bytes for a memory knob, else None."""
        return None

    def proposal_value(self, spec: KnobSpec, base: float) -> str | int | float:
        """``base`` written the way the validator accepts it in a proposal (integers by default)."""
        return int(round(base))


class PostgresDialect(Dialect):
    """PostgreSQL: unit-scaled base units (8kB pages, kB, ms, s); canonical "512MB", "5min"."""

    family = "postgresql"

    def parse(self, spec: KnobSpec, raw: str | int | float | bool) -> Parsed:
        return pg_parse(spec, raw)

    def readable(self, spec: KnobSpec, base: float) -> str:
        return format_pg(spec, base)

    def quantity(self, spec: KnobSpec, base: float) -> float:
        kind = _pg_unit_kind(spec.unit)
        return base * kind[1] if kind is not None and base > 0 else base

    def bytes_of(self, spec: KnobSpec, base: float) -> float | None:
        kind = _pg_unit_kind(spec.unit)
        return base * kind[1] if kind and kind[0] == "memory" else None

    def proposal_value(self, spec: KnobSpec, base: float) -> str | int | float:
        """Sizes as "512MB" (whole kB at least), times as "15min"/"30s"/"200ms"."""
        ub, ums = unit_bytes(spec.unit), unit_ms(spec.unit)
        if ub:
            nbytes = int(round(base)) * ub
            for suffix, size in (("TB", 2**40), ("GB", 2**30), ("MB", 2**20), ("kB", 1024)):
                if nbytes >= size and nbytes % size == 0:
                    return f"{nbytes // size}{suffix}"
            return f"{nbytes // 1024}kB"
        if ums:
            ms = int(round(base * ums))
            for suffix, size in (("min", 60000), ("s", 1000)):
                if ms >= size and ms % size == 0:
                    return f"{ms // size}{suffix}"
            return f"{ms}ms"
        return int(round(base))


class MySQLDialect(Dialect):
    """MySQL and MariaDB: sizes in bytes (K/M/G suffixes on input), booleans ON/OFF."""

    family = "mysql"

    def parse(self, spec: KnobSpec, raw: str | int | float | bool) -> Parsed:
        return mysql_parse(spec, raw)

    def readable(self, spec: KnobSpec, base: float) -> str:
        if spec.vartype == "integer" and base >= 1024 and base == int(base):
            for name, size in (("E", 1024**6), ("P", 1024**5), ("T", 1024**4), ("G", 1024**3), ("M", 1024**2)):
                if base >= size:
                    return f"{_plain(base)} ({base / size:.4g}{name})"
            return f"{_plain(base)} ({base / 1024:.4g}K)"
        return _plain(base)

    def bytes_of(self, spec: KnobSpec, base: float) -> float | None:
        return base


class LinuxDialect(Dialect):
    """sysctl and /sys/block values: plain integers (the unit is the catalog's), enums as listed."""

    family = "linux"

    def parse(self, spec: KnobSpec, raw: str | int | float | bool) -> Parsed:
        return linux_parse(spec, raw)

    def readable(self, spec: KnobSpec, base: float) -> str:
        return _plain(base) + (f" {spec.unit}" if spec.unit else "")


DIALECTS: dict[str, Dialect] = {d.family: d for d in (PostgresDialect(), MySQLDialect(), LinuxDialect())}
"""The value dialect of each family (:func:`family_of`)."""


def dialect_of(target: str) -> Dialect:
    """The value dialect of a catalog ``target`` ("postgresql", "mariadb", "mysql", "linux").

    Raises:
        ValueError: unknown target (see :func:`family_of`).
    """
    return DIALECTS[family_of(target)]


# ---------------------------------------------------------------- base-unit arithmetic (the planner's)


def unit_bytes(unit: str | None) -> int | None:
    """Bytes per base unit for size knobs ("8kB" → 8192, "kB" → 1024, "16kB", "MB", "B"), else None."""
    m = re.fullmatch(r"(\d*)\s*([A-Za-z]+)", unit or "")
    per = SIZE_SUFFIX_BYTES.get(m.group(2).lower()) if m else None
    return None if m is None or per is None else int(m.group(1) or 1) * per


def unit_ms(unit: str | None) -> float | None:
    """Milliseconds per base unit for time knobs ("ms", "s", "min"), else None."""
    return PG_TIME_UNITS.get(unit) if unit else None


def parse_value(raw: str | int | float | bool | None, spec: KnobSpec) -> float | None:
    """Numeric value of ``raw`` in ``spec``'s base unit, or None for non-numeric knobs/values.

    Accepts bare numbers (already in base unit, as PostgreSQL and MySQL read them) and a number with
    a size or time suffix ("128MB", "4GB", "200ms", "5min", "1G").
    """
    if raw is None or isinstance(raw, bool) or spec.vartype not in ("integer", "real"):
        return None
    if isinstance(raw, int | float):
        return float(raw)
    m = _NUM_UNIT.match(str(raw))
    if not m:
        return None
    num, suffix = float(m.group(1)), m.group(2)
    if not suffix:
        return num
    per_byte, per_ms = unit_bytes(spec.unit), unit_ms(spec.unit)
    if suffix.lower() in SIZE_SUFFIX_BYTES and per_byte:
        return num * SIZE_SUFFIX_BYTES[suffix.lower()] / per_byte
    if suffix in PG_TIME_UNITS and per_ms:
        return num * PG_TIME_UNITS[suffix] / per_ms
    return None


def bool_of(text: str) -> bool | None:
    """True/False for a boolean spelling every target accepts (on/off, true/false, yes/no, 1/0), else None."""
    low = text.strip().lower()
    return True if low in TRUE_WORDS else False if low in FALSE_WORDS else None


def canonical(name: str, raw: str | int | float | bool, spec: KnobSpec | None) -> tuple[str, str]:
    """Comparable identity of a change: (name, value in base unit or lower-cased text).

    Used so that "512MB", "524288kB" and 65536 (8kB pages) count as the same shared_buffers change.
    """
    if spec is not None:
        num = parse_value(raw, spec)
        if num is not None:
            return name, f"{num:.6g}"
        if spec.vartype == "bool":
            text = str(raw).strip().lower()
            flag = bool_of(text)
            return name, text if flag is None else ("on" if flag else "off")
    return name, str(raw).strip().lower()


def format_value(base: float, spec: KnobSpec, family: str) -> str | int | float:
    """Write ``base`` (in ``spec``'s base unit) the way the validator expects for ``family``."""
    if spec.vartype == "real":
        return round(base, 3)
    return dialect_of(family).proposal_value(spec, base)
