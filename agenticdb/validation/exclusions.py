"""Why a knob is left out of tuning or restricted: the one source of every such reason (issue 39).

``catalog --excluded`` and its header, ``setup-role``'s grant list and the PostgreSQL target's check of
the role's ``ALTER SYSTEM`` privileges all ask this module, so a knob is never given two different
reasons. The strongest reason wins, in :data:`RANK` order: a validator rule that never allows the knob
(dangerous, protected, durability with its rule id) beats the catalog file's "not a performance knob",
which beats a missing privilege, which beats "unsupported".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agenticdb.validation.rules import DurabilityRule, RuleSet, rules_for

RANK = ("dangerous", "protected", "durability", "excluded", "unprivileged", "unsupported")
"""Statuses, strongest first (a judgement: a safety rule explains more than "not a knob")."""


@dataclass(frozen=True)
class LeftOut:
    """Why one knob is excluded or restricted.

    Attributes:
        status: its first word is one of :data:`RANK` ("protected: never tuned", "durability: off never
            set (any durability policy)", "excluded", "unprivileged", "unsupported").
        reason: the sentence with its rule id and source.
        restricted: True when the knob stays in the catalog and only some values are refused (a
            durability rule under the current policy); False when it is never tuned.
    """

    status: str
    reason: str
    restricted: bool = False

    @property
    def rank(self) -> int:
        """Position of the status in :data:`RANK` (0 = strongest)."""
        return RANK.index(self.status.split(":")[0])


def _durability_text(rule: DurabilityRule, durability: str) -> str:
    vals = (
        ", ".join(map(str, rule.unsafe))
        if rule.unsafe is not None
        else "anything but " + ", ".join(map(str, rule.safe or []))
    )
    if not rule.allowed_when_relaxed:
        return f"{vals} never set (any durability policy)"
    return f"{vals} " + ("rejected under strict" if durability == "strict" else "accepted as a risk (relaxed)")


def policy_of(rules: RuleSet, flavor: str, version: str, name: str, durability: str) -> LeftOut | None:
    """The validator's policy for ``name``: protected/dangerous names are never tuned; durability rules
    refuse some values (always, or unless ``policy.durability = relaxed`` and the rule allows it).

    Args:
        rules: the family's rule set (``validators/<family>.toml``).
        flavor: "postgresql" | "mariadb" | "mysql" | "linux" (version specifiers in rules).
        version: the server version ("15.20").
        name: a catalog name (any case for DBMS names).
        durability: ``policy.durability`` ("strict" | "relaxed").

    Returns:
        None for an ordinary knob.
    """
    for kind, group in (("dangerous", rules.dangerous), ("protected", rules.protected)):
        r = next((r for r in rules_for(group, name) if r.applies(flavor, version)), None)
        if r is not None:
            return LeftOut(f"{kind}: never tuned", f"{r.reason} (rule {r.id}; {r.source})")
    dur = [r for r in rules_for(rules.durability, name) if r.applies(flavor, version)]
    if not dur:
        return None
    status = "durability: " + "; ".join(_durability_text(r, durability) for r in dur)
    reason = " / ".join(f"{r.reason} (rule {r.id}; {r.source})" for r in dur)
    return LeftOut(status, reason, restricted=True)


def never_tuned(rules: RuleSet, flavor: str, version: str, name: str, durability: str) -> bool:
    """True when the validator never lets agenticdb change ``name`` under ``durability``: a protected or
    dangerous rule, or a durability rule not relaxed by ``policy.durability = "relaxed"``. ``setup-role``
    grants ``ALTER SYSTEM`` on every catalog knob except these (a grant on ``fsync`` would let the role
    do what agenticdb itself refuses)."""
    groups = [*rules_for(rules.protected, name), *rules_for(rules.dangerous, name)]
    if any(r.applies(flavor, version) for r in groups):
        return True
    relaxed = durability == "relaxed"
    return any(
        r.applies(flavor, version) and not (relaxed and r.allowed_when_relaxed)
        for r in rules_for(rules.durability, name)
    )


def denied_reason(rules: RuleSet, flavor: str, version: str, name: str, user: str) -> LeftOut:
    """Why the role ``user`` lacks ``ALTER SYSTEM`` on ``name`` (PostgreSQL 15+): the validator rule that
    made ``setup-role`` leave it out (under ``policy.durability = "strict"``, the default), or — when
    no rule does — a real privilege gap that re-running ``setup-role --apply`` closes."""
    pol = policy_of(rules, flavor, version, name, "strict")
    if pol is not None and never_tuned(rules, flavor, version, name, "strict"):
        grants = (
            "setup-role grants it only under policy.durability = relaxed"
            if not never_tuned(rules, flavor, version, name, "relaxed")
            else "setup-role never grants it"
        )
        return LeftOut(pol.status, f"{_DENIED} (role {user!r}): {grants}")
    return LeftOut(
        "unprivileged",
        f"{_DENIED} (role {user!r}) although no validator rule forbids it: `agenticdb setup-role --apply` "
        "grants ALTER SYSTEM on every tunable knob (a role made by hand or before this knob was tunable "
        "lacks it)",
    )


_DENIED = "no ALTER SYSTEM privilege"


def left_out(
    knobs: Mapping[str, object],
    excluded: Mapping[str, str],
    unsupported: Mapping[str, str],
    rules: RuleSet,
    flavor: str,
    version: str,
    durability: str,
) -> dict[str, LeftOut]:
    """Every name that is excluded, unsupported or restricted by policy, with its strongest reason.

    Args:
        knobs: the catalog's tunable names (a knob with a durability rule stays tunable, restricted).
        excluded: name → reason from the catalog file or the privilege check (``Catalog.excluded``);
            a reason from :func:`denied_reason` is status "unprivileged" unless a rule explains it.
        unsupported: name → reason (``Catalog.unsupported``).
        rules, flavor, version, durability: as in :func:`policy_of`.

    Returns:
        name → :class:`LeftOut`, one entry per name.
    """
    out: dict[str, LeftOut] = {}

    def put(name: str, item: LeftOut) -> None:
        old = out.get(name)
        if old is None or item.rank < old.rank:
            out[name] = item

    for name, reason in unsupported.items():
        put(name, LeftOut("unsupported", reason))
    for name, reason in excluded.items():
        put(name, LeftOut("unprivileged" if reason.startswith(_DENIED) else "excluded", reason))
    for name in [*knobs, *excluded]:
        pol = policy_of(rules, flavor, version, name, durability)
        if pol is None:
            continue
        if name in knobs:
            put(name, pol)
        else:  # the rule is why it is not in the catalog (setup-role did not grant it): say both
            put(name, LeftOut(pol.status, f"{pol.reason}; not in the catalog: {excluded[name]}"))
    return out
