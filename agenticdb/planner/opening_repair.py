"""Repair of a whole candidate set that the memory budget refuses (issue 36): the planner's trade move first
(``agenticdb.planner.trade``: grow the cache, pay with per-session and maintenance memory), then a shrink of the
global buffers the set raises, in proportion to their raise. A set that still does not fit is dropped with the
validator's reasons. max_connections is never lowered (a DBA's requirement)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import structlog

from agenticdb.dialect import family_of
from agenticdb.models import ApplyMode, FailedCheck
from agenticdb.models.planning import PlanningContext
from agenticdb.planner.opening_types import Candidate
from agenticdb.planner.opening_values import MiB, current_config
from agenticdb.planner.playbook import round_base
from agenticdb.planner.trade import load_trades, measured_use, trade_proposal
from agenticdb.units import bytes_of, format_value, parse_value, unit_bytes
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
    restart), alone or beside the memory budget's, the restart-only knobs are left out and the rest of the set
    is judged again.

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
    sv = check(changes, cand.name)
    moves = 0  # trades and shrinks; leaving restart-only knobs out is no repair (it ends: each removes one)
    while moves < MAX_REPAIRS:
        if sv.ok:
            break
        refusal = sv.memory_refusal
        blocked = [f.parameter for f in sv.verdict.failed if f.rule_id == "restart_permission"]
        rest = [f for f in sv.verdict.failed if f.rule_id not in ("restart_permission", "memory_budget")]
        if blocked and not rest and len(blocked) < len(changes):
            # a restart is not allowed now (policy.allow_restart / restart_window): the rest of the set still is,
            # and a memory refusal beside it is judged (and repaired) on that rest: the limits set, whose
            # innodb_log_buffer_size is restart-only, was dropped whole on a service that cannot restart
            why = next(f.message for f in sv.verdict.failed if f.rule_id == "restart_permission")
            repaired += [
                f"{n}: {changes.pop(n)} left out (restart not allowed: {why.split(' and ', 1)[-1]})" for n in blocked
            ]
            for n in blocked:
                sources.pop(n, None)
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
    return _with_modes(ctx, replace(cand, changes=changes, sources=sources, repaired=tuple(repaired)), sv), ""


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
