"""Findings of ``agenticdb advise``: what a DBA should know that is not a knob change (issue 16).

Server settings are checked by the ``[[setting]]`` rules of ``catalogs/findings.toml`` (durability
relaxed, pg_stat_statements missing, autovacuum off, …): a rule may carry the statements that fix it
(``fix``) and a read-only query whose first row backs it with numbers (``evidence_sql``, said with
``evidence_text``; run in the database advise probes). Host checks are here: transparent huge pages set
to ``always`` and swap in use.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import structlog
from pydantic import BaseModel, ConfigDict, model_validator

from agenticdb.advice.types import Finding, Severity, stable_id
from agenticdb.models import Hardware, StateDelta
from agenticdb.resources import data_dir
from agenticdb.units.text import clip

log = structlog.get_logger(__name__)

THP_SOURCE = (
    "Linux kernel admin-guide/mm/transhuge.rst; PostgreSQL 15 manual 19.4.5 (huge_pages); "
    "MariaDB KB 'Configuring Linux for MariaDB' (transparent huge pages)"
)
SWAP_SOURCE = "Linux kernel admin-guide/sysctl/vm.rst (swappiness); PostgreSQL 15 manual 19.4 Managing Kernel Resources"


class SettingRule(BaseModel):
    """One ``[[setting]]`` of catalogs/findings.toml."""

    model_config = ConfigDict(extra="forbid")

    id: str
    families: list[str]
    parameter: str
    bad: list[str] = []
    must_contain: str | None = None
    severity: Literal["info", "low", "medium", "high", "critical"]
    title: str
    advice: str
    source: str
    fix: list[str] = []
    """Statements that fix it, in order (written by ``--format sql``; agenticdb runs none of them)."""
    evidence_sql: str | None = None
    """A read-only query whose first row backs the finding (run in the probed database)."""
    evidence_text: str | None = None
    """``str.format`` template over that row's columns (and ``database``) for the evidence line."""

    @model_validator(mode="after")
    def _evidence_pair(self) -> SettingRule:
        if (self.evidence_sql is None) != (self.evidence_text is None):
            raise ValueError(f"setting rule {self.id!r}: evidence_sql and evidence_text go together")
        return self

    def fires(self, value: str) -> bool:
        """True when ``value`` (the server's spelling) is one this rule warns about."""
        v = value.strip().lower()
        if self.must_contain is not None:
            return self.must_contain.lower() not in [p.strip().strip("'\"") for p in v.split(",")]
        return v in [b.lower() for b in self.bad]


@lru_cache(maxsize=1)
def setting_rules() -> list[SettingRule]:
    """The shipped ``catalogs/findings.toml`` rules.

    Raises:
        ValueError: the file breaks the schema (pydantic names the field).
    """
    raw = tomllib.loads((data_dir("catalogs") / "findings.toml").read_text())
    return [SettingRule.model_validate(r) for r in raw.get("setting", [])]


def _read(read: Callable[[list[str]], dict[str, str]], name: str) -> str | None:
    try:
        return read([name]).get(name)
    except Exception:  # noqa: BLE001 - a parameter this server does not have is simply not checked
        return None


Query = Callable[[str], dict[str, Any] | None]
"""Runs a read-only statement in the probed database → its first row by column name plus ``database``
(None: no row); raises the driver's error when it cannot."""


def _backing(rule: SettingRule, query: Query | None) -> str:
    """The evidence line of ``rule``'s query ("" when it has none), or why it could not be read."""
    if rule.evidence_sql is None or rule.evidence_text is None:
        return ""
    if query is None:
        return "; its effect on the tables not read (no connection to the database)"
    try:
        row = query(rule.evidence_sql)
    except Exception as exc:  # noqa: BLE001 - psycopg/PyMySQL errors: the setting alone is still the finding
        log.warning("advise.evidence_unreadable", rule=rule.id, error=str(exc)[:200], reason="setting alone is said")
        return f"; its effect on the tables not read: {clip(exc, 160)}"
    return "; " + rule.evidence_text.format(**row) if row is not None else ""


def findings(
    family: str,
    read: Callable[[list[str]], dict[str, str]],
    hardware: Hardware,
    delta: StateDelta,
    identity: str,
    root: Path = Path("/"),
    query: Query | None = None,
) -> list[Finding]:
    """Every finding for this server and host.

    Args:
        family: "postgresql" | "mariadb" | "mysql".
        read: returns current values for names (``Target.current_values``).
        hardware: host facts (swap size).
        delta: the observation window (``vmstat.pswpin``/``pswpout`` when the host was sampled).
        identity: the server's identity (finding ids are derived from it and the rule id).
        root: filesystem root holding ``proc/`` and ``sys/``.
        query: runs a rule's ``evidence_sql`` in the probed database (None: such evidence is not read).
    """
    out: list[Finding] = []
    for rule in setting_rules():
        if family not in rule.families:
            continue
        value = _read(read, rule.parameter)
        if value is not None and rule.fires(value):
            out.append(
                Finding(
                    id=stable_id("F", identity, rule.id),
                    title=rule.title,
                    severity=rule.severity,
                    evidence=f"{rule.parameter} = {value!r}" + _backing(rule, query),
                    advice=rule.advice,
                    source=rule.source,
                    sql=[f"{stmt};" for stmt in rule.fix],
                )
            )
    thp = _thp(root)
    if thp == "always":
        out.append(
            Finding(
                id=stable_id("F", identity, "host.thp-always"),
                title="transparent huge pages = always: latency stalls from compaction and khugepaged",
                severity="medium",
                evidence="/sys/kernel/mm/transparent_hugepage/enabled = [always]",
                advice="echo madvise > /sys/kernel/mm/transparent_hugepage/enabled (or the tuned profile's [vm])",
                source=THP_SOURCE,
            )
        )
    out += _swap(hardware, delta, identity, root)
    return out


def _thp(root: Path) -> str | None:
    """The selected THP mode (the bracketed word), None when the file is absent."""
    try:
        text = (root / "sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return None
    start, end = text.find("["), text.find("]")
    return text[start + 1 : end] if 0 <= start < end else None


def _swap(hardware: Hardware, delta: StateDelta, identity: str, root: Path) -> list[Finding]:
    total = free = 0
    try:
        for line in (root / "proc/meminfo").read_text().splitlines():
            if line.startswith("SwapTotal:"):
                total = int(line.split()[1]) * 1024
            elif line.startswith("SwapFree:"):
                free = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return []
    used = max(0, total - free)
    paging = delta.totals.get("vmstat.pswpin", 0.0) + delta.totals.get("vmstat.pswpout", 0.0)
    if used <= 0 and paging <= 0:
        return []
    severity: Severity = "medium" if paging > 0 else "low"
    return [
        Finding(
            id=stable_id("F", identity, "host.swap-used"),
            title="swap in use" + (" and paging during the observation window" if paging > 0 else ""),
            severity=severity,
            evidence=f"swap used {used / 2**20:,.0f} MiB of {total / 2**20:,.0f} MiB; "
            f"pages swapped in+out in {delta.seconds:.1f} s: {paging:,.0f}",
            advice="find what uses the memory before raising any memory knob; vm.swappiness lower keeps "
            "database pages resident",
            source=SWAP_SOURCE,
        )
    ]
