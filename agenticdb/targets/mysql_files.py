"""MySQL/MariaDB files and spellings outside the server: DSNs, option-file sizes, the managed option file.

The managed option file (``target.option_file``) holds the knobs agenticdb applied under ``[mysqld]``
(read by MySQL and MariaDB servers alike, never a client section); snapshots restore it byte for byte.
Sources: MariaDB KB "Configuring MariaDB with Option Files", "mariadbd Options" (dashes and underscores
name the same option); MySQL 8.0 manual 4.2.2.2 "Using Option Files".
"""

from __future__ import annotations

import configparser
import io
import os
import re
import subprocess
from pathlib import Path

_SIZE_RE = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.I)
_SUFFIX = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}  # option-file suffixes are 1024-based
MANAGED_HEADER = "# Managed by agenticdb: knobs it applied. Edit with care; snapshots restore this file.\n"


def parse_size(value: str | int | float) -> int:
    """Integer from "512M", "4G", "1048576" (1024-based suffixes, as in option files).

    Raises:
        ValueError: not an integer with an optional K/M/G/T suffix.
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    m = _SIZE_RE.match(str(value))
    if not m:
        raise ValueError(f"{value!r}: expected an integer with an optional K/M/G/T suffix")
    return int(m.group(1)) * _SUFFIX[m.group(2).lower()]


def defaults_value(defaults_file: str, key: str) -> str | None:
    """Value of ``--key`` as mariadbd would read it (my_print_defaults follows !include)."""
    for tool in ("my_print_defaults", "mariadb-print-defaults"):
        try:
            out = subprocess.run(
                [tool, f"--defaults-file={defaults_file}", "mysqld", "mariadbd", "server"],
                capture_output=True,
                text=True,
                timeout=10,
                start_new_session=True,  # out of reach of a terminal's Ctrl-C (workloads.common._started)
            ).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        found = None
        for line in out.splitlines():
            if line.startswith(f"--{key}="):
                found = line.split("=", 1)[1]
        return found
    return None


def read_option_file(path: Path | None) -> configparser.ConfigParser:
    """The option file parsed as mariadbd reads it (``[mysqld]`` always present; absent file = empty)."""
    parser = configparser.ConfigParser(
        allow_no_value=True,
        strict=False,
        interpolation=None,
        delimiters=("=",),
        comment_prefixes=("#", ";"),
    )
    parser.optionxform = _option_name  # type: ignore[method-assign,assignment]
    if path and path.exists():
        parser.read_string(path.read_text())
    if not parser.has_section("mysqld"):
        parser.add_section("mysqld")
    return parser


def write_option_file(path: Path, settings: dict[str, str]) -> None:
    """Set ``settings`` (server variable → value) under ``[mysqld]`` of the managed option file, atomically."""
    parser = read_option_file(path)
    for name, value in settings.items():
        parser.set("mysqld", name, value)
    buf = io.StringIO()
    parser.write(buf)
    write_atomic(path, MANAGED_HEADER + buf.getvalue())


def _option_name(name: str) -> str:
    """Option-file keys: dashes and underscores are the same option (MariaDB KB "mariadbd Options")."""
    return name.strip().replace("-", "_")


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` by rename, keeping the old file's mode and owner (the server must read it)."""
    tmp = path.with_name(path.name + ".agenticdb-tmp")
    tmp.write_text(text)
    if path.exists():
        st = path.stat()
        os.chmod(tmp, st.st_mode & 0o7777)
        try:
            os.chown(tmp, st.st_uid, st.st_gid)
        except PermissionError:
            pass
    tmp.replace(path)


def restore_file(path: Path, content: str | None) -> None:
    if content is None:
        path.unlink(missing_ok=True)
    else:
        write_atomic(path, content)
