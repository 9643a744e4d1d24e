"""Repair of a whole candidate set that the validator refuses (issue 36), in one order: restart-only knobs left
out when a restart is not allowed now; capacity settings lowered below what the capacity rules allow
(``validators/*.toml`` ``[[capacity]]``: the MyISAM key cache, the Aria page cache below their blocks in use)
set to their floor, or left at the value in effect when the rule has no observation to set one from; then, over
the memory budget, the planner's trade move (``agenticdb.planner.trade``: grow the cache, pay with per-session and
maintenance memory), then a shrink of the global buffers the set raises, in proportion to their raise. A set
that still does not fit, or is refused by any other rule, is dropped with the validator's reasons.
max_connections is never lowered by a repair (a DBA's requirement)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import structlog

from agenticdb.dialect import family_of
from agenticdb.models import ApplyMode, FailedCheck, KnobSpec
from agenticdb.models.planning import PlanningContext
from agenticdb.planner.opening_types import Candidate
from agenticdb.planner.opening_values import MiB, current_config
from agenticdb.planner.playbook import round_base
from agenticdb.planner.trade import load_trades, measured_use, trade_proposal
from agenticdb.units import bytes_of, format_value, parse_value, quantity, unit_bytes
from agenticdb.validation.rules import load_ruleset
from agenticdb.validation.sets import SetVerdict
from agenticdb.validation.validator import flavor_of

log = structlog.get_logger(__name__)

#: Repairs a set over the memory budget may take before it is dropped.
MAX_REPAIRS = 4


def _with_modes(ctx: PlanningContext, cand: Candidate, sv: SetVerdict) -> Candidate:
    modes: dict[str, ApplyMode] = {c.name: c.apply for c in sv.verdict.changes}
    for name in cand.changes:
        spec = ctx.catalog.knobs.get(name)
        if name not in modes and spec is not None:
            modes[name] = spec.apply
    return replace(cand, apply_modes=modes, warnings=tuple(sv.verdict.warnings))


def repair_set(
    ctx: PlanningContext, cand: Candidate, check: Callable[[dict[str, str], str], SetVerdict]
) -> tuple[Candidate | None, str]:
    """``cand`` validated as one set; over the memory budget, repaired (at most :data:`MAX_REPAIRS` moves): first
    with the trade move (the gives of ``catalogs/trades.toml`` lowered from the set's values), and when no
    trade is left, by shrinking the global buffers the set raises, each in proportion to its raise, by the
    budget's excess (never below the value in effect: :func:`shrink_to_fit`). When the only refusal is that a
    restart is not allowed now (``policy.allow_restart``, ``policy.restart_window``, a service that cannot
    restart), alone or beside the memory budget's or the capacity rules', the restart-only knobs are left out and
    the rest of the set is judged again. Capacity refusals (a cache lowered below its blocks in use, alone or
    beside those two) are repaired before the memory budget's, since a cache put back to its floor may need a
    trade: each such knob is set to its floor (:func:`capacity_floors`), or left at the value in effect, and the
    set judged again; a set left with no change is dropped with that reason.

    Args:
        ctx: the planning context (catalog, current configuration, statistics for the caches in use).
        cand: the candidate as its source generated it.
        check: judges a set (``validate_set`` bound to the server, policy and clock).

    Returns:
        (the validated candidate, possibly repaired, with apply modes and warnings; "") or (None, the
        failed checks that no trade could repair).
    """
    changes = dict(cand.changes)
    sources = dict(cand.sources)
    repaired: list[str] = []
    floored: list[str] = []  # the capacity repairs in short, for the rationale
    kept = dict(cand.kept)
    sv = check(changes, cand.name)
    # trades and shrinks; leaving restart-only knobs out and capacity floors are no repair here (they end: each
    # removes a knob or sets one to a floor that, refused again at the same value, leaves it out)
    moves = 0
    while moves < MAX_REPAIRS:
        if sv.ok:
            break
        refusal = sv.memory_refusal
        blocked = [f.parameter for f in sv.verdict.failed if f.rule_id == "restart_permission"]
        capacity = [f for f in sv.verdict.failed if f.check == "capacity"]
        rest = [
            f
            for f in sv.verdict.failed
            if f.rule_id not in ("restart_permission", "memory_budget") and f.check != "capacity"
        ]
        if rest:
            return None, sv.reasons()
        if blocked and len(blocked) < len(changes):
            # a restart is not allowed now (policy.allow_restart / restart_window): the rest of the set still is,
            # and a memory refusal beside it is judged (and repaired) on that rest: the limits set, whose
            # innodb_log_buffer_size is restart-only, was dropped whole on a service that cannot restart
            repaired += _leave_out(sv, blocked, changes, sources)
            sv = check(changes, cand.name)
            continue
        if capacity:
            # an experience or LLM set lowering the MyISAM key cache below its blocks in use was dropped whole
            # (c9f3df9), its buffer pool with it: a DBA keeps the rest and the cache at what the rule allows
            fixes = _floor(ctx, capacity, changes, sources, kept)
            repaired += [f.line for f in fixes]
            floored += [f.short for f in fixes]
            log.info("opening.capacity_floor", candidate=cand.name, reason=[f.line for f in fixes])
            if not fixes or not changes:
                return None, _floors_drop(sv, fixes)
            sv = check(changes, cand.name)
            continue
        if not sv.memory_only or refusal is None:
            return None, sv.reasons()
        moves += 1
        tried = _apply(ctx, changes, sources, _trade(ctx, changes, refusal), "trade move (catalogs/trades.toml)")
        after = check(tried[0], cand.name) if tried[2] else None
        if after is not None and _eased(after, refusal):
            changes, sources, lines = tried
            repaired += lines
            sv = after
            continue
        # no trade, or one that frees (almost) nothing of the excess (per-session buffers of 1 observed thread)
        shrunk = _apply(ctx, changes, sources, shrink_to_fit(ctx, changes, refusal), "shrunk to fit the memory budget")
        if not shrunk[2]:
            return None, f"over the memory budget and neither a trade nor a shrink fits it: {sv.reasons()}"
        changes, sources, lines = shrunk
        repaired += lines
        sv = check(changes, cand.name)
    if not sv.ok:
        return None, f"still over the memory budget after {MAX_REPAIRS} repairs: {sv.reasons()}"
    rationale = cand.rationale
    if floored:  # the proposal's rationale is journaled with each screen: a knob left out has no source there
        rationale = f"{rationale.rstrip().rstrip('.')}. Capacity settings it lowered too far: {', '.join(floored)}."
    fixed = replace(cand, changes=changes, sources=sources, repaired=tuple(repaired), kept=kept, rationale=rationale)
    return _with_modes(ctx, fixed, sv), ""


def _floors_drop(sv: SetVerdict, fixes: list[Floor]) -> str:
    """Why a set is dropped after its capacity repairs: no change left (every one a refused lowering, left at the
    value in effect), or no repair found (a refused knob the set does not name as the validator does)."""
    if not fixes:
        return sv.reasons()
    return (
        "every change lowered a capacity setting further than its rule allows, and each is left at the value in "
        f"effect: {'; '.join(f.line for f in fixes)}"
    )


def _leave_out(sv: SetVerdict, blocked: list[str], changes: dict[str, str], sources: dict[str, str]) -> list[str]:
    """The restart-only knobs ``blocked`` taken out of ``changes`` and ``sources`` in place; one line each."""
    why = next(f.message for f in sv.verdict.failed if f.rule_id == "restart_permission")
    lines = [f"{n}: {changes.pop(n)} left out (restart not allowed: {why.split(' and ', 1)[-1]})" for n in blocked]
    for n in blocked:
        sources.pop(n, None)
    return lines


def _floor(
    ctx: PlanningContext,
    refused: list[FailedCheck],
    changes: dict[str, str],
    sources: dict[str, str],
    kept: dict[str, str],
) -> list[Floor]:
    """:func:`capacity_floors` applied in place: each knob at its floor (its source saying why, and where the
    set's figure came from) or out of ``changes`` and ``sources`` and into ``kept`` with why."""
    fixes = capacity_floors(ctx, changes, refused)
    for fix in fixes:
        was = sources.pop(fix.knob, "")
        if fix.value is None:
            changes.pop(fix.knob)
            kept[fix.knob] = fix.why
            continue
        changes[fix.knob] = fix.value
        sources[fix.knob] = f"capacity floor: {fix.why}" + (f"; the set's figure came from {was}" if was else "")
    return fixes


@dataclass(frozen=True)
class Floor:
    """One capacity repair: ``knob`` set to ``value`` (its floor, in the server's spelling), or left at the value
    in effect (``value`` None); ``why`` (the rule, the floor or why there is none, the validator's message),
    ``line`` (``"key_buffer_size: 2097152 → 8388608 (capacity floor: …)"``) and ``short`` for the rationale."""

    knob: str
    value: str | None
    why: str
    line: str
    short: str


def capacity_floors(ctx: PlanningContext, changes: dict[str, str], refused: list[FailedCheck]) -> list[Floor]:
    """The repair of each ``capacity`` refusal of ``refused`` on a knob of ``changes`` (validators/*.toml
    ``[[capacity]]``; the validator's ``FailedCheck.floor``: blocks in use × block size × (1 +
    ``policy.capacity_headroom``) for the MariaDB caches): the knob set to its floor rounded up (whole MiB for
    sizes of 1 MiB or more, the knob's block size, its range) when that is still below the value in effect; else
    — no observation of its use (the rule then allows no lowering), a floor not below the value in effect, or a
    floor the set already had and the rule refused again — left at the value in effect. The rule itself is the
    validator's; this only moves the set to what it allows.

    Returns:
        One :class:`Floor` per refused knob of ``changes``, in the order of ``refused``.
    """
    family = family_of(ctx.catalog.target)
    cur = current_config(ctx)
    out: list[Floor] = []
    for f in refused:
        knob = next((k for k in changes if k.lower() == f.parameter.lower()), None)
        spec = ctx.catalog.knobs.get(f.parameter) or (ctx.catalog.knobs.get(knob) if knob else None)
        if knob is None or spec is None:
            continue
        now = cur.get(spec.name, spec.default)
        value, why = _floor_value(family, spec, f, now)
        if value is not None and value == changes[knob]:
            value, why = None, f"its floor {value} was refused again"
        rule = f"rule {f.rule_id}" if f.rule_id else "the capacity rule"
        if value is None:
            why = f"left at the value in effect {now}: {why} ({f.message})"
            out.append(
                Floor(knob, None, why, f"{knob}: {changes[knob]} left out (capacity: {why})", f"{knob} kept at {now}")
            )
            continue
        why = (
            f"the least value {rule} allows, below the value in effect {now}; {changes[knob]} was refused: {f.message}"
        )
        line = f"{knob}: {changes[knob]} → {value} (capacity floor: {why})"
        out.append(Floor(knob, value, why, line, f"{knob} {changes[knob]} → {value} (the floor of {rule})"))
    return out


def _floor_value(family: str, spec: KnobSpec, refusal: FailedCheck, now: str | None) -> tuple[str | None, str]:
    """(``spec``'s floor from ``refusal.floor`` rounded up, in the server's spelling; "") or (None, why none)."""
    if refusal.floor is None:
        return None, "no observation of its use to set a floor from (the rule lowers it not at all without one)"
    per = quantity(family, spec, 1.0)
    base = refusal.floor / per if per > 0 else None
    current = parse_value(now, spec)
    if base is None or current is None:
        return None, "its floor or the value in effect is not a number"
    ub = unit_bytes(spec.unit)
    if spec.vartype == "integer":
        if ub and base * ub >= MiB:
            base = math.ceil(base * ub / MiB) * MiB / ub
        if spec.block_size:
            base = math.ceil(base / spec.block_size) * spec.block_size
        base = float(math.ceil(base))
    else:
        base = math.ceil(base * 1000) / 1000  # format_value writes a real with 3 decimals: never below the floor
    if spec.min_value is not None:
        base = max(base, spec.min_value)
    if base >= current or (spec.max_value is not None and base > spec.max_value):
        return None, f"its floor {format_value(base, spec, family)} is not below the value in effect"
    return str(format_value(base, spec, family)), ""


def _apply(
    ctx: PlanningContext,
    changes: dict[str, str],
    sources: dict[str, str],
    moves: list[tuple[str, str, str]],
    kind: str,
) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """``changes``/``sources`` with ``moves`` applied (copies), and one line per move; no lines: no move."""
    out, src, lines = dict(changes), dict(sources), []
    for name, value, why in moves:
        lines.append(f"{name}: {out.get(name, current_config(ctx).get(name, '?'))} → {value} ({kind}: {why})")
        out[name] = value
        src[name] = f"{kind}: {why}"
    return out, src, lines


def _eased(after: SetVerdict, before: FailedCheck) -> bool:
    """Whether a move fixed the refusal or cut its excess by at least 1 MiB."""
    got = after.memory_refusal
    if after.ok or got is None:
        return after.ok or after.memory_only is False
    return before.excess_bytes is None or got.excess_bytes is None or got.excess_bytes <= before.excess_bytes - MiB


def _trade(ctx: PlanningContext, changes: dict[str, str], refusal: FailedCheck) -> list[tuple[str, str, str]]:
    """The gives of one trade move from the set's values: (knob, value, why) for each knob it lowers."""
    flavor = flavor_of(ctx.catalog)
    merged = {**current_config(ctx), **changes}
    grow = next((t.grow for t in load_trades() if flavor in t.families and t.grow in ctx.catalog.knobs), None)
    if grow is None:
        return []
    synthetic = refusal.model_copy(update={"parameter": grow, "value": merged.get(grow, "")})
    tctx = ctx.model_copy(update={"current_config": merged, "max_changes": 64, "validator_feedback": [synthetic]})
    proposal = trade_proposal(tctx, flavor, synthetic, "opening")
    if proposal is None:
        return []
    out = []
    for c in proposal.changes:
        if c.name != grow:
            use = measured_use(tctx, flavor, c.name, merged)
            out.append((c.name, str(c.value), f"pays for {grow}" + (f"; {use}" if use else "")))
    return out


def shrink_to_fit(ctx: PlanningContext, changes: dict[str, str], refusal: FailedCheck) -> list[tuple[str, str, str]]:
    """Lower the global buffers of the memory budget (``validators/<family>.toml`` ``[memory_budget].global``)
    that the set raises, each by its share of their total raise, so that together they give back the
    refusal's ``excess_bytes`` plus 1 MiB; none goes below the value in effect. [] when the raises cannot
    cover the excess or the refusal has no excess figure. Returns (knob, value, why) per knob lowered."""
    budget = load_ruleset(family_of(ctx.catalog.target)).memory_budget
    if budget is None or refusal.excess_bytes is None:
        return []
    family = family_of(ctx.catalog.target)
    cur = current_config(ctx)
    raises: dict[str, tuple[float, float]] = {}
    for name in budget.global_:
        spec = ctx.catalog.knobs.get(name)
        if spec is None or name not in changes:
            continue
        new, old = parse_value(changes[name], spec), parse_value(cur.get(name, spec.default), spec)
        nb = bytes_of(family, spec, new) if new is not None else None
        ob = bytes_of(family, spec, old) if old is not None else None
        if nb is not None and ob is not None and nb > ob:
            raises[name] = (nb, ob)
    total = sum(nb - ob for nb, ob in raises.values())
    need = refusal.excess_bytes + MiB
    if total <= need:
        return []
    moves: list[tuple[str, str, str]] = []
    for name, (nb, ob) in raises.items():
        spec = ctx.catalog.knobs[name]
        target = max(nb - (nb - ob) * need / total, ob)
        ub = unit_bytes(spec.unit) or 1
        value = str(format_value(round_base(target / ub, spec), spec, family))
        why = f"gives {(nb - target) / MiB:.0f} MiB of the budget's {refusal.excess_bytes / MiB:.0f} MiB excess"
        moves.append((name, value, why))
    log.info("opening.shrink", moves=moves, excess_bytes=refusal.excess_bytes, reason="no trade move fits the set")
    return moves
