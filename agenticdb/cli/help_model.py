"""Command-line help generated from the configuration model (issue 39): an option that overrides a
configuration key shows that key's description, its default and its allowed values, read from the
pydantic models of :mod:`agenticdb.config` — the same source the configuration file is checked against,
so ``--help`` cannot drift from what the option does."""

from __future__ import annotations

from typing import Any, Literal, get_args, get_origin

from pydantic.fields import FieldInfo

from agenticdb.config import Settings

PROPOSAL_HELP = (
    "proposal id, or the finding id (RC…) of the one pending remedy that carries it (a unique prefix is enough)"
)
"""``approve`` / ``reject``'s argument (``agenticdb.advice.approval``: a remedy's proposal names its finding)."""
TARGET_HELP = (
    "the database server to work on, as a DSN: postgresql://USER@HOST:PORT/DB (or libpq 'host=H dbname=D') or "
    "mysql://USER@HOST:PORT/DB for MariaDB/MySQL; it overrides target.dsn of --config (--sandbox instead "
    "picks a private instance)"
)
"""``--target``'s help: which values it takes (the DSN forms ``cli.settings`` tells apart: a libpq URI or keyword
string is PostgreSQL, ``mysql://`` MariaDB/MySQL) and what it does, in one sentence."""

PER_KIND = frozenset(
    {"workload.scale", "workload.clients", "workload.duration_s", "workload.warmup_max_s", "workload.objective"}
)
"""Keys whose default follows ``workload.kind`` (``KindSpec.first_run`` in ``agenticdb.workload_kinds.KINDS``)."""


def field_of(path: str) -> FieldInfo:
    """The model field of a dotted configuration key ("loop.max_rounds").

    Raises:
        KeyError: no such section or key.
    """
    section, key = path.split(".", 1)
    model: Any = Settings.model_fields[section].annotation
    return model.model_fields[key]  # type: ignore[no-any-return]


def choices(annotation: Any) -> list[str]:
    """The allowed values of a ``Literal`` (or ``Literal | None``) annotation, else []."""
    if get_origin(annotation) is Literal:
        return [str(a) for a in get_args(annotation)]
    for arg in get_args(annotation):
        if get_origin(arg) is Literal:
            return [str(a) for a in get_args(arg)]
    return []


def _default(path: str, field: FieldInfo) -> str:
    if path in PER_KIND:
        return "per workload kind (README 'Per-workload defaults')"
    value = field.get_default(call_default_factory=True)
    if value is None:  # what unset means, when the field says ("unset" in its json_schema_extra)
        extra = field.json_schema_extra
        return str(extra.get("unset") or "none") if isinstance(extra, dict) else "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    return f"{value:g}" if isinstance(value, float) else str(value)


def config_help(path: str, text: str | None = None) -> str:
    """Help of the option overriding ``path``: ``text`` (else the field's description), the allowed values
    of a Literal, then ``(default: <value>; config <path>)``.

    Args:
        path: dotted configuration key ("workload.kind", "loop.latency_guard").
        text: the option's words when the field has no description (or a shorter one is wanted).

    Raises:
        KeyError: ``path`` is not a configuration key.
    """
    field = field_of(path)
    words = text or field.description or path
    allowed = choices(field.annotation)
    if allowed and "|" not in words:
        words += ": " + " | ".join(allowed)
    # parentheses, not brackets: typer's rich help would read "[config …]" as markup and drop it
    return f"{words} (default: {_default(path, field)}; config {path})"
