"""Special values that stand for another one (``[[auto_value]]`` rules): say what they mean, and what the
server will report, so that verification compares with the value the server computes.

PostgreSQL 15 manual 20.5.1: "The default setting of -1 selects a size equal to 1/32nd (about 3%) of
shared_buffers, but not less than 64kB nor more than the size of one WAL segment" (wal_buffers) — the
server then reports the computed size, and a verification against -1 fails although the change worked.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import structlog

from agenticdb.models import NormalizedChange
from agenticdb.units import quantity, readable
from agenticdb.validation.resulting import ResultingConfig
from agenticdb.validation.rules import AutoValue, rules_for

log = structlog.get_logger(__name__)


def _is_special(ch: NormalizedChange, rule: AutoValue) -> bool:
    if isinstance(rule.value, int | float) and not isinstance(rule.value, bool):
        return ch.base_value is not None and ch.base_value == float(rule.value)
    return ch.value.strip().lower() == str(rule.value).strip().lower()


def _bound(cfg: ResultingConfig, name: str, bound: str | int | float | None) -> float | None:
    """A bound as a quantity (bytes, ms): a parameter or fact name, else a literal in ``name``'s spelling."""
    if bound is None:
        return None
    if isinstance(bound, str) and (cfg.spec(bound) is not None or cfg.fact(bound) is not None):
        got = cfg.operand(bound)
    else:
        got = cfg.literal(name, bound)
    return got if isinstance(got, float) else None


def computed_base(cfg: ResultingConfig, rule: AutoValue, name: str) -> float | None:
    """The base-unit value the server computes for ``name`` under ``rule`` on the resulting configuration
    (``factor`` × ``of``, clamped to ``at_least`` .. ``at_most``, rounded down to the base unit); None when
    the rule computes nothing or an input is unknown here."""
    spec = cfg.spec(name)
    if rule.of is None or spec is None:
        return None
    of = cfg.operand(rule.of)
    if not isinstance(of, float):
        return None
    q = of * rule.factor
    lo, hi = _bound(cfg, name, rule.at_least), _bound(cfg, name, rule.at_most)
    if hi is not None:
        q = min(q, hi)
    if lo is not None:
        q = max(q, lo)
    per_unit = quantity(cfg.family, spec, 1.0)
    return float(math.floor(q / per_unit + 1e-9))


def resolve_auto(
    cfg: ResultingConfig, changes: list[NormalizedChange], rules: Iterable[AutoValue], flavor: str, version: str
) -> tuple[list[NormalizedChange], list[str]]:
    """``changes`` with ``expected_base`` set where a special value makes the server compute the value it
    reports, and one warning per special value saying what it means on this configuration.

    Args:
        cfg: the resulting configuration (the change set merged over the current values).
        changes: the normalised changes, in order.
        rules: ``[[auto_value]]`` rules of the family; those not applying to ``flavor``/``version`` are skipped.

    Returns:
        (changes, warnings): the same changes (copies where ``expected_base`` was set), and warnings such as
        "wal_buffers=-1 means auto: ... here the server will use 2MB (shared_buffers=64MB); verified against 2MB".
    """
    applicable = [r for r in rules if r.applies(flavor, version)]
    out: list[NormalizedChange] = []
    warnings: list[str] = []
    for ch in changes:
        rule = next((r for r in rules_for(applicable, ch.name) if _is_special(ch, r)), None)
        if rule is None:
            out.append(ch)
            continue
        spec = cfg.spec(ch.name)
        expected = computed_base(cfg, rule, ch.name)
        if expected is not None and spec is not None and rule.of is not None:
            shown = readable(cfg.family, spec, expected)
            note = (
                f"here the server will use {shown} ({rule.of}={cfg.shown(rule.of)}) and reports that value; "
                f"verified against {shown}"
            )
            ch = ch.model_copy(update={"expected_base": expected})
        elif rule.uses:
            note = f"the server reports {ch.value} and uses {rule.uses} (now {cfg.shown(rule.uses)}) where it acts"
        else:
            note = "the server reports it as given"
        warnings.append(f"{ch.name}={ch.value} means {rule.meaning} (rule {rule.id}; {rule.source}): {note}")
        log.info("validator.auto_value", parameter=ch.name, value=ch.value, rule=rule.id, expected=expected)
        out.append(ch)
    return out, warnings
