"""Advice sizing a DBA accepts (issue 39): memory and I/O figures held to PGTune's, the set judged as one.

The playbook's host sizing alone gave ``work_mem 120MB`` on a 24 GiB host with 50 connections — inside
(RAM − shared_buffers)/(3 × max_connections), but 50 × 120 MB × hash_mem_multiplier 2 + 6 GiB
shared_buffers is beyond the validator's own memory budget — and ``effective_cache_size`` at 50 % of
RAM, the low end of its source's range. Here:

* the host-sized configuration of the opening (:func:`agenticdb.planner.opening_host.host_sized`: PGTune's
  figures for PostgreSQL, the MariaDB Knowledge Base's and MySQLTuner's for MariaDB, capped by the memory
  budget with every connection × hash_mem_multiplier) is the reference;
* a recommendation that rests on the rule alone (confidence "rule") takes the reference's value and
  source when it has one for that knob and is above it (no measured reason to go beyond); a knob that
  allocates no memory (effective_cache_size, a planner estimate) is also raised to it (50 % → 75 % of
  memory on a dedicated host: the recognised figure), memory the server allocates is not;
* a recommendation backed by runtime evidence (diagnosis, experience, an earlier measurement) may go
  beyond the reference, and says so with the reference's figure beside its evidence;
* the accepted recommendations are validated as ONE set (:func:`agenticdb.validation.sets.validate_set`,
  shared with the opening), and the worst case — every allowed connection × work_mem ×
  hash_mem_multiplier + the global buffers + maintenance memory — is a warning with its numbers
  whenever it exceeds the budget, whatever the set verdict.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from agenticdb.advice.recommendation import Recommendation
from agenticdb.config.sections import PolicyConfig
from agenticdb.dialect import family_of
from agenticdb.models import Catalog, Hardware, Layer, NormalizedChange, Observed
from agenticdb.models.planning import PlanningContext
from agenticdb.planner.opening_host import host_sized
from agenticdb.planner.opening_types import Candidate
from agenticdb.planner.opening_values import SourceInput, current_config, host_view
from agenticdb.units import canonical, parse_value
from agenticdb.units.people import for_people
from agenticdb.validation.memory import worst_case
from agenticdb.validation.resulting import ResultingConfig
from agenticdb.validation.rules import load_ruleset
from agenticdb.validation.sets import validate_set
from agenticdb.validation.validator import _index, flavor_of

log = structlog.get_logger(__name__)

GiB = 1024**3
MiB = 1024**2


def reference(ctx: PlanningContext, policy: PolicyConfig, pinned: dict[str, str] | None = None) -> Candidate | None:
    """The host-sized whole configuration for ``ctx``'s server (None for a family without sizing rules),
    keeping the ``pinned`` values and sizing the rest from them. No set repair follows (``traded=False``): the
    pool takes no room from caches the advice does not lower."""
    host = host_view(ctx, flavor_of(ctx.catalog))
    inp = SourceInput(ctx=ctx, host=host, policy=policy, pinned=dict(pinned or {}), traded=False)
    return host_sized(inp).candidate


def advised_reference(
    recs: list[Recommendation],
    ctx: PlanningContext,
    policy: PolicyConfig,
    catalog: Catalog,
    judge: Callable[[list[Recommendation]], None],
) -> Candidate | None:
    """The host-sized reference made consistent with the advice it holds (None without sizing rules).

    Every knob the reference sizes that the advice recommends otherwise (a rule-only buffer pool the
    reference would raise further, an evidence-backed value beyond it) or leaves as it is (no
    recommendation, or one ``judge`` — the validator, setting ``verdict`` — rejects) is pinned at that
    value, and the reference is sized again: a figure derived
    from another knob (the redo log 25 % of the buffer pool, wal_buffers 3 % and work_mem after
    shared_buffers) then follows the value the DBA is told to use, not one the advice does not recommend.
    Each round only adds pins, so it ends after at most one round per knob.
    """
    current = current_config(ctx)
    pins: dict[str, str] = {}
    while True:
        ref = reference(ctx, policy, pins)
        if ref is None:
            return None
        trial = [r.model_copy(deep=True) for r in recs]
        hold_to_reference(trial, ref, catalog)
        judge(trial)
        advised = {r.knob: r.recommended for r in trial if r.layer == Layer.dbms and r.verdict == "accept"}
        more: dict[str, str] = {}
        for knob, want in ref.changes.items():
            spec, have = catalog.get(knob), advised.get(knob, current.get(knob))
            if knob in pins or spec is None or have is None:
                continue
            if canonical(knob, have, spec) != canonical(knob, want, spec):
                more[knob] = have
        if not more:
            return ref
        log.info(
            "advise.reference_pinned",
            pinned=more,
            reason="the reference sizes these otherwise than the advice: the rest is sized from the advice's values",
        )
        pins.update(more)


def hold_to_reference(recs: list[Recommendation], ref: Candidate, catalog: Catalog) -> None:
    """Bring rule-only recommendations to the reference's figure; mark evidence-backed ones that go beyond it.

    A host sizing (rule ``sizing:``) of a knob the reference keeps at the value in effect (``ref.kept``) is
    brought back to that value: :func:`without_no_ops` then leaves it out.

    Args:
        recs: the DBMS recommendations (changed in place: ``recommended``, ``reason``, ``source``,
            ``evidence``).
        ref: the host-sized candidate (:func:`reference`).
        catalog: the DBMS catalog (to compare values in the knob's unit).
    """
    family = family_of(catalog.target)
    budget = load_ruleset(family).memory_budget
    costly = {p.lower() for p in budget.params()} if budget is not None else set()
    for r in recs:
        want, source = ref.changes.get(r.knob), ref.sources.get(r.knob, "host-sized reference")
        if want is None and r.knob in ref.kept and r.rule.startswith("sizing:") and r.current is not None:
            # the reference sizes the knob at the value in effect (the redo log at 25 % of a pool that is
            # not raised): a rule-only host sizing has no reason to move it
            want, source = r.current, ref.kept[r.knob]
        spec = catalog.get(r.knob)
        if want is None or spec is None:
            continue
        said = for_people(family, spec, want)  # as the DBA writes it (MariaDB sizes "4G", not bytes)
        a, b = parse_value(r.recommended, spec), parse_value(want, spec)
        if a is None or b is None or a == b:
            continue
        if r.confidence == "rule":
            if a < b and r.knob.lower() in costly:
                continue  # memory the server allocates is never raised past the playbook without evidence
            why = "no measured reason to go beyond it" if a > b else "the recognised figure on a dedicated host"
            r.evidence.append(f"playbook sizing gave {r.recommended}; held to the reference ({why})")
            log.info("advise.sized", knob=r.knob, playbook=r.recommended, reference=want, reason=why)
            r.recommended = said
            r.reason, r.source = f"{source} ({why})", ref.rationale.split(";")[0]
        elif a > b:
            r.evidence.append(
                f"beyond the host-sized reference {said} ({source}): measured reason {r.confidence} — "
                + ("; ".join(r.evidence[:2]) or r.confidence_origin)
            )


def without_no_ops(recs: list[Recommendation], catalog: Catalog) -> list[Recommendation]:
    """``recs`` without those whose recommended value is the value in effect (nothing to apply)."""
    out = []
    for r in recs:
        spec = catalog.get(r.knob)
        if r.current is not None and canonical(r.knob, r.recommended, spec) == canonical(r.knob, r.current, spec):
            log.info("advise.dropped", knob=r.knob, value=r.current, reason="held to the value in effect")
            continue
        out.append(r)
    return out


def judge_set(
    recs: list[Recommendation],
    catalog: Catalog,
    current: dict[str, str],
    hardware: Hardware,
    policy: PolicyConfig,
    can_restart: bool,
    observed: Observed | None,
) -> list[str]:
    """Validate the accepted DBMS recommendations as one set; a refused set marks the knobs the failed
    checks name as rejected ("[set] …"). Returns warning lines for ``Advice.notes``: the set's refusal,
    the validator's warnings on the set, and the worst case with its numbers when it exceeds the budget.
    """
    chosen = [r for r in recs if r.verdict == "accept" and r.layer == Layer.dbms]
    if not chosen:
        return []
    changes = {r.knob: r.recommended for r in chosen}
    sv = validate_set(
        changes, catalog, current, hardware, policy, can_restart=can_restart, observed=observed, label="advice"
    )
    notes = [f"warning: the recommendations together: {w}" for w in sv.verdict.warnings if w.startswith("memory")]
    if not sv.ok:
        blamed = {f.parameter.lower() for f in sv.verdict.failed}
        for r in chosen:
            if r.knob.lower() in blamed:
                r.verdict = "reject"
                r.verdict_detail = "[set] " + "; ".join(
                    f"[{f.check}] {f.message}" for f in sv.verdict.failed if f.parameter.lower() == r.knob.lower()
                )
        notes.append(f"warning: the {len(changes)} accepted recommendations refused as one set: {sv.reasons()}")
    worst = worst_case_note(sv.verdict.changes, catalog, current, hardware, policy)
    if worst and not any("worst case" in n for n in notes):
        notes.append(worst)
    return notes


def worst_case_note(
    changes: list[NormalizedChange], catalog: Catalog, current: dict[str, str], hardware: Hardware, policy: PolicyConfig
) -> str | None:
    """``warning: worst case … exceeds …`` for the configuration ``current`` + ``changes`` when every allowed
    connection holding work_mem × hash_mem_multiplier, plus the global buffers and maintenance memory,
    exceeds ``policy.memory_fraction`` × the memory limit (:func:`agenticdb.validation.memory.worst_case`);
    None when it fits or the family has no memory budget."""
    family = family_of(catalog.target)
    budget = load_ruleset(family).memory_budget
    if budget is None:
        return None
    cfg = ResultingConfig(family, catalog, current, changes, _index(catalog, family != "linux"), hardware)
    est = worst_case(cfg, budget, policy)
    allowed = policy.memory_fraction * hardware.memory_limit_bytes
    if est.total <= allowed:
        return None
    return (
        f"warning: worst case {_size(est.total)} ({est.terms()}) exceeds memory_fraction {policy.memory_fraction:g} "
        f"× memory limit {_size(hardware.memory_limit_bytes)} = {_size(allowed)} ({budget.source})"
    )


def _size(n: float) -> str:
    return f"{n / GiB:.2f} GiB" if n >= GiB else f"{n / MiB:.0f} MiB"
