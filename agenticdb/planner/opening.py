"""The opening (issue 36 point 1): up to K whole candidate configurations, each validated as one set.

Sources, each a coherent set with a rationale and a source per knob, different from each other by design:

- ``host-sized`` — what a DBA's sizing tool writes for this host (PGTune / MySQLTuner and the MariaDB KB;
  :mod:`agenticdb.planner.opening_host`);
- ``evidence`` — what the baseline's own statistics show (JIT and parallel shares, temp spill, buffer
  misses, WAL/checkpoint pressure, data size against the cache);
- ``limits`` — the playbook's limits for the diagnosed workload class;
- ``experience`` — the nearest experience's best configuration scaled to this host (when there is one);
- ``llm`` — the LLM planner's whole configuration (when an LLM planner is given).

The last two, when present, replace the weakest of the first three (the one that moves fewest knobs: it
departs least from the baseline already measured — judgement). Each candidate is validated as ONE set
(:func:`agenticdb.validation.sets.validate_set`: memory budget with every connection × hash_mem_multiplier,
durability, server checks, restart window; no per-round step bound unless ``policy.opening_step_bound`` keeps
it); a set that lowers a capacity setting too far gets it at its floor (or at the value in effect), a set over
the memory budget is repaired with the trade move (:mod:`agenticdb.planner.trade`; the order:
:mod:`agenticdb.planner.opening_repair`), else dropped with the reason. Restart-only knobs of the anchor
candidate (host-sized when present) are shared by the others where their set does not name its own, so the race
restarts once. Identical sets are merged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

import structlog

from agenticdb.config.sections import PolicyConfig, in_window
from agenticdb.models import Observed, Proposal
from agenticdb.models.planning import PlanningContext
from agenticdb.planner.opening_evidence import evidence_driven
from agenticdb.planner.opening_host import host_sized
from agenticdb.planner.opening_learned import from_experience, from_llm
from agenticdb.planner.opening_limits import at_limits
from agenticdb.planner.opening_repair import repair_set
from agenticdb.planner.opening_repairs import playbook_repairs, with_repairs
from agenticdb.planner.opening_types import SOURCES, Candidate, Opening
from agenticdb.planner.opening_values import (
    HostView,
    SourceInput,
    SourceOutput,
    current_config,
    delta_of,
    host_view,
    with_data_size,
)
from agenticdb.targets.postgres_plans import PlanEvidence
from agenticdb.validation.sets import SetVerdict, step_bound_for, validate_set
from agenticdb.validation.validator import flavor_of

__all__ = ["Candidate", "Opening", "generate_opening", "repair_set"]

log = structlog.get_logger(__name__)

LEARNED = ("experience", "llm")
"""Sources that, when they produce a set, replace the weakest of the rule-based ones."""

Source = Callable[[SourceInput], SourceOutput]


def _sources() -> dict[str, Source]:
    """The sources by name, in the order they are asked (:data:`LEARNED` replace the weakest of the others)."""
    return {
        "host-sized": host_sized,
        "evidence": evidence_driven,
        "limits": at_limits,
        "experience": from_experience,
        "llm": from_llm,
    }


def generate_opening(
    ctx: PlanningContext,
    k: int = 3,
    *,
    llm: object | None = None,
    policy: PolicyConfig,
    can_restart: bool = True,
    now: datetime | None = None,
    observed: Observed | None = None,
    live: bool | None = None,
    plans: PlanEvidence | None = None,
    read: Callable[[list[str]], dict[str, float]] | None = None,
) -> Opening:
    """Up to ``k`` validated whole configurations for ``ctx``'s server (DBMS stage).

    Args:
        ctx: the planner's context after the baseline (profile with hardware and current configuration,
            fingerprint, catalog, the baseline's statistics delta, retrieved experience).
        k: at most this many candidates (≥ 1).
        llm: an ``agenticdb.planner.llm.LLMPlanner`` whose whole configuration is one candidate; None: no
            LLM candidate.
        policy: the safety policy (durability, memory_fraction, restart permission and window,
            ``opening_step_bound``).
        can_restart: False when the target's service cannot be restarted. Then, and when the policy forbids a
            restart or ``now`` is outside its window, the sources and the set repair size without restart-only
            knobs (the trade gives no restart-only cache, the pool counts no room from one).
        now: clock for the restart window (default: local now).
        observed: gauges for the measured memory budget and capacity floors (default: the baseline
            delta's gauges).
        live: live mode (a production workload); None: ``ctx.fingerprint.benchmark == "live"``.
        plans: plan evidence of the workload's own statements (PostgreSQL,
            ``agenticdb.targets.postgres_plans.explain_statements``, read once outside measured runs); None:
            the evidence source reads the baseline's statistics only and says what was not measured.
        read: the target's reader of gauges no runtime sample carries (``Target.rule_gauges``), for the
            default ``observed``: a capacity rule reads its gauge from the server when a set lowers its setting;
            and MariaDB/MySQL's data size, read once here (``opening_values.with_data_size``).

    Returns:
        Opening: candidates (validated, deduplicated, restart knobs shared where possible), the absent
        sources with why, notes on evidence not measured, and dropped sets with the reason.

    Raises:
        ValueError: ``k`` < 1.
    """
    if k < 1:
        raise ValueError(f"k={k}: the opening needs at least one candidate (rule: 1 ≤ k)")
    flavor = flavor_of(ctx.catalog)
    host = with_data_size(host_view(ctx, flavor), read)  # MariaDB's: read now, too slow for every sample
    if observed is None:
        delta = delta_of(ctx)
        observed = Observed(gauges=dict(delta.gauges), read=read) if delta is not None else None
    live = ctx.fingerprint.benchmark == "live" if live is None else live
    bound = step_bound_for(policy, live)
    # the sources and the set repair size with a restart-only knob only when the check below would allow its
    # restart now: a pool sized on the room of aria_pagecache_buffer_size (restart-only) was repaired by giving
    # that cache, the restart refused, the cache put back, four times over, and the set dropped (a service
    # that cannot restart or a closed restart window lost its host-sized and evidence sets)
    restart_now = can_restart and ctx.allow_restart and policy.allow_restart and in_window(policy.restart_window, now)
    sizing = ctx if restart_now else ctx.model_copy(update={"allow_restart": False})
    raw, absent, notes, diagnosis = _collect(sizing, host, policy, llm, plans)
    repairs = playbook_repairs(ctx, flavor)  # every candidate carries the playbook's floors and traps
    raw = [with_repairs(c, repairs) for c in raw]
    dropped: list[tuple[str, str]] = []

    def check(changes: dict[str, str], label: str) -> SetVerdict:
        return validate_set(
            changes,
            ctx.catalog,
            current_config(ctx),
            ctx.profile.hardware,
            policy,
            step_bound=bound,
            can_restart=can_restart and ctx.allow_restart,
            now=now,
            observed=observed,
            label=label,
        )

    valid: list[Candidate] = []
    for cand in raw:
        got, why = repair_set(sizing, cand, check)
        if got is None:
            dropped.append((cand.name, why))
            log.info("opening.dropped", candidate=cand.name, reason=why)
        else:
            valid.append(got)
    valid = _share_restarts(valid, check)
    chosen = _dedupe(valid, k, dropped)
    opening = Opening(candidates=chosen, absent=absent, notes=notes, dropped=dropped, diagnosis=diagnosis)
    log.info(
        "opening.generated",
        candidates=[c.name for c in chosen],
        restart_knobs=opening.restart_knobs,
        absent=absent,
        dropped=dropped,
        step_bound=bound,
        reason=f"{len(chosen)} of {len(raw)} generated sets validated as whole configurations",
    )
    return opening


def _collect(
    ctx: PlanningContext, host: HostView, policy: PolicyConfig, llm: object | None, plans: PlanEvidence | None
) -> tuple[list[Candidate], list[str], list[str], Proposal | None]:
    """The sets the sources generate, the sources that produced none (with why), evidence notes, and the
    first diagnosis a source made of the baseline (the LLM's; None from rule-based sources)."""
    raw: list[Candidate] = []
    absent: list[str] = []
    notes: list[str] = []
    diagnosis: Proposal | None = None
    inp = SourceInput(ctx=ctx, host=host, policy=policy, plans=plans, llm=llm)
    for name, source in _sources().items():
        out = source(inp)
        notes += [n for n in dict.fromkeys(out.notes) if n not in notes]  # a note told twice was read as two
        diagnosis = diagnosis or out.diagnosis
        if out.candidate is None or not out.candidate.changes:
            absent.append(f"{name}: {out.why or 'no change from the configuration in effect'}")
            continue
        raw.append(out.candidate)
    absent += [f"{n}: source not built" for n in SOURCES if n not in _sources()]
    return raw, absent, notes, diagnosis


def _dedupe(valid: list[Candidate], k: int, dropped: list[tuple[str, str]]) -> list[Candidate]:
    """At most ``k`` pairwise different sets: duplicates go; each learned candidate (:data:`LEARNED`) replaces
    the weakest rule-based one — the one that moves fewest knobs, as it departs least from the baseline
    already measured (judgement) — and anything beyond ``k`` goes; ``dropped`` says why."""
    chosen: list[Candidate] = []
    for cand in valid:
        twin = next((c for c in chosen if c.key() == cand.key()), None)
        if twin is not None:
            dropped.append((cand.name, f"the same configuration as {twin.name}"))
            continue
        chosen.append(cand)
    learned = [c for c in chosen if c.name in LEARNED]
    base = [c for c in chosen if c.name not in LEARNED]
    for replacing in learned:
        if not base or len(base) + len(learned) <= k:
            break
        weakest = min(reversed(base), key=lambda c: len(c.changes))
        base.remove(weakest)
        dropped.append(
            (weakest.name, f"replaced by {replacing.name}: the weakest rule-based set ({len(weakest.changes)} knobs)")
        )
    kept = [c for c in chosen if c in base or c in learned]
    dropped += [(c.name, f"beyond k={k}") for c in kept[k:]]
    return kept[:k]


def _share_restarts(cands: list[Candidate], check: Callable[[dict[str, str], str], SetVerdict]) -> list[Candidate]:
    """Give every candidate that restarts the server the anchor's restart-only values it does not set itself
    (anchor: host-sized when present, else the first that restarts), when the set still validates. Candidates
    that need no restart are left alone: the race runs them before any restart (:meth:`Opening.race_order`),
    so the race restarts once per distinct restart-only configuration, usually once."""
    restarting = [c for c in cands if c.needs_restart]
    if len(restarting) < 2:
        return cands
    anchor = next((c for c in restarting if c.name == "host-sized"), restarting[0])
    shared = {k: anchor.changes[k] for k in anchor.restart_knobs}
    out: list[Candidate] = []
    for c in cands:
        missing = {k: v for k, v in shared.items() if k not in c.changes}
        if c is anchor or not c.needs_restart or not missing:
            out.append(c)
            continue
        changes = {**c.changes, **missing}
        sv = check(changes, c.name)
        if not sv.ok:
            log.info("opening.restart_not_shared", candidate=c.name, reason=sv.reasons())
            out.append(c)
            continue
        sources = {**c.sources, **{k: f"shared with {anchor.name} (one restart for the race)" for k in missing}}
        modes = {**c.apply_modes, **{k: anchor.apply_modes[k] for k in missing}}
        out.append(replace(c, changes=changes, sources=sources, apply_modes=modes))
    return out
