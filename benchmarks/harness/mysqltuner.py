"""The real MySQLTuner as the MariaDB static peer: run it, parse "Variables to adjust", pick numbers.

MySQLTuner (Debian package ``mysqltuner``; Debian 12 ships 1.9.9) is run unmodified against the private
server. What it prints under "Variables to adjust" is parsed into ``Advice`` records; ``choose`` turns
them into values:

- an exact number (``innodb_log_file_size should be (=16M)``, ``key_buffer_size=0``,
  ``thread_cache_size (start at 4)``, ``key_buffer_size (~ 12K)``, ``long_query_time (<= 10)``) is
  applied as printed;
- a value that MySQLTuner states as a ratio of the buffer pool ("so InnoDB total log files size
  equals 25% of buffer pool size", its INTERNALS.md rule) follows the buffer pool that is set;
- a direction gets a number from a rule written here:
  * ``innodb_buffer_pool_size (>= DATA)`` → DATA, at most 75 % of the memory MySQLTuner was told
    (MySQLTuner's INTERNALS.md, /usr/share/doc/mysqltuner: "If possible, innodb_buffer_pool_size
    should be greater than data and index size", "around 75 to 80 % of the available system memory");
  * ``(> CURRENT)`` → twice the current value (the smallest clear step: the MySQL 8.0 manual warns for
    sort_buffer_size and join_buffer_size that a global value larger than needed slows queries down);
  * ``(< CURRENT)`` → half the current value;
  * ``between A and B`` → A;
  then every increase is cut to the largest value that agenticdb's validator accepts (memory budget)
  together with everything chosen before it — "if possible" read as "within the memory budget".
- anything else (ON/OFF switches such as ``performance_schema=ON``, free text) is listed, not applied.

Memory: MySQLTuner's "maximum possible memory usage" is global buffers + per-thread buffers ×
max_connections. In 1.9.9 the per-thread part is read_buffer + read_rnd_buffer + sort_buffer +
join_buffer + thread_stack + max_allowed_packet and tmp_table_size counts once, globally; since
MySQLTuner 2.x (upstream commit e6ee330, 2023-06-18) the per-thread part counts min(tmp_table_size,
max_heap_table_size) and binlog_cache_size instead of max_allowed_packet. The harness's earlier
MariaDB rule claimed that cutting sort_buffer_size to 256K kept that figure within RAM; by either
formula it did not (with MariaDB 10.11's 16M max_allowed_packet × 100 connections, 1.9.9 reports
~2.2G for a 512M server by default), so the claim is gone and the tool's own figure is reported.

One shim, for two divisions by zero that kill 1.9.9 ("Illegal division by zero") before it prints any
recommendation. The harness passes MySQLTuner a client wrapper through its own ``--mysqlcmd`` option that
hides exactly these rows of the server's answers (``HIDDEN_ROWS``); nothing else is changed:

- ``innodb_buffer_pool_chunk_size 0``: 1.9.9 divides by the chunk size, which MariaDB ≥ 10.8 reports as 0
  ("autosize") (fixed upstream in d04ba6a, 2025-05-14, which skips that check for chunk size 0). Hidden,
  1.9.9 takes its "chunk size not used" branch — the same outcome as the upstream fix.
- ``Innodb_log_writes 0``: its InnoDB log-waits line divides ``Innodb_log_waits`` by
  ``Innodb_log_writes`` (mysqltuner line 6099, right after its "Write Log efficiency" line), which is 0
  on a server that has written no redo log since it started: a read-only workload, or
  ``innodb_read_only`` (reproduced on a fresh MariaDB 10.11 with reads only, 2026-12-06:
  tests/data/mysqltuner/mariadb-10.11-no-log-writes-crash.txt). Hidden, 1.9.9 takes its "status not
  available" branch, which counts 1 request and 1 write: it then prints a spurious "[!!] InnoDB Write Log
  efficiency: 0% (0 hits/ 1 total)" and "[OK] InnoDB log waits: 0.00% (0 waits / 1 writes)", neither of
  which adds a variable to adjust (its code pushes advice only for log waits above 0). The report keeps
  those two lines as the tool printed them.

When MySQLTuner still ends before its recommendations (``TunerReport.complete`` False), the harness shows
the peer as "could not advise: <reason>" (``TunerReport.failure``), never as an empty configuration.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

MiB = 2**20
_UNITS = {"": 1, "B": 1, "K": 1024, "M": MiB, "G": 2**30, "T": 2**40}
POOL_MAX_FRACTION = 0.75
"""MySQLTuner INTERNALS.md: buffer pool "around 75 to 80 % of the available system memory" (lower end)."""


@dataclass(frozen=True)
class Advice:
    """One line of MySQLTuner's "Variables to adjust".

    Attributes:
        name: variable name as printed (lower case), "" when the line names none.
        relation: "=", ">=", ">", "<=", "<", "~", "between" or "text" (not understood as a value).
        value: the number or word printed ("800.0M", "16M", "ON", "4"), None for text.
        upper: upper bound of "between A and B".
        raw: the whole line.
    """

    name: str
    relation: str
    value: str | None
    raw: str
    upper: str | None = None


#: Rows of the server's answers the client shim hides (module docstring): "name<TAB>value" exactly.
HIDDEN_ROWS = ("innodb_buffer_pool_chunk_size\t0", "Innodb_log_writes\t0")


@dataclass
class TunerReport:
    """What one MySQLTuner run said."""

    version: str
    advice: list[Advice]
    warnings: list[str]
    max_memory: str | None
    complete: bool
    output: str
    exit_code: int = 0

    @property
    def label(self) -> str:
        return f"MySQLTuner {self.version} + rules"

    @property
    def failure(self) -> str:
        """Why the run gave no recommendations, or '' for a complete run: the tool's own error line
        (e.g. "Illegal division by zero at /usr/bin/mysqltuner line 6099") with the exit status."""
        if self.complete:
            return ""
        # Perl's die line, e.g. "Illegal division by zero at /usr/bin/mysqltuner line 6099." (not the
        # "(#1)" diagnostics copy, not the "called at" stack lines)
        errors = [
            line.strip().rstrip(".")
            for line in self.output.splitlines()
            if re.search(r" at /\S+ line \d+\.?\s*$", line) and "called at" not in line
        ]
        said = errors[0] if errors else "no error line printed"
        return f"{self.label.removesuffix(' + rules')} ended before its recommendations (exit {self.exit_code}): {said}"


_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("=", re.compile(r"^SET\s+(?P<name>\w+)\s*=\s*(?P<value>\S+)$", re.I)),
    ("between", re.compile(r"^(?P<name>\w+)\s+between\s+(?P<value>\d+)\s+and\s+(?P<upper>\d+)")),
    ("=", re.compile(r"^(?P<name>\w+)\s*\(start at (?P<value>\d+)\)")),
    # table_definition_cache(400) > 292 or -1 (autosizing if supported)
    (">", re.compile(r"^(?P<name>\w+)\s*\(\d+\)\s*>\s*(?P<value>\d+)")),
    ("op", re.compile(r"^(?P<name>\w+)\s*(?:should be\s*)?\(\s*(?P<op>>=|<=|=|>|<|\\?~)\s*(?P<value>[0-9.]+[KMGTB]?)")),
    ("=", re.compile(r"^(?P<name>[\w.]+)\s*=\s*(?P<value>[^\s(]+)$")),
]


def parse_line(line: str) -> Advice:
    """One "Variables to adjust" line → ``Advice`` (relation "text" when no pattern fits)."""
    text = line.strip()
    for relation, pat in _PATTERNS:
        m = pat.match(text)
        if not m:
            continue
        if relation == "op":
            relation = m.group("op").lstrip("\\")
        upper = m.group("upper") if "upper" in pat.groupindex else None
        return Advice(m.group("name").lower(), relation, m.group("value"), text, upper)
    first = re.match(r"^([a-z_]+)\b", text)
    return Advice(first.group(1) if first and "_" in first.group(1) else "", "text", None, text)


def parse(output: str, exit_code: int = 0) -> TunerReport:
    """Parse MySQLTuner's plain-text output (``--nocolor``).

    Returns:
        ``TunerReport``; ``complete`` is False when the run ended before its "Recommendations" section
        (then ``advice`` is empty).
    """
    version_m = re.search(r">>\s+MySQLTuner\s+(\S+)", output)
    mem_m = re.search(r"Maximum possible memory usage:\s*(.+)$", output, re.M)
    lines = output.splitlines()
    advice: list[Advice] = []
    warnings: list[str] = []
    complete = any(line.startswith("-------- Recommendations") for line in lines)
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "Variables to adjust:")
    except StopIteration:
        start = None
    if start is not None:
        for line in lines[start + 1 :]:
            if not line.startswith("  ") or not line.strip():
                break
            stripped = line.strip()
            if stripped.startswith("***"):
                warnings.append(stripped.strip("* ").strip())
            else:
                advice.append(parse_line(stripped))
    return TunerReport(
        version=version_m.group(1) if version_m else "unknown",
        advice=advice,
        warnings=warnings,
        max_memory=mem_m.group(1).strip() if mem_m else None,
        complete=complete,
        output=output,
        exit_code=exit_code,
    )


def version() -> str:
    """Version of the installed ``mysqltuner`` ("1.9.9"). Raises FileNotFoundError when absent."""
    exe = shutil.which("mysqltuner")
    if exe is None:
        raise FileNotFoundError("mysqltuner not found on PATH (Debian package mysqltuner; scripts/install.sh)")
    out = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60).stdout
    m = re.search(r"MySQLTuner\s+(\d[\w.]*)", out)
    return m.group(1) if m else "unknown"


def _client_shim(directory: str) -> str:
    client = shutil.which("mariadb") or shutil.which("mysql")
    if client is None:
        raise FileNotFoundError("neither mariadb nor mysql client found on PATH (Debian package mariadb-client)")
    path = Path(directory) / "mysql-client"
    # Hides only the HIDDEN_ROWS (module docstring); the client's exit status is kept.
    pattern = "|".join(row.replace("\t", "\\t") for row in HIDDEN_ROWS)
    path.write_text(
        f'#!/bin/bash\n\'{client}\' "$@" | grep -v -P \'^({pattern})$\'\ns=("${{PIPESTATUS[@]}}"); exit "${{s[0]}}"\n'
    )
    path.chmod(0o755)
    return str(path)


def run(
    port: int,
    memory_bytes: int,
    *,
    host: str = "127.0.0.1",
    user: str = "root",
    password: str = "",
    server_log: str | None = None,
    timeout_s: float = 600.0,
    shim: bool = True,
) -> TunerReport:
    """Run the installed MySQLTuner against ``host:port`` and parse its output.

    Args:
        port: TCP port of the server.
        memory_bytes: memory the server may use (cgroup limit); passed as ``--forcemem`` in MB, as a
            DBA does for a server whose memory is not the host's.
        server_log: the server's error log (``--server-log``), so the tool never reads another one.
        shim: pass the client shim (module docstring); False runs 1.9.9 exactly as shipped (the tests show
            the crashes the shim avoids).

    Raises:
        FileNotFoundError: mysqltuner or the client is not installed.
        subprocess.TimeoutExpired: the run took longer than ``timeout_s``.
    """
    exe = shutil.which("mysqltuner")
    if exe is None:
        raise FileNotFoundError("mysqltuner not found on PATH (Debian package mysqltuner; scripts/install.sh)")
    with tempfile.TemporaryDirectory(prefix="agb-mysqltuner-") as tmp:
        argv = [exe, "--host", host, "--port", str(port), "--user", user, "--forcemem", str(memory_bytes // MiB)]
        argv += ["--nocolor"] + (["--mysqlcmd", _client_shim(tmp)] if shim else [])
        env = dict(os.environ)
        if password:
            env["AGB_MYSQLTUNER_PASS"] = password
            argv += ["--passenv", "AGB_MYSQLTUNER_PASS"]
        if server_log:
            argv += ["--server-log", server_log]
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout_s, cwd=tmp, env=env, stdin=subprocess.DEVNULL
        )
    return parse(proc.stdout + ("\n" + proc.stderr if proc.stderr else ""), proc.returncode)


# ---- from advice to values ------------------------------------------------------------------------------


def to_number(text: str) -> float | None:
    """ "800.0M" → bytes, "4" → 4; None for words (ON, ROW)."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGTB]?)", text.strip(), re.I)
    if not m:
        return None
    return float(m.group(1)) * _UNITS[m.group(2).upper()]


def spell(value: float, size: bool) -> str:
    """A value in MariaDB option spelling: sizes as "NM" when a whole number of MiB, else bytes."""
    n = int(round(value))
    if size and n >= MiB and n % MiB == 0:
        return f"{n // MiB}M"
    return str(n)


@dataclass
class Choice:
    """Values chosen from MySQLTuner's advice, with one line per advice saying what was done."""

    values: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _largest_fitting(
    name: str,
    lo: float,
    hi: float,
    step: float,
    base: dict[str, str],
    size: bool,
    fits: Callable[[dict[str, str]], bool],
) -> float:
    """Largest value in (lo, hi] (multiples of ``step``) for which ``fits`` accepts base + {name: value};
    ``lo`` when none does."""
    if fits({**base, name: spell(hi, size)}):
        return hi
    lo_n, hi_n = math.floor(lo / step), math.floor(hi / step)
    while hi_n - lo_n > 1:
        mid = (lo_n + hi_n) // 2
        if fits({**base, name: spell(mid * step, size)}):
            lo_n = mid
        else:
            hi_n = mid
    return max(lo, lo_n * step)


def choose(
    report: TunerReport,
    current: dict[str, str],
    memory_bytes: int,
    fits: Callable[[dict[str, str]], bool],
) -> Choice:
    """Values to apply for ``report``'s advice (rules in the module docstring).

    Args:
        current: the server's current values (numbers as the server prints them, bytes for sizes).
        memory_bytes: the memory MySQLTuner was told (``--forcemem``).
        fits: whether agenticdb's validator accepts a whole configuration (memory budget and rules).
    """
    out = Choice()
    ratio_of_pool: list[tuple[Advice, float]] = []
    directions: list[Advice] = []
    for a in report.advice:
        num = to_number(a.value) if a.value is not None else None
        if a.relation == "text" or not a.name:
            out.notes.append(f"not applied (no value): {a.raw}")
        elif num is None:
            out.notes.append(f"not applied (not a number): {a.raw}")
        elif (m := re.search(r"equals (\d+)% of buffer pool size", a.raw)) and a.relation == "=":
            ratio_of_pool.append((a, int(m.group(1)) / 100))
        elif a.relation in ("=", "~", "<="):
            _take(a, spell(num, a.value is not None and a.value[-1:].isalpha()), "as printed", fits, out)
        else:
            directions.append(a)
    # The buffer pool first: it is MySQLTuner's main memory advice and the other directions share the rest.
    directions.sort(key=lambda a: a.name != "innodb_buffer_pool_size")
    for a in directions:
        _direction(a, current, memory_bytes, fits, out)
    for a, ratio in ratio_of_pool:
        pool = to_number(out.values.get("innodb_buffer_pool_size", current.get("innodb_buffer_pool_size", "")) or "")
        if pool is None:
            out.notes.append(f"not applied (buffer pool unknown): {a.raw}")
            continue
        _take(a, spell(math.floor(pool * ratio / MiB) * MiB, True), f"{ratio:.0%} of the buffer pool set", fits, out)
    return out


def _take(a: Advice, value: str, why: str, fits: Callable[[dict[str, str]], bool], out: Choice) -> None:
    """Keep ``a.name = value`` if the validator accepts it with everything kept so far (so a refused
    value cannot block the later directions)."""
    if fits({**out.values, a.name: value}):
        out.values[a.name] = value
        out.notes.append(f"{a.raw} → {a.name}={value} ({why})")
    else:
        out.notes.append(f"not applied: {a.raw} → {a.name}={value} ({why}) refused by agenticdb's validator")


def _direction(
    a: Advice, current: dict[str, str], memory_bytes: int, fits: Callable[[dict[str, str]], bool], out: Choice
) -> None:
    printed = to_number(a.value or "") or 0.0
    size = bool(a.value and a.value[-1:].isalpha())
    cur = to_number(current.get(a.name, "") or "")
    if cur is None:
        cur = printed
    step = MiB if size and max(cur, printed) >= 8 * MiB else (1024 if size else 1)
    if a.relation == ">=":
        target = printed
        if a.name == "innodb_buffer_pool_size":
            target = min(target, POOL_MAX_FRACTION * memory_bytes)
        target = math.ceil(target / step) * step
        why = f"the printed value, at most {POOL_MAX_FRACTION:.0%} of {memory_bytes // MiB}M"
    elif a.relation == ">":
        target = 2 * max(cur, printed)
        why = "twice the current value"
    elif a.relation == "<":
        out.values[a.name] = spell(max(1.0, math.floor(cur / 2)), size)
        out.notes.append(f"{a.raw} → {a.name}={out.values[a.name]} (half the current value)")
        return
    else:  # between A and B
        out.values[a.name] = spell(printed, size)
        out.notes.append(f"{a.raw} → {a.name}={out.values[a.name]} (lower bound)")
        return
    if target <= cur:
        out.notes.append(f"not applied: {a.raw} (target {spell(target, size)} is not above current {spell(cur, size)})")
        return
    got = _largest_fitting(a.name, cur, target, step, out.values, size, fits)
    if got <= cur:
        out.notes.append(f"not applied: {a.raw} (no increase fits agenticdb's memory budget)")
        return
    out.values[a.name] = spell(got, size)
    cut = "" if got >= target else f", cut from {spell(target, size)} to fit agenticdb's memory budget"
    out.notes.append(f"{a.raw} → {a.name}={out.values[a.name]} ({why}{cut})")
