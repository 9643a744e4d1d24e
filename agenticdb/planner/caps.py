"""The validator's host ceilings as the planners see them: a knob's cap from cores (``[[cpu_limit]]``) and from
the memory limit (``[[ram_limit]]``), so a proposal or a search range stops where the validator would refuse."""

from __future__ import annotations

from agenticdb.dialect import family_of
from agenticdb.models.planning import PlanningContext
from agenticdb.validation.rules import load_ruleset
from agenticdb.validation.validator import flavor_of

__all__ = ["cpu_cap", "host_cap", "ram_cap"]


def cpu_cap(ctx: PlanningContext, name: str) -> float | None:
    """The validator's ``[[cpu_limit]]`` ceiling for ``name`` on this host (per_core × cores + plus, in the
    knob's base unit), the lowest when several rules apply; None when no rule names it.

    The search range ends there, so TPE does not spend the round's planning retries on suggestions the
    validator refuses (max_parallel_workers_per_gather searched in [1, 8] on 2 cores: three refusals and
    a round with nothing measured, demo 2026-12-03)."""
    flavor, version = flavor_of(ctx.catalog), ctx.catalog.version
    caps = [
        lim.cap(ctx.profile.hardware.cpu_count)
        for lim in load_ruleset(family_of(ctx.catalog.target)).cpu_limit
        if lim.parameter.lower() == name.lower() and lim.applies(flavor, version)
    ]
    return min(caps) if caps else None


def ram_cap(ctx: PlanningContext, name: str) -> float | None:
    """The validator's ``[[ram_limit]]`` ceiling for ``name`` (fraction × the host's memory limit, min(RAM,
    cgroup limit), in the knob's own unit: vm.min_free_kbytes in kB), the lowest when several rules apply;
    None when no rule names it. Under a 256 MiB cgroup the Linux playbook sized min_free_kbytes from RAM and
    the validator refused it twice (scenario os-read-ahead-tiny, 2026-12-03)."""
    mem = ctx.profile.hardware.memory_limit_bytes  # what validation/host.py checks against
    if not mem:
        return None
    flavor, version = flavor_of(ctx.catalog), ctx.catalog.version
    caps = [
        lim.cap(mem)
        for lim in load_ruleset(family_of(ctx.catalog.target)).ram_limit
        if lim.parameter.lower() == name.lower() and lim.applies(flavor, version)
    ]
    return min(caps) if caps else None


def host_cap(ctx: PlanningContext, name: str) -> float | None:
    """The lower of :func:`cpu_cap` and :func:`ram_cap` (the validator's host ceilings), None when neither
    rule names ``name``: a planner that proposes above it wastes a round on a refusal."""
    caps = [c for c in (cpu_cap(ctx, name), ram_cap(ctx, name)) if c is not None]
    return min(caps) if caps else None
