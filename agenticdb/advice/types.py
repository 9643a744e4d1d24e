"""The types of advice in one place (``Recommendation`` and the severities are defined in ``recommendation``
and re-exported here): findings, the whole answer, and the parts the
wiring passes in (``app.advice_parts``) so advice never reaches up for the builders of ``app``."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, Field

from agenticdb.advice.recommendation import SEVERITIES as SEVERITIES
from agenticdb.advice.recommendation import Recommendation as Recommendation
from agenticdb.advice.recommendation import Severity as Severity
from agenticdb.config import Settings
from agenticdb.models import RuntimeState
from agenticdb.store.journal import Journal
from agenticdb.store.memory import MemoryBook
from agenticdb.targets.base import Target
from agenticdb.workloads.base import Workload


class Finding(BaseModel):
    """Something a DBA should know that is not a knob change agenticdb would make. ``sql``: statements
    that fix it (root causes, issue 40): runnable ones plain, destructive or blocking ones as ``--``
    comments with their lock impact."""

    id: str
    title: str
    severity: Severity
    evidence: str
    advice: str
    source: str
    sql: list[str] = Field(default_factory=list)


class Advice(BaseModel):
    """The whole answer of ``agenticdb advise``."""

    target: str
    kind: str
    version: str
    generated_at: str
    observed_s: float
    hardware: dict[str, float | int | str | None]
    diagnosis: list[dict[str, object]] = Field(default_factory=list)
    """Scored hypotheses of a busy window; empty when ``idle``."""
    idle: bool = False
    """The server did no work in the window: its host statistics are not evidence, so no diagnosis."""
    recommendations: list[Recommendation] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    root_cause: dict[str, Any] | None = None
    """The root-cause pass of the window (``loop.rootcause_step.record``): dominant, findings, ruled out."""

    def worst(self) -> str | None:
        """The most urgent severity among accepted recommendations and findings (None when empty)."""
        levels = [r.severity for r in self.recommendations if r.verdict == "accept"]
        levels += [f.severity for f in self.findings]
        return max(levels, key=SEVERITIES.index) if levels else None


def stable_id(prefix: str, *parts: str) -> str:
    """``prefix`` + the first 10 hex digits of sha256 over ``parts``: same inputs, same id."""
    return prefix + hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:10]


class LinuxTargetBuilder(Protocol):
    """``app.linux_target``: the Linux host as a target (the data directory picks the data disks)."""

    def __call__(
        self, cfg: Settings, data_dir: str | None = None, state_store: Callable[[str, str], None] | None = None
    ) -> Target: ...  # pragma: no cover - protocol


@dataclass(frozen=True)
class AdviceParts:
    """The builders advice needs, passed in by the wiring (``app.advice_parts()``): advice is below ``app``.

    Attributes:
        build_target: the DBMS target of ``cfg.target``.
        linux_target: the Linux host as a target.
        host_state_source: the host statistics sampler for ``target`` (None when unavailable).
        build_workload: the configured benchmark against the target's database.
        open_stores: the journal and the Memory Book of ``cfg.storage``.
    """

    build_target: Callable[[Settings], Target]
    linux_target: LinuxTargetBuilder
    host_state_source: Callable[[Settings, Target], Callable[[], RuntimeState] | None]
    build_workload: Callable[[Settings, Target], Workload]
    open_stores: Callable[[Settings], tuple[Journal, MemoryBook]]
