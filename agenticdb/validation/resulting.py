"""The configuration that would result from a change set, and the conflict rules evaluated on it.

Conflicts are checked on the *resulting* configuration — the effective current values (defaults
included) with the normalised proposal merged over them — because a change is wrong in context:
wal_level=minimal is fine only while max_wal_senders is 0 (PostgreSQL 15 manual 20.5.1).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from agenticdb.models import Catalog, FailedCheck, Hardware, KnobSpec, NormalizedChange
from agenticdb.units import UnitError, normalize, quantity
from agenticdb.validation.rules import Condition, ConflictRule

_BLOCK = re.compile(r"^block\.([^.]+)\.(.+)$")


class ResultingConfig:
    """Values by name after the change set, with numeric look-ups in dimension-wide units.

    Names are resolved case-insensitively for DBMS catalogs (PostgreSQL GUC and MySQL variable names
    are case-insensitive) and exactly for Linux. Besides the knobs, rules may read the server's
    read-only facts (``Catalog.facts``), the host's (``host.<Hardware field>``) and the server's runtime
    state (``observed.<gauge>``: ``observed.pg_replication_slots.total``, from ``Observed.gauges``).
    """

    def __init__(
        self,
        family: str,
        catalog: Catalog,
        current: dict[str, str],
        changes: Iterable[NormalizedChange],
        index: dict[str, str],
        hardware: Hardware | None = None,
        gauges: dict[str, float] | None = None,
    ) -> None:
        self.family = family
        self.catalog = catalog
        self.index = index
        self.hardware = hardware
        self.gauges = gauges or {}
        self.fold = family != "linux"
        self.facts = {(k.lower() if self.fold else k): v for k, v in catalog.facts.items()}
        self.values: dict[str, str] = {}
        for name, value in current.items():
            self.values[self.key(name)] = value
        self.changed: dict[str, NormalizedChange] = {}
        for ch in changes:
            self.values[self.key(ch.name)] = ch.value
            self.changed[self.key(ch.name)] = ch
        self._num: dict[str, float | None] = {}

    def key(self, name: str) -> str:
        canonical = self.index.get(name.lower() if self.fold else name, name)
        return canonical.lower() if self.fold else canonical

    def spec(self, name: str) -> KnobSpec | None:
        return self.catalog.knobs.get(self.index.get(name.lower() if self.fold else name, name))

    def raw(self, name: str) -> str | None:
        """Resulting value as a string, falling back to the catalog default; None when unknown."""
        k = self.key(name)
        if k in self.values:
            return self.values[k]
        spec = self.spec(name)
        return spec.default if spec is not None else None

    def is_changed(self, name: str) -> bool:
        return self.key(name) in self.changed

    def base(self, name: str) -> float | None:
        """Resulting value in the knob's base unit, or None when absent/non-numeric."""
        spec = self.spec(name)
        raw = self.raw(name)
        if spec is None or raw is None:
            return None
        ch = self.changed.get(self.key(name))
        if ch is not None:
            return ch.base_value
        try:
            return normalize(self.family, spec, raw).base_value
        except UnitError:
            return None

    def number(self, name: str) -> float | None:
        """Resulting value in bytes (memory) or ms (time) or plain, cached per name."""
        k = self.key(name)
        if k not in self._num:
            spec, b = self.spec(name), self.base(name)
            self._num[k] = None if spec is None or b is None else quantity(self.family, spec, b)
        return self._num[k]

    def literal(self, name: str, value: str | int | float | bool) -> float | str | None:
        """A rule literal interpreted with ``name``'s spec: quantity for numbers, canonical text else."""
        spec = self.spec(name)
        if spec is None:
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
            return str(value).lower()
        try:
            p = normalize(self.family, spec, value)
        except UnitError:
            return str(value).lower()
        if p.base_value is not None:
            return quantity(self.family, spec, p.base_value)
        return p.canonical.lower()

    def fact(self, name: str) -> float | str | None:
        """A host fact (``host.swap_bytes``), a runtime gauge (``observed.pg_replication_slots.total``) or a
        read-only server fact (``Catalog.facts``); None if unknown (a gauge not observed included)."""
        if name.startswith("observed."):
            return self.gauges.get(name[len("observed.") :])
        if name.startswith("host."):
            value = getattr(self.hardware, name[5:], None) if self.hardware is not None else None
            return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
        return self.facts.get(name.lower() if self.fold else name)

    def operand(self, name: str) -> float | str | None:
        if self.spec(name) is None:
            fact = self.fact(name)
            return fact.lower() if isinstance(fact, str) else fact
        n = self.number(name)
        if n is not None:
            return n
        raw = self.raw(name)
        return raw.lower() if raw is not None else None

    def shown(self, name: str) -> str | None:
        """The resulting value as people read it (facts and host facts included)."""
        raw = self.raw(name) if self.spec(name) is not None else None
        if raw is not None:
            return raw
        fact = self.fact(name)
        if isinstance(fact, float) and fact.is_integer():
            return str(int(fact))
        return None if fact is None else str(fact)

    def changed_devices(self, templates: Iterable[str]) -> list[str]:
        """Devices ``d`` for which a changed parameter is ``block.d.<file>`` and some template is
        ``block.{dev}.<file>`` (rules name block parameters per device)."""
        files = {m.group(2) for t in templates if (m := _BLOCK.match(t)) and m.group(1) == "{dev}"}
        out: list[str] = []
        for ch in self.changed.values():
            m = _BLOCK.match(ch.name)
            if m and m.group(2) in files and m.group(1) not in out:
                out.append(m.group(1))
        return out


def device_of(name: str) -> str | None:
    """``vda`` for ``block.vda.nr_requests``; None for other names."""
    m = _BLOCK.match(name)
    return m.group(1) if m else None


def holds(cfg: ResultingConfig, cond: Condition) -> bool | None:
    """Truth of one condition on ``cfg``; None when a named parameter or fact is unknown here."""
    lhs = cfg.operand(cond.param)
    if lhs is None:
        return None
    for extra in cond.plus:
        add = cfg.operand(extra)
        if not isinstance(add, float | int) or not isinstance(lhs, float | int):
            return None
        lhs += add
    if cond.op == "power_of_two":
        return _power_of_two(lhs)
    if cond.op in ("in", "not_in"):
        assert isinstance(cond.value, list)
        inside = any(_eq(lhs, cfg.literal(cond.param, v)) for v in cond.value)
        return inside if cond.op == "in" else not inside
    if cond.other is not None:
        rhs = cfg.operand(cond.other)
        if rhs is None:
            return None
    else:
        assert cond.value is not None and not isinstance(cond.value, list)
        rhs = cfg.literal(cond.param, cond.value)
    if (cond.factor != 1.0 or cond.offset) and isinstance(rhs, float | int):
        rhs = rhs * cond.factor + cond.offset
    if cond.op == "==":
        return _eq(lhs, rhs)
    if cond.op == "!=":
        return not _eq(lhs, rhs)
    if not isinstance(lhs, float | int) or not isinstance(rhs, float | int):
        return None
    return {"<": lhs < rhs, "<=": lhs <= rhs, ">": lhs > rhs, ">=": lhs >= rhs}[cond.op]


def _power_of_two(value: float | str) -> bool | None:
    """True for a positive whole 2^k (512, 4096), False for another number, None for a string."""
    if not isinstance(value, float | int):
        return None
    return value == int(value) and value > 0 and int(value) & (int(value) - 1) == 0


def _eq(a: object, b: object) -> bool:
    if isinstance(a, float | int) and isinstance(b, float | int):
        return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))
    return str(a).lower() == str(b).lower()


def check_conflicts(
    cfg: ResultingConfig, rules: Iterable[ConflictRule], flavor: str, version: str
) -> list[FailedCheck]:
    """Failed ``conflict`` checks of the rules that name at least one changed parameter.

    A rule whose parameters do not all exist on this server is skipped (existence is the ``unknown``
    check's job); a configuration that was already in conflict before the change is not blamed on an
    unrelated change set.
    """
    failed: list[FailedCheck] = []
    for rule in rules:
        if not rule.applies(flavor, version):
            continue
        touched = [p for p in rule.params() if cfg.is_changed(p)]
        if not touched:
            continue
        culprit = cfg.changed[cfg.key(touched[0])]
        if rule.exclusive:
            both = [p for p in rule.exclusive if cfg.is_changed(p)]
            if len(both) > 1:
                failed.append(
                    FailedCheck(
                        check="conflict",
                        parameter=culprit.name,
                        value=culprit.value,
                        rule_id=rule.id,
                        source=rule.source,
                        message=f"{' and '.join(both)} set together: they are mutually exclusive "
                        f"(rule {rule.id}: {rule.reason})",
                    )
                )
            if not rule.require:
                continue
        whens = [holds(cfg, c) for c in rule.when]
        if any(w is None for w in whens) or not all(whens):
            continue
        broken = [c for c in rule.require if holds(cfg, c) is False]
        if not broken:
            continue
        shown = ", ".join(f"{p}={cfg.raw(p)}" for p in dict.fromkeys(rule.params()) if cfg.raw(p) is not None)
        cond = "; ".join(c.describe() for c in broken)
        pre = " when " + " and ".join(c.describe() for c in rule.when) if rule.when else ""
        failed.append(
            FailedCheck(
                check="conflict",
                parameter=culprit.name,
                value=culprit.value,
                rule_id=rule.id,
                source=rule.source,
                message=f"{culprit.name}={culprit.value} makes the resulting configuration ({shown}) violate "
                f"rule {rule.id}: requires {cond}{pre} — {rule.reason}",
            )
        )
    return failed
