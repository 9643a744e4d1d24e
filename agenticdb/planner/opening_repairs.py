"""The playbook's floors and traps that every opening candidate carries.

A whole configuration that leaves a known harmful setting in place is not a coherent whole: a candidate
sized for the host but keeping ``enable_indexscan = off`` or ``commit_delay = 100000`` would lose its
screen to the fault, not to its own sizing (the 2026-12-06 scenario runs: pg-decoy-indexscan-off's
opening raced three sets that all kept the −99 % fault, and the repair came only in a later round when
the budget was gone). So the ``[[floor]]`` rules of ``catalogs/playbook-<family>.toml`` — traps put back
to their default, sizes raised to their floor — are computed once for the configuration in effect, with
the same rules and history the heuristic planner's rounds use (:meth:`HeuristicPlanner.floor_moves`),
and added to every candidate for the knobs the candidate does not set itself; its own value wins.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import structlog

from agenticdb.models.planning import PlanningContext
from agenticdb.planner.heuristic import HeuristicPlanner
from agenticdb.planner.opening_types import Candidate
from agenticdb.planner.opening_values import current_config
from agenticdb.planner.playbook import HostFacts, load_playbook

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Repair:
    """One floor or trap repair: the knob, its value in the server's spelling, the value in effect, and
    the rule's source (as the playbook states it)."""

    knob: str
    value: str
    current: str | None
    source: str
    trap: bool


def playbook_repairs(ctx: PlanningContext, flavor: str) -> list[Repair]:
    """The ``[[floor]]`` moves of ``flavor``'s playbook for ``ctx``'s configuration in effect.

    Args:
        ctx: the planner's context after the baseline (catalog, configuration in effect, hardware, rounds).
        flavor: the playbook family ("postgresql", "mariadb", "mysql").

    Returns:
        The repairs, one per knob, in the playbook's order (empty when nothing is below a floor or trapped).
    """
    planner = HeuristicPlanner()
    cur = current_config(ctx)
    facts = HostFacts.of(ctx.profile.hardware, cur)
    moves = planner.floor_moves(ctx, load_playbook(flavor), cur, facts, flavor, planner.history(ctx, cur))
    out: dict[str, Repair] = {}
    for m in moves:
        out.setdefault(m.name, Repair(m.name, str(m.value), m.current, m.source, m.trap))
    return list(out.values())


def with_repairs(cand: Candidate, repairs: list[Repair]) -> Candidate:
    """``cand`` plus every repair for a knob it does not set (its own value wins); the rationale says which
    were added. Returns ``cand`` itself when no repair is added."""
    added = [r for r in repairs if r.knob not in cand.changes]
    if not added:
        return cand
    kind = {True: "trap put back", False: "raised to its floor"}
    changes = {**{r.knob: r.value for r in added}, **cand.changes}
    sources = {**{r.knob: f"playbook floor ({kind[r.trap]}): {r.source}" for r in added}, **cand.sources}
    words = ", ".join(f"{r.knob} {r.current} → {r.value}" for r in added)
    log.info("opening.repairs_added", candidate=cand.name, knobs=[r.knob for r in added], reason=words)
    return replace(
        cand,
        changes=changes,
        sources=sources,
        rationale=f"{cand.rationale} Known harmful or below-floor settings repaired as in every candidate: {words}.",
    )
