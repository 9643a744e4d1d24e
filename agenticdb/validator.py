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
8. ``step`` — at most ``policy.max_changes`` changes, no value moved by more than ``max_step_factor``;
9. ``apply`` — the strongest apply mode from metadata; a restart needs permission and the window.

Rules are data in ``validators/*.toml`` (agenticdb.validation.rules).
"""

from __future__ import annotations

import difflib
from datetime import datetime

import structlog

from agenticdb.config import PolicyConfig, in_window
from agenticdb.models import (
    ApplyMode,
    Catalog,
    FailedCheck,
    Hardware,
    KnobSpec,
    Layer,
    NormalizedChange,
    Proposal,
    Verdict,
)
from agenticdb.units import UnitError, family_of, normalize, readable
from agenticdb.validation.host import check_host
from agenticdb.validation.resulting import ResultingConfig, check_conflicts
from agenticdb.validation.rules import DurabilityRule, NameRule, RuleSet, load_ruleset

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
    fam = family_of(catalog.target)
    if fam == "mysql":
        return "mariadb" if "maria" in (catalog.target + catalog.version).lower() else "mysql"
    return fam


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
) -> Verdict:
    """Check ``proposal`` against ``catalog`` and the rules; pure apart from the cached rule files.

    Args:
        proposal: the planner's change set (values in any spelling).
        catalog: the target's knobs, exclusions and unsupported names.
        current: effective current values by name (defaults included), canonical strings.
        hardware: the real host (memory limit = min(RAM, cgroup), free disk, cores, Committed_AS).
        policy: durability, restart permission and window, step bounds, budget fractions.
        stage: the layer this round tunes (DBMS knobs only in the DBMS stage, OS params in the OS stage).
        can_restart: False when the target's service cannot restart (service kind "none").
        now: clock for the restart window (default: local now).
        ruleset: rules to use (default: ``validators/<family>.toml``, cached).

    Returns:
        Verdict: ``ok`` only with no failed check; ``changes`` normalised (value, base_value in
        ``KnobSpec.unit``, previous value); ``apply_requirement`` verified from metadata.
    """
    family = family_of(catalog.target)
    flavor = flavor_of(catalog)
    rules = ruleset or load_ruleset(family)
    fold = family != "linux"
    index = _index(catalog, fold)
    cur_index = {(k.lower() if fold else k): v for k, v in current.items()}
    failed: list[FailedCheck] = []
    warnings: list[str] = []
    risks: list[str] = []
    normalized: list[NormalizedChange] = []
    seen: dict[str, str] = {}

    for change in proposal.changes:
        raw = change.value
        shown = str(raw)
        name = change.name.strip()

        def fail(
            check: str, message: str, source: str = "", rule_id: str = "", *, _n: str = name, _v: str = shown
        ) -> None:
            failed.append(
                FailedCheck(check=check, parameter=_n, value=_v, message=message, source=source, rule_id=rule_id)
            )

        # 1. stage
        looks_os = name.startswith(OS_PREFIXES)
        wrong_catalog = (stage == Layer.os) != (family == "linux")
        if wrong_catalog or (looks_os and family != "linux"):
            fail(
                "stage",
                f"{name}={shown}: not allowed in the {stage.value} stage (rule stage: DBMS knobs in the "
                f"DBMS stage, OS parameters in the OS stage; this catalog is {catalog.target})",
            )
            continue
        if proposal.layer != stage:
            fail(
                "stage",
                f"{name}={shown}: the proposal is for layer {proposal.layer.value} but this round tunes "
                f"{stage.value} (rule stage)",
            )
            continue
        key = name.lower() if fold else name
        if key in seen:
            fail(
                "conflict",
                f"{name}={shown}: the parameter is named twice in one change set (also "
                f"{seen[key]}); rule: one value per parameter per round",
                rule_id="duplicate",
            )
            continue
        seen[key] = shown
        spec_name = index.get(key)
        spec = catalog.knobs[spec_name] if spec_name else None
        if spec is not None and spec.layer != stage:
            fail(
                "stage",
                f"{name}={shown}: a {spec.layer.value} parameter cannot change in the {stage.value} stage (rule stage)",
            )
            continue
        display = spec.name if spec else name
        protected = _match(rules.protected, display)
        dangerous = _match(rules.dangerous, display)
        durability = [r for r in rules.durability if r.matches(display)]

        # 2. exists on this server / kernel
        if spec is None:
            missing = _unknown_message(name, shown, catalog, fold)
            if protected or dangerous:
                rule = protected or dangerous
                assert rule is not None
                kind = "protected" if protected else "dangerous"
                fail(
                    kind,
                    f"{name}={shown}: {kind} (rule {rule.id}): {rule.reason}; never tuned. Also: {missing}",
                    rule.source,
                    rule.id,
                )
            elif durability:
                fail(
                    "durability",
                    f"{name}={shown}: durability-risking parameter (rule {durability[0].id}: "
                    f"{durability[0].reason}). Also: {missing}",
                    durability[0].source,
                    durability[0].id,
                )
            else:
                fail("unknown", missing, _SRC_CATALOG, "exists")
            continue

        # 5a. protected, dangerous: never tuned whatever the value or its spelling, so they are decided
        # before parsing ("serialisable" for a protected knob is a semantic change, not a typo).
        if protected:
            fail(
                "protected",
                f"{spec.name}={shown}: protected (rule {protected.id}): {protected.reason}; a "
                "tuner never changes application or benchmark semantics",
                protected.source,
                protected.id,
                _n=spec.name,
            )
            continue
        if dangerous:
            fail(
                "dangerous",
                f"{spec.name}={shown}: dangerous (rule {dangerous.id}): {dangerous.reason}; never changed by the tuner",
                dangerous.source,
                dangerous.id,
                _n=spec.name,
            )
            continue

        # 3./4. type, unit, enum
        try:
            parsed = normalize(family, spec, raw)
        except UnitError as exc:
            hint = _enum_hint(rules, spec.name, shown)
            fail(exc.check, f"{exc}{hint} (rule {exc.check})", _SRC_CATALOG, exc.check)
            continue
        warnings.extend(parsed.warnings)
        value = parsed.canonical
        b = parsed.base_value
        if b is not None and not _in_range(spec, b):
            lo = readable(family, spec, spec.min_value) if spec.min_value is not None else "-inf"
            hi = readable(family, spec, spec.max_value) if spec.max_value is not None else "+inf"
            fail(
                "range",
                f"{spec.name}={shown} ({value}) is outside the allowed range {lo} .. {hi} "
                f"(rule range: server min/max in {spec.unit or 'plain units'})",
                _SRC_CATALOG,
                "range",
                _n=spec.name,
            )
            continue

        # 5. durability (protected and dangerous are decided before the value is parsed, below)
        blocked = False
        for rule in durability:
            if not rule.risky(value):
                continue
            if policy.durability == "relaxed" and rule.allowed_when_relaxed:
                risks.append(
                    f"{spec.name}={value}: {rule.reason} (rule {rule.id}, accepted under durability "
                    f"= relaxed; {rule.source})"
                )
            else:
                why = (
                    "not allowed even under durability = relaxed"
                    if rule.allowed_when_relaxed is False
                    else f"rejected under durability = {policy.durability}"
                )
                fail(
                    "durability",
                    f"{spec.name}={shown}: durability-risking (rule {rule.id}): {rule.reason}; {why}",
                    rule.source,
                    rule.id,
                    _n=spec.name,
                )
                blocked = True
        if blocked:
            continue
        normalized.append(
            NormalizedChange(
                name=spec.name,
                value=value,
                base_value=b,
                unit=spec.unit,
                apply=spec.apply,
                layer=spec.layer,
                previous=cur_index.get(spec.name.lower() if fold else spec.name, spec.default),
            )
        )

    version = catalog.version
    cfg = ResultingConfig(family, catalog, current, normalized, index)
    before = ResultingConfig(family, catalog, current, [], index)
    host_failed, host_warnings = check_host(cfg, before, rules, hardware, policy, flavor, version)
    failed += host_failed
    warnings += host_warnings
    failed += check_conflicts(cfg, rules.conflict, flavor, version)
    failed += _steps(proposal, normalized, before, policy, family, catalog)
    mode, apply_failed, apply_warnings = _apply(proposal, normalized, policy, can_restart, now)
    failed += apply_failed
    warnings += apply_warnings

    verdict = Verdict(
        ok=not failed,
        changes=normalized,
        apply_requirement=mode,
        failed=failed,
        warnings=warnings,
        accepted_risks=risks,
    )
    log.info(
        "validator.decided",
        ok=verdict.ok,
        changes=len(proposal.changes),
        failed=len(failed),
        checks=sorted({f.check for f in failed}),
        apply=mode.value,
        reason="; ".join(f"{f.check}:{f.parameter}" for f in failed) or "all checks passed",
    )
    return verdict


def _match(rules: list[NameRule], name: str) -> NameRule | None:
    # Protection is about what a name means, so it holds on every version of the family (MariaDB 10.11
    # has no transaction_isolation, yet proposing it is still a semantic change and says so).
    return next((r for r in rules if r.matches(name)), None)


def _in_range(spec: KnobSpec, b: float) -> bool:
    return not (
        (spec.min_value is not None and b < spec.min_value) or (spec.max_value is not None and b > spec.max_value)
    )


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


def _steps(
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
        if ratio > f or ratio < 1 / f:
            spec = catalog.knobs[ch.name]
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
                    f"({readable(family, spec, old / f)} .. {readable(family, spec, old * f)})",
                )
            )
    return failed


def _apply(
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


__all__ = ["validate", "in_window", "flavor_of", "OS_PREFIXES", "DurabilityRule"]
