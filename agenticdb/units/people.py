"""Values spelled for people: what advice prints, in the spelling a DBA reads and writes in the server's
own configuration, and back to what ``SET`` takes.

MySQL/MariaDB byte sizes are written with the largest K/M/G/T suffix that keeps them whole
("134217728" → "128M"): the option-file spelling (MariaDB KB "Configuring MariaDB with Option Files",
"Server System Variables": suffixes K, M, G, T, P, E, powers of 1024). ``SET`` takes no suffix (MySQL 8.0
manual 5.1.9: suffixes "can be used when setting a variable at server startup, but not to set the value
with SET at runtime"; MariaDB 10.11 answers error 1232), so :func:`mysql_set_number` turns one back into
its byte count. PostgreSQL's canonical spelling already carries its unit ("128MB") and stays as it is.
"""

from __future__ import annotations

import re

from agenticdb.dialect import family_of
from agenticdb.models import KnobSpec
from agenticdb.units import parse_value

_SUFFIXES = (("T", 1024**4), ("G", 1024**3), ("M", 1024**2), ("K", 1024))
_SIZE = re.compile(r"^\s*(\d+)\s*([KMGTPE])\s*$", re.I)
_POWER = {"K": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}


def for_people(family: str, spec: KnobSpec, raw: str | int | float | None) -> str:
    """``raw`` as a DBA writes it in the configuration of ``family``'s server ("" for None): a MySQL/MariaDB
    byte size (unit "B") with the largest suffix that keeps it whole ("12052M", "1G"); anything else as
    given. Not for ``SET`` (:func:`mysql_set_number`)."""
    if raw is None:
        return ""
    base = parse_value(raw, spec)
    if family_of(family) != "mysql" or spec.unit != "B" or spec.vartype != "integer" or base is None:
        return str(raw)
    if base != int(base) or base < 1024:
        return str(raw)
    n = int(base)
    return next((f"{n // size}{name}" for name, size in _SUFFIXES if n % size == 0), str(raw))


def mysql_set_number(text: str) -> str:
    """A MySQL/MariaDB size with a K/M/G/T/P/E suffix as its byte count ("12052M" → "12637437952"), for
    ``SET GLOBAL``/``SET PERSIST``; any other text unchanged."""
    m = _SIZE.match(text)
    return str(int(m.group(1)) * 1024 ** _POWER[m.group(2).upper()]) if m else text
