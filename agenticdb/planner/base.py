"""The ``Planner`` interface: a PlanningContext in, a Proposal (diagnosis–action record) out."""

from __future__ import annotations

from abc import ABC, abstractmethod

from agenticdb.models import Proposal
from agenticdb.models.planning import PlanningContext

ADJUSTABLE_CHECKS = frozenset({"range", "hardware", "step"})
"""Validator checks after which another value of the same knob may pass (a smaller step, a size that fits).
Any other failed check — unknown, protected, dangerous, durability, enum, type, unit, conflict, apply,
stage, a person's ``approval`` refusal — bans the knob for the rest of the session, in every planner."""


def bans_knob(check: str) -> bool:
    """True when a failed ``check`` rules the knob out for the session (see :data:`ADJUSTABLE_CHECKS`)."""
    return check not in ADJUSTABLE_CHECKS


class PlannerError(RuntimeError):
    """The planner could not produce a proposal (no endpoint, invalid replies, nothing left to try)."""


class Planner(ABC):
    """Produces one Proposal per call; must never return a change already rejected or failed."""

    name: str
    refines: bool = False
    """True for a planner that continues with model-based search after its playbook
    (``agenticdb.planner.search.RefiningPlanner``): the session then stops on ``loop.search_patience``."""

    @abstractmethod
    def propose(self, ctx: PlanningContext) -> Proposal:
        """Diagnose the bottleneck from ``ctx`` and propose changes for ``ctx.stage``.

        Returns a Proposal with ``plateau=True`` and no changes when nothing promising is left.
        Raises PlannerError when it cannot plan at all.
        """

    def usage(self) -> dict[str, float]:
        """Accounting of calls this planner made to outside services (the LLM planner: calls, tokens,
        cost in USD, latency in ms, fallbacks); empty for planners that call nothing."""
        return {}
