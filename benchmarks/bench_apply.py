"""Apply a benchmark's configuration through the product's validator and executor (shared by
``bench_auditor``'s OLTP and query-set modes, so neither imports the other)."""

from __future__ import annotations

from typing import Any

from agenticdb.config import Settings
from agenticdb.host.hardware import detect_hardware
from agenticdb.loop.executor import Executor
from agenticdb.models import ApplyMode, Bottleneck, Change, Layer, Proposal
from agenticdb.targets.base import Target
from agenticdb.validation.validator import validate


def apply_values(target: Target, executor: Executor, values: dict[str, str], cfg: Settings, label: str) -> list[Any]:
    """Validate and apply ``values`` through the product's validator and executor; returns the changes."""
    catalog = target.catalog()
    proposal = Proposal(
        bottleneck=Bottleneck.wal_fsync,
        changes=[Change(name=k, value=v) for k, v in values.items()],
        rationale=label,
        planner="bench",
    )
    current = target.current_values(list(catalog.knobs))
    verdict = validate(
        proposal, catalog, current, detect_hardware(target.data_dir), cfg.policy, Layer.dbms, can_restart=True
    )
    if not verdict.ok:
        raise SystemExit(f"bench: the validator refused {values}: {verdict.feedback()}")
    safe = target.snapshot(list(catalog.knobs), label="before " + label)
    executor.apply(verdict.changes, ApplyMode.strongest([c.apply for c in verdict.changes]), 0, safe, purpose=label)
    return verdict.changes
