"""Change files of ``validate``, ``tune --start-from`` and ``apply``: a TOML or JSON table of name = value."""

from __future__ import annotations

import datetime
import json
import re
import tomllib
from pathlib import Path
from typing import Any


class ChangeFileError(ValueError):
    """A change file that cannot be read as name = value; the message names the file and the reason."""


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """TOML dotted keys (``vm.dirty_ratio = 10``, ``block.vda.read_ahead_kb = 128``) parse as nested
    tables; join them back into the parameter's dotted name."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            out.update(_flatten(value, name))
        else:
            out[name] = value
    return out


_UNQUOTED_UNIT = re.compile(r"^\s*([\w.\"']+)\s*=\s*(-?\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*(?:#.*)?$", re.M)


_UNQUOTED_WORD = re.compile(r"^\s*([\w.\"']+)\s*=\s*([A-Za-z_][\w,\-$ ]*?)\s*(?:#.*)?$", re.M)


def _toml_hint(text: str) -> str:
    """A hint for the commonest TOML traps in change files (postgresql.conf habits): a number with a unit
    or a word value left unquoted."""
    m = _UNQUOTED_UNIT.search(text)
    if m is not None and m.group(3).lower() not in ("true", "false", "inf", "nan"):
        name, num, unit = m.groups()
        return f'; hint: values with units must be quoted: {name} = "{num}{unit}"'
    w = _UNQUOTED_WORD.search(text)
    if w is not None and w.group(2).lower() not in ("true", "false", "inf", "nan"):
        name, word = w.groups()
        return f'; hint: words must be quoted (this is TOML, not postgresql.conf): {name} = "{word}"'
    return ""


def _config_sections(data: dict[str, Any]) -> list[str]:
    """The top-level tables of ``data`` that read as agenticdb configuration sections (``[loop]``, ``[target]``,
    ``[workload]``, ``[policy]``, … of :class:`agenticdb.config.Settings`, holding at least one of that
    section's own keys), in file order; [] for a change file. A new user gave ``configs/bad/unknown-key.toml``
    to ``validate`` and read "loop.max_rounds=5: unknown parameter on postgresql 15.20"."""
    from agenticdb.config import Settings  # lazy: only a file with tables asks

    out = []
    for name, table in data.items():
        field = Settings.model_fields.get(name)
        model = getattr(field, "annotation", None) if field is not None else None
        known = getattr(model, "model_fields", {})
        if isinstance(table, dict) and any(k in known for k in table):
            out.append(name)
    return out


def parse_change_file(path: Path) -> dict[str, Any]:
    """A change file: TOML or JSON object of name = value (a `[changes]` table is also accepted).
    Dotted names may be written bare (``vm.swappiness = 10``) or quoted (``"vm.swappiness" = 10``).

    Raises:
        ChangeFileError: one line naming the file and the reason, when the file is missing, not UTF-8, a directory, not
    valid TOML/JSON (with a hint for unquoted sizes such as ``work_mem = 16MB``) or not name = value.
    """
    text = ""
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except FileNotFoundError:
        raise ChangeFileError(f"change file {path} does not exist") from None
    except IsADirectoryError:
        raise ChangeFileError(f"change file {path} is a directory, not a TOML/JSON file") from None
    except UnicodeDecodeError as exc:
        raise ChangeFileError(f"change file {path} is not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    except (OSError, ValueError) as exc:
        raise ChangeFileError(f"cannot read change file {path}: {exc}{_toml_hint(text)}") from None
    if not isinstance(data, dict):
        raise ChangeFileError(f"change file {path}: expected a table of name = value")
    if isinstance(data.get("changes"), dict):
        data = data["changes"]
    sections = _config_sections(data)
    if sections:
        raise ChangeFileError(
            f"{path} is an agenticdb configuration file ({', '.join(f'[{s}]' for s in sections)}), not a change "
            f"file of name = value: check it with `agenticdb validate-config {path}`, or give it to --config"
        )
    data = _flatten(data)
    bad = [k for k, v in data.items() if isinstance(v, (dict, list))]
    if bad:
        raise ChangeFileError(f"change file {path}: {bad[0]} must be a single value (name = value)")
    # TOML dates and times are not knob values (``work_mem = 2025-01-01``): say so, never a traceback
    dated = [k for k, v in data.items() if isinstance(v, (datetime.date, datetime.time))]
    if dated:
        raise ChangeFileError(
            f"change file {path}: {dated[0]} = {data[dated[0]]}: a TOML date/time is not a knob value"
        )
    if not data:
        raise ChangeFileError(f"change file {path}: no name = value in it, nothing to validate")
    return data
