"""Validation of a whole configuration as ONE set (issue 36): the opening's candidates and ``advise``'s
advice are judged together, so their memory adds up once and their restart is one restart.

It is the validator (:func:`agenticdb.validation.validator.validate`: names, types, ranges, durability, the memory
budget on the resulting configuration, the server's own checks, the restart window) run on the whole set,
with two differences from a tuning round:

* the per-round step bound (``policy.max_changes`` changes, ``policy.max_step_factor`` per knob) does not
  apply unless ``step_bound`` is True — a whole configuration is a start, not a step;
  ``policy.opening_step_bound`` (see :func:`step_bound_for`) says when to keep it;
* the memory budget also counts hash-based operations on the worst case: when the set raises a
  per-connection buffer (work_mem), every allowed connection may use it × ``hash_mem_multiplier``
  (PostgreSQL 15 manual 20.4.1: "hash-based operations … may use up to work_mem × hash_mem_multiplier"),
  which the validator's worst case (without observed gauges) leaves out.

A refusal that only the memory budget made carries ``FailedCheck.excess_bytes``; the planner's trade move
(``agenticdb.planner.trade``) can repair it (see ``agenticdb.planner.opening.repair_set``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import structlog

from agenticdb.config import PolicyConfig
from agenticdb.dialect import family_of
from agenticdb.models import Bottleneck, Catalog, Change, FailedCheck, Hardware, Layer, Observed, Proposal, Verdict
from agenticdb.validation.resulting import ResultingConfig
from agenticdb.validation.rules import load_ruleset
from agenticdb.validation.validator import _index, validate

log = structlog.get_logger(__name__)

MiB = 1024**2
#: max_step_factor standing for "no bound" (PolicyConfig needs a number > 1).
UNBOUNDED_STEP = 1e300


@dataclass(frozen=True)
class SetVerdict:
    """The verdict on a whole set.

    Attributes:
        verdict: the validator's verdict on the set (normalised changes, apply mode, all failed checks).
        memory_only: True when every failed check is the memory budget (``rule_id == "memory_budget"``):
            a trade can repair it.
        step_bound: whether the per-round step bound was applied.
    """

    verdict: Verdict
    memory_only: bool
    step_bound: bool

    @property
    def ok(self) -> bool:
        """Whether the set may be applied as it is."""
        return self.verdict.ok

    @property
    def memory_refusal(self) -> FailedCheck | None:
        """The memory budget's refusal (the knob it blames, the excess in bytes), None when it passed."""
        return next((f for f in self.verdict.failed if f.rule_id == "memory_budget"), None)

    def reasons(self) -> str:
        """The failed checks as one line ("[hardware] shared_buffers: …; [enum] wal_compression: …")."""
        return "; ".join(f"[{f.check}] {f.parameter}: {f.message}" for f in self.verdict.failed)


def step_bound_for(policy: PolicyConfig, live: bool) -> bool:
    """Whether a whole configuration is held to the per-round step bound: ``policy.opening_step_bound``
    "on"/"off", and for "auto" (the default) only in live mode (a production workload, where a DBA
    expects steps; judgement of issue 36)."""
    mode: Literal["auto", "on", "off"] = policy.opening_step_bound
    return mode == "on" or (mode == "auto" and live)


def validate_set(
    changes: dict[str, str],
    catalog: Catalog,
    current: dict[str, str],
    hardware: Hardware,
    policy: PolicyConfig,
    *,
    step_bound: bool = False,
    stage: Layer = Layer.dbms,
    can_restart: bool = True,
    now: datetime | None = None,
    observed: Observed | None = None,
    label: str = "set",
) -> SetVerdict:
    """Judge ``changes`` (knob → value, any spelling the validator reads) as one configuration.

    Args:
        changes: the whole set; knobs not in it keep their ``current`` values.
        catalog, current, hardware, policy, stage, can_restart, now, observed: as for
            :func:`agenticdb.validation.validator.validate`.
        step_bound: apply ``policy.max_changes``/``policy.max_step_factor`` (see :func:`step_bound_for`).
        label: a name for the log line (the candidate's source).

    Returns:
        SetVerdict; ``verdict.failed`` lists every failed check, each naming the parameter, value and rule.
    """
    if not step_bound:
        policy = policy.model_copy(
            update={"max_changes": max(policy.max_changes, len(changes)), "max_step_factor": UNBOUNDED_STEP}
        )
    proposal = Proposal(
        bottleneck=Bottleneck.unknown,
        layer=stage,
        changes=[Change(name=k, value=v) for k, v in changes.items()],
        rationale=f"whole configuration ({label})",
        planner="opening",
    )
    verdict = validate(
        proposal, catalog, current, hardware, policy, stage, can_restart=can_restart, now=now, observed=observed
    )
    extra = _hash_memory(verdict, catalog, current, hardware, policy) if verdict.ok else None
    if extra is not None:
        verdict = verdict.model_copy(update={"ok": False, "failed": [*verdict.failed, extra]})
    memory_only = bool(verdict.failed) and all(f.rule_id == "memory_budget" for f in verdict.failed)
    log.info(
        "validation.set",
        label=label,
        ok=verdict.ok,
        knobs=len(changes),
        step_bound=step_bound,
        memory_only=memory_only,
        reason="; ".join(f"{f.check}:{f.parameter}:{f.rule_id}" for f in verdict.failed) or "all checks passed",
    )
    return SetVerdict(verdict=verdict, memory_only=memory_only, step_bound=step_bound)


def _hash_memory(
    verdict: Verdict, catalog: Catalog, current: dict[str, str], hardware: Hardware, policy: PolicyConfig
) -> FailedCheck | None:
    """The worst case with hash_mem_multiplier, for a set that raises a per-connection buffer: global
    buffers + every allowed connection × each raised per-connection buffer × hash_mem_multiplier ×
    ``policy.per_connection_work_mem_factor`` + maintenance memory × its workers. None when it fits, when
    the set raises no per-connection buffer, or when the family has no multiplier."""
    family = family_of(catalog.target)
    budget = load_ruleset(family).memory_budget
    if budget is None or not budget.per_connection_multiplier or not budget.connections:
        return None
    index = _index(catalog, family != "linux")
    cfg = ResultingConfig(family, catalog, current, verdict.changes, index, hardware)
    before = ResultingConfig(family, catalog, current, [], index, hardware)
    raised = [
        n for n in budget.per_connection if cfg.is_changed(n) and (cfg.number(n) or 0.0) > (before.number(n) or 0.0)
    ]
    if not raised:
        return None
    mult = cfg.number(budget.per_connection_multiplier) or 1.0
    conns = cfg.number(budget.connections) or 0.0
    parts: dict[str, float] = {}
    for name in budget.global_:
        n = cfg.number(name)
        if n is not None and n > 0:
            parts[name] = n
    if "wal_buffers" in budget.global_ and (cfg.number("wal_buffers") or 0) <= 0:
        sb = cfg.number("shared_buffers") or 0.0
        parts["wal_buffers"] = min(max(sb / 32, 64 * 1024), 16 * MiB)  # -1 = auto (manual 20.5.1)
    for name in budget.per_connection:
        n = cfg.number(name)
        if n is not None and n > 0:
            parts[f"{name} × {conns:g} {budget.connections} × {budget.per_connection_multiplier} {mult:g}"] = (
                conns * n * mult * policy.per_connection_work_mem_factor
            )
    for w in budget.workers:
        count, each = cfg.number(w["count"]) or 0.0, cfg.number(w["each"]) or 0.0
        override = cfg.number(w["override"]) if "override" in w else None
        parts[f"{w['each']} × {count:g} {w['count']}"] = count * (override if override and override > 0 else each)
    total, allowed = sum(parts.values()), policy.memory_fraction * hardware.memory_limit_bytes
    if total <= allowed:
        return None
    ch = cfg.changed[cfg.key(raised[0])]
    terms = ", ".join(f"{k} {v / MiB:.0f} MiB" for k, v in sorted(parts.items(), key=lambda kv: -kv[1]) if v > 0)
    return FailedCheck(
        check="hardware",
        parameter=ch.name,
        value=ch.value,
        rule_id="memory_budget",
        excess_bytes=total - allowed,
        source=budget.source + "; PostgreSQL 15 manual 20.4.1 (hash_mem_multiplier)",
        message=f"{ch.name}={ch.value} (rule memory_budget, whole set): every one of {conns:g} "
        f"{budget.connections} may use it × {budget.per_connection_multiplier} {mult:g}; the set's worst case "
        f"{total / MiB:.0f} MiB ({terms}) exceeds memory_fraction {policy.memory_fraction:g} × memory limit "
        f"{hardware.memory_limit_bytes / MiB:.0f} MiB = {allowed / MiB:.0f} MiB",
    )
