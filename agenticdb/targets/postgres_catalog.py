"""PostgreSQL knob metadata: which ``pg_settings`` rows are tunables, and how a change takes effect.

Exclusions (read-only, unsafe, semantics-changing settings) are data in ``catalogs/postgresql.toml``,
each with a reason and a source; everything else that ``ALTER SYSTEM`` can set is a tunable knob whose
type, unit, range and default come live from the server (PostgreSQL 15 manual, 54.24 pg_settings).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agenticdb.models import ApplyMode, Catalog, KnobSpec
from agenticdb.resources import data_file
from agenticdb.units import quantity
from agenticdb.validation.rules import ConflictRule

# pg_settings.context -> how a change takes effect when written with ALTER SYSTEM.
# Source: PostgreSQL 15 manual, 54.24 pg_settings ("There are several possible values of context").
# 'backend'/'superuser-backend' values apply to sessions started after the reload, which is what a
# benchmark run (fresh connections) sees.
CONTEXT_APPLY: dict[str, ApplyMode] = {"postmaster": ApplyMode.restart} | {
    ctx: ApplyMode.reload for ctx in ("sighup", "superuser-backend", "backend", "superuser", "user")
}


class ExclusionRule(BaseModel):
    """One entry of ``catalogs/postgresql.toml``: exactly one matcher, a reason and a source."""

    model_config = ConfigDict(extra="forbid")
    name: str | None = None
    prefix: str | None = None
    category: str | None = None
    context: str | None = None
    reason: str
    source: str

    @model_validator(mode="after")
    def _one_matcher(self) -> ExclusionRule:
        given = [k for k in ("name", "prefix", "category", "context") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"exclusion rule needs exactly one of name/prefix/category/context, got {given}")
        return self

    def matches(self, name: str, category: str, context: str) -> bool:
        if self.name is not None:
            return self.name.lower() == name.lower()
        if self.prefix is not None:
            return name.lower().startswith(self.prefix.lower())
        if self.category is not None:
            parent = self.category.endswith("/") and category.startswith(self.category)
            return category == self.category or parent
        return context == self.context


class ExclusionRules(BaseModel):
    """The shape of ``catalogs/postgresql.toml``: which pg_settings rows are not tunables, and why."""

    model_config = ConfigDict(extra="forbid")
    keep: list[str] = Field(default_factory=list)
    rule: list[ExclusionRule] = Field(default_factory=list)

    @classmethod
    def load(cls, path: Path | None = None) -> ExclusionRules:
        """Load and validate the rules file (default: the shipped ``catalogs/postgresql.toml``).

        Raises:
            FileNotFoundError: the file is missing.
            pydantic.ValidationError: an entry lacks reason/source, has an unknown key or two matchers.
        """
        path = path or data_file("catalogs", "postgresql.toml")
        with open(path, "rb") as f:
            return cls.model_validate(tomllib.load(f))

    def reason_for(self, name: str, category: str, context: str) -> str | None:
        """Why ``name`` is not a tunable ("<reason> (source: ...)"), or None when it is one.

        Exact-name rules win over contexts, categories and prefixes (in that order).
        """
        if name.lower() in {k.lower() for k in self.keep}:
            return None
        order = {"name": 0, "context": 1, "category": 2, "prefix": 3}
        ranked = sorted(self.rule, key=lambda r: min(order[k] for k in order if getattr(r, k) is not None))
        for rule in ranked:
            if rule.matches(name, category, context):
                return f"{rule.reason} (source: {rule.source})"
        return None


def parse_float(text: str | None) -> float | None:
    return float(text) if text not in (None, "") else None


def build_catalog(rows: list[tuple[Any, ...]], rules: ExclusionRules, kind: str, version: str) -> Catalog:
    """The catalog from ``pg_settings`` rows (name, vartype, unit, min_val, max_val, enumvals, boot_val,
    short_desc, category, context), exclusions from ``rules``.

    ``KnobSpec.unit`` is pg_settings.unit ("8kB", "kB", "MB", "ms", "s", "min" or None); min/max are in
    that unit; ``default`` is boot_val (also in that unit); ``apply`` comes from the context
    (postmaster → restart, everything settable → reload).
    """
    cat = Catalog(target=kind, version=version)
    for name, vartype, unit, min_val, max_val, enumvals, boot_val, desc, category, context in rows:
        reason = rules.reason_for(name, category, context)
        if reason is None and context not in CONTEXT_APPLY:
            reason = f"context {context!r} cannot be set with ALTER SYSTEM (source: 54.24 pg_settings)"
        if reason is not None:
            cat.excluded[name] = reason
            continue
        cat.knobs[name] = KnobSpec(
            name=name,
            vartype=vartype,
            unit=unit,
            min_value=parse_float(min_val),
            max_value=parse_float(max_val),
            enum_values=list(enumvals) if enumvals else None,
            apply=CONTEXT_APPLY[context],
            default=boot_val,
            description=desc or "",
            category=category or "",
            source=f"pg_settings (PostgreSQL {version}), context {context}",
        )
    return cat


def conflict_reads(cat: Catalog, rules: list[ConflictRule]) -> list[str]:
    """Names left out of ``cat`` (``Catalog.excluded``) that a conflict rule reads: archive_command and
    archive_library for ``pg.archive_mode-needs-archiver``. Their values become ``Catalog.facts`` so the
    rule judges a change of archive_mode against them."""
    read = {p for rule in rules for p in rule.params()}
    return sorted(n for n in cat.excluded if n in read)


def setting_facts(rows: list[tuple[Any, ...]]) -> dict[str, float | str]:
    """``Catalog.facts`` from pg_settings rows (name, value, unit, vartype): numbers in dimension-wide units
    (bytes, ms), other values as text. The value of a setting left out of the catalog is its reset_val:
    pg_settings.setting shows archive_command as "(disabled)" while archive_mode is off, whatever is
    configured (PostgreSQL 15 src/backend/utils/misc/guc.c show_archive_command())."""
    facts: dict[str, float | str] = {}
    for name, setting, unit, vartype in rows:
        number = parse_float(setting) if vartype in ("integer", "real") else None
        if number is None:
            facts[name] = setting if setting is not None else ""
            continue
        spec = KnobSpec(name=name, vartype=vartype, unit=unit, apply=ApplyMode.restart)
        facts[name] = quantity("postgresql", spec, number)
    return facts
