"""Output formats of ``agenticdb advise`` for the tools people feed (issue 16).

Only recommendations the validator accepted are written as statements; the others stay in the
``text``/``json`` formats with the rule that rejected them.

* ``sql``: PostgreSQL ``ALTER SYSTEM SET`` + ``pg_reload_conf()`` (PostgreSQL 15 manual, ALTER SYSTEM);
  MariaDB ``SET GLOBAL`` for dynamic variables (sizes as byte counts: SET takes no K/M/G suffix) and the
  ``[mysqld]`` option-file section as comments, sizes with suffixes as advised (MariaDB KB, SET and
  Configuring MariaDB with Option Files); MySQL 8 ``SET PERSIST`` /
  ``SET PERSIST_ONLY`` (MySQL 8.0 manual 13.7.6.1 SET Syntax for Variable Assignment).
* ``conf``: a postgresql.conf include file (``include_if_exists``/``include_dir``) or a ``[mysqld]``
  section.
* ``sysctl``: a sysctl.d(5) file of the ``sysctl`` recommendations (block-queue and THP sysfs files as
  comments naming the file).
* ``tuned``: a tuned profile (tuned.conf(5): ``[sysctl]``, ``[vm] transparent_hugepages``).
"""

from __future__ import annotations

import re

from agenticdb.advice.types import Advice, Recommendation
from agenticdb.dialect import family_of
from agenticdb.models import ApplyMode, Layer
from agenticdb.units.people import mysql_set_number

FORMATS = ("text", "json", "sql", "conf", "sysctl", "tuned")

_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


def _accepted(advice: Advice, layer: Layer) -> list[Recommendation]:
    return [r for r in advice.recommendations if r.layer == layer and r.verdict == "accept"]


def _header(advice: Advice, comment: str) -> list[str]:
    return [
        f"{comment} agenticdb advise for {advice.target} ({advice.kind} {advice.version}) at {advice.generated_at}",
        f"{comment} only recommendations the validator accepted; review before applying",
    ]


def _why(r: Recommendation) -> str:
    return f"{r.id} {r.knob}: {r.current} -> {r.recommended} (apply: {r.apply.value}; {r.confidence}; {r.source})"


def _pg_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _my_literal(value: str) -> str:
    """``value`` as ``SET`` takes it: a size as its byte count ("12052M" → 12637437952; SET takes no suffix),
    numbers and ON/OFF bare, anything else quoted."""
    value = mysql_set_number(value)
    if _NUMBER.match(value) or value.upper() in ("ON", "OFF"):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def _finding_sql(advice: Advice) -> list[str]:
    """Statements of the root-cause findings (issue 40), each under its id and title."""
    out: list[str] = []
    for f in advice.findings:
        if f.sql:
            out += [f"-- {f.id}: {f.title}", *f.sql]
    return out


def render_sql(advice: Advice) -> str:
    """SQL statements for the DBMS recommendations (see the module docstring per family)."""
    family = family_of(advice.kind)
    recs = _accepted(advice, Layer.dbms)
    lines = _header(advice, "--")
    if family == "postgresql":
        for r in recs:
            lines += [f"-- {_why(r)}", f"ALTER SYSTEM SET {r.knob} = {_pg_literal(r.recommended)};"]
        if recs:
            lines.append("SELECT pg_reload_conf();")
        restart = [r.knob for r in recs if r.apply == ApplyMode.restart]
        if restart:
            lines.append(f"-- a restart is needed for: {', '.join(restart)}")
        return "\n".join(lines + _finding_sql(advice)) + "\n"
    lines += _finding_sql(advice)
    persist = advice.kind.lower().startswith("mysql")  # MySQL 8 has SET PERSIST; MariaDB does not
    for r in recs:
        lines.append(f"-- {_why(r)}")
        if r.apply == ApplyMode.restart:
            stmt = f"SET PERSIST_ONLY {r.knob} = {_my_literal(r.recommended)};"
            lines.append(stmt if persist else f"-- restart-only: set {r.knob} in the option file below")
        else:
            verb = "SET PERSIST" if persist else "SET GLOBAL"
            lines.append(f"{verb} {r.knob} = {_my_literal(r.recommended)};")
    if not persist and recs:
        lines += ["-- option file section (keeps the values across restarts):"]
        lines += ["-- " + line for line in _mysqld_section(recs)]
    return "\n".join(lines) + "\n"


def _option_line(r: Recommendation) -> str:
    """``name = value`` for a [mysqld] section; a runtime-only variable (no option-file form on this
    server, ``mysqld --help --verbose`` does not list it) is written as a comment: the next start would
    abort with "unknown variable"."""
    line = f"{r.knob} = {r.recommended}"
    return f"# runtime only (SET GLOBAL), not an option: {line}" if r.option_file is False else line


def _mysqld_section(recs: list[Recommendation]) -> list[str]:
    return ["[mysqld]"] + [_option_line(r) for r in recs]


def render_conf(advice: Advice) -> str:
    """A postgresql.conf include file, or a ``[mysqld]`` option-file section."""
    recs = _accepted(advice, Layer.dbms)
    lines = _header(advice, "#")
    if family_of(advice.kind) == "postgresql":
        for r in recs:
            lines += [f"# {_why(r)}", f"{r.knob} = {_pg_literal(r.recommended)}"]
        return "\n".join(lines) + "\n"
    lines.append("[mysqld]")
    for r in recs:
        lines += [f"# {_why(r)}", _option_line(r)]
    return "\n".join(lines) + "\n"


def sysfs_path(knob: str) -> str | None:
    """The sysfs file of a Linux parameter that is not a sysctl (agenticdb.targets.linux's naming):
    ``block.vda.iosched.fifo_batch`` → /sys/block/vda/queue/iosched/fifo_batch, ``thp.enabled`` →
    /sys/kernel/mm/transparent_hugepage/enabled; None for a sysctl."""
    if knob.startswith("block."):
        _, dev, rest = knob.split(".", 2)
        return f"/sys/block/{dev}/queue/{rest.replace('.', '/')}"
    if knob.startswith("thp."):
        return f"/sys/kernel/mm/transparent_hugepage/{knob.removeprefix('thp.')}"
    return None


def render_sysctl(advice: Advice) -> str:
    """A sysctl.d(5) file: ``name = value`` per accepted sysctl recommendation; block-queue and THP
    settings (sysfs files, not sysctls: ``sysctl -p`` would refuse them) as comments naming the file."""
    lines = _header(advice, "#")
    for r in _accepted(advice, Layer.os):
        lines.append(f"# {_why(r)}")
        path = sysfs_path(r.knob)
        lines.append(f"# not a sysctl: write {r.recommended} to {path}" if path else f"{r.knob} = {r.recommended}")
    return "\n".join(lines) + "\n"


def render_tuned(advice: Advice) -> str:
    """A tuned profile (``/etc/tuned/<name>/tuned.conf``): ``[sysctl]`` from the sysctl
    recommendations, ``[vm] transparent_hugepages=madvise`` when THP is ``always``."""
    lines = ["[main]", f"summary=agenticdb advice for {advice.target} ({advice.generated_at})", ""]
    sysctls = [r for r in _accepted(advice, Layer.os) if sysfs_path(r.knob) is None]
    lines.append("[sysctl]")
    for r in sysctls:
        lines += [f"# {_why(r)}", f"{r.knob}={r.recommended}"]
    if any("transparent huge pages" in f.title for f in advice.findings):
        lines += ["", "[vm]", "transparent_hugepages=madvise"]
    return "\n".join(lines) + "\n"


def render(advice: Advice, fmt: str) -> str:
    """``advice`` in ``fmt`` (one of FORMATS except ``text``, which the CLI prints as tables).

    Raises:
        ValueError: an unknown format (names it and the choices).
    """
    if fmt == "json":
        return advice.model_dump_json(indent=2) + "\n"
    renderers = {"sql": render_sql, "conf": render_conf, "sysctl": render_sysctl, "tuned": render_tuned}
    if fmt not in renderers:
        raise ValueError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    return renderers[fmt](advice)
