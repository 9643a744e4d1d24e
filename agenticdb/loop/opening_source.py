"""The opening's candidates and diagnosis (issue 36): the generator with the session's policy and LLM planner.

:func:`default_source` is the opening's candidate source (``agenticdb.planner.opening.generate_opening`` with
the session's policy, its LLM planner when it has one and the plans of the workload's own statements);
:func:`journal_diagnosis` journals what the baseline showed as the session's planner diagnosed it (the
``diagnosis`` event the scenario suite scores). ``loop.opening_run`` runs the opening with them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

import structlog

from agenticdb.models import Layer, Proposal
from agenticdb.planner.diagnosis import diagnose
from agenticdb.planner.heuristic import HeuristicPlanner
from agenticdb.planner.heuristic import _family as family_of_context
from agenticdb.planner.opening_types import Opening

if TYPE_CHECKING:
    from agenticdb.config import Settings
    from agenticdb.loop.initializer import Start
    from agenticdb.loop.steps import SessionRecorder
    from agenticdb.models.planning import PlanningContext
    from agenticdb.planner.base import Planner
    from agenticdb.planner.llm import LLMPlanner
    from agenticdb.targets.base import Target
    from agenticdb.workloads.base import Workload

log = structlog.get_logger(__name__)


class SourceParts(Protocol):
    """What the candidate source uses of ``loop.session.TuningSession``."""

    cfg: Settings
    planner: Planner
    target: Target
    workload: Workload


OpeningSource = Callable[["PlanningContext", int], Opening]
"""``source(ctx, k)`` → the opening: up to k candidates in the generator's order, the sources absent and the sets
dropped with why, evidence notes, and the LLM planner's diagnosis when it gave one (``Opening.diagnosis``)."""


def default_source(session: SourceParts) -> OpeningSource:
    """The opening's generator (``agenticdb.planner.opening.generate_opening``) with the session's policy and
    its LLM planner when it has one (its whole configuration is then a candidate, its reply's bottleneck the
    session's diagnosis)."""

    def source(ctx: PlanningContext, k: int) -> Opening:
        from agenticdb.planner.opening import generate_opening  # lazy: the generator loads its data on use
        from agenticdb.planner.opening_plans import workload_plans  # lazy: as above

        # the plans of the workload's own statements, read once outside measured runs (issue 36 point 4): the JIT and
        # parallel-query evidence of a query set (dropped by 33133b1: a demo read "parallel-query share not measured")
        plans, no_plans = workload_plans(ctx, session.workload)
        opening = generate_opening(
            ctx,
            k,
            llm=llm_of(session.planner),
            policy=session.cfg.policy,
            can_restart=session.target.can_restart(),
            plans=plans,
            read=session.target.rule_gauges,
        )
        said = f"plan evidence: {plans.summary()}" if plans is not None else f"plan evidence not read: {no_plans}"
        return replace(opening, notes=[said, *opening.notes])

    return source


def llm_of(planner: object) -> LLMPlanner | None:
    """The LLM planner inside ``planner`` (the refinement search and the harness's timing wrapper hold theirs
    as ``inner``), or None."""
    from agenticdb.planner.llm import LLMPlanner  # lazy: the openai client's import cost, for LLM sessions only

    for _ in range(4):
        if isinstance(planner, LLMPlanner):
            return planner
        planner = getattr(planner, "inner", None)
    return None


def journal_diagnosis(
    ctx: PlanningContext,
    start: Start,
    cfg: Settings,
    planner: Planner,
    rec: SessionRecorder,
    llm_diagnosis: Proposal | None,
) -> Proposal:
    """Journal what the baseline showed, as the session's ``planner`` diagnosed it; returns that diagnosis.

    The LLM planner's diagnosis is the bottleneck, evidence and rationale of the reply that gave its whole
    configuration (``llm_diagnosis``); any other planner's is the playbook's (the heuristic planner's
    first proposal). An LLM planner that gave no usable reply is said so and the playbook's stands in.
    The playbook's scored hypotheses are journaled either way (``playbook`` names its bottleneck)."""
    family = family_of_context(ctx)
    last = start.baseline[-1] if start.baseline else None
    hyps = diagnose(start.delta, start.profile, family, Layer.dbms, last)
    playbook = HeuristicPlanner(min_gain=cfg.loop.min_gain).propose(ctx)
    llm = llm_of(planner)
    if llm is not None and llm_diagnosis is not None:
        first, by = llm_diagnosis, f"the LLM planner ({llm.model}): the reply that gave its whole configuration"
    elif llm is not None:
        first = playbook
        by = "the playbook's diagnosis of the baseline's statistics: the LLM planner gave no usable reply"
    else:
        first, by = playbook, "the playbook's diagnosis of the baseline's statistics (heuristic planner)"
    rec.event(
        "diagnosis",
        {
            "bottleneck": first.bottleneck.value,
            "by": by,
            "planner": "llm" if first is llm_diagnosis else "heuristic",
            "evidence": first.evidence,
            "rationale": first.rationale,
            "playbook": playbook.bottleneck.value,
            "hypotheses": [
                {
                    "bottleneck": h.bottleneck.value,
                    "score": h.score,
                    "evidence": h.evidence,
                    "ruled_out": h.ruled_out,
                }
                for h in hyps
            ],
        },
        1,
    )
    log.info("opening.diagnosis", bottleneck=first.bottleneck.value, by=by, reason="what the baseline showed")
    return first
