"""One round's plan: the planning context, the planner's proposal and the validator's verdict.

The planner proposes; the validator checks the proposal against the live configuration, the host and
the policy; a rejected proposal goes back to the planner with the failed checks, at most
``loop.max_planner_retries`` times (docs/architecture.md "The round": rejected → feedback → bounded
retries). Neither the planner nor the validator is changed by this module; it only carries the context
and the feedback between them and journals each proposal and verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog
from pydantic import BaseModel

from agenticdb.config.sections import PolicyConfig, in_window
from agenticdb.loop.stage import StageState
from agenticdb.models import (
    Decision,
    FailedCheck,
    Layer,
    Observed,
    Proposal,
    RoundOutcome,
    RuntimeProfile,
    StateDelta,
    Verdict,
)
from agenticdb.models.planning import Experience, Fingerprint, PlanningContext
from agenticdb.planner.base import Planner
from agenticdb.validation.validator import validate

log = structlog.get_logger(__name__)

Record = Callable[[str, BaseModel | dict[str, Any]], None]
"""Journals one event of the round: ``record(event, payload)``."""


@dataclass
class Plan:
    """The outcome of planning one round.

    Attributes:
        proposal: the last proposal the planner made.
        verdict: the validator's verdict on it (None when the planner had nothing to propose).
        rejected: failed checks of every rejected attempt, in order.
    """

    proposal: Proposal
    verdict: Verdict | None = None
    rejected: list[FailedCheck] = field(default_factory=list)

    @property
    def plateau(self) -> bool:
        """The planner has nothing (promising) left for this stage."""
        return self.proposal.plateau or not self.proposal.changes

    @property
    def accepted(self) -> bool:
        """The validator accepted the proposal: its normalised changes may be applied."""
        return self.verdict is not None and self.verdict.ok

    def outcome(self, session_id: str, round_no: int, layer: Layer) -> RoundOutcome:
        """The round's record as planning leaves it: what was believed and proposed, the verdict, the
        changes (normalised when accepted, as proposed when rejected). The auditor decides later."""
        p = self.proposal
        out = RoundOutcome(
            session_id=session_id,
            round_no=round_no,
            stage=layer,
            bottleneck=p.bottleneck,
            proposal=p,
            failed_checks=self.rejected,
            decision=Decision.continue_,
            reason="",
        )
        if self.plateau:
            out.decision, out.reason = Decision.terminate, p.rationale or "planner has nothing left"
        elif self.verdict is not None and self.verdict.ok:
            out.verdict_ok, out.failed_checks = True, self.verdict.failed
            out.changes = {c.name: c.value for c in self.verdict.changes}
        else:
            out.changes = {c.name: str(c.value) for c in p.changes}
        return out

    def line(self) -> str:
        """One line for the round's step record."""
        if self.plateau:
            return f"nothing left to try: {self.proposal.rationale or 'planner has nothing left'}"
        if not self.accepted:
            return f"rejected: {self.rejected[-1].message if self.rejected else 'no reason given'}"
        assert self.verdict is not None
        tried = ", ".join(f"{c.name}={c.value}" for c in self.verdict.changes)
        return f"{self.proposal.bottleneck.value}: {tried}"


def planning_context(
    stage: StageState,
    layer: Layer,
    profile: RuntimeProfile,
    fp: Fingerprint,
    rounds: Sequence[RoundOutcome],
    experience: list[Experience],
    current: dict[str, str],
    last_delta: StateDelta | None,
    policy: PolicyConfig,
) -> PlanningContext:
    """Everything the planner may read this round (the stage's tunable catalog, rivals left out).

    ``allow_restart`` is whether the validator (:func:`check`) would allow a restart now: the policy, a target whose
    service restarts, the restart window. A planner told the policy's word alone proposed restart-only knobs the
    check then refused: the MariaDB trade move paid for a bigger buffer pool with aria_pagecache_buffer_size on a
    service that cannot restart, the proposal was refused whole and the refused growth never traded again.
    """
    restart_now = policy.allow_restart and stage.target.can_restart() and in_window(policy.restart_window)
    return PlanningContext(
        profile=profile,
        fingerprint=fp,
        catalog=stage.tunable,
        stage=layer,
        rounds=list(rounds),
        experience=experience,
        best_config=dict(stage.changes),
        current_config=current,
        last_delta=last_delta,
        max_changes=policy.max_changes,
        max_step_factor=policy.max_step_factor,
        allow_restart=restart_now,
        durability=policy.durability,
        capacity_headroom=policy.capacity_headroom,
        untrusted_text=stage.target.log_tail(10),
    )


def check(
    proposal: Proposal,
    stage: StageState,
    profile: RuntimeProfile,
    layer: Layer,
    policy: PolicyConfig,
    load: StateDelta | None = None,
) -> Verdict:
    """The validator's verdict on ``proposal`` against the stage's live values and restart ability.

    ``load`` is the latest measured run's state (gauges sampled while the workload ran): capacity rules
    never lower a setting such as max_connections below the peak seen there plus headroom. A rule's gauge
    no sample carries (``memory_tables.*``) is read from the target now (``Target.rule_gauges``).
    """
    current = stage.target.current_values(list(stage.catalog.knobs))
    gauges: dict[str, float] = {}
    for seen in (profile.baseline_state, load):
        for name, value in (seen.gauges if seen is not None else {}).items():
            gauges[name] = max(value, gauges.get(name, value))
    return validate(
        proposal,
        stage.tunable,
        current,
        profile.hardware,
        policy,
        layer,
        can_restart=stage.target.can_restart(),
        observed=Observed(gauges=gauges, read=stage.target.rule_gauges),
    )


def plan_round(
    planner: Planner,
    ctx: PlanningContext,
    check_proposal: Callable[[Proposal], Verdict],
    retries: int,
    record: Record,
    round_no: int,
) -> Plan:
    """Ask the planner, validate, and hand rejections back as feedback up to ``retries`` times.

    Journals every ``proposal`` and ``verdict``. Stops at once when the planner has nothing left.

    Raises:
        PlannerError: the planner cannot plan at all (e.g. the LLM endpoint refused the key).
    """
    plan: Plan | None = None
    rejected: list[FailedCheck] = []
    for attempt in range(retries + 1):
        proposal = planner.propose(ctx)
        record("proposal", proposal)
        log.info(
            "round.proposed",
            round=round_no,
            attempt=attempt + 1,
            bottleneck=proposal.bottleneck.value,
            changes={c.name: c.value for c in proposal.changes},
            plateau=proposal.plateau,
        )
        plan = Plan(proposal, None, list(rejected))
        if plan.plateau:
            return plan
        plan.verdict = check_proposal(proposal)
        record("verdict", plan.verdict)
        if plan.verdict.ok:
            return plan
        log.info("round.rejected", round=round_no, attempt=attempt + 1, failed=plan.verdict.feedback())
        rejected += plan.verdict.failed
        plan.rejected = list(rejected)
        ctx = ctx.model_copy(update={"validator_feedback": list(plan.verdict.failed)})
    assert plan is not None
    return plan
