"""Rules on what a change would do on this server and host, evaluated on the resulting configuration:

- ``server_check`` — the server's or kernel's own checks beyond the published min/max (GUC check hooks,
  start-up checks, sysfs store functions): ``min_wal_size`` ≥ 2 × ``wal_segment_size`` passes a reload
  and stops the next start;
- ``no_effect`` — the change cannot act in this mode or on this hardware (``vm.overcommit_ratio`` while
  ``vm.overcommit_memory`` ≠ 2, ``vm.swappiness`` without swap): never measured;
- ``harmful`` — values the field knows to hurt database hosts (THP ``always``): refused unless
  ``policy.allow_harmful`` names the rule, then accepted as a journaled risk;
- ``capacity`` — a capacity setting (``max_connections``) is never lowered below the observed peak plus
  ``policy.capacity_headroom``; a peak too slow to read on every runtime sample (``memory_tables.*``) is read
  from the server here, once, through ``Observed.read``.

Rules are data (``validators/*.toml``, agenticdb.validation.rules); this module only evaluates them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import structlog

from agenticdb.config.sections import PolicyConfig
from agenticdb.errors import GaugeUnknown
from agenticdb.models import FailedCheck, NormalizedChange, Observed
from agenticdb.validation.resulting import ResultingConfig, device_of, holds
from agenticdb.validation.rules import (
    ENFORCED_TEXT,
    CapacityRule,
    Condition,
    HarmfulRule,
    NoEffectRule,
    ServerCheck,
    rules_for,
)

log = structlog.get_logger(__name__)


def _values(cfg: ResultingConfig, names: Iterable[str]) -> str:
    """``name=value`` of the resulting configuration (facts included) for a message."""
    shown = []
    for name in dict.fromkeys(names):
        value = cfg.shown(name)
        if value is None:
            continue
        if name.startswith("host.") and name.endswith("_bytes"):
            value = f"{float(value) / 1024**3:.2f} GiB"
        elif cfg.spec(name) is None and name.endswith("_size") and value.isdigit() and int(value) >= 1024**2:
            value = f"{value} ({int(value) / 1024**2:g} MiB)"  # a fact in bytes (wal_segment_size)
        shown.append(f"{name}={value}")
    return ", ".join(shown) or "values unknown"


def _instances(conds: list[Condition], dev: str | None) -> list[Condition]:
    return [c.for_device(dev) for c in conds] if dev else list(conds)


def check_server(cfg: ResultingConfig, rules: Iterable[ServerCheck], flavor: str, version: str) -> list[FailedCheck]:
    """Failed ``server_check`` checks of the rules that name a changed parameter.

    A rule naming ``block.{dev}.…`` is evaluated once per changed device. A rule whose facts are unknown
    here (a fact the server did not report) is skipped.
    """
    failed: list[FailedCheck] = []
    for rule in rules:
        if not rule.applies(flavor, version):
            continue
        templated = [p for p in rule.params() if "{dev}" in p]
        for dev in cfg.changed_devices(templated) if templated else [None]:
            when, require = _instances(rule.when, dev), _instances(rule.require, dev)
            # the culprit is a changed parameter of what is required, before one of the preconditions
            params = [p for c in (*require, *when) for p in c.params()]
            touched = [p for p in params if cfg.is_changed(p)]
            if not touched:
                continue
            whens = [holds(cfg, c) for c in when]
            if any(w is not True for w in whens):
                continue
            broken = [c for c in require if holds(cfg, c) is False]
            if not broken:
                continue
            ch = cfg.changed[cfg.key(touched[0])]
            pre = " when " + " and ".join(c.describe() for c in when) if when else ""
            failed.append(
                FailedCheck(
                    check="server_check",
                    parameter=ch.name,
                    value=ch.value,
                    rule_id=rule.id,
                    source=rule.source,
                    message=f"{ch.name}={ch.value}: the server's own check (rule {rule.id}, server_check) "
                    f"requires {'; '.join(c.describe() for c in broken)}{pre}, and the resulting configuration "
                    f"has {_values(cfg, params)} — {rule.reason}; {ENFORCED_TEXT[rule.enforced]}",
                )
            )
    return failed


def check_no_effect(
    cfg: ResultingConfig, rules: list[NoEffectRule], flavor: str, version: str
) -> tuple[list[FailedCheck], set[str]]:
    """Failed ``no_effect`` checks, and the names of the changes they cover (harm is not judged for a
    change that cannot act). Besides the rules, a variable the server itself describes as ignored
    (fact ``ignored:<name>``, MariaDB "Deprecated parameter with no effect") has no effect."""
    failed: list[FailedCheck] = []
    idle: set[str] = set()
    for ch in cfg.changed.values():
        said = cfg.fact(f"ignored:{ch.name}")
        if said is not None:
            idle.add(ch.name)
            failed.append(
                FailedCheck(
                    check="no_effect",
                    parameter=ch.name,
                    value=ch.value,
                    rule_id="server.ignored",
                    source="the server's own description (information_schema.SYSTEM_VARIABLES.VARIABLE_COMMENT)",
                    message=f"{ch.name}={ch.value} has no effect on {cfg.catalog.target} {cfg.catalog.version} "
                    f"(rule server.ignored, no_effect): the server describes it as '{said}'. A trial would "
                    "measure noise, so it is never measured",
                )
            )
            continue
        for rule in rules_for(rules, ch.name):
            if not rule.applies(flavor, version):
                continue
            require = _instances(rule.require, device_of(ch.name))
            broken = [c for c in require if holds(cfg, c) is False]
            if not broken:
                continue
            idle.add(ch.name)
            params = [p for c in broken for p in c.params()]
            failed.append(
                FailedCheck(
                    check="no_effect",
                    parameter=ch.name,
                    value=ch.value,
                    rule_id=rule.id,
                    source=rule.source,
                    message=f"{ch.name}={ch.value} has no effect here (rule {rule.id}, no_effect): it acts only "
                    f"when {' and '.join(c.describe() for c in broken)}, and here {_values(cfg, params)} — "
                    f"{rule.reason}. A trial would measure noise, so it is never measured",
                )
            )
            break
    return failed, idle


def check_harmful(
    cfg: ResultingConfig,
    rules: list[HarmfulRule],
    flavor: str,
    version: str,
    policy: PolicyConfig,
    skip: set[str],
) -> tuple[list[FailedCheck], list[str]]:
    """Failed ``harmful`` checks and, for the rules ``policy.allow_harmful`` names, accepted risks."""
    failed: list[FailedCheck] = []
    risks: list[str] = []
    for ch in cfg.changed.values():
        if ch.name in skip:
            continue
        for rule in rules_for(rules, ch.name):
            if not rule.applies(flavor, version):
                continue
            when = _instances(rule.when, device_of(ch.name))
            if not all(holds(cfg, c) is True for c in when):
                continue
            situation = " and ".join(c.describe() for c in when)
            if rule.id in policy.allow_harmful:
                risks.append(
                    f"{ch.name}={ch.value}: known to hurt database hosts ({situation}): {rule.reason} "
                    f"(rule {rule.id}, accepted because policy.allow_harmful names it; {rule.source})"
                )
                continue
            failed.append(
                FailedCheck(
                    check="harmful",
                    parameter=ch.name,
                    value=ch.value,
                    rule_id=rule.id,
                    source=rule.source,
                    message=f"{ch.name}={ch.value} is known to hurt database hosts (rule {rule.id}, harmful; "
                    f"{situation}): {rule.reason}; refused unless policy.allow_harmful names "
                    f'"{rule.id}"',
                )
            )
    return failed, risks


def check_capacity(
    cfg: ResultingConfig,
    before: ResultingConfig,
    rules: list[CapacityRule],
    flavor: str,
    version: str,
    policy: PolicyConfig,
    observed: Observed | None,
    read: dict[str, float] | None = None,
) -> list[FailedCheck]:
    """Failed ``capacity`` checks: a capacity setting lowered below the observed peak plus headroom, or
    lowered at all when no peak was observed. A rule's gauge missing from ``observed.gauges`` is read with
    ``observed.read`` (only for a setting being lowered); what such a rule compared with goes into ``read``.
    A refusal below an observed peak carries ``FailedCheck.floor``: the least value of the setting the rule
    allows (the peak + headroom + reserve, per slot for a per-slot rule), in ``cfg.number``'s quantity."""
    failed: list[FailedCheck] = []
    gauges = observed.gauges if observed is not None else {}
    for ch in cfg.changed.values():
        rule = next((r for r in rules_for(rules, ch.name) if r.applies(flavor, version)), None)
        if rule is None:
            continue
        new, old = cfg.number(ch.name), before.number(ch.name)
        if new is None or old is None or new >= old:
            continue
        fetched = _read_missing(observed, rule.id, rule.observed)
        seen = {n: v for n in rule.observed if (v := _observation(cfg, gauges, n)) is not None}
        if read is not None:
            read.update({n: v for n, v in seen.items() if n in fetched})
        if not seen:
            why = sorted({r for n, r in (observed.unknown if observed else {}).items() if n in rule.observed})
            failed.append(
                FailedCheck(
                    check="capacity",
                    parameter=ch.name,
                    value=ch.value,
                    rule_id=rule.id,
                    source=rule.source,
                    message=f"{ch.name}={ch.value} lowers a capacity setting (now {before.raw(ch.name)}) and "
                    f"its observed peak ({', '.join(rule.observed)}) is unknown to the validator: rule "
                    f"{rule.id} (capacity) never lowers it without one — {rule.reason}"
                    + "".join(f"; unknown because {w}" for w in why),
                )
            )
            continue
        name, peak = max(seen.items(), key=lambda kv: kv[1])
        if rule.observed_in is not None:  # blocks in use: counted in the cache's own block size, in bytes
            block = cfg.operand(rule.observed_in)
            if not isinstance(block, float | int) or block <= 0:
                failed.append(_unknown_block(ch, before, rule))
                continue
            name, peak = f"{name} {peak:g} × {rule.observed_in} {block:g} B", peak * block
        reserve = sum(max(cfg.number(r) or 0.0, 0.0) for r in rule.reserve)
        floor = math.ceil(peak * (1 + policy.capacity_headroom)) + reserve
        capacity, per = _capacity(cfg, rule, new)
        if capacity >= floor:
            continue
        extra = f" + {' + '.join(f'{r} {cfg.raw(r)}' for r in rule.reserve)}" if rule.reserve else ""
        failed.append(
            FailedCheck(
                check="capacity",
                parameter=ch.name,
                value=ch.value,
                rule_id=rule.id,
                source=rule.source,
                message=f"{ch.name}={ch.value}{per} (rule {rule.id}, capacity) is below the observed peak {peak:g} "
                f"({name}) + policy.capacity_headroom {policy.capacity_headroom:.0%}{extra} = {floor:g} — "
                f"{rule.reason}",
                floor=_least(cfg, rule, floor),
            )
        )
    return failed


def _unknown_block(ch: NormalizedChange, before: ResultingConfig, rule: CapacityRule) -> FailedCheck:
    """The refusal of lowering ``ch.name`` when the size of the blocks its observed peak counts is not known."""
    return FailedCheck(
        check="capacity",
        parameter=ch.name,
        value=ch.value,
        rule_id=rule.id,
        source=rule.source,
        message=f"{ch.name}={ch.value} lowers a capacity setting (now {before.raw(ch.name)}) and the size of the "
        f"blocks its observed peak counts ({rule.observed_in}) is unknown to the validator: rule {rule.id} "
        f"(capacity) never lowers it without it — {rule.reason}",
    )


def _capacity(cfg: ResultingConfig, rule: CapacityRule, value: float) -> tuple[float, str]:
    """(capacity, how it was computed for a message): ``value`` itself, or value × the slots of a per-slot
    rule (" × 122 slots (max_connections 50 + … + 1) = 1220")."""
    if not rule.slots:
        return value, ""
    count = _slot_count(cfg, rule)
    plus = [f"{rule.slots_plus:g}"] if rule.slots_plus else []
    terms = " + ".join([*(f"{n} {cfg.raw(n)}" for n in rule.slots), *plus])
    return value * count, f" × {count:g} slots ({terms}) = {value * count:g}"


def _least(cfg: ResultingConfig, rule: CapacityRule, floor: float) -> float | None:
    """The least value of ``rule.parameter`` whose capacity reaches ``floor``; None when a per-slot rule has no slot."""
    if not rule.slots:
        return float(floor)
    count = _slot_count(cfg, rule)
    return floor / count if count > 0 else None


def _slot_count(cfg: ResultingConfig, rule: CapacityRule) -> float:
    """The slots a per-slot rule's setting is multiplied by: Σ ``rule.slots`` in ``cfg`` + ``rule.slots_plus``."""
    return sum(max(cfg.number(n) or 0.0, 0.0) for n in rule.slots) + rule.slots_plus


def _observation(cfg: ResultingConfig, gauges: dict[str, float], name: str) -> float | None:
    if name.startswith("host."):
        value = cfg.fact(name)
        return value if isinstance(value, float) else None
    return gauges.get(name)


def _read_missing(observed: Observed | None, rule_id: str, names: list[str]) -> set[str]:
    """Names of ``names`` whose value came from the server through ``observed.read`` (now, or for an earlier
    rule on this Observed); a gauge missing from ``observed.gauges`` is asked for here. A read that answers
    nothing leaves the peak unknown (the rule then refuses the lowering); one that raises ``GaugeUnknown``
    too, and ``observed.unknown`` keeps its reasons for the refusal.

    Raises:
        whatever ``observed.read`` raises (``Target.rule_gauges`` answers nothing rather than raise).
    """
    if observed is None or observed.read is None:
        return set()
    missing = [n for n in names if not n.startswith("host.") and n not in observed.gauges and n not in observed.unknown]
    if missing:
        try:
            got = {n: float(v) for n, v in observed.read(missing).items()}
        except GaugeUnknown as exc:
            observed.unknown.update(exc.reasons)
            log.info("validator.read", rule=rule_id, asked=missing, gauges={}, unknown=exc.reasons)
            return {n for n in names if n in observed.fetched}
        observed.gauges.update(got)
        observed.fetched.update(got)
        log.info("validator.read", rule=rule_id, asked=missing, gauges=got)
    return {n for n in names if n in observed.fetched}
