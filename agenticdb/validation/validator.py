"""The validator: decides without any LLM whether a proposed change set may be applied, and in what form.

Checks run in the order of issue 3 and every change is checked (all failures are reported, not only
the first); a verdict with any failure is ``ok=False`` and nothing of it is applied:

1. ``stage`` — DBMS knobs in the DBMS stage, OS parameters in the OS stage;
2. ``unknown`` — the name exists on this server/kernel (LLMs invent names); excluded/unsupported say why;
3. ``type``/``unit`` — normalised to the target's canonical spelling (agenticdb.units);
4. ``enum``/``range`` — the server's own enum list and min/max;
5. ``protected``/``dangerous`` — never; ``durability`` — rejected unless policy is relaxed and the rule
   allows it (then listed in ``Verdict.accepted_risks``);
6. ``hardware`` — memory budget, disk, cores (agenticdb.validation.host);
7. ``conflict`` — rules on the resulting configuration (agenticdb.validation.resulting);
8. ``server_check`` — the server's/kernel's own checks beyond min/max (``min_wal_size`` ≥ 2 ×
   ``wal_segment_size``, nr_requests ≤ the device's hardware queue depth without a scheduler);
   ``no_effect`` — changes that cannot act in this mode or on this host (never measured); ``harmful`` —
   values known to hurt database hosts (``policy.allow_harmful`` may accept one as a risk); ``capacity``
   — never below the observed peak plus headroom (agenticdb.validation.effects);
   ``auto_value`` — a special value (wal_buffers = -1, "auto") is explained in a warning and, where the
   server reports a computed value instead, verified against that value;
9. ``step`` — at most ``policy.max_changes`` changes, no value moved by more than ``max_step_factor``;
10. ``apply`` — the strongest apply mode from metadata; a restart needs permission and the window.

MySQL/MariaDB variables without an option-file form are accepted as ``runtime_only`` (SET GLOBAL only),
with a warning saying so.

Rules are data in ``validators/*.toml`` (agenticdb.validation.rules).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from datetime import datetime

import structlog

from agenticdb.config.sections import PolicyConfig, in_window
from agenticdb.dialect import family_of, flavor_of_catalog
from agenticdb.models import (
    Catalog,
    Change,
    FailedCheck,
    Hardware,
    KnobSpec,
    Layer,
    NormalizedChange,
    Observed,
    Proposal,
    Verdict,
)
from agenticdb.units import UnitError, normalize, readable
from agenticdb.validation.auto import resolve_auto
from agenticdb.validation.effects import check_capacity, check_harmful, check_no_effect, check_server
from agenticdb.validation.host import check_host
from agenticdb.validation.resulting import ResultingConfig, check_conflicts
from agenticdb.validation.rules import DurabilityRule, NameRule, RuleSet, load_ruleset, rules_for
from agenticdb.validation.steps import apply_requirement, step_bounds

log = structlog.get_logger(__name__)

OS_PREFIXES = (
    "vm.",
    "thp.",
    "kernel.",
    "net.",
    "fs.",
    "block.",
    "dev.",
    "user.",
    "abi.",
    "debug.",
    "sunrpc.",
)
"""Name prefixes of Linux parameters (sysctl top-level directories of /proc/sys, plus block.<dev>.)."""

_SRC_CATALOG = "the server's own metadata (pg_settings / information_schema.SYSTEM_VARIABLES / /proc/sys)"


def flavor_of(catalog: Catalog) -> str:
    """ "postgresql", "mariadb", "mysql" or "linux" for version-specifier matching in rule files."""
    return flavor_of_catalog(catalog.target, catalog.version)


_INDEX_CACHE: dict[int, tuple[Catalog, int, dict[str, str]]] = {}


def _index(catalog: Catalog, fold: bool) -> dict[str, str]:
    """Lookup key → catalog spelling (case-folded for DBMS names), cached per catalog object."""
    hit = _INDEX_CACHE.get(id(catalog))
    if hit is not None and hit[0] is catalog and hit[1] == len(catalog.knobs):
        return hit[2]
    idx = {(k.lower() if fold else k): k for k in catalog.knobs}
    if len(_INDEX_CACHE) > 16:
        _INDEX_CACHE.clear()
    _INDEX_CACHE[id(catalog)] = (catalog, len(catalog.knobs), idx)
    return idx


@dataclass
class _Round:
    """What the per-change checks share: the rules and indexes, and the verdict being built."""

    catalog: Catalog
    family: str
    rules: RuleSet
    policy: PolicyConfig
    stage: Layer
    fold: bool
    index: dict[str, str]
    cur_index: dict[str, str]
    failed: list[FailedCheck] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    risks: list[str] = field(default_factory=list)
    normalized: list[NormalizedChange] = field(default_factory=list)
    seen: dict[str, str] = field(default_factory=dict)
    read: dict[str, float] = field(default_factory=dict)

    def fail(self, check: str, name: str, shown: str, message: str, source: str = "", rule_id: str = "") -> None:
        self.failed.append(
            FailedCheck(check=check, parameter=name, value=shown, message=message, source=source, rule_id=rule_id)
        )


def validate(
    proposal: Proposal,
    catalog: Catalog,
    current: dict[str, str],
    hardware: Hardware,
    policy: PolicyConfig,
    stage: Layer,
    *,
    can_restart: bool = True,
    now: datetime | None = None,
    ruleset: RuleSet | None = None,
    observed: Observed | None = None,
) -> Verdict:
    """Check ``proposal`` against ``catalog`` and the rules; pure apart from the cached rule files and
    ``observed.read`` (a capacity rule's gauge read from the server).

    Args:
        proposal: the planner's change set (values in any spelling).
        catalog: the target's knobs, exclusions, unsupported names and read-only facts.
        current: effective current values by name (defaults included), canonical strings.
        hardware: the real host (memory limit = min(RAM, cgroup), free disk, cores, Committed_AS, swap,
            NUMA nodes, the server's rlimits).
        policy: durability, restart permission and window, step bounds, budget fractions, accepted harm,
            capacity and commit headroom.
        stage: the layer this round tunes (DBMS knobs only in the DBMS stage, OS params in the OS stage).
        can_restart: False when the target's service cannot restart (service kind "none").
        now: clock for the restart window (default: local now).
        ruleset: rules to use (default: ``validators/<family>.toml``, cached).
        observed: runtime-state gauges (peaks for the capacity rules), the reader of gauges too slow for
            every sample (read here when a capacity rule needs one; ``Verdict.read`` says what was compared)
            and the DBMS's planned memory (the strict-overcommit rule); None when unknown: capacity settings
            are then never lowered and the overcommit rule counts the whole DBMS memory budget.

    Returns:
        Verdict: ``ok`` only with no failed check; ``changes`` normalised (value, base_value in
        ``KnobSpec.unit``, previous value, runtime_only); ``apply_requirement`` verified from metadata;
        ``accepted_risks`` for relaxed durability and harm that ``policy.allow_harmful`` accepts.
    """
    family = family_of(catalog.target)
    fold = family != "linux"
    r = _Round(
        catalog=catalog,
        family=family,
        rules=ruleset or load_ruleset(family),
        policy=policy,
        stage=stage,
        fold=fold,
        index=_index(catalog, fold),
        cur_index={(k.lower() if fold else k): v for k, v in current.items()},
    )
    for change in proposal.changes:
        _check_change(r, proposal, change)
    _check_configuration(r, proposal, current, hardware, observed)
    mode, apply_failed, apply_warnings = apply_requirement(proposal, r.normalized, policy, can_restart, now)
    r.failed += apply_failed
    r.warnings += apply_warnings
    verdict = Verdict(
        ok=not r.failed,
        changes=r.normalized,
        apply_requirement=mode,
        failed=r.failed,
        warnings=r.warnings,
        accepted_risks=r.risks,
        read=r.read,
    )
    log.info(
        "validator.decided",
        ok=verdict.ok,
        changes=len(proposal.changes),
        failed=len(r.failed),
        checks=sorted({f.check for f in r.failed}),
        apply=mode.value,
        reason="; ".join(f"{f.check}:{f.parameter}" for f in r.failed) or "all checks passed",
        read=r.read,
    )
    return verdict


def _check_configuration(
    r: _Round, proposal: Proposal, current: dict[str, str], hardware: Hardware, observed: Observed | None
) -> None:
    """Checks on the resulting configuration: host budgets, conflicts, the server's own checks, changes
    that cannot act, known harm, capacity floors and step bounds."""
    flavor, version, rules = flavor_of(r.catalog), r.catalog.version, r.rules
    gauges = observed.gauges if observed is not None else None
    cfg = ResultingConfig(r.family, r.catalog, current, r.normalized, r.index, hardware, gauges)
    before = ResultingConfig(r.family, r.catalog, current, [], r.index, hardware, gauges)
    r.normalized, auto_warnings = resolve_auto(cfg, r.normalized, rules.auto_value, flavor, version)
    r.warnings += auto_warnings
    host_failed, host_warnings = check_host(cfg, before, rules, hardware, r.policy, flavor, version, observed)
    r.failed += host_failed
    r.warnings += host_warnings
    r.failed += check_conflicts(cfg, rules.conflict, flavor, version)
    r.failed += check_server(cfg, rules.server_check, flavor, version)
    idle_failed, idle = check_no_effect(cfg, rules.no_effect, flavor, version)
    r.failed += idle_failed
    harm_failed, harm_risks = check_harmful(cfg, rules.harmful, flavor, version, r.policy, idle)
    r.failed += harm_failed
    r.risks += harm_risks
    r.warnings += [f"accepted risk: {risk}" for risk in harm_risks]
    r.failed += check_capacity(cfg, before, rules.capacity, flavor, version, r.policy, observed, r.read)
    r.failed += step_bounds(proposal, r.normalized, before, r.policy, r.family, r.catalog)


def _check_change(r: _Round, proposal: Proposal, change: Change) -> None:
    """Per-change checks 1–5 (stage, existence, names never tuned, type/unit/enum/range, durability);
    a change that passes is appended to ``r.normalized``."""
    name, shown = change.name.strip(), str(change.value)
    spec = _stage_and_name(r, proposal, name, shown)
    if spec is None:
        return
    # 3./4. type, unit, enum, range
    unavailable = r.catalog.unavailable_values.get(spec.name, {}).get(shown.strip().lower())
    if unavailable is not None:
        accepted = ", ".join(spec.enum_values or [])
        r.fail(
            "enum",
            spec.name,
            shown,
            f"{spec.name}={shown}: this server cannot accept it: {unavailable}; the values it accepts here: "
            f"{accepted} (rule enum: the server's own enum list, as this build accepts it)",
            _SRC_CATALOG,
            "enum",
        )
        return
    try:
        parsed = normalize(r.family, spec, change.value)
    except UnitError as exc:
        hint = _enum_hint(r.rules, spec.name, shown)
        r.fail(exc.check, name, shown, f"{exc}{hint} (rule {exc.check})", _SRC_CATALOG, exc.check)
        return
    r.warnings.extend(parsed.warnings)
    value, b = parsed.canonical, parsed.base_value
    if b is not None and not _in_range(spec, b):
        lo = readable(r.family, spec, spec.min_value) if spec.min_value is not None else "-inf"
        hi = readable(r.family, spec, spec.max_value) if spec.max_value is not None else "+inf"
        r.fail(
            "range",
            spec.name,
            shown,
            f"{spec.name}={shown} ({value}) is outside the allowed range {lo} .. {hi} "
            f"(rule range: server min/max in {spec.unit or 'plain units'})",
            _SRC_CATALOG,
            "range",
        )
        return
    if _durability_blocks(r, spec, shown, value):
        return
    if spec.option_file is False:
        r.warnings.append(
            f"{spec.name}={value}: runtime only — {r.catalog.target} {r.catalog.version} has no option-file form "
            "for it (the server's --help --verbose does not list it); applied with SET GLOBAL, not written to "
            "the option file, so a restart outside agenticdb loses it"
        )
    r.normalized.append(
        NormalizedChange(
            name=spec.name,
            value=value,
            base_value=b,
            unit=spec.unit,
            apply=spec.apply,
            layer=spec.layer,
            previous=r.cur_index.get(spec.name.lower() if r.fold else spec.name, spec.default),
            runtime_only=spec.option_file is False,
        )
    )


def _stage_and_name(r: _Round, proposal: Proposal, name: str, shown: str) -> KnobSpec | None:
    """Checks 1, 2 and 5a: the stage, a duplicate, the name exists, protected/dangerous names (decided
    before parsing: "serialisable" for a protected knob is a semantic change, not a typo). Returns the
    knob's spec when the value is still to be checked."""
    family, stage = r.family, r.stage
    looks_os = name.startswith(OS_PREFIXES)
    if (stage == Layer.os) != (family == "linux") or (looks_os and family != "linux"):
        r.fail(
            "stage",
            name,
            shown,
            f"{name}={shown}: not allowed in the {stage.value} stage (rule stage: DBMS knobs in the "
            f"DBMS stage, OS parameters in the OS stage; this catalog is {r.catalog.target})",
        )
        return None
    if proposal.layer != stage:
        r.fail(
            "stage",
            name,
            shown,
            f"{name}={shown}: the proposal is for layer {proposal.layer.value} but this round tunes "
            f"{stage.value} (rule stage)",
        )
        return None
    key = name.lower() if r.fold else name
    if key in r.seen:
        r.fail(
            "conflict",
            name,
            shown,
            f"{name}={shown}: the parameter is named twice in one change set (also {r.seen[key]}); rule: one "
            "value per parameter per round",
            rule_id="duplicate",
        )
        return None
    r.seen[key] = shown
    spec_name = r.index.get(key)
    spec = r.catalog.knobs[spec_name] if spec_name else None
    if spec is not None and spec.layer != stage:
        r.fail(
            "stage",
            name,
            shown,
            f"{name}={shown}: a {spec.layer.value} parameter cannot change in the {stage.value} stage (rule stage)",
        )
        return None
    display = spec.name if spec else name
    never = _match(r.rules.protected, display), _match(r.rules.dangerous, display)
    if spec is None:
        _unknown(r, name, shown, never)
        return None
    for rule, kind, why in (
        (never[0], "protected", "a tuner never changes application or benchmark semantics"),
        (never[1], "dangerous", "never changed by the tuner"),
    ):
        if rule is not None:
            r.fail(
                kind,
                spec.name,
                shown,
                f"{spec.name}={shown}: {kind} (rule {rule.id}): {rule.reason}; {why}",
                rule.source,
                rule.id,
            )
            return None
    return spec


def _unknown(r: _Round, name: str, shown: str, never: tuple[NameRule | None, NameRule | None]) -> None:
    """Check 2 for a name the catalog lacks: say why, and name the rule kind that would refuse it anyway."""
    missing = _unknown_message(name, shown, r.catalog, r.fold)
    durability = rules_for(r.rules.durability, name)
    rule = never[0] or never[1]
    if (rule is not None or durability) and _listed(name, r.catalog.excluded, r.fold):
        # the rule is why the name was left out (setup-role does not grant it): the strongest reason alone
        missing = f"left out of the catalog ({_listed(name, r.catalog.excluded, r.fold)})"
    if rule is not None:
        kind = "protected" if never[0] else "dangerous"
        r.fail(
            kind,
            name,
            shown,
            f"{name}={shown}: {kind} (rule {rule.id}): {rule.reason}; never tuned. Also: {missing}",
            rule.source,
            rule.id,
        )
    elif durability:
        r.fail(
            "durability",
            name,
            shown,
            f"{name}={shown}: durability-risking parameter (rule {durability[0].id}: {durability[0].reason}). "
            f"Also: {missing}",
            durability[0].source,
            durability[0].id,
        )
    else:
        r.fail("unknown", name, shown, missing, _SRC_CATALOG, "exists")


def _durability_blocks(r: _Round, spec: KnobSpec, shown: str, value: str) -> bool:
    """Check 5: durability rules; a relaxed policy accepts what the rule allows as a journaled risk."""
    blocked = False
    for rule in rules_for(r.rules.durability, spec.name):
        if not rule.risky(value):
            continue
        if r.policy.durability == "relaxed" and rule.allowed_when_relaxed:
            r.risks.append(
                f"{spec.name}={value}: {rule.reason} (rule {rule.id}, accepted under durability "
                f"= relaxed; {rule.source})"
            )
            continue
        why = (
            "not allowed even under durability = relaxed"
            if rule.allowed_when_relaxed is False
            else f"rejected under durability = {r.policy.durability}"
        )
        r.fail(
            "durability",
            spec.name,
            shown,
            f"{spec.name}={shown}: durability-risking (rule {rule.id}): {rule.reason}; {why}",
            rule.source,
            rule.id,
        )
        blocked = True
    return blocked


def _match(rules: list[NameRule], name: str) -> NameRule | None:
    # Protection is about what a name means, so it holds on every version of the family (MariaDB 10.11
    # has no transaction_isolation, yet proposing it is still a semantic change and says so).
    found = rules_for(rules, name)
    return found[0] if found else None


def _in_range(spec: KnobSpec, b: float) -> bool:
    return not (
        (spec.min_value is not None and b < spec.min_value) or (spec.max_value is not None and b > spec.max_value)
    )


def _listed(name: str, table: dict[str, str], fold: bool) -> str | None:
    """The reason ``table`` gives for ``name`` (case-folded for DBMS names), or None."""
    return next((reason for k, reason in table.items() if ((k.lower() == name.lower()) if fold else k == name)), None)


def _unknown_message(name: str, shown: str, catalog: Catalog, fold: bool) -> str:
    for table, what in (
        (catalog.excluded, "excluded"),
        (catalog.unsupported, "unsupported on this server/kernel"),
    ):
        for k, reason in table.items():
            if (k.lower() == name.lower()) if fold else k == name:
                return f"{name}={shown}: {what}: {reason} (rule unknown: only catalog knobs are tuned)"
    close = difflib.get_close_matches(
        name.lower() if fold else name, [k.lower() if fold else k for k in catalog.knobs], n=3, cutoff=0.75
    )
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return (
        f"{name}={shown}: unknown parameter on {catalog.target} {catalog.version} (rule unknown: the name "
        f"must exist on the running server/kernel; setting it would fail or stop the server at start){hint}"
    )


def _enum_hint(rules: RuleSet, name: str, shown: str) -> str:
    for h in rules.enum_hint:
        if (
            NameRule(id="h", reason="", source="", versions=[">=0"], parameter=h.parameter).matches(name)
            and h.value.lower() == shown.strip().lower()
        ):
            return f"; note: {h.hint} ({h.source})"
    return ""


__all__ = ["validate", "in_window", "flavor_of", "OS_PREFIXES", "DurabilityRule"]


def no_effect_here(catalog: Catalog, current: dict[str, str], values: dict[str, str]) -> dict[str, str]:
    """Of ``values`` (knob name → a value to set, e.g. a snapshot's), those that would have no effect in the
    configuration ``current`` (the server's values now, by name): the server describes the variable as
    ignored (fact ``ignored:<name>``: MariaDB 10.11's innodb_lru_flush_size, "Deprecated parameter with no
    effect") or a ``no_effect`` rule's requirement fails (thread_pool_* without thread_handling =
    pool-of-threads); by name, the validator's reason. Names the catalog does not hold are left out.

    A restore leaves such a value alone when the server cannot take it back (``Target.inert``): on
    MariaDB 10.11 a fresh start reports thread_pool_size = 2 and innodb_lru_flush_size = 0, and no
    ``SET GLOBAL`` reproduces either (it reads back 0 / 1, warning 1292 "Truncated incorrect …").
    """
    family = family_of(catalog.target)
    fold = family != "linux"
    index = _index(catalog, fold)
    changes = []
    for name, value in values.items():
        canonical = index.get(name.lower() if fold else name)
        if canonical is not None:
            changes.append(NormalizedChange(name=canonical, value=value, apply=catalog.knobs[canonical].apply))
    cfg = ResultingConfig(family, catalog, current, changes, index)
    failed, _ = check_no_effect(cfg, load_ruleset(family).no_effect, flavor_of(catalog), catalog.version)
    return {f.parameter: f.message.split(". A trial would")[0] for f in failed}
