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
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

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
_MYSQL_TRUE = {"on", "true", "1", "yes"}
_MYSQL_FALSE = {"off", "false", "0", "no"}


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


def family_of(target: str) -> str:
    """Map a catalog ``target`` ("postgresql", "mariadb", "mysql", "linux", …) to a value dialect.

    Returns "postgresql", "mysql" (MySQL and MariaDB share the spelling) or "linux".

    Raises:
        ValueError: the target is none of those.
    """
    t = target.lower()
    if t.startswith("postgres") or t.startswith("pg"):
        return "postgresql"
    if "maria" in t or "mysql" in t:
        return "mysql"
    if t.startswith("linux") or t == "os":
        return "linux"
    raise ValueError(f"target {target!r}: unknown dialect (expected postgresql, mariadb, mysql or linux)")


def normalize(family: str, spec: KnobSpec, raw: str | int | float | bool) -> Parsed:
    """Normalise ``raw`` for ``spec`` in the dialect ``family`` (see :func:`family_of`).

    Raises:
        UnitError: the value cannot be written in the target's canonical form.
    """
    if family == "postgresql":
        return pg_parse(spec, raw)
    if family == "mysql":
        return mysql_parse(spec, raw)
    return linux_parse(spec, raw)


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
        if total == int(total):
            total_i = int(total)
            for name in ("TB", "GB", "MB", "kB"):
                size = PG_MEMORY_UNITS[name]
                if total_i % size == 0:
                    return f"{total_i // size}{name}"
            return f"{total_i}B"
        return f"{_plain(base)}{spec.unit}"
    micro = base * kind[1] * 1000
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


def mysql_parse(spec: KnobSpec, raw: str | int | float | bool) -> Parsed:
    """Normalise a MySQL/MariaDB value. See :func:`parse_mysql_value`."""
    if spec.vartype == "bool":
        if isinstance(raw, bool):
            return Parsed("ON" if raw else "OFF", None)
        s = str(raw).strip().lower()
        if s in _MYSQL_TRUE:
            return Parsed("ON", None)
        if s in _MYSQL_FALSE:
            return Parsed("OFF", None)
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
    if family == "postgresql":
        return format_pg(spec, base)
    if family == "mysql" and spec.vartype == "integer" and base >= 1024 and base == int(base):
        for name, size in (
            ("E", 1024**6),
            ("P", 1024**5),
            ("T", 1024**4),
            ("G", 1024**3),
            ("M", 1024**2),
            ("K", 1024),
        ):
            if base >= size:
                return f"{_plain(base)} ({base / size:.4g}{name})"
    return _plain(base) + (f" {spec.unit}" if spec.unit and family == "linux" else "")


def quantity(family: str, spec: KnobSpec, base: float) -> float:
    """``base`` converted to a dimension-wide unit (bytes for memory, ms for time) so knobs with different
    base units compare (work_mem in kB against shared_buffers in 8kB pages)."""
    if family == "postgresql":
        kind = _pg_unit_kind(spec.unit)
        if kind is not None and base > 0:
            return base * kind[1]
    return base


def bytes_of(family: str, spec: KnobSpec, base: float) -> float | None:
    """``base`` in bytes when ``spec`` is a memory knob (PostgreSQL memory units, MySQL "B"), else None."""
    if family == "postgresql":
        kind = _pg_unit_kind(spec.unit)
        return base * kind[1] if kind and kind[0] == "memory" else None
    if family == "mysql":
        return base
    return None
