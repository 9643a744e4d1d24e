"""Which variables a MySQL/MariaDB server accepts in an option file, from the server's own help.

``SET GLOBAL`` accepts variables that have no option-file form (``sql_buffer_result``, ``sql_log_off``,
``profiling``, …); written into the managed ``[mysqld]`` file they make the next start abort with
"unknown variable" (51cto.com article 762739). The server binary lists every option it accepts in
``mysqld --no-defaults --help --verbose`` (MariaDB KB "mariadbd Options"; MySQL 8.0 manual 5.1.7 "Server
Command Options"): lines ``  --name[=#]`` or ``  -x, --name`` in the options part, and the
"Variables (--variable-name=value)" table. Dashes and underscores are the same option.

The help is read once per server version and cached under ``<agenticdb home>/cache/mysqld-options/``
(one name a line, lower case, underscores). The binary is used only when its own version line matches
the running server's ``VERSION()``; otherwise (a remote server, another build) the caller falls back to
the shipped list in catalogs/mariadb.toml ``[runtime_only]``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

_OPTION = re.compile(r"^ {2}(?:-[A-Za-z#?], )?--([A-Za-z0-9][A-Za-z0-9_-]*)")
_VERSION = re.compile(r"\bVer\s+(\S+)")
_TABLE = "Variables (--variable-name=value)"
HELP_TIMEOUT_S = 60


def parse_help(text: str) -> frozenset[str]:
    """Option names (lower case, ``-`` → ``_``) listed by ``mysqld --help --verbose``.

    Raises:
        ValueError: the text has no option lines (not a verbose help output).
    """
    names: set[str] = set()
    head, _, table = text.partition(_TABLE)
    for line in head.splitlines():
        m = _OPTION.match(line)
        if m:
            names.add(_norm(m.group(1)))
    for line in table.splitlines()[3:]:
        if not line.strip():
            break
        names.add(_norm(line.split()[0]))
    if not names:
        raise ValueError("no '--option' lines: not the output of mysqld --help --verbose")
    return frozenset(names)


def _norm(name: str) -> str:
    return name.strip().lower().replace("-", "_")


def binary_version(text: str) -> str | None:
    """The version a help or ``--version`` text states ("10.11.19-MariaDB-0+deb12u1"), or None."""
    m = _VERSION.search(text)
    return m.group(1) if m else None


def find_binary(bindir: str | None = None) -> Path | None:
    """``mariadbd``/``mysqld`` in ``bindir`` (the service's), else on PATH or in /usr/sbin."""
    dirs = [Path(bindir)] if bindir else []
    for directory in dirs:
        for name in ("mariadbd", "mysqld"):
            if (directory / name).is_file():
                return directory / name
    for name in ("mariadbd", "mysqld"):
        found = shutil.which(name) or (f"/usr/sbin/{name}" if Path(f"/usr/sbin/{name}").is_file() else None)
        if found:
            return Path(found)
    return None


def _cache_file(cache_dir: Path, version: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._+-]", "_", version)
    return cache_dir / "mysqld-options" / f"{safe}.txt"


def option_names(server_version: str, cache_dir: Path | None, binary: Path | None) -> frozenset[str] | None:
    """The option-file names of the server whose ``VERSION()`` is ``server_version``.

    Read from the cache when present; else run ``binary --no-defaults --help --verbose`` (only when the
    binary reports the same version) and cache the result. Returns None when neither is possible; the
    caller then uses the shipped list. Never raises: a failing help run is logged.
    """
    cached = _cache_file(cache_dir, server_version) if cache_dir is not None else None
    if cached is not None and cached.is_file():
        names = frozenset(n for n in cached.read_text().splitlines() if n and not n.startswith("#"))
        if names:
            return names
    if binary is None:
        log.info("mysql.options_unknown", version=server_version, reason="no mysqld/mariadbd binary here")
        return None
    try:
        out = subprocess.run(
            [str(binary), "--no-defaults", "--help", "--verbose"],
            capture_output=True,
            text=True,
            timeout=HELP_TIMEOUT_S,
            check=False,
            start_new_session=True,  # out of reach of a terminal's Ctrl-C (workloads.common._started)
        ).stdout
        names = parse_help(out)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        log.warning("mysql.options_unknown", version=server_version, binary=str(binary), reason=str(exc))
        return None
    if binary_version(out) != server_version:
        log.info(
            "mysql.options_unknown",
            version=server_version,
            binary=str(binary),
            reason=f"the binary is version {binary_version(out)}, not the running server's",
        )
        return None
    if cached is not None:
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            header = f"# option-file names of {server_version}: {binary} --no-defaults --help --verbose\n"
            cached.write_text(header + "\n".join(sorted(names)) + "\n")
        except OSError as exc:
            log.warning("mysql.options_cache_unwritable", path=str(cached), reason=str(exc))
    log.info("mysql.options_read", version=server_version, binary=str(binary), options=len(names))
    return names
