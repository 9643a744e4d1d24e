"""The last two checks of a change set: bounded steps (count and factor per round) and the verified apply
requirement with the restart permission and window (docs/safety.md)."""

from __future__ import annotations

import math
from datetime import datetime

from agenticdb.config.sections import PolicyConfig, in_window
from agenticdb.models import ApplyMode, Catalog, FailedCheck, KnobSpec, NormalizedChange, Proposal
from agenticdb.units import UnitError, normalize, readable
from agenticdb.validation.resulting import ResultingConfig


def step_bounds(
    proposal: Proposal,
    changes: list[NormalizedChange],
    before: ResultingConfig,
    policy: PolicyConfig,
    family: str,
    catalog: Catalog,
) -> list[FailedCheck]:
    """Bounded steps (docs/safety.md): count and factor per round."""
    failed: list[FailedCheck] = []
    if len(proposal.changes) > policy.max_changes:
        failed.append(
            FailedCheck(
                check="step",
                parameter="(proposal)",
                value=str(len(proposal.changes)),
                rule_id="max_changes",
                source="policy.max_changes",
                message=f"{len(proposal.changes)} changes in one round (parameters: "
                f"{', '.join(c.name for c in proposal.changes)}); rule max_changes allows "
                f"{policy.max_changes}",
            )
        )
    f = policy.max_step_factor
    for ch in changes:
        old = before.base(ch.name)
        new = ch.base_value
        if old is None or new is None or old <= 0 or new <= 0:
            continue  # special values (0, -1 = auto) have no ratio; ranges and budgets bound them
        ratio = new / old
        spec = catalog.knobs[ch.name]
        if (ratio > f or ratio < 1 / f) and not is_default(family, spec, new):
            low, high = old / f, old * f  # an integer knob's bounds as the whole values allowed: not "(12.5 .. 200)"
            if spec.vartype == "integer":
                low, high = math.ceil(low - 1e-9 * low), math.floor(high + 1e-9 * high)
            failed.append(
                FailedCheck(
                    check="step",
                    parameter=ch.name,
                    value=ch.value,
                    rule_id="max_step_factor",
                    source="policy.max_step_factor",
                    message=f"{ch.name}={ch.value} moves {ratio:.3g}× from the current "
                    f"{readable(family, spec, old)}; "
                    f"rule max_step_factor allows ×/÷ {f:g} per round "
                    f"({readable(family, spec, low)} .. {readable(family, spec, high)})",
                )
            )
    return failed


def is_default(family: str, spec: KnobSpec, base_value: float) -> bool:
    """``base_value`` (the knob's base unit) is the server's built-in default of the knob.

    A return to the default is not a step into the unknown (it is the configuration the server ships
    and documents), so the step factor does not bound it: putting back random_page_cost = 1e6 or
    effective_cache_size = 8kB (known traps, scenario suite of issue 22) takes one round, not ten.
    """
    if spec.default is None:
        return False
    try:
        d = normalize(family, spec, spec.default).base_value
    except UnitError:
        return False
    return d is not None and abs(d - base_value) <= 1e-9 * max(abs(d), 1.0)


def apply_requirement(
    proposal: Proposal,
    changes: list[NormalizedChange],
    policy: PolicyConfig,
    can_restart: bool,
    now: datetime | None,
) -> tuple[ApplyMode, list[FailedCheck], list[str]]:
    """Verified apply requirement: the strongest metadata mode of the changes (pg_settings.context,
    SYSTEM_VARIABLES.READ_ONLY); a restart needs permission, a restartable service and the window."""
    mode = ApplyMode.strongest([c.apply for c in changes])
    warnings: list[str] = []
    failed: list[FailedCheck] = []
    claim = proposal.apply_requirement
    if changes and claim.rank < mode.rank:
        # Name only the knobs that force the stronger mode (work_mem needs a reload, not the restart
        # that shared_buffers forces).
        needing = [c.name for c in changes if c.apply == mode]
        warnings.append(
            f"apply requirement corrected from {claim.value} to {mode.value}: "
            f"{', '.join(needing)} need{'s' if len(needing) == 1 else ''} {mode.value} (server metadata)"
        )
    elif changes and claim.rank > mode.rank:
        warnings.append(f"apply requirement {claim.value} claimed, metadata says {mode.value} is enough")
    if mode == ApplyMode.restart:
        when = now or datetime.now()
        reason = None
        if not policy.allow_restart:
            reason = "policy.allow_restart is false"
        elif not can_restart:
            reason = "the target's service cannot be restarted by agenticdb"
        elif not in_window(policy.restart_window, when):
            reason = f"{when:%H:%M} is outside policy.restart_window {policy.restart_window}"
        if reason:
            for c in changes:
                if c.apply == ApplyMode.restart:
                    failed.append(
                        FailedCheck(
                            check="apply",
                            parameter=c.name,
                            value=c.value,
                            rule_id="restart_permission",
                            source="policy.allow_restart / policy.restart_window",
                            message=f"{c.name}={c.value} takes effect only after a restart and {reason} "
                            "(rule apply: restarts only when allowed and inside the window)",
                        )
                    )
    return mode, failed, warnings
