"""The one comparison of two spellings of a parameter value (:func:`values_equal`: verify, revert checks,
rival detection, rollback) and its numeric tolerance. Parsing and spelling values is :mod:`agenticdb.units`."""

from __future__ import annotations

import re

from agenticdb.models import KnobSpec
from agenticdb.units import UnitError, bool_of, normalize

_INTEGER = re.compile(r"^[+-]?\d+$")

#: Relative tolerance for two numeric spellings to count as the same value (floats read back from a
#: server or /proc may carry representation noise; PostgreSQL verify used 1e-6 as well).
NUMERIC_TOLERANCE = 1e-6


def numbers_equal(a: float, b: float) -> bool:
    """True when ``a`` and ``b`` agree within :data:`NUMERIC_TOLERANCE` (relative; 1e-9 absolute near 0)."""
    return abs(a - b) <= max(1e-9, NUMERIC_TOLERANCE * max(abs(a), abs(b)))


def values_equal(expected: str, actual: str, spec: KnobSpec | None = None, family: str | None = None) -> bool:
    """The one comparison of two spellings of a parameter value.

    With ``spec`` and ``family`` both values are first normalised in that dialect, so "128MB" and
    "131072kB" (or 16384 pages of 8kB) are the same shared_buffers; a value that does not normalise
    is different. Without them:

    Equal when the texts match ignoring case, surrounding whitespace and single quotes ("ON"/"on",
    "'UTC'"/"UTC"); or both are integers of the same value ("08"/"8"); or both are numbers, one not an
    integer, within :data:`NUMERIC_TOLERANCE` ("0.1"/"0.10000001", "8"/"8.0");
    or both are boolean spellings of the same truth value ("on"/"true"/"1"). Unit-bearing spellings
    ("128MB" against "131072kB") are not converted: each target reads values back in one canonical
    spelling, so a snapshot and a later read agree textually.
    """
    if spec is not None and family is not None:
        try:
            pe, pa = normalize(family, spec, expected), normalize(family, spec, actual)
        except UnitError:
            return False
        if pe.base_value is not None and pa.base_value is not None:
            return pe.base_value == pa.base_value
        return pe.canonical.strip().lower() == pa.canonical.strip().lower()
    a, b = str(expected).strip().strip("'").lower(), str(actual).strip().strip("'").lower()
    if a == b:
        return True
    if _INTEGER.match(a) and _INTEGER.match(b):
        return int(a) == int(b)  # sizes in bytes: a tolerance would hide a rounding the server did
    try:
        return numbers_equal(float(a), float(b))
    except ValueError:
        pass
    x, y = bool_of(a), bool_of(b)
    return x is not None and x == y
