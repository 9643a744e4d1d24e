"""One recommendation of ``agenticdb advise`` (issue 16) and the severity scale; shared by the advisor
(:mod:`agenticdb.advice.advise`) and its sizing (:mod:`agenticdb.advice.sizing`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from agenticdb.models import ApplyMode, Layer

Severity = Literal["info", "low", "medium", "high", "critical"]
SEVERITIES: tuple[str, ...] = ("info", "low", "medium", "high", "critical")
"""Severities from least to most urgent (``--fail-on`` compares by this order)."""


class Recommendation(BaseModel):
    """One knob change to consider. Values in the server's spelling (``units.format_value``).

    ``verdict`` is the validator's ("accept" or "reject" with ``verdict_detail``); ``confidence`` is
    "measured" | "experience" | "diagnosis" | "rule" with ``confidence_origin`` saying what it rests on.
    """

    id: str
    knob: str
    layer: Layer
    current: str | None
    recommended: str
    apply: ApplyMode
    bottleneck: str
    rule: str
    reason: str
    source: str
    effect: str = ""
    risk: str = ""
    evidence: list[str] = Field(default_factory=list)
    severity: Severity = "low"
    confidence: Literal["measured", "experience", "diagnosis", "rule"] = "rule"
    confidence_origin: str = ""
    verdict: Literal["accept", "reject"] = "accept"
    verdict_detail: str = ""
    option_file: bool | None = None
    """MySQL/MariaDB: False when the server accepts the variable only at run time (``SET GLOBAL``), so
    it must not be written to an option file (the next start would abort); None when not applicable."""
