"""Experience: how a finished session is distilled into reusable knowledge, and how stored experience is
ranked for a new tuning problem (docs/architecture.md "Memory"; issue 6 "Experience memory").

Experience is retrieved by :func:`similarity` of fingerprints, a weighted sum in [0, 1]:

=====================  ======  =============================================================
component              weight  score
=====================  ======  =============================================================
DBMS family            gate    different family (PostgreSQL vs MySQL/MariaDB) → similarity 0,
                               because knob names do not carry over between families
product + major ver.   0.15    same product and major 1.0; same product other major 0.5;
                               MySQL vs MariaDB 0.25
workload class         0.25    same 1.0; oltp/olap vs mixed 0.5; oltp vs olap 0.0
read/write mix         0.15    1 − |read_fraction_a − read_fraction_b|
access pattern         0.10    same (case-insensitive) 1.0, else 0.0
scale bucket           0.15    bucket = floor(log2(scale)); 1 − |Δbucket| / 4, floor 0
concurrency bucket     0.10    bucket = floor(log2(clients)); 1 − |Δbucket| / 3, floor 0
objective              0.10    same 1.0, else 0.0
=====================  ======  =============================================================

With every other field equal, a same-class fingerprint scores 0.25 above an oltp/olap one, so it
always ranks first; the default threshold 0.6 drops experience that differs in class *and* in mix or
scale. The weights are this project's choice (no published source); they favour what decides which
knobs matter: the workload class and the data size relative to memory (docs/measurement.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from agenticdb.dialect import family_of, memory_family
from agenticdb.models import Catalog, Hardware, RoundOutcome
from agenticdb.models.planning import Experience, Fingerprint
from agenticdb.units import UnitError, bytes_of, normalize

WEIGHTS: dict[str, float] = {
    "version": 0.15,
    "workload_class": 0.25,
    "read_fraction": 0.15,
    "access_pattern": 0.10,
    "scale": 0.15,
    "concurrency": 0.10,
    "objective": 0.10,
}
"""Similarity weights per fingerprint component (sum 1.0), see the module docstring."""


def dbms_family(dbms: str) -> str:
    """``postgresql`` or ``mysql`` (MariaDB counts as the MySQL family); unknown names map to themselves."""
    return memory_family(dbms)


def _bucket(value: float) -> int:
    return math.floor(math.log2(max(value, 1.0)))


def similarity(a: Fingerprint, b: Fingerprint) -> float:
    """Similarity of two tuning problems in [0, 1] (1 = same); weights in the module docstring.

    Pure function of the two fingerprints. Different DBMS families score 0.
    """
    if dbms_family(a.dbms) != dbms_family(b.dbms):
        return 0.0
    same_product = a.dbms.strip().lower() == b.dbms.strip().lower()
    if same_product:
        version = 1.0 if a.version_major.strip() == b.version_major.strip() else 0.5
    else:
        version = 0.25
    if a.workload_class == b.workload_class:
        wclass = 1.0
    elif "mixed" in (a.workload_class, b.workload_class):
        wclass = 0.5
    else:
        wclass = 0.0
    parts = {
        "version": version,
        "workload_class": wclass,
        "read_fraction": 1.0 - min(abs(a.read_fraction - b.read_fraction), 1.0),
        "access_pattern": 1.0 if a.access_pattern.lower() == b.access_pattern.lower() else 0.0,
        "scale": max(0.0, 1.0 - abs(_bucket(a.scale) - _bucket(b.scale)) / 4),
        "concurrency": max(0.0, 1.0 - abs(_bucket(a.concurrency) - _bucket(b.concurrency)) / 3),
        "objective": 1.0 if a.objective == b.objective else 0.0,
    }
    return round(sum(WEIGHTS[k] * v for k, v in parts.items()), 6)


# ---------------------------------------------------------------------------------- distillation


def relative_values(
    best: dict[str, str], catalogs: Sequence[Catalog], hardware: Hardware
) -> dict[str, dict[str, float | str]]:
    """Best values as they transfer to another host: ``{name: {"value": v, "fraction_of_memory": f}}``,
    the fraction (of ``hardware.memory_limit_bytes``) given for memory sizes only."""
    out: dict[str, dict[str, float | str]] = {}
    for name, value in best.items():
        out[name] = {"value": value}
        for cat in catalogs:
            spec = cat.get(name)
            if spec is None:
                continue
            family = family_of(cat.target)
            try:
                parsed = normalize(family, spec, value)
            except (UnitError, ValueError):
                break
            nbytes = bytes_of(family, spec, parsed.base_value) if parsed.base_value is not None else None
            if nbytes and hardware.memory_limit_bytes:
                out[name]["fraction_of_memory"] = round(nbytes / hardware.memory_limit_bytes, 6)
            break
    return out


def _lessons(rounds: Sequence[RoundOutcome]) -> dict[str, list[dict[str, object]]]:
    """Each round's changes filed as beneficial (kept), ineffective (measured worse beyond the noise),
    inconclusive (a tie: may be tried again) or failed (failed or rejected), each with the gain the round measured
    (``RoundOutcome.counted_gain``; None when it counted none)."""
    out: dict[str, list[dict[str, object]]] = {"beneficial": [], "ineffective": [], "inconclusive": [], "failed": []}
    for r in rounds:
        item: dict[str, object] = {
            "changes": r.changes,
            "bottleneck": r.bottleneck.value,
            "stage": r.stage.value,
            "gain": r.counted_gain,  # None: no gain counted (a lone disturbed or cut-off run)
        }
        if r.failure is not None or (r.proposal is not None and r.changes and not r.verdict_ok):
            phase = r.failure.phase if r.failure else "validate"
            out["failed"].append({**item, "phase": phase, "why": r.failure.message if r.failure else "rejected"})
        elif r.kept:
            out["beneficial"].append(item)
        elif r.judged == "worse":
            out["ineffective"].append(item)
        elif r.measurement is not None:
            out["inconclusive"].append(item)
    return out


def distill_experience(
    session_id: str,
    fp: Fingerprint,
    rounds: Sequence[RoundOutcome],
    best: dict[str, str],
    relative: dict[str, dict[str, float | str]],
    best_gain: float,
) -> Experience:
    """The Experience of a finished session: lessons per round, recurring bottlenecks (most frequent
    first, "unknown" left out), the best configuration absolute and host-relative, and its gain over the
    baseline (relative, positive = better)."""
    counts: dict[str, int] = {}
    for r in rounds:
        counts[r.bottleneck.value] = counts.get(r.bottleneck.value, 0) + 1
    lessons = _lessons(rounds)
    return Experience(
        fingerprint=fp,
        session_id=session_id,
        recurring_bottlenecks=[b for b, n in sorted(counts.items(), key=lambda kv: -kv[1]) if b != "unknown"],
        beneficial=lessons["beneficial"],
        ineffective=lessons["ineffective"],
        inconclusive=lessons["inconclusive"],
        failed=lessons["failed"],
        best_config=best,
        best_config_relative=relative,
        best_gain=best_gain,
    )


def drop_lessons(exp: Experience, match: str) -> tuple[Experience, list[dict[str, Any]]]:
    """``exp`` without the failed lessons whose phase or reason contains ``match`` (case-insensitive),
    and the lessons dropped (issue 38: a round an outside restart interrupted was once recorded failed;
    such a lesson is removed alone, the rest of the experience row stays).

    Raises:
        ValueError: ``match`` is empty (it would drop every failed lesson).
    """
    needle = match.strip().lower()
    if not needle:
        raise ValueError("forget --lessons: give a phase or a part of the reason (empty would drop every lesson)")
    kept: list[dict[str, Any]] = []
    dropped: list[dict[str, Any]] = []
    for lesson in exp.failed:
        text = f"{lesson.get('phase', '')}\n{lesson.get('why', '')}".lower()
        (dropped if needle in text else kept).append(lesson)
    return exp.model_copy(update={"failed": kept}), dropped
