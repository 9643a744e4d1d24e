"""Rationale text generated from the values of the case, so it is true of the server at hand.

A playbook ``[[floor]]`` rule (catalogs/playbook-*.toml) raises a knob that is below a floor computed
from the host (``Sizing``). Whether that is a *bad* start depends on the case: shared_buffers = 128MB is
PostgreSQL's own default (PostgreSQL 15 manual, 20.4.1), which is small for a host with 24 GiB of RAM
but is not a broken configuration; 16MB (below the default) is. The words here say which it is, with
the numbers: the value in effect, the knob's default, the floor and what the floor was computed from.
"""

from __future__ import annotations

from agenticdb.models import KnobSpec
from agenticdb.planner.playbook import FloorRule, HostFacts, Sizing
from agenticdb.units import parse_value, unit_bytes
from agenticdb.workload_kinds import human_bytes

__all__ = ["floor_label", "floor_reason", "human_bytes", "sizing_basis", "start_kind"]


def _fraction(f: float) -> str:
    inv = 1 / f
    return f"1/{round(inv)}" if abs(inv - round(inv)) < 1e-6 else f"{f:.1%}"


def sizing_basis(s: Sizing, facts: HostFacts) -> str:
    """What a Sizing computed its value from on this host, e.g. ``1/64 of 23.4 GiB of memory, at least
    128 MiB`` (the terms in the order ``playbook.size`` applies them)."""
    parts: list[str] = []
    if s.fraction_of_memory is not None:
        parts.append(f"{_fraction(s.fraction_of_memory)} of {human_bytes(facts.memory_limit_bytes)} of memory")
    elif s.fraction_of_ram is not None:
        parts.append(f"{_fraction(s.fraction_of_ram)} of {human_bytes(facts.ram_bytes)} of RAM")
    elif s.fraction_of_disk_free is not None:
        parts.append(f"{_fraction(s.fraction_of_disk_free)} of {human_bytes(facts.disk_free_bytes)} free disk")
    elif s.per_cpu is not None:
        parts.append(f"{s.per_cpu:g} per CPU × {facts.cpu_count} CPUs")
    elif s.bytes is not None:
        parts.append(human_bytes(s.bytes))
    elif s.value is not None:
        parts.append(f"{s.value:g}")
    if s.divide_by_max_connections:
        parts.append(f"divided by max_connections = {facts.max_connections}")
    if s.min_bytes is not None:
        parts.append(f"at least {human_bytes(s.min_bytes)}")
    if s.max_bytes is not None:
        parts.append(f"at most {human_bytes(s.max_bytes)}")
    return ", ".join(parts)


def _shown(base: float, spec: KnobSpec) -> str:
    ub = unit_bytes(spec.unit)
    if ub:
        return human_bytes(base * ub)
    return f"{base:g}" + (f" {spec.unit}" if spec.unit else "")


def start_kind(rule: FloorRule, spec: KnobSpec, current: str | None) -> str:
    """``"default"`` when the value in effect is the knob's default, ``"below default"`` when a floor
    knob is under its default, ``"trap"`` for a known-harmful value (``revert_above`` / ``revert_if``),
    else ``"set"``."""
    if rule.is_trap:
        return "trap"
    cur = parse_value(current, spec)
    default = parse_value(spec.default, spec)
    if cur is None or default is None:
        return "set"
    if abs(cur - default) <= 1e-9 * max(1.0, abs(default)):
        return "default"
    return "below default" if cur < default else "set"


def floor_reason(
    rule: FloorRule, spec: KnobSpec, current: str | None, floor: float | None, facts: HostFacts, family: str
) -> str:
    """The rationale of a floor move for this case: the value in effect (and whether it is the default),
    the floor and its basis on this host, then the rule's general reason.

    ``floor`` is in the knob's base unit (``playbook.size``); None for a trap rule.
    """
    kind = start_kind(rule, spec, current)
    cur = parse_value(current, spec)
    shown = _shown(cur, spec) if cur is not None else str(current)
    default = parse_value(spec.default, spec)
    default_shown = _shown(default, spec) if default is not None else str(spec.default)
    if kind == "trap":
        what = f" is above {rule.revert_above:g}" if rule.revert_above is not None else ""
        head = f"{rule.knob} = {current}{what}, a known trap (the {family} default is {spec.default})"
    else:
        where = {
            "default": f"is the {family} default",
            "below default": f"is below the {family} default {default_shown}",
            "set": f"was set (the {family} default is {default_shown})",
        }[kind]
        floor_text = _shown(floor, spec) if floor is not None else "?"
        basis = sizing_basis(rule.floor, facts) if rule.floor is not None else ""
        head = f"{rule.knob} = {shown} {where}, below the floor for this host, {floor_text} ({basis})"
    return f"{head}. {rule.reason}"


def floor_label(kinds: list[str]) -> str:
    """The lead of a proposal made of floor moves: ``bad start`` only when a value is below its default
    or a known trap; ``measured cost`` when every move undoes a cost the server's counters show
    (``[[measured]]`` rules); ``small for this host`` when the values are defaults or set above them."""
    if any(k in ("trap", "below default") for k in kinds):
        return "bad start"
    if kinds and all(k == "measured" for k in kinds):
        return "measured cost"
    if all(k == "default" for k in kinds):
        return "defaults small for this host"
    return "small for this host"
