"""The opening's learned candidates (issue 36): the nearest experience's best configuration scaled to this host,
and the LLM planner's whole configuration. When present they replace the weakest of the rule-based candidates
(``agenticdb.planner.opening``).

Experience: the first retrieved experience (the Memory Book ranks by fingerprint similarity,
``store.memory.experience.similarity``) whose best configuration beat its baseline. Memory sizes are scaled by
their fraction of the memory limit where they were learned (``Experience.best_config_relative``) to this host's
limit; worker counts are capped at the validator's per-core ceilings here (``planner.caps``); max_connections is
never taken (a DBA's requirement); knobs this server lacks are left out with a note.

LLM: ``LLMPlanner.propose_whole`` with the round's context (``planner.context``: profile, statistics,
diagnosis, experience, the catalog) and ``prompts/opening.txt`` (a whole configuration, no step bound, the
memory budget, durability). The validator judges its set like the others'.
"""

from __future__ import annotations

from agenticdb.models import Layer
from agenticdb.planner.caps import host_cap
from agenticdb.planner.context import render_prompt
from agenticdb.planner.opening_types import Candidate
from agenticdb.planner.opening_values import MiB, SetBuilder, SourceInput, SourceOutput, budget_bytes
from agenticdb.units import parse_value, unit_bytes

NEVER = frozenset({"max_connections"})
MAX_LLM_CHANGES = 24


def from_experience(inp: SourceInput) -> SourceOutput:
    """The nearest experience's best configuration, scaled to this host (module docstring)."""
    ctx = inp.ctx
    exp = next((e for e in ctx.experience if e.best_config and e.best_gain > 0), None)
    if exp is None:
        why = "no experience retrieved" if not ctx.experience else "no retrieved experience beat its baseline"
        return SourceOutput(None, why)
    b = SetBuilder(ctx)
    notes: list[str] = []
    mem = inp.host.memory_bytes
    where = exp.origin.host if exp.origin is not None else "an earlier session"
    for name, value in sorted(exp.best_config.items()):
        spec = ctx.catalog.knobs.get(name)
        if name in NEVER or spec is None or spec.layer != Layer.dbms:
            if spec is None and name not in NEVER:
                notes.append(f"experience: {name} is not a tunable knob of this server, left out")
            continue
        src = f"experience of session {exp.session_id} on {where} (best gain {exp.best_gain:+.1%})"
        frac = exp.best_config_relative.get(name, {}).get("fraction_of_memory")
        ub = unit_bytes(spec.unit)
        if isinstance(frac, int | float) and ub:
            b.put_bytes(name, frac * mem, f"{src}: {frac:.1%} of the memory limit there, scaled to {mem / MiB:.0f} MiB")
            continue
        base = parse_value(value, spec)
        cap = host_cap(ctx, name)
        if base is not None and cap is not None and base > cap:
            b.put(name, cap, f"{src}: {value} capped at this host's ceiling {cap:g}")
            continue
        b.put(name, str(value) if base is None else base, src)
    if not b.changes:
        return SourceOutput(None, f"session {exp.session_id}'s best configuration is in effect already", notes)
    cand = Candidate(
        name="experience",
        changes=dict(b.changes),
        rationale=f"the best configuration of the most similar earlier session ({exp.session_id}, "
        f"{exp.fingerprint.benchmark} {exp.fingerprint.workload_class}, gain {exp.best_gain:+.1%}), memory sizes "
        "scaled to this host's limit",
        sources=dict(b.sources),
    )
    return SourceOutput(cand, "", notes)


def from_llm(inp: SourceInput) -> SourceOutput:
    """The LLM planner's whole configuration (module docstring); None with why when it gave none."""
    planner = inp.llm
    propose_whole = getattr(planner, "propose_whole", None)
    if planner is None or propose_whole is None:
        return SourceOutput(None, "no LLM planner configured")
    ctx = inp.ctx.model_copy(update={"max_changes": MAX_LLM_CHANGES, "rounds": [], "validator_feedback": []})
    instruction = render_prompt(
        "opening",
        stage=ctx.stage.value,
        max_changes=str(MAX_LLM_CHANGES),
        budget=f"{budget_bytes(ctx, inp.policy) / MiB:.0f} MiB (policy.memory_fraction "
        f"{inp.policy.memory_fraction:g} × the memory limit {inp.host.memory_bytes / MiB:.0f} MiB)",
        connections=str(inp.host.max_connections),
        durability=inp.policy.durability,
    )
    proposal = propose_whole(ctx, instruction)
    if proposal is None:
        return SourceOutput(
            None, "the LLM gave no usable whole configuration (endpoint error, deadline or invalid replies)"
        )
    b = SetBuilder(ctx)
    notes: list[str] = []
    for ch in proposal.changes:
        if ch.name in NEVER:
            notes.append(f"llm: {ch.name}={ch.value} left out (max_connections is the DBA's requirement)")
            continue
        value = str(ch.value).lower() if isinstance(ch.value, bool) else str(ch.value)
        if value in ("true", "false"):
            value = "on" if value == "true" else "off"
        if ch.name not in ctx.catalog.knobs:
            b.changes[ch.name] = value  # the validator names the unknown knob
            b.sources[ch.name] = f"LLM ({ch.rationale or 'no rationale'})"
            continue
        b.put(ch.name, value, f"LLM: {ch.rationale or proposal.rationale or 'no rationale given'}")
    if not b.changes:
        return SourceOutput(None, "the LLM's configuration is the one in effect", notes, diagnosis=proposal)
    cand = Candidate(
        name="llm",
        changes=dict(b.changes),
        rationale=f"the LLM planner's whole configuration: {proposal.rationale or proposal.bottleneck.value}",
        sources=dict(b.sources),
    )
    return SourceOutput(cand, "", notes, diagnosis=proposal)
